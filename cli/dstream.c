/* dstream: the command-line tool. Every command is a line of the table below and
 * one of cli/usage.c: its name, the options it takes (anything else beginning with '-' is a usage error,
 * exit 2), its usage (`dstream COMMAND --help` prints it on stdout, exit 0; a wrong
 * command line prints it on stderr, exit 2), those three in cli/usage.c; and the
 * function that runs it, kept in cli/cmd_GROUP.c for all but the smallest. --json, taken
 * by every command, is noted (cli_json) for the command to print JSON, one
 * document a line. docs/cli.md and deploy/man/dstream.1 describe every command
 * (tests/http/25-cli-surface.bats checks both against this table). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../lib/buf.h"
#include "../lib/env.h"
#include "../lib/timefmt.h"
#include "../lib/log.h"
#include "../lib/wake.h"
#include "cli.h"
#include "http.h"

static int cmd_free_port(int argc, char **argv)
{
    if (argc > 1) return cli_usage("free-port");
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    if (inet_pton(AF_INET, argc > 0 ? argv[0] : "127.0.0.1", &a.sin_addr) != 1) {
        fprintf(stderr, "dstream: bad IPv4 address\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &len)) {
        perror("dstream: free-port");
        return 1;
    }
    if (cli_json) printf("{\"port\":%d}\n", ntohs(a.sin_port));
    else printf("%d\n", ntohs(a.sin_port));
    close(fd);
    return 0;
}

static int cmd_append(log_t *log, int argc, char **argv)
{
    char err[256];
    if (argc != 1) return cli_usage("append");
    log_conn_t *c = log_conn_open(log, err, sizeof err);
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        return 1;
    }
    buf_t b;
    buf_init(&b, 64 << 20);
    char tmp[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(tmp, 1, sizeof tmp, stdin)) > 0)
        if (buf_append(&b, tmp, n)) {
            fprintf(stderr, "dstream: input too large\n");
            rc = 1;
            goto out;
        }
    log_msg m = {b.p ? b.p : "", b.len};
    log_append_req ar;
    memset(&ar, 0, sizeof ar);
    ar.path = argv[0];
    ar.msgs = &m;
    ar.nmsgs = 1;
    int lrc = log_append(c, &ar);
    if (lrc) {
        fprintf(stderr, "dstream: append to %s: %s\n", argv[0], errs_str(lrc));
        rc = 1;
        goto out;
    }
    char off[OFFSET_LEN + 1];
    offset_format(ar.info.tail, off);
    printf(cli_json ? "{\"offset\":\"%s\"}\n" : "%s\n", off);
out:
    buf_free(&b);
    log_conn_close(c);
    return rc;
}

/* One message, then a newline (JSON streams: one value a line); with --json
 * {"offset": the offset after it, "message": its JSON value, or its text}. */
static int print_msg(void *ud, const void *data, size_t len, offset_t at)
{
    const log_read_req *rr = ud;
    if (cli_json) {
        char off[OFFSET_LEN + 1];
        offset_format(at, off);
        json_t *m = rr->info.json ? json_loadb(data, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
        if (!m) m = json_stringn_nocheck(data, len);
        json_t *j = json_pack("{s:s, s:o}", "offset", off, "message", m);
        char *d = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        json_decref(j);
        int ok = d && puts(d) != EOF;
        free(d);
        return ok ? 0 : ERRS_CALLBACK;
    }
    return fwrite(data, 1, len, stdout) == len && putchar('\n') != EOF ? 0 : ERRS_CALLBACK;
}

static int cmd_tail(log_t *log, const char *db, int argc, char **argv)
{
    char err[256];
    int follow = 1, rc = 0;
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.kind = OFFSET_START;
    for (; argc > 1; argc--, argv++) {
        if (strcmp(argv[0], "--no-follow") == 0) {
            follow = 0;
        } else if (strcmp(argv[0], "--from") == 0 && argc > 2) {
            if (offset_parse(argv[1], strlen(argv[1]), &rr.kind, &rr.from)) {
                fprintf(stderr, "dstream: --from: -1, now, or an offset the server returned\n");
                return 2;
            }
            argc--, argv++;
        } else {
            break;
        }
    }
    if (argc != 1) return cli_usage("tail");
    rr.path = argv[0];
    log_conn_t *c = log_conn_open(log, err, sizeof err);
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        return 1;
    }
    struct sigaction old[2];
    cli_catch_stop(old);
    err[0] = 0;
    int lrc = wake_follow(log, c, &rr, print_msg, cli_flush_stdout, &rr, follow, &cli_stop, err, sizeof err);
    cli_restore_stop(old);
    if (lrc) {
        fprintf(stderr, "dstream: %s: %s\n", rr.path,
                err[0] ? err : lrc == ERRS_CALLBACK ? "cannot write" : errs_str(lrc));
        rc = 1;
    }
    log_conn_close(c);
    return rc;
}

static int cmd_migrate(log_t *log, int argc, char **argv)
{
    (void)argv;
    if (argc) return cli_usage("migrate");
    printf(cli_json ? "{\"schemaVersion\":%d}\n" : "schema version %d\n", log_schema_version(log));
    return 0;
}

static int cmd_tail_db(log_t *log, int argc, char **argv) { return cmd_tail(log, cli_dbpath, argc, argv); }
static int cmd_help(int argc, char **argv);

/* How a command is run: fn_args with its arguments; fn_db with the database's
 * path as well; fn_log on the database opened (migrated) for it. Its options and
 * usage are in cli/usage.c, under the same name. */
typedef struct {
    const char *name;
    int (*fn_args)(int argc, char **argv);
    int (*fn_db)(const char *db, int argc, char **argv);
    int (*fn_log)(log_t *log, int argc, char **argv);
    int reads;  /* only reads the database: it must exist (a mistyped --db is not made a new one) */
    /* Works both ways (docs/cli.md): over HTTP by default, this; with --db, the
     * above on the database (the offline mode). */
    int (*fn_http)(int argc, char **argv);
} command;

static int cmd_streams_http(int argc, char **argv) { return cmd_streams(NULL, argc, argv); }

static const command commands[] = {
    {"migrate", NULL, NULL, cmd_migrate, 0, NULL},
    {"append", NULL, NULL, cmd_append, 0, cmd_append_http},
    {"tail", NULL, NULL, cmd_tail_db, 1, cmd_tail_http},
    {"token", NULL, NULL, cmd_token, 0, NULL},
    {"free-port", cmd_free_port, NULL, NULL, 0, NULL},
    {"backup", NULL, cmd_backup, NULL, 0, NULL},
    {"restore", NULL, cmd_restore, NULL, 0, NULL},
    {"check", NULL, cmd_check, NULL, 0, NULL},
    {"copy", NULL, cmd_copy, NULL, 0, NULL},
    {"skills", NULL, cmd_skills, NULL, 1, NULL},
    {"providers", cmd_providers, NULL, NULL, 0, NULL},
    {"mcp", cmd_mcp, NULL, NULL, 0, NULL},
    {"recordings", NULL, NULL, cmd_recordings, 0, NULL},
    {"gc", NULL, NULL, cmd_gc, 1, NULL},
    {"session", NULL, cmd_session, NULL, 1, NULL},
    {"sessions", NULL, cmd_sessions, NULL, 0, cmd_sessions_http},
    {"chat", cmd_chat, NULL, NULL, 0, NULL},
    {"cancel", cmd_cancel, NULL, NULL, 0, NULL},
    {"answer", cmd_answer, NULL, NULL, 0, NULL},
    {"events", cmd_events, NULL, NULL, 0, cmd_events},
    {"convo", cmd_convo, NULL, NULL, 0, cmd_convo},
    {"requests", cmd_requests, NULL, NULL, 0, cmd_requests},
    {"export", cmd_export, NULL, NULL, 0, cmd_export},
    {"otlp", cmd_otlp, NULL, NULL, 0, cmd_otlp},
    {"search", cmd_search, NULL, NULL, 0, cmd_search},
    {"lineage", cmd_lineage, NULL, NULL, 0, cmd_lineage},
    {"diff", cmd_diff, NULL, NULL, 0, cmd_diff},
    {"streams", NULL, cmd_streams, NULL, 0, cmd_streams_http},
    {"help", cmd_help, NULL, NULL, 0, NULL},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const command *find(const char *name)
{
    for (size_t k = 0; k < NCOMMANDS; k++)
        if (!strcmp(commands[k].name, name)) return &commands[k];
    return NULL;
}

static int cmd_help(int argc, char **argv)
{
    const cli_doc *d = argc == 1 ? cli_doc_find(argv[0]) : NULL;
    if (argc > 1 || (argc == 1 && !d)) return cli_usage("help");
    if (d) fputs(d->usage, stdout);
    else cli_usage_all(stdout);
    return 0;
}

/* opt (up to '=' if any) among c's options? *value set when it takes one. */
static int known_option(const cli_doc *c, const char *opt, int *value)
{
    size_t n = strlen(opt);
    for (const char *p = c->options; (p = strstr(p, opt)); p += n)
        if (p[-1] == ' ' && (p[n] == ' ' || p[n] == '=')) {
            *value = p[n] == '=';
            return 1;
        }
    return 0;
}

/* Check c's arguments, take out --json (cli_json) and "--" (after which nothing is
 * an option). Returns the new argc, -1 for --help, -2 for an option c does not take
 * (printed). */
static int check_args(const cli_doc *c, int argc, char **argv)
{
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int value = 0;
        if (!strcmp(a, "--")) {
            /* The end of the options: what follows is arguments (a message "-x"). */
            while (++i < argc) argv[n++] = argv[i];
            break;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return -1;
        if (!strcmp(a, "--json")) {
            cli_json = 1;
            continue;
        }
        argv[n++] = argv[i];
        /* "-" (standard input or output) and negative numbers are arguments. */
        if (a[0] != '-' || !a[1] || (a[1] >= '0' && a[1] <= '9')) continue;
        if (!known_option(c, a, &value)) {
            fprintf(stderr, "dstream %s: unknown option %s\n", c->name, a);
            return -2;
        }
        if (value && i + 1 < argc) argv[n++] = argv[++i];
    }
    return n;
}

/* 0 if the database db exists, else 1 (printed). A server's database (a URI) is
 * found by opening it: log_open says when it is not there. */
static int missing(const char *db)
{
    if (log_target_is_uri(db) || !access(db, F_OK)) return 0;
    fprintf(stderr, "dstream: %s: no such database (dstream --db %s migrate creates one)\n", db, db);
    return 1;
}

int main(int argc, char **argv)
{
    int db_given = 0;
    const char *db = env_str("DSTREAM_DB", "dstream.db");
    int i = 1;
    /* --db [TARGET] for the commands on the database (a command's name next: the
     * default database); --url and --token for those over HTTP. */
    for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
        if (!strcmp(argv[i], "--json")) {
            cli_json = 1;
            continue;
        }
        if (!strcmp(argv[i], "--help")) break;
        if (!strcmp(argv[i], "--db") && (i + 1 >= argc || find(argv[i + 1]))) {
            db_given = 1;
            continue;
        }
        if (!strncmp(argv[i], "--db=", 5) && argv[i][5]) {
            db = argv[i] + 5;
            db_given = 1;
            continue;
        }
        if (i + 1 >= argc) break;
        if (strcmp(argv[i], "--db") == 0) {
            db = argv[i + 1];
            db_given = 1;
        } else if (strcmp(argv[i], "--url") == 0) {
            setenv("DSTREAM_URL", argv[i + 1], 1);
        } else if (strcmp(argv[i], "--token") == 0) {
            setenv("DSTREAM_TOKEN", argv[i + 1], 1);
        } else {
            break;
        }
        i++;
    }
    cli_dbpath = db;
    if (db_given) cli_db = db;
    if (i < argc && (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))) {
        cli_usage_all(stdout);
        return 0;
    }
    const command *c = i < argc ? find(argv[i]) : NULL;
    const cli_doc *d = c ? cli_doc_find(c->name) : NULL;
    if (!c || !d) {
        if (i < argc) fprintf(stderr, "dstream: no command %s\n", argv[i]);
        cli_usage_all(stderr);
        return EXIT_USAGE;
    }
    i++;
    int n = check_args(d, argc - i, argv + i);
    if (n == -1) {
        fputs(d->usage, stdout);
        return 0;
    }
    if (n < 0) {
        fputs(d->usage, stderr);
        return EXIT_USAGE;
    }
    argv += i;
    /* Over HTTP: $DSTREAM_URL (or http://127.0.0.1:8080) with $DSTREAM_TOKEN. */
    if (c->fn_http && !db_given) return c->fn_http(n, argv);
    if (!strcmp(c->name, "sessions")) {
        /* --db: list, show and state read the database. */
        if (missing(db)) return EXIT_FAIL;
        if (n && (!strcmp(argv[0], "show") || !strcmp(argv[0], "state"))) return cmd_sessions_http(n, argv);
        return cmd_sessions(db, n, argv);
    }
    /* streams with --db: list and head read the database, delete asks the server. */
    int reads = !strcmp(c->name, "streams") && (!n || argv[0][0] == '-' || strcmp(argv[0], "delete"));
    if ((c->reads || reads) && missing(db)) return EXIT_FAIL;
    if (c->fn_args) return c->fn_args(n, argv);
    if (c->fn_db) return c->fn_db(db, n, argv);
    char err[512];
    log_t *log = log_open(db, NULL, err, sizeof err);
    if (!log) {
        fprintf(stderr, "dstream: %s\n", err);
        return 1;
    }
    int rc = c->fn_log(log, n, argv);
    log_close(log);
    return rc;
}

/* dstream: the command-line tool.
 *
 *   dstream migrate [--db PATH]            create or upgrade the database
 *   dstream append [--db PATH] STREAM      append stdin as one message
 *   dstream tail [--db PATH] [--from OFFSET] [--no-follow] STREAM
 *                                          print messages, one a line, and follow
 *   dstream token create|list|revoke|check   API tokens (cli/token.c)
 *   dstream free-port [HOST]               print a free TCP port (for scripts and tests)
 *   dstream backup|restore|check ...       cli/backup.c, cli/check.c
 *   dstream sessions|chat|cancel|answer|events|convo|requests|export|search|streams
 *                                          the debug commands (cli/sessions.c, events.c, streams.c)
 */
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
#include "../lib/db.h"
#include "../lib/log.h"
#include "../lib/wake.h"
#include "cli.h"

static void usage(void)
{
    fprintf(stderr, "usage: dstream [--db PATH] [--url URL] [--token TOKEN] COMMAND ...\n"
                    "  migrate              create or upgrade the database\n"
                    "  append STREAM        append standard input as one message\n"
                    "  tail [--from OFFSET] [--no-follow] STREAM\n"
                    "                       print the messages from OFFSET (-1: the start, the\n"
                    "                       default; now: the tail), one a line, then wait for\n"
                    "                       more until the stream is closed or Ctrl-C\n"
                    "  token create|list|revoke|check\n"
                    "                       API tokens (dstream token, for its usage)\n"
                    "  free-port [HOST]     print a free TCP port on HOST (127.0.0.1)\n"
                    "  backup [--no-check] FILE   copy the live database to FILE, consistently\n"
                    "  restore FILE         replace the database by a backup (servers stopped)\n"
                    "  check [FILE]         integrity and invariants of the database (or FILE)\n"
                    "  skills export DIR [AGENT...]  write each skill as DIR/<name>/SKILL.md\n"
                    "  providers [FILE]     check the operator's provider file ($DSTREAM_PROVIDERS)\n"
                    "                       and show what it allows (never a key)\n"
                    "  mcp [FILE]           check the operator's MCP servers and bindings ($DSTREAM_MCP_CONFIG)\n"
                    "  sessions [--status S] [--limit N]  sessions, newest first: status, attempts, error\n"
                    "  session ID           a session's status, request, attempts, retries and error\n"
                    "                       (these two on the database: with --db, or without $DSTREAM_URL)\n"
                    "  recordings export FILE [--session ID] | import FILE | prune --older-than AGE\n"
                    "             [--dry-run] | pin KEY | unpin KEY   recordings (docs/recording.md)\n"
                    "Debug commands, over HTTP ($DSTREAM_URL with $DSTREAM_TOKEN; --json, --help on each):\n"
                    "  sessions [list|show|create|delete|fork|state]   sessions\n"
                    "  chat ID MESSAGE [--queue|--background]          talk, print the streamed answer\n"
                    "  cancel ID | answer ID INTERACTION RESPONSE      steer a session\n"
                    "  events ID [--follow] [--type T] [--last N] [--around OFFSET]\n"
                    "  convo ID | requests ID | export ID [--format jsonl|yaml] | search TEXT\n"
                    "  streams [list] (offline) | streams head|delete PATH\n"
                    "Exit codes: 0 done, 1 failed, 2 usage, 3 not found, 4 refused (401/403), 5 rejected (4xx).\n"
                    "The database defaults to $DSTREAM_DB or ./dstream.db.\n");
}

static int cmd_free_port(int argc, char **argv)
{
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
    printf("%d\n", ntohs(a.sin_port));
    close(fd);
    return 0;
}

static int cmd_append(log_t *log, int argc, char **argv)
{
    char err[256];
    if (argc != 1) {
        usage();
        return 2;
    }
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
        fprintf(stderr, "dstream: append to %s: %s\n", argv[0], log_strerror(lrc));
        rc = 1;
        goto out;
    }
    char off[OFFSET_LEN + 1];
    offset_format(ar.info.tail, off);
    printf("%s\n", off);
out:
    buf_free(&b);
    log_conn_close(c);
    return rc;
}

/* One message, then a newline (JSON streams: one value a line). */
static int print_msg(void *ud, const void *data, size_t len, offset_t at)
{
    (void)ud;
    (void)at;
    return fwrite(data, 1, len, stdout) == len && putchar('\n') != EOF ? 0 : -100;
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
    if (argc != 1) {
        usage();
        return 2;
    }
    rr.path = argv[0];
    log_conn_t *c = log_conn_open(log, err, sizeof err);
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        return 1;
    }
    struct sigaction old[2];
    cli_catch_stop(old);
    err[0] = 0;
    int lrc = wake_follow(log, db, c, &rr, print_msg, cli_flush_stdout, NULL, follow, &cli_stop, err, sizeof err);
    cli_restore_stop(old);
    if (lrc) {
        fprintf(stderr, "dstream: %s: %s\n", rr.path,
                err[0] ? err : lrc == -100 ? "cannot write" : log_strerror(lrc));
        rc = 1;
    }
    log_conn_close(c);
    return rc;
}

/* The debug commands over HTTP (cli/sessions.c, cli/events.c). */
static const struct {
    const char *name;
    int (*fn)(int, char **);
} remote[] = {{"chat", cmd_chat},     {"cancel", cmd_cancel},
              {"answer", cmd_answer},     {"events", cmd_events}, {"convo", cmd_convo},
              {"requests", cmd_requests}, {"export", cmd_export}, {"search", cmd_search}};

/* dstream sessions goes over HTTP when a server is named (DSTREAM_URL, --url) and
 * no database (--db); else it reads the database (cli/sessions.c). */
static int remote_sessions(int db_given, int argc, char **argv)
{
    if (db_given) return 0;
    for (int k = 0; k < argc; k++)
        if (!strcmp(argv[k], "--url")) return 1;
    const char *u = getenv("DSTREAM_URL");
    return u && *u;
}

int main(int argc, char **argv)
{
    int db_given = 0;
    const char *db = getenv("DSTREAM_DB");
    if (!db || !*db) db = "dstream.db";
    int i = 1;
    /* --db for the commands on the database; --url and --token for those over HTTP. */
    for (; i + 1 < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
        if (strcmp(argv[i], "--db") == 0) {
            db = argv[i + 1];
            db_given = 1;
            cli_db = db;
        } else if (strcmp(argv[i], "--url") == 0) {
            setenv("DSTREAM_URL", argv[i + 1], 1);
        } else if (strcmp(argv[i], "--token") == 0) {
            setenv("DSTREAM_TOKEN", argv[i + 1], 1);
        } else {
            break;
        }
    }
    if (i >= argc) {
        usage();
        return 2;
    }
    const char *cmd = argv[i++];
    if (strcmp(cmd, "free-port") == 0) return cmd_free_port(argc - i, argv + i);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0) {
        usage();
        return 0;
    }
    if (strcmp(cmd, "backup") == 0) return cmd_backup(db, argc - i, argv + i);
    if (strcmp(cmd, "restore") == 0) return cmd_restore(db, argc - i, argv + i);
    if (strcmp(cmd, "check") == 0) return cmd_check(db, argc - i, argv + i);
    if (strcmp(cmd, "skills") == 0) return cmd_skills(db, argc - i, argv + i);
    if (strcmp(cmd, "providers") == 0) return cmd_providers(argc - i, argv + i);
    /* sessions: on the database with --db or without a server to ask; else over HTTP. */
    if (strcmp(cmd, "session") == 0 || (strcmp(cmd, "sessions") == 0 && !remote_sessions(db_given, argc - i, argv + i)))
        return cmd_sessions(db, argc - i + 1, argv + i - 1);
    if (strcmp(cmd, "sessions") == 0) return cmd_sessions_http(argc - i, argv + i);
    if (strcmp(cmd, "streams") == 0) return cmd_streams(db, argc - i, argv + i);
    for (size_t k = 0; k < sizeof remote / sizeof remote[0]; k++)
        if (strcmp(cmd, remote[k].name) == 0) return remote[k].fn(argc - i, argv + i);
    if (strcmp(cmd, "mcp") == 0) return cmd_mcp(argc - i, argv + i);
    char err[512];
    log_t *log = log_open(db, NULL, err, sizeof err);
    if (!log) {
        fprintf(stderr, "dstream: %s\n", err);
        return 1;
    }
    int rc;
    if (strcmp(cmd, "migrate") == 0) {
        printf("schema version %d\n", db_schema_version());
        rc = 0;
    } else if (strcmp(cmd, "append") == 0) {
        rc = cmd_append(log, argc - i, argv + i);
    } else if (strcmp(cmd, "tail") == 0) {
        rc = cmd_tail(log, db, argc - i, argv + i);
    } else if (strcmp(cmd, "token") == 0) {
        rc = cmd_token(log, argc - i, argv + i);
    } else if (strcmp(cmd, "recordings") == 0) {
        rc = cmd_recordings(log, argc - i, argv + i);
    } else {
        usage();
        rc = 2;
    }
    log_close(log);
    return rc;
}

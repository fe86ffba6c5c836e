/* dstream recordings ...: the recordings of provider exchanges and tool calls
 * (lib/recorder, docs/recording.md).
 *
 *   export FILE [--session ID]   every recording (or a session's) as JSON Lines, its
 *                                chunks in base64 (FILE "-": standard output)
 *   import FILE                  store the recordings of an export, all or none
 *   prune --older-than AGE [--dry-run]
 *                                delete the unpinned recordings older than AGE (90s,
 *                                30m, 12h, 7d); --dry-run says what it would free
 *   pin KEY | unpin KEY          keep a key's recordings when their session is deleted
 *                                and when pruning (or no longer)
 *
 * An export holds no key: recordings never have one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/buf.h"
#include "../lib/timefmt.h"
#include "../lib/log.h"
#include "../lib/recorder.h"
#include "cli.h"
#include "http.h"

static void rec_usage(void) { cli_usage("recordings"); }

typedef struct export_ctx {
    FILE *f;
    long lines;
} export_ctx;

static int write_line(void *ud, const char *line, size_t len)
{
    export_ctx *x = ud;
    x->lines++;
    return fwrite(line, 1, len, x->f) != len || fputc('\n', x->f) == EOF ? LOG_EIO : 0;
}

static int do_export(log_conn_t *c, int argc, char **argv)
{
    const char *file = NULL, *session = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--session") && i + 1 < argc) session = argv[++i];
        else if (!file && argv[i][0] != '-') file = argv[i];
        else if (!file && !strcmp(argv[i], "-")) file = argv[i];
        else {
            rec_usage();
            return 2;
        }
    }
    if (!file) {
        rec_usage();
        return 2;
    }
    FILE *f = strcmp(file, "-") ? fopen(file, "we") : stdout;
    if (!f) {
        fprintf(stderr, "dstream: %s: %s\n", file, strerror(errno));
        return 1;
    }
    export_ctx x = {f, 0};
    int rc = rec_export(c, session, write_line, &x);
    if ((f != stdout && fclose(f)) || (f == stdout && fflush(f))) rc = rc ? rc : LOG_EIO;
    if (rc) {
        fprintf(stderr, "dstream: export: %s\n", errs_str(rc));
        return 1;
    }
    /* Into a file: say what went there (to standard output, the lines are the answer). */
    if (f != stdout) {
        if (cli_json) {
            json_t *j = json_pack("{s:s, s:I}", "file", file, "exported", (json_int_t)x.lines);
            print_json(j);
            json_decref(j);
        } else {
            printf("%ld recording(s) exported to %s\n", x.lines, file);
        }
    }
    return 0;
}

typedef struct import_ctx {
    FILE *f;
    const char *file;
    long lines, stored;
} import_ctx;

/* Read one line (without its newline) into b, bounded. 1 a line, 0 the end, -1 too long. */
static int read_line(FILE *f, buf_t *b)
{
    int ch;
    buf_reset(b);
    while ((ch = getc(f)) != EOF && ch != '\n') {
        char c = (char)ch;
        if (buf_append(b, &c, 1)) return -1;
    }
    return ch == EOF && b->len == 0 ? 0 : 1;
}

static int op_import(log_conn_t *cn, void *arg)
{
    import_ctx *x = arg;
    buf_t b;
    char err[256];
    buf_init(&b, REC_IMPORT_LINE_MAX);
    int rc = 0, got;
    x->lines = x->stored = 0;
    while (!rc && (got = read_line(x->f, &b)) != 0) {
        x->lines++;
        if (got < 0) {
            fprintf(stderr, "dstream: %s:%ld: line too long\n", x->file, x->lines);
            rc = LOG_EINVAL;
            break;
        }
        if (b.len == 0) continue;
        json_t *o = rec_import_parse(b.p, b.len, err, sizeof err);
        if (!o) {
            fprintf(stderr, "dstream: %s:%ld: %s\n", x->file, x->lines, err);
            rc = LOG_EINVAL;
            break;
        }
        rc = rec_tx_import(cn, o);
        json_decref(o);
        if (!rc) x->stored++;
    }
    buf_free(&b);
    return rc;
}

static int do_import(log_conn_t *c, int argc, char **argv)
{
    if (argc != 1) {
        rec_usage();
        return 2;
    }
    FILE *f = strcmp(argv[0], "-") ? fopen(argv[0], "re") : stdin;
    if (!f) {
        fprintf(stderr, "dstream: %s: %s\n", argv[0], strerror(errno));
        return 1;
    }
    import_ctx x = {f, argv[0], 0, 0};
    int rc = log_transact(c, op_import, &x);
    if (f != stdin) fclose(f);
    if (rc) {
        if (rc != LOG_EINVAL) fprintf(stderr, "dstream: import: %s\n", errs_str(rc));
        fprintf(stderr, "dstream: nothing imported\n");
        return 1;
    }
    printf(cli_json ? "{\"imported\":%ld}\n" : "%ld recording(s) imported\n", x.stored);
    return 0;
}

/* "90s", "30m", "12h", "7d" -> ms; -1 if malformed. */
static long long age_ms(const char *s)
{
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno || end == s || n < 0 || end[0] == '\0' || end[1] != '\0') return -1;
    long long unit = *end == 's' ? 1000 : *end == 'm' ? 60000 : *end == 'h' ? 3600000 : *end == 'd' ? 86400000 : 0;
    if (!unit || n > (1LL << 40)) return -1;
    return n * unit;
}

typedef struct prune_ctx {
    int64_t cutoff;
    int dry;
    int64_t count, bytes;
} prune_ctx;

static int op_prune(log_conn_t *cn, void *arg)
{
    prune_ctx *p = arg;
    return rec_prune(cn, p->cutoff, p->dry, &p->count, &p->bytes);
}

static int do_prune(log_conn_t *c, int argc, char **argv)
{
    long long age = -1;
    int dry = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--older-than") && i + 1 < argc) age = age_ms(argv[++i]);
        else if (!strcmp(argv[i], "--dry-run")) dry = 1;
        else age = -2;
    }
    if (age < 0) {
        rec_usage();
        return 2;
    }
    prune_ctx p = {timefmt_now_ms() - age, dry, 0, 0};
    int rc = log_transact(c, op_prune, &p);
    if (rc) {
        fprintf(stderr, "dstream: prune: %s\n", errs_str(rc));
        return 1;
    }
    if (cli_json)
        printf("{\"dryRun\":%s,\"recordings\":%lld,\"bytes\":%lld}\n", dry ? "true" : "false", (long long)p.count,
               (long long)p.bytes);
    else
        printf("%s %lld recording(s), %lld bytes\n", dry ? "would delete" : "deleted", (long long)p.count,
               (long long)p.bytes);
    return 0;
}

static int rec_sub(log_conn_t *c, const char *sub, int argc, char **argv)
{
    if (!strcmp(sub, "export")) return do_export(c, argc - 1, argv + 1);
    if (!strcmp(sub, "import")) return do_import(c, argc - 1, argv + 1);
    if (!strcmp(sub, "prune")) return do_prune(c, argc - 1, argv + 1);
    if ((!strcmp(sub, "pin") || !strcmp(sub, "unpin")) && argc == 2) {
        int n = rec_pin(c, argv[1], !strcmp(sub, "pin"));
        if (n < 0) {
            fprintf(stderr, "dstream: %s: %s\n", sub, errs_str(n));
            return 1;
        }
        if (n == 0) {
            fprintf(stderr, "dstream: no recording with key %s\n", argv[1]);
            return 1;
        }
        printf(cli_json ? "{\"%s\":%d}\n" : "%s %d recording(s)\n", !strcmp(sub, "pin") ? "pinned" : "unpinned", n);
        return 0;
    }
    rec_usage();
    return 2;
}

int cmd_recordings(log_t *log, int argc, char **argv)
{
    if (argc < 1) {
        rec_usage();
        return 2;
    }
    const char *sub = argv[0];
    char err[256];
    log_conn_t *c = log_conn_open(log, err, sizeof err);
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        return 1;
    }
    int rc = rec_sub(c, sub, argc, argv);
    log_conn_close(c);
    return rc;
}

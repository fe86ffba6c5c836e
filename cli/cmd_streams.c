/* dstream streams, tail and append: the Durable Streams themselves.
 *
 *   dstream --db [PATH] streams [list] [--prefix P]   on the database (the API has no listing)
 *   dstream streams head PATH             over HTTP (with --db: on the database)
 *   dstream streams delete PATH           over HTTP
 *   dstream tail ..., dstream append ...  over HTTP here (with --db: cli/dstream.c) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../lib/timefmt.h"
#include "../lib/log.h"
#include "../lib/recorder.h"
#include "cli.h"
#include "http.h"

static int usage_streams(void) { return cli_usage("streams"); }

typedef struct list_arg {
    const cli_opts *o;
    int n;
} list_arg;

static void list_one(void *ud, const char *path, const log_info *info)
{
    list_arg *a = ud;
    long long seq = (long long)info->tail.seq, pos = (long long)info->tail.pos;
    if (a->o->json) {
        json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:b, s:I}", "path", path, "contentType", info->content_type,
                              "messages", (json_int_t)seq, "bytes", (json_int_t)pos, "closed", info->closed,
                              "createdMs", (json_int_t)info->created_ms);
        print_json(j);
        json_decref(j);
    } else {
        printf("%-40s %-28s %10lld %12lld %s\n", path, info->content_type, seq, pos, info->closed ? "closed" : "");
    }
    a->n++;
}

static int list(const char *dbpath, const cli_opts *o, const char *prefix)
{
    char err[256];
    log_opts lo;
    log_opts_default(&lo);
    lo.migrate = 0;
    log_t *log = log_open(dbpath, &lo, err, sizeof err);
    log_conn_t *c = log ? log_conn_open(log, err, sizeof err) : NULL;
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        log_close(log);
        return EXIT_FAIL;
    }
    if (o->tty) printf("\033[1m%-40s %-28s %10s %12s %s\033[0m\n", "PATH", "CONTENT-TYPE", "MESSAGES", "BYTES", "");
    list_arg a = {o, 0};
    int rc = log_list(c, prefix, list_one, &a);
    if (rc) fprintf(stderr, "dstream: %s\n", errs_str(rc));
    log_conn_close(c);
    log_close(log);
    return rc ? EXIT_FAIL : 0;
}

/* streams head: the next offset, content type, closed. */
static void print_head(const cli_opts *o, const char *path, const http_res *r)
{
    if (o->json) {
        json_t *j = json_pack("{s:s, s:s, s:s, s:b}", "path", path, "nextOffset", r->next_offset, "contentType",
                              r->content_type, "closed", r->closed);
        print_json(j);
        json_decref(j);
    } else {
        printf("%s next offset %s%s\n", path, r->next_offset, r->closed ? ", closed" : "");
    }
}

static int escape_path(char *out, size_t cap, const char *path)
{
    /* Each segment escaped, the slashes kept. */
    size_t n = 0;
    int w = snprintf(out, cap, "/v1/stream/");
    if (w < 0 || (size_t)w >= cap) return -1;
    n = (size_t)w;
    char seg[1024], e[3072];
    while (*path) {
        const char *sl = strchr(path, '/');
        size_t l = sl ? (size_t)(sl - path) : strlen(path);
        if (l >= sizeof seg) return -1;
        memcpy(seg, path, l);
        seg[l] = 0;
        if (http_escape(seg, e, sizeof e)) return -1;
        w = snprintf(out + n, cap - n, "%s%s", e, sl ? "/" : "");
        if (w < 0 || (size_t)w >= cap - n) return -1;
        n += (size_t)w;
        path += l + (sl ? 1 : 0);
    }
    return 0;
}

/* The API path of the stream the user named (one leading '/' dropped) into out.
 * 0, or EXIT_USAGE (said) when it does not fit. */
static int stream_path(char *out, size_t cap, const char *arg)
{
    if (!escape_path(out, cap, arg[0] == '/' ? arg + 1 : arg)) return 0;
    fprintf(stderr, "dstream: stream path too long\n");
    return EXIT_USAGE;
}

int cmd_streams(const char *db, int argc, char **argv)
{
    cli_opts o;
    argc = http_opts(argc, argv, &o);
    if (argc == 0 || !strcmp(argv[0], "list") || argv[0][0] == '-') {
        const char *prefix = NULL;
        for (int i = argc && argv[0][0] != '-' ? 1 : 0; i < argc; i++) {
            if (!strcmp(argv[i], "--prefix") && i + 1 < argc) prefix = argv[++i];
            else return usage_streams();
        }
        if (!db) {
            fprintf(stderr, "dstream: streams list reads the database (the server has no listing): "
                            "dstream --db [PATH] streams list\n");
            return EXIT_USAGE;
        }
        return list(db, &o, prefix);
    }
    if (argc != 2) return usage_streams();
    char path[4096];
    if (stream_path(path, sizeof path, argv[1])) return EXIT_USAGE;
    http_res r;
    int rc;
    memset(&r, 0, sizeof r);
    if (!strcmp(argv[0], "head") && cli_db) {
        /* On the database: what HEAD would say. */
        log_info info;
        if ((rc = offline_head(argv[1][0] == '/' ? argv[1] + 1 : argv[1], &info)) == 0) {
            offset_format(info.tail, r.next_offset);
            snprintf(r.content_type, sizeof r.content_type, "%s", info.content_type);
            r.closed = info.closed;
            print_head(&o, argv[1], &r);
        }
        return rc;
    }
    if (!strcmp(argv[0], "head")) {
        if ((rc = http_call("HEAD", path, NULL, &r)) == 0 && (rc = http_exit(path, &r)) == 0) print_head(&o, argv[1], &r);
    } else if (!strcmp(argv[0], "delete")) {
        if ((rc = http_call("DELETE", path, NULL, &r)) == 0 && (rc = http_exit(path, &r)) == 0) {
            json_t *j = json_pack("{s:s}", "deleted", argv[1]);
            if (o.json) print_json(j);
            else printf("deleted %s\n", argv[1]);
            json_decref(j);
        }
    } else {
        return usage_streams();
    }
    http_res_free(&r);
    return rc;
}

/* ---- tail and append over HTTP ----------------------------------------------------- */

/* What a tail over HTTP prints and where it is. */
typedef struct {
    int json_stream;       /* application/json: each body a JSON array of messages */
    int text;              /* text/... (else the SSE data is base64) */
    char next[64];         /* the offset after what was printed */
    int closed;
    int failed;            /* stdout could not be written */
} tail_http;

/* One message; with --json {"message"} and, on the last of a batch, the offset
 * after it ("offset": where to resume). */
static int tail_print(tail_http *t, json_t *value, const char *data, size_t len, const char *off)
{
    if (cli_json) {
        json_t *m = value ? json_incref(value) : json_stringn_nocheck(data, len);
        json_t *j = json_pack("{s:s?, s:o}", "offset", off, "message", m);
        char *d = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER) : NULL;
        json_decref(j);
        int ok = d && puts(d) != EOF;
        free(d);
        return ok ? 0 : -1;
    }
    if (value) {
        char *d = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
        int ok = d && puts(d) != EOF;
        free(d);
        return ok ? 0 : -1;
    }
    return fwrite(data, 1, len, stdout) == len && putchar('\n') != EOF ? 0 : -1;
}

/* A batch (a response's body, an SSE data event): a JSON stream's messages one
 * by one, anything else as it came. */
static int tail_batch(tail_http *t, const char *data, size_t len)
{
    int rc = 0;
    if (!len) return 0;
    if (t->json_stream) {
        json_t *a = json_loadb(data, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (!json_is_array(a)) {
            json_decref(a);
            fprintf(stderr, "dstream: the server sent a JSON stream's batch that is not a JSON array\n");
            return -1;
        }
        size_t n = json_array_size(a);
        for (size_t k = 0; k < n && !rc; k++) rc = tail_print(t, json_array_get(a, k), NULL, 0, k + 1 == n ? t->next : NULL);
        json_decref(a);
    } else {
        rc = tail_print(t, NULL, data, len, t->next);
    }
    fflush(stdout);
    if (rc) t->failed = 1;
    return rc;
}

static int tail_sse(void *ud, const char *event, const char *data, const char *id)
{
    tail_http *t = ud;
    (void)id;
    if (!strcmp(event, "control")) {
        json_t *c = json_loads(data, 0, NULL);
        const char *nx = json_string_value(json_object_get(c, "streamNextOffset"));
        if (nx) snprintf(t->next, sizeof t->next, "%s", nx);
        int closed = json_is_true(json_object_get(c, "streamClosed"));
        json_decref(c);
        return closed ? -1 : 0;   /* the stream is closed at its tail: done */
    }
    if (strcmp(event, "data")) return 0;
    /* The offset comes after the data, in the control event: print the batch's
     * messages without one ("offset" on the catch-up's lines only). */
    char keep[64];
    memcpy(keep, t->next, sizeof keep);
    t->next[0] = 0;
    int rc;
    if (t->text) {
        rc = tail_batch(t, data, strlen(data));
    } else {
        buf_t b;
        buf_init(&b, 64u << 20);
        rc = rec_base64_decode(data, strlen(data), &b) ? (fprintf(stderr, "dstream: bad base64 from the server\n"), -1)
                                                       : tail_batch(t, b.p ? b.p : "", b.len);
        buf_free(&b);
    }
    memcpy(t->next, keep, sizeof keep);
    return rc ? EXIT_FAIL : 0;
}

int cmd_tail_http(int argc, char **argv)
{
    cli_opts o;
    int follow = 1, rc = 0;
    const char *from = "-1";
    argc = http_opts(argc, argv, &o);
    for (; argc > 1; argc--, argv++) {
        offset_kind kind;
        offset_t at;
        if (strcmp(argv[0], "--no-follow") == 0) {
            follow = 0;
        } else if (strcmp(argv[0], "--from") == 0 && argc > 2) {
            if (offset_parse(argv[1], strlen(argv[1]), &kind, &at)) {
                fprintf(stderr, "dstream: --from: -1, now, or an offset the server returned\n");
                return EXIT_USAGE;
            }
            from = argv[1];
            argc--, argv++;
        } else {
            break;
        }
    }
    if (argc != 1) return cli_usage("tail");
    char path[4096], url[4300], e[200];
    if (stream_path(path, sizeof path, argv[0])) return EXIT_USAGE;
    tail_http t;
    memset(&t, 0, sizeof t);
    snprintf(t.next, sizeof t.next, "%s", from);
    /* Catch up with GETs until the server says up to date, then follow over SSE
     * (resumed after a dropped connection from the last control event's offset). */
    for (;;) {
        http_res r;
        if (http_escape(t.next, e, sizeof e) || (size_t)snprintf(url, sizeof url, "%s?offset=%s", path, e) >= sizeof url) {
            fprintf(stderr, "dstream: bad offset %s\n", t.next);
            return EXIT_FAIL;
        }
        if ((rc = http_call("GET", url, NULL, &r)) || (rc = http_exit(path, &r))) {
            http_res_free(&r);
            return rc;
        }
        t.json_stream = !strncasecmp(r.content_type, "application/json", 16);
        t.text = t.json_stream || !strncasecmp(r.content_type, "text/", 5);
        if (r.next_offset[0]) snprintf(t.next, sizeof t.next, "%s", r.next_offset);
        t.closed = r.closed;
        int done = r.up_to_date || !r.next_offset[0];
        rc = tail_batch(&t, r.body.p ? r.body.p : "", r.body.len) ? EXIT_FAIL : 0;
        http_res_free(&r);
        if (rc) return rc;
        if (done) break;
    }
    if (!follow || t.closed) return 0;
    if (http_escape(t.next, e, sizeof e) || (size_t)snprintf(url, sizeof url, "%s?offset=%s&live=sse", path, e) >= sizeof url)
        return EXIT_FAIL;
    rc = http_sse(url, NULL, tail_sse, &t);
    return t.failed ? EXIT_FAIL : rc;
}

int cmd_append_http(int argc, char **argv)
{
    cli_opts o;
    argc = http_opts(argc, argv, &o);
    if (argc != 1) return cli_usage("append");
    char path[4096];
    if (stream_path(path, sizeof path, argv[0])) return EXIT_USAGE;
    /* The stream's content type, which a POST must carry. */
    http_res r;
    int rc = http_call("HEAD", path, NULL, &r);
    if (!rc) rc = http_exit(path, &r);
    char ctype[LOG_CTYPE_MAX];
    snprintf(ctype, sizeof ctype, "%s", r.content_type);
    http_res_free(&r);
    if (rc) return rc;
    buf_t b;
    buf_init(&b, 64u << 20);
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, stdin)) > 0)
        if (buf_append(&b, tmp, n)) {
            fprintf(stderr, "dstream: input too large\n");
            buf_free(&b);
            return EXIT_FAIL;
        }
    rc = http_post_raw(path, ctype, b.p ? b.p : "", b.len, &r);
    buf_free(&b);
    if (!rc) rc = http_exit(path, &r);
    if (!rc) printf(cli_json ? "{\"offset\":\"%s\"}\n" : "%s\n", r.next_offset);
    http_res_free(&r);
    return rc;
}

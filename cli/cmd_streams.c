/* dstream streams: the Durable Streams themselves.
 *
 *   dstream streams [list] [--prefix P]   offline, on the database file (--db)
 *   dstream streams head PATH             over HTTP: content type, tail, closed, TTL
 *   dstream streams delete PATH           over HTTP */
#include <stdio.h>
#include <string.h>

#include "../lib/timefmt.h"
#include "../lib/log.h"
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

static int stream_path(char *out, size_t cap, const char *path)
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
        return list(db, &o, prefix);
    }
    if (argc != 2) return usage_streams();
    char path[4096];
    if (stream_path(path, sizeof path, argv[1][0] == '/' ? argv[1] + 1 : argv[1])) {
        fprintf(stderr, "dstream: stream path too long\n");
        return EXIT_USAGE;
    }
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

/* append-cost: N appends of a 200-byte message through lib/log (log_append), one
 * thread, round robin over K streams, on the SQLite file DB (synchronous=NORMAL:
 * the work of an append, not the disk's). Run under callgrind by
 * bench/append-cost.sh, once with N and once with 0, so that the difference over N
 * is the instructions one append costs.
 *
 *   append-cost DB N K */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

int main(int argc, char **argv)
{
    char err[256], msg[200], path[32];
    if (argc != 4) {
        fprintf(stderr, "usage: append-cost DB N K\n");
        return 2;
    }
    long n = strtol(argv[2], NULL, 10), k = strtol(argv[3], NULL, 10);
    if (n < 0 || k < 1 || k > 10000) return 2;
    log_opts o;
    log_opts_default(&o);
    o.synchronous_full = 0;
    log_t *lg = log_open(argv[1], &o, err, sizeof err);
    log_conn_t *c = lg ? log_conn_open(lg, err, sizeof err) : NULL;
    if (!c) {
        fprintf(stderr, "append-cost: %s\n", err);
        return 1;
    }
    memset(msg, 'x', sizeof msg);
    for (long i = 0; i < k; i++) {
        log_create_req cr;
        memset(&cr, 0, sizeof cr);
        snprintf(path, sizeof path, "s%ld", i);
        cr.path = path;
        cr.content_type = "text/plain";
        cr.ttl_s = cr.expires_ms = -1;
        if (log_create(c, &cr)) return 1;
    }
    for (long i = 0; i < n; i++) {
        log_msg m = {msg, sizeof msg};
        log_append_req r;
        memset(&r, 0, sizeof r);
        snprintf(path, sizeof path, "s%ld", i % k);
        r.path = path;
        r.msgs = &m;
        r.nmsgs = 1;
        if (log_append(c, &r)) return 1;
    }
    log_conn_close(c);
    log_close(lg);
    return 0;
}

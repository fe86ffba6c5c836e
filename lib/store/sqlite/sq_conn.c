/* The SQLite engine's connections: one per thread, each with its own database
 * handle, the streams' prepared statements, the statement cache, a descriptor
 * of the writers' lock file and its wal hook (the commit signal, signal.c). */
#include "sq.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sq_db.h"

void sq_conn_close(log_conn_t *lc)
{
    if (!lc) return;
    sq_conn *c = sq(lc);
    sq_signal_detach(c);
    sq_streams_finalize(c);
    for (int i = 0; i < SQ_STMT_CACHE; i++) sqlite3_finalize(c->cache[i].st);
    sqlite3_close_v2(c->db);
    if (c->lockfd >= 0) close(c->lockfd);
    free(c);
}

log_conn_t *sq_conn_open(log_t *l, char *err, size_t errlen)
{
    db_opts o = {l->opts.synchronous_full, l->opts.busy_timeout_ms, 0, l->opts.cache_kib};
    sq_conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->base.log = l;
    c->sig.fd = -1;
    /* One open file description per connection: flock excludes between them, in
     * this process and in others. */
    char lockpath[4200];
    snprintf(lockpath, sizeof lockpath, "%s-wlock", l->target);
    c->lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (db_open(l->target, &o, &c->db, err, errlen) || db_cap(c->db, l->max_bytes, err, errlen) ||
        sq_streams_prepare(c, err, errlen)) {
        sq_conn_close(&c->base);
        return NULL;
    }
    sq_signal_attach(c, l->target);
    return &c->base;
}

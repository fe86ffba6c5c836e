/* The PostgreSQL engine's connections: one PGconn per log_conn_t (per thread),
 * opened from the database target (a libpq connection URI), with the session
 * settings every connection of the engine has; and their reconnection. */
#include "pg.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bumped by pg_stale_all: a connection made under an older value is made again. */
static atomic_uint pg_epoch;

void pg_stale_all(void)
{
    atomic_fetch_add(&pg_epoch, 1);
}

int pg_stale(const log_conn_t *lc)
{
    const pg_conn *c = (const pg_conn *)lc;
    return c->readonly || c->epoch != atomic_load(&pg_epoch);
}

static void quiet(void *arg, const char *message)
{
    (void)arg, (void)message;     /* NOTICEs (IF NOT EXISTS, ...) are not errors */
}

/* Session settings: lock waits end as LOG_EBUSY after the busy timeout (55P03), as
 * SQLite's busy timeout does; without synchronous_full a commit does not wait for
 * its WAL flush (SQLite's synchronous=NORMAL). */
static int settle(PGconn *pg, const log_t *l, char *err, size_t errlen)
{
    char sql[160];
    int busy = l ? l->opts.busy_timeout_ms : 5000;
    int full = l ? l->opts.synchronous_full : 1;
    PQsetNoticeProcessor(pg, quiet, NULL);
    snprintf(sql, sizeof sql, "SET lock_timeout = %d; SET synchronous_commit = %s;"
             " SET client_min_messages = warning", busy > 0 ? busy : 5000, full ? "on" : "off");
    PGresult *r = PQexec(pg, sql);
    int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) snprintf(err, errlen, "%s", PQerrorMessage(pg));
    PQclear(r);
    return ok ? 0 : -1;
}

static PGconn *connect_to(const char *target, const log_t *l, char *err, size_t errlen)
{
    /* The program's name in pg_stat_activity (and the server's log lines with
     * %a), unless the target names an application_name itself. */
    const char *const keys[] = {"dbname", "fallback_application_name", NULL};
    const char *const vals[] = {target, program_invocation_short_name, NULL};
    PGconn *pg = PQconnectdbParams(keys, vals, 1);
    if (!pg) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (PQstatus(pg) != CONNECTION_OK) {
        /* libpq's message ends with a newline. */
        snprintf(err, errlen, "%s", PQerrorMessage(pg));
        size_t n = strlen(err);
        while (n && (err[n - 1] == '\n' || err[n - 1] == '\r')) err[--n] = 0;
        PQfinish(pg);
        return NULL;
    }
    if (settle(pg, l, err, errlen)) {
        PQfinish(pg);
        return NULL;
    }
    return pg;
}

PGconn *pg_connect(const char *target, char *err, size_t errlen)
{
    return connect_to(target, NULL, err, errlen);
}

static void forget_prepared(pg_conn *c)
{
    for (int i = 0; i < c->nprepared; i++) free(c->prepared[i].sql);
    c->nprepared = 0;
}

int pg_reconnect(log_conn_t *lc)
{
    pg_conn *c = pgc(lc);
    char err[256];
    forget_prepared(c);
    c->nstmts++;                /* what it kept is not this connection's */
    c->in_tx = 0;
    c->pending = 0;             /* the pipeline went with the connection */
    c->readonly = 0;
    c->epoch = atomic_load(&pg_epoch);
    if (c->pg) PQfinish(c->pg);
    c->pg = connect_to(lc->log->target, lc->log, err, sizeof err);
    return c->pg != NULL;
}

/* libpq's buffers grow to the largest message the connection sent or read (a
 * group's pipelined inserts, a long result) and never shrink, nor does the rows
 * array a group grew (pg_conn.rows): after a burst both are let go, the connection
 * made again (its statements prepared again as they are used; leases are rows, and
 * LISTEN is the feed's own connection, so nothing else goes with it). Never inside
 * a transaction, nor with a trial's statements unread. */
void pg_conn_release(log_conn_t *lc)
{
    pg_conn *c = pgc(lc);
    if (pg_in_tx(lc) || c->pending || (c->pg && PQtransactionStatus(c->pg) != PQTRANS_IDLE)) return;
    pg_rows_forget(c);
    free(c->rows);
    c->rows = NULL;
    c->rows_cap = 0;
    if (c->pg) pg_reconnect(lc);    /* if it fails, the next statement tries again */
}

void pg_conn_close(log_conn_t *lc)
{
    if (!lc) return;
    pg_conn *c = pgc(lc);
    forget_prepared(c);
    pg_rows_forget(c);
    pg_own_forget(c);
    pg_ahead_forget(c);
    free(c->ahead);
    free(c->rows);
    if (c->pg) PQfinish(c->pg);
    free(c);
}

log_conn_t *pg_conn_open(log_t *l, char *err, size_t errlen)
{
    pg_conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->base.log = l;
    c->epoch = atomic_load(&pg_epoch);
    if (!(c->pg = connect_to(l->target, l, err, errlen))) {
        free(c);
        return NULL;
    }
    return &c->base;
}

/* The PostgreSQL engine's query helpers (pg.h): parameters, statements prepared by
 * SQL text on each connection, results, and PostgreSQL's errors as LOG_E*. A leaf
 * of the engine: it calls only libpq and pg_conn.c's reconnection (and, through
 * the pointers the connection holds, whoever keeps a statement due: pg.h's
 * pg_conn.due_fill). */
#include "pg.h"

#include <arpa/inet.h>
#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pg_params_init(pg_params *p)
{
    p->n = 0;
}

static int slot(pg_params *p)
{
    /* More parameters than a statement of this engine has is a bug of the caller:
     * the statement then fails (PostgreSQL counts $n), never a buffer overrun. */
    if (p->n >= PG_PARAMS_MAX) abort();
    return p->n++;
}

void pg_text(pg_params *p, const char *s)
{
    int i = slot(p);
    p->v[i] = s;
    p->len[i] = 0;
    p->fmt[i] = 0;
}

void pg_int(pg_params *p, int64_t v)
{
    int i = slot(p);
    snprintf(p->num[i], sizeof p->num[i], "%" PRId64, v);
    p->v[i] = p->num[i];
    p->len[i] = 0;
    p->fmt[i] = 0;
}

void pg_bytes(pg_params *p, const void *data, size_t len)
{
    int i = slot(p);
    p->v[i] = data ? data : "";
    p->len[i] = (int)len;
    p->fmt[i] = 1;
}

void pg_null(pg_params *p)
{
    pg_text(p, NULL);
}

static char *put32(char *b, uint32_t v)
{
    v = htonl(v);
    memcpy(b, &v, 4);
    return b + 4;
}

char *pg_array(pg_params *p, unsigned elem_oid, size_t n, const void *const *elem, const size_t *elem_len)
{
    /* array_recv's form: dimensions, has-nulls flag, element type, then each
     * dimension's size and lower bound, then each element's length and bytes. */
    size_t size = 20;
    for (size_t i = 0; i < n; i++) {
        if (elem_len[i] > INT32_MAX || size > INT32_MAX) return NULL;
        size += 4 + elem_len[i];
    }
    if (size > INT32_MAX) return NULL;
    char *buf = malloc(size), *b = buf;
    if (!buf) return NULL;
    b = put32(b, n ? 1 : 0);
    b = put32(b, 0);
    b = put32(b, elem_oid);
    if (n) {
        b = put32(b, (uint32_t)n);
        b = put32(b, 1);
    }
    for (size_t i = 0; i < n; i++) {
        b = put32(b, (uint32_t)elem_len[i]);
        if (elem_len[i]) memcpy(b, elem[i], elem_len[i]);
        b += elem_len[i];
    }
    int i = slot(p);
    p->v[i] = buf;
    p->len[i] = (int)(b - buf);
    p->fmt[i] = 1;
    return buf;
}

static uint64_t sql_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;    /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

int pg_error(log_conn_t *lc, const PGresult *r)
{
    pg_conn *c = pgc(lc);
    /* Lost (or never made again): the server is down or restarting. Not I/O: the
     * client is told to come back (503 with Retry-After), nothing was acknowledged. */
    if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) return LOG_EDOWN;
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    /* An error libpq made itself (no SQLSTATE): the connection failed under the
     * statement ("server closed the connection unexpectedly"), which PQstatus may
     * not say yet when the failure was found on a write. */
    if (!state) return LOG_EDOWN;
    if (!strcmp(state, "40001") || !strcmp(state, "40P01") || !strcmp(state, "55P03") ||
        !strcmp(state, "57014"))
        return LOG_EBUSY;               /* serialization, deadlock, lock or statement timeout */
    if (!strcmp(state, "53100")) return LOG_EFULL;
    /* The server going down or coming up: a connection exception (class 08), an
     * administrator's or a crash's shutdown, the server still starting (57P01..03),
     * no connection slot left (53300). */
    if (!strncmp(state, "08", 2) || !strcmp(state, "57P01") || !strcmp(state, "57P02") ||
        !strcmp(state, "57P03") || !strcmp(state, "53300"))
        return LOG_EDOWN;
    /* A text parameter that is not UTF-8 (character_not_in_repertoire): the
     * database holds only UTF-8. This cannot tell a look-up from a write, so the
     * streams' inputs are checked above it (lib/log.c: a look-up of such a path
     * is answered as missing, a write refused on every engine); whatever else
     * gets here is a client's text that no check stopped: a bad request, never
     * a database error, and not "not found" for a write. */
    if (!strcmp(state, "22021")) return LOG_EINVAL;
    /* A write refused by a read-only server: a standby (before or without its
     * promotion), or a primary fenced for a switchover (default_transaction_read_only).
     * The writable server is elsewhere, or coming: try again later. */
    if (!strcmp(state, "25006")) return LOG_EDOWN;
    return LOG_EIO;
}

static int ok(const PGresult *r)
{
    ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    return s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK;
}

/* Whether a failed statement was a write its server refused as read-only (25006).
 * If so, the connection is made again at its next statement outside a transaction
 * (pg_conn.readonly), and so is every other connection of the process
 * (pg_stale_all): they are on the same server, and one that has not written since
 * would fail its next write the same way (each pool thread's once). */
static int read_only(pg_conn *c, const PGresult *r)
{
    if (ok(r)) return 0;
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (!state || strcmp(state, "25006")) return 0;
    if (!c->readonly) pg_stale_all();
    c->readonly = 1;
    return 1;
}

/* Whether a failed statement's connection is gone: closed, or the statement failed
 * with an error of libpq's own (no SQLSTATE: "server closed the connection
 * unexpectedly"), which PQstatus does not say yet when the failure was found on a
 * write. */
static int lost(const pg_conn *c, const PGresult *r)
{
    if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) return 1;
    return !r || !PQresultErrorField(r, PG_DIAG_SQLSTATE);
}

static void note_tx(pg_conn *c);

/* The name of sql's prepared statement on this connection, or NULL if it has none. */
static const char *known_name(const pg_conn *c, const char *sql)
{
    uint64_t h = sql_hash(sql);
    for (int i = 0; i < c->nprepared; i++)
        if (c->prepared[i].hash == h && !strcmp(c->prepared[i].sql, sql)) return c->prepared[i].name;
    return NULL;
}

/* The prepared statement of sql on this connection (prepared now if new), or NULL
 * when none can be kept (the caller then runs it unnamed). *rc is set on failure. */
static const char *prepared(pg_conn *c, const char *sql, PGresult **fail)
{
    const char *known = known_name(c, sql);
    *fail = NULL;
    if (known) return known;
    if (c->nprepared >= PG_PREPARED_MAX) return NULL;
    pg_prepared *e = &c->prepared[c->nprepared];
    snprintf(e->name, sizeof e->name, "s%d", c->nprepared);
    PGresult *r = PQprepare(c->pg, e->name, sql, 0, NULL);
    if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
        *fail = r;
        return NULL;
    }
    PQclear(r);
    if (!(e->sql = strdup(sql))) abort();
    e->hash = sql_hash(sql);
    c->nprepared++;
    return e->name;
}

/* The statements due before the next one (pg.h): a read's or a group's BEGIN
 * outside a transaction (pg_conn.begin_due: due until a statement after it ran,
 * pg_run); the last operation's RELEASE and the next one's SAVEPOINT
 * (pg_conn.savepoint_due), and between them the UPDATE of the tails kept back
 * (pg_conn.ndirty), unless keep. */
typedef struct pre_set {
    int n;
    int begin;                  /* st[0] is a BEGIN: no savepoint to lose by it */
    pg_stmt st[4];
    const char *name[4];
    int due;                    /* the index of the tails' UPDATE, or -1 */
    int in_op;                  /* it runs inside an operation's savepoint */
    pg_params p;
    char *bufs[PG_DUE_BUFS];
} pre_set;

/* Fill ps (they are then no longer due; pre_done after they ran). */
static void pre_stmts(pg_conn *c, pre_set *ps, int keep)
{
    ps->n = 0;
    ps->due = -1;
    ps->in_op = !c->savepoint_due;
    memset(ps->bufs, 0, sizeof ps->bufs);
    ps->begin = 0;
    if (c->begin_due && !c->in_tx) {
        ps->st[0] = (pg_stmt){c->begin_due, NULL};
        ps->n = ps->begin = 1;
    }
    if (c->savepoint_due && c->release_due) ps->st[ps->n++] = (pg_stmt){"RELEASE op", NULL};
    if (!keep && c->ndirty > 0 && c->due_fill) {
        pg_params_init(&ps->p);
        if (c->due_fill(&c->base, &ps->st[ps->n], &ps->p, ps->bufs) == 1) ps->due = ps->n++;
    }
    if (c->savepoint_due) ps->st[ps->n++] = (pg_stmt){"SAVEPOINT op", NULL};
    c->savepoint_due = c->release_due = 0;
    for (int i = 0; i < ps->n; i++) {
        PGresult *fail = NULL;
        /* The tails' UPDATE is prepared (its text never varies); a failure to
         * prepare it shows when it runs unnamed. Not in the middle of a pipeline
         * (PQprepare waits for its answer): there, unnamed unless it was before. */
        if (i != ps->due) ps->name[i] = NULL;
        else if (c->pending) ps->name[i] = known_name(c, ps->st[i].sql);
        else ps->name[i] = prepared(c, ps->st[i].sql, &fail);
        PQclear(fail);
    }
}

/* After ps ran: ok, whether every statement of it did. */
static void pre_done(pg_conn *c, pre_set *ps, int ok_all)
{
    if (ps->due >= 0 && ok_all && c->due_done) c->due_done(&c->base, ps->in_op);
    for (int i = 0; i < PG_DUE_BUFS; i++) free(ps->bufs[i]);
    ps->due = -1;
}

/* Out of pipeline mode, the results left read and dropped (a lost connection may
 * leave results that never come: it is made again before its next use). */
static void leave_pipeline(pg_conn *c)
{
    for (int tries = 0; tries < 4 && PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF; tries++) {
        if (PQexitPipelineMode(c->pg)) break;
        PQclear(PQgetResult(c->pg));
    }
}

/* A statement sent without waiting failed with e: a lost connection, a deadlock
 * or a read-only server lose the whole group (e); anything else is, in a trial,
 * some operation's own failure, which the group run again with savepoints tells
 * apart, and outside one the failure of the operation alone in its group (e). */
static int unread_failed(const pg_conn *c, int e)
{
    return e == LOG_EBUSY || e == LOG_EDOWN || !c->trial ? e : LOG_ERERUN;
}

/* Send one statement (named: prepared) in pipeline mode. */
static int send_one(pg_conn *c, const char *name, const pg_stmt *st, int binary)
{
    const pg_params *p = st->p;
    int n = p ? p->n : 0;
    const char *const *v = p ? p->v : NULL;
    const int *len = p ? p->len : NULL, *fmt = p ? p->fmt : NULL;
    return name ? PQsendQueryPrepared(c->pg, name, n, v, len, fmt, binary)
                : PQsendQueryParams(c->pg, st->sql, n, NULL, v, len, fmt, binary);
}

/* Run the statements st[0..nst) (name[i]: prepared, else st[i].sql unnamed)
 * after the statements due ps, in one round trip: libpq's pipeline mode, each
 * sent, one sync, every result read. Returns the first failed statement's result
 * (those after it were not run: the transaction is aborted), else the last one's;
 * NULL when the connection went. A statement of ps that failed, or is not known
 * to have run, loses the operation's savepoint (pg_conn.savepoint_lost). */
static PGresult *run_pipelined(pg_conn *c, pre_set *ps, const char *const *name, const pg_stmt *st, int nst,
                               int binary)
{
    PGresult *got = NULL;
    int npre = ps->n, all = npre + nst, pre_ok = 0;
    int sent = PQenterPipelineMode(c->pg);
    for (int i = 0; i < npre && sent; i++) sent = send_one(c, ps->name[i], &ps->st[i], 0);
    for (int i = 0; i < nst && sent; i++) sent = send_one(c, name[i], &st[i], binary);
    if (sent) sent = PQpipelineSync(c->pg);
    /* Each statement's result, then the NULL that ends it; then the sync's. */
    int i = 0;
    for (; sent && i < all; i++) {
        PGresult *r = PQgetResult(c->pg);
        if (!r) break;          /* the connection went */
        for (PGresult *x; (x = PQgetResult(c->pg));) PQclear(x);
        if (i < npre && !ok(r) && !(ps->begin && i == 0)) c->savepoint_lost = 1;
        if (i < npre && ok(r)) pre_ok++;
        if (!got && (i == all - 1 || !ok(r))) got = r;
        else PQclear(r);
    }
    if (i < npre && npre > ps->begin) c->savepoint_lost = 1;    /* not known to be taken */
    pre_done(c, ps, pre_ok == npre);
    /* The sync's result, and out of pipeline mode (a lost connection may leave
     * results that never come: it is made again before its next use). */
    leave_pipeline(c);
    return got;
}

int pg_drain(log_conn_t *lc)
{
    pg_conn *c = pgc(lc);
    int rc = 0;
    if (!c->pg || PQpipelineStatus(c->pg) == PQ_PIPELINE_OFF) {
        c->pending = 0;
        return c->trial_rc;
    }
    if (!PQpipelineSync(c->pg)) rc = LOG_EDOWN;
    /* Each statement's result and the NULL after it (PGRES_PIPELINE_ABORTED for
     * those after a failed one), then the sync's; bounded, should the connection
     * go under it. */
    for (int guard = 2 * c->pending + 8; !rc && guard > 0; guard--) {
        PGresult *r = PQgetResult(c->pg);
        if (!r) {
            if (PQstatus(c->pg) != CONNECTION_OK) rc = LOG_EDOWN;
            continue;
        }
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            break;
        }
        if (!ok(r) && st != PGRES_PIPELINE_ABORTED) {
            read_only(c, r);
            int e = pg_error(lc, r);
            /* As outside a trial: a lost connection, a deadlock or a read-only
             * server lose the whole group; anything else is some operation's own
             * failure, which the group run again with savepoints tells apart. */
            rc = unread_failed(c, e);
        }
        PQclear(r);
    }
    leave_pipeline(c);
    if (PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF && !rc) rc = LOG_EDOWN;
    c->pending = 0;
    if (PQstatus(c->pg) == CONNECTION_OK) note_tx(c);
    if (rc && (!c->trial_rc || c->trial_rc == LOG_ERERUN)) c->trial_rc = rc;
    return c->trial_rc;
}

/* The next result of statements sent with one sync (each result's NULL after it
 * skipped): NULL once the sync's came (read and dropped) or the connection went.
 * *guard bounds the reads, should the connection go under them. */
static PGresult *next_result(pg_conn *c, int *guard)
{
    while ((*guard)-- > 0) {
        PGresult *r = PQgetResult(c->pg);
        if (!r) {
            if (PQstatus(c->pg) != CONNECTION_OK) return NULL;
            continue;
        }
        if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            return NULL;
        }
        return r;
    }
    return NULL;
}

PGresult *pg_run_after(log_conn_t *lc, const char *sql, const pg_params *p, int binary, int *rc)
{
    pg_conn *c = pgc(lc);
    const char *name = known_name(c, sql);
    *rc = 0;
    /* Nothing sent and unread, or a statement not prepared yet (the first group of
     * a connection; one that none can be prepared for any more goes unnamed): the
     * unread ones' round trip first. */
    if (!c->pending || (!name && c->nprepared < PG_PREPARED_MAX) || !c->pg ||
        PQpipelineStatus(c->pg) == PQ_PIPELINE_OFF) {
        if ((*rc = pg_drain(lc))) return NULL;
        return pg_run(lc, sql, p, binary, rc);
    }
    c->nstmts++;
    pre_set ps;
    pre_stmts(c, &ps, 0);
    if (ps.due >= 0 && !ps.name[ps.due] && c->nprepared < PG_PREPARED_MAX) {
        /* The tails' UPDATE is not prepared on this connection yet (PQprepare
         * waits for its answer: not in the middle of a pipeline): the unread ones
         * first, then it prepared, once. */
        if ((*rc = pg_drain(lc))) {
            pre_done(c, &ps, 0);
            return NULL;
        }
        PGresult *fail = NULL;
        ps.name[ps.due] = prepared(c, ps.st[ps.due].sql, &fail);
        PQclear(fail);
        PGresult *r = run_pipelined(c, &ps, &name, &(pg_stmt){sql, p}, 1, binary);
        if (ok(r)) {
            note_tx(c);
            return r;
        }
        read_only(c, r);
        *rc = pg_error(lc, r);
        if (c->pg && PQstatus(c->pg) == CONNECTION_OK) note_tx(c);
        PQclear(r);
        return NULL;
    }
    int npre = ps.n, sent = 1, pre_ok = 0, trial = 0;
    for (int i = 0; i < npre && sent; i++) sent = send_one(c, ps.name[i], &ps.st[i], 0);
    if (sent) sent = send_one(c, name, &(pg_stmt){sql, p}, binary);
    if (sent) sent = PQpipelineSync(c->pg);
    /* Each statement's result and the NULL after it (PGRES_PIPELINE_ABORTED for
     * those after a failed one): the unread ones, those due, then sql's; then the
     * sync's. Bounded, should the connection go under it. */
    PGresult *got = NULL, *r;
    int all = c->pending + npre + 1, k = 0;
    for (int guard = 2 * all + 8; sent && (r = next_result(c, &guard));) {
        ExecStatusType st = PQresultStatus(r);
        int i = k++;
        if (i == all - 1 && ok(r)) {
            got = r;
            continue;
        }
        if (i < all - 1 && ok(r)) {
            if (i >= c->pending) pre_ok++;
        } else if (st != PGRES_PIPELINE_ABORTED) {
            read_only(c, r);
            int e = pg_error(lc, r);
            /* As pg_drain: a lost connection, a deadlock or a read-only server lose
             * the group; anything else before sql is some operation's own failure,
             * which the group run again with savepoints tells apart; sql's own
             * failure is its error. */
            if (i < all - 1) {
                if (!trial) trial = unread_failed(c, e);
            } else if (!*rc) {
                *rc = e;
            }
        }
        PQclear(r);
    }
    if (k < all && !trial && !*rc) trial = LOG_EDOWN;     /* the connection went */
    leave_pipeline(c);
    if (PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF && !trial) trial = LOG_EDOWN;
    pre_done(c, &ps, pre_ok == npre);
    c->pending = 0;
    if (PQstatus(c->pg) == CONNECTION_OK) note_tx(c);
    if (trial && (!c->trial_rc || c->trial_rc == LOG_ERERUN)) c->trial_rc = trial;
    if (c->trial_rc) {
        *rc = c->trial_rc;
        PQclear(got);
        return NULL;
    }
    if (!got && !*rc) *rc = LOG_EIO;
    return got;
}

int pg_run_commit(log_conn_t *lc, const char *sql, const pg_params *p, int *committed)
{
    pg_conn *c = pgc(lc);
    int rc = 0;
    *committed = 0;
    if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) return LOG_EDOWN;
    c->nstmts++;
    /* PQprepare waits for its answer (not in the middle of a pipeline): sql, or the
     * tails' UPDATE, not prepared on this connection yet (its first groups), after
     * the unread ones' round trip. */
    const char *name = known_name(c, sql);
    if (!name && c->nprepared < PG_PREPARED_MAX) {
        if ((rc = pg_drain(lc))) return rc;
        PGresult *fail = NULL;
        name = prepared(c, sql, &fail);
        PQclear(fail);          /* (it then goes unnamed, and fails as it would) */
    }
    pre_set ps;
    pre_stmts(c, &ps, 0);
    if (ps.due >= 0 && !ps.name[ps.due] && c->nprepared < PG_PREPARED_MAX) {
        if ((rc = pg_drain(lc))) {
            pre_done(c, &ps, 0);
            return rc;
        }
        PGresult *fail = NULL;
        ps.name[ps.due] = prepared(c, ps.st[ps.due].sql, &fail);
        PQclear(fail);
    }
    int npre = ps.n, pre_ok = 0, trial = 0, done = 0;
    int sent = PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF || PQenterPipelineMode(c->pg);
    for (int i = 0; i < npre && sent; i++) sent = send_one(c, ps.name[i], &ps.st[i], 0);
    if (sent) sent = send_one(c, name, &(pg_stmt){sql, p}, 0);
    if (sent) sent = PQsendQueryParams(c->pg, "COMMIT", 0, NULL, NULL, NULL, NULL, 0);
    if (sent) sent = PQpipelineSync(c->pg);
    /* Each statement's result and the NULL after it (PGRES_PIPELINE_ABORTED for
     * those after a failed one: then not the COMMIT either): the unread ones, those
     * due, sql's, the COMMIT's; then the sync's. Bounded, should the connection go
     * under it. */
    int all = c->pending + npre + 2, k = 0;
    PGresult *r;
    for (int guard = 2 * all + 8; sent && (r = next_result(c, &guard));) {
        ExecStatusType st = PQresultStatus(r);
        int i = k++;
        if (ok(r)) {
            if (i >= c->pending && i < all - 2) pre_ok++;
            /* A COMMIT of a transaction that had failed is answered "ROLLBACK". */
            if (i == all - 1 && !strcmp(PQcmdStatus(r), "COMMIT")) done = 1;
        } else if (st != PGRES_PIPELINE_ABORTED) {
            read_only(c, r);
            int e = pg_error(lc, r);
            /* As pg_run_after: before sql, the trial's (or the operation's) failure;
             * sql's or the COMMIT's own, the group's error. */
            if (i < all - 2) {
                if (!trial) trial = unread_failed(c, e);
            } else if (!rc) {
                rc = e;
            }
        }
        PQclear(r);
    }
    if (k < all && !trial && !rc) trial = LOG_EDOWN;     /* the connection went */
    leave_pipeline(c);
    if (PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF && !trial && !rc) trial = LOG_EDOWN;
    pre_done(c, &ps, pre_ok == npre);
    c->pending = 0;
    if (PQstatus(c->pg) == CONNECTION_OK) note_tx(c);
    if (trial && (!c->trial_rc || c->trial_rc == LOG_ERERUN)) c->trial_rc = trial;
    if (done) {                 /* (nothing before it failed, then) */
        *committed = 1;
        c->in_tx = 0;
        return 0;
    }
    if (c->trial_rc) return c->trial_rc;
    return rc ? rc : LOG_EIO;
}

/* Before a statement that waits for its result: the trial's unread ones first.
 * 0, or the LOG_E* to answer instead of running it (the transaction is aborted
 * or lost: op_end and group_end find why in pg_conn.trial_rc). */
static int drained(pg_conn *c)
{
    if (!c->pending && (!c->pg || PQpipelineStatus(c->pg) == PQ_PIPELINE_OFF)) return 0;
    int rc = pg_drain(&c->base);
    return rc == LOG_ERERUN ? LOG_EIO : rc;
}

static PGresult *run_once(pg_conn *c, const char *sql, const pg_params *p, int binary)
{
    PGresult *fail = NULL;
    const char *name = prepared(c, sql, &fail);
    if (fail) return fail;
    pre_set ps;
    pre_stmts(c, &ps, 0);
    if (ps.n) return run_pipelined(c, &ps, &name, &(pg_stmt){sql, p}, 1, binary);
    int n = p ? p->n : 0;
    const char *const *v = p ? p->v : NULL;
    const int *len = p ? p->len : NULL, *fmt = p ? p->fmt : NULL;
    if (name) return PQexecPrepared(c->pg, name, n, v, len, fmt, binary);
    return PQexecParams(c->pg, sql, n, NULL, v, len, fmt, binary);
}

/* Before a statement: the connection made again if it went, or, outside a
 * transaction, if it is to be (pg_stale). 0, or LOG_EDOWN. */
static int ready(log_conn_t *lc)
{
    pg_conn *c = pgc(lc);
    if ((!c->pg || (!c->in_tx && pg_stale(lc))) && !pg_reconnect(lc)) return LOG_EDOWN;
    return 0;
}

/* After a statement: whether the connection is inside a transaction now. */
static void note_tx(pg_conn *c)
{
    PGTransactionStatusType t = PQtransactionStatus(c->pg);
    if (t == PQTRANS_IDLE) c->in_tx = 0;
    else if (t == PQTRANS_INTRANS || t == PQTRANS_INERROR) c->in_tx = 1;
    /* PQTRANS_UNKNOWN (lost): keep what it was, so that no retry happens inside one. */
}

PGresult *pg_run(log_conn_t *lc, const char *sql, const pg_params *p, int binary, int *rc)
{
    pg_conn *c = pgc(lc);
    int dummy;
    if (!rc) rc = &dummy;
    *rc = 0;
    c->nstmts++;
    if ((*rc = drained(c))) return NULL;
    if ((*rc = ready(lc))) return NULL;
    int savepoint_due = c->savepoint_due, release_due = c->release_due;
    PGresult *r = run_once(c, sql, p, binary);
    int ro = read_only(c, r);
    if (!ok(r) && !c->in_tx && (lost(c, r) || ro)) {
        /* Lost, or refused as read-only, outside a transaction: nothing was half
         * done; one more try on a new connection (the first statement after a
         * restart of the server finds the old one dead; after a switchover, libpq's
         * target_session_attrs=read-write finds the new primary). A group's first
         * statement, sent with its BEGIN, goes again with it and its savepoint. */
        PQclear(r);
        r = NULL;
        c->savepoint_due = savepoint_due;
        c->release_due = release_due;
        c->savepoint_lost = 0;
        if (pg_reconnect(lc)) r = run_once(c, sql, p, binary);
    }
    if (ok(r)) {
        note_tx(c);
        if (c->in_tx) c->begin_due = NULL;
        return r;
    }
    *rc = pg_error(lc, r);
    if (c->pg && PQstatus(c->pg) == CONNECTION_OK) note_tx(c);
    PQclear(r);
    return NULL;
}

int pg_exec(log_conn_t *c, const char *sql, const pg_params *p)
{
    int rc;
    PGresult *r = pg_run(c, sql, p, 0, &rc);
    PQclear(r);
    return rc;
}

/* A trial's statements that leave the rows alone (pg_flight_kept): sent in
 * pipeline mode and flushed, so that the server runs them while this process
 * goes on; their results are read by pg_drain. 0, or LOG_E* when they could not
 * be sent (the trial fails: pg_conn.trial_rc). */
static int sent_only(pg_conn *c, const pg_stmt *st, int n)
{
    const char *name[PG_FLIGHT_MAX];
    /* Results unread pile up at the server's end of the socket: read them before
     * it would stop reading ours. */
    if (c->pending >= PG_PENDING_MAX) {
        int rc = drained(c);
        if (rc) return rc;
    }
    for (int i = 0; i < n; i++) {
        int known = known_name(c, st[i].sql) != NULL;
        name[i] = NULL;
        /* None kept past PG_PREPARED_MAX: sent unnamed (as pg_run does). */
        if (!known && c->nprepared >= PG_PREPARED_MAX) continue;
        /* PQprepare waits for its answer: not in the middle of a pipeline. */
        if (!known && (c->pending || PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF)) {
            int rc = drained(c);
            if (rc) return rc;
        }
        PGresult *fail = NULL;
        name[i] = prepared(c, st[i].sql, &fail);
        if (fail) {
            int rc = pg_error(&c->base, fail);
            PQclear(fail);
            if (!c->trial_rc) c->trial_rc = unread_failed(c, rc);
            return rc;
        }
    }
    int ok_sent = PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF || PQenterPipelineMode(c->pg);
    for (int i = 0; i < n && ok_sent; i++) {
        ok_sent = send_one(c, name[i], &st[i], 0);
        if (ok_sent) c->pending++;
    }
    if (ok_sent) ok_sent = PQflush(c->pg) == 0;
    if (!ok_sent) {
        int rc = PQstatus(c->pg) == CONNECTION_OK ? unread_failed(c, LOG_EIO) : LOG_EDOWN;
        if (!c->trial_rc || c->trial_rc == LOG_ERERUN) c->trial_rc = rc;
        return rc == LOG_ERERUN ? LOG_EIO : rc;
    }
    return 0;
}

static int flight(log_conn_t *lc, const pg_stmt *st, int n, int keep)
{
    pg_conn *c = pgc(lc);
    const char *name[PG_FLIGHT_MAX];
    PGresult *r = NULL;
    if (n < 1 || n > PG_FLIGHT_MAX) abort();    /* a bug of the caller */
    c->nstmts++;
    if (!pg_in_tx(lc)) return LOG_EIO;          /* ditto: inside a group only */
    /* The group's first statement (its BEGIN due with it): on a connection made
     * again if it went, as pg_run's. */
    int rrc = ready(lc);
    if (rrc) return rrc;
    if (keep && c->bare && c->in_tx && !c->savepoint_due && !c->release_due) return sent_only(c, st, n);
    int drc = drained(c);
    if (drc) return drc;
    for (int i = 0; i < n && !r; i++) name[i] = prepared(c, st[i].sql, &r);
    if (!r) {
        pre_set ps;
        pre_stmts(c, &ps, keep);
        r = run_pipelined(c, &ps, name, st, n, 0);
    }
    read_only(c, r);
    int rc = ok(r) ? 0 : pg_error(lc, r);
    if (PQstatus(c->pg) == CONNECTION_OK) note_tx(c);
    PQclear(r);
    return rc;
}

int pg_flight(log_conn_t *lc, const pg_stmt *st, int n)
{
    return flight(lc, st, n, 0);
}

int pg_flight_kept(log_conn_t *lc, const pg_stmt *st, int n)
{
    return flight(lc, st, n, 1);
}

int pg_simple(log_conn_t *lc, const char *sql)
{
    pg_conn *c = pgc(lc);
    c->nstmts++;
    int drc = drained(c);
    if (drc && strncmp(sql, "ROLLBACK", 8)) return drc;
    if (ready(lc)) return LOG_EDOWN;
    if (c->begin_due && !c->in_tx) {
        /* A read's BEGIN still due: on its own first (no read sends one so). */
        const char *b = c->begin_due;
        c->begin_due = NULL;
        int brc = pg_simple(lc, b);
        if (brc) return brc;
    }
    /* The tails kept back go before anything but a rollback (which undoes them or
     * what they would be written into: pg_streams_op_undone). */
    pre_set ps;
    pre_stmts(c, &ps, !strncmp(sql, "ROLLBACK", 8));
    PGresult *r = NULL;
    /* The statements due, first (a round trip each: the operations that send such
     * statements are few). */
    for (int i = 0; i < ps.n; i++) {
        const pg_params *p = ps.st[i].p;
        int n = p ? p->n : 0;
        const char *const *v = p ? p->v : NULL;
        const int *len = p ? p->len : NULL, *fmt = p ? p->fmt : NULL;
        PQclear(r);
        r = ps.name[i] ? PQexecPrepared(c->pg, ps.name[i], n, v, len, fmt, 0)
                       : PQexecParams(c->pg, ps.st[i].sql, n, NULL, v, len, fmt, 0);
        if (!ok(r)) {
            c->savepoint_lost = 1;
            break;
        }
    }
    pre_done(c, &ps, !ps.n || ok(r));
    if (!ps.n || ok(r)) {
        PQclear(r);
        r = PQexec(c->pg, sql);
    }
    int ro = read_only(c, r);
    if (!ok(r) && !c->in_tx && (lost(c, r) || ro)) {
        PQclear(r);
        r = pg_reconnect(lc) ? PQexec(c->pg, sql) : NULL;
    }
    int rc = ok(r) ? 0 : pg_error(lc, r);
    /* A COMMIT of a transaction that had failed is answered "ROLLBACK", without an
     * error: nothing was committed, and nothing of it may be acknowledged. */
    if (!rc && !strcmp(sql, "COMMIT") && strcmp(PQcmdStatus(r), "COMMIT")) rc = LOG_EIO;
    if (c->pg && PQstatus(c->pg) == CONNECTION_OK) note_tx(c);
    /* After COMMIT or ROLLBACK, whatever became of them, no transaction is open
     * (on a lost connection it went with it): the next statement may reconnect. */
    if ((!strcmp(sql, "COMMIT") || !strcmp(sql, "ROLLBACK")) && rc) c->in_tx = 0;
    PQclear(r);
    return rc;
}

int64_t pg_int_of(const PGresult *r, int row, int col)
{
    if (!r || row >= PQntuples(r) || PQgetisnull(r, row, col)) return 0;
    const char *s = PQgetvalue(r, row, col);
    return strtoll(s, NULL, 10);
}

const char *pg_text_of(const PGresult *r, int row, int col)
{
    if (!r || row >= PQntuples(r) || PQgetisnull(r, row, col)) return NULL;
    return PQgetvalue(r, row, col);
}

int pg_null_at(const PGresult *r, int row, int col)
{
    return !r || row >= PQntuples(r) || PQgetisnull(r, row, col);
}

int64_t pg_int_at(const PGresult *r, int row, int col)
{
    if (pg_null_at(r, row, col)) return 0;
    const unsigned char *b = (const unsigned char *)PQgetvalue(r, row, col);
    int len = PQgetlength(r, row, col);
    uint64_t v = 0;
    for (int i = 0; i < len && i < 8; i++) v = (v << 8) | b[i];
    /* Sign-extend the narrower integers. */
    if (len == 4) return (int32_t)(uint32_t)v;
    if (len == 2) return (int16_t)(uint16_t)v;
    return (int64_t)v;
}

int64_t pg_affected(const PGresult *r)
{
    const char *s = r ? PQcmdTuples((PGresult *)r) : "";
    return s && *s ? strtoll(s, NULL, 10) : 0;
}

void pg_changed(log_conn_t *lc, int64_t id)
{
    pgc(lc)->changed_unkept = 1;
    pg_changed_kept(lc, id);
}

void pg_changed_kept(log_conn_t *lc, int64_t id)
{
    pg_conn *c = pgc(lc);
    if (c->changed_all) return;
    for (int i = 0; i < c->nchanged; i++)
        if (c->changed[i] == id) return;
    if (c->nchanged >= PG_CHANGED_MAX) {
        c->changed_all = 1;
        return;
    }
    c->changed[c->nchanged++] = id;
}

/* The PostgreSQL engine: the process's handle, the steps of the group commit, and
 * the table lib/log.c dispatches through (connections: pg_conn.c; the query helpers:
 * pg_query.c; migrations: pg_db.c; each area's SQL in a file of its own).
 *
 * A group is one transaction on the leader's connection: BEGIN, a SAVEPOINT per
 * operation (ROLLBACK TO it when the operation failed, so that it rolls back
 * alone), COMMIT. The BEGIN costs no round trip of its own: it goes with
 * the group's first statement (pg_conn.begin_due, as a read's), and a group that
 * sent nothing sends neither it nor a COMMIT; until it went, the group counts as
 * inside a transaction all the same (pg_in_tx), and its first statement, should
 * its connection be found lost or its server refuse it as read-only, goes again
 * with it on a new connection, as a statement outside a transaction does. The
 * savepoint costs no round trip of its own: it goes with the operation's first
 * statement, and its RELEASE with the next operation's SAVEPOINT or in the COMMIT
 * (pg.h: pg_conn.savepoint_due); an operation that sends no statement takes none.
 * The tails of the streams the group appended to go once per stream, before the
 * next statement of anything else (pg_streams.c:
 * the tails kept back); an operation rolled back to its savepoint takes back its
 * changes to them (pg_streams_op_undone). Writers of every process and host run their
 * groups at once; what they share they lock row by row (a stream's tail row, FOR
 * UPDATE), so there is no writers' lock to take and group_release has nothing to
 * drop. The rows of
 * the streams a group writes are locked first, all in id order (group_lock), so
 * that groups writing the same streams queue rather than deadlock. A group that
 * lost a deadlock or a serialization conflict fails as a whole (LOG_EBUSY, nothing
 * acknowledged), which releases its locks for the other one at once.
 *
 * A trial. A group made only of appends (store.h: group_trial) runs them with no
 * savepoint each, and the insert of an append whose row the group holds is sent
 * in pipeline mode without waiting for its result (pg_query.c: pg_flight_kept;
 * the offsets follow from the locked tail, so the append's outcome is known
 * before its result comes back); those results are all read before any statement
 * that waits for its own, and before the NOTIFY and the COMMIT, so nothing is
 * acknowledged that did not commit. A savepoint is a subtransaction (an xid of its
 * own, past 64 in a transaction the subxid cache overflows) and two more
 * statements per append; waiting for each insert is a round trip per append. Should
 * an append fail after it sent a statement, or an insert sent so come back
 * failed, no operation can be undone alone: the transaction is rolled back and
 * lib/log.c runs the whole group again the usual way, a savepoint each
 * (LOG_ERERUN), so that every operation's result is still its own; an append alone
 * in its group is undone by its transaction's ROLLBACK instead. A failure that
 * loses the group anyway (a lost connection, a deadlock) loses it as before.
 * An operation alone in its group (the runner's commits, a quiet pool's write)
 * takes no savepoint either, trial or not: its transaction is its savepoint. Its
 * inserts go unread as a trial's; one that comes back failed fails it with its
 * own error (nothing to run apart: its ROLLBACK undoes it).
 *
 * Each committed group sends at most one NOTIFY (channel "dstream") naming its
 * transaction and the streams it changed ("7301:12,40,41"; "7301:*" when they
 * would not fit), so readers on
 * every host wake (feed.c) at the cost of one notification per commit, not one
 * per append (NOTIFY takes a cluster-wide lock at commit). A group that took its
 * stream rows' lock read its transaction's id with it: its NOTIFY's statement and
 * its COMMIT then go in one pipeline after everything it left unread
 * (pg_run_commit), one round trip; the server runs that COMMIT only if every
 * statement before it in the pipeline succeeded. */
#include "pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_engine.h"

#define PG_NOTIFY_MAX 7870      /* the ids' bytes (PostgreSQL's payload limit is 8000; the xid goes first) */
static const char GROUP_BEGIN[] = "BEGIN";     /* a group's, due until its first statement (pg_conn.begin_due) */

/* ---- the process ---------------------------------------------------------------- */

static int pq_open(log_t *l, char *err, size_t errlen)
{
    PGconn *pg = pg_connect(l->target, err, errlen);
    if (!pg) return -1;
    int rc = 0;
    if (l->opts.migrate && pg_migrate(pg, err, errlen) < 0) rc = -1;
    PQfinish(pg);
    if (rc == 0) l->engine_state = pg_hist_new((size_t)l->opts.read_cache_kib * 1024);
    return rc;
}

static void pq_read_cache_stats(log_t *l, uint64_t *hits, uint64_t *misses, uint64_t *bytes)
{
    pg_hist_stats(l->engine_state, hits, misses, bytes);
}

static void pq_close(log_t *l)
{
    pg_hist_free(l->engine_state);
    l->engine_state = NULL;
}

/* ---- the group commit's steps ------------------------------------------------- */

static int pq_group_begin(log_conn_t *c)
{
    pg_conn *pc = pgc(c);
    pc->nchanged = 0;
    pc->changed_all = 0;
    pc->changed_unkept = 0;
    pc->savepoint_due = pc->release_due = pc->savepoint_lost = 0;
    pc->nested = 0;
    pc->trial = c->group_trial;
    pc->trial_rc = 0;
    pc->bare = pc->trial || c->group_ops == 1;
    pc->xid = 0;
    pg_rows_forget(pc);
    /* Sent with the group's first statement, in its round trip (pg_run). */
    pc->begin_due = GROUP_BEGIN;
    pc->in_group = 1;
    return 0;
}

/* The group's stream rows, locked in id order before any operation runs (each
 * operation's own FOR UPDATE then finds its row already held): every group takes
 * its rows in the same order, so two hosts' groups writing the same streams wait
 * for each other instead of deadlocking. The rows are kept (pg_streams.c): an
 * append finds its stream's there instead of reading it again. */
static int pq_group_lock(log_conn_t *c, const char *const *paths, size_t n)
{
    return pg_streams_lock(c, paths, n);
}

static int pq_op_begin(log_conn_t *c)
{
    pgc(c)->op_nchanged = pgc(c)->nchanged;
    pgc(c)->op_changed_all = pgc(c)->changed_all;
    pgc(c)->op_stmts = pgc(c)->nstmts;
    pgc(c)->savepoint_due = !pgc(c)->bare;     /* sent with its first statement */
    pgc(c)->op_serial++;
    pgc(c)->op_held = pgc(c)->rows_at == pgc(c)->nstmts;
    return 0;
}

/* op_end with no savepoint (a trial, or an operation alone in its group: the
 * essay above): an operation alone is undone by its transaction's ROLLBACK, its
 * result its own; in a trial, one that failed after sending a statement cannot be
 * undone alone, so the group is run again, each operation in a savepoint
 * (LOG_ERERUN); so is one whose pipelined statement failed. */
static int bare_op_end(log_conn_t *c, int op_rc)
{
    pg_conn *pc = pgc(c);
    if (pc->trial_rc) return pc->trial_rc;
    if (op_rc >= 0 && PQtransactionStatus(pc->pg) == PQTRANS_INERROR) op_rc = LOG_EIO;
    if (op_rc >= 0 || pc->nstmts == pc->op_stmts) return 0;
    return c->group_ops == 1 ? op_rc : LOG_ERERUN;
}

static int pq_op_end(log_conn_t *c, int op_rc)
{
    pg_conn *pc = pgc(c);
    /* The connection went with the transaction: the group is lost. */
    if (PQstatus(pc->pg) != CONNECTION_OK) return LOG_EDOWN;
    /* A deadlock or serialization failure loses the whole group (design: nothing of
     * it is acknowledged, and its locks go at once); so does a write refused by a
     * read-only server (LOG_EDOWN: the group's other writes would be refused too). */
    if (op_rc == LOG_EBUSY || op_rc == LOG_EDOWN) return op_rc;
    if (pc->bare) return bare_op_end(c, op_rc);
    /* It sent no statement: nothing to undo, and no savepoint of its to release. */
    if (pc->savepoint_due) {
        pc->savepoint_due = 0;
        return 0;
    }
    /* Its savepoint, or the last one's release, failed: it cannot be undone alone
     * (ROLLBACK TO might reach an operation before it). */
    if (pc->savepoint_lost) return op_rc == LOG_EFULL ? op_rc : LOG_EIO;
    /* An operation that hid a failed statement left the transaction aborted: undo
     * it, and it fails (its caller must not be told it is committed). */
    if (op_rc >= 0 && PQtransactionStatus(pc->pg) == PQTRANS_INERROR) op_rc = c->op_undone = LOG_EIO;
    int rc = 0, held = pc->op_held && pc->rows_at == pc->nstmts;
    if (op_rc < 0) {
        /* What it changed is undone: the NOTIFY does not name it. */
        pc->nchanged = pc->op_nchanged;
        pc->changed_all = pc->op_changed_all;
        rc = pg_simple(c, "ROLLBACK TO op");
        /* The rows kept and the tails kept back, as they were before it. */
        if (!rc) pg_streams_op_undone(c, held);
    }
    /* Released with the next SAVEPOINT, or by the COMMIT (a subtransaction
     * commits with its parent): what it did stays either way. */
    if (!rc) pc->release_due = 1;
    return rc;
}

int pg_changes_trim(log_conn_t *c, int64_t keep)
{
    pg_params t;
    pg_params_init(&t);
    pg_int(&t, keep);
    /* One trimmer at a time (two deleting the same rows could deadlock): the
     * others skip theirs. */
    return pg_exec(c, "WITH l AS (SELECT pg_try_advisory_xact_lock(" PG_TRIM_LOCK ") AS got),"
                      " d AS (DELETE FROM stream_changes WHERE (SELECT got FROM l) AND xid <"
                      " (greatest(pg_snapshot_xmin(pg_current_snapshot())::text::bigint - $1, 0))::text::xid8"
                      " RETURNING xid)"
                      " INSERT INTO stream_changes (xid, ids) SELECT max(xid), NULL FROM d HAVING count(*) > 0",
                   &t);
}

/* The group's row of stream_changes (sql/pg/021_stream_changes.sql: the ids it
 * changed, or NULL past PG_CHANGED_MAX) and its NOTIFY (the ids, or "*" past
 * PostgreSQL's payload limit), in one statement; *xid gets its transaction's id
 * (0 when it sent none). When the group knows its id already (pg_conn.xid, read
 * with its rows' lock), the statement and the COMMIT go in one round trip
 * (pg_run_commit; *committed set when it committed), its NOTIFY expected before
 * they are sent, as it is before the COMMIT otherwise. One group in PG_TRIM_EVERY
 * of a connection first trims stream_changes: the rows PG_TRIM_KEEP transactions
 * or more older than the oldest one running go, replaced by one NULL row at the
 * newest of them (a look whose cursor is older than what is kept scans the
 * stream rows). */
static int notify(log_conn_t *c, int64_t *xid, int *committed)
{
    pg_conn *pc = pgc(c);
    char ids[PG_CHANGED_MAX * 21 + 3];  /* "{1,2,...}": each id with its comma */
    size_t k = 0;
    *xid = 0;
    *committed = 0;
    if (!pc->nchanged && !pc->changed_all) return 0;
    int rc;
    if (++pc->groups % PG_TRIM_EVERY == 0) {
        /* (A trial's unread inserts first: their failure is LOG_ERERUN, the group's
         * to run again, which a statement that waits would make LOG_EIO.) */
        if (pc->pending && (rc = pg_drain(c))) return rc;
        if ((rc = pg_changes_trim(c, PG_TRIM_KEEP))) return rc;
    }
    if (!pc->changed_all) {
        ids[k++] = '{';
        for (int i = 0; i < pc->nchanged; i++) {
            int w = snprintf(ids + k, sizeof ids - k, "%s%" PRId64, i ? "," : "", pc->changed[i]);
            if (w < 0 || k + (size_t)w >= sizeof ids - 1) return LOG_EIO;
            k += (size_t)w;
        }
        ids[k++] = '}';
        ids[k] = '\0';
    }
    /* The payload names them as the row does, without the braces, if it may. */
    if (!k || k - 2 > PG_NOTIFY_MAX) pc->changed_all = 1;
    char payload[PG_NOTIFY_MAX + 2];
    if (pc->changed_all) {
        memcpy(payload, "*", 2);
    } else {
        memcpy(payload, ids + 1, k - 2);
        payload[k - 2] = '\0';
    }
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, payload);
    if (k) pg_text(&p, ids);
    else pg_null(&p);
    /* "xid:ids": the feed skips, in its cursor's look, rows last changed by a
     * transaction whose NOTIFY it already reported. */
    static const char sql[] = "WITH ch AS (INSERT INTO stream_changes (ids) VALUES ($2::bigint[]))"
                              " SELECT pg_current_xact_id()::text, pg_notify('dstream', pg_current_xact_id()::text || ':' || $1)";
    if (pc->xid && pc->in_tx) {
        /* Expected before it is sent (its NOTIFY can reach the LISTEN connection
         * before the COMMIT's answer reaches us, and is skipped then too). */
        pg_feed_expect(c->log, pc->xid, pc->changed_all);
        *xid = pc->xid;
        return pg_run_commit(c, sql, &p, committed);
    }
    /* In a trial, after its inserts sent and unread and the tails' UPDATE, in
     * their round trip. */
    PGresult *r = pg_run_after(c, sql, &p, 0, &rc);
    if (r) *xid = pg_int_of(r, 0, 0);
    PQclear(r);
    return rc;
}

static int pq_group_end(log_conn_t *c, int rc)
{
    /* COMMIT releases every savepoint; ROLLBACK undoes them. */
    pgc(c)->savepoint_due = pgc(c)->release_due = 0;
    int64_t xid = 0;
    int committed = 0;
    /* Inserts sent and not yet read (a trial's, an operation's alone): all of them
     * succeeded, or the group is run again (LOG_ERERUN) or lost; nothing is
     * committed before that is known (the NOTIFY's statement reads them, in its
     * round trip: pg_run_after; or the COMMIT goes in the same pipeline after
     * them, and runs only if they all succeeded: pg_run_commit). */
    if (rc == 0) rc = notify(c, &xid, &committed);
    if (rc == 0 && !committed && (pgc(c)->trial || pgc(c)->pending)) rc = pg_drain(c);
    /* Before the COMMIT: its NOTIFY can reach the LISTEN connection before the
     * COMMIT's answer reaches us, and is skipped then too. */
    if (rc == 0 && xid && !committed) pg_feed_expect(c->log, xid, pgc(c)->changed_all);
    int sent = pgc(c)->begin_due != GROUP_BEGIN || pgc(c)->in_tx;   /* else nothing to end */
    if (committed) sent = 0;
    if (sent && rc == 0) rc = pg_simple(c, "COMMIT");
    else if (sent) pg_simple(c, "ROLLBACK");
    pgc(c)->begin_due = NULL;
    pgc(c)->in_group = 0;
    /* This connection's next look through the change cursor (pg_feed.c), and the
     * others' looks, which this change sends to the database; before anyone is
     * told of it. */
    if (xid) pg_changes_note(pgc(c), rc == 0 && pg_own_keep(pgc(c), xid));
    /* Committed: this process's waiters are told now, not when the NOTIFY comes
     * back to its LISTEN connection (pg_feed.c). */
    if (xid) pg_feed_committed(c->log, xid, rc == 0, pgc(c)->changed, pgc(c)->nchanged, pgc(c)->changed_all);
    pgc(c)->nchanged = 0;
    pgc(c)->changed_all = 0;
    pgc(c)->changed_unkept = 0;
    pg_rows_forget(pgc(c));     /* the tails kept back went with the COMMIT, or are undone */
    pgc(c)->trial = pgc(c)->bare = 0;
    pgc(c)->xid = 0;
    return rc;
}

static void pq_group_release(log_conn_t *c)
{
    (void)c;
}

/* No tail is kept back inside a nested savepoint (pg_streams.c: its ROLLBACK TO
 * would have to restore them): the tails kept back go before its SAVEPOINT. */
static int pq_nest_begin(log_conn_t *c)
{
    int rc = pg_simple(c, "SAVEPOINT nested");
    if (!rc) pgc(c)->nested++;
    return rc;
}

static int pq_nest_end(log_conn_t *c, int undo)
{
    int rc = undo ? pg_simple(c, "ROLLBACK TO nested") : 0;
    int rc2 = pg_simple(c, "RELEASE nested");
    if (pgc(c)->nested > 0) pgc(c)->nested--;
    return rc ? rc : rc2;
}

static int pq_sizes(log_conn_t *c, void (*fn)(void *ud, const char *what, int64_t bytes), void *ud)
{
    int rc;
    PGresult *r = pg_run(c, "SELECT pg_database_size(current_database())", NULL, 0, &rc);
    if (!r) return rc;
    fn(ud, "db", pg_int_of(r, 0, 0));
    PQclear(r);
    return 0;
}

static int pq_schema_version(void)
{
    return pg_schema_version();
}

/* ---- the engine ---------------------------------------------------------------- */

const store_engine store_pg = {
    .name = "postgresql",
    .utf8_text = 1,
    .open = pq_open,
    .close = pq_close,
    .conn_open = pg_conn_open,
    .conn_close = pg_conn_close,
    .group_begin = pq_group_begin,
    .group_lock = pq_group_lock,
    .op_begin = pq_op_begin,
    .op_end = pq_op_end,
    .group_end = pq_group_end,
    .group_release = pq_group_release,
    .nest_begin = pq_nest_begin,
    .nest_end = pq_nest_end,
    .sizes = pq_sizes,
    .release_memory = pg_conn_release,
    .read_cache_stats = pq_read_cache_stats,
    .schema_version = pq_schema_version,
    .streams = &pg_streams_ops,
    .feed = &pg_feed_ops,
    .leases = &pg_leases_ops,
    .rstats = &pg_rstats_ops,
    .defs = &pg_defs_ops,
    .tokens = &pg_tokens_ops,
    .sessions = &pg_sessions_ops,
    .recordings = &pg_recordings_ops,
    .subs = &pg_subs_ops,
    .backup = &pg_backup_ops,
    .copy = &pg_copy_ops,
    .retain = &pg_retain_ops,
};

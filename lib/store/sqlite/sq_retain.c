/* The SQLite engine's retention (lib/retain.h, lib/store.h: store_retain_ops):
 * the scan of a prefix's streams newest first, the thinning of finished
 * sessions' snapshots, and the totals kept for /metrics. */
#include "sq.h"

#include <stdio.h>
#include <string.h>

static int sq_scan(log_conn_t *c, const char *prefix, int64_t before_ms, const char *before_path, int max,
                   int (*fn)(void *ud, const retain_item *it), void *ud)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT st.path, st.created_ms, st.access_ms, st.forks, st.tail_seq - st.fork_seq, s.id, s.status"
                   " FROM streams st LEFT JOIN sessions s ON substr(st.path, 1, 9) = 'sessions/'"
                   "   AND s.id = substr(st.path, 10) AND s.deleted = 0"
                   " WHERE st.deleted = 0 AND substr(st.path, 1, length(?1)) = ?1"
                   "   AND (st.created_ms < ?2 OR (st.created_ms = ?2 AND st.path < ?3))"
                   " ORDER BY st.created_ms DESC, st.path DESC LIMIT ?4", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, before_ms);
    sqlite3_bind_text(st, 3, before_path ? before_path : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, max);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        retain_item it;
        it.path = (const char *)sqlite3_column_text(st, 0);
        it.created_ms = sqlite3_column_int64(st, 1);
        it.access_ms = sqlite3_column_int64(st, 2);
        it.forks = sqlite3_column_int64(st, 3);
        it.own_msgs = sqlite3_column_int64(st, 4);
        it.session = (const char *)sqlite3_column_text(st, 5);
        it.status = (const char *)sqlite3_column_text(st, 6);
        if (!it.path) continue;
        if (fn(ud, &it)) break;
    }
    return sq_stmt_finish(c, st, rc);
}

#define THIN_MAX 512

static int sq_thin(log_conn_t *c, const char *after_id, int max, int keep_every, char *last, size_t lastcap,
                   int64_t *removed)
{
    sqlite3_stmt *st;
    char ids[THIN_MAX][SSTORE_ID_MAX];
    int n = 0, seen = 0, rc;
    if (max > THIN_MAX) max = THIN_MAX;
    if (sq_stmt(c, "SELECT id, status IN ('completed', 'failed', 'cancelled') AND deleted = 0 FROM sessions"
                   " WHERE id > ? ORDER BY id LIMIT ?", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, after_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, max);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *id = sqlite3_column_text(st, 0);
        if (!id) continue;
        seen++;
        snprintf(last, lastcap, "%s", (const char *)id);
        if (sqlite3_column_int(st, 1)) snprintf(ids[n++], SSTORE_ID_MAX, "%s", (const char *)id);
    }
    if ((rc = sq_stmt_finish(c, st, rc))) return rc;
    for (int i = 0; i < n; i++) {
        if (sq_stmt(c, "DELETE FROM snapshots WHERE session = ?1 AND seq % ?2 <> 0 AND (seq + ?3) % ?2 <> 0"
                       " AND seq < (SELECT max(seq) FROM snapshots WHERE session = ?1)"
                       " AND seq > (SELECT min(seq) FROM snapshots WHERE session = ?1)", &st))
            return LOG_EIO;
        sqlite3_bind_text(st, 1, ids[i], -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, keep_every);
        sqlite3_bind_int(st, 3, (int)sstore_snapshot_phase(ids[i]));
        if ((rc = sq_stmt_run(c, st))) return rc;
        *removed += sqlite3_changes(sq_db(c));
    }
    return seen;
}

static int sq_add(log_conn_t *c, const char *what, int64_t n)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "INSERT INTO retention_totals (what, n) VALUES (?, ?)"
                   " ON CONFLICT (what) DO UPDATE SET n = n + excluded.n", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, what, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, n);
    return sq_stmt_run(c, st);
}

static int sq_totals(log_conn_t *c, void (*fn)(void *ud, const char *what, int64_t n), void *ud)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT what, n FROM retention_totals ORDER BY what", &st)) return 0;   /* no table yet */
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *w = sqlite3_column_text(st, 0);
        if (w) fn(ud, (const char *)w, sqlite3_column_int64(st, 1));
    }
    return sq_stmt_finish(c, st, rc);
}

const store_retain_ops sq_retain_ops = {
    .scan = sq_scan,
    .thin = sq_thin,
    .add = sq_add,
    .totals = sq_totals,
};

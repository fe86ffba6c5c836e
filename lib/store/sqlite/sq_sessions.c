/* The SQLite engine's sessions (lib/sstore.h): one row per session (its status
 * kept in step with its log by lib/sstore) and the snapshots of its view. */
#include "sq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW_COLS "id, stream, agent, workflow, wf_version, parent, fork_offset, status, " \
                 "created_ms, updated_ms, labels"

static void col(char *dst, size_t cap, sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static void row_of(sqlite3_stmt *st, sstore_row *row)
{
    col(row->id, sizeof row->id, st, 0);
    col(row->stream, sizeof row->stream, st, 1);
    col(row->agent, sizeof row->agent, st, 2);
    col(row->workflow, sizeof row->workflow, st, 3);
    row->wf_version = sqlite3_column_int(st, 4);
    col(row->parent, sizeof row->parent, st, 5);
    col(row->fork_offset, sizeof row->fork_offset, st, 6);
    col(row->status, sizeof row->status, st, 7);
    row->created_ms = sqlite3_column_int64(st, 8);
    row->updated_ms = sqlite3_column_int64(st, 9);
    col(row->labels, sizeof row->labels, st, 10);
}

/* An empty text is stored as NULL (no agent, no workflow, no parent). */
static void bind_opt(sqlite3_stmt *st, int i, const char *s)
{
    if (s[0]) sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

static int sq_get(log_conn_t *c, const char *id, sstore_row *row)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT " ROW_COLS " FROM sessions WHERE id = ? AND deleted = 0", &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) row_of(st, row);
    sq_stmt_done(c, st);
    return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? LOG_ENOTFOUND : LOG_EIO;
}

static int sq_kin_get(log_conn_t *c, const char *id, sstore_row *row, int *deleted)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT " ROW_COLS ", deleted FROM sessions WHERE id = ?", &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        row_of(st, row);
        *deleted = sqlite3_column_int(st, 11) != 0;
    }
    sq_stmt_done(c, st);
    return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? LOG_ENOTFOUND : LOG_EIO;
}

static int sq_children(log_conn_t *c, const char *id, int max,
                       int (*fn)(void *ud, const sstore_row *row, int deleted), void *ud)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT " ROW_COLS ", deleted FROM sessions WHERE parent = ?"
                    " ORDER BY created_ms, id LIMIT ?", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, max);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sstore_row row;
        row_of(st, &row);
        if (fn(ud, &row, sqlite3_column_int(st, 11) != 0)) break;
    }
    sq_stmt_done(c, st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : LOG_EIO;
}

/* The filter's labels (a JSON object) are matched key by key: a session lacking one,
 * or holding another value, is left out (keys are lib/sfilter's: no quote to escape). */
static int sq_list(log_conn_t *c, const sstore_filter *f, int64_t before_ms, const char *before_id, int max,
                   int (*fn)(void *ud, const sstore_row *row), void *ud)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT " ROW_COLS " FROM sessions WHERE deleted = 0"
                    " AND (?1 IS NULL OR status = ?1)"
                    " AND (created_ms < ?2 OR (created_ms = ?2 AND id < ?3))"
                    " AND (?5 IS NULL OR agent = ?5) AND (?6 IS NULL OR workflow = ?6)"
                    " AND (?7 IS NULL OR created_ms > ?7) AND (?8 IS NULL OR created_ms < ?8)"
                    " AND (?9 IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(?9) AS f"
                    "   WHERE json_extract(sessions.labels, '$.\"' || f.key || '\"') IS NOT f.value))"
                    " ORDER BY created_ms DESC, id DESC LIMIT ?4", &st))
        return LOG_EIO;
    bind_opt(st, 1, f->status);
    sqlite3_bind_int64(st, 2, before_ms);
    sqlite3_bind_text(st, 3, before_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, max);
    bind_opt(st, 5, f->agent);
    bind_opt(st, 6, f->workflow);
    if (f->has_after) sqlite3_bind_int64(st, 7, f->created_after);
    if (f->has_before) sqlite3_bind_int64(st, 8, f->created_before);
    bind_opt(st, 9, f->labels);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sstore_row row;
        row_of(st, &row);
        if (fn(ud, &row)) break;
    }
    sq_stmt_done(c, st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : LOG_EIO;
}

static int sq_unfinished(log_conn_t *c, void (*fn)(void *ud, const char *id), void *ud)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT id FROM sessions WHERE deleted = 0 AND status IN"
                    " ('pending', 'running', 'awaiting_input')", &st))
        return LOG_EIO;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *id = sqlite3_column_text(st, 0);
        if (id) fn(ud, (const char *)id);
    }
    return sq_stmt_finish(c, st, rc);
}

static int sq_insert(log_conn_t *c, const sstore_row *row)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "INSERT INTO sessions (id, stream, agent, workflow, wf_version, parent,"
                    " fork_offset, status, created_ms, updated_ms, labels) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, row->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, row->stream, -1, SQLITE_STATIC);
    bind_opt(st, 3, row->agent);
    bind_opt(st, 4, row->workflow);
    if (row->workflow[0]) sqlite3_bind_int(st, 5, row->wf_version);
    bind_opt(st, 6, row->parent);
    bind_opt(st, 7, row->fork_offset);
    sqlite3_bind_text(st, 8, row->status, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, row->created_ms);
    sqlite3_bind_int64(st, 10, row->updated_ms);
    bind_opt(st, 11, row->labels);
    return sq_stmt_run(c, st);
}

static int sq_set_status(log_conn_t *c, const char *id, const char *status, int64_t now_ms)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "UPDATE sessions SET status = ?, updated_ms = ? WHERE id = ?", &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, status, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, now_ms);
    sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
    return sq_stmt_run(c, st);
}

static int sq_forget_deleted(log_conn_t *c, const char *id)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "DELETE FROM sessions WHERE id = ? AND deleted = 1", &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    return sq_stmt_run(c, st);
}

static int sq_mark_deleted(log_conn_t *c, const char *id, int64_t now_ms)
{
    sqlite3_stmt *st;
    int rc;
    if (sq_stmt(c, "UPDATE sessions SET deleted = 1, updated_ms = ? WHERE id = ?", &st)) return LOG_EIO;
    sqlite3_bind_int64(st, 1, now_ms);
    sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
    if ((rc = sq_stmt_run(c, st))) return rc;
    if (sq_stmt(c, "DELETE FROM snapshots WHERE session = ?", &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = sq_stmt_run(c, st))) return rc;
    if (sq_stmt(c, "DELETE FROM otlp_cursors WHERE session = ?", &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    return sq_stmt_run(c, st);
}

static int sq_snapshot_before(log_conn_t *c, const char *id, uint64_t upto, offset_t *at, char **view)
{
    sqlite3_stmt *st;
    *view = NULL;
    if (sq_stmt(c, "SELECT seq, pos, view FROM snapshots WHERE session = ? AND seq <= ?"
                    " ORDER BY seq DESC LIMIT 1", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)upto);
    int rc = sqlite3_step(st), ret = 0;
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 2);
        at->seq = (uint64_t)sqlite3_column_int64(st, 0);
        at->pos = (uint64_t)sqlite3_column_int64(st, 1);
        if (t && !(*view = strdup((const char *)t))) ret = LOG_EIO;
        else ret = t ? 1 : 0;
    } else if (rc != SQLITE_DONE) {
        ret = LOG_EIO;
    }
    sq_stmt_done(c, st);
    return ret;
}

static int sq_snapshot_put(log_conn_t *c, const char *id, offset_t at, const char *view)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "INSERT OR REPLACE INTO snapshots (session, seq, pos, view) VALUES (?, ?, ?, ?)", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)at.seq);
    sqlite3_bind_int64(st, 3, (int64_t)at.pos);
    sqlite3_bind_text(st, 4, view, -1, SQLITE_STATIC);
    return sq_stmt_run(c, st);
}

static int sq_otlp_cursor(log_conn_t *c, const char *id, uint64_t *seq)
{
    sqlite3_stmt *st;
    *seq = 0;
    if (sq_stmt(c, "SELECT seq FROM otlp_cursors WHERE session = ?", &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *seq = (uint64_t)sqlite3_column_int64(st, 0);
    return sq_stmt_finish(c, st, rc);
}

static int sq_otlp_advance(log_conn_t *c, const char *id, uint64_t from, uint64_t to)
{
    sqlite3_stmt *st;
    int rc;
    if (sq_stmt(c, "UPDATE otlp_cursors SET seq = ? WHERE session = ? AND seq = ?", &st)) return LOG_EIO;
    sqlite3_bind_int64(st, 1, (int64_t)to);
    sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, (int64_t)from);
    if ((rc = sq_stmt_run(c, st))) return rc;
    if (sqlite3_changes(sq_db(c)) > 0) return 1;
    if (from != 0) return 0;
    /* None kept yet is a cursor at 0. */
    if (sq_stmt(c, "INSERT INTO otlp_cursors (session, seq) VALUES (?, ?) ON CONFLICT (session) DO NOTHING", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)to);
    if ((rc = sq_stmt_run(c, st))) return rc;
    return sqlite3_changes(sq_db(c)) > 0 ? 1 : 0;
}

static int sq_otlp_behind(log_conn_t *c, int (*fn)(void *ud, const char *id, uint64_t cursor), void *ud)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT s.id, COALESCE(o.seq, 0) FROM sessions s JOIN streams m ON m.path = s.stream"
                    " LEFT JOIN otlp_cursors o ON o.session = s.id"
                    " WHERE s.deleted = 0 AND m.tail_seq > COALESCE(o.seq, 0)", &st))
        return LOG_EIO;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *id = sqlite3_column_text(st, 0);
        if (id && fn(ud, (const char *)id, (uint64_t)sqlite3_column_int64(st, 1))) {
            rc = SQLITE_DONE;
            break;
        }
    }
    return sq_stmt_finish(c, st, rc);
}

const store_sessions_ops sq_sessions_ops = {
    .get = sq_get,
    .kin_get = sq_kin_get,
    .children = sq_children,
    .list = sq_list,
    .unfinished = sq_unfinished,
    .insert = sq_insert,
    .set_status = sq_set_status,
    .forget_deleted = sq_forget_deleted,
    .mark_deleted = sq_mark_deleted,
    .snapshot_before = sq_snapshot_before,
    .snapshot_put = sq_snapshot_put,
    .otlp_cursor = sq_otlp_cursor,
    .otlp_advance = sq_otlp_advance,
    .otlp_behind = sq_otlp_behind,
};

/* The SQLite engine's recordings (lib/recorder.h): one row per recorded provider
 * exchange or tool call, its body pieces as rows of recording_chunks. Which
 * recording answers which request is lib/recorder's rule; the queries here find
 * rows by identity, answer ordinal (meta.ordinal) and the asker's reach. */
#include "sq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void bind_id(sqlite3_stmt *st, int at, const rec_id *id)
{
    sqlite3_bind_text(st, at, id->session, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, at + 1, id->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, at + 2, id->key, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, at + 3, id->occurrence);
}

#define WHERE_ID "session = ? AND kind = ? AND key = ? AND occurrence = ?"

static int sq_open(log_conn_t *c, const rec_id *id, const char *request_id, const char *provider,
                   const char *model, const char *request_json, int64_t now_ms)
{
    sqlite3_stmt *st;
    int rc;
    if (sq_stmt(c, "DELETE FROM recording_chunks WHERE recording IN (SELECT id FROM recordings WHERE " WHERE_ID ")", &st))
        return LOG_EIO;
    bind_id(st, 1, id);
    if ((rc = sq_stmt_run(c, st))) return rc;
    if (sq_stmt(c, "DELETE FROM recordings WHERE " WHERE_ID, &st)) return LOG_EIO;
    bind_id(st, 1, id);
    if ((rc = sq_stmt_run(c, st))) return rc;
    if (sq_stmt(c, "INSERT INTO recordings (session, kind, key, occurrence, request_id, provider, model, request,"
                " created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", &st))
        return LOG_EIO;
    bind_id(st, 1, id);
    sqlite3_bind_text(st, 5, request_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, provider, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, request_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, now_ms);
    return sq_stmt_run(c, st);
}

static int sq_chunk(log_conn_t *c, const rec_id *id, int seq, int64_t t_ms, const void *data, size_t len)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "INSERT OR REPLACE INTO recording_chunks (recording, seq, t_ms, data)"
                " SELECT id, ?, ?, ? FROM recordings WHERE complete = 0 AND " WHERE_ID, &st))
        return LOG_EIO;
    sqlite3_bind_int(st, 1, seq);
    sqlite3_bind_int64(st, 2, t_ms);
    sqlite3_bind_blob(st, 3, len ? data : "", (int)len, SQLITE_STATIC);
    bind_id(st, 4, id);
    return sq_stmt_run(c, st);
}

static int sq_end(log_conn_t *c, const rec_id *id, long status, int result, const char *meta, int64_t now_ms)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "UPDATE recordings SET complete = 1, status = ?, result = ?, meta = ?, ended_ms = ? WHERE " WHERE_ID,
                 &st))
        return LOG_EIO;
    sqlite3_bind_int64(st, 1, status);
    sqlite3_bind_int(st, 2, result);
    if (meta) sqlite3_bind_text(st, 3, meta, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, now_ms);
    bind_id(st, 5, id);
    return sq_stmt_run(c, st);
}

/* A recording's answer ordinal (meta.ordinal), NULL when it has none. */
#define ORDINAL "(CASE WHEN json_valid(meta) THEN json_extract(meta, '$.ordinal') END)"

static int sq_find_in(log_conn_t *c, const char *kind, const char *key, int n, const char *session, rec_found *out,
                      char **meta)
{
    sqlite3_stmt *st;
    *meta = NULL;
    /* n >= 0: the one whose ordinal is n, else (a recording without one) the first
     * complete occurrence from n; REC_LATEST: the last one. */
    if (sq_stmt(c, n >= 0 ? "SELECT id, occurrence, status, result, meta FROM recordings WHERE session = ?1 AND kind = ?2"
                             " AND key = ?3 AND complete = 1 AND (" ORDINAL " = ?4 OR (" ORDINAL " IS NULL AND occurrence >= ?4))"
                             " ORDER BY " ORDINAL " IS NULL, occurrence LIMIT 1"
                           : "SELECT id, occurrence, status, result, meta FROM recordings WHERE session = ?1 AND kind = ?2"
                             " AND key = ?3 AND occurrence >= ?4 AND complete = 1 ORDER BY occurrence DESC LIMIT 1",
                 &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, key, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, n >= 0 ? n : 0);
    int rc = sqlite3_step(st), found = 0;
    if (rc == SQLITE_ROW) {
        out->rowid = sqlite3_column_int64(st, 0);
        snprintf(out->session, sizeof out->session, "%s", session);
        out->occurrence = sqlite3_column_int(st, 1);
        out->status = (long)sqlite3_column_int64(st, 2);
        out->result = sqlite3_column_int(st, 3);
        const char *m = (const char *)sqlite3_column_text(st, 4);
        found = 1;
        if (m && !(*meta = strdup(m))) found = LOG_EIO;
    } else if (rc != SQLITE_DONE) {
        found = LOG_EIO;
    }
    sq_stmt_done(c, st);
    return found;
}

/* The condition that a recording's session is one the asker may use: bound to a
 * JSON array of session-id prefixes (NULL: every session; "" is every session too,
 * as an unprefixed scope is). */
#define REACHABLE(n) "(?" #n " IS NULL OR EXISTS (SELECT 1 FROM json_each(?" #n ") WHERE substr(session, 1, length(value)) = value))"

static int sq_latest_session(log_conn_t *c, const char *kind, const char *key, const char *reach, char *out,
                             size_t cap)
{
    sqlite3_stmt *st;
    out[0] = '\0';
    if (sq_stmt(c, "SELECT session FROM recordings WHERE key = ?1 AND kind = ?2 AND complete = 1 AND " REACHABLE(3)
                " ORDER BY created_ms DESC, id DESC LIMIT 1", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
    if (reach) sqlite3_bind_text(st, 3, reach, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    sq_stmt_done(c, st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return LOG_EIO;
    return out[0] ? 1 : 0;
}

static int sq_provider_meta(log_conn_t *c, const char *session, int k, char **meta)
{
    sqlite3_stmt *st;
    *meta = NULL;
    if (sq_stmt(c, "SELECT meta FROM recordings WHERE session = ?1 AND kind = 'provider' AND complete = 1"
                    " ORDER BY id LIMIT 1 OFFSET ?2", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, k);
    int rc = sqlite3_step(st), ret = 0;
    if (rc == SQLITE_ROW) {
        const char *m = (const char *)sqlite3_column_text(st, 0);
        ret = 1;
        if (m && !(*meta = strdup(m))) ret = LOG_EIO;
    } else if (rc != SQLITE_DONE) {
        ret = LOG_EIO;
    }
    sq_stmt_done(c, st);
    return ret;
}

static int sq_chunks(log_conn_t *c, int64_t rowid, int (*fn)(void *ud, int64_t t_ms, const void *p, size_t n),
                     void *ud)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT t_ms, data FROM recording_chunks WHERE recording = ? ORDER BY seq", &st)) return LOG_EIO;
    sqlite3_bind_int64(st, 1, rowid);
    int rc, out = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && !out)
        out = fn(ud, sqlite3_column_int64(st, 0), sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1));
    if (!out && rc != SQLITE_DONE && rc != SQLITE_ROW) out = LOG_EIO;
    sq_stmt_done(c, st);
    return out;
}

static int sq_candidates(log_conn_t *c, const char *kind, const char *lineage, const char *reach, int limit,
                         int (*fn)(void *ud, const char *key, const char *session, int occurrence,
                                   const char *request),
                         void *ud)
{
    sqlite3_stmt *st;
    /* Lineage first (its sessions rank before the rest), most recent first; only
     * the lineage and the sessions the asker may use. */
    if (sq_stmt(c, "SELECT key, session, occurrence, request FROM recordings WHERE kind = ?1 AND complete = 1"
                " AND (session IN (SELECT value FROM json_each(?2)) OR " REACHABLE(4) ")"
                " ORDER BY (session IN (SELECT value FROM json_each(?2))) DESC, created_ms DESC, id DESC LIMIT ?3",
             &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, lineage, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, limit);
    if (reach) sqlite3_bind_text(st, 4, reach, -1, SQLITE_STATIC);
    int rc, out = 0;
    while (!out && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *k = sqlite3_column_text(st, 0), *s = sqlite3_column_text(st, 1),
                            *r = sqlite3_column_text(st, 3);
        out = fn(ud, k ? (const char *)k : "", s ? (const char *)s : "", sqlite3_column_int(st, 2),
                 r ? (const char *)r : NULL);
    }
    sq_stmt_done(c, st);
    return out;
}

#define COLS "id, session, kind, key, occurrence, request_id, provider, model, complete, status, result, meta," \
             " created_ms, ended_ms, pinned"

static const char *text_or_null(sqlite3_stmt *st, int i)
{
    return (const char *)sqlite3_column_text(st, i);
}

/* The row of a COLS select (columns from 0), extra (bytes or request) at 15. */
static void row_of(sqlite3_stmt *st, rec_row *r)
{
    memset(r, 0, sizeof *r);
    r->rowid = sqlite3_column_int64(st, 0);
    r->session = text_or_null(st, 1);
    r->kind = text_or_null(st, 2);
    r->key = text_or_null(st, 3);
    r->has_occurrence = sqlite3_column_type(st, 4) != SQLITE_NULL;
    r->occurrence = sqlite3_column_int64(st, 4);
    r->request_id = text_or_null(st, 5);
    r->provider = text_or_null(st, 6);
    r->model = text_or_null(st, 7);
    r->complete = sqlite3_column_int(st, 8);
    r->has_status = sqlite3_column_type(st, 9) != SQLITE_NULL;
    r->status = sqlite3_column_int64(st, 9);
    r->has_result = sqlite3_column_type(st, 10) != SQLITE_NULL;
    r->result = sqlite3_column_int64(st, 10);
    r->meta = text_or_null(st, 11);
    r->has_created = sqlite3_column_type(st, 12) != SQLITE_NULL;
    r->created_ms = sqlite3_column_int64(st, 12);
    r->has_ended = sqlite3_column_type(st, 13) != SQLITE_NULL;
    r->ended_ms = sqlite3_column_int64(st, 13);
    r->pinned = sqlite3_column_int(st, 14);
}

static int sq_list(log_conn_t *c, const char *session, const char *provider, const char *model, int64_t cursor,
                   int max, int (*fn)(void *ud, const rec_row *r), void *ud)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT " COLS ", (SELECT coalesce(sum(length(data)), 0) FROM recording_chunks WHERE recording = id)"
                " FROM recordings WHERE (?1 IS NULL OR session = ?1) AND (?2 IS NULL OR provider = ?2)"
                " AND (?3 IS NULL OR model = ?3) AND (?4 = 0 OR id < ?4) ORDER BY id DESC LIMIT ?5", &st))
        return LOG_EIO;
    if (session) sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    if (provider) sqlite3_bind_text(st, 2, provider, -1, SQLITE_STATIC);
    if (model) sqlite3_bind_text(st, 3, model, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, cursor);
    sqlite3_bind_int(st, 5, max);
    int rc, out = 0;
    while (!out && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        rec_row r;
        row_of(st, &r);
        r.bytes = sqlite3_column_int64(st, 15);
        out = fn(ud, &r);
    }
    sq_stmt_done(c, st);
    if (out) return out > 0 ? 0 : out;
    return rc == SQLITE_DONE ? 0 : LOG_EIO;
}

static int sq_each(log_conn_t *c, const char *key, const char *session, int (*fn)(void *ud, const rec_row *r),
                   void *ud)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT " COLS ", request FROM recordings WHERE (?1 IS NULL OR key = ?1)"
                    " AND (?2 IS NULL OR session = ?2) ORDER BY id", &st))
        return LOG_EIO;
    if (key) sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (session) sqlite3_bind_text(st, 2, session, -1, SQLITE_STATIC);
    int rc = SQLITE_DONE, out = 0;
    while (!out && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        rec_row r;
        row_of(st, &r);
        r.request = text_or_null(st, 15);
        out = fn(ud, &r);
    }
    if (!out && rc != SQLITE_DONE) out = LOG_EIO;
    sq_stmt_done(c, st);
    return out;
}

static int exec_count(log_conn_t *c, const char *sql, const char *arg, int iarg)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, sql, &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
    if (iarg >= 0) sqlite3_bind_int(st, 2, iarg);
    int rc = sq_stmt_run(c, st);
    return rc ? rc : sqlite3_changes(sq(c)->db);
}

static int sq_delete_key(log_conn_t *c, const char *key)
{
    int rc = exec_count(c, "DELETE FROM recording_chunks WHERE recording IN (SELECT id FROM recordings WHERE key = ?1)",
                        key, -1);
    return rc < 0 ? rc : exec_count(c, "DELETE FROM recordings WHERE key = ?1", key, -1);
}

static int sq_pin(log_conn_t *c, const char *key, int pinned)
{
    return exec_count(c, "UPDATE recordings SET pinned = ?2 WHERE key = ?1", key, pinned ? 1 : 0);
}

static int sq_pin_one(log_conn_t *c, const rec_id *id)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "UPDATE recordings SET pinned = 1 WHERE " WHERE_ID, &st)) return LOG_EIO;
    bind_id(st, 1, id);
    return sq_stmt_run(c, st);
}

static int sq_delete_session(log_conn_t *c, const char *session)
{
    int rc = exec_count(c, "DELETE FROM recording_chunks WHERE recording IN"
                           " (SELECT id FROM recordings WHERE session = ?1 AND pinned = 0)", session, -1);
    if (rc >= 0) rc = exec_count(c, "DELETE FROM recordings WHERE session = ?1 AND pinned = 0", session, -1);
    return rc < 0 ? rc : 0;
}

static int sq_prune(log_conn_t *c, int64_t cutoff_ms, int dry_run, int64_t *count, int64_t *bytes)
{
    sqlite3_stmt *st;
    *count = *bytes = 0;
    if (sq_stmt(c, "SELECT count(*), coalesce(sum(length(request) + (SELECT coalesce(sum(length(data)), 0)"
                " FROM recording_chunks WHERE recording = id)), 0) FROM recordings WHERE pinned = 0 AND created_ms < ?",
             &st))
        return LOG_EIO;
    sqlite3_bind_int64(st, 1, cutoff_ms);
    if (sqlite3_step(st) == SQLITE_ROW) {
        *count = sqlite3_column_int64(st, 0);
        *bytes = sqlite3_column_int64(st, 1);
    }
    sq_stmt_done(c, st);
    if (dry_run || !*count) return 0;
    if (sq_stmt(c, "DELETE FROM recording_chunks WHERE recording IN"
                " (SELECT id FROM recordings WHERE pinned = 0 AND created_ms < ?)", &st))
        return LOG_EIO;
    sqlite3_bind_int64(st, 1, cutoff_ms);
    int rc = sq_stmt_run(c, st);
    if (rc) return rc;
    if (sq_stmt(c, "DELETE FROM recordings WHERE pinned = 0 AND created_ms < ?", &st)) return LOG_EIO;
    sqlite3_bind_int64(st, 1, cutoff_ms);
    return sq_stmt_run(c, st);
}

const store_recordings_ops sq_recordings_ops = {
    .open = sq_open,
    .chunk = sq_chunk,
    .end = sq_end,
    .find_in = sq_find_in,
    .latest_session = sq_latest_session,
    .provider_meta = sq_provider_meta,
    .chunks = sq_chunks,
    .candidates = sq_candidates,
    .list = sq_list,
    .each = sq_each,
    .delete_key = sq_delete_key,
    .pin = sq_pin,
    .pin_one = sq_pin_one,
    .delete_session = sq_delete_session,
    .prune = sq_prune,
};

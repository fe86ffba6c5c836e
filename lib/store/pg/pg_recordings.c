/* The PostgreSQL engine's recordings (lib/recorder.h): one row per recorded provider
 * exchange or tool call, its body pieces as rows of recording_chunks (bytea). The
 * queries are lib/store/sqlite/sq_recordings.c's, with jsonb for what SQLite reads with
 * json_each and json_extract: the answer ordinal (meta.ordinal, meta kept as the text
 * the recorder wrote, read through ds_jsonb(), which is NULL for text that is not
 * JSON as SQLite's json_valid guard is) and the asker's reach (a JSON array of
 * session-id prefixes). Text that SQLite orders or compares byte-wise is compared
 * COLLATE "C" here, whatever the database's default collation. */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void param_id(pg_params *p, const rec_id *id)
{
    pg_text(p, id->session);
    pg_text(p, id->kind);
    pg_text(p, id->key);
    pg_int(p, id->occurrence);
}

#define WHERE_ID "session = $1 AND kind = $2 AND key = $3 AND occurrence = $4"

/* Run a write; the rows it changed, or LOG_E*. */
static int changed(log_conn_t *c, const char *sql, const pg_params *p)
{
    int rc;
    PGresult *r = pg_run(c, sql, p, 0, &rc);
    if (!r) return rc;
    int64_t n = pg_affected(r);
    PQclear(r);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* A copy of text column col of row 0, NULL when it is NULL; *rc LOG_EIO when out of memory. */
static char *dup_text(const PGresult *r, int col, int *rc)
{
    if (pg_null_at(r, 0, col)) return NULL;
    char *s = strdup(pg_text_of(r, 0, col));
    if (!s) *rc = LOG_EIO;
    return s;
}

static int pg_rec_open(log_conn_t *c, const rec_id *id, const char *request_id, const char *provider,
                       const char *model, const char *request_json, int64_t now_ms)
{
    pg_params p;
    pg_params_init(&p);
    param_id(&p, id);
    int rc = pg_exec(c, "DELETE FROM recording_chunks WHERE recording IN (SELECT id FROM recordings WHERE " WHERE_ID ")",
                     &p);
    if (!rc) rc = pg_exec(c, "DELETE FROM recordings WHERE " WHERE_ID, &p);
    if (rc) return rc;
    pg_text(&p, request_id);
    pg_text(&p, provider);
    pg_text(&p, model);
    pg_text(&p, request_json);
    pg_int(&p, now_ms);
    return pg_exec(c, "INSERT INTO recordings (session, kind, key, occurrence, request_id, provider, model, request,"
                      " created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)", &p);
}

static int pg_rec_chunk(log_conn_t *c, const rec_id *id, int seq, int64_t t_ms, const void *data, size_t len)
{
    pg_params p;
    pg_params_init(&p);
    param_id(&p, id);
    pg_int(&p, seq);
    pg_int(&p, t_ms);
    pg_bytes(&p, len ? data : "", len);
    return pg_exec(c, "INSERT INTO recording_chunks (recording, seq, t_ms, data)"
                      " SELECT id, $5::bigint, $6::bigint, $7::bytea FROM recordings WHERE complete = 0 AND " WHERE_ID
                      " ON CONFLICT (recording, seq) DO UPDATE SET t_ms = excluded.t_ms, data = excluded.data", &p);
}

static int pg_rec_end(log_conn_t *c, const rec_id *id, long status, int result, const char *meta, int64_t now_ms)
{
    pg_params p;
    pg_params_init(&p);
    param_id(&p, id);
    pg_int(&p, status);
    pg_int(&p, result);
    pg_text(&p, meta);
    pg_int(&p, now_ms);
    return pg_exec(c, "UPDATE recordings SET complete = 1, status = $5, result = $6, meta = $7, ended_ms = $8"
                      " WHERE " WHERE_ID, &p);
}

/* A recording's answer ordinal (meta.ordinal, as jsonb), NULL when it has none (a
 * JSON null is none, as json_extract reads it). */
#define ORDINAL "nullif(ds_jsonb(meta) -> 'ordinal', 'null'::jsonb)"

static int pg_rec_find_in(log_conn_t *c, const char *kind, const char *key, int n, const char *session,
                          rec_found *out, char **meta)
{
    pg_params p;
    int rc = 0;
    *meta = NULL;
    pg_params_init(&p);
    pg_text(&p, session);
    pg_text(&p, kind);
    pg_text(&p, key);
    pg_int(&p, n >= 0 ? n : 0);
    /* n >= 0: the one whose ordinal is n, else (a recording without one) the first
     * complete occurrence from n; REC_LATEST: the last one. */
    PGresult *r = pg_run(c, n >= 0 ? "SELECT id, occurrence, status, result, meta FROM recordings WHERE session = $1"
                                     " AND kind = $2 AND key = $3 AND complete = 1 AND (" ORDINAL " = to_jsonb($4::bigint)"
                                     " OR (" ORDINAL " IS NULL AND occurrence >= $4::bigint))"
                                     " ORDER BY " ORDINAL " IS NULL, occurrence LIMIT 1"
                                   : "SELECT id, occurrence, status, result, meta FROM recordings WHERE session = $1"
                                     " AND kind = $2 AND key = $3 AND occurrence >= $4::bigint AND complete = 1"
                                     " ORDER BY occurrence DESC LIMIT 1",
                         &p, 0, &rc);
    if (!r) return rc;
    if (PQntuples(r) == 1) {
        out->rowid = pg_int_of(r, 0, 0);
        snprintf(out->session, sizeof out->session, "%s", session);
        out->occurrence = (int)pg_int_of(r, 0, 1);
        out->status = (long)pg_int_of(r, 0, 2);
        out->result = (int)pg_int_of(r, 0, 3);
        *meta = dup_text(r, 4, &rc);
        if (!rc) rc = 1;
    }
    PQclear(r);
    return rc;
}

/* The condition that a recording's session is one the asker may use: $n is a JSON
 * array of session-id prefixes (NULL: every session; "" is every session too, as
 * an unprefixed scope is). */
#define REACHABLE(n) "($" #n "::jsonb IS NULL OR EXISTS (SELECT 1 FROM jsonb_array_elements_text($" #n "::jsonb) v" \
                     " WHERE left(session, length(v)) = v))"

static int pg_rec_latest_session(log_conn_t *c, const char *kind, const char *key, const char *reach, char *out,
                                 size_t cap)
{
    pg_params p;
    int rc = 0;
    out[0] = '\0';
    pg_params_init(&p);
    pg_text(&p, key);
    pg_text(&p, kind);
    pg_text(&p, reach);
    PGresult *r = pg_run(c, "SELECT session FROM recordings WHERE key = $1 AND kind = $2 AND complete = 1 AND "
                            REACHABLE(3) " ORDER BY created_ms DESC, id DESC LIMIT 1", &p, 0, &rc);
    if (!r) return rc;
    if (PQntuples(r) == 1) snprintf(out, cap, "%s", pg_text_of(r, 0, 0));
    PQclear(r);
    return out[0] ? 1 : 0;
}

static int pg_rec_provider_meta(log_conn_t *c, const char *session, int k, char **meta)
{
    pg_params p;
    int rc = 0;
    *meta = NULL;
    pg_params_init(&p);
    pg_text(&p, session);
    pg_int(&p, k > 0 ? k : 0);      /* SQLite reads a negative OFFSET as none */
    PGresult *r = pg_run(c, "SELECT meta FROM recordings WHERE session = $1 AND kind = 'provider' AND complete = 1"
                            " ORDER BY id LIMIT 1 OFFSET $2", &p, 0, &rc);
    if (!r) return rc;
    if (PQntuples(r) == 1) {
        *meta = dup_text(r, 0, &rc);
        if (!rc) rc = 1;
    }
    PQclear(r);
    return rc;
}

static int pg_rec_chunks(log_conn_t *c, int64_t rowid, int (*fn)(void *ud, int64_t t_ms, const void *p, size_t n),
                         void *ud)
{
    pg_params p;
    int rc = 0;
    pg_params_init(&p);
    pg_int(&p, rowid);
    /* Binary results: the bytes as they are, t_ms as an int8. */
    PGresult *r = pg_run(c, "SELECT t_ms, data FROM recording_chunks WHERE recording = $1 ORDER BY seq", &p, 1, &rc);
    if (!r) return rc;
    int n = PQntuples(r);
    for (int i = 0; i < n && !rc; i++)
        rc = fn(ud, pg_int_at(r, i, 0), PQgetvalue(r, i, 1), (size_t)PQgetlength(r, i, 1));
    PQclear(r);
    return rc;
}

static int pg_rec_candidates(log_conn_t *c, const char *kind, const char *lineage, const char *reach, int limit,
                             int (*fn)(void *ud, const char *key, const char *session, int occurrence,
                                       const char *request),
                             void *ud)
{
    pg_params p;
    int rc = 0;
    pg_params_init(&p);
    pg_text(&p, kind);
    pg_text(&p, lineage);
    if (limit >= 0) pg_int(&p, limit);
    else pg_null(&p);               /* LIMIT NULL: none, as SQLite's negative limit */
    pg_text(&p, reach);
    /* Lineage first (its sessions rank before the rest), most recent first; only
     * the lineage and the sessions the asker may use. */
    PGresult *r = pg_run(c, "SELECT key, session, occurrence, request FROM recordings WHERE kind = $1 AND complete = 1"
                            " AND (session IN (SELECT jsonb_array_elements_text($2::jsonb)) OR " REACHABLE(4) ")"
                            " ORDER BY coalesce(session IN (SELECT jsonb_array_elements_text($2::jsonb)), false) DESC,"
                            " created_ms DESC, id DESC LIMIT $3::bigint", &p, 0, &rc);
    if (!r) return rc;
    int n = PQntuples(r);
    for (int i = 0; i < n && !rc; i++)
        rc = fn(ud, pg_text_of(r, i, 0) ? pg_text_of(r, i, 0) : "", pg_text_of(r, i, 1) ? pg_text_of(r, i, 1) : "",
                (int)pg_int_of(r, i, 2), pg_text_of(r, i, 3));
    PQclear(r);
    return rc;
}

#define COLS "id, session, kind, key, occurrence, request_id, provider, model, complete, status, result, meta," \
             " created_ms, ended_ms, pinned"

/* Row i of a COLS select (columns from 0). */
static void row_of(const PGresult *r, int i, rec_row *o)
{
    memset(o, 0, sizeof *o);
    o->rowid = pg_int_of(r, i, 0);
    o->session = pg_text_of(r, i, 1);
    o->kind = pg_text_of(r, i, 2);
    o->key = pg_text_of(r, i, 3);
    o->has_occurrence = !pg_null_at(r, i, 4);
    o->occurrence = pg_int_of(r, i, 4);
    o->request_id = pg_text_of(r, i, 5);
    o->provider = pg_text_of(r, i, 6);
    o->model = pg_text_of(r, i, 7);
    o->complete = (int)pg_int_of(r, i, 8);
    o->has_status = !pg_null_at(r, i, 9);
    o->status = pg_int_of(r, i, 9);
    o->has_result = !pg_null_at(r, i, 10);
    o->result = pg_int_of(r, i, 10);
    o->meta = pg_text_of(r, i, 11);
    o->has_created = !pg_null_at(r, i, 12);
    o->created_ms = pg_int_of(r, i, 12);
    o->has_ended = !pg_null_at(r, i, 13);
    o->ended_ms = pg_int_of(r, i, 13);
    o->pinned = (int)pg_int_of(r, i, 14);
}

static int pg_rec_list(log_conn_t *c, const char *session, const char *provider, const char *model, int64_t cursor,
                       int max, int (*fn)(void *ud, const rec_row *r), void *ud)
{
    pg_params p;
    int rc = 0;
    pg_params_init(&p);
    pg_text(&p, session);
    pg_text(&p, provider);
    pg_text(&p, model);
    pg_int(&p, cursor);
    if (max >= 0) pg_int(&p, max);
    else pg_null(&p);
    PGresult *r = pg_run(c, "SELECT " COLS ", (SELECT coalesce(sum(length(data)), 0) FROM recording_chunks"
                            " WHERE recording = recordings.id) FROM recordings WHERE ($1::text IS NULL OR session = $1)"
                            " AND ($2::text IS NULL OR provider = $2) AND ($3::text IS NULL OR model = $3)"
                            " AND ($4::bigint = 0 OR id < $4) ORDER BY id DESC LIMIT $5::bigint", &p, 0, &rc);
    if (!r) return rc;
    int n = PQntuples(r);
    for (int i = 0; i < n && !rc; i++) {
        rec_row o;
        row_of(r, i, &o);
        o.bytes = pg_int_of(r, i, 15);
        rc = fn(ud, &o);
    }
    PQclear(r);
    return rc > 0 ? 0 : rc;
}

static int pg_rec_each(log_conn_t *c, const char *key, const char *session, int (*fn)(void *ud, const rec_row *r),
                       void *ud)
{
    pg_params p;
    int rc = 0;
    pg_params_init(&p);
    pg_text(&p, key);
    pg_text(&p, session);
    PGresult *r = pg_run(c, "SELECT " COLS ", request FROM recordings WHERE ($1::text IS NULL OR key = $1)"
                            " AND ($2::text IS NULL OR session = $2) ORDER BY id", &p, 0, &rc);
    if (!r) return rc;
    int n = PQntuples(r);
    for (int i = 0; i < n && !rc; i++) {
        rec_row o;
        row_of(r, i, &o);
        o.request = pg_text_of(r, i, 15);
        rc = fn(ud, &o);
    }
    PQclear(r);
    return rc;
}

static int pg_rec_delete_key(log_conn_t *c, const char *key)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, key);
    int rc = pg_exec(c, "DELETE FROM recording_chunks WHERE recording IN (SELECT id FROM recordings WHERE key = $1)",
                     &p);
    return rc ? rc : changed(c, "DELETE FROM recordings WHERE key = $1", &p);
}

static int pg_rec_pin(log_conn_t *c, const char *key, int pinned)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, key);
    pg_int(&p, pinned ? 1 : 0);
    return changed(c, "UPDATE recordings SET pinned = $2 WHERE key = $1", &p);
}

static int pg_rec_pin_one(log_conn_t *c, const rec_id *id)
{
    pg_params p;
    pg_params_init(&p);
    param_id(&p, id);
    return pg_exec(c, "UPDATE recordings SET pinned = 1 WHERE " WHERE_ID, &p);
}

static int pg_rec_delete_session(log_conn_t *c, const char *session)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, session);
    int rc = pg_exec(c, "DELETE FROM recording_chunks WHERE recording IN"
                        " (SELECT id FROM recordings WHERE session = $1 AND pinned = 0)", &p);
    return rc ? rc : pg_exec(c, "DELETE FROM recordings WHERE session = $1 AND pinned = 0", &p);
}

static int pg_rec_prune(log_conn_t *c, int64_t cutoff_ms, int dry_run, int64_t *count, int64_t *bytes)
{
    pg_params p;
    int rc = 0;
    *count = *bytes = 0;
    pg_params_init(&p);
    pg_int(&p, cutoff_ms);
    /* length(request) counts characters and length(data) bytes, as in SQLite. */
    PGresult *r = pg_run(c, "SELECT count(*), coalesce(sum(length(request) + (SELECT coalesce(sum(length(data)), 0)"
                            " FROM recording_chunks WHERE recording = recordings.id)), 0)::bigint FROM recordings"
                            " WHERE pinned = 0 AND created_ms < $1", &p, 0, &rc);
    if (!r) return rc;
    *count = pg_int_of(r, 0, 0);
    *bytes = pg_int_of(r, 0, 1);
    PQclear(r);
    if (dry_run || !*count) return 0;
    rc = pg_exec(c, "DELETE FROM recording_chunks WHERE recording IN"
                    " (SELECT id FROM recordings WHERE pinned = 0 AND created_ms < $1)", &p);
    return rc ? rc : pg_exec(c, "DELETE FROM recordings WHERE pinned = 0 AND created_ms < $1", &p);
}

const store_recordings_ops pg_recordings_ops = {
    .open = pg_rec_open,
    .chunk = pg_rec_chunk,
    .end = pg_rec_end,
    .find_in = pg_rec_find_in,
    .latest_session = pg_rec_latest_session,
    .provider_meta = pg_rec_provider_meta,
    .chunks = pg_rec_chunks,
    .candidates = pg_rec_candidates,
    .list = pg_rec_list,
    .each = pg_rec_each,
    .delete_key = pg_rec_delete_key,
    .pin = pg_rec_pin,
    .pin_one = pg_rec_pin_one,
    .delete_session = pg_rec_delete_session,
    .prune = pg_rec_prune,
};

/* recorder: keys, differences and the recordings table (recorder.h). */
#include "recorder.h"

#include "store/sqlite/sqlite.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "jdiff.h"
#include "session.h"
#include "sha256.h"
#include "sse.h"
#include "utf8.h"

int rec_mode_parse(const char *s)
{
    static const char *const names[] = {"live", "record", "playback", "hybrid"};
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

const char *rec_mode_name(rec_mode m)
{
    switch (m) {
    case REC_RECORD: return "record";
    case REC_PLAYBACK: return "playback";
    case REC_HYBRID: return "hybrid";
    default: return "live";
    }
}

/* ---- normalized requests ------------------------------------------------------------- */

json_t *rec_normalize(const char *kind, const json_t *body)
{
    if (!json_is_object(body)) return NULL;
    json_t *msgs = json_object_get(body, "messages");
    json_t *sys = json_object_get(body, "system");
    json_t *m = json_is_array(msgs) ? json_deep_copy(msgs) : json_array();
    json_t *system = sys ? json_deep_copy(sys) : NULL;
    /* OpenAI carries the system prompt as its first message. */
    json_t *first = json_array_get(m, 0);
    if (!system && json_is_object(first) && !strcmp(json_string_value(json_object_get(first, "role")) ?: "", "system")) {
        system = json_deep_copy(json_object_get(first, "content"));
        json_array_remove(m, 0);
    }
    json_t *params = json_deep_copy(body);
    static const char *const drop[] = {"model", "system", "messages", "tools", "stream", "stream_options"};
    for (size_t i = 0; i < sizeof drop / sizeof *drop; i++) json_object_del(params, drop[i]);
    json_t *tools = json_object_get(body, "tools");
    json_t *model = json_object_get(body, "model");
    return json_pack("{s:s, s:O, s:o, s:o, s:o, s:o}", "provider", kind ? kind : "", "model",
                     model ? model : json_null(), "system", system ? system : json_null(), "messages", m, "tools",
                     json_is_array(tools) ? json_deep_copy(tools) : json_array(), "parameters", params);
}

int rec_key(const json_t *norm, char out[REC_KEY_LEN + 1])
{
    char *s = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!s) return -1;
    sha256_ctx c;
    uint8_t d[SHA256_LEN];
    sha256_init(&c);
    sha256_update(&c, "dstream-recording-v1\n", 21);
    sha256_update(&c, s, strlen(s));
    sha256_final(&c, d);
    sha256_hex(d, sizeof d, out);
    free(s);
    return 0;
}

/* ---- differences --------------------------------------------------------------------- */

static const char *const FIELDS[] = {"provider", "model", "system", "tools", "parameters", "messages"};
#define NFIELDS (sizeof FIELDS / sizeof *FIELDS)

static void show(const json_t *v, char *out, size_t cap)
{
    if (!cap) return;
    if (!v) {
        snprintf(out, cap, "(absent)");
        return;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    size_t n = s ? strlen(s) : 0;
    size_t lim = cap - 1 < REC_VALUE_MAX ? cap - 1 : REC_VALUE_MAX;
    if (n > lim && lim > 3) snprintf(out, cap, "%.*s...", (int)(lim - 3), s);
    else snprintf(out, cap, "%s", s ? s : "");
    free(s);
}

int rec_diff(const json_t *recorded, const json_t *requested, char *path, size_t pcap, char *rec_v,
             size_t rcap, char *req_v, size_t qcap)
{
    buf_t p;
    buf_init(&p, 4096);
    const json_t *da = NULL, *db = NULL;
    int diff = 0;
    for (size_t i = 0; i < NFIELDS && !diff; i++) {
        buf_reset(&p);
        buf_puts(&p, FIELDS[i]);
        const json_t *a = json_object_get(recorded, FIELDS[i]), *b = json_object_get(requested, FIELDS[i]);
        /* An absent field and null are the same (older recordings). */
        if (json_is_null(a)) a = NULL;
        if (json_is_null(b)) b = NULL;
        diff = jdiff(a, b, &p, &da, &db);
    }
    if (pcap) snprintf(path, pcap, "%s", diff && p.p ? p.p : "");
    if (diff) {
        show(da, rec_v, rcap);
        show(db, req_v, qcap);
    } else {
        if (rcap) rec_v[0] = '\0';
        if (qcap) req_v[0] = '\0';
    }
    buf_free(&p);
    return diff;
}

long rec_similarity(const json_t *a, const json_t *b)
{
    long score = 0;
    for (size_t i = 0; i + 1 < NFIELDS; i++)
        if (json_equal(json_object_get(a, FIELDS[i]), json_object_get(b, FIELDS[i]))) score += 100000;
    const json_t *ma = json_object_get(a, "messages"), *mb = json_object_get(b, "messages");
    size_t i = 0;
    while (i < json_array_size(ma) && i < json_array_size(mb) &&
           json_equal(json_array_get(ma, i), json_array_get(mb, i)))
        i++;
    score += (long)i * 10;
    if (json_array_size(ma) == json_array_size(mb)) score += 1;
    return score;
}

/* ---- the database -------------------------------------------------------------------- */


static void bind_id(sqlite3_stmt *st, int at, const rec_id *id)
{
    sqlite3_bind_text(st, at, id->session, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, at + 1, id->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, at + 2, id->key, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, at + 3, id->occurrence);
}

#define WHERE_ID "session = ? AND kind = ? AND key = ? AND occurrence = ?"

int rec_tx_open(log_conn_t *c, const rec_id *id, const char *request_id, const char *provider,
                const char *model, const char *request_json, int64_t now_ms)
{
    sqlite3_stmt *st;
    int rc;
    if (log_stmt(c, "DELETE FROM recording_chunks WHERE recording IN (SELECT id FROM recordings WHERE " WHERE_ID ")", &st))
        return LOG_EIO;
    bind_id(st, 1, id);
    if ((rc = log_stmt_run(c, st))) return rc;
    if (log_stmt(c, "DELETE FROM recordings WHERE " WHERE_ID, &st)) return LOG_EIO;
    bind_id(st, 1, id);
    if ((rc = log_stmt_run(c, st))) return rc;
    if (log_stmt(c, "INSERT INTO recordings (session, kind, key, occurrence, request_id, provider, model, request,"
                " created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", &st))
        return LOG_EIO;
    bind_id(st, 1, id);
    sqlite3_bind_text(st, 5, request_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, provider, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, request_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, now_ms);
    return log_stmt_run(c, st);
}

int rec_tx_chunk(log_conn_t *c, const rec_id *id, int seq, int64_t t_ms, const void *data, size_t len)
{
    sqlite3_stmt *st;
    if (log_stmt(c, "INSERT OR REPLACE INTO recording_chunks (recording, seq, t_ms, data)"
                " SELECT id, ?, ?, ? FROM recordings WHERE complete = 0 AND " WHERE_ID, &st))
        return LOG_EIO;
    sqlite3_bind_int(st, 1, seq);
    sqlite3_bind_int64(st, 2, t_ms);
    sqlite3_bind_blob(st, 3, len ? data : "", (int)len, SQLITE_STATIC);
    bind_id(st, 4, id);
    return log_stmt_run(c, st);
}

int rec_tx_end(log_conn_t *c, const rec_id *id, long status, int result, const json_t *meta, int64_t now_ms)
{
    sqlite3_stmt *st;
    char *m = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
    if (log_stmt(c, "UPDATE recordings SET complete = 1, status = ?, result = ?, meta = ?, ended_ms = ? WHERE " WHERE_ID,
             &st)) {
        free(m);
        return LOG_EIO;
    }
    sqlite3_bind_int64(st, 1, status);
    sqlite3_bind_int(st, 2, result);
    if (m) sqlite3_bind_text(st, 3, m, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, now_ms);
    bind_id(st, 5, id);
    int rc = log_stmt_run(c, st);
    free(m);
    return rc;
}

/* A recording's answer ordinal (meta.ordinal), NULL when it has none. */
#define ORDINAL "(CASE WHEN json_valid(meta) THEN json_extract(meta, '$.ordinal') END)"

/* The complete recording of key in session that answers as n (see rec_find); 1, 0
 * or LOG_E*. */
static int find_in(log_conn_t *c, const char *kind, const char *key, int n, const char *session, rec_found *out)
{
    sqlite3_stmt *st;
    /* n >= 0: the one whose ordinal is n, else (a recording without one) the first
     * complete occurrence from n; REC_LATEST: the last one. */
    if (log_stmt(c, n >= 0 ? "SELECT id, occurrence, status, result, meta FROM recordings WHERE session = ?1 AND kind = ?2"
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
        out->meta = m ? json_loads(m, 0, NULL) : NULL;
        found = 1;
    } else if (rc != SQLITE_DONE) {
        found = LOG_EIO;
    }
    log_stmt_done(c, st);
    return found;
}

/* The condition that a recording's session is one the asker may use: bound to a
 * JSON array of session-id prefixes (NULL: every session; "" is every session too,
 * as an unprefixed scope is). */
#define REACHABLE(n) "(?" #n " IS NULL OR EXISTS (SELECT 1 FROM json_each(?" #n ") WHERE substr(session, 1, length(value)) = value))"

int rec_find(log_conn_t *c, const char *kind, const char *key, int n, const char *const *lineage, size_t nl,
             const char *reach, rec_found *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < nl; i++) {
        int rc = find_in(c, kind, key, n, lineage[i], out);
        if (rc) return rc;
    }
    sqlite3_stmt *st;
    char last[64] = "";
    if (log_stmt(c, "SELECT session FROM recordings WHERE key = ?1 AND kind = ?2 AND complete = 1 AND " REACHABLE(3)
                " ORDER BY created_ms DESC, id DESC LIMIT 1", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
    if (reach) sqlite3_bind_text(st, 3, reach, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) snprintf(last, sizeof last, "%s", (const char *)sqlite3_column_text(st, 0));
    log_stmt_done(c, st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return LOG_EIO;
    return last[0] ? find_in(c, kind, key, n, last, out) : 0;
}

int rec_tools_used(log_conn_t *c, const char *session, int k, const char *server)
{
    sqlite3_stmt *st;
    if (k < 0) return -1;
    if (log_stmt(c, "SELECT meta FROM recordings WHERE session = ?1 AND kind = 'provider' AND complete = 1"
                    " ORDER BY id LIMIT 1 OFFSET ?2", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, k);
    int rc = sqlite3_step(st), occ = -1;
    if (rc == SQLITE_ROW) {
        const char *m = (const char *)sqlite3_column_text(st, 0);
        json_t *meta = m ? json_loads(m, 0, NULL) : NULL;
        json_t *o = json_object_get(json_object_get(meta, "tools"), server);
        if (json_is_integer(o) && json_integer_value(o) >= 0 && json_integer_value(o) <= INT32_MAX)
            occ = (int)json_integer_value(o);
        json_decref(meta);
    } else if (rc != SQLITE_DONE) {
        occ = LOG_EIO;
    }
    log_stmt_done(c, st);
    return occ;
}

int rec_chunks(log_conn_t *c, int64_t rowid, int (*fn)(void *ud, int64_t t_ms, const void *p, size_t n),
               void *ud)
{
    sqlite3_stmt *st;
    if (log_stmt(c, "SELECT t_ms, data FROM recording_chunks WHERE recording = ? ORDER BY seq", &st)) return LOG_EIO;
    sqlite3_bind_int64(st, 1, rowid);
    int rc, out = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && !out)
        out = fn(ud, sqlite3_column_int64(st, 0), sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1));
    if (!out && rc != SQLITE_DONE && rc != SQLITE_ROW) out = LOG_EIO;
    log_stmt_done(c, st);
    return out;
}

json_t *rec_nearest(log_conn_t *c, const char *kind, const json_t *norm, const char *const *lineage, size_t nl,
                    const char *reach)
{
    sqlite3_stmt *st;
    /* Lineage first (its sessions rank before the rest), most recent first; only
     * the lineage and the sessions the asker may use. */
    if (log_stmt(c, "SELECT key, session, occurrence, request FROM recordings WHERE kind = ?1 AND complete = 1"
                " AND (session IN (SELECT value FROM json_each(?2)) OR " REACHABLE(4) ")"
                " ORDER BY (session IN (SELECT value FROM json_each(?2))) DESC, created_ms DESC, id DESC LIMIT ?3",
             &st))
        return NULL;
    if (reach) sqlite3_bind_text(st, 4, reach, -1, SQLITE_STATIC);
    json_t *lin = json_array();
    for (size_t i = 0; i < nl; i++) json_array_append_new(lin, json_string(lineage[i]));
    char *lins = json_dumps(lin, JSON_COMPACT);
    json_decref(lin);
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, lins ? lins : "[]", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, REC_NEAREST_SCAN);
    const char *prov = json_string_value(json_object_get(norm, "provider"));
    json_t *best = NULL, *best_req = NULL;
    long best_score = -1;
    while (sqlite3_step(st) == SQLITE_ROW) {
        json_t *req = json_loads((const char *)sqlite3_column_text(st, 3), JSON_ALLOW_NUL, NULL);
        const char *rp = json_string_value(json_object_get(req, "provider"));
        long score = req && rp && prov && !strcmp(rp, prov) ? rec_similarity(req, norm) : -1;
        if (score > best_score) {
            best_score = score;
            json_decref(best);
            json_decref(best_req);
            best = json_pack("{s:s, s:s, s:i}", PK_KEY, (const char *)sqlite3_column_text(st, 0), PK_SESSION,
                             (const char *)sqlite3_column_text(st, 1), PK_OCCURRENCE, sqlite3_column_int(st, 2));
            best_req = req;
        } else {
            json_decref(req);
        }
    }
    log_stmt_done(c, st);
    free(lins);
    /* The same request (recorded, but fewer times than asked) differs nowhere: no
     * field then, and rec_explain says why it did not answer. */
    if (best) {
        char path[256], rv[REC_VALUE_MAX + 8], qv[REC_VALUE_MAX + 8];
        if (rec_diff(best_req, norm, path, sizeof path, rv, sizeof rv, qv, sizeof qv)) {
            json_object_set_new(best, PK_FIELD, json_string(path));
            json_object_set_new(best, PK_RECORDED, json_string(rv));
            json_object_set_new(best, PK_REQUESTED, json_string(qv));
        }
    }
    json_decref(best_req);
    return best;
}

void rec_explain(const char *what, const char *key, int occ, int ord, const json_t *near, char *out, size_t cap)
{
    const char *nk = json_string_value(json_object_get(near, PK_KEY));
    const char *field = json_string_value(json_object_get(near, PK_FIELD));
    if (nk && !strcmp(nk, key))
        snprintf(out, cap, "%s %s (occurrence %d) is recorded, but not as answer %d: it was asked more times than it"
                 " was recorded", what, key, occ, ord);
    else if (nk && field)
        snprintf(out, cap, "no recording of %s %s (occurrence %d); the nearest, %.12s of session %s, differs at %s:"
                 " recorded %.60s, requested %.60s", what, key, occ, nk,
                 json_string_value(json_object_get(near, PK_SESSION)) ?: "?", field,
                 json_string_value(json_object_get(near, PK_RECORDED)) ?: "",
                 json_string_value(json_object_get(near, PK_REQUESTED)) ?: "");
    else
        snprintf(out, cap, "no recording of %s %s (occurrence %d), nor of any like it that this session may use", what,
                 key, occ);
    utf8_scrub(out);                /* a value cut at 60 bytes may end inside a character */
}

/* ---- drift ----------------------------------------------------------------------------- */

json_t *rec_drift_new(void)
{
    return json_pack("{s:[], s:i, s:i, s:i, s:i}", "requests", "hit", 0, "miss", 0, "diverged", 0, "recorded", 0);
}

void rec_drift_add(json_t *report, const json_t *event)
{
    const char *type = json_string_value(json_object_get(event, "type"));
    if (!type || strcmp(type, EV_RECORDING_REQUEST)) return;
    json_t *p = json_object_get(event, "payload");
    const char *outcome = json_string_value(json_object_get(p, PK_OUTCOME));
    if (!json_is_object(p) || !outcome) return;
    json_t *e = json_deep_copy(p);
    json_t *at = json_object_get(event, "offset");
    if (json_is_string(at)) json_object_set(e, "offset", at);
    json_array_append_new(json_object_get(report, "requests"), e);
    json_t *n = json_object_get(report, outcome);
    if (json_is_integer(n)) json_integer_set(n, json_integer_value(n) + 1);
}

/* ---- managing recordings ---------------------------------------------------------------- */

#define COLS "id, session, kind, key, occurrence, request_id, provider, model, complete, status, result, meta," \
             " created_ms, ended_ms, pinned"

static void set_text(json_t *o, const char *name, sqlite3_stmt *st, int col)
{
    const char *s = (const char *)sqlite3_column_text(st, col);
    json_object_set_new(o, name, s ? json_string(s) : json_null());
}

static void set_int(json_t *o, const char *name, sqlite3_stmt *st, int col)
{
    json_object_set_new(o, name, sqlite3_column_type(st, col) == SQLITE_NULL
                                     ? json_null() : json_integer(sqlite3_column_int64(st, col)));
}

/* The row of a COLS select as JSON (without chunks and request). */
static json_t *row_json(sqlite3_stmt *st)
{
    json_t *o = json_object();
    set_text(o, "session", st, 1);
    set_text(o, "kind", st, 2);
    set_text(o, "key", st, 3);
    set_int(o, "occurrence", st, 4);
    set_text(o, "requestId", st, 5);
    set_text(o, "provider", st, 6);
    set_text(o, "model", st, 7);
    json_object_set_new(o, "complete", json_boolean(sqlite3_column_int(st, 8)));
    set_int(o, "status", st, 9);
    set_int(o, "result", st, 10);
    const char *m = (const char *)sqlite3_column_text(st, 11);
    json_t *meta = m ? json_loads(m, 0, NULL) : NULL;
    json_object_set_new(o, "meta", meta ? meta : json_null());
    set_int(o, "createdMs", st, 12);
    set_int(o, "endedMs", st, 13);
    json_object_set_new(o, "pinned", json_boolean(sqlite3_column_int(st, 14)));
    return o;
}

int rec_list(log_conn_t *c, const char *session, const char *provider, const char *model, int64_t cursor, int limit,
             json_t *arr, int64_t *next)
{
    sqlite3_stmt *st;
    *next = 0;
    if (limit < 1 || limit > REC_LIST_MAX) limit = REC_LIST_MAX;
    if (log_stmt(c, "SELECT " COLS ", (SELECT coalesce(sum(length(data)), 0) FROM recording_chunks WHERE recording = id)"
                " FROM recordings WHERE (?1 IS NULL OR session = ?1) AND (?2 IS NULL OR provider = ?2)"
                " AND (?3 IS NULL OR model = ?3) AND (?4 = 0 OR id < ?4) ORDER BY id DESC LIMIT ?5", &st))
        return LOG_EIO;
    if (session) sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    if (provider) sqlite3_bind_text(st, 2, provider, -1, SQLITE_STATIC);
    if (model) sqlite3_bind_text(st, 3, model, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, cursor);
    sqlite3_bind_int(st, 5, limit + 1);
    int rc, n = 0;
    int64_t last = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == limit) {
            *next = last;
            break;
        }
        json_t *o = row_json(st);
        json_object_set_new(o, "bytes", json_integer(sqlite3_column_int64(st, 15)));
        json_array_append_new(arr, o);
        last = sqlite3_column_int64(st, 0);
        n++;
    }
    log_stmt_done(c, st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : LOG_EIO;
}

/* A chunk as JSON: its text when it is UTF-8 (what providers send), else base64. */
static json_t *chunk_json(int64_t t, const void *p, size_t n, int b64_only)
{
    json_t *o = json_pack("{s:I}", "t", (json_int_t)t);
    json_t *s = b64_only ? NULL : json_stringn(p, n);
    if (s) {
        json_object_set_new(o, "data", s);
    } else {
        buf_t b;
        buf_init(&b, (size_t)-1);
        if (sse_base64(&b, p, n)) abort();
        json_object_set_new(o, "b64", json_stringn(b.p ? b.p : "", b.len));
        buf_free(&b);
    }
    return o;
}

typedef struct chunks_ctx {
    json_t *arr;
    int b64_only;
} chunks_ctx;

static int add_chunk(void *ud, int64_t t, const void *p, size_t n)
{
    chunks_ctx *k = ud;
    json_array_append_new(k->arr, chunk_json(t, p, n, k->b64_only));
    return 0;
}

/* Recordings selected by where (binding one text: arg) with request and chunks, to fn. */
static int each_full(log_conn_t *c, const char *where, const char *arg, int b64_only,
                     int (*fn)(void *ud, json_t *rec), void *ud)
{
    sqlite3_stmt *st;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT " COLS ", request FROM recordings WHERE %s ORDER BY id", where);
    if (log_stmt(c, sql, &st)) return LOG_EIO;
    if (arg) sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
    int rc, out = 0;
    while (!out && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *o = row_json(st);
        json_t *req = json_loads((const char *)sqlite3_column_text(st, 15), JSON_ALLOW_NUL, NULL);
        json_object_set_new(o, "request", req ? req : json_null());
        chunks_ctx k = {json_array(), b64_only};
        out = rec_chunks(c, sqlite3_column_int64(st, 0), add_chunk, &k);
        json_object_set_new(o, "chunks", k.arr);
        if (!out) out = fn(ud, o);
        json_decref(o);
    }
    if (!out && rc != SQLITE_DONE) out = LOG_EIO;
    log_stmt_done(c, st);
    return out;
}

static int collect(void *ud, json_t *rec)
{
    json_array_append(ud, rec);
    return 0;
}

json_t *rec_get(log_conn_t *c, const char *key, int *rc)
{
    json_t *arr = json_array();
    *rc = each_full(c, "key = ?1", key, 0, collect, arr);
    if (*rc || !json_array_size(arr)) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

static int exec_count(log_conn_t *c, const char *sql, const char *arg, int iarg)
{
    sqlite3_stmt *st;
    if (log_stmt(c, sql, &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
    if (iarg >= 0) sqlite3_bind_int(st, 2, iarg);
    int rc = log_stmt_run(c, st);
    return rc ? rc : sqlite3_changes(log_db(c));
}

int rec_delete(log_conn_t *c, const char *key)
{
    int rc = exec_count(c, "DELETE FROM recording_chunks WHERE recording IN (SELECT id FROM recordings WHERE key = ?1)",
                        key, -1);
    return rc < 0 ? rc : exec_count(c, "DELETE FROM recordings WHERE key = ?1", key, -1);
}

int rec_pin(log_conn_t *c, const char *key, int pinned)
{
    return exec_count(c, "UPDATE recordings SET pinned = ?2 WHERE key = ?1", key, pinned ? 1 : 0);
}

int rec_tx_delete_session(log_conn_t *c, const char *session)
{
    int rc = exec_count(c, "DELETE FROM recording_chunks WHERE recording IN"
                           " (SELECT id FROM recordings WHERE session = ?1 AND pinned = 0)", session, -1);
    if (rc >= 0) rc = exec_count(c, "DELETE FROM recordings WHERE session = ?1 AND pinned = 0", session, -1);
    return rc < 0 ? rc : 0;
}

int rec_prune(log_conn_t *c, int64_t cutoff_ms, int dry_run, int64_t *count, int64_t *bytes)
{
    sqlite3_stmt *st;
    *count = *bytes = 0;
    if (log_stmt(c, "SELECT count(*), coalesce(sum(length(request) + (SELECT coalesce(sum(length(data)), 0)"
                " FROM recording_chunks WHERE recording = id)), 0) FROM recordings WHERE pinned = 0 AND created_ms < ?",
             &st))
        return LOG_EIO;
    sqlite3_bind_int64(st, 1, cutoff_ms);
    if (sqlite3_step(st) == SQLITE_ROW) {
        *count = sqlite3_column_int64(st, 0);
        *bytes = sqlite3_column_int64(st, 1);
    }
    log_stmt_done(c, st);
    if (dry_run || !*count) return 0;
    if (log_stmt(c, "DELETE FROM recording_chunks WHERE recording IN"
                " (SELECT id FROM recordings WHERE pinned = 0 AND created_ms < ?)", &st))
        return LOG_EIO;
    sqlite3_bind_int64(st, 1, cutoff_ms);
    int rc = log_stmt_run(c, st);
    if (rc) return rc;
    if (log_stmt(c, "DELETE FROM recordings WHERE pinned = 0 AND created_ms < ?", &st)) return LOG_EIO;
    sqlite3_bind_int64(st, 1, cutoff_ms);
    return log_stmt_run(c, st);
}

typedef struct export_ctx {
    int (*fn)(void *ud, const char *line, size_t len);
    void *ud;
} export_ctx;

static int export_one(void *ud, json_t *rec)
{
    export_ctx *x = ud;
    char *s = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
    if (!s) return LOG_EIO;
    int rc = x->fn(x->ud, s, strlen(s));
    free(s);
    return rc;
}

int rec_export(log_conn_t *c, const char *session, int (*fn)(void *ud, const char *line, size_t len), void *ud)
{
    export_ctx x = {fn, ud};
    return each_full(c, session ? "session = ?1" : "1", session, 1, export_one, &x);
}

static int b64v(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

int rec_base64_decode(const char *s, size_t len, buf_t *out)
{
    if (len % 4) return -1;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64v((unsigned char)s[i + k])) < 0) {
                return -1;
            }
        }
        /* Canonical only: the bits padding leaves out are zero. */
        if ((pad == 1 && (v[2] & 3)) || (pad == 2 && (v[1] & 15))) return -1;
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        unsigned char b[3] = {(unsigned char)(w >> 16), (unsigned char)(w >> 8), (unsigned char)w};
        if (buf_append(out, b, (size_t)(3 - pad))) return -1;
    }
    return 0;
}

static int bad(char *err, size_t cap, const char *msg)
{
    snprintf(err, cap, "%s", msg);
    return -1;
}

/* The key a request of kind must have. */
int rec_key_of(const char *kind, const json_t *request, char out[REC_KEY_LEN + 1])
{
    if (!strcmp(kind, "provider")) return rec_key(request, out);
    if (strcmp(kind, "tool") && strcmp(kind, "tools")) return -1;
    json_t *keyed = json_pack("{s:s, s:O}", "kind", kind, !strcmp(kind, "tool") ? "call" : "server", request);
    int rc = keyed ? rec_key(keyed, out) : -1;
    json_decref(keyed);
    return rc;
}

static int check_line(const json_t *o, char *err, size_t cap)
{
    static const char *const strings[] = {"session", "kind", "key"};
    for (size_t i = 0; i < 3; i++)
        if (!json_is_string(json_object_get(o, strings[i]))) return bad(err, cap, "session, kind and key must be strings");
    const char *kind = json_string_value(json_object_get(o, "kind"));
    if (strcmp(kind, "provider") && strcmp(kind, "tool") && strcmp(kind, "tools"))
        return bad(err, cap, "kind must be provider, tool or tools");
    const char *sess = json_string_value(json_object_get(o, "session"));
    if (!*sess || strlen(sess) >= 64) return bad(err, cap, "session must be 1 to 63 characters");
    json_t *occ = json_object_get(o, "occurrence");
    if (!json_is_integer(occ) || json_integer_value(occ) < 0 || json_integer_value(occ) > 1000000)
        return bad(err, cap, "occurrence must be an integer from 0");
    json_t *req = json_object_get(o, "request");
    if (!json_is_object(req)) return bad(err, cap, "request must be an object");
    char key[REC_KEY_LEN + 1];
    if (rec_key_of(kind, req, key) || strcmp(key, json_string_value(json_object_get(o, "key"))))
        return bad(err, cap, "key is not the key of request");
    static const char *const opt_strings[] = {"requestId", "provider", "model"};
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_object_get(o, opt_strings[i]);
        if (v && !json_is_string(v) && !json_is_null(v)) return bad(err, cap, "requestId, provider and model must be strings");
    }
    static const char *const opt_ints[] = {"status", "result", "createdMs", "endedMs"};
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_object_get(o, opt_ints[i]);
        if (v && !json_is_integer(v) && !json_is_null(v)) return bad(err, cap, "status, result, createdMs and endedMs must be integers");
    }
    json_t *meta = json_object_get(o, "meta");
    if (meta && !json_is_object(meta) && !json_is_null(meta)) return bad(err, cap, "meta must be an object");
    json_t *chunks = json_object_get(o, "chunks"), *ch;
    size_t i;
    if (!json_is_array(chunks)) return bad(err, cap, "chunks must be an array");
    buf_t b;
    buf_init(&b, REC_IMPORT_LINE_MAX);
    json_array_foreach(chunks, i, ch) {
        json_t *t = json_object_get(ch, "t"), *d = json_object_get(ch, "b64");
        buf_reset(&b);
        if (!json_is_integer(t) || !json_is_string(d) ||
            rec_base64_decode(json_string_value(d), json_string_length(d), &b)) {
            buf_free(&b);
            return bad(err, cap, "each chunk must be {\"t\": integer, \"b64\": base64}");
        }
    }
    buf_free(&b);
    return 0;
}

json_t *rec_import_parse(const char *line, size_t len, char *err, size_t errcap)
{
    json_error_t je;
    if (len > REC_IMPORT_LINE_MAX) {
        bad(err, errcap, "line too long");
        return NULL;
    }
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!json_is_object(o)) {
        snprintf(err, errcap, "not a JSON object: %s", o ? "" : je.text);
        json_decref(o);
        return NULL;
    }
    if (check_line(o, err, errcap)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int rec_tx_import(log_conn_t *c, const json_t *o)
{
    rec_id id = {json_string_value(json_object_get(o, "session")), json_string_value(json_object_get(o, "kind")),
                 json_string_value(json_object_get(o, "key")), (int)json_integer_value(json_object_get(o, "occurrence"))};
    char *req = json_dumps(json_object_get(o, "request"), JSON_COMPACT | JSON_SORT_KEYS);
    json_t *created = json_object_get(o, "createdMs");
    int rc = rec_tx_open(c, &id, json_string_value(json_object_get(o, "requestId")),
                         json_string_value(json_object_get(o, "provider")), json_string_value(json_object_get(o, "model")),
                         req, json_is_integer(created) ? json_integer_value(created) : 0);
    free(req);
    json_t *ch;
    size_t i;
    buf_t b;
    buf_init(&b, REC_IMPORT_LINE_MAX);
    json_array_foreach(json_object_get(o, "chunks"), i, ch) {
        if (rc) break;
        buf_reset(&b);
        json_t *d = json_object_get(ch, "b64");
        if (rec_base64_decode(json_string_value(d), json_string_length(d), &b)) rc = LOG_EIO;
        else rc = rec_tx_chunk(c, &id, (int)i, json_integer_value(json_object_get(ch, "t")), b.p ? b.p : "", b.len);
    }
    buf_free(&b);
    if (!rc && json_is_true(json_object_get(o, "complete"))) {
        json_t *ended = json_object_get(o, "endedMs"), *meta = json_object_get(o, "meta");
        rc = rec_tx_end(c, &id, (long)json_integer_value(json_object_get(o, "status")),
                        (int)json_integer_value(json_object_get(o, "result")), json_is_object(meta) ? meta : NULL,
                        json_is_integer(ended) ? json_integer_value(ended) : 0);
    }
    if (!rc && json_is_true(json_object_get(o, "pinned"))) {
        sqlite3_stmt *st;
        if (log_stmt(c, "UPDATE recordings SET pinned = 1 WHERE " WHERE_ID, &st)) return LOG_EIO;
        bind_id(st, 1, &id);
        rc = log_stmt_run(c, st);
    }
    return rc;
}

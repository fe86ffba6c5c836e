/* recorder: keys, differences and the recordings table (recorder.h). */
#include "recorder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "jdiff.h"
#include "session.h"
#include "sha256.h"
#include "sse.h"
#include "store.h"
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


int rec_tx_open(log_conn_t *c, const rec_id *id, const char *request_id, const char *provider,
                const char *model, const char *request_json, int64_t now_ms)
{
    return store_of(c)->recordings->open(c, id, request_id, provider, model, request_json, now_ms);
}

int rec_tx_chunk(log_conn_t *c, const rec_id *id, int seq, int64_t t_ms, const void *data, size_t len)
{
    return store_of(c)->recordings->chunk(c, id, seq, t_ms, data, len);
}

int rec_tx_end(log_conn_t *c, const rec_id *id, long status, int result, const json_t *meta, int64_t now_ms)
{
    char *m = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
    int rc = store_of(c)->recordings->end(c, id, status, result, m, now_ms);
    free(m);
    return rc;
}

/* The complete recording of key in session that answers as n (see rec_find); 1, 0
 * or LOG_E*. */
static int find_in(log_conn_t *c, const char *kind, const char *key, int n, const char *session, rec_found *out)
{
    char *m = NULL;
    int found = store_of(c)->recordings->find_in(c, kind, key, n, session, out, &m);
    if (found == 1) out->meta = m ? json_loads(m, 0, NULL) : NULL;
    free(m);
    return found;
}

int rec_find(log_conn_t *c, const char *kind, const char *key, int n, const char *const *lineage, size_t nl,
             const char *reach, rec_found *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < nl; i++) {
        int rc = find_in(c, kind, key, n, lineage[i], out);
        if (rc) return rc;
    }
    char last[64];
    int rc = store_of(c)->recordings->latest_session(c, kind, key, reach, last, sizeof last);
    if (rc <= 0) return rc;
    return find_in(c, kind, key, n, last, out);
}

int rec_tools_used(log_conn_t *c, const char *session, int k, const char *server)
{
    if (k < 0) return -1;
    char *m = NULL;
    int rc = store_of(c)->recordings->provider_meta(c, session, k, &m), occ = -1;
    if (rc < 0) return rc;
    if (rc == 1) {
        json_t *meta = m ? json_loads(m, 0, NULL) : NULL;
        json_t *o = json_object_get(json_object_get(meta, "tools"), server);
        if (json_is_integer(o) && json_integer_value(o) >= 0 && json_integer_value(o) <= INT32_MAX)
            occ = (int)json_integer_value(o);
        json_decref(meta);
    }
    free(m);
    return occ;
}

int rec_chunks(log_conn_t *c, int64_t rowid, int (*fn)(void *ud, int64_t t_ms, const void *p, size_t n),
               void *ud)
{
    return store_of(c)->recordings->chunks(c, rowid, fn, ud);
}

typedef struct nearest_ctx {
    const json_t *norm;
    const char *prov;
    json_t *best, *best_req;
    long best_score;
} nearest_ctx;

static int nearest_one(void *ud, const char *key, const char *session, int occurrence, const char *request)
{
    nearest_ctx *x = ud;
    json_t *req = request ? json_loads(request, JSON_ALLOW_NUL, NULL) : NULL;
    const char *rp = json_string_value(json_object_get(req, "provider"));
    long score = req && rp && x->prov && !strcmp(rp, x->prov) ? rec_similarity(req, x->norm) : -1;
    if (score > x->best_score) {
        x->best_score = score;
        json_decref(x->best);
        json_decref(x->best_req);
        x->best = json_pack("{s:s, s:s, s:i}", PK_KEY, key, PK_SESSION, session, PK_OCCURRENCE, occurrence);
        x->best_req = req;
    } else {
        json_decref(req);
    }
    return 0;
}

json_t *rec_nearest(log_conn_t *c, const char *kind, const json_t *norm, const char *const *lineage, size_t nl,
                    const char *reach)
{
    json_t *lin = json_array();
    for (size_t i = 0; i < nl; i++) json_array_append_new(lin, json_string(lineage[i]));
    char *lins = json_dumps(lin, JSON_COMPACT);
    json_decref(lin);
    nearest_ctx x = {norm, json_string_value(json_object_get(norm, "provider")), NULL, NULL, -1};
    /* Lineage first (its sessions rank before the rest), most recent first; only
     * the lineage and the sessions the asker may use. */
    int rc = store_of(c)->recordings->candidates(c, kind, lins ? lins : "[]", reach, REC_NEAREST_SCAN,
                                                 nearest_one, &x);
    free(lins);
    json_t *best = x.best, *best_req = x.best_req;
    if (rc < 0) {
        json_decref(best);
        json_decref(best_req);
        return NULL;
    }
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

/* A row as JSON (without chunks and request). */
static json_t *row_json(const rec_row *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "session", utf8_json(r->session));
    json_object_set_new(o, "kind", utf8_json(r->kind));
    json_object_set_new(o, "key", utf8_json(r->key));
    json_object_set_new(o, "occurrence", r->has_occurrence ? json_integer(r->occurrence) : json_null());
    json_object_set_new(o, "requestId", utf8_json(r->request_id));
    json_object_set_new(o, "provider", utf8_json(r->provider));
    json_object_set_new(o, "model", utf8_json(r->model));
    json_object_set_new(o, "complete", json_boolean(r->complete));
    json_object_set_new(o, "status", r->has_status ? json_integer(r->status) : json_null());
    json_object_set_new(o, "result", r->has_result ? json_integer(r->result) : json_null());
    json_t *meta = r->meta ? json_loads(r->meta, 0, NULL) : NULL;
    json_object_set_new(o, "meta", meta ? meta : json_null());
    json_object_set_new(o, "createdMs", r->has_created ? json_integer(r->created_ms) : json_null());
    json_object_set_new(o, "endedMs", r->has_ended ? json_integer(r->ended_ms) : json_null());
    json_object_set_new(o, "pinned", json_boolean(r->pinned));
    return o;
}

typedef struct list_ctx {
    json_t *arr;
    int limit, n;
    int64_t last, *next;
} list_ctx;

static int list_one(void *ud, const rec_row *r)
{
    list_ctx *x = ud;
    if (x->n == x->limit) {
        *x->next = x->last;
        return 1;
    }
    json_t *o = row_json(r);
    json_object_set_new(o, "bytes", json_integer(r->bytes));
    json_array_append_new(x->arr, o);
    x->last = r->rowid;
    x->n++;
    return 0;
}

int rec_list(log_conn_t *c, const char *session, const char *provider, const char *model, int64_t cursor, int limit,
             json_t *arr, int64_t *next)
{
    *next = 0;
    if (limit < 1 || limit > REC_LIST_MAX) limit = REC_LIST_MAX;
    list_ctx x = {arr, limit, 0, 0, next};
    return store_of(c)->recordings->list(c, session, provider, model, cursor, limit + 1, list_one, &x);
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

typedef struct full_ctx {
    log_conn_t *c;
    int b64_only;
    int (*fn)(void *ud, json_t *rec);
    void *ud;
} full_ctx;

static int full_one(void *ud, const rec_row *r)
{
    full_ctx *x = ud;
    json_t *o = row_json(r);
    json_t *req = r->request ? json_loads(r->request, JSON_ALLOW_NUL, NULL) : NULL;
    json_object_set_new(o, "request", req ? req : json_null());
    chunks_ctx k = {json_array(), x->b64_only};
    int out = rec_chunks(x->c, r->rowid, add_chunk, &k);
    json_object_set_new(o, "chunks", k.arr);
    if (!out) out = x->fn(x->ud, o);
    json_decref(o);
    return out;
}

/* Recordings of key (or of session; both NULL: all) with request and chunks, to fn. */
static int each_full(log_conn_t *c, const char *key, const char *session, int b64_only,
                     int (*fn)(void *ud, json_t *rec), void *ud)
{
    full_ctx x = {c, b64_only, fn, ud};
    return store_of(c)->recordings->each(c, key, session, full_one, &x);
}

static int collect(void *ud, json_t *rec)
{
    json_array_append(ud, rec);
    return 0;
}

json_t *rec_get(log_conn_t *c, const char *key, int *rc)
{
    json_t *arr = json_array();
    *rc = each_full(c, key, NULL, 0, collect, arr);
    if (*rc || !json_array_size(arr)) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

int rec_delete(log_conn_t *c, const char *key)
{
    return store_of(c)->recordings->delete_key(c, key);
}

int rec_pin(log_conn_t *c, const char *key, int pinned)
{
    return store_of(c)->recordings->pin(c, key, pinned);
}

int rec_tx_delete_session(log_conn_t *c, const char *session)
{
    return store_of(c)->recordings->delete_session(c, session);
}

int rec_prune(log_conn_t *c, int64_t cutoff_ms, int dry_run, int64_t *count, int64_t *bytes)
{
    return store_of(c)->recordings->prune(c, cutoff_ms, dry_run, count, bytes);
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
    return each_full(c, NULL, session, 1, export_one, &x);
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
    if (!rc && json_is_true(json_object_get(o, "pinned"))) rc = store_of(c)->recordings->pin_one(c, &id);
    return rc;
}

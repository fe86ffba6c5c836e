/* record: recording and playback of provider requests (lib/recorder,
 * docs/recording.md).
 *
 * A session's mode is in what it was created with (session:created's
 * "recording", or its fork's session:forked), else the runner's default
 * (DSTREAM_RECORDING). In live mode nothing here happens. Otherwise each request
 * gets its key (lib/recorder), its occurrence, counted from the recording:request
 * events of the session's log (a fork counts its source's before the fork point),
 * and its answer ordinal: the occurrences before it that were answered (not closed
 * unanswered, as an attempt cut off by a restart is), which is what playback looks
 * up and what a recording keeps in its meta. And one recording:request event
 * saying what happened:
 *
 *   record    the request goes to the provider and its exchange is recorded;
 *   playback  a complete recording answers it (its chunks fed to the parser as
 *             they came, one flush each, so the deltas are the same), or the
 *             request fails with the key and where the nearest recording differs;
 *   hybrid    a recording answers it if there is one, else it goes live and is
 *             recorded.
 *
 * A recording is written with the session's events, in the runner's commit
 * (each write queued on the outbox with outbox_defer): the row opened with the recording:request event,
 * each chunk with the deltas it produced, the end with provider:request_ended.
 * A runner killed mid-stream leaves the row incomplete: never served. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/timefmt.h"
#include "../lib/event.h"
#include "../lib/recorder.h"
#include "../lib/utf8.h"
#include "tap.h"
#include "mcp_pool.h"
#include "outbox.h"
#include "request.h"

typedef struct pchunk {
    int64_t t_ms;
    size_t len;
    char *p;
} pchunk;

struct rrec {
    int mode;
    int recording;              /* the live exchange is recorded */
    int playing;                /* answered from a recording */
    int realtime;
    char key[REC_KEY_LEN + 1];
    int occ;
    int ord;                    /* the answer it is: earlier requests of key answered */
    json_t *tools;              /* {server: occurrence} of the tool lists it offers (NULL: none) */
    buf_t pending;              /* body bytes since the last flush */
    int seq;                    /* chunks queued */
    pchunk *chunks;             /* playback */
    size_t n, next, cap;
    int result;
};

enum { OP_OPEN, OP_CHUNK, OP_END };

struct recop {
    int what;
    const char *kind;           /* "provider" or "tool" */
    char key[REC_KEY_LEN + 1];
    int occ;
    char request_id[72], provider[64], model[136];
    char *data;                 /* OPEN: the normalized request; CHUNK: the bytes */
    size_t len;
    int seq;
    int64_t t_ms;
    long status;
    int result;
    json_t *meta;
};

int tap_config(runner_t *R)
{
    const char *m = getenv("DSTREAM_RECORDING"), *t = getenv("DSTREAM_RECORDING_TIMING");
    R->rec_mode = REC_LIVE;
    if (m && *m && (R->rec_mode = rec_mode_parse(m)) < 0) {
        diag("error", "DSTREAM_RECORDING=%s: use live, record, playback or hybrid", m);
        return -1;
    }
    if (t && *t && strcmp(t, "fast") && strcmp(t, "realtime")) {
        diag("error", "DSTREAM_RECORDING_TIMING=%s: use fast or realtime", t);
        return -1;
    }
    R->rec_realtime = t && !strcmp(t, "realtime");
    return 0;
}

static void op_free(void *ud)
{
    struct recop *o = ud;
    free(o->data);
    json_decref(o->meta);
    free(o);
}

/* One recording write, inside the commit of the session's events. */
static int op_tx(log_conn_t *c, const char *sid, void *ud)
{
    struct recop *o = ud;
    int64_t now = timefmt_now_ms();
    rec_id id = {sid, o->kind, o->key, o->occ};
    return o->what == OP_OPEN    ? rec_tx_open(c, &id, o->request_id, o->provider, o->model, o->data, now)
           : o->what == OP_CHUNK ? rec_tx_chunk(c, &id, o->seq, o->t_ms, o->data, o->len)
                                 : rec_tx_end(c, &id, o->status, o->result, o->meta, now);
}

/* A recording write, queued on s's outbox (filled in by the caller before the commit). */
static struct recop *op_new(sess_t *s, int what, const struct rrec *r)
{
    struct recop *o = calloc(1, sizeof *o);
    if (!o) abort();
    o->what = what;
    o->kind = "provider";
    memcpy(o->key, r->key, sizeof o->key);
    o->occ = r->occ;
    outbox_defer(s, op_tx, op_free, o);
    return o;
}

/* ---- counting ----------------------------------------------------------------------- */

/* Counted under this name too: every provider request (its key is hex). */
#define ANY_PROVIDER "*provider"

/* s->rec_occ: {"n": {key: requests}, "cut": {key: requests closed unanswered},
 * "last": {"r": request id, "k": key} (the session's last recorded provider
 * request: a session has one request at a time, so a cancellation is of it),
 * "calls": {call id: key}} (the tool calls asked: one asked again was cut off by a
 * restart before its answer, and counts as cut). */
static void bump(json_t *occ, const char *what, const char *key)
{
    json_t *o = json_object_get(occ, what);
    if (!o) json_object_set_new(occ, what, o = json_object());
    json_object_set_new(o, key, json_integer(json_integer_value(json_object_get(o, key)) + 1));
}

/* A provider:request_cancelled closes its request unanswered (cut off by a restart,
 * interrupted, cancelled), except "failed": that one ended with its answer (an
 * error) recorded. The key of the request it closes, if it is occ's last. */
static const char *cut_key(json_t *occ, const json_t *payload)
{
    json_t *last = json_object_get(occ, "last");
    const char *rid = json_string_value(json_object_get(payload, PK_REQUEST_ID)),
               *reason = json_string_value(json_object_get(payload, PK_REASON));
    if (!last || !rid || !reason || !strcmp(reason, "failed") ||
        strcmp(rid, json_string_value(json_object_get(last, "r")) ?: ""))
        return NULL;
    return json_string_value(json_object_get(last, "k"));
}

/* Each recording:request of the log counted by key into s->rec_occ, and each
 * request closed unanswered. */
static int count_msg(void *ud, const void *data, size_t len, offset_t at)
{
    json_t *occ = ud;
    (void)at;
    /* Cheap test first: most events are deltas. */
    if (!data || len < 40) return 0;
    size_t head = len < 64 ? len : 64;
    int rec = memmem(data, head, EV_RECORDING_REQUEST, sizeof EV_RECORDING_REQUEST - 1) != NULL;
    if (!rec && !memmem(data, head, EV_PROVIDER_REQUEST_CANCELLED, sizeof EV_PROVIDER_REQUEST_CANCELLED - 1))
        return 0;
    json_t *e = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
    json_t *p = json_object_get(e, "payload");
    const char *key = json_string_value(json_object_get(p, PK_KEY)),
               *rid = json_string_value(json_object_get(p, PK_REQUEST_ID)),
               *cid = json_string_value(json_object_get(p, PK_CALL_ID));
    if (rec && key) {
        bump(occ, "n", key);
        if (rid) {
            bump(occ, "n", ANY_PROVIDER);
            json_object_set_new(occ, "last", json_pack("{s:s, s:s}", "r", rid, "k", key));
        }
        if (cid && *cid) {
            json_t *calls = json_object_get(occ, "calls");
            if (!calls) json_object_set_new(occ, "calls", calls = json_object());
            if (json_object_get(calls, cid)) bump(occ, "cut", key);
            else json_object_set_new(calls, cid, json_string(key));
        }
    } else if (!rec && (key = cut_key(occ, p))) {
        bump(occ, "cut", key);
        bump(occ, "cut", ANY_PROVIDER);
        json_object_del(occ, "last");
    }
    json_decref(e);
    return 0;
}

/* How many times the session's log asked key before; -1 if it cannot be read. The
 * counts are kept with the session and brought up to date by reading only the
 * events written since the last look (the whole log once, after a start). With
 * ord: how many of those were answered (not closed unanswered, in the log or in
 * the events not yet committed), the answer this one is to be. */
static int occurrences(runner_t *R, sess_t *s, const char *key, int *ord)
{
    char path[SSTORE_ID_MAX + 16];
    snprintf(path, sizeof path, "sessions/%s", s->id);
    if (!s->rec_occ) s->rec_occ = json_object();
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = path;
    rr.kind = s->rec_occ_read ? OFFSET_AT : OFFSET_START;
    rr.from = s->rec_occ_next;
    rr.max_bytes = (size_t)-1;
    if (log_read(R->conn, &rr, count_msg, s->rec_occ)) {
        json_decref(s->rec_occ);          /* counted again from the start next time */
        s->rec_occ = NULL;
        s->rec_occ_read = 0;
        return -1;
    }
    s->rec_occ_next = rr.next;
    s->rec_occ_read = 1;
    int n = (int)json_integer_value(json_object_get(json_object_get(s->rec_occ, "n"), key));
    if (ord) {
        int cut = (int)json_integer_value(json_object_get(json_object_get(s->rec_occ, "cut"), key));
        /* A restart's cancellation may still be on its way to the log. */
        for (size_t i = 0; i < s->nout; i++) {
            const char *k = strcmp(s->out[i].type, EV_PROVIDER_REQUEST_CANCELLED) ? NULL
                                                                                  : cut_key(s->rec_occ, s->out[i].payload);
            if (k && (!strcmp(k, key) || !strcmp(key, ANY_PROVIDER))) {
                cut++;
                break;
            }
        }
        *ord = n - cut < 0 ? 0 : n - cut;
    }
    return n;
}

/* Does the scope reach (a JSON array of session-id prefixes; NULL: every session)
 * take in session id? */
static int reaches(const char *reach, const char *id)
{
    if (!reach) return 1;
    json_t *arr = json_loads(reach, 0, NULL), *p;
    size_t i;
    int yes = 0;
    json_array_foreach(arr, i, p) {
        size_t n = json_string_length(p);
        if (json_is_string(p) && !strncmp(id, json_string_value(p), n)) yes = 1;
    }
    json_decref(arr);
    return yes;
}

/* The session and the ancestors whose recordings it may use, nearest first: its
 * source always (whoever forked it could read it), the source's own ancestors only
 * when the session's scope reaches them. */
static size_t lineage(runner_t *R, sess_t *s, char ids[REC_LINEAGE_MAX][SSTORE_ID_MAX], const char **out)
{
    size_t n = 0;
    char at[SSTORE_ID_MAX];
    snprintf(at, sizeof at, "%s", s->id);
    snprintf(ids[n], SSTORE_ID_MAX, "%s", s->id);
    out[n] = ids[n];
    n++;
    sstore_row row;
    for (int depth = 1; n < REC_LINEAGE_MAX && depth < REC_LINEAGE_MAX * 4 && sstore_get(R->conn, at, &row) == 0 &&
                        row.parent[0];
         depth++) {
        snprintf(at, sizeof at, "%s", row.parent);
        if (depth > 1 && !reaches(s->rec_reach, at)) continue;
        snprintf(ids[n], SSTORE_ID_MAX, "%s", at);
        out[n] = ids[n];
        n++;
    }
    return n;
}

static int take_chunk(void *ud, int64_t t_ms, const void *p, size_t n)
{
    struct rrec *r = ud;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        if (!(r->chunks = realloc(r->chunks, r->cap * sizeof *r->chunks))) abort();
    }
    pchunk *c = &r->chunks[r->n++];
    c->t_ms = t_ms;
    c->len = n;
    c->p = malloc(n ? n : 1);
    if (!c->p) abort();
    if (n) memcpy(c->p, p, n);
    return 0;
}

static void tap_body(rq_t *q, const char *p, size_t len);
static void tap_flush(rq_t *q);
static int tap_call_seed(const rq_t *q, char *out, size_t cap);
static void tap_finished(rq_t *q, int result, long status);
static void tap_free(rq_t *q);

/* A recorded or played-back request's tap (types.h). */
static const rq_tap tap_ops = {tap_body, tap_flush, tap_call_seed, tap_finished, tap_free};

/* ---- a request starts ---------------------------------------------------------------- */

static void free_rec(struct rrec *r)
{
    if (!r) return;
    json_decref(r->tools);
    buf_free(&r->pending);
    for (size_t i = 0; i < r->n; i++) free(r->chunks[i].p);
    free(r->chunks);
    free(r);
}

static void tap_free(rq_t *q)
{
    free_rec(q->rec);
    q->rec = NULL;
}

/* s's recording mode (and whether its playback is in real time), and its scope
 * (s->rec_reach): the recordings of which sessions, besides its own lineage, may
 * answer it or be compared with it. A session's are fixed when it is created (a
 * fork is another session), so they are read from its view once and kept with it.
 * A scope of "all" (its creator was an admin, or read every session) is NULL; a
 * session without one (created before scopes were kept) reaches only its lineage. */
static int session_mode(runner_t *R, sess_t *s, int *realtime)
{
    if (!s->rec_mode_known) {
        session_view v;
        offset_t none = {0, 0};
        session_view_init(&v);
        s->rec_mode = R->rec_mode;
        s->rec_realtime = R->rec_realtime;
        free(s->rec_reach);
        if (!(s->rec_reach = strdup("[]"))) abort();
        if (sstore_view(R->conn, s->id, 0, none, &v, NULL) == 0) {
            json_t *rec = json_object_get(v.created, PK_RECORDING);
            int m = rec_mode_parse(json_string_value(json_object_get(rec, PK_MODE)));
            const char *t = json_string_value(json_object_get(rec, PK_TIMING));
            json_t *scope = json_object_get(rec, PK_SCOPE);
            if (m >= 0) s->rec_mode = m;
            if (t) s->rec_realtime = !strcmp(t, "realtime");
            if (json_is_string(scope) && !strcmp(json_string_value(scope), "all")) {
                free(s->rec_reach);
                s->rec_reach = NULL;
            } else if (json_is_array(scope)) {
                free(s->rec_reach);
                if (!(s->rec_reach = json_dumps(scope, JSON_COMPACT))) abort();
            }
            s->rec_mode_known = 1;
        }
        session_view_free(&v);
    }
    *realtime = s->rec_realtime;
    return s->rec_mode;
}

int tap_records(runner_t *R, sess_t *s)
{
    int realtime;
    return session_mode(R, s, &realtime) != REC_LIVE;
}

int tap_start(runner_t *R, sess_t *s, rq_t *q)
{
    R->start_reason[0] = '\0';
    int realtime;
    int mode = session_mode(R, s, &realtime);
    if (mode == REC_LIVE) return 0;

    const char *kind = q->kind == PROVIDER_ANTHROPIC ? "anthropic" : "openai";
    json_t *body = json_loads(q->body, JSON_ALLOW_NUL, NULL);
    json_t *norm = rec_normalize(kind, body);
    json_decref(body);
    struct rrec *r = calloc(1, sizeof *r);
    if (!r || !norm || rec_key(norm, r->key)) abort();
    r->mode = mode;
    r->realtime = realtime;
    buf_init(&r->pending, 64 << 20);
    /* The tool lists it offers, by their recordings' occurrences (playback offers each
     * request the lists its recorded counterpart had: rec_tools_used). */
    const char *server;
    json_t *kept;
    json_object_foreach(s->rec_tools, server, kept) {
        if (!r->tools) r->tools = json_object();
        json_object_set(r->tools, server, json_object_get(kept, "occurrence"));
    }
    int n = occurrences(R, s, r->key, &r->ord);
    if (n < 0) {
        json_decref(norm);
        free_rec(r);
        snprintf(R->start_error, sizeof R->start_error, "recording: cannot read the session's log");
        return -1;
    }
    r->occ = n;
    q->rec = r;
    q->tap = &tap_ops;
    char ids[REC_LINEAGE_MAX][SSTORE_ID_MAX];
    const char *lin[REC_LINEAGE_MAX];
    size_t nl = lineage(R, s, ids, lin);
    const char *outcome = "recorded";
    rec_found f;
    int hit = 0, ret = 0;
    json_t *near = NULL;
    char why[768] = "";
    if (mode == REC_PLAYBACK || mode == REC_HYBRID) {
        int found = rec_find(R->conn, "provider", r->key, r->ord, lin, nl, s->rec_reach, &f);
        if (found == 1 && rec_chunks(R->conn, f.rowid, take_chunk, r) == 0) {
            r->playing = 1;
            r->result = f.result;
            q->status = f.status;
            const char *ra = json_string_value(json_object_get(f.meta, "retryAfter"));
            json_t *ms = json_object_get(f.meta, "retryAfterMs"), *sr = json_object_get(f.meta, "shouldRetry");
            if (ra) snprintf(q->retry_after, sizeof q->retry_after, "%s", ra);
            if (json_is_integer(ms)) q->retry_after_ms = json_integer_value(ms);
            if (json_is_integer(sr)) q->should_retry = (int)json_integer_value(sr);
            outcome = "hit";
            hit = 1;
            json_decref(f.meta);
            diag("info", "session %s: request %s answered from recording %.12s#%d of %s", s->id, q->id, r->key,
                         f.occurrence, f.session);
            ret = 1;
        } else {
            if (found == 1) json_decref(f.meta);
            near = rec_nearest(R->conn, "provider", norm, lin, nl, s->rec_reach);
            outcome = near ? "diverged" : "miss";
            rec_explain("request", r->key, n, r->ord, near, why, sizeof why);
            if (mode == REC_PLAYBACK) {
                /* Cut to fit: %.60s and the cut may split a character. */
                snprintf(R->start_error, sizeof R->start_error, "playback: %.*s",
                         (int)(sizeof R->start_error - sizeof "playback: "), why);
                utf8_scrub(R->start_error);
                snprintf(R->start_reason, sizeof R->start_reason, "playback_miss");
                diag("info", "session %s: %s", s->id, R->start_error);
                ret = -1;
            } else {
                r->recording = 1;
                diag("info", "session %s: request %s: %s: sent live", s->id, q->id, why);
            }
        }
    } else {
        r->recording = 1;
    }
    sstore_event e = event_recording_request(q->id, NULL, r->key, n, rec_mode_name(mode), outcome,
                                             hit ? f.session : NULL, hit ? f.occurrence : 0, near, why[0] ? why : NULL);
    outbox_emit(R, s, e.type, e.payload);
    json_decref(near);
    if (r->recording) {
        struct recop *o = op_new(s, OP_OPEN, r);
        snprintf(o->request_id, sizeof o->request_id, "%s", q->id);
        snprintf(o->provider, sizeof o->provider, "%.63s", q->target.p ? q->target.p->name : kind);
        snprintf(o->model, sizeof o->model, "%s", q->model);
        o->data = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS);
        if (!o->data) abort();
    }
    json_decref(norm);
    return ret;
}

/* The same in a recorded session and in its playback: the request's key and
 * answer ordinal. */
static int tap_call_seed(const rq_t *q, char *out, size_t cap)
{
    if (!q->rec || !q->rec->key[0]) return -1;
    snprintf(out, cap, "%s#%d", q->rec->key, q->rec->ord);
    return 0;
}

/* ---- a live request records ---------------------------------------------------------- */

static void tap_body(rq_t *q, const char *p, size_t len)
{
    if (q->rec && q->rec->recording) buf_append(&q->rec->pending, p, len);
}

static void tap_flush(rq_t *q)
{
    struct rrec *r = q->rec;
    if (!r || !r->recording || !r->pending.len) return;
    struct recop *o = op_new(q->s, OP_CHUNK, r);
    o->seq = r->seq++;
    o->t_ms = timefmt_now_ms() - q->started_ms;
    o->len = r->pending.len;
    o->data = malloc(o->len);
    if (!o->data) abort();
    memcpy(o->data, r->pending.p, o->len);
    buf_reset(&r->pending);
}

static void tap_finished(rq_t *q, int result, long status)
{
    struct rrec *r = q->rec;
    if (!r || !r->recording) return;
    tap_flush(q);
    struct recop *o = op_new(q->s, OP_END, r);
    o->status = status;
    o->result = result;
    o->meta = json_pack("{s:I, s:i, s:i}", "durationMs", (json_int_t)(timefmt_now_ms() - q->started_ms), "shouldRetry",
                        q->should_retry, "ordinal", r->ord);
    if (q->retry_after[0]) json_object_set_new(o->meta, "retryAfter", json_string(q->retry_after));
    if (q->retry_after_ms >= 0) json_object_set_new(o->meta, "retryAfterMs", json_integer(q->retry_after_ms));
    if (r->tools) json_object_set(o->meta, "tools", r->tools);
    r->recording = 0;
}

/* ---- playback ------------------------------------------------------------------------ */

static int waiting(const rq_t *q)
{
    return q->text.len || q->thinking.len;   /* deltas not yet flushed: one chunk, one flush */
}

int64_t tap_wait(runner_t *R, int64_t now, int64_t wait)
{
    for (sess_t *s = R->sessions; s; s = s->next) {
        rq_t *q = s->rq;
        if (!q || !q->rec || !q->rec->playing || waiting(q)) continue;
        struct rrec *r = q->rec;
        int64_t due = r->next < r->n && r->realtime ? q->started_ms + r->chunks[r->next].t_ms - now : 0;
        if (due < wait) wait = due < 0 ? 0 : due;
    }
    return wait;
}

void tap_pump(runner_t *R, void (*finished)(runner_t *R, rq_t *q, CURLcode result))
{
    int64_t now = timefmt_now_ms();
    for (sess_t *s = R->sessions, *next; s; s = next) {
        next = s->next;
        rq_t *q = s->rq;
        if (!q || !q->rec || !q->rec->playing) continue;
        struct rrec *r = q->rec;
        while (!waiting(q) && r->next < r->n && (!r->realtime || q->started_ms + r->chunks[r->next].t_ms <= now)) {
            pchunk *c = &r->chunks[r->next++];
            request_feed(q, c->p, c->len);
        }
        if (!waiting(q) && r->next == r->n) finished(R, q, (CURLcode)r->result);
    }
}

/* ---- tool calls ------------------------------------------------------------------------ */

/* The occurrence each recorded call of a session was given: {"sid callId": n}
 * (a call's result comes back through tools.c, which knows nothing of it). */
static json_t *tool_occ;

static struct recop *tool_op(sess_t *s, int what, const char *kind, const char *key, int occ)
{
    struct rrec r;
    memset(&r, 0, sizeof r);
    memcpy(r.key, key, sizeof r.key);
    r.occ = occ;
    struct recop *o = op_new(s, what, &r);
    o->kind = kind;
    return o;
}

static json_t *tool_norm(const json_t *call)
{
    json_t *args = json_object_get(call, PK_ARGUMENTS);
    return json_pack("{s:s, s:s, s:O}", "server", json_string_value(json_object_get(call, PK_SERVER)) ?: "", "tool",
                     json_string_value(json_object_get(call, PK_TOOL)) ?: "", "arguments", args ? args : json_null());
}

typedef struct tool_answer {
    json_t *result;
    int is_error, failed;
} tool_answer;

static int take_answer(void *ud, int64_t t_ms, const void *p, size_t n)
{
    tool_answer *a = ud;
    (void)t_ms;
    json_t *j = json_loadb(p, n, JSON_ALLOW_NUL, NULL);
    if (!j) return 0;
    json_decref(a->result);
    a->result = json_incref(json_object_get(j, "output"));
    if (!a->result) a->result = json_null();
    a->is_error = json_is_true(json_object_get(j, "isError"));
    a->failed = json_is_true(json_object_get(j, "failed"));
    json_decref(j);
    return 0;
}

int tap_tool_start(runner_t *R, sess_t *s, const json_t *call, json_t **result, int *is_error, int *failed)
{
    int realtime;
    int mode = session_mode(R, s, &realtime);
    if (mode == REC_LIVE) return 0;
    const char *cid = json_string_value(json_object_get(call, PK_CALL_ID));
    char key[REC_KEY_LEN + 1];
    json_t *norm = tool_norm(call);
    if (rec_key_of("tool", norm, key)) abort();
    int ord = 0;
    int n = occurrences(R, s, key, &ord);
    if (n < 0) n = ord = 0;
    /* Asked before (a restart cut it off): that attempt is not an answer. */
    if (cid && *cid && ord > 0 && json_object_get(json_object_get(s->rec_occ, "calls"), cid)) ord--;
    char ids[REC_LINEAGE_MAX][SSTORE_ID_MAX];
    const char *lin[REC_LINEAGE_MAX];
    size_t nl = lineage(R, s, ids, lin);
    const char *outcome = "recorded";
    int answered = 0, record = mode == REC_RECORD, hit = 0;
    rec_found f;
    char why[512] = "";
    if (mode == REC_PLAYBACK || mode == REC_HYBRID) {
        tool_answer a = {NULL, 0, 0};
        int found = rec_find(R->conn, "tool", key, ord, lin, nl, s->rec_reach, &f);
        if (found != 1) found = rec_find(R->conn, "tool", key, REC_LATEST, lin, nl, s->rec_reach, &f) == 1 ? 2 : 0;
        if (found == 2) json_decref(f.meta);
        if (found == 1) {
            rec_chunks(R->conn, f.rowid, take_answer, &a);
            json_decref(f.meta);
        }
        if (a.result) {
            outcome = "hit";
            hit = 1;
            *result = a.result;
            *is_error = a.is_error;
            *failed = a.failed;
            answered = 1;
        } else {
            outcome = "miss";
            /* The same call recorded fewer times than asked, or not at all. */
            if (found == 2) {
                json_t *same = json_pack("{s:s}", PK_KEY, key);
                rec_explain("tool call", key, n, ord, same, why, sizeof why);
                json_decref(same);
            } else {
                snprintf(why, sizeof why, "no recording of tool call %s (occurrence %d) that this session may use", key, n);
            }
            if (mode == REC_PLAYBACK) {
                char msg[640];
                snprintf(msg, sizeof msg, "playback: %s: not run", why);
                *result = json_string(msg);
                *is_error = *failed = 1;
                answered = 1;
            } else {
                record = 1;
                diag("info", "session %s: tool call %s: %s: run live", s->id, cid ? cid : "", why);
            }
        }
    }
    sstore_event e = event_recording_request(NULL, cid ? cid : "", key, n, rec_mode_name(mode), outcome,
                                             hit ? f.session : NULL, hit ? f.occurrence : 0, NULL, why[0] ? why : NULL);
    outbox_emit(R, s, e.type, e.payload);
    if (record) {
        struct recop *o = tool_op(s, OP_OPEN, "tool", key, n);
        snprintf(o->request_id, sizeof o->request_id, "%s", cid ? cid : "");
        snprintf(o->provider, sizeof o->provider, "%.63s", json_string_value(json_object_get(norm, "server")));
        snprintf(o->model, sizeof o->model, "%.135s", json_string_value(json_object_get(norm, "tool")));
        o->data = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS);
        if (!o->data) abort();
        if (!tool_occ) tool_occ = json_object();
        char k[SSTORE_ID_MAX + 160];
        snprintf(k, sizeof k, "%s %s", s->id, cid ? cid : "");
        json_object_set_new(tool_occ, k, json_pack("{s:s, s:i, s:i}", "key", key, "occurrence", n, "ordinal", ord));
    }
    json_decref(norm);
    return answered;
}

void tap_tool_done(runner_t *R, sess_t *s, const json_t *call, const json_t *result, int is_error, int failed)
{
    (void)R;
    const char *cid = json_string_value(json_object_get(call, PK_CALL_ID));
    char k[SSTORE_ID_MAX + 160];
    snprintf(k, sizeof k, "%s %s", s->id, cid ? cid : "");
    json_t *t = tool_occ ? json_object_get(tool_occ, k) : NULL;
    if (!t) return;
    const char *key = json_string_value(json_object_get(t, "key"));
    int occ = (int)json_integer_value(json_object_get(t, "occurrence"));
    json_t *answer = json_pack("{s:O, s:b, s:b}", "output", result ? result : json_null(), "isError", is_error,
                               "failed", failed);
    struct recop *o = tool_op(s, OP_CHUNK, "tool", key, occ);
    o->data = json_dumps(answer, JSON_COMPACT);
    if (!o->data) abort();
    o->len = strlen(o->data);
    json_decref(answer);
    o = tool_op(s, OP_END, "tool", key, occ);
    o->meta = json_pack("{s:O}", "ordinal", json_object_get(t, "ordinal"));
    json_object_del(tool_occ, k);
}

/* ---- MCP servers' tool lists ---------------------------------------------------------- */

static int take_list(void *ud, int64_t t_ms, const void *p, size_t n)
{
    json_t **list = ud;
    (void)t_ms;
    json_decref(*list);
    *list = json_loadb(p, n, JSON_ALLOW_NUL, NULL);
    return 0;
}

/* The list of a complete recording found by rec_find (NULL if unreadable). */
static json_t *found_list(runner_t *R, rec_found *f)
{
    json_t *list = NULL;
    json_decref(f->meta);
    if (rec_chunks(R->conn, f->rowid, take_list, &list) || !json_is_array(list)) {
        json_decref(list);
        return NULL;
    }
    return list;
}

/* Keep list (a new reference) as what s knows of server's tools: occurrence occ of
 * the tools recordings of session from. */
static const json_t *keep_list(sess_t *s, const char *server, json_t *list, int occ, const char *from)
{
    if (!s->rec_tools) s->rec_tools = json_object();
    json_object_set_new(s->rec_tools, server, json_pack("{s:o, s:i, s:s}", "list", list, "occurrence", occ, "session", from));
    return list;
}

/* Playback: the list of server that the request about to start offers, kept in
 * s->rec_tools. The recorded session the lists come from is the one that recorded
 * the server's list last, in the session's lineage first; its request with as many
 * answers before it as this one has says which of its lists it offered
 * (rec_tools_used), else the latest. NULL when no list of server was recorded. */
static const json_t *played_list(runner_t *R, sess_t *s, const char *server, const char *key)
{
    json_t *kept = s->rec_tools ? json_object_get(s->rec_tools, server) : NULL;
    rec_found f;
    char src[SSTORE_ID_MAX];
    if (!kept) {
        char ids[REC_LINEAGE_MAX][SSTORE_ID_MAX];
        const char *lin[REC_LINEAGE_MAX];
        size_t nl = lineage(R, s, ids, lin);
        json_t *list = rec_find(R->conn, "tools", key, REC_LATEST, lin, nl, s->rec_reach, &f) == 1 ? found_list(R, &f) : NULL;
        if (!list) return NULL;
        keep_list(s, server, list, f.occurrence, f.session);
        diag("info", "session %s: MCP server %s's tools from recording %.12s#%d of %s", s->id, server, key,
                     f.occurrence, f.session);
        kept = json_object_get(s->rec_tools, server);
    }
    snprintf(src, sizeof src, "%s", json_string_value(json_object_get(kept, "session")));
    int answered = 0;
    int want = occurrences(R, s, ANY_PROVIDER, &answered) < 0 ? -1 : rec_tools_used(R->conn, src, answered, server);
    if (want >= 0 && want != json_integer_value(json_object_get(kept, "occurrence"))) {
        const char *one[1] = {src};
        json_t *list = NULL;
        if (rec_find(R->conn, "tools", key, want, one, 1, s->rec_reach, &f) == 1) {
            if (!strcmp(f.session, src) && f.occurrence == want) list = found_list(R, &f);   /* frees f.meta */
            else json_decref(f.meta);
        }
        if (list) {
            keep_list(s, server, list, want, src);
            diag("info", "session %s: MCP server %s's tools from recording %.12s#%d of %s (request %d)", s->id, server,
                         key, want, src, answered);
            kept = json_object_get(s->rec_tools, server);
        }
    }
    return json_object_get(kept, "list");
}

int tap_tools(runner_t *R, sess_t *s, const char *server, const json_t **tools, char *err, size_t errcap)
{
    int realtime;
    int mode = session_mode(R, s, &realtime);
    json_t *kept = s->rec_tools ? json_object_get(s->rec_tools, server) : NULL;
    json_t *norm = json_pack("{s:s}", "server", server);
    char key[REC_KEY_LEN + 1];
    if (!norm || rec_key_of("tools", norm, key)) abort();
    rec_found f;
    if (mode == REC_PLAYBACK) {
        json_decref(norm);
        if ((*tools = played_list(R, s, server, key))) return RMCP_READY;
        diag("info", "session %s: playback: no recorded tool list of MCP server %s: asking the server", s->id, server);
        return rmcp_tools(R->mcp, server, tools, err, errcap);
    }
    int st = rmcp_tools(R->mcp, server, tools, err, errcap);
    if (st != RMCP_READY || (mode != REC_RECORD && mode != REC_HYBRID) ||
        (kept && json_equal(json_object_get(kept, "list"), (json_t *)*tools))) {
        json_decref(norm);
        return st;
    }
    /* A list this session has not recorded yet: compare with its last recorded one
     * (a runner that restarted knows none), and record it as the next occurrence. */
    int occ = 0;
    if (!kept) {
        const char *own[1] = {s->id};
        json_t *last = NULL;
        if (rec_find(R->conn, "tools", key, REC_LATEST, own, 1, s->rec_reach, &f) == 1 && !strcmp(f.session, s->id)) {
            occ = f.occurrence + 1;
            last = found_list(R, &f);
        } else if (f.meta) {
            json_decref(f.meta);
        }
        if (last && json_equal(last, (json_t *)*tools)) {
            keep_list(s, server, last, occ - 1, s->id);
            json_decref(norm);
            return st;
        }
        json_decref(last);
    } else {
        occ = (int)json_integer_value(json_object_get(kept, "occurrence")) + 1;
    }
    struct recop *o = tool_op(s, OP_OPEN, "tools", key, occ);
    snprintf(o->provider, sizeof o->provider, "%.63s", server);
    snprintf(o->model, sizeof o->model, "tools/list");
    o->data = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS);
    if (!o->data) abort();
    o = tool_op(s, OP_CHUNK, "tools", key, occ);
    o->data = json_dumps(*tools, JSON_COMPACT);
    if (!o->data) abort();
    o->len = strlen(o->data);
    tool_op(s, OP_END, "tools", key, occ);
    keep_list(s, server, json_deep_copy(*tools), occ, s->id);
    diag("info", "session %s: MCP server %s's tools recorded (%.12s#%d)", s->id, server, key, occ);
    json_decref(norm);
    return st;
}

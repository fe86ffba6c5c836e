/* session: typed session events and the pure reducer.
 *
 * The reducer folds one event at a time into a session_view. It never fails on an
 * event type it does not know (old binaries reading newer logs) and never looks
 * anything up: everything it needs is in the events, which is why session:created
 * carries the workflow's initial state and version. Once a session is finished
 * (workflow completed, failed, cancelled) its status no longer moves. Each type
 * of the catalogue (EV_* in session.h) has one reducer function in one table
 * (`reducers`); lib/event builds the events by the same names. */
#include "session.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "compact.h"
#include "timefmt.h"
#include "utf8.h"

const char *const session_event_types[] = {
    EV_SESSION_CREATED,
    EV_SESSION_FORKED,
    EV_SESSION_CANCELLED,
    EV_SESSION_BUDGET_EXCEEDED,
    EV_WORKFLOW_STARTED,
    EV_WORKFLOW_COMPLETED,
    EV_WORKFLOW_FAILED,
    EV_PHASE_ENTERED,
    EV_PHASE_EXITED,
    EV_STEP_STARTED,
    EV_STEP_COMPLETED,
    EV_AGENT_STARTED,
    EV_AGENT_COMPLETED,
    EV_PROVIDER_REQUEST_STARTED,
    EV_PROVIDER_REQUEST_ENDED,
    EV_PROVIDER_REQUEST_CANCELLED,
    EV_PROVIDER_REQUEST_RETRIED,
    EV_PROVIDER_FAILOVER,
    EV_TEXT_DELTA,
    EV_THINKING_DELTA,
    EV_TOOL_CALLED,
    EV_TOOL_RESULT,
    EV_TOOL_APPROVED,
    EV_TOOL_LOOP_STOPPED,
    EV_TOOL_SERVER_FAILED,
    EV_STATE_UPDATED,
    EV_INPUT_REQUESTED,
    EV_INPUT_RECEIVED,
    EV_INPUT_EXPIRED,
    EV_MESSAGE_USER,
    EV_CANCEL_REQUESTED,
    EV_STOP_REQUESTED,
    EV_REPLY_STOPPED,
    EV_REPLY_FAILED,
    EV_RECORDING_REQUEST,
    EV_SESSION_COMPACTED,
    EV_COMPACT_REQUESTED,
    EV_TIMER_SET,
    EV_TIMER_FIRED,
    EV_SIGNAL_RECEIVED,
    NULL};

static int listed(const char *const *list, const char *s)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(s, list[i]) == 0) return 1;
    return 0;
}

int session_known_type(const char *type)
{
    return listed(session_event_types, type);
}

const char *const session_payload_keys[] = {
    PK_AGENT, PK_WORKFLOW, PK_VERSION, PK_INITIAL_STATE, PK_INPUT, PK_RECORDING, PK_LABELS, PK_MODE, PK_TIMING, PK_SCOPE,
    PK_FROM, PK_AT, PK_REASON, PK_STATE, PK_SET, PK_ERROR, PK_ATTEMPTS, PK_PHASE, PK_TO, PK_STEP,
    PK_KIND, PK_NAME, PK_MODEL, PK_OUTPUT, PK_DURATION_MS, PK_USAGE, PK_INPUT_TOKENS,
    PK_OUTPUT_TOKENS, PK_COST_USD, PK_REQUEST_ID, PK_PROVIDER, PK_FALLBACK, PK_ATTEMPT, PK_STOP_REASON, PK_CAUSE,
    PK_STATUS, PK_DELAY_MS, PK_RETRY_AT, PK_TEXT, PK_CALL_ID, PK_ARGUMENTS, PK_SERVER, PK_TOOL,
    PK_SIDE_EFFECTING, PK_RESULT, PK_IS_ERROR, PK_FAILED, PK_DENIED, PK_TURNS, PK_INTERACTION_ID, PK_PROMPT,
    PK_OPTIONS, PK_EXPIRES_AT, PK_RESPONSE, PK_CONTENT, PK_SKILL, PK_REPLACES, PK_KEY, PK_OCCURRENCE, PK_OUTCOME,
    PK_SESSION, PK_NEAREST, PK_FIELD, PK_RECORDED, PK_REQUESTED, PK_PURPOSE, PK_UP_TO, PK_SUMMARY,
    PK_TOKENS_BEFORE, PK_TOKENS_AFTER, PK_CONTINUED_FROM, PK_CHARS, PK_TRIMMED, PK_CONTINUED, PK_CUT_IN, PK_CONTEXT_TOKENS,
    PK_LIMITS, PK_BUDGET, PK_LIMIT, PK_MAX, PK_SPENT, PK_DUE_AT, PK_PAYLOAD, PK_SIGNAL, PK_SIGNALS, PK_TIMEOUT,
    NULL};

int session_known_key(const char *key)
{
    return listed(session_payload_keys, key);
}

static const char *const status_names[] = {"pending", "running", "awaiting_input",
                                           "completed", "failed", "cancelled"};

const char *session_status_name(session_status s)
{
    return (unsigned)s < sizeof status_names / sizeof status_names[0] ? status_names[s] : "unknown";
}

int session_status_parse(const char *s)
{
    for (size_t i = 0; i < sizeof status_names / sizeof status_names[0]; i++)
        if (strcmp(s, status_names[i]) == 0) return (int)i;
    return -1;
}

/* ---- trace context ---------------------------------------------------------------- */

/* Random bytes for span and trace ids, taken from a pool of getrandom's (a span
 * id per event: one system call each was 2 % of a streaming runner's CPU). Each
 * thread has its own; a child forked by a thread starts with an empty one, so that
 * no two processes hand out the same bytes. */
#define RANDOM_POOL 512
static __thread unsigned char pool[RANDOM_POOL];
static __thread size_t pool_left;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void pool_forget(void)
{
    pool_left = 0;
}

static void pool_at_fork(void)
{
    pthread_atfork(NULL, NULL, pool_forget);
}

static void random_bytes(unsigned char *b, size_t n)
{
    pthread_once(&pool_once, pool_at_fork);
    if (pool_left < n) {
        if (getrandom(pool, sizeof pool, 0) == (ssize_t)sizeof pool) {
            pool_left = sizeof pool;
        } else {
            /* getrandom on Linux does not fail for small sizes once seeded. */
            if (getrandom(b, n, 0) != (ssize_t)n)
                for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 37 + 11);
            return;
        }
    }
    memcpy(b, pool + sizeof pool - pool_left, n);
    pool_left -= n;
}

static void random_hex(char *out, size_t nbytes)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[32];
    random_bytes(b, nbytes);
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[2 * nbytes] = '\0';
}

static int is_hex(const char *s, size_t n)
{
    int nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
        if (c != '0') nonzero = 1;
    }
    return nonzero;
}

static int is_hex_any(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

int session_trace_from_header(const char *h, session_trace *t)
{
    /* version "00", '-', 32 hex trace id, '-', 16 hex parent id, '-', 2 hex flags */
    if (!h || strlen(h) < 55 || h[2] != '-' || h[35] != '-' || h[52] != '-') return -1;
    /* Version and flags: two lowercase hex digits each; version ff is invalid. */
    if (!is_hex_any(h, 2) || !strncmp(h, "ff", 2) || !is_hex_any(h + 53, 2) || !is_hex(h + 3, 32) ||
        !is_hex(h + 36, 16))
        return -1;
    if (strncmp(h, "00", 2) == 0 && strlen(h) != 55) return -1;
    memcpy(t->trace_id, h + 3, 32);
    t->trace_id[32] = '\0';
    memcpy(t->parent_span_id, h + 36, 16);
    t->parent_span_id[16] = '\0';
    random_hex(t->span_id, 8);
    return 0;
}

void session_trace_new(session_trace *t)
{
    random_hex(t->trace_id, 16);
    random_hex(t->span_id, 8);
    t->parent_span_id[0] = '\0';
}

void session_trace_child(const session_trace *parent, session_trace *t)
{
    memcpy(t->trace_id, parent->trace_id, sizeof t->trace_id);
    memcpy(t->parent_span_id, parent->span_id, sizeof t->parent_span_id);
    random_hex(t->span_id, 8);
}

/* ---- envelopes ------------------------------------------------------------------------ */

json_t *session_event_build(const char *type, const json_t *payload, const char *actor, const char *caused_by,
                            const session_trace *trace, int64_t now_ms)
{
    char ts[40];
    timefmt_format(now_ms, ts, sizeof ts);
    json_t *ev = json_object();
    json_object_set_new(ev, "type", json_string(type));
    json_object_set(ev, "payload", payload ? (json_t *)payload : json_object());
    if (!payload) json_decref(json_object_get(ev, "payload"));
    json_object_set_new(ev, "createdAt", json_string(ts));
    json_object_set_new(ev, "actor", json_string(actor));
    json_object_set_new(ev, "causedBy", caused_by ? json_string(caused_by) : json_null());
    json_t *tr = json_object();
    json_object_set_new(tr, "traceId", json_string(trace->trace_id));
    json_object_set_new(tr, "spanId", json_string(trace->span_id));
    json_object_set_new(tr, "parentSpanId",
                        trace->parent_span_id[0] ? json_string(trace->parent_span_id) : json_null());
    json_object_set_new(ev, "trace", tr);
    return ev;
}

/* A dump callback: the bytes go straight into the buffer (no string to copy). */
static int dump_to_buf(const char *p, size_t n, void *ud)
{
    return buf_append(ud, p, n) ? -1 : 0;
}

int session_event_dump(buf_t *out, const json_t *ev)
{
    if (!ev) return BUF_ENOMEM;
    return json_dump_callback(ev, dump_to_buf, out, JSON_COMPACT) ? BUF_ENOMEM : 0;
}

/* ---- envelopes without a tree ----
 * Most events (every text and thinking delta of a reply) have a payload of strings
 * and numbers only. Their envelope is written here byte by byte as jansson's compact
 * dump of session_event_build's tree writes it: the same key order (the payload's in
 * its own order), the same escapes (\" \\ \b \f \n \r \t, other control characters
 * as \u00XX in capitals, nothing else), without the dozen allocations of the tree.
 * Anything else (a nested payload, a float, text that is not UTF-8, on which jansson
 * would leave a key out or fail) goes through the tree; test_session compares the
 * two byte for byte. */

/* s[0..n) as a JSON string, quotes included. 1 if it is not UTF-8 (nothing
 * written that counts: the caller drops the whole envelope), else 0 or BUF_E*. */
static int flat_str(buf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    /* Room for the string as it is and its quotes at once (escapes grow it more). */
    int rc = buf_reserve(b, n + 2);
    if (rc) return rc;
    b->p[b->len++] = '"';
    size_t start = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') continue;
        if (c >= 0x80) {
            size_t k = utf8_seq(s + i, n - i);
            if (!k) return 1;
            i += k - 1;
            continue;
        }
        char e[6] = {'\\', 0, 0, 0, 0, 0};
        size_t en = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        default:
            memcpy(e + 1, "u00", 3);
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            en = 6;
        }
        if ((rc = buf_append(b, s + start, i - start)) == 0) rc = buf_append(b, e, en);
        start = i + 1;
    }
    if (rc == 0 && start == 0) {
        /* Nothing escaped (most strings): it fits in the room reserved above. */
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len++] = '"';
        b->p[b->len] = '\0';
        return 0;
    }
    if (rc == 0) rc = buf_append(b, s + start, n - start);
    return rc ? rc : buf_append(b, "\"", 1);
}

static int flat_cstr(buf_t *b, const char *s)
{
    return s ? flat_str(b, s, strlen(s)) : buf_append(b, "null", 4);
}

/* "key":value of each of the payload's members (strings, integers, true, false,
 * null). 1 if one is anything else. */
static int flat_payload(buf_t *b, const json_t *payload)
{
    int rc = buf_append(b, "{", 1);
    int first = 1;
    for (void *it = json_object_iter((json_t *)payload); it; it = json_object_iter_next((json_t *)payload, it)) {
        json_t *v = json_object_iter_value(it);
        if (rc) return rc;
        if (!first && (rc = buf_append(b, ",", 1))) return rc;
        first = 0;
        if ((rc = flat_str(b, json_object_iter_key(it), json_object_iter_key_len(it))) ||
            (rc = buf_append(b, ":", 1)))
            return rc;
        switch (json_typeof(v)) {
        case JSON_STRING: rc = flat_str(b, json_string_value(v), json_string_length(v)); break;
        case JSON_INTEGER: rc = buf_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
        case JSON_TRUE: rc = buf_append(b, "true", 4); break;
        case JSON_FALSE: rc = buf_append(b, "false", 5); break;
        case JSON_NULL: rc = buf_append(b, "null", 4); break;
        default: return 1;
        }
    }
    return rc ? rc : buf_append(b, "}", 1);
}

/* The envelope written flat: 0, BUF_E*, or 1 (out as it was) when it needs the tree. */
static int flat_event(buf_t *out, const char *type, const json_t *payload, const char *actor,
                      const char *caused_by, const session_trace *t, const char *ts)
{
    if (!type || (payload && !json_is_object(payload))) return 1;
    size_t mark = out->len;
    int rc = buf_append(out, "{\"type\":", 8);
    if (!rc) rc = flat_cstr(out, type);
    if (!rc) rc = buf_append(out, ",\"payload\":", 11);
    if (!rc) rc = payload ? flat_payload(out, payload) : buf_append(out, "{}", 2);
    if (!rc) rc = buf_append(out, ",\"createdAt\":", 13);
    if (!rc) rc = flat_cstr(out, ts);
    if (!rc) rc = buf_append(out, ",\"actor\":", 9);
    /* json_string(NULL) is no string: jansson leaves the key out; so does the tree. */
    if (!rc) rc = actor ? flat_cstr(out, actor) : 1;
    if (!rc) rc = buf_append(out, ",\"causedBy\":", 12);
    if (!rc) rc = flat_cstr(out, caused_by);
    if (!rc) rc = buf_append(out, ",\"trace\":{\"traceId\":", 20);
    if (!rc) rc = flat_cstr(out, t->trace_id);
    if (!rc) rc = buf_append(out, ",\"spanId\":", 10);
    if (!rc) rc = flat_cstr(out, t->span_id);
    if (!rc) rc = buf_append(out, ",\"parentSpanId\":", 16);
    if (!rc) rc = flat_cstr(out, t->parent_span_id[0] ? t->parent_span_id : NULL);
    if (!rc) rc = buf_append(out, "}}", 2);
    if (rc) {
        out->len = mark;
        if (out->p) out->p[mark] = '\0';
    }
    return rc;
}

int session_event_encode(buf_t *out, const char *type, const json_t *payload, const char *actor,
                         const char *caused_by, const session_trace *trace, int64_t now_ms)
{
    char ts[40];
    timefmt_format(now_ms, ts, sizeof ts);
    int flat = flat_event(out, type, payload, actor, caused_by, trace, ts);
    if (flat != 1) return flat;
    json_t *ev = session_event_build(type, payload, actor, caused_by, trace, now_ms);
    int rc = session_event_dump(out, ev);
    json_decref(ev);
    return rc;
}

/* ---- the reducer ------------------------------------------------------------------------ */

void session_view_init(session_view *v)
{
    memset(v, 0, sizeof *v);
    v->status = SESSION_PENDING;
    v->state = json_object();
    v->messages = json_array();
    v->early = json_object();
    v->queued = json_array();
    v->open_calls = json_array();
    v->budget = json_pack("{s:{}, s:i}", "limits", "asks", 0);
    v->signals = json_array();
}

void session_view_free(session_view *v)
{
    json_decref(v->created);
    json_decref(v->state);
    json_decref(v->messages);
    json_decref(v->pending);
    json_decref(v->early);
    json_decref(v->queued);
    json_decref(v->open_calls);
    json_decref(v->summary);
    json_decref(v->cut);
    json_decref(v->budget);
    json_decref(v->signals);
    json_decref(v->waiting);
    memset(v, 0, sizeof *v);
}

int session_view_finished(const session_view *v)
{
    return v->status == SESSION_CANCELLED ||
           ((v->status == SESSION_COMPLETED || v->status == SESSION_FAILED) && v->is_workflow);
}

/* A new request begins: its attempts and retry budgets start from zero. */
static void request_reset(session_view *v)
{
    v->attempts = v->failures = v->restarts = 0;
    v->retry_at = 0;
    v->compacted_turn = 0;
    json_decref(v->cut);
    v->cut = NULL;
    v->route = 0;   /* each request starts with the agent's own provider */
}

static void set_status(session_view *v, session_status s)
{
    if (!session_view_finished(v)) v->status = s;
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* 1 if o1's and o2's string k are the same, NULs and all (absent counts as ""). */
static int same_str(const json_t *o1, const json_t *o2, const char *k)
{
    const json_t *a = json_object_get(o1, k), *b = json_object_get(o2, k);
    size_t na = json_is_string(a) ? json_string_length(a) : 0, nb = json_is_string(b) ? json_string_length(b) : 0;
    return na == nb && (na == 0 || memcmp(json_string_value(a), json_string_value(b), na) == 0);
}

static json_t *assistant_for(session_view *v, const char *request)
{
    for (size_t i = json_array_size(v->messages); i-- > 0;) {
        json_t *m = json_array_get(v->messages, i);
        if (strcmp(str(m, "requestId"), request) == 0) return m;
    }
    return NULL;
}

/* Called for every delta of a streaming reply, on a text that keeps growing: one
 * copy into the joined text and one into the JSON string, no UTF-8 pass (both
 * parts come from JSON strings, which are valid UTF-8, and so is what joins them;
 * a text cut inside a character by a provider would already have failed to parse). */
static void append_text(json_t *msg, const char *key, const json_t *piece)
{
    /* A model's text may hold NULs (JSON's \u0000): lengths, never strlen. */
    if (!json_is_string(piece)) return;
    json_t *cur = json_object_get(msg, key);
    size_t a = json_is_string(cur) ? json_string_length(cur) : 0, b = json_string_length(piece);
    char *s = malloc(a + b + 1);
    if (!s) abort();
    if (a) memcpy(s, json_string_value(cur), a);
    memcpy(s + a, json_string_value(piece), b + 1);
    /* In place only when nobody else holds the string (a request built from the view). */
    if (json_is_string(cur) && cur->refcount == 1) json_string_setn_nocheck(cur, s, a + b);
    else json_object_set_new(msg, key, json_stringn_nocheck(s, a + b));
    free(s);
}

size_t session_chars_prefix(const char *s, size_t len, int64_t chars)
{
    size_t i = 0;
    if (chars <= 0) return 0;
    /* Past the start of the chars-th character's successor, or the end. */
    for (int64_t n = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80 && n++ == chars) break;
    return i;
}

size_t session_skip_ws(const char *text, size_t len, int *skip)
{
    size_t i = 0, sp;
    while (i < len && *skip > 0 && (sp = utf8_space_at(text + i, len - i))) {
        i += sp;
        (*skip)--;
    }
    if (i < len) *skip = 0;
    return i;
}

static int64_t int_of(const json_t *o, const char *k)
{
    json_t *x = json_object_get(o, k);
    return json_is_integer(x) ? json_integer_value(x) : 0;
}

/* A user message answered now: queued ones wait for the reply in flight. */
/* The index in v->messages of the user message at offset, or -1. */
static ssize_t user_message_at(const session_view *v, const char *offset)
{
    for (size_t i = json_array_size(v->messages); i-- > 0;) {
        json_t *m = json_array_get(v->messages, i);
        if (!strcmp(str(m, "role"), "user") && !strcmp(str(m, "offset"), offset)) return (ssize_t)i;
    }
    return -1;
}

int session_view_has_user_message(const session_view *v, const char *offset)
{
    return user_message_at(v, offset) >= 0;
}

const char *session_view_last_user(const session_view *v)
{
    for (size_t i = json_array_size(v->messages); i-- > 0;) {
        json_t *m = json_array_get(v->messages, i);
        if (!strcmp(str(m, "role"), "user") && !json_is_true(json_object_get(m, "background")))
            return json_string_value(json_object_get(m, "offset"));
    }
    return NULL;
}

static void chat_approvals(session_view *v);

static void user_message(session_view *v, const json_t *p, const char *offset)
{
    const char *mode = str(p, PK_MODE);
    /* It replaces an earlier message: that one and everything after it leave the
     * history the model is sent (superseded; the events keep them). */
    ssize_t from = json_object_get(p, PK_REPLACES) ? user_message_at(v, str(p, PK_REPLACES)) : -1;
    for (size_t i = from < 0 ? json_array_size(v->messages) : (size_t)from; i < json_array_size(v->messages); i++)
        json_object_set_new(json_array_get(v->messages, i), "superseded", json_true());
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string("user"));
    json_object_set(m, "content", json_object_get(p, PK_CONTENT));
    if (offset) json_object_set_new(m, "offset", json_string(offset));
    if (strcmp(mode, "background") == 0) {
        json_object_set_new(m, "background", json_true());
        json_array_append_new(v->messages, m);
        return;
    }
    if (strcmp(mode, "queue") == 0 && (v->request[0] || json_array_size(v->queued))) {
        json_array_append_new(v->queued, m);
        /* After a failed reply the queue waits for nothing: answer it. */
        if (!v->is_workflow && !v->request[0] && v->status == SESSION_FAILED) {
            v->error[0] = '\0';
            set_status(v, SESSION_PENDING);
        }
        return;
    }
    json_array_append_new(v->messages, m);
    if (!v->is_workflow && !v->request[0]) {
        request_reset(v);
        v->message_requests = 0;
        v->error[0] = '\0';
        set_status(v, SESSION_PENDING);
        chat_approvals(v);      /* still waiting for an approval: it is answered after it */
    }
}

/* A tool result as the model will see it: whole up to SESSION_TOOL_RESULT_MAX
 * bytes, else cut (at a UTF-8 boundary) with a marker saying so. The event keeps
 * the whole result. New reference. */
static json_t *tool_content(const json_t *result)
{
    char *dumped = NULL;
    const char *t;
    size_t n;
    if (!result) return json_string("");
    if (json_is_string(result)) {
        t = json_string_value(result);
        n = json_string_length(result);
    } else {
        dumped = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
        t = dumped ? dumped : "";
        n = strlen(t);
    }
    json_t *out;
    if (n <= SESSION_TOOL_RESULT_MAX) {
        out = json_deep_copy(result);
    } else {
        size_t keep = SESSION_TOOL_RESULT_MAX;
        while (keep > 0 && ((unsigned char)t[keep] & 0xc0) == 0x80) keep--;
        char marker[160];
        int m = snprintf(marker, sizeof marker, "\n[truncated: %zu of %zu bytes shown; the whole result is in the tool:result event]",
                         keep, n);
        char *cut = malloc(keep + (size_t)m + 1);
        if (!cut) abort();
        memcpy(cut, t, keep);
        memcpy(cut + keep, marker, (size_t)m + 1);
        out = json_stringn(cut, keep + (size_t)m);
        free(cut);
        if (!out) out = json_string("[a tool result that could not be shown]");
    }
    free(dumped);
    return out;
}

/* A chat's input requests are its tool calls waiting for approval: the open one
 * (pendingInput) is the first of them without an answer, and the session awaits
 * input while there is one. Called after whatever changes its calls or answers. */
static void chat_approvals(session_view *v)
{
    size_t i;
    const json_t *c, *ask = NULL;
    if (v->is_workflow) return;
    json_array_foreach(v->open_calls, i, c) {
        const json_t *a = json_object_get(c, SESSION_CALL_APPROVAL);
        if (a && !json_object_get(v->early, str(a, PK_INTERACTION_ID))) {
            ask = a;
            break;
        }
    }
    /* A budget's checkpoint waits before anything (no request starts meanwhile). */
    if (!ask) ask = json_object_get(v->budget, "open");
    json_decref(v->pending);
    v->pending = ask ? json_deep_copy(ask) : NULL;
    if (ask) set_status(v, SESSION_AWAITING_INPUT);
    else if (v->status == SESSION_AWAITING_INPUT) set_status(v, SESSION_RUNNING);
}

/* The calls of a request that was cut off will have no results: forget them. */
static void drop_calls_of(session_view *v, const char *request)
{
    for (size_t i = json_array_size(v->open_calls); i-- > 0;)
        if (!strcmp(str(json_array_get(v->open_calls, i), PK_REQUEST_ID), request))
            json_array_remove(v->open_calls, i);
    if (v->tool_wait == -1 && !strcmp(request, v->request)) v->tool_wait = 0;
    chat_approvals(v);
}

/* The reducers, one per event type of the catalogue (docs/events.md). */
typedef void (*reduce_fn)(session_view *v, const json_t *p, const char *offset);

static void r_nothing(session_view *v, const json_t *p, const char *offset)
{
    (void)v;
    (void)p;
    (void)offset;
}

static void r_session_created(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    json_decref(v->created);
    v->created = json_deep_copy(p);
    v->input = json_object_get(v->created, PK_INPUT);
    v->is_workflow = json_object_get(p, PK_WORKFLOW) != NULL;
    json_t *init = json_object_get(p, PK_INITIAL_STATE);
    if (json_is_object(init)) {
        json_decref(v->state);
        v->state = json_deep_copy(init);
    }
    v->status = SESSION_PENDING;
}

/* A fork may run in another recording mode than its source, and has the scope of
 * whoever forked it (docs/recording.md): what its session:forked names replaces
 * those of what the session was created with, the rest stays its source's. A retry's
 * fork (POST /v1/sessions/retry) may name another agent for a chat, another version
 * for a workflow: they replace the created ones too. */
static void r_session_forked(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    json_t *rec = json_object_get(p, PK_RECORDING);
    json_t *agent = json_object_get(p, PK_AGENT), *version = json_object_get(p, PK_VERSION);
    /* Everything before the fork point is its source's: inherited, never spent again. */
    v->cost_inherited_usd = v->cost_usd;
    v->cost_recorded_usd = 0;
    if (!json_is_object(v->created)) return;
    if (json_is_string(agent) && json_object_get(v->created, PK_AGENT))
        json_object_set(v->created, PK_AGENT, agent);
    if (json_is_integer(version) && json_object_get(v->created, PK_WORKFLOW))
        json_object_set(v->created, PK_VERSION, version);
    if (!json_is_object(rec)) return;
    json_t *was = json_object_get(v->created, PK_RECORDING);
    json_t *now = json_is_object(was) ? json_deep_copy(was) : json_object();
    json_object_update(now, rec);
    json_object_set_new(v->created, PK_RECORDING, now);
}

static void r_workflow_started(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    (void)p;
    v->started = 1;
    set_status(v, SESSION_RUNNING);
}

static void r_phase_entered(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    snprintf(v->phase, sizeof v->phase, "%s", str(p, PK_PHASE));
    v->step = 0;
    v->step_open = 0;
    v->branch[0] = '\0';
}

/* The open step's wait (its timer, the signals it names) ends with it. */
static void step_wait_end(session_view *v)
{
    v->timer_due = 0;
    json_decref(v->waiting);
    v->waiting = NULL;
}

static void r_step_started(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    step_wait_end(v);
    /* A wait step names its signals: what the session waits for, to show. */
    const json_t *names = json_object_get(p, PK_SIGNALS);
    if (json_is_array(names)) v->waiting = json_deep_copy(names);
    v->step_open = 1;
    v->tool_turns = 0;
    v->steps++;
    /* A workflow's messages are its current agent step's conversation. */
    if (v->is_workflow) json_array_clear(v->messages);
    request_reset(v);
    if (v->status != SESSION_AWAITING_INPUT) set_status(v, SESSION_RUNNING);
}

static void r_step_completed(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    v->step_open = 0;
    v->step++;
    step_wait_end(v);
    /* A human step consumed its answer: a later visit asks again. */
    const char *iid = str(p, PK_INTERACTION_ID);
    if (*iid) json_object_del(v->early, iid);
    /* A wait step took a signal: the first of that name received (the one it
     * picked: the earliest of the names it waits for). */
    const char *sig = str(p, PK_SIGNAL);
    for (size_t i = 0; *sig && i < json_array_size(v->signals); i++)
        if (!strcmp(str(json_array_get(v->signals, i), PK_NAME), sig)) {
            json_array_remove(v->signals, i);
            break;
        }
    /* ... and its branch, when it has one, is where the workflow goes next. */
    snprintf(v->branch, sizeof v->branch, "%s", str(p, PK_TO));
}

/* A sleep or wait step's timer: due at dueAt (ms since the epoch). */
static void r_timer_set(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    if (v->step_open) v->timer_due = int_of(p, PK_DUE_AT);
}

static void r_timer_fired(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    (void)p;
    v->timer_due = 0;
}

/* A signal is kept, in order, until a wait step that names it takes it (now, or
 * when the session reaches one). */
static void r_signal_received(session_view *v, const json_t *p, const char *offset)
{
    json_t *sig = json_object();
    json_object_set(sig, PK_NAME, json_object_get(p, PK_NAME));
    json_object_set(sig, PK_PAYLOAD, json_object_get(p, PK_PAYLOAD) ?: json_null());
    if (offset) json_object_set_new(sig, "offset", json_string(offset));
    json_array_append_new(v->signals, sig);
}

static void r_state_updated(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    json_t *full = json_object_get(p, PK_STATE);
    if (json_is_object(full)) {
        json_decref(v->state);
        v->state = json_deep_copy(full);
    }
    const char *path;
    json_t *val;
    json_object_foreach(json_object_get(p, PK_SET), path, val)
        workflow_set_path(v->state, path, json_deep_copy(val));
}

static int is_compaction(const json_t *p)
{
    return !strcmp(str(p, PK_PURPOSE), "compaction");
}

/* The request in flight is a compaction's summarization request. */
static int compaction_in_flight(const session_view *v, const json_t *p)
{
    return v->compact_started && v->request[0] && !strcmp(str(p, PK_REQUEST_ID), v->request);
}

/* A compaction is over (done, abandoned, or the reply it was for is): restore puts
 * back the counters of the request it came before. */
static void compact_clear(session_view *v, int restore)
{
    if (restore && v->compact_started) {
        v->attempts = v->saved_attempts;
        v->failures = v->saved_failures;
        v->restarts = v->saved_restarts;
        v->retry_at = v->saved_retry_at;
        set_status(v, v->saved_status);
    }
    v->compact_reason[0] = '\0';
    v->compact_started = 0;
    v->compact_window = 0;
}

/* A compaction's summarization request starts: from its first attempt on, it is the
 * request in progress, with counters of its own; the history, the tool turns and
 * the queue are not its business. */
static void compaction_started(session_view *v, const json_t *p)
{
    if (!v->compact_started) {
        v->saved_attempts = v->attempts;
        v->saved_failures = v->failures;
        v->saved_restarts = v->restarts;
        v->saved_retry_at = v->retry_at;
        v->saved_status = v->status;
        v->attempts = v->failures = v->restarts = 0;
        v->compact_started = 1;
        if (!v->compact_reason[0]) snprintf(v->compact_reason, sizeof v->compact_reason, "%s", str(p, PK_REASON));
        v->compact_requested = 0;
    }
    v->started = 1;
    snprintf(v->request, sizeof v->request, "%s", str(p, PK_REQUEST_ID));
    v->attempts++;
    v->retry_at = 0;
    v->requests++;
    v->message_requests++;
    set_status(v, SESSION_RUNNING);
}

static void r_provider_request_started(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    if (is_compaction(p)) {
        compaction_started(v, p);
        return;
    }
    v->started = 1;
    int next_turn = v->tool_wait == 1;
    /* A new reply (not its next turn, nor another attempt of one): no turns yet. */
    if (!next_turn && !v->attempts) v->tool_turns = 0;
    v->tool_wait = 0;
    /* A chat's answers were to the approvals of the calls before: each call has its
     * result now, and a later call with the same id asks anew. */
    if (!v->is_workflow) json_object_clear(v->early);
    snprintf(v->request, sizeof v->request, "%s", str(p, PK_REQUEST_ID));
    set_status(v, SESSION_RUNNING);
    /* A queued message's turn has come (not for a retry, nor a tool turn). */
    if (!v->is_workflow && json_array_size(v->queued) && !v->retry_at && !v->attempts && !next_turn) {
        json_array_append(v->messages, json_array_get(v->queued, 0));
        json_array_remove(v->queued, 0);
        v->message_requests = 0;
    }
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string("assistant"));
    json_object_set_new(m, "content", json_string(""));
    json_object_set_new(m, "requestId", json_string(v->request));
    /* A retry that continues the cut attempt: its reply begins with the text kept. */
    const json_t *from = json_object_get(p, PK_CONTINUED_FROM);
    if (json_is_object(from) && v->cut && same_str(from, v->cut, PK_REQUEST_ID)) {
        const json_t *c = json_object_get(v->cut, PK_CONTENT);
        size_t n = json_is_string(c) ? json_string_length(c) : 0;
        size_t keep = session_chars_prefix(n ? json_string_value(c) : "", n, int_of(from, PK_CHARS));
        json_object_set_new(m, "content", json_stringn_nocheck(n ? json_string_value(c) : "", keep));
        json_object_set(m, PK_CONTINUED_FROM, (json_t *)from);
    }
    json_decref(v->cut);
    v->cut = NULL;
    json_array_append_new(v->messages, m);
    v->attempts++;
    v->retry_at = 0;
    v->requests++;
    v->message_requests++;
}

static void r_text_delta(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    json_t *m = assistant_for(v, str(p, PK_REQUEST_ID));
    if (m) append_text(m, "content", json_object_get(p, PK_TEXT));
}

static void r_thinking_delta(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    json_t *m = assistant_for(v, str(p, PK_REQUEST_ID));
    if (m) append_text(m, "thinking", json_object_get(p, PK_TEXT));
}

static void r_tool_called(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    json_array_append_new(v->open_calls, json_deep_copy(p));
    if (v->request[0] && !strcmp(str(p, PK_REQUEST_ID), v->request)) v->tool_wait = -1;
    json_t *m = assistant_for(v, str(p, PK_REQUEST_ID));
    if (m) {
        json_t *calls = json_object_get(m, "toolCalls");
        if (!calls) json_object_set_new(m, "toolCalls", calls = json_array());
        json_t *c = json_object();
        json_object_set(c, "callId", json_object_get(p, PK_CALL_ID));
        json_object_set(c, "name", json_object_get(p, PK_NAME));
        json_object_set(c, "arguments", json_object_get(p, PK_ARGUMENTS));
        json_array_append_new(calls, c);
    }
}

static void r_tool_result(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    int from_model = !v->is_workflow;
    for (size_t i = 0; i < json_array_size(v->open_calls); i++) {
        const json_t *c = json_array_get(v->open_calls, i);
        if (!same_str(c, p, PK_CALL_ID)) continue;
        if (*str(c, PK_REQUEST_ID)) from_model = 1;   /* not a workflow tool step's */
        json_array_remove(v->open_calls, i);
        chat_approvals(v);
        break;
    }
    if (from_model) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("tool"));
        json_object_set(m, "callId", json_object_get(p, PK_CALL_ID));
        json_object_set_new(m, "content", tool_content(json_object_get(p, PK_RESULT)));
        json_array_append_new(v->messages, m);
    }
}

/* A chat's call was approved and the runner takes it: from here it is an open call
 * like any other (one that may have run if its runner dies before its result). */
static void r_tool_approved(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    json_t *c = (json_t *)session_view_open_call(v, str(p, PK_CALL_ID));
    if (c) json_object_del(c, SESSION_CALL_APPROVAL);
    chat_approvals(v);
}

/* A request answered from a recording: its cost was not spent (r_provider_request_ended). */
static void r_recording_request(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    const char *rid = json_string_value(json_object_get(p, PK_REQUEST_ID));
    const char *outcome = json_string_value(json_object_get(p, PK_OUTCOME));
    if (rid && outcome && !strcmp(outcome, "hit")) snprintf(v->played, sizeof v->played, "%s", rid);
    else if (rid) v->played[0] = '\0';
}

static void r_provider_request_ended(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    json_t *u = json_object_get(p, PK_USAGE);
    v->input_tokens += int_of(u, PK_INPUT_TOKENS);
    v->output_tokens += int_of(u, PK_OUTPUT_TOKENS);
    double cost = json_number_value(json_object_get(p, PK_COST_USD));
    v->cost_usd += cost;
    if (v->played[0] && !strcmp(v->played, str(p, PK_REQUEST_ID))) v->cost_recorded_usd += cost;
    v->played[0] = '\0';
    if (compaction_in_flight(v, p)) {   /* its session:compacted follows, in the same commit */
        v->request[0] = '\0';
        return;
    }
    v->request[0] = '\0';
    request_reset(v);
    if (v->tool_wait == -1) {       /* it asked for tools: the reply goes on */
        v->tool_wait = 1;
        v->tool_turns++;
    } else if (!v->is_workflow && !json_array_size(v->queued)) {
        set_status(v, SESSION_COMPLETED);
    }
}

static void r_tool_loop_stopped(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    (void)p;
    v->tool_wait = 0;
    if (!v->is_workflow && !json_array_size(v->queued)) set_status(v, SESSION_COMPLETED);
}

static void r_provider_request_cancelled(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    json_t *m = assistant_for(v, str(p, PK_REQUEST_ID));
    if (m) {
        json_object_set_new(m, "interrupted", json_true());
        json_object_set(m, "reason", json_object_get(p, PK_REASON));
    }
    int compaction = compaction_in_flight(v, p);
    drop_calls_of(v, str(p, PK_REQUEST_ID));
    if (!strcmp(str(p, PK_REQUEST_ID), v->request)) v->request[0] = '\0';
    /* A compaction cut off by a restart is retried; any other end abandons it. */
    if (compaction && strcmp(str(p, PK_REASON), "restart")) compact_clear(v, 1);
    /* An interrupted request is over: what answers the message is a new one. */
    if (!strcmp(str(p, PK_REASON), "interrupted")) request_reset(v);
}

static void r_provider_request_retried(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    /* The attempt requestId failed (or was cut off by a restart); the next one
     * is due at retryAt. */
    const char *reason = str(p, PK_REASON);
    drop_calls_of(v, str(p, PK_REQUEST_ID));
    if (!strcmp(str(p, PK_REQUEST_ID), v->request)) v->request[0] = '\0';
    /* The retry replaces the attempt: what it streamed leaves the history (the
     * events keep it), so a reply shows once however often it was cut. */
    json_t *m = assistant_for(v, str(p, PK_REQUEST_ID));
    /* ... but its next attempt may continue its text: kept until that one starts (a
     * compaction's summarization request, which is no reply, leaves it be). */
    if (!is_compaction(p)) {
        json_decref(v->cut);
        v->cut = NULL;
    }
    if (m && !is_compaction(p)) {
        const json_t *think = json_object_get(m, "thinking");
        v->cut = json_pack("{s:O, s:O, s:b}", PK_REQUEST_ID, json_object_get(p, PK_REQUEST_ID), PK_CONTENT,
                           json_object_get(m, "content"), "thinking", json_string_length(think) > 0);
        if (v->cut && json_is_string(json_object_get(p, PK_CUT_IN)))
            json_object_set(v->cut, PK_CUT_IN, json_object_get(p, PK_CUT_IN));
        if (v->cut) json_object_set(v->cut, PK_REASON, json_object_get(p, PK_REASON));
        if (v->cut) json_object_set(v->cut, PK_CAUSE, json_object_get(p, PK_CAUSE));
        /* It continued an earlier attempt itself (a refusal of it is told apart). */
        if (v->cut && json_object_get(m, PK_CONTINUED_FROM)) json_object_set_new(v->cut, PK_CONTINUED, json_true());
    }
    for (size_t i = json_array_size(v->messages); m && i-- > 0;)
        if (json_array_get(v->messages, i) == m) {
            json_array_remove(v->messages, i);
            break;
        }
    /* A failover spends no budget: the next provider gets its own (r_provider_failover). */
    if (!strcmp(reason, "restart")) v->restarts++;
    else if (strcmp(reason, "failover")) v->failures++;
    /* The reply was over the model's context window: compacted before its retry. */
    if (!v->compact_started && !strcmp(str(p, PK_CAUSE), "context_overflow")) {
        snprintf(v->compact_reason, sizeof v->compact_reason, "overflow");
        v->compact_window = int_of(p, PK_CONTEXT_TOKENS);
    }
    int64_t at = int_of(p, PK_RETRY_AT);
    v->retry_at = at > 0 ? at : 1;
}

/* The request in progress goes on with the agent's fallback `fallback` (after the
 * provider:request_retried that closed the attempt that failed): its attempts from
 * now go there, with a budget of provider errors of their own. */
static void r_provider_failover(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    json_int_t f = int_of(p, PK_FALLBACK);
    v->route = f >= 0 && f < 64 ? (int)f + 1 : v->route;
    v->failures = 0;
    /* The fallback starts the reply afresh: it never continues another model's text. */
    json_decref(v->cut);
    v->cut = NULL;
}

static void r_reply_failed(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    snprintf(v->error, sizeof v->error, "%s", str(p, PK_ERROR));
    v->request[0] = '\0';
    v->retry_at = 0;
    json_decref(v->cut);
    v->cut = NULL;
    v->tool_wait = 0;   /* the reply is over: its tools' answers wait for no next turn */
    compact_clear(v, 0);
    set_status(v, SESSION_FAILED);
}

static void r_input_requested(session_view *v, const json_t *p, const char *offset)
{
    /* A budget was reached and asks (chat or workflow): it is open until answered. */
    if (!strcmp(str(p, PK_INPUT), SESSION_INPUT_BUDGET)) {
        json_t *a = json_deep_copy(p);
        if (offset) json_object_set_new(a, "offset", json_string(offset));
        json_object_set_new(v->budget, "open", a);
        json_object_set_new(v->budget, "asks",
                            json_integer(json_integer_value(json_object_get(v->budget, "asks")) + 1));
        if (!v->is_workflow) {
            chat_approvals(v);
            return;
        }
    }
    /* A chat's tool call waits for approval: the call holds the request. */
    if (!v->is_workflow) {
        json_t *c = (json_t *)session_view_open_call(v, str(p, PK_CALL_ID));
        if (!c) return;
        json_t *a = json_deep_copy(p);
        if (offset) json_object_set_new(a, "offset", json_string(offset));
        json_object_set_new(c, SESSION_CALL_APPROVAL, a);
        chat_approvals(v);
        return;
    }
    /* Answered before it was asked: nothing to wait for. */
    if (!json_object_get(v->early, str(p, PK_INTERACTION_ID))) {
        json_decref(v->pending);
        v->pending = json_deep_copy(p);
        if (offset) json_object_set_new(v->pending, "offset", json_string(offset));
        set_status(v, SESSION_AWAITING_INPUT);
    }
}

/* The open budget checkpoint id was answered: a new limit (a number, for the limit
 * that was reached, or an object of limits) raises the session's; no (false) ends
 * it (the runner writes session:budget_exceeded). */
static void budget_answered(session_view *v, const char *id, const json_t *response)
{
    json_t *open = json_object_get(v->budget, "open");
    if (!open || strcmp(str(open, PK_INTERACTION_ID), id)) return;
    json_t *limits = json_object_get(v->budget, "limits");
    if (json_is_number(response)) {
        json_object_set(limits, str(json_object_get(open, PK_BUDGET), PK_LIMIT), (json_t *)response);
    } else if (json_is_object(response)) {
        const char *k;
        json_t *val;
        json_object_foreach((json_t *)response, k, val)
            if (json_is_number(val)) json_object_set(limits, k, val);
    } else {
        json_object_set(v->budget, "rejected", open);
    }
    json_object_del(v->budget, "open");
}

static void r_input_received(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    /* Every answer is kept in `early` (answers by interactionId) until the
     * step that asked for it completes. */
    const char *id = str(p, PK_INTERACTION_ID);
    json_object_set(v->early, id, json_object_get(p, PK_RESPONSE));
    budget_answered(v, id, json_object_get(p, PK_RESPONSE));
    if (!v->is_workflow) {
        /* The call keeps the answer's reason (a denial's goes to the model). */
        json_t *c = (json_t *)session_view_approval_call(v, id);
        json_t *why = json_object_get(p, PK_REASON);
        if (c && json_is_string(why)) json_object_set(json_object_get(c, SESSION_CALL_APPROVAL), PK_REASON, why);
        chat_approvals(v);
    } else if (v->pending && strcmp(str(v->pending, PK_INTERACTION_ID), id) == 0) {
        json_decref(v->pending);
        v->pending = NULL;
        set_status(v, SESSION_RUNNING);
    }
}

static void r_input_expired(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    json_t *open = json_object_get(v->budget, "open");
    if (open && !strcmp(str(open, PK_INTERACTION_ID), str(p, PK_INTERACTION_ID))) json_object_del(v->budget, "open");
    if (v->pending && strcmp(str(v->pending, PK_INTERACTION_ID), str(p, PK_INTERACTION_ID)) == 0) {
        json_decref(v->pending);
        v->pending = NULL;
        set_status(v, SESSION_RUNNING);
    }
}

static void r_message_user(session_view *v, const json_t *p, const char *offset)
{
    user_message(v, p, offset);
}

static void r_cancel_requested(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    (void)p;
    v->cancel_requested = 1;
}

/* A chat's reply under way is to stop: the runner cuts it and says so (reply:stopped). */
static void r_stop_requested(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    (void)p;
    if (!v->is_workflow) v->stop_requested = 1;
}

static json_t *open_user_message(const session_view *v);

/* The reply was stopped (its request, if one was in flight, is cancelled "stopped";
 * its tool calls under way were abandoned): the message it answered is answered by
 * nothing, no retry and no next tool turn follow. Queued messages are answered
 * next. */
static void r_reply_stopped(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    (void)p;
    json_t *m = open_user_message(v);
    if (m) json_object_set_new(m, "stopped", json_true());
    v->stop_requested = 0;
    v->request[0] = '\0';
    v->tool_wait = 0;
    compact_clear(v, 0);
    json_array_clear(v->open_calls);
    chat_approvals(v);      /* its calls' approvals are asked no more */
    request_reset(v);
    if (v->status == SESSION_PENDING || v->status == SESSION_RUNNING)
        set_status(v, json_array_size(v->queued) ? SESSION_PENDING : SESSION_COMPLETED);
}

/* The history before upTo (a user message's offset) is summarized: those messages
 * are marked compacted (they stay in the view, and leave what the model is sent),
 * the summary goes with later requests. Without upTo (an asked-for compaction that
 * found nothing to compact) only the compaction is over. */
static void r_session_compacted(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    const char *up = str(p, PK_UP_TO), *reason = str(p, PK_REASON);
    ssize_t k = *up ? user_message_at(v, up) : -1;
    const json_t *summary = json_object_get(p, PK_SUMMARY);
    if (k >= 0 && json_is_string(summary)) {
        for (ssize_t i = 0; i < k; i++)
            json_object_set_new(json_array_get(v->messages, (size_t)i), "compacted", json_true());
        json_decref(v->summary);
        v->summary = json_deep_copy(summary);
        snprintf(v->compacted_to, sizeof v->compacted_to, "%s", up);
    }
    compact_clear(v, 1);
    v->compact_requested = 0;
    if (!strcmp(reason, "overflow")) v->compacted_turn |= COMPACT_DONE_OVERFLOW;
    else if (!strcmp(reason, "budget")) v->compacted_turn |= COMPACT_DONE_BUDGET;
}

static void r_compact_requested(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    (void)p;
    if (!v->is_workflow) v->compact_requested = 1;
}

static void r_session_cancelled(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    (void)p;
    set_status(v, SESSION_CANCELLED);
    v->request[0] = '\0';
}

static void r_workflow_completed(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    (void)p;
    set_status(v, SESSION_COMPLETED);
}

static void r_workflow_failed(session_view *v, const json_t *p, const char *offset)
{
    (void)offset;
    snprintf(v->error, sizeof v->error, "%s", str(p, PK_ERROR));
    set_status(v, SESSION_FAILED);
}

static const struct reducer {
    const char *type;
    reduce_fn fn;
} reducers[] = {
    {EV_SESSION_CREATED, r_session_created},
    {EV_WORKFLOW_STARTED, r_workflow_started},
    {EV_PHASE_ENTERED, r_phase_entered},
    {EV_STEP_STARTED, r_step_started},
    {EV_STEP_COMPLETED, r_step_completed},
    {EV_STATE_UPDATED, r_state_updated},
    {EV_PROVIDER_REQUEST_STARTED, r_provider_request_started},
    {EV_TEXT_DELTA, r_text_delta},
    {EV_THINKING_DELTA, r_thinking_delta},
    {EV_TOOL_CALLED, r_tool_called},
    {EV_TOOL_RESULT, r_tool_result},
    {EV_TOOL_APPROVED, r_tool_approved},
    {EV_PROVIDER_REQUEST_ENDED, r_provider_request_ended},
    {EV_TOOL_LOOP_STOPPED, r_tool_loop_stopped},
    {EV_PROVIDER_REQUEST_CANCELLED, r_provider_request_cancelled},
    {EV_PROVIDER_REQUEST_RETRIED, r_provider_request_retried},
    {EV_PROVIDER_FAILOVER, r_provider_failover},
    {EV_REPLY_FAILED, r_reply_failed},
    {EV_INPUT_REQUESTED, r_input_requested},
    {EV_INPUT_RECEIVED, r_input_received},
    {EV_INPUT_EXPIRED, r_input_expired},
    {EV_MESSAGE_USER, r_message_user},
    {EV_CANCEL_REQUESTED, r_cancel_requested},
    {EV_STOP_REQUESTED, r_stop_requested},
    {EV_REPLY_STOPPED, r_reply_stopped},
    {EV_SESSION_CANCELLED, r_session_cancelled},
    {EV_SESSION_BUDGET_EXCEEDED, r_nothing},
    {EV_WORKFLOW_COMPLETED, r_workflow_completed},
    {EV_WORKFLOW_FAILED, r_workflow_failed},
    {EV_SESSION_FORKED, r_session_forked},
    {EV_RECORDING_REQUEST, r_recording_request},
    {EV_SESSION_COMPACTED, r_session_compacted},
    {EV_COMPACT_REQUESTED, r_compact_requested},
    {EV_TIMER_SET, r_timer_set},
    {EV_TIMER_FIRED, r_timer_fired},
    {EV_SIGNAL_RECEIVED, r_signal_received},
    {EV_AGENT_STARTED, r_nothing},
    {EV_AGENT_COMPLETED, r_nothing},
    {EV_PHASE_EXITED, r_nothing},
    {EV_TOOL_SERVER_FAILED, r_nothing},
    {NULL, NULL},
};

int session_reduce(session_view *v, const json_t *ev, const char *offset)
{
    return session_reduce_payload(v, json_string_value(json_object_get(ev, "type")),
                                  json_object_get(ev, "payload"), offset);
}

int session_reduce_payload(session_view *v, const char *type, const json_t *payload, const char *offset)
{
    json_t *p = (json_t *)payload;
    if (!type || (p && !json_is_object(p))) return -1;
    json_t *empty = NULL;
    if (!p) p = empty = json_object();
    v->events++;
    /* A type it does not know is skipped (a newer runner's event). */
    for (const struct reducer *r = reducers; r->type; r++)
        if (!strcmp(type, r->type)) {
            r->fn(v, p, offset);
            break;
        }
    json_decref(empty);
    return 0;
}

/* ---- (de)serialisation ------------------------------------------------------------------ */

double session_cost_spent(const session_view *v)
{
    double s = v->cost_usd - v->cost_inherited_usd - v->cost_recorded_usd;
    return s > 1e-12 ? s : 0;
}

json_t *session_cost_json(const session_view *v)
{
    return json_pack("{s:f, s:f, s:f}", "spentUsd", session_cost_spent(v), "inheritedUsd", v->cost_inherited_usd,
                     "recordedUsd", v->cost_recorded_usd);
}

json_t *session_view_to_json(const session_view *v)
{
    json_t *j = json_object();
    json_object_set_new(j, "status", json_string(session_status_name(v->status)));
    json_object_set_new(j, "workflow", json_boolean(v->is_workflow));
    json_object_set_new(j, "phase", v->phase[0] ? json_string(v->phase) : json_null());
    json_object_set_new(j, "step", json_integer(v->step));
    json_object_set_new(j, "stepOpen", json_boolean(v->step_open));
    json_object_set_new(j, "started", json_boolean(v->started));
    json_object_set_new(j, "request", v->request[0] ? json_string(v->request) : json_null());
    json_object_set_new(j, "cancelRequested", json_boolean(v->cancel_requested));
    json_object_set_new(j, "stopRequested", json_boolean(v->stop_requested));
    json_object_set_new(j, "attempts", json_integer(v->attempts));
    json_object_set_new(j, "failures", json_integer(v->failures));
    json_object_set_new(j, "restarts", json_integer(v->restarts));
    json_object_set_new(j, "retryAt", v->retry_at ? json_integer(v->retry_at) : json_null());
    json_object_set_new(j, "route", json_integer(v->route));
    json_object_set_new(j, "requests", json_integer(v->requests));
    json_object_set_new(j, "messageRequests", json_integer(v->message_requests));
    json_object_set_new(j, "steps", json_integer(v->steps));
    json_t *u = json_object();
    json_object_set_new(u, "inputTokens", json_integer(v->input_tokens));
    json_object_set_new(u, "outputTokens", json_integer(v->output_tokens));
    json_object_set_new(j, "usage", u);
    json_object_set_new(j, "costUsd", json_real(v->cost_usd));
    json_object_set_new(j, "cost", session_cost_json(v));
    json_object_set(j, "budget", v->budget);
    json_object_set_new(j, "playedRequest", v->played[0] ? json_string(v->played) : json_null());
    json_object_set_new(j, "eventCount", json_integer((json_int_t)v->events));
    json_object_set_new(j, "error", v->error[0] ? json_string(v->error) : json_null());
    json_object_set(j, "created", v->created ? v->created : json_null());
    json_object_set(j, "state", v->state);
    json_object_set(j, "messages", v->messages);
    json_object_set(j, "pendingInput", v->pending ? v->pending : json_null());
    json_object_set(j, "earlyAnswers", v->early);
    json_object_set(j, "queued", v->queued);
    json_object_set(j, "openCalls", v->open_calls);
    json_object_set_new(j, "toolWait", json_integer(v->tool_wait));
    json_object_set_new(j, "toolTurns", json_integer(v->tool_turns));
    /* Compaction's keys only when there is something to say: a session that never
     * compacted folds to the same view as before they existed (dstream check). */
    if (v->summary)
        json_object_set_new(j, "compacted", json_pack("{s:s, s:O}", "upTo", v->compacted_to, "summary", v->summary));
    if (v->compact_reason[0])
        json_object_set_new(j, "compaction",
                            json_pack("{s:s, s:b, s:i, s:i, s:i, s:I, s:s}", "reason", v->compact_reason, "started",
                                      v->compact_started, "savedAttempts", v->saved_attempts, "savedFailures",
                                      v->saved_failures, "savedRestarts", v->saved_restarts, "savedRetryAt",
                                      (json_int_t)v->saved_retry_at, "savedStatus",
                                      session_status_name(v->saved_status)));
    if (v->compact_reason[0] && v->compact_window)
        json_object_set_new(json_object_get(j, "compaction"), "window", json_integer((json_int_t)v->compact_window));
    if (v->compacted_turn) json_object_set_new(j, "compactedTurn", json_integer(v->compacted_turn));
    if (v->compact_requested) json_object_set_new(j, "compactRequested", json_true());
    /* The same for a cut attempt: only while there is one. */
    if (v->cut) json_object_set(j, "cutReply", v->cut);
    json_object_set_new(j, "timerAt", v->timer_due ? json_integer(v->timer_due) : json_null());
    json_object_set(j, "signals", v->signals);
    json_object_set(j, "waitingFor", v->waiting ? v->waiting : json_null());
    json_object_set_new(j, "branch", v->branch[0] ? json_string(v->branch) : json_null());
    return j;
}

static void copy_str(char *dst, size_t cap, const json_t *j, const char *k)
{
    snprintf(dst, cap, "%s", str(j, k));
}

int session_view_from_json(session_view *v, const json_t *j)
{
    int st = session_status_parse(str(j, "status"));
    if (!json_is_object(j) || st < 0 || !json_is_object(json_object_get(j, "state")) ||
        !json_is_array(json_object_get(j, "messages")))
        return -1;
    v->status = (session_status)st;
    v->is_workflow = json_is_true(json_object_get(j, "workflow"));
    copy_str(v->phase, sizeof v->phase, j, "phase");
    v->step = (int)int_of(j, "step");
    v->step_open = json_is_true(json_object_get(j, "stepOpen"));
    v->started = json_is_true(json_object_get(j, "started"));
    copy_str(v->request, sizeof v->request, j, "request");
    v->cancel_requested = json_is_true(json_object_get(j, "cancelRequested"));
    v->stop_requested = json_is_true(json_object_get(j, "stopRequested"));
    v->attempts = (int)int_of(j, "attempts");
    v->failures = (int)int_of(j, "failures");
    v->restarts = (int)int_of(j, "restarts");
    v->retry_at = int_of(j, "retryAt");
    v->route = (int)int_of(j, "route");
    v->requests = int_of(j, "requests");
    v->message_requests = int_of(j, "messageRequests");
    v->steps = int_of(j, "steps");
    json_t *u = json_object_get(j, "usage");
    v->input_tokens = int_of(u, "inputTokens");
    v->output_tokens = int_of(u, "outputTokens");
    v->cost_usd = json_number_value(json_object_get(j, "costUsd"));
    json_t *cost = json_object_get(j, "cost");
    v->cost_inherited_usd = json_number_value(json_object_get(cost, "inheritedUsd"));
    v->cost_recorded_usd = json_number_value(json_object_get(cost, "recordedUsd"));
    copy_str(v->played, sizeof v->played, j, "playedRequest");
    json_t *b = json_object_get(j, "budget");
    if (json_is_object(b) && json_is_object(json_object_get(b, "limits"))) {
        json_decref(v->budget);
        v->budget = json_deep_copy(b);
    }
    v->events = (uint64_t)int_of(j, "eventCount");
    copy_str(v->error, sizeof v->error, j, "error");
    json_t *c = json_object_get(j, "created");
    if (json_is_object(c)) {
        v->created = json_deep_copy(c);
        v->input = json_object_get(v->created, PK_INPUT);
    }
    json_decref(v->state);
    v->state = json_deep_copy(json_object_get(j, "state"));
    json_decref(v->messages);
    v->messages = json_deep_copy(json_object_get(j, "messages"));
    json_t *pi = json_object_get(j, "pendingInput");
    if (json_is_object(pi)) v->pending = json_deep_copy(pi);
    json_t *e = json_object_get(j, "earlyAnswers");
    if (json_is_object(e)) {
        json_decref(v->early);
        v->early = json_deep_copy(e);
    }
    json_t *q = json_object_get(j, "queued");
    if (json_is_array(q)) {
        json_decref(v->queued);
        v->queued = json_deep_copy(q);
    }
    json_t *oc = json_object_get(j, "openCalls");
    if (json_is_array(oc)) {
        json_decref(v->open_calls);
        v->open_calls = json_deep_copy(oc);
    }
    v->tool_wait = (int)int_of(j, "toolWait");
    v->tool_turns = (int)int_of(j, "toolTurns");
    const json_t *cd = json_object_get(j, "compacted");
    if (json_is_string(json_object_get(cd, "summary"))) {
        v->summary = json_deep_copy(json_object_get(cd, "summary"));
        copy_str(v->compacted_to, sizeof v->compacted_to, cd, "upTo");
    }
    const json_t *cn = json_object_get(j, "compaction");
    if (json_is_object(cn)) {
        copy_str(v->compact_reason, sizeof v->compact_reason, cn, "reason");
        v->compact_started = json_is_true(json_object_get(cn, "started"));
        v->saved_attempts = (int)int_of(cn, "savedAttempts");
        v->saved_failures = (int)int_of(cn, "savedFailures");
        v->saved_restarts = (int)int_of(cn, "savedRestarts");
        v->saved_retry_at = int_of(cn, "savedRetryAt");
        int ss = session_status_parse(str(cn, "savedStatus"));
        v->saved_status = ss < 0 ? SESSION_PENDING : (session_status)ss;
        v->compact_window = int_of(cn, "window");
    }
    v->compacted_turn = (int)int_of(j, "compactedTurn");
    v->compact_requested = json_is_true(json_object_get(j, "compactRequested"));
    json_t *cut = json_object_get(j, "cutReply");
    if (json_is_object(cut)) v->cut = json_deep_copy(cut);
    v->timer_due = int_of(j, "timerAt");
    json_t *sg = json_object_get(j, "signals");
    if (json_is_array(sg)) {
        json_decref(v->signals);
        v->signals = json_deep_copy(sg);
    }
    json_t *wf = json_object_get(j, "waitingFor");
    if (json_is_array(wf)) v->waiting = json_deep_copy(wf);
    copy_str(v->branch, sizeof v->branch, j, "branch");
    return 0;
}

int session_view_copy(session_view *dst, const session_view *src)
{
    json_t *j = session_view_to_json(src);
    int rc = j ? session_view_from_json(dst, j) : -1;
    json_decref(j);
    if (rc) {
        session_view_free(dst);
        session_view_init(dst);
    }
    return rc;
}

void session_view_pos(const session_view *v, workflow_pos *pos)
{
    pos->started = v->started;
    pos->finished = session_view_finished(v);
    pos->phase = v->phase[0] ? v->phase : NULL;
    pos->step = v->step;
    pos->step_open = v->step_open;
    pos->branch = v->branch[0] ? v->branch : NULL;
}

/* The last message, if it is a user message that expects a reply. */
static json_t *open_user_message(const session_view *v)
{
    size_t n = json_array_size(v->messages);
    /* Replies cut off by a restart or a failure answer nothing. */
    while (n > 0) {
        json_t *m = json_array_get(v->messages, n - 1);
        const char *reason = str(m, "reason");
        if (strcmp(str(m, "role"), "assistant") || (strcmp(reason, "restart") && strcmp(reason, "failed")))
            break;
        n--;
    }
    if (n == 0) return NULL;
    json_t *m = json_array_get(v->messages, n - 1);
    /* A background message wants none; a stopped one's reply was stopped. */
    if (strcmp(str(m, "role"), "user") || json_is_true(json_object_get(m, "background")) ||
        json_is_true(json_object_get(m, "stopped")))
        return NULL;
    return m;
}

static int last_is_open_user(const session_view *v)
{
    return open_user_message(v) != NULL;
}

int session_view_needs_reply(const session_view *v)
{
    if (v->is_workflow || v->request[0] || v->retry_at || v->status == SESSION_FAILED ||
        session_view_finished(v))
        return 0;
    return json_array_size(v->queued) > 0 || last_is_open_user(v);
}

int session_view_replying(const session_view *v)
{
    return !v->is_workflow && (v->status == SESSION_RUNNING || (v->status == SESSION_PENDING && session_view_needs_reply(v)));
}

int session_view_interrupted(const session_view *v)
{
    /* A compaction's request adds no reply to the history: the message it came before
     * is still the last; one sent meanwhile waits for it. */
    return !v->is_workflow && v->request[0] && !v->compact_started && last_is_open_user(v);
}

int session_view_tools_answered(const session_view *v)
{
    /* Not after a failed reply (a view folded before reply:failed ended the wait). */
    return v->tool_wait == 1 && !v->request[0] && json_array_size(v->open_calls) == 0 &&
           v->status != SESSION_FAILED && !session_view_finished(v);
}

int64_t session_view_waits_until(const session_view *v)
{
    size_t i, j;
    const json_t *sig, *name;
    if (!v->is_workflow || !v->step_open || v->cancel_requested || session_view_finished(v) || v->request[0] ||
        v->pending || json_array_size(v->open_calls) || v->retry_at || (!v->timer_due && !v->waiting))
        return -1;
    json_array_foreach(v->signals, i, sig)
        json_array_foreach(v->waiting, j, name)
            if (json_equal(json_object_get(sig, PK_NAME), name)) return -1;
    return v->timer_due;
}

const json_t *session_view_approval_call(const session_view *v, const char *id)
{
    size_t i;
    json_t *c;
    json_array_foreach(v->open_calls, i, c) {
        const json_t *a = json_object_get(c, SESSION_CALL_APPROVAL);
        if (a && !strcmp(str(a, PK_INTERACTION_ID), id)) return c;
    }
    return NULL;
}

const json_t *session_view_open_call(const session_view *v, const char *call_id)
{
    size_t i;
    json_t *c;
    json_array_foreach(v->open_calls, i, c)
        if (!strcmp(str(c, PK_CALL_ID), call_id)) return c;
    return NULL;
}

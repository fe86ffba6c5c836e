/* otlp: a session's trace rebuilt from its log, OTLP encoded (otlp.h). */
#include "otlp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbuf.h"
#include "sha256.h"
#include "timefmt.h"
#include "utf8.h"

#define SCOPE_NAME "dstream"
#define SCOPE_VERSION "1"

void otlp_trace_init(otlp_trace *t, const char *session)
{
    memset(t, 0, sizeof *t);
    snprintf(t->session, sizeof t->session, "%s", session);
    t->root = t->turn = t->step = -1;
}

static void spans_free(otlp_trace *t)
{
    for (size_t i = 0; i < t->n; i++) {
        json_decref(t->v[i].attrs);
        json_decref(t->v[i].events);
    }
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}

void otlp_trace_free(otlp_trace *t)
{
    spans_free(t);
    t->root = t->turn = t->step = -1;
}

static int is_hex(const char *s, size_t n)
{
    if (!s || strlen(s) != n) return 0;
    int nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
        if (c != '0') nonzero = 1;
    }
    return nonzero;   /* all zeros is an invalid id */
}

/* An id for what the log gave none: SHA-256 of the session id, a label and a
 * position, as nbytes of hex (never all zeros). */
static void derive_id(const char *session, const char *what, uint64_t seq, char *out, size_t nbytes)
{
    static const char hex[] = "0123456789abcdef";
    char msg[160];
    uint8_t d[SHA256_LEN];
    int len = snprintf(msg, sizeof msg, "dstream/%s/%s/%llu", session, what, (unsigned long long)seq);
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, msg, len > 0 ? (size_t)len : 0);
    sha256_final(&c, d);
    d[0] |= 1;
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * nbytes] = '\0';
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* A new open span of type under parent (an index, or -1 for the trace's parent). */
static long span_new(otlp_trace *t, int type, long parent, const char *span_id, uint64_t seq, int64_t ms)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        otlp_span *v = realloc(t->v, cap * sizeof *v);
        if (!v) return -1;
        t->v = v;
        t->cap = cap;
    }
    otlp_span *s = &t->v[t->n];
    memset(s, 0, sizeof *s);
    s->type = type;
    memcpy(s->trace_id, t->trace_id, sizeof s->trace_id);
    snprintf(s->span_id, sizeof s->span_id, "%s", span_id);
    if (parent >= 0) memcpy(s->parent_id, t->v[parent].span_id, sizeof s->parent_id);
    s->kind = OTLP_KIND_INTERNAL;
    s->open = 1;
    s->start_ms = s->end_ms = ms;
    s->start_seq = s->end_seq = seq;
    s->attrs = json_object();
    s->events = json_array();
    if (!s->attrs || !s->events) {
        json_decref(s->attrs);
        json_decref(s->events);
        return -1;
    }
    return (long)t->n++;
}

static void span_end(otlp_trace *t, long i, uint64_t seq, int64_t ms)
{
    if (i < 0) return;
    otlp_span *s = &t->v[i];
    s->open = 0;
    s->end_seq = seq;
    s->end_ms = ms < s->start_ms ? s->start_ms : ms;
}

static void set_status(otlp_span *s, int code, const char *msg)
{
    s->status = code;
    snprintf(s->status_msg, sizeof s->status_msg, "%s", msg ? msg : "");
    utf8_scrub(s->status_msg);
}

static void attr_s(otlp_span *s, const char *k, const char *v)
{
    if (v && *v) json_object_set_new(s->attrs, k, json_string(v));
}

static void attr_i(otlp_span *s, const char *k, json_int_t v)
{
    json_object_set_new(s->attrs, k, json_integer(v));
}

static void attr_b(otlp_span *s, const char *k, int v)
{
    json_object_set_new(s->attrs, k, json_boolean(v));
}

/* A member of the payload copied as an attribute, when it is a scalar. */
static void attr_copy(otlp_span *s, const char *k, const json_t *p, const char *member)
{
    json_t *v = json_object_get(p, member);
    if (json_is_string(v) || json_is_integer(v) || json_is_real(v) || json_is_boolean(v))
        json_object_set(s->attrs, k, v);
}

static void span_event(otlp_span *s, const char *name, int64_t ms, json_t *attrs)
{
    json_t *e = json_pack("{s:s, s:I, s:o}", "name", name, "timeMs", (json_int_t)ms, "attributes",
                          attrs ? attrs : json_object());
    if (e) json_array_append_new(s->events, e);
}

/* The open span of type whose key is key, newest first; -1 if none. */
static long find_open(const otlp_trace *t, int type, const char *key)
{
    for (size_t i = t->n; i-- > 0;)
        if (t->v[i].open && t->v[i].type == type && !strcmp(t->v[i].key, key)) return (long)i;
    return -1;
}

/* The span new work hangs under: the open turn, else the open step, else the session. */
static long parent_of(const otlp_trace *t)
{
    return t->turn >= 0 ? t->turn : t->step >= 0 ? t->step : t->root;
}

/* End every open span but the session's (and the session's too when all). */
static void end_open(otlp_trace *t, uint64_t seq, int64_t ms, const char *why, int all)
{
    for (size_t i = 0; i < t->n; i++) {
        otlp_span *s = &t->v[i];
        if (!s->open || ((long)i == t->root && !all)) continue;
        if (why && s->type != OTLP_SPAN_SESSION && s->status == OTLP_STATUS_UNSET)
            set_status(s, OTLP_STATUS_ERROR, why);
        span_end(t, (long)i, seq, ms);
    }
    t->turn = t->step = -1;
}

/* A chat's reply is over: its turn ends, and the session span ends there (again). */
static void turn_end(otlp_trace *t, uint64_t seq, int64_t ms, int status, const char *msg)
{
    if (t->turn >= 0) {
        /* What the turn left open (calls abandoned by a stop) ends with it. */
        for (size_t i = (size_t)t->turn + 1; i < t->n; i++)
            if (t->v[i].open && !strcmp(t->v[i].parent_id, t->v[t->turn].span_id)) {
                if (t->v[i].status == OTLP_STATUS_UNSET) set_status(&t->v[i], OTLP_STATUS_ERROR, "abandoned");
                span_end(t, (long)i, seq, ms);
            }
        if (status != OTLP_STATUS_UNSET) set_status(&t->v[t->turn], status, msg);
        span_end(t, t->turn, seq, ms);
        t->turn = -1;
    }
    if (t->root >= 0) span_end(t, t->root, seq, ms);
}

/* A span linked to the caller's: an event a request with a traceparent header of
 * another trace than the session's appended (a user message) carries that trace
 * and the caller's span as its parent. */
static void link_caller(const otlp_trace *t, otlp_span *s, const json_t *tr)
{
    const char *tid = str(tr, "traceId"), *parent = str(tr, "parentSpanId");
    if (!is_hex(tid, 32) || !is_hex(parent, 16) || !strcmp(tid, t->trace_id)) return;
    snprintf(s->link_trace, sizeof s->link_trace, "%s", tid);
    snprintf(s->link_span, sizeof s->link_span, "%s", parent);
}

static int turn_begin(otlp_trace *t, const char *span_id, const json_t *tr, uint64_t seq, int64_t ms)
{
    long i = span_new(t, OTLP_SPAN_TURN, t->root, span_id, seq, ms);
    if (i < 0) return BUF_ENOMEM;
    otlp_span *s = &t->v[i];
    link_caller(t, s, tr);
    t->turn = i;
    t->turns++;
    snprintf(s->name, sizeof s->name, "invoke_agent %s", t->agent);
    utf8_scrub(s->name);  /* a character cut in two */
    attr_s(s, "gen_ai.operation.name", "invoke_agent");
    attr_s(s, "gen_ai.agent.name", t->agent);
    attr_s(s, "gen_ai.conversation.id", t->session);
    attr_i(s, "dstream.turn", t->turns);
    return 0;
}

static int session_begin(otlp_trace *t, const char *type, const json_t *p, const json_t *tr, const char *span_id,
                         uint64_t seq, int64_t ms)
{
    spans_free(t);
    t->root = t->turn = t->step = -1;
    t->turns = 0;
    t->nqueue = 0;
    const char *tid = str(tr, "traceId"), *parent = str(tr, "parentSpanId");
    if (is_hex(tid, 32)) snprintf(t->trace_id, sizeof t->trace_id, "%s", tid);
    else derive_id(t->session, "trace", 0, t->trace_id, 16);
    long i = span_new(t, OTLP_SPAN_SESSION, -1, span_id, seq, ms);
    if (i < 0) return BUF_ENOMEM;
    t->root = i;
    otlp_span *s = &t->v[i];
    if (is_hex(parent, 16)) snprintf(s->parent_id, sizeof s->parent_id, "%s", parent);
    const char *agent = str(p, "agent"), *wf = str(p, "workflow");
    if (!strcmp(type, "session:created")) utf8_scrub((snprintf(t->agent, sizeof t->agent, "%s", agent), t->agent));
    snprintf(s->name, sizeof s->name, "session %s", *wf ? wf : *t->agent ? t->agent : t->session);
    utf8_scrub(s->name);  /* a character cut in two */
    attr_s(s, "dstream.session.id", t->session);
    attr_s(s, "gen_ai.conversation.id", t->session);
    attr_s(s, "gen_ai.agent.name", t->agent);
    attr_s(s, "dstream.workflow", wf);
    attr_copy(s, "dstream.workflow.version", p, "version");
    attr_s(s, "dstream.fork.from", str(p, "from"));
    attr_s(s, "dstream.fork.at", str(p, "at"));
    return 0;
}

/* Fold one event whose type, payload, trace, position and time were read. */
static int fold(otlp_trace *t, const char *type, const json_t *p, const json_t *tr, const char *sid, uint64_t seq,
                int64_t ms)
{
    if (!strcmp(type, "session:created") || !strcmp(type, "session:forked"))
        return session_begin(t, type, p, tr, sid, seq, ms);
    if (t->root < 0) return 0;   /* before the session's own first event (a fork's source's) */
    otlp_span *root = &t->v[t->root];
    long i;
    if (!strcmp(type, "session:cancelled")) {
        end_open(t, seq, ms, "cancelled", 0);
        attr_s(root, "dstream.session.status", "cancelled");
        span_end(t, t->root, seq, ms);
    } else if (!strcmp(type, "workflow:completed")) {
        end_open(t, seq, ms, NULL, 0);
        attr_s(root, "dstream.session.status", "completed");
        set_status(root, OTLP_STATUS_OK, NULL);
        span_end(t, t->root, seq, ms);
    } else if (!strcmp(type, "workflow:failed")) {
        end_open(t, seq, ms, str(p, "error"), 0);
        attr_s(root, "dstream.session.status", "failed");
        attr_s(root, "dstream.error.reason", str(p, "reason"));
        set_status(root, OTLP_STATUS_ERROR, str(p, "error"));
        span_end(t, t->root, seq, ms);
    } else if (!strcmp(type, "step:started")) {
        if (t->step >= 0) span_end(t, t->step, seq, ms);
        if ((i = span_new(t, OTLP_SPAN_STEP, t->root, sid, seq, ms)) < 0) return BUF_ENOMEM;
        otlp_span *s = &t->v[i];
        t->step = i;
        snprintf(s->key, sizeof s->key, "%s/%lld", str(p, "phase"),
                 (long long)json_integer_value(json_object_get(p, "step")));
        snprintf(s->name, sizeof s->name, "step %s%s%s", str(p, "phase"), *str(p, "name") ? " " : "", str(p, "name"));
        utf8_scrub(s->name);  /* a character cut in two */
        attr_s(s, "dstream.workflow.phase", str(p, "phase"));
        attr_copy(s, "dstream.workflow.step", p, "step");
        attr_s(s, "dstream.workflow.step.kind", str(p, "kind"));
        attr_s(s, "dstream.workflow.step.name", str(p, "name"));
    } else if (!strcmp(type, "step:completed")) {
        char key[96];
        snprintf(key, sizeof key, "%s/%lld", str(p, "phase"), (long long)json_integer_value(json_object_get(p, "step")));
        if ((i = find_open(t, OTLP_SPAN_STEP, key)) >= 0) {
            set_status(&t->v[i], OTLP_STATUS_OK, NULL);
            span_end(t, i, seq, ms);
            if (i == t->step) t->step = -1;
        }
    } else if (!strcmp(type, "agent:started")) {
        snprintf(t->agent, sizeof t->agent, "%s", str(p, "agent"));
        utf8_scrub(t->agent);
        if (t->step >= 0) {
            otlp_span *s = &t->v[t->step];
            attr_s(s, "gen_ai.operation.name", "invoke_agent");
            attr_s(s, "gen_ai.agent.name", t->agent);
            attr_s(s, "gen_ai.request.model", str(p, "model"));
        }
    } else if (!strcmp(type, "message:user")) {
        const char *mode = str(p, "mode");
        if (!strcmp(mode, "background")) return 0;
        if (t->turn >= 0 && !strcmp(mode, "queue")) {
            if (t->nqueue < OTLP_QUEUE_MAX) {
                snprintf(t->queue[t->nqueue].span_id, sizeof t->queue[0].span_id, "%s", sid);
                t->queue[t->nqueue].ms = ms;
                t->queue[t->nqueue].seq = seq;
                otlp_span tmp;
                memset(&tmp, 0, sizeof tmp);
                link_caller(t, &tmp, tr);
                memcpy(t->queue[t->nqueue].link_trace, tmp.link_trace, sizeof tmp.link_trace);
                memcpy(t->queue[t->nqueue].link_span, tmp.link_span, sizeof tmp.link_span);
                t->nqueue++;
            }
            return 0;
        }
        if (t->turn >= 0) {
            attr_b(&t->v[t->turn], "dstream.turn.interrupted", 1);
            turn_end(t, seq, ms, OTLP_STATUS_UNSET, NULL);
        }
        return turn_begin(t, sid, tr, seq, ms);
    } else if (!strcmp(type, "provider:request_started")) {
        if (t->turn < 0 && t->nqueue && t->step < 0) {
            /* A queued message's reply begins: its turn starts from the message. */
            int rc = turn_begin(t, t->queue[0].span_id, NULL, t->queue[0].seq, t->queue[0].ms);
            if (!rc) {
                memcpy(t->v[t->turn].link_trace, t->queue[0].link_trace, sizeof t->queue[0].link_trace);
                memcpy(t->v[t->turn].link_span, t->queue[0].link_span, sizeof t->queue[0].link_span);
            }
            memmove(t->queue, t->queue + 1, (t->nqueue - 1) * sizeof t->queue[0]);
            t->nqueue--;
            if (rc) return rc;
        }
        if ((i = span_new(t, OTLP_SPAN_REQUEST, parent_of(t), sid, seq, ms)) < 0) return BUF_ENOMEM;
        otlp_span *s = &t->v[i];
        s->kind = OTLP_KIND_CLIENT;
        snprintf(s->key, sizeof s->key, "%s", str(p, "requestId"));
        snprintf(s->name, sizeof s->name, "chat %s", str(p, "model"));
        utf8_scrub(s->name);  /* a character cut in two */
        attr_s(s, "gen_ai.operation.name", "chat");
        attr_s(s, "gen_ai.provider.name", str(p, "provider"));
        attr_s(s, "gen_ai.system", str(p, "provider"));
        attr_s(s, "gen_ai.request.model", str(p, "model"));
        attr_s(s, "gen_ai.conversation.id", t->session);
        attr_s(s, "dstream.request.id", str(p, "requestId"));
        attr_copy(s, "dstream.request.attempt", p, "attempt");
    } else if (!strcmp(type, "provider:request_ended")) {
        if ((i = find_open(t, OTLP_SPAN_REQUEST, str(p, "requestId"))) < 0) return 0;
        otlp_span *s = &t->v[i];
        const json_t *u = json_object_get(p, "usage");
        attr_s(s, "gen_ai.response.model", str(s->attrs, "gen_ai.request.model"));
        attr_copy(s, "gen_ai.usage.input_tokens", u, "inputTokens");
        attr_copy(s, "gen_ai.usage.output_tokens", u, "outputTokens");
        const char *stop = str(p, "stopReason");
        if (*stop) json_object_set_new(s->attrs, "gen_ai.response.finish_reasons", json_pack("[s]", stop));
        attr_copy(s, "dstream.cost_usd", p, "costUsd");
        set_status(s, OTLP_STATUS_OK, NULL);
        span_end(t, i, seq, ms);
        /* A reply's last request (no tools asked for) ends its turn. */
        if (!s->tools && t->step < 0 && t->turn >= 0 && !strcmp(s->parent_id, t->v[t->turn].span_id))
            turn_end(t, seq, ms, OTLP_STATUS_OK, NULL);
    } else if (!strcmp(type, "provider:request_cancelled")) {
        if ((i = find_open(t, OTLP_SPAN_REQUEST, str(p, "requestId"))) < 0) return 0;
        otlp_span *s = &t->v[i];
        const char *reason = str(p, "reason");
        attr_s(s, "dstream.request.cancel_reason", reason);
        if (!strcmp(reason, "failed") || !strcmp(reason, "restart"))
            set_status(s, OTLP_STATUS_ERROR, *str(p, "error") ? str(p, "error") : reason);
        span_end(t, i, seq, ms);
    } else if (!strcmp(type, "provider:request_retried")) {
        /* The attempt that failed ends here, with why and when the next is due
         * (an attempt cut by a restart was ended by its request_cancelled). */
        if ((i = find_open(t, OTLP_SPAN_REQUEST, str(p, "requestId"))) < 0) return 0;
        otlp_span *s = &t->v[i];
        attr_s(s, "dstream.retry.cause", str(p, "cause"));
        attr_copy(s, "dstream.retry.status", p, "status");
        attr_copy(s, "dstream.retry.delay_ms", p, "delayMs");
        attr_copy(s, "dstream.retry.next_attempt", p, "attempt");
        attr_copy(s, "error.type", p, "cause");
        set_status(s, OTLP_STATUS_ERROR, str(p, "error"));
        span_end(t, i, seq, ms);
    } else if (!strcmp(type, "tool:called")) {
        long rq = *str(p, "requestId") ? find_open(t, OTLP_SPAN_REQUEST, str(p, "requestId")) : -1;
        if (rq >= 0) t->v[rq].tools++;
        if ((i = span_new(t, OTLP_SPAN_TOOL, parent_of(t), sid, seq, ms)) < 0) return BUF_ENOMEM;
        otlp_span *s = &t->v[i];
        snprintf(s->key, sizeof s->key, "%s", str(p, "callId"));
        snprintf(s->name, sizeof s->name, "execute_tool %s", str(p, "name"));
        utf8_scrub(s->name);  /* a character cut in two */
        attr_s(s, "gen_ai.operation.name", "execute_tool");
        attr_s(s, "gen_ai.tool.name", str(p, "name"));
        attr_s(s, "gen_ai.tool.call.id", str(p, "callId"));
        attr_s(s, "gen_ai.tool.type", "function");
        attr_s(s, "dstream.tool.server", str(p, "server"));
        attr_s(s, "dstream.tool.tool", str(p, "tool"));
        attr_copy(s, "dstream.tool.side_effecting", p, "sideEffecting");
        attr_s(s, "dstream.request.id", str(p, "requestId"));
    } else if (!strcmp(type, "input:requested") || !strcmp(type, "tool:approved")) {
        if (!*str(p, "callId") && !strcmp(type, "input:requested")) return 0;
        if ((i = find_open(t, OTLP_SPAN_TOOL, str(p, "callId"))) >= 0)
            span_event(&t->v[i], !strcmp(type, "tool:approved") ? "approved" : "approval_requested", ms, NULL);
    } else if (!strcmp(type, "tool:result")) {
        if ((i = find_open(t, OTLP_SPAN_TOOL, str(p, "callId"))) < 0) return 0;
        otlp_span *s = &t->v[i];
        int failed = json_is_true(json_object_get(p, "failed")), is_err = json_is_true(json_object_get(p, "isError"));
        if (failed) attr_b(s, "dstream.tool.failed", 1);
        if (is_err) attr_b(s, "dstream.tool.is_error", 1);
        if (json_is_true(json_object_get(p, "denied"))) attr_b(s, "dstream.tool.denied", 1);
        attr_copy(s, "dstream.tool.duration_ms", p, "durationMs");
        if (failed || is_err) set_status(s, OTLP_STATUS_ERROR, failed ? "the tool gave no result" : "the tool's result is an error");
        else set_status(s, OTLP_STATUS_OK, NULL);
        span_end(t, i, seq, ms);
    } else if (!strcmp(type, "reply:failed")) {
        if (t->turn >= 0) {
            attr_s(&t->v[t->turn], "dstream.error.reason", str(p, "reason"));
            turn_end(t, seq, ms, OTLP_STATUS_ERROR, str(p, "error"));
        }
    } else if (!strcmp(type, "reply:stopped") || !strcmp(type, "tool:loop_stopped")) {
        if (t->turn >= 0) {
            attr_s(&t->v[t->turn], "dstream.turn.end", !strcmp(type, "reply:stopped") ? "stopped" : "max_turns");
            turn_end(t, seq, ms, OTLP_STATUS_UNSET, NULL);
        }
    }
    return 0;
}

int otlp_trace_feed(otlp_trace *t, uint64_t seq, const json_t *ev)
{
    if (seq + 1 > t->fed) t->fed = seq + 1;
    const char *type = json_string_value(json_object_get(ev, "type"));
    const json_t *p = json_object_get(ev, "payload"), *tr = json_object_get(ev, "trace");
    if (!type || !json_is_object(p)) return 0;
    int64_t ms = 0;
    const char *at = json_string_value(json_object_get(ev, "createdAt"));
    if (!at || timefmt_parse(at, &ms)) ms = 0;
    char sid[17];
    const char *given = json_string_value(json_object_get(tr, "spanId"));
    if (is_hex(given, 16)) snprintf(sid, sizeof sid, "%s", given);
    else derive_id(t->session, "span", seq, sid, 8);
    return fold(t, type, p, tr, sid, seq, ms);
}

int otlp_trace_feed_raw(otlp_trace *t, uint64_t seq, const void *data, size_t len)
{
    json_t *ev = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
    int rc = otlp_trace_feed(t, seq, ev);
    json_decref(ev);
    return rc;
}

size_t otlp_select(const otlp_trace *t, uint64_t from, size_t max, size_t *idx, uint64_t *upto)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        if (!t->v[i].open && t->v[i].end_seq >= from) idx[n++] = i;
    /* By end_seq, then start order (insertion sort: a batch is small, and stable). */
    for (size_t i = 1; i < n; i++) {
        size_t x = idx[i], j = i;
        while (j > 0 && t->v[idx[j - 1]].end_seq > t->v[x].end_seq) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = x;
    }
    *upto = t->fed > from ? t->fed : from;
    if (max == 0) max = 1;
    if (n <= max) return n;
    /* Cut before the event of the first span left out, so that no event's spans
     * are split (the cursor is a position in the log); if the first event alone
     * ends more than max, its spans go together. */
    uint64_t cut = t->v[idx[max]].end_seq;
    size_t k = 0;
    while (k < n && t->v[idx[k]].end_seq < cut) k++;
    if (k == 0)
        while (k < n && t->v[idx[k]].end_seq == t->v[idx[0]].end_seq) k++;
    if (k < n) *upto = t->v[idx[k]].end_seq;
    return k;
}

/* ---- protobuf -------------------------------------------------------------------------- */

static void hex_bytes(const char *hex, unsigned char *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hex[2 * i], lo = hex[2 * i + 1];
        hi = hi <= '9' ? hi - '0' : hi - 'a' + 10;
        lo = lo <= '9' ? lo - '0' : lo - 'a' + 10;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
}

/* AnyValue (common.proto): 1 string, 2 bool, 3 int, 4 double, 5 array. */
static void pb_value(pbuf_t *pb, uint32_t field, const json_t *v)
{
    size_t m = pbuf_open(pb, field);
    if (json_is_string(v)) pbuf_bytes(pb, 1, json_string_value(v), json_string_length(v));
    else if (json_is_boolean(v)) pbuf_bool(pb, 2, json_is_true(v));
    else if (json_is_integer(v)) pbuf_int64(pb, 3, json_integer_value(v));
    else if (json_is_real(v)) pbuf_double(pb, 4, json_real_value(v));
    else if (json_is_array(v)) {
        size_t a = pbuf_open(pb, 5);
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) pb_value(pb, 1, x);
        pbuf_close(pb, a);
    }
    pbuf_close(pb, m);
}

/* KeyValue: 1 key, 2 value. */
static void pb_attrs(pbuf_t *pb, uint32_t field, const json_t *attrs)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)attrs, k, v) {
        size_t m = pbuf_open(pb, field);
        pbuf_string(pb, 1, k);
        pb_value(pb, 2, v);
        pbuf_close(pb, m);
    }
}

static uint64_t ns(int64_t ms)
{
    return ms > 0 ? (uint64_t)ms * 1000000u : 0;
}

/* Span (trace.proto): 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind,
 * 7 start, 8 end, 9 attributes, 11 events (1 time, 2 name, 3 attributes),
 * 15 status (2 message, 3 code). */
static void pb_span(pbuf_t *pb, const otlp_span *s)
{
    unsigned char id[16];
    size_t m = pbuf_open(pb, 2);
    hex_bytes(s->trace_id, id, 16);
    pbuf_bytes(pb, 1, id, 16);
    hex_bytes(s->span_id, id, 8);
    pbuf_bytes(pb, 2, id, 8);
    if (s->parent_id[0]) {
        hex_bytes(s->parent_id, id, 8);
        pbuf_bytes(pb, 4, id, 8);
    }
    pbuf_string(pb, 5, s->name);
    pbuf_uint64(pb, 6, (uint64_t)s->kind);
    pbuf_fixed64(pb, 7, ns(s->start_ms));
    pbuf_fixed64(pb, 8, ns(s->end_ms));
    pb_attrs(pb, 9, s->attrs);
    size_t i;
    json_t *e;
    json_array_foreach(s->events, i, e) {
        size_t em = pbuf_open(pb, 11);
        pbuf_fixed64(pb, 1, ns(json_integer_value(json_object_get(e, "timeMs"))));
        pbuf_string(pb, 2, str(e, "name"));
        pb_attrs(pb, 3, json_object_get(e, "attributes"));
        pbuf_close(pb, em);
    }
    if (s->link_trace[0]) {
        /* Span.Link: 1 trace_id, 2 span_id. */
        size_t lm = pbuf_open(pb, 13);
        hex_bytes(s->link_trace, id, 16);
        pbuf_bytes(pb, 1, id, 16);
        hex_bytes(s->link_span, id, 8);
        pbuf_bytes(pb, 2, id, 8);
        pbuf_close(pb, lm);
    }
    if (s->status != OTLP_STATUS_UNSET) {
        size_t sm = pbuf_open(pb, 15);
        if (s->status_msg[0]) pbuf_string(pb, 2, s->status_msg);
        pbuf_uint64(pb, 3, (uint64_t)s->status);
        pbuf_close(pb, sm);
    }
    pbuf_close(pb, m);
}

int otlp_encode_pb(const otlp_trace *t, const size_t *idx, size_t n, buf_t *out)
{
    pbuf_t pb;
    pbuf_init(&pb, out);
    /* ExportTraceServiceRequest: 1 resource_spans; ResourceSpans: 1 resource
     * (1 attributes), 2 scope_spans; ScopeSpans: 1 scope (1 name, 2 version), 2 spans. */
    size_t rs = pbuf_open(&pb, 1);
    size_t res = pbuf_open(&pb, 1);
    json_t *ra = json_pack("{s:s}", "service.name", "dstream");
    pb_attrs(&pb, 1, ra);
    json_decref(ra);
    pbuf_close(&pb, res);
    size_t ss = pbuf_open(&pb, 2);
    size_t sc = pbuf_open(&pb, 1);
    pbuf_string(&pb, 1, SCOPE_NAME);
    pbuf_string(&pb, 2, SCOPE_VERSION);
    pbuf_close(&pb, sc);
    for (size_t i = 0; i < n; i++) pb_span(&pb, &t->v[idx[i]]);
    pbuf_close(&pb, ss);
    pbuf_close(&pb, rs);
    return pb.err;
}

/* ---- OTLP JSON ------------------------------------------------------------------------- */

static json_t *js_value(const json_t *v)
{
    if (json_is_string(v)) return json_pack("{s:O}", "stringValue", v);
    if (json_is_boolean(v)) return json_pack("{s:b}", "boolValue", json_is_true(v));
    if (json_is_integer(v)) {
        char n[32];
        snprintf(n, sizeof n, "%lld", (long long)json_integer_value(v));
        return json_pack("{s:s}", "intValue", n);
    }
    if (json_is_real(v)) return json_pack("{s:f}", "doubleValue", json_real_value(v));
    json_t *vals = json_array();
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) json_array_append_new(vals, js_value(x));
    return json_pack("{s:{s:o}}", "arrayValue", "values", vals);
}

static json_t *js_attrs(const json_t *attrs)
{
    json_t *a = json_array();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)attrs, k, v) json_array_append_new(a, json_pack("{s:s, s:o}", "key", k, "value", js_value(v)));
    return a;
}

static json_t *js_ns(int64_t ms)
{
    char n[32];
    snprintf(n, sizeof n, "%llu", (unsigned long long)ns(ms));
    return json_string(n);
}

json_t *otlp_encode_json(const otlp_trace *t, const size_t *idx, size_t n)
{
    json_t *spans = json_array();
    for (size_t i = 0; i < n; i++) {
        const otlp_span *s = &t->v[idx[i]];
        json_t *evs = json_array();
        size_t k;
        json_t *e;
        json_array_foreach(s->events, k, e)
            json_array_append_new(evs, json_pack("{s:o, s:s, s:o}", "timeUnixNano",
                                                 js_ns(json_integer_value(json_object_get(e, "timeMs"))), "name",
                                                 str(e, "name"), "attributes", js_attrs(json_object_get(e, "attributes"))));
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:o, s:o, s:o, s:o}", "traceId", s->trace_id, "spanId",
                              s->span_id, "parentSpanId", s->parent_id, "name", s->name, "kind", s->kind,
                              "startTimeUnixNano", js_ns(s->start_ms), "endTimeUnixNano", js_ns(s->end_ms),
                              "attributes", js_attrs(s->attrs), "events", evs);
        if (s->link_trace[0])
            json_object_set_new(j, "links", json_pack("[{s:s, s:s}]", "traceId", s->link_trace, "spanId", s->link_span));
        if (s->status != OTLP_STATUS_UNSET) {
            json_t *st = json_pack("{s:i}", "code", s->status);
            if (s->status_msg[0]) json_object_set_new(st, "message", json_string(s->status_msg));
            json_object_set_new(j, "status", st);
        }
        json_array_append_new(spans, j);
    }
    return json_pack("{s:[{s:{s:[{s:s, s:{s:s}}]}, s:[{s:{s:s, s:s}, s:o}]}]}", "resourceSpans", "resource",
                     "attributes", "key", "service.name", "value", "stringValue", "dstream", "scopeSpans", "scope",
                     "name", SCOPE_NAME, "version", SCOPE_VERSION, "spans", spans);
}

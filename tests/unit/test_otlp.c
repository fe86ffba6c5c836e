/* Unit tests for lib/otlp.c: a session's trace rebuilt from its events (the span
 * tree of a chat turn with a retried attempt and a tool call, of a workflow step, of
 * a fork; the log's ids, ids derived where an event has none and the same on every
 * rebuild), the batches a cursor gives (never splitting an event's spans), and the
 * protobuf and JSON encodings of a batch. */
#include "otlp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "utf8.h"

#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"

/* Feed event seq of type with payload (JSON text) and span id sid (NULL: no trace). */
static void feed(otlp_trace *t, uint64_t seq, const char *type, const char *payload, const char *sid,
                 const char *parent)
{
    char env[2048];
    char tr[256] = "";
    if (sid)
        snprintf(tr, sizeof tr, ", \"trace\": {\"traceId\": \"%s\", \"spanId\": \"%s\", \"parentSpanId\": %s%s%s}",
                 TRACE, sid, parent ? "\"" : "", parent ? parent : "null", parent ? "\"" : "");
    snprintf(env, sizeof env,
             "{\"type\": \"%s\", \"payload\": %s, \"createdAt\": \"2026-11-22T13:05:%02llu.000Z\", \"actor\": \"runner\"%s}",
             type, payload, (unsigned long long)seq, tr);
    CHECK_EQ_INT(otlp_trace_feed_raw(t, seq, env, strlen(env)), 0);
}

static const otlp_span *by_id(const otlp_trace *t, const char *id)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].span_id, id)) return &t->v[i];
    return NULL;
}

static const char *attr(const otlp_span *s, const char *k)
{
    static char out[256];
    json_t *v = json_object_get(s->attrs, k);
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_array(v)) v = json_array_get(v, 0);
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_integer(v)) {
        snprintf(out, sizeof out, "%lld", (long long)json_integer_value(v));
        return out;
    }
    return v ? "?" : "";
}

static void chat(otlp_trace *t)
{
    otlp_trace_init(t, "s1");
    feed(t, 0, "session:created", "{\"agent\": \"helper\"}", "1000000000000001", "a2fb4a1d1a96d312");
    feed(t, 1, "message:user", "{\"content\": \"hi\", \"mode\": \"interrupt\"}", "1000000000000002", NULL);
    feed(t, 2, "provider:request_started",
         "{\"requestId\": \"r1\", \"provider\": \"anthropic\", \"model\": \"m\", \"attempt\": 1}", "1000000000000003", NULL);
    feed(t, 3, "provider:request_retried",
         "{\"requestId\": \"r1\", \"attempt\": 2, \"reason\": \"failed\", \"cause\": \"overloaded\", \"status\": 529,"
         " \"error\": \"HTTP 529\", \"delayMs\": 100}", "1000000000000004", NULL);
    feed(t, 4, "provider:request_started",
         "{\"requestId\": \"r2\", \"provider\": \"anthropic\", \"model\": \"m\", \"attempt\": 2}", "1000000000000005", NULL);
    feed(t, 5, "text:delta", "{\"requestId\": \"r2\", \"text\": \"x\"}", "1000000000000006", NULL);
    feed(t, 6, "tool:called", "{\"callId\": \"c1\", \"name\": \"m__echo\", \"requestId\": \"r2\", \"arguments\": {}}",
         "1000000000000007", NULL);
    feed(t, 7, "provider:request_ended",
         "{\"requestId\": \"r2\", \"stopReason\": \"tool_use\", \"usage\": {\"inputTokens\": 12, \"outputTokens\": 5},"
         " \"costUsd\": 0.5}", "1000000000000008", NULL);
    feed(t, 8, "tool:result", "{\"callId\": \"c1\", \"result\": \"hi\", \"isError\": false, \"durationMs\": 3}",
         "1000000000000009", NULL);
    feed(t, 9, "provider:request_started",
         "{\"requestId\": \"r3\", \"provider\": \"anthropic\", \"model\": \"m\", \"attempt\": 1}", "100000000000000a", NULL);
    feed(t, 10, "provider:request_ended",
         "{\"requestId\": \"r3\", \"stopReason\": \"end_turn\", \"usage\": {\"inputTokens\": 20, \"outputTokens\": 3},"
         " \"costUsd\": 0.25}", "100000000000000b", NULL);
}

static void test_chat_tree(void)
{
    otlp_trace t;
    chat(&t);
    CHECK_EQ_UINT(t.n, 6);
    const otlp_span *root = by_id(&t, "1000000000000001"), *turn = by_id(&t, "1000000000000002"),
                    *a1 = by_id(&t, "1000000000000003"), *a2 = by_id(&t, "1000000000000005"),
                    *tool = by_id(&t, "1000000000000007"), *a3 = by_id(&t, "100000000000000a");
    if (!CHECK(root && turn && a1 && a2 && tool && a3)) return;
    for (size_t i = 0; i < t.n; i++) {
        CHECK_EQ_STR(t.v[i].trace_id, TRACE);
        CHECK(!t.v[i].open);
    }
    /* The session under the caller's span; the turn under it; the rest under the turn. */
    CHECK_EQ_STR(root->parent_id, "a2fb4a1d1a96d312");
    CHECK_EQ_STR(turn->link_trace, "");     /* its message came from the session's own trace */
    CHECK_EQ_STR(turn->parent_id, root->span_id);
    CHECK_EQ_STR(a1->parent_id, turn->span_id);
    CHECK_EQ_STR(a2->parent_id, turn->span_id);
    CHECK_EQ_STR(tool->parent_id, turn->span_id);
    CHECK_EQ_STR(a3->parent_id, turn->span_id);
    CHECK_EQ_STR(root->name, "session helper");
    CHECK_EQ_STR(turn->name, "invoke_agent helper");
    CHECK_EQ_STR(a1->name, "chat m");
    CHECK_EQ_STR(tool->name, "execute_tool m__echo");
    CHECK_EQ_INT(a1->kind, OTLP_KIND_CLIENT);
    /* Ends: the retried attempt at its retry, the turn and the session at the reply's end. */
    CHECK_EQ_UINT(a1->end_seq, 3);
    CHECK_EQ_INT(a1->status, OTLP_STATUS_ERROR);
    CHECK_EQ_STR(a1->status_msg, "HTTP 529");
    CHECK_EQ_STR(attr(a1, "dstream.retry.cause"), "overloaded");
    CHECK_EQ_STR(attr(a1, "dstream.retry.status"), "529");
    CHECK_EQ_UINT(a2->end_seq, 7);
    CHECK_EQ_STR(attr(a2, "gen_ai.usage.input_tokens"), "12");
    CHECK_EQ_STR(attr(a2, "gen_ai.response.finish_reasons"), "tool_use");
    CHECK_EQ_UINT(tool->end_seq, 8);
    CHECK_EQ_INT(tool->status, OTLP_STATUS_OK);
    CHECK_EQ_STR(attr(tool, "gen_ai.tool.call.id"), "c1");
    CHECK_EQ_UINT(a3->end_seq, 10);
    CHECK_EQ_UINT(turn->end_seq, 10);
    CHECK_EQ_UINT(root->end_seq, 10);
    CHECK_EQ_STR(attr(a3, "gen_ai.provider.name"), "anthropic");
    CHECK_EQ_STR(attr(a3, "gen_ai.request.model"), "m");
    CHECK_EQ_STR(attr(a3, "gen_ai.response.model"), "m");
    CHECK_EQ_STR(attr(root, "gen_ai.conversation.id"), "s1");
    CHECK(root->start_ms <= turn->start_ms && turn->end_ms <= root->end_ms);

    /* Batches from cursor 0, two spans at most: cut before an event, never inside. */
    size_t idx[16], n;
    uint64_t upto;
    n = otlp_select(&t, 0, 2, idx, &upto);
    CHECK_EQ_UINT(n, 2);        /* a1 (3), a2 (7) */
    CHECK_EQ_UINT(upto, 8);
    n = otlp_select(&t, 8, 2, idx, &upto);
    CHECK_EQ_UINT(n, 1);        /* the tool (8): the three ending at 10 would cross 2 */
    CHECK_EQ_UINT(upto, 10);
    n = otlp_select(&t, 10, 2, idx, &upto);
    CHECK_EQ_UINT(n, 3);        /* one event ends three: together */
    CHECK_EQ_UINT(upto, 11);
    n = otlp_select(&t, 11, 2, idx, &upto);
    CHECK_EQ_UINT(n, 0);
    CHECK_EQ_UINT(upto, 11);
    n = otlp_select(&t, 0, 100, idx, &upto);
    CHECK_EQ_UINT(n, 6);
    CHECK_EQ_UINT(upto, 11);

    /* A second reply, asked by a caller with a traceparent of its own: the turn links
     * to the caller's span; the session span ends again, later, with the same id. */
    const char *msg = "{\"type\": \"message:user\", \"payload\": {\"content\": \"again\"},"
                      " \"createdAt\": \"2026-11-22T13:05:11.000Z\", \"actor\": \"user\", \"trace\": {\"traceId\":"
                      " \"0af7651916cd43dd8448eb211c80319c\", \"spanId\": \"100000000000000c\", \"parentSpanId\":"
                      " \"b7ad6b7169203331\"}}";
    CHECK_EQ_INT(otlp_trace_feed_raw(&t, 11, msg, strlen(msg)), 0);
    feed(&t, 12, "provider:request_started",
         "{\"requestId\": \"r4\", \"provider\": \"anthropic\", \"model\": \"m\", \"attempt\": 1}", "100000000000000d", NULL);
    feed(&t, 13, "reply:failed", "{\"error\": \"boom\", \"reason\": \"refused\"}", "100000000000000e", NULL);
    n = otlp_select(&t, 11, 100, idx, &upto);
    CHECK_EQ_UINT(n, 3);        /* the abandoned attempt, the failed turn, the session again */
    root = by_id(&t, "1000000000000001");
    CHECK_EQ_UINT(root->end_seq, 13);
    const otlp_span *turn2 = by_id(&t, "100000000000000c");
    if (CHECK(turn2 != NULL)) {
        CHECK_EQ_INT(turn2->status, OTLP_STATUS_ERROR);
        CHECK_EQ_STR(turn2->status_msg, "boom");
        CHECK_EQ_STR(attr(turn2, "dstream.turn"), "2");
        CHECK_EQ_STR(turn2->trace_id, TRACE);
        CHECK_EQ_STR(turn2->link_trace, "0af7651916cd43dd8448eb211c80319c");
        CHECK_EQ_STR(turn2->link_span, "b7ad6b7169203331");
    }
    otlp_trace_free(&t);
}

/* Events without a trace get derived ids: valid, distinct, the same on a rebuild. */
static void test_derived_ids(void)
{
    otlp_trace a, b;
    for (int k = 0; k < 2; k++) {
        otlp_trace *t = k ? &b : &a;
        otlp_trace_init(t, "s2");
        feed(t, 0, "session:created", "{\"agent\": \"x\"}", NULL, NULL);
        feed(t, 1, "message:user", "{\"content\": \"hi\"}", NULL, NULL);
        feed(t, 2, "provider:request_started", "{\"requestId\": \"r1\", \"provider\": \"p\", \"model\": \"m\"}", NULL, NULL);
        feed(t, 3, "provider:request_ended", "{\"requestId\": \"r1\", \"stopReason\": \"stop\"}", NULL, NULL);
    }
    CHECK_EQ_UINT(a.n, 3);
    CHECK_EQ_UINT(b.n, 3);
    for (size_t i = 0; i < a.n && i < b.n; i++) {
        CHECK_EQ_STR(a.v[i].span_id, b.v[i].span_id);
        CHECK_EQ_STR(a.v[i].trace_id, b.v[i].trace_id);
        CHECK_EQ_UINT(strlen(a.v[i].span_id), 16);
        CHECK_EQ_UINT(strlen(a.v[i].trace_id), 32);
        CHECK(strcmp(a.v[i].span_id, "0000000000000000") != 0);
    }
    CHECK(strcmp(a.v[0].span_id, a.v[1].span_id) != 0);
    CHECK_EQ_STR(a.v[0].parent_id, "");
    otlp_trace_free(&a);
    otlp_trace_free(&b);
}

static void test_workflow_and_fork(void)
{
    otlp_trace t;
    otlp_trace_init(&t, "w1");
    feed(&t, 0, "session:created", "{\"workflow\": \"wf\", \"version\": 2}", "2000000000000001", NULL);
    feed(&t, 1, "workflow:started", "{\"workflow\": \"wf\", \"version\": 2}", "2000000000000002", NULL);
    feed(&t, 2, "step:started", "{\"phase\": \"p\", \"step\": 0, \"kind\": \"agent\", \"name\": \"ask\"}",
         "2000000000000003", NULL);
    feed(&t, 3, "agent:started", "{\"agent\": \"a\", \"model\": \"m\", \"step\": 0}", "2000000000000004", NULL);
    feed(&t, 4, "provider:request_started", "{\"requestId\": \"r1\", \"provider\": \"p\", \"model\": \"m\"}",
         "2000000000000005", NULL);
    feed(&t, 5, "provider:request_ended", "{\"requestId\": \"r1\", \"stopReason\": \"end_turn\"}", "2000000000000006", NULL);
    feed(&t, 6, "step:completed", "{\"phase\": \"p\", \"step\": 0}", "2000000000000007", NULL);
    CHECK_EQ_UINT(t.n, 3);
    const otlp_span *root = by_id(&t, "2000000000000001"), *step = by_id(&t, "2000000000000003"),
                    *rq = by_id(&t, "2000000000000005");
    if (!CHECK(root && step && rq)) return;
    CHECK(root->open);          /* a workflow's session span ends with the workflow */
    CHECK(!step->open);
    CHECK_EQ_STR(step->parent_id, root->span_id);
    CHECK_EQ_STR(rq->parent_id, step->span_id);
    CHECK_EQ_STR(attr(step, "gen_ai.agent.name"), "a");
    CHECK_EQ_STR(attr(root, "dstream.workflow"), "wf");
    feed(&t, 7, "workflow:failed", "{\"error\": \"no\", \"reason\": \"step_limit\"}", "2000000000000008", NULL);
    root = by_id(&t, "2000000000000001");
    CHECK(!root->open);
    CHECK_EQ_INT(root->status, OTLP_STATUS_ERROR);
    CHECK_EQ_STR(attr(root, "dstream.session.status"), "failed");
    otlp_trace_free(&t);

    /* A fork: what it inherited is its source's trace; its own starts at session:forked. */
    otlp_trace_init(&t, "f1");
    feed(&t, 0, "session:created", "{\"agent\": \"x\"}", "3000000000000001", NULL);
    feed(&t, 1, "message:user", "{\"content\": \"hi\"}", "3000000000000002", NULL);
    feed(&t, 2, "session:forked", "{\"from\": \"s0\", \"at\": \"0000000000000001_0000000000000100\"}",
         "3000000000000003", NULL);
    feed(&t, 3, "message:user", "{\"content\": \"hi\"}", "3000000000000004", NULL);
    feed(&t, 4, "reply:stopped", "{}", "3000000000000005", NULL);
    CHECK_EQ_UINT(t.n, 2);
    CHECK(by_id(&t, "3000000000000001") == NULL);
    CHECK(by_id(&t, "3000000000000003") != NULL);
    otlp_trace_free(&t);
}

/* Protobuf: ExportTraceServiceRequest { 1: ResourceSpans { 1: Resource, 2: ScopeSpans
 * { 1: scope, 2: span... } } }, walked here with a small reader. */
static size_t rd_varint(const unsigned char *p, size_t n, size_t *i, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; *i < n && shift < 64; shift += 7) {
        unsigned char b = p[(*i)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return 1;
    }
    return 0;
}

/* The body of field `field` (length-delimited) at top level of p[0..n), or NULL. */
static const unsigned char *sub(const unsigned char *p, size_t n, uint64_t field, int which, size_t *len)
{
    size_t i = 0;
    uint64_t tag, l;
    int seen = 0;
    while (i < n && rd_varint(p, n, &i, &tag)) {
        int wt = (int)(tag & 7);
        if (wt == 0) {
            if (!rd_varint(p, n, &i, &l)) return NULL;
        } else if (wt == 1) {
            i += 8;
        } else if (wt == 5) {
            i += 4;
        } else if (wt == 2) {
            if (!rd_varint(p, n, &i, &l) || l > n - i) return NULL;
            if ((tag >> 3) == field && seen++ == which) {
                *len = (size_t)l;
                return p + i;
            }
            i += (size_t)l;
        } else {
            return NULL;
        }
    }
    return NULL;
}

static void test_encode(void)
{
    otlp_trace t;
    chat(&t);
    size_t idx[16], n;
    uint64_t upto;
    n = otlp_select(&t, 0, 100, idx, &upto);
    buf_t b;
    buf_init(&b, 0);
    CHECK_EQ_INT(otlp_encode_pb(&t, idx, n, &b), 0);
    const unsigned char *p = (const unsigned char *)b.p;
    size_t rl = 0, sl = 0, spl = 0, il = 0;
    const unsigned char *rs = sub(p, b.len, 1, 0, &rl);
    const unsigned char *ss = rs ? sub(rs, rl, 2, 0, &sl) : NULL;
    if (CHECK(ss != NULL)) {
        size_t count = 0;
        while (sub(ss, sl, 2, (int)count, &spl)) count++;
        CHECK_EQ_UINT(count, 6);
        /* The first span's id: 8 bytes, the log's. */
        const unsigned char *sp = sub(ss, sl, 2, 0, &spl);
        const unsigned char *id = sp ? sub(sp, spl, 2, 0, &il) : NULL;
        if (CHECK(id != NULL)) {
            CHECK_EQ_UINT(il, 8);
            CHECK(!memcmp(id, "\x10\x00\x00\x00\x00\x00\x00\x03", 8));
        }
        const unsigned char *tid = sp ? sub(sp, spl, 1, 0, &il) : NULL;
        if (CHECK(tid != NULL)) CHECK_EQ_UINT(il, 16);
    }
    /* Bounded: a ceiling below the request's size fails, nothing half-written counts. */
    buf_t small;
    buf_init(&small, b.len - 1);
    CHECK_EQ_INT(otlp_encode_pb(&t, idx, n, &small), BUF_ETOOBIG);
    buf_free(&small);
    buf_free(&b);
    /* JSON: hex ids, integers as strings. */
    json_t *j = otlp_encode_json(&t, idx, n);
    json_t *spans = json_object_get(json_array_get(json_object_get(json_array_get(json_object_get(j, "resourceSpans"), 0),
                                                                   "scopeSpans"), 0), "spans");
    CHECK_EQ_UINT(json_array_size(spans), 6);
    json_t *s0 = json_array_get(spans, 0);
    CHECK_EQ_STR(json_string_value(json_object_get(s0, "spanId")), "1000000000000003");
    CHECK_EQ_STR(json_string_value(json_object_get(s0, "traceId")), TRACE);
    CHECK_EQ_STR(json_string_value(json_object_get(s0, "startTimeUnixNano")), "1795352702000000000");
    json_decref(j);
    otlp_trace_free(&t);
}

/* Names and messages cut to their fields' sizes stay UTF-8: a character cut in two
 * would make the protobuf string invalid (receivers refuse it) and the JSON span
 * impossible to write. */
static void test_cut_utf8(void)
{
    otlp_trace t;
    char payload[1400], name[401] = "", err[801] = "";
    for (int i = 0; i < 200; i++) memcpy(name + 2 * i, "\xc3\xa9", 3);
    for (int i = 0; i < 266; i++) memcpy(err + 3 * i, "\xe2\x82\xac", 4);
    otlp_trace_init(&t, "u1");
    feed(&t, 0, "session:created", "{\"agent\": \"x\"}", "4000000000000001", NULL);
    feed(&t, 1, "message:user", "{\"content\": \"hi\"}", "4000000000000002", NULL);
    feed(&t, 2, "provider:request_started", "{\"requestId\": \"r1\", \"provider\": \"p\", \"model\": \"m\"}",
         "4000000000000003", NULL);
    snprintf(payload, sizeof payload, "{\"callId\": \"c1\", \"name\": \"x%s\", \"requestId\": \"r1\"}", name);
    feed(&t, 3, "tool:called", payload, "4000000000000004", NULL);
    feed(&t, 4, "provider:request_ended", "{\"requestId\": \"r1\", \"stopReason\": \"tool_use\"}", "4000000000000005",
         NULL);
    snprintf(payload, sizeof payload, "{\"callId\": \"c1\", \"failed\": true}");
    feed(&t, 5, "tool:result", payload, "4000000000000006", NULL);
    snprintf(payload, sizeof payload, "{\"error\": \"%s\", \"reason\": \"x\"}", err);
    feed(&t, 6, "reply:failed", payload, "4000000000000007", NULL);
    const otlp_span *tool = by_id(&t, "4000000000000004"), *turn = by_id(&t, "4000000000000002");
    if (!CHECK(tool && turn)) return;
    CHECK(utf8_valid(tool->name, strlen(tool->name)));
    CHECK(strlen(tool->name) > 100);
    CHECK(utf8_valid(turn->status_msg, strlen(turn->status_msg)));
    CHECK(strlen(turn->status_msg) > 200);
    size_t idx[16], n;
    uint64_t upto;
    n = otlp_select(&t, 0, 100, idx, &upto);
    CHECK_EQ_UINT(n, 4);
    json_t *j = otlp_encode_json(&t, idx, n);
    json_t *spans = json_object_get(json_array_get(json_object_get(json_array_get(json_object_get(j, "resourceSpans"), 0),
                                                                   "scopeSpans"), 0), "spans");
    CHECK_EQ_UINT(json_array_size(spans), 4);
    json_decref(j);
    otlp_trace_free(&t);
}

/* Events of every type with payloads of the wrong shapes, traces with ids that are
 * not ids, envelopes that are not objects: folded without a crash, every span's
 * ids valid hex, and the batch encodes. */
static void test_odd_events(void)
{
    static const char *types[] = {"session:created", "message:user", "step:started", "agent:started",
                                  "provider:request_started", "tool:called", "tool:approved", "input:requested",
                                  "provider:request_retried", "provider:request_cancelled", "provider:request_ended",
                                  "tool:result", "step:completed", "reply:failed", "reply:stopped",
                                  "tool:loop_stopped", "workflow:failed", "workflow:completed", "session:cancelled",
                                  "session:forked", "no:such"};
    static const char *payloads[] = {"{}", "{\"requestId\": 5, \"callId\": [], \"step\": \"x\", \"phase\": {},"
                                     " \"usage\": 3, \"name\": null, \"mode\": 7, \"attempt\": \"2\"}",
                                     "{\"requestId\": \"\", \"callId\": \"\", \"usage\": {\"inputTokens\": \"x\"}}"};
    static const char *traces[] = {"", ", \"trace\": null", ", \"trace\": {\"traceId\": \"00000000000000000000000000000000\","
                                   " \"spanId\": \"0000000000000000\"}", ", \"trace\": {\"traceId\": \"XYZ\", \"spanId\": 5}"};
    otlp_trace t;
    otlp_trace_init(&t, "odd");
    uint64_t seq = 0;
    for (size_t r = 0; r < 2; r++)
        for (size_t p = 0; p < sizeof payloads / sizeof *payloads; p++)
            for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
                char env[1024];
                const char *tr = traces[(i + p) % (sizeof traces / sizeof *traces)];
                snprintf(env, sizeof env, "{\"type\": \"%s\", \"payload\": %s, \"createdAt\": 7%s}", types[i],
                         payloads[p], tr);
                CHECK_EQ_INT(otlp_trace_feed_raw(&t, seq++, env, strlen(env)), 0);
            }
    CHECK_EQ_INT(otlp_trace_feed_raw(&t, seq++, "[1]", 3), 0);
    CHECK_EQ_INT(otlp_trace_feed_raw(&t, seq++, "not json", 8), 0);
    CHECK_EQ_INT(otlp_trace_feed_raw(&t, seq++, "{\"type\": 1, \"payload\": []}", 27), 0);
    CHECK(t.n > 0);
    for (size_t i = 0; i < t.n; i++) {
        CHECK_EQ_UINT(strlen(t.v[i].span_id), 16);
        CHECK_EQ_UINT(strlen(t.v[i].trace_id), 32);
        CHECK(strspn(t.v[i].span_id, "0123456789abcdef") == 16 && strcmp(t.v[i].span_id, "0000000000000000"));
        CHECK(t.v[i].parent_id[0] == 0 || strspn(t.v[i].parent_id, "0123456789abcdef") == 16);
    }
    size_t *idx = malloc(t.n * sizeof *idx), n;
    uint64_t upto;
    n = otlp_select(&t, 0, 3, idx, &upto);
    CHECK(n <= t.n);
    buf_t b;
    buf_init(&b, 0);
    CHECK_EQ_INT(otlp_encode_pb(&t, idx, n, &b), 0);
    json_t *j = otlp_encode_json(&t, idx, n);
    CHECK(j != NULL);
    json_decref(j);
    buf_free(&b);
    free(idx);
    otlp_trace_free(&t);
}

int main(void)
{
    test_chat_tree();
    test_derived_ids();
    test_workflow_and_fork();
    test_encode();
    test_cut_utf8();
    test_odd_events();
    return TEST_MAIN_END();
}

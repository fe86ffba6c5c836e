/* frame_lgraph: one run as the LangGraph SDK's stream (frame.h; docs/clients.md), the
 * answer of POST /v1/langgraph/threads/{id}/runs/stream and of a run's stream GET;
 * frame_lgraph_wait: its end state as one JSON answer (runs/wait, join).
 *
 * A chat's run is a user message and its reply: the read starts at that message and
 * maps the session's events as they come, each an SSE event as the SDK reads it:
 *
 *   (begin)                         metadata {run_id, attempt}, values (the thread's
 *                                   state with the message)                 [values]
 *   text:delta                      messages [AIMessageChunk, metadata]  [messages-tuple]
 *   tool:called                     messages [AIMessageChunk with tool_call_chunks, ...]
 *   tool:result                     messages [tool message, metadata]
 *   provider:request_started        events {event: on_chat_model_start, ...}        [events]
 *   text:delta                      events on_chat_model_stream {chunk}
 *   provider:request_ended          events on_chat_model_end {output: usage, stop reason}
 *   tool:called, tool:result        events on_tool_start {input}, on_tool_end {output}
 *   the reply's end                 updates {agent: {messages: the run's}}      [updates]
 *                                   values (the thread's state after it), then end
 *   reply:failed                    error {error, message}, then end
 *
 * The reply's course is frame_uimsg's (frame_reply_track): it ends when its last
 * provider request ends without tools, when its tool calls wait for approval, at
 * tool:loop_stopped, reply:failed,
 * reply:stopped, session:cancelled, or before a later message:user that interrupts it. A workflow's run starts at its session's start (or
 * at the answer that resumes it) and ends when the workflow waits for a human input
 * (its values then carry __interrupt__), completes, fails or is cancelled; its agent
 * steps' text and tool calls are messages as a chat's are.
 *
 * Values are the session's view at the run's start and end (sstore_view on the
 * request's connection, the hub's when it carries the reader): the framer keeps
 * only the two positions, so the hub can compare it like any position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/sse.h"
#include "../lib/sstore.h"
#include "frame.h"
#include "lgraph.h"
#include "reply.h"

/* ---- a thread's values ------------------------------------------------------------------- */

/* One message of the view as LangGraph's: human, ai (with its tool calls), tool. */
static json_t *lg_message(const json_t *m, size_t i)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    json_t *content = json_object_get(m, "content"), *o;
    char id[96];
    if (!content) content = json_string("");
    else json_incref(content);
    if (role && !strcmp(role, "assistant")) {
        const char *rid = json_string_value(json_object_get(m, "requestId"));
        snprintf(id, sizeof id, "%s", rid ? rid : "");
        json_t *calls = json_array(), *c;
        size_t k;
        json_array_foreach(json_object_get(m, "toolCalls"), k, c) {
            json_t *args = json_object_get(c, "arguments");
            json_array_append_new(calls, json_pack("{s:O, s:O, s:o, s:s}", "id", json_object_get(c, "callId"), "name",
                                                   json_object_get(c, "name"), "args",
                                                   json_is_object(args) ? json_incref(args) : json_object(), "type",
                                                   "tool_call"));
        }
        o = json_pack("{s:s, s:o, s:s, s:o}", "type", "ai", "content", content, "id", id, "tool_calls", calls);
    } else if (role && !strcmp(role, "tool")) {
        const char *call = json_string_value(json_object_get(m, "callId"));
        snprintf(id, sizeof id, "tool_%s", call ? call : "");
        o = json_pack("{s:s, s:o, s:s, s:s}", "type", "tool", "content", content, "id", id, "tool_call_id",
                      call ? call : "");
    } else {
        const char *off = json_string_value(json_object_get(m, "offset"));
        if (off) snprintf(id, sizeof id, "msg_%s", off);
        else snprintf(id, sizeof id, "msg_%zu", i);
        o = json_pack("{s:s, s:o, s:s}", "type", "human", "content", content, "id", id);
    }
    return o;
}

json_t *lgraph_interrupts(const session_view *v)
{
    json_t *a = json_array();
    if (!v->pending) return a;
    json_t *value = json_deep_copy(v->pending);
    json_object_del(value, "offset");
    json_t *iid = json_object_get(v->pending, PK_INTERACTION_ID);
    json_array_append_new(a, json_pack("{s:O, s:o}", "id", iid ? iid : json_null(), "value", value));
    return a;
}

json_t *lgraph_values(const session_view *v)
{
    if (v->is_workflow) {
        json_t *o = json_is_object(v->state) ? json_deep_copy(v->state) : json_object();
        if (v->pending) json_object_set_new(o, "__interrupt__", lgraph_interrupts(v));
        return o;
    }
    json_t *msgs = json_array(), *m;
    size_t i;
    json_array_foreach(v->messages, i, m) json_array_append_new(msgs, lg_message(m, i));
    return json_pack("{s:o}", "messages", msgs);
}

const char *lgraph_status(const session_view *v)
{
    if (!v->is_workflow && (v->status == SESSION_PENDING || v->status == SESSION_RUNNING))
        return session_view_replying(v) ? "busy" : "idle";     /* a chat waiting for its first message */
    switch (v->status) {
    case SESSION_PENDING:
    case SESSION_RUNNING: return "busy";
    case SESSION_AWAITING_INPUT: return "interrupted";
    case SESSION_FAILED: return "error";
    default: return "idle";
    }
}

/* ---- the framer ----------------------------------------------------------------------------- */

/* The session id of the stream read ("sessions/{id}"). */
static const char *session_of(const log_read_req *rr)
{
    const char *s = strchr(rr->path, '/');
    return s ? s + 1 : rr->path;
}

/* One SSE event: name, the JSON (stolen), its id (the offset after the event it comes
 * from: a reconnecting client's Last-Event-ID). 0 or -1. */
static int event(buf_t *out, const char *name, const char *id, json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    int rc = s ? sse_event(out, name, id, s, strlen(s)) : -1;
    free(s);
    json_decref(o);
    return rc ? -1 : 0;
}

/* The session's values at (seq, pos) into a new object, or NULL (the database failed). */
static json_t *values_at(req_t *r, const log_read_req *rr, uint64_t seq, uint64_t pos)
{
    session_view v;
    offset_t at = {seq, pos};
    session_view_init(&v);
    json_t *o = sstore_view(r->log, session_of(rr), 1, at, &v, NULL) ? NULL : lgraph_values(&v);
    session_view_free(&v);
    return o;
}

static json_t *chunk_meta(const json_t *p)
{
    json_t *rid = json_object_get(p, PK_REQUEST_ID);
    return json_pack("{s:s, s:O}", "langgraph_node", "agent", "run_attempt", rid ? rid : json_null());
}

/* The run is over after the event of len bytes at `at` (or before it: a message that
 * interrupts the reply has a run of its own). */
static int over(frame_t *f, offset_t at, size_t len, int before)
{
    f->ui.phase = FRAME_UI_DONE;
    f->lg.end_seq = before ? at.seq : at.seq + 1;
    f->lg.end_pos = before ? at.pos : at.pos + len;
    return 0;
}

/* One event of stream mode events: a LangChain callback event (astream_events' shape:
 * event, name, run_id, tags, metadata, parent_ids, data; data stolen). */
static int lc_event(buf_t *out, const char *id, const char *ev, const char *name, const char *run_id,
                    const char *node, json_t *data)
{
    return event(out, "events", id,
                 json_pack("{s:s, s:s, s:s, s:[], s:{s:s}, s:[], s:o}", "event", ev, "name", name ? name : "",
                           "run_id", run_id ? run_id : "", "tags", "metadata", "langgraph_node", node, "parent_ids",
                           "data", data ? data : json_object()));
}

/* The id a request's text streams under: a continuation's, the message it continues. */
static const char *stream_id(const frame_t *f, const char *rid)
{
    return rid && f->lg.cont_req[0] && !strcmp(rid, f->lg.cont_req) ? f->lg.cont_id : rid;
}

/* A model request's end as on_chat_model_end (stream mode events): its usage and stop
 * reason (its text is the stream's chunks). */
static int model_end(frame_t *f, buf_t *out, const json_t *p, const char *id)
{
    if (!(f->lg.modes & FRAME_LG_EVENTS)) return 0;
    const char *rid = stream_id(f, json_string_value(json_object_get(p, PK_REQUEST_ID)));
    const json_t *u = json_object_get(p, PK_USAGE), *sr = json_object_get(p, PK_STOP_REASON);
    json_int_t in = json_integer_value(json_object_get(u, PK_INPUT_TOKENS));
    json_int_t outt = json_integer_value(json_object_get(u, PK_OUTPUT_TOKENS));
    json_t *o = json_pack("{s:{s:s, s:s, s:{s:I, s:I, s:I}, s:{s:O}}}", "output", "type", "ai", "id", rid ? rid : "",
                          "usage_metadata", "input_tokens", in, "output_tokens", outt, "total_tokens", in + outt,
                          "response_metadata", "stop_reason", sr ? sr : json_null());
    return lc_event(out, id, "on_chat_model_end", "", rid, "agent", o);
}

/* A model's event (a chat's reply, a workflow's agent step) as messages-tuple's
 * messages and as events' on_chat_model_* and on_tool_*, when asked for. */
static int model_event(frame_t *f, buf_t *out, const char *type, const json_t *p, const char *id)
{
    int msgs = (f->lg.modes & FRAME_LG_MESSAGES) != 0, evs = (f->lg.modes & FRAME_LG_EVENTS) != 0, rc = 0;
    const json_t *from = json_object_get(p, PK_CONTINUED_FROM);
    const char *purpose = json_string_value(json_object_get(p, PK_PURPOSE));
    if (purpose && !strcmp(purpose, "compaction")) return 0;     /* a summarization request: no one's reply */
    if (!strcmp(type, EV_PROVIDER_REQUEST_STARTED) && json_is_object(from)) {
        /* A continuation streams as the message it continues (the first attempt's id). */
        const char *was = json_string_value(json_object_get(from, PK_REQUEST_ID));
        const char *now = json_string_value(json_object_get(p, PK_REQUEST_ID));
        json_t *t = json_object_get(from, PK_TRIMMED);
        char root[sizeof f->lg.cont_id];
        snprintf(root, sizeof root, "%s", was && !strcmp(was, f->lg.cont_req) ? f->lg.cont_id : was ? was : "");
        memset(f->lg.cont_id, 0, sizeof f->lg.cont_id);
        memset(f->lg.cont_req, 0, sizeof f->lg.cont_req);
        snprintf(f->lg.cont_id, sizeof f->lg.cont_id, "%s", root);
        snprintf(f->lg.cont_req, sizeof f->lg.cont_req, "%s", now ? now : "");
        f->lg.skip_ws = json_is_integer(t) && json_integer_value(t) > 0 && json_integer_value(t) < 64
                            ? (int)json_integer_value(t) : 0;
        return 0;   /* events: the run it continues goes on, no new start */
    }
    if (!strcmp(type, EV_PROVIDER_REQUEST_STARTED) && evs) {
        const char *model = json_string_value(json_object_get(p, PK_MODEL));
        return lc_event(out, id, "on_chat_model_start", model, json_string_value(json_object_get(p, PK_REQUEST_ID)),
                        "agent", json_pack("{s:{}}", "input"));
    }
    if (!strcmp(type, EV_PROVIDER_REQUEST_ENDED)) return model_end(f, out, p, id);
    if (!strcmp(type, EV_TEXT_DELTA) && (msgs || evs)) {
        json_t *t = json_object_get(p, PK_TEXT);
        const char *rid = json_string_value(json_object_get(p, PK_REQUEST_ID)), *sid = stream_id(f, rid);
        const char *s = json_string_value(t);
        size_t n = json_string_length(t), skip = 0;
        if (sid != rid && f->lg.skip_ws) {
            skip = session_skip_ws(s, n, &f->lg.skip_ws);
            if (skip == n) return 0;
        }
        if (msgs)
            rc |= event(out, "messages", id, json_pack("[{s:s, s:s%, s:s?}, o]", "type", "AIMessageChunk", "content",
                                                   s ? s + skip : "", s ? n - skip : 0, "id", sid, chunk_meta(p)));
        if (evs)
            rc |= lc_event(out, id, "on_chat_model_stream", "", sid, "agent",
                           json_pack("{s:{s:s, s:s%, s:s?}}", "chunk", "type", "AIMessageChunk", "content",
                                     s ? s + skip : "", s ? n - skip : 0, "id", sid));
        return rc;
    }
    if (!strcmp(type, EV_TOOL_CALLED) && msgs) {
        json_t *args = json_object_get(p, PK_ARGUMENTS), *rid = json_object_get(p, PK_REQUEST_ID);
        char *a = json_dumps(args ? args : json_object(), JSON_COMPACT | JSON_ENCODE_ANY);
        json_t *tc = json_pack("[{s:O, s:O, s:s, s:i, s:s}]", "id", json_object_get(p, PK_CALL_ID), "name",
                               json_object_get(p, PK_NAME), "args", a ? a : "{}", "index", 0, "type", "tool_call_chunk");
        free(a);
        rc |= event(out, "messages", id, json_pack("[{s:s, s:s, s:O, s:o}, o]", "type", "AIMessageChunk", "content", "",
                                               "id", rid ? rid : json_null(), "tool_call_chunks", tc, chunk_meta(p)));
    }
    if (!strcmp(type, EV_TOOL_CALLED) && evs) {
        json_t *args = json_object_get(p, PK_ARGUMENTS);
        rc |= lc_event(out, id, "on_tool_start", json_string_value(json_object_get(p, PK_NAME)),
                       json_string_value(json_object_get(p, PK_CALL_ID)), "tools",
                       json_pack("{s:O}", "input", json_is_object(args) ? args : json_object()));
    }
    if (!strcmp(type, EV_TOOL_RESULT) && (msgs || evs)) {
        const char *call = json_string_value(json_object_get(p, PK_CALL_ID));
        json_t *res = json_object_get(p, PK_RESULT);
        char mid[96], *text = json_is_string(res) ? NULL : json_dumps(res ? res : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
        snprintf(mid, sizeof mid, "tool_%s", call ? call : "");
        json_t *content = text ? json_string(text) : json_incref(res);     /* a string result kept whole */
        free(text);
        json_t *m = json_pack("{s:s, s:o, s:s, s:s}", "type", "tool", "content", content, "id", mid, "tool_call_id",
                              call ? call : "");
        if (msgs) rc |= event(out, "messages", id, json_pack("[O, {s:s}]", m, "langgraph_node", "tools"));
        if (evs) {
            int err = json_is_true(json_object_get(p, PK_IS_ERROR)) || json_is_true(json_object_get(p, PK_FAILED));
            if (m) json_object_set_new(m, "status", json_string(err ? "error" : "success"));
            rc |= lc_event(out, id, "on_tool_end", "", call, "tools", json_pack("{s:O}", "output", m));
        }
        json_decref(m);
    }
    return rc;
}

/* A chat's event within the run. */
static int chat_event(frame_t *f, buf_t *out, const char *type, const json_t *p, offset_t at, size_t len,
                      const char *id)
{
    switch (frame_reply_track(f, type, p)) {
    case FRAME_REPLY_OTHER: return 0;
    case FRAME_REPLY_END:
    case FRAME_REPLY_WAIT:     /* its tool calls wait for approval */
        return (!strcmp(type, EV_PROVIDER_REQUEST_ENDED) ? model_end(f, out, p, id) : 0) | over(f, at, len, 0);
    case FRAME_REPLY_CUT: return over(f, at, len, 1);
    default: return model_event(f, out, type, p, id);
    }
}

/* A workflow's event within the run: it ends when the workflow waits or is over; its
 * agent steps' text and tools are messages. */
static int workflow_event(frame_t *f, buf_t *out, const char *type, const json_t *p, offset_t at, size_t len,
                          const char *id)
{
    if (!strcmp(type, EV_INPUT_REQUESTED) || !strcmp(type, EV_WORKFLOW_COMPLETED) ||
        !strcmp(type, EV_WORKFLOW_FAILED) || !strcmp(type, EV_SESSION_CANCELLED))
        return over(f, at, len, 0);
    return model_event(f, out, type, p, id);
}

static int message(frame_t *f, buf_t *out, const log_info *info, const void *data, size_t len, offset_t at)
{
    (void)info;
    if (f->ui.phase == FRAME_UI_DONE) return 0;
    json_t *ev = json_loadb(data, len, JSON_ALLOW_NUL, NULL);   /* a model's text may hold NULs */
    const char *type = json_string_value(json_object_get(ev, "type"));
    const json_t *p = json_object_get(ev, "payload");
    offset_t next = {at.seq + 1, at.pos + len};
    char id[OFFSET_LEN + 1];
    size_t mark = out->len;
    int rc = 0;
    offset_format(next, id);
    if (!type) {
        rc = 0;     /* not an envelope */
    } else if (f->ui.phase == FRAME_UI_MESSAGE) {
        /* The run's first event: a chat's user message, or what starts or resumes a
         * workflow. Any other is no run's: it is over where it began. */
        f->lg.run_seq = at.seq;
        f->lg.start_seq = at.seq + 1;
        f->lg.start_pos = at.pos + len;
        if (!strcmp(type, EV_MESSAGE_USER)) f->ui.phase = FRAME_UI_WAITING;
        else if (!strcmp(type, EV_SESSION_CREATED) || !strcmp(type, EV_INPUT_RECEIVED)) f->ui.phase = FRAME_UI_WORKFLOW;
        else rc = over(f, at, len, 0);
        if (f->ui.phase == FRAME_UI_WORKFLOW) rc = workflow_event(f, out, type, p, at, len, id);
    } else if (f->ui.phase == FRAME_UI_WORKFLOW) {
        rc = workflow_event(f, out, type, p, at, len, id);
    } else {
        rc = chat_event(f, out, type, p, at, len, id);
    }
    /* A client that reconnected (Last-Event-ID) has what came before: the course is
     * followed, nothing of it sent again. */
    if (at.seq < f->lg.skip_seq) out->len = mark;
    json_decref(ev);
    return rc;
}

static void begin(frame_t *f, req_t *r, const log_read_req *rr)
{
    char run[OFFSET_LEN + 1];
    offset_format(rr->from, run);
    offset_t start = {f->lg.start_seq, f->lg.start_pos};
    char id[OFFSET_LEN + 1];
    offset_format(start, id);
    f->text = 1;
    frame_sse_headers(r, 1);
    res_headerf(r, "Content-Location", "/v1/langgraph/threads/%s/runs/%s", session_of(rr), run);
    /* Where the SDK reconnects to when the response ends before the run (relative to
     * its apiUrl, as it reads it): the run's stream, from its Last-Event-ID. */
    res_headerf(r, "Location", "/threads/%s/runs/%s/stream", session_of(rr), run);
    if (f->lg.skip_seq) return;     /* a reconnection: the client had these */
    buf_t out;
    buf_init(&out, 0);
    int rc = event(&out, "metadata", id, json_pack("{s:s, s:i}", "run_id", run, "attempt", 1));
    if (!rc && (f->lg.modes & FRAME_LG_VALUES)) {
        json_t *v = values_at(r, rr, f->lg.start_seq, f->lg.start_pos);
        rc = v ? event(&out, "values", id, v) : -1;
    }
    if (!rc) res_write(r, out.p, out.len);
    buf_free(&out);
}

/* What the run's node wrote: a chat's agent the messages after the run's user message
 * ({"agent": {"messages": [...]}}), a workflow its state ({"<its phase>": state}). */
static json_t *updates(const frame_t *f, const session_view *v)
{
    if (v->is_workflow) return json_pack("{s:o}", v->phase[0] ? v->phase : "workflow", lgraph_values(v));
    json_t *all = lgraph_values(v), *msgs = json_object_get(all, "messages"), *out = json_array(), *m;
    size_t i;
    int after = 0;
    json_array_foreach(msgs, i, m) {
        if (after) json_array_append(out, m);
        /* The run's user message (v's messages and lgraph_values' are one to one). */
        const char *id = json_string_value(json_object_get(json_array_get(v->messages, i), "offset"));
        offset_kind k;
        offset_t o;
        if (id && !offset_parse(id, strlen(id), &k, &o) && o.seq == f->lg.run_seq) after = 1;
    }
    json_decref(all);
    return json_pack("{s:{s:o}}", "agent", "messages", out);
}

/* The run is over: its last values (or its error), then end. */
static int finish(frame_t *f, req_t *r, const log_read_req *rr)
{
    session_view v;
    offset_t at = {f->lg.end_seq, f->lg.end_pos};
    char id[OFFSET_LEN + 1];
    offset_format(at, id);
    session_view_init(&v);
    int rc = sstore_view(r->log, session_of(rr), 1, at, &v, NULL);
    buf_t out;
    buf_init(&out, 0);
    if (rc) {
        rc = event(&out, "error", id, json_pack("{s:s, s:s}", "error", "ServiceUnavailable", "message",
                                            "the session could not be read"));
    } else {
        if (f->lg.modes & FRAME_LG_UPDATES) rc |= event(&out, "updates", id, updates(f, &v));
        if (f->lg.modes & FRAME_LG_VALUES) rc |= event(&out, "values", id, lgraph_values(&v));
        if (v.status == SESSION_FAILED)
            rc |= event(&out, "error", id, json_pack("{s:s, s:s}", "error", "RunError", "message",
                                                 v.error[0] ? v.error : "the run failed"));
    }
    rc |= sse_event(&out, "end", id, "null", 4) ? -1 : 0;
    session_view_free(&v);
    if (!rc) res_write(r, out.p, out.len);
    buf_free(&out);
    return FRAME_END;
}

/* The thread's values at (seq, pos), or at its tail (seq 0), as the JSON answer. */
static void answer(req_t *r, const log_read_req *rr, uint64_t seq, uint64_t pos)
{
    session_view v;
    offset_t at = {seq, pos};
    session_view_init(&v);
    int rc = sstore_view(r->log, session_of(rr), seq != 0, at, &v, NULL);
    if (rc) {
        reply_fail(r, rc);
    } else {
        json_t *o = lgraph_values(&v);
        if (v.status == SESSION_FAILED)
            json_object_set_new(o, "__error__", json_pack("{s:s, s:s}", "error", "RunError", "message",
                                                          v.error[0] ? v.error : "the run failed"));
        res_json(r, 200, o);
        json_decref(o);
    }
    session_view_free(&v);
}

static int batch(frame_t *f, req_t *r, const log_read_req *rr, const buf_t *out)
{
    if (f->fr == &frame_lgraph_wait) {
        if (f->ui.phase != FRAME_UI_DONE) return frame_next(rr);
        answer(r, rr, f->lg.end_seq, f->lg.end_pos);
        return FRAME_END;
    }
    int st = frame_events_batch(f, r, rr, out);
    return f->ui.phase == FRAME_UI_DONE ? finish(f, r, rr) : st;
}

/* A wait that outlived its deadline: the values as they are. */
static void end(frame_t *f, req_t *r, const log_read_req *rr)
{
    if (f->fr == &frame_lgraph_wait) answer(r, rr, 0, 0);
}

const framer frame_lgraph = {
    .name = "lgraph",
    .streamed = 1,
    .whole_reply = 1,
    .message = message,
    .begin = begin,
    .batch = batch,
    .heartbeat = frame_sse_heartbeat,
    .end = end,
};

/* runs/wait and join: nothing until the run is over, then its values. */
const framer frame_lgraph_wait = {
    .name = "lgraph-wait",
    .whole_reply = 1,
    .message = message,
    .batch = batch,
    .end = end,
};

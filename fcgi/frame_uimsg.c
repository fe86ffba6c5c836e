/* frame_uimsg: one chat reply as the Vercel AI SDK's UI message stream (frame.h;
 * docs/clients.md), the answer of POST /v1/aisdk/chat/{agent} and of its resume GET.
 *
 * The read starts at the user message the reply answers and maps the session's
 * events as they come, each chunk one SSE `data:` line of JSON:
 *
 *   message:user (the first)        start {messageId: "msg_<its offset>"}
 *   provider:request_started        start-step (not again after a retry: reset-step)
 *   text:delta / thinking:delta     text-* / reasoning-* (a part per run of one kind)
 *   tool:called / tool:result       tool-input-available / tool-output-available
 *                                   (tool-output-error when it failed or is an error,
 *                                   tool-output-denied when it was not approved)
 *   input:requested of a tool call  tool-approval-request {approvalId, toolCallId}; once
 *                                   each call of the step has a result or waits for
 *                                   approval, finish (tool-calls): the reply waits
 *   provider:request_retried        reset-step: the retry replaces what the attempt sent,
 *                                   unless it continues it (continuedFrom): then the text
 *                                   part goes on, without the whitespace the continuation
 *                                   gives again (docs/events.md, "A reply continued")
 *   provider:request_ended          finish-step, and finish unless it asked for tools
 *   tool:loop_stopped               finish (other)
 *   reply:failed                    error, finish (error)
 *   reply:stopped                   abort (stopped)
 *   session:cancelled               abort
 *   a later message:user (interrupt) finish (interrupted): that message has a reply of its own
 *
 * then `data: [DONE]` and the response ends. A reply that goes on after answers to its
 * approvals is read from its user message too: `start` without a messageId (the SDK's
 * message goes on), then, before the answers, only its tools' results (a call
 * approved earlier may have its result there; the SDK takes one again as it is),
 * and from the answers on its events as they come. Before its first provider request the
 * reply has not begun: what the log holds then (an interrupted request's end) is
 * another reply's. The state is frame_t.ui, so the hub carries it like a position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/session.h"
#include "frame.h"

/* One chunk: the object as a data line (stolen). 0 or -1. */
static int chunk(buf_t *out, json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;     /* one line: control characters are escaped */
    int rc = s ? buf_printf(out, "data: %s\n\n", s) : -1;
    free(s);
    json_decref(o);
    return rc ? -1 : 0;
}

static int simple(buf_t *out, const char *type)
{
    return chunk(out, json_pack("{s:s}", "type", type));
}

/* A part's chunk: {"type", "id"[, "delta"]} (delta a JSON string, NULs and all). */
static int part(buf_t *out, const char *type, const char *kind, int n, const json_t *delta)
{
    char id[32];
    snprintf(id, sizeof id, "%s-%d", kind, n);
    json_t *o = json_pack("{s:s, s:s}", "type", type, "id", id);
    if (o && delta) json_object_set_new(o, "delta", json_is_string(delta) ? json_incref((json_t *)delta) : json_string(""));
    return chunk(out, o);
}

static int close_parts(frame_t *f, buf_t *out)
{
    int rc = 0;
    if (f->ui.text) rc |= part(out, "text-end", "text", f->ui.part, NULL);
    if (f->ui.reasoning) rc |= part(out, "reasoning-end", "reasoning", f->ui.part, NULL);
    f->ui.text = f->ui.reasoning = 0;
    return rc;
}

static int close_step(frame_t *f, buf_t *out)
{
    int rc = close_parts(f, out);
    if (f->ui.step) rc |= simple(out, "finish-step");
    f->ui.step = 0;
    return rc;
}

/* The reply is over: the chunk that says how (stolen), then [DONE]. */
static int over(frame_t *f, buf_t *out, json_t *last)
{
    int rc = close_step(f, out);
    rc |= chunk(out, last);
    rc |= buf_puts(out, "data: [DONE]\n\n") ? -1 : 0;
    f->ui.phase = FRAME_UI_DONE;
    return rc;
}

static int finish(frame_t *f, buf_t *out, const char *reason)
{
    return over(f, out, json_pack("{s:s, s:s}", "type", "finish", "finishReason", reason));
}

/* A provider's stop reason as the SDK's finish reason. */
static const char *finish_reason(const char *stop)
{
    static const struct {
        const char *stop, *reason;
    } map[] = {{"end_turn", "stop"},       {"stop", "stop"},           {"stop_sequence", "stop"},
               {"max_tokens", "length"},   {"length", "length"},       {"tool_use", "tool-calls"},
               {"tool_calls", "tool-calls"}, {"content_filter", "content-filter"}, {"refusal", "content-filter"}};
    for (size_t i = 0; stop && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(stop, map[i].stop)) return map[i].reason;
    return "other";
}

/* A text or reasoning delta: its part, begun if it is not open. */
static int delta(frame_t *f, buf_t *out, int reasoning, const json_t *text)
{
    int *open = reasoning ? &f->ui.reasoning : &f->ui.text;
    const char *kind = reasoning ? "reasoning" : "text";
    int rc = 0;
    if (!*open) {
        rc |= close_parts(f, out);
        f->ui.part++;
        rc |= part(out, reasoning ? "reasoning-start" : "text-start", kind, f->ui.part, NULL);
        *open = 1;
    }
    return rc | part(out, reasoning ? "reasoning-delta" : "text-delta", kind, f->ui.part, text);
}

static int tool_result(buf_t *out, const json_t *p)
{
    json_t *call = json_object_get(p, PK_CALL_ID), *result = json_object_get(p, PK_RESULT);
    if (json_is_true(json_object_get(p, PK_DENIED)))
        return chunk(out, json_pack("{s:s, s:O}", "type", "tool-output-denied", "toolCallId", call));
    if (!json_is_true(json_object_get(p, PK_FAILED)) && !json_is_true(json_object_get(p, PK_IS_ERROR)))
        return chunk(out, json_pack("{s:s, s:O, s:O}", "type", "tool-output-available", "toolCallId", call, "output",
                                    result ? result : json_null()));
    char *text = json_is_string(result) ? NULL : json_dumps(result ? result : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
    int rc = chunk(out, json_pack("{s:s, s:O, s:s}", "type", "tool-output-error", "toolCallId", call, "errorText",
                                  text ? text : json_string_value(result)));
    free(text);
    return rc;
}

static int event_chunk(frame_t *f, buf_t *out, const char *type, const json_t *p, int course);

/* The chunks of one event of the reply under way, whose course (frame_reply_track)
 * is not FRAME_REPLY_OTHER: a reset-step owed after a retry first. */
static int event_chunks(frame_t *f, buf_t *out, const char *type, const json_t *p, int course)
{
    int rc = 0;
    if (f->ui.reset && !strcmp(type, EV_PROVIDER_REQUEST_STARTED)) {
        const json_t *from = json_object_get(p, PK_CONTINUED_FROM);
        f->ui.reset = 0;
        if (json_is_object(from)) {
            /* The reader has the attempt's text: the continuation goes on from it. */
            json_t *t = json_object_get(from, PK_TRIMMED);
            f->ui.skip_ws = json_is_integer(t) && json_integer_value(t) > 0 && json_integer_value(t) < 64
                                ? (int)json_integer_value(t) : 0;
            return 0;
        }
        return close_parts(f, out) | simple(out, "reset-step");
    }
    if (f->ui.reset && strcmp(type, EV_PROVIDER_REQUEST_RETRIED)) {
        /* Something else ends the reply or comes before the next attempt: as before. */
        f->ui.reset = 0;
        rc = close_parts(f, out) | simple(out, "reset-step");
    }
    return rc | event_chunk(f, out, type, p, course);
}

static int event_chunk(frame_t *f, buf_t *out, const char *type, const json_t *p, int course)
{
    const char *s;
    if (course == FRAME_REPLY_CUT) return finish(f, out, "interrupted");
    if (!strcmp(type, EV_SESSION_CANCELLED)) {
        json_t *o = json_pack("{s:s}", "type", "abort");
        if (o && (s = json_string_value(json_object_get(p, PK_REASON)))) json_object_set_new(o, "reason", json_string(s));
        return over(f, out, o);
    }
    if (!strcmp(type, EV_REPLY_STOPPED)) return over(f, out, json_pack("{s:s, s:s}", "type", "abort", "reason", "stopped"));
    if (!strcmp(type, EV_REPLY_FAILED)) {
        s = json_string_value(json_object_get(p, PK_ERROR));
        int rc = close_step(f, out);
        rc |= chunk(out, json_pack("{s:s, s:s}", "type", "error", "errorText", s ? s : "the reply failed"));
        return rc | finish(f, out, "error");
    }
    if (!strcmp(type, EV_PROVIDER_REQUEST_STARTED)) {
        if (f->ui.step) return 0;   /* a retry, after reset-step */
        f->ui.step = 1;
        return simple(out, "start-step");
    }
    if (!strcmp(type, EV_TEXT_DELTA) && f->ui.skip_ws) {
        const json_t *t = json_object_get(p, PK_TEXT);
        size_t n = json_string_length(t), skip = session_skip_ws(json_string_value(t), n, &f->ui.skip_ws);
        if (skip == n) return 0;
        json_t *rest = json_stringn_nocheck(json_string_value(t) + skip, n - skip);
        int r = delta(f, out, 0, rest);
        json_decref(rest);
        return r;
    }
    if (!strcmp(type, EV_TEXT_DELTA) || !strcmp(type, EV_THINKING_DELTA))
        return delta(f, out, !strcmp(type, EV_THINKING_DELTA), json_object_get(p, PK_TEXT));
    if (!strcmp(type, EV_TOOL_CALLED)) {
        json_t *args = json_object_get(p, PK_ARGUMENTS);
        return close_parts(f, out) |
               chunk(out, json_pack("{s:s, s:O, s:O, s:O}", "type", "tool-input-available", "toolCallId",
                                    json_object_get(p, PK_CALL_ID), "toolName", json_object_get(p, PK_NAME), "input",
                                    args ? args : json_null()));
    }
    if (!strcmp(type, EV_TOOL_RESULT)) return tool_result(out, p);
    if (!strcmp(type, EV_INPUT_REQUESTED) && json_is_string(json_object_get(p, PK_CALL_ID)))
        return chunk(out, json_pack("{s:s, s:O, s:O}", "type", "tool-approval-request", "approvalId",
                                    json_object_get(p, PK_INTERACTION_ID), "toolCallId", json_object_get(p, PK_CALL_ID)));
    if (!strcmp(type, EV_PROVIDER_REQUEST_RETRIED)) {
        f->ui.reset = 1;    /* the next attempt says whether it continues this one */
        return 0;
    }
    if (!strcmp(type, EV_PROVIDER_REQUEST_CANCELLED)) return close_parts(f, out);  /* what ends it follows */
    if (!strcmp(type, EV_PROVIDER_REQUEST_ENDED)) {
        if (course != FRAME_REPLY_END) return close_step(f, out);     /* its tools' results, then the next turn */
        return finish(f, out, finish_reason(json_string_value(json_object_get(p, PK_STOP_REASON))));
    }
    if (!strcmp(type, EV_TOOL_LOOP_STOPPED)) return finish(f, out, "other");
    return 0;
}

/* One event of the reply under way (or about to begin): its course is
 * frame_reply_track's. A reply whose tool calls wait for approval is over, for now. */
static int reply_event(frame_t *f, buf_t *out, const char *type, const json_t *p)
{
    int course = frame_reply_track(f, type, p);
    int rc = course == FRAME_REPLY_OTHER ? 0 : event_chunks(f, out, type, p, course);
    return course == FRAME_REPLY_WAIT ? rc | finish(f, out, "tool-calls") : rc;
}

static int message(frame_t *f, buf_t *out, const log_info *info, const void *data, size_t len, offset_t at)
{
    (void)info;
    if (f->ui.phase == FRAME_UI_DONE) return 0;
    /* A model's text may hold NULs (\u0000): kept, as the events keep them. */
    json_t *ev = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    const json_t *p = json_object_get(ev, "payload");
    int rc = 0;
    if (!type) {
        /* not an envelope: nothing of a reply */
    } else if (f->ui.phase == FRAME_UI_MESSAGE && f->ui.resumed) {
        /* No messageId: the SDK's message, which the answers came with, goes on. */
        rc = simple(out, "start");
        f->ui.phase = FRAME_UI_REPLY;
    } else if (f->ui.resumed && at.seq < f->ui.from.seq) {
        if (!strcmp(type, EV_TOOL_RESULT)) rc = tool_result(out, p);
    } else if (f->ui.phase == FRAME_UI_MESSAGE) {
        char id[OFFSET_LEN + 8];
        char off[OFFSET_LEN + 1];
        offset_format(at, off);
        snprintf(id, sizeof id, "msg_%s", off);
        rc = chunk(out, json_pack("{s:s, s:s}", "type", "start", "messageId", id));
        f->ui.phase = FRAME_UI_WAITING;
    } else {
        rc = reply_event(f, out, type, p);
    }
    json_decref(ev);
    return rc;
}

static void begin(frame_t *f, req_t *r, const log_read_req *rr)
{
    (void)rr;
    f->text = 1;
    frame_sse_headers(r, 1);
    res_header(r, "x-vercel-ai-ui-message-stream", "v1");
}

/* As a session's events go, and over once the reply is. */
static int batch(frame_t *f, req_t *r, const log_read_req *rr, const buf_t *out)
{
    int st = frame_events_batch(f, r, rr, out);
    return f->ui.phase == FRAME_UI_DONE ? FRAME_END : st;
}

const framer frame_uimsg = {
    .name = "uimsg",
    .streamed = 1,
    .whole_reply = 1,
    .message = message,
    .begin = begin,
    .batch = batch,
    .heartbeat = frame_sse_heartbeat,
};

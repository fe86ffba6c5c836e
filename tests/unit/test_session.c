/* Unit tests for lib/session.c: the reducer (every event type of the catalogue in
 * docs/events.md changes the view as that page says), malformed envelopes, the
 * view's JSON round trip, the chat helpers (needs_reply, interrupted), W3C trace
 * context parsing, envelope encoding, and docs/events.md itself: its example
 * envelope is loaded and reduced, and its catalogue is the code's catalogue. */
#include "session.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "offset.h"
#include "sstore.h"
#include "test.h"

/* ---- helpers -------------------------------------------------------------------- */

static uint64_t next_seq;   /* offsets handed to the reducer, one per event */

/* An envelope {"type": type, "payload": <payload JSON text>} (payload NULL: absent). */
static json_t *envelope(const char *type, const char *payload)
{
    json_t *ev = json_object();
    json_object_set_new(ev, "type", json_string(type));
    if (payload) {
        json_error_t e;
        json_t *p = json_loads(payload, 0, &e);
        if (!p) {
            fprintf(stderr, "bad test payload %s: %s\n", payload, e.text);
            abort();
        }
        json_object_set_new(ev, "payload", p);
    }
    return ev;
}

/* Reduce one event with a fresh offset; returns session_reduce's result. */
static int reduce_at(session_view *v, const char *type, const char *payload, char *off_out)
{
    char off[OFFSET_LEN + 1];
    offset_t o = {next_seq, next_seq * 100};
    next_seq++;
    offset_format(o, off);
    if (off_out) memcpy(off_out, off, sizeof off);
    json_t *ev = envelope(type, payload);
    int rc = session_reduce(v, ev, off);
    json_decref(ev);
    return rc;
}

#define R(v, type, payload) CHECK_EQ_INT(reduce_at((v), (type), (payload), NULL), 0)
#define ROFF(v, type, payload, off) CHECK_EQ_INT(reduce_at((v), (type), (payload), (off)), 0)

/* 1 if the JSON text `want` equals j. Prints both on a mismatch. */
static int json_is(const json_t *j, const char *want)
{
    json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
    int ok = w && j && json_equal((json_t *)j, w);
    if (!ok) {
        char *got = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        fprintf(stderr, "  json: got %s, want %s\n", got ? got : "(null)", want);
        free(got);
    }
    json_decref(w);
    return ok;
}
#define CHECK_JSON(j, want) test_note(json_is((j), (want)), __FILE__, __LINE__, #j " == " want)

static const char *status(const session_view *v) { return session_status_name(v->status); }

/* The string k of o, or "" (none). */
static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static void chat(session_view *v)
{
    session_view_init(v);
    R(v, "session:created", "{\"agent\": \"writer\", \"input\": {}}");
}

static void workflow(session_view *v)
{
    session_view_init(v);
    R(v, "session:created",
      "{\"workflow\": \"blog-post\", \"version\": 2, \"initialState\": {\"feedback\": \"\"},"
      " \"input\": {\"topic\": \"WAL\"}}");
}

/* The repository's root (for docs/): $DSTREAM_ROOT, or derived from this file's
 * path, which make passes as tests/unit/test_session.c (relative to the root). */
static char *read_doc(const char *rel)
{
    char path[1024];
    const char *root = getenv("DSTREAM_ROOT");
    if (root && *root) {
        snprintf(path, sizeof path, "%s/%s", root, rel);
    } else {
        const char *f = __FILE__, *cut = strstr(f, "tests/unit/");
        snprintf(path, sizeof path, "%.*s%s", cut ? (int)(cut - f) : 0, f, rel);
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "cannot open %s (set DSTREAM_ROOT)\n", path);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap + 1);
    size_t got;
    while (s && (got = fread(s + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) s = realloc(s, (cap *= 2) + 1);
    }
    fclose(fp);
    if (s) s[n] = '\0';
    return s;
}

/* The first ```json block of a markdown text, as a new string. */
static char *first_json_block(const char *md)
{
    const char *a = strstr(md, "```json\n");
    if (!a) return NULL;
    a += 8;
    const char *b = strstr(a, "\n```");
    if (!b) return NULL;
    return strndup(a, (size_t)(b - a));
}

/* ---- status transitions ------------------------------------------------------------ */

static void test_workflow_lifecycle(void)
{
    session_view v;
    workflow(&v);
    CHECK_EQ_STR(status(&v), "pending");
    CHECK(v.is_workflow);
    CHECK_JSON(v.state, "{\"feedback\": \"\"}");
    CHECK_JSON(v.input, "{\"topic\": \"WAL\"}");
    CHECK_JSON(v.created, "{\"workflow\": \"blog-post\", \"version\": 2, \"initialState\": "
                          "{\"feedback\": \"\"}, \"input\": {\"topic\": \"WAL\"}}");
    CHECK(!v.started);

    R(&v, "workflow:started", "{\"workflow\": \"blog-post\", \"version\": 2}");
    CHECK_EQ_STR(status(&v), "running");
    CHECK(v.started);

    R(&v, "phase:entered", "{\"phase\": \"draft\"}");
    CHECK_EQ_STR(v.phase, "draft");
    CHECK_EQ_INT(v.step, 0);
    R(&v, "step:started", "{\"phase\": \"draft\", \"step\": 0, \"kind\": \"agent\", \"name\": \"w\"}");
    CHECK(v.step_open);
    R(&v, "agent:started", "{\"agent\": \"writer\", \"model\": \"m\", \"step\": 0}");
    R(&v, "provider:request_started",
      "{\"requestId\": \"r1\", \"provider\": \"anthropic\", \"model\": \"m\", \"attempt\": 1}");
    CHECK_EQ_STR(v.request, "r1");
    /* A workflow's messages are its current agent step's conversation. */
    CHECK_EQ_UINT(json_array_size(v.messages), 1);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.messages, 0), "requestId")), "r1");
    R(&v, "text:delta", "{\"requestId\": \"r1\", \"text\": \"draft\"}");
    R(&v, "provider:request_ended",
      "{\"requestId\": \"r1\", \"stopReason\": \"end_turn\", \"usage\": {\"inputTokens\": 10, "
      "\"outputTokens\": 20}, \"costUsd\": 0.25}");
    CHECK_EQ_STR(v.request, "");
    CHECK_EQ_STR(status(&v), "running");   /* a workflow is not done between requests */
    R(&v, "agent:completed",
      "{\"agent\": \"writer\", \"output\": \"draft\", \"durationMs\": 5, \"usage\": "
      "{\"inputTokens\": 10, \"outputTokens\": 20}, \"costUsd\": 0.25}");
    /* Usage is summed from provider:request_ended only, not again from agent:completed. */
    CHECK_EQ_INT(v.input_tokens, 10);
    CHECK_EQ_INT(v.output_tokens, 20);
    CHECK(v.cost_usd == 0.25);
    R(&v, "state:updated", "{\"set\": {\"draft\": \"text\", \"review.score\": 8}}");
    CHECK_JSON(v.state, "{\"feedback\": \"\", \"draft\": \"text\", \"review\": {\"score\": 8}}");
    R(&v, "step:completed", "{\"phase\": \"draft\", \"step\": 0}");
    CHECK(!v.step_open);
    CHECK_EQ_INT(v.step, 1);
    R(&v, "phase:exited", "{\"phase\": \"draft\", \"to\": \"approve\"}");
    R(&v, "phase:entered", "{\"phase\": \"approve\"}");
    CHECK_EQ_STR(v.phase, "approve");
    CHECK_EQ_INT(v.step, 0);

    /* A human checkpoint: running -> awaiting_input -> running. */
    char req_off[OFFSET_LEN + 1];
    R(&v, "step:started", "{\"phase\": \"approve\", \"step\": 0, \"kind\": \"human\"}");
    ROFF(&v, "input:requested",
         "{\"interactionId\": \"publish-ok\", \"input\": \"approval\", \"prompt\": \"Publish?\"}",
         req_off);
    CHECK_EQ_STR(status(&v), "awaiting_input");
    CHECK(v.pending != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(v.pending, "interactionId")), "publish-ok");
    CHECK_EQ_STR(json_string_value(json_object_get(v.pending, "offset")), req_off);
    CHECK_EQ_STR(json_string_value(json_object_get(v.pending, "input")), "approval");
    /* Another step:started while waiting does not hide the wait. */
    R(&v, "step:started", "{\"phase\": \"approve\", \"step\": 0, \"kind\": \"human\"}");
    CHECK_EQ_STR(status(&v), "awaiting_input");
    R(&v, "input:received", "{\"interactionId\": \"other\", \"response\": 1}");
    CHECK_EQ_STR(status(&v), "awaiting_input");   /* not the one asked */
    CHECK(v.pending != NULL);
    R(&v, "input:received", "{\"interactionId\": \"publish-ok\", \"response\": true}");
    CHECK_EQ_STR(status(&v), "running");
    CHECK(v.pending == NULL);
    CHECK_JSON(json_object_get(v.early, "publish-ok"), "true");
    R(&v, "step:completed", "{\"phase\": \"approve\", \"step\": 0, \"interactionId\": \"publish-ok\"}");
    CHECK(json_object_get(v.early, "publish-ok") == NULL);   /* consumed */
    CHECK(json_object_get(v.early, "other") != NULL);        /* not this step's */

    R(&v, "tool:called", "{\"requestId\": \"r9\", \"callId\": \"c1\", \"name\": \"t\", \"arguments\": {}}");
    R(&v, "tool:result", "{\"callId\": \"c1\", \"result\": \"ok\", \"isError\": false}");
    /* A model's call (it has a requestId): its result joins the step's conversation. */
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.messages, json_array_size(v.messages) - 1), "callId")), "c1");
    /* A tool step's call (no requestId) does not. */
    size_t before = json_array_size(v.messages);
    R(&v, "tool:called", "{\"callId\": \"c2\", \"name\": \"t\", \"arguments\": {}, \"phase\": \"approve\", \"step\": 1}");
    R(&v, "tool:result", "{\"callId\": \"c2\", \"result\": \"ok\", \"isError\": false}");
    CHECK_EQ_UINT(json_array_size(v.messages), before);
    R(&v, "step:started", "{\"phase\": \"approve\", \"step\": 1, \"kind\": \"update\"}");
    CHECK_EQ_UINT(json_array_size(v.messages), 0);
    R(&v, "state:updated", "{\"state\": {\"whole\": 1}}");
    CHECK_JSON(v.state, "{\"whole\": 1}");
    R(&v, "state:updated", "{\"state\": {\"a\": {\"b\": 1}}, \"set\": {\"a.c\": 2}}");
    CHECK_JSON(v.state, "{\"a\": {\"b\": 1, \"c\": 2}}");

    R(&v, "workflow:completed", "{\"state\": {\"a\": 1}}");
    CHECK_EQ_STR(status(&v), "completed");
    CHECK(session_view_finished(&v));

    /* A finished session does not move. */
    R(&v, "workflow:started", "{}");
    CHECK_EQ_STR(status(&v), "completed");
    R(&v, "step:started", "{\"phase\": \"x\", \"step\": 0}");
    CHECK_EQ_STR(status(&v), "completed");
    R(&v, "provider:request_started", "{\"requestId\": \"r2\"}");
    CHECK_EQ_STR(status(&v), "completed");
    R(&v, "input:requested", "{\"interactionId\": \"again\", \"input\": \"text\", \"prompt\": \"?\"}");
    CHECK_EQ_STR(status(&v), "completed");
    R(&v, "workflow:failed", "{\"error\": \"late\"}");
    CHECK_EQ_STR(status(&v), "completed");
    R(&v, "session:cancelled", "{\"reason\": \"late\"}");
    CHECK_EQ_STR(status(&v), "completed");
    R(&v, "message:user", "{\"content\": \"hi\", \"mode\": \"interrupt\"}");
    CHECK_EQ_STR(status(&v), "completed");
    session_view_free(&v);

    /* failed, with its error; then nothing moves it. */
    workflow(&v);
    R(&v, "workflow:started", "{}");
    R(&v, "workflow:failed", "{\"error\": \"no transition from phase draft matched\"}");
    CHECK_EQ_STR(status(&v), "failed");
    CHECK_EQ_STR(v.error, "no transition from phase draft matched");
    CHECK(session_view_finished(&v));
    R(&v, "workflow:completed", "{}");
    R(&v, "workflow:started", "{}");
    CHECK_EQ_STR(status(&v), "failed");
    session_view_free(&v);

    /* cancelled from awaiting_input; the pending request is cleared. */
    workflow(&v);
    R(&v, "workflow:started", "{}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    R(&v, "cancel:requested", "{}");
    CHECK(v.cancel_requested);
    CHECK_EQ_STR(status(&v), "running");   /* asked, not yet done */
    R(&v, "provider:request_cancelled", "{\"requestId\": \"r1\", \"reason\": \"cancelled\"}");
    CHECK_EQ_STR(v.request, "");
    R(&v, "session:cancelled", "{\"reason\": \"user\"}");
    CHECK_EQ_STR(status(&v), "cancelled");
    CHECK(session_view_finished(&v));
    R(&v, "workflow:completed", "{}");
    R(&v, "input:requested", "{\"interactionId\": \"x\"}");
    CHECK_EQ_STR(status(&v), "cancelled");
    session_view_free(&v);

    /* input:expired closes the wait. */
    workflow(&v);
    R(&v, "workflow:started", "{}");
    R(&v, "input:requested", "{\"interactionId\": \"h\", \"input\": \"text\", \"prompt\": \"?\"}");
    CHECK_EQ_STR(status(&v), "awaiting_input");
    R(&v, "input:expired", "{\"interactionId\": \"other\"}");
    CHECK_EQ_STR(status(&v), "awaiting_input");
    R(&v, "input:expired", "{\"interactionId\": \"h\"}");
    CHECK_EQ_STR(status(&v), "running");
    CHECK(v.pending == NULL);
    session_view_free(&v);
}

/* ---- early answers --------------------------------------------------------------------- */

static void test_early_answers(void)
{
    session_view v;
    workflow(&v);
    R(&v, "input:received", "{\"interactionId\": \"publish-ok\", \"response\": false}");
    CHECK_EQ_STR(status(&v), "pending");
    CHECK_JSON(v.early, "{\"publish-ok\": false}");
    R(&v, "workflow:started", "{}");
    R(&v, "phase:entered", "{\"phase\": \"approve\"}");
    R(&v, "step:started", "{\"phase\": \"approve\", \"step\": 0, \"kind\": \"human\"}");
    /* Asked after it was answered: nothing to wait for. */
    R(&v, "input:requested", "{\"interactionId\": \"publish-ok\", \"input\": \"approval\", \"prompt\": \"?\"}");
    CHECK(v.pending == NULL);
    CHECK_EQ_STR(status(&v), "running");
    R(&v, "step:completed", "{\"phase\": \"approve\", \"step\": 0, \"interactionId\": \"publish-ok\"}");
    CHECK_JSON(v.early, "{}");
    /* A later visit of the same checkpoint asks again and waits. */
    R(&v, "phase:entered", "{\"phase\": \"approve\"}");
    R(&v, "step:started", "{\"phase\": \"approve\", \"step\": 0, \"kind\": \"human\"}");
    R(&v, "input:requested", "{\"interactionId\": \"publish-ok\", \"input\": \"approval\", \"prompt\": \"?\"}");
    CHECK(v.pending != NULL);
    CHECK_EQ_STR(status(&v), "awaiting_input");
    session_view_free(&v);
}

/* ---- chat -------------------------------------------------------------------------------- */

static void test_chat_messages(void)
{
    session_view v;
    char off1[OFFSET_LEN + 1];
    chat(&v);
    CHECK(!v.is_workflow);
    CHECK_EQ_STR(status(&v), "pending");
    CHECK(!session_view_needs_reply(&v));

    ROFF(&v, "message:user", "{\"content\": \"Hello?\", \"mode\": \"interrupt\"}", off1);
    CHECK_EQ_UINT(json_array_size(v.messages), 1);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.messages, 0), "content")), "Hello?");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.messages, 0), "role")), "user");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.messages, 0), "offset")), off1);
    CHECK(session_view_needs_reply(&v));
    CHECK(!session_view_interrupted(&v));

    R(&v, "provider:request_started", "{\"requestId\": \"r1\", \"provider\": \"openai\", \"model\": \"m\", \"attempt\": 1}");
    CHECK_EQ_STR(status(&v), "running");
    CHECK(v.started);
    CHECK(!session_view_needs_reply(&v));
    CHECK_EQ_UINT(json_array_size(v.messages), 2);
    R(&v, "thinking:delta", "{\"requestId\": \"r1\", \"text\": \"Let me \"}");
    R(&v, "thinking:delta", "{\"requestId\": \"r1\", \"text\": \"think.\"}");
    R(&v, "text:delta", "{\"requestId\": \"r1\", \"text\": \"Hel\"}");
    R(&v, "text:delta", "{\"requestId\": \"r1\", \"text\": \"lo\"}");
    R(&v, "text:delta", "{\"requestId\": \"r1\", \"text\": \"!\"}");
    R(&v, "text:delta", "{\"requestId\": \"nope\", \"text\": \"stray\"}");   /* no such reply */
    json_t *a = json_array_get(v.messages, 1);
    CHECK_EQ_STR(json_string_value(json_object_get(a, "role")), "assistant");
    CHECK_EQ_STR(json_string_value(json_object_get(a, "content")), "Hello!");
    CHECK_EQ_STR(json_string_value(json_object_get(a, "thinking")), "Let me think.");
    CHECK_EQ_STR(json_string_value(json_object_get(a, "requestId")), "r1");
    CHECK(json_object_get(a, "interrupted") == NULL);

    /* A tool call inside the reply, its result as a tool message. */
    R(&v, "tool:called", "{\"requestId\": \"r1\", \"callId\": \"c1\", \"name\": \"word_count\", \"arguments\": {\"text\": \"a b\"}}");
    CHECK_JSON(json_object_get(a, "toolCalls"),
               "[{\"callId\": \"c1\", \"name\": \"word_count\", \"arguments\": {\"text\": \"a b\"}}]");
    R(&v, "tool:result", "{\"callId\": \"c1\", \"result\": {\"words\": 2}, \"isError\": false}");
    CHECK_EQ_UINT(json_array_size(v.messages), 3);
    CHECK_JSON(json_array_get(v.messages, 2), "{\"role\": \"tool\", \"callId\": \"c1\", \"content\": {\"words\": 2}}");
    CHECK_EQ_STR(status(&v), "running");

    R(&v, "provider:request_ended",
      "{\"requestId\": \"r1\", \"stopReason\": \"end_turn\", \"usage\": {\"inputTokens\": 100, \"outputTokens\": 7}, \"costUsd\": 0.5}");
    /* It asked for a tool: the reply goes on with the results... */
    CHECK_EQ_STR(status(&v), "running");
    CHECK(session_view_tools_answered(&v));
    CHECK_EQ_INT(v.tool_turns, 1);
    /* ...unless the turns are spent. */
    R(&v, "tool:loop_stopped", "{\"reason\": \"maxTurns\", \"turns\": 1}");
    CHECK(!session_view_tools_answered(&v));
    CHECK_EQ_STR(status(&v), "completed");   /* a chat is completed between replies */
    CHECK(!session_view_finished(&v));
    CHECK(!session_view_needs_reply(&v));
    CHECK_EQ_INT(v.input_tokens, 100);
    CHECK_EQ_INT(v.output_tokens, 7);

    /* A new message reopens it. */
    R(&v, "message:user", "{\"content\": \"More\", \"mode\": \"queue\"}");   /* nothing in flight: joins now */
    CHECK_EQ_UINT(json_array_size(v.queued), 0);
    CHECK_EQ_UINT(json_array_size(v.messages), 4);
    CHECK_EQ_STR(status(&v), "pending");
    CHECK(session_view_needs_reply(&v));
    R(&v, "provider:request_started", "{\"requestId\": \"r2\"}");
    R(&v, "provider:request_ended",
      "{\"requestId\": \"r2\", \"usage\": {\"inputTokens\": 1, \"outputTokens\": 2}, \"costUsd\": 0.25}");
    CHECK_EQ_INT(v.input_tokens, 101);
    CHECK_EQ_INT(v.output_tokens, 9);
    CHECK(v.cost_usd == 0.75);

    /* A cancelled chat stays cancelled. */
    R(&v, "cancel:requested", "{}");
    R(&v, "session:cancelled", "{\"reason\": \"user\"}");
    CHECK_EQ_STR(status(&v), "cancelled");
    R(&v, "message:user", "{\"content\": \"late\"}");
    CHECK_EQ_STR(status(&v), "cancelled");
    CHECK(!session_view_needs_reply(&v));
    session_view_free(&v);
}

static void test_chat_modes(void)
{
    session_view v;
    char qoff[OFFSET_LEN + 1];

    /* queue: waits for the reply in flight, then its turn comes. */
    chat(&v);
    R(&v, "message:user", "{\"content\": \"one\", \"mode\": \"interrupt\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    ROFF(&v, "message:user", "{\"content\": \"two\", \"mode\": \"queue\"}", qoff);
    CHECK_EQ_UINT(json_array_size(v.queued), 1);
    CHECK_EQ_UINT(json_array_size(v.messages), 2);   /* one, the reply in flight */
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.queued, 0), "content")), "two");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.queued, 0), "offset")), qoff);
    CHECK(!session_view_interrupted(&v));   /* a queued message does not interrupt */
    R(&v, "message:user", "{\"content\": \"three\", \"mode\": \"queue\"}");
    CHECK_EQ_UINT(json_array_size(v.queued), 2);
    R(&v, "text:delta", "{\"requestId\": \"r1\", \"text\": \"ans1\"}");
    R(&v, "provider:request_ended", "{\"requestId\": \"r1\"}");
    CHECK_EQ_STR(status(&v), "running");   /* queued messages still wait */
    CHECK(session_view_needs_reply(&v));
    R(&v, "provider:request_started", "{\"requestId\": \"r2\"}");
    CHECK_EQ_UINT(json_array_size(v.queued), 1);
    CHECK_EQ_UINT(json_array_size(v.messages), 4);   /* one, ans1, two, r2 */
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.messages, 2), "content")), "two");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.messages, 3), "requestId")), "r2");
    R(&v, "provider:request_ended", "{\"requestId\": \"r2\"}");
    CHECK(session_view_needs_reply(&v));
    R(&v, "provider:request_started", "{\"requestId\": \"r3\"}");
    CHECK_EQ_UINT(json_array_size(v.queued), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.messages, 4), "content")), "three");
    R(&v, "provider:request_ended", "{\"requestId\": \"r3\"}");
    CHECK_EQ_STR(status(&v), "completed");
    CHECK(!session_view_needs_reply(&v));
    session_view_free(&v);

    /* interrupt: the reply in flight is cut and marked, the message answered next. */
    chat(&v);
    R(&v, "message:user", "{\"content\": \"one\"}");   /* mode absent: joins now */
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    R(&v, "text:delta", "{\"requestId\": \"r1\", \"text\": \"partial\"}");
    R(&v, "message:user", "{\"content\": \"stop, do this\", \"mode\": \"interrupt\"}");
    CHECK_EQ_UINT(json_array_size(v.queued), 0);
    CHECK_EQ_UINT(json_array_size(v.messages), 3);
    CHECK(session_view_interrupted(&v));
    CHECK(!session_view_needs_reply(&v));   /* a request is still in flight */
    R(&v, "provider:request_cancelled", "{\"requestId\": \"r1\", \"reason\": \"interrupted\"}");
    json_t *a = json_array_get(v.messages, 1);
    CHECK(json_is_true(json_object_get(a, "interrupted")));
    CHECK_EQ_STR(json_string_value(json_object_get(a, "reason")), "interrupted");
    CHECK_EQ_STR(json_string_value(json_object_get(a, "content")), "partial");
    CHECK_EQ_STR(v.request, "");
    CHECK(!session_view_interrupted(&v));
    CHECK(session_view_needs_reply(&v));
    CHECK_EQ_INT(v.restarts, 0);
    session_view_free(&v);

    /* background: joins the history, asks for no reply, interrupts nothing. */
    chat(&v);
    R(&v, "message:user", "{\"content\": \"note\", \"mode\": \"background\"}");
    CHECK_EQ_UINT(json_array_size(v.messages), 1);
    CHECK(json_is_true(json_object_get(json_array_get(v.messages, 0), "background")));
    CHECK(!session_view_needs_reply(&v));
    CHECK_EQ_STR(status(&v), "pending");
    R(&v, "message:user", "{\"content\": \"q\", \"mode\": \"interrupt\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    R(&v, "message:user", "{\"content\": \"fyi\", \"mode\": \"background\"}");
    CHECK_EQ_UINT(json_array_size(v.queued), 0);
    CHECK_EQ_UINT(json_array_size(v.messages), 4);
    CHECK(!session_view_interrupted(&v));
    R(&v, "provider:request_ended", "{\"requestId\": \"r1\"}");
    CHECK_EQ_STR(status(&v), "completed");
    CHECK(!session_view_needs_reply(&v));   /* the last message is background */
    session_view_free(&v);
}

static void test_restarts(void)
{
    session_view v;
    chat(&v);
    R(&v, "message:user", "{\"content\": \"q\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\", \"attempt\": 1}");
    R(&v, "text:delta", "{\"requestId\": \"r1\", \"text\": \"Hal\"}");
    CHECK_EQ_INT(v.attempts, 1);
    /* A restart closes r1 and schedules the next attempt: nothing is in flight,
     * and nothing needs a new reply (the retry is due at retryAt). */
    R(&v, "provider:request_cancelled", "{\"requestId\": \"r1\", \"reason\": \"restart\"}");
    R(&v, "provider:request_retried",
      "{\"requestId\": \"r1\", \"attempt\": 2, \"reason\": \"restart\", \"retryAt\": 1234}");
    CHECK_EQ_INT(v.restarts, 1);
    CHECK_EQ_INT(v.failures, 0);
    CHECK_EQ_STR(v.request, "");
    CHECK(v.retry_at == 1234);
    CHECK(!session_view_needs_reply(&v));
    /* The cut reply leaves the history (its retry replaces it); the question
     * still waits. */
    CHECK_EQ_UINT(json_array_size(v.messages), 1);
    R(&v, "provider:request_started", "{\"requestId\": \"r2\", \"attempt\": 2}");
    CHECK(v.retry_at == 0);
    CHECK_EQ_INT(v.attempts, 2);
    /* A provider error, likewise. */
    R(&v, "text:delta", "{\"requestId\": \"r2\", \"text\": \"Ha\"}");
    R(&v, "provider:request_retried",
      "{\"requestId\": \"r2\", \"attempt\": 3, \"reason\": \"failed\", \"retryAt\": 99}");
    CHECK_EQ_INT(v.failures, 1);
    CHECK_EQ_INT(v.restarts, 1);
    CHECK_EQ_UINT(json_array_size(v.messages), 1);
    R(&v, "provider:request_started", "{\"requestId\": \"r3\", \"attempt\": 3}");
    R(&v, "provider:request_ended", "{\"requestId\": \"r3\"}");
    CHECK_EQ_INT(v.restarts, 0);
    CHECK_EQ_INT(v.failures, 0);
    CHECK_EQ_INT(v.attempts, 0);
    CHECK(v.requests == 3);
    CHECK(!session_view_needs_reply(&v));
    CHECK_EQ_STR(status(&v), "completed");
    /* The budgets survive a snapshot. */
    R(&v, "message:user", "{\"content\": \"q2\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r4\"}");
    R(&v, "provider:request_retried", "{\"requestId\": \"r4\", \"reason\": \"failed\", \"retryAt\": 7}");
    json_t *j = session_view_to_json(&v);
    session_view w;
    session_view_init(&w);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);
    CHECK_EQ_INT(w.failures, 1);
    CHECK_EQ_INT(w.attempts, 1);
    CHECK(w.retry_at == 7);
    CHECK(w.requests == 4 && w.message_requests == 1);
    json_decref(j);
    session_view_free(&w);
    session_view_free(&v);
}

static void test_reply_failed(void)
{
    session_view v;
    chat(&v);
    R(&v, "message:user", "{\"content\": \"q\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    R(&v, "provider:request_cancelled", "{\"requestId\": \"r1\", \"reason\": \"failed\", \"error\": \"HTTP 400\"}");
    R(&v, "reply:failed", "{\"error\": \"HTTP 400 (rejected: not retried)\", \"reason\": \"rejected\", \"attempts\": 1}");
    /* failed, with the error and the attempts; asks for nothing more ... */
    CHECK_EQ_STR(status(&v), "failed");
    CHECK_EQ_STR(v.error, "HTTP 400 (rejected: not retried)");
    CHECK_EQ_INT(v.attempts, 1);
    CHECK(!session_view_needs_reply(&v));
    /* ... but is not finished: the next message tries again. */
    CHECK(!session_view_finished(&v));
    R(&v, "message:user", "{\"content\": \"again\"}");
    CHECK_EQ_STR(status(&v), "pending");
    CHECK_EQ_STR(v.error, "");
    CHECK_EQ_INT(v.attempts, 0);
    CHECK(session_view_needs_reply(&v));
    /* A message queued behind a failed reply is answered too. */
    R(&v, "provider:request_started", "{\"requestId\": \"r2\"}");
    R(&v, "message:user", "{\"content\": \"later\", \"mode\": \"queue\"}");
    R(&v, "provider:request_cancelled", "{\"requestId\": \"r2\", \"reason\": \"failed\"}");
    R(&v, "reply:failed", "{\"error\": \"x\"}");
    CHECK(!session_view_needs_reply(&v));
    R(&v, "message:user", "{\"content\": \"and this\", \"mode\": \"queue\"}");
    CHECK_EQ_STR(status(&v), "pending");
    CHECK(session_view_needs_reply(&v));
    session_view_free(&v);
    /* A workflow that failed is finished. */
    session_view_init(&v);
    R(&v, "session:created", "{\"workflow\": \"w\", \"version\": 1}");
    R(&v, "workflow:failed", "{\"error\": \"x\", \"reason\": \"step_limit\"}");
    CHECK(session_view_finished(&v));
    session_view_free(&v);
}

/* A chat's reply stopped (stop:requested, the runner's reply:stopped): in flight, with
 * tool calls open, before it began; the chat goes on, a queued message is answered. */
static void test_reply_stopped(void)
{
    session_view v, w;
    chat(&v);
    CHECK(!session_view_replying(&v));     /* a chat that was never asked anything */
    R(&v, "message:user", "{\"content\": \"q\", \"mode\": \"interrupt\"}");
    CHECK(session_view_replying(&v));      /* due */
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    R(&v, "text:delta", "{\"requestId\": \"r1\", \"text\": \"par\"}");
    CHECK(session_view_replying(&v));
    R(&v, "stop:requested", "{}");
    CHECK(v.stop_requested);
    CHECK_EQ_STR(status(&v), "running");   /* asked, not yet done */
    CHECK(!session_view_interrupted(&v));  /* not a new message to answer */
    /* The stop survives a snapshot. */
    json_t *j = session_view_to_json(&v);
    CHECK(json_is_true(json_object_get(j, "stopRequested")));
    session_view_init(&w);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);
    CHECK(w.stop_requested);
    session_view_free(&w);
    json_decref(j);
    R(&v, "provider:request_cancelled", "{\"requestId\": \"r1\", \"reason\": \"stopped\"}");
    R(&v, "reply:stopped", "{}");
    CHECK(!v.stop_requested);
    CHECK_EQ_STR(status(&v), "completed");
    CHECK_EQ_STR(v.request, "");
    CHECK(!session_view_needs_reply(&v));
    CHECK(!session_view_replying(&v));
    CHECK_JSON(json_object_get(json_array_get(v.messages, 1), "reason"), "\"stopped\"");
    /* The chat goes on: the next message is answered. */
    R(&v, "message:user", "{\"content\": \"next\", \"mode\": \"interrupt\"}");
    CHECK_EQ_STR(status(&v), "pending");
    CHECK(session_view_needs_reply(&v));
    /* Stopped before its request began: that message is answered by nothing. */
    R(&v, "stop:requested", "{}");
    R(&v, "reply:stopped", "{}");
    CHECK_EQ_STR(status(&v), "completed");
    CHECK(!session_view_needs_reply(&v));
    CHECK(json_is_true(json_object_get(json_array_get(v.messages, 2), "stopped")));
    /* Stopped between tool turns: the open calls and the next turn are dropped. */
    R(&v, "message:user", "{\"content\": \"tools\", \"mode\": \"interrupt\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r2\"}");
    R(&v, "tool:called", "{\"requestId\": \"r2\", \"callId\": \"c1\", \"name\": \"t\", \"arguments\": {}}");
    R(&v, "provider:request_ended", "{\"requestId\": \"r2\", \"stopReason\": \"tool_use\"}");
    CHECK_EQ_UINT(json_array_size(v.open_calls), 1);
    CHECK(session_view_replying(&v));      /* between tool turns */
    R(&v, "stop:requested", "{}");
    R(&v, "reply:stopped", "{}");
    CHECK_EQ_UINT(json_array_size(v.open_calls), 0);
    CHECK(!session_view_tools_answered(&v));
    CHECK(!session_view_needs_reply(&v));
    CHECK_EQ_STR(status(&v), "completed");
    /* A message queued behind the stopped reply is answered next. */
    R(&v, "message:user", "{\"content\": \"a\", \"mode\": \"interrupt\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r3\"}");
    R(&v, "message:user", "{\"content\": \"b\", \"mode\": \"queue\"}");
    R(&v, "stop:requested", "{}");
    R(&v, "provider:request_cancelled", "{\"requestId\": \"r3\", \"reason\": \"stopped\"}");
    R(&v, "reply:stopped", "{}");
    CHECK_EQ_STR(status(&v), "pending");
    CHECK(session_view_needs_reply(&v));
    session_view_free(&v);
    /* A workflow has no reply to stop. */
    workflow(&v);
    R(&v, "workflow:started", "{}");
    CHECK(!session_view_replying(&v));
    R(&v, "stop:requested", "{}");
    CHECK(!v.stop_requested);
    session_view_free(&v);
}

/* A chat's tool calls waiting for approval: the session awaits input while one
 * waits without an answer; pendingInput is the first such; a message sent meanwhile
 * waits behind them; a stop drops them. */
static void test_chat_approvals(void)
{
    session_view v;
    char ask1[OFFSET_LEN + 1], ask2[OFFSET_LEN + 1];
    chat(&v);
    R(&v, "message:user", "{\"content\": \"q\", \"mode\": \"interrupt\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    R(&v, "tool:called", "{\"requestId\": \"r1\", \"callId\": \"c1\", \"name\": \"t\", \"arguments\": {}}");
    ROFF(&v, "input:requested", "{\"interactionId\": \"c1\", \"input\": \"approval\", \"prompt\": \"?\", \"callId\": \"c1\"}", ask1);
    R(&v, "tool:called", "{\"requestId\": \"r1\", \"callId\": \"c2\", \"name\": \"t\", \"arguments\": {}}");
    ROFF(&v, "input:requested", "{\"interactionId\": \"c2\", \"input\": \"approval\", \"prompt\": \"?\", \"callId\": \"c2\"}", ask2);
    /* An input request for no open call (a stale one) is nothing. */
    R(&v, "input:requested", "{\"interactionId\": \"c9\", \"input\": \"approval\", \"prompt\": \"?\", \"callId\": \"c9\"}");
    R(&v, "provider:request_ended", "{\"requestId\": \"r1\", \"stopReason\": \"tool_use\"}");
    CHECK_EQ_STR(status(&v), "awaiting_input");
    CHECK_EQ_STR(str(v.pending, "interactionId"), "c1");
    CHECK_EQ_STR(str(v.pending, "offset"), ask1);
    CHECK(session_view_approval_call(&v, "c2") != NULL);
    CHECK(session_view_approval_call(&v, "c9") == NULL);
    CHECK(!session_view_replying(&v));      /* nothing to resume while it waits */
    /* A message meanwhile waits behind the approvals. */
    R(&v, "message:user", "{\"content\": \"and?\", \"mode\": \"interrupt\"}");
    CHECK_EQ_STR(status(&v), "awaiting_input");
    /* The first answered: the second is the open one now. */
    R(&v, "input:received", "{\"interactionId\": \"c1\", \"response\": true}");
    CHECK_EQ_STR(status(&v), "awaiting_input");
    CHECK_EQ_STR(str(v.pending, "interactionId"), "c2");
    CHECK_EQ_STR(str(v.pending, "offset"), ask2);
    R(&v, "input:received", "{\"interactionId\": \"c2\", \"response\": false, \"reason\": \"no\"}");
    CHECK(v.pending == NULL);
    CHECK_EQ_STR(status(&v), "running");
    CHECK_JSON(json_object_get(json_object_get(session_view_open_call(&v, "c2"), SESSION_CALL_APPROVAL), "reason"),
               "\"no\"");
    /* Taken, then answered: the step's results go back to the model. */
    R(&v, "tool:approved", "{\"callId\": \"c1\"}");
    CHECK(session_view_approval_call(&v, "c1") == NULL);
    R(&v, "tool:result", "{\"callId\": \"c1\", \"result\": \"ok\", \"isError\": false, \"failed\": false}");
    R(&v, "tool:result", "{\"callId\": \"c2\", \"result\": \"no\", \"isError\": true, \"failed\": false, \"denied\": true}");
    CHECK(session_view_tools_answered(&v));
    R(&v, "provider:request_started", "{\"requestId\": \"r2\"}");
    CHECK_EQ_UINT(json_object_size(v.early), 0);
    R(&v, "provider:request_ended", "{\"requestId\": \"r2\", \"stopReason\": \"end_turn\"}");
    /* A stop while a call waits: the call and its question go. */
    R(&v, "message:user", "{\"content\": \"again\", \"mode\": \"interrupt\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r3\"}");
    R(&v, "tool:called", "{\"requestId\": \"r3\", \"callId\": \"c1\", \"name\": \"t\", \"arguments\": {}}");
    R(&v, "input:requested", "{\"interactionId\": \"c1\", \"input\": \"approval\", \"prompt\": \"?\", \"callId\": \"c1\"}");
    R(&v, "provider:request_ended", "{\"requestId\": \"r3\", \"stopReason\": \"tool_use\"}");
    CHECK_EQ_STR(status(&v), "awaiting_input");     /* a call id used before asks anew */
    R(&v, "stop:requested", "{}");
    R(&v, "reply:stopped", "{}");
    CHECK(v.pending == NULL);
    CHECK_EQ_STR(status(&v), "completed");
    session_view_free(&v);
}

/* ---- malformed and unknown --------------------------------------------------------------- */

static void test_malformed(void)
{
    session_view v;
    workflow(&v);
    R(&v, "workflow:started", "{}");
    json_t *before = session_view_to_json(&v);
    static const char *const bad[] = {
        "{\"payload\": {}}",                              /* no type */
        "{\"type\": 7, \"payload\": {}}",                 /* type not a string */
        "{\"type\": null}",
        "{\"type\": \"state:updated\", \"payload\": [1]}",        /* payload not an object */
        "{\"type\": \"state:updated\", \"payload\": \"set\"}",
        "{\"type\": \"workflow:failed\", \"payload\": 3}",
        "{\"type\": \"session:cancelled\", \"payload\": null}",
        "[\"session:cancelled\", {}]",                    /* not an object at all */
        "\"session:cancelled\"",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *ev = json_loads(bad[i], JSON_DECODE_ANY, NULL);
        if (!CHECK(ev != NULL)) continue;
        if (!CHECK_EQ_INT(session_reduce(&v, ev, NULL), -1)) fprintf(stderr, "  envelope %s\n", bad[i]);
        json_decref(ev);
    }
    /* A refused envelope leaves the view as it was (not even counted). */
    json_t *after = session_view_to_json(&v);
    CHECK(json_equal(before, after));
    json_decref(after);

    /* Unknown types are ignored (forward compatibility), with or without payload. */
    CHECK_EQ_INT(reduce_at(&v, "future:thing", "{\"x\": 1}", NULL), 0);
    CHECK_EQ_INT(reduce_at(&v, "session:created-v2", NULL, NULL), 0);
    CHECK_EQ_INT(reduce_at(&v, "", "{}", NULL), 0);
    after = session_view_to_json(&v);
    json_object_del(after, "eventCount");
    json_object_del(before, "eventCount");
    CHECK(json_equal(before, after));
    json_decref(after);
    json_decref(before);

    /* Known types with missing or ill-typed fields change nothing they cannot. */
    R(&v, "workflow:failed", NULL);   /* no payload: an empty one */
    CHECK_EQ_STR(status(&v), "failed");
    CHECK_EQ_STR(v.error, "");
    session_view_free(&v);

    workflow(&v);
    R(&v, "state:updated", "{\"set\": {\"feedback.x\": 1}}");        /* a string is in the way */
    R(&v, "state:updated", "{\"set\": {\"a..b\": 1, \"\": 2}}");     /* malformed paths */
    R(&v, "state:updated", "{\"set\": [1, 2], \"state\": \"no\"}");  /* wrong types */
    CHECK_JSON(v.state, "{\"feedback\": \"\"}");
    R(&v, "provider:request_ended", "{\"usage\": {\"inputTokens\": \"9\", \"outputTokens\": 1.5}, \"costUsd\": \"1\"}");
    CHECK_EQ_INT(v.input_tokens, 0);
    CHECK_EQ_INT(v.output_tokens, 0);
    CHECK(v.cost_usd == 0);
    R(&v, "provider:request_ended", "{\"usage\": 5}");
    CHECK_EQ_INT(v.input_tokens, 0);
    R(&v, "phase:entered", "{\"phase\": 5}");
    CHECK_EQ_STR(v.phase, "");
    R(&v, "text:delta", "{\"requestId\": 1, \"text\": [1]}");
    R(&v, "input:received", "{\"response\": 1}");   /* no interactionId */
    R(&v, "input:requested", "{}");
    R(&v, "message:user", "{\"content\": 5, \"mode\": 7}");
    /* A long phase name is cut, not overflowed. */
    char big[400];
    memset(big, 'p', 300);
    big[300] = '\0';
    char payload[512];
    snprintf(payload, sizeof payload, "{\"phase\": \"%s\"}", big);
    R(&v, "phase:entered", payload);
    CHECK_EQ_UINT(strlen(v.phase), sizeof v.phase - 1);
    json_t *j = session_view_to_json(&v);
    CHECK(j != NULL);
    json_decref(j);
    session_view_free(&v);

    /* session:created with an initialState that is not an object keeps {} */
    session_view_init(&v);
    R(&v, "session:created", "{\"workflow\": \"w\", \"initialState\": [1]}");
    CHECK_JSON(v.state, "{}");
    CHECK(v.input == NULL);
    session_view_free(&v);
}

/* ---- (de)serialisation --------------------------------------------------------------------- */

/* v as JSON text (to compare views at different moments; the caller frees it). */
static char *view_text(const session_view *v)
{
    json_t *j = session_view_to_json(v);
    char *t = json_dumps(j, JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(j);
    return t;
}

static void test_view_json(void)
{
    session_view v, w;
    chat(&v);
    R(&v, "message:user", "{\"content\": \"one\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    R(&v, "text:delta", "{\"requestId\": \"r1\", \"text\": \"x\"}");
    R(&v, "message:user", "{\"content\": \"two\", \"mode\": \"queue\"}");
    R(&v, "message:user", "{\"content\": \"three\", \"mode\": \"interrupt\"}");
    R(&v, "provider:request_cancelled", "{\"requestId\": \"r0\", \"reason\": \"restart\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    R(&v, "cancel:requested", "{}");
    R(&v, "input:received", "{\"interactionId\": \"h1\", \"response\": {\"k\": [1, 2]}}");
    R(&v, "provider:request_ended", "{\"requestId\": \"r1\", \"usage\": {\"inputTokens\": 3, \"outputTokens\": 4}, \"costUsd\": 0.1}");
    R(&v, "provider:request_started", "{\"requestId\": \"r2\"}");
    json_t *j = session_view_to_json(&v);
    session_view_init(&w);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);
    json_t *k = session_view_to_json(&w);
    CHECK(json_equal(j, k));
    CHECK_EQ_INT(w.status, v.status);
    CHECK_EQ_STR(w.request, "r2");
    CHECK_EQ_INT(w.cancel_requested, 1);
    CHECK_EQ_INT(w.input_tokens, 3);
    CHECK(w.cost_usd == v.cost_usd);
    CHECK_EQ_UINT(w.events, v.events);
    CHECK_EQ_INT(session_view_needs_reply(&w), session_view_needs_reply(&v));
    CHECK_EQ_INT(session_view_interrupted(&w), session_view_interrupted(&v));
    /* The copy is independent of the JSON it came from. */
    json_decref(j);
    json_decref(k);
    R(&w, "text:delta", "{\"requestId\": \"r2\", \"text\": \"y\"}");
    session_view_free(&w);
    session_view_free(&v);

    /* A workflow view with a pending input, a phase, an error. */
    workflow(&v);
    R(&v, "workflow:started", "{}");
    R(&v, "phase:entered", "{\"phase\": \"approve\"}");
    R(&v, "step:started", "{\"phase\": \"approve\", \"step\": 0}");
    R(&v, "state:updated", "{\"set\": {\"review.score\": 8.5}}");
    R(&v, "input:requested", "{\"interactionId\": \"ok\", \"input\": \"choice\", \"options\": [\"a\", \"b\"]}");
    j = session_view_to_json(&v);
    CHECK_EQ_STR(json_string_value(json_object_get(j, "status")), "awaiting_input");
    CHECK_EQ_STR(json_string_value(json_object_get(j, "phase")), "approve");
    CHECK_JSON(json_object_get(j, "state"), "{\"feedback\": \"\", \"review\": {\"score\": 8.5}}");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(j, "pendingInput"), "interactionId")), "ok");
    session_view_init(&w);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);
    k = session_view_to_json(&w);
    CHECK(json_equal(j, k));
    CHECK_JSON(w.input, "{\"topic\": \"WAL\"}");
    CHECK(w.is_workflow);
    CHECK_EQ_INT(w.step_open, 1);
    workflow_pos p1, p2;
    session_view_pos(&v, &p1);
    session_view_pos(&w, &p2);
    CHECK_EQ_STR(p2.phase, "approve");
    CHECK_EQ_INT(p1.started, p2.started);
    CHECK_EQ_INT(p1.step, p2.step);
    CHECK_EQ_INT(p1.step_open, p2.step_open);
    CHECK_EQ_INT(p2.finished, 0);
    json_decref(j);
    json_decref(k);
    session_view_free(&w);
    /* A finished, failed view keeps its error through a round trip. */
    R(&v, "workflow:failed", "{\"error\": \"boom\"}");
    j = session_view_to_json(&v);
    session_view_init(&w);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);
    CHECK_EQ_STR(w.error, "boom");
    CHECK(session_view_finished(&w));
    session_view_pos(&w, &p2);
    CHECK_EQ_INT(p2.finished, 1);
    json_decref(j);
    session_view_free(&w);
    session_view_free(&v);

    /* Malformed snapshots are refused and leave the view empty. */
    static const char *const bad[] = {
        "[]",
        "{}",
        "{\"status\": \"sleeping\", \"state\": {}, \"messages\": []}",
        "{\"status\": \"running\", \"state\": [], \"messages\": []}",
        "{\"status\": \"running\", \"messages\": []}",
        "{\"status\": \"running\", \"state\": {}, \"messages\": {}}",
        "{\"status\": 1, \"state\": {}, \"messages\": []}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *b = json_loads(bad[i], JSON_DECODE_ANY, NULL);
        session_view_init(&w);
        if (!CHECK_EQ_INT(session_view_from_json(&w, b), -1)) fprintf(stderr, "  snapshot %s\n", bad[i]);
        CHECK_EQ_STR(status(&w), "pending");
        CHECK_EQ_UINT(json_array_size(w.messages), 0);
        CHECK_EQ_UINT(json_object_size(w.state), 0);
        session_view_free(&w);
        json_decref(b);
    }
}

/* session_view_copy (the runner decides on a copy of the view it keeps across its
 * commits): the same view, sharing nothing, so that what either is folded into
 * leaves the other as it was. */
static void test_view_copy(void)
{
    session_view v, w;
    chat(&v);
    R(&v, "message:user", "{\"content\": \"one\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    R(&v, "text:delta", "{\"requestId\": \"r1\", \"text\": \"ab\"}");
    R(&v, "message:user", "{\"content\": \"two\", \"mode\": \"queue\"}");
    R(&v, "input:received", "{\"interactionId\": \"h1\", \"response\": {\"k\": [1, 2]}}");
    session_view_init(&w);
    CHECK_EQ_INT(session_view_copy(&w, &v), 0);
    char *was = view_text(&v), *copy = view_text(&w);
    CHECK_EQ_STR(copy, was);
    CHECK_EQ_UINT(w.events, v.events);
    CHECK_EQ_STR(w.request, "r1");
    CHECK(w.messages != v.messages && w.early != v.early && w.created != v.created && w.queued != v.queued);
    /* A delta into the original (the runner's next commit) leaves the copy as it was. */
    R(&v, "text:delta", "{\"requestId\": \"r1\", \"text\": \"cd\"}");
    char *now = view_text(&v), *copy2 = view_text(&w);
    CHECK(strcmp(now, was) != 0);
    CHECK_EQ_STR(copy2, was);
    /* ... and what is done to the copy leaves the original. */
    R(&w, "provider:request_ended", "{\"requestId\": \"r1\", \"usage\": {\"inputTokens\": 3, \"outputTokens\": 4}}");
    json_array_clear(w.messages);
    char *now2 = view_text(&v);
    CHECK_EQ_STR(now2, now);
    free(was);
    free(copy);
    free(now);
    free(copy2);
    free(now2);
    session_view_free(&w);
    session_view_free(&v);
}

/* ---- statuses, catalogue ------------------------------------------------------------------------ */

static void test_names(void)
{
    static const char *const names[] = {"pending", "running", "awaiting_input",
                                        "completed", "failed", "cancelled"};
    for (int i = 0; i < 6; i++) {
        CHECK_EQ_STR(session_status_name((session_status)i), names[i]);
        CHECK_EQ_INT(session_status_parse(names[i]), i);
    }
    CHECK_EQ_INT(session_status_parse("done"), -1);
    CHECK_EQ_INT(session_status_parse(""), -1);
    CHECK_EQ_INT(session_status_parse("Pending"), -1);
    CHECK(session_known_type("text:delta"));
    CHECK(!session_known_type("text:deltas"));
    CHECK(!session_known_type(""));
}

/* The catalogue table of docs/events.md names exactly session_event_types. */
static void test_doc_catalogue(void)
{
    char *md = read_doc("docs/events.md");
    if (!CHECK(md != NULL)) return;
    const char *p = strstr(md, "## Catalogue");
    const char *end = p ? strstr(p, "\n## ") : NULL;
    if (!CHECK(p != NULL)) {
        free(md);
        return;
    }
    int documented = 0;
    while ((p = strstr(p, "\n| `")) && (!end || p < end)) {
        p += 4;
        const char *q = strchr(p, '`');
        if (!q) break;
        char type[64];
        snprintf(type, sizeof type, "%.*s", (int)(q - p), p);
        if (!session_known_type(type)) {
            CHECK(!"docs/events.md documents a type the code does not know");
            fprintf(stderr, "  type %s\n", type);
        }
        documented++;
    }
    int known = 0;
    while (session_event_types[known]) known++;
    CHECK_EQ_INT(documented, known);
    free(md);
}

/* The example envelope of docs/events.md is a valid event the reducer applies. */
static void test_doc_example(void)
{
    char *md = read_doc("docs/events.md");
    if (!CHECK(md != NULL)) return;
    char *block = first_json_block(md);
    free(md);
    if (!CHECK(block != NULL)) return;
    json_error_t e;
    json_t *ev = json_loads(block, 0, &e);
    if (!CHECK(ev != NULL)) {
        fprintf(stderr, "  docs/events.md example: %s\n", e.text);
        free(block);
        return;
    }
    CHECK(session_known_type(json_string_value(json_object_get(ev, "type"))));
    CHECK(json_is_object(json_object_get(ev, "payload")));
    /* Its fields are the documented ones, and its trace and offset are well formed. */
    static const char *const fields[] = {"offset", "type", "payload", "createdAt", "actor",
                                         "causedBy", "trace"};
    CHECK_EQ_UINT(json_object_size(ev), sizeof fields / sizeof fields[0]);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) CHECK(json_object_get(ev, fields[i]));
    const char *off = json_string_value(json_object_get(ev, "offset"));
    offset_kind k;
    offset_t o;
    CHECK(off && offset_parse(off, strlen(off), &k, &o) == 0 && k == OFFSET_AT);
    json_t *tr = json_object_get(ev, "trace");
    const char *tid = json_string_value(json_object_get(tr, "traceId"));
    const char *sid = json_string_value(json_object_get(tr, "spanId"));
    const char *pid = json_string_value(json_object_get(tr, "parentSpanId"));
    CHECK(tid && strlen(tid) == 32);
    CHECK(sid && strlen(sid) == 16);
    CHECK(pid && strlen(pid) == 16);

    session_view v;
    chat(&v);
    R(&v, "message:user", "{\"content\": \"Hi\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    CHECK_EQ_INT(session_reduce(&v, ev, off), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.messages, 1), "content")), "Hel");
    session_view_free(&v);
    json_decref(ev);
    free(block);
}

/* ---- trace context ------------------------------------------------------------------------------ */

static int all_hex(const char *s, size_t n)
{
    if (strlen(s) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static int cmp_id(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void test_trace(void)
{
    session_trace t, c;
    const char *good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    CHECK_EQ_INT(session_trace_from_header(good, &t), 0);
    CHECK_EQ_STR(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK_EQ_STR(t.parent_span_id, "00f067aa0ba902b7");
    CHECK(all_hex(t.span_id, 16));
    CHECK(strcmp(t.span_id, "00f067aa0ba902b7") != 0);
    CHECK_EQ_INT(session_trace_from_header("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &t), 0);

    static const char *const bad[] = {
        "",
        "00",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",      /* 54 bytes */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011",    /* 56 for version 00 */
        "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",     /* trace id 31 hex */
        "00-4bf92f3577b34da6a3ce929d0e0e47366-0f067aa0ba902b7-01",     /* trace id 33 hex */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-701",     /* span id 15 hex */
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",     /* separators */
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",     /* non-hex trace id */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",     /* non-hex span id */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",     /* upper case */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",     /* all-zero trace id */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",     /* all-zero span id */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",     /* version ff */
        "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",     /* non-hex version */
        "0z-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",     /* non-hex flags */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (!CHECK_EQ_INT(session_trace_from_header(bad[i], &t), -1))
            fprintf(stderr, "  accepted traceparent \"%s\"\n", bad[i]);
    }
    CHECK_EQ_INT(session_trace_from_header(NULL, &t), -1);

    session_trace_new(&t);
    CHECK(all_hex(t.trace_id, 32));
    CHECK(all_hex(t.span_id, 16));
    CHECK_EQ_STR(t.parent_span_id, "");
    session_trace t2;
    session_trace_new(&t2);
    CHECK(strcmp(t.trace_id, t2.trace_id) != 0);
    session_trace_child(&t, &c);
    CHECK_EQ_STR(c.trace_id, t.trace_id);
    CHECK_EQ_STR(c.parent_span_id, t.span_id);
    CHECK(all_hex(c.span_id, 16));
    CHECK(strcmp(c.span_id, t.span_id) != 0);

    /* Span ids from the pool of random bytes: 2,000 in a row (past several
     * refills) all differ, and a child forked now does not hand out the ids its
     * parent hands out next (its pool starts empty). */
    enum { NIDS = 2000 };
    static char ids[NIDS][17];
    for (int i = 0; i < NIDS; i++) {
        session_trace_child(&t, &c);
        memcpy(ids[i], c.span_id, 17);
    }
    qsort(ids, NIDS, sizeof ids[0], cmp_id);
    int dup = 0;
    for (int i = 1; i < NIDS; i++) dup += !strcmp(ids[i - 1], ids[i]);
    CHECK_EQ_INT(dup, 0);
    int fds[2];
    if (CHECK_EQ_INT(pipe(fds), 0)) {
        pid_t pid = fork();
        if (pid == 0) {
            session_trace_child(&t, &c);
            ssize_t w = write(fds[1], c.span_id, 17);
            _exit(w == 17 ? 0 : 1);
        }
        char theirs[17] = "";
        CHECK_EQ_INT((int)read(fds[0], theirs, 17), 17);
        waitpid(pid, NULL, 0);
        session_trace_child(&t, &c);
        CHECK(strcmp(theirs, c.span_id) != 0);
        CHECK(all_hex(theirs, 16));
        close(fds[0]);
        close(fds[1]);
    }
}

/* ---- envelopes -------------------------------------------------------------------------------- */

static void test_encode(void)
{
    session_trace t;
    CHECK_EQ_INT(session_trace_from_header("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &t), 0);
    buf_t b;
    buf_init(&b, 0);
    json_t *p = json_pack("{s:s, s:s}", "requestId", "r1", "text", "Hel");
    /* 2026-11-22T13:05:02.117Z */
    CHECK_EQ_INT(session_event_encode(&b, "text:delta", p, "runner", "0000000000000002_0000000000000590",
                                      &t, INT64_C(1795352702117)), 0);
    json_t *ev = json_loadb(b.p, b.len, 0, NULL);
    if (CHECK(ev != NULL)) {
        CHECK_EQ_STR(json_string_value(json_object_get(ev, "type")), "text:delta");
        CHECK(json_equal(json_object_get(ev, "payload"), p));
        CHECK_EQ_STR(json_string_value(json_object_get(ev, "actor")), "runner");
        CHECK_EQ_STR(json_string_value(json_object_get(ev, "causedBy")), "0000000000000002_0000000000000590");
        CHECK_EQ_STR(json_string_value(json_object_get(ev, "createdAt")), "2026-11-22T13:05:02.117Z");
        CHECK(json_object_get(ev, "offset") == NULL);   /* added when served */
        json_t *tr = json_object_get(ev, "trace");
        CHECK_EQ_STR(json_string_value(json_object_get(tr, "traceId")), t.trace_id);
        CHECK_EQ_STR(json_string_value(json_object_get(tr, "spanId")), t.span_id);
        CHECK_EQ_STR(json_string_value(json_object_get(tr, "parentSpanId")), "00f067aa0ba902b7");
        session_view v;
        chat(&v);
        R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
        CHECK_EQ_INT(session_reduce(&v, ev, NULL), 0);
        CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(v.messages, 0), "content")), "Hel");
        session_view_free(&v);
    }
    json_decref(ev);
    json_decref(p);
    buf_free(&b);

    /* No payload: {}; no cause: null; a root span: parentSpanId null. */
    buf_init(&b, 0);
    session_trace_new(&t);
    CHECK_EQ_INT(session_event_encode(&b, "cancel:requested", NULL, "user", NULL, &t, 0), 0);
    ev = json_loadb(b.p, b.len, 0, NULL);
    if (CHECK(ev != NULL)) {
        CHECK_JSON(json_object_get(ev, "payload"), "{}");
        CHECK(json_is_null(json_object_get(ev, "causedBy")));
        CHECK(json_is_null(json_object_get(json_object_get(ev, "trace"), "parentSpanId")));
        CHECK_EQ_STR(json_string_value(json_object_get(ev, "createdAt")), "1970-01-01T00:00:00.000Z");
    }
    json_decref(ev);
    buf_free(&b);
}

/* Tool calls: open until their result, dropped with a cut request, a long result
 * cut for the model with a marker, the tool loop's state kept by snapshots. */
static void test_tools(void)
{
    session_view v;
    session_view_init(&v);
    R(&v, "session:created", "{\"agent\": \"a\"}");
    R(&v, "message:user", "{\"content\": \"go\", \"mode\": \"interrupt\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    R(&v, "tool:called", "{\"requestId\": \"r1\", \"callId\": \"c1\", \"name\": \"fs__read\", \"arguments\": {}, \"sideEffecting\": false}");
    R(&v, "tool:called", "{\"requestId\": \"r1\", \"callId\": \"c2\", \"name\": \"fs__write\", \"arguments\": {}, \"sideEffecting\": true}");
    CHECK_EQ_UINT(json_array_size(v.open_calls), 2);
    CHECK(!session_view_tools_answered(&v));
    R(&v, "provider:request_ended", "{\"requestId\": \"r1\", \"stopReason\": \"tool_use\"}");
    CHECK_EQ_STR(status(&v), "running");
    CHECK(!session_view_tools_answered(&v));    /* results still missing */
    CHECK(session_view_open_call(&v, "c2") != NULL);
    CHECK(session_view_open_call(&v, "c9") == NULL);
    /* A long result: whole in the event, cut in the history. */
    size_t big = SESSION_TOOL_RESULT_MAX + 1000;
    char *text = malloc(big + 1);
    memset(text, 'x', big);
    text[big] = '\0';
    text[SESSION_TOOL_RESULT_MAX - 1] = '\xc3';    /* a 2-byte character across the cut */
    text[SESSION_TOOL_RESULT_MAX] = '\xa9';
    json_t *p = json_pack("{s:s, s:s, s:b}", "callId", "c1", "result", text, "isError", 0);
    json_t *ev = json_pack("{s:s, s:o}", "type", "tool:result", "payload", p);
    CHECK_EQ_INT(session_reduce(&v, ev, NULL), 0);
    json_decref(ev);
    free(text);
    const char *shown = json_string_value(json_object_get(json_array_get(v.messages, 2), "content"));
    CHECK(shown && strlen(shown) < SESSION_TOOL_RESULT_MAX + 200);
    CHECK(shown && strstr(shown, "[truncated: 32767 of 33768 bytes shown") != NULL);
    CHECK(!session_view_tools_answered(&v));
    R(&v, "tool:result", "{\"callId\": \"c2\", \"result\": {\"ok\": true}, \"isError\": false}");
    CHECK(session_view_tools_answered(&v));
    CHECK(!session_view_needs_reply(&v));
    /* Snapshots keep the loop's state. */
    json_t *j = session_view_to_json(&v);
    session_view w;
    session_view_init(&w);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);
    CHECK(session_view_tools_answered(&w));
    CHECK_EQ_INT(w.tool_turns, 1);
    session_view_free(&w);
    /* The next turn failing before it started (a playback miss): the reply is over,
     * no turn is due any more (the runner started it again and again), and the next
     * message is a new reply. */
    session_view_init(&w);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);
    R(&w, "reply:failed", "{\"error\": \"playback: no recording\", \"reason\": \"playback_miss\"}");
    CHECK_EQ_STR(status(&w), "failed");
    CHECK(!session_view_tools_answered(&w));
    CHECK(!session_view_needs_reply(&w));
    CHECK_EQ_INT(w.tool_wait, 0);
    R(&w, "message:user", "{\"content\": \"again\", \"mode\": \"interrupt\"}");
    CHECK(session_view_needs_reply(&w));
    CHECK(!session_view_tools_answered(&w));
    session_view_free(&w);
    /* A view folded by an earlier version (the wait left set after the failure). */
    session_view_init(&w);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);
    R(&w, "reply:failed", "{\"error\": \"x\"}");
    w.tool_wait = 1;
    CHECK(!session_view_tools_answered(&w));
    session_view_free(&w);
    json_decref(j);
    /* The next turn continues the reply: its turns add up, a retry of it too. */
    R(&v, "provider:request_started", "{\"requestId\": \"r1b\"}");
    R(&v, "provider:request_retried", "{\"requestId\": \"r1b\", \"attempt\": 2, \"reason\": \"failed\", \"retryAt\": 5}");
    CHECK_EQ_INT(v.tool_turns, 1);
    R(&v, "provider:request_started", "{\"requestId\": \"r2\"}");
    CHECK_EQ_INT(v.tool_turns, 1);
    CHECK(!session_view_tools_answered(&v));
    R(&v, "tool:called", "{\"requestId\": \"r2\", \"callId\": \"c3\", \"name\": \"fs__read\", \"arguments\": {}}");
    /* Cut off (interrupted): its call will never have a result. */
    R(&v, "provider:request_cancelled", "{\"requestId\": \"r2\", \"reason\": \"interrupted\"}");
    CHECK_EQ_UINT(json_array_size(v.open_calls), 0);
    CHECK(!session_view_tools_answered(&v));
    CHECK_EQ_INT(v.tool_turns, 1);
    session_view_free(&v);
}

/* Model text holding NULs (JSON's \u0000) is text: the reply's content keeps every
 * byte, folded from the stored event (sstore_fold) as from a value, and the view
 * survives a snapshot's round trip. */
static void test_text_nul(void)
{
    session_view v;
    chat(&v);
    R(&v, "message:user", "{\"content\": \"Hi\", \"mode\": \"interrupt\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\", \"provider\": \"openai\", \"model\": \"m\", \"attempt\": 1}");
    /* The first piece as the runner writes it, the second as a value. */
    json_t *p = json_pack("{s:s, s:o}", "requestId", "r1", "text", json_stringn("\0a\0", 3));
    buf_t b;
    session_trace tr;
    session_trace_new(&tr);
    buf_init(&b, 0);
    CHECK_EQ_INT(session_event_encode(&b, "text:delta", p, "runner", NULL, &tr, 1), 0);
    json_decref(p);
    CHECK(b.p && strstr(b.p, "\\u0000a\\u0000") != NULL);
    offset_t at = {next_seq, next_seq * 100};
    next_seq++;
    CHECK_EQ_INT(sstore_fold(&v, b.p, b.len, at), 0);
    buf_free(&b);
    json_t *ev = json_pack("{s:s, s:{s:s, s:o}}", "type", "thinking:delta", "payload", "requestId", "r1", "text",
                           json_stringn("t\0", 2));
    CHECK_EQ_INT(session_reduce(&v, ev, "0000000000000009_0000000000000900"), 0);
    json_object_set_new(json_object_get(ev, "payload"), "text", json_stringn("b\0", 2));
    json_object_set_new(ev, "type", json_string("text:delta"));
    CHECK_EQ_INT(session_reduce(&v, ev, "0000000000000010_0000000000001000"), 0);
    json_decref(ev);
    json_t *a = json_array_get(v.messages, 1);
    json_t *c = json_object_get(a, "content");
    if (CHECK_EQ_UINT(json_string_length(c), 5)) CHECK(memcmp(json_string_value(c), "\0a\0b\0", 5) == 0);
    CHECK_EQ_UINT(json_string_length(json_object_get(a, "thinking")), 2);

    /* A snapshot of it loads back equal (sstore saves and loads views as JSON text). */
    json_t *j = session_view_to_json(&v);
    char *text = json_dumps(j, JSON_COMPACT);
    session_view w;
    session_view_init(&w);
    CHECK_EQ_INT(sstore_snapshot_load(&w, text), 0);
    json_t *k = session_view_to_json(&w);
    CHECK(json_equal(j, k));
    json_decref(k);
    json_decref(j);
    free(text);
    session_view_free(&w);

    /* A tool result is matched to its call by the whole id. */
    R(&v, "tool:called", "{\"requestId\": \"r1\", \"callId\": \"c1\", \"name\": \"n\", \"arguments\": {}}");
    ev = json_pack("{s:s, s:{s:o, s:s}}", "type", "tool:result", "payload", "callId", json_stringn("c1\0x", 4), "result", "r");
    CHECK_EQ_INT(session_reduce(&v, ev, "0000000000000020_0000000000002000"), 0);
    json_decref(ev);
    CHECK_EQ_UINT(json_array_size(v.open_calls), 1);
    session_view_free(&v);
}

/* Cost apart: what a request answered from a recording cost is recorded, not spent;
 * what came before a fork point is inherited; a snapshot keeps both; a fork of a fork
 * inherits everything before its own fork point. A fork's recording{} names only
 * what it changes: the rest (timing, here) stays its source's. */
static void test_cost(void)
{
    session_view v;
    session_view_init(&v);
    R(&v, "session:created", "{\"agent\": \"a\", \"recording\": {\"mode\": \"record\", \"timing\": \"realtime\", \"scope\": \"all\"}}");
    R(&v, "recording:request", "{\"requestId\": \"r1\", \"key\": \"k\", \"outcome\": \"recorded\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r1\"}");
    R(&v, "provider:request_ended", "{\"requestId\": \"r1\", \"costUsd\": 0.5}");
    R(&v, "recording:request", "{\"requestId\": \"r2\", \"key\": \"k\", \"outcome\": \"hit\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"r2\"}");
    R(&v, "provider:request_ended", "{\"requestId\": \"r2\", \"costUsd\": 0.25}");
    CHECK(v.cost_usd == 0.75 && v.cost_recorded_usd == 0.25 && v.cost_inherited_usd == 0);
    CHECK(session_cost_spent(&v) == 0.5);
    /* A hit that did not end (cut off), then a live request: that one is spent. */
    R(&v, "recording:request", "{\"requestId\": \"r3\", \"key\": \"k\", \"outcome\": \"hit\"}");
    R(&v, "recording:request", "{\"requestId\": \"r4\", \"key\": \"k\", \"outcome\": \"miss\"}");
    R(&v, "provider:request_ended", "{\"requestId\": \"r4\", \"costUsd\": 1}");
    CHECK(session_cost_spent(&v) == 1.5 && v.cost_recorded_usd == 0.25);
    R(&v, "session:forked", "{\"from\": \"s\", \"at\": \"x\", \"recording\": {\"mode\": \"hybrid\", \"scope\": [\"t-\"]}}");
    CHECK(v.cost_inherited_usd == 1.75 && v.cost_recorded_usd == 0 && session_cost_spent(&v) == 0);
    json_t *rec = json_object_get(v.created, "recording");
    CHECK_EQ_STR(json_string_value(json_object_get(rec, "mode")), "hybrid");
    CHECK_EQ_STR(json_string_value(json_object_get(rec, "timing")), "realtime");
    CHECK(json_is_array(json_object_get(rec, "scope")));
    R(&v, "recording:request", "{\"requestId\": \"r5\", \"key\": \"k\", \"outcome\": \"hit\"}");
    json_t *j = session_view_to_json(&v);
    CHECK(json_real_value(json_object_get(json_object_get(j, "cost"), "inheritedUsd")) == 1.75);
    session_view w;
    session_view_init(&w);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);
    R(&w, "provider:request_ended", "{\"requestId\": \"r5\", \"costUsd\": 0.25}");
    CHECK(w.cost_inherited_usd == 1.75 && w.cost_recorded_usd == 0.25 && session_cost_spent(&w) == 0);
    R(&w, "provider:request_ended", "{\"requestId\": \"r6\", \"costUsd\": 2}");
    CHECK(session_cost_spent(&w) == 2);
    R(&w, "session:forked", "{\"from\": \"f\", \"at\": \"y\"}");
    CHECK(w.cost_inherited_usd == 4 && session_cost_spent(&w) == 0 && w.cost_recorded_usd == 0);
    json_decref(j);
    session_view_free(&w);
    session_view_free(&v);
}

/* A continued reply's text: the characters kept (code points, not bytes), and the
 * whitespace a continuation gives again left out for a reader that showed it. */
static void test_continued_text(void)
{
    const char *t = "Caf\xc3\xa9 au lait";
    CHECK_EQ_UINT(session_chars_prefix(t, strlen(t), 4), 5);
    CHECK_EQ_UINT(session_chars_prefix(t, strlen(t), 3), 3);
    CHECK_EQ_UINT(session_chars_prefix(t, strlen(t), 0), 0);
    CHECK_EQ_UINT(session_chars_prefix(t, strlen(t), 99), strlen(t));
    int skip = 1;
    CHECK_EQ_UINT(session_skip_ws(" mnop", 5, &skip), 1);
    CHECK_EQ_INT(skip, 0);
    skip = 2;
    CHECK_EQ_UINT(session_skip_ws("\n", 1, &skip), 1);     /* a delta of only whitespace: the next goes on */
    CHECK_EQ_INT(skip, 1);
    CHECK_EQ_UINT(session_skip_ws("\n\nx", 3, &skip), 1);
    CHECK_EQ_INT(skip, 0);
    skip = 1;
    CHECK_EQ_UINT(session_skip_ws("\xe3\x80\x80x", 4, &skip), 3);     /* U+3000, one character */
    CHECK_EQ_INT(skip, 0);
    skip = 1;
    CHECK_EQ_UINT(session_skip_ws("word", 4, &skip), 0);   /* no whitespace given again: nothing left out */
    CHECK_EQ_INT(skip, 0);
}

/* A retry's fork may name another agent (a chat's) or workflow version (a
 * workflow's): it replaces the created one, and only where it fits (an agent does not
 * turn a workflow into a chat, a version does not make a chat a workflow). */
static void test_fork_target(void)
{
    session_view v, w;
    session_view_init(&v);
    session_view_init(&w);
    R(&v, "session:created", "{\"agent\": \"a\", \"input\": {}}");
    R(&v, "session:forked", "{\"from\": \"s\", \"at\": \"x\", \"agent\": \"b\", \"version\": 4}");
    CHECK_EQ_STR(json_string_value(json_object_get(v.created, "agent")), "b");
    CHECK(json_object_get(v.created, "version") == NULL && !v.is_workflow);
    R(&w, "session:created", "{\"workflow\": \"wf\", \"version\": 2, \"input\": {}}");
    R(&w, "session:forked", "{\"from\": \"s\", \"at\": \"x\", \"version\": 3, \"agent\": \"b\"}");
    CHECK_EQ_INT(json_integer_value(json_object_get(w.created, "version")), 3);
    CHECK(json_object_get(w.created, "agent") == NULL && w.is_workflow);
    /* A plain fork keeps its source's. */
    R(&w, "session:forked", "{\"from\": \"f\", \"at\": \"y\"}");
    CHECK_EQ_INT(json_integer_value(json_object_get(w.created, "version")), 3);
    session_view_free(&v);
    session_view_free(&w);
}

/* Timers and signals: timer:set holds the open step's due time until it fires or the
 * step ends; signals are kept in order until a wait step's completion names one
 * (the first of that name goes); the branch lasts until a phase is entered; all of
 * it survives a snapshot. */
static void test_timers_signals(void)
{
    session_view v;
    workflow(&v);
    R(&v, "signal:received", "{\"name\": \"go\", \"payload\": 1}");
    R(&v, "workflow:started", "{}");
    R(&v, "phase:entered", "{\"phase\": \"draft\"}");
    R(&v, "step:started", "{\"phase\": \"draft\", \"step\": 0, \"kind\": \"sleep\"}");
    R(&v, "timer:set", "{\"phase\": \"draft\", \"step\": 0, \"dueAt\": 1234}");
    CHECK(v.timer_due == 1234);
    CHECK(v.waiting == NULL);
    R(&v, "signal:received", "{\"name\": \"stop\"}");
    R(&v, "signal:received", "{\"name\": \"go\", \"payload\": {\"n\": 2}}");
    R(&v, "timer:fired", "{\"phase\": \"draft\", \"step\": 0, \"dueAt\": 1234}");
    CHECK(v.timer_due == 0);
    R(&v, "step:completed", "{\"phase\": \"draft\", \"step\": 0}");
    CHECK_EQ_UINT(json_array_size(v.signals), 3);
    R(&v, "step:started", "{\"phase\": \"draft\", \"step\": 1, \"kind\": \"wait\", \"signals\": [\"go\"]}");
    R(&v, "timer:set", "{\"phase\": \"draft\", \"step\": 1, \"dueAt\": 99}");
    CHECK_JSON(v.waiting, "[\"go\"]");
    CHECK_EQ_STR(status(&v), "running");
    /* It waits for its timer, unless a kept signal is one it takes. */
    CHECK(session_view_waits_until(&v) == -1);      /* "go" (twice) is kept */
    json_t *kept = json_deep_copy(v.signals);
    json_array_clear(v.signals);
    CHECK(session_view_waits_until(&v) == 99);
    json_decref(v.waiting);
    v.waiting = json_pack("[s]", "other");
    v.timer_due = 0;
    CHECK(session_view_waits_until(&v) == 0);       /* only a signal ends it */
    json_array_append_new(v.signals, json_pack("{s:s}", "name", "other"));
    CHECK(session_view_waits_until(&v) == -1);
    json_array_clear(v.signals);
    v.cancel_requested = 1;
    CHECK(session_view_waits_until(&v) == -1);
    v.cancel_requested = 0;
    json_decref(v.waiting);
    v.waiting = json_pack("[s]", "go");
    v.timer_due = 99;
    json_decref(v.signals);
    v.signals = kept;
    json_t *j = session_view_to_json(&v);
    CHECK(json_integer_value(json_object_get(j, "timerAt")) == 99);
    CHECK_JSON(json_object_get(j, "waitingFor"), "[\"go\"]");
    session_view w;
    session_view_init(&w);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);
    CHECK(w.timer_due == 99);
    CHECK_JSON(w.waiting, "[\"go\"]");
    CHECK_JSON(w.signals, "[{\"name\": \"go\", \"payload\": 1, \"offset\": \"0000000000000001_0000000000000100\"},"
                          " {\"name\": \"stop\", \"payload\": null, \"offset\": \"0000000000000006_0000000000000600\"},"
                          " {\"name\": \"go\", \"payload\": {\"n\": 2}, \"offset\": \"0000000000000007_0000000000000700\"}]");
    json_decref(j);
    session_view_free(&w);
    R(&v, "step:completed", "{\"phase\": \"draft\", \"step\": 1, \"signal\": \"go\", \"to\": \"publish\"}");
    CHECK(v.timer_due == 0 && v.waiting == NULL);
    CHECK_JSON(v.signals, "[{\"name\": \"stop\", \"payload\": null, \"offset\": \"0000000000000006_0000000000000600\"},"
                          " {\"name\": \"go\", \"payload\": {\"n\": 2}, \"offset\": \"0000000000000007_0000000000000700\"}]");
    CHECK_EQ_STR(v.branch, "publish");
    j = session_view_to_json(&v);
    session_view_init(&w);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);
    CHECK_EQ_STR(w.branch, "publish");
    json_decref(j);
    session_view_free(&w);
    R(&v, "phase:exited", "{\"phase\": \"draft\", \"to\": \"publish\"}");
    R(&v, "phase:entered", "{\"phase\": \"publish\"}");
    CHECK_EQ_STR(v.branch, "");
    CHECK(session_view_waits_until(&v) == -1);      /* no step open */
    /* A timer:set outside an open step means nothing. */
    R(&v, "timer:set", "{\"dueAt\": 5}");
    CHECK(v.timer_due == 0);
    session_view_free(&v);
}

/* ---- envelopes without a tree ------------------------------------------------------------ */

static size_t jansson_allocs;
static void *count_malloc(size_t n)
{
    jansson_allocs++;
    return malloc(n);
}

/* session_event_encode against session_event_dump of session_event_build's tree:
 * the same bytes and the same result, whichever way it went. */
static void flat_same(const char *type, const json_t *payload, const char *actor, const char *caused_by,
                      const session_trace *t, int line)
{
    buf_t a, b;
    buf_init(&a, 0);
    buf_init(&b, 0);
    buf_puts(&a, "x");   /* appends to what is there */
    buf_puts(&b, "x");
    int ra = session_event_encode(&a, type, payload, actor, caused_by, t, 1732000000123);
    json_t *ev = session_event_build(type, payload, actor, caused_by, t, 1732000000123);
    int rb = session_event_dump(&b, ev);
    json_decref(ev);
    int ok = ra == rb && a.len == b.len && !memcmp(a.p, b.p, a.len);
    if (!ok) fprintf(stderr, "line %d: flat %d %.*s\n  tree %d %.*s\n", line, ra, (int)a.len, a.p, rb, (int)b.len, b.p);
    test_note(ok, __FILE__, line, "the flat envelope is the tree's");
    buf_free(&a);
    buf_free(&b);
}

static void test_encode_flat(void)
{
    session_trace t, root;
    session_trace_new(&root);
    session_trace_child(&root, &t);
    /* Every byte in a text delta (those that are no UTF-8 on their own: the tree
     * refuses them, and so does the flat path), NULs, quotes, 4-byte UTF-8. */
    for (int c = 0; c < 256; c++) {
        char s[8] = {'a', (char)c, '"', '\\', '/', 'z', 0, 0};
        json_t *p = json_pack("{s:s, s:o}", "requestId", "rq_1", "text", json_stringn_nocheck(s, 7));
        flat_same("text:delta", p, "runner", NULL, &t, __LINE__);
        json_decref(p);
    }
    static const char mixed[] = "\x01\x1f\x7f\b\f\n\r\t \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \xe2\x80\xa8 \0 end";
    json_t *p = json_pack("{s:s, s:s%}", "requestId", "rq_\"1\"", "text", mixed, sizeof mixed - 1);
    flat_same("text:delta", p, "runner", "0000000000000002_0000000000000590", &t, __LINE__);
    flat_same("thinking:delta", p, "us\ter", NULL, &root, __LINE__);
    flat_same("text:delta", p, NULL, NULL, &t, __LINE__);     /* no actor: the key is left out */
    flat_same(NULL, p, "runner", NULL, &t, __LINE__);
    flat_same("bad \xff type", p, "runner", NULL, &t, __LINE__);
    flat_same("text:delta", p, "bad \xc0\x80 actor", NULL, &t, __LINE__);
    flat_same("text:delta", p, "runner", "bad \xed\xa0\x80", &t, __LINE__);
    json_decref(p);
    /* Scalars of every kind, keys that need escapes, an empty and no payload. */
    p = json_pack("{s:I, s:I, s:b, s:b, s:n, s:s, s:i}", "big", (json_int_t)INT64_MAX, "neg", (json_int_t)INT64_MIN,
                  "t", 1, "f", 0, "z", "k\"\\\n", "", "zero", 0);
    flat_same("step:started", p, "runner", NULL, &t, __LINE__);
    json_decref(p);
    p = json_object();
    json_object_setn_new(p, "a\0b", 3, json_string("key with a NUL"));
    flat_same("x", p, "runner", NULL, &t, __LINE__);
    json_decref(p);
    p = json_object();
    flat_same("x", p, "runner", NULL, &t, __LINE__);
    flat_same("x", NULL, "runner", NULL, &t, __LINE__);
    json_decref(p);
    /* What takes the tree: nested values, a float, a payload that is no object. */
    p = json_pack("{s:s, s:{s:i}, s:[i], s:f}", "a", "b", "o", "k", 1, "arr", 2, "r", 0.1);
    flat_same("tool:called", p, "runner", NULL, &t, __LINE__);
    json_decref(p);
    p = json_string("not an object");
    flat_same("x", p, "runner", NULL, &t, __LINE__);
    json_decref(p);

    /* A text delta's envelope is written, and folded, without jansson allocating. */
    p = json_pack("{s:s, s:s}", "requestId", "rq_1", "text", "hello");
    session_view v;
    chat(&v);
    R(&v, "message:user", "{\"content\": \"Hi\", \"mode\": \"interrupt\"}");
    R(&v, "provider:request_started", "{\"requestId\": \"rq_1\", \"provider\": \"openai\", \"model\": \"m\", \"attempt\": 1}");
    buf_t b;
    buf_init(&b, 0);
    json_set_alloc_funcs(count_malloc, free);
    jansson_allocs = 0;
    CHECK_EQ_INT(session_event_encode(&b, "text:delta", p, "runner", NULL, &t, 1), 0);
    CHECK_EQ_INT(jansson_allocs, 0);
    json_set_alloc_funcs(malloc, free);
    CHECK_EQ_INT(session_reduce_payload(&v, "text:delta", p, "2"), 0);
    json_t *m = json_array_get(v.messages, json_array_size(v.messages) - 1);
    CHECK_EQ_STR(json_string_value(json_object_get(m, "content")), "hello");
    CHECK_EQ_INT(session_reduce_payload(&v, NULL, p, "3"), -1);
    json_t *arr = json_array();
    CHECK_EQ_INT(session_reduce_payload(&v, "text:delta", arr, "3"), -1);
    json_decref(arr);
    buf_free(&b);
    session_view_free(&v);
    json_decref(p);
}

int main(void)
{
    test_timers_signals();
    test_fork_target();
    test_cost();
    test_tools();
    test_workflow_lifecycle();
    test_early_answers();
    test_chat_messages();
    test_chat_modes();
    test_restarts();
    test_reply_failed();
    test_reply_stopped();
    test_chat_approvals();
    test_malformed();
    test_view_json();
    test_view_copy();
    test_names();
    test_doc_catalogue();
    test_doc_example();
    test_trace();
    test_encode();
    test_encode_flat();
    test_text_nul();
    test_continued_text();
    return TEST_MAIN_END();
}

/* Unit tests for lib/compact.c: the token estimate, the budget, the cut (never
 * between a tool call and its result; the earliest that keeps the rest within the
 * target, else the latest), the summarization request, the providers' overflow
 * errors; and the compaction's course through the reducer (lib/session) and the
 * runner's decisions (lib/rturn): the history a request is sent after a
 * compaction, an overflow's retry after one, a runner killed during the
 * summarization request, a view saved in a snapshot and loaded. */
#include "compact.h"

#include <string.h>

#include "event.h"
#include "offset.h"
#include "rturn.h"
#include "session.h"
#include "test.h"

static uint64_t next_seq = 1;

/* Fold e into v at the next offset, which goes into off (if not NULL). */
static void fold_at(session_view *v, sstore_event e, char *off)
{
    char o[OFFSET_LEN + 1];
    offset_t at = {next_seq, next_seq * 100};
    next_seq++;
    offset_format(at, o);
    if (off) memcpy(off, o, sizeof o);
    json_t *env = json_pack("{s:s, s:o}", "type", e.type, "payload", e.payload);
    if (!CHECK(env && session_reduce(v, env, o) == 0)) abort();
    json_decref(env);
}

static void fold(session_view *v, sstore_event e)
{
    fold_at(v, e, NULL);
}

static void say(session_view *v, const char *text, char *off)
{
    json_t *c = json_string(text);
    fold_at(v, event_message_user(c, "interrupt", NULL, NULL), off);
    json_decref(c);
}

/* A complete reply (request id) with text. */
static void reply(session_view *v, const char *id, const char *text)
{
    fold(v, event_request_started(id, "anthropic", "m", 1));
    fold(v, event_delta(0, id, text, strlen(text)));
    json_t *u = event_usage(1, 1);
    fold(v, event_request_ended(id, "end_turn", u, 0));
    json_decref(u);
}

static json_t *entry(const char *role, const char *content)
{
    return json_pack("{s:s, s:s}", "role", role, "content", content);
}

static void test_estimate(void)
{
    CHECK_EQ_INT(compact_tokens(0), 0);
    CHECK_EQ_INT(compact_tokens(1), 1);
    CHECK_EQ_INT(compact_tokens(4), 1);
    CHECK_EQ_INT(compact_tokens(5), 2);
    json_t *h = json_array();
    json_array_append_new(h, entry("user", "12345678"));                    /* 2 + 4 */
    json_t *a = entry("assistant", "");
    json_object_set_new(a, "toolCalls", json_pack("[{s:s, s:s, s:{s:i}}]", "callId", "c1", "name", "ab", "arguments",
                                                  "x", 1));    /* "ab" + {"x":1}: 9 bytes, 3 */
    json_array_append_new(h, a);                                            /* 0 + 4 + 3 */
    json_t *t = entry("tool", "ok");
    json_object_set_new(t, "callId", json_string("c1"));
    json_array_append_new(h, t);                                            /* 1 + 4 */
    CHECK_EQ_INT(compact_estimate_messages(h), 6 + 7 + 5);
    /* Superseded, compacted and failed entries are not sent: not counted. */
    json_t *x = entry("user", "1234");
    json_object_set_new(x, "superseded", json_true());
    json_array_append_new(h, x);
    x = entry("assistant", "1234");
    json_object_set_new(x, "reason", json_string("failed"));
    json_array_append_new(h, x);
    CHECK_EQ_INT(compact_estimate_messages(h), 18);
    json_decref(h);
    json_t *ag = json_pack("{s:s, s:[{s:s}]}", "system", "12345678", "tools", "name", "t");  /* 2 + [{"name":"t"}] 4 */
    CHECK_EQ_INT(compact_estimate_agent(ag, NULL), 6);
    CHECK(compact_estimate_agent(ag, "12345678") > 6 + 2);      /* the summary and its heading */
    json_decref(ag);
}

static void test_budget(void)
{
    json_t *a = json_pack("{s:{s:i}}", "limits", "contextTokens", 1000);
    CHECK_EQ_INT(compact_budget(a, 0), 1000);
    CHECK_EQ_INT(compact_budget(a, 200000), 1000);     /* the smaller */
    json_decref(a);
    a = json_pack("{s:{s:i}}", "parameters", "max_tokens", 1000);
    CHECK_EQ_INT(compact_budget(a, 5000), 4000);        /* the window less the reply's room */
    CHECK_EQ_INT(compact_budget(a, 1500), 750);         /* ... never below half of it */
    json_decref(a);
    a = json_object();
    CHECK_EQ_INT(compact_budget(a, 0), 0);
    CHECK_EQ_INT(compact_budget(a, 10000), 10000 - COMPACT_OUTPUT_RESERVE);
    json_decref(a);
}

/* A chat of three exchanges, the second with a tool call; user messages at offsets. */
static void three_exchanges(session_view *v, char off[3][OFFSET_LEN + 1])
{
    session_view_init(v);
    fold(v, event_session_created("a", NULL, 0, NULL, NULL, NULL));
    say(v, "first question, rather long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", off[0]);
    reply(v, "r1", "first answer bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
    say(v, "second question", off[1]);
    fold(v, event_request_started("r2", "anthropic", "m", 1));
    json_t *args = json_pack("{s:i}", "n", 1);
    fold(v, event_tool_called("c1", "count", args, "s", "count", 0, "r2", NULL, 0));
    json_decref(args);
    json_t *u = event_usage(1, 1);
    fold(v, event_request_ended("r2", "tool_use", u, 0));
    json_t *res = json_string("42");
    fold(v, event_tool_result("c1", res, 0, 0, 3));
    json_decref(res);
    fold(v, event_request_started("r3", "anthropic", "m", 1));
    fold(v, event_delta(0, "r3", "it is 42", 8));
    fold(v, event_request_ended("r3", "end_turn", u, 0));
    json_decref(u);
    say(v, "third question", off[2]);
}

static void test_cut(void)
{
    session_view v;
    char off[3][OFFSET_LEN + 1];
    three_exchanges(&v, off);
    /* messages: u0 a1 u2 a3(call) t4 a5 u6 */
    CHECK_EQ_INT(json_array_size(v.messages), 7);
    /* keep <= 0: the latest cut, the last user message. */
    CHECK_EQ_INT(compact_cut(v.messages, 0), 6);
    /* A target the last two exchanges fit: the earliest that fits. */
    CHECK_EQ_INT(compact_cut(v.messages, 1000), 2);
    /* A target nothing fits: the latest. */
    CHECK_EQ_INT(compact_cut(v.messages, 1), 6);
    /* Never between the call (3) and its result (4): a user message there (a
     * background one) is no cut. */
    json_t *bg = json_pack("{s:s, s:s, s:s, s:b}", "role", "user", "content", "meanwhile", "offset", "x", "background", 1);
    json_array_insert_new(v.messages, 4, bg);
    CHECK_EQ_INT(compact_cut(v.messages, 0), 7);
    for (ssize_t k = 1; k < 8; k++)
        if (k != 2 && k != 7) CHECK(compact_cut(v.messages, 1) != k);
    json_array_remove(v.messages, 4);
    /* The summarization request: the transcript before the cut, the instruction. */
    json_t *m = compact_request_messages(v.messages, 6, "an earlier summary", 0);
    const char *t = json_string_value(json_object_get(json_array_get(m, 0), "content"));
    CHECK_EQ_INT(json_array_size(m), 1);
    CHECK(t && strstr(t, "an earlier summary") && strstr(t, "User: first question") &&
          strstr(t, "Assistant called the tool count with {\"n\":1}") && strstr(t, "Tool result: 42") &&
          strstr(t, "Assistant: it is 42") && !strstr(t, "third question") && strstr(t, "Summarize"));
    json_decref(m);
    session_view_free(&v);
    /* One exchange: nothing to compact. */
    session_view_init(&v);
    fold(&v, event_session_created("a", NULL, 0, NULL, NULL, NULL));
    say(&v, "only", NULL);
    reply(&v, "r1", "answer");
    CHECK_EQ_INT(compact_cut(v.messages, 0), -1);
    session_view_free(&v);
}

static void test_overflow(void)
{
    char msg[128];
    const char *ant = "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
                      "\"message\":\"prompt is too long: 210000 tokens > 200000 maximum\"}}";
    const char *oai = "{\"error\":{\"message\":\"This model's maximum context length is 8192 tokens.\","
                      "\"type\":\"invalid_request_error\",\"param\":\"messages\",\"code\":\"context_length_exceeded\"}}";
    const char *other = "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}";
    CHECK(compact_overflow(400, ant, strlen(ant), msg, sizeof msg));
    CHECK_EQ_STR(msg, "prompt is too long: 210000 tokens > 200000 maximum");
    CHECK(compact_overflow(400, oai, strlen(oai), msg, sizeof msg));
    CHECK(!compact_overflow(400, other, strlen(other), msg, sizeof msg));
    CHECK(!compact_overflow(413, ant, strlen(ant), msg, sizeof msg));
    CHECK(!compact_overflow(400, "not json", 8, msg, sizeof msg));
    CHECK(!compact_overflow(400, NULL, 0, msg, sizeof msg));
    /* The window the message names. */
    CHECK_EQ_INT(compact_overflow_window("prompt is too long: 210000 tokens > 200000 maximum"), 200000);
    CHECK_EQ_INT(compact_overflow_window("This model's maximum context length is 8192 tokens. However, ..."), 8192);
    CHECK_EQ_INT(compact_overflow_window("prompt is too long"), 0);
    CHECK_EQ_INT(compact_overflow_window("x > y maximum"), 0);
    CHECK_EQ_INT(compact_overflow_window("maximum context length is 99999999999999999999 tokens"), 0);
    CHECK_EQ_INT(compact_overflow_window(NULL), 0);
}

/* A transcript over max_bytes keeps its latest messages and says how many it left out. */
static void test_transcript_cap(void)
{
    session_view v;
    char off[3][OFFSET_LEN + 1];
    three_exchanges(&v, off);
    json_t *m = compact_request_messages(v.messages, 6, NULL, 120);
    const char *t = json_string_value(json_object_get(json_array_get(m, 0), "content"));
    CHECK(t && !strstr(t, "first question") && !strstr(t, "first answer") && strstr(t, "it is 42") &&
          strstr(t, "[its 2 earliest messages are left out") && strstr(t, "Summarize"));
    json_decref(m);
    m = compact_request_messages(v.messages, 6, NULL, 100000);
    t = json_string_value(json_object_get(json_array_get(m, 0), "content"));
    CHECK(t && strstr(t, "first question") && !strstr(t, "left out"));
    json_decref(m);
    session_view_free(&v);
}

/* A budget compaction's course: the summarization request is no reply (nothing
 * joins the history, a message that came before it is not taken for an interrupt),
 * then session:compacted marks the older messages, the history sent leaves them
 * out, and the reply that was due starts. */
static void test_reducer_budget(void)
{
    session_view v;
    char off[3][OFFSET_LEN + 1];
    three_exchanges(&v, off);
    CHECK_EQ_INT(rturn_chat(&v, 0, 1000), RTURN_NEEDS_AGENT);
    fold(&v, event_compaction(event_request_started("k1", "anthropic", "m", 1), "budget"));
    CHECK_EQ_STR(v.compact_reason, "budget");
    CHECK_EQ_STR(v.request, "k1");
    CHECK_EQ_INT(json_array_size(v.messages), 7);
    CHECK(!session_view_interrupted(&v));
    CHECK_EQ_INT(rturn_chat(&v, 1, 1000), RTURN_IN_FLIGHT);
    json_t *u = event_usage(100, 20);
    fold(&v, event_compaction(event_request_ended("k1", "end_turn", u, 0.5), NULL));
    json_decref(u);
    fold(&v, event_session_compacted("k1", off[1], "S", 1, 900, 300, "budget", NULL));
    CHECK(!v.compact_reason[0] && !v.compact_started);
    CHECK_EQ_INT(v.compacted_turn, COMPACT_DONE_BUDGET);
    CHECK_EQ_INT(v.input_tokens, 3 + 100);  /* its usage and cost count */
    CHECK(v.cost_usd > 0.49);
    CHECK_EQ_STR(json_string_value(v.summary), "S");
    CHECK(json_is_true(json_object_get(json_array_get(v.messages, 1), "compacted")));
    CHECK(!json_object_get(json_array_get(v.messages, 2), "compacted"));
    json_t *h = rturn_history(&v);
    CHECK_EQ_INT(json_array_size(h), 5);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(h, 0), "content")), "second question");
    json_decref(h);
    /* The reply due is started; its counters are the reply's. */
    CHECK(session_view_needs_reply(&v));
    CHECK_EQ_INT(v.attempts, 0);
    /* Saved and loaded (a snapshot), the view is the same. */
    json_t *j = session_view_to_json(&v);
    session_view w;
    session_view_init(&w);
    CHECK(session_view_from_json(&w, j) == 0);
    json_t *j2 = session_view_to_json(&w);
    CHECK(json_equal(j, j2));
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(j, "compacted"), "upTo")), off[1]);
    json_decref(j);
    json_decref(j2);
    session_view_free(&w);
    /* The next user message starts a request afresh: another budget compaction may come. */
    reply(&v, "r4", "third answer");
    CHECK_EQ_INT(v.compacted_turn, 0);
    session_view_free(&v);
    /* A view that never compacted has none of the keys (snapshots of before stay equal). */
    session_view_init(&v);
    fold(&v, event_session_created("a", NULL, 0, NULL, NULL, NULL));
    j = session_view_to_json(&v);
    CHECK(!json_object_get(j, "compacted") && !json_object_get(j, "compaction") && !json_object_get(j, "compactedTurn") &&
          !json_object_get(j, "compactRequested"));
    json_decref(j);
    session_view_free(&v);
}

/* An overflow: the reply's attempt is retried with cause context_overflow, which
 * makes a compaction due before the retry; a runner killed during the
 * summarization request leaves it in flight (cut and retried on the restart budget
 * of the compaction's own counters); session:compacted gives the reply its
 * counters back, its retry due, and marks that it was compacted after an overflow. */
static void test_reducer_overflow(void)
{
    session_view v;
    char off[3][OFFSET_LEN + 1];
    three_exchanges(&v, off);
    fold(&v, event_request_started("r4", "anthropic", "m", 1));
    fold(&v, event_context_window(event_request_retried("r4", 2, "failed", "context_overflow", 400, "prompt is too long",
                                                        0, 5000), 200000));
    CHECK_EQ_STR(v.compact_reason, "overflow");
    CHECK_EQ_INT(v.compact_window, 200000);
    CHECK_EQ_INT(v.failures, 1);
    CHECK_EQ_INT(rturn_chat(&v, 0, 5000), RTURN_NEEDS_AGENT);
    fold(&v, event_compaction(event_request_started("k1", "anthropic", "m", 1), "overflow"));
    CHECK_EQ_INT(v.attempts, 1);
    CHECK_EQ_INT(v.failures, 0);
    /* The runner dies: the next one finds k1 in flight and not its own. */
    CHECK_EQ_INT(rturn_chat(&v, 0, 6000), RTURN_RESTART_CUT);
    fold(&v, event_compaction(event_request_cancelled("k1", "restart", NULL), NULL));
    fold(&v, event_compaction(event_request_retried("k1", 2, "restart", "restart", 0, "cut", 0, 6000), NULL));
    CHECK_EQ_STR(v.compact_reason, "overflow");
    CHECK_EQ_INT(v.restarts, 1);
    CHECK_EQ_INT(rturn_chat(&v, 0, 6000), RTURN_NEEDS_AGENT);
    fold(&v, event_compaction(event_request_started("k2", "anthropic", "m", 2), "overflow"));
    json_t *u = event_usage(1, 1);
    fold(&v, event_compaction(event_request_ended("k2", "end_turn", u, 0), NULL));
    json_decref(u);
    json_t *j = session_view_to_json(&v);     /* a snapshot during the compaction keeps the window */
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(j, "compaction"), "window")), 200000);
    session_view w;
    session_view_init(&w);
    CHECK(session_view_from_json(&w, j) == 0 && w.compact_window == 200000);
    session_view_free(&w);
    json_decref(j);
    fold(&v, event_session_compacted("k2", off[2], "S", 1, 900, 300, "overflow", NULL));
    CHECK_EQ_INT(v.compact_window, 0);
    CHECK_EQ_INT(v.failures, 1);
    CHECK_EQ_INT(v.attempts, 1);
    CHECK_EQ_INT(v.retry_at, 5000);
    CHECK_EQ_INT(v.compacted_turn, COMPACT_DONE_OVERFLOW);
    CHECK_EQ_INT(rturn_chat(&v, 0, 6000), RTURN_NEEDS_AGENT);
    /* Everything before the third question is compacted: its retry sends it alone. */
    json_t *h = rturn_history(&v);
    CHECK_EQ_INT(json_array_size(h), 1);
    json_decref(h);
    session_view_free(&v);
}

/* compact:requested: the runner takes it up on an idle chat; a compaction that found
 * nothing ends it all the same. */
static void test_reducer_requested(void)
{
    session_view v;
    char off[3][OFFSET_LEN + 1];
    json_t *u;
    three_exchanges(&v, off);
    reply(&v, "r4", "third answer");
    CHECK_EQ_INT(rturn_chat(&v, 0, 1000), RTURN_NOTHING);
    fold(&v, event_compact_requested());
    CHECK(v.compact_requested);
    CHECK_EQ_INT(rturn_chat(&v, 0, 1000), RTURN_NEEDS_AGENT);
    fold(&v, event_session_compacted(NULL, NULL, NULL, 0, 10, 10, "request", "nothing to compact"));
    CHECK(!v.compact_requested);
    CHECK(!v.summary);
    CHECK_EQ_INT(rturn_chat(&v, 0, 1000), RTURN_NOTHING);
    /* Done: the chat is completed again, as before it. */
    fold(&v, event_compact_requested());
    fold(&v, event_compaction(event_request_started("k1", "anthropic", "m", 1), "request"));
    CHECK_EQ_INT(v.status, SESSION_RUNNING);
    u = event_usage(1, 1);
    fold(&v, event_compaction(event_request_ended("k1", "end_turn", u, 0), NULL));
    json_decref(u);
    fold(&v, event_session_compacted("k1", off[2], "S", 1, 10, 5, "request", NULL));
    CHECK_EQ_INT(v.status, SESSION_COMPLETED);
    CHECK_EQ_INT(rturn_chat(&v, 0, 1000), RTURN_NOTHING);
    session_view_free(&v);
}

int main(void)
{
    test_estimate();
    test_budget();
    test_cut();
    test_overflow();
    test_transcript_cap();
    test_reducer_budget();
    test_reducer_overflow();
    test_reducer_requested();
    return TEST_MAIN_END();
}

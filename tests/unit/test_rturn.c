/* Unit tests for lib/rturn.c: the runner's decisions about a turn, on views folded
 * from the events the runner and the pool write (lib/event's constructors), so
 * that the crash, retry and limit paths that only the bats suites reached are
 * checked here too: a request cut off by a runner's death is found and retried on
 * the restart budget until it is spent; a retry waits for its time; an interrupt
 * cuts the request in flight; a tool call of a dead runner runs again only if it
 * is read-only; a request's end is classified for lib/retry as each way of ending
 * says; the request and tool-turn limits stop a turn before it starts. */
#include "rturn.h"

#include <string.h>

#include "checkpoint.h"
#include "event.h"
#include "offset.h"
#include "test.h"
#include "timefmt.h"

static uint64_t next_seq = 1;

/* Fold e (a lib/event constructor's result; its payload is freed) into v. */
static void fold(session_view *v, sstore_event e)
{
    char off[OFFSET_LEN + 1];
    offset_t o = {next_seq, next_seq * 100};
    next_seq++;
    offset_format(o, off);
    json_t *env = json_pack("{s:s, s:o}", "type", e.type, "payload", e.payload);
    if (!CHECK(env && session_reduce(v, env, off) == 0)) abort();
    json_decref(env);
}

/* A chat session of agent "a" with one user message (mode interrupt). */
static void chat(session_view *v, const char *text)
{
    session_view_init(v);
    fold(v, event_session_created("a", NULL, 0, NULL, NULL, NULL));
    json_t *c = json_string(text);
    fold(v, event_message_user(c, "interrupt", NULL, NULL));
    json_decref(c);
}

/* Request id ended asking for tools. */
static void ended_for_tools(session_view *v, const char *id)
{
    json_t *u = event_usage(1, 1);
    fold(v, event_request_ended(id, "tool_use", u, 0));
    json_decref(u);
}

static const retry_config CFG = {2, 3, 500, 30000};   /* 2 provider retries, 3 restarts */

/* A runner dies with request r1 in flight: the next one to hold the lease finds the
 * request in the log and not in its process, cuts it (restart) and retries it on the
 * restart budget; the retry waits for its time; once the budget is spent the reply
 * fails. The process that still has the request in flight leaves it alone. */
static void test_restart_cut(void)
{
    session_view v;
    chat(&v, "Hello?");
    CHECK_EQ_INT(rturn_chat(&v, 0, 1000), RTURN_NEEDS_AGENT);
    int64_t now = 1000;
    for (int attempt = 1;; attempt++) {
        char id[16];
        snprintf(id, sizeof id, "r%d", attempt);
        fold(&v, event_request_started(id, "openai", "m", attempt));
        fold(&v, event_delta(0, id, "Hel", 3));
        CHECK_EQ_INT(rturn_chat(&v, 1, now), RTURN_IN_FLIGHT);          /* its own runner */
        CHECK_EQ_INT(rturn_chat(&v, 0, now), RTURN_RESTART_CUT);        /* the next runner */
        CHECK_EQ_INT(rturn_under_way(&v), RTURN_RESTART_CUT);
        /* The cut is retried on the restart budget, never the provider's. */
        retry_failure f = {RETRY_RESTART, 0, NULL, -1, NULL, -1};
        retry_decision d;
        retry_decide(&f, v.failures, v.restarts, &CFG, now, &d);
        CHECK_EQ_INT(d.budget, RETRY_BUDGET_RESTART);
        fold(&v, event_request_cancelled(id, "restart", NULL));
        if (!d.retry) {
            CHECK_EQ_INT(attempt, CFG.restart_retries + 1);
            CHECK(d.exhausted);
            /* The runner gives up (turn_give_up): the reply fails and nothing more
             * is started until the next user message. */
            fold(&v, event_failed(0, "cut off by a runner restart", d.reason, v.attempts));
            CHECK_EQ_INT(rturn_chat(&v, 0, now), RTURN_NOTHING);
            json_t *c = json_string("Again?");
            fold(&v, event_message_user(c, "interrupt", NULL, NULL));
            json_decref(c);
            CHECK_EQ_INT(rturn_chat(&v, 0, now), RTURN_NEEDS_AGENT);
            break;
        }
        fold(&v, event_request_retried(id, attempt + 1, "restart", d.reason, 0, "cut off by a runner restart",
                                       d.delay_ms, now + d.delay_ms));
        CHECK_EQ_INT(v.restarts, attempt);
        CHECK_EQ_INT(v.failures, 0);
        CHECK_EQ_INT(rturn_chat(&v, 0, now), RTURN_RETRY_LATER);
        CHECK_EQ_INT(rturn_chat(&v, 0, now + d.delay_ms - 1), RTURN_RETRY_LATER);
        now += d.delay_ms;
        CHECK_EQ_INT(rturn_chat(&v, 0, now), RTURN_NEEDS_AGENT);
        /* The retry sends the history without the reply that was cut. */
        json_t *h = rturn_history(&v);
        CHECK_EQ_UINT(json_array_size(h), 1);
        CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(h, 0), "role")), "user");
        json_decref(h);
    }
    session_view_free(&v);
}

/* A provider error is retried on the provider budget; the runner that has the
 * request in flight cuts it when a user message interrupts it. */
static void test_retry_and_interrupt(void)
{
    session_view v;
    chat(&v, "Hi");
    fold(&v, event_request_started("r1", "openai", "m", 1));
    rturn_end e = {1, NULL, 529, 0, NULL, 0, 0, NULL, 0, -1, "", -1};
    retry_failure f;
    char err[128] = "";
    CHECK(!rturn_complete(&e));
    rturn_classify(&e, &f, err, sizeof err);
    retry_decision d;
    retry_decide(&f, v.failures, v.restarts, &CFG, 5000, &d);
    CHECK(d.retry);
    CHECK_EQ_INT(d.budget, RETRY_BUDGET_PROVIDER);
    fold(&v, event_request_retried("r1", 2, "failed", d.reason, 529, err, d.delay_ms, 5000 + d.delay_ms));
    CHECK_EQ_INT(v.failures, 1);
    CHECK_EQ_INT(v.restarts, 0);
    CHECK_EQ_INT(rturn_chat(&v, 0, 5000), RTURN_RETRY_LATER);
    CHECK_EQ_INT(rturn_chat(&v, 0, 5000 + d.delay_ms), RTURN_NEEDS_AGENT);
    fold(&v, event_request_started("r2", "openai", "m", 2));
    CHECK_EQ_INT(rturn_chat(&v, 1, 6000), RTURN_IN_FLIGHT);
    json_t *c = json_string("Stop, another question");
    fold(&v, event_message_user(c, "interrupt", NULL, NULL));
    json_decref(c);
    CHECK_EQ_INT(rturn_chat(&v, 1, 6000), RTURN_INTERRUPT);
    session_view_free(&v);
}

/* A message that replaces an earlier one (regenerate): that one and its reply leave
 * the history the model is sent; the new one is answered. */
static void test_history_replaced(void)
{
    session_view v;
    chat(&v, "First question");
    const char *first = json_string_value(json_object_get(json_array_get(v.messages, 0), "offset"));
    char q1[OFFSET_LEN + 1];
    snprintf(q1, sizeof q1, "%s", first);
    fold(&v, event_request_started("r1", "openai", "m", 1));
    fold(&v, event_delta(0, "r1", "First answer", 12));
    json_t *u = event_usage(1, 1);
    fold(&v, event_request_ended("r1", "stop", u, 0));
    json_decref(u);
    json_t *c = json_string("First question");
    fold(&v, event_message_user(c, "interrupt", NULL, q1));
    json_decref(c);
    CHECK_EQ_INT(rturn_chat(&v, 0, 1000), RTURN_NEEDS_AGENT);
    json_t *h = rturn_history(&v);
    CHECK_EQ_UINT(json_array_size(h), 1);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(h, 0), "role")), "user");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(h, 0), "offset")), session_view_last_user(&v));
    json_decref(h);
    /* The view keeps them, marked. */
    CHECK_EQ_UINT(json_array_size(v.messages), 3);
    CHECK(json_is_true(json_object_get(json_array_get(v.messages, 0), "superseded")));
    CHECK(json_is_true(json_object_get(json_array_get(v.messages, 1), "superseded")));
    CHECK(!json_object_get(json_array_get(v.messages, 2), "superseded"));
    /* An offset that is no user message's replaces nothing. */
    c = json_string("Another");
    fold(&v, event_message_user(c, "interrupt", NULL, "0000000000000099_0000000000000099"));
    json_decref(c);
    CHECK(!json_object_get(json_array_get(v.messages, 2), "superseded"));
    CHECK(session_view_has_user_message(&v, session_view_last_user(&v)));
    session_view_free(&v);
}

/* Each way a request can end, classified for lib/retry, with its message. */
static void test_classify(void)
{
    retry_failure f;
    char err[128];
    /* complete: a 200 stream with its terminal event */
    rturn_end ok = {1, NULL, 200, 0, NULL, 0, 0, NULL, 1, -1, "", -1};
    CHECK(rturn_complete(&ok));
    /* a 200 stream cut before its terminal event: RETRY_CUT, retried */
    rturn_end cut = ok;
    cut.done = 0;
    CHECK(!rturn_complete(&cut));
    rturn_classify(&cut, &f, err, sizeof err);
    CHECK_EQ_INT(f.kind, RETRY_CUT);
    CHECK_EQ_STR(err, "the stream ended without its terminal event");
    /* a transport error with no answer */
    rturn_end tr = {0, "Couldn't connect to server", 0, 0, NULL, 0, 0, NULL, 0, -1, "", -1};
    rturn_classify(&tr, &f, err, sizeof err);
    CHECK_EQ_INT(f.kind, RETRY_TRANSPORT);
    CHECK_EQ_STR(err, "Couldn't connect to server");
    /* a transfer that failed after an answer: its status says */
    rturn_end tr503 = tr;
    tr503.status = 503;
    rturn_classify(&tr503, &f, err, sizeof err);
    CHECK_EQ_INT(f.kind, RETRY_HTTP);
    CHECK_EQ_INT(f.status, 503);
    CHECK_EQ_STR(err, "HTTP 503");
    /* a 400 with the provider's hints passed on; not retried */
    rturn_end bad = {1, NULL, 400, 0, NULL, 0, 0, NULL, 0, 0, "7", 1500};
    rturn_classify(&bad, &f, err, sizeof err);
    CHECK_EQ_INT(f.kind, RETRY_HTTP);
    CHECK_EQ_INT(f.should_retry, 0);
    CHECK_EQ_STR(f.retry_after, "7");
    CHECK_EQ_INT(f.retry_after_ms, 1500);
    retry_decision d;
    retry_decide(&f, 0, 0, &CFG, 0, &d);
    CHECK(!d.retry);
    /* the address policy refused the connection: its reason, never retried */
    rturn_end ref = {0, "Couldn't connect", 0, 1, "refused: 10.0.0.1 is a private address", 0, 0, NULL, 0, -1, "", -1};
    rturn_classify(&ref, &f, err, sizeof err);
    CHECK_EQ_INT(f.kind, RETRY_REFUSED);
    CHECK_EQ_STR(err, "refused: 10.0.0.1 is a private address");
    retry_decide(&f, 0, 0, &CFG, 0, &d);
    CHECK(!d.retry);
    /* an error event in the stream, and an unreadable stream: the parser's message stays */
    rturn_end se = ok;
    se.stream_error = 1;
    se.error_type = "overloaded_error";
    snprintf(err, sizeof err, "overloaded_error: busy");
    CHECK(!rturn_complete(&se));
    rturn_classify(&se, &f, err, sizeof err);
    CHECK_EQ_INT(f.kind, RETRY_STREAM_ERROR);
    CHECK_EQ_STR(f.error_type, "overloaded_error");
    CHECK_EQ_STR(err, "overloaded_error: busy");
    se.error_type = "";
    rturn_classify(&se, &f, err, sizeof err);
    CHECK(f.error_type == NULL);
    rturn_end mal = ok;
    mal.malformed = 1;
    snprintf(err, sizeof err, "malformed provider stream");
    rturn_classify(&mal, &f, err, sizeof err);
    CHECK_EQ_INT(f.kind, RETRY_MALFORMED);
    CHECK_EQ_STR(err, "malformed provider stream");
    CHECK(f.retry_after == NULL);
}

/* A tool call open in the log and not running here: its own runner's runs; a dead
 * runner's runs again only if it is read-only; one that resolved to no tool fails. */
static void test_call_plan(void)
{
    json_t *args = json_object();
    sstore_event rd = event_tool_called("c1", "count", args, "words", "count", 0, "r1", NULL, 0);
    sstore_event wr = event_tool_called("c2", "send", args, "mail", "send", 1, "r1", NULL, 0);
    sstore_event none = event_tool_called("c3", "nothing", args, NULL, NULL, 0, "r1", NULL, 0);
    CHECK_EQ_INT(rturn_call_plan(NULL, rd.payload, 1), RTURN_CALL_RUN);
    CHECK_EQ_INT(rturn_call_plan(NULL, rd.payload, 0), RTURN_CALL_RUN);        /* read-only: again */
    CHECK_EQ_INT(rturn_call_plan(NULL, wr.payload, 1), RTURN_CALL_RUN);
    CHECK_EQ_INT(rturn_call_plan(NULL, wr.payload, 0), RTURN_CALL_CUT);        /* side effects: never twice */
    CHECK_EQ_INT(rturn_call_plan(NULL, none.payload, 1), RTURN_CALL_NO_TOOL);
    /* Open calls in the log: the next look runs them, whoever recorded them. */
    session_view v;
    chat(&v, "Count");
    fold(&v, event_request_started("r1", "openai", "m", 1));
    fold(&v, event_tool_called("c1", "count", args, "words", "count", 0, "r1", NULL, 0));
    ended_for_tools(&v, "r1");
    CHECK_EQ_INT(rturn_chat(&v, 0, 0), RTURN_RUN_CALLS);
    CHECK_EQ_INT(rturn_under_way(&v), RTURN_RUN_CALLS);
    json_t *r = json_string("2");
    fold(&v, event_tool_result("c1", r, 0, 0, 5));
    json_decref(r);
    CHECK_EQ_INT(rturn_under_way(&v), RTURN_NOTHING);
    CHECK_EQ_INT(rturn_chat(&v, 0, 0), RTURN_NEEDS_AGENT);     /* the results go back to the model */
    session_view_free(&v);
    json_decref(rd.payload);
    json_decref(wr.payload);
    json_decref(none.payload);
    json_decref(args);
}

/* A chat's call that waits for approval: it waits (never run), is denied, or is
 * taken when approved and then runs as any call (a side-effecting one taken by a
 * runner that died is not run twice). */
static void test_call_approval(void)
{
    json_t *args = json_object(), *yes = json_true(), *no = json_false(), *why = json_string("not now");
    session_view v;
    const char *by;
    chat(&v, "Send it");
    fold(&v, event_request_started("r1", "openai", "m", 1));
    fold(&v, event_tool_called("c1", "mail__send", args, "mail", "send", 1, "r1", NULL, 0));
    fold(&v, event_approval_requested("c1", "Run mail__send?"));
    fold(&v, event_tool_called("c2", "mail__read", args, "mail", "read", 0, "r1", NULL, 0));
    ended_for_tools(&v, "r1");
    CHECK_EQ_STR(session_status_name(v.status), "awaiting_input");
    CHECK_EQ_INT(rturn_chat(&v, 0, 0), RTURN_RUN_CALLS);
    const json_t *c1 = session_view_open_call(&v, "c1"), *c2 = session_view_open_call(&v, "c2");
    CHECK_EQ_INT(rturn_call_plan(&v, c1, 1), RTURN_CALL_WAIT);
    CHECK_EQ_INT(rturn_call_plan(&v, c1, 0), RTURN_CALL_WAIT);          /* after a restart too */
    CHECK_EQ_INT(rturn_call_plan(&v, c2, 1), RTURN_CALL_RUN);           /* one without approval runs */
    /* The answer route's checks: a yes or no to a call that waits. */
    CHECK_EQ_INT(checkpoint_decide(&v, NULL, "c1", why, &by), CHECKPOINT_BAD_RESPONSE);
    CHECK_EQ_INT(checkpoint_decide(&v, NULL, "c2", yes, &by), CHECKPOINT_NOT_REQUESTED);
    CHECK_EQ_INT(checkpoint_decide(&v, NULL, "c1", yes, &by), CHECKPOINT_OK);
    CHECK(by && by[0]);                                                  /* caused by its request */
    session_view w;
    session_view_init(&w);
    json_t *j = session_view_to_json(&v);
    CHECK_EQ_INT(session_view_from_json(&w, j), 0);                      /* a snapshot keeps the wait */
    json_decref(j);
    fold(&v, event_input_answered("c1", yes, NULL));
    CHECK_EQ_INT(checkpoint_decide(&v, NULL, "c1", yes, &by), CHECKPOINT_ANSWERED);
    CHECK_EQ_STR(session_status_name(v.status), "running");
    CHECK_EQ_INT(rturn_call_plan(&v, session_view_open_call(&v, "c1"), 0), RTURN_CALL_TAKE);
    fold(&v, event_tool_approved("c1"));
    CHECK_EQ_INT(rturn_call_plan(&v, session_view_open_call(&v, "c1"), 1), RTURN_CALL_RUN);
    CHECK_EQ_INT(rturn_call_plan(&v, session_view_open_call(&v, "c1"), 0), RTURN_CALL_CUT); /* taken, runner gone */
    /* Denied (in the snapshot's copy): the reason stays with the call for the model. */
    CHECK_EQ_STR(session_status_name(w.status), "awaiting_input");
    fold(&w, event_input_answered("c1", no, why));
    const json_t *d = session_view_open_call(&w, "c1");
    CHECK_EQ_INT(rturn_call_plan(&w, d, 1), RTURN_CALL_DENY);
    CHECK(json_equal(json_object_get(json_object_get(d, SESSION_CALL_APPROVAL), PK_REASON), why));
    fold(&w, event_tool_denied("c1", why));
    fold(&w, event_tool_result("c2", why, 0, 0, 1));
    CHECK_EQ_INT(rturn_chat(&w, 0, 0), RTURN_NEEDS_AGENT);              /* the results go back to the model */
    fold(&w, event_request_started("r2", "openai", "m", 1));
    CHECK_EQ_UINT(json_object_size(w.early), 0);                        /* a later c1 asks anew */
    session_view_free(&w);
    session_view_free(&v);
    json_decref(args);
    json_decref(yes);
    json_decref(no);
    json_decref(why);
}

/* The limits: requests per session and per message, the cost budget, tool turns. */
static void test_limits(void)
{
    session_view v;
    char msg[256];
    chat(&v, "Hi");
    CHECK(rturn_limit(&v, 0, 0, msg, sizeof msg) == NULL);
    v.requests = 10;
    v.message_requests = 3;
    CHECK(rturn_limit(&v, 11, 4, msg, sizeof msg) == NULL);
    CHECK_EQ_STR(rturn_limit(&v, 10, 4, msg, sizeof msg), "session_request_limit");
    CHECK_EQ_STR(msg, "the session made its 10 provider requests (DSTREAM_SESSION_REQUESTS_MAX)");
    CHECK_EQ_STR(rturn_limit(&v, 0, 3, msg, sizeof msg), "message_request_limit");
    CHECK_EQ_STR(msg, "the reply made its 3 provider requests (DSTREAM_MESSAGE_REQUESTS_MAX)");
    v.is_workflow = 1;      /* a workflow has no per-message limit */
    CHECK(rturn_limit(&v, 0, 3, msg, sizeof msg) == NULL);
    session_view_free(&v);

    json_t *plain = json_pack("{s:s}", "model", "m");
    json_t *tight = json_pack("{s:{s:f, s:i}}", "limits", "costBudgetUsd", 0.5, "maxTurns", 2);
    CHECK_EQ_INT(rturn_max_turns(plain), RTURN_MAX_TURNS);
    CHECK_EQ_INT(rturn_max_turns(tight), 2);
    chat(&v, "Hi");
    CHECK_EQ_INT(rturn_chat_agent(&v, NULL), RTURN_NO_AGENT);
    CHECK_EQ_INT(rturn_chat_agent(&v, tight), RTURN_START);
    v.cost_usd = 0.5;
    CHECK(rturn_over_budget(tight, &v));
    CHECK(!rturn_over_budget(plain, &v));
    CHECK_EQ_INT(rturn_chat_agent(&v, tight), RTURN_OVER_BUDGET);
    v.cost_usd = 0;
    /* Two tool turns answered in one reply: the third is stopped (maxTurns 2). */
    json_t *args = json_object(), *r = json_string("ok");
    for (int t = 1; t <= 2; t++) {
        char id[8], cid[8];
        snprintf(id, sizeof id, "r%d", t);
        snprintf(cid, sizeof cid, "c%d", t);
        fold(&v, event_request_started(id, "openai", "m", 1));
        fold(&v, event_tool_called(cid, "count", args, "words", "count", 0, id, NULL, 0));
        ended_for_tools(&v, id);
        fold(&v, event_tool_result(cid, r, 0, 0, 1));
    }
    CHECK_EQ_INT(v.tool_turns, 2);
    CHECK_EQ_INT(rturn_chat(&v, 0, 0), RTURN_NEEDS_AGENT);
    CHECK_EQ_INT(rturn_chat_agent(&v, tight), RTURN_TOOL_LOOP);
    CHECK_EQ_INT(rturn_chat_agent(&v, plain), RTURN_START);
    json_decref(args);
    json_decref(r);
    json_decref(plain);
    json_decref(tight);
    session_view_free(&v);
}

/* Request id of v was cut after streaming text (a restart when restart, else a lost
 * connection; cut_in: the block its stream was in), its retry scheduled. */
static void cut_after(session_view *v, const char *id, const char *text, int restart, const char *cut_in)
{
    fold(v, event_delta(0, id, text, strlen(text)));
    if (restart) fold(v, event_request_cancelled(id, "restart", NULL));
    sstore_event e = event_request_retried(id, v->attempts + 1, restart ? "restart" : "failed",
                                           restart ? "restart" : "connection", 0, "cut", 10, 2000);
    if (cut_in) event_retried_cut_in(&e, cut_in);
    fold(v, e);
}

/* The assistant message of request id in v's messages, or NULL. */
static const json_t *reply_of(const session_view *v, const char *id)
{
    size_t i;
    json_t *m;
    json_array_foreach(v->messages, i, m) {
        const char *r = json_string_value(json_object_get(m, "requestId"));
        if (r && !strcmp(r, id)) return m;
    }
    return NULL;
}

/* A reply cut by a restart or a lost connection is continued from its committed
 * text, trailing whitespace left off (Anthropic refuses it; the continuation gives
 * it again), twice over; the view's reply is the text kept and the continuation.
 * What cannot be continued starts over and says why: thinking, a cut in a tool-use
 * block, a provider's error, continuation off, a recorded session, only whitespace. */
static void test_continuation(void)
{
    session_view v;
    rturn_cont c;
    chat(&v, "Tell me.");
    /* A first attempt and no cut: nothing to say. */
    rturn_continuation(&v, 1, 0, &c);
    CHECK(!c.continued && !c.reason);
    fold(&v, event_request_started("r1", "anthropic", "m", 1));
    cut_after(&v, "r1", "Caf\xc3\xa9 au lait, ", 1, NULL);
    CHECK(!reply_of(&v, "r1"));                 /* the attempt left the history */
    rturn_continuation(&v, 1, 0, &c);
    CHECK(c.continued);
    CHECK_EQ_STR(c.from, "r1");
    CHECK_MEM(c.text, c.bytes, "Caf\xc3\xa9 au lait,", strlen("Caf\xc3\xa9 au lait,"));
    CHECK_EQ_INT(c.chars, 13);
    CHECK_EQ_INT(c.trimmed, 1);
    json_t *h = rturn_history(&v);
    json_array_append_new(h, rturn_prefill(&c));
    CHECK_EQ_UINT(json_array_size(h), 2);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(h, 1), "role")), "assistant");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(h, 1), "content")), "Caf\xc3\xa9 au lait,");
    json_decref(h);
    /* The retry says so; its reply starts with the kept text. */
    sstore_event e = event_request_started("r2", "anthropic", "m", 2);
    event_started_continued(&e, c.from, c.chars, c.trimmed);
    fold(&v, e);
    CHECK(!v.cut);
    fold(&v, event_delta(0, "r2", " please, and ", 13));
    const json_t *m = reply_of(&v, "r2");
    CHECK_EQ_STR(json_string_value(json_object_get(m, "content")), "Caf\xc3\xa9 au lait, please, and ");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(m, PK_CONTINUED_FROM), PK_REQUEST_ID)), "r1");
    /* Cut again, by a lost connection: continued from the whole of it. */
    cut_after(&v, "r2", "a crois", 0, NULL);
    rturn_continuation(&v, 1, 0, &c);
    CHECK(c.continued);
    CHECK_EQ_STR(c.from, "r2");
    CHECK_MEM(c.text, c.bytes, "Caf\xc3\xa9 au lait, please, and a crois", strlen("Caf\xc3\xa9 au lait, please, and a crois"));
    CHECK_EQ_INT(c.trimmed, 0);
    e = event_request_started("r3", "anthropic", "m", 3);
    event_started_continued(&e, c.from, c.chars, c.trimmed);
    fold(&v, e);
    fold(&v, event_delta(0, "r3", "sant.", 5));
    json_t *u = event_usage(1, 1);
    fold(&v, event_request_ended("r3", "end_turn", u, 0));
    json_decref(u);
    CHECK_EQ_STR(json_string_value(json_object_get(reply_of(&v, "r3"), "content")),
                 "Caf\xc3\xa9 au lait, please, and a croissant.");
    CHECK_EQ_UINT(json_array_size(v.messages), 2);
    /* The view survives a snapshot with the cut attempt it holds. */
    fold(&v, event_request_started("r4", "anthropic", "m", 1));
    cut_after(&v, "r4", "Sure", 1, NULL);
    json_t *snap = session_view_to_json(&v);
    session_view w;
    session_view_init(&w);
    CHECK(session_view_from_json(&w, snap) == 0);
    json_decref(snap);
    rturn_continuation(&w, 1, 0, &c);
    CHECK(c.continued && c.bytes == 4 && !strcmp(c.from, "r4"));
    /* ... and not where it cannot be: */
    rturn_continuation(&w, 0, 0, &c);
    CHECK(!c.continued && c.reason && !strcmp(c.reason, "off"));
    rturn_continuation(&w, 1, 1, &c);
    CHECK(!c.continued && c.reason && !strcmp(c.reason, "recording"));
    session_view_free(&w);
    session_view_free(&v);

    chat(&v, "Think.");
    fold(&v, event_request_started("t1", "anthropic", "m", 1));
    fold(&v, event_delta(1, "t1", "hmm", 3));
    cut_after(&v, "t1", "So", 1, NULL);
    rturn_continuation(&v, 1, 0, &c);
    CHECK(!c.continued && c.reason && !strcmp(c.reason, "thinking"));
    /* A retry that starts over replaces the attempt (no text kept). */
    e = event_request_started("t2", "anthropic", "m", 2);
    event_started_restarted(&e, c.reason);
    fold(&v, e);
    CHECK_EQ_STR(json_string_value(json_object_get(reply_of(&v, "t2"), "content")), "");
    session_view_free(&v);

    chat(&v, "Call.");
    fold(&v, event_request_started("k1", "anthropic", "m", 1));
    cut_after(&v, "k1", "Let me look. ", 0, "tool_use");
    rturn_continuation(&v, 1, 0, &c);
    CHECK(!c.continued && c.reason && !strcmp(c.reason, "tool_use"));
    session_view_free(&v);

    chat(&v, "Overload.");
    fold(&v, event_request_started("o1", "anthropic", "m", 1));
    fold(&v, event_delta(0, "o1", "Partial", 7));
    fold(&v, event_request_retried("o1", 2, "failed", "overloaded", 0, "overloaded_error", 10, 2000));
    rturn_continuation(&v, 1, 0, &c);
    CHECK(!c.continued && c.reason && !strcmp(c.reason, "error"));
    session_view_free(&v);

    /* A continuation the provider refused (HTTP 400: a model that takes no prefill) is
     * asked again from the start, once, on the provider-error budget; its cut attempt
     * says refused. Another refusal, or any other, fails as before. */
    retry_decision d = {0, RETRY_BUDGET_PROVIDER, 0, "rejected", 0};
    CHECK(rturn_retry_refused(&d, 1, 0, 4));
    CHECK(!rturn_retry_refused(&d, 0, 0, 4));          /* not a continuation */
    CHECK(!rturn_retry_refused(&d, 1, 4, 4));          /* the budget is spent */
    d.reason = "authentication";
    CHECK(!rturn_retry_refused(&d, 1, 0, 4));
    chat(&v, "Refuse.");
    fold(&v, event_request_started("f1", "anthropic", "m", 1));
    cut_after(&v, "f1", "Some text", 0, NULL);
    rturn_continuation(&v, 1, 0, &c);
    CHECK(c.continued);
    e = event_request_started("f2", "anthropic", "m", 2);
    event_started_continued(&e, c.from, c.chars, c.trimmed);
    fold(&v, e);
    fold(&v, event_request_retried("f2", 3, "failed", "rejected", 400, "HTTP 400", 10, 2000));
    rturn_continuation(&v, 1, 0, &c);
    CHECK(!c.continued && c.reason && !strcmp(c.reason, "refused"));
    session_view_free(&v);

    /* Unicode whitespace at its end is left off too, counted in characters. */
    chat(&v, "Wide.");
    fold(&v, event_request_started("u1", "anthropic", "m", 1));
    cut_after(&v, "u1", "\xe4\xbd\xa0\xe5\xa5\xbd\xe3\x80\x80\xc2\xa0", 1, NULL);
    rturn_continuation(&v, 1, 0, &c);
    CHECK(c.continued && c.bytes == 6 && c.chars == 2 && c.trimmed == 2);
    session_view_free(&v);

    chat(&v, "Blank.");
    fold(&v, event_request_started("b1", "anthropic", "m", 1));
    cut_after(&v, "b1", " \n\t", 1, NULL);
    rturn_continuation(&v, 1, 0, &c);
    CHECK(!c.continued && c.reason && !strcmp(c.reason, "empty"));
    /* A new message after the cut answers afresh: the cut attempt is forgotten. */
    fold(&v, event_request_cancelled("b1", "interrupted", NULL));
    json_t *q = json_string("Other.");
    fold(&v, event_message_user(q, "interrupt", NULL, NULL));
    json_decref(q);
    rturn_continuation(&v, 1, 0, &c);
    CHECK(!c.continued && !c.reason);
    session_view_free(&v);

    /* A cut that streamed nothing is a retry like any other. */
    chat(&v, "Nothing.");
    fold(&v, event_request_started("n1", "anthropic", "m", 1));
    fold(&v, event_request_retried("n1", 2, "failed", "connection", 0, "refused", 10, 2000));
    rturn_continuation(&v, 1, 0, &c);
    CHECK(!c.continued && !c.reason);
    session_view_free(&v);
}

static void test_unfence(void)
{
    const char *in = "  ```json\n{\"a\": 1}\n```\n", *p = in;
    size_t len = strlen(in);
    rturn_unfence(&p, &len);
    CHECK_EQ_UINT(len, strlen("{\"a\": 1}\n"));
    CHECK(!strncmp(p, "{\"a\": 1}", 8));
    p = "[1, 2]";
    len = 6;
    rturn_unfence(&p, &len);
    CHECK_EQ_UINT(len, 6);
}

/* Provider failover: an overload fails over at once, a provider error once its
 * retries are spent, to each fallback in turn and then no further; a restart, a
 * refusal or an error that is not retried never does. provider:failover moves the
 * request's route and gives the fallback its own budget; the next request starts
 * with the agent's own provider again. */
static void test_failover(void)
{
    json_t *agent = json_pack("{s:s, s:s, s:s, s:[{s:s, s:s}, {s:s, s:s}]}", "provider", "anthropic", "model", "m1",
                              "endpoint", "https://x.example", "fallbacks", "provider", "openai", "model", "m2",
                              "provider", "local", "model", "m3");
    session_view v;
    chat(&v, "Hello?");
    retry_failure f529 = {RETRY_HTTP, 529, NULL, -1, NULL, -1}, f500 = {RETRY_HTTP, 500, NULL, -1, NULL, -1};
    retry_failure f400 = {RETRY_HTTP, 400, NULL, -1, NULL, -1}, frs = {RETRY_RESTART, 0, NULL, -1, NULL, -1};
    retry_failure fov = {RETRY_STREAM_ERROR, 0, "overloaded_error", -1, NULL, -1};
    retry_failure fref = {RETRY_REFUSED, 0, NULL, -1, NULL, -1};
    retry_decision d;
    /* An overload: at once, in the header and in the stream. */
    retry_decide(&f529, 0, 0, &CFG, 0, &d);
    CHECK_EQ_INT(d.retry, 1);
    CHECK_EQ_INT(rturn_failover(agent, &v, &f529, &d), 1);
    retry_decide(&fov, 0, 0, &CFG, 0, &d);
    CHECK_EQ_INT(rturn_failover(agent, &v, &fov, &d), 1);
    /* A 500: retried first, then over to the fallback once the budget is spent. */
    retry_decide(&f500, 0, 0, &CFG, 0, &d);
    CHECK_EQ_INT(rturn_failover(agent, &v, &f500, &d), 0);
    retry_decide(&f500, 2, 0, &CFG, 0, &d);
    CHECK_EQ_INT(d.exhausted, 1);
    CHECK_EQ_INT(rturn_failover(agent, &v, &f500, &d), 1);
    /* Never: an invalid request, a restart (even with its budget spent), a refusal;
     * nor without fallbacks. */
    retry_decide(&f400, 0, 0, &CFG, 0, &d);
    CHECK_EQ_INT(rturn_failover(agent, &v, &f400, &d), 0);
    retry_decide(&frs, 0, 3, &CFG, 0, &d);
    CHECK_EQ_INT(rturn_failover(agent, &v, &frs, &d), 0);
    retry_decide(&fref, 0, 0, &CFG, 0, &d);
    CHECK_EQ_INT(rturn_failover(agent, &v, &fref, &d), 0);
    json_t *alone = json_pack("{s:s, s:s}", "provider", "anthropic", "model", "m1");
    retry_decide(&f529, 0, 0, &CFG, 0, &d);
    CHECK_EQ_INT(rturn_failover(alone, &v, &f529, &d), 0);
    CHECK_EQ_INT(rturn_failover(NULL, &v, &f529, &d), 0);
    /* The log: r1 failed twice with 500 and was failed over; the view says route 1
     * with a budget of its own, and the retry is due. */
    fold(&v, event_request_started("r1", "anthropic", "m1", 1));
    fold(&v, event_request_retried("r1", 2, "failed", "server_error", 500, "HTTP 500", 10, 20));
    fold(&v, event_request_started("r2", "anthropic", "m1", 2));
    CHECK_EQ_INT(v.failures, 1);
    fold(&v, event_request_retried("r2", 3, "failover", "server_error", 500, "HTTP 500", 0, 30));
    fold(&v, event_failover("r2", "anthropic", "m1", "openai", "m2", 0, "server_error", 500, "HTTP 500"));
    CHECK_EQ_INT(v.route, 1);
    CHECK_EQ_INT(v.failures, 0);
    CHECK_EQ_INT(v.retry_at, 30);
    CHECK_EQ_STR(v.request, "");
    CHECK_EQ_INT(rturn_chat(&v, 0, 30), RTURN_NEEDS_AGENT);
    /* Routed: the fallback's pair, without the agent's endpoint; the snapshot keeps the route. */
    json_t *routed = rturn_route_agent(agent, v.route);
    CHECK_EQ_STR(json_string_value(json_object_get(routed, "provider")), "openai");
    CHECK_EQ_STR(json_string_value(json_object_get(routed, "model")), "m2");
    CHECK(!json_object_get(routed, "endpoint"));
    json_decref(routed);
    routed = rturn_route_agent(agent, 0);
    CHECK(json_equal(routed, agent));
    json_decref(routed);
    CHECK(!rturn_route_agent(agent, 3));
    json_t *snap = session_view_to_json(&v);
    session_view back;
    session_view_init(&back);
    CHECK_EQ_INT(session_view_from_json(&back, snap), 0);
    CHECK_EQ_INT(back.route, 1);
    session_view_free(&back);
    json_decref(snap);
    /* The fallback overloaded too: over to the last; from there, nothing further. */
    fold(&v, event_request_started("r3", "openai", "m2", 3));
    retry_decide(&f529, v.failures, v.restarts, &CFG, 0, &d);
    CHECK_EQ_INT(rturn_failover(agent, &v, &f529, &d), 2);
    fold(&v, event_request_retried("r3", 4, "failover", "overloaded", 529, "HTTP 529", 0, 40));
    fold(&v, event_failover("r3", "openai", "m2", "local", "m3", 1, "overloaded", 529, "HTTP 529"));
    CHECK_EQ_INT(v.route, 2);
    fold(&v, event_request_started("r4", "local", "m3", 4));
    retry_decide(&f529, v.failures, v.restarts, &CFG, 0, &d);
    CHECK_EQ_INT(rturn_failover(agent, &v, &f529, &d), 0);
    /* It ends; the next request is the agent's own provider's again. */
    json_t *u = event_usage(1, 1);
    fold(&v, event_request_ended("r4", "end_turn", u, 0));
    json_decref(u);
    CHECK_EQ_INT(v.route, 0);
    json_decref(alone);
    json_decref(agent);
    session_view_free(&v);
}

/* Budgets that ask: reached with onExceed "fail" fails as before; with "ask" it asks,
 * waits (until its expiry), goes on with a raised limit, ends on a no or an expiry.
 * A session's own limits replace the agent's; maxTokens and maxRequests count too. */
static void test_budget(void)
{
    json_t *fail = json_pack("{s:{s:f}}", "limits", "costBudgetUsd", 0.5);
    json_t *ask = json_pack("{s:{s:f, s:s, s:i}}", "limits", "costBudgetUsd", 0.5, "onExceed", "ask", "askTimeoutMs", 1000);
    json_t *tokens = json_pack("{s:{s:i, s:s}}", "limits", "maxTokens", 10, "onExceed", "ask");
    rturn_budget b;
    session_view v;
    chat(&v, "Hello?");
    CHECK_EQ_INT(rturn_budget_check(ask, &v, 0, &b), RTURN_BUDGET_OK);
    CHECK_EQ_INT(rturn_budget_check(NULL, &v, 0, &b), RTURN_BUDGET_OK);
    json_t *u = event_usage(4, 8);
    fold(&v, event_request_started("r1", "openai", "m", 1));
    fold(&v, event_request_ended("r1", "end_turn", u, 0.6));
    json_decref(u);
    CHECK_EQ_INT(rturn_budget_check(fail, &v, 0, &b), RTURN_BUDGET_FAIL);
    CHECK_EQ_STR(b.limit, "costBudgetUsd");
    CHECK(rturn_over_budget(fail, &v));
    CHECK_EQ_INT(rturn_budget_check(ask, &v, 0, &b), RTURN_BUDGET_ASK);
    CHECK_EQ_INT(b.asks, 0);
    CHECK_EQ_INT((int)b.timeout_ms, 1000);
    CHECK_EQ_INT(rturn_budget_check(tokens, &v, 0, &b), RTURN_BUDGET_ASK);
    CHECK_EQ_STR(b.limit, "maxTokens");
    CHECK(b.spent == 12 && b.max == 10);
    /* It asks: the session waits for the answer, the question its pendingInput. */
    fold(&v, event_budget_requested("budget:1", "more?", "costBudgetUsd", 0.5, 0.6, "2026-11-23T00:00:01.000Z"));
    CHECK_EQ_INT(v.status, SESSION_AWAITING_INPUT);
    CHECK_EQ_STR(json_string_value(json_object_get(v.pending, PK_INTERACTION_ID)), "budget:1");
    int64_t exp;
    CHECK_EQ_INT(timefmt_parse("2026-11-23T00:00:01.000Z", &exp), 0);
    CHECK_EQ_INT(rturn_budget_check(ask, &v, exp - 1, &b), RTURN_BUDGET_WAIT);
    CHECK(b.expires_ms == exp);
    CHECK_EQ_STR(b.id, "budget:1");
    CHECK_EQ_INT(rturn_budget_check(ask, &v, exp, &b), RTURN_BUDGET_EXPIRED);
    /* The answer fits: false, a number > 0, an object of limits; nothing else. */
    json_t *r;
    const char *off;
    r = json_true();
    CHECK_EQ_INT(checkpoint_decide(&v, NULL, "budget:1", r, &off), CHECKPOINT_BAD_RESPONSE);
    json_decref(r);
    r = json_pack("{s:i}", "maxTurns", 3);
    CHECK_EQ_INT(checkpoint_decide(&v, NULL, "budget:1", r, &off), CHECKPOINT_BAD_RESPONSE);
    json_decref(r);
    r = json_real(-1);
    CHECK_EQ_INT(checkpoint_decide(&v, NULL, "budget:1", r, &off), CHECKPOINT_BAD_RESPONSE);
    json_decref(r);
    r = json_real(2);
    CHECK_EQ_INT(checkpoint_decide(&v, NULL, "budget:1", r, &off), CHECKPOINT_OK);
    CHECK(off != NULL);
    /* A new limit: the session goes on, and asks again when it reaches it. */
    fold(&v, event_input_answered("budget:1", r, NULL));
    json_decref(r);
    CHECK(!v.pending);
    CHECK(v.status != SESSION_AWAITING_INPUT);
    CHECK_EQ_INT(rturn_budget_check(ask, &v, 0, &b), RTURN_BUDGET_OK);
    json_t *snap = session_view_to_json(&v);
    session_view back;
    session_view_init(&back);
    CHECK_EQ_INT(session_view_from_json(&back, snap), 0);
    CHECK_EQ_INT(rturn_budget_check(ask, &back, 0, &b), RTURN_BUDGET_OK);
    session_view_free(&back);
    json_decref(snap);
    u = event_usage(1, 1);
    fold(&v, event_request_started("r2", "openai", "m", 1));
    fold(&v, event_request_ended("r2", "end_turn", u, 1.5));
    json_decref(u);
    CHECK_EQ_INT(rturn_budget_check(ask, &v, 0, &b), RTURN_BUDGET_ASK);
    CHECK_EQ_INT(b.asks, 1);
    /* Asked again, answered no: the session ends. */
    fold(&v, event_budget_requested("budget:2", "more?", "costBudgetUsd", 2, 2.1, NULL));
    CHECK_EQ_INT(rturn_budget_check(ask, &v, 1LL << 50, &b), RTURN_BUDGET_WAIT);
    CHECK(b.expires_ms == 0);
    r = json_false();
    fold(&v, event_input_answered("budget:2", r, NULL));
    json_decref(r);
    CHECK_EQ_INT(rturn_budget_check(ask, &v, 0, &b), RTURN_BUDGET_REJECTED);
    CHECK_EQ_STR(b.id, "budget:2");
    CHECK(b.max == 2);
    session_view_free(&v);
    /* A session's own limits replace the agent's: maxRequests 1 of the session. */
    session_view_init(&v);
    fold(&v, event_session_created("a", NULL, 0, NULL, NULL, NULL));
    json_object_set_new(v.created, PK_LIMITS, json_pack("{s:i, s:s}", "maxRequests", 1, "onExceed", "fail"));
    CHECK_EQ_INT(rturn_budget_check(ask, &v, 0, &b), RTURN_BUDGET_OK);
    fold(&v, event_request_started("r1", "openai", "m", 1));
    CHECK_EQ_INT(rturn_budget_check(ask, &v, 0, &b), RTURN_BUDGET_FAIL);
    CHECK_EQ_STR(b.limit, "maxRequests");
    session_view_free(&v);
    json_decref(fail);
    json_decref(ask);
    json_decref(tokens);
}

int main(void)
{
    test_restart_cut();
    test_retry_and_interrupt();
    test_history_replaced();
    test_classify();
    test_call_plan();
    test_call_approval();
    test_limits();
    test_unfence();
    test_continuation();
    test_failover();
    test_budget();
    return TEST_MAIN_END();
}

/* Unit tests for lib/event.c: every constructor makes a catalogued type with the
 * payload docs/events.md describes, spelled by the catalogue of payload keys
 * (PK_* in session.h), and the reducer reads it back. */
#include "event.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"

static void reduce(session_view *v, sstore_event e)
{
    json_t *env = json_pack("{s:s, s:o}", "type", e.type, "payload", e.payload);
    CHECK(session_known_type(e.type));
    CHECK_EQ_INT(session_reduce(v, env, NULL), 0);
    json_decref(env);
}

static void test_tool_events(void)
{
    session_view v;
    session_view_init(&v);
    json_t *created = json_pack("{s:s}", "agent", "a");
    sstore_event c = {"session:created", created, "user", ""};
    reduce(&v, c);
    json_t *args = json_pack("{s:s}", "path", "/x");
    sstore_event e = event_tool_called("c1", "fs__read", args, "fs", "read", 0, "r1", NULL, 0);
    CHECK_EQ_STR(json_string_value(json_object_get(e.payload, "server")), "fs");
    CHECK(json_is_false(json_object_get(e.payload, "sideEffecting")));
    CHECK(json_object_get(e.payload, "phase") == NULL);
    reduce(&v, e);
    CHECK_EQ_UINT(json_array_size(v.open_calls), 1);
    json_t *out = json_string("text");
    e = event_tool_result("c1", out, 0, 0, 12);
    CHECK_EQ_INT(json_integer_value(json_object_get(e.payload, "durationMs")), 12);
    reduce(&v, e);
    CHECK_EQ_UINT(json_array_size(v.open_calls), 0);
    e = event_tool_called("c2", "write", NULL, "fs", "write", 1, NULL, "p", 3);
    CHECK_EQ_INT(json_integer_value(json_object_get(e.payload, "step")), 3);
    CHECK(json_is_object(json_object_get(e.payload, "arguments")));
    CHECK(json_object_get(e.payload, "requestId") == NULL);
    reduce(&v, e);
    reduce(&v, event_tool_loop_stopped("maxTurns", 2));
    reduce(&v, event_tool_server_failed("fs", "gone"));
    json_decref(args);
    json_decref(out);
    session_view_free(&v);
}

static void test_workflow_events(void)
{
    session_view v;
    session_view_init(&v);
    sstore_event c = {"session:created", json_pack("{s:s, s:i}", "workflow", "w", "version", 1), "user", ""};
    reduce(&v, c);
    json_t *name = json_string("Write");
    reduce(&v, event_step_started("p", 0, "tool", name));
    CHECK(v.step_open);
    reduce(&v, event_state_updated(json_pack("{s:i}", "x", 1)));
    CHECK_EQ_INT(json_integer_value(json_object_get(v.state, "x")), 1);
    reduce(&v, event_step_completed("p", 0, NULL));
    CHECK(!v.step_open);
    CHECK_EQ_INT(v.step, 1);
    reduce(&v, event_input_requested("ok", "approval", "?", NULL, NULL));
    CHECK(v.pending != NULL);
    reduce(&v, event_input_expired("ok"));
    CHECK(v.pending == NULL);
    json_t *t = json_true();
    sstore_event r = event_input_received("ok", t);
    CHECK_EQ_STR(r.actor, "system");
    reduce(&v, r);
    CHECK(json_is_true(json_object_get(v.early, "ok")));
    reduce(&v, event_workflow_failed("boom"));
    CHECK_EQ_STR(v.error, "boom");
    json_decref(t);
    json_decref(name);
    session_view_free(&v);
}


/* Keys whose values are objects of catalogued keys themselves (the rest hold the
 * caller's JSON: arguments, results, state, input, ...). */
static int nested_catalogued(const char *key)
{
    return !strcmp(key, PK_USAGE) || !strcmp(key, PK_RECORDING) || !strcmp(key, PK_NEAREST) || !strcmp(key, PK_FROM) ||
           !strcmp(key, PK_TO) || !strcmp(key, PK_BUDGET) || !strcmp(key, PK_LIMITS);
}

/* Every key of payload is in the catalogue (and so are those of its usage{},
 * recording{}, nearest{}, and provider:failover's from{} and to{}); returns how many keys it saw. */
static int check_keys(const char *type, const json_t *payload)
{
    const char *k;
    json_t *val;
    int n = 0;
    json_object_foreach((json_t *)payload, k, val) {
        if (!session_known_key(k)) {
            fprintf(stderr, "%s: payload key \"%s\" is not in the catalogue (PK_* in lib/session.h)\n", type, k);
            CHECK(session_known_key(k));
        }
        n++;
        if (nested_catalogued(k) && json_is_object(val)) n += check_keys(type, val);
    }
    return n;
}

/* Each constructor, with every optional field given: its type is catalogued, its
 * actor one of three, every key it writes catalogued. */
static void test_constructors_use_catalogued_keys(void)
{
    json_t *obj = json_pack("{s:i}", "x", 1), *str = json_string("s"), *num = json_integer(2);
    json_t *usage = event_usage(3, 4);
    json_t *rec = event_recording_setting("playback", "fast");
    json_t *near = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}", PK_KEY, "k", PK_SESSION, "s", PK_OCCURRENCE, 0,
                             PK_FIELD, "f", PK_RECORDED, "a", PK_REQUESTED, "b");
    json_t *opts = json_pack("[s, s]", "a", "b");
    sstore_event all[] = {
        event_session_created("a", NULL, 0, NULL, obj, rec),
        event_session_created(NULL, "w", 2, obj, obj, rec),
        event_session_cancelled("user"),
        event_cancel_requested(),
        event_stop_requested(),
        event_reply_stopped(),
        event_message_user(str, "queue", "summarise", "0000000000000001_0000000000000002"),
        event_workflow_started(str, num),
        event_workflow_completed(obj),
        event_workflow_failed("boom"),
        event_failed(1, "boom", "step_limit", 2),
        event_failed(0, "boom", "rejected", 1),
        event_phase_entered("p"),
        event_phase_exited("p", "q"),
        event_step_started("p", 0, "human", str),
        event_step_completed("p", 0, "ok"),
        event_step_started_wait("p", 0, "wait", str, opts),
        event_step_branch("p", 0, "go", 1, "q"),
        event_timer_set("p", 0, 1234),
        event_timer_fired("p", 0, 1234),
        event_signal_received("go", obj),
        event_state_updated(json_deep_copy(obj)),
        event_input_requested("ok", "choice", "?", opts, "2026-11-23T00:00:00.000Z"),
        event_input_received("ok", str),
        event_input_answered("ok", str, str),
        event_approval_requested("call_1", "Run t__echo?"),
        event_input_expired("ok"),
        event_budget_requested("budget:1", "?", "costBudgetUsd", 1.5, 1.6, "2026-11-23T00:00:00.000Z"),
        event_budget_exceeded("budget:1", "maxTokens", 100, 120, "rejected"),
        event_agent_started("writer", str, 0),
        event_agent_completed(str, obj, 5, usage, 0.5),
        event_request_started("r1", "openai", "m", 1),
        event_request_ended("r1", "end_turn", usage, 0.5),
        event_request_cancelled("r1", "failed", "HTTP 500"),
        event_request_retried("r1", 2, "failed", "server_error", 500, "HTTP 500", 10, 20),
        event_request_retried("r1", 2, "failover", "overloaded", 529, "HTTP 529", 0, 20),
        event_failover("r1", "anthropic", "m", "openai", "n", 0, "overloaded", 529, "HTTP 529"),
        event_delta(0, "r1", "Hel", 3),
        event_delta(1, "r1", "Hm", 2),
        event_tool_called("c1", "fs__read", obj, "fs", "read", 1, "r1", NULL, 0),
        event_tool_called("c2", "read", obj, "fs", "read", 0, NULL, "p", 1),
        event_tool_result("c1", obj, 1, 1, 7),
        event_tool_denied("c1", str),
        event_tool_approved("c1"),
        event_tool_loop_stopped("maxTurns", 3),
        event_tool_server_failed("fs", "gone"),
        event_recording_request("r1", NULL, "k", 0, "playback", "hit", "s", 1, NULL, NULL),
        event_recording_request("r1", NULL, "k", 0, "playback", "diverged", NULL, 0, near, NULL),
        event_recording_request(NULL, "c1", "k", 0, "hybrid", "hit", "s", 1, NULL, NULL),
    };
    int keys = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        CHECK(session_known_type(all[i].type));
        CHECK(!strcmp(all[i].actor, "runner") || !strcmp(all[i].actor, "user") || !strcmp(all[i].actor, "system"));
        CHECK(json_is_object(all[i].payload));
        keys += check_keys(all[i].type, all[i].payload);
        json_decref(all[i].payload);
    }
    CHECK(keys > 100);
    /* A key of no catalogue fails the check above. */
    CHECK(!session_known_key("requestID"));
    CHECK(session_known_key("requestId"));
    json_decref(obj);
    json_decref(str);
    json_decref(num);
    json_decref(usage);
    json_decref(rec);
    json_decref(near);
    json_decref(opts);
}

/* The payloads say the same as before the constructors spelled them by the
 * catalogue: the same keys, in the same order, the same values. */
static void test_payloads_on_the_wire(void)
{
    json_t *hi = json_string("hi");
    struct {
        sstore_event e;
        const char *want;
    } cases[] = {
        {event_session_created("a", NULL, 0, NULL, NULL, NULL), "{\"agent\":\"a\",\"input\":{}}"},
        {event_message_user(hi, "interrupt", "greet", NULL),
         "{\"content\":\"hi\",\"mode\":\"interrupt\",\"skill\":\"greet\"}"},
        {event_delta(0, "r1", "a\0b\xc3\xa9", 5), "{\"requestId\":\"r1\",\"text\":\"a\\u0000b\xc3\xa9\"}"},
        {event_delta(1, "r2", "", 0), "{\"requestId\":\"r2\",\"text\":\"\"}"},
        {event_input_requested("ok", "approval", "OK?", NULL, "2026-11-23T00:00:00.000Z"),
         "{\"interactionId\":\"ok\",\"input\":\"approval\",\"prompt\":\"OK?\",\"expiresAt\":\"2026-11-23T00:00:00.000Z\"}"},
        {event_recording_request("r1", NULL, "k", 2, "playback", "hit", "s1", 1, NULL, NULL),
         "{\"requestId\":\"r1\",\"key\":\"k\",\"occurrence\":2,\"mode\":\"playback\",\"outcome\":\"hit\","
         "\"recording\":{\"session\":\"s1\",\"occurrence\":1}}"},
        {event_recording_request(NULL, "c1", "k", 0, "record", "recorded", NULL, 0, NULL, NULL),
         "{\"kind\":\"tool\",\"callId\":\"c1\",\"key\":\"k\",\"occurrence\":0,\"mode\":\"record\",\"outcome\":\"recorded\"}"},
    };
    json_t *u = event_usage(3, 4);
    char *s = json_dumps(u, JSON_COMPACT);
    CHECK_EQ_STR(s, "{\"inputTokens\":3,\"outputTokens\":4}");
    free(s);
    json_decref(u);
    json_t *r = event_recording_setting(NULL, "realtime");
    s = json_dumps(r, JSON_COMPACT);
    CHECK_EQ_STR(s, "{\"timing\":\"realtime\"}");
    free(s);
    json_decref(r);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s = json_dumps(cases[i].e.payload, JSON_COMPACT);
        CHECK_EQ_STR(s, cases[i].want);
        free(s);
        json_decref(cases[i].e.payload);
    }
    json_decref(hi);
}

/* Each catalogued key is documented in docs/events.md (as `key`). */
static void test_keys_documented(void)
{
    FILE *f = fopen("docs/events.md", "r");
    if (!CHECK(f != NULL)) return;
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    for (int i = 0; session_payload_keys[i]; i++) {
        char want[64];
        snprintf(want, sizeof want, "`%s`", session_payload_keys[i]);
        if (!strstr(doc, want)) fprintf(stderr, "payload key %s is not in docs/events.md\n", want);
        CHECK(strstr(doc, want) != NULL);
    }
}

/* Free text that is not UTF-8 (a provider's error cut at 200 bytes inside a
 * character, an MCP server's message) makes an event with U+FFFD, never a NULL
 * payload (make aborted: the runner died on every retry of the request). */
static void test_text_not_utf8(void)
{
    const char *cut = "overloaded: \xc3\xbc" "berlastet \xe2\x82";
    const char *want = "overloaded: \xc3\xbc" "berlastet \xef\xbf\xbd\xef\xbf\xbd";
    sstore_event e = event_request_retried("r1", 2, "failed", "http_5xx", 529, cut, 1000, 2000);
    CHECK_EQ_STR(json_string_value(json_object_get(e.payload, PK_ERROR)), want);
    json_decref(e.payload);
    e = event_failed(0, cut, "provider_error", 3);
    CHECK_EQ_STR(json_string_value(json_object_get(e.payload, PK_ERROR)), want);
    json_decref(e.payload);
    e = event_workflow_failed("\xff");
    CHECK_EQ_STR(json_string_value(json_object_get(e.payload, PK_ERROR)), "\xef\xbf\xbd");
    json_decref(e.payload);
    e = event_tool_server_failed("files", cut);
    CHECK_EQ_STR(json_string_value(json_object_get(e.payload, PK_ERROR)), want);
    json_decref(e.payload);
    e = event_request_cancelled("r1", "cancelled", cut);
    CHECK_EQ_STR(json_string_value(json_object_get(e.payload, PK_ERROR)), want);
    json_decref(e.payload);
}

int main(void)
{
    test_tool_events();
    test_text_not_utf8();
    test_workflow_events();
    test_constructors_use_catalogued_keys();
    test_payloads_on_the_wire();
    test_keys_documented();
    return TEST_MAIN_END();
}

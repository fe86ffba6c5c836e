/* Unit tests for lib/event.c: every constructor makes a catalogued type with the
 * payload docs/events.md describes, and the reducer reads it back. */
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
    reduce(&v, event_input_requested(json_pack("{s:s, s:s, s:s}", "interactionId", "ok", "input", "approval", "prompt", "?")));
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

int main(void)
{
    test_tool_events();
    test_workflow_events();
    return TEST_MAIN_END();
}

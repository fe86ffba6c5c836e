/* event: typed event constructors (see event.h). */
#include "event.h"

#include <stdlib.h>
#include <string.h>

static sstore_event make(const char *type, json_t *payload)
{
    sstore_event e;
    memset(&e, 0, sizeof e);
    if (!payload) abort();
    e.type = type;
    e.payload = payload;
    e.actor = "runner";
    return e;
}

sstore_event event_tool_called(const char *call_id, const char *name, const json_t *arguments,
                               const char *server, const char *tool, int side_effecting,
                               const char *request_id, const char *phase, int step)
{
    json_t *p = json_pack("{s:s, s:s, s:O, s:b}", "callId", call_id, "name", name, "arguments",
                          arguments ? arguments : json_object(), "sideEffecting", side_effecting);
    if (!arguments) json_decref(json_object_get(p, "arguments"));
    if (server) json_object_set_new(p, "server", json_string(server));
    if (tool) json_object_set_new(p, "tool", json_string(tool));
    if (request_id) json_object_set_new(p, "requestId", json_string(request_id));
    if (phase) {
        json_object_set_new(p, "phase", json_string(phase));
        json_object_set_new(p, "step", json_integer(step));
    }
    return make(EV_TOOL_CALLED, p);
}

sstore_event event_tool_result(const char *call_id, const json_t *result, int is_error, int failed,
                               int64_t duration_ms)
{
    json_t *p = json_pack("{s:s, s:O, s:b, s:b, s:I}", "callId", call_id, "result",
                          result ? result : json_null(), "isError", is_error, "failed", failed,
                          "durationMs", (json_int_t)duration_ms);
    return make(EV_TOOL_RESULT, p);
}

sstore_event event_tool_loop_stopped(const char *reason, int turns)
{
    return make(EV_TOOL_LOOP_STOPPED, json_pack("{s:s, s:i}", "reason", reason, "turns", turns));
}

sstore_event event_tool_server_failed(const char *server, const char *error)
{
    return make(EV_TOOL_SERVER_FAILED, json_pack("{s:s, s:s}", "server", server, "error", error));
}

sstore_event event_step_started(const char *phase, int step, const char *kind, const json_t *name)
{
    json_t *p = json_pack("{s:s, s:i, s:s}", "phase", phase, "step", step, "kind", kind);
    if (name) json_object_set(p, "name", (json_t *)name);
    return make(EV_STEP_STARTED, p);
}

sstore_event event_step_completed(const char *phase, int step, const char *interaction_id)
{
    json_t *p = json_pack("{s:s, s:i}", "phase", phase, "step", step);
    if (interaction_id) json_object_set_new(p, "interactionId", json_string(interaction_id));
    return make(EV_STEP_COMPLETED, p);
}

sstore_event event_state_updated(json_t *state)
{
    return make(EV_STATE_UPDATED, json_pack("{s:o}", "state", state));
}

sstore_event event_workflow_failed(const char *error)
{
    return make(EV_WORKFLOW_FAILED, json_pack("{s:s}", "error", error));
}

sstore_event event_input_requested(json_t *request)
{
    return make(EV_INPUT_REQUESTED, request);
}

sstore_event event_input_expired(const char *interaction_id)
{
    return make(EV_INPUT_EXPIRED, json_pack("{s:s}", "interactionId", interaction_id));
}

sstore_event event_input_received(const char *interaction_id, const json_t *response)
{
    sstore_event e = make(EV_INPUT_RECEIVED, json_pack("{s:s, s:O}", "interactionId", interaction_id,
                                                       "response", response));
    e.actor = "system";
    return e;
}

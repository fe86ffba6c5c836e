/* step_tool: a `tool` step calls one tool of an MCP server of the operator's.
 *
 * Opening the step records nothing but step:started. On the next look, once the
 * server's tools are known (its start may take a moment: the runner looks again
 * when it is ready), the arguments are rendered from the state and the call is
 * recorded (tool:called, with whether it has side effects); only once that is in
 * the log is it run, by the runner's call machinery, which also decides what a
 * restart does to a call that was in flight (a side-effecting one is never run
 * twice). The result completes the step: tool:result, then the state update from
 * "$output" and step:completed in the same commit, or workflow:failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/mcp.h"
#include "step.h"

#define STEP_TOOL_WAIT_MS 200   /* look again this soon while a server starts */

static void tool_begin(step_ctx *c)
{
    c->ops->emit(c, event_step_started(c->phase, c->step, "tool", json_object_get(c->def, "name")));
}

/* The call this step recorded, still waiting for its result, if any. */
static const json_t *open_call(step_ctx *c)
{
    size_t i;
    const json_t *call;
    json_array_foreach(c->v->open_calls, i, call) {
        const char *ph = json_string_value(json_object_get(call, PK_PHASE));
        if (ph && !strcmp(ph, c->phase) && json_integer_value(json_object_get(call, PK_STEP)) == c->step)
            return call;
    }
    return NULL;
}

static void tool_resume(step_ctx *c)
{
    char err[512], id[64];
    const char *server = json_string_value(json_object_get(c->def, "server"));
    const char *tool = json_string_value(json_object_get(c->def, "tool"));
    const json_t *tools = NULL, *t;
    size_t i;
    if (open_call(c)) {
        c->ops->run_calls(c);
        return;
    }
    int st = c->ops->tools(c, server, &tools, err, sizeof err);
    if (st > 0) {
        c->ops->timer(c, c->ops->now(c) + STEP_TOOL_WAIT_MS);
        return;
    }
    if (st < 0) {
        step_failf(c, "tool step %s/%s: %s", server, tool, err);
        return;
    }
    const json_t *found = NULL;
    json_array_foreach(tools, i, t)
        if (!strcmp(json_string_value(json_object_get(t, "name")) ?: "", tool)) found = t;
    if (!found) {
        step_failf(c, "tool step: MCP server %s has no tool named %s", server, tool);
        return;
    }
    json_t *args = NULL;
    const json_t *tpl = json_object_get(c->def, "arguments");
    int rc = tpl ? workflow_render_json(tpl, c->v->state, c->v->input, c->state_max, &args, err, sizeof err) : 0;
    if (rc) {
        step_fail_rc(c, rc, "tool step %s/%s arguments: %s", server, tool, err);
        return;
    }
    c->ops->new_call_id(c, id, sizeof id);
    int side = mcp_tool_side_effecting(c->ops->server_conf(c, server), found);
    c->ops->emit(c, event_tool_called(id, tool, args, server, tool, side, NULL, c->phase, c->step));
    json_decref(args);
}

void step_tool_finish(step_ctx *c, const json_t *call, const json_t *result, int is_error, int failed,
                      int64_t duration_ms)
{
    char err[512];
    const char *id = json_string_value(json_object_get(call, PK_CALL_ID));
    const char *tool = json_string_value(json_object_get(call, PK_TOOL));
    c->ops->emit(c, event_tool_result(id, result, is_error, failed, duration_ms));
    if (is_error) {
        char *text = json_is_string(result) ? NULL : json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
        step_failf(c, "tool step %s: %.300s", tool ? tool : "?", text ? text : json_string_value(result));
        free(text);
        return;
    }
    json_t *state = json_deep_copy(c->v->state);
    int rc = workflow_apply_update(state, json_object_get(c->def, "update"), result, NULL, c->v->input, c->state_max,
                                   err, sizeof err);
    if (rc) {
        json_decref(state);
        step_fail_rc(c, rc, "tool step %s update: %s", tool ? tool : "?", err);
        return;
    }
    c->ops->emit(c, event_state_updated(state));
    c->ops->emit(c, event_step_completed(c->phase, c->step, NULL));
}

const step_exec step_tool = {"tool", tool_begin, tool_resume};

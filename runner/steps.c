/* steps: the step kinds (runner/step.h) bound to the runner: their operations
 * queue events on the session's outbox, set its timer, and reach the provider
 * machinery (turn.c) and the MCP servers (runner/mcp_pool, tools.c). */
#include <stdio.h>
#include <string.h>

#include "../lib/timefmt.h"
#include "../lib/utf8.h"
#include "steps.h"
#include "mcp_pool.h"
#include "outbox.h"
#include "step.h"
#include "step_kinds.h"
#include "tap.h"
#include "tools.h"
#include "turn.h"

typedef struct binding {
    runner_t *R;
    sess_t *s;
} binding;

static void op_emit(step_ctx *c, sstore_event e)
{
    binding *b = c->ud;
    outbox_emit_as(b->R, b->s, e.type, e.payload, e.actor);
}

static void op_fail(step_ctx *c, const char *reason, const char *msg)
{
    binding *b = c->ud;
    turn_fail_workflow(b->R, b->s, reason, "%s", msg);
}

static void op_timer(step_ctx *c, int64_t at)
{
    binding *b = c->ud;
    if (!b->s->timer_ms || at < b->s->timer_ms) b->s->timer_ms = at;
}

static int64_t op_now(step_ctx *c)
{
    (void)c;
    return timefmt_now_ms();
}

static void op_agent_resume(step_ctx *c)
{
    binding *b = c->ud;
    turn_agent_step(b->R, b->s, c->v, c->def);
}

static int op_tools(step_ctx *c, const char *server, const json_t **tools, char *err, size_t errcap)
{
    binding *b = c->ud;
    return tap_tools(b->R, b->s, server, tools, err, errcap);
}

static const json_t *op_server_conf(step_ctx *c, const char *server)
{
    binding *b = c->ud;
    return rmcp_server_conf(b->R->mcp, server);
}

static void op_run_calls(step_ctx *c)
{
    binding *b = c->ud;
    tools_run(b->R, b->s, c->v);
}

static void op_new_call_id(step_ctx *c, char *out, size_t cap)
{
    binding *b = c->ud;
    char r[16];
    sstore_new_id(r, sizeof r);
    snprintf(out, cap, "call_%.12s", r);
    /* Recorded by this process: it runs once in the log. */
    if (!b->s->own_calls) b->s->own_calls = json_object();
    json_object_set_new(b->s->own_calls, out, json_true());
}

static const step_ops runner_ops = {op_emit,  op_fail,        op_timer,     op_now,        op_agent_resume,
                                    op_tools, op_server_conf, op_run_calls, op_new_call_id};

void steps_run(runner_t *R, sess_t *s, const session_view *v, const json_t *def, const char *phase, int step,
               int open)
{
    const char *kind = json_string_value(json_object_get(def, "kind"));
    const step_exec *x = step_lookup(kind);
    binding b = {R, s};
    step_ctx c = {&runner_ops, &b, v, def, phase, step, R->workflow_state_max};
    if (!x) {
        char msg[160];
        snprintf(msg, sizeof msg, "no step kind %.64s", kind ? kind : "(none)");
        turn_fail_workflow(R, s, NULL, "%s", utf8_scrub(msg));
        return;
    }
    if (open) x->resume(&c);
    else x->begin(&c);
}

/* The step a call belongs to must still be the open one: a call that ends after
 * its session moved on (it cannot, as a step waits for its call; but a log is
 * data) only records its result. */
void steps_tool_done(runner_t *R, sess_t *s, const json_t *call, const json_t *result, int is_error, int failed,
                     int64_t duration_ms)
{
    session_view v;
    offset_t none = {0, 0};
    binding b = {R, s};
    session_view_init(&v);
    const char *phase = json_string_value(json_object_get(call, PK_PHASE));
    int step = (int)json_integer_value(json_object_get(call, PK_STEP));
    const json_t *def = NULL;
    if (sstore_view(R->conn, s->id, 0, none, &v, NULL) == 0 && s->workflow && phase && !strcmp(v.phase, phase) &&
        v.step == step && v.step_open) {
        size_t i;
        json_t *ph;
        json_array_foreach(json_object_get(s->workflow, "phases"), i, ph)
            if (!strcmp(json_string_value(json_object_get(ph, "name")) ?: "", phase))
                def = json_array_get(json_object_get(ph, "steps"), (size_t)step);
    }
    if (def) {
        step_ctx c = {&runner_ops, &b, &v, def, phase, step, R->workflow_state_max};
        step_tool_finish(&c, call, result, is_error, failed, duration_ms);
    } else {
        sstore_event e = event_tool_result(json_string_value(json_object_get(call, PK_CALL_ID)), result, is_error,
                                           failed, duration_ms);
        outbox_emit_as(R, s, e.type, e.payload, e.actor);
    }
    session_view_free(&v);
}

/* step_update: an `update` step sets state paths, and is over at once. */
#include "step.h"

static void update_begin(step_ctx *c)
{
    char err[512];
    json_t *state = json_deep_copy(c->v->state);
    int rc = workflow_apply_update(state, json_object_get(c->def, "set"), NULL, NULL, c->v->input, c->state_max, err,
                                   sizeof err);
    if (rc) {
        json_decref(state);
        step_fail_rc(c, rc, "update step: %s", err);
        return;
    }
    c->ops->emit(c, event_step_started(c->phase, c->step, "update", json_object_get(c->def, "name")));
    c->ops->emit(c, event_state_updated(state));
    c->ops->emit(c, event_step_completed(c->phase, c->step, NULL));
}

/* Opened and completed in one commit: never left open. */
static void update_resume(step_ctx *c)
{
    (void)c;
}

const step_exec step_update = {"update", update_begin, update_resume};

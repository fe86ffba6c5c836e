/* step_human: a checkpoint asks a person (input:requested) and waits for the answer
 * (lib/checkpoint), which may have come before it asked; past its timeoutMs it
 * expires, with its onTimeout answer or failing the workflow. */
#include <stdio.h>

#include "../lib/buf.h"
#include "../lib/checkpoint.h"
#include "../lib/timefmt.h"
#include "step.h"

static void human_begin(step_ctx *c)
{
    char err[512];
    buf_t prompt;
    buf_init(&prompt, 1 << 20);
    if (workflow_render(json_string_value(json_object_get(c->def, "prompt")), c->v->state, c->v->input, &prompt,
                        err, sizeof err)) {
        buf_free(&prompt);
        step_failf(c, "checkpoint prompt: %s", err);
        return;
    }
    char ts[40];
    json_t *tmo = json_object_get(c->def, "timeoutMs");
    if (json_is_integer(tmo)) timefmt_format(c->ops->now(c) + json_integer_value(tmo), ts, sizeof ts);
    sstore_event asked = event_input_requested(json_string_value(json_object_get(c->def, "id")),
                                               json_string_value(json_object_get(c->def, "input")),
                                               prompt.p ? prompt.p : "", json_object_get(c->def, "options"),
                                               json_is_integer(tmo) ? ts : NULL);
    buf_free(&prompt);
    c->ops->emit(c, event_step_started(c->phase, c->step, "human", json_object_get(c->def, "name")));
    c->ops->emit(c, asked);
}

static void human_resume(step_ctx *c)
{
    const session_view *v = c->v;
    const char *id = json_string_value(json_object_get(c->def, "id"));
    const json_t *answer = checkpoint_answer(v, c->def);
    char err[512];
    if (answer) {
        /* Answered (now or before it was asked): apply and complete the step. */
        json_t *state = json_deep_copy(v->state);
        int rc = workflow_apply_update(state, json_object_get(c->def, "update"), NULL, answer, v->input, c->state_max,
                                       err, sizeof err);
        if (rc) {
            json_decref(state);
            step_fail_rc(c, rc, "checkpoint %s update: %s", id, err);
            return;
        }
        c->ops->emit(c, event_state_updated(state));
        c->ops->emit(c, event_step_completed(c->phase, c->step, id));
        return;
    }
    if (!v->pending) return;
    const char *exp = json_string_value(json_object_get(v->pending, PK_EXPIRES_AT));
    int64_t at;
    if (!exp || timefmt_parse(exp, &at)) return;
    if (c->ops->now(c) < at) {
        c->ops->timer(c, at);
        return;
    }
    json_t *on = json_object_get(json_object_get(c->def, "onTimeout"), "response");
    c->ops->emit(c, event_input_expired(id));
    if (!on) {
        c->ops->fail(c, NULL, "checkpoint expired");
        return;
    }
    /* The default answer, as if given: the next look applies it. */
    c->ops->emit(c, event_input_received(id, on));
}

const step_exec step_human = {"human", human_begin, human_resume};

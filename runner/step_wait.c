/* step_wait: a wait step waits for any of its named signals (lib/wsignal), with an
 * optional timeout (a timer, as a sleep's: timer:set, timer:fired). The signal it
 * takes, or its timeout, decides its branch: the branch's update (the signal's
 * payload as "$payload") and where the workflow goes next (its "to", recorded in
 * step:completed; without one the phase's next step). A signal that came before
 * the step opened was kept and is taken at once. Nothing is held while it waits. */
#include <stdio.h>

#include "../lib/workflow.h"
#include "../lib/wsignal.h"
#include "step.h"

static void wait_begin(step_ctx *c)
{
    int64_t ms = 0;
    char err[512];
    const json_t *tmo = json_object_get(c->def, "timeout");
    if (tmo && workflow_duration(tmo, &ms, err, sizeof err)) {
        step_failf(c, "wait timeout: %s", err);
        return;
    }
    json_t *names = json_array();
    const char *name;
    const json_t *br;
    json_object_foreach(json_object_get(c->def, "signals"), name, br) json_array_append_new(names, json_string(name));
    c->ops->emit(c, event_step_started_wait(c->phase, c->step, "wait", json_object_get(c->def, "name"), names));
    json_decref(names);
    if (tmo) c->ops->emit(c, event_timer_set(c->phase, c->step, c->ops->now(c) + ms));
}

/* Take the branch br (the signal sig's, or the timeout's when sig is NULL). */
static void take(step_ctx *c, const json_t *br, const json_t *sig)
{
    char err[512];
    const json_t *upd = json_object_get(br, "update");
    const char *name = sig ? json_string_value(json_object_get(sig, PK_NAME)) : NULL;
    if (upd) {
        json_t *state = json_deep_copy(c->v->state);
        int rc = workflow_apply_signal(state, upd, sig ? json_object_get(sig, PK_PAYLOAD) : NULL, c->v->input,
                                       c->state_max, err, sizeof err);
        if (rc) {
            json_decref(state);
            if (name) step_fail_rc(c, rc, "wait: signal %s update: %s", name, err);
            else step_fail_rc(c, rc, "wait: timeout update: %s", err);
            return;
        }
        c->ops->emit(c, event_state_updated(state));
    }
    c->ops->emit(c, event_step_branch(c->phase, c->step, name, !sig,
                                      json_string_value(json_object_get(br, "to"))));
}

static void wait_resume(step_ctx *c)
{
    const json_t *sig = wsignal_take(c->v, c->def);
    if (sig) {
        take(c, json_object_get(json_object_get(c->def, "signals"), json_string_value(json_object_get(sig, PK_NAME))),
             sig);
        return;
    }
    int64_t due = c->v->timer_due;
    if (!due) return;       /* no timeout: only a signal ends it */
    if (c->ops->now(c) < due) {
        c->ops->timer(c, due);
        return;
    }
    c->ops->emit(c, event_timer_fired(c->phase, c->step, due));
    const json_t *ot = json_object_get(c->def, "onTimeout");
    if (!ot) {
        c->ops->fail(c, "timeout", "the wait timed out");
        return;
    }
    take(c, ot, NULL);
}

const step_exec step_wait = {"wait", wait_begin, wait_resume};

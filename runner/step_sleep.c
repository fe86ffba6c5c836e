/* step_sleep: a sleep step sets a timer (timer:set, its due time in the log) and
 * holds nothing while it waits; when the time comes it fires (timer:fired) and the
 * step completes, in one commit. The due time is the log's, so a runner that
 * restarts, or another that takes the session, fires it once at the same time. */
#include <stdio.h>

#include "../lib/buf.h"
#include "../lib/workflow.h"
#include "step.h"

/* When the sleep ends: now + its duration, or the time its until renders to.
 * 0 with *due, or -1 after failing the workflow. */
static int due_of(step_ctx *c, int64_t *due)
{
    char err[512];
    const json_t *d = json_object_get(c->def, "duration");
    if (d) {
        int64_t ms;
        if (workflow_duration(d, &ms, err, sizeof err)) {
            step_failf(c, "sleep duration: %s", err);
            return -1;
        }
        *due = c->ops->now(c) + ms;
        return 0;
    }
    buf_t b;
    buf_init(&b, 1024);
    int rc = workflow_render(json_string_value(json_object_get(c->def, "until")), c->v->state, c->v->input, &b, err,
                             sizeof err);
    if (rc) step_failf(c, "sleep until: %s", rc == -2 ? "the time is longer than 1024 bytes" : err);
    else if (workflow_time(b.p ? b.p : "", due)) {
        step_failf(c, "sleep until: \"%.64s\" is not a time (RFC 3339, or milliseconds since the epoch)",
                   b.p ? b.p : "");
        rc = -1;
    }
    buf_free(&b);
    return rc ? -1 : 0;
}

static void sleep_begin(step_ctx *c)
{
    int64_t due;
    if (due_of(c, &due)) return;
    c->ops->emit(c, event_step_started(c->phase, c->step, "sleep", json_object_get(c->def, "name")));
    c->ops->emit(c, event_timer_set(c->phase, c->step, due));
}

/* The timer is the view's (timer:set): due, it fires; else the session is looked
 * at again then. */
static void sleep_resume(step_ctx *c)
{
    int64_t due = c->v->timer_due;
    if (due && c->ops->now(c) < due) {
        c->ops->timer(c, due);
        return;
    }
    c->ops->emit(c, event_timer_fired(c->phase, c->step, due));
    c->ops->emit(c, event_step_completed(c->phase, c->step, NULL));
}

const step_exec step_sleep = {"sleep", sleep_begin, sleep_resume};

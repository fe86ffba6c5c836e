/* step_agent: an `agent` step opens, then its provider request is started on the
 * next look (from the step now open), retried and completed by the driver's
 * provider machinery, which chat replies share (driver.c). */
#include "step.h"

static void agent_begin(step_ctx *c)
{
    c->ops->emit(c, event_step_started(c->phase, c->step, "agent", json_object_get(c->def, "name")));
}

static void agent_step_resume(step_ctx *c)
{
    c->ops->agent_resume(c);
}

const step_exec step_agent = {"agent", agent_begin, agent_step_resume};

/* step: the table of step kinds (see step.h). */
#include "step.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../lib/utf8.h"
#include "../lib/workflow.h"

static const step_exec *const kinds[] = {&step_agent, &step_tool, &step_update, &step_human, NULL};

const step_exec *step_lookup(const char *kind)
{
    for (int i = 0; kind && kinds[i]; i++)
        if (!strcmp(kinds[i]->kind, kind)) return kinds[i];
    return NULL;
}

void step_failf(step_ctx *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->ops->fail(c, NULL, utf8_scrub(msg));   /* the cut at 511 bytes may split a character */
}

void step_fail_rc(step_ctx *c, int rc, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->ops->fail(c, rc == WORKFLOW_ETOOLARGE ? WORKFLOW_REASON_TOO_LARGE : NULL, utf8_scrub(msg));
}

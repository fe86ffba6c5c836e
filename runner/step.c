/* step: what the step kinds share (see step.h; their table is step_kinds.c). */
#include "step.h"

#include <stdarg.h>
#include <stdio.h>

#include "../lib/utf8.h"
#include "../lib/workflow.h"

/* Fail the step with the message formatted (reason: the machine-readable one, or
 * NULL). The cut at 511 bytes may split a character: scrubbed. */
static void vfail(step_ctx *c, const char *reason, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    c->ops->fail(c, reason, utf8_scrub(msg));
}

void step_failf(step_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(c, NULL, fmt, ap);
    va_end(ap);
}

void step_fail_rc(step_ctx *c, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(c, rc == WORKFLOW_ETOOLARGE ? WORKFLOW_REASON_TOO_LARGE : NULL, fmt, ap);
    va_end(ap);
}

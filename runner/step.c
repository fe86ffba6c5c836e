/* step: what the step kinds share (see step.h; their table is step_kinds.c). */
#include "step.h"

#include <stdarg.h>
#include <stdio.h>

#include "../lib/utf8.h"
#include "../lib/workflow.h"

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

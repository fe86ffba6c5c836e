/* steps: the workflow step kinds (runner/step.h) bound to the runner (runner/steps.c). */
#ifndef DSTREAM_RUNNER_STEPS_H
#define DSTREAM_RUNNER_STEPS_H

#include "types.h"

/* Begin (open 0) or resume (open 1) the step def of v at phase/step. */
void steps_run(runner_t *R, sess_t *s, const session_view *v, const json_t *def, const char *phase, int step,
               int open);
/* A step's tool call ended: complete the step from its result. */
void steps_tool_done(runner_t *R, sess_t *s, const json_t *call, const json_t *result, int is_error, int failed,
                     int64_t duration_ms);

#endif

/* step_kinds: the table of the workflow step kinds (runner/step.h), one row each. */
#ifndef DSTREAM_RUNNER_STEP_KINDS_H
#define DSTREAM_RUNNER_STEP_KINDS_H

#include "step.h"

/* The executor of a kind ("agent", "tool", "update", "human"), or NULL. */
const step_exec *step_lookup(const char *kind);

#endif

/* checkpoint: the rules of a workflow's human checkpoints, in one place for the
 * HTTP side (POST /v1/sessions/{id}/input) and the runner (the human step).
 *
 * A checkpoint is a `human` step with an id; its answer must fit its input kind
 * (approval: a boolean, text: a string, choice: one of its options). An answer may
 * come while the checkpoint is open (pendingInput) or before the session reaches
 * it; it is kept by interactionId until the step that asked consumes it. No I/O. */
#ifndef DSTREAM_CHECKPOINT_H
#define DSTREAM_CHECKPOINT_H

#include <jansson.h>

#include "session.h"

typedef enum {
    CHECKPOINT_OK,              /* take the answer */
    CHECKPOINT_ANSWERED,        /* that checkpoint already has an answer */
    CHECKPOINT_NOT_REQUESTED,   /* no open checkpoint and no step with that id */
    CHECKPOINT_BAD_RESPONSE     /* the answer does not fit the checkpoint */
} checkpoint_verdict;

/* The human step with this id in a workflow document (borrowed), or NULL. */
const json_t *checkpoint_step(const json_t *workflow, const char *id);

/* 1 if response fits what asks for it: an object with "input" (approval, choice,
 * text or budget) and, for choice, "options" (a human step or an input:requested
 * payload). */
int checkpoint_fits(const json_t *asking, const json_t *response);

/* 1 if response answers a budget's checkpoint: false (end the session), a number
 * > 0 (the new value of the limit that was reached) or a non-empty object of new
 * limits, each of costBudgetUsd, maxTokens, maxRequests a number > 0. */
int checkpoint_budget_fits(const json_t *response);

/* Whether an answer to interaction id may be recorded in session v (workflow: the
 * session's workflow document, or NULL). On CHECKPOINT_OK, *caused_by is the offset
 * of the open request it answers (borrowed from v), or NULL if it was not asked yet. */
checkpoint_verdict checkpoint_decide(const session_view *v, const json_t *workflow, const char *id,
                                     const json_t *response, const char **caused_by);

/* The runner's side: the answer the human step `step` of v has (borrowed), or NULL
 * while it waits. An answer that does not fit the step is not one. */
const json_t *checkpoint_answer(const session_view *v, const json_t *step);

#endif

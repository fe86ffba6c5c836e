/* request: one streaming provider request on the runner's curl multi handle
 * (runner/request.c). */
#ifndef DSTREAM_RUNNER_REQUEST_H
#define DSTREAM_RUNNER_REQUEST_H

#include "types.h"

/* A request to the provider of agent (new, not yet sent): NULL if it cannot be
 * made, with the reason in R->start_error when the operator's configuration
 * refuses it. messages ending with an assistant message continue it (the
 * provider's continuation style adds what it needs to the body). */
rq_t *request_new(runner_t *R, sess_t *s, const json_t *agent, const json_t *messages,
                  const char *id, int attempt, int step_agent);
/* q becomes s's request in flight; live: sent to the provider (else its tap
 * answers it). */
void request_send(runner_t *R, rq_t *q, int live);
/* Stop q (removed from the multi handle) and free it; s->rq is cleared if it was q. */
void request_free(runner_t *R, rq_t *q);
/* Queue the deltas received since the last flush. */
void request_flush(runner_t *R, rq_t *q);
/* Feed q response body bytes as if they came from the provider (playback). */
void request_feed(rq_t *q, const char *p, size_t len);

#endif

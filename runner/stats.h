/* stats: the runner's counters for GET /metrics (published through lib/rstats). */
#ifndef DSTREAM_RUNNER_STATS_H
#define DSTREAM_RUNNER_STATS_H

#include "../lib/retry.h"
#include "../lib/rstats.h"
#include "types.h"

/* Call once per loop iteration, after curl_multi_perform and before its finished
 * transfers are handled: looks at the sessions and requests in R (so every
 * provider attempt is seen at least once, with its final HTTP status) and
 * publishes the figures at most once a second. The first call counts a start. */
void runner_stats_tick(runner_t *R);

/* A retry of a provider request was scheduled because of f: counted by its cause
 * (the HTTP status, or the kind of failure; lib/rstats rstats_retry). */
void runner_stats_retry(const retry_failure *f);
/* Count one provider failover, by its pair (lib/rstats rstats_failover). */
void runner_stats_failover(const char *from_provider, const char *from_model, const char *to_provider,
                           const char *to_model);

/* The OpenTelemetry export's figures so far (runner/traces.c), published with the
 * others when they changed. */
void runner_stats_otlp(const rstats_otlp *o);

#endif

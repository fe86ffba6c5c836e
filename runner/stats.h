/* stats: the runner's counters for GET /metrics (published through lib/rstats). */
#ifndef DSTREAM_RUNNER_STATS_H
#define DSTREAM_RUNNER_STATS_H

#include "../lib/retry.h"
#include "../lib/rstats.h"
#include "types.h"

/* How often the figures are published (a commit of their runner_stats row). */
#define RUNNER_STATS_PERIOD_MS 1000

/* Call once per loop iteration, after libcurl's work (curlev_run) and before its finished
 * transfers are handled: looks at the sessions and requests in R (so every
 * provider attempt is seen at least once, with its final HTTP status). The first
 * call counts a start. Publishing is runner_stats_publish's. */
void runner_stats_tick(runner_t *R);

/* Call once per loop iteration, after the iteration's commit: publishes the
 * figures (and reads the other runners' rows, for the share) when
 * runner_stats_due says so; pending: something read from a provider (a delta)
 * still waits for its commit. */
void runner_stats_publish(runner_t *R, int pending);

/* Whether the figures due at due_ms are published at now_ms: once due, but not
 * while a delta waits for its commit (the publish is a commit of its own, an
 * fsync the delta would wait for before its own), unless they are a whole period
 * late (a runner always streaming still publishes, at most once per loop turn
 * and at least every two periods). */
static inline int runner_stats_due(int64_t now_ms, int64_t due_ms, int pending)
{
    if (now_ms < due_ms) return 0;
    return !pending || now_ms >= due_ms + RUNNER_STATS_PERIOD_MS;
}

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

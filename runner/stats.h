/* stats: the runner's counters for GET /metrics (published through lib/rstats). */
#ifndef DSTREAM_RUNNER_STATS_H
#define DSTREAM_RUNNER_STATS_H

#include "../lib/retry.h"
#include "../lib/rstats.h"
#include "types.h"

/* How often the figures are published (a commit of their runner_stats row). */
#define RUNNER_STATS_PERIOD_MS 1000

/* Call once per loop iteration: counts the turn (and the longest), and marks
 * R->fair_mine to be counted again before the turn's first claim decision (driver.c).
 * The first call counts a start. Publishing is runner_stats_publish's. */
void runner_stats_tick(runner_t *R);

/* A provider attempt was sent (request_send): counted as started (a retry if its
 * attempt number is above 1) and in flight. */
void runner_stats_sent(rq_t *q);
/* A request is freed (request_free): if it was sent, it has ended, as a failure if
 * its last HTTP status was not 200 or its stream reported an error; its model,
 * tokens, cost, duration and time to first output (q->first_ms) are counted. */
void runner_stats_freed(runner_t *R, const rq_t *q);

/* The leases this process holds (a walk of its sessions). */
int64_t runner_stats_leased(const runner_t *R);

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

/* retry: the runner's failure policy, in one table.
 *
 * Every way a provider request can end without a complete reply is classified
 * here: which outcomes are retried (HTTP 408, 409, 429, 5xx and 529, a lost
 * connection, a stream that ended without its terminal event, an overloaded or
 * server error reported inside the stream, a request cut off by a runner restart)
 * and which fail at once (any other 4xx: an invalid request, authentication,
 * permission; a stream the parser cannot read; any other status; a connection
 * the operator's address policy refused). Retries spend
 * one of two budgets: restarts (the runner's fault, not the request's: the larger
 * budget) or provider errors. The delay is the provider's own hint when it gives
 * one (OpenAI's retry-after-ms, then Retry-After in seconds or as an HTTP date),
 * else exponential backoff with jitter; never more than the configured maximum.
 * The provider may also say outright whether to retry (Anthropic's x-should-retry),
 * which wins over the table, as the providers' own SDKs do. No I/O here. */
#ifndef DSTREAM_RETRY_H
#define DSTREAM_RETRY_H

#include <stdint.h>

typedef enum {
    RETRY_HTTP,          /* the provider answered a status other than 200 */
    RETRY_TRANSPORT,     /* connection refused, reset or timed out (curl error) */
    RETRY_CUT,           /* a 200 stream that ended without its terminal event */
    RETRY_STREAM_ERROR,  /* an error event inside a 200 stream (error_type) */
    RETRY_MALFORMED,     /* a 200 stream the parser could not read */
    RETRY_RESTART,       /* the request was cut off by a runner restart */
    RETRY_REFUSED        /* the operator's address policy refused the connection (lib/provcfg) */
} retry_kind;

typedef enum { RETRY_BUDGET_PROVIDER, RETRY_BUDGET_RESTART } retry_budget;

typedef struct retry_failure {
    retry_kind kind;
    long status;             /* RETRY_HTTP */
    const char *error_type;  /* RETRY_STREAM_ERROR (e.g. "overloaded_error"), or NULL */
    int should_retry;        /* x-should-retry: 1 true, 0 false, -1 not given */
    const char *retry_after; /* the Retry-After header, or NULL */
    int64_t retry_after_ms;  /* the retry-after-ms header, or -1 */
} retry_failure;

typedef struct retry_config {
    int provider_retries;    /* retries allowed for provider errors per reply */
    int restart_retries;     /* retries allowed for restarts per reply */
    int64_t base_ms, max_ms; /* backoff */
} retry_config;

typedef struct retry_decision {
    int retry;               /* 1: try again after delay_ms; 0: the request failed */
    retry_budget budget;     /* the budget it spends (or would have spent) */
    int exhausted;           /* 0 with retry == 0: the failure is not retryable */
    const char *reason;      /* the table's name for the failure ("rate_limited", ...) */
    int64_t delay_ms;
} retry_decision;

/* Decide what to do about f, given the retries already spent on this reply
 * (provider_used, restart_used). now_ms anchors an HTTP-date Retry-After. */
void retry_decide(const retry_failure *f, int provider_used, int restart_used, const retry_config *cfg,
                  int64_t now_ms, retry_decision *d);

/* Delay before retry attempt (1, 2, ...): the Retry-After header if given (seconds or
 * an HTTP date, relative to now_ms), else base_ms * 2^(attempt-1) with up to 25%
 * jitter, capped at max_ms. */
int64_t retry_delay_ms(int attempt, const char *retry_after, int64_t now_ms, int64_t base_ms, int64_t max_ms);

/* The table's reason for f (what retry_decide puts in d->reason). */
const char *retry_reason(const retry_failure *f);

#endif

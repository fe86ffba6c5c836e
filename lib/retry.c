#include "retry.h"

#include <stddef.h>
#include <string.h>

#include "provider.h"

/* One row per outcome, matched top to bottom: the first row whose kind, status
 * range and error type (NULL: any) fit decides. */
typedef struct rule {
    retry_kind kind;
    long lo, hi;                /* RETRY_HTTP status range */
    const char *error_type;     /* RETRY_STREAM_ERROR type, NULL for any */
    int retry;
    const char *reason;
} rule;

static const rule rules[] = {
    {RETRY_HTTP, 408, 408, NULL, 1, "timeout"},
    {RETRY_HTTP, 409, 409, NULL, 1, "conflict"},
    {RETRY_HTTP, 429, 429, NULL, 1, "rate_limited"},
    {RETRY_HTTP, 529, 529, NULL, 1, "overloaded"},
    {RETRY_HTTP, 500, 599, NULL, 1, "server_error"},
    {RETRY_HTTP, 401, 401, NULL, 0, "authentication"},
    {RETRY_HTTP, 403, 403, NULL, 0, "permission"},
    {RETRY_HTTP, 400, 499, NULL, 0, "rejected"},
    {RETRY_HTTP, 0, 999, NULL, 0, "unexpected_status"},     /* 1xx, 3xx (redirects are not followed) */
    {RETRY_STREAM_ERROR, 0, 0, "overloaded_error", 1, "overloaded"},
    {RETRY_STREAM_ERROR, 0, 0, "rate_limit_error", 1, "rate_limited"},
    {RETRY_STREAM_ERROR, 0, 0, "api_error", 1, "server_error"},
    {RETRY_STREAM_ERROR, 0, 0, "server_error", 1, "server_error"},
    {RETRY_STREAM_ERROR, 0, 0, "timeout_error", 1, "timeout"},
    {RETRY_STREAM_ERROR, 0, 0, "invalid_request_error", 0, "rejected"},
    {RETRY_STREAM_ERROR, 0, 0, "authentication_error", 0, "authentication"},
    {RETRY_STREAM_ERROR, 0, 0, "permission_error", 0, "permission"},
    {RETRY_STREAM_ERROR, 0, 0, "not_found_error", 0, "rejected"},
    {RETRY_STREAM_ERROR, 0, 0, "request_too_large", 0, "rejected"},
    {RETRY_STREAM_ERROR, 0, 0, NULL, 1, "stream_error"},
    {RETRY_TRANSPORT, 0, 0, NULL, 1, "connection"},
    {RETRY_CUT, 0, 0, NULL, 1, "stream_cut"},
    {RETRY_MALFORMED, 0, 0, NULL, 0, "malformed_stream"},
    {RETRY_RESTART, 0, 0, NULL, 1, "restart"},
    {RETRY_REFUSED, 0, 0, NULL, 0, "refused"},
};

static const rule *match(const retry_failure *f)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        const rule *r = &rules[i];
        if (r->kind != f->kind) continue;
        if (r->kind == RETRY_HTTP && (f->status < r->lo || f->status > r->hi)) continue;
        if (r->kind == RETRY_STREAM_ERROR && r->error_type &&
            (!f->error_type || strcmp(r->error_type, f->error_type) != 0))
            continue;
        return r;
    }
    return NULL;
}

const char *retry_reason(const retry_failure *f)
{
    const rule *r = match(f);
    return r ? r->reason : "unknown";
}

void retry_decide(const retry_failure *f, int provider_used, int restart_used, const retry_config *cfg,
                  int64_t now_ms, retry_decision *d)
{
    const rule *r = match(f);
    memset(d, 0, sizeof *d);
    d->reason = r ? r->reason : "unknown";
    d->budget = f->kind == RETRY_RESTART ? RETRY_BUDGET_RESTART : RETRY_BUDGET_PROVIDER;
    int retry = r && r->retry;
    /* The provider's own word wins (a restart, or the operator's refusal, is not
     * the provider's to judge). */
    if (f->kind != RETRY_RESTART && f->kind != RETRY_REFUSED && f->should_retry >= 0) retry = f->should_retry;
    if (!retry) return;
    int used = d->budget == RETRY_BUDGET_RESTART ? restart_used : provider_used;
    int allowed = d->budget == RETRY_BUDGET_RESTART ? cfg->restart_retries : cfg->provider_retries;
    if (used >= allowed) {
        d->exhausted = 1;
        return;
    }
    d->retry = 1;
    int64_t max = cfg->max_ms < 0 ? 0 : cfg->max_ms;
    if (f->retry_after_ms >= 0) d->delay_ms = f->retry_after_ms < max ? f->retry_after_ms : max;
    else d->delay_ms = provider_retry_delay_ms(used + 1, f->retry_after, now_ms, cfg->base_ms, max);
}

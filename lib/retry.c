#include "retry.h"

#include <stddef.h>
#include <string.h>

#include "timefmt.h"

/* Retry-After as delta-seconds, saturating rather than overflowing. */
static int delta_seconds(const char *s, int64_t *ms)
{
    int64_t v = 0;
    if (*s < '0' || *s > '9') return -1;
    for (; *s >= '0' && *s <= '9'; s++)
        v = v > (INT64_MAX / 1000 - 9) / 10 ? INT64_MAX / 1000 : v * 10 + (*s - '0');
    while (*s == ' ' || *s == '\t') s++;
    if (*s) return -1;
    *ms = v * 1000;
    return 0;
}

/* splitmix64 per thread: jitter needs spread, not quality, and no lock. */
static uint64_t jitter_rand(int64_t now_ms)
{
    static _Thread_local uint64_t state;
    if (!state) state = (uint64_t)now_ms ^ (uint64_t)(uintptr_t)&state ^ 0x9e3779b97f4a7c15u;
    uint64_t z = (state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

int64_t retry_delay_ms(int attempt, const char *retry_after, int64_t now_ms,
                       int64_t base_ms, int64_t max_ms)
{
    if (max_ms < 0) max_ms = 0;
    if (retry_after) {
        while (*retry_after == ' ' || *retry_after == '\t') retry_after++;
        int64_t ms, at;
        if (delta_seconds(retry_after, &ms) == 0)
            return ms < max_ms ? ms : max_ms;
        if (timefmt_http_date(retry_after, &at) == 0) {
            ms = at > now_ms ? at - now_ms : 0;
            return ms < max_ms ? ms : max_ms;
        }
        /* Unreadable: fall back to our own schedule. */
    }
    if (attempt < 1) attempt = 1;
    if (base_ms < 0) base_ms = 0;
    int shift = attempt - 1;
    int64_t d = shift >= 62 || base_ms > (max_ms >> shift) ? max_ms : base_ms << shift;
    if (d > max_ms) d = max_ms;
    /* Jitter takes off up to a quarter, so that clients capped at max_ms still
     * spread out and the cap is never exceeded. */
    return d - (int64_t)(jitter_rand(now_ms) % ((uint64_t)d / 4 + 1));
}

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
    else d->delay_ms = retry_delay_ms(used + 1, f->retry_after, now_ms, cfg->base_ms, max);
}

/* Unit tests for lib/retry.c: the failure policy table (what retries, what fails
 * at once, with which reason), the two budgets, the provider's hints and the
 * delay's cap. */
#include "retry.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "test.h"

static const retry_config CFG = {4, 10, 100, 30000};

static retry_failure http(long status)
{
    retry_failure f = {RETRY_HTTP, status, NULL, -1, NULL, -1};
    return f;
}

static retry_failure of(retry_kind kind, const char *etype)
{
    retry_failure f = {kind, 0, etype, -1, NULL, -1};
    return f;
}

/* The table: status (or kind) -> retried or not, and the reason. */
static void test_table(void)
{
    static const struct {
        long status;
        int retry;
        const char *reason;
    } statuses[] = {
        {408, 1, "timeout"}, {409, 1, "conflict"}, {429, 1, "rate_limited"}, {500, 1, "server_error"},
        {502, 1, "server_error"}, {503, 1, "server_error"}, {504, 1, "server_error"}, {529, 1, "overloaded"},
        {599, 1, "server_error"}, {400, 0, "rejected"}, {401, 0, "authentication"}, {403, 0, "permission"},
        {404, 0, "rejected"}, {413, 0, "rejected"}, {422, 0, "rejected"}, {499, 0, "rejected"},
        {301, 0, "unexpected_status"}, {100, 0, "unexpected_status"}, {204, 0, "unexpected_status"},
    };
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        retry_failure f = http(statuses[i].status);
        retry_decision d;
        retry_decide(&f, 0, 0, &CFG, 0, &d);
        if (!CHECK_EQ_INT(d.retry, statuses[i].retry)) fprintf(stderr, "  status %ld\n", statuses[i].status);
        CHECK_EQ_STR(d.reason, statuses[i].reason);
        CHECK_EQ_INT(d.exhausted, 0);
        CHECK_EQ_INT((int)d.budget, (int)RETRY_BUDGET_PROVIDER);
    }
    static const struct {
        retry_kind kind;
        const char *etype;
        int retry;
        const char *reason;
    } kinds[] = {
        {RETRY_TRANSPORT, NULL, 1, "connection"},
        {RETRY_CUT, NULL, 1, "stream_cut"},
        {RETRY_MALFORMED, NULL, 0, "malformed_stream"},
        {RETRY_STREAM_ERROR, "overloaded_error", 1, "overloaded"},
        {RETRY_STREAM_ERROR, "rate_limit_error", 1, "rate_limited"},
        {RETRY_STREAM_ERROR, "api_error", 1, "server_error"},
        {RETRY_STREAM_ERROR, "invalid_request_error", 0, "rejected"},
        {RETRY_STREAM_ERROR, "authentication_error", 0, "authentication"},
        {RETRY_STREAM_ERROR, "permission_error", 0, "permission"},
        {RETRY_STREAM_ERROR, "something_new", 1, "stream_error"},
        {RETRY_STREAM_ERROR, NULL, 1, "stream_error"},
        {RETRY_RESTART, NULL, 1, "restart"},
        {RETRY_REFUSED, NULL, 0, "refused"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        retry_failure f = of(kinds[i].kind, kinds[i].etype);
        retry_decision d;
        retry_decide(&f, 0, 0, &CFG, 0, &d);
        if (!CHECK_EQ_INT(d.retry, kinds[i].retry)) fprintf(stderr, "  kind %d %s\n", kinds[i].kind, kinds[i].etype);
        CHECK_EQ_STR(d.reason, kinds[i].reason);
        CHECK_EQ_STR(retry_reason(&f), kinds[i].reason);
        CHECK_EQ_INT((int)d.budget, (int)(kinds[i].kind == RETRY_RESTART ? RETRY_BUDGET_RESTART : RETRY_BUDGET_PROVIDER));
    }
}

/* Each budget is spent on its own kind only, and its end is reported as such. */
static void test_budgets(void)
{
    retry_failure e = http(529), r = of(RETRY_RESTART, NULL);
    retry_decision d;
    for (int used = 0; used < 4; used++) {
        retry_decide(&e, used, 9, &CFG, 0, &d);
        CHECK_EQ_INT(d.retry, 1);
    }
    retry_decide(&e, 4, 0, &CFG, 0, &d);
    CHECK_EQ_INT(d.retry, 0);
    CHECK_EQ_INT(d.exhausted, 1);
    /* Restarts have their own, larger budget: provider errors do not spend it. */
    retry_decide(&r, 4, 9, &CFG, 0, &d);
    CHECK_EQ_INT(d.retry, 1);
    retry_decide(&r, 0, 10, &CFG, 0, &d);
    CHECK_EQ_INT(d.retry, 0);
    CHECK_EQ_INT(d.exhausted, 1);
    CHECK_EQ_INT((int)d.budget, (int)RETRY_BUDGET_RESTART);
    /* A failure that is not retried is not "exhausted". */
    retry_failure bad = http(400);
    retry_decide(&bad, 0, 0, &CFG, 0, &d);
    CHECK_EQ_INT(d.retry, 0);
    CHECK_EQ_INT(d.exhausted, 0);
    /* A budget of zero retries nothing. */
    retry_config none = {0, 0, 100, 1000};
    retry_decide(&e, 0, 0, &none, 0, &d);
    CHECK_EQ_INT(d.retry, 0);
    CHECK_EQ_INT(d.exhausted, 1);
}

/* Delays: backoff grows and stays under the cap; hints win and are capped too. */
static void test_delays(void)
{
    retry_failure f = http(503);
    retry_decision d;
    int64_t last = 0;
    for (int used = 0; used < 4; used++) {
        retry_decide(&f, used, 0, &CFG, 0, &d);
        int64_t want = (int64_t)100 << used;
        CHECK(d.delay_ms <= want && d.delay_ms >= want - want / 4);
        CHECK(d.delay_ms >= last);
        last = d.delay_ms;
    }
    retry_config big = {40, 10, 100, 2000};
    retry_decide(&f, 30, 0, &big, 0, &d);
    CHECK(d.delay_ms <= 2000 && d.delay_ms >= 1500);
    /* Retry-After in seconds, and as an HTTP date. */
    f.retry_after = "1";
    retry_decide(&f, 0, 0, &CFG, 0, &d);
    CHECK(d.delay_ms == 1000);
    f.retry_after = "3600";
    retry_decide(&f, 0, 0, &CFG, 0, &d);
    CHECK(d.delay_ms == 30000);
    f.retry_after = "Thu, 01 Jan 1970 00:00:05 GMT";
    retry_decide(&f, 0, 0, &CFG, 2000, &d);
    CHECK(d.delay_ms == 3000);
    /* retry-after-ms wins over Retry-After, capped as well. */
    f.retry_after_ms = 250;
    retry_decide(&f, 0, 0, &CFG, 0, &d);
    CHECK(d.delay_ms == 250);
    f.retry_after_ms = 99999999;
    retry_decide(&f, 0, 0, &CFG, 0, &d);
    CHECK(d.delay_ms == 30000);
}

/* x-should-retry: the provider's word wins over the table, but not over a budget,
 * and has no say about restarts. */
static void test_should_retry(void)
{
    retry_decision d;
    retry_failure f = http(529);
    f.should_retry = 0;
    retry_decide(&f, 0, 0, &CFG, 0, &d);
    CHECK_EQ_INT(d.retry, 0);
    CHECK_EQ_INT(d.exhausted, 0);
    f = http(400);
    f.should_retry = 1;
    retry_decide(&f, 0, 0, &CFG, 0, &d);
    CHECK_EQ_INT(d.retry, 1);
    retry_decide(&f, 4, 0, &CFG, 0, &d);
    CHECK_EQ_INT(d.retry, 0);
    CHECK_EQ_INT(d.exhausted, 1);
    f = of(RETRY_RESTART, NULL);
    f.should_retry = 0;
    retry_decide(&f, 0, 0, &CFG, 0, &d);
    CHECK_EQ_INT(d.retry, 1);
    /* Nor does a provider's word make the operator's refusal worth another try. */
    f = of(RETRY_REFUSED, NULL);
    f.should_retry = 1;
    retry_decide(&f, 0, 0, &CFG, 0, &d);
    CHECK_EQ_INT(d.retry, 0);
    CHECK_EQ_INT(d.exhausted, 0);
}

/* The statuses retried and those that fail at once (provider_retryable's list, a
 * second copy of the table's that nothing used, is gone; its cases hold here). */
static void test_statuses(void)
{
    static const long yes[] = {408, 409, 429, 500, 502, 503, 504, 529, 599};
    static const long no[] = {0, 200, 400, 401, 403, 404, 413, 422, 499, 600};
    retry_decision d;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        retry_failure f = http(yes[i]);
        retry_decide(&f, 0, 0, &CFG, 0, &d);
        CHECK(d.retry);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        retry_failure f = http(no[i]);
        retry_decide(&f, 0, 0, &CFG, 0, &d);
        CHECK(!d.retry && !d.exhausted);
    }
}

/* The delay: Retry-After in seconds or as an HTTP date, capped; else backoff with
 * jitter (these cases were test_provider's while the arithmetic was lib/provider's). */
static void test_delay_ms(void)
{
    const int64_t now = INT64_C(1445412480000);     /* Wed, 21 Oct 2015 07:28:00 GMT */
    CHECK_EQ_INT(retry_delay_ms(1, "120", now, 1000, 300000), 120000);
    CHECK_EQ_INT(retry_delay_ms(1, " 7 ", now, 1000, 300000), 7000);
    CHECK_EQ_INT(retry_delay_ms(1, "0", now, 1000, 300000), 0);
    CHECK_EQ_INT(retry_delay_ms(1, "120", now, 1000, 60000), 60000);
    CHECK_EQ_INT(retry_delay_ms(1, "99999999999999999999999", now, 1000, 60000), 60000);
    CHECK_EQ_INT(retry_delay_ms(1, "Wed, 21 Oct 2015 07:28:30 GMT", now, 1000, 300000), 30000);
    CHECK_EQ_INT(retry_delay_ms(1, "Thu, 22 Oct 2015 07:28:00 GMT", now, 1000, 300000), 300000);
    CHECK_EQ_INT(retry_delay_ms(1, "Wed, 21 Oct 2015 07:27:00 GMT", now, 1000, 300000), 0);
    const int64_t leap = INT64_C(1709251199000);    /* Thu, 29 Feb 2024 23:59:59 GMT */
    CHECK_EQ_INT(retry_delay_ms(1, "Thu, 29 Feb 2024 23:59:59 GMT", leap - 1500, 1, 10000), 1500);

    /* Unreadable values fall back to backoff: base 1000 on attempt 1 is 750..1000. */
    static const char *const junk[] = {"", "soon", "-5", "1.5", "0x10", "12abc",
        "Wed, 21 Oct 2015 07:28:30 UTC", "Wed, 32 Oct 2015 07:28:30 GMT",
        "Fri, 29 Feb 2023 00:00:00 GMT", "Wed, 21 Oct 2015 24:00:00 GMT",
        "Wed 21 Oct 2015 07:28:30 GMT", "Wed, 21 Foo 2015 07:28:30 GMT"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        int64_t d = retry_delay_ms(1, junk[i], now, 1000, 300000);
        if (!CHECK(d >= 750 && d <= 1000)) fprintf(stderr, "  Retry-After \"%s\": %jd\n", junk[i], (intmax_t)d);
    }

    /* base * 2^(attempt-1), less up to 25%, never over the cap, never overflowing. */
    int64_t lo[8], hi[8];
    for (int a = 1; a <= 7; a++) lo[a] = INT64_MAX, hi[a] = 0;
    unsigned bad = 0;
    for (int i = 0; i < 2000; i++) {
        for (int a = 1; a <= 7; a++) {
            int64_t want = (INT64_C(500) << (a - 1)) < 20000 ? (INT64_C(500) << (a - 1)) : 20000;
            int64_t d = retry_delay_ms(a, NULL, now + i, 500, 20000);
            if (d < want - want / 4 || d > want) bad++;
            if (d < lo[a]) lo[a] = d;
            if (d > hi[a]) hi[a] = d;
        }
    }
    CHECK_EQ_UINT(bad, 0);
    CHECK(lo[1] < 800 && hi[1] > 450 && lo[1] != hi[1]);   /* it does jitter */
    CHECK(lo[7] < 16000 && hi[7] > 19000);                 /* at the cap too */
    for (int a = 60; a < 70; a++) {
        int64_t d = retry_delay_ms(a, NULL, now, INT64_C(1) << 40, INT64_MAX / 2);
        CHECK(d >= INT64_MAX / 2 - INT64_MAX / 8 && d <= INT64_MAX / 2);
    }
    CHECK_EQ_INT(retry_delay_ms(INT32_MAX, NULL, now, 1000, 5000) <= 5000, 1);
    CHECK_EQ_INT(retry_delay_ms(0, NULL, now, 1000, 5000) <= 1000, 1);
    CHECK_EQ_INT(retry_delay_ms(3, NULL, now, 1000, 0), 0);
    CHECK_EQ_INT(retry_delay_ms(3, "30", now, 1000, -5), 0);
}

int main(void)
{
    test_table();
    test_budgets();
    test_delays();
    test_should_retry();
    test_statuses();
    test_delay_ms();
    return TEST_MAIN_END();
}

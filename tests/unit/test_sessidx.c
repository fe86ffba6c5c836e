/* Unit tests for runner/sessidx.c: sessions found by id through growth and removals,
 * and the heap of parked sessions giving them back in the order of their timers,
 * whatever was taken out of its middle. */
#include "../../runner/sessidx.c"

#include <stdio.h>

#include "test.h"

#define N 5000

static void test_index(void)
{
    static sess_t s[N];
    sessidx x;
    memset(&x, 0, sizeof x);
    memset(s, 0, sizeof s);
    for (int i = 0; i < N; i++) {
        snprintf(s[i].id, sizeof s[i].id, "s-%d", i);
        sessidx_add(&x, &s[i]);
    }
    CHECK(x.n == N && x.nbuckets >= N);
    int found = 0;
    for (int i = 0; i < N; i++) found += sessidx_find(&x, s[i].id) == &s[i];
    CHECK_EQ_INT(found, N);
    CHECK(sessidx_find(&x, "s-x") == NULL);
    for (int i = 0; i < N; i += 2) sessidx_del(&x, &s[i]);
    found = 0;
    for (int i = 0; i < N; i++) found += sessidx_find(&x, s[i].id) == (i % 2 ? &s[i] : NULL);
    CHECK_EQ_INT(found, N);
    CHECK(x.n == N / 2);
    sessidx_free(&x);
}

static void test_heap(void)
{
    static sess_t s[N];
    sessidx x;
    memset(&x, 0, sizeof x);
    memset(s, 0, sizeof s);
    CHECK(sessidx_next_due(&x) == 0);
    CHECK(sessidx_pop_due(&x, 1LL << 60) == NULL);
    unsigned r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 1103515245u + 12345u;
        s[i].timer_ms = 1 + (r >> 8) % 100000;
        snprintf(s[i].id, sizeof s[i].id, "h-%d", i);
        sessidx_add(&x, &s[i]);
        sessidx_park(&x, &s[i]);
    }
    sessidx_park(&x, &s[0]);        /* parked already: nothing changes */
    CHECK(x.nheap == N);
    /* A third taken out of the middle (a signal woke them), some deleted. */
    for (int i = 0; i < N; i += 3) sessidx_unpark(&x, &s[i]);
    for (int i = 1; i < N; i += 7) sessidx_del(&x, &s[i]);
    int left = 0;
    for (int i = 0; i < N; i++) left += s[i].heap_at != 0;
    CHECK((size_t)left == x.nheap);
    /* Nothing is due before the soonest timer; then all come out in order. */
    int64_t first = sessidx_next_due(&x);
    CHECK(sessidx_pop_due(&x, first - 1) == NULL);
    int64_t last = 0;
    int popped = 0, ordered = 1;
    sess_t *p;
    while ((p = sessidx_pop_due(&x, 1LL << 60))) {
        ordered &= p->timer_ms >= last && p->heap_at == 0;
        last = p->timer_ms;
        popped++;
    }
    CHECK(ordered);
    CHECK_EQ_INT(popped, left);
    CHECK(x.nheap == 0 && sessidx_next_due(&x) == 0);
    sessidx_free(&x);
}

int main(void)
{
    test_index();
    test_heap();
    return TEST_MAIN_END();
}

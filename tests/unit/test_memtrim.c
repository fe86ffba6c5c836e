/* Unit tests for runner/memtrim.c: when the runner gives memory back after a burst
 * of sessions (a quarter of the peak, then none), never under a steady load nor
 * after a small burst. */
#include "../../runner/memtrim.c"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

static void test_due(void)
{
    memtrim_t m = {0};
    /* A small burst: nothing to give back. */
    for (size_t n = 0; n <= MEMTRIM_MIN - 1; n++) CHECK_EQ_INT(memtrim_due(&m, n), 0);
    CHECK_EQ_INT(memtrim_due(&m, 0), 0);
    /* 2,000 sessions streaming: none while they stream or while most still do. */
    memtrim_t b = {0};
    int trims = 0;
    for (size_t n = 0; n <= 2000; n += 50) trims += memtrim_due(&b, n);
    for (int turn = 0; turn < 1000; turn++) trims += memtrim_due(&b, 1900 + (size_t)(turn % 100));
    CHECK_EQ_INT(trims, 0);
    /* They end: a trim at a quarter (500), at a sixteenth, ..., and at none. */
    size_t at[8];
    for (size_t n = 2000; n + 1 > 0; n--)
        if (memtrim_due(&b, n) && trims < 8) at[trims++] = n;
    CHECK(trims >= 2 && trims <= 6);
    CHECK_EQ_UINT(at[0], 500);
    CHECK_EQ_UINT(at[trims - 1], 0);
    /* Idle afterwards: nothing more. */
    for (int turn = 0; turn < 100; turn++) CHECK_EQ_INT(memtrim_due(&b, 0), 0);
    /* A new burst starts the count again. */
    for (size_t n = 0; n <= 100; n++) CHECK_EQ_INT(memtrim_due(&b, n), 0);
    CHECK_EQ_INT(memtrim_due(&b, 25), 1);
}

/* This process's resident size, KiB (VmRSS). */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) v = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return v;
}

/* The trim gives the freed memory back: 40 MB of small blocks freed at once (what a
 * burst's end leaves), under one still in use at the heap's top (so that the heap
 * cannot simply shrink from its end), stay resident until the trim. */
static void test_turn(void)
{
    enum { N = 20000 };
    static char *v[N];
    for (int i = 0; i < N; i++) {
        v[i] = malloc(2000);
        if (v[i]) memset(v[i], 1, 2000);
    }
    char *keep = malloc(100);
    long full = rss_kib();
    for (int i = 0; i < N; i++) free(v[i]);
    long freed = rss_kib();
    memtrim_t m = {.peak = 100, .burst = 1};
    CHECK_EQ_INT(memtrim_turn(&m, 0, NULL), 1);
    long trimmed = rss_kib();
    fprintf(stderr, "  RSS: %ld KiB in use, %ld freed, %ld trimmed\n", full, freed, trimmed);
    if (TEST_GLIBC_MALLOC) {
        CHECK(freed > full - 8 * 1024);     /* glibc kept it */
        CHECK(trimmed < freed - 30 * 1024); /* the trim gave it back */
    }
    free(keep);
}

int main(void)
{
    test_due();
    test_turn();
    return TEST_MAIN_END();
}

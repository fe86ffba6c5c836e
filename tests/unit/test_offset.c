/* Unit tests for lib/offset.c: formatting, parsing and the sort order. */
#include "offset.h"

#include <stdlib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "test.h"

static int parse_str(const char *s, offset_kind *kind, offset_t *o)
{
    return offset_parse(s, strlen(s), kind, o);
}

static void test_format(void)
{
    char out[OFFSET_LEN + 1];
    offset_format((offset_t){0, 0}, out);
    CHECK_EQ_STR(out, "0000000000000000_0000000000000000");
    CHECK_EQ_UINT(strlen(out), OFFSET_LEN);
    offset_format((offset_t){2, 17}, out);
    CHECK_EQ_STR(out, "0000000000000002_0000000000000017");
    offset_format((offset_t){OFFSET_MAX, OFFSET_MAX}, out);
    CHECK_EQ_STR(out, "9999999999999999_9999999999999999");
    CHECK_EQ_UINT(strlen(out), OFFSET_LEN);
    offset_format((offset_t){1234567890123456ULL, 42}, out);
    CHECK_EQ_STR(out, "1234567890123456_0000000000000042");
    /* The digits written by hand are printf's, over a sweep of values; past
     * OFFSET_MAX (never minted) printf's cut as before. */
    char want[OFFSET_LEN + 1];
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < 2000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        offset_t o = {x % (OFFSET_MAX + 1), (x >> 7) % (i % 2 ? 1000 : OFFSET_MAX + 1)};
        offset_format(o, out);
        snprintf(want, sizeof want, "%016" PRIu64 "_%016" PRIu64, o.seq, o.pos);
        if (!CHECK_EQ_STR(out, want)) break;
    }
    offset_format((offset_t){OFFSET_MAX + 1, 5}, out);
    CHECK_EQ_STR(out, "10000000000000000_000000000000000");
}

static void test_round_trip(void)
{
    static const offset_t cases[] = {
        {0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 17}, {10, 100}, {999, 123456789},
        {OFFSET_MAX, 0}, {0, OFFSET_MAX}, {OFFSET_MAX, OFFSET_MAX},
        {4294967296ULL, 4294967297ULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[OFFSET_LEN + 1];
        offset_kind kind = OFFSET_NOW;
        offset_t o = {77, 77};
        offset_format(cases[i], out);
        CHECK_EQ_INT(offset_parse(out, OFFSET_LEN, &kind, &o), 0);
        CHECK_EQ_INT(kind, OFFSET_AT);
        CHECK_EQ_UINT(o.seq, cases[i].seq);
        CHECK_EQ_UINT(o.pos, cases[i].pos);
    }
    /* A pseudo-random sweep, format(parse(s)) == s as well. */
    uint64_t x = 88172645463325252ULL;
    int ok = 1;
    for (int i = 0; i < 10000 && ok; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        offset_t in = {x % (OFFSET_MAX + 1), (x >> 11) % (OFFSET_MAX + 1)};
        char a[OFFSET_LEN + 1], b[OFFSET_LEN + 1];
        offset_kind kind;
        offset_t o;
        offset_format(in, a);
        if (offset_parse(a, OFFSET_LEN, &kind, &o) || kind != OFFSET_AT || o.seq != in.seq ||
            o.pos != in.pos) {
            fprintf(stderr, "  parse(format()) lost %s\n", a);
            ok = 0;
        }
        offset_format(o, b);
        if (strcmp(a, b) != 0) {
            fprintf(stderr, "  format(parse(%s)) == %s\n", a, b);
            ok = 0;
        }
    }
    CHECK(ok);
}

static void test_special(void)
{
    offset_kind kind = OFFSET_AT;
    offset_t o = {5, 5};
    CHECK_EQ_INT(parse_str("-1", &kind, &o), 0);
    CHECK_EQ_INT(kind, OFFSET_START);
    CHECK_EQ_UINT(o.seq, 0);
    CHECK_EQ_UINT(o.pos, 0);
    o = (offset_t){5, 5};
    CHECK_EQ_INT(parse_str("now", &kind, &o), 0);
    CHECK_EQ_INT(kind, OFFSET_NOW);
    CHECK_EQ_UINT(o.seq, 0);
    CHECK_EQ_UINT(o.pos, 0);
    /* The length is what counts, not a terminator. */
    CHECK_EQ_INT(offset_parse("-1x", 2, &kind, &o), 0);
    CHECK_EQ_INT(kind, OFFSET_START);
    CHECK_EQ_INT(offset_parse("nowhere", 3, &kind, &o), 0);
    CHECK_EQ_INT(kind, OFFSET_NOW);
}

static void test_invalid(void)
{
    static const char *const bad[] = {
        "",
        "-",
        "-2",
        "-10",
        "1",
        "0",
        "NOW",
        "Now",
        "now ",
        " now",
        "-1 ",
        "latest",
        "0000000000000000_000000000000000",      /* one digit short */
        "0000000000000000_00000000000000000",    /* one digit long */
        "000000000000000_00000000000000000",     /* underscore one to the left */
        "00000000000000000_000000000000000",     /* one to the right */
        "00000000000000000000000000000000",      /* no underscore, 32 digits */
        "000000000000000000000000000000000",     /* no underscore, 33 digits */
        "0000000000000000-0000000000000000",
        "0000000000000000 0000000000000000",
        "0000000000000000__000000000000000",
        "000000000000000a_0000000000000000",
        "0000000000000000_000000000000000a",
        "A000000000000000_0000000000000000",
        "+000000000000000_0000000000000000",
        "-000000000000001_0000000000000000",
        "0000000000000000_-000000000000001",
        " 000000000000000_0000000000000000",
        "0000000000000000_000000000000000 ",
        "0x00000000000000_0000000000000000",
        "0000000000000002_0000000000000017\n",
        "2_17",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        offset_kind kind;
        offset_t o;
        if (!CHECK_EQ_INT(parse_str(bad[i], &kind, &o), -1))
            fprintf(stderr, "  accepted \"%s\"\n", bad[i]);
    }
    /* A NUL inside a string of the right length is not a digit. */
    offset_kind kind;
    offset_t o;
    CHECK_EQ_INT(offset_parse("0000000000000000_000000000000\0" "000", OFFSET_LEN, &kind, &o),
                 -1);
    CHECK_EQ_INT(offset_parse("-\0", 2, &kind, &o), -1);
    /* A valid offset given with the wrong length. */
    CHECK_EQ_INT(offset_parse("0000000000000002_0000000000000017", OFFSET_LEN - 1, &kind, &o),
                 -1);
}

typedef struct pair {
    offset_t o;
    char s[OFFSET_LEN + 1];
} pair;

static int cmp_num(const void *a, const void *b)
{
    const offset_t *x = &((const pair *)a)->o, *y = &((const pair *)b)->o;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return 0;
}

/* Formatted offsets sort as strings exactly as the positions sort as numbers. */
static void test_sort_order(void)
{
    enum { N = 2000 };
    pair *p = malloc(N * sizeof *p);
    uint64_t x = 2463534242ULL;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* Mix small numbers (shared prefixes, different lengths) and large ones. */
        uint64_t seq = i % 3 == 0 ? x % 20 : i % 3 == 1 ? x % 100000 : x % (OFFSET_MAX + 1);
        uint64_t pos = i % 2 ? (x >> 7) % 1000 : (x >> 9) % (OFFSET_MAX + 1);
        p[i].o = (offset_t){seq, pos};
        offset_format(p[i].o, p[i].s);
    }
    qsort(p, N, sizeof *p, cmp_num);
    int ok = 1;
    for (int i = 1; i < N && ok; i++) {
        int num = cmp_num(&p[i - 1], &p[i]);
        int str = strcmp(p[i - 1].s, p[i].s);
        if ((num < 0) != (str < 0) || (num == 0) != (str == 0)) {
            fprintf(stderr, "  %s vs %s\n", p[i - 1].s, p[i].s);
            ok = 0;
        }
    }
    CHECK(ok);
    /* The classic trap of unpadded numbers: 9 < 10 must hold as strings too. */
    char a[OFFSET_LEN + 1], b[OFFSET_LEN + 1];
    offset_format((offset_t){9, 90}, a);
    offset_format((offset_t){10, 100}, b);
    CHECK(strcmp(a, b) < 0);
    free(p);
}

int main(void)
{
    test_format();
    test_round_trip();
    test_special();
    test_invalid();
    test_sort_order();
    return TEST_MAIN_END();
}

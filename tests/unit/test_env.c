/* Unit tests for lib/env.c: the one rule for number settings (unset or empty: the
 * default; else a whole base-10 integer in range) and string settings. */
#include "env.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"

static void test_numbers(void)
{
    long long n = 7;
    char err[128] = "";
    unsetenv("DSTREAM_TEST_N");
    CHECK_EQ_INT(env_int("DSTREAM_TEST_N", 42, 1, 100, &n, err, sizeof err), 0);
    CHECK_EQ_INT(n, 42);
    setenv("DSTREAM_TEST_N", "", 1);
    CHECK_EQ_INT(env_int("DSTREAM_TEST_N", 1000, 1, 100, &n, err, sizeof err), 0);   /* the default, even out of range */
    CHECK_EQ_INT(n, 1000);
    static const struct { const char *v; long long want; } good[] = {
        {"1", 1}, {"100", 100}, {"+5", 5}, {" 12", 12}, {"007", 7},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        setenv("DSTREAM_TEST_N", good[i].v, 1);
        CHECK_EQ_INT(env_int("DSTREAM_TEST_N", 42, 1, 100, &n, err, sizeof err), 0);
        CHECK_EQ_INT(n, good[i].want);
    }
    static const char *const bad[] = {"0", "101", "-1", "12x", "1.5", "0x10", " ", "-", "12 ", "1e3",
        "99999999999999999999", "-99999999999999999999", "ten"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("DSTREAM_TEST_N", bad[i], 1);
        n = 7;
        if (!CHECK_EQ_INT(env_int("DSTREAM_TEST_N", 42, 1, 100, &n, err, sizeof err), -1))
            fprintf(stderr, "  accepted \"%s\"\n", bad[i]);
        CHECK_EQ_INT(n, 7);
    }
    setenv("DSTREAM_TEST_N", "12x", 1);
    env_int("DSTREAM_TEST_N", 42, 1, 100, &n, err, sizeof err);
    CHECK_EQ_STR(err, "DSTREAM_TEST_N=12x is not a number in [1, 100]");
    /* The whole range of long long. */
    setenv("DSTREAM_TEST_N", "9223372036854775807", 1);
    CHECK_EQ_INT(env_int("DSTREAM_TEST_N", 0, 0, 9223372036854775807LL, &n, err, sizeof err), 0);
    CHECK(n == 9223372036854775807LL);
    unsetenv("DSTREAM_TEST_N");
}

static void test_strings(void)
{
    unsetenv("DSTREAM_TEST_S");
    CHECK_EQ_STR(env_str("DSTREAM_TEST_S", "def"), "def");
    CHECK(env_str("DSTREAM_TEST_S", NULL) == NULL);
    setenv("DSTREAM_TEST_S", "", 1);
    CHECK_EQ_STR(env_str("DSTREAM_TEST_S", "def"), "def");
    setenv("DSTREAM_TEST_S", "x y", 1);
    CHECK_EQ_STR(env_str("DSTREAM_TEST_S", "def"), "x y");
    unsetenv("DSTREAM_TEST_S");
}

int main(void)
{
    test_numbers();
    test_strings();
    return TEST_MAIN_END();
}

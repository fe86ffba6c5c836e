/* libFuzzer harness for lib/timefmt.c.
 *
 * timefmt_parse takes a C string, so the input is copied and NUL-terminated (an
 * embedded NUL simply ends it). Invariants checked on every input:
 *  - a parsed instant in the four-digit-year range formats to 24 characters that
 *    parse back to the same instant (a zone offset can carry an accepted text
 *    outside that range; test_timefmt.c checks that case, not this harness);
 *  - an input already in the canonical form (YYYY-MM-DDTHH:MM:SS.mmmZ, no leap
 *    second) formats back to itself exactly;
 *  - read as a number of milliseconds, the input's first 8 bytes format and parse
 *    back to the same number when the year has four digits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "timefmt.h"

#define REQUIRE(cond) \
    do { \
        if (!(cond)) abort(); \
    } while (0)

#define MIN_MS (-62167219200000LL)    /* 0000-01-01T00:00:00.000Z */
#define MAX_MS 253402300799999LL      /* 9999-12-31T23:59:59.999Z */

static int canonical(const char *s)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
    if (strlen(s) != 24) return 0;
    for (int i = 0; i < 24; i++) {
        if (shape[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != shape[i]) return 0;
    }
    return !(s[17] == '6' && s[18] == '0');     /* leap second: read as :59 */
}

static void round_trip(int64_t ms)
{
    char out[32];
    int64_t back = 0;
    timefmt_format(ms, out, sizeof out);
    REQUIRE(strlen(out) == 24);
    REQUIRE(timefmt_parse(out, &back) == 0);
    REQUIRE(back == ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    int64_t ms = 0;
    int rc = timefmt_parse(s, &ms);
    REQUIRE(rc == 0 || rc == -1);
    if (rc == 0) {
        /* Every accepted text starts with YYYY-MM-DD. */
        REQUIRE(strlen(s) >= 20 && s[4] == '-' && s[7] == '-');
        if (ms >= MIN_MS && ms <= MAX_MS) round_trip(ms);
        if (canonical(s)) {
            char out[32];
            timefmt_format(ms, out, sizeof out);
            REQUIRE(strcmp(out, s) == 0);
        }
    }

    if (size >= 8) {
        int64_t v;
        memcpy(&v, data, 8);
        /* Any int64 formats without crashing, truncated to the buffer. */
        char small[25];
        timefmt_format(v, small, sizeof small);
        REQUIRE(strlen(small) <= 24);
        int64_t span = MAX_MS - MIN_MS + 1;
        int64_t in = MIN_MS + (int64_t)((uint64_t)v % (uint64_t)span);
        round_trip(in);
    }
    free(s);
    return 0;
}

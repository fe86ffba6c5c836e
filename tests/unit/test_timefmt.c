/* Unit tests for lib/timefmt.c: RFC 3339 parsing and formatting. */
#include "timefmt.h"

#include <string.h>

#include "test.h"

static void check_parse(const char *s, int64_t want, int line)
{
    int64_t ms = -12345;
    int rc = timefmt_parse(s, &ms);
    if (!test_eq_int(rc, 0, __FILE__, line, s, "parsed")) return;
    test_eq_int(ms, want, __FILE__, line, s, "want");
}
#define PARSES(s, want) check_parse((s), (want), __LINE__)

static void check_bad(const char *s, int line)
{
    int64_t ms = 0;
    test_eq_int(timefmt_parse(s, &ms), -1, __FILE__, line, s, "-1 (rejected)");
}
#define REJECTS(s) check_bad((s), __LINE__)

static void test_parse(void)
{
    PARSES("1970-01-01T00:00:00Z", 0);
    PARSES("1970-01-01T00:00:01Z", 1000);
    PARSES("1970-01-02T00:00:00Z", 86400000);
    PARSES("1969-12-31T23:59:59Z", -1000);
    PARSES("2000-01-01T00:00:00Z", 946684800000LL);
    PARSES("2025-01-02T03:04:05Z", 1735787045000LL);
    PARSES("2025-01-02T03:04:05.678Z", 1735787045678LL);
    PARSES("2038-01-19T03:14:08Z", 2147483648000LL);   /* past 32-bit time_t */
    PARSES("9999-12-31T23:59:59.999Z", 253402300799999LL);
    PARSES("0000-01-01T00:00:00Z", -62167219200000LL);
    /* Leap days. */
    PARSES("2024-02-29T00:00:00Z", 1709164800000LL);
    PARSES("2000-02-29T12:00:00Z", 951825600000LL);
    /* Lowercase t and z, and a space for T, as RFC 3339 section 5.6 allows. */
    PARSES("2025-01-02t03:04:05z", 1735787045000LL);
    PARSES("2025-01-02 03:04:05Z", 1735787045000LL);
    /* Fractions: fewer digits scale up, extra digits are truncated. */
    PARSES("2025-01-02T03:04:05.6Z", 1735787045600LL);
    PARSES("2025-01-02T03:04:05.67Z", 1735787045670LL);
    PARSES("2025-01-02T03:04:05.678999999Z", 1735787045678LL);
    PARSES("2025-01-02T03:04:05.000Z", 1735787045000LL);
    PARSES("1969-12-31T23:59:59.500Z", -500);
    /* Offsets. */
    PARSES("2025-01-02T05:04:05+02:00", 1735787045000LL);
    PARSES("2025-01-02T01:04:05-02:00", 1735787045000LL);
    PARSES("2025-01-02T03:34:05+00:30", 1735787045000LL);
    PARSES("2025-01-02T03:04:05+00:00", 1735787045000LL);
    PARSES("2025-01-02T03:04:05-00:00", 1735787045000LL);
    PARSES("2025-01-02T17:49:05.678+14:45", 1735787045678LL);
    PARSES("2025-01-01T23:04:05-04:00", 1735787045000LL);  /* crosses midnight */
    PARSES("1970-01-01T00:00:00+01:00", -3600000);
    /* A leap second is read as the second before it. */
    PARSES("2016-12-31T23:59:60Z", 1483228799000LL);
}

static void test_reject(void)
{
    REJECTS("");
    REJECTS("2025");
    REJECTS("2025-01-02");
    REJECTS("2025-01-02T03:04");
    REJECTS("2025-01-02T03:04:05");          /* no zone */
    REJECTS("2025-01-02T03:04Z");
    REJECTS("2025-01-02T03:04:05.Z");        /* a dot needs digits */
    REJECTS("2025-01-02T03:04:05,5Z");
    REJECTS("2025-01-02T03:04:05ZZ");
    REJECTS("2025-01-02T03:04:05Z ");
    REJECTS(" 2025-01-02T03:04:05Z");
    REJECTS("2025-01-02T03:04:05+02");
    REJECTS("2025-01-02T03:04:05+0200");
    REJECTS("2025-01-02T03:04:05+2:00");
    REJECTS("2025-01-02T03:04:05+02:0");
    REJECTS("2025-01-02T03:04:05+02:00Z");
    REJECTS("2025-01-02T03:04:05+24:00");
    REJECTS("2025-01-02T03:04:05+02:60");
    REJECTS("2025-01-02T03:04:05 +02:00");
    REJECTS("2025-01-02T03:04:05UTC");
    REJECTS("2025-01-02T03:04:05GMT");
    REJECTS("2025-01-02X03:04:05Z");
    REJECTS("2025/01/02T03:04:05Z");
    REJECTS("2025-1-02T03:04:05Z");
    REJECTS("2025-01-2T03:04:05Z");
    REJECTS("25-01-02T03:04:05Z");
    REJECTS("+2025-01-02T03:04:05Z");
    REJECTS("-2025-01-02T03:04:05Z");
    REJECTS("20250102T030405Z");
    REJECTS("2025-01-02T3:04:05Z");
    REJECTS("2025-01-02T03:4:05Z");
    REJECTS("2025-01-02T03:04:5Z");
    REJECTS("2025-01-02T03-04-05Z");
    REJECTS("2025-0a-02T03:04:05Z");
    REJECTS("2025-01-02T03:04:05.12aZ");
    REJECTS("Thu, 02 Jan 2025 03:04:05 GMT");
    REJECTS("1735787045");
    /* Out of range fields. */
    REJECTS("2025-00-10T00:00:00Z");
    REJECTS("2025-13-10T00:00:00Z");
    REJECTS("2025-01-00T00:00:00Z");
    REJECTS("2025-01-32T00:00:00Z");
    REJECTS("2025-02-30T00:00:00Z");
    REJECTS("2025-02-29T00:00:00Z");         /* not a leap year */
    REJECTS("1900-02-29T00:00:00Z");         /* century, not a leap year */
    REJECTS("2025-04-31T00:00:00Z");
    REJECTS("2025-06-31T00:00:00Z");
    REJECTS("2025-09-31T00:00:00Z");
    REJECTS("2025-11-31T00:00:00Z");
    REJECTS("2025-01-02T24:00:00Z");
    REJECTS("2025-01-02T23:60:00Z");
    REJECTS("2025-01-02T23:59:61Z");
    REJECTS("2025-01-02T99:99:99Z");
}

static void check_format(int64_t ms, const char *want, int line)
{
    char out[32];
    memset(out, 'x', sizeof out);
    timefmt_format(ms, out, sizeof out);
    test_eq_str(out, want, __FILE__, line, "timefmt_format()", want);
}
#define FORMATS(ms, want) check_format((ms), (want), __LINE__)

static void test_format(void)
{
    FORMATS(0, "1970-01-01T00:00:00.000Z");
    FORMATS(1, "1970-01-01T00:00:00.001Z");
    FORMATS(1735787045678LL, "2025-01-02T03:04:05.678Z");
    FORMATS(-1, "1969-12-31T23:59:59.999Z");
    FORMATS(-1000, "1969-12-31T23:59:59.000Z");
    FORMATS(-86400001LL, "1969-12-30T23:59:59.999Z");
    FORMATS(951825600000LL, "2000-02-29T12:00:00.000Z");
    FORMATS(253402300799999LL, "9999-12-31T23:59:59.999Z");
    FORMATS(-62167219200000LL, "0000-01-01T00:00:00.000Z");

    /* 25 bytes hold the 24 characters and the NUL; a smaller buffer truncates. */
    char out[25];
    timefmt_format(1735787045678LL, out, sizeof out);
    CHECK_EQ_UINT(strlen(out), 24);
    char small[11];
    timefmt_format(1735787045678LL, small, sizeof small);
    CHECK_EQ_STR(small, "2025-01-02");
}

/* format then parse gives back the same instant, over the whole 4-digit range. */
static void test_round_trip(void)
{
    const int64_t lo = -62167219200000LL, hi = 253402300799999LL;
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    int bad = 0;
    for (int i = 0; i < 20000 && bad < 5; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t ms = lo + (int64_t)(x % (uint64_t)(hi - lo + 1));
        if (i < 3) ms = i == 0 ? lo : i == 1 ? hi : 0;
        char out[32];
        int64_t back = 0;
        timefmt_format(ms, out, sizeof out);
        if (timefmt_parse(out, &back) || back != ms || strlen(out) != 24) {
            fprintf(stderr, "  %" PRId64 " -> %s -> %" PRId64 "\n", ms, out, back);
            bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);

    /* Every day boundary across leap years formats and parses consistently. */
    bad = 0;
    for (int64_t day = -800; day < 800 && bad < 5; day++) {
        int64_t ms = (int64_t)(11000 + day) * 86400000LL;   /* around 2000-02-29 */
        char out[32], again[32];
        int64_t back = 0;
        timefmt_format(ms, out, sizeof out);
        if (timefmt_parse(out, &back) || back != ms) bad++;
        timefmt_format(ms - 1, again, sizeof again);
        if (strcmp(again, out) >= 0) bad++;   /* strictly earlier text */
    }
    CHECK_EQ_INT(bad, 0);
}

/* Whatever parse accepts, format must write in a form parse accepts again: a
 * zone offset must not carry an instant outside years 0000-9999, which the
 * four-digit format cannot express. Either answer is fine, rejecting or
 * round-tripping. */
static void test_zone_at_the_edges(void)
{
    static const char *const edge[] = {
        "9999-12-31T23:59:59-23:59",     /* UTC: 10000-01-01T23:58:59Z */
        "9999-12-31T23:30:00-00:31",
        "0000-01-01T00:00:00+00:01",     /* UTC: -0001-12-31T23:59:00Z */
        "0000-01-01T23:00:00+23:30",
    };
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        int64_t ms = 0, back = 0;
        char out[40];
        if (timefmt_parse(edge[i], &ms) != 0) {
            CHECK(1);
            continue;
        }
        timefmt_format(ms, out, sizeof out);
        if (!CHECK(timefmt_parse(out, &back) == 0 && back == ms))
            fprintf(stderr, "  %s parsed to %" PRId64 ", formatted as %s\n", edge[i], ms, out);
    }
    /* Just inside the range, offsets are fine. */
    PARSES("9999-12-31T23:59:59+01:00", 253402297199000LL);
    PARSES("0000-01-01T00:00:00-01:00", -62167215600000LL);
}

/* IMF-fixdate (Retry-After): the one shape, checked day by day. */
static void test_http_date(void)
{
    int64_t ms = 0;
    CHECK_EQ_INT(timefmt_http_date("Wed, 21 Oct 2015 07:28:00 GMT", &ms), 0);
    CHECK_EQ_INT(ms, INT64_C(1445412480000));
    CHECK_EQ_INT(timefmt_http_date("Thu, 29 Feb 2024 23:59:59 GMT  ", &ms), 0);
    CHECK_EQ_INT(ms, INT64_C(1709251199000));
    CHECK_EQ_INT(timefmt_http_date("Tue, 29 Feb 2000 00:00:00 GMT", &ms), 0);    /* the 400-year rule */
    CHECK_EQ_INT(ms, INT64_C(951782400000));
    static const char *const bad[] = {"", "Wed, 21 Oct 2015 07:28:00 UTC", "Fri, 29 Feb 2023 00:00:00 GMT",
        "Wed, 21 Oct 2015 24:00:00 GMT", "Wed 21 Oct 2015 07:28:30 GMT", "Wed, 21 Foo 2015 07:28:30 GMT",
        "2015-10-21T07:28:00Z", "Thu, 29 Feb 1900 00:00:00 GMT", "Wed, 31 Apr 2024 00:00:00 GMT"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK_EQ_INT(timefmt_http_date(bad[i], &ms), -1);
}

int main(void)
{
    test_http_date();
    test_parse();
    test_reject();
    test_format();
    test_round_trip();
    test_zone_at_the_edges();
    return TEST_MAIN_END();
}

#include "timefmt.h"

#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static int num(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian), after Howard Hinnant. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
    return dm[m - 1];
}

int timefmt_parse(const char *s, int64_t *ms)
{
    int Y, M, D, h, mi, sec, frac = 0;
    size_t n = strlen(s);
    if (n < 20 || num(s, 4, &Y) || s[4] != '-' || num(s + 5, 2, &M) || s[7] != '-' ||
        num(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        num(s + 11, 2, &h) || s[13] != ':' || num(s + 14, 2, &mi) || s[16] != ':' ||
        num(s + 17, 2, &sec))
        return -1;
    if (M < 1 || M > 12 || D < 1 || D > days_in_month(Y, M) || h > 23 || mi > 59 || sec > 60)
        return -1;
    const char *p = s + 19;
    if (*p == '.') {
        int digits = 0;
        p++;
        while (*p >= '0' && *p <= '9') {
            if (digits < 3) frac = frac * 10 + (*p - '0');
            digits++;
            p++;
        }
        if (digits == 0) return -1;
        for (int i = digits; i < 3; i++) frac *= 10;
    }
    int tz = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int th, tm;
        if (num(p + 1, 2, &th) || p[3] != ':' || num(p + 4, 2, &tm) || th > 23 || tm > 59)
            return -1;
        tz = (th * 60 + tm) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return -1;
    }
    if (*p) return -1;
    int64_t secs = days_from_civil(Y, M, D) * 86400 + h * 3600 + mi * 60 + (sec > 59 ? 59 : sec);
    *ms = (secs - tz * 60) * 1000 + frac;
    /* Keep to instants timefmt_format can write back: years 0000 to 9999. */
    if (*ms < days_from_civil(0, 1, 1) * 86400000LL ||
        *ms >= days_from_civil(10000, 1, 1) * 86400000LL)
        return -1;
    return 0;
}

/* v (0 <= v < 10^n) as n decimal digits at o, zero-padded. */
static void put_digits(char *o, int64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        o[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

void timefmt_format(int64_t ms, char *out, size_t cap)
{
    int64_t secs = ms / 1000, rem = ms % 1000;
    if (rem < 0) { rem += 1000; secs--; }
    int64_t days = secs / 86400, sod = secs % 86400;
    if (sod < 0) { sod += 86400; days--; }
    /* civil_from_days */
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    if (m <= 2) y++;
    if (y < 0 || y > 9999 || cap < 25) {
        snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", (int)y, (int)m, (int)d,
                 (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60), (int)rem);
        return;
    }
    /* The digits by hand: every event's createdAt is one (snprintf was a tenth of
     * the instructions of encoding a text delta). */
    char *o = out;
    put_digits(o, y, 4);
    o[4] = '-';
    put_digits(o + 5, m, 2);
    o[7] = '-';
    put_digits(o + 8, d, 2);
    o[10] = 'T';
    put_digits(o + 11, sod / 3600, 2);
    o[13] = ':';
    put_digits(o + 14, sod / 60 % 60, 2);
    o[16] = ':';
    put_digits(o + 17, sod % 60, 2);
    o[19] = '.';
    put_digits(o + 20, rem, 3);
    o[23] = 'Z';
    o[24] = '\0';
}

/* num at *s, advancing *s past the digits. */
static int digits_at(const char **s, int n, int *v)
{
    if (num(*s, n, v)) return -1;
    *s += n;
    return 0;
}

static int expect(const char **s, const char *lit)
{
    size_t n = strlen(lit);
    if (strncmp(*s, lit, n) != 0) return -1;
    *s += n;
    return 0;
}

/* Parsed by hand: strptime's names depend on the locale. */
int timefmt_http_date(const char *s, int64_t *ms)
{
    static const char wdays[] = "MonTueWedThuFriSatSun";
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    int day, mon = -1, year, h, mi, sec;
    if (strlen(s) < 29) return -1;
    int wd_ok = 0;
    for (int i = 0; i < 7; i++) wd_ok |= !strncmp(s, wdays + 3 * i, 3);
    s += 3;
    if (!wd_ok || expect(&s, ", ") || digits_at(&s, 2, &day) || expect(&s, " ")) return -1;
    for (int i = 0; i < 12; i++)
        if (!strncmp(s, months + 3 * i, 3)) mon = i;
    s += 3;
    if (mon < 0 || expect(&s, " ") || digits_at(&s, 4, &year) || expect(&s, " ") ||
        digits_at(&s, 2, &h) || expect(&s, ":") || digits_at(&s, 2, &mi) || expect(&s, ":") ||
        digits_at(&s, 2, &sec) || expect(&s, " GMT"))
        return -1;
    while (*s == ' ' || *s == '\t') s++;
    if (*s || day < 1 || day > days_in_month(year, mon + 1) || h > 23 || mi > 59 || sec > 60) return -1;
    int64_t t = days_from_civil(year, mon + 1, day) * 86400 + h * 3600 + mi * 60 + sec;
    *ms = t * 1000;
    return 0;
}

long long timefmt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t utf8_seq(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    if (!len) return 0;
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t n;
    unsigned lo = 0x80, hi = 0xbf;      /* the range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0) lo = 0xa0;       /* overlong */
        if (c == 0xed) hi = 0x9f;       /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0) lo = 0x90;       /* overlong */
        if (c == 0xf4) hi = 0x8f;       /* above U+10FFFF */
    } else return 0;
    if (len < n || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    return n;
}

/* 1 if code point c is whitespace (utf8.h). */
static int is_space(unsigned long c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* The code point of the well-formed sequence of n bytes at p. */
static unsigned long code_point(const unsigned char *p, size_t n)
{
    unsigned long c = n == 1 ? p[0] : n == 2 ? p[0] & 0x1fu : n == 3 ? p[0] & 0x0fu : p[0] & 0x07u;
    for (size_t i = 1; i < n; i++) c = (c << 6) | (p[i] & 0x3fu);
    return c;
}

size_t utf8_space_at(const char *s, size_t len)
{
    size_t n = utf8_seq(s, len);
    return n && is_space(code_point((const unsigned char *)s, n)) ? n : 0;
}

size_t utf8_space_end(const char *s, size_t len)
{
    /* The last character starts at most 4 bytes back, at a byte that is no continuation. */
    for (size_t n = 1; n <= 4 && n <= len; n++) {
        const char *c = s + len - n;
        if (((unsigned char)*c & 0xc0) == 0x80) continue;
        return utf8_seq(c, n) == n ? utf8_space_at(c, n) : 0;
    }
    return 0;
}

int utf8_valid(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_seq(s + i, len - i);
        if (!n) return 0;
        i += n;
    }
    return 1;
}

char *utf8_lossy(const char *s, size_t len)
{
    /* Each bad byte becomes 3 (EF BF BD): at most 3 * len + 1. */
    if (len > (SIZE_MAX - 1) / 3) return NULL;
    char *out = malloc(3 * len + 1), *o = out;
    if (!out) return NULL;
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_seq(s + i, len - i);
        if (n) {
            memcpy(o, s + i, n);
            o += n;
            i += n;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    *o = '\0';
    return out;
}

char *utf8_scrub(char *s)
{
    size_t len = strlen(s), i = 0;
    while (i < len) {
        size_t n = utf8_seq(s + i, len - i);
        if (n) i += n;
        else s[i++] = '?';
    }
    return s;
}

json_t *utf8_json(const char *s)
{
    if (!s) return json_null();
    /* jansson checks the bytes itself (and refuses what utf8_seq refuses): one look
     * at them when they are UTF-8, the copy only when they are not. */
    size_t len = strlen(s);
    json_t *j = json_stringn(s, len);
    if (j) return j;
    char *fixed = utf8_lossy(s, len);
    j = fixed ? json_stringn_nocheck(fixed, strlen(fixed)) : NULL;
    free(fixed);
    return j;
}

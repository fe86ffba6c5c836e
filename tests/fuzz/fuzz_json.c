/* libFuzzer harness for lib/json.c (and buf_json_escape of lib/buf.c).
 *
 * Invariants checked on every input:
 *  - json_validate returns 0, JSON_EINVAL or JSON_EDEPTH, with errpos inside the
 *    input on failure, and json_messages agrees with it;
 *  - on a valid text, json_messages' spans lie inside the input in increasing,
 *    non-overlapping order, are non-empty, carry no surrounding whitespace, and
 *    each validates on its own; a non-array yields exactly one span, the trimmed
 *    input; an array's spans joined with ',' inside [] validate again;
 *  - when the input is valid UTF-8, escaping it with buf_json_escape and quoting
 *    it gives a valid JSON string. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"

#define REQUIRE(cond) \
    do { \
        if (!(cond)) abort(); \
    } while (0)

typedef struct spans {
    const char *base;
    size_t size;
    size_t n;
    size_t end;          /* end of the last span */
    buf_t joined;        /* "[" span "," span ... */
} spans;

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int on_span(void *ud, const char *p, size_t len)
{
    spans *s = ud;
    REQUIRE(p >= s->base && len <= s->size && (size_t)(p - s->base) <= s->size - len);
    size_t off = (size_t)(p - s->base);
    REQUIRE(len > 0);
    REQUIRE(s->n == 0 || off >= s->end);
    REQUIRE(!is_ws(p[0]) && !is_ws(p[len - 1]));
    REQUIRE(json_validate(p, len, NULL) == 0);
    REQUIRE(buf_puts(&s->joined, s->n ? "," : "[") == 0);
    REQUIRE(buf_append(&s->joined, p, len) == 0);
    s->end = off + len;
    s->n++;
    return 0;
}

/* A strict UTF-8 check written independently of json.c: no overlongs, no
 * surrogates, nothing above U+10FFFF. */
static int utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t k;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) { k = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { k = 2; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { k = 3; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (n - i <= k) return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += k + 1;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    size_t errpos = (size_t)-1;
    int rc = json_validate(s, size, &errpos);
    REQUIRE(rc == 0 || rc == JSON_EINVAL || rc == JSON_EDEPTH);
    if (rc) REQUIRE(errpos <= size);

    spans sp = {s, size, 0, 0, {0}};
    buf_init(&sp.joined, 0);
    int is_array = -1;
    size_t errpos2 = (size_t)-1;
    int rc2 = json_messages(s, size, &is_array, on_span, &sp, &errpos2);
    REQUIRE(rc2 == rc);
    if (rc) {
        REQUIRE(errpos2 == errpos);
        REQUIRE(sp.n == 0);
    } else {
        REQUIRE(is_array == 0 || is_array == 1);
        size_t a = 0, b = size;
        while (a < b && is_ws(s[a])) a++;
        while (b > a && is_ws(s[b - 1])) b--;
        if (!is_array) {
            REQUIRE(sp.n == 1);
            REQUIRE(sp.end == b);
            REQUIRE(s[a] != '[');
        } else {
            REQUIRE(s[a] == '[' && s[b - 1] == ']');
            if (sp.n == 0) REQUIRE(buf_puts(&sp.joined, "[") == 0);
            REQUIRE(buf_puts(&sp.joined, "]") == 0);
            /* Re-assembled from its messages, the array is as valid as before. */
            REQUIRE(json_validate(sp.joined.p, sp.joined.len, NULL) == 0);
        }
    }
    buf_free(&sp.joined);

    if (utf8_ok(data, size)) {
        buf_t e;
        buf_init(&e, 0);
        REQUIRE(buf_puts(&e, "\"") == 0);
        REQUIRE(buf_json_escape(&e, s, size) == 0);
        REQUIRE(buf_puts(&e, "\"") == 0);
        REQUIRE(json_validate(e.p, e.len, NULL) == 0);
        /* A string is one message, whatever it holds. */
        spans one = {e.p, e.len, 0, 0, {0}};
        buf_init(&one.joined, 0);
        REQUIRE(json_messages(e.p, e.len, &is_array, on_span, &one, NULL) == 0);
        REQUIRE(is_array == 0 && one.n == 1 && one.end == e.len);
        buf_free(&one.joined);
        buf_free(&e);
    }
    return 0;
}

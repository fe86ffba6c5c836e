/* Unit tests for lib/buf.c: growth, the ceiling, printf and JSON escaping. */
#include "buf.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"

static void test_empty(void)
{
    buf_t b;
    buf_init(&b, 0);
    CHECK(b.p == NULL);
    CHECK_EQ_UINT(b.len, 0);
    /* An empty append still leaves a NUL-terminated (empty) string. */
    CHECK_EQ_INT(buf_append(&b, "", 0), 0);
    CHECK(b.p != NULL);
    CHECK_EQ_STR(b.p, "");
    buf_reset(&b);
    CHECK_EQ_UINT(b.len, 0);
    buf_free(&b);
    CHECK(b.p == NULL);
    CHECK_EQ_UINT(b.cap, 0);
    /* Reset and free of a never-used buffer are harmless. */
    buf_init(&b, 0);
    buf_reset(&b);
    buf_free(&b);
    buf_free(&b);
}

static void test_growth(void)
{
    buf_t b;
    buf_init(&b, 0);
    char expect[100000];
    size_t n = 0;
    /* Appends of odd sizes across several doublings keep every byte. */
    for (int i = 0; n + 1000 < sizeof expect; i++) {
        char chunk[1000];
        size_t k = (size_t)(i * 37 % 997) + 1;
        for (size_t j = 0; j < k; j++) chunk[j] = (char)('a' + (i + j) % 26);
        if (!CHECK_EQ_INT(buf_append(&b, chunk, k), 0)) break;
        memcpy(expect + n, chunk, k);
        n += k;
        if (b.len != n || b.cap <= b.len || b.p[b.len] != '\0') {
            CHECK(!"length, capacity or terminator wrong after append");
            break;
        }
    }
    CHECK(n > 50000);
    CHECK_MEM(b.p, b.len, expect, n);
    CHECK(b.cap > b.len);

    /* reset keeps the memory; the next append starts at 0. */
    size_t cap = b.cap;
    buf_reset(&b);
    CHECK_EQ_UINT(b.len, 0);
    CHECK_EQ_UINT(b.cap, cap);
    CHECK_EQ_STR(b.p, "");
    CHECK_EQ_INT(buf_puts(&b, "again"), 0);
    CHECK_EQ_STR(b.p, "again");
    buf_free(&b);

    /* Binary data with NULs goes in as is. */
    buf_init(&b, 0);
    CHECK_EQ_INT(buf_append(&b, "a\0b", 3), 0);
    CHECK_MEM(b.p, b.len, "a\0b", 3);
    buf_free(&b);

    /* reserve makes room without changing the contents. */
    buf_init(&b, 0);
    CHECK_EQ_INT(buf_puts(&b, "xy"), 0);
    CHECK_EQ_INT(buf_reserve(&b, 5000), 0);
    CHECK(b.cap >= b.len + 5000 + 1);
    CHECK_EQ_STR(b.p, "xy");
    buf_free(&b);
}

static void test_ceiling(void)
{
    buf_t b;
    buf_init(&b, 10);
    CHECK_EQ_INT(buf_puts(&b, "0123456"), 0);
    char *p = b.p;
    size_t cap = b.cap;

    /* Crossing the ceiling fails and leaves everything as it was. */
    CHECK_EQ_INT(buf_puts(&b, "7890"), BUF_ETOOBIG);
    CHECK_EQ_UINT(b.len, 7);
    CHECK(b.p == p);
    CHECK_EQ_UINT(b.cap, cap);
    CHECK_EQ_STR(b.p, "0123456");

    /* Exactly reaching it is fine; one more byte is not. */
    CHECK_EQ_INT(buf_puts(&b, "789"), 0);
    CHECK_EQ_UINT(b.len, 10);
    CHECK_EQ_STR(b.p, "0123456789");
    CHECK_EQ_INT(buf_append(&b, "x", 1), BUF_ETOOBIG);
    CHECK_EQ_INT(buf_append(&b, "", 0), 0);
    CHECK_EQ_STR(b.p, "0123456789");
    CHECK_EQ_INT(buf_reserve(&b, 1), BUF_ETOOBIG);

    /* A huge length cannot wrap the arithmetic around. */
    CHECK_EQ_INT(buf_append(&b, "x", (size_t)-1), BUF_ETOOBIG);
    CHECK_EQ_INT(buf_reserve(&b, (size_t)-1 - 3), BUF_ETOOBIG);
    CHECK_EQ_STR(b.p, "0123456789");

    /* printf past the ceiling changes nothing either. */
    CHECK_EQ_INT(buf_printf(&b, "%d", 1), BUF_ETOOBIG);
    CHECK_EQ_STR(b.p, "0123456789");
    CHECK_EQ_UINT(b.len, 10);

    /* After a reset the full ceiling is available again. */
    buf_reset(&b);
    CHECK_EQ_INT(buf_printf(&b, "%s", "abcdefghij"), 0);
    CHECK_EQ_INT(buf_printf(&b, "%s", "k"), BUF_ETOOBIG);
    CHECK_EQ_STR(b.p, "abcdefghij");
    buf_free(&b);

    /* A first append larger than the ceiling allocates nothing. */
    buf_init(&b, 4);
    CHECK_EQ_INT(buf_puts(&b, "hello"), BUF_ETOOBIG);
    CHECK(b.p == NULL);
    CHECK_EQ_UINT(b.len, 0);
    buf_free(&b);
}

static void test_printf(void)
{
    buf_t b;
    buf_init(&b, 0);
    CHECK_EQ_INT(buf_printf(&b, "%d-%s-%05.1f", 42, "x", 3.14159), 0);
    CHECK_EQ_STR(b.p, "42-x-003.1");
    CHECK_EQ_UINT(b.len, strlen("42-x-003.1"));
    CHECK_EQ_INT(buf_printf(&b, "|%" PRIu64 "|", UINT64_MAX), 0);
    CHECK_EQ_STR(b.p, "42-x-003.1|18446744073709551615|");
    /* An empty format appends nothing but is a success. */
    size_t len = b.len;
    CHECK_EQ_INT(buf_printf(&b, "%s", ""), 0);
    CHECK_EQ_UINT(b.len, len);
    buf_free(&b);

    /* Output longer than the first allocation grows the buffer in one go. */
    char big[3000];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    buf_init(&b, 0);
    CHECK_EQ_INT(buf_printf(&b, "<%s>", big), 0);
    CHECK_EQ_UINT(b.len, sizeof big + 1);
    CHECK(b.p[0] == '<' && b.p[b.len - 1] == '>' && b.p[b.len] == '\0');
    CHECK(b.p[1] == 'z' && b.p[sizeof big - 1] == 'z');
    buf_free(&b);
}

/* Escape s (n bytes) into a fresh buffer and compare with want. */
static void check_escape(const char *s, size_t n, const char *want, int line)
{
    buf_t b;
    buf_init(&b, 0);
    int rc = buf_json_escape(&b, s, n);
    test_eq_int(rc, 0, __FILE__, line, "buf_json_escape(s)", "0");
    test_eq_mem(b.p ? b.p : "", b.len, want, strlen(want), __FILE__, line, "escaped", want);
    buf_free(&b);
}
#define ESCAPE(s, want) check_escape((s), sizeof(s) - 1, (want), __LINE__)

static void test_json_escape(void)
{
    ESCAPE("", "");
    ESCAPE("plain text", "plain text");
    ESCAPE("\"quoted\"", "\\\"quoted\\\"");
    ESCAPE("back\\slash", "back\\\\slash");
    ESCAPE("a/b", "a/b");
    ESCAPE("\n\r\t", "\\n\\r\\t");
    ESCAPE("\b\f", "\\u0008\\u000c");
    ESCAPE("\x01\x1f", "\\u0001\\u001f");
    ESCAPE("nul\0inside", "nul\\u0000inside");
    /* UTF-8 passes as it is; a byte that starts no well-formed sequence is U+FFFD
     * (a JSON text is UTF-8: an error that echoes the client's path stays valid). */
    ESCAPE("\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80", "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80");
    ESCAPE("a\xff" "b", "a\\ufffdb");
    ESCAPE("\xc0\xaf", "\\ufffd\\ufffd");
    ESCAPE("\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd");
    ESCAPE("cut \xe2\x82", "cut \\ufffd\\ufffd");
    ESCAPE("\xe2\x82\xac\xe2", "\xe2\x82\xac\\ufffd");
    ESCAPE("\x7f", "\x7f");
    /* UTF-8 passes through byte for byte. */
    ESCAPE("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80");
    ESCAPE("\"\xc3\xa9\"\n", "\\\"\xc3\xa9\\\"\\n");

    /* Appends to what is already there. */
    buf_t b;
    buf_init(&b, 0);
    CHECK_EQ_INT(buf_puts(&b, "{\"k\":\""), 0);
    CHECK_EQ_INT(buf_json_escape(&b, "a\"b", 3), 0);
    CHECK_EQ_INT(buf_puts(&b, "\"}"), 0);
    CHECK_EQ_STR(b.p, "{\"k\":\"a\\\"b\"}");
    buf_free(&b);

    /* A long string mixing escapes and plain runs. */
    buf_init(&b, 0);
    char in[2000], want[8000];
    size_t wn = 0;
    for (size_t i = 0; i < sizeof in; i++) {
        in[i] = i % 7 == 0 ? '"' : i % 11 == 0 ? '\x02' : (char)('a' + i % 26);
        if (in[i] == '"') { want[wn++] = '\\'; want[wn++] = '"'; }
        else if (in[i] == '\x02') { memcpy(want + wn, "\\u0002", 6); wn += 6; }
        else want[wn++] = in[i];
    }
    CHECK_EQ_INT(buf_json_escape(&b, in, sizeof in), 0);
    CHECK_MEM(b.p, b.len, want, wn);
    buf_free(&b);
}

/* The ceiling holds for escapes too, and, like every append, a failing escape
 * must leave the buffer as it was (buf.h: "never sees half-valid state"). */
static void test_json_escape_ceiling(void)
{
    buf_t b;
    buf_init(&b, 8);
    CHECK_EQ_INT(buf_puts(&b, "ab"), 0);
    /* cd"efg escapes to 7 bytes: 2 + 7 > 8, though its first 4 would fit. */
    CHECK_EQ_INT(buf_json_escape(&b, "cd\"efg", 6), BUF_ETOOBIG);
    CHECK_EQ_UINT(b.len, 2);
    CHECK_EQ_STR(b.p, "ab");
    /* Fits exactly (starting again from "ab" whatever the failure left). */
    buf_reset(&b);
    CHECK_EQ_INT(buf_puts(&b, "ab"), 0);
    CHECK_EQ_INT(buf_json_escape(&b, "c\"\n", 3), 0);
    CHECK_EQ_STR(b.p, "abc\\\"\\n");
    CHECK_EQ_INT(buf_json_escape(&b, "\x01", 1), BUF_ETOOBIG);
    CHECK_EQ_STR(b.p, "abc\\\"\\n");
    buf_free(&b);
}

int main(void)
{
    test_empty();
    test_growth();
    test_ceiling();
    test_printf();
    test_json_escape();
    test_json_escape_ceiling();
    return TEST_MAIN_END();
}

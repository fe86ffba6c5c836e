/* Unit tests for lib/json.c: the validator and the splitting of top-level arrays
 * into messages. */
#include "json.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"

/* Validate a string literal (its NULs included) and compare the result. */
static void check_valid(const char *s, size_t n, int want, int line)
{
    size_t errpos = (size_t)-1;
    int rc = json_validate(s, n, &errpos);
    if (rc == want) {
        test_note(1, __FILE__, line, NULL);
        if (rc) test_note(errpos <= n, __FILE__, line, "errpos within the input");
        return;
    }
    test_failed++;
    fprintf(stderr, "%s:%d: FAIL: json_validate(\"", __FILE__, line);
    test_dump(s, n);
    fprintf(stderr, "\") == %d, want %d\n", rc, want);
}
#define VALID(lit) check_valid((lit), sizeof(lit) - 1, 0, __LINE__)
#define INVALID(lit) check_valid((lit), sizeof(lit) - 1, JSON_EINVAL, __LINE__)

static void test_scalars(void)
{
    VALID("null");
    VALID("true");
    VALID("false");
    VALID(" \t\r\n null \t\r\n ");
    INVALID("nul");
    INVALID("nulll");
    INVALID("True");
    INVALID("NULL");
    INVALID("undefined");
    INVALID("NaN");
    INVALID("Infinity");
    INVALID("'single'");
    INVALID("");
    INVALID("   ");
    INVALID("\v1");         /* vertical tab is not JSON whitespace */
    INVALID("\f1");
    INVALID("\xc2\xa0" "1");  /* neither is NBSP */
    INVALID("1\0");         /* a NUL after the value is trailing garbage */
    INVALID("\0");
}

static void test_numbers(void)
{
    VALID("0");
    VALID("-0");
    VALID("-0.0");
    VALID("1");
    VALID("-1");
    VALID("123456789012345678901234567890");
    VALID("1.5");
    VALID("0.000001");
    VALID("1e5");
    VALID("1E5");
    VALID("1e+5");
    VALID("1e-5");
    VALID("1.5e10");
    VALID("-0e0");
    VALID("0E-0");
    VALID("1e999999");      /* syntax only: magnitude is not our business */
    INVALID("01");
    INVALID("-01");
    INVALID("00");
    INVALID("1.");
    INVALID(".5");
    INVALID("-.5");
    INVALID("1.e5");
    INVALID("1e");
    INVALID("1e+");
    INVALID("1e-");
    INVALID("1E+-5");
    INVALID("+1");
    INVALID("-");
    INVALID("--1");
    INVALID("- 1");
    INVALID("1 2");
    INVALID("0x10");
    INVALID("1_000");
    INVALID("1.5.5");
    INVALID("[01]");
    INVALID("[1.]");
    INVALID("{\"a\":-}");
}

static void test_strings(void)
{
    VALID("\"\"");
    VALID("\"abc\"");
    VALID("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"");
    VALID("\"\\u0000\"");
    VALID("\"\\u00e9\\u00E9\\uFFFF\"");
    VALID("\"\\ud83d\\ude00\"");       /* a surrogate pair */
    VALID("\"\\ud83d\"");              /* lone surrogates are accepted (json.c) */
    VALID("\"h\xc3\xa9llo\"");         /* 2-byte UTF-8 */
    VALID("\"\xe2\x82\xac\"");         /* 3-byte */
    VALID("\"\xf0\x9f\x98\x80\"");     /* 4-byte */
    VALID("\"\xef\xbf\xbf\"");         /* U+FFFF */
    VALID("\"\xf4\x8f\xbf\xbf\"");     /* U+10FFFF, the last code point */
    VALID("\"\x7f\"");                 /* DEL is not a control character for JSON */
    INVALID("\"");
    INVALID("\"abc");
    INVALID("\"abc\\\"");
    INVALID("\"\\\"");
    INVALID("abc\"");
    INVALID("\"\\x41\"");
    INVALID("\"\\a\"");
    INVALID("\"\\'\"");
    INVALID("\"\\U00e9\"");
    INVALID("\"\\u00e\"");
    INVALID("\"\\u00eg\"");
    INVALID("\"\\u\"");
    INVALID("\"\\u12");
    INVALID("\"\\\0\"");
    /* Raw control characters must be escaped. */
    INVALID("\"a\nb\"");
    INVALID("\"a\tb\"");
    INVALID("\"\x01\"");
    INVALID("\"\x1f\"");
    INVALID("\"a\0b\"");
    /* Invalid UTF-8. */
    INVALID("\"\x80\"");               /* lone continuation byte */
    INVALID("\"\xbf\"");
    INVALID("\"\xc3\"");               /* truncated */
    INVALID("\"\xc3");
    INVALID("\"\xe2\x82\"");
    INVALID("\"\xf0\x9f\x98\"");
    INVALID("\"\xc0\xaf\"");           /* overlong '/' */
    INVALID("\"\xc1\xbf\"");
    INVALID("\"\xe0\x80\xaf\"");       /* overlong 3-byte */
    INVALID("\"\xf0\x80\x80\xaf\"");   /* overlong 4-byte */
    INVALID("\"\xed\xa0\x80\"");       /* an encoded surrogate (CESU) */
    INVALID("\"\xed\xbf\xbf\"");
    INVALID("\"\xf4\x90\x80\x80\"");   /* above U+10FFFF */
    INVALID("\"\xf5\x80\x80\x80\"");
    INVALID("\"\xfe\"");
    INVALID("\"\xff\"");
    INVALID("\"\xc3\x28\"");           /* second byte not a continuation */
    INVALID("\"\xe2\x28\xa1\"");
    INVALID("\xef\xbb\xbf\"bom\"");    /* a byte-order mark is not whitespace */
}

static void test_containers(void)
{
    VALID("[]");
    VALID("{}");
    VALID("[ ]");
    VALID("{ }");
    VALID("[1,2,3]");
    VALID("[ 1 , \"a\" , null , true , [ ] , { } ]");
    VALID("{\"a\":1}");
    VALID("{ \"a\" : 1 , \"b\" : [ { } ] }");
    VALID("{\"a\":1,\"a\":2}");        /* duplicate keys: allowed by RFC 8259 */
    VALID("{\"\":\"\"}");
    VALID("[[[[[]]]]]");
    VALID("{\"a\":{\"b\":{\"c\":[1,{\"d\":null}]}}}");
    INVALID("[");
    INVALID("]");
    INVALID("{");
    INVALID("}");
    INVALID("[1,]");
    INVALID("[,1]");
    INVALID("[,]");
    INVALID("[1 2]");
    INVALID("[1,,2]");
    INVALID("[1}");
    INVALID("{\"a\":1]");
    INVALID("{\"a\"}");
    INVALID("{\"a\":}");
    INVALID("{\"a\" 1}");
    INVALID("{a:1}");
    INVALID("{1:1}");
    INVALID("{\"a\":1,}");
    INVALID("{,}");
    INVALID("{\"a\":1 \"b\":2}");
    INVALID("[1]]");
    INVALID("[[1]");
    /* Trailing garbage after a complete value. */
    INVALID("[] []");
    INVALID("{}x");
    INVALID("1,");
    INVALID("\"a\" \"b\"");
    INVALID("null null");
    INVALID("true false");
}

/* depth open brackets (or braces with keys), closed again. */
static char *nested(size_t depth, int objects, size_t *len)
{
    size_t per = objects ? 5 : 1;   /* {"a": */
    char *s = malloc(depth * (per + 1) + 2);
    size_t n = 0;
    for (size_t i = 0; i < depth; i++) {
        if (objects) { memcpy(s + n, "{\"a\":", 5); n += 5; }
        else s[n++] = '[';
    }
    s[n++] = '1';
    for (size_t i = 0; i < depth; i++) s[n++] = objects ? '}' : ']';
    s[n] = '\0';
    *len = n;
    return s;
}

static void test_depth(void)
{
    size_t n, errpos;
    char *s;
    for (int obj = 0; obj <= 1; obj++) {
        s = nested(JSON_MAX_DEPTH, obj, &n);
        CHECK_EQ_INT(json_validate(s, n, NULL), 0);
        free(s);
        s = nested(JSON_MAX_DEPTH + 1, obj, &n);
        CHECK_EQ_INT(json_validate(s, n, &errpos), JSON_EDEPTH);
        CHECK(errpos < n);
        free(s);
        s = nested(100000, obj, &n);
        CHECK_EQ_INT(json_validate(s, n, NULL), JSON_EDEPTH);
        free(s);
    }
    /* Depth counts nesting, not the number of containers. */
    size_t cap = 4 * 2000 + 3;
    s = malloc(cap);
    n = 0;
    s[n++] = '[';
    for (int i = 0; i < 2000; i++) {
        if (i) s[n++] = ',';
        memcpy(s + n, "[]", 2);
        n += 2;
    }
    s[n++] = ']';
    CHECK_EQ_INT(json_validate(s, n, NULL), 0);
    free(s);
    /* An unclosed deep prefix is invalid, or too deep; never accepted. */
    s = nested(JSON_MAX_DEPTH, 0, &n);
    CHECK_EQ_INT(json_validate(s, JSON_MAX_DEPTH, NULL), JSON_EINVAL);
    free(s);
}

static void test_errpos(void)
{
    size_t pos = 0;
    CHECK_EQ_INT(json_validate("[1,2,x]", 7, &pos), JSON_EINVAL);
    CHECK_EQ_UINT(pos, 5);
    CHECK_EQ_INT(json_validate("{} x", 4, &pos), JSON_EINVAL);
    CHECK_EQ_UINT(pos, 3);
    CHECK_EQ_INT(json_validate("\"ab\x01\"", 5, &pos), JSON_EINVAL);
    CHECK_EQ_UINT(pos, 3);
    /* The length given is the input: a valid prefix is not enough, and bytes
     * beyond len are never looked at. */
    CHECK_EQ_INT(json_validate("[1,2]", 4, NULL), JSON_EINVAL);
    CHECK_EQ_INT(json_validate("[1,2]garbage", 5, NULL), 0);
    CHECK_EQ_INT(json_validate("truex", 4, NULL), 0);
    CHECK_EQ_INT(json_validate("tru", 3, NULL), JSON_EINVAL);
    CHECK_EQ_INT(json_validate("12", 1, NULL), 0);
}

/* ---- json_messages ------------------------------------------------------------ */

typedef struct collected {
    const char *base;
    size_t n;
    json_span spans[64];
    int stop_at;        /* return 7 from the stop_at'th callback (1-based), 0: never */
} collected;

static int collect(void *ud, const char *p, size_t len)
{
    collected *c = ud;
    if (c->n < 64) c->spans[c->n] = (json_span){(size_t)(p - c->base), len};
    c->n++;
    return c->stop_at && (int)c->n == c->stop_at ? 7 : 0;
}

/* Split s and compare the spans with want, a NULL-terminated list of the
 * expected message texts. */
static void check_split(const char *s, int want_array, const char *const *want, int line)
{
    collected c = {s, 0, {{0, 0}}, 0};
    int is_array = -1;
    size_t len = strlen(s);
    int rc = json_messages(s, len, &is_array, collect, &c, NULL);
    if (!test_eq_int(rc, 0, __FILE__, line, "json_messages()", "0")) return;
    test_eq_int(is_array, want_array, __FILE__, line, "is_array", "want_array");
    size_t nwant = 0;
    while (want[nwant]) nwant++;
    if (!test_eq_uint(c.n, nwant, __FILE__, line, "callbacks", "expected messages")) return;
    for (size_t i = 0; i < nwant; i++) {
        json_span sp = c.spans[i];
        test_note(sp.off + sp.len <= len, __FILE__, line, "span inside the input");
        test_eq_mem(s + sp.off, sp.len, want[i], strlen(want[i]), __FILE__, line, "span",
                    want[i]);
        /* Each message is itself a JSON text. */
        test_eq_int(json_validate(s + sp.off, sp.len, NULL), 0, __FILE__, line,
                    "json_validate(span)", "0");
    }
}
#define SPLIT(s, arr, ...) \
    do { \
        static const char *const want_[] = {__VA_ARGS__}; \
        check_split((s), (arr), want_, __LINE__); \
    } while (0)

static void test_messages(void)
{
    SPLIT("[1,2,3]", 1, "1", "2", "3", NULL);
    SPLIT("  [ 1 ,\t\"two\"\n,\r{\"three\": [3]} ]  ", 1, "1", "\"two\"",
          "{\"three\": [3]}", NULL);
    SPLIT("[[1,2],[3]]", 1, "[1,2]", "[3]", NULL);       /* nested arrays stay whole */
    SPLIT("[[]]", 1, "[]", NULL);
    SPLIT("[[[]], []]", 1, "[[]]", "[]", NULL);
    SPLIT("[\"a,b]\", \"]\"]", 1, "\"a,b]\"", "\"]\"", NULL);
    SPLIT("[{\"a\":[1,2]},null]", 1, "{\"a\":[1,2]}", "null", NULL);
    SPLIT("[ -0.5e3 ]", 1, "-0.5e3", NULL);
    /* Non-arrays are one message, trimmed. */
    SPLIT("{\"a\":[1,2]}", 0, "{\"a\":[1,2]}", NULL);
    SPLIT("  {\"a\":1}\n", 0, "{\"a\":1}", NULL);
    SPLIT("\t\"str\"\r\n", 0, "\"str\"", NULL);
    SPLIT("42", 0, "42", NULL);
    SPLIT(" null ", 0, "null", NULL);
    /* An empty array holds no messages. */
    SPLIT("[]", 1, NULL);
    SPLIT(" [ \n ] ", 1, NULL);
}

static void test_messages_errors(void)
{
    collected c = {NULL, 0, {{0, 0}}, 0};
    int is_array = -1;
    size_t pos = 0;
    const char *bad = "[1,2,]";
    c.base = bad;
    CHECK_EQ_INT(json_messages(bad, strlen(bad), &is_array, collect, &c, &pos), JSON_EINVAL);
    CHECK_EQ_UINT(c.n, 0);     /* nothing delivered from an invalid text */
    CHECK_EQ_UINT(pos, 5);
    CHECK_EQ_INT(json_messages("", 0, &is_array, collect, &c, NULL), JSON_EINVAL);
    CHECK_EQ_INT(json_messages("  ", 2, &is_array, collect, &c, NULL), JSON_EINVAL);
    CHECK_EQ_INT(json_messages("[1] 2", 5, &is_array, collect, &c, NULL), JSON_EINVAL);
    CHECK_EQ_UINT(c.n, 0);

    size_t n;
    char *deep = nested(JSON_MAX_DEPTH + 1, 0, &n);
    CHECK_EQ_INT(json_messages(deep, n, &is_array, collect, &c, NULL), JSON_EDEPTH);
    free(deep);
    /* The deepest allowed text is still split. */
    deep = nested(JSON_MAX_DEPTH, 0, &n);
    c.base = deep;
    CHECK_EQ_INT(json_messages(deep, n, &is_array, collect, &c, NULL), 0);
    CHECK_EQ_INT(is_array, 1);
    CHECK_EQ_UINT(c.n, 1);
    CHECK_EQ_UINT(c.spans[0].off, 1);
    CHECK_EQ_UINT(c.spans[0].len, n - 2);
    free(deep);

    /* A non-zero callback result stops the walk and is returned. */
    const char *s = "[1,2,3,4]";
    c = (collected){s, 0, {{0, 0}}, 2};
    CHECK_EQ_INT(json_messages(s, strlen(s), &is_array, collect, &c, NULL), 7);
    CHECK_EQ_UINT(c.n, 2);
    const char *five = "5";
    c = (collected){five, 0, {{0, 0}}, 1};
    CHECK_EQ_INT(json_messages(five, 1, &is_array, collect, &c, NULL), 7);
    CHECK_EQ_INT(is_array, 0);
}

int main(void)
{
    test_scalars();
    test_numbers();
    test_strings();
    test_containers();
    test_depth();
    test_errpos();
    test_messages();
    test_messages_errors();
    return TEST_MAIN_END();
}

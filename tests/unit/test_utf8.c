/* Unit tests for lib/utf8.c: what is well-formed, and the lossy copies. */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"

#define SEQ(s, want) CHECK_EQ_UINT(utf8_seq((s), sizeof(s) - 1), (want))
#define VALID(s, want) CHECK_EQ_INT(utf8_valid((s), sizeof(s) - 1), (want))

static void test_seq(void)
{
    SEQ("", 0);
    SEQ("a", 1);
    SEQ("\xc3\xa9", 2);
    SEQ("\xe2\x82\xac", 3);
    SEQ("\xf0\x9f\x98\x80", 4);
    SEQ("\xf4\x8f\xbf\xbf", 4);      /* U+10FFFF */
    SEQ("\xef\xbf\xbf", 3);          /* U+FFFF: a noncharacter, but well-formed */
    SEQ("\x80", 0);                  /* a continuation byte alone */
    SEQ("\xff", 0);
    SEQ("\xc0\xaf", 0);              /* overlong '/' */
    SEQ("\xc1\xbf", 0);
    SEQ("\xe0\x80\xaf", 0);          /* overlong */
    SEQ("\xf0\x80\x80\xaf", 0);      /* overlong */
    SEQ("\xed\xa0\x80", 0);          /* a surrogate (U+D800) */
    SEQ("\xf4\x90\x80\x80", 0);      /* above U+10FFFF */
    SEQ("\xf5\x80\x80\x80", 0);
    SEQ("\xe2\x82", 0);              /* cut short */
    SEQ("\xe2\x28\xa1", 0);          /* a bad continuation */
}

static void test_valid(void)
{
    VALID("", 1);
    VALID("pub/\xc3\xa9t\xc3\xa9/\xf0\x9f\x98\x80", 1);
    VALID("pub/\xff", 0);
    VALID("pub/\xc3", 0);
    VALID("a\xed\xbf\xbf", 0);
    CHECK_EQ_INT(utf8_valid("a\0b", 3), 1);    /* NUL is a character; paths refuse it elsewhere */
}

static void test_lossy(void)
{
    char *s = utf8_lossy("old/\xff\xfe", 6);
    CHECK_EQ_STR(s, "old/\xef\xbf\xbd\xef\xbf\xbd");
    free(s);
    s = utf8_lossy("\xe2\x82\xac\xe2\x82", 5);
    CHECK_EQ_STR(s, "\xe2\x82\xac\xef\xbf\xbd\xef\xbf\xbd");
    free(s);
    s = utf8_lossy("", 0);
    CHECK_EQ_STR(s, "");
    free(s);

    char cut[] = "a\xc3\xa9\xe2\x82";       /* as a %.4s would leave it */
    CHECK_EQ_STR(utf8_scrub(cut), "a\xc3\xa9??");
    char fine[] = "\xf0\x9f\x98\x80 ok";
    CHECK_EQ_STR(utf8_scrub(fine), "\xf0\x9f\x98\x80 ok");
}

static void test_json(void)
{
    /* jansson refuses these bytes (json_string gives NULL): utf8_json never does. */
    CHECK(json_string("pub/\xff") == NULL);
    json_t *j = utf8_json("pub/\xff");
    CHECK(j != NULL && json_is_string(j));
    CHECK_EQ_STR(json_string_value(j), "pub/\xef\xbf\xbd");
    char *d = json_dumps(j, JSON_ENCODE_ANY);
    CHECK(d != NULL);
    free(d);
    json_decref(j);
    j = utf8_json("pub/\xc3\xa9");
    CHECK_EQ_STR(json_string_value(j), "pub/\xc3\xa9");
    json_decref(j);
    j = utf8_json(NULL);
    CHECK(json_is_null(j));
    json_decref(j);
    /* utf8_json lets jansson judge the bytes first: it must refuse what utf8_seq
     * refuses (overlong, surrogate, above U+10FFFF, truncated), so that every such
     * string comes out as utf8_lossy's copy, never as NULL. */
    static const char *const bad[] = {"a\xc0\xaf", "a\xed\xa0\x80", "a\xf4\x90\x80\x80", "a\xe2\x82",
                                      "a\xf8\x88\x80\x80\x80", "\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(!utf8_valid(bad[i], strlen(bad[i])));
        char *want = utf8_lossy(bad[i], strlen(bad[i]));
        j = utf8_json(bad[i]);
        CHECK(j != NULL);
        CHECK_EQ_STR(json_string_value(j), want);
        json_decref(j);
        free(want);
    }
}

/* Whitespace as Python's str.isspace has it (what a provider may check a prefill
 * with), at the start and at the end of a text, whole characters only. */
static void test_space(void)
{
    CHECK_EQ_UINT(utf8_space_at(" a", 2), 1);
    CHECK_EQ_UINT(utf8_space_at("\x1f", 1), 1);
    CHECK_EQ_UINT(utf8_space_at("\xc2\xa0x", 3), 2);          /* U+00A0 */
    CHECK_EQ_UINT(utf8_space_at("\xe3\x80\x80", 3), 3);      /* U+3000 */
    CHECK_EQ_UINT(utf8_space_at("\xe2\x80\x8b", 3), 0);      /* U+200B is no whitespace */
    CHECK_EQ_UINT(utf8_space_at("a ", 2), 0);
    CHECK_EQ_UINT(utf8_space_at("\xe3\x80", 2), 0);           /* cut short */
    CHECK_EQ_UINT(utf8_space_at("", 0), 0);
    CHECK_EQ_UINT(utf8_space_end("a\n", 2), 1);
    CHECK_EQ_UINT(utf8_space_end("a\xe3\x80\x80", 4), 3);
    CHECK_EQ_UINT(utf8_space_end("a\xe2\x80\xa9", 4), 3);    /* U+2029 */
    CHECK_EQ_UINT(utf8_space_end("caf\xc3\xa9", 5), 0);
    CHECK_EQ_UINT(utf8_space_end("\x80\x80", 2), 0);          /* no character there */
    CHECK_EQ_UINT(utf8_space_end("", 0), 0);
}

int main(void)
{
    test_seq();
    test_valid();
    test_lossy();
    test_json();
    test_space();
    return TEST_MAIN_END();
}

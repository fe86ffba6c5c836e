/* Unit tests for lib/jcheck: the validators' shared error list and path helpers. */
#include "jcheck.h"

#include <string.h>

#include "test.h"

static void test_errlist(void)
{
    char buf[64];
    jcheck_errlist e;
    jcheck_init(&e, buf, sizeof buf, 0);
    CHECK_EQ_STR(buf, "");
    jcheck_mistake(&e, "", "not an object");
    jcheck_mistake(&e, "a.b", "must be %d", 3);
    CHECK_EQ_INT(e.n, 2);
    CHECK_EQ_STR(buf, "$: not an object\na.b: must be 3");
    /* Past the capacity mistakes are counted, never overflowed. */
    for (int i = 0; i < 10; i++) jcheck_mistake(&e, "x", "a rather long message number %d", i);
    CHECK_EQ_INT(e.n, 12);
    CHECK(strlen(buf) < sizeof buf);
    /* Without a buffer only the count is kept. */
    jcheck_errlist none;
    jcheck_init(&none, NULL, 0, 0);
    jcheck_mistake(&none, "x", "y");
    CHECK_EQ_INT(none.n, 1);
}

static void test_paths(void)
{
    char out[32], q[JCHECK_QUOTE];
    jcheck_key(out, sizeof out, "", "name");
    CHECK_EQ_STR(out, "name");
    jcheck_key(out, sizeof out, "limits", "maxTurns");
    CHECK_EQ_STR(out, "limits.maxTurns");
    jcheck_index(out, sizeof out, "", "tools", 3);
    CHECK_EQ_STR(out, "tools[3]");
    jcheck_index(out, sizeof out, "phases[1]", "steps", 0);
    CHECK_EQ_STR(out, "phases[1].steps[0]");
    jcheck_index(out, sizeof out, "options", "", 2);
    CHECK_EQ_STR(out, "options[2]");
    /* Cut to fit, always terminated. */
    jcheck_key(out, 8, "abcdefgh", "ijkl");
    CHECK(strlen(out) < 8);
    /* Client keys cannot break the one-mistake-per-line format. */
    jcheck_show(q, sizeof q, "a\nb\rc", 5);
    CHECK(!strchr(q, '\n') && !strchr(q, '\r'));
    char longkey[200];
    memset(longkey, 'k', sizeof longkey);
    jcheck_show(q, sizeof q, longkey, sizeof longkey);
    CHECK(strlen(q) < JCHECK_QUOTE);
    CHECK(strstr(q, "...") != NULL);
    CHECK_EQ_STR(jcheck_show(q, 4, "abc", 3), "");
}

static void test_keys_and_strings(void)
{
    char buf[256];
    jcheck_errlist e;
    static const char *const known[] = {"name", "model", NULL};
    json_t *o = json_pack("{s:s, s:i, s:s}", "name", "x", "model", 3, "modle", "typo");
    jcheck_init(&e, buf, sizeof buf, 0);
    jcheck_unknown_keys(&e, "", o, known);
    CHECK_EQ_INT(e.n, 1);
    CHECK(strstr(buf, "modle") != NULL);
    CHECK(jcheck_string(&e, "", o, "name", 1) != NULL);
    CHECK(jcheck_string(&e, "", o, "model", 1) == NULL);
    CHECK(jcheck_string(&e, "", o, "system", 0) == NULL);
    CHECK_EQ_INT(e.n, 2);           /* optional and absent is not a mistake */
    CHECK(jcheck_string(&e, "", o, "system", 1) == NULL);
    CHECK_EQ_INT(e.n, 3);
    CHECK(strstr(buf, "missing") != NULL);
    CHECK(jcheck_in_list("model", known));
    CHECK(!jcheck_in_list("nope", known));
    char err[8];
    jcheck_seterr(err, sizeof err, "%s", "a long message");
    CHECK(strlen(err) < sizeof err);
    jcheck_seterr(NULL, 0, "dropped");
    json_decref(o);
}

int main(void)
{
    test_errlist();
    test_paths();
    test_keys_and_strings();
    return TEST_MAIN_END();
}

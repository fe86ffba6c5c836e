/* Unit tests for lib/chathist.c: an entry's parts, and the history put in an order
 * both APIs accept (calls without results dropped, results without calls dropped,
 * a message that landed between calls and results moved after them, empty entries
 * dropped). The request bodies built from it are test_anthropic's and test_openai's. */
#include "chathist.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"

static void check_norm(const char *in, const char *want, int line)
{
    json_t *h = json_loads(in, 0, NULL), *w = json_loads(want, 0, NULL);
    if (!test_note(h && w, __FILE__, line, "test JSON parses")) return;
    json_t *got = chathist_normalize(h);
    if (!test_note(json_equal(got, w), __FILE__, line, "normalized history")) {
        char *s = json_dumps(got, JSON_COMPACT);
        fprintf(stderr, "  got %s\n", s);
        free(s);
    }
    json_decref(got);
    json_decref(w);
    json_decref(h);
}

static void test_parts(void)
{
    json_t *m = json_loads("{\"role\":\"tool\",\"callId\":\"c1\",\"content\":{\"a\":1}}", 0, NULL);
    CHECK_EQ_STR(chathist_role(m), "tool");
    CHECK_EQ_STR(chathist_call_id(m), "c1");
    json_t *t = chathist_text(m);
    CHECK_EQ_STR(json_string_value(t), "{\"a\":1}");
    CHECK_EQ_INT(chathist_empty(m), 0);
    json_decref(t);
    json_t *e = json_loads("{\"callId\":\"\",\"content\":null}", 0, NULL);
    CHECK_EQ_STR(chathist_role(e), "");
    CHECK(chathist_call_id(e) == NULL);
    CHECK_EQ_INT(chathist_empty(e), 1);
    t = chathist_text(e);
    CHECK_EQ_STR(json_string_value(t), "");
    json_decref(t);
    json_decref(e);
    json_decref(m);
}

static void test_normalize(void)
{
    /* A call answered, another never (dropped); a background message waits for
     * the result; a stray result and an empty user message go. */
    check_norm("[{\"role\":\"user\",\"content\":\"q\"},"
               "{\"role\":\"assistant\",\"content\":\"\",\"toolCalls\":[{\"callId\":\"a\"},{\"callId\":\"b\"}]},"
               "{\"role\":\"user\",\"content\":\"bg\"},"
               "{\"role\":\"tool\",\"callId\":\"a\",\"content\":\"A\"},"
               "{\"role\":\"tool\",\"callId\":\"zz\",\"content\":\"stray\"},"
               "{\"role\":\"user\",\"content\":\"\"}]",
               "[{\"role\":\"user\",\"content\":\"q\"},"
               "{\"role\":\"assistant\",\"content\":\"\",\"toolCalls\":[{\"callId\":\"a\"}]},"
               "{\"role\":\"tool\",\"callId\":\"a\",\"content\":\"A\"},"
               "{\"role\":\"user\",\"content\":\"bg\"}]", __LINE__);
    /* An interrupted reply with nothing in it goes. */
    check_norm("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"\"},"
               "{\"role\":\"user\",\"content\":\"again\"}]",
               "[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"user\",\"content\":\"again\"}]", __LINE__);
    check_norm("[]", "[]", __LINE__);
}

int main(void)
{
    test_parts();
    test_normalize();
    return TEST_MAIN_END();
}

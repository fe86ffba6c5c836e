/* Unit tests for lib/jdiff: the first difference of two JSON values (keys in sorted
 * order, arrays by index, an absent value against a present one, another type) and
 * every difference (jdiff_each: the same order, paths restored between calls, an
 * early stop, the path buffer's ceiling). */
#include "jdiff.h"

#include <string.h>

#include "test.h"

static json_t *js(const char *text)
{
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    CHECK(j != NULL);
    return j;
}

static void test_first(void)
{
    json_t *a = js("{\"b\": [1, {\"x\": 2}], \"a\": 1}"), *b = js("{\"a\": 1, \"b\": [1, {\"x\": 3}]}");
    const json_t *da = NULL, *db = NULL;
    buf_t p;
    buf_init(&p, 0);
    CHECK_EQ_INT(jdiff(a, b, &p, &da, &db), 1);
    CHECK_EQ_STR(p.p, "b[1].x");
    CHECK_EQ_INT((int)json_integer_value(da), 2);
    CHECK_EQ_INT((int)json_integer_value(db), 3);
    buf_reset(&p);
    CHECK_EQ_INT(jdiff(a, a, &p, &da, &db), 0);
    buf_free(&p);
    json_decref(a);
    json_decref(b);
}

typedef struct seen {
    char s[1024];
    int n, stop_after;
} seen;

static int one(void *ud, const char *path, const json_t *da, const json_t *db)
{
    seen *x = ud;
    char *va = da ? json_dumps(da, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    char *vb = db ? json_dumps(db, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    size_t len = strlen(x->s);
    snprintf(x->s + len, sizeof x->s - len, "%s%s=%s>%s", len ? " " : "", path, va ? va : "-", vb ? vb : "-");
    free(va);
    free(vb);
    return ++x->n == x->stop_after ? 7 : 0;
}

static void test_each(void)
{
    json_t *a = js("{\"m\": [{\"c\": \"one\", \"r\": \"u\"}, {\"c\": \"two\"}], \"s\": \"done\", \"k\": 1, \"z\": {}}");
    json_t *b = js("{\"m\": [{\"c\": \"one\", \"r\": \"u\"}, {\"c\": \"2\"}, {\"c\": \"3\"}], \"s\": null, \"n\": true, \"z\": {}}");
    seen x;
    buf_t p;
    buf_init(&p, 0);
    memset(&x, 0, sizeof x);
    CHECK_EQ_INT(jdiff_each(a, b, &p, one, &x), 0);
    CHECK_EQ_STR(x.s, "k=1>- m[1].c=\"two\">\"2\" m[2]=->{\"c\":\"3\"} n=->true s=\"done\">null");
    CHECK_EQ_INT((int)p.len, 0);
    /* An early stop returns fn's value. */
    memset(&x, 0, sizeof x);
    x.stop_after = 2;
    CHECK_EQ_INT(jdiff_each(a, b, &p, one, &x), 7);
    CHECK_EQ_STR(x.s, "k=1>- m[1].c=\"two\">\"2\"");
    /* A path after what the buffer held; equal values: no call. */
    memset(&x, 0, sizeof x);
    buf_reset(&p);
    buf_puts(&p, "top");
    CHECK_EQ_INT(jdiff_each(json_object_get(a, "k"), json_object_get(b, "k"), &p, one, &x), 0);
    CHECK_EQ_STR(x.s, "top=1>-");
    CHECK_EQ_STR(p.p, "top");
    memset(&x, 0, sizeof x);
    CHECK_EQ_INT(jdiff_each(a, a, &p, one, &x), 0);
    CHECK_EQ_INT(x.n, 0);
    buf_free(&p);
    /* A path past the ceiling stops the walk. */
    buf_init(&p, 3);
    memset(&x, 0, sizeof x);
    CHECK_EQ_INT(jdiff_each(a, b, &p, one, &x), BUF_ETOOBIG);
    buf_free(&p);
    json_decref(a);
    json_decref(b);
}

int main(void)
{
    test_first();
    test_each();
    return TEST_MAIN_END();
}

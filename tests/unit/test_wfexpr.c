/* Unit tests for lib/wfexpr.c: dotted paths, templates and the condition language. */
#include "wfexpr.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_doc.h"

/* Test JSON with ' for " (test_doc.h). */
#define J(text) test_json(text, 0)

/* ---- paths ------------------------------------------------------------------------- */

static void test_paths(void)
{
    json_t *o = J("{'a': {'b': {'c': 1}}, 's': 'x', 'n': null}");
    CHECK(json_integer_value(workflow_get_path(o, "a.b.c")) == 1);
    CHECK(json_is_object(workflow_get_path(o, "a.b")));
    CHECK(json_is_null(workflow_get_path(o, "n")));
    CHECK(workflow_get_path(o, "a.x") == NULL);
    CHECK(workflow_get_path(o, "s.x") == NULL);     /* through a string */
    CHECK(workflow_get_path(o, "a.b.c.d") == NULL); /* through a number */
    CHECK(workflow_get_path(o, "") == NULL);
    CHECK(workflow_get_path(o, "a..b") == NULL);
    CHECK(workflow_get_path(o, ".a") == NULL);
    CHECK(workflow_get_path(o, "a.") == NULL);
    CHECK(workflow_get_path(o, "a b") == NULL);
    CHECK(workflow_get_path(o, NULL) == NULL);
    CHECK(workflow_get_path(NULL, "a") == NULL);
    json_t *arr = J("[1]");
    CHECK(workflow_get_path(arr, "0") == NULL);
    json_decref(arr);

    /* Intermediates are created; existing siblings stay. */
    CHECK_EQ_INT(workflow_set_path(o, "a.x.y", json_integer(5)), 0);
    CHECK(json_integer_value(workflow_get_path(o, "a.x.y")) == 5);
    CHECK(json_integer_value(workflow_get_path(o, "a.b.c")) == 1);
    CHECK_EQ_INT(workflow_set_path(o, "a.b", json_string("replaced")), 0);
    CHECK_EQ_STR(json_string_value(workflow_get_path(o, "a.b")), "replaced");
    CHECK_EQ_INT(workflow_set_path(o, "top", json_true()), 0);
    CHECK(json_is_true(json_object_get(o, "top")));
    CHECK_EQ_INT(workflow_set_path(o, "with-dash_and_9", json_null()), 0);

    /* Failures release the value (LeakSanitizer would notice) and change nothing. */
    char *before = json_dumps(o, JSON_SORT_KEYS);
    CHECK_EQ_INT(workflow_set_path(o, "s.x", json_integer(1)), -1);
    CHECK_EQ_INT(workflow_set_path(o, "a.b.deeper", json_integer(1)), -1);
    CHECK_EQ_INT(workflow_set_path(o, "", json_integer(1)), -1);
    CHECK_EQ_INT(workflow_set_path(o, "a..b", json_integer(1)), -1);
    CHECK_EQ_INT(workflow_set_path(o, "a.", json_integer(1)), -1);
    CHECK_EQ_INT(workflow_set_path(o, "a.$x", json_integer(1)), -1);
    CHECK_EQ_INT(workflow_set_path(o, NULL, json_integer(1)), -1);
    CHECK_EQ_INT(workflow_set_path(o, "x", NULL), -1);
    char *after = json_dumps(o, JSON_SORT_KEYS);
    CHECK_EQ_STR(after, before);
    free(before);
    free(after);

    json_t *notobj = json_array();
    CHECK_EQ_INT(workflow_set_path(notobj, "a", json_integer(1)), -1);
    CHECK_EQ_INT(workflow_set_path(NULL, "a", json_integer(1)), -1);
    json_decref(notobj);

    /* The path bound: 256 bytes is fine, 257 is not. */
    char longp[300];
    memset(longp, 'k', sizeof longp);
    longp[256] = '\0';
    CHECK_EQ_INT(workflow_set_path(o, longp, json_integer(1)), 0);
    CHECK(workflow_get_path(o, longp) != NULL);
    longp[256] = 'k';
    longp[257] = '\0';
    CHECK_EQ_INT(workflow_set_path(o, longp, json_integer(1)), -1);
    CHECK(workflow_get_path(o, longp) == NULL);
    json_decref(o);
}

/* ---- templates ----------------------------------------------------------------------- */

static json_t *tstate, *tinput;

/* Render tpl against tstate/tinput; returns the rc and leaves text or err in *res. */
static int render(const char *tpl, char *res, size_t cap)
{
    buf_t b;
    char err[256] = "";
    buf_init(&b, 0);
    int rc = workflow_render(tpl, tstate, tinput, &b, err, sizeof err);
    snprintf(res, cap, "%s", rc ? err : (b.p ? b.p : ""));
    buf_free(&b);
    return rc;
}

#define RENDERS(tpl, want) do { \
        char r_[512]; \
        if (CHECK_EQ_INT(render((tpl), r_, sizeof r_), 0)) CHECK_EQ_STR(r_, (want)); \
        else fprintf(stderr, "  error: %s\n", r_); \
    } while (0)
#define RENDER_FAILS(tpl, msg) do { \
        char r_[512]; \
        CHECK_EQ_INT(render((tpl), r_, sizeof r_), -1); \
        if (!CHECK(strstr(r_, (msg)) != NULL)) fprintf(stderr, "  got: %s\n", r_); \
    } while (0)

static void test_render(void)
{
    tstate = J("{'name': 'Ada', 'n': 42, 'neg': -7, 'x': 1.5, 'tenth': 0.1, 'big': 1e300,"
               " 'yes': true, 'no': false, 'nil': null, 'empty': '',"
               " 'obj': {'a': 1, 'b': [1, 'two', {'c': null}]}, 'arr': [1, 2],"
               " 'quote': 'say \\'hi\\'', 'utf': 'caf\u00e9 \u2603'}");
    tinput = J("{'topic': 'SQLite', 'deep': {'er': 'yes'}}");

    RENDERS("", "");
    RENDERS("plain text, no references", "plain text, no references");
    RENDERS("Hello {{state.name}}!", "Hello Ada!");
    RENDERS("{{state.name}}", "Ada");
    RENDERS("{{ state.name }} and {{\tinput.topic\t}}", "Ada and SQLite");
    RENDERS("{{input.deep.er}}", "yes");
    RENDERS("{{state.name}}{{state.name}}", "AdaAda");
    /* Strings go in as they are: no quotes, no escaping. */
    RENDERS("{{state.quote}}", "say \"hi\"");
    RENDERS("{{state.utf}}", "caf\xc3\xa9 \xe2\x98\x83");
    RENDERS("[{{state.empty}}]", "[]");
    /* Everything else as compact JSON. */
    RENDERS("{{state.n}}", "42");
    RENDERS("{{state.neg}}", "-7");
    RENDERS("{{state.x}}", "1.5");
    RENDERS("{{state.tenth}}", "0.1");
    RENDERS("{{state.big}}", "1e300");
    RENDERS("{{state.yes}}/{{state.no}}/{{state.nil}}", "true/false/null");
    RENDERS("{{state.obj}}", "{\"a\":1,\"b\":[1,\"two\",{\"c\":null}]}");
    RENDERS("{{state.arr}}", "[1,2]");
    RENDERS("{{input}}", "{\"topic\":\"SQLite\",\"deep\":{\"er\":\"yes\"}}");
    /* A stray "}}" or a lone brace is just text. */
    RENDERS("a }} b { c } {d}", "a }} b { c } {d}");
    RENDERS("{{state.name}}}", "Ada}");

    RENDER_FAILS("Hello {{state.name", "unterminated \"{{\" at column 7");
    RENDER_FAILS("{{", "unterminated");
    RENDER_FAILS("ok {{state.name}} then {{ oops", "unterminated \"{{\" at column 24");
    RENDER_FAILS("{{state.missing}}", "unknown path state.missing");
    RENDER_FAILS("{{state.name.first}}", "unknown path state.name.first");
    RENDER_FAILS("{{input.nope}}", "unknown path input.nope");
    RENDER_FAILS("{{foo.bar}}", "unknown root in {{foo.bar}}");
    RENDER_FAILS("{{name}}", "unknown root in {{name}}");
    RENDER_FAILS("{{states.name}}", "unknown root");
    RENDER_FAILS("{{}}", "bad path {{}}");
    RENDER_FAILS("{{   }}", "bad path");
    RENDER_FAILS("{{state..name}}", "bad path {{state..name}}");
    RENDER_FAILS("{{state.}}", "bad path");
    RENDER_FAILS("{{.state}}", "bad path");
    RENDER_FAILS("{{state.na me}}", "bad path");
    RENDER_FAILS("{{{state.name}}}", "bad path");
    RENDER_FAILS("{{state.a\nb}}", "bad path");
    RENDER_FAILS(NULL, "no template");

    /* A very long bad path is quoted, cut, never overflowed. */
    char longtpl[2100];
    memset(longtpl, 'x', sizeof longtpl);
    memcpy(longtpl, "{{", 2);
    memcpy(longtpl + 2095, "}}", 2);
    longtpl[2097] = '\0';
    RENDER_FAILS(longtpl, "...");

    /* With no state or input every path is unknown. */
    buf_t b;
    char err[256];
    buf_init(&b, 0);
    CHECK_EQ_INT(workflow_render("{{state.a}}", NULL, NULL, &b, err, sizeof err), -1);
    CHECK_EQ_INT(workflow_render("{{input}}", NULL, NULL, &b, err, sizeof err), -1);
    CHECK(strstr(err, "unknown path input") != NULL);
    CHECK_EQ_INT(workflow_render("no refs", NULL, NULL, &b, err, sizeof err), 0);
    CHECK_EQ_STR(b.p, "no refs");
    /* Rendering appends; a failure leaves what was there before. */
    CHECK_EQ_INT(workflow_render(" {{state.name}}", tstate, NULL, &b, err, sizeof err), 0);
    CHECK_EQ_STR(b.p, "no refs Ada");
    CHECK_EQ_INT(workflow_render(" more {{state.nope}}", tstate, NULL, &b, err, sizeof err), -1);
    CHECK_EQ_STR(b.p, "no refs Ada");
    CHECK_EQ_UINT(b.len, 11);
    /* err may be NULL. */
    CHECK_EQ_INT(workflow_render("{{", tstate, NULL, &b, NULL, 0), -1);
    CHECK_EQ_INT(workflow_render("x", tstate, NULL, NULL, err, sizeof err), -1);
    buf_free(&b);

    /* The buffer's ceiling: over it is an error and the buffer is unchanged. */
    buf_init(&b, 8);
    CHECK_EQ_INT(workflow_render("{{state.name}}", tstate, NULL, &b, err, sizeof err), 0);
    CHECK_EQ_INT(workflow_render("{{state.obj}}", tstate, NULL, &b, err, sizeof err), -1);
    CHECK(strstr(err, "over 8 bytes") != NULL);
    CHECK_EQ_STR(b.p, "Ada");
    CHECK_EQ_INT(workflow_render("123456789", tstate, NULL, &b, err, sizeof err), -1);
    CHECK_EQ_STR(b.p, "Ada");
    buf_free(&b);

    json_decref(tstate);
    json_decref(tinput);
}

/* ---- conditions ------------------------------------------------------------------------- */

static json_t *cstate, *cinput;

static void eval_is(const char *expr, int want, int line)
{
    char err[256] = "";
    int rc = workflow_eval(expr, cstate, cinput, err, sizeof err);
    if (rc == want) {
        test_note(1, __FILE__, line, NULL);
    } else {
        test_failed++;
        fprintf(stderr, "%s:%d: FAIL: workflow_eval(%s) == %d, want %d (%s)\n", __FILE__, line,
                expr, rc, want, err);
    }
    /* The syntax check agrees with evaluation about what is an error. */
    int crc = workflow_check_condition(expr, err, sizeof err);
    test_note(crc == (want < 0 ? -1 : 0), __FILE__, line, "workflow_check_condition agrees");
}
#define TRUE_(e) eval_is((e), 1, __LINE__)
#define FALSE_(e) eval_is((e), 0, __LINE__)

static void bad_cond(const char *expr, const char *msg, int line)
{
    char err[256] = "";
    int rc = workflow_eval(expr, cstate, cinput, err, sizeof err);
    test_note(rc == -1, __FILE__, line, "workflow_eval fails");
    if (!test_note(strstr(err, msg) != NULL, __FILE__, line, "error message"))
        fprintf(stderr, "  expr %.80s: got \"%s\", want \"%s\"\n", expr, err, msg);
    char err2[256] = "";
    test_note(workflow_check_condition(expr, err2, sizeof err2) == -1, __FILE__, line,
              "workflow_check_condition fails");
    test_note(strcmp(err, err2) == 0, __FILE__, line, "same message from both");
}
#define BAD(e, msg) bad_cond((e), (msg), __LINE__)

static void test_conditions(void)
{
    cstate = J("{'n': 3, 'zero': 0, 'real': 2.5, 'realzero': 0.0, 'one_real': 1.0,"
               " 's': 'abc', 'empty': '', 'yes': true, 'no': false, 'nil': null,"
               " 'obj': {'k': [1, 2]}, 'obj2': {'k': [1, 2]}, 'eobj': {}, 'earr': [],"
               " 'big': 9007199254740993, 'big2': 9007199254740992,"
               " 'review': {'score': 8, 'approved': true, 'tags': ['a']}}");
    cinput = J("{'lang': 'en', 'count': 10}");

    /* Literals and truthiness of bare values. */
    TRUE_("true");
    FALSE_("false");
    FALSE_("null");
    TRUE_("1");
    FALSE_("0");
    FALSE_("0.0");
    TRUE_("-1");
    TRUE_("0.5");
    TRUE_("\"x\"");
    FALSE_("\"\"");
    TRUE_("state.n");
    FALSE_("state.zero");
    FALSE_("state.realzero");
    TRUE_("state.s");
    FALSE_("state.empty");
    TRUE_("state.yes");
    FALSE_("state.no");
    FALSE_("state.nil");
    FALSE_("state.missing");
    FALSE_("state.missing.deeper");
    FALSE_("state.s.deeper");
    TRUE_("state.eobj");     /* present and not in the false list */
    TRUE_("state.earr");
    TRUE_("state");
    TRUE_("input");
    TRUE_("input.lang");
    TRUE_("  \t\n state.n \r\n ");

    /* Equality within a type. */
    TRUE_("state.n == 3");
    TRUE_("3 == state.n");
    FALSE_("state.n == 4");
    TRUE_("state.n != 4");
    TRUE_("state.one_real == 1");        /* integer and real are both numbers */
    TRUE_("state.real == 2.5");
    TRUE_("state.real == 25e-1");
    TRUE_("state.s == \"abc\"");
    FALSE_("state.s == \"abcd\"");
    TRUE_("state.s != \"ab\"");
    TRUE_("state.yes == true");
    TRUE_("state.no == false");
    TRUE_("state.nil == null");
    TRUE_("state.missing == null");      /* missing is null */
    TRUE_("null == null");
    TRUE_("state.obj == state.obj2");    /* containers by content */
    FALSE_("state.obj == state.review");
    TRUE_("state.eobj != state.earr");
    TRUE_("state.big != state.big2");    /* exact beyond 2^53 */
    TRUE_("state.big > state.big2");
    TRUE_("state.big == 9007199254740993");
    TRUE_("99999999999999999999 > 1");   /* overflows a long long: read as a double */
    TRUE_("\"a\\\"b\" == \"a\\\"b\"");
    TRUE_("\"line\\n\" != \"line\"");
    TRUE_("\"\\\\\" == \"\\\\\"");
    TRUE_("\"a\\/b\" == \"a/b\"");
    TRUE_("\"\\t\\r\" != \"\"");

    /* Type mixing: == false, != true, ordering false. */
    FALSE_("state.n == \"3\"");
    TRUE_("state.n != \"3\"");
    FALSE_("state.yes == 1");
    TRUE_("state.yes != 1");
    FALSE_("state.nil == 0");
    FALSE_("state.nil == false");
    FALSE_("state.empty == null");
    FALSE_("state.zero == false");
    TRUE_("state.zero != false");
    FALSE_("state.obj == \"{}\"");
    FALSE_("state.n < \"4\"");
    FALSE_("state.n > \"4\"");
    FALSE_("state.n <= \"3\"");
    FALSE_("state.n >= \"3\"");
    FALSE_("state.yes > false");
    FALSE_("state.yes >= state.yes");    /* booleans do not order */
    FALSE_("null <= null");
    FALSE_("state.missing < 1");
    FALSE_("state.missing > 1");
    FALSE_("state.obj < state.obj2");

    /* Ordering of numbers and strings. */
    TRUE_("state.n < 4");
    FALSE_("state.n < 3");
    TRUE_("state.n <= 3");
    TRUE_("state.n > 2.99");
    TRUE_("state.n >= 3");
    FALSE_("state.n > 3");
    TRUE_("-1 < 0");
    TRUE_("-1.5e1 < -1");
    TRUE_("state.real < state.n");
    TRUE_("input.count >= 10");
    TRUE_("\"abc\" < \"abd\"");
    TRUE_("\"ab\" < \"abc\"");
    TRUE_("\"B\" < \"a\"");              /* byte order */
    TRUE_("state.s >= \"abc\"");
    FALSE_("state.s > \"abc\"");
    TRUE_("\"\" < \"a\"");

    /* Logic, precedence, parentheses. */
    TRUE_("state.yes && state.n");
    FALSE_("state.yes && state.no");
    TRUE_("state.no || state.yes");
    FALSE_("state.no || state.nil");
    TRUE_("!state.no");
    FALSE_("!state.yes");
    TRUE_("!!state.yes");
    TRUE_("!state.missing");
    TRUE_("!0");
    TRUE_("!\"\"");
    TRUE_("true || false && false");     /* && binds tighter */
    FALSE_("(true || false) && false");
    TRUE_("!state.no == true");          /* (!no) == true */
    FALSE_("!(state.n == 3)");
    TRUE_("!(state.n == 4)");
    TRUE_("state.review.score >= 7 && state.review.approved == true");
    TRUE_("(state.review.score > 9) || (input.lang == \"en\" && !state.review.missing)");
    TRUE_("((((state.yes))))");
    TRUE_("(state.n == 3) == true");     /* chaining through parentheses is fine */
    TRUE_("state.n==3&&state.s!=\"x\"||false");
    TRUE_("state.a-b == null");          /* '-' is part of a name, there is no subtraction */
    FALSE_("state.n<-1");

    /* Short-circuit: the right side is not evaluated but is still checked. */
    FALSE_("false && state.anything.at.all");
    TRUE_("true || state.anything");
    BAD("false && (", "expected a value at end of condition");
    BAD("true || foo", "unknown name 'foo'");

    /* Unbalanced parentheses. */
    BAD("(state.n == 3", "missing ')' for the '(' at column 1");
    BAD("((state.n)", "missing ')' for the '(' at column 1");
    BAD("state.n == 3)", "unexpected ')' at column 13");
    BAD(")", "unexpected ')' at column 1");
    BAD("()", "unexpected ')' at column 2");
    BAD("(state.n))", "unexpected ')' at column 10");

    /* Dangling operators. */
    BAD("state.n &&", "expected a value at end of condition");
    BAD("&& state.n", "unexpected '&' at column 1");
    BAD("state.n ||", "expected a value at end");
    BAD("|| true", "unexpected '|'");
    BAD("state.n ==", "expected a value at end");
    BAD("== 3", "unexpected '=' at column 1");
    BAD("!", "expected a value at end");
    BAD("!!", "expected a value at end");
    BAD("state.n <", "expected a value at end");
    BAD("< 3", "unexpected '<'");
    BAD("true && && true", "unexpected '&' at column 9");
    BAD("state.n == == 3", "unexpected '=' at column 12");
    BAD("state.n !", "unexpected '!' at column 9");

    /* Unknown tokens and names. */
    BAD("state.n = 3", "'=' at column 9: compare with ==");
    BAD("state.n & true", "unexpected '&' at column 9");
    BAD("state.n | true", "unexpected '|'");
    BAD("state.n @ 3", "unexpected '@' at column 9");
    BAD("'abc' == state.s", "unexpected ''' at column 1");
    BAD("state.n ~", "unexpected '~'");
    BAD("state.n\x01", "unexpected byte 0x01 at column 8");
    BAD("state.n \xc3\xa9", "unexpected byte 0xc3");
    BAD("foo", "unknown name 'foo' at column 1 (paths start with state. or input.)");
    BAD("foo.bar == 1", "unknown name 'foo.bar'");
    BAD("True", "unknown name 'True'");
    BAD("NULL", "unknown name");
    BAD("state..n", "bad path 'state..n' at column 1");
    BAD("state.", "bad path");
    BAD("state.n.", "bad path");
    BAD("len(state.s)", "unknown name 'len'");
    BAD("state.n 3", "unexpected '3' at column 9");
    BAD("3 3", "unexpected '3'");
    BAD("\"a\" \"b\"", "unexpected '\"' at column 5");
    BAD("state.n == 3 true", "unexpected 't' at column 14");

    /* Literal syntax. */
    BAD("-", "expected a digit after '-' at column 1");
    BAD("- 1", "expected a digit after '-'");
    BAD("1.", "expected a digit after '.'");
    BAD("1.e5", "expected a digit after '.'");
    BAD("1e", "expected an exponent");
    BAD("1e+", "expected an exponent");
    BAD("1e999 > 0", "number out of range at column 1");
    BAD("123456789012345678901234567890123456789012345678901234567890123456789", "number too long");
    BAD("1.5.2", "unexpected '.' at column 4");
    BAD("\"abc", "unterminated string at column 1");
    BAD("state.s == \"abc", "unterminated string at column 12");
    BAD("\"abc\\", "unterminated string");
    BAD("\"\\q\"", "unknown escape at column 2");
    BAD("\"\\u0041\"", "unknown escape");
    FALSE_("1e-400");                    /* underflow is zero, not an error */
    TRUE_("1E2 == 100");
    TRUE_("007 == 7");

    /* Comparisons do not chain. */
    BAD("1 < 2 < 3", "comparisons do not chain (column 7): use parentheses");
    BAD("state.n == 3 == true", "comparisons do not chain");
    BAD("1 < 2 = 3", "'=' at column 7");

    /* Empty, NULL, err NULL. */
    BAD("", "empty condition");
    BAD("   \t\n", "empty condition");
    char err[64];
    CHECK_EQ_INT(workflow_eval(NULL, cstate, cinput, err, sizeof err), -1);
    CHECK_EQ_STR(err, "no condition");
    CHECK_EQ_INT(workflow_check_condition(NULL, err, sizeof err), -1);
    CHECK_EQ_INT(workflow_eval("(", cstate, cinput, NULL, 0), -1);
    CHECK_EQ_INT(workflow_eval("true", NULL, NULL, NULL, 0), 1);
    CHECK_EQ_INT(workflow_eval("state.x == null && input == null", NULL, NULL, NULL, 0), 1);
    /* A tiny err buffer is truncated, not overflowed. */
    char tiny[8];
    memset(tiny, 'z', sizeof tiny);
    CHECK_EQ_INT(workflow_eval("@", cstate, cinput, tiny, sizeof tiny), -1);
    CHECK_EQ_UINT(strlen(tiny), 7);

    /* Length: 4096 bytes are fine, 4097 are not. */
    char *e = malloc(8192);
    if (!CHECK(e != NULL)) return;
    memset(e, ' ', 8192);
    memcpy(e, "true", 4);
    e[4096] = '\0';
    TRUE_(e);
    e[4096] = ' ';
    e[4097] = '\0';
    BAD(e, "condition longer than 4096 bytes");
    /* A long but flat expression: "true && true && ..." within the bound. */
    size_t n = 0;
    while (n + 8 < 4096) {
        memcpy(e + n, "true && ", 8);
        n += 8;
    }
    memcpy(e + n, "true", 4);
    e[n + 4] = '\0';
    TRUE_(e);
    /* Many string literals: their unescaped bytes never outgrow the input. */
    n = 0;
    while (n + 12 < 4096) {
        memcpy(e + n, "\"ab\"!=\"\"&& ", 11);
        n += 11;
    }
    memcpy(e + n, "true", 4);
    e[n + 4] = '\0';
    TRUE_(e);

    /* Depth: 64 levels of parentheses or '!' are fine, 65 are not. */
    n = 0;
    for (int i = 0; i < 64; i++) e[n++] = '(';
    memcpy(e + n, "true", 4);
    n += 4;
    for (int i = 0; i < 64; i++) e[n++] = ')';
    e[n] = '\0';
    TRUE_(e);
    n = 0;
    for (int i = 0; i < 65; i++) e[n++] = '(';
    memcpy(e + n, "true", 4);
    n += 4;
    for (int i = 0; i < 65; i++) e[n++] = ')';
    e[n] = '\0';
    BAD(e, "nested deeper than 64 at column 65");
    memset(e, '!', 64);
    memcpy(e + 64, "false", 6);
    FALSE_(e);                           /* an even number of '!' */
    memset(e, '!', 65);
    memcpy(e + 65, "false", 6);
    BAD(e, "nested deeper than 64");
    /* Deep but unclosed, and the whole length of it: the depth bound answers. */
    memset(e, '(', 4096);
    e[4096] = '\0';
    BAD(e, "nested deeper than 64");
    memset(e, '!', 4096);
    BAD(e, "nested deeper than 64");
    /* Depth is counted per nesting, not in total: many siblings are fine. */
    n = 0;
    for (int i = 0; i < 100; i++) {
        memcpy(e + n, "(true) && ", 10);
        n += 10;
    }
    memcpy(e + n, "true", 5);
    TRUE_(e);
    free(e);

    json_decref(cstate);
    json_decref(cinput);
}

int main(void)
{
    test_paths();
    test_render();
    test_conditions();
    return TEST_MAIN_END();
}

/* Unit tests for lib/wfschema.c: values checked against the schema subset (the
 * checks of a schema document are test_workflow's, through the validator). */
#include "wfschema.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_doc.h"

/* Test JSON with ' for " (test_doc.h). */
#define J(text) test_json(text, 0)

/* ---- schemas ---------------------------------------------------------------------------- */

static void schema_is(const char *schema, const char *value, const char *want_err, int line)
{
    json_t *s = J(schema), *v = J(value);
    char err[256] = "";
    int rc = workflow_check_schema(s, v, err, sizeof err);
    if (!want_err) {
        if (!test_note(rc == 0, __FILE__, line, "value matches the schema"))
            fprintf(stderr, "  %s against %s: %s\n", value, schema, err);
    } else {
        test_note(rc == -1, __FILE__, line, "value does not match the schema");
        if (!test_note(strcmp(err, want_err) == 0, __FILE__, line, "schema error message"))
            fprintf(stderr, "  got \"%s\", want \"%s\"\n", err, want_err);
    }
    json_decref(s);
    json_decref(v);
}
#define MATCHES(s, v) schema_is((s), (v), NULL, __LINE__)
#define MISMATCH(s, v, e) schema_is((s), (v), (e), __LINE__)

static void test_schema(void)
{
    MATCHES("{}", "1");
    MATCHES("{}", "{'anything': [1]}");
    MATCHES("{'type': 'object'}", "{}");
    MATCHES("{'type': 'array'}", "[]");
    MATCHES("{'type': 'string'}", "''");
    MATCHES("{'type': 'number'}", "1");
    MATCHES("{'type': 'number'}", "1.5");
    MATCHES("{'type': 'integer'}", "7");
    MATCHES("{'type': 'integer'}", "7.0");      /* JSON Schema: 7.0 is an integer */
    MATCHES("{'type': 'integer'}", "1e300");
    MATCHES("{'type': 'boolean'}", "false");
    MATCHES("{'type': 'null'}", "null");
    MATCHES("{'type': ['string', 'null']}", "null");
    MATCHES("{'type': 'string', 'description': 'ignored', 'title': 't'}", "'x'");
    MISMATCH("{'type': 'object'}", "[]", "$: expected object, got array");
    MISMATCH("{'type': 'array'}", "{}", "$: expected array, got object");
    MISMATCH("{'type': 'string'}", "1", "$: expected string, got integer");
    MISMATCH("{'type': 'number'}", "'1'", "$: expected number, got string");
    MISMATCH("{'type': 'integer'}", "1.5", "$: expected integer, got number");
    MISMATCH("{'type': 'boolean'}", "0", "$: expected boolean, got integer");
    MISMATCH("{'type': 'null'}", "false", "$: expected null, got boolean");
    MISMATCH("{'type': ['string', 'null']}", "3", "$: integer is not one of the allowed types");
    MISMATCH("{'type': 'strin'}", "'x'", "$: expected strin, got string");

    MATCHES("{'enum': ['a', 'b', 1]}", "'b'");
    MATCHES("{'enum': ['a', 'b', 1]}", "1.0");  /* numbers by value */
    MATCHES("{'enum': [{'k': 1}]}", "{'k': 1}");
    MISMATCH("{'enum': ['a', 'b']}", "'c'", "$: not one of the allowed values");
    MISMATCH("{'enum': ['1']}", "1", "$: not one of the allowed values");

    const char *review = "{'type': 'object', 'required': ['score', 'notes'],"
                         " 'properties': {'score': {'type': 'integer'},"
                         "  'notes': {'type': 'string'},"
                         "  'tags': {'type': 'array', 'items': {'type': 'string', 'enum': ['a', 'b']}},"
                         "  'meta': {'type': 'object', 'properties': {'x': {'type': 'null'}}}}}";
    MATCHES(review, "{'score': 8, 'notes': 'ok'}");
    MATCHES(review, "{'score': 8, 'notes': 'ok', 'tags': ['a', 'b'], 'extra': 1}");
    MISMATCH(review, "{'notes': 'ok'}", "$: missing required property \"score\"");
    MISMATCH(review, "{'score': '8', 'notes': 'ok'}", "score: expected integer, got string");
    MISMATCH(review, "{'score': 8, 'notes': 'ok', 'tags': ['a', 3]}",
             "tags[1]: expected string, got integer");
    MISMATCH(review, "{'score': 8, 'notes': 'ok', 'tags': ['a', 'c']}",
             "tags[1]: not one of the allowed values");
    MISMATCH(review, "{'score': 8, 'notes': 'ok', 'meta': {'x': 1}}",
             "meta.x: expected null, got integer");
    MISMATCH(review, "'just text'", "$: expected object, got string");
    /* properties, required and items apply to their own kind only. */
    MATCHES("{'required': ['a'], 'properties': {'a': {'type': 'string'}}}", "5");
    MATCHES("{'items': {'type': 'string'}}", "{'a': 1}");
    MISMATCH("{'items': {'items': {'type': 'integer'}}}", "[[1], [2, 'x']]",
             "[1][1]: expected integer, got string");

    char err[64];
    json_t *s = J("{'type': 'object'}");
    CHECK_EQ_INT(workflow_check_schema(s, NULL, err, sizeof err), -1);
    json_t *notschema = J("[1]"), *one = J("1");
    CHECK_EQ_INT(workflow_check_schema(notschema, one, err, sizeof err), -1);
    CHECK_EQ_STR(err, "$: the schema is not an object");
    CHECK_EQ_INT(workflow_check_schema(s, one, NULL, 0), -1);
    json_decref(s);
    json_decref(notschema);
    json_decref(one);
}

int main(void)
{
    test_schema();
    return TEST_MAIN_END();
}

/* wfschema: the JSON-Schema subset of workflows (type, properties, required,
 * items, enum): a schema document checked when a workflow is stored, and a value
 * checked against it at run time. */
#include "wfschema.h"

#include <stdio.h>
#include <string.h>

#include "jcheck.h"
#include "wfexpr.h"

/* The type names JSON Schema defines; "integer" is the one that is not a
 * jansson type of its own. */
static const char *const schema_types[] = {
    "object", "array", "string", "number", "integer", "boolean", "null", NULL
};

/* Keywords that describe without constraining; accepted and ignored. */
static const char *const schema_notes[] = {
    "description", "title", "$schema", "$id", "default", "examples", NULL
};

/* JSON Schema counts 1.0 as an integer; jansson parses it as a real. */
static int is_integral(const json_t *v)
{
    if (json_is_integer(v)) return 1;
    if (!json_is_real(v)) return 0;
    double d = json_real_value(v);
    if (d >= 9007199254740992.0 || d <= -9007199254740992.0) return 1;
    return (double)(long long)d == d;
}

/* An unknown type name matches nothing: at runtime that reports the mismatch
 * instead of letting every value through (the validator rejects such schemas). */
static int type_matches(const char *t, const json_t *v)
{
    if (strcmp(t, "object") == 0) return json_is_object(v);
    if (strcmp(t, "array") == 0) return json_is_array(v);
    if (strcmp(t, "string") == 0) return json_is_string(v);
    if (strcmp(t, "number") == 0) return json_is_number(v);
    if (strcmp(t, "integer") == 0) return is_integral(v);
    if (strcmp(t, "boolean") == 0) return json_is_boolean(v);
    if (strcmp(t, "null") == 0) return json_is_null(v);
    return 0;
}

/* What a value is, in the words of the schema, for "expected X, got Y". */
static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

/* Equality for enum: numbers by value (1 equals 1.0), the rest as jansson has it. */
static int enum_equal(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b)) return wfexpr_num_cmp(a, b) == 0;
    return json_equal(a, b);
}

/* Append ".key" or "[i]" to the value path at path[len]; returns the new length.
 * Paths only label messages, so a long one is cut, never overflowed. */
static size_t vpath_key(char *path, size_t len, const char *key)
{
    if (len >= WF_JPATH - 1) return len;
    char q[JCHECK_QUOTE];
    int k = snprintf(path + len, WF_JPATH - len, "%s%s", len ? "." : "",
                     jcheck_show(q, sizeof q, key, strlen(key)));
    if (k < 0) return len;
    return (size_t)k < WF_JPATH - len ? len + (size_t)k : WF_JPATH - 1;
}

static size_t vpath_idx(char *path, size_t len, size_t i)
{
    if (len >= WF_JPATH - 1) return len;
    int k = snprintf(path + len, WF_JPATH - len, "[%zu]", i);
    if (k < 0) return len;
    return (size_t)k < WF_JPATH - len ? len + (size_t)k : WF_JPATH - 1;
}

/* Check v against schema; path[0..plen) names v in messages and is extended in
 * place for children (and cut back after each), so the walk needs no allocation.
 * Only the first mismatch is reported: the runner shows it to the model or the
 * user, for whom one concrete problem is more useful than a list. */
static int schema_check(const json_t *schema, const json_t *v, char *path, size_t plen,
                        int depth, char *err, size_t errcap)
{
    const char *at = plen ? path : "$";
    if (depth > WF_VALUE_DEPTH) {
        jcheck_seterr(err, errcap, "%s: schema nested deeper than %d", at, WF_VALUE_DEPTH);
        return -1;
    }
    if (!json_is_object(schema)) {
        jcheck_seterr(err, errcap, "%s: the schema is not an object", at);
        return -1;
    }
    const json_t *type = json_object_get(schema, "type");
    if (json_is_string(type)) {
        if (!type_matches(json_string_value(type), v)) {
            jcheck_seterr(err, errcap, "%s: expected %s, got %s", at, json_string_value(type),
                          type_name(v));
            return -1;
        }
    } else if (json_is_array(type)) {
        size_t i;
        const json_t *t;
        int any = 0;
        json_array_foreach(type, i, t)
            if (json_is_string(t) && type_matches(json_string_value(t), v)) any = 1;
        if (!any) {
            jcheck_seterr(err, errcap, "%s: %s is not one of the allowed types", at, type_name(v));
            return -1;
        }
    }
    const json_t *en = json_object_get(schema, "enum");
    if (json_is_array(en)) {
        size_t i;
        const json_t *e;
        int any = 0;
        json_array_foreach(en, i, e)
            if (enum_equal(e, v)) any = 1;
        if (!any) {
            jcheck_seterr(err, errcap, "%s: not one of the allowed values", at);
            return -1;
        }
    }
    /* As in JSON Schema, properties/required constrain objects only and items
     * arrays only; "type" is what rejects a value of the wrong kind. */
    if (json_is_object(v)) {
        const json_t *req = json_object_get(schema, "required");
        size_t i;
        const json_t *r;
        json_array_foreach(req, i, r) {
            if (json_is_string(r) && !json_object_get(v, json_string_value(r))) {
                char q[JCHECK_QUOTE];
                jcheck_seterr(err, errcap, "%s: missing required property \"%s\"", at,
                              jcheck_show(q, sizeof q, json_string_value(r),
                                          json_string_length(r)));
                return -1;
            }
        }
        const json_t *props = json_object_get(schema, "properties");
        const char *key;
        const json_t *sub;
        json_object_foreach((json_t *)props, key, sub) {
            const json_t *pv = json_object_get(v, key);
            if (!pv) continue;
            size_t n = vpath_key(path, plen, key);
            int rc = schema_check(sub, pv, path, n, depth + 1, err, errcap);
            path[plen] = '\0';
            if (rc) return -1;
        }
    }
    const json_t *items = json_object_get(schema, "items");
    if (json_is_array(v) && items) {
        size_t i;
        const json_t *item;
        json_array_foreach(v, i, item) {
            size_t n = vpath_idx(path, plen, i);
            int rc = schema_check(items, item, path, n, depth + 1, err, errcap);
            path[plen] = '\0';
            if (rc) return -1;
        }
    }
    return 0;
}

int workflow_check_schema(const json_t *schema, const json_t *value, char *err, size_t errcap)
{
    char path[WF_JPATH];
    path[0] = '\0';
    if (!value) {
        jcheck_seterr(err, errcap, "$: no value");
        return -1;
    }
    return schema_check(schema, value, path, 0, 0, err, errcap);
}

/* An outputSchema, checked against the subset workflow_check_schema implements:
 * a keyword we would not enforce is a mistake, so that no constraint a user
 * wrote is silently skipped. */
void wfschema_check_doc(jcheck_errlist *e, const char *path, const json_t *s, int depth)
{
    char sub[WF_JPATH];
    if (depth > WF_VALUE_DEPTH) {
        jcheck_mistake(e, path, "nested deeper than %d", WF_VALUE_DEPTH);
        return;
    }
    if (!json_is_object(s)) {
        jcheck_mistake(e, path, "a schema must be an object");
        return;
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        jcheck_key(sub, sizeof sub, path, key);
        if (strcmp(key, "type") == 0) {
            size_t i;
            const json_t *t;
            if (json_is_string(v) && jcheck_in_list(json_string_value(v), schema_types)) continue;
            int ok = json_is_array(v) && json_array_size(v) > 0;
            json_array_foreach(v, i, t)
                if (!json_is_string(t) || !jcheck_in_list(json_string_value(t), schema_types))
                    ok = 0;
            if (!ok)
                jcheck_mistake(e, sub, "must be one of object, array, string, number, integer, "
                                       "boolean, null (or an array of them)");
        } else if (strcmp(key, "properties") == 0) {
            if (!json_is_object(v)) {
                jcheck_mistake(e, sub, "must be an object of schemas");
                continue;
            }
            const char *pk;
            const json_t *pv;
            char psub[WF_JPATH];
            json_object_foreach((json_t *)v, pk, pv) {
                jcheck_key(psub, sizeof psub, sub, pk);
                wfschema_check_doc(e, psub, pv, depth + 1);
            }
        } else if (strcmp(key, "required") == 0) {
            size_t i;
            const json_t *r;
            int ok = json_is_array(v);
            json_array_foreach(v, i, r)
                if (!json_is_string(r)) ok = 0;
            if (!ok) jcheck_mistake(e, sub, "must be an array of property names");
        } else if (strcmp(key, "items") == 0) {
            wfschema_check_doc(e, sub, v, depth + 1);
        } else if (strcmp(key, "enum") == 0) {
            if (!json_is_array(v) || json_array_size(v) == 0)
                jcheck_mistake(e, sub, "must be a non-empty array");
        } else if (!jcheck_in_list(key, schema_notes)) {
            jcheck_mistake(e, sub, "unsupported schema keyword (supported: type, properties, "
                                   "required, items, enum)");
        }
    }
}

/* Unit tests for lib/sfilter: labels checked and written in their stored form (keys
 * sorted, compact; none as ""), every rule's refusal with a message naming the label;
 * the query form "k:v,k2:v2" added to a filter (a key twice with one value is one, with
 * two refused); times as RFC 3339 or milliseconds; filter documents, every key, and
 * what each refuses (an unknown key, a status, a name, a time). */
#include "sfilter.h"

#include <string.h>

#include "test.h"

static char out[SSTORE_LABELS_MAX], err[256];

/* The stored form of labels text, or "ERR: message". */
static const char *labels(const char *text)
{
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    static char res[SSTORE_LABELS_MAX + 300];
    if (!j) return "bad test JSON";
    if (sfilter_labels(j, out, sizeof out, err, sizeof err)) snprintf(res, sizeof res, "ERR: %s", err);
    else snprintf(res, sizeof res, "%s", out);
    json_decref(j);
    return res;
}

static void test_labels(void)
{
    CHECK_EQ_STR(labels("{}"), "");
    CHECK_EQ_STR(labels("{\"team\": \"red\", \"env\": \"prod\"}"), "{\"env\":\"prod\",\"team\":\"red\"}");
    CHECK_EQ_STR(labels("{\"a.b/c-d_E9\": \"x:y@z+1.2/3-_\"}"), "{\"a.b/c-d_E9\":\"x:y@z+1.2/3-_\"}");
    CHECK_EQ_STR(labels("{\"k\": \"\"}"), "{\"k\":\"\"}");
    CHECK_EQ_STR(labels("\"x\""), "ERR: labels must be an object of strings");
    CHECK_EQ_STR(labels("[]"), "ERR: labels must be an object of strings");
    CHECK_EQ_STR(labels("{\"k\": 1}"), "ERR: label \"k\" must be a string");
    CHECK_EQ_STR(labels("{\"k\": null}"), "ERR: label \"k\" must be a string");
    CHECK_EQ_STR(labels("{\"\": \"v\"}"), "ERR: label key \"\" must be 1 to 63 bytes");
    CHECK_EQ_STR(labels("{\"a b\": \"v\"}"), "ERR: label key \"a b\" may hold only letters, digits and _ . / -");
    CHECK_EQ_STR(labels("{\"a:b\": \"v\"}"), "ERR: label key \"a:b\" may hold only letters, digits and _ . / -");
    CHECK_EQ_STR(labels("{\"k\": \"a,b\"}"), "ERR: label value \"a,b\" may hold only letters, digits and _ . / - : @ +");
    CHECK_EQ_STR(labels("{\"k\": \"\\u00e9\"}"),
                 "ERR: label value \"\xc3\xa9\" may hold only letters, digits and _ . / - : @ +");
    CHECK_EQ_STR(labels("{\"k\": \"a\\nb\"}"), "ERR: label value \"a?b\" may hold only letters, digits and _ . / - : @ +");
    /* Lengths: 63 bytes fit, 64 do not. */
    char doc[512];
    char k63[64], k64[65];
    memset(k63, 'k', 63);
    k63[63] = '\0';
    memset(k64, 'k', 64);
    k64[64] = '\0';
    snprintf(doc, sizeof doc, "{\"%s\": \"%s\"}", k63, k63);
    CHECK(strncmp(labels(doc), "ERR", 3) != 0);
    snprintf(doc, sizeof doc, "{\"%s\": \"v\"}", k64);
    CHECK(strstr(labels(doc), "must be 1 to 63 bytes") != NULL);
    snprintf(doc, sizeof doc, "{\"k\": \"%s\"}", k64);
    CHECK(strstr(labels(doc), "must be 0 to 63 bytes") != NULL);
    /* Count: 16 fit, 17 do not; the most the stored form can take fits its buffer. */
    json_t *many = json_object();
    for (int i = 0; i < SFILTER_LABELS; i++) {
        char key[80];
        snprintf(key, sizeof key, "%.60s%02d", k63, i);
        json_object_set_new(many, key, json_string(k63));
    }
    CHECK_EQ_INT(sfilter_labels(many, out, sizeof out, err, sizeof err), 0);
    CHECK(strlen(out) > 2000 && strlen(out) < SSTORE_LABELS_MAX);
    json_object_set_new(many, "one-more", json_string("v"));
    CHECK_EQ_INT(sfilter_labels(many, out, sizeof out, err, sizeof err), -1);
    CHECK_EQ_STR(err, "at most 16 labels");
    json_decref(many);
}

static void test_query_form(void)
{
    sstore_filter f;
    memset(&f, 0, sizeof f);
    CHECK_EQ_INT(sfilter_add_labels(&f, "team:red", err, sizeof err), 0);
    CHECK_EQ_STR(f.labels, "{\"team\":\"red\"}");
    CHECK_EQ_INT(sfilter_add_labels(&f, "env:prod,url:http://x", err, sizeof err), 0);
    CHECK_EQ_STR(f.labels, "{\"env\":\"prod\",\"team\":\"red\",\"url\":\"http://x\"}");
    CHECK_EQ_INT(sfilter_add_labels(&f, "team:red", err, sizeof err), 0);    /* the same again */
    CHECK_EQ_INT(sfilter_add_labels(&f, "k:", err, sizeof err), 0);          /* an empty value */
    CHECK(strstr(f.labels, "\"k\":\"\"") != NULL);
    char before[SSTORE_LABELS_MAX];
    snprintf(before, sizeof before, "%s", f.labels);
    static const struct { const char *text, *msg; } bad[] = {
        {"team:blue", "label \"team\" is given two values"},
        {"team", "label \"team\" must be key:value"},
        {"a:b,c", "label \"c\" must be key:value"},
        {"a:b,", "label \"\" must be key:value"},
        {":v", "label key \"\" must be 1 to 63 bytes"},
        {"a b:c", "label key \"a b\" may hold only letters, digits and _ . / -"},
        {"a:b c", "label value \"b c\" may hold only letters, digits and _ . / - : @ +"},
        {"", "label \"\" must be key:value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(sfilter_add_labels(&f, bad[i].text, err, sizeof err), -1);
        CHECK_EQ_STR(err, bad[i].msg);
        CHECK_EQ_STR(f.labels, before);       /* unchanged */
    }
}

static void test_time(void)
{
    int64_t ms = -1;
    CHECK_EQ_INT(sfilter_time("0", &ms), 0);
    CHECK_EQ_INT(ms, 0);
    CHECK_EQ_INT(sfilter_time("1795699824189", &ms), 0);
    CHECK_EQ_INT(ms, 1795699824189LL);
    CHECK_EQ_INT(sfilter_time("2026-11-26T13:30:00.250Z", &ms), 0);
    CHECK_EQ_INT(ms, 1795699800250LL);
    CHECK_EQ_INT(sfilter_time("2026-11-26T14:30:00+01:00", &ms), 0);
    CHECK_EQ_INT(ms, 1795699800000LL);
    CHECK_EQ_INT(sfilter_time("", &ms), -1);
    CHECK_EQ_INT(sfilter_time("-5", &ms), -1);
    CHECK_EQ_INT(sfilter_time("12x", &ms), -1);
    CHECK_EQ_INT(sfilter_time("99999999999999999999999", &ms), -1);
    CHECK_EQ_INT(sfilter_time("yesterday", &ms), -1);
}

/* The filter of document text, or -1 with err. */
static int doc(const char *text, sstore_filter *f)
{
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!j) return -2;
    int rc = sfilter_from_json(j, f, err, sizeof err);
    json_decref(j);
    return rc;
}

static void test_documents(void)
{
    sstore_filter f;
    CHECK_EQ_INT(doc("{}", &f), 0);
    CHECK(sfilter_empty(&f));
    CHECK_EQ_INT(doc("{\"status\": \"failed\", \"agent\": \"writer\", \"workflow\": \"blog\", \"labels\": {\"b\": \"2\","
                     " \"a\": \"1\"}, \"createdBefore\": \"2026-11-26T13:30:00.250Z\", \"createdAfter\": 1000}", &f), 0);
    CHECK_EQ_STR(f.status, "failed");
    CHECK_EQ_STR(f.agent, "writer");
    CHECK_EQ_STR(f.workflow, "blog");
    CHECK_EQ_STR(f.labels, "{\"a\":\"1\",\"b\":\"2\"}");
    CHECK(f.has_before && f.created_before == 1795699800250LL);
    CHECK(f.has_after && f.created_after == 1000);
    CHECK(!sfilter_empty(&f));
    CHECK_EQ_INT(doc("{\"createdAfter\": \"5\"}", &f), 0);
    CHECK(f.has_after && f.created_after == 5 && !f.has_before);
    CHECK(!sfilter_empty(&f));
    CHECK_EQ_INT(doc("{\"labels\": {}}", &f), 0);
    CHECK(sfilter_empty(&f));               /* no label is no filter */
    static const struct { const char *text, *msg; } bad[] = {
        {"[]", "filter must be an object"},
        {"{\"colour\": \"red\"}", "filter has an unknown key \"colour\" (known: status, agent, workflow, labels, "
                                  "createdBefore, createdAfter)"},
        {"{\"status\": \"asleep\"}", "status must be pending, running, awaiting_input, completed, failed or cancelled"},
        {"{\"status\": 1}", "status must be pending, running, awaiting_input, completed, failed or cancelled"},
        {"{\"agent\": \"\"}", "agent must be a name of 1 to 71 bytes"},
        {"{\"agent\": 7}", "agent must be a name of 1 to 71 bytes"},
        {"{\"workflow\": \"a\\u0000b\"}", "workflow must be a name of 1 to 71 bytes"},
        {"{\"labels\": {\"a\": 1}}", "label \"a\" must be a string"},
        {"{\"createdBefore\": \"yesterday\"}",
         "createdBefore must be an RFC 3339 date-time or milliseconds since the epoch"},
        {"{\"createdAfter\": -1}", "createdAfter must be an RFC 3339 date-time or milliseconds since the epoch"},
        {"{\"createdAfter\": 1.5}", "createdAfter must be an RFC 3339 date-time or milliseconds since the epoch"},
    };
    char name[80];
    memset(name, 'n', 72);
    name[72] = '\0';
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(doc(bad[i].text, &f), -1);
        CHECK_EQ_STR(err, bad[i].msg);
    }
    char text[200];
    snprintf(text, sizeof text, "{\"agent\": \"%s\"}", name);
    CHECK_EQ_INT(doc(text, &f), -1);
    name[71] = '\0';
    snprintf(text, sizeof text, "{\"agent\": \"%s\"}", name);
    CHECK_EQ_INT(doc(text, &f), 0);
    CHECK_EQ_STR(f.agent, name);
}

int main(void)
{
    test_labels();
    test_query_form();
    test_time();
    test_documents();
    return TEST_MAIN_END();
}

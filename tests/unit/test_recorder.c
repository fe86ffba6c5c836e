/* Unit tests for lib/recorder.c: keys stable across what does not matter and
 * different on what does, the first difference and its path, occurrences in
 * order, incomplete recordings never served, the nearest recording, drift.
 * The database tests run on each engine (test_db.h: PostgreSQL's when
 * DSTREAM_TEST_PG names a cluster). */
#include "recorder.h"

#include <stdlib.h>
#include <string.h>

#include "provider.h"
#include "session.h"
#include "store.h"
#include "test.h"
#include "test_db.h"
#include "utf8.h"
#pragma GCC diagnostic ignored "-Wunused-function"   /* test_doc.h's other helpers */
#include "test_doc.h"

#define J(text) test_json(text, 0)

static const char AGENT[] = "{'name': 'a', 'provider': 'anthropic', 'model': 'm1', 'system': 'Be brief.',"
                            " 'parameters': {'temperature': 0.5}}";
static const char MSGS[] = "[{'role': 'user', 'content': 'hello'}, {'role': 'assistant', 'content': 'hi'},"
                           " {'role': 'user', 'content': 'more'}]";

/* The key of agent + messages sent as kind. */
static void key_of(provider_kind kind, const char *agent, const char *msgs, char out[REC_KEY_LEN + 1])
{
    json_t *a = J(agent), *m = J(msgs);
    json_t *body = provider_request_body(kind, a, m);
    json_t *norm = rec_normalize(kind == PROVIDER_ANTHROPIC ? "anthropic" : "openai", body);
    CHECK(norm != NULL);
    CHECK_EQ_INT(rec_key(norm, out), 0);
    CHECK_EQ_INT(strlen(out), REC_KEY_LEN);
    json_decref(norm);
    json_decref(body);
    json_decref(a);
    json_decref(m);
}

static void test_keys(void)
{
    char k0[REC_KEY_LEN + 1], k1[REC_KEY_LEN + 1];
    key_of(PROVIDER_ANTHROPIC, AGENT, MSGS, k0);
    /* The same request with its agent's keys in another order, an endpoint and
     * a description: nothing that reaches the body changed. */
    key_of(PROVIDER_ANTHROPIC,
           "{'description': 'x', 'endpoint': 'http://other.example:99', 'parameters': {'temperature': 0.5},"
           " 'system': 'Be brief.', 'model': 'm1', 'provider': 'anthropic', 'name': 'b'}",
           MSGS, k1);
    CHECK_EQ_STR(k0, k1);
    /* Each relevant change changes the key. */
    static const char *const changed[] = {
        "{'provider': 'anthropic', 'model': 'm2', 'system': 'Be brief.', 'parameters': {'temperature': 0.5}}",
        "{'provider': 'anthropic', 'model': 'm1', 'system': 'Be long.', 'parameters': {'temperature': 0.5}}",
        "{'provider': 'anthropic', 'model': 'm1', 'system': 'Be brief.', 'parameters': {'temperature': 0.7}}",
        "{'provider': 'anthropic', 'model': 'm1', 'system': 'Be brief.', 'parameters': {'temperature': 0.5,"
        " 'max_tokens': 10}}",
    };
    for (size_t i = 0; i < sizeof changed / sizeof *changed; i++) {
        key_of(PROVIDER_ANTHROPIC, changed[i], MSGS, k1);
        CHECK(strcmp(k0, k1) != 0);
    }
    key_of(PROVIDER_ANTHROPIC, AGENT, "[{'role': 'user', 'content': 'hello'}]", k1);
    CHECK(strcmp(k0, k1) != 0);
    key_of(PROVIDER_OPENAI, AGENT, MSGS, k1);
    CHECK(strcmp(k0, k1) != 0);

    /* Normalized directly: key order, streaming switches do not matter. */
    json_t *ba = J("{'model': 'm', 'stream': true, 'stream_options': {'include_usage': true},"
                   " 'messages': [{'role': 'system', 'content': 'S'}, {'role': 'user', 'content': 'q'}], 'temperature': 1}");
    json_t *bb = J("{'temperature': 1, 'messages': [{'content': 'S', 'role': 'system'},"
                   " {'content': 'q', 'role': 'user'}], 'model': 'm'}");
    json_t *a = rec_normalize("openai", ba), *b = rec_normalize("openai", bb);
    json_decref(ba);
    json_decref(bb);
    CHECK_EQ_STR(json_string_value(json_object_get(a, "system")), "S");
    CHECK_EQ_INT(json_array_size(json_object_get(a, "messages")), 1);
    rec_key(a, k0);
    rec_key(b, k1);
    CHECK_EQ_STR(k0, k1);
    json_decref(a);
    json_decref(b);
    CHECK(rec_normalize("anthropic", NULL) == NULL);

    /* Keys by kind: a provider request's is rec_key's; a tool call's and a tool
     * list's are kept apart from it and from each other. */
    json_t *req = J("{'server': 'fs'}");
    char kp[REC_KEY_LEN + 1], kt[REC_KEY_LEN + 1], kl[REC_KEY_LEN + 1];
    CHECK_EQ_INT(rec_key_of("provider", req, kp), 0);
    rec_key(req, k0);
    CHECK_EQ_STR(kp, k0);
    CHECK_EQ_INT(rec_key_of("tool", req, kt), 0);
    CHECK_EQ_INT(rec_key_of("tools", req, kl), 0);
    CHECK(strcmp(kp, kt) != 0 && strcmp(kp, kl) != 0 && strcmp(kt, kl) != 0);
    json_t *keyed = J("{'kind': 'tools', 'server': {'server': 'fs'}}");
    rec_key(keyed, k1);
    CHECK_EQ_STR(kl, k1);
    CHECK_EQ_INT(rec_key_of("other", req, k1), -1);
    json_decref(keyed);
    json_decref(req);
}

static void test_diff(void)
{
    char path[128], rv[REC_VALUE_MAX + 8], qv[REC_VALUE_MAX + 8];
    json_t *a = J("{'provider': 'anthropic', 'model': 'm', 'system': 'S', 'tools': [], 'parameters': {'max_tokens': 5},"
                  " 'messages': [{'role': 'user', 'content': 'x'}, {'role': 'user', 'content': 'y'}]}");
    json_t *b = json_deep_copy(a);
    CHECK_EQ_INT(rec_diff(a, b, path, sizeof path, rv, sizeof rv, qv, sizeof qv), 0);
    CHECK_EQ_STR(path, "");
    json_array_set_new(json_object_get(b, "messages"), 1, J("{'role': 'user', 'content': 'z'}"));
    CHECK_EQ_INT(rec_diff(a, b, path, sizeof path, rv, sizeof rv, qv, sizeof qv), 1);
    CHECK_EQ_STR(path, "messages[1].content");
    CHECK_EQ_STR(rv, "\"y\"");
    CHECK_EQ_STR(qv, "\"z\"");
    /* system comes before messages. */
    json_object_set_new(b, "system", json_string("T"));
    rec_diff(a, b, path, sizeof path, rv, sizeof rv, qv, sizeof qv);
    CHECK_EQ_STR(path, "system");
    json_object_set_new(b, "system", json_string("S"));
    json_object_set_new(json_object_get(b, "parameters"), "temperature", json_real(0.5));
    rec_diff(a, b, path, sizeof path, rv, sizeof rv, qv, sizeof qv);
    CHECK_EQ_STR(path, "parameters.temperature");
    CHECK_EQ_STR(rv, "(absent)");
    json_object_del(json_object_get(b, "parameters"), "temperature");
    json_array_append_new(json_object_get(b, "messages"), J("{'role': 'user', 'content': 'w'}"));
    rec_diff(a, b, path, sizeof path, rv, sizeof rv, qv, sizeof qv);
    CHECK_EQ_STR(path, "messages[1].content");
    /* Long values are cut. */
    char big[1000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    json_object_set_new(b, "system", json_string(big));
    rec_diff(a, b, path, sizeof path, rv, sizeof rv, qv, sizeof qv);
    CHECK(strlen(qv) <= REC_VALUE_MAX);
    /* Similarity: the same but the last message beats another system prompt. */
    json_t *c = json_deep_copy(a), *d = json_deep_copy(a);
    json_array_set_new(json_object_get(c, "messages"), 1, json_string("other"));
    json_object_set_new(d, "system", json_string("other"));
    CHECK(rec_similarity(a, c) > rec_similarity(a, d));
    CHECK(rec_similarity(a, a) > rec_similarity(a, c));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
    CHECK_EQ_INT(rec_mode_parse("hybrid"), REC_HYBRID);
    CHECK_EQ_INT(rec_mode_parse("x"), -1);
    CHECK_EQ_STR(rec_mode_name(REC_PLAYBACK), "playback");
}

typedef struct got {
    char data[256];
    size_t len;
    int n;
} got;

static int gather(void *ud, int64_t t, const void *p, size_t n)
{
    got *g = ud;
    (void)t;
    if (g->len + n < sizeof g->data) memcpy(g->data + g->len, p, n), g->len += n;
    g->n++;
    return 0;
}

static void test_db(void)
{
    char dir[256];
    log_t *lg;
    log_conn_t *c;
    if (test_db_open("recorder", dir, sizeof dir, &lg, &c)) return;
    json_t *norm = J("{'provider': 'anthropic', 'model': 'm', 'system': null, 'tools': [], 'parameters': {},"
                     " 'messages': [{'role': 'user', 'content': 'q'}]}");
    char key[REC_KEY_LEN + 1];
    rec_key(norm, key);
    char *req = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS);
    /* Session s1: occurrence 0 cut (never ended), occurrence 1 a 529, 2 a 200. */
    rec_id id0 = {"s1", "provider", key, 0}, id1 = {"s1", "provider", key, 1}, id2 = {"s1", "provider", key, 2};
    CHECK_EQ_INT(rec_tx_open(c, &id0, "r0", "anthropic", "m", req, 1), 0);
    CHECK_EQ_INT(rec_tx_chunk(c, &id0, 0, 1, "cut", 3), 0);
    CHECK_EQ_INT(rec_tx_open(c, &id1, "r1", "anthropic", "m", req, 2), 0);
    CHECK_EQ_INT(rec_tx_chunk(c, &id1, 0, 1, "overloaded", 10), 0);
    json_t *meta = J("{'retryAfter': '1'}");
    CHECK_EQ_INT(rec_tx_end(c, &id1, 529, 0, meta, 3), 0);
    json_decref(meta);
    CHECK_EQ_INT(rec_tx_open(c, &id2, "r2", "anthropic", "m", req, 4), 0);
    CHECK_EQ_INT(rec_tx_chunk(c, &id2, 0, 1, "ab", 2), 0);
    CHECK_EQ_INT(rec_tx_chunk(c, &id2, 1, 5, "cd", 2), 0);
    CHECK_EQ_INT(rec_tx_end(c, &id2, 200, 0, NULL, 5), 0);
    /* An ended recording takes no more chunks. */
    CHECK_EQ_INT(rec_tx_chunk(c, &id2, 2, 6, "ef", 2), 0);

    const char *lin[] = {"s1"};
    rec_found f;
    /* Occurrence 0 is incomplete: the first complete one at or after it is served. */
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, lin, 1, NULL, &f), 1);
    CHECK_EQ_INT(f.occurrence, 1);
    CHECK_EQ_INT(f.status, 529);
    CHECK_EQ_STR(json_string_value(json_object_get(f.meta, "retryAfter")), "1");
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", key, 2, lin, 1, NULL, &f), 1);
    CHECK_EQ_INT(f.occurrence, 2);
    CHECK_EQ_INT(f.status, 200);
    got g = {{0}, 0, 0};
    CHECK_EQ_INT(rec_chunks(c, f.rowid, gather, &g), 0);
    CHECK_EQ_INT(g.n, 2);
    CHECK_MEM(g.data, g.len, "abcd", 4);
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", key, 3, lin, 1, NULL, &f), 0);
    /* The latest complete occurrence (an MCP server's last recorded tool list). */
    CHECK_EQ_INT(rec_find(c, "provider", key, REC_LATEST, lin, 1, NULL, &f), 1);
    CHECK_EQ_INT(f.occurrence, 2);
    json_decref(f.meta);
    /* Another session finds it through the last session that recorded the key. */
    const char *other[] = {"s9"};
    CHECK_EQ_INT(rec_find(c, "provider", key, 1, other, 1, NULL, &f), 1);
    CHECK_EQ_STR(f.session, "s1");
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", "0000", 0, lin, 1, NULL, &f), 0);
    /* Only the incomplete one: never served. */
    char key2[REC_KEY_LEN + 1];
    json_t *n2 = json_deep_copy(norm);
    json_object_set_new(n2, "model", json_string("m2"));
    rec_key(n2, key2);
    rec_id id3 = {"s2", "provider", key2, 0};
    CHECK_EQ_INT(rec_tx_open(c, &id3, "r3", "anthropic", "m2", req, 6), 0);
    CHECK_EQ_INT(rec_find(c, "provider", key2, 0, other, 1, NULL, &f), 0);
    /* Reopening an unfinished recording replaces it and its chunks. */
    CHECK_EQ_INT(rec_tx_open(c, &id0, "r0b", "anthropic", "m", req, 7), 0);
    CHECK_EQ_INT(rec_tx_end(c, &id0, 200, 0, NULL, 8), 0);
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, lin, 1, NULL, &f), 1);
    CHECK_EQ_INT(f.occurrence, 0);
    g = (got){{0}, 0, 0};
    rec_chunks(c, f.rowid, gather, &g);
    CHECK_EQ_INT(g.n, 0);
    json_decref(f.meta);

    /* The nearest recording: the same request with another last message. */
    json_t *ask = json_deep_copy(norm);
    json_array_set_new(json_object_get(ask, "messages"), 0, J("{'role': 'user', 'content': 'changed'}"));
    json_t *near = rec_nearest(c, "provider", ask, lin, 1, NULL);
    CHECK(near != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(near, "field")), "messages[0].content");
    CHECK_EQ_STR(json_string_value(json_object_get(near, "recorded")), "\"q\"");
    CHECK_EQ_STR(json_string_value(json_object_get(near, "requested")), "\"changed\"");
    CHECK_EQ_STR(json_string_value(json_object_get(near, "key")), key);
    json_decref(near);
    json_object_set_new(ask, "provider", json_string("openai"));
    CHECK(rec_nearest(c, "provider", ask, lin, 1, NULL) == NULL);
    json_decref(ask);
    json_decref(n2);
    json_decref(norm);
    free(req);
    test_db_close(dir, lg, c);
}

/* Scopes: a session reaches the recordings of the sessions its scope's prefixes
 * name (NULL: all), and of its lineage, whatever the scope; neither rec_find nor
 * rec_nearest shows one out of reach. And rec_explain's words for each case. */
static void test_reach(void)
{
    char dir[256];
    log_t *lg;
    log_conn_t *c;
    if (test_db_open("recorder-reach", dir, sizeof dir, &lg, &c)) return;
    json_t *norm = J("{'provider': 'anthropic', 'model': 'm', 'system': null, 'tools': [], 'parameters': {},"
                     " 'messages': [{'role': 'user', 'content': 'secret of team 1'}]}");
    char key[REC_KEY_LEN + 1];
    rec_key(norm, key);
    char *req = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS);
    rec_id id = {"team1-a", "provider", key, 0};
    CHECK_EQ_INT(rec_tx_open(c, &id, "r0", "anthropic", "m", req, 1), 0);
    CHECK_EQ_INT(rec_tx_chunk(c, &id, 0, 1, "reply", 5), 0);
    CHECK_EQ_INT(rec_tx_end(c, &id, 200, 0, NULL, 2), 0);
    const char *t2[] = {"team2-b"}, *fork[] = {"team2-f", "team1-a"};
    rec_found f;
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, t2, 1, "[\"team2-\"]", &f), 0);
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, t2, 1, "[]", &f), 0);
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, t2, 1, "[\"team2-\", \"team1-\"]", &f), 1);
    CHECK_EQ_STR(f.session, "team1-a");
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, t2, 1, "[\"\"]", &f), 1);     /* "": every session */
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, t2, 1, NULL, &f), 1);
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, fork, 2, "[\"team2-\"]", &f), 1);   /* its lineage */
    json_decref(f.meta);
    json_t *ask = json_deep_copy(norm);
    json_array_set_new(json_object_get(ask, "messages"), 0, J("{'role': 'user', 'content': 'secret of team 2'}"));
    CHECK(rec_nearest(c, "provider", ask, t2, 1, "[\"team2-\"]") == NULL);
    CHECK(rec_nearest(c, "provider", ask, t2, 1, "[\"team10\"]") == NULL);
    json_t *near = rec_nearest(c, "provider", ask, fork, 2, "[\"team2-\"]");
    CHECK_EQ_STR(json_string_value(json_object_get(near, "session")), "team1-a");
    char why[512], want[512], akey[REC_KEY_LEN + 1];
    rec_key(ask, akey);
    rec_explain("request", akey, 0, 0, near, why, sizeof why);
    snprintf(want, sizeof want, "no recording of request %s (occurrence 0); the nearest, %.12s of session team1-a, differs"
             " at messages[0].content: recorded \"secret of team 1\", requested \"secret of team 2\"", akey, key);
    CHECK_EQ_STR(why, want);
    json_decref(near);
    rec_explain("request", akey, 3, 1, NULL, why, sizeof why);
    snprintf(want, sizeof want, "no recording of request %s (occurrence 3), nor of any like it that this session may use", akey);
    CHECK_EQ_STR(why, want);
    /* The same request, recorded once, asked as answer 1: no field, and why. */
    near = rec_nearest(c, "provider", norm, fork, 2, "[]");
    CHECK(near && !json_object_get(near, "field"));
    rec_explain("request", key, 1, 1, near, why, sizeof why);
    snprintf(want, sizeof want, "request %s (occurrence 1) is recorded, but not as answer 1: it was asked more times than"
             " it was recorded", key);
    CHECK_EQ_STR(why, want);
    json_decref(near);
    /* A value cut at 60 bytes inside a character: the reason stays UTF-8. */
    near = json_pack("{s:s, s:s, s:s, s:s, s:s}", "key", key, "session", "s", "field", "system", "recorded",
                     "\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"",
                     "requested", "\"x\"");
    rec_explain("request", akey, 0, 0, near, why, sizeof why);
    CHECK(utf8_valid(why, strlen(why)));
    CHECK(strstr(why, "differs at system") != NULL);
    json_decref(near);
    json_decref(ask);
    json_decref(norm);
    free(req);
    test_db_close(dir, lg, c);
}

/* A recording session cut off twice: occurrence 0 cut, 1 a 529 (answer 0), 2 cut,
 * 3 the 200 (answer 1). A playback asks answer 0, then answer 1 for its retry:
 * the 529 once, then the 200 (by occurrence alone, the retry's "first complete
 * from 1" was the 529 again). A playback cut off itself asks the same answer
 * again. Recordings without an ordinal (tool calls) are still found by occurrence. */
static void test_ordinal(void)
{
    char dir[256];
    log_t *lg;
    log_conn_t *c;
    if (test_db_open("recorder-ord", dir, sizeof dir, &lg, &c)) return;
    const char *key = "00aa", *req = "{}";
    struct { int occ, complete, ord; long status; } rows[] = {{0, 0, -1, 0}, {1, 1, 0, 529}, {2, 0, -1, 0}, {3, 1, 1, 200}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        rec_id id = {"s1", "provider", key, rows[i].occ};
        CHECK_EQ_INT(rec_tx_open(c, &id, "r", "anthropic", "m", req, 1), 0);
        CHECK_EQ_INT(rec_tx_chunk(c, &id, 0, 1, "x", 1), 0);
        if (!rows[i].complete) continue;
        json_t *meta = json_pack("{s:i, s:i}", "durationMs", 5, "ordinal", rows[i].ord);
        CHECK_EQ_INT(rec_tx_end(c, &id, rows[i].status, 0, meta, 2), 0);
        json_decref(meta);
    }
    const char *lin[] = {"p1"};
    rec_found f;
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, lin, 1, NULL, &f), 1);
    CHECK_EQ_INT(f.occurrence, 1);
    CHECK_EQ_INT(f.status, 529);
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", key, 1, lin, 1, NULL, &f), 1);
    CHECK_EQ_INT(f.occurrence, 3);
    CHECK_EQ_INT(f.status, 200);
    CHECK_EQ_INT((int)json_integer_value(json_object_get(f.meta, "ordinal")), 1);
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", key, 2, lin, 1, NULL, &f), 0);
    /* Which tool list each answered request offered: the complete rows in order (the
     * 529 is answer 0, the 200 answer 1; the cut ones are not answers). */
    CHECK_EQ_INT(rec_tools_used(c, "s1", 0, "srv"), -1);     /* no meta.tools */
    rec_id u0 = {"s2", "provider", "00bb", 0}, u1 = {"s2", "provider", "00cc", 0}, u2 = {"s2", "provider", "00dd", 0};
    rec_id *us[] = {&u0, &u1, &u2};
    const char *used[] = {"{\"tools\": {\"srv\": 0}}", NULL, "{\"tools\": {\"srv\": 1, \"other\": 4}}"};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(rec_tx_open(c, us[i], "r", "anthropic", "m", req, 1), 0);
        json_t *meta = used[i] ? json_loads(used[i], 0, NULL) : NULL;
        if (i != 1) CHECK_EQ_INT(rec_tx_end(c, us[i], 200, 0, meta, 2), 0);    /* the second one is cut */
        json_decref(meta);
    }
    CHECK_EQ_INT(rec_tools_used(c, "s2", 0, "srv"), 0);
    CHECK_EQ_INT(rec_tools_used(c, "s2", 1, "srv"), 1);
    CHECK_EQ_INT(rec_tools_used(c, "s2", 1, "other"), 4);
    CHECK_EQ_INT(rec_tools_used(c, "s2", 1, "nope"), -1);
    CHECK_EQ_INT(rec_tools_used(c, "s2", 2, "srv"), -1);
    CHECK_EQ_INT(rec_tools_used(c, "s2", -1, "srv"), -1);
    CHECK_EQ_INT(rec_tools_used(c, "s9", 0, "srv"), -1);
    /* Without ordinals (a tool call's row), by occurrence. */
    rec_id t0 = {"s1", "tool", key, 0}, t1 = {"s1", "tool", key, 1};
    CHECK_EQ_INT(rec_tx_open(c, &t0, "c", "srv", "tool", req, 1), 0);
    CHECK_EQ_INT(rec_tx_open(c, &t1, "c", "srv", "tool", req, 1), 0);
    CHECK_EQ_INT(rec_tx_end(c, &t1, 0, 0, NULL, 2), 0);
    CHECK_EQ_INT(rec_find(c, "tool", key, 0, lin, 1, NULL, &f), 1);
    CHECK_EQ_INT(f.occurrence, 1);
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "tool", key, 2, lin, 1, NULL, &f), 0);
    test_db_close(dir, lg, c);
}

static void test_drift(void)
{
    json_t *r = rec_drift_new();
    json_t *e1 = J("{'type': 'recording:request', 'offset': 'o1', 'payload': {'requestId': 'a', 'outcome': 'hit'}}");
    json_t *e2 = J("{'type': 'recording:request', 'payload': {'requestId': 'b', 'outcome': 'diverged',"
                   " 'nearest': {'field': 'system'}}}");
    json_t *e3 = J("{'type': 'text:delta', 'payload': {'text': 'x'}}");
    rec_drift_add(r, e1);
    rec_drift_add(r, e2);
    rec_drift_add(r, e3);
    CHECK_EQ_INT(json_array_size(json_object_get(r, "requests")), 2);
    CHECK_EQ_INT(json_integer_value(json_object_get(r, "hit")), 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(r, "diverged")), 1);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(json_object_get(r, "requests"), 0), "offset")), "o1");
    CHECK(session_known_type(EV_RECORDING_REQUEST));
    json_decref(e1);
    json_decref(e2);
    json_decref(e3);
    json_decref(r);
}

static int keep_line(void *ud, const char *line, size_t len)
{
    json_array_append_new(ud, json_stringn(line, len));
    return 0;
}

static void test_manage(void)
{
    char dir[256];
    log_t *lg;
    log_conn_t *c;
    if (test_db_open("recorder-manage", dir, sizeof dir, &lg, &c)) return;
    json_t *norm = J("{'provider': 'openai', 'model': 'g', 'system': 'S', 'tools': [], 'parameters': {},"
                     " 'messages': [{'role': 'user', 'content': 'q'}]}");
    char key[REC_KEY_LEN + 1], key2[REC_KEY_LEN + 1];
    rec_key(norm, key);
    char *req = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS);
    /* Three recordings: a and b of key (b pinned), c of key2 (another model), old. */
    rec_id a = {"sa", "provider", key, 0}, b = {"sb", "provider", key, 0};
    CHECK_EQ_INT(rec_tx_open(c, &a, "r1", "openai", "g", req, 1000), 0);
    CHECK_EQ_INT(rec_tx_chunk(c, &a, 0, 1, "data: \xe2\x82", 8), 0);   /* cut inside a UTF-8 sequence */
    CHECK_EQ_INT(rec_tx_chunk(c, &a, 1, 2, "\xac\n\n", 3), 0);
    CHECK_EQ_INT(rec_tx_end(c, &a, 200, 0, NULL, 1001), 0);
    CHECK_EQ_INT(rec_tx_open(c, &b, "r2", "openai", "g", req, 2000), 0);
    CHECK_EQ_INT(rec_tx_end(c, &b, 200, 0, NULL, 2001), 0);
    json_t *n2 = json_deep_copy(norm);
    json_object_set_new(n2, "model", json_string("h"));
    rec_key(n2, key2);
    char *req2 = json_dumps(n2, JSON_COMPACT | JSON_SORT_KEYS);
    rec_id k2 = {"sa", "provider", key2, 0};
    CHECK_EQ_INT(rec_tx_open(c, &k2, "r3", "openai", "h", req2, 3000), 0);

    json_t *arr = json_array();
    int64_t next;
    CHECK_EQ_INT(rec_list(c, NULL, NULL, NULL, 0, 2, arr, &next), 0);
    CHECK_EQ_INT(json_array_size(arr), 2);
    CHECK(next != 0);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(arr, 0), "model")), "h");
    CHECK_EQ_INT(rec_list(c, NULL, NULL, NULL, next, 2, arr, &next), 0);
    CHECK_EQ_INT(json_array_size(arr), 3);
    CHECK_EQ_INT(next, 0);
    json_array_clear(arr);
    CHECK_EQ_INT(rec_list(c, "sa", NULL, "g", 0, 10, arr, &next), 0);
    CHECK_EQ_INT(json_array_size(arr), 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(arr, 0), "bytes")), 11);
    json_decref(arr);

    int rc;
    json_t *all = rec_get(c, key, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(json_array_size(all), 2);
    json_t *chunks = json_object_get(json_array_get(all, 0), "chunks");
    CHECK_EQ_INT(json_array_size(chunks), 2);
    CHECK(json_object_get(json_array_get(chunks, 0), "b64") != NULL);   /* not UTF-8 on its own */
    json_decref(all);
    CHECK(rec_get(c, "0000", &rc) == NULL && rc == 0);

    /* Export everything, check each line parses. */
    json_t *lines = json_array();
    CHECK_EQ_INT(rec_export(c, NULL, keep_line, lines), 0);
    CHECK_EQ_INT(json_array_size(lines), 3);
    char err[256];
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l) {
        json_t *o = rec_import_parse(json_string_value(l), json_string_length(l), err, sizeof err);
        if (!CHECK(o != NULL)) fprintf(stderr, "  %s\n", err);
        json_decref(o);
    }
    /* A line whose key is not its request's is refused. */
    json_t *o = json_loads(json_string_value(json_array_get(lines, 0)), 0, NULL);
    json_object_set_new(o, "key", json_string(key2));
    char *bad = json_dumps(o, JSON_COMPACT);
    CHECK(rec_import_parse(bad, strlen(bad), err, sizeof err) == NULL);
    CHECK(strstr(err, "key") != NULL);
    free(bad);
    json_decref(o);
    CHECK(rec_import_parse("[1]", 3, err, sizeof err) == NULL);
    CHECK(rec_import_parse("{\"kind\": \"x\"}", 13, err, sizeof err) == NULL);

    /* Unpinned, they go with their sessions. */
    CHECK_EQ_INT(rec_pin(c, key, 0), 2);
    CHECK_EQ_INT(rec_tx_delete_session(c, "sa"), 0);
    CHECK_EQ_INT(rec_tx_delete_session(c, "sb"), 0);
    CHECK(rec_get(c, key, &rc) == NULL);
    /* Import restores them all, with their chunks byte for byte. */
    json_array_foreach(lines, i, l) {
        json_t *p = rec_import_parse(json_string_value(l), json_string_length(l), err, sizeof err);
        CHECK_EQ_INT(rec_tx_import(c, p), 0);
        json_decref(p);
    }
    rec_found f;
    const char *lin[] = {"sa"};
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, lin, 1, NULL, &f), 1);
    got g = {{0}, 0, 0};
    rec_chunks(c, f.rowid, gather, &g);
    CHECK_MEM(g.data, g.len, "data: \xe2\x82\xac\n\n", 11);
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", key2, 0, lin, 1, NULL, &f), 0);   /* still incomplete */
    /* Pinning, deleting a session, pruning. */
    CHECK_EQ_INT(rec_pin(c, key, 1), 2);
    CHECK_EQ_INT(rec_tx_delete_session(c, "sa"), 0);
    all = rec_get(c, key, &rc);
    CHECK_EQ_INT(json_array_size(all), 2);
    json_decref(all);
    CHECK_EQ_INT(rec_pin(c, key, 0), 2);
    int64_t count, bytes;
    CHECK_EQ_INT(rec_prune(c, 1500, 1, &count, &bytes), 0);
    CHECK_EQ_INT(count, 1);
    CHECK(bytes > 11);
    CHECK_EQ_INT(rec_prune(c, 1500, 0, &count, &bytes), 0);
    CHECK_EQ_INT(count, 1);
    CHECK_EQ_INT(rec_prune(c, 1500, 1, &count, &bytes), 0);
    CHECK_EQ_INT(count, 0);
    CHECK_EQ_INT(rec_delete(c, key), 1);
    CHECK_EQ_INT(rec_delete(c, key), 0);

    /* base64: canonical only. */
    buf_t bb;
    buf_init(&bb, 1024);
    CHECK_EQ_INT(rec_base64_decode("aGk=", 4, &bb), 0);
    CHECK_MEM(bb.p, bb.len, "hi", 2);
    buf_reset(&bb);
    CHECK_EQ_INT(rec_base64_decode("aGl=", 4, &bb), -1);
    CHECK_EQ_INT(rec_base64_decode("aGk", 3, &bb), -1);
    CHECK_EQ_INT(rec_base64_decode("a=Gk", 4, &bb), -1);
    CHECK_EQ_INT(rec_base64_decode("", 0, &bb), 0);
    buf_free(&bb);

    json_decref(lines);
    json_decref(n2);
    json_decref(norm);
    free(req);
    free(req2);
    test_db_close(dir, lg, c);
}

static int count_row(void *ud, const rec_row *r)
{
    (void)r;
    ++*(int *)ud;
    return 0;
}

static int note_session(void *ud, const char *key, const char *session, int occurrence, const char *request)
{
    char *s = ud;
    size_t n = strlen(s);
    (void)key, (void)occurrence, (void)request;
    snprintf(s + n, 128 - n, "%s;", session);
    return 0;
}

/* The recordings area's edges, alike on both engines: a meta that is not JSON, or
 * whose ordinal is null, is no ordinal (served by occurrence), a string ordinal
 * never equals a number and a 3.0 equals 3; a chunk written again replaces the
 * first; no limit is -1; the lineage ranks first among the candidates; prune counts
 * a request's characters and its chunks' bytes. */
static void test_store_rows(void)
{
    char dir[256];
    log_t *lg;
    log_conn_t *c;
    if (test_db_open("recorder-rows", dir, sizeof dir, &lg, &c)) return;
    const store_recordings_ops *R = store_of(c)->recordings;
    const char *metas[] = {"not json", "{\"ordinal\": null}", "{\"ordinal\": \"2\"}", "{\"ordinal\": 3.0}"};
    for (int i = 0; i < 4; i++) {
        rec_id id = {"s7", "provider", "k7", i};
        CHECK_EQ_INT(R->open(c, &id, "r", "anthropic", "m", "{}", 10 + i), 0);
        CHECK_EQ_INT(R->chunk(c, &id, 0, 1, "first", 5), 0);
        CHECK_EQ_INT(R->chunk(c, &id, 0, 2, "x", 1), 0);
        CHECK_EQ_INT(R->end(c, &id, 200, 0, metas[i], 20), 0);
    }
    rec_found f;
    char *meta = NULL;
    CHECK_EQ_INT(R->find_in(c, "provider", "k7", 0, "s7", &f, &meta), 1);
    CHECK_EQ_INT(f.occurrence, 0);
    CHECK_EQ_STR(meta ? meta : "(null)", "not json");
    free(meta);
    CHECK_EQ_INT(R->find_in(c, "provider", "k7", 1, "s7", &f, &meta), 1);
    CHECK_EQ_INT(f.occurrence, 1);
    free(meta);
    /* The string "2" is no answer 2 (nor no ordinal); 3.0 is answer 3. */
    CHECK_EQ_INT(R->find_in(c, "provider", "k7", 2, "s7", &f, &meta), 0);
    CHECK(meta == NULL);
    CHECK_EQ_INT(R->find_in(c, "provider", "k7", 3, "s7", &f, &meta), 1);
    CHECK_EQ_INT(f.occurrence, 3);
    free(meta);
    meta = NULL;
    got g = {{0}, 0, 0};
    CHECK_EQ_INT(R->chunks(c, f.rowid, gather, &g), 0);
    CHECK_EQ_INT(g.n, 1);
    CHECK_MEM(g.data, g.len, "x", 1);
    /* Candidates: every complete one (no limit), the lineage's first. */
    rec_id o = {"s8", "provider", "k8", 0};
    CHECK_EQ_INT(R->open(c, &o, "r", "anthropic", "m", "{\"q\": \"\u00e9\"}", 5), 0);
    CHECK_EQ_INT(R->end(c, &o, 200, 0, NULL, 6), 0);
    char seen[128] = "";
    CHECK_EQ_INT(R->candidates(c, "provider", "[\"s8\"]", "[\"s7\"]", -1, note_session, seen), 0);
    CHECK_EQ_STR(seen, "s8;s7;s7;s7;s7;");
    seen[0] = '\0';
    CHECK_EQ_INT(R->candidates(c, "provider", "[]", "[\"s8\"]", -1, note_session, seen), 0);
    CHECK_EQ_STR(seen, "s8;");
    int n = 0;
    CHECK_EQ_INT(R->list(c, NULL, NULL, NULL, 0, -1, count_row, &n), 0);
    CHECK_EQ_INT(n, 5);
    /* Prune: s8's request is 10 characters (11 bytes), no chunks. */
    int64_t count, bytes;
    CHECK_EQ_INT(R->prune(c, 6, 1, &count, &bytes), 0);
    CHECK_EQ_INT(count, 1);
    CHECK_EQ_INT(bytes, 10);
    test_db_close(dir, lg, c);
}

int main(void)
{
    test_keys();
    test_diff();
    test_drift();
    for (int e = 0; test_db_engine(e); e++) {
        test_db();
        test_reach();
        test_ordinal();
        test_manage();
        test_store_rows();
    }
    return TEST_MAIN_END();
}

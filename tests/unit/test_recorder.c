/* Unit tests for lib/recorder.c: keys stable across what does not matter and
 * different on what does, the first difference and its path, occurrences in
 * order, incomplete recordings never served, the nearest recording, drift. */
#include "recorder.h"

#include <stdlib.h>
#include <string.h>

#include "provider.h"
#include "session.h"
#include "test.h"
#include "test_db.h"
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
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, lin, 1, &f), 1);
    CHECK_EQ_INT(f.occurrence, 1);
    CHECK_EQ_INT(f.status, 529);
    CHECK_EQ_STR(json_string_value(json_object_get(f.meta, "retryAfter")), "1");
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", key, 2, lin, 1, &f), 1);
    CHECK_EQ_INT(f.occurrence, 2);
    CHECK_EQ_INT(f.status, 200);
    got g = {{0}, 0, 0};
    CHECK_EQ_INT(rec_chunks(c, f.rowid, gather, &g), 0);
    CHECK_EQ_INT(g.n, 2);
    CHECK_MEM(g.data, g.len, "abcd", 4);
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", key, 3, lin, 1, &f), 0);
    /* Another session finds it through the last session that recorded the key. */
    const char *other[] = {"s9"};
    CHECK_EQ_INT(rec_find(c, "provider", key, 1, other, 1, &f), 1);
    CHECK_EQ_STR(f.session, "s1");
    json_decref(f.meta);
    CHECK_EQ_INT(rec_find(c, "provider", "0000", 0, lin, 1, &f), 0);
    /* Only the incomplete one: never served. */
    char key2[REC_KEY_LEN + 1];
    json_t *n2 = json_deep_copy(norm);
    json_object_set_new(n2, "model", json_string("m2"));
    rec_key(n2, key2);
    rec_id id3 = {"s2", "provider", key2, 0};
    CHECK_EQ_INT(rec_tx_open(c, &id3, "r3", "anthropic", "m2", req, 6), 0);
    CHECK_EQ_INT(rec_find(c, "provider", key2, 0, other, 1, &f), 0);
    /* Reopening an unfinished recording replaces it and its chunks. */
    CHECK_EQ_INT(rec_tx_open(c, &id0, "r0b", "anthropic", "m", req, 7), 0);
    CHECK_EQ_INT(rec_tx_end(c, &id0, 200, 0, NULL, 8), 0);
    CHECK_EQ_INT(rec_find(c, "provider", key, 0, lin, 1, &f), 1);
    CHECK_EQ_INT(f.occurrence, 0);
    g = (got){{0}, 0, 0};
    rec_chunks(c, f.rowid, gather, &g);
    CHECK_EQ_INT(g.n, 0);
    json_decref(f.meta);

    /* The nearest recording: the same request with another last message. */
    json_t *ask = json_deep_copy(norm);
    json_array_set_new(json_object_get(ask, "messages"), 0, J("{'role': 'user', 'content': 'changed'}"));
    json_t *near = rec_nearest(c, "provider", ask, lin, 1);
    CHECK(near != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(near, "field")), "messages[0].content");
    CHECK_EQ_STR(json_string_value(json_object_get(near, "recorded")), "\"q\"");
    CHECK_EQ_STR(json_string_value(json_object_get(near, "requested")), "\"changed\"");
    CHECK_EQ_STR(json_string_value(json_object_get(near, "key")), key);
    json_decref(near);
    json_object_set_new(ask, "provider", json_string("openai"));
    CHECK(rec_nearest(c, "provider", ask, lin, 1) == NULL);
    json_decref(ask);
    json_decref(n2);
    json_decref(norm);
    free(req);
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

int main(void)
{
    test_keys();
    test_diff();
    test_db();
    test_drift();
    return TEST_MAIN_END();
}

/* Unit tests for lib/subrule.c: globs, paths, the PUT body, wake tokens, backoff. */
#include "subrule.h"

#include <string.h>

#include "log.h"
#include "test.h"

static void test_glob(void)
{
    static const struct {
        const char *pat, *path;
        int match;
    } cases[] = {
        {"events/*", "events/a", 1},       {"events/*", "events/a/b", 0}, {"events/*", "events", 0},
        {"events/**", "events", 1},        {"events/**", "events/a/b", 1}, {"**", "a/b/c", 1},
        {"**/c", "a/b/c", 1},              {"**/c", "c", 1},              {"**/c", "a/b/d", 0},
        {"a/**/d", "a/d", 1},              {"a/**/d", "a/b/c/d", 1},      {"a/**/d", "a/b/c/e", 0},
        {"a/*/c", "a/b/c", 1},             {"a/*/c", "a/c", 0},           {"a*", "abc", 0},
        {"a*", "a*", 1},                   {"/events/*/", "events/x", 1}, {"**/**/x", "x", 1},
        {"**/*/**", "a", 1},               {"**/*/**", "", 0},            {"x/**/y/**/z", "x/1/y/2/3/z", 1},
        {"x/**/y/**/z", "x/1/y/2/3/q", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!CHECK_EQ_INT(sub_glob_match(cases[i].pat, cases[i].path), cases[i].match))
            fprintf(stderr, "  %s ~ %s\n", cases[i].pat, cases[i].path);
    /* Many '**' against a long path: linear, not exponential (this would not end). */
    char pat[600], path[1100];
    size_t o = 0;
    for (int i = 0; i < 100; i++, o += 3) memcpy(pat + o, "**/", 3);
    memcpy(pat + o, "z", 2);
    o = 0;
    for (int i = 0; i < 500; i++, o += 2) memcpy(path + o, "a/", 2);
    memcpy(path + o, "y", 2);
    CHECK_EQ_INT(sub_glob_match(pat, path), 0);
}

static void test_paths(void)
{
    char out[LOG_PATH_MAX + 1];
    CHECK(sub_path_norm("/events/a/", out, sizeof out) == 0 && !strcmp(out, "events/a"));
    CHECK(sub_path_norm("", out, sizeof out) < 0);
    CHECK(sub_path_norm("///", out, sizeof out) < 0);
    CHECK(sub_path_norm("__ds", out, sizeof out) < 0);
    CHECK(sub_path_norm("__ds/subscriptions/x", out, sizeof out) < 0);
    CHECK(sub_path_norm("__dsx/y", out, sizeof out) == 0);
    CHECK(sub_path_norm("a\nb", out, sizeof out) < 0);
    CHECK(sub_id_valid("sub-1795468610662"));
    CHECK(sub_id_valid("A.b_c~d"));
    CHECK(!sub_id_valid(""));
    CHECK(!sub_id_valid("a/b"));
    CHECK(!sub_id_valid("a b"));
    char longid[SUB_ID_MAX + 2];
    memset(longid, 'a', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    CHECK(!sub_id_valid(longid));
}

static int parse(const char *text, sub_config *c, char *err, size_t cap)
{
    json_t *doc = json_loads(text, 0, NULL);
    int rc = sub_config_parse(doc, c, err, cap);
    json_decref(doc);
    return rc;
}

static void test_config(void)
{
    sub_config a, b;
    char err[256];
    CHECK(parse("{\"type\":\"webhook\",\"pattern\":\"/events/*\",\"streams\":[\"b\",\"a\",\"b\"],"
                "\"webhook\":{\"url\":\"https://h.example.com/\"}}", &a, err, sizeof err) == 0);
    CHECK_EQ_STR(a.pattern, "events/*");
    CHECK_EQ_INT(a.nstreams, 2);
    CHECK_EQ_STR(a.streams[0], "a");
    CHECK_EQ_INT(a.lease_ttl_ms, SUB_LEASE_DEF_MS);
    /* The same configuration written otherwise hashes the same. */
    CHECK(parse("{\"webhook\":{\"url\":\"https://h.example.com/\"},\"streams\":[\"a\",\"b\"],"
                "\"pattern\":\"events/*\",\"type\":\"webhook\",\"lease_ttl_ms\":30000}", &b, err, sizeof err) == 0);
    CHECK_EQ_STR(a.hash, b.hash);
    sub_config_free(&b);
    CHECK(parse("{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"b\",\"a\"],"
                "\"webhook\":{\"url\":\"https://h.example.com/\"},\"description\":\"x\"}", &b, err, sizeof err) == 0);
    CHECK(strcmp(a.hash, b.hash) != 0);
    sub_config_free(&b);
    sub_config_free(&a);

    static const char *const bad[] = {
        "[]", "{}", "{\"type\":\"poll\",\"pattern\":\"a\"}", "{\"type\":\"pull-wake\",\"wake_stream\":\"w\"}",
        "{\"type\":\"pull-wake\",\"pattern\":\"a\"}", "{\"type\":\"webhook\",\"pattern\":\"a\"}",
        "{\"type\":\"webhook\",\"pattern\":\"a\",\"webhook\":{\"url\":5}}",
        "{\"type\":\"pull-wake\",\"pattern\":\"a\",\"wake_stream\":\"w\",\"lease_ttl_ms\":999}",
        "{\"type\":\"pull-wake\",\"pattern\":\"a\",\"wake_stream\":\"w\",\"lease_ttl_ms\":600001}",
        "{\"type\":\"pull-wake\",\"pattern\":\"a\",\"wake_stream\":\"w\",\"lease_ttl_ms\":1.5}",
        "{\"type\":\"pull-wake\",\"streams\":[1],\"wake_stream\":\"w\"}",
        "{\"type\":\"pull-wake\",\"streams\":[\"__ds/x\"],\"wake_stream\":\"w\"}",
        "{\"type\":\"pull-wake\",\"pattern\":\"\",\"wake_stream\":\"w\"}",
        "{\"type\":\"pull-wake\",\"pattern\":\"a\",\"wake_stream\":\"__ds/w\"}",
        "{\"type\":\"pull-wake\",\"pattern\":\"a\",\"wake_stream\":\"w\",\"description\":7}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        if (!CHECK(parse(bad[i], &a, err, sizeof err) < 0)) fprintf(stderr, "  accepted %s\n", bad[i]);
        CHECK(err[0] != '\0');
    }
}

static void test_backoff(void)
{
    CHECK_EQ_INT(sub_backoff_ms(1, 0.5), 1000);
    CHECK_EQ_INT(sub_backoff_ms(2, 0.5), 2000);
    CHECK_EQ_INT(sub_backoff_ms(7, 0.5), 60000);
    CHECK_EQ_INT(sub_backoff_ms(100, 0.5), 60000);
    CHECK_EQ_INT(sub_backoff_ms(1, 0), 800);
    CHECK_EQ_INT(sub_backoff_ms(1, 1), 1200);
}

/* A token passes for its subscription until it expires; another subscription's,
 * a changed character or another key's does not. */
static void test_tokens(void)
{
    webhook_key k, k2;
    CHECK_EQ_INT(webhook_key_generate(&k), 0);
    CHECK_EQ_INT(webhook_key_generate(&k2), 0);
    char tok[SUB_TOKEN_MAX], wake[SUB_WAKE_ID_LEN + 1];
    const char *w = "w_0123456789abcdef01234567";
    int64_t now = 1700000000000, gen = 0;
    sub_token_make(&k, "s1", 7, w, now, tok);
    CHECK_EQ_INT(sub_token_check(&k, "s1", tok, now + 1000, &gen, wake), 0);
    CHECK_EQ_INT(gen, 7);
    CHECK_EQ_STR(wake, w);
    CHECK_EQ_INT(sub_token_check(&k, "s2", tok, now, &gen, wake), SUB_ETOKEN);
    CHECK_EQ_INT(sub_token_check(&k2, "s1", tok, now, &gen, wake), SUB_ETOKEN);
    CHECK_EQ_INT(sub_token_check(&k, "s1", tok, now + 3600 * 1000 + 1, &gen, wake), SUB_EEXPIRED);
    tok[0] = tok[0] == '8' ? '9' : '8';
    CHECK_EQ_INT(sub_token_check(&k, "s1", tok, now, &gen, wake), SUB_ETOKEN);
    CHECK_EQ_INT(sub_token_check(&k, "s1", "", now, &gen, wake), SUB_ETOKEN);
    CHECK_EQ_INT(sub_token_check(&k, "s1", "7.x.1.y", now, &gen, wake), SUB_ETOKEN);
}

int main(void)
{
    test_glob();
    test_paths();
    test_config();
    test_backoff();
    test_tokens();
    return TEST_MAIN_END();
}

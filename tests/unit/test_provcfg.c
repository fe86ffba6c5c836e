/* Tests for lib/provcfg: the operator's provider file and where requests may go. */
#include <sys/stat.h>

#include "test.h"
#include "test_doc.h"
#include "provcfg.h"

#define J(text) test_json(text, 0)

static char dir[512], file[600];
static char err[4096];

/* Write text (with ' for ") to the test file with mode, and load it. */
static provcfg_t *load_text(const char *text, mode_t mode, int with_keys)
{
    FILE *f = fopen(file, "w");
    if (!f) return NULL;
    for (const char *p = text; *p; p++) fputc(*p == '\'' ? '"' : *p, f);
    fclose(f);
    chmod(file, mode);
    return provcfg_load(file, with_keys, err, sizeof err);
}

#define LOAD_OK(text, mode, keys) load_ok(text, mode, keys, __LINE__)
static provcfg_t *load_ok(const char *text, mode_t mode, int keys, int line)
{
    provcfg_t *c = load_text(text, mode, keys);
    if (!c) fprintf(stderr, "line %d: refused: %s\n", line, err);
    CHECK(c != NULL);
    return c;
}

#define LOAD_BAD(text, mode, want) load_bad(text, mode, want, __LINE__)
static void load_bad(const char *text, mode_t mode, const char *want, int line)
{
    provcfg_t *c = load_text(text, mode, 1);
    if (c || !test_has_line(err, want))
        fprintf(stderr, "line %d: wanted a line starting \"%s\", got: %s\n", line, want,
                c ? "(loaded)" : err);
    CHECK(c == NULL && test_has_line(err, want));
    provcfg_free(c);
}

static void test_builtins(void)
{
    provcfg_t *c = provcfg_load(NULL, 1, err, sizeof err);
    if (!CHECK(c != NULL)) return;
    const provcfg_provider *a = provcfg_find(c, "anthropic"), *o = provcfg_find(c, "openai");
    CHECK(a && o && !provcfg_find(c, "gemini"));
    if (!a || !o) return;
    CHECK_EQ_STR(a->base, "https://api.anthropic.com");
    CHECK_EQ_STR(o->base, "https://api.openai.com");
    CHECK(a->builtin && !a->endpoints && !a->key);
    CHECK_EQ_INT(provcfg_builtin_keys(c, "sk-ant", ""), 0);
    CHECK(a->key && !strcmp(a->key, "sk-ant"));
    CHECK(o->key == NULL);

    /* The key goes to the base URL; an endpoint is refused for the built-ins. */
    provcfg_target t;
    char why[400];
    json_t *ag = J("{'provider': 'anthropic', 'model': 'm'}");
    CHECK_EQ_INT(provcfg_target_of(c, ag, &t, why, sizeof why), 0);
    CHECK_EQ_STR(t.base, "https://api.anthropic.com");
    CHECK_EQ_STR(t.host, "api.anthropic.com");
    CHECK(t.key && !strcmp(t.key, "sk-ant") && !t.agent_endpoint);
    json_decref(ag);
    ag = J("{'provider': 'anthropic', 'model': 'm', 'endpoint': 'https://api.anthropic.com'}");
    CHECK_EQ_INT(provcfg_target_of(c, ag, &t, why, sizeof why), -1);
    CHECK(strstr(why, "does not let agents choose an endpoint") != NULL);
    CHECK_EQ_INT(provcfg_check_agent(c, ag, err, sizeof err), -1);
    CHECK(test_has_line(err, "endpoint: provider anthropic does not let agents choose"));
    json_decref(ag);
    ag = J("{'provider': 'gemini', 'model': 'm'}");
    CHECK_EQ_INT(provcfg_check_agent(c, ag, err, sizeof err), -1);
    CHECK(test_has_line(err, "provider: no provider named \"gemini\" is configured"));
    json_decref(ag);
    provcfg_free(c);
}

static void test_file(void)
{
    /* The test stack's file: the mock on loopback, named explicitly. */
    provcfg_t *c = LOAD_OK("{'providers': {'anthropic': {'kind': 'anthropic', 'baseUrl': 'http://127.0.0.1:4567/',"
                           " 'keyEnv': 'TEST_PROVCFG_KEY', 'allowPrivate': ['127.0.0.1']}}}", 0644, 1);
    if (c) {
        const provcfg_provider *a = provcfg_find(c, "anthropic");
        CHECK(a && !a->builtin && !strcmp(a->base, "http://127.0.0.1:4567") && a->key &&
              !strcmp(a->key, "sk-from-env"));
        CHECK(provcfg_find(c, "openai") != NULL);   /* the other built-in stays */
        provcfg_free(c);
    }
    /* Without keys (the HTTP pool) nothing secret is read. */
    c = LOAD_OK("{'providers': {'x': {'kind': 'openai', 'keyEnv': 'TEST_PROVCFG_KEY'}}}", 0644, 0);
    if (c) {
        CHECK(provcfg_find(c, "x") && provcfg_find(c, "x")->key == NULL);
        CHECK_EQ_STR(provcfg_find(c, "x")->base, "https://api.openai.com");
        provcfg_free(c);
    }
    /* A key in the file needs mode 0600 (or stricter). */
    c = LOAD_OK("{'providers': {'x': {'kind': 'openai', 'key': 'sk-in-file'}}}", 0600, 1);
    if (c) {
        CHECK(provcfg_find(c, "x")->key && !strcmp(provcfg_find(c, "x")->key, "sk-in-file"));
        provcfg_free(c);
    }
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'key': 'sk-in-file'}}}", 0640,
             "providers.x.key: a key may be written in the file only when");
    CHECK(strstr(err, "sk-in-file") == NULL);       /* never quoted */
    LOAD_BAD("{'providers': {}}", 0664, "$: ");
    CHECK(strstr(err, "writable by group or others") != NULL);
    LOAD_BAD("{'providers': {}}", 0646, "$: ");
    /* builtins: false leaves only the file's providers. */
    c = LOAD_OK("{'builtins': false, 'providers': {'local': {'kind': 'openai', 'baseUrl': 'http://10.1.2.3:8080',"
                " 'allowPrivate': ['10.0.0.0/8']}}}", 0644, 1);
    if (c) {
        CHECK(!provcfg_find(c, "anthropic") && !provcfg_find(c, "openai") && provcfg_find(c, "local"));
        provcfg_free(c);
    }

    /* Mistakes, each named. */
    LOAD_BAD("[]", 0644, "$: ");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai'}}, 'extra': 1}", 0644, "extra: unknown key");
    LOAD_BAD("{'builtins': 'no'}", 0644, "builtins: must be true or false");
    LOAD_BAD("{'providers': {'x': {'kind': 'gemini'}}}", 0644, "providers.x.kind: must be");
    LOAD_BAD("{'providers': {'x': {}}}", 0644, "providers.x.kind: missing");
    LOAD_BAD("{'providers': {'a b': {'kind': 'openai'}}}", 0644, "providers.a b: a provider name");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'baseUrl': 'ftp://x'}}}", 0644,
             "providers.x.baseUrl: must be an http");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'baseUrl': 'http://u:p@x'}}}", 0644,
             "providers.x.baseUrl: userinfo");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'baseUrl': 'http://x/?a=1'}}}", 0644,
             "providers.x.baseUrl: a query");
    /* A loopback or private base URL must be named in allowPrivate. */
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'baseUrl': 'http://127.0.0.1:8080'}}}", 0644,
             "providers.x.baseUrl: 127.0.0.1 is a loopback address");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'baseUrl': 'http://2130706433:8080',"
             " 'allowPrivate': ['127.0.0.2']}}}", 0644, "providers.x.baseUrl: 127.0.0.1 is a loopback");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'baseUrl': 'http://localhost:8080'}}}", 0644,
             "providers.x.baseUrl: localhost is a loopback name");
    c = LOAD_OK("{'providers': {'x': {'kind': 'openai', 'baseUrl': 'http://localhost:8080',"
                " 'allowPrivate': ['127.0.0.0/8']}}}", 0644, 1);
    provcfg_free(c);
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'baseUrl': 'http://169.254.169.254'}}}", 0644,
             "providers.x.baseUrl: 169.254.169.254 is a link-local address");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'key': 'k', 'keyEnv': 'K'}}}", 0600,
             "providers.x.key: give key or keyEnv, not both");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'keyEnv': 'A-B'}}}", 0644,
             "providers.x.keyEnv: not a variable name");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'key': 'a\\nb'}}}", 0600,
             "providers.x.key: must be 1 to");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'allowEndpoints': 'yes'}}}", 0644,
             "providers.x.allowEndpoints: must be false, true or an array");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'allowEndpoints': ['a b']}}}", 0644,
             "providers.x.allowEndpoints[0]: must be a host");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'allowPrivate': ['*']}}}", 0644,
             "providers.x.allowPrivate[0]: must be an address");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'allowPrivate': ['10.0.0.0/33']}}}", 0644,
             "providers.x.allowPrivate[0]: must be an address");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'allowPrivate': ['2130706433']}}}", 0644,
             "providers.x.allowPrivate[0]: must be an address");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai'}, 'x': {'kind': 'openai'}}}", 0644, "$: ");

    char missing[700];
    snprintf(missing, sizeof missing, "%s/none.json", dir);
    CHECK(provcfg_load(missing, 1, err, sizeof err) == NULL);
    CHECK(strstr(err, "cannot read") != NULL);
    CHECK(provcfg_load(dir, 1, err, sizeof err) == NULL);
}

/* target_of for agent text against c: 0 and the target, or -1 and why. */
static int target(const provcfg_t *c, const char *agent, provcfg_target *t, char *why)
{
    json_t *a = J(agent);
    int rc = provcfg_target_of(c, a, t, why, 400);
    json_decref(a);
    return rc;
}

static void test_endpoints(void)
{
    provcfg_t *c = LOAD_OK("{'providers': {"
                           " 'open': {'kind': 'openai', 'baseUrl': 'https://llm.example.com', 'key': 'sk-op',"
                           "          'allowEndpoints': true},"
                           " 'some': {'kind': 'openai', 'key': 'sk-some', 'allowEndpoints': ['api.example.net', '*.example.org'],"
                           "          'allowPrivate': ['10.0.0.0/8', 'gpu.internal']},"
                           " 'none': {'kind': 'anthropic', 'key': 'sk-none'}}}", 0600, 1);
    if (!c) return;
    provcfg_target t;
    char why[400];
    CHECK_EQ_INT(target(c, "{'provider': 'open'}", &t, why), 0);
    CHECK(t.key && !strcmp(t.key, "sk-op") && !strcmp(t.base, "https://llm.example.com"));

    /* An endpoint the operator allows: no key goes with it. */
    CHECK_EQ_INT(target(c, "{'provider': 'open', 'endpoint': 'https://other.example.com/v1/'}", &t, why), 0);
    CHECK(t.key == NULL && t.agent_endpoint);
    CHECK_EQ_STR(t.base, "https://other.example.com/v1");
    CHECK_EQ_STR(t.host, "other.example.com");
    CHECK_EQ_INT(target(c, "{'provider': 'open', 'endpoint': 'https://llm.example.com'}", &t, why), 0);
    CHECK(t.key == NULL);   /* even the provider's own URL, when the agent gives it */

    /* Every refused form, by its reason. */
    static const struct { const char *ep, *why; } bad[] = {
        {"http://127.0.0.1:8080", "127.0.0.1 is a loopback address"},
        {"http://127.1", "127.0.0.1 is a loopback address"},
        {"http://2130706433", "127.0.0.1 is a loopback address"},
        {"http://0x7f000001", "127.0.0.1 is a loopback address"},
        {"http://017700000001", "127.0.0.1 is a loopback address"},
        {"http://[::1]:80", "::1 is a loopback address"},
        {"http://[::ffff:127.0.0.1]", "::ffff:127.0.0.1 is a loopback address"},
        {"http://169.254.169.254/latest", "169.254.169.254 is a link-local address"},
        {"http://10.0.0.1", "10.0.0.1 is a private address"},
        {"http://0.0.0.0", "0.0.0.0 is an unspecified address"},
        {"http://[ff02::1]", "ff02::1 is a multicast address"},
        {"http://localhost:8080", "localhost is a loopback name"},
        {"http://user:pass@example.com", "userinfo"},
        {"http://example.com@127.0.0.1", "userinfo"},
        {"ftp://example.com", "must be an http"},
        {"http://example.com/?x=1", "a query is not allowed"},
    };
    char agent[600];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(agent, sizeof agent, "{'provider': 'open', 'endpoint': '%s'}", bad[i].ep);
        why[0] = '\0';
        int rc = target(c, agent, &t, why);
        if (!CHECK(rc == -1 && strstr(why, bad[i].why)))
            fprintf(stderr, "  %s: rc %d, %s\n", bad[i].ep, rc, why);
    }

    /* Host patterns, and private addresses the operator named. */
    CHECK_EQ_INT(target(c, "{'provider': 'some', 'endpoint': 'https://api.example.net'}", &t, why), 0);
    CHECK_EQ_INT(target(c, "{'provider': 'some', 'endpoint': 'https://a.b.example.org'}", &t, why), 0);
    CHECK_EQ_INT(target(c, "{'provider': 'some', 'endpoint': 'https://example.org'}", &t, why), -1);
    CHECK(strstr(why, "host example.org is not one provider some allows") != NULL);
    CHECK_EQ_INT(target(c, "{'provider': 'some', 'endpoint': 'https://evil.com'}", &t, why), -1);
    CHECK_EQ_INT(target(c, "{'provider': 'none', 'endpoint': 'https://api.example.net'}", &t, why), -1);
    CHECK(strstr(why, "does not let agents choose an endpoint") != NULL);

    /* The connect-time check: addresses as resolved. */
    const provcfg_provider *some = provcfg_find(c, "some"), *open = provcfg_find(c, "open");
    url_addr a;
    url_addr_parse("10.9.8.7", &a);
    CHECK(provcfg_addr_allowed(some, "api.example.net", &a, why, sizeof why));
    CHECK(!provcfg_addr_allowed(open, "other.example.com", &a, why, sizeof why));
    CHECK(strstr(why, "10.9.8.7 is a private address (not in the allowPrivate of provider open)") != NULL);
    url_addr_parse("::ffff:10.9.8.7", &a);
    CHECK(provcfg_addr_allowed(some, "x", &a, why, sizeof why));
    url_addr_parse("169.254.169.254", &a);
    CHECK(!provcfg_addr_allowed(some, "api.example.net", &a, why, sizeof why));
    CHECK(provcfg_addr_allowed(some, "gpu.internal", &a, why, sizeof why));   /* named by host */
    url_addr_parse("93.184.216.34", &a);
    CHECK(provcfg_addr_allowed(open, "x", &a, why, sizeof why));
    provcfg_free(c);
}

/* The example of docs/agents.md's Providers section loads (tests run from the
 * repository root). */
/* continuation: prefill for anthropic and off for openai unless the file says;
 * a built-in keeps its kind's default; anything else is a mistake. */
static void test_continuation(void)
{
    provcfg_t *c = LOAD_OK("{'providers': {'a': {'kind': 'anthropic'}, 'o': {'kind': 'openai'},"
                           " 'v': {'kind': 'openai', 'continuation': 'continue_final_message'},"
                           " 'l': {'kind': 'openai', 'continuation': 'prefill'},"
                           " 'g': {'kind': 'anthropic', 'continuation': 'off'}}}", 0644, 1);
    if (!c) return;
    CHECK_EQ_INT(provcfg_find(c, "a")->cont, PROVIDER_CONT_PREFILL);
    CHECK_EQ_INT(provcfg_find(c, "o")->cont, PROVIDER_CONT_OFF);
    CHECK_EQ_INT(provcfg_find(c, "v")->cont, PROVIDER_CONT_FINAL_MESSAGE);
    CHECK_EQ_INT(provcfg_find(c, "l")->cont, PROVIDER_CONT_PREFILL);
    CHECK_EQ_INT(provcfg_find(c, "g")->cont, PROVIDER_CONT_OFF);
    CHECK_EQ_INT(provcfg_find(c, "anthropic")->cont, PROVIDER_CONT_PREFILL);
    CHECK_EQ_INT(provcfg_find(c, "openai")->cont, PROVIDER_CONT_OFF);
    provcfg_free(c);
    LOAD_BAD("{'providers': {'a': {'kind': 'anthropic', 'continuation': 'yes'}}}", 0644,
             "providers.a.continuation: must be \"prefill\", \"continue_final_message\" or \"off\"");
    LOAD_BAD("{'providers': {'a': {'kind': 'anthropic', 'continuation': true}}}", 0644, "providers.a.continuation:");
}

static void test_docs_example(void)
{
    static char text[1 << 17];
    FILE *f = fopen("docs/agents.md", "rb");
    if (!CHECK(f != NULL)) return;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *sec = strstr(text, "\n## Providers\n");
    char *start = sec ? strstr(sec, "```json\n") : NULL;
    char *end = start ? strstr(start + 8, "\n```") : NULL;
    if (!CHECK(end != NULL)) return;
    *end = '\0';
    FILE *o = fopen(file, "w");
    if (!o) return;
    fputs(start + 8, o);
    fclose(o);
    chmod(file, 0644);
    provcfg_t *c = provcfg_load(file, 1, err, sizeof err);
    if (!CHECK(c != NULL)) fprintf(stderr, "%s\n", err);
    CHECK(provcfg_find(c, "local") && provcfg_find(c, "gateway") && provcfg_find(c, "anthropic"));
    provcfg_free(c);
}

/* The operator's context windows (models) and the compaction's provider and model. */
static void test_models(void)
{
    provcfg_t *c = LOAD_OK("{'providers': {'local': {'kind': 'openai', 'baseUrl': 'https://llm.example',"
                           " 'models': {'small': {'contextTokens': 8192}, 'other': {}}}},"
                           " 'compaction': {'provider': 'local', 'model': 'small'}}", 0644, 0);
    if (c) {
        CHECK_EQ_INT(provcfg_context_tokens(c, "local", "small"), 8192);
        CHECK_EQ_INT(provcfg_context_tokens(c, "local", "other"), 0);
        CHECK_EQ_INT(provcfg_context_tokens(c, "local", "big"), 0);
        CHECK_EQ_INT(provcfg_context_tokens(c, "anthropic", "small"), 0);
        CHECK_EQ_STR(c->compact_provider, "local");
        CHECK_EQ_STR(c->compact_model, "small");
        provcfg_free(c);
    }
    c = LOAD_OK("{'providers': {}}", 0644, 0);
    if (c) {
        CHECK_EQ_STR(c->compact_provider, "");
        provcfg_free(c);
    }
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'models': {'m': {'contextTokens': 0}}}}}", 0644,
             "providers.x.models.m.contextTokens: must be an integer from 1 to");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'models': {'m': {'window': 5}}}}}", 0644,
             "providers.x.models.m.window: unknown key");
    LOAD_BAD("{'providers': {'x': {'kind': 'openai', 'models': ['m']}}}", 0644, "providers.x.models: must be an object");
    LOAD_BAD("{'compaction': {'provider': 'nope', 'model': 'm'}}", 0644,
             "compaction.provider: no provider named nope is configured");
    LOAD_BAD("{'compaction': {'provider': 'openai'}}", 0644, "compaction.model: missing");
    LOAD_BAD("{'compaction': 'openai'}", 0644, "compaction: must be an object");
}

int main(void)
{
    setenv("TEST_PROVCFG_KEY", "sk-from-env", 1);
    test_builtins();
    if (test_mkdtemp(dir, sizeof dir, "provcfg") == 0) {
        snprintf(file, sizeof file, "%s/providers.json", dir);
        test_file();
        test_endpoints();
        test_continuation();
        test_docs_example();
        test_models();
        test_rmtree(dir);
    }
    return TEST_MAIN_END();
}

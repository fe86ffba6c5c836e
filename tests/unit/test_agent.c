/* Unit tests for lib/agent.c: names, the validator (every rule, several mistakes
 * at once, the example of docs/agents.md) and skill rendering. */
#include "agent.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_doc.h"

/* Test JSON with ' for " (test_doc.h). */
#define J(text) test_json(text, JSON_ALLOW_NUL)

static void test_names(void)
{
    CHECK(agent_valid_name("a"));
    CHECK(agent_valid_name("writer"));
    CHECK(agent_valid_name("a.b-c_D9"));
    CHECK(agent_valid_name("0"));
    CHECK(agent_valid_name("-"));
    /* "." and ".." cannot be addressed in a URL path segment. */
    CHECK(!agent_valid_name("."));
    CHECK(!agent_valid_name(".."));
    CHECK(agent_valid_name("..."));
    char s[80];
    memset(s, 'x', sizeof s);
    s[64] = '\0';
    CHECK(agent_valid_name(s));
    s[64] = 'x';
    s[65] = '\0';
    CHECK(!agent_valid_name(s));
    CHECK(!agent_valid_name(""));
    CHECK(!agent_valid_name(NULL));
    CHECK(!agent_valid_name("a b"));
    CHECK(!agent_valid_name("a/b"));
    CHECK(!agent_valid_name("a\\b"));
    CHECK(!agent_valid_name("caf\xc3\xa9"));
    CHECK(!agent_valid_name("a\n"));
    CHECK(!agent_valid_name("a?"));
    CHECK(!agent_valid_name("{{x}}"));
}

/* ---- validation ------------------------------------------------------------------------ */

#define BASE "'name': 'a', 'provider': 'openai', 'model': 'm'"

static void invalid(const char *doc, const char *want, int line)
{
    json_t *j = J(doc);
    char err[2048] = "";
    int rc = agent_validate(j, err, sizeof err);
    test_note(rc == -1, __FILE__, line, "agent_validate rejects");
    if (!test_note(test_has_line(err, want), __FILE__, line, "names the mistake"))
        fprintf(stderr, "  want a line starting \"%s\" in:\n%s\n", want, err);
    json_decref(j);
}
#define INVALID(doc, want) invalid((doc), (want), __LINE__)

static void valid(const char *doc, int line)
{
    json_t *j = J(doc);
    char err[2048] = "x";
    if (!test_note(agent_validate(j, err, sizeof err) == 0, __FILE__, line, "agent_validate accepts"))
        fprintf(stderr, "  %s\n", err);
    test_note(err[0] == '\0', __FILE__, line, "no message when valid");
    json_decref(j);
}
#define VALID(doc) valid((doc), __LINE__)

static void test_validate_top(void)
{
    VALID("{" BASE "}");
    VALID("{'name': 'claude', 'provider': 'anthropic', 'model': 'claude-sonnet-4-5', 'system': '',"
          " 'endpoint': 'http://127.0.0.1:8081/v1'}");

    INVALID("[]", "$: an agent must be a JSON object");
    INVALID("null", "$: an agent must be a JSON object");
    INVALID("{'provider': 'openai', 'model': 'm'}", "name: missing");
    INVALID("{'name': 1, 'provider': 'openai', 'model': 'm'}", "name: must be a string");
    INVALID("{'name': 'a b', 'provider': 'openai', 'model': 'm'}", "name: must be 1 to 64 of A-Z a-z 0-9 _ . -");
    INVALID("{'name': '', 'provider': 'openai', 'model': 'm'}", "name: must be 1 to 64");
    INVALID("{'name': 'a', 'model': 'm'}", "provider: missing");
    /* Any name syntax: which names exist is the operator's (lib/provcfg). */
    VALID("{'name': 'a', 'provider': 'local-llama.2', 'model': 'm'}");
    INVALID("{'name': 'a', 'provider': 'open ai', 'model': 'm'}", "provider: must be a provider name");
    INVALID("{'name': 'a', 'provider': '', 'model': 'm'}", "provider: must be a provider name");
    INVALID("{'name': 'a', 'provider': ['openai'], 'model': 'm'}", "provider: must be a string");
    INVALID("{'name': 'a', 'provider': 'openai'}", "model: missing");
    INVALID("{'name': 'a', 'provider': 'openai', 'model': ''}", "model: must be 1 to 128 bytes");
    INVALID("{'name': 'a', 'provider': 'openai', 'model': 4}", "model: must be a string");
    INVALID("{" BASE ", 'system': 1}", "system: must be a string");
    INVALID("{" BASE ", 'temperature': 1}", "temperature: unknown key");
    INVALID("{" BASE ", 'Name': 'b'}", "Name: unknown key");

    /* The byte limits, at and over. */
    json_t *doc = J("{" BASE "}");
    char *big = malloc(100002);
    if (!CHECK(big != NULL)) return;
    char err[512];
    memset(big, 'm', 100001);
    big[128] = '\0';
    json_object_set_new(doc, "model", json_string(big));
    CHECK_EQ_INT(agent_validate(doc, err, sizeof err), 0);
    big[128] = 'm';
    big[129] = '\0';
    json_object_set_new(doc, "model", json_string(big));
    CHECK_EQ_INT(agent_validate(doc, err, sizeof err), -1);
    CHECK(test_has_line(err, "model: must be 1 to 128 bytes"));
    json_object_set_new(doc, "model", json_string("m"));
    big[129] = 'm';
    big[100000] = '\0';
    json_object_set_new(doc, "system", json_string(big));
    CHECK_EQ_INT(agent_validate(doc, err, sizeof err), 0);
    big[100000] = 'm';
    big[100001] = '\0';
    json_object_set_new(doc, "system", json_string(big));
    CHECK_EQ_INT(agent_validate(doc, err, sizeof err), -1);
    CHECK(test_has_line(err, "system: longer than 100000 bytes"));
    free(big);
    json_decref(doc);

    /* endpoint */
    VALID("{" BASE ", 'endpoint': 'https://api.openai.com/v1'}");
    INVALID("{" BASE ", 'endpoint': 'api.openai.com'}", "endpoint: must be an http:// or https:// URL");
    INVALID("{" BASE ", 'endpoint': 'ftp://x'}", "endpoint: must be an http");
    INVALID("{" BASE ", 'endpoint': 'https://'}", "endpoint: must be an http");
    INVALID("{" BASE ", 'endpoint': 'https://a b'}", "endpoint: must be an http");
    INVALID("{" BASE ", 'endpoint': 'https://a\\nb'}", "endpoint: must be an http");
    INVALID("{" BASE ", 'endpoint': 8080}", "endpoint: must be a string");
}

static void test_validate_parameters(void)
{
    VALID("{" BASE ", 'parameters': {}}");
    VALID("{" BASE ", 'parameters': {'temperature': 0, 'top_p': 1, 'max_tokens': 1, 'stop': []}}");
    VALID("{" BASE ", 'parameters': {'temperature': 2.0, 'top_p': 0.0, 'max_tokens': 1000000,"
          " 'stop': ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']}}");
    INVALID("{" BASE ", 'parameters': []}", "parameters: must be an object");
    INVALID("{" BASE ", 'parameters': {'temperature': -0.1}}", "parameters.temperature: must be a number from 0 to 2");
    INVALID("{" BASE ", 'parameters': {'temperature': 2.01}}", "parameters.temperature: must be a number from 0 to 2");
    INVALID("{" BASE ", 'parameters': {'temperature': '1'}}", "parameters.temperature: must be a number");
    INVALID("{" BASE ", 'parameters': {'top_p': 1.5}}", "parameters.top_p: must be a number from 0 to 1");
    INVALID("{" BASE ", 'parameters': {'top_p': -1}}", "parameters.top_p: must be a number from 0 to 1");
    INVALID("{" BASE ", 'parameters': {'max_tokens': 0}}", "parameters.max_tokens: must be an integer from 1 to 1000000");
    INVALID("{" BASE ", 'parameters': {'max_tokens': 1000001}}", "parameters.max_tokens: must be an integer");
    INVALID("{" BASE ", 'parameters': {'max_tokens': 10.0}}", "parameters.max_tokens: must be an integer");
    INVALID("{" BASE ", 'parameters': {'stop': 'END'}}", "parameters.stop: must be an array of at most 8");
    INVALID("{" BASE ", 'parameters': {'stop': ['1','2','3','4','5','6','7','8','9']}}",
            "parameters.stop: must be an array of at most 8");
    INVALID("{" BASE ", 'parameters': {'stop': ['ok', 5]}}", "parameters.stop[1]: must be a non-empty string");
    INVALID("{" BASE ", 'parameters': {'stop': ['']}}", "parameters.stop[0]: must be a non-empty string");
    INVALID("{" BASE ", 'parameters': {'top_k': 40}}", "parameters.top_k: unknown key");

    VALID("{" BASE ", 'limits': {'maxTokens': 1, 'maxTurns': 1, 'costBudgetUsd': 0.01}}");
    INVALID("{" BASE ", 'limits': 5}", "limits: must be an object");
    INVALID("{" BASE ", 'limits': {'maxTokens': 0}}", "limits.maxTokens: must be an integer > 0");
    INVALID("{" BASE ", 'limits': {'maxTokens': 1.5}}", "limits.maxTokens: must be an integer > 0");
    INVALID("{" BASE ", 'limits': {'maxTurns': -3}}", "limits.maxTurns: must be an integer > 0");
    INVALID("{" BASE ", 'limits': {'maxTurns': '3'}}", "limits.maxTurns: must be an integer > 0");
    INVALID("{" BASE ", 'limits': {'costBudgetUsd': 0}}", "limits.costBudgetUsd: must be a number > 0");
    VALID("{" BASE ", 'limits': {'contextTokens': 200000}}");
    INVALID("{" BASE ", 'limits': {'contextTokens': 0}}", "limits.contextTokens: must be an integer from 1 to 100000000");
    INVALID("{" BASE ", 'limits': {'contextTokens': 1.5}}", "limits.contextTokens: must be an integer from 1 to 100000000");
    INVALID("{" BASE ", 'limits': {'costBudgetUsd': '1'}}", "limits.costBudgetUsd: must be a number > 0");
    /* Budgets that ask: maxRequests, onExceed, askTimeoutMs. */
    VALID("{" BASE ", 'limits': {'maxRequests': 3, 'onExceed': 'ask', 'askTimeoutMs': 60000}}");
    VALID("{" BASE ", 'limits': {'onExceed': 'fail'}}");
    INVALID("{" BASE ", 'limits': {'onExceed': 'beg'}}", "limits.onExceed: must be \"fail\" or \"ask\"");
    INVALID("{" BASE ", 'limits': {'maxRequests': 0}}", "limits.maxRequests: must be an integer > 0");
    INVALID("{" BASE ", 'limits': {'askTimeoutMs': 1.5}}", "limits.askTimeoutMs: must be an integer > 0");
    {
        char err[512];
        json_t *l = J("{'costBudgetUsd': 1, 'onExceed': 'ask'}");
        CHECK_EQ_INT(agent_validate_limits(l, err, sizeof err), 0);
        json_decref(l);
        l = J("{'maxTurns': 2, 'maxTokens': -1}");
        CHECK_EQ_INT(agent_validate_limits(l, err, sizeof err), -1);
        CHECK(test_has_line(err, "limits.maxTurns: unknown key"));
        CHECK(test_has_line(err, "limits.maxTokens: must be an integer > 0"));
        json_decref(l);
        l = J("[1]");
        CHECK_EQ_INT(agent_validate_limits(l, err, sizeof err), -1);
        CHECK(test_has_line(err, "limits: must be an object"));
        json_decref(l);
    }
    INVALID("{" BASE ", 'limits': {'maxTurn': 3}}", "limits.maxTurn: unknown key");
}

static void test_validate_lists(void)
{
    /* tools */
    VALID("{" BASE ", 'tools': [{'name': 'get_time', 'inputSchema': {}},"
          " {'name': 'x-y', 'description': 'd', 'inputSchema': {'type': 'object'}}]}");
    INVALID("{" BASE ", 'tools': {}}", "tools: must be an array of at most 64");
    INVALID("{" BASE ", 'tools': ['t']}", "tools[0]: a tool must be an object");
    INVALID("{" BASE ", 'tools': [{'inputSchema': {}}]}", "tools[0].name: missing");
    INVALID("{" BASE ", 'tools': [{'name': 'a.b', 'inputSchema': {}}]}", "tools[0].name: must be 1 to 64 of A-Z a-z 0-9 _ -");
    INVALID("{" BASE ", 'tools': [{'name': 'a b', 'inputSchema': {}}]}", "tools[0].name: must be 1 to 64");
    INVALID("{" BASE ", 'tools': [{'name': 't', 'inputSchema': {}}, {'name': 't', 'inputSchema': {}}]}",
            "tools[1].name: duplicate name \"t\" (also [0])");
    INVALID("{" BASE ", 'tools': [{'name': 't', 'description': 3, 'inputSchema': {}}]}",
            "tools[0].description: must be a string");
    INVALID("{" BASE ", 'tools': [{'name': 't'}]}", "tools[0].inputSchema: missing");
    INVALID("{" BASE ", 'tools': [{'name': 't', 'inputSchema': 'object'}]}",
            "tools[0].inputSchema: must be an object (a JSON Schema)");
    INVALID("{" BASE ", 'tools': [{'name': 't', 'inputSchema': {}, 'input_schema': {}}]}",
            "tools[0].input_schema: unknown key");

    /* mcpServers: names of the operator's servers, never commands or environment. */
    VALID("{" BASE ", 'mcpServers': ['fs', 'git.v2']}");
    INVALID("{" BASE ", 'mcpServers': 'fs'}", "mcpServers: must be an array of at most 16");
    INVALID("{" BASE ", 'mcpServers': [1]}", "mcpServers[0]: must be the name of a configured MCP server");
    INVALID("{" BASE ", 'mcpServers': ['a/b']}", "mcpServers[0]: must be the name of a configured MCP server");
    INVALID("{" BASE ", 'mcpServers': ['']}", "mcpServers[0]: must be the name of a configured MCP server");
    INVALID("{" BASE ", 'mcpServers': ['s', 's']}", "mcpServers[1]: duplicate server (also [0])");
    INVALID("{" BASE ", 'mcpServers': [{'name': 'fs', 'command': ['/bin/sh', '-c', 'id']}]}",
            "mcpServers[0]: commands and environment cannot be given in an agent");
    INVALID("{" BASE ", 'mcpServers': [{'name': 'fs', 'env': {'LD_PRELOAD': '/tmp/x.so'}}]}",
            "mcpServers[0]: commands and environment cannot be given in an agent");
    INVALID("{" BASE ", 'mcpServers': [{'name': 'fs'}]}", "mcpServers[0]: must be the name of a configured MCP server");

    /* fallbacks: up to 4 {provider, model}, each another pair. */
    VALID("{" BASE ", 'fallbacks': [{'provider': 'anthropic', 'model': 'c'}, {'provider': 'openai', 'model': 'n'}]}");
    VALID("{" BASE ", 'fallbacks': []}");
    INVALID("{" BASE ", 'fallbacks': {'provider': 'anthropic'}}", "fallbacks: must be an array of at most 4");
    INVALID("{" BASE ", 'fallbacks': ['anthropic']}", "fallbacks[0]: must be an object");
    INVALID("{" BASE ", 'fallbacks': [{'provider': 'anthropic'}]}", "fallbacks[0].model: missing");
    INVALID("{" BASE ", 'fallbacks': [{'model': 'c'}]}", "fallbacks[0].provider: missing");
    INVALID("{" BASE ", 'fallbacks': [{'provider': 'a/b', 'model': 'c'}]}", "fallbacks[0].provider: must be a provider name");
    INVALID("{" BASE ", 'fallbacks': [{'provider': 'anthropic', 'model': ''}]}", "fallbacks[0].model: must be 1 to 128 bytes");
    INVALID("{" BASE ", 'fallbacks': [{'provider': 'anthropic', 'model': 'c', 'endpoint': 'http://x'}]}",
            "fallbacks[0].endpoint: unknown key");
    INVALID("{" BASE ", 'fallbacks': [{'provider': 'openai', 'model': 'm'}]}",
            "fallbacks[0]: is the agent's own provider and model");
    INVALID("{" BASE ", 'fallbacks': [{'provider': 'anthropic', 'model': 'c'}, {'provider': 'anthropic', 'model': 'c'}]}",
            "fallbacks[1]: duplicate fallback (also [0])");
    INVALID("{" BASE ", 'fallbacks': [{'provider': 'a', 'model': '1'}, {'provider': 'a', 'model': '2'},"
            " {'provider': 'a', 'model': '3'}, {'provider': 'a', 'model': '4'}, {'provider': 'a', 'model': '5'}]}",
            "fallbacks: must be an array of at most 4");

    /* approval: tools (declared, a server's, or all of a server's) whose calls wait. */
    VALID("{" BASE ", 'tools': [{'name': 'wc', 'inputSchema': {}}], 'mcpServers': ['fs', 'mail'],"
          " 'approval': {'wc': 'required', 'fs__write': 'required', 'mail': 'required'}}");
    VALID("{" BASE ", 'approval': {}}");
    INVALID("{" BASE ", 'approval': ['wc']}", "approval: must be an object");
    INVALID("{" BASE ", 'tools': [{'name': 'wc', 'inputSchema': {}}], 'approval': {'wc': true}}",
            "approval.wc: must be \"required\"");
    INVALID("{" BASE ", 'tools': [{'name': 'wc', 'inputSchema': {}}], 'approval': {'wc': 'always'}}",
            "approval.wc: must be \"required\"");
    INVALID("{" BASE ", 'mcpServers': ['fs'], 'approval': {'other': 'required'}}",
            "approval.other: names no tool of the agent");
    INVALID("{" BASE ", 'mcpServers': ['fs'], 'approval': {'fs__': 'required'}}", "approval.fs__: names no tool");
    INVALID("{" BASE ", 'mcpServers': ['fs'], 'approval': {'fsx__write': 'required'}}", "approval.fsx__write: names no tool");
    {
        json_t *a = J("{\"approval\": {\"wc\": \"required\", \"mail\": \"required\"}}");
        CHECK(agent_needs_approval(a, "wc", NULL));
        CHECK(agent_needs_approval(a, "mail__send", "mail"));       /* by its server */
        CHECK(!agent_needs_approval(a, "fs__read", "fs"));
        CHECK(!agent_needs_approval(a, "other", NULL));
        CHECK(!agent_needs_approval(a, NULL, NULL));
        json_decref(a);
    }

    /* skills */
    VALID("{" BASE ", 'skills': [{'name': 'plain', 'instructions': 'No parameters.'},"
          " {'name': 's', 'instructions': 'For {{who}} in {{ lang }}, {{who}} again.', 'params': ['who', 'lang', 'unused']}]}");
    INVALID("{" BASE ", 'skills': {}}", "skills: must be an array of at most 64");
    INVALID("{" BASE ", 'skills': [[]]}", "skills[0]: a skill must be an object");
    INVALID("{" BASE ", 'skills': [{'instructions': 'x'}]}", "skills[0].name: missing");
    INVALID("{" BASE ", 'skills': [{'name': 's s', 'instructions': 'x'}]}", "skills[0].name: must be 1 to 64");
    INVALID("{" BASE ", 'skills': [{'name': 's', 'instructions': 'x'}, {'name': 's', 'instructions': 'y'}]}",
            "skills[1].name: duplicate name \"s\" (also [0])");
    INVALID("{" BASE ", 'skills': [{'name': 's'}]}", "skills[0].instructions: missing");
    INVALID("{" BASE ", 'skills': [{'name': 's', 'instructions': ['x']}]}", "skills[0].instructions: must be a string");
    INVALID("{" BASE ", 'skills': [{'name': 's', 'instructions': 'Use {{lang}}.'}]}",
            "skills[0].instructions: uses {{lang}}, which params does not declare");
    INVALID("{" BASE ", 'skills': [{'name': 's', 'instructions': 'Use {{lang}}.', 'params': ['language']}]}",
            "skills[0].instructions: uses {{lang}}");
    INVALID("{" BASE ", 'skills': [{'name': 's', 'instructions': 'Use {{lang', 'params': ['lang']}]}",
            "skills[0].instructions: unterminated \"{{\" at column 5");
    INVALID("{" BASE ", 'skills': [{'name': 's', 'instructions': 'x', 'params': 'lang'}]}",
            "skills[0].params: must be an array of at most 64");
    INVALID("{" BASE ", 'skills': [{'name': 's', 'instructions': 'x', 'params': [1]}]}",
            "skills[0].params[0]: must be a name");
    INVALID("{" BASE ", 'skills': [{'name': 's', 'instructions': 'x', 'params': ['a b']}]}",
            "skills[0].params[0]: must be a name");
    INVALID("{" BASE ", 'skills': [{'name': 's', 'instructions': 'x', 'params': ['a', 'b', 'a']}]}",
            "skills[0].params[2]: duplicate parameter (also params[0])");
    INVALID("{" BASE ", 'skills': [{'name': 's', 'instructions': 'x', 'description': 'd'}]}",
            "skills[0].description: unknown key");

    /* The array bounds, at and over. */
    json_t *doc = J("{" BASE ", 'tools': [], 'mcpServers': [], 'skills': []}");
    char err[4096];
    for (int i = 0; i < 64; i++) {
        char n[16];
        snprintf(n, sizeof n, "t%d", i);
        json_array_append_new(json_object_get(doc, "tools"), json_pack("{s:s, s:{}}", "name", n, "inputSchema"));
        json_array_append_new(json_object_get(doc, "skills"), json_pack("{s:s, s:s}", "name", n, "instructions", "x"));
        if (i < 16)
            json_array_append_new(json_object_get(doc, "mcpServers"), json_string(n));
    }
    CHECK_EQ_INT(agent_validate(doc, err, sizeof err), 0);
    json_array_append_new(json_object_get(doc, "tools"), json_pack("{s:s, s:{}}", "name", "t64", "inputSchema"));
    json_array_append_new(json_object_get(doc, "skills"), json_pack("{s:s, s:s}", "name", "t64", "instructions", "x"));
    json_array_append_new(json_object_get(doc, "mcpServers"), json_string("t16"));
    CHECK_EQ_INT(agent_validate(doc, err, sizeof err), -1);
    CHECK(test_has_line(err, "tools: must be an array of at most 64"));
    CHECK(test_has_line(err, "skills: must be an array of at most 64"));
    CHECK(test_has_line(err, "mcpServers: must be an array of at most 16"));
    CHECK_EQ_INT(test_count_lines(err), 3);
    json_decref(doc);
}

static void test_validate_many(void)
{
    json_t *doc = J("{'name': 'bad name', 'provider': 'gem ini', 'extra': true,"
                    " 'parameters': {'temperature': 3}, 'limits': {'maxTurns': 0},"
                    " 'skills': [{'name': 's', 'instructions': 'Hi {{x}}'}]}");
    char err[2048];
    CHECK_EQ_INT(agent_validate(doc, err, sizeof err), -1);
    CHECK(test_has_line(err, "extra: unknown key"));
    CHECK(test_has_line(err, "name: must be 1 to 64"));
    CHECK(test_has_line(err, "provider: must be a provider name"));
    CHECK(test_has_line(err, "model: missing"));
    CHECK(test_has_line(err, "parameters.temperature: must be a number from 0 to 2"));
    CHECK(test_has_line(err, "limits.maxTurns: must be an integer > 0"));
    CHECK(test_has_line(err, "skills[0].instructions: uses {{x}}, which params does not declare"));
    CHECK_EQ_INT(test_count_lines(err), 7);
    CHECK(err[strlen(err) - 1] != '\n');

    /* Cut to the buffer, and still -1 with no buffer at all. */
    char small[24];
    memset(small, 'q', sizeof small);
    CHECK_EQ_INT(agent_validate(doc, small, sizeof small), -1);
    CHECK(strlen(small) < sizeof small);
    CHECK(strncmp(small, "extra: unknown key", 18) == 0);
    char one[1] = {'q'};
    CHECK_EQ_INT(agent_validate(doc, one, 1), -1);
    CHECK_EQ_INT(one[0], '\0');
    CHECK_EQ_INT(agent_validate(doc, NULL, 0), -1);
    CHECK_EQ_INT(agent_validate(NULL, NULL, 0), -1);
    json_decref(doc);

    /* Long or odd keys stay on one line, cut and marked. */
    doc = J("{" BASE ", 'a\\u0001b': 1, 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk': 2}");
    CHECK_EQ_INT(agent_validate(doc, err, sizeof err), -1);
    CHECK(test_has_line(err, "a?b: unknown key"));
    CHECK(test_has_line(err, "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...: unknown key"));
    CHECK_EQ_INT(test_count_lines(err), 2);
    json_decref(doc);
}

static void test_docs_example(void)
{
    json_t *doc = test_doc_json_block("docs/agents.md");
    if (!CHECK(doc != NULL)) return;
    char err[2048] = "";
    if (!CHECK_EQ_INT(agent_validate(doc, err, sizeof err), 0)) fprintf(stderr, "%s\n", err);
    /* It shows every section the docs describe. */
    const char *keys[] = {"name", "provider", "model", "system", "parameters", "tools",
                          "mcpServers", "skills", "limits"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!CHECK(json_object_get(doc, keys[i]) != NULL)) fprintf(stderr, "  no %s\n", keys[i]);
    /* Its first skill renders with its declared params. */
    json_t *skill = json_array_get(json_object_get(doc, "skills"), 0);
    json_t *params = json_object(), *p;
    size_t i;
    json_array_foreach(json_object_get(skill, "params"), i, p)
        json_object_set_new(params, json_string_value(p), json_string("V"));
    buf_t b;
    buf_init(&b, 0);
    CHECK_EQ_INT(agent_render_skill(doc, json_string_value(json_object_get(skill, "name")), params, &b,
                                    err, sizeof err), 0);
    CHECK(b.p && strstr(b.p, "{{") == NULL);
    buf_free(&b);
    json_decref(params);
    json_decref(doc);
}

/* ---- skills ---------------------------------------------------------------------------- */

static void test_render_skill(void)
{
    json_t *doc = J("{" BASE ", 'skills': ["
                    "{'name': 'sum', 'instructions': 'Summarize for {{audience}} in {{ words }} words. {{audience}}!',"
                    " 'params': ['audience', 'words']},"
                    "{'name': 'plain', 'instructions': 'Nothing to fill. }} { }'},"
                    "{'name': 'broken', 'instructions': 'Oops {{who', 'params': ['who']},"
                    "{'name': 'undeclared', 'instructions': 'Hi {{who}}'},"
                    "{'name': 'noins', 'params': []}]}");
    json_t *params = J("{'audience': 'engineers', 'words': '50'}");
    char err[256];
    buf_t b;
    buf_init(&b, 0);

    CHECK_EQ_INT(agent_render_skill(doc, "sum", params, &b, err, sizeof err), 0);
    CHECK_EQ_STR(b.p, "Summarize for engineers in 50 words. engineers!");
    /* It appends. */
    CHECK_EQ_INT(agent_render_skill(doc, "plain", NULL, &b, err, sizeof err), 0);
    CHECK_EQ_STR(b.p, "Summarize for engineers in 50 words. engineers!Nothing to fill. }} { }");
    buf_reset(&b);
    json_t *empty = json_object();
    CHECK_EQ_INT(agent_render_skill(doc, "plain", empty, &b, err, sizeof err), 0);
    json_decref(empty);

    /* Values go in as text: a placeholder inside a value is not expanded again. */
    json_t *sneaky = J("{'audience': '{{words}}', 'words': '\\u00e9\\n'}");
    buf_reset(&b);
    CHECK_EQ_INT(agent_render_skill(doc, "sum", sneaky, &b, err, sizeof err), 0);
    CHECK_EQ_STR(b.p, "Summarize for {{words}} in \xc3\xa9\n words. {{words}}!");
    json_decref(sneaky);

    /* Mistakes leave the buffer as it was. */
    buf_reset(&b);
    buf_puts(&b, "keep");
    CHECK_EQ_INT(agent_render_skill(doc, "nope", params, &b, err, sizeof err), -1);
    CHECK_EQ_STR(err, "no skill named \"nope\"");
    json_t *missing = J("{'audience': 'x'}");
    CHECK_EQ_INT(agent_render_skill(doc, "sum", missing, &b, err, sizeof err), -1);
    CHECK_EQ_STR(err, "missing parameter \"words\"");
    CHECK_EQ_INT(agent_render_skill(doc, "sum", NULL, &b, err, sizeof err), -1);
    CHECK_EQ_STR(err, "missing parameter \"audience\"");
    json_decref(missing);
    json_t *extra = J("{'audience': 'x', 'words': '1', 'tone': 'dry'}");
    CHECK_EQ_INT(agent_render_skill(doc, "sum", extra, &b, err, sizeof err), -1);
    CHECK_EQ_STR(err, "undeclared parameter \"tone\"");
    json_decref(extra);
    json_t *num = J("{'audience': 'x', 'words': 50}");
    CHECK_EQ_INT(agent_render_skill(doc, "sum", num, &b, err, sizeof err), -1);
    CHECK_EQ_STR(err, "parameter \"words\" must be a string");
    json_decref(num);
    json_t *arr = J("['x']");
    CHECK_EQ_INT(agent_render_skill(doc, "sum", arr, &b, err, sizeof err), -1);
    CHECK_EQ_STR(err, "params must be an object of strings");
    json_decref(arr);
    /* Documents that never passed validation are handled, not trusted. */
    json_t *who = J("{'who': 'x'}");
    CHECK_EQ_INT(agent_render_skill(doc, "broken", who, &b, err, sizeof err), -1);
    CHECK_EQ_STR(err, "unterminated \"{{\" at column 6 of the instructions");
    CHECK_EQ_INT(agent_render_skill(doc, "undeclared", NULL, &b, err, sizeof err), -1);
    CHECK_EQ_STR(err, "undeclared parameter {{who}} in the instructions");
    CHECK_EQ_INT(agent_render_skill(doc, "undeclared", who, &b, err, sizeof err), -1);
    CHECK_EQ_STR(err, "undeclared parameter \"who\"");
    json_decref(who);
    CHECK_EQ_INT(agent_render_skill(doc, "noins", NULL, &b, err, sizeof err), -1);
    CHECK_EQ_STR(err, "skill \"noins\" has no instructions");
    CHECK_EQ_INT(agent_render_skill(NULL, "sum", params, &b, err, sizeof err), -1);
    CHECK_EQ_INT(agent_render_skill(doc, NULL, params, &b, err, sizeof err), -1);
    CHECK_EQ_INT(agent_render_skill(doc, "sum", params, NULL, err, sizeof err), -1);
    CHECK_EQ_INT(agent_render_skill(doc, "nope", params, &b, NULL, 0), -1);
    CHECK_EQ_STR(b.p, "keep");
    CHECK_EQ_UINT(b.len, 4);
    buf_free(&b);

    /* The buffer's ceiling: an error, and nothing half-written. */
    buf_init(&b, 20);
    buf_puts(&b, "pre:");
    CHECK_EQ_INT(agent_render_skill(doc, "sum", params, &b, err, sizeof err), -1);
    CHECK_EQ_STR(err, "rendered skill over 20 bytes");
    CHECK_EQ_STR(b.p, "pre:");
    CHECK_EQ_INT(agent_render_skill(doc, "plain", NULL, &b, err, sizeof err), -1);
    CHECK_EQ_STR(b.p, "pre:");
    buf_free(&b);
    /* Exactly at the ceiling is fine. */
    buf_init(&b, 27);
    buf_puts(&b, "pre:");
    CHECK_EQ_INT(agent_render_skill(doc, "plain", NULL, &b, err, sizeof err), 0);
    CHECK_EQ_STR(b.p, "pre:Nothing to fill. }} { }");
    buf_free(&b);

    json_decref(params);
    json_decref(doc);
}

/* A document stored by an earlier version keeps its env values out of a GET. */
static void test_redact(void)
{
    json_t *doc = J("{" BASE ", 'mcpServers': [{'name': 'fs', 'command': ['x'], 'env': {'TOKEN': 'secret-1'}}, 'git']}");
    agent_redact(doc);
    char *s = json_dumps(doc, JSON_COMPACT);
    CHECK(s && strstr(s, "secret-1") == NULL);
    CHECK(s && strstr(s, "\"TOKEN\":\"[redacted]\"") != NULL);
    CHECK(s && strstr(s, "\"git\"") != NULL);
    free(s);
    json_decref(doc);
}

static void test_system_prompt(void)
{
    buf_t b;
    buf_init(&b, 0);
    json_t *doc = J("{" BASE ", 'system': 'Be brief.', 'skills': [{'name': 'sum', 'instructions': 'Sum up for {{who}} in {{n}} words.',"
                    " 'params': ['who', 'n']}, {'name': 'hi', 'instructions': 'Say hi.'}]}");
    CHECK_EQ_INT(agent_system_prompt(doc, &b), 0);
    CHECK_EQ_STR(b.p, "Be brief.\n\n# Skills\n\nYou have these skills. A message that invokes one begins with its "
                      "instructions, its {{parameters}} filled in.\n\n## sum (parameters: who, n)\n\n"
                      "Sum up for {{who}} in {{n}} words.\n\n## hi\n\nSay hi.\n");
    json_decref(doc);
    buf_reset(&b);
    doc = J("{" BASE ", 'system': 'Only this.'}");
    CHECK_EQ_INT(agent_system_prompt(doc, &b), 0);
    CHECK_EQ_STR(b.p, "Only this.");
    json_decref(doc);
    buf_free(&b);
    buf_init(&b, 8);
    doc = J("{" BASE ", 'skills': [{'name': 'hi', 'instructions': 'Say hi.'}]}");
    CHECK_EQ_INT(agent_system_prompt(doc, &b), BUF_ETOOBIG);
    CHECK_EQ_INT(b.len, 0);
    json_decref(doc);
    buf_free(&b);
}

int main(void)
{
    test_system_prompt();
    test_redact();
    test_names();
    test_validate_top();
    test_validate_parameters();
    test_validate_lists();
    test_validate_many();
    test_docs_example();
    test_render_skill();
    return TEST_MAIN_END();
}

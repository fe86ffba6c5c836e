/* Unit tests for lib/mcp.c: framing fed whole, byte by byte and at every split,
 * classification of every message shape, the messages we build (byte for byte),
 * initialize / tools/list / tools/call results, and the operator's configuration. */
#include "mcp.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test.h"
#include "test_doc.h"

#define J(text) test_json(text, 0)

/* What a reader delivered: one line per message, "KIND id method|message". */
typedef struct seen {
    buf_t log;
    int stop_after;     /* return 1 after this many messages (0: never) */
    int n;
} seen;

static const char *kind_name(mcp_msg_kind k)
{
    static const char *const names[] = {"RESPONSE", "ERROR", "REQUEST", "NOTIFY", "INVALID"};
    return names[k];
}

static int on_msg(void *ud, const mcp_msg *m)
{
    seen *s = ud;
    char *r = m->result ? json_dumps(m->result, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    char *rid = m->rid ? json_dumps(m->rid, JSON_ENCODE_ANY) : NULL;
    buf_printf(&s->log, "%s %lld %s %s %s %lld|", kind_name(m->kind), (long long)m->id,
               m->method ? m->method : (m->message ? m->message : "-"), r ? r : "-", rid ? rid : "-",
               (long long)m->code);
    free(r);
    free(rid);
    s->n++;
    return s->stop_after && s->n >= s->stop_after;
}

/* Feed text to a fresh reader in pieces of `step` bytes (0: all at once); returns
 * what it delivered (caller frees). */
static char *feed(const char *text, size_t len, size_t step, size_t max)
{
    mcp_reader r;
    seen s;
    memset(&s, 0, sizeof s);
    buf_init(&s.log, 0);
    mcp_reader_init(&r, max);
    if (!step) step = len ? len : 1;
    for (size_t i = 0; i < len; i += step)
        mcp_reader_feed(&r, text + i, len - i < step ? len - i : step, on_msg, &s);
    mcp_reader_free(&r);
    char *out = strdup(s.log.p ? s.log.p : "");
    buf_free(&s.log);
    return out;
}

static const char STREAM[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-06-18\"}}\n"
    "\r\n"
    "   \n"
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"h\\u00e9\"}}\r\n"
    "{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"ping\"}\n"
    "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32602,\"message\":\"bad \xc3\xa9\"}}\n"
    "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"parse\"}}\n"
    "not json\n"
    "{\"jsonrpc\":\"1.0\",\"id\":2,\"result\":{}}\n"
    "[1,2]\n"
    "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}}\n"
    "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{},\"error\":{}}\n"
    "{\"jsonrpc\":\"2.0\",\"id\":3}\n"
    "{\"jsonrpc\":\"2.0\",\"method\":5}\n"
    "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":3}\n"
    "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"m\"}\n"
    "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":\"no\"}\n"
    "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":[]}\n"
    "{\"jsonrpc\":\"2.0\",\"id\":10,\"result\":{}} trailing\n"
    "{\"jsonrpc\":\"2.0\",\"id\":11,\"result\":{}}";   /* no newline yet: not delivered */

static const char WANT[] =
    "RESPONSE 1 - {\"protocolVersion\":\"2025-06-18\"} - 0|"
    "NOTIFY -1 notifications/message - - 0|"
    "REQUEST -1 ping - \"s1\" 0|"
    "ERROR 7 bad \xc3\xa9 - - -32602|"
    "ERROR -1 parse - - -32700|"
    "INVALID -1 not JSON - - 0|"
    "INVALID -1 not JSON-RPC 2.0 - - 0|"
    "INVALID -1 not a JSON object - - 0|"
    "INVALID -1 a response to an id we never sent - - 0|"
    "INVALID -1 neither a request nor a response - - 0|"
    "INVALID -1 neither a request nor a response - - 0|"
    "INVALID -1 method is not a string - - 0|"
    "INVALID -1 params is not an object or array - - 0|"
    "INVALID -1 bad request id - - 0|"
    "INVALID -1 error is not an object - - 0|"
    "RESPONSE 9 - [] - 0|"
    "INVALID -1 not JSON - - 0|";

static void test_framing(void)
{
    size_t len = sizeof STREAM - 1;
    char *whole = feed(STREAM, len, 0, 0);
    CHECK_EQ_STR(whole, WANT);
    free(whole);
    char *bytes = feed(STREAM, len, 1, 0);
    CHECK_EQ_STR(bytes, WANT);
    free(bytes);
    /* Every split into two pieces gives the same messages. */
    int same = 1;
    for (size_t cut = 1; cut < len && same; cut += 7) {
        mcp_reader r;
        seen s;
        memset(&s, 0, sizeof s);
        buf_init(&s.log, 0);
        mcp_reader_init(&r, 0);
        mcp_reader_feed(&r, STREAM, cut, on_msg, &s);
        mcp_reader_feed(&r, STREAM + cut, len - cut, on_msg, &s);
        same = s.log.p && strcmp(s.log.p, WANT) == 0;
        if (!same) fprintf(stderr, "split at %zu differs\n", cut);
        mcp_reader_free(&r);
        buf_free(&s.log);
    }
    CHECK(same);
}

static void test_long_lines(void)
{
    /* max 40: the first line is too long, is reported once and skipped to its end;
     * the next line is read as usual, however the bytes come. */
    const char *text = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"pad\":\"xxxxxxxxxxxxxxxxxxxxxxxx\"}}\n"
                       "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n";
    const char *want = "INVALID -1 line too long - - 0|RESPONSE 2 - {} - 0|";
    for (size_t step = 0; step <= 5; step++) {
        char *got = feed(text, strlen(text), step, 40);
        CHECK_EQ_STR(got, want);
        free(got);
    }
    /* A line exactly at the limit is fine. */
    const char *fits = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n";
    char *got = feed(fits, strlen(fits), 1, strlen(fits) - 1);
    CHECK_EQ_STR(got, "RESPONSE 3 - {} - 0|");
    free(got);
}

static void test_stop(void)
{
    mcp_reader r;
    seen s;
    memset(&s, 0, sizeof s);
    buf_init(&s.log, 0);
    s.stop_after = 1;
    mcp_reader_init(&r, 0);
    const char *two = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n";
    CHECK_EQ_INT(mcp_reader_feed(&r, two, strlen(two), on_msg, &s), 1);
    CHECK_EQ_INT(s.n, 1);
    mcp_reader_free(&r);
    buf_free(&s.log);
}

/* ---- building -------------------------------------------------------------------------- */

static void test_build(void)
{
    buf_t b;
    buf_init(&b, 0);
    json_t *p = mcp_initialize_params("1.2");
    CHECK_EQ_INT(mcp_build_request(&b, 1, "initialize", p), 0);
    json_decref(p);
    CHECK_EQ_STR(b.p, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
                      "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
                      "\"clientInfo\":{\"name\":\"dstream\",\"version\":\"1.2\"}}}\n");
    buf_reset(&b);
    CHECK_EQ_INT(mcp_build_notification(&b, "notifications/initialized", NULL), 0);
    CHECK_EQ_STR(b.p, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    buf_reset(&b);
    p = mcp_list_params(NULL);
    mcp_build_request(&b, 2, "tools/list", p);
    json_decref(p);
    p = mcp_list_params("c/2");
    mcp_build_request(&b, 3, "tools/list", p);
    json_decref(p);
    CHECK_EQ_STR(b.p, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{}}\n"
                      "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{\"cursor\":\"c/2\"}}\n");
    buf_reset(&b);
    /* Newlines inside values are escaped: one message stays one line. */
    json_t *args = J("{'path': 'a\\nb', 'n': 1}");
    p = mcp_call_params("read_file", args);
    mcp_build_request(&b, 4, "tools/call", p);
    json_decref(p);
    json_decref(args);
    CHECK_EQ_STR(b.p, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":"
                      "{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\\nb\",\"n\":1}}}\n");
    buf_reset(&b);
    p = mcp_cancel_params(4, "timeout");
    mcp_build_notification(&b, "notifications/cancelled", p);
    json_decref(p);
    CHECK_EQ_STR(b.p, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
                      "{\"requestId\":4,\"reason\":\"timeout\"}}\n");
    buf_reset(&b);
    json_t *rid = json_string("s1");
    mcp_build_reply(&b, rid, NULL, 0, NULL);
    mcp_build_reply(&b, rid, NULL, MCP_ERR_METHOD_NOT_FOUND, "not supported");
    json_decref(rid);
    CHECK_EQ_STR(b.p, "{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"result\":{}}\n"
                      "{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"error\":{\"code\":-32601,\"message\":\"not supported\"}}\n");
    buf_free(&b);
    /* A full buffer is left as it was. */
    buf_init(&b, 10);
    buf_puts(&b, "abc");
    CHECK_EQ_INT(mcp_build_notification(&b, "notifications/initialized", NULL), BUF_ETOOBIG);
    CHECK_EQ_STR(b.p, "abc");
    buf_free(&b);
}

/* ---- results ------------------------------------------------------------------------------ */

static void test_initialize(void)
{
    char v[32], err[256];
    json_t *r = J("{'protocolVersion': '2025-06-18', 'capabilities': {'tools': {}}}");
    CHECK_EQ_INT(mcp_parse_initialize(r, v, sizeof v, err, sizeof err), 0);
    CHECK_EQ_STR(v, "2025-06-18");
    json_decref(r);
    r = J("{'protocolVersion': '2024-11-05'}");
    CHECK_EQ_INT(mcp_parse_initialize(r, v, sizeof v, err, sizeof err), 0);
    json_decref(r);
    r = J("{'protocolVersion': '2099-01-01'}");
    CHECK_EQ_INT(mcp_parse_initialize(r, v, sizeof v, err, sizeof err), -1);
    CHECK(strstr(err, "2099-01-01") != NULL);
    json_decref(r);
    r = J("{}");
    CHECK_EQ_INT(mcp_parse_initialize(r, v, sizeof v, err, sizeof err), -1);
    json_decref(r);
    CHECK_EQ_INT(mcp_parse_initialize(NULL, v, sizeof v, err, sizeof err), -1);
}

static void test_tools(void)
{
    char cursor[16], err[256];
    int skipped = 0;
    json_t *acc = json_array();
    json_t *r = J("{'tools': ["
                  "{'name': 'read_file', 'description': 'Read', 'inputSchema': {'type': 'object'},"
                  " 'annotations': {'readOnlyHint': true}},"
                  "{'name': 'write_file', 'inputSchema': {'type': 'object'}, 'annotations': {'destructiveHint': true}},"
                  "{'name': 'bad name', 'inputSchema': {}},"
                  "{'name': 'noschema'},"
                  "{'name': 'd', 'description': 5, 'inputSchema': {}},"
                  "7],"
                  " 'nextCursor': 'p2'}");
    CHECK_EQ_INT(mcp_parse_tools(r, acc, cursor, sizeof cursor, &skipped, err, sizeof err), 0);
    CHECK_EQ_STR(cursor, "p2");
    CHECK_EQ_INT(skipped, 4);
    CHECK_EQ_INT(json_array_size(acc), 2);
    json_t *t0 = json_array_get(acc, 0), *t1 = json_array_get(acc, 1);
    CHECK(json_is_true(json_object_get(t0, "readOnly")));
    CHECK(json_is_false(json_object_get(t1, "readOnly")));
    CHECK_EQ_STR(json_string_value(json_object_get(t0, "description")), "Read");
    CHECK(json_object_get(t1, "description") == NULL);
    json_decref(r);
    /* The last page: no cursor (or null). */
    r = J("{'tools': [], 'nextCursor': null}");
    CHECK_EQ_INT(mcp_parse_tools(r, acc, cursor, sizeof cursor, &skipped, err, sizeof err), 0);
    CHECK_EQ_STR(cursor, "");
    json_decref(r);
    r = J("{'tools': [], 'nextCursor': 'a cursor that does not fit'}");
    CHECK_EQ_INT(mcp_parse_tools(r, acc, cursor, sizeof cursor, &skipped, err, sizeof err), -1);
    json_decref(r);
    r = J("{'tools': [], 'nextCursor': 3}");
    CHECK_EQ_INT(mcp_parse_tools(r, acc, cursor, sizeof cursor, &skipped, err, sizeof err), -1);
    json_decref(r);
    r = J("{'tool': []}");
    CHECK_EQ_INT(mcp_parse_tools(r, acc, cursor, sizeof cursor, &skipped, err, sizeof err), -1);
    json_decref(r);
    /* At most MCP_TOOLS_MAX are kept. */
    json_t *many = json_pack("{s:[]}", "tools");
    for (int i = 0; i < MCP_TOOLS_MAX + 3; i++)
        json_array_append_new(json_object_get(many, "tools"), json_pack("{s:s, s:{}}", "name", "t", "inputSchema"));
    json_array_clear(acc);
    skipped = 0;
    CHECK_EQ_INT(mcp_parse_tools(many, acc, cursor, sizeof cursor, &skipped, err, sizeof err), 0);
    CHECK_EQ_INT(json_array_size(acc), MCP_TOOLS_MAX);
    CHECK_EQ_INT(skipped, 3);
    json_decref(many);
    json_decref(acc);
}

static void test_call_output(void)
{
    int is_error = -1;
    json_t *r = J("{'content': [{'type': 'text', 'text': 'a'}, {'type': 'text', 'text': 'b'}]}");
    json_t *o = mcp_call_output(r, &is_error);
    CHECK_EQ_STR(json_string_value(o), "a\nb");
    CHECK_EQ_INT(is_error, 0);
    json_decref(o);
    json_decref(r);
    r = J("{'content': [{'type': 'text', 'text': 'no such file'}], 'isError': true}");
    o = mcp_call_output(r, &is_error);
    CHECK_EQ_STR(json_string_value(o), "no such file");
    CHECK_EQ_INT(is_error, 1);
    json_decref(o);
    json_decref(r);
    r = J("{'content': [{'type': 'image', 'data': 'AA==', 'mimeType': 'image/png'}]}");
    o = mcp_call_output(r, &is_error);
    CHECK(json_is_array(o) && json_array_size(o) == 1);
    json_decref(o);
    json_decref(r);
    r = J("{'structuredContent': {'n': 1}}");
    o = mcp_call_output(r, &is_error);
    CHECK(json_integer_value(json_object_get(o, "n")) == 1);
    json_decref(o);
    json_decref(r);
    r = J("{'content': []}");
    o = mcp_call_output(r, &is_error);
    CHECK_EQ_STR(json_string_value(o), "");
    json_decref(o);
    json_decref(r);
    r = J("[1]");
    CHECK(mcp_call_output(r, &is_error) == NULL);
    json_decref(r);
}

/* ---- configuration ---------------------------------------------------------------------------- */

static void config_invalid(const char *doc, const char *want, int line)
{
    json_t *j = J(doc);
    char err[2048] = "";
    test_note(mcp_config_validate(j, err, sizeof err) == -1, __FILE__, line, "rejected");
    if (!test_note(test_has_line(err, want), __FILE__, line, "names the mistake"))
        fprintf(stderr, "  want \"%s\" in:\n%s\n", want, err);
    json_decref(j);
}
#define CONFIG_INVALID(doc, want) config_invalid((doc), (want), __LINE__)

static void test_config(void)
{
    char err[2048];
    json_t *ok = J("{'mcpServers': {'fs': {'command': '/usr/bin/node', 'args': ['srv.js', '/tmp'],"
                   " 'env': {'A_1': 'x'}, 'cwd': '/tmp', 'timeoutMs': 5000, 'concurrency': 2,"
                   " 'idleStopMs': 1000, 'tools': {'write_file': 'sideEffecting', 'stat': 'readOnly'}},"
                   " 'empty': {'command': '/bin/true'}}}");
    CHECK_EQ_INT(mcp_config_validate(ok, err, sizeof err), 0);
    const json_t *fs = mcp_config_server(ok, "fs");
    CHECK(fs != NULL);
    CHECK(mcp_config_server(ok, "nope") == NULL);
    CHECK(mcp_config_server(ok, NULL) == NULL);
    /* Annotations, overridden by the operator. */
    json_t *ro = J("{'name': 'read_file', 'readOnly': true}");
    json_t *rw = J("{'name': 'write_file', 'readOnly': true}");
    json_t *st = J("{'name': 'stat', 'readOnly': false}");
    json_t *other = J("{'name': 'other', 'readOnly': false}");
    CHECK_EQ_INT(mcp_tool_side_effecting(fs, ro), 0);
    CHECK_EQ_INT(mcp_tool_side_effecting(fs, rw), 1);
    CHECK_EQ_INT(mcp_tool_side_effecting(fs, st), 0);
    CHECK_EQ_INT(mcp_tool_side_effecting(fs, other), 1);
    json_decref(ro);
    json_decref(rw);
    json_decref(st);
    json_decref(other);
    json_decref(ok);

    CONFIG_INVALID("[]", "$: the MCP configuration must be a JSON object");
    CONFIG_INVALID("{}", "mcpServers: must be an object");
    CONFIG_INVALID("{'mcpServers': {}, 'x': 1}", "x: unknown key");
    CONFIG_INVALID("{'mcpServers': {'a/b': {'command': '/x'}}}", "mcpServers.a/b: a name must be");
    CONFIG_INVALID("{'mcpServers': {'s': 1}}", "mcpServers.s: a server must be an object");
    CONFIG_INVALID("{'mcpServers': {'s': {}}}", "mcpServers.s.command: missing");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': 'node'}}}", "mcpServers.s.command: must be an absolute path");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': ['/x']}}}", "mcpServers.s.command: must be a string");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x', 'args': '-v'}}}", "mcpServers.s.args: must be an array");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x', 'args': [1]}}}", "mcpServers.s.args[0]: must be a string");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x', 'env': {'1A': 'v'}}}}", "mcpServers.s.env.1A: not a variable name");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x', 'env': {'A': 1}}}}", "mcpServers.s.env.A: must be a string");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x', 'cwd': 'rel'}}}", "mcpServers.s.cwd: must be an absolute path");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x', 'timeoutMs': 0}}}", "mcpServers.s.timeoutMs: must be an integer");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x', 'concurrency': 1.5}}}", "mcpServers.s.concurrency: must be an integer");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x', 'idleStopMs': -1}}}", "mcpServers.s.idleStopMs: must be an integer");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x', 'tools': {'t': 'rw'}}}}", "mcpServers.s.tools.t: must be");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x', 'shell': true}}}", "mcpServers.s.shell: unknown key");
    /* Every mistake at once. */
    json_t *bad = J("{'mcpServers': {'s': {'command': 'x', 'cwd': 'y', 'timeoutMs': 'z'}}}");
    CHECK_EQ_INT(mcp_config_validate(bad, err, sizeof err), -1);
    CHECK_EQ_INT(test_count_lines(err), 3);
    json_decref(bad);
    /* The example of docs/mcp.md is a valid configuration. */
    json_t *doc = test_doc_json_block("docs/mcp.md");
    CHECK(doc != NULL);
    if (doc && mcp_config_validate(doc, err, sizeof err)) fprintf(stderr, "docs/mcp.md: %s\n", err);
    CHECK(doc && mcp_config_validate(doc, err, sizeof err) == 0);
    json_decref(doc);
}

/* Bindings of declared tools: checked against the servers, named with their paths. */
static void test_bindings_config(void)
{
    char err[2048];
    json_t *ok = J("{'mcpServers': {'text': {'command': '/bin/true'}}, 'bindings': {'word_count':"
                   " {'server': 'text', 'tool': 'count_words'}, 'w-2': {'server': 'text', 'tool': 'a.b/c'}}}");
    CHECK_EQ_INT(mcp_config_validate(ok, err, sizeof err), 0);
    json_decref(ok);
    CONFIG_INVALID("{'mcpServers': {}, 'bindings': []}", "bindings: must be an object");
    CONFIG_INVALID("{'mcpServers': {}, 'bindings': {'w': {'server': 'gone', 'tool': 't'}}}",
                   "bindings.w.server: no server named \"gone\" in mcpServers");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x'}}, 'bindings': {'a.b': {'server': 's', 'tool': 't'}}}",
                   "bindings.a.b: a tool name must be");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x'}}, 'bindings': {'w': 's'}}", "bindings.w: a binding must be an object");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x'}}, 'bindings': {'w': {'server': 's'}}}", "bindings.w.tool: missing");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x'}}, 'bindings': {'w': {'tool': 't'}}}", "bindings.w.server: missing");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x'}}, 'bindings': {'w': {'server': 's', 'tool': 'a b'}}}",
                   "bindings.w.tool: must be a tool name");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x'}}, 'bindings': {'w': {'server': 's', 'tool': ''}}}",
                   "bindings.w.tool: must be a tool name");
    CONFIG_INVALID("{'mcpServers': {'s': {'command': '/x'}}, 'bindings': {'w': {'server': 's', 'tool': 't', 'env': {}}}}",
                   "bindings.w.env: unknown key");
    /* Every mistake at once. */
    json_t *bad = J("{'mcpServers': {'s': {'command': '/x'}}, 'bindings': {'a b': {'server': 'x', 'tool': 1}}}");
    CHECK_EQ_INT(mcp_config_validate(bad, err, sizeof err), -1);
    CHECK_EQ_INT(test_count_lines(err), 3);
    json_decref(bad);
}

/* Agents and workflows name configured servers only (when there is a configuration). */
static void test_check_documents(void)
{
    char err[1024];
    json_t *conf = J("{'mcpServers': {'files': {'command': '/bin/true', 'env': {'TOKEN': 'secret-value'}}, 't': {'command': '/x'}}}");
    json_t *agent = J("{'name': 'a', 'mcpServers': ['files', 'nope', {'name': 'old'}, 'bad name', 't', 'cms']}");
    CHECK_EQ_INT(mcp_check_agent(conf, agent, err, sizeof err), -1);
    CHECK(test_has_line(err, "mcpServers[1]: no MCP server named \"nope\" is configured"));
    CHECK(test_has_line(err, "mcpServers[5]: no MCP server named \"cms\" is configured"));
    CHECK_EQ_INT(test_count_lines(err), 2);     /* the malformed ones are the validator's */
    CHECK(strstr(err, "secret") == NULL && strstr(err, "/bin/true") == NULL);
    /* No configuration: any name; none named: nothing to say. */
    CHECK_EQ_INT(mcp_check_agent(NULL, agent, err, sizeof err), 0);
    json_t *plain = J("{'name': 'p', 'mcpServers': ['t', 'files']}");
    CHECK_EQ_INT(mcp_check_agent(conf, plain, err, sizeof err), 0);
    CHECK_EQ_STR(err, "");
    json_decref(plain);
    json_decref(agent);

    json_t *wf = J("{'name': 'w', 'phases': [{'name': 'a', 'steps': [{'kind': 'tool', 'server': 'files', 'tool': 'x'},"
                   " {'kind': 'agent', 'agent': 'nope', 'prompt': 'p'}]},"
                   " {'name': 'b', 'steps': [{'kind': 'update', 'set': {}}, {'kind': 'tool', 'server': 'nope', 'tool': 'x'},"
                   " {'kind': 'tool', 'server': 7}, {'kind': 'tool', 'tool': 'x'}]}, 'junk', {'steps': 1}]}");
    CHECK_EQ_INT(mcp_check_workflow(conf, wf, err, sizeof err), -1);
    CHECK_EQ_STR(err, "phases[1].steps[1].server: no MCP server named \"nope\" is configured");
    CHECK_EQ_INT(mcp_check_workflow(NULL, wf, err, sizeof err), 0);
    json_decref(wf);
    json_t *notwf = J("[1]");
    CHECK_EQ_INT(mcp_check_workflow(conf, notwf, err, sizeof err), 0);
    CHECK_EQ_INT(mcp_check_agent(conf, notwf, err, sizeof err), 0);
    json_decref(notwf);
    json_decref(conf);
}

/* Which bindings reach an agent, and what a call of a declared tool resolves to. */
static void test_bindings_resolve(void)
{
    json_t *conf = J("{'mcpServers': {'text': {'command': '/x'}, 'other': {'command': '/y'}},"
                     " 'bindings': {'word_count': {'server': 'text', 'tool': 'count_words'},"
                     " 'text__echo': {'server': 'text', 'tool': 'shout'}, 'elsewhere': {'server': 'other', 'tool': 'x'},"
                     " 'gone': {'server': 'text', 'tool': 'not_listed'}, 'undeclared': {'server': 'text', 'tool': 'echo'}}}");
    json_t *agent = J("{'tools': [{'name': 'word_count', 'inputSchema': {}}, {'name': 'text__echo', 'inputSchema': {}},"
                      " {'name': 'elsewhere', 'inputSchema': {}}, {'name': 'gone', 'inputSchema': {}},"
                      " {'name': 'mine', 'inputSchema': {}}], 'mcpServers': ['text']}");
    json_t *b = mcp_bindings_for(conf, agent, "text");
    char *d = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    /* Declared and bound to this server; not "elsewhere" (another server), not "undeclared". */
    CHECK_EQ_STR(d, "{\"gone\":\"not_listed\",\"text__echo\":\"shout\",\"word_count\":\"count_words\"}");
    free(d);
    /* A server the agent does not name gives it no binding, even one the config has. */
    json_t *none = mcp_bindings_for(conf, agent, "other");
    CHECK_EQ_INT(json_object_size(none), 0);
    json_decref(none);
    none = mcp_bindings_for(NULL, agent, "text");
    CHECK_EQ_INT(json_object_size(none), 0);
    json_decref(none);

    json_t *servers = J("[{'server': 'text', 'tools': [{'name': 'count_words', 'inputSchema': {}, 'readOnly': true},"
                        " {'name': 'echo', 'inputSchema': {}, 'readOnly': true}, {'name': 'shout', 'inputSchema': {}, 'readOnly': false}]}]");
    json_object_set(json_array_get(servers, 0), "bound", b);
    const char *server = NULL;
    const json_t *t = mcp_resolve(servers, "word_count", &server);
    CHECK(t && !strcmp(server, "text") && !strcmp(json_string_value(json_object_get(t, "name")), "count_words"));
    /* A binding wins over the exposed name it shadows. */
    server = NULL;
    t = mcp_resolve(servers, "text__echo", &server);
    CHECK(t && !strcmp(json_string_value(json_object_get(t, "name")), "shout"));
    /* A bound tool its server does not list runs nothing; neither does an unbound declared one. */
    server = NULL;
    CHECK(mcp_resolve(servers, "gone", &server) == NULL && server == NULL);
    CHECK(mcp_resolve(servers, "mine", &server) == NULL);
    t = mcp_resolve(servers, "text__count_words", &server);
    CHECK(t && !strcmp(json_string_value(json_object_get(t, "name")), "count_words"));
    /* Offered: the declared tools as declared; the servers' tools unless shadowed. */
    json_t *offered = mcp_model_tools(json_object_get(agent, "tools"), servers);
    CHECK_EQ_INT(json_array_size(offered), 5 + 2);
    json_decref(offered);
    json_decref(servers);
    json_decref(b);
    json_decref(agent);
    json_decref(conf);
}

/* The file as the programs read it: the operator's, valid. */
static void test_config_load(void)
{
    char dir[] = "/tmp/test_mcp.XXXXXX", path[64], err[2048];
    if (!CHECK(mkdtemp(dir) != NULL)) return;
    snprintf(path, sizeof path, "%s/mcp.json", dir);
    FILE *f = fopen(path, "w");
    if (!CHECK(f != NULL)) return;
    fputs("{\"mcpServers\": {\"s\": {\"command\": \"/bin/true\"}}, \"bindings\": {\"w\": {\"server\": \"s\", \"tool\": \"t\"}}}", f);
    fclose(f);
    chmod(path, 0644);
    json_t *doc = mcp_config_load(path, err, sizeof err);
    CHECK(doc && mcp_config_server(doc, "s"));
    json_decref(doc);
    chmod(path, 0664);
    CHECK(mcp_config_load(path, err, sizeof err) == NULL);
    CHECK(strstr(err, "must not be writable by others") != NULL);
    f = fopen(path, "w");
    if (f) {
        fputs("{\"mcpServers\": {\"s\": {\"command\": \"rel\"}}}", f);
        fclose(f);
    }
    chmod(path, 0600);
    CHECK(mcp_config_load(path, err, sizeof err) == NULL);
    CHECK(test_has_line(err, "mcpServers.s.command: must be an absolute path"));
    unlink(path);
    CHECK(mcp_config_load(path, err, sizeof err) == NULL);
    CHECK(strstr(err, "cannot read") != NULL);
    rmdir(dir);
}

static void test_exposed(void)
{
    char out[MCP_TOOL_NAME_MAX + 1];
    mcp_exposed_name("fs", "read_file", out, sizeof out);
    CHECK_EQ_STR(out, "fs__read_file");
    mcp_exposed_name("my.srv", "a/b c", out, sizeof out);
    CHECK_EQ_STR(out, "my_srv__a_b_c");
    char longname[200];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    mcp_exposed_name("s", longname, out, sizeof out);
    CHECK_EQ_INT(strlen(out), MCP_TOOL_NAME_MAX);
    char small[5];
    mcp_exposed_name("server", "tool", small, sizeof small);
    CHECK_EQ_STR(small, "serv");
}

static void test_model_tools(void)
{
    json_t *declared = J("[{'name': 'word_count', 'inputSchema': {'type': 'object'}}]");
    json_t *servers = J("[{'server': 'f_s', 'tools': [{'name': 'read_file', 'description': 'Read', 'inputSchema': {'type': 'object'}, 'readOnly': true},"
                        " {'name': 'write', 'inputSchema': {}, 'readOnly': false}]},"
                        " {'server': 'f.s', 'tools': [{'name': 'read_file', 'inputSchema': {}, 'readOnly': true}]}]");
    json_t *tools = mcp_model_tools(declared, servers);
    char *s = json_dumps(tools, JSON_COMPACT | JSON_SORT_KEYS);
    /* f.s__read_file is exposed as f_s__read_file too: offered once, the first. */
    CHECK_EQ_STR(s, "[{\"inputSchema\":{\"type\":\"object\"},\"name\":\"word_count\"},"
                    "{\"description\":\"Read\",\"inputSchema\":{\"type\":\"object\"},\"name\":\"f_s__read_file\"},"
                    "{\"inputSchema\":{},\"name\":\"f_s__write\"}]");
    free(s);
    const char *server = NULL;
    const json_t *t = mcp_resolve(servers, "f_s__write", &server);
    CHECK(t && !strcmp(server, "f_s") && !strcmp(json_string_value(json_object_get(t, "name")), "write"));
    t = mcp_resolve(servers, "f_s__read_file", &server);
    CHECK(t && !strcmp(server, "f_s"));
    CHECK(mcp_resolve(servers, "word_count", &server) == NULL);
    CHECK(mcp_resolve(servers, NULL, &server) == NULL);
    json_decref(tools);
    json_decref(servers);
    json_decref(declared);
}

int main(void)
{
    test_model_tools();
    test_framing();
    test_long_lines();
    test_stop();
    test_build();
    test_initialize();
    test_tools();
    test_call_output();
    test_config();
    test_bindings_config();
    test_check_documents();
    test_bindings_resolve();
    test_config_load();
    test_exposed();
    return TEST_MAIN_END();
}

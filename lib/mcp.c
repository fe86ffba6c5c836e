/* mcp: Model Context Protocol framing, messages and configuration (see mcp.h).
 *
 * The reader is the only stateful part: a server's stdout arrives in arbitrary
 * pieces, so the bytes of an unfinished line are kept in a bounded buffer until
 * their '\n' comes. A line over the bound is not an error of the whole stream: it
 * is reported once and its bytes are dropped up to its end, after which reading
 * resumes with the next line, so a server that sends one huge message does not
 * lose the calls after it. Nothing else carries over between feeds, which is why
 * any split of the same bytes gives the same messages (tests/unit/test_mcp.c
 * feeds them byte by byte).
 *
 * Everything a server sends is untrusted: ids that are not ours, results of the
 * wrong shape and tool lists with hostile names are classified, skipped or
 * bounded here, never trusted by the runner. */
#include "mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent.h"
#include "jcheck.h"
#include "opfile.h"

const char *const mcp_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL};

#define MCP_JPATH 256

/* ---- framing ------------------------------------------------------------------------ */

void mcp_reader_init(mcp_reader *r, size_t max)
{
    buf_init(&r->line, max ? max : MCP_LINE_MAX);
    r->skipping = 0;
}

void mcp_reader_free(mcp_reader *r)
{
    buf_free(&r->line);
    r->skipping = 0;
}

static void invalid(mcp_msg *m, const char *why)
{
    memset(m, 0, sizeof *m);
    m->kind = MCP_MSG_INVALID;
    m->id = -1;
    m->message = why;
}

void mcp_classify(const json_t *j, mcp_msg *m)
{
    if (!json_is_object(j)) return invalid(m, "not a JSON object");
    const char *v = json_string_value(json_object_get(j, "jsonrpc"));
    if (!v || strcmp(v, "2.0") != 0) return invalid(m, "not JSON-RPC 2.0");
    const json_t *id = json_object_get(j, "id");
    const json_t *method = json_object_get(j, "method");
    const json_t *params = json_object_get(j, "params");
    memset(m, 0, sizeof *m);
    m->id = -1;
    if (method) {
        if (!json_is_string(method)) return invalid(m, "method is not a string");
        if (params && !json_is_object(params) && !json_is_array(params))
            return invalid(m, "params is not an object or array");
        m->method = json_string_value(method);
        m->params = params;
        if (!id) {
            m->kind = MCP_MSG_NOTIFICATION;
            return;
        }
        if (!json_is_string(id) && !json_is_integer(id)) return invalid(m, "bad request id");
        m->kind = MCP_MSG_REQUEST;
        m->rid = id;
        return;
    }
    const json_t *result = json_object_get(j, "result");
    const json_t *error = json_object_get(j, "error");
    if (!id || (!!result == !!error)) return invalid(m, "neither a request nor a response");
    if (json_is_integer(id)) m->id = json_integer_value(id);
    else if (!json_is_null(id) || !error) return invalid(m, "a response to an id we never sent");
    if (result) {
        m->kind = MCP_MSG_RESPONSE;
        m->result = result;
        return;
    }
    if (!json_is_object(error)) return invalid(m, "error is not an object");
    const json_t *code = json_object_get(error, "code");
    const char *msg = json_string_value(json_object_get(error, "message"));
    m->kind = MCP_MSG_ERROR;
    m->code = json_is_integer(code) ? json_integer_value(code) : 0;
    m->message = msg ? msg : "";
}

/* Parse and hand over one complete line (without its '\n'). */
static int dispatch(const char *p, size_t n, mcp_msg_fn fn, void *ud)
{
    if (n && p[n - 1] == '\r') n--;
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r')) i++;
    if (i == n) return 0;
    mcp_msg m;
    json_error_t e;
    json_t *j = json_loadb(p, n, JSON_ALLOW_NUL, &e);
    if (!j) invalid(&m, "not JSON");
    else mcp_classify(j, &m);
    int rc = fn(ud, &m);
    json_decref(j);
    return rc;
}

int mcp_reader_feed(mcp_reader *r, const char *data, size_t len, mcp_msg_fn fn, void *ud)
{
    while (len) {
        const char *nl = memchr(data, '\n', len);
        size_t n = nl ? (size_t)(nl - data) : len;
        int rc = 0;
        if (r->skipping) {
            /* The rest of an overlong line: nothing to keep. */
        } else if (buf_append(&r->line, data, n)) {
            mcp_msg m;
            invalid(&m, "line too long");
            buf_reset(&r->line);
            r->skipping = 1;
            rc = fn(ud, &m);
        } else if (nl) {
            /* A line complete in this feed is parsed from the buffer it was copied to,
             * so that the classifier sees the same bytes however they came. */
            rc = dispatch(r->line.p ? r->line.p : "", r->line.len, fn, ud);
            buf_reset(&r->line);
        }
        if (nl) r->skipping = 0;
        if (rc) return rc;
        data += n + (nl ? 1 : 0);
        len -= n + (nl ? 1 : 0);
    }
    return 0;
}

/* ---- building ------------------------------------------------------------------------ */

/* Serialize j compactly as one line. json_dumps escapes control characters inside
 * strings, so the text has no raw newline that could split the message. */
static int put_line(buf_t *out, json_t *j)
{
    if (!j) return BUF_ENOMEM;
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) return BUF_ENOMEM;
    size_t n = strlen(s), mark = out->len;
    int rc = buf_reserve(out, n + 1);
    if (!rc) rc = buf_append(out, s, n);
    if (!rc) rc = buf_append(out, "\n", 1);
    if (rc) {
        out->len = mark;
        if (out->p) out->p[mark] = '\0';
    }
    free(s);
    return rc;
}

int mcp_build_request(buf_t *out, int64_t id, const char *method, const json_t *params)
{
    json_t *j = json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id", (json_int_t)id, "method", method);
    if (j && params) json_object_set(j, "params", (json_t *)params);
    return put_line(out, j);
}

int mcp_build_notification(buf_t *out, const char *method, const json_t *params)
{
    json_t *j = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);
    if (j && params) json_object_set(j, "params", (json_t *)params);
    return put_line(out, j);
}

int mcp_build_reply(buf_t *out, const json_t *rid, const json_t *result, int64_t code,
                    const char *message)
{
    json_t *j = json_pack("{s:s}", "jsonrpc", "2.0");
    if (!j) return BUF_ENOMEM;
    json_object_set_new(j, "id", rid ? json_deep_copy(rid) : json_null());
    if (code)
        json_object_set_new(j, "error", json_pack("{s:I, s:s}", "code", (json_int_t)code, "message",
                                                  message ? message : ""));
    else
        json_object_set_new(j, "result", result ? json_deep_copy(result) : json_object());
    return put_line(out, j);
}

json_t *mcp_initialize_params(const char *client_version)
{
    return json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", MCP_PROTOCOL_VERSION,
                     "capabilities", "clientInfo", "name", "dstream", "version",
                     client_version ? client_version : "0");
}

json_t *mcp_list_params(const char *cursor)
{
    return cursor && *cursor ? json_pack("{s:s}", "cursor", cursor) : json_object();
}

json_t *mcp_call_params(const char *tool, const json_t *arguments)
{
    json_t *j = json_pack("{s:s}", "name", tool);
    if (j) json_object_set_new(j, "arguments", arguments ? json_deep_copy(arguments) : json_object());
    return j;
}

json_t *mcp_cancel_params(int64_t id, const char *reason)
{
    json_t *j = json_pack("{s:I}", "requestId", (json_int_t)id);
    if (j && reason) json_object_set_new(j, "reason", json_string(reason));
    return j;
}

/* ---- results -------------------------------------------------------------------------- */

int mcp_parse_initialize(const json_t *result, char *version, size_t cap, char *err, size_t errcap)
{
    char q[JCHECK_QUOTE];
    const json_t *v = json_object_get(result, "protocolVersion");
    if (!json_is_object(result) || !json_is_string(v)) {
        jcheck_seterr(err, errcap, "the initialize result has no protocolVersion");
        return -1;
    }
    if (!jcheck_in_list(json_string_value(v), mcp_versions)) {
        jcheck_seterr(err, errcap, "the server speaks protocol version \"%s\", which dstream does not",
                      jcheck_show(q, sizeof q, json_string_value(v), json_string_length(v)));
        return -1;
    }
    if (cap) snprintf(version, cap, "%s", json_string_value(v));
    return 0;
}

/* A tool name as MCP allows and we can pass on: 1 to 128 printable ASCII bytes. */
static int valid_mcp_tool_name(const json_t *n)
{
    if (!json_is_string(n)) return 0;
    size_t len = json_string_length(n);
    const char *s = json_string_value(n);
    if (len == 0 || len > 128) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f) return 0;
    return 1;
}

int mcp_parse_tools(const json_t *result, json_t *tools, char *cursor, size_t cursor_cap,
                    int *skipped, char *err, size_t errcap)
{
    const json_t *list = json_object_get(result, "tools");
    size_t i;
    const json_t *t;
    if (cursor_cap) cursor[0] = '\0';
    if (!json_is_object(result) || !json_is_array(list)) {
        jcheck_seterr(err, errcap, "the tools/list result has no tools array");
        return -1;
    }
    json_array_foreach(list, i, t) {
        const json_t *name = json_object_get(t, "name");
        const json_t *schema = json_object_get(t, "inputSchema");
        const json_t *desc = json_object_get(t, "description");
        if (!json_is_object(t) || !valid_mcp_tool_name(name) || !json_is_object(schema) ||
            (desc && !json_is_string(desc)) || json_array_size(tools) >= MCP_TOOLS_MAX) {
            if (skipped) (*skipped)++;
            continue;
        }
        const json_t *ann = json_object_get(t, "annotations");
        json_t *o = json_pack("{s:O, s:O, s:b}", "name", name, "inputSchema", schema, "readOnly",
                              json_is_true(json_object_get(ann, "readOnlyHint")));
        if (json_is_string(desc)) json_object_set(o, "description", (json_t *)desc);
        json_array_append_new(tools, o);
    }
    const json_t *next = json_object_get(result, "nextCursor");
    if (next && !json_is_null(next)) {
        if (!json_is_string(next) || json_string_length(next) == 0 ||
            json_string_length(next) >= cursor_cap) {
            jcheck_seterr(err, errcap, "the tools/list nextCursor is not a usable string");
            return -1;
        }
        memcpy(cursor, json_string_value(next), json_string_length(next) + 1);
    }
    return 0;
}

json_t *mcp_call_output(const json_t *result, int *is_error)
{
    if (!json_is_object(result)) return NULL;
    *is_error = json_is_true(json_object_get(result, "isError"));
    const json_t *content = json_object_get(result, "content");
    if (!json_is_array(content)) {
        const json_t *sc = json_object_get(result, "structuredContent");
        return sc ? json_deep_copy(sc) : json_string("");
    }
    size_t i;
    const json_t *b;
    buf_t text;
    buf_init(&text, 0);
    json_array_foreach(content, i, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        const json_t *t = json_object_get(b, "text");
        if (!type || strcmp(type, "text") != 0 || !json_is_string(t)) {
            buf_free(&text);
            return json_deep_copy(content);
        }
        if ((i && buf_append(&text, "\n", 1)) || buf_append(&text, json_string_value(t), json_string_length(t))) {
            buf_free(&text);
            return json_deep_copy(content);
        }
    }
    json_t *out = json_stringn(text.p ? text.p : "", text.len);
    buf_free(&text);
    /* Not UTF-8 after all (jansson checked each block, so this should not happen). */
    return out ? out : json_deep_copy(content);
}

/* ---- configuration -------------------------------------------------------------------- */

static int valid_env_name(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return 0;
    }
    return 1;
}

static int has_nul(const json_t *s)
{
    return strlen(json_string_value(s)) != json_string_length(s);
}

static void check_positive(jcheck_errlist *e, const char *base, const json_t *srv, const char *key)
{
    char path[MCP_JPATH];
    const json_t *v = json_object_get(srv, key);
    jcheck_key(path, sizeof path, base, key);
    if (v && (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 86400000))
        jcheck_mistake(e, path, "must be an integer from 1 to 86400000");
}

static void check_server(jcheck_errlist *e, const char *base, const json_t *srv)
{
    static const char *const keys[] = {"command", "args", "env", "cwd", "timeoutMs", "concurrency",
                                       "idleStopMs", "tools", NULL};
    char path[MCP_JPATH], sub[MCP_JPATH];
    size_t i;
    const char *k;
    const json_t *x;
    if (!json_is_object(srv)) {
        jcheck_mistake(e, base, "a server must be an object");
        return;
    }
    jcheck_unknown_keys(e, base, srv, keys);
    const json_t *cmd = jcheck_string(e, base, srv, "command", 1);
    jcheck_key(path, sizeof path, base, "command");
    if (cmd && (json_string_value(cmd)[0] != '/' || has_nul(cmd)))
        jcheck_mistake(e, path, "must be an absolute path (no shell is involved)");
    const json_t *args = json_object_get(srv, "args");
    jcheck_key(path, sizeof path, base, "args");
    if (args && !json_is_array(args)) jcheck_mistake(e, path, "must be an array of strings");
    json_array_foreach(args, i, x) {
        jcheck_index(sub, sizeof sub, base, "args", i);
        if (!json_is_string(x) || has_nul(x)) jcheck_mistake(e, sub, "must be a string without NUL");
    }
    const json_t *env = json_object_get(srv, "env");
    jcheck_key(path, sizeof path, base, "env");
    if (env && !json_is_object(env)) jcheck_mistake(e, path, "must be an object of strings");
    json_object_foreach((json_t *)env, k, x) {
        jcheck_key(sub, sizeof sub, path, k);
        if (!valid_env_name(k)) jcheck_mistake(e, sub, "not a variable name");
        if (!json_is_string(x) || has_nul(x)) jcheck_mistake(e, sub, "must be a string without NUL");
    }
    const json_t *cwd = jcheck_string(e, base, srv, "cwd", 0);
    jcheck_key(path, sizeof path, base, "cwd");
    if (cwd && (json_string_value(cwd)[0] != '/' || has_nul(cwd)))
        jcheck_mistake(e, path, "must be an absolute path");
    check_positive(e, base, srv, "timeoutMs");
    check_positive(e, base, srv, "concurrency");
    check_positive(e, base, srv, "idleStopMs");
    const json_t *tools = json_object_get(srv, "tools");
    jcheck_key(path, sizeof path, base, "tools");
    if (tools && !json_is_object(tools)) jcheck_mistake(e, path, "must be an object");
    json_object_foreach((json_t *)tools, k, x) {
        jcheck_key(sub, sizeof sub, path, k);
        const char *s = json_string_value(x);
        if (!s || (strcmp(s, "readOnly") != 0 && strcmp(s, "sideEffecting") != 0))
            jcheck_mistake(e, sub, "must be \"readOnly\" or \"sideEffecting\"");
    }
}

/* Bindings: operator-chosen names for server tools, which agents declare. A
 * binding to a server that is not configured would only fail at run time, so it
 * is a mistake here. */
static void check_bindings(jcheck_errlist *e, const json_t *doc)
{
    static const char *const keys[] = {"server", "tool", NULL};
    const json_t *bindings = json_object_get(doc, "bindings"), *b;
    char base[MCP_JPATH], path[MCP_JPATH], q[JCHECK_QUOTE];
    const char *name;
    if (!bindings) return;
    if (!json_is_object(bindings) || json_object_size(bindings) > MCP_BINDINGS_MAX) {
        jcheck_mistake(e, "bindings", "must be an object of at most %d bindings by tool name", MCP_BINDINGS_MAX);
        return;
    }
    json_object_foreach((json_t *)bindings, name, b) {
        jcheck_key(base, sizeof base, "bindings", name);
        if (!agent_valid_tool_name(name))
            jcheck_mistake(e, base, "a tool name must be 1 to 64 of A-Z a-z 0-9 _ - (as agents declare it)");
        if (!json_is_object(b)) {
            jcheck_mistake(e, base, "a binding must be an object {\"server\", \"tool\"}");
            continue;
        }
        jcheck_unknown_keys(e, base, b, keys);
        const json_t *server = jcheck_string(e, base, b, "server", 1);
        jcheck_key(path, sizeof path, base, "server");
        if (server && !mcp_config_server(doc, json_string_value(server)))
            jcheck_mistake(e, path, "no server named \"%s\" in mcpServers",
                           jcheck_show(q, sizeof q, json_string_value(server), json_string_length(server)));
        const json_t *tool = jcheck_string(e, base, b, "tool", 1);
        jcheck_key(path, sizeof path, base, "tool");
        if (tool && !valid_mcp_tool_name(tool))
            jcheck_mistake(e, path, "must be a tool name: 1 to 128 printable ASCII bytes, no spaces");
    }
}

int mcp_config_validate(const json_t *doc, char *err, size_t errcap)
{
    static const char *const keys[] = {"mcpServers", "bindings", NULL};
    jcheck_errlist e;
    char base[MCP_JPATH];
    const char *name;
    const json_t *srv;
    jcheck_init(&e, err, errcap, MCP_JPATH);
    if (!json_is_object(doc)) {
        jcheck_mistake(&e, "", "the MCP configuration must be a JSON object");
        return -1;
    }
    jcheck_unknown_keys(&e, "", doc, keys);
    const json_t *servers = json_object_get(doc, "mcpServers");
    if (!json_is_object(servers)) {
        jcheck_mistake(&e, "mcpServers", "must be an object of servers by name");
        return -1;
    }
    json_object_foreach((json_t *)servers, name, srv) {
        jcheck_key(base, sizeof base, "mcpServers", name);
        if (!agent_valid_name(name)) jcheck_mistake(&e, base, "a name must be 1 to 64 of A-Z a-z 0-9 _ . -");
        check_server(&e, base, srv);
    }
    check_bindings(&e, doc);
    return e.n ? -1 : 0;
}

json_t *mcp_config_load(const char *path, char *err, size_t errcap)
{
    json_t *doc = opfile_load(path, S_IWGRP | S_IWOTH, "must not be writable by others (chmod go-w)", NULL, err,
                              errcap);
    if (doc && mcp_config_validate(doc, err, errcap)) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

static int conf_int(const json_t *srv, const char *key, int def)
{
    const json_t *v = json_object_get(srv, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : def;
}

json_t *mcp_server_public(const json_t *srv)
{
    json_t *env = json_array(), *v, *args = json_object_get(srv, "args"), *tools = json_object_get(srv, "tools");
    const char *k;
    json_object_foreach(json_object_get(srv, "env"), k, v) json_array_append_new(env, json_string(k));
    const json_t *cwd = json_object_get(srv, "cwd");
    return json_pack("{s:O, s:o, s:O, s:i, s:i, s:i, s:o, s:o}", "command", json_object_get(srv, "command"), "args",
                     args ? json_incref(args) : json_array(), "cwd", cwd ? cwd : json_null(), "timeoutMs",
                     conf_int(srv, "timeoutMs", MCP_TIMEOUT_MS), "concurrency",
                     conf_int(srv, "concurrency", MCP_CONCURRENCY), "idleStopMs",
                     conf_int(srv, "idleStopMs", MCP_IDLE_STOP_MS), "env", env, "tools",
                     tools ? json_incref(tools) : json_object());
}

const json_t *mcp_config_server(const json_t *doc, const char *name)
{
    return name ? json_object_get(json_object_get(doc, "mcpServers"), name) : NULL;
}

/* One server name of a client's document, at path: configured, or a mistake. */
static void check_known(jcheck_errlist *e, const json_t *config, const char *path, const json_t *name)
{
    char q[JCHECK_QUOTE];
    const char *s = json_string_value(name);
    if (!s || !agent_valid_name(s) || mcp_config_server(config, s)) return;
    jcheck_mistake(e, path, "no MCP server named \"%s\" is configured", jcheck_show(q, sizeof q, s, strlen(s)));
}

int mcp_check_agent(const json_t *config, const json_t *agent, char *err, size_t errcap)
{
    jcheck_errlist e;
    char path[MCP_JPATH];
    size_t i;
    const json_t *name;
    jcheck_init(&e, err, errcap, MCP_JPATH);
    if (!config) return 0;
    json_array_foreach(json_object_get(agent, "mcpServers"), i, name) {
        jcheck_index(path, sizeof path, "", "mcpServers", i);
        check_known(&e, config, path, name);
    }
    return e.n ? -1 : 0;
}

int mcp_check_workflow(const json_t *config, const json_t *workflow, char *err, size_t errcap)
{
    jcheck_errlist e;
    char phase[MCP_JPATH], step[MCP_JPATH], path[MCP_JPATH];
    size_t i, j;
    const json_t *ph, *st;
    jcheck_init(&e, err, errcap, MCP_JPATH);
    if (!config) return 0;
    json_array_foreach(json_object_get(workflow, "phases"), i, ph) {
        jcheck_index(phase, sizeof phase, "", "phases", i);
        json_array_foreach(json_object_get(ph, "steps"), j, st) {
            const char *kind = json_string_value(json_object_get(st, "kind"));
            if (!kind || strcmp(kind, "tool") != 0) continue;
            jcheck_index(step, sizeof step, phase, "steps", j);
            jcheck_key(path, sizeof path, step, "server");
            check_known(&e, config, path, json_object_get(st, "server"));
        }
    }
    return e.n ? -1 : 0;
}

/* Does agent name server in its mcpServers? */
static int names_server(const json_t *agent, const char *server)
{
    size_t i;
    const json_t *n;
    json_array_foreach(json_object_get(agent, "mcpServers"), i, n)
        if (json_is_string(n) && !strcmp(json_string_value(n), server)) return 1;
    return 0;
}

json_t *mcp_bindings_for(const json_t *config, const json_t *agent, const char *server)
{
    json_t *out = json_object();
    const json_t *bindings = json_object_get(config, "bindings"), *t;
    size_t i;
    if (!out || !server || !names_server(agent, server)) return out;
    json_array_foreach(json_object_get(agent, "tools"), i, t) {
        const char *declared = json_string_value(json_object_get(t, "name"));
        const json_t *b = declared ? json_object_get(bindings, declared) : NULL;
        const char *bs = json_string_value(json_object_get(b, "server"));
        const json_t *tool = json_object_get(b, "tool");
        if (bs && !strcmp(bs, server) && json_is_string(tool)) json_object_set(out, declared, (json_t *)tool);
    }
    return out;
}

int mcp_tool_side_effecting(const json_t *server_conf, const json_t *tool)
{
    const char *name = json_string_value(json_object_get(tool, "name"));
    const char *o = name ? json_string_value(json_object_get(json_object_get(server_conf, "tools"), name)) : NULL;
    if (o) return strcmp(o, "sideEffecting") == 0;
    return !json_is_true(json_object_get(tool, "readOnly"));
}

void mcp_exposed_name(const char *server, const char *tool, char *out, size_t cap)
{
    if (!cap) return;
    size_t n = 0;
    const char *parts[3] = {server, "__", tool};
    for (int k = 0; k < 3; k++)
        for (const char *p = parts[k]; *p && n + 1 < cap && n < MCP_TOOL_NAME_MAX; p++) {
            unsigned char c = (unsigned char)*p;
            int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '_' || c == '-';
            out[n++] = ok ? (char)c : '_';
        }
    out[n] = '\0';
}

/* ---- the model's view ----------------------------------------------------------------------- */

/* The element of tools (an array of {name, ...}) named name, or NULL. */
static const json_t *named(const json_t *tools, const char *name)
{
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t)
        if (!strcmp(json_string_value(json_object_get(t, "name")) ?: "", name)) return t;
    return NULL;
}

json_t *mcp_model_tools(const json_t *declared, const json_t *servers)
{
    json_t *out = json_array();
    size_t i, j;
    const json_t *t, *s;
    char name[MCP_TOOL_NAME_MAX + 1];
    json_array_foreach(declared, i, t)
        if (json_is_string(json_object_get(t, "name"))) json_array_append(out, (json_t *)t);
    json_array_foreach(servers, i, s) {
        const char *server = json_string_value(json_object_get(s, "server"));
        if (!server) continue;
        json_array_foreach(json_object_get(s, "tools"), j, t) {
            const char *tool = json_string_value(json_object_get(t, "name"));
            if (!tool) continue;
            mcp_exposed_name(server, tool, name, sizeof name);
            if (named(out, name)) continue;
            json_t *o = json_pack("{s:s, s:O}", "name", name, "inputSchema", json_object_get(t, "inputSchema"));
            const json_t *d = json_object_get(t, "description");
            if (json_is_string(d)) json_object_set(o, "description", (json_t *)d);
            json_array_append_new(out, o);
        }
    }
    return out;
}

const json_t *mcp_resolve(const json_t *servers, const char *called, const char **server)
{
    size_t i, j;
    const json_t *t, *s;
    char name[MCP_TOOL_NAME_MAX + 1];
    const char *exposed = called;
    if (!called) return NULL;
    /* A declared tool the operator bound: what it is bound to, and nothing else
     * (not a server tool that happens to be exposed under the same name). */
    json_array_foreach(servers, i, s) {
        const char *bound = json_string_value(json_object_get(json_object_get(s, "bound"), called));
        const char *sn = json_string_value(json_object_get(s, "server"));
        if (!bound || !sn) continue;
        t = named(json_object_get(s, "tools"), bound);
        if (t) *server = sn;
        return t;
    }
    json_array_foreach(servers, i, s) {
        const char *sn = json_string_value(json_object_get(s, "server"));
        if (!sn) continue;
        json_array_foreach(json_object_get(s, "tools"), j, t) {
            const char *tool = json_string_value(json_object_get(t, "name"));
            if (!tool) continue;
            mcp_exposed_name(sn, tool, name, sizeof name);
            if (strcmp(name, exposed) != 0) continue;
            *server = sn;
            return t;
        }
    }
    return NULL;
}

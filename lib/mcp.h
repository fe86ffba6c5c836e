/* mcp: the Model Context Protocol over stdio, client side, without I/O.
 *
 * Messages are JSON-RPC 2.0 objects, one per line (UTF-8, '\n'-terminated, no
 * embedded newlines). The client sends `initialize` (with the newest protocol
 * version it speaks), reads the server's chosen version (one of MCP_VERSIONS, or it
 * gives up), sends `notifications/initialized`, pages through `tools/list` with
 * `cursor`/`nextCursor`, then `tools/call`; an abandoned call is followed by
 * `notifications/cancelled` {requestId, reason}. A server may send notifications
 * (logged) and requests of its own (`ping` is answered with {}, anything else with
 * the JSON-RPC error -32601).
 *
 * This module frames, parses and builds those messages and reads the operator's
 * server configuration (DSTREAM_MCP_CONFIG); runner/mcp_pool.c does the processes and
 * pipes. */
#ifndef DSTREAM_MCP_H
#define DSTREAM_MCP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define MCP_LINE_MAX (16 << 20)         /* longest message line accepted from a server */
#define MCP_PROTOCOL_VERSION "2025-11-25"   /* the version we ask for */
#define MCP_TOOL_NAME_MAX 64            /* what the providers accept for a tool name */
#define MCP_TOOLS_MAX 256               /* tools kept per server */

/* JSON-RPC error codes. */
#define MCP_ERR_PARSE (-32700)
#define MCP_ERR_INVALID_REQUEST (-32600)
#define MCP_ERR_METHOD_NOT_FOUND (-32601)

/* The protocol versions this client speaks, newest first, NULL-terminated. */
extern const char *const mcp_versions[];

/* ---- framing ------------------------------------------------------------------------ */

typedef enum {
    MCP_MSG_RESPONSE,       /* id (ours) and result */
    MCP_MSG_ERROR,          /* id (ours, or -1 when null) and error code/message */
    MCP_MSG_REQUEST,        /* a server's request: rid (its id, any JSON), method, params */
    MCP_MSG_NOTIFICATION,   /* method, params */
    MCP_MSG_INVALID         /* not JSON-RPC 2.0, or a line over MCP_LINE_MAX: why */
} mcp_msg_kind;

typedef struct mcp_msg {
    mcp_msg_kind kind;
    int64_t id;             /* RESPONSE/ERROR: the id, when it is an integer (ours are) */
    const json_t *rid;      /* REQUEST: the server's id as sent */
    const char *method;     /* REQUEST/NOTIFICATION */
    const json_t *params;   /* REQUEST/NOTIFICATION (may be NULL) */
    const json_t *result;   /* RESPONSE */
    int64_t code;           /* ERROR */
    const char *message;    /* ERROR: the server's message; INVALID: ours */
} mcp_msg;

/* Called once per complete line; everything in msg is borrowed for the call only.
 * Return non-zero to stop (mcp_reader_feed returns that value). */
typedef int (*mcp_msg_fn)(void *ud, const mcp_msg *msg);

typedef struct mcp_reader {
    buf_t line;             /* the partial line */
    int skipping;           /* in a line over MCP_LINE_MAX: drop bytes to its end */
} mcp_reader;

/* An empty reader whose lines may be max bytes (0: MCP_LINE_MAX). */
void mcp_reader_init(mcp_reader *r, size_t max);
void mcp_reader_free(mcp_reader *r);

/* Feed bytes from the server's stdout, split anywhere. Each complete line (a '\r'
 * before its '\n' is dropped; blank lines are skipped) is parsed and given to fn.
 * A line over the limit is reported once as MCP_MSG_INVALID and skipped. Returns 0
 * or fn's non-zero value. */
int mcp_reader_feed(mcp_reader *r, const char *data, size_t len, mcp_msg_fn fn, void *ud);

/* Classify one parsed message (what the reader does per line). */
void mcp_classify(const json_t *j, mcp_msg *msg);

/* ---- building messages ---------------------------------------------------------------
 * Each appends one complete line ('\n'-terminated, compact JSON) to out and returns
 * 0 or a BUF_E* code (out unchanged). params may be NULL (left out). */

int mcp_build_request(buf_t *out, int64_t id, const char *method, const json_t *params);
int mcp_build_notification(buf_t *out, const char *method, const json_t *params);
/* The answer to a server's request: result (NULL: {}), or an error when code != 0. */
int mcp_build_reply(buf_t *out, const json_t *rid, const json_t *result, int64_t code,
                    const char *message);

/* Params of initialize: our version, no client capabilities, clientInfo. New ref. */
json_t *mcp_initialize_params(const char *client_version);
/* Params of tools/list: {} or {cursor}. New reference. */
json_t *mcp_list_params(const char *cursor);
/* Params of tools/call: {name, arguments} (arguments NULL: {}). New reference. */
json_t *mcp_call_params(const char *tool, const json_t *arguments);
/* Params of notifications/cancelled for our request id. New reference. */
json_t *mcp_cancel_params(int64_t id, const char *reason);

/* ---- reading results -------------------------------------------------------------------- */

/* The initialize result: the server's protocolVersion must be one we speak. Copies
 * it to version. Returns 0, or -1 with err. */
int mcp_parse_initialize(const json_t *result, char *version, size_t cap, char *err,
                         size_t errcap);

/* One page of tools/list: appends each well-formed tool, as {name, description,
 * inputSchema, readOnly}, to tools (at most MCP_TOOLS_MAX in all; malformed ones are
 * counted in *skipped). readOnly is the tool's annotations.readOnlyHint. The next
 * cursor goes to cursor ("" when this was the last page). Returns 0, or -1 with err
 * when the result is not a tools list or the cursor does not fit. */
int mcp_parse_tools(const json_t *result, json_t *tools, char *cursor, size_t cursor_cap,
                    int *skipped, char *err, size_t errcap);

/* A tools/call result as a value for tool:result: the text when every content
 * block is text (joined with "\n"), else the content array as is (or the
 * structuredContent when there is no content). *is_error from result.isError.
 * New reference; NULL when result is not an object. */
json_t *mcp_call_output(const json_t *result, int *is_error);

/* ---- the operator's configuration ------------------------------------------------------
 *
 * A JSON file under the operator's control (DSTREAM_MCP_CONFIG):
 *   {"mcpServers": {"NAME": {"command": "/path/to/server", "args": ["..."],
 *       "env": {"VAR": "value"}, "cwd": "/dir", "timeoutMs": 30000, "concurrency": 4,
 *       "idleStopMs": 300000, "tools": {"TOOL": "readOnly" | "sideEffecting"}}}}
 *    "bindings": {"DECLARED": {"server": "NAME", "tool": "TOOL"}}}
 * NAME as an agent name; command an absolute path (no shell); args strings; env
 * names as a shell's; timeoutMs (per call, default 30000), concurrency (calls at
 * once, default 4), idleStopMs (stop after this long unused, default 300000) > 0;
 * tools overrides what the server's annotations say. A binding says that a tool an
 * agent declares in its "tools" under the name DECLARED (a provider tool name) is
 * run as TOOL of server NAME, for agents that also name NAME in "mcpServers".
 * Unknown keys are mistakes. */

#define MCP_TIMEOUT_MS 30000
#define MCP_CONCURRENCY 4
#define MCP_IDLE_STOP_MS 300000
#define MCP_BINDINGS_MAX 1024

/* Validate a configuration document. Returns 0, or -1 with every mistake named in
 * err, one per line, each prefixed by its JSON path. */
int mcp_config_validate(const json_t *doc, char *err, size_t errcap);

/* Read and validate the configuration file at path, as every program does: an
 * operator's file (lib/opfile: nobody else may write it) holding a valid
 * configuration. Returns a new reference, or NULL with what is wrong in err, one
 * mistake per line (the file's, or each JSON path's). */
json_t *mcp_config_load(const char *path, char *err, size_t errcap);

/* A configured server as it may be shown (dstream mcp, GET /v1/mcp/servers):
 * {"command", "args", "cwd", "timeoutMs", "concurrency", "idleStopMs", "env": [its
 * variables' names], "tools"}, the limits with their defaults filled in. The
 * environment's values are never in it (they may be secrets). New reference. */
json_t *mcp_server_public(const json_t *srv);

/* The configured server name (borrowed from doc), or NULL. */
const json_t *mcp_config_server(const json_t *doc, const char *name);

/* Does an API client's document name only configured servers? For an agent, each
 * string of "mcpServers"; for a workflow, the "server" of each tool step. config
 * NULL (no configuration loaded) accepts any name: the runner then finds out. A
 * name that is malformed is the document validators' to report, not checked here.
 * Returns 0, or -1 with each unknown server as a line
 * "mcpServers[1]: no MCP server named \"x\" is configured" (its JSON path first)
 * in err. Only names are said, never what a server runs. */
int mcp_check_agent(const json_t *config, const json_t *agent, char *err, size_t errcap);
int mcp_check_workflow(const json_t *config, const json_t *workflow, char *err, size_t errcap);

/* The operator's bindings that apply to agent on server: {DECLARED: TOOL} for each
 * tool agent declares ("tools") that config binds to server, when agent names
 * server in "mcpServers" (a binding never reaches an agent that does not name its
 * server). New reference; {} when none. */
json_t *mcp_bindings_for(const json_t *config, const json_t *agent, const char *server);

/* 1 if tool (a {name, readOnly} from mcp_parse_tools) of server conf is
 * side-effecting: the operator's "tools" override if any, else not readOnly. */
int mcp_tool_side_effecting(const json_t *server_conf, const json_t *tool);

/* The name a model sees for tool of server: "<server>__<tool>", every byte outside
 * [A-Za-z0-9_-] made '_', cut to MCP_TOOL_NAME_MAX. out needs MCP_TOOL_NAME_MAX + 1. */
void mcp_exposed_name(const char *server, const char *tool, char *out, size_t cap);

/* ---- the model's view ------------------------------------------------------------------
 * servers is an array of {"server": name, "tools": [tools from mcp_parse_tools],
 * "bound": {DECLARED: TOOL} (optional, from mcp_bindings_for)}. */

/* The tools offered to the model: the agent's declared tools (as they are), then
 * each server's under its exposed name, as {name, description, inputSchema}; a
 * name already offered is not offered twice. New reference. */
json_t *mcp_model_tools(const json_t *declared, const json_t *servers);

/* The server tool that called (a name the model called) means: a declared tool
 * bound to one of the servers first, else a server's tool by its exposed name.
 * Returns the tool as its server listed it (borrowed from servers) with its
 * server's name in *server; NULL if none (a bound tool that its server does not
 * list is none: nothing is run that the server did not offer). */
const json_t *mcp_resolve(const json_t *servers, const char *called, const char **server);

#endif

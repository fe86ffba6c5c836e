/* libFuzzer harness for lib/mcp.c: the stdio reader and the result parsers.
 *
 * Input: byte 0 gives the piece size (1..64) the rest is fed in; the rest is what a
 * server writes on its stdout. Fed once whole and once in pieces (with a small
 * line limit of 512 bytes, so overlong lines are exercised too).
 *
 * Invariants checked on every input:
 *  - how the bytes are cut changes nothing: the same messages in the same order;
 *  - every message is well formed for its kind (a request has a method and an id,
 *    a response a result, an invalid one says why);
 *  - each parsed response result given to mcp_parse_initialize, mcp_parse_tools
 *    and mcp_call_output gives a bounded, well-formed answer: tools have a name,
 *    an object inputSchema and a boolean readOnly; a cursor fits its buffer;
 *  - a reply built for any request id parses back as one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mcp.h"

#define REQUIRE(cond) \
    do { \
        if (!(cond)) abort(); \
    } while (0)

static void check_result(const json_t *result)
{
    char v[32], cursor[64], err[256];
    int skipped = 0, is_error = 0;
    if (mcp_parse_initialize(result, v, sizeof v, err, sizeof err) == 0) REQUIRE(strlen(v) == 10);
    json_t *tools = json_array();
    if (mcp_parse_tools(result, tools, cursor, sizeof cursor, &skipped, err, sizeof err) == 0) {
        REQUIRE(strlen(cursor) < sizeof cursor);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            REQUIRE(json_is_string(json_object_get(t, "name")));
            REQUIRE(json_is_object(json_object_get(t, "inputSchema")));
            REQUIRE(json_is_boolean(json_object_get(t, "readOnly")));
        }
    }
    REQUIRE(json_array_size(tools) <= MCP_TOOLS_MAX);
    json_decref(tools);
    json_t *o = mcp_call_output(result, &is_error);
    REQUIRE(!o == !json_is_object(result));
    REQUIRE(is_error == 0 || is_error == 1);
    json_decref(o);
}

static int on_msg(void *ud, const mcp_msg *m)
{
    buf_t *out = ud;
    switch (m->kind) {
    case MCP_MSG_RESPONSE:
        REQUIRE(m->result);
        check_result(m->result);
        break;
    case MCP_MSG_ERROR: REQUIRE(m->message); break;
    case MCP_MSG_REQUEST: {
        REQUIRE(m->method && m->rid);
        buf_t b;
        buf_init(&b, 0);
        REQUIRE(mcp_build_reply(&b, m->rid, NULL, MCP_ERR_METHOD_NOT_FOUND, m->method) == 0);
        REQUIRE(b.len && b.p[b.len - 1] == '\n' && memchr(b.p, '\n', b.len) == b.p + b.len - 1);
        buf_free(&b);
        break;
    }
    case MCP_MSG_NOTIFICATION: REQUIRE(m->method); break;
    case MCP_MSG_INVALID: REQUIRE(m->message); break;
    default: abort();
    }
    buf_printf(out, "%d %lld %s %lld\n", (int)m->kind, (long long)m->id,
               m->method ? m->method : (m->message ? m->message : ""), (long long)m->code);
    return 0;
}

static void run(const uint8_t *d, size_t n, size_t step, buf_t *out)
{
    mcp_reader r;
    mcp_reader_init(&r, 512);
    for (size_t i = 0; i < n; i += step)
        REQUIRE(mcp_reader_feed(&r, (const char *)d + i, n - i < step ? n - i : step, on_msg, out) == 0);
    mcp_reader_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t step = (size_t)(data[0] % 64) + 1;
    buf_t a, b;
    buf_init(&a, 0);
    buf_init(&b, 0);
    run(data + 1, size - 1, size, &a);
    run(data + 1, size - 1, step, &b);
    REQUIRE(a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0));
    buf_free(&a);
    buf_free(&b);
    return 0;
}

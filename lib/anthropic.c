/* anthropic: the Anthropic Messages API's half of lib/provider. Its stream (SSE
 * events message_start, content_block_start/delta/stop, message_delta,
 * message_stop, ping, error) into provider events, and a chat history into its
 * "messages" (content blocks, roles that alternate, tool results first). */
#include "anthropic.h"

#include <stdlib.h>
#include <string.h>

#include "chathist.h"

/* ---- the stream ---------------------------------------------------------------- */

/* message_start and message_delta carry cumulative counts; cache reads and writes
 * are input too, so the input total is their sum with input_tokens. */
static int anthropic_usage(provider_parser *p, const json_t *u)
{
    if (!json_is_object(u)) return 0;
    int in = 0, out = 0;
    int64_t sum = pev_tokens(u, "input_tokens", &in) +
                  pev_tokens(u, "cache_creation_input_tokens", &in) +
                  pev_tokens(u, "cache_read_input_tokens", &in);
    int64_t o = pev_tokens(u, "output_tokens", &out);
    if (in) p->input_tokens = sum;
    if (out) p->output_tokens = o;
    return in || out ? pev_usage(p) : 0;
}

/* An error inside a 200 stream (overloaded_error, api_error): reported, not fatal
 * to the parser; the server closes the stream after it. */
static int anthropic_error(provider_parser *p, const json_t *d)
{
    json_t *e = json_object_get(d, "error");
    return pev_error(p, json_string_value(json_object_get(e, "type")), json_object_get(e, "message"));
}

static int anthropic_block_start(provider_parser *p, int64_t index, const json_t *cb)
{
    const char *type = json_string_value(json_object_get(cb, "type"));
    if (!type) return 0;
    if (!strcmp(type, "text")) return pev_text(p, PEV_TEXT, json_object_get(cb, "text"));
    if (!strcmp(type, "thinking"))
        return pev_text(p, PEV_THINKING, json_object_get(cb, "thinking"));
    if (strcmp(type, "tool_use") != 0) return 0;  /* server tools, redacted thinking */

    /* A block index reused without a stop starts over. */
    tool_slot *t = pev_slot_find(p, index);
    int rc = t ? pev_slot_close(p, (size_t)(t - p->tools)) : 0;
    if (rc) return rc;
    if (!(t = pev_slot_open(p, index))) return -1;
    if (pev_slot_set(&t->id, json_object_get(cb, "id")) ||
        pev_slot_set(&t->name, json_object_get(cb, "name")))
        return -1;
    /* The API opens with "input": {} and streams the rest; a proxy that sends the
     * whole input here instead is honoured when no fragment follows. */
    json_t *input = json_object_get(cb, "input");
    if (json_is_object(input) && json_object_size(input)) t->input = json_deep_copy(input);
    return 0;
}

static int anthropic_block_delta(provider_parser *p, int64_t index, const json_t *delta)
{
    const char *type = json_string_value(json_object_get(delta, "type"));
    if (!type) return 0;
    if (!strcmp(type, "text_delta")) return pev_text(p, PEV_TEXT, json_object_get(delta, "text"));
    if (!strcmp(type, "thinking_delta"))
        return pev_text(p, PEV_THINKING, json_object_get(delta, "thinking"));
    if (strcmp(type, "input_json_delta") != 0) return 0;  /* signature_delta, citations */

    /* Fragments are kept as raw text: they only become JSON all together. A
     * fragment for a block that is not a tool call is ignored like any stray. */
    json_t *part = json_object_get(delta, "partial_json");
    tool_slot *t = pev_slot_find(p, index);
    if (!t || !json_is_string(part)) return 0;
    return buf_append(&t->args, json_string_value(part), json_string_length(part)) ? -1 : 0;
}

int anthropic_event(provider_parser *p, const char *name, const json_t *d)
{
    /* The payload names its own type; the SSE event name is the fallback. */
    const char *type = json_string_value(json_object_get(d, "type"));
    if (!type) type = name;
    json_t *ix = json_object_get(d, "index");
    int64_t index = json_is_integer(ix) ? json_integer_value(ix) : 0;

    if (!strcmp(type, "message_start"))
        return anthropic_usage(p, json_object_get(json_object_get(d, "message"), "usage"));
    if (!strcmp(type, "content_block_start"))
        return anthropic_block_start(p, index, json_object_get(d, "content_block"));
    if (!strcmp(type, "content_block_delta"))
        return anthropic_block_delta(p, index, json_object_get(d, "delta"));
    if (!strcmp(type, "content_block_stop")) {
        tool_slot *t = pev_slot_find(p, index);
        return t ? pev_slot_close(p, (size_t)(t - p->tools)) : 0;
    }
    if (!strcmp(type, "message_delta")) {
        int rc = anthropic_usage(p, json_object_get(d, "usage"));
        json_t *delta = json_object_get(d, "delta");
        const char *stop = json_string_value(json_object_get(delta, "stop_reason"));
        if (rc || !stop) return rc;
        provider_event ev = {.kind = PEV_STOP, .stop_reason = stop};
        return pev_emit(p, &ev);
    }
    if (!strcmp(type, "message_stop")) {
        /* A block left open is delivered rather than lost. */
        int rc = pev_slots_flush(p);
        return rc ? rc : pev_done(p);
    }
    if (!strcmp(type, "error")) return anthropic_error(p, d);
    return 0;   /* ping, and types added after this was written */
}

/* ---- the request's messages ------------------------------------------------------ */

/* Tool-call arguments as an object (Anthropic's input must be one). New reference. */
static json_t *args_object(const json_t *call)
{
    json_t *a = json_object_get(call, "arguments");
    if (json_is_object(a)) return json_deep_copy(a);
    if (json_is_string(a)) {
        json_t *o = json_loadb(json_string_value(a), json_string_length(a), JSON_ALLOW_NUL, NULL);
        if (json_is_object(o)) return o;
        json_decref(o);
    }
    return json_object();
}

static json_t *text_block(json_t *text)
{
    return json_pack("{s:s,s:o}", "type", "text", "text", text);
}

/* Append blocks (stolen) as a message of role, merged into the previous message
 * when it has the same role: Anthropic requires roles to alternate. */
static void anthropic_push(json_t *msgs, const char *role, json_t *blocks)
{
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    if (!json_array_size(blocks)) {
        json_decref(blocks);
    } else if (last && !strcmp(chathist_role(last), role)) {
        json_array_extend(json_object_get(last, "content"), blocks);
        json_decref(blocks);
    } else {
        json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", role, "content", blocks));
    }
}

/* Final touches: tool results go before any text in a user message (the API
 * requires it), and a lone text block is sent as a plain string. */
static void anthropic_tidy(json_t *msgs)
{
    size_t i, k;
    json_t *m, *b;
    json_array_foreach(msgs, i, m) {
        json_t *content = json_object_get(m, "content");
        json_t *sorted = json_array(), *rest = json_array();
        json_array_foreach(content, k, b) {
            const char *t = json_string_value(json_object_get(b, "type"));
            json_array_append(t && !strcmp(t, "tool_result") ? sorted : rest, b);
        }
        json_array_extend(sorted, rest);
        json_decref(rest);
        json_t *only = json_array_get(sorted, 0);
        const char *type = json_string_value(json_object_get(only, "type"));
        if (json_array_size(sorted) == 1 && !strcmp(type, "text"))
            json_object_set(m, "content", json_object_get(only, "text"));
        else
            json_object_set(m, "content", sorted);
        json_decref(sorted);
    }
}

json_t *anthropic_messages(const json_t *hist)
{
    json_t *msgs = json_array();
    size_t i, k;
    json_t *m, *c;
    json_array_foreach(hist, i, m) {
        const char *role = chathist_role(m);
        json_t *blocks = json_array();
        if (!strcmp(role, "user")) {
            json_array_append_new(blocks, text_block(chathist_text(m)));
        } else if (!strcmp(role, "assistant")) {
            if (!chathist_empty(m)) json_array_append_new(blocks, text_block(chathist_text(m)));
            json_array_foreach(json_object_get(m, "toolCalls"), k, c) {
                json_t *name = json_object_get(c, "name");
                json_array_append_new(blocks, json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use",
                    "id", chathist_call_id(c), "name", json_is_string(name) ? json_string_value(name) : "",
                    "input", args_object(c)));
            }
        } else {
            json_array_append_new(blocks, json_pack("{s:s,s:s,s:o}", "type", "tool_result",
                "tool_use_id", chathist_call_id(m), "content", chathist_text(m)));
            role = "user";
        }
        anthropic_push(msgs, role, blocks);
    }
    anthropic_tidy(msgs);
    return msgs;
}

/* openai: the OpenAI Chat Completions API's half of lib/provider (and the servers
 * that speak it: vLLM, llama.cpp, OpenRouter, DeepSeek). Its stream ("data:
 * {chunk}" lines ending with "data: [DONE]", which lib/provider sees) into provider
 * events, and a chat history into its "messages" (a system message first, tool
 * calls with their arguments as text). */
#include "openai.h"

#include <stdlib.h>
#include <string.h>

#include "chathist.h"

/* ---- the stream ---------------------------------------------------------------- */

/* e is the error object, or a bare message string; "type" is OpenAI's, "code"
 * what some compatible servers send instead. */
static int openai_error(provider_parser *p, const json_t *e)
{
    const char *type = json_string_value(json_object_get(e, "type"));
    if (!type) type = json_string_value(json_object_get(e, "code"));
    return pev_error(p, type, json_is_string(e) ? e : json_object_get(e, "message"));
}

/* One tool_calls[] element: the first names the call, the rest carry arguments. */
static int openai_tool_delta(provider_parser *p, const json_t *tc)
{
    json_t *ix = json_object_get(tc, "index");
    json_t *id = json_object_get(tc, "id");
    json_t *fn = json_object_get(tc, "function");
    tool_slot *t = NULL;
    if (json_is_integer(ix)) {
        t = pev_slot_open(p, json_integer_value(ix));
    } else {
        /* Some servers leave out index: a new id opens a call, else the last one. */
        int64_t next = 0;
        for (size_t i = 0; i < p->ntools; i++) {
            tool_slot *s = &p->tools[i];
            if (json_string_length(id) && s->id.p && !strcmp(s->id.p, json_string_value(id))) t = s;
            if (s->index >= next) next = s->index + 1;
        }
        if (!t && !json_string_length(id) && p->ntools) t = &p->tools[p->ntools - 1];
        if (!t) t = pev_slot_open(p, next);
    }
    if (!t) return -1;
    /* id and name arrive once; servers that repeat them must not double them. */
    if (!t->id.len && json_string_length(id) && pev_slot_set(&t->id, id)) return -1;
    json_t *name = json_object_get(fn, "name");
    if (!t->name.len && json_string_length(name) && pev_slot_set(&t->name, name)) return -1;
    json_t *args = json_object_get(fn, "arguments");
    if (json_is_string(args))
        return buf_append(&t->args, json_string_value(args), json_string_length(args)) ? -1 : 0;
    if (json_is_object(args) || json_is_array(args)) {
        /* A few servers send the arguments as a JSON value rather than text. */
        char *s = json_dumps(args, JSON_COMPACT);
        int rc = s && buf_puts(&t->args, s) == 0 ? 0 : -1;
        free(s);
        return rc;
    }
    return 0;
}

static int openai_choice(provider_parser *p, const json_t *c)
{
    json_t *delta = json_object_get(c, "delta");
    int rc;
    /* llama.cpp, vLLM and DeepSeek say reasoning_content; OpenRouter says reasoning. */
    json_t *r = json_object_get(delta, "reasoning_content");
    if (!json_is_string(r)) r = json_object_get(delta, "reasoning");
    if ((rc = pev_text(p, PEV_THINKING, r))) return rc;
    if ((rc = pev_text(p, PEV_TEXT, json_object_get(delta, "content")))) return rc;
    json_t *calls = json_object_get(delta, "tool_calls");
    size_t i;
    json_t *tc;
    json_array_foreach(calls, i, tc)
        if ((rc = openai_tool_delta(p, tc))) return rc;
    /* The calls are complete once the choice finishes; they go out before the
     * stop so that a consumer sees every call before it learns why the turn ended. */
    const char *finish = json_string_value(json_object_get(c, "finish_reason"));
    if (!finish) return 0;
    if ((rc = pev_slots_flush(p))) return rc;
    provider_event ev = {.kind = PEV_STOP, .stop_reason = finish};
    return pev_emit(p, &ev);
}

int openai_event(provider_parser *p, const json_t *d)
{
    int rc;
    /* OpenAI puts an error under "error"; vLLM sends {"object": "error", ...}. */
    json_t *err = json_object_get(d, "error");
    if (err && !json_is_null(err)) return openai_error(p, err);
    const char *object = json_string_value(json_object_get(d, "object"));
    if (object && !strcmp(object, "error")) return openai_error(p, d);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(d, "choices"), i, c) {
        /* Only the first choice: dstream never asks for n > 1. */
        json_t *ix = json_object_get(c, "index");
        if (ix && json_integer_value(ix) != 0) continue;
        if ((rc = openai_choice(p, c))) return rc;
    }
    /* With include_usage every chunk has "usage": null but the last one; some
     * servers fill it in on every chunk, which is harmless: the last one wins. */
    json_t *u = json_object_get(d, "usage");
    if (!json_is_object(u)) return 0;
    int found = 0;
    p->input_tokens = pev_tokens(u, "prompt_tokens", &found);
    p->output_tokens = pev_tokens(u, "completion_tokens", &found);
    return pev_usage(p);
}

/* ---- the request's messages ------------------------------------------------------ */

/* Tool-call arguments as JSON text (OpenAI wants a string). New reference. */
static json_t *args_text(const json_t *call)
{
    json_t *a = json_object_get(call, "arguments");
    if (json_is_string(a)) return json_deep_copy(a);
    if (!a || json_is_null(a)) return json_string("{}");
    char *s = json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *r = json_string(s ? s : "{}");
    free(s);
    return r;
}

json_t *openai_messages(const json_t *agent, const json_t *hist)
{
    json_t *msgs = json_array();
    size_t i, k;
    json_t *m, *c;
    json_t *sys = json_object_get(agent, "system");
    if (json_string_length(sys))
        json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "system", "content",
                                              json_deep_copy(sys)));
    json_array_foreach(hist, i, m) {
        const char *role = chathist_role(m);
        if (!strcmp(role, "user")) {
            json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "user", "content",
                                                  chathist_text(m)));
        } else if (!strcmp(role, "assistant")) {
            json_t *calls = json_object_get(m, "toolCalls");
            /* content may be null only when the message carries tool calls. */
            json_t *text = chathist_empty(m) && json_array_size(calls) ? json_null()
                                                                      : chathist_text(m);
            json_t *o = json_pack("{s:s,s:o}", "role", "assistant", "content", text);
            if (json_array_size(calls)) {
                json_t *tc = json_array();
                json_array_foreach(calls, k, c) {
                    json_t *name = json_object_get(c, "name");
                    json_array_append_new(tc, json_pack("{s:s,s:s,s:{s:s,s:o}}", "id", chathist_call_id(c),
                        "type", "function", "function",
                        "name", json_is_string(name) ? json_string_value(name) : "",
                        "arguments", args_text(c)));
                }
                json_object_set_new(o, "tool_calls", tc);
            }
            json_array_append_new(msgs, o);
        } else {
            json_array_append_new(msgs, json_pack("{s:s,s:s,s:o}", "role", "tool",
                "tool_call_id", chathist_call_id(m), "content", chathist_text(m)));
        }
    }
    return msgs;
}

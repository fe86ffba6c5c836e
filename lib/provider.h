/* provider: LLM provider wire formats, normalized.
 *
 * Two streaming APIs (URLs: provider_request_url): Anthropic Messages (POST .../v1/messages, "stream": true,
 * SSE events message_start, content_block_start/delta/stop, message_delta,
 * message_stop, ping, error) and OpenAI-compatible Chat Completions (POST
 * .../v1/chat/completions, "stream": true, "stream_options":
 * {"include_usage": true}, SSE "data: {chunk}" lines ending with "data: [DONE]").
 * Both become the same provider_event sequence. No I/O: the runner feeds bytes as
 * libcurl delivers them, in whatever chunks they come.
 *
 * The modules behind it: lib/provevent (the events and the tool-call slots both
 * formats fill), lib/anthropic and lib/openai (each format's stream events and
 * messages), lib/chathist (the history both request bodies are made from); this
 * file reads the SSE lines and puts the request together. The event types
 * (provider_kind, provider_event, pev_kind) are declared in lib/provevent.h. */
#ifndef DSTREAM_PROVIDER_H
#define DSTREAM_PROVIDER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "provevent.h"

/* A parser for one response stream. Returns NULL on out of memory. */
provider_parser *provider_parser_new(provider_kind kind, provider_event_fn fn, void *ud);
void provider_parser_free(provider_parser *p);

/* Feed len bytes of the response body, split anywhere (even inside a UTF-8
 * sequence, a line ending or "\r\n"). Calls fn for each complete event. Returns 0,
 * fn's non-zero value, or -1 on a protocol error (a line over PROVIDER_LINE_MAX,
 * data that is not JSON where JSON is required, arguments over the limit, a tool
 * call whose id or name holds a NUL). */
int provider_feed(provider_parser *p, const char *data, size_t len);

/* Tell the parser the body ended. Returns 0 if the stream had ended properly
 * (PEV_DONE was delivered), -1 if it was cut off. */
int provider_finish(provider_parser *p);

/* Tool calls whose arguments are still streaming (a stream cut there cut a call). */
size_t provider_open_calls(const provider_parser *p);

/* "anthropic" / "openai" -> kind; -1 if unknown. */
int provider_kind_parse(const char *s);

/* The request body for an agent (lib/agent.h document) and a chat history (array of
 * {role: "user"|"assistant"|"tool", content, [toolCalls], [callId]} as in
 * lib/session's view; entries marked background are sent as user messages,
 * interrupted replies are sent with what they had). New reference. */
json_t *provider_request_body(provider_kind kind, const json_t *agent, const json_t *messages);

/* How a provider continues a reply whose request ends with an assistant message
 * (the operator's "continuation", lib/provcfg; docs/agents.md). */
typedef enum {
    PROVIDER_CONT_OFF,              /* it does not: a cut reply is asked again from the start */
    PROVIDER_CONT_PREFILL,          /* the last assistant message is its reply's beginning (Anthropic,
                                     * llama.cpp, Ollama) */
    PROVIDER_CONT_FINAL_MESSAGE     /* the same, with "continue_final_message": true and
                                     * "add_generation_prompt": false (vLLM) */
} provider_cont;

/* "off" / "prefill" / "continue_final_message" -> style; -1 if unknown. */
int provider_cont_parse(const char *s);
/* The name of style c. */
const char *provider_cont_name(provider_cont c);
/* A request body (provider_request_body's) whose messages end with the assistant
 * message to continue: what style c adds to it. */
void provider_body_continue(json_t *body, provider_cont c);

/* The public API base URL of kind ("https://api.anthropic.com"). */
const char *provider_default_base(provider_kind kind);

/* The request URL for kind at base (NULL: the default) into out: base itself when
 * its path ends in the API's path ("/messages", "/chat/completions"); base and the
 * API's path when its path ends in a version segment ("/v1", "/v1beta": the OpenAI
 * SDK's habit); else base, "/v1" and the API's path ("https://api.anthropic.com":
 * the Anthropic SDK's). A trailing '/' of base is dropped first. */
void provider_request_url(provider_kind kind, const char *base, char *out, size_t cap);

/* The request headers (besides Content-Type) as "Name: value" lines in out, one per
 * line, with the key. The key is never written anywhere else by this module. */
int provider_request_headers(provider_kind kind, const char *key, buf_t *out);

#endif

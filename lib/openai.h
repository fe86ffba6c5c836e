/* openai: the OpenAI Chat Completions wire format (its stream's chunks, its
 * request's messages). For lib/provider, which reads the SSE lines (and their
 * "[DONE]") and builds the rest of the request. */
#ifndef DSTREAM_OPENAI_H
#define DSTREAM_OPENAI_H

#include <jansson.h>

#include "provevent.h"

/* One chunk (d, its JSON data) into events on p. Returns 0, the callback's value,
 * or -1 on a protocol error. */
int openai_event(provider_parser *p, const json_t *d);
/* The "messages" of a request for agent (its system prompt goes first) and a
 * normalized history (lib/chathist). New reference. */
json_t *openai_messages(const json_t *agent, const json_t *hist);

#endif

/* anthropic: the Anthropic Messages wire format (its stream's events, its request's
 * messages). For lib/provider, which reads the SSE lines and builds the rest of
 * the request. */
#ifndef DSTREAM_ANTHROPIC_H
#define DSTREAM_ANTHROPIC_H

#include <jansson.h>

#include "provevent.h"

/* One SSE event (name: its event field, d: its JSON data) into events on p.
 * Returns 0, the callback's value, or -1 on a protocol error. */
int anthropic_event(provider_parser *p, const char *name, const json_t *d);
/* The "messages" of a request for a normalized history (lib/chathist). New reference. */
json_t *anthropic_messages(const json_t *hist);

#endif

/* chathist: the chat history a request body is made from (lib/session's view:
 * {role: "user"|"assistant"|"tool", content, [toolCalls], [callId]}), read and put
 * in an order both wire formats accept. For lib/provider and the format files. */
#ifndef DSTREAM_CHATHIST_H
#define DSTREAM_CHATHIST_H

#include <jansson.h>

/* An entry's role, "" for none. Borrowed from m. */
const char *chathist_role(const json_t *m);
/* An entry's content as text: a string as it is, other JSON serialized (tool
 * results may be any value), none as "". New reference. */
json_t *chathist_text(const json_t *m);
/* 1 if an entry has no content (absent, null or ""). */
int chathist_empty(const json_t *m);
/* An entry's (or a tool call's) callId, NULL for none or "". Borrowed. */
const char *chathist_call_id(const json_t *m);
/* The history in an order both APIs accept (see chathist.c). hist is a private
 * copy (its entries are changed); returns a new array of its entries. */
json_t *chathist_normalize(json_t *hist);

#endif

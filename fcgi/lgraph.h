/* lgraph: a session as the LangGraph SDK sees a thread (fcgi/frame_lgraph.c), shared
 * by its framer and its routes (fcgi/langgraph.c; docs/clients.md). */
#ifndef DSTREAM_FCGI_LGRAPH_H
#define DSTREAM_FCGI_LGRAPH_H

#include <jansson.h>

#include "../lib/session.h"

/* The thread's values: a chat's {"messages": [human, ai, tool messages]}, a workflow's
 * state with "__interrupt__" while it waits for a human input. New reference. */
json_t *lgraph_values(const session_view *v);

/* The human input the session waits for as the SDK's interrupts ([{id, value}], empty
 * when none). New reference. */
json_t *lgraph_interrupts(const session_view *v);

/* The thread's status: busy, interrupted (awaiting input), error or idle. */
const char *lgraph_status(const session_view *v);

#endif

/* tools: a session's tool calls on the operator's MCP servers (runner/tools.c,
 * runner/mcp_pool.h). */
#ifndef DSTREAM_RUNNER_TOOLS_H
#define DSTREAM_RUNNER_TOOLS_H

#include "types.h"

/* The agent as the request presents it (new reference): its system prompt with
 * its skills and, with_tools, its MCP servers' tools under their exposed names
 * (s->servers keeps them, with the operator's bindings of the agent's declared
 * tools, for resolving the calls). NULL while a server is starting or listing its
 * tools again (s's timer is set to look again); a server that cannot be had is
 * left out, with tool:server_failed. */
json_t *tools_agent(runner_t *R, sess_t *s, const json_t *agent, int with_tools);
/* Record the calls the request q asked for (tool:called, each resolved to its
 * server and tool and tagged side-effecting or not). They run once in the log. */
void tools_record(runner_t *R, sess_t *s, const rq_t *q);
/* Run the calls the log has without a result that are not running here. A call
 * this process did not record (its runner died) runs again only if it is
 * read-only; a side-effecting one is answered as failed, never run twice. */
void tools_run(runner_t *R, sess_t *s, const session_view *v);
/* Abandon s's calls (their results are no longer wanted here). */
void tools_forget(runner_t *R, sess_t *s);

#endif

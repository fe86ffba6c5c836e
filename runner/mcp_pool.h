/* mcp_pool (prefix rmcp_): the operator's MCP servers as child processes on the runner's loop.
 *
 * Servers come from the operator's configuration (lib/mcp.h, DSTREAM_MCP_CONFIG)
 * and nowhere else. A server is started on first use, in a process group of its
 * own, with a small environment (PATH, HOME, LANG, TMPDIR and its configured env:
 * never the runner's provider keys); its stdin and stdout carry the protocol,
 * its stderr goes to the runner's log line by line, prefixed with its name. All
 * three pipes are non-blocking and polled by the runner's loop (its poll()), so
 * nothing here ever waits.
 *
 * A call that outlives its timeout is answered as a failure (and the server told
 * with notifications/cancelled); a server that dies fails only the calls it had
 * in flight, and is started again, with a growing delay, when it is next needed.
 * A server that cannot be started or initialized several times in a row is
 * "failed" for a while: its tools are unavailable and calls to it fail at once.
 * A server unused for idleStopMs is stopped. */
#ifndef DSTREAM_RUNNER_MCP_POOL_H
#define DSTREAM_RUNNER_MCP_POOL_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdint.h>

#include "../lib/rstats.h"

#define RMCP_FDS_MAX 96             /* pipes polled at once (3 per running server) */
#define RMCP_START_FAILURES 3       /* failed starts in a row before a server is failed */
#define RMCP_FAILED_MS 30000        /* how long a failed server stays failed */
#define RMCP_STOP_GRACE_MS 2000     /* SIGTERM, then SIGKILL after this */

typedef struct rmcp rmcp_t;
typedef struct rmcp_call rmcp_call;

/* How a call ended. output is the tool's result (lib/mcp mcp_call_output), or a
 * string saying why there is none; is_error when the tool said so or the call
 * failed. failed: no result came from the tool (timeout, crash, refused). */
typedef struct rmcp_outcome {
    const json_t *output;
    int is_error;
    int failed;
} rmcp_outcome;

typedef void (*rmcp_done_fn)(void *ud, const rmcp_outcome *o);
/* Called when a server's tools become ready or it fails (sessions waiting on it
 * should look again). */
typedef void (*rmcp_change_fn)(void *ud, const char *server);

/* The supervisor for a validated configuration (borrowed; NULL: no servers). */
rmcp_t *rmcp_new(const json_t *config, rmcp_change_fn on_change, void *ud);
/* Stop every server (SIGTERM to its group, SIGKILL after a grace period) and free. */
void rmcp_free(rmcp_t *m);

/* The server's configuration, or NULL when the operator configured no such server. */
const json_t *rmcp_server_conf(rmcp_t *m, const char *server);

#define RMCP_READY 0
#define RMCP_PENDING 1
#define RMCP_FAILED (-1)

/* The server's tools ([{name, description, inputSchema, readOnly}], borrowed until
 * the server restarts or lists them again): RMCP_READY; RMCP_PENDING (starting, or
 * listing its tools again after it said they changed: on_change says when);
 * RMCP_FAILED with why in err. Starts the server if it is not running. */
int rmcp_tools(rmcp_t *m, const char *server, const json_t **tools, char *err, size_t errcap);

/* Call tool on server with arguments (borrowed). done is called exactly once, from
 * rmcp_process, never from here. Returns the call (valid until done is called or
 * rmcp_abandon), or NULL if out of memory. */
rmcp_call *rmcp_call_start(rmcp_t *m, const char *server, const char *tool, const json_t *arguments,
                           rmcp_done_fn done, void *ud);
/* The caller no longer wants the result (its session went away): done is never
 * called; a call in flight is cancelled with notifications/cancelled. */
void rmcp_abandon(rmcp_t *m, rmcp_call *c);

/* The pipes to poll: fills out (up to cap) and returns how many. */
unsigned rmcp_waitfds(rmcp_t *m, struct curl_waitfd *out, unsigned cap);
/* After polling: read and write what is ready, deliver finished calls, expire
 * timeouts, reap and restart processes, stop idle servers. fds as filled by
 * rmcp_waitfds, with revents set. */
void rmcp_process(rmcp_t *m, const struct curl_waitfd *fds, unsigned n);
/* The figures of the i-th configured server (calls started, failed by reason,
 * processes started) into out: 0, or -1 past the last server. */
int rmcp_stats(rmcp_t *m, size_t i, rstats_mcp *out);
/* Milliseconds until rmcp_process has timed work (a timeout, a restart, a reap),
 * at most max. */
int rmcp_timeout(rmcp_t *m, int max);

#endif

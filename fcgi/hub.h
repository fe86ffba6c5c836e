/* hub: one thread per process that keeps every waiting live reader (long-poll and
 * SSE) on epoll, without a responder thread each. See hub.c. */
#ifndef DSTREAM_HUB_H
#define DSTREAM_HUB_H

#include <stdint.h>

#include "frame.h"

struct wake;
typedef struct hub hub_t;

/* Start the hub thread; cfg->live_max bounds the readers it keeps. NULL with err. */
hub_t *hub_start(const cfg_t *cfg, log_t *log, struct wake *wake, char *err, size_t errlen);
/* End every parked response (a long-poll gets its 204, an SSE stream its end) and
 * stop the thread; for the process's stop (its memory stays until exit). */
void hub_stop(hub_t *h);

/* Hand r's connection to the hub: a live read (rr->path at rr->kind/rr->from)
 * framed by f that waits for more or whose client does not take what was written
 * (what waits goes along: the hub sends it first and reads on once it is out). A
 * long-poll has sent nothing yet: the headers r collected go along too. The hub ends
 * the response at deadline_ms (f's end). Returns 0 if the hub took the connection (r
 * writes nothing more), -1 if not (hub full, or a transport that cannot hand its
 * connection over): the thread then serves the reader itself. */
int hub_park(hub_t *h, req_t *r, const log_read_req *rr, const frame_t *f, int64_t deadline_ms);
/* Hand over r's finished response (end records included) whose rest the socket
 * did not take: the hub sends it as the client reads and closes the connection
 * (after HUB_LINGER_MS without progress, it gives up). 0, or -1 if the hub cannot
 * take it (full or stopping): the thread then waits on it itself. */
int hub_finish(hub_t *h, req_t *r);

#endif

/* live: a read on a responder thread, whatever its framer (frame.h): catch-up answers
 * at once; a live read (long-poll, SSE) goes on until it is answered, ended or handed
 * to the process's hub (hub.h). See live.c. */
#ifndef DSTREAM_LIVE_H
#define DSTREAM_LIVE_H

#include "frame.h"

/* Serve the read of rr (rr->path, kind and from set) framed by f. */
void live_run(req_t *r, log_read_req *rr, frame_t *f);

/* The process is stopping: responses that wait end (their clients reconnect). */
void live_stop(void);
int live_stopping(void);

#endif

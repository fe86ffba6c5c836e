/* stream: shared pieces of the /v1/stream resource (stream.c) and its live reads (live.c). */
#ifndef DSTREAM_STREAM_H
#define DSTREAM_STREAM_H

#include "req.h"

void stream_put_offset(req_t *r, const char *name, offset_t o);
void stream_fail(req_t *r, int rc);
int stream_parse_offset(req_t *r, offset_kind *kind, offset_t *from);
/* Long-poll (sse 0) or SSE (sse 1) read of path from rr->kind/rr->from. */
void stream_live(req_t *r, const char *path, log_read_req *rr, int sse);

#endif

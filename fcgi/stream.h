/* stream: shared pieces of the /v1/stream resource (stream.c) and its live reads (live.c). */
#ifndef DSTREAM_STREAM_H
#define DSTREAM_STREAM_H

#include "req.h"

void stream_put_offset(req_t *r, const char *name, offset_t o);
void stream_fail(req_t *r, int rc);
int stream_parse_offset(req_t *r, offset_kind *kind, offset_t *from);
/* Read one batch from rr->kind/rr->from into out (JSON streams framed as an
 * array), at most cfg->read_max bytes. Returns 0 or LOG_E*; rr holds the result. */
int stream_read_batch(req_t *r, log_read_req *rr, buf_t *out);
/* Extend a sliding TTL: a read counts as activity. */
void stream_touch(req_t *r, const log_info *info);
/* Content-Type, Stream-TTL, Stream-Expires-At. */
void stream_meta_headers(req_t *r, const log_info *info);
/* Long-poll (sse 0) or SSE (sse 1) read from rr->kind/rr->from (rr->path set). */
void stream_live(req_t *r, log_read_req *rr, int sse);

#endif

/* stream: shared pieces of the /v1/stream resource (stream.c) and its live reads (live.c). */
#ifndef DSTREAM_STREAM_H
#define DSTREAM_STREAM_H

#include "req.h"

void stream_put_offset(req_t *r, const char *name, offset_t o);
void stream_fail(req_t *r, int rc);
int stream_parse_offset(req_t *r, offset_kind *kind, offset_t *from);
/* The offset in Last-Event-ID (a browser's EventSource resuming after the event with
 * that id): 1 if there is one, 0 if not, -1 after answering 400 if it is not an
 * offset the server returned. */
int stream_resume_offset(req_t *r, offset_kind *kind, offset_t *from);
/* Read one batch from rr->kind/rr->from into out (JSON streams framed as an
 * array), at most cfg->read_max bytes. Returns 0 or LOG_E*; rr holds the result. */
int stream_read_batch(req_t *r, log_read_req *rr, buf_t *out);
/* Extend a sliding TTL: a read counts as activity. */
void stream_touch(req_t *r, const log_info *info);
/* Content-Type, Stream-TTL, Stream-Expires-At. */
void stream_meta_headers(req_t *r, const log_info *info);
/* Long-poll (sse 0) or SSE (sse 1) read from rr->kind/rr->from (rr->path set). */
void stream_live(req_t *r, log_read_req *rr, int sse);

/* ---- live steps, shared by the threads (live.c) and the hub (hub.c) ---------------- */
enum { LIVE_WAIT, LIVE_MORE, LIVE_END };    /* nothing new / more is there / done */
int64_t live_mono_ms(void);
/* Read from rr and write the SSE events for it (headers already sent); id is the
 * stream's id (another one at the same path ends the response). */
int live_sse_step(req_t *r, log_read_req *rr, int64_t id, buf_t *out, int text, int *first);
/* Read from rr; if there is data or the stream closed, write the whole response. */
int live_lp_step(req_t *r, log_read_req *rr, buf_t *out);
/* The 204 of a long-poll that waited in vain (rr->from is the offset). */
void live_lp_timeout(req_t *r, const log_read_req *rr);

#endif

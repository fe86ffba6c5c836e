/* stream: the /v1/stream/{path} resource (stream.c); the offset a read starts from,
 * shared with the session events resource. */
#ifndef DSTREAM_STREAM_H
#define DSTREAM_STREAM_H

#include "../lib/log.h"
#include "req.h"

/* ?offset= (absent: the start). 0, or -1 after answering 400. */
int stream_parse_offset(req_t *r, offset_kind *kind, offset_t *from);
/* The offset in Last-Event-ID (a browser's EventSource resuming after the event with
 * that id): 1 if there is one, 0 if not, -1 after answering 400 if it is not an
 * offset the server returned. */
int stream_resume_offset(req_t *r, offset_kind *kind, offset_t *from);

#endif

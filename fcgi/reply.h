/* reply: the HTTP face of lib/log's results: the status and error for a LOG_E* code,
 * offsets as headers, a stream's metadata headers. Used by the resources and the
 * framers alike. */
#ifndef DSTREAM_REPLY_H
#define DSTREAM_REPLY_H

#include "../lib/log.h"
#include "req.h"

/* Header name (Stream-Next-Offset, ...) with offset o. */
void reply_offset(req_t *r, const char *name, offset_t o);
/* Stream-Digest: the hash chain's digest (lib/chain.h) at the position a response
 * stands at (a read's Stream-Next-Offset, the tail), in lower-case hex. */
void reply_digest(req_t *r, const uint8_t d[CHAIN_LEN]);
/* Answer a log error: 404, 409, 410, 400, 503 with Retry-After, or 500. */
void reply_fail(req_t *r, int rc);
/* A stream's metadata for HEAD, GET and write responses: Content-Type, Stream-TTL,
 * Stream-Expires-At. */
void reply_meta(req_t *r, const log_info *info);

#endif

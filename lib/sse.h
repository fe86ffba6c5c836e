/* sse: Server-Sent Events framing and the protocol's live-read cursor.
 *
 * Data lines are split on CR, LF and CRLF and each piece gets its own "data:" line,
 * so no payload can end an event or inject a field. Binary payloads are base64. */
#ifndef DSTREAM_SSE_H
#define DSTREAM_SSE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Append "event: NAME\n" (if name), the payload as data: lines, "id: ID\n" (if id),
 * and the blank line that ends the event. */
int sse_event(buf_t *b, const char *name, const char *id, const void *data, size_t len);
/* The same with the payload base64-encoded (one data: line). */
int sse_event_base64(buf_t *b, const char *name, const void *data, size_t len);
/* Append a comment line (heartbeat): ": text\n\n". */
int sse_comment(buf_t *b, const char *text);
/* Standard base64 of data, appended to b. */
int sse_base64(buf_t *b, const void *data, size_t len);

/* The Stream-Cursor for a live response at now_ms, given the client's cursor (or
 * NULL): the current 20-second interval since 2024-10-09, or, when the client is
 * already there or ahead, a jittered later interval so that caches see a new URL.
 * Writes decimal digits into out. */
void sse_cursor(int64_t now_ms, const char *client, char *out, size_t cap);

#endif

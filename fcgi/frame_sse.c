/* frame_sse: live=sse on a stream (frame.h).
 *
 * Each batch is one "data" event (text, or base64 for other content types) followed
 * by a "control" event: {"streamNextOffset","streamCursor"[,"upToDate"]}, or with
 * "streamClosed" when the stream is closed at its tail, which ends the response. The
 * first control event goes out even with no data (the protocol's offset=now). Every
 * control event has the next offset as its id: a browser's EventSource reconnecting
 * to the same URL sends it back as Last-Event-ID and resumes right after it. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../lib/sse.h"
#include "frame.h"

static void begin(frame_t *f, req_t *r, const log_read_req *rr)
{
    f->text = rr->info.json || strncasecmp(rr->info.content_type, "text/", 5) == 0;
    frame_sse_headers(r, f->text);
}

static int closed_at_tail(const log_read_req *rr)
{
    return rr->info.closed && rr->up_to_date;
}

static int batch(frame_t *f, req_t *r, const log_read_req *rr, const buf_t *out)
{
    if (rr->count > 0) {
        buf_t ev;
        buf_init(&ev, 0);
        int rc = f->text ? sse_event(&ev, "data", NULL, out->p, out->len)
                         : sse_event_base64(&ev, "data", out->p, out->len);
        if (!rc) rc = res_write(r, ev.p, ev.len);
        buf_free(&ev);
        if (rc) return FRAME_END;
    }
    return closed_at_tail(rr) ? FRAME_END : frame_next(rr);
}

static int control(frame_t *f, req_t *r, const log_read_req *rr)
{
    int closed = closed_at_tail(rr);
    if (rr->count == 0 && f->sent && !closed) return 0;
    f->sent = 1;
    char off[OFFSET_LEN + 1], cursor[32], json[256];
    offset_format(rr->next, off);
    int n;
    if (closed) {
        n = snprintf(json, sizeof json, "{\"streamNextOffset\":\"%s\",\"upToDate\":true,\"streamClosed\":true}", off);
    } else {
        frame_cursor(r, cursor, sizeof cursor);
        n = snprintf(json, sizeof json, "{\"streamNextOffset\":\"%s\",\"streamCursor\":\"%s\"%s}", off,
                     cursor, rr->up_to_date ? ",\"upToDate\":true" : "");
    }
    buf_t ev;
    buf_init(&ev, 0);
    int rc = sse_event(&ev, "control", off, json, (size_t)n);
    if (!rc) rc = res_write(r, ev.p, ev.len);
    buf_free(&ev);
    return rc ? -1 : 0;
}

/* A comment line: it keeps proxies from closing an idle response. */
int frame_sse_heartbeat(frame_t *f, req_t *r)
{
    (void)f;
    buf_t b;
    buf_init(&b, 0);
    int rc = sse_comment(&b, "keep-alive");
    if (!rc) rc = res_write(r, b.p, b.len);
    buf_free(&b);
    return rc ? -1 : 0;
}

const framer frame_sse = {
    .name = "sse",
    .streamed = 1,
    .message = frame_array_message,
    .seal = frame_array_seal,
    .begin = begin,
    .batch = batch,
    .control = control,
    .heartbeat = frame_sse_heartbeat,
};

/* frame_events: a session's events over SSE (frame.h; docs/events.md).
 *
 * Each stored event is one SSE event named by its type, its data the envelope with
 * its offset, its id the offset after it (a browser's EventSource resumes there with
 * Last-Event-ID). No control events: the ids say where the reader is. */
#include <stdio.h>
#include <string.h>

#include "../lib/sse.h"
#include "frame.h"

/* The "type" of a stored envelope (session_event_encode writes it first). */
static size_t envelope_type(const char *data, size_t len, const char **type)
{
    static const char pre[] = "{\"type\":\"";
    if (len > sizeof pre && memcmp(data, pre, sizeof pre - 1) == 0) {
        const char *t = data + sizeof pre - 1;
        const char *q = memchr(t, '"', len - (sizeof pre - 1));
        if (q && q - t < 64) {
            *type = t;
            return (size_t)(q - t);
        }
    }
    *type = "event";
    return 5;
}

static int message(frame_t *f, buf_t *out, const log_info *info, const void *data, size_t len,
                   offset_t at)
{
    (void)f;
    (void)info;
    const char *type;
    size_t tl = envelope_type(data, len, &type);
    offset_t next = {at.seq + 1, at.pos + len};
    char id[OFFSET_LEN + 1], name[72];
    offset_format(next, id);
    snprintf(name, sizeof name, "%.*s", (int)tl, type);
    buf_t ev;
    buf_init(&ev, 0);
    int rc = frame_envelope(&ev, data, len, at);
    if (!rc) rc = sse_event(out, name, id, ev.p, ev.len);
    buf_free(&ev);
    return rc ? -1 : 0;
}

static void begin(frame_t *f, req_t *r, const log_read_req *rr)
{
    (void)rr;
    f->text = 1;
    frame_sse_headers(r, 1);
}

int frame_events_batch(frame_t *f, req_t *r, const log_read_req *rr, const buf_t *out)
{
    if (out->len && res_write(r, out->p, out->len)) return FRAME_END;
    if (out->len) f->sent = 1;
    return rr->info.closed && rr->up_to_date ? FRAME_END : frame_next(rr);
}

const framer frame_events = {
    .name = "events",
    .streamed = 1,
    .message = message,
    .begin = begin,
    .batch = frame_events_batch,
    .heartbeat = frame_sse_heartbeat,
};

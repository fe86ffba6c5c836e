/* frame_longpoll: live=long-poll, one response once there is something to say
 * (frame.h): 200 with the data, or 204 with Stream-Closed when the stream is closed
 * at its tail; 204 at the same offset when the wait is over. */
#include "frame.h"
#include "reply.h"

static int batch(frame_t *f, req_t *r, const log_read_req *rr, const buf_t *out)
{
    (void)f;
    int closed_at_tail = rr->info.closed && rr->up_to_date;
    if (rr->count == 0 && !closed_at_tail) return frame_next(rr);
    char cursor[32];
    frame_cursor(r, cursor, sizeof cursor);
    res_status(r, rr->count > 0 ? 200 : 204);
    reply_meta(r, &rr->info);
    reply_offset(r, "Stream-Next-Offset", rr->next);
    reply_digest(r, rr->digest);
    if (rr->up_to_date) res_header(r, "Stream-Up-To-Date", "true");
    if (closed_at_tail) res_header(r, "Stream-Closed", "true");
    else res_header(r, "Stream-Cursor", cursor);
    res_header(r, "Cache-Control", "no-store");
    if (rr->count > 0) {
        res_headerf(r, "Content-Length", "%zu", out->len);
        res_write(r, out->p, out->len);
    } else {
        res_end(r);
    }
    return FRAME_END;
}

static void end(frame_t *f, req_t *r, const log_read_req *rr)
{
    (void)f;
    char cursor[32];
    frame_cursor(r, cursor, sizeof cursor);
    res_status(r, 204);
    reply_offset(r, "Stream-Next-Offset", rr->from);
    reply_digest(r, rr->digest);        /* the last read's, at rr->from */
    res_header(r, "Stream-Up-To-Date", "true");
    res_header(r, "Stream-Cursor", cursor);
    res_header(r, "Cache-Control", "no-store");
    res_end(r);
}

const framer frame_longpoll = {
    .name = "long-poll",
    .message = frame_array_message,
    .seal = frame_array_seal,
    .batch = batch,
    .end = end,
};

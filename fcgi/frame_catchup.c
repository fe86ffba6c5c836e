/* frame_catchup: GET without live, one batch as the whole response (frame.h).
 *
 * A plain stream's page carries an ETag (the stream, where the page starts and ends,
 * whether it closed the stream) and may be cached when it ends before the tail: a
 * full page never changes. A session's events (envelopes) are never cached. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "frame.h"
#include "reply.h"

static void etag_of(const log_read_req *rr, offset_t from, char *out, size_t cap)
{
    snprintf(out, cap, "\"%" PRId64 "-%" PRId64 "-%" PRIu64 "-%" PRIu64 "%s\"", rr->info.id,
             rr->info.created_ms, from.seq, rr->next.seq, rr->info.closed && rr->up_to_date ? "-c" : "");
}

static int batch(frame_t *f, req_t *r, const log_read_req *rr, const buf_t *out)
{
    if (f->envelopes) {
        res_header(r, "Content-Type", "application/json");
        reply_offset(r, "Stream-Next-Offset", rr->next);
        reply_digest(r, rr->digest);
        if (rr->up_to_date) res_header(r, "Stream-Up-To-Date", "true");
        res_header(r, "Cache-Control", "no-store");
    } else {
        char etag[160];
        offset_t from = rr->kind == OFFSET_AT    ? rr->from
                        : rr->kind == OFFSET_NOW ? rr->info.tail
                                                 : (offset_t){0, 0};
        etag_of(rr, from, etag, sizeof etag);
        reply_meta(r, &rr->info);
        reply_offset(r, "Stream-Next-Offset", rr->next);
        reply_digest(r, rr->digest);
        if (rr->up_to_date) res_header(r, "Stream-Up-To-Date", "true");
        if (rr->up_to_date && rr->info.closed) res_header(r, "Stream-Closed", "true");
        res_header(r, "ETag", etag);
        /* A range that reached the tail can still grow; a full page never changes. */
        if (rr->kind == OFFSET_NOW || rr->up_to_date)
            res_header(r, "Cache-Control", "no-store");
        else
            res_header(r, "Cache-Control", "public, max-age=60, stale-while-revalidate=300");
        const char *inm = req_header(r, "If-None-Match");
        if (inm && strcmp(inm, etag) == 0) {
            res_status(r, 304);
            res_end(r);
            return FRAME_END;
        }
    }
    res_headerf(r, "Content-Length", "%zu", out->len);
    res_write(r, out->p ? out->p : "", out->len);
    return FRAME_END;
}

const framer frame_catchup = {
    .name = "catch-up",
    .message = frame_array_message,
    .seal = frame_array_seal,
    .batch = batch,
};

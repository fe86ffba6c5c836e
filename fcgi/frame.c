/* frame: the step every reader takes, and the pieces the framers share (frame.h). */
#include "frame.h"

#include <stdio.h>
#include <string.h>

#include "../lib/session.h"
#include "../lib/sse.h"
#include "../lib/timefmt.h"
#include "reply.h"

#define MSG_FAIL ERRS_CALLBACK       /* a message callback failed: log_read passes it back */

void frame_init(frame_t *f, const framer *fr, int envelopes)
{
    memset(f, 0, sizeof *f);
    f->fr = fr;
    f->envelopes = envelopes;
}

typedef struct reading {
    frame_t *f;
    buf_t *out;
    const log_read_req *rr;
} reading;

static int on_message(void *ud, const void *data, size_t len, offset_t at)
{
    reading *g = ud;
    /* log_read fills rr->info before the first message. */
    return g->f->fr->message(g->f, g->out, &g->rr->info, data, len, at) ? MSG_FAIL : 0;
}

/* Read one batch into out, framed message by message. 0 or LOG_E*. */
static int read_batch(frame_t *f, req_t *r, log_read_req *rr, buf_t *out)
{
    reading g = {f, out, rr};
    buf_reset(out);
    rr->max_bytes = r->cfg->read_max;
    int rc = log_read(r->log, rr, on_message, &g);
    if (rc == MSG_FAIL) return LOG_EIO;
    if (rc) return rc;
    if (f->fr->seal && f->fr->seal(f, out, rr)) return LOG_EIO;
    return 0;
}

int frame_next(const log_read_req *rr)
{
    return rr->up_to_date ? FRAME_WAIT : FRAME_MORE;
}

int frame_step(frame_t *f, req_t *r, log_read_req *rr, buf_t *out)
{
    int rc = read_batch(f, r, rr, out);
    if (rc) {
        /* A stream under way outlives an outage of the database: the reader stays
         * where it is and reads again at its next wake-up (every waiter is woken
         * once the database is back: the feed's reconnection reports -1). A
         * response not begun gets the error (503 with Retry-After). */
        if (r->head_sent && !r->gone && (rc == LOG_EDOWN || rc == LOG_EBUSY)) return FRAME_WAIT;
        if (!r->head_sent && !r->gone) reply_fail(r, rc);
        return FRAME_END;
    }
    if (!f->id) f->id = rr->info.id;
    if (rr->info.id != f->id) return FRAME_END;     /* deleted and made again: not ours */
    if (!f->started && f->fr->begin) {
        f->fr->begin(f, r, rr);
        f->started = 1;
    }
    int st = f->fr->batch(f, r, rr, out);
    if (f->fr->control && f->fr->control(f, r, rr)) st = FRAME_END;
    if (f->fr->streamed && res_flush(r)) st = FRAME_END;
    if (st != FRAME_END) {
        rr->kind = OFFSET_AT;
        rr->from = rr->next;
    }
    return st;
}

/* ---- shared by the framers ---------------------------------------------------------------- */

int frame_reply_track(frame_t *f, const char *type, const json_t *p)
{
    /* A compaction's summarization request is no part of the reply (its summary is
     * in session:compacted, which no reply shows). */
    const char *purpose = json_string_value(json_object_get(p, PK_PURPOSE));
    if (purpose && !strcmp(purpose, "compaction")) return FRAME_REPLY_OTHER;
    if (!strcmp(type, EV_SESSION_CANCELLED) || !strcmp(type, EV_REPLY_STOPPED) || !strcmp(type, EV_REPLY_FAILED)) {
        f->ui.phase = FRAME_UI_DONE;
        return FRAME_REPLY_END;
    }
    if (!strcmp(type, EV_MESSAGE_USER)) {
        const char *mode = json_string_value(json_object_get(p, PK_MODE));
        if (!mode || strcmp(mode, "interrupt")) return FRAME_REPLY_OTHER;
        f->ui.phase = FRAME_UI_DONE;
        return FRAME_REPLY_CUT;
    }
    if (!strcmp(type, EV_PROVIDER_REQUEST_STARTED)) {
        f->ui.phase = FRAME_UI_REPLY;
        f->ui.tools = f->ui.ended = f->ui.calls = f->ui.asked = 0;
        return FRAME_REPLY_EVENT;
    }
    if (f->ui.phase != FRAME_UI_REPLY) return FRAME_REPLY_OTHER;    /* another reply's */
    if (!strcmp(type, EV_TOOL_CALLED)) {
        f->ui.tools = 1;
        f->ui.calls++;
    }
    if ((!strcmp(type, EV_PROVIDER_REQUEST_ENDED) && !f->ui.tools) || !strcmp(type, EV_TOOL_LOOP_STOPPED)) {
        f->ui.phase = FRAME_UI_DONE;
        return FRAME_REPLY_END;
    }
    /* A turn's tool calls: each gets a result, or a question (a call waiting for approval). */
    int asks = !strcmp(type, EV_INPUT_REQUESTED) && json_is_string(json_object_get(p, PK_CALL_ID));
    if (!strcmp(type, EV_PROVIDER_REQUEST_ENDED)) f->ui.ended = 1;
    if ((asks || !strcmp(type, EV_TOOL_RESULT)) && f->ui.calls) f->ui.calls--;
    if (asks) f->ui.asked++;
    if (f->ui.ended && f->ui.asked && !f->ui.calls) {
        f->ui.phase = FRAME_UI_DONE;
        return FRAME_REPLY_WAIT;
    }
    return FRAME_REPLY_EVENT;
}

int frame_envelope(buf_t *out, const void *data, size_t len, offset_t at)
{
    const char *d = data;
    char off[OFFSET_LEN + 1];
    offset_format(at, off);
    if (len < 2 || d[0] != '{') return buf_append(out, d, len);
    int rc = buf_printf(out, "{\"offset\":\"%s\"%s", off, d[1] == '}' ? "" : ",");
    return rc ? rc : buf_append(out, d + 1, len - 1);
}

int frame_array_message(frame_t *f, buf_t *out, const log_info *info, const void *data,
                        size_t len, offset_t at)
{
    if (info->json && buf_puts(out, out->len ? "," : "[")) return -1;
    if (f->envelopes) return frame_envelope(out, data, len, at) ? -1 : 0;
    return buf_append(out, data, len) ? -1 : 0;
}

int frame_array_seal(frame_t *f, buf_t *out, const log_read_req *rr)
{
    (void)f;
    if (!rr->info.json) return 0;
    return buf_puts(out, out->len ? "]" : "[]") ? -1 : 0;
}

void frame_cursor(req_t *r, char *out, size_t cap)
{
    char client[32];
    int n = req_query(r, "cursor", client, sizeof client);
    sse_cursor(timefmt_now_ms(), n > 0 ? client : NULL, out, cap);
}

void frame_sse_headers(req_t *r, int text)
{
    res_header(r, "Content-Type", "text/event-stream");
    res_header(r, "Cache-Control", "no-cache");
    res_header(r, "X-Accel-Buffering", "no");
    if (!text) res_header(r, "Stream-SSE-Data-Encoding", "base64");
}

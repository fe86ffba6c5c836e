/* frame: how a read goes on the wire, one file per transport behind one interface.
 *
 * Whoever reads for a client, a responder thread (live.c) or the hub for the readers
 * parked on it (hub.c), reads one batch from the log at a time and hands it to the
 * request's framer, the way nchan gives each kind of subscriber one file:
 *
 *   frame_catchup.c   GET without live: the batch as the whole response (ETag, caching)
 *   frame_longpoll.c  one response once there is data or the stream is closed at its
 *                     tail; 204 when the wait is over
 *   frame_sse.c       an SSE response: a data event and a control event (id: the next
 *                     offset) per batch, comments as heartbeats
 *   frame_events.c    a session's events over SSE: one event per session event, named
 *                     by its type, with the offset after it as its id
 *   frame_uimsg.c     one chat reply as the AI SDK's UI message stream (docs/clients.md),
 *                     from its user message to its end
 *   frame_lgraph.c    one run as the LangGraph SDK's stream (metadata, values, messages,
 *                     end); frame_lgraph_wait its end state as one JSON answer
 *
 * The framer also decides how each message joins the batch while the log is read
 * (elements of a JSON array, session envelopes given their offset, typed events), so
 * a batch is framed once and the hub can send the same bytes to every reader at the
 * same position. Catch-up and long-poll of a session's events are the first two
 * framers with envelopes on. */
#ifndef DSTREAM_FRAME_H
#define DSTREAM_FRAME_H

#include "../lib/log.h"
#include "req.h"

/* What a step leaves: nothing new yet, more to read now, or the response is done. */
enum { FRAME_WAIT, FRAME_MORE, FRAME_END };

typedef struct framer framer;

typedef struct frame {
    const framer *fr;
    int envelopes;              /* session events: each message with its offset */
    int text;                   /* SSE data as text (else base64); set by begin */
    int started;                /* the response's headers are out (SSE after begin) */
    int sent;                   /* a batch or control went out */
    int64_t id;                 /* the stream first read: another one at the path ends it */
    /* frame_uimsg: how far the reply it serves has come (ints only: the hub
     * compares positions bytewise). */
    struct frame_ui {
        int phase;              /* FRAME_UI_* */
        int text, reasoning;    /* a text or reasoning part is open */
        int step;               /* a step is open */
        int tools;              /* the request of the step asked for tools */
        int part;               /* parts begun (their ids) */
        int ended;              /* the request of the step ended (asking for tools) */
        int calls;              /* tool calls of the step with neither a result nor an approval request */
        int asked;              /* tool calls of the step waiting for approval */
        int resumed;            /* the reply goes on after answers to its approvals ... */
        offset_t from;          /* ... recorded here: before it only tool results are sent */
        int reset;              /* an attempt was retried: reset-step, unless the next continues it */
        int skip_ws;            /* whitespace a continuation gives again, already sent: not again */
    } ui;
    /* frame_lgraph (ui.phase and ui.tools as frame_uimsg's): what the run streams and
     * where it began and ended (the positions its values are read at). */
    struct frame_lg {
        uint64_t modes;         /* FRAME_LG_*: the stream modes asked for */
        uint64_t run_seq;       /* the run's first event (a chat's user message) */
        uint64_t start_seq, start_pos;  /* after it */
        uint64_t end_seq, end_pos;      /* after its last */
        uint64_t skip_seq;      /* a reconnection's Last-Event-ID: events before it are not sent */
        /* A reply continued (docs/events.md): the attempt that continues (cont_req) streams
         * as the message it continues (cont_id, the first attempt's id), without the
         * whitespace (skip_ws) it gives again. Zero-filled past their text. */
        char cont_req[72], cont_id[72];
        int skip_ws;
    } lg;
} frame_t;

/* frame_lgraph's stream modes. */
enum { FRAME_LG_VALUES = 1, FRAME_LG_MESSAGES = 2, FRAME_LG_UPDATES = 4, FRAME_LG_EVENTS = 8 };

/* Where frame_uimsg's reply is: at its user message, waiting for its first
 * request, under way, over (the response ends); frame_lgraph's run may also be a
 * workflow's under way. */
enum { FRAME_UI_MESSAGE, FRAME_UI_WAITING, FRAME_UI_REPLY, FRAME_UI_DONE, FRAME_UI_WORKFLOW };

struct framer {
    const char *name;
    int streamed;               /* the response goes on after its headers (SSE) */
    int whole_reply;            /* it ends with its chat reply, whose client does not reconnect:
                                 * DSTREAM_REPLY_MAX_MS bounds it, not DSTREAM_SSE_MAX_MS */
    /* While the log is read: append the message stored at offset at to out. 0 or -1. */
    int (*message)(frame_t *f, buf_t *out, const log_info *info, const void *data, size_t len,
                   offset_t at);
    /* The read is over: complete the batch in out (close a JSON array). 0 or -1. */
    int (*seal)(frame_t *f, buf_t *out, const log_read_req *rr);
    /* After the first read, before any batch: the headers of a streamed response.
     * NULL when the headers wait for the answer. */
    void (*begin)(frame_t *f, req_t *r, const log_read_req *rr);
    /* Write what one read brought (out). Returns FRAME_END when the response is
     * complete, else frame_next(rr). */
    int (*batch)(frame_t *f, req_t *r, const log_read_req *rr, const buf_t *out);
    /* After a batch: where the reader stands now (the SSE control event). 0 or -1
     * (client gone). NULL: the headers said it. */
    int (*control)(frame_t *f, req_t *r, const log_read_req *rr);
    /* A keep-alive while the reader waits. 0 or -1. NULL: none. */
    int (*heartbeat)(frame_t *f, req_t *r);
    /* The wait is over with nothing new (deadline, or the process stops) at rr->from:
     * the long-poll's 204. NULL: the response just ends. */
    void (*end)(frame_t *f, req_t *r, const log_read_req *rr);
};

extern const framer frame_catchup, frame_longpoll, frame_sse, frame_events, frame_uimsg, frame_lgraph,
    frame_lgraph_wait;

/* Set f up for framer fr (envelopes: a session's events). */
void frame_init(frame_t *f, const framer *fr, int envelopes);
/* One step of a read: read a batch from rr->kind/rr->from into out (at most
 * cfg->read_max bytes) and write it through f's framer, then flush. A failed first
 * read answers the log's error. Returns FRAME_WAIT, FRAME_MORE or FRAME_END; rr
 * then holds where to read next. */
int frame_step(frame_t *f, req_t *r, log_read_req *rr, buf_t *out);
/* For batch: the reader goes on from rr->next; FRAME_MORE if it is not at the tail,
 * else FRAME_WAIT. */
int frame_next(const log_read_req *rr);

/* ---- for the framers ------------------------------------------------------------------- */

/* A message as an element of the batch: "[" or "," first for a JSON stream, the
 * message itself, or a session envelope with its offset when f->envelopes. */
int frame_array_message(frame_t *f, buf_t *out, const log_info *info, const void *data,
                        size_t len, offset_t at);
/* Close the JSON array of frame_array_message ("[]" when empty). */
int frame_array_seal(frame_t *f, buf_t *out, const log_read_req *rr);
/* A stored session envelope {"type":...} as {"offset":"...","type":...}. */
int frame_envelope(buf_t *out, const void *data, size_t len, offset_t at);
/* The Stream-Cursor of a live response (the client's ?cursor= taken into account). */
void frame_cursor(req_t *r, char *out, size_t cap);
/* The headers of an SSE response (with the base64 note if not text). */
void frame_sse_headers(req_t *r, int text);
/* frame_events' batch: out as it is; over when the stream is closed at its tail
 * (frame_uimsg.c shares it). */
int frame_events_batch(frame_t *f, req_t *r, const log_read_req *rr, const buf_t *out);
/* A chat reply's course, the same for every framer that serves one (frame_uimsg,
 * frame_lgraph): event type (payload p, read after the reply's user message) moves
 * f->ui.phase and f->ui.tools on and is FRAME_REPLY_OTHER (no event of this reply:
 * another reply's, before its first request), FRAME_REPLY_EVENT (of the reply under
 * way), FRAME_REPLY_END (the reply is over with it: its last request ended without
 * tools, tool:loop_stopped, reply:failed, reply:stopped, session:cancelled),
 * FRAME_REPLY_CUT (over before it: a message that interrupts the reply, answered by a
 * reply of its own) or FRAME_REPLY_WAIT (of the reply, which is over with it until
 * its tool calls waiting for approval are answered: each call of its turn has a result
 * or waits, and some wait). */
enum { FRAME_REPLY_OTHER, FRAME_REPLY_EVENT, FRAME_REPLY_END, FRAME_REPLY_CUT, FRAME_REPLY_WAIT };
int frame_reply_track(frame_t *f, const char *type, const json_t *p);
/* The SSE heartbeat, a comment (frame_sse.c; frame_events.c shares it). */
int frame_sse_heartbeat(frame_t *f, req_t *r);

#endif

/* otlp: a session's OpenTelemetry trace, rebuilt from its log, and OTLP encoded.
 *
 * A session is one trace (docs/otlp.md): a span for the session, one per chat turn
 * or workflow step under it, one per provider request attempt and one per tool
 * call under those. Every span carries ids the log already holds: the trace id and
 * the parent of the session span come from the session's first event
 * (session:created, or session:forked for a fork: its trace), and each span's id
 * is the span id of the event that started it; an event without one gets an id
 * derived from the session id and its position (SHA-256), so a rebuild always
 * gives the same ids. A span is finished by an event of the log (its end_seq):
 * the exporter sends the spans whose end event it has not sent yet (otlp_select),
 * so each span goes out once its end is committed. The session span of a chat
 * ends again at each reply's end (it is sent again then, same ids, a later end).
 *
 * Attributes follow the OpenTelemetry GenAI semantic conventions (gen_ai.*), with
 * dstream's own as dstream.*. A chat turn started by a request with a traceparent
 * header of another trace links to the caller's span. The encoders write an ExportTraceServiceRequest:
 * protobuf (OTLP/HTTP, lib/pbuf) or OTLP JSON (hex ids, integers as strings). */
#ifndef DSTREAM_OTLP_H
#define DSTREAM_OTLP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

enum { OTLP_KIND_INTERNAL = 1, OTLP_KIND_CLIENT = 3 };
enum { OTLP_STATUS_UNSET = 0, OTLP_STATUS_OK = 1, OTLP_STATUS_ERROR = 2 };
enum { OTLP_SPAN_SESSION, OTLP_SPAN_TURN, OTLP_SPAN_STEP, OTLP_SPAN_REQUEST, OTLP_SPAN_TOOL };

#define OTLP_QUEUE_MAX 64       /* a chat's queued messages remembered as turns to come */

typedef struct otlp_span {
    int type;                   /* OTLP_SPAN_* */
    char trace_id[33], span_id[17], parent_id[17];  /* hex; parent "" for a root */
    char link_trace[33], link_span[17];             /* the caller's span, or "" (a link) */
    char name[160];
    char key[96];               /* what ends it: a request id, call id, "phase/step" */
    int kind;                   /* OTLP_KIND_* */
    int open;                   /* not ended yet */
    int tools;                  /* a request: tool calls it asked for */
    int64_t start_ms, end_ms;
    uint64_t start_seq, end_seq;/* the events that started and ended it */
    int status;                 /* OTLP_STATUS_* */
    char status_msg[256];
    json_t *attrs;              /* {key: string | integer | real | boolean | [strings]} */
    json_t *events;             /* [{"name", "timeMs", "attributes": {...}}] */
} otlp_span;

typedef struct otlp_trace {
    char session[80];
    char trace_id[33];
    char agent[128];            /* a chat's agent, or a workflow step's */
    otlp_span *v;               /* every span, in order of their start */
    size_t n, cap;
    long root, turn, step;      /* indexes of the open ones, or -1 */
    int turns;                  /* chat turns begun */
    struct { char span_id[17], link_trace[33], link_span[17]; int64_t ms; uint64_t seq; } queue[OTLP_QUEUE_MAX];
    size_t nqueue;
    uint64_t fed;               /* the seq after the last event fed */
} otlp_trace;

/* An empty trace of session id. */
void otlp_trace_init(otlp_trace *t, const char *session);
void otlp_trace_free(otlp_trace *t);
/* Fold one event (an envelope as the log holds it) at position seq in. Events
 * must come in order; one that is not an envelope is skipped. Returns 0, or
 * BUF_ENOMEM. */
int otlp_trace_feed(otlp_trace *t, uint64_t seq, const json_t *ev);
int otlp_trace_feed_raw(otlp_trace *t, uint64_t seq, const void *data, size_t len);
/* The spans to send from cursor from: the ended ones whose end_seq >= from, by
 * end_seq, at most max of them. The spans one event ends are never split: the
 * batch stops before the event of the first span left out (so it may hold fewer
 * than max), or, when the first event alone ends more than max spans, holds
 * exactly that event's. Their indexes go to idx (room for t->n); returns their
 * number, and in *upto the cursor after them: t->fed when every span from `from`
 * on is in the batch, else the end_seq of the first one left for the next. */
size_t otlp_select(const otlp_trace *t, uint64_t from, size_t max, size_t *idx, uint64_t *upto);
/* An ExportTraceServiceRequest of those spans as OTLP/HTTP protobuf, appended to
 * out (bounded by its ceiling). Returns 0, BUF_ETOOBIG or BUF_ENOMEM. */
int otlp_encode_pb(const otlp_trace *t, const size_t *idx, size_t n, buf_t *out);
/* The same request as OTLP JSON. */
json_t *otlp_encode_json(const otlp_trace *t, const size_t *idx, size_t n);

#endif

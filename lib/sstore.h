/* sstore: the session store. Sessions are JSON-mode streams "sessions/{id}" plus a
 * row in `sessions`; every event appended to a session goes through here so that
 * the row's status and the snapshots stay in step with the log (see sstore.c). */
#ifndef DSTREAM_SSTORE_H
#define DSTREAM_SSTORE_H

#include <jansson.h>

#include "errs.h"
#include "log.h"
#include "session.h"

#define SSTORE_ID_MAX 64
#define SSTORE_SNAPSHOT_EVERY 64   /* state never replays more events than this */
#define SSTORE_EVENTS_MAX 16       /* events one command may append */
#define SSTORE_LABELS_MAX 2200     /* bytes of a session's labels as stored: lib/sfilter's most, 16 * (63 + 63 + 6) + 2, fits */


typedef struct sstore_row {
    char id[SSTORE_ID_MAX];
    char stream[SSTORE_ID_MAX + 16];
    char agent[72];
    char workflow[72];
    int wf_version;
    char parent[SSTORE_ID_MAX];
    char fork_offset[OFFSET_LEN + 1];
    char status[24];
    int64_t created_ms, updated_ms;
    char labels[SSTORE_LABELS_MAX];   /* a JSON object of strings, compact, keys sorted; "" for none */
} sstore_row;

/* Which sessions a list (or a bulk operation) takes: each field given narrows it;
 * zeroed, every session. labels: a JSON object text (as stored: compact), each of
 * whose keys the session's labels must have with that value. created_after /
 * created_before: created strictly after / before that millisecond (has_*: given).
 * lib/sfilter parses one from a query or a JSON document. */
typedef struct sstore_filter {
    char status[24];
    char agent[72];
    char workflow[72];
    char labels[SSTORE_LABELS_MAX];
    int has_after, has_before;
    int64_t created_after, created_before;
} sstore_filter;

typedef struct sstore_event {
    const char *type;
    json_t *payload;          /* owned by the caller */
    const char *actor;
    char caused_by[OFFSET_LEN + 1];   /* "" for none */
} sstore_event;

/* A command: decide, from the current view, which events to append. Fill ev[0..*n)
 * (at most SSTORE_EVENTS_MAX) and return 0, or return a negative code of your own
 * (SSTORE_EREFUSED - 1 down to SSTORE_EREFUSED_LAST, lib/errs.h) to refuse;
 * nothing is then written. */
typedef int (*sstore_decide_fn)(void *ud, const session_view *v, sstore_event *ev, size_t *n);

typedef struct sstore_create_req {
    const char *id;
    const char *agent;        /* or NULL */
    const char *workflow;     /* or NULL */
    int wf_version;
    const char *labels;       /* the row's labels (sstore_row.labels' form), or NULL: none; a fork
                               * takes its parent's */
    json_t *created;          /* session:created payload (borrowed) */
    const session_trace *trace;
    /* for forks */
    const char *parent;       /* session id, or NULL */
    int has_at;
    offset_t at;              /* fork position in the parent's stream */
    json_t *forked_recording; /* a fork's own recording setting (borrowed, or NULL: its source's);
                               * its session:forked names only what differs from the source's */
    const char *fork_agent;   /* a chat's fork: the agent it talks to (NULL: its source's) */
    int fork_version;         /* a workflow's fork: the version it runs (0: its source's) */
    /* out */
    offset_t tail;
} sstore_create_req;

/* Create a session (its stream, row and first event) in one transaction. A fork
 * shares the parent's history before `at` and starts with session:forked.
 * Returns 0, LOG_ECONFLICT (id taken), LOG_ENOTFOUND (parent), LOG_ERANGE, LOG_E*. */
int sstore_create(log_conn_t *c, sstore_create_req *r);

/* Run a command on session id atomically: the view as of the tail is computed
 * inside the write transaction, decide() picks the events, they are appended with
 * trace, and status and snapshots are updated. *first gets the offset of the first
 * appended event. Returns 0, LOG_ENOTFOUND, decide's refusal, or LOG_E*. */
int sstore_command(log_conn_t *c, const char *id, const session_trace *trace,
                   sstore_decide_fn decide, void *ud, offset_t *first);

/* For use inside log_transact (the caller's checks and this append commit
 * together): append ev[0..n) (any number) to session id, as sstore_command does
 * with events already decided, with the caller's view of the session kept across
 * calls (a runner appending to a session it streams into saves recomputing it from
 * the log every time): *v is used if *v_seq, the position it describes, is still the
 * session's tail, else recomputed. On success *v describes the new tail and *v_seq
 * says which; on failure *v_seq is 0. If the transaction is then rolled back the
 * caller must set *v_seq to 0 itself. *first gets the offset of the first event.
 * Returns 0, LOG_ENOTFOUND or LOG_EGONE (no such session, or deleted), or LOG_E*. */
int sstore_tx_append_cached(log_conn_t *c, const char *id, const session_trace *trace, const sstore_event *ev,
                            size_t n, session_view *v, uint64_t *v_seq, offset_t *first);

/* One session's events in a batch (sstore_tx_append_batch): as the arguments of
 * sstore_tx_append_cached, and where its events landed. */
typedef struct sstore_batch {
    const char *id;
    const sstore_event *ev;
    size_t n;
    session_view *v;
    uint64_t *v_seq;
    offset_t first;             /* out: the offset of its first event */
} sstore_batch;
#define SSTORE_TX_APPEND_BATCH 1    /* for bench/src/delta-cost.c, built against trees with and without it */

/* For use inside log_transact: sstore_tx_append_cached for each of b[0..n) (one
 * session each), with every session's events appended together
 * (log_tx_append_many: on PostgreSQL a few statements for the whole batch instead
 * of about three a session; on an engine that appends one by one, SQLite, each
 * session's alone, so that no more than one's encoded events are held at once),
 * then each one's view, snapshots and row as
 * sstore_tx_append_cached keeps them. Returns 0 when all were written; else the
 * first failure's LOG_E* (LOG_ENOTFOUND or LOG_EGONE for a session gone, ...),
 * the index of its session in *failed (may be NULL), and every *v_seq is 0: the
 * caller's operation must fail, which undoes the whole batch (a session that is
 * to fail alone is written again the careful way, sstore_tx_append_cached in a
 * nested unit of its own). */
int sstore_tx_append_batch(log_conn_t *c, const session_trace *trace, sstore_batch *b, size_t n, size_t *failed);

/* The view of session id after every event before `at` (or all, if !has_at). v must
 * be initialised; *pos gets the position it describes. Replays at most
 * SSTORE_SNAPSHOT_EVERY events past the nearest snapshot. LOG_ERANGE if `at` is
 * beyond the last event, LOG_EOFFSET if it is not a position of this session's
 * stream (its byte part differs). */
int sstore_view(log_conn_t *c, const char *id, int has_at, offset_t at, session_view *v,
                offset_t *pos);

/* Fold one event of a session's stream into v: data/len its bytes as stored, at
 * its position. Every view and snapshot is computed by this (and dstream check
 * replays sessions with it). Returns 0, or -1 if it is not an event (v unchanged). */
int sstore_fold(session_view *v, const void *data, size_t len, offset_t at);

/* A snapshot's view, its JSON text as stored, into v (initialised; replaced only
 * on success). Returns 0, or -1 if the text is not a view. */
int sstore_snapshot_load(session_view *v, const char *text);

/* The row of session id. LOG_ENOTFOUND if there is none (or it was deleted). */
int sstore_get(log_conn_t *c, const char *id, sstore_row *row);

/* A session as GET /v1/sessions/ID shows it (and dstream --db): its view at pos
 * (session_view_to_json) with the row's id, agent or workflow, fork parent, the
 * position, its stream and events URLs and the creation time. */
json_t *sstore_session_json(const sstore_row *row, const session_view *v, offset_t pos);

/* Sessions by creation (newest first), those filter f takes (NULL: all), after cursor
 * (a value returned as *next; "" for the start). Appends row objects to arr. *next
 * gets the cursor of the next page or "" at the end. */
int sstore_list(log_conn_t *c, const sstore_filter *f, const char *cursor, int limit, json_t *arr,
                char *next, size_t nextcap);

/* sstore_list showing only the sessions whose id keep() accepts. A page looks at no
 * more than SSTORE_LIST_SCAN sessions (and the rest of the millisecond the last was
 * created in): past them it ends short, with a cursor. A cursor names only a session
 * the page showed (or just a creation time), never one keep() refused. */
#define SSTORE_LIST_SCAN 10000
int sstore_list_filtered(log_conn_t *c, const sstore_filter *f, const char *cursor, int limit,
                         int (*keep)(void *ud, const char *id), void *ud, json_t *arr, char *next,
                         size_t nextcap);

/* The labels of a row as a JSON object (an empty one when it has none). New reference. */
json_t *sstore_labels_json(const sstore_row *row);

/* Where a failed session is retried from (POST /v1/sessions/retry): the position to
 * fork it at so that the fork runs again what failed. A chat: just after its last
 * user message that wanted a reply (the fork answers it anew); a workflow: its last
 * step:started (the fork starts that step again). 0 with *at, LOG_ENOTFOUND (no
 * session), or LOG_ERANGE when it has no such point (nothing was asked or started). */
int sstore_retry_point(log_conn_t *c, const char *id, offset_t *at);

/* Delete session id: its row and its stream (soft while forks read it). */
int sstore_delete(log_conn_t *c, const char *id);

/* sstore_delete inside the caller's log_transact (its row and stream go with the
 * rest of the caller's transaction, or not at all). Returns 0 or LOG_E*. */
int sstore_tx_delete(log_conn_t *c, const char *id);

/* 1 if id is a valid session id ([A-Za-z0-9_-]{1,63}). */
int sstore_valid_id(const char *id);

/* A new random session id into out (at least 25 bytes). */
void sstore_new_id(char *out, size_t cap);

/* Where a session's snapshots fall: after the events whose count plus this
 * phase (from its id, 0 to SSTORE_SNAPSHOT_EVERY - 1) is a multiple of
 * SSTORE_SNAPSHOT_EVERY, still one every SSTORE_SNAPSHOT_EVERY events. Sessions
 * that started together and stream alike (a burst) would otherwise all write
 * theirs in the same commit, every SSTORE_SNAPSHOT_EVERY events of each: a commit
 * a hundred times the usual, that every session's deltas wait for. Inline: the
 * engines' retention (lib/store.h thin) needs it too, and never calls up into here. */
static inline unsigned sstore_snapshot_phase(const char *id)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)id; *p; p++) h = (h ^ *p) * 16777619u;
    return h % SSTORE_SNAPSHOT_EVERY;
}

/* Each session with work left (pending, running, awaiting input): fn(ud, id). The
 * runner's scan at start. Returns 0 or LOG_E*. */
int sstore_unfinished(log_conn_t *c, void (*fn)(void *ud, const char *id), void *ud);

/* The OpenTelemetry export's cursor of session id (runner/otlp.c): the position of
 * its log before which every span that ended was accepted by the receiver; 0 when
 * none was kept. Returns 0 or LOG_E*. */
int sstore_otlp_cursor(log_conn_t *c, const char *id, uint64_t *seq);
/* Move it from `from` to `to` in a commit of its own, only if it still is at
 * `from`. Returns 1 moved, 0 not (another process moved it), or LOG_E*. */
int sstore_otlp_advance(log_conn_t *c, const char *id, uint64_t from, uint64_t to);
/* Each session (not deleted) whose log holds events past its cursor: fn(ud, id,
 * cursor) until fn returns nonzero. Returns 0 or LOG_E*. */
int sstore_otlp_behind(log_conn_t *c, int (*fn)(void *ud, const char *id, uint64_t cursor), void *ud);

#endif

/* outbox: every event the runner writes goes through here (runner/outbox.c): queued
 * on its session, written by one commit per loop turn. */
#ifndef DSTREAM_RUNNER_OUTBOX_H
#define DSTREAM_RUNNER_OUTBOX_H

#include "types.h"

/* Queue an event for s (payload: a new reference, now the outbox's). */
void outbox_emit(runner_t *R, sess_t *s, const char *type, json_t *payload);
/* The same with another actor (a static string). */
void outbox_emit_as(runner_t *R, sess_t *s, const char *type, json_t *payload, const char *actor);
/* Queue a write to make with s's events, in the same commit, after them: tx(c,
 * s's id, ud) inside the transaction (0 or LOG_E*: the session's writes are
 * undone, its events not written), then drop(ud) once it is written or thrown away. */
void outbox_defer(sess_t *s, int (*tx)(log_conn_t *c, const char *sid, void *ud), void (*drop)(void *ud), void *ud);
/* What a commit did with a session's queue when it was not written. */
#define OUTBOX_LOST 2               /* another runner holds its lease: dropped (counted in R->dropped) */
#define OUTBOX_GONE 3               /* the session is gone */
#define OUTBOX_FAILED 4             /* the append failed (logged; s's timer looks again) */
typedef struct outbox_outcome {
    sess_t *s;
    int what;                   /* OUTBOX_* */
} outbox_outcome;
/* Commit every session's queued events in one transaction, each session's only
 * while this process holds its lease (else they are dropped and counted), and the
 * leases due for renewal of the sessions streaming a reply. Returns
 * 0 with the sessions whose queue was not written and why in *outcomes (an array
 * of *n, the caller's to free; NULL when every queue was written): the caller
 * stops what they have in flight. Or LOG_E* if the transaction failed (the events
 * stay queued for the next try; *n is 0). */
int outbox_commit(runner_t *R, outbox_outcome **outcomes, size_t *n);
/* 1 if s streams a reply under a lease this process holds that is due for renewal
 * at now: the next outbox_commit renews it, with or without events of s. */
int outbox_renewing(const sess_t *s, int64_t now);
/* Release the lease of session id (this process holds it and is done with it) in
 * the next commit, with the events of the others; outbox_release_cancel takes it
 * back off (its lease is being taken again). A commit that fails keeps them. */
void outbox_release(runner_t *R, const char *id);
void outbox_release_cancel(runner_t *R, const char *id);
/* Free s's queued events and writes without writing them. */
void outbox_clear(sess_t *s);

/* The pace of the commits of deltas alone (anything else is committed at once). */
typedef struct outbox_pace {
    int64_t small;              /* a commit of fewer sessions' deltas: the next at once (0: never) */
    int64_t max_ms;             /* the longest gap */
    int64_t per_session_us;     /* the gap after a commit of n sessions' deltas: n times this */
} outbox_pace;
/* The gap (ms) from the start of the last commit, which carried the deltas of
 * batch sessions (failed: it failed), to the next commit of deltas alone: none
 * after a small one, else as many times per_session_us as it carried sessions,
 * rounded up, at most max_ms; max_ms after a failed one, or when small is 0. */
int64_t outbox_gap(const outbox_pace *p, int64_t batch, int failed);

#endif

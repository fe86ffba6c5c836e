/* driver: what the runner does for one session, decided from its log.
 *
 * The runner keeps no state that matters across a restart: each time a session
 * changes, a timer of its own fires or a lease it waited for expires, drive()
 * recomputes the session's view from the log and compares it with what this
 * process has in flight. Every decision ends in events queued on the session and
 * committed by the loop (outbox.c), so a crash at any point leaves a log from which
 * the next drive() resumes.
 *
 * Here: which sessions the process looks after, their leases (taken, renewed,
 * lost), what a commit that did not write a session's events means for it, and
 * the session-wide decisions (its events limit, a cancel); a chat's turns are
 * turn.c's, a workflow's steps steps.c's. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/diag.h"
#include "../lib/agent.h"
#include "../lib/defs.h"
#include "../lib/event.h"
#include "../lib/lease.h"
#include "../lib/timefmt.h"
#include "../lib/workflow.h"
#include "driver.h"
#include "outbox.h"
#include "request.h"
#include "stats.h"
#include "steps.h"
#include "tools.h"
#include "turn.h"

/* The loop's list of sessions (R->sessions): those it looks at each turn. A parked
 * session is not on it (sessidx.c). */
static void link_in(runner_t *R, sess_t *s)
{
    s->prev = NULL;
    s->next = R->sessions;
    if (R->sessions) R->sessions->prev = s;
    R->sessions = s;
}

static void unlink_out(runner_t *R, sess_t *s)
{
    if (s->prev) s->prev->next = s->next;
    else R->sessions = s->next;
    if (s->next) s->next->prev = s->prev;
    s->next = s->prev = NULL;
}

sess_t *runner_session(runner_t *R, const char *id)
{
    sess_t *s = sessidx_find(&R->idx, id);
    if (s) {
        if (s->heap_at) {       /* its log changed while it slept: back on the list */
            sessidx_unpark(&R->idx, s);
            link_in(R, s);
        }
        return s;
    }
    s = calloc(1, sizeof *s);
    if (!s) abort();
    snprintf(s->id, sizeof s->id, "%s", id);
    session_view_init(&s->view);
    sessidx_add(&R->idx, s);
    link_in(R, s);
    return s;
}

int64_t runner_unpark(runner_t *R, int64_t now)
{
    sess_t *s;
    while ((s = sessidx_pop_due(&R->idx, now))) {
        link_in(R, s);
        s->due = 1;
    }
    return sessidx_next_due(&R->idx);
}

/* s waits only for its timer: off the list, into the heap. What it cached of its
 * log goes (the next commit reads it again), so that a parked session is small. */
static void park(runner_t *R, sess_t *s)
{
    unlink_out(R, s);
    session_view_free(&s->view);
    session_view_init(&s->view);
    s->view_seq = 0;
    sessidx_park(&R->idx, s);
}

void runner_forget_all(runner_t *R)
{
    while (R->sessions) runner_forget(R, R->sessions);
    while (R->idx.nheap) runner_forget(R, R->idx.heap[0]);
    sessidx_free(&R->idx);
}

void runner_forget(runner_t *R, sess_t *s)
{
    if (!s->heap_at) unlink_out(R, s);
    sessidx_del(&R->idx, s);
    if (s->rq) request_free(R, s->rq);
    tools_forget(R, s);
    if (s->lease.held) outbox_release(R, s->id);    /* with the next commit */
    outbox_clear(s);
    free(s->out);
    session_view_free(&s->view);
    json_decref(s->agent);
    json_decref(s->workflow);
    free(s);
}

void runner_lost(runner_t *R, sess_t *s)
{
    if (s->rq) {
        diag("info", "session %s: request %s stopped: another runner holds the session", s->id, s->rq->id);
        request_free(R, s->rq);
    }
    if (s->calls) diag("info", "session %s: its tool calls are abandoned: another runner holds the session", s->id);
    tools_forget(R, s);
    s->lease.held = 0;
    /* Look again when the new holder's lease may have run out (it renews it
     * while it works; if it died, this process takes the session back). */
    s->lease.other_until = timefmt_now_ms() + R->lease_ms;
    s->timer_ms = s->lease.other_until + 50;
}

int runner_commit(runner_t *R)
{
    outbox_outcome *oc;
    size_t n;
    int rc = outbox_commit(R, &oc, &n);
    for (size_t i = 0; i < n; i++) {
        if (oc[i].what == OUTBOX_LOST) runner_lost(R, oc[i].s);
        else if (oc[i].s->rq) request_free(R, oc[i].s->rq);
    }
    free(oc);
    return rc;
}

/* Queue one event built by lib/event (its payload becomes the outbox's). */
static void put(runner_t *R, sess_t *s, sstore_event e)
{
    outbox_emit_as(R, s, e.type, e.payload, e.actor);
}

/* e, an event of the request in progress of view v: marked a compaction's when that
 * request is a compaction's summarization request (lib/event event_compaction). */
static sstore_event of_request(const session_view *v, sstore_event e)
{
    return v->compact_started ? event_compaction(e, NULL) : e;
}

/* ---- workflow sessions ---------------------------------------------------------------------- */

static json_t *load_workflow(runner_t *R, sess_t *s, const session_view *v)
{
    int rc, got;
    if (s->workflow) return s->workflow;
    const char *name = json_string_value(json_object_get(v->created, PK_WORKFLOW));
    int version = (int)json_integer_value(json_object_get(v->created, PK_VERSION));
    if (name) s->workflow = defs_workflow_get(R->conn, name, version, &got, &rc);
    return s->workflow;
}

static void drive_workflow(runner_t *R, sess_t *s, const session_view *v)
{
    json_t *doc = load_workflow(R, s, v);
    if (!doc) {
        turn_fail_workflow(R, s, NULL, "its workflow version is gone");
        return;
    }
    workflow_pos pos;
    workflow_next_t nx;
    session_view_pos(v, &pos);
    workflow_next(doc, &pos, v->state, v->input, &nx);
    switch (nx.kind) {
    case NEXT_START: {
        const char *first = json_string_value(json_object_get(doc, "initialPhase"));
        if (!first) first = json_string_value(json_object_get(json_array_get(json_object_get(doc, "phases"), 0), "name"));
        put(R, s, event_workflow_started(json_object_get(v->created, PK_WORKFLOW), json_object_get(v->created, PK_VERSION)));
        put(R, s, event_phase_entered(first));
        diag("info", "session %s: workflow started", s->id);
        break;
    }
    case NEXT_ENTER_PHASE: put(R, s, event_phase_entered(nx.phase)); break;
    case NEXT_TRANSITION: {
        put(R, s, event_phase_exited(v->phase, nx.phase));
        put(R, s, event_phase_entered(nx.phase));
        break;
    }
    case NEXT_COMPLETE:
        put(R, s, event_workflow_completed(v->state));
        diag("info", "session %s: workflow completed", s->id);
        break;
    case NEXT_FAIL: turn_fail_workflow(R, s, NULL, "%s", nx.error); break;
    case NEXT_STEP:
        if (v->steps >= workflow_max_steps(doc))
            turn_give_up(R, s, v, "step_limit", "the workflow executed its %d steps (maxSteps) and stops",
                         workflow_max_steps(doc));
        else
            steps_run(R, s, v, nx.def, nx.phase, nx.step, 0);
        break;
    case NEXT_WAIT: {
        if (!pos.step_open || !v->phase[0]) break;
        const json_t *step = turn_step_def(doc, v->phase, v->step);
        if (step) steps_run(R, s, v, step, v->phase, v->step, 1);
        break;
    }
    }
}

/* ---- the entry point ---------------------------------------------------------------------- */

/* The share of new sessions between runners. Each live runner (R->fair_*) knows
 * which of them a new session falls to: the one whose rank among the live runner
 * ids is the session's stream id modulo their number (consecutive sessions go
 * round the runners). That one claims it at once, unless it holds more than its
 * share of the leases (the live runners' leases shared evenly, the new one
 * included, plus one); another claims it at once only if it holds fewer than its
 * share less one. Otherwise the claim waits FAIR_DEFER_MS, for the runner it falls
 * to, and is then made if nobody did: a session never waits longer for a runner
 * that is gone or busy. Without it claiming is a race that the runner whose loop
 * is awake wins, up to 9 sessions in 10 on PostgreSQL. */
#define FAIR_DEFER_MS 200

static int claim_now(runner_t *R, const sess_t *s)
{
    if (!R->fair_peers || s->stream_id <= 0) return 1;
    if (R->fair_stale) {
        R->fair_mine = runner_stats_leased(R);
        R->fair_stale = 0;
    }
    int64_t live = R->fair_peers + 1, total = R->fair_mine + R->fair_peer_leases + 1;
    if (R->fair_mine * live + live < total) return 1;            /* behind by more than one */
    return s->stream_id % live == R->fair_rank && R->fair_mine < (total + live - 1) / live + 1;
}

/* Whether this process holds s's lease and may drive it now: 1 if held and not
 * due for renewal; else 0: the lease is to be taken or renewed with the turn's
 * other claims (s->claiming: runner_claim, which has it driven again once held),
 * or another runner holds it (its expiry known: a timer), or the claim of a
 * session new here is put off for the share (a timer: then it is taken unless
 * another runner took it meanwhile). */
static int hold(runner_t *R, sess_t *s, lease_plan plan, int64_t now, int due)
{
    if (plan == LEASE_KEEP) return 1;
    if (s->deferred_ms) {
        if (now < s->deferred_ms) return 0;
        s->deferred_ms = 0;
        if (R->fair_peer_leases > 0) R->fair_peer_leases--;
    } else if (plan == LEASE_TAKE && !s->lease.held && !s->lease.other_until && !s->timer_ms && !s->rq &&
               !s->calls && !claim_now(R, s)) {
        /* A claim triggered by a change of the session's log (not by its own timer,
         * nor a takeover from a runner gone). */
        s->deferred_ms = s->timer_ms = now + FAIR_DEFER_MS;
        R->deferred++;
        R->fair_peer_leases++;      /* another is expected to take it (until the next read) */
        return 0;
    }
    if (plan == LEASE_EXPIRED) {
        /* This process was away (paused, starved) past its lease: another runner
         * may have taken the session and even let it go since. What it had in
         * flight is stale; the log says what to do now. */
        diag("info", "session %s: lease expired while this runner was away", s->id);
        runner_lost(R, s);
    }
    /* Taken with the turn's other claims (runner_claim), then driven. */
    s->claiming = 1;
    s->claim_due = due;
    return 0;
}

/* What the claim of s's lease came to (lease_acquire's held and expiry): 1 if
 * held, else 0 (a timer set: for the holder's lease to run out, or to try again). */
static int claimed(runner_t *R, sess_t *s, int held, int64_t expires, int64_t now)
{
    if (held == 1) {
        R->renewed_drive += s->lease.held;
        R->fair_mine += !s->lease.held;
        lease_taken(&s->lease, now, R->lease_ms, expires);
        return 1;
    }
    if (held == 0) {
        if (s->lease.held || s->rq) diag("info", "session %s: lease lost", s->id);
        else if (!s->lease.other_until) R->fair_peer_leases++;
        runner_lost(R, s);
        s->lease.other_until = expires;
        s->timer_ms = expires + 50;
        return 0;
    }
    diag("info", "session %s: lease: %s", s->id, errs_str(held));
    s->timer_ms = now + 1000;
    return 0;
}

/* The claims the turn's drives asked for (hold), in one transaction: one commit
 * for many sessions starting at once (each of its own queued every session's
 * deltas behind as many commits, and on SQLite behind the pool's writers too);
 * those held are driven at the next turn. */
void runner_claim(runner_t *R)
{
    size_t n = 0;
    for (sess_t *s = R->sessions; s; s = s->next) n += s->claiming;
    if (n == 0) return;
    const char **ids = malloc(n * sizeof *ids);
    int *held = malloc(n * sizeof *held);
    int64_t *expires = malloc(n * sizeof *expires);
    if (!ids || !held || !expires) abort();
    n = 0;
    for (sess_t *s = R->sessions; s; s = s->next) {
        if (!s->claiming) continue;
        ids[n++] = s->id;
        /* Given up at its last drive and taken again before the commit released
         * it: it stays this process's. */
        if (R->nreleases) outbox_release_cancel(R, s->id);
    }
    int rc = lease_acquire_many(R->conn, ids, n, &R->me, R->lease_ms, held, expires);
    int64_t now = timefmt_now_ms();
    R->claims += n;
    R->claim_commits++;
    size_t i = 0;       /* the sessions in the order their ids were collected */
    for (sess_t *s = R->sessions; s && i < n; s = s->next) {
        if (!s->claiming) continue;
        s->claiming = 0;
        if (claimed(R, s, rc ? rc : held[i], rc ? 0 : expires[i], now)) {
            s->dirty = 1;
            s->due |= s->claim_due;
        }
        i++;
    }
    free(ids);
    free(held);
    free(expires);
}

/* Where s's log ends (its tail seq), when this process knows a position of it to
 * compare with (the tail it last read or wrote, or the view it keeps); else 0. */
static uint64_t tail_of(runner_t *R, sess_t *s)
{
    char path[SSTORE_ID_MAX + 16];
    log_info info;
    if (!s->known_seq && !s->view_seq) return 0;
    snprintf(path, sizeof path, "sessions/%s", s->id);
    return log_head(R->conn, path, &info) == 0 ? info.tail.seq : 0;
}

/* A session that holds nothing here and whose log says it waits only for a time or
 * a signal (session_view_waits_until) needs no lease to know that: it is parked
 * until its time (or forgotten until its log changes) after one read, with no
 * write. That is most of what a restart finds among 10,000 sleeping sessions, and
 * what a sleeping session whose log changed without ending its wait (a signal it
 * does not take) needs.
 * Returns 1 if so (s may be freed), 0 if it is to be driven. */
static int idle(runner_t *R, sess_t *s, int64_t now)
{
    session_view v;
    offset_t none = {0, 0}, pos;
    session_view_init(&v);
    int64_t until = sstore_view(R->conn, s->id, 0, none, &v, &pos) ? -1 : session_view_waits_until(&v);
    session_view_free(&v);
    if (until < 0 || (until && until <= now)) return 0;
    s->known_seq = pos.seq;
    s->timer_ms = until;
    if (!until) runner_forget(R, s);
    else if (!s->dirty && !s->due) park(R, s);
    return 1;
}

void runner_drive(runner_t *R, sess_t *s)
{
    int due = s->due, was_held = s->lease.held;
    s->dirty = s->due = 0;
    if (R->stopping) return;
    if (s->nout) {      /* decide once what was decided is committed */
        s->dirty = 1;
        return;
    }
    int64_t now = timefmt_now_ms();
    /* Another runner drives it: its changes are not ours to act on until its lease
     * runs out (our timer). */
    lease_plan plan = lease_plan_at(&s->lease, due, now);
    if (plan == LEASE_WAIT) return;
    if (due && s->timer_ms && now < s->timer_ms) due = 0;
    /* Only where it may pay (what a restart found, a workflow's session): a chat's
     * message would read its log twice. */
    int maybe_idle = (s->scanned || s->workflow) && !s->lease.held && !s->rq && !s->calls;
    s->scanned = 0;
    if (maybe_idle && idle(R, s, now)) return;
    if (!hold(R, s, plan, now, due)) return;
    /* Unchanged since this process last read or wrote it: a drive would decide
     * what it decided then. */
    uint64_t tail = tail_of(R, s);
    if (!due && was_held && tail && tail == s->known_seq) return;
    if (s->timer_ms && now >= s->timer_ms) s->timer_ms = 0;

    /* The view: a copy of the one this process keeps (outbox.c's commits) when that
     * is still the log's tail, else made from the log. */
    session_view v;
    offset_t none = {0, 0}, pos;
    session_view_init(&v);
    int rc;
    R->drives++;
    if (tail && tail == s->view_seq && session_view_copy(&v, &s->view) == 0) {
        pos.seq = tail;
        rc = 0;
        R->views_kept++;
    } else {
        rc = sstore_view(R->conn, s->id, 0, none, &v, &pos);
    }
    if (rc) {
        session_view_free(&v);
        if (rc == LOG_ENOTFOUND || rc == LOG_EGONE) {
            runner_forget(R, s);
        } else {
            diag("info", "session %s: cannot read: %s", s->id, errs_str(rc));
            s->timer_ms = now + 1000;
        }
        return;
    }
    s->known_seq = pos.seq;
    if (session_view_finished(&v)) {
        session_view_free(&v);
        runner_forget(R, s);
        return;
    }
    if (R->session_events_max && v.events >= (uint64_t)R->session_events_max) {
        /* The session's log is as long as it may get: it ends here. */
        char msg[160];
        snprintf(msg, sizeof msg, "the session reached its limit of %lld events (DSTREAM_SESSION_EVENTS_MAX)",
                 (long long)R->session_events_max);
        if (s->rq) request_free(R, s->rq);
        if (v.request[0]) put(R, s, of_request(&v, event_request_cancelled(v.request, "failed", msg)));
        if (v.is_workflow) put(R, s, event_failed(1, msg, "event_limit", v.attempts));
        else put(R, s, event_session_cancelled(msg));
        s->timer_ms = 0;
        diag("info", "session %s: %s", s->id, msg);
    } else if (v.cancel_requested) {
        if (s->rq) {
            request_flush(R, s->rq);
            request_free(R, s->rq);
        }
        if (v.request[0])
            put(R, s, of_request(&v, event_request_cancelled(v.request, "cancelled", NULL)));
        /* Tool calls under way are abandoned (their servers are told); what they
         * did is not known, and nothing runs them again in a cancelled session. */
        if (s->calls) diag("info", "session %s: its tool calls under way are abandoned", s->id);
        tools_forget(R, s);
        put(R, s, event_session_cancelled("cancel requested"));
        s->timer_ms = 0;
        diag("info", "session %s: cancelled", s->id);
    } else if (v.stop_requested && !v.is_workflow) {
        /* A chat's reply stops, as a cancel would end it, and the chat goes on. */
        if (s->rq) {
            request_flush(R, s->rq);
            request_free(R, s->rq);
        }
        if (v.request[0]) put(R, s, of_request(&v, event_request_cancelled(v.request, "stopped", NULL)));
        if (s->calls) diag("info", "session %s: its tool calls under way are abandoned", s->id);
        tools_forget(R, s);
        put(R, s, event_reply_stopped());
        s->timer_ms = 0;
        diag("info", "session %s: reply stopped", s->id);
    } else if (v.is_workflow) {
        drive_workflow(R, s, &v);
    } else {
        turn_chat(R, s, &v);
    }
    session_view_free(&v);
    /* Nothing in flight and nothing to write: the lease goes back (a timer, if
     * any, takes it again); nothing at all: forget the session until it changes. */
    if (!s->rq && !s->nout && !s->calls) {
        if (s->lease.held) outbox_release(R, s->id);    /* with the next commit */
        s->lease.held = 0;
        if (!s->timer_ms) runner_forget(R, s);
        else if (!s->dirty && !s->due) park(R, s);
    }
}

void runner_shutdown(runner_t *R)
{
    /* Each request in flight is closed and rescheduled at once (on the restart
     * budget), so that the next runner picks it up without waiting. */
    for (sess_t *s = R->sessions; s; s = s->next)
        if (s->rq) turn_restart(R, s);
    runner_commit(R);
}

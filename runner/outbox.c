/* outbox: the runner's one write path.
 *
 * Everything the runner decides for a session becomes events queued on that
 * session (outbox_emit); once per loop turn outbox_commit writes every session's
 * queue in one transaction, so a turn in which 200 replies stream costs one commit
 * (one fsync), not 200. Inside that transaction each session's events are written
 * only if this process still holds the session's lease (every session's lease in one
 * statement, lease_tx_held_many, which also renews those due): a runner that was
 * paused or cut off while another took the session over finds out here, writes
 * nothing more into it and drops what it had (counted in R->dropped and logged);
 * outbox_commit says which sessions that happened to, and the driver stops what
 * they had in flight. Writes of other tables that belong with a session's events
 * (its recordings: tap.c) are queued with them (outbox_defer) and made after
 * them; so are the releases of the leases the driver gave up (outbox_release:
 * releases, below, says when). The held sessions' writes are made with no savepoint of their own (on
 * PostgreSQL each is a round trip and a subtransaction), their events all in one
 * batch (sstore_tx_append_batch: on PostgreSQL their streams' rows locked in one
 * statement, every message inserted in one, every tail moved in one); if any of them fails,
 * the whole commit is undone and made again the careful way, each session in a
 * savepoint of its own with its own lease statement, so that one session's failure
 * does not undo the others'.
 *
 * The outbox is a leaf: it calls nothing of the runner above it; what the commit
 * means for a session is its return value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/timefmt.h"
#include "outbox.h"

static int is_delta(const char *type)
{
    return !strcmp(type, EV_TEXT_DELTA) || !strcmp(type, EV_THINKING_DELTA);
}

void outbox_emit(runner_t *R, sess_t *s, const char *type, json_t *payload)
{
    outbox_emit_as(R, s, type, payload, "runner");
}

void outbox_emit_as(runner_t *R, sess_t *s, const char *type, json_t *payload, const char *actor)
{
    (void)R;
    if (s->nout == s->capout) {
        size_t cap = s->capout ? s->capout * 2 : 8;
        if (cap > RUNNER_OUTBOX_MAX || !(s->out = realloc(s->out, cap * sizeof *s->out))) {
            /* Cannot happen while commits succeed (a turn queues a few events per
             * session); if they keep failing, this is the bound. */
            diag("info", "session %s: outbox full, %s dropped", s->id, type);
            json_decref(payload);
            return;
        }
        s->capout = cap;
    }
    if (s->nout == 0) s->out_deltas_only = 1;
    if (!is_delta(type)) s->out_deltas_only = 0;
    sstore_event *e = &s->out[s->nout++];
    memset(e, 0, sizeof *e);
    e->type = type;
    e->payload = payload;
    e->actor = actor;
}

void outbox_defer(sess_t *s, int (*tx)(log_conn_t *c, const char *sid, void *ud), void (*drop)(void *ud), void *ud)
{
    outbox_write *w = calloc(1, sizeof *w);
    if (!w) abort();
    w->tx = tx;
    w->drop = drop;
    w->ud = ud;
    outbox_write **pp = &s->writes;
    while (*pp) pp = &(*pp)->next;
    *pp = w;
}

int64_t outbox_gap(const outbox_pace *p, int64_t batch, int failed)
{
    if (failed || p->small == 0) return p->max_ms;
    if (batch < p->small) return 0;
    /* The commit's own cost is the same for few sessions' deltas as for many
     * (SQLite's sync, a round trip): a gap as long as the last batch was large
     * shares it out under load, and is short where the sessions are few. */
    int64_t us = batch > INT64_MAX / (p->per_session_us + 1) ? INT64_MAX : batch * p->per_session_us;
    int64_t ms = us / 1000 + (us % 1000 != 0);
    return ms < p->max_ms ? ms : p->max_ms;
}

void outbox_clear(sess_t *s)
{
    for (size_t i = 0; i < s->nout; i++) json_decref(s->out[i].payload);
    s->nout = 0;
    while (s->writes) {
        outbox_write *w = s->writes;
        s->writes = w->next;
        if (w->drop) w->drop(w->ud);
        free(w);
    }
}

#define RELEASE_WAITS_MAX 8     /* commits that may pass over the leases given up (releases) */

static int id_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

void outbox_release(runner_t *R, const char *id)
{
    if (R->nreleases == R->capreleases) {
        size_t cap = R->capreleases ? R->capreleases * 2 : 16;
        if (!(R->releases = realloc(R->releases, cap * sizeof *R->releases))) abort();
        R->capreleases = cap;
    }
    snprintf(R->releases[R->nreleases++], sizeof *R->releases, "%s", id);
}

void outbox_release_cancel(runner_t *R, const char *id)
{
    for (size_t i = 0; i < R->nreleases; i++) {
        if (strcmp(R->releases[i], id)) continue;
        memmove(R->releases[i], R->releases[i + 1], (R->nreleases - i - 1) * sizeof *R->releases);
        R->nreleases--;
        return;
    }
}

/* The deferred writes of s, in the order they were queued: 0 or the first LOG_E*. */
static int deferred_tx(log_conn_t *c, sess_t *s)
{
    for (outbox_write *w = s->writes; w; w = w->next) {
        int rc = w->tx(c, s->id, w->ud);
        if (rc) return rc;
    }
    return 0;
}

enum { C_PENDING, C_DONE, C_LOST = OUTBOX_LOST, C_GONE = OUTBOX_GONE, C_FAILED = OUTBOX_FAILED };

typedef struct commit_item {
    sess_t *s;
    int renewed;                /* the lease was renewed, not only checked */
    int outcome;
    int rc;
    offset_t first;
} commit_item;

typedef struct commit_arg {
    runner_t *R;
    commit_item *items;
    size_t n;
    int careful;                /* each session in a savepoint of its own (else: the fast way) */
    int retry;                  /* the fast way failed: commit again, the careful way */
    int released;               /* the leases given up were released (releases below) */
} commit_arg;

/* The leases given up (outbox_release), in a commit that renews none: each is a
 * row lock, and a renewal another, and on PostgreSQL another runner's claims lock
 * their rows in the ids' order (pg_leases.c): a commit that locked a renewed row
 * and then a released one of a smaller id could wait for that runner while it
 * waits for it. No renewal in the commit, the releases in the ids' order (the
 * array is sorted by the caller; on PostgreSQL one statement that locks them in
 * that order): no such cycle. Else they wait for the next commit. careful: in a
 * savepoint of their own, leases that fail to go left to run out by themselves.
 * 0 or LOG_E* (the fast way). */
static int releases(log_conn_t *c, commit_arg *a)
{
    runner_t *R = a->R;
    for (size_t i = 0; i < a->n; i++)
        if (a->items[i].renewed) return 0;
    if (R->nreleases == 0) return 0;
    const char **ids = malloc(R->nreleases * sizeof *ids);
    if (!ids) abort();
    for (size_t i = 0; i < R->nreleases; i++) ids[i] = R->releases[i];
    if (a->careful && log_tx_nest_begin(c)) {
        free(ids);
        return LOG_EIO;
    }
    int rc = lease_tx_release_many(c, ids, R->nreleases, &R->me);
    free(ids);
    if (a->careful && log_tx_nest_end(c, rc != 0)) return LOG_EIO;
    if (rc && !a->careful) return rc;
    a->released = 1;
    return 0;
}

/* One session's writes once its lease is known held: its events, then its
 * deferred writes; 0 or the first LOG_E*. */
static int session_tx(log_conn_t *c, commit_item *it, const session_trace *tr)
{
    sess_t *s = it->s;
    if (s->nout == 0) return 0;         /* its lease alone (outbox_renewing): nothing else */
    int rc = sstore_tx_append_cached(c, s->id, tr, s->out, s->nout, &s->view, &s->view_seq, &it->first);
    if (rc == 0) rc = deferred_tx(c, s);  /* recordings with their events */
    return rc;
}

/* What held and rc (of the lease, then of the writes) make of it. */
static void outcome(commit_item *it, int held, int rc)
{
    if (held == 0) it->outcome = C_LOST;
    else if (rc == LOG_ENOTFOUND || rc == LOG_EGONE) it->outcome = C_GONE;
    else if (rc) it->outcome = C_FAILED;
    else it->outcome = C_DONE;
    it->rc = rc;
    if (it->outcome != C_DONE) it->s->view_seq = 0;
}

/* The careful way: each session in a nested savepoint of its own, its lease
 * checked (or renewed) alone, so that one session's failure undoes only its own
 * writes. */
static int commit_careful(log_conn_t *c, commit_arg *a, const session_trace *tr, int64_t now)
{
    for (size_t i = 0; i < a->n; i++) {
        commit_item *it = &a->items[i];
        if (log_tx_nest_begin(c)) return LOG_EIO;
        /* Checked in every commit; renewed (a write) only once a third of it ran. */
        it->renewed = now >= it->s->lease.renew_ms;
        int held = it->renewed ? lease_tx_renew(c, it->s->id, &a->R->me, a->R->lease_ms)
                               : lease_tx_held(c, it->s->id, &a->R->me);
        outcome(it, held, held == 1 ? session_tx(c, it, tr) : held);
        if (log_tx_nest_end(c, it->outcome != C_DONE)) return LOG_EIO;
    }
    return releases(c, a);
}

/* The fast way: every lease of the group in one statement (lease_tx_held_many),
 * then the writes of the sessions held, with no savepoint of their own. Any
 * failure (of the lease statement, or of any session's writes) gives up the whole
 * operation (its rc undoes all of it: lib/log.c) and asks for the careful way. */
static int commit_fast(log_conn_t *c, commit_arg *a, const session_trace *tr, int64_t now)
{
    size_t room = a->n ? a->n : 1;      /* (a commit of releases alone has no session) */
    const char **ids = malloc(room * sizeof *ids);
    unsigned char *renew = malloc(room);
    int *held = malloc(room * sizeof *held);
    if (!ids || !renew || !held) abort();
    for (size_t i = 0; i < a->n; i++) {
        commit_item *it = &a->items[i];
        ids[i] = it->s->id;
        renew[i] = it->renewed = now >= it->s->lease.renew_ms;
    }
    int rc = a->n ? lease_tx_held_many(c, ids, renew, a->n, &a->R->me, a->R->lease_ms, held) : 0;
    /* The held sessions' events in one batch (on PostgreSQL a few statements for
     * all of them), then each one's deferred writes. */
    sstore_batch *b = calloc(a->n ? a->n : 1, sizeof *b);
    size_t *ix = calloc(a->n ? a->n : 1, sizeof *ix), nb = 0;
    if (!b || !ix) abort();
    for (size_t i = 0; i < a->n && rc == 0; i++) {
        sess_t *s = a->items[i].s;
        if (!held[i] || s->nout == 0) continue;
        b[nb] = (sstore_batch){s->id, s->out, s->nout, &s->view, &s->view_seq, {0, 0}};
        ix[nb++] = i;
    }
    if (rc == 0 && nb) rc = sstore_tx_append_batch(c, tr, b, nb, NULL);
    for (size_t j = 0; j < nb && rc == 0; j++) a->items[ix[j]].first = b[j].first;
    for (size_t i = 0; i < a->n && rc == 0; i++) {
        commit_item *it = &a->items[i];
        /* Recordings with their events (its lease alone: they wait for its events). */
        rc = held[i] && it->s->nout ? deferred_tx(c, it->s) : 0;
        if (rc == 0) outcome(it, held[i], 0);
    }
    /* The leases given up (sessions that ended: outbox_release). */
    if (rc == 0) rc = releases(c, a);
    free(b);
    free(ix);
    free(ids);
    free(renew);
    free(held);
    if (rc) {
        a->retry = 1;
        return rc < 0 ? rc : LOG_EIO;
    }
    return 0;
}

static int op_commit(log_conn_t *c, void *arg)
{
    commit_arg *a = arg;
    session_trace tr;
    session_trace_new(&tr);
    int64_t now = timefmt_now_ms();
    a->retry = 0;
    a->released = 0;
    return a->careful ? commit_careful(c, a, &tr, now) : commit_fast(c, a, &tr, now);
}

/* The leases given up, in a transaction of their own (no renewal in it). */
static int op_releases(log_conn_t *c, void *arg)
{
    return releases(c, arg);
}

int outbox_renewing(const sess_t *s, int64_t now)
{
    return s->lease.held && s->rq && now >= s->lease.renew_ms;
}

int outbox_commit(runner_t *R, outbox_outcome **outcomes, size_t *noutcomes)
{
    size_t n = 0;
    *outcomes = NULL;
    *noutcomes = 0;
    int64_t t = timefmt_now_ms();
    for (sess_t *s = R->sessions; s; s = s->next) n += s->nout > 0 || outbox_renewing(s, t);
    if (n == 0 && R->nreleases == 0) return 0;
    /* (in the ids' order, as another runner's claims lock them: releases) */
    if (R->nreleases > 1) qsort(R->releases, R->nreleases, sizeof *R->releases, id_cmp);
    commit_item *items = calloc(n ? n : 1, sizeof *items);
    if (!items) abort();
    n = 0;
    for (sess_t *s = R->sessions; s; s = s->next)
        if (s->nout || outbox_renewing(s, t)) items[n++].s = s;
    commit_arg a = {R, items, n, 0, 0, 0};
    int64_t t0 = timefmt_now_ms();   /* the leases renewed inside run from after this */
    int rc = log_transact(R->conn, op_commit, &a);
    if (rc && (a.retry || (rc != LOG_EBUSY && rc != LOG_EDOWN))) {
        /* A session failed the fast way (or the commit did, for a reason of its own:
         * on PostgreSQL the sessions' insert, sent without waiting, fails there):
         * all of it was undone; again, each session alone, so that its failure is
         * its own. */
        for (size_t i = 0; i < n; i++) items[i].s->view_seq = 0;    /* rolled back */
        R->commit_retries++;
        a.careful = 1;
        rc = log_transact(R->conn, op_commit, &a);
    }
    if (rc) {
        for (size_t i = 0; i < n; i++) items[i].s->view_seq = 0;    /* rolled back */
        diag("info", "cannot commit the events of %zu session(s): %s (retrying)", n, errs_str(rc));
        free(items);
        return rc;
    }
    R->commits++;
    if (!a.released && R->nreleases && ++R->release_waits >= RELEASE_WAITS_MAX) {
        /* Commits that renew leases one after another (many replies streaming):
         * the leases given up go in a transaction of their own now and then. */
        commit_arg ra = {R, NULL, 0, 1, 0, 0};
        if (log_transact(R->conn, op_releases, &ra) == 0) a.released = ra.released;
    }
    if (a.released) {
        R->released += R->nreleases;
        R->nreleases = 0;
        R->release_waits = 0;
    }
    int64_t now = timefmt_now_ms();
    outbox_outcome *oc = NULL;
    size_t noc = 0;
    for (size_t i = 0; i < n; i++) {
        commit_item *it = &items[i];
        sess_t *s = it->s;
        size_t k = s->nout;
        switch (it->outcome) {
        case C_DONE:
            if (it->renewed) {
                R->renewed_commit++;
                s->lease.renew_ms = t0 + R->lease_ms / 3;
                s->lease.expires_ms = t0 + R->lease_ms;
            }
            /* Deltas alone change nothing this process has to decide on. */
            if (k && s->out_deltas_only && it->first.seq == s->known_seq) s->known_seq = it->first.seq + k;
            /* Its lease alone: writes queued meanwhile (a recording's) wait for its events. */
            if (k) outbox_clear(s);
            /* Past the events limit: the drive ends it (docs/agents.md, "Limits"). */
            if (R->session_events_max && s->view_seq && s->view.events >= (uint64_t)R->session_events_max)
                s->due = 1;
            break;
        case C_LOST:
            R->dropped += k;
            diag("info", "session %s: lease lost to another runner: %zu event(s) dropped (%llu in all)", s->id, k,
                         (unsigned long long)R->dropped);
            outbox_clear(s);
            break;
        case C_GONE:
            outbox_clear(s);
            s->dirty = 1;       /* its drive finds it gone and forgets it */
            break;
        default:
            if (k == 0) {       /* its lease, not renewed: the next commit tries again */
                diag("info", "session %s: lease: %s", s->id, errs_str(it->rc));
                it->outcome = C_DONE;
                break;
            }
            diag("info", "session %s: cannot append %s: %s", s->id, s->out[0].type, errs_str(it->rc));
            outbox_clear(s);
            s->dirty = 1;
            s->timer_ms = now + 1000;   /* look again soon: nothing else will */
            break;
        }
        if (it->outcome != C_DONE) {
            if (!oc && !(oc = calloc(n, sizeof *oc))) abort();
            oc[noc].s = s;
            oc[noc++].what = it->outcome;
        }
    }
    free(items);
    *outcomes = oc;
    *noutcomes = noc;
    return 0;
}

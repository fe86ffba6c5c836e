/* hub: live readers without a thread each.
 *
 * A responder thread serves a live read until the reader is at the tail; then,
 * instead of blocking on the stream, it hands the FastCGI connection to this
 * process's hub (hub_park) and goes back to accept(). The hub is one thread with
 * an epoll set of those connections. It writes FastCGI records itself: the
 * response's FCGI_STDOUT data, then an empty FCGI_STDOUT and FCGI_END_REQUEST when
 * the response ends. nginx sees an ordinary response that takes its time.
 *
 * Readers are grouped by stream. When lib/wake reports that a stream changed (the
 * wake sink), the hub reads it once for every distinct position (offset, framer and
 * its state, query, headers yet to send) among the group's readers, which is usually
 * once, frames the batch once through the readers' framer (frame_step, frame.h, the
 * same code the threads run, against a request whose body goes into memory) and
 * writes the same bytes to each. A group reads one batch per turn of the loop, so a
 * reader with a long way to go never delays the others by more than one batch. A connection whose socket is full keeps
 * the rest in its own buffer (at most one batch) and is skipped until it drains;
 * then it reads again from its own offset. No read transaction is held between
 * wake-ups.
 *
 * Timers: a long-poll's deadline (204), an SSE stream's lifetime and heartbeats.
 * Once a second the hub looks up the tokens its readers came with (one query per
 * distinct token): a reader whose token was revoked or has expired gets its
 * response's end (a long-poll its 204, an SSE stream its end), and its client's
 * next request is refused.
 * The hub sweeps its readers when the earliest of them is due. A reader that goes
 * away (nginx closes the connection when its client does) is noticed by epoll
 * (EPOLLRDHUP) and dropped at once. Memory per reader: this struct, its path and
 * query, and a socket; thousands per process cost a few MiB. */
#include "hub.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../lib/auth.h"
#include "../lib/wake.h"
#include "frame.h"
#include "metrics.h"
#include "wire.h"

#define HUB_BUCKETS 4096
#define HUB_CHANGED_MAX 4096    /* changed ids queued between two turns; beyond: all */
#define HUB_TRIM_BYTES (4u << 20) /* buffers drained after this much: memory back */
#define HUB_LINGER_MS 10000     /* an ended response whose client reads nothing: closed */
#define HUB_TOKEN_MS 1000       /* how often the readers' tokens are looked up again */

typedef struct group group;
typedef struct hconn hconn;

struct hconn {
    wire_t w;                   /* the connection and what waits to be sent on it */
    int reader;                 /* a live reader (else a finished response, ending) */
    frame_t f;                  /* how its response is framed, and how far it got */
    int64_t id;                 /* the stream */
    offset_kind kind;
    offset_t from;
    uint8_t digest[CHAIN_LEN];  /* the hash chain's at from (a long-poll's 204 says it) */
    char *path, *query;
    char *head;                 /* headers collected but not sent (a long-poll's) */
    size_t headlen;
    char token[AUTH_ID_LEN + 1]; /* the id of the token it came with ("": none) */
    int64_t deadline;           /* mono ms: long-poll 204, SSE end, or linger end */
    int64_t beat;               /* mono ms: next SSE heartbeat */
    int woken;                  /* the stream moved while the socket was full */
    int ending;                 /* the response is complete: close once pend drains */
    int dead;                   /* closed; freed at the end of the turn */
    int status;                 /* of the completed response; 0: the client left */
    size_t idx;                 /* in hub->all */
    unsigned pass;              /* last group pass that handled it */
    group *g;
    hconn *gprev, *gnext;       /* in the group */
    hconn *next;                /* park queue, or the dead list */
};

struct group {
    int64_t id;
    int64_t checked;            /* mono ms of the last check that the stream exists */
    unsigned pass;
    hconn *head;
    group *next;                /* bucket chain */
};

struct hub {
    const cfg_t *cfg;
    log_conn_t *conn;
    wake_t *wake;
    int ep, efd;
    pthread_t thread;
    pthread_mutex_t mu;         /* queue and changed, shared with parking threads */
    int stop;                   /* atomic */
    int closed;                 /* the thread has ended: parking closes (under mu) */
    int count;                  /* parked + queued (atomic) */
    hconn *queue;
    int64_t changed[HUB_CHANGED_MAX];
    size_t nchanged;
    int overflow;
    unsigned notes;             /* changes told (atomic): a turn's snapshot renewed (run_work) */

    /* Hub thread only. */
    hconn **all;
    size_t n, cap;
    hconn *dead;
    group *buckets[HUB_BUCKETS];
    int64_t due;
    int64_t tokens_checked;     /* mono ms of the last look-up of the readers' tokens */
    size_t pend_total;          /* bytes in all readers' pend: at most cfg->live_buffer_max */
    size_t pend_peak;           /* the most pend_total held since memory was last trimmed */
    int shed;                   /* shed() closed readers: h->all moved under a sweep */
    unsigned pass;
    buf_t batch, out;
    hconn **tmp;
    size_t tmpcap;
    int64_t *work;
    size_t nwork, workcap;
};

/* ---- writing ---------------------------------------------------------------------------- */

static void note_due(hub_t *h, int64_t t)
{
    if (t < h->due) h->due = t;
}

static void set_out(hub_t *h, hconn *c, int on)
{
    struct epoll_event ev = {EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0u), {.ptr = c}};
    epoll_ctl(h->ep, EPOLL_CTL_MOD, c->w.fd, &ev);
}

/* Write what waits. 0, or -1 if the connection is gone. A finished response that
 * makes progress gets more time to drain. */
static int conn_flush(hub_t *h, hconn *c)
{
    size_t before = wire_pending(&c->w);
    int rc = wire_send(&c->w);
    size_t after = wire_pending(&c->w);
    h->pend_total = h->pend_total - before + after;
    if (rc == WIRE_GONE) return -1;
    if (c->ending && after < before) {
        c->deadline = wake_now_ms() + HUB_LINGER_MS;
        note_due(h, c->deadline);
    }
    if (rc == WIRE_DONE) set_out(h, c, 0);
    return 0;
}

static void conn_close(hub_t *h, hconn *c);

/* The readers' buffers hold more than DSTREAM_LIVE_BUFFER_MAX: drop the readers that
 * are furthest behind (their clients reconnect from their last offset). */
static void shed(hub_t *h)
{
    while (h->pend_total > h->cfg->live_buffer_max) {
        hconn *worst = NULL;
        size_t most = 0;
        for (size_t i = 0; i < h->n; i++) {
            size_t p = wire_pending(&h->all[i]->w);
            if (p > most) {
                most = p;
                worst = h->all[i];
            }
        }
        if (!worst) break;
        worst->status = 0;
        metrics_slot *m = metrics_self();
        if (m) __atomic_add_fetch(&m->readers_shed, 1, __ATOMIC_RELAXED);
        conn_close(h, worst);
        h->shed = 1;
    }
}

/* Send data as FCGI_STDOUT records, and the end of the request if end. What the
 * socket does not take now waits in c->w. 0, or -1 if the connection is gone. */
static int conn_send(hub_t *h, hconn *c, const char *data, size_t len, int end)
{
    size_t before = wire_pending(&c->w);
    int rc = wire_write(&c->w, data, len, end);
    size_t after = wire_pending(&c->w);
    h->pend_total = h->pend_total - before + after;
    if (rc == WIRE_GONE) return -1;
    if (after && !before) set_out(h, c, 1);
    if (h->pend_total > h->cfg->live_buffer_max) shed(h);
    return c->dead ? -1 : 0;
}

/* ---- readers and groups ------------------------------------------------------------------ */

static group **bucket(hub_t *h, int64_t id)
{
    return &h->buckets[(uint64_t)id % HUB_BUCKETS];
}

static group *group_find(hub_t *h, int64_t id)
{
    for (group *g = *bucket(h, id); g; g = g->next)
        if (g->id == id) return g;
    return NULL;
}

static int group_add(hub_t *h, hconn *c)
{
    group *g = group_find(h, c->id);
    if (!g) {
        if (!(g = calloc(1, sizeof *g))) return -1;
        g->id = c->id;
        g->next = *bucket(h, c->id);
        *bucket(h, c->id) = g;
        if (h->wake) wake_sink_interest(h->wake, 1);
    }
    c->g = g;
    c->gprev = NULL;
    c->gnext = g->head;
    if (g->head) g->head->gprev = c;
    g->head = c;
    return 0;
}

static void group_remove(hub_t *h, hconn *c)
{
    group *g = c->g;
    if (!g) return;
    if (c->gprev) c->gprev->gnext = c->gnext;
    else g->head = c->gnext;
    if (c->gnext) c->gnext->gprev = c->gprev;
    c->g = NULL;
    if (g->head) return;
    for (group **pp = bucket(h, g->id); *pp; pp = &(*pp)->next) {
        if (*pp != g) continue;
        *pp = g->next;
        break;
    }
    free(g);
    if (h->wake) wake_sink_interest(h->wake, -1);
}

static void conn_free(hconn *c)
{
    wire_free(&c->w);
    free(c->path);
    free(c->query);
    free(c->head);
    free(c);
}

/* Close c now; its memory goes when the turn ends (epoll may still name it). */
static void conn_close(hub_t *h, hconn *c)
{
    if (c->dead) return;
    c->dead = 1;
    h->pend_total -= wire_pending(&c->w);
    epoll_ctl(h->ep, EPOLL_CTL_DEL, c->w.fd, NULL);
    close(c->w.fd);
    group_remove(h, c);
    h->all[c->idx] = h->all[--h->n];
    h->all[c->idx]->idx = c->idx;
    c->next = h->dead;
    h->dead = c;
    __atomic_sub_fetch(&h->count, 1, __ATOMIC_RELAXED);
    metrics_slot *m = metrics_self();
    if (m && c->reader) metrics_gauge(&m->hub_readers, -1);
    metrics_response(c->status);
}

/* A request for c whose response goes into h->out (emptied): a streamed response's
 * headers are out, a long-poll's start with those its thread had collected. */
static void mem_req(hub_t *h, hconn *c, req_t *r)
{
    memset(r, 0, sizeof *r);
    buf_reset(&h->out);
    req_mem_begin(r, &h->out, c->query, c->f.started);
    r->cfg = h->cfg;
    r->log = h->conn;
    if (!c->f.started && c->headlen) buf_append(&r->head, c->head, c->headlen);
}

/* Run one live step for c into h->out; c's position moves on. */
static int produce(hub_t *h, hconn *c)
{
    req_t r;
    mem_req(h, c, &r);
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = c->path;
    rr.kind = c->kind;
    rr.from = c->from;
    memcpy(rr.digest, c->digest, CHAIN_LEN);
    int st = frame_step(&c->f, &r, &rr, &h->batch);
    c->kind = rr.kind;
    c->from = rr.from;
    memcpy(c->digest, rr.digest, CHAIN_LEN);
    if (st == FRAME_END) c->status = r.status;
    req_end(&r);
    return st;
}

/* End c's response with what h->out holds (or nothing): the final records. */
static void conn_end(hub_t *h, hconn *c, const char *data, size_t len, int64_t now)
{
    if (!c->status) c->status = 200;    /* an SSE stream ends; a long-poll set its own */
    if (conn_send(h, c, data, len, 1) < 0) c->status = 0;
    if (c->status == 0 || !wire_pending(&c->w)) {
        conn_close(h, c);
        return;
    }
    c->ending = 1;
    c->deadline = now + HUB_LINGER_MS;
    note_due(h, c->deadline);
}

/* Hand c the bytes of a step whose outcome was st. Returns 1 if more is there. */
static int deliver(hub_t *h, hconn *c, int st, int64_t now)
{
    if (st == FRAME_END) {
        conn_end(h, c, h->out.p, h->out.len, now);
        return 0;
    }
    if (h->out.len) {
        if (conn_send(h, c, h->out.p, h->out.len, 0) < 0) {
            conn_close(h, c);
            return 0;
        }
        c->beat = now + h->cfg->heartbeat_ms;
    }
    if (st == FRAME_MORE) {
        if (!wire_pending(&c->w)) return 1;
        c->woken = 1;
    }
    return 0;
}

/* Room in h->tmp for an entry at index n: 0, or -1 (out of memory). */
static int tmp_room(hub_t *h, size_t n)
{
    if (n < h->tmpcap) return 0;
    size_t cap = h->tmpcap ? h->tmpcap * 2 : 256;
    hconn **t = realloc(h->tmp, cap * sizeof *t);
    if (!t) return -1;
    h->tmp = t;
    h->tmpcap = cap;
    return 0;
}

static int same_position(const hconn *a, const hconn *b)
{
    return a->f.fr == b->f.fr && a->f.envelopes == b->f.envelopes && a->f.text == b->f.text &&
           a->f.started == b->f.started && a->f.sent == b->f.sent && a->kind == b->kind &&
           memcmp(&a->f.ui, &b->f.ui, sizeof a->f.ui) == 0 && memcmp(&a->f.lg, &b->f.lg, sizeof a->f.lg) == 0 &&
           a->from.seq == b->from.seq && a->from.pos == b->from.pos &&
           strcmp(a->query, b->query) == 0 && a->headlen == b->headlen &&
           (!a->headlen || memcmp(a->head, b->head, a->headlen) == 0);
}

/* The stream of group id changed: read once per distinct position among its
 * readers and send each the same bytes. Returns 1 if a batch left more to read. */
static int wake_group(hub_t *h, int64_t id, int64_t now)
{
    int again = 0;
    {
        group *g = group_find(h, id);
        if (!g) return 0;
        size_t n = 0;
        for (hconn *c = g->head; c; c = c->gnext) {
            if (tmp_room(h, n)) break;
            if (c->ending) continue;
            if (wire_pending(&c->w)) {
                c->woken = 1;   /* it reads again when its socket drains */
                continue;
            }
            h->tmp[n++] = c;
        }
        /* g may be freed from here on (its last reader closing). */
        for (size_t i = 0; i < n; i++) {
            hconn *c = h->tmp[i];
            if (!c || c->dead) continue;
            hconn key = *c;     /* c's position before the step */
            int st = produce(h, c);
            for (size_t j = i + 1; j < n; j++) {
                hconn *d = h->tmp[j];
                if (!d || d->dead || !same_position(d, &key)) continue;
                h->tmp[j] = NULL;
                d->kind = c->kind;
                d->from = c->from;
                d->f = c->f;
                d->status = c->status;
                again |= deliver(h, d, st, now);
            }
            again |= deliver(h, c, st, now);
        }
    }
    return again;
}

/* Queue group id for wake_group in this turn. */
static void want_group(hub_t *h, int64_t id)
{
    if (h->nwork == h->workcap) {
        size_t cap = h->workcap ? h->workcap * 2 : 64;
        int64_t *t = realloc(h->work, cap * sizeof *t);
        if (!t) return;
        h->work = t;
        h->workcap = cap;
    }
    h->work[h->nwork++] = id;
}

/* A deadline passed or the process stops: long-polls get their 204, SSE its end. */
static void conn_finish(hub_t *h, hconn *c, int64_t now)
{
    if (c->ending) {
        c->status = 0;      /* its client never took the end */
        conn_close(h, c);
        return;
    }
    if (c->f.fr->streamed || !c->f.fr->end) {
        conn_end(h, c, NULL, 0, now);
        return;
    }
    req_t r;
    mem_req(h, c, &r);
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.from = c->from;
    memcpy(rr.digest, c->digest, CHAIN_LEN);
    c->f.fr->end(&c->f, &r, &rr);
    c->status = r.status;
    req_end(&r);
    if (wire_pending(&c->w)) {
        c->status = 0;
        conn_close(h, c);   /* a long-poll has nothing pending; never mind then */
        return;
    }
    conn_end(h, c, h->out.p, h->out.len, now);
}

/* A reader whose framer sends heartbeats while it waits. */
static int beats(const hconn *c)
{
    return c->reader && !c->ending && c->f.fr->heartbeat;
}

/* Deadlines and heartbeats. */
static void sweep(hub_t *h, int64_t now)
{
    int64_t due = now + 60000;
    int resweep = 0;
    h->shed = 0;
    for (size_t i = 0; i < h->n;) {
        hconn *c = h->all[i];
        if (now >= c->deadline) {
            conn_finish(h, c, now);
        } else if (beats(c) && !wire_pending(&c->w) && now >= c->beat) {
            /* A stream deleted under its readers ends their responses. */
            group *g = c->g;
            int gone = 0;
            if (g->checked != now) {
                log_info info;
                g->checked = now;
                if (log_head(h->conn, c->path, &info) || info.id != c->id) gone = 1;
            }
            if (gone) {
                /* Their places in h->all move: sweep again next turn. */
                for (hconn *d = g->head; d;) {
                    hconn *next = d->gnext;
                    if (!d->ending) conn_finish(h, d, now);
                    d = next;
                }
                resweep = 1;
            } else {
                req_t r;
                mem_req(h, c, &r);
                c->f.fr->heartbeat(&c->f, &r);
                req_end(&r);
                if (conn_send(h, c, h->out.p, h->out.len, 0) < 0) conn_close(h, c);
                else c->beat = now + h->cfg->heartbeat_ms;
            }
        }
        if (i < h->n && h->all[i] == c && !c->dead) {
            if (c->deadline < due) due = c->deadline;
            if (beats(c) && c->beat < due) due = c->beat;
            i++;
        }
    }
    h->due = resweep || h->shed ? now : due;
    h->shed = 0;
}

static int by_token(const void *a, const void *b)
{
    return strcmp((*(hconn *const *)a)->token, (*(hconn *const *)b)->token);
}

/* End the responses of the readers whose token no longer stands (revoked, expired).
 * A token the database cannot answer for keeps its readers until the next look-up. */
static void check_tokens(hub_t *h, int64_t now)
{
    size_t n = 0;
    h->tokens_checked = now;
    for (size_t i = 0; i < h->n; i++) {
        hconn *c = h->all[i];
        if (!c->reader || c->ending || c->dead || !c->token[0]) continue;
        if (tmp_room(h, n)) break;
        h->tmp[n++] = c;
    }
    if (!n) return;
    qsort(h->tmp, n, sizeof *h->tmp, by_token);
    /* conn_finish may close a reader: h->all moves, h->tmp does not. */
    for (size_t i = 0, j; i < n; i = j) {
        int standing = auth_token_current(h->conn, h->tmp[i]->token);
        for (j = i; j < n && !strcmp(h->tmp[j]->token, h->tmp[i]->token); j++) {}
        if (standing != 0) continue;
        for (size_t k = i; k < j; k++)
            if (!h->tmp[k]->dead && !h->tmp[k]->ending) conn_finish(h, h->tmp[k], now);
    }
}

static int adopt(hub_t *h, hconn *c, int64_t now)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        hconn **t = realloc(h->all, cap * sizeof *t);
        if (!t) return -1;
        h->all = t;
        h->cap = cap;
    }
    int fl = fcntl(c->w.fd, F_GETFL);
    if (fl < 0 || fcntl(c->w.fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
    size_t pend = wire_pending(&c->w);
    struct epoll_event ev = {EPOLLIN | EPOLLRDHUP | (pend ? EPOLLOUT : 0u), {.ptr = c}};
    if (epoll_ctl(h->ep, EPOLL_CTL_ADD, c->w.fd, &ev) < 0) return -1;
    if (c->reader && group_add(h, c)) {
        epoll_ctl(h->ep, EPOLL_CTL_DEL, c->w.fd, NULL);
        return -1;
    }
    c->idx = h->n;
    h->all[h->n++] = c;
    h->pend_total += pend;
    note_due(h, c->deadline);
    if (!c->reader) return 0;
    metrics_slot *m = metrics_self();
    if (m) metrics_gauge(&m->hub_readers, 1);
    c->beat = now + h->cfg->heartbeat_ms;
    if (beats(c)) note_due(h, c->beat);
    /* Read once more: a commit may have come between the thread's read and now
     * (or, if the socket is full, once it drains). */
    want_group(h, c->id);
    return 0;
}

static void on_event(hub_t *h, hconn *c, uint32_t evs, int64_t now)
{
    if (c->dead) return;
    if (evs & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
        c->status = 0;      /* the client left */
        conn_close(h, c);
        return;
    }
    if (evs & EPOLLIN) {
        char tmp[512];
        ssize_t r = read(c->w.fd, tmp, sizeof tmp);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            c->status = 0;
            conn_close(h, c);
            return;
        }
    }
    if (evs & EPOLLOUT) {
        if (conn_flush(h, c) < 0) {
            c->status = 0;
            conn_close(h, c);
            return;
        }
        if (wire_pending(&c->w)) return;
        if (c->ending) {
            conn_close(h, c);
        } else if (c->woken) {
            c->woken = 0;
            want_group(h, c->id);
        }
    }
    (void)now;
}

static void sink(void *ud, int64_t id)
{
    hub_t *h = ud;
    pthread_mutex_lock(&h->mu);
    /* The thread is told once a batch: a change queued behind others goes with
     * them (the first one's write wakes it, and its next intake takes them all).
     * A commit of 200 sessions' deltas was 200 writes of the eventfd, one a delta
     * delivered: the pool's most frequent system call. */
    int told = h->nchanged > 0 || h->overflow;
    __atomic_add_fetch(&h->notes, 1, __ATOMIC_RELAXED);
    if (id >= 0 && h->nchanged < HUB_CHANGED_MAX) h->changed[h->nchanged++] = id;
    else h->overflow = 1;
    pthread_mutex_unlock(&h->mu);
    if (told) return;
    uint64_t one = 1;
    ssize_t w = write(h->efd, &one, sizeof one);
    (void)w;
}

/* Take parked readers and changed streams from the other threads. */
static void intake(hub_t *h, int64_t now)
{
    pthread_mutex_lock(&h->mu);
    hconn *q = h->queue;
    h->queue = NULL;
    for (size_t i = 0; i < h->nchanged; i++) want_group(h, h->changed[i]);
    h->nchanged = 0;
    int all = h->overflow;
    h->overflow = 0;
    pthread_mutex_unlock(&h->mu);
    if (all)
        for (size_t i = 0; i < h->n; i++) want_group(h, h->all[i]->id);
    while (q) {
        hconn *next = q->next;
        if (adopt(h, q, now)) {
            close(q->w.fd);
            conn_free(q);
            __atomic_sub_fetch(&h->count, 1, __ATOMIC_RELAXED);
        }
        q = next;
    }
    /* Handed-over responses brought what waits for their sockets. */
    if (h->pend_total > h->cfg->live_buffer_max) {
        shed(h);
        h->due = now;   /* h->all moved: sweep again */
    }
}

/* The groups h->work[i..n) are about to read: ask the database for the first
 * reader's read of each (most groups have one position) ahead, together
 * (log_read_ahead: one round trip for them all on PostgreSQL, instead of one
 * each). Returns the index after the last group asked for (n where the engine
 * reads none ahead: SQLite, whose turn shares a read transaction instead). */
static size_t read_ahead(hub_t *h, size_t i, size_t n, unsigned pass)
{
    log_read_req rr[LOG_READ_AHEAD_MAX];
    size_t k = 0;
    if (!log_reads_ahead(h->conn)) return n;
    for (; i < n && k < LOG_READ_AHEAD_MAX; i++) {
        group *g = group_find(h, h->work[i]);
        if (!g || g->pass == pass) continue;
        for (hconn *c = g->head; c; c = c->gnext) {
            if (c->ending || c->dead || wire_pending(&c->w)) continue;
            memset(&rr[k], 0, sizeof rr[k]);
            rr[k].path = c->path;
            rr[k].kind = c->kind;
            rr[k].from = c->from;
            rr[k].max_bytes = h->cfg->read_max;
            k++;
            break;
        }
    }
    if (k < 2) return i;        /* one read is as well made when its turn comes */
    size_t got = log_read_ahead(h->conn, rr, k);
    metrics_slot *m = metrics_self();
    if (m && got) __atomic_add_fetch(&m->reads_ahead, got, __ATOMIC_RELAXED);
    return i;
}

/* Read for every group queued; a group that has more to read goes again next turn
 * (after the sockets and the other groups had theirs). */
static void run_work(hub_t *h, int64_t now)
{
    unsigned pass = ++h->pass;
    size_t n = h->nwork, ahead = 0;
    /* The turn's reads share a snapshot (on SQLite one read transaction: log_read_batch),
     * taken again once a commit was told meanwhile: the groups read after it see it
     * (as each read alone did), those read before are queued again by its note. */
    unsigned seen = __atomic_load_n(&h->notes, __ATOMIC_RELAXED);
    int batch = n > 1 && log_read_batch(h->conn, 1) == 0;
    for (size_t i = 0; i < n; i++) {
        unsigned notes = __atomic_load_n(&h->notes, __ATOMIC_RELAXED);
        if (batch && notes != seen) {
            seen = notes;
            log_read_batch(h->conn, 0);
            batch = log_read_batch(h->conn, 1) == 0;
        }
        if (i == ahead) ahead = read_ahead(h, i, n, pass);
        int64_t id = h->work[i];
        group *g = group_find(h, id);
        if (!g || g->pass == pass) continue;
        g->pass = pass;
        if (wake_group(h, id, now)) want_group(h, id);
    }
    log_read_ahead(h->conn, NULL, 0);
    if (batch) log_read_batch(h->conn, 0);
    /* (memmove from a NULL array, even of 0 bytes, is undefined behaviour.) */
    if (h->nwork > n) memmove(h->work, h->work + n, (h->nwork - n) * sizeof *h->work);
    h->nwork -= n;
}

static void reap(hub_t *h)
{
    while (h->dead) {
        hconn *c = h->dead;
        h->dead = c->next;
        conn_free(c);
    }
}

/* Once the readers' buffers have drained after holding a lot (clients that did not
 * read, then left), give the freed memory back to the system: glibc keeps it in its
 * arenas otherwise, and the pool's RSS would stay at its peak. */
static void trim(hub_t *h)
{
    if (h->pend_total > h->pend_peak) h->pend_peak = h->pend_total;
    if (h->pend_total || h->pend_peak < HUB_TRIM_BYTES) return;
    h->pend_peak = 0;
    malloc_trim(0);
}

static void *hub_main(void *arg)
{
    hub_t *h = arg;
    struct epoll_event evs[256];
    while (!__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) {
        int64_t now = wake_now_ms();
        int64_t wait = h->nwork ? 0 : h->n ? h->due - now : 1000;
        int timeout = wait < 0 ? 0 : wait > 1000 ? 1000 : (int)wait;
        int k = epoll_wait(h->ep, evs, 256, timeout);
        now = wake_now_ms();
        for (int i = 0; i < k; i++) {
            if (evs[i].data.ptr == NULL) {
                uint64_t v;
                ssize_t r = read(h->efd, &v, sizeof v);
                (void)r;
                continue;
            }
            on_event(h, evs[i].data.ptr, evs[i].events, now);
        }
        intake(h, now);
        run_work(h, now);
        if (now >= h->due) sweep(h, now);
        if (now - h->tokens_checked >= HUB_TOKEN_MS) check_tokens(h, now);
        reap(h);
        trim(h);
    }
    /* Stopping: every response ends properly, as far as the sockets take it. */
    pthread_mutex_lock(&h->mu);
    h->closed = 1;
    pthread_mutex_unlock(&h->mu);
    int64_t now = wake_now_ms();
    intake(h, now);
    h->nwork = 0;
    while (h->n) {
        hconn *c = h->all[h->n - 1];
        if (!c->ending) conn_finish(h, c, now);
        if (!c->dead) conn_close(h, c);
    }
    reap(h);
    return NULL;
}

/* ---- the interface ------------------------------------------------------------------------ */

hub_t *hub_start(const cfg_t *cfg, log_t *log, struct wake *wake, char *err, size_t errlen)
{
    hub_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->cfg = cfg;
    h->wake = wake;
    h->ep = h->efd = -1;
    h->due = INT64_MAX;
    pthread_mutex_init(&h->mu, NULL);
    buf_init(&h->batch, cfg->read_max + (1 << 20));
    buf_init(&h->out, 0);
    if (!(h->conn = log_conn_open(log, err, errlen))) goto fail;
    if ((h->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (h->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        snprintf(err, errlen, "epoll/eventfd: %s", strerror(errno));
        goto fail;
    }
    struct epoll_event ev = {EPOLLIN, {.ptr = NULL}};
    if (epoll_ctl(h->ep, EPOLL_CTL_ADD, h->efd, &ev) < 0) {
        snprintf(err, errlen, "epoll_ctl: %s", strerror(errno));
        goto fail;
    }
    if (wake) wake_sink(wake, sink, h);
    if (pthread_create(&h->thread, NULL, hub_main, h)) {
        snprintf(err, errlen, "pthread_create: %s", strerror(errno));
        if (wake) wake_sink(wake, NULL, NULL);
        goto fail;
    }
    return h;
fail:
    if (h->ep >= 0) close(h->ep);
    if (h->efd >= 0) close(h->efd);
    log_conn_close(h->conn);
    buf_free(&h->batch);
    buf_free(&h->out);
    pthread_mutex_destroy(&h->mu);
    free(h);
    return NULL;
}

void hub_stop(hub_t *h)
{
    if (!h) return;
    __atomic_store_n(&h->stop, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    ssize_t w = write(h->efd, &one, sizeof one);
    (void)w;
    pthread_join(h->thread, NULL);
    if (h->wake) wake_sink(h->wake, NULL, NULL);
    /* The rest stays for responder threads that may still try hub_park (it then
     * finds the hub closed); the process exits after this. */
}

/* Take a place in the hub (the count is what DSTREAM_LIVE_MAX bounds), or -1. */
static int reserve(hub_t *h, req_t *r)
{
    if (!r->be->detach || __atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) return -1;
    if (__atomic_fetch_add(&h->count, 1, __ATOMIC_RELAXED) >= h->cfg->live_max) {
        __atomic_sub_fetch(&h->count, 1, __ATOMIC_RELAXED);
        return -1;
    }
    return 0;
}

/* Queue c, whose connection r gave up, for the hub thread. */
static void hand(hub_t *h, req_t *r, hconn *c)
{
    /* The thread writes nothing more for this request. */
    r->head_sent = 1;
    r->gone = 1;
    r->parked = 1;
    pthread_mutex_lock(&h->mu);
    int closed = h->closed;
    if (!closed) {
        c->next = h->queue;
        h->queue = c;
    }
    pthread_mutex_unlock(&h->mu);
    if (closed) {
        /* The process is stopping and the hub is gone: nginx sees the end. */
        close(c->w.fd);
        conn_free(c);
        return;
    }
    uint64_t one = 1;
    ssize_t w = write(h->efd, &one, sizeof one);
    (void)w;
}

int hub_park(hub_t *h, req_t *r, const log_read_req *rr, const frame_t *f, int64_t deadline_ms)
{
    if (reserve(h, r)) return -1;
    hconn *c = calloc(1, sizeof *c);
    if (c) {
        c->path = strdup(rr->path);
        c->query = strdup(r->query ? r->query : "");
        if (!f->started && r->head.len && (c->head = malloc(r->head.len))) {
            memcpy(c->head, r->head.p, r->head.len);
            c->headlen = r->head.len;
        }
    }
    if (!c || !c->path || !c->query || (!f->started && r->head.len && !c->head) ||
        r->be->detach(r, &c->w) < 0) {
        if (c) conn_free(c);
        __atomic_sub_fetch(&h->count, 1, __ATOMIC_RELAXED);
        return -1;
    }
    if (r->auth) memcpy(c->token, r->auth->id, sizeof c->token);
    c->reader = 1;
    c->f = *f;
    c->id = f->id;
    c->kind = rr->kind;
    c->from = rr->from;
    memcpy(c->digest, rr->digest, CHAIN_LEN);
    c->deadline = deadline_ms;
    hand(h, r, c);
    return 0;
}

int hub_finish(hub_t *h, req_t *r)
{
    if (reserve(h, r)) return -1;
    hconn *c = calloc(1, sizeof *c);
    if (!c || r->be->detach(r, &c->w) < 0) {
        free(c);
        __atomic_sub_fetch(&h->count, 1, __ATOMIC_RELAXED);
        return -1;
    }
    c->ending = 1;
    c->status = r->gone ? 0 : r->status;
    c->deadline = wake_now_ms() + HUB_LINGER_MS;
    hand(h, r, c);
    return 0;
}

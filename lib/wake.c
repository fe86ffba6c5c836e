/* wake: noticing commits made by any process.
 *
 * Live readers (long-poll, SSE) must learn that their stream advanced, whichever
 * process wrote it: another responder, the runner, the CLI. SQLite offers no
 * cross-process notification, and a reader must not hold a read transaction while
 * it waits (the WAL could not be checkpointed). So each process runs one watcher
 * thread, and waiting threads block in poll() on an eventfd of their own.
 *
 * Detecting a commit is the engine's (its change feed, lib/store.h): a descriptor
 * that becomes readable when something has committed (SQLite: a signal its
 * connections write after each commit, once it is visible; PostgreSQL: a NOTIFY),
 * and a cheap look that says whether anything did and which streams changed. The
 * watcher looks once per event, never again until the next one: nothing to poll
 * for. A process where nobody waits does not look at all. Commits of this process
 * poke the watcher directly (log_on_commit), and the feed tells their own events
 * apart, so they are looked at once. A fallback look once a second (WAKE_IDLE_MS)
 * covers commits that signal nothing (a program that is not dstream); without a
 * descriptor (DSTREAM_WAKE=poll) the watcher looks every poll interval instead.
 *
 * The waiters of each stream live in a hash table keyed by stream id; a waiter
 * woken re-reads the log itself. */
#include "wake.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

#define WAKE_BUCKETS 4096
#define WAKE_ANY (-1)           /* waiter id of wake_watch_any */
#define WAKE_IDLE_MS 1000       /* fallback poll when nothing happens */

struct wake_waiter {
    wake_t *w;
    int efd;
    int64_t id;                 /* 0: not watching */
    wake_waiter_t *prev, *next; /* in bucket id % WAKE_BUCKETS */
};

struct wake {
    log_t *log;
    store_feed *feed;           /* the engine's change feed */
    int pokefd;
    int stop;
    wake_opts opts;
    pthread_t thread;
    pthread_mutex_t mu;
    wake_waiter_t *buckets[WAKE_BUCKETS];
    wake_waiter_t *any;         /* waiters on every change (wake_watch_any) */
    void (*sink)(void *, int64_t);  /* wake_sink */
    void *sink_ud;
    int changed;                /* the last check found changes */
    int nids;                   /* waiters on one stream (wake_watch), under mu */
    int nwaiting;               /* waiters registered (atomic) */
    wake_stats st;
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t wake_now_ms(void)
{
    return now_us() / 1000;
}

static void poke(int fd)
{
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    (void)n;    /* EAGAIN: already pending, which is all we need */
}

static void on_local_commit(void *ud)
{
    wake_t *w = ud;
    if (__atomic_load_n(&w->nwaiting, __ATOMIC_RELAXED) > 0) poke(w->pokefd);
}

/* Waiters come and go. The first one wakes the watcher, which then starts watching
 * the file (and looks once, for commits made before the watch). */
static void interest(wake_t *w, int delta)
{
    if (__atomic_fetch_add(&w->nwaiting, delta, __ATOMIC_RELAXED) == 0 && delta > 0) poke(w->pokefd);
}

static void wake_id(void *ud, int64_t id, const char *path)
{
    wake_t *w = ud;
    (void)path;
    w->changed = 1;
    pthread_mutex_lock(&w->mu);
    /* -1: the feed cannot tell what changed (it reconnected): every waiter looks;
     * else the waiters of that stream. */
    int first = id < 0 ? 0 : (int)(id % WAKE_BUCKETS), last = id < 0 ? WAKE_BUCKETS - 1 : first;
    for (int i = first; i <= last; i++)
        for (wake_waiter_t *wt = w->buckets[i]; wt; wt = wt->next) {
            if (id >= 0 && wt->id != id) continue;
            poke(wt->efd);
            __atomic_add_fetch(&w->st.wakeups, 1, __ATOMIC_RELAXED);
        }
    void (*sink)(void *, int64_t) = w->sink;
    void *sink_ud = w->sink_ud;
    pthread_mutex_unlock(&w->mu);
    if (sink) {
        sink(sink_ud, id);
        __atomic_add_fetch(&w->st.wakeups, 1, __ATOMIC_RELAXED);
    }
}

/* Whether nobody wants changes by stream (only waiters on every one): asked by the
 * feed's skip once it knows where the changes end, so that a waiter that comes
 * meanwhile (and reads its stream after) is told of every later change. */
static int alone(void *ud)
{
    wake_t *w = ud;
    pthread_mutex_lock(&w->mu);
    int a = w->nids == 0 && w->sink == NULL;
    pthread_mutex_unlock(&w->mu);
    return a;
}

/* Look for changes; returns 1 if the database moved. */
static int check(wake_t *w)
{
    const store_feed_ops *feed = w->log->engine->feed;
    __atomic_add_fetch(&w->st.looks, 1, __ATOMIC_RELAXED);
    if (!feed->moved(w->feed)) return 0;
    __atomic_add_fetch(&w->st.checks, 1, __ATOMIC_RELAXED);
    w->changed = 0;
    /* Only waiters on every stream: which streams changed need not be read. */
    int k = feed->skip ? feed->skip(w->feed, alone, w) : -1;
    if (k >= 0) {
        w->changed = k;
        __atomic_add_fetch(&w->st.skips, 1, __ATOMIC_RELAXED);
    } else {
        feed->changes(w->feed, wake_id, w);
    }
    if (w->changed) {
        pthread_mutex_lock(&w->mu);
        for (wake_waiter_t *wt = w->any; wt; wt = wt->next) {
            poke(wt->efd);
            __atomic_add_fetch(&w->st.wakeups, 1, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&w->mu);
    }
    return 1;
}

static void *watch_main(void *arg)
{
    wake_t *w = arg;
    const store_feed_ops *feed = w->log->engine->feed;
    int fd = w->opts.inotify ? feed->fd(w->feed) : -1;
    int watching = 0;
    for (;;) {
        /* While nobody waits in this process the feed is not watched at all: a busy
         * writer elsewhere then costs this thread nothing. */
        int idle = __atomic_load_n(&w->nwaiting, __ATOMIC_RELAXED) == 0;
        if (idle && watching) {
            feed->watch(w->feed, 0);
            watching = 0;
        } else if (!idle && !watching && fd >= 0) {
            feed->watch(w->feed, 1);
            watching = 1;
            check(w);
        }
        struct pollfd pf[2] = {{w->pokefd, POLLIN, 0}, {fd, POLLIN, 0}};
        /* Polling mode: no descriptor, a fixed interval. */
        int64_t wait_us = fd < 0 ? w->opts.poll_us : (int64_t)WAKE_IDLE_MS * 1000;
        struct timespec ts = {(time_t)(wait_us / 1000000), (long)(wait_us % 1000000) * 1000};
        int n = ppoll(pf, fd >= 0 ? 2 : 1, &ts, NULL);
        if (__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) break;
        int look = n == 0;      /* the fallback poll */
        if (n > 0 && (pf[0].revents & POLLIN)) {
            /* A commit of this process: already visible, one check finds it. */
            uint64_t v;
            ssize_t r = read(w->pokefd, &v, sizeof v);
            (void)r;
            look = 1;
        }
        if (n > 0 && fd >= 0 && (pf[1].revents & POLLIN) && feed->event(w->feed)) {
            /* A commit of another process is visible (or the feed lost track). */
            __atomic_add_fetch(&w->st.events, 1, __ATOMIC_RELAXED);
            look = 1;
        }
        /* Nobody waits in this process: nothing to look for. */
        if (__atomic_load_n(&w->nwaiting, __ATOMIC_RELAXED) == 0) continue;
        /* A second without events: make sure the feed still watches what the
         * others signal (a file replaced), then look. */
        if (n == 0 && watching) feed->watch(w->feed, 1);
        if (look) check(w);
    }
    return NULL;
}

wake_t *wake_start(log_t *log, const wake_opts *opts, char *err, size_t errlen)
{
    wake_t *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    w->log = log;
    w->opts.inotify = opts ? opts->inotify : 1;
    w->opts.poll_us = opts && opts->poll_us > 0 ? opts->poll_us : 1000;
    w->pokefd = -1;
    pthread_mutex_init(&w->mu, NULL);
    if (!(w->feed = log->engine->feed->open(log, err, errlen))) goto fail;
    if ((w->pokefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        snprintf(err, errlen, "eventfd: %s", strerror(errno));
        goto fail;
    }
    log_on_commit(log, on_local_commit, w);
    if (pthread_create(&w->thread, NULL, watch_main, w)) {
        snprintf(err, errlen, "pthread_create: %s", strerror(errno));
        goto fail;
    }
    return w;
fail:
    log_on_commit(log, NULL, NULL);
    if (w->pokefd >= 0) close(w->pokefd);
    if (w->feed) log->engine->feed->close(w->feed);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
}

void wake_stop(wake_t *w)
{
    if (!w) return;
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
    poke(w->pokefd);
    pthread_join(w->thread, NULL);
    log_on_commit(w->log, NULL, NULL);
    close(w->pokefd);
    w->log->engine->feed->close(w->feed);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

wake_waiter_t *wake_waiter_new(wake_t *w)
{
    wake_waiter_t *wt = calloc(1, sizeof *wt);
    if (!wt) return NULL;
    wt->w = w;
    if ((wt->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        free(wt);
        return NULL;
    }
    return wt;
}

void wake_waiter_free(wake_waiter_t *wt)
{
    if (!wt) return;
    wake_unwatch(wt);
    close(wt->efd);
    free(wt);
}

int wake_waiter_fd(const wake_waiter_t *wt)
{
    return wt->efd;
}

void wake_clear(wake_waiter_t *wt)
{
    uint64_t v;
    ssize_t n = read(wt->efd, &v, sizeof v);
    (void)n;
}

void wake_watch(wake_waiter_t *wt, int64_t id)
{
    wake_t *w = wt->w;
    wake_unwatch(wt);
    wake_clear(wt);
    pthread_mutex_lock(&w->mu);
    wake_waiter_t **head = &w->buckets[(uint64_t)id % WAKE_BUCKETS];
    wt->id = id;
    w->nids++;
    interest(w, 1);
    wt->prev = NULL;
    wt->next = *head;
    if (*head) (*head)->prev = wt;
    *head = wt;
    pthread_mutex_unlock(&w->mu);
}

void wake_watch_any(wake_waiter_t *wt)
{
    wake_t *w = wt->w;
    wake_unwatch(wt);
    wake_clear(wt);
    pthread_mutex_lock(&w->mu);
    wt->id = WAKE_ANY;
    interest(w, 1);
    wt->prev = NULL;
    wt->next = w->any;
    if (w->any) w->any->prev = wt;
    w->any = wt;
    pthread_mutex_unlock(&w->mu);
}

void wake_unwatch(wake_waiter_t *wt)
{
    wake_t *w = wt->w;
    if (!wt->id) return;
    pthread_mutex_lock(&w->mu);
    if (wt->prev) wt->prev->next = wt->next;
    else if (wt->id == WAKE_ANY) w->any = wt->next;
    else w->buckets[(uint64_t)wt->id % WAKE_BUCKETS] = wt->next;
    if (wt->next) wt->next->prev = wt->prev;
    wt->prev = wt->next = NULL;
    if (wt->id != WAKE_ANY) w->nids--;
    wt->id = 0;
    interest(w, -1);
    pthread_mutex_unlock(&w->mu);
}

void wake_all(wake_t *w)
{
    pthread_mutex_lock(&w->mu);
    for (int i = 0; i < WAKE_BUCKETS; i++)
        for (wake_waiter_t *wt = w->buckets[i]; wt; wt = wt->next) poke(wt->efd);
    for (wake_waiter_t *wt = w->any; wt; wt = wt->next) poke(wt->efd);
    pthread_mutex_unlock(&w->mu);
}

void wake_sink(wake_t *w, void (*fn)(void *ud, int64_t id), void *ud)
{
    pthread_mutex_lock(&w->mu);
    w->sink = fn;
    w->sink_ud = ud;
    pthread_mutex_unlock(&w->mu);
}

void wake_sink_interest(wake_t *w, int delta)
{
    interest(w, delta);
}

void wake_get_stats(wake_t *w, wake_stats *st)
{
    pthread_mutex_lock(&w->mu);
    *st = w->st;
    st->events = __atomic_load_n(&w->st.events, __ATOMIC_RELAXED);
    st->looks = __atomic_load_n(&w->st.looks, __ATOMIC_RELAXED);
    st->checks = __atomic_load_n(&w->st.checks, __ATOMIC_RELAXED);
    st->wakeups = __atomic_load_n(&w->st.wakeups, __ATOMIC_RELAXED);
    st->skips = __atomic_load_n(&w->st.skips, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&w->mu);
}

int wake_follow(log_t *log, log_conn_t *c, log_read_req *rr, log_msg_fn fn,
                void (*caught_up)(void *ud), void *ud, int follow, const volatile sig_atomic_t *stop,
                char *err, size_t errlen)
{
    wake_t *w = NULL;
    wake_waiter_t *wt = NULL;
    int rc = 0;
    while (!*stop) {
        rr->max_bytes = 1 << 20;
        if ((rc = log_read(c, rr, fn, ud))) break;
        if (caught_up) caught_up(ud);
        rr->kind = OFFSET_AT;
        rr->from = rr->next;
        if (!rr->up_to_date) continue;
        if (!follow || rr->info.closed) break;
        if (!wt) {
            /* Watch, then read once more: a commit may have come in between. */
            if (!(w = wake_start(log, NULL, err, errlen)) || !(wt = wake_waiter_new(w))) {
                if (w) snprintf(err, errlen, "out of descriptors");
                rc = LOG_EIO;
                break;
            }
            wake_watch(wt, rr->info.id);
            continue;
        }
        /* Woken, or at least every WAKE_FOLLOW_LOOK_MS to look again (a deleted
         * stream ends the follow; a signal interrupts the poll). */
        struct pollfd pf = {wake_waiter_fd(wt), POLLIN, 0};
        if (poll(&pf, 1, WAKE_FOLLOW_LOOK_MS) > 0) wake_clear(wt);
    }
    wake_waiter_free(wt);
    wake_stop(w);
    return rc;
}

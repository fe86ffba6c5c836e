/* wake: one watcher per process that notices commits from any process and wakes
 * exactly the threads waiting on the streams that changed. See wake.c. */
#ifndef DSTREAM_WAKE_H
#define DSTREAM_WAKE_H

#include <signal.h>
#include <stdint.h>

#include "log.h"

typedef struct wake wake_t;
typedef struct wake_waiter wake_waiter_t;

typedef struct wake_stats {
    uint64_t events;     /* file-watch events received */
    uint64_t looks;      /* cheap looks whether anything committed (SQLite: PRAGMA
                          * data_version): one per event, poke or fallback poll */
    uint64_t checks;     /* change queries run */
    uint64_t wakeups;    /* waiters woken */
    uint64_t skips;      /* checks that moved past what changed without asking which
                          * (nobody watched a stream by id: the runner's process) */
} wake_stats;

typedef struct wake_opts {
    int inotify;         /* 1 (default): wait on the engine's descriptor (SQLite: inotify
                          * on the commit signal file, DB-wake); 0: poll only */
    int poll_us;         /* poll interval without inotify (default 1000) */
} wake_opts;

/* Start the watcher thread for log's database, on its engine's change feed. opts
 * may be NULL for the defaults. Returns NULL with err. */
wake_t *wake_start(log_t *log, const wake_opts *opts, char *err, size_t errlen);
/* Stop the thread and free the watcher (after every waiter is freed). */
void wake_stop(wake_t *w);

/* A thread's waiter: an eventfd that becomes readable when a watched stream changes.
 * Returns NULL on failure (out of file descriptors). */
wake_waiter_t *wake_waiter_new(wake_t *w);
void wake_waiter_free(wake_waiter_t *wt);
/* The descriptor to poll() for POLLIN. */
int wake_waiter_fd(const wake_waiter_t *wt);
/* Watch stream id (one at a time per waiter); clears any pending wake-up. Call
 * before re-reading the stream, so that no commit falls between read and wait. */
void wake_watch(wake_waiter_t *wt, int64_t id);
/* Watch every stream: woken after any commit that changed one (the runner). */
void wake_watch_any(wake_waiter_t *wt);
/* Stop watching. */
void wake_unwatch(wake_waiter_t *wt);
/* Consume a pending wake-up. */
void wake_clear(wake_waiter_t *wt);
/* Wake every waiter (shutdown: long responses should end). */
void wake_all(wake_t *w);

/* A sink: fn(ud, id) is called on the watcher thread for every stream that changed,
 * while the sink declares interest (wake_sink_interest > 0); id -1 when any stream
 * may have changed (the engine's feed lost track, e.g. reconnected). One per process: the
 * live hub (fcgi/hub.c), which keeps thousands of readers without a thread each. */
void wake_sink(wake_t *w, void (*fn)(void *ud, int64_t id), void *ud);
/* Add delta (may be negative) to the streams the sink watches; checks run while
 * anyone (a waiter or the sink) watches. */
void wake_sink_interest(wake_t *w, int delta);

void wake_get_stats(wake_t *w, wake_stats *st);

/* A reader that follows one stream (dstream tail, dstream --db events --follow):
 * read rr->path from rr->kind / rr->from, 1 MiB a page, fn for every message and
 * caught_up(ud) (may be NULL) after each page; once up to date, if follow, wait for
 * more with a watcher of its own on log's database (started then, stopped on
 * return) until the stream is closed or *stop becomes nonzero (a signal handler's
 * flag), looking again at least every WAKE_FOLLOW_LOOK_MS. rr->next is where it
 * stopped. Returns 0, log_read's error (fn's nonzero return among them;
 * LOG_ENOTFOUND for a stream deleted meanwhile), or LOG_EIO when the watcher could
 * not start (err says why). */
#define WAKE_FOLLOW_LOOK_MS 1000
int wake_follow(log_t *log, log_conn_t *c, log_read_req *rr, log_msg_fn fn,
                void (*caught_up)(void *ud), void *ud, int follow, const volatile sig_atomic_t *stop,
                char *err, size_t errlen);

/* The monotonic clock in milliseconds, the one waits and their deadlines use. */
int64_t wake_now_ms(void);

#endif

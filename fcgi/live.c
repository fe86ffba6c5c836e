/* live: the reader loop of a responder thread.
 *
 * Every read, catch-up or live, is the same loop: read a batch from the current
 * offset and write it through the request's framer (frame_step). A catch-up is done
 * after one step. A live read that has nothing new, or whose client does not take
 * what was written, is handed to the process's hub (hub_park) with what waits to be
 * sent: no thread waits on a client. Only when the hub cannot take it (it is full,
 * or plain CGI has none) does the thread wait itself: it registers on the stream
 * with the process's watcher (lib/wake), reads once more (a commit may have landed
 * in between), then polls the waiter's eventfd and the connection, writing the
 * framer's heartbeats. No read transaction is held while waiting. A peer hang-up
 * (nginx closes the connection when its client leaves) ends the request at once.
 * The wait ends at the framer's deadline (DSTREAM_LONGPOLL_MS for a long-poll,
 * DSTREAM_SSE_MAX_MS for SSE, DSTREAM_REPLY_MAX_MS for a chat reply's stream) with the framer's end (the long-poll's 204), or as
 * soon as a look-up once a second finds the reader's token revoked or expired. */
#include "live.h"

#include <poll.h>
#include <stdatomic.h>
#include <string.h>

#include "../lib/auth.h"
#include "../lib/wake.h"
#include "hub.h"
#include "metrics.h"

static atomic_int stopping;

void live_stop(void)
{
    atomic_store(&stopping, 1);
}

int live_stopping(void)
{
    return atomic_load(&stopping);
}

enum { WAIT_WOKEN, WAIT_TIMEOUT, WAIT_GONE };

#define TOKEN_CHECK_MS 1000     /* how often a waiting reader's token is looked up again */

/* Whether the reader's token still stands, looked up at most once per TOKEN_CHECK_MS
 * (*due). A database that cannot answer keeps the reader. */
static int token_stands(req_t *r, int64_t *due)
{
    int64_t now = wake_now_ms();
    if (!r->auth || now < *due) return 1;
    *due = now + TOKEN_CHECK_MS;
    return auth_token_current(r->log, r->auth->id) != 0;
}

/* The reader now waits on this thread (counted until live_run returns). */
static void reader_waits(req_t *r)
{
    metrics_slot *m = metrics_self();
    if (!r->waiting && m) metrics_gauge(&m->thread_readers, 1);
    r->waiting = 1;
}

/* Wait up to ms for a wake-up on the watched stream or the client leaving. */
static int wait_for(req_t *r, int ms)
{
    struct pollfd pf[2];
    int n = 0;
    if (r->waiter) pf[n++] = (struct pollfd){wake_waiter_fd(r->waiter), POLLIN, 0};
    int cfd = r->be->fd(r);
    if (cfd >= 0) pf[n++] = (struct pollfd){cfd, POLLRDHUP, 0};
    if (n == 0) return WAIT_TIMEOUT;
    int rc = poll(pf, (nfds_t)n, ms < 0 ? 0 : ms);
    if (rc <= 0) return WAIT_TIMEOUT;
    if (cfd >= 0 && (pf[n - 1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        r->gone = 1;
        return WAIT_GONE;
    }
    if (r->waiter) wake_clear(r->waiter);
    return WAIT_WOKEN;
}

/* Wait for a wake-up until end, writing the framer's heartbeats. A stream deleted
 * under a streamed response ends it (WAIT_GONE); a token that no longer stands ends
 * the wait (WAIT_TIMEOUT: the framer's end). */
static int wait_beating(req_t *r, frame_t *f, const log_read_req *rr, int64_t end, int64_t *token_due)
{
    for (;;) {
        int64_t now = wake_now_ms();
        if (now >= end || live_stopping() || !token_stands(r, token_due)) return WAIT_TIMEOUT;
        int ms = (int)(end - now);
        if (f->fr->heartbeat && ms > r->cfg->heartbeat_ms) ms = r->cfg->heartbeat_ms;
        if (r->auth && ms > TOKEN_CHECK_MS) ms = TOKEN_CHECK_MS;
        int w = wait_for(r, ms);
        if (w != WAIT_TIMEOUT) return w;
        if (live_stopping() || wake_now_ms() >= end) return WAIT_TIMEOUT;
        if (!f->fr->heartbeat) continue;
        if (f->fr->heartbeat(f, r) || res_flush(r)) return WAIT_GONE;
        log_info info;
        if (log_head(r->log, rr->path, &info) || info.id != f->id) return WAIT_GONE;
    }
}

/* Bytes written that the connection has not taken (its client does not read). */
static size_t backlog(req_t *r)
{
    return r->be->pending ? r->be->pending(r) : 0;
}

/* Wait until the connection has taken what was written (a thread that could not
 * hand its reader to the hub). 0, or -1 when the client is gone or end passed. */
static int wait_writable(req_t *r, int64_t end)
{
    while (backlog(r)) {
        int64_t left = end - wake_now_ms();
        if (left <= 0 || live_stopping()) return -1;
        struct pollfd pf = {r->be->fd(r), POLLOUT, 0};
        if (poll(&pf, 1, left > 1000 ? 1000 : (int)left) < 0) return -1;
        if (res_flush(r)) return -1;
    }
    return 0;
}

static void run(req_t *r, log_read_req *rr, frame_t *f, buf_t *out)
{
    int life = f->fr->whole_reply ? r->cfg->reply_max_ms : f->fr->streamed ? r->cfg->sse_max_ms : r->cfg->longpoll_ms;
    int64_t end = wake_now_ms() + life;
    int64_t token_due = wake_now_ms() + TOKEN_CHECK_MS;
    int watching = 0, tried = 0;
    int st = frame_step(f, r, rr, out);
    /* A read counts as activity for a sliding TTL: recorded unless it was so
     * recently that the expiry would hardly move (log_touch_due). */
    if (rr->info.id && rr->info.ttl_s >= 0) log_touch(r->log, &rr->info);
    while (st != FRAME_END) {
        if (st == FRAME_WAIT && !r->waiter) {
            /* Plain CGI: nothing can wake us, answer with what there is. */
            if (f->fr->end) f->fr->end(f, r, rr);
            break;
        }
        int full = backlog(r) > 0;
        if ((st == FRAME_WAIT || full) && !tried) {
            /* The hub sends what waits, reads once more and carries on. */
            if (r->hub && hub_park(r->hub, r, rr, f, end) == 0) return;
            tried = 1;
        }
        if (full && wait_writable(r, end)) break;
        if (st == FRAME_WAIT) {
            if (!watching) {
                wake_watch(r->waiter, f->id);
                watching = 1;
                reader_waits(r);
            } else {
                int w = wait_beating(r, f, rr, end, &token_due);
                if (w == WAIT_GONE) break;
                if (w == WAIT_TIMEOUT) {
                    if (f->fr->end) f->fr->end(f, r, rr);
                    break;
                }
            }
        }
        st = frame_step(f, r, rr, out);
    }
    res_flush(r);
}

void live_run(req_t *r, log_read_req *rr, frame_t *f)
{
    buf_t out;
    buf_init(&out, r->cfg->read_max + (1 << 20));
    /* Finish reading the request so that the connection carries nothing more
     * until the client leaves: then a hang-up is all poll() can see. */
    req_drain(r);
    run(r, rr, f, &out);
    if (r->waiter) wake_unwatch(r->waiter);
    metrics_slot *m = metrics_self();
    if (r->waiting && m) metrics_gauge(&m->thread_readers, -1);
    buf_free(&out);
}

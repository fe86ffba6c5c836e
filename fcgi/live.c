/* Live reads: long-poll and SSE.
 *
 * Both run the same loop: read a batch from the current offset; if there is
 * nothing new, register on the stream with the process's watcher (lib/wake), read
 * once more (a commit may have landed in between), then poll() on the waiter's
 * eventfd and on the FastCGI connection. No read transaction is held while
 * waiting. A peer hang-up on the connection (nginx closes it when the client
 * leaves) ends the request at once, freeing the thread. They differ in framing:
 * long-poll answers once (200 with data, 204 on timeout or closure); SSE writes a
 * data event and a control event per batch, comments as heartbeats, and ends on
 * closure, on its lifetime limit or when the process stops.
 *
 * In the FastCGI pool a reader that has nothing left to read is parked instead of
 * waiting on its thread: its connection goes to the process's live hub (hub.c),
 * which runs the same steps below (live_sse_step, live_lp_step) for all of them. */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../lib/sse.h"
#include "../lib/wake.h"
#include "hub.h"
#include "metrics.h"
#include "pool.h"
#include "router.h"
#include "stream.h"

int64_t live_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum { WAIT_WOKEN, WAIT_TIMEOUT, WAIT_GONE };

/* The reader now waits on this thread (counted until stream_live returns). */
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

static void cursor_for(req_t *r, char *out, size_t cap)
{
    char client[32];
    int n = req_query(r, "cursor", client, sizeof client);
    sse_cursor(wall_ms(), n > 0 ? client : NULL, out, cap);
}

/* ---- long-poll ------------------------------------------------------------------- */

int live_lp_step(req_t *r, log_read_req *rr, buf_t *out)
{
    int rc;
    char cursor[32];
    if ((rc = stream_read_batch(r, rr, out))) {
        if (!r->gone) stream_fail(r, rc);
        return LIVE_END;
    }
    int closed_at_tail = rr->info.closed && rr->up_to_date;
    if (rr->count > 0 || closed_at_tail) {
        cursor_for(r, cursor, sizeof cursor);
        res_status(r, rr->count > 0 ? 200 : 204);
        stream_meta_headers(r, &rr->info);
        stream_put_offset(r, "Stream-Next-Offset", rr->next);
        if (rr->up_to_date) res_header(r, "Stream-Up-To-Date", "true");
        if (closed_at_tail) res_header(r, "Stream-Closed", "true");
        else res_header(r, "Stream-Cursor", cursor);
        res_header(r, "Cache-Control", "no-store");
        if (rr->count > 0) {
            res_headerf(r, "Content-Length", "%zu", out->len);
            res_write(r, out->p, out->len);
        } else {
            res_end(r);
        }
        return LIVE_END;
    }
    rr->kind = OFFSET_AT;
    rr->from = rr->next;
    return LIVE_WAIT;
}

void live_lp_timeout(req_t *r, const log_read_req *rr)
{
    char cursor[32];
    cursor_for(r, cursor, sizeof cursor);
    res_status(r, 204);
    stream_put_offset(r, "Stream-Next-Offset", rr->from);
    res_header(r, "Stream-Up-To-Date", "true");
    res_header(r, "Stream-Cursor", cursor);
    res_header(r, "Cache-Control", "no-store");
    res_end(r);
}

static void long_poll(req_t *r, log_read_req *rr, buf_t *out)
{
    int64_t deadline = live_mono_ms() + r->cfg->longpoll_ms;
    int watching = 0, touched = 0;
    for (;;) {
        int st = live_lp_step(r, rr, out);
        if (!touched && rr->info.id) {
            stream_touch(r, &rr->info);
            touched = 1;
        }
        if (st == LIVE_END) return;
        if (!watching) {
            /* Nothing yet: hand the wait to the hub (it reads once more), or
             * watch here and re-read (a commit may have come before the watch). */
            if (r->hub && hub_park(r->hub, r, rr, rr->info.id, 0, deadline) == 0) return;
            if (r->waiter) wake_watch(r->waiter, rr->info.id);
            watching = 1;
            reader_waits(r);
            continue;
        }
        int left = (int)(deadline - live_mono_ms());
        /* Without a waiter (plain CGI) nothing can wake us: answer now. */
        if (!r->waiter) left = 0;
        int w = left > 0 && !pool_stopping() ? wait_for(r, left) : WAIT_TIMEOUT;
        if (w == WAIT_GONE) return;
        if (w == WAIT_TIMEOUT && (left <= 0 || pool_stopping() || live_mono_ms() >= deadline)) {
            live_lp_timeout(r, rr);
            return;
        }
    }
}

/* ---- SSE ----------------------------------------------------------------------- */

static int is_text(const log_info *info)
{
    return info->json || strncasecmp(info->content_type, "text/", 5) == 0;
}

static int sse_control(buf_t *ev, req_t *r, const log_read_req *rr, int closed)
{
    char off[OFFSET_LEN + 1], cursor[32], json[256];
    offset_format(rr->next, off);
    int n;
    if (closed) {
        n = snprintf(json, sizeof json, "{\"streamNextOffset\":\"%s\",\"upToDate\":true,\"streamClosed\":true}", off);
    } else {
        cursor_for(r, cursor, sizeof cursor);
        n = snprintf(json, sizeof json, "{\"streamNextOffset\":\"%s\",\"streamCursor\":\"%s\"%s}", off,
                     cursor, rr->up_to_date ? ",\"upToDate\":true" : "");
    }
    /* id: the offset after the batch, so that a browser's EventSource, which
     * reconnects to the same URL with Last-Event-ID, resumes right after it. */
    return sse_event(ev, "control", off, json, (size_t)n);
}

/* Write the batch just read into out as SSE events; *first: nothing sent yet. */
static int sse_emit(req_t *r, log_read_req *rr, const buf_t *out, int text, int *first)
{
    buf_t ev;
    int rc = 0, st = LIVE_WAIT;
    int closed = rr->info.closed && rr->up_to_date;
    buf_init(&ev, 0);
    if (rr->count > 0 && r->events) {
        rc = buf_append(&ev, out->p, out->len);    /* already one event per message */
    } else if (rr->count > 0) {
        rc = text ? sse_event(&ev, "data", NULL, out->p, out->len)
                  : sse_event_base64(&ev, "data", out->p, out->len);
        if (rc == 0) rc = sse_control(&ev, r, rr, closed);
    } else if ((*first || closed) && !r->events) {
        rc = sse_control(&ev, r, rr, closed);
    }
    *first = 0;
    if (rc || (ev.len && (res_write(r, ev.p, ev.len) || res_flush(r))) || closed) {
        st = LIVE_END;
    } else {
        rr->kind = OFFSET_AT;
        rr->from = rr->next;
        if (!rr->up_to_date) st = LIVE_MORE;
    }
    buf_free(&ev);
    return st;
}

int live_sse_step(req_t *r, log_read_req *rr, int64_t id, buf_t *out, int text, int *first)
{
    if (stream_read_batch(r, rr, out)) return LIVE_END;
    if (rr->info.id != id) return LIVE_END;     /* deleted and made again: not ours */
    return sse_emit(r, rr, out, text, first);
}

/* Wait for a wake-up, writing heartbeats; LIVE_END when the response should end. */
static int sse_wait(req_t *r, const log_read_req *rr, int64_t end)
{
    buf_t ev;
    int st = LIVE_END;
    buf_init(&ev, 0);
    for (;;) {
        int64_t now = live_mono_ms();
        if (now >= end || pool_stopping()) break;
        int ms = r->cfg->heartbeat_ms;
        if (now + ms > end) ms = (int)(end - now);
        int w = wait_for(r, ms);
        if (w == WAIT_GONE) break;
        if (w == WAIT_WOKEN) {
            st = LIVE_MORE;
            break;
        }
        if (pool_stopping() || live_mono_ms() >= end) break;
        buf_reset(&ev);
        sse_comment(&ev, "keep-alive");
        if (res_write(r, ev.p, ev.len) || res_flush(r)) break;
        /* A stream deleted under us ends the response. */
        log_info info;
        if (log_head(r->log, rr->path, &info) || info.id != rr->info.id) break;
    }
    buf_free(&ev);
    return st;
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
        int64_t left = end - live_mono_ms();
        if (left <= 0 || pool_stopping()) return -1;
        struct pollfd pf = {r->be->fd(r), POLLOUT, 0};
        if (poll(&pf, 1, left > 1000 ? 1000 : (int)left) < 0) return -1;
        if (res_flush(r)) return -1;
    }
    return 0;
}

static void sse(req_t *r, log_read_req *rr, buf_t *out)
{
    int rc, watching = 0, first = 1, tried = 0;
    int64_t end = live_mono_ms() + r->cfg->sse_max_ms;

    if ((rc = stream_read_batch(r, rr, out))) {
        stream_fail(r, rc);
        return;
    }
    stream_touch(r, &rr->info);
    int64_t id = rr->info.id;
    int text = is_text(&rr->info);
    res_header(r, "Content-Type", "text/event-stream");
    res_header(r, "Cache-Control", "no-cache");
    res_header(r, "X-Accel-Buffering", "no");
    if (!text) res_header(r, "Stream-SSE-Data-Encoding", "base64");
    int st = sse_emit(r, rr, out, text, &first);
    while (st != LIVE_END) {
        if (st == LIVE_WAIT && !r->waiter) break;  /* plain CGI: what is there, then end */
        int full = backlog(r) > 0;
        if ((st == LIVE_WAIT || full) && !tried) {
            /* Parked: the hub sends what waits, reads once more and carries on, so
             * that no thread waits on a client. Else watch here and re-read. */
            if (r->hub && hub_park(r->hub, r, rr, id, text, end) == 0) return;
            tried = 1;
        }
        if (full && wait_writable(r, end)) break;
        if (st == LIVE_WAIT) {
            if (!watching) {
                wake_watch(r->waiter, id);
                watching = 1;
                reader_waits(r);
            } else if (sse_wait(r, rr, end) == LIVE_END) {
                break;
            }
        }
        st = live_sse_step(r, rr, id, out, text, &first);
    }
    res_flush(r);
}

void stream_live(req_t *r, log_read_req *rr, int use_sse)
{
    r->sse = use_sse;
    buf_t out;
    buf_init(&out, r->cfg->read_max + (1 << 20));
    /* Finish reading the request so that the connection carries nothing more
     * until the client leaves: then a hang-up is all poll() can see. */
    char tmp[4096];
    while (r->be->read(r, tmp, sizeof tmp) > 0) {}
    if (use_sse) sse(r, rr, &out);
    else long_poll(r, rr, &out);
    if (r->waiter) wake_unwatch(r->waiter);
    metrics_slot *m = metrics_self();
    if (r->waiting && m) metrics_gauge(&m->thread_readers, -1);
    buf_free(&out);
}

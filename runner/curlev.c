/* curlev: the runner's multi handle driven by its sockets' events (see curlev.h). */
#include "curlev.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define CURLEV_BATCH 256    /* ready sockets taken per epoll_wait; the rest stay ready */

struct curlev {
    CURLM *multi;
    int ep;                 /* epoll set of libcurl's sockets */
    unsigned nsockets;
    int64_t due_us;         /* libcurl's timer (monotonic), -1: none */
    int timer_set;          /* on_timer ran (since curlev_run reset it) */
};

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* libcurl's wish for socket s: watched for what, or no longer (before it closes
 * it). socketp marks a socket already in the set. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *ud, void *socketp)
{
    curlev_t *ev = ud;
    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        if (socketp) {
            epoll_ctl(ev->ep, EPOLL_CTL_DEL, s, NULL);  /* (already gone if closed: no matter) */
            ev->nsockets--;
        }
        return 0;
    }
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    e.data.fd = s;
    int op = socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(ev->ep, op, s, &e) == 0) {
        if (!socketp) {
            curl_multi_assign(ev->multi, s, ev);
            ev->nsockets++;
        }
        return 0;
    }
    /* The set and libcurl disagree (a number closed and opened again): the other way. */
    if (epoll_ctl(ev->ep, op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &e) == 0 && !socketp) {
        curl_multi_assign(ev->multi, s, ev);
        ev->nsockets++;
    }
    return 0;
}

/* libcurl's next deadline: in timeout_ms (0: at once), or none (-1). */
static int on_timer(CURLM *multi, long timeout_ms, void *ud)
{
    curlev_t *ev = ud;
    (void)multi;
    ev->due_us = timeout_ms < 0 ? -1 : mono_us() + (int64_t)timeout_ms * 1000;
    ev->timer_set = 1;
    return 0;
}

curlev_t *curlev_new(CURLM *multi, char *err, size_t cap)
{
    curlev_t *ev = calloc(1, sizeof *ev);
    if (!ev || !multi || (ev->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        snprintf(err, cap, "epoll: %s", ev && multi ? strerror(errno) : "out of memory");
        free(ev);
        return NULL;
    }
    ev->multi = multi;
    ev->due_us = -1;
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, ev);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(multi, CURLMOPT_TIMERDATA, ev);
    return ev;
}

void curlev_free(curlev_t *ev)
{
    if (!ev) return;
    close(ev->ep);
    free(ev);
}

int curlev_fd(const curlev_t *ev)
{
    return ev->ep;
}

int64_t curlev_wait(const curlev_t *ev, int64_t wait)
{
    if (ev->due_us < 0) return wait;
    int64_t left = ev->due_us - mono_us();
    int64_t ms = left <= 0 ? 0 : (left + 999) / 1000;
    return ms < wait ? ms : wait;
}

void curlev_run(curlev_t *ev, int ready)
{
    int running;
    if (ready) {
        struct epoll_event evs[CURLEV_BATCH];
        int n = epoll_wait(ev->ep, evs, CURLEV_BATCH, 0);
        for (int i = 0; i < n; i++) {
            uint32_t e = evs[i].events;
            /* An error or a hang-up is found by reading (or by the connect's check). */
            int bits = (e & (EPOLLIN | EPOLLHUP | EPOLLERR) ? CURL_CSELECT_IN : 0) |
                       (e & (EPOLLOUT | EPOLLERR) ? CURL_CSELECT_OUT : 0);
            curl_multi_socket_action(ev->multi, evs[i].data.fd, bits, &running);
        }
    }
    int64_t now = mono_us();
    if (ev->due_us >= 0 && now >= ev->due_us) {
        /* libcurl tells its next deadline from in here, but only when it differs from
         * the last one told: it says "in 3 ms" of one due in 3.9, so this can come a
         * little early, find nothing expired and hear of no new deadline. Then the
         * same one is looked at again a millisecond later. */
        ev->timer_set = 0;
        curl_multi_socket_action(ev->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        if (!ev->timer_set) ev->due_us = now + 1000;
    }
}

unsigned curlev_sockets(const curlev_t *ev)
{
    return ev->nsockets;
}

/* wire: FastCGI records out (see wire.h).
 *
 * A record is an 8-byte header (version, type, request id, content length, no
 * padding) and at most 65535 content bytes; we cut data at REC_MAX, a multiple of 8
 * as the specification recommends. A write gathers what waits and the new records in
 * one sendmsg(MSG_DONTWAIT): libfcgi may still be reading the same socket in blocking
 * mode, so the descriptor's flags are left alone. What the socket does not take is
 * copied into the wire, so the caller's data need not outlive the call. */
#include "wire.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#define REC_MAX 65528
#define IOV_MAX_BATCH 512

enum { FCGI_END_REQUEST = 3, FCGI_STDOUT = 6 };

static void rec_header(unsigned char *h, int type, int reqid, size_t len)
{
    h[0] = 1;
    h[1] = (unsigned char)type;
    h[2] = (unsigned char)(reqid >> 8);
    h[3] = (unsigned char)reqid;
    h[4] = (unsigned char)(len >> 8);
    h[5] = (unsigned char)len;
    h[6] = h[7] = 0;
}

/* The records that end a request: an empty FCGI_STDOUT, then FCGI_END_REQUEST
 * (appStatus 0, FCGI_REQUEST_COMPLETE). */
static void end_records(unsigned char out[24], int reqid)
{
    rec_header(out, FCGI_STDOUT, reqid, 0);
    rec_header(out + 8, FCGI_END_REQUEST, reqid, 8);
    memset(out + 16, 0, 8);
}

void wire_init(wire_t *w, int fd, int reqid)
{
    w->fd = fd;
    w->reqid = reqid;
    buf_init(&w->pend, 0);
    w->off = 0;
}

size_t wire_pending(const wire_t *w)
{
    return w->pend.len - w->off;
}

void wire_free(wire_t *w)
{
    buf_free(&w->pend);
    w->off = 0;
}

/* Drop what has been sent; free the memory once nothing waits (most readers keep
 * up, and a drained buffer should not stay at its peak). */
static void consumed(wire_t *w, size_t n)
{
    w->off += n;
    if (w->off < w->pend.len) return;
    buf_free(&w->pend);
    buf_init(&w->pend, 0);
    w->off = 0;
}

static ssize_t send_iov(int fd, struct iovec *iov, int n)
{
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)n;
    ssize_t r;
    do r = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return r;
}

int wire_send(wire_t *w)
{
    while (wire_pending(w)) {
        struct iovec iov = {w->pend.p + w->off, wire_pending(w)};
        ssize_t r = send_iov(w->fd, &iov, 1);
        if (r < 0) return WIRE_GONE;
        if (r == 0) return WIRE_AGAIN;
        consumed(w, (size_t)r);
    }
    return WIRE_DONE;
}

int wire_queue(wire_t *w, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        size_t k = len < REC_MAX ? len : REC_MAX;
        unsigned char h[8];
        rec_header(h, FCGI_STDOUT, w->reqid, k);
        if (buf_append(&w->pend, h, 8) || buf_append(&w->pend, p, k)) return -1;
        p += k;
        len -= k;
    }
    return 0;
}

int wire_write(wire_t *w, const void *data, size_t len, int end)
{
    unsigned char hdr[IOV_MAX_BATCH / 2][8], tail[24];
    struct iovec iov[IOV_MAX_BATCH];
    const char *p = data;
    size_t off = 0;
    int done = 0;
    if (end) end_records(tail, w->reqid);
    while (!done) {
        int n = 0, blocked = 0;
        if (wire_pending(w)) iov[n++] = (struct iovec){w->pend.p + w->off, wire_pending(w)};
        size_t queued = n ? iov[0].iov_len : 0;
        while (off < len && n + 2 <= IOV_MAX_BATCH - 1) {
            size_t k = len - off < REC_MAX ? len - off : REC_MAX;
            unsigned char *h = hdr[n / 2];
            rec_header(h, FCGI_STDOUT, w->reqid, k);
            iov[n] = (struct iovec){h, 8};
            iov[n + 1] = (struct iovec){(void *)(p + off), k};
            n += 2;
            off += k;
        }
        if (off == len) {
            if (end) iov[n++] = (struct iovec){tail, sizeof tail};
            done = 1;
        }
        ssize_t r = send_iov(w->fd, iov, n);
        if (r < 0) return WIRE_GONE;
        size_t took = (size_t)r;
        /* What waited goes first; then keep the rest of the new records, in order. */
        size_t from_pend = took < queued ? took : queued;
        if (queued) consumed(w, from_pend);
        took -= from_pend;
        for (int i = queued ? 1 : 0; i < n; i++) {
            size_t l = iov[i].iov_len;
            if (took >= l) {
                took -= l;
                continue;
            }
            if (buf_append(&w->pend, (char *)iov[i].iov_base + took, l - took)) return WIRE_GONE;
            took = 0;
            blocked = 1;
        }
        /* Once the socket is full, the rest is only copied. */
        if (blocked) {
            while (off < len) {
                size_t k = len - off < REC_MAX ? len - off : REC_MAX;
                if (wire_queue(w, p + off, k)) return WIRE_GONE;
                off += k;
            }
            if (!done && end && buf_append(&w->pend, tail, sizeof tail)) return WIRE_GONE;
            return WIRE_AGAIN;
        }
    }
    return wire_pending(w) ? WIRE_AGAIN : WIRE_DONE;
}

int wire_drain(wire_t *w, int ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int rc = wire_send(w);
        if (rc != WIRE_AGAIN) return rc;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long spent = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (spent >= ms) return WIRE_AGAIN;
        struct pollfd pf = {w->fd, POLLOUT, 0};
        if (poll(&pf, 1, (int)(ms - spent)) < 0 && errno != EINTR) return WIRE_GONE;
        if (pf.revents & (POLLERR | POLLHUP)) return WIRE_GONE;
    }
}

/* stamp-provider: a stamping provider for bench/token-latency.sh, in C so that the
 * load generator costs little next to what it measures.
 *
 *   stamp-provider --port-file FILE [--deltas N] [--interval-ms MS] [--seconds S]
 *
 * Listens on 127.0.0.1 (a port of the kernel's choosing, written to FILE) and
 * answers every POST with an Anthropic Messages stream (the wire format of
 * tests/mock-provider's stamp mode): message_start, a text block of N [100]
 * content_block_delta events MS [20] ms apart, each text "@ts<µs> " (CLOCK_REALTIME
 * when the delta is written), then message_delta (end_turn, usage) and
 * message_stop; the connection then closes. The request body is read and ignored.
 * One thread, poll(); a connection whose socket is full keeps its output until it
 * drains. Exits after S [3600] seconds. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNS_MAX 4096
#define IN_MAX (1 << 20)        /* a request larger than this is refused */
#define OUT_MAX 16384

typedef struct conn {
    int fd;
    int streaming;              /* headers and the opening sent */
    char *in;
    size_t inlen;
    size_t need;                /* header bytes + Content-Length, once known */
    char out[OUT_MAX];
    size_t outlen;
    int sent;                   /* deltas written */
    int64_t next_us;            /* when the next delta is due (monotonic) */
    int closing;                /* everything queued; close once written */
} conn;

static conn *conns[CONNS_MAX];
static int nconns;
static int deltas = 100, interval_ms = 20;

static int64_t now_us(clockid_t clk)
{
    struct timespec t;
    clock_gettime(clk, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void put(conn *c, const char *s, size_t n)
{
    if (c->outlen + n > sizeof c->out) {
        fprintf(stderr, "stamp-provider: output of a connection overflows\n");
        exit(1);
    }
    memcpy(c->out + c->outlen, s, n);
    c->outlen += n;
}

static void event(conn *c, const char *name, const char *data)
{
    char b[1024];
    int n = snprintf(b, sizeof b, "event: %s\ndata: %s\n\n", name, data);
    put(c, b, (size_t)n);
}

static void flush_out(conn *c)
{
    while (c->outlen) {
        ssize_t n = write(c->fd, c->out, c->outlen);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {
            c->closing = 1;
            c->outlen = 0;
            return;
        }
        memmove(c->out, c->out + n, c->outlen - (size_t)n);
        c->outlen -= (size_t)n;
    }
}

static void conn_free(int i)
{
    close(conns[i]->fd);
    free(conns[i]->in);
    free(conns[i]);
    conns[i] = conns[--nconns];
}

/* Header end and Content-Length known: the whole request is need bytes. */
static void parse_head(conn *c)
{
    char *end = memmem(c->in, c->inlen, "\r\n\r\n", 4);
    if (!end) return;
    size_t head = (size_t)(end - c->in) + 4;
    size_t len = 0;
    for (char *p = c->in; p < end; p++) {
        if ((p == c->in || p[-1] == '\n') && (size_t)(end - p) > 15 && !strncasecmp(p, "content-length:", 15)) {
            len = strtoul(p + 15, NULL, 10);
            break;
        }
    }
    c->need = head + len;
}

static void start_stream(conn *c)
{
    static const char head[] = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                               "connection: close\r\n\r\n";
    put(c, head, sizeof head - 1);
    event(c, "message_start",
          "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_stamp\",\"type\":\"message\",\"role\":\"assistant\","
          "\"model\":\"bench-model\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"
          "\"usage\":{\"input_tokens\":10,\"output_tokens\":0}}}");
    event(c, "content_block_start",
          "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}");
    c->streaming = 1;
    c->next_us = now_us(CLOCK_MONOTONIC) + (int64_t)interval_ms * 1000;
    flush_out(c);
}

static void tick(conn *c, int64_t mono)
{
    if (!c->streaming || c->closing || mono < c->next_us) return;
    char data[256];
    snprintf(data, sizeof data,
             "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"@ts%lld \"}}",
             (long long)now_us(CLOCK_REALTIME));
    event(c, "content_block_delta", data);
    if (++c->sent == deltas) {
        event(c, "content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}");
        snprintf(data, sizeof data,
                 "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},"
                 "\"usage\":{\"output_tokens\":%d}}", deltas);
        event(c, "message_delta", data);
        event(c, "message_stop", "{\"type\":\"message_stop\"}");
        c->closing = 1;
    }
    c->next_us += (int64_t)interval_ms * 1000;
    flush_out(c);
}

/* Read what came; 0 to keep the connection, -1 to drop it. */
static int on_input(conn *c)
{
    char b[65536];
    for (;;) {
        ssize_t n = read(c->fd, b, sizeof b);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) return -1;
        if (c->streaming) continue;     /* nothing more is expected: ignored */
        if (c->inlen + (size_t)n > IN_MAX) return -1;
        char *p = realloc(c->in, c->inlen + (size_t)n);
        if (!p) return -1;
        c->in = p;
        memcpy(c->in + c->inlen, b, (size_t)n);
        c->inlen += (size_t)n;
    }
    if (!c->streaming && !c->need) parse_head(c);
    if (!c->streaming && c->need && c->inlen >= c->need) start_stream(c);
    return 0;
}

static int arg_num(const char *s, int lo, int hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "stamp-provider: %s: not a number from %d to %d\n", s, lo, hi);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    const char *port_file = NULL;
    int seconds = 3600;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port-file")) port_file = argv[i + 1];
        else if (!strcmp(argv[i], "--deltas")) deltas = arg_num(argv[i + 1], 1, 100000);
        else if (!strcmp(argv[i], "--interval-ms")) interval_ms = arg_num(argv[i + 1], 0, 60000);
        else if (!strcmp(argv[i], "--seconds")) seconds = arg_num(argv[i + 1], 1, 86400);
        else port_file = NULL, i = argc;
    }
    if (!port_file) {
        fprintf(stderr, "usage: stamp-provider --port-file FILE [--deltas N] [--interval-ms MS] [--seconds S]\n");
        return 2;
    }
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1024) ||
        getsockname(ls, (struct sockaddr *)&a, &al)) {
        perror("stamp-provider: listen");
        return 1;
    }
    FILE *f = fopen(port_file, "w");
    if (!f || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f)) {
        perror("stamp-provider: port file");
        return 1;
    }
    int64_t end = now_us(CLOCK_MONOTONIC) + (int64_t)seconds * 1000000;
    static struct pollfd pf[CONNS_MAX + 1];
    while (now_us(CLOCK_MONOTONIC) < end) {
        int64_t mono = now_us(CLOCK_MONOTONIC), due = mono + 100000;
        pf[0] = (struct pollfd){ls, POLLIN, 0};
        for (int i = 0; i < nconns; i++) {
            conn *c = conns[i];
            pf[i + 1] = (struct pollfd){c->fd, (short)(POLLIN | (c->outlen ? POLLOUT : 0)), 0};
            if (c->streaming && !c->closing && c->next_us < due) due = c->next_us;
        }
        int wait_ms = due > mono ? (int)((due - mono + 999) / 1000) : 0;
        int n = poll(pf, (nfds_t)nconns + 1, wait_ms);
        if (n < 0 && errno != EINTR) {
            perror("stamp-provider: poll");
            return 1;
        }
        int before = nconns;
        mono = now_us(CLOCK_MONOTONIC);
        /* Backwards: conn_free moves the last connection into the freed slot. */
        for (int i = before - 1; i >= 0; i--) {
            conn *c = conns[i];
            short ev = pf[i + 1].revents;
            if ((ev & (POLLIN | POLLHUP | POLLERR)) && on_input(c)) {
                conn_free(i);
                continue;
            }
            if (ev & POLLOUT) flush_out(c);
            tick(c, mono);
            if (c->closing && !c->outlen) conn_free(i);
        }
        if (pf[0].revents & POLLIN) {
            for (;;) {
                int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) break;
                conn *c = nconns < CONNS_MAX ? calloc(1, sizeof *c) : NULL;
                if (!c) {
                    close(fd);
                    continue;
                }
                c->fd = fd;
                conns[nconns++] = c;
            }
        }
    }
    return 0;
}

/* sse-client: many Server-Sent Events readers on one stream, for bench/compare.sh.
 *
 *   sse-client fanout --port P --path PATH --readers N [--interval-ms 10] [--seconds 10]
 *                     [--msg-bytes 200] [--connect-s 60] [--linger-s 3] [--write-port P]
 *   sse-client hold   --port P --path PATH --readers N [--hold-s 60] [--connect-s 60]
 *   sse-client tokens --port P --paths FILE --expect N [--seconds 60] [--connect-s 60] [--timeline FILE]
 *                     [--ask JSON] [--ask-conns 16]
 *
 * Both open N HTTP/1.1 connections to 127.0.0.1:P with GET PATH?offset=now&live=sse
 * (at most CONNECT_WINDOW connecting at once, all in one epoll loop) and count a
 * reader as connected once it has a 200 and a first complete event (both servers
 * send a control event at once). A non-200 answer (nginx's 503 when the pool is
 * full) counts as refused.
 *
 * fanout: once every reader is connected (or --connect-s passed), a writer thread
 * POSTs a JSON message of about --msg-bytes every --interval-ms for --seconds on its
 * own keep-alive connection: {"ts_us":T,"seq":I,"pad":"xxx"}, T the wall clock
 * (CLOCK_REALTIME, µs) just before the request is written. Readers decode the
 * chunked body and scan it for "ts_us": values; each one is a delivered message,
 * its latency the wall clock when the bytes were read minus T. It waits up to
 * --linger-s after the last append for stragglers, then prints one line:
 *   mode=fanout readers= connected= refused= sent= expected= delivered= p50_us= p90_us=
 *   p99_us= max_us= append_p50_us= append_p99_us=
 * expected is readers x sent (a reader that never connected misses them all). The
 * writer stops after --seconds even if a slow server let it send fewer messages.
 * --write-port sends the writer's appends to another server than the readers' (a
 * second host on the same database: the latency is then the cross-host wake-up's).
 *
 * hold: prints "mode=hold readers= held= refused= failed= connect_ms=" as soon as every
 * reader is resolved (or --connect-s passed), then keeps the connections open, reading
 * and dropping heartbeats, until --hold-s passes or SIGTERM/SIGINT; then prints
 * "dropped=K" (held connections that the server closed meanwhile) and exits.
 *
 * tokens: one reader per line of FILE (a path such as /v1/sessions/ID/events), each
 * from the start (a new session's first event makes the reader ready). Once every reader is connected it prints "mode=tokens ready=N"
 * (the caller then makes the sessions talk); each reader scans its events for
 * "@ts<digits>", the wall clock (µs) at which the provider wrote that delta
 * (tests/mock-provider's stamp mode), and takes the latency from it. It ends when
 * every reader has seen --expect stamps (or --seconds passed) and prints:
 *   mode=tokens readers= connected= expected= delivered= p50_us= p90_us= p99_us= max_us= cpu_ms=
 *   steady= steady_p50_us= steady_p99_us=
 * (cpu_ms: this process's own CPU, user + system, from "ready" to the end: the load
 * generator's share, to be compared with what it measures; steady: the deltas written a
 * second or more after the first one, and their latencies: without the sessions' start). With --timeline FILE it
 * also writes each delivered message's stamp and latency (µs), a line each, to FILE:
 * when the slow ones were written (a stall of everything, or a reader left behind).
 * With --ask JSON it makes the sessions talk itself once every reader is ready: JSON
 * POSTed to each path with its last segment made "messages" (/v1/sessions/ID/messages),
 * from --ask-conns threads, each on a kept-alive connection (a curl process per
 * message would cost the machine more CPU than the stack it measures); each message's
 * answer time (p50, max) and its failures are on the last line (ask_*).
 *
 * Every phase has a deadline; the program always ends by itself.
 * Built by bench/compare.sh: cc -O2 -o build/bench/sse-client bench/src/sse-client.c -lpthread */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNECT_WINDOW 256      /* readers between connect() and their first event */
#define HDR_MAX 8192
/* What precedes a timestamp: "ts_us": in fanout appends, @ts in stamped deltas. */
static const char *KEY = "\"ts_us\":";
static int KEY_LEN = 8;

enum { C_CONNECTING, C_HEADERS, C_BODY, C_DONE };
enum { CH_SIZE, CH_EXT, CH_DATA, CH_CRLF };

typedef struct conn {
    int fd, idx;
    const char *path;
    int state;
    int ready;              /* 200 and a first complete event */
    int refused, failed, dropped;
    char hdr[HDR_MAX];
    size_t hlen;
    int chunked;
    int ch_state;
    uint64_t ch_left;
    int key_pos;            /* matched prefix of KEY, or KEY_LEN while in the digits */
    int64_t num;
    int last_nl;            /* previous body byte was '\n' */
    long msgs;
} conn;

typedef struct opts {
    int fanout, tokens;
    const char *paths;
    const char *timeline;
    long expect;
    int port, write_port;     /* write_port: the writer's server (0: port) */
    const char *path;
    int readers;
    int interval_ms, seconds, msg_bytes, connect_s, linger_s, hold_s;
    const char *ask;          /* tokens: the message to POST to every session */
    int ask_conns;
} opts;

static opts O = {.interval_ms = 10, .seconds = 10, .msg_bytes = 200, .connect_s = 60, .linger_s = 3,
                 .hold_s = 60, .ask_conns = 16};
static volatile sig_atomic_t stop_flag;
static atomic_long sent_ok;
static atomic_int writer_done;

/* Latencies of delivered messages (µs), and of the writer's appends. */
static int64_t *lat, *lat_at;    /* lat_at: each one's stamp (--timeline) */
static size_t nlat, caplat;
static int64_t *app_lat;
static size_t napp;

static int64_t now_us(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static long num(const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno || end == s || *end || n < min || n > max) {
        fprintf(stderr, "sse-client: %s is not a number in [%ld, %ld]\n", s, min, max);
        exit(2);
    }
    return (long)n;
}

static void add_lat(int64_t v, int64_t at)
{
    if (nlat == caplat) {
        caplat = caplat ? caplat * 2 : 1 << 16;
        lat = realloc(lat, caplat * sizeof *lat);
        lat_at = realloc(lat_at, caplat * sizeof *lat_at);
        if (!lat || !lat_at) abort();
    }
    lat_at[nlat] = at;
    lat[nlat++] = v;
}

/* This process's CPU time so far (user + system), in microseconds. */
static int64_t self_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t pct(const int64_t *v, size_t n, double p)
{
    if (n == 0) return -1;
    size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static struct sockaddr_in addr_of(int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static struct sockaddr_in server_addr(void)
{
    return addr_of(O.port);
}

/* ---- readers ----------------------------------------------------------------------- */

/* Body bytes of one reader: find the "ts_us": numbers and the end of the first event. */
static void body_bytes(conn *c, const char *p, size_t n, int64_t t_read)
{
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ch == '\n') {
            if (c->last_nl) c->ready = 1;   /* a blank line ends an event */
            c->last_nl = 1;
        } else if (ch != '\r') {
            c->last_nl = 0;
        }
        if (c->key_pos == KEY_LEN) {
            if (ch >= '0' && ch <= '9') {
                c->num = c->num * 10 + (ch - '0');
                continue;
            }
            add_lat(t_read - c->num, c->num);
            c->msgs++;
            c->key_pos = 0;
            c->num = 0;
        }
        if (ch == KEY[c->key_pos]) c->key_pos++;
        else c->key_pos = ch == KEY[0] ? 1 : 0;
    }
}

/* Raw bytes after the headers: undo chunked transfer coding if it is there. */
static void raw_body(conn *c, const char *p, size_t n, int64_t t_read)
{
    if (!c->chunked) {
        body_bytes(c, p, n, t_read);
        return;
    }
    size_t i = 0;
    while (i < n) {
        char ch = p[i];
        switch (c->ch_state) {
        case CH_SIZE:
        case CH_EXT:
            i++;
            if (ch == '\n') {
                if (c->ch_left == 0) {
                    c->state = C_DONE;     /* last chunk: the server ended the response */
                    return;
                }
                c->ch_state = CH_DATA;
            } else if (ch == ';') {
                c->ch_state = CH_EXT;
            } else if (c->ch_state == CH_SIZE && ch != '\r') {
                int v = ch >= '0' && ch <= '9'   ? ch - '0'
                        : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                        : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                                 : -1;
                if (v < 0) {
                    c->failed = 1;
                    c->state = C_DONE;
                    return;
                }
                c->ch_left = c->ch_left * 16 + (uint64_t)v;
            }
            break;
        case CH_DATA: {
            size_t take = n - i < c->ch_left ? n - i : (size_t)c->ch_left;
            body_bytes(c, p + i, take, t_read);
            i += take;
            c->ch_left -= take;
            if (c->ch_left == 0) c->ch_state = CH_CRLF;
            break;
        }
        case CH_CRLF:
            i++;
            if (ch == '\n') {
                c->ch_state = CH_SIZE;
                c->ch_left = 0;
            }
            break;
        }
    }
}

/* Headers so far: once complete, take the status and the transfer coding. */
static void headers(conn *c, const char *p, size_t n, int64_t t_read)
{
    size_t room = HDR_MAX - 1 - c->hlen, take = n < room ? n : room;
    memcpy(c->hdr + c->hlen, p, take);
    size_t old = c->hlen;
    c->hlen += take;
    c->hdr[c->hlen] = 0;
    char *end = strstr(c->hdr, "\r\n\r\n");
    if (!end) {
        if (c->hlen == HDR_MAX - 1) {
            c->failed = 1;
            c->state = C_DONE;
        }
        return;
    }
    size_t hdr_len = (size_t)(end - c->hdr) + 4;
    int status = 0;
    if (strncmp(c->hdr, "HTTP/1.", 7) == 0 && c->hlen > 12) {
        char code[4] = {c->hdr[9], c->hdr[10], c->hdr[11], 0};
        char *e;
        status = (int)strtol(code, &e, 10);
        if (*e) status = 0;
    }
    if (status != 200) {
        c->refused = 1;
        c->state = C_DONE;
        return;
    }
    for (char *l = strstr(c->hdr, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n")) {
        if (strncasecmp(l + 2, "transfer-encoding:", 18) == 0 &&
            strcasestr(l + 2, "chunked") && strcasestr(l + 2, "chunked") < strstr(l + 2, "\r\n"))
            c->chunked = 1;
    }
    c->state = C_BODY;
    size_t used = hdr_len - old;    /* of this read's bytes */
    if (used < n) raw_body(c, p + used, n - used, t_read);
}

static void conn_close(int ep, conn *c)
{
    if (c->fd >= 0) {
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1;
    c->state = C_DONE;
}

static int conn_open(int ep, conn *c, int idx, const char *path)
{
    memset(c, 0, sizeof *c);
    c->idx = idx;
    c->path = path;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        c->failed = 1;
        c->state = C_DONE;
        return -1;
    }
    struct sockaddr_in a = server_addr();
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS) {
        close(c->fd);
        c->fd = -1;
        c->failed = 1;
        c->state = C_DONE;
        return -1;
    }
    c->state = C_CONNECTING;
    struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN, .data.u32 = (uint32_t)idx};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    return 0;
}

static void conn_event(int ep, conn *c, char *buf, size_t cap)
{
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
            c->failed = 1;
            conn_close(ep, c);
            return;
        }
        char req[2048];
        int n = snprintf(req, sizeof req,
                         "GET %s?offset=%s&live=sse HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         "Accept: text/event-stream\r\n\r\n", c->path, O.tokens ? "-1" : "now");
        if (n < 0 || (size_t)n >= sizeof req || write(c->fd, req, (size_t)n) != n) {
            c->failed = 1;
            conn_close(ep, c);
            return;
        }
        c->state = C_HEADERS;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)c->idx};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        return;
    }
    for (;;) {
        ssize_t n = read(c->fd, buf, cap);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n <= 0) {
            if (c->ready) c->dropped = 1;
            else if (!c->refused) c->failed = 1;
            conn_close(ep, c);
            return;
        }
        int64_t t = now_us(CLOCK_REALTIME);
        if (c->state == C_HEADERS) headers(c, buf, (size_t)n, t);
        else if (c->state == C_BODY) raw_body(c, buf, (size_t)n, t);
        if (c->state == C_DONE) {
            if (c->ready && !c->refused && !c->failed) c->dropped = 1;
            conn_close(ep, c);
            return;
        }
        if ((size_t)n < cap) return;
    }
}

/* ---- writer ------------------------------------------------------------------------ */

static int writer_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = addr_of(O.write_port ? O.write_port : O.port);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Read one response; returns its status, or -1 if the connection broke. */
static int read_response(int fd)
{
    char buf[16384];
    size_t len = 0;
    char *end = NULL;
    while (!end) {
        if (len == sizeof buf - 1) return -1;
        ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
        if (n <= 0) return -1;
        len += (size_t)n;
        buf[len] = 0;
        end = strstr(buf, "\r\n\r\n");
    }
    int status = (int)strtol(buf + 9, NULL, 10);
    size_t body = len - (size_t)(end + 4 - buf);
    char *cl = strcasestr(buf, "\r\ncontent-length:");
    if (cl && cl < end) {
        long want = strtol(cl + 17, NULL, 10);
        while ((long)body < want) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n <= 0) return -1;
            body += (size_t)n;
        }
    } else if (strcasestr(buf, "chunked") && strcasestr(buf, "chunked") < end) {
        /* Small bodies only (appends answer with none): read until the last chunk. */
        char tail[8] = {0};
        size_t have = len;
        memcpy(tail, have >= 5 ? buf + have - 5 : buf, have >= 5 ? 5 : have);
        while (strcmp(tail, "0\r\n\r\n") != 0) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n <= 0) return -1;
            if (n >= 5) memcpy(tail, buf + n - 5, 5);
            else {
                memmove(tail, tail + n, (size_t)(5 - n));
                memcpy(tail + 5 - n, buf, (size_t)n);
            }
        }
    }
    return status;
}

/* Send req (rn bytes) on *fd, a kept-alive connection (made when -1), and read
 * the response; once more on a new connection if the server had closed it.
 * Returns the status, or -1. */
static int post(int *fd, const char *req, int rn)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (*fd < 0 && (*fd = writer_connect()) < 0) return -1;
        int st = write(*fd, req, (size_t)rn) == rn ? read_response(*fd) : -1;
        if (st >= 0) return st;
        close(*fd);
        *fd = -1;
    }
    return -1;
}

static void *writer_main(void *arg)
{
    (void)arg;
    long count = (long)O.seconds * 1000 / O.interval_ms;
    app_lat = calloc((size_t)count + 1, sizeof *app_lat);
    if (!app_lat) abort();
    char *pad = malloc((size_t)O.msg_bytes + 1);
    if (!pad) abort();
    int padlen = O.msg_bytes - 48 > 0 ? O.msg_bytes - 48 : 1;   /* the rest of the JSON */
    memset(pad, 'x', (size_t)padlen);
    pad[padlen] = 0;
    int fd = writer_connect();
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t end_ns = (int64_t)t0.tv_sec * 1000000000 + t0.tv_nsec + (int64_t)O.seconds * 1000000000;
    for (long i = 0; i < count && !stop_flag; i++) {
        /* A slow server gets fewer appends, not a longer run. */
        if (now_us(CLOCK_MONOTONIC) * 1000 >= end_ns) break;
        int64_t at_ns = (int64_t)t0.tv_sec * 1000000000 + t0.tv_nsec +
                        (int64_t)i * O.interval_ms * 1000000;
        struct timespec at = {(time_t)(at_ns / 1000000000), (long)(at_ns % 1000000000)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
        char body[4096], req[8192];
        int64_t ts = now_us(CLOCK_REALTIME);
        int bn = snprintf(body, sizeof body, "{\"ts_us\":%lld,\"seq\":%ld,\"pad\":\"%s\"}",
                          (long long)ts, i, pad);
        int rn = snprintf(req, sizeof req,
                          "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: %d\r\n\r\n%s", O.path, bn, body);
        if (bn < 0 || rn < 0 || (size_t)rn >= sizeof req) break;
        int64_t t1 = now_us(CLOCK_MONOTONIC);
        int st = post(&fd, req, rn);
        if (st >= 200 && st < 300) {
            app_lat[napp++] = now_us(CLOCK_MONOTONIC) - t1;
            atomic_fetch_add(&sent_ok, 1);
        }
    }
    if (fd >= 0) close(fd);
    free(pad);
    atomic_store(&writer_done, 1);
    return NULL;
}

/* ---- asker (tokens --ask) ------------------------------------------------------------ */

static char **ask_paths;
static int ask_n;
static atomic_int ask_next, ask_failed;
static int64_t *ask_lat;    /* each message's answer time, µs (-1: failed) */

static void *asker_main(void *arg)
{
    (void)arg;
    int fd = -1;
    size_t blen = strlen(O.ask);
    for (int i; (i = atomic_fetch_add(&ask_next, 1)) < ask_n && !stop_flag;) {
        char path[1024], req[4096];
        const char *p = ask_paths[i], *slash = strrchr(p, '/');
        int plen = slash ? (int)(slash - p) : (int)strlen(p);
        int n = snprintf(path, sizeof path, "%.*s/messages", plen, p);
        int rn = n > 0 && (size_t)n < sizeof path
                     ? snprintf(req, sizeof req,
                                "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: %zu\r\n\r\n%s", path, blen, O.ask)
                     : -1;
        int64_t t1 = now_us(CLOCK_MONOTONIC);
        int st = rn > 0 && (size_t)rn < sizeof req ? post(&fd, req, rn) : -1;
        if (st >= 200 && st < 300) ask_lat[i] = now_us(CLOCK_MONOTONIC) - t1;
        else {
            ask_lat[i] = -1;
            atomic_fetch_add(&ask_failed, 1);
        }
    }
    if (fd >= 0) close(fd);
    return NULL;
}

/* ---- main -------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: sse-client fanout|hold --port P --path PATH --readers N [--interval-ms N]\n"
                    "       [--seconds N] [--msg-bytes N] [--connect-s N] [--linger-s N] [--hold-s N] [--write-port P]\n"
                    "       sse-client tokens --port P --paths FILE --expect N [--seconds N] [--connect-s N] [--timeline FILE]\n"
                    "                         [--ask JSON] [--ask-conns N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2) usage();
    if (!strcmp(argv[1], "fanout")) O.fanout = 1;
    else if (!strcmp(argv[1], "tokens")) O.tokens = 1;
    else if (strcmp(argv[1], "hold")) usage();
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--port")) O.port = (int)num(v, 1, 65535);
        else if (!strcmp(k, "--write-port")) O.write_port = (int)num(v, 1, 65535);
        else if (!strcmp(k, "--path")) O.path = v;
        else if (!strcmp(k, "--readers")) O.readers = (int)num(v, 0, 1000000);
        else if (!strcmp(k, "--interval-ms")) O.interval_ms = (int)num(v, 1, 60000);
        else if (!strcmp(k, "--seconds")) O.seconds = (int)num(v, 1, 3600);
        else if (!strcmp(k, "--msg-bytes")) O.msg_bytes = (int)num(v, 50, 3000);
        else if (!strcmp(k, "--connect-s")) O.connect_s = (int)num(v, 1, 3600);
        else if (!strcmp(k, "--linger-s")) O.linger_s = (int)num(v, 0, 3600);
        else if (!strcmp(k, "--hold-s")) O.hold_s = (int)num(v, 0, 86400);
        else if (!strcmp(k, "--paths")) O.paths = v;
        else if (!strcmp(k, "--timeline")) O.timeline = v;
        else if (!strcmp(k, "--expect")) O.expect = num(v, 1, 100000000);
        else if (!strcmp(k, "--ask")) O.ask = v;
        else if (!strcmp(k, "--ask-conns")) O.ask_conns = (int)num(v, 1, 256);
        else usage();
    }
    /* tokens: the paths, one a line. */
    char **paths = NULL;
    if (O.tokens) {
        FILE *f = O.paths ? fopen(O.paths, "r") : NULL;
        if (!f || !O.expect) usage();
        char line[1024];
        size_t cap = 0;
        O.readers = 0;
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\r\n")] = '\0';
            if (!line[0]) continue;
            if ((size_t)O.readers == cap) {
                cap = cap ? cap * 2 : 64;
                paths = realloc(paths, cap * sizeof *paths);
                if (!paths) abort();
            }
            paths[O.readers++] = strdup(line);
        }
        fclose(f);
        KEY = "@ts";
        KEY_LEN = 3;
        O.path = "-";
    }
    if (!O.port || !O.path || argc % 2) usage();

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        if ((long)rl.rlim_cur < O.readers + 64)
            fprintf(stderr, "sse-client: descriptor limit %ld is below %d readers\n",
                    (long)rl.rlim_cur, O.readers);
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    conn *cs = calloc((size_t)O.readers + 1, sizeof *cs);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (!cs || ep < 0) return 1;
    static char buf[1 << 16];
    struct epoll_event evs[512];
    int opened = 0, resolved = 0;
    int64_t t_start = now_us(CLOCK_MONOTONIC);
    int64_t connect_deadline = t_start + (int64_t)O.connect_s * 1000000;

    /* Connect every reader, CONNECT_WINDOW at a time. */
    while (resolved < O.readers && !stop_flag && now_us(CLOCK_MONOTONIC) < connect_deadline) {
        while (opened < O.readers && opened - resolved < CONNECT_WINDOW) {
            conn_open(ep, &cs[opened], opened, paths ? paths[opened] : O.path);
            opened++;
        }
        int n = epoll_wait(ep, evs, 512, 50);
        for (int i = 0; i < n; i++) {
            conn *c = &cs[evs[i].data.u32];
            if (c->state == C_DONE) continue;
            conn_event(ep, c, buf, sizeof buf);
        }
        resolved = 0;
        for (int i = 0; i < opened; i++)
            resolved += cs[i].ready || cs[i].state == C_DONE;
    }
    int held = 0, refused = 0, failed = 0;
    for (int i = 0; i < O.readers; i++) {
        if (cs[i].ready && !cs[i].dropped) held++;
        else if (cs[i].refused) refused++;
        else failed++;
    }
    int64_t connect_ms = (now_us(CLOCK_MONOTONIC) - t_start) / 1000;
    /* Latencies before the writer starts come from no message of ours. */
    nlat = 0;
    for (int i = 0; i < O.readers; i++) cs[i].msgs = 0;

    pthread_t wt, askers[256];
    int nask = 0;
    int64_t deadline, cpu0 = self_cpu_us();
    if (O.tokens) {
        printf("mode=tokens ready=%d\n", held);
        fflush(stdout);
        deadline = now_us(CLOCK_MONOTONIC) + (int64_t)O.seconds * 1000000;
        if (O.ask) {
            ask_paths = paths;
            ask_n = O.readers;
            ask_lat = calloc((size_t)O.readers + 1, sizeof *ask_lat);
            if (!ask_lat) abort();
            for (int i = 0; i < O.readers; i++) ask_lat[i] = -1;
            for (; nask < O.ask_conns && nask < O.readers; nask++)
                if (pthread_create(&askers[nask], NULL, asker_main, NULL)) break;
        }
    } else if (O.fanout) {
        pthread_create(&wt, NULL, writer_main, NULL);
        deadline = 0;
    } else {
        printf("mode=hold readers=%d held=%d refused=%d failed=%d connect_ms=%lld\n", O.readers,
               held, refused, failed, (long long)connect_ms);
        fflush(stdout);
        deadline = now_us(CLOCK_MONOTONIC) + (int64_t)O.hold_s * 1000000;
    }
    int64_t hard_stop = now_us(CLOCK_MONOTONIC) +
                        ((int64_t)(O.tokens ? O.seconds : O.fanout ? O.seconds + O.linger_s : O.hold_s) + 30) *
                            1000000;
    for (;;) {
        int64_t now = now_us(CLOCK_MONOTONIC);
        if (now >= hard_stop) break;
        if (O.tokens) {
            int all = 1;
            for (int i = 0; i < O.readers && all; i++)
                if (cs[i].msgs < O.expect) all = 0;
            if (all || now >= deadline || stop_flag) break;
        } else if (O.fanout) {
            if (!deadline && atomic_load(&writer_done))
                deadline = now + (int64_t)O.linger_s * 1000000;
            if (deadline) {
                long want = atomic_load(&sent_ok);
                int all = 1;
                for (int i = 0; i < O.readers && all; i++)
                    if (cs[i].fd >= 0 && cs[i].msgs < want) all = 0;
                if (all || now >= deadline) break;
            }
        } else if (now >= deadline || stop_flag) {
            break;
        }
        int n = epoll_wait(ep, evs, 512, 20);
        for (int i = 0; i < n; i++) {
            conn *c = &cs[evs[i].data.u32];
            if (c->state == C_DONE) continue;
            conn_event(ep, c, buf, sizeof buf);
        }
    }
    if (O.tokens) {
        stop_flag = 1;      /* (askers still at it stop: their sessions' deltas are missing anyway) */
        for (int i = 0; i < nask; i++) pthread_join(askers[i], NULL);
        int64_t ask_p50 = -1, ask_max = -1;
        if (nask) {
            size_t k = 0;
            for (int i = 0; i < ask_n; i++)
                if (ask_lat[i] >= 0) ask_lat[k++] = ask_lat[i];
            qsort(ask_lat, k, sizeof *ask_lat, cmp64);
            ask_p50 = pct(ask_lat, k, 50);
            ask_max = k ? ask_lat[k - 1] : -1;
        }
        long delivered = 0;
        for (int i = 0; i < O.readers; i++) delivered += cs[i].msgs;
        FILE *tl = O.timeline ? fopen(O.timeline, "w") : NULL;
        for (size_t i = 0; tl && i < nlat; i++) fprintf(tl, "%lld %lld\n", (long long)lat_at[i], (long long)lat[i]);
        if (tl) fclose(tl);
        /* The steady state: the deltas written a second or more after the first one
         * (the sessions' start, all at once, is in the others). */
        int64_t first = INT64_MAX;
        for (size_t i = 0; i < nlat; i++)
            if (lat_at[i] < first) first = lat_at[i];
        size_t nsteady = 0;
        for (size_t i = 0; i < nlat; i++)
            if (lat_at[i] - first >= 1000000) lat_at[nsteady++] = lat[i];
        qsort(lat_at, nsteady, sizeof *lat_at, cmp64);
        qsort(lat, nlat, sizeof *lat, cmp64);
        printf("mode=tokens readers=%d connected=%d expected=%ld delivered=%ld p50_us=%lld p90_us=%lld "
               "p99_us=%lld max_us=%lld cpu_ms=%lld steady=%zu steady_p50_us=%lld steady_p99_us=%lld"
               " ask_p50_us=%lld ask_max_us=%lld ask_failed=%d\n",
               O.readers, held, (long)O.readers * O.expect, delivered, (long long)pct(lat, nlat, 50),
               (long long)pct(lat, nlat, 90), (long long)pct(lat, nlat, 99),
               (long long)(nlat ? lat[nlat - 1] : -1), (long long)((self_cpu_us() - cpu0) / 1000), nsteady,
               (long long)pct(lat_at, nsteady, 50), (long long)pct(lat_at, nsteady, 99), (long long)ask_p50,
               (long long)ask_max, atomic_load(&ask_failed));
    } else if (O.fanout) {
        stop_flag = 1;
        pthread_join(wt, NULL);
        long sent = atomic_load(&sent_ok);
        long delivered = 0;
        for (int i = 0; i < O.readers; i++) delivered += cs[i].msgs;
        qsort(lat, nlat, sizeof *lat, cmp64);
        qsort(app_lat, napp, sizeof *app_lat, cmp64);
        printf("mode=fanout readers=%d connected=%d refused=%d sent=%ld expected=%ld "
               "delivered=%ld p50_us=%lld p90_us=%lld p99_us=%lld max_us=%lld "
               "append_p50_us=%lld append_p99_us=%lld connect_ms=%lld\n",
               O.readers, held, refused, sent, sent * O.readers, delivered,
               (long long)pct(lat, nlat, 50), (long long)pct(lat, nlat, 90),
               (long long)pct(lat, nlat, 99), (long long)(nlat ? lat[nlat - 1] : -1),
               (long long)pct(app_lat, napp, 50), (long long)pct(app_lat, napp, 99),
               (long long)connect_ms);
    } else {
        int dropped = 0;
        for (int i = 0; i < O.readers; i++) dropped += cs[i].dropped;
        printf("dropped=%d\n", dropped);
    }
    for (int i = 0; i < O.readers; i++)
        if (cs[i].fd >= 0) close(cs[i].fd);
    free(cs);
    for (int i = 0; paths && i < O.readers; i++) free(paths[i]);
    free(paths);
    free(lat);
    free(app_lat);
    free(ask_lat);
    return 0;
}

/* Unit tests for runner/curlev.c: libcurl's transfers driven by an epoll set of
 * their sockets. A transfer to a server that never answers ends on libcurl's timer
 * alone (nothing else wakes the loop) without the loop spinning; a transfer removed
 * in flight leaves the set; many transfers to a local server all complete, each
 * socket in the set while it is open and none left after. */
#include "../../runner/curlev.c"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

/* A listening socket on 127.0.0.1 (its port in *port): connections complete in its
 * backlog whether or not it accepts them. */
static int listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 128) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        perror("listener");
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static size_t count_body(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    *(size_t *)ud += size * n;
    return size * n;
}

static CURL *transfer(int port, long timeout_ms, size_t *got)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, count_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, got);
    if (timeout_ms) curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    return e;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One turn of a loop like the runner's: wait on the set (and srv, if >= 0), then
 * let libcurl work. Returns srv's readiness. */
static int turn(curlev_t *ev, int srv)
{
    struct pollfd p[2] = {{curlev_fd(ev), POLLIN, 0}, {srv, POLLIN, 0}};
    poll(p, srv >= 0 ? 2 : 1, (int)curlev_wait(ev, 1000));
    curlev_run(ev, p[0].revents != 0);
    return srv >= 0 && p[1].revents;
}

/* A test's listener, multi handle and epoll set of its sockets. */
typedef struct rig {
    int lfd, port;
    CURLM *multi;
    curlev_t *ev;
} rig;

static rig rig_open(void)
{
    rig r;
    char err[128];
    r.lfd = listener(&r.port);
    CHECK(r.lfd >= 0);
    r.multi = curl_multi_init();
    r.ev = curlev_new(r.multi, err, sizeof err);
    CHECK(r.ev != NULL);
    return r;
}

static void rig_close(rig *r)
{
    curl_multi_cleanup(r->multi);
    curlev_free(r->ev);
    close(r->lfd);
}

static void test_timer_alone(void)
{
    rig r = rig_open();
    int port = r.port;
    CURLM *multi = r.multi;
    curlev_t *ev = r.ev;
    size_t got = 0;
    CURL *e = transfer(port, 300, &got);
    curl_multi_add_handle(multi, e);
    /* Connected (in the backlog), its request sent, then silence: only libcurl's
     * timer can end it, and the loop must wake up for it. */
    CURLcode result = CURLE_OK;
    int done = 0, turns = 0;
    long long until = now_ms() + 10000;
    while (!done && now_ms() < until) {
        turns++;
        turn(ev, -1);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left)))
            if (m->msg == CURLMSG_DONE) result = m->data.result, done = 1;
    }
    CHECK_EQ_INT(done, 1);
    CHECK_EQ_INT(result, CURLE_OPERATION_TIMEDOUT);
    CHECK(turns < 100);     /* woken for the deadline, not turning meanwhile */
    fprintf(stderr, "  timed out after %d turns\n", turns);
    curl_multi_remove_handle(multi, e);
    CHECK_EQ_UINT(curlev_sockets(ev), 0);
    curl_easy_cleanup(e);

    /* Removed in flight (a cancel): its socket leaves the set, nothing is left due. */
    e = transfer(port, 0, &got);
    curl_multi_add_handle(multi, e);
    for (int i = 0; i < 200 && curlev_sockets(ev) == 0; i++) turn(ev, -1);
    CHECK_EQ_UINT(curlev_sockets(ev), 1);
    curl_multi_remove_handle(multi, e);
    CHECK_EQ_UINT(curlev_sockets(ev), 0);
    curl_easy_cleanup(e);
    rig_close(&r);
}

#define MANY 40
static const char ANSWER[] = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello world";

static void test_many(void)
{
    rig rg = rig_open();
    int port = rg.port, lfd = rg.lfd;
    CURLM *multi = rg.multi;
    curlev_t *ev = rg.ev;
    size_t got[MANY];
    memset(got, 0, sizeof got);
    for (int i = 0; i < MANY; i++) curl_multi_add_handle(multi, transfer(port, 10000, &got[i]));
    /* The server: accepts every connection, and answers each once MANY are in (so
     * that every socket is in the set at once), reading the request first. */
    int conns[MANY], nconn = 0, answered = 0, done = 0, ok = 0;
    unsigned peak = 0;
    long long until = now_ms() + 20000;
    while (done < MANY && now_ms() < until) {
        if (turn(ev, lfd)) {
            int c;
            while (nconn < MANY && (c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) conns[nconn++] = c;
        }
        if (curlev_sockets(ev) > peak) peak = curlev_sockets(ev);
        if (nconn == MANY && !answered) {
            for (int i = 0; i < MANY; i++) {
                char req[4096];
                ssize_t r = recv(conns[i], req, sizeof req, 0);     /* (blocking: it was sent) */
                CHECK(r > 0);
                CHECK(send(conns[i], ANSWER, sizeof ANSWER - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof ANSWER - 1));
                close(conns[i]);
            }
            answered = 1;
        }
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            ok += m->data.result == CURLE_OK;
            done++;
            CURL *e = m->easy_handle;
            curl_multi_remove_handle(multi, e);
            curl_easy_cleanup(e);
        }
    }
    CHECK_EQ_INT(done, MANY);
    CHECK_EQ_INT(ok, MANY);
    for (int i = 0; i < MANY; i++) CHECK_EQ_UINT(got[i], 11);
    CHECK_EQ_UINT(peak, MANY);
    CHECK_EQ_UINT(curlev_sockets(ev), 0);
    rig_close(&rg);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    test_timer_alone();
    test_many();
    curl_global_cleanup();
    return TEST_MAIN_END();
}

/* curl-loop: the runner's way of waiting on its provider transfers, alone: N
 * streaming requests to bench/src/stamp-provider on one curl multi handle, driven
 * either as the runner's loop did before (curl_multi_poll on every transfer, then
 * curl_multi_perform, which walks every transfer) or as it does now (runner/curlev.c:
 * an epoll set of libcurl's sockets, curl_multi_socket_action for the ready ones).
 * The write callback only counts the deltas, so what is measured is the loop and
 * libcurl: run it under valgrind --tool=callgrind or strace -c (bench/curl-loop.sh).
 *
 *   curl-loop perform|socket URL N
 *
 * Prints "mode=... transfers=N deltas=D turns=T cpu_us=U" (this process's CPU, from
 * getrusage) when every transfer has ended; exits 1 if one failed or 120 s passed. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../../runner/curlev.c"

static long long deltas;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    (void)ud;
    size_t len = size * n;
    for (const char *s = p, *end = p + len; (s = memmem(s, (size_t)(end - s), "@ts", 3)); s += 3) deltas++;
    return len;
}

static long long cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "perform") && strcmp(argv[1], "socket"))) {
        fprintf(stderr, "usage: curl-loop perform|socket URL N\n");
        return 2;
    }
    char *end;
    long nl = strtol(argv[3], &end, 10);
    if (*end || nl < 1 || nl > 4000) {
        fprintf(stderr, "curl-loop: N from 1 to 4000\n");
        return 2;
    }
    int sock = !strcmp(argv[1], "socket"), n = (int)nl;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    char err[128];
    curlev_t *ev = sock ? curlev_new(multi, err, sizeof err) : NULL;
    if (sock && !ev) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    for (int i = 0; i < n; i++) {   /* as runner/request.c sets up a provider request */
        CURL *e = curl_easy_init();
        curl_easy_setopt(e, CURLOPT_URL, argv[2]);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "{\"stream\": true}");
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 4096L);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 120L);
        curl_multi_add_handle(multi, e);
    }
    /* Two descriptors of the loop's own, as the runner's (its wake fd, its signal pipe). */
    int p1[2], p2[2];
    if (pipe(p1) || pipe(p2)) return 1;
    long long c0 = cpu_us(), turns = 0;
    time_t until = time(NULL) + 120;
    int done = 0, failed = 0;
    while (done < n && time(NULL) < until) {
        turns++;
        if (sock) {
            struct pollfd pfd[3] = {{p1[0], POLLIN, 0}, {p2[0], POLLIN, 0}, {curlev_fd(ev), POLLIN, 0}};
            int wait = (int)curlev_wait(ev, 1000);
            poll(pfd, 3, wait);
            curlev_run(ev, pfd[2].revents != 0);
        } else {
            struct curl_waitfd extra[2] = {{p1[0], CURL_WAIT_POLLIN, 0}, {p2[0], CURL_WAIT_POLLIN, 0}};
            int numfds, running;
            curl_multi_poll(multi, extra, 2, 1000, &numfds);
            curl_multi_perform(multi, &running);
        }
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            failed += m->data.result != CURLE_OK;
            done++;
            CURL *e = m->easy_handle;
            curl_multi_remove_handle(multi, e);
            curl_easy_cleanup(e);
        }
    }
    long long c1 = cpu_us();
    printf("mode=%s transfers=%d deltas=%lld turns=%lld cpu_us=%lld\n", argv[1], n, deltas, turns, c1 - c0);
    curl_slist_free_all(h);
    curl_multi_cleanup(multi);
    curlev_free(ev);
    curl_global_cleanup();
    return done == n && !failed ? 0 : 1;
}

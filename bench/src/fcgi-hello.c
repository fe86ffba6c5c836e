/* fcgi-hello: the smallest FastCGI responder with dstream-fcgi's process and thread
 * layout, the ceiling any FastCGI request can reach behind the same nginx.
 *
 *   fcgi-hello --listen SOCKET [--procs N] [--threads N]
 *
 * Defaults come from DSTREAM_PROCS [1] and DSTREAM_THREADS [32], like the pool.
 * The parent opens the socket and forks the processes; each runs the threads, and
 * each thread loops on FCGX_Accept_r with its own request, as fcgi/pool.c does
 * (no accept mutex). A request's body is read to the end and dropped; the answer
 * is 200 "hello\n", or, with `bytes=N` in the query string, N bytes of 'x' (the
 * ceiling for a response the size of a catch-up read). SIGTERM stops everything.
 *
 * Built by bench/compare.sh, not by the Makefile (it links -lfcgi, not libdstream):
 *   cc -O2 -o build/bench/fcgi-hello bench/src/fcgi-hello.c -lfcgi -lpthread */
#define _GNU_SOURCE
#include <errno.h>
#include <fcgiapp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define BODY_MAX (64L << 20)    /* largest bytes=N answered */

static long num(const char *s, long min, long max, const char *what)
{
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno || end == s || *end || n < min || n > max) {
        fprintf(stderr, "fcgi-hello: %s=%s is not a number in [%ld, %ld]\n", what, s, min, max);
        exit(2);
    }
    return (long)n;
}

/* N from "bytes=N" in the query string; -1 without it. */
static long query_bytes(const char *qs)
{
    const char *p = qs ? strstr(qs, "bytes=") : NULL;
    if (!p || (p != qs && p[-1] != '&')) return -1;
    char *end;
    errno = 0;
    long long n = strtoll(p + 6, &end, 10);
    if (errno || end == p + 6 || n < 0 || n > BODY_MAX) return -1;
    return (long)n;
}

static void *worker(void *arg)
{
    int fd = *(int *)arg;
    FCGX_Request r;
    static char filler[65536];
    char sink[16384];
    memset(filler, 'x', sizeof filler);     /* every thread writes the same bytes */
    FCGX_InitRequest(&r, fd, 0);
    for (;;) {
        if (FCGX_Accept_r(&r) < 0) {
            usleep(10000);      /* no hot loop on a broken socket */
            continue;
        }
        while (FCGX_GetStr(sink, sizeof sink, r.in) > 0) {}
        long n = query_bytes(FCGX_GetParam("QUERY_STRING", r.envp));
        if (n < 0) {
            FCGX_PutS("Status: 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\n"
                      "hello\n", r.out);
        } else {
            FCGX_FPrintF(r.out,
                         "Status: 200 OK\r\nContent-Type: application/octet-stream\r\n"
                         "Content-Length: %ld\r\n\r\n", n);
            while (n > 0) {
                int chunk = n > (long)sizeof filler ? (int)sizeof filler : (int)n;
                if (FCGX_PutStr(filler, chunk, r.out) != chunk) break;
                n -= chunk;
            }
        }
        FCGX_Finish_r(&r);
    }
    return NULL;
}

static _Noreturn void child(int fd, int threads)
{
    signal(SIGTERM, SIG_DFL);   /* the parent's handler is for the parent */
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);   /* DSTREAM_STACK_KB's default */
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    static int lfd;
    lfd = fd;
    for (int i = 0; i < threads; i++) {
        pthread_t t;
        int rc = pthread_create(&t, &attr, worker, &lfd);
        if (rc) {
            fprintf(stderr, "fcgi-hello: thread %d: %s\n", i, strerror(rc));
            break;
        }
    }
    for (;;) pause();           /* SIGTERM's default action ends the process */
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    const char *listen = NULL, *v;
    int procs = (v = getenv("DSTREAM_PROCS")) && *v ? (int)num(v, 1, 256, "DSTREAM_PROCS") : 1;
    int threads =
        (v = getenv("DSTREAM_THREADS")) && *v ? (int)num(v, 1, 16384, "DSTREAM_THREADS") : 32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--listen") && i + 1 < argc) listen = argv[++i];
        else if (!strcmp(argv[i], "--procs") && i + 1 < argc) procs = (int)num(argv[++i], 1, 256, "--procs");
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = (int)num(argv[++i], 1, 16384, "--threads");
        else {
            fprintf(stderr, "usage: fcgi-hello --listen SOCKET [--procs N] [--threads N]\n");
            return 2;
        }
    }
    if (!listen) {
        fprintf(stderr, "fcgi-hello: --listen SOCKET is required\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (FCGX_Init() != 0) {
        fprintf(stderr, "fcgi-hello: FCGX_Init failed\n");
        return 1;
    }
    unlink(listen);
    int fd = FCGX_OpenSocket(listen, 1024);
    if (fd < 0) {
        fprintf(stderr, "fcgi-hello: cannot listen on %s\n", listen);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    pid_t *kids = calloc((size_t)procs, sizeof *kids);
    if (!kids) return 1;
    for (int i = 0; i < procs; i++) {
        kids[i] = fork();
        if (kids[i] == 0) child(fd, threads);
        if (kids[i] < 0) {
            perror("fcgi-hello: fork");
            break;
        }
    }
    fprintf(stderr, "fcgi-hello: %d processes x %d threads on %s\n", procs, threads, listen);
    while (!stop) pause();
    for (int i = 0; i < procs; i++)
        if (kids[i] > 0) kill(kids[i], SIGTERM);
    for (int i = 0; i < procs; i++)
        if (kids[i] > 0) waitpid(kids[i], NULL, 0);
    unlink(listen);
    free(kids);
    return 0;
}

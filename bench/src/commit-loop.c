/* commit-loop: what one thread's commits cost it, checkpoints included.
 *
 *   commit-loop DBPATH COMMITS [BYTES]
 *
 * Like a runner's loop: one thread appends a message of BYTES (default 2048) to
 * one of 200 streams in turn, each append its own group commit (synchronous=FULL,
 * lib/log's defaults), COMMITS times. The WAL passes the checkpoint's 1,000 pages
 * every few hundred commits. Prints one line: the commits' wall time p50, p99 and
 * max in microseconds, the committing thread's CPU per commit (CLOCK_THREAD_CPUTIME_ID:
 * what the loop itself spent, checkpoints it ran included), and the whole process's
 * (getrusage: every thread's, a checkpointer's included), and the -wal file's size at
 * the end. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"

#define STREAMS 200

static int64_t ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: commit-loop DBPATH COMMITS [BYTES]\n");
        return 2;
    }
    const char *db = argv[1];
    long n = strtol(argv[2], NULL, 10), bytes = argc > 3 ? strtol(argv[3], NULL, 10) : 2048;
    if (n <= 0 || bytes <= 0 || bytes > 1 << 20) return 2;
    char err[256] = "";
    log_opts o = {1, 5000, 1, 0, 0};
    log_t *l = log_open(db, &o, err, sizeof err);
    log_conn_t *c = l ? log_conn_open(l, err, sizeof err) : NULL;
    if (!c) {
        fprintf(stderr, "commit-loop: %s\n", err);
        return 1;
    }
    char path[32];
    for (int i = 0; i < STREAMS; i++) {
        log_create_req r;
        memset(&r, 0, sizeof r);
        snprintf(path, sizeof path, "s%d", i);
        r.path = path;
        r.content_type = "application/octet-stream";
        r.ttl_s = r.expires_ms = -1;
        if (log_create(c, &r)) return 1;
    }
    char *msg = calloc(1, (size_t)bytes);
    int64_t *lat = calloc((size_t)n, sizeof *lat);
    if (!msg || !lat) return 1;
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    int64_t cpu0 = ns(CLOCK_THREAD_CPUTIME_ID), failed = 0;
    for (long i = 0; i < n; i++) {
        log_msg m = {msg, (size_t)bytes};
        log_append_req a;
        memset(&a, 0, sizeof a);
        snprintf(path, sizeof path, "s%ld", i % STREAMS);
        a.path = path;
        a.content_type = "application/octet-stream";
        a.msgs = &m;
        a.nmsgs = 1;
        int64_t t0 = ns(CLOCK_MONOTONIC);
        failed += log_append(c, &a) != 0;
        lat[i] = (ns(CLOCK_MONOTONIC) - t0) / 1000;
    }
    int64_t cpu = ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    getrusage(RUSAGE_SELF, &r1);
    int64_t proc_us = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1000000 +
                      (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
    qsort(lat, (size_t)n, sizeof *lat, cmp);
    char wal[4200];
    struct stat st;
    snprintf(wal, sizeof wal, "%s-wal", db);
    long long walsz = stat(wal, &st) ? -1 : (long long)st.st_size;
    printf("commits=%ld failed=%" PRId64 " p50_us=%" PRId64 " p99_us=%" PRId64 " max_us=%" PRId64
           " thread_cpu_us=%.1f process_cpu_us=%.1f wal_bytes=%lld\n",
           n, failed, lat[n / 2], lat[n * 99 / 100], lat[n - 1], cpu / 1000.0 / n, (double)proc_us / n, walsz);
    log_conn_close(c);
    log_close(l);
    free(msg);
    free(lat);
    return failed ? 1 : 0;
}

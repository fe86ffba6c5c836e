/* wake-latency: how long after a commit in one process does a waiter in another
 * process wake up?
 *
 *   wake-latency DBPATH [--mode inotify|poll] [--poll-us N] [--count N] [--interval-ms N]
 *
 * The parent creates a stream and forks a writer. The writer opens its own log_t
 * and appends --count 16-byte messages, one every --interval-ms; each message holds
 * its sequence number and the CLOCK_MONOTONIC time taken just before log_append.
 * After each append returns (that is, after the COMMIT and its fsync) the writer
 * sends (seq, t_before, t_committed) to the parent over a pipe. The parent runs the
 * process's commit watcher (lib/wake) in the chosen mode with one waiter on the
 * stream; when the waiter's eventfd fires it notes the time, reads every new
 * message and records that time as the message's receive time.
 *
 * Reported, in microseconds (p50, p90, p99, max):
 *   commit-to-wake   receive time - t_committed: what the watcher adds
 *   append-to-wake   receive time - t_before: what a live reader sees end to end
 *   append           t_committed - t_before: the commit itself (fsync included)
 * commit-to-wake can be slightly negative: the commit is visible to readers a little
 * before log_append has returned to the writer and read the clock.
 *
 * The synchronous setting is the library default (FULL). The whole run is bounded:
 * it gives up after count * interval + 10 s and reports what it received. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "errs.h"
#include "log.h"
#include "wake.h"

#define STREAM_PATH_FMT "/bench/wake-latency-%ld"
#define MSG_LEN 16

typedef struct report {
    uint64_t seq;
    int64_t t_before;
    int64_t t_committed;
} report;

typedef struct options {
    const char *db;
    int inotify;
    int poll_us;
    long count;
    long interval_ms;
} options;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void usage(void)
{
    fprintf(stderr, "usage: wake-latency DBPATH [--mode inotify|poll] [--poll-us N] "
                    "[--count N] [--interval-ms N]\n");
    exit(2);
}

static long parse_num(const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno || end == s || *end || n < min || n > max) {
        fprintf(stderr, "wake-latency: %s is not a number in [%ld, %ld]\n", s, min, max);
        exit(2);
    }
    return (long)n;
}

static void parse_args(int argc, char **argv, options *o)
{
    o->db = NULL;
    o->inotify = 1;
    o->poll_us = 1000;
    o->count = 500;
    o->interval_ms = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (o->db) usage();
            o->db = a;
            continue;
        }
        if (i + 1 >= argc) usage();
        const char *v = argv[++i];
        if (!strcmp(a, "--mode")) {
            if (!strcmp(v, "inotify")) o->inotify = 1;
            else if (!strcmp(v, "poll")) o->inotify = 0;
            else usage();
        } else if (!strcmp(a, "--poll-us")) {
            o->poll_us = (int)parse_num(v, 1, 1000000);    /* <= 1 s keeps the run bounded */
        } else if (!strcmp(a, "--count")) {
            o->count = parse_num(v, 1, 10000000);
        } else if (!strcmp(a, "--interval-ms")) {
            o->interval_ms = parse_num(v, 0, 60000);
        } else {
            usage();
        }
    }
    if (!o->db) usage();
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- writer (child process) --------------------------------------------------- */

static int writer_main(const options *o, const char *path, int go_fd, int rep_fd)
{
    char err[256], go;
    /* Wait until the parent's waiter is watching the stream. */
    if (read(go_fd, &go, 1) != 1) return 1;
    log_t *lg = log_open(o->db, NULL, err, sizeof err);
    log_conn_t *c = lg ? log_conn_open(lg, err, sizeof err) : NULL;
    if (!c) {
        fprintf(stderr, "wake-latency writer: %s\n", err);
        return 1;
    }
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long i = 0; i < o->count; i++) {
        next.tv_nsec += o->interval_ms * 1000000;
        while (next.tv_nsec >= 1000000000) {
            next.tv_nsec -= 1000000000;
            next.tv_sec++;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {}
        unsigned char msg[MSG_LEN];
        report rp = {(uint64_t)i, 0, 0};
        log_append_req r;
        memset(&r, 0, sizeof r);
        r.path = path;
        r.content_type = "application/octet-stream";
        log_msg m = {msg, sizeof msg};
        r.msgs = &m;
        r.nmsgs = 1;
        rp.t_before = now_ns();
        memcpy(msg, &rp.seq, 8);
        memcpy(msg + 8, &rp.t_before, 8);
        int rc = log_append(c, &r);
        rp.t_committed = now_ns();
        if (rc < 0) {
            fprintf(stderr, "wake-latency writer: append %ld: %s\n", i, errs_str(rc));
            return 1;
        }
        if (write_all(rep_fd, &rp, sizeof rp)) return 1;
    }
    log_conn_close(c);
    log_close(lg);
    return 0;
}

/* ---- reader (parent process) ------------------------------------------------- */

typedef struct reader {
    long count;
    int64_t t_wake;      /* when the current wake-up was noticed */
    int64_t *t_before;   /* per seq, from the message */
    int64_t *t_recv;     /* per seq */
    long received;
    long bad;            /* malformed or out-of-range messages */
} reader;

static int on_msg(void *ud, const void *data, size_t len, offset_t at)
{
    reader *rd = ud;
    uint64_t seq;
    int64_t tb;
    if (len != MSG_LEN) {
        rd->bad++;
        return 0;
    }
    memcpy(&seq, data, 8);
    memcpy(&tb, (const char *)data + 8, 8);
    if (seq >= (uint64_t)rd->count || rd->t_recv[seq]) {
        rd->bad++;
        return 0;
    }
    rd->t_before[seq] = tb;
    rd->t_recv[seq] = rd->t_wake;
    rd->received++;
    return 0;
}

/* CPU time of this process (all threads), in ns. */
static int64_t cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
           ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Print "name n=N p50=.. p90=.. p99=.. max=.." in microseconds; sorts v. */
static void print_dist(const char *name, int64_t *v, long n)
{
    if (n == 0) {
        printf("%s n=0\n", name);
        return;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    /* Nearest-rank percentiles. */
    long i50 = (n * 50 + 99) / 100 - 1, i90 = (n * 90 + 99) / 100 - 1,
         i99 = (n * 99 + 99) / 100 - 1;
    printf("%s n=%ld p50=%.1f p90=%.1f p99=%.1f max=%.1f\n", name, n, v[i50] / 1e3,
           v[i90] / 1e3, v[i99] / 1e3, v[n - 1] / 1e3);
}

int main(int argc, char **argv)
{
    int64_t t_prog = now_ns();
    options o;
    parse_args(argc, argv, &o);
    char path[128], err[256];
    snprintf(path, sizeof path, STREAM_PATH_FMT, (long)getpid());

    int go[2], rep[2];
    if (pipe(go) || pipe(rep)) {
        perror("wake-latency: pipe");
        return 1;
    }
    /* Fork before this process opens SQLite or starts threads. */
    pid_t child = fork();
    if (child < 0) {
        perror("wake-latency: fork");
        return 1;
    }
    if (child == 0) {
        close(go[1]);
        close(rep[0]);
        _exit(writer_main(&o, path, go[0], rep[1]));
    }
    close(go[0]);
    close(rep[1]);

    int status = 1;
    int64_t *t_before = calloc((size_t)o.count, sizeof *t_before);
    int64_t *t_recv = calloc((size_t)o.count, sizeof *t_recv);
    int64_t *t_commit = calloc((size_t)o.count, sizeof *t_commit);
    int64_t *t_before_w = calloc((size_t)o.count, sizeof *t_before_w);
    int64_t *d = calloc((size_t)o.count, sizeof *d);
    if (!t_before || !t_recv || !t_commit || !t_before_w || !d) {
        fprintf(stderr, "wake-latency: out of memory\n");
        abort();
    }
    reader rd = {o.count, 0, t_before, t_recv, 0, 0};
    log_t *lg = NULL;
    log_conn_t *c = NULL;
    wake_t *w = NULL;
    wake_waiter_t *wt = NULL;
    int child_done = 0, rep_open = 1;
    long reports = 0, wakeups = 0, empty_wakeups = 0;

    if (!(lg = log_open(o.db, NULL, err, sizeof err)) || !(c = log_conn_open(lg, err, sizeof err))) {
        fprintf(stderr, "wake-latency: %s\n", err);
        goto out;
    }
    log_create_req cr;
    memset(&cr, 0, sizeof cr);
    cr.path = path;
    cr.content_type = "application/octet-stream";
    cr.ttl_s = -1;
    cr.expires_ms = -1;
    int rc = log_create(c, &cr);
    if (rc < 0) {
        fprintf(stderr, "wake-latency: create %s: %s\n", path, errs_str(rc));
        goto out;
    }
    wake_opts wo = {o.inotify, o.poll_us};
    if (!(w = wake_start(lg, &wo, err, sizeof err))) {
        fprintf(stderr, "wake-latency: wake_start: %s\n", err);
        goto out;
    }
    if (!(wt = wake_waiter_new(w))) {
        fprintf(stderr, "wake-latency: no waiter\n");
        goto out;
    }
    wake_watch(wt, cr.info.id);
    /* Let the watcher go quiet after the create's own commit, so the first
     * measured commit does not find it already polling. */
    struct timespec settle = {0, 200 * 1000 * 1000};
    nanosleep(&settle, NULL);
    wake_clear(wt);

    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = path;
    rr.kind = OFFSET_START;
    rr.max_bytes = (size_t)-1;

    int64_t t_start = now_ns(), cpu_start = cpu_ns();
    /* Everything, set-up included, ends within count * interval + 10 s. */
    int64_t deadline = t_prog + (int64_t)(o.count * o.interval_ms + 10000) * 1000000;
    if (write_all(go[1], "g", 1)) {
        fprintf(stderr, "wake-latency: writer did not start\n");
        goto out;
    }
    while (rd.received < o.count || rep_open) {
        int64_t now = now_ns();
        if (now >= deadline) {
            fprintf(stderr, "wake-latency: deadline reached with %ld of %ld messages\n",
                    rd.received, o.count);
            break;
        }
        struct pollfd pf[2] = {{wake_waiter_fd(wt), POLLIN, 0}, {rep_open ? rep[0] : -1, POLLIN, 0}};
        int left_ms = (int)((deadline - now) / 1000000) + 1;
        int n = poll(pf, 2, left_ms);
        int64_t t = now_ns();
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        if (pf[0].revents & POLLIN) {
            rd.t_wake = t;
            wake_clear(wt);
            wakeups++;
            long before = rd.received;
            do {
                rr.from = rr.next;
                rr.kind = rr.next.seq ? OFFSET_AT : OFFSET_START;
                if ((rc = log_read(c, &rr, on_msg, &rd)) < 0) {
                    fprintf(stderr, "wake-latency: read: %s\n", errs_str(rc));
                    goto out;
                }
            } while (!rr.up_to_date);
            if (rd.received == before) empty_wakeups++;
        }
        if (pf[1].revents & (POLLIN | POLLHUP)) {
            report rp;
            ssize_t got = read(rep[0], &rp, sizeof rp);
            if (got == (ssize_t)sizeof rp && rp.seq < (uint64_t)o.count) {
                t_commit[rp.seq] = rp.t_committed;
                t_before_w[rp.seq] = rp.t_before;
                reports++;
            } else if (got <= 0) {
                /* The writer is done (or failed): anything still missing has
                 * a second to arrive. */
                rep_open = 0;
                if (deadline > t + 1000000000) deadline = t + 1000000000;
            }
        }
    }
    /* The reader's CPU: the watcher thread plus reading the messages. */
    double cpu_pct = 100.0 * (double)(cpu_ns() - cpu_start) / (double)(now_ns() - t_start);
    if (!rep_open) {
        /* The writer closed its end: it is exiting. */
        int ws;
        if (waitpid(child, &ws, 0) == child) {
            child_done = 1;
            if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
                fprintf(stderr, "wake-latency: writer failed (status %d)\n", ws);
        }
    }

    wake_stats st;
    wake_get_stats(w, &st);
    printf("mode=%s poll_us=%d count=%ld interval_ms=%ld received=%ld reports=%ld "
           "wakeups=%ld empty_wakeups=%ld bad=%ld watcher_events=%" PRIu64
           " watcher_checks=%" PRIu64 " reader_cpu_pct=%.2f\n",
           o.inotify ? "inotify" : "poll", o.inotify ? 0 : o.poll_us, o.count, o.interval_ms,
           rd.received, reports, wakeups, empty_wakeups, rd.bad, st.events, st.checks, cpu_pct);
    long n = 0;
    for (long i = 0; i < o.count; i++)
        if (t_recv[i] && t_commit[i]) d[n++] = t_recv[i] - t_commit[i];
    print_dist("commit_to_wake_us", d, n);
    n = 0;
    for (long i = 0; i < o.count; i++)
        if (t_recv[i]) d[n++] = t_recv[i] - t_before[i];
    print_dist("append_to_wake_us", d, n);
    n = 0;
    for (long i = 0; i < o.count; i++)
        if (t_commit[i]) d[n++] = t_commit[i] - t_before_w[i];
    print_dist("append_us", d, n);
    status = rd.received == o.count ? 0 : 1;

out:
    if (!child_done) {
        /* Only our own writer, by its pid. */
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    close(go[1]);
    close(rep[0]);
    wake_waiter_free(wt);
    wake_stop(w);
    log_conn_close(c);
    log_close(lg);
    free(t_before);
    free(t_recv);
    free(t_commit);
    free(t_before_w);
    free(d);
    return status;
}

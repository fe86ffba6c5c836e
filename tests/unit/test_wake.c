/* Unit tests for lib/wake.c on a database in a temporary directory, once with the
 * inotify watch and once in poll mode.
 *
 * A waiter on a stream must become readable after a commit to that stream made by
 * this log_t, by a second log_t on the same file (what another process looks
 * like to SQLite), and by a real second process (this binary run again with
 * --append); it must stay quiet for commits to other streams and after
 * wake_unwatch. wake_watch_any, wake_all, wake_clear and the statistics are
 * checked too.
 *
 * With DSTREAM_TEST_PG naming a PostgreSQL cluster (tests/run-unit.sh starts one),
 * both modes run again on the PostgreSQL engine, each on a database of its own
 * (tests/unit/test_db.h): its feed is its LISTEN connection (the descriptor) and
 * the xid cursor.
 *
 * Every wait is bounded: a wake-up is waited for WAKE_WAIT_MS at most, silence
 * is checked for QUIET_MS, the child process is killed if it outlives its
 * deadline, and alarm() ends the whole binary if anything still hangs. */
#include "wake.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "timefmt.h"
#include "test.h"
#include "test_db.h"

#define WAKE_WAIT_MS 5000   /* a wake-up that should come comes well within this */
#define QUIET_MS 300        /* a wake-up that should not come has had its chance */
#define CHILD_WAIT_MS 20000 /* the --append child must have finished by then */
#define WATCHDOG_S 120      /* the whole binary */

static char dir[256], dbpath[1200];
static log_t *lg, *lg2;        /* lg has the watcher; lg2 plays another process */
static log_conn_t *c1, *c2;    /* on lg, on lg2 */
static wake_t *w;
static int64_t id_a, id_b, id_c;
static int inotify_mode;

/* ---- helpers ---------------------------------------------------------------------- */

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 1 if fd becomes readable within ms. */
static int readable(int fd, int ms)
{
    long long end = mono_ms() + ms;
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        long long left = end - mono_ms();
        int n = poll(&pf, 1, left > 0 ? (int)left : 0);
        if (n > 0) return (pf.revents & POLLIN) != 0;
        if (n == 0 || errno != EINTR) return 0;
    }
}

/* 1 if the waiter is woken within ms; consumes the wake-up. */
static int woken(wake_waiter_t *wt, int ms)
{
    int r = readable(wake_waiter_fd(wt), ms);
    if (r) wake_clear(wt);
    return r;
}

static int64_t create(log_conn_t *c, const char *path)
{
    log_create_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.content_type = "text/plain";
    r.ttl_s = r.expires_ms = -1;
    return log_create(c, &r) == 0 ? r.info.id : -1;
}

/* Append msg to path, and close the stream with it if close. */
static int append_close(log_conn_t *c, const char *path, const char *msg, int close)
{
    log_msg m = {msg, strlen(msg)};
    log_append_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.content_type = "text/plain";
    r.msgs = &m;
    r.nmsgs = 1;
    r.close = close;
    return log_append(c, &r);
}

static int append(log_conn_t *c, const char *path, const char *msg) { return append_close(c, path, msg, 0); }

/* The first waiter of a quiet process makes the watcher look once for commits it
 * did not watch for, which may wake waiters spuriously (allowed: a woken waiter
 * re-reads). Tests that count wake-ups let that pass first. */
static void settle(wake_waiter_t *a, wake_waiter_t *b)
{
    struct timespec ts = {0, QUIET_MS * 1000000L};
    nanosleep(&ts, NULL);
    if (a) wake_clear(a);
    if (b) wake_clear(b);
}

static wake_stats stats(void)
{
    wake_stats st;
    wake_get_stats(w, &st);
    return st;
}

/* ---- a second process ------------------------------------------------------------- */

/* Child mode: open the database at db, append one message to stream path, exit
 * 0 on success. */
static int child_append(const char *db, const char *path)
{
    char err[256] = "";
    log_opts o = {0, 5000, 1, 0, 0};
    log_t *l = log_open(db, &o, err, sizeof err);
    log_conn_t *c = l ? log_conn_open(l, err, sizeof err) : NULL;
    int rc = c ? append(c, path, "from another process") : -1;
    if (!c) fprintf(stderr, "child: %s\n", err);
    log_conn_close(c);
    log_close(l);
    return rc == 0 ? 0 : 1;
}

/* Run this binary again as "--append db path" (exec right after fork: the
 * parent has threads). Returns the pid or -1. */
static pid_t spawn_append(const char *path)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "test_wake", "--append", dbpath, path, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Wait for pid with a deadline; kill it if it is late. Returns its exit status,
 * or -1. */
static int reap(pid_t pid, int ms)
{
    long long end = mono_ms() + ms;
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (r < 0) return -1;
        if (mono_ms() >= end) {
            fprintf(stderr, "child %d did not finish in %d ms: killed\n", (int)pid, ms);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* ---- the tests -------------------------------------------------------------------- */

/* wake_follow on a thread (a reader of lg2, as dstream tail is another process):
 * what it collected, joined with '|'. */
typedef struct {
    const char *path;
    int follow;
    volatile sig_atomic_t stop;
    char got[256];
    size_t n, pages;
    int rc, done;
} follower;

static int collect(void *ud, const void *data, size_t len, offset_t at)
{
    follower *f = ud;
    (void)at;
    if (f->n + len + 2 >= sizeof f->got) return -100;
    if (f->n) f->got[f->n++] = '|';
    memcpy(f->got + f->n, data, len);
    f->n += len;
    f->got[f->n] = 0;
    return 0;
}

static void collected_page(void *ud) { ((follower *)ud)->pages++; }

static void *follow_main(void *arg)
{
    follower *f = arg;
    char err[256] = "";
    log_conn_t *c = log_conn_open(lg2, err, sizeof err);
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = f->path;
    rr.kind = OFFSET_START;
    f->rc = c ? wake_follow(lg2, c, &rr, collect, collected_page, f, f->follow, &f->stop, err, sizeof err) : -99;
    log_conn_close(c);
    __atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* 1 when the follower has finished within ms. */
static int follower_done(follower *f, int ms)
{
    long long end = mono_ms() + ms;
    while (!__atomic_load_n(&f->done, __ATOMIC_ACQUIRE)) {
        if (mono_ms() > end) return 0;
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 1;
}

/* 1 when the follower has collected want within ms. */
static int follower_has(follower *f, const char *want, int ms)
{
    long long end = mono_ms() + ms;
    for (;;) {
        char now[sizeof f->got];
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        memcpy(now, f->got, sizeof now);
        now[sizeof now - 1] = 0;
        if (!strcmp(now, want)) return 1;
        if (mono_ms() > end) return 0;
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* wake_follow: what is there, then what comes, until the stream is closed; without
 * follow it ends when up to date; *stop ends a follow of a stream left open. */
static void test_follow(void)
{
    if (!CHECK(create(c1, "/f") > 0 && create(c1, "/g") > 0)) return;
    CHECK_EQ_INT(append(c1, "/f", "one"), 0);
    follower a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.path = "/f";
    a.follow = 0;
    follow_main(&a);
    CHECK_EQ_INT(a.rc, 0);
    CHECK_EQ_STR(a.got, "one");
    CHECK(a.pages >= 1);

    memset(&a, 0, sizeof a);
    a.path = "/f";
    a.follow = 1;
    b.path = "/g";
    b.follow = 1;
    pthread_t ta, tb;
    if (!CHECK(pthread_create(&ta, NULL, follow_main, &a) == 0)) return;
    if (!CHECK(pthread_create(&tb, NULL, follow_main, &b) == 0)) {
        a.stop = 1;
        pthread_join(ta, NULL);
        return;
    }
    CHECK(follower_has(&a, "one", WAKE_WAIT_MS));
    CHECK_EQ_INT(append(c1, "/f", "two"), 0);
    CHECK(follower_has(&a, "one|two", WAKE_WAIT_MS));
    /* A commit through the follower's own log_t. */
    CHECK_EQ_INT(append(c2, "/f", "three"), 0);
    CHECK(follower_has(&a, "one|two|three", WAKE_WAIT_MS));
    CHECK_EQ_INT(append_close(c1, "/f", "last", 1), 0);
    CHECK(follower_done(&a, WAKE_WAIT_MS));
    CHECK_EQ_INT(a.rc, 0);
    CHECK_EQ_STR(a.got, "one|two|three|last");
    /* /g stays open: the follow ends when asked (looked at every WAKE_FOLLOW_LOOK_MS). */
    CHECK_EQ_INT(append(c1, "/g", "g1"), 0);
    CHECK(follower_has(&b, "g1", WAKE_WAIT_MS));
    CHECK(!follower_done(&b, QUIET_MS));
    b.stop = 1;
    CHECK(follower_done(&b, WAKE_FOLLOW_LOOK_MS + WAKE_WAIT_MS));
    CHECK_EQ_INT(b.rc, 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
}

/* A commit through another log_t on the same file (another process, to SQLite):
 * noticed through the -wal file (inotify) or the poll. */
static void test_other_log(void)
{
    wake_waiter_t *wa = wake_waiter_new(w);
    if (!CHECK(wa != NULL)) return;
    wake_watch(wa, id_a);
    settle(wa, NULL);
    wake_stats st0 = stats();
    CHECK(!woken(wa, 0));
    CHECK_EQ_INT(append(c2, "/a", "x"), 0);
    CHECK(woken(wa, WAKE_WAIT_MS));
    wake_stats st1 = stats();
    CHECK_EQ_UINT(st1.wakeups, st0.wakeups + 1);
    CHECK(st1.checks > st0.checks);
    if (inotify_mode) CHECK(st1.events > st0.events);
    else CHECK_EQ_UINT(st1.events, 0);
    /* Once cleared it stays quiet until the next commit. */
    CHECK(!woken(wa, QUIET_MS));
    /* And the next commit wakes it again, without a new wake_watch. */
    CHECK_EQ_INT(append(c2, "/a", "y"), 0);
    CHECK(woken(wa, WAKE_WAIT_MS));
    CHECK_EQ_UINT(stats().wakeups, st0.wakeups + 2);
    wake_waiter_free(wa);
}

/* An event means a commit is visible, so the watcher looks once per commit of
 * another log_t, and not again until the next one: no polling in between (the
 * SQLite feed used to watch the -wal file, whose event comes before the commit is
 * visible, and then looked every 100 us to 2 ms for 50 ms after each). Bounded by
 * one look per commit, plus the once-a-second fallback look, plus one. */
#define LOOK_COMMITS 20
static void test_looks_per_commit(void)
{
    wake_waiter_t *wa = wake_waiter_new(w);
    if (!CHECK(wa != NULL)) return;
    wake_watch(wa, id_a);
    settle(wa, NULL);
    wake_stats st0 = stats();
    long long t0 = mono_ms();
    int woke = 0;
    for (int i = 0; i < LOOK_COMMITS; i++) {
        CHECK_EQ_INT(append(c2, "/a", "look"), 0);
        woke += woken(wa, WAKE_WAIT_MS);
        /* What a hot poller would do between commits: give it the time. */
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    wake_stats st1 = stats();
    long long secs = (mono_ms() - t0) / 1000 + 1;
    CHECK_EQ_INT(woke, LOOK_COMMITS);
    uint64_t looks = st1.looks - st0.looks;
    if (!CHECK(looks <= (uint64_t)(LOOK_COMMITS + secs + 1)))
        fprintf(stderr, "  %llu looks for %d commits in %lld s\n", (unsigned long long)looks, LOOK_COMMITS, secs);
    wake_waiter_free(wa);
}

/* A commit of this log_t (the watcher is poked directly). */
static void test_same_log(void)
{
    wake_waiter_t *wa = wake_waiter_new(w);
    if (!CHECK(wa != NULL)) return;
    wake_watch(wa, id_a);
    settle(wa, NULL);
    wake_stats st0 = stats();
    CHECK_EQ_INT(append(c1, "/a", "z"), 0);
    CHECK(woken(wa, WAKE_WAIT_MS));
    CHECK_EQ_UINT(stats().wakeups, st0.wakeups + 1);
    CHECK(!woken(wa, QUIET_MS));
    wake_waiter_free(wa);
}

/* A commit to another stream wakes that stream's waiter, not this one. */
static void test_other_stream(void)
{
    wake_waiter_t *wa = wake_waiter_new(w), *wb = wake_waiter_new(w);
    if (!CHECK(wa && wb)) goto out;
    wake_watch(wa, id_a);
    wake_watch(wb, id_b);
    settle(wa, wb);
    wake_stats st0 = stats();
    CHECK_EQ_INT(append(c1, "/b", "1"), 0);
    CHECK(woken(wb, WAKE_WAIT_MS));
    CHECK(!woken(wa, QUIET_MS));
    CHECK_EQ_INT(append(c2, "/b", "2"), 0);
    CHECK(woken(wb, WAKE_WAIT_MS));
    CHECK(!woken(wa, QUIET_MS));
    /* Nobody watches /c: its commit wakes nobody. */
    CHECK_EQ_INT(append(c2, "/c", "3"), 0);
    CHECK(!woken(wa, QUIET_MS));
    CHECK(!woken(wb, 0));
    CHECK_EQ_UINT(stats().wakeups, st0.wakeups + 2);
    /* Switching a waiter to another stream: only the new one counts. */
    wake_watch(wa, id_b);
    CHECK_EQ_INT(append(c2, "/a", "4"), 0);
    CHECK(!woken(wa, QUIET_MS));
    CHECK_EQ_INT(append(c2, "/b", "5"), 0);
    CHECK(woken(wa, WAKE_WAIT_MS));
    CHECK(woken(wb, WAKE_WAIT_MS));
out:
    wake_waiter_free(wa);
    wake_waiter_free(wb);
}

/* Several waiters on one stream are all woken; unwatching one from the middle of
 * the list leaves the others registered. */
static void test_many_and_unwatch(void)
{
    wake_waiter_t *wt[3];
    for (int i = 0; i < 3; i++) wt[i] = wake_waiter_new(w);
    if (!CHECK(wt[0] && wt[1] && wt[2])) goto out;
    for (int i = 0; i < 3; i++) wake_watch(wt[i], id_a);
    CHECK_EQ_INT(append(c1, "/a", "m"), 0);
    for (int i = 0; i < 3; i++) CHECK(woken(wt[i], WAKE_WAIT_MS));

    wake_unwatch(wt[1]);
    CHECK_EQ_INT(append(c2, "/a", "n"), 0);
    CHECK(woken(wt[0], WAKE_WAIT_MS));
    CHECK(woken(wt[2], WAKE_WAIT_MS));
    CHECK(!woken(wt[1], QUIET_MS));
    /* Unwatching twice, or a waiter that never watched, is harmless. */
    wake_unwatch(wt[1]);
    /* Every one unwatched: nobody is woken. */
    wake_unwatch(wt[0]);
    wake_unwatch(wt[2]);
    CHECK_EQ_INT(append(c1, "/a", "o"), 0);
    for (int i = 0; i < 3; i++) CHECK(!woken(wt[i], i == 0 ? QUIET_MS : 0));
    /* And watching again works. */
    wake_watch(wt[1], id_a);
    CHECK_EQ_INT(append(c1, "/a", "p"), 0);
    CHECK(woken(wt[1], WAKE_WAIT_MS));
    /* A waiter freed while watching is unlinked: the next commit reaches the
     * others and touches no freed memory (AddressSanitizer would say). */
    wake_watch(wt[0], id_a);
    wake_watch(wt[2], id_a);
    wake_waiter_free(wt[2]);
    wt[2] = NULL;
    CHECK_EQ_INT(append(c1, "/a", "q"), 0);
    CHECK(woken(wt[0], WAKE_WAIT_MS));
    CHECK(woken(wt[1], WAKE_WAIT_MS));
out:
    for (int i = 0; i < 3; i++) wake_waiter_free(wt[i]);
}

/* wake_clear consumes a pending wake-up; wake_watch drops one that came before. */
static void test_clear(void)
{
    wake_waiter_t *wa = wake_waiter_new(w);
    if (!CHECK(wa != NULL)) return;
    wake_watch(wa, id_a);
    CHECK_EQ_INT(append(c1, "/a", "r"), 0);
    CHECK(readable(wake_waiter_fd(wa), WAKE_WAIT_MS));
    CHECK(readable(wake_waiter_fd(wa), 0));    /* stays readable until consumed */
    wake_clear(wa);
    CHECK(!readable(wake_waiter_fd(wa), 0));
    wake_clear(wa);                             /* nothing pending: no block */
    CHECK_EQ_INT(append(c1, "/a", "s"), 0);
    CHECK(readable(wake_waiter_fd(wa), WAKE_WAIT_MS));
    wake_watch(wa, id_a);
    CHECK(!readable(wake_waiter_fd(wa), 0));
    wake_waiter_free(wa);
}

/* wake_watch_any: every stream's commits, from any log_t. */
static void test_any(void)
{
    wake_waiter_t *any = wake_waiter_new(w), *wa = wake_waiter_new(w);
    if (!CHECK(any && wa)) goto out;
    wake_watch_any(any);
    wake_watch(wa, id_a);
    settle(any, wa);
    wake_stats st0 = stats();
    CHECK_EQ_INT(append(c2, "/b", "any1"), 0);
    CHECK(woken(any, WAKE_WAIT_MS));
    CHECK(!woken(wa, QUIET_MS));
    /* The header counts wakeups as "waiters woken": the any-waiter was one. */
    CHECK_EQ_UINT(stats().wakeups, st0.wakeups + 1);
    CHECK_EQ_INT(append(c1, "/c", "any2"), 0);
    CHECK(woken(any, WAKE_WAIT_MS));
    CHECK_EQ_INT(append(c1, "/a", "any3"), 0);
    CHECK(woken(any, WAKE_WAIT_MS));
    CHECK(woken(wa, WAKE_WAIT_MS));
    /* A new stream is a change too. */
    char path[32];
    snprintf(path, sizeof path, "/new-%d", inotify_mode);
    CHECK(create(c2, path) > 0);
    CHECK(woken(any, WAKE_WAIT_MS));
    /* Unwatched, it is quiet; switched to one stream, it follows only that one. */
    wake_unwatch(any);
    CHECK_EQ_INT(append(c1, "/b", "any4"), 0);
    CHECK(!woken(any, QUIET_MS));
    wake_watch_any(any);
    wake_watch(any, id_c);
    CHECK_EQ_INT(append(c1, "/b", "any5"), 0);
    CHECK(!woken(any, QUIET_MS));
    CHECK_EQ_INT(append(c1, "/c", "any6"), 0);
    CHECK(woken(any, WAKE_WAIT_MS));
out:
    wake_waiter_free(any);
    wake_waiter_free(wa);
}

/* Waiters on every stream alone (the runner's process): on SQLite a check moves
 * past what changed without reading which streams (skips), and still wakes them,
 * for a new stream too; a waiter on one stream that comes after is woken by its
 * stream's next change, not by another's. */
static void test_any_alone(void)
{
    wake_waiter_t *any = wake_waiter_new(w), *wa = wake_waiter_new(w);
    if (!CHECK(any && wa)) goto out;
    wake_watch_any(any);
    settle(any, NULL);
    wake_stats st0 = stats();
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(append(c2, i == 1 ? "/a" : "/b", "alone"), 0);
        CHECK(woken(any, WAKE_WAIT_MS));
    }
    char path[32];
    snprintf(path, sizeof path, "/alone-%d", inotify_mode);
    CHECK(create(c2, path) > 0);
    CHECK(woken(any, WAKE_WAIT_MS));
    wake_stats st1 = stats();
    if (!strcmp(log_engine_name(lg), "sqlite")) CHECK(st1.skips >= st0.skips + 4);
    else CHECK_EQ_UINT(st1.skips, st0.skips);
    wake_watch(wa, id_a);
    CHECK_EQ_INT(append(c2, "/b", "not a"), 0);
    CHECK(woken(any, WAKE_WAIT_MS));
    CHECK(!woken(wa, QUIET_MS));
    CHECK_EQ_INT(append(c2, "/a", "a"), 0);
    CHECK(woken(wa, WAKE_WAIT_MS));
    CHECK(woken(any, WAKE_WAIT_MS));
    wake_stats st2 = stats();
    CHECK(st2.checks > st1.checks);
out:
    wake_waiter_free(any);
    wake_waiter_free(wa);
}

/* wake_all: every waiter, whatever it watches, with no commit at all. */
static void test_all(void)
{
    wake_waiter_t *wa = wake_waiter_new(w), *wb = wake_waiter_new(w), *wb2 = wake_waiter_new(w),
                  *any = wake_waiter_new(w);
    if (!CHECK(wa && wb && wb2 && any)) goto out;
    wake_watch(wa, id_a);
    wake_watch(wb, id_b);
    wake_watch(wb2, id_b);
    wake_watch_any(any);
    wake_all(w);
    CHECK(woken(wa, WAKE_WAIT_MS));
    CHECK(woken(wb, WAKE_WAIT_MS));
    CHECK(woken(wb2, WAKE_WAIT_MS));
    CHECK(woken(any, WAKE_WAIT_MS));
    /* They stay registered: a commit still wakes them. */
    CHECK_EQ_INT(append(c1, "/a", "after all"), 0);
    CHECK(woken(wa, WAKE_WAIT_MS));
    CHECK(!woken(wb, QUIET_MS));
out:
    wake_waiter_free(wa);
    wake_waiter_free(wb);
    wake_waiter_free(wb2);
    wake_waiter_free(any);
}

/* A real second process appends; this one's waiter is woken. */
static void test_process(void)
{
    wake_waiter_t *wa = wake_waiter_new(w), *wb = wake_waiter_new(w);
    if (!CHECK(wa && wb)) goto out;
    wake_watch(wa, id_a);
    wake_watch(wb, id_b);
    pid_t pid = spawn_append("/a");
    if (!CHECK(pid > 0)) goto out;
    CHECK(woken(wa, CHILD_WAIT_MS));
    CHECK_EQ_INT(reap(pid, CHILD_WAIT_MS), 0);
    CHECK(!woken(wb, 0));
    /* The message is there. */
    log_info info;
    CHECK_EQ_INT(log_head(c1, "/a", &info), 0);

    /* And to another stream: only that stream's waiter. */
    wake_watch(wa, id_a);
    pid = spawn_append("/b");
    if (!CHECK(pid > 0)) goto out;
    CHECK(woken(wb, CHILD_WAIT_MS));
    CHECK_EQ_INT(reap(pid, CHILD_WAIT_MS), 0);
    CHECK(!woken(wa, QUIET_MS));
out:
    wake_waiter_free(wa);
    wake_waiter_free(wb);
}

/* A process where nobody waits runs no checks. */
static void test_idle(void)
{
    wake_stats st0 = stats();
    CHECK_EQ_INT(append(c1, "/a", "idle1"), 0);
    CHECK_EQ_INT(append(c2, "/b", "idle2"), 0);
    struct timespec ts = {0, QUIET_MS * 1000000L};
    nanosleep(&ts, NULL);
    wake_stats st1 = stats();
    CHECK_EQ_UINT(st1.checks, st0.checks);
    CHECK_EQ_UINT(st1.wakeups, st0.wakeups);
}

/* After a quiet spell with nobody waiting (the file unwatched), the first waiter
 * is woken by the very next commit of another process. */
static void test_first_waiter_after_idle(void)
{
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(append(c2, "/a", "while nobody waits"), 0);
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
    wake_waiter_t *wt = wake_waiter_new(w);
    if (!CHECK(wt != NULL)) return;
    wake_watch(wt, id_c);
    CHECK_EQ_INT(append(c2, "/c", "first after idle"), 0);
    CHECK(woken(wt, WAKE_WAIT_MS));
    wake_waiter_free(wt);
}

/* The sink (the live hub) hears of every changed stream while it has interest. */
static pthread_mutex_t sink_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t sink_ids[64];
static int sink_n;

static void sink_fn(void *ud, int64_t id)
{
    (void)ud;
    pthread_mutex_lock(&sink_mu);
    if (sink_n < 64) sink_ids[sink_n++] = id;
    pthread_mutex_unlock(&sink_mu);
}

static int sink_saw(int64_t id)
{
    int seen = 0;
    pthread_mutex_lock(&sink_mu);
    for (int i = 0; i < sink_n; i++) seen |= sink_ids[i] == id;
    pthread_mutex_unlock(&sink_mu);
    return seen;
}

static void test_sink(void)
{
    wake_sink(w, sink_fn, NULL);
    wake_sink_interest(w, 1);
    CHECK_EQ_INT(append(c2, "/b", "for the sink"), 0);
    long long end = mono_ms() + WAKE_WAIT_MS;
    while (!sink_saw(id_b) && mono_ms() < end) {
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    CHECK(sink_saw(id_b));
    CHECK(!sink_saw(id_a));
    wake_sink_interest(w, -1);
    wake_sink(w, NULL, NULL);
    pthread_mutex_lock(&sink_mu);
    sink_n = 0;
    pthread_mutex_unlock(&sink_mu);
}

static void run_mode(int inotify)
{
    char err[256] = "";
    inotify_mode = inotify;
    if (test_db_target(inotify ? "test-wake-inotify" : "test-wake-poll", dir, sizeof dir, dbpath, sizeof dbpath))
        return;
    log_opts o = {0, 5000, 1, 0, 0};
    lg = log_open(dbpath, &o, err, sizeof err);
    c1 = lg ? log_conn_open(lg, err, sizeof err) : NULL;
    lg2 = c1 ? log_open(dbpath, &o, err, sizeof err) : NULL;
    c2 = lg2 ? log_conn_open(lg2, err, sizeof err) : NULL;
    if (!CHECK(c2 != NULL)) {
        fprintf(stderr, "  %s\n", err);
        goto out;
    }
    id_a = create(c1, "/a");
    id_b = create(c1, "/b");
    id_c = create(c1, "/c");
    if (!CHECK(id_a > 0 && id_b > 0 && id_c > 0)) goto out;

    wake_opts wo = {inotify, 2000};
    w = wake_start(lg, &wo, err, sizeof err);
    if (!CHECK(w != NULL)) {
        fprintf(stderr, "  wake_start: %s\n", err);
        goto out;
    }
    wake_stats st = stats();
    CHECK_EQ_UINT(st.wakeups, 0);
    CHECK_EQ_UINT(st.events, 0);

    test_other_log();
    if (inotify) test_looks_per_commit();
    test_same_log();
    test_other_stream();
    test_many_and_unwatch();
    test_clear();
    test_any();
    test_any_alone();
    test_all();
    test_process();
    test_idle();
    test_first_waiter_after_idle();
    test_sink();
    if (inotify) test_follow();

    st = stats();
    if (inotify) CHECK(st.events > 0);
    else CHECK_EQ_UINT(st.events, 0);
    wake_stop(w);
    w = NULL;
out:
    log_conn_close(c2);
    log_close(lg2);
    log_conn_close(c1);
    log_close(lg);
    c1 = c2 = NULL;
    lg = lg2 = NULL;
    test_rmtree(dir);
    dir[0] = 0;
    test_db_drop();   /* the PostgreSQL run's database */
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--append") == 0) return child_append(argv[2], argv[3]);
    alarm(WATCHDOG_S);
    /* wake_start fails cleanly on a database it cannot open. */
    char err[256] = "";
    wake_t *bad = NULL;
    if (test_mkdtemp(dir, sizeof dir, "test-wake-bad") == 0) {
        /* The database's directory moves away after the log opened it: the
         * watcher's own connections cannot open it. */
        char sub[512], gone[512];
        snprintf(sub, sizeof sub, "%s/sub", dir);
        snprintf(gone, sizeof gone, "%s/gone", dir);
        mkdir(sub, 0700);
        snprintf(dbpath, sizeof dbpath, "%s/wake.db", sub);
        log_opts o = {0, 5000, 1, 0, 0};
        log_t *l = log_open(dbpath, &o, err, sizeof err);
        if (CHECK(l != NULL) && CHECK_EQ_INT(rename(sub, gone), 0)) {
            err[0] = '\0';
            bad = wake_start(l, NULL, err, sizeof err);
            CHECK(bad == NULL);
            CHECK(err[0] != '\0');
            wake_stop(bad);
        }
        log_close(l);
        test_rmtree(dir);
    }
    for (int e = 0; test_db_engine(e); e++) {
        alarm(WATCHDOG_S);
        run_mode(1);
        run_mode(0);
    }
    return TEST_MAIN_END();
}

/* Unit tests of the PostgreSQL engine's own behaviour (lib/store/pg/), beyond what
 * test_log and test_wake run on both engines: one NOTIFY per committed group
 * naming its streams (none for a group that changed none, or rolled back), a row
 * lock held elsewhere (LOG_EBUSY after the busy timeout; writers that wait it out
 * keep offsets contiguous while a reader tails), a connection lost outside a
 * transaction (reconnected transparently), the feed's LISTEN connection lost
 * (every waiter woken, notifications again after), migrations of processes
 * starting together (once), SQLSTATEs as LOG_E*, and sizes.
 *
 * Needs DSTREAM_TEST_PG, a PostgreSQL cluster's URI (tests/run-unit.sh starts one),
 * where it makes a database of its own (tests/unit/test_db.h); without it, it says
 * so and checks nothing. */
#include "log.h"

#include <libpq-fe.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/pg/pg.h"
#include "store/pg/pg_engine.h"
#include "timefmt.h"
#include "test.h"
#include "test_db.h"
#include "wake.h"

#define WAIT_MS 5000

extern const int pg_nmigrations;   /* tools/sql2c.sh pg */

static char uri[1100], dir[256];
static log_t *lg;
static log_conn_t *conn;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void quiet(void *arg, const char *message)
{
    (void)arg, (void)message;
}

static PGconn *admin(void)
{
    PGconn *pg = PQconnectdb(uri);
    PQsetNoticeProcessor(pg, quiet, NULL);
    if (!CHECK(PQstatus(pg) == CONNECTION_OK)) fprintf(stderr, "  %s", PQerrorMessage(pg));
    return pg;
}

static int sql_ok(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    ExecStatusType s = PQresultStatus(r);
    int ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
    if (!ok) fprintf(stderr, "  %s: %s", sql, PQerrorMessage(pg));
    PQclear(r);
    return ok;
}

/* ---- one NOTIFY per group ---------------------------------------------------------- */

static int three_appends(log_conn_t *c, void *arg)
{
    (void)arg;
    const char *paths[] = {"/n/a", "/n/b", "/n/a", "/n/c"};
    for (int i = 0; i < 4; i++) {
        log_msg m = {"x", 1};
        log_append_req r;
        memset(&r, 0, sizeof r);
        r.path = paths[i];
        r.msgs = &m;
        r.nmsgs = 1;
        int rc = log_tx_append(c, &r);
        if (rc) return rc;
    }
    return 0;
}

static int count_msg(void *ud, const void *data, size_t len, offset_t at)
{
    (void)ud, (void)data, (void)len, (void)at;
    return 0;
}

static int fail_after_append(log_conn_t *c, void *arg)
{
    int rc = three_appends(c, arg);
    return rc ? rc : LOG_EINVAL;
}

/* Notifications that arrived on pg within ms: their payloads, joined with '|'. */
static int notified(PGconn *pg, int ms, char *out, size_t cap)
{
    int n = 0;
    out[0] = 0;
    int64_t end = timefmt_now_ms() + ms;
    for (;;) {
        PQconsumeInput(pg);
        PGnotify *nt;
        while ((nt = PQnotifies(pg))) {
            size_t len = strlen(out);
            snprintf(out + len, cap - len, "%s%s", n ? "|" : "", nt->extra);
            n++;
            PQfreemem(nt);
        }
        int64_t left = end - timefmt_now_ms();
        if (left <= 0) return n;
        struct pollfd pf = {PQsocket(pg), POLLIN, 0};
        poll(&pf, 1, (int)(left > 50 ? 50 : left));
    }
}

static void test_notify(void)
{
    PGconn *pg = admin();
    char got[512];
    if (!sql_ok(pg, "LISTEN dstream")) goto out;
    log_info a, b, c;
    CHECK_EQ_INT(test_db_create(conn, "/n/a"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/n/b"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/n/c"), 0);
    CHECK_EQ_INT(log_head(conn, "/n/a", &a), 0);
    CHECK_EQ_INT(log_head(conn, "/n/b", &b), 0);
    CHECK_EQ_INT(log_head(conn, "/n/c", &c), 0);
    CHECK_EQ_INT(notified(pg, 300, got, sizeof got), 3);   /* a group each */

    /* Four appends to three streams in one group: one NOTIFY, "xid:a,b,c". */
    CHECK_EQ_INT(log_transact(conn, three_appends, NULL), 0);
    CHECK_EQ_INT(notified(pg, 300, got, sizeof got), 1);
    char want[128];
    snprintf(want, sizeof want, ":%lld,%lld,%lld", (long long)a.id, (long long)b.id, (long long)c.id);
    const char *colon = strchr(got, ':');
    CHECK(colon != NULL && strcmp(colon, want) == 0);
    if (colon && strcmp(colon, want)) fprintf(stderr, "  payload %s, want xid%s\n", got, want);

    /* A group that failed (its operation undone) sends nothing; a read sends nothing. */
    CHECK_EQ_INT(log_transact(conn, fail_after_append, NULL), LOG_EINVAL);
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = "/n/a";
    rr.kind = OFFSET_START;
    rr.max_bytes = 1 << 20;
    CHECK_EQ_INT(log_read(conn, &rr, count_msg, NULL), 0);
    CHECK_EQ_UINT(rr.count, 2);
    CHECK_EQ_INT(notified(pg, 300, got, sizeof got), 0);
    CHECK_EQ_INT(log_head(conn, "/n/a", &a), 0);
    CHECK_EQ_UINT(a.tail.seq, 2);

    /* A delete names the stream too (its row is gone: the feed learns it here only). */
    CHECK_EQ_INT(log_delete(conn, "/n/c"), 0);
    CHECK_EQ_INT(notified(pg, 300, got, sizeof got), 1);
    snprintf(want, sizeof want, ":%lld", (long long)c.id);
    colon = strchr(got, ':');
    CHECK(colon != NULL && strcmp(colon, want) == 0);
out:
    PQfinish(pg);
}

/* ---- a row lock held elsewhere ------------------------------------------------------- */

typedef struct holder {
    const char *path;
    int hold_ms;
    int ok;
} holder;

static void *hold_lock(void *arg)
{
    holder *h = arg;
    PGconn *pg = PQconnectdb(uri);
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT 1 FROM streams WHERE path = '%s' FOR UPDATE", h->path);
    h->ok = PQstatus(pg) == CONNECTION_OK && sql_ok(pg, "BEGIN") && sql_ok(pg, sql);
    sleep_ms(h->hold_ms);
    sql_ok(pg, "COMMIT");
    PQfinish(pg);
    return NULL;
}

enum { LK_WRITERS = 6, LK_PER = 40 };

typedef struct lk_writer {
    log_t *log;
    int failures;
} lk_writer;

static void *lk_write(void *arg)
{
    lk_writer *w = arg;
    char err[256];
    log_conn_t *c = log_conn_open(w->log, err, sizeof err);
    if (!c) {
        w->failures = LK_PER;
        return NULL;
    }
    for (int i = 0; i < LK_PER; i++)
        if (test_db_append(c, "/lk/s", "held up") != 0) w->failures++;
    log_conn_close(c);
    return NULL;
}

typedef struct tail_page {
    offset_t expect;
    int n, skips;
} tail_page;

static int tail_collect(void *ud, const void *data, size_t len, offset_t at)
{
    tail_page *p = ud;
    (void)data;
    if (at.seq != p->expect.seq || at.pos != p->expect.pos) p->skips++;
    p->expect.seq = at.seq + 1;
    p->expect.pos = at.pos + len;
    p->n++;
    return 0;
}

static void test_row_lock(void)
{
    char err[256];
    CHECK_EQ_INT(test_db_create(conn, "/lk/s"), 0);
    /* Held longer than the busy timeout: LOG_EBUSY, nothing written. */
    log_opts o = {0, 300, 0, 0, 0};
    log_t *quick = log_open(uri, &o, err, sizeof err);
    log_conn_t *qc = quick ? log_conn_open(quick, err, sizeof err) : NULL;
    if (!CHECK(qc != NULL)) goto out;
    holder h = {"/lk/s", 1500, 0};
    pthread_t t;
    CHECK_EQ_INT(pthread_create(&t, NULL, hold_lock, &h), 0);
    sleep_ms(200);
    CHECK_EQ_INT(test_db_append(qc, "/lk/s", "too soon"), LOG_EBUSY);
    pthread_join(t, NULL);
    CHECK(h.ok);
    CHECK_EQ_INT(test_db_append(qc, "/lk/s", "after"), 0);
    log_info info;
    CHECK_EQ_INT(log_head(conn, "/lk/s", &info), 0);
    CHECK_EQ_UINT(info.tail.seq, 1);

    /* Held for a second while writers of two handles wait it out and a reader
     * tails: every append lands, the offsets stay contiguous. */
    log_opts slow = {0, 20000, 0, 0, 0};
    log_t *l2 = log_open(uri, &slow, err, sizeof err);
    if (!CHECK(l2 != NULL)) goto out;
    holder h2 = {"/lk/s", 1000, 0};
    CHECK_EQ_INT(pthread_create(&t, NULL, hold_lock, &h2), 0);
    sleep_ms(100);
    lk_writer w[LK_WRITERS];
    pthread_t tw[LK_WRITERS];
    for (int i = 0; i < LK_WRITERS; i++) {
        w[i] = (lk_writer){i % 2 ? l2 : lg, 0};
        CHECK_EQ_INT(pthread_create(&tw[i], NULL, lk_write, &w[i]), 0);
    }
    tail_page p = {{1, 5}, 0, 0};
    offset_t next = {1, 5};
    int64_t deadline = timefmt_now_ms() + 30000;
    while (p.n < LK_WRITERS * LK_PER && timefmt_now_ms() < deadline) {
        log_read_req rr;
        memset(&rr, 0, sizeof rr);
        rr.path = "/lk/s";
        rr.kind = OFFSET_AT;
        rr.from = next;
        rr.max_bytes = 1 << 16;
        if (!CHECK_EQ_INT(log_read(conn, &rr, tail_collect, &p), 0)) break;
        if (rr.next.seq != p.expect.seq) p.skips++;
        next = rr.next;
        if (!rr.count) sleep_ms(2);
    }
    int failures = 0;
    for (int i = 0; i < LK_WRITERS; i++) {
        pthread_join(tw[i], NULL);
        failures += w[i].failures;
    }
    pthread_join(t, NULL);
    CHECK(h2.ok);
    CHECK_EQ_INT(failures, 0);
    CHECK_EQ_INT(p.n, LK_WRITERS * LK_PER);
    CHECK_EQ_INT(p.skips, 0);
    printf("# row lock held 1 s: %d appends waited it out, the reader saw %d, %d skipped\n",
           LK_WRITERS * LK_PER - failures, p.n, p.skips);
    log_close(l2);
out:
    log_conn_close(qc);
    log_close(quick);
}

/* ---- two hosts' groups, opposite orders ------------------------------------------------ */

enum { OR_THREADS = 4, OR_PER = 60 };

typedef struct order_writer {
    log_t *log;
    const char *first, *second;
    int failures, busy;
} order_writer;

/* Appends to first and second in turn: with several threads on one handle, its
 * groups hold appends to both streams, in either order. */
static void *order_write(void *arg)
{
    order_writer *w = arg;
    char err[256];
    log_conn_t *c = log_conn_open(w->log, err, sizeof err);
    if (!c) {
        w->failures = OR_PER;
        return NULL;
    }
    for (int i = 0; i < OR_PER; i++) {
        int rc = test_db_append(c, i % 2 ? w->second : w->first, "crossed");
        if (rc == LOG_EBUSY) w->busy++;
        if (rc) w->failures++;
    }
    log_conn_close(c);
    return NULL;
}

/* Every message of path, its offsets contiguous from the start: how many. */
static int contiguous(const char *path, int *skips)
{
    tail_page p = {{0, 0}, 0, 0};
    offset_t next = {0, 0};
    int first = 1;
    for (int rounds = 0; rounds < 1000; rounds++) {
        log_read_req rr;
        memset(&rr, 0, sizeof rr);
        rr.path = path;
        rr.kind = first ? OFFSET_START : OFFSET_AT;
        rr.from = next;
        rr.max_bytes = 1 << 16;
        if (!CHECK_EQ_INT(log_read(conn, &rr, tail_collect, &p), 0)) break;
        first = 0;
        if (!rr.count) break;
        next = rr.next;
    }
    *skips = p.skips;
    return p.n;
}

/* Two handles (two hosts) whose groups append to /or/a and /or/b in opposite
 * orders at once: the engine locks each group's rows in id order first, so no
 * group deadlocks (LOG_EBUSY), every append is acknowledged, offsets contiguous. */
static void test_group_order(void)
{
    char err[256];
    CHECK_EQ_INT(test_db_create(conn, "/or/a"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/or/b"), 0);
    log_opts slow = {0, 20000, 0, 0, 0};
    log_t *h1 = log_open(uri, &slow, err, sizeof err);
    log_t *h2 = log_open(uri, &slow, err, sizeof err);
    if (!CHECK(h1 && h2)) goto out;
    order_writer w[2 * OR_THREADS];
    pthread_t t[2 * OR_THREADS];
    for (int i = 0; i < 2 * OR_THREADS; i++) {
        int one = i < OR_THREADS;
        w[i] = (order_writer){one ? h1 : h2, one ? "/or/a" : "/or/b", one ? "/or/b" : "/or/a", 0, 0};
        CHECK_EQ_INT(pthread_create(&t[i], NULL, order_write, &w[i]), 0);
    }
    int failures = 0, busy = 0;
    for (int i = 0; i < 2 * OR_THREADS; i++) {
        pthread_join(t[i], NULL);
        failures += w[i].failures;
        busy += w[i].busy;
    }
    int skips_a = 0, skips_b = 0;
    int na = contiguous("/or/a", &skips_a), nb = contiguous("/or/b", &skips_b);
    uint64_t g1 = 0, o1 = 0, g2 = 0, o2 = 0;
    log_stats(h1, &g1, &o1);
    log_stats(h2, &g2, &o2);
    printf("# opposite orders: %d appends in %llu + %llu groups, %d busy, %d failed; a %d, b %d, %d skipped\n",
           2 * OR_THREADS * OR_PER, (unsigned long long)g1, (unsigned long long)g2, busy, failures, na, nb,
           skips_a + skips_b);
    CHECK_EQ_INT(busy, 0);
    CHECK_EQ_INT(failures, 0);
    CHECK_EQ_INT(na + nb, 2 * OR_THREADS * OR_PER);
    CHECK_EQ_INT(skips_a + skips_b, 0);
out:
    log_close(h1);
    log_close(h2);
}

/* ---- lost connections ------------------------------------------------------------------ */

/* End every other session on the database (the engine's connections among them). */
static int kill_others(void)
{
    PGconn *pg = admin();
    int ok = sql_ok(pg, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()");
    PQfinish(pg);
    sleep_ms(100);
    return ok;
}

static void test_reconnect(void)
{
    CHECK_EQ_INT(test_db_create(conn, "/rc/s"), 0);
    CHECK_EQ_INT(test_db_append(conn, "/rc/s", "before"), 0);
    CHECK(kill_others());
    /* A read outside a transaction: reconnected, answered. */
    log_info info;
    CHECK_EQ_INT(log_head(conn, "/rc/s", &info), 0);
    CHECK_EQ_UINT(info.tail.seq, 1);
    CHECK(kill_others());
    /* A group begins on the lost connection: reconnected before BEGIN, committed. */
    CHECK_EQ_INT(test_db_append(conn, "/rc/s", "after"), 0);
    CHECK_EQ_INT(log_head(conn, "/rc/s", &info), 0);
    CHECK_EQ_UINT(info.tail.seq, 2);
    /* Statements prepared on the old connection are prepared again. */
    CHECK(kill_others());
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(test_db_append(conn, "/rc/s", "again"), 0);
    CHECK_EQ_INT(log_head(conn, "/rc/s", &info), 0);
    CHECK_EQ_UINT(info.tail.seq, 5);
    /* Lost inside a transaction: no retry, LOG_EDOWN (the server is away: 503 with
     * Retry-After, not a 500), and the next statement reconnects. */
    CHECK_EQ_INT(pg_simple(conn, "BEGIN"), 0);
    CHECK(kill_others());
    int rc = 0;
    CHECK(pg_run(conn, "SELECT 1", NULL, 0, &rc) == NULL);
    CHECK_EQ_INT(rc, LOG_EDOWN);
    CHECK(pg_simple(conn, "ROLLBACK") != 0);
    CHECK_EQ_INT(test_db_append(conn, "/rc/s", "back"), 0);
    CHECK_EQ_INT(log_head(conn, "/rc/s", &info), 0);
    CHECK_EQ_UINT(info.tail.seq, 6);
}

static int read_all(void *ud, const void *data, size_t len, offset_t at)
{
    (void)data, (void)at;
    *(size_t *)ud += len;
    return 0;
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* After a burst (log_release_memory): libpq's buffers, grown to the largest message
 * sent and read (here one of 4 MiB, each way), go back, and the connection still
 * works (its statements prepared again), outside a transaction only. */
static void test_release_memory(void)
{
    enum { BIG = 4 << 20 };
    CHECK_EQ_INT(test_db_create(conn, "/rm/s"), 0);
    char *big = malloc(BIG + 1);
    memset(big, 'x', BIG);
    big[BIG] = 0;
    CHECK_EQ_INT(test_db_append(conn, "/rm/s", big), 0);
    free(big);
    log_read_req r;
    memset(&r, 0, sizeof r);
    r.path = "/rm/s";
    r.kind = OFFSET_START;
    r.max_bytes = (size_t)BIG * 2;
    size_t got = 0;
    CHECK_EQ_INT(log_read(conn, &r, read_all, &got), 0);
    CHECK_EQ_UINT(got, BIG);
    malloc_trim(0);
    size_t full = heap_in_use();
    /* Inside a transaction it keeps the connection. */
    CHECK_EQ_INT(pg_simple(conn, "BEGIN"), 0);
    PGconn *was = pgc(conn)->pg;
    log_release_memory(conn);
    CHECK(pgc(conn)->pg == was);
    CHECK(pgc(conn)->nprepared > 0);
    CHECK_EQ_INT(pg_simple(conn, "ROLLBACK"), 0);
    log_release_memory(conn);
    size_t after = heap_in_use();
    fprintf(stderr, "  malloc'd in use: %zu KiB after a 4 MiB message each way, %zu KiB after log_release_memory\n",
            full / 1024, after / 1024);
    if (TEST_GLIBC_MALLOC) CHECK(after + (size_t)BIG <= full);
    CHECK_EQ_INT(pgc(conn)->nprepared, 0);
    CHECK(pgc(conn)->rows == NULL);
    /* Still works: statements prepared again. */
    CHECK_EQ_INT(test_db_append(conn, "/rm/s", "after"), 0);
    log_info info;
    CHECK_EQ_INT(log_head(conn, "/rm/s", &info), 0);
    CHECK_EQ_UINT(info.tail.seq, 2);
}

static int tx_append(const char *path, const char *msg);

/* A group that appends, then has its transaction made read-only, then appends
 * again: the second refused inside the transaction (25006). */
static int append_then_read_only(log_conn_t *c, void *arg)
{
    (void)c;
    (void)arg;
    int rc = tx_append("/ro/s", "kept?");
    if (rc == 0) rc = pg_simple(conn, "SET LOCAL transaction_read_only = on");
    if (rc == 0) rc = tx_append("/ro/s", "refused");
    return rc;
}

/* A server that refuses writes (25006: a standby, or a primary fenced read-only for a
 * switchover; here the session or the transaction is made read-only): LOG_EDOWN (503
 * with Retry-After, not a 500), and the connection is made again at its next
 * statement outside a transaction, as are the process's other connections (they are
 * on the same server); a statement outside a transaction, or a group's first one (sent
 * with its BEGIN: nothing of the group ran), is tried once more at once. */
static void test_read_only(void)
{
    char err[256];
    log_info info;
    CHECK_EQ_INT(test_db_create(conn, "/ro/s"), 0);
    CHECK_EQ_INT(test_db_append(conn, "/ro/s", "before"), 0);
    log_conn_t *other = log_conn_open(lg, err, sizeof err);
    if (!CHECK(other != NULL)) return;
    CHECK_EQ_INT(log_head(other, "/ro/s", &info), 0);
    CHECK(!pg_stale(other));
    /* Refused inside the group's transaction: nothing written, the group lost. */
    CHECK_EQ_INT(log_transact(conn, append_then_read_only, NULL), LOG_EDOWN);
    CHECK(pg_stale(conn));
    CHECK(pg_stale(other));
    /* The next group runs on a new connection (not read-only). */
    CHECK_EQ_INT(test_db_append(conn, "/ro/s", "after"), 0);
    CHECK(!pg_stale(conn));
    CHECK_EQ_INT(log_head(other, "/ro/s", &info), 0);
    CHECK(!pg_stale(other));
    CHECK_EQ_UINT(info.tail.seq, 2);
    /* The session read-only: the group's first statement refused, and run again at
     * once on a new connection (here not read-only: only the session was). */
    CHECK_EQ_INT(pg_simple(conn, "SET default_transaction_read_only = on"), 0);
    CHECK_EQ_INT(test_db_append(conn, "/ro/s", "again"), 0);
    CHECK(!pg_stale(conn));
    CHECK(pg_stale(other));
    CHECK_EQ_INT(log_head(other, "/ro/s", &info), 0);
    CHECK_EQ_UINT(info.tail.seq, 3);
    /* Outside a transaction: tried once more on a new connection, at once. */
    CHECK_EQ_INT(pg_simple(conn, "SET default_transaction_read_only = on"), 0);
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, "/ro/s");
    CHECK_EQ_INT(pg_exec(conn, "UPDATE streams SET access_ms = access_ms WHERE path = $1", &p), 0);
    CHECK_EQ_INT(test_db_append(conn, "/ro/s", "last"), 0);
    CHECK_EQ_INT(log_head(conn, "/ro/s", &info), 0);
    CHECK_EQ_UINT(info.tail.seq, 4);
    log_conn_close(other);
}

static int readable(int fd, int ms)
{
    struct pollfd pf = {fd, POLLIN, 0};
    return poll(&pf, 1, ms) > 0;
}

static void test_feed_reconnect(void)
{
    char err[256];
    log_info a, b;
    CHECK_EQ_INT(test_db_create(conn, "/fr/a"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/fr/b"), 0);
    CHECK_EQ_INT(log_head(conn, "/fr/a", &a), 0);
    CHECK_EQ_INT(log_head(conn, "/fr/b", &b), 0);
    wake_opts wo = {1, 2000};
    wake_t *w = wake_start(lg, &wo, err, sizeof err);
    if (!CHECK(w != NULL)) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    log_opts o = {0, 5000, 0, 0, 0};
    log_t *other = log_open(uri, &o, err, sizeof err);     /* another process, as far as the feed knows */
    log_conn_t *oc = other ? log_conn_open(other, err, sizeof err) : NULL;
    wake_waiter_t *wa = wake_waiter_new(w), *wb = wake_waiter_new(w);
    if (!CHECK(oc && wa && wb)) goto out;
    wake_watch(wa, a.id);
    wake_watch(wb, b.id);
    sleep_ms(300);
    wake_clear(wa);
    wake_clear(wb);
    /* Woken by another handle's commit, through the NOTIFY. */
    CHECK_EQ_INT(test_db_append(oc, "/fr/a", "1"), 0);
    CHECK(readable(wake_waiter_fd(wa), WAIT_MS));
    wake_clear(wa);
    /* The LISTEN connection is lost: both waiters are woken, with no commit. */
    CHECK(kill_others());
    CHECK(readable(wake_waiter_fd(wa), WAIT_MS));
    CHECK(readable(wake_waiter_fd(wb), WAIT_MS));
    sleep_ms(300);
    wake_clear(wa);
    wake_clear(wb);
    /* Listening again: the next commit elsewhere wakes its waiter only. */
    CHECK_EQ_INT(test_db_append(oc, "/fr/b", "2"), 0);
    CHECK(readable(wake_waiter_fd(wb), WAIT_MS));
    CHECK(!readable(wake_waiter_fd(wa), 200));
out:
    wake_waiter_free(wa);
    wake_waiter_free(wb);
    wake_stop(w);
    log_conn_close(oc);
    log_close(other);
}

/* The ids a feed reports (changes) into ids[0..*n); returns *n. */
typedef struct reported {
    int n;
    int64_t ids[64];
} reported;

static void note_reported(void *ud, int64_t id, const char *path)
{
    reported *r = ud;
    (void)path;
    if (r->n < 64) r->ids[r->n++] = id;
}

static int reported_of(const reported *r, int64_t id)
{
    int k = 0;
    for (int i = 0; i < r->n; i++) k += r->ids[i] == id || r->ids[i] == -1;
    return k;
}

/* A transaction of another connection, begun by hand (as a group of another
 * process would): its id in *xid (0 if it could not begin). */
static PGconn *hand_begin(int64_t *xid)
{
    PGconn *pg = admin();
    PGresult *x = PQexec(pg, "BEGIN");
    PQclear(x);
    x = PQexec(pg, "SELECT pg_current_xact_id()::text");
    *xid = PQresultStatus(x) == PGRES_TUPLES_OK ? strtoll(PQgetvalue(x, 0, 0), NULL, 10) : 0;
    PQclear(x);
    return pg;
}

/* What a group's writes leave for the feed, by hand on pg: stream id stamped, and
 * its row of stream_changes naming it (all: naming none). */
static int hand_change(PGconn *pg, int64_t id, int all)
{
    char ids[40], sql[256];
    if (all) snprintf(ids, sizeof ids, "NULL");
    else snprintf(ids, sizeof ids, "'{%lld}'", (long long)id);
    snprintf(sql, sizeof sql,
             "UPDATE streams SET xid = pg_current_xact_id() WHERE id = %lld;"
             " INSERT INTO stream_changes (ids) VALUES (%s)",
             (long long)id, ids);
    return sql_ok(pg, sql);
}

/* How many times f's backstop look (made now, a second after the last) reports id. */
static int backstop_reports(const store_feed_ops *fo, store_feed *f, int64_t id)
{
    reported r = {0};
    sleep_ms(1100);
    CHECK(fo->moved(f));
    CHECK_EQ_INT(fo->changes(f, note_reported, &r), 0);
    return reported_of(&r, id);
}

/* A group of this process: its streams are reported by the process's feed at its
 * next look, before and without the group's NOTIFY (changes() alone, which reads
 * nothing from the LISTEN connection), and only once: the NOTIFY, when it comes,
 * is skipped, and so are its rows in the cursor's look; also when the NOTIFY
 * comes before the COMMIT's answer (pg_feed_expect). Another handle's commit
 * (another process, as far as the feed knows) still comes by the NOTIFY. */
static void test_feed_local(void)
{
    char err[256];
    log_info a, b;
    CHECK_EQ_INT(test_db_create(conn, "/fl/a"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/fl/b"), 0);
    CHECK_EQ_INT(log_head(conn, "/fl/a", &a), 0);
    CHECK_EQ_INT(log_head(conn, "/fl/b", &b), 0);
    const store_feed_ops *fo = lg->engine->feed;
    store_feed *f = fo->open(lg, err, sizeof err);
    log_opts o = {0, 5000, 0, 0, 0};
    log_t *other = log_open(uri, &o, err, sizeof err);
    log_conn_t *oc = other ? log_conn_open(other, err, sizeof err) : NULL;
    if (!CHECK(f && oc)) goto out;
    reported r = {0};
    CHECK_EQ_INT(fo->changes(f, note_reported, &r), 0);
    r.n = 0;

    CHECK_EQ_INT(test_db_append(conn, "/fl/a", "here"), 0);
    CHECK_EQ_INT(fo->changes(f, note_reported, &r), 0);
    CHECK_EQ_INT(reported_of(&r, a.id), 1);
    /* The NOTIFY comes back, and is not reported again; nor by a look through the
     * cursor (the backstop's, made now). */
    CHECK(readable(fo->fd(f), WAIT_MS));
    r.n = 0;
    fo->event(f);
    fo->moved(f);
    CHECK_EQ_INT(fo->changes(f, note_reported, &r), 0);
    CHECK_EQ_INT(reported_of(&r, a.id), 0);
    sleep_ms(1100);
    r.n = 0;
    CHECK(fo->moved(f));
    CHECK_EQ_INT(fo->changes(f, note_reported, &r), 0);
    CHECK_EQ_INT(reported_of(&r, a.id), 0);

    /* A group's NOTIFY that comes before its COMMIT's answer (another connection
     * committing the same way here, by hand): expected by its xid before the
     * COMMIT, it is skipped, and the group's streams are reported once, when
     * the committer says it committed. */
    int64_t xid;
    PGconn *pg = hand_begin(&xid);
    PGresult *x;
    char sql[128];
    snprintf(sql, sizeof sql, "NOTIFY dstream, '%lld:%lld'", (long long)xid, (long long)a.id);
    CHECK(xid > 0 && sql_ok(pg, sql));
    pg_feed_expect(lg, xid, 0);
    CHECK(sql_ok(pg, "COMMIT"));
    PQfinish(pg);
    CHECK(readable(fo->fd(f), WAIT_MS));
    r.n = 0;
    fo->event(f);
    fo->moved(f);
    CHECK_EQ_INT(fo->changes(f, note_reported, &r), 0);
    CHECK_EQ_INT(reported_of(&r, a.id), 0);
    pg_feed_committed(lg, xid, 1, &a.id, 1, 0);
    CHECK(fo->moved(f));
    CHECK_EQ_INT(fo->changes(f, note_reported, &r), 0);
    CHECK_EQ_INT(reported_of(&r, a.id), 1);

    /* A group whose commit a look's snapshot sees before the COMMIT's answer has
     * come (the committer not yet told the feeds): that look skips its rows, and
     * the group's streams are reported once, by its ids, then; no later look
     * reports them again. Its outcome lost (not known to have committed): the
     * backstop's look reports its rows. */
    for (int lost = 0; lost <= 1; lost++) {
        pg = hand_begin(&xid);
        CHECK(xid > 0 && hand_change(pg, a.id, 0));
        pg_feed_expect(lg, xid, 0);
        CHECK(sql_ok(pg, "COMMIT"));
        PQfinish(pg);
        CHECK_EQ_INT(backstop_reports(fo, f, a.id), 0);
        pg_feed_committed(lg, xid, !lost, &a.id, 1, 0);
        if (lost) {
            CHECK_EQ_INT(backstop_reports(fo, f, a.id), 1);
        } else {
            r.n = 0;
            CHECK(fo->moved(f));
            CHECK_EQ_INT(fo->changes(f, note_reported, &r), 0);
            CHECK_EQ_INT(reported_of(&r, a.id), 1);
        }
        CHECK_EQ_INT(backstop_reports(fo, f, a.id), 0);
    }

    /* A group of this process that changed more streams than it names
     * (pg_feed_committed told all; its "*" NOTIFY, skipped, is left out here): the
     * look through the cursor reports them, its rows not skipped for being this
     * process's. */
    pg = hand_begin(&xid);
    CHECK(xid > 0 && hand_change(pg, a.id, 1));
    CHECK(sql_ok(pg, "COMMIT"));
    PQfinish(pg);
    pg_feed_committed(lg, xid, 1, NULL, 0, 1);
    r.n = 0;
    CHECK(fo->moved(f));
    CHECK_EQ_INT(fo->changes(f, note_reported, &r), 0);
    CHECK_EQ_INT(reported_of(&r, a.id), 1);

    /* A change whose row of stream_changes a trim took before this feed looked
     * (a process that last looked before the trim): the row the trim leaves in
     * its place, naming no stream, makes the look scan the stream rows, and the
     * change is reported, once. */
    pg = hand_begin(&xid);
    CHECK(hand_change(pg, b.id, 0) && sql_ok(pg, "COMMIT"));
    CHECK_EQ_INT(pg_changes_trim(conn, 0), 0);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM stream_changes WHERE ids = '{%lld}'", (long long)b.id);
    x = PQexec(pg, sql);
    CHECK(PQresultStatus(x) == PGRES_TUPLES_OK && !strcmp(PQgetvalue(x, 0, 0), "0"));
    PQclear(x);
    PQfinish(pg);
    CHECK_EQ_INT(backstop_reports(fo, f, b.id), 1);
    CHECK_EQ_INT(backstop_reports(fo, f, b.id), 0);

    /* Another handle's commit: not reported before its NOTIFY, then by it. */
    r.n = 0;
    CHECK_EQ_INT(test_db_append(oc, "/fl/b", "there"), 0);
    CHECK_EQ_INT(fo->changes(f, note_reported, &r), 0);
    CHECK_EQ_INT(reported_of(&r, b.id), 0);
    CHECK(readable(fo->fd(f), WAIT_MS));
    fo->event(f);
    CHECK(fo->moved(f));
    CHECK_EQ_INT(fo->changes(f, note_reported, &r), 0);
    CHECK_EQ_INT(reported_of(&r, b.id), 1);
out:
    if (f) fo->close(f);
    log_conn_close(oc);
    log_close(other);
}

/* ---- migrations, errors, sizes --------------------------------------------------------------- */

typedef struct opener {
    char uri[1200];
    int ok;
    char err[256];
} opener;

static void *open_one(void *arg)
{
    opener *o = arg;
    log_t *l = log_open(o->uri, NULL, o->err, sizeof o->err);
    o->ok = l != NULL;
    log_close(l);
    return NULL;
}

static void test_migrate_together(void)
{
    PGconn *pg = admin();
    char name[64], fresh[1100];
    snprintf(name, sizeof name, "t_migrate_%ld", (long)getpid());
    char drop[128], make[128];
    snprintf(drop, sizeof drop, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    snprintf(make, sizeof make, "CREATE DATABASE %s", name);
    if (!CHECK(test_db_pg_uri(test_db_pg_cluster(), name, fresh, sizeof fresh) == 0) || !sql_ok(pg, drop) ||
        !sql_ok(pg, make)) {
        CHECK(0);
        PQfinish(pg);
        return;
    }
    /* The same server, the new database. */
    opener o[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        snprintf(o[i].uri, sizeof o[i].uri, "%s", fresh);
        o[i].ok = 0;
        o[i].err[0] = 0;
        CHECK_EQ_INT(pthread_create(&t[i], NULL, open_one, &o[i]), 0);
    }
    int ok = 0;
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        ok += o[i].ok;
        if (!o[i].ok) fprintf(stderr, "  open %d: %s\n", i, o[i].err);
    }
    CHECK_EQ_INT(ok, 6);
    PGconn *m = PQconnectdb(o[0].uri);
    PGresult *r = PQexec(m, "SELECT count(*), max(version) FROM schema_version");
    if (CHECK(PQresultStatus(r) == PGRES_TUPLES_OK)) {
        char want[16];
        snprintf(want, sizeof want, "%d", pg_schema_version());
        CHECK_EQ_STR(PQgetvalue(r, 0, 1), want);
        CHECK_EQ_INT((int)strtol(PQgetvalue(r, 0, 0), NULL, 10), pg_nmigrations);
    }
    PQclear(r);
    PQfinish(m);
    sql_ok(pg, drop);
    PQfinish(pg);
}

/* The query helpers: parameters, binary results, statements prepared once by text
 * (more than the connection keeps still run), errors as LOG_E*. */
static void test_query(void)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, -42);
    pg_text(&p, "h\xc3\xa9");
    pg_null(&p);
    pg_bytes(&p, "a\0b", 3);
    PGresult *r = pg_run(conn, "SELECT $1::bigint, $2::text, $3::text IS NULL, $4::bytea,"
                               " 7::smallint, -9::int, length($4::bytea)", &p, 0, &rc);
    if (CHECK(r != NULL)) {
        CHECK_EQ_INT((int)pg_int_of(r, 0, 0), -42);
        CHECK_EQ_STR(pg_text_of(r, 0, 1), "h\xc3\xa9");
        CHECK_EQ_STR(pg_text_of(r, 0, 2), "t");
        CHECK_EQ_INT((int)pg_int_of(r, 0, 6), 3);
        CHECK(pg_null_at(r, 0, 9) && pg_int_of(r, 3, 0) == 0 && pg_text_of(r, 1, 0) == NULL);
    }
    PQclear(r);
    r = pg_run(conn, "SELECT $1::bigint, $2::text, $3::text IS NULL, $4::bytea,"
                     " 7::smallint, -9::int, length($4::bytea)", &p, 1, &rc);
    if (CHECK(r != NULL)) {
        CHECK_EQ_INT((int)pg_int_at(r, 0, 0), -42);
        CHECK_EQ_INT(PQgetlength(r, 0, 3), 3);
        CHECK(memcmp(PQgetvalue(r, 0, 3), "a\0b", 3) == 0);
        CHECK_EQ_INT((int)pg_int_at(r, 0, 4), 7);
        CHECK_EQ_INT((int)pg_int_at(r, 0, 5), -9);
    }
    PQclear(r);
    /* Prepared once: the same text again adds no statement. */
    int before = pgc(conn)->nprepared;
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(pg_exec(conn, "SELECT 1 WHERE $1::int > 0", (pg_params_init(&p), pg_int(&p, i), &p)), 0);
    CHECK_EQ_INT(pgc(conn)->nprepared, before + 1);
    /* Texts built at run time, more than are kept: all run. */
    char sql[64];
    int all = 1;
    for (int i = 0; i < PG_PREPARED_MAX + 20; i++) {
        snprintf(sql, sizeof sql, "SELECT %d", i);
        r = pg_run(conn, sql, NULL, 0, &rc);
        all &= r && pg_int_of(r, 0, 0) == i;
        PQclear(r);
    }
    CHECK(all);
    CHECK_EQ_INT(pgc(conn)->nprepared, PG_PREPARED_MAX);
    /* Rows a command changed. */
    CHECK_EQ_INT(test_db_create(conn, "/q/s"), 0);
    pg_params_init(&p);
    pg_text(&p, "/q/");
    r = pg_run(conn, "UPDATE streams SET access_ms = access_ms WHERE starts_with(path, $1)", &p, 0, &rc);
    CHECK(r != NULL && pg_affected(r) == 1);
    PQclear(r);
    /* A mistake: LOG_EIO, and the connection is fine after it. */
    CHECK(pg_run(conn, "SELEC nothing", NULL, 0, &rc) == NULL);
    CHECK_EQ_INT(rc, LOG_EIO);
    CHECK_EQ_INT(pg_simple(conn, "SELECT 1"), 0);
    /* A lock not granted in time: LOG_EBUSY (55P03). */
    CHECK_EQ_INT(pg_simple(conn, "SET lock_timeout = 50"), 0);
    PGconn *pg = admin();
    sql_ok(pg, "BEGIN");
    sql_ok(pg, "LOCK TABLE producers IN ACCESS EXCLUSIVE MODE");
    CHECK_EQ_INT(pg_simple(conn, "SELECT count(*) FROM producers"), LOG_EBUSY);
    sql_ok(pg, "COMMIT");
    PQfinish(pg);
    CHECK_EQ_INT(pg_simple(conn, "SET lock_timeout = 5000"), 0);
    /* A COMMIT of a transaction a statement failed in: PostgreSQL answers it
     * "ROLLBACK" with no error; it is a failure, and the write is not there. */
    CHECK_EQ_INT(pg_simple(conn, "BEGIN"), 0);
    pg_params_init(&p);
    pg_text(&p, "/q/");
    CHECK_EQ_INT(pg_exec(conn, "UPDATE streams SET access_ms = 12345 WHERE starts_with(path, $1)", &p), 0);
    CHECK(pg_simple(conn, "SELECT 1/0") != 0);
    CHECK_EQ_INT(pg_simple(conn, "COMMIT"), LOG_EIO);
    CHECK_EQ_INT(pg_simple(conn, "SELECT 1"), 0);     /* and the connection goes on */
    r = pg_run(conn, "SELECT count(*) FROM streams WHERE access_ms = 12345", NULL, 0, &rc);
    CHECK(r != NULL && pg_int_of(r, 0, 0) == 0);
    PQclear(r);
}

/* ---- statements per read ------------------------------------------------------------ */

static int count_msgs(void *ud, const void *data, size_t len, offset_t at)
{
    (void)data, (void)len, (void)at;
    ++*(size_t *)ud;
    return 0;
}

/* The extended-protocol statements (Bind messages) a read of path sends, from
 * libpq's trace of the connection; *count gets the messages read. */
static int binds_of_read(const char *path, size_t max_bytes, size_t *count)
{
    char *trace = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&trace, &tlen);
    if (!CHECK(f != NULL)) return -1;
    PQtrace(pgc(conn)->pg, f);
    PQsetTraceFlags(pgc(conn)->pg, PQTRACE_SUPPRESS_TIMESTAMPS);
    log_read_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.kind = OFFSET_START;
    r.max_bytes = max_bytes;
    *count = 0;
    CHECK_EQ_INT(log_read(conn, &r, count_msgs, count), 0);
    PQuntrace(pgc(conn)->pg);
    fclose(f);
    int binds = 0;
    for (const char *t = trace; t && (t = strstr(t, "\tBind\t")); t++) binds++;
    /* Not the read's BEGIN, parsed and bound with its first statement (pg_run). */
    for (const char *t = trace; t && (t = strstr(t, "\tParse\t \"\" \"BEGIN ")); t++) binds--;
    free(trace);
    return binds;
}

/* A catch-up read (1,000 messages of 200 bytes, DSTREAM_READ_MAX's 1 MiB) is one
 * statement: the stream's row and its messages together (it was two, and one per
 * 64 messages before). A fork's read: that statement (which finds the fork), then
 * a statement for each stream of the chain's row and its messages. */
static void test_read_statements(void)
{
    static log_msg m[1000];
    static char body[200];
    memset(body, 'x', sizeof body);
    for (int i = 0; i < 1000; i++) m[i] = (log_msg){body, sizeof body};
    CHECK_EQ_INT(test_db_create(conn, "/rs/s"), 0);
    log_append_req a;
    memset(&a, 0, sizeof a);
    a.path = "/rs/s";
    a.msgs = m;
    a.nmsgs = 1000;
    CHECK_EQ_INT(log_append(conn, &a), 0);
    size_t count;
    CHECK_EQ_INT(binds_of_read("/rs/s", 1 << 20, &count), 1);
    CHECK_EQ_UINT(count, 1000);
    /* A page of a catch-up: what the budget takes, in one statement too. */
    CHECK_EQ_INT(binds_of_read("/rs/s", 10000, &count), 1);
    CHECK_EQ_UINT(count, 50);

    log_create_req fr;
    memset(&fr, 0, sizeof fr);
    fr.path = "/rs/f";
    fr.ttl_s = -1;
    fr.expires_ms = -1;
    fr.fork_from = "/rs/s";
    CHECK_EQ_INT(log_create(conn, &fr), 0);
    a.path = "/rs/f";
    CHECK_EQ_INT(log_append(conn, &a), 0);
    CHECK_EQ_INT(binds_of_read("/rs/f", (size_t)-1, &count), 5);
    CHECK_EQ_UINT(count, 2000);
}

/* ---- a group's operations: each one's savepoint in its own round trips ---------------- */

/* libpq's trace of conn, from trace_on to trace_off. */
typedef struct tracer {
    FILE *f;
    char *buf;
    size_t len;
} tracer;

static void trace_on(tracer *t)
{
    t->buf = NULL;
    t->len = 0;
    t->f = open_memstream(&t->buf, &t->len);
    if (!CHECK(t->f != NULL)) return;
    PQtrace(pgc(conn)->pg, t->f);
    PQsetTraceFlags(pgc(conn)->pg, PQTRACE_SUPPRESS_TIMESTAMPS);
}

/* The round trips since *mark (a position in the trace, moved to its end): the
 * Sync and Query messages the client sent, each answered once by the server. */
static int round_trips(tracer *t, size_t *mark)
{
    fflush(t->f);
    int n = 0;
    /* Line by line from the mark (a line's start): "F\t<length>\t<message>...". */
    for (const char *s = t->buf ? t->buf + *mark : NULL; s && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
        const char *kind = strncmp(s, "F\t", 2) ? NULL : strchr(s + 2, '\t');
        if (kind && (!strncmp(kind, "\tSync", 5) || !strncmp(kind, "\tQuery\t", 7))) n++;
    }
    *mark = t->len;
    return n;
}

static void trace_off(tracer *t)
{
    if (!t->f) return;
    PQuntrace(pgc(conn)->pg);
    fclose(t->f);
    free(t->buf);
}

static int tx_append(const char *path, const char *msg)
{
    log_msg m = {msg, strlen(msg)};
    log_append_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.msgs = &m;
    r.nmsgs = 1;
    return log_tx_append(conn, &r);
}

static int collect_text(void *ud, const void *data, size_t len, offset_t at)
{
    char *out = ud;
    size_t n = strlen(out);
    snprintf(out + n, 256 - n, "%s%llu@%llu:%.*s", n ? " " : "", (unsigned long long)at.seq,
             (unsigned long long)at.pos, (int)len, (const char *)data);
    return 0;
}

/* The messages of path as "seq@pos:text ...". */
static void text_of(const char *path, char out[256])
{
    log_read_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.kind = OFFSET_START;
    r.max_bytes = (size_t)-1;
    out[0] = 0;
    CHECK_EQ_INT(log_read(conn, &r, collect_text, out), 0);
}

/* A read's round trips and rows: the stream row and its messages in one
 * statement, without a transaction: 1 round trip (it was 3: the BEGIN with the
 * row, the messages, the COMMIT; 4 before that). Each
 * message row carries its bytes alone: positions and offsets are counted on
 * from the first message's, and the digest of the page's last message (where
 * the read stops: the tail's, or the budget's) comes with the stream row, the
 * same as log_digest_at says.
 * Reads from the middle, from a fork, and after the oldest messages were
 * dropped say the same offsets as the rows. */
static void test_read_rows(void)
{
    static log_msg m[300];
    static char body[300][8];
    for (int i = 0; i < 300; i++) {
        snprintf(body[i], sizeof body[i], "m%d", i);
        m[i] = (log_msg){body[i], strlen(body[i])};
    }
    CHECK_EQ_INT(test_db_create(conn, "/rr/s"), 0);
    log_append_req a;
    memset(&a, 0, sizeof a);
    a.path = "/rr/s";
    a.msgs = m;
    a.nmsgs = 300;
    CHECK_EQ_INT(log_append(conn, &a), 0);
    uint8_t tail[CHAIN_LEN], at50[CHAIN_LEN];
    CHECK_EQ_INT(log_digest_at(conn, "/rr/s", 300, tail), 0);
    CHECK_EQ_INT(log_digest_at(conn, "/rr/s", 50, at50), 0);

    tracer t;
    size_t mark = 0, count = 0;
    trace_on(&t);
    log_read_req r;
    memset(&r, 0, sizeof r);
    r.path = "/rr/s";
    r.kind = OFFSET_START;
    r.max_bytes = 1 << 20;
    CHECK_EQ_INT(log_read(conn, &r, count_msgs, &count), 0);
    CHECK_EQ_INT(round_trips(&t, &mark), 1);
    CHECK(!strstr(t.buf, "BEGIN") && !strstr(t.buf, "COMMIT"));
    CHECK_EQ_UINT(count, 300);
    CHECK(r.up_to_date);
    CHECK_EQ_UINT(r.next.seq, 300);
    CHECK(memcmp(r.digest, tail, CHAIN_LEN) == 0);
    /* One column a row: the stream row's values in one array (and where its first
     * message is, and the page's last one and its digest), then each message's
     * bytes alone, the last one's too (its digest came with the stream row)
     * (libpq's trace: "B\t<length>\tDataRow\t <columns> <length> 'bytes'"). */
    int rows1 = 0, wider = 0;
    for (const char *s = t.buf; s && (s = strstr(s, "\tDataRow\t ")); s++) {
        if (!strncmp(s, "\tDataRow\t 1 ", 12)) rows1++;
        else wider++;
    }
    CHECK_EQ_INT(rows1, 301);
    CHECK_EQ_INT(wider, 0);

    /* Stopped by the budget after message 49 (10 * 2 + 40 * 3 = 140 bytes): the
     * digest at 50, with the row that reached the budget. */
    memset(&r, 0, sizeof r);
    r.path = "/rr/s";
    r.kind = OFFSET_START;
    r.max_bytes = 140;
    count = 0;
    CHECK_EQ_INT(log_read(conn, &r, count_msgs, &count), 0);
    CHECK_EQ_INT(round_trips(&t, &mark), 1);
    /* At the tail ("now"), and a stream that is not there: one round trip each. */
    log_read_req rn;
    memset(&rn, 0, sizeof rn);
    rn.path = "/rr/s";
    rn.kind = OFFSET_NOW;
    rn.max_bytes = 1 << 20;
    size_t none = 0;
    CHECK_EQ_INT(log_read(conn, &rn, count_msgs, &none), 0);
    CHECK_EQ_INT(round_trips(&t, &mark), 1);
    CHECK_EQ_UINT(none, 0);
    CHECK(rn.up_to_date);
    CHECK_EQ_UINT(rn.next.seq, 300);
    CHECK(memcmp(rn.digest, tail, CHAIN_LEN) == 0);
    rn.path = "/rr/none";
    CHECK_EQ_INT(log_read(conn, &rn, count_msgs, &none), LOG_ENOTFOUND);
    CHECK_EQ_INT(round_trips(&t, &mark), 1);
    trace_off(&t);
    CHECK_EQ_UINT(count, 50);
    CHECK_EQ_UINT(r.next.seq, 50);
    CHECK_EQ_UINT(r.next.pos, 2 * 10 + 3 * 40);
    CHECK(!r.up_to_date);
    CHECK(memcmp(r.digest, at50, CHAIN_LEN) == 0);

    /* From the middle: offsets and bytes as stored. */
    char got[256] = "";
    memset(&r, 0, sizeof r);
    r.path = "/rr/s";
    r.kind = OFFSET_AT;
    r.from = (offset_t){297, 2 * 10 + 3 * 90 + 4 * 197};
    r.max_bytes = 1 << 20;
    CHECK_EQ_INT(log_read(conn, &r, collect_text, got), 0);
    CHECK_EQ_STR(got, "297@1078:m297 298@1082:m298 299@1086:m299");
    /* A wrong position is still refused. */
    memset(&r, 0, sizeof r);
    r.path = "/rr/s";
    r.kind = OFFSET_AT;
    r.from = (offset_t){297, 1077};
    r.max_bytes = 1 << 20;
    got[0] = 0;
    CHECK_EQ_INT(log_read(conn, &r, collect_text, got), LOG_EOFFSET);

    /* A fork at 298 and its own message: the parent's part, then its own. */
    CHECK_EQ_INT(test_db_fork(conn, "/rr/f", "/rr/s", (offset_t){298, 1082}), 0);
    CHECK_EQ_INT(test_db_append(conn, "/rr/f", "own"), 0);
    memset(&r, 0, sizeof r);
    r.path = "/rr/f";
    r.kind = OFFSET_AT;
    r.from = (offset_t){296, 2 * 10 + 3 * 90 + 4 * 196};
    r.max_bytes = 1 << 20;
    got[0] = 0;
    CHECK_EQ_INT(log_read(conn, &r, collect_text, got), 0);
    CHECK_EQ_STR(got, "296@1074:m296 297@1078:m297 298@1082:own");
    uint8_t ftail[CHAIN_LEN];
    CHECK_EQ_INT(log_digest_at(conn, "/rr/f", 299, ftail), 0);
    CHECK(memcmp(r.digest, ftail, CHAIN_LEN) == 0);

    /* The oldest 100 dropped (as retention does): a read from the start begins at
     * the first one kept, at its own position. */
    PGconn *pg = admin();
    CHECK(sql_ok(pg, "DELETE FROM messages WHERE stream = (SELECT id FROM streams WHERE path = '/rr/s') AND seq < 100"));
    PQfinish(pg);
    memset(&r, 0, sizeof r);
    r.path = "/rr/s";
    r.kind = OFFSET_START;
    r.max_bytes = 10;
    got[0] = 0;
    CHECK_EQ_INT(log_read(conn, &r, collect_text, got), 0);
    CHECK_EQ_STR(got, "100@290:m100 101@294:m101 102@298:m102");
}

/* A read longer than a page (4,096 messages): the row and the first page in one
 * statement, the next page in another, no transaction; every message once, in
 * order, the digest the tail's. Messages gone between the pages (the stream swept
 * meanwhile, by another connection) stop the read where they were, never skipped
 * over: the next page starts where the last one ended, or not at all. */
typedef struct page_ctx {
    size_t count;
    uint64_t next;              /* the seq expected next */
    int bad;                    /* a message out of order */
    const char *drop;           /* at the 4,096th message: the SQL run on another connection */
} page_ctx;

static int page_msg(void *ud, const void *data, size_t len, offset_t at)
{
    page_ctx *x = ud;
    char want[16];
    snprintf(want, sizeof want, "p%llu", (unsigned long long)at.seq);
    if (at.seq != x->next || len != strlen(want) || memcmp(data, want, len)) x->bad++;
    x->next = at.seq + 1;
    if (++x->count == 4096 && x->drop) {
        PGconn *pg = admin();
        CHECK(sql_ok(pg, x->drop));
        PQfinish(pg);
    }
    return 0;
}

static void test_read_pages(void)
{
    enum { N = 4500 };
    static log_msg m[N];
    static char body[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(body[i], sizeof body[i], "p%d", i);
        m[i] = (log_msg){body[i], strlen(body[i])};
    }
    CHECK_EQ_INT(test_db_create(conn, "/rp/s"), 0);
    log_append_req a;
    memset(&a, 0, sizeof a);
    a.path = "/rp/s";
    a.msgs = m;
    a.nmsgs = N;
    CHECK_EQ_INT(log_append(conn, &a), 0);
    uint8_t tail[CHAIN_LEN];
    CHECK_EQ_INT(log_digest_at(conn, "/rp/s", N, tail), 0);

    tracer t;
    size_t mark = 0;
    trace_on(&t);
    log_read_req r;
    memset(&r, 0, sizeof r);
    r.path = "/rp/s";
    r.kind = OFFSET_START;
    r.max_bytes = 1 << 20;
    page_ctx x = {0, 0, 0, NULL};
    CHECK_EQ_INT(log_read(conn, &r, page_msg, &x), 0);
    CHECK_EQ_INT(round_trips(&t, &mark), 2);
    trace_off(&t);
    CHECK_EQ_UINT(x.count, N);
    CHECK_EQ_INT(x.bad, 0);
    CHECK(r.up_to_date);
    CHECK_EQ_UINT(r.next.seq, N);
    CHECK(memcmp(r.digest, tail, CHAIN_LEN) == 0);

    /* Messages 4,096 to 4,199 deleted after the first page was read: the read stops
     * at 4,096 (the digest where it stopped), and says it is not up to date. */
    uint8_t at4096[CHAIN_LEN];
    CHECK_EQ_INT(log_digest_at(conn, "/rp/s", 4096, at4096), 0);
    memset(&r, 0, sizeof r);
    r.path = "/rp/s";
    r.kind = OFFSET_START;
    r.max_bytes = 1 << 20;
    x = (page_ctx){0, 0, 0,
                   "DELETE FROM messages WHERE stream = (SELECT id FROM streams WHERE path = '/rp/s')"
                   " AND seq >= 4096 AND seq < 4200"};
    CHECK_EQ_INT(log_read(conn, &r, page_msg, &x), 0);
    CHECK_EQ_UINT(x.count, 4096);
    CHECK_EQ_INT(x.bad, 0);
    CHECK(!r.up_to_date);
    CHECK_EQ_UINT(r.next.seq, 4096);
    CHECK(memcmp(r.digest, at4096, CHAIN_LEN) == 0);
}

/* log_read_ahead: the first pages of reads to come fetched together, one
 * statement for them all (READ_MANY); each read then asking for the same (path,
 * offset, budget) takes its own without a statement, and sees the stream as it
 * was when fetched (its digest, its tail, closed or not); a read asking for
 * anything else, or for the same a second time, runs its own statement, and so
 * does one whose stream is not there or has more left than its budget. A path no
 * read would look up (not UTF-8) is left out; n = 0 forgets what was not taken;
 * inside a group nothing is fetched ahead. */
static int ahead_in_group(log_conn_t *c, void *arg)
{
    const log_read_req *rq = arg;
    if (log_read_ahead(c, rq, 2) || pgc(c)->nahead) return LOG_EINVAL;
    log_read_req r = rq[1];
    char out[256] = "";
    return log_read(c, &r, collect_text, out) || strcmp(out, "0@0:a2 1@2:b2 2@4:c2") ? LOG_EIO : 0;
}

static void test_read_ahead(void)
{
    char path[5][16];
    for (int i = 0; i < 5; i++) {
        snprintf(path[i], sizeof path[i], "/ra/%d", i);
        CHECK_EQ_INT(test_db_create(conn, path[i]), 0);
        char body[3][4];
        log_msg m[3];
        for (int k = 0; k < 3; k++) {
            snprintf(body[k], sizeof body[k], "%c%d", 'a' + k, i);
            m[k] = (log_msg){body[k], 2};
        }
        log_append_req a;
        memset(&a, 0, sizeof a);
        a.path = path[i];
        a.msgs = m;
        a.nmsgs = 3;
        CHECK_EQ_INT(log_append(conn, &a), 0);
    }
    /* From the start, from the second message, a bad path, a stream nobody made. */
    log_read_req rq[8];
    memset(rq, 0, sizeof rq);
    for (int i = 0; i < 5; i++) {
        rq[i].path = path[i];
        rq[i].kind = OFFSET_START;
        rq[i].max_bytes = 1 << 20;
    }
    rq[1].kind = OFFSET_AT;
    rq[1].from = (offset_t){1, 2};
    rq[5] = rq[0];
    rq[5].path = "/ra/\xff";
    rq[6] = rq[0];
    rq[6].path = "/ra/none";

    tracer t;
    size_t mark = 0;
    trace_on(&t);
    CHECK_EQ_UINT(log_read_ahead(conn, rq, 7), 6);     /* all but the path not UTF-8 */
    CHECK_EQ_INT(round_trips(&t, &mark), 1);
    /* A message appended since: not in what was fetched (the next read has it). */
    log_msg late = {"zz", 2};
    log_append_req la;
    memset(&la, 0, sizeof la);
    la.path = path[0];
    la.msgs = &late;
    la.nmsgs = 1;
    CHECK_EQ_INT(log_append(conn, &la), 0);
    for (int i = 0; i < 5; i++) {
        log_read_req r = rq[i];
        char out[256] = "", want[256];
        CHECK_EQ_INT(log_read(conn, &r, collect_text, out), 0);
        if (i == 1) snprintf(want, sizeof want, "1@2:b%d 2@4:c%d", i, i);
        else snprintf(want, sizeof want, "0@0:a%d 1@2:b%d 2@4:c%d", i, i, i);
        CHECK_EQ_STR(out, want);
        CHECK(r.up_to_date);
        CHECK_EQ_UINT(r.next.seq, 3);
        uint8_t d[CHAIN_LEN];
        CHECK_EQ_INT(log_digest_at(conn, path[i], 3, d), 0);
        CHECK(memcmp(d, r.digest, CHAIN_LEN) == 0);
    }
    {
        log_read_req r = rq[2];
        char out[256] = "";
        mark = (fflush(t.f), t.len);
        CHECK_EQ_INT(log_read(conn, &r, collect_text, out), 0);     /* taken already */
        CHECK_EQ_INT(round_trips(&t, &mark), 1);
        r = rq[6];      /* nothing fetched for a stream that is not there: its own */
        CHECK_EQ_INT(log_read(conn, &r, collect_text, out), LOG_ENOTFOUND);
        CHECK_EQ_INT(round_trips(&t, &mark), 1);
        r = rq[5];
        CHECK_EQ_INT(log_read(conn, &r, collect_text, out), LOG_ENOTFOUND);
        r = rq[0];
        r.kind = OFFSET_AT;
        r.from = (offset_t){3, 6};
        out[0] = 0;
        CHECK_EQ_INT(log_read(conn, &r, collect_text, out), 0);
        CHECK_EQ_STR(out, "3@6:zz");
        CHECK_EQ_INT(round_trips(&t, &mark), 1);
    }
    /* The reads that take theirs make no round trip; one whose budget ends before
     * the tail makes its own (what the budget cuts is READ_ONE's to say). */
    rq[5] = rq[3];
    rq[5].max_bytes = 4;
    log_read_ahead(conn, rq, 6);
    CHECK_EQ_INT(round_trips(&t, &mark), 1);
    for (int i = 1; i < 5; i++) {
        log_read_req r = rq[i];
        char out[256] = "";
        CHECK_EQ_INT(log_read(conn, &r, collect_text, out), 0);
    }
    CHECK_EQ_INT(round_trips(&t, &mark), 0);
    {
        log_read_req r = rq[5];
        char out[256] = "";
        CHECK_EQ_INT(log_read(conn, &r, collect_text, out), 0);
        CHECK_EQ_STR(out, "0@0:a3 1@2:b3");
        CHECK(!r.up_to_date);
        CHECK_EQ_INT(round_trips(&t, &mark), 1);
    }
    /* A closed stream: the digest at its tail, as READ_ONE's. */
    {
        log_append_req cl;
        memset(&cl, 0, sizeof cl);
        cl.path = path[4];
        cl.close = 1;
        CHECK_EQ_INT(log_append(conn, &cl), 0);
        log_read_req two[2] = {rq[4], rq[2]};
        log_read_ahead(conn, two, 2);
        log_read_req r = rq[4];
        char out[256] = "";
        mark = (fflush(t.f), t.len);
        CHECK_EQ_INT(log_read(conn, &r, collect_text, out), 0);
        CHECK_EQ_INT(round_trips(&t, &mark), 0);
        CHECK_EQ_STR(out, "0@0:a4 1@2:b4 2@4:c4");
        CHECK(r.info.closed);
        uint8_t d[CHAIN_LEN];
        CHECK_EQ_INT(log_digest_at(conn, path[4], 3, d), 0);
        CHECK(memcmp(d, r.digest, CHAIN_LEN) == 0);
    }
    {
        /* Another budget: its own statement. Forgotten: its own statement. */
        log_read_ahead(conn, rq, 5);
        mark = (fflush(t.f), t.len);
        log_read_req r = rq[0];
        r.max_bytes = 4;
        char out[256] = "";
        CHECK_EQ_INT(log_read(conn, &r, collect_text, out), 0);
        CHECK_EQ_INT(round_trips(&t, &mark), 1);
        log_read_ahead(conn, NULL, 0);
        CHECK_EQ_INT(pgc(conn)->nahead, 0);
        r = rq[0];
        out[0] = 0;
        CHECK_EQ_INT(log_read(conn, &r, collect_text, out), 0);
        CHECK_EQ_STR(out, "0@0:a0 1@2:b0 2@4:c0 3@6:zz");
        CHECK_EQ_INT(round_trips(&t, &mark), 1);
    }
    trace_off(&t);
    /* Inside a group: nothing fetched ahead, the read the group's own. */
    log_read_req in[2] = {rq[0], rq[2]};
    CHECK_EQ_INT(log_transact(conn, ahead_in_group, in), 0);
}

/* ---- the history cache (log_opts.read_cache_kib, pg_hist.c) ---------------------------------- */

typedef struct big_text {
    char s[16384];
    size_t n;
} big_text;

static int big_collect(void *ud, const void *data, size_t len, offset_t at)
{
    big_text *t = ud;
    int k = snprintf(t->s + t->n, sizeof t->s - t->n, "%s%llu@%llu:%.*s", t->n ? " " : "",
                     (unsigned long long)at.seq, (unsigned long long)at.pos, (int)len, (const char *)data);
    if (k > 0 && (size_t)k < sizeof t->s - t->n) t->n += (size_t)k;
    return 0;
}

/* A read of path on c from at (kind, from, max_bytes as given): its text, rc,
 * next offset, digest, up_to_date, all in one string, to compare reads. */
static void read_whole(log_conn_t *c, const char *path, offset_kind kind, offset_t from, size_t max_bytes,
                       big_text *t)
{
    log_read_req r;
    t->n = 0;
    t->s[0] = 0;
    int rc = test_db_read(c, &r, path, kind, from, max_bytes, big_collect, t);
    char hex[CHAIN_HEX + 1];
    chain_hex(r.digest, hex);
    int k = snprintf(t->s + t->n, sizeof t->s - t->n, " | rc %d next %llu@%llu %s %d count %zu", rc,
                     (unsigned long long)r.next.seq, (unsigned long long)r.next.pos, rc ? "" : hex, r.up_to_date,
                     (size_t)r.count);
    if (k > 0 && (size_t)k < sizeof t->s - t->n) t->n += (size_t)k;
}

static void cache_stats(log_t *l, uint64_t *hits, uint64_t *misses)
{
    uint64_t bytes;
    log_read_cache_stats(l, hits, misses, &bytes);
}

static void append_texts(log_conn_t *c, const char *path, char prefix, int from, int to)
{
    for (int i = from; i < to; i++) {
        char m[32];
        snprintf(m, sizeof m, "%c%d", prefix, i);
        CHECK_EQ_INT(test_db_append(c, path, m), 0);
    }
}

/* The same read on the process with the cache (cc) and on one without (conn):
 * the same messages, offsets, digest and state; 1 if it was a hit. */
static int same_read(log_t *lc, log_conn_t *cc, const char *path, offset_kind kind, offset_t from, size_t max_bytes)
{
    static big_text want, got;
    uint64_t h0, m0, h1, m1;
    read_whole(conn, path, kind, from, max_bytes, &want);
    cache_stats(lc, &h0, &m0);
    read_whole(cc, path, kind, from, max_bytes, &got);
    cache_stats(lc, &h1, &m1);
    if (!CHECK_EQ_STR(got.s, want.s)) fprintf(stderr, "  (%s from %llu, max %zu)\n", path,
                                              (unsigned long long)from.seq, max_bytes);
    return h1 > h0;
}

typedef struct cache_reader {
    log_t *lc;
    const char *path;
    int reads, bad;
} cache_reader;

typedef struct seq_check {
    uint64_t next;
    int bad;
} seq_check;

static int seq_collect(void *ud, const void *data, size_t len, offset_t at)
{
    seq_check *k = ud;
    char want[32];
    int n = snprintf(want, sizeof want, "n%llu", (unsigned long long)at.seq);
    if (at.seq != k->next || len != (size_t)n || memcmp(data, want, len)) k->bad++;
    k->next = at.seq + 1;
    return 0;
}

/* Reads from the start while another thread appends "n<seq>": each one the
 * messages 0.. in order, its digest the stream's at its end. */
static void *cache_read_loop(void *arg)
{
    cache_reader *cr = arg;
    char err[256];
    log_conn_t *c = log_conn_open(cr->lc, err, sizeof err);
    if (!c) {
        cr->bad++;
        return NULL;
    }
    for (int i = 0; i < cr->reads; i++) {
        log_read_req r;
        memset(&r, 0, sizeof r);
        r.path = cr->path;
        r.kind = OFFSET_START;
        r.max_bytes = (size_t)-1;
        seq_check k = {0, 0};
        uint8_t d[CHAIN_LEN];
        if (log_read(c, &r, seq_collect, &k) || k.bad || k.next != r.next.seq ||
            log_digest_at(c, cr->path, r.next.seq, d) || memcmp(d, r.digest, CHAIN_LEN))
            cr->bad++;
    }
    log_conn_close(c);
    return NULL;
}

/* A process with the history cache (another log_t on the same database, as a
 * second pool would be) reads what one without it reads, byte for byte, offset
 * for offset, digest for digest: from the start, from the middle, with a budget
 * that stops inside what it keeps, after appends by another process (the kept
 * messages first, the new ones from the database), after the stream was deleted
 * and made again at the same path (the kept history is not its: dropped), from
 * a fork; its second read of a stream finds the messages kept; a stream larger
 * than a quarter of the cache is not kept, and the cache holds no more than its
 * size; readers in four threads while another process appends see every
 * message once, in order. */
static void test_read_cache(void)
{
    char err[256];
    log_opts o = {0, 5000, 0, 0, 64};      /* 64 KiB: an entry at most 16 */
    log_t *lc = log_open(uri, &o, err, sizeof err);
    if (!CHECK(lc != NULL)) return;
    log_conn_t *cc = log_conn_open(lc, err, sizeof err);
    if (!CHECK(cc != NULL)) {
        log_close(lc);
        return;
    }
    uint64_t hits, misses, bytes;
    log_read_cache_stats(lg, &hits, &misses, &bytes);
    CHECK(hits == 0 && misses == 0 && bytes == 0);      /* the default: none */

    CHECK_EQ_INT(test_db_create(conn, "/rc/a"), 0);
    append_texts(conn, "/rc/a", 'm', 0, 50);          /* "m0".."m49": 2 and 3 bytes */
    offset_t z = {0, 0};
    CHECK(!same_read(lc, cc, "/rc/a", OFFSET_START, z, (size_t)-1));    /* fetched, kept */
    CHECK(same_read(lc, cc, "/rc/a", OFFSET_START, z, (size_t)-1));     /* kept */
    log_read_cache_stats(lc, &hits, &misses, &bytes);
    CHECK(bytes >= 140);
    /* From the middle (m10 is at 2 * 10 = 20), a wrong position, a budget that
     * stops inside what is kept (the digest where it stops looked up), from the
     * tail and past it. */
    CHECK(same_read(lc, cc, "/rc/a", OFFSET_AT, (offset_t){10, 20}, (size_t)-1));
    same_read(lc, cc, "/rc/a", OFFSET_AT, (offset_t){10, 21}, (size_t)-1);
    CHECK(same_read(lc, cc, "/rc/a", OFFSET_START, z, 9));
    CHECK(same_read(lc, cc, "/rc/a", OFFSET_AT, (offset_t){40, 110}, 1));
    same_read(lc, cc, "/rc/a", OFFSET_AT, (offset_t){50, 140}, (size_t)-1);
    same_read(lc, cc, "/rc/a", OFFSET_AT, (offset_t){51, 143}, (size_t)-1);
    same_read(lc, cc, "/rc/a", OFFSET_NOW, z, (size_t)-1);
    /* Appended by another process: the kept ones, then the new ones. */
    append_texts(conn, "/rc/a", 'm', 50, 55);
    CHECK(same_read(lc, cc, "/rc/a", OFFSET_START, z, (size_t)-1));
    CHECK(same_read(lc, cc, "/rc/a", OFFSET_AT, (offset_t){52, 146}, (size_t)-1));   /* kept since */
    CHECK(same_read(lc, cc, "/rc/a", OFFSET_START, z, 100));
    /* Closed: the same messages, the state the row's. */
    log_append_req cl;
    memset(&cl, 0, sizeof cl);
    cl.path = "/rc/a";
    cl.close = 1;
    CHECK_EQ_INT(log_append(conn, &cl), 0);
    CHECK(same_read(lc, cc, "/rc/a", OFFSET_START, z, (size_t)-1));
    /* A fork at 20 (m20, at 20 + 10 * 3) and its own: read as without the cache. */
    CHECK_EQ_INT(test_db_fork(conn, "/rc/f", "/rc/a", (offset_t){20, 50}), 0);
    CHECK_EQ_INT(test_db_append(conn, "/rc/f", "own"), 0);
    same_read(lc, cc, "/rc/f", OFFSET_START, z, (size_t)-1);
    same_read(lc, cc, "/rc/f", OFFSET_START, z, (size_t)-1);
    /* Deleted (its fork keeps it, as deleted) and made again at the same path,
     * with other bytes at the same positions: the kept history is not its. */
    CHECK_EQ_INT(log_delete(conn, "/rc/f"), 0);
    CHECK_EQ_INT(log_delete(conn, "/rc/a"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/rc/a"), 0);
    append_texts(conn, "/rc/a", 'M', 0, 50);
    CHECK(!same_read(lc, cc, "/rc/a", OFFSET_START, z, (size_t)-1));
    CHECK(same_read(lc, cc, "/rc/a", OFFSET_START, z, (size_t)-1));
    /* The oldest dropped behind its back (as retention's sweep does): a read from
     * the start begins at the first one left. */
    PGconn *pg = admin();
    CHECK(sql_ok(pg, "DELETE FROM messages WHERE stream = (SELECT id FROM streams WHERE path = '/rc/a') AND seq < 5"));
    same_read(lc, cc, "/rc/a", OFFSET_START, z, (size_t)-1);
    same_read(lc, cc, "/rc/a", OFFSET_START, z, (size_t)-1);
    /* And every one: nothing kept serves (the digest it was checked by is gone). */
    CHECK(sql_ok(pg, "DELETE FROM messages WHERE stream = (SELECT id FROM streams WHERE path = '/rc/a')"));
    same_read(lc, cc, "/rc/a", OFFSET_AT, (offset_t){10, 20}, (size_t)-1);
    PQfinish(pg);

    /* Larger than a quarter of the cache (16 KiB): never kept. Ten streams of
     * 6 KiB each, read twice: the cache stays within its 64 KiB. */
    CHECK_EQ_INT(test_db_create(conn, "/rc/big"), 0);
    char blob[2001];
    memset(blob, 'b', 2000);
    blob[2000] = 0;
    for (int i = 0; i < 9; i++) CHECK_EQ_INT(test_db_append(conn, "/rc/big", blob), 0);
    CHECK(!same_read(lc, cc, "/rc/big", OFFSET_START, z, (size_t)-1));
    CHECK(!same_read(lc, cc, "/rc/big", OFFSET_START, z, (size_t)-1));
    blob[1000] = 0;
    for (int k = 0; k < 10; k++) {
        char path[32];
        snprintf(path, sizeof path, "/rc/s%d", k);
        CHECK_EQ_INT(test_db_create(conn, path), 0);
        for (int i = 0; i < 6; i++) CHECK_EQ_INT(test_db_append(conn, path, blob), 0);
        same_read(lc, cc, path, OFFSET_START, z, (size_t)-1);
        CHECK(same_read(lc, cc, path, OFFSET_START, z, (size_t)-1));
        log_read_cache_stats(lc, &hits, &misses, &bytes);
        CHECK(bytes <= 64 * 1024);
    }

    /* Four readers with the cache while another process appends n0..n299. */
    CHECK_EQ_INT(test_db_create(conn, "/rc/live"), 0);
    append_texts(conn, "/rc/live", 'n', 0, 100);
    pthread_t th[4];
    cache_reader cr[4];
    for (int i = 0; i < 4; i++) {
        cr[i] = (cache_reader){lc, "/rc/live", 150, 0};
        pthread_create(&th[i], NULL, cache_read_loop, &cr[i]);
    }
    append_texts(conn, "/rc/live", 'n', 100, 300);
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += cr[i].bad;
    }
    CHECK_EQ_INT(bad, 0);
    uint64_t h0 = hits;
    log_read_cache_stats(lc, &hits, &misses, &bytes);
    CHECK(hits > h0);
    log_conn_close(cc);
    log_close(lc);
}

/* One group, its steps called as lib/log.c's group commit calls them: operations
 * that succeed, one that fails after its append (undone alone), one that fails
 * before any statement, one whose first statement fails, one that changes a
 * stream's row by a statement of its own (the next append sees it). An append
 * whose row the group's lock read is one round trip (its savepoint, its insert,
 * the tail; the last savepoint's RELEASE with them, or in the COMMIT). */
static void test_group_ops(void)
{
    const store_engine *e = &store_pg;
    const char *paths[] = {"/go/a", "/go/b"};
    CHECK_EQ_INT(test_db_create(conn, "/go/a"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/go/b"), 0);
    CHECK_EQ_INT(test_db_append(conn, "/go/b", "warm"), 0);    /* its statements prepared */
    tracer t;
    size_t mark = 0;
    trace_on(&t);
    if (!t.f) return;
    conn->group_ops = 8;                /* as lib/log.c counts a group of several */
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths, 2), 0);
    round_trips(&t, &mark);
    /* An append: 1 round trip (it was 5: SAVEPOINT, the row, the insert, the
     * tail, RELEASE). */
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/go/a", "one"), 0);
    CHECK_EQ_INT(e->op_end(conn, 0), 0);
    CHECK_EQ_INT(round_trips(&t, &mark), 1);
    /* An append, then a statement that fails: the operation is undone alone. */
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/go/a", "undone"), 0);
    int rc = pg_exec(conn, "SELECT 1 / 0", NULL);
    CHECK_EQ_INT(rc, LOG_EIO);
    CHECK_EQ_INT(e->op_end(conn, rc), 0);
    CHECK_EQ_INT(round_trips(&t, &mark), 3);   /* + the failed statement, ROLLBACK TO */
    /* One that fails before it sends anything: no statement at all. */
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(e->op_end(conn, LOG_EINVAL), 0);
    CHECK_EQ_INT(round_trips(&t, &mark), 0);
    /* One that hides a failed statement (says it succeeded): undone alone, and it
     * fails (op_undone: lib/log.c answers it LOG_EIO, never "committed"). */
    conn->op_undone = 0;
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/go/a", "hidden"), 0);
    CHECK_EQ_INT(pg_exec(conn, "SELECT 1 / 0", NULL), LOG_EIO);
    CHECK_EQ_INT(e->op_end(conn, 0), 0);
    CHECK_EQ_INT(conn->op_undone, LOG_EIO);
    conn->op_undone = 0;
    round_trips(&t, &mark);
    /* An append to the other stream. */
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/go/b", "two"), 0);
    CHECK_EQ_INT(e->op_end(conn, 0), 0);
    /* One whose first statement (sent with its savepoint) fails: undone alone. */
    CHECK_EQ_INT(e->op_begin(conn), 0);
    rc = pg_exec(conn, "SELECT 1 / 0", NULL);
    CHECK_EQ_INT(rc, LOG_EIO);
    CHECK_EQ_INT(e->op_end(conn, rc), 0);
    /* And one more after it: its row read again (the rows kept no longer held),
     * then its write. */
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/go/a", "three"), 0);
    CHECK_EQ_INT(e->op_end(conn, 0), 0);
    round_trips(&t, &mark);
    /* One that closes b by a statement of its own: the next append to b finds it
     * closed (not the row as the group's lock read it). */
    CHECK_EQ_INT(e->op_begin(conn), 0);
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, "/go/b");
    CHECK_EQ_INT(pg_exec(conn, "UPDATE streams SET closed = 1 WHERE path = $1", &p), 0);
    CHECK_EQ_INT(e->op_end(conn, 0), 0);
    CHECK_EQ_INT(e->op_begin(conn), 0);
    rc = tx_append("/go/b", "refused");
    CHECK_EQ_INT(rc, LOG_ECLOSED);
    CHECK_EQ_INT(e->op_end(conn, rc), 0);
    CHECK_EQ_INT(e->group_end(conn, 0), 0);
    trace_off(&t);
    CHECK_EQ_INT(pgc(conn)->in_tx, 0);
    char got[256];
    text_of("/go/a", got);
    CHECK_EQ_STR(got, "0@0:one 1@3:three");
    text_of("/go/b", got);
    CHECK_EQ_STR(got, "0@0:warm 1@4:two");

    /* A group whose operations all failed commits nothing. */
    conn->group_ops = 8;                /* as lib/log.c counts a group of several */
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/go/a", "gone"), 0);
    CHECK_EQ_INT(e->op_end(conn, LOG_EINVAL), 0);
    CHECK_EQ_INT(e->group_end(conn, 0), 0);
    text_of("/go/a", got);
    CHECK_EQ_STR(got, "0@0:one 1@3:three");
}

/* ---- the tails kept back: a stream row's UPDATE once per stream and group ---------- */

/* Rows of streams this backend updated and has not reported yet (the tails kept
 * back go before the statement that asks). */
static int64_t tails_updated(void)
{
    int rc;
    PGresult *r = pg_run(conn, "SELECT pg_stat_get_xact_tuples_updated('streams'::regclass)", NULL, 0, &rc);
    int64_t n = r ? pg_int_of(r, 0, 0) : -1;
    PQclear(r);
    return n;
}

/* An operation of one append to path, ending with op_rc (an append undone with
 * it when op_rc < 0). */
static void op_append(const char *path, const char *msg, int op_rc)
{
    const store_engine *e = &store_pg;
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append(path, msg), 0);
    CHECK_EQ_INT(e->op_end(conn, op_rc), 0);
}

/* Whether path's row has the tail (seq, pos) and its last message's digest. */
static void row_tail(PGconn *pg, const char *path, uint64_t seq, uint64_t pos)
{
    const char *v[1] = {path};
    PGresult *r = PQexecParams(pg,
                               "SELECT s.tail_seq, s.tail_pos, s.digest = (SELECT m.digest FROM messages m"
                               " WHERE m.stream = s.id AND m.seq = s.tail_seq - 1) FROM streams s WHERE s.path = $1",
                               1, NULL, v, NULL, NULL, 0);
    if (!CHECK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)) {
        PQclear(r);
        return;
    }
    CHECK_EQ_UINT(strtoull(PQgetvalue(r, 0, 0), NULL, 10), seq);
    CHECK_EQ_UINT(strtoull(PQgetvalue(r, 0, 1), NULL, 10), pos);
    if (seq) CHECK_EQ_STR(PQgetvalue(r, 0, 2), "t");
    PQclear(r);
}

/* One group of appends to two streams, a failing one among them: each stream's
 * row is updated once however many appends it took (its tail kept back with the
 * row the group holds, and sent before any other statement), the failing ones
 * are undone alone (their neighbours committed, offsets contiguous, the rows'
 * tails and digests the last messages'), also when the tails went inside the
 * failing operation (before a statement of its own) and a row was read again. */
static void test_tails_kept(void)
{
    const store_engine *e = &store_pg;
    const char *paths[] = {"/gt/a", "/gt/b"};
    CHECK_EQ_INT(test_db_create(conn, "/gt/a"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/gt/b"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/gt/c"), 0);
    conn->group_ops = 8;                /* as lib/log.c counts a group of several */
    CHECK_EQ_INT(e->group_begin(conn), 0);
    /* (the backend's count goes on from its earlier transactions until it reports them) */
    int64_t before = tails_updated();
    CHECK_EQ_INT(e->group_lock(conn, paths, 2), 0);
    op_append("/gt/a", "1", 0);
    op_append("/gt/b", "1", 0);
    op_append("/gt/a", "2", 0);
    op_append("/gt/a", "bad", LOG_EINVAL);    /* in the middle: undone alone */
    op_append("/gt/a", "3", 0);
    op_append("/gt/b", "2", 0);
    /* Five appends, two rows: two updates (the tails go before this statement). */
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tails_updated() - before, 2);
    CHECK_EQ_INT(e->op_end(conn, 0), 0);
    op_append("/gt/a", "4", 0);
    /* An append, then one to a stream the group's lock did not take (its row read:
     * a's tail goes first, inside this operation), then the operation fails: both
     * undone, a's tail kept back again as it was before it. */
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/gt/a", "undone"), 0);
    CHECK_EQ_INT(tx_append("/gt/c", "undone"), 0);
    CHECK_EQ_INT(e->op_end(conn, LOG_EINVAL), 0);
    op_append("/gt/a", "5", 0);
    /* A read inside the group sees its appends. */
    char got[256];
    CHECK_EQ_INT(e->op_begin(conn), 0);
    text_of("/gt/a", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2 2@2:3 3@3:4 4@4:5");
    CHECK_EQ_INT(e->op_end(conn, 0), 0);
    op_append("/gt/b", "3", 0);
    CHECK_EQ_INT(e->group_end(conn, 0), 0);
    CHECK_EQ_INT(pgc(conn)->ndirty, 0);

    text_of("/gt/a", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2 2@2:3 3@3:4 4@4:5");
    text_of("/gt/b", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2 2@2:3");
    text_of("/gt/c", got);
    CHECK_EQ_STR(got, "");
    PGconn *pg = admin();
    row_tail(pg, "/gt/a", 5, 5);
    row_tail(pg, "/gt/b", 3, 3);
    row_tail(pg, "/gt/c", 0, 0);
    /* The next append goes on from the tail. */
    CHECK_EQ_INT(test_db_append(conn, "/gt/a", "6"), 0);
    text_of("/gt/a", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2 2@2:3 3@3:4 4@4:5 5@5:6");
    row_tail(pg, "/gt/a", 6, 6);

    /* A group that fails as a whole leaves no tail behind for the next. */
    conn->group_ops = 8;                /* as lib/log.c counts a group of several */
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths, 1), 0);
    op_append("/gt/a", "lost", 0);
    CHECK_EQ_INT(e->group_end(conn, LOG_EIO), LOG_EIO);
    CHECK_EQ_INT(pgc(conn)->ndirty, 0);
    CHECK_EQ_INT(test_db_append(conn, "/gt/a", "7"), 0);
    text_of("/gt/a", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2 2@2:3 3@3:4 4@4:5 5@5:6 6@6:7");
    row_tail(pg, "/gt/a", 7, 7);
    PQfinish(pg);
}

/* ---- a trial: a group of appends without a savepoint each (store.h: group_trial) ---- */

/* The lines of the trace since *mark that the client sent and that hold needle
 * (*mark moved to the trace's end). */
static int sent_with(tracer *t, size_t *mark, const char *needle)
{
    fflush(t->f);
    int n = 0;
    for (const char *s = t->buf ? t->buf + *mark : NULL; s && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
        const char *end = strchr(s, '\n');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (!strncmp(s, "F\t", 2) && memmem(s, len, needle, strlen(needle))) n++;
    }
    *mark = t->len;
    return n;
}

/* A message row at path's tail, put there behind the log's back: the next append's
 * insert there fails (the key (stream, seq) is taken). */
static void poison(PGconn *pg, const char *path, int on)
{
    const char *v[1] = {path};
    PGresult *r = PQexecParams(pg, on ? "INSERT INTO messages (stream, seq, pos, rec, data, digest)"
                                        " SELECT id, tail_seq, tail_pos, tail_seq, 'x', digest FROM streams WHERE path = $1"
                                      : "DELETE FROM messages m USING streams s WHERE s.path = $1 AND m.stream = s.id"
                                        " AND m.seq = s.tail_seq",
                               1, NULL, v, NULL, NULL, 0);
    CHECK(PQresultStatus(r) == PGRES_COMMAND_OK && !strcmp(PQcmdTuples(r), "1"));
    PQclear(r);
}

/* A group of appends whose rows the group's lock holds costs the same round trips
 * however many appends it holds: BEGIN with the lock (which reads the
 * transaction's id), then the inserts (sent one by one without waiting), the tails'
 * UPDATE, the NOTIFY and the COMMIT in one pipeline (pg_run_commit): two; and no
 * SAVEPOINT at all. An append refused before it sends anything
 * (a closed stream) fails alone and the trial goes on. */
static void test_trial_group(void)
{
    const store_engine *e = &store_pg;
    const char *paths[] = {"/tg/a", "/tg/b", "/tg/c"};
    char got[256];
    CHECK_EQ_INT(test_db_create(conn, "/tg/a"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/tg/b"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/tg/c"), 0);
    CHECK_EQ_INT(test_db_append(conn, "/tg/b", "warm"), 0);    /* its statements prepared */
    log_append_req cl;
    memset(&cl, 0, sizeof cl);
    cl.path = "/tg/c";
    cl.close = 1;
    CHECK_EQ_INT(log_append(conn, &cl), 0);
    tracer t;
    size_t mark = 0, smark = 0;
    trace_on(&t);
    if (!t.f) return;
    conn->group_trial = 1;
    conn->group_ops = 8;                /* lib/log.c's count: not an operation alone */
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths, 3), 0);
    CHECK_EQ_INT(round_trips(&t, &mark), 1);            /* the lock, its BEGIN sent with it */
    op_append("/tg/a", "1", 0);
    op_append("/tg/b", "1", 0);
    op_append("/tg/a", "2", 0);
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/tg/c", "refused"), LOG_ECLOSED);
    CHECK_EQ_INT(e->op_end(conn, LOG_ECLOSED), 0);      /* nothing sent: nothing to undo */
    op_append("/tg/a", "3", 0);
    op_append("/tg/b", "2", 0);
    if (getenv("TRACE_DUMP")) { fflush(t.f); fputs(t.buf + mark, stderr); }
    CHECK_EQ_INT(round_trips(&t, &mark), 0);            /* five appends, not one waited for */
    CHECK_EQ_INT(e->group_end(conn, 0), 0);
    CHECK_EQ_INT(round_trips(&t, &mark), 1);            /* the results with UPDATE + NOTIFY + COMMIT */
    CHECK_EQ_INT(sent_with(&t, &smark, "SAVEPOINT"), 0);
    CHECK_EQ_INT(sent_with(&t, &smark, "RELEASE"), 0);
    trace_off(&t);
    CHECK_EQ_INT(pgc(conn)->pending, 0);
    CHECK_EQ_INT(pgc(conn)->in_tx, 0);
    text_of("/tg/a", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2 2@2:3");
    text_of("/tg/b", got);
    CHECK_EQ_STR(got, "0@0:warm 1@4:1 2@5:2");
    PGconn *pg = admin();
    row_tail(pg, "/tg/a", 3, 3);
    row_tail(pg, "/tg/b", 3, 6);
    row_tail(pg, "/tg/c", 0, 0);
    PQfinish(pg);
}

/* A trial that fails is rolled back whole (LOG_ERERUN): an append that failed
 * after sending a statement, or an insert sent without waiting whose result
 * comes back failed (found by the next statement, or before the NOTIFY). The
 * group run again with a savepoint each (as lib/log.c does) fails that append
 * alone: its neighbours commit, offsets contiguous. Through log_append the rerun
 * is lib/log.c's own: the caller gets the append's error, never LOG_ERERUN. */
static void test_trial_rerun(void)
{
    const store_engine *e = &store_pg;
    const char *paths[] = {"/tr/a", "/tr/p"};
    char got[256];
    CHECK_EQ_INT(test_db_create(conn, "/tr/a"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/tr/p"), 0);
    CHECK_EQ_INT(test_db_append(conn, "/tr/p", "0"), 0);
    /* An operation that fails after its statement: the trial is lost. */
    conn->group_trial = 1;
    conn->group_ops = 8;                /* lib/log.c's count: not an operation alone */
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths, 1), 0);
    op_append("/tr/a", "1", 0);
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/tr/a", "bad"), 0);
    CHECK_EQ_INT(e->op_end(conn, LOG_EINVAL), LOG_ERERUN);
    CHECK_EQ_INT(e->group_end(conn, LOG_ERERUN), LOG_ERERUN);
    CHECK_EQ_INT(pgc(conn)->in_tx, 0);
    text_of("/tr/a", got);
    CHECK_EQ_STR(got, "");
    /* Run again, each in a savepoint: the bad one undone alone. */
    conn->group_trial = 0;
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths, 1), 0);
    op_append("/tr/a", "1", 0);
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/tr/a", "bad"), 0);
    CHECK_EQ_INT(e->op_end(conn, LOG_EINVAL), 0);
    op_append("/tr/a", "2", 0);
    CHECK_EQ_INT(e->group_end(conn, 0), 0);
    text_of("/tr/a", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2");

    /* An insert that fails at the server, sent without waiting: its append is
     * answered 0 at once, the trial fails at the next statement that waits. */
    PGconn *pg = admin();
    poison(pg, "/tr/p", 1);
    conn->group_trial = 1;
    conn->group_ops = 8;                /* lib/log.c's count: not an operation alone */
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths, 2), 0);
    op_append("/tr/a", "3", 0);
    op_append("/tr/p", "dup", 0);
    op_append("/tr/a", "4", 0);
    CHECK_EQ_INT(e->group_end(conn, 0), LOG_ERERUN);
    CHECK_EQ_INT(pgc(conn)->pending, 0);
    CHECK_EQ_INT(pgc(conn)->in_tx, 0);
    text_of("/tr/a", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2");
    /* ... and when a statement that waits comes first (a stream the lock did not take). */
    conn->group_trial = 1;
    conn->group_ops = 8;                /* lib/log.c's count: not an operation alone */
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths + 1, 1), 0);
    op_append("/tr/p", "dup", 0);
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK(tx_append("/tr/a", "3") < 0);
    CHECK_EQ_INT(e->op_end(conn, LOG_EIO), LOG_ERERUN);
    CHECK_EQ_INT(e->group_end(conn, LOG_ERERUN), LOG_ERERUN);
    /* Run again with savepoints: the append to p fails alone. */
    conn->group_trial = 0;
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths, 2), 0);
    op_append("/tr/a", "3", 0);
    CHECK_EQ_INT(e->op_begin(conn), 0);
    int rc = tx_append("/tr/p", "dup");
    CHECK_EQ_INT(rc, LOG_EIO);
    CHECK_EQ_INT(e->op_end(conn, rc), 0);
    op_append("/tr/a", "4", 0);
    CHECK_EQ_INT(e->group_end(conn, 0), 0);
    text_of("/tr/a", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2 2@2:3 3@3:4");
    /* Through the log: the trial fails (its ROLLBACK), lib/log.c runs the group
     * again (alone in it, the append takes no savepoint: its ROLLBACK), and the
     * caller gets the append's own error. */
    tracer t;
    size_t smark = 0;
    trace_on(&t);
    if (!t.f) return;
    CHECK_EQ_INT(test_db_append(conn, "/tr/p", "dup"), LOG_EIO);
    CHECK_EQ_INT(sent_with(&t, &smark, "ROLLBACK"), 2);
    CHECK_EQ_INT(test_db_append(conn, "/tr/a", "5"), 0);
    CHECK_EQ_INT(sent_with(&t, &smark, "SAVEPOINT"), 0);
    trace_off(&t);
    CHECK_EQ_INT(conn->group_trial, 0);
    poison(pg, "/tr/p", 0);
    CHECK_EQ_INT(test_db_append(conn, "/tr/p", "1"), 0);
    text_of("/tr/p", got);
    CHECK_EQ_STR(got, "0@0:0 1@1:1");
    text_of("/tr/a", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2 2@2:3 3@3:4 4@4:5");
    row_tail(pg, "/tr/a", 5, 5);
    row_tail(pg, "/tr/p", 2, 2);
    PQfinish(pg);
}

/* An operation that locks /al/a and appends "dup" to it (no append of its own to
 * lib/log.c: no trial). */
static int op_append_dup(log_conn_t *c, void *ud)
{
    (void)ud;
    log_msg m = {"dup", 3};
    log_append_req r;
    memset(&r, 0, sizeof r);
    r.path = "/al/a";
    r.msgs = &m;
    r.nmsgs = 1;
    return log_tx_append_many(c, &r, 1, NULL);
}

/* An operation alone in its group (the runner's commits; group_ops == 1) takes no
 * savepoint, trial or not: it fails with its own result, its transaction rolled
 * back; its nested savepoints work as inside one. */
static void test_alone(void)
{
    const store_engine *e = &store_pg;
    const char *paths[] = {"/al/a"};
    char got[256];
    CHECK_EQ_INT(test_db_create(conn, "/al/a"), 0);
    tracer t;
    size_t smark = 0;
    trace_on(&t);
    if (!t.f) return;
    conn->group_trial = 0;
    conn->group_ops = 1;
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths, 1), 0);
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/al/a", "1"), 0);
    CHECK_EQ_INT(log_tx_nest_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/al/a", "undone"), 0);
    CHECK_EQ_INT(log_tx_nest_end(conn, 1), 0);
    CHECK_EQ_INT(tx_append("/al/a", "2"), 0);
    CHECK_EQ_INT(e->op_end(conn, 0), 0);
    CHECK_EQ_INT(e->group_end(conn, 0), 0);
    CHECK_EQ_INT(sent_with(&t, &smark, "SAVEPOINT op"), 0);
    CHECK_EQ_INT(sent_with(&t, &smark, "RELEASE op"), 0);
    text_of("/al/a", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2");
    /* One that fails after its statements: its own result, nothing of it kept. */
    conn->group_ops = 1;
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths, 1), 0);
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/al/a", "gone"), 0);
    CHECK_EQ_INT(e->op_end(conn, LOG_ESEQ), LOG_ESEQ);
    CHECK_EQ_INT(e->group_end(conn, LOG_ESEQ), LOG_ESEQ);
    CHECK_EQ_INT(pgc(conn)->in_tx, 0);
    CHECK_EQ_INT(sent_with(&t, &smark, "SAVEPOINT op"), 0);
    /* Its insert is not waited for (nor a trial's): the lock, then the insert, the
     * tail, the NOTIFY and the COMMIT in one round trip. */
    size_t mark = t.len;
    conn->group_ops = 1;
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths, 1), 0);
    CHECK(pgc(conn)->xid > 0);
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/al/a", "3"), 0);
    CHECK_EQ_INT(pgc(conn)->pending, 1);
    CHECK_EQ_INT(e->op_end(conn, 0), 0);
    CHECK_EQ_INT(e->group_end(conn, 0), 0);
    CHECK_EQ_INT(round_trips(&t, &mark), 2);
    CHECK_EQ_INT(pgc(conn)->in_tx, 0);
    CHECK_EQ_INT(pgc(conn)->xid, 0);
    /* One whose insert fails at the server, unread: the operation is answered 0,
     * the group fails with the insert's own error (not a trial's LOG_ERERUN), its
     * COMMIT never ran, and nothing of it is kept. */
    PGconn *pg = admin();
    poison(pg, "/al/a", 1);
    conn->group_ops = 1;
    CHECK_EQ_INT(e->group_begin(conn), 0);
    CHECK_EQ_INT(e->group_lock(conn, paths, 1), 0);
    CHECK_EQ_INT(e->op_begin(conn), 0);
    CHECK_EQ_INT(tx_append("/al/a", "dup"), 0);
    CHECK_EQ_INT(e->op_end(conn, 0), 0);
    CHECK_EQ_INT(e->group_end(conn, 0), LOG_EIO);
    CHECK_EQ_INT(pgc(conn)->pending, 0);
    CHECK_EQ_INT(pgc(conn)->in_tx, 0);
    CHECK_EQ_INT(sent_with(&t, &smark, "ROLLBACK"), 1);
    /* ... and through the log, an operation alone that is no append (no trial):
     * its own error, once (no run again). */
    CHECK_EQ_INT(log_transact(conn, op_append_dup, NULL), LOG_EIO);
    CHECK_EQ_INT(sent_with(&t, &smark, "ROLLBACK"), 1);
    trace_off(&t);
    poison(pg, "/al/a", 0);
    text_of("/al/a", got);
    CHECK_EQ_STR(got, "0@0:1 1@1:2 2@2:3");
    row_tail(pg, "/al/a", 3, 3);
    PQfinish(pg);
}

/* ---- a batch of appends: a few statements for all of them --------------------------- */

typedef struct many_arg {
    log_append_req *r;
    size_t n;
} many_arg;

static int op_many(log_conn_t *c, void *ud)
{
    many_arg *a = ud;
    return log_tx_append_many(c, a->r, a->n, NULL);
}

/* The statements bound (Bind messages the client sent) since *mark (moved on). */
static int binds_since(tracer *t, size_t *mark)
{
    return sent_with(t, mark, "\tBind\t");
}

/* A batch of appends (log_tx_append_many, as the runner's commit makes it) over 20
 * streams, two messages each and one stream twice: the rows locked in one statement,
 * every message inserted with one (alone in its group, not waited for), every tail
 * moved with one, then the NOTIFY and the COMMIT, all four in one pipeline: 6
 * statements with the BEGIN and 2 round trips, where one by one each append was
 * about 3 statements and 2 round trips. Each row then holds its tail and its last
 * message's digest. */
static void test_append_many(void)
{
    enum { N = 20 };
    char path[N][32];
    log_msg m[2] = {{"ab", 2}, {"cde", 3}};
    log_append_req r[N + 1];
    for (int i = 0; i < N; i++) {
        snprintf(path[i], sizeof path[i], "/am/%02d", i);
        CHECK_EQ_INT(test_db_create(conn, path[i]), 0);
    }
    for (int round = 0; round < 2; round++) {
        memset(r, 0, sizeof r);
        for (int i = 0; i <= N; i++) {
            r[i].path = path[i == N ? 3 : N - 1 - i];   /* not in id order */
            r[i].msgs = m;
            r[i].nmsgs = 2;
        }
        many_arg a = {r, N + 1};
        tracer t;
        size_t rmark = 0, bmark = 0;
        if (round) trace_on(&t);      /* the first prepared the statements */
        CHECK_EQ_INT(log_transact(conn, op_many, &a), 0);
        if (!round) continue;
        CHECK_EQ_INT(binds_since(&t, &bmark), 6);       /* the BEGIN (with the lock), the COMMIT */
        CHECK_EQ_INT(round_trips(&t, &rmark), 2);
        trace_off(&t);
        CHECK_EQ_UINT(r[N].appended.seq, 6);             /* after its first request's */
        CHECK_EQ_UINT(r[N].appended.pos, 15);
    }
    PGconn *pg = admin();
    for (int i = 0; i < N; i++) row_tail(pg, path[i], i == 3 ? 8 : 4, i == 3 ? 20 : 10);
    PQfinish(pg);
}

/* Large values (sql/pg/022_lz4.sql): a group commit's row of stream_changes naming
 * 300 streams (2.4 KiB of ids) stays whole in its row, not compressed; a message of
 * 32 KiB and a session's snapshot of 60 KiB are compressed with lz4 and read back
 * whole. */
static void test_large_values(void)
{
    enum { N = 300 };
    static char path[N][32];
    static log_append_req r[N];
    log_msg m = {"ab", 2};
    for (int i = 0; i < N; i++) {
        snprintf(path[i], sizeof path[i], "/lz/%03d", i);
        CHECK_EQ_INT(test_db_create(conn, path[i]), 0);
    }
    memset(r, 0, sizeof r);
    for (int i = 0; i < N; i++) {
        r[i].path = path[i];
        r[i].msgs = &m;
        r[i].nmsgs = 1;
    }
    char *big = malloc(32768);
    if (!CHECK(big != NULL)) return;
    for (int i = 0; i < 32768; i++) big[i] = "{\"text\":\"the same words again \"}"[i % 32];
    log_msg bm = {big, 32768};
    r[7].msgs = &bm;
    many_arg a = {r, N};
    CHECK_EQ_INT(log_transact(conn, op_many, &a), 0);
    PGconn *pg = admin();
    PGresult *q = PQexec(pg, "SELECT cardinality(ids), pg_column_compression(ids) IS NULL,"
                             " pg_column_size(ids) > 2400 FROM stream_changes"
                             " WHERE ids IS NOT NULL ORDER BY xid DESC LIMIT 1");
    if (CHECK(PQresultStatus(q) == PGRES_TUPLES_OK && PQntuples(q) == 1)) {
        CHECK_EQ_STR(PQgetvalue(q, 0, 0), "300");
        CHECK_EQ_STR(PQgetvalue(q, 0, 1), "t");
        CHECK_EQ_STR(PQgetvalue(q, 0, 2), "t");
    }
    PQclear(q);
    q = PQexec(pg, "SELECT pg_column_compression(m.data), length(m.data), m.data = convert_to(repeat("
                   "'{\"text\":\"the same words again \"}', 1024), 'UTF8')"
                   " FROM messages m JOIN streams s ON s.id = m.stream WHERE s.path = '/lz/007'");
    if (CHECK(PQresultStatus(q) == PGRES_TUPLES_OK && PQntuples(q) == 1)) {
        CHECK_EQ_STR(PQgetvalue(q, 0, 0), "lz4");
        CHECK_EQ_STR(PQgetvalue(q, 0, 1), "32768");
        CHECK_EQ_STR(PQgetvalue(q, 0, 2), "t");
    }
    PQclear(q);
    CHECK(sql_ok(pg, "INSERT INTO snapshots VALUES ('lz-session', 64, 100, repeat('{\"t\":\"a reply\"}', 4096))"));
    q = PQexec(pg, "SELECT pg_column_compression(view), length(view) FROM snapshots WHERE session = 'lz-session'");
    if (CHECK(PQresultStatus(q) == PGRES_TUPLES_OK && PQntuples(q) == 1)) {
        CHECK_EQ_STR(PQgetvalue(q, 0, 0), "lz4");
        CHECK_EQ_STR(PQgetvalue(q, 0, 1), "61440");
    }
    PQclear(q);
    CHECK(sql_ok(pg, "DELETE FROM snapshots WHERE session = 'lz-session'"));
    PQfinish(pg);
    free(big);
}

/* What looks reported of two streams (log_changes_tails): a's count and last
 * tail, b's count. */
typedef struct two_seen {
    const char *a, *b;
    int na, nb;
    uint64_t tail_a;
} two_seen;

static void on_two(void *ud, int64_t id, const char *path, uint64_t tail)
{
    two_seen *o = ud;
    (void)id;
    if (!strcmp(path, o->a)) o->na++, o->tail_a = tail;
    if (!strcmp(path, o->b)) o->nb++;
}

static void two_reset(two_seen *o)
{
    o->na = o->nb = 0;
    o->tail_a = 0;
}

static int op_create_and_many(log_conn_t *c, void *ud)
{
    log_create_req cr;
    memset(&cr, 0, sizeof cr);
    cr.path = "/om/c";
    cr.content_type = "text/plain";
    cr.ttl_s = cr.expires_ms = -1;
    int rc = log_tx_create(c, &cr);
    return rc ? rc : op_many(c, ud);
}

/* The look through the change cursor on the connection that committed (the
 * runner's after its commits): a group whose every change was to a row it held is
 * reported from what the connection kept, its rows of stream_changes not read (a
 * stream row changed behind the engine's back shows which: its tail is not what
 * the look reports); a group with another change (a stream created) is read from
 * the database as before. */
static void test_changes_own_kept(void)
{
    log_msg m = {"x", 1};
    log_append_req r;
    CHECK_EQ_INT(test_db_create(conn, "/om/a"), 0);
    log_cursor rev = LOG_CURSOR_START;
    two_seen o = {"/om/a", "/om/c", 0, 0, 0};
    CHECK_EQ_INT(log_changes_tails(conn, &rev, on_two, &o), 0);   /* from now on */
    memset(&r, 0, sizeof r);
    r.path = "/om/a";
    r.msgs = &m;
    r.nmsgs = 1;
    many_arg a = {&r, 1};
    CHECK_EQ_INT(log_transact(conn, op_many, &a), 0);
    PGconn *pg = admin();
    CHECK(sql_ok(pg, "UPDATE streams SET tail_seq = 999 WHERE path = '/om/a'"));
    CHECK_EQ_INT(log_changes_tails(conn, &rev, on_two, &o), 0);
    CHECK_EQ_INT(o.na, 1);
    CHECK_EQ_UINT(o.tail_a, 1);
    CHECK(sql_ok(pg, "UPDATE streams SET tail_seq = 1 WHERE path = '/om/a'"));
    two_reset(&o);
    CHECK_EQ_INT(log_transact(conn, op_create_and_many, &a), 0);
    CHECK(sql_ok(pg, "UPDATE streams SET tail_seq = 999 WHERE path = '/om/a'"));
    CHECK_EQ_INT(log_changes_tails(conn, &rev, on_two, &o), 0);
    CHECK_EQ_INT(o.na, 1);
    CHECK_EQ_UINT(o.tail_a, 999);
    CHECK_EQ_INT(o.nb, 1);
    CHECK(sql_ok(pg, "UPDATE streams SET tail_seq = 2 WHERE path = '/om/a'"));
    PQfinish(pg);
}

static void ignore_reported(void *ud, int64_t id, const char *path)
{
    (void)ud, (void)id, (void)path;
}

/* One look: how many of its kind so far (answered from memory: kept). */
static void look_once(pg_conn *pc, log_cursor *rev, two_seen *o, unsigned *kept)
{
    two_reset(o);
    CHECK_EQ_INT(log_changes_tails(conn, rev, on_two, o), 0);
    *kept = pc->looks_kept;
}

/* A look answered from memory alone (pg_feed.c look_kept): while a feed of the
 * log listens and every change the process noted since the connection's last look
 * in the database was its own group kept. A change by another connection of the
 * process, another host's (once its NOTIFY is read), the LISTEN connection lost,
 * or a second since the last look in the database: the next look is in the
 * database, and reports it. */
static void test_look_kept(void)
{
    char err[256];
    log_msg m = {"x", 1};
    log_append_req r;
    log_info a, b;
    CHECK_EQ_INT(test_db_create(conn, "/lk/a"), 0);
    CHECK_EQ_INT(test_db_create(conn, "/lk/b"), 0);
    CHECK_EQ_INT(log_head(conn, "/lk/a", &a), 0);
    CHECK_EQ_INT(log_head(conn, "/lk/b", &b), 0);
    pg_conn *pc = pgc(conn);
    memset(&r, 0, sizeof r);
    r.path = "/lk/a";
    r.msgs = &m;
    r.nmsgs = 1;
    many_arg ma = {&r, 1};
    log_cursor rev = LOG_CURSOR_START;
    two_seen o = {"/lk/a", "/lk/b", 0, 0, 0};
    unsigned k0, k;
    look_once(pc, &rev, &o, &k0);
    /* No feed listens: in the database, each time. */
    CHECK_EQ_INT(log_transact(conn, op_many, &ma), 0);
    look_once(pc, &rev, &o, &k);
    CHECK_EQ_UINT(k, k0);
    CHECK_EQ_INT(o.na, 1);
    CHECK_EQ_UINT(o.tail_a, a.tail.seq + 1);

    const store_feed_ops *fo = lg->engine->feed;
    store_feed *f = fo->open(lg, err, sizeof err);
    log_conn_t *c2 = log_conn_open(lg, err, sizeof err);
    if (!CHECK(f && c2)) goto out;
    /* Its LISTEN came after the last look: the next is in the database. */
    CHECK_EQ_INT(log_transact(conn, op_many, &ma), 0);
    look_once(pc, &rev, &o, &k);
    CHECK_EQ_UINT(k, k0);
    CHECK_EQ_INT(o.na, 1);
    CHECK_EQ_UINT(o.tail_a, a.tail.seq + 2);
    /* Its own groups since: from memory, each stream once at its newest tail. */
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(log_transact(conn, op_many, &ma), 0);
        CHECK_EQ_INT(log_transact(conn, op_many, &ma), 0);
        look_once(pc, &rev, &o, &k);
        CHECK_EQ_UINT(k, k0 + 1 + (unsigned)i);
        CHECK_EQ_INT(o.na, 1);
        CHECK_EQ_UINT(o.tail_a, a.tail.seq + 4 + 2 * (uint64_t)i);
    }
    look_once(pc, &rev, &o, &k0);       /* nothing since: from memory, nothing */
    CHECK_EQ_INT(o.na + o.nb, 0);
    /* Another connection of this process: in the database, once. */
    CHECK_EQ_INT(test_db_append(c2, "/lk/b", "y"), 0);
    look_once(pc, &rev, &o, &k);
    CHECK_EQ_UINT(k, k0);
    CHECK_EQ_INT(o.nb, 1);
    CHECK_EQ_INT(o.na, 0);
    CHECK_EQ_INT(log_transact(conn, op_many, &ma), 0);
    look_once(pc, &rev, &o, &k);
    CHECK_EQ_UINT(k, k0 + 1);
    CHECK_EQ_INT(o.na, 1);
    CHECK_EQ_INT(o.nb, 0);
    k0 = k;
    /* Another host's (by hand, as its group leaves it): until the feed has read its
     * NOTIFY, a look is one made before it came; once read, the next look is in
     * the database and finds it; the groups kept meanwhile are not reported twice. */
    int64_t xid;
    PGconn *pg = hand_begin(&xid);
    char sql[128];
    snprintf(sql, sizeof sql, "NOTIFY dstream, '%lld:%lld'", (long long)xid, (long long)b.id);
    CHECK(xid > 0 && hand_change(pg, b.id, 0) && sql_ok(pg, sql) && sql_ok(pg, "COMMIT"));
    PQfinish(pg);
    CHECK(readable(fo->fd(f), WAIT_MS));
    CHECK_EQ_INT(log_transact(conn, op_many, &ma), 0);
    look_once(pc, &rev, &o, &k);
    CHECK_EQ_UINT(k, k0 + 1);
    CHECK_EQ_INT(o.na, 1);
    CHECK_EQ_INT(o.nb, 0);
    fo->event(f);
    look_once(pc, &rev, &o, &k);
    CHECK_EQ_UINT(k, k0 + 1);
    CHECK_EQ_INT(o.nb, 1);
    CHECK_EQ_INT(o.na, 0);
    k0 = k;
    /* A second after the last look in the database: there again. */
    sleep_ms(1100);
    CHECK_EQ_INT(log_transact(conn, op_many, &ma), 0);
    look_once(pc, &rev, &o, &k);
    CHECK_EQ_UINT(k, k0);
    CHECK_EQ_INT(o.na, 1);
    /* The LISTEN connection lost: in the database until it listens again. */
    CHECK(kill_others());
    /* (its server's last words, then the end: read until the feed goes quiet) */
    for (int i = 0; i < 20 && readable(fo->fd(f), 200); i++) fo->event(f);
    CHECK_EQ_INT(log_transact(conn, op_many, &ma), 0);
    look_once(pc, &rev, &o, &k);
    CHECK_EQ_UINT(k, k0);
    CHECK_EQ_INT(o.na, 1);
    CHECK_EQ_INT(log_transact(conn, op_many, &ma), 0);
    look_once(pc, &rev, &o, &k);
    CHECK_EQ_UINT(k, k0);
    CHECK(fo->moved(f));
    CHECK_EQ_INT(fo->changes(f, ignore_reported, NULL), 0);  /* listens again */
    CHECK_EQ_INT(log_transact(conn, op_many, &ma), 0);
    look_once(pc, &rev, &o, &k);
    CHECK_EQ_UINT(k, k0);               /* (what came while nobody listened) */
    CHECK_EQ_INT(log_transact(conn, op_many, &ma), 0);
    look_once(pc, &rev, &o, &k);
    CHECK_EQ_UINT(k, k0 + 1);
    CHECK_EQ_INT(o.na, 1);
out:
    log_conn_close(c2);
    if (f) fo->close(f);
}

static void size_of(void *ud, const char *what, int64_t bytes)
{
    if (strcmp(what, "db") == 0) *(int64_t *)ud = bytes;
}

int main(void)
{
    if (!test_db_engine(1)) {
        printf("# DSTREAM_TEST_PG names no cluster: nothing to test (tests/run-unit.sh starts one)\n");
        return TEST_MAIN_END();
    }
    if (test_db_open("pg-engine", dir, sizeof dir, &lg, &conn)) {
        test_db_close(dir, lg, conn);
        return TEST_MAIN_END();
    }
    snprintf(uri, sizeof uri, "%s", test_db_st()->uri);
    CHECK_EQ_STR(log_engine_name(lg), "postgresql");
    CHECK_EQ_INT(log_schema_version(lg), pg_schema_version());
    test_query();
    test_read_statements();
    test_read_rows();
    test_read_pages();
    test_read_ahead();
    test_read_cache();
    test_group_ops();
    test_tails_kept();
    test_trial_group();
    test_trial_rerun();
    test_alone();
    test_append_many();
    test_large_values();
    test_changes_own_kept();
    test_look_kept();
    test_notify();
    test_row_lock();
    test_group_order();
    test_reconnect();
    test_release_memory();
    test_read_only();
    test_feed_reconnect();
    test_feed_local();
    test_migrate_together();
    int64_t bytes = 0;
    CHECK_EQ_INT(log_sizes(conn, size_of, &bytes), 0);
    CHECK(bytes > 0);
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

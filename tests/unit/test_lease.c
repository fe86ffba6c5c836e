/* Unit tests for lib/lease.c on a database in a temporary directory: acquire,
 * refusal while another runner's lease is valid, renewal, take-over after expiry,
 * many claims in one transaction, release (a no-op for anyone but the holder), a restarted process of the same
 * runner id taking its sessions back at once, the in-transaction check that only
 * the holding process passes, the owner lock, and the runner's plan for a lease
 * it saw (lease_plan_at: keep, renew, expired while away, wait for another's).
 * The second runner works through a log of its own, as another process would. On
 * PostgreSQL too when DSTREAM_TEST_PG is set, where the owner lock is a row
 * (test_lock_rows). */
#include "lease.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "timefmt.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg, *lg2;
static log_conn_t *ca, *cb;    /* runner A's connection, runner B's */

/* Runner ids with one instance each ("A" and "B" as owners below). */
static const lease_id ID_A = {"A", "a0000001"}, ID_B = {"B", "b0000001"};

static const lease_id *who(const char *owner)
{
    return owner[0] == 'A' ? &ID_A : &ID_B;
}

static int acq(log_conn_t *c, const char *session, const char *owner, int64_t ttl_ms)
{
    return lease_acquire(c, session, who(owner), ttl_ms, NULL);
}

static int rel(log_conn_t *c, const char *session, const char *owner)
{
    return lease_release(c, session, who(owner));
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Try lease_acquire(c, session, owner) until it returns 1 or deadline_ms passes.
 * Returns the last result. */
static int acquire_by(log_conn_t *c, const char *session, const char *owner, int64_t ttl_ms,
                      long deadline_ms)
{
    long long end = timefmt_now_ms() + deadline_ms;
    int rc;
    while ((rc = acq(c, session, owner, ttl_ms)) == 0 && timefmt_now_ms() < end)
        sleep_ms(10);
    return rc;
}

static void test_acquire_renew(void)
{
    CHECK_EQ_INT(acq(ca, "s1", "A", 60000), 1);
    /* Held by A: B is refused, from its own process too, as often as it asks. */
    CHECK_EQ_INT(acq(cb, "s1", "B", 60000), 0);
    CHECK_EQ_INT(acq(ca, "s1", "B", 60000), 0);
    /* A renews. */
    CHECK_EQ_INT(acq(ca, "s1", "A", 60000), 1);
    CHECK_EQ_INT(acq(cb, "s1", "B", 60000), 0);
    /* Leases are per session. */
    CHECK_EQ_INT(acq(cb, "s2", "B", 60000), 1);
    CHECK_EQ_INT(acq(ca, "s2", "A", 60000), 0);
    CHECK_EQ_INT(acq(ca, "s1", "A", 60000), 1);
}

static void test_expiry(void)
{
    /* A holds briefly; until it expires B is refused. */
    long long t0 = timefmt_now_ms();
    CHECK_EQ_INT(acq(ca, "e1", "A", 200), 1);
    int rc = acq(cb, "e1", "B", 200);
    if (timefmt_now_ms() - t0 < 150) CHECK_EQ_INT(rc, 0);
    /* After it, B takes over, and A is the one refused. */
    CHECK_EQ_INT(acquire_by(cb, "e1", "B", 60000, 5000), 1);
    CHECK(timefmt_now_ms() - t0 >= 200);
    CHECK_EQ_INT(acq(ca, "e1", "A", 60000), 0);
    CHECK_EQ_INT(acq(cb, "e1", "B", 60000), 1);

    /* A renewal extends the lease: A's 200 ms lease renewed for a minute is still
     * A's once the 200 ms have passed. */
    CHECK_EQ_INT(acq(ca, "e2", "A", 200), 1);
    CHECK_EQ_INT(acq(ca, "e2", "A", 60000), 1);
    sleep_ms(300);
    CHECK_EQ_INT(acq(cb, "e2", "B", 60000), 0);
    CHECK_EQ_INT(acq(ca, "e2", "A", 60000), 1);
}

/* Many claims in one transaction (lease_acquire_many, the runner's claims of a
 * turn): each as lease_acquire alone would answer it: free ones taken, another
 * runner's refused with its expiry, an expired one taken over, ours renewed; and
 * what was taken is held (the other runner refused after). */
static void test_acquire_many(void)
{
    CHECK_EQ_INT(acq(cb, "m2", "B", 60000), 1);            /* B's, valid */
    CHECK_EQ_INT(acq(cb, "m3", "B", 100), 1);              /* B's, about to expire */
    CHECK_EQ_INT(acq(ca, "m4", "A", 60000), 1);            /* A's own */
    sleep_ms(200);
    const char *ids[5] = {"m1", "m2", "m3", "m4", "m5"};
    int held[5] = {-1, -1, -1, -1, -1};
    int64_t exp[5] = {0, 0, 0, 0, 0};
    long long t0 = timefmt_now_ms();
    CHECK_EQ_INT(lease_acquire_many(ca, ids, 5, &ID_A, 30000, held, exp), 0);
    CHECK_EQ_INT(held[0], 1);
    CHECK_EQ_INT(held[1], 0);
    CHECK_EQ_INT(held[2], 1);
    CHECK_EQ_INT(held[3], 1);
    CHECK_EQ_INT(held[4], 1);
    CHECK(exp[0] >= t0 + 30000 && exp[0] <= timefmt_now_ms() + 30000);
    CHECK(exp[1] >= t0 + 59000);                            /* B's expiry, not ours */
    for (int i = 0; i < 5; i++)
        if (i != 1) CHECK_EQ_INT(acq(cb, ids[i], "B", 60000), 0);
    CHECK_EQ_INT(lease_acquire_many(ca, ids, 0, &ID_A, 30000, held, exp), 0);    /* none: nothing */
    /* An id twice: taken, both told so (PostgreSQL's statement takes each id once). */
    const char *dup[3] = {"m6", "m2", "m6"};
    CHECK_EQ_INT(lease_acquire_many(ca, dup, 3, &ID_A, 30000, held, exp), 0);
    CHECK_EQ_INT(held[0], 1);
    CHECK_EQ_INT(held[1], 0);
    CHECK_EQ_INT(held[2], 1);
    CHECK(exp[0] >= t0 + 30000 && exp[2] >= t0 + 30000);
    CHECK(exp[1] >= t0 + 59000);
}

static void test_release(void)
{
    CHECK_EQ_INT(acq(ca, "r1", "A", 60000), 1);
    /* B releasing A's lease changes nothing. */
    CHECK_EQ_INT(rel(cb, "r1", "B"), 0);
    CHECK_EQ_INT(acq(cb, "r1", "B", 60000), 0);
    CHECK_EQ_INT(acq(ca, "r1", "A", 60000), 1);
    /* Releasing a lease nobody holds is harmless. */
    CHECK_EQ_INT(rel(cb, "nobody", "B"), 0);
    /* The holder's release frees it at once, for anyone. */
    CHECK_EQ_INT(rel(ca, "r1", "A"), 0);
    CHECK_EQ_INT(acq(cb, "r1", "B", 60000), 1);
    CHECK_EQ_INT(acq(ca, "r1", "A", 60000), 0);
    /* A release does not touch other sessions. */
    CHECK_EQ_INT(acq(ca, "r2", "A", 60000), 1);
    CHECK_EQ_INT(rel(ca, "r3", "A"), 0);
    CHECK_EQ_INT(acq(cb, "r2", "B", 60000), 0);
    /* An expired lease released by its former holder stays with the new one. */
    CHECK_EQ_INT(acq(ca, "r4", "A", 100), 1);
    CHECK_EQ_INT(acquire_by(cb, "r4", "B", 60000, 5000), 1);
    CHECK_EQ_INT(rel(ca, "r4", "A"), 0);
    CHECK_EQ_INT(acq(ca, "r4", "A", 60000), 0);
}

typedef struct renew_arg {
    const char *session;
    const lease_id *me;
    int held;
} renew_arg;

static int op_renew(log_conn_t *c, void *arg)
{
    renew_arg *a = arg;
    a->held = lease_tx_renew(c, a->session, a->me, 60000);
    return 0;
}

static int tx_renew(log_conn_t *c, const char *session, const lease_id *me)
{
    renew_arg a = {session, me, -99};
    CHECK_EQ_INT(log_transact(c, op_renew, &a), 0);
    return a.held;
}

/* lease_tx_release: inside the caller's transaction (the runner's commit), with a
 * statement of its own making (here: a renewal of another lease) in the same one;
 * undone with it when the transaction is. */
typedef struct release_arg {
    const char *session, *other;
    int fail;
} release_arg;

static int op_release_in(log_conn_t *c, void *arg)
{
    release_arg *a = arg;
    int rc = lease_tx_release(c, a->session, &ID_A);
    if (rc == 0 && a->other) CHECK_EQ_INT(lease_tx_renew(c, a->other, &ID_A, 60000), 1);
    return rc ? rc : a->fail ? LOG_EIO : 0;
}

static int op_release_many_in(log_conn_t *c, void *arg)
{
    (void)arg;
    const char *ids[] = {"t4", "t1", "nobody", "t3", "t2"};
    return lease_tx_release_many(c, ids, 5, &ID_A);
}

static void test_tx_release(void)
{
    CHECK_EQ_INT(acq(ca, "t1", "A", 60000), 1);
    CHECK_EQ_INT(acq(ca, "t2", "A", 60000), 1);
    /* Undone with its transaction: still A's. */
    release_arg undone = {"t1", NULL, 1};
    CHECK(log_transact(ca, op_release_in, &undone) != 0);
    CHECK_EQ_INT(acq(cb, "t1", "B", 60000), 0);
    /* Committed: free at once, the other lease renewed in the same commit. */
    release_arg done = {"t1", "t2", 0};
    CHECK_EQ_INT(log_transact(ca, op_release_in, &done), 0);
    CHECK_EQ_INT(acq(cb, "t1", "B", 60000), 1);
    CHECK_EQ_INT(acq(cb, "t2", "B", 60000), 0);
    /* Another's lease is not A's to release. */
    release_arg theirs = {"t1", NULL, 0};
    CHECK_EQ_INT(log_transact(ca, op_release_in, &theirs), 0);
    CHECK_EQ_INT(acq(ca, "t1", "A", 60000), 0);
    /* Several at once, B's among them and one nobody holds: A's go, B's stays. */
    CHECK_EQ_INT(acq(ca, "t3", "A", 60000), 1);
    CHECK_EQ_INT(acq(ca, "t4", "A", 60000), 1);
    CHECK_EQ_INT(log_transact(ca, op_release_many_in, NULL), 0);
    CHECK_EQ_INT(acq(cb, "t3", "B", 60000), 1);
    CHECK_EQ_INT(acq(cb, "t4", "B", 60000), 1);
    CHECK_EQ_INT(acq(cb, "t2", "B", 60000), 1);
    CHECK_EQ_INT(acq(ca, "t1", "A", 60000), 0);
}

static void test_instances(void)
{
    /* A restarted runner A (a new instance) takes A's sessions back at once; the
     * old instance's in-transaction check then fails, the new one's passes. */
    const lease_id a2 = {"A", "a0000002"};
    int64_t exp = 0;
    CHECK_EQ_INT(lease_acquire(ca, "i1", &ID_A, 60000, &exp), 1);
    CHECK(exp > timefmt_now_ms() + 50000);
    CHECK_EQ_INT(tx_renew(ca, "i1", &ID_A), 1);
    CHECK_EQ_INT(lease_acquire(cb, "i1", &a2, 60000, NULL), 1);
    CHECK_EQ_INT(tx_renew(ca, "i1", &ID_A), 0);
    CHECK_EQ_INT(tx_renew(cb, "i1", &a2), 1);
    /* Another id is refused and told when the lease runs out. */
    exp = 0;
    CHECK_EQ_INT(lease_acquire(cb, "i1", &ID_B, 60000, &exp), 0);
    CHECK(exp > timefmt_now_ms() + 50000);
    CHECK_EQ_INT(tx_renew(cb, "i1", &ID_B), 0);
    /* The old instance cannot release what it no longer holds. */
    CHECK_EQ_INT(lease_release(ca, "i1", &ID_A), 0);
    CHECK_EQ_INT(tx_renew(cb, "i1", &a2), 1);
    /* Nobody holds a session that has no lease row. */
    CHECK_EQ_INT(tx_renew(ca, "nobody", &ID_A), 0);
    /* Instances are random and differ. */
    char x[LEASE_INSTANCE_LEN + 1], y[LEASE_INSTANCE_LEN + 1];
    lease_new_instance(x);
    lease_new_instance(y);
    CHECK_EQ_INT((int)strlen(x), LEASE_INSTANCE_LEN);
    CHECK(strcmp(x, y) != 0);
}

static void test_lock(void)
{
    char err[512] = "";
    int fd = lease_lock(lg, "runner-1", err, sizeof err);
    CHECK(fd >= 0);
    /* flock locks belong to the open file: a second open, as a second process
     * would do, is refused with a message that names the id. */
    CHECK_EQ_INT(lease_lock(lg, "runner-1", err, sizeof err), -1);
    CHECK(strstr(err, "\"runner-1\"") != NULL);
    CHECK(strstr(err, "DSTREAM_RUNNER_ID") != NULL);
    /* Another id has a lock of its own; an id that is no file name too. */
    int fd2 = lease_lock(lg, "runner-2", err, sizeof err);
    CHECK(fd2 >= 0);
    int fd3 = lease_lock(lg, "../host name/x", err, sizeof err);
    CHECK(fd3 >= 0);
    CHECK_EQ_INT(lease_lock(lg, "../host name/x", err, sizeof err), -1);
    if (test_db_is_pg()) {
        /* There the lock is a row, held until its process is gone or it expires
         * (test_lock_rows). */
        close(fd);
        close(fd2);
        close(fd3);
        return;
    }
    /* Once its holder is gone (here: the descriptor closed) the lock is free. */
    close(fd);
    fd = lease_lock(lg, "runner-1", err, sizeof err);
    CHECK(fd >= 0);
    close(fd);
    close(fd2);
    close(fd3);
}

/* On PostgreSQL the owner lock is a row of runner_owners naming its process
 * (host, pid) until it expires; the lease code renews it. The row is looked at and
 * changed by hand (with psql) to play the other processes: a holder of this host
 * that is gone (its lock taken at once), another host's live one (refused, named)
 * and expired one (taken), and the fencing: a runner id whose lock another process
 * holds takes no lease, not even a free one, while the holder takes the id's leases
 * back at once. On a database of its own. */
static void test_lock_rows(void)
{
    char err[512] = "", host[256] = "", sql[600];
    gethostname(host, sizeof host - 1);
    int fd0 = lease_lock(lg, "runner-1", err, sizeof err);
    CHECK(fd0 >= 0);
    if (fd0 >= 0) close(fd0);
    /* The row names this process, for the message that refuses another. */
    char who[300] = "", want[300];
    CHECK_EQ_INT(test_db_psql("SELECT host || ' ' || pid FROM runner_owners WHERE owner = 'runner-1'", who,
                              sizeof who), 0);
    snprintf(want, sizeof want, "%s %ld", host, (long)getpid());
    CHECK_EQ_STR(who, want);
    /* Its holder gone: a process of this host that no longer runs (pid 0 is none). */
    snprintf(sql, sizeof sql, "UPDATE runner_owners SET pid = 0 WHERE owner = 'runner-1' AND host = '%s'", host);
    CHECK_EQ_INT(test_db_psql(sql, NULL, 0), 0);
    long long t0 = timefmt_now_ms();
    int fd = lease_lock(lg, "runner-1", err, sizeof err);
    CHECK(fd >= 0);
    CHECK(timefmt_now_ms() - t0 < LEASE_LOCK_WAIT_MS);  /* at once */
    if (fd >= 0) close(fd);
    /* Another host's live process holds runner-3: refused, naming it; taken once
     * its row expired. */
    CHECK_EQ_INT(test_db_psql("INSERT INTO runner_owners (owner, instance, host, pid, expires_ms) VALUES"
                              " ('runner-3', 'x', 'elsewhere', 1, 9223372036854775807)", NULL, 0), 0);
    CHECK_EQ_INT(lease_lock(lg, "runner-3", err, sizeof err), -1);
    CHECK(strstr(err, "\"runner-3\"") != NULL);
    CHECK(strstr(err, "elsewhere") != NULL);
    /* The fencing: a runner id whose lock another process holds takes no lease,
     * not even a free one, nor one of its own id. */
    const lease_id r3 = {"runner-3", "c0000001"}, r3b = {"runner-3", "c0000002"};
    CHECK_EQ_INT(lease_acquire(ca, "f1", &r3, 60000, NULL), 0);
    CHECK_EQ_INT(test_db_psql("INSERT INTO leases (session, owner, instance, expires_ms) VALUES"
                              " ('f2', 'runner-3', 'c0000001', 9223372036854775807)", NULL, 0), 0);
    CHECK_EQ_INT(lease_acquire(ca, "f2", &r3b, 60000, NULL), 0);
    CHECK_EQ_INT(test_db_psql("UPDATE runner_owners SET expires_ms = 0 WHERE owner = 'runner-3'", NULL, 0), 0);
    fd = lease_lock(lg, "runner-3", err, sizeof err);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    /* Holding it, the id's leases are ours at once (a dead predecessor's), and the
     * old instance is fenced off; free ones too. */
    CHECK_EQ_INT(lease_acquire(ca, "f2", &r3b, 60000, NULL), 1);
    CHECK_EQ_INT(tx_renew(ca, "f2", &r3), 0);
    CHECK_EQ_INT(tx_renew(ca, "f2", &r3b), 1);
    CHECK_EQ_INT(lease_acquire(ca, "f1", &r3b, 60000, NULL), 1);
    /* A lock lost to another process (it expired, and another took it): this
     * process's runner takes nothing more, and the taker takes its leases. */
    CHECK_EQ_INT(test_db_psql("UPDATE runner_owners SET instance = 'y', host = 'elsewhere', pid = 1,"
                              " expires_ms = 9223372036854775807 WHERE owner = 'runner-3'", NULL, 0), 0);
    CHECK_EQ_INT(lease_acquire(ca, "f3", &r3b, 60000, NULL), 0);
    CHECK_EQ_INT(lease_acquire(ca, "f1", &r3b, 60000, NULL), 0);
    /* The expiry is on the database's clock and is renewed by the lease code. */
    char exp[64] = "";
    CHECK_EQ_INT(test_db_psql("SELECT expires_ms > (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 50000"
                              " FROM leases WHERE session = 'f2'", exp, sizeof exp), 0);
    CHECK_EQ_STR(exp, "t");
}

/* The runner's view of a lease (lease_plan_at): a lease held is kept until a third
 * of it has run, then renewed; one that ran out while the process was away (paused)
 * is dropped before it is taken again; a session another runner holds is left alone
 * until its lease runs out, unless the session's own timer fired. Then a real
 * take-over on the database: the process that was away finds the lease gone. */
static void test_plan(void)
{
    lease_clock l = {0, 0, 0, 0};
    CHECK_EQ_INT(lease_plan_at(&l, 0, 1000), LEASE_TAKE);      /* never held: take it */
    lease_taken(&l, 1000, 9000, 10000);
    CHECK(l.held);
    CHECK_EQ_INT(l.renew_ms, 4000);                             /* a third of the lease */
    CHECK_EQ_INT(l.expires_ms, 10000);
    CHECK_EQ_INT(lease_plan_at(&l, 0, 3999), LEASE_KEEP);
    CHECK_EQ_INT(lease_plan_at(&l, 1, 3999), LEASE_KEEP);
    CHECK_EQ_INT(lease_plan_at(&l, 0, 4000), LEASE_TAKE);      /* renew */
    CHECK_EQ_INT(lease_plan_at(&l, 0, 9999), LEASE_TAKE);
    CHECK_EQ_INT(lease_plan_at(&l, 0, 10000), LEASE_EXPIRED);  /* away past its end */
    CHECK_EQ_INT(lease_plan_at(&l, 1, 60000), LEASE_EXPIRED);
    /* Lost to another runner until 20000 (runner_lost: held 0, other_until). */
    l.held = 0;
    l.other_until = 20000;
    CHECK_EQ_INT(lease_plan_at(&l, 0, 19999), LEASE_WAIT);
    CHECK_EQ_INT(lease_plan_at(&l, 1, 19999), LEASE_TAKE);     /* its timer fired: try */
    CHECK_EQ_INT(lease_plan_at(&l, 0, 20000), LEASE_TAKE);     /* the other's ran out */
    lease_taken(&l, 20000, 9000, 29000);
    CHECK_EQ_INT(l.other_until, 0);
    CHECK_EQ_INT(lease_plan_at(&l, 0, 20001), LEASE_KEEP);

    /* A pauses past its lease, B takes the session over: A's plan says expired, and
     * A's own take is refused while B's lease runs. */
    int64_t now = timefmt_now_ms(), expires = 0;
    lease_clock a = {0, 0, 0, 0};
    CHECK_EQ_INT(lease_acquire(ca, "s-plan", &ID_A, 150, &expires), 1);
    lease_taken(&a, now, 150, expires);
    while (timefmt_now_ms() <= a.expires_ms) usleep(10000);
    CHECK_EQ_INT(acq(cb, "s-plan", "B", 60000), 1);
    CHECK_EQ_INT(lease_plan_at(&a, 0, timefmt_now_ms()), LEASE_EXPIRED);
    CHECK_EQ_INT(lease_acquire(ca, "s-plan", &ID_A, 150, &expires), 0);
    CHECK(expires > timefmt_now_ms());
}

/* A takeover cannot come between a commit's check of its lease and that commit's
 * end: the check holds the lease as it found it until then (on PostgreSQL its row,
 * on SQLite the one writer), so that the taker, refused or kept waiting meanwhile,
 * reads the session's log with what that commit wrote. Runner B's claim here with a
 * short busy timeout (its handle cq); the lease of A ran out before A's commit. */
static log_conn_t *cq;

typedef struct fence_arg {
    int held, b_claim;
} fence_arg;

static int op_fence(log_conn_t *c, void *ud)
{
    fence_arg *f = ud;
    const char *ids[2] = {"f1", "f2"};
    unsigned char renew[2] = {0, 0};
    int held[2] = {0, 0};
    int rc = lease_tx_held_many(c, ids, renew, 2, &ID_A, 60000, held);
    f->held = held[0] + held[1];
    f->b_claim = acq(cq, "f1", "B", 60000);
    /* (and alone, the careful way's check) */
    if (rc == 0) f->held += lease_tx_held(c, "f2", &ID_A);
    return rc;
}

static int op_fence_one(log_conn_t *c, void *ud)
{
    fence_arg *f = ud;
    f->held = lease_tx_held(c, "f3", &ID_A);
    f->b_claim = acq(cq, "f3", "B", 60000);
    return 0;
}

static void test_fence(void)
{
    if (!CHECK(cq != NULL)) return;
    CHECK_EQ_INT(acq(ca, "f1", "A", 50), 1);
    CHECK_EQ_INT(acq(ca, "f2", "A", 50), 1);
    CHECK_EQ_INT(acq(ca, "f3", "A", 50), 1);
    sleep_ms(150);
    fence_arg f = {0, 0};
    CHECK_EQ_INT(log_transact(ca, op_fence, &f), 0);
    CHECK_EQ_INT(f.held, 3);
    CHECK(f.b_claim != 1);
    /* Once that commit is over, B takes it (A renewed nothing). */
    CHECK_EQ_INT(acq(cb, "f1", "B", 60000), 1);
    memset(&f, 0, sizeof f);
    CHECK_EQ_INT(log_transact(ca, op_fence_one, &f), 0);
    CHECK_EQ_INT(f.held, 1);
    CHECK(f.b_claim != 1);
    CHECK_EQ_INT(acq(cb, "f3", "B", 60000), 1);
}

int main(void)
{
    for (int e = 0; test_db_engine(e); e++) {
        char path[1100], err[256] = "";
        log_opts o = {0, 5000, 1, 0, 0};
        lg = lg2 = NULL;
        ca = cb = NULL;
        if (test_db_target("test-lease", dir, sizeof dir, path, sizeof path) == 0) {
            lg = log_open(path, &o, err, sizeof err);
            ca = lg ? log_conn_open(lg, err, sizeof err) : NULL;
            lg2 = ca ? log_open(path, &o, err, sizeof err) : NULL;
            cb = lg2 ? log_conn_open(lg2, err, sizeof err) : NULL;
            if (!CHECK(cb != NULL)) {
                fprintf(stderr, "  %s\n", err);
            } else {
                test_acquire_renew();
                test_expiry();
                test_acquire_many();
                test_release();
                test_tx_release();
                test_instances();
                test_lock();
                test_plan();
            }
        }
        /* Runner B again, waiting at most 200 ms for a lock (test_fence). */
        log_opts quick = {0, 200, 1, 0, 0};
        log_t *lg3 = cb ? log_open(path, &quick, err, sizeof err) : NULL;
        cq = lg3 ? log_conn_open(lg3, err, sizeof err) : NULL;
        if (cb) test_fence();
        log_conn_close(cq);
        log_close(lg3);
        cq = NULL;
        log_conn_close(cb);
        log_close(lg2);
        test_db_close(dir, lg, ca);
        if (test_db_is_pg()) {
            if (test_db_open("pg-leases", dir, sizeof dir, &lg, &ca) == 0) test_lock_rows();
            test_db_close(dir, lg, ca);
        }
    }
    return TEST_MAIN_END();
}

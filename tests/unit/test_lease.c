/* Unit tests for lib/lease.c on a database in a temporary directory: acquire,
 * refusal while another runner's lease is valid, renewal, take-over after expiry,
 * and release (a no-op for anyone but the holder). The second runner works
 * through a log of its own, as another process would. */
#include "lease.h"

#include <string.h>
#include <time.h>

#include "db.h"
#include "test.h"

static char dir[256];
static log_t *lg, *lg2;
static log_conn_t *ca, *cb;    /* runner A's connection, runner B's */

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
    long long end = db_now_ms() + deadline_ms;
    int rc;
    while ((rc = lease_acquire(c, session, owner, ttl_ms)) == 0 && db_now_ms() < end)
        sleep_ms(10);
    return rc;
}

static void test_acquire_renew(void)
{
    CHECK_EQ_INT(lease_acquire(ca, "s1", "A", 60000), 1);
    /* Held by A: B is refused, from its own process too, as often as it asks. */
    CHECK_EQ_INT(lease_acquire(cb, "s1", "B", 60000), 0);
    CHECK_EQ_INT(lease_acquire(ca, "s1", "B", 60000), 0);
    /* A renews. */
    CHECK_EQ_INT(lease_acquire(ca, "s1", "A", 60000), 1);
    CHECK_EQ_INT(lease_acquire(cb, "s1", "B", 60000), 0);
    /* Leases are per session. */
    CHECK_EQ_INT(lease_acquire(cb, "s2", "B", 60000), 1);
    CHECK_EQ_INT(lease_acquire(ca, "s2", "A", 60000), 0);
    CHECK_EQ_INT(lease_acquire(ca, "s1", "A", 60000), 1);
}

static void test_expiry(void)
{
    /* A holds briefly; until it expires B is refused. */
    long long t0 = db_now_ms();
    CHECK_EQ_INT(lease_acquire(ca, "e1", "A", 200), 1);
    int rc = lease_acquire(cb, "e1", "B", 200);
    if (db_now_ms() - t0 < 150) CHECK_EQ_INT(rc, 0);
    /* After it, B takes over, and A is the one refused. */
    CHECK_EQ_INT(acquire_by(cb, "e1", "B", 60000, 5000), 1);
    CHECK(db_now_ms() - t0 >= 200);
    CHECK_EQ_INT(lease_acquire(ca, "e1", "A", 60000), 0);
    CHECK_EQ_INT(lease_acquire(cb, "e1", "B", 60000), 1);

    /* A renewal extends the lease: A's 200 ms lease renewed for a minute is still
     * A's once the 200 ms have passed. */
    CHECK_EQ_INT(lease_acquire(ca, "e2", "A", 200), 1);
    CHECK_EQ_INT(lease_acquire(ca, "e2", "A", 60000), 1);
    sleep_ms(300);
    CHECK_EQ_INT(lease_acquire(cb, "e2", "B", 60000), 0);
    CHECK_EQ_INT(lease_acquire(ca, "e2", "A", 60000), 1);
}

static void test_release(void)
{
    CHECK_EQ_INT(lease_acquire(ca, "r1", "A", 60000), 1);
    /* B releasing A's lease changes nothing. */
    CHECK_EQ_INT(lease_release(cb, "r1", "B"), 0);
    CHECK_EQ_INT(lease_acquire(cb, "r1", "B", 60000), 0);
    CHECK_EQ_INT(lease_acquire(ca, "r1", "A", 60000), 1);
    /* Releasing a lease nobody holds is harmless. */
    CHECK_EQ_INT(lease_release(cb, "nobody", "B"), 0);
    /* The holder's release frees it at once, for anyone. */
    CHECK_EQ_INT(lease_release(ca, "r1", "A"), 0);
    CHECK_EQ_INT(lease_acquire(cb, "r1", "B", 60000), 1);
    CHECK_EQ_INT(lease_acquire(ca, "r1", "A", 60000), 0);
    /* A release does not touch other sessions. */
    CHECK_EQ_INT(lease_acquire(ca, "r2", "A", 60000), 1);
    CHECK_EQ_INT(lease_release(ca, "r3", "A"), 0);
    CHECK_EQ_INT(lease_acquire(cb, "r2", "B", 60000), 0);
    /* An expired lease released by its former holder stays with the new one. */
    CHECK_EQ_INT(lease_acquire(ca, "r4", "A", 100), 1);
    CHECK_EQ_INT(acquire_by(cb, "r4", "B", 60000, 5000), 1);
    CHECK_EQ_INT(lease_release(ca, "r4", "A"), 0);
    CHECK_EQ_INT(lease_acquire(ca, "r4", "A", 60000), 0);
}

int main(void)
{
    char path[300], err[256] = "";
    if (test_mkdtemp(dir, sizeof dir, "test-lease")) return 1;
    snprintf(path, sizeof path, "%s/lease.db", dir);
    log_opts o = {0, 5000};
    lg = log_open(path, &o, err, sizeof err);
    ca = lg ? log_conn_open(lg, err, sizeof err) : NULL;
    lg2 = ca ? log_open(path, &o, err, sizeof err) : NULL;
    cb = lg2 ? log_conn_open(lg2, err, sizeof err) : NULL;
    if (!CHECK(cb != NULL)) {
        fprintf(stderr, "  %s\n", err);
    } else {
        test_acquire_renew();
        test_expiry();
        test_release();
    }
    log_conn_close(cb);
    log_close(lg2);
    log_conn_close(ca);
    log_close(lg);
    test_rmtree(dir);
    return TEST_MAIN_END();
}

/* Unit tests for the PostgreSQL engine's owner lock of a runner id
 * (lib/store/pg/pg_leases.c), a row of runner_owners looked at and changed by hand
 * (with psql) to play the other processes: a holder of this host that is gone
 * (its lock taken at once), another host's live one (refused, named) and expired
 * one (taken), and the fencing: a runner id whose lock another process holds
 * takes no lease, not even a free one, while the holder takes the id's leases
 * back at once. Runs only when DSTREAM_TEST_PG names a cluster (tests/pg.sh). */
#include "lease.h"

#include <string.h>
#include <unistd.h>

#include "timefmt.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *ca;

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

/* On PostgreSQL the owner lock is a row of runner_owners naming its process
 * (host, pid) until it expires; the lease code renews it. */
static void test_lock(void)
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

int main(void)
{
    if (!test_db_engine(1)) {
        printf("test_pg_leases: DSTREAM_TEST_PG is not set: nothing to run\n");
        return TEST_MAIN_END();
    }
    if (test_db_open("pg-leases", dir, sizeof dir, &lg, &ca) == 0) test_lock();
    test_db_close(dir, lg, ca);
    return TEST_MAIN_END();
}

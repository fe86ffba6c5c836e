/* Unit tests for the PostgreSQL engine's runner figures (lib/store/pg/pg_runner_stats.c):
 * a database without the tables reads as empty, not as an error, as SQLite's does
 * (test_sqlite_rstats). The rows are changed by hand with psql. Runs only when
 * DSTREAM_TEST_PG names a cluster (tests/pg.sh). */
#include "rstats.h"

#include <string.h>

#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

static int ngot;
static int64_t nstatus;

static void keep(void *ud, const rstats *r)
{
    (void)ud, (void)r;
    ngot++;
}

static void count(void *ud, const char *status, int64_t n)
{
    (void)ud, (void)status;
    nstatus += n;
}

static void test_without_tables(void)
{
    rstats s;
    memset(&s, 0, sizeof s);
    snprintf(s.owner, sizeof s.owner, "%s", "runner-a");
    CHECK_EQ_INT(rstats_start(conn, &s), 0);
    CHECK_EQ_INT(test_db_psql("INSERT INTO sessions (id, stream, status, created_ms, updated_ms, deleted) VALUES"
                              " ('a', 'sessions/a', 'completed', 0, 0, 0)", NULL, 0), 0);
    ngot = 0;
    CHECK_EQ_INT(rstats_each(conn, keep, NULL), 0);
    CHECK_EQ_INT(ngot, 1);
    nstatus = 0;
    CHECK_EQ_INT(rstats_sessions(conn, count, NULL), 0);
    CHECK_EQ_INT(nstatus, 1);
    /* Without the tables (a database of an older binary): empty, not an error. */
    CHECK_EQ_INT(test_db_psql("DROP TABLE runner_stats, sessions", NULL, 0), 0);
    ngot = 0;
    CHECK_EQ_INT(rstats_each(conn, keep, NULL), 0);
    CHECK_EQ_INT(ngot, 0);
    nstatus = 0;
    CHECK_EQ_INT(rstats_sessions(conn, count, NULL), 0);
    CHECK_EQ_INT(nstatus, 0);
}

int main(void)
{
    if (!test_db_engine(1)) {
        printf("test_pg_rstats: DSTREAM_TEST_PG is not set: nothing to run\n");
        return TEST_MAIN_END();
    }
    if (test_db_open("pg-rstats", dir, sizeof dir, &lg, &conn) == 0) test_without_tables();
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

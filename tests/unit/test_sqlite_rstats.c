/* Unit tests for the SQLite engine's runner figures (lib/store/sqlite/sq_runner_stats.c):
 * a database without the tables (one of an older binary) reads as empty, not as
 * an error. */
#include "rstats.h"

#include <sqlite3.h>
#include <string.h>

#include "store/sqlite/sq.h"
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
    sqlite3 *db = sq_db(conn);
    CHECK_EQ_INT(sqlite3_exec(db,
                              "INSERT INTO sessions (id, stream, status, created_ms, updated_ms, deleted) VALUES"
                              " ('a', 'sessions/a', 'completed', 0, 0, 0)",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    ngot = 0;
    CHECK_EQ_INT(rstats_each(conn, keep, NULL), 0);
    CHECK_EQ_INT(ngot, 1);
    nstatus = 0;
    CHECK_EQ_INT(rstats_sessions(conn, count, NULL), 0);
    CHECK_EQ_INT(nstatus, 1);
    /* Without the tables (a database of an older binary): empty, not an error. */
    CHECK_EQ_INT(sqlite3_exec(db, "DROP TABLE runner_stats; DROP TABLE sessions", NULL, NULL, NULL), SQLITE_OK);
    ngot = 0;
    CHECK_EQ_INT(rstats_each(conn, keep, NULL), 0);
    CHECK_EQ_INT(ngot, 0);
    nstatus = 0;
    CHECK_EQ_INT(rstats_sessions(conn, count, NULL), 0);
    CHECK_EQ_INT(nstatus, 0);
}

int main(void)
{
    if (test_db_open("rstats", dir, sizeof dir, &lg, &conn) == 0) test_without_tables();
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

/* Unit tests for the SQLite engine's statement cache (lib/store/sqlite/sq_stmt.c):
 * sq_stmt hands out the cached statement, a fresh one while it is out, compares
 * SQL by content, serves more at once than it holds, and refuses a mistake. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "store/sqlite/sq.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

static int one_int(sqlite3_stmt *st)
{
    return sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
}

static void test_stmt_cache(void)
{
    sqlite3_stmt *a, *b, *c2;
    CHECK_EQ_INT(sq_stmt(conn, "SELECT ?1 + 1", &a), 0);
    sqlite3_bind_int(a, 1, 41);
    CHECK_EQ_INT(one_int(a), 42);
    /* the same text while the first is out: a statement of its own */
    CHECK_EQ_INT(sq_stmt(conn, "SELECT ?1 + 1", &b), 0);
    CHECK(b != a);
    CHECK_EQ_INT(one_int(b), 0);    /* no binding: NULL + 1 is NULL, read as 0 */
    sq_stmt_done(conn, b);         /* finalized */
    sq_stmt_done(conn, a);
    /* given back: the cached one again, reset with its bindings cleared */
    CHECK_EQ_INT(sq_stmt(conn, "SELECT ?1 + 1", &c2), 0);
    CHECK(c2 == a);
    CHECK_EQ_INT(one_int(c2), 0);
    sq_stmt_done(conn, c2);
    /* text built at run time in one buffer: compared by content, not by address */
    char sql[64];
    for (int i = 0; i < 3 * SQ_STMT_CACHE; i++) {
        snprintf(sql, sizeof sql, "SELECT %d", i % (2 * SQ_STMT_CACHE));
        sqlite3_stmt *st;
        if (!CHECK_EQ_INT(sq_stmt(conn, sql, &st), 0)) return;
        CHECK_EQ_INT(one_int(st), i % (2 * SQ_STMT_CACHE));
        sq_stmt_done(conn, st);
    }
    /* many out at once, more than the cache holds: all usable, all given back */
    sqlite3_stmt *out[SQ_STMT_CACHE + 4];
    for (int i = 0; i < SQ_STMT_CACHE + 4; i++) {
        snprintf(sql, sizeof sql, "SELECT %d + 1000", i);
        CHECK_EQ_INT(sq_stmt(conn, sql, &out[i]), 0);
    }
    for (int i = 0; i < SQ_STMT_CACHE + 4; i++) {
        CHECK_EQ_INT(one_int(out[i]), i + 1000);
        sq_stmt_done(conn, out[i]);
    }
    /* a mistake is an error, with no statement */
    sqlite3_stmt *bad = (sqlite3_stmt *)1;
    CHECK_EQ_INT(sq_stmt(conn, "SELEC nothing", &bad), LOG_EIO);
    CHECK(bad == NULL);
    sq_stmt_done(conn, NULL);
}

int main(void)
{
    if (test_db_open("test-stmt", dir, sizeof dir, &lg, &conn) == 0) test_stmt_cache();
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

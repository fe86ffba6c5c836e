/* Unit tests for the SQLite engine's backups (lib/store/sqlite/sq_backup.c, through
 * lib/backup.c): a backup is one self-contained file (no -wal beside it, not in WAL
 * mode) that passes the check. The check's findings on both engines: test_backup.c. */
#include "backup.h"

#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

static void count_problem(void *ud, const char *problem)
{
    (*(int *)ud)++;
    fprintf(stderr, "  problem: %s\n", problem);
}

static int problems(const char *target)
{
    char err[256];
    int seen = 0;
    int n = backup_check(target, 10, count_problem, &seen, err, sizeof err);
    if (n < 0) fprintf(stderr, "  check failed: %s\n", err);
    return n;
}

static sqlite3 *open_plain(const char *path)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sqlite3_close_v2(db);
        return NULL;
    }
    return db;
}

/* Streams w0, w1 and w2 of 5 messages each, backed up. */
static void test_backup_file(void)
{
    char path[32], msg[64], db[400], dest[400], err[256];
    for (int w = 0; w < 3; w++) {
        snprintf(path, sizeof path, "w%d", w);
        CHECK_EQ_INT(test_db_create(conn, path), 0);
        for (int i = 0; i < 5; i++) {
            snprintf(msg, sizeof msg, "writer %d message %d", w, i);
            CHECK_EQ_INT(test_db_append(conn, path, msg), 0);
        }
    }
    snprintf(db, sizeof db, "%s/test.db", dir);
    snprintf(dest, sizeof dest, "%s/backup.db", dir);
    backup_info bi;
    if (!CHECK_EQ_INT(backup_copy(db, dest, &bi, err, sizeof err), 0)) fprintf(stderr, "  %s\n", err);
    CHECK_EQ_INT(bi.streams, 3);
    CHECK_EQ_INT(bi.messages, 15);
    CHECK(bi.pages > 0);
    CHECK(bi.rev > 0);
    /* Self-contained: no -wal beside it, and the journal mode is not WAL. */
    char wal[420];
    snprintf(wal, sizeof wal, "%s-wal", dest);
    CHECK(access(wal, F_OK) != 0);
    sqlite3 *b = open_plain(dest);
    if (!CHECK(b != NULL)) return;
    sqlite3_stmt *st;
    CHECK_EQ_INT(sqlite3_prepare_v2(b, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_step(st), SQLITE_ROW);
    CHECK_EQ_STR((const char *)sqlite3_column_text(st, 0), "delete");
    sqlite3_finalize(st);
    sqlite3_close_v2(b);
    CHECK_EQ_INT(problems(dest), 0);
}

int main(void)
{
    if (test_db_open("test", dir, sizeof dir, &lg, &conn) == 0) {
        test_backup_file();
    }
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

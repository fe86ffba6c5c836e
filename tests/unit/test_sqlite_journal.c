/* Unit tests for the SQLite engine's group commit and memory: an operation alone in
 * its group runs without a savepoint of its own (lib/store/sqlite/sq_engine.c), so
 * that SQLite's statement journal, which keeps in memory a copy of every page
 * written under an open savepoint, once more for each nested one, is emptied after
 * each nested unit instead of growing with the whole commit. That is the runner's
 * commit: one nested unit per session, 2,000 sessions in one transaction. The
 * operation's failure still undoes all it wrote; and the page cache a burst filled
 * can be given back (log_release_memory). */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "store/sqlite/sq.h"
#include "test.h"
#include "test_db.h"

#define STREAMS 2000
#define MSG 200

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

typedef struct arg {
    int n;
    int fail;                   /* return this after writing everything (0: none) */
} arg;

static void path_of(int i, char *out, size_t cap)
{
    snprintf(out, cap, "j/stream-%04d", i);
}

static int op_create(log_conn_t *c, void *p)
{
    arg *a = p;
    char path[64], msg[MSG];
    memset(msg, 'x', sizeof msg);
    log_msg m = {msg, sizeof msg};
    for (int i = 0; i < a->n; i++) {
        path_of(i, path, sizeof path);
        log_create_req r = {.path = path, .content_type = "text/plain", .ttl_s = -1, .expires_ms = -1,
                            .msgs = &m, .nmsgs = 1};
        int rc = log_tx_create(c, &r);
        if (rc) return rc;
    }
    return 0;
}

/* One nested unit per stream, each an append of one message: the runner's commit. */
static int op_append_nested(log_conn_t *c, void *p)
{
    arg *a = p;
    char path[64], msg[MSG];
    memset(msg, 'y', sizeof msg);
    log_msg m = {msg, sizeof msg};
    for (int i = 0; i < a->n; i++) {
        path_of(i, path, sizeof path);
        if (log_tx_nest_begin(c)) return LOG_EIO;
        log_append_req r = {.path = path, .msgs = &m, .nmsgs = 1};
        int rc = log_tx_append(c, &r);
        if (log_tx_nest_end(c, rc != 0)) return LOG_EIO;
        if (rc) return rc;
    }
    return a->fail;
}

static int64_t tail_seq(int i)
{
    char path[64];
    log_info info;
    path_of(i, path, sizeof path);
    return log_head(conn, path, &info) == 0 ? (int64_t)info.tail.seq : -1;
}

static void test_commit_memory(void)
{
    arg a = {STREAMS, 0};
    if (!CHECK_EQ_INT(log_transact(conn, op_create, &a), 0)) return;
    sqlite3_int64 cur, hi;
    sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &cur, &hi, 1);     /* highwater := now */
    CHECK_EQ_INT(log_transact(conn, op_append_nested, &a), 0);
    sqlite3_int64 cur2, hi2;
    sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &cur2, &hi2, 0);
    /* Before: 5.6 MiB here (the pages of each nested unit journaled again, kept to
     * the end; 30 MiB in a runner's commit of 2,000 sessions); now what the page
     * cache adds and one unit's journal (0.7 MiB). */
    fprintf(stderr, "  SQLite memory during a commit of %d nested appends: %lld KiB above before\n", STREAMS,
            (long long)(hi2 - cur) / 1024);
    CHECK((hi2 - cur) < 3 * 1024 * 1024);
    CHECK_EQ_INT(tail_seq(0), 2);
    CHECK_EQ_INT(tail_seq(STREAMS - 1), 2);
}

/* After a burst, the page cache it filled goes back (log_release_memory, what the
 * runner does once its sessions are done), and the connection reads on. */
static void test_release_memory(void)
{
    sqlite3_int64 full, hi, after;
    sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &full, &hi, 0);
    log_release_memory(conn);
    sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &after, &hi, 0);
    fprintf(stderr, "  SQLite memory in use: %lld KiB, %lld KiB after log_release_memory\n", (long long)full / 1024,
            (long long)after / 1024);
    CHECK(after < full - 1024 * 1024);      /* the 2 MiB cache was full */
    CHECK_EQ_INT(tail_seq(STREAMS - 1), 2);
}

/* An operation alone that fails after writing: nothing of it stays. */
static void test_alone_fails_whole(void)
{
    arg a = {50, LOG_ECONFLICT};
    CHECK_EQ_INT(log_transact(conn, op_append_nested, &a), LOG_ECONFLICT);
    CHECK_EQ_INT(tail_seq(0), 2);
    CHECK_EQ_INT(tail_seq(49), 2);
    /* and the connection goes on writing */
    a.fail = 0;
    CHECK_EQ_INT(log_transact(conn, op_append_nested, &a), 0);
    CHECK_EQ_INT(tail_seq(49), 3);
    CHECK_EQ_INT(tail_seq(50), 2);
}

int main(void)
{
    if (test_db_open("test-journal", dir, sizeof dir, &lg, &conn) == 0) {
        test_commit_memory();
        test_release_memory();
        test_alone_fails_whole();
    }
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

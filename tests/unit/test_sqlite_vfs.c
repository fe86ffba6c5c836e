/* Unit tests for the VFS that writes a commit's WAL frames with one system call
 * (lib/store/sqlite/sq_vfs.c): a commit of 200 streams' appends (some 50 frames,
 * two writes each before) reaches the -wal file in at most a few writes; what a
 * commit acknowledged is in the file when the commit returns (a child process
 * commits and leaves with _exit, nothing closed; its commits are all there for
 * the next open); a transaction that outgrows a tiny page cache (its pages spilled
 * to the WAL, written again, read back for their checksums) commits whole, and a
 * rollback after such spills leaves nothing; a commit whose gathered frames cannot
 * be written (the file size limit reached) fails, and leaves what was committed
 * before whole; the database passes integrity_check. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/sqlite/sq.h"
#include "store/sqlite/sq_db.h"
#include "test.h"
#include "test_db.h"

#define NSTREAMS 200
#define MSG_BYTES 200

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

typedef struct arg {
    int n;
    char fill;
    size_t size;                /* of each message (at most 4096) */
} arg;

static void path_of(int i, char *out, size_t cap)
{
    snprintf(out, cap, "v/stream-%03d", i);
}

static int op_append(log_conn_t *c, void *p)
{
    arg *a = p;
    char path[64], msg[4096];
    memset(msg, a->fill, sizeof msg);
    log_msg m = {msg, a->size};
    for (int i = 0; i < a->n; i++) {
        path_of(i, path, sizeof path);
        log_append_req r = {.path = path, .msgs = &m, .nmsgs = 1};
        int rc = log_tx_append(c, &r);
        if (rc) return rc;
    }
    return 0;
}

static int64_t tail_seq(log_conn_t *c, int i)
{
    char path[64];
    log_info info;
    path_of(i, path, sizeof path);
    return log_head(c, path, &info) == 0 ? (int64_t)info.tail.seq : -1;
}

/* Run fn in a child process, which leaves with _exit(fn()) (nothing closed); 1 if
 * it exited with 0. */
static int in_child(int (*fn)(void))
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) _exit(fn());
    int st = 0;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void check_integrity(sqlite3 *db)
{
    sqlite3_stmt *q;
    if (CHECK_EQ_INT(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL), SQLITE_OK)) {
        CHECK_EQ_INT(sqlite3_step(q), SQLITE_ROW);
        CHECK_EQ_STR((const char *)sqlite3_column_text(q, 0), "ok");
        sqlite3_finalize(q);
    }
}

/* A new connection (reading the -wal file as after a crash, when this process's
 * connection is the only other one): the first and last streams end at seq. NULL if
 * it cannot be opened. */
static log_conn_t *reopened_at(int64_t seq)
{
    log_conn_t *c = log_conn_open(lg, NULL, 0);
    if (!CHECK(c != NULL)) return NULL;
    CHECK_EQ_INT(tail_seq(c, 0), seq);
    CHECK_EQ_INT(tail_seq(c, NSTREAMS - 1), seq);
    check_integrity(sq_db(c));
    return c;
}

/* A commit of 200 appends (some 50 frames, 200 KiB: more than the unix VFS
 * writes in one call): its frames in a few writes, every one whole. */
static void test_one_write(void)
{
    CHECK(sq_vfs_name() != NULL);
    char path[64];
    for (int i = 0; i < NSTREAMS; i++) {
        path_of(i, path, sizeof path);
        if (!CHECK_EQ_INT(test_db_create(conn, path), 0)) return;
    }
    arg a = {NSTREAMS, 'x', MSG_BYTES};
    CHECK_EQ_INT(log_transact(conn, op_append, &a), 0);    /* (the pages exist now) */
    unsigned long long w0 = sq_vfs_wal_writes();
    a.fill = 'y';
    CHECK_EQ_INT(log_transact(conn, op_append, &a), 0);
    unsigned long long writes = sq_vfs_wal_writes() - w0;
    fprintf(stderr, "  a commit of %d appends: %llu write(s) to the -wal file\n", NSTREAMS, writes);
    CHECK(writes >= 1 && writes <= 3);
    CHECK_EQ_INT(tail_seq(conn, 0), 2);
    CHECK_EQ_INT(tail_seq(conn, NSTREAMS - 1), 2);
}

/* What a commit acknowledged is in the file when it returns: a child commits 20
 * times and leaves without closing anything. */
static int commit_20(void)
{
    log_conn_t *c = log_conn_open(lg, NULL, 0);
    arg a = {NSTREAMS, 'z', MSG_BYTES};
    for (int i = 0; i < 20; i++)
        if (!c || log_transact(c, op_append, &a) != 0) return 1;
    return 0;
}

static void test_durable_at_return(void)
{
    CHECK(in_child(commit_20));
    log_conn_t *c = reopened_at(22);
    if (c) log_conn_close(c);
}

/* A child empties the -wal file (a TRUNCATE checkpoint), limits the size of the
 * files it writes to 64 KiB and commits 800 KiB: the frames gathered fail to be
 * written at the commit's sync, and the commit fails. What was committed before
 * is all there after, and nothing of the failed commit. */
static int commit_limited(void)
{
    signal(SIGXFSZ, SIG_IGN);
    log_conn_t *c = log_conn_open(lg, NULL, 0);
    if (!c || sqlite3_wal_checkpoint_v2(sq_db(c), NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL) != SQLITE_OK) return 2;
    struct rlimit rl = {64 * 1024, 64 * 1024};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 3;
    arg a = {NSTREAMS, 'b', 4096};
    return log_transact(c, op_append, &a) != 0 ? 0 : 1;
}

static void test_write_error(void)
{
    CHECK(in_child(commit_limited));
    log_conn_t *c = reopened_at(22);
    if (!c) return;
    /* and it commits again */
    arg a = {NSTREAMS, 'w', MSG_BYTES};
    CHECK_EQ_INT(log_transact(c, op_append, &a), 0);
    CHECK_EQ_INT(tail_seq(c, NSTREAMS - 1), 23);
    log_conn_close(c);
}

/* Through SQLite alone: a transaction far larger than the page cache (its pages
 * spill to the WAL before the commit, some written again), then one rolled back
 * after spilling; the contents, and integrity_check. */
static void test_spill(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/spill.db", dir);
    db_opts o;
    db_opts_default(&o);
    o.migrate = 0;
    sqlite3 *db = NULL;
    char err[256] = "";
    if (!CHECK_EQ_INT(db_open(path, &o, &db, err, sizeof err), 0)) return;
    char *e = NULL;
    CHECK_EQ_INT(sqlite3_exec(db,
                              "PRAGMA cache_size=20; PRAGMA cache_spill=10;"
                              "CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB);"
                              "BEGIN;"
                              "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)"
                              " INSERT INTO t SELECT i, randomblob(300) FROM n;"
                              "UPDATE t SET v = zeroblob(300) WHERE k % 7 = 0;"
                              "COMMIT;"
                              "BEGIN;"
                              "UPDATE t SET v = randomblob(600);"
                              "ROLLBACK;",
                              NULL, NULL, &e),
                 SQLITE_OK);
    if (e) fprintf(stderr, "  %s\n", e);
    sqlite3_free(e);
    sqlite3_stmt *st;
    if (CHECK_EQ_INT(sqlite3_prepare_v2(db, "SELECT count(*), sum(length(v)), sum(v = zeroblob(300)) FROM t", -1,
                                        &st, NULL),
                     SQLITE_OK)) {
        CHECK_EQ_INT(sqlite3_step(st), SQLITE_ROW);
        CHECK_EQ_INT(sqlite3_column_int(st, 0), 5000);
        CHECK_EQ_INT(sqlite3_column_int(st, 1), 5000 * 300);
        CHECK_EQ_INT(sqlite3_column_int(st, 2), 5000 / 7);
        sqlite3_finalize(st);
    }
    sqlite3_close_v2(db);
    /* Opened again (the WAL read back from the file), whole. */
    if (!CHECK_EQ_INT(db_open(path, &o, &db, err, sizeof err), 0)) return;
    check_integrity(db);
    if (CHECK_EQ_INT(sqlite3_prepare_v2(db, "SELECT count(*) FROM t WHERE length(v) = 300", -1, &st, NULL),
                     SQLITE_OK)) {
        CHECK_EQ_INT(sqlite3_step(st), SQLITE_ROW);
        CHECK_EQ_INT(sqlite3_column_int(st, 0), 5000);
        sqlite3_finalize(st);
    }
    sqlite3_close_v2(db);
}

/* test_db_open's, with synchronous=FULL (the tests' logs run without it). */
static int open_full(void)
{
    char path[1100], err[256] = "";
    if (test_db_target("test-vfs", dir, sizeof dir, path, sizeof path)) return -1;
    log_opts o = {1, 5000, 1, 0, 0};
    lg = log_open(path, &o, err, sizeof err);
    conn = lg ? log_conn_open(lg, err, sizeof err) : NULL;
    if (!CHECK(conn != NULL)) {
        fprintf(stderr, "  %s\n", err);
        return -1;
    }
    return 0;
}

int main(void)
{
    if (open_full() == 0) {
        test_one_write();
        test_durable_at_return();
        test_write_error();
        test_spill();
    }
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

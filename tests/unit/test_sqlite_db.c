/* Unit tests for lib/store/sqlite/sq_db.c: opening, pragmas, and migrations recorded once. */
#include "timefmt.h"
#include "store/sqlite/sq.h"
#include "store/sqlite/sq_db.h"

#include "log.h"

#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

static char dir[256];
static char path[300];

/* The single integer a query returns, or -999 on error. */
static long long query_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    long long v = -999;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The single text a query returns into out (empty on error). */
static void query_text(sqlite3 *db, const char *sql, char *out, size_t cap)
{
    sqlite3_stmt *st = NULL;
    out[0] = '\0';
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

static int has_table(sqlite3 *db, const char *name)
{
    sqlite3_stmt *st = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        found = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return found;
}

/* Open p with the default options into *db: db_open's result (its error printed). */
static int open_default(const char *p, sqlite3 **db)
{
    db_opts o;
    char err[256] = "";
    db_opts_default(&o);
    *db = NULL;
    int rc = db_open(p, &o, db, err, sizeof err);
    if (rc) fprintf(stderr, "  db_open %s: %s\n", p, err);
    return rc;
}

static void test_defaults(void)
{
    db_opts o;
    memset(&o, 0xff, sizeof o);
    db_opts_default(&o);
    CHECK_EQ_INT(o.synchronous_full, 1);
    CHECK_EQ_INT(o.busy_timeout_ms, 5000);
    CHECK_EQ_INT(o.migrate, 1);
    CHECK(db_schema_version() >= 1);
    long long now = timefmt_now_ms();
    CHECK(now > 1577836800000LL);        /* after 2020 */
    CHECK(timefmt_now_ms() >= now);
}

static void test_open_creates_schema(void)
{
    sqlite3 *db;
    if (!CHECK_EQ_INT(open_default(path, &db), 0)) return;
    CHECK(db != NULL);
    CHECK(access(path, F_OK) == 0);

    char mode[32];
    query_text(db, "PRAGMA journal_mode", mode, sizeof mode);
    CHECK_EQ_STR(mode, "wal");
    CHECK_EQ_INT(query_int(db, "PRAGMA synchronous"), 2);        /* FULL */
    CHECK_EQ_INT(query_int(db, "PRAGMA foreign_keys"), 0);
    CHECK_EQ_INT(query_int(db, "PRAGMA busy_timeout"), 5000);

    CHECK(has_table(db, "schema_version"));
    CHECK(has_table(db, "streams"));
    CHECK(has_table(db, "messages"));
    CHECK(has_table(db, "producers"));

    /* Every migration is recorded once, numbered up to the binary's version. */
    int version = db_schema_version();
    CHECK_EQ_INT(query_int(db, "SELECT max(version) FROM schema_version"), version);
    CHECK_EQ_INT(query_int(db, "SELECT min(version) FROM schema_version"), 1);
    CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM schema_version"),
                 query_int(db, "SELECT count(DISTINCT version) FROM schema_version"));
    CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM schema_version"
                               " WHERE name = '' OR applied_ms <= 0"),
                 0);
    char name[64];
    query_text(db, "SELECT name FROM schema_version WHERE version = 1", name, sizeof name);
    CHECK(strncmp(name, "001_", 4) == 0);
    sqlite3_close_v2(db);
}

static void test_reopen_idempotent(void)
{
    sqlite3 *db;
    char err[256] = "";
    if (!CHECK_EQ_INT(open_default(path, &db), 0)) return;
    long long rows = query_int(db, "SELECT count(*) FROM schema_version");
    long long applied = query_int(db, "SELECT sum(applied_ms) FROM schema_version");
    CHECK_EQ_INT(sqlite3_exec(db, "INSERT INTO streams (path, content_type, created_ms,"
                                  " access_ms) VALUES ('/keep', 'text/plain', 1, 1)",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close_v2(db);

    /* Open again (twice): no migration runs again, no data is lost. */
    for (int i = 0; i < 2; i++) {
        if (!CHECK_EQ_INT(open_default(path, &db), 0)) return;
        CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM schema_version"), rows);
        CHECK_EQ_INT(query_int(db, "SELECT sum(applied_ms) FROM schema_version"), applied);
        CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM streams WHERE path = '/keep'"), 1);
        /* db_migrate on an up-to-date database is a no-op that reports the version. */
        CHECK_EQ_INT(db_migrate(db, err, sizeof err), db_schema_version());
        CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM schema_version"), rows);
        sqlite3_close_v2(db);
    }
}

/* A migration numbered below one already applied (branches that landed out of order)
 * is still applied at the next open. */
static void test_gap_filled(void)
{
    sqlite3 *db;
    char err[256] = "";
    if (!CHECK_EQ_INT(open_default(path, &db), 0)) return;
    long long rows = query_int(db, "SELECT count(*) FROM schema_version");
    CHECK_EQ_INT(sqlite3_exec(db, "DROP TABLE leases; DELETE FROM schema_version WHERE version = 3", NULL, NULL,
                              NULL),
                 SQLITE_OK);
    CHECK(!has_table(db, "leases"));
    CHECK_EQ_INT(db_migrate(db, err, sizeof err), db_schema_version());
    CHECK(has_table(db, "leases"));
    CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM schema_version"), rows);
    sqlite3_close_v2(db);
}

static void test_options(void)
{
    char p2[300];
    snprintf(p2, sizeof p2, "%s/nomigrate.db", dir);
    db_opts o = {0, 1234, 0, 0};
    sqlite3 *db = NULL;
    char err[256] = "";
    if (!CHECK_EQ_INT(db_open(p2, &o, &db, err, sizeof err), 0)) return;
    CHECK_EQ_INT(query_int(db, "PRAGMA synchronous"), 1);        /* NORMAL */
    CHECK_EQ_INT(query_int(db, "PRAGMA busy_timeout"), 1234);
    CHECK(!has_table(db, "schema_version"));
    CHECK(!has_table(db, "streams"));
    /* Migrating by hand gets the same schema. */
    CHECK_EQ_INT(db_migrate(db, err, sizeof err), db_schema_version());
    CHECK(has_table(db, "streams"));
    CHECK_EQ_INT(query_int(db, "SELECT max(version) FROM schema_version"), db_schema_version());
    sqlite3_close_v2(db);
}

static void test_newer_schema_refused(void)
{
    char p3[300];
    snprintf(p3, sizeof p3, "%s/newer.db", dir);
    sqlite3 *db;
    char err[256] = "";
    if (!CHECK_EQ_INT(open_default(p3, &db), 0)) return;
    char sql[160];
    snprintf(sql, sizeof sql, "INSERT INTO schema_version VALUES (%d, 'future', 1)",
             db_schema_version() + 1);
    CHECK_EQ_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    err[0] = '\0';
    CHECK_EQ_INT(db_migrate(db, err, sizeof err), -1);
    CHECK(strstr(err, "newer") != NULL);
    /* The failed migration left no transaction open. */
    CHECK(sqlite3_get_autocommit(db) != 0);
    sqlite3_close_v2(db);

    db_opts o;
    db_opts_default(&o);
    db = (sqlite3 *)&o;
    err[0] = '\0';
    CHECK_EQ_INT(db_open(p3, &o, &db, err, sizeof err), -1);
    CHECK(db == NULL);
    CHECK(err[0] != '\0');
}

static void test_open_fails(void)
{
    db_opts o;
    sqlite3 *db = (sqlite3 *)&o;
    char err[256] = "";
    char bad[300];
    db_opts_default(&o);
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.db", dir);
    CHECK_EQ_INT(db_open(bad, &o, &db, err, sizeof err), -1);
    CHECK(db == NULL);
    CHECK(strstr(err, bad) != NULL);
}

static int count_msg(void *ud, const void *data, size_t len, offset_t at)
{
    (void)data;
    (void)len;
    (void)at;
    (*(int *)ud)++;
    return 0;
}

/* max_bytes caps the file (max_page_count on every connection); a write past it is
 * LOG_EFULL with nothing written, and writes succeed again once space is freed. */
static void test_max_bytes(void)
{
    char p[320], err[256];
    snprintf(p, sizeof p, "%s/capped.db", dir);
    sqlite3 *db;
    CHECK_EQ_INT(open_default(p, &db), 0);
    CHECK_EQ_INT(db_cap(db, 300000, err, sizeof err), 0);
    CHECK_EQ_INT(query_int(db, "PRAGMA max_page_count"), 300000 / query_int(db, "PRAGMA page_size") + 1);
    sqlite3_close_v2(db);
    log_opts lo = {0, 5000, 1, 0, 0};
    log_t *lg = log_open(p, &lo, err, sizeof err);
    if (lg) log_set_max_bytes(lg, 300000);
    log_conn_t *c = lg ? log_conn_open(lg, err, sizeof err) : NULL;
    if (!CHECK(c != NULL)) {
        log_close(lg);
        return;
    }
    static char big[8192];
    memset(big, 'x', sizeof big);
    log_msg m = {big, sizeof big};
    const char *paths[2] = {"filler", "capped"};
    for (int k = 0; k < 2; k++) {
        log_create_req cr;
        memset(&cr, 0, sizeof cr);
        cr.path = paths[k];
        cr.content_type = "text/plain";
        cr.ttl_s = cr.expires_ms = -1;
        CHECK_EQ_INT(log_create(c, &cr), 0);
    }
    log_append_req ar;
    memset(&ar, 0, sizeof ar);
    ar.msgs = &m;
    ar.nmsgs = 1;
    ar.path = "filler";
    for (int i = 0; i < 8; i++) CHECK_EQ_INT(log_append(c, &ar), 0);
    ar.path = "capped";
    int acked = 0, rc = 0;
    for (int i = 0; i < 200 && (rc = log_append(c, &ar)) == 0; i++) acked++;
    CHECK_EQ_INT(rc, LOG_EFULL);
    CHECK(acked >= 5 && acked < 200);
    CHECK(strstr(errs_str(LOG_EFULL), "full") != NULL);
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = "capped";
    rr.kind = OFFSET_START;
    rr.max_bytes = 1 << 22;
    int n = 0;
    CHECK_EQ_INT(log_read(c, &rr, count_msg, &n), 0);
    CHECK_EQ_INT(n, acked);
    /* Space returns: the same append goes through. */
    CHECK_EQ_INT(log_delete(c, "filler"), 0);
    CHECK_EQ_INT(log_append(c, &ar), 0);
    log_conn_close(c);
    log_close(lg);
}

/* log_opts.cache_kib sizes each connection's page cache (the runner's holds the
 * tails of the streams it writes); 0 leaves SQLite's default; release_memory (the
 * runner's memtrim) empties it. */
static void test_cache_kib(void)
{
    char p[320], err[256];
    snprintf(p, sizeof p, "%s/cache.db", dir);
    for (int k = 0; k < 2; k++) {
        log_opts lo = {0, 5000, 1, k ? 16384 : 0, 0};
        log_t *lg = log_open(p, &lo, err, sizeof err);
        log_conn_t *c = lg ? log_conn_open(lg, err, sizeof err) : NULL;
        if (!CHECK(c != NULL)) {
            log_close(lg);
            return;
        }
        CHECK_EQ_INT(query_int(sq_db(c), "PRAGMA cache_size"), (k ? -16384 : -2000));
        log_release_memory(c);
        CHECK_EQ_INT(query_int(sq_db(c), "PRAGMA cache_size"), (k ? -16384 : -2000));
        log_conn_close(c);
        log_close(lg);
    }
}

static int nest_twice(log_conn_t *c, void *ud)
{
    (void)ud;
    for (int i = 0; i < 2; i++)
        if (log_tx_nest_begin(c) || log_tx_nest_end(c, i == 1)) return LOG_EIO;
    return 0;
}

static int kept(sqlite3 *db, const char *sql)
{
    for (sqlite3_stmt *st = sqlite3_next_stmt(db, NULL); st; st = sqlite3_next_stmt(db, st))
        if (!strcmp(sqlite3_sql(st), sql)) return 1;
    return 0;
}

/* A nested savepoint (the runner's, one per session in each of its commits) runs
 * statements kept prepared, not text parsed again each time. */
static void test_nest_prepared(void)
{
    char p[320], err[256];
    snprintf(p, sizeof p, "%s/nest.db", dir);
    log_opts lo = {0, 5000, 1, 0, 0};
    log_t *lg = log_open(p, &lo, err, sizeof err);
    log_conn_t *c = lg ? log_conn_open(lg, err, sizeof err) : NULL;
    if (!CHECK(c != NULL)) {
        log_close(lg);
        return;
    }
    CHECK_EQ_INT(log_transact(c, nest_twice, NULL), 0);
    CHECK(kept(sq_db(c), "SAVEPOINT nested"));
    CHECK(kept(sq_db(c), "RELEASE nested"));
    CHECK(kept(sq_db(c), "ROLLBACK TO nested"));
    log_conn_close(c);
    log_close(lg);
}

static int exec_ok(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
}

/* 1 if fd is readable now (an inotify event is queued by the write that makes it). */
static int readable_now(int fd)
{
    struct pollfd pf = {fd, POLLIN, 0};
    return poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) ? -1 : (long long)st.st_size;
}

/* The change feed's descriptor becomes readable when a commit of any dstream
 * connection is visible, and not before: not while a transaction's frames are
 * already in the -wal file (a transaction bigger than the page cache spills them
 * there before its COMMIT). Every connection signals, in a group or not, through
 * the signal file DB-wake, made with the database's mode; removed, it is made and
 * watched again. The hook that signals also checkpoints: the WAL stays bounded. */
static void test_commit_signal(void)
{
    char p[320], wal[330], sig[330], err[256];
    snprintf(p, sizeof p, "%s/signal.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", p);
    snprintf(sig, sizeof sig, "%s-wake", p);
    log_opts lo = {0, 5000, 1, 0, 0};
    log_t *lg = log_open(p, &lo, err, sizeof err);
    if (!CHECK(lg != NULL)) return;
    CHECK_EQ_INT(chmod(p, 0660), 0);
    log_conn_t *c = log_conn_open(lg, err, sizeof err);
    store_feed *f = c ? sq_feed_ops.open(lg, err, sizeof err) : NULL;
    log_conn_t *c3 = NULL;
    if (!CHECK(f != NULL)) goto out;
    struct stat st;
    CHECK(stat(sig, &st) == 0 && (st.st_mode & 0777) == 0660);
    sq_feed_ops.watch(f, 1);
    int fd = sq_feed_ops.fd(f);
    sqlite3 *db = sq_db(c);
    CHECK(exec_ok(db, "CREATE TABLE bulk(x)"));
    CHECK(readable_now(fd));
    CHECK_EQ_INT(sq_feed_ops.event(f), 1);
    CHECK_EQ_INT(sq_feed_ops.moved(f), 1);
    CHECK(!readable_now(fd));

    /* A transaction that spills its pages into the WAL before it commits. */
    CHECK(exec_ok(db, "PRAGMA cache_size=10"));
    long long before = file_size(wal);
    CHECK(exec_ok(db, "BEGIN IMMEDIATE"));
    for (int i = 0; i < 20; i++) CHECK(exec_ok(db, "INSERT INTO bulk VALUES (zeroblob(50000))"));
    CHECK(file_size(wal) > before);
    CHECK(!readable_now(fd));
    CHECK_EQ_INT(sq_feed_ops.moved(f), 0);
    CHECK(exec_ok(db, "COMMIT"));
    CHECK(readable_now(fd));
    CHECK_EQ_INT(sq_feed_ops.event(f), 1);
    CHECK_EQ_INT(sq_feed_ops.moved(f), 1);

    /* Removed: the feed makes it again, watches it, and says to look. */
    CHECK_EQ_INT(unlink(sig), 0);
    CHECK(readable_now(fd));
    CHECK_EQ_INT(sq_feed_ops.event(f), 1);
    CHECK_EQ_INT(access(sig, F_OK), 0);
    c3 = log_conn_open(lg, err, sizeof err);
    if (!CHECK(c3 != NULL)) goto out;
    CHECK(exec_ok(sq_db(c3), "INSERT INTO bulk VALUES (1)"));
    CHECK(readable_now(fd));
    CHECK_EQ_INT(sq_feed_ops.event(f), 1);
    /* A connection that had the old file open signals through the new one within
     * a second or so: it compares the path with its descriptor that often. */
    int seen = 0;
    for (long long end = now_ms() + 5000; !seen && now_ms() < end;) {
        CHECK(exec_ok(db, "INSERT INTO bulk VALUES (2)"));
        seen = readable_now(fd) && sq_feed_ops.event(f) == 1;
        struct timespec nap = {0, 50 * 1000000L};
        if (!seen) nanosleep(&nap, NULL);
    }
    CHECK(seen);

    /* 20 MB in 200 commits: the WAL stays near the checkpoint's size. */
    long long page = query_int(db, "PRAGMA page_size");
    for (int i = 0; i < 200; i++) CHECK(exec_ok(db, "INSERT INTO bulk VALUES (zeroblob(100000))"));
    long long bound = (SQ_CHECKPOINT_PAGES + 100) * (page + 24) + 32;
    if (!CHECK(file_size(wal) <= bound)) fprintf(stderr, "  wal %lld bytes, bound %lld\n", file_size(wal), bound);
out:
    if (f) sq_feed_ops.close(f);
    log_conn_close(c3);
    log_conn_close(c);
    log_close(lg);
}


/* The WAL takes SQ_CHECKPOINT_PAGES (4,000) pages before a commit's hook checkpoints:
 * a busy runner writes the same pages (each stream's last leaf, the streams rows)
 * in commit after commit, and a checkpoint copies each page once however many
 * frames it has, so the fewer checkpoints, the fewer copies per delta. Commits of
 * 4 pages each, 3,000 pages in all: the log still holds every one of them (no
 * checkpoint ran and let it start again, as one did from 1,000 pages before). */
static void test_checkpoint_pages(void)
{
    char p[320], err[256];
    snprintf(p, sizeof p, "%s/ckpt.db", dir);
    log_opts lo = {0, 5000, 1, 0, 0};
    log_t *lg = log_open(p, &lo, err, sizeof err);
    if (!CHECK(lg != NULL)) return;
    log_conn_t *c = log_conn_open(lg, err, sizeof err);
    if (!CHECK(c != NULL)) goto out;
    sqlite3 *db = sq_db(c);
    CHECK(exec_ok(db, "CREATE TABLE bulk(x)"));
    long long page = query_int(db, "PRAGMA page_size");
    char sql[96];
    snprintf(sql, sizeof sql, "INSERT INTO bulk VALUES (zeroblob(%lld))", page * 2);
    /* Until the log's file holds 3,000 frames (each commit 4: the row's page, its two
     * overflow pages, the first page's database size), or 2,000 commits. */
    char wal[330];
    snprintf(wal, sizeof wal, "%s-wal", p);
    for (int i = 0; i < 2000 && file_size(wal) < 32 + 3000 * (page + 24); i++) CHECK(exec_ok(db, sql));
    /* The frames in the log now (a PASSIVE checkpoint says so, then copies them). */
    int frames = -1, copied = -1;
    CHECK_EQ_INT(sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied), SQLITE_OK);
    if (!CHECK(frames >= 3000 && frames < SQ_CHECKPOINT_PAGES)) fprintf(stderr, "  %d frames in the log\n", frames);
out:
    log_conn_close(c);
    log_close(lg);
}

int main(void)
{
    if (test_mkdtemp(dir, sizeof dir, "test-db")) return 1;
    snprintf(path, sizeof path, "%s/test.db", dir);
    test_defaults();
    test_open_creates_schema();
    test_reopen_idempotent();
    test_gap_filled();
    test_options();
    test_newer_schema_refused();
    test_open_fails();
    test_max_bytes();
    test_cache_kib();
    test_nest_prepared();
    test_commit_signal();
    test_checkpoint_pages();
    test_rmtree(dir);
    return TEST_MAIN_END();
}

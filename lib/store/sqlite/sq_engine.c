/* The SQLite engine: the process's handle, the steps of the group commit, and
 * the table lib/log.c dispatches through (connections: conn.c; the statement
 * cache: stmt.c; each area's SQL in a file of its own). */
#include "sq.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sq_db.h"

/* ---- the process ---------------------------------------------------------------- */

static int sq_open(log_t *l, char *err, size_t errlen)
{
    db_opts dopts = {l->opts.synchronous_full, l->opts.busy_timeout_ms, l->opts.migrate, 0};
    sqlite3 *db;
    /* Create and migrate once here, so that later connections only open. */
    if (db_open(l->target, &dopts, &db, err, errlen)) return -1;
    sqlite3_close_v2(db);
    return 0;
}

static void sq_close(log_t *l)
{
    (void)l;
}

/* ---- the group commit's steps ------------------------------------------------- */

/* The writers' file lock: 1 taken, 0 not (no lock file, or waited out). Writers of
 * all processes queue on it before BEGIN IMMEDIATE, so the next one goes at most
 * half a millisecond after the lock is free, where SQLite's busy handler would poll
 * with sleeps of up to 100 ms; while one process commits, the others' queues grow
 * into bigger groups. It is never waited for longer than the busy timeout: a writer
 * stopped while it held it (SIGSTOP, a debugger, a hung process) must not stop every
 * writer of every process for ever. After that, SQLite's own lock decides: the
 * commit goes ahead if the stopped writer was not inside a transaction, else it
 * fails busy (LOG_EBUSY). */
static int writers_lock(sq_conn *c)
{
    if (c->lockfd < 0) return 0;
    if (flock(c->lockfd, LOCK_EX | LOCK_NB) == 0) return 1;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long us = 20;
    for (;;) {
        struct timespec nap = {0, us * 1000};
        nanosleep(&nap, NULL);
        if (flock(c->lockfd, LOCK_EX | LOCK_NB) == 0) return 1;
        if (errno != EWOULDBLOCK && errno != EINTR) return 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t waited_ms = (int64_t)(now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (waited_ms >= c->base.log->opts.busy_timeout_ms) return 0;
        if (us < 500) us *= 2;
    }
}

static int sq_group_begin(log_conn_t *c)
{
    sq_read_batch_end(c);       /* its snapshot would refuse the group's writes */
    sq(c)->locked = writers_lock(sq(c));
    return sq_tx(c, SQ_TX_BEGIN);
}

/* An operation alone in its group (the runner's commits, a quiet pool's appends)
 * runs without a savepoint of its own: the transaction is its savepoint. Besides
 * two statements, that keeps the statement journal small: while a savepoint is
 * open SQLite keeps (in memory: temp_store) a copy of every page written under it,
 * once more for each nested savepoint (a runner's commit has one per session), so
 * that a commit of 2,000 sessions held tens of megabytes until it ended. */
static int sq_op_begin(log_conn_t *c)
{
    if (c->group_ops == 1) return 0;
    return sq_tx(c, SQ_TX_SAVEPOINT);
}

static int sq_op_end(log_conn_t *c, int op_rc)
{
    /* A full database may make SQLite roll the whole transaction back (not only
     * the statement): then the group is lost, all of it. */
    if (op_rc == LOG_EFULL && sqlite3_get_autocommit(sq(c)->db)) return LOG_EFULL;
    if (c->group_ops == 1) return op_rc < 0 ? op_rc : 0;   /* group_end rolls it back */
    if (op_rc < 0) sq_tx(c, SQ_TX_ROLLBACK_TO);
    return sq_tx(c, SQ_TX_RELEASE);
}

static int sq_group_end(log_conn_t *c, int rc)
{
    if (rc == 0) rc = sq_tx(c, SQ_TX_COMMIT);
    if (rc) sq_tx(c, SQ_TX_ROLLBACK);
    return rc;
}

static void sq_group_release(log_conn_t *c)
{
    if (sq(c)->locked) flock(sq(c)->lockfd, LOCK_UN);
    sq(c)->locked = 0;
}

/* A nested savepoint's statements, from the connection's statement cache: the
 * runner opens one per session it commits in a group, and sqlite3_exec would
 * parse the text each time (5 % of its CPU at 200 streaming sessions). */
static int cached(log_conn_t *c, const char *sql)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, sql, &st)) return sq_error(c, 0);
    int rc = sqlite3_step(st);
    sq_stmt_done(c, st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : sq_error(c, rc);
}

static int sq_nest_begin(log_conn_t *c)
{
    return cached(c, "SAVEPOINT nested");
}

static int sq_nest_end(log_conn_t *c, int undo)
{
    int rc = undo ? cached(c, "ROLLBACK TO nested") : 0;
    int rc2 = cached(c, "RELEASE nested");
    return rc ? rc : rc2;
}

/* The page cache's unused pages (a connection keeps up to cache_size of them). */
static void sq_release_memory(log_conn_t *c)
{
    sqlite3_db_release_memory(sq(c)->db);
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

static int sq_sizes(log_conn_t *c, void (*fn)(void *ud, const char *what, int64_t bytes), void *ud)
{
    char wal[4200];
    const char *db = c->log->target;
    snprintf(wal, sizeof wal, "%s-wal", db);
    fn(ud, "db", file_size(db));
    fn(ud, "wal", file_size(wal));
    return 0;
}

static int sq_schema_version(void)
{
    return db_schema_version();
}

/* ---- the engine ---------------------------------------------------------------- */

const store_engine store_sqlite = {
    .name = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .conn_open = sq_conn_open,
    .conn_close = sq_conn_close,
    .group_begin = sq_group_begin,
    .op_begin = sq_op_begin,
    .op_end = sq_op_end,
    .group_end = sq_group_end,
    .group_release = sq_group_release,
    .nest_begin = sq_nest_begin,
    .nest_end = sq_nest_end,
    .sizes = sq_sizes,
    .release_memory = sq_release_memory,
    .schema_version = sq_schema_version,
    .streams = &sq_streams_ops,
    .feed = &sq_feed_ops,
    .leases = &sq_leases_ops,
    .rstats = &sq_rstats_ops,
    .defs = &sq_defs_ops,
    .tokens = &sq_tokens_ops,
    .sessions = &sq_sessions_ops,
    .recordings = &sq_recordings_ops,
    .subs = &sq_subs_ops,
    .backup = &sq_backup_ops,
    .copy = &sq_copy_ops,
    .retain = &sq_retain_ops,
};

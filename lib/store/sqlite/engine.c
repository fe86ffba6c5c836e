/* The SQLite engine: the process's handle, each thread's connection, the steps of
 * the group commit, and the statement cache of the modules' own SQL. */
#include "sqlite.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "db.h"

/* ---- the process and its connections ----------------------------------------- */

static int sq_open(log_t *l, char *err, size_t errlen)
{
    db_opts dopts = {l->opts.synchronous_full, l->opts.busy_timeout_ms, l->opts.migrate};
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

static void sq_conn_close(log_conn_t *lc)
{
    if (!lc) return;
    sq_conn *c = sq(lc);
    sq_streams_finalize(c);
    for (int i = 0; i < LOG_STMT_CACHE; i++) sqlite3_finalize(c->cache[i].st);
    sqlite3_close_v2(c->db);
    if (c->lockfd >= 0) close(c->lockfd);
    free(c);
}

static log_conn_t *sq_conn_open(log_t *l, char *err, size_t errlen)
{
    db_opts o = {l->opts.synchronous_full, l->opts.busy_timeout_ms, 0};
    sq_conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->base.log = l;
    /* One open file description per connection: flock excludes between them, in
     * this process and in others. */
    char lockpath[4200];
    snprintf(lockpath, sizeof lockpath, "%s-wlock", l->target);
    c->lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (db_open(l->target, &o, &c->db, err, errlen) || db_cap(c->db, l->max_bytes, err, errlen) ||
        sq_streams_prepare(c, err, errlen)) {
        sq_conn_close(&c->base);
        return NULL;
    }
    return &c->base;
}

int sq_error(log_conn_t *c, int src)
{
    int e = src ? src : sqlite3_errcode(sq(c)->db);
    if ((e & 0xff) == SQLITE_FULL) return LOG_EFULL;
    return (e & 0xff) == SQLITE_BUSY || (e & 0xff) == SQLITE_LOCKED ? LOG_EBUSY : LOG_EIO;
}

/* ---- the group commit's steps ------------------------------------------------- */

static int exec(log_conn_t *c, const char *sql)
{
    int rc = sqlite3_exec(sq(c)->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sq_error(c, rc);
}

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
    sq(c)->locked = writers_lock(sq(c));
    return exec(c, "BEGIN IMMEDIATE");
}

static int sq_op_begin(log_conn_t *c)
{
    return exec(c, "SAVEPOINT op");
}

static int sq_op_end(log_conn_t *c, int op_rc)
{
    /* A full database may make SQLite roll the whole transaction back (not only
     * the statement): then the group is lost, all of it. */
    if (op_rc == LOG_EFULL && sqlite3_get_autocommit(sq(c)->db)) return LOG_EFULL;
    if (op_rc < 0) exec(c, "ROLLBACK TO op");
    return exec(c, "RELEASE op");
}

static int sq_group_end(log_conn_t *c, int rc)
{
    if (rc == 0) rc = exec(c, "COMMIT");
    if (rc) exec(c, "ROLLBACK");
    return rc;
}

static void sq_group_release(log_conn_t *c)
{
    if (sq(c)->locked) flock(sq(c)->lockfd, LOCK_UN);
    sq(c)->locked = 0;
}

static int sq_schema_version(void)
{
    return db_schema_version();
}

/* ---- the statement cache --------------------------------------------------------- */

sqlite3 *log_db(log_conn_t *c)
{
    return sq(c)->db;
}

static uint64_t sql_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;    /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

int log_stmt(log_conn_t *lc, const char *sql, sqlite3_stmt **st)
{
    sq_conn *c = sq(lc);
    uint64_t h = sql_hash(sql);
    sq_cached_stmt *victim = NULL;
    *st = NULL;
    for (int i = 0; i < LOG_STMT_CACHE; i++) {
        sq_cached_stmt *e = &c->cache[i];
        if (e->st && e->hash == h && strcmp(sqlite3_sql(e->st), sql) == 0) {
            if (e->out) {       /* in use: a fresh one, not kept */
                victim = NULL;
                break;
            }
            e->out = 1;
            e->used = ++c->tick;
            *st = e->st;
            return 0;
        }
        if (!e->out && (!victim || !e->st || (victim->st && e->used < victim->used))) victim = e;
    }
    int rc = victim ? sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL)
                    : sqlite3_prepare_v2(c->db, sql, -1, st, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(*st);
        *st = NULL;
        return LOG_EIO;
    }
    if (victim && strcmp(sqlite3_sql(*st), sql) == 0) {
        sqlite3_finalize(victim->st);
        victim->st = *st;
        victim->hash = h;
        victim->out = 1;
        victim->used = ++c->tick;
    }
    return 0;
}

void log_stmt_done(log_conn_t *lc, sqlite3_stmt *st)
{
    sq_conn *c = sq(lc);
    if (!st) return;
    for (int i = 0; i < LOG_STMT_CACHE; i++) {
        sq_cached_stmt *e = &c->cache[i];
        if (e->st != st) continue;
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        e->out = 0;
        return;
    }
    sqlite3_finalize(st);
}

int log_stmt_finish(log_conn_t *c, sqlite3_stmt *st, int rc)
{
    log_stmt_done(c, st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : (rc & 0xff) == SQLITE_BUSY ? LOG_EBUSY : LOG_EIO;
}

int log_stmt_run(log_conn_t *c, sqlite3_stmt *st)
{
    return log_stmt_finish(c, st, sqlite3_step(st));
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
    .schema_version = sq_schema_version,
    .streams = &sq_streams_ops,
    .feed = &sq_feed_ops,
    .leases = &sq_leases_ops,
    .rstats = &sq_rstats_ops,
    .defs = &sq_defs_ops,
    .tokens = &sq_tokens_ops,
};

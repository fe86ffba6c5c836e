/* The SQLite engine's own header: its connection, its statement cache and what
 * its files share. Nothing outside lib/store/sqlite/ includes it (make check),
 * except the engine's own unit tests (tests/unit/test_sqlite_*.c).
 *
 * One database file in WAL mode, opened by every process with a busy timeout;
 * writers of all processes queue on a lock file beside it (DB-wlock) before
 * BEGIN IMMEDIATE; every commit is signalled by a write to a file beside it
 * (DB-wake, signal.c) that other processes watch with inotify, then ask PRAGMA
 * data_version (feed.c); a database-wide revision stamped on
 * each changed stream row says which streams changed (one writer at a time makes
 * max(rev) + 1 safe here, and only here). */
#ifndef DSTREAM_STORE_SQLITE_H
#define DSTREAM_STORE_SQLITE_H

#include <sqlite3.h>
#include <stdint.h>

#include "../../store.h"
#include "sq_engine.h"

#define SQ_STREAM_STMTS 32     /* streams.c's prepared statements (its S_COUNT) */

/* Such a statement from the connection's cache: prepared the first time sql is
 * asked for, then kept (up to SQ_STMT_CACHE of them, the least recently used
 * replaced), since preparing costs far more than running the short statements the
 * modules use. Give it back with sq_stmt_done (never sqlite3_finalize), which
 * resets it and clears its bindings. Asked again while still out (a nested use),
 * a fresh statement is prepared, and finalized when given back. sql is compared
 * by content, so it may be built at run time. */
#define SQ_STMT_CACHE 48

typedef struct sq_cached_stmt {
    uint64_t hash;             /* of the SQL text */
    uint64_t used;             /* when last handed out (c->tick), for replacement */
    sqlite3_stmt *st;          /* NULL: a free slot */
    int out;                   /* handed out, not given back yet */
} sq_cached_stmt;

/* A connection's commit signal (signal.c). */
typedef struct sq_signal {
    const char *target;        /* the database's path */
    int fd;                    /* DB-wake, -1 if it cannot be written */
    uint64_t n;                /* what the last signal wrote */
    int64_t checked_ms;        /* when the path was last compared with fd */
} sq_signal;

/* The WAL's size in pages from which a commit's hook checkpoints (it replaces
 * SQLite's automatic checkpoint, which runs from 1,000). A busy runner writes the
 * same pages (each stream's last leaf, the streams rows) in commit after commit and
 * a checkpoint copies each page once, however many frames it has: 4,000 copies a
 * third of the pages per delta that 1,000 did (bench/RESULTS.md), for a WAL of up
 * to 16 MiB at 4 KiB pages. */
#define SQ_CHECKPOINT_PAGES 4000

typedef struct sq_conn {
    struct log_conn base;      /* first: a log_conn_t * is a sq_conn * */
    sqlite3 *db;
    sqlite3_stmt *st[SQ_STREAM_STMTS];  /* streams.c's, prepared at open */
    int lockfd;                /* the writers' lock file, -1 if unavailable */
    int locked;                /* group_begin took it */
    int batch;                 /* a read transaction of log_read_batch is open */
    sq_signal sig;             /* its commits' signal and checkpoints (signal.c) */
    uint64_t tick;
    sq_cached_stmt cache[SQ_STMT_CACHE];  /* sq_stmt */
} sq_conn;

static inline sq_conn *sq(log_conn_t *c)
{
    return (sq_conn *)c;
}

/* The connection's database handle. */
sqlite3 *sq_db(log_conn_t *c);
int sq_stmt(log_conn_t *c, const char *sql, sqlite3_stmt **st);
void sq_stmt_done(log_conn_t *c, sqlite3_stmt *st);
/* Give st back and turn rc, its last sqlite3_step result, into 0 (a row, or done),
 * LOG_EBUSY or LOG_EIO. */
int sq_stmt_finish(log_conn_t *c, sqlite3_stmt *st, int rc);
/* Step st once (a write, or a read of one row nobody needs), then sq_stmt_finish. */
int sq_stmt_run(log_conn_t *c, sqlite3_stmt *st);

/* A connection of this engine (the engine's conn_open and conn_close), for the
 * engine's own files, which never call up into lib/log.c. */
log_conn_t *sq_conn_open(log_t *l, char *err, size_t errlen);
void sq_conn_close(log_conn_t *c);

/* signal.c: the path of the commit signal file of the database at target. */
void sq_signal_path(const char *target, char *out, size_t outlen);
/* Open the signal file for writing, creating it with the database file's mode
 * (and owner, when root) if missing. Returns the descriptor (the caller's), or -1. */
int sq_signal_create(const char *target);
/* Signal a commit: one pwrite to the file (opened again if it was replaced). */
void sq_signal_commit(sq_signal *s);
/* Register c's wal hook (after every commit: signal it, checkpoint if the WAL is
 * at SQ_CHECKPOINT_PAGES); target must outlive c. sq_signal_detach undoes it and
 * closes the file. */
void sq_signal_attach(sq_conn *c, const char *target);
void sq_signal_detach(sq_conn *c);

/* A SQLite result code as LOG_E*: LOG_EFULL, LOG_EBUSY or LOG_EIO. */
int sq_error(log_conn_t *c, int rc);

/* The group commit's statements, kept prepared with the streams' (sq_streams.c):
 * parsing BEGIN, SAVEPOINT and COMMIT again at every group costs the pool CPU on
 * every append. Returns 0 or LOG_E*. */
typedef enum {
    SQ_TX_BEGIN, SQ_TX_COMMIT, SQ_TX_ROLLBACK, SQ_TX_SAVEPOINT, SQ_TX_RELEASE, SQ_TX_ROLLBACK_TO
} sq_tx_step;
int sq_tx(log_conn_t *c, sq_tx_step step);
/* End the read transaction of log_read_batch, if one is open: 0 or LOG_E*. */
int sq_read_batch_end(log_conn_t *c);

/* streams.c: prepare and finalize its statements on a new connection. */
int sq_streams_prepare(sq_conn *c, char *err, size_t errlen);
void sq_streams_finalize(sq_conn *c);

/* streams.c: the change feed on a connection (store_feed_ops.changes_since). */
int sq_changes_since(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *), void *ud);
/* The highest revision of the streams (where a change cursor is once it saw all). */
int sq_max_rev(log_conn_t *c, int64_t *rev);
/* The same with each stream's tail (store_feed_ops.changes_tails). */
int sq_changes_tails(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *, uint64_t), void *ud);

extern const store_streams_ops sq_streams_ops;
extern const store_feed_ops sq_feed_ops;
extern const store_leases_ops sq_leases_ops;
extern const store_rstats_ops sq_rstats_ops;
extern const store_defs_ops sq_defs_ops;
extern const store_tokens_ops sq_tokens_ops;
extern const store_sessions_ops sq_sessions_ops;
extern const store_retain_ops sq_retain_ops;
extern const store_recordings_ops sq_recordings_ops;
extern const store_subs_ops sq_subs_ops;
extern const store_backup_ops sq_backup_ops;
extern const store_copy_ops sq_copy_ops;

#endif

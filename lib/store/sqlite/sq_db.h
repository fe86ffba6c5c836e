/* db: opening the SQLite database the way every dstream process must.
 *
 * WAL mode, a busy timeout, foreign keys off (the log keeps its own invariants),
 * synchronous=FULL unless told otherwise, and the numbered migrations of sql/sqlite/
 * applied in order inside one write transaction and recorded in schema_version. */
#ifndef DSTREAM_DB_H
#define DSTREAM_DB_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

typedef struct db_opts {
    int synchronous_full;    /* 1: FULL (acknowledged = durable), 0: NORMAL */
    int busy_timeout_ms;
    int migrate;             /* apply pending migrations at open */
    int cache_kib;           /* the page cache's size; 0: SQLite's default */
} db_opts;

/* Defaults: FULL, 5000 ms, migrate. */
void db_opts_default(db_opts *o);

/* Open (creating if needed) the database at path. Returns 0 and *out, or -1 with a
 * message in err. The caller owns *out (sqlite3_close_v2). */
int db_open(const char *path, const db_opts *o, sqlite3 **out, char *err, size_t errlen);

/* Cap the database file at max_bytes (> 0) for this connection (PRAGMA
 * max_page_count): a write that would grow it further fails with SQLITE_FULL.
 * Every connection that writes must set it. Returns 0, or -1 with err. */
int db_cap(sqlite3 *db, int64_t max_bytes, char *err, size_t errlen);

/* Apply pending migrations. Returns the schema version reached, or -1 with err. */
int db_migrate(sqlite3 *db, char *err, size_t errlen);

/* Where a fork's hash chain starts (lib/chain.h): the digest of message seq of the
 * chain that stream p begins (p, then its ancestors: the first whose fork point is
 * at or below seq stores it) into out, with anc ("SELECT parent, fork_seq FROM
 * streams WHERE id = ?") and dig ("SELECT digest FROM messages WHERE stream = ?
 * AND seq = ?") prepared by the caller. 0, or -1 when that message has no digest
 * (out zeros then). */
int db_chain_start(sqlite3_stmt *anc, sqlite3_stmt *dig, int64_t p, int64_t seq, uint8_t out[32]);

/* The highest migration compiled into this binary. */
int db_schema_version(void);

/* The VFS that writes a commit's WAL frames with one system call (sq_vfs.c): its
 * name once registered (the first call registers it), or NULL when the system's
 * VFS is not one it can wrap; and how many writes reached a -wal file through it
 * in this process (for the tests). */
#define SQ_VFS_NAME "dstream-gather"
const char *sq_vfs_name(void);
unsigned long long sq_vfs_wal_writes(void);

#endif

/* dbcopy: a whole database copied to another, between engines (SQLite to
 * PostgreSQL and back) or on one, then verified (dstream copy).
 *
 * What is copied is what dstream keeps (lib/store.h, store_copy_tables): streams
 * with everything they carry (path, content type, TTL and expiry, closed, fork
 * parent and fork point, the soft-deleted ones forks still read, Stream-Seq),
 * every message with its offsets as they were (seq, byte position, the append it
 * came in), producers' state, sessions and their snapshots, agents, every version
 * of every workflow, tokens (their hashes: no secret is anywhere to copy),
 * recordings with their chunks, subscriptions with their links, cursors and wake
 * state, and the webhook signing keys. Rows go over raw, ids included, so that
 * every offset, ETag and cursor reads the same on the copy. Not copied: the state
 * of running processes (runner leases, owner locks and figures), which the
 * processes started on the copy make again.
 *
 * The copy reads the source in one read transaction (one snapshot; writers may go
 * on, though a copy for a move is best taken with the servers stopped) and writes
 * the destination in one write transaction: a copy that fails leaves the
 * destination as it was. A destination that holds any row is refused.
 *
 * The verification: a summary of each side, taken in one read transaction each
 * (the source's while it is copied, so both describe the same snapshot): rows
 * per table, a SHA-256 over each table's rows in key order, and per stream a
 * SHA-256 over its messages in order (seq, position, append and bytes of each).
 * The first difference, in table order (a stream's messages before the table's
 * rows; for streams, the first stream whose row differs), is named. */
#ifndef DSTREAM_DBCOPY_H
#define DSTREAM_DBCOPY_H

#include <stddef.h>
#include <stdint.h>

#include "errs.h"
#include "sha256.h"

#define DBCOPY_TABLES 13        /* lib/store.h's STORE_COPY_TABLES */

/* One stream as the verification sees it. */
typedef struct dbcopy_stream {
    int64_t id;
    char *path;
    uint8_t row[SHA256_LEN];    /* of its row in streams */
    int64_t messages;
    sha256_ctx ctx;             /* while messages are added */
    uint8_t digest[SHA256_LEN]; /* of its messages in order, once finished */
} dbcopy_stream;

/* What the verification compares: one side's rows, digests and streams. */
typedef struct dbcopy_summary {
    int64_t rows[DBCOPY_TABLES];
    sha256_ctx ctx[DBCOPY_TABLES];
    uint8_t digest[DBCOPY_TABLES][SHA256_LEN];
    dbcopy_stream *streams;     /* by id */
    size_t nstreams, cap;
    int finished;
} dbcopy_summary;

/* The name of table i (0 .. DBCOPY_TABLES - 1), as the databases spell it. */
const char *dbcopy_table_name(int i);

void dbcopy_summary_init(dbcopy_summary *s);
/* Close the digests (after the last row). */
void dbcopy_summary_finish(dbcopy_summary *s);
void dbcopy_summary_free(dbcopy_summary *s);

/* Compare the summary of a source with its copy's (both finished): 0 when they
 * agree, else 1 with the first difference described in diff (e.g. "stream a/b:
 * 3 messages, 2 in the copy", "table tokens: its rows differ"). */
int dbcopy_compare(const dbcopy_summary *src, const dbcopy_summary *dst, char *diff, size_t cap);

/* Progress of a copy, for the impatient: called every DBCOPY_PROGRESS_ROWS rows
 * of a table and once at its end (done 1). */
#define DBCOPY_PROGRESS_ROWS 10000
typedef void (*dbcopy_progress_fn)(void *ud, const char *table, int64_t rows, int done);

/* Copy the database at target from to the one at target to (created if it is a
 * file path that does not exist; migrated to this build's schema either way),
 * then verify it. Returns 0 with *rows (may be NULL) filled, the rows copied per
 * table, or DBCOPY_E* with err: DBCOPY_EOPEN (a database would not open, or from
 * does not exist), DBCOPY_ENOTEMPTY (err names a table of to that has rows),
 * DBCOPY_EFAIL (nothing written to to), DBCOPY_EDIFF (the copy was written and
 * differs: err names the first difference). progress may be NULL. */
int dbcopy_run(const char *from, const char *to, dbcopy_progress_fn progress, void *ud,
               int64_t rows[DBCOPY_TABLES], char *err, size_t errlen);

/* Verify only: summarize both databases and compare them. 0, DBCOPY_EDIFF with
 * the first difference in err, or DBCOPY_EOPEN / DBCOPY_EFAIL. */
int dbcopy_verify(const char *from, const char *to, char *err, size_t errlen);

#endif

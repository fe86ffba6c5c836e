/* backup: a consistent copy of a live database, its restore, and the integrity
 * check of one.
 *
 * Each works on a database target (a file path or a URI, as DSTREAM_DB or --db
 * give it), through the engine store_engine_for(target) picks (lib/store.h, area
 * `backup`); nothing here knows which engine it is.
 *
 * The copy is the database as of one commit, taken while writers of every process
 * go on: the SQLite engine uses SQLite's online backup API in a single step, so the
 * source is read in one read transaction and, in WAL mode, writers only append to
 * the -wal file meanwhile; nothing waits while that transaction is open. The engine
 * writes the copy to a temporary file next to the destination; this module syncs
 * and renames it into place, so a destination either is a whole backup or is not
 * there, and is never written over.
 *
 * The restore copies a backup over the database in one write transaction, then
 * opens it as every program does (migrations applied).
 *
 * The check runs the engine's own integrity check (SQLite's integrity_check) and
 * then the log's invariants, which the engine states in its query language: each
 * stream's messages are contiguous from its fork point to its tail, each message's
 * byte position follows from the one before it, every fork's parent exists and
 * holds the fork point, no message or producer row is orphaned, every live session
 * has its stream, and every snapshot sits on a message boundary of its session's
 * stream. Then every stream's hash chain (lib/chain.h) is recomputed from its rows
 * and a stream's first broken link named. Then every snapshot is compared with a
 * replay: the engine walks each session stream (backup_walk: the stream, its own
 * messages in order, each snapshot as the walk passes its position) and this module
 * folds its events once (lib/sstore sstore_fold, as views are computed), from the
 * start or, for a fork, from its fork-point snapshot, and compares each snapshot as
 * the fold passes its position; a fork's fork-point snapshot is compared in its
 * parent's fold. A difference is reported with the session, the position and the
 * first key that differs. Linear in the log: each message is read once, and only up
 * to its stream's last snapshot. */
#ifndef DSTREAM_BACKUP_H
#define DSTREAM_BACKUP_H

#include <stddef.h>
#include <stdint.h>

#include "errs.h"

typedef struct backup_info {
    int64_t streams;            /* streams in the copy */
    int64_t messages;           /* messages in the copy */
    int64_t rev;                /* the change counter it was taken at (0 if the engine has none) */
    int64_t bytes;              /* size of the copy */
    int pages;                  /* database pages copied (0 if the engine has none) */
} backup_info;

/* Each function below fails with a code of lib/errs.h and a message in err:
 * BACKUP_ENODB, the target names no database (err "TARGET: no such database");
 * BACKUP_EOPEN, the database could not be opened (err "TARGET: reason"); or
 * BACKUP_EFAIL, the work itself failed. */

/* Copy the database at target to the file dest (which must not exist). Returns 0
 * and fills *bi (may be NULL), or BACKUP_E* with no dest left behind. */
int backup_copy(const char *target, const char *dest, backup_info *bi, char *err, size_t errlen);

/* Copy the backup file from over the database at target (created if needed), then
 * migrate it. Check the backup first (backup_check); stop the servers first. Returns
 * 0 or BACKUP_E*. */
int backup_restore(const char *target, const char *from, char *err, size_t errlen);

/* Called once per problem found, with a one-line description. */
typedef void (*backup_report_fn)(void *ud, const char *problem);

/* Check the database at target as it is (no migration): the engine's integrity
 * check, the log's invariants and the snapshots against a replay; at most `limit`
 * reports per kind of problem. Returns the number of problems found (0: sound), or
 * BACKUP_E* if the check itself could not run. */
int backup_check(const char *target, int limit, backup_report_fn report, void *ud, char *err, size_t errlen);

/* The walk an engine's check gives this module, inside the same read transaction
 * as its rules, for every session stream ("sessions/ID", deleted ones too) in the
 * order they were created:
 *  - stream: it begins. fork: it is a fork, of fork_seq messages of its parent,
 *    and fork_view is its own snapshot at fork_seq (NULL if there is none); deleted:
 *    the session was deleted (its stream kept for its forks). Returns 0 to walk it,
 *    1 to skip to the next stream.
 *  - message: its own messages in order of seq from its fork point (0 if it is no
 *    fork), each delivered before any snapshot at a later position, and none after
 *    its last snapshot. Returns 0 for more, 1 when no more are wanted (the rest of
 *    the stream's snapshots are still delivered).
 *  - snapshot: in order of position (then session), its own snapshots after its
 *    fork point (via ""), and the fork-point snapshots of the live session streams
 *    forked from it (via: the fork's stream path). */
typedef struct backup_walk {
    int (*stream)(void *ud, const char *session, int fork, int64_t fork_seq, const char *fork_view, int deleted);
    int (*message)(void *ud, int64_t seq, int64_t pos, const void *data, size_t len);
    void (*snapshot)(void *ud, const char *session, int64_t seq, const char *text, const char *via);
    void *ud;
} backup_walk;

#endif

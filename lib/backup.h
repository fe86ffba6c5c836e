/* backup: a consistent copy of a live database, and the integrity check of one.
 *
 * The copy uses SQLite's online backup API in a single step: the source is read in
 * one read transaction, so the copy is the database as of one commit, and in WAL
 * mode writers of every process go on meanwhile (they only append to the -wal
 * file). Nothing waits while that transaction is open. The copy is written to a
 * temporary file next to the destination, synced and renamed into place, so a
 * destination either is a whole backup or is not there.
 *
 * The check runs SQLite's integrity_check and then the log's own invariants:
 * each stream's messages are contiguous from its fork point to its tail, each
 * message's byte position follows from the one before it, every fork's parent
 * exists and holds the fork point, no message or producer row is orphaned, every
 * live session has its stream, and every snapshot sits on a message boundary of
 * its session's stream. Then every snapshot is compared with a replay: each
 * session stream's own events are folded once (lib/sstore sstore_fold, as views
 * are computed), from the start or, for a fork, from its fork-point snapshot, and
 * each snapshot is compared as the fold passes its position; a fork's fork-point
 * snapshot is compared in its parent's fold. A difference is reported with the
 * session, the position and the first key that differs. Linear in the log: each
 * message is read once, and only up to its stream's last snapshot. */
#ifndef DSTREAM_BACKUP_H
#define DSTREAM_BACKUP_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

typedef struct backup_info {
    int64_t streams;            /* rows of streams in the copy */
    int64_t messages;           /* rows of messages in the copy */
    int64_t rev;                /* the change counter it was taken at (streams.rev) */
    int64_t bytes;              /* size of the copy */
    int pages;                  /* database pages copied */
} backup_info;

/* Copy the database open on src to the file dest (which must not exist). Returns 0
 * and fills *bi (may be NULL), or -1 with a message in err and no dest left behind. */
int backup_copy(sqlite3 *src, const char *dest, backup_info *bi, char *err, size_t errlen);

/* Called once per problem found, with a one-line description. */
typedef void (*backup_report_fn)(void *ud, const char *problem);

/* Check db (integrity_check, the log's invariants and the snapshots against a
 * replay; at most `limit` reports per kind of problem). Returns the number of problems found (0: sound), or -1 if the
 * check itself could not run (message in err). */
int backup_check(sqlite3 *db, int limit, backup_report_fn report, void *ud, char *err,
                 size_t errlen);

#endif

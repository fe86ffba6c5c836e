/* memtrim: when the runner gives back to the system the memory a burst of sessions
 * left free. glibc keeps what is freed for the next allocations; after 2,000
 * streaming sessions end, that was ten times the runner's idle size, kept for good.
 * The loop tells memtrim_due how many sessions it looks after (its list: those with
 * a request in flight or anything else in memory, parked ones aside) each turn;
 * once that count has fallen to a quarter of a peak of MEMTRIM_MIN or more since
 * the last trim, and once more when it reaches none, it says to trim (malloc_trim:
 * the free pages go back), and the peak starts again from there. A steady load
 * never trims; a burst's end trims a few times (a quarter, a sixteenth, ..., none). */
#ifndef DSTREAM_RUNNER_MEMTRIM_H
#define DSTREAM_RUNNER_MEMTRIM_H

#include <stddef.h>

#include "../lib/log.h"

#define MEMTRIM_MIN 16      /* a burst smaller than this leaves too little to trim */

typedef struct memtrim {
    size_t peak;            /* most sessions looked after since the last trim */
    int burst;              /* a peak of MEMTRIM_MIN or more was seen: trim once more at none */
} memtrim_t;

/* active: the sessions looked after now. 1 when it is time to trim. */
int memtrim_due(memtrim_t *m, size_t active);

/* memtrim_due, and the trim when it is due: what c keeps (log_release_memory:
 * SQLite's page cache, PostgreSQL's grown libpq buffers; c may be NULL), then what
 * glibc keeps free (malloc_trim). Returns 1 if it trimmed. */
int memtrim_turn(memtrim_t *m, size_t active, log_conn_t *c);

#endif

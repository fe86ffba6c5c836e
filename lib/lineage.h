/* lineage: the tree of forks around a session, and where two sessions (or two
 * positions of them) part.
 *
 * A fork records its parent in its row (sessions.parent, fork_offset: the parent's
 * position it forked at) and in its first own event (session:forked {from, at}); its
 * stream shares the parent's messages before that position, at the same offsets. The
 * tree is read from the rows, walked up to the root and then down from it, bounded.
 *
 * The diff compares the two event histories one event after the other from the
 * start, after skipping what the two streams store once for both (their histories
 * before the fork point of the nearest ancestor they share: the same bytes), and
 * compares the two folded views (lib/sstore) path by path (lib/jdiff). */
#ifndef DSTREAM_LINEAGE_H
#define DSTREAM_LINEAGE_H

#include <jansson.h>

#include "log.h"

#define LINEAGE_LIMIT_DEFAULT 200   /* sessions a lineage looks at */
#define LINEAGE_LIMIT_MAX 1000
#define LINEAGE_DEPTH_MAX 1000      /* ancestors a diff walks to find what two sessions share */
#define LINEAGE_SCAN_DEFAULT 10000  /* events a diff compares past the shared history */
#define LINEAGE_CONTEXT_DEFAULT 3   /* events shown on each side after the agreement */
#define LINEAGE_CONTEXT_MAX 20
#define LINEAGE_PATHS_MAX 200       /* state paths a diff lists */
#define LINEAGE_VALUE_MAX 4096      /* bytes of JSON of one value a diff shows */

/* May the caller read session id? (The HTTP side's scope check.) */
typedef int (*lineage_readable_fn)(void *ud, const char *id);

/* The lineage of session id (a live session) as JSON, a new reference in *out:
 * {"id", "root": NODE, "sessions": N shown, "limit", "truncated"}, where NODE is
 * {"id", "status", "agent", "workflow", "createdAt", "forkedAt" (the parent's
 * offset it forked at, or null), "forkedAtEvent" (how many of the parent's events it
 * kept), "deleted" (only when true), "truncated" (only when its forks were not all
 * looked at), "children": [NODE...] (oldest first)}; a session readable() refuses is
 * {"hidden": true, "children": [...]} with nothing of its own; a hidden or deleted
 * one is left out when nothing below it is shown. At most limit sessions (hidden ones included) are looked
 * at. Returns 0, LOG_ENOTFOUND (id is no live session), or LOG_E*. */
int lineage_tree(log_conn_t *c, const char *id, int limit, lineage_readable_fn readable, void *ud, json_t **out);

typedef struct lineage_diff_req {
    const char *a, *b;             /* session ids (may be the same) */
    int has_at_a, has_at_b;        /* compare up to these positions, else the tails */
    offset_t at_a, at_b;
    int context;                   /* events shown on each side after the agreement */
    size_t scan;                   /* events compared at most past the shared history */
    /* out, on failure: which side ('a' or 'b') the error is about */
    char side;
} lineage_diff_req;

/* Where sessions a and b agree and how they differ, a new reference in *out:
 * {"a": SIDE, "b": SIDE, "shared", "compared", "truncated", "same", "state":
 * {"changes": [{"path", "before"|"beforeBytes", "after"|"afterBytes"}], "truncated"}}
 * with SIDE {"id", "at" (the position compared up to), "until" (the position of its
 * first event after the agreement, or "at"), "first": [its first events after the
 * agreement, offset added, at most context]}; docs/events.md says what agreeing is.
 * Returns 0, LOG_ENOTFOUND, LOG_ERANGE (a position beyond the session's events),
 * LOG_EOFFSET (not a position of that session), or LOG_E*, with q->side set. */
int lineage_diff(log_conn_t *c, lineage_diff_req *q, json_t **out);

#endif

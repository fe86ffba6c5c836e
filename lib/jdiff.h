/* jdiff: where two JSON values first differ, as a path ("messages[2].content",
 * "usage.outputTokens"). Objects are walked by key in sorted order (keys of either
 * side), arrays by index; an absent value differs from any present one. Used to name
 * a recording's differing field (lib/recorder) and a snapshot's differing key
 * (lib/backup); and every difference, for the state diff of two sessions (lib/lineage). */
#ifndef DSTREAM_JDIFF_H
#define DSTREAM_JDIFF_H

#include <jansson.h>

#include "buf.h"

/* Walk a and b (either may be NULL: absent) together. At the first difference,
 * append its path to path (after what path already holds, with a "." between keys)
 * and return 1 with the two values there in *da and *db (borrowed; NULL if absent);
 * 0 if they are equal (path left as it was). */
int jdiff(const json_t *a, const json_t *b, buf_t *path, const json_t **da, const json_t **db);

/* Walk every difference of a and b, in jdiff's order (keys sorted, arrays by index,
 * down to the values that differ: an absent side, another type, another scalar):
 * fn(ud, path, da, db) for each, path NUL-terminated (path's bytes after what it held
 * before the call; restored after), da and db borrowed, NULL if absent. Stops when fn
 * returns nonzero and returns that value; 0 when walked. A path that would not fit
 * path's ceiling stops the walk with BUF_ETOOBIG. */
int jdiff_each(const json_t *a, const json_t *b, buf_t *path,
               int (*fn)(void *ud, const char *path, const json_t *da, const json_t *db), void *ud);

#endif

/* jdiff: where two JSON values first differ, as a path ("messages[2].content",
 * "usage.outputTokens"). Objects are walked by key in sorted order (keys of either
 * side), arrays by index; an absent value differs from any present one. Used to name
 * a recording's differing field (lib/recorder) and a snapshot's differing key
 * (lib/backup). */
#ifndef DSTREAM_JDIFF_H
#define DSTREAM_JDIFF_H

#include <jansson.h>

#include "buf.h"

/* Walk a and b (either may be NULL: absent) together. At the first difference,
 * append its path to path (after what path already holds, with a "." between keys)
 * and return 1 with the two values there in *da and *db (borrowed; NULL if absent);
 * 0 if they are equal (path left as it was). */
int jdiff(const json_t *a, const json_t *b, buf_t *path, const json_t **da, const json_t **db);

#endif

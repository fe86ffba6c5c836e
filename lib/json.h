/* json: a strict RFC 8259 validator that keeps the client's bytes.
 *
 * JSON-mode streams store each message exactly as the client wrote it, so this
 * module never builds a tree: it checks a text and reports the byte spans of the
 * elements of a top-level array, which an append flattens into one message each. */
#ifndef DSTREAM_JSON_H
#define DSTREAM_JSON_H

#include <stddef.h>

#include "errs.h"

#define JSON_MAX_DEPTH 512


typedef struct json_span {
    size_t off;
    size_t len;
} json_span;

/* Called once per element of a top-level array (or once for a non-array value,
 * with is_array 0). Return non-zero to stop; that value is returned. */
typedef int (*json_span_fn)(void *ud, const char *p, size_t len);

/* Validate s[0..len) as one JSON text (surrounding whitespace allowed).
 * Returns 0, JSON_EINVAL or JSON_EDEPTH; *errpos, if not NULL, gets the byte offset
 * of the first error. */
int json_validate(const char *s, size_t len, size_t *errpos);

/* Validate s and call fn for each message it holds: each element of a top-level
 * array (trimmed of whitespace), or the whole value (trimmed) when it is not an
 * array. *is_array tells which. Returns 0, a JSON_E* code, or fn's non-zero value. */
int json_messages(const char *s, size_t len, int *is_array, json_span_fn fn, void *ud,
                  size_t *errpos);

#endif

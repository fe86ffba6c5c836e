/* buf: a growable byte buffer with a ceiling.
 *
 * Every buffer that grows with client input has a maximum size (curl's dynbuf
 * "toobig"): an append that would cross it fails with BUF_ETOOBIG and leaves the
 * buffer as it was, so a caller never sees half-valid state. */
#ifndef DSTREAM_BUF_H
#define DSTREAM_BUF_H

#include <stddef.h>
#include <stdarg.h>

#include "errs.h"


typedef struct buf {
    char *p;      /* always NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
    size_t max;   /* ceiling on len; 0 means SIZE_MAX */
} buf_t;

/* Initialise an empty buffer that may grow to max bytes (0: unbounded). */
void buf_init(buf_t *b, size_t max);
/* Free the memory and leave the buffer empty and reusable. */
void buf_free(buf_t *b);
/* Drop the contents, keep the memory. */
void buf_reset(buf_t *b);
/* Append len bytes. Returns 0, BUF_ETOOBIG or BUF_ENOMEM (buffer unchanged). */
int buf_append(buf_t *b, const void *data, size_t len);
/* Append a NUL-terminated string. */
int buf_puts(buf_t *b, const char *s);
/* Append formatted text (snprintf rules). */
int buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(buf_t *b, const char *fmt, va_list ap);
/* Append s as the body of a JSON string literal (no quotes), escaping as needed; a
 * byte that starts no well-formed UTF-8 sequence becomes \ufffd (lib/utf8). */
int buf_json_escape(buf_t *b, const char *s, size_t len);
/* Make room for at least n more bytes. */
int buf_reserve(buf_t *b, size_t n);

#endif

/* offset: the opaque, fixed-width, sortable positions the server mints.
 *
 * An offset names a boundary between messages: the number of messages before it
 * and their total size in bytes, each as 16 zero-padded decimal digits joined by
 * '_' ("0000000000000002_0000000000000017"). Fixed width makes the strings sort
 * as the positions do, so clients may compare them; the byte count lets a reader
 * see progress without a request. Clients must treat offsets as opaque. */
#ifndef DSTREAM_OFFSET_H
#define DSTREAM_OFFSET_H

#include <stdint.h>
#include <stddef.h>

#define OFFSET_LEN 33               /* without the NUL */
#define OFFSET_MAX 9999999999999999ULL

typedef struct offset {
    uint64_t seq;   /* messages before this position */
    uint64_t pos;   /* bytes before this position */
} offset_t;

typedef enum {
    OFFSET_AT,      /* a minted position */
    OFFSET_START,   /* "-1": the beginning of the stream */
    OFFSET_NOW      /* "now": the current tail */
} offset_kind;

/* Format o into out (at least OFFSET_LEN + 1 bytes). */
void offset_format(offset_t o, char *out);
/* Parse a client-supplied offset: "-1", "now" or a minted position.
 * Returns 0 and fills *kind and *o, or -1 when s is not one of those. */
int offset_parse(const char *s, size_t len, offset_kind *kind, offset_t *o);

#endif

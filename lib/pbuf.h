/* pbuf: a small Protocol Buffers encoder (the wire format only) over lib/buf.
 *
 * Enough for OTLP/HTTP (lib/otlp): varints, 64-bit and 32-bit fixed fields,
 * length-delimited fields (strings, bytes) and nested messages. A nested message
 * is written in place: pbuf_open writes its tag and reserves the longest length
 * prefix a message may need (5 bytes: lengths below 2^32), pbuf_close writes the
 * real length and moves the body down over the unused bytes. Nothing is written
 * past the buffer's ceiling (buf_t's max): the first failure sticks in pb->err,
 * every later call does nothing, and the caller looks at err once at the end. */
#ifndef DSTREAM_PBUF_H
#define DSTREAM_PBUF_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Wire types. */
enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

#define PBUF_VARINT_MAX 10      /* bytes of the longest varint (a uint64) */
#define PBUF_LEN_MAX 0xffffffffu /* longest nested message or field body */

typedef struct pbuf {
    buf_t *b;
    int err;                    /* 0, BUF_ENOMEM, or BUF_ETOOBIG (over the ceiling, a field too long) */
} pbuf_t;

/* Write into b (appended to what it holds). */
void pbuf_init(pbuf_t *pb, buf_t *b);
/* v as a varint into out (at least PBUF_VARINT_MAX bytes): its length. */
size_t pbuf_varint_encode(uint64_t v, unsigned char *out);
/* A raw varint, and a field's tag (field number, wire type). */
void pbuf_varint(pbuf_t *pb, uint64_t v);
void pbuf_tag(pbuf_t *pb, uint32_t field, int wire);
/* Fields. uint64 / int64 / enum / bool are varints (int64 as its two's
 * complement, ten bytes when negative, as protobuf writes int64). */
void pbuf_uint64(pbuf_t *pb, uint32_t field, uint64_t v);
void pbuf_int64(pbuf_t *pb, uint32_t field, int64_t v);
void pbuf_bool(pbuf_t *pb, uint32_t field, int v);
void pbuf_fixed64(pbuf_t *pb, uint32_t field, uint64_t v);
void pbuf_fixed32(pbuf_t *pb, uint32_t field, uint32_t v);
void pbuf_double(pbuf_t *pb, uint32_t field, double v);
void pbuf_bytes(pbuf_t *pb, uint32_t field, const void *p, size_t n);
void pbuf_string(pbuf_t *pb, uint32_t field, const char *s);
/* A nested message: the mark pbuf_open returns goes to its pbuf_close. */
size_t pbuf_open(pbuf_t *pb, uint32_t field);
void pbuf_close(pbuf_t *pb, size_t mark);

#endif

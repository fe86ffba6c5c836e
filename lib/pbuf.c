/* pbuf: the Protocol Buffers wire format, written (pbuf.h). */
#include "pbuf.h"

#include <string.h>

#define LEN_RESERVED 5          /* a length below 2^32 fits in 5 varint bytes */

void pbuf_init(pbuf_t *pb, buf_t *b)
{
    pb->b = b;
    pb->err = 0;
}

size_t pbuf_varint_encode(uint64_t v, unsigned char *out)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (unsigned char)v;
    return n;
}

static void put(pbuf_t *pb, const void *p, size_t n)
{
    if (pb->err) return;
    int rc = buf_append(pb->b, p, n);
    if (rc) pb->err = rc;
}

void pbuf_varint(pbuf_t *pb, uint64_t v)
{
    unsigned char tmp[PBUF_VARINT_MAX];
    put(pb, tmp, pbuf_varint_encode(v, tmp));
}

void pbuf_tag(pbuf_t *pb, uint32_t field, int wire)
{
    pbuf_varint(pb, ((uint64_t)field << 3) | (uint64_t)(wire & 7));
}

void pbuf_uint64(pbuf_t *pb, uint32_t field, uint64_t v)
{
    pbuf_tag(pb, field, PB_VARINT);
    pbuf_varint(pb, v);
}

void pbuf_int64(pbuf_t *pb, uint32_t field, int64_t v)
{
    pbuf_uint64(pb, field, (uint64_t)v);
}

void pbuf_bool(pbuf_t *pb, uint32_t field, int v)
{
    pbuf_uint64(pb, field, v ? 1 : 0);
}

void pbuf_fixed64(pbuf_t *pb, uint32_t field, uint64_t v)
{
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(v >> (8 * i));
    pbuf_tag(pb, field, PB_I64);
    put(pb, le, 8);
}

void pbuf_fixed32(pbuf_t *pb, uint32_t field, uint32_t v)
{
    unsigned char le[4];
    for (int i = 0; i < 4; i++) le[i] = (unsigned char)(v >> (8 * i));
    pbuf_tag(pb, field, PB_I32);
    put(pb, le, 4);
}

void pbuf_double(pbuf_t *pb, uint32_t field, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    pbuf_fixed64(pb, field, u);
}

void pbuf_bytes(pbuf_t *pb, uint32_t field, const void *p, size_t n)
{
    if (n > PBUF_LEN_MAX) {
        if (!pb->err) pb->err = BUF_ETOOBIG;
        return;
    }
    pbuf_tag(pb, field, PB_LEN);
    pbuf_varint(pb, n);
    if (n) put(pb, p, n);
}

void pbuf_string(pbuf_t *pb, uint32_t field, const char *s)
{
    pbuf_bytes(pb, field, s, strlen(s));
}

size_t pbuf_open(pbuf_t *pb, uint32_t field)
{
    static const unsigned char zero[LEN_RESERVED];
    pbuf_tag(pb, field, PB_LEN);
    size_t mark = pb->b->len;
    put(pb, zero, LEN_RESERVED);
    return mark;
}

void pbuf_close(pbuf_t *pb, size_t mark)
{
    if (pb->err) return;
    if (mark + LEN_RESERVED > pb->b->len) {
        pb->err = BUF_ETOOBIG;   /* not a mark of this buffer */
        return;
    }
    size_t body = pb->b->len - mark - LEN_RESERVED;
    if (body > PBUF_LEN_MAX) {
        pb->err = BUF_ETOOBIG;
        return;
    }
    unsigned char tmp[PBUF_VARINT_MAX];
    size_t n = pbuf_varint_encode(body, tmp);
    char *at = pb->b->p + mark;
    memmove(at + n, at + LEN_RESERVED, body);
    memcpy(at, tmp, n);
    pb->b->len -= LEN_RESERVED - n;
    pb->b->p[pb->b->len] = '\0';
}

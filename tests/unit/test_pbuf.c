/* Unit tests for lib/pbuf.c: the Protocol Buffers wire format against encodings
 * from the protobuf documentation, nested lengths across the varint boundaries,
 * and the buffer's ceiling. */
#include "pbuf.h"

#include <string.h>

#include "test.h"

#define CHECK_BYTES(b, lit) CHECK_MEM((b)->p, (b)->len, lit, sizeof lit - 1)

static void test_varints(void)
{
    struct {
        uint64_t v;
        const char *enc;
        size_t n;
    } cases[] = {
        {0, "\x00", 1},
        {1, "\x01", 1},
        {127, "\x7f", 1},
        {128, "\x80\x01", 2},
        {150, "\x96\x01", 2},
        {300, "\xac\x02", 2},
        {16383, "\xff\x7f", 2},
        {16384, "\x80\x80\x01", 3},
        {0xffffffffu, "\xff\xff\xff\xff\x0f", 5},
        {UINT64_MAX, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char out[PBUF_VARINT_MAX];
        size_t n = pbuf_varint_encode(cases[i].v, out);
        CHECK_MEM(out, n, cases[i].enc, cases[i].n);
    }
}

static void test_fields(void)
{
    buf_t b;
    pbuf_t pb;
    buf_init(&b, 0);
    pbuf_init(&pb, &b);
    /* The documentation's examples: field 1 = 150; field 2 = "testing". */
    pbuf_uint64(&pb, 1, 150);
    CHECK_BYTES(&b, "\x08\x96\x01");
    buf_reset(&b);
    pbuf_string(&pb, 2, "testing");
    CHECK_BYTES(&b, "\x12\x07testing");
    buf_reset(&b);
    /* int64 -1 is ten bytes; a bool; an empty string still has its tag. */
    pbuf_int64(&pb, 3, -1);
    pbuf_bool(&pb, 4, 7);
    pbuf_string(&pb, 5, "");
    CHECK_BYTES(&b, "\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x20\x01\x2a\x00");
    buf_reset(&b);
    /* fixed64 and fixed32 little-endian, a double's IEEE bytes. */
    pbuf_fixed64(&pb, 7, 0x0102030405060708ull);
    pbuf_fixed32(&pb, 16, 0x01020304u);
    pbuf_double(&pb, 4, 1.0);
    CHECK_BYTES(&b, "\x39\x08\x07\x06\x05\x04\x03\x02\x01"
                    "\x85\x01\x04\x03\x02\x01"
                    "\x21\x00\x00\x00\x00\x00\x00\xf0\x3f");
    buf_reset(&b);
    /* A field number past 15 takes a two-byte tag. */
    pbuf_bytes(&pb, 16, "\x00\xff", 2);
    CHECK_BYTES(&b, "\x82\x01\x02\x00\xff");
    CHECK_EQ_INT(pb.err, 0);
    buf_free(&b);
}

/* The documentation's nested example (field 3 holding field 1 = 150), then
 * nested bodies whose lengths need 1, 2 and 3 varint bytes, two levels deep. */
static void test_nested(void)
{
    buf_t b;
    pbuf_t pb;
    buf_init(&b, 0);
    pbuf_init(&pb, &b);
    size_t m = pbuf_open(&pb, 3);
    pbuf_uint64(&pb, 1, 150);
    pbuf_close(&pb, m);
    CHECK_BYTES(&b, "\x1a\x03\x08\x96\x01");
    buf_reset(&b);
    m = pbuf_open(&pb, 1);
    pbuf_close(&pb, m);
    CHECK_BYTES(&b, "\x0a\x00");
    size_t sizes[] = {0, 1, 125, 127, 128, 300, 16380, 16381, 16383, 16384, 70000};
    static char body[70000];
    memset(body, 'x', sizeof body);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        buf_reset(&b);
        size_t outer = pbuf_open(&pb, 2);
        size_t inner = pbuf_open(&pb, 1);
        pbuf_bytes(&pb, 9, body, sizes[i]);
        pbuf_close(&pb, inner);
        pbuf_uint64(&pb, 2, 5);
        pbuf_close(&pb, outer);
        CHECK_EQ_INT(pb.err, 0);
        /* Built by hand: bytes field, then inner, then outer. */
        buf_t want;
        pbuf_t wp;
        buf_init(&want, 0);
        pbuf_init(&wp, &want);
        buf_t f9, in;
        pbuf_t p9, pin;
        buf_init(&f9, 0);
        buf_init(&in, 0);
        pbuf_init(&p9, &f9);
        pbuf_init(&pin, &in);
        pbuf_bytes(&p9, 9, body, sizes[i]);
        pbuf_bytes(&pin, 1, f9.p, f9.len);
        pbuf_uint64(&pin, 2, 5);
        pbuf_bytes(&wp, 2, in.p, in.len);
        CHECK_MEM(b.p, b.len, want.p, want.len);
        buf_free(&want);
        buf_free(&f9);
        buf_free(&in);
    }
    buf_free(&b);
}

/* A ceiling: the first write past it sticks as the error, nothing is written
 * after, and the buffer never holds more than its ceiling. */
static void test_ceiling(void)
{
    buf_t b;
    pbuf_t pb;
    buf_init(&b, 16);
    pbuf_init(&pb, &b);
    size_t m = pbuf_open(&pb, 1);
    pbuf_string(&pb, 2, "0123456789");
    CHECK_EQ_INT(pb.err, BUF_ETOOBIG);
    size_t len = b.len;
    pbuf_uint64(&pb, 3, 1);
    pbuf_close(&pb, m);
    CHECK_EQ_INT(pb.err, BUF_ETOOBIG);
    CHECK_EQ_UINT(b.len, len);
    CHECK(b.len <= 16);
    buf_free(&b);
    /* Exactly at the ceiling is fine. */
    buf_init(&b, 5);
    pbuf_init(&pb, &b);
    pbuf_string(&pb, 1, "abc");
    CHECK_EQ_INT(pb.err, 0);
    CHECK_BYTES(&b, "\x0a\x03" "abc");
    buf_free(&b);
    /* A close whose mark is past the end is refused, not followed. */
    buf_init(&b, 0);
    pbuf_init(&pb, &b);
    pbuf_close(&pb, 100);
    CHECK_EQ_INT(pb.err, BUF_ETOOBIG);
    buf_free(&b);
}

int main(void)
{
    test_varints();
    test_fields();
    test_nested();
    test_ceiling();
    return TEST_MAIN_END();
}

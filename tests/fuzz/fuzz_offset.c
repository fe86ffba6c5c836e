/* libFuzzer harness for lib/offset.c.
 *
 * Invariants checked on every input:
 *  - offset_parse accepts exactly "-1", "now" and minted offsets, and for a minted
 *    one offset_format(parse(x)) == x, byte for byte;
 *  - read as two numbers, the input's first 16 bytes format to a 33-character
 *    offset that parses back to the same numbers, and two such offsets compare as
 *    strings the way they compare as numbers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offset.h"

#define REQUIRE(cond) \
    do { \
        if (!(cond)) abort(); \
    } while (0)

static int cmp(offset_t a, offset_t b)
{
    if (a.seq != b.seq) return a.seq < b.seq ? -1 : 1;
    if (a.pos != b.pos) return a.pos < b.pos ? -1 : 1;
    return 0;
}

static int sign(int v)
{
    return (v > 0) - (v < 0);
}

/* Format o, check the text, parse it back. */
static void round_trip(offset_t o, char *out)
{
    offset_kind kind;
    offset_t back;
    offset_format(o, out);
    REQUIRE(strlen(out) == OFFSET_LEN);
    REQUIRE(offset_parse(out, OFFSET_LEN, &kind, &back) == 0);
    REQUIRE(kind == OFFSET_AT && back.seq == o.seq && back.pos == o.pos);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    offset_kind kind = (offset_kind)-1;
    offset_t o = {123, 456};
    int rc = offset_parse(s, size, &kind, &o);
    REQUIRE(rc == 0 || rc == -1);
    if (rc == 0) {
        switch (kind) {
        case OFFSET_START:
            REQUIRE(size == 2 && memcmp(s, "-1", 2) == 0);
            break;
        case OFFSET_NOW:
            REQUIRE(size == 3 && memcmp(s, "now", 3) == 0);
            break;
        case OFFSET_AT: {
            char out[OFFSET_LEN + 1];
            REQUIRE(size == OFFSET_LEN);
            REQUIRE(o.seq <= OFFSET_MAX && o.pos <= OFFSET_MAX);
            offset_format(o, out);
            REQUIRE(memcmp(out, s, OFFSET_LEN) == 0);
            break;
        }
        default:
            REQUIRE(0);
        }
    } else if (size == OFFSET_LEN) {
        /* Rejected at the right length: some byte is not where a digit or the
         * underscore must be. */
        int shaped = s[16] == '_';
        for (int i = 0; i < OFFSET_LEN && shaped; i++)
            if (i != 16 && (s[i] < '0' || s[i] > '9')) shaped = 0;
        REQUIRE(!shaped);
    }

    if (size >= 16) {
        uint64_t v[2];
        memcpy(v, data, 16);
        offset_t a = {v[0] % (OFFSET_MAX + 1), v[1] % (OFFSET_MAX + 1)};
        offset_t b = {v[1] % (OFFSET_MAX + 1), v[0] % 1000};
        char sa[OFFSET_LEN + 1], sb[OFFSET_LEN + 1];
        round_trip(a, sa);
        round_trip(b, sb);
        REQUIRE(sign(strcmp(sa, sb)) == cmp(a, b));
    }
    return 0;
}

#include "offset.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* v as 16 decimal digits, zero-padded, at p (no NUL). */
static void digits16_put(char *p, uint64_t v)
{
    for (int i = 15; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

/* By hand rather than snprintf: every response and, with the hash chain, every
 * appended message formats one (a tenth of the instructions). */
void offset_format(offset_t o, char *out)
{
    if (o.seq > OFFSET_MAX || o.pos > OFFSET_MAX) {
        snprintf(out, OFFSET_LEN + 1, "%016" PRIu64 "_%016" PRIu64, o.seq, o.pos);
        return;
    }
    digits16_put(out, o.seq);
    out[16] = '_';
    digits16_put(out + 17, o.pos);
    out[OFFSET_LEN] = '\0';
}

static int digits16(const char *s, uint64_t *v)
{
    uint64_t n = 0;
    for (int i = 0; i < 16; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        n = n * 10 + (uint64_t)(s[i] - '0');
    }
    *v = n;
    return 0;
}

int offset_parse(const char *s, size_t len, offset_kind *kind, offset_t *o)
{
    o->seq = o->pos = 0;
    if (len == 2 && memcmp(s, "-1", 2) == 0) { *kind = OFFSET_START; return 0; }
    if (len == 3 && memcmp(s, "now", 3) == 0) { *kind = OFFSET_NOW; return 0; }
    if (len != OFFSET_LEN || s[16] != '_') return -1;
    if (digits16(s, &o->seq) || digits16(s + 17, &o->pos)) return -1;
    *kind = OFFSET_AT;
    return 0;
}

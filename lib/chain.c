#include "chain.h"

#include <string.h>

#include "sha256.h"

void chain_link(const uint8_t prev[CHAIN_LEN], offset_t at, const void *data, size_t len, uint8_t out[CHAIN_LEN])
{
    char off[OFFSET_LEN + 1];
    sha256_ctx c;
    offset_format(at, off);
    sha256_init(&c);
    sha256_update(&c, prev, CHAIN_LEN);
    sha256_update(&c, off, OFFSET_LEN);
    if (len) sha256_update(&c, data, len);
    sha256_final(&c, out);
}

void chain_hex(const uint8_t d[CHAIN_LEN], char out[CHAIN_HEX + 1])
{
    sha256_hex(d, CHAIN_LEN, out);
}

static int nibble(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

int chain_parse(const char *s, size_t n, uint8_t out[CHAIN_LEN])
{
    if (!s || n != CHAIN_HEX) return -1;
    for (size_t i = 0; i < CHAIN_LEN; i++) {
        int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

int chain_step(uint8_t prev[CHAIN_LEN], offset_t at, const void *data, size_t len, const uint8_t *stored)
{
    uint8_t want[CHAIN_LEN];
    chain_link(prev, at, data, len, want);
    int ok = stored && memcmp(stored, want, CHAIN_LEN) == 0;
    memcpy(prev, stored ? stored : want, CHAIN_LEN);
    return ok;
}

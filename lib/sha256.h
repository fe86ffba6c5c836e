/* sha256: the SHA-256 hash (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for token
 * hashes and anything else that needs a digest without pulling in a crypto
 * library. Not constant-time with respect to message length (nothing here needs it). */
#ifndef DSTREAM_SHA256_H
#define DSTREAM_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t len;          /* bytes hashed so far */
    uint8_t block[64];
    size_t used;           /* bytes in block */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
/* Write the 32-byte digest to out; c must be initialised again before reuse. */
void sha256_final(sha256_ctx *c, uint8_t out[SHA256_LEN]);
/* One-shot digest of data[0..n). */
void sha256(const void *data, size_t n, uint8_t out[SHA256_LEN]);
/* HMAC-SHA-256 of msg under key. */
void sha256_hmac(const void *key, size_t klen, const void *msg, size_t n, uint8_t out[SHA256_LEN]);
/* Which code computes the blocks: the CPU's SHA extensions (SHA-NI, x86-64) when it
 * has them, else portable C. on: 1 to use them when there, 0 for the portable code
 * (the tests compare both), -1 to ask. Returns 1 when the SHA extensions are in use. */
int sha256_fast(int on);
/* Lower-case hex of n bytes into out (2n+1 bytes with the NUL). */
void sha256_hex(const uint8_t *p, size_t n, char *out);
/* 1 if a[0..n) equals b[0..n), in time that depends on n only. */
int sha256_equal(const void *a, const void *b, size_t n);

#endif

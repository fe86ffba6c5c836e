/* sha256: the SHA-256 hash (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for token
 * hashes, the streams' hash chain (lib/chain.h) and anything else that needs a
 * digest, with a context on the stack. Each block is hashed by the CPU's SHA
 * extensions where it has them, else by libcrypto's block function (linked for
 * TLS and the webhooks' signatures already), or by portable code (the tests
 * compare the three). Not constant-time with respect to message length (nothing
 * here needs it). */
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
/* Which code computes the blocks. */
enum {
    SHA256_BY_C = 0,        /* the portable code here */
    SHA256_BY_CPU = 1,      /* the CPU's SHA extensions (SHA-NI, x86-64) */
    SHA256_BY_OPENSSL = 2   /* libcrypto's (its vector code; the CPU's extensions if there) */
};
/* Use which (SHA256_BY_*: the CPU's where it has none gives libcrypto's), or ask
 * (-1). The default: the CPU's where it has them, else libcrypto's. Returns the one
 * in use. */
int sha256_impl(int which);
/* Lower-case hex of n bytes into out (2n+1 bytes with the NUL). */
void sha256_hex(const uint8_t *p, size_t n, char *out);
/* 1 if a[0..n) equals b[0..n), in time that depends on n only. */
int sha256_equal(const void *a, const void *b, size_t n);

#endif

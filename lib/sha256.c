#include "sha256.h"

#include <string.h>

/* libcrypto's block function (SHA256_Transform: deprecated by OpenSSL 3 for its
 * EVP interface, which has no block function and allocates a context per digest). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void compress_c(sha256_ctx *c, const uint8_t *p)
{
    uint32_t w[64], a, b, cc, d, e, f, g, h;
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3];
    e = c->h[4], f = c->h[5], g = c->h[6], h = c->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g, g = f, f = e, e = d + t1;
        d = cc, cc = b, b = a, a = t1 + t2;
    }
    c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d;
    c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}

/* The SHA extensions of x86-64 (SHA-NI: sha256rnds2, sha256msg1/2), when the CPU has
 * them: about five times the portable code's speed, which the hash chain computes on
 * every append (lib/chain.h). The state is kept as the instructions want it (ABEF,
 * CDGH) during a block and put back in h[] after it; the message schedule runs four
 * words at a time in w[], group g's words from those of groups g-4 to g-1. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("sha,sse4.1,ssse3"))) static void compress_ni(sha256_ctx *c, const uint8_t *p)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&c->h[0]), 0xB1);      /* CDAB */
    __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&c->h[4]), 0x1B);     /* EFGH */
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                               /* ABEF */
    s1 = _mm_blend_epi16(s1, t, 0xF0);                                                    /* CDGH */
    __m128i abef = s0, cdgh = s1, w[4];
    for (int i = 0; i < 4; i++) w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
    for (int g = 0; g < 16; g++) {
        if (g >= 4) {
            /* w[g&3] holds group g-4's words, w[(g+1)&3] g-3's, w[(g+2)&3] g-2's, w[(g+3)&3] g-1's. */
            __m128i x = _mm_sha256msg1_epu32(w[g & 3], w[(g + 1) & 3]);
            x = _mm_add_epi32(x, _mm_alignr_epi8(w[(g + 3) & 3], w[(g + 2) & 3], 4));
            w[g & 3] = _mm_sha256msg2_epu32(x, w[(g + 3) & 3]);
        }
        __m128i m = _mm_add_epi32(w[g & 3], _mm_loadu_si128((const __m128i *)&K[4 * g]));
        s1 = _mm_sha256rnds2_epu32(s1, s0, m);
        s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0E));
    }
    s0 = _mm_add_epi32(s0, abef);
    s1 = _mm_add_epi32(s1, cdgh);
    t = _mm_shuffle_epi32(s0, 0x1B);                                                      /* FEBA */
    s1 = _mm_shuffle_epi32(s1, 0xB1);                                                     /* DCHG */
    _mm_storeu_si128((__m128i *)&c->h[0], _mm_blend_epi16(t, s1, 0xF0));                 /* DCBA */
    _mm_storeu_si128((__m128i *)&c->h[4], _mm_alignr_epi8(s1, t, 8));                    /* HGFE */
}

/* 1 if the CPU has SHA-NI, SSE4.1 and SSSE3 (CPUID leaf 7 EBX bit 29; leaf 1 ECX bits
 * 19 and 9). */
static int cpu_has_sha(void)
{
    unsigned a, b, cx, d;
    if (!__get_cpuid(1, &a, &b, &cx, &d) || !(cx & (1u << 19)) || !(cx & (1u << 9))) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &cx, &d)) return 0;
    return (b >> 29) & 1;
}
#define HAVE_SHA_NI 1
#else
#define HAVE_SHA_NI 0
#endif

/* One block by libcrypto's code: on a CPU without the SHA extensions its vector
 * code (AVX2, AVX) takes about half the portable code's time (bench/RESULTS.md),
 * on one with them it uses them too. */
static void compress_ossl(sha256_ctx *c, const uint8_t *p)
{
    SHA256_CTX o;
    _Static_assert(sizeof o.h == sizeof c->h, "SHA256_CTX's state is eight 32-bit words");
    memcpy(o.h, c->h, sizeof c->h);
    SHA256_Transform(&o, p);
    memcpy(c->h, o.h, sizeof c->h);
}

/* -1: not chosen yet; else a SHA256_BY_*. Chosen once (a race only chooses twice and
 * finds the same). */
static int sha_impl = -1;

static int cpu_sha(void)
{
#if HAVE_SHA_NI
    return cpu_has_sha();
#else
    return 0;
#endif
}

/* The one in use, chosen at the first call: the CPU's where it has them. */
static int impl_now(void)
{
    int impl = __atomic_load_n(&sha_impl, __ATOMIC_RELAXED);
    if (impl < 0) {
        impl = cpu_sha() ? SHA256_BY_CPU : SHA256_BY_OPENSSL;
        __atomic_store_n(&sha_impl, impl, __ATOMIC_RELAXED);
    }
    return impl;
}

static void compress(sha256_ctx *c, const uint8_t *p)
{
    int impl = impl_now();
#if HAVE_SHA_NI
    if (impl == SHA256_BY_CPU) {
        compress_ni(c, p);
        return;
    }
#endif
    if (impl == SHA256_BY_OPENSSL) compress_ossl(c, p);
    else compress_c(c, p);
}

int sha256_impl(int which)
{
    if (which < 0) return impl_now();
    if (which == SHA256_BY_CPU && !cpu_sha()) which = SHA256_BY_OPENSSL;
    if (which != SHA256_BY_CPU && which != SHA256_BY_OPENSSL) which = SHA256_BY_C;
    __atomic_store_n(&sha_impl, which, __ATOMIC_RELAXED);
    return which;
}

void sha256_init(sha256_ctx *c)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->len = 0;
    c->used = 0;
}

void sha256_update(sha256_ctx *c, const void *data, size_t n)
{
    const uint8_t *p = data;
    c->len += n;
    while (n) {
        size_t take = 64 - c->used < n ? 64 - c->used : n;
        memcpy(c->block + c->used, p, take);
        c->used += take, p += take, n -= take;
        if (c->used == 64) {
            compress(c, c->block);
            c->used = 0;
        }
    }
}

void sha256_final(sha256_ctx *c, uint8_t out[SHA256_LEN])
{
    uint64_t bits = c->len * 8;
    uint8_t pad[72] = {0x80};
    size_t padlen = (c->used < 56 ? 56 : 120) - c->used;
    for (int i = 0; i < 8; i++) pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(c, pad, padlen + 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

void sha256(const void *data, size_t n, uint8_t out[SHA256_LEN])
{
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, data, n);
    sha256_final(&c, out);
}

void sha256_hmac(const void *key, size_t klen, const void *msg, size_t n, uint8_t out[SHA256_LEN])
{
    uint8_t k[64] = {0}, ipad[64], opad[64], inner[SHA256_LEN];
    if (klen > 64) sha256(key, klen, k);
    else memcpy(k, key, klen);
    for (int i = 0; i < 64; i++) {
        ipad[i] = k[i] ^ 0x36;
        opad[i] = k[i] ^ 0x5c;
    }
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, ipad, 64);
    sha256_update(&c, msg, n);
    sha256_final(&c, inner);
    sha256_init(&c);
    sha256_update(&c, opad, 64);
    sha256_update(&c, inner, SHA256_LEN);
    sha256_final(&c, out);
}

void sha256_hex(const uint8_t *p, size_t n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[p[i] >> 4];
        out[2 * i + 1] = hx[p[i] & 15];
    }
    out[2 * n] = '\0';
}

int sha256_equal(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++) d |= x[i] ^ y[i];
    return d == 0;
}

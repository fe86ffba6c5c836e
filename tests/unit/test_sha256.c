/* Unit tests for lib/sha256.c: the FIPS 180-4 and RFC 4231 test vectors, incremental
 * hashing across block boundaries, and the constant-time comparison. */
#include "sha256.h"

#include <stdio.h>
#include <string.h>

#include "test.h"

static void hex_of(const char *msg, size_t n, char *out)
{
    uint8_t d[SHA256_LEN];
    sha256(msg, n, d);
    sha256_hex(d, SHA256_LEN, out);
}

static void test_vectors(void)
{
    char h[65];
    hex_of("", 0, h);
    CHECK_EQ_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, h);
    CHECK_EQ_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(m, strlen(m), h);
    CHECK_EQ_STR(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_million_a_incremental(void)
{
    sha256_ctx c;
    char chunk[997], h[65];
    uint8_t d[SHA256_LEN];
    memset(chunk, 'a', sizeof chunk);
    sha256_init(&c);
    size_t left = 1000000;
    while (left) {
        size_t n = left < sizeof chunk ? left : sizeof chunk;
        sha256_update(&c, chunk, n);
        left -= n;
    }
    sha256_final(&c, d);
    sha256_hex(d, SHA256_LEN, h);
    CHECK_EQ_STR(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* 55, 56 and 64 bytes: the padding's edge cases, against the one-shot form. */
    for (size_t n = 54; n <= 65; n++) {
        uint8_t a[SHA256_LEN], b[SHA256_LEN];
        sha256(chunk, n, a);
        sha256_init(&c);
        for (size_t i = 0; i < n; i++) sha256_update(&c, chunk + i, 1);
        sha256_final(&c, b);
        CHECK(memcmp(a, b, SHA256_LEN) == 0);
    }
}

static void test_hmac(void)
{
    uint8_t key[20], d[SHA256_LEN];
    char h[65];
    memset(key, 0x0b, sizeof key);
    sha256_hmac(key, sizeof key, "Hi There", 8, d);
    sha256_hex(d, SHA256_LEN, h);
    CHECK_EQ_STR(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    sha256_hmac("Jefe", 4, "what do ya want for nothing?", 28, d);
    sha256_hex(d, SHA256_LEN, h);
    CHECK_EQ_STR(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    uint8_t big[131];
    memset(big, 0xaa, sizeof big);
    const char *msg = "Test Using Larger Than Block-Size Key - Hash Key First";
    sha256_hmac(big, sizeof big, msg, strlen(msg), d);
    sha256_hex(d, SHA256_LEN, h);
    CHECK_EQ_STR(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

static void test_equal(void)
{
    CHECK(sha256_equal("abcd", "abcd", 4));
    CHECK(!sha256_equal("abcd", "abce", 4));
    CHECK(!sha256_equal("xbcd", "abcd", 4));
    CHECK(sha256_equal("", "", 0));
}

/* The CPU's SHA extensions (where it has them) and libcrypto's code give what the
 * portable code gives, over every length to a few blocks and bytes of every value. */
static void test_all_agree(void)
{
    uint8_t msg[300], a[SHA256_LEN], b[SHA256_LEN];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof msg; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        msg[i] = (uint8_t)x;
    }
    int def = sha256_impl(-1);
    printf("# SHA-256 by %s (and the others here)\n", def == SHA256_BY_CPU ? "the CPU's SHA extensions" : "libcrypto");
    for (int impl = SHA256_BY_CPU; impl <= SHA256_BY_OPENSSL; impl++) {
        if (sha256_impl(impl) != impl) continue;
        for (size_t n = 0; n <= sizeof msg; n++) {
            sha256_impl(SHA256_BY_C);
            sha256(msg, n, a);
            sha256_impl(impl);
            sha256(msg, n, b);
            if (!CHECK(memcmp(a, b, SHA256_LEN) == 0)) fprintf(stderr, "  %d differs at %zu bytes\n", impl, n);
        }
    }
    sha256_impl(def);
    CHECK_EQ_INT(sha256_impl(-1), def);
    /* The CPU's asked of a CPU without them: libcrypto's. */
    CHECK_EQ_INT(sha256_impl(SHA256_BY_CPU), def == SHA256_BY_CPU ? SHA256_BY_CPU : SHA256_BY_OPENSSL);
    sha256_impl(def);
}

int main(void)
{
    /* Every test on each implementation this CPU has: the portable code, the SHA
     * extensions (when there), libcrypto's. */
    for (int impl = SHA256_BY_C; impl <= SHA256_BY_OPENSSL; impl++) {
        if (sha256_impl(impl) != impl) continue;
        test_vectors();
        test_million_a_incremental();
        test_hmac();
        test_equal();
    }
    test_all_agree();
    return TEST_MAIN_END();
}

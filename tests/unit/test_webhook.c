/* Unit tests for lib/webhook.c: base64url, Ed25519 signatures and their kid, the
 * JWK, and the operator's list of webhook targets (host patterns, address blocks,
 * special ranges however spelt, localhost, https, the per-connection check). */
#include "webhook.h"

#include <string.h>

#include "test.h"

static void test_b64url(void)
{
    char out[16];
    CHECK_EQ_INT(webhook_b64url("", 0, out, sizeof out), 0);
    CHECK_EQ_STR(out, "");
    CHECK_EQ_INT(webhook_b64url("f", 1, out, sizeof out), 2);
    CHECK_EQ_STR(out, "Zg");
    webhook_b64url("fo", 2, out, sizeof out);
    CHECK_EQ_STR(out, "Zm8");
    webhook_b64url("foo", 3, out, sizeof out);
    CHECK_EQ_STR(out, "Zm9v");
    webhook_b64url("\xfb\xff", 2, out, sizeof out);
    CHECK_EQ_STR(out, "-_8");
    CHECK_EQ_INT(webhook_b64url("foobar", 6, out, 8), -1);   /* needs 9 */
}

static void test_sign(void)
{
    webhook_key k, other;
    if (!CHECK(webhook_key_generate(&k) == 0) || !CHECK(webhook_key_generate(&other) == 0)) return;
    CHECK(!strncmp(k.kid, "ds_", 3));
    CHECK_EQ_INT(strlen(k.kid), 3 + 43);
    CHECK(strcmp(k.kid, other.kid) != 0);
    char kid[WEBHOOK_KID_MAX];
    memcpy(kid, k.kid, sizeof kid);
    webhook_key_kid(&k);
    CHECK_EQ_STR(k.kid, kid);    /* derived from the public key alone */

    const char body[] = "{\"subscription_id\":\"s\"}";
    char sig[WEBHOOK_SIG_MAX];
    CHECK(webhook_sign(&k, 1700000000, body, strlen(body), sig, sizeof sig) == 0);
    CHECK(!strncmp(sig, "t=1700000000,kid=ds_", 20));
    CHECK(strstr(sig, ",ed25519=") != NULL);
    CHECK(webhook_verify(&k, sig, body, strlen(body)));
    CHECK(!webhook_verify(&k, sig, "{}", 2));                 /* another body */
    CHECK(!webhook_verify(&other, sig, body, strlen(body)));  /* another key */
    char moved[WEBHOOK_SIG_MAX];
    memcpy(moved, sig, sizeof moved);
    moved[2] = '8';                                           /* another time */
    CHECK(!webhook_verify(&k, moved, body, strlen(body)));

    json_t *jwk = webhook_jwk(&k);
    CHECK_EQ_STR(json_string_value(json_object_get(jwk, "kty")), "OKP");
    CHECK_EQ_STR(json_string_value(json_object_get(jwk, "crv")), "Ed25519");
    CHECK_EQ_STR(json_string_value(json_object_get(jwk, "alg")), "EdDSA");
    CHECK_EQ_STR(json_string_value(json_object_get(jwk, "kid")), k.kid);
    CHECK_EQ_INT(strlen(json_string_value(json_object_get(jwk, "x"))), 43);
    CHECK(json_object_get(jwk, "d") == NULL);                 /* never the private part */
    json_decref(jwk);
}

static int allowed(const char *list, const char *url)
{
    char err[256], why[256];
    webhook_allow *a = webhook_allow_parse(list, err, sizeof err);
    if (!a) return -1;
    int ok = webhook_url_allowed(a, url, why, sizeof why);
    webhook_allow_free(a);
    return ok;
}

static void test_allow(void)
{
    /* Nothing listed: no webhook at all. */
    CHECK_EQ_INT(allowed(NULL, "https://hooks.example.com/x"), 0);
    CHECK_EQ_INT(allowed("", "https://hooks.example.com/x"), 0);
    /* Host patterns. */
    CHECK_EQ_INT(allowed("hooks.example.com", "https://hooks.example.com/x"), 1);
    CHECK_EQ_INT(allowed("hooks.example.com", "https://HOOKS.example.com/x"), 1);
    CHECK_EQ_INT(allowed("hooks.example.com", "https://other.example.com/x"), 0);
    CHECK_EQ_INT(allowed("*.example.com", "https://a.b.example.com/x"), 1);
    CHECK_EQ_INT(allowed("*.example.com", "https://example.com/x"), 0);
    CHECK_EQ_INT(allowed("*", "https://anything.example.net:8443/x"), 1);
    CHECK_EQ_INT(allowed("*", "https://8.8.8.8/x"), 1);
    /* https only, but for loopback. */
    CHECK_EQ_INT(allowed("*", "http://hooks.example.com/x"), 0);
    CHECK_EQ_INT(allowed("*", "ftp://hooks.example.com/x"), 0);
    CHECK_EQ_INT(allowed("*", "https://user:pw@hooks.example.com/x"), 0);
    /* Special ranges: never by a host pattern, whatever the spelling. */
    static const char *const special[] = {
        "http://127.0.0.1/x", "http://2130706433/x", "http://0x7f000001/x", "http://127.1/x",
        "http://[::1]/x", "http://[::ffff:127.0.0.1]/x", "https://10.0.0.1/hook", "https://169.254.169.254/",
        "https://192.168.1.1/", "https://[fe80::1]/", "https://0.0.0.0/", "http://localhost:9/x",
        "http://a.localhost/x",
    };
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        if (!CHECK_EQ_INT(allowed("*", special[i]), 0)) fprintf(stderr, "  %s\n", special[i]);
    /* ... only inside a listed block. */
    CHECK_EQ_INT(allowed("127.0.0.1", "http://127.0.0.1:8080/webhook"), 1);
    CHECK_EQ_INT(allowed("127.0.0.1", "http://2130706433/webhook"), 1);   /* the same address */
    CHECK_EQ_INT(allowed("127.0.0.1", "http://localhost:8080/webhook"), 1);
    CHECK_EQ_INT(allowed("127.0.0.1", "http://127.0.0.2/webhook"), 0);
    CHECK_EQ_INT(allowed("127.0.0.1", "http://10.0.0.1/hook"), 0);
    CHECK_EQ_INT(allowed("127.0.0.0/8, ::1", "http://[::1]:9/x"), 1);
    CHECK_EQ_INT(allowed("10.0.0.0/8", "https://10.1.2.3/x"), 1);
    CHECK_EQ_INT(allowed("10.0.0.0/8", "http://10.1.2.3/x"), 0);          /* http only on loopback */
    /* Malformed lists. */
    CHECK_EQ_INT(allowed("a*b.example.com", "https://x/"), -1);
    CHECK_EQ_INT(allowed("10.0.0.0/99", "https://x/"), -1);
    CHECK_EQ_INT(allowed("https://hooks.example.com", "https://x/"), -1);

    /* The connection-time check: a name's address is judged again. */
    char err[128], why[256];
    webhook_allow *a = webhook_allow_parse("*.example.com 127.0.0.1", err, sizeof err);
    url_addr lo, lo2, pub, meta;
    url_addr_parse("127.0.0.1", &lo);
    url_addr_parse("127.0.0.2", &lo2);
    url_addr_parse("93.184.216.34", &pub);
    url_addr_parse("169.254.169.254", &meta);
    CHECK(webhook_addr_allowed(a, "h.example.com", &pub, why, sizeof why));
    CHECK(webhook_addr_allowed(a, "h.example.com", &lo, why, sizeof why));
    CHECK(!webhook_addr_allowed(a, "h.example.com", &lo2, why, sizeof why));
    CHECK(strstr(why, "loopback") != NULL);
    CHECK(!webhook_addr_allowed(a, "h.example.com", &meta, why, sizeof why));
    CHECK(strstr(why, "link-local") != NULL);
    webhook_allow_free(a);
}

int main(void)
{
    test_b64url();
    test_sign();
    test_allow();
    return TEST_MAIN_END();
}

#include "webhook.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

#define ALLOW_MAX 64          /* entries in DSTREAM_WEBHOOK_ALLOW */

/* ---- keys and signatures ------------------------------------------------------------ */

int webhook_b64url(const void *p, size_t n, char *out, size_t cap)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const uint8_t *b = p;
    size_t need = (n / 3) * 4 + (n % 3 ? n % 3 + 1 : 0);
    if (need + 1 > cap) {
        if (cap) out[0] = '\0';
        return -1;
    }
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        out[o++] = abc[v >> 6 & 63];
        out[o++] = abc[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)b[i] << 16;
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8;
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        out[o++] = abc[v >> 6 & 63];
    }
    out[o] = '\0';
    return (int)o;
}

static int b64url_decode(const char *s, size_t n, uint8_t *out, size_t cap)
{
    uint32_t v = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
              : c >= '0' && c <= '9' ? c - '0' + 52 : c == '-' ? 62 : c == '_' ? 63 : -1;
        if (d < 0) return -1;
        v = v << 6 | (uint32_t)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap) return -1;
            out[o++] = (uint8_t)(v >> bits);
        }
    }
    return (int)o;
}

void webhook_key_kid(webhook_key *k)
{
    /* RFC 7638: the members crv, kty, x in that order, no spaces. */
    char x[48], tp[128];
    uint8_t h[SHA256_LEN];
    webhook_b64url(k->pub, sizeof k->pub, x, sizeof x);
    int n = snprintf(tp, sizeof tp, "{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"%s\"}", x);
    sha256(tp, (size_t)n, h);
    memcpy(k->kid, "ds_", 3);
    webhook_b64url(h, sizeof h, k->kid + 3, sizeof k->kid - 3);
}

int webhook_key_generate(webhook_key *k)
{
    EVP_PKEY *pk = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
    size_t lp = sizeof k->pub, ls = sizeof k->priv;
    int rc = -1;
    if (ctx && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &pk) == 1 &&
        EVP_PKEY_get_raw_public_key(pk, k->pub, &lp) == 1 && EVP_PKEY_get_raw_private_key(pk, k->priv, &ls) == 1 &&
        lp == sizeof k->pub && ls == sizeof k->priv) {
        webhook_key_kid(k);
        rc = 0;
    }
    EVP_PKEY_free(pk);
    EVP_PKEY_CTX_free(ctx);
    return rc;
}

json_t *webhook_jwk(const webhook_key *k)
{
    char x[48];
    webhook_b64url(k->pub, sizeof k->pub, x, sizeof x);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kty", "OKP", "crv", "Ed25519", "kid", k->kid, "use", "sig",
                     "alg", "EdDSA", "x", x);
}

/* "<t>." followed by the body: what is signed. */
static int signed_text(int64_t t, const void *body, size_t n, uint8_t **out, size_t *len)
{
    char ts[32];
    int tl = snprintf(ts, sizeof ts, "%lld.", (long long)t);
    *out = malloc((size_t)tl + n + 1);
    if (!*out) return -1;
    memcpy(*out, ts, (size_t)tl);
    if (n) memcpy(*out + tl, body, n);
    *len = (size_t)tl + n;
    return 0;
}

int webhook_sign(const webhook_key *k, int64_t t, const void *body, size_t n, char *out, size_t cap)
{
    uint8_t sig[64], *msg = NULL;
    size_t siglen = sizeof sig, len;
    char b64[96];
    int rc = -1;
    EVP_PKEY *pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, k->priv, sizeof k->priv);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (pk && md && !signed_text(t, body, n, &msg, &len) && EVP_DigestSignInit(md, NULL, NULL, NULL, pk) == 1 &&
        EVP_DigestSign(md, sig, &siglen, msg, len) == 1 && webhook_b64url(sig, siglen, b64, sizeof b64) > 0) {
        int w = snprintf(out, cap, "t=%lld,kid=%s,ed25519=%s", (long long)t, k->kid, b64);
        rc = w > 0 && (size_t)w < cap ? 0 : -1;
    }
    free(msg);
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pk);
    return rc;
}

int webhook_verify(const webhook_key *k, const char *sig, const void *body, size_t n)
{
    if (strncmp(sig, "t=", 2)) return 0;
    char *end;
    long long t = strtoll(sig + 2, &end, 10);
    size_t kl = strlen(k->kid);
    if (strncmp(end, ",kid=", 5) || strncmp(end + 5, k->kid, kl) || strncmp(end + 5 + kl, ",ed25519=", 9)) return 0;
    const char *s64 = end + 5 + kl + 9;
    uint8_t raw[64], *msg = NULL;
    size_t len;
    if (b64url_decode(s64, strlen(s64), raw, sizeof raw) != 64) return 0;
    int ok = 0;
    EVP_PKEY *pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, k->pub, sizeof k->pub);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (pk && md && !signed_text(t, body, n, &msg, &len) && EVP_DigestVerifyInit(md, NULL, NULL, NULL, pk) == 1)
        ok = EVP_DigestVerify(md, raw, sizeof raw, msg, len) == 1;
    free(msg);
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pk);
    return ok;
}

/* ---- targets ------------------------------------------------------------------------ */

struct webhook_allow {
    size_t nhosts, nnets;
    char hosts[ALLOW_MAX][URL_HOST_MAX + 1];
    url_net nets[ALLOW_MAX];
};

webhook_allow *webhook_allow_parse(const char *text, char *err, size_t cap)
{
    webhook_allow *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    for (const char *p = text ? text : ""; *p;) {
        p += strspn(p, " ,\t\n");
        size_t n = strcspn(p, " ,\t\n");
        if (!n) break;
        char e[URL_HOST_MAX + 8];
        if (n >= sizeof e || a->nhosts + a->nnets >= ALLOW_MAX) {
            snprintf(err, cap, "%s", n >= sizeof e ? "an entry is too long" : "more than 64 entries");
            free(a);
            return NULL;
        }
        memcpy(e, p, n);
        e[n] = '\0';
        p += n;
        url_net net;
        if (url_net_parse(e, &net) == 0) {
            a->nets[a->nnets++] = net;
        } else if (!strchr(e, '/') && !strchr(e, ':') && !strchr(e + 1, '*') && (e[0] != '*' || !e[1] || e[1] == '.')) {
            for (char *c = e; *c; c++)
                if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
            memcpy(a->hosts[a->nhosts++], e, n + 1);
        } else {
            snprintf(err, cap, "%s is neither a host pattern (*, *.example.com, a.example.com) nor an address block", e);
            free(a);
            return NULL;
        }
    }
    return a;
}

void webhook_allow_free(webhook_allow *a)
{
    free(a);
}

static int in_nets(const webhook_allow *a, const url_addr *addr)
{
    for (size_t i = 0; i < a->nnets; i++)
        if (url_net_match(&a->nets[i], addr)) return 1;
    return 0;
}

int webhook_addr_allowed(const webhook_allow *a, const char *host, const url_addr *addr, char *why, size_t cap)
{
    const char *cls = url_addr_class(addr);
    if (!cls || in_nets(a, addr)) return 1;
    char s[64];
    url_addr_format(addr, s, sizeof s);
    snprintf(why, cap, "%s%s%s is a%s %s address (not in DSTREAM_WEBHOOK_ALLOW)", host ? host : "", host ? " at " : "",
             s, cls[0] == 'u' ? "n" : "", cls);
    return 0;
}

int webhook_url_allowed(const webhook_allow *a, const char *url, char *why, size_t cap)
{
    url_t u;
    if (!a || a->nhosts + a->nnets == 0) {
        snprintf(why, cap, "no webhook target is allowed on this server (DSTREAM_WEBHOOK_ALLOW)");
        return 0;
    }
    if (url_parse(url, &u, why, cap)) return 0;
    int loopback = 0;
    if (u.is_addr) {
        const char *cls = url_addr_class(&u.addr);
        loopback = cls && !strcmp(cls, "loopback");
        if (!in_nets(a, &u.addr)) {
            if (cls) return webhook_addr_allowed(a, NULL, &u.addr, why, cap);
            int named = 0;
            for (size_t i = 0; i < a->nhosts; i++) named = named || url_host_match(a->hosts[i], u.host);
            if (!named) {
                snprintf(why, cap, "%s is not in DSTREAM_WEBHOOK_ALLOW", u.host);
                return 0;
            }
        }
    } else if (url_host_is_localhost(u.host)) {
        url_addr lo4, lo6;
        url_addr_parse("127.0.0.1", &lo4);
        url_addr_parse("::1", &lo6);
        if (!in_nets(a, &lo4) && !in_nets(a, &lo6)) {
            snprintf(why, cap, "%s is a loopback name (no loopback block in DSTREAM_WEBHOOK_ALLOW)", u.host);
            return 0;
        }
        loopback = 1;
    } else {
        int named = 0;
        for (size_t i = 0; i < a->nhosts; i++) named = named || url_host_match(a->hosts[i], u.host);
        if (!named) {
            snprintf(why, cap, "%s is not in DSTREAM_WEBHOOK_ALLOW", u.host);
            return 0;
        }
    }
    if (!u.https && !loopback) {
        snprintf(why, cap, "a webhook URL must use https (http only for a loopback receiver)");
        return 0;
    }
    return 1;
}

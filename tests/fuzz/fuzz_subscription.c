/* libFuzzer harness for the parsers of lib/subrule.c (the subscription rules) and lib/webhook.c.
 *
 * The first byte picks what the rest is:
 *  0: a PUT body (JSON). Accepted configurations are normalized: paths without
 *     leading or trailing '/', never under __ds, explicit streams sorted and
 *     unique, a lease within bounds, a URL for a webhook and a wake stream for a
 *     pull-wake; parsing the same document again gives the same hash.
 *  1: "pattern\npath" for the glob. '**' matches every path with a segment; the
 *     answer does not depend on leading or trailing slashes; a pattern without
 *     wildcards matches exactly its own segments.
 *  2: "list\nurl" for DSTREAM_WEBHOOK_ALLOW: an allowed URL is http(s); if its
 *     host is a special address, that address lies in a listed block; plain http
 *     only for loopback. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "subrule.h"
#include "webhook.h"

#define REQUIRE(cond) \
    do { \
        if (!(cond)) abort(); \
    } while (0)

static void config(const char *s, size_t n)
{
    json_t *doc = json_loadb(s, n, 0, NULL);
    if (!doc) return;
    sub_config c, d;
    char err[256];
    if (sub_config_parse(doc, &c, err, sizeof err) == 0) {
        REQUIRE(c.pattern || c.nstreams);
        REQUIRE(c.lease_ttl_ms >= SUB_LEASE_MIN_MS && c.lease_ttl_ms <= SUB_LEASE_MAX_MS);
        REQUIRE(c.webhook ? c.url != NULL : c.wake_stream != NULL);
        const char *paths[3] = {c.pattern, c.wake_stream, NULL};
        for (int i = 0; i < 2; i++)
            if (paths[i]) {
                size_t l = strlen(paths[i]);
                REQUIRE(l && paths[i][0] != '/' && paths[i][l - 1] != '/' && strncmp(paths[i], "__ds/", 5) &&
                        strcmp(paths[i], "__ds"));
            }
        for (size_t i = 1; i < c.nstreams; i++) REQUIRE(strcmp(c.streams[i - 1], c.streams[i]) < 0);
        REQUIRE(sub_config_parse(doc, &d, err, sizeof err) == 0);
        REQUIRE(!strcmp(c.hash, d.hash));
        sub_config_free(&d);
        sub_config_free(&c);
    } else {
        REQUIRE(err[0]);
    }
    json_decref(doc);
}

static void glob(const char *pat, const char *path)
{
    int m = sub_glob_match(pat, path);
    char wrapped[2100];
    if (strlen(pat) + 3 < sizeof wrapped) {
        wrapped[0] = '/';
        memcpy(wrapped + 1, pat, strlen(pat));
        memcpy(wrapped + 1 + strlen(pat), "/", 2);
        REQUIRE(sub_glob_match(wrapped, path) == m);
    }
    int segs = 0, wild = 0;
    for (const char *p = path; *p; p++)
        if (*p != '/' && (p == path || p[-1] == '/')) segs++;
    for (const char *p = pat; *p; p++)
        if (*p == '*' && (p == pat || p[-1] == '/') && (p[1] == '/' || !p[1] || (p[1] == '*' && (p[2] == '/' || !p[2]))))
            wild = 1;
    if (segs && segs <= 512) REQUIRE(sub_glob_match("**", path));
    if (!wild && segs <= 512) {
        /* Literal: equal segment lists. */
        char a[2100], b[2100];
        size_t na = 0, nb = 0;
        for (const char *p = pat; *p && na < sizeof a - 2; p++)
            if (*p != '/' || (na && a[na - 1] != '/')) a[na++] = *p;
        for (const char *p = path; *p && nb < sizeof b - 2; p++)
            if (*p != '/' || (nb && b[nb - 1] != '/')) b[nb++] = *p;
        while (na && a[na - 1] == '/') na--;
        while (nb && b[nb - 1] == '/') nb--;
        REQUIRE(m == (na == nb && !memcmp(a, b, na)));
    }
}

static void allow(const char *list, const char *url)
{
    char err[256], why[256];
    webhook_allow *a = webhook_allow_parse(list, err, sizeof err);
    if (!a) return;
    if (webhook_url_allowed(a, url, why, sizeof why)) {
        url_t u;
        REQUIRE(url_parse(url, &u, why, sizeof why) == 0);
        if (u.is_addr && url_addr_class(&u.addr)) REQUIRE(webhook_addr_allowed(a, u.host, &u.addr, why, sizeof why));
        if (!u.https) {
            const char *cls = u.is_addr ? url_addr_class(&u.addr) : NULL;
            REQUIRE((cls && !strcmp(cls, "loopback")) || url_host_is_localhost(u.host));
        }
    }
    webhook_allow_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096) return 0;
    char *s = malloc(size);
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    char *nl = strchr(s, '\n');
    switch (data[0] % 3) {
    case 0: config(s, size - 1); break;
    case 1:
    case 2:
        if (nl) {
            *nl = '\0';
            if (data[0] % 3 == 1) glob(s, nl + 1);
            else allow(s, nl + 1);
        }
        break;
    }
    free(s);
    return 0;
}

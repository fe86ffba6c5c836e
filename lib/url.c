#include "url.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- encoding ---------------------------------------------------------------------- */

/* RFC 3986 pchar minus '%' (which always encodes), plus '/'. */
static int keep(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
    return c && strchr("-._~!$&'()*+,;=:@/", c) != NULL;
}

int url_encode_path(const char *path, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        size_t need = keep(*p) ? 1 : 3;
        if (n + need >= cap) {
            if (cap) out[0] = '\0';
            return -1;
        }
        if (need == 1) {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    if (cap == 0) return -1;
    out[n] = '\0';
    return (int)n;
}

/* ---- addresses ----------------------------------------------------------------------- */

int url_addr_parse(const char *s, url_addr *a)
{
    memset(a, 0, sizeof *a);
    if (strchr(s, ':')) {
        if (inet_pton(AF_INET6, s, a->b) != 1) return -1;
        a->family = AF_INET6;
        return 0;
    }
    /* inet_aton's forms are what the resolver and libcurl accept as an address
     * (127.1, 0x7f000001, 017700000001, 2130706433); anything else is a name. */
    if (!*s || strspn(s, "0123456789abcdefABCDEFxX.") != strlen(s)) return -1;
    struct in_addr in;
    if (inet_aton(s, &in) == 0) return -1;
    a->family = AF_INET;
    memcpy(a->b, &in.s_addr, 4);
    return 0;
}

int url_addr_from_sockaddr(const struct sockaddr *sa, url_addr *a)
{
    memset(a, 0, sizeof *a);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        a->family = AF_INET;
        memcpy(a->b, &in->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        a->family = AF_INET6;
        memcpy(a->b, &in6->sin6_addr, 16);
        return 0;
    }
    return -1;
}

static int prefix_is(const uint8_t *b, const uint8_t *p, int bits)
{
    int whole = bits / 8, rest = bits % 8;
    if (memcmp(b, p, (size_t)whole)) return 0;
    if (!rest) return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (b[whole] & mask) == (p[whole] & mask);
}

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) as the IPv4 address it is. */
static url_addr unmapped(const url_addr *a)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    url_addr v = *a;
    if (a->family == AF_INET6 && memcmp(a->b, mapped, 12) == 0) {
        memset(&v, 0, sizeof v);
        v.family = AF_INET;
        memcpy(v.b, a->b + 12, 4);
    }
    return v;
}

static const char *class4(const uint8_t *b)
{
    static const struct { uint8_t p[4]; int bits; const char *why; } t[] = {
        {{0, 0, 0, 0}, 8, "unspecified"},        /* "this network" */
        {{10, 0, 0, 0}, 8, "private"},
        {{100, 64, 0, 0}, 10, "private"},        /* shared address space (CGNAT) */
        {{127, 0, 0, 0}, 8, "loopback"},
        {{169, 254, 0, 0}, 16, "link-local"},    /* cloud metadata services live here */
        {{172, 16, 0, 0}, 12, "private"},
        {{192, 0, 0, 0}, 24, "reserved"},
        {{192, 0, 2, 0}, 24, "reserved"},        /* documentation */
        {{192, 88, 99, 0}, 24, "reserved"},      /* 6to4 relays */
        {{192, 168, 0, 0}, 16, "private"},
        {{198, 18, 0, 0}, 15, "reserved"},       /* benchmarking */
        {{198, 51, 100, 0}, 24, "reserved"},
        {{203, 0, 113, 0}, 24, "reserved"},
        {{224, 0, 0, 0}, 4, "multicast"},
        {{240, 0, 0, 0}, 4, "reserved"},         /* and 255.255.255.255 */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (prefix_is(b, t[i].p, t[i].bits)) return t[i].why;
    return NULL;
}

const char *url_addr_class(const url_addr *in)
{
    url_addr a = unmapped(in);
    if (a.family == AF_INET) return class4(a.b);
    if (a.family != AF_INET6) return "unspecified";
    static const uint8_t zero[16] = {0};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
    static const uint8_t nat64l[6] = {0, 0x64, 0xff, 0x9b, 0, 1};
    static const uint8_t sixto4[2] = {0x20, 0x02};
    static const uint8_t teredo[4] = {0x20, 0x01, 0, 0};
    static const uint8_t doc[4] = {0x20, 0x01, 0x0d, 0xb8};
    static const uint8_t discard[8] = {0x01, 0x00};
    const uint8_t *b = a.b;
    if (memcmp(b, zero, 16) == 0) return "unspecified";
    if (memcmp(b, zero, 15) == 0 && b[15] == 1) return "loopback";
    /* Forms that carry an IPv4 address: judged by it. */
    if (memcmp(b, zero, 12) == 0) return class4(b + 12) ? class4(b + 12) : "reserved";
    if (memcmp(b, nat64, 12) == 0) return class4(b + 12);
    if (prefix_is(b, sixto4, 16)) return class4(b + 2);
    if (prefix_is(b, nat64l, 48)) return "private";
    if (prefix_is(b, teredo, 32)) return "reserved";
    if (prefix_is(b, doc, 32)) return "reserved";
    if (prefix_is(b, discard, 64)) return "reserved";
    if ((b[0] & 0xfe) == 0xfc) return "private";                 /* fc00::/7 */
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local";  /* fe80::/10 */
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return "private";     /* fec0::/10 */
    if (b[0] == 0xff) return "multicast";
    return NULL;
}

void url_addr_format(const url_addr *a, char *out, size_t cap)
{
    if (!cap) return;
    if (!inet_ntop(a->family == AF_INET ? AF_INET : AF_INET6, a->b, out, (socklen_t)cap))
        snprintf(out, cap, "?");
}

int url_net_parse(const char *s, url_net *n)
{
    char buf[64];
    memset(n, 0, sizeof *n);
    const char *slash = strchr(s, '/');
    size_t len = slash ? (size_t)(slash - s) : strlen(s);
    if (len == 0 || len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    /* Blocks are written the one plain way: dotted quads or IPv6. */
    if (inet_pton(AF_INET, buf, n->addr.b) == 1) n->addr.family = AF_INET;
    else if (inet_pton(AF_INET6, buf, n->addr.b) == 1) n->addr.family = AF_INET6;
    else return -1;
    int max = n->addr.family == AF_INET ? 32 : 128;
    n->bits = max;
    if (slash) {
        char *end;
        const char *d = slash + 1;
        if (*d < '0' || *d > '9' || strlen(d) > 3) return -1;
        long v = strtol(d, &end, 10);
        if (*end || v < 0 || v > max) return -1;
        n->bits = (int)v;
    }
    return 0;
}

int url_net_match(const url_net *n, const url_addr *in)
{
    if (in->family == n->addr.family && prefix_is(in->b, n->addr.b, n->bits)) return 1;
    url_addr a = unmapped(in);
    return a.family == n->addr.family && prefix_is(a.b, n->addr.b, n->bits);
}

/* ---- hosts ------------------------------------------------------------------------------ */

int url_host_match(const char *pattern, const char *host)
{
    if (!strcmp(pattern, "*")) return *host != '\0';
    if (pattern[0] == '*' && pattern[1] == '.') {
        size_t pl = strlen(pattern + 1), hl = strlen(host);   /* ".example.com" */
        return hl > pl && strcasecmp(host + hl - pl, pattern + 1) == 0;
    }
    return strcasecmp(pattern, host) == 0;
}

int url_host_is_localhost(const char *host)
{
    size_t n = strlen(host);
    return strcasecmp(host, "localhost") == 0 ||
           (n > 10 && strcasecmp(host + n - 10, ".localhost") == 0);
}

/* ---- parsing ---------------------------------------------------------------------------- */

static int refuse(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t cap, const char *fmt, ...)
{
    if (cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The port after a host: ":" and 1 to 65535 (no sign, no leading zeros beyond
 * what strtol reads as the same number). Returns 0 or -1. */
static int parse_port(const char *p, const char *end, unsigned *port)
{
    if (p == end) return 0;
    if (*p != ':' || ++p == end || end - p > 5) return -1;
    unsigned v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (unsigned)(*p - '0');
    }
    if (v == 0 || v > 65535) return -1;
    *port = v;
    return 0;
}

int url_parse(const char *s, url_t *u, char *why, size_t whycap)
{
    memset(u, 0, sizeof *u);
    size_t n = strlen(s);
    if (n > URL_MAX) return refuse(why, whycap, "longer than %d bytes", URL_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return refuse(why, whycap, "has spaces, control or non-ASCII characters");
    const char *p;
    if (strncasecmp(s, "https://", 8) == 0) u->https = 1, p = s + 8;
    else if (strncasecmp(s, "http://", 7) == 0) p = s + 7;
    else return refuse(why, whycap, "must be an http:// or https:// URL");
    if (strchr(s, '#')) return refuse(why, whycap, "a fragment (#) is not allowed");
    const char *end = p + strcspn(p, "/?");
    if (memchr(p, '@', (size_t)(end - p)))
        return refuse(why, whycap, "userinfo (user:password@) is not allowed");
    if (memchr(p, '\\', (size_t)(end - p)) || memchr(p, '%', (size_t)(end - p)))
        return refuse(why, whycap, "the host has characters a host cannot have");
    const char *hend;
    u->port = u->https ? 443 : 80;
    if (*p == '[') {
        const char *close = memchr(p, ']', (size_t)(end - p));
        char buf[64];
        size_t hl = close ? (size_t)(close - p - 1) : 0;
        if (!close || hl == 0 || hl >= sizeof buf) return refuse(why, whycap, "malformed IPv6 address");
        memcpy(buf, p + 1, hl);
        buf[hl] = '\0';
        if (inet_pton(AF_INET6, buf, u->addr.b) != 1) return refuse(why, whycap, "malformed IPv6 address");
        u->addr.family = AF_INET6;
        u->is_addr = 1;
        hend = close + 1;
    } else {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        hend = colon ? colon : end;
        size_t hl = (size_t)(hend - p);
        if (hl && p[hl - 1] == '.') hl--;   /* "example.com." is example.com */
        if (hl == 0) return refuse(why, whycap, "has no host");
        if (hl > URL_HOST_MAX) return refuse(why, whycap, "the host is longer than %d bytes", URL_HOST_MAX);
        for (size_t i = 0; i < hl; i++) {
            char c = p[i];
            int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '.' || c == '_';
            if (!ok) return refuse(why, whycap, "the host has characters a host cannot have");
            u->host[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        }
        u->host[hl] = '\0';
        if (u->host[0] == '.' || u->host[hl - 1] == '.' || strstr(u->host, ".."))
            return refuse(why, whycap, "malformed host");
        if (url_addr_parse(u->host, &u->addr) == 0) u->is_addr = 1;
    }
    if (parse_port(hend, end, &u->port)) return refuse(why, whycap, "bad port");
    if (u->is_addr) url_addr_format(&u->addr, u->host, sizeof u->host);   /* one spelling */
    u->rest = end;
    return 0;
}

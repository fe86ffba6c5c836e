/* url: URLs the server writes, and the policy for URLs it is asked to connect to.
 *
 * url_encode_path percent-encodes a decoded path for a Location header.
 *
 * The rest decides where the runner may send a request. A provider's base URL
 * comes from the operator; an agent's `endpoint` comes from an API client, and a
 * client that could point the runner anywhere could reach what only the machine
 * can reach (a metadata service at 169.254.169.254, an admin port on loopback, the
 * private network). So a URL is accepted only as http:// or https://, without
 * userinfo (user:pass@, which also hides the real host from a quick reading), and
 * with a host that is a name or an address literal. Addresses are judged by what
 * they are, not by how they were spelt: inet_aton's numeric forms (2130706433,
 * 0x7f000001, 017700000001, 127.1) and IPv6 forms that embed an IPv4 address
 * (::ffff:127.0.0.1, 64:ff9b::7f00:1, 2002:7f00:1::) all count as the address they
 * name. A host name is judged again on every connection by the address it
 * resolved to (the runner checks each socket before connecting), so DNS that
 * answers differently later (rebinding) gains nothing.
 *
 * The special ranges (url_addr_class) are refused unless the operator's
 * configuration names them (url_net for addresses and CIDR blocks). */
#ifndef DSTREAM_URL_H
#define DSTREAM_URL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define URL_MAX 480            /* longest URL accepted (a base or an endpoint) */
#define URL_HOST_MAX 254       /* longest host name, without brackets */

/* Percent-encode path (already decoded, NUL-terminated) into out (cap bytes):
 * every byte but RFC 3986 pchar characters and '/' becomes %XX, so '?', '#', '%',
 * spaces, control and non-ASCII bytes cannot change what the URL means.
 * Returns the length written, or -1 if it does not fit (out is then ""). */
int url_encode_path(const char *path, char *out, size_t cap);

/* An IP address, IPv4 or IPv6, in network byte order. */
typedef struct url_addr {
    int family;                 /* AF_INET or AF_INET6 */
    uint8_t b[16];              /* 4 or 16 bytes used */
} url_addr;

typedef struct url {
    int https;
    char host[URL_HOST_MAX + 1];  /* lower case, no brackets, no trailing dot */
    int is_addr;                /* host is an address literal (addr holds it) */
    url_addr addr;
    unsigned port;              /* given, or 80 / 443 */
    const char *rest;           /* path (and query) in the parsed string: "" or "/..." */
} url_t;

/* Parse s as an absolute http(s) URL. Refused, with the reason in why: another
 * scheme, userinfo, an empty or malformed host, a bad port, a fragment, spaces or
 * control characters, more than URL_MAX bytes. u->rest points into s.
 * Returns 0 or -1. */
int url_parse(const char *s, url_t *u, char *why, size_t whycap);

/* Parse an address literal: dotted IPv4 in any inet_aton form, or IPv6 (without
 * brackets, no zone). Returns 0 or -1. */
int url_addr_parse(const char *s, url_addr *a);

/* The address of a socket address (AF_INET / AF_INET6). Returns 0 or -1. */
int url_addr_from_sockaddr(const struct sockaddr *sa, url_addr *a);

/* Why a connection to a is refused by default: "loopback", "private",
 * "link-local", "unspecified", "multicast", "reserved" (shared, benchmark,
 * documentation, broadcast ranges); NULL for a public address. IPv6 forms that
 * embed an IPv4 address are judged by that address. */
const char *url_addr_class(const url_addr *a);

/* Format a for messages ("127.0.0.1", "::1") into out. */
void url_addr_format(const url_addr *a, char *out, size_t cap);

/* An address block from the operator ("10.0.0.0/8", "::1", "fd00::/8"). */
typedef struct url_net {
    url_addr addr;
    int bits;
} url_net;

/* Parse an address or CIDR block. Returns 0 or -1. */
int url_net_parse(const char *s, url_net *n);
/* 1 if a lies in n (an IPv4-mapped IPv6 address matches IPv4 blocks). */
int url_net_match(const url_net *n, const url_addr *a);

/* 1 if host matches pattern: "*" (any host), "*.example.com" (any name below
 * example.com, not example.com itself) or an exact host; case-insensitive. */
int url_host_match(const char *pattern, const char *host);

/* 1 if host is "localhost" or a name under ".localhost" (RFC 6761: loopback
 * whatever DNS says). */
int url_host_is_localhost(const char *host);

#endif

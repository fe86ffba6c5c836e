/* access: who a request is and what it may do (the HTTP side of the trust boundary).
 *
 * access_begin() runs before any resource: it decides whether the request's Origin
 * is one the operator allows for CORS (DSTREAM_CORS_ORIGINS), answers preflights,
 * and authenticates the bearer token (Authorization: Bearer, or ?access_token= on
 * GET/HEAD for EventSource, which cannot set headers). access_route() then applies
 * the route table's scope to the request; resources that need more (a session id
 * chosen in the body, a fork's source) call req_allow() themselves. */
#ifndef DSTREAM_ACCESS_H
#define DSTREAM_ACCESS_H

#include "req.h"

/* Every response may carry a client's bytes (a stream's body under the Content-Type
 * its writer chose, a path or a document echoed in an error) on the API's origin,
 * where a browser page (the viewer) may keep a token. Opened in a browser, it must be
 * inert whatever its type: no sniffing, and a sandbox (an opaque origin: no storage,
 * no script, no form, no subresource, no framing). */
#define ACCESS_CSP "sandbox; default-src 'none'; frame-ancestors 'none'"
/* The same two headers as raw header lines: every response's (res_common_headers),
 * and those written before a request exists (the database cannot be opened). */
#define ACCESS_INERT_LINES "X-Content-Type-Options: nosniff\r\nContent-Security-Policy: " ACCESS_CSP "\r\n"

/* The headers every response carries (nosniff and the sandbox CSP above; CORS for a
 * listed origin). */
void res_common_headers(req_t *r);

/* Returns 1 to go on to the resource, 0 if the request has been answered (a
 * preflight, an invalid token, a remote client while auth is off). */
int access_begin(req_t *r);
/* The same without looking at the Authorization header: for the routes whose
 * credential is not a dstream token (a subscription wake's callback token, which
 * the resource verifies). r->auth stays NULL. */
int access_begin_open(req_t *r);

/* The first prefix of the principal's scopes of this kind ("sessions:write"), for
 * naming new resources under it; NULL if it has an unprefixed one, or none, or auth
 * is off. */
const char *access_prefix(req_t *r, const char *scope);

/* What the principal may read of sessions, as a session's recording scope
 * (docs/recording.md): the string "all" (admin, an unprefixed sessions:read, auth
 * off), or an array of the prefixes of its sessions:read scopes (empty: none). New
 * reference. */
json_t *access_read_scope(req_t *r);

/* 1 if the principal may use scope on resource (no answer is written). */
int access_allows(req_t *r, const char *scope, const char *resource);

/* DSTREAM_CORS_ORIGINS ("https://a.example, https://b.example") as the list
 * cfg_t.cors_origins holds: each origin NUL-terminated, an empty one last. NULL if
 * text names none. The caller owns the result (free). */
char *access_origins_parse(const char *text);

/* Check the configuration at start: auth off is refused unless listen is a Unix
 * socket or a loopback address. Returns 0, or -1 with a message in err. */
int access_check_config(const cfg_t *cfg, const char *listen, char *err, size_t cap);

/* The same for a socket the pool was given (systemd's, spawn-fcgi's): auth off is
 * refused unless it is a Unix socket or bound to a loopback address. */
int access_check_fd(const cfg_t *cfg, int fd, char *err, size_t cap);

#endif

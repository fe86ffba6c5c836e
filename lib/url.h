/* url: URLs the server writes and the URLs it is asked to connect to.
 *
 * url_encode_path percent-encodes a decoded path for a Location header. The rest
 * of this module decides which URLs the runner may send a request to (see
 * url_check): http and https only, no userinfo, and no host whose address is
 * loopback, link-local, private, unspecified or multicast unless the operator's
 * configuration names it. */
#ifndef DSTREAM_URL_H
#define DSTREAM_URL_H

#include <stddef.h>

/* Percent-encode path (already decoded, NUL-terminated) into out (cap bytes):
 * every byte but RFC 3986 pchar characters and '/' becomes %XX, so '?', '#', '%',
 * spaces, control and non-ASCII bytes cannot change what the URL means.
 * Returns the length written, or -1 if it does not fit (out is then ""). */
int url_encode_path(const char *path, char *out, size_t cap);

#endif

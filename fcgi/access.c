#include "access.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../lib/auth.h"
#include "../lib/timefmt.h"

/* A verified token is trusted for this long on the thread that verified it: one
 * look-up a second per thread and token instead of one per request. A revoked or
 * expired token stops working within this time. */
#define CACHE_MS 1000

static __thread struct {
    char token[AUTH_TOKEN_LEN + 1];
    auth_t who;
    int64_t until;
} cache;


static int loopback(const char *addr)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (!addr || !*addr) return 1;      /* CGI without REMOTE_ADDR: a local caller */
    if (inet_pton(AF_INET, addr, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, addr, &a6) == 1) {
        static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        if (memcmp(a6.s6_addr, one, 16) == 0) return 1;
        /* ::ffff:127.x.y.z */
        static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        return memcmp(a6.s6_addr, v4, 12) == 0 && a6.s6_addr[12] == 127;
    }
    return 0;
}

int access_check_config(const cfg_t *cfg, const char *listen, char *err, size_t cap)
{
    if (!cfg->auth_off || !listen || strchr(listen, '/')) return 0;
    char host[256];
    const char *colon = strrchr(listen, ':');
    size_t n = colon ? (size_t)(colon - listen) : strlen(listen);
    if (n >= sizeof host) n = sizeof host - 1;
    memcpy(host, listen, n);
    host[n] = '\0';
    if (host[0] == '[' && n > 1 && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    if (!strcmp(host, "localhost") || (host[0] && loopback(host))) return 0;
    snprintf(err, cap, "DSTREAM_AUTH=off is only allowed on a Unix socket or a loopback address, not %s", listen);
    return -1;
}

int access_check_fd(const cfg_t *cfg, int fd, char *err, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "";
    if (!cfg->auth_off || getsockname(fd, (struct sockaddr *)&ss, &len)) return 0;
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof host);
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof host);
    else
        return 0;      /* a Unix socket */
    if (loopback(host)) return 0;
    snprintf(err, cap, "DSTREAM_AUTH=off is only allowed on a Unix socket or a loopback address, not %s", host);
    return -1;
}

/* The request's Origin if the operator allows it: a pointer into cfg->cors_origins
 * (which lives as long as the process), so the hub may keep it. An origin matches
 * exactly (scheme://host[:port]). */
static const char *allowed_origin(req_t *r)
{
    const char *origin = req_header(r, "Origin"), *list = r->cfg->cors_origins;
    if (!origin || !list) return NULL;
    for (const char *p = list; *p; p += strlen(p) + 1)
        if (strcmp(p, origin) == 0) return p;
    return NULL;
}

char *access_origins_parse(const char *text)
{
    size_t n = text ? strlen(text) : 0;
    char *out = n ? calloc(1, n + 2) : NULL;
    if (!out) return NULL;
    size_t o = 0;
    for (const char *p = text; *p;) {
        p += strspn(p, " ,");
        size_t len = strcspn(p, " ,");
        if (!len) break;
        memcpy(out + o, p, len);
        o += len + 1;          /* the NUL calloc left */
        p += len;
    }
    if (o == 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* The Access-Control-Request-Headers a preflight may ask for. */
#define ALLOW_HEADERS                                                                            \
    "Authorization, Content-Type, Stream-Seq, Stream-TTL, Stream-Expires-At, Stream-Closed, "   \
    "Stream-Forked-From, Stream-Fork-Offset, Stream-Fork-Sub-Offset, Producer-Id, "             \
    "Producer-Epoch, Producer-Seq, If-None-Match, Last-Event-ID"

static void preflight(req_t *r)
{
    if (!req_header(r, "Origin")) {
        /* Not a browser's preflight: say what the resource takes. */
        res_status(r, 204);
        res_header(r, "Allow", "GET, HEAD, PUT, POST, DELETE, OPTIONS");
        res_end(r);
        return;
    }
    if (!r->cors_origin) {
        res_error(r, 403, "cors_origin_not_allowed", "this origin may not call the API (DSTREAM_CORS_ORIGINS)");
        return;
    }
    res_status(r, 204);
    res_header(r, "Access-Control-Allow-Methods", "GET, HEAD, PUT, POST, DELETE, OPTIONS");
    res_header(r, "Access-Control-Allow-Headers", ALLOW_HEADERS);
    res_header(r, "Access-Control-Max-Age", "600");
    res_end(r);
}

/* The presented token, copied into out; 0 none, 1 found, -1 malformed. */
static int presented(req_t *r, char *out, size_t cap)
{
    const char *h = req_header(r, "Authorization");
    if (h && *h) return auth_bearer(h, out, cap);
    if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD")) return 0;
    /* As sent: a token has nothing to escape, and nginx's per-token rate limit keys
     * on the raw value (nginx/dstream-http.conf); an escaped one is malformed. */
    int n = req_query_raw(r, "access_token", out, cap);
    if (n == -1) return 0;
    return n > 0 ? 1 : -1;
}

static void unauthorized(req_t *r, const char *error, const char *msg)
{
    char v[160];
    snprintf(v, sizeof v, "Bearer realm=\"dstream\"%s%s%s", error ? ", error=\"" : "", error ? error : "",
             error ? "\"" : "");
    res_header(r, "WWW-Authenticate", v);
    res_header(r, "Cache-Control", "no-store");
    res_error(r, 401, error ? "invalid_token" : "unauthorized", "%s", msg);
}

/* The headers of every response: nosniff and the sandbox (ACCESS_INERT_LINES), and
 * the CORS headers for an origin the operator listed (r->cors_origin, set by
 * access_begin). All but the echoed origin are constants, added as they are. */
#define EXPOSED "Stream-Next-Offset, Stream-Digest, Stream-Cursor, Stream-Up-To-Date, Stream-Closed, " \
                "Stream-TTL, Stream-Expires-At, ETag, Location, Content-Type, " \
                "Producer-Epoch, Producer-Seq, Producer-Expected-Seq, Producer-Received-Seq, " \
                "Stream-SSE-Data-Encoding, WWW-Authenticate, Retry-After"
void res_common_headers(req_t *r)
{
    static const char same[] = ACCESS_INERT_LINES "Cross-Origin-Resource-Policy: same-origin\r\n";
    /* Only an origin the operator listed, echoed; never "*", never credentials
     * (tokens travel in the Authorization header, not in cookies). */
    static const char cross[] = ACCESS_INERT_LINES "Cross-Origin-Resource-Policy: cross-origin\r\n"
                                "Vary: Origin\r\nAccess-Control-Expose-Headers: " EXPOSED "\r\n";
    if (!r->cors_origin) {
        res_header_lines(r, same, sizeof same - 1);
        return;
    }
    res_header_lines(r, cross, sizeof cross - 1);
    res_header(r, "Access-Control-Allow-Origin", r->cors_origin);
}

static int begin(req_t *r, int verify)
{
    char tok[AUTH_TOKEN_LEN + 8];
    r->auth = NULL;
    r->cors_origin = allowed_origin(r);
    res_common_headers(r);
    if (!strcmp(r->method, "OPTIONS")) {
        preflight(r);
        return 0;
    }
    if (r->cfg->auth_off) {
        if (!loopback(r->be->param(r, "REMOTE_ADDR"))) {
            res_error(r, 403, "auth_off", "authentication is off on this server: loopback clients only");
            return 0;
        }
        return 1;
    }
    if (!verify) return 1;
    int p = presented(r, tok, sizeof tok);
    if (p == 0) return 1;           /* anonymous: only public routes will answer */
    if (p < 0) {
        unauthorized(r, "invalid_request", "send the token as Authorization: Bearer <token>");
        return 0;
    }
    int64_t now = timefmt_now_ms();
    /* The thread's one cached identity is the request's (no copy): a thread serves
     * one request at a time, and nothing after the request keeps r->auth. */
    if (now >= cache.until || strcmp(tok, cache.token) != 0) {
        cache.until = 0;    /* cache.who is overwritten: invalid until verified */
        int rc = auth_verify(r->log, tok, &cache.who);
        if (rc == AUTH_EINVALID || rc == AUTH_EEXPIRED) {
            unauthorized(r, "invalid_token", rc == AUTH_EEXPIRED ? "the token has expired" : "the token is not valid");
            return 0;
        }
        if (rc) {
            res_header(r, "Retry-After", "1");
            res_error(r, 503, "unavailable", "cannot check the token: %s", errs_str(rc));
            return 0;
        }
        memcpy(cache.token, tok, sizeof cache.token);
        cache.token[sizeof cache.token - 1] = '\0';
        cache.until = now + CACHE_MS;
        if (cache.who.expires_ms >= 0 && cache.who.expires_ms < cache.until) cache.until = cache.who.expires_ms;
    }
    r->auth = &cache.who;
    return 1;
}

int access_begin(req_t *r)
{
    return begin(r, 1);
}

int access_begin_open(req_t *r)
{
    return begin(r, 0);
}

int access_allows(req_t *r, const char *scope, const char *resource)
{
    if (r->cfg->auth_off) return 1;
    return auth_allows(r->auth, scope, resource);
}

json_t *access_read_scope(req_t *r)
{
    const auth_t *a = r->auth;
    if (r->cfg->auth_off || !a || auth_allows(a, "sessions:read", NULL)) return json_string("all");
    json_t *arr = json_array();
    for (int i = 0; i < a->nscopes; i++) {
        auth_t one = {.nscopes = 1};
        one.scopes[0] = a->scopes[i];
        if (a->scopes[i].prefix[0] && auth_allows(&one, "sessions:read", a->scopes[i].prefix))
            json_array_append_new(arr, json_string(a->scopes[i].prefix));
    }
    return arr;
}

const char *access_prefix(req_t *r, const char *scope)
{
    const auth_t *a = r->auth;
    if (r->cfg->auth_off || !a || auth_allows(a, scope, NULL)) return NULL;
    for (int i = 0; i < a->nscopes; i++) {
        auth_t one = {.nscopes = 1};
        one.scopes[0] = a->scopes[i];
        if (a->scopes[i].prefix[0] && auth_allows(&one, scope, a->scopes[i].prefix)) return a->scopes[i].prefix;
    }
    return NULL;
}

int req_allow(req_t *r, const char *scope, const char *resource)
{
    if (access_allows(r, scope, resource)) return 1;
    if (!r->auth) {
        unauthorized(r, NULL, "this resource needs a token: Authorization: Bearer <token>");
        return 0;
    }
    if (resource)
        res_error(r, 403, "forbidden", "the token's scopes do not include %s on %s", scope, resource);
    else
        res_error(r, 403, "forbidden", "the token's scopes do not include %s", scope);
    return 0;
}

/* auth: API tokens and their scopes (the client side of the trust boundary).
 *
 * A token is "dst_" + 16 hex digits of id + "_" + 64 hex digits of secret (256
 * random bits). The database keeps the id, a name, the scopes, an expiry and the
 * SHA-256 of the whole token, never the token: it is shown once, at creation.
 * Verification looks the row up by id and compares the hashes in constant time.
 *
 * A scope is "admin" (everything) or KIND[:PREFIX] where KIND is one of
 * streams:read, streams:write, sessions:read, sessions:write; PREFIX restricts it
 * to resources (stream paths, session ids) that start with it (a plain string
 * prefix: end it with "/" to mean a directory). Without a prefix a scope covers
 * every resource of its kind. Write does not imply read. */
#ifndef DSTREAM_AUTH_H
#define DSTREAM_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "errs.h"
#include "log.h"

#define AUTH_SCOPES_MAX 16         /* scopes per token */
#define AUTH_PREFIX_MAX 256        /* bytes of a scope's prefix */
#define AUTH_NAME_MAX 64           /* bytes of a token's name */
#define AUTH_ID_LEN 16
#define AUTH_TOKEN_LEN (4 + AUTH_ID_LEN + 1 + 64)


typedef struct auth_scope {
    int kind;                  /* index into the kind table (auth_kind_name) */
    char prefix[AUTH_PREFIX_MAX];
} auth_scope;

/* Who a request is: a verified token's identity and scopes. */
typedef struct auth_t {
    char id[AUTH_ID_LEN + 1];
    char name[AUTH_NAME_MAX + 1];
    int64_t expires_ms;        /* -1: never */
    int nscopes;
    auth_scope scopes[AUTH_SCOPES_MAX];
} auth_t;

/* Parse one scope (s[0..n)). Returns 0, or AUTH_ESCOPE. */
int auth_scope_parse(const char *s, size_t n, auth_scope *out);
/* Parse a space-separated list of scopes into a (nscopes, scopes). 0 or AUTH_ESCOPE. */
int auth_scopes_parse(const char *text, auth_t *a);
/* Write a's scopes as a space-separated list into out. 0, or -1 if it does not fit. */
int auth_scopes_format(const auth_t *a, char *out, size_t cap);

/* Does a grant scope ("sessions:write", "admin", ...) on resource (a stream path or a
 * session id; NULL for resources without a name, which only an unprefixed scope or
 * admin covers)? 1 or 0. An unknown scope name is never granted. */
int auth_allows(const auth_t *a, const char *scope, const char *resource);
/* Does a hold any scope of this kind at all ("sessions:read"), whatever its prefix? */
int auth_has_kind(const auth_t *a, const char *scope);

/* Create a token named name with nscopes scopes (validated), expiring at expires_ms
 * (-1: never). Writes the token (AUTH_TOKEN_LEN + 1 bytes) to token. Returns 0,
 * AUTH_ESCOPE, AUTH_EEXISTS or LOG_E*. */
int auth_token_create(log_conn_t *c, const char *name, const char *const *scopes, int nscopes,
                      int64_t expires_ms, char *token, size_t cap);
/* The token of an Authorization header's value ("Bearer TOKEN": the scheme in any
 * case, spaces around the token ignored) copied into out. Returns 1, or -1 if the
 * value is not a bearer credential or the token is empty or does not fit in cap
 * (then out is unspecified). Nothing is checked of the token itself: auth_verify. */
int auth_bearer(const char *header, char *out, size_t cap);
/* Verify a presented token. Returns 0 and fills *out, or AUTH_EINVALID, AUTH_EEXPIRED,
 * or LOG_E* (the database could not answer). */
int auth_verify(log_conn_t *c, const char *token, auth_t *out);
/* Call fn for every token (never the secret), by name. Returns 0 or LOG_E*. */
int auth_token_list(log_conn_t *c, void (*fn)(void *ud, const auth_t *a, int64_t created_ms), void *ud);
/* Whether the token with this id still stands: 1 if it exists and has not expired,
 * 0 if it was revoked or has expired, LOG_E* if the database could not answer. For
 * a response that outlives its request's check (a live reader). */
int auth_token_current(log_conn_t *c, const char *id);
/* Revoke (delete) the token with this name or id. 0, LOG_ENOTFOUND or LOG_E*. */
int auth_token_revoke(log_conn_t *c, const char *name_or_id);

/* A duration like "90s", "15m", "12h", "30d" (or plain seconds) in milliseconds;
 * -1 if malformed, zero or above ten years. */
int64_t auth_parse_duration(const char *s);

/* A row of the tokens table, as the engine keeps it (lib/store.h): the id, the
 * name, the scopes as text, the SHA-256 of the whole token (never the token),
 * and the times (expires_ms -1: never). */
typedef struct auth_token_row {
    char id[AUTH_ID_LEN + 1];
    char name[AUTH_NAME_MAX + 1];
    char scopes[AUTH_SCOPES_MAX * (AUTH_PREFIX_MAX + 20)];
    uint8_t hash[32];
    int64_t created_ms, expires_ms;
} auth_token_row;

#endif

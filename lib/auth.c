#include "auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "timefmt.h"
#include "store.h"
#include "sha256.h"

/* The scope kinds; index 0 is admin, which has no prefix and covers everything. */
static const char *const kinds[] = {"admin", "streams:read", "streams:write", "sessions:read",
                                    "sessions:write"};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

static int kind_of(const char *s, size_t n)
{
    for (int i = 0; i < NKINDS; i++)
        if (strlen(kinds[i]) == n && memcmp(kinds[i], s, n) == 0) return i;
    return -1;
}

int auth_scope_parse(const char *s, size_t n, auth_scope *out)
{
    /* KIND is everything up to the second colon ("streams:read"), or all of s. */
    const char *c1 = memchr(s, ':', n);
    const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - s)) : NULL;
    size_t klen = c2 ? (size_t)(c2 - s) : n;
    int k = kind_of(s, klen);
    if (k < 0) return AUTH_ESCOPE;
    out->kind = k;
    out->prefix[0] = '\0';
    if (!c2) return 0;
    size_t plen = n - klen - 1;
    if (k == 0 || plen == 0 || plen >= AUTH_PREFIX_MAX) return AUTH_ESCOPE;
    for (size_t i = 0; i < plen; i++) {
        unsigned char ch = (unsigned char)c2[1 + i];
        if (ch <= 0x20 || ch == 0x7f) return AUTH_ESCOPE;    /* the list is space-separated */
    }
    memcpy(out->prefix, c2 + 1, plen);
    out->prefix[plen] = '\0';
    return 0;
}

int auth_scopes_parse(const char *text, auth_t *a)
{
    a->nscopes = 0;
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, " ");
        if (!n) break;
        if (a->nscopes == AUTH_SCOPES_MAX || auth_scope_parse(p, n, &a->scopes[a->nscopes]))
            return AUTH_ESCOPE;
        a->nscopes++;
        p += n;
    }
    return 0;
}

int auth_scopes_format(const auth_t *a, char *out, size_t cap)
{
    size_t o = 0;
    if (cap) out[0] = '\0';
    for (int i = 0; i < a->nscopes; i++) {
        const auth_scope *s = &a->scopes[i];
        int n = snprintf(out + o, cap - o, "%s%s%s%s", i ? " " : "", kinds[s->kind],
                         s->prefix[0] ? ":" : "", s->prefix);
        if (n < 0 || (size_t)n >= cap - o) return -1;
        o += (size_t)n;
    }
    return 0;
}

int auth_allows(const auth_t *a, const char *scope, const char *resource)
{
    int k = kind_of(scope, strlen(scope));
    if (k < 0 || !a) return 0;
    for (int i = 0; i < a->nscopes; i++) {
        const auth_scope *s = &a->scopes[i];
        if (s->kind == 0) return 1;
        if (s->kind != k) continue;
        if (!s->prefix[0]) return 1;
        if (resource && strncmp(resource, s->prefix, strlen(s->prefix)) == 0) return 1;
    }
    return 0;
}

int auth_has_kind(const auth_t *a, const char *scope)
{
    int k = kind_of(scope, strlen(scope));
    if (k < 0 || !a) return 0;
    for (int i = 0; i < a->nscopes; i++)
        if (a->scopes[i].kind == 0 || a->scopes[i].kind == k) return 1;
    return 0;
}

/* ---- tokens --------------------------------------------------------------------------- */

static int random_hex(char *out, size_t nbytes)
{
    uint8_t r[64];
    size_t got = 0;
    if (nbytes > sizeof r) return -1;
    while (got < nbytes) {
        ssize_t n = getrandom(r + got, nbytes - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        got += (size_t)n;
    }
    sha256_hex(r, nbytes, out);
    return 0;
}

static int valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > AUTH_NAME_MAX) return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("_.-@", *p)))
            return 0;
    return 1;
}

static int op_create(log_conn_t *c, void *arg)
{
    return store_of(c)->tokens->insert(c, arg);
}

int auth_token_create(log_conn_t *c, const char *name, const char *const *scopes, int nscopes,
                      int64_t expires_ms, char *token, size_t cap)
{
    auth_t a;
    char text[AUTH_SCOPES_MAX * (AUTH_PREFIX_MAX + 20)], id[2 * 8 + 1], secret[2 * 32 + 1];
    uint8_t hash[SHA256_LEN];
    if (!valid_name(name) || nscopes < 1 || nscopes > AUTH_SCOPES_MAX || cap < AUTH_TOKEN_LEN + 1)
        return AUTH_ESCOPE;
    a.nscopes = 0;
    for (int i = 0; i < nscopes; i++)
        if (auth_scope_parse(scopes[i], strlen(scopes[i]), &a.scopes[a.nscopes++])) return AUTH_ESCOPE;
    if (auth_scopes_format(&a, text, sizeof text)) return AUTH_ESCOPE;
    if (random_hex(id, 8) || random_hex(secret, 32)) return LOG_EIO;
    snprintf(token, cap, "dst_%s_%s", id, secret);
    sha256(token, AUTH_TOKEN_LEN, hash);
    auth_token_row row;
    memset(&row, 0, sizeof row);
    memcpy(row.id, id, sizeof row.id);
    snprintf(row.name, sizeof row.name, "%s", name);
    snprintf(row.scopes, sizeof row.scopes, "%s", text);
    memcpy(row.hash, hash, SHA256_LEN);
    row.created_ms = timefmt_now_ms();
    row.expires_ms = expires_ms;
    int rc = log_transact(c, op_create, &row);
    if (rc) memset(token, 0, cap);
    return rc;
}

int auth_bearer(const char *h, char *out, size_t cap)
{
    if (strncasecmp(h, "Bearer ", 7)) return -1;
    h += 7;
    while (*h == ' ') h++;
    size_t n = strlen(h);
    while (n && h[n - 1] == ' ') n--;
    if (n == 0 || n >= cap) return -1;
    memcpy(out, h, n);
    out[n] = '\0';
    return 1;
}

static int is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

int auth_verify(log_conn_t *c, const char *token, auth_t *out)
{
    if (strlen(token) != AUTH_TOKEN_LEN || memcmp(token, "dst_", 4) || token[4 + AUTH_ID_LEN] != '_' ||
        !is_hex(token + 4, AUTH_ID_LEN) || !is_hex(token + 5 + AUTH_ID_LEN, 64))
        return AUTH_EINVALID;
    char id[AUTH_ID_LEN + 1];
    memcpy(id, token + 4, AUTH_ID_LEN);
    id[AUTH_ID_LEN] = '\0';
    auth_token_row row;
    int rc = store_of(c)->tokens->get(c, id, &row);
    if (rc < 0) return rc;
    if (rc == 0) return AUTH_EINVALID;
    uint8_t want[SHA256_LEN];
    sha256(token, AUTH_TOKEN_LEN, want);
    if (!sha256_equal(row.hash, want, SHA256_LEN)) return AUTH_EINVALID;
    memset(out, 0, sizeof *out);
    memcpy(out->id, id, sizeof id);
    snprintf(out->name, sizeof out->name, "%s", row.name);
    out->expires_ms = row.expires_ms;
    if (auth_scopes_parse(row.scopes, out)) return AUTH_EINVALID;
    if (out->expires_ms >= 0 && timefmt_now_ms() >= out->expires_ms) return AUTH_EEXPIRED;
    return 0;
}

typedef struct list_arg {
    void (*fn)(void *ud, const auth_t *a, int64_t created_ms);
    void *ud;
} list_arg;

static void list_one(void *ud, const auth_token_row *row)
{
    list_arg *l = ud;
    auth_t a;
    memset(&a, 0, sizeof a);
    snprintf(a.id, sizeof a.id, "%s", row->id);
    snprintf(a.name, sizeof a.name, "%s", row->name);
    auth_scopes_parse(row->scopes, &a);
    a.expires_ms = row->expires_ms;
    l->fn(l->ud, &a, row->created_ms);
}

int auth_token_list(log_conn_t *c, void (*fn)(void *ud, const auth_t *a, int64_t created_ms), void *ud)
{
    list_arg l = {fn, ud};
    return store_of(c)->tokens->each(c, list_one, &l);
}

int auth_token_current(log_conn_t *c, const char *id)
{
    auth_token_row row;
    int rc = store_of(c)->tokens->get(c, id, &row);
    if (rc <= 0) return rc;
    return row.expires_ms < 0 || timefmt_now_ms() < row.expires_ms;
}

static int op_revoke(log_conn_t *c, void *arg)
{
    return store_of(c)->tokens->remove(c, arg);
}

int auth_token_revoke(log_conn_t *c, const char *name_or_id)
{
    return log_transact(c, op_revoke, (void *)name_or_id);
}

int64_t auth_parse_duration(const char *s)
{
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno || end == s || n <= 0) return -1;
    long long mul = 1000;
    if (*end) {
        if (end[1]) return -1;
        switch (*end) {
        case 's': mul = 1000; break;
        case 'm': mul = 60000; break;
        case 'h': mul = 3600000; break;
        case 'd': mul = 86400000; break;
        default: return -1;
        }
    }
    if (n > 3650LL * 86400000 / mul) return -1;
    return n * mul;
}

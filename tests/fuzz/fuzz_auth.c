/* libFuzzer harness for the parsers of lib/auth.c: the bearer credential of an
 * Authorization header, a presented token, scopes and their matching, durations.
 *
 * The input is read as text: its first line is the credential, the token, the scope
 * list and the duration all at once; the rest is the resource the scopes are asked
 * about. Invariants:
 *  - auth_bearer takes a "Bearer" value only, and gives a token that is not empty,
 *    has no space at either end and is in the value as it was sent;
 *  - auth_verify (on a database made at start holding one live token and one that
 *    has expired) accepts exactly the live token and calls exactly the expired one
 *    expired, everything else invalid; never an error of the database. The live
 *    token with one byte changed (where and to what, from the input) is invalid;
 *  - one scope that parses is, written out again, exactly its input; a list that
 *    parses is, written out, its input with runs of spaces made one and trimmed,
 *    and parses again to the same list, granting the same;
 *  - matching: admin grants every kind on every resource; a grant implies the
 *    kind is held; an unknown scope name is never granted; a grant without a
 *    resource needs admin or a scope without prefix; a grant on a resource also
 *    holds below it, and one made by a prefix means the resource starts with it;
 *  - a duration is -1 or whole seconds, above zero and at most ten years. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "auth.h"

#define REQUIRE(cond) \
    do { \
        if (!(cond)) abort(); \
    } while (0)

#define INPUT_MAX 4096

static const char *const kinds[] = {"admin", "streams:read", "streams:write", "sessions:read", "sessions:write"};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

static char dir[64] = "/tmp/fuzz-auth-XXXXXX";
static log_t *lg;
static log_conn_t *conn;
static char live[AUTH_TOKEN_LEN + 1], expired[AUTH_TOKEN_LEN + 1];

/* The database and whatever lib/log keeps beside it (-wal, -shm, the writers' lock). */
static void cleanup(void)
{
    char path[512];
    log_conn_close(conn);
    log_close(lg);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, "auth.db", 7)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char path[128], err[256];
    if (!mkdtemp(dir)) abort();
    snprintf(path, sizeof path, "%s/auth.db", dir);
    log_opts o = {0, 5000, 1, 0, 0};
    lg = log_open(path, &o, err, sizeof err);
    conn = lg ? log_conn_open(lg, err, sizeof err) : NULL;
    if (!conn) abort();
    atexit(cleanup);
    const char *scopes[] = {"streams:read:a/", "sessions:write"};
    if (auth_token_create(conn, "live", scopes, 2, -1, live, sizeof live)) abort();
    if (auth_token_create(conn, "expired", scopes, 1, 1, expired, sizeof expired)) abort();
    return 0;
}

/* What auth_verify says of a presented token. */
static void verify(const char *tok)
{
    auth_t a;
    char text[64];
    int rc = auth_verify(conn, tok, &a);
    REQUIRE(rc == 0 || rc == AUTH_EINVALID || rc == AUTH_EEXPIRED);
    REQUIRE((rc == 0) == (strcmp(tok, live) == 0));
    REQUIRE((rc == AUTH_EEXPIRED) == (strcmp(tok, expired) == 0));
    if (rc == 0) {
        REQUIRE(!strcmp(a.name, "live") && a.expires_ms == -1);
        REQUIRE(auth_scopes_format(&a, text, sizeof text) == 0 && !strcmp(text, "streams:read:a/ sessions:write"));
    }
}

static void bearer(const char *s)
{
    char tok[AUTH_TOKEN_LEN + 8];
    int rc = auth_bearer(s, tok, sizeof tok);
    REQUIRE(rc == 1 || rc == -1);
    if (rc < 0) return;
    size_t n = strlen(tok);
    REQUIRE(!strncasecmp(s, "Bearer ", 7));
    REQUIRE(n > 0 && n < sizeof tok && tok[0] != ' ' && tok[n - 1] != ' ');
    REQUIRE(strstr(s + 7, tok) != NULL);
    verify(tok);
}

/* s with runs of spaces made one, trimmed. */
static void squeeze(const char *s, char *out)
{
    size_t o = 0;
    for (const char *p = s; *p; p++) {
        if (*p == ' ' && (o == 0 || out[o - 1] == ' ')) continue;
        out[o++] = *p;
    }
    while (o && out[o - 1] == ' ') o--;
    out[o] = '\0';
}

static void matching(const auth_t *a, const char *res)
{
    static char below[INPUT_MAX + 8];
    int admin = 0;
    for (int i = 0; i < a->nscopes; i++) admin |= a->scopes[i].kind == 0;
    snprintf(below, sizeof below, "%s/x", res);
    for (int k = 0; k < NKINDS; k++) {
        int r = auth_allows(a, kinds[k], res), rn = auth_allows(a, kinds[k], NULL);
        REQUIRE(r == 0 || r == 1);
        if (admin) REQUIRE(r && rn);
        if (r) REQUIRE(auth_has_kind(a, kinds[k]));
        int open = admin, by_prefix = 0;
        for (int i = 0; i < a->nscopes; i++)
            if (a->scopes[i].kind == k) {
                if (!a->scopes[i].prefix[0]) open = 1;
                else if (!strncmp(res, a->scopes[i].prefix, strlen(a->scopes[i].prefix))) by_prefix = 1;
            }
        REQUIRE(rn == open);
        REQUIRE(r == (open || by_prefix));
        if (r) REQUIRE(auth_allows(a, kinds[k], below));
    }
    REQUIRE(!auth_allows(a, "streams:delete", res) && !auth_allows(a, "admin:x", res));
    REQUIRE(!auth_allows(a, "", NULL) && !auth_has_kind(a, "sessions"));
}

static void scopes(const char *s, const char *res)
{
    static char text[AUTH_SCOPES_MAX * (AUTH_PREFIX_MAX + 20)], again[sizeof text], want[INPUT_MAX + 1];
    auth_t a, b;
    memset(&a, 0, sizeof a);
    if (auth_scopes_parse(s, &a)) return;
    REQUIRE(a.nscopes >= 0 && a.nscopes <= AUTH_SCOPES_MAX);
    for (int i = 0; i < a.nscopes; i++) {
        REQUIRE(a.scopes[i].kind >= 0 && a.scopes[i].kind < NKINDS);
        REQUIRE(strlen(a.scopes[i].prefix) < AUTH_PREFIX_MAX);
        REQUIRE(a.scopes[i].kind != 0 || !a.scopes[i].prefix[0]);
        for (const char *p = a.scopes[i].prefix; *p; p++) REQUIRE((unsigned char)*p > 0x20 && *p != 0x7f);
    }
    REQUIRE(auth_scopes_format(&a, text, sizeof text) == 0);
    squeeze(s, want);
    REQUIRE(!strcmp(text, want));
    memset(&b, 0, sizeof b);
    REQUIRE(auth_scopes_parse(text, &b) == 0 && b.nscopes == a.nscopes);
    REQUIRE(auth_scopes_format(&b, again, sizeof again) == 0 && !strcmp(again, text));
    matching(&a, res);
    for (int k = 0; k < NKINDS; k++) REQUIRE(auth_allows(&a, kinds[k], res) == auth_allows(&b, kinds[k], res));
}

/* One scope from raw bytes (NULs included): written out again, exactly them. */
static void one_scope(const uint8_t *data, size_t size)
{
    auth_scope sc;
    char text[AUTH_PREFIX_MAX + 32];
    if (auth_scope_parse((const char *)data, size, &sc)) return;
    REQUIRE(sc.kind >= 0 && sc.kind < NKINDS);
    int n = snprintf(text, sizeof text, "%s%s%s", kinds[sc.kind], sc.prefix[0] ? ":" : "", sc.prefix);
    REQUIRE(n > 0 && (size_t)n == size && !memcmp(text, data, size));
}

static void duration(const char *s)
{
    int64_t d = auth_parse_duration(s);
    REQUIRE(d == -1 || (d > 0 && d % 1000 == 0 && d <= 3650LL * 86400000));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char s[INPUT_MAX + 1];
    if (size > INPUT_MAX) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    one_scope(data, size);
    char *nl = strchr(s, '\n');
    const char *res = nl ? nl + 1 : "";
    if (nl) *nl = '\0';
    bearer(s);
    verify(s);
    scopes(s, res);
    duration(s);
    /* The live token with one byte changed. */
    if (size >= 2) {
        char t[AUTH_TOKEN_LEN + 1];
        memcpy(t, live, sizeof t);
        t[data[0] % AUTH_TOKEN_LEN] = data[1] ? (char)data[1] : '0';
        verify(t);
    }
    return 0;
}

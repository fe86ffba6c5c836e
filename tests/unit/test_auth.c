/* Unit tests for lib/auth.c: scope grammar, prefix matching, token creation (shown
 * once, only its hash kept: the database holds the token in no column, looked at
 * with the engine's command-line program), verification of good, tampered, expired,
 * revoked and malformed tokens, durations, and the bearer credential of a header.
 * On each engine (test_db.h). */
#include "auth.h"

#include <string.h>

#include "timefmt.h"
#include "store.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *c;

static auth_t with(const char *scopes)
{
    auth_t a;
    memset(&a, 0, sizeof a);
    CHECK_EQ_INT(auth_scopes_parse(scopes, &a), 0);
    return a;
}

static void test_scopes(void)
{
    auth_scope s;
    CHECK_EQ_INT(auth_scope_parse("admin", 5, &s), 0);
    CHECK_EQ_INT(auth_scope_parse("streams:read", 12, &s), 0);
    CHECK_EQ_STR(s.prefix, "");
    CHECK_EQ_INT(auth_scope_parse("streams:read:a/b:c", 18, &s), 0);
    CHECK_EQ_STR(s.prefix, "a/b:c");
    const char *bad[] = {"", "admin:x", "streams", "streams:", "streams:read:", "streams:delete",
                         "sessions:read:a b", "sessions:read:a\tb", "Admin", "streams:readx"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ_INT(auth_scope_parse(bad[i], strlen(bad[i]), &s), AUTH_ESCOPE);

    auth_t a = with("streams:read:pub/ sessions:write:team1-");
    CHECK(auth_allows(&a, "streams:read", "pub/x"));
    CHECK(!auth_allows(&a, "streams:read", "pubx"));
    CHECK(!auth_allows(&a, "streams:write", "pub/x"));       /* read is not write */
    CHECK(!auth_allows(&a, "sessions:read", "team1-a"));     /* write is not read */
    CHECK(auth_allows(&a, "sessions:write", "team1-a"));
    CHECK(!auth_allows(&a, "sessions:write", "team2-a"));
    CHECK(!auth_allows(&a, "sessions:write", NULL));         /* unnamed: needs no prefix */
    CHECK(!auth_allows(&a, "admin", NULL));
    CHECK(!auth_allows(&a, "bogus", "pub/x"));
    CHECK(auth_has_kind(&a, "sessions:write"));
    CHECK(!auth_has_kind(&a, "sessions:read"));
    auth_t adm = with("admin");
    CHECK(auth_allows(&adm, "admin", NULL));
    CHECK(auth_allows(&adm, "streams:write", "anything"));
    CHECK(auth_allows(&adm, "sessions:read", NULL));
    auth_t all = with("streams:write");
    CHECK(auth_allows(&all, "streams:write", "x"));
    CHECK(auth_allows(&all, "streams:write", NULL));
    CHECK(!auth_allows(NULL, "streams:write", "x"));
    char out[128];
    CHECK_EQ_INT(auth_scopes_format(&a, out, sizeof out), 0);
    CHECK_EQ_STR(out, "streams:read:pub/ sessions:write:team1-");
    CHECK_EQ_INT(auth_scopes_format(&a, out, 10), -1);
    auth_t many;
    CHECK_EQ_INT(auth_scopes_parse("admin admin admin admin admin admin admin admin admin admin admin"
                                   " admin admin admin admin admin admin", &many), AUTH_ESCOPE);
}

static int holding;

/* A token row that holds the secret part of a token (ud) in its text. */
static void holds_secret(void *ud, const auth_token_row *t)
{
    const char *secret = ud;
    if (strstr(t->id, secret) || strstr(t->name, secret) || strstr(t->scopes, secret)) holding++;
}

static void test_tokens(void)
{
    char tok[AUTH_TOKEN_LEN + 1], tok2[AUTH_TOKEN_LEN + 1];
    const char *sc[] = {"streams:read:pub/", "sessions:write"};
    CHECK_EQ_INT(auth_token_create(c, "reader", sc, 2, -1, tok, sizeof tok), 0);
    CHECK_EQ_INT(strlen(tok), AUTH_TOKEN_LEN);
    CHECK(strncmp(tok, "dst_", 4) == 0);
    CHECK_EQ_INT(auth_token_create(c, "reader", sc, 2, -1, tok2, sizeof tok2), AUTH_EEXISTS);
    const char *badsc[] = {"streams:erase"};
    CHECK_EQ_INT(auth_token_create(c, "x", badsc, 1, -1, tok2, sizeof tok2), AUTH_ESCOPE);
    CHECK_EQ_INT(auth_token_create(c, "bad name", sc, 1, -1, tok2, sizeof tok2), AUTH_ESCOPE);

    auth_t a;
    CHECK_EQ_INT(auth_verify(c, tok, &a), 0);
    CHECK_EQ_STR(a.name, "reader");
    CHECK_EQ_INT(a.nscopes, 2);
    CHECK(auth_allows(&a, "streams:read", "pub/a"));
    CHECK(!auth_allows(&a, "streams:read", "priv/a"));

    /* The store is never given the token, only its hash (the rows as the engine
     * keeps them: test_no_token_in_rows). */
    holding = 0;
    CHECK_EQ_INT(store_of(c)->tokens->each(c, holds_secret, tok + 21), 0);
    CHECK_EQ_INT(holding, 0);

    /* One changed character anywhere, a truncation, junk: invalid. */
    char t[AUTH_TOKEN_LEN + 2];
    for (size_t i = 4; i < AUTH_TOKEN_LEN; i++) {
        if (tok[i] == '_') continue;
        memcpy(t, tok, sizeof tok);
        t[i] = t[i] == 'a' ? 'b' : 'a';
        if (auth_verify(c, t, &a) != AUTH_EINVALID) {
            CHECK(0);
            break;
        }
    }
    memcpy(t, tok, sizeof tok);
    t[AUTH_TOKEN_LEN - 1] = '\0';
    CHECK_EQ_INT(auth_verify(c, t, &a), AUTH_EINVALID);
    CHECK_EQ_INT(auth_verify(c, "", &a), AUTH_EINVALID);
    CHECK_EQ_INT(auth_verify(c, "Bearer x", &a), AUTH_EINVALID);
    memcpy(t, tok, sizeof tok);
    t[5] = 'G';
    CHECK_EQ_INT(auth_verify(c, t, &a), AUTH_EINVALID);

    /* Expired. */
    const char *adm[] = {"admin"};
    CHECK_EQ_INT(auth_token_create(c, "old", adm, 1, timefmt_now_ms() - 1, tok2, sizeof tok2), 0);
    CHECK_EQ_INT(auth_verify(c, tok2, &a), AUTH_EEXPIRED);
    char rid[AUTH_ID_LEN + 1], oid[AUTH_ID_LEN + 1];
    memcpy(rid, tok + 4, AUTH_ID_LEN);
    rid[AUTH_ID_LEN] = '\0';
    memcpy(oid, tok2 + 4, AUTH_ID_LEN);
    oid[AUTH_ID_LEN] = '\0';
    CHECK_EQ_INT(auth_token_current(c, rid), 1);
    CHECK_EQ_INT(auth_token_current(c, oid), 0);     /* expired */
    CHECK_EQ_INT(auth_token_current(c, "0000000000000000"), 0);
    CHECK_EQ_INT(auth_token_current(c, ""), 0);

    /* Revoked, by name or id. */
    CHECK_EQ_INT(auth_token_revoke(c, "reader"), 0);
    CHECK_EQ_INT(auth_verify(c, tok, &a), AUTH_EINVALID);
    CHECK_EQ_INT(auth_token_current(c, rid), 0);
    CHECK_EQ_INT(auth_token_revoke(c, "reader"), LOG_ENOTFOUND);
    char id[AUTH_ID_LEN + 1];
    memcpy(id, tok2 + 4, AUTH_ID_LEN);
    id[AUTH_ID_LEN] = '\0';
    CHECK_EQ_INT(auth_token_revoke(c, id), 0);
}

static void test_duration(void)
{
    CHECK_EQ_INT(auth_parse_duration("90"), 90000);
    CHECK_EQ_INT(auth_parse_duration("90s"), 90000);
    CHECK_EQ_INT(auth_parse_duration("15m"), 900000);
    CHECK_EQ_INT(auth_parse_duration("12h"), 43200000);
    CHECK_EQ_INT(auth_parse_duration("30d"), 2592000000LL);
    CHECK_EQ_INT(auth_parse_duration("0"), -1);
    CHECK_EQ_INT(auth_parse_duration("-5m"), -1);
    CHECK_EQ_INT(auth_parse_duration("5w"), -1);
    CHECK_EQ_INT(auth_parse_duration("5mm"), -1);
    CHECK_EQ_INT(auth_parse_duration(""), -1);
    CHECK_EQ_INT(auth_parse_duration("99999999999d"), -1);
}

/* The Authorization header's value: the scheme in any case, spaces around the
 * token dropped; anything else, an empty token or one too long for out, refused. */
static void test_bearer(void)
{
    char out[16];
    CHECK_EQ_INT(auth_bearer("Bearer dst_abc", out, sizeof out), 1);
    CHECK_EQ_STR(out, "dst_abc");
    CHECK_EQ_INT(auth_bearer("bEARER   tok  ", out, sizeof out), 1);
    CHECK_EQ_STR(out, "tok");
    CHECK_EQ_INT(auth_bearer("Basic dXNlcjpwdw==", out, sizeof out), -1);
    CHECK_EQ_INT(auth_bearer("Bearer", out, sizeof out), -1);
    CHECK_EQ_INT(auth_bearer("Bearer    ", out, sizeof out), -1);
    CHECK_EQ_INT(auth_bearer("Bearer 0123456789abcdef", out, sizeof out), -1);
    CHECK_EQ_INT(auth_bearer("Bearer 0123456789abcde", out, sizeof out), 1);
}

/* The database never holds a token, only its hash, in any column. */
static void test_no_token_in_rows(void)
{
    char tok[AUTH_TOKEN_LEN + 1], sql[400];
    const char *sc[] = {"streams:read:pub/", "sessions:write"};
    CHECK_EQ_INT(auth_token_create(c, "reader", sc, 2, -1, tok, sizeof tok), 0);
    /* The secret is hex digits: nothing to quote. The hash is looked at as hex and
     * as its bytes. */
    snprintf(sql, sizeof sql,
             test_db_is_pg() ? "SELECT count(*) FROM tokens WHERE strpos(id || name || encode(hash, 'hex')"
                               " || encode(hash, 'escape') || scopes, '%s') > 0"
                             : "SELECT count(*) FROM tokens WHERE instr(id || name || lower(hex(hash)) || hash"
                               " || scopes, '%s') > 0",
             tok + 21);
    char n[32] = "";
    CHECK_EQ_INT(test_db_sql(sql, n, sizeof n), 0);
    CHECK_EQ_STR(n, "0");
    /* The row is there (the query above looked at something), its hash 32 bytes. */
    CHECK_EQ_INT(test_db_sql("SELECT count(*) FROM tokens WHERE name = 'reader' AND length(hash) = 32", n, sizeof n), 0);
    CHECK_EQ_STR(n, "1");
}

int main(void)
{
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("auth", dir, sizeof dir, &lg, &c) == 0) {
            if (e == 0) test_scopes();
            test_tokens();
            if (e == 0) test_duration();
        }
        test_db_close(dir, lg, c);
        if (test_db_open("auth_rows", dir, sizeof dir, &lg, &c) == 0) test_no_token_in_rows();
        test_db_close(dir, lg, c);
    }
    test_bearer();
    return TEST_MAIN_END();
}

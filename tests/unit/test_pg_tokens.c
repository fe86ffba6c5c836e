/* Unit tests for the PostgreSQL engine's tokens (lib/store/pg/pg_tokens.c): the
 * database never holds a token, only its hash, in any column (as SQLite's:
 * test_sqlite_tokens), looked at by hand with psql. Runs only when
 * DSTREAM_TEST_PG names a cluster (tests/pg.sh). */
#include "auth.h"

#include <string.h>

#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *c;

static void test_no_token_in_rows(void)
{
    char tok[AUTH_TOKEN_LEN + 1], sql[400], n[32] = "";
    const char *sc[] = {"streams:read:pub/", "sessions:write"};
    CHECK_EQ_INT(auth_token_create(c, "reader", sc, 2, -1, tok, sizeof tok), 0);
    /* The secret is hex digits: nothing to quote. The hash is looked at as hex and
     * as its bytes. */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM tokens WHERE strpos(id || name || encode(hash, 'hex')"
             " || encode(hash, 'escape') || scopes, '%s') > 0", tok + 21);
    CHECK_EQ_INT(test_db_psql(sql, n, sizeof n), 0);
    CHECK_EQ_STR(n, "0");
    /* The row is there (the query above looked at something), its hash 32 bytes. */
    CHECK_EQ_INT(test_db_psql("SELECT count(*) FROM tokens WHERE name = 'reader' AND length(hash) = 32", n,
                              sizeof n), 0);
    CHECK_EQ_STR(n, "1");
}

int main(void)
{
    if (!test_db_engine(1)) {
        printf("test_pg_tokens: DSTREAM_TEST_PG is not set: nothing to run\n");
        return TEST_MAIN_END();
    }
    if (test_db_open("pg-tokens", dir, sizeof dir, &lg, &c) == 0) test_no_token_in_rows();
    test_db_close(dir, lg, c);
    return TEST_MAIN_END();
}

/* Unit tests for the SQLite engine's tokens (lib/store/sqlite/sq_tokens.c): the
 * database never holds a token, only its hash, in any column. */
#include "auth.h"

#include <sqlite3.h>
#include <string.h>

#include "store/sqlite/sq.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *c;

static void test_no_token_in_rows(void)
{
    char tok[AUTH_TOKEN_LEN + 1];
    const char *sc[] = {"streams:read:pub/", "sessions:write"};
    CHECK_EQ_INT(auth_token_create(c, "reader", sc, 2, -1, tok, sizeof tok), 0);
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(sq_db(c), "SELECT count(*) FROM tokens WHERE instr(id || name || hash || scopes, ?) > 0",
                             -1, &st, NULL) == SQLITE_OK);
    sqlite3_bind_text(st, 1, tok + 21, -1, SQLITE_STATIC);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    /* The row is there (the query above looked at something). */
    CHECK(sqlite3_prepare_v2(sq_db(c), "SELECT count(*) FROM tokens WHERE name = 'reader'", -1, &st, NULL) ==
          SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
}

int main(void)
{
    if (test_db_open("tokens", dir, sizeof dir, &lg, &c) == 0) test_no_token_in_rows();
    test_db_close(dir, lg, c);
    return TEST_MAIN_END();
}

/* The SQLite engine's tokens (lib/auth.h): one row per token, its secret kept
 * only as a hash. */
#include "sq.h"

#include <stdio.h>
#include <string.h>

static int db_err(int rc)
{
    return (rc & 0xff) == SQLITE_BUSY ? LOG_EBUSY : LOG_EIO;
}

static void copy_text(char *dst, size_t cap, sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static int sq_insert(log_conn_t *c, const auth_token_row *t)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "INSERT INTO tokens (id, name, hash, scopes, created_ms, expires_ms)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, t->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, t->name, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 3, t->hash, (int)sizeof t->hash, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, t->scopes, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, t->created_ms);
    if (t->expires_ms >= 0) sqlite3_bind_int64(st, 6, t->expires_ms);
    else sqlite3_bind_null(st, 6);
    int rc = sqlite3_step(st);
    sq_stmt_done(c, st);
    if (rc != SQLITE_DONE) return db_err(rc);
    return sqlite3_changes(sq(c)->db) ? 0 : AUTH_EEXISTS;
}

/* Fill t from a row of (id, name, hash, scopes, created_ms, expires_ms). */
static void row_of(sqlite3_stmt *st, auth_token_row *t)
{
    memset(t, 0, sizeof *t);
    copy_text(t->id, sizeof t->id, st, 0);
    copy_text(t->name, sizeof t->name, st, 1);
    const void *h = sqlite3_column_blob(st, 2);
    if (h && sqlite3_column_bytes(st, 2) == (int)sizeof t->hash) memcpy(t->hash, h, sizeof t->hash);
    copy_text(t->scopes, sizeof t->scopes, st, 3);
    t->created_ms = sqlite3_column_int64(st, 4);
    t->expires_ms = sqlite3_column_type(st, 5) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 5);
}

#define TOKEN_COLS "id, name, hash, scopes, created_ms, expires_ms"

static int sq_get(log_conn_t *c, const char *id, auth_token_row *t)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT " TOKEN_COLS " FROM tokens WHERE id = ?", &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st), ret;
    if (rc == SQLITE_ROW) {
        row_of(st, t);
        ret = 1;
    } else {
        ret = rc == SQLITE_DONE ? 0 : db_err(rc);
    }
    sq_stmt_done(c, st);
    return ret;
}

static int sq_each(log_conn_t *c, void (*fn)(void *ud, const auth_token_row *t), void *ud)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT " TOKEN_COLS " FROM tokens ORDER BY name", &st)) return LOG_EIO;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        auth_token_row t;
        row_of(st, &t);
        fn(ud, &t);
    }
    sq_stmt_done(c, st);
    return rc == SQLITE_DONE ? 0 : db_err(rc);
}

static int sq_remove(log_conn_t *c, const char *name_or_id)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "DELETE FROM tokens WHERE name = ?1 OR id = ?1", &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, name_or_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sq_stmt_done(c, st);
    if (rc != SQLITE_DONE) return db_err(rc);
    return sqlite3_changes(sq(c)->db) ? 0 : LOG_ENOTFOUND;
}

const store_tokens_ops sq_tokens_ops = {
    .insert = sq_insert,
    .get = sq_get,
    .each = sq_each,
    .remove = sq_remove,
};

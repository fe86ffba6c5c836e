/* The PostgreSQL engine's tokens (lib/auth.h): one row per token, its secret kept
 * only as a hash. */
#include "pg.h"

#include <stdio.h>
#include <string.h>

static int pg_insert(log_conn_t *c, const auth_token_row *t)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, t->id);
    pg_text(&p, t->name);
    pg_bytes(&p, t->hash, sizeof t->hash);
    pg_text(&p, t->scopes);
    pg_int(&p, t->created_ms);
    if (t->expires_ms >= 0) pg_int(&p, t->expires_ms);
    else pg_null(&p);
    PGresult *r = pg_run(c, "INSERT INTO tokens (id, name, hash, scopes, created_ms, expires_ms)"
                            " VALUES ($1::text, $2::text, $3::bytea, $4::text, $5::bigint, $6::bigint)"
                            " ON CONFLICT DO NOTHING", &p, 0, &rc);
    if (!r) return rc;
    rc = pg_affected(r) ? 0 : AUTH_EEXISTS;
    PQclear(r);
    return rc;
}

static void copy_text(char *dst, size_t cap, const PGresult *r, int row, int col)
{
    const char *t = pg_null_at(r, row, col) ? NULL : PQgetvalue(r, row, col);
    snprintf(dst, cap, "%s", t ? t : "");
}

/* Fill t from row i of a binary-form result of (id, name, hash, scopes,
 * created_ms, expires_ms). */
static void row_of(const PGresult *r, int i, auth_token_row *t)
{
    memset(t, 0, sizeof *t);
    copy_text(t->id, sizeof t->id, r, i, 0);
    copy_text(t->name, sizeof t->name, r, i, 1);
    if (!pg_null_at(r, i, 2) && PQgetlength(r, i, 2) == (int)sizeof t->hash)
        memcpy(t->hash, PQgetvalue(r, i, 2), sizeof t->hash);
    copy_text(t->scopes, sizeof t->scopes, r, i, 3);
    t->created_ms = pg_int_at(r, i, 4);
    t->expires_ms = pg_null_at(r, i, 5) ? -1 : pg_int_at(r, i, 5);
}

#define TOKEN_COLS "id, name, hash, scopes, created_ms, expires_ms"

static int pg_get(log_conn_t *c, const char *id, auth_token_row *t)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, id);
    PGresult *r = pg_run(c, "SELECT " TOKEN_COLS " FROM tokens WHERE id = $1::text", &p, 1, &rc);
    if (!r) return rc;
    rc = PQntuples(r) > 0;
    if (rc) row_of(r, 0, t);
    PQclear(r);
    return rc;
}

static int pg_each(log_conn_t *c, void (*fn)(void *ud, const auth_token_row *t), void *ud)
{
    int rc;
    PGresult *r = pg_run(c, "SELECT " TOKEN_COLS " FROM tokens ORDER BY name COLLATE \"C\"", NULL, 1, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        auth_token_row t;
        row_of(r, i, &t);
        fn(ud, &t);
    }
    PQclear(r);
    return 0;
}

static int pg_remove(log_conn_t *c, const char *name_or_id)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, name_or_id);
    PGresult *r = pg_run(c, "DELETE FROM tokens WHERE name = $1::text OR id = $1::text", &p, 0, &rc);
    if (!r) return rc;
    rc = pg_affected(r) ? 0 : LOG_ENOTFOUND;
    PQclear(r);
    return rc;
}

const store_tokens_ops pg_tokens_ops = {
    .insert = pg_insert,
    .get = pg_get,
    .each = pg_each,
    .remove = pg_remove,
};

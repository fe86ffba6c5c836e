/* The SQLite engine's side of a database copy (lib/dbcopy.h): the rows of
 * store_copy_tables raw, walked in key order inside one read transaction (a WAL
 * snapshot: writers of other processes go on meanwhile), and put back as they
 * were, ids included (a rowid given is kept; the next one SQLite picks is past
 * the highest). streams.rev is not copied: a copied stream has rev 0, so the
 * change counter starts over, which a new database's readers expect anyway.
 *
 * The statements are built from the constant table of lib/store.h (never from
 * input) and cached by text (sq_stmt). */
#include "sq.h"

#include <stdio.h>
#include <string.h>

static int exec(log_conn_t *c, const char *sql)
{
    int rc = sqlite3_exec(sq_db(c), sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sq_error(c, rc);
}

static int sq_read_begin(log_conn_t *c)
{
    return exec(c, "BEGIN");
}

static int sq_read_end(log_conn_t *c)
{
    return exec(c, "COMMIT");
}

static int sq_rows(log_conn_t *c, int table, int (*fn)(void *ud, const store_val *row), void *ud)
{
    if (table < 0 || table >= STORE_COPY_TABLES) return LOG_EINVAL;
    const store_table *t = &store_copy_tables[table];
    char key[256], sql[1024];
    if (store_copy_key(t, "", key, sizeof key) < 0) return LOG_EINVAL;
    int w = snprintf(sql, sizeof sql, "SELECT %s FROM %s ORDER BY %s", t->cols, t->name, key);
    if (w < 0 || (size_t)w >= sizeof sql) return LOG_EINVAL;
    sqlite3_stmt *st;
    int rc = sq_stmt(c, sql, &st);
    if (rc) return rc;
    int ncol = (int)strlen(t->types), src, stop = 0;
    store_val row[STORE_COPY_COLS];
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        for (int i = 0; i < ncol; i++) {
            store_val *v = &row[i];
            memset(v, 0, sizeof *v);
            if (sqlite3_column_type(st, i) == SQLITE_NULL) continue;
            switch (t->types[i]) {
            case 'I':
                v->type = STORE_INT;
                v->i = sqlite3_column_int64(st, i);
                break;
            case 'T':
                v->type = STORE_TEXT;
                v->p = sqlite3_column_text(st, i);
                v->n = (size_t)sqlite3_column_bytes(st, i);
                break;
            default:
                v->type = STORE_BLOB;
                v->p = sqlite3_column_blob(st, i);
                v->n = (size_t)sqlite3_column_bytes(st, i);
                if (!v->p) v->p = "";
                break;
            }
        }
        if ((stop = fn(ud, row))) break;
    }
    if (stop) {
        sq_stmt_done(c, st);
        return stop;
    }
    return sq_stmt_finish(c, st, src);
}

static int sq_put(log_conn_t *c, int table, const store_val *row)
{
    if (table < 0 || table >= STORE_COPY_TABLES) return LOG_EINVAL;
    const store_table *t = &store_copy_tables[table];
    int ncol = (int)strlen(t->types);
    char marks[3 * STORE_COPY_COLS + 1] = "", sql[1024];
    for (int i = 0; i < ncol; i++) memcpy(marks + 3 * i, i ? ", ?" : "?  ", 3);
    marks[3 * ncol] = 0;
    int w = snprintf(sql, sizeof sql, "INSERT INTO %s (%s) VALUES (%s)", t->name, t->cols, marks);
    if (w < 0 || (size_t)w >= sizeof sql) return LOG_EINVAL;
    sqlite3_stmt *st;
    int rc = sq_stmt(c, sql, &st);
    if (rc) return rc;
    for (int i = 0; i < ncol; i++) {
        const store_val *v = &row[i];
        switch (v->type) {
        case STORE_INT: sqlite3_bind_int64(st, i + 1, v->i); break;
        case STORE_TEXT: sqlite3_bind_text(st, i + 1, v->p, (int)v->n, SQLITE_TRANSIENT); break;
        case STORE_BLOB: sqlite3_bind_blob(st, i + 1, v->p, (int)v->n, SQLITE_TRANSIENT); break;
        default: sqlite3_bind_null(st, i + 1); break;
        }
    }
    return sq_stmt_run(c, st);
}

static int sq_count(log_conn_t *c, int table, int64_t *n)
{
    if (table < 0 || table >= STORE_COPY_TABLES) return LOG_EINVAL;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", store_copy_tables[table].name);
    sqlite3_stmt *st;
    int rc = sq_stmt(c, sql, &st);
    if (rc) return rc;
    int src = sqlite3_step(st);
    *n = src == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    return sq_stmt_finish(c, st, src);
}

static int sq_finish(log_conn_t *c)
{
    (void)c;
    return 0;
}

const store_copy_ops sq_copy_ops = {
    .read_begin = sq_read_begin,
    .read_end = sq_read_end,
    .rows = sq_rows,
    .put = sq_put,
    .count = sq_count,
    .finish = sq_finish,
};

/* The PostgreSQL engine's side of a database copy (lib/dbcopy.h): the rows of
 * store_copy_tables raw, walked in key order (text keys in byte order, COLLATE
 * "C", as SQLite compares them) through a binary cursor a batch at a time, inside
 * one REPEATABLE READ, READ ONLY transaction (one snapshot, nothing held that
 * writers wait for); put back as they were, ids included, the identity counters
 * of streams and recordings then moved past the highest id copied (finish).
 * streams.xid is not copied: each row put takes its transaction's, as any change.
 *
 * The statements are built from the constant table of lib/store.h (never from
 * input). */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COPY_BATCH 500          /* rows a FETCH brings */
#define STR_(x) #x
#define STR(x) STR_(x)

static int pq_read_begin(log_conn_t *c)
{
    return pg_simple(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
}

static int pq_read_end(log_conn_t *c)
{
    return pg_simple(c, "COMMIT");
}

static const char *cast_of(char type)
{
    return type == 'I' ? "bigint" : type == 'T' ? "text" : "bytea";
}

static int pq_rows(log_conn_t *c, int table, int (*fn)(void *ud, const store_val *row), void *ud)
{
    if (table < 0 || table >= STORE_COPY_TABLES) return LOG_EINVAL;
    const store_table *t = &store_copy_tables[table];
    char key[256], sql[1024];
    if (store_copy_key(t, " COLLATE \"C\"", key, sizeof key) < 0) return LOG_EINVAL;
    int w = snprintf(sql, sizeof sql, "DECLARE copy_rows BINARY NO SCROLL CURSOR FOR SELECT %s FROM %s ORDER BY %s",
                     t->cols, t->name, key);
    if (w < 0 || (size_t)w >= sizeof sql) return LOG_EINVAL;
    int own_tx = !pg_in_tx(c), rc;
    if (own_tx && (rc = pq_read_begin(c))) return rc;
    if ((rc = pg_simple(c, sql))) goto out;
    int ncol = (int)strlen(t->types);
    for (;;) {
        PGresult *r = PQexec(pgc(c)->pg, "FETCH " STR(COPY_BATCH) " FROM copy_rows");
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            rc = pg_error(c, r);
            PQclear(r);
            goto out;
        }
        int n = PQntuples(r);
        for (int k = 0; k < n && !rc; k++) {
            store_val row[STORE_COPY_COLS];
            for (int i = 0; i < ncol; i++) {
                store_val *v = &row[i];
                memset(v, 0, sizeof *v);
                if (pg_null_at(r, k, i)) continue;
                if (t->types[i] == 'I') {
                    v->type = STORE_INT;
                    v->i = pg_int_at(r, k, i);
                } else {
                    v->type = t->types[i] == 'T' ? STORE_TEXT : STORE_BLOB;
                    v->p = PQgetvalue(r, k, i);
                    v->n = (size_t)PQgetlength(r, k, i);
                }
            }
            rc = fn(ud, row);
        }
        PQclear(r);
        if (rc || n < COPY_BATCH) break;
    }
    int rc2 = pg_simple(c, "CLOSE copy_rows");
    if (!rc) rc = rc2;
out:
    if (own_tx) {
        if (rc) pg_simple(c, "ROLLBACK");
        else rc = pq_read_end(c);
    }
    return rc;
}

static int pq_put(log_conn_t *c, int table, const store_val *row)
{
    if (table < 0 || table >= STORE_COPY_TABLES) return LOG_EINVAL;
    const store_table *t = &store_copy_tables[table];
    int ncol = (int)strlen(t->types);
    char marks[STORE_COPY_COLS * 16] = "", sql[1536];
    size_t len = 0;
    for (int i = 0; i < ncol; i++) {
        int w = snprintf(marks + len, sizeof marks - len, "%s$%d::%s", i ? ", " : "", i + 1, cast_of(t->types[i]));
        if (w < 0 || (size_t)w >= sizeof marks - len) return LOG_EINVAL;
        len += (size_t)w;
    }
    int w = snprintf(sql, sizeof sql, "INSERT INTO %s (%s) VALUES (%s)", t->name, t->cols, marks);
    if (w < 0 || (size_t)w >= sizeof sql) return LOG_EINVAL;
    pg_params p;
    pg_params_init(&p);
    /* Text goes as text parameters, NUL-terminated: a copy of each. */
    char *texts[STORE_COPY_COLS] = {0};
    int rc = 0;
    for (int i = 0; i < ncol; i++) {
        const store_val *v = &row[i];
        switch (v->type) {
        case STORE_INT: pg_int(&p, v->i); break;
        case STORE_TEXT:
            if (memchr(v->p, 0, v->n)) {
                rc = LOG_EINVAL;        /* PostgreSQL's text holds no NUL byte */
                goto out;
            }
            if (!(texts[i] = malloc(v->n + 1))) {
                rc = LOG_EIO;
                goto out;
            }
            memcpy(texts[i], v->p, v->n);
            texts[i][v->n] = 0;
            pg_text(&p, texts[i]);
            break;
        case STORE_BLOB: pg_bytes(&p, v->n ? v->p : "", v->n); break;
        default: pg_null(&p); break;
        }
    }
    rc = pg_exec(c, sql, &p);
out:
    for (int i = 0; i < ncol; i++) free(texts[i]);
    return rc;
}

static int pq_count(log_conn_t *c, int table, int64_t *n)
{
    if (table < 0 || table >= STORE_COPY_TABLES) return LOG_EINVAL;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", store_copy_tables[table].name);
    int rc;
    PGresult *r = pg_run(c, sql, NULL, 0, &rc);
    if (!r) return rc;
    *n = pg_int_of(r, 0, 0);
    PQclear(r);
    return 0;
}

static int pq_finish(log_conn_t *c)
{
    int rc = pg_exec(c, "SELECT setval(pg_get_serial_sequence('streams', 'id'), coalesce(max(id), 0) + 1, false)"
                        " FROM streams", NULL);
    if (!rc)
        rc = pg_exec(c, "SELECT setval(pg_get_serial_sequence('recordings', 'id'), coalesce(max(id), 0) + 1, false)"
                        " FROM recordings", NULL);
    /* The rows put named nowhere in stream_changes: the change feeds scan them. */
    if (!rc) rc = pg_exec(c, "INSERT INTO stream_changes (ids) VALUES (NULL)", NULL);
    return rc;
}

const store_copy_ops pg_copy_ops = {
    .read_begin = pq_read_begin,
    .read_end = pq_read_end,
    .rows = pq_rows,
    .put = pq_put,
    .count = pq_count,
    .finish = pq_finish,
};

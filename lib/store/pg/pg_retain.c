/* The PostgreSQL engine's retention (lib/retain.h, lib/store.h: store_retain_ops),
 * in the same rows as SQLite's (sq_retain.c); paths and ids compare byte by byte
 * (COLLATE "C"). */
#include "pg.h"

#include <stdio.h>
#include <string.h>

static int pg_scan(log_conn_t *c, const char *prefix, int64_t before_ms, const char *before_path, int max,
                   int (*fn)(void *ud, const retain_item *it), void *ud)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, prefix);
    pg_int(&p, before_ms);
    pg_text(&p, before_path ? before_path : "");
    pg_int(&p, max);
    PGresult *r = pg_run(c, "SELECT st.path, st.created_ms, st.access_ms, st.forks, st.tail_seq - st.fork_seq,"
                            " s.id, s.status"
                            " FROM streams st LEFT JOIN sessions s ON left(st.path, 9) = 'sessions/'"
                            "   AND s.id = substr(st.path, 10) AND s.deleted = 0"
                            " WHERE st.deleted = 0 AND left(st.path, char_length($1::text)) = $1::text"
                            "   AND (st.created_ms < $2::bigint OR (st.created_ms = $2::bigint"
                            "        AND st.path COLLATE \"C\" < $3::text COLLATE \"C\"))"
                            " ORDER BY st.created_ms DESC, st.path COLLATE \"C\" DESC LIMIT $4::bigint",
                         &p, 0, &rc);
    if (!r) return rc;
    int n = PQntuples(r);
    for (int i = 0; i < n; i++) {
        retain_item it;
        it.path = pg_text_of(r, i, 0);
        it.created_ms = pg_int_of(r, i, 1);
        it.access_ms = pg_int_of(r, i, 2);
        it.forks = pg_int_of(r, i, 3);
        it.own_msgs = pg_int_of(r, i, 4);
        it.session = pg_null_at(r, i, 5) ? NULL : pg_text_of(r, i, 5);
        it.status = pg_null_at(r, i, 6) ? NULL : pg_text_of(r, i, 6);
        if (it.path && fn(ud, &it)) break;
    }
    PQclear(r);
    return 0;
}

static int pg_thin(log_conn_t *c, const char *after_id, int max, int keep_every, char *last, size_t lastcap,
                   int64_t *removed)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, after_id);
    pg_int(&p, max);
    PGresult *r = pg_run(c, "SELECT id, (status IN ('completed', 'failed', 'cancelled') AND deleted = 0)::int"
                            " FROM sessions WHERE id COLLATE \"C\" > $1::text COLLATE \"C\""
                            " ORDER BY id COLLATE \"C\" LIMIT $2::bigint", &p, 0, &rc);
    if (!r) return rc;
    int n = PQntuples(r);
    rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const char *id = pg_text_of(r, i, 0);
        snprintf(last, lastcap, "%s", id ? id : "");
        if (!id || !pg_int_of(r, i, 1)) continue;
        pg_params d;
        pg_params_init(&d);
        pg_text(&d, id);
        pg_int(&d, keep_every);
        pg_int(&d, sstore_snapshot_phase(id));
        PGresult *x = pg_run(c, "DELETE FROM snapshots WHERE session = $1::text AND seq % $2::bigint <> 0"
                                " AND (seq + $3::bigint) % $2::bigint <> 0"
                                " AND seq < (SELECT max(seq) FROM snapshots WHERE session = $1::text)"
                                " AND seq > (SELECT min(seq) FROM snapshots WHERE session = $1::text)",
                             &d, 0, &rc);
        if (x) *removed += pg_affected(x);
        PQclear(x);
    }
    PQclear(r);
    return rc ? rc : n;
}

static int pg_add(log_conn_t *c, const char *what, int64_t n)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, what);
    pg_int(&p, n);
    return pg_exec(c, "INSERT INTO retention_totals (what, n) VALUES ($1::text, $2::bigint)"
                      " ON CONFLICT (what) DO UPDATE SET n = retention_totals.n + EXCLUDED.n", &p);
}

static int pg_totals(log_conn_t *c, void (*fn)(void *ud, const char *what, int64_t n), void *ud)
{
    int rc;
    PGresult *r = pg_run(c, "SELECT what, n FROM retention_totals ORDER BY what COLLATE \"C\"", NULL, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *w = pg_text_of(r, i, 0);
        if (w) fn(ud, w, pg_int_of(r, i, 1));
    }
    PQclear(r);
    return 0;
}

const store_retain_ops pg_retain_ops = {
    .scan = pg_scan,
    .thin = pg_thin,
    .add = pg_add,
    .totals = pg_totals,
};

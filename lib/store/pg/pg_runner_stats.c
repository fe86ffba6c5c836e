/* The PostgreSQL engine's runner figures (lib/rstats.h): one row per runner id,
 * and the sessions counted by status. */
#include "pg.h"

#include <stdio.h>
#include <string.h>

static int pg_put(log_conn_t *c, const rstats *s, int start)
{
    const char *sql =
        start
            ? "INSERT INTO runner_stats (owner, pid, started_ms, updated_ms, starts, sessions, leased,"
              " in_flight, requests, retries, failures, loops, loop_max_ms, dropped)"
              " VALUES ($1::text, $2::bigint, $3::bigint, $4::bigint, 1, $5::bigint, $6::bigint, $7::bigint,"
              " $8::bigint, $9::bigint, $10::bigint, $11::bigint, $12::bigint, $13::bigint)"
              " ON CONFLICT (owner) DO UPDATE SET pid = EXCLUDED.pid, started_ms = EXCLUDED.started_ms,"
              " updated_ms = EXCLUDED.updated_ms, starts = runner_stats.starts + 1,"
              " sessions = EXCLUDED.sessions, leased = EXCLUDED.leased, in_flight = EXCLUDED.in_flight,"
              " requests = EXCLUDED.requests, retries = EXCLUDED.retries, failures = EXCLUDED.failures,"
              " loops = EXCLUDED.loops, loop_max_ms = EXCLUDED.loop_max_ms, dropped = EXCLUDED.dropped"
            : "INSERT INTO runner_stats (owner, pid, started_ms, updated_ms, starts, sessions, leased,"
              " in_flight, requests, retries, failures, loops, loop_max_ms, dropped)"
              " VALUES ($1::text, $2::bigint, $3::bigint, $4::bigint, 1, $5::bigint, $6::bigint, $7::bigint,"
              " $8::bigint, $9::bigint, $10::bigint, $11::bigint, $12::bigint, $13::bigint)"
              " ON CONFLICT (owner) DO UPDATE SET pid = EXCLUDED.pid, started_ms = EXCLUDED.started_ms,"
              " updated_ms = EXCLUDED.updated_ms,"
              " sessions = EXCLUDED.sessions, leased = EXCLUDED.leased, in_flight = EXCLUDED.in_flight,"
              " requests = EXCLUDED.requests, retries = EXCLUDED.retries, failures = EXCLUDED.failures,"
              " loops = EXCLUDED.loops, loop_max_ms = EXCLUDED.loop_max_ms, dropped = EXCLUDED.dropped";
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, s->owner);
    const int64_t v[] = {s->pid, s->started_ms, s->updated_ms, s->sessions, s->leased,
                         s->in_flight, s->requests, s->retries, s->failures, s->loops,
                         s->loop_max_ms, s->dropped};
    for (int i = 0; i < (int)(sizeof v / sizeof v[0]); i++) pg_int(&p, v[i]);
    return pg_exec(c, sql, &p);
}

/* A database without the table yet reads as empty, as on SQLite: 1 if it has it, 0
 * if not, or LOG_E*. */
static int has_table(log_conn_t *c, const char *table)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, table);
    PGresult *r = pg_run(c, "SELECT to_regclass($1::text) IS NOT NULL", &p, 0, &rc);
    if (!r) return rc;
    const char *t = pg_text_of(r, 0, 0);
    rc = PQntuples(r) > 0 && t && t[0] == 't';
    PQclear(r);
    return rc;
}

static int pg_each(log_conn_t *c, void (*fn)(void *ud, const rstats *row), void *ud)
{
    int rc = has_table(c, "runner_stats");
    if (rc <= 0) return rc;
    PGresult *r = pg_run(c, "SELECT owner, pid, started_ms, updated_ms, starts, sessions, leased,"
                            " in_flight, requests, retries, failures, loops, loop_max_ms, dropped"
                            " FROM runner_stats ORDER BY owner COLLATE \"C\"", NULL, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        rstats s;
        memset(&s, 0, sizeof s);
        const char *o = pg_text_of(r, i, 0);
        snprintf(s.owner, sizeof s.owner, "%s", o ? o : "");
        int64_t *f[] = {&s.pid, &s.started_ms, &s.updated_ms, &s.starts, &s.sessions, &s.leased,
                        &s.in_flight, &s.requests, &s.retries, &s.failures, &s.loops, &s.loop_max_ms,
                        &s.dropped};
        for (int k = 0; k < (int)(sizeof f / sizeof f[0]); k++) *f[k] = pg_int_of(r, i, k + 1);
        fn(ud, &s);
    }
    PQclear(r);
    return 0;
}

static int pg_sessions(log_conn_t *c, void (*fn)(void *ud, const char *status, int64_t n), void *ud)
{
    int rc = has_table(c, "sessions");
    if (rc <= 0) return rc;
    PGresult *r = pg_run(c, "SELECT status, count(*) FROM sessions WHERE deleted = 0 GROUP BY status"
                            " ORDER BY status COLLATE \"C\"", NULL, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *s = pg_text_of(r, i, 0);
        fn(ud, s ? s : "", pg_int_of(r, i, 1));
    }
    PQclear(r);
    return 0;
}

/* The figures document of a runner (sql/pg/011), replaced whole. */
static int pg_figures_put(log_conn_t *c, const char *owner, const char *doc)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, owner);
    pg_text(&p, doc);
    return pg_exec(c,
                   "INSERT INTO runner_figures (owner, doc) VALUES ($1::text, $2::text)"
                   " ON CONFLICT (owner) DO UPDATE SET doc = EXCLUDED.doc",
                   &p);
}

static int pg_figures_each(log_conn_t *c, void (*fn)(void *ud, const char *doc), void *ud)
{
    int rc = has_table(c, "runner_figures");
    if (rc <= 0) return rc;
    PGresult *r = pg_run(c, "SELECT doc FROM runner_figures ORDER BY owner COLLATE \"C\"", NULL, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *d = pg_text_of(r, i, 0);
        if (d) fn(ud, d);
    }
    PQclear(r);
    return 0;
}

const store_rstats_ops pg_rstats_ops = {
    .put = pg_put,
    .each = pg_each,
    .sessions = pg_sessions,
    .figures_put = pg_figures_put,
    .figures_each = pg_figures_each,
};

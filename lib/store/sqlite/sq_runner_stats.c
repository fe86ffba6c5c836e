/* The SQLite engine's runner figures (lib/rstats.h): one row per runner id, and
 * the sessions counted by status. */
#include "sq.h"

#include <stdio.h>
#include <string.h>

static int sq_put(log_conn_t *c, const rstats *s, int start)
{
    sqlite3_stmt *st;
    const char *sql =
        start
            ? "INSERT INTO runner_stats (owner, pid, started_ms, updated_ms, starts, sessions, leased,"
              " in_flight, requests, retries, failures, loops, loop_max_ms, dropped)"
              " VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
              " ON CONFLICT (owner) DO UPDATE SET pid = ?2, started_ms = ?3, updated_ms = ?4,"
              " starts = starts + 1, sessions = ?5, leased = ?6, in_flight = ?7, requests = ?8,"
              " retries = ?9, failures = ?10, loops = ?11, loop_max_ms = ?12, dropped = ?13"
            : "INSERT INTO runner_stats (owner, pid, started_ms, updated_ms, starts, sessions, leased,"
              " in_flight, requests, retries, failures, loops, loop_max_ms, dropped)"
              " VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
              " ON CONFLICT (owner) DO UPDATE SET pid = ?2, started_ms = ?3, updated_ms = ?4,"
              " sessions = ?5, leased = ?6, in_flight = ?7, requests = ?8,"
              " retries = ?9, failures = ?10, loops = ?11, loop_max_ms = ?12, dropped = ?13";
    if (sq_stmt(c, sql, &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, s->owner, -1, SQLITE_STATIC);
    const int64_t v[] = {s->pid, s->started_ms, s->updated_ms, s->sessions, s->leased,
                         s->in_flight, s->requests, s->retries, s->failures, s->loops,
                         s->loop_max_ms, s->dropped};
    for (int i = 0; i < (int)(sizeof v / sizeof v[0]); i++) sqlite3_bind_int64(st, i + 2, v[i]);
    int rc = sqlite3_step(st);
    sq_stmt_done(c, st);
    return rc == SQLITE_DONE ? 0 : (rc & 0xff) == SQLITE_BUSY ? LOG_EBUSY : LOG_EIO;
}

/* "no such table" (a database migrated by an older binary) reads as empty. */
static int prepare(log_conn_t *c, const char *sql, sqlite3_stmt **st)
{
    if (sqlite3_prepare_v2(sq_db(c), sql, -1, st, NULL) == SQLITE_OK) return 0;
    return strstr(sqlite3_errmsg(sq_db(c)), "no such table") ? 1 : LOG_EIO;
}

static int sq_each(log_conn_t *c, void (*fn)(void *ud, const rstats *row), void *ud)
{
    sqlite3_stmt *st;
    int rc = prepare(c, "SELECT owner, pid, started_ms, updated_ms, starts, sessions, leased,"
                        " in_flight, requests, retries, failures, loops, loop_max_ms, dropped"
                        " FROM runner_stats ORDER BY owner", &st);
    if (rc) return rc > 0 ? 0 : rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        rstats r;
        memset(&r, 0, sizeof r);
        const char *o = (const char *)sqlite3_column_text(st, 0);
        snprintf(r.owner, sizeof r.owner, "%s", o ? o : "");
        int64_t *f[] = {&r.pid, &r.started_ms, &r.updated_ms, &r.starts, &r.sessions, &r.leased,
                        &r.in_flight, &r.requests, &r.retries, &r.failures, &r.loops, &r.loop_max_ms,
                        &r.dropped};
        for (int i = 0; i < (int)(sizeof f / sizeof f[0]); i++) *f[i] = sqlite3_column_int64(st, i + 1);
        fn(ud, &r);
    }
    sq_stmt_done(c, st);
    return rc == SQLITE_DONE ? 0 : LOG_EIO;
}

static int sq_sessions(log_conn_t *c, void (*fn)(void *ud, const char *status, int64_t n), void *ud)
{
    sqlite3_stmt *st;
    int rc = prepare(c, "SELECT status, count(*) FROM sessions WHERE deleted = 0 GROUP BY status"
                        " ORDER BY status", &st);
    if (rc) return rc > 0 ? 0 : rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *s = (const char *)sqlite3_column_text(st, 0);
        fn(ud, s ? s : "", sqlite3_column_int64(st, 1));
    }
    sq_stmt_done(c, st);
    return rc == SQLITE_DONE ? 0 : LOG_EIO;
}

const store_rstats_ops sq_rstats_ops = {
    .put = sq_put,
    .each = sq_each,
    .sessions = sq_sessions,
};

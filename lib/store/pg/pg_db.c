/* The PostgreSQL engine's migrations: the numbered files of sql/pg/, compiled into
 * pg_migrations[] (tools/sql2c.sh pg), applied in order in one transaction and
 * recorded in schema_version, as SQLite's are (lib/store/sqlite/db.c). The
 * transaction first takes a transaction-scoped advisory lock, so that several
 * processes starting together against a new database migrate it once: the others
 * wait on the lock, then find every migration recorded. */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../timefmt.h"

struct pg_migration {
    int version;
    const char *name;
    const char *sql;
};
extern const struct pg_migration pg_migrations[];
extern const int pg_nmigrations;

/* The advisory lock's key: "dstream" in ASCII, any constant no one else uses. */
#define PG_MIGRATE_LOCK "7238905291990125"

int pg_schema_version(void)
{
    return pg_nmigrations ? pg_migrations[pg_nmigrations - 1].version : 0;
}

/* Run sql (one or several statements, no parameters); 0, or -1 with err. */
static int exec(PGconn *pg, const char *sql, char *err, size_t errlen)
{
    PGresult *r = PQexec(pg, sql);
    ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    int ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
    if (!ok) {
        snprintf(err, errlen, "%s", PQerrorMessage(pg));
        size_t n = strlen(err);
        while (n && err[n - 1] == '\n') err[--n] = 0;
    }
    PQclear(r);
    return ok ? 0 : -1;
}

int pg_migrate(PGconn *pg, char *err, size_t errlen)
{
    int version = 0;
    PGresult *r = NULL;
    if (exec(pg, "BEGIN", err, errlen)) return -1;
    if (exec(pg, "SELECT pg_advisory_xact_lock(" PG_MIGRATE_LOCK ")", err, errlen) ||
        exec(pg, "CREATE TABLE IF NOT EXISTS schema_version ("
                 " version bigint PRIMARY KEY, name text NOT NULL, applied_ms bigint NOT NULL)",
             err, errlen))
        goto fail;
    r = PQexec(pg, "SELECT version FROM schema_version");
    if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
        snprintf(err, errlen, "%s", PQerrorMessage(pg));
        goto fail;
    }
    int n = PQntuples(r);
    for (int i = 0; i < n; i++) {
        int v = (int)strtol(PQgetvalue(r, i, 0), NULL, 10);
        if (v > version) version = v;
    }
    if (version > pg_schema_version()) {
        snprintf(err, errlen, "database schema %d is newer than this binary (%d)", version,
                 pg_schema_version());
        goto fail;
    }
    /* Every migration not recorded yet, not only those above the highest (as
     * SQLite's: branches may land out of order). */
    for (int i = 0; i < pg_nmigrations; i++) {
        const struct pg_migration *m = &pg_migrations[i];
        int applied = 0;
        for (int k = 0; k < n && !applied; k++)
            applied = (int)strtol(PQgetvalue(r, k, 0), NULL, 10) == m->version;
        if (applied) continue;
        if (exec(pg, m->sql, err, errlen)) goto fail;
        char ver[16], ms[24];
        snprintf(ver, sizeof ver, "%d", m->version);
        snprintf(ms, sizeof ms, "%lld", (long long)timefmt_now_ms());
        const char *vals[3] = {ver, m->name, ms};
        PGresult *ins = PQexecParams(pg, "INSERT INTO schema_version VALUES ($1, $2, $3)", 3, NULL, vals,
                                     NULL, NULL, 0);
        int ok = ins && PQresultStatus(ins) == PGRES_COMMAND_OK;
        if (!ok) snprintf(err, errlen, "%s", PQerrorMessage(pg));
        PQclear(ins);
        if (!ok) goto fail;
        if (m->version > version) version = m->version;
    }
    PQclear(r);
    r = NULL;
    if (exec(pg, "COMMIT", err, errlen)) goto fail;
    return version;
fail:
    PQclear(r);
    PGresult *rb = PQexec(pg, "ROLLBACK");
    PQclear(rb);
    return -1;
}

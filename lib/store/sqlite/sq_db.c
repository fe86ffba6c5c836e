#include "sq_db.h"

#include "../../timefmt.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Generated from sql/sqlite/NNN_*.sql by the Makefile (lib/migrations.c). */
struct db_migration {
    int version;
    const char *name;
    const char *sql;
};
extern const struct db_migration db_migrations[];
extern const int db_nmigrations;

void db_opts_default(db_opts *o)
{
    o->synchronous_full = 1;
    o->busy_timeout_ms = 5000;
    o->migrate = 1;
}

int db_schema_version(void)
{
    return db_nmigrations ? db_migrations[db_nmigrations - 1].version : 0;
}

static int exec(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK) return 0;
    snprintf(err, errlen, "%s", msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    return -1;
}

int db_migrate(sqlite3 *db, char *err, size_t errlen)
{
    int version = 0;
    sqlite3_stmt *st = NULL;
    if (exec(db, "BEGIN IMMEDIATE", err, errlen)) return -1;
    if (exec(db, "CREATE TABLE IF NOT EXISTS schema_version ("
                 " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms INTEGER NOT NULL)",
             err, errlen))
        goto fail;
    if (sqlite3_prepare_v2(db, "SELECT coalesce(max(version), 0) FROM schema_version", -1, &st,
                           NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        snprintf(err, errlen, "%s", sqlite3_errmsg(db));
        goto fail;
    }
    version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    if (version > db_schema_version()) {
        snprintf(err, errlen, "database schema %d is newer than this binary (%d)", version,
                 db_schema_version());
        goto fail;
    }
    /* Apply every migration not recorded yet, not only those above the highest: a
     * database that met a later-numbered migration first (branches landing out of
     * order) still gets the lower one. */
    for (int i = 0; i < db_nmigrations; i++) {
        const struct db_migration *m = &db_migrations[i];
        int applied = 0;
        if (sqlite3_prepare_v2(db, "SELECT 1 FROM schema_version WHERE version = ?", -1, &st, NULL) != SQLITE_OK) {
            snprintf(err, errlen, "%s", sqlite3_errmsg(db));
            goto fail;
        }
        sqlite3_bind_int(st, 1, m->version);
        applied = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
        st = NULL;
        if (applied) continue;
        if (exec(db, m->sql, err, errlen)) goto fail;
        if (sqlite3_prepare_v2(db, "INSERT INTO schema_version VALUES (?, ?, ?)", -1, &st,
                               NULL) != SQLITE_OK) {
            snprintf(err, errlen, "%s", sqlite3_errmsg(db));
            goto fail;
        }
        sqlite3_bind_int(st, 1, m->version);
        sqlite3_bind_text(st, 2, m->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, timefmt_now_ms());
        if (sqlite3_step(st) != SQLITE_DONE) {
            snprintf(err, errlen, "%s", sqlite3_errmsg(db));
            goto fail;
        }
        sqlite3_finalize(st);
        st = NULL;
        if (m->version > version) version = m->version;
    }
    if (exec(db, "COMMIT", err, errlen)) goto fail;
    return version;
fail:
    sqlite3_finalize(st);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

int db_cap(sqlite3 *db, int64_t max_bytes, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    long long page = 4096;
    char sql[96];
    if (max_bytes <= 0) return 0;
    if (sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) page = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    /* A pragma takes no bound parameter; the value is a number we computed. */
    snprintf(sql, sizeof sql, "PRAGMA max_page_count=%lld",
             (long long)(max_bytes / (page > 0 ? page : 4096)) + 1);
    return exec(db, sql, err, errlen);
}

int db_open(const char *path, const db_opts *o, sqlite3 **out, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    char sql[128];
    *out = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout(db, o->busy_timeout_ms);
    snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", o->synchronous_full ? "FULL" : "NORMAL");
    /* journal_mode returns a row; sqlite3_exec ignores it. */
    /* temp_store: the statement journals of savepoints (every grouped write has
     * one) stay in memory instead of a temporary file created and deleted each time. */
    if (exec(db, "PRAGMA journal_mode=WAL", err, errlen) || exec(db, sql, err, errlen) ||
        exec(db, "PRAGMA foreign_keys=OFF", err, errlen) || exec(db, "PRAGMA temp_store=MEMORY", err, errlen))
        goto fail;
    if (o->migrate && db_migrate(db, err, errlen) < 0) goto fail;
    *out = db;
    return 0;
fail:
    sqlite3_close_v2(db);
    return -1;
}

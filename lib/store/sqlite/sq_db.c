#include "sq_db.h"

#include "../../chain.h"
#include "../../timefmt.h"

#include <stdio.h>
#include <stdlib.h>
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
    o->cache_kib = 0;
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

/* The migration that adds the hash chain (sql/sqlite/017_chain.sql): the rows
 * already there get their digests from chain_fill, in its transaction. */
#define CHAIN_MIGRATION 17
#define CHAIN_FILL_BATCH 256

static int prep(sqlite3 *db, const char *sql, sqlite3_stmt **st, char *err, size_t errlen)
{
    if (sqlite3_prepare_v2(db, sql, -1, st, NULL) == SQLITE_OK) return 0;
    snprintf(err, errlen, "chain: %s", sqlite3_errmsg(db));
    return -1;
}

int db_chain_start(sqlite3_stmt *anc, sqlite3_stmt *dig, int64_t p, int64_t seq, uint8_t out[CHAIN_LEN])
{
    memset(out, 0, CHAIN_LEN);
    for (int hops = 0; hops < 64; hops++) {
        sqlite3_reset(anc);
        sqlite3_bind_int64(anc, 1, p);
        if (sqlite3_step(anc) != SQLITE_ROW) return -1;
        int64_t up = sqlite3_column_type(anc, 0) == SQLITE_NULL ? 0 : sqlite3_column_int64(anc, 0);
        int64_t fork_seq = sqlite3_column_int64(anc, 1);
        sqlite3_reset(anc);
        if (seq >= fork_seq || !up) break;
        p = up;
    }
    sqlite3_reset(dig);
    sqlite3_bind_int64(dig, 1, p);
    sqlite3_bind_int64(dig, 2, seq);
    int rc = -1;
    if (sqlite3_step(dig) == SQLITE_ROW && sqlite3_column_bytes(dig, 0) == CHAIN_LEN) {
        memcpy(out, sqlite3_column_blob(dig, 0), CHAIN_LEN);
        rc = 0;
    }
    sqlite3_reset(dig);
    return rc;
}

/* Every stream's chain over the rows written before the chain existed, streams in
 * order of id (a parent before its forks, whose chains start from its digests),
 * each one's messages in batches read whole before they are updated (no statement
 * updates a table another is still walking). 0, or -1 with err. */
static int chain_fill(sqlite3 *db, char *err, size_t errlen)
{
    sqlite3_stmt *list = NULL, *anc = NULL, *dig = NULL, *msgs = NULL, *upd = NULL, *tail = NULL;
    int64_t *ids = NULL, *parents = NULL, *forks = NULL;
    size_t n = 0, cap = 0;
    int rc = -1;
    if (prep(db, "SELECT id, coalesce(parent, 0), fork_seq FROM streams ORDER BY id", &list, err, errlen) ||
        prep(db, "SELECT parent, fork_seq FROM streams WHERE id = ?", &anc, err, errlen) ||
        prep(db, "SELECT digest FROM messages WHERE stream = ? AND seq = ?", &dig, err, errlen) ||
        prep(db, "SELECT seq, pos, data FROM messages WHERE stream = ? AND seq >= ? ORDER BY seq LIMIT ?", &msgs,
             err, errlen) ||
        prep(db, "UPDATE messages SET digest = ? WHERE stream = ? AND seq = ?", &upd, err, errlen) ||
        prep(db, "UPDATE streams SET digest = ? WHERE id = ?", &tail, err, errlen))
        goto out;
    while (sqlite3_step(list) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            int64_t *a = realloc(ids, cap * sizeof *a), *b = realloc(parents, cap * sizeof *b);
            int64_t *f = realloc(forks, cap * sizeof *f);
            if (a) ids = a;
            if (b) parents = b;
            if (f) forks = f;
            if (!a || !b || !f) abort();
        }
        ids[n] = sqlite3_column_int64(list, 0);
        parents[n] = sqlite3_column_int64(list, 1);
        forks[n++] = sqlite3_column_int64(list, 2);
    }
    sqlite3_finalize(list);
    list = NULL;
    for (size_t i = 0; i < n; i++) {
        uint8_t d[CHAIN_LEN] = {0}, batch[CHAIN_FILL_BATCH][CHAIN_LEN];
        int64_t seqs[CHAIN_FILL_BATCH], next = forks[i];
        if (parents[i] && forks[i] > 0) db_chain_start(anc, dig, parents[i], forks[i] - 1, d);
        for (;;) {
            int k = 0, step;
            sqlite3_reset(msgs);
            sqlite3_bind_int64(msgs, 1, ids[i]);
            sqlite3_bind_int64(msgs, 2, next);
            sqlite3_bind_int(msgs, 3, CHAIN_FILL_BATCH);
            while ((step = sqlite3_step(msgs)) == SQLITE_ROW) {
                offset_t at = {(uint64_t)sqlite3_column_int64(msgs, 0), (uint64_t)sqlite3_column_int64(msgs, 1)};
                chain_link(d, at, sqlite3_column_blob(msgs, 2), (size_t)sqlite3_column_bytes(msgs, 2), d);
                memcpy(batch[k], d, CHAIN_LEN);
                seqs[k++] = (int64_t)at.seq;
            }
            sqlite3_reset(msgs);
            if (step != SQLITE_DONE) {
                snprintf(err, errlen, "chain: %s", sqlite3_errstr(step));
                goto out;
            }
            for (int j = 0; j < k; j++) {
                sqlite3_reset(upd);
                sqlite3_bind_blob(upd, 1, batch[j], CHAIN_LEN, SQLITE_STATIC);
                sqlite3_bind_int64(upd, 2, ids[i]);
                sqlite3_bind_int64(upd, 3, seqs[j]);
                if (sqlite3_step(upd) != SQLITE_DONE) {
                    snprintf(err, errlen, "chain: %s", sqlite3_errmsg(db));
                    goto out;
                }
            }
            if (k < CHAIN_FILL_BATCH) break;
            next = seqs[k - 1] + 1;
        }
        sqlite3_reset(tail);
        sqlite3_bind_blob(tail, 1, d, CHAIN_LEN, SQLITE_STATIC);
        sqlite3_bind_int64(tail, 2, ids[i]);
        if (sqlite3_step(tail) != SQLITE_DONE) {
            snprintf(err, errlen, "chain: %s", sqlite3_errmsg(db));
            goto out;
        }
    }
    rc = 0;
out:
    sqlite3_finalize(list);
    sqlite3_finalize(anc);
    sqlite3_finalize(dig);
    sqlite3_finalize(msgs);
    sqlite3_finalize(upd);
    sqlite3_finalize(tail);
    free(ids);
    free(parents);
    free(forks);
    return rc;
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
        if (m->version == CHAIN_MIGRATION && chain_fill(db, err, errlen)) goto fail;
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
    /* Under FULL a commit's WAL frames go out in one write (sq_vfs.c). */
    if (sqlite3_open_v2(path, &db, flags, o->synchronous_full ? sq_vfs_name() : NULL) != SQLITE_OK) {
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
    if (o->cache_kib > 0) {
        snprintf(sql, sizeof sql, "PRAGMA cache_size=-%d", o->cache_kib);
        if (exec(db, sql, err, errlen)) goto fail;
    }
    if (o->migrate && db_migrate(db, err, errlen) < 0) goto fail;
    *out = db;
    return 0;
fail:
    sqlite3_close_v2(db);
    return -1;
}

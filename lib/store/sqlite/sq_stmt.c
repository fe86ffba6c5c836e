/* The SQLite engine's statement cache: each connection keeps the statements its
 * files prepare by SQL text (see sqlite.h). A leaf: it calls nothing above it. */
#include "sq.h"

#include <string.h>

sqlite3 *sq_db(log_conn_t *c)
{
    return sq(c)->db;
}

static uint64_t sql_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;    /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

int sq_stmt(log_conn_t *lc, const char *sql, sqlite3_stmt **st)
{
    sq_conn *c = sq(lc);
    uint64_t h = sql_hash(sql);
    sq_cached_stmt *victim = NULL;
    *st = NULL;
    for (int i = 0; i < SQ_STMT_CACHE; i++) {
        sq_cached_stmt *e = &c->cache[i];
        if (e->st && e->hash == h && strcmp(sqlite3_sql(e->st), sql) == 0) {
            if (e->out) {       /* in use: a fresh one, not kept */
                victim = NULL;
                break;
            }
            e->out = 1;
            e->used = ++c->tick;
            *st = e->st;
            return 0;
        }
        if (!e->out && (!victim || !e->st || (victim->st && e->used < victim->used))) victim = e;
    }
    int rc = victim ? sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL)
                    : sqlite3_prepare_v2(c->db, sql, -1, st, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(*st);
        *st = NULL;
        return LOG_EIO;
    }
    if (victim && strcmp(sqlite3_sql(*st), sql) == 0) {
        sqlite3_finalize(victim->st);
        victim->st = *st;
        victim->hash = h;
        victim->out = 1;
        victim->used = ++c->tick;
    }
    return 0;
}

void sq_stmt_done(log_conn_t *lc, sqlite3_stmt *st)
{
    sq_conn *c = sq(lc);
    if (!st) return;
    for (int i = 0; i < SQ_STMT_CACHE; i++) {
        sq_cached_stmt *e = &c->cache[i];
        if (e->st != st) continue;
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        e->out = 0;
        return;
    }
    sqlite3_finalize(st);
}

int sq_stmt_finish(log_conn_t *c, sqlite3_stmt *st, int rc)
{
    sq_stmt_done(c, st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : (rc & 0xff) == SQLITE_BUSY ? LOG_EBUSY : LOG_EIO;
}

int sq_stmt_run(log_conn_t *c, sqlite3_stmt *st)
{
    return sq_stmt_finish(c, st, sqlite3_step(st));
}

int sq_error(log_conn_t *c, int src)
{
    int e = src ? src : sqlite3_errcode(sq(c)->db);
    if ((e & 0xff) == SQLITE_FULL) return LOG_EFULL;
    return (e & 0xff) == SQLITE_BUSY || (e & 0xff) == SQLITE_LOCKED ? LOG_EBUSY : LOG_EIO;
}

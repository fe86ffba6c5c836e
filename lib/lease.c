#include "lease.h"

#include <sqlite3.h>

#include "db.h"

typedef struct lease_arg {
    const char *session, *owner;
    int64_t ttl_ms;
    int held;
} lease_arg;

static int op_acquire(log_conn_t *c, void *arg)
{
    lease_arg *a = arg;
    sqlite3_stmt *st;
    int64_t now = db_now_ms();
    /* One statement: insert, or take over when ours or expired. */
    if (sqlite3_prepare_v2(log_db(c),
                           "INSERT INTO leases (session, owner, expires_ms) VALUES (?1, ?2, ?3)"
                           " ON CONFLICT(session) DO UPDATE SET owner = ?2, expires_ms = ?3"
                           " WHERE leases.owner = ?2 OR leases.expires_ms < ?4",
                           -1, &st, NULL) != SQLITE_OK)
        return LOG_EIO;
    sqlite3_bind_text(st, 1, a->session, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, a->owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, now + a->ttl_ms);
    sqlite3_bind_int64(st, 4, now);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return (rc & 0xff) == SQLITE_BUSY ? LOG_EBUSY : LOG_EIO;
    a->held = sqlite3_changes(log_db(c)) > 0;
    return 0;
}

int lease_acquire(log_conn_t *c, const char *session, const char *owner, int64_t ttl_ms)
{
    lease_arg a = {session, owner, ttl_ms, 0};
    int rc = log_transact(c, op_acquire, &a);
    return rc ? rc : a.held;
}

static int op_release(log_conn_t *c, void *arg)
{
    lease_arg *a = arg;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(log_db(c), "DELETE FROM leases WHERE session = ? AND owner = ?", -1, &st,
                           NULL) != SQLITE_OK)
        return LOG_EIO;
    sqlite3_bind_text(st, 1, a->session, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, a->owner, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : LOG_EIO;
}

int lease_release(log_conn_t *c, const char *session, const char *owner)
{
    lease_arg a = {session, owner, 0, 0};
    return log_transact(c, op_release, &a);
}

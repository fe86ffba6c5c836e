/* The SQLite engine's leases (lib/lease.h): one row per session, and the owner
 * lock of a runner id as a flock(2) on a file beside the database. */
#include "sq.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "../../buf.h"
#include "../../timefmt.h"

static int busy_or_io(int rc)
{
    return (rc & 0xff) == SQLITE_BUSY ? LOG_EBUSY : LOG_EIO;
}

static int sq_acquire(log_conn_t *c, lease_arg *a)
{
    sqlite3_stmt *st;
    int64_t now = timefmt_now_ms();
    /* One statement: insert, or take over when it is our owner id's (ours, or a
     * dead predecessor's: we hold the owner lock) or expired. */
    if (sq_stmt(c, "INSERT INTO leases (session, owner, instance, expires_ms) VALUES (?1, ?2, ?3, ?4)"
                           " ON CONFLICT(session) DO UPDATE SET owner = ?2, instance = ?3, expires_ms = ?4"
                           " WHERE leases.owner = ?2 OR leases.expires_ms < ?5", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, a->session, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, a->me->owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, a->me->instance, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, now + a->ttl_ms);
    sqlite3_bind_int64(st, 5, now);
    int rc = sqlite3_step(st);
    sq_stmt_done(c, st);
    if (rc != SQLITE_DONE) return busy_or_io(rc);
    a->held = sqlite3_changes(sq_db(c)) > 0;
    a->expires_ms = now + a->ttl_ms;
    if (a->held) return 0;
    if (sq_stmt(c, "SELECT expires_ms FROM leases WHERE session = ?", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, a->session, -1, SQLITE_STATIC);
    if ((rc = sqlite3_step(st)) == SQLITE_ROW) a->expires_ms = sqlite3_column_int64(st, 0);
    sq_stmt_done(c, st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : busy_or_io(rc);
}

static int sq_renew(log_conn_t *c, const char *session, const lease_id *me, int64_t ttl_ms)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "UPDATE leases SET expires_ms = ? WHERE session = ? AND owner = ? AND instance = ?",
                 &st))
        return LOG_EIO;
    sqlite3_bind_int64(st, 1, timefmt_now_ms() + ttl_ms);
    sqlite3_bind_text(st, 2, session, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, me->owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, me->instance, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sq_stmt_done(c, st);
    if (rc != SQLITE_DONE) return busy_or_io(rc);
    return sqlite3_changes(sq_db(c)) > 0;
}

static int sq_held(log_conn_t *c, const char *session, const lease_id *me)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT 1 FROM leases WHERE session = ? AND owner = ? AND instance = ?", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, me->owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, me->instance, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sq_stmt_done(c, st);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : busy_or_io(rc);
}

/* The ids of session[i] (all, or only those with renew[i] when only_renew) as a
 * JSON array into b; 0 or LOG_E*. */
static int ids_json(buf_t *b, const char *const *session, const unsigned char *renew, size_t n, int only_renew)
{
    int rc = buf_puts(b, "[");
    int first = 1;
    for (size_t i = 0; i < n && !rc; i++) {
        if (only_renew && !renew[i]) continue;
        rc = buf_puts(b, first ? "\"" : ",\"");
        if (!rc) rc = buf_json_escape(b, session[i], strlen(session[i]));
        if (!rc) rc = buf_puts(b, "\"");
        first = 0;
    }
    if (!rc) rc = buf_puts(b, "]");
    return rc ? LOG_EIO : 0;
}

/* The leases of n sessions at once: the renewals due in one UPDATE (when any),
 * then which are held in one SELECT (the same transaction, whose writers' lock
 * keeps every other runner out between the two). The sessions are a JSON array
 * read by json_each; key is its index. */
static int sq_held_many(log_conn_t *c, const char *const *session, const unsigned char *renew, size_t n,
                        const lease_id *me, int64_t ttl_ms, int *held, unsigned *nstmts)
{
    sqlite3_stmt *st = NULL;
    buf_t b;
    int rc = 0, any = 0;
    buf_init(&b, 0);
    for (size_t i = 0; i < n && !any; i++) any = renew[i] != 0;
    if (any) {
        if ((rc = ids_json(&b, session, renew, n, 1))) goto out;
        if (sq_stmt(c, "UPDATE leases SET expires_ms = ?1 WHERE session IN (SELECT value FROM json_each(?2))"
                       " AND owner = ?3 AND instance = ?4", &st)) {
            rc = LOG_EIO;
            goto out;
        }
        sqlite3_bind_int64(st, 1, timefmt_now_ms() + ttl_ms);
        sqlite3_bind_text(st, 2, b.p, (int)b.len, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, me->owner, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, me->instance, -1, SQLITE_STATIC);
        int src = sqlite3_step(st);
        sq_stmt_done(c, st);
        (*nstmts)++;
        if (src != SQLITE_DONE) {
            rc = busy_or_io(src);
            goto out;
        }
        buf_reset(&b);
    }
    if ((rc = ids_json(&b, session, renew, n, 0))) goto out;
    if (sq_stmt(c, "SELECT j.key FROM json_each(?1) j JOIN leases l ON l.session = j.value"
                   " WHERE l.owner = ?2 AND l.instance = ?3", &st)) {
        rc = LOG_EIO;
        goto out;
    }
    sqlite3_bind_text(st, 1, b.p, (int)b.len, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, me->owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, me->instance, -1, SQLITE_STATIC);
    int src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        sqlite3_int64 k = sqlite3_column_int64(st, 0);
        if (k >= 0 && (size_t)k < n) held[k] = 1;
    }
    sq_stmt_done(c, st);
    (*nstmts)++;
    if (src != SQLITE_DONE) rc = busy_or_io(src);
out:
    buf_free(&b);
    return rc;
}

static int sq_release(log_conn_t *c, lease_arg *a)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "DELETE FROM leases WHERE session = ? AND owner = ? AND instance = ?", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, a->session, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, a->me->owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, a->me->instance, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sq_stmt_done(c, st);
    return rc == SQLITE_DONE ? 0 : busy_or_io(rc);
}

/* The lock file's name for owner: the id itself when it is a plain word, else a
 * hash of it (ids are free text; file names are not). */
static void lock_name(const char *owner, char *out, size_t cap)
{
    size_t n = strlen(owner);
    int plain = n > 0 && n <= 64;
    for (const char *p = owner; plain && *p; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                *p == '-' || *p == '_' || (*p == '.' && p != owner);
    if (plain) {
        snprintf(out, cap, "%s", owner);
        return;
    }
    uint64_t h = 1469598103934665603ull;    /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)owner; *p; p++) h = (h ^ *p) * 1099511628211ull;
    snprintf(out, cap, "h%016llx", (unsigned long long)h);
}

static int sq_owner_lock(log_t *l, const char *owner, char *err, size_t errlen)
{
    const char *db_path = l->target;
    char name[80], path[4200];
    lock_name(owner, name, sizeof name);
    int n = snprintf(path, sizeof path, "%s.runner-%s.lock", db_path, name);
    if (n < 0 || (size_t)n >= sizeof path) {
        snprintf(err, errlen, "database path too long");
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open the runner lock %s: %s", path, strerror(errno));
        return -1;
    }
    /* A predecessor killed a moment ago may still hold it: its last thread can
     * outlive the thread the pid names (whose exit is what a supervisor or a script
     * sees) for a while on a busy machine. Wait up to LEASE_LOCK_WAIT_MS for it. */
    int rc;
    for (int waited = 0; (rc = flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EWOULDBLOCK &&
                         waited < LEASE_LOCK_WAIT_MS;
         waited += 50) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (rc != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t got = pread(fd, pid, sizeof pid - 1, 0);
        pid[got > 0 ? got : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        if (e == EWOULDBLOCK)
            snprintf(err, errlen,
                     "another runner with id \"%s\" is running on this database%s%s%s (lock %s); "
                     "stop it first, or give this one another DSTREAM_RUNNER_ID",
                     owner, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "", path);
        else
            snprintf(err, errlen, "cannot lock %s: %s", path, strerror(e));
        close(fd);
        return -1;
    }
    char line[32];
    int len = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0 && pwrite(fd, line, (size_t)len, 0) != len) {
        /* The pid is only for the refusal message: the lock itself holds. */
    }
    return fd;
}

const store_leases_ops sq_leases_ops = {
    .acquire = sq_acquire,
    .renew = sq_renew,
    .held = sq_held,
    .held_many = sq_held_many,
    .release = sq_release,
    .owner_lock = sq_owner_lock,
};

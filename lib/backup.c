#include "backup.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BACKUP_TRIES 50         /* a busy source (a checkpoint resetting the WAL) */

static int fsync_path(const char *path, int dir)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static int64_t scalar(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

int backup_copy(sqlite3 *src, const char *dest, backup_info *bi, char *err, size_t errlen)
{
    char tmp[4200];
    struct stat st;
    sqlite3 *out = NULL;
    int rc = -1;
    if (lstat(dest, &st) == 0) {
        snprintf(err, errlen, "%s exists: a backup is never written over a file", dest);
        return -1;
    }
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%d", dest, (int)getpid()) >= (int)sizeof tmp) {
        snprintf(err, errlen, "destination path too long");
        return -1;
    }
    unlink(tmp);
    if (sqlite3_open_v2(tmp, &out, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", tmp, out ? sqlite3_errmsg(out) : "out of memory");
        goto out;
    }
    sqlite3_backup *b = sqlite3_backup_init(out, "main", src, "main");
    if (!b) {
        snprintf(err, errlen, "backup: %s", sqlite3_errmsg(out));
        goto out;
    }
    /* One step copies every page inside one read transaction on src: a snapshot of
     * one commit. Busy only while a checkpoint restarts the WAL: try again. */
    int step;
    for (int i = 0; i < BACKUP_TRIES; i++) {
        step = sqlite3_backup_step(b, -1);
        if (step != SQLITE_BUSY && step != SQLITE_LOCKED) break;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int pages = sqlite3_backup_pagecount(b);
    if (sqlite3_backup_finish(b) != SQLITE_OK || step != SQLITE_DONE) {
        snprintf(err, errlen, "backup: %s", sqlite3_errstr(step == SQLITE_DONE ? sqlite3_errcode(out) : step));
        goto out;
    }
    /* A self-contained file: the rollback journal format, no -wal beside it (the
     * servers switch it back to WAL when they open it). */
    if (sqlite3_exec(out, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "backup: %s", sqlite3_errmsg(out));
        goto out;
    }
    if (bi) {
        memset(bi, 0, sizeof *bi);
        bi->pages = pages;
        bi->streams = scalar(out, "SELECT count(*) FROM streams");
        bi->messages = scalar(out, "SELECT count(*) FROM messages");
        bi->rev = scalar(out, "SELECT coalesce(max(rev), 0) FROM streams");
    }
    if (sqlite3_close(out) != SQLITE_OK) {
        snprintf(err, errlen, "backup: closing %s failed", tmp);
        out = NULL;
        goto out;
    }
    out = NULL;
    if (fsync_path(tmp, 0) || rename(tmp, dest)) {
        snprintf(err, errlen, "%s: %s", dest, strerror(errno));
        goto out;
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", dest);
    fsync_path(dirname(dir), 1);
    if (bi && stat(dest, &st) == 0) bi->bytes = (int64_t)st.st_size;
    rc = 0;
out:
    if (out) sqlite3_close_v2(out);
    if (rc) unlink(tmp);
    return rc;
}

/* ---- check ------------------------------------------------------------------------ */

/* One invariant: a query whose every row is a problem, reported with the rule's
 * name and the row's columns. */
typedef struct check_rule {
    const char *name;
    const char *sql;
} check_rule;

static const check_rule rules[] = {
    {"stream messages not contiguous from fork point to tail",
     "SELECT s.path, s.fork_seq, s.tail_seq, count(m.seq) AS messages, min(m.seq) AS first,"
     " max(m.seq) AS last"
     " FROM streams s LEFT JOIN messages m ON m.stream = s.id GROUP BY s.id"
     " HAVING count(m.seq) != s.tail_seq - s.fork_seq"
     " OR (count(m.seq) > 0 AND (min(m.seq) != s.fork_seq OR max(m.seq) != s.tail_seq - 1))"},
    {"message position does not follow the one before",
     "SELECT s.path, m.seq, n.pos AS next_pos, m.pos + length(CAST(m.data AS BLOB)) AS expected"
     " FROM messages m JOIN messages n ON n.stream = m.stream AND n.seq = m.seq + 1"
     " JOIN streams s ON s.id = m.stream"
     " WHERE n.pos != m.pos + length(CAST(m.data AS BLOB))"},
    {"stream's first message or tail position wrong",
     "SELECT s.path, s.fork_pos, f.pos AS first_pos, s.tail_pos FROM streams s"
     " LEFT JOIN messages f ON f.stream = s.id AND f.seq = s.fork_seq"
     " LEFT JOIN messages l ON l.stream = s.id AND l.seq = s.tail_seq - 1"
     " WHERE (s.tail_seq > s.fork_seq AND (f.pos IS NULL OR f.pos != s.fork_pos"
     "        OR l.pos IS NULL OR l.pos + length(CAST(l.data AS BLOB)) != s.tail_pos))"
     " OR (s.tail_seq = s.fork_seq AND s.tail_pos != s.fork_pos)"},
    {"message's record starts after it or before the fork point",
     "SELECT s.path, m.seq, m.rec FROM messages m JOIN streams s ON s.id = m.stream"
     " WHERE m.rec > m.seq OR m.rec < s.fork_seq"},
    {"fork whose parent is missing or shorter than the fork point",
     "SELECT c.path, c.parent, c.fork_seq FROM streams c LEFT JOIN streams p ON p.id = c.parent"
     " WHERE c.parent IS NOT NULL AND (p.id IS NULL OR c.fork_seq > p.tail_seq)"},
    {"deleted stream kept although no fork reads it",
     "SELECT path, forks FROM streams WHERE deleted = 1 AND forks <= 0"},
    {"messages of a stream that does not exist",
     "SELECT m.stream, count(*) AS messages FROM messages m LEFT JOIN streams s ON s.id = m.stream"
     " WHERE s.id IS NULL GROUP BY m.stream"},
    {"producer state of a stream that does not exist",
     "SELECT p.stream, p.producer FROM producers p LEFT JOIN streams s ON s.id = p.stream"
     " WHERE s.id IS NULL"},
    {"session without its event stream",
     "SELECT x.id, x.stream FROM sessions x LEFT JOIN streams s ON s.path = x.stream"
     " WHERE x.deleted = 0 AND (s.id IS NULL OR s.deleted = 1)"},
    {"snapshot not on a message boundary of its session's stream",
     "SELECT x.id, n.seq, n.pos FROM snapshots n JOIN sessions x ON x.id = n.session"
     " JOIN streams s ON s.path = x.stream AND s.deleted = 0"
     " LEFT JOIN messages m ON m.stream = s.id AND m.seq = n.seq"
     " WHERE n.seq > s.tail_seq"
     " OR (n.seq = s.tail_seq AND n.pos != s.tail_pos)"
     " OR (n.seq < s.tail_seq AND n.seq >= s.fork_seq AND (m.pos IS NULL OR m.pos != n.pos))"},
};

static int run_rule(sqlite3 *db, const check_rule *r, int limit, backup_report_fn report, void *ud,
                    char *err, size_t errlen)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, r->sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", r->name, sqlite3_errmsg(db));
        return -1;
    }
    int n = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n++ >= limit) continue;
        char line[1024];
        size_t len = (size_t)snprintf(line, sizeof line, "%s:", r->name);
        for (int i = 0; i < sqlite3_column_count(st) && len < sizeof line; i++) {
            const char *v = (const char *)sqlite3_column_text(st, i);
            len += (size_t)snprintf(line + len, sizeof line - len, " %s=%.200s",
                                    sqlite3_column_name(st, i), v ? v : "NULL");
        }
        report(ud, line);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        snprintf(err, errlen, "%s: %s", r->name, sqlite3_errstr(rc));
        return -1;
    }
    return n;
}

int backup_check(sqlite3 *db, int limit, backup_report_fn report, void *ud, char *err,
                 size_t errlen)
{
    int problems = 0;
    sqlite3_stmt *st;
    /* One read transaction: every rule sees the same commit. */
    if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s", sqlite3_errmsg(db));
        return -1;
    }
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s", sqlite3_errmsg(db));
        goto fail;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        if (v && strcmp(v, "ok") == 0) continue;
        char line[600];
        snprintf(line, sizeof line, "integrity_check: %.500s", v ? v : "?");
        if (problems++ < limit) report(ud, line);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        snprintf(err, errlen, "integrity_check: %s", sqlite3_errstr(rc));
        goto fail;
    }
    if (problems) {
        /* The invariants' queries would read a damaged file: report what SQLite found. */
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        return problems;
    }
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        int n = run_rule(db, &rules[i], limit, report, ud, err, errlen);
        if (n < 0) goto fail;
        problems += n;
    }
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    return problems;
fail:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

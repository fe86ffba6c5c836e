#include "backup.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jdiff.h"
#include "sstore.h"

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

/* ---- snapshots against a replay -------------------------------------------------------- */

#define SNAP_RULE "snapshot differs from a replay of its session's events"

typedef struct snap_check {
    sqlite3 *db;
    int limit, problems;
    backup_report_fn report;
    void *ud;
} snap_check;

static void snap_problem(snap_check *k, const char *session, int64_t seq, const char *via, const char *what)
{
    if (k->problems++ >= k->limit) return;
    char line[1024];
    snprintf(line, sizeof line, SNAP_RULE ": session=%.100s seq=%lld%s%.200s key=%.300s", session,
             (long long)seq, via[0] ? " fork point, replayed in " : "", via, what);
    k->report(k->ud, line);
}

/* Keys the view gained after snapshots were first written (the cost split,
 * docs/events.md#cost): a snapshot of an earlier version has none of them, and is
 * compared without them. */
static const char *const SNAP_LATER[] = {"cost", "playedRequest"};

/* The replayed view v against a snapshot's stored text. */
static void snap_compare(snap_check *k, const session_view *v, const char *session, int64_t seq,
                         const char *text, const char *via)
{
    json_t *want = session_view_to_json(v);
    json_t *got = text ? json_loads(text, JSON_ALLOW_NUL, NULL) : NULL;
    for (size_t i = 0; got && i < sizeof SNAP_LATER / sizeof *SNAP_LATER; i++)
        if (!json_object_get(got, SNAP_LATER[i])) json_object_del(want, SNAP_LATER[i]);
    if (!got || !json_equal(want, got)) {
        buf_t key;
        buf_init(&key, 4096);
        const json_t *da, *db;
        int differs = got && jdiff(want, got, &key, &da, &db) && key.len;
        snap_problem(k, session, seq, via, !got ? "(not JSON)" : differs ? key.p : "(the whole view)");
        buf_free(&key);
    }
    json_decref(want);
    json_decref(got);
}

/* Fold the events of one session stream (its own messages, from its fork point if
 * it is a fork, starting there from its fork-point snapshot as lib/sstore does),
 * comparing, as the fold passes them, its own snapshots and the fork-point
 * snapshots of the sessions forked from it. Each message is read once. Returns 0,
 * or -1 with err. */
static int snap_stream(snap_check *k, int64_t sid, const char *path, int64_t fork_seq, int fork, int deleted,
                       char *err, size_t errlen)
{
    const char *session = path + 9;     /* "sessions/ID" */
    sqlite3_stmt *cp = NULL, *msgs = NULL;
    session_view v;
    int rc = -1, step;
    int64_t at = fork ? fork_seq : 0;
    session_view_init(&v);
    if (sqlite3_prepare_v2(k->db,
                           "SELECT n.session, n.seq, n.view, '' FROM snapshots n WHERE n.session = ?2 AND n.seq > ?3"
                           " UNION ALL"
                           " SELECT n.session, n.seq, n.view, ?4 FROM streams c JOIN snapshots n"
                           " ON n.session = substr(c.path, 10) AND n.seq = c.fork_seq"
                           " WHERE c.parent = ?1 AND c.deleted = 0 AND c.path GLOB 'sessions/*'"
                           " ORDER BY 2, 1",
                           -1, &cp, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(k->db, "SELECT seq, pos, data FROM messages WHERE stream = ? AND seq >= ? ORDER BY seq", -1,
                           &msgs, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", SNAP_RULE, sqlite3_errmsg(k->db));
        goto out;
    }
    sqlite3_bind_int64(cp, 1, sid);
    sqlite3_bind_text(cp, 2, session, -1, SQLITE_STATIC);
    sqlite3_bind_int64(cp, 3, fork ? fork_seq : -1);
    sqlite3_bind_text(cp, 4, path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(msgs, 1, sid);
    sqlite3_bind_int64(msgs, 2, at);
    if (fork) {
        /* A fork starts from its own snapshot at the fork point. */
        sqlite3_stmt *fp;
        if (sqlite3_prepare_v2(k->db, "SELECT view FROM snapshots WHERE session = ? AND seq = ?", -1, &fp, NULL) !=
            SQLITE_OK) {
            snprintf(err, errlen, "%s: %s", SNAP_RULE, sqlite3_errmsg(k->db));
            goto out;
        }
        sqlite3_bind_text(fp, 1, session, -1, SQLITE_STATIC);
        sqlite3_bind_int64(fp, 2, fork_seq);
        int ok = sqlite3_step(fp) == SQLITE_ROW && sstore_snapshot_load(&v, (const char *)sqlite3_column_text(fp, 0)) == 0;
        sqlite3_finalize(fp);
        if (!ok) {
            /* A deleted session's snapshots went with it: its stream, kept for its
             * forks, cannot be replayed (nor its forks' fork points checked). */
            if (!deleted) snap_problem(k, session, fork_seq, "", "(its fork-point snapshot, missing or not a view)");
            rc = 0;
            goto out;
        }
    }
    int gap = 0;
    while ((step = sqlite3_step(cp)) == SQLITE_ROW) {
        const char *who = (const char *)sqlite3_column_text(cp, 0);
        int64_t seq = sqlite3_column_int64(cp, 1);
        const char *text = (const char *)sqlite3_column_text(cp, 2);
        const char *via = (const char *)sqlite3_column_text(cp, 3);
        while (!gap && at < seq) {
            int r = sqlite3_step(msgs);
            if (r != SQLITE_ROW) {
                if (r != SQLITE_DONE) {
                    snprintf(err, errlen, "%s: %s", SNAP_RULE, sqlite3_errstr(r));
                    goto out;
                }
                gap = 1;
                break;
            }
            if (sqlite3_column_int64(msgs, 0) != at) {
                gap = 1;    /* the contiguity rule reports it */
                break;
            }
            offset_t o = {(uint64_t)at, (uint64_t)sqlite3_column_int64(msgs, 1)};
            sstore_fold(&v, sqlite3_column_blob(msgs, 2), (size_t)sqlite3_column_bytes(msgs, 2), o);
            at++;
        }
        /* A position the replay cannot reach: the boundary and contiguity rules say why. */
        if (at == seq) snap_compare(k, &v, who ? who : "?", seq, text, via ? via : "");
    }
    if (step != SQLITE_DONE) {
        snprintf(err, errlen, "%s: %s", SNAP_RULE, sqlite3_errstr(step));
        goto out;
    }
    rc = 0;
out:
    sqlite3_finalize(cp);
    sqlite3_finalize(msgs);
    session_view_free(&v);
    return rc;
}

/* Every snapshot against the fold of its session's events up to its position: each
 * session stream is folded once, up to its last snapshot (linear in the log). */
static int check_snapshots(sqlite3 *db, int limit, backup_report_fn report, void *ud, char *err, size_t errlen)
{
    snap_check k = {db, limit, 0, report, ud};
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT id, path, fork_seq, parent IS NOT NULL, deleted FROM streams"
                               " WHERE path GLOB 'sessions/?*' ORDER BY id", -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", SNAP_RULE, sqlite3_errmsg(db));
        return -1;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *path = (const char *)sqlite3_column_text(st, 1);
        if (snap_stream(&k, sqlite3_column_int64(st, 0), path, sqlite3_column_int64(st, 2), sqlite3_column_int(st, 3),
                        sqlite3_column_int(st, 4), err, errlen)) {
            sqlite3_finalize(st);
            return -1;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        snprintf(err, errlen, "%s: %s", SNAP_RULE, sqlite3_errstr(rc));
        return -1;
    }
    return k.problems;
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
    int n = check_snapshots(db, limit, report, ud, err, errlen);
    if (n < 0) goto fail;
    problems += n;
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    return problems;
fail:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

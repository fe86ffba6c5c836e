/* The SQLite engine's backups (lib/backup.h): the online-backup copy, the restore,
 * integrity_check and the log's invariants as queries, and the walk of the session
 * streams that lib/backup.c folds and compares (it never calls up into it: the
 * walk's callbacks are handed down). */
#include "sq.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../store_check.h"
#include "sq_db.h"

#define BACKUP_TRIES 50         /* a busy source (a checkpoint resetting the WAL) */

static int64_t scalar(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The database at target as every program opens it (WAL, busy timeout), migrated
 * or not. NULL with err. */
static sqlite3 *open_db(const char *target, int migrate, char *err, size_t errlen)
{
    sqlite3 *db;
    db_opts o;
    db_opts_default(&o);
    o.migrate = migrate;
    return db_open(target, &o, &db, err, errlen) ? NULL : db;
}

static int sq_copy(const char *target, const char *tmp, backup_info *bi, char *err, size_t errlen)
{
    sqlite3 *src = NULL, *out = NULL;
    int rc = BACKUP_EFAIL;
    if (access(target, F_OK)) {
        snprintf(err, errlen, "%s: no such database", target);
        return BACKUP_ENODB;
    }
    if (!(src = open_db(target, 0, err, errlen))) return BACKUP_EOPEN;
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
    int closed = sqlite3_close(out);
    out = NULL;
    if (closed != SQLITE_OK) {
        snprintf(err, errlen, "backup: closing %s failed", tmp);
        goto out;
    }
    rc = 0;
out:
    sqlite3_close_v2(out);
    sqlite3_close_v2(src);
    return rc;
}

static int sq_restore(const char *target, const char *from, char *err, size_t errlen)
{
    sqlite3 *src = NULL, *dst = open_db(target, 0, err, errlen);
    if (!dst) return BACKUP_EOPEN;
    int rc = BACKUP_EFAIL;
    if (sqlite3_open_v2(from, &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", from, src ? sqlite3_errmsg(src) : "out of memory");
        goto out;
    }
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
    if (!b) {
        snprintf(err, errlen, "restore: %s", sqlite3_errmsg(dst));
        goto out;
    }
    int step = sqlite3_backup_step(b, -1);
    sqlite3_backup_finish(b);
    if (step != SQLITE_DONE) {
        snprintf(err, errlen, "restore: %s (is a server writing?)", sqlite3_errstr(step));
        goto out;
    }
    /* The copy brought the backup's journal mode along: back to WAL, then migrate. */
    sqlite3_close_v2(dst);
    if (!(dst = open_db(target, 1, err, errlen))) goto out;
    rc = 0;
out:
    sqlite3_close_v2(src);
    sqlite3_close_v2(dst);
    return rc;
}

/* ---- check ------------------------------------------------------------------------ */

/* The invariants (lib/store/store_check.h), in this engine's spelling. */
static const store_check_rule rules[] = {STORE_CHECK_RULES("length(CAST(", " AS BLOB))", "")};

static int run_rule(sqlite3 *db, const store_check_rule *r, int limit, backup_report_fn report, void *ud,
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

/* ---- the hash chain ------------------------------------------------------------------ */

/* Every stream's chain (store_check.h: STORE_CHECK_CHAIN): its first broken link
 * and a tail digest that is not its chain's, each reported while fewer than limit of
 * its kind. Returns the problems, or -1 with err. */
static int chain_walk(sqlite3 *db, int limit, backup_report_fn report, void *ud, char *err, size_t errlen)
{
    sqlite3_stmt *list = NULL, *anc = NULL, *dig = NULL, *msgs = NULL;
    int broken = 0, tails = 0, rc = -1, step = SQLITE_DONE;
    /* A database from before the chain (a backup not opened since) has none to check. */
    if (scalar(db, "SELECT count(*) FROM pragma_table_info('messages') WHERE name = 'digest'") == 0) return 0;
    if (sqlite3_prepare_v2(db, "SELECT id, path, coalesce(parent, 0), fork_seq, digest FROM streams ORDER BY id", -1,
                           &list, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT parent, fork_seq FROM streams WHERE id = ?", -1, &anc, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT digest FROM messages WHERE stream = ? AND seq = ?", -1, &dig, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT seq, pos, data, digest FROM messages WHERE stream = ? ORDER BY seq", -1, &msgs,
                           NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", STORE_CHECK_CHAIN, sqlite3_errmsg(db));
        goto out;
    }
    while ((step = sqlite3_step(list)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(list, 0), parent = sqlite3_column_int64(list, 2);
        int64_t fork_seq = sqlite3_column_int64(list, 3);
        const char *path = (const char *)sqlite3_column_text(list, 1);
        uint8_t prev[CHAIN_LEN] = {0};
        char line[LOG_PATH_MAX + 128], off[OFFSET_LEN + 1];
        int ok = 1, m;
        if (parent && fork_seq > 0) db_chain_start(anc, dig, parent, fork_seq - 1, prev);
        sqlite3_reset(msgs);
        sqlite3_bind_int64(msgs, 1, id);
        while (ok && (m = sqlite3_step(msgs)) == SQLITE_ROW) {
            offset_t at = {(uint64_t)sqlite3_column_int64(msgs, 0), (uint64_t)sqlite3_column_int64(msgs, 1)};
            const void *d = sqlite3_column_blob(msgs, 3);
            if (chain_step(prev, at, sqlite3_column_blob(msgs, 2), (size_t)sqlite3_column_bytes(msgs, 2),
                           d && sqlite3_column_bytes(msgs, 3) == CHAIN_LEN ? d : NULL))
                continue;
            ok = 0;
            offset_format(at, off);
            snprintf(line, sizeof line, "%s: path=%s offset=%s", STORE_CHECK_CHAIN, path ? path : "", off);
            if (broken++ < limit) report(ud, line);
        }
        sqlite3_reset(msgs);
        if (!ok) continue;
        if (sqlite3_column_bytes(list, 4) != CHAIN_LEN || memcmp(sqlite3_column_blob(list, 4), prev, CHAIN_LEN)) {
            snprintf(line, sizeof line, "%s: path=%s", STORE_CHECK_CHAIN_TAIL, path ? path : "");
            if (tails++ < limit) report(ud, line);
        }
    }
    if (step != SQLITE_DONE) {
        snprintf(err, errlen, "%s: %s", STORE_CHECK_CHAIN, sqlite3_errstr(step));
        goto out;
    }
    rc = broken + tails;
out:
    sqlite3_finalize(list);
    sqlite3_finalize(anc);
    sqlite3_finalize(dig);
    sqlite3_finalize(msgs);
    return rc;
}

/* ---- the walk of the session streams ----------------------------------------------- */

#define WALK_WHAT "walking the session streams"

/* One session stream: its start, then its snapshots (its own after its fork point,
 * and the fork points of the live session streams forked from it) in order of
 * position, each after the stream's own messages before that position. Each
 * message is read once, none past the last snapshot. Returns 0, or -1 with err. */
static int walk_stream(sqlite3 *db, const backup_walk *w, int64_t sid, const char *path, int64_t fork_seq, int fork,
                       int deleted, char *err, size_t errlen)
{
    const char *session = path + 9;     /* "sessions/ID" */
    sqlite3_stmt *cp = NULL, *msgs = NULL, *fp = NULL;
    int rc = -1, step;
    if (sqlite3_prepare_v2(db,
                           "SELECT n.session, n.seq, n.view, '' FROM snapshots n WHERE n.session = ?2 AND n.seq > ?3"
                           " UNION ALL"
                           " SELECT n.session, n.seq, n.view, ?4 FROM streams c JOIN snapshots n"
                           " ON n.session = substr(c.path, 10) AND n.seq = c.fork_seq"
                           " WHERE c.parent = ?1 AND c.deleted = 0 AND c.path GLOB 'sessions/*'"
                           " ORDER BY 2, 1",
                           -1, &cp, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT seq, pos, data FROM messages WHERE stream = ? AND seq >= ? ORDER BY seq", -1,
                           &msgs, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT view FROM snapshots WHERE session = ? AND seq = ?", -1, &fp, NULL) !=
            SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", WALK_WHAT, sqlite3_errmsg(db));
        goto out;
    }
    sqlite3_bind_int64(cp, 1, sid);
    sqlite3_bind_text(cp, 2, session, -1, SQLITE_STATIC);
    sqlite3_bind_int64(cp, 3, fork ? fork_seq : -1);
    sqlite3_bind_text(cp, 4, path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(msgs, 1, sid);
    sqlite3_bind_int64(msgs, 2, fork ? fork_seq : 0);
    const char *fork_view = NULL;
    if (fork) {
        sqlite3_bind_text(fp, 1, session, -1, SQLITE_STATIC);
        sqlite3_bind_int64(fp, 2, fork_seq);
        if (sqlite3_step(fp) == SQLITE_ROW) fork_view = (const char *)sqlite3_column_text(fp, 0);
    }
    if (w->stream(w->ud, session, fork, fork_seq, fork_view, deleted)) {
        rc = 0;
        goto out;
    }
    /* msgs' current row, read but not delivered yet (it is at or past the snapshot
     * being delivered); more: messages are still wanted. */
    int held = 0, more = 1;
    while ((step = sqlite3_step(cp)) == SQLITE_ROW) {
        const char *who = (const char *)sqlite3_column_text(cp, 0);
        int64_t seq = sqlite3_column_int64(cp, 1);
        while (more) {
            if (!held) {
                int r = sqlite3_step(msgs);
                if (r != SQLITE_ROW) {
                    if (r != SQLITE_DONE) {
                        snprintf(err, errlen, "%s: %s", WALK_WHAT, sqlite3_errstr(r));
                        goto out;
                    }
                    more = 0;
                    break;
                }
                held = 1;
            }
            if (sqlite3_column_int64(msgs, 0) >= seq) break;
            held = 0;
            if (w->message(w->ud, sqlite3_column_int64(msgs, 0), sqlite3_column_int64(msgs, 1),
                           sqlite3_column_blob(msgs, 2), (size_t)sqlite3_column_bytes(msgs, 2)))
                more = 0;
        }
        const char *text = (const char *)sqlite3_column_text(cp, 2);
        const char *via = (const char *)sqlite3_column_text(cp, 3);
        w->snapshot(w->ud, who ? who : "?", seq, text, via ? via : "");
    }
    if (step != SQLITE_DONE) {
        snprintf(err, errlen, "%s: %s", WALK_WHAT, sqlite3_errstr(step));
        goto out;
    }
    rc = 0;
out:
    sqlite3_finalize(cp);
    sqlite3_finalize(msgs);
    sqlite3_finalize(fp);
    return rc;
}

/* Every session stream, in the order they were created. */
static int walk(sqlite3 *db, const backup_walk *w, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT id, path, fork_seq, parent IS NOT NULL, deleted FROM streams"
                               " WHERE path GLOB 'sessions/?*' ORDER BY id", -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", WALK_WHAT, sqlite3_errmsg(db));
        return -1;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *path = (const char *)sqlite3_column_text(st, 1);
        if (walk_stream(db, w, sqlite3_column_int64(st, 0), path, sqlite3_column_int64(st, 2),
                        sqlite3_column_int(st, 3), sqlite3_column_int(st, 4), err, errlen)) {
            sqlite3_finalize(st);
            return -1;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        snprintf(err, errlen, "%s: %s", WALK_WHAT, sqlite3_errstr(rc));
        return -1;
    }
    return 0;
}

/* An existing database as it is: no migration, no change of journal mode. */
static sqlite3 *open_existing(const char *target, int *why, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    if (access(target, F_OK)) {
        snprintf(err, errlen, "%s: no such database", target);
        *why = BACKUP_ENODB;
        return NULL;
    }
    if (sqlite3_open_v2(target, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", target, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close_v2(db);
        *why = BACKUP_EOPEN;
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    return db;
}

static int sq_check(const char *target, int limit, backup_report_fn report, void *ud, const backup_walk *w,
                    char *err, size_t errlen)
{
    int problems = 0, why = BACKUP_EFAIL;
    sqlite3_stmt *st;
    sqlite3 *db = open_existing(target, &why, err, errlen);
    if (!db) return why;
    /* One read transaction: every rule and the walk see the same commit. */
    if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s", sqlite3_errmsg(db));
        goto fail;
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
        sqlite3_close_v2(db);
        return problems;
    }
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        int n = run_rule(db, &rules[i], limit, report, ud, err, errlen);
        if (n < 0) goto fail;
        problems += n;
    }
    int broken = chain_walk(db, limit, report, ud, err, errlen);
    if (broken < 0) goto fail;
    problems += broken;
    if (walk(db, w, err, errlen)) goto fail;
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close_v2(db);
    return problems;
fail:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close_v2(db);
    return BACKUP_EFAIL;
}

const store_backup_ops sq_backup_ops = {
    .copy = sq_copy,
    .restore = sq_restore,
    .check = sq_check,
};

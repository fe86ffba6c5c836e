/* The PostgreSQL engine's backups (lib/backup.h): the check of a database in place,
 * and, for copies and restores, the plain word that PostgreSQL's own tools do them.
 *
 * The check reads the database in one REPEATABLE READ, READ ONLY transaction (one
 * snapshot: every rule and the walk see the same commits, while the servers go on
 * writing), runs the log's invariants of lib/store/sqlite/sq_backup.c in
 * PostgreSQL's SQL, then walks the session streams for lib/backup.c to compare
 * each snapshot with a replay. The messages are read through a cursor, a batch at
 * a time and only up to the stream's last snapshot, so that a long stream is not
 * held in memory whole. PostgreSQL has no counterpart of SQLite's integrity_check
 * in core: its pages and indexes are checked by its own tool, pg_amcheck.
 *
 * Copies and restores: a dstream backup is one file that `dstream check` and
 * `dstream restore` open as a database; a PostgreSQL database is not a file, and
 * its consistent copies are pg_dump's (one snapshot of the database, while writers
 * go on) and pg_basebackup's (the cluster, for point-in-time recovery). copy and
 * restore say so, with the commands, and change nothing. */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../store_check.h"

#define HOW_TO_COPY                                                                                      \
    "a PostgreSQL database is backed up with PostgreSQL's own tools: pg_dump -Fc -d URI -f FILE (one"   \
    " consistent snapshot while the servers go on writing; pg_restore --clean -d URI FILE puts it back)," \
    " or pg_basebackup for the whole cluster; dstream check URI checks the database in place"

static int pg_bk_copy(const char *target, const char *tmp, backup_info *bi, char *err, size_t errlen)
{
    (void)target, (void)tmp, (void)bi;
    snprintf(err, errlen, "%s", HOW_TO_COPY);
    return BACKUP_EFAIL;
}

static int pg_bk_restore(const char *target, const char *from, char *err, size_t errlen)
{
    (void)target, (void)from;
    snprintf(err, errlen, "%s", HOW_TO_COPY);
    return BACKUP_EFAIL;
}

/* ---- check ------------------------------------------------------------------------ */

/* Run sql with text parameters; the result when it succeeded, else NULL with err
 * (what: where). */
static PGresult *run(PGconn *pg, const char *what, const char *sql, int n, const char *const *v, int binary,
                     char *err, size_t errlen)
{
    PGresult *r = PQexecParams(pg, sql, n, NULL, v, NULL, NULL, binary);
    ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) return r;
    snprintf(err, errlen, "%s: %s", what, PQerrorMessage(pg));
    size_t len = strlen(err);
    while (len && err[len - 1] == '\n') err[--len] = '\0';
    PQclear(r);
    return NULL;
}

/* The invariants (lib/store/store_check.h), in this engine's spelling. */
static const store_check_rule rules[] = {STORE_CHECK_RULES("length(", ")", " COLLATE \"C\"")};

/* The problems of one rule (each reported while fewer than limit), or -1 with err. */
static int run_rule(PGconn *pg, const store_check_rule *rule, int limit, backup_report_fn report, void *ud, char *err,
                    size_t errlen)
{
    PGresult *r = run(pg, rule->name, rule->sql, 0, NULL, 0, err, errlen);
    if (!r) return -1;
    int n = PQntuples(r);
    for (int i = 0; i < n && i < limit; i++) {
        char line[1024];
        size_t len = (size_t)snprintf(line, sizeof line, "%s:", rule->name);
        for (int k = 0; k < PQnfields(r) && len < sizeof line; k++)
            len += (size_t)snprintf(line + len, sizeof line - len, " %s=%.200s", PQfname(r, k),
                                    PQgetisnull(r, i, k) ? "NULL" : PQgetvalue(r, i, k));
        report(ud, line);
    }
    PQclear(r);
    return n;
}

/* ---- the walk of the session streams ----------------------------------------------- */

#define WALK_WHAT "walking the session streams"
#define WALK_BATCH 256          /* messages fetched at a time */
#define STR_(x) #x
#define STR(x) STR_(x)

/* The messages of one stream, read through the cursor "walk_msgs" a batch at a time. */
typedef struct msg_reader {
    PGconn *pg;
    PGresult *batch;
    int i, n, done;
} msg_reader;

/* The next message (row i of r->batch): 1, 0 when there is none, -1 with err. */
static int msg_next(msg_reader *m, char *err, size_t errlen)
{
    if (m->batch && ++m->i < m->n) return 1;
    PQclear(m->batch);
    m->batch = NULL;
    if (m->done) return 0;
    m->batch = run(m->pg, WALK_WHAT, "FETCH " STR(WALK_BATCH) " FROM walk_msgs", 0, NULL, 1, err, errlen);
    if (!m->batch) return -1;
    m->i = 0;
    m->n = PQntuples(m->batch);
    if (m->n < WALK_BATCH) m->done = 1;
    return m->n > 0;
}

/* ---- the hash chain ------------------------------------------------------------------ */

#define CHAIN_WHAT "checking the hash chain"

/* Where a fork's chain starts: the digest of message seq of the chain that stream
 * p begins (p, then its ancestors: the first whose fork point is at or below seq
 * stores it) into out (zeros when it has none). 0, or -1 with err. */
static int chain_start(PGconn *pg, int64_t p, int64_t seq, uint8_t out[CHAIN_LEN], char *err, size_t errlen)
{
    char id[24], sq[24];
    memset(out, 0, CHAIN_LEN);
    snprintf(sq, sizeof sq, "%lld", (long long)seq);
    for (int hops = 0; hops < 64; hops++) {
        snprintf(id, sizeof id, "%lld", (long long)p);
        const char *v[1] = {id};
        PGresult *r = run(pg, CHAIN_WHAT, "SELECT coalesce(parent, 0), fork_seq FROM streams WHERE id = $1::bigint", 1,
                          v, 0, err, errlen);
        if (!r) return -1;
        int found = PQntuples(r) == 1;
        int64_t up = found ? pg_int_of(r, 0, 0) : 0, fork_seq = found ? pg_int_of(r, 0, 1) : 0;
        PQclear(r);
        if (!found) return 0;
        if (seq >= fork_seq || !up) break;
        p = up;
    }
    snprintf(id, sizeof id, "%lld", (long long)p);
    const char *v[2] = {id, sq};
    PGresult *r = run(pg, CHAIN_WHAT, "SELECT digest FROM messages WHERE stream = $1::bigint AND seq = $2::bigint", 2,
                      v, 1, err, errlen);
    if (!r) return -1;
    if (PQntuples(r) == 1 && PQgetlength(r, 0, 0) == CHAIN_LEN) memcpy(out, PQgetvalue(r, 0, 0), CHAIN_LEN);
    PQclear(r);
    return 0;
}

/* Every stream's chain (store_check.h: STORE_CHECK_CHAIN), its messages through the
 * cursor walk_msgs a batch at a time: its first broken link and a tail digest that
 * is not its chain's, each reported while fewer than limit of its kind. Returns
 * the problems, or -1 with err. */
static int chain_walk(PGconn *pg, int limit, backup_report_fn report, void *ud, char *err, size_t errlen)
{
    PGresult *list = run(pg, CHAIN_WHAT,
                         "SELECT id, path, coalesce(parent, 0), fork_seq, encode(digest, 'hex') FROM streams ORDER BY id",
                         0, NULL, 0, err, errlen);
    if (!list) return -1;
    int broken = 0, tails = 0, rc = -1;
    for (int i = 0; i < PQntuples(list); i++) {
        const char *sid = PQgetvalue(list, i, 0), *path = PQgetvalue(list, i, 1);
        int64_t parent = pg_int_of(list, i, 2), fork_seq = pg_int_of(list, i, 3);
        uint8_t prev[CHAIN_LEN] = {0}, tail[CHAIN_LEN] = {0};
        char line[LOG_PATH_MAX + 128], off[OFFSET_LEN + 1];
        int ok = 1, got;
        if (parent && fork_seq > 0 && chain_start(pg, parent, fork_seq - 1, prev, err, errlen)) goto out;
        const char *v[1] = {sid};
        PGresult *cur = run(pg, CHAIN_WHAT,
                            "DECLARE walk_msgs BINARY NO SCROLL CURSOR FOR SELECT seq, pos, data, digest FROM messages"
                            " WHERE stream = $1::bigint ORDER BY seq",
                            1, v, 0, err, errlen);
        if (!cur) goto out;
        PQclear(cur);
        msg_reader m = {pg, NULL, 0, 0, 0};
        while (ok && (got = msg_next(&m, err, errlen)) > 0) {
            offset_t at = {(uint64_t)pg_int_at(m.batch, m.i, 0), (uint64_t)pg_int_at(m.batch, m.i, 1)};
            const uint8_t *d = PQgetlength(m.batch, m.i, 3) == CHAIN_LEN ? (const uint8_t *)PQgetvalue(m.batch, m.i, 3)
                                                                          : NULL;
            if (chain_step(prev, at, PQgetvalue(m.batch, m.i, 2), (size_t)PQgetlength(m.batch, m.i, 2), d)) continue;
            ok = 0;
            offset_format(at, off);
            snprintf(line, sizeof line, "%s: path=%s offset=%s", STORE_CHECK_CHAIN, path, off);
            if (broken++ < limit) report(ud, line);
        }
        PQclear(m.batch);
        PGresult *cl = PQexec(pg, "CLOSE walk_msgs");
        int closed = PQresultStatus(cl) == PGRES_COMMAND_OK;
        PQclear(cl);
        if (ok && got < 0) goto out;
        if (!closed) {
            snprintf(err, errlen, "%s: %s", CHAIN_WHAT, PQerrorMessage(pg));
            goto out;
        }
        if (!ok) continue;
        const char *hex = PQgetvalue(list, i, 4);
        if (chain_parse(hex, strlen(hex), tail) || memcmp(tail, prev, CHAIN_LEN)) {
            snprintf(line, sizeof line, "%s: path=%s", STORE_CHECK_CHAIN_TAIL, path);
            if (tails++ < limit) report(ud, line);
        }
    }
    rc = broken + tails;
out:
    PQclear(list);
    return rc;
}

/* One session stream: its start, then its snapshots (its own after its fork point,
 * and the fork points of the live session streams forked from it) in order of
 * position, each after the stream's own messages before that position. Each
 * message is read once, none past the last snapshot. Returns 0, or -1 with err. */
static int walk_stream(PGconn *pg, const backup_walk *w, const char *sid, const char *path, int64_t fork_seq,
                       int fork, int deleted, char *err, size_t errlen)
{
    const char *session = path + 9;     /* "sessions/ID" */
    char from[24], after[24], upto[24];
    PGresult *cp = NULL, *fp = NULL, *cur = NULL;
    msg_reader m = {pg, NULL, 0, 0, 0};
    int rc = -1;
    snprintf(after, sizeof after, "%lld", (long long)(fork ? fork_seq : -1));
    snprintf(from, sizeof from, "%lld", (long long)(fork ? fork_seq : 0));
    const char *cv[4] = {sid, session, after, path};
    cp = run(pg, WALK_WHAT,
             "SELECT who, seq, view, via FROM (SELECT n.session AS who, n.seq, n.view, ''::text AS via"
             " FROM snapshots n WHERE n.session = $2 AND n.seq > $3::bigint"
             " UNION ALL"
             " SELECT n.session, n.seq, n.view, $4::text FROM streams c JOIN snapshots n"
             " ON n.session = substr(c.path, 10) AND n.seq = c.fork_seq"
             " WHERE c.parent = $1::bigint AND c.deleted = 0 AND c.path LIKE 'sessions/%') u"
             " ORDER BY seq, who COLLATE \"C\"",
             4, cv, 0, err, errlen);
    if (!cp) goto out;
    const char *fork_view = NULL;
    if (fork) {
        const char *fv[2] = {session, from};
        if (!(fp = run(pg, WALK_WHAT, "SELECT view FROM snapshots WHERE session = $1 AND seq = $2::bigint", 2, fv,
                       0, err, errlen)))
            goto out;
        if (PQntuples(fp) == 1) fork_view = PQgetvalue(fp, 0, 0);
    }
    if (w->stream(w->ud, session, fork, fork_seq, fork_view, deleted)) {
        rc = 0;
        goto out;
    }
    int nsnap = PQntuples(cp);
    if (!nsnap) {
        rc = 0;
        goto out;
    }
    /* Messages up to the last snapshot only. */
    snprintf(upto, sizeof upto, "%s", PQgetvalue(cp, nsnap - 1, 1));
    const char *mv[3] = {sid, from, upto};
    if (!(cur = run(pg, WALK_WHAT,
                    "DECLARE walk_msgs BINARY NO SCROLL CURSOR FOR SELECT seq, pos, data FROM messages"
                    " WHERE stream = $1::bigint AND seq >= $2::bigint AND seq < $3::bigint ORDER BY seq",
                    3, mv, 0, err, errlen)))
        goto out;
    /* held: the reader's current message, read but not delivered yet (it is at or
     * past the snapshot being delivered); more: messages are still wanted. */
    int held = 0, more = 1;
    for (int k = 0; k < nsnap; k++) {
        int64_t seq = strtoll(PQgetvalue(cp, k, 1), NULL, 10);
        while (more) {
            if (!held) {
                int got = msg_next(&m, err, errlen);
                if (got < 0) goto out;
                if (!got) {
                    more = 0;
                    break;
                }
                held = 1;
            }
            if (pg_int_at(m.batch, m.i, 0) >= seq) break;
            held = 0;
            if (w->message(w->ud, pg_int_at(m.batch, m.i, 0), pg_int_at(m.batch, m.i, 1),
                           PQgetvalue(m.batch, m.i, 2), (size_t)PQgetlength(m.batch, m.i, 2)))
                more = 0;
        }
        w->snapshot(w->ud, PQgetvalue(cp, k, 0), seq, PQgetvalue(cp, k, 2), PQgetvalue(cp, k, 3));
    }
    rc = 0;
out:
    if (cur) {
        PQclear(cur);
        PGresult *cl = PQexec(pg, "CLOSE walk_msgs");
        if (rc == 0 && PQresultStatus(cl) != PGRES_COMMAND_OK) {
            snprintf(err, errlen, "%s: %s", WALK_WHAT, PQerrorMessage(pg));
            rc = -1;
        }
        PQclear(cl);
    }
    PQclear(m.batch);
    PQclear(cp);
    PQclear(fp);
    return rc;
}

/* Every session stream, in the order they were created. */
static int walk(PGconn *pg, const backup_walk *w, char *err, size_t errlen)
{
    PGresult *r = run(pg, WALK_WHAT,
                      "SELECT id, path, fork_seq, (parent IS NOT NULL)::int, deleted FROM streams"
                      " WHERE path LIKE 'sessions/_%' ORDER BY id", 0, NULL, 0, err, errlen);
    if (!r) return -1;
    int rc = 0;
    for (int i = 0; i < PQntuples(r) && !rc; i++)
        rc = walk_stream(pg, w, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), pg_int_of(r, i, 2),
                         (int)pg_int_of(r, i, 3), (int)pg_int_of(r, i, 4), err, errlen);
    PQclear(r);
    return rc;
}

static int pg_bk_check(const char *target, int limit, backup_report_fn report, void *ud, const backup_walk *w,
                       char *err, size_t errlen)
{
    int problems = 0;
    PGconn *pg = pg_connect(target, err, errlen);
    if (!pg) return strstr(err, "does not exist") ? BACKUP_ENODB : BACKUP_EOPEN;
    PGresult *r = NULL;
    /* One snapshot: every rule and the walk see the same commits. */
    if (!(r = run(pg, "check", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, 0, err, errlen)))
        goto fail;
    PQclear(r);
    /* A database without the log's tables is no dstream database (yet): nothing to check. */
    if (!(r = run(pg, "check", "SELECT to_regclass('streams') IS NOT NULL AND to_regclass('sessions') IS NOT NULL",
                  0, NULL, 0, err, errlen)))
        goto fail;
    int ours = !strcmp(PQgetvalue(r, 0, 0), "t");
    PQclear(r);
    if (!ours) {
        snprintf(err, errlen, "%s: no dstream database (it has no streams table)", PQdb(pg));
        PQfinish(pg);
        return BACKUP_ENODB;
    }
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        int n = run_rule(pg, &rules[i], limit, report, ud, err, errlen);
        if (n < 0) goto fail;
        problems += n;
    }
    /* A database from before the chain (not opened since) has none to check. */
    if (!(r = run(pg, "check", "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema()"
                               " AND table_name = 'messages' AND column_name = 'digest'",
                  0, NULL, 0, err, errlen)))
        goto fail;
    int chained = strcmp(PQgetvalue(r, 0, 0), "0") != 0;
    PQclear(r);
    r = NULL;
    if (chained) {
        int broken = chain_walk(pg, limit, report, ud, err, errlen);
        if (broken < 0) goto fail;
        problems += broken;
    }
    if (walk(pg, w, err, errlen)) goto fail;
    PQclear(PQexec(pg, "COMMIT"));
    PQfinish(pg);
    return problems;
fail:
    PQfinish(pg);       /* ends the transaction */
    return BACKUP_EFAIL;
}

const store_backup_ops pg_backup_ops = {
    .copy = pg_bk_copy,
    .restore = pg_bk_restore,
    .check = pg_bk_check,
};

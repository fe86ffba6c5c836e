/* The SQLite engine's streams: the log's operations (lib/log.h) in SQL.
 *
 * Storage. A stream is a row of `streams`; its messages are rows of `messages`
 * keyed by (stream, seq). A message's offset is (seq, pos): how many messages and
 * bytes come before it. The stream row keeps the tail (tail_seq, tail_pos), the
 * closed flag, the last Stream-Seq and TTL data, so an append never scans. A fork
 * stores only its own messages: seq < fork_seq are read from its parent, which
 * reads seq < its own fork_seq from its parent, and so on. A deleted stream that
 * forks still read is only marked deleted (its path is free again); the last fork
 * to go takes such ancestors with it.
 *
 * What each operation decides from these rows (a stream's state, the fork chain,
 * the producer and Stream-Seq rules, a read's offset checks, soft deletion, the
 * sweep's batches) is lib/logrule's, the same on every engine: this file is the
 * SQL it runs on (its logrule_rows).
 *
 * Writes run inside the group commit of lib/log.c, one SAVEPOINT per operation.
 *
 * Reads run on the calling thread's connection inside BEGIN/COMMIT so that the
 * stream row and its messages come from one snapshot, and never wait inside it. */
#include "sq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../logrule.h"
#include "../../timefmt.h"

enum {
    S_GET, S_GET_ID, S_INSERT_STREAM, S_INSERT_MSG, S_UPDATE_TAIL, S_READ, S_PROD_GET,
    S_PROD_PUT, S_DEL_MSGS, S_DEL_PRODS, S_KEEP_REV, S_DEL_STREAM, S_TOUCH, S_SOFT_DELETE, S_FORKS_ADD,
    S_EXPIRED, S_DEL_MSGS_SOME, S_CHANGES, S_MAXREV, S_CHILDREN, S_MSG_AT, S_REC_COUNT, S_REC_MSGS, S_DIGEST_AT, S_BEGIN, S_COMMIT, S_ROLLBACK, S_SAVEPOINT, S_RELEASE, S_ROLLBACK_TO,
    S_BEGIN_READ, S_COUNT
};

#define INFO_COLS "id, content_type, json, created_ms, access_ms, ttl_s, expires_ms, closed, " \
                  "tail_seq, tail_pos, stream_seq, parent, fork_seq, fork_pos, forks, deleted, fork_sub, digest"

/* The next change number: above every stream's and above those of streams
 * deleted since (stream_rev_floor, kept by a trigger), so that it never goes back
 * when the stream holding the highest one is deleted (log_changes would miss the
 * next change). */
#define NEXT_REV "(SELECT max(coalesce((SELECT max(rev) FROM streams), 0)," \
                 " coalesce((SELECT rev FROM stream_rev_floor WHERE id = 1), 0)) + 1)"

static const char *const sql_text[S_COUNT] = {
    [S_GET] = "SELECT " INFO_COLS " FROM streams WHERE path = ?",
    [S_GET_ID] = "SELECT " INFO_COLS " FROM streams WHERE id = ?",
    [S_INSERT_STREAM] =
        "INSERT INTO streams (path, content_type, json, created_ms, access_ms, ttl_s,"
        " expires_ms, closed, tail_seq, tail_pos, parent, fork_seq, fork_pos, fork_sub, digest)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?)",
    [S_INSERT_MSG] = "INSERT INTO messages (stream, seq, pos, rec, data, digest) VALUES (?, ?, ?, ?, ?, ?)",
    [S_UPDATE_TAIL] = "UPDATE streams SET tail_seq = ?, tail_pos = ?, closed = ?,"
                      " stream_seq = ?, access_ms = ?, digest = ?,"
                      " rev = " NEXT_REV " WHERE id = ?",
    [S_READ] = "SELECT seq, pos, data, digest FROM messages WHERE stream = ? AND seq >= ? AND seq < ?"
               " ORDER BY seq",
    [S_PROD_GET] = "SELECT epoch, seq FROM producers WHERE stream = ? AND producer = ?",
    [S_PROD_PUT] = "INSERT OR REPLACE INTO producers (stream, producer, epoch, seq)"
                   " VALUES (?, ?, ?, ?)",
    [S_DEL_MSGS] = "DELETE FROM messages WHERE stream = ?",
    [S_DEL_PRODS] = "DELETE FROM producers WHERE stream = ?",
    /* The change counter is max(rev) + 1: removing the row that holds the maximum
     * would lower it, and the next changes would reuse revisions that watchers
     * (log_changes) have already passed. The row of the next-highest revision
     * takes the maximum over (seen as changed once more: harmless). */
    [S_KEEP_REV] = "UPDATE streams SET rev = (SELECT max(rev) FROM streams)"
                   " WHERE id = (SELECT id FROM streams WHERE id != ?1 ORDER BY rev DESC LIMIT 1)"
                   " AND ?1 = (SELECT id FROM streams ORDER BY rev DESC LIMIT 1)",
    [S_DEL_STREAM] = "DELETE FROM streams WHERE id = ?",
    [S_TOUCH] = "UPDATE streams SET access_ms = ? WHERE id = ?",
    [S_SOFT_DELETE] = "UPDATE streams SET deleted = 1,"
                      " rev = " NEXT_REV " WHERE id = ?",
    [S_FORKS_ADD] = "UPDATE streams SET forks = forks + ? WHERE id = ?",
    [S_EXPIRED] = "SELECT id FROM streams WHERE deleted = 0 AND"
                  " ((ttl_s IS NOT NULL AND access_ms + ttl_s * 1000 <= ?1) OR"
                  "  (expires_ms IS NOT NULL AND expires_ms <= ?1)) ORDER BY id DESC LIMIT ?2",
    /* At most ?2 of a stream's own messages, its oldest (they are numbered
     * without gaps from its first). */
    [S_DEL_MSGS_SOME] = "DELETE FROM messages WHERE stream = ?1 AND"
                        " seq < (SELECT min(seq) FROM messages WHERE stream = ?1) + ?2",
    [S_CHANGES] = "SELECT id, rev, path, CASE WHEN deleted OR closed THEN 0 ELSE tail_seq END FROM streams"
                  " WHERE rev > ? ORDER BY rev LIMIT 1000",
    [S_MAXREV] = "SELECT coalesce(max(rev), 0) FROM streams",
    [S_CHILDREN] = "SELECT id FROM streams WHERE parent = ? AND deleted = 0",
    [S_MSG_AT] = "SELECT pos, rec, data FROM messages WHERE stream = ? AND seq = ?",
    [S_REC_COUNT] = "SELECT count(*) FROM messages WHERE stream = ? AND rec = ?",
    [S_REC_MSGS] = "SELECT data FROM messages WHERE stream = ? AND rec = ? ORDER BY seq LIMIT ?",
    [S_DIGEST_AT] = "SELECT digest FROM messages WHERE stream = ? AND seq = ?",
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_SAVEPOINT] = "SAVEPOINT op",
    [S_RELEASE] = "RELEASE op",
    [S_ROLLBACK_TO] = "ROLLBACK TO op",
    [S_BEGIN_READ] = "BEGIN",
};

/* ---- statement helpers ------------------------------------------------------ */

_Static_assert(S_COUNT <= SQ_STREAM_STMTS, "sq_conn's st[] holds every statement");

int sq_streams_prepare(sq_conn *c, char *err, size_t errlen)
{
    for (int i = 0; i < S_COUNT; i++) {
        if (sqlite3_prepare_v3(c->db, sql_text[i], -1, SQLITE_PREPARE_PERSISTENT, &c->st[i],
                               NULL) != SQLITE_OK) {
            snprintf(err, errlen, "prepare %d: %s", i, sqlite3_errmsg(c->db));
            return -1;
        }
    }
    return 0;
}

void sq_streams_finalize(sq_conn *c)
{
    for (int i = 0; i < S_COUNT; i++) {
        sqlite3_finalize(c->st[i]);
        c->st[i] = NULL;
    }
}

static sqlite3_stmt *stmt(log_conn_t *c, int which)
{
    sqlite3_stmt *s = sq(c)->st[which];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

/* Run a statement that returns no rows. */
static int run(log_conn_t *c, sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : sq_error(c, rc);
}

static int run_simple(log_conn_t *c, int which)
{
    return run(c, stmt(c, which));
}

static int64_t col_opt(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, i);
}

/* Column i of s into dst (cap > 0), cut to fit as snprintf's "%s" would: every
 * append reads its row's two (snprintf cost more than the rest of the row). */
static void copy_text(char *dst, size_t cap, sqlite3_stmt *s, int i)
{
    const char *t = (const char *)sqlite3_column_text(s, i);
    size_t n = t ? strnlen(t, cap - 1) : 0;
    if (n) memcpy(dst, t, n);
    dst[n] = '\0';
}

/* Fill info from a row of INFO_COLS starting at column k; *deleted gets the
 * soft-delete flag. */
static void row_info(sqlite3_stmt *s, int k, log_info *info, int *deleted)
{
    memset(info, 0, sizeof *info);
    info->id = sqlite3_column_int64(s, k + 0);
    copy_text(info->content_type, sizeof info->content_type, s, k + 1);
    info->json = sqlite3_column_int(s, k + 2);
    info->created_ms = sqlite3_column_int64(s, k + 3);
    info->access_ms = sqlite3_column_int64(s, k + 4);
    info->ttl_s = col_opt(s, k + 5);
    info->expires_ms = col_opt(s, k + 6);
    info->closed = sqlite3_column_int(s, k + 7);
    info->tail.seq = (uint64_t)sqlite3_column_int64(s, k + 8);
    info->tail.pos = (uint64_t)sqlite3_column_int64(s, k + 9);
    copy_text(info->stream_seq, sizeof info->stream_seq, s, k + 10);
    info->parent = col_opt(s, k + 11);
    if (info->parent < 0) info->parent = 0;
    info->fork.seq = (uint64_t)sqlite3_column_int64(s, k + 12);
    info->fork.pos = (uint64_t)sqlite3_column_int64(s, k + 13);
    info->forks = sqlite3_column_int64(s, k + 14);
    if (deleted) *deleted = sqlite3_column_int(s, k + 15);
    info->fork_sub = sqlite3_column_int64(s, k + 16);
    /* A row without a digest (none can be: the migration gave every row one) reads as zeros. */
    if (sqlite3_column_bytes(s, k + 17) == CHAIN_LEN) memcpy(info->digest, sqlite3_column_blob(s, k + 17), CHAIN_LEN);
}

/* Column i of s as a digest: its bytes, or NULL when it holds none. */
static const uint8_t *col_digest(sqlite3_stmt *s, int i)
{
    const void *d = sqlite3_column_blob(s, i);
    return d && sqlite3_column_bytes(s, i) == CHAIN_LEN ? d : NULL;
}

/* ---- the rows lib/logrule decides from (logrule_rows) ----------------------------- */

/* One stream row by statement which (its first parameter bound): 1, 0, or LOG_E*. */
static int get_row(log_conn_t *c, sqlite3_stmt *s, log_info *info, int *deleted)
{
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) row_info(s, 0, info, deleted);
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : sq_error(c, rc);
}

static int by_path(log_conn_t *c, const char *path, log_info *info, int *deleted)
{
    sqlite3_stmt *s = stmt(c, S_GET);
    sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
    return get_row(c, s, info, deleted);
}

static int by_id(log_conn_t *c, int64_t id, log_info *info, int *deleted)
{
    sqlite3_stmt *s = stmt(c, S_GET_ID);
    sqlite3_bind_int64(s, 1, id);
    return get_row(c, s, info, deleted);
}

static int pos_at(log_conn_t *c, int64_t id, uint64_t seq, uint64_t *pos)
{
    sqlite3_stmt *s = stmt(c, S_MSG_AT);
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, (int64_t)seq);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *pos = (uint64_t)sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : sq_error(c, rc);
}

/* A cursor over the rows: budget (for engines that fetch in batches) does not matter. */
static int scan(log_conn_t *c, int64_t id, uint64_t lo, uint64_t hi, uint64_t budget,
                int (*fn)(void *ud, const void *data, size_t len, offset_t at, const uint8_t *digest), void *ud)
{
    (void)budget;
    sqlite3_stmt *s = stmt(c, S_READ);
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, (int64_t)lo);
    sqlite3_bind_int64(s, 3, (int64_t)hi);
    int rc, stop = 0;
    while (!stop && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        offset_t at = {(uint64_t)sqlite3_column_int64(s, 0), (uint64_t)sqlite3_column_int64(s, 1)};
        stop = fn(ud, sqlite3_column_blob(s, 2), (size_t)sqlite3_column_bytes(s, 2), at, col_digest(s, 3));
    }
    sqlite3_reset(s);
    return stop ? stop : rc == SQLITE_DONE ? 0 : sq_error(c, rc);
}

static int digest_at(log_conn_t *c, int64_t id, uint64_t seq, uint8_t out[CHAIN_LEN])
{
    sqlite3_stmt *s = stmt(c, S_DIGEST_AT);
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, (int64_t)seq);
    int rc = sqlite3_step(s), found = 0;
    if (rc == SQLITE_ROW && col_digest(s, 0)) {
        memcpy(out, col_digest(s, 0), CHAIN_LEN);
        found = 1;
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? found : sq_error(c, rc);
}

/* Append msgs as one record (one request body) at the tail of info, each with its
 * digest chained on from info->digest (the tail's, read with the row: no read more). */
static int insert_msgs(log_conn_t *c, log_info *info, const log_msg *msgs, size_t n)
{
    uint64_t rec = info->tail.seq;
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *s = stmt(c, S_INSERT_MSG);
        chain_link(info->digest, info->tail, msgs[i].data, msgs[i].len, info->digest);
        sqlite3_bind_int64(s, 1, info->id);
        sqlite3_bind_int64(s, 2, (int64_t)info->tail.seq);
        sqlite3_bind_int64(s, 3, (int64_t)info->tail.pos);
        sqlite3_bind_int64(s, 4, (int64_t)rec);
        sqlite3_bind_blob(s, 5, msgs[i].data, (int)msgs[i].len, SQLITE_STATIC);
        sqlite3_bind_blob(s, 6, info->digest, CHAIN_LEN, SQLITE_STATIC);
        int rc = run(c, s);
        if (rc) return rc;
        info->tail.seq++;
        info->tail.pos += msgs[i].len;
    }
    return 0;
}

/* The records, a statement per message (the writer's own statements: in-process,
 * nothing to batch), then the tail. */
static int write_recs(log_conn_t *c, log_info *info, const logrule_rec *recs, int nrecs, int64_t now)
{
    for (int k = 0; k < nrecs; k++) {
        int rc = insert_msgs(c, info, recs[k].msgs, recs[k].n);
        if (rc) return rc;
    }
    sqlite3_stmt *s = stmt(c, S_UPDATE_TAIL);
    sqlite3_bind_int64(s, 1, (int64_t)info->tail.seq);
    sqlite3_bind_int64(s, 2, (int64_t)info->tail.pos);
    sqlite3_bind_int(s, 3, info->closed);
    if (info->stream_seq[0]) sqlite3_bind_text(s, 4, info->stream_seq, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, now);
    sqlite3_bind_blob(s, 6, info->digest, CHAIN_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(s, 7, info->id);
    return run(c, s);
}

static int producer_get(log_conn_t *c, int64_t id, const char *producer, int64_t *epoch, int64_t *seq)
{
    sqlite3_stmt *s = stmt(c, S_PROD_GET);
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_text(s, 2, producer, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *epoch = sqlite3_column_int64(s, 0);
        *seq = sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : sq_error(c, rc);
}

static int producer_put(log_conn_t *c, int64_t id, const char *producer, int64_t epoch, int64_t seq)
{
    sqlite3_stmt *s = stmt(c, S_PROD_PUT);
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_text(s, 2, producer, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, epoch);
    sqlite3_bind_int64(s, 4, seq);
    return run(c, s);
}

/* Rows of ids (the first column) of statement s, at most max. */
static int ids_of(log_conn_t *c, sqlite3_stmt *s, int64_t *ids, int max)
{
    int n = 0, rc = SQLITE_DONE;
    while (n < max && (rc = sqlite3_step(s)) == SQLITE_ROW) ids[n++] = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return n == max || rc == SQLITE_DONE ? n : sq_error(c, rc);
}

static int children(log_conn_t *c, int64_t id, int64_t *ids, int max)
{
    sqlite3_stmt *s = stmt(c, S_CHILDREN);
    sqlite3_bind_int64(s, 1, id);
    return ids_of(c, s, ids, max);
}

static int forks_add(log_conn_t *c, int64_t id, int delta)
{
    sqlite3_stmt *s = stmt(c, S_FORKS_ADD);
    sqlite3_bind_int(s, 1, delta);
    sqlite3_bind_int64(s, 2, id);
    return run(c, s);
}

static int drop(log_conn_t *c, int64_t id)
{
    int rc;
    static const int which[] = {S_DEL_MSGS, S_DEL_PRODS, S_KEEP_REV, S_DEL_STREAM};
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++) {
        sqlite3_stmt *s = stmt(c, which[i]);
        sqlite3_bind_int64(s, 1, id);
        if ((rc = run(c, s))) return rc;
    }
    return 0;
}

static int mark_deleted(log_conn_t *c, int64_t id)
{
    sqlite3_stmt *s = stmt(c, S_SOFT_DELETE);
    sqlite3_bind_int64(s, 1, id);
    return run(c, s);
}

static int expired(log_conn_t *c, int64_t now_ms, int max, int64_t *ids)
{
    sqlite3_stmt *s = stmt(c, S_EXPIRED);
    sqlite3_bind_int64(s, 1, now_ms);
    sqlite3_bind_int(s, 2, max);
    return ids_of(c, s, ids, max);
}

static int64_t drop_messages(log_conn_t *c, int64_t id, int64_t max)
{
    sqlite3_stmt *s = stmt(c, S_DEL_MSGS_SOME);
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, max);
    int rc = run(c, s);
    return rc ? rc : sqlite3_changes(sq(c)->db);
}

static const logrule_rows rows = {
    .by_path = by_path, .by_id = by_id, .pos_at = pos_at, .scan = scan, .digest_at = digest_at,
    .write = write_recs,
    .producer_get = producer_get, .producer_put = producer_put,
    .children = children, .forks_add = forks_add, .drop = drop, .mark_deleted = mark_deleted,
    .expired = expired, .drop_messages = drop_messages,
};

/* ---- create ------------------------------------------------------------------- */

/* The messages that a fork at anchor with sub-offset sub copies into itself: the
 * first sub bytes (or, for JSON, messages) of the record that starts at anchor.
 * Fills *prefix (owned by the caller, free each data) and returns 0, or LOG_ERANGE. */
static int fork_prefix(log_conn_t *c, const log_info *chain, int n, offset_t anchor,
                       int64_t sub, int json, log_msg **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (sub == 0) return 0;
    if (anchor.seq >= chain[0].tail.seq) return LOG_ERANGE;
    const log_info *o = logrule_owner(chain, n, anchor.seq);
    sqlite3_stmt *s = stmt(c, S_MSG_AT);
    sqlite3_bind_int64(s, 1, o->id);
    sqlite3_bind_int64(s, 2, (int64_t)anchor.seq);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) { sqlite3_reset(s); return rc == SQLITE_DONE ? LOG_ERANGE : sq_error(c, rc); }
    int64_t rec = sqlite3_column_int64(s, 1);
    size_t len = (size_t)sqlite3_column_bytes(s, 2);
    const void *data = sqlite3_column_blob(s, 2);
    if ((uint64_t)rec != anchor.seq) { sqlite3_reset(s); return LOG_ERANGE; }
    if (!json) {
        if ((uint64_t)sub > len) { sqlite3_reset(s); return LOG_ERANGE; }
        log_msg *m = calloc(1, sizeof *m);
        void *copy = malloc((size_t)sub);
        if (!m || !copy) abort();
        memcpy(copy, data, (size_t)sub);
        m->data = copy;
        m->len = (size_t)sub;
        sqlite3_reset(s);
        *out = m;
        *nout = 1;
        return 0;
    }
    sqlite3_reset(s);
    s = stmt(c, S_REC_COUNT);
    sqlite3_bind_int64(s, 1, o->id);
    sqlite3_bind_int64(s, 2, rec);
    if ((rc = sqlite3_step(s)) != SQLITE_ROW) { sqlite3_reset(s); return sq_error(c, rc); }
    int64_t count = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (sub > count) return LOG_ERANGE;
    log_msg *m = calloc((size_t)sub, sizeof *m);
    if (!m) abort();
    s = stmt(c, S_REC_MSGS);
    sqlite3_bind_int64(s, 1, o->id);
    sqlite3_bind_int64(s, 2, rec);
    sqlite3_bind_int64(s, 3, sub);
    size_t k = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && k < (size_t)sub) {
        size_t l = (size_t)sqlite3_column_bytes(s, 0);
        void *copy = malloc(l ? l : 1);
        if (!copy) abort();
        if (l) memcpy(copy, sqlite3_column_blob(s, 0), l);
        m[k].data = copy;
        m[k].len = l;
        k++;
    }
    sqlite3_reset(s);
    *out = m;
    *nout = k;
    return 0;
}

/* The exact position of message seq in a chain (client offsets carry a pos that is
 * not trusted). */


static int op_create(log_conn_t *c, log_create_req *r)
{
    log_info chain[LOGRULE_CHAIN_MAX];
    int rc, n = 0;
    int64_t now = timefmt_now_ms();
    log_msg *prefix = NULL;
    size_t nprefix = 0;
    const char *ct = r->content_type;
    int64_t ttl = r->ttl_s, expires = r->expires_ms;
    offset_t fork = {0, 0};
    uint8_t start[CHAIN_LEN] = {0};     /* the chain's start: a fork's parent's digest at the fork point */

    if ((rc = logrule_create_begin(c, &rows, r, chain))) return rc < 0 ? rc : 0;
    if (r->fork_from) {
        if ((rc = logrule_fork(c, &rows, r, chain, &n, &ct, &ttl, &expires, &fork))) return rc;
        if ((rc = logrule_digest_at(c, &rows, chain, n, fork.seq, start))) return rc;
        if ((rc = fork_prefix(c, chain, n, fork, r->fork_sub, chain[0].json, &prefix, &nprefix)))
            return rc;
        if ((rc = forks_add(c, chain[0].id, 1))) goto out;
    }
    if (!ct) ct = "application/octet-stream";

    sqlite3_stmt *s = stmt(c, S_INSERT_STREAM);
    sqlite3_bind_text(s, 1, r->path, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, ct, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(s, 3, log_ctype_json(ct));
    sqlite3_bind_int64(s, 4, now);
    sqlite3_bind_int64(s, 5, now);
    if (ttl >= 0) sqlite3_bind_int64(s, 6, ttl);
    if (expires >= 0) sqlite3_bind_int64(s, 7, expires);
    sqlite3_bind_int64(s, 8, (int64_t)fork.seq);
    sqlite3_bind_int64(s, 9, (int64_t)fork.pos);
    if (r->fork_from) sqlite3_bind_int64(s, 10, chain[0].id);
    sqlite3_bind_int64(s, 11, (int64_t)fork.seq);
    sqlite3_bind_int64(s, 12, (int64_t)fork.pos);
    sqlite3_bind_int64(s, 13, r->fork_sub);
    sqlite3_bind_blob(s, 14, start, CHAIN_LEN, SQLITE_STATIC);
    if ((rc = run(c, s))) goto out;

    rc = logrule_create_fill(c, &rows, r, prefix, nprefix, now);
out:
    logrule_free_msgs(prefix, nprefix);
    return rc;
}


/* ---- append, delete, touch, sweep, reads ------------------------------------------ */

static int op_append(log_conn_t *c, log_append_req *r)
{
    return logrule_append(c, &rows, r);
}

static int op_delete(log_conn_t *c, const char *path, int *answer)
{
    return logrule_delete(c, &rows, path, answer);
}

static int op_touch(log_conn_t *c, int64_t id)
{
    sqlite3_stmt *s = stmt(c, S_TOUCH);
    sqlite3_bind_int64(s, 1, timefmt_now_ms());
    sqlite3_bind_int64(s, 2, id);
    return run(c, s);
}

static int op_sweep(log_conn_t *c, log_sweep_batch *b)
{
    return logrule_sweep(c, &rows, b);
}

static int op_head(log_conn_t *c, const char *path, log_info *info)
{
    return logrule_head(c, &rows, path, info);
}

static int op_digest_at(log_conn_t *c, const char *path, uint64_t seq, uint8_t out[CHAIN_LEN])
{
    int own_tx = sqlite3_get_autocommit(sq(c)->db), rc;
    if (own_tx && (rc = run_simple(c, S_BEGIN_READ))) return rc;
    rc = logrule_digest(c, &rows, path, seq, out);
    if (own_tx) run_simple(c, S_COMMIT);
    return rc;
}

static int op_read(log_conn_t *c, log_read_req *r, log_msg_fn fn, void *ud)
{
    /* Inside log_transact the read sees the transaction's own writes. */
    int own_tx = sqlite3_get_autocommit(sq(c)->db), rc;
    if (own_tx && (rc = run_simple(c, S_BEGIN_READ))) return rc;
    rc = logrule_read(c, &rows, r, fn, ud);
    if (own_tx) run_simple(c, S_COMMIT);
    return rc;
}

/* log_read_batch: the reads that follow in one read transaction (op_read and
 * op_digest_at find it open and run in it), until on 0 or a group's begin
 * (sq_read_batch_end). Inside a group, or with a transaction open, nothing. */
static int op_read_batch(log_conn_t *c, int on)
{
    if (!on) return sq_read_batch_end(c);
    if (sq(c)->batch || !sqlite3_get_autocommit(sq(c)->db)) return 0;
    int rc = run_simple(c, S_BEGIN_READ);
    sq(c)->batch = rc == 0;
    return rc;
}

int sq_read_batch_end(log_conn_t *c)
{
    if (!sq(c)->batch) return 0;
    sq(c)->batch = 0;
    return run_simple(c, S_COMMIT);
}

int sq_max_rev(log_conn_t *c, int64_t *rev)
{
    sqlite3_stmt *s = stmt(c, S_MAXREV);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *rev = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : sq_error(c, rc);
}

/* The change feed on a connection: streams whose revision is above the cursor's,
 * fn for each (or, if set, tail_fn with its tail: 0 for one deleted or closed). */
static int changes(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *),
                   void (*tail_fn)(void *, int64_t, const char *, uint64_t), void *ud)
{
    int64_t *rev = &cur->v, top;
    int rc;
    sqlite3_stmt *s;
    if (*rev < 0) return sq_max_rev(c, rev);
    /* The counter went back (the last stream was removed): every stream is new
     * to this watcher. */
    if ((rc = sq_max_rev(c, &top))) return rc;
    if (top < *rev) *rev = 0;
    int n = 0;
    do {
        s = stmt(c, S_CHANGES);
        sqlite3_bind_int64(s, 1, *rev);
        n = 0;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            const char *path = (const char *)sqlite3_column_text(s, 2);
            if (tail_fn) tail_fn(ud, sqlite3_column_int64(s, 0), path, (uint64_t)sqlite3_column_int64(s, 3));
            else fn(ud, sqlite3_column_int64(s, 0), path);
            *rev = sqlite3_column_int64(s, 1);
            n++;
        }
        sqlite3_reset(s);
        if (rc != SQLITE_DONE) return sq_error(c, rc);
    } while (n == 1000);
    return 0;
}

int sq_changes_since(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *), void *ud)
{
    return changes(c, cur, fn, NULL, ud);
}

int sq_changes_tails(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *, uint64_t), void *ud)
{
    return changes(c, cur, NULL, fn, ud);
}

static int op_list(log_conn_t *c, const char *prefix,
                   void (*fn)(void *ud, const char *path, const log_info *info), void *ud)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT path, " INFO_COLS " FROM streams WHERE substr(path, 1, length(?1)) = ?1"
                    " ORDER BY path", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        log_info info;
        row_info(st, 1, &info, NULL);
        const unsigned char *p = sqlite3_column_text(st, 0);
        fn(ud, p ? (const char *)p : "", &info);
    }
    return sq_stmt_finish(c, st, rc);
}


int sq_tx(log_conn_t *c, sq_tx_step step)
{
    static const int which[] = {[SQ_TX_BEGIN] = S_BEGIN, [SQ_TX_COMMIT] = S_COMMIT, [SQ_TX_ROLLBACK] = S_ROLLBACK,
                                [SQ_TX_SAVEPOINT] = S_SAVEPOINT, [SQ_TX_RELEASE] = S_RELEASE,
                                [SQ_TX_ROLLBACK_TO] = S_ROLLBACK_TO};
    return run_simple(c, which[step]);
}

const store_streams_ops sq_streams_ops = {
    .create = op_create,
    .append = op_append,
    .remove = op_delete,
    .touch = op_touch,
    .sweep = op_sweep,
    .read = op_read,
    .read_batch = op_read_batch,
    .head = op_head,
    .digest_at = op_digest_at,
    .list = op_list,
};

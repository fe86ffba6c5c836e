/* The PostgreSQL engine's streams: the log's operations (lib/log.h) in SQL, with
 * exactly the SQLite engine's behaviour (lib/store/sqlite/sq_streams.c has the
 * essay on storage: rows of `streams`, messages keyed by (stream, seq), forks that
 * read their ancestors' messages below their fork point, soft deletion while forks
 * read a stream).
 *
 * Many writers. Groups of every process and host run at once, so what SQLite gets
 * from its one writer is taken here row by row: an append (and a close, a delete,
 * a fork of a source) reads its stream's row `FOR UPDATE` in its transaction,
 * which waits for any other transaction that holds it and then sees its commit.
 * The tail is read and moved under that lock, so offsets are gapless and a reader
 * never passes an offset that commits later: there is no global sequence to
 * allocate and nothing is numbered by max() + 1. Two creations of one path meet
 * on the path's unique index (INSERT ... ON CONFLICT DO NOTHING waits for the
 * other and then sees it).
 *
 * Every change to a stream row stamps streams.xid = pg_current_xact_id() (the
 * change feed's key, pg_feed.c) and notes the stream for the group's NOTIFY
 * (pg_changed); deleting a row notes it too.
 *
 * Reads run in one REPEATABLE READ READ ONLY transaction (one snapshot for the
 * stream row, its ancestors and their messages), fetch messages in pages, and
 * never wait inside it. Inside a group they see the group's own writes. */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../timefmt.h"

#define INFO_COLS "id, content_type, json, created_ms, access_ms, ttl_s, expires_ms, closed, " \
                  "tail_seq, tail_pos, stream_seq, parent, fork_seq, fork_pos, forks, deleted, fork_sub"

#define READ_PAGE 64            /* messages fetched per statement by a read (its LIMIT) */

/* ---- rows ------------------------------------------------------------------------- */

static int64_t col_opt(const PGresult *r, int row, int col)
{
    return pg_null_at(r, row, col) ? -1 : pg_int_of(r, row, col);
}

static void copy_text(char *dst, size_t cap, const PGresult *r, int row, int col)
{
    const char *t = pg_text_of(r, row, col);
    snprintf(dst, cap, "%s", t ? t : "");
}

/* Fill info from a row of INFO_COLS starting at column k; *deleted gets the flag. */
static void row_info(const PGresult *r, int row, int k, log_info *info, int *deleted)
{
    memset(info, 0, sizeof *info);
    info->id = pg_int_of(r, row, k + 0);
    copy_text(info->content_type, sizeof info->content_type, r, row, k + 1);
    info->json = (int)pg_int_of(r, row, k + 2);
    info->created_ms = pg_int_of(r, row, k + 3);
    info->access_ms = pg_int_of(r, row, k + 4);
    info->ttl_s = col_opt(r, row, k + 5);
    info->expires_ms = col_opt(r, row, k + 6);
    info->closed = (int)pg_int_of(r, row, k + 7);
    info->tail.seq = (uint64_t)pg_int_of(r, row, k + 8);
    info->tail.pos = (uint64_t)pg_int_of(r, row, k + 9);
    copy_text(info->stream_seq, sizeof info->stream_seq, r, row, k + 10);
    info->parent = col_opt(r, row, k + 11);
    if (info->parent < 0) info->parent = 0;
    info->fork.seq = (uint64_t)pg_int_of(r, row, k + 12);
    info->fork.pos = (uint64_t)pg_int_of(r, row, k + 13);
    info->forks = pg_int_of(r, row, k + 14);
    if (deleted) *deleted = (int)pg_int_of(r, row, k + 15);
    info->fork_sub = pg_int_of(r, row, k + 16);
}

/* One stream row by sql (one parameter, text): 1 found, 0 not, or LOG_E*. */
static int get_row(log_conn_t *c, const char *sql, pg_params *p, log_info *info, int *deleted)
{
    int rc;
    PGresult *r = pg_run(c, sql, p, 0, &rc);
    if (!r) return rc;
    int found = PQntuples(r) > 0;
    if (found) row_info(r, 0, 0, info, deleted);
    PQclear(r);
    return found;
}

enum { FOUND_NONE, FOUND_LIVE, FOUND_EXPIRED, FOUND_GONE };

/* Look up a stream by path (lock: FOR UPDATE, for a writer that changes it or
 * relies on its tail). One of FOUND_*, or <0; info filled but for FOUND_NONE. */
static int lookup_lock(log_conn_t *c, const char *path, log_info *info, int lock)
{
    pg_params p;
    int deleted = 0;
    pg_params_init(&p);
    pg_text(&p, path);
    int rc = get_row(c, lock ? "SELECT " INFO_COLS " FROM streams WHERE path = $1 FOR UPDATE"
                             : "SELECT " INFO_COLS " FROM streams WHERE path = $1",
                     &p, info, &deleted);
    if (rc <= 0) return rc < 0 ? rc : FOUND_NONE;
    if (deleted) return FOUND_GONE;
    return log_expired(info, timefmt_now_ms()) ? FOUND_EXPIRED : FOUND_LIVE;
}

static int lookup(log_conn_t *c, const char *path, log_info *info)
{
    return lookup_lock(c, path, info, 0);
}

static int state_error(int found)
{
    return found == FOUND_GONE ? LOG_EGONE : found < 0 ? found : LOG_ENOTFOUND;
}

static int get_by_id(log_conn_t *c, int64_t id, log_info *info, int *deleted)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, id);
    return get_row(c, "SELECT " INFO_COLS " FROM streams WHERE id = $1", &p, info, deleted);
}

/* Run sql with one id parameter (and an optional second number). */
static int exec_id(log_conn_t *c, const char *sql, int64_t id)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, id);
    return pg_exec(c, sql, &p);
}

/* ---- helpers used inside write transactions -------------------------------- */

static int delete_rows(log_conn_t *c, int64_t id)
{
    static const char *const sql[] = {
        "DELETE FROM messages WHERE stream = $1",
        "DELETE FROM producers WHERE stream = $1",
        "DELETE FROM streams WHERE id = $1",
    };
    for (size_t i = 0; i < sizeof sql / sizeof sql[0]; i++) {
        int rc = exec_id(c, sql[i], id);
        if (rc) return rc;
    }
    pg_changed(c, id);
    return 0;
}

static int forks_add(log_conn_t *c, int64_t id, int delta)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, delta);
    pg_int(&p, id);
    return pg_exec(c, "UPDATE streams SET forks = forks + $1 WHERE id = $2", &p);
}

/* Remove stream id for good, then any soft-deleted ancestors it was the last
 * reader of. */
static int purge(log_conn_t *c, int64_t id)
{
    for (;;) {
        log_info info, p;
        int deleted = 0;
        int rc = get_by_id(c, id, &info, &deleted);
        if (rc <= 0) return rc;
        if ((rc = delete_rows(c, id))) return rc;
        if (!info.parent) return 0;
        if ((rc = forks_add(c, info.parent, -1))) return rc;
        if ((rc = get_by_id(c, info.parent, &p, &deleted)) < 0) return rc;
        if (rc == 0 || !deleted || p.forks > 0) return 0;
        id = info.parent;
    }
}

static int remove_stream(log_conn_t *c, const log_info *info);

/* Remove the expired forks of a stream, so that they no longer hold it. */
static int reap_expired_children(log_conn_t *c, int64_t id)
{
    int64_t kids[64];
    int n = 0, rc;
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, id);
    PGresult *r = pg_run(c, "SELECT id FROM streams WHERE parent = $1 AND deleted = 0 LIMIT 64", &p, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r) && n < 64; i++) kids[n++] = pg_int_of(r, i, 0);
    PQclear(r);
    int64_t now = timefmt_now_ms();
    for (int i = 0; i < n; i++) {
        log_info k;
        int deleted;
        if ((rc = get_by_id(c, kids[i], &k, &deleted)) < 0) return rc;
        if (rc == 1 && !deleted && log_expired(&k, now) && (rc = remove_stream(c, &k))) return rc;
    }
    return 0;
}

/* Delete a stream: only marked deleted while live forks still read it. */
static int remove_stream(log_conn_t *c, const log_info *info)
{
    int rc;
    if (info->forks > 0) {
        log_info now;
        int deleted;
        if ((rc = reap_expired_children(c, info->id))) return rc;
        if ((rc = get_by_id(c, info->id, &now, &deleted)) <= 0) return rc;
        if (now.forks > 0) {
            rc = exec_id(c, "UPDATE streams SET deleted = 1, xid = pg_current_xact_id() WHERE id = $1", info->id);
            if (!rc) pg_changed(c, info->id);
            return rc;
        }
    }
    return purge(c, info->id);
}

/* Append msgs as one record (one request body) at the tail of info. */
static int insert_msgs(log_conn_t *c, log_info *info, const log_msg *msgs, size_t n)
{
    uint64_t rec = info->tail.seq;
    for (size_t i = 0; i < n; i++) {
        pg_params p;
        pg_params_init(&p);
        pg_int(&p, info->id);
        pg_int(&p, (int64_t)info->tail.seq);
        pg_int(&p, (int64_t)info->tail.pos);
        pg_int(&p, (int64_t)rec);
        pg_bytes(&p, msgs[i].data, msgs[i].len);
        int rc = pg_exec(c, "INSERT INTO messages (stream, seq, pos, rec, data) VALUES ($1, $2, $3, $4, $5)", &p);
        if (rc) return rc;
        info->tail.seq++;
        info->tail.pos += msgs[i].len;
    }
    return 0;
}

static int update_tail(log_conn_t *c, const log_info *info, int64_t now)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, (int64_t)info->tail.seq);
    pg_int(&p, (int64_t)info->tail.pos);
    pg_int(&p, info->closed);
    if (info->stream_seq[0]) pg_text(&p, info->stream_seq);
    else pg_null(&p);
    pg_int(&p, now);
    pg_int(&p, info->id);
    int rc = pg_exec(c, "UPDATE streams SET tail_seq = $1, tail_pos = $2, closed = $3, stream_seq = $4,"
                        " access_ms = $5, xid = pg_current_xact_id() WHERE id = $6",
                     &p);
    if (!rc) pg_changed(c, info->id);
    return rc;
}

/* ---- forks: the chain of streams a read walks ---------------------------------- */

#define CHAIN_MAX 64

static int load_chain(log_conn_t *c, log_info *chain, int n)
{
    while (chain[n - 1].parent && n < CHAIN_MAX) {
        int deleted, rc;
        if ((rc = get_by_id(c, chain[n - 1].parent, &chain[n], &deleted)) < 0) return rc;
        if (rc == 0) break;
        n++;
    }
    return n;
}

static const log_info *owner(const log_info *chain, int n, uint64_t seq)
{
    for (int k = 0; k < n; k++)
        if (seq >= chain[k].fork.seq || k == n - 1) return &chain[k];
    return &chain[n - 1];
}

static void *dup_bytes(const void *p, size_t n)
{
    void *copy = malloc(n ? n : 1);
    if (!copy) abort();
    if (n) memcpy(copy, p, n);
    return copy;
}

/* The message at seq of stream id (binary: pos, rec, data), or NULL with *rc. */
static PGresult *msg_at(log_conn_t *c, int64_t id, uint64_t seq, int *rc)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, id);
    pg_int(&p, (int64_t)seq);
    return pg_run(c, "SELECT pos, rec, data FROM messages WHERE stream = $1 AND seq = $2", &p, 1, rc);
}

/* The messages a fork at anchor with sub-offset sub copies into itself (as SQLite's). */
static int fork_prefix(log_conn_t *c, const log_info *chain, int n, offset_t anchor,
                       int64_t sub, int json, log_msg **out, size_t *nout)
{
    int rc;
    *out = NULL;
    *nout = 0;
    if (sub == 0) return 0;
    if (anchor.seq >= chain[0].tail.seq) return LOG_ERANGE;
    const log_info *o = owner(chain, n, anchor.seq);
    PGresult *r = msg_at(c, o->id, anchor.seq, &rc);
    if (!r) return rc;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return LOG_ERANGE;
    }
    int64_t rec = pg_int_at(r, 0, 1);
    size_t len = (size_t)PQgetlength(r, 0, 2);
    if ((uint64_t)rec != anchor.seq) {
        PQclear(r);
        return LOG_ERANGE;
    }
    if (!json) {
        if ((uint64_t)sub > len) {
            PQclear(r);
            return LOG_ERANGE;
        }
        log_msg *m = calloc(1, sizeof *m);
        if (!m) abort();
        m->data = dup_bytes(PQgetvalue(r, 0, 2), (size_t)sub);
        m->len = (size_t)sub;
        PQclear(r);
        *out = m;
        *nout = 1;
        return 0;
    }
    PQclear(r);
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, o->id);
    pg_int(&p, rec);
    pg_int(&p, sub);
    if (!(r = pg_run(c, "SELECT data FROM messages WHERE stream = $1 AND rec = $2 ORDER BY seq LIMIT $3::bigint + 1", &p, 1,
                     &rc)))
        return rc;
    int count = PQntuples(r);
    if (sub > count) {
        PQclear(r);
        return LOG_ERANGE;
    }
    log_msg *m = calloc((size_t)sub, sizeof *m);
    if (!m) abort();
    size_t k = 0;
    for (; k < (size_t)sub; k++) {
        m[k].len = (size_t)PQgetlength(r, (int)k, 0);
        m[k].data = dup_bytes(PQgetvalue(r, (int)k, 0), m[k].len);
    }
    PQclear(r);
    *out = m;
    *nout = k;
    return 0;
}

/* The exact position of message seq in a chain. */
static int position_of(log_conn_t *c, const log_info *chain, int n, uint64_t seq, offset_t *at)
{
    int rc;
    if (seq >= chain[0].tail.seq) {
        *at = chain[0].tail;
        return 0;
    }
    const log_info *o = owner(chain, n, seq);
    PGresult *r = msg_at(c, o->id, seq, &rc);
    if (!r) return rc;
    rc = PQntuples(r) ? 0 : LOG_ERANGE;
    if (!rc) {
        at->seq = seq;
        at->pos = (uint64_t)pg_int_at(r, 0, 0);
    }
    PQclear(r);
    return rc;
}

/* ---- create ------------------------------------------------------------------- */

static int same_config(const log_create_req *r, const log_info *info, const log_info *src)
{
    if (r->content_type && !log_ctype_equal(r->content_type, info->content_type)) return 0;
    if (!r->fork_from || r->ttl_s >= 0 || r->expires_ms >= 0) {
        if (r->ttl_s != info->ttl_s) return 0;
        if (r->expires_ms != info->expires_ms) return 0;
    }
    if (!!r->closed != !!info->closed) return 0;
    if (!r->fork_from) return info->parent == 0;
    if (!src || info->parent != src->id) return 0;
    if (r->fork_has_offset && r->fork_offset.seq != info->fork.seq) return 0;
    if (r->fork_sub != info->fork_sub) return 0;
    return 1;
}

static void free_msgs(log_msg *m, size_t n)
{
    for (size_t i = 0; i < n; i++) free((void *)m[i].data);
    free(m);
}

/* Insert the stream row; 1 inserted, 0 when another transaction made the path
 * meanwhile (committed: look again), or LOG_E*. */
static int insert_stream(log_conn_t *c, const log_create_req *r, const char *ct, int64_t ttl, int64_t expires,
                         offset_t fork, int64_t parent, int64_t now)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, r->path);
    pg_text(&p, ct);
    pg_int(&p, log_ctype_json(ct));
    pg_int(&p, now);
    pg_int(&p, now);
    if (ttl >= 0) pg_int(&p, ttl);
    else pg_null(&p);
    if (expires >= 0) pg_int(&p, expires);
    else pg_null(&p);
    pg_int(&p, (int64_t)fork.seq);
    pg_int(&p, (int64_t)fork.pos);
    if (parent) pg_int(&p, parent);
    else pg_null(&p);
    pg_int(&p, r->fork_sub);
    int rc;
    PGresult *res = pg_run(c,
                           "INSERT INTO streams (path, content_type, json, created_ms, access_ms, ttl_s,"
                           " expires_ms, closed, tail_seq, tail_pos, parent, fork_seq, fork_pos, fork_sub)"
                           " VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $10, $8, $9, $11)"
                           " ON CONFLICT (path) DO NOTHING RETURNING id",
                           &p, 0, &rc);
    if (!res) return rc;
    rc = PQntuples(res) > 0;
    PQclear(res);
    return rc;
}

static int op_create(log_conn_t *c, log_create_req *r)
{
    log_info cur, chain[CHAIN_MAX];
    int found, rc, n = 0, tries = 0;
    int64_t now = timefmt_now_ms();
    log_msg *prefix = NULL;
    size_t nprefix = 0;
    const char *ct;
    int64_t ttl, expires;
    offset_t fork;

    if (r->content_type && !log_ctype_valid(r->content_type)) return LOG_EINVAL;
again:
    ct = r->content_type;
    ttl = r->ttl_s;
    expires = r->expires_ms;
    fork = (offset_t){0, 0};
    n = 0;
    if (r->fork_from) {
        /* The source is locked: its tail and forks count hold until commit. */
        if ((found = lookup_lock(c, r->fork_from, &chain[0], 1)) < 0) return found;
        if (found == FOUND_GONE) return LOG_ESRCGONE;
        n = found == FOUND_LIVE;
    }
    if ((found = lookup(c, r->path, &cur)) < 0) return found;
    if (found == FOUND_LIVE) {
        if (!same_config(r, &cur, n ? &chain[0] : NULL)) return LOG_ECONFLICT;
        r->created = 0;
        r->info = cur;
        return 0;
    }
    if (found == FOUND_GONE) return LOG_ECONFLICT;
    if (found == FOUND_EXPIRED) {
        if ((found = lookup_lock(c, r->path, &cur, 1)) < 0) return found;
        if (found == FOUND_EXPIRED && (rc = remove_stream(c, &cur))) return rc;
        if ((found = lookup(c, r->path, &cur)) < 0) return found;
        if (found != FOUND_NONE) return LOG_ECONFLICT;
    }

    if (r->fork_from) {
        if (!n) return LOG_ENOTFOUND;
        if (ct && !log_ctype_equal(ct, chain[0].content_type)) return LOG_ECTYPE;
        ct = chain[0].content_type;
        if (ttl < 0 && expires < 0) {
            ttl = chain[0].ttl_s;
            expires = chain[0].expires_ms;
        }
        if ((n = load_chain(c, chain, 1)) < 0) return n;
        if (r->fork_has_offset) {
            if (r->fork_offset.seq > chain[0].tail.seq) return LOG_ERANGE;
            if ((rc = position_of(c, chain, n, r->fork_offset.seq, &fork))) return rc;
            if (fork.pos != r->fork_offset.pos) return LOG_EOFFSET;
        } else {
            fork = chain[0].tail;
        }
        if ((rc = fork_prefix(c, chain, n, fork, r->fork_sub, chain[0].json, &prefix, &nprefix))) return rc;
    }
    if (!ct) ct = "application/octet-stream";

    rc = insert_stream(c, r, ct, ttl, expires, fork, r->fork_from ? chain[0].id : 0, now);
    if (rc == 0) {
        /* Made by another transaction meanwhile: answer as if it had come first. */
        free_msgs(prefix, nprefix);
        prefix = NULL;
        nprefix = 0;
        if (++tries < 3) goto again;
        return LOG_EBUSY;
    }
    if (rc < 0) goto out;
    if (r->fork_from && (rc = forks_add(c, chain[0].id, 1))) goto out;
    if ((found = lookup(c, r->path, &r->info)) < 0) {
        rc = found;
        goto out;
    }
    if (found != FOUND_LIVE && found != FOUND_EXPIRED) {
        rc = LOG_EIO;
        goto out;
    }
    if ((rc = insert_msgs(c, &r->info, prefix, nprefix))) goto out;
    if ((rc = insert_msgs(c, &r->info, r->msgs, r->nmsgs))) goto out;
    r->info.closed = r->closed;
    if ((rc = update_tail(c, &r->info, now))) goto out;
    r->created = 1;
out:
    free_msgs(prefix, nprefix);
    return rc;
}

/* ---- append ------------------------------------------------------------------- */

static int op_append(log_conn_t *c, log_append_req *r)
{
    log_info *info = &r->info;
    int rc, found;
    int64_t now = timefmt_now_ms();
    int64_t pepoch = -1, pseq = -1;

    if (r->content_type && *r->content_type && !log_ctype_valid(r->content_type)) return LOG_EINVAL;

    r->duplicate = 0;
    /* The tail row, locked until commit: the offsets below are ours alone. */
    if ((found = lookup_lock(c, r->path, info, 1)) != FOUND_LIVE) return state_error(found);
    r->appended = info->tail;

    if (r->producer) {
        pg_params p;
        pg_params_init(&p);
        pg_int(&p, info->id);
        pg_text(&p, r->producer);
        PGresult *res = pg_run(c, "SELECT epoch, seq FROM producers WHERE stream = $1 AND producer = $2", &p, 0, &rc);
        if (!res) return rc;
        if (PQntuples(res) > 0) {
            pepoch = pg_int_of(res, 0, 0);
            pseq = pg_int_of(res, 0, 1);
        }
        PQclear(res);
        r->producer_epoch = pepoch;
        r->last_seq = pseq;
        if (pepoch >= 0 && r->epoch < pepoch) return LOG_EFENCED;
        if (pepoch >= 0 && r->epoch == pepoch) {
            if (r->seq <= pseq) {
                r->duplicate = 1;
                return 0;
            }
            if (r->seq != pseq + 1) {
                r->expected_seq = pseq + 1;
                return LOG_EGAP;
            }
        } else if (r->seq != 0) {
            if (pepoch < 0) {
                r->expected_seq = 0;
                return LOG_EGAP;
            }
            return LOG_EBADSEQ;
        }
    }

    if (info->closed) {
        if (r->close && r->nmsgs == 0 && !r->producer) return 0;
        return LOG_ECLOSED;
    }
    if (r->nmsgs && r->content_type && !log_ctype_equal(r->content_type, info->content_type)) return LOG_ECTYPE;
    if (r->stream_seq) {
        if (info->stream_seq[0] && strcmp(r->stream_seq, info->stream_seq) <= 0) return LOG_ESEQ;
        snprintf(info->stream_seq, sizeof info->stream_seq, "%s", r->stream_seq);
    }
    if ((rc = insert_msgs(c, info, r->msgs, r->nmsgs))) return rc;
    if (r->close) info->closed = 1;
    if ((rc = update_tail(c, info, now))) return rc;
    info->access_ms = now;

    if (r->producer) {
        pg_params p;
        pg_params_init(&p);
        pg_int(&p, info->id);
        pg_text(&p, r->producer);
        pg_int(&p, r->epoch);
        pg_int(&p, r->seq);
        if ((rc = pg_exec(c, "INSERT INTO producers (stream, producer, epoch, seq) VALUES ($1, $2, $3, $4)"
                             " ON CONFLICT (stream, producer) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq",
                          &p)))
            return rc;
        r->producer_epoch = r->epoch;
        r->last_seq = r->seq;
    }
    return 0;
}

/* ---- delete, touch, sweep ------------------------------------------------------ */

static int op_delete(log_conn_t *c, const char *path, int *answer)
{
    log_info info;
    int found = lookup_lock(c, path, &info, 1);
    if (found < 0) return found;
    *answer = found == FOUND_LIVE ? 0 : state_error(found);
    if (found == FOUND_LIVE || found == FOUND_EXPIRED) return remove_stream(c, &info);
    return 0;
}

static int op_touch(log_conn_t *c, int64_t id)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, timefmt_now_ms());
    pg_int(&p, id);
    return pg_exec(c, "UPDATE streams SET access_ms = $1 WHERE id = $2", &p);
}

/* One batch of the sweep, as SQLite's (sq_streams.c): the expired streams newest
 * first, at most b->streams_max; messages b->messages_max a batch at most. */
static int op_sweep(log_conn_t *c, log_sweep_batch *b)
{
    int64_t ids[LOG_SWEEP_STREAMS];
    int max = b->streams_max > 0 && b->streams_max < LOG_SWEEP_STREAMS ? b->streams_max : LOG_SWEEP_STREAMS;
    int n = 0, rc;
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, timefmt_now_ms());
    pg_int(&p, max);
    /* Rows another host is sweeping (or writing) now are left to it. */
    PGresult *r = pg_run(c,
                         "SELECT id FROM streams WHERE deleted = 0 AND"
                         " ((ttl_s IS NOT NULL AND access_ms + ttl_s * 1000 <= $1) OR"
                         "  (expires_ms IS NOT NULL AND expires_ms <= $1))"
                         " ORDER BY id DESC LIMIT $2 FOR UPDATE SKIP LOCKED",
                         &p, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r) && n < max; i++) ids[n++] = pg_int_of(r, i, 0);
    PQclear(r);
    b->streams = 0;
    b->messages = 0;
    b->more = n == max;
    for (int i = 0; i < n; i++) {
        log_info info;
        int deleted;
        if ((rc = get_by_id(c, ids[i], &info, &deleted)) < 0) return rc;
        if (rc == 0 || deleted) continue;
        if (info.forks == 0) {
            int64_t left = b->messages_max - b->messages;
            if (left <= 0) {
                b->more = 1;
                break;
            }
            pg_params_init(&p);
            pg_int(&p, info.id);
            pg_int(&p, left);
            r = pg_run(c,
                       "DELETE FROM messages WHERE stream = $1 AND"
                       " seq < (SELECT min(seq) FROM messages WHERE stream = $1) + $2",
                       &p, 0, &rc);
            if (!r) return rc;
            int64_t gone = pg_affected(r);
            PQclear(r);
            b->messages += gone;
            if (gone == left) {         /* perhaps more of them: the next batch */
                b->more = 1;
                break;
            }
        }
        if ((rc = remove_stream(c, &info))) return rc;
        b->streams++;
    }
    return 0;
}

/* ---- reads ---------------------------------------------------------------------- */

static int op_head(log_conn_t *c, const char *path, log_info *info)
{
    int found = lookup(c, path, info);
    return found == FOUND_LIVE ? 0 : state_error(found);
}

/* Deliver messages [from, to) of the chain, a page of rows at a time. */
static int read_chain(log_conn_t *c, log_info *chain, int n, uint64_t from, uint64_t to,
                      log_read_req *r, log_msg_fn fn, void *ud)
{
    for (int k = n - 1; k >= 0; k--) {
        uint64_t lo = k == n - 1 ? 0 : chain[k].fork.seq;
        uint64_t hi = k > 0 ? chain[k - 1].fork.seq : to;
        if (lo < from) lo = from;
        if (hi > to) hi = to;
        while (lo < hi) {
            pg_params p;
            int rc;
            pg_params_init(&p);
            pg_int(&p, chain[k].id);
            pg_int(&p, (int64_t)lo);
            pg_int(&p, (int64_t)hi);
            PGresult *res = pg_run(c,
                                   "SELECT seq, pos, data FROM messages WHERE stream = $1 AND seq >= $2 AND seq < $3"
                                   " ORDER BY seq LIMIT 64",
                                   &p, 1, &rc);
            if (!res) return rc;
            int rows = PQntuples(res);
            for (int i = 0; i < rows; i++) {
                offset_t at = {(uint64_t)pg_int_at(res, i, 0), (uint64_t)pg_int_at(res, i, 1)};
                const void *data = PQgetvalue(res, i, 2);
                size_t len = (size_t)PQgetlength(res, i, 2);
                if (r->count == 0 && r->kind == OFFSET_AT && at.pos != r->from.pos) {
                    PQclear(res);
                    return LOG_EOFFSET;
                }
                int stop = fn(ud, data ? data : "", len, at);
                if (stop) {
                    PQclear(res);
                    return stop;
                }
                r->count++;
                r->bytes += len;
                r->next.seq = at.seq + 1;
                r->next.pos = at.pos + len;
                lo = at.seq + 1;
                if (r->bytes >= r->max_bytes) {
                    PQclear(res);
                    return 1;
                }
            }
            PQclear(res);
            if (rows < READ_PAGE) break;
        }
    }
    return 0;
}

static int op_read(log_conn_t *c, log_read_req *r, log_msg_fn fn, void *ud)
{
    log_info chain[CHAIN_MAX];
    int n, rc, found;

    r->count = r->bytes = 0;
    r->up_to_date = 0;
    int own_tx = !pgc(c)->in_tx;
    if (own_tx && (rc = pg_simple(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"))) return rc;
    if ((found = lookup(c, r->path, &chain[0])) != FOUND_LIVE) {
        rc = state_error(found);
        goto out;
    }
    r->info = chain[0];
    offset_t from = r->kind == OFFSET_AT ? r->from : (offset_t){0, 0};
    if (r->kind == OFFSET_NOW) from = r->info.tail;
    if (from.seq > r->info.tail.seq) {
        rc = LOG_ERANGE;
        goto out;
    }
    if ((n = load_chain(c, chain, 1)) < 0) {
        rc = n;
        goto out;
    }
    r->next = from;
    rc = read_chain(c, chain, n, from.seq, r->info.tail.seq, r, fn, ud);
    if (rc == 1) rc = 0;
    if (rc == 0 && r->count == 0) rc = position_of(c, chain, n, from.seq, &r->next);
    if (rc == 0 && r->count == 0 && r->kind == OFFSET_AT && r->next.pos != from.pos) rc = LOG_EOFFSET;
    r->up_to_date = r->next.seq == r->info.tail.seq;
out:
    if (own_tx) pg_simple(c, "COMMIT");
    return rc;
}

static int op_list(log_conn_t *c, const char *prefix,
                   void (*fn)(void *ud, const char *path, const log_info *info), void *ud)
{
    pg_params p;
    int rc;
    pg_params_init(&p);
    pg_text(&p, prefix);
    /* Byte order (COLLATE "C"), as SQLite's BINARY. */
    PGresult *r = pg_run(c, "SELECT path, " INFO_COLS " FROM streams WHERE starts_with(path, $1)"
                            " ORDER BY path COLLATE \"C\"",
                         &p, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        log_info info;
        row_info(r, i, 1, &info, NULL);
        /* As SQLite's: what a listing shows of a row (no Stream-Seq, fork or forks). */
        info.stream_seq[0] = 0;
        info.parent = 0;
        info.fork = (offset_t){0, 0};
        info.fork_sub = info.forks = 0;
        const char *path = pg_text_of(r, i, 0);
        fn(ud, path ? path : "", &info);
    }
    PQclear(r);
    return 0;
}

const store_streams_ops pg_streams_ops = {
    .create = op_create,
    .append = op_append,
    .remove = op_delete,
    .touch = op_touch,
    .sweep = op_sweep,
    .read = op_read,
    .head = op_head,
    .list = op_list,
};

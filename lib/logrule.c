#include "logrule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timefmt.h"

/* ---- look-ups ------------------------------------------------------------------ */

int logrule_found(int rc, const log_info *info, int deleted)
{
    if (rc <= 0) return rc < 0 ? rc : LOGRULE_NONE;
    if (deleted) return LOGRULE_GONE;
    return log_expired(info, timefmt_now_ms()) ? LOGRULE_EXPIRED : LOGRULE_LIVE;
}

int logrule_lookup(log_conn_t *c, const logrule_rows *rows, const char *path, log_info *info)
{
    int deleted = 0;
    int rc = rows->by_path(c, path, info, &deleted);
    return logrule_found(rc, info, deleted);
}

int logrule_lookup_lock(log_conn_t *c, const logrule_rows *rows, const char *path, log_info *info)
{
    int deleted = 0;
    int rc = (rows->lock_path ? rows->lock_path : rows->by_path)(c, path, info, &deleted);
    return logrule_found(rc, info, deleted);
}

int logrule_state_error(int found)
{
    return found == LOGRULE_GONE ? LOG_EGONE : found < 0 ? found : LOG_ENOTFOUND;
}

int logrule_head(log_conn_t *c, const logrule_rows *rows, const char *path, log_info *info)
{
    int found = logrule_lookup(c, rows, path, info);
    return found == LOGRULE_LIVE ? 0 : logrule_state_error(found);
}

/* ---- forks: the chain of streams a read walks ------------------------------------ */

int logrule_chain(log_conn_t *c, const logrule_rows *rows, log_info *chain, int n)
{
    while (chain[n - 1].parent && n < LOGRULE_CHAIN_MAX) {
        int deleted, rc;
        if ((rc = rows->by_id(c, chain[n - 1].parent, &chain[n], &deleted)) < 0) return rc;
        if (rc == 0) break;
        n++;
    }
    return n;
}

const log_info *logrule_owner(const log_info *chain, int n, uint64_t seq)
{
    for (int k = 0; k < n; k++)
        if (seq >= chain[k].fork.seq || k == n - 1) return &chain[k];
    return &chain[n - 1];
}

int logrule_position(log_conn_t *c, const logrule_rows *rows, const log_info *chain, int n, uint64_t seq,
                     offset_t *at)
{
    if (seq >= chain[0].tail.seq) {
        *at = chain[0].tail;
        return 0;
    }
    uint64_t pos;
    int rc = rows->pos_at(c, logrule_owner(chain, n, seq)->id, seq, &pos);
    if (rc <= 0) return rc < 0 ? rc : LOG_ERANGE;
    at->seq = seq;
    at->pos = pos;
    return 0;
}

int logrule_digest_at(log_conn_t *c, const logrule_rows *rows, const log_info *chain, int n, uint64_t seq,
                      uint8_t out[CHAIN_LEN])
{
    if (seq > chain[0].tail.seq) return LOG_ERANGE;
    if (seq == chain[0].tail.seq) {
        memcpy(out, chain[0].digest, CHAIN_LEN);
        return 0;
    }
    if (seq == 0) {
        memset(out, 0, CHAIN_LEN);
        return 0;
    }
    int rc = rows->digest_at(c, logrule_owner(chain, n, seq - 1)->id, seq - 1, out);
    return rc < 0 ? rc : rc == 0 ? LOG_ERANGE : 0;
}

int logrule_digest(log_conn_t *c, const logrule_rows *rows, const char *path, uint64_t seq, uint8_t out[CHAIN_LEN])
{
    log_info chain[LOGRULE_CHAIN_MAX];
    int n, found = logrule_lookup(c, rows, path, &chain[0]);
    if (found != LOGRULE_LIVE) return logrule_state_error(found);
    if ((n = logrule_chain(c, rows, chain, 1)) < 0) return n;
    return logrule_digest_at(c, rows, chain, n, seq, out);
}

/* ---- create ----------------------------------------------------------------------- */

int logrule_same_config(const log_create_req *r, const log_info *info, const log_info *src)
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

int logrule_create_begin(log_conn_t *c, const logrule_rows *rows, log_create_req *r, log_info *chain)
{
    log_info cur;
    int found, rc, live_src = 0;
    if (r->fork_from) {
        /* The source is locked: its tail and forks count hold until commit. */
        if ((found = logrule_lookup_lock(c, rows, r->fork_from, &chain[0])) < 0) return found;
        if (found == LOGRULE_GONE) return LOG_ESRCGONE;
        live_src = found == LOGRULE_LIVE;
    }
    if ((found = logrule_lookup(c, rows, r->path, &cur)) < 0) return found;
    if (found == LOGRULE_LIVE) {
        if (!logrule_same_config(r, &cur, live_src ? &chain[0] : NULL)) return LOG_ECONFLICT;
        r->created = 0;
        r->info = cur;
        return 1;
    }
    if (found == LOGRULE_GONE) return LOG_ECONFLICT;
    if (found == LOGRULE_EXPIRED) {
        /* Locked, and looked at again: another writer may have removed it. */
        if (rows->lock_path && (found = logrule_lookup_lock(c, rows, r->path, &cur)) < 0) return found;
        if (found == LOGRULE_EXPIRED && (rc = logrule_remove(c, rows, &cur))) return rc;
        if ((found = logrule_lookup(c, rows, r->path, &cur)) < 0) return found;
        if (found != LOGRULE_NONE) return LOG_ECONFLICT;   /* soft-deleted: forks hold it */
    }
    return r->fork_from && !live_src ? LOG_ENOTFOUND : 0;
}

int logrule_fork(log_conn_t *c, const logrule_rows *rows, const log_create_req *r, log_info *chain, int *n,
                 const char **ct, int64_t *ttl, int64_t *expires, offset_t *fork)
{
    if (*ct && !log_ctype_equal(*ct, chain[0].content_type)) return LOG_ECTYPE;
    *ct = chain[0].content_type;
    if (*ttl < 0 && *expires < 0) {
        *ttl = chain[0].ttl_s;
        *expires = chain[0].expires_ms;
    }
    if ((*n = logrule_chain(c, rows, chain, 1)) < 0) return *n;
    if (!r->fork_has_offset) {
        *fork = chain[0].tail;
        return 0;
    }
    if (r->fork_offset.seq > chain[0].tail.seq) return LOG_ERANGE;
    int rc = logrule_position(c, rows, chain, *n, r->fork_offset.seq, fork);
    if (rc) return rc;
    /* As for reads: the offset must be the source's own position. */
    return fork->pos != r->fork_offset.pos ? LOG_EOFFSET : 0;
}

int logrule_create_fill(log_conn_t *c, const logrule_rows *rows, log_create_req *r, const log_msg *prefix,
                        size_t nprefix, int64_t now_ms)
{
    int rc, found = logrule_lookup(c, rows, r->path, &r->info);
    if (found < 0) return found;
    /* An Expires-At already past creates a stream that is expired at once. */
    if (found != LOGRULE_LIVE && found != LOGRULE_EXPIRED) return LOG_EIO;
    logrule_rec recs[2] = {{prefix, nprefix}, {r->msgs, r->nmsgs}};
    r->info.closed = r->closed;
    if ((rc = rows->write(c, &r->info, recs, 2, now_ms))) return rc;
    r->created = 1;
    return 0;
}

void logrule_free_msgs(log_msg *m, size_t n)
{
    for (size_t i = 0; i < n; i++) free((void *)m[i].data);
    free(m);
}

/* ---- append ------------------------------------------------------------------------ */

/* The producer's rules: 0 to go on, 1 for a retry of what was accepted (a
 * duplicate), or LOG_E*. They come first: a retry is answered as a duplicate
 * whatever happened since (a close, a Stream-Seq). */
static int producer_check(log_append_req *r, int64_t pepoch, int64_t pseq)
{
    r->producer_epoch = pepoch;
    r->last_seq = pseq;
    if (pepoch >= 0 && r->epoch < pepoch) return LOG_EFENCED;
    if (pepoch >= 0 && r->epoch == pepoch) {
        if (r->seq <= pseq) return 1;
        if (r->seq != pseq + 1) {
            r->expected_seq = pseq + 1;
            return LOG_EGAP;
        }
        return 0;
    }
    if (r->seq == 0) return 0;
    if (pepoch < 0) {           /* a new producer starts at 0 */
        r->expected_seq = 0;
        return LOG_EGAP;
    }
    return LOG_EBADSEQ;         /* a new epoch starts at 0 */
}

int logrule_append(log_conn_t *c, const logrule_rows *rows, log_append_req *r)
{
    log_info *info = &r->info;
    int64_t now = timefmt_now_ms();
    int rc;

    r->duplicate = 0;
    /* The tail row, locked until commit: the offsets written are ours alone. */
    int found = logrule_lookup_lock(c, rows, r->path, info);
    if (found != LOGRULE_LIVE) return logrule_state_error(found);
    r->appended = info->tail;
    if (r->producer) {
        int64_t pepoch = -1, pseq = -1;
        if ((rc = rows->producer_get(c, info->id, r->producer, &pepoch, &pseq)) < 0) return rc;
        if ((rc = producer_check(r, pepoch, pseq)) < 0) return rc;
        if (rc == 1) {
            r->duplicate = 1;
            return 0;
        }
    }
    if (info->closed) {
        /* Closing again is harmless; anything else is refused. */
        if (r->close && r->nmsgs == 0 && !r->producer) return 0;
        return LOG_ECLOSED;
    }
    if (r->nmsgs && r->content_type && !log_ctype_equal(r->content_type, info->content_type)) return LOG_ECTYPE;
    if (r->stream_seq) {
        if (info->stream_seq[0] && strcmp(r->stream_seq, info->stream_seq) <= 0) return LOG_ESEQ;
        snprintf(info->stream_seq, sizeof info->stream_seq, "%s", r->stream_seq);
    }
    logrule_rec rec = {r->msgs, r->nmsgs};
    if (r->close) info->closed = 1;
    if ((rc = rows->write(c, info, &rec, 1, now))) return rc;
    info->access_ms = now;
    if (r->producer) {
        if ((rc = rows->producer_put(c, info->id, r->producer, r->epoch, r->seq))) return rc;
        r->producer_epoch = r->epoch;
        r->last_seq = r->seq;
    }
    return 0;
}

/* ---- delete, sweep --------------------------------------------------------------------- */

/* Remove stream id for good, then any deleted ancestors it was the last reader of. */
static int purge(log_conn_t *c, const logrule_rows *rows, int64_t id)
{
    for (;;) {
        log_info info, p;
        int deleted = 0;
        int rc = rows->by_id(c, id, &info, &deleted);
        if (rc <= 0) return rc;
        if ((rc = rows->drop(c, id))) return rc;
        if (!info.parent) return 0;
        if ((rc = rows->forks_add(c, info.parent, -1))) return rc;
        if ((rc = rows->by_id(c, info.parent, &p, &deleted)) < 0) return rc;
        if (rc == 0 || !deleted || p.forks > 0) return 0;
        id = info.parent;
    }
}

/* Remove the expired forks of a stream, so that they no longer hold it. */
static int reap_expired_children(log_conn_t *c, const logrule_rows *rows, int64_t id)
{
    int64_t kids[64];
    int n = rows->children(c, id, kids, 64), rc;
    if (n < 0) return n;
    int64_t now = timefmt_now_ms();
    for (int i = 0; i < n; i++) {
        log_info k;
        int deleted;
        if ((rc = rows->by_id(c, kids[i], &k, &deleted)) < 0) return rc;
        if (rc == 1 && !deleted && log_expired(&k, now) && (rc = logrule_remove(c, rows, &k))) return rc;
    }
    return 0;
}

int logrule_remove(log_conn_t *c, const logrule_rows *rows, const log_info *info)
{
    int rc;
    if (info->forks > 0) {
        log_info now;
        int deleted;
        if ((rc = reap_expired_children(c, rows, info->id))) return rc;
        if ((rc = rows->by_id(c, info->id, &now, &deleted)) <= 0) return rc;
        if (now.forks > 0) return rows->mark_deleted(c, info->id);
    }
    return purge(c, rows, info->id);
}

int logrule_delete(log_conn_t *c, const logrule_rows *rows, const char *path, int *answer)
{
    log_info info;
    int found = logrule_lookup_lock(c, rows, path, &info);
    if (found < 0) return found;
    /* An expired stream is removed too, but answered as missing: the removal
     * must commit, so the error is returned outside the operation. */
    *answer = found == LOGRULE_LIVE ? 0 : logrule_state_error(found);
    if (found == LOGRULE_LIVE || found == LOGRULE_EXPIRED) return logrule_remove(c, rows, &info);
    return 0;
}

int logrule_sweep(log_conn_t *c, const logrule_rows *rows, log_sweep_batch *b)
{
    int64_t ids[LOG_SWEEP_STREAMS];
    int max = b->streams_max > 0 && b->streams_max < LOG_SWEEP_STREAMS ? b->streams_max : LOG_SWEEP_STREAMS;
    int rc, n = rows->expired(c, timefmt_now_ms(), max, ids);
    if (n < 0) return n;
    b->streams = 0;
    b->messages = 0;
    b->more = n == max;
    for (int i = 0; i < n; i++) {
        log_info info;
        int deleted;
        if ((rc = rows->by_id(c, ids[i], &info, &deleted)) < 0) return rc;
        if (rc == 0 || deleted) continue;
        if (info.forks == 0) {
            int64_t left = b->messages_max - b->messages;
            if (left <= 0) {
                b->more = 1;
                break;
            }
            int64_t gone = rows->drop_messages(c, info.id, left);
            if (gone < 0) return (int)gone;
            b->messages += gone;
            if (gone == left) {         /* perhaps more of them: the next batch */
                b->more = 1;
                break;
            }
        }
        if ((rc = logrule_remove(c, rows, &info))) return rc;
        b->streams++;
    }
    return 0;
}

/* ---- reads ------------------------------------------------------------------------------- */

const uint8_t LOGRULE_DIGEST_LATER[CHAIN_LEN];

typedef struct read_ctx {
    log_read_req *r;
    log_msg_fn fn;
    void *ud;
    int later;                  /* r->digest is to be looked up (LOGRULE_DIGEST_LATER) */
} read_ctx;

/* One message of a read: the client's offset must be the first one's own
 * position; 1 once r->max_bytes is reached. */
static int read_msg(void *ud, const void *data, size_t len, offset_t at, const uint8_t *digest)
{
    read_ctx *x = ud;
    log_read_req *r = x->r;
    if (r->count == 0 && r->kind == OFFSET_AT && at.pos != r->from.pos) return LOG_EOFFSET;
    int stop = x->fn(x->ud, data ? data : "", len, at);
    if (stop) return stop;
    r->count++;
    r->bytes += len;
    r->next.seq = at.seq + 1;
    r->next.pos = at.pos + len;
    x->later = digest == LOGRULE_DIGEST_LATER;
    if (!x->later) {
        if (digest) memcpy(r->digest, digest, CHAIN_LEN);
        else memset(r->digest, 0, CHAIN_LEN);
    }
    return r->bytes >= r->max_bytes;
}

int logrule_read(log_conn_t *c, const logrule_rows *rows, log_read_req *r, log_msg_fn fn, void *ud)
{
    log_info chain[LOGRULE_CHAIN_MAX];
    int n, rc, found;

    r->count = r->bytes = 0;
    r->up_to_date = 0;
    if ((found = logrule_lookup(c, rows, r->path, &chain[0])) != LOGRULE_LIVE) return logrule_state_error(found);
    r->info = chain[0];
    offset_t from = r->kind == OFFSET_AT ? r->from : (offset_t){0, 0};
    if (r->kind == OFFSET_NOW) from = r->info.tail;
    if (from.seq > r->info.tail.seq) return LOG_ERANGE;
    if ((n = logrule_chain(c, rows, chain, 1)) < 0) return n;
    /* A client's offset names a message and its byte position, which must match:
     * checked on the first message read, or (nothing read) by a look-up. Each
     * stream of the chain, its root first, supplies the part it owns: [lo, hi). */
    r->next = from;
    read_ctx x = {r, fn, ud, 0};
    rc = 0;
    for (int k = n - 1; k >= 0 && rc == 0; k--) {
        uint64_t lo = k == n - 1 ? 0 : chain[k].fork.seq;
        /* Up to the lowest fork point below it: a fork of a fork may branch below
         * its parent's own fork point (logrule_owner's rule). */
        uint64_t hi = r->info.tail.seq;
        for (int j = 0; j < k; j++)
            if (chain[j].fork.seq < hi) hi = chain[j].fork.seq;
        if (lo < from.seq) lo = from.seq;
        if (hi > r->info.tail.seq) hi = r->info.tail.seq;
        if (lo < hi) rc = rows->scan(c, chain[k].id, lo, hi, r->max_bytes - r->bytes, read_msg, &x);
    }
    if (rc == 1) rc = 0;
    if (rc == 0 && r->count == 0) rc = logrule_position(c, rows, chain, n, from.seq, &r->next);
    if (rc == 0 && r->count == 0 && r->kind == OFFSET_AT && r->next.pos != from.pos) rc = LOG_EOFFSET;
    /* Nothing read, or the last message's not fetched with it: the digest where
     * the read stands (the tail's, as a rule: no statement). */
    if (rc == 0 && (r->count == 0 || x.later)) rc = logrule_digest_at(c, rows, chain, n, r->next.seq, r->digest);
    r->up_to_date = r->next.seq == r->info.tail.seq;
    return rc;
}

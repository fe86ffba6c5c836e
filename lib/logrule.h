/* logrule: what the streams' operations decide, the same on every engine.
 *
 * An engine (lib/store.h) keeps the SQL of the log's operations: fetching a
 * stream's row, its messages, its producers, writing them. What each operation
 * decides from those rows is here, once: a stream's state (live, expired,
 * deleted), the chain of ancestors a fork reads and which of them stores a
 * message, the producer, close and Stream-Seq rules of an append, the offset
 * checks of a read, when a deleted stream is only marked deleted, a batch of the
 * retention sweep. The engine hands its row operations down in a logrule_rows
 * table, the way lib/backup's check hands its walk down; nothing here calls an
 * engine by name, nor anything of dstream above it (lib/log.c calls the engines,
 * the engines call this: calls point down). */
#ifndef DSTREAM_LOGRULE_H
#define DSTREAM_LOGRULE_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"

/* What a look-up of a stream by path found (info filled for all but NONE). */
enum { LOGRULE_NONE, LOGRULE_LIVE, LOGRULE_EXPIRED, LOGRULE_GONE };

/* The most streams a fork chain holds (the stream itself and its ancestors). */
#define LOGRULE_CHAIN_MAX 64

/* A record: the messages of one request body, numbered on from the first one's
 * offset (its seq is the record's). */
typedef struct logrule_rec {
    const log_msg *msgs;
    size_t n;
} logrule_rec;

/* A scan's digest for "not fetched with the row" (logrule_rows.scan). */
extern const uint8_t LOGRULE_DIGEST_LATER[CHAIN_LEN];

/* An engine's row operations. Each returns as said, or a negative LOG_E*. */
typedef struct logrule_rows {
    /* The stream at path (by_path) or id (by_id): 1 with its row and its
     * soft-delete flag, 0 if none. */
    int (*by_path)(log_conn_t *c, const char *path, log_info *info, int *deleted);
    int (*by_id)(log_conn_t *c, int64_t id, log_info *info, int *deleted);
    /* As by_path, the row locked against other writers until the group ends (FOR
     * UPDATE), for a writer that changes it or relies on its tail; NULL where
     * writers take turns (SQLite's one writer): by_path. */
    int (*lock_path)(log_conn_t *c, const char *path, log_info *info, int *deleted);
    /* The position of message seq of stream id: 1 with *pos, 0 if none. */
    int (*pos_at)(log_conn_t *c, int64_t id, uint64_t seq, uint64_t *pos);
    /* Messages [lo, hi) of stream id in order, each to fn until it returns
     * nonzero; returns that value, else 0. budget: the bytes the read still
     * takes (it stops at the message that reaches them), for an engine that
     * fetches rows in batches: messages lie end to end, so none at or past the
     * first one's position + budget is delivered. digest: the message's
     * (lib/chain.h), NULL when it has none, or LOGRULE_DIGEST_LATER for an
     * engine that does not fetch it with the rows: the read then looks up the
     * digest of the last message it delivered once, after its scans (none
     * when that one is the tail's: the stream row has it). */
    int (*scan)(log_conn_t *c, int64_t id, uint64_t lo, uint64_t hi, uint64_t budget,
                int (*fn)(void *ud, const void *data, size_t len, offset_t at, const uint8_t *digest), void *ud);
    /* The digest of message seq of stream id (lib/chain.h): 1 with out, 0 if no
     * such message (or it has none). */
    int (*digest_at)(log_conn_t *c, int64_t id, uint64_t seq, uint8_t out[CHAIN_LEN]);
    /* Inside a group: the records recs[0..nrecs) at info's tail, one after the
     * other (info->tail moved on), each message with its digest chained on from
     * info->digest (chain_link; info->digest moved on), then the stream row's
     * tail, digest, closed flag, Stream-Seq and access time from info (a change
     * the feed reports). */
    int (*write)(log_conn_t *c, log_info *info, const logrule_rec *recs, int nrecs, int64_t now_ms);
    /* A producer's state on stream id: 1 with epoch and seq, 0 if none; put:
     * inserted or replaced. */
    int (*producer_get)(log_conn_t *c, int64_t id, const char *producer, int64_t *epoch, int64_t *seq);
    int (*producer_put)(log_conn_t *c, int64_t id, const char *producer, int64_t epoch, int64_t seq);
    /* Deletion, inside a group: the live forks of id (at most max, into ids:
     * how many), the forks count moved by delta, the stream's rows gone
     * (messages, producers, row), the row marked deleted. */
    int (*children)(log_conn_t *c, int64_t id, int64_t *ids, int max);
    int (*forks_add)(log_conn_t *c, int64_t id, int delta);
    int (*drop)(log_conn_t *c, int64_t id);
    int (*mark_deleted)(log_conn_t *c, int64_t id);
    /* The sweep, inside a group: the expired streams not deleted at now, newest
     * first, at most max (into ids: how many); the oldest at most max messages
     * of stream id deleted (how many). */
    int (*expired)(log_conn_t *c, int64_t now_ms, int max, int64_t *ids);
    int64_t (*drop_messages)(log_conn_t *c, int64_t id, int64_t max);
} logrule_rows;

/* The state of a fetched row: rc of by_path (1 a row, 0 none, or LOG_E*, given
 * back), with the row and its flag. One of LOGRULE_*, or LOG_E*. */
int logrule_found(int rc, const log_info *info, int deleted);
/* Look the stream at path up (logrule_lookup_lock: with lock_path). One of
 * LOGRULE_*, or LOG_E*. */
int logrule_lookup(log_conn_t *c, const logrule_rows *rows, const char *path, log_info *info);
int logrule_lookup_lock(log_conn_t *c, const logrule_rows *rows, const char *path, log_info *info);
/* The LOG_E* a reader or writer gets for a state that is not LOGRULE_LIVE (a
 * negative state is given back). */
int logrule_state_error(int found);

/* chain[0..n) is a stream (chain[0]) and its ancestors found so far: the rest of
 * its ancestors appended, chain[k+1] the parent of chain[k]. Returns the
 * chain's length (at most LOGRULE_CHAIN_MAX), or LOG_E*. */
int logrule_chain(log_conn_t *c, const logrule_rows *rows, log_info *chain, int n);
/* The stream of the chain that stores message seq. */
const log_info *logrule_owner(const log_info *chain, int n, uint64_t seq);
/* The exact position of message seq in a chain (a client's offset carries a pos
 * that is not trusted): the tail at or past it. 0, LOG_ERANGE, or LOG_E*. */
int logrule_position(log_conn_t *c, const logrule_rows *rows, const log_info *chain, int n, uint64_t seq,
                     offset_t *at);

/* The chain's digest after the first seq messages of chain[0..n) (lib/chain.h):
 * zeros at 0, the tail's at the tail, else the digest of message seq - 1 where its
 * owner stores it. 0, LOG_ERANGE past the tail or when that message is missing, or
 * LOG_E*. */
int logrule_digest_at(log_conn_t *c, const logrule_rows *rows, const log_info *chain, int n, uint64_t seq,
                      uint8_t out[CHAIN_LEN]);
/* log_digest_at of the live stream at path. */
int logrule_digest(log_conn_t *c, const logrule_rows *rows, const char *path, uint64_t seq, uint8_t out[CHAIN_LEN]);

/* Creation. 1 if the stream info (live) is what r would create from source src
 * (the fork's source, NULL when none or not live): an identical re-create. */
int logrule_same_config(const log_create_req *r, const log_info *info, const log_info *src);
/* The start of a creation, inside a group: the fork's source (locked) into
 * chain[0], the path looked up. Returns 1 when r is answered (an identical stream
 * is there: r->info, r->created 0), 0 when the path is free (an expired stream
 * there removed) and the source, if any, live; else LOG_E*. */
int logrule_create_begin(log_conn_t *c, const logrule_rows *rows, log_create_req *r, log_info *chain);
/* A fork from chain[0] (live): its content type, TTL and expiry (each as the
 * request says, else the source's), the rest of the chain loaded (*n), and the
 * fork point (the request's offset, which must be a position of the source,
 * else the source's tail). Returns 0 or LOG_E*. */
int logrule_fork(log_conn_t *c, const logrule_rows *rows, const log_create_req *r, log_info *chain, int *n,
                 const char **ct, int64_t *ttl, int64_t *expires, offset_t *fork);
/* The stream row at r->path just inserted: looked up into r->info, the fork's
 * prefix and r's messages inserted, closed as r says, the tail written;
 * r->created = 1. Returns 0 or LOG_E*. */
int logrule_create_fill(log_conn_t *c, const logrule_rows *rows, log_create_req *r, const log_msg *prefix,
                        size_t nprefix, int64_t now_ms);

/* An append, inside a group: the stream at r->path looked up (locked) into
 * r->info, the producer, close, content type and Stream-Seq rules, then the
 * messages, the tail and the producer's state written. Returns 0 (r->duplicate
 * set for a producer's retry) or LOG_E*. */
int logrule_append(log_conn_t *c, const logrule_rows *rows, log_append_req *r);

/* A delete, inside a group, of the stream at path (looked up locked): *answer is
 * what the caller gets after the commit (an expired stream is removed but
 * answered as missing). Returns 0 or LOG_E*. */
int logrule_delete(log_conn_t *c, const logrule_rows *rows, const char *path, int *answer);
/* Remove a stream (inside a group): only marked deleted while live forks still
 * read it (expired forks are removed first); else its rows go, and any deleted
 * ancestors it was the last reader of. Returns 0 or LOG_E*. */
int logrule_remove(log_conn_t *c, const logrule_rows *rows, const log_info *info);
/* One batch of the retention sweep (log.h, lib/store.h): the expired streams
 * newest first (a fork, made after the stream it forks, goes before it and no
 * longer holds it), at most b->streams_max; a stream forks still read is only
 * marked deleted; another loses its messages b->messages_max a batch at most,
 * and its row in the batch that finds it without any. Returns 0 or LOG_E*. */
int logrule_sweep(log_conn_t *c, const logrule_rows *rows, log_sweep_batch *b);

/* A read, inside the engine's read transaction: the stream looked up, the
 * offset checked (LOG_ERANGE past the tail; an OFFSET_AT offset must be a
 * position of the stream, LOG_EOFFSET if not), its messages from the chain
 * delivered to fn up to r->max_bytes. Returns 0, fn's stop value, or LOG_E*. */
int logrule_read(log_conn_t *c, const logrule_rows *rows, log_read_req *r, log_msg_fn fn, void *ud);
/* A live stream's row (log_head): 0 or LOG_E*. */
int logrule_head(log_conn_t *c, const logrule_rows *rows, const char *path, log_info *info);

/* Free a fork's prefix (each message's data, then the array). */
void logrule_free_msgs(log_msg *m, size_t n);

#endif

/* log: durable append-only streams, kept by the database's engine (lib/store.h).
 *
 * A log_t is one process's view of the database; a log_conn_t is one thread's
 * connection to it (connections are not shared between threads). They are the
 * handles of every store operation, not only the log's. Reads run on the calling
 * thread's connection in a short read transaction. Writes are queued and
 * committed in groups: see the essay at the top of log.c.
 *
 * Every function returns 0 (or a positive success variant) or a negative LOG_E*
 * code that the HTTP layer maps to a status. */
#ifndef DSTREAM_LOG_H
#define DSTREAM_LOG_H

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <strings.h>

#include "chain.h"
#include "errs.h"
#include "offset.h"

#define LOG_PATH_MAX      1024
#define LOG_CTYPE_MAX     256
#define LOG_STREAM_SEQ_MAX 256
#define LOG_PRODUCER_MAX  256


typedef struct log log_t;
typedef struct log_conn log_conn_t;

typedef struct log_opts {
    int synchronous_full;      /* 1 (default): acknowledged means fsynced */
    int busy_timeout_ms;       /* default 5000 */
    int migrate;               /* 1 (default): create or migrate the schema at log_open */
    int cache_kib;             /* SQLite: each connection's page cache; 0 (default): SQLite's 2,000 KiB */
    int read_cache_kib;        /* PostgreSQL: the process's cache of streams' history
                                * (lib/store/pg/pg_hist.c); 0 (default): none */
} log_opts;

/* Where a change feed reader is (log_changes): engine-defined. Start from
 * LOG_CURSOR_START: the first call only positions it at the present. */
typedef struct log_cursor {
    int64_t v;
} log_cursor;
#define LOG_CURSOR_START ((log_cursor){-1})

typedef struct log_info {
    int64_t id;
    char content_type[LOG_CTYPE_MAX];
    int json;                  /* application/json: message framing */
    int closed;
    int64_t created_ms;
    int64_t access_ms;
    int64_t ttl_s;             /* -1: none */
    int64_t expires_ms;        /* -1: none */
    offset_t tail;             /* the next offset to be written */
    char stream_seq[LOG_STREAM_SEQ_MAX];
    int64_t parent;            /* 0: not a fork */
    offset_t fork;             /* where the fork branched off */
    int64_t fork_sub;          /* the Stream-Fork-Sub-Offset it was created with */
    int64_t forks;
    uint8_t digest[CHAIN_LEN]; /* the hash chain's digest at the tail (lib/chain.h) */
} log_info;

typedef struct log_msg {
    const void *data;
    size_t len;
} log_msg;

typedef struct log_create_req {
    const char *path;
    const char *content_type;  /* NULL: the source's (fork) or application/octet-stream */
    int64_t ttl_s;             /* -1: none */
    int64_t expires_ms;        /* -1: none */
    int closed;
    const log_msg *msgs;       /* initial data */
    size_t nmsgs;
    const char *fork_from;     /* path of the source, or NULL */
    int fork_has_offset;
    offset_t fork_offset;      /* when fork_has_offset */
    int64_t fork_sub;          /* bytes (or JSON messages) of the record at the offset */
    /* out */
    int created;               /* 1: new stream, 0: identical one existed */
    log_info info;
} log_create_req;

typedef struct log_append_req {
    const char *path;
    const char *content_type;  /* the request's; NULL: not given */
    const log_msg *msgs;
    size_t nmsgs;
    int close;
    const char *stream_seq;    /* NULL: not given */
    const char *producer;      /* NULL: not an idempotent producer */
    int64_t epoch;
    int64_t seq;
    /* out */
    int duplicate;             /* producer retry of something already appended */
    int64_t producer_epoch;    /* the stream's epoch for the producer */
    int64_t expected_seq;      /* on LOG_EGAP */
    int64_t last_seq;          /* the producer's last accepted seq */
    offset_t appended;         /* where this append starts */
    log_info info;             /* after the append */
} log_append_req;

/* One message of a read. Return non-zero to stop the read with that value. */
typedef int (*log_msg_fn)(void *ud, const void *data, size_t len, offset_t at);

typedef struct log_read_req {
    const char *path;
    offset_kind kind;
    offset_t from;
    size_t max_bytes;          /* stop after the message that reaches it (>= 1 message) */
    /* out */
    offset_t next;             /* offset after the last message delivered */
    size_t count;
    size_t bytes;
    int up_to_date;            /* next == tail */
    uint8_t digest[CHAIN_LEN]; /* the hash chain's digest at next (lib/chain.h) */
    log_info info;
} log_read_req;

/* Open the database target (a SQLite file path, or an engine's URI: lib/store.h)
 * for this process, creating and migrating it unless opts say not to; opts may be
 * NULL for the defaults. Returns NULL with a message in err. Free with log_close
 * after every conn. */
log_t *log_open(const char *target, const log_opts *opts, char *err, size_t errlen);
void log_close(log_t *l);
/* The defaults: synchronous_full 1, busy_timeout_ms 5000, migrate 1. */
void log_opts_default(log_opts *o);
/* The engine's name ("sqlite") and the schema version this build migrates to. */
const char *log_engine_name(const log_t *l);
int log_schema_version(const log_t *l);

/* Cap the database at max_bytes (> 0; 0: no cap) for the connections opened from
 * now on (db_cap): a write past it fails with LOG_EFULL and writes nothing. Call
 * before opening connections. */
void log_set_max_bytes(log_t *l, int64_t max_bytes);

/* The database target (as given to log_open). */
const char *log_path(const log_t *l);

/* A connection for the calling thread. Returns NULL with err. */
log_conn_t *log_conn_open(log_t *l, char *err, size_t errlen);
void log_conn_close(log_conn_t *c);

/* Create a stream, or accept an identical re-create. LOG_ECONFLICT if a stream
 * with another configuration exists; LOG_ENOTFOUND/LOG_EGONE/LOG_ERANGE for a
 * fork whose source or offset is bad, LOG_EOFFSET for a fork offset that is not a
 * position of the source. */
int log_create(log_conn_t *c, log_create_req *r);

/* Append messages and/or close. See LOG_E* for the failures. */
int log_append(log_conn_t *c, log_append_req *r);

/* Run fn(c, arg) inside the next group-commit transaction (SAVEPOINT of its own;
 * a negative return rolls back only fn's writes) and wait until it committed.
 * fn may call the log_tx_* functions and any store operation that runs inside a
 * group. Returns fn's result, or LOG_EBUSY/LOG_EIO if the commit failed. */
int log_transact(log_conn_t *c, int (*fn)(log_conn_t *, void *), void *arg);
/* Inside log_transact: a nested unit of work, kept (undo = 0) or undone alone
 * (undo = 1) by log_tx_nest_end. Returns 0 or LOG_E*. */
int log_tx_nest_begin(log_conn_t *c);
int log_tx_nest_end(log_conn_t *c, int undo);

/* Each stream whose path starts with prefix ("" for all), in path order:
 * fn(ud, path, info) (expired and deleted ones too; info->closed etc. as stored).
 * Returns 0 or LOG_E*. */
int log_list(log_conn_t *c, const char *prefix, void (*fn)(void *ud, const char *path, const log_info *info),
             void *ud);

/* log_create, log_append and log_delete for use inside log_transact. */
int log_tx_create(log_conn_t *c, log_create_req *r);
int log_tx_append(log_conn_t *c, log_append_req *r);
int log_tx_delete(log_conn_t *c, const char *path);
/* Inside log_transact: the appends r[0..n) as log_tx_append makes each, in that
 * order (the same checks, the same results in each r[i]; a stream may come more
 * than once), written together where the engine can: on PostgreSQL their streams'
 * rows locked in one statement, in id order (so that two hosts' batches over the
 * same streams queue instead of deadlocking), every message inserted with one
 * statement and every tail moved with one, instead of about three statements an
 * append; on SQLite one by one. Returns 0 when all were made, else the LOG_E* of
 * the first that failed, its index in *failed (may be NULL): the caller's
 * operation must then fail, which undoes whatever of the batch was made. */
int log_tx_append_many(log_conn_t *c, log_append_req *r, size_t n, size_t *failed);
/* Whether c's engine writes a batch of appends together (log_tx_append_many):
 * where it does not, a caller gains nothing by gathering one, and holding every
 * append's messages at once only raises its peak memory. */
int log_batches_appends(log_conn_t *c);

/* Read from r->from, calling fn for each message in order. An OFFSET_AT offset
 * must name a position of this stream, its byte part included (LOG_EOFFSET if it
 * does not: an offset of another stream, or one made up); LOG_ERANGE if beyond
 * the tail. */
int log_read(log_conn_t *c, log_read_req *r, log_msg_fn fn, void *ud);
/* A hint, outside a group: the reads r[0..n) (path, kind, from, max_bytes) follow
 * soon on this connection. An engine that pays a round trip per statement fetches
 * their first pages together, and each log_read asking for the same takes its own
 * (what it sees is the stream as it was then, as if the read had run then);
 * reads nobody asked for are dropped at the next call. n = 0 drops them now.
 * At most LOG_READ_AHEAD_MAX are. Returns how many it fetched so (0: SQLite,
 * which reads in process, ignores it). */
#define LOG_READ_AHEAD_MAX 64
size_t log_read_ahead(log_conn_t *c, const log_read_req *r, size_t n);
/* Whether c's engine fetches reads ahead at all (log_read_ahead): where it does not,
 * a caller need not gather the reads to ask for. */
int log_reads_ahead(log_conn_t *c);
/* Outside a group: on 1, the reads on c until on 0 (log_read, log_head,
 * log_digest_at) see one snapshot of the log. On SQLite they are then one read
 * transaction instead of one each: its lock taken once and its page cache kept
 * from one to the next (each transaction that finds the log moved starts from an
 * empty cache), which a hub's turn of many streams' reads spends far less on. A
 * group begun meanwhile ends it first. 0 or LOG_E*; an engine without it reads
 * each alone. */
int log_read_batch(log_conn_t *c, int on);

/* Metadata of a live stream (LOG_ENOTFOUND if missing or expired). */
int log_head(log_conn_t *c, const char *path, log_info *info);

/* The hash chain's digest (lib/chain.h) of the live stream at path at the position
 * after its first seq messages (zeros at 0; for a fork, below its fork point, its
 * parent's): into out. 0, LOG_ERANGE past the tail, or LOG_E* as log_head. */
int log_digest_at(log_conn_t *c, const char *path, uint64_t seq, uint8_t out[CHAIN_LEN]);

/* The longest a read may leave a sliding TTL's access time unrecorded
 * (DSTREAM_TTL_TOUCH_MS): the default, and log_set_touch_ms to change it. */
#define LOG_TOUCH_MS_DEFAULT 1000
void log_set_touch_ms(log_t *l, int64_t touch_ms);

/* 1 if a read at now_ms of a stream with a sliding TTL (info->ttl_s >= 0) must
 * record its access (a write), 0 if the touch may be skipped: when the recorded
 * access time is less than min(ttl/10, touch_ms) old. Skipping moves the expiry
 * at most that interval earlier than the exact sliding rule (last read + TTL),
 * never later, and never below 9/10 of the TTL after the last read. */
static inline int log_touch_due(const log_info *info, int64_t now_ms, int64_t touch_ms)
{
    if (info->ttl_s < 0) return 0;
    int64_t interval = touch_ms;
    if (info->ttl_s < touch_ms / 100) interval = info->ttl_s * 100;     /* ttl/10, in ms */
    return now_ms - info->access_ms >= interval;
}

/* Extend the sliding TTL of a stream just read (info as the read saw it): a
 * write group of its own, skipped when log_touch_due says so. Returns 1 when it
 * wrote, 0 when skipped (or no sliding TTL), or LOG_E*. */
int log_touch(log_conn_t *c, const log_info *info);

/* Delete a stream. A stream that forks still read is soft-deleted. */
int log_delete(log_conn_t *c, const char *path);

/* The retention sweep works in batches, a write group each, so that one sweep
 * never holds the write lock for long: a batch removes at most `streams` expired
 * streams and deletes at most `messages` of their messages (a stream with more
 * loses them over several batches and goes in the batch that finds it empty);
 * the sweep goes on batch after batch until nothing expired is left or
 * `budget_ms` has passed (the rest waits for the next sweep). One exception to
 * the message bound: an ancestor that was deleted while forks still read it goes
 * whole with its last fork. */
typedef struct log_sweep_limits {
    int streams;                /* per batch; <= 0: LOG_SWEEP_STREAMS */
    int64_t messages;           /* per batch; <= 0: LOG_SWEEP_MESSAGES */
    int64_t budget_ms;          /* per sweep; <= 0: LOG_SWEEP_BUDGET_MS */
} log_sweep_limits;
#define LOG_SWEEP_STREAMS 100
#define LOG_SWEEP_MESSAGES 10000
#define LOG_SWEEP_BUDGET_MS 2000

/* What a sweep did: its totals, its batches, and the most one batch took. */
typedef struct log_sweep_stats {
    int64_t streams, messages;
    int64_t batches;
    int64_t max_batch_streams, max_batch_messages;
    int more;                   /* the budget ran out with expired streams left */
} log_sweep_stats;

/* One batch, as the engine does it (lib/store.h): filled by the engine. */
typedef struct log_sweep_batch {
    int streams_max;
    int64_t messages_max;
    int streams;                /* removed (or marked deleted: forks read them) */
    int64_t messages;           /* deleted */
    int more;                   /* there may be more to do */
} log_sweep_batch;

/* Delete every expired stream, in batches (lim NULL: the defaults); st (may be
 * NULL) gets the figures. Returns how many streams, or LOG_E*. */
int log_sweep_run(log_conn_t *c, const log_sweep_limits *lim, log_sweep_stats *st);

/* log_sweep_run with the defaults. Returns how many, or LOG_E*. */
int log_sweep(log_conn_t *c);

/* The rules below are the same on every engine, and engines use them: kept here,
 * inline, so that an engine never calls back up into log.c. */

/* 1 if two content types name the same media type (case and parameters aside). */
static inline int log_ctype_equal(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    while (a[la] && a[la] != ';') la++;
    while (b[lb] && b[lb] != ';') lb++;
    while (la && isspace((unsigned char)a[la - 1])) la--;
    while (lb && isspace((unsigned char)b[lb - 1])) lb--;
    while (la && isspace((unsigned char)*a)) a++, la--;
    while (lb && isspace((unsigned char)*b)) b++, lb--;
    return la == lb && strncasecmp(a, b, la) == 0;
}

/* 1 if ct may be stored and sent back in a header: 1 to LOG_CTYPE_MAX - 1 bytes,
 * each printable ASCII (no control characters, which would be echoed into every
 * response of the stream). */
static inline int log_ctype_valid(const char *ct)
{
    size_t n = 0;
    for (; ct[n]; n++)
        if (ct[n] < 0x20 || ct[n] > 0x7e) return 0;
    return n > 0 && n < LOG_CTYPE_MAX;
}

/* 1 if ct is application/json (JSON mode). */
static inline int log_ctype_json(const char *ct)
{
    return log_ctype_equal(ct, "application/json");
}

/* 1 if a database target is an engine's URI (postgresql://, postgres://: a server's
 * database, which no file check can find), 0 if it is a SQLite file path. */
static inline int log_target_is_uri(const char *target)
{
    return target && (strncasecmp(target, "postgresql://", 13) == 0 || strncasecmp(target, "postgres://", 11) == 0);
}

/* 1 if info's stream has expired at now_ms. */
static inline int log_expired(const log_info *info, int64_t now_ms)
{
    if (info->ttl_s >= 0 && now_ms >= info->access_ms + info->ttl_s * 1000) return 1;
    if (info->expires_ms >= 0 && now_ms >= info->expires_ms) return 1;
    return 0;
}

/* Give back the memory c keeps only for speed (SQLite: its page cache, refilled
 * from the file as needed), after a burst of work; nothing on an engine that keeps
 * none. */
void log_release_memory(log_conn_t *c);

/* The database's size as its engine measures it: fn(ud, what, bytes) for each part
 * (SQLite: "db" and "wal", the files). Returns 0 or LOG_E*. */
int log_sizes(log_conn_t *c, void (*fn)(void *ud, const char *what, int64_t bytes), void *ud);


/* Call fn(ud) after every group commit of this process, committed or rolled back
 * (lib/wake uses it to notice local commits without waiting for the file watch).
 * Set before threads run. */
void log_on_commit(log_t *l, void (*fn)(void *), void *ud);
/* 1 while a group commit of this process is between the engine's group_begin and
 * its end (on SQLite no other writer can commit meanwhile, so changes to the -wal
 * file are this process's own), and fn of log_on_commit is called when it ends. */
int log_writing(log_t *l);

/* Report every stream changed (appended, closed, deleted) since *cur, calling
 * fn(ud, stream id, path), and advance *cur. From LOG_CURSOR_START only positions
 * *cur at the present. Returns 0 or LOG_E*. */
int log_changes(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *), void *ud);
/* As log_changes, also saying where each changed stream's log ends: fn(ud, stream
 * id, path, tail seq), the tail 0 for a stream deleted or closed (the caller then
 * knows only that it changed). */
int log_changes_tails(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *, uint64_t),
                      void *ud);

/* Statistics since log_open: write groups committed and operations in them. */
void log_stats(log_t *l, uint64_t *groups, uint64_t *ops);
/* The process's cache of streams' history (log_opts.read_cache_kib; PostgreSQL's
 * only): reads that took their first page from it, reads that did not, and the
 * bytes it holds; all 0 without one. */
void log_read_cache_stats(log_t *l, uint64_t *hits, uint64_t *misses, uint64_t *bytes);

#endif

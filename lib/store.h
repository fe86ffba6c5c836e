/* store: the interface behind which an engine keeps everything dstream persists.
 *
 * dstream keeps one source of truth, a database, and runs on more than one kind:
 * SQLite in WAL mode on one host (the embedded default), and engines for many hosts
 * sharing one server. No program and no lib/ module outside an engine's folder
 * sees the engine: they call typed operations (log_append, log_read, the
 * session store, tokens, leases, ...), never SQL text, and never an engine's
 * types. This header is the seam, in the shape of nchan's store vtable or SQLite's
 * VFS: an engine fills one `store_engine`, which says how to open the process's
 * handle and each thread's connection, how a write group is begun and ended (the
 * group commit itself, engine-neutral, is lib/log.c's), and holds one table of
 * typed operations per area.
 *
 * The handles. A log_t is one process's view of the database and a log_conn_t one
 * thread's connection; every operation takes the connection. An engine embeds
 * `struct log_conn` at the start of its own connection struct (so the same pointer
 * is both) and keeps its process-wide state behind log_t's `engine_state`.
 *
 * Writes. Every write runs inside a group (log_transact, or the log's own
 * create/append/delete): lib/log.c queues it, and the group's leader asks the
 * engine to begin (group_begin), runs each queued operation between op_begin and
 * op_end (so one failing operation rolls back alone), then group_end commits once.
 * An operation is acknowledged only after that commit: acknowledged = committed,
 * on every engine.
 *
 * The change feed. Readers elsewhere learn what committed through `feed`: a
 * descriptor to poll, and a report of the streams that changed since the last
 * look, kept in an engine-defined cursor (log_cursor). An engine with one writer
 * at a time may number its commits (SQLite does: a revision stamped on the stream
 * row); an engine with many concurrent writers must not allocate such a number
 * from max()+1 and uses its own notification instead, which is why the cursor is
 * opaque here.
 *
 * Choosing the engine: store_engine_for(target) picks it from the database target
 * a program was given (DSTREAM_DB or a --db option); log_open does, and so do the
 * backups (lib/backup), which work on a target rather than an open log.
 *
 * This header has no .c of its own: it is the contract between lib/log.c (and the
 * modules that keep rows: lease, defs, auth, rstats, subscription, backup, ...)
 * above, and the engines below, which never call up into them (backup's check
 * hands its callbacks down: backup_walk). */
#ifndef DSTREAM_STORE_H
#define DSTREAM_STORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "backup.h"
#include "defs.h"
#include "lease.h"
#include "log.h"
#include "recorder.h"
#include "retain.h"
#include "rstats.h"
#include "sstore.h"
#include "subscription.h"

typedef struct store_engine store_engine;

/* One process's handle (log_t). */
struct log {
    const store_engine *engine;
    void *engine_state;         /* the engine's own, from its open */
    char *target;               /* as given to log_open: a file path or a URI */
    log_opts opts;
    int64_t max_bytes;          /* log_set_max_bytes: 0, none */
    int64_t touch_ms;           /* log_set_touch_ms */
    /* the group commit (lib/log.c) */
    pthread_mutex_t mu;
    struct log_op *head, *tail;
    int leading;                /* a leader is committing a group */
    int writing;                /* a leader is inside a group (atomic; log_writing) */
    void (*on_commit)(void *);  /* called after every group, committed or not */
    void *on_commit_ud;
    uint64_t groups, ops;
};

/* One thread's connection (log_conn_t): the first member of an engine's own. */
struct log_conn {
    log_t *log;
    /* The operations of the group being committed (set by lib/log.c before
     * group_begin): an engine may skip an operation's own savepoint when it is
     * alone, its transaction then undoing it (op_end returning its op_rc < 0). */
    size_t group_ops;
    /* Set by lib/log.c before group_begin: every operation of the group may be run
     * again (the log's appends: each sets all it answers, and does nothing but
     * write the database). An engine may then run them without a savepoint each
     * (a trial); should one of them fail, or a statement of theirs, op_end or
     * group_end returns LOG_ERERUN, the transaction is rolled back, and lib/log.c
     * runs the whole group again, with group_trial 0 (each operation's result its
     * own, as always). */
    int group_trial;
    /* Set by an engine's op_end (lib/log.c clears it before each operation): the
     * operation said it succeeded but was undone all the same (a statement of its
     * failed, which it did not report): its LOG_E*, which the operation then answers. */
    int op_undone;
};

/* The streams of the Durable Streams protocol: the log's operations, each with
 * the checks of log.h (closed, content type, Stream-Seq, producers, forks). The
 * three writes run inside a group; the others on their own. */
typedef struct store_streams_ops {
    int (*create)(log_conn_t *c, log_create_req *r);
    int (*append)(log_conn_t *c, log_append_req *r);
    /* log_tx_append_many, inside a group (optional: lib/log.c makes them one by
     * one through append when an engine has none): the appends r[0..n) in that
     * order, each with append's checks and results; 0 when all were made, else the
     * first failure's LOG_E* and its index in *failed (the operation must fail). */
    int (*append_many)(log_conn_t *c, log_append_req *r, size_t n, size_t *failed);
    int (*remove)(log_conn_t *c, const char *path, int *answer);  /* answer: 0 or LOG_E*, after commit */
    int (*touch)(log_conn_t *c, int64_t id);        /* inside a group */
    /* One batch of the retention sweep (log.h), inside a group: the expired
     * streams newest first (a fork before the stream it forks), at most
     * b->streams_max of them and b->messages_max messages; b->more when it
     * stopped at a bound. */
    int (*sweep)(log_conn_t *c, log_sweep_batch *b);
    int (*read)(log_conn_t *c, log_read_req *r, log_msg_fn fn, void *ud);
    /* log_read_ahead (optional: an engine without it reads each when asked):
     * how many of r[0..n) it fetched. */
    size_t (*read_ahead)(log_conn_t *c, const log_read_req *r, size_t n);
    /* log_read_batch (optional: an engine without it reads each in a transaction
     * of its own): on 1, the reads until on 0 in one read transaction. */
    int (*read_batch)(log_conn_t *c, int on);
    int (*head)(log_conn_t *c, const char *path, log_info *info);
    /* log_digest_at, in a read transaction of its own (or the group's). */
    int (*digest_at)(log_conn_t *c, const char *path, uint64_t seq, uint8_t out[CHAIN_LEN]);
    int (*list)(log_conn_t *c, const char *prefix,
                void (*fn)(void *ud, const char *path, const log_info *info), void *ud);
} store_streams_ops;

/* The change feed: what committed, by any process, since the last look. */
typedef struct store_feed store_feed;
typedef struct store_feed_ops {
    /* Open this process's feed (connections of its own). NULL with err. */
    store_feed *(*open)(log_t *l, char *err, size_t errlen);
    void (*close)(store_feed *f);
    /* A descriptor that becomes readable when something may have committed, or -1
     * (then the caller polls). */
    int (*fd)(store_feed *f);
    /* Watch (on = 1) while somebody in this process waits, not otherwise (0). */
    void (*watch)(store_feed *f, int on);
    /* The descriptor was readable: consume it. Returns 1 when the caller should
     * look now (a commit of another process is visible, or the feed lost track),
     * 0 when it said nothing of note (or only of this process's own group commit,
     * whose end pokes the caller anyway: log_on_commit). */
    int (*event)(store_feed *f);
    /* 1 if anything may have committed since the last look, 0 if not (cheap). */
    int (*moved)(store_feed *f);
    /* Report each stream changed since the last report: fn(ud, id, path). Returns
     * 0 or LOG_E*. id -1 (path ""): any stream may have changed (the feed lost
     * track, e.g. its connection was made again): every waiter should look. An
     * engine may report a path of "" where it knows only the id. */
    int (*changes)(store_feed *f, void (*fn)(void *, int64_t, const char *), void *ud);
    /* Move past every change since the last report without saying which, once
     * alone(ud), asked after the feed knows where that is, says that nobody wants
     * them by id (a process whose waiters all watch every stream: the runner):
     * 1 if any stream changed, 0 if none; -1 when alone said no (nothing moved: the
     * caller reports them with changes). NULL: the engine has nothing cheaper than
     * changes. */
    int (*skip)(store_feed *f, int (*alone)(void *), void *ud);
    /* The same on a connection, from a cursor of the caller's (log_changes). */
    int (*changes_since)(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *),
                         void *ud);
    /* The same, also saying each stream's tail seq: fn(ud, id, path, tail), tail 0
     * for a stream deleted or closed (log_changes_tails). */
    int (*changes_tails)(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *, uint64_t),
                         void *ud);
} store_feed_ops;

/* Leases (lib/lease.h): which runner process drives a session. acquire and
 * release run inside a group; renew and held inside the caller's. */
typedef struct store_leases_ops {
    int (*acquire)(log_conn_t *c, lease_arg *a);
    int (*renew)(log_conn_t *c, const char *session, const lease_id *me, int64_t ttl_ms);
    int (*held)(log_conn_t *c, const char *session, const lease_id *me);
    /* lease_tx_held_many; returns 0 or LOG_E*, and adds the statements it ran to
     * *nstmts. */
    int (*held_many)(log_conn_t *c, const char *const *session, const unsigned char *renew, size_t n,
                     const lease_id *me, int64_t ttl_ms, int *held, unsigned *nstmts);
    /* acquire for n sessions (lease_acquire_many), inside a group; NULL: acquire
     * one by one (an engine in process, for which a statement costs no trip). */
    int (*acquire_many)(log_conn_t *c, lease_arg *a, size_t n);
    int (*release)(log_conn_t *c, lease_arg *a);
    /* release of n sessions' leases of me, inside the caller's transaction, their
     * rows locked in the ids' order; NULL: release one by one (an engine in
     * process). */
    int (*release_many)(log_conn_t *c, const char *const *session, size_t n, const lease_id *me);
    int (*owner_lock)(log_t *l, const char *owner, char *err, size_t errlen);
} store_leases_ops;

/* Runner figures (lib/rstats.h): a row per runner id, written inside a group
 * (start: counts a start too); the sessions counted by status. A database that
 * has no such table yet reads as empty. figures_put (inside a group) and
 * figures_each keep each runner's JSON document of figures by model, MCP server
 * and retry cause; NULL on an engine whose documents are files beside the
 * database (SQLite: lib/rstats.c). */
typedef struct store_rstats_ops {
    int (*put)(log_conn_t *c, const rstats *s, int start);
    int (*each)(log_conn_t *c, void (*fn)(void *ud, const rstats *row), void *ud);
    int (*sessions)(log_conn_t *c, void (*fn)(void *ud, const char *status, int64_t n), void *ud);
    int (*figures_put)(log_conn_t *c, const char *owner, const char *doc);
    int (*figures_each)(log_conn_t *c, void (*fn)(void *ud, const char *doc), void *ud);
} store_rstats_ops;

/* Agent and workflow definitions (lib/defs.h): the writes run inside a group,
 * with lib/defs.h's rules (agent_delete: LOG_ENOTFOUND when there was none). */
typedef struct store_defs_ops {
    int (*agent_put)(log_conn_t *c, defs_put_arg *a);
    json_t *(*agent_get)(log_conn_t *c, const char *name, int *rc);
    int (*agent_list)(log_conn_t *c, json_t *arr);
    int (*agent_delete)(log_conn_t *c, const char *name);
    int (*workflow_add)(log_conn_t *c, defs_put_arg *a);
    json_t *(*workflow_get)(log_conn_t *c, const char *name, int version, int *got_version, int *rc);
    int (*workflow_list)(log_conn_t *c, json_t *arr);
} store_defs_ops;

/* Tokens (lib/auth.h): insert (inside a group; AUTH_EEXISTS when taken), get by
 * id (1 found, 0 not, or LOG_E*), each by name, remove by name or id (inside a
 * group; LOG_ENOTFOUND when there was none). */
typedef struct store_tokens_ops {
    int (*insert)(log_conn_t *c, const auth_token_row *t);
    int (*get)(log_conn_t *c, const char *id, auth_token_row *t);
    int (*each)(log_conn_t *c, void (*fn)(void *ud, const auth_token_row *t), void *ud);
    int (*remove)(log_conn_t *c, const char *name_or_id);
} store_tokens_ops;

/* Sessions (lib/sstore.h): their rows and the snapshots of their views. get:
 * 0 or LOG_ENOTFOUND (deleted ones are not found); kin_get: the same, a deleted
 * row too (whose forks may still read its stream), *deleted says which; children:
 * the rows (deleted ones too, *deleted said) whose parent is id, oldest first
 * (created_ms, then id), at most max, until fn returns nonzero; list: newest first, those f
 * takes (lib/sstore.h's sstore_filter: status, agent, workflow, labels, creation
 * range) created before (before_ms, before_id), at most max rows (-1: no limit), until
 * fn returns nonzero; unfinished: the ids of sessions with work left (pending,
 * running, awaiting input). Writes run inside a group: insert, set_status,
 * forget_deleted (a deleted session's row, so that its id is free again),
 * mark_deleted (and its snapshots gone). snapshot_before: the newest snapshot
 * at or before seq upto: 1 with *at and *view (malloc'd text, the caller frees),
 * 0 if none. The OpenTelemetry export's cursors (lib/sstore.h, sstore_otlp_*):
 * otlp_cursor reads one (0 when none was written); otlp_advance (inside a group)
 * moves it from `from` to `to` only if it still is at `from` (1 moved, 0 not, or
 * LOG_E*); otlp_behind: each session not deleted whose stream holds events past
 * its cursor, fn(ud, id, cursor), until fn returns nonzero. */
typedef struct store_sessions_ops {
    int (*get)(log_conn_t *c, const char *id, sstore_row *row);
    int (*kin_get)(log_conn_t *c, const char *id, sstore_row *row, int *deleted);
    int (*children)(log_conn_t *c, const char *id, int max, int (*fn)(void *ud, const sstore_row *row, int deleted),
                    void *ud);
    int (*list)(log_conn_t *c, const sstore_filter *f, int64_t before_ms, const char *before_id, int max,
                int (*fn)(void *ud, const sstore_row *row), void *ud);
    int (*unfinished)(log_conn_t *c, void (*fn)(void *ud, const char *id), void *ud);
    int (*insert)(log_conn_t *c, const sstore_row *row);
    int (*set_status)(log_conn_t *c, const char *id, const char *status, int64_t now_ms);
    int (*forget_deleted)(log_conn_t *c, const char *id);
    int (*mark_deleted)(log_conn_t *c, const char *id, int64_t now_ms);
    int (*snapshot_before)(log_conn_t *c, const char *id, uint64_t upto, offset_t *at, char **view);
    int (*snapshot_put)(log_conn_t *c, const char *id, offset_t at, const char *view);
    /* Several sessions' snapshots, each as snapshot_put's (optional: one by one). */
    int (*snapshot_put_many)(log_conn_t *c, const char *const *id, const offset_t *at, const char *const *view,
                             size_t n);
    int (*otlp_cursor)(log_conn_t *c, const char *id, uint64_t *seq);
    int (*otlp_advance)(log_conn_t *c, const char *id, uint64_t from, uint64_t to);
    int (*otlp_behind)(log_conn_t *c, int (*fn)(void *ud, const char *id, uint64_t cursor), void *ud);
} store_sessions_ops;

/* Retention (lib/retain.h). scan: the streams not deleted whose path starts with
 * prefix, newest first (created_ms, then path, byte order) strictly before
 * (before_ms, before_path), at most max, each with its session's id and status
 * when it is a session's (a row not deleted), to fn until it returns nonzero.
 * thin (inside a group): the sessions after after_id (byte order), at most max
 * looked at, *last the last of them; each finished one (completed, failed,
 * cancelled) loses its snapshots but its newest, its oldest and those at a
 * multiple of keep_every events, counted from the session's snapshot phase
 * (sstore_snapshot_phase) or from 0 (where snapshots fell before phases), *removed
 * added to; returns how many it looked at (0: none left) or LOG_E*. add (inside a
 * group): total what grows by n. totals: each total, by name (none before the
 * first pass). */
typedef struct store_retain_ops {
    int (*scan)(log_conn_t *c, const char *prefix, int64_t before_ms, const char *before_path, int max,
                int (*fn)(void *ud, const retain_item *it), void *ud);
    int (*thin)(log_conn_t *c, const char *after_id, int max, int keep_every, char *last, size_t lastcap,
                int64_t *removed);
    int (*add)(log_conn_t *c, const char *what, int64_t n);
    int (*totals)(log_conn_t *c, void (*fn)(void *ud, const char *what, int64_t n), void *ud);
} store_retain_ops;

/* Subscriptions (lib/subscription.h): their rows, their links with cursors, the
 * state of their wakes (leases, deliveries), and the webhook signing keys.
 * lib/subscription keeps the rules (what links, when a wake is made or fenced)
 * and runs every write inside a group. A row or key that is not there is
 * LOG_ENOTFOUND. A walk calls fn for each item until fn returns nonzero, and then
 * returns that value (else 0 or LOG_E*).
 *
 * Rows: get (text members malloc'd, sub_row_free), insert (the configuration and
 * created_ms of r), remove (with its links), each (every id), patterns (those
 * with a pattern, by id: wake_stream "" when none).
 * Links: links (of one subscription, by path, each with its stream's tail now),
 * link (a new link at acked, else the existing one keeps its cursor and gains
 * the kind: explicit, or glob), unlink (the explicit kind goes; a link left with
 * no kind goes), ack (the cursor to offset; forward_only: only if that moves it
 * on), linked (the subscriptions linking path), stream_reset (path's stream is
 * gone, tail NULL: its glob links go, the others start over at the start; else
 * the links whose cursor is past tail start over: it was made again).
 * Streams as links see them: tail (1 and its tail, or 0 and the start when it
 * does not exist), streams (every stream that exists, with its tail).
 * Wakes: wake_set (a new wake: generation, id, snapshot; deliver 1 makes it due
 * at next_attempt_ms; holder, lease and failures cleared), wake_clear (idle
 * again), lease (until, and the holder unless holder is NULL), lease_over (the
 * wakes not being delivered whose lease ended at or before now), due (up to max
 * deliveries due at now, the earliest first), delivery_due (next due at at;
 * error: an attempt failed, counted with its reason), delivery_accepted (the
 * receiver holds it: no more deliveries, a lease until lease_until), next_due
 * (the earliest delivery or lease due, INT64_MAX when none, or on failure).
 * Keys: key_get (the newest whole key), key_put, keys (newest first, kid and
 * pub only; malformed ones left out). */
typedef struct store_subs_ops {
    int (*get)(log_conn_t *c, const char *id, sub_row *r);
    int (*insert)(log_conn_t *c, const sub_row *r);
    int (*remove)(log_conn_t *c, const char *id);
    int (*each)(log_conn_t *c, int (*fn)(void *ud, const char *id), void *ud);
    int (*patterns)(log_conn_t *c,
                    int (*fn)(void *ud, const char *id, const char *pattern, const char *wake_stream), void *ud);
    int (*links)(log_conn_t *c, const char *id, int (*fn)(void *ud, const sub_link *l), void *ud);
    int (*link)(log_conn_t *c, const char *id, const char *path, int explicit_, const char *acked);
    int (*unlink)(log_conn_t *c, const char *id, const char *path);
    int (*ack)(log_conn_t *c, const char *id, const char *path, const char *offset, int forward_only);
    int (*linked)(log_conn_t *c, const char *path, int (*fn)(void *ud, const char *id), void *ud);
    int (*stream_reset)(log_conn_t *c, const char *path, const char *tail);
    int (*tail)(log_conn_t *c, const char *path, char out[OFFSET_LEN + 1]);
    int (*streams)(log_conn_t *c, int (*fn)(void *ud, const char *path, const char *tail), void *ud);
    int (*wake_set)(log_conn_t *c, const char *id, int64_t generation, const char *wake_id, const char *snapshot,
                    int deliver, int64_t next_attempt_ms);
    int (*wake_clear)(log_conn_t *c, const char *id);
    int (*lease)(log_conn_t *c, const char *id, const char *holder, int64_t until);
    int (*lease_over)(log_conn_t *c, int64_t now, int (*fn)(void *ud, const char *id), void *ud);
    int (*due)(log_conn_t *c, int64_t now, size_t max, int (*fn)(void *ud, const char *id), void *ud);
    int (*delivery_due)(log_conn_t *c, const char *id, int64_t at, const char *error);
    int (*delivery_accepted)(log_conn_t *c, const char *id, int64_t lease_until);
    int64_t (*next_due)(log_conn_t *c);
    int (*key_get)(log_conn_t *c, webhook_key *k);
    int (*key_put)(log_conn_t *c, const webhook_key *k, int64_t created_ms);
    int (*keys)(log_conn_t *c, int (*fn)(void *ud, const webhook_key *k), void *ud);
} store_subs_ops;
/* Backups (lib/backup.h), each on a database target rather than an open log: the
 * copy and the check see the database as it is (no migration, no change of journal
 * mode), the restore migrates it after. copy: the database as of one commit into
 * the file tmp (which does not exist; the caller syncs and renames it, or removes
 * it on failure), with *bi filled (bytes apart; bi may be NULL). restore: the
 * backup file from over the database. check: the engine's integrity check and the
 * invariants of lib/backup.h, at most limit reports per kind, then (if the file is
 * sound) the walk of every session stream, all in one read transaction; returns
 * the number of problems it found itself. Each fails with BACKUP_E* and err. */
typedef struct store_backup_ops {
    int (*copy)(const char *target, const char *tmp, backup_info *bi, char *err, size_t errlen);
    int (*restore)(const char *target, const char *from, char *err, size_t errlen);
    int (*check)(const char *target, int limit, backup_report_fn report, void *ud, const backup_walk *walk,
                 char *err, size_t errlen);
} store_backup_ops;

/* Recordings (lib/recorder.h). The writes run inside the caller's group: open
 * (replacing an unfinished one of the same identity), chunk, end (meta: JSON text
 * or NULL), pin_one, delete_key and pin (return how many rows), delete_session
 * (its unpinned ones), prune (unpinned ones created before cutoff_ms; with
 * dry_run only counted). find_in: the complete recording of key in session that
 * answers as n (REC_LATEST: the last), 1 with *out and *meta (malloc'd text or
 * NULL, the caller frees), 0 if none; latest_session: the session of the newest
 * complete recording of key that reach allows (a JSON array of session-id
 * prefixes; NULL: any), 1/0; provider_meta: the meta of a session's k-th complete
 * provider recording, 1/0; candidates: complete recordings of kind in lineage (a
 * JSON array of session ids, ranked first) or reach, newest first, at most limit,
 * to fn until it returns nonzero; list: newest first below cursor (0: from the
 * newest), at most max rows; each: every recording of key or session (NULL: any),
 * oldest first, with its request. */
typedef struct store_recordings_ops {
    int (*open)(log_conn_t *c, const rec_id *id, const char *request_id, const char *provider, const char *model,
                const char *request_json, int64_t now_ms);
    int (*chunk)(log_conn_t *c, const rec_id *id, int seq, int64_t t_ms, const void *data, size_t len);
    int (*end)(log_conn_t *c, const rec_id *id, long status, int result, const char *meta, int64_t now_ms);
    int (*find_in)(log_conn_t *c, const char *kind, const char *key, int n, const char *session, rec_found *out,
                   char **meta);
    int (*latest_session)(log_conn_t *c, const char *kind, const char *key, const char *reach, char *out,
                          size_t cap);
    int (*provider_meta)(log_conn_t *c, const char *session, int k, char **meta);
    int (*chunks)(log_conn_t *c, int64_t rowid, int (*fn)(void *ud, int64_t t_ms, const void *p, size_t n),
                  void *ud);
    int (*candidates)(log_conn_t *c, const char *kind, const char *lineage, const char *reach, int limit,
                      int (*fn)(void *ud, const char *key, const char *session, int occurrence,
                                const char *request),
                      void *ud);
    int (*list)(log_conn_t *c, const char *session, const char *provider, const char *model, int64_t cursor,
                int max, int (*fn)(void *ud, const rec_row *r), void *ud);
    int (*each)(log_conn_t *c, const char *key, const char *session, int (*fn)(void *ud, const rec_row *r),
                void *ud);
    int (*delete_key)(log_conn_t *c, const char *key);
    int (*pin)(log_conn_t *c, const char *key, int pinned);
    int (*pin_one)(log_conn_t *c, const rec_id *id);
    int (*delete_session)(log_conn_t *c, const char *session);
    int (*prune)(log_conn_t *c, int64_t cutoff_ms, int dry_run, int64_t *count, int64_t *bytes);
} store_recordings_ops;

/* Copying a whole database to another (lib/dbcopy.h, dstream copy), between
 * engines or on one: the rows of the tables below, raw, in the same columns on
 * every engine (an engine's own columns, SQLite's streams.rev and PostgreSQL's
 * streams.xid, are not copied: each makes its own). The state of running
 * processes (leases, runner owner locks, runner figures) is not copied either.
 * cols lists a table's columns, types their kinds (I integer, T text, B bytes),
 * key the positions of its key columns: rows are walked in key order, text
 * compared byte by byte on every engine. */
typedef struct store_table {
    const char *name;
    const char *cols;
    const char *types;
    const char *key;            /* column positions, "01": cols 0 and 1 */
} store_table;

#define STORE_COPY_TABLES 13
#define STORE_COPY_COLS 20      /* columns of the widest table */
#define STORE_T_MESSAGES 1      /* messages: (stream, seq, pos, rec, data, digest) */

/* In order: a table comes after the one its rows name (messages after streams). */
static const store_table store_copy_tables[STORE_COPY_TABLES] = {
    {"streams",
     "id, path, content_type, json, created_ms, access_ms, ttl_s, expires_ms, closed, tail_seq, tail_pos,"
     " stream_seq, parent, fork_seq, fork_pos, fork_sub, deleted, forks, digest",
     "ITTIIIIIIIITIIIIIIB", "0"},
    {"messages", "stream, seq, pos, rec, data, digest", "IIIIBB", "01"},
    {"producers", "stream, producer, epoch, seq", "ITII", "01"},
    {"agents", "name, doc, created_ms, updated_ms", "TTII", "0"},
    {"workflows", "name, version, doc, created_ms", "TITI", "01"},
    {"sessions",
     "id, stream, agent, workflow, wf_version, parent, fork_offset, status, created_ms, updated_ms, deleted, labels",
     "TTTTITTTIIIT", "0"},
    {"snapshots", "session, seq, pos, view", "TIIT", "01"},
    {"tokens", "id, name, hash, scopes, created_ms, expires_ms", "TTBTII", "0"},
    {"subscriptions",
     "id, type, pattern, webhook_url, wake_stream, lease_ttl_ms, description, config_hash, created_ms, generation,"
     " wake_id, snapshot, holder, lease_until, deliver, attempts, next_attempt_ms, last_error",
     "TTTTTITTIITTTIIIIT", "0"},
    {"subscription_links", "sub, path, explicit, glob, acked", "TTIIT", "01"},
    {"webhook_keys", "kid, pub, priv, created_ms", "TBBI", "0"},
    {"recordings",
     "id, session, kind, key, occurrence, request_id, provider, model, request, complete, pinned, status, result,"
     " meta, created_ms, ended_ms",
     "ITTTITTTTIIIITII", "0"},
    {"recording_chunks", "recording, seq, t_ms, data", "IIIB", "01"},
};

/* The ORDER BY of a table's walk: its key columns by name, each text one
 * followed by text_suffix (an engine's byte-order collation, or ""). Returns 0,
 * or -1 if it does not fit in out. */
static inline int store_copy_key(const store_table *t, const char *text_suffix, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    for (const char *k = t->key; *k; k++) {
        int want = *k - '0', i = 0;
        const char *p = t->cols;
        while (i < want && (p = strchr(p, ','))) p++, i++;
        if (!p) return -1;
        while (*p == ' ') p++;
        size_t n = strcspn(p, ",");
        int w = snprintf(out + len, cap - len, "%s%.*s%s", len ? ", " : "", (int)n, p,
                         t->types[want] == 'T' ? text_suffix : "");
        if (w < 0 || (size_t)w >= cap - len) return -1;
        len += (size_t)w;
    }
    return 0;
}

/* One value of a row: NULL, an integer, or text or bytes (p, n; text not
 * NUL-terminated). */
enum { STORE_NULL, STORE_INT, STORE_TEXT, STORE_BLOB };
typedef struct store_val {
    int type;
    int64_t i;
    const void *p;
    size_t n;
} store_val;

/* The copy's operations, on store_copy_tables[table]. read_begin / read_end: the
 * walks between them see one snapshot of the database (a read transaction).
 * rows: each row in key order to fn (its values valid during the call) until fn
 * returns nonzero, which rows then returns (else 0 or LOG_E*). put: one row as it
 * was (ids included), inside a group. count: the table's rows. finish: inside a
 * group after the puts, whatever the engine derives from the rows (PostgreSQL's
 * identity counters past the ids copied). */
typedef struct store_copy_ops {
    int (*read_begin)(log_conn_t *c);
    int (*read_end)(log_conn_t *c);
    int (*rows)(log_conn_t *c, int table, int (*fn)(void *ud, const store_val *row), void *ud);
    int (*put)(log_conn_t *c, int table, const store_val *row);
    int (*count)(log_conn_t *c, int table, int64_t *n);
    int (*finish)(log_conn_t *c);
} store_copy_ops;

struct store_engine {
    const char *name;           /* "sqlite" */
    /* 1 if the database's text is UTF-8 only (PostgreSQL's): lib/log.c answers a
     * look-up of a path that is not UTF-8 as missing before the engine sees it (a
     * write of such text is refused on every engine: LOG_EINVAL). */
    int utf8_text;
    /* The process: create or migrate the database, fill l->engine_state. Returns
     * 0, or -1 with err. */
    int (*open)(log_t *l, char *err, size_t errlen);
    void (*close)(log_t *l);
    /* A thread's connection (its first member filled by the engine). */
    log_conn_t *(*conn_open)(log_t *l, char *err, size_t errlen);
    void (*conn_close)(log_conn_t *c);
    /* The group commit's steps (lib/log.c). group_begin takes whatever lock the
     * engine's writers share and opens the transaction; op_begin and op_end
     * bracket one operation (op_end undoes it when op_rc < 0, and returns nonzero
     * when the whole transaction was lost, for example a full disk, or, for an
     * operation alone in its group (group_ops == 1) run without a savepoint of its
     * own, to have the transaction undo it; or LOG_ERERUN in a trial, group_trial);
     * group_end
     * commits (rc == 0) or rolls back and returns the group's result;
     * group_release drops the lock group_begin took. */
    int (*group_begin)(log_conn_t *c);
    /* Optional (NULL: nothing to do, as with SQLite's one writer). Right after
     * group_begin, the paths of the streams the group's creates, appends and
     * deletes write (n > 0; repeats possible): lock the existing ones in one
     * global order, so that groups writing the same streams never deadlock.
     * Returns 0 or LOG_E* (the whole group fails). */
    int (*group_lock)(log_conn_t *c, const char *const *paths, size_t n);
    int (*op_begin)(log_conn_t *c);
    int (*op_end)(log_conn_t *c, int op_rc);
    int (*group_end)(log_conn_t *c, int rc);
    void (*group_release)(log_conn_t *c);
    /* A nested unit inside an operation (log_tx_nest_begin / _end). */
    int (*nest_begin)(log_conn_t *c);
    int (*nest_end)(log_conn_t *c, int undo);
    /* The database's size, part by part (log_sizes). */
    int (*sizes)(log_conn_t *c, void (*fn)(void *ud, const char *what, int64_t bytes), void *ud);
    /* Optional (NULL: nothing kept): give back the memory c keeps for speed and
     * does not need now (SQLite: the connection's page cache; PostgreSQL: libpq's
     * buffers, by connecting again outside a transaction), as a process does
     * after a burst of work (log_release_memory). */
    void (*release_memory)(log_conn_t *c);
    /* Optional (NULL: none kept): the process's cache of streams' history
     * (log_opts.read_cache_kib): reads that took their first page from it, reads
     * that did not, and the bytes it holds (log_read_cache_stats). */
    void (*read_cache_stats)(log_t *l, uint64_t *hits, uint64_t *misses, uint64_t *bytes);
    /* The schema version this build's migrations reach. */
    int (*schema_version)(void);
    const store_streams_ops *streams;
    const store_feed_ops *feed;
    const store_leases_ops *leases;
    const store_rstats_ops *rstats;
    const store_defs_ops *defs;
    const store_tokens_ops *tokens;
    const store_sessions_ops *sessions;
    const store_recordings_ops *recordings;
    const store_subs_ops *subs;
    const store_backup_ops *backup;
    const store_copy_ops *copy;
    const store_retain_ops *retain;
};

/* The engine for a database target (lib/log.c): a postgresql:// (or postgres://)
 * URI names PostgreSQL, anything else is a SQLite file path. NULL with err when
 * this build has no such engine. */
const store_engine *store_engine_for(const char *target, char *err, size_t errlen);

/* The engine of a connection. */
static inline const store_engine *store_of(const log_conn_t *c)
{
    return c->log->engine;
}

#endif

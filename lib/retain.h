/* retain: retention by policy, the operator's file of rules by path prefix
 * (DSTREAM_RETENTION) that the runner applies a little at a time and that
 * `dstream gc` applies or explains (--dry-run).
 *
 * A policy names a prefix of stream paths ("sessions/ci-", "logs/", "" for all)
 * and deletes what is older than an age (by the stream's last activity, its last
 * write or recorded read, or by its creation: "age") or beyond the newest `keep`
 * under the prefix (by creation). A stream under "sessions/" that is a session's
 * goes with its session row, in one transaction, as DELETE /v1/sessions/ID does.
 * An item is governed by the policy of the longest prefix it matches.
 *
 * Never deleted, whatever its age or rank (each kept item says why): a stream
 * that a live fork reads (fork_needed: a session whose fork point a living fork
 * needs), a session waiting for a human or another input (waiting:
 * awaiting_input), one pending or running (running; a workflow asleep or waiting
 * for a signal is one: reported as waiting_timer, waiting_signal). Each is checked again
 * inside the transaction that would delete it, so a session that started
 * running or was forked after it was looked at stays.
 *
 * A pass works in batches (a transaction each, a bounded number of items and of
 * their messages) within a time budget; one that runs out of budget says so and
 * the next call goes on where it stopped (retain_state). After the policies, a
 * pass thins the snapshots of finished sessions (lib/store.h: thin). Totals of
 * what passes removed are kept in the database for /metrics. */
#ifndef DSTREAM_RETAIN_H
#define DSTREAM_RETAIN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

#define RETAIN_POLICIES_MAX 64
/* The snapshots of a finished session thinning keeps: its newest, its oldest (a
 * fork's, at its fork point) and one every this many events, so that its state at
 * any position replays at most this many events. */
#define RETAIN_SNAPSHOT_EVERY 1024

typedef struct retain_policy {
    char *prefix;
    int64_t max_age_ms;         /* 0: no age rule */
    int by_created;             /* the age counts from creation, not from the last activity */
    int64_t keep;               /* -1: no count rule; else the newest this many stay */
} retain_policy;

typedef struct retain_cfg {
    retain_policy v[RETAIN_POLICIES_MAX];
    size_t n;
} retain_cfg;

/* One stream under a prefix as the store's scan gives it (lib/store.h). path,
 * session and status valid during the call; session NULL when the stream is no
 * session's. own_msgs: the messages the stream itself stores (a fork's past its
 * fork point). */
typedef struct retain_item {
    const char *path;
    int64_t created_ms, access_ms;
    int64_t forks;              /* live forks that read it */
    int64_t own_msgs;
    const char *session;
    const char *status;
} retain_item;

/* What a pass decided for one item. */
typedef struct retain_verdict {
    const char *path;
    const char *session;        /* NULL: a plain stream */
    const char *prefix;         /* its policy's */
    int del;                    /* 1: deleted (or would be, in a dry run) */
    const char *reason;         /* del: "age" or "count"; kept: "fork_needed", "waiting", "running",
                                 * "waiting_timer", "waiting_signal" (reported only: a running
                                 * session whose log waits for one), "within_age", "within_count" */
    int64_t age_ms;             /* by the policy's clock */
    int64_t rank;               /* 0 for the newest under the prefix */
} retain_verdict;

/* Parse a policy document ({"policies": [{"prefix", "maxAge", "age", "keep"}]}:
 * docs/architecture.md, Retention). Returns 0 and fills cfg (retain_free it), or
 * -1 with one line in err naming what is wrong. */
int retain_parse(const json_t *doc, retain_cfg *cfg, char *err, size_t errcap);

/* The operator's policy file at path (lib/opfile: a regular file of root or this
 * user, writable by nobody else), parsed. 0 or -1 with err. */
int retain_load(const char *path, retain_cfg *cfg, char *err, size_t errcap);

void retain_free(retain_cfg *cfg);

/* The policy that governs path: the one of the longest matching prefix, or -1. */
int retain_policy_for(const retain_cfg *cfg, const char *path);

/* "90s", "30m", "12h", "7d" -> ms; -1 if malformed. */
int64_t retain_age_ms(const char *s);

/* Where a pass stands between calls (zeroed: at the start of a pass). */
typedef struct retain_state {
    size_t policy;              /* the policy being scanned; n: the thinning */
    int64_t before_ms;          /* the scan's cursor: items created before (ms, path) */
    char *before_path;          /* malloc'd, NULL at a policy's start */
    int64_t rank;               /* items of the policy seen so far */
    char thin_after[72];        /* the thinning's cursor: session ids after this */
} retain_state;

void retain_state_free(retain_state *st);

typedef struct retain_opts {
    int64_t budget_ms;          /* 0: no budget (the pass goes to its end) */
    int batch_items;            /* items per delete transaction; <= 0: RETAIN_BATCH_ITEMS */
    int64_t batch_msgs;         /* their messages; <= 0: RETAIN_BATCH_MSGS (one item always goes) */
    int dry_run;                /* decide and report, delete nothing, thin nothing */
    int64_t now_ms;             /* 0: the clock */
    void (*report)(void *ud, const retain_verdict *v);   /* may be NULL */
    void *ud;
} retain_opts;
#define RETAIN_BATCH_ITEMS 20
#define RETAIN_BATCH_MSGS 2000
#define RETAIN_SCAN_PAGE 256
#define RETAIN_THIN_SESSIONS 200

/* What a call did (added to: zero it first). */
typedef struct retain_stats {
    int64_t streams, sessions;  /* deleted (a session's stream counts with the session) */
    int64_t kept;               /* items kept under a policy */
    int64_t skipped;            /* found protected again inside the delete's transaction */
    int64_t snapshots;          /* removed by thinning */
    int64_t batches, passes;    /* delete transactions; passes finished */
} retain_stats;

/* Go on with the pass st stands at (on c, a connection of the caller's thread):
 * the policies' items newest first, each decided, reported and (unless dry_run)
 * deleted in batches; then the thinning. Returns 1 when the budget ran out with
 * work left (call again), 0 when the pass finished (st back at the start), or
 * LOG_E* (st kept: the next call tries again from there). */
int retain_run(log_conn_t *c, const retain_cfg *cfg, retain_state *st, const retain_opts *o, retain_stats *out);

/* The totals every pass added up (lib/store.h: what is "streams", "sessions",
 * "snapshots" or "passes"): fn(ud, what, n). Returns 0 or LOG_E* (a database
 * without the table yet reads as empty). */
int retain_totals(log_conn_t *c, void (*fn)(void *ud, const char *what, int64_t n), void *ud);

/* A verdict's reason in words ("a live fork reads it", ...). */
const char *retain_reason_text(const char *reason);

#endif

/* The PostgreSQL engine's own header: its connection and the query helpers its
 * files share. Nothing outside lib/store/pg/ includes it (make check), except the
 * engine's own tests (tests/unit/test_pg_*.c).
 *
 * One PGconn per log_conn_t (per thread), opened from the database target, a
 * libpq connection URI (postgresql://..., multi-host ones included). Statements
 * are prepared once per connection, by SQL text (pg_run), and run with parameters
 * in text form (bytes in binary form); results come back in text form except
 * where a helper says binary. No transaction is held while waiting for anything. */
#ifndef DSTREAM_STORE_PG_H
#define DSTREAM_STORE_PG_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../chain.h"
#include "../../store.h"

#define PG_PARAMS_MAX 24        /* parameters of one statement */
#define PG_PREPARED_MAX 256     /* statements kept prepared per connection */
#define PG_AHEAD_MAX LOG_READ_AHEAD_MAX /* reads fetched ahead together */
#define PG_INT8_OID 20          /* the types of pg_array's elements */
#define PG_BYTEA_OID 17
#define PG_TEXT_OID 25
#define PG_PENDING_MAX 512      /* a trial's statements sent and not read, at most (pg_flight_kept) */
#define PG_CHANGED_MAX 512      /* stream ids one group's NOTIFY names before it says "*" */
#define PG_OWN_MAX 4096         /* stream changes of a connection's groups kept for its next look */
#define PG_OWN_GROUPS 64        /* ... and their transactions */
#define PG_TRIM_EVERY 1024      /* a connection's groups between two trims of stream_changes */
#define PG_TRIM_KEEP 10000      /* transactions of stream_changes kept behind the oldest running */
#define PG_TRIM_LOCK "7265746169"   /* the trim's advisory lock key */

/* A stream a group of the connection changed, as its change feed's look would
 * report it (pg_conn.own). */
typedef struct pg_own {
    int64_t id;
    uint64_t tail;              /* 0 for a stream closed */
    size_t path;                /* at pg_conn.own_paths + path */
} pg_own;

typedef struct pg_prepared {
    uint64_t hash;              /* of the SQL text */
    char *sql;                  /* the text (compared on a hash match) */
    char name[24];              /* "s<n>" */
} pg_prepared;

/* A stream row the current group holds locked (pg_conn.rows). */
typedef struct pg_row {
    char *path;
    uint32_t hash;              /* path's (pg_streams.c: row_of compares it first) */
    log_info info;
    int deleted;
    int dirty;                  /* its tail (tail, closed, stream_seq, access_ms, digest)
                                 * is ahead of the database's row: the row's UPDATE is
                                 * due (pg_streams.c: once per stream and group) */
    int stale;                  /* kept only for undo_*: read again before it is used */
    unsigned added_op;          /* pg_conn.op_serial when it was first kept */
    unsigned undo_op;           /* pg_conn.op_serial when undo was taken: the row ... */
    log_info undo;              /* ... as it was before that operation changed it, */
    int undo_dirty, undo_stale, undo_deleted;   /* ... its flags then */
} pg_row;

struct pg_stmt;
struct pg_params;

typedef struct pg_conn {
    struct log_conn base;       /* first: a log_conn_t * is a pg_conn * */
    PGconn *pg;
    int in_tx;                  /* inside BEGIN ... COMMIT/ROLLBACK on the server */
    int in_group;               /* inside a group (group_begin .. group_end), whose
                                 * BEGIN goes with its first statement (begin_due):
                                 * a transaction for every purpose (pg_in_tx) */
    int readonly;               /* its server refused a write (25006: a standby, or a
                                 * primary fenced read-only): made again at the next
                                 * statement outside a transaction (a multi-host target
                                 * with target_session_attrs=read-write then finds the
                                 * writable one) */
    unsigned epoch;             /* pg_epoch when it was made (pg_stale_all) */
    int nprepared;
    pg_prepared prepared[PG_PREPARED_MAX];
    /* The streams the current group changed: named by its one NOTIFY. */
    int nchanged, changed_all;
    int64_t changed[PG_CHANGED_MAX];
    int changed_unkept;         /* one of them not by a row it holds (pg_changed, not
                                 * pg_changed_kept): the group's changes are the look's */
    /* The streams this connection's committed groups changed since its last look
     * through the change cursor (changes_skip), each group's whole when every
     * change it made was to a row it held: that look reports them from here and
     * has the server skip their groups' rows of stream_changes (the runner's look
     * after each of its commits read back every stream the commit wrote). */
    /* A look answered from here alone (pg_feed.c, look_kept): none while the
     * process noted a change (pg_changes_note) other than this connection's own
     * groups kept since its last look in the database, when it was (look_ms, 0:
     * it never looked, and keeps nothing: only a connection that looks does). */
    uint64_t look_noted, own_noted;
    int64_t look_ms;
    /* The one cursor that state serves: the last positioned on the connection. Any
     * other cursor's look is in the database, skips nothing and leaves the state
     * alone (were it reported to one cursor, or its groups skipped for it, the
     * other would never see them: the runner's loop once lost its own commits to
     * the trace exporter's look so). */
    const log_cursor *look_cur;
    unsigned looks_kept;        /* looks answered so (tests) */
    int nown, own_cap, nown_xids;
    pg_own *own;
    int64_t own_xids[PG_OWN_GROUPS];
    char *own_paths;
    size_t own_plen, own_pcap;
    unsigned groups;            /* groups that changed streams (pg_engine.c: the trim's) */
    int op_nchanged, op_changed_all;    /* as they were at op_begin: an undone operation's go */
    /* An operation's savepoint (pg_engine.c) is sent with its first statement, in
     * the same round trip (pg_run: libpq's pipeline mode), and released with the
     * next one's or by the group's COMMIT; an operation that sends nothing takes none. */
    const char *begin_due;      /* a read's or a group's BEGIN, sent with its first
                                 * statement (pg_run), in one round trip; cleared
                                 * once it ran */
    int savepoint_due;          /* SAVEPOINT op goes before the next statement */
    int release_due;            /* ... and RELEASE op before it (the last operation's) */
    int savepoint_lost;         /* a RELEASE or SAVEPOINT sent so failed: the operation
                                 * cannot roll back alone, the group is lost */
    /* The stream rows this transaction holds locked (FOR UPDATE), as it has them:
     * filled by the group's lock, kept up to date by the streams' statements
     * (pg_streams.c). They hold while no other statement ran since (rows_at ==
     * nstmts): any other may have changed a row, an undone operation among them. */
    unsigned nstmts;            /* statements (and flights) run on this connection */
    unsigned rows_at;
    int nrows, rows_cap;
    pg_row *rows;
    /* The tails kept back (pg_row.dirty): ndirty rows are. Their UPDATE goes before
     * the next statement sent by anything but pg_flight_kept (pg_query.c asks
     * due_fill for it: pg_streams.c), after the last operation's RELEASE and before
     * the next one's SAVEPOINT when those go with it; due_done(c, in_op) once it ran,
     * in_op: inside the operation's savepoint (undone if it rolls back). */
    int ndirty;
    unsigned op_serial;         /* bumped by every operation of a group */
    int op_held;                /* the rows held when the operation began */
    int nested;                 /* inside a nested savepoint (nest_begin): no tail kept back */
    void *read_pre;             /* a read's stream row and first page, fetched together
                                 * (pg_streams.c: op_read), while the read uses them */
    struct pg_ahead *ahead;     /* reads fetched ahead (log_read_ahead), each taken
                                 * once by the read it was fetched for (pg_streams.c) */
    int nahead;
    PGresult *ahead_res;        /* their rows, one result for all of them */
    void *batch;                /* an append_many's messages collected, not yet sent
                                 * (pg_streams.c), while it runs its appends */
    /* A trial (store.h: log_conn.group_trial; pg_engine.c): the group's operations
     * run without a savepoint each, and the inserts of the appends whose rows the
     * group holds are sent in pipeline mode without waiting for their results
     * (pg_flight_kept): pending of them are unread, read (pg_drain) before any
     * other statement and before the COMMIT. */
    int trial;
    int bare;                   /* no savepoint per operation: a trial, or an operation
                                 * alone in its group (log_conn.group_ops == 1); its
                                 * inserts go unread as a trial's (an operation alone
                                 * fails with its unread statement's own error) */
    int pending;
    int trial_rc;               /* 0, or how the trial failed: LOG_ERERUN, or LOG_EBUSY /
                                 * LOG_EDOWN (the whole group fails, as outside a trial) */
    unsigned op_stmts;          /* nstmts at op_begin */
    int64_t xid;                /* the group's transaction id, read with its stream rows'
                                 * lock (pg_streams_lock), or 0: its NOTIFY and COMMIT
                                 * then go in one round trip (pg_run_commit) */
    int (*due_fill)(struct log_conn *c, struct pg_stmt *st, struct pg_params *p, char **bufs);
    void (*due_done)(struct log_conn *c, int in_op);
} pg_conn;

/* A read fetched ahead (pg_streams.c: op_read_ahead): for path from lo with
 * budget, the rows [base, base + nrows) of pg_conn.ahead_res (its head first),
 * until the read asking for the same takes them. */
struct pg_ahead {
    char *path;
    uint64_t lo, budget;
    int base, nrows;
    int taken;
};

/* pg_hist.c: a process's cache of streams' history (log_opts.read_cache_kib;
 * pg_streams.c reads through it). An entry: stream id's messages [lo, hi) at path,
 * end to end, for reads from an offset in [from, hi). */
typedef struct pg_hist pg_hist;
typedef struct pg_hist_ent {
    char *path;
    int64_t id;
    uint64_t from, lo, hi;
    uint64_t lo_pos;            /* message lo's position */
    uint8_t digest[CHAIN_LEN];  /* message hi - 1's */
    size_t n, n_cap;            /* messages (hi - lo), and room for them */
    uint32_t *off;              /* message lo + k is data[off[k], off[k + 1]) */
    char *data;
    size_t data_cap;
    /* the table's (under its mutex) */
    uint32_t hash;
    int refs;                   /* the table's, and each read's that holds it */
    int in_table;
    size_t size;                /* the bytes it takes */
    uint64_t used;
} pg_hist_ent;
typedef struct pg_hist_msg {
    const void *data;
    size_t len;
} pg_hist_msg;

/* A cache of at most cap bytes; NULL when cap is 0 (none) or out of memory. */
pg_hist *pg_hist_new(size_t cap);
void pg_hist_free(pg_hist *h);
/* path's entry when it serves a read from lo, held (pg_hist_put it), or NULL. */
pg_hist_ent *pg_hist_get(pg_hist *h, const char *path, uint64_t lo);
void pg_hist_put(pg_hist *h, pg_hist_ent *e);
/* e is not path's history (any longer): out of the table, and put. */
void pg_hist_drop(pg_hist *h, pg_hist_ent *e);
/* Keep stream id's messages m[0..n) at path from start (digest: the last one's),
 * which a read from offset from fetched: appended to path's entry where they
 * continue it, else its entry unless that serves reads from further back. */
void pg_hist_keep(pg_hist *h, const char *path, int64_t id, uint64_t from, offset_t start,
                  const pg_hist_msg *m, size_t n, const uint8_t digest[CHAIN_LEN]);
/* A read took its first page's messages from here (hit 1), or from the database. */
void pg_hist_note(pg_hist *h, int hit);
/* Those reads, and the bytes kept. */
void pg_hist_stats(pg_hist *h, uint64_t *hits, uint64_t *misses, uint64_t *bytes);

/* Forget the reads fetched ahead and not taken. */
static inline void pg_ahead_forget(pg_conn *c)
{
    for (int i = 0; i < c->nahead; i++) free(c->ahead[i].path);
    c->nahead = 0;
    PQclear(c->ahead_res);
    c->ahead_res = NULL;
}

static inline pg_conn *pgc(log_conn_t *c)
{
    return (pg_conn *)c;
}

/* Whether c is inside a transaction for what it reads and writes: one the server
 * has begun, or a group's whose BEGIN is still due with its first statement. */
static inline int pg_in_tx(log_conn_t *c)
{
    return pgc(c)->in_tx || pgc(c)->in_group;
}

/* Forget the rows kept (pg_conn.rows), the tails kept back with them (the
 * group ended, or the connection went). */
static inline void pg_rows_forget(pg_conn *c)
{
    for (int i = 0; i < c->nrows; i++) free(c->rows[i].path);
    c->nrows = 0;
    c->ndirty = 0;
}

/* The parameters of one statement, added in order ($1, $2, ...). */
typedef struct pg_params {
    int n;
    const char *v[PG_PARAMS_MAX];
    int len[PG_PARAMS_MAX];
    int fmt[PG_PARAMS_MAX];     /* 0 text, 1 binary */
    char num[PG_PARAMS_MAX][24];
} pg_params;

void pg_params_init(pg_params *p);
/* A text parameter; NULL is SQL NULL. The text must live until the statement ran. */
void pg_text(pg_params *p, const char *s);
/* A number (formatted into the params). */
void pg_int(pg_params *p, int64_t v);
/* Bytes, in binary form (for bytea). */
void pg_bytes(pg_params *p, const void *data, size_t len);
/* SQL NULL. */
void pg_null(pg_params *p);
/* A one-dimensional array in binary form of n elements of type elem_oid
 * (PG_INT8_OID, PG_BYTEA_OID), each given in the type's binary form: elem_len[i]
 * bytes at elem[i]. The array is built in a buffer returned (malloc'd: the caller
 * frees it after the statement ran), or NULL (nothing added) when out of memory
 * or past a parameter's 2 GiB. */
char *pg_array(pg_params *p, unsigned elem_oid, size_t n, const void *const *elem, const size_t *elem_len);

/* Run sql (prepared on this connection the first time its text is seen) with p
 * (may be NULL), after the savepoint due if any (pg_conn.savepoint_due). binary:
 * results in binary form (bytea as raw bytes, integers as big-endian: read them
 * with pg_int_at). Returns the result (the caller PQclears
 * it) when it is PGRES_TUPLES_OK or PGRES_COMMAND_OK, else NULL with *rc set to a
 * LOG_E* (pg_error). */
PGresult *pg_run(log_conn_t *c, const char *sql, const pg_params *p, int binary, int *rc);
/* In a group without savepoints (pg_conn.bare), with statements sent and unread
 * (pg_conn.pending): sql after them and after the statements due (the tails'
 * UPDATE), in the same pipeline with one sync, one round trip for all, where
 * pg_drain and then pg_run would take two. Returns sql's result (as pg_run's), or
 * NULL with *rc: the unread ones' outcome as pg_drain's, else sql's own
 * error. Where it cannot (nothing unread, sql not prepared on this connection
 * yet), it is pg_drain then pg_run. */
PGresult *pg_run_after(log_conn_t *c, const char *sql, const pg_params *p, int binary, int *rc);
/* The group's last statement sql (its NOTIFY) and its COMMIT in one pipeline with
 * one sync, after the statements unread (pg_conn.pending) and those due, one round
 * trip for all: the server runs the COMMIT only if every statement before it
 * succeeded (an error skips the rest of a pipeline). Returns 0 with *committed set
 * when the COMMIT succeeded; else the trial's outcome as pg_drain's, or sql's or
 * the COMMIT's own error (the transaction is then aborted, or ended: ROLLBACK). */
int pg_run_commit(log_conn_t *c, const char *sql, const pg_params *p, int *committed);
/* Run a statement whose result nobody needs. Returns 0 or LOG_E*. */
int pg_exec(log_conn_t *c, const char *sql, const pg_params *p);
/* Statements sent together, in one round trip (pg_flight). */
#define PG_FLIGHT_MAX 4
typedef struct pg_stmt {
    const char *sql;
    const pg_params *p;         /* may be NULL */
} pg_stmt;
/* Inside a transaction: run st[0..n) (n <= PG_FLIGHT_MAX; prepared as pg_run's),
 * after the savepoint due if any, sent together in libpq's pipeline mode, one
 * round trip for all; their results are not kept. Returns 0, or the LOG_E* of the
 * first that failed (those after it did not run). */
int pg_flight(log_conn_t *c, const pg_stmt *st, int n);
/* pg_flight, but the tails kept back stay so (pg_conn.ndirty): for statements that
 * neither read nor write the stream rows (an append's insert of its messages).
 * In a group without savepoints (pg_conn.bare: a trial, or an operation alone) they
 * are only sent, in pipeline mode, and 0 returned: their results are read by
 * pg_drain (or with the next statement), and a failure fails the trial, or the
 * operation alone with its own error. */
int pg_flight_kept(log_conn_t *c, const pg_stmt *st, int n);
/* Read the results of the statements a trial (or an operation alone) sent and has not
 * read (pg_conn.pending), and leave pipeline mode. Returns 0, or how the trial failed
 * (pg_conn.trial_rc, set too): LOG_ERERUN, LOG_EBUSY or LOG_EDOWN; an operation
 * alone, with the failed statement's own error. */
int pg_drain(log_conn_t *c);
/* The number of bufs due_fill may fill (each malloc'd, freed after the statement). */
#define PG_DUE_BUFS 8
/* Run sql that is not worth preparing (BEGIN, SAVEPOINT, ...). Returns 0 or LOG_E*. */
int pg_simple(log_conn_t *c, const char *sql);

/* Values of a text-form result: a NULL reads as 0 / NULL. */
int64_t pg_int_of(const PGresult *r, int row, int col);
const char *pg_text_of(const PGresult *r, int row, int col);
int pg_null_at(const PGresult *r, int row, int col);
/* Values of a binary-form result: an int8/int4/int2 column, and raw bytes. */
int64_t pg_int_at(const PGresult *r, int row, int col);
/* Rows a command changed (UPDATE, DELETE, INSERT). */
int64_t pg_affected(const PGresult *r);

/* The LOG_E* for a failed result (NULL: the connection's state): serialization
 * failure and deadlock (40001, 40P01), lock timeouts -> LOG_EBUSY; disk full
 * (53100) -> LOG_EFULL; a lost connection, the server going down or starting, a
 * write refused by a read-only server (25006) -> LOG_EDOWN. */
int pg_error(log_conn_t *c, const PGresult *r);

/* Note that the current group changed stream id (named by the group's NOTIFY):
 * pg_changed_kept when by a row it holds, whose info is the stream's as changed. */
void pg_changed(log_conn_t *c, int64_t id);
void pg_changed_kept(log_conn_t *c, int64_t id);

/* pg_feed.c: a group of c committed as transaction xid: the streams it changed
 * kept for c's next look through the change cursor, when every change it made was
 * to a row it held (and there is room): 1; else that look finds them in the
 * database: 0. */
int pg_own_keep(pg_conn *c, int64_t xid);
/* A group that changed streams is over (committed or not, kept by c or not): the
 * process's looks answered from memory stop until each connection has looked in
 * the database again, but for c's after its own group kept. */
void pg_changes_note(pg_conn *c, int kept);
/* Forget them (the connection closes). */
static inline void pg_own_forget(pg_conn *c)
{
    free(c->own);
    free(c->own_paths);
    c->own = NULL;
    c->own_paths = NULL;
    c->nown = c->own_cap = c->nown_xids = 0;
    c->own_plen = c->own_pcap = 0;
}

/* Connections of this engine (its conn_open and conn_close), for its own files. */
log_conn_t *pg_conn_open(log_t *l, char *err, size_t errlen);
void pg_conn_close(log_conn_t *c);
/* Its release_memory: outside a transaction, the connection made again (libpq's
 * buffers grown to the largest message go) and the rows array freed. */
void pg_conn_release(log_conn_t *c);
/* A bare connection to the target (the feed's LISTEN connection, migrations), with
 * the engine's session settings (lock_timeout from the busy timeout, notices off). */
PGconn *pg_connect(const char *target, char *err, size_t errlen);
/* Reconnect c (its statements prepared again as they are next used): 1 done, 0 not.
 * pg_run and pg_simple do it once when the connection was lost, or its server
 * refused a write as read-only (25006), outside a transaction; never inside one
 * (what it had done is gone with it; after a 25006 the connection is made again
 * at the next statement outside one). */
int pg_reconnect(log_conn_t *c);

/* Every connection of this process is made again at its next statement outside a
 * transaction (the feed found its server fenced read-only: a connection that only
 * reads would never learn it, and go on reading what the old primary has). */
void pg_stale_all(void);
/* Whether c is to be made again before its next statement outside a transaction
 * (its server refused a write as read-only, or pg_stale_all since it was made). */
int pg_stale(const log_conn_t *c);

/* pg_streams.c: lock the stream rows of paths[0..n) (a group's: any order,
 * repeats allowed) in id order, and keep them (pg_conn.rows). 0 or LOG_E*. */
int pg_streams_lock(log_conn_t *c, const char *const *paths, size_t n);
/* pg_streams.c: the operation that ran last rolled back (after its ROLLBACK TO):
 * the rows kept and the tails kept back as they were before it; held: whether
 * the rows held when the operation began and before the ROLLBACK TO (they hold
 * after it then, but for those the operation itself read, which it may have
 * locked: unlocked by it). */
void pg_streams_op_undone(log_conn_t *c, int held);

/* pg_engine.c: trim stream_changes (sql/pg/021_stream_changes.sql): its rows
 * keep transactions or more older than the oldest one running go, replaced by
 * one row naming no stream at the newest of them; skipped while another
 * connection trims. 0 or LOG_E*. */
int pg_changes_trim(log_conn_t *c, int64_t keep);

/* pg_feed.c: a group of this process is about to commit transaction xid (all:
 * changing more streams than it names): the feeds of l in this process skip its
 * NOTIFY when it comes, and (but for all) its rows in their looks, as
 * pg_feed_committed reports them. */
void pg_feed_expect(log_t *l, int64_t xid, int all);
/* The COMMIT of a group of this process (pg_feed_expect'ed) is over: committed,
 * changing the streams ids[0..n) (all: any stream), whose feeds of l in this
 * process report them at their next look (the committer's on_commit makes it at
 * once); or not known to have committed (its outcome lost, or failed): then the
 * backstop's look reports what it did. */
void pg_feed_committed(log_t *l, int64_t xid, int committed, const int64_t *ids, int n, int all);

/* pg_db.c: apply the migrations of sql/pg/ on conn; the version reached, or -1 with err. */
int pg_migrate(PGconn *conn, char *err, size_t errlen);
int pg_schema_version(void);

extern const store_streams_ops pg_streams_ops;
extern const store_feed_ops pg_feed_ops;
extern const store_leases_ops pg_leases_ops;
extern const store_rstats_ops pg_rstats_ops;
extern const store_defs_ops pg_defs_ops;
extern const store_tokens_ops pg_tokens_ops;
extern const store_sessions_ops pg_sessions_ops;
extern const store_retain_ops pg_retain_ops;
extern const store_recordings_ops pg_recordings_ops;
extern const store_subs_ops pg_subs_ops;
extern const store_backup_ops pg_backup_ops;
extern const store_copy_ops pg_copy_ops;

#endif

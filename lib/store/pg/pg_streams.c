/* The PostgreSQL engine's streams: the log's operations (lib/log.h) in SQL, with
 * the SQLite engine's behaviour: what each operation decides from the rows is
 * lib/logrule's, shared by both (lib/store/sqlite/sq_streams.c has the
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
 * The group's lock (pg_streams_lock) reads the rows of the streams the group
 * writes, FOR UPDATE, and keeps them: nobody else can change a row held so, and
 * the group's appends keep theirs up to date, so an append finds its row there
 * and costs one round trip (its savepoint and insert sent together; in a trial or
 * an operation alone, pg_engine.c, its insert alone, sent without waiting for it)
 * while no other statement ran since (any other may have changed a row: a delete, a
 * statement of the runner's; the rows are read again then).
 *
 * The tails kept back. Such an append does not update its stream's row: the row
 * kept has the new tail (pg_row.dirty), and one UPDATE from arrays writes every
 * stream's the group moved (due_fill), before the next statement anything but
 * an append's insert sends (pg_query.c puts it first: the group's NOTIFY, a read
 * in the group, another operation's statement), so that no statement in the
 * transaction reads a row behind its messages, and the COMMIT has them all. A
 * stream's row then gets one new version per group instead of one per append
 * (in PostgreSQL, each an index lookup along the versions the transaction made
 * before it). An operation that rolls back to its savepoint takes back what it
 * did to the rows kept (undo_take, pg_streams_op_undone): each row it changed
 * (or whose tail went inside it, then undone with it) is as before it, the rows
 * it read itself are forgotten (its locks may have gone with it), and the rows
 * still hold if they held before it and up to the end of it: the next append's
 * row is still one round trip. Inside a nested savepoint (the runner's commits)
 * no tail is kept back: its ROLLBACK TO would take back what no row remembers.
 *
 * A batch of appends (append_many: the runner's commit, one delta or a few to
 * each of many sessions) locks its streams' rows in one statement, in id order,
 * and runs its appends on the rows kept without a statement each: their messages
 * are collected (pg_conn.batch) and inserted with one statement, their tails kept
 * back as above and moved with one UPDATE. Per append that was a row lock, an
 * insert and an update, three statements and two round trips; per batch it is
 * three statements, whatever its size.
 *
 * Every change to a stream row stamps streams.xid = pg_current_xact_id() (the
 * change feed's key, pg_feed.c) and notes the stream for the group's NOTIFY and
 * its row of stream_changes (pg_changed); creating and deleting a row note it too.
 *
 * A read of a stream that is no fork, outside a group, is one statement (READ_ONE:
 * the row and the first page of its messages, one snapshot) without a
 * transaction; a fork's reads run in one REPEATABLE READ READ ONLY transaction
 * (one snapshot for the stream row, its ancestors and their messages). Either
 * fetches a stream's messages up to the read's budget in one statement where a
 * page holds them (scan), and never waits inside it. Inside a group they see the
 * group's own writes. */
#include "pg.h"

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../logrule.h"
#include "../../timefmt.h"

#define INFO_COLS "id, content_type, json, created_ms, access_ms, ttl_s, expires_ms, closed, " \
                  "tail_seq, tail_pos, stream_seq, parent, fork_seq, fork_pos, forks, deleted, fork_sub, digest"

#define READ_PAGE 4096          /* messages a statement of a read looks at, at most (scan) */
#define READ_BYTES (4 << 20)    /* bytes a statement of a read fetches, at most (and one message) */

/* ---- rows ------------------------------------------------------------------------- */

#define INFO_NCOLS 18

/* A bigint in PostgreSQL's text form (an optional '-', then digits), as strtoll
 * reads it, without its locale and base handling: a row of a batch's lock is
 * fourteen of them (bench/delta-cost.sh: strtoll was 2.9 k of the runner's
 * instructions per delta). */
static int64_t dec_of(const char *v)
{
    int neg = *v == '-';
    uint64_t n = 0;
    for (const char *p = v + neg; *p >= '0' && *p <= '9'; p++) n = n * 10 + (uint64_t)(*p - '0');
    return neg ? (int64_t)(0 - n) : (int64_t)n;
}

static int64_t num_of(const char *v)
{
    return v ? dec_of(v) : 0;
}

/* A column that may be NULL: -1 then. */
static int64_t opt_of(const char *v)
{
    return v ? dec_of(v) : -1;
}

/* Text v (NULL: empty) into out of cap bytes, cut to fit, as snprintf's "%s" does. */
static void text_to(char *out, size_t cap, const char *v)
{
    size_t n = v ? strnlen(v, cap - 1) : 0;
    if (n) memcpy(out, v, n);
    out[n] = '\0';
}

/* Fill info from the INFO_COLS of a row in text form, v[i] the i-th (NULL for
 * SQL NULL); *deleted gets the flag. */
static void row_fill(const char *const *v, log_info *info, int *deleted)
{
    memset(info, 0, sizeof *info);
    info->id = num_of(v[0]);
    text_to(info->content_type, sizeof info->content_type, v[1]);
    info->json = (int)num_of(v[2]);
    info->created_ms = num_of(v[3]);
    info->access_ms = num_of(v[4]);
    info->ttl_s = opt_of(v[5]);
    info->expires_ms = opt_of(v[6]);
    info->closed = (int)num_of(v[7]);
    info->tail.seq = (uint64_t)num_of(v[8]);
    info->tail.pos = (uint64_t)num_of(v[9]);
    text_to(info->stream_seq, sizeof info->stream_seq, v[10]);
    info->parent = opt_of(v[11]);
    if (info->parent < 0) info->parent = 0;
    info->fork.seq = (uint64_t)num_of(v[12]);
    info->fork.pos = (uint64_t)num_of(v[13]);
    info->forks = num_of(v[14]);
    if (deleted) *deleted = (int)num_of(v[15]);
    info->fork_sub = num_of(v[16]);
    /* bytea as text: "\\x" and its hex (a row without one reads as zeros). */
    const char *d = v[17];
    if (d && d[0] == '\\' && d[1] == 'x') chain_parse(d + 2, strlen(d + 2), info->digest);
}

/* Fill info from a row of INFO_COLS (text form) starting at column k; *deleted gets the flag. */
static void row_info(const PGresult *r, int row, int k, log_info *info, int *deleted)
{
    const char *v[INFO_NCOLS];
    for (int i = 0; i < INFO_NCOLS; i++) v[i] = pg_text_of(r, row, k + i);
    row_fill(v, info, deleted);
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

/* ---- the rows lib/logrule decides from (logrule_rows) ----------------------------- */

static int pre_row(log_conn_t *c, const char *path, log_info *info, int *deleted);

static int by_path(log_conn_t *c, const char *path, log_info *info, int *deleted)
{
    int pre = pre_row(c, path, info, deleted);
    if (pre >= 0) return pre;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, path);
    return get_row(c, "SELECT " INFO_COLS " FROM streams WHERE path = $1", &p, info, deleted);
}

/* ---- the rows the group holds locked (pg.h: pg_conn.rows) ------------------------ */

/* Whether the rows kept hold now (no other statement since). */
static int rows_held(log_conn_t *c)
{
    return pgc(c)->rows_at == pgc(c)->nstmts;
}

/* Keep row r's state before this operation (once per operation): restored if it
 * rolls back (pg_streams_op_undone). */
static void undo_take(pg_conn *pc, pg_row *r)
{
    if (r->undo_op == pc->op_serial) return;
    r->undo_op = pc->op_serial;
    r->undo = r->info;
    r->undo_dirty = r->dirty;
    r->undo_stale = r->stale;
    r->undo_deleted = r->deleted;
}

/* After a statement that changed no stream row but the one of id, if any (to
 * info): the rows hold if they held before it (held), with id's brought up to date. */
static void rows_still(log_conn_t *c, int held, int64_t id, const log_info *info)
{
    pg_conn *pc = pgc(c);
    if (!held) return;
    for (int i = 0; info && i < pc->nrows; i++)
        if (pc->rows[i].info.id == id && !pc->rows[i].stale) {
            undo_take(pc, &pc->rows[i]);
            pc->rows[i].info = *info;
        }
    pc->rows_at = pc->nstmts;
}

/* The rows kept no longer hold (a statement may have changed any): forget them,
 * but for those whose tail is kept back or whose state before this operation is
 * kept to be restored if it rolls back (pg_streams_op_undone): those stay, stale
 * (read again before they are used). */
static void rows_drop(pg_conn *pc)
{
    int k = 0;
    for (int i = 0; i < pc->nrows; i++) {
        pg_row *r = &pc->rows[i];
        if (r->dirty || r->undo_op == pc->op_serial) {
            r->stale = 1;
            pc->rows[k++] = *r;
        } else {
            free(r->path);
        }
    }
    pc->nrows = k;
}

/* FNV-1a of a path: a batch looks each of its rows up among the others. */
static uint32_t path_hash(const char *path)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) h = (h ^ *p) * 16777619u;
    return h;
}

static int row_of(const pg_conn *pc, const char *path)
{
    uint32_t h = path_hash(path);
    for (int i = 0; i < pc->nrows; i++)
        if (pc->rows[i].hash == h && !strcmp(pc->rows[i].path, path)) return i;
    return -1;
}

/* Keep path's row (locked by this transaction) as a statement just found it;
 * held: whether the rows held before that statement. */
static void row_keep(log_conn_t *c, int held, const char *path, const log_info *info, int deleted)
{
    pg_conn *pc = pgc(c);
    if (!held) rows_drop(pc);
    pc->rows_at = pc->nstmts;
    int i = row_of(pc, path);
    if (i < 0) {
        if (pc->nrows == pc->rows_cap) {
            int cap = pc->rows_cap ? 2 * pc->rows_cap : 16;
            pg_row *t = realloc(pc->rows, (size_t)cap * sizeof *t);
            if (!t) return;     /* not kept: looked up again */
            pc->rows = t;
            pc->rows_cap = cap;
        }
        char *copy = strdup(path);
        if (!copy) return;
        i = pc->nrows++;
        memset(&pc->rows[i], 0, sizeof pc->rows[i]);
        pc->rows[i].path = copy;
        pc->rows[i].hash = path_hash(copy);
        pc->rows[i].added_op = pc->op_serial;
    } else {
        undo_take(pc, &pc->rows[i]);
    }
    /* A row read while its tail was kept back cannot be: the UPDATE went before
     * the statement that read it (pg_query.c). */
    pc->rows[i].info = *info;
    pc->rows[i].deleted = deleted;
    pc->rows[i].stale = 0;
}

/* ---- the tails kept back (pg_row.dirty) ------------------------------------------ */

/* The UPDATE of the tails kept back, every stream's in one statement from
 * arrays (pg.h: pg_conn.due_fill); 1 (st filled), or 0 when none is kept back.
 * One stream's by its id: the join with the arrays is planned, for a generic
 * plan, as a hash join over a scan of the whole table while it is small (a
 * runner's commit, whose appends each send the last one's tail, made one scan of
 * every stream row per append). */
static int due_fill(log_conn_t *c, pg_stmt *st, pg_params *p, char **bufs)
{
    pg_conn *pc = pgc(c);
    size_t n = 0;
    for (int i = 0; i < pc->nrows; i++) n += pc->rows[i].dirty != 0;
    if (!n) return 0;
    for (int i = 0; n == 1 && i < pc->nrows; i++) {
        const log_info *in = &pc->rows[i].info;
        if (!pc->rows[i].dirty) continue;
        pg_int(p, (int64_t)in->tail.seq);
        pg_int(p, (int64_t)in->tail.pos);
        pg_int(p, in->closed);
        if (in->stream_seq[0]) pg_text(p, in->stream_seq);
        else pg_null(p);
        pg_int(p, in->access_ms);
        pg_int(p, in->id);
        pg_bytes(p, in->digest, CHAIN_LEN);
        *st = (pg_stmt){"UPDATE streams SET tail_seq = $1, tail_pos = $2, closed = $3, stream_seq = $4,"
                        " access_ms = $5, digest = $7, xid = pg_current_xact_id() WHERE id = $6",
                        p};
        return 1;
    }
    uint64_t *num = malloc(5 * n * sizeof *num);        /* id, seq, pos, closed, access: big-endian */
    const void **elem = malloc(7 * n * sizeof *elem);
    size_t *len = malloc(7 * n * sizeof *len);
    if (!num || !elem || !len) abort();                 /* the rows' tails cannot be left behind */
    size_t k = 0;
    for (int i = 0; i < pc->nrows; i++) {
        const log_info *in = &pc->rows[i].info;
        if (!pc->rows[i].dirty) continue;
        uint64_t v[5] = {(uint64_t)in->id, in->tail.seq, in->tail.pos, (uint64_t)in->closed, (uint64_t)in->access_ms};
        for (int a = 0; a < 5; a++) {
            num[a * n + k] = htobe64(v[a]);
            elem[a * n + k] = &num[a * n + k];
            len[a * n + k] = sizeof num[0];
        }
        elem[5 * n + k] = in->stream_seq;               /* "" for none: NULL in the row */
        len[5 * n + k] = strlen(in->stream_seq);
        elem[6 * n + k] = in->digest;
        len[6 * n + k] = CHAIN_LEN;
        k++;
    }
    bufs[0] = (char *)num;
    for (int a = 0; a < 7; a++) {
        unsigned oid = a < 5 ? PG_INT8_OID : a == 5 ? PG_TEXT_OID : PG_BYTEA_OID;
        if (!(bufs[a + 1] = pg_array(p, oid, n, elem + a * n, len + a * n))) abort();
    }
    free(elem);
    free(len);
    *st = (pg_stmt){"UPDATE streams AS s SET tail_seq = t.ts, tail_pos = t.tp, closed = t.cl::smallint,"
                    " stream_seq = NULLIF(t.ss, ''), access_ms = t.am, digest = t.dg, xid = pg_current_xact_id()"
                    " FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[],"
                    " $7::bytea[]) AS t(id, ts, tp, cl, am, ss, dg) WHERE s.id = t.id",
                    p};
    return 1;
}

/* The tails' UPDATE ran (pg.h: pg_conn.due_done): the rows are the database's. */
static void due_done(log_conn_t *c, int in_op)
{
    pg_conn *pc = pgc(c);
    for (int i = 0; i < pc->nrows; i++) {
        pg_row *r = &pc->rows[i];
        if (!r->dirty) continue;
        /* Inside the operation's savepoint: undone with it, the tail kept back again. */
        if (in_op) undo_take(pc, r);
        r->dirty = 0;
    }
    pc->ndirty = 0;
}

void pg_streams_op_undone(log_conn_t *c, int held)
{
    pg_conn *pc = pgc(c);
    int k = 0;
    pc->ndirty = 0;
    for (int i = 0; i < pc->nrows; i++) {
        pg_row *r = &pc->rows[i];
        if (r->added_op == pc->op_serial) {
            /* Read (and locked) by the operation: its lock may have gone with it;
             * nothing of it is kept back (a row is read after the tails went). */
            free(r->path);
            continue;
        }
        if (r->undo_op == pc->op_serial) {
            r->info = r->undo;
            r->dirty = r->undo_dirty;
            r->stale = r->undo_stale;
            r->deleted = r->undo_deleted;
            r->undo_op = 0;
        }
        pc->ndirty += r->dirty != 0;
        pc->rows[k++] = *r;
    }
    pc->nrows = k;
    /* The database is as it was before the operation, and so are the rows. */
    if (held) pc->rows_at = pc->nstmts;
}

int pg_streams_lock(log_conn_t *c, const char *const *paths, size_t n)
{
    /* The paths go as one text[] literal (every element quoted, " and \ escaped),
     * so that the statement's text never varies. */
    size_t cap = 3;
    for (size_t i = 0; i < n; i++) cap += 2 * strlen(paths[i]) + 3;
    char *arr = malloc(cap);
    if (!arr) return LOG_EIO;
    size_t k = 0;
    arr[k++] = '{';
    for (size_t i = 0; i < n; i++) {
        if (i) arr[k++] = ',';
        arr[k++] = '"';
        for (const char *s = paths[i]; *s; s++) {
            if (*s == '"' || *s == '\\') arr[k++] = '\\';
            arr[k++] = *s;
        }
        arr[k++] = '"';
    }
    arr[k++] = '}';
    arr[k] = '\0';
    pg_params p;
    int rc;
    pg_params_init(&p);
    pg_text(&p, arr);
    /* With the transaction's id (pg_conn.xid): its NOTIFY and COMMIT can then go
     * in one round trip (pg_engine.c). */
    PGresult *r = pg_run(c, "SELECT path, " INFO_COLS ", pg_current_xact_id()::text FROM streams"
                            " WHERE path = ANY($1::text[]) ORDER BY id FOR UPDATE",
                         &p, 0, &rc);
    free(arr);
    if (r && PQntuples(r) > 0 && pgc(c)->in_group) pgc(c)->xid = pg_int_of(r, 0, PQnfields(r) - 1);
    for (int i = 0; r && i < PQntuples(r); i++) {
        log_info info;
        int deleted;
        row_info(r, i, 1, &info, &deleted);
        row_keep(c, i > 0, pg_text_of(r, i, 0), &info, deleted);
    }
    PQclear(r);
    return rc;
}

/* ---- append_many: the messages of many appends in one insert ---------------------- */

/* The messages an append_many's appends made while it ran, each a row of the
 * insert batch_send sends for all of them: its stream, seq, pos and rec (in
 * binary form, big-endian), its bytes (the caller's, alive while append_many
 * runs) and its digest. */
typedef struct msg_batch {
    size_t n, cap;
    uint64_t *num;              /* 4 a row: stream, seq, pos, rec */
    uint8_t *dig;               /* CHAIN_LEN a row */
    const void **data;
    size_t *len;
} msg_batch;

static void batch_free(msg_batch *b)
{
    free(b->num);
    free(b->dig);
    free(b->data);
    free(b->len);
    memset(b, 0, sizeof *b);
}

/* Room for one more row: 0, or LOG_EIO when out of memory. */
static int batch_room(msg_batch *b)
{
    if (b->n < b->cap) return 0;
    size_t cap = b->cap ? 2 * b->cap : 64;
    uint64_t *num = realloc(b->num, 4 * cap * sizeof *num);
    if (num) b->num = num;
    uint8_t *dig = num ? realloc(b->dig, cap * CHAIN_LEN) : NULL;
    if (dig) b->dig = dig;
    const void **data = dig ? realloc(b->data, cap * sizeof *data) : NULL;
    if (data) b->data = data;
    size_t *len = data ? realloc(b->len, cap * sizeof *len) : NULL;
    if (!len) return LOG_EIO;
    b->len = len;
    b->cap = cap;
    return 0;
}

/* The records at info's tail into b (info->tail and info->digest moved on), each
 * message's digest chained from the one before: 0, or LOG_EIO when out of memory
 * (b as it was). */
static int batch_add(msg_batch *b, log_info *info, const logrule_rec *recs, int nrecs)
{
    size_t first = b->n;
    log_info was = *info;
    for (int k = 0; k < nrecs; k++) {
        uint64_t rec = info->tail.seq;
        for (size_t j = 0; j < recs[k].n; j++) {
            if (batch_room(b)) {
                b->n = first;
                *info = was;
                return LOG_EIO;
            }
            size_t i = b->n++;
            const log_msg *m = &recs[k].msgs[j];
            b->num[4 * i] = htobe64((uint64_t)info->id);
            b->num[4 * i + 1] = htobe64(info->tail.seq);
            b->num[4 * i + 2] = htobe64(info->tail.pos);
            b->num[4 * i + 3] = htobe64(rec);
            b->data[i] = m->data;
            b->len[i] = m->len;
            chain_link(info->digest, info->tail, m->data, m->len, info->digest);
            memcpy(b->dig + i * CHAIN_LEN, info->digest, CHAIN_LEN);
            info->tail.seq++;
            info->tail.pos += m->len;
        }
    }
    return 0;
}

/* The columns of b's first n rows as arrays bound to p (arr[0..6 - from): stream,
 * seq, pos, rec, data, digest; from 1: without the stream), for an insert from
 * unnest. 0, or LOG_EIO (what was made in arr: the caller frees it). */
static int batch_arrays(pg_params *p, const msg_batch *b, size_t n, int from, char **arr)
{
    const void **elem = malloc(6 * n * sizeof *elem);
    size_t *len = malloc(6 * n * sizeof *len);
    int rc = LOG_EIO;
    if (!elem || !len) goto out;
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 4; a++) {
            elem[a * n + i] = &b->num[4 * i + a];
            len[a * n + i] = sizeof b->num[0];
        }
        elem[4 * n + i] = b->data[i];
        len[4 * n + i] = b->len[i];
        elem[5 * n + i] = b->dig + i * CHAIN_LEN;
        len[5 * n + i] = CHAIN_LEN;
    }
    for (int a = from; a < 6; a++)
        if (!(arr[a - from] = pg_array(p, a < 4 ? PG_INT8_OID : PG_BYTEA_OID, n, elem + a * n, len + a * n)))
            goto out;
    rc = 0;
out:
    free(elem);
    free(len);
    return rc;
}

/* The insert of every message collected in b (none: nothing), one statement
 * whatever their number and streams; their tails stay kept back, as an append's
 * insert leaves them (pg_flight_kept). 0 or LOG_E*; b is empty after. */
static int batch_send(log_conn_t *c, msg_batch *b)
{
    size_t n = b->n;
    if (!n) return 0;
    b->n = 0;
    char *arr[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    pg_params p;
    int rc, held = rows_held(c);
    pg_params_init(&p);
    if ((rc = batch_arrays(&p, b, n, 0, arr))) goto out;
    pg_stmt st = {"INSERT INTO messages (stream, seq, pos, rec, data, digest)"
                  " SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bytea[],"
                  " $6::bytea[])",
                  &p};
    if ((rc = pg_flight_kept(c, &st, 1))) goto out;
    /* It changed no stream row: the rows hold if they held before it. */
    if (held) pgc(c)->rows_at = pgc(c)->nstmts;
out:
    for (int a = 0; a < 6; a++) free(arr[a]);
    return rc;
}

/* Before a statement of the streams' own while an append_many collects: what it
 * collected goes first, so that no statement sees a tail ahead of its messages. */
static int batch_out(log_conn_t *c)
{
    return pgc(c)->batch ? batch_send(c, pgc(c)->batch) : 0;
}

/* The row of stream id as the group holds it, to which an append's tail may be
 * kept back: the rows hold, it is not stale, and no nested savepoint is open. */
static pg_row *kept_row(log_conn_t *c, int64_t id)
{
    pg_conn *pc = pgc(c);
    if (!rows_held(c) || pc->nested) return NULL;
    for (int i = 0; i < pc->nrows; i++)
        if (pc->rows[i].info.id == id && !pc->rows[i].stale) return &pc->rows[i];
    return NULL;
}

/* The row at path, locked: the kept one while the rows hold, else read (and kept). */
static int lock_path(log_conn_t *c, const char *path, log_info *info, int *deleted)
{
    int held = rows_held(c), i = held ? row_of(pgc(c), path) : -1, d = 0;
    if (i >= 0 && !pgc(c)->rows[i].stale) {
        *info = pgc(c)->rows[i].info;
        if (deleted) *deleted = pgc(c)->rows[i].deleted;
        return 1;
    }
    int rc = batch_out(c);
    if (rc) return rc;
    held = rows_held(c);
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, path);
    rc = get_row(c, "SELECT " INFO_COLS " FROM streams WHERE path = $1 FOR UPDATE", &p, info, &d);
    if (deleted) *deleted = d;
    if (rc == 1) row_keep(c, held, path, info, d);
    else if (rc == 0) rows_still(c, held, 0, NULL);
    return rc;
}

static int by_id(log_conn_t *c, int64_t id, log_info *info, int *deleted)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, id);
    return get_row(c, "SELECT " INFO_COLS " FROM streams WHERE id = $1", &p, info, deleted);
}

/* Run sql with one id parameter. */
static int exec_id(log_conn_t *c, const char *sql, int64_t id)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, id);
    return pg_exec(c, sql, &p);
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

static int digest_at(log_conn_t *c, int64_t id, uint64_t seq, uint8_t out[CHAIN_LEN])
{
    pg_params p;
    int rc;
    pg_params_init(&p);
    pg_int(&p, id);
    pg_int(&p, (int64_t)seq);
    PGresult *r = pg_run(c, "SELECT digest FROM messages WHERE stream = $1 AND seq = $2", &p, 1, &rc);
    if (!r) return rc;
    int found = PQntuples(r) > 0 && PQgetlength(r, 0, 0) == CHAIN_LEN;
    if (found) memcpy(out, PQgetvalue(r, 0, 0), CHAIN_LEN);
    PQclear(r);
    return found;
}

static int pos_at(log_conn_t *c, int64_t id, uint64_t seq, uint64_t *pos)
{
    int rc;
    PGresult *r = msg_at(c, id, seq, &rc);
    if (!r) return rc;
    int found = PQntuples(r) > 0;
    if (found) *pos = (uint64_t)pg_int_at(r, 0, 0);
    PQclear(r);
    return found;
}

/* A read of a stream that is not a fork, outside a transaction (op_read): its
 * row and the first page of its messages from one statement (READ_ONE), which
 * PostgreSQL runs on one snapshot, so that the row's tail and the messages
 * agree as a transaction's would; by_path and scan take them from here. */
/* The last message of a page, which its statement looks up once (an index probe
 * from the page's end) instead of a value on every row: its seq and digest (has 0:
 * none came, the digest is looked up later should the read stop there). */
typedef struct page_end {
    int has;
    uint64_t seq;
    uint8_t digest[CHAIN_LEN];
} page_end;

typedef struct read_pre {
    const char *path;
    PGresult *res;              /* binary: the row (its second column empty), the page */
    int base, nrows, col;       /* its rows [base, base + nrows) are this read's, the
                                 * bytes in column col (READ_MANY's: several reads') */
    int shared;                 /* res is pg_conn.ahead_res: not this read's to clear */
    int row;                    /* the stream row's index in res, or -1: no such stream */
    int has_start;              /* start: the first message's seq and position from lo */
    offset_t start;
    page_end end;               /* the page's last message */
    int used;                   /* the row was handed out (by_path) */
    int scanned;                /* the page was (scan) */
    log_info info;
    int deleted;
    uint64_t lo, budget;        /* the page's first seq asked for, and bytes */
    pg_hist *hist;              /* the process's cache of history (pg_hist.c), or NULL */
    pg_hist_ent *kept;          /* held: its messages [start.seq, kept->hi) come
                                 * before res's rows (READ_CACHED), or NULL */
} read_pre;

static int64_t page_budget(uint64_t budget)
{
    /* At least 1: a read delivers at least one message. */
    return budget > READ_BYTES ? READ_BYTES : budget ? (int64_t)budget : 1;
}

/* The messages of one page in res, each to fn from *lo on (moved on, and *budget
 * down); *rows: how many. Row 0 is the page's head (READ_ONE's stream row, or
 * scan's own), which the caller read: the first message's seq and position
 * (start) and the page's last message (end); each row after it is a message, its
 * bytes alone (binary, one column: PostgreSQL's Append returns the branches of a
 * UNION ALL in order, each in its own). The others' offsets follow from the
 * first (a stream's messages are numbered without gaps from the first one still
 * kept, and lie end to end). The read needs only the digest of the last message
 * it delivers, which is the page's last one where the read stops inside the page
 * (the statement fetches no message at or past the budget, lim: the first one's
 * position and the page's budget): the message that reaches lim carries its
 * digest after its bytes (the statement appends it to that row alone, where
 * position + length >= lim: a row of another message is shorter than that, since
 * it ends before lim), and a page that ends before the budget has its last
 * message's in the head (end); the others get LOGRULE_DIGEST_LATER (looked up
 * once, should a caller stop elsewhere). Every value a row carries costs the server its
 * evaluation and a send function, and libpq a field: a CASE choosing whether to
 * send a digest on each of 1,000 rows was 15 % of a PostgreSQL backend's
 * instructions per catch-up read, the NULL column that marked a message row 4 %
 * and 18 % of libpq's (bench/RESULTS.md). A page after the first one of a read
 * starts where the last one ended, or the read stops there (returns 1): outside
 * a transaction (READ_ONE's reads) a stream deleted or swept between two pages
 * would otherwise skip the messages gone. */
static int page_rows(PGresult *res, int base, int n, int col, int first, const offset_t *start,
                     const page_end *end, uint64_t lim, uint64_t *lo, uint64_t *budget, int *rows,
                     int (*fn)(void *ud, const void *data, size_t len, offset_t at, const uint8_t *digest),
                     void *ud)
{
    offset_t at = *start;
    *rows = 0;
    if (n > 1 && !first && at.seq != *lo) return 1;
    for (int k = 1; k < n; k++) {
        int i = base + k;
        size_t len = (size_t)PQgetlength(res, i, col);
        const char *data = PQgetvalue(res, i, col);
        const uint8_t *d = k == n - 1 && end->has && end->seq == at.seq ? end->digest : LOGRULE_DIGEST_LATER;
        /* The message that reaches the budget has its digest after its bytes:
         * only its own length, not one of another row, reaches lim so. */
        if (len >= CHAIN_LEN && at.pos + (len - CHAIN_LEN) >= lim) {
            len -= CHAIN_LEN;
            d = (const uint8_t *)data + len;
        }
        int stop = fn(ud, data, len, at, d);
        if (stop) return stop;
        at.seq++;
        at.pos += len;
        *lo = at.seq;
        *budget = *budget > len ? *budget - len : 0;
        ++*rows;
    }
    return 0;
}

/* The messages of the process's cache a read takes first (READ_CACHED): e's from
 * at on, to fn as page_rows gives them (the last one with its digest); *rows:
 * how many. */
static int kept_rows(const pg_hist_ent *e, offset_t *at, uint64_t *lo, uint64_t *budget, int *rows,
                     int (*fn)(void *ud, const void *data, size_t len, offset_t at, const uint8_t *digest),
                     void *ud)
{
    *rows = 0;
    for (; at->seq < e->hi; at->seq++) {
        size_t k = (size_t)(at->seq - e->lo), len = e->off[k + 1] - e->off[k];
        int stop = fn(ud, e->data + e->off[k], len, *at, at->seq == e->hi - 1 ? e->digest : LOGRULE_DIGEST_LATER);
        if (stop) return stop;
        at->pos += len;
        *lo = at->seq + 1;
        *budget = *budget > len ? *budget - len : 0;
        ++*rows;
    }
    return 0;
}

static uint64_t be64_at(const unsigned char *b)
{
    uint64_t v;
    memcpy(&v, b, sizeof v);
    return be64toh(v);
}

/* The head of scan's page in res (row 0): the first message's seq and position,
 * then the last one's seq and digest (int8send's big-endian bytes, and the
 * digest's), or none of them: 1 found, 0 none (no row: no message from lo on),
 * LOG_EIO malformed. */
static int page_head(PGresult *res, offset_t *start, page_end *end)
{
    if (PQntuples(res) == 0) return 0;
    const unsigned char *b = (const unsigned char *)PQgetvalue(res, 0, 0);
    int len = PQgetlength(res, 0, 0);
    if (len != 16 && len != 24 + CHAIN_LEN) return LOG_EIO;
    start->seq = be64_at(b);
    start->pos = be64_at(b + 8);
    memset(end, 0, sizeof *end);
    if (len > 16) {
        end->has = 1;
        end->seq = be64_at(b + 16);
        memcpy(end->digest, b + 24, CHAIN_LEN);
    }
    return 1;
}

/* Messages [lo, hi) of stream id, as many as the read takes in one statement
 * when they fit in a page: at most READ_PAGE rows looked at, and no more bytes
 * than budget (at most READ_BYTES) past the first one's position (messages of a
 * stream lie end to end, so a message at or past it would not be delivered: the
 * budget is spent before it). A longer read takes a statement per page. The
 * first page may have come with the stream's row (read_pre). The statement's
 * LIMIT (the page's size, which its seq range implies) has the generic plan of
 * the prepared statement walk the primary key in order (a LIMIT of unknown size
 * is planned as a tenth of the rows) where it would otherwise take a bitmap scan
 * and sort the page: about a fifth of PostgreSQL's CPU per 1,000-message read. */
static int scan(log_conn_t *c, int64_t id, uint64_t lo, uint64_t hi, uint64_t budget,
                int (*fn)(void *ud, const void *data, size_t len, offset_t at, const uint8_t *digest), void *ud)
{
    read_pre *pre = pgc(c)->read_pre;
    int first = 1, rows, rc;
    if (pre && pre->res && !pre->scanned && id == pre->info.id && lo == pre->lo && hi == pre->info.tail.seq &&
        page_budget(budget) == (int64_t)pre->budget) {
        pre->scanned = 1;
        if (!pre->has_start) return 0;      /* no message from lo on */
        offset_t at = pre->start;
        int kept = 0;
        if (pre->kept && (rc = kept_rows(pre->kept, &at, &lo, &budget, &kept, fn, ud))) return rc;
        if ((rc = page_rows(pre->res, pre->base, pre->nrows, pre->col, !kept, &at, &pre->end,
                            pre->start.pos + pre->budget, &lo, &budget, &rows, fn, ud)))
            return rc;
        if (rows + kept == 0) return 0;
        first = 0;
    }
    while (lo < hi) {
        pg_params p;
        uint64_t end = hi - lo > READ_PAGE ? lo + READ_PAGE : hi;
        offset_t start;
        page_end last;
        pg_params_init(&p);
        pg_int(&p, id);
        pg_int(&p, (int64_t)lo);
        pg_int(&p, (int64_t)end);
        int64_t pb = page_budget(budget);
        pg_int(&p, pb);
        pg_int(&p, (int64_t)(end - lo));
        /* The head (the first message's seq and position, the last one's seq
         * and digest), then the messages' rows. */
        PGresult *res = pg_run(c,
                               "WITH f AS (SELECT seq, pos, pos + $4 AS lim FROM messages"
                               "  WHERE stream = $1 AND seq >= $2 ORDER BY seq LIMIT 1),"
                               " l AS (SELECT seq, digest FROM (SELECT seq, pos, digest FROM messages"
                               "  WHERE stream = $1 AND seq >= $2 AND seq < $3 ORDER BY seq DESC LIMIT 1) e"
                               "  WHERE pos < (SELECT lim FROM f))"
                               " SELECT int8send(seq) || int8send(pos)"
                               "  || coalesce(int8send((SELECT seq FROM l)) || (SELECT digest FROM l), ''::bytea)"
                               " FROM f"
                               " UNION ALL (SELECT CASE WHEN pos + length(data) >= (SELECT lim FROM f)"
                               "  THEN data || digest ELSE data END FROM messages WHERE stream = $1 AND seq >= $2"
                               "  AND seq < $3 AND pos < (SELECT lim FROM f) ORDER BY seq LIMIT $5)",
                               &p, 1, &rc);
        if (!res) return rc;
        rc = page_head(res, &start, &last);
        if (rc == 1)
            rc = page_rows(res, 0, PQntuples(res), 0, first, &start, &last, start.pos + (uint64_t)pb, &lo, &budget,
                           &rows, fn, ud);
        else if (rc == 0) rows = 0;
        PQclear(res);
        if (rc) return rc;
        if (rows == 0) break;
        first = 0;
    }
    return 0;
}

/* The row kept for info's stream (row) moved to info's new tail (with access_ms
 * now) after its messages' insert went or joined a batch: its tail kept back, to
 * go once for the group (due_fill) or before the next statement of anything else. */
static void kept_moved(log_conn_t *c, pg_row *row, const log_info *info, int64_t now)
{
    pg_conn *pc = pgc(c);
    pc->due_fill = due_fill;
    pc->due_done = due_done;
    pg_changed_kept(c, info->id);
    undo_take(pc, row);
    row->info = *info;
    row->info.access_ms = now;
    if (!row->dirty) pc->ndirty++;
    row->dirty = 1;
}

/* The records at info's tail (info->tail moved on), and the stream's row moved
 * to the new tail: the insert of one message by its values, of more from arrays
 * (one statement however many), then the row's update, in one round trip
 * (pg_flight); when the row is one the group holds, the insert alone
 * (pg_flight_kept) and the tail kept back with the row (the essay above). */
static int write_recs(log_conn_t *c, log_info *info, const logrule_rec *recs, int nrecs, int64_t now)
{
    size_t n = 0;
    for (int k = 0; k < nrecs; k++) n += recs[k].n;
    if (pgc(c)->batch) {
        /* An append_many's append: its messages join the batch's insert. */
        pg_row *row = n ? kept_row(c, info->id) : NULL;
        if (row) {
            int rc = batch_add(pgc(c)->batch, info, recs, nrecs);
            if (rc == 0) kept_moved(c, row, info, now);
            return rc;
        }
        int rc = batch_out(c);
        if (rc) return rc;
    }
    char *arr[5] = {NULL, NULL, NULL, NULL, NULL};
    uint8_t one[CHAIN_LEN];
    pg_params ins, tail;
    pg_stmt st[2];
    int rc = 0, nst = 0;
    pg_params_init(&ins);
    pg_int(&ins, info->id);
    if (n == 1) {
        const log_msg *m = NULL;
        for (int k = 0; k < nrecs && !m; k++)
            if (recs[k].n) m = recs[k].msgs;
        pg_int(&ins, (int64_t)info->tail.seq);
        pg_int(&ins, (int64_t)info->tail.pos);
        pg_int(&ins, (int64_t)info->tail.seq);
        pg_bytes(&ins, m->data, m->len);
        chain_link(info->digest, info->tail, m->data, m->len, info->digest);
        memcpy(one, info->digest, CHAIN_LEN);
        pg_bytes(&ins, one, CHAIN_LEN);
        info->tail.seq++;
        info->tail.pos += m->len;
        st[nst++] = (pg_stmt){"INSERT INTO messages (stream, seq, pos, rec, data, digest) VALUES ($1, $2, $3, $4, $5, $6)",
                              &ins};
    } else if (n > 1) {
        msg_batch mb;
        memset(&mb, 0, sizeof mb);
        rc = batch_add(&mb, info, recs, nrecs);
        if (rc == 0) rc = batch_arrays(&ins, &mb, n, 1, arr);
        batch_free(&mb);
        if (rc) goto out;
        st[nst++] = (pg_stmt){"INSERT INTO messages (stream, seq, pos, rec, data, digest)"
                              " SELECT $1, s, p, r, d, h FROM unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::bytea[],"
                              " $6::bytea[]) AS t(s, p, r, d, h)",
                              &ins};
    }
    pg_params_init(&tail);
    pg_int(&tail, (int64_t)info->tail.seq);
    pg_int(&tail, (int64_t)info->tail.pos);
    pg_int(&tail, info->closed);
    if (info->stream_seq[0]) pg_text(&tail, info->stream_seq);
    else pg_null(&tail);
    pg_int(&tail, now);
    pg_int(&tail, info->id);
    pg_bytes(&tail, info->digest, CHAIN_LEN);
    st[nst] = (pg_stmt){"UPDATE streams SET tail_seq = $1, tail_pos = $2, closed = $3, stream_seq = $4,"
                        " access_ms = $5, digest = $7, xid = pg_current_xact_id() WHERE id = $6",
                        &tail};
    int held = rows_held(c);
    log_info now_info = *info;
    now_info.access_ms = now;
    pg_conn *pc = pgc(c);
    pg_row *kept = NULL;
    for (int i = 0; held && !pc->nested && nst && i < pc->nrows && !kept; i++)
        if (pc->rows[i].info.id == info->id && !pc->rows[i].stale) kept = &pc->rows[i];
    if (kept) {
        /* Its row is held as the group has it: the tail is kept back, and goes
         * once for the group (or before the next statement of anything else). */
        pc->due_fill = due_fill;
        pc->due_done = due_done;
        if ((rc = pg_flight_kept(c, st, nst))) goto out;
        kept_moved(c, kept, info, now);
        pc->rows_at = pc->nstmts;
        goto out;
    }
    if ((rc = pg_flight(c, st, nst + 1))) goto out;
    pg_changed(c, info->id);
    rows_still(c, held, info->id, &now_info);
out:
    for (int a = 0; a < 5; a++) free(arr[a]);
    return rc;
}

static int producer_get(log_conn_t *c, int64_t id, const char *producer, int64_t *epoch, int64_t *seq)
{
    pg_params p;
    int rc, held = rows_held(c);
    pg_params_init(&p);
    pg_int(&p, id);
    pg_text(&p, producer);
    PGresult *res = pg_run(c, "SELECT epoch, seq FROM producers WHERE stream = $1 AND producer = $2", &p, 0, &rc);
    if (!res) return rc;
    rows_still(c, held, 0, NULL);
    int found = PQntuples(res) > 0;
    if (found) {
        *epoch = pg_int_of(res, 0, 0);
        *seq = pg_int_of(res, 0, 1);
    }
    PQclear(res);
    return found;
}

static int producer_put(log_conn_t *c, int64_t id, const char *producer, int64_t epoch, int64_t seq)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, id);
    pg_text(&p, producer);
    pg_int(&p, epoch);
    pg_int(&p, seq);
    int held = rows_held(c);
    int rc = pg_exec(c, "INSERT INTO producers (stream, producer, epoch, seq) VALUES ($1, $2, $3, $4)"
                        " ON CONFLICT (stream, producer) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq",
                     &p);
    if (!rc) rows_still(c, held, 0, NULL);
    return rc;
}

/* The ids (the first column) of sql's rows (parameters p), at most max. */
static int ids_of(log_conn_t *c, const char *sql, pg_params *p, int64_t *ids, int max)
{
    int rc, n = 0;
    PGresult *r = pg_run(c, sql, p, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r) && n < max; i++) ids[n++] = pg_int_of(r, i, 0);
    PQclear(r);
    return n;
}

static int children(log_conn_t *c, int64_t id, int64_t *ids, int max)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, id);
    pg_int(&p, max);
    return ids_of(c, "SELECT id FROM streams WHERE parent = $1 AND deleted = 0 LIMIT $2", &p, ids, max);
}

static int forks_add(log_conn_t *c, int64_t id, int delta)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, delta);
    pg_int(&p, id);
    return pg_exec(c, "UPDATE streams SET forks = forks + $1 WHERE id = $2", &p);
}

static int drop(log_conn_t *c, int64_t id)
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

static int mark_deleted(log_conn_t *c, int64_t id)
{
    int rc = exec_id(c, "UPDATE streams SET deleted = 1, xid = pg_current_xact_id() WHERE id = $1", id);
    if (!rc) pg_changed(c, id);
    return rc;
}

static int expired(log_conn_t *c, int64_t now_ms, int max, int64_t *ids)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, now_ms);
    pg_int(&p, max);
    /* Rows another host is sweeping (or writing) now are left to it. */
    return ids_of(c,
                  "SELECT id FROM streams WHERE deleted = 0 AND"
                  " ((ttl_s IS NOT NULL AND access_ms + ttl_s * 1000 <= $1) OR"
                  "  (expires_ms IS NOT NULL AND expires_ms <= $1))"
                  " ORDER BY id DESC LIMIT $2 FOR UPDATE SKIP LOCKED",
                  &p, ids, max);
}

static int64_t drop_messages(log_conn_t *c, int64_t id, int64_t max)
{
    pg_params p;
    int rc;
    pg_params_init(&p);
    pg_int(&p, id);
    pg_int(&p, max);
    PGresult *r = pg_run(c,
                         "DELETE FROM messages WHERE stream = $1 AND"
                         " seq < (SELECT min(seq) FROM messages WHERE stream = $1) + $2",
                         &p, 0, &rc);
    if (!r) return rc;
    int64_t gone = pg_affected(r);
    PQclear(r);
    return gone;
}

static const logrule_rows rows = {
    .by_path = by_path, .by_id = by_id, .lock_path = lock_path, .pos_at = pos_at, .scan = scan,
    .digest_at = digest_at,
    .write = write_recs,
    .producer_get = producer_get, .producer_put = producer_put,
    .children = children, .forks_add = forks_add, .drop = drop, .mark_deleted = mark_deleted,
    .expired = expired, .drop_messages = drop_messages,
};

/* ---- create ------------------------------------------------------------------- */

static void *dup_bytes(const void *p, size_t n)
{
    void *copy = malloc(n ? n : 1);
    if (!copy) abort();
    if (n) memcpy(copy, p, n);
    return copy;
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
    const log_info *o = logrule_owner(chain, n, anchor.seq);
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

/* Insert the stream row; 1 inserted, 0 when another transaction made the path
 * meanwhile (committed: look again), or LOG_E*. */
static int insert_stream(log_conn_t *c, const log_create_req *r, const char *ct, int64_t ttl, int64_t expires,
                         offset_t fork, int64_t parent, const uint8_t start[CHAIN_LEN], int64_t now)
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
    pg_bytes(&p, start, CHAIN_LEN);
    int rc;
    PGresult *res = pg_run(c,
                           "INSERT INTO streams (path, content_type, json, created_ms, access_ms, ttl_s,"
                           " expires_ms, closed, tail_seq, tail_pos, parent, fork_seq, fork_pos, fork_sub, digest)"
                           " VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $10, $8, $9, $11, $12)"
                           " ON CONFLICT (path) DO NOTHING RETURNING id",
                           &p, 0, &rc);
    if (!res) return rc;
    rc = PQntuples(res) > 0;
    /* A new stream is a change too (a runner learns of a new session by it). */
    if (rc) pg_changed(c, pg_int_of(res, 0, 0));
    PQclear(res);
    return rc;
}

static int op_create(log_conn_t *c, log_create_req *r)
{
    log_info chain[LOGRULE_CHAIN_MAX];
    int rc, n = 0, tries = 0;
    int64_t now = timefmt_now_ms();
    log_msg *prefix = NULL;
    size_t nprefix = 0;
    const char *ct;
    int64_t ttl, expires;
    offset_t fork;
    uint8_t start[CHAIN_LEN];   /* the chain's start: a fork's parent's digest at the fork point */

again:
    ct = r->content_type;
    ttl = r->ttl_s;
    expires = r->expires_ms;
    fork = (offset_t){0, 0};
    memset(start, 0, sizeof start);
    n = 0;
    if ((rc = logrule_create_begin(c, &rows, r, chain))) return rc < 0 ? rc : 0;
    if (r->fork_from) {
        if ((rc = logrule_fork(c, &rows, r, chain, &n, &ct, &ttl, &expires, &fork))) return rc;
        if ((rc = logrule_digest_at(c, &rows, chain, n, fork.seq, start))) return rc;
        if ((rc = fork_prefix(c, chain, n, fork, r->fork_sub, chain[0].json, &prefix, &nprefix))) return rc;
    }
    if (!ct) ct = "application/octet-stream";

    rc = insert_stream(c, r, ct, ttl, expires, fork, r->fork_from ? chain[0].id : 0, start, now);
    if (rc == 0) {
        /* Made by another transaction meanwhile: answer as if it had come first. */
        logrule_free_msgs(prefix, nprefix);
        prefix = NULL;
        nprefix = 0;
        if (++tries < 3) goto again;
        return LOG_EBUSY;
    }
    if (rc < 0) goto out;
    if (r->fork_from && (rc = forks_add(c, chain[0].id, 1))) goto out;
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

/* The appends r[0..n) (store.h: append_many): their streams' rows locked in one
 * statement, in id order (pg_streams_lock: every host's batches take them in the
 * same order), then each append as op_append makes it, the rows kept answering its
 * look-up and checks without a statement; the messages of those whose row is kept
 * are collected (pg_conn.batch) and inserted with one statement at the end
 * (batch_send), their tails kept back and moved with one UPDATE before the next
 * statement (due_fill). An append that needs a statement of its own (a producer's,
 * a close without messages, a row the lock did not find) has what was collected
 * sent first. Inside a nested savepoint, where no tail is kept back, one by one. */
static int op_append_many(log_conn_t *c, log_append_req *r, size_t n, size_t *failed)
{
    pg_conn *pc = pgc(c);
    msg_batch b;
    int rc = 0;
    memset(&b, 0, sizeof b);
    *failed = 0;
    if (!pc->nested) {
        const char **paths = calloc(n ? n : 1, sizeof *paths);
        if (!paths) return LOG_EIO;
        for (size_t i = 0; i < n; i++) paths[i] = r[i].path;
        rc = pg_streams_lock(c, paths, n);
        free(paths);
        if (rc) return rc;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        int k = r[i].nmsgs && !r[i].producer && rows_held(c) ? row_of(pc, r[i].path) : -1;
        pc->batch = k >= 0 && kept_row(c, pc->rows[k].info.id) ? &b : NULL;
        if (!pc->batch) rc = batch_send(c, &b);
        if (!rc) rc = logrule_append(c, &rows, &r[i]);
        pc->batch = NULL;
        if (rc) *failed = i;
    }
    /* What was made before a failure goes too: the caller's operation fails and
     * undoes it, but until then the transaction holds what the rows say. */
    int sent = batch_send(c, &b);
    batch_free(&b);
    return rc ? rc : sent;
}

static int op_delete(log_conn_t *c, const char *path, int *answer)
{
    return logrule_delete(c, &rows, path, answer);
}

static int op_touch(log_conn_t *c, int64_t id)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, timefmt_now_ms());
    pg_int(&p, id);
    return pg_exec(c, "UPDATE streams SET access_ms = $1 WHERE id = $2", &p);
}

static int op_sweep(log_conn_t *c, log_sweep_batch *b)
{
    return logrule_sweep(c, &rows, b);
}

static int op_head(log_conn_t *c, const char *path, log_info *info)
{
    return logrule_head(c, &rows, path, info);
}

#define READ_BEGIN "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

/* A read's transaction: its BEGIN goes with its first statement, in one round
 * trip (pg_run); read_end ends it, whatever became of it. */
static void read_begin(log_conn_t *c)
{
    pgc(c)->begin_due = READ_BEGIN;
}

static void read_end(log_conn_t *c)
{
    pgc(c)->begin_due = NULL;
    if (pgc(c)->in_tx) pg_simple(c, "COMMIT");
}

static int op_digest_at(log_conn_t *c, const char *path, uint64_t seq, uint8_t out[CHAIN_LEN])
{
    int own_tx = !pg_in_tx(c);
    if (own_tx) read_begin(c);
    int rc = logrule_digest(c, &rows, path, seq, out);
    if (own_tx) read_end(c);
    return rc;
}

/* The stream row at $1 (its INFO_COLS as text in an array, in binary form, then
 * the seq and position of its first message from seq $2, and the seq and digest
 * of the page's last one: four values) and, after it, the first page of its
 * messages from there (at most $4 of them, $3 bytes: scan's page), each row a
 * message's bytes alone, in one statement: one snapshot, one round trip. The
 * digest where the page stops comes without a value or a CASE on every row: the
 * page's last message when the budget does not stop it, from one probe of the
 * primary key at the page's end (l: one row, kept if it is within the budget);
 * the message that reaches the budget has its digest after its bytes, from a
 * CASE in the branch that runs only when the budget ends before the tail (a
 * catch-up that fits takes the other: each branch's condition on f is a one-time
 * filter, evaluated once, and that branch tests no message's position either).
 * The messages need no upper bound of seq: in one snapshot a stream that is no
 * fork has none past its tail (an append moves the tail in its transaction), and
 * the LIMIT ends the page. The backend's instructions per 1,000-message read
 * 0.77x, libpq's 0.82x (bench/RESULTS.md). None for a fork (its ancestors' part
 * is read in a transaction) nor a deleted stream. */
#define READ_ONE                                                                                              \
    "WITH s AS (SELECT " INFO_COLS " FROM streams WHERE path = $1),"                                          \
    " f AS (SELECT seq, pos, pos + $3 AS lim FROM messages WHERE stream = (SELECT id FROM s) AND seq >= $2"   \
    "  ORDER BY seq LIMIT 1),"                                                                                \
    " l AS (SELECT seq, digest FROM (SELECT seq, pos, digest FROM messages WHERE stream = (SELECT id FROM s"  \
    "  WHERE parent IS NULL AND deleted = 0) AND seq >= $2"                                                   \
    "  AND seq < least((SELECT tail_seq FROM s), (SELECT seq FROM f) + $4) ORDER BY seq DESC LIMIT 1) e"      \
    "  WHERE pos < (SELECT lim FROM f))"                                                                      \
    " SELECT array_send(ARRAY[id::text, content_type, json::text, created_ms::text, access_ms::text,"         \
    "  ttl_s::text, expires_ms::text, closed::text, tail_seq::text, tail_pos::text, stream_seq,"              \
    "  parent::text, fork_seq::text, fork_pos::text, forks::text, deleted::text, fork_sub::text,"             \
    "  '\\x' || encode(digest, 'hex'), (SELECT seq FROM f)::text, (SELECT pos FROM f)::text,"                 \
    "  (SELECT seq FROM l)::text, '\\x' || encode((SELECT digest FROM l), 'hex')]) FROM s"                    \
    " UNION ALL (SELECT data FROM messages WHERE (SELECT lim > (SELECT tail_pos FROM s) FROM f)"              \
    "  AND stream = (SELECT id FROM s WHERE parent IS NULL AND deleted = 0) AND seq >= $2"                    \
    "  ORDER BY seq LIMIT $4)"                                                                                \
    " UNION ALL (SELECT CASE WHEN pos + length(data) >= (SELECT lim FROM f) THEN data || digest ELSE data END" \
    "  FROM messages WHERE (SELECT lim <= (SELECT tail_pos FROM s) FROM f)"                                  \
    "  AND stream = (SELECT id FROM s WHERE parent IS NULL AND deleted = 0) AND seq >= $2"                    \
    "  AND pos < (SELECT lim FROM f) ORDER BY seq LIMIT $4)"
#define READ_ONE_VALUES (INFO_NCOLS + 4)

/* READ_ONE for a read whose stream's messages [lo, $5) the process has (pg_hist.c:
 * stream $6, the digest $7 its message $5 - 1's): the stream row, the first
 * message from $2 as READ_ONE's, then whether the history kept is still the
 * stream's (k: the row is $6's, not a fork nor deleted, and its message $5 - 1
 * has digest $7, which chains every one before it) as a fifth value ("1", or
 * none), and only then, the messages from $5 on as READ_ONE's from $2 (the
 * budget's limit still from the first message: the kept ones come first). */
#define READ_CACHED                                                                                           \
    "WITH s AS (SELECT " INFO_COLS " FROM streams WHERE path = $1),"                                          \
    " f AS (SELECT seq, pos, pos + $3 AS lim FROM messages WHERE stream = (SELECT id FROM s) AND seq >= $2"   \
    "  ORDER BY seq LIMIT 1),"                                                                                \
    " k AS (SELECT 1 AS ok FROM messages WHERE stream = $6::bigint AND seq = $5::bigint - 1"                  \
    "  AND digest = $7::bytea AND $6::bigint = (SELECT id FROM s WHERE parent IS NULL AND deleted = 0)),"     \
    " l AS (SELECT seq, digest FROM (SELECT seq, pos, digest FROM messages WHERE (SELECT ok FROM k) = 1"      \
    "  AND stream = $6::bigint AND seq >= $5::bigint AND seq < least((SELECT tail_seq FROM s), $5::bigint + $4)" \
    "  ORDER BY seq DESC LIMIT 1) e WHERE pos < (SELECT lim FROM f))"                                         \
    " SELECT array_send(ARRAY[id::text, content_type, json::text, created_ms::text, access_ms::text,"         \
    "  ttl_s::text, expires_ms::text, closed::text, tail_seq::text, tail_pos::text, stream_seq,"              \
    "  parent::text, fork_seq::text, fork_pos::text, forks::text, deleted::text, fork_sub::text,"             \
    "  '\\x' || encode(digest, 'hex'), (SELECT seq FROM f)::text, (SELECT pos FROM f)::text,"                 \
    "  (SELECT seq FROM l)::text, '\\x' || encode((SELECT digest FROM l), 'hex'), (SELECT ok FROM k)::text])"  \
    " FROM s"                                                                                                 \
    " UNION ALL (SELECT data FROM messages WHERE (SELECT lim > (SELECT tail_pos FROM s) FROM f)"              \
    "  AND (SELECT ok FROM k) = 1 AND stream = $6::bigint AND seq >= $5::bigint ORDER BY seq LIMIT $4)"       \
    " UNION ALL (SELECT CASE WHEN pos + length(data) >= (SELECT lim FROM f) THEN data || digest ELSE data END" \
    "  FROM messages WHERE (SELECT lim <= (SELECT tail_pos FROM s) FROM f)"                                  \
    "  AND (SELECT ok FROM k) = 1 AND stream = $6::bigint AND seq >= $5::bigint"                              \
    "  AND pos < (SELECT lim FROM f) ORDER BY seq LIMIT $4)"
#define READ_CACHED_VALUES (READ_ONE_VALUES + 1)

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* The stream row from READ_ONE's array (array_send's form: dimensions, flags,
 * element type, the dimension's size and lower bound, then each element's length,
 * -1 for NULL, and bytes) into pre: 0, or LOG_EIO if it is not nvals values
 * (READ_ONE_VALUES, or READ_CACHED_VALUES: then *ok, its last). */
static int row_array(const unsigned char *b, size_t len, int nvals, read_pre *pre, int *ok)
{
    const char *v[READ_CACHED_VALUES];
    int rc = LOG_EIO;
    char *buf = NULL, *o;
    if (len < 20 || be32(b) != 1 || be32(b + 12) != (uint32_t)nvals || nvals > READ_CACHED_VALUES) goto out;
    if (!(buf = malloc(len + (size_t)nvals))) goto out;
    o = buf;
    size_t at = 20;
    for (int i = 0; i < nvals; i++) {
        if (len - at < 4) goto out;
        uint32_t n = be32(b + at);
        at += 4;
        if (n == 0xffffffffu) {
            v[i] = NULL;
            continue;
        }
        if (n > len - at) goto out;
        memcpy(o, b + at, n);
        o[n] = 0;
        v[i] = o;
        o += n + 1;
        at += n;
    }
    row_fill(v, &pre->info, &pre->deleted);
    pre->has_start = v[INFO_NCOLS] && v[INFO_NCOLS + 1];
    if (pre->has_start)
        pre->start = (offset_t){(uint64_t)num_of(v[INFO_NCOLS]), (uint64_t)num_of(v[INFO_NCOLS + 1])};
    /* The page's last message: its digest as "\\x" and hex (none: looked up later). */
    const char *d = v[INFO_NCOLS + 3];
    memset(&pre->end, 0, sizeof pre->end);
    if (v[INFO_NCOLS + 2] && d && d[0] == '\\' && d[1] == 'x' && strlen(d + 2) == CHAIN_HEX &&
        chain_parse(d + 2, CHAIN_HEX, pre->end.digest) == 0) {
        pre->end.has = 1;
        pre->end.seq = (uint64_t)num_of(v[INFO_NCOLS + 2]);
    }
    if (ok) *ok = nvals == READ_CACHED_VALUES && v[READ_ONE_VALUES] && !strcmp(v[READ_ONE_VALUES], "1");
    rc = 0;
out:
    free(buf);
    return rc;
}

/* The page a read's scan asks for first: from its offset (now: the tail, no
 * message; an offset past any tail: none, refused by the read). */
static uint64_t read_lo(const log_read_req *r)
{
    uint64_t lo = r->kind == OFFSET_AT ? r->from.seq : r->kind == OFFSET_START ? 0 : (uint64_t)INT64_MAX / 2;
    return lo > (uint64_t)INT64_MAX / 2 ? (uint64_t)INT64_MAX / 2 : lo;
}

/* The first pages of many reads in one statement (op_read_ahead): for each read
 * i of the arrays (paths $1, first seqs $2, budgets $3) whose stream exists, is no
 * fork, and has what is left from its first seq within the budget and one page
 * ($4 messages) of it, the head READ_ONE's stream row would be (seq -1), then its
 * messages to the tail, in order; rows (i, seq, bytes). Where what is left is more
 * than that, or the stream is missing, deleted or a fork, nothing: that read runs
 * READ_ONE itself. The last message's digest is the stream's (its tail's: every
 * append sets it so, a close leaves it). */
#define READ_MANY                                                                                               \
    "WITH s AS (SELECT q.i, q.lo, st.*, f.seq AS f_seq, f.pos AS f_pos"                                         \
    "  FROM unnest($1::text[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS q(path, lo, budget, i)"          \
    "  CROSS JOIN LATERAL (SELECT " INFO_COLS " FROM streams WHERE path = q.path AND parent IS NULL"             \
    "   AND deleted = 0 OFFSET 0) st"                                                                           \
    "  LEFT JOIN LATERAL (SELECT seq, pos FROM messages WHERE stream = st.id AND seq >= q.lo"                  \
    "   ORDER BY seq LIMIT 1) f ON true"                                                                        \
    "  WHERE f.seq IS NULL OR (f.pos + q.budget > st.tail_pos AND st.tail_seq - f.seq <= $4))"                  \
    " SELECT i, -1::bigint, array_send(ARRAY[id::text, content_type, json::text, created_ms::text,"             \
    "  access_ms::text, ttl_s::text, expires_ms::text, closed::text, tail_seq::text, tail_pos::text,"           \
    "  stream_seq, parent::text, fork_seq::text, fork_pos::text, forks::text, deleted::text, fork_sub::text,"   \
    "  '\\x' || encode(digest, 'hex'), f_seq::text, f_pos::text, (tail_seq - 1)::text,"                      \
    "  CASE WHEN f_seq IS NOT NULL THEN '\\x' || encode(digest, 'hex') END]) FROM s"                          \
    " UNION ALL SELECT s.i, m.seq, m.data FROM s JOIN messages m ON s.f_seq IS NOT NULL AND m.stream = s.id"     \
    "  AND m.seq >= s.lo AND m.seq < s.tail_seq"                                                                \
    " ORDER BY 1, 2"

/* The rows fetched ahead for this read (taken), or NULL. */
static const struct pg_ahead *ahead_take(pg_conn *c, const char *path, uint64_t lo, uint64_t budget)
{
    for (int i = 0; i < c->nahead; i++) {
        struct pg_ahead *a = &c->ahead[i];
        if (!a->taken && a->lo == lo && a->budget == budget && !strcmp(a->path, path)) {
            a->taken = 1;
            return a;
        }
    }
    return NULL;
}

/* The rows of READ_MANY's result res for its reads r[0..n): each read's slice
 * noted in c->ahead. 0, or LOG_EIO when the rows are not as READ_MANY makes them. */
static int ahead_slices(pg_conn *c, PGresult *res, const log_read_req *r, size_t n)
{
    int nres = PQntuples(res);
    if (PQnfields(res) != 3) return LOG_EIO;
    for (int k = 0; k < nres;) {
        if (PQgetlength(res, k, 0) != 8 || PQgetlength(res, k, 1) != 8) return LOG_EIO;
        int64_t i = (int64_t)be64_at((const unsigned char *)PQgetvalue(res, k, 0));
        int64_t seq = (int64_t)be64_at((const unsigned char *)PQgetvalue(res, k, 1));
        if (seq != -1 || i < 1 || (uint64_t)i > n) return LOG_EIO;  /* a head first */
        int end = k + 1;
        while (end < nres && PQgetlength(res, end, 1) == 8 &&
               be64_at((const unsigned char *)PQgetvalue(res, end, 1)) != (uint64_t)-1 &&
               (int64_t)be64_at((const unsigned char *)PQgetvalue(res, end, 0)) == i)
            end++;
        struct pg_ahead *a = &c->ahead[c->nahead];
        const log_read_req *q = &r[i - 1];
        if (!(a->path = strdup(q->path))) return LOG_EIO;
        a->lo = read_lo(q);
        a->budget = (uint64_t)page_budget(q->max_bytes);
        a->base = k;
        a->nrows = end - k;
        a->taken = 0;
        c->nahead++;
        k = end;
    }
    return 0;
}

/* log_read_ahead: the first pages of the reads to come in one statement
 * (READ_MANY), outside a transaction, kept until each read takes its own
 * (pre_fetch) or the next call forgets them: the statement's start, snapshot and
 * round trip once for all of them (a hub woken for many streams at once) instead
 * of once each. A read that takes its rows sees the stream as it was when they
 * were fetched, which is as if it had run then: a commit after it wakes its
 * readers again. */
static size_t op_read_ahead(log_conn_t *lc, const log_read_req *r, size_t n)
{
    pg_conn *c = pgc(lc);
    pg_ahead_forget(c);
    if (n < 2 || pg_in_tx(lc)) return 0;    /* one read gains nothing from it */
    if (n > PG_AHEAD_MAX) n = PG_AHEAD_MAX;
    if (!c->ahead && !(c->ahead = calloc(PG_AHEAD_MAX, sizeof *c->ahead))) return 0;
    const void *elem[3][PG_AHEAD_MAX];
    size_t len[3][PG_AHEAD_MAX];
    uint64_t num[2][PG_AHEAD_MAX];
    char *arr[3] = {NULL, NULL, NULL};
    size_t fetched = 0;
    pg_params p;
    pg_params_init(&p);
    for (size_t i = 0; i < n; i++) {
        elem[0][i] = r[i].path;
        len[0][i] = strlen(r[i].path);
        num[0][i] = htobe64(read_lo(&r[i]));
        num[1][i] = htobe64((uint64_t)page_budget(r[i].max_bytes));
        for (int a = 0; a < 2; a++) {
            elem[a + 1][i] = &num[a][i];
            len[a + 1][i] = sizeof num[a][i];
        }
    }
    for (int a = 0; a < 3; a++)
        if (!(arr[a] = pg_array(&p, a ? PG_INT8_OID : PG_TEXT_OID, n, elem[a], len[a]))) goto out;
    pg_int(&p, READ_PAGE);
    int rc;
    PGresult *res = pg_run(lc, READ_MANY, &p, 1, &rc);
    if (!res) goto out;
    c->ahead_res = res;
    if (ahead_slices(c, res, r, n)) pg_ahead_forget(c);
    else fetched = n;
out:
    for (int a = 0; a < 3; a++) free(arr[a]);
    return fetched;
}

/* The messages of the page in pre's rows (after its head) into the process's
 * cache (pg_hist.c), from start (the first one's offset: the page's own, or
 * after the messages kept that came before them), for the reads of them to
 * come; when the page's last message's digest came with it (the one that reaches
 * the budget carries it after its bytes, page_rows; else the page's end). */
static void pre_keep(const read_pre *pre, int64_t id, offset_t start)
{
    int n = pre->nrows - 1;
    if (n <= 0) return;
    pg_hist_msg *m = malloc((size_t)n * sizeof *m);
    if (!m) return;
    uint64_t lim = pre->start.pos + pre->budget, pos = start.pos;
    const uint8_t *digest = NULL;
    for (int k = 0; k < n; k++) {
        int i = pre->base + 1 + k;
        size_t len = (size_t)PQgetlength(pre->res, i, pre->col);
        m[k].data = PQgetvalue(pre->res, i, pre->col);
        if (len >= CHAIN_LEN && pos + (len - CHAIN_LEN) >= lim) {
            len -= CHAIN_LEN;
            if (k == n - 1) digest = (const uint8_t *)m[k].data + len;
        }
        m[k].len = len;
        pos += len;
    }
    if (!digest && pre->end.has && pre->end.seq == start.seq + (uint64_t)n - 1) digest = pre->end.digest;
    if (digest) pg_hist_keep(pre->hist, pre->path, id, pre->lo, start, m, (size_t)n, digest);
    free(m);
}

static void pre_clear(read_pre *pre)
{
    /* What came from the database is kept, once this read let go of what it held. */
    offset_t start = pre->start;
    int64_t id = pre->info.id;
    if (pre->kept) {
        start = (offset_t){pre->kept->hi, pre->kept->lo_pos + pre->kept->off[pre->kept->n]};
        id = pre->kept->id;
        pg_hist_put(pre->hist, pre->kept);
        pre->kept = NULL;
    }
    if (pre->hist && pre->res && !pre->shared && pre->has_start && pre->row >= 0 && !pre->info.parent &&
        !pre->deleted)
        pre_keep(pre, id, start);
    if (!pre->shared) PQclear(pre->res);
    pre->res = NULL;
}

/* READ_CACHED for read r, whose stream's history pre->kept holds from the process's
 * cache: 0 (pre->res its result; pre->kept's messages from pre->start on come
 * before its rows), LOG_E*, or 1: the history kept is not the stream's (any
 * longer: dropped from the cache) or does not serve this read, which reads as if
 * it had none (pre as it was). */
static int pre_cached(log_conn_t *c, const log_read_req *r, read_pre *pre)
{
    pg_hist_ent *e = pre->kept;
    pg_params p;
    int rc, ok = 0;
    pg_params_init(&p);
    pg_text(&p, r->path);
    pg_int(&p, (int64_t)pre->lo);
    pg_int(&p, (int64_t)pre->budget);
    pg_int(&p, READ_PAGE);
    pg_int(&p, (int64_t)e->hi);
    pg_int(&p, e->id);
    pg_bytes(&p, e->digest, CHAIN_LEN);
    PGresult *res = pg_run(c, READ_CACHED, &p, 1, &rc);
    if (!res) {
        pg_hist_put(pre->hist, e);
        pre->kept = NULL;
        return rc;
    }
    pre->res = res;
    pre->nrows = PQntuples(res);
    if (pre->nrows > 0 &&
        row_array((const unsigned char *)PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0), READ_CACHED_VALUES,
                  pre, &ok))
        rc = LOG_EIO;
    else if (ok && pre->has_start && pre->start.seq >= e->lo && pre->start.seq < e->hi &&
             pre->start.pos == e->lo_pos + e->off[pre->start.seq - e->lo]) {
        pg_hist_note(pre->hist, 1);
        return 0;
    }
    else
        rc = 1;
    PQclear(res);
    pre->res = NULL;
    pre->nrows = 0;
    pre->has_start = 0;
    memset(&pre->end, 0, sizeof pre->end);
    if (rc == 1) pg_hist_drop(pre->hist, e);
    else pg_hist_put(pre->hist, e);
    pre->kept = NULL;
    return rc;
}

/* READ_ONE for read r into pre (pre->res: the caller pre_clears it), or the rows
 * fetched ahead for it: 0 or LOG_E*. */
static int pre_fetch(log_conn_t *c, const log_read_req *r, read_pre *pre)
{
    pg_params p;
    int rc;
    memset(pre, 0, sizeof *pre);
    pre->path = r->path;
    pre->row = -1;
    pre->lo = read_lo(r);
    pre->budget = (uint64_t)page_budget(r->max_bytes);
    pre->hist = c->log->engine_state;
    const struct pg_ahead *a = pgc(c)->nahead ? ahead_take(pgc(c), r->path, pre->lo, pre->budget) : NULL;
    if (a) {
        pre->res = pgc(c)->ahead_res;
        pre->shared = 1;
        pre->base = a->base;
        pre->nrows = a->nrows;
        pre->col = 2;
    } else if ((pre->kept = pg_hist_get(pre->hist, r->path, pre->lo)) && (rc = pre_cached(c, r, pre)) <= 0) {
        if (rc < 0) return rc;
    } else {
        pg_params_init(&p);
        pg_text(&p, r->path);
        pg_int(&p, (int64_t)pre->lo);
        pg_int(&p, (int64_t)pre->budget);
        pg_int(&p, READ_PAGE);
        if (!(pre->res = pg_run(c, READ_ONE, &p, 1, &rc))) return rc;
        pre->nrows = PQntuples(pre->res);
        pg_hist_note(pre->hist, 0);
    }
    if (pre->nrows > 0) pre->row = pre->base;      /* the stream row comes first */
    if (pre->row >= 0 && !pre->kept &&
        row_array((const unsigned char *)PQgetvalue(pre->res, pre->row, pre->col),
                  (size_t)PQgetlength(pre->res, pre->row, pre->col), READ_ONE_VALUES, pre, NULL)) {
        pre_clear(pre);
        return LOG_EIO;
    }
    return 0;
}

/* by_path from the row READ_ONE fetched for this read (once): 1, 0 (none), or -1
 * when it has none for path. */
static int pre_row(log_conn_t *c, const char *path, log_info *info, int *deleted)
{
    read_pre *pre = pgc(c)->read_pre;
    if (!pre || pre->used || strcmp(path, pre->path)) return -1;
    pre->used = 1;
    if (pre->row < 0) return 0;
    *info = pre->info;
    if (deleted) *deleted = pre->deleted;
    return 1;
}

/* A read. Outside a transaction, a stream that is no fork is read with READ_ONE:
 * its row and first page in one round trip, no transaction (a longer read's next
 * pages follow, each a statement: committed messages do not change, and a page
 * starts where the last ended, or the read stops there: page_rows). A fork, and a
 * read inside a group, take the row and its ancestors' in one REPEATABLE READ
 * transaction (a fork costs READ_ONE's round trip more). */
static int op_read(log_conn_t *c, log_read_req *r, log_msg_fn fn, void *ud)
{
    if (!pg_in_tx(c)) {
        read_pre pre;
        int rc = pre_fetch(c, r, &pre);
        if (rc) return rc;
        if (pre.row < 0 || !pre.info.parent) {
            pgc(c)->read_pre = &pre;
            rc = logrule_read(c, &rows, r, fn, ud);
            pgc(c)->read_pre = NULL;
            pre_clear(&pre);
            return rc;
        }
        pre_clear(&pre);
    }
    int own_tx = !pg_in_tx(c);
    if (own_tx) read_begin(c);
    int rc = logrule_read(c, &rows, r, fn, ud);
    if (own_tx) read_end(c);
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
        const char *path = pg_text_of(r, i, 0);
        fn(ud, path ? path : "", &info);
    }
    PQclear(r);
    return 0;
}

const store_streams_ops pg_streams_ops = {
    .create = op_create,
    .append = op_append,
    .append_many = op_append_many,
    .remove = op_delete,
    .touch = op_touch,
    .sweep = op_sweep,
    .read = op_read,
    .read_ahead = op_read_ahead,
    .head = op_head,
    .digest_at = op_digest_at,
    .list = op_list,
};

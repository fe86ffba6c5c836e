/* dbcopy: a database copied to another through the engines' copy operations
 * (lib/store.h, store_copy_ops), then verified by summaries of both sides. See
 * dbcopy.h. */
#include "dbcopy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "store.h"

_Static_assert(DBCOPY_TABLES == STORE_COPY_TABLES, "dbcopy.h's table count is lib/store.h's");

const char *dbcopy_table_name(int i)
{
    return i >= 0 && i < STORE_COPY_TABLES ? store_copy_tables[i].name : "?";
}

void dbcopy_summary_init(dbcopy_summary *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < DBCOPY_TABLES; i++) sha256_init(&s->ctx[i]);
}

void dbcopy_summary_free(dbcopy_summary *s)
{
    for (size_t i = 0; i < s->nstreams; i++) free(s->streams[i].path);
    free(s->streams);
    memset(s, 0, sizeof *s);
}

void dbcopy_summary_finish(dbcopy_summary *s)
{
    if (s->finished) return;
    for (int i = 0; i < DBCOPY_TABLES; i++) sha256_final(&s->ctx[i], s->digest[i]);
    for (size_t i = 0; i < s->nstreams; i++) sha256_final(&s->streams[i].ctx, s->streams[i].digest);
    s->finished = 1;
}

/* A number into the digest, the same on every machine. */
static void put_u64(sha256_ctx *c, uint64_t v)
{
    uint8_t b[8];
    for (int i = 7; i >= 0; i--, v >>= 8) b[i] = (uint8_t)v;
    sha256_update(c, b, 8);
}

/* A value, tagged with its kind so that NULL, 0 and "" differ. */
static void put_val(sha256_ctx *c, const store_val *v)
{
    uint8_t tag = (uint8_t)v->type;
    sha256_update(c, &tag, 1);
    if (v->type == STORE_INT) put_u64(c, (uint64_t)v->i);
    else if (v->type == STORE_TEXT || v->type == STORE_BLOB) {
        put_u64(c, v->n);
        sha256_update(c, v->p, v->n);
    }
}

static dbcopy_stream *stream_of(dbcopy_summary *s, int64_t id)
{
    size_t lo = 0, hi = s->nstreams;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->streams[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < s->nstreams && s->streams[lo].id == id ? &s->streams[lo] : NULL;
}

/* One row of table into the summary. Streams come in order of id (their key), so
 * the array stays sorted. Returns 0, or -1 out of memory. */
static int summary_add(dbcopy_summary *s, int table, const store_val *row)
{
    const store_table *t = &store_copy_tables[table];
    size_t ncol = strlen(t->types);
    s->rows[table]++;
    for (size_t i = 0; i < ncol; i++) put_val(&s->ctx[table], &row[i]);
    if (table == 0 && row[0].type == STORE_INT && row[1].type == STORE_TEXT) {
        if (s->nstreams == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 64;
            dbcopy_stream *n = realloc(s->streams, cap * sizeof *n);
            if (!n) return -1;
            s->streams = n;
            s->cap = cap;
        }
        dbcopy_stream *st = &s->streams[s->nstreams];
        memset(st, 0, sizeof *st);
        if (!(st->path = strndup(row[1].p, row[1].n))) return -1;
        st->id = row[0].i;
        sha256_init(&st->ctx);
        for (size_t i = 0; i < ncol; i++) put_val(&st->ctx, &row[i]);
        sha256_final(&st->ctx, st->row);
        sha256_init(&st->ctx);
        s->nstreams++;
    } else if (table == STORE_T_MESSAGES && row[0].type == STORE_INT) {
        dbcopy_stream *st = stream_of(s, row[0].i);
        if (st) {
            st->messages++;
            for (size_t i = 1; i < ncol; i++) put_val(&st->ctx, &row[i]);
        }
    }
    return 0;
}

static void hex8(const uint8_t *d, char out[17])
{
    sha256_hex(d, 8, out);
}

int dbcopy_compare(const dbcopy_summary *a, const dbcopy_summary *b, char *diff, size_t cap)
{
    for (int t = 0; t < DBCOPY_TABLES; t++) {
        const char *name = store_copy_tables[t].name;
        if (a->rows[t] != b->rows[t]) {
            snprintf(diff, cap, "table %s: %lld rows, %lld in the copy", name, (long long)a->rows[t],
                     (long long)b->rows[t]);
            return 1;
        }
        if (t == STORE_T_MESSAGES) {
            /* Stream by stream, in order of id (the streams table agreed, so the
             * same streams are on both sides). */
            for (size_t i = 0; i < a->nstreams && i < b->nstreams; i++) {
                const dbcopy_stream *x = &a->streams[i], *y = &b->streams[i];
                if (x->messages != y->messages) {
                    snprintf(diff, cap, "stream %s: %lld messages, %lld in the copy", x->path,
                             (long long)x->messages, (long long)y->messages);
                    return 1;
                }
                if (memcmp(x->digest, y->digest, SHA256_LEN)) {
                    char hx[17], hy[17];
                    hex8(x->digest, hx);
                    hex8(y->digest, hy);
                    snprintf(diff, cap, "stream %s: its messages differ (sha256 %s..., %s... in the copy)", x->path,
                             hx, hy);
                    return 1;
                }
            }
        }
        if (memcmp(a->digest[t], b->digest[t], SHA256_LEN)) {
            if (t == 0) {
                /* Name the first stream whose row differs. */
                for (size_t i = 0; i < a->nstreams && i < b->nstreams; i++) {
                    const dbcopy_stream *x = &a->streams[i], *y = &b->streams[i];
                    if (x->id != y->id || strcmp(x->path, y->path)) {
                        snprintf(diff, cap, "table streams: stream %s (id %lld) is %s (id %lld) in the copy", x->path,
                                 (long long)x->id, y->path, (long long)y->id);
                        return 1;
                    }
                    if (memcmp(x->row, y->row, SHA256_LEN)) {
                        snprintf(diff, cap, "table streams: the row of stream %s differs", x->path);
                        return 1;
                    }
                }
            }
            snprintf(diff, cap, "table %s: its rows differ", name);
            return 1;
        }
    }
    return 0;
}

/* ---- the copy ------------------------------------------------------------------ */

/* A walk of table's rows into a summary (oom: it ran out of memory). */
typedef struct sum_state {
    dbcopy_summary *sum;
    int table, oom;
} sum_state;

static int sum_row(void *ud, const store_val *row)
{
    sum_state *ss = ud;
    if (summary_add(ss->sum, ss->table, row)) {
        ss->oom = 1;
        return 1;
    }
    return 0;
}

typedef struct copy_state {
    sum_state ss;               /* the source's summary, and the table walked */
    log_conn_t *src;
    dbcopy_progress_fn progress;
    void *ud;
    log_conn_t *dst;            /* inside the destination's group */
    int64_t n;
    int rc;                     /* a put's failure */
} copy_state;

static int copy_row(void *ud, const store_val *row)
{
    copy_state *cs = ud;
    if (sum_row(&cs->ss, row)) return 1;
    if ((cs->rc = store_of(cs->dst)->copy->put(cs->dst, cs->ss.table, row))) return 1;
    if (++cs->n % DBCOPY_PROGRESS_ROWS == 0 && cs->progress)
        cs->progress(cs->ud, store_copy_tables[cs->ss.table].name, cs->n, 0);
    return 0;
}

/* The destination's one operation: every table walked from the source into it. */
static int copy_all(log_conn_t *dst, void *arg)
{
    copy_state *cs = arg;
    cs->dst = dst;
    for (int t = 0; t < STORE_COPY_TABLES; t++) {
        cs->ss.table = t;
        cs->n = 0;
        int rc = store_of(cs->src)->copy->rows(cs->src, t, copy_row, cs);
        if (cs->ss.oom) return LOG_EIO;
        if (cs->rc) return cs->rc;
        if (rc) return rc;
        if (cs->progress) cs->progress(cs->ud, store_copy_tables[t].name, cs->n, 1);
    }
    return store_of(dst)->copy->finish(dst);
}

/* The summary of a database, in one read transaction. 0 or LOG_E*. */
static int summarize(log_conn_t *c, dbcopy_summary *s)
{
    const store_copy_ops *ops = store_of(c)->copy;
    int rc = ops->read_begin(c);
    if (rc) return rc;
    sum_state ss = {s, 0, 0};
    for (int t = 0; t < STORE_COPY_TABLES && !rc; t++) {
        ss.table = t;
        rc = ops->rows(c, t, sum_row, &ss);
        if (ss.oom) rc = LOG_EIO;
    }
    int rc2 = ops->read_end(c);
    dbcopy_summary_finish(s);
    return rc ? rc : rc2;
}

/* A database and a connection to it. from: it must exist already. */
static int open_db(const char *target, int must_exist, log_t **l, log_conn_t **c, char *err, size_t errlen)
{
    char e[256];
    *l = NULL;
    *c = NULL;
    /* A file path that is not there would be made empty by log_open. */
    if (must_exist && !log_target_is_uri(target) && access(target, F_OK) != 0) {
        snprintf(err, errlen, "%s: no such database", target);
        return DBCOPY_EOPEN;
    }
    if (!(*l = log_open(target, NULL, e, sizeof e))) {
        snprintf(err, errlen, "%s: %s", target, e);
        return DBCOPY_EOPEN;
    }
    if (!(*c = log_conn_open(*l, e, sizeof e))) {
        snprintf(err, errlen, "%s: %s", target, e);
        log_close(*l);
        *l = NULL;
        return DBCOPY_EOPEN;
    }
    return 0;
}

static void close_db(log_t *l, log_conn_t *c)
{
    if (c) log_conn_close(c);
    if (l) log_close(l);
}

/* The summaries' difference in err: DBCOPY_EDIFF, or 0 when they agree. */
static int differ(const dbcopy_summary *a, const dbcopy_summary *b, char *err, size_t errlen)
{
    char diff[512];
    if (!dbcopy_compare(a, b, diff, sizeof diff)) return 0;
    snprintf(err, errlen, "%s", diff);
    return DBCOPY_EDIFF;
}

int dbcopy_run(const char *from, const char *to, dbcopy_progress_fn progress, void *ud,
               int64_t rows[DBCOPY_TABLES], char *err, size_t errlen)
{
    log_t *sl = NULL, *dl = NULL;
    log_conn_t *sc = NULL, *dc = NULL;
    dbcopy_summary ssum, dsum;
    dbcopy_summary_init(&ssum);
    dbcopy_summary_init(&dsum);
    int rc = open_db(from, 1, &sl, &sc, err, errlen);
    if (rc) goto out;
    if ((rc = open_db(to, 0, &dl, &dc, err, errlen))) goto out;
    for (int t = 0; t < STORE_COPY_TABLES; t++) {
        int64_t n = 0;
        int r = store_of(dc)->copy->count(dc, t, &n);
        if (r) {
            snprintf(err, errlen, "%s: counting its %s: %s", to, store_copy_tables[t].name, errs_str(r));
            rc = DBCOPY_EFAIL;
            goto out;
        }
        if (n) {
            snprintf(err, errlen, "%s is not empty: its table %s has %lld rows", to, store_copy_tables[t].name,
                     (long long)n);
            rc = DBCOPY_ENOTEMPTY;
            goto out;
        }
    }
    if ((rc = store_of(sc)->copy->read_begin(sc))) {
        snprintf(err, errlen, "%s: %s", from, errs_str(rc));
        rc = DBCOPY_EFAIL;
        goto out;
    }
    copy_state cs = {{&ssum, 0, 0}, sc, progress, ud, NULL, 0, 0};
    rc = log_transact(dc, copy_all, &cs);
    store_of(sc)->copy->read_end(sc);
    dbcopy_summary_finish(&ssum);
    if (rc) {
        snprintf(err, errlen, "copying table %s (row %lld): %s%s", store_copy_tables[cs.ss.table].name,
                 (long long)cs.n + 1, cs.ss.oom ? "out of memory" : errs_str(rc),
                 cs.rc ? " (writing the copy; nothing was written)" : " (nothing was written)");
        rc = DBCOPY_EFAIL;
        goto out;
    }
    if (rows) memcpy(rows, ssum.rows, sizeof ssum.rows);
    if ((rc = summarize(dc, &dsum))) {
        snprintf(err, errlen, "%s: verifying the copy: %s", to, errs_str(rc));
        rc = DBCOPY_EFAIL;
        goto out;
    }
    rc = differ(&ssum, &dsum, err, errlen);
out:
    dbcopy_summary_free(&ssum);
    dbcopy_summary_free(&dsum);
    close_db(sl, sc);
    close_db(dl, dc);
    return rc;
}

int dbcopy_verify(const char *from, const char *to, char *err, size_t errlen)
{
    log_t *sl = NULL, *dl = NULL;
    log_conn_t *sc = NULL, *dc = NULL;
    dbcopy_summary ssum, dsum;
    dbcopy_summary_init(&ssum);
    dbcopy_summary_init(&dsum);
    int rc = open_db(from, 1, &sl, &sc, err, errlen);
    if (!rc) rc = open_db(to, 1, &dl, &dc, err, errlen);
    if (rc) goto out;
    const char *which = from;
    if (!(rc = summarize(sc, &ssum))) {
        which = to;
        rc = summarize(dc, &dsum);
    }
    if (rc) {
        snprintf(err, errlen, "%s: %s", which, errs_str(rc));
        rc = DBCOPY_EFAIL;
        goto out;
    }
    rc = differ(&ssum, &dsum, err, errlen);
out:
    dbcopy_summary_free(&ssum);
    dbcopy_summary_free(&dsum);
    close_db(sl, sc);
    close_db(dl, dc);
    return rc;
}

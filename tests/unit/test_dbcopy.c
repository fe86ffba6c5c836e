/* Unit tests for lib/dbcopy: the verification's summaries and their comparison
 * (rows by hand: the first difference named, in table order, a stream's messages
 * before the table; NULL, 0 and "" told apart; rows in another order differ), then
 * whole copies of a database made through lib/log (streams with a fork of a
 * deleted parent, a producer, Stream-Seq, TTL, closed; a session row and a
 * snapshot): copied and verified, every table's rows counted, a destination that
 * is not empty refused, a missing source not made, a copy changed afterwards named
 * by --verify. On SQLite, and from PostgreSQL too when DSTREAM_TEST_PG is set. */
#include "../../lib/dbcopy.c"

#include <sys/stat.h>

#include "test.h"
#include "test_db.h"

static store_val vi(int64_t i)
{
    return (store_val){STORE_INT, i, NULL, 0};
}

static store_val vt(const char *s)
{
    return (store_val){STORE_TEXT, 0, s, strlen(s)};
}

static store_val vb(const void *p, size_t n)
{
    return (store_val){STORE_BLOB, 0, p, n};
}

static store_val vnull(void)
{
    return (store_val){STORE_NULL, 0, NULL, 0};
}

/* A streams row: id, path, the rest zero (NULL where the column may be). */
static void stream_row(store_val *r, int64_t id, const char *path, int64_t tail)
{
    for (int i = 0; i < STORE_COPY_COLS; i++) r[i] = vi(0);
    r[0] = vi(id);
    r[1] = vt(path);
    r[2] = vt("text/plain");
    r[6] = r[7] = r[11] = r[12] = vnull();
    r[9] = vi(tail);
}

static void msg_row(store_val *r, int64_t stream, int64_t seq, const char *data)
{
    r[0] = vi(stream);
    r[1] = vi(seq);
    r[2] = vi(seq * 10);
    r[3] = vi(seq);
    r[4] = vb(data, strlen(data));
    r[5] = vnull();
}

/* Rows of a summary: streams (id, path, tail), then messages (stream, seq, data). */
typedef struct srow {
    int64_t id;
    const char *path;
    int64_t tail;
} srow;

typedef struct mrow {
    int64_t stream, seq;
    const char *data;
} mrow;

/* The summary of streams st[0..ns) and messages m[0..nm), in that order. */
static void summary_of(dbcopy_summary *s, const srow *st, size_t ns, const mrow *m, size_t nm)
{
    store_val r[STORE_COPY_COLS];
    dbcopy_summary_init(s);
    for (size_t i = 0; i < ns; i++) {
        stream_row(r, st[i].id, st[i].path, st[i].tail);
        summary_add(s, 0, r);
    }
    for (size_t i = 0; i < nm; i++) {
        msg_row(r, m[i].stream, m[i].seq, m[i].data);
        summary_add(s, STORE_T_MESSAGES, r);
    }
    dbcopy_summary_finish(s);
}

/* A summary of two streams, a and b, with messages "x","y" and "z" unless given. */
static void two_streams(dbcopy_summary *s, const char *a2, const char *b1)
{
    const srow st[] = {{1, "a", 2}, {7, "b", 1}};
    const mrow m[] = {{1, 1, "x"}, {1, 2, a2 ? a2 : "y"}, {7, 1, b1 ? b1 : "z"}};
    summary_of(s, st, 2, m, 3);
}

static void test_compare(void)
{
    dbcopy_summary a, b;
    char diff[512] = "";
    two_streams(&a, NULL, NULL);
    two_streams(&b, NULL, NULL);
    CHECK_EQ_INT(dbcopy_compare(&a, &b, diff, sizeof diff), 0);
    CHECK_EQ_INT(a.nstreams, 2);
    CHECK_EQ_INT(a.streams[0].messages, 2);
    CHECK_EQ_INT(a.streams[1].messages, 1);
    CHECK_EQ_INT(a.rows[STORE_T_MESSAGES], 3);
    dbcopy_summary_free(&b);
    /* One byte of b's message: named by its stream. */
    two_streams(&b, NULL, "Z");
    CHECK_EQ_INT(dbcopy_compare(&a, &b, diff, sizeof diff), 1);
    CHECK(!strncmp(diff, "stream b: its messages differ (sha256 ", 38));
    dbcopy_summary_free(&b);
    /* The first difference: a's before b's. */
    two_streams(&b, "Y", "Z");
    CHECK_EQ_INT(dbcopy_compare(&a, &b, diff, sizeof diff), 1);
    CHECK(!strncmp(diff, "stream a: its messages differ", 29));
    dbcopy_summary_free(&b);

    static const struct {
        srow st[2];
        mrow m[3];
        size_t nm;
        const char *want;
    } copies[] = {
        /* A message of a moved to b: the totals agree, the streams' counts do not. */
        {{{1, "a", 2}, {7, "b", 1}}, {{1, 1, "x"}, {7, 1, "z"}, {7, 2, "y"}}, 3, "stream a: 2 messages, 1 in the copy"},
        /* A stream's row (its tail): named. */
        {{{1, "a", 3}, {7, "b", 1}}, {{0}}, 0, "table streams: the row of stream a differs"},
        /* Another path under an id. */
        {{{1, "a", 2}, {7, "c", 1}}, {{0}}, 0, "table streams: stream b (id 7) is c (id 7) in the copy"},
    };
    for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++) {
        summary_of(&b, copies[i].st, 2, copies[i].m, copies[i].nm);
        CHECK_EQ_INT(dbcopy_compare(&a, &b, diff, sizeof diff), 1);
        CHECK_EQ_STR(diff, copies[i].want);
        dbcopy_summary_free(&b);
    }
    dbcopy_summary_free(&a);

    /* Counts first: a table with a row less. */
    dbcopy_summary_init(&a);
    dbcopy_summary_init(&b);
    store_val tok[6] = {vt("id1"), vt("n"), vb("\0\1", 2), vt("admin"), vi(5), vnull()};
    summary_add(&a, 7, tok);
    dbcopy_summary_finish(&a);
    dbcopy_summary_finish(&b);
    CHECK_EQ_INT(dbcopy_compare(&a, &b, diff, sizeof diff), 1);
    CHECK_EQ_STR(diff, "table tokens: 1 rows, 0 in the copy");
    dbcopy_summary_free(&b);
    /* NULL, 0 and "" are told apart; so are two bytes and one. */
    store_val alt[4][6] = {
        {vt("id1"), vt("n"), vb("\0\1", 2), vt("admin"), vi(5), vi(0)},
        {vt("id1"), vt("n"), vb("\0\1", 2), vt("admin"), vi(5), vt("")},
        {vt("id1"), vt("n"), vb("\0", 1), vt("admin"), vi(5), vnull()},
        {vt("id1"), vt("n"), vb("\0\1", 2), vt("admin"), vi(5), vnull()},
    };
    for (int k = 0; k < 4; k++) {
        dbcopy_summary_init(&b);
        summary_add(&b, 7, alt[k]);
        dbcopy_summary_finish(&b);
        CHECK_EQ_INT(dbcopy_compare(&a, &b, diff, sizeof diff), k < 3);
        if (k < 3) CHECK_EQ_STR(diff, "table tokens: its rows differ");
        dbcopy_summary_free(&b);
    }
    dbcopy_summary_free(&a);

    /* The same rows in another order differ (each side walks in key order). */
    store_val ag1[4] = {vt("a"), vt("{}"), vi(1), vi(1)}, ag2[4] = {vt("b"), vt("{}"), vi(1), vi(1)};
    dbcopy_summary_init(&a);
    dbcopy_summary_init(&b);
    summary_add(&a, 3, ag1);
    summary_add(&a, 3, ag2);
    summary_add(&b, 3, ag2);
    summary_add(&b, 3, ag1);
    dbcopy_summary_finish(&a);
    dbcopy_summary_finish(&b);
    CHECK_EQ_INT(dbcopy_compare(&a, &b, diff, sizeof diff), 1);
    CHECK_EQ_STR(diff, "table agents: its rows differ");
    dbcopy_summary_free(&a);
    dbcopy_summary_free(&b);
    CHECK_EQ_STR(dbcopy_table_name(0), "streams");
    CHECK_EQ_STR(dbcopy_table_name(STORE_COPY_TABLES - 1), "recording_chunks");
    CHECK_EQ_STR(dbcopy_table_name(STORE_COPY_TABLES), "?");
}

/* ---- whole copies -------------------------------------------------------------- */

static int append(log_conn_t *c, const char *path, const char *data, const char *producer, int64_t seq,
                  const char *stream_seq)
{
    log_msg m = {data, strlen(data)};
    log_append_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.msgs = &m;
    r.nmsgs = 1;
    r.producer = producer;
    r.seq = seq;
    r.stream_seq = stream_seq;
    return log_append(c, &r);
}

static int create(log_conn_t *c, const char *path, const char *fork_from, int64_t ttl_s, int closed)
{
    log_create_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.content_type = fork_from ? NULL : "text/plain";
    r.ttl_s = ttl_s;
    r.expires_ms = -1;
    r.closed = closed;
    r.fork_from = fork_from;
    return log_create(c, &r);
}

static int op_session(log_conn_t *c, void *arg)
{
    (void)arg;
    sstore_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.id, sizeof r.id, "s1");
    snprintf(r.stream, sizeof r.stream, "sessions/s1");
    snprintf(r.status, sizeof r.status, "completed");
    r.created_ms = 5;
    r.updated_ms = 6;
    int rc = store_of(c)->sessions->insert(c, &r);
    offset_t at = {1, 10};
    return rc ? rc : store_of(c)->sessions->snapshot_put(c, "s1", at, "{\"status\":\"completed\"}");
}

static int op_remove(log_conn_t *c, void *arg)
{
    return log_tx_delete(c, arg);
}

static void fill(log_conn_t *c)
{
    CHECK_EQ_INT(create(c, "p", NULL, -1, 0), 0);
    CHECK_EQ_INT(append(c, "p", "one", NULL, 0, "001"), 0);
    CHECK_EQ_INT(append(c, "p", "two", "w", 0, NULL), 0);
    CHECK_EQ_INT(append(c, "p", "three", "w", 1, NULL), 0);
    CHECK_EQ_INT(create(c, "f", "p", -1, 0), 0);
    CHECK_EQ_INT(append(c, "f", "own", NULL, 0, NULL), 0);
    CHECK_EQ_INT(log_transact(c, op_remove, "p"), 0);        /* kept for its fork */
    CHECK_EQ_INT(create(c, "ttl", NULL, 3600, 0), 0);
    CHECK_EQ_INT(create(c, "closed", NULL, -1, 1), 0);
    CHECK_EQ_INT(create(c, "sessions/s1", NULL, -1, 0), 0);
    CHECK_EQ_INT(append(c, "sessions/s1", "{\"e\":1}", NULL, 0, NULL), 0);
    CHECK_EQ_INT(log_transact(c, op_session, NULL), 0);
}

static void test_copy(void)
{
    char dir[256], err[1024], to[1200], missing[1200];
    log_t *lg = NULL;
    log_conn_t *c = NULL;
    if (test_db_open("dbcopy", dir, sizeof dir, &lg, &c) == 0) {
        fill(c);
        const char *from = log_path(lg);
        snprintf(to, sizeof to, "%s/copy.db", dir);
        int64_t rows[DBCOPY_TABLES] = {0};
        CHECK_EQ_INT(dbcopy_run(from, to, NULL, NULL, rows, err, sizeof err), 0);
        CHECK_EQ_INT(rows[0], 5);                   /* p (deleted), f, ttl, closed, sessions/s1 */
        CHECK_EQ_INT(rows[STORE_T_MESSAGES], 5);
        CHECK_EQ_INT(rows[2], 1);                   /* the producer */
        CHECK_EQ_INT(rows[5], 1);                   /* the session */
        CHECK_EQ_INT(rows[6], 1);                   /* its snapshot */
        CHECK_EQ_INT(dbcopy_verify(from, to, err, sizeof err), 0);
        /* Again into it: refused, named. */
        CHECK_EQ_INT(dbcopy_run(from, to, NULL, NULL, NULL, err, sizeof err), DBCOPY_ENOTEMPTY);
        CHECK(strstr(err, "is not empty: its table streams has 5 rows") != NULL);
        /* A source that is not there is not made. */
        snprintf(missing, sizeof missing, "%s/none.db", dir);
        CHECK_EQ_INT(dbcopy_run(missing, to, NULL, NULL, NULL, err, sizeof err), DBCOPY_EOPEN);
        struct stat st;
        CHECK(stat(missing, &st) != 0);
        /* The copy reads alike through the log: f's own message after p's. */
        char e2[256];
        log_t *l2 = log_open(to, NULL, e2, sizeof e2);
        log_conn_t *c2 = l2 ? log_conn_open(l2, e2, sizeof e2) : NULL;
        if (CHECK(c2 != NULL)) {
            log_info info;
            CHECK_EQ_INT(log_head(c2, "f", &info), 0);
            CHECK_EQ_INT(info.tail.seq, 4);
            /* A stream changed in the copy: --verify names it. */
            CHECK_EQ_INT(append(c2, "ttl", "new", NULL, 0, NULL), 0);
            log_conn_close(c2);
        }
        if (l2) log_close(l2);
        CHECK_EQ_INT(dbcopy_verify(from, to, err, sizeof err), DBCOPY_EDIFF);
        CHECK_EQ_STR(err, "table streams: the row of stream ttl differs");
    }
    test_db_close(dir, lg, c);
}

int main(void)
{
    test_compare();
    for (int e = 0; test_db_engine(e); e++) test_copy();
    return TEST_MAIN_END();
}

/* Unit tests for the sessions area of each engine (lib/store.h's
 * store_sessions_ops), below lib/sstore: a row's round trip (empty texts kept as
 * none), the list newest first with ids compared byte by byte (an upper-case id
 * sorts before a lower-case one on every engine), its status filter, cursor,
 * limit (and none: -1) and early stop, the unfinished ones, status updates,
 * deletion (hidden, its snapshots gone, its id free again only once deleted),
 * and the snapshots (the newest at or before a position; one position written
 * again is replaced); the list's filter (agent, workflow, creation range, labels
 * matched key by key, all at once) and labels kept on the row; the rows of a lineage (kin_get: a deleted row
 * too, said; children: a session's forks oldest first, ids byte by byte, deleted
 * ones said, at most max, an early stop); the OpenTelemetry export's cursors (read,
 * moved only from where they are, the sessions behind theirs, gone with a deleted
 * session). On SQLite, and on PostgreSQL too when DSTREAM_TEST_PG is
 * set. */
#include "sstore.h"

#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

static const store_sessions_ops *ops(void)
{
    return store_of(conn)->sessions;
}

typedef struct put_arg {
    const char *id, *status, *workflow, *parent;
    int64_t created_ms;
    const char *agent, *labels;
} put_arg;

static int op_insert(log_conn_t *c, void *arg)
{
    const put_arg *a = arg;
    sstore_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.id, sizeof r.id, "%s", a->id);
    snprintf(r.stream, sizeof r.stream, "sessions/%s", a->id);
    snprintf(r.status, sizeof r.status, "%s", a->status);
    if (a->workflow) {
        snprintf(r.workflow, sizeof r.workflow, "%s", a->workflow);
        r.wf_version = 3;
    }
    if (a->parent) {
        snprintf(r.parent, sizeof r.parent, "%s", a->parent);
        snprintf(r.fork_offset, sizeof r.fork_offset, "%s", "0000000000000002_0000000000000040");
    }
    if (a->agent) snprintf(r.agent, sizeof r.agent, "%s", a->agent);
    if (a->labels) snprintf(r.labels, sizeof r.labels, "%s", a->labels);
    r.created_ms = a->created_ms;
    r.updated_ms = a->created_ms + 1;
    return store_of(c)->sessions->insert(c, &r);
}

static int insert(const char *id, const char *status, int64_t created_ms, const char *workflow, const char *parent)
{
    put_arg a = {id, status, workflow, parent, created_ms, NULL, NULL};
    return log_transact(conn, op_insert, &a);
}

static int insert_labelled(const char *id, const char *agent, const char *workflow, int64_t created_ms,
                           const char *labels)
{
    put_arg a = {id, "pending", workflow, NULL, created_ms, agent, labels};
    return log_transact(conn, op_insert, &a);
}

typedef struct ids {
    char s[512];
    int stop_after;             /* stop after this many (0: never) */
    int n;
} ids;

static int collect(void *ud, const sstore_row *r)
{
    ids *x = ud;
    size_t len = strlen(x->s);
    snprintf(x->s + len, sizeof x->s - len, "%s%s", len ? " " : "", r->id);
    x->n++;
    return x->stop_after && x->n >= x->stop_after;
}

static void collect_id(void *ud, const char *id)
{
    ids *x = ud;
    size_t len = strlen(x->s);
    snprintf(x->s + len, sizeof x->s - len, "%s%s", len ? " " : "", id);
}

static const char *list_f(const sstore_filter *f, int64_t before_ms, const char *before_id, int max, int stop_after)
{
    static ids x;
    memset(&x, 0, sizeof x);
    x.stop_after = stop_after;
    CHECK_EQ_INT(ops()->list(conn, f, before_ms, before_id, max, collect, &x), 0);
    return x.s;
}

static const char *list(const char *status, int64_t before_ms, const char *before_id, int max, int stop_after)
{
    sstore_filter f;
    memset(&f, 0, sizeof f);
    if (status) snprintf(f.status, sizeof f.status, "%s", status);
    return list_f(&f, before_ms, before_id, max, stop_after);
}

/* The ids (newest first) the filter takes among the rows of test_filters. */
static const char *where(const char *agent, const char *workflow, const char *labels, int64_t after, int64_t before)
{
    sstore_filter f;
    memset(&f, 0, sizeof f);
    if (agent) snprintf(f.agent, sizeof f.agent, "%s", agent);
    if (workflow) snprintf(f.workflow, sizeof f.workflow, "%s", workflow);
    if (labels) snprintf(f.labels, sizeof f.labels, "%s", labels);
    if (after >= 0) f.has_after = 1, f.created_after = after;
    if (before >= 0) f.has_before = 1, f.created_before = before;
    return list_f(&f, INT64_MAX, "", -1, 0);
}

/* After test_rows' rows (created before 1001, none with labels or an agent). */
static void test_filters(void)
{
    CHECK_EQ_INT(insert_labelled("f1", "ag", NULL, 5000, "{\"env\":\"prod\",\"team\":\"red\"}"), 0);
    CHECK_EQ_INT(insert_labelled("f2", "ag", NULL, 5001, "{\"team\":\"red\"}"), 0);
    CHECK_EQ_INT(insert_labelled("f3", "other", NULL, 5002, "{\"team\":\"blue\"}"), 0);
    CHECK_EQ_INT(insert_labelled("f4", NULL, "wf", 5003, NULL), 0);
    CHECK_EQ_INT(insert_labelled("f5", NULL, "wf2", 5004, "{\"a.b/c-d_e\":\"x:y@z+1\"}"), 0);
    sstore_row r;
    CHECK_EQ_INT(ops()->get(conn, "f1", &r), 0);
    CHECK_EQ_STR(r.labels, "{\"env\":\"prod\",\"team\":\"red\"}");
    CHECK_EQ_STR(r.agent, "ag");
    CHECK_EQ_INT(ops()->get(conn, "f4", &r), 0);
    CHECK_EQ_STR(r.labels, "");

    const int64_t none = -1;
    CHECK_EQ_STR(where(NULL, NULL, NULL, 4999, none), "f5 f4 f3 f2 f1");
    CHECK_EQ_STR(where("ag", NULL, NULL, none, none), "f2 f1");
    CHECK_EQ_STR(where(NULL, "wf", NULL, 4999, none), "f4");     /* (s_a of test_rows is wf's too) */
    CHECK_EQ_STR(where("ag", "wf", NULL, none, none), "");
    /* Strictly after, strictly before. */
    CHECK_EQ_STR(where(NULL, NULL, NULL, 5001, 5004), "f4 f3");
    CHECK_EQ_STR(where(NULL, NULL, NULL, 5003, none), "f5");
    CHECK_EQ_STR(where(NULL, NULL, NULL, 4999, 5001), "f1");
    /* Labels: every key with its value; a session without one, or with another
     * value, is left out; a key with dots, slashes and dashes is one key. */
    CHECK_EQ_STR(where(NULL, NULL, "{\"team\":\"red\"}", none, none), "f2 f1");
    CHECK_EQ_STR(where(NULL, NULL, "{\"env\":\"prod\",\"team\":\"red\"}", none, none), "f1");
    CHECK_EQ_STR(where(NULL, NULL, "{\"env\":\"prod\",\"team\":\"blue\"}", none, none), "");
    CHECK_EQ_STR(where(NULL, NULL, "{\"team\":\"re\"}", none, none), "");
    CHECK_EQ_STR(where(NULL, NULL, "{\"nokey\":\"\"}", none, none), "");
    CHECK_EQ_STR(where(NULL, NULL, "{\"a.b/c-d_e\":\"x:y@z+1\"}", none, none), "f5");
    CHECK_EQ_STR(where(NULL, NULL, "{\"a\":\"x:y@z+1\"}", none, none), "");
    CHECK_EQ_STR(where("ag", NULL, "{\"team\":\"red\"}", 5000, none), "f2");
    /* With a status and a page's bounds too. */
    sstore_filter f;
    memset(&f, 0, sizeof f);
    snprintf(f.status, sizeof f.status, "pending");
    snprintf(f.labels, sizeof f.labels, "{\"team\":\"red\"}");
    CHECK_EQ_STR(list_f(&f, 5001, "f2", -1, 0), "f1");
    CHECK_EQ_STR(list_f(&f, INT64_MAX, "", 1, 0), "f2");
    snprintf(f.status, sizeof f.status, "running");
    CHECK_EQ_STR(list_f(&f, INT64_MAX, "", -1, 0), "");
}

typedef struct status_arg {
    const char *id, *status;
    int64_t now;
    int what;                   /* 0 set_status, 1 mark_deleted, 2 forget_deleted, 3 snapshot_put */
    offset_t at;
    const char *view;
} status_arg;

static int op_write(log_conn_t *c, void *arg)
{
    const status_arg *a = arg;
    const store_sessions_ops *s = store_of(c)->sessions;
    switch (a->what) {
    case 0: return s->set_status(c, a->id, a->status, a->now);
    case 1: return s->mark_deleted(c, a->id, a->now);
    case 2: return s->forget_deleted(c, a->id);
    default: return s->snapshot_put(c, a->id, a->at, a->view);
    }
}

static int write_op(int what, const char *id, const char *status, int64_t now, uint64_t seq, const char *view)
{
    status_arg a = {id, status, now, what, {seq, seq * 10}, view};
    return log_transact(conn, op_write, &a);
}

static void test_rows(void)
{
    CHECK_EQ_INT(insert("s_b", "running", 100, NULL, NULL), 0);
    CHECK_EQ_INT(insert("s_a", "running", 100, "wf", "s_b"), 0);
    CHECK_EQ_INT(insert("S_c", "pending", 100, NULL, NULL), 0);
    CHECK_EQ_INT(insert("s_d", "completed", 200, NULL, NULL), 0);
    CHECK_EQ_INT(insert("s_e", "awaiting_input", 50, NULL, NULL), 0);
    CHECK(insert("s_d", "completed", 300, NULL, NULL) < 0);      /* taken */

    sstore_row r;
    memset(&r, 0x55, sizeof r);
    CHECK_EQ_INT(ops()->get(conn, "s_a", &r), 0);
    CHECK_EQ_STR(r.id, "s_a");
    CHECK_EQ_STR(r.stream, "sessions/s_a");
    CHECK_EQ_STR(r.agent, "");
    CHECK_EQ_STR(r.workflow, "wf");
    CHECK_EQ_INT(r.wf_version, 3);
    CHECK_EQ_STR(r.parent, "s_b");
    CHECK_EQ_STR(r.fork_offset, "0000000000000002_0000000000000040");
    CHECK_EQ_STR(r.status, "running");
    CHECK_EQ_INT(r.created_ms, 100);
    CHECK_EQ_INT(r.updated_ms, 101);
    memset(&r, 0x55, sizeof r);
    CHECK_EQ_INT(ops()->get(conn, "s_b", &r), 0);
    CHECK_EQ_STR(r.workflow, "");
    CHECK_EQ_INT(r.wf_version, 0);
    CHECK_EQ_STR(r.parent, "");
    CHECK_EQ_STR(r.fork_offset, "");
    CHECK_EQ_INT(ops()->get(conn, "nope", &r), LOG_ENOTFOUND);

    /* Newest first; within a millisecond by id, byte by byte. */
    CHECK_EQ_STR(list(NULL, INT64_MAX, "", -1, 0), "s_d s_b s_a S_c s_e");
    CHECK_EQ_STR(list(NULL, INT64_MAX, "", 2, 0), "s_d s_b");
    CHECK_EQ_STR(list(NULL, INT64_MAX, "", -1, 3), "s_d s_b s_a");
    CHECK_EQ_STR(list("running", INT64_MAX, "", -1, 0), "s_b s_a");
    CHECK_EQ_STR(list(NULL, 100, "s_b", -1, 0), "s_a S_c s_e");
    CHECK_EQ_STR(list(NULL, 100, "s_a", 1, 0), "S_c");
    CHECK_EQ_STR(list(NULL, 100, "", -1, 0), "s_e");
    CHECK_EQ_STR(list("completed", 200, "s_d", -1, 0), "");

    ids u;
    memset(&u, 0, sizeof u);
    CHECK_EQ_INT(ops()->unfinished(conn, collect_id, &u), 0);
    /* pending, running and awaiting input, in no promised order */
    CHECK_EQ_INT((int)strlen(u.s), (int)strlen("s_b s_a S_c s_e"));
    CHECK(strstr(u.s, "s_d") == NULL);
    CHECK(strstr(u.s, "S_c") != NULL && strstr(u.s, "s_e") != NULL);

    CHECK_EQ_INT(write_op(0, "s_a", "completed", 900, 0, NULL), 0);
    CHECK_EQ_INT(ops()->get(conn, "s_a", &r), 0);
    CHECK_EQ_STR(r.status, "completed");
    CHECK_EQ_INT(r.updated_ms, 900);
    CHECK_EQ_INT(r.created_ms, 100);
    CHECK_EQ_STR(list("completed", INT64_MAX, "", -1, 0), "s_d s_a");
}

static void test_snapshots_and_delete(void)
{
    offset_t at;
    char *view = NULL;
    CHECK_EQ_INT(ops()->snapshot_before(conn, "s_b", 1000, &at, &view), 0);
    CHECK(view == NULL);
    CHECK_EQ_INT(write_op(3, "s_b", NULL, 0, 64, "{\"n\":64}"), 0);
    CHECK_EQ_INT(write_op(3, "s_b", NULL, 0, 128, "{\"n\":128}"), 0);
    CHECK_EQ_INT(write_op(3, "s_b", NULL, 0, 64, "{\"n\":\"64 again\"}"), 0);
    CHECK_EQ_INT(write_op(3, "s_d", NULL, 0, 64, "{\"other\":1}"), 0);
    CHECK_EQ_INT(ops()->snapshot_before(conn, "s_b", 63, &at, &view), 0);
    CHECK_EQ_INT(ops()->snapshot_before(conn, "s_b", 64, &at, &view), 1);
    CHECK_EQ_STR(view, "{\"n\":\"64 again\"}");
    CHECK_EQ_UINT(at.seq, 64);
    CHECK_EQ_UINT(at.pos, 640);
    free(view);
    view = NULL;
    CHECK_EQ_INT(ops()->snapshot_before(conn, "s_b", 1000, &at, &view), 1);
    CHECK_EQ_STR(view, "{\"n\":128}");
    CHECK_EQ_UINT(at.seq, 128);
    free(view);
    view = NULL;

    /* A live session's row is not forgotten; a deleted one is hidden, its
     * snapshots gone, and its id free again once forgotten. */
    CHECK_EQ_INT(write_op(2, "s_b", NULL, 0, 0, NULL), 0);
    sstore_row r;
    CHECK_EQ_INT(ops()->get(conn, "s_b", &r), 0);
    CHECK_EQ_INT(write_op(1, "s_b", NULL, 950, 0, NULL), 0);
    CHECK_EQ_INT(ops()->get(conn, "s_b", &r), LOG_ENOTFOUND);
    CHECK_EQ_STR(list(NULL, INT64_MAX, "", -1, 0), "s_d s_a S_c s_e");
    CHECK_EQ_INT(ops()->snapshot_before(conn, "s_b", 1000, &at, &view), 0);
    CHECK(view == NULL);
    CHECK_EQ_INT(ops()->snapshot_before(conn, "s_d", 1000, &at, &view), 1);
    free(view);
    CHECK(insert("s_b", "pending", 1000, NULL, NULL) < 0);
    CHECK_EQ_INT(write_op(2, "s_b", NULL, 0, 0, NULL), 0);
    CHECK_EQ_INT(insert("s_b", "pending", 1000, NULL, NULL), 0);
    CHECK_EQ_INT(ops()->get(conn, "s_b", &r), 0);
    CHECK_EQ_STR(r.status, "pending");
    CHECK_EQ_STR(list(NULL, INT64_MAX, "", 1, 0), "s_b");
}

static int collect_kin(void *ud, const sstore_row *r, int deleted)
{
    ids *x = ud;
    size_t len = strlen(x->s);
    snprintf(x->s + len, sizeof x->s - len, "%s%s%s", len ? " " : "", r->id, deleted ? "(deleted)" : "");
    x->n++;
    return x->stop_after && x->n >= x->stop_after;
}

static const char *kids(const char *id, int max, int stop_after)
{
    static ids x;
    memset(&x, 0, sizeof x);
    x.stop_after = stop_after;
    CHECK_EQ_INT(ops()->children(conn, id, max, collect_kin, &x), 0);
    return x.s;
}

static void test_kin(void)
{
    sstore_row r;
    int deleted = -1;
    CHECK_EQ_INT(insert("k_r", "completed", 10, NULL, NULL), 0);
    CHECK_EQ_INT(insert("k_b", "running", 30, NULL, "k_r"), 0);
    CHECK_EQ_INT(insert("k_a", "pending", 20, NULL, "k_r"), 0);
    CHECK_EQ_INT(insert("K_c", "pending", 20, NULL, "k_r"), 0);
    CHECK_EQ_INT(insert("k_aa", "pending", 40, "wf", "k_a"), 0);
    CHECK_EQ_INT(write_op(1, "k_a", NULL, 50, 0, NULL), 0);
    CHECK_EQ_STR(kids("k_r", 10, 0), "K_c k_a(deleted) k_b");
    CHECK_EQ_STR(kids("k_r", 2, 0), "K_c k_a(deleted)");
    CHECK_EQ_STR(kids("k_r", 10, 1), "K_c");
    CHECK_EQ_STR(kids("k_a", 10, 0), "k_aa");
    CHECK_EQ_STR(kids("k_b", 10, 0), "");
    CHECK_EQ_INT(ops()->get(conn, "k_a", &r), LOG_ENOTFOUND);
    CHECK_EQ_INT(ops()->kin_get(conn, "k_a", &r, &deleted), 0);
    CHECK_EQ_INT(deleted, 1);
    CHECK_EQ_STR(r.parent, "k_r");
    CHECK_EQ_STR(r.fork_offset, "0000000000000002_0000000000000040");
    CHECK_EQ_INT(ops()->kin_get(conn, "k_aa", &r, &deleted), 0);
    CHECK_EQ_INT(deleted, 0);
    CHECK_EQ_STR(r.workflow, "wf");
    CHECK_EQ_STR(r.parent, "k_a");
    CHECK_EQ_INT(ops()->kin_get(conn, "k_nosuch", &r, &deleted), LOG_ENOTFOUND);
}

static int behind_fn(void *ud, const char *id, uint64_t cursor)
{
    char *out = ud;
    size_t n = strlen(out);
    snprintf(out + n, 256 - n, "%s%s=%llu", n ? " " : "", id, (unsigned long long)cursor);
    return 0;
}

static const char *behind(void)
{
    static char out[256];
    out[0] = 0;
    CHECK_EQ_INT(sstore_otlp_behind(conn, behind_fn, out), 0);
    return out;
}

static void test_otlp_cursors(void)
{
    CHECK_EQ_INT(insert("o_1", "running", 7000, NULL, NULL), 0);
    log_msg m[3] = {{"{}", 2}, {"{}", 2}, {"{}", 2}};
    log_create_req cr;
    memset(&cr, 0, sizeof cr);
    cr.path = "sessions/o_1";
    cr.content_type = "application/json";
    cr.ttl_s = cr.expires_ms = -1;
    cr.msgs = m;
    cr.nmsgs = 3;
    CHECK_EQ_INT(log_create(conn, &cr), 0);
    uint64_t seq = 99;
    CHECK_EQ_INT(sstore_otlp_cursor(conn, "o_1", &seq), 0);
    CHECK_EQ_UINT(seq, 0);
    /* Only o_1 has a stream with events: behind at 0. */
    CHECK_EQ_STR(behind(), "o_1=0");
    /* Moved only from where it is. */
    CHECK_EQ_INT(sstore_otlp_advance(conn, "o_1", 1, 2), 0);
    CHECK_EQ_INT(sstore_otlp_advance(conn, "o_1", 0, 2), 1);
    CHECK_EQ_INT(sstore_otlp_advance(conn, "o_1", 0, 3), 0);
    CHECK_EQ_INT(sstore_otlp_cursor(conn, "o_1", &seq), 0);
    CHECK_EQ_UINT(seq, 2);
    CHECK_EQ_STR(behind(), "o_1=2");
    CHECK_EQ_INT(sstore_otlp_advance(conn, "o_1", 2, 3), 1);
    CHECK_EQ_STR(behind(), "");
    /* A deleted session's cursor goes with it. */
    CHECK_EQ_INT(write_op(1, "o_1", NULL, 7100, 0, NULL), 0);
    CHECK_EQ_INT(sstore_otlp_cursor(conn, "o_1", &seq), 0);
    CHECK_EQ_UINT(seq, 0);
}

int main(void)
{
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("store-sessions", dir, sizeof dir, &lg, &conn) == 0) {
            test_rows();
            test_snapshots_and_delete();
            test_filters();
            test_kin();
            test_otlp_cursors();
        }
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

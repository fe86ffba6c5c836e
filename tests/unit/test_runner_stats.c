/* Unit tests for runner/stats.c: provider attempts counted where they are sent and
 * freed (started, retries, in flight, ended, failed, by model); the sessions and
 * leases counted from the runner's list; and publishing, on each engine: the
 * figures are not published (a commit of their own) while a delta read from a
 * provider waits for its commit, unless they are a whole period late; once nothing
 * waits, they are. */
#include <stdio.h>

#include "test.h"
#include "test_db.h"

/* After the tests' headers: its figures (st) would shadow their locals. */
#include "../../runner/stats.c"

/* No MCP servers here (runner/mcp_pool.c is not linked). */
int rmcp_stats(rmcp_t *m, size_t i, rstats_mcp *out)
{
    (void)m, (void)i, (void)out;
    return -1;
}

static char dir[512];
static log_t *lg;
static log_conn_t *conn;

static int64_t got_dropped;

static void keep(void *ud, const rstats *row)
{
    (void)ud;
    if (!strcmp(row->owner, "runner-stats")) got_dropped = row->dropped;
}

/* The row's dropped counter as published, -1 if none. */
static int64_t published(void)
{
    got_dropped = -1;
    CHECK_EQ_INT(rstats_each(conn, keep, NULL), 0);
    return got_dropped;
}

static void test_due(void)
{
    CHECK(!runner_stats_due(999, 1000, 0));
    CHECK(runner_stats_due(1000, 1000, 0));
    CHECK(!runner_stats_due(1000, 1000, 1));     /* a delta waits */
    CHECK(!runner_stats_due(1999, 1000, 1));
    CHECK(runner_stats_due(2000, 1000, 1));      /* a whole period late */
}

static void test_publish_after_commit(void)
{
    runner_t R;
    memset(&R, 0, sizeof R);
    R.log = lg;
    R.conn = conn;
    R.me.owner = "runner-stats";
    memset(&st, 0, sizeof st);
    runner_stats_tick(&R);          /* the start: a row */
    CHECK_EQ_INT(published(), 0);
    /* Due, with a delta waiting for its commit: not published. */
    st.next_publish_ms = timefmt_now_ms() - 1;
    R.dropped = 7;
    runner_stats_publish(&R, 1);
    CHECK_EQ_INT(published(), 0);
    /* Nothing waits any more (the loop's commit was made): published. */
    runner_stats_publish(&R, 0);
    CHECK_EQ_INT(published(), 7);
    /* Not due again before a period. */
    R.dropped = 8;
    runner_stats_publish(&R, 0);
    CHECK_EQ_INT(published(), 7);
    /* A period late: published even though a delta waits. */
    st.next_publish_ms = timefmt_now_ms() - RUNNER_STATS_PERIOD_MS;
    runner_stats_publish(&R, 1);
    CHECK_EQ_INT(published(), 8);
    memset(&st, 0, sizeof st);
}

/* An attempt of model, its attempt number, last status and stream error. */
static rq_t *attempt(const char *model, int n, long status, int stream_error)
{
    rq_t *q = calloc(1, sizeof *q);
    snprintf(q->model, sizeof q->model, "%s", model);
    snprintf(q->id, sizeof q->id, "req_%d", n);
    q->attempt = n;
    q->status = status;
    q->stream_error = stream_error;
    q->in_tok = 10;
    q->out_tok = 3;
    q->started_ms = timefmt_now_ms() - 50;
    return q;
}

static void test_counted_where_they_happen(void)
{
    runner_t R;
    memset(&R, 0, sizeof R);
    memset(&st, 0, sizeof st);
    rq_t *a = attempt("m-one", 1, 200, 0), *b = attempt("m-one", 2, 200, 0), *c = attempt("m-two", 1, 500, 0);
    rq_t *d = attempt("m-two", 1, 200, 1), *never = attempt("m-three", 1, 0, 0);
    runner_stats_sent(a);
    runner_stats_sent(b);
    runner_stats_sent(c);
    CHECK_EQ_INT(st.s.requests, 3);
    CHECK_EQ_INT(st.s.retries, 1);              /* b's attempt 2 */
    CHECK_EQ_INT(st.s.in_flight, 3);
    a->first_ms = a->started_ms + 20;           /* its text came */
    runner_stats_freed(&R, a);
    runner_stats_freed(&R, c);                  /* its last status 500 */
    CHECK_EQ_INT(st.s.in_flight, 1);
    CHECK_EQ_INT(st.s.failures, 1);
    runner_stats_sent(d);
    runner_stats_freed(&R, d);                  /* a 200 whose stream reported an error */
    runner_stats_freed(&R, b);
    runner_stats_freed(&R, never);              /* never sent: not an attempt */
    CHECK_EQ_INT(st.s.requests, 4);
    CHECK_EQ_INT(st.s.in_flight, 0);
    CHECK_EQ_INT(st.s.failures, 2);
    CHECK_EQ_INT(st.nmodels, 2);
    CHECK_EQ_STR(st.models[0].model, "m-one");
    CHECK_EQ_INT(st.models[0].requests, 2);
    CHECK_EQ_INT(st.models[0].failures, 0);
    CHECK_EQ_INT(st.models[0].input_tokens, 20);
    CHECK_EQ_INT(st.models[0].first_token.count, 1);   /* b had no output */
    CHECK_EQ_INT(st.models[0].latency.count, 2);
    CHECK_EQ_STR(st.models[1].model, "m-two");
    CHECK_EQ_INT(st.models[1].requests, 2);
    CHECK_EQ_INT(st.models[1].failures, 2);
    CHECK(st.models_changed);
    free(a), free(b), free(c), free(d), free(never);
    memset(&st, 0, sizeof st);
}

static void test_sessions_counted(void)
{
    runner_t R;
    sess_t s[3];
    memset(&R, 0, sizeof R);
    memset(s, 0, sizeof s);
    memset(&st, 0, sizeof st);
    for (int i = 0; i < 3; i++) {
        s[i].next = i < 2 ? &s[i + 1] : NULL;
        s[i].lease.held = i != 1;
    }
    R.sessions = &s[0];
    R.idx.nheap = 5;                            /* parked ones */
    CHECK_EQ_INT(runner_stats_leased(&R), 2);
    count_sessions(&R);
    CHECK_EQ_INT(st.s.sessions, 8);
    CHECK_EQ_INT(st.s.leased, 2);
    memset(&st, 0, sizeof st);
}

int main(void)
{
    test_due();
    test_counted_where_they_happen();
    test_sessions_counted();
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("runner_stats", dir, sizeof dir, &lg, &conn) == 0) test_publish_after_commit();
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

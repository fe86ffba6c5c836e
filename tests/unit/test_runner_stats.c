/* Unit tests for runner/stats.c's publishing, on each engine: the figures are not
 * published (a commit of their own) while a delta read from a provider waits for
 * its commit, unless they are a whole period late; once nothing waits, they are. */
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
    free(st.prev.v);
    free(st.cur.v);
    memset(&st, 0, sizeof st);
}

int main(void)
{
    test_due();
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("runner_stats", dir, sizeof dir, &lg, &conn) == 0) test_publish_after_commit();
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

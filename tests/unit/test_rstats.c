/* Unit tests for lib/rstats.c: a start counts, publishing keeps the count and
 * replaces the figures, rows come back by owner, sessions are counted by status
 * (deleted ones not), and the figures by model and by MCP server come back from
 * the file beside the database; a database without the tables (one of an older
 * binary) reads as empty, not as an error. On each engine (test_db.h; the figures
 * files beside a database path on SQLite's run only); the tables are dropped by hand
 * with the engine's command-line program (test_db_sql). The figures in a row of
 * PostgreSQL's: test_pg_rstats.c. */
#include "rstats.h"

#include <string.h>
#include <unistd.h>

#include "store.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

static rstats got[4];
static int ngot;

static void keep(void *ud, const rstats *r)
{
    (void)ud;
    if (ngot < 4) got[ngot] = *r;
    ngot++;
}

static int64_t by_status[3];

static void count(void *ud, const char *status, int64_t n)
{
    (void)ud;
    if (!strcmp(status, "completed")) by_status[0] = n;
    else if (!strcmp(status, "running")) by_status[1] = n;
    else by_status[2] += n;
}

static void test_publish(void)
{
    rstats s;
    memset(&s, 0, sizeof s);
    snprintf(s.owner, sizeof s.owner, "%s", "runner-b");
    s.pid = 42;
    s.started_ms = 1000;
    s.updated_ms = 1000;
    CHECK_EQ_INT(rstats_start(conn, &s), 0);
    s.requests = 7;
    s.retries = 2;
    s.failures = 3;
    s.in_flight = 1;
    s.sessions = 5;
    s.leased = 4;
    s.loops = 99;
    s.loop_max_ms = 12;
    s.dropped = 6;
    s.updated_ms = 2000;
    CHECK_EQ_INT(rstats_publish(conn, &s), 0);
    rstats a = s;
    snprintf(a.owner, sizeof a.owner, "%s", "runner-a");
    CHECK_EQ_INT(rstats_start(conn, &a), 0);
    /* A second start of runner-b: counted, figures replaced by the new process's. */
    s.pid = 43;
    s.requests = 0;
    CHECK_EQ_INT(rstats_start(conn, &s), 0);
    ngot = 0;
    CHECK_EQ_INT(rstats_each(conn, keep, NULL), 0);
    if (!CHECK_EQ_INT(ngot, 2)) return;
    CHECK_EQ_STR(got[0].owner, "runner-a");
    CHECK_EQ_INT(got[0].starts, 1);
    CHECK_EQ_STR(got[1].owner, "runner-b");
    CHECK_EQ_INT(got[1].starts, 2);
    CHECK_EQ_INT(got[1].pid, 43);
    CHECK_EQ_INT(got[1].requests, 0);
    CHECK_EQ_INT(got[0].dropped, 6);
    CHECK_EQ_INT(got[1].retries, 2);
    CHECK_EQ_INT(got[1].failures, 3);
    CHECK_EQ_INT(got[1].in_flight, 1);
    CHECK_EQ_INT(got[1].sessions, 5);
    CHECK_EQ_INT(got[1].leased, 4);
    CHECK_EQ_INT(got[1].loops, 99);
    CHECK_EQ_INT(got[1].loop_max_ms, 12);
    CHECK_EQ_INT(got[1].updated_ms, 2000);
}

/* Sessions a, b (completed), c (running) and d (completed, then deleted), written
 * through the store. */
static int put_sessions_tx(log_conn_t *c, void *arg)
{
    (void)arg;
    static const char *const rows[][2] = {{"a", "completed"}, {"b", "completed"}, {"c", "running"}, {"d", "completed"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        sstore_row row;
        memset(&row, 0, sizeof row);
        snprintf(row.id, sizeof row.id, "%s", rows[i][0]);
        snprintf(row.stream, sizeof row.stream, "sessions/%s", rows[i][0]);
        snprintf(row.status, sizeof row.status, "%s", rows[i][1]);
        int rc = store_of(c)->sessions->insert(c, &row);
        if (rc) return rc;
    }
    return store_of(c)->sessions->mark_deleted(c, "d", 0);
}

static void test_sessions(void)
{
    memset(by_status, 0, sizeof by_status);
    CHECK_EQ_INT(log_transact(conn, put_sessions_tx, NULL), 0);
    CHECK_EQ_INT(rstats_sessions(conn, count, NULL), 0);
    CHECK_EQ_INT(by_status[0], 2);
    CHECK_EQ_INT(by_status[1], 1);
    CHECK_EQ_INT(by_status[2], 0);
}

static rstats_model loaded[4];
static char loaded_owner[4][64];
static int nloaded;

static void keep_model(void *ud, const char *owner, const rstats_model *m)
{
    (void)ud;
    if (nloaded < 4) {
        loaded[nloaded] = *m;
        snprintf(loaded_owner[nloaded], sizeof loaded_owner[nloaded], "%s", owner);
    }
    nloaded++;
}

/* Figures by model: histograms count cumulatively; a save and a load give them back;
 * an owner id cannot leave the database's directory. */
static void test_models(void)
{
    rstats_model m[2];
    memset(m, 0, sizeof m);
    snprintf(m[0].model, sizeof m[0].model, "%s", "model \"a\"");
    m[0].requests = 3;
    m[0].failures = 1;
    m[0].input_tokens = 30;
    m[0].output_tokens = 70;
    m[0].cost_usd = 0.25;
    rstats_hist_observe(&m[0].latency, 0.05);
    rstats_hist_observe(&m[0].latency, 0.7);
    rstats_hist_observe(&m[0].latency, 500);
    CHECK_EQ_UINT(m[0].latency.bucket[0], 1);     /* <= 0.1 */
    CHECK_EQ_UINT(m[0].latency.bucket[3], 2);     /* <= 1 */
    CHECK_EQ_UINT(m[0].latency.bucket[RSTATS_BUCKETS - 1], 2);   /* <= 120: not 500 */
    CHECK_EQ_UINT(m[0].latency.count, 3);
    snprintf(m[1].model, sizeof m[1].model, "%s", "b");
    rstats_hist_observe(&m[1].first_token, 0.3);
    char db[400];
    snprintf(db, sizeof db, "%s/rstats.db", dir);
    CHECK_EQ_INT(rstats_figures_save(db, "../../etc/evil", m, 2, NULL, 0, NULL, 0, NULL, NULL, 0), 0);
    char path[500];
    snprintf(path, sizeof path, "%s/rstats.db-runner-.._.._etc_evil.json", dir);
    CHECK(access(path, F_OK) == 0);
    nloaded = 0;
    CHECK_EQ_INT(rstats_figures_each(db, &(rstats_figures_fn){keep_model, NULL, NULL, NULL, NULL, NULL}), 2);
    if (!CHECK_EQ_INT(nloaded, 2)) return;
    CHECK_EQ_STR(loaded_owner[0], "../../etc/evil");
    CHECK_EQ_STR(loaded[0].model, "model \"a\"");
    CHECK_EQ_INT(loaded[0].requests, 3);
    CHECK_EQ_INT(loaded[0].failures, 1);
    CHECK_EQ_INT(loaded[0].input_tokens, 30);
    CHECK_EQ_INT(loaded[0].output_tokens, 70);
    CHECK(loaded[0].cost_usd > 0.2499 && loaded[0].cost_usd < 0.2501);
    CHECK_EQ_UINT(loaded[0].latency.bucket[3], 2);
    CHECK_EQ_UINT(loaded[0].latency.count, 3);
    CHECK(loaded[0].latency.sum > 500.7 && loaded[0].latency.sum < 500.8);
    CHECK_EQ_STR(loaded[1].model, "b");
    CHECK_EQ_UINT(loaded[1].first_token.count, 1);
    /* No files: nothing, not an error. */
    snprintf(db, sizeof db, "%s/none[x].db", dir);
    CHECK_EQ_INT(rstats_figures_each(db, &(rstats_figures_fn){keep_model, NULL, NULL, NULL, NULL, NULL}), 0);
}

static rstats_mcp loaded_mcp[4];
static int nloaded_mcp;

static void keep_mcp(void *ud, const char *owner, const rstats_mcp *m)
{
    CHECK_EQ_STR(owner, (const char *)ud);
    if (nloaded_mcp < 4) loaded_mcp[nloaded_mcp] = *m;
    nloaded_mcp++;
}

/* Figures by MCP server: saved in the same file as the models', given back by
 * server with every reason. */
static void test_mcp(void)
{
    rstats_mcp m[2];
    memset(m, 0, sizeof m);
    snprintf(m[0].server, sizeof m[0].server, "%s", "fs");
    m[0].calls = 9;
    m[0].starts = 2;
    m[0].failures[RSTATS_MCP_ERROR] = 1;
    m[0].failures[RSTATS_MCP_TIMEOUT] = 2;
    m[0].failures[RSTATS_MCP_CRASH] = 3;
    m[0].failures[RSTATS_MCP_UNAVAILABLE] = 4;
    snprintf(m[1].server, sizeof m[1].server, "%s", "other");
    m[1].calls = 1;
    rstats_model model;
    memset(&model, 0, sizeof model);
    snprintf(model.model, sizeof model.model, "%s", "x");
    char db[400];
    snprintf(db, sizeof db, "%s/mcp.db", dir);
    CHECK_EQ_INT(rstats_figures_save(db, "r1", &model, 1, m, 2, NULL, 0, NULL, NULL, 0), 0);
    nloaded_mcp = 0;
    CHECK_EQ_INT(rstats_figures_each(db, &(rstats_figures_fn){NULL, keep_mcp, NULL, "r1", NULL, NULL}), 2);
    if (!CHECK_EQ_INT(nloaded_mcp, 2)) return;
    CHECK_EQ_STR(loaded_mcp[0].server, "fs");
    CHECK_EQ_INT(loaded_mcp[0].calls, 9);
    CHECK_EQ_INT(loaded_mcp[0].starts, 2);
    for (int r = 0; r < RSTATS_MCP_REASONS; r++) CHECK_EQ_INT(loaded_mcp[0].failures[r], r + 1);
    CHECK_EQ_STR(loaded_mcp[1].server, "other");
    CHECK_EQ_INT(loaded_mcp[1].calls, 1);
    CHECK_EQ_STR(rstats_mcp_reason[RSTATS_MCP_UNAVAILABLE], "unavailable");
    nloaded = 0;
    CHECK_EQ_INT(rstats_figures_each(db, &(rstats_figures_fn){keep_model, NULL, NULL, NULL, NULL, NULL}), 1);
    /* One read gives both kinds. */
    nloaded = nloaded_mcp = 0;
    CHECK_EQ_INT(rstats_figures_each(db, &(rstats_figures_fn){keep_model, keep_mcp, NULL, "r1", NULL, NULL}), 3);
    CHECK_EQ_INT(nloaded_mcp, 2);
    /* No server used: none. */
    CHECK_EQ_INT(rstats_figures_save(db, "r1", &model, 1, NULL, 0, NULL, 0, NULL, NULL, 0), 0);
    CHECK_EQ_INT(rstats_figures_each(db, &(rstats_figures_fn){NULL, keep_mcp, NULL, "r1", NULL, NULL}), 0);
}

static rstats_retry loaded_retry[RSTATS_RETRY_CAUSES + 1];
static int nloaded_retry;

static void keep_retry(void *ud, const char *owner, const rstats_retry *r)
{
    CHECK_EQ_STR(owner, (const char *)ud);
    if (nloaded_retry <= RSTATS_RETRY_CAUSES) loaded_retry[nloaded_retry++] = *r;
}

/* Retries by cause: one count per cause, the causes past the table's size in
 * "other"; saved and read back. */
static void test_retries(void)
{
    rstats_retry v[RSTATS_RETRY_CAUSES];
    int n = 0;
    rstats_retry_count(v, &n, "529");
    rstats_retry_count(v, &n, "cut");
    rstats_retry_count(v, &n, "529");
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_STR(v[0].cause, "529");
    CHECK_EQ_INT(v[0].count, 2);
    CHECK_EQ_INT(v[1].count, 1);
    char c[RSTATS_CAUSE_MAX];
    for (int i = 0; i < 40; i++) {
        snprintf(c, sizeof c, "%d", 400 + i);
        rstats_retry_count(v, &n, c);
    }
    CHECK_EQ_INT(n, RSTATS_RETRY_CAUSES);
    CHECK_EQ_STR(v[RSTATS_RETRY_CAUSES - 1].cause, "other");
    CHECK_EQ_INT(v[RSTATS_RETRY_CAUSES - 1].count, 40 - (RSTATS_RETRY_CAUSES - 3));
    rstats_retry_count(v, &n, "529");       /* a cause with its own slot keeps it */
    CHECK_EQ_INT(v[0].count, 3);
    char db[400];
    snprintf(db, sizeof db, "%s/retries.db", dir);
    CHECK_EQ_INT(rstats_figures_save(db, "r2", NULL, 0, NULL, 0, v, n, NULL, NULL, 0), 0);
    nloaded_retry = 0;
    CHECK_EQ_INT(rstats_figures_each(db, &(rstats_figures_fn){NULL, NULL, keep_retry, "r2", NULL, NULL}), RSTATS_RETRY_CAUSES);
    CHECK_EQ_STR(loaded_retry[0].cause, "529");
    CHECK_EQ_INT(loaded_retry[0].count, 3);
    CHECK_EQ_STR(loaded_retry[1].cause, "cut");
    CHECK_EQ_STR(loaded_retry[RSTATS_RETRY_CAUSES - 1].cause, "other");
}

static rstats_otlp loaded_otlp;
static int nloaded_otlp;

static void keep_otlp(void *ud, const char *owner, const rstats_otlp *o)
{
    (void)ud;
    CHECK_EQ_STR(owner, "r3");
    loaded_otlp = *o;
    nloaded_otlp++;
}

/* The OpenTelemetry export's figures: kept only for a runner that exports, and
 * read back. */
static void test_otlp_figures(void)
{
    char db[400];
    snprintf(db, sizeof db, "%s/otlp.db", dir);
    rstats_otlp o = {41, 7, 3};
    CHECK_EQ_INT(rstats_figures_save(db, "r3", NULL, 0, NULL, 0, NULL, 0, &o, NULL, 0), 0);
    CHECK_EQ_INT(rstats_figures_each(db, &(rstats_figures_fn){NULL, NULL, NULL, NULL, keep_otlp, NULL}), 1);
    CHECK_EQ_INT(nloaded_otlp, 1);
    CHECK_EQ_INT(loaded_otlp.spans, 41);
    CHECK_EQ_INT(loaded_otlp.batches, 7);
    CHECK_EQ_INT(loaded_otlp.failures, 3);
    CHECK_EQ_INT(rstats_figures_save(db, "r3", NULL, 0, NULL, 0, NULL, 0, NULL, NULL, 0), 0);
    CHECK_EQ_INT(rstats_figures_each(db, &(rstats_figures_fn){NULL, NULL, NULL, NULL, keep_otlp, NULL}), 0);
}

static int ngone;
static int64_t ngone_status;

static void keep_gone(void *ud, const rstats *r)
{
    (void)ud, (void)r;
    ngone++;
}

static void count_gone(void *ud, const char *status, int64_t n)
{
    (void)ud, (void)status;
    ngone_status += n;
}

/* The runners' rows and the sessions counted: rows and sessions wanted (when says
 * where: printed on a mismatch). */
static void check_counts(int rows, int64_t sessions, const char *when)
{
    ngone = 0;
    ngone_status = 0;
    int ok = CHECK_EQ_INT(rstats_each(conn, keep_gone, NULL), 0);
    ok &= CHECK_EQ_INT(ngone, rows);
    ok &= CHECK_EQ_INT(rstats_sessions(conn, count_gone, NULL), 0);
    ok &= CHECK_EQ_INT(ngone_status, sessions);
    if (!ok) fprintf(stderr, "  %s\n", when);
}

/* On a database of its own: its tables go. */
static void test_without_tables(void)
{
    rstats s;
    memset(&s, 0, sizeof s);
    snprintf(s.owner, sizeof s.owner, "%s", "runner-a");
    CHECK_EQ_INT(rstats_start(conn, &s), 0);
    CHECK_EQ_INT(test_db_sql("INSERT INTO sessions (id, stream, status, created_ms, updated_ms, deleted) VALUES"
                             " ('a', 'sessions/a', 'completed', 0, 0, 0)", NULL, 0), 0);
    check_counts(1, 1, "with the tables");
    /* Without the tables (a database of an older binary): empty, not an error. */
    CHECK_EQ_INT(test_db_sql("DROP TABLE runner_stats; DROP TABLE sessions", NULL, 0), 0);
    /* (Dropped by another process: a connection made since reads the schema as it is.) */
    char err[256] = "";
    log_conn_close(conn);
    conn = log_conn_open(lg, err, sizeof err);
    if (!CHECK(conn != NULL)) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    check_counts(0, 0, "without the tables");
}

static rstats_failover loaded_fo[RSTATS_FAILOVERS];
static int nloaded_fo;

static void keep_fo(void *ud, const char *owner, const rstats_failover *f)
{
    (void)ud;
    (void)owner;
    if (nloaded_fo < RSTATS_FAILOVERS) loaded_fo[nloaded_fo++] = *f;
}

/* Failovers by pair: counted, the pairs past RSTATS_FAILOVERS - 1 under "other",
 * saved and read back beside the retries. */
static void test_failovers(void)
{
    rstats_failover v[RSTATS_FAILOVERS];
    int n = 0;
    rstats_failover_count(v, &n, "anthropic/c", "openai/g");
    rstats_failover_count(v, &n, "openai/g", "local/q");
    rstats_failover_count(v, &n, "anthropic/c", "openai/g");
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(v[0].count, 2);
    char to[32];
    for (int i = 0; i < 30; i++) {
        snprintf(to, sizeof to, "x/m%d", i);
        rstats_failover_count(v, &n, "anthropic/c", to);
    }
    CHECK_EQ_INT(n, RSTATS_FAILOVERS);
    CHECK_EQ_STR(v[RSTATS_FAILOVERS - 1].from, "other");
    CHECK_EQ_STR(v[RSTATS_FAILOVERS - 1].to, "other");
    CHECK_EQ_INT(v[RSTATS_FAILOVERS - 1].count, 30 - (RSTATS_FAILOVERS - 3));
    char db[400];
    snprintf(db, sizeof db, "%s/failovers.db", dir);
    CHECK_EQ_INT(rstats_figures_save(db, "r4", NULL, 0, NULL, 0, NULL, 0, NULL, v, n), 0);
    nloaded_fo = 0;
    CHECK_EQ_INT(rstats_figures_each(db, &(rstats_figures_fn){NULL, NULL, NULL, NULL, NULL, keep_fo}), RSTATS_FAILOVERS);
    CHECK_EQ_STR(loaded_fo[0].from, "anthropic/c");
    CHECK_EQ_STR(loaded_fo[0].to, "openai/g");
    CHECK_EQ_INT(loaded_fo[0].count, 2);
    CHECK_EQ_STR(loaded_fo[1].to, "local/q");
}

int main(void)
{
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("rstats", dir, sizeof dir, &lg, &conn) == 0) {
            test_publish();
            test_sessions();
            /* The figures files beside a database path: no engine's. */
            if (e == 0) {
                test_models();
                test_mcp();
                test_retries();
    test_otlp_figures();
                test_failovers();
            }
        }
        test_db_close(dir, lg, conn);
        if (test_db_open("rstats_without", dir, sizeof dir, &lg, &conn) == 0) test_without_tables();
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

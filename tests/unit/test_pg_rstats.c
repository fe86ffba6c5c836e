/* Unit tests for the PostgreSQL engine's runner figures (lib/store/pg/pg_runner_stats.c):
 * the figures by model, MCP server and retry cause are a row of runner_figures, not a
 * file beside the database (there is none); a row that is not a document is skipped,
 * and a database without the table reads as empty. The rows are changed by hand with
 * psql. (A database without the other tables, on both engines: test_rstats.c.) Runs
 * only when DSTREAM_TEST_PG names a cluster (tests/pg.sh). */
#include "rstats.h"

#include <string.h>

#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

static int nmodels, nretries;
static char got_owner[64];

static void keep_model(void *ud, const char *owner, const rstats_model *m)
{
    (void)ud;
    snprintf(got_owner, sizeof got_owner, "%s", owner);
    if (!strcmp(m->model, "claude-x") && m->requests == 3 && m->input_tokens == 40) nmodels++;
}

static void keep_retry(void *ud, const char *owner, const rstats_retry *r)
{
    (void)ud, (void)owner;
    if (!strcmp(r->cause, "529") && r->count == 2) nretries++;
}

static void test_figures_in_the_database(void)
{
    rstats_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.model, sizeof m.model, "%s", "claude-x");
    m.requests = 3;
    m.input_tokens = 40;
    rstats_retry r[1];
    memset(r, 0, sizeof r);
    snprintf(r[0].cause, sizeof r[0].cause, "%s", "529");
    r[0].count = 2;
    const char *uri = log_path(lg);
    CHECK_EQ_INT(rstats_figures_publish(conn, uri, "runner-f", &m, 1, NULL, 0, r, 1, NULL, NULL, 0), 0);
    /* Published again: replaced, not added. */
    CHECK_EQ_INT(rstats_figures_publish(conn, uri, "runner-f", &m, 1, NULL, 0, r, 1, NULL, NULL, 0), 0);
    nmodels = nretries = 0;
    CHECK_EQ_INT(rstats_figures_read(conn, uri, &(rstats_figures_fn){keep_model, NULL, keep_retry, NULL, NULL, NULL}), 2);
    CHECK_EQ_INT(nmodels, 1);
    CHECK_EQ_INT(nretries, 1);
    CHECK(!strcmp(got_owner, "runner-f"));
    char out[64] = "";
    CHECK_EQ_INT(test_db_psql("SELECT count(*) FROM runner_figures", out, sizeof out), 0);
    CHECK(!strncmp(out, "1", 1));
    /* A row that is not a document is skipped, not a crash. */
    CHECK_EQ_INT(test_db_psql("INSERT INTO runner_figures VALUES ('bad', 'not json')", NULL, 0), 0);
    nmodels = 0;
    CHECK_EQ_INT(rstats_figures_read(conn, uri, &(rstats_figures_fn){keep_model, NULL, NULL, NULL, NULL, NULL}), 1);
    CHECK_EQ_INT(nmodels, 1);
    /* Without the table: nothing, not an error. */
    CHECK_EQ_INT(test_db_psql("DROP TABLE runner_figures", NULL, 0), 0);
    CHECK_EQ_INT(rstats_figures_read(conn, uri, &(rstats_figures_fn){keep_model, NULL, NULL, NULL, NULL, NULL}), 0);
}

int main(void)
{
    if (!test_db_engine(1)) {
        printf("test_pg_rstats: DSTREAM_TEST_PG is not set: nothing to run\n");
        return TEST_MAIN_END();
    }
    if (test_db_open("pg-rstats", dir, sizeof dir, &lg, &conn) == 0) test_figures_in_the_database();
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

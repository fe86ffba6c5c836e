/* Unit tests for the PostgreSQL engine's subscriptions (lib/store/pg/pg_subscriptions.c)
 * in what several hosts need: two connections as two hosts, each inside a
 * transaction, never take the same delivery or end the same lease (SKIP LOCKED), a
 * read of a row that decides a write waits for the other host's and sees it (FOR
 * UPDATE), two hosts make one signing key, not two, and a subscription another host
 * made first is busy, to be tried again. (What both engines do: test_store_subscriptions.c.)
 * Runs only when DSTREAM_TEST_PG names a cluster (tests/pg.sh). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store.h"
#include "store/pg/pg.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

#define SUBS (store_of(conn)->subs)

/* The first column of the first row of sql, on the test's connection, as an
 * integer; -1 when there is no row, -2 when it is NULL, -3 on an error. */
static int64_t q(const char *sql)
{
    PGresult *r = PQexec(pgc(conn)->pg, sql);
    int64_t out = -3;
    if (PQresultStatus(r) == PGRES_TUPLES_OK)
        out = PQntuples(r) < 1 ? -1 : PQgetisnull(r, 0, 0) ? -2 : strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return out;
}

static void insert(const char *id, int webhook, const char *pattern)
{
    sub_row r = {.webhook = webhook, .pattern = (char *)pattern, .url = webhook ? "https://h.example/" : NULL,
                 .lease_ttl_ms = 1000, .created_ms = 42};
    snprintf(r.id, sizeof r.id, "%s", id);
    snprintf(r.hash, sizeof r.hash, "h-%s", id);
    CHECK_EQ_INT(SUBS->insert(conn, &r), 0);
}

static int count_id(void *ud, const char *id)
{
    (void)id;
    ++*(int *)ud;
    return 0;
}

/* ---- two hosts ------------------------------------------------------------------- */

static log_conn_t *host2;       /* a second connection: another host */

static void tx(log_conn_t *c, const char *sql)
{
    CHECK_EQ_INT(pg_simple(c, sql), 0);
}

/* Wait (at most 10 s) until some backend waits for a lock; 1 if one did. */
static int someone_waits(void)
{
    for (int i = 0; i < 1000; i++) {
        if (q("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") > 0) return 1;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

typedef struct waiter {
    log_conn_t *c;
    int rc;
    sub_row row;
    webhook_key key;
} waiter;

/* Host 2 reads the row to decide a claim, inside its transaction. */
static void *get_in_tx(void *ud)
{
    waiter *w = ud;
    pg_simple(w->c, "BEGIN");
    w->rc = store_of(w->c)->subs->get(w->c, "a", &w->row);
    pg_simple(w->c, "COMMIT");
    return NULL;
}

/* Host 2 looks for the signing key inside a transaction that would make one. */
static void *key_in_tx(void *ud)
{
    waiter *w = ud;
    pg_simple(w->c, "BEGIN");
    w->rc = store_of(w->c)->subs->key_get(w->c, &w->key);
    pg_simple(w->c, "COMMIT");
    return NULL;
}

/* The same id again (another host made it first): busy, try again. */
static void test_insert_again(void)
{
    insert("a", 1, "x/*");
    sub_row dup = {.lease_ttl_ms = 1, .created_ms = 1};
    snprintf(dup.id, sizeof dup.id, "a");
    CHECK_EQ_INT(SUBS->insert(conn, &dup), LOG_EBUSY);
}

static void test_hosts(void)
{
    const store_subs_ops *S2;
    char err[256] = "";
    host2 = log_conn_open(lg, err, sizeof err);
    if (!CHECK(host2 != NULL)) return;
    S2 = store_of(host2)->subs;

    /* One delivery per generation: a host taking the due delivery locks it; the
     * other, at the same time, finds nothing due; once the first moved it on and
     * committed, neither finds it due. */
    CHECK_EQ_INT(SUBS->wake_set(conn, "a", 4, "w_2", "{}", 1, 100), 0);
    int n1 = 0, n2 = 0;
    tx(conn, "BEGIN");
    CHECK_EQ_INT(SUBS->due(conn, 100, 4, count_id, &n1), 0);
    CHECK_EQ_INT(n1, 1);
    tx(host2, "BEGIN");
    CHECK_EQ_INT(S2->due(host2, 100, 4, count_id, &n2), 0);
    CHECK_EQ_INT(n2, 0);
    tx(host2, "COMMIT");
    CHECK_EQ_INT(SUBS->delivery_due(conn, "a", 5000, NULL), 0);
    tx(conn, "COMMIT");
    n2 = 0;
    tx(host2, "BEGIN");
    CHECK_EQ_INT(S2->due(host2, 100, 4, count_id, &n2), 0);
    CHECK_EQ_INT(n2, 0);
    tx(host2, "COMMIT");

    /* A lease ended: one host ends the wake, the other skips it meanwhile. */
    CHECK_EQ_INT(SUBS->delivery_accepted(conn, "a", 7000), 0);
    n1 = n2 = 0;
    tx(conn, "BEGIN");
    CHECK_EQ_INT(SUBS->lease_over(conn, 7000, count_id, &n1), 0);
    CHECK_EQ_INT(n1, 1);
    tx(host2, "BEGIN");
    CHECK_EQ_INT(S2->lease_over(host2, 7000, count_id, &n2), 0);
    CHECK_EQ_INT(n2, 0);
    tx(host2, "COMMIT");
    CHECK_EQ_INT(SUBS->wake_clear(conn, "a"), 0);
    tx(conn, "COMMIT");

    /* A claim: host 1 reads the row and leases it; host 2's read of it waits, then
     * sees host 1's holder (it would have claimed the same wake). */
    pthread_t th;
    waiter w = {.c = host2};
    sub_row r;
    tx(conn, "BEGIN");
    CHECK_EQ_INT(SUBS->get(conn, "a", &r), 0);
    CHECK(r.holder == NULL);
    sub_row_free(&r);
    CHECK_EQ_INT(pthread_create(&th, NULL, get_in_tx, &w), 0);
    CHECK(someone_waits());
    CHECK_EQ_INT(SUBS->lease(conn, "a", "worker-1", 9000), 0);
    tx(conn, "COMMIT");
    pthread_join(th, NULL);
    CHECK_EQ_INT(w.rc, 0);
    CHECK_EQ_STR(w.row.holder ? w.row.holder : "(none)", "worker-1");
    sub_row_free(&w.row);

    /* The first signing key: host 2 waits for host 1's and uses it. */
    webhook_key k;
    memset(&w, 0, sizeof w);
    w.c = host2;
    tx(conn, "BEGIN");
    CHECK_EQ_INT(SUBS->key_get(conn, &k), LOG_ENOTFOUND);
    CHECK_EQ_INT(pthread_create(&th, NULL, key_in_tx, &w), 0);
    CHECK(someone_waits());
    if (CHECK_EQ_INT(webhook_key_generate(&k), 0)) CHECK_EQ_INT(SUBS->key_put(conn, &k, 10), 0);
    tx(conn, "COMMIT");
    pthread_join(th, NULL);
    CHECK_EQ_INT(w.rc, 0);
    CHECK_EQ_STR(w.key.kid, k.kid);
    CHECK_EQ_INT(q("SELECT count(*) FROM webhook_keys"), 1);
    log_conn_close(host2);
}

int main(void)
{
    if (!test_db_engine(1)) {
        printf("test_pg_subscriptions: DSTREAM_TEST_PG is not set: nothing to run\n");
        return TEST_MAIN_END();
    }
    if (test_db_open("pg_subscriptions", dir, sizeof dir, &lg, &conn) == 0) {
        test_insert_again();
        test_hosts();
    }
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

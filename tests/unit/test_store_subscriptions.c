/* Unit tests for the engines' subscriptions (lib/store/sqlite/sq_subscriptions.c,
 * lib/store/pg/pg_subscriptions.c), through store_subs_ops and checked against their
 * tables (sql/sqlite/008_subscriptions.sql, sql/pg/): a row's round trip, the kinds
 * of a link (explicit, glob, both) and what unlink leaves, links listed by path in
 * byte order, a stream gone, deleted or made again, acks that only move forward,
 * tails of streams that do not exist, the wake's columns (set, leased, delivered,
 * failed, cleared), what is due and when, and the keys (a malformed newest key is
 * no key). On each engine (test_db.h); the rows are read and changed by hand with
 * the engine's command-line program (test_db_sql). What several hosts need of
 * PostgreSQL's: test_pg_subscriptions.c. */
#include <string.h>

#include "store.h"
#include "test.h"
#include "test_db.h"

static const char ZERO[] = "0000000000000000_0000000000000000";

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

#define SUBS (store_of(conn)->subs)

/* The first column of the first row of sql (its '?' the text arg), as an integer;
 * -1 when there is no row, -2 when it is NULL. */
static int64_t q(const char *sql, const char *arg)
{
    char b[512];
    return test_db_int(test_db_bind(sql, arg ? arg : "", b, sizeof b));
}

/* The same as text (into out, "" when none). */
static const char *qs(const char *sql, const char *arg, char *out, size_t cap)
{
    char b[512];
    return test_db_str(test_db_bind(sql, arg ? arg : "", b, sizeof b), out, cap);
}

static void exec_sql(const char *sql)
{
    CHECK_EQ_INT(test_db_sql(sql, NULL, 0), 0);
}

static void insert(const char *id, int webhook, const char *pattern)
{
    sub_row r = {.webhook = webhook, .pattern = (char *)pattern, .url = webhook ? "https://h.example/" : NULL,
                 .lease_ttl_ms = 1000, .created_ms = 42};
    snprintf(r.id, sizeof r.id, "%s", id);
    snprintf(r.hash, sizeof r.hash, "h-%s", id);
    CHECK_EQ_INT(SUBS->insert(conn, &r), 0);
}

static int on_pattern(void *ud, const char *id, const char *pattern, const char *wake_stream)
{
    char *s = ud;
    size_t n = strlen(s);
    snprintf(s + n, 64 - n, "%s %s %s;", id, pattern, wake_stream);
    return 0;
}

static void test_rows(void)
{
    char t[64];
    insert("a", 1, "x/*");
    insert("b", 0, NULL);
    CHECK_EQ_STR(qs("SELECT type FROM subscriptions WHERE id = ?", "a", t, sizeof t), "webhook");
    CHECK_EQ_STR(qs("SELECT type FROM subscriptions WHERE id = ?", "b", t, sizeof t), "pull-wake");
    CHECK_EQ_INT(q("SELECT pattern FROM subscriptions WHERE id = ?", "b"), -2);     /* NULL, not "" */
    sub_row r;
    CHECK_EQ_INT(SUBS->get(conn, "a", &r), 0);
    CHECK_EQ_INT(r.webhook, 1);
    CHECK_EQ_STR(r.pattern, "x/*");
    CHECK_EQ_STR(r.url, "https://h.example/");
    CHECK(r.wake_stream == NULL && r.description == NULL && r.snapshot == NULL && r.holder == NULL);
    CHECK_EQ_STR(r.hash, "h-a");
    CHECK_EQ_INT(r.created_ms, 42);
    CHECK_EQ_INT(r.lease_ttl_ms, 1000);
    CHECK_EQ_INT(r.generation, 0);
    CHECK_EQ_STR(r.wake_id, "");
    CHECK_EQ_INT(r.lease_until, 0);
    sub_row_free(&r);
    CHECK_EQ_INT(SUBS->get(conn, "nope", &r), LOG_ENOTFOUND);
    sub_row_free(&r);
    /* patterns: only those with one, wake_stream "" for none. */
    char seen[64] = "";
    CHECK_EQ_INT(SUBS->patterns(conn, on_pattern, seen), 0);
    CHECK_EQ_STR(seen, "a x/* ;");
}

static int count_id(void *ud, const char *id)
{
    (void)id;
    ++*(int *)ud;
    return 0;
}

static int stop2(void *ud, const char *id)
{
    (void)id;
    return ++*(int *)ud == 2 ? 7 : 0;
}

typedef struct seen_link {
    int n;
    char path[64], acked[OFFSET_LEN + 1], tail[OFFSET_LEN + 1];
    int explicit_;
} seen_link;

static int on_link(void *ud, const sub_link *l)
{
    seen_link *s = ud;
    s->n++;
    snprintf(s->path, sizeof s->path, "%s", l->path);
    snprintf(s->acked, sizeof s->acked, "%s", l->acked);
    snprintf(s->tail, sizeof s->tail, "%s", l->tail);
    s->explicit_ = l->explicit_;
    return 0;
}

static int on_stream(void *ud, const char *path, const char *tail)
{
    if (!strcmp(path, "x/1") && strcmp(tail, ZERO) > 0) ++*(int *)ud;
    return 0;
}

/* Paths in byte order, as SQLite's BINARY collation gives them. */
static int on_path_order(void *ud, const sub_link *l)
{
    char *s = ud;
    size_t n = strlen(s);
    snprintf(s + n, 64 - n, "%s;", l->path);
    return 0;
}

static void test_links(void)
{
    char t[64], tail[OFFSET_LEN + 1];
    const char *kind = "SELECT explicit * 10 + glob FROM subscription_links WHERE sub = 'a' AND path = ?";
    /* Kinds: a second link keeps the cursor and gains the kind. */
    CHECK_EQ_INT(SUBS->link(conn, "a", "x/1", 1, "0000000000000000_0000000000000005"), 0);
    CHECK_EQ_INT(SUBS->link(conn, "a", "x/1", 0, ZERO), 0);
    CHECK_EQ_INT(q(kind, "x/1"), 11);
    CHECK_EQ_STR(qs("SELECT acked FROM subscription_links WHERE path = ?", "x/1", t, sizeof t),
                 "0000000000000000_0000000000000005");
    /* unlink: the explicit kind goes; a glob link stays, an explicit-only one goes. */
    CHECK_EQ_INT(SUBS->unlink(conn, "a", "x/1"), 0);
    CHECK_EQ_INT(q(kind, "x/1"), 1);
    CHECK_EQ_INT(SUBS->link(conn, "a", "m/1", 1, ZERO), 0);
    CHECK_EQ_INT(SUBS->unlink(conn, "a", "m/1"), 0);
    CHECK_EQ_INT(q(kind, "m/1"), -1);

    /* A link's tail is its stream's, the start when there is none. */
    seen_link s = {0};
    CHECK_EQ_INT(SUBS->links(conn, "a", on_link, &s), 0);
    CHECK_EQ_INT(s.n, 1);
    CHECK_EQ_STR(s.tail, ZERO);
    CHECK_EQ_INT(SUBS->tail(conn, "x/1", tail), 0);
    CHECK_EQ_STR(tail, ZERO);
    test_db_append_json(conn, "x/1", "{\"a\":1}");
    CHECK_EQ_INT(SUBS->tail(conn, "x/1", tail), 1);
    CHECK(strcmp(tail, ZERO) > 0);
    log_info info;
    char head[OFFSET_LEN + 1] = "";
    if (CHECK_EQ_INT(log_head(conn, "x/1", &info), 0)) offset_format(info.tail, head);
    CHECK_EQ_STR(tail, head);       /* the stream's own tail */
    int nstreams = 0;
    CHECK_EQ_INT(SUBS->streams(conn, on_stream, &nstreams), 0);
    CHECK_EQ_INT(nstreams, 1);
    memset(&s, 0, sizeof s);
    CHECK_EQ_INT(SUBS->links(conn, "a", on_link, &s), 0);
    CHECK_EQ_STR(s.path, "x/1");
    CHECK_EQ_STR(s.tail, tail);
    CHECK_EQ_INT(s.explicit_, 0);
    /* A deleted stream's row is no stream. */
    exec_sql("UPDATE streams SET deleted = 1 WHERE path = 'x/1'");
    CHECK_EQ_INT(SUBS->tail(conn, "x/1", t), 0);
    CHECK_EQ_STR(t, ZERO);
    exec_sql("UPDATE streams SET deleted = 0 WHERE path = 'x/1'");

    /* ack: forward_only never moves a cursor back, and moves it forward. */
    CHECK_EQ_INT(SUBS->ack(conn, "a", "x/1", tail, 0), 0);
    CHECK_EQ_INT(SUBS->ack(conn, "a", "x/1", ZERO, 1), 0);
    CHECK_EQ_STR(qs("SELECT acked FROM subscription_links WHERE path = ?", "x/1", t, sizeof t), tail);
    CHECK_EQ_INT(SUBS->ack(conn, "a", "x/1", "0000000000000008_0000000000000000", 1), 0);
    CHECK_EQ_STR(qs("SELECT acked FROM subscription_links WHERE path = ?", "x/1", t, sizeof t),
                 "0000000000000008_0000000000000000");
    CHECK_EQ_INT(SUBS->ack(conn, "a", "x/1", ZERO, 0), 0);
    CHECK_EQ_STR(qs("SELECT acked FROM subscription_links WHERE path = ?", "x/1", t, sizeof t), ZERO);

    /* A stream made again: cursors past its new tail start over. */
    CHECK_EQ_INT(SUBS->ack(conn, "a", "x/1", "0000000000000009_0000000000000000", 0), 0);
    CHECK_EQ_INT(SUBS->stream_reset(conn, "x/1", tail), 0);
    CHECK_EQ_STR(qs("SELECT acked FROM subscription_links WHERE path = ?", "x/1", t, sizeof t), ZERO);
    /* A stream gone: glob-only links go, the others start over as explicit only. */
    CHECK_EQ_INT(SUBS->link(conn, "b", "x/1", 1, tail), 0);
    CHECK_EQ_INT(SUBS->link(conn, "b", "x/1", 0, tail), 0);
    int n = 0;
    CHECK_EQ_INT(SUBS->linked(conn, "x/1", count_id, &n), 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(SUBS->stream_reset(conn, "x/1", NULL), 0);
    CHECK_EQ_INT(q(kind, "x/1"), -1);
    CHECK_EQ_INT(q("SELECT explicit * 10 + glob FROM subscription_links WHERE sub = 'b' AND path = ?", "x/1"), 10);
    CHECK_EQ_STR(qs("SELECT acked FROM subscription_links WHERE sub = 'b' AND path = ?", "x/1", t, sizeof t), ZERO);

    /* Links by path in byte order, whatever the database's collation. */
    CHECK_EQ_INT(SUBS->link(conn, "b", "a_b", 1, ZERO), 0);
    CHECK_EQ_INT(SUBS->link(conn, "b", "aB", 1, ZERO), 0);
    CHECK_EQ_INT(SUBS->link(conn, "b", "A", 1, ZERO), 0);
    char order[64] = "";
    CHECK_EQ_INT(SUBS->links(conn, "b", on_path_order, order), 0);
    CHECK_EQ_STR(order, "A;aB;a_b;x/1;");
    exec_sql("DELETE FROM subscription_links WHERE sub = 'b' AND path <> 'x/1'");

    /* A walk stops where fn says, and returns what it said. */
    n = 0;
    CHECK_EQ_INT(SUBS->each(conn, count_id, &n), 0);
    CHECK_EQ_INT(n, 2);
    n = 0;
    CHECK_EQ_INT(SUBS->each(conn, stop2, &n), 7);

    /* remove takes the links with the row. */
    CHECK_EQ_INT(SUBS->remove(conn, "b"), 0);
    CHECK_EQ_INT(q("SELECT count(*) FROM subscription_links WHERE sub = ?", "b"), 0);
    CHECK_EQ_INT(q("SELECT count(*) FROM subscriptions WHERE id = ?", "b"), 0);
}

static void test_wakes(void)
{
    char t[64];
    CHECK(SUBS->next_due(conn) == INT64_MAX);
    /* A webhook wake: due for delivery at once. */
    CHECK_EQ_INT(SUBS->wake_set(conn, "a", 3, "w_1", "{\"x/1\":\"0\"}", 1, 100), 0);
    sub_row r;
    CHECK_EQ_INT(SUBS->get(conn, "a", &r), 0);
    CHECK_EQ_INT(r.generation, 3);
    CHECK_EQ_STR(r.wake_id, "w_1");
    CHECK_EQ_STR(r.snapshot, "{\"x/1\":\"0\"}");
    CHECK_EQ_INT(r.deliver, 1);
    CHECK_EQ_INT(r.next_attempt_ms, 100);
    sub_row_free(&r);
    CHECK_EQ_INT(SUBS->next_due(conn), 100);
    int n = 0;
    CHECK_EQ_INT(SUBS->due(conn, 99, 4, count_id, &n), 0);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(SUBS->due(conn, 100, 4, count_id, &n), 0);
    CHECK_EQ_INT(n, 1);
    /* In flight, then failed: counted, with its reason. */
    CHECK_EQ_INT(SUBS->delivery_due(conn, "a", 5000, NULL), 0);
    CHECK_EQ_INT(q("SELECT attempts FROM subscriptions WHERE id = ?", "a"), 0);
    CHECK_EQ_INT(SUBS->next_due(conn), 5000);
    CHECK_EQ_INT(SUBS->delivery_due(conn, "a", 6000, "HTTP 500"), 0);
    CHECK_EQ_INT(q("SELECT attempts FROM subscriptions WHERE id = ?", "a"), 1);
    CHECK_EQ_STR(qs("SELECT last_error FROM subscriptions WHERE id = ?", "a", t, sizeof t), "HTTP 500");
    /* Accepted: a lease instead of deliveries. */
    CHECK_EQ_INT(SUBS->delivery_accepted(conn, "a", 7000), 0);
    CHECK_EQ_INT(q("SELECT deliver * 10 + attempts FROM subscriptions WHERE id = ?", "a"), 0);
    CHECK_EQ_INT(q("SELECT last_error FROM subscriptions WHERE id = ?", "a"), -2);
    CHECK_EQ_INT(SUBS->next_due(conn), 7000);
    n = 0;
    CHECK_EQ_INT(SUBS->lease_over(conn, 6999, count_id, &n), 0);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_INT(SUBS->lease_over(conn, 7000, count_id, &n), 0);
    CHECK_EQ_INT(n, 1);
    /* A lease: with a holder, or renewed keeping it. */
    CHECK_EQ_INT(SUBS->lease(conn, "a", "w1", 8000), 0);
    CHECK_EQ_INT(SUBS->lease(conn, "a", NULL, 1), 0);
    CHECK_EQ_STR(qs("SELECT holder FROM subscriptions WHERE id = ?", "a", t, sizeof t), "w1");
    CHECK_EQ_INT(q("SELECT lease_until FROM subscriptions WHERE id = ?", "a"), 1);
    /* Cleared: idle again, the generation kept. */
    CHECK_EQ_INT(SUBS->wake_clear(conn, "a"), 0);
    CHECK_EQ_INT(SUBS->get(conn, "a", &r), 0);
    CHECK_EQ_STR(r.wake_id, "");
    CHECK(r.snapshot == NULL && r.holder == NULL);
    CHECK_EQ_INT(r.lease_until, 0);
    CHECK_EQ_INT(r.generation, 3);
    sub_row_free(&r);
    CHECK(SUBS->next_due(conn) == INT64_MAX);
}

static int count_key(void *ud, const webhook_key *k)
{
    (void)k;
    ++*(int *)ud;
    return 0;
}

static void test_keys(void)
{
    webhook_key k, got;
    CHECK_EQ_INT(SUBS->key_get(conn, &got), LOG_ENOTFOUND);
    if (!CHECK_EQ_INT(webhook_key_generate(&k), 0)) return;
    CHECK_EQ_INT(SUBS->key_put(conn, &k, 10), 0);
    CHECK_EQ_INT(SUBS->key_get(conn, &got), 0);
    CHECK_EQ_STR(got.kid, k.kid);
    CHECK(!memcmp(got.pub, k.pub, 32) && !memcmp(got.priv, k.priv, 32));
    /* A newer key that is not whole: no key, and not listed. */
    exec_sql(test_db_is_pg() ? "INSERT INTO webhook_keys (kid, pub, priv, created_ms) VALUES ('bad', '\\x00', '\\x00', 20)"
                             : "INSERT INTO webhook_keys (kid, pub, priv, created_ms) VALUES ('bad', x'00', x'00', 20)");
    CHECK_EQ_INT(SUBS->key_get(conn, &got), LOG_ENOTFOUND);
    int n = 0;
    CHECK_EQ_INT(SUBS->keys(conn, count_key, &n), 0);
    CHECK_EQ_INT(n, 1);
}

int main(void)
{
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("store_subscriptions", dir, sizeof dir, &lg, &conn) == 0) {
            test_rows();
            test_links();
            test_wakes();
            test_keys();
        }
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

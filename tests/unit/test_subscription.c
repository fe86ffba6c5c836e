/* Unit tests for lib/subscription.c (its pure rules are test_subrule's): the
 * state machine on a database: create and re-confirm, backfill at the tail, new
 * streams linked at their start, explicit links, webhook deliveries (taken, held
 * in flight, retried, done acking the snapshot), callbacks fenced by generation,
 * wake and token, pull-wake claims and leases, the wake stream, deletion. On
 * each engine (test_db.h: PostgreSQL's when DSTREAM_TEST_PG names a cluster). */
#include "subscription.h"

#include <string.h>

#include "store.h"
#include "timefmt.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

/* ---- on a database ---------------------------------------------------------------------- */

static int parse(const char *text, sub_config *c, char *err, size_t cap)
{
    json_t *doc = json_loads(text, 0, NULL);
    int rc = sub_config_parse(doc, c, err, cap);
    json_decref(doc);
    return rc;
}

static void put_config(const char *id, const char *text, int want_rc, int want_created)
{
    sub_config c;
    char err[256];
    if (!CHECK(parse(text, &c, err, sizeof err) == 0)) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    int created = -1;
    CHECK_EQ_INT(sub_put(conn, id, &c, &created), want_rc);
    if (!want_rc) CHECK_EQ_INT(created, want_created);
    sub_config_free(&c);
}

/* A stream's tail offset. */
static void tail(const char *path, char out[OFFSET_LEN + 1])
{
    log_info info;
    CHECK_EQ_INT(log_head(conn, path, &info), 0);
    offset_format(info.tail, out);
}

/* The link of path in GET's streams, or NULL. */
static json_t *link_of(json_t *sub, const char *path)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(sub, "streams"), i, s)
        if (!strcmp(json_string_value(json_object_get(s, "path")), path)) return s;
    return NULL;
}

static void report(const char *path)
{
    char *p = (char *)path;
    CHECK_EQ_INT(sub_changed(conn, &p, 1), 0);
}

static json_t *finish_body(const char *wake, int64_t gen, const char *stream, const char *offset, int done)
{
    json_t *j = json_pack("{s:s, s:I, s:b}", "wake_id", wake, "generation", (json_int_t)gen, "done", done);
    if (stream) json_object_set_new(j, "acks", json_pack("[{s:s, s:s}]", "stream", stream, "offset", offset));
    return j;
}

static void test_webhook_flow(void)
{
    int rc;
    char t_old[OFFSET_LEN + 1], t_new[OFFSET_LEN + 1];
    test_db_append_json(conn, "events/old", "{\"a\":1}");
    tail("events/old", t_old);
    put_config("hook", "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"manual/a\"],"
                       "\"webhook\":{\"url\":\"https://h.example.com/\"},\"lease_ttl_ms\":1000}", 0, 1);
    put_config("hook", "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"manual/a\"],"
                       "\"webhook\":{\"url\":\"https://h.example.com/\"},\"lease_ttl_ms\":1000}", 0, 0);
    put_config("hook", "{\"type\":\"webhook\",\"pattern\":\"events/**\",\"webhook\":{\"url\":\"https://h.example.com/\"}}",
               SUB_EEXISTS, 0);

    json_t *g = sub_get(conn, "hook", "https://s.example", &rc);
    if (!CHECK(g != NULL)) return;
    /* Backfilled at the tail: no replay of what was there. */
    CHECK_EQ_STR(json_string_value(json_object_get(link_of(g, "events/old"), "acked_offset")), t_old);
    CHECK_EQ_STR(json_string_value(json_object_get(link_of(g, "events/old"), "link_type")), "glob");
    CHECK_EQ_STR(json_string_value(json_object_get(link_of(g, "manual/a"), "link_type")), "explicit");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(json_object_get(g, "webhook"), "signing"),
                                                   "jwks_url")), "https://s.example/v1/stream/__ds/jwks.json");
    CHECK(json_object_get(g, "webhook_secret") == NULL);
    json_decref(g);

    /* Nothing pending: nothing due. */
    sub_delivery d[4];
    CHECK_EQ_INT(sub_recover(conn), 0);
    CHECK_EQ_INT(sub_deliveries_take(conn, timefmt_now_ms(), 5000, "https://s.example", d, 4), 0);
    CHECK(sub_next_due(conn) == INT64_MAX);

    /* A new matching stream is linked at its start and wakes the subscription. */
    test_db_append_json(conn, "events/new", "{\"b\":2}");
    tail("events/new", t_new);
    report("events/new");
    int64_t now = timefmt_now_ms();
    CHECK(sub_next_due(conn) <= now);
    int n = sub_deliveries_take(conn, now, 5000, "https://s.example", d, 4);
    if (!CHECK_EQ_INT(n, 1)) return;
    CHECK_EQ_INT(d[0].generation, 1);
    CHECK_EQ_STR(d[0].url, "https://h.example.com/");
    json_t *body = json_loads(d[0].body, 0, NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(body, "callback_url")),
                 "https://s.example/v1/stream/__ds/subscriptions/hook/callback");
    json_t *sn = NULL;
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(body, "streams"), i, s)
        if (!strcmp(json_string_value(json_object_get(s, "path")), "events/new")) sn = s;
    CHECK(sn && json_is_true(json_object_get(sn, "has_pending")));
    CHECK_EQ_STR(json_string_value(json_object_get(sn, "acked_offset")), "0000000000000000_0000000000000000");
    CHECK_EQ_STR(json_string_value(json_object_get(sn, "tail_offset")), t_new);
    char token[SUB_TOKEN_MAX];
    snprintf(token, sizeof token, "%s", json_string_value(json_object_get(body, "callback_token")));
    json_decref(body);
    /* In flight: not taken again until the hold has passed. */
    CHECK_EQ_INT(sub_deliveries_take(conn, now + 4000, 5000, "", d + 1, 3), 0);

    /* It failed: retried after a backoff, and reported as failed meanwhile. */
    CHECK_EQ_INT(sub_delivered(conn, &d[0], 0, 0, "HTTP 500", now), 0);
    g = sub_get(conn, "hook", "", &rc);
    CHECK_EQ_STR(json_string_value(json_object_get(g, "status")), "failed");
    json_decref(g);
    CHECK(sub_next_due(conn) >= now + 800 && sub_next_due(conn) <= now + 1200);
    CHECK_EQ_INT(sub_deliveries_take(conn, now + 500, 5000, "", d + 1, 3), 0);
    sub_delivery_free(&d[0]);
    n = sub_deliveries_take(conn, now + 1300, 5000, "https://s.example", d, 4);
    if (!CHECK_EQ_INT(n, 1)) return;
    CHECK_EQ_INT(d[0].generation, 1);    /* the same wake */

    /* Accepted without done: the receiver holds the lease; its callback acks. */
    CHECK_EQ_INT(sub_delivered(conn, &d[0], 1, 0, NULL, timefmt_now_ms()), 0);
    g = sub_get(conn, "hook", "", &rc);
    CHECK_EQ_STR(json_string_value(json_object_get(g, "status")), "active");
    json_decref(g);
    int next = -1;
    json_t *req = finish_body(d[0].wake_id, 1, "events/new", t_new, 0);
    CHECK_EQ_INT(sub_finish(conn, "hook", SUB_CALLBACK, "1.w_000000000000000000000000.9999999999999.x", req, &next),
                 SUB_ETOKEN);
    char forged[SUB_TOKEN_MAX];
    snprintf(forged, sizeof forged, "%s", token);
    forged[0] = '2';   /* another generation, same MAC */
    CHECK_EQ_INT(sub_finish(conn, "hook", SUB_CALLBACK, forged, req, &next), SUB_ETOKEN);
    CHECK_EQ_INT(sub_finish(conn, "hook", SUB_ACK, token, req, &next), SUB_EKIND);
    CHECK_EQ_INT(sub_finish(conn, "hook", SUB_CALLBACK, token, req, &next), 0);
    CHECK_EQ_INT(next, 0);
    json_decref(req);
    req = finish_body(d[0].wake_id, 1, "events/new", "0000000000000000_0000000000000000", 0);
    CHECK_EQ_INT(sub_finish(conn, "hook", SUB_CALLBACK, token, req, &next), SUB_EOFFSET);   /* backwards */
    json_decref(req);
    req = finish_body(d[0].wake_id, 1, "events/nope", t_new, 0);
    CHECK_EQ_INT(sub_finish(conn, "hook", SUB_CALLBACK, token, req, &next), SUB_EOFFSET);   /* not linked */
    json_decref(req);
    req = finish_body("w_111111111111111111111111", 1, NULL, NULL, 1);
    CHECK_EQ_INT(sub_finish(conn, "hook", SUB_CALLBACK, token, req, &next), SUB_EFENCED);   /* another wake */
    json_decref(req);
    req = finish_body(d[0].wake_id, 1, NULL, NULL, 1);
    CHECK_EQ_INT(sub_finish(conn, "hook", SUB_CALLBACK, token, req, &next), 0);
    CHECK_EQ_INT(sub_finish(conn, "hook", SUB_CALLBACK, token, req, &next), SUB_EFENCED);   /* done: over */
    json_decref(req);
    g = sub_get(conn, "hook", "", &rc);
    CHECK_EQ_STR(json_string_value(json_object_get(link_of(g, "events/new"), "acked_offset")), t_new);
    json_decref(g);
    /* A late outcome of an old delivery changes nothing. */
    CHECK_EQ_INT(sub_delivered(conn, &d[0], 0, 0, "late", timefmt_now_ms()), 0);
    CHECK(sub_next_due(conn) == INT64_MAX);
    sub_delivery_free(&d[0]);

    /* {"done": true} from the receiver acks the snapshot; more work wakes again. */
    test_db_append_json(conn, "events/new", "{\"c\":3}");
    report("events/new");
    n = sub_deliveries_take(conn, timefmt_now_ms(), 5000, "", d, 4);
    if (!CHECK_EQ_INT(n, 1)) return;
    CHECK_EQ_INT(d[0].generation, 2);
    test_db_append_json(conn, "manual/a", "{\"d\":4}");     /* after the snapshot */
    tail("events/new", t_new);
    CHECK_EQ_INT(sub_delivered(conn, &d[0], 1, 1, NULL, timefmt_now_ms()), 0);
    sub_delivery_free(&d[0]);
    g = sub_get(conn, "hook", "", &rc);
    CHECK_EQ_STR(json_string_value(json_object_get(link_of(g, "events/new"), "acked_offset")), t_new);
    CHECK_EQ_STR(json_string_value(json_object_get(link_of(g, "manual/a"), "acked_offset")),
                 "0000000000000000_0000000000000000");
    json_decref(g);
    n = sub_deliveries_take(conn, timefmt_now_ms(), 5000, "", d, 4);
    if (!CHECK_EQ_INT(n, 1)) return;
    CHECK_EQ_INT(d[0].generation, 3);
    /* The receiver's lease runs out: the wake ends, and a new one follows. */
    CHECK_EQ_INT(sub_delivered(conn, &d[0], 1, 0, NULL, timefmt_now_ms()), 0);
    CHECK_EQ_INT(sub_expire(conn, timefmt_now_ms() + 1001), 0);
    sub_delivery_free(&d[0]);
    n = sub_deliveries_take(conn, timefmt_now_ms(), 5000, "", d, 4);
    if (!CHECK_EQ_INT(n, 1)) return;
    CHECK_EQ_INT(d[0].generation, 4);
    sub_delivery_free(&d[0]);

    /* Membership: remove the explicit link, add one. */
    CHECK_EQ_INT(sub_stream_remove(conn, "hook", "manual/a"), 0);
    char *add[] = {"manual/b"};
    CHECK_EQ_INT(sub_streams_add(conn, "hook", add, 1), 0);
    CHECK_EQ_INT(sub_streams_add(conn, "nope", add, 1), SUB_ENOTFOUND);
    g = sub_get(conn, "hook", "", &rc);
    CHECK(link_of(g, "manual/a") == NULL);
    CHECK(link_of(g, "manual/b") != NULL);
    json_decref(g);

    CHECK_EQ_INT(sub_delete(conn, "hook"), 0);
    CHECK(sub_get(conn, "hook", "", &rc) == NULL);
    CHECK_EQ_INT(rc, SUB_ENOTFOUND);
    req = finish_body("w_x", 4, NULL, NULL, 1);
    CHECK_EQ_INT(sub_finish(conn, "hook", SUB_CALLBACK, token, req, &next), SUB_ENOTFOUND);
    json_decref(req);
}

static int count(void *ud, const void *data, size_t len, offset_t at)
{
    (void)at;
    if (len > 8 && memmem(data, len, "\"type\":\"wake\"", 13)) ++*(int *)ud;
    return 0;
}

/* The wake messages on the wake stream. */
static int wakes_on(const char *stream)
{
    log_read_req r = {.path = stream, .kind = OFFSET_START, .max_bytes = 1 << 20};
    int k = 0;
    if (log_read(conn, &r, count, &k)) return -1;
    return k;
}

static void test_pull_flow(void)
{
    int rc, next;
    char t[OFFSET_LEN + 1];
    log_create_req w = {.path = "wake/pool", .content_type = "application/json", .ttl_s = -1, .expires_ms = -1};
    CHECK_EQ_INT(log_create(conn, &w), 0);
    put_config("pull", "{\"type\":\"pull-wake\",\"pattern\":\"**\",\"wake_stream\":\"wake/pool\",\"lease_ttl_ms\":1000}",
               0, 1);
    json_t *out = NULL;
    CHECK_EQ_INT(sub_claim(conn, "pull", "w1", &out), SUB_ENOWORK);
    test_db_append_json(conn, "jobs/1", "{\"j\":1}");
    report("jobs/1");
    report("wake/pool");                    /* its own wake stream is never linked */
    CHECK_EQ_INT(wakes_on("wake/pool"), 1);
    json_t *g = sub_get(conn, "pull", "", &rc);
    CHECK(link_of(g, "wake/pool") == NULL);
    json_decref(g);

    CHECK_EQ_INT(sub_claim(conn, "pull", "w1", &out), 0);
    int64_t gen = json_integer_value(json_object_get(out, "generation"));
    CHECK_EQ_INT(gen, 1);
    char wake[64], token[SUB_TOKEN_MAX];
    snprintf(wake, sizeof wake, "%s", json_string_value(json_object_get(out, "wake_id")));
    snprintf(token, sizeof token, "%s", json_string_value(json_object_get(out, "token")));
    json_decref(out);
    CHECK_EQ_INT(sub_claim(conn, "pull", "w2", &out), SUB_ECLAIMED);
    CHECK_EQ_STR(json_string_value(json_object_get(out, "current_holder")), "w1");
    json_decref(out);

    tail("jobs/1", t);
    json_t *req = finish_body(wake, gen, "jobs/1", t, 0);
    CHECK_EQ_INT(sub_finish(conn, "pull", SUB_CALLBACK, token, req, &next), SUB_EKIND);
    CHECK_EQ_INT(sub_finish(conn, "pull", SUB_ACK, token, req, &next), 0);   /* a heartbeat */
    json_decref(req);
    /* More work, then done: a new wake (and its message) at once. */
    test_db_append_json(conn, "jobs/2", "{\"j\":2}");
    report("jobs/2");
    req = finish_body(wake, gen, "jobs/1", t, 1);
    CHECK_EQ_INT(sub_finish(conn, "pull", SUB_ACK, token, req, &next), 0);
    CHECK_EQ_INT(next, 1);
    CHECK_EQ_INT(sub_finish(conn, "pull", SUB_ACK, token, req, &next), SUB_EFENCED);
    json_decref(req);
    CHECK_EQ_INT(wakes_on("wake/pool"), 2);

    /* A claim whose lease ran out is fenced, and the next claim gets a new wake. */
    CHECK_EQ_INT(sub_claim(conn, "pull", "w1", &out), 0);
    gen = json_integer_value(json_object_get(out, "generation"));
    snprintf(wake, sizeof wake, "%s", json_string_value(json_object_get(out, "wake_id")));
    snprintf(token, sizeof token, "%s", json_string_value(json_object_get(out, "token")));
    json_decref(out);
    CHECK_EQ_INT(store_of(conn)->subs->lease(conn, "pull", NULL, 1), 0);   /* the lease ran out long ago */
    req = finish_body(wake, gen, NULL, NULL, 0);
    CHECK_EQ_INT(sub_finish(conn, "pull", SUB_RELEASE, token, req, &next), SUB_EFENCED);
    json_decref(req);
    CHECK_EQ_INT(sub_claim(conn, "pull", "w2", &out), 0);
    CHECK(json_integer_value(json_object_get(out, "generation")) > gen);
    gen = json_integer_value(json_object_get(out, "generation"));
    snprintf(wake, sizeof wake, "%s", json_string_value(json_object_get(out, "wake_id")));
    snprintf(token, sizeof token, "%s", json_string_value(json_object_get(out, "token")));
    json_decref(out);
    /* Release without acking: the work is still pending, so another wake follows. */
    req = finish_body(wake, gen, NULL, NULL, 0);
    int before = wakes_on("wake/pool");
    CHECK_EQ_INT(sub_finish(conn, "pull", SUB_RELEASE, token, req, &next), 0);
    CHECK_EQ_INT(next, 1);
    CHECK_EQ_INT(wakes_on("wake/pool"), before + 1);
    json_decref(req);
    json_t *jw = sub_jwks(conn, &rc);
    CHECK(json_array_size(json_object_get(jw, "keys")) == 1);
    json_decref(jw);
}

static void on(void *ud, int64_t id, const char *path)
{
    (void)id;
    if (path && !strcmp(path, "rev/a")) ++*(int *)ud;
}

/* log_changes must not miss a change after the stream with the highest change
 * number is deleted (sql/sqlite/008's stream_rev_floor). */
static void test_rev_floor(void)
{
    log_cursor rev = LOG_CURSOR_START;
    test_db_append_json(conn, "rev/a", "1");
    test_db_append_json(conn, "rev/b", "2");
    log_changes(conn, &rev, NULL, NULL);
    CHECK_EQ_INT(log_delete(conn, "rev/b"), 0);
    test_db_append_json(conn, "rev/a", "3");
    int seen = 0;
    log_changes(conn, &rev, on, &seen);
    CHECK_EQ_INT(seen, 1);
}

/* A change nobody subscribes to costs the runner no write. */
static void test_unrelated(void)
{
    uint64_t g0, o0, g1, o1;
    CHECK_EQ_INT(sub_delete(conn, "pull"), 0);
    put_config("jobs", "{\"type\":\"pull-wake\",\"pattern\":\"jobs/*\",\"wake_stream\":\"wake/pool\"}", 0, 1);
    test_db_append_json(conn, "nobody/x", "{}");
    log_stats(lg, &g0, &o0);
    report("nobody/x");
    log_stats(lg, &g1, &o1);
    CHECK_EQ_UINT(g1, g0);
    report("jobs/1");                   /* the pattern matches: a transaction */
    log_stats(lg, &g1, &o1);
    CHECK(g1 > g0);
}

int main(void)
{
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("subscription", dir, sizeof dir, &lg, &conn) == 0) {
            test_webhook_flow();
            test_pull_flow();
            test_rev_floor();
            test_unrelated();
        }
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

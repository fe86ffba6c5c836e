/* The PostgreSQL engine's subscriptions (lib/subscription.h): the rows, links and
 * keys of lib/store/sqlite/sq_subscriptions.c, in the same tables.
 *
 * Many hosts. SQLite's code relies on its one writer: a transaction that read a
 * subscription's row sees it unchanged until it commits. Here every host's runner
 * and pool write at once, and lib/subscription's transactions read a row, decide
 * (a claim is free, a wake is due, a delivery is of this generation) and write. So
 * that each decision is made on the row as it is: inside a transaction, get locks
 * the row it reads (FOR UPDATE: a second host's claim, finish or delivery of the
 * same subscription waits, then reads what the first committed), and the walks
 * that pick work to do (due: the deliveries to take; lease_over: the wakes whose
 * lease ended) lock what they return and skip what another host has locked (FOR
 * UPDATE SKIP LOCKED; a row another host changed is checked again against the
 * condition). Each generation is therefore delivered by one host: the taker moves
 * next_attempt_ms on before it commits, and no other host sees the row due in the
 * meantime. The first signing key is made under a transaction-scoped advisory lock
 * (key_get, when it finds none inside a transaction), so that two hosts do not
 * make two. Two hosts creating the same subscription at once: the second's insert
 * finds the first's row and fails with LOG_EBUSY (try again: it then sees it).
 *
 * Offsets are text in their canonical form and compare as text byte-wise
 * (COLLATE "C", whatever the database's default collation); the walks are in the
 * order SQLite's tables give (by id, by path). */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char ZERO[] = "0000000000000000_0000000000000000";

/* The advisory lock (pg_advisory_xact_lock) under which the first key is made. */
#define KEY_LOCK "7236828380716085504"

/* Inside a transaction (a group): reads that decide a write lock what they read. */
static int in_tx(log_conn_t *c)
{
    return pg_in_tx(c);
}

static char *dup_col(const PGresult *r, int row, int col)
{
    if (pg_null_at(r, row, col)) return NULL;
    char *s = strdup(pg_text_of(r, row, col));
    if (!s) abort();            /* out of memory, as lib/subscription does */
    return s;
}

/* A stream's tail from its (tail_seq, tail_pos) columns at i, i + 1; the start
 * when they are NULL (no such stream). */
static void tail_col(const PGresult *r, int row, int i, char out[OFFSET_LEN + 1])
{
    memcpy(out, ZERO, sizeof ZERO);
    if (pg_null_at(r, row, i)) return;
    offset_t o = {(uint64_t)pg_int_of(r, row, i), (uint64_t)pg_int_of(r, row, i + 1)};
    offset_format(o, out);
}

/* Run a statement with text parameters (NULL is NULL) and int64 ones after them. */
static int exec(log_conn_t *c, const char *sql, int ntext, const char *const *text, int nint, const int64_t *ints)
{
    pg_params p;
    pg_params_init(&p);
    for (int i = 0; i < ntext; i++) pg_text(&p, text[i]);
    for (int i = 0; i < nint; i++) pg_int(&p, ints[i]);
    return pg_exec(c, sql, &p);
}

/* Call fn with column 0 of each row of sql's result until it returns nonzero;
 * that value, else 0 or LOG_E*. */
static int walk_ids(log_conn_t *c, const char *sql, const pg_params *p, int (*fn)(void *ud, const char *id),
                    void *ud)
{
    int rc = 0;
    PGresult *r = pg_run(c, sql, p, 0, &rc);
    if (!r) return rc;
    int n = PQntuples(r);
    for (int i = 0; i < n && !rc; i++) rc = fn(ud, pg_text_of(r, i, 0));
    PQclear(r);
    return rc;
}

/* ---- rows ------------------------------------------------------------------------- */

#define ROW_SQL "SELECT type, pattern, webhook_url, wake_stream, lease_ttl_ms, description, config_hash," \
                " created_ms, generation, wake_id, snapshot, holder, lease_until, deliver, attempts," \
                " next_attempt_ms FROM subscriptions WHERE id = $1"

static int pg_sub_get(log_conn_t *c, const char *id, sub_row *o)
{
    pg_params p;
    int rc = 0;
    memset(o, 0, sizeof *o);
    pg_params_init(&p);
    pg_text(&p, id);
    PGresult *r = pg_run(c, in_tx(c) ? ROW_SQL " FOR UPDATE" : ROW_SQL, &p, 0, &rc);
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return LOG_ENOTFOUND;
    }
    snprintf(o->id, sizeof o->id, "%s", id);
    o->webhook = !strcmp(pg_text_of(r, 0, 0), "webhook");
    o->pattern = dup_col(r, 0, 1);
    o->url = dup_col(r, 0, 2);
    o->wake_stream = dup_col(r, 0, 3);
    o->lease_ttl_ms = pg_int_of(r, 0, 4);
    o->description = dup_col(r, 0, 5);
    snprintf(o->hash, sizeof o->hash, "%s", pg_text_of(r, 0, 6));
    o->created_ms = pg_int_of(r, 0, 7);
    o->generation = pg_int_of(r, 0, 8);
    if (!pg_null_at(r, 0, 9)) snprintf(o->wake_id, sizeof o->wake_id, "%s", pg_text_of(r, 0, 9));
    o->snapshot = dup_col(r, 0, 10);
    o->holder = dup_col(r, 0, 11);
    o->lease_until = pg_int_of(r, 0, 12);       /* NULL reads as 0: no lease */
    o->deliver = (int)pg_int_of(r, 0, 13);
    o->attempts = (int)pg_int_of(r, 0, 14);
    o->next_attempt_ms = pg_int_of(r, 0, 15);
    PQclear(r);
    return 0;
}

static int pg_sub_insert(log_conn_t *c, const sub_row *o)
{
    pg_params p;
    int rc = 0;
    pg_params_init(&p);
    pg_text(&p, o->id);
    pg_text(&p, o->webhook ? "webhook" : "pull-wake");
    pg_text(&p, o->pattern);
    pg_text(&p, o->url);
    pg_text(&p, o->wake_stream);
    pg_int(&p, o->lease_ttl_ms);
    pg_text(&p, o->description);
    pg_text(&p, o->hash);
    pg_int(&p, o->created_ms);
    PGresult *r = pg_run(c, "INSERT INTO subscriptions (id, type, pattern, webhook_url, wake_stream, lease_ttl_ms,"
                            " description, config_hash, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                            " ON CONFLICT (id) DO NOTHING", &p, 0, &rc);
    if (!r) return rc;
    /* Nothing inserted: another host made it since this transaction looked. */
    rc = pg_affected(r) == 1 ? 0 : LOG_EBUSY;
    PQclear(r);
    return rc;
}

static int pg_sub_remove(log_conn_t *c, const char *id)
{
    const char *t[] = {id};
    int rc = exec(c, "DELETE FROM subscription_links WHERE sub = $1", 1, t, 0, NULL);
    return rc ? rc : exec(c, "DELETE FROM subscriptions WHERE id = $1", 1, t, 0, NULL);
}

static int pg_sub_each(log_conn_t *c, int (*fn)(void *ud, const char *id), void *ud)
{
    return walk_ids(c, "SELECT id FROM subscriptions ORDER BY id COLLATE \"C\"", NULL, fn, ud);
}

static int pg_sub_patterns(log_conn_t *c,
                           int (*fn)(void *ud, const char *id, const char *pattern, const char *wake_stream),
                           void *ud)
{
    int rc = 0;
    PGresult *r = pg_run(c, "SELECT id, pattern, coalesce(wake_stream, '') FROM subscriptions"
                            " WHERE pattern IS NOT NULL ORDER BY id COLLATE \"C\"", NULL, 0, &rc);
    if (!r) return rc;
    int n = PQntuples(r);
    for (int i = 0; i < n && !rc; i++) rc = fn(ud, pg_text_of(r, i, 0), pg_text_of(r, i, 1), pg_text_of(r, i, 2));
    PQclear(r);
    return rc;
}

/* ---- links ------------------------------------------------------------------------ */

static int pg_sub_links(log_conn_t *c, const char *id, int (*fn)(void *ud, const sub_link *l), void *ud)
{
    pg_params p;
    int rc = 0;
    pg_params_init(&p);
    pg_text(&p, id);
    PGresult *r = pg_run(c, "SELECT l.path, l.explicit, l.acked, s.tail_seq, s.tail_pos FROM subscription_links l"
                            " LEFT JOIN streams s ON s.path = l.path AND s.deleted = 0 WHERE l.sub = $1"
                            " ORDER BY l.path COLLATE \"C\"", &p, 0, &rc);
    if (!r) return rc;
    int n = PQntuples(r);
    for (int i = 0; i < n && !rc; i++) {
        sub_link l;
        l.path = (char *)pg_text_of(r, i, 0);
        l.explicit_ = (int)pg_int_of(r, i, 1);
        snprintf(l.acked, sizeof l.acked, "%s", pg_text_of(r, i, 2));
        tail_col(r, i, 3, l.tail);
        rc = fn(ud, &l);
    }
    PQclear(r);
    return rc;
}

static int pg_sub_link(log_conn_t *c, const char *id, const char *path, int explicit_, const char *acked)
{
    const char *t[] = {id, path, acked};
    return exec(c, explicit_ ? "INSERT INTO subscription_links (sub, path, explicit, acked) VALUES ($1, $2, 1, $3)"
                               " ON CONFLICT (sub, path) DO UPDATE SET explicit = 1"
                             : "INSERT INTO subscription_links (sub, path, glob, acked) VALUES ($1, $2, 1, $3)"
                               " ON CONFLICT (sub, path) DO UPDATE SET glob = 1",
                3, t, 0, NULL);
}

static int pg_sub_unlink(log_conn_t *c, const char *id, const char *path)
{
    const char *t[] = {id, path};
    int rc = exec(c, "DELETE FROM subscription_links WHERE sub = $1 AND path = $2 AND glob = 0", 2, t, 0, NULL);
    return rc ? rc : exec(c, "UPDATE subscription_links SET explicit = 0 WHERE sub = $1 AND path = $2", 2, t, 0, NULL);
}

static int pg_sub_ack(log_conn_t *c, const char *id, const char *path, const char *offset, int forward_only)
{
    const char *t[] = {offset, id, path};
    return exec(c, forward_only ? "UPDATE subscription_links SET acked = $1 WHERE sub = $2 AND path = $3"
                                  " AND acked COLLATE \"C\" < $1"
                                : "UPDATE subscription_links SET acked = $1 WHERE sub = $2 AND path = $3",
                3, t, 0, NULL);
}

static int pg_sub_linked(log_conn_t *c, const char *path, int (*fn)(void *ud, const char *id), void *ud)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, path);
    return walk_ids(c, "SELECT sub FROM subscription_links WHERE path = $1 ORDER BY sub COLLATE \"C\"", &p, fn, ud);
}

static int pg_sub_stream_reset(log_conn_t *c, const char *path, const char *tail)
{
    if (!tail) {
        const char *t[] = {path};
        int rc = exec(c, "DELETE FROM subscription_links WHERE path = $1 AND explicit = 0", 1, t, 0, NULL);
        if (rc) return rc;
        const char *t2[] = {ZERO, path};
        return exec(c, "UPDATE subscription_links SET glob = 0, acked = $1 WHERE path = $2", 2, t2, 0, NULL);
    }
    const char *t[] = {ZERO, path, tail};
    return exec(c, "UPDATE subscription_links SET acked = $1 WHERE path = $2 AND acked COLLATE \"C\" > $3", 3, t, 0,
                NULL);
}

/* ---- the streams as links see them ----------------------------------------------- */

static int pg_sub_tail(log_conn_t *c, const char *path, char out[OFFSET_LEN + 1])
{
    pg_params p;
    int rc = 0;
    memcpy(out, ZERO, sizeof ZERO);
    pg_params_init(&p);
    pg_text(&p, path);
    PGresult *r = pg_run(c, "SELECT tail_seq, tail_pos FROM streams WHERE path = $1 AND deleted = 0", &p, 0, &rc);
    if (!r) return rc;
    int found = PQntuples(r) == 1;
    if (found) tail_col(r, 0, 0, out);
    PQclear(r);
    return found;
}

static int pg_sub_streams(log_conn_t *c, int (*fn)(void *ud, const char *path, const char *tail), void *ud)
{
    int rc = 0;
    PGresult *r = pg_run(c, "SELECT path, tail_seq, tail_pos FROM streams WHERE deleted = 0 ORDER BY id", NULL, 0, &rc);
    if (!r) return rc;
    char tail[OFFSET_LEN + 1];
    int n = PQntuples(r);
    for (int i = 0; i < n && !rc; i++) {
        tail_col(r, i, 1, tail);
        rc = fn(ud, pg_text_of(r, i, 0), tail);
    }
    PQclear(r);
    return rc;
}

/* ---- wakes, leases, deliveries --------------------------------------------------- */

static int pg_sub_wake_set(log_conn_t *c, const char *id, int64_t generation, const char *wake_id,
                           const char *snapshot, int deliver, int64_t next_attempt_ms)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, generation);
    pg_text(&p, wake_id);
    pg_text(&p, snapshot);
    pg_int(&p, deliver);
    pg_int(&p, next_attempt_ms);
    pg_text(&p, id);
    return pg_exec(c, "UPDATE subscriptions SET generation = $1, wake_id = $2, snapshot = $3, holder = NULL,"
                      " lease_until = NULL, deliver = $4, attempts = 0, next_attempt_ms = $5, last_error = NULL"
                      " WHERE id = $6", &p);
}

static int pg_sub_wake_clear(log_conn_t *c, const char *id)
{
    const char *t[] = {id};
    return exec(c, "UPDATE subscriptions SET wake_id = NULL, snapshot = NULL, holder = NULL, lease_until = NULL,"
                   " deliver = 0, attempts = 0, next_attempt_ms = NULL, last_error = NULL WHERE id = $1",
                1, t, 0, NULL);
}

static int pg_sub_lease(log_conn_t *c, const char *id, const char *holder, int64_t until)
{
    int64_t u[] = {until};
    if (!holder) {
        const char *t[] = {id};
        return exec(c, "UPDATE subscriptions SET lease_until = $2 WHERE id = $1", 1, t, 1, u);
    }
    const char *t[] = {holder, id};
    return exec(c, "UPDATE subscriptions SET holder = $1, lease_until = $3 WHERE id = $2", 2, t, 1, u);
}

#define LEASE_OVER "SELECT id FROM subscriptions WHERE wake_id IS NOT NULL AND deliver = 0" \
                   " AND lease_until IS NOT NULL AND lease_until <= $1 ORDER BY id COLLATE \"C\""

static int pg_sub_lease_over(log_conn_t *c, int64_t now, int (*fn)(void *ud, const char *id), void *ud)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, now);
    /* In a transaction the caller ends these wakes: only those no other host is
     * ending now (it would make the next wake too). */
    return walk_ids(c, in_tx(c) ? LEASE_OVER " FOR UPDATE SKIP LOCKED" : LEASE_OVER, &p, fn, ud);
}

#define DUE "SELECT id FROM subscriptions WHERE deliver = 1 AND next_attempt_ms <= $1" \
            " ORDER BY next_attempt_ms, id COLLATE \"C\" LIMIT $2"

static int pg_sub_due(log_conn_t *c, int64_t now, size_t max, int (*fn)(void *ud, const char *id), void *ud)
{
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, now);
    pg_int(&p, max > INT64_MAX ? INT64_MAX : (int64_t)max);
    /* In a transaction the caller takes these deliveries: one host each. */
    return walk_ids(c, in_tx(c) ? DUE " FOR UPDATE SKIP LOCKED" : DUE, &p, fn, ud);
}

static int pg_sub_delivery_due(log_conn_t *c, const char *id, int64_t at, const char *error)
{
    int64_t next[] = {at};
    if (!error) {
        const char *t[] = {id};
        return exec(c, "UPDATE subscriptions SET next_attempt_ms = $2 WHERE id = $1", 1, t, 1, next);
    }
    const char *t[] = {id, error};
    return exec(c, "UPDATE subscriptions SET attempts = attempts + 1, next_attempt_ms = $3, last_error = $2"
                   " WHERE id = $1", 2, t, 1, next);
}

static int pg_sub_delivery_accepted(log_conn_t *c, const char *id, int64_t lease_until)
{
    const char *t[] = {id};
    int64_t until[] = {lease_until};
    return exec(c, "UPDATE subscriptions SET deliver = 0, attempts = 0, next_attempt_ms = NULL, last_error = NULL,"
                   " lease_until = $2 WHERE id = $1", 1, t, 1, until);
}

static int64_t pg_sub_next_due(log_conn_t *c)
{
    int64_t due = INT64_MAX;
    int rc;
    PGresult *r = pg_run(c, "SELECT min(next_attempt_ms) FROM subscriptions WHERE deliver = 1 UNION ALL"
                            " SELECT min(lease_until) FROM subscriptions WHERE wake_id IS NOT NULL AND deliver = 0",
                         NULL, 0, &rc);
    if (!r) return due;
    for (int i = 0; i < PQntuples(r); i++)
        if (!pg_null_at(r, i, 0) && pg_int_of(r, i, 0) < due) due = pg_int_of(r, i, 0);
    PQclear(r);
    return due;
}

/* ---- keys ------------------------------------------------------------------------- */

#define KEY_SQL "SELECT kid, pub, priv FROM webhook_keys ORDER BY created_ms DESC, kid COLLATE \"C\" LIMIT 1"

/* The newest key: 0 with *k, LOG_ENOTFOUND when there is none or it is not whole. */
static int key_read(log_conn_t *c, webhook_key *k)
{
    int rc = 0;
    PGresult *r = pg_run(c, KEY_SQL, NULL, 1, &rc);     /* binary: the bytes as they are */
    if (!r) return rc;
    rc = LOG_ENOTFOUND;
    if (PQntuples(r) == 1 && PQgetlength(r, 0, 1) == 32 && PQgetlength(r, 0, 2) == 32) {
        snprintf(k->kid, sizeof k->kid, "%s", PQgetvalue(r, 0, 0));
        memcpy(k->pub, PQgetvalue(r, 0, 1), 32);
        memcpy(k->priv, PQgetvalue(r, 0, 2), 32);
        rc = 0;
    }
    PQclear(r);
    return rc;
}

static int pg_sub_key_get(log_conn_t *c, webhook_key *k)
{
    int rc = key_read(c, k);
    if (rc != LOG_ENOTFOUND || !in_tx(c)) return rc;
    /* None, inside a transaction that will make one: one host at a time, and a
     * host that waited here reads the key the first one made (a new statement sees
     * what committed meanwhile). */
    if ((rc = pg_exec(c, "SELECT pg_advisory_xact_lock(" KEY_LOCK ")", NULL))) return rc;
    return key_read(c, k);
}

static int pg_sub_key_put(log_conn_t *c, const webhook_key *k, int64_t created_ms)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, k->kid);
    pg_bytes(&p, k->pub, 32);
    pg_bytes(&p, k->priv, 32);
    pg_int(&p, created_ms);
    return pg_exec(c, "INSERT INTO webhook_keys (kid, pub, priv, created_ms) VALUES ($1, $2, $3, $4)", &p);
}

static int pg_sub_keys(log_conn_t *c, int (*fn)(void *ud, const webhook_key *k), void *ud)
{
    int rc = 0;
    PGresult *r = pg_run(c, "SELECT kid, pub FROM webhook_keys ORDER BY created_ms DESC, kid COLLATE \"C\"", NULL, 1,
                         &rc);
    if (!r) return rc;
    int n = PQntuples(r);
    for (int i = 0; i < n && !rc; i++) {
        if (PQgetlength(r, i, 1) != 32) continue;
        webhook_key k;
        memset(&k, 0, sizeof k);
        snprintf(k.kid, sizeof k.kid, "%s", PQgetvalue(r, i, 0));
        memcpy(k.pub, PQgetvalue(r, i, 1), 32);
        rc = fn(ud, &k);
    }
    PQclear(r);
    return rc;
}

const store_subs_ops pg_subs_ops = {
    .get = pg_sub_get,
    .insert = pg_sub_insert,
    .remove = pg_sub_remove,
    .each = pg_sub_each,
    .patterns = pg_sub_patterns,
    .links = pg_sub_links,
    .link = pg_sub_link,
    .unlink = pg_sub_unlink,
    .ack = pg_sub_ack,
    .linked = pg_sub_linked,
    .stream_reset = pg_sub_stream_reset,
    .tail = pg_sub_tail,
    .streams = pg_sub_streams,
    .wake_set = pg_sub_wake_set,
    .wake_clear = pg_sub_wake_clear,
    .lease = pg_sub_lease,
    .lease_over = pg_sub_lease_over,
    .due = pg_sub_due,
    .delivery_due = pg_sub_delivery_due,
    .delivery_accepted = pg_sub_delivery_accepted,
    .next_due = pg_sub_next_due,
    .key_get = pg_sub_key_get,
    .key_put = pg_sub_key_put,
    .keys = pg_sub_keys,
};

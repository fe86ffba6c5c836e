/* The SQLite engine's subscriptions (lib/subscription.h): a row per subscription
 * with the state of its wake (sql/sqlite/008_subscriptions.sql), a row per link
 * with its cursor (an offset as text: offsets in their canonical form compare as
 * text), the tails read from the streams' rows, and the webhook signing keys. */
#include "sq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char ZERO[] = "0000000000000000_0000000000000000";

static sqlite3_stmt *prep(log_conn_t *c, const char *sql)
{
    sqlite3_stmt *st = NULL;
    return sq_stmt(c, sql, &st) ? NULL : st;
}

static const char *col(sqlite3_stmt *st, int i)
{
    return (const char *)sqlite3_column_text(st, i);
}

static char *dup_col(sqlite3_stmt *st, int i)
{
    const char *s = col(st, i);
    return s ? strdup(s) : NULL;
}

/* A stream's tail from its (tail_seq, tail_pos) columns at i, i + 1; the start
 * when they are NULL (no such stream). */
static void tail_col(sqlite3_stmt *st, int i, char out[OFFSET_LEN + 1])
{
    memcpy(out, ZERO, sizeof ZERO);
    if (sqlite3_column_type(st, i) == SQLITE_NULL) return;
    offset_t o = {(uint64_t)sqlite3_column_int64(st, i), (uint64_t)sqlite3_column_int64(st, i + 1)};
    offset_format(o, out);
}

/* Run sql with text parameters (NULL binds NULL) and int64 ones after them. */
static int exec(log_conn_t *c, const char *sql, int ntext, const char *const *text, int nint, const int64_t *ints)
{
    sqlite3_stmt *st = prep(c, sql);
    if (!st) return LOG_EIO;
    for (int i = 0; i < ntext; i++) sqlite3_bind_text(st, i + 1, text[i], -1, SQLITE_STATIC);
    for (int i = 0; i < nint; i++) sqlite3_bind_int64(st, ntext + i + 1, ints[i]);
    return sq_stmt_run(c, st);
}

/* Call fn with the text of column 0 of each row of st until it returns nonzero. */
static int walk_ids(log_conn_t *c, sqlite3_stmt *st, int (*fn)(void *ud, const char *id), void *ud)
{
    int rc, stop = 0;
    while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) stop = fn(ud, col(st, 0));
    if (stop) {
        sq_stmt_done(c, st);
        return stop;
    }
    return sq_stmt_finish(c, st, rc);
}

/* ---- rows ------------------------------------------------------------------------- */

static int sq_get(log_conn_t *c, const char *id, sub_row *r)
{
    memset(r, 0, sizeof *r);
    sqlite3_stmt *st = prep(c, "SELECT type, pattern, webhook_url, wake_stream, lease_ttl_ms, description, config_hash,"
                               " created_ms, generation, wake_id, snapshot, holder, lease_until, deliver, attempts,"
                               " next_attempt_ms FROM subscriptions WHERE id = ?");
    if (!st) return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        if (rc != SQLITE_DONE) return sq_stmt_finish(c, st, rc);
        sq_stmt_done(c, st);
        return LOG_ENOTFOUND;
    }
    snprintf(r->id, sizeof r->id, "%s", id);
    r->webhook = !strcmp(col(st, 0), "webhook");
    r->pattern = dup_col(st, 1);
    r->url = dup_col(st, 2);
    r->wake_stream = dup_col(st, 3);
    r->lease_ttl_ms = sqlite3_column_int64(st, 4);
    r->description = dup_col(st, 5);
    snprintf(r->hash, sizeof r->hash, "%s", col(st, 6));
    r->created_ms = sqlite3_column_int64(st, 7);
    r->generation = sqlite3_column_int64(st, 8);
    if (col(st, 9)) snprintf(r->wake_id, sizeof r->wake_id, "%s", col(st, 9));
    r->snapshot = dup_col(st, 10);
    r->holder = dup_col(st, 11);
    r->lease_until = sqlite3_column_type(st, 12) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 12);
    r->deliver = sqlite3_column_int(st, 13);
    r->attempts = sqlite3_column_int(st, 14);
    r->next_attempt_ms = sqlite3_column_int64(st, 15);
    sq_stmt_done(c, st);
    return 0;
}

static int sq_insert(log_conn_t *c, const sub_row *r)
{
    sqlite3_stmt *st = prep(c, "INSERT INTO subscriptions (id, type, pattern, webhook_url, wake_stream, lease_ttl_ms,"
                               " description, config_hash, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!st) return LOG_EIO;
    sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->webhook ? "webhook" : "pull-wake", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->pattern, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, r->url, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, r->wake_stream, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, r->lease_ttl_ms);
    sqlite3_bind_text(st, 7, r->description, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, r->hash, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, r->created_ms);
    return sq_stmt_run(c, st);
}

static int sq_remove(log_conn_t *c, const char *id)
{
    const char *t[] = {id};
    int rc = exec(c, "DELETE FROM subscription_links WHERE sub = ?", 1, t, 0, NULL);
    return rc ? rc : exec(c, "DELETE FROM subscriptions WHERE id = ?", 1, t, 0, NULL);
}

static int sq_each(log_conn_t *c, int (*fn)(void *ud, const char *id), void *ud)
{
    sqlite3_stmt *st = prep(c, "SELECT id FROM subscriptions");
    return st ? walk_ids(c, st, fn, ud) : LOG_EIO;
}

static int sq_patterns(log_conn_t *c,
                       int (*fn)(void *ud, const char *id, const char *pattern, const char *wake_stream), void *ud)
{
    sqlite3_stmt *st = prep(c, "SELECT id, pattern, coalesce(wake_stream, '') FROM subscriptions"
                               " WHERE pattern IS NOT NULL ORDER BY id");
    if (!st) return LOG_EIO;
    int rc, stop = 0;
    while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) stop = fn(ud, col(st, 0), col(st, 1), col(st, 2));
    if (stop) {
        sq_stmt_done(c, st);
        return stop;
    }
    return sq_stmt_finish(c, st, rc);
}

/* ---- links ------------------------------------------------------------------------ */

static int sq_links(log_conn_t *c, const char *id, int (*fn)(void *ud, const sub_link *l), void *ud)
{
    sqlite3_stmt *st = prep(c, "SELECT l.path, l.explicit, l.acked, s.tail_seq, s.tail_pos FROM subscription_links l"
                               " LEFT JOIN streams s ON s.path = l.path AND s.deleted = 0 WHERE l.sub = ?"
                               " ORDER BY l.path");
    if (!st) return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc, stop = 0;
    while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        sub_link l;
        l.path = (char *)col(st, 0);
        l.explicit_ = sqlite3_column_int(st, 1);
        snprintf(l.acked, sizeof l.acked, "%s", col(st, 2));
        tail_col(st, 3, l.tail);
        stop = fn(ud, &l);
    }
    if (stop) {
        sq_stmt_done(c, st);
        return stop;
    }
    return sq_stmt_finish(c, st, rc);
}

static int sq_link(log_conn_t *c, const char *id, const char *path, int explicit_, const char *acked)
{
    const char *t[] = {id, path, acked};
    return exec(c, explicit_ ? "INSERT INTO subscription_links (sub, path, explicit, acked) VALUES (?, ?, 1, ?)"
                               " ON CONFLICT(sub, path) DO UPDATE SET explicit = 1"
                             : "INSERT INTO subscription_links (sub, path, glob, acked) VALUES (?, ?, 1, ?)"
                               " ON CONFLICT(sub, path) DO UPDATE SET glob = 1",
                3, t, 0, NULL);
}

static int sq_unlink(log_conn_t *c, const char *id, const char *path)
{
    const char *t[] = {id, path};
    int rc = exec(c, "DELETE FROM subscription_links WHERE sub = ? AND path = ? AND glob = 0", 2, t, 0, NULL);
    return rc ? rc : exec(c, "UPDATE subscription_links SET explicit = 0 WHERE sub = ? AND path = ?", 2, t, 0, NULL);
}

static int sq_ack(log_conn_t *c, const char *id, const char *path, const char *offset, int forward_only)
{
    const char *t[] = {offset, id, path};
    return exec(c, forward_only ? "UPDATE subscription_links SET acked = ?1 WHERE sub = ?2 AND path = ?3 AND acked < ?1"
                                : "UPDATE subscription_links SET acked = ?1 WHERE sub = ?2 AND path = ?3",
                3, t, 0, NULL);
}

static int sq_linked(log_conn_t *c, const char *path, int (*fn)(void *ud, const char *id), void *ud)
{
    sqlite3_stmt *st = prep(c, "SELECT sub FROM subscription_links WHERE path = ?");
    if (!st) return LOG_EIO;
    sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
    return walk_ids(c, st, fn, ud);
}

static int sq_stream_reset(log_conn_t *c, const char *path, const char *tail)
{
    if (!tail) {
        const char *t[] = {path};
        int rc = exec(c, "DELETE FROM subscription_links WHERE path = ? AND explicit = 0", 1, t, 0, NULL);
        if (rc) return rc;
        const char *t2[] = {ZERO, path};
        return exec(c, "UPDATE subscription_links SET glob = 0, acked = ? WHERE path = ?", 2, t2, 0, NULL);
    }
    const char *t[] = {ZERO, path, tail};
    return exec(c, "UPDATE subscription_links SET acked = ? WHERE path = ? AND acked > ?", 3, t, 0, NULL);
}

/* ---- the streams as links see them ----------------------------------------------- */

static int sq_tail(log_conn_t *c, const char *path, char out[OFFSET_LEN + 1])
{
    memcpy(out, ZERO, sizeof ZERO);
    sqlite3_stmt *st = prep(c, "SELECT tail_seq, tail_pos FROM streams WHERE path = ? AND deleted = 0");
    if (!st) return LOG_EIO;
    sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) tail_col(st, 0, out);
    sq_stmt_done(c, st);
    return rc == SQLITE_ROW;
}

static int sq_streams(log_conn_t *c, int (*fn)(void *ud, const char *path, const char *tail), void *ud)
{
    sqlite3_stmt *st = prep(c, "SELECT path, tail_seq, tail_pos FROM streams WHERE deleted = 0");
    if (!st) return LOG_EIO;
    int rc, stop = 0;
    char tail[OFFSET_LEN + 1];
    while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        tail_col(st, 1, tail);
        stop = fn(ud, col(st, 0), tail);
    }
    if (stop) {
        sq_stmt_done(c, st);
        return stop;
    }
    return sq_stmt_finish(c, st, rc);
}

/* ---- wakes, leases, deliveries --------------------------------------------------- */

static int sq_wake_set(log_conn_t *c, const char *id, int64_t generation, const char *wake_id, const char *snapshot,
                       int deliver, int64_t next_attempt_ms)
{
    sqlite3_stmt *st = prep(c, "UPDATE subscriptions SET generation = ?, wake_id = ?, snapshot = ?, holder = NULL,"
                               " lease_until = NULL, deliver = ?, attempts = 0, next_attempt_ms = ?,"
                               " last_error = NULL WHERE id = ?");
    if (!st) return LOG_EIO;
    sqlite3_bind_int64(st, 1, generation);
    sqlite3_bind_text(st, 2, wake_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, snapshot, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, deliver);
    sqlite3_bind_int64(st, 5, next_attempt_ms);
    sqlite3_bind_text(st, 6, id, -1, SQLITE_STATIC);
    return sq_stmt_run(c, st);
}

static int sq_wake_clear(log_conn_t *c, const char *id)
{
    const char *t[] = {id};
    return exec(c, "UPDATE subscriptions SET wake_id = NULL, snapshot = NULL, holder = NULL, lease_until = NULL,"
                   " deliver = 0, attempts = 0, next_attempt_ms = NULL, last_error = NULL WHERE id = ?",
                1, t, 0, NULL);
}

static int sq_lease(log_conn_t *c, const char *id, const char *holder, int64_t until)
{
    int64_t u[] = {until};
    if (!holder) {
        const char *t[] = {id};
        return exec(c, "UPDATE subscriptions SET lease_until = ?2 WHERE id = ?1", 1, t, 1, u);
    }
    const char *t[] = {holder, id};
    return exec(c, "UPDATE subscriptions SET holder = ?1, lease_until = ?3 WHERE id = ?2", 2, t, 1, u);
}

static int sq_lease_over(log_conn_t *c, int64_t now, int (*fn)(void *ud, const char *id), void *ud)
{
    sqlite3_stmt *st = prep(c, "SELECT id FROM subscriptions WHERE wake_id IS NOT NULL AND deliver = 0"
                               " AND lease_until IS NOT NULL AND lease_until <= ?");
    if (!st) return LOG_EIO;
    sqlite3_bind_int64(st, 1, now);
    return walk_ids(c, st, fn, ud);
}

static int sq_due(log_conn_t *c, int64_t now, size_t max, int (*fn)(void *ud, const char *id), void *ud)
{
    sqlite3_stmt *st = prep(c, "SELECT id FROM subscriptions WHERE deliver = 1 AND next_attempt_ms <= ?"
                               " ORDER BY next_attempt_ms LIMIT ?");
    if (!st) return LOG_EIO;
    sqlite3_bind_int64(st, 1, now);
    sqlite3_bind_int64(st, 2, (int64_t)max);
    return walk_ids(c, st, fn, ud);
}

static int sq_delivery_due(log_conn_t *c, const char *id, int64_t at, const char *error)
{
    int64_t next[] = {at};
    if (!error) {
        const char *t[] = {id};
        return exec(c, "UPDATE subscriptions SET next_attempt_ms = ?2 WHERE id = ?1", 1, t, 1, next);
    }
    const char *t[] = {id, error};
    return exec(c, "UPDATE subscriptions SET attempts = attempts + 1, next_attempt_ms = ?3, last_error = ?2"
                   " WHERE id = ?1", 2, t, 1, next);
}

static int sq_delivery_accepted(log_conn_t *c, const char *id, int64_t lease_until)
{
    const char *t[] = {id};
    int64_t until[] = {lease_until};
    return exec(c, "UPDATE subscriptions SET deliver = 0, attempts = 0, next_attempt_ms = NULL, last_error = NULL,"
                   " lease_until = ?2 WHERE id = ?1", 1, t, 1, until);
}

static int64_t sq_next_due(log_conn_t *c)
{
    int64_t due = INT64_MAX;
    sqlite3_stmt *st = prep(c, "SELECT min(next_attempt_ms) FROM subscriptions WHERE deliver = 1 UNION ALL"
                               " SELECT min(lease_until) FROM subscriptions WHERE wake_id IS NOT NULL AND deliver = 0");
    if (!st) return due;
    while (sqlite3_step(st) == SQLITE_ROW)
        if (sqlite3_column_type(st, 0) != SQLITE_NULL && sqlite3_column_int64(st, 0) < due)
            due = sqlite3_column_int64(st, 0);
    sq_stmt_done(c, st);
    return due;
}

/* ---- keys ------------------------------------------------------------------------- */

static int sq_key_get(log_conn_t *c, webhook_key *k)
{
    sqlite3_stmt *st = prep(c, "SELECT kid, pub, priv FROM webhook_keys ORDER BY created_ms DESC, kid LIMIT 1");
    if (!st) return LOG_EIO;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_bytes(st, 1) == 32 && sqlite3_column_bytes(st, 2) == 32) {
        snprintf(k->kid, sizeof k->kid, "%s", col(st, 0));
        memcpy(k->pub, sqlite3_column_blob(st, 1), 32);
        memcpy(k->priv, sqlite3_column_blob(st, 2), 32);
        sq_stmt_done(c, st);
        return 0;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_stmt_finish(c, st, rc);
    sq_stmt_done(c, st);
    return LOG_ENOTFOUND;
}

static int sq_key_put(log_conn_t *c, const webhook_key *k, int64_t created_ms)
{
    sqlite3_stmt *st = prep(c, "INSERT INTO webhook_keys (kid, pub, priv, created_ms) VALUES (?, ?, ?, ?)");
    if (!st) return LOG_EIO;
    sqlite3_bind_text(st, 1, k->kid, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, k->pub, 32, SQLITE_STATIC);
    sqlite3_bind_blob(st, 3, k->priv, 32, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, created_ms);
    return sq_stmt_run(c, st);
}

static int sq_keys(log_conn_t *c, int (*fn)(void *ud, const webhook_key *k), void *ud)
{
    sqlite3_stmt *st = prep(c, "SELECT kid, pub FROM webhook_keys ORDER BY created_ms DESC, kid");
    if (!st) return LOG_EIO;
    int rc, stop = 0;
    while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (sqlite3_column_bytes(st, 1) != 32) continue;
        webhook_key p;
        memset(&p, 0, sizeof p);
        snprintf(p.kid, sizeof p.kid, "%s", col(st, 0));
        memcpy(p.pub, sqlite3_column_blob(st, 1), 32);
        stop = fn(ud, &p);
    }
    if (stop) {
        sq_stmt_done(c, st);
        return stop;
    }
    return sq_stmt_finish(c, st, rc);
}

const store_subs_ops sq_subs_ops = {
    .get = sq_get,
    .insert = sq_insert,
    .remove = sq_remove,
    .each = sq_each,
    .patterns = sq_patterns,
    .links = sq_links,
    .link = sq_link,
    .unlink = sq_unlink,
    .ack = sq_ack,
    .linked = sq_linked,
    .stream_reset = sq_stream_reset,
    .tail = sq_tail,
    .streams = sq_streams,
    .wake_set = sq_wake_set,
    .wake_clear = sq_wake_clear,
    .lease = sq_lease,
    .lease_over = sq_lease_over,
    .due = sq_due,
    .delivery_due = sq_delivery_due,
    .delivery_accepted = sq_delivery_accepted,
    .next_due = sq_next_due,
    .key_get = sq_key_get,
    .key_put = sq_key_put,
    .keys = sq_keys,
};

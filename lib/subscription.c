#include "subscription.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "sha256.h"
#include "store/sqlite/sqlite.h"
#include "timefmt.h"
#include "utf8.h"

static const char ZERO[] = "0000000000000000_0000000000000000";

/* ---- statements ---------------------------------------------------------------------- */

static sqlite3_stmt *prep(log_conn_t *c, const char *sql)
{
    sqlite3_stmt *st = NULL;
    return log_stmt(c, sql, &st) ? NULL : st;
}


/* Run sql with text parameters (NULL binds NULL) and int64 ones after them. */
static int exec(log_conn_t *c, const char *sql, int ntext, const char *const *text, int nint, const int64_t *ints)
{
    sqlite3_stmt *st = prep(c, sql);
    if (!st) return LOG_EIO;
    for (int i = 0; i < ntext; i++) sqlite3_bind_text(st, i + 1, text[i], -1, SQLITE_STATIC);
    for (int i = 0; i < nint; i++) sqlite3_bind_int64(st, ntext + i + 1, ints[i]);
    return log_stmt_finish(c, st, sqlite3_step(st));
}

static const char *col(sqlite3_stmt *st, int i)
{
    return (const char *)sqlite3_column_text(st, i);
}

/* One subscription's row (what the state machine needs). */
typedef struct row {
    char id[SUB_ID_MAX + 1];
    int webhook;
    char *pattern, *url, *wake_stream, *description, *snapshot, *holder;
    char hash[65];
    int64_t lease_ttl_ms, created_ms, generation, lease_until, next_attempt_ms;
    char wake_id[SUB_WAKE_ID_LEN + 1];     /* "" when idle */
    int deliver, attempts;
} row;

static char *dup_col(sqlite3_stmt *st, int i)
{
    const char *s = col(st, i);
    return s ? strdup(s) : NULL;
}

static void row_free(row *r)
{
    free(r->pattern);
    free(r->url);
    free(r->wake_stream);
    free(r->description);
    free(r->snapshot);
    free(r->holder);
}

static int row_load(log_conn_t *c, const char *id, row *r)
{
    memset(r, 0, sizeof *r);
    sqlite3_stmt *st = prep(c, "SELECT type, pattern, webhook_url, wake_stream, lease_ttl_ms, description, config_hash,"
                               " created_ms, generation, wake_id, snapshot, holder, lease_until, deliver, attempts,"
                               " next_attempt_ms FROM subscriptions WHERE id = ?");
    if (!st) return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) return rc == SQLITE_DONE ? (log_stmt_done(c, st), SUB_ENOTFOUND) : log_stmt_finish(c, st, rc);
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
    log_stmt_done(c, st);
    return 0;
}

/* A stream's tail as an offset string; the start when it does not exist. */
static void tail_of(log_conn_t *c, const char *path, char out[OFFSET_LEN + 1], int *exists)
{
    sqlite3_stmt *st = prep(c, "SELECT tail_seq, tail_pos FROM streams WHERE path = ? AND deleted = 0");
    memcpy(out, ZERO, sizeof ZERO);
    if (exists) *exists = 0;
    if (!st) return;
    sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        offset_t o = {(uint64_t)sqlite3_column_int64(st, 0), (uint64_t)sqlite3_column_int64(st, 1)};
        offset_format(o, out);
        if (exists) *exists = 1;
    }
    log_stmt_done(c, st);
}

typedef struct link {
    char *path;
    int explicit_;
    char acked[OFFSET_LEN + 1];
    char tail[OFFSET_LEN + 1];
} link_t;

static void links_free(link_t *l, size_t n)
{
    for (size_t i = 0; i < n; i++) free(l[i].path);
    free(l);
}

/* Every link of id with its stream's tail now, by path. */
static int links_load(log_conn_t *c, const char *id, link_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = prep(c, "SELECT l.path, l.explicit, l.acked, s.tail_seq, s.tail_pos FROM subscription_links l"
                               " LEFT JOIN streams s ON s.path = l.path AND s.deleted = 0 WHERE l.sub = ?"
                               " ORDER BY l.path");
    if (!st) return LOG_EIO;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            link_t *m = realloc(*out, cap * sizeof *m);
            if (!m) abort();
            *out = m;
        }
        link_t *l = &(*out)[(*n)++];
        l->path = strdup(col(st, 0));
        l->explicit_ = sqlite3_column_int(st, 1);
        snprintf(l->acked, sizeof l->acked, "%s", col(st, 2));
        memcpy(l->tail, ZERO, sizeof ZERO);
        if (sqlite3_column_type(st, 3) != SQLITE_NULL) {
            offset_t o = {(uint64_t)sqlite3_column_int64(st, 3), (uint64_t)sqlite3_column_int64(st, 4)};
            offset_format(o, l->tail);
        }
    }
    return log_stmt_finish(c, st, rc);
}

static int pending(const link_t *l)
{
    return strcmp(l->tail, l->acked) > 0;
}

/* The streams of a wake or a claim: tails from snapshot (a JSON object) if given,
 * else the current ones. */
static json_t *stream_infos(const link_t *l, size_t n, const json_t *snapshot)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        const char *tail = l[i].tail;
        json_t *path = utf8_json(l[i].path);
        if (snapshot) {
            const char *t = json_string_value(json_object_get(snapshot, json_string_value(path)));
            if (t) tail = t;
        }
        json_array_append_new(a, json_pack("{s:o, s:s, s:s, s:s, s:b}", "path", path, "link_type",
                                           l[i].explicit_ ? "explicit" : "glob", "acked_offset", l[i].acked,
                                           "tail_offset", tail, "has_pending", strcmp(tail, l[i].acked) > 0));
    }
    return a;
}

/* ---- keys (the tokens they sign are lib/subrule's) ------------------------------------ */

static int key_load(log_conn_t *c, webhook_key *k)
{
    sqlite3_stmt *st = prep(c, "SELECT kid, pub, priv FROM webhook_keys ORDER BY created_ms DESC, kid LIMIT 1");
    if (!st) return LOG_EIO;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_bytes(st, 1) == 32 && sqlite3_column_bytes(st, 2) == 32) {
        snprintf(k->kid, sizeof k->kid, "%s", col(st, 0));
        memcpy(k->pub, sqlite3_column_blob(st, 1), 32);
        memcpy(k->priv, sqlite3_column_blob(st, 2), 32);
        log_stmt_done(c, st);
        return 0;
    }
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? (log_stmt_done(c, st), SUB_ENOTFOUND) : log_stmt_finish(c, st, rc);
}

/* The signing key, made on first use (inside a transaction). */
static int key_ensure(log_conn_t *c, webhook_key *k)
{
    int rc = key_load(c, k);
    if (rc != SUB_ENOTFOUND) return rc;
    if (webhook_key_generate(k)) return LOG_EIO;
    sqlite3_stmt *st = prep(c, "INSERT INTO webhook_keys (kid, pub, priv, created_ms) VALUES (?, ?, ?, ?)");
    if (!st) return LOG_EIO;
    sqlite3_bind_text(st, 1, k->kid, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, k->pub, 32, SQLITE_STATIC);
    sqlite3_bind_blob(st, 3, k->priv, 32, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, timefmt_now_ms());
    return log_stmt_finish(c, st, sqlite3_step(st));
}

/* ---- wakes --------------------------------------------------------------------------- */

static void new_wake_id(char out[SUB_WAKE_ID_LEN + 1])
{
    uint8_t b[12];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) abort();
    memcpy(out, "w_", 2);
    sha256_hex(b, sizeof b, out + 2);
}

/* Forget the current wake: holder, lease, delivery. */
static int clear_wake(log_conn_t *c, const char *id)
{
    const char *t[] = {id};
    return exec(c, "UPDATE subscriptions SET wake_id = NULL, snapshot = NULL, holder = NULL, lease_until = NULL,"
                   " deliver = 0, attempts = 0, next_attempt_ms = NULL, last_error = NULL WHERE id = ?",
                1, t, 0, NULL);
}

/* A wake message on a pull-wake subscription's wake stream (which the application
 * made; if it is missing or closed there is no one to tell, and claims still work). */
static int wake_event(log_conn_t *c, const row *r, const char *stream, int64_t gen, int64_t now)
{
    json_t *ev = json_pack("{s:s, s:s, s:o, s:I, s:I}", "type", "wake", "subscription_id", r->id, "stream",
                           utf8_json(stream), "generation", (json_int_t)gen, "ts", (json_int_t)now);
    char *text = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (!text) return LOG_EIO;      /* out of memory: strings here are UTF-8 (utf8_json) */
    log_msg m = {text, strlen(text)};
    log_append_req a = {.path = r->wake_stream, .msgs = &m, .nmsgs = 1};
    int rc = log_tx_append(c, &a);
    free(text);
    return rc == LOG_EBUSY || rc == LOG_EIO ? rc : 0;
}

/* If r is idle and has pending work, make a wake. *made 1 if it did. */
static int wake_if_pending(log_conn_t *c, const row *r, int *made)
{
    if (made) *made = 0;
    if (r->wake_id[0] || r->holder) return 0;
    link_t *l;
    size_t n;
    int rc = links_load(c, r->id, &l, &n);
    if (rc) return rc;
    const char *first = NULL;
    json_t *snap = json_object();
    for (size_t i = 0; i < n; i++) {
        if (!first && pending(&l[i])) first = l[i].path;
        /* Keyed as claims show the path (a stream made before paths had to be
         * UTF-8 has U+FFFD for its bad bytes, lib/utf8). */
        json_t *key = utf8_json(l[i].path);
        if (key) json_object_set_new(snap, json_string_value(key), json_string(l[i].tail));
        json_decref(key);
    }
    if (first) {
        int64_t now = timefmt_now_ms(), gen = r->generation + 1;
        char wake[SUB_WAKE_ID_LEN + 1];
        new_wake_id(wake);
        char *text = json_dumps(snap, JSON_COMPACT | JSON_SORT_KEYS);
        sqlite3_stmt *st = prep(c, "UPDATE subscriptions SET generation = ?, wake_id = ?, snapshot = ?, holder = NULL,"
                                   " lease_until = NULL, deliver = ?, attempts = 0, next_attempt_ms = ?,"
                                   " last_error = NULL WHERE id = ?");
        if (!st) rc = LOG_EIO;
        else {
            sqlite3_bind_int64(st, 1, gen);
            sqlite3_bind_text(st, 2, wake, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 3, text, -1, SQLITE_STATIC);
            sqlite3_bind_int(st, 4, r->webhook);
            sqlite3_bind_int64(st, 5, now);
            sqlite3_bind_text(st, 6, r->id, -1, SQLITE_STATIC);
            rc = log_stmt_finish(c, st, sqlite3_step(st));
        }
        free(text);
        if (!rc && !r->webhook) rc = wake_event(c, r, first, gen, now);
        if (!rc && made) *made = 1;
    }
    json_decref(snap);
    links_free(l, n);
    return rc;
}

static int wake_id_pending(log_conn_t *c, const char *id, int *made)
{
    row r;
    int rc = row_load(c, id, &r);
    if (!rc) rc = wake_if_pending(c, &r, made);
    row_free(&r);
    return rc == SUB_ENOTFOUND ? 0 : rc;
}

/* ---- create, read, delete, membership ------------------------------------------------ */

/* Link path to id (explicit or glob) at acked if it is new; an existing link
 * keeps its cursor and gains the kind. */
static int link_add(log_conn_t *c, const char *id, const char *path, int explicit_, const char *acked)
{
    const char *t[] = {id, path, acked};
    return exec(c, explicit_ ? "INSERT INTO subscription_links (sub, path, explicit, acked) VALUES (?, ?, 1, ?)"
                               " ON CONFLICT(sub, path) DO UPDATE SET explicit = 1"
                             : "INSERT INTO subscription_links (sub, path, glob, acked) VALUES (?, ?, 1, ?)"
                               " ON CONFLICT(sub, path) DO UPDATE SET glob = 1",
                3, t, 0, NULL);
}

typedef struct put_arg {
    const char *id;
    const sub_config *cfg;
    int created;
} put_arg;

static int op_put(log_conn_t *c, void *arg)
{
    put_arg *a = arg;
    const sub_config *cfg = a->cfg;
    row r;
    int rc = row_load(c, a->id, &r);
    if (rc != SUB_ENOTFOUND) {
        if (!rc && strcmp(r.hash, cfg->hash)) rc = SUB_EEXISTS;
        row_free(&r);
        return rc;
    }
    a->created = 1;
    webhook_key k;
    if (cfg->webhook && (rc = key_ensure(c, &k))) return rc;
    sqlite3_stmt *st = prep(c, "INSERT INTO subscriptions (id, type, pattern, webhook_url, wake_stream, lease_ttl_ms,"
                               " description, config_hash, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!st) return LOG_EIO;
    sqlite3_bind_text(st, 1, a->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, cfg->webhook ? "webhook" : "pull-wake", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, cfg->pattern, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, cfg->url, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, cfg->wake_stream, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, cfg->lease_ttl_ms);
    sqlite3_bind_text(st, 7, cfg->description, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, cfg->hash, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, timefmt_now_ms());
    if ((rc = log_stmt_finish(c, st, sqlite3_step(st)))) return rc;
    char tail[OFFSET_LEN + 1];
    for (size_t i = 0; i < cfg->nstreams; i++) {
        tail_of(c, cfg->streams[i], tail, NULL);
        if ((rc = link_add(c, a->id, cfg->streams[i], 1, tail))) return rc;
    }
    if (!cfg->pattern) return 0;
    /* Backfill: the streams that match now, at their tails (no replay). */
    if (!(st = prep(c, "SELECT path, tail_seq, tail_pos FROM streams WHERE deleted = 0"))) return LOG_EIO;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *path = col(st, 0);
        if (!sub_glob_match(cfg->pattern, path) || (cfg->wake_stream && !strcmp(path, cfg->wake_stream)) ||
            !strncmp(path, "__ds/", 5))
            continue;
        offset_t o = {(uint64_t)sqlite3_column_int64(st, 1), (uint64_t)sqlite3_column_int64(st, 2)};
        offset_format(o, tail);
        int lrc = link_add(c, a->id, path, 0, tail);
        if (lrc) {
            log_stmt_done(c, st);
            return lrc;
        }
    }
    return log_stmt_finish(c, st, rc);
}

int sub_put(log_conn_t *c, const char *id, const sub_config *cfg, int *created)
{
    put_arg a = {id, cfg, 0};
    int rc = log_transact(c, op_put, &a);
    if (created) *created = a.created;
    return rc;
}

json_t *sub_get(log_conn_t *c, const char *id, const char *base, int *rc)
{
    row r;
    link_t *l = NULL;
    size_t n = 0;
    json_t *out = NULL;
    webhook_key k;
    if ((*rc = row_load(c, id, &r))) return NULL;
    if ((*rc = links_load(c, id, &l, &n))) goto out;
    char created[40], jwks[URL_MAX + 64];
    timefmt_format(r.created_ms, created, sizeof created);
    json_t *streams = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(streams, json_pack("{s:o, s:s, s:s}", "path", utf8_json(l[i].path), "link_type",
                                                 l[i].explicit_ ? "explicit" : "glob", "acked_offset", l[i].acked));
    json_t *hook = json_null();
    if (r.webhook) {
        hook = json_pack("{s:s}", "url", r.url ? r.url : "");
        if (key_load(c, &k) == 0) {
            snprintf(jwks, sizeof jwks, "%s/v1/stream/__ds/jwks.json", base);
            json_object_set_new(hook, "signing",
                                json_pack("{s:s, s:s, s:s}", "alg", "ed25519", "kid", k.kid, "jwks_url", jwks));
        }
    }
    out = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:I, s:s, s:s, s:o}", "id", r.id, "subscription_id", r.id,
                    "type", r.webhook ? "webhook" : "pull-wake", "pattern",
                    r.pattern ? json_string(r.pattern) : json_null(), "streams", streams, "webhook", hook,
                    "wake_stream", r.wake_stream ? json_string(r.wake_stream) : json_null(), "lease_ttl_ms",
                    (json_int_t)r.lease_ttl_ms, "created_at", created, "status",
                    r.deliver && r.attempts > 0 ? "failed" : "active", "description",
                    r.description ? json_string(r.description) : json_null());
out:
    links_free(l, n);
    row_free(&r);
    return out;
}

static int op_delete(log_conn_t *c, void *arg)
{
    const char *t[] = {arg};
    int rc = exec(c, "DELETE FROM subscription_links WHERE sub = ?", 1, t, 0, NULL);
    return rc ? rc : exec(c, "DELETE FROM subscriptions WHERE id = ?", 1, t, 0, NULL);
}

int sub_delete(log_conn_t *c, const char *id)
{
    return log_transact(c, op_delete, (void *)id);
}

typedef struct members_arg {
    const char *id;
    char *const *paths;
    size_t n;
    int remove;
} members_arg;

static int op_members(log_conn_t *c, void *arg)
{
    members_arg *a = arg;
    row r;
    int rc = row_load(c, a->id, &r);
    if (rc) return rc;
    char tail[OFFSET_LEN + 1];
    for (size_t i = 0; i < a->n && !rc; i++) {
        const char *t[] = {a->id, a->paths[i]};
        if (a->remove) {
            rc = exec(c, "DELETE FROM subscription_links WHERE sub = ? AND path = ? AND glob = 0", 2, t, 0, NULL);
            if (!rc) rc = exec(c, "UPDATE subscription_links SET explicit = 0 WHERE sub = ? AND path = ?", 2, t, 0, NULL);
        } else {
            tail_of(c, a->paths[i], tail, NULL);
            rc = link_add(c, a->id, a->paths[i], 1, tail);
        }
    }
    row_free(&r);
    return rc;
}

int sub_streams_add(log_conn_t *c, const char *id, char *const *paths, size_t n)
{
    members_arg a = {id, paths, n, 0};
    return log_transact(c, op_members, &a);
}

int sub_stream_remove(log_conn_t *c, const char *id, const char *path)
{
    char *p = (char *)path;
    members_arg a = {id, &p, 1, 1};
    return log_transact(c, op_members, &a);
}

/* ---- claim, callback, ack, release --------------------------------------------------- */

typedef struct claim_arg {
    const char *id, *worker;
    json_t *out;
} claim_arg;

static int op_claim(log_conn_t *c, void *arg)
{
    claim_arg *a = arg;
    row r;
    link_t *l = NULL;
    size_t n = 0;
    webhook_key k;
    int64_t now = timefmt_now_ms();
    int rc = row_load(c, a->id, &r);
    if (rc) return rc;
    if (r.webhook) {
        rc = SUB_EKIND;
        goto out;
    }
    if (r.holder && r.lease_until > now) {
        a->out = json_pack("{s:s, s:I}", "current_holder", r.holder, "generation", (json_int_t)r.generation);
        rc = SUB_ECLAIMED;
        goto out;
    }
    if (r.holder) {
        /* Its lease ran out: that wake is over, its token fenced. */
        if ((rc = clear_wake(c, r.id))) goto out;
        r.wake_id[0] = '\0';
        free(r.holder);
        r.holder = NULL;
    }
    if ((rc = links_load(c, r.id, &l, &n))) goto out;
    size_t i = 0;
    while (i < n && !pending(&l[i])) i++;
    if (i == n) {
        rc = SUB_ENOWORK;
        goto out;
    }
    if (!r.wake_id[0]) {
        if ((rc = wake_if_pending(c, &r, NULL))) goto out;
        row_free(&r);
        if ((rc = row_load(c, a->id, &r))) goto out;
    }
    if ((rc = key_ensure(c, &k))) goto out;
    char tok[SUB_TOKEN_MAX];
    sub_token_make(&k, r.id, r.generation, r.wake_id, now, tok);
    const char *t[] = {a->worker, r.id};
    int64_t until[] = {now + r.lease_ttl_ms};
    sqlite3_stmt *st = prep(c, "UPDATE subscriptions SET holder = ?1, lease_until = ?3 WHERE id = ?2");
    if (!st) {
        rc = LOG_EIO;
        goto out;
    }
    sqlite3_bind_text(st, 1, t[0], -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, t[1], -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, until[0]);
    if ((rc = log_stmt_finish(c, st, sqlite3_step(st)))) goto out;
    a->out = json_pack("{s:s, s:I, s:s, s:o, s:I}", "wake_id", r.wake_id, "generation", (json_int_t)r.generation,
                       "token", tok, "streams", stream_infos(l, n, NULL), "lease_ttl_ms", (json_int_t)r.lease_ttl_ms);
out:
    links_free(l, n);
    row_free(&r);
    return rc;
}

int sub_claim(log_conn_t *c, const char *id, const char *worker, json_t **out)
{
    claim_arg a = {id, worker, NULL};
    int rc = log_transact(c, op_claim, &a);
    *out = a.out;
    if (rc && rc != SUB_ECLAIMED) {
        json_decref(a.out);
        *out = NULL;
    }
    return rc;
}

/* Does an ack's path (UTF-8, from JSON) name the linked stream stored? A path made
 * before paths had to be UTF-8 is named as claims show it, U+FFFD for its bad bytes. */
static int same_path(const char *stored, const char *given)
{
    if (!strcmp(stored, given)) return 1;
    size_t n = strlen(stored);
    if (utf8_valid(stored, n)) return 0;
    char *shown = utf8_lossy(stored, n);
    int same = shown && !strcmp(shown, given);
    free(shown);
    return same;
}

/* Move cursors as acks say: every ack checked before any is applied. */
static int apply_acks(log_conn_t *c, const char *id, const json_t *acks)
{
    if (!acks || json_is_null(acks)) return 0;
    if (!json_is_array(acks)) return SUB_EINVAL;
    link_t *l;
    size_t n, i;
    int rc = links_load(c, id, &l, &n);
    if (rc) return rc;
    json_t *ack;
    for (int pass = 0; pass < 2 && !rc; pass++) {
        json_array_foreach(acks, i, ack) {
            const char *s = json_string_value(json_object_get(ack, "stream"));
            if (!s) s = json_string_value(json_object_get(ack, "path"));
            const char *o = json_string_value(json_object_get(ack, "offset"));
            char path[LOG_PATH_MAX + 1], canon[OFFSET_LEN + 1];
            offset_kind kind;
            offset_t off;
            if (!s || !o || sub_path_norm(s, path, sizeof path)) {
                rc = SUB_EINVAL;
                break;
            }
            link_t *hit = NULL;
            for (size_t j = 0; j < n && !hit; j++)
                if (same_path(l[j].path, path)) hit = &l[j];
            if (!hit || offset_parse(o, strlen(o), &kind, &off) || kind != OFFSET_AT) {
                rc = SUB_EOFFSET;
                break;
            }
            offset_format(off, canon);
            if (strcmp(canon, hit->acked) < 0 || strcmp(canon, hit->tail) > 0) {
                rc = SUB_EOFFSET;
                break;
            }
            if (pass == 1) {
                const char *t[] = {canon, id, hit->path};
                if ((rc = exec(c, "UPDATE subscription_links SET acked = ? WHERE sub = ? AND path = ?", 3, t, 0,
                               NULL)))
                    break;
                memcpy(hit->acked, canon, sizeof canon);
            }
        }
    }
    links_free(l, n);
    return rc;
}

typedef struct finish_arg {
    const char *id, *token;
    sub_action action;
    const json_t *req;
    int next_wake;
} finish_arg;

static int op_finish(log_conn_t *c, void *arg)
{
    finish_arg *a = arg;
    row r;
    webhook_key k;
    int64_t now = timefmt_now_ms(), tgen = 0;
    char twake[SUB_WAKE_ID_LEN + 1];
    int rc = row_load(c, a->id, &r);
    if (rc) return rc;
    if (r.webhook != (a->action == SUB_CALLBACK)) rc = SUB_EKIND;
    else if ((rc = key_load(c, &k))) rc = rc == SUB_ENOTFOUND ? SUB_ETOKEN : rc;
    else rc = sub_token_check(&k, r.id, a->token, now, &tgen, twake);
    if (rc) goto out;
    const json_t *g = json_object_get(a->req, "generation");
    const char *w = json_string_value(json_object_get(a->req, "wake_id"));
    const json_t *d = json_object_get(a->req, "done");
    if (!json_is_object(a->req) || (g && !json_is_integer(g)) || (d && !json_is_boolean(d))) {
        rc = SUB_EINVAL;
        goto out;
    }
    int lease_over = r.lease_until && r.lease_until <= now && !r.deliver;
    if (!r.wake_id[0] || tgen != r.generation || strcmp(twake, r.wake_id) || !g ||
        json_integer_value(g) != r.generation || !w || strcmp(w, r.wake_id) || lease_over) {
        rc = SUB_EFENCED;
        goto out;
    }
    if (a->action != SUB_RELEASE && (rc = apply_acks(c, r.id, json_object_get(a->req, "acks")))) goto out;
    if (a->action == SUB_RELEASE || json_is_true(d)) {
        if ((rc = clear_wake(c, r.id))) goto out;
        r.wake_id[0] = '\0';
        free(r.holder);
        r.holder = NULL;
        rc = wake_if_pending(c, &r, &a->next_wake);
    } else {
        const char *t[] = {r.id};
        int64_t until[] = {now + r.lease_ttl_ms};
        rc = exec(c, "UPDATE subscriptions SET lease_until = ?2 WHERE id = ?1", 1, t, 1, until);
    }
out:
    row_free(&r);
    return rc;
}

int sub_finish(log_conn_t *c, const char *id, sub_action action, const char *token, const json_t *req,
               int *next_wake)
{
    finish_arg a = {id, token, action, req, 0};
    int rc = log_transact(c, op_finish, &a);
    if (next_wake) *next_wake = a.next_wake;
    return rc;
}

static int op_key(log_conn_t *c, void *arg)
{
    return key_ensure(c, arg);
}

json_t *sub_jwks(log_conn_t *c, int *rc)
{
    webhook_key k;
    *rc = key_load(c, &k);
    if (*rc == SUB_ENOTFOUND) *rc = log_transact(c, op_key, &k);
    if (*rc) return NULL;
    json_t *keys = json_array();
    sqlite3_stmt *st = prep(c, "SELECT kid, pub FROM webhook_keys ORDER BY created_ms DESC, kid");
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        if (sqlite3_column_bytes(st, 1) != 32) continue;
        webhook_key p;
        snprintf(p.kid, sizeof p.kid, "%s", col(st, 0));
        memcpy(p.pub, sqlite3_column_blob(st, 1), 32);
        json_array_append_new(keys, webhook_jwk(&p));
    }
    log_stmt_done(c, st);
    explicit_bzero(&k, sizeof k);
    return json_pack("{s:o}", "keys", keys);
}

/* ---- the runner's side --------------------------------------------------------------- */

typedef struct changed_arg {
    char *const *paths;
    size_t n;
    int all;       /* recover: every stream, every subscription */
} changed_arg;

typedef struct idlist {
    char **v;
    size_t n, cap;
} idlist;

static void ids_push(idlist *l, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        char **m = realloc(l->v, l->cap * sizeof *m);
        if (!m) abort();
        l->v = m;
    }
    l->v[l->n++] = strdup(s);
}

/* Push id unless it is there already. */
static void ids_add(idlist *l, const char *id)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], id)) return;
    ids_push(l, id);
}

static void ids_free(idlist *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

/* The glob subscriptions: id, pattern and wake stream of each. */
static int patterns_load(log_conn_t *c, idlist *ids, idlist *pats, idlist *wakes)
{
    sqlite3_stmt *st = prep(c, "SELECT id, pattern, coalesce(wake_stream, '') FROM subscriptions"
                               " WHERE pattern IS NOT NULL ORDER BY id");
    if (!st) return LOG_EIO;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        /* In step, one entry each (ids_add would merge equal patterns). */
        ids_push(ids, col(st, 0));
        ids_push(pats, col(st, 1));
        ids_push(wakes, col(st, 2));
    }
    return log_stmt_finish(c, st, rc);
}

/* One changed stream: link it where it matches (at its start: everything in it
 * is new to the subscription), unlink it where it is gone; note who to wake. */
static int one_changed(log_conn_t *c, const char *path, idlist *ids, idlist *pats, idlist *wakes, idlist *towake)
{
    if (!strncmp(path, "__ds/", 5)) return 0;
    char tail[OFFSET_LEN + 1];
    int exists, rc = 0;
    tail_of(c, path, tail, &exists);
    const char *t[] = {path};
    if (!exists) {
        rc = exec(c, "DELETE FROM subscription_links WHERE path = ? AND explicit = 0", 1, t, 0, NULL);
        if (!rc) {
            const char *t2[] = {ZERO, path};
            rc = exec(c, "UPDATE subscription_links SET glob = 0, acked = ? WHERE path = ?", 2, t2, 0, NULL);
        }
        return rc;
    }
    for (size_t i = 0; i < ids->n && !rc; i++)
        if (strcmp(wakes->v[i], path) && sub_glob_match(pats->v[i], path)) rc = link_add(c, ids->v[i], path, 0, ZERO);
    if (rc) return rc;
    /* A stream made again after a delete starts over. */
    const char *t2[] = {ZERO, path, tail};
    if ((rc = exec(c, "UPDATE subscription_links SET acked = ? WHERE path = ? AND acked > ?", 3, t2, 0, NULL)))
        return rc;
    sqlite3_stmt *st = prep(c, "SELECT sub FROM subscription_links WHERE path = ?");
    if (!st) return LOG_EIO;
    sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) ids_add(towake, col(st, 0));
    return log_stmt_finish(c, st, rc);
}

static int op_changed(log_conn_t *c, void *arg)
{
    changed_arg *a = arg;
    idlist ids = {0}, pats = {0}, wakes = {0}, towake = {0};
    int rc = patterns_load(c, &ids, &pats, &wakes);
    for (size_t i = 0; !rc && i < a->n; i++) rc = one_changed(c, a->paths[i], &ids, &pats, &wakes, &towake);
    if (!rc && a->all) {
        sqlite3_stmt *st = prep(c, "SELECT path FROM streams WHERE deleted = 0");
        if (!st) rc = LOG_EIO;
        while (!rc && sqlite3_step(st) == SQLITE_ROW) {
            const char *path = col(st, 0);
            for (size_t i = 0; !rc && i < ids.n; i++)
                if (strcmp(wakes.v[i], path) && strncmp(path, "__ds/", 5) && sub_glob_match(pats.v[i], path))
                    rc = link_add(c, ids.v[i], path, 0, ZERO);
        }
        log_stmt_done(c, st);
        if (!rc && !(st = prep(c, "SELECT id FROM subscriptions"))) rc = LOG_EIO;
        while (!rc && sqlite3_step(st) == SQLITE_ROW) ids_add(&towake, col(st, 0));
        log_stmt_done(c, st);
    }
    for (size_t i = 0; !rc && i < towake.n; i++) rc = wake_id_pending(c, towake.v[i], NULL);
    ids_free(&ids);
    ids_free(&pats);
    ids_free(&wakes);
    ids_free(&towake);
    return rc;
}

int sub_recover(log_conn_t *c)
{
    changed_arg a = {NULL, 0, 1};
    return log_transact(c, op_changed, &a);
}

/* 1 if a change of one of paths may concern a subscription: a read, so that the
 * runner's turns (which see its own session streams change) cost no write when
 * nothing subscribes to what changed. */
static int relevant(log_conn_t *c, char *const *paths, size_t n)
{
    idlist ids = {0}, pats = {0}, wakes = {0};
    int hit = patterns_load(c, &ids, &pats, &wakes) != 0;   /* an error: let the transaction say */
    sqlite3_stmt *st = prep(c, "SELECT 1 FROM subscription_links WHERE path = ? LIMIT 1");
    for (size_t i = 0; i < n && !hit; i++) {
        for (size_t j = 0; j < ids.n && !hit; j++) hit = sub_glob_match(pats.v[j], paths[i]);
        if (st && !hit) {
            sqlite3_bind_text(st, 1, paths[i], -1, SQLITE_STATIC);
            hit = sqlite3_step(st) == SQLITE_ROW;
            sqlite3_reset(st);
        }
    }
    log_stmt_done(c, st);
    ids_free(&ids);
    ids_free(&pats);
    ids_free(&wakes);
    return hit;
}

int sub_any(log_conn_t *c)
{
    sqlite3_stmt *st = prep(c, "SELECT 1 FROM subscriptions LIMIT 1");
    if (!st) return 0;
    int any = sqlite3_step(st) == SQLITE_ROW;
    log_stmt_done(c, st);
    return any;
}

int sub_changed(log_conn_t *c, char *const *paths, size_t n)
{
    changed_arg a = {paths, n, 0};
    return n && relevant(c, paths, n) ? log_transact(c, op_changed, &a) : 0;
}

static int op_expire(log_conn_t *c, void *arg)
{
    const int64_t *now = arg;
    idlist over = {0};
    sqlite3_stmt *st = prep(c, "SELECT id FROM subscriptions WHERE wake_id IS NOT NULL AND deliver = 0"
                               " AND lease_until IS NOT NULL AND lease_until <= ?");
    if (!st) return LOG_EIO;
    sqlite3_bind_int64(st, 1, *now);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) ids_add(&over, col(st, 0));
    rc = log_stmt_finish(c, st, rc);
    for (size_t i = 0; !rc && i < over.n; i++) {
        rc = clear_wake(c, over.v[i]);
        if (!rc) rc = wake_id_pending(c, over.v[i], NULL);
    }
    ids_free(&over);
    return rc;
}

int sub_expire(log_conn_t *c, int64_t now)
{
    sqlite3_stmt *st = prep(c, "SELECT 1 FROM subscriptions WHERE wake_id IS NOT NULL AND deliver = 0"
                               " AND lease_until IS NOT NULL AND lease_until <= ? LIMIT 1");
    if (!st) return LOG_EIO;
    sqlite3_bind_int64(st, 1, now);
    int any = sqlite3_step(st) == SQLITE_ROW;
    log_stmt_done(c, st);
    return any ? log_transact(c, op_expire, &now) : 0;
}

int64_t sub_next_due(log_conn_t *c)
{
    int64_t due = INT64_MAX;
    sqlite3_stmt *st = prep(c, "SELECT min(next_attempt_ms) FROM subscriptions WHERE deliver = 1 UNION ALL"
                               " SELECT min(lease_until) FROM subscriptions WHERE wake_id IS NOT NULL AND deliver = 0");
    while (st && sqlite3_step(st) == SQLITE_ROW)
        if (sqlite3_column_type(st, 0) != SQLITE_NULL && sqlite3_column_int64(st, 0) < due)
            due = sqlite3_column_int64(st, 0);
    log_stmt_done(c, st);
    return due;
}

void sub_delivery_free(sub_delivery *d)
{
    free(d->body);
    d->body = NULL;
}

typedef struct take_arg {
    int64_t now, hold;
    const char *base;
    sub_delivery *out;
    size_t max, n;
} take_arg;

static int op_take(log_conn_t *c, void *arg)
{
    take_arg *a = arg;
    webhook_key k;
    idlist due = {0};
    sqlite3_stmt *st = prep(c, "SELECT id FROM subscriptions WHERE deliver = 1 AND next_attempt_ms <= ?"
                               " ORDER BY next_attempt_ms LIMIT ?");
    if (!st) return LOG_EIO;
    sqlite3_bind_int64(st, 1, a->now);
    sqlite3_bind_int64(st, 2, (int64_t)a->max);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) ids_add(&due, col(st, 0));
    rc = log_stmt_finish(c, st, rc);
    if (!rc && due.n) rc = key_load(c, &k);
    for (size_t i = 0; !rc && i < due.n; i++) {
        row r;
        link_t *l = NULL;
        size_t n = 0;
        if ((rc = row_load(c, due.v[i], &r))) break;
        if (!(rc = links_load(c, r.id, &l, &n))) {
            sub_delivery *d = &a->out[a->n];
            memset(d, 0, sizeof *d);
            snprintf(d->id, sizeof d->id, "%s", r.id);
            snprintf(d->wake_id, sizeof d->wake_id, "%s", r.wake_id);
            snprintf(d->url, sizeof d->url, "%s", r.url ? r.url : "");
            d->generation = r.generation;
            char tok[SUB_TOKEN_MAX], cb[URL_MAX + SUB_ID_MAX + 64];
            sub_token_make(&k, r.id, r.generation, r.wake_id, a->now, tok);
            snprintf(cb, sizeof cb, "%s/v1/stream/__ds/subscriptions/%s/callback", a->base, r.id);
            json_t *snap = r.snapshot ? json_loads(r.snapshot, 0, NULL) : NULL;
            json_t *body = json_pack("{s:s, s:s, s:I, s:o, s:s, s:s}", "subscription_id", r.id, "wake_id", r.wake_id,
                                     "generation", (json_int_t)r.generation, "streams", stream_infos(l, n, snap),
                                     "callback_url", cb, "callback_token", tok);
            json_decref(snap);
            d->body = json_dumps(body, JSON_COMPACT);
            json_decref(body);
            d->len = strlen(d->body);
            if (webhook_sign(&k, a->now / 1000, d->body, d->len, d->signature, sizeof d->signature)) rc = LOG_EIO;
            const char *t[] = {r.id};
            int64_t until[] = {a->now + a->hold};
            if (!rc) rc = exec(c, "UPDATE subscriptions SET next_attempt_ms = ?2 WHERE id = ?1", 1, t, 1, until);
            if (!rc) a->n++;
            else sub_delivery_free(d);
        }
        links_free(l, n);
        row_free(&r);
    }
    explicit_bzero(&k, sizeof k);
    ids_free(&due);
    if (rc)
        for (size_t i = 0; i < a->n; i++) sub_delivery_free(&a->out[i]);
    return rc;
}

int sub_deliveries_take(log_conn_t *c, int64_t now, int64_t hold_ms, const char *base, sub_delivery *out,
                        size_t max)
{
    take_arg a = {now, hold_ms, base, out, max, 0};
    int rc = log_transact(c, op_take, &a);
    if (rc) {
        for (size_t i = 0; i < a.n; i++) sub_delivery_free(&out[i]);
        return rc;
    }
    return (int)a.n;
}

typedef struct delivered_arg {
    const sub_delivery *d;
    int ok, isdone;
    const char *error;
    int64_t now;
} delivered_arg;

static int op_delivered(log_conn_t *c, void *arg)
{
    delivered_arg *a = arg;
    row r;
    int rc = row_load(c, a->d->id, &r);
    if (rc) return rc == SUB_ENOTFOUND ? 0 : rc;
    if (!r.deliver || r.generation != a->d->generation || strcmp(r.wake_id, a->d->wake_id)) goto out;
    const char *t[] = {r.id};
    if (!a->ok) {
        uint32_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) rnd = 0;
        int64_t next[] = {a->now + sub_backoff_ms(r.attempts + 1, (double)rnd / 4294967295.0)};
        const char *t2[] = {r.id, a->error ? a->error : "failed"};
        rc = exec(c, "UPDATE subscriptions SET attempts = attempts + 1, next_attempt_ms = ?3, last_error = ?2"
                     " WHERE id = ?1", 2, t2, 1, next);
        goto out;
    }
    if (!a->isdone) {
        int64_t until[] = {a->now + r.lease_ttl_ms};
        rc = exec(c, "UPDATE subscriptions SET deliver = 0, attempts = 0, next_attempt_ms = NULL, last_error = NULL,"
                     " lease_until = ?2 WHERE id = ?1", 1, t, 1, until);
        goto out;
    }
    /* {"done": true}: the snapshot's tails are acked (a cursor never goes back). */
    json_t *snap = r.snapshot ? json_loads(r.snapshot, 0, NULL) : NULL;
    const char *path;
    json_t *v;
    json_object_foreach(snap, path, v) {
        const char *t3[] = {json_string_value(v), r.id, path};
        if (t3[0] && (rc = exec(c, "UPDATE subscription_links SET acked = ?1 WHERE sub = ?2 AND path = ?3"
                                   " AND acked < ?1", 3, t3, 0, NULL)))
            break;
    }
    json_decref(snap);
    if (!rc) rc = clear_wake(c, r.id);
    if (!rc) {
        r.wake_id[0] = '\0';
        rc = wake_if_pending(c, &r, NULL);
    }
out:
    row_free(&r);
    return rc;
}

int sub_delivered(log_conn_t *c, const sub_delivery *d, int ok, int isdone, const char *error, int64_t now)
{
    delivered_arg a = {d, ok, isdone, error, now};
    return log_transact(c, op_delivered, &a);
}

#include "subscription.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "sha256.h"
#include "store.h"
#include "timefmt.h"
#include "utf8.h"

static const char ZERO[] = "0000000000000000_0000000000000000";

#define S(c) (store_of(c)->subs)

/* ---- rows and links ------------------------------------------------------------------ */

typedef sub_row row;       /* short names for what this file handles most */
typedef sub_link link_t;

void sub_row_free(sub_row *r)
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
    int rc = S(c)->get(c, id, r);
    return rc == LOG_ENOTFOUND ? SUB_ENOTFOUND : rc;
}

/* A stream's tail as an offset string; the start when it does not exist. */
static void tail_of(log_conn_t *c, const char *path, char out[OFFSET_LEN + 1], int *exists)
{
    int rc = S(c)->tail(c, path, out);
    if (rc < 0) memcpy(out, ZERO, sizeof ZERO);
    if (exists) *exists = rc == 1;
}

static void links_free(link_t *l, size_t n)
{
    for (size_t i = 0; i < n; i++) free(l[i].path);
    free(l);
}

typedef struct links_acc {
    link_t *v;
    size_t n, cap;
} links_acc;

static int link_push(void *ud, const sub_link *l)
{
    links_acc *a = ud;
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 8;
        link_t *m = realloc(a->v, a->cap * sizeof *m);
        if (!m) abort();
        a->v = m;
    }
    link_t *d = &a->v[a->n++];
    *d = *l;
    d->path = strdup(l->path);
    return 0;
}

/* Every link of id with its stream's tail now, by path. */
static int links_load(log_conn_t *c, const char *id, link_t **out, size_t *n)
{
    links_acc a = {0};
    int rc = S(c)->links(c, id, link_push, &a);
    *out = a.v;
    *n = a.n;
    return rc;
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
    int rc = S(c)->key_get(c, k);
    return rc == LOG_ENOTFOUND ? SUB_ENOTFOUND : rc;
}

/* The signing key, made on first use (inside a transaction). */
static int key_ensure(log_conn_t *c, webhook_key *k)
{
    int rc = key_load(c, k);
    if (rc != SUB_ENOTFOUND) return rc;
    if (webhook_key_generate(k)) return LOG_EIO;
    return S(c)->key_put(c, k, timefmt_now_ms());
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
    return S(c)->wake_clear(c, id);
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
    return rc == LOG_EBUSY || rc == LOG_EIO || rc == LOG_EDOWN ? rc : 0;
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
        rc = S(c)->wake_set(c, r->id, gen, wake, text, r->webhook, now);
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
    sub_row_free(&r);
    return rc == SUB_ENOTFOUND ? 0 : rc;
}

/* ---- create, read, delete, membership ------------------------------------------------ */

/* Link path to id (explicit or glob) at acked if it is new; an existing link
 * keeps its cursor and gains the kind. */
static int link_add(log_conn_t *c, const char *id, const char *path, int explicit_, const char *acked)
{
    return S(c)->link(c, id, path, explicit_, acked);
}

typedef struct backfill_arg {
    log_conn_t *c;
    const char *id;
    const sub_config *cfg;
} backfill_arg;

/* Backfill: a stream that matches now, linked at its tail (no replay). */
static int backfill_one(void *ud, const char *path, const char *tail)
{
    backfill_arg *b = ud;
    const sub_config *cfg = b->cfg;
    if (!sub_glob_match(cfg->pattern, path) || (cfg->wake_stream && !strcmp(path, cfg->wake_stream)) ||
        !strncmp(path, "__ds/", 5))
        return 0;
    return link_add(b->c, b->id, path, 0, tail);
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
        sub_row_free(&r);
        return rc;
    }
    a->created = 1;
    webhook_key k;
    if (cfg->webhook && (rc = key_ensure(c, &k))) return rc;
    row n = {.webhook = cfg->webhook, .pattern = cfg->pattern, .url = cfg->url, .wake_stream = cfg->wake_stream,
             .lease_ttl_ms = cfg->lease_ttl_ms, .description = cfg->description, .created_ms = timefmt_now_ms()};
    snprintf(n.id, sizeof n.id, "%s", a->id);
    memcpy(n.hash, cfg->hash, sizeof n.hash);
    if ((rc = S(c)->insert(c, &n))) return rc;
    char tail[OFFSET_LEN + 1];
    for (size_t i = 0; i < cfg->nstreams; i++) {
        tail_of(c, cfg->streams[i], tail, NULL);
        if ((rc = link_add(c, a->id, cfg->streams[i], 1, tail))) return rc;
    }
    if (!cfg->pattern) return 0;
    /* Backfill: the streams that match now, at their tails (no replay). */
    backfill_arg b = {c, a->id, cfg};
    return S(c)->streams(c, backfill_one, &b);
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
    sub_row_free(&r);
    return out;
}

static int op_delete(log_conn_t *c, void *arg)
{
    return S(c)->remove(c, arg);
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
        if (a->remove) {
            rc = S(c)->unlink(c, a->id, a->paths[i]);
        } else {
            tail_of(c, a->paths[i], tail, NULL);
            rc = link_add(c, a->id, a->paths[i], 1, tail);
        }
    }
    sub_row_free(&r);
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
        sub_row_free(&r);
        if ((rc = row_load(c, a->id, &r))) goto out;
    }
    if ((rc = key_ensure(c, &k))) goto out;
    char tok[SUB_TOKEN_MAX];
    sub_token_make(&k, r.id, r.generation, r.wake_id, now, tok);
    if ((rc = S(c)->lease(c, r.id, a->worker, now + r.lease_ttl_ms))) goto out;
    a->out = json_pack("{s:s, s:I, s:s, s:o, s:I}", "wake_id", r.wake_id, "generation", (json_int_t)r.generation,
                       "token", tok, "streams", stream_infos(l, n, NULL), "lease_ttl_ms", (json_int_t)r.lease_ttl_ms);
out:
    links_free(l, n);
    sub_row_free(&r);
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
                if ((rc = S(c)->ack(c, id, hit->path, canon, 0))) break;
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
        rc = S(c)->lease(c, r.id, NULL, now + r.lease_ttl_ms);
    }
out:
    sub_row_free(&r);
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

static int jwk_push(void *ud, const webhook_key *k)
{
    json_array_append_new(ud, webhook_jwk(k));
    return 0;
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
    S(c)->keys(c, jwk_push, keys);      /* a failure part way: the keys read so far */
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

/* Push id (a walk's fn: ud is an idlist) unless it is there already. */
static int id_note(void *ud, const char *id)
{
    ids_add(ud, id);
    return 0;
}

typedef struct patterns_acc {
    idlist ids, pats, wakes;
} patterns_acc;

static int pattern_push(void *ud, const char *id, const char *pattern, const char *wake_stream)
{
    patterns_acc *a = ud;
    /* In step, one entry each (ids_add would merge equal patterns). */
    ids_push(&a->ids, id);
    ids_push(&a->pats, pattern);
    ids_push(&a->wakes, wake_stream);
    return 0;
}

/* The glob subscriptions: id, pattern and wake stream of each. */
static int patterns_load(log_conn_t *c, patterns_acc *p)
{
    return S(c)->patterns(c, pattern_push, p);
}

static void patterns_free(patterns_acc *p)
{
    ids_free(&p->ids);
    ids_free(&p->pats);
    ids_free(&p->wakes);
}

/* One changed stream: link it where it matches (at its start: everything in it
 * is new to the subscription), unlink it where it is gone; note who to wake. */
static int one_changed(log_conn_t *c, const char *path, const patterns_acc *p, idlist *towake)
{
    if (!strncmp(path, "__ds/", 5)) return 0;
    char tail[OFFSET_LEN + 1];
    int exists, rc = 0;
    tail_of(c, path, tail, &exists);
    if (!exists) return S(c)->stream_reset(c, path, NULL);
    for (size_t i = 0; i < p->ids.n && !rc; i++)
        if (strcmp(p->wakes.v[i], path) && sub_glob_match(p->pats.v[i], path))
            rc = link_add(c, p->ids.v[i], path, 0, ZERO);
    if (rc) return rc;
    /* A stream made again after a delete starts over. */
    if ((rc = S(c)->stream_reset(c, path, tail))) return rc;
    return S(c)->linked(c, path, id_note, towake);
}

typedef struct recover_arg {
    log_conn_t *c;
    const patterns_acc *p;
} recover_arg;

/* Recover: a stream that matches a pattern, linked at its start. */
static int recover_one(void *ud, const char *path, const char *tail)
{
    recover_arg *a = ud;
    const patterns_acc *p = a->p;
    (void)tail;
    int rc = 0;
    for (size_t i = 0; !rc && i < p->ids.n; i++)
        if (strcmp(p->wakes.v[i], path) && strncmp(path, "__ds/", 5) && sub_glob_match(p->pats.v[i], path))
            rc = link_add(a->c, p->ids.v[i], path, 0, ZERO);
    return rc;
}

static int op_changed(log_conn_t *c, void *arg)
{
    changed_arg *a = arg;
    patterns_acc p = {0};
    idlist towake = {0};
    int rc = patterns_load(c, &p);
    for (size_t i = 0; !rc && i < a->n; i++) rc = one_changed(c, a->paths[i], &p, &towake);
    if (!rc && a->all) {
        recover_arg ra = {c, &p};
        rc = S(c)->streams(c, recover_one, &ra);
        if (!rc) rc = S(c)->each(c, id_note, &towake);
    }
    for (size_t i = 0; !rc && i < towake.n; i++) rc = wake_id_pending(c, towake.v[i], NULL);
    patterns_free(&p);
    ids_free(&towake);
    return rc;
}

int sub_recover(log_conn_t *c)
{
    changed_arg a = {NULL, 0, 1};
    return log_transact(c, op_changed, &a);
}

/* A walk's fn that stops at the first item. */
static int stop_at_first(void *ud, const char *id)
{
    (void)ud;
    (void)id;
    return 1;
}

/* 1 if a change of one of paths may concern a subscription: a read, so that the
 * runner's turns (which see its own session streams change) cost no write when
 * nothing subscribes to what changed. */
static int relevant(log_conn_t *c, char *const *paths, size_t n)
{
    patterns_acc p = {0};
    int hit = patterns_load(c, &p) != 0;   /* an error: let the transaction say */
    for (size_t i = 0; i < n && !hit; i++) {
        for (size_t j = 0; j < p.ids.n && !hit; j++) hit = sub_glob_match(p.pats.v[j], paths[i]);
        if (!hit) hit = S(c)->linked(c, paths[i], stop_at_first, NULL) == 1;
    }
    patterns_free(&p);
    return hit;
}

int sub_any(log_conn_t *c)
{
    int rc = S(c)->each(c, stop_at_first, NULL);
    return rc < 0 ? rc : rc == 1;
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
    int rc = S(c)->lease_over(c, *now, id_note, &over);
    for (size_t i = 0; !rc && i < over.n; i++) {
        rc = clear_wake(c, over.v[i]);
        if (!rc) rc = wake_id_pending(c, over.v[i], NULL);
    }
    ids_free(&over);
    return rc;
}

int sub_expire(log_conn_t *c, int64_t now)
{
    int any = S(c)->lease_over(c, now, stop_at_first, NULL);
    if (any < 0) return any;
    return any ? log_transact(c, op_expire, &now) : 0;
}

int64_t sub_next_due(log_conn_t *c)
{
    return S(c)->next_due(c);
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
    int rc = S(c)->due(c, a->now, a->max, id_note, &due);
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
            if (!rc) rc = S(c)->delivery_due(c, r.id, a->now + a->hold, NULL);
            if (!rc) a->n++;
            else sub_delivery_free(d);
        }
        links_free(l, n);
        sub_row_free(&r);
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
    if (!a->ok) {
        uint32_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) rnd = 0;
        rc = S(c)->delivery_due(c, r.id, a->now + sub_backoff_ms(r.attempts + 1, (double)rnd / 4294967295.0),
                                a->error ? a->error : "failed");
        goto out;
    }
    if (!a->isdone) {
        rc = S(c)->delivery_accepted(c, r.id, a->now + r.lease_ttl_ms);
        goto out;
    }
    /* {"done": true}: the snapshot's tails are acked (a cursor never goes back). */
    json_t *snap = r.snapshot ? json_loads(r.snapshot, 0, NULL) : NULL;
    const char *path;
    json_t *v;
    json_object_foreach(snap, path, v) {
        const char *acked = json_string_value(v);
        if (acked && (rc = S(c)->ack(c, r.id, path, acked, 1))) break;
    }
    json_decref(snap);
    if (!rc) rc = clear_wake(c, r.id);
    if (!rc) {
        r.wake_id[0] = '\0';
        rc = wake_if_pending(c, &r, NULL);
    }
out:
    sub_row_free(&r);
    return rc;
}

int sub_delivered(log_conn_t *c, const sub_delivery *d, int ok, int isdone, const char *error, int64_t now)
{
    delivered_arg a = {d, ok, isdone, error, now};
    return log_transact(c, op_delivered, &a);
}

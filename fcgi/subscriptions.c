/* /v1/stream/__ds/...: the Durable Streams reserved subscription APIs (lib/subscription).
 *
 *   PUT, GET, DELETE  __ds/subscriptions/{id}
 *   POST              __ds/subscriptions/{id}/streams            {"streams": [...]}
 *   DELETE            __ds/subscriptions/{id}/streams/{path}
 *   POST              __ds/subscriptions/{id}/claim              {"worker"}
 *   POST              __ds/subscriptions/{id}/callback|ack|release   (Bearer: the wake's token)
 *   GET               __ds/jwks.json                             (public)
 *
 * Error codes are the protocol's (FENCED, ALREADY_CLAIMED, ...). Webhook URLs are
 * held to DSTREAM_WEBHOOK_ALLOW here and again, per connection, by the runner. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../lib/subscription.h"
#include "../lib/webhook.h"
#include "reply.h"
#include "router.h"

#define SUBS_PREFIX "__ds/subscriptions/"

static pthread_once_t allow_once = PTHREAD_ONCE_INIT;
static webhook_allow *allow;
static char allow_err[256];

static void allow_load(void)
{
    allow = webhook_allow_parse(getenv("DSTREAM_WEBHOOK_ALLOW"), allow_err, sizeof allow_err);
    if (!allow) fprintf(stderr, "dstream-fcgi: DSTREAM_WEBHOOK_ALLOW: %s (no webhook is allowed)\n", allow_err);
}

static const char *base_url(req_t *r)
{
    return r->cfg->public_url ? r->cfg->public_url : "";
}

/* Answer a SUB_E* or LOG_E* code. */
static void fail(req_t *r, int rc)
{
    static const struct {
        int rc, status;
        const char *code, *msg;
    } map[] = {
        {SUB_ENOTFOUND, 404, "SUBSCRIPTION_NOT_FOUND", "no such subscription"},
        {SUB_EEXISTS, 409, "SUBSCRIPTION_ALREADY_EXISTS", "the subscription exists with another configuration"},
        {SUB_EINVAL, 400, "INVALID_REQUEST", "malformed body: wake_id (string), generation (integer), "
                                             "acks ([{stream, offset}]), done (boolean)"},
        {SUB_ETOKEN, 401, "TOKEN_INVALID", "not a token of this subscription"},
        {SUB_EEXPIRED, 401, "TOKEN_EXPIRED", "the token has expired"},
        {SUB_EFENCED, 409, "FENCED", "the wake is stale (another generation or wake, or its lease ran out)"},
        {SUB_ENOWORK, 409, "NO_PENDING_WORK", "the subscription has no pending work"},
        {SUB_EOFFSET, 409, "INVALID_OFFSET", "an ack names a stream not linked, or an offset before the cursor or past the tail"},
        {SUB_EKIND, 400, "INVALID_REQUEST", "not an action of this subscription's type"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].rc == rc) {
            if (map[i].status == 401) res_header(r, "WWW-Authenticate", "Bearer realm=\"dstream-subscription\"");
            res_error(r, map[i].status, map[i].code, "%s", map[i].msg);
            return;
        }
    reply_fail(r, rc);
}

static void put(req_t *r, const char *id)
{
    char err[256];
    sub_config cfg;
    json_t *doc = req_json_object(r);
    if (!doc) return;
    if (sub_config_parse(doc, &cfg, err, sizeof err)) {
        json_decref(doc);
        res_error(r, 400, "INVALID_REQUEST", "%s", err);
        return;
    }
    json_decref(doc);
    pthread_once(&allow_once, allow_load);
    if (cfg.webhook && !allow) {
        res_error(r, 400, "WEBHOOK_URL_REJECTED", "DSTREAM_WEBHOOK_ALLOW is malformed: %s", allow_err);
        goto out;
    }
    if (cfg.webhook && !webhook_url_allowed(allow, cfg.url, err, sizeof err)) {
        res_error(r, 400, "WEBHOOK_URL_REJECTED", "%s", err);
        goto out;
    }
    int created = 0, rc = sub_put(r->log, id, &cfg, &created);
    if (rc) {
        fail(r, rc);
        goto out;
    }
    json_t *j = sub_get(r->log, id, base_url(r), &rc);
    if (!j) fail(r, rc);
    else res_json(r, created ? 201 : 200, j);
    json_decref(j);
out:
    sub_config_free(&cfg);
}

static void add_streams(req_t *r, const char *id)
{
    json_t *doc = req_json_object(r);
    if (!doc) return;
    json_t *a = json_object_get(doc, "streams"), *v;
    size_t n = json_array_size(a), i;
    char **paths = calloc(n + 1, sizeof *paths);
    int ok = json_is_array(a) && n > 0 && n <= SUB_STREAMS_MAX && paths;
    json_array_foreach(a, i, v) {
        char p[LOG_PATH_MAX + 1];
        if (!ok) break;
        ok = json_is_string(v) && sub_path_norm(json_string_value(v), p, sizeof p) == 0;
        if (ok) paths[i] = strdup(p);
    }
    if (!ok) res_error(r, 400, "INVALID_REQUEST", "streams must be 1 to 1000 stream paths (not under __ds)");
    else {
        int rc = sub_streams_add(r->log, id, paths, n);
        if (rc) fail(r, rc);
        else {
            res_status(r, 204);
            res_end(r);
        }
    }
    for (i = 0; paths && i < n; i++) free(paths[i]);
    free(paths);
    json_decref(doc);
}

static void claim(req_t *r, const char *id)
{
    json_t *doc = req_json_object(r), *out = NULL;
    if (!doc) return;
    const char *worker = json_string_value(json_object_get(doc, "worker"));
    if (!worker || !*worker || strlen(worker) > SUB_WORKER_MAX) {
        res_error(r, 400, "INVALID_REQUEST", "worker must be a string of 1 to 256 bytes");
    } else {
        int rc = sub_claim(r->log, id, worker, &out);
        if (rc == SUB_ECLAIMED) {
            json_object_set_new(out, "code", json_string("ALREADY_CLAIMED"));
            json_object_set_new(out, "message", json_string("another worker holds the lease"));
            json_t *e = json_pack("{s:O}", "error", out);
            res_json(r, 409, e);
            json_decref(e);
        } else if (rc) {
            fail(r, rc);
        } else {
            res_json(r, 200, out);
        }
    }
    json_decref(out);
    json_decref(doc);
}

/* callback, ack, release: the credential is the wake's token, not a dstream token. */
static void finish(req_t *r, const char *id, sub_action action)
{
    const char *h = req_header(r, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) || !h[7]) {
        res_header(r, "WWW-Authenticate", "Bearer realm=\"dstream-subscription\"");
        res_error(r, 401, "TOKEN_INVALID", "send the wake's token as Authorization: Bearer <token>");
        return;
    }
    json_t *doc = req_json_object(r);
    if (!doc) return;
    int next = 0, rc = sub_finish(r->log, id, action, h + 7, doc, &next);
    json_decref(doc);
    if (rc) {
        fail(r, rc);
        return;
    }
    if (action == SUB_RELEASE) {
        res_status(r, 204);
        res_end(r);
        return;
    }
    json_t *j = json_pack("{s:b, s:b}", "ok", 1, "next_wake", next);
    res_json(r, 200, j);
    json_decref(j);
}

static void jwks(req_t *r)
{
    if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD")) {
        res_method_not_allowed(r, "GET, HEAD");
        return;
    }
    int rc;
    json_t *j = sub_jwks(r->log, &rc);
    if (!j) {
        fail(r, rc);
        return;
    }
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    size_t n = s ? strlen(s) : 0;
    res_status(r, 200);
    res_header(r, "Content-Type", "application/jwk-set+json");
    res_header(r, "Cache-Control", "public, max-age=300");
    res_headerf(r, "Content-Length", "%zu", n);
    if (strcmp(r->method, "HEAD")) res_write(r, s ? s : "", n);
    else res_end(r);
    free(s);
}

int subs_token_route(const char *method, const char *path)
{
    static const char prefix[] = "/v1/stream/" SUBS_PREFIX;
    if (strcmp(method, "POST") || strncmp(path, prefix, sizeof prefix - 1)) return 0;
    const char *slash = strchr(path + sizeof prefix - 1, '/');
    return slash && (!strcmp(slash, "/callback") || !strcmp(slash, "/ack") || !strcmp(slash, "/release"));
}

void subs_handle(req_t *r, const char *path)
{
    const char *m = r->method;
    if (!strcmp(path, "__ds/jwks.json")) {
        jwks(r);
        return;
    }
    if (strncmp(path, SUBS_PREFIX, sizeof SUBS_PREFIX - 1)) {
        res_error(r, 404, "SUBSCRIPTION_NOT_FOUND", "no Durable Streams control route at /v1/stream/%s", path);
        return;
    }
    const char *rest = path + sizeof SUBS_PREFIX - 1;
    char id[SUB_ID_MAX + 1];
    size_t n = strcspn(rest, "/");
    if (n == 0 || n > SUB_ID_MAX) {
        res_error(r, 404, "SUBSCRIPTION_NOT_FOUND", "a subscription id is 1 to %d of A-Z a-z 0-9 . _ ~ -", SUB_ID_MAX);
        return;
    }
    memcpy(id, rest, n);
    id[n] = '\0';
    if (!sub_id_valid(id)) {
        res_error(r, 400, "INVALID_REQUEST", "a subscription id is 1 to %d of A-Z a-z 0-9 . _ ~ -", SUB_ID_MAX);
        return;
    }
    const char *action = rest[n] ? rest + n + 1 : NULL;
    if (!action) {
        if (!strcmp(m, "PUT")) put(r, id);
        else if (!strcmp(m, "GET") || !strcmp(m, "HEAD")) {
            int rc;
            json_t *j = sub_get(r->log, id, base_url(r), &rc);
            if (!j) fail(r, rc);
            else if (strcmp(m, "HEAD")) res_json(r, 200, j);
            else {
                res_status(r, 200);
                res_header(r, "Content-Type", "application/json");
                res_header(r, "Cache-Control", "no-store");
                res_end(r);
            }
            json_decref(j);
        } else if (!strcmp(m, "DELETE")) {
            int rc = sub_delete(r->log, id);
            if (rc) fail(r, rc);
            else {
                res_status(r, 204);
                res_end(r);
            }
        } else {
            res_method_not_allowed(r, "GET, HEAD, PUT, DELETE");
        }
        return;
    }
    if (!strcmp(action, "streams")) {
        if (strcmp(m, "POST")) res_method_not_allowed(r, "POST");
        else add_streams(r, id);
        return;
    }
    if (!strncmp(action, "streams/", 8)) {
        char p[LOG_PATH_MAX + 1];
        if (strcmp(m, "DELETE")) res_method_not_allowed(r, "DELETE");
        else if (sub_path_norm(action + 8, p, sizeof p)) res_error(r, 400, "INVALID_REQUEST", "not a stream path");
        else {
            int rc = sub_stream_remove(r->log, id, p);
            if (rc) fail(r, rc);
            else {
                res_status(r, 204);
                res_end(r);
            }
        }
        return;
    }
    static const struct {
        const char *name;
        int kind;       /* -1: claim */
    } acts[] = {{"claim", -1}, {"callback", SUB_CALLBACK}, {"ack", SUB_ACK}, {"release", SUB_RELEASE}};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        if (strcmp(action, acts[i].name)) continue;
        if (strcmp(m, "POST")) res_method_not_allowed(r, "POST");
        else if (acts[i].kind < 0) claim(r, id);
        else finish(r, id, (sub_action)acts[i].kind);
        return;
    }
    res_error(r, 404, "SUBSCRIPTION_NOT_FOUND", "no subscription action %s", action);
}

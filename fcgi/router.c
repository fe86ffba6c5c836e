#include "router.h"

#include <string.h>

#include "../lib/auth.h"
#include "../lib/utf8.h"
#include "access.h"
#include "metrics.h"
#include "recordings.h"

#define STREAM_PREFIX "/v1/stream/"
#define DS_PREFIX STREAM_PREFIX "__ds"
#define AISDK_PREFIX "/v1/aisdk/chat/"
#define LANGGRAPH_PREFIX "/v1/langgraph/"

/* Every route served, and nothing else: route() answers 404 for a path no template
 * matches and 405 for a method its route does not list, before any resource sees
 * the request (so a resource cannot serve what is not here). `dstream-fcgi --routes`
 * prints this table; tests/http/60-openapi.bats checks docs/openapi.json against it
 * both ways. The subscription routes come first: the reserved __ds segment of
 * /v1/stream/ is theirs alone. */
const router_route router_routes[] = {
    {"/v1/stream/__ds/jwks.json", "GET, HEAD"},
    {"/v1/stream/__ds/subscriptions/{id}", "GET, HEAD, PUT, DELETE"},
    {"/v1/stream/__ds/subscriptions/{id}/streams", "POST"},
    {"/v1/stream/__ds/subscriptions/{id}/streams/{path}", "DELETE"},
    {"/v1/stream/__ds/subscriptions/{id}/claim", "POST"},
    {"/v1/stream/__ds/subscriptions/{id}/callback", "POST"},
    {"/v1/stream/__ds/subscriptions/{id}/ack", "POST"},
    {"/v1/stream/__ds/subscriptions/{id}/release", "POST"},
    {"/v1/stream/{path}", "GET, HEAD, PUT, POST, DELETE"},
    {"/v1/health", "GET, HEAD"},
    {"/metrics", "GET, HEAD"},
    {"/v1/metrics", "GET, HEAD"},
    {"/v1/agents", "GET, POST"},
    {"/v1/agents/{name}", "GET, PUT, DELETE"},
    {"/v1/workflows", "GET, POST"},
    {"/v1/workflows/{name}", "GET, PUT"},
    {"/v1/sessions", "GET, POST"},
    {"/v1/sessions/{id}", "GET, DELETE"},
    {"/v1/sessions/{id}/state", "GET"},
    {"/v1/sessions/{id}/events", "GET"},
    {"/v1/sessions/{id}/drift", "GET"},
    {"/v1/sessions/{id}/lineage", "GET"},
    {"/v1/sessions/{id}/diff", "GET"},
    {"/v1/sessions/{id}/proof", "GET"},
    {"/v1/sessions/{id}/messages", "POST"},
    {"/v1/sessions/{id}/input", "POST"},
    {"/v1/sessions/{id}/cancel", "POST"},
    {"/v1/sessions/{id}/stop", "POST"},
    {"/v1/sessions/{id}/compact", "POST"},
    {"/v1/sessions/{id}/fork", "POST"},
    {"/v1/sessions/cancel", "POST"},
    {"/v1/sessions/delete", "POST"},
    {"/v1/sessions/retry", "POST"},
    {"/v1/sessions/{id}/signals/{name}", "POST"},
    {"/v1/recordings", "GET"},
    {"/v1/recordings/{key}", "GET, DELETE"},
    {"/v1/mcp/servers", "GET, HEAD"},
    {"/v1/mcp/servers/{name}", "GET, HEAD"},
    {"/v1/aisdk/chat/{agent}", "POST"},
    {"/v1/aisdk/chat/{agent}/{id}/stream", "GET"},
    {"/v1/aisdk/chat/{agent}/{id}/stop", "POST"},
    {"/v1/langgraph/assistants/search", "POST"},
    {"/v1/langgraph/assistants/{id}", "GET"},
    {"/v1/langgraph/threads", "POST"},
    {"/v1/langgraph/threads/search", "POST"},
    {"/v1/langgraph/threads/{id}", "GET, DELETE"},
    {"/v1/langgraph/threads/{id}/state", "GET"},
    {"/v1/langgraph/threads/{id}/state/{checkpoint}", "GET"},
    {"/v1/langgraph/threads/{id}/history", "POST"},
    {"/v1/langgraph/threads/{id}/copy", "POST"},
    {"/v1/langgraph/threads/{id}/runs", "GET, POST"},
    {"/v1/langgraph/threads/{id}/runs/stream", "POST"},
    {"/v1/langgraph/threads/{id}/runs/wait", "POST"},
    {"/v1/langgraph/threads/{id}/runs/{run}", "GET"},
    {"/v1/langgraph/threads/{id}/runs/{run}/join", "GET"},
    {"/v1/langgraph/threads/{id}/runs/{run}/stream", "GET"},
    {"/v1/langgraph/threads/{id}/runs/{run}/cancel", "POST"},
};
const size_t router_nroutes = sizeof router_routes / sizeof router_routes[0];

/* 1 if path is under the reserved /v1/stream/__ds (or is it). */
static int reserved(const char *path)
{
    size_t n = sizeof DS_PREFIX - 1;
    return !strncmp(path, DS_PREFIX, n) && (path[n] == '\0' || path[n] == '/');
}

/* Does path fit the template: {path} takes the rest (maybe empty), any other
 * {name} one non-empty segment, everything else matches itself. */
static int fits(const char *tmpl, const char *path, size_t len)
{
    const char *end = path + len;
    while (*tmpl) {
        if (*tmpl == '{') {
            if (!strncmp(tmpl, "{path}", 6)) return 1;
            const char *close = strchr(tmpl, '}');
            size_t n = 0;
            while (path + n < end && path[n] != '/') n++;
            if (!close || n == 0) return 0;
            path += n;
            tmpl = close + 1;
            continue;
        }
        if (path == end || *tmpl != *path) return 0;
        tmpl++;
        path++;
    }
    return path == end;
}

/* 1 if path fits route rt (or does without one trailing slash). */
static int route_fits(const router_route *rt, const char *path)
{
    size_t len = strlen(path);
    if (reserved(rt->path) != reserved(path)) return 0;
    if (fits(rt->path, path, len)) return 1;
    return len >= 2 && path[len - 1] == '/' && fits(rt->path, path, len - 1);
}

const router_route *router_match(const char *path, const char *method)
{
    const router_route *first = NULL;
    size_t len = strlen(path);
    /* A path that fits as it is goes before one that fits without its slash. */
    for (int pass = 0; pass < 2 && !first; pass++) {
        for (size_t i = 0; i < router_nroutes; i++) {
            const router_route *rt = &router_routes[i];
            if (reserved(rt->path) != reserved(path) || !fits(rt->path, path, pass ? len - 1 : len)) continue;
            if (!method || router_allows(rt, method)) return rt;
            if (!first) first = rt;
        }
        if (len < 2 || path[len - 1] != '/') break;
    }
    return first;
}

int router_allows(const router_route *rt, const char *method)
{
    size_t n = strlen(method);
    for (const char *p = rt->methods; *p; p += strspn(p, ", ")) {
        size_t k = strcspn(p, ", ");
        if (k == n && !strncmp(p, method, n)) return 1;
        p += k;
    }
    return 0;
}

/* 1 if the table has a route for the request's path and method; else answers 404
 * or 405 and returns 0. */
static int routed(req_t *r)
{
    const router_route *rt = router_match(r->path, r->method);
    if (!rt) {
        res_error(r, 404, reserved(r->path) ? "SUBSCRIPTION_NOT_FOUND" : "not_found", "no resource at %s", r->path);
        return 0;
    }
    if (!router_allows(rt, r->method)) {
        /* Allow: the methods of every route the path fits. */
        char allow[128] = "";
        size_t n = 0;
        for (size_t i = 0; i < router_nroutes && n < sizeof allow; i++)
            if (route_fits(&router_routes[i], r->path))
                n += (size_t)snprintf(allow + n, sizeof allow - n, "%s%s", n ? ", " : "", router_routes[i].methods);
        res_method_not_allowed(r, n < sizeof allow ? allow : rt->methods);
        return 0;
    }
    return 1;
}

/* The scope a route needs. Streams: read or write on the path; a session's own
 * stream is the session's (sessions:read on its id). Sessions: read for GET of a
 * session, its state, events, drift report, lineage and diff, write for everything else that names one; the
 * collection needs a scope of the kind (create and fork check the new id, the list
 * shows only what the token may read). Agents and workflows: any session scope may
 * read them, admin changes them. Metrics, recordings and the MCP servers: admin. */
/* A request on a collection (a list, a new item: the resource checks the new id)
 * needs a scope of the kind on anything. */
static int allow_kind(req_t *r, const char *kind)
{
    if (r->auth && auth_has_kind(r->auth, kind)) return 1;
    return req_allow(r, kind, NULL);
}

/* Any session scope: what may read the agents and workflows. */
static int any_session_scope(req_t *r)
{
    return r->auth && (auth_has_kind(r->auth, "sessions:read") || auth_has_kind(r->auth, "sessions:write"));
}

/* The first segment of rest (n bytes, cut to fit) into id[256]; what follows its
 * '/' (or ""). */
static const char *path_id(const char *rest, size_t n, char id[256])
{
    if (n >= 256) n = 255;
    memcpy(id, rest, n);
    id[n] = '\0';
    return rest[n] ? rest + n + 1 : "";
}

static int authorize(req_t *r, const char *path)
{
    const char *m = r->method;
    int get = !strcmp(m, "GET") || !strcmp(m, "HEAD");
    char id[256];
    if (!strncmp(path, STREAM_PREFIX, sizeof STREAM_PREFIX - 1)) {
        const char *sp = path + sizeof STREAM_PREFIX - 1;
        /* Subscriptions (the reserved __ds prefix) are the operator's: admin. The
         * JWK Set is public (receivers verify signatures with it); callback, ack and
         * release carry the wake's own token instead (route() skips this). */
        if (!strncmp(sp, "__ds", 4) && (sp[4] == '\0' || sp[4] == '/')) {
            if (get && !strcmp(sp, "__ds/jwks.json")) return 1;
            return req_allow(r, "admin", NULL);
        }
        if (!strncmp(sp, "sessions/", 9)) {
            path_id(sp + 9, strcspn(sp + 9, "/"), id);
            return req_allow(r, get ? "sessions:read" : "sessions:write", id);
        }
        return req_allow(r, get ? "streams:read" : "streams:write", sp);
    }
    if (!strcmp(path, "/metrics") || !strcmp(path, "/v1/metrics")) return req_allow(r, "admin", NULL);
    /* Recordings hold the conversations of every session: admin only. */
    if (!strncmp(path, "/v1/recordings", 14) && (path[14] == '\0' || path[14] == '/')) return req_allow(r, "admin", NULL);
    if (!strncmp(path, "/v1/mcp", 7) && (path[7] == '\0' || path[7] == '/')) return req_allow(r, "admin", NULL);
    if (!strncmp(path, "/v1/agents", 10) || !strncmp(path, "/v1/workflows", 13)) {
        if (get && (access_allows(r, "admin", NULL) ||
                    any_session_scope(r)))
            return 1;
        return req_allow(r, "admin", NULL);
    }
    if (!strncmp(path, "/v1/sessions", 12) && (path[12] == '\0' || path[12] == '/')) {
        const char *rest = path[12] ? path + 13 : "";
        size_t n = strcspn(rest, "/");
        if (n == 0) return allow_kind(r, get ? "sessions:read" : "sessions:write");
        const char *sub = path_id(rest, n, id);
        /* A bulk operation (POST /v1/sessions/cancel, delete, retry) needs a scope of
         * the kind; it touches only the sessions the token may write (the resource
         * checks each, fcgi/bulk.c). */
        if (!strcmp(m, "POST") && !*sub && sessions_bulk_action(id))
            return allow_kind(r, "sessions:write");
        /* A fork reads its source; the new session's id is checked by the resource, as
         * are a diff's other session and the sessions a lineage shows. */
        int read = (get && (!*sub || !strcmp(sub, "state") || !strcmp(sub, "events") || !strcmp(sub, "drift") ||
                            !strcmp(sub, "lineage") || !strcmp(sub, "diff") || !strcmp(sub, "proof"))) ||
                   (!strcmp(m, "POST") && !strcmp(sub, "fork"));
        return req_allow(r, read ? "sessions:read" : "sessions:write", id);
    }
    /* The AI SDK's chats are sessions: a message needs sessions:write on the chat's
     * id (in the body: the resource checks it), a resume sessions:read on it, a
     * stop sessions:write. */
    if (!strncmp(path, AISDK_PREFIX, sizeof AISDK_PREFIX - 1)) {
        const char *rest = path + sizeof AISDK_PREFIX - 1;
        rest += strcspn(rest, "/");
        if (*rest == '/') rest++;
        size_t n = strcspn(rest, "/");
        if (n == 0) return allow_kind(r, "sessions:write");
        path_id(rest, n, id);
        return req_allow(r, get ? "sessions:read" : "sessions:write", id);
    }
    /* The LangGraph SDK's assistants are the agents and workflows (read as those are);
     * its threads are sessions: a new one needs sessions:write (the resource checks
     * its id), a search sessions:read (it lists what the token may read); a thread's
     * state, history, runs read and a copy's source need sessions:read on its id, a
     * run, a cancel and a delete sessions:write (a run streamed or waited for both). */
    if (!strncmp(path, LANGGRAPH_PREFIX, sizeof LANGGRAPH_PREFIX - 1)) {
        const char *rest = path + sizeof LANGGRAPH_PREFIX - 1;
        if (!strncmp(rest, "assistants/", 11)) {
            if (access_allows(r, "admin", NULL) ||
                any_session_scope(r))
                return 1;
            return req_allow(r, "admin", NULL);
        }
        if (!strncmp(rest, "threads/", 8)) rest += 8;
        else rest = "";
        size_t n = strcspn(rest, "/");
        if (n == 0 || !strcmp(rest, "search")) return allow_kind(r, *rest ? "sessions:read" : "sessions:write");
        const char *sub = path_id(rest, n, id);
        int read = get || !strcmp(sub, "history") || !strcmp(sub, "copy");
        /* A streamed or waited run answers the thread's values: it reads it too. */
        if (!strcmp(sub, "runs/stream") || !strcmp(sub, "runs/wait"))
            return req_allow(r, "sessions:write", id) && req_allow(r, "sessions:read", id);
        return req_allow(r, read ? "sessions:read" : "sessions:write", id);
    }
    /* Anything else (404s included) is for token holders only. */
    if (!r->auth && !r->cfg->auth_off) return req_allow(r, "admin", NULL);
    return 1;
}

void route(req_t *r)
{
    /* A subscription's callback, ack and release authenticate with the wake's token. */
    int wake = subs_token_route(r->method, r->path);
    if (!(wake ? access_begin_open(r) : access_begin(r))) return;
    if (strcmp(r->path, "/v1/health") == 0) {
        if (routed(r)) health_handle(r);
        return;
    }
    if (!wake && !authorize(r, r->path)) return;
    /* Names in paths are text (UTF-8). Stream paths are checked at creation only
     * (fcgi/stream.c), so that a stream made before the rule can be read and deleted. */
    int stream = !strncmp(r->path, STREAM_PREFIX, sizeof STREAM_PREFIX - 1) && !reserved(r->path);
    if (!stream && !utf8_valid(r->path, strlen(r->path))) {
        res_error(r, 400, "bad_path", "request path is not valid UTF-8");
        return;
    }
    if (!routed(r)) return;
    if (reserved(r->path)) {
        subs_handle(r, r->path + sizeof STREAM_PREFIX - 1);
        return;
    }
    if (strncmp(r->path, STREAM_PREFIX, sizeof STREAM_PREFIX - 1) == 0) {
        stream_handle(r, r->path + sizeof STREAM_PREFIX - 1);
        return;
    }
    if (strcmp(r->path, "/metrics") == 0 || strcmp(r->path, "/v1/metrics") == 0) {
        metrics_handle(r);
        return;
    }
    /* Collection or one item: "/v1/agents" or "/v1/agents/{name}". */
    static const struct {
        const char *prefix;
        void (*fn)(req_t *, const char *);
    } coll[] = {{"/v1/agents", agents_handle},
                {"/v1/workflows", workflows_handle},
                {"/v1/sessions", sessions_handle},
                {"/v1/recordings", recordings_handle},
                {"/v1/mcp/servers", mcp_servers_handle},
                {"/v1/aisdk/chat", aisdk_handle},
                {"/v1/langgraph", langgraph_handle}};
    for (size_t i = 0; i < sizeof coll / sizeof coll[0]; i++) {
        size_t n = strlen(coll[i].prefix);
        if (strncmp(r->path, coll[i].prefix, n) != 0) continue;
        if (r->path[n] == '\0' || (r->path[n] == '/' && r->path[n + 1] == '\0')) {
            coll[i].fn(r, NULL);
            return;
        }
        if (r->path[n] == '/') {
            coll[i].fn(r, r->path + n + 1);
            return;
        }
    }
    res_error(r, 404, "not_found", "no resource at %s", r->path);
}

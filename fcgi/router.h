/* router: which resource answers a request. One file per resource in fcgi/. */
#ifndef DSTREAM_ROUTER_H
#define DSTREAM_ROUTER_H

#include "req.h"

void route(req_t *r);

/* One route the router serves: an OpenAPI path template and its methods. A {name}
 * parameter is one non-empty path segment; {path} is the rest of the path, slashes
 * included (a stream path). docs/openapi.json describes exactly these routes (its
 * test compares them with `dstream-fcgi --routes`). OPTIONS (CORS preflight) is
 * answered on every path and is not listed. */
typedef struct router_route {
    const char *path;
    const char *methods;        /* as in an Allow header: "GET, HEAD" */
} router_route;

extern const router_route router_routes[];
extern const size_t router_nroutes;

/* The route whose template matches a decoded path, or NULL: the first that lists
 * method (NULL: any), else the first that matches ("/v1/sessions/cancel" is both a
 * session's path and the bulk cancel's). A trailing "/" after a collection or item
 * is ignored ("/v1/agents/" is "/v1/agents"). */
const router_route *router_match(const char *path, const char *method);

/* 1 if method is one of the route's methods. */
int router_allows(const router_route *rt, const char *method);

/* Resources. */
void stream_handle(req_t *r, const char *path);   /* /v1/stream/{path} */
void health_handle(req_t *r);                     /* /v1/health */
void agents_handle(req_t *r, const char *name);    /* /v1/agents[/{name}] */
void workflows_handle(req_t *r, const char *name); /* /v1/workflows[/{name}] */
void sessions_handle(req_t *r, const char *rest);  /* /v1/sessions[/{id}[/...]] */
/* POST /v1/sessions/{cancel,delete,retry} (fcgi/bulk.c): action is one of the three. */
void sessions_bulk(req_t *r, const char *action);
/* 1 if name is a bulk operation's ("cancel", "delete", "retry"). */
int sessions_bulk_action(const char *name);
void subs_handle(req_t *r, const char *path);      /* /v1/stream/__ds/... (path from "__ds") */
void mcp_servers_handle(req_t *r, const char *name); /* /v1/mcp/servers[/{name}] */
void aisdk_handle(req_t *r, const char *rest);     /* /v1/aisdk/chat/{agent}[/{id}/...] (docs/clients.md) */
void langgraph_handle(req_t *r, const char *rest); /* /v1/langgraph/... (docs/clients.md) */
/* 1 if the request is a subscription callback, ack or release (its wake token is its credential). */
int subs_token_route(const char *method, const char *path);

/* Headers every response carries (security, CORS). */

#endif

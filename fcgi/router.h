/* router: which resource answers a request. One file per resource in fcgi/. */
#ifndef DSTREAM_ROUTER_H
#define DSTREAM_ROUTER_H

#include "req.h"

void route(req_t *r);

/* Resources. */
void stream_handle(req_t *r, const char *path);   /* /v1/stream/{path} */
void health_handle(req_t *r);                     /* /v1/health */
void agents_handle(req_t *r, const char *name);    /* /v1/agents[/{name}] */
void workflows_handle(req_t *r, const char *name); /* /v1/workflows[/{name}] */
void sessions_handle(req_t *r, const char *rest);  /* /v1/sessions[/{id}[/...]] */
void subs_handle(req_t *r, const char *path);      /* /v1/stream/__ds/... (path from "__ds") */
void mcp_servers_handle(req_t *r, const char *name); /* /v1/mcp/servers[/{name}] */
/* 1 if the request is a subscription callback, ack or release (its wake token is its credential). */
int subs_token_route(const char *method, const char *path);

/* Headers every response carries (security, CORS). */

#endif

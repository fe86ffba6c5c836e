#include "router.h"

#include <string.h>

#include "metrics.h"

#define STREAM_PREFIX "/v1/stream/"

void res_common_headers(req_t *r)
{
    res_header(r, "X-Content-Type-Options", "nosniff");
    res_header(r, "Cross-Origin-Resource-Policy", "cross-origin");
    res_header(r, "Access-Control-Allow-Origin", "*");
    res_header(r, "Access-Control-Expose-Headers",
               "Stream-Next-Offset, Stream-Cursor, Stream-Up-To-Date, Stream-Closed, "
               "Stream-TTL, Stream-Expires-At, ETag, Location, Content-Type, "
               "Producer-Epoch, Producer-Seq, Producer-Expected-Seq, Producer-Received-Seq, "
               "Stream-SSE-Data-Encoding");
}

void route(req_t *r)
{
    res_common_headers(r);
    if (strncmp(r->path, STREAM_PREFIX, sizeof STREAM_PREFIX - 1) == 0) {
        stream_handle(r, r->path + sizeof STREAM_PREFIX - 1);
        return;
    }
    if (strcmp(r->path, "/v1/health") == 0) {
        health_handle(r);
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
                {"/v1/sessions", sessions_handle}};
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

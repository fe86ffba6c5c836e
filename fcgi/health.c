/* /v1/health: is the database reachable from this responder. */
#include <string.h>

#include "router.h"

void health_handle(req_t *r)
{
    if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0) {
        res_method_not_allowed(r, "GET, HEAD");
        return;
    }
    log_info info;
    int rc = log_head(r->log, "\x01health-probe", &info);
    if (rc != LOG_OK && rc != LOG_ENOTFOUND) {
        res_header(r, "Retry-After", "1");
        res_error(r, 503, "unavailable", "database: %s", errs_str(rc));
        return;
    }
    static const char body[] = "{\"status\":\"ok\"}";
    res_header(r, "Content-Type", "application/json");
    res_header(r, "Cache-Control", "no-store");
    res_write(r, body, strcmp(r->method, "HEAD") ? sizeof body - 1 : 0);
}

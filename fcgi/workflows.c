/* /v1/workflows and /v1/workflows/{name}: versioned workflow documents. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/agent.h"
#include "../lib/defs.h"
#include "../lib/mcp.h"
#include "../lib/workflow.h"
#include "router.h"
#include "reply.h"

#define ERR_MAX 8192

static void add(req_t *r, const char *name)
{
    char err[ERR_MAX];
    json_t *doc = req_json_object(r);
    if (!doc) return;
    if (name) {
        json_t *n = json_object_get(doc, "name");
        if (n && (!json_is_string(n) || strcmp(json_string_value(n), name) != 0)) {
            res_error(r, 400, "name_mismatch", "the body's name differs from the URL's");
            goto out;
        }
        json_object_set_new(doc, "name", json_string(name));
    }
    /* Its tool steps may name only the operator's MCP servers (as agents, see
     * agents.c): alone, that mistake has a code of its own. */
    char servers[2048];
    int bad = workflow_validate(doc, err, sizeof err);
    if (mcp_check_workflow(r->cfg->mcp_config, doc, servers, sizeof servers)) {
        if (!bad) {
            res_invalid(r, "unknown_mcp_server", servers);
            goto out;
        }
        size_t len = strlen(err);
        snprintf(err + len, sizeof err - len, "%s%s", len ? "\n" : "", servers);
    }
    if (bad) {
        res_invalid(r, "invalid_workflow", err);
        goto out;
    }
    name = json_string_value(json_object_get(doc, "name"));
    char *text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
    int version = 0;
    int rc = defs_workflow_add(r->log, name, text, &version);
    free(text);
    if (rc) {
        reply_fail(r, rc);
        goto out;
    }
    res_headerf(r, "Location", "/v1/workflows/%s?version=%d", name, version);
    json_t *o = json_pack("{s:s, s:i, s:O}", "name", name, "version", version, "document", doc);
    res_json(r, 201, o);
    json_decref(o);
out:
    json_decref(doc);
}

void workflows_handle(req_t *r, const char *name)
{
    const char *m = r->method;
    int rc;
    if (!name) {
        if (!strcmp(m, "GET")) {
            json_t *arr = json_array();
            if ((rc = defs_workflow_list(r->log, arr))) {
                json_decref(arr);
                reply_fail(r, rc);
                return;
            }
            json_t *o = json_pack("{s:o}", "workflows", arr);
            res_json(r, 200, o);
            json_decref(o);
        } else if (!strcmp(m, "POST")) {
            add(r, NULL);
        } else {
            res_method_not_allowed(r, "GET, POST");
        }
        return;
    }
    if (!agent_valid_name(name)) {
        res_error(r, 400, "bad_name", "workflow names are 1 to 64 of [A-Za-z0-9_.-]");
        return;
    }
    if (!strcmp(m, "GET")) {
        char v[16];
        long version = 0;
        int n = req_query(r, "version", v, sizeof v);
        if (n >= 0) {
            char *end;
            errno = 0;
            version = strtol(v, &end, 10);
            if (n == 0 || *end || errno || version < 1 || version > 1000000000) {
                res_error(r, 400, "bad_version", "version must be a positive integer");
                return;
            }
        } else if (n < -1) {
            res_error(r, 400, "bad_version", "version must be a positive integer");
            return;
        }
        int got = 0;
        json_t *doc = defs_workflow_get(r->log, name, (int)version, &got, &rc);
        if (!doc) {
            if (rc == LOG_ENOTFOUND) res_error(r, 404, "not_found", "no workflow %s%s", name, version ? " at that version" : "");
            else reply_fail(r, rc);
            return;
        }
        json_t *o = json_pack("{s:s, s:i, s:o}", "name", name, "version", got, "document", doc);
        res_json(r, 200, o);
        json_decref(o);
    } else if (!strcmp(m, "PUT")) {
        add(r, name);
    } else {
        res_method_not_allowed(r, "GET, PUT");
    }
}

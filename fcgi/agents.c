/* /v1/agents and /v1/agents/{name}: stored agent definitions (lib/agent, lib/defs). */
#include <stdio.h>
#include <string.h>

#include "../lib/agent.h"
#include "../lib/defs.h"
#include "../lib/mcp.h"
#include "../lib/provcfg.h"
#include "router.h"
#include "reply.h"

#define ERR_MAX 8192

/* Validate doc (with name forced to `name` when given). Answers 400 on mistakes. */
static int validate(req_t *r, json_t *doc, const char *name)
{
    char err[ERR_MAX];
    if (name) {
        json_t *n = json_object_get(doc, "name");
        if (n && (!json_is_string(n) || strcmp(json_string_value(n), name) != 0)) {
            res_error(r, 400, "name_mismatch", "the body's name differs from the URL's");
            return -1;
        }
        json_object_set_new(doc, "name", json_string(name));
    }
    /* The document's own shape, then what the operator allows: the provider must
     * be configured and an endpoint allowed for it (lib/provcfg). */
    char more[1024];
    int bad = agent_validate(doc, err, sizeof err);
    if (provcfg_check_agent(r->cfg->providers, doc, more, sizeof more)) {
        /* One mistake per field: a field the document check named already needs
         * fixing before the operator's rules can say anything about it. */
        for (char *line = more, *end; line && *line; line = end ? end + 1 : NULL) {
            end = strchr(line, '\n');
            if (end) *end = '\0';
            size_t field = strcspn(line, ":");
            int named = !strncmp(err, line, field + 1);
            for (const char *nl = strchr(err, '\n'); nl && !named; nl = strchr(nl + 1, '\n'))
                named = !strncmp(nl + 1, line, field + 1);
            size_t len = strlen(err);
            if (!named) snprintf(err + len, sizeof err - len, "%s%s", len ? "\n" : "", line);
        }
        bad = -1;
    }
    /* The MCP servers it names must be the operator's, when the pool has their
     * configuration (lib/mcp; without one the runner finds out). Alone, that
     * mistake has a code of its own. */
    char servers[2048];
    if (mcp_check_agent(r->cfg->mcp_config, doc, servers, sizeof servers)) {
        if (!bad) {
            res_invalid(r, "unknown_mcp_server", servers);
            return -1;
        }
        size_t len = strlen(err);
        snprintf(err + len, sizeof err - len, "%s%s", len ? "\n" : "", servers);
    }
    if (bad) {
        res_invalid(r, "invalid_agent", err);
        return -1;
    }
    return 0;
}

static void put(req_t *r, const char *name, int create_only)
{
    json_t *doc = req_json_object(r);
    if (!doc) return;
    if (validate(r, doc, name)) goto out;
    name = json_string_value(json_object_get(doc, "name"));
    char *text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
    int created = 0;
    int rc = defs_agent_put(r->log, name, text, create_only, &created);
    free(text);
    if (rc == LOG_ECONFLICT) {
        res_error(r, 409, "agent_exists", "agent %s exists (PUT /v1/agents/%s replaces it)", name, name);
        goto out;
    }
    if (rc) {
        reply_fail(r, rc);
        goto out;
    }
    if (created) res_headerf(r, "Location", "/v1/agents/%s", name);
    res_json(r, created ? 201 : 200, doc);
out:
    json_decref(doc);
}

void agents_handle(req_t *r, const char *name)
{
    const char *m = r->method;
    int rc;
    if (!name) {
        if (!strcmp(m, "GET")) {
            json_t *arr = json_array();
            if ((rc = defs_agent_list(r->log, arr))) reply_fail(r, rc);
            else {
                json_t *o = json_pack("{s:o}", "agents", arr);
                res_json(r, 200, o);
                json_decref(o);
                return;
            }
            json_decref(arr);
        } else if (!strcmp(m, "POST")) {
            put(r, NULL, 1);
        } else {
            res_method_not_allowed(r, "GET, POST");
        }
        return;
    }
    if (!agent_valid_name(name)) {
        res_error(r, 400, "bad_name", "agent names are 1 to 64 of [A-Za-z0-9_.-]");
        return;
    }
    if (!strcmp(m, "GET")) {
        json_t *doc = defs_agent_get(r->log, name, &rc);
        if (!doc) {
            if (rc == LOG_ENOTFOUND) res_error(r, 404, "not_found", "no agent %s", name);
            else reply_fail(r, rc);
            return;
        }
        agent_redact(doc);
        res_json(r, 200, doc);
        json_decref(doc);
    } else if (!strcmp(m, "PUT")) {
        put(r, name, 0);
    } else if (!strcmp(m, "DELETE")) {
        rc = defs_agent_delete(r->log, name);
        if (rc == LOG_ENOTFOUND) res_error(r, 404, "not_found", "no agent %s", name);
        else if (rc) reply_fail(r, rc);
        else {
            res_status(r, 204);
            res_end(r);
        }
    } else {
        res_method_not_allowed(r, "GET, PUT, DELETE");
    }
}

/* /v1/mcp/servers[/{name}]: the operator's MCP servers (DSTREAM_MCP_CONFIG, as the
 * pool loaded it at start) as they may be shown (lib/mcp mcp_server_public: no
 * environment values), each with what the runners publish of it (lib/rstats: calls,
 * failures by reason, starts, by runner). Read-only, admin only (router.c): the
 * file is the operator's, changed on the machine, never over HTTP. */
#include <string.h>

#include "../lib/mcp.h"
#include "../lib/rstats.h"
#include "reply.h"
#include "router.h"

/* Add each runner's figures of a server to the "figures" of its entry in servers. */
static void add_figures(void *ud, const char *owner, const rstats_mcp *m)
{
    json_t *srv = json_object_get((json_t *)ud, m->server);
    if (!srv) return;   /* "other", or a server no longer configured */
    json_t *failures = json_object();
    for (int k = 0; k < RSTATS_MCP_REASONS; k++)
        json_object_set_new(failures, rstats_mcp_reason[k], json_integer(m->failures[k]));
    json_array_append_new(json_object_get(srv, "figures"),
                          json_pack("{s:s, s:I, s:o, s:I}", "runner", owner, "calls", (json_int_t)m->calls, "failures",
                                    failures, "starts", (json_int_t)m->starts));
}

void mcp_servers_handle(req_t *r, const char *name)
{
    if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD")) {
        res_method_not_allowed(r, "GET, HEAD");
        return;
    }
    const json_t *config = r->cfg->mcp_config, *srv;
    json_t *byname = json_object();
    const char *k;
    json_object_foreach(json_object_get(config, "mcpServers"), k, srv) {
        if (name && strcmp(name, k)) continue;
        json_t *pub = mcp_server_public(srv);
        json_object_set_new(pub, "name", json_string(k));
        json_object_set_new(pub, "figures", json_array());
        json_object_set_new(byname, k, pub);
    }
    if (name && !json_object_size(byname)) {
        json_decref(byname);
        res_error(r, 404, "not_found", "no MCP server named %.100s is configured", name);
        return;
    }
    rstats_figures_read(r->log, r->cfg->db_path, &(rstats_figures_fn){NULL, add_figures, NULL, byname, NULL, NULL});
    json_t *out;
    if (name) {
        out = json_incref(json_object_get(byname, name));
    } else {
        json_t *list = json_array(), *v;
        json_object_foreach(byname, k, v) json_array_append(list, v);
        const json_t *b = json_object_get(config, "bindings");
        out = json_pack("{s:b, s:o, s:o}", "configured", config != NULL, "servers", list, "bindings",
                        b ? json_incref((json_t *)b) : json_object());
    }
    json_decref(byname);
    res_json(r, 200, out);
    json_decref(out);
}

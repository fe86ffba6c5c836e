/* dstream mcp [FILE]: check the operator's MCP configuration (FILE, else
 * $DSTREAM_MCP_CONFIG) as dstream-runner and dstream-fcgi read it (lib/mcp
 * mcp_config_load), and show each server: what it runs, where, with which limits
 * and which tools are declared side-effecting or read-only; then the bindings of
 * declared tools. Environment values are not shown (they may be secrets), only
 * their names. Exits 0 when the runner would accept the file, 1 when not, 2 on
 * usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/mcp.h"
#include "cli.h"

static int conf_int(const json_t *srv, const char *key, int def)
{
    const json_t *v = json_object_get(srv, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : def;
}

int cmd_mcp(int argc, char **argv)
{
    char err[8192];
    const char *path = argc > 0 ? argv[0] : getenv("DSTREAM_MCP_CONFIG");
    if (argc > 1 || !path || !*path) {
        fprintf(stderr, "usage: dstream mcp [FILE]   (default: $DSTREAM_MCP_CONFIG)\n");
        return 2;
    }
    json_t *doc = mcp_config_load(path, err, sizeof err);
    if (!doc) {
        for (char *line = err, *nl; line && *line; line = nl ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            printf("problem: %s\n", line);
        }
        printf("the runner would not start with this file\n");
        return 1;
    }
    int status = 0;
    const char *name, *k;
    const json_t *srv, *v;
    size_t i;
    json_object_foreach(json_object_get(doc, "mcpServers"), name, srv) {
        printf("%s: %s", name, json_string_value(json_object_get(srv, "command")));
        json_array_foreach(json_object_get(srv, "args"), i, v) printf(" %s", json_string_value(v));
        printf("\n  cwd %s, timeout %d ms, %d calls at once, stopped after %d ms idle\n",
               json_string_value(json_object_get(srv, "cwd")) ? json_string_value(json_object_get(srv, "cwd"))
                                                              : "(the runner's)",
               conf_int(srv, "timeoutMs", MCP_TIMEOUT_MS), conf_int(srv, "concurrency", MCP_CONCURRENCY),
               conf_int(srv, "idleStopMs", MCP_IDLE_STOP_MS));
        if (json_object_size(json_object_get(srv, "env"))) {
            printf("  env:");
            json_object_foreach(json_object_get(srv, "env"), k, v) printf(" %s", k);
            printf(" (values not shown)\n");
        }
        json_object_foreach(json_object_get(srv, "tools"), k, v)
            printf("  tool %s: %s (set by the operator)\n", k, json_string_value(v));
        if (access(json_string_value(json_object_get(srv, "command")), X_OK)) {
            printf("problem: %s: %s is not an executable file\n", name, json_string_value(json_object_get(srv, "command")));
            status = 1;
        }
    }
    json_object_foreach(json_object_get(doc, "bindings"), k, v)
        printf("binding %s: %s on server %s\n", k, json_string_value(json_object_get(v, "tool")),
               json_string_value(json_object_get(v, "server")));
    printf("%zu MCP servers, %zu bindings%s\n", json_object_size(json_object_get(doc, "mcpServers")),
           json_object_size(json_object_get(doc, "bindings")),
           status ? "; the runner would not start with this file" : "");
    json_decref(doc);
    return status;
}

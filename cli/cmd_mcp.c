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
#include "../lib/utf8.h"
#include "cli.h"
#include "http.h"

/* Every line of err as a problem in problems. */
static void add_problems(json_t *problems, char *err)
{
    for (char *line = err, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        json_array_append_new(problems, utf8_json(line));
    }
}

int cmd_mcp(int argc, char **argv)
{
    char err[8192];
    const char *path = argc > 0 ? argv[0] : getenv("DSTREAM_MCP_CONFIG");
    if (argc > 1 || !path || !*path) return cli_usage("mcp");
    json_t *doc = mcp_config_load(path, err, sizeof err), *problems = json_array(), *servers = json_object();
    const char *name, *k;
    const json_t *srv, *v;
    size_t i;
    if (!doc) add_problems(problems, err);
    json_object_foreach(json_object_get(doc, "mcpServers"), name, srv) {
        const char *cmd = json_string_value(json_object_get(srv, "command"));
        json_t *pub = mcp_server_public(srv);
        json_object_set_new(servers, name, pub);
        if (access(cmd ? cmd : "", X_OK)) {
            char p[600];
            snprintf(p, sizeof p, "%s: %s is not an executable file", name, cmd ? cmd : "(none)");
            json_array_append_new(problems, utf8_json(p));
        }
        if (cli_json) continue;
        printf("%s: %s", name, cmd);
        json_array_foreach(json_object_get(srv, "args"), i, v) printf(" %s", json_string_value(v));
        printf("\n  cwd %s, timeout %d ms, %d calls at once, stopped after %d ms idle\n",
               json_string_value(json_object_get(srv, "cwd")) ? json_string_value(json_object_get(srv, "cwd"))
                                                              : "(the runner's)",
               (int)json_integer_value(json_object_get(pub, "timeoutMs")),
               (int)json_integer_value(json_object_get(pub, "concurrency")),
               (int)json_integer_value(json_object_get(pub, "idleStopMs")));
        if (json_object_size(json_object_get(srv, "env"))) {
            printf("  env:");
            json_object_foreach(json_object_get(srv, "env"), k, v) printf(" %s", k);
            printf(" (values not shown)\n");
        }
        json_object_foreach(json_object_get(srv, "tools"), k, v)
            printf("  tool %s: %s (set by the operator)\n", k, json_string_value(v));
    }
    int status = json_array_size(problems) ? 1 : 0;
    if (cli_json) {
        json_t *b = json_object_get(doc, "bindings");
        json_t *j = json_pack("{s:s, s:b, s:O, s:o, s:O}", "file", path, "ok", !status, "servers", servers, "bindings",
                              b ? json_incref(b) : json_object(), "problems", problems);
        print_json(j);
        json_decref(j);
    } else {
        json_array_foreach(problems, i, v) printf("problem: %s\n", json_string_value(v));
        json_object_foreach(json_object_get(doc, "bindings"), k, v)
            printf("binding %s: %s on server %s\n", k, json_string_value(json_object_get(v, "tool")),
                   json_string_value(json_object_get(v, "server")));
        if (doc)
            printf("%zu MCP servers, %zu bindings%s\n", json_object_size(json_object_get(doc, "mcpServers")),
                   json_object_size(json_object_get(doc, "bindings")),
                   status ? "; the runner would not start with this file" : "");
        else
            printf("the runner would not start with this file\n");
    }
    json_decref(servers);
    json_decref(problems);
    json_decref(doc);
    return status;
}

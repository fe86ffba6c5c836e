/* defs: stored agent and workflow definitions (validated JSON documents).
 * Agents have one current document per name; workflows keep every version. */
#ifndef DSTREAM_DEFS_H
#define DSTREAM_DEFS_H

#include <jansson.h>

#include "log.h"

/* Store agent `name`. create_only: LOG_ECONFLICT if it exists. *created tells
 * whether it is new. Returns 0 or LOG_E*. */
int defs_agent_put(log_conn_t *c, const char *name, const char *doc, int create_only, int *created);
/* The agent's document (new reference) or NULL with *rc = LOG_ENOTFOUND/LOG_E*. */
json_t *defs_agent_get(log_conn_t *c, const char *name, int *rc);
/* Append {name, createdMs, updatedMs, provider, model} for every agent to arr. */
int defs_agent_list(log_conn_t *c, json_t *arr);
int defs_agent_delete(log_conn_t *c, const char *name);

/* Store a new version of workflow `name`; *version gets its number (1, 2, ...). */
int defs_workflow_add(log_conn_t *c, const char *name, const char *doc, int *version);
/* Version `version` (0: the latest) of the workflow (new reference), *got_version set. */
json_t *defs_workflow_get(log_conn_t *c, const char *name, int version, int *got_version, int *rc);
/* Append {name, latestVersion, createdMs} for every workflow to arr. */
int defs_workflow_list(log_conn_t *c, json_t *arr);

/* The arguments of the engine's writes (lib/store.h). */
typedef struct defs_put_arg {
    const char *name, *doc;
    int create_only;
    int created, version;              /* out */
} defs_put_arg;

#endif

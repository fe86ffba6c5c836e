/* defs: stored agent and workflow definitions (see defs.h); the rows are the
 * engine's (lib/store.h). */
#include "defs.h"

#include "store.h"

static int op_agent_put(log_conn_t *c, void *arg)
{
    return store_of(c)->defs->agent_put(c, arg);
}

int defs_agent_put(log_conn_t *c, const char *name, const char *doc, int create_only, int *created)
{
    defs_put_arg a = {name, doc, create_only, 0, 0};
    int rc = log_transact(c, op_agent_put, &a);
    if (created) *created = a.created;
    return rc;
}

json_t *defs_agent_get(log_conn_t *c, const char *name, int *rc)
{
    return store_of(c)->defs->agent_get(c, name, rc);
}

int defs_agent_list(log_conn_t *c, json_t *arr)
{
    return store_of(c)->defs->agent_list(c, arr);
}

static int op_agent_delete(log_conn_t *c, void *arg)
{
    return store_of(c)->defs->agent_delete(c, arg);
}

int defs_agent_delete(log_conn_t *c, const char *name)
{
    return log_transact(c, op_agent_delete, (void *)name);
}

static int op_workflow_add(log_conn_t *c, void *arg)
{
    return store_of(c)->defs->workflow_add(c, arg);
}

int defs_workflow_add(log_conn_t *c, const char *name, const char *doc, int *version)
{
    defs_put_arg a = {name, doc, 0, 0, 0};
    int rc = log_transact(c, op_workflow_add, &a);
    *version = a.version;
    return rc;
}

json_t *defs_workflow_get(log_conn_t *c, const char *name, int version, int *got_version, int *rc)
{
    return store_of(c)->defs->workflow_get(c, name, version, got_version, rc);
}

int defs_workflow_list(log_conn_t *c, json_t *arr)
{
    return store_of(c)->defs->workflow_list(c, arr);
}

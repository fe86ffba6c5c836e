/* The PostgreSQL engine's agent and workflow definitions (lib/defs.h). */
#include "pg.h"

#include <string.h>

#include "../../timefmt.h"

static int pg_agent_put(log_conn_t *c, defs_put_arg *a)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, a->name);
    PGresult *r = pg_run(c, "SELECT 1 FROM agents WHERE name = $1::text", &p, 0, &rc);
    if (!r) return rc;
    a->created = PQntuples(r) == 0;
    PQclear(r);
    if (!a->created && a->create_only) return LOG_ECONFLICT;
    pg_params_init(&p);
    pg_text(&p, a->name);
    pg_text(&p, a->doc);
    pg_int(&p, timefmt_now_ms());
    return pg_exec(c, "INSERT INTO agents (name, doc, created_ms, updated_ms)"
                      " VALUES ($1::text, $2::text, $3::bigint, $3::bigint)"
                      " ON CONFLICT (name) DO UPDATE SET doc = EXCLUDED.doc, updated_ms = EXCLUDED.updated_ms",
                   &p);
}

static json_t *load_doc(const PGresult *r, int row, int col)
{
    const char *t = pg_text_of(r, row, col);
    return t ? json_loads(t, 0, NULL) : NULL;
}

/* The document of r's first row (column 0; its version in column 1 into *version
 * unless NULL), r cleared: *rc 0, LOG_ENOTFOUND without a row, LOG_EIO when it
 * does not load. r NULL (the statement failed, *rc set): NULL. */
static json_t *first_doc(PGresult *r, int *version, int *rc)
{
    json_t *doc = NULL;
    if (!r) return NULL;
    if (PQntuples(r) > 0) {
        doc = load_doc(r, 0, 0);
        if (version) *version = (int)pg_int_of(r, 0, 1);
        *rc = doc ? 0 : LOG_EIO;
    } else {
        *rc = LOG_ENOTFOUND;
    }
    PQclear(r);
    return doc;
}

static json_t *pg_agent_get(log_conn_t *c, const char *name, int *rc)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, name);
    return first_doc(pg_run(c, "SELECT doc FROM agents WHERE name = $1::text", &p, 0, rc), NULL, rc);
}

static int pg_agent_list(log_conn_t *c, json_t *arr)
{
    int rc;
    PGresult *r = pg_run(c, "SELECT name, doc, created_ms, updated_ms FROM agents ORDER BY name COLLATE \"C\"",
                         NULL, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        json_t *doc = load_doc(r, i, 1);
        json_t *o = json_pack("{s:s, s:I, s:I}", "name", pg_text_of(r, i, 0), "createdMs",
                              (json_int_t)pg_int_of(r, i, 2), "updatedMs", (json_int_t)pg_int_of(r, i, 3));
        if (doc) {
            json_object_set(o, "provider", json_object_get(doc, "provider"));
            json_object_set(o, "model", json_object_get(doc, "model"));
        }
        json_decref(doc);
        json_array_append_new(arr, o);
    }
    PQclear(r);
    return 0;
}

static int pg_agent_delete(log_conn_t *c, const char *name)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, name);
    PGresult *r = pg_run(c, "DELETE FROM agents WHERE name = $1::text", &p, 0, &rc);
    if (!r) return rc;
    rc = pg_affected(r) ? 0 : LOG_ENOTFOUND;
    PQclear(r);
    return rc;
}

static int pg_workflow_add(log_conn_t *c, defs_put_arg *a)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, a->name);
    PGresult *r = pg_run(c, "SELECT coalesce(max(version), 0) + 1 FROM workflows WHERE name = $1::text",
                         &p, 0, &rc);
    if (!r) return rc;
    if (PQntuples(r) > 0) a->version = (int)pg_int_of(r, 0, 0);
    PQclear(r);
    pg_params_init(&p);
    pg_text(&p, a->name);
    pg_int(&p, a->version);
    pg_text(&p, a->doc);
    pg_int(&p, timefmt_now_ms());
    return pg_exec(c, "INSERT INTO workflows (name, version, doc, created_ms)"
                      " VALUES ($1::text, $2::bigint, $3::text, $4::bigint)", &p);
}

static json_t *pg_workflow_get(log_conn_t *c, const char *name, int version, int *got_version, int *rc)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, name);
    pg_int(&p, version);
    PGresult *r = pg_run(c, "SELECT doc, version FROM workflows WHERE name = $1::text"
                            " AND ($2::bigint = 0 OR version = $2::bigint) ORDER BY version DESC LIMIT 1",
                         &p, 0, rc);
    return first_doc(r, got_version, rc);
}

static int pg_workflow_list(log_conn_t *c, json_t *arr)
{
    int rc;
    PGresult *r = pg_run(c, "SELECT name, max(version), min(created_ms) FROM workflows GROUP BY name"
                            " ORDER BY name COLLATE \"C\"", NULL, 0, &rc);
    if (!r) return rc;
    for (int i = 0; i < PQntuples(r); i++)
        json_array_append_new(arr, json_pack("{s:s, s:i, s:I}", "name", pg_text_of(r, i, 0), "latestVersion",
                                             (int)pg_int_of(r, i, 1), "createdMs",
                                             (json_int_t)pg_int_of(r, i, 2)));
    PQclear(r);
    return 0;
}

const store_defs_ops pg_defs_ops = {
    .agent_put = pg_agent_put,
    .agent_get = pg_agent_get,
    .agent_list = pg_agent_list,
    .agent_delete = pg_agent_delete,
    .workflow_add = pg_workflow_add,
    .workflow_get = pg_workflow_get,
    .workflow_list = pg_workflow_list,
};

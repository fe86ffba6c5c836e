/* The SQLite engine's agent and workflow definitions (lib/defs.h). */
#include "sq.h"

#include <string.h>

#include "../../timefmt.h"

static int sq_agent_put(log_conn_t *c, defs_put_arg *a)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT 1 FROM agents WHERE name = ?", &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, a->name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    a->created = rc == SQLITE_DONE;
    if ((rc = sq_stmt_finish(c, st, rc))) return rc;
    if (!a->created && a->create_only) return LOG_ECONFLICT;
    if (sq_stmt(c, "INSERT INTO agents (name, doc, created_ms, updated_ms) VALUES (?1, ?2, ?3, ?3)"
                " ON CONFLICT(name) DO UPDATE SET doc = ?2, updated_ms = ?3", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, a->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, a->doc, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, timefmt_now_ms());
    return sq_stmt_finish(c, st, sqlite3_step(st));
}

static json_t *load_doc(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? json_loads((const char *)t, 0, NULL) : NULL;
}

static json_t *sq_agent_get(log_conn_t *c, const char *name, int *rc)
{
    sqlite3_stmt *st;
    json_t *doc = NULL;
    if (sq_stmt(c, "SELECT doc FROM agents WHERE name = ?", &st)) {
        *rc = LOG_EIO;
        return NULL;
    }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW) doc = load_doc(st, 0);
    *rc = s == SQLITE_ROW ? (doc ? 0 : LOG_EIO) : s == SQLITE_DONE ? LOG_ENOTFOUND : LOG_EIO;
    sq_stmt_done(c, st);
    return doc;
}

static int sq_agent_list(log_conn_t *c, json_t *arr)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT name, doc, created_ms, updated_ms FROM agents ORDER BY name", &st))
        return LOG_EIO;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *doc = load_doc(st, 1);
        json_t *o = json_pack("{s:s, s:I, s:I}", "name", (const char *)sqlite3_column_text(st, 0),
                              "createdMs", (json_int_t)sqlite3_column_int64(st, 2), "updatedMs",
                              (json_int_t)sqlite3_column_int64(st, 3));
        if (doc) {
            json_object_set(o, "provider", json_object_get(doc, "provider"));
            json_object_set(o, "model", json_object_get(doc, "model"));
        }
        json_decref(doc);
        json_array_append_new(arr, o);
    }
    return sq_stmt_finish(c, st, rc);
}

static int sq_agent_delete(log_conn_t *c, const char *name)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "DELETE FROM agents WHERE name = ?", &st)) return LOG_EIO;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = sq_stmt_finish(c, st, sqlite3_step(st));
    if (rc) return rc;
    return sqlite3_changes(sq_db(c)) ? 0 : LOG_ENOTFOUND;
}

static int sq_workflow_add(log_conn_t *c, defs_put_arg *a)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT coalesce(max(version), 0) + 1 FROM workflows WHERE name = ?", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, a->name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) a->version = sqlite3_column_int(st, 0);
    if ((rc = sq_stmt_finish(c, st, rc))) return rc;
    if (sq_stmt(c, "INSERT INTO workflows (name, version, doc, created_ms) VALUES (?, ?, ?, ?)", &st))
        return LOG_EIO;
    sqlite3_bind_text(st, 1, a->name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, a->version);
    sqlite3_bind_text(st, 3, a->doc, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, timefmt_now_ms());
    return sq_stmt_finish(c, st, sqlite3_step(st));
}

static json_t *sq_workflow_get(log_conn_t *c, const char *name, int version, int *got_version, int *rc)
{
    sqlite3_stmt *st;
    json_t *doc = NULL;
    if (sq_stmt(c, "SELECT doc, version FROM workflows WHERE name = ?1 AND (?2 = 0 OR version = ?2)"
                " ORDER BY version DESC LIMIT 1", &st)) {
        *rc = LOG_EIO;
        return NULL;
    }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, version);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW) {
        doc = load_doc(st, 0);
        *got_version = sqlite3_column_int(st, 1);
    }
    *rc = s == SQLITE_ROW ? (doc ? 0 : LOG_EIO) : s == SQLITE_DONE ? LOG_ENOTFOUND : LOG_EIO;
    sq_stmt_done(c, st);
    return doc;
}

static int sq_workflow_list(log_conn_t *c, json_t *arr)
{
    sqlite3_stmt *st;
    if (sq_stmt(c, "SELECT name, max(version), min(created_ms) FROM workflows GROUP BY name ORDER BY name",
             &st))
        return LOG_EIO;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        json_array_append_new(arr, json_pack("{s:s, s:i, s:I}", "name",
                                             (const char *)sqlite3_column_text(st, 0), "latestVersion",
                                             sqlite3_column_int(st, 1), "createdMs",
                                             (json_int_t)sqlite3_column_int64(st, 2)));
    return sq_stmt_finish(c, st, rc);
}

const store_defs_ops sq_defs_ops = {
    .agent_put = sq_agent_put,
    .agent_get = sq_agent_get,
    .agent_list = sq_agent_list,
    .agent_delete = sq_agent_delete,
    .workflow_add = sq_workflow_add,
    .workflow_get = sq_workflow_get,
    .workflow_list = sq_workflow_list,
};

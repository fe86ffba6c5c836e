/* Unit tests for lib/defs.c on a database in a temporary directory: agents (put
 * create-only and replace, get, list, delete) and versioned workflows (add, get
 * by version or latest, list). On PostgreSQL too when DSTREAM_TEST_PG is set. */
#include "defs.h"

#include <string.h>

#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

static const char AGENT1[] = "{\"provider\":\"anthropic\",\"model\":\"claude-one\",\"system\":\"be brief\"}";
static const char AGENT2[] = "{\"provider\":\"openai\",\"model\":\"gpt-two\",\"tools\":[]}";
static const char AGENT3[] = "{\"system\":\"no provider named\"}";
static const char WF1[] = "{\"steps\":[{\"agent\":\"writer\"}]}";
static const char WF2[] = "{\"steps\":[{\"agent\":\"writer\"},{\"agent\":\"editor\"}]}";

/* 1 if doc equals the JSON text want. */
static int json_is(json_t *doc, const char *want)
{
    json_t *w = json_loads(want, 0, NULL);
    int eq = doc && w && json_equal(doc, w);
    json_decref(w);
    return eq;
}

/* The element of arr whose "name" is name, or NULL. */
static json_t *by_name(json_t *arr, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o) {
        const char *n = json_string_value(json_object_get(o, "name"));
        if (n && strcmp(n, name) == 0) return o;
    }
    return NULL;
}

static void test_agents(void)
{
    int created = -1, rc = 0;
    /* New, create-only: created. */
    CHECK_EQ_INT(defs_agent_put(conn, "writer", AGENT1, 1, &created), 0);
    CHECK_EQ_INT(created, 1);
    /* Again create-only: a conflict, and the document is untouched. */
    created = -1;
    CHECK_EQ_INT(defs_agent_put(conn, "writer", AGENT2, 1, &created), LOG_ECONFLICT);
    CHECK_EQ_INT(created, 0);
    json_t *doc = defs_agent_get(conn, "writer", &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(json_is(doc, AGENT1));
    json_decref(doc);
    /* Replace: stored, not created. */
    created = -1;
    CHECK_EQ_INT(defs_agent_put(conn, "writer", AGENT2, 0, &created), 0);
    CHECK_EQ_INT(created, 0);
    rc = 1;
    doc = defs_agent_get(conn, "writer", &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(json_is(doc, AGENT2));
    json_decref(doc);
    /* Replace of a new name creates it; created may be NULL. */
    created = -1;
    CHECK_EQ_INT(defs_agent_put(conn, "editor", AGENT1, 0, &created), 0);
    CHECK_EQ_INT(created, 1);
    CHECK_EQ_INT(defs_agent_put(conn, "bare", AGENT3, 1, NULL), 0);

    /* The list: every agent, by name, with provider and model from the document. */
    json_t *arr = json_array();
    CHECK_EQ_INT(defs_agent_list(conn, arr), 0);
    CHECK_EQ_UINT(json_array_size(arr), 3);
    static const char *const order[] = {"bare", "editor", "writer"};
    for (size_t i = 0; i < 3 && i < json_array_size(arr); i++)
        CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(arr, i), "name")), order[i]);
    json_t *w = by_name(arr, "writer");
    if (CHECK(w != NULL)) {
        CHECK_EQ_STR(json_string_value(json_object_get(w, "provider")), "openai");
        CHECK_EQ_STR(json_string_value(json_object_get(w, "model")), "gpt-two");
        json_int_t c = json_integer_value(json_object_get(w, "createdMs"));
        json_int_t u = json_integer_value(json_object_get(w, "updatedMs"));
        CHECK(c > 1700000000000LL);
        CHECK(u >= c);
        /* Only the summary, not the document. */
        CHECK(json_object_get(w, "tools") == NULL);
    }
    json_t *e = by_name(arr, "editor");
    if (CHECK(e != NULL)) {
        CHECK_EQ_STR(json_string_value(json_object_get(e, "provider")), "anthropic");
        CHECK_EQ_STR(json_string_value(json_object_get(e, "model")), "claude-one");
    }
    json_t *b = by_name(arr, "bare");
    if (CHECK(b != NULL)) CHECK(json_object_get(b, "provider") == NULL);
    json_decref(arr);

    /* Delete: once. */
    CHECK_EQ_INT(defs_agent_delete(conn, "writer"), 0);
    CHECK_EQ_INT(defs_agent_delete(conn, "writer"), LOG_ENOTFOUND);
    rc = 0;
    doc = defs_agent_get(conn, "writer", &rc);
    CHECK(doc == NULL);
    CHECK_EQ_INT(rc, LOG_ENOTFOUND);
    json_decref(doc);
    arr = json_array();
    CHECK_EQ_INT(defs_agent_list(conn, arr), 0);
    CHECK_EQ_UINT(json_array_size(arr), 2);
    CHECK(by_name(arr, "writer") == NULL);
    json_decref(arr);
    /* After a delete the name can be created again. */
    created = -1;
    CHECK_EQ_INT(defs_agent_put(conn, "writer", AGENT1, 1, &created), 0);
    CHECK_EQ_INT(created, 1);

    /* Never stored. */
    rc = 0;
    doc = defs_agent_get(conn, "missing", &rc);
    CHECK(doc == NULL);
    CHECK_EQ_INT(rc, LOG_ENOTFOUND);
    json_decref(doc);
    CHECK_EQ_INT(defs_agent_delete(conn, "missing"), LOG_ENOTFOUND);
}

static void test_workflows(void)
{
    int v = -1, got = -1, rc = 1;
    CHECK_EQ_INT(defs_workflow_add(conn, "review", WF1, &v), 0);
    CHECK_EQ_INT(v, 1);
    CHECK_EQ_INT(defs_workflow_add(conn, "review", WF2, &v), 0);
    CHECK_EQ_INT(v, 2);
    /* Numbering is per name. */
    CHECK_EQ_INT(defs_workflow_add(conn, "other", WF1, &v), 0);
    CHECK_EQ_INT(v, 1);

    /* Version 0: the latest. */
    json_t *doc = defs_workflow_get(conn, "review", 0, &got, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(got, 2);
    CHECK(json_is(doc, WF2));
    json_decref(doc);
    /* An older version stays as it was. */
    got = -1;
    rc = 1;
    doc = defs_workflow_get(conn, "review", 1, &got, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(got, 1);
    CHECK(json_is(doc, WF1));
    json_decref(doc);
    got = -1;
    doc = defs_workflow_get(conn, "review", 2, &got, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(got, 2);
    CHECK(json_is(doc, WF2));
    json_decref(doc);
    /* A version not stored yet, and a workflow never stored. */
    rc = 0;
    doc = defs_workflow_get(conn, "review", 3, &got, &rc);
    CHECK(doc == NULL);
    CHECK_EQ_INT(rc, LOG_ENOTFOUND);
    json_decref(doc);
    rc = 0;
    doc = defs_workflow_get(conn, "missing", 0, &got, &rc);
    CHECK(doc == NULL);
    CHECK_EQ_INT(rc, LOG_ENOTFOUND);
    json_decref(doc);
    rc = 0;
    doc = defs_workflow_get(conn, "missing", 1, &got, &rc);
    CHECK(doc == NULL);
    CHECK_EQ_INT(rc, LOG_ENOTFOUND);
    json_decref(doc);

    /* The list: one entry per name with its latest version. */
    json_t *arr = json_array();
    CHECK_EQ_INT(defs_workflow_list(conn, arr), 0);
    CHECK_EQ_UINT(json_array_size(arr), 2);
    json_t *r = by_name(arr, "review");
    if (CHECK(r != NULL)) {
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "latestVersion")), 2);
        CHECK(json_integer_value(json_object_get(r, "createdMs")) > 1700000000000LL);
    }
    json_t *o = by_name(arr, "other");
    if (CHECK(o != NULL)) CHECK_EQ_INT(json_integer_value(json_object_get(o, "latestVersion")), 1);
    json_decref(arr);

    /* A third version moves "latest". */
    CHECK_EQ_INT(defs_workflow_add(conn, "review", WF1, &v), 0);
    CHECK_EQ_INT(v, 3);
    got = -1;
    doc = defs_workflow_get(conn, "review", 0, &got, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(got, 3);
    CHECK(json_is(doc, WF1));
    json_decref(doc);
}

int main(void)
{
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("test-defs", dir, sizeof dir, &lg, &conn) == 0) {
            test_agents();
            test_workflows();
        }
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

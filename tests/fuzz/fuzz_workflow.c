/* libFuzzer harness for lib/workflow.c (with lib/wfexpr.c, lib/wfschema.c) and lib/agent.c.
 *
 * Every input is used four ways, against a fixed small state and input:
 *  - as a condition: workflow_eval returns 1, 0 or -1, workflow_check_condition
 *    agrees about which inputs are errors, and an error comes with a message;
 *  - as a template: workflow_render returns 0 or -1, on -1 leaves the buffer as
 *    it was (and NUL-terminated), on 0 only appends, never past the ceiling;
 *  - as a state path: workflow_set_path succeeds exactly when workflow_get_path
 *    then finds the value it stored;
 *  - as JSON, when it parses: workflow_validate and agent_validate return 0 with
 *    no message or -1 with one; a valid workflow is then driven by workflow_next
 *    (running its updates with apply_update, rendering its prompts) for a bounded
 *    number of moves, and every skill of a valid agent is rendered; the MCP
 *    server names it uses (lib/mcp mcp_check_workflow, mcp_check_agent, as the
 *    pool checks them against the operator's configuration) are refused only
 *    with lines that start with their JSON path. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "buf.h"
#include "mcp.h"
#include "workflow.h"

#define REQUIRE(cond) \
    do { \
        if (!(cond)) abort(); \
    } while (0)

#define RENDER_MAX 4096
#define MOVES_MAX 200

static json_t *state0, *input0;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    state0 = json_loads("{\"a\": 1, \"b\": \"text\", \"c\": {\"d\": [1, 2.5], \"e\": null},"
                        " \"f\": true, \"g\": \"\", \"review\": {\"score\": 8}}", 0, NULL);
    input0 = json_loads("{\"x\": \"y\", \"n\": -3}", 0, NULL);
    REQUIRE(state0 && input0);
    return 0;
}

/* err holds a NUL within its bounds. */
static int terminated(const char *err, size_t cap)
{
    return memchr(err, '\0', cap) != NULL;
}

static void as_condition(const char *s)
{
    char err[WORKFLOW_ERR_MAX], err2[WORKFLOW_ERR_MAX];
    err[0] = err2[0] = '\0';
    int rc = workflow_eval(s, state0, input0, err, sizeof err);
    REQUIRE(rc == 1 || rc == 0 || rc == -1);
    REQUIRE(terminated(err, sizeof err));
    if (rc < 0) REQUIRE(err[0] != '\0');
    int crc = workflow_check_condition(s, err2, sizeof err2);
    REQUIRE(crc == (rc < 0 ? -1 : 0));
    if (rc < 0) REQUIRE(strcmp(err, err2) == 0);
    /* With nothing to read, a condition keeps its syntax verdict. */
    int nrc = workflow_eval(s, NULL, NULL, NULL, 0);
    REQUIRE((nrc < 0) == (rc < 0));
}

static void as_template(const char *s)
{
    char err[WORKFLOW_ERR_MAX] = "";
    buf_t b;
    buf_init(&b, RENDER_MAX);
    REQUIRE(buf_puts(&b, "seed:") == 0);
    int rc = workflow_render(s, state0, input0, &b, err, sizeof err);
    REQUIRE(rc == 0 || rc == -1);
    REQUIRE(b.len <= RENDER_MAX && b.p[b.len] == '\0');
    REQUIRE(memcmp(b.p, "seed:", 5) == 0);
    if (rc) {
        REQUIRE(b.len == 5);
        REQUIRE(terminated(err, sizeof err) && err[0] != '\0');
    }
    buf_free(&b);
}

static void as_path(const char *s)
{
    json_t *o = json_deep_copy(state0);
    REQUIRE(o);
    json_t *v = json_integer(12345);
    if (workflow_set_path(o, s, v) == 0)
        REQUIRE(json_integer_value(workflow_get_path(o, s)) == 12345);
    json_decref(o);
}

/* Drive a valid workflow: each step "completes" with a canned result, its
 * update is applied, and every decision must be one the position allows. */
static void drive(const json_t *doc)
{
    workflow_pos pos;
    workflow_next_t n;
    char phase[80], err[WORKFLOW_ERR_MAX];
    json_t *state = json_deep_copy(json_object_get(doc, "initialState"));
    if (!state) state = json_object();
    memset(&pos, 0, sizeof pos);
    for (int move = 0; move < MOVES_MAX; move++) {
        workflow_next(doc, &pos, state, input0, &n);
        REQUIRE(memchr(n.error, '\0', sizeof n.error) != NULL);
        if (n.kind == NEXT_START) {
            REQUIRE(!pos.started && n.phase);
            pos.started = 1;
        } else if (n.kind == NEXT_ENTER_PHASE || n.kind == NEXT_TRANSITION) {
            REQUIRE(n.phase && strlen(n.phase) < sizeof phase);
            memcpy(phase, n.phase, strlen(n.phase) + 1);
            pos.phase = phase;
            pos.step = 0;
        } else if (n.kind == NEXT_STEP) {
            REQUIRE(n.def && json_is_object(n.def));
            const char *prompt = json_string_value(json_object_get(n.def, "prompt"));
            if (prompt) {
                buf_t b;
                buf_init(&b, RENDER_MAX);
                (void)workflow_render(prompt, state, input0, &b, err, sizeof err);
                buf_free(&b);
            }
            const json_t *upd = json_object_get(n.def, n.step_kind == STEP_UPDATE ? "set" : "update");
            (void)workflow_apply_update(state, upd, state0, json_true(), input0, 1 << 20, err, sizeof err);
            REQUIRE(json_is_object(state));
            pos.step++;
        } else if (n.kind == NEXT_FAIL) {
            REQUIRE(n.error[0] != '\0');
            break;
        } else {
            REQUIRE(n.kind == NEXT_COMPLETE);
            break;
        }
    }
    json_decref(state);
}

static void agent_skills(const json_t *doc)
{
    size_t i, j;
    const json_t *s, *p;
    char err[256];
    json_array_foreach(json_object_get(doc, "skills"), i, s) {
        json_t *params = json_object();
        json_array_foreach(json_object_get(s, "params"), j, p)
            json_object_set_new(params, json_string_value(p), json_string("v"));
        buf_t b;
        buf_init(&b, RENDER_MAX);
        int rc = agent_render_skill(doc, json_string_value(json_object_get(s, "name")), params, &b,
                                    err, sizeof err);
        /* A valid skill given all its params renders unless it outgrows the ceiling. */
        REQUIRE(rc == 0 || b.len == 0);
        buf_free(&b);
        json_decref(params);
    }
}

static void as_json(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!doc) return;
    char err[1024];
    int rc = workflow_validate(doc, err, sizeof err);
    REQUIRE(rc == 0 || rc == -1);
    REQUIRE(terminated(err, sizeof err));
    REQUIRE((rc == 0) == (err[0] == '\0'));
    if (rc == 0) drive(doc);

    rc = agent_validate(doc, err, sizeof err);
    REQUIRE(rc == 0 || rc == -1);
    REQUIRE(terminated(err, sizeof err));
    REQUIRE((rc == 0) == (err[0] == '\0'));
    if (rc == 0) agent_skills(doc);

    /* The server names, against a configuration of one server "t". */
    static json_t *config;
    if (!config) config = json_pack("{s:{s:{s:s}}}", "mcpServers", "t", "command", "/bin/true");
    REQUIRE(config);
    rc = mcp_check_workflow(config, doc, err, sizeof err);
    REQUIRE(terminated(err, sizeof err) && (rc == 0) == (err[0] == '\0'));
    REQUIRE(rc == 0 || strncmp(err, "phases[", 7) == 0);
    rc = mcp_check_agent(config, doc, err, sizeof err);
    REQUIRE(terminated(err, sizeof err) && (rc == 0) == (err[0] == '\0'));
    REQUIRE(rc == 0 || strncmp(err, "mcpServers[", 11) == 0);

    /* Any JSON as a schema, and as a value against a schema. */
    (void)workflow_check_schema(doc, state0, err, sizeof err);
    (void)workflow_check_schema(json_object_get(state0, "review"), doc, err, sizeof err);
    json_t *st = json_deep_copy(state0);
    (void)workflow_apply_update(st, doc, doc, doc, doc, 1 << 20, err, sizeof err);
    json_decref(st);
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    REQUIRE(s);
    memcpy(s, data, size);
    s[size] = '\0';
    as_condition(s);
    as_template(s);
    as_path(s);
    as_json(data, size);
    free(s);
    return 0;
}

/* Unit tests for lib/workflow.c: updates, the validator (every rule, several
 * mistakes at once) and workflow_next walking workflows, including the example of
 * docs/workflows.md. Paths, templates and conditions are test_wfexpr's, the schema
 * subset test_wfschema's. */
#include "workflow.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_doc.h"

/* Test JSON with ' for " (test_doc.h). */
#define J(text) test_json(text, 0)

/* ---- updates ---------------------------------------------------------------------------- */

static void test_apply_update(void)
{
    char err[256];
    json_t *state = J("{'name': 'Ada', 'n': 1, 'review': {'score': 3}, 's': 'str'}");
    json_t *output = J("{'score': 9, 'notes': 'good'}");
    json_t *response = J("true");
    json_t *input = J("{'topic': 'SQLite'}");

    json_t *upd = J("{'draft': '$output', 'approved': '$response', 'in': '$input',"
                    " 'review.score': 9, 'review.by': 'editor',"
                    " 'greeting': 'hi {{state.name}} on {{input.topic}}',"
                    " 'n': 'was {{state.n}}', 'lit': {'nested': ['$output', '{{state.name}}', 2, null]},"
                    " 'new.deep.path': false, 'dollar': '$5 and $outputs'}");
    CHECK_EQ_INT(workflow_apply_update(state, upd, output, response, input, 0, err, sizeof err), 0);
    CHECK(json_equal(json_object_get(state, "draft"), output));
    CHECK(json_object_get(state, "draft") != output);   /* a copy, not the caller's */
    CHECK(json_is_true(json_object_get(state, "approved")));
    CHECK(json_equal(json_object_get(state, "in"), input));
    CHECK(json_integer_value(workflow_get_path(state, "review.score")) == 9);
    CHECK_EQ_STR(json_string_value(workflow_get_path(state, "review.by")), "editor");
    CHECK_EQ_STR(json_string_value(json_object_get(state, "greeting")), "hi Ada on SQLite");
    /* Templates read the state from before the update. */
    CHECK_EQ_STR(json_string_value(json_object_get(state, "n")), "was 1");
    json_t *want = J("{'nested': [{'score': 9, 'notes': 'good'}, 'Ada', 2, null]}");
    CHECK(json_equal(json_object_get(state, "lit"), want));
    json_decref(want);
    CHECK(json_is_false(workflow_get_path(state, "new.deep.path")));
    CHECK_EQ_STR(json_string_value(json_object_get(state, "dollar")), "$5 and $outputs");
    json_decref(upd);

    /* A missing value is null. */
    upd = J("{'a': '$output', 'b': '$response', 'c': '$input'}");
    CHECK_EQ_INT(workflow_apply_update(state, upd, NULL, NULL, NULL, 0, err, sizeof err), 0);
    CHECK(json_is_null(json_object_get(state, "a")));
    CHECK(json_is_null(json_object_get(state, "b")));
    CHECK(json_is_null(json_object_get(state, "c")));
    json_decref(upd);

    /* Scalars and arrays as outputs. */
    json_t *text = json_string("plain words");
    upd = J("{'draft': '$output', 'quoted': 'draft: {{state.draft}}'}");
    CHECK_EQ_INT(workflow_apply_update(state, upd, text, NULL, NULL, 0, err, sizeof err), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(state, "draft")), "plain words");
    CHECK_EQ_STR(json_string_value(json_object_get(state, "quoted")),
                 "draft: {\"score\":9,\"notes\":\"good\"}");
    json_decref(text);
    json_decref(upd);

    /* Failures leave the state exactly as it was, even after earlier keys. */
    char *before = json_dumps(state, JSON_SORT_KEYS);
    const char *bad[][2] = {
        {"{'ok': 1, 's.x': 2}", "s.x: a value that is not an object is in the way"},
        {"{'ok': 1, 'a..b': 2}", "a..b: not a state path"},
        {"{'ok': 1, '': 2}", ": not a state path"},
        {"{'ok': 1, 'msg': 'hi {{state.nope}}'}", "msg: unknown path state.nope"},
        {"{'ok': 1, 'msg': {'deep': ['{{state.name']}}", "msg: unterminated"},
        {"{'ok': 1, 'msg': '{{bogus}}'}", "msg: unknown root"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        upd = J(bad[i][0]);
        err[0] = '\0';
        CHECK_EQ_INT(workflow_apply_update(state, upd, output, response, input, 0, err, sizeof err),
                     -1);
        if (!CHECK(strstr(err, bad[i][1]) != NULL)) fprintf(stderr, "  got \"%s\"\n", err);
        char *after = json_dumps(state, JSON_SORT_KEYS);
        CHECK_EQ_STR(after, before);
        free(after);
        json_decref(upd);
    }
    free(before);

    /* A key with a NUL inside is not the path before the NUL. */
    upd = json_object();
    json_object_setn_new(upd, "ok\0x", 4, json_integer(1));
    CHECK_EQ_INT(workflow_apply_update(state, upd, NULL, NULL, NULL, 0, err, sizeof err), -1);
    CHECK_EQ_STR(err, "ok?x: not a state path");
    CHECK(json_object_get(state, "ok") == NULL);
    json_t *wf = J("{'name': 'w', 'phases': [{'name': 'p', 'terminal': true, 'steps': [{'kind': 'update'}]}]}");
    json_object_set_new(json_array_get(json_object_get(json_array_get(json_object_get(wf, "phases"), 0), "steps"), 0),
                        "set", upd);
    CHECK_EQ_INT(workflow_validate(wf, err, sizeof err), -1);
    CHECK(test_has_line(err, "phases[0].steps[0].set.ok: not a state path"));
    json_decref(wf);

    /* Nothing to do, or nothing to do it on. */
    CHECK_EQ_INT(workflow_apply_update(state, NULL, NULL, NULL, NULL, 0, err, sizeof err), 0);
    upd = J("{}");
    CHECK_EQ_INT(workflow_apply_update(state, upd, NULL, NULL, NULL, 0, err, sizeof err), 0);
    json_t *arr = J("[]");
    CHECK_EQ_INT(workflow_apply_update(arr, upd, NULL, NULL, NULL, 0, err, sizeof err), -1);
    CHECK_EQ_STR(err, "state is not an object");
    CHECK_EQ_INT(workflow_apply_update(NULL, upd, NULL, NULL, NULL, 0, err, sizeof err), -1);
    CHECK_EQ_INT(workflow_apply_update(state, arr, NULL, NULL, NULL, 0, err, sizeof err), -1);
    CHECK_EQ_STR(err, "update is not an object");
    json_decref(arr);
    json_decref(upd);

    /* A value nested too deeply is refused rather than recursed into. */
    json_t *deep = json_string("x");
    for (int i = 0; i < 70; i++) {
        json_t *a = json_array();
        json_array_append_new(a, deep);
        deep = a;
    }
    upd = json_object();
    json_object_set_new(upd, "deep", deep);
    CHECK_EQ_INT(workflow_apply_update(state, upd, NULL, NULL, NULL, 0, err, sizeof err), -1);
    CHECK(strstr(err, "nested deeper than 64") != NULL);
    json_decref(upd);

    /* workflow_render_json: templates everywhere, no specials. */
    json_t *args = J("{'title': '{{input.topic}}', 'n': 3, 'list': ['{{state.name}}', '$output'],"
                     " 'o': {'k': '{{state.review}}'}}"), *res = NULL;
    CHECK_EQ_INT(workflow_render_json(args, state, input, 0, &res, err, sizeof err), 0);
    want = J("{'title': 'SQLite', 'n': 3, 'list': ['Ada', '$output'],"
             " 'o': {'k': '{\\'score\\':9,\\'by\\':\\'editor\\'}'}}");
    if (!CHECK(json_equal(res, want))) {
        char *d = json_dumps(res, 0);
        fprintf(stderr, "  got %s\n", d);
        free(d);
    }
    json_decref(want);
    json_decref(res);
    json_decref(args);
    args = J("{'t': '{{state.none}}'}");
    CHECK_EQ_INT(workflow_render_json(args, state, input, 0, &res, err, sizeof err), -1);
    CHECK(res == NULL);
    CHECK(strstr(err, "unknown path state.none") != NULL);
    CHECK_EQ_INT(workflow_render_json(NULL, state, input, 0, &res, err, sizeof err), -1);
    json_decref(args);

    json_decref(state);
    json_decref(output);
    json_decref(response);
    json_decref(input);
}

/* ---- validation -------------------------------------------------------------------------- */

#define TERM "{'name': 'end', 'terminal': true}"

/* Validate doc (quote-converted) and require a line starting with want. */
static void invalid(const char *doc, const char *want, int line)
{
    json_t *j = J(doc);
    char err[2048] = "";
    int rc = workflow_validate(j, err, sizeof err);
    test_note(rc == -1, __FILE__, line, "workflow_validate rejects");
    if (!test_note(test_has_line(err, want), __FILE__, line, "names the mistake"))
        fprintf(stderr, "  want a line starting \"%s\" in:\n%s\n", want, err);
    json_decref(j);
}
#define INVALID(doc, want) invalid((doc), (want), __LINE__)

static void valid(const char *doc, int line)
{
    json_t *j = J(doc);
    char err[2048] = "";
    if (!test_note(workflow_validate(j, err, sizeof err) == 0, __FILE__, line, "workflow_validate accepts"))
        fprintf(stderr, "  %s\n", err);
    test_note(err[0] == '\0', __FILE__, line, "no message when valid");
    json_decref(j);
}
#define VALID(doc) valid((doc), __LINE__)

/* A one-phase workflow around a step given as text. */
static void step_invalid(const char *step, const char *want, int line)
{
    char doc[4096];
    snprintf(doc, sizeof doc, "{'name': 'w', 'phases': [{'name': 'p', 'terminal': true, 'steps': [%s]}]}",
             step);
    invalid(doc, want, line);
}
#define STEP_INVALID(step, want) step_invalid((step), (want), __LINE__)

static void step_valid(const char *step, int line)
{
    char doc[4096];
    snprintf(doc, sizeof doc, "{'name': 'w', 'phases': [{'name': 'p', 'terminal': true, 'steps': [%s]}]}",
             step);
    valid(doc, line);
}
#define STEP_VALID(step) step_valid((step), __LINE__)

#define S0 "phases[0].steps[0]"

static void test_validate_document(void)
{
    VALID("{'name': 'w', 'phases': [" TERM "]}");
    VALID("{'name': 'a.b-c_9', 'description': 'd', 'initialState': {'x': {'y': [1]}},"
          " 'initialPhase': 'end', 'phases': [{'name': 'start', 'transitions': [{'to': 'end'}]}, " TERM "]}");
    VALID("{'name': 'w', 'phases': [{'name': 'end', 'terminal': true, 'steps': [], 'transitions': []}]}");
    VALID("{'name': 'w', 'phases': [{'name': 'p', 'terminal': false, 'steps': [],"
          " 'transitions': [{'when': 'state.x', 'to': 'end'}, {'to': 'p2'}]},"
          " {'name': 'p2', 'steps': [{'kind': 'update', 'set': {'x': true}}], 'transitions': [{'to': 'p'}]},"
          " " TERM "]}");

    INVALID("[]", "$: a workflow must be a JSON object");
    INVALID("'text'", "$: a workflow must be a JSON object");
    INVALID("{'phases': [" TERM "]}", "name: missing");
    INVALID("{'name': 5, 'phases': [" TERM "]}", "name: must be a string");
    INVALID("{'name': '', 'phases': [" TERM "]}", "name: must be 1 to 64 of A-Z a-z 0-9 _ . -");
    INVALID("{'name': 'a b', 'phases': [" TERM "]}", "name: must be 1 to 64");
    INVALID("{'name': 'a/b', 'phases': [" TERM "]}", "name: must be 1 to 64");
    INVALID("{'name': 'x123456789x123456789x123456789x123456789x123456789x123456789xyzab',"
            " 'phases': [" TERM "]}", "name: must be 1 to 64");
    VALID("{'name': 'x123456789x123456789x123456789x123456789x123456789x123456789xyz',"
          " 'phases': [" TERM "]}");
    INVALID("{'name': 'w', 'phases': [" TERM "], 'phase': []}", "phase: unknown key");
    INVALID("{'name': 'w', 'phases': [" TERM "], 'description': 1}", "description: must be a string");
    INVALID("{'name': 'w', 'phases': [" TERM "], 'initialState': []}", "initialState: must be an object");
    INVALID("{'name': 'w', 'phases': [" TERM "], 'initialPhase': 1}", "initialPhase: must be a string");
    INVALID("{'name': 'w', 'phases': [" TERM "], 'initialPhase': 'zz'}",
            "initialPhase: no phase named \"zz\"");
    /* maxSteps: a positive integer up to the limit; the default without it. */
    VALID("{'name': 'w', 'maxSteps': 1, 'phases': [" TERM "]}");
    VALID("{'name': 'w', 'maxSteps': 1000000, 'phases': [" TERM "]}");
    INVALID("{'name': 'w', 'maxSteps': 0, 'phases': [" TERM "]}", "maxSteps: must be an integer from 1 to 1000000");
    INVALID("{'name': 'w', 'maxSteps': 1000001, 'phases': [" TERM "]}", "maxSteps: must be an integer");
    INVALID("{'name': 'w', 'maxSteps': 2.5, 'phases': [" TERM "]}", "maxSteps: must be an integer");
    INVALID("{'name': 'w', 'maxSteps': '9', 'phases': [" TERM "]}", "maxSteps: must be an integer");
    json_t *ms = J("{'name': 'w', 'maxSteps': 7, 'phases': [" TERM "]}");
    CHECK_EQ_INT(workflow_max_steps(ms), 7);
    json_object_del(ms, "maxSteps");
    CHECK_EQ_INT(workflow_max_steps(ms), WORKFLOW_MAX_STEPS_DEFAULT);
    CHECK_EQ_INT(WORKFLOW_MAX_STEPS_DEFAULT, 1000);
    json_decref(ms);
    INVALID("{'name': 'w'}", "phases: missing");
    INVALID("{'name': 'w', 'phases': []}", "phases: must be an array of 1 to 64 phases");
    INVALID("{'name': 'w', 'phases': {}}", "phases: must be an array of 1 to 64 phases");

    /* 64 phases are fine, 65 are not. */
    json_t *doc = J("{'name': 'w', 'phases': []}");
    json_t *phases = json_object_get(doc, "phases");
    for (int i = 0; i < 64; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        json_array_append_new(phases, json_pack("{s:s, s:b}", "name", name, "terminal", 1));
    }
    char err[1024];
    CHECK_EQ_INT(workflow_validate(doc, err, sizeof err), 0);
    json_array_append_new(phases, json_pack("{s:s, s:b}", "name", "p64", "terminal", 1));
    CHECK_EQ_INT(workflow_validate(doc, err, sizeof err), -1);
    CHECK(test_has_line(err, "phases: must be an array of 1 to 64 phases"));
    json_decref(doc);
}

static void test_validate_phases(void)
{
    INVALID("{'name': 'w', 'phases': ['p']}", "phases[0]: a phase must be an object");
    INVALID("{'name': 'w', 'phases': [" TERM ", 3]}", "phases[1]: a phase must be an object");
    INVALID("{'name': 'w', 'phases': [{'name': 'e', 'terminal': true, 'step': []}]}",
            "phases[0].step: unknown key");
    INVALID("{'name': 'w', 'phases': [{'terminal': true}]}", "phases[0].name: missing");
    INVALID("{'name': 'w', 'phases': [{'name': 'a b', 'terminal': true}]}",
            "phases[0].name: must be 1 to 64");
    INVALID("{'name': 'w', 'phases': [" TERM ", " TERM "]}",
            "phases[1].name: duplicate phase name \"end\" (also phases[0])");
    INVALID("{'name': 'w', 'phases': [{'name': 'e', 'terminal': 'yes'}]}",
            "phases[0].terminal: must be true or false");
    INVALID("{'name': 'w', 'phases': [{'name': 'e', 'terminal': true, 'steps': {}}]}",
            "phases[0].steps: must be an array of at most 64 steps");
    INVALID("{'name': 'w', 'phases': [{'name': 'e', 'terminal': true, 'transitions': {}}]}",
            "phases[0].transitions: must be an array of at most 16 transitions");
    INVALID("{'name': 'w', 'phases': [{'name': 'e'}]}",
            "phases[0].transitions: a phase that is not terminal needs at least one transition");
    INVALID("{'name': 'w', 'phases': [{'name': 'e', 'transitions': []}]}",
            "phases[0].transitions: a phase that is not terminal needs at least one transition");
    INVALID("{'name': 'w', 'phases': [{'name': 'e', 'terminal': true, 'transitions': [{'to': 'e'}]}]}",
            "phases[0].transitions: a terminal phase ends the workflow: it has no transitions");

    /* The bounds on steps and transitions. */
    json_t *doc = J("{'name': 'w', 'phases': [{'name': 'e', 'steps': [], 'transitions': []}, " TERM "]}");
    json_t *ph = json_array_get(json_object_get(doc, "phases"), 0);
    json_t *steps = json_object_get(ph, "steps"), *trans = json_object_get(ph, "transitions");
    for (int i = 0; i < 64; i++) json_array_append_new(steps, J("{'kind': 'update', 'set': {}}"));
    for (int i = 0; i < 16; i++) json_array_append_new(trans, J("{'to': 'end'}"));
    char err[2048];
    CHECK_EQ_INT(workflow_validate(doc, err, sizeof err), 0);
    json_array_append_new(steps, J("{'kind': 'update', 'set': {}}"));
    json_array_append_new(trans, J("{'to': 'end'}"));
    CHECK_EQ_INT(workflow_validate(doc, err, sizeof err), -1);
    CHECK(test_has_line(err, "phases[0].steps: must be an array of at most 64 steps"));
    CHECK(test_has_line(err, "phases[0].transitions: must be an array of at most 16 transitions"));
    json_decref(doc);

    /* Transitions. */
    char buf[1024];
#define TRANS_DOC "{'name': 'w', 'phases': [{'name': 'p', 'transitions': [%s]}, " TERM "]}"
#define TRANS_INVALID(t, want) do { snprintf(buf, sizeof buf, TRANS_DOC, t); INVALID(buf, want); } while (0)
#define TRANS_VALID(t) do { snprintf(buf, sizeof buf, TRANS_DOC, t); VALID(buf); } while (0)
    TRANS_VALID("{'to': 'end'}");
    TRANS_VALID("{'when': 'state.ok == true', 'to': 'end'}, {'to': 'end'}");
    /* Back to its own phase, which has no step: state.ok never changes there. */
    TRANS_INVALID("{'when': 'state.ok == true', 'to': 'end'}, {'to': 'p'}", "phases[0]: loops for ever");
    TRANS_INVALID("'end'", "phases[0].transitions[0]: a transition must be an object");
    TRANS_INVALID("{'to': 'end', 'if': 'x'}", "phases[0].transitions[0].if: unknown key");
    TRANS_INVALID("{'when': 'true'}", "phases[0].transitions[0].to: missing");
    TRANS_INVALID("{'to': 3}", "phases[0].transitions[0].to: must be a string");
    TRANS_INVALID("{'to': 'nowhere'}", "phases[0].transitions[0].to: no phase named \"nowhere\"");
    TRANS_INVALID("{'to': 'end'}, {'to': 'nope'}", "phases[0].transitions[1].to: no phase named");
    TRANS_INVALID("{'when': true, 'to': 'end'}", "phases[0].transitions[0].when: must be a string");
    TRANS_INVALID("{'when': 'state.x ==', 'to': 'end'}",
                  "phases[0].transitions[0].when: expected a value at end of condition");
    TRANS_INVALID("{'when': '(state.x', 'to': 'end'}", "phases[0].transitions[0].when: missing ')'");
    TRANS_INVALID("{'when': 'x.y', 'to': 'end'}", "phases[0].transitions[0].when: unknown name 'x.y'");
    TRANS_INVALID("{'when': '', 'to': 'end'}", "phases[0].transitions[0].when: empty condition");
#undef TRANS_DOC
#undef TRANS_INVALID
#undef TRANS_VALID

    /* A cycle of phases without steps whose first transitions are unconditional
     * would spin: named once, at its first phase. */
    json_t *j = J("{'name': 'w', 'phases': [{'name': 'a', 'transitions': [{'to': 'b'}]},"
                  " {'name': 'b', 'transitions': [{'to': 'a'}]}, " TERM "]}");
    CHECK_EQ_INT(workflow_validate(j, err, sizeof err), -1);
    CHECK(test_has_line(err, "phases[0]: loops for ever through phases without steps"));
    CHECK_EQ_INT(test_count_lines(err), 1);
    json_decref(j);
    INVALID("{'name': 'w', 'phases': [{'name': 'a', 'transitions': [{'to': 'a'}]}, " TERM "]}",
            "phases[0]: loops for ever");
    INVALID("{'name': 'w', 'phases': [" TERM ", {'name': 'x', 'transitions': [{'to': 'y'}]},"
            " {'name': 'y', 'transitions': [{'to': 'z'}]}, {'name': 'z', 'transitions': [{'to': 'y'}]}]}",
            "phases[2]: loops for ever");
    /* A condition does not help: without a step the state never changes, so a
     * condition that led into the cycle once leads into it every time. */
    INVALID("{'name': 'w', 'phases': [{'name': 'a', 'transitions': [{'when': 'true', 'to': 'a'}]}, " TERM "]}",
            "phases[0]: loops for ever through phases without steps (\"a\")");
    INVALID("{'name': 'w', 'phases': [{'name': 'a', 'transitions': [{'when': 'state.x', 'to': 'b'}, {'to': 'end'}]},"
            " {'name': 'b', 'transitions': [{'to': 'a'}]}, " TERM "]}",
            "phases[0]: loops for ever through phases without steps (\"a\", \"b\")");
    INVALID("{'name': 'w', 'phases': [" TERM ", {'name': 'x', 'transitions': [{'when': 'state.n > 1', 'to': 'end'},"
            " {'when': 'input.go', 'to': 'y'}]}, {'name': 'y', 'transitions': [{'when': 'state.n < 1', 'to': 'x'},"
            " {'to': 'end'}]}]}",
            "phases[1]: loops for ever through phases without steps (\"x\", \"y\")");
    /* Two separate cycles: each named once. */
    j = J("{'name': 'w', 'phases': [{'name': 'a', 'transitions': [{'when': 'true', 'to': 'a'}]},"
          " {'name': 'b', 'transitions': [{'when': 'state.q', 'to': 'c'}, {'to': 'a'}]},"
          " {'name': 'c', 'transitions': [{'to': 'b'}]}, " TERM "]}");
    CHECK_EQ_INT(workflow_validate(j, err, sizeof err), -1);
    CHECK(test_has_line(err, "phases[0]: loops for ever"));
    CHECK(test_has_line(err, "phases[1]: loops for ever through phases without steps (\"b\", \"c\")"));
    CHECK_EQ_INT(test_count_lines(err), 2);
    json_decref(j);
    /* ...but a step or a terminal phase on the way breaks the loop, and a
     * stepless phase may lead into a cycle that has a step. */
    VALID("{'name': 'w', 'phases': [{'name': 'a', 'transitions': [{'when': 'state.x', 'to': 'b'}, {'to': 'end'}]},"
          " {'name': 'b', 'steps': [{'kind': 'update', 'set': {'x': false}}], 'transitions': [{'to': 'a'}]}, " TERM "]}");
    VALID("{'name': 'w', 'phases': [{'name': 's', 'transitions': [{'when': 'true', 'to': 'a'}]},"
          " {'name': 'a', 'steps': [{'kind': 'update', 'set': {}}], 'transitions': [{'to': 's'}]}]}");
    VALID("{'name': 'w', 'phases': [{'name': 'a', 'transitions': [{'to': 'b'}]},"
          " {'name': 'b', 'steps': [{'kind': 'update', 'set': {}}], 'transitions': [{'to': 'a'}]}]}");
    VALID("{'name': 'w', 'phases': [{'name': 'a', 'transitions': [{'to': 'end'}]}, " TERM "]}");
}

static void test_validate_steps(void)
{
    STEP_INVALID("'agent'", S0 ": a step must be an object");
    STEP_INVALID("{'agent': 'a', 'prompt': 'p'}", S0 ".kind: missing");
    STEP_INVALID("{'kind': 'llm'}", S0 ".kind: must be \"agent\", \"tool\", \"update\", \"human\", \"sleep\" or \"wait\"");
    STEP_INVALID("{'kind': 3}", S0 ".kind: must be a string");
    STEP_INVALID("{'kind': 'update', 'set': {}, 'name': 4}", S0 ".name: must be a string");
    STEP_VALID("{'kind': 'update', 'set': {}, 'name': 'Display name with spaces'}");

    /* agent */
    STEP_VALID("{'kind': 'agent', 'agent': 'writer', 'prompt': 'Write about {{input.topic}}'}");
    STEP_VALID("{'kind': 'agent', 'agent': 'writer', 'prompt': 'p', 'update': {'a.b': '$output', 'c': '$input'},"
               " 'outputSchema': {'type': ['object', 'null'], 'description': 'd', 'title': 't', '$schema': 's',"
               "  'properties': {'x': {'type': 'array', 'items': {'enum': [1, 'a']}}}, 'required': ['x']}}");
    STEP_INVALID("{'kind': 'agent', 'prompt': 'p'}", S0 ".agent: missing");
    /* A skill of the agent, its params templates. */
    STEP_VALID("{'kind': 'agent', 'agent': 'w', 'prompt': 'p', 'skill': {'name': 'sum', 'params': {'who': '{{input.who}}'}}}");
    STEP_VALID("{'kind': 'agent', 'agent': 'w', 'prompt': 'p', 'skill': {'name': 'hi'}}");
    STEP_INVALID("{'kind': 'agent', 'agent': 'w', 'prompt': 'p', 'skill': 'sum'}", S0 ".skill: must be");
    STEP_INVALID("{'kind': 'agent', 'agent': 'w', 'prompt': 'p', 'skill': {'params': {}}}", S0 ".skill.name: missing");
    STEP_INVALID("{'kind': 'agent', 'agent': 'w', 'prompt': 'p', 'skill': {'name': 's', 'args': {}}}", S0 ".skill.args: unknown key");
    STEP_INVALID("{'kind': 'agent', 'agent': 'w', 'prompt': 'p', 'skill': {'name': 's', 'params': {'a': 1}}}",
                 S0 ".skill.params.a: must be a string");
    STEP_INVALID("{'kind': 'agent', 'agent': 'w', 'prompt': 'p', 'skill': {'name': 's', 'params': {'a': '{{x'}}}",
                 S0 ".skill.params.a: ");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a b', 'prompt': 'p'}", S0 ".agent: must be 1 to 64");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a'}", S0 ".prompt: missing");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': ['p']}", S0 ".prompt: must be a string");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'x {{state.y'}",
                 S0 ".prompt: unterminated \"{{\" at column 3");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': '{{foo.bar}}'}", S0 ".prompt: unknown root");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': '{{state..x}}'}", S0 ".prompt: bad path");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'options': []}", S0 ".options: unknown key");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': 'object'}",
                 S0 ".outputSchema: a schema must be an object");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'type': 'strng'}}",
                 S0 ".outputSchema.type: must be one of object, array");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'type': []}}",
                 S0 ".outputSchema.type: must be one of");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'type': ['string', 1]}}",
                 S0 ".outputSchema.type: must be one of");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'type': 'integer', 'minimum': 0}}",
                 S0 ".outputSchema.minimum: unsupported schema keyword");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'properties': []}}",
                 S0 ".outputSchema.properties: must be an object of schemas");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'properties': {'x': {'type': 'int'}}}}",
                 S0 ".outputSchema.properties.x.type: must be one of");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'properties': {'x': 1}}}",
                 S0 ".outputSchema.properties.x: a schema must be an object");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'required': 'x'}}",
                 S0 ".outputSchema.required: must be an array of property names");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'required': [1]}}",
                 S0 ".outputSchema.required: must be an array of property names");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'items': [{}]}}",
                 S0 ".outputSchema.items: a schema must be an object");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'items': {'additionalItems': 1}}}",
                 S0 ".outputSchema.items.additionalItems: unsupported");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'outputSchema': {'enum': []}}",
                 S0 ".outputSchema.enum: must be a non-empty array");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'update': []}",
                 S0 ".update: must be an object of state paths");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'update': {'a..b': 1}}",
                 S0 ".update.a..b: not a state path");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'update': {'state.x': 1, 'a b': 2}}",
                 S0 ".update.a b: not a state path");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'update': {'x': '$response'}}",
                 S0 ".update.x: \"$response\" exists only in human steps");
    STEP_INVALID("{'kind': 'agent', 'agent': 'a', 'prompt': 'p', 'update': {'x': {'y': ['{{nope}}']}}}",
                 S0 ".update.x.y[0]: unknown root");

    /* tool */
    STEP_VALID("{'kind': 'tool', 'server': 'cms', 'tool': 'create_post'}");
    STEP_VALID("{'kind': 'tool', 'server': 'cms', 'tool': 'create post', 'arguments': {'t': '{{input.x}}',"
               " 'n': [1, {'z': '$output'}]}, 'update': {'r': '$output'}}");
    STEP_INVALID("{'kind': 'tool', 'tool': 't'}", S0 ".server: missing");
    STEP_INVALID("{'kind': 'tool', 'server': '', 'tool': 't'}", S0 ".server: must be 1 to 64");
    STEP_INVALID("{'kind': 'tool', 'server': 's'}", S0 ".tool: missing");
    STEP_INVALID("{'kind': 'tool', 'server': 's', 'tool': ''}", S0 ".tool: must be 1 to 128 bytes");
    STEP_INVALID("{'kind': 'tool', 'server': 's', 'tool': 't', 'arguments': 'x'}", S0 ".arguments: must be an object");
    STEP_INVALID("{'kind': 'tool', 'server': 's', 'tool': 't', 'arguments': {'a': ['ok', '{{state.']}}",
                 S0 ".arguments.a[1]: unterminated");
    STEP_INVALID("{'kind': 'tool', 'server': 's', 'tool': 't', 'update': {'x': '$response'}}",
                 S0 ".update.x: \"$response\" exists only in human steps");
    STEP_INVALID("{'kind': 'tool', 'server': 's', 'tool': 't', 'prompt': 'p'}", S0 ".prompt: unknown key");

    /* update */
    STEP_VALID("{'kind': 'update', 'set': {'a': '$input', 'b.c': [1, '{{state.x}}'], 'd': null}}");
    STEP_INVALID("{'kind': 'update'}", S0 ".set: missing");
    STEP_INVALID("{'kind': 'update', 'set': 'x'}", S0 ".set: must be an object of state paths");
    STEP_INVALID("{'kind': 'update', 'set': {'x': '$output'}}",
                 S0 ".set.x: \"$output\" exists only in agent and tool steps");
    STEP_INVALID("{'kind': 'update', 'set': {'x': '$response'}}", S0 ".set.x: \"$response\" exists only");
    STEP_INVALID("{'kind': 'update', 'set': {}, 'update': {}}", S0 ".update: unknown key");
}

static void test_validate_human(void)
{
    STEP_VALID("{'kind': 'human', 'id': 'ok', 'input': 'approval', 'prompt': 'Ship {{state.v}}?'}");
    STEP_VALID("{'kind': 'human', 'id': 'ok', 'input': 'approval', 'prompt': 'p', 'timeoutMs': 1000,"
               " 'onTimeout': {'response': false}, 'update': {'approved': '$response', 'i': '$input'}}");
    STEP_VALID("{'kind': 'human', 'id': 'c', 'input': 'choice', 'prompt': 'p', 'options': ['a', 'b'],"
               " 'timeoutMs': 5, 'onTimeout': {'response': 'b'}}");
    STEP_VALID("{'kind': 'human', 'id': 't', 'input': 'text', 'prompt': 'p', 'timeoutMs': 5,"
               " 'onTimeout': {'response': ''}}");
    STEP_INVALID("{'kind': 'human', 'input': 'text', 'prompt': 'p'}", S0 ".id: missing");
    STEP_INVALID("{'kind': 'human', 'id': 7, 'input': 'text', 'prompt': 'p'}", S0 ".id: must be a string");
    STEP_INVALID("{'kind': 'human', 'id': 'has space', 'input': 'text', 'prompt': 'p'}", S0 ".id: must be 1 to 64");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'prompt': 'p'}", S0 ".input: missing");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'yesno', 'prompt': 'p'}",
                 S0 ".input: must be \"approval\", \"choice\" or \"text\"");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text'}", S0 ".prompt: missing");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': '{{input'}", S0 ".prompt: unterminated");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'approval', 'prompt': 'p', 'options': ['a', 'b']}",
                 S0 ".options: only allowed with input \"choice\"");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'choice', 'prompt': 'p'}",
                 S0 ".options: missing (required for input \"choice\")");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'choice', 'prompt': 'p', 'options': ['a']}",
                 S0 ".options: must be an array of 2 to 20 strings");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'choice', 'prompt': 'p', 'options': 'a,b'}",
                 S0 ".options: must be an array of 2 to 20 strings");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'choice', 'prompt': 'p', 'options': ['a', 1]}",
                 S0 ".options[1]: must be a non-empty string");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'choice', 'prompt': 'p', 'options': ['a', '']}",
                 S0 ".options[1]: must be a non-empty string");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'choice', 'prompt': 'p', 'options': ['a', 'b', 'a']}",
                 S0 ".options[2]: duplicate option (also options[0])");
    STEP_VALID("{'kind': 'human', 'id': 'x', 'input': 'choice', 'prompt': 'p', 'options': "
               "['1','2','3','4','5','6','7','8','9','10','11','12','13','14','15','16','17','18','19','20']}");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'choice', 'prompt': 'p', 'options': "
                 "['1','2','3','4','5','6','7','8','9','10','11','12','13','14','15','16','17','18','19','20','21']}",
                 S0 ".options: must be an array of 2 to 20 strings");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': 'p', 'timeoutMs': 0}",
                 S0 ".timeoutMs: must be an integer > 0");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': 'p', 'timeoutMs': -5}",
                 S0 ".timeoutMs: must be an integer > 0");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': 'p', 'timeoutMs': 1.5}",
                 S0 ".timeoutMs: must be an integer > 0");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': 'p', 'timeoutMs': '1000'}",
                 S0 ".timeoutMs: must be an integer > 0");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': 'p', 'timeoutMs': 9, 'onTimeout': 'no'}",
                 S0 ".onTimeout: must be an object {\"response\": value}");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': 'p', 'timeoutMs': 9, 'onTimeout': {}}",
                 S0 ".onTimeout.response: missing");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': 'p', 'timeoutMs': 9,"
                 " 'onTimeout': {'response': 'r', 'fail': true}}", S0 ".onTimeout.fail: unknown key");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': 'p', 'onTimeout': {'response': 'r'}}",
                 S0 ".onTimeout: needs timeoutMs");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'choice', 'prompt': 'p', 'options': ['a', 'b'],"
                 " 'timeoutMs': 9, 'onTimeout': {'response': 'c'}}", S0 ".onTimeout.response: must be one of the options");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'approval', 'prompt': 'p', 'timeoutMs': 9,"
                 " 'onTimeout': {'response': 'no'}}", S0 ".onTimeout.response: must be true or false");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': 'p', 'timeoutMs': 9,"
                 " 'onTimeout': {'response': 3}}", S0 ".onTimeout.response: must be a string");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': 'p', 'update': {'o': '$output'}}",
                 S0 ".update.o: \"$output\" exists only in agent and tool steps");
    STEP_INVALID("{'kind': 'human', 'id': 'x', 'input': 'text', 'prompt': 'p', 'agent': 'a'}", S0 ".agent: unknown key");

    /* Ids are unique across the whole workflow. */
    INVALID("{'name': 'w', 'phases': ["
            "{'name': 'a', 'steps': [{'kind': 'human', 'id': 'ok', 'input': 'text', 'prompt': 'p'}],"
            " 'transitions': [{'to': 'b'}]},"
            "{'name': 'b', 'terminal': true, 'steps': [{'kind': 'update', 'set': {}},"
            " {'kind': 'human', 'id': 'ok', 'input': 'approval', 'prompt': 'q'}]}]}",
            "phases[1].steps[1].id: duplicate id \"ok\" (also phases[0].steps[0].id)");
}

static void test_validate_many(void)
{
    /* Five mistakes in five places: all named, one per line, in document order. */
    json_t *doc = J("{'name': 'bad name', 'extra': 1, 'phases': ["
                    "{'name': 'a', 'steps': [{'kind': 'agent', 'prompt': 'hi {{state.x'}],"
                    " 'transitions': [{'when': 'state.x ==', 'to': 'b'}, {'to': 'zz'}]},"
                    "{'name': 'b', 'terminal': true}]}");
    char err[2048];
    CHECK_EQ_INT(workflow_validate(doc, err, sizeof err), -1);
    CHECK(test_has_line(err, "extra: unknown key"));
    CHECK(test_has_line(err, "name: must be 1 to 64"));
    CHECK(test_has_line(err, "phases[0].steps[0].agent: missing"));
    CHECK(test_has_line(err, "phases[0].steps[0].prompt: unterminated \"{{\" at column 4"));
    CHECK(test_has_line(err, "phases[0].transitions[0].when: expected a value at end of condition"));
    CHECK(test_has_line(err, "phases[0].transitions[1].to: no phase named \"zz\""));
    CHECK_EQ_INT(test_count_lines(err), 6);
    CHECK(err[strlen(err) - 1] != '\n');

    /* A small buffer: cut, NUL-terminated, still -1. */
    char small[40];
    memset(small, 'q', sizeof small);
    CHECK_EQ_INT(workflow_validate(doc, small, sizeof small), -1);
    CHECK(strlen(small) <= sizeof small - 1);
    CHECK(strncmp(small, "extra: unknown key", 18) == 0);
    char one[1] = {'q'};
    CHECK_EQ_INT(workflow_validate(doc, one, sizeof one), -1);
    CHECK_EQ_INT(one[0], '\0');
    /* No buffer at all. */
    CHECK_EQ_INT(workflow_validate(doc, NULL, 0), -1);
    CHECK_EQ_INT(workflow_validate(NULL, NULL, 0), -1);
    json_decref(doc);

    /* Keys with control bytes are shown without breaking the line format. */
    doc = J("{'name': 'w', 'phases': [" TERM "], 'a\\nb': 1}");
    CHECK_EQ_INT(workflow_validate(doc, err, sizeof err), -1);
    CHECK_EQ_STR(err, "a?b: unknown key");
    json_decref(doc);
}

/* ---- workflow_next ------------------------------------------------------------------------ */

/* The reducer's part, reduced to what workflow_next reads. */
typedef struct sim {
    workflow_pos pos;
    char phase[72];
    json_t *state;
} sim;

static void sim_enter(sim *s, const char *phase)
{
    snprintf(s->phase, sizeof s->phase, "%s", phase);
    s->pos.phase = s->phase;
    s->pos.step = 0;
    s->pos.step_open = 0;
}

static void test_next_walk(void)
{
    /* plan -> build -> check; check loops back to build until state.done, then
     * goes to ship, which is terminal. */
    json_t *doc = J("{'name': 'w', 'initialState': {'tries': 0}, 'phases': ["
                    "{'name': 'plan', 'steps': [{'kind': 'agent', 'agent': 'planner', 'prompt': 'plan {{input.goal}}'}],"
                    " 'transitions': [{'to': 'build'}]},"
                    "{'name': 'build', 'steps': ["
                    "  {'kind': 'tool', 'server': 's', 'tool': 'make'},"
                    "  {'kind': 'human', 'id': 'look', 'input': 'approval', 'prompt': 'ok?'}],"
                    " 'transitions': [{'when': 'state.done == true', 'to': 'ship'}, {'when': 'state.tries < 5', 'to': 'build'}]},"
                    "{'name': 'ship', 'terminal': true, 'steps': [{'kind': 'update', 'set': {'shipped': true}}]}]}");
    json_t *input = J("{'goal': 'a thing'}");
    char err[1024];
    if (!CHECK_EQ_INT(workflow_validate(doc, err, sizeof err), 0)) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    sim s;
    memset(&s, 0, sizeof s);
    s.state = J("{'tries': 0}");
    workflow_next_t n;

    workflow_next(doc, &s.pos, s.state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_START);
    CHECK_EQ_STR(n.phase, "plan");
    s.pos.started = 1;

    workflow_next(doc, &s.pos, s.state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_ENTER_PHASE);
    CHECK_EQ_STR(n.phase, "plan");
    sim_enter(&s, n.phase);

    workflow_next(doc, &s.pos, s.state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_STEP);
    CHECK_EQ_STR(n.phase, "plan");
    CHECK_EQ_INT(n.step, 0);
    CHECK_EQ_INT(n.step_kind, STEP_AGENT);
    CHECK_EQ_STR(json_string_value(json_object_get(n.def, "agent")), "planner");
    /* Borrowed from the document, not copied. */
    CHECK(n.def == json_array_get(json_object_get(json_array_get(json_object_get(doc, "phases"), 0), "steps"), 0));

    s.pos.step_open = 1;
    workflow_next(doc, &s.pos, s.state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_WAIT);
    s.pos.step_open = 0;
    s.pos.step = 1;

    workflow_next(doc, &s.pos, s.state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_TRANSITION);
    CHECK_EQ_STR(n.phase, "build");
    sim_enter(&s, n.phase);

    /* Three rounds of build: tool, human, then back to build. */
    for (int round = 1; round <= 3; round++) {
        workflow_next(doc, &s.pos, s.state, input, &n);
        CHECK_EQ_INT(n.kind, NEXT_STEP);
        CHECK_EQ_INT(n.step, 0);
        CHECK_EQ_INT(n.step_kind, STEP_TOOL);
        s.pos.step = 1;
        workflow_next(doc, &s.pos, s.state, input, &n);
        CHECK_EQ_INT(n.kind, NEXT_STEP);
        CHECK_EQ_INT(n.step, 1);
        CHECK_EQ_INT(n.step_kind, STEP_HUMAN);
        CHECK_EQ_STR(json_string_value(json_object_get(n.def, "id")), "look");
        s.pos.step_open = 1;
        workflow_next(doc, &s.pos, s.state, input, &n);
        CHECK_EQ_INT(n.kind, NEXT_WAIT);
        s.pos.step_open = 0;
        s.pos.step = 2;
        json_object_set_new(s.state, "tries", json_integer(round));
        if (round == 3) json_object_set_new(s.state, "done", json_true());
        workflow_next(doc, &s.pos, s.state, input, &n);
        CHECK_EQ_INT(n.kind, NEXT_TRANSITION);
        CHECK_EQ_STR(n.phase, round == 3 ? "ship" : "build");
        sim_enter(&s, n.phase);
    }

    workflow_next(doc, &s.pos, s.state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_STEP);
    CHECK_EQ_STR(n.phase, "ship");
    CHECK_EQ_INT(n.step_kind, STEP_UPDATE);
    s.pos.step = 1;
    workflow_next(doc, &s.pos, s.state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_COMPLETE);
    CHECK_EQ_STR(n.phase, "ship");
    s.pos.finished = 1;
    workflow_next(doc, &s.pos, s.state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_WAIT);

    /* Back in build with done false and tries exhausted: no transition matches. */
    json_object_set_new(s.state, "done", json_false());
    json_object_set_new(s.state, "tries", json_integer(5));
    memset(&s.pos, 0, sizeof s.pos);
    s.pos.started = 1;
    sim_enter(&s, "build");
    s.pos.step = 2;
    workflow_next(doc, &s.pos, s.state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_FAIL);
    CHECK_EQ_STR(n.error, "no transition from phase build matched");
    /* Past the last step counts as done too. */
    s.pos.step = 7;
    workflow_next(doc, &s.pos, s.state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_FAIL);

    json_decref(s.state);
    json_decref(input);
    json_decref(doc);
}

static void test_next_edges(void)
{
    workflow_next_t n;
    workflow_pos pos;
    json_t *doc = J("{'name': 'w', 'initialPhase': 'second', 'phases': ["
                    "{'name': 'first', 'terminal': true},"
                    "{'name': 'second', 'transitions': [{'when': 'state.go', 'to': 'first'},"
                    " {'when': 'input.mode == \\'fast\\'', 'to': 'first'}, {'to': 'third'}]},"
                    "{'name': 'third', 'transitions': [{'when': 'false', 'to': 'first'}]}]}");
    json_t *state = J("{}"), *input = J("{'mode': 'fast'}");

    /* Finished wins over everything, even before a start. */
    memset(&pos, 0, sizeof pos);
    pos.finished = 1;
    workflow_next(doc, &pos, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_WAIT);
    pos.started = 1;
    pos.phase = "nonsense";
    workflow_next(doc, &pos, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_WAIT);
    workflow_next(doc, NULL, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_WAIT);

    /* initialPhase decides where to start. */
    memset(&pos, 0, sizeof pos);
    workflow_next(doc, &pos, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_START);
    CHECK_EQ_STR(n.phase, "second");
    pos.started = 1;
    workflow_next(doc, &pos, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_ENTER_PHASE);
    CHECK_EQ_STR(n.phase, "second");

    /* Transitions in order: state.go missing, input.mode matches. */
    pos.phase = "second";
    workflow_next(doc, &pos, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_TRANSITION);
    CHECK_EQ_STR(n.phase, "first");
    workflow_next(doc, &pos, state, NULL, &n);
    CHECK_EQ_INT(n.kind, NEXT_TRANSITION);
    CHECK_EQ_STR(n.phase, "third");
    json_object_set_new(state, "go", json_true());
    workflow_next(doc, &pos, state, NULL, &n);
    CHECK_EQ_STR(n.phase, "first");

    /* A phase with no steps that is terminal completes at once. */
    pos.phase = "first";
    workflow_next(doc, &pos, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_COMPLETE);

    /* Only a false transition: fail, naming the phase. */
    pos.phase = "third";
    workflow_next(doc, &pos, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_FAIL);
    CHECK_EQ_STR(n.error, "no transition from phase third matched");

    /* A phase the document does not have (a session on another version). */
    pos.phase = "gone";
    workflow_next(doc, &pos, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_FAIL);
    CHECK(strstr(n.error, "phase \"gone\" is not in the workflow") != NULL);
    pos.step_open = 1;
    workflow_next(doc, &pos, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_FAIL);
    pos.step_open = 0;

    pos.phase = "second";
    pos.step = -1;
    workflow_next(doc, &pos, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_FAIL);
    CHECK(strstr(n.error, "invalid position") != NULL);
    json_decref(doc);

    /* Documents that never passed validation fail cleanly instead of crashing. */
    const char *broken[][2] = {
        {"{}", "the workflow has no phases"},
        {"{'phases': []}", "the workflow has no phases"},
        {"{'phases': [{'name': 'a'}], 'initialPhase': 'b'}", "the initial phase is not in the workflow"},
        {"{'phases': [{}]}", "the initial phase is not in the workflow"},
        {"{'phases': [{'name': 'a', 'transitions': [{'when': 'state.x ==', 'to': 'a'}]}]}",
         "phases[0].transitions[0].when: expected a value at end of condition"},
        {"{'phases': [{'name': 'a', 'transitions': [{'when': 3, 'to': 'a'}]}]}",
         "phases[0].transitions[0].when: no condition"},
        {"{'phases': [{'name': 'a', 'transitions': [{'to': 'b'}]}]}",
         "phases[0].transitions[0].to: not a phase of the workflow"},
        {"{'phases': [{'name': 'a', 'steps': [{'kind': 'magic'}]}]}", "phases[0].steps[0]: unknown step kind"},
        {"{'phases': [{'name': 'a'}]}", "no transition from phase a matched"},
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        doc = J(broken[i][0]);
        memset(&pos, 0, sizeof pos);
        pos.started = 1;
        workflow_next(doc, &pos, state, input, &n);
        if (n.kind == NEXT_ENTER_PHASE) {
            pos.phase = n.phase;
            workflow_next(doc, &pos, state, input, &n);
        }
        CHECK_EQ_INT(n.kind, NEXT_FAIL);
        if (!CHECK(strstr(n.error, broken[i][1]) != NULL))
            fprintf(stderr, "  %s: got \"%s\"\n", broken[i][0], n.error);
        json_decref(doc);
    }
    workflow_next(NULL, &pos, state, input, &n);
    CHECK_EQ_INT(n.kind, NEXT_FAIL);

    json_decref(state);
    json_decref(input);
}

/* ---- the documented example --------------------------------------------------------------- */

static void test_docs_example(void)
{
    json_t *doc = test_doc_json_block("docs/workflows.md");
    if (!CHECK(doc != NULL)) return;
    char err[2048] = "";
    if (!CHECK_EQ_INT(workflow_validate(doc, err, sizeof err), 0)) fprintf(stderr, "%s\n", err);

    /* It has what the docs promise: two agent steps, an approval checkpoint with a
     * timeout, a conditional transition and a terminal phase. */
    int agents = 0, approvals = 0, conditions = 0, terminals = 0;
    size_t i, j;
    json_t *ph, *x;
    json_array_foreach(json_object_get(doc, "phases"), i, ph) {
        terminals += json_is_true(json_object_get(ph, "terminal"));
        json_array_foreach(json_object_get(ph, "steps"), j, x) {
            const char *k = json_string_value(json_object_get(x, "kind"));
            agents += strcmp(k, "agent") == 0;
            approvals += strcmp(k, "human") == 0 && json_object_get(x, "timeoutMs") &&
                         strcmp(json_string_value(json_object_get(x, "input")), "approval") == 0;
        }
        json_array_foreach(json_object_get(ph, "transitions"), j, x)
            conditions += json_object_get(x, "when") != NULL;
    }
    CHECK(agents >= 2);
    CHECK(approvals >= 1);
    CHECK(conditions >= 1);
    CHECK(terminals >= 1);

    /* Walk it as the docs tell it: a weak draft goes round through revise, a good
     * one to approval, an approval to publish. */
    json_t *input = J("{'topic': 'SQLite WAL mode', 'audience': 'backend developers'}");
    json_t *state = json_deep_copy(json_object_get(doc, "initialState"));
    json_t *reviews[] = {J("{'score': 5, 'notes': 'too long'}"), J("{'score': 8, 'notes': 'good'}")};
    int nreview = 0;
    sim s;
    memset(&s, 0, sizeof s);
    workflow_next_t n;
    const char *trail[32];
    int ntrail = 0, guard = 0;
    for (;;) {
        if (!CHECK(++guard < 100)) break;
        workflow_next(doc, &s.pos, state, input, &n);
        if (n.kind == NEXT_START) {
            s.pos.started = 1;
        } else if (n.kind == NEXT_ENTER_PHASE || n.kind == NEXT_TRANSITION) {
            sim_enter(&s, n.phase);
            if (ntrail < 32) trail[ntrail++] = n.phase;
        } else if (n.kind == NEXT_STEP) {
            const json_t *out = NULL, *resp = NULL;
            json_t *made = NULL;
            buf_t b;
            buf_init(&b, 1 << 16);
            const char *prompt = json_string_value(json_object_get(n.def, "prompt"));
            /* Every prompt renders against the state the session has by then. */
            if (prompt && !CHECK_EQ_INT(workflow_render(prompt, state, input, &b, err, sizeof err), 0))
                fprintf(stderr, "  %s\n", err);
            buf_free(&b);
            if (n.step_kind == STEP_AGENT && json_object_get(n.def, "outputSchema")) {
                out = reviews[nreview < 1 ? nreview++ : 1];
                CHECK_EQ_INT(workflow_check_schema(json_object_get(n.def, "outputSchema"), out, err,
                                                   sizeof err), 0);
            } else if (n.step_kind == STEP_AGENT) {
                out = made = json_string("A post.");
            } else if (n.step_kind == STEP_TOOL) {
                json_t *args = NULL;
                CHECK_EQ_INT(workflow_render_json(json_object_get(n.def, "arguments"), state, input,
                                                  0, &args, err, sizeof err), 0);
                CHECK_EQ_STR(json_string_value(json_object_get(args, "title")), "SQLite WAL mode");
                json_decref(args);
                out = made = J("{'url': 'https://example.com/p/1'}");
            } else if (n.step_kind == STEP_HUMAN) {
                resp = json_true();
            }
            const json_t *upd = json_object_get(n.def, n.step_kind == STEP_UPDATE ? "set" : "update");
            if (!CHECK_EQ_INT(workflow_apply_update(state, upd, out, resp, input, 0, err, sizeof err), 0))
                fprintf(stderr, "  %s\n", err);
            json_decref(made);
            s.pos.step++;
        } else {
            break;
        }
    }
    CHECK_EQ_INT(n.kind, NEXT_COMPLETE);
    const char *want[] = {"draft", "revise", "draft", "approve", "publish"};
    CHECK_EQ_INT(ntrail, 5);
    for (int k = 0; k < 5 && k < ntrail; k++) CHECK_EQ_STR(trail[k], want[k]);
    CHECK_EQ_STR(json_string_value(json_object_get(state, "feedback")),
                 "Revise your previous draft. Editor's notes: too long");
    CHECK(json_is_true(json_object_get(state, "approved")));
    /* The terminal phase's step (a tool call or an update) marked the post. */
    CHECK(json_object_get(state, "published") != NULL);

    /* The sample validation messages in the docs are real ones. */
    json_t *bad = J("{'name': 'w', 'phases': [" TERM ", {'name': 'p', 'steps': [{'kind': 'agent', 'prompt': 'x'}],"
                    " 'transitions': [{'when': 'state.x ==', 'to': 'end'}]}, {'name': 'q'}]}");
    CHECK_EQ_INT(workflow_validate(bad, err, sizeof err), -1);
    CHECK(test_has_line(err, "phases[1].steps[0].agent: missing"));
    CHECK(test_has_line(err, "phases[1].transitions[0].when: expected a value at end of condition"));
    CHECK(test_has_line(err, "phases[2].transitions: a phase that is not terminal needs at least one transition"));
    json_decref(bad);

    json_decref(reviews[0]);
    json_decref(reviews[1]);
    json_decref(state);
    json_decref(input);
    json_decref(doc);
}

/* The state limit: an update that would make the state larger than max fails with
 * WORKFLOW_ETOOLARGE, having rendered no more than max bytes, and leaves the state
 * as it was; below it, as before. The arguments of a step likewise. */
static void test_state_limit(void)
{
    char err[WORKFLOW_ERR_MAX];
    const size_t max = 64 << 10, big = 40 << 10;
    json_t *state = json_object();
    char *b = malloc(big + 1);
    memset(b, 'x', big);
    b[big] = '\0';
    json_object_set_new(state, "big", json_string(b));
    free(b);
    json_t *before = json_deep_copy(state);

    /* 48 copies of it in one string: 1.9 MB if built; stopped at max. */
    buf_t t;
    buf_init(&t, 0);
    for (int i = 0; i < 48; i++) buf_puts(&t, "{{state.big}}");
    json_t *upd = json_pack("{s:s}", "copies", t.p);
    CHECK_EQ_INT(workflow_apply_update(state, upd, NULL, NULL, NULL, max, err, sizeof err), WORKFLOW_ETOOLARGE);
    if (!CHECK(strstr(err, "copies: ") == err && strstr(err, "65536 bytes") != NULL)) fprintf(stderr, "  %s\n", err);
    CHECK(json_equal(state, before));
    json_decref(upd);
    /* The same in 48 strings (each under the per-string bound). */
    upd = json_object();
    for (int i = 0; i < 48; i++) {
        char k[16];
        snprintf(k, sizeof k, "c%d", i);
        json_object_set_new(upd, k, json_string("{{state.big}}"));
    }
    CHECK_EQ_INT(workflow_apply_update(state, upd, NULL, NULL, NULL, max, err, sizeof err), WORKFLOW_ETOOLARGE);
    CHECK(json_equal(state, before));
    /* Without a limit it is built (as before). */
    json_t *s2 = json_deep_copy(state);
    CHECK_EQ_INT(workflow_apply_update(s2, upd, NULL, NULL, NULL, 0, err, sizeof err), 0);
    CHECK_EQ_UINT(json_object_size(s2), 49);
    json_decref(s2);
    json_decref(upd);
    /* $output, $response and $input count as they are copied in. */
    json_t *out = json_object_get(before, "big");
    upd = J("{'a': '$output', 'b': '$output'}");
    CHECK_EQ_INT(workflow_apply_update(state, upd, out, NULL, NULL, max, err, sizeof err), WORKFLOW_ETOOLARGE);
    CHECK(json_equal(state, before));
    json_decref(upd);
    /* Each part fits, the whole does not: the state with the old value is over max. */
    upd = J("{'a': '$output'}");
    CHECK_EQ_INT(workflow_apply_update(state, upd, out, NULL, NULL, max, err, sizeof err), WORKFLOW_ETOOLARGE);
    CHECK(strstr(err, "the state would be") != NULL);
    CHECK(json_equal(state, before));
    /* Replacing the big value fits. */
    json_decref(upd);
    upd = J("{'big': '$output'}");
    CHECK_EQ_INT(workflow_apply_update(state, upd, out, NULL, NULL, max, err, sizeof err), 0);
    CHECK(json_equal(state, before));
    json_decref(upd);
    upd = J("{'small': 'a {{state.big}}'}");
    CHECK_EQ_INT(workflow_apply_update(state, upd, NULL, NULL, NULL, 4 * big, err, sizeof err), 0);
    CHECK_EQ_UINT(json_string_length(json_object_get(state, "small")), big + 2);
    json_decref(upd);

    /* A step's arguments: at most max rendered in all. */
    json_t *args = J("{'x': ['{{state.big}}', '{{state.big}}']}"), *res = NULL;
    CHECK_EQ_INT(workflow_render_json(args, state, NULL, max, &res, err, sizeof err), WORKFLOW_ETOOLARGE);
    CHECK(res == NULL);
    CHECK_EQ_INT(workflow_render_json(args, state, NULL, 2 * big, &res, err, sizeof err), 0);
    json_decref(res);
    json_decref(args);
    buf_free(&t);
    json_decref(before);
    json_decref(state);
}

/* ---- sleep, wait, durations, branches ------------------------------------------------- */

static void test_durations(void)
{
    char err[256];
    int64_t ms;
    struct { const char *text; int64_t want; } ok[] = {
        {"0", 0}, {"300", 300}, {"'300ms'", 300}, {"'2s'", 2000}, {"'1m30s'", 90000}, {"'1h30m'", 5400000},
        {"'2d'", 172800000}, {"'1d1h1m1s1ms'", 90061001}, {"315360000000", 315360000000LL}, {"'3650d'", 315360000000LL},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        json_t *j = J(ok[i].text);
        CHECK_EQ_INT(workflow_duration(j, &ms, err, sizeof err), 0);
        CHECK(ms == ok[i].want);
        json_decref(j);
    }
    const char *bad[] = {"-1", "'5 minutes'", "''", "'ms'", "'10'", "'1.5s'", "'1w'", "'1s '", "1.5", "true",
                         "null", "'3651d'", "315360000001", "'99999999999999999999d'", "'9223372036854775807ms'"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = J(bad[i]);
        if (!CHECK_EQ_INT(workflow_duration(j, &ms, err, sizeof err), -1)) fprintf(stderr, "  accepted %s\n", bad[i]);
        CHECK(strstr(err, "must be") != NULL);
        json_decref(j);
    }
    CHECK_EQ_INT(workflow_time("2026-12-01T09:00:00Z", &ms), 0);
    CHECK(ms == 1796115600000LL);
    CHECK_EQ_INT(workflow_time("2026-12-01T10:00:00+01:00", &ms), 0);
    CHECK(ms == 1796115600000LL);
    CHECK_EQ_INT(workflow_time("1796115600000", &ms), 0);
    CHECK(ms == 1796115600000LL);
    CHECK_EQ_INT(workflow_time("tomorrow", &ms), -1);
    CHECK_EQ_INT(workflow_time("", &ms), -1);
    CHECK_EQ_INT(workflow_time("-5", &ms), -1);
    CHECK_EQ_INT(workflow_time("99999999999999999999999", &ms), -1);
}

static void test_validate_timers(void)
{
    char buf[1024];
    STEP_VALID("{'kind': 'sleep', 'duration': '300ms'}");
    STEP_VALID("{'kind': 'sleep', 'name': 'Nap', 'duration': 0}");
    STEP_VALID("{'kind': 'sleep', 'until': '{{state.at}}'}");
    STEP_INVALID("{'kind': 'sleep', 'duration': '5 minutes'}", S0 ".duration: must be a duration");
    STEP_INVALID("{'kind': 'sleep', 'duration': -5}", S0 ".duration: must be from 0 to");
    STEP_INVALID("{'kind': 'sleep'}", S0 ": a sleep step needs exactly one of duration and until");
    STEP_INVALID("{'kind': 'sleep', 'duration': 1, 'until': '2026-01-01T00:00:00Z'}", S0 ": a sleep step needs exactly one");
    STEP_INVALID("{'kind': 'sleep', 'until': '{{state.at'}", S0 ".until:");
    STEP_INVALID("{'kind': 'sleep', 'until': 5}", S0 ".until: must be a string");
    STEP_INVALID("{'kind': 'sleep', 'duration': 1, 'timeout': 2}", S0 ".timeout: unknown key");

    STEP_VALID("{'kind': 'wait', 'signals': {'go': {}}}");
    STEP_VALID("{'kind': 'wait', 'signals': {'go': {'update': {'p': '$payload', 'i': '$input'}}, 'stop': {'to': 'p'}},"
               " 'timeout': '1h', 'onTimeout': {'to': 'p', 'update': {'late': true}}}");
    STEP_INVALID("{'kind': 'wait'}", S0 ".signals: missing");
    STEP_INVALID("{'kind': 'wait', 'signals': {}}", S0 ".signals: must be an object of 1 to 16 signals");
    STEP_INVALID("{'kind': 'wait', 'signals': ['go']}", S0 ".signals: must be an object");
    STEP_INVALID("{'kind': 'wait', 'signals': {'a b': {}}}", S0 ".signals.a b: a signal's name must be 1 to 64");
    STEP_INVALID("{'kind': 'wait', 'signals': {'go': true}}", S0 ".signals.go: must be an object");
    STEP_INVALID("{'kind': 'wait', 'signals': {'go': {'to': 'nowhere'}}}", S0 ".signals.go.to: no phase named \"nowhere\"");
    STEP_INVALID("{'kind': 'wait', 'signals': {'go': {'next': 'end'}}}", S0 ".signals.go.next: unknown key");
    STEP_INVALID("{'kind': 'wait', 'signals': {'go': {'update': {'x': '$response'}}}}",
                 S0 ".signals.go.update.x: \"$response\" exists only in human steps");
    STEP_INVALID("{'kind': 'wait', 'signals': {'go': {}}, 'onTimeout': {'to': 'end'}}",
                 S0 ".onTimeout: needs timeout");
    STEP_INVALID("{'kind': 'wait', 'signals': {'go': {}}, 'timeout': '1x'}", S0 ".timeout: must be a duration");
    STEP_INVALID("{'kind': 'wait', 'signals': {'go': {}}, 'timeout': 1, 'onTimeout': {'update': {'p': '$payload'}}}",
                 S0 ".onTimeout.update.p: \"$payload\" exists only in a wait step's signals");
    /* $payload is a wait's signals' only. */
    STEP_INVALID("{'kind': 'update', 'set': {'p': '$payload'}}", S0 ".set.p: \"$payload\" exists only");
    /* Seventeen signals are too many. */
    size_t n = (size_t)snprintf(buf, sizeof buf, "{'kind': 'wait', 'signals': {");
    for (int i = 0; i < 17; i++) n += (size_t)snprintf(buf + n, sizeof buf - n, "%s's%d': {}", i ? ", " : "", i);
    snprintf(buf + n, sizeof buf - n, "}}");
    STEP_INVALID(buf, S0 ".signals: must be an object of 1 to 16 signals");
}

/* A wait step's branch leads out of its phase at once (the rest of its steps
 * unrun); a branch to a phase the document does not have fails the workflow. */
static void test_next_branch(void)
{
    workflow_next_t n;
    workflow_pos pos;
    json_t *doc = J("{'name': 'w', 'phases': [{'name': 'a', 'steps': [{'kind': 'wait', 'signals': {'go': {'to': 'c'}}},"
                    " {'kind': 'update', 'set': {'x': 1}}], 'transitions': [{'to': 'b'}]},"
                    " {'name': 'b', 'terminal': true}, {'name': 'c', 'terminal': true}]}");
    json_t *state = J("{}");
    memset(&pos, 0, sizeof pos);
    pos.started = 1;
    pos.phase = "a";
    pos.step = 1;
    pos.branch = "c";
    workflow_next(doc, &pos, state, NULL, &n);
    CHECK_EQ_INT(n.kind, NEXT_TRANSITION);
    CHECK_EQ_STR(n.phase, "c");
    /* Still open: the step's end comes first. */
    pos.step_open = 1;
    workflow_next(doc, &pos, state, NULL, &n);
    CHECK_EQ_INT(n.kind, NEXT_WAIT);
    pos.step_open = 0;
    pos.branch = NULL;
    workflow_next(doc, &pos, state, NULL, &n);
    CHECK_EQ_INT(n.kind, NEXT_STEP);
    pos.branch = "gone";
    workflow_next(doc, &pos, state, NULL, &n);
    CHECK_EQ_INT(n.kind, NEXT_FAIL);
    CHECK(strstr(n.error, "\"gone\", not a phase") != NULL);
    json_decref(state);
    json_decref(doc);
}

int main(void)
{
    test_durations();
    test_validate_timers();
    test_next_branch();
    test_apply_update();
    test_validate_document();
    test_validate_phases();
    test_validate_steps();
    test_validate_human();
    test_validate_many();
    test_next_walk();
    test_next_edges();
    test_docs_example();
    test_state_limit();
    return TEST_MAIN_END();
}

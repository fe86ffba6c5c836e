/* Unit tests for the runner's step kinds (runner/step*.c) against a fake context:
 * each kind's begin and resume decide the events a real runner would write, from
 * a session view built by the reducer, without a database, a provider or an MCP
 * server. */
#include "../../runner/step.c"
#include "../../runner/step_kinds.c"
#include "../../runner/step_agent.c"
#include "../../runner/step_human.c"
#include "../../runner/step_tool.c"
#include "../../runner/step_update.c"
#include "../../runner/step_sleep.c"
#include "../../runner/step_wait.c"

#include "test.h"

/* ---- the fake ---------------------------------------------------------------------- */

typedef struct fake {
    json_t *events;             /* [{type, payload}] emitted */
    char failed[512];
    char reason[64];            /* the failure's reason, "" for none */
    int64_t now, timer;
    int agent_resumed, calls_run;
    int tools_state;            /* what ops->tools answers */
    json_t *tools;              /* the server's tools */
    json_t *conf;               /* the server's configuration */
    int ids;
} fake;

static void f_emit(step_ctx *c, sstore_event e)
{
    fake *f = c->ud;
    json_array_append_new(f->events, json_pack("{s:s, s:o}", "type", e.type, "payload", e.payload));
}
static void f_fail(step_ctx *c, const char *reason, const char *msg)
{
    fake *f = c->ud;
    snprintf(f->failed, sizeof f->failed, "%s", msg);
    snprintf(f->reason, sizeof f->reason, "%s", reason ? reason : "");
    f_emit(c, reason ? event_failed(1, msg, reason, -1) : event_workflow_failed(msg));
}
static void f_timer(step_ctx *c, int64_t at) { ((fake *)c->ud)->timer = at; }
static int64_t f_now(step_ctx *c) { return ((fake *)c->ud)->now; }
static void f_agent_resume(step_ctx *c) { ((fake *)c->ud)->agent_resumed++; }
static int f_tools(step_ctx *c, const char *server, const json_t **tools, char *err, size_t cap)
{
    fake *f = c->ud;
    *tools = f->tools;
    if (f->tools_state < 0) snprintf(err, cap, "MCP server %s is unavailable", server);
    return f->tools_state;
}
static const json_t *f_conf(step_ctx *c, const char *server) { return ((fake *)c->ud)->conf; }
static void f_run_calls(step_ctx *c) { ((fake *)c->ud)->calls_run++; }
static void f_new_id(step_ctx *c, char *out, size_t cap) { snprintf(out, cap, "call_%d", ++((fake *)c->ud)->ids); }

static const step_ops fake_ops = {f_emit, f_fail, f_timer, f_now, f_agent_resume, f_tools, f_conf, f_run_calls, f_new_id};

static json_t *J(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    if (!j) {
        fprintf(stderr, "bad test JSON: %s: %s\n", e.text, text);
        abort();
    }
    return j;
}

static void reduce(session_view *v, const char *type, json_t *payload)
{
    json_t *ev = json_pack("{s:s, s:o}", "type", type, "payload", payload);
    session_reduce(v, ev, NULL);
    json_decref(ev);
}

/* Apply the fake's events to the view (as the commit and the next look would). */
static void commit(fake *f, session_view *v)
{
    size_t i;
    json_t *e;
    json_array_foreach(f->events, i, e)
        reduce(v, json_string_value(json_object_get(e, "type")), json_incref(json_object_get(e, "payload")));
    json_array_clear(f->events);
}

/* The emitted types, space-separated. */
static const char *types(fake *f)
{
    static char out[512];
    size_t i, n = 0;
    json_t *e;
    out[0] = '\0';
    json_array_foreach(f->events, i, e)
        n += (size_t)snprintf(out + n, sizeof out - n, "%s%s", n ? " " : "", json_string_value(json_object_get(e, "type")));
    return out;
}

static const json_t *payload(fake *f, size_t i) { return json_object_get(json_array_get(f->events, i), "payload"); }

static void setup(fake *f, session_view *v, const char *initial_state)
{
    memset(f, 0, sizeof *f);
    f->events = json_array();
    f->now = 1000000;
    session_view_init(v);
    reduce(v, "session:created", json_pack("{s:s, s:i, s:o, s:{s:s}}", "workflow", "w", "version", 1, "initialState",
                                           J(initial_state), "input", "topic", "owls"));
    reduce(v, "workflow:started", json_object());
    reduce(v, "phase:entered", json_pack("{s:s}", "phase", "p"));
}

static void teardown(fake *f, session_view *v)
{
    json_decref(f->events);
    json_decref(f->tools);
    json_decref(f->conf);
    session_view_free(v);
}

/* ---- the kinds -------------------------------------------------------------------------- */

static void test_lookup(void)
{
    CHECK(step_lookup("agent") == &step_agent);
    CHECK(step_lookup("tool") == &step_tool);
    CHECK(step_lookup("update") == &step_update);
    CHECK(step_lookup("human") == &step_human);
    CHECK(step_lookup("sleep") == &step_sleep);
    CHECK(step_lookup("wait") == &step_wait);
    CHECK(step_lookup("codemode") == NULL);
    CHECK(step_lookup(NULL) == NULL);
}

static void test_update(void)
{
    fake f;
    session_view v;
    setup(&f, &v, "{\"n\": 1}");
    json_t *def = J("{\"kind\": \"update\", \"name\": \"Set\", \"set\": {\"t\": \"{{input.topic}}\", \"m.k\": \"$input\"}}");
    step_ctx c = {&fake_ops, &f, &v, def, "p", 0, 0};
    step_update.begin(&c);
    CHECK_EQ_STR(types(&f), "step:started state:updated step:completed");
    CHECK_EQ_STR(json_string_value(json_object_get(payload(&f, 0), "name")), "Set");
    commit(&f, &v);
    CHECK_EQ_STR(json_string_value(json_object_get(v.state, "t")), "owls");
    CHECK_EQ_INT(json_integer_value(json_object_get(v.state, "n")), 1);
    CHECK_EQ_INT(v.step, 1);
    json_decref(def);
    /* A template that does not resolve fails the workflow, writing nothing else. */
    def = J("{\"kind\": \"update\", \"set\": {\"x\": \"{{state.missing}}\"}}");
    step_ctx c2 = {&fake_ops, &f, &v, def, "p", 1, 0};
    step_update.begin(&c2);
    CHECK_EQ_STR(types(&f), "workflow:failed");
    CHECK(strstr(f.failed, "update step") != NULL);
    CHECK_EQ_STR(f.reason, "");
    json_decref(def);
    /* Past the state limit: workflow:failed with reason state_too_large, nothing
     * else written. */
    def = J("{\"kind\": \"update\", \"set\": {\"a\": \"{{input.topic}}{{input.topic}}\", \"b\": \"{{input.topic}}\"}}");
    step_ctx c3 = {&fake_ops, &f, &v, def, "p", 1, 40};
    json_array_clear(f.events);
    step_update.begin(&c3);
    CHECK_EQ_STR(types(&f), "workflow:failed");
    CHECK_EQ_STR(f.reason, "state_too_large");
    CHECK_EQ_STR(json_string_value(json_object_get(payload(&f, 0), "reason")), "state_too_large");
    json_decref(def);
    teardown(&f, &v);
}

static void test_human(void)
{
    fake f;
    session_view v;
    setup(&f, &v, "{}");
    json_t *def = J("{\"kind\": \"human\", \"id\": \"ok\", \"input\": \"approval\", \"prompt\": \"Publish {{input.topic}}?\","
                    " \"timeoutMs\": 5000, \"onTimeout\": {\"response\": false}, \"update\": {\"approved\": \"$response\"}}");
    step_ctx c = {&fake_ops, &f, &v, def, "p", 0, 0};
    step_human.begin(&c);
    CHECK_EQ_STR(types(&f), "step:started input:requested");
    CHECK_EQ_STR(json_string_value(json_object_get(payload(&f, 1), "prompt")), "Publish owls?");
    commit(&f, &v);
    CHECK_EQ_STR(session_status_name(v.status), "awaiting_input");
    /* Nothing yet: wait for the expiry. */
    step_human.resume(&c);
    CHECK_EQ_STR(types(&f), "");
    CHECK_EQ_INT(f.timer, 1005000);
    /* Expired: the default answer is given, then applied. */
    f.now = 1005000;
    step_human.resume(&c);
    CHECK_EQ_STR(types(&f), "input:expired input:received");
    commit(&f, &v);
    step_human.resume(&c);
    CHECK_EQ_STR(types(&f), "state:updated step:completed");
    CHECK_EQ_STR(json_string_value(json_object_get(payload(&f, 1), "interactionId")), "ok");
    commit(&f, &v);
    CHECK(json_is_false(json_object_get(v.state, "approved")));
    json_decref(def);
    teardown(&f, &v);

    /* Without onTimeout, expiry fails the workflow; an early answer is taken at once. */
    setup(&f, &v, "{}");
    def = J("{\"kind\": \"human\", \"id\": \"pick\", \"input\": \"choice\", \"options\": [\"a\", \"b\"], \"prompt\": \"?\", \"timeoutMs\": 10}");
    step_ctx c3 = {&fake_ops, &f, &v, def, "p", 0, 0};
    step_human.begin(&c3);
    commit(&f, &v);
    f.now += 10;
    step_human.resume(&c3);
    CHECK_EQ_STR(types(&f), "input:expired workflow:failed");
    CHECK_EQ_STR(f.failed, "checkpoint expired");
    json_decref(def);
    teardown(&f, &v);

    setup(&f, &v, "{}");
    reduce(&v, "input:received", json_pack("{s:s, s:s}", "interactionId", "say", "response", "hello"));
    def = J("{\"kind\": \"human\", \"id\": \"say\", \"input\": \"text\", \"prompt\": \"?\", \"update\": {\"said\": \"$response\"}}");
    step_ctx c4 = {&fake_ops, &f, &v, def, "p", 0, 0};
    step_human.begin(&c4);
    commit(&f, &v);
    step_human.resume(&c4);
    CHECK_EQ_STR(types(&f), "state:updated step:completed");
    commit(&f, &v);
    CHECK_EQ_STR(json_string_value(json_object_get(v.state, "said")), "hello");
    json_decref(def);
    teardown(&f, &v);
}

static void test_agent(void)
{
    fake f;
    session_view v;
    setup(&f, &v, "{}");
    json_t *def = J("{\"kind\": \"agent\", \"agent\": \"writer\", \"prompt\": \"p\"}");
    step_ctx c = {&fake_ops, &f, &v, def, "p", 0, 0};
    step_agent.begin(&c);
    CHECK_EQ_STR(types(&f), "step:started");
    CHECK_EQ_STR(json_string_value(json_object_get(payload(&f, 0), "kind")), "agent");
    CHECK_EQ_INT(f.agent_resumed, 0);
    commit(&f, &v);
    step_agent.resume(&c);
    CHECK_EQ_INT(f.agent_resumed, 1);
    json_decref(def);
    teardown(&f, &v);
}

static void test_tool(void)
{
    fake f;
    session_view v;
    setup(&f, &v, "{\"dir\": \"/tmp/x\"}");
    json_t *def = J("{\"kind\": \"tool\", \"server\": \"files\", \"tool\": \"write_file\","
                    " \"arguments\": {\"path\": \"{{state.dir}}/a.txt\", \"content\": \"about {{input.topic}}\"},"
                    " \"update\": {\"wrote\": \"$output\"}}");
    step_ctx c = {&fake_ops, &f, &v, def, "p", 0, 0};
    step_tool.begin(&c);
    CHECK_EQ_STR(types(&f), "step:started");
    commit(&f, &v);
    /* The server is starting: look again soon, record nothing. */
    f.tools_state = 1;
    step_tool.resume(&c);
    CHECK_EQ_STR(types(&f), "");
    CHECK_EQ_INT(f.timer, f.now + STEP_TOOL_WAIT_MS);
    /* Ready: the call is recorded with its rendered arguments, side effects from
     * the annotations, and not run before it is in the log. */
    f.tools_state = 0;
    f.tools = J("[{\"name\": \"read_text_file\", \"inputSchema\": {}, \"readOnly\": true},"
                " {\"name\": \"write_file\", \"inputSchema\": {}, \"readOnly\": false}]");
    step_tool.resume(&c);
    CHECK_EQ_STR(types(&f), "tool:called");
    const json_t *called = payload(&f, 0);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(called, "arguments"), "path")), "/tmp/x/a.txt");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(called, "arguments"), "content")), "about owls");
    CHECK(json_is_true(json_object_get(called, "sideEffecting")));
    CHECK_EQ_STR(json_string_value(json_object_get(called, "server")), "files");
    CHECK_EQ_STR(json_string_value(json_object_get(called, "phase")), "p");
    CHECK_EQ_INT(f.calls_run, 0);
    commit(&f, &v);
    /* In the log: the next look runs it (the runner's call machinery). */
    step_tool.resume(&c);
    CHECK_EQ_STR(types(&f), "");
    CHECK_EQ_INT(f.calls_run, 1);
    /* Its result completes the step. */
    json_t *call = json_deep_copy(session_view_open_call(&v, "call_1"));
    json_t *out = json_string("Successfully wrote to /tmp/x/a.txt");
    step_tool_finish(&c, call, out, 0, 0, 5);
    CHECK_EQ_STR(types(&f), "tool:result state:updated step:completed");
    commit(&f, &v);
    CHECK_EQ_STR(json_string_value(json_object_get(v.state, "wrote")), "Successfully wrote to /tmp/x/a.txt");
    CHECK_EQ_UINT(json_array_size(v.open_calls), 0);
    CHECK_EQ_INT(v.step, 1);
    json_decref(out);
    /* An error result fails the workflow, saying what the tool said. */
    out = json_string("ENOENT: no such file");
    step_tool_finish(&c, call, out, 1, 0, 5);
    CHECK_EQ_STR(types(&f), "tool:result workflow:failed");
    CHECK(strstr(f.failed, "ENOENT") != NULL);
    json_array_clear(f.events);
    json_decref(out);
    json_decref(call);
    /* The operator's configuration overrides the annotations. */
    json_decref(f.conf);
    f.conf = J("{\"command\": \"/x\", \"tools\": {\"write_file\": \"readOnly\"}}");
    step_ctx c2 = {&fake_ops, &f, &v, def, "p", 1, 0};
    step_tool.resume(&c2);
    CHECK_EQ_STR(types(&f), "tool:called");
    CHECK(json_is_false(json_object_get(payload(&f, 0), "sideEffecting")));
    json_array_clear(f.events);
    json_decref(def);
    /* An unknown tool, an unavailable server, a bad template: the workflow fails. */
    def = J("{\"kind\": \"tool\", \"server\": \"files\", \"tool\": \"nope\"}");
    step_ctx c3 = {&fake_ops, &f, &v, def, "p", 1, 0};
    step_tool.resume(&c3);
    CHECK_EQ_STR(types(&f), "workflow:failed");
    CHECK(strstr(f.failed, "has no tool named nope") != NULL);
    json_array_clear(f.events);
    f.tools_state = -1;
    step_tool.resume(&c3);
    CHECK(strstr(f.failed, "unavailable") != NULL);
    json_array_clear(f.events);
    json_decref(def);
    f.tools_state = 0;
    def = J("{\"kind\": \"tool\", \"server\": \"files\", \"tool\": \"write_file\", \"arguments\": {\"p\": \"{{state.nope}}\"}}");
    step_ctx c4 = {&fake_ops, &f, &v, def, "p", 1, 0};
    step_tool.resume(&c4);
    CHECK(strstr(f.failed, "arguments") != NULL);
    json_decref(def);
    teardown(&f, &v);
}

/* A failure message cut at its buffer's 511 bytes in the middle of a character
 * still makes a workflow:failed event (json_pack refused the split character, and
 * the event constructor aborts on a NULL payload: the runner died). */
static void test_fail_cut(void)
{
    fake f;
    session_view v;
    setup(&f, &v, "{}");
    char big[800] = "ab";
    for (size_t i = 2; i + 2 < sizeof big; i += 2) memcpy(big + i, "\xc3\xa9", 2);
    big[sizeof big - 2] = '\0';
    step_ctx c = {&fake_ops, &f, &v, NULL, "p", 0, 0};
    step_failf(&c, "%s", big);
    CHECK_EQ_STR(types(&f), "workflow:failed");
    CHECK(utf8_valid(f.failed, strlen(f.failed)));
    CHECK(strlen(f.failed) == 511 && f.failed[510] == '?');
    teardown(&f, &v);
}

/* A sleep sets its timer in the log and fires it once at its time; until renders a
 * time from the state; a value that is no time fails the workflow. */
static void test_sleep(void)
{
    fake f;
    session_view v;
    setup(&f, &v, "{\"at\": \"1970-01-01T00:20:00Z\", \"ms\": 1300000, \"bad\": \"soon\"}");
    json_t *def = J("{\"kind\": \"sleep\", \"name\": \"Nap\", \"duration\": \"1m30s\"}");
    step_ctx c = {&fake_ops, &f, &v, def, "p", 0, 0};
    step_sleep.begin(&c);
    CHECK_EQ_STR(types(&f), "step:started timer:set");
    CHECK_EQ_STR(json_string_value(json_object_get(payload(&f, 0), "kind")), "sleep");
    CHECK_EQ_INT(json_integer_value(json_object_get(payload(&f, 1), "dueAt")), 1090000);
    commit(&f, &v);
    CHECK_EQ_INT(v.timer_due, 1090000);
    step_sleep.resume(&c);
    CHECK_EQ_STR(types(&f), "");
    CHECK_EQ_INT(f.timer, 1090000);
    f.now = 1090000;
    step_sleep.resume(&c);
    CHECK_EQ_STR(types(&f), "timer:fired step:completed");
    commit(&f, &v);
    CHECK_EQ_INT(v.timer_due, 0);
    CHECK_EQ_INT(v.step, 1);
    json_decref(def);
    /* until: RFC 3339 from the state, then ms since the epoch. */
    const char *untils[] = {"{{state.at}}", "{{state.ms}}"};
    int64_t dues[] = {1200000, 1300000};
    for (int i = 0; i < 2; i++) {
        char doc[128];
        snprintf(doc, sizeof doc, "{\"kind\": \"sleep\", \"until\": \"%s\"}", untils[i]);
        def = J(doc);
        step_ctx c2 = {&fake_ops, &f, &v, def, "p", 1 + i, 0};
        step_sleep.begin(&c2);
        CHECK_EQ_INT(json_integer_value(json_object_get(payload(&f, 1), "dueAt")), dues[i]);
        commit(&f, &v);
        json_decref(def);
    }
    def = J("{\"kind\": \"sleep\", \"until\": \"{{state.bad}}\"}");
    step_ctx c3 = {&fake_ops, &f, &v, def, "p", 3, 0};
    step_sleep.begin(&c3);
    CHECK_EQ_STR(types(&f), "workflow:failed");
    CHECK(strstr(f.failed, "sleep until: \"soon\" is not a time") != NULL);
    json_decref(def);
    teardown(&f, &v);
}

/* A wait takes a kept signal (the earliest of its names), applies its branch with
 * the payload and records the branch's phase; its timeout takes onTimeout's, or
 * fails the workflow without one. */
static void test_wait(void)
{
    fake f;
    session_view v;
    setup(&f, &v, "{}");
    reduce(&v, "signal:received", json_pack("{s:s, s:i}", "name", "other", "payload", 0));
    reduce(&v, "signal:received", json_pack("{s:s, s:{s:b}}", "name", "yes", "payload", "ok", 1));
    reduce(&v, "signal:received", json_pack("{s:s, s:i}", "name", "yes", "payload", 2));
    json_t *def = J("{\"kind\": \"wait\", \"signals\": {\"yes\": {\"to\": \"ship\", \"update\": {\"got\": \"$payload\"}},"
                    " \"no\": {}}, \"timeout\": 500, \"onTimeout\": {\"update\": {\"late\": true}}}");
    step_ctx c = {&fake_ops, &f, &v, def, "p", 0, 0};
    step_wait.begin(&c);
    CHECK_EQ_STR(types(&f), "step:started timer:set");
    CHECK_EQ_INT(json_array_size(json_object_get(payload(&f, 0), "signals")), 2);
    commit(&f, &v);
    CHECK(v.waiting != NULL);
    step_wait.resume(&c);
    CHECK_EQ_STR(types(&f), "state:updated step:completed");
    CHECK_EQ_STR(json_string_value(json_object_get(payload(&f, 1), "signal")), "yes");
    CHECK_EQ_STR(json_string_value(json_object_get(payload(&f, 1), "to")), "ship");
    commit(&f, &v);
    CHECK(json_is_true(json_object_get(json_object_get(v.state, "got"), "ok")));
    /* The first "yes" was taken; "other" and the second "yes" are kept. */
    CHECK_EQ_UINT(json_array_size(v.signals), 2);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(v.signals, 1), "payload")), 2);
    CHECK_EQ_STR(v.branch, "ship");
    CHECK(v.waiting == NULL && v.timer_due == 0);
    workflow_pos pos;
    session_view_pos(&v, &pos);
    CHECK_EQ_STR(pos.branch, "ship");
    reduce(&v, "phase:entered", json_pack("{s:s}", "phase", "ship"));
    CHECK_EQ_STR(v.branch, "");
    json_decref(def);
    teardown(&f, &v);

    /* Nothing kept: it waits; its timeout takes onTimeout's branch (no "to": on). */
    setup(&f, &v, "{}");
    def = J("{\"kind\": \"wait\", \"signals\": {\"go\": {}}, \"timeout\": \"2s\", \"onTimeout\": {\"update\": {\"late\": true}}}");
    step_ctx c2 = {&fake_ops, &f, &v, def, "p", 0, 0};
    step_wait.begin(&c2);
    commit(&f, &v);
    step_wait.resume(&c2);
    CHECK_EQ_STR(types(&f), "");
    CHECK_EQ_INT(f.timer, 1002000);
    f.now = 1002000;
    step_wait.resume(&c2);
    CHECK_EQ_STR(types(&f), "timer:fired state:updated step:completed");
    CHECK(json_is_true(json_object_get(payload(&f, 2), "timeout")));
    CHECK(json_object_get(payload(&f, 2), "to") == NULL);
    commit(&f, &v);
    CHECK(json_is_true(json_object_get(v.state, "late")));
    CHECK_EQ_STR(v.branch, "");
    json_decref(def);
    teardown(&f, &v);

    /* Without onTimeout the timeout fails the workflow; without a timeout only a
     * signal ends the wait. */
    setup(&f, &v, "{}");
    def = J("{\"kind\": \"wait\", \"signals\": {\"go\": {}}, \"timeout\": 0}");
    step_ctx c3 = {&fake_ops, &f, &v, def, "p", 0, 0};
    step_wait.begin(&c3);
    commit(&f, &v);
    step_wait.resume(&c3);
    CHECK_EQ_STR(types(&f), "timer:fired workflow:failed");
    CHECK_EQ_STR(f.failed, "the wait timed out");
    json_decref(def);
    teardown(&f, &v);
    setup(&f, &v, "{}");
    def = J("{\"kind\": \"wait\", \"signals\": {\"go\": {}}}");
    step_ctx c4 = {&fake_ops, &f, &v, def, "p", 0, 0};
    step_wait.begin(&c4);
    CHECK_EQ_STR(types(&f), "step:started");
    commit(&f, &v);
    f.now += 1000000000;
    step_wait.resume(&c4);
    CHECK_EQ_STR(types(&f), "");
    CHECK_EQ_INT(f.timer, 0);
    json_decref(def);
    teardown(&f, &v);
}

int main(void)
{
    test_lookup();
    test_sleep();
    test_wait();
    test_update();
    test_human();
    test_agent();
    test_tool();
    test_fail_cut();
    return TEST_MAIN_END();
}

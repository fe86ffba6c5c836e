/* tools: a session's tool calls, on the operator's MCP servers.
 *
 * A call is recorded before it runs: the model's request ends with a tool:called
 * per call (tools_record), or a workflow tool step records its one call; only when
 * that event is in the log does a later look (tools_run, from the session's view)
 * start it. So a call that ran always has its tool:called, and the log says which
 * calls may have run without a recorded result: the open ones. This process knows
 * the calls it recorded itself and has not started (own_calls); an open call it
 * did not record was recorded by a runner that died, maybe while the call ran.
 * Such a call runs again only if it is read-only; a side-effecting one is answered
 * with a failed result and never executed twice. A result is recorded whole
 * (tool:result); the model is sent at most SESSION_TOOL_RESULT_MAX of it
 * (lib/session cuts it, with a marker).
 *
 * A call's name resolves (lib/mcp mcp_resolve) to a declared tool the operator
 * bound to one of the agent's servers, or to a server tool by its exposed name;
 * tool:called records what it resolved to, and that is what runs.
 *
 * Calls of one request run in parallel (each server bounds its own concurrency);
 * their results come back on the runner's loop through runner/mcp_pool's callbacks. A
 * workflow tool step's call is completed by whoever registered R->step_call_done
 * (runner/steps.c, set by dstream_runner.c): this file calls nothing above it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/diag.h"
#include "../lib/agent.h"
#include "../lib/rturn.h"
#include "../lib/timefmt.h"
#include "../lib/event.h"
#include "../lib/mcp.h"
#include "../lib/utf8.h"
#include "tools.h"
#include "mcp_pool.h"
#include "outbox.h"
#include "tap.h"

#define TOOLS_WAIT_MS 200           /* look again this soon while a server starts */

struct tcall {
    runner_t *R;
    sess_t *s;
    json_t *call;                   /* its tool:called payload */
    rmcp_call *h;
    int64_t started_ms;
    tcall_t *next;
};

static void emit(runner_t *R, sess_t *s, sstore_event e)
{
    outbox_emit_as(R, s, e.type, e.payload, e.actor);
}

json_t *tools_agent(runner_t *R, sess_t *s, const json_t *agent, int with_tools)
{
    char err[512];
    json_t *servers = json_array();
    size_t i;
    const json_t *name;
    int pending = 0;
    if (with_tools) {
        json_array_foreach(json_object_get(agent, "mcpServers"), i, name) {
            const json_t *tools = NULL;
            const char *server = json_string_value(name);
            if (!server) continue;     /* an object of an earlier version: never run */
            int st = tap_tools(R, s, server, &tools, err, sizeof err);
            if (st == RMCP_PENDING) pending = 1;
            else if (st == RMCP_READY)      /* with the operator's bindings of the agent's declared tools */
                json_array_append_new(servers, json_pack("{s:s, s:O, s:o}", "server", server, "tools", tools, "bound",
                                                         mcp_bindings_for(R->mcp_config, agent, server)));
            else {
                diag("info", "session %s: %s", s->id, err);
                emit(R, s, event_tool_server_failed(server, err));
            }
        }
    }
    if (pending) {
        json_decref(servers);
        int64_t at = timefmt_now_ms() + TOOLS_WAIT_MS;
        if (!s->timer_ms || at < s->timer_ms) s->timer_ms = at;
        return NULL;
    }
    json_t *out = json_deep_copy(agent);
    buf_t sys;
    buf_init(&sys, 1 << 20);
    if (agent_system_prompt(agent, &sys) == 0 && sys.len)
        json_object_set_new(out, "system", json_stringn(sys.p, sys.len));
    buf_free(&sys);
    json_t *tools = mcp_model_tools(json_object_get(agent, "tools"), servers);
    json_object_set_new(out, "tools", tools);
    json_decref(s->servers);
    s->servers = servers;
    return out;
}

/* input:requested for call c (the model's {callId, name, arguments}): approve it or not. */
static void ask_approval(runner_t *R, sess_t *s, const json_t *c)
{
    char *args = json_dumps(json_object_get(c, PK_ARGUMENTS), JSON_COMPACT | JSON_ENCODE_ANY);
    char prompt[1200];
    snprintf(prompt, sizeof prompt, "Run the tool %.100s with %.1000s?", json_string_value(json_object_get(c, PK_NAME)),
             args ? args : "{}");
    free(args);
    diag("info", "session %s: tool call %s waits for approval", s->id, json_string_value(json_object_get(c, PK_CALL_ID)));
    emit(R, s, event_approval_requested(json_string_value(json_object_get(c, PK_CALL_ID)), utf8_scrub(prompt)));
}

void tools_record(runner_t *R, sess_t *s, const rq_t *q)
{
    size_t i;
    const json_t *c;
    if (!s->own_calls) s->own_calls = json_object();
    json_array_foreach(q->tool_calls, i, c) {
        const char *id = json_string_value(json_object_get(c, PK_CALL_ID));
        const char *name = json_string_value(json_object_get(c, PK_NAME));
        const char *server = NULL;
        const json_t *tool = mcp_resolve(s->servers, name, &server);
        const char *tname = tool ? json_string_value(json_object_get(tool, "name")) : NULL;
        int side = tool ? mcp_tool_side_effecting(rmcp_server_conf(R->mcp, server), tool) : 0;
        emit(R, s, event_tool_called(id, name ? name : "", json_object_get(c, PK_ARGUMENTS), tool ? server : NULL,
                                     tname, side, q->id, NULL, 0));
        json_object_set_new(s->own_calls, id, json_true());
        /* A chat's call the agent wants approved is asked in the same commit: the log
         * never holds it without its question. */
        if (!q->step_agent && agent_needs_approval(s->agent, name, tool ? server : NULL)) ask_approval(R, s, c);
    }
}

static tcall_t *running(sess_t *s, const char *id)
{
    for (tcall_t *t = s->calls; t; t = t->next)
        if (!strcmp(json_string_value(json_object_get(t->call, PK_CALL_ID)), id)) return t;
    return NULL;
}

/* The call's result: recorded, and for a workflow step its completion. */
static void finish(runner_t *R, sess_t *s, const json_t *call, const json_t *result, int is_error, int failed,
                   int64_t duration_ms)
{
    const char *id = json_string_value(json_object_get(call, PK_CALL_ID));
    diag("info", "session %s: tool call %s (%s) %s in %lld ms", s->id, id,
                 json_string_value(json_object_get(call, PK_NAME)), failed ? "failed" : is_error ? "answered an error" : "answered",
                 (long long)duration_ms);
    if (json_object_get(call, PK_PHASE) && R->step_call_done)
        R->step_call_done(R, s, call, result, is_error, failed, duration_ms);
    else emit(R, s, event_tool_result(id, result, is_error, failed, duration_ms));
}

static void unlink_call(sess_t *s, tcall_t *t)
{
    for (tcall_t **pp = &s->calls; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            return;
        }
}

static void on_done(void *ud, const rmcp_outcome *o)
{
    tcall_t *t = ud;
    const json_t *output = o->output;
    int is_error = o->is_error, failed = o->failed;
    json_t *why = NULL;
    /* A result past DSTREAM_TOOL_RESULT_MAX is not kept: the call fails, saying so
     * (measured as the JSON its event would carry, without building that text). */
    size_t n = t->R->tool_result_max && output ? json_dumpb(output, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
    if (n > t->R->tool_result_max) {
        char text[200];
        snprintf(text, sizeof text, "the tool's result was %zu bytes, over the limit of %zu (DSTREAM_TOOL_RESULT_MAX)", n,
                 t->R->tool_result_max);
        diag("info", "session %s: tool call %s: %s", t->s->id, json_string_value(json_object_get(t->call, PK_CALL_ID)),
             text);
        output = why = json_string(text);
        is_error = failed = 1;
    }
    unlink_call(t->s, t);
    tap_tool_done(t->R, t->s, t->call, output, is_error, failed);
    finish(t->R, t->s, t->call, output, is_error, failed, timefmt_now_ms() - t->started_ms);
    json_decref(why);
    json_decref(t->call);
    free(t);
}

/* A call a person did not approve: not run; the model is told, with their reason. */
static void deny(runner_t *R, sess_t *s, const json_t *call)
{
    const char *id = json_string_value(json_object_get(call, PK_CALL_ID));
    const json_t *why = json_object_get(json_object_get(call, SESSION_CALL_APPROVAL), PK_REASON);
    char text[1200];
    snprintf(text, sizeof text, "The user did not approve this call of %.100s: it was not run.%s%.1000s",
             json_string_value(json_object_get(call, PK_NAME)), why ? " Their reason: " : "",
             why ? json_string_value(why) : "");
    json_t *result = json_string(utf8_scrub(text));
    diag("info", "session %s: tool call %s was not approved: not run", s->id, id);
    emit(R, s, event_tool_denied(id, result));
    json_decref(result);
}

void tools_run(runner_t *R, sess_t *s, const session_view *v)
{
    size_t i;
    const json_t *call;
    json_array_foreach(v->open_calls, i, call) {
        const char *id = json_string_value(json_object_get(call, PK_CALL_ID));
        if (!id || running(s, id)) continue;
        const json_t *mine = s->own_calls ? json_object_get(s->own_calls, id) : NULL;
        rturn_call plan = rturn_call_plan(v, call, mine != NULL);
        if (plan == RTURN_CALL_WAIT) continue;      /* never run so far */
        if (plan == RTURN_CALL_DENY) {
            deny(R, s, call);
            continue;
        }
        if (plan == RTURN_CALL_TAKE) {
            /* Approved: taken (tool:approved) before it runs, as tool:called is
             * recorded before a call runs; the look that finds that in the log runs it
             * as this process's own. A runner that dies between the two leaves a call
             * that may have run, as for any other. */
            if (!json_is_string(mine)) {
                if (!s->own_calls) s->own_calls = json_object();
                json_object_set_new(s->own_calls, id, json_string("approved"));
                emit(R, s, event_tool_approved(id));
            }
            continue;
        }
        if (mine) json_object_del(s->own_calls, id);
        int own = mine != NULL;
        const char *server = json_string_value(json_object_get(call, PK_SERVER));
        const char *tool = json_string_value(json_object_get(call, PK_TOOL));
        if (plan == RTURN_CALL_CUT) {
            json_t *why = json_string("the runner restarted while this call was in flight; it has side effects, "
                                      "so it was not run again (it may or may not have taken effect)");
            diag("info", "session %s: side-effecting call %s cut off by a restart: not run again", s->id, id);
            finish(R, s, call, why, 1, 1, 0);
            json_decref(why);
            continue;
        }
        if (plan == RTURN_CALL_NO_TOOL) {
            char text[200];
            snprintf(text, sizeof text, "no tool named %.100s", json_string_value(json_object_get(call, PK_NAME)));
            json_t *why = json_string(utf8_scrub(text));   /* %.100s may cut a character */
            finish(R, s, call, why, 1, 1, 0);
            json_decref(why);
            continue;
        }
        json_t *answer;
        int a_error, a_failed;
        if (tap_tool_start(R, s, call, &answer, &a_error, &a_failed)) {
            finish(R, s, call, answer, a_error, a_failed, 0);     /* a recording answered it (tap.c) */
            json_decref(answer);
            continue;
        }
        tcall_t *t = calloc(1, sizeof *t);
        if (!t) abort();
        t->R = R;
        t->s = s;
        t->call = json_deep_copy(call);
        t->started_ms = timefmt_now_ms();
        t->next = s->calls;
        s->calls = t;
        t->h = rmcp_call_start(R->mcp, server, tool, json_object_get(call, PK_ARGUMENTS), on_done, t);
        if (!t->h) abort();
        diag("info", "session %s: tool call %s: %s on %s%s", s->id, id, tool, server, own ? "" : " (again, after a restart)");
    }
}

void tools_forget(runner_t *R, sess_t *s)
{
    while (s->calls) {
        tcall_t *t = s->calls;
        s->calls = t->next;
        rmcp_abandon(R->mcp, t->h);
        json_decref(t->call);
        free(t);
    }
    json_decref(s->own_calls);
    s->own_calls = NULL;
    json_decref(s->servers);
    s->servers = NULL;
    json_decref(s->rec_tools);
    s->rec_tools = NULL;
    free(s->rec_reach);            /* read again with the mode (tap.c) */
    s->rec_reach = NULL;
    s->rec_mode_known = 0;
    json_decref(s->rec_occ);
    s->rec_occ = NULL;
    s->rec_occ_read = 0;
}

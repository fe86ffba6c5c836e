/* driver: what the runner does for one session, decided from its log.
 *
 * The runner keeps no state that matters across a restart: each time a session
 * changes, a timer of its own fires or a lease it waited for expires, drive()
 * recomputes the session's view from the log and compares it with what this
 * process has in flight. Every decision ends in events queued on the session and
 * committed by the loop (outbox.c), so a crash at any point leaves a log from which
 * the next drive() resumes.
 *
 * A request's life in the log: provider:request_started (one per attempt, each
 * with a new id), deltas, and then exactly one of provider:request_ended (the
 * provider's stream ended with its terminal event: the only way to a completed
 * reply), provider:request_cancelled (interrupted, cancelled, or failed for good)
 * or provider:request_retried (it failed or was cut off by a restart; the next
 * attempt is due at retryAt). A request the log says is in flight but this process
 * does not have was cut off by a restart (we hold the lease, so its runner is gone):
 * it is closed and retried on the restart budget. lib/retry decides every retry;
 * when a budget is spent the request ends with request_cancelled (failed) and the
 * session with reply:failed (a chat: the next message tries again) or
 * workflow:failed. So every path ends in something in flight, something
 * scheduled (retryAt, a checkpoint's expiry: timers), or a final event. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/diag.h"
#include "../lib/agent.h"
#include "../lib/cost.h"
#include "../lib/defs.h"
#include "../lib/event.h"
#include "stats.h"
#include "../lib/lease.h"
#include "../lib/timefmt.h"
#include "../lib/workflow.h"
#include "runner.h"

sess_t *runner_session(runner_t *R, const char *id)
{
    for (sess_t *s = R->sessions; s; s = s->next)
        if (!strcmp(s->id, id)) return s;
    sess_t *s = calloc(1, sizeof *s);
    if (!s) abort();
    snprintf(s->id, sizeof s->id, "%s", id);
    session_view_init(&s->view);
    s->next = R->sessions;
    R->sessions = s;
    return s;
}

void runner_forget(runner_t *R, sess_t *s)
{
    for (sess_t **pp = &R->sessions; *pp; pp = &(*pp)->next) {
        if (*pp != s) continue;
        *pp = s->next;
        break;
    }
    if (s->rq) request_free(R, s->rq);
    tools_forget(R, s);
    if (s->held) lease_release(R->conn, s->id, &R->me);
    runner_outbox_clear(s);
    free(s->out);
    session_view_free(&s->view);
    json_decref(s->agent);
    json_decref(s->workflow);
    free(s);
}

void runner_lost(runner_t *R, sess_t *s)
{
    if (s->rq) {
        diag("info", "session %s: request %s stopped: another runner holds the session", s->id, s->rq->id);
        request_free(R, s->rq);
    }
    if (s->calls) diag("info", "session %s: its tool calls are abandoned: another runner holds the session", s->id);
    tools_forget(R, s);
    s->held = 0;
    /* Look again when the new holder's lease may have run out (it renews it
     * while it works; if it died, this process takes the session back). */
    s->other_until = timefmt_now_ms() + R->lease_ms;
    s->timer_ms = s->other_until + 50;
}

/* ---- events ---------------------------------------------------------------------------- */

/* Queue one event built by lib/event (its payload becomes the outbox's). */
static void put(runner_t *R, sess_t *s, sstore_event e)
{
    runner_emit_as(R, s, e.type, e.payload, e.actor);
}

/* Queue ev[0..n) (their payloads become the outbox's). */
static void emit(runner_t *R, sess_t *s, sstore_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) put(R, s, ev[i]);
}

/* ---- requests ------------------------------------------------------------------------ */

static void new_request_id(char *out, size_t cap)
{
    char r[16];
    sstore_new_id(r, sizeof r);
    snprintf(out, cap, "req_%.12s", r);
}

/* The history to send: replies cut off by a restart or a failure are left out,
 * and so is the reply in flight (a retry of it); the first queued message, whose
 * turn it is, goes last. */
static json_t *history(const session_view *v)
{
    json_t *out = json_array(), *m;
    size_t i;
    json_array_foreach(v->messages, i, m) {
        const char *reason = json_string_value(json_object_get(m, "reason"));
        const char *rid = json_string_value(json_object_get(m, "requestId"));
        if (reason && (!strcmp(reason, "restart") || !strcmp(reason, "failed"))) continue;
        if (v->request[0] && rid && !strcmp(rid, v->request)) continue;
        json_array_append(out, m);
    }
    if (!v->request[0] && !v->attempts && !v->retry_at && json_array_size(v->queued))
        json_array_append(out, json_array_get(v->queued, 0));
    return out;
}

/* The request in progress failed for good (or could not even start): the session
 * ends failed, with error saying why and reason naming the rule (lib/retry's
 * names, or a limit's). A workflow fails; a chat's pending reply fails and its
 * next user message may try again. */
static void give_up(runner_t *R, sess_t *s, const session_view *v, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void give_up(runner_t *R, sess_t *s, const session_view *v, const char *reason, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag("info", "session %s: %s failed (%s, %d attempt(s)): %s", s->id, v->is_workflow ? "workflow" : "reply",
                 reason, v->attempts, msg);
    put(R, s, event_failed(v->is_workflow, msg, reason, v->attempts));
}

/* Start attempt v->attempts + 1 of the request in progress under a new id. */
static int start(runner_t *R, sess_t *s, const session_view *v, const json_t *agent, json_t *messages,
                 int step_agent)
{
    char id[72];
    int attempt = v->attempts + 1;
    if (R->session_requests_max && v->requests >= R->session_requests_max) {
        json_decref(messages);
        give_up(R, s, v, "session_request_limit",
                "the session made its %lld provider requests (DSTREAM_SESSION_REQUESTS_MAX)",
                (long long)R->session_requests_max);
        return -1;
    }
    /* A queued message whose turn comes now starts its own count. */
    int64_t msg_requests = !v->request[0] && !v->attempts && !v->retry_at && json_array_size(v->queued)
                               ? 0 : v->message_requests;
    if (!v->is_workflow && R->message_requests_max && msg_requests >= R->message_requests_max) {
        json_decref(messages);
        give_up(R, s, v, "message_request_limit",
                "the reply made its %lld provider requests (DSTREAM_MESSAGE_REQUESTS_MAX)",
                (long long)R->message_requests_max);
        return -1;
    }
    new_request_id(id, sizeof id);
    rq_t *q = request_start(R, s, agent, messages, id, attempt, step_agent);
    json_decref(messages);
    if (!q && R->start_error[0]) {
        /* The operator's configuration refuses it (lib/provcfg): final, said once. */
        give_up(R, s, v, R->start_reason[0] ? R->start_reason : "refused", "%s", R->start_error);
        return -1;
    }
    if (!q) {
        const char *prov = json_string_value(json_object_get(agent, "provider"));
        give_up(R, s, v, "start", "cannot start a request to provider %s", prov ? prov : "?");
        return -1;
    }
    put(R, s, event_request_started(id, q->target.p->name, q->model, attempt));
    diag("info", "session %s: request %s started (%s, attempt %d)", s->id, id, q->model, attempt);
    return 0;
}

/* Cut the request in flight (ours) with reason, as an event. */
static void cut(runner_t *R, sess_t *s, const char *reason)
{
    rq_t *q = s->rq;
    if (!q) return;
    request_flush(R, q);
    put(R, s, event_request_cancelled(q->id, reason, NULL));
    diag("info", "session %s: request %s cancelled (%s)", s->id, q->id, reason);
    request_free(R, q);
}

/* Request id (of the request in progress) did not complete, for the reason in f:
 * schedule the next attempt (provider:request_retried, due at retryAt) or, if the
 * policy or its budget says no, end it (request_cancelled, failed) and give up. */
static void retry_or_fail(runner_t *R, sess_t *s, const session_view *v, const char *id,
                          const retry_failure *f, const char *error)
{
    retry_decision d;
    int64_t now = timefmt_now_ms();
    retry_decide(f, v->failures, v->restarts, &R->retry, now, &d);
    if (d.retry) {
        runner_stats_retry(f);
        put(R, s, event_request_retried(id, v->attempts + 1, f->kind == RETRY_RESTART ? "restart" : "failed",
                                        d.reason, (int)(f->kind == RETRY_HTTP ? f->status : 0), error, d.delay_ms,
                                        now + d.delay_ms));
        diag("info", "session %s: request %s: %s (%s); attempt %d in %lld ms", s->id, id, error, d.reason,
                     v->attempts + 1, (long long)d.delay_ms);
        s->timer_ms = now + d.delay_ms;
        return;
    }
    if (f->kind != RETRY_RESTART)
        put(R, s, event_request_cancelled(id, "failed", error));
    if (d.exhausted)
        give_up(R, s, v, d.budget == RETRY_BUDGET_RESTART ? "restarts" : "retries",
                "%s (%s); gave up after %d attempt(s), %d provider error(s) and %d restart(s)", error, d.reason,
                v->attempts, v->failures + (f->kind != RETRY_RESTART), v->restarts + (f->kind == RETRY_RESTART));
    else
        give_up(R, s, v, d.reason, "%s (%s: not retried)", error, d.reason);
}

/* The log says request v->request is in flight, and this process (which holds the
 * lease) does not have it: its runner is gone. Close it and retry on the restart
 * budget. */
static void restart_cut(runner_t *R, sess_t *s, const session_view *v)
{
    retry_failure f = {RETRY_RESTART, 0, NULL, -1, NULL, -1};
    put(R, s, event_request_cancelled(v->request, "restart", NULL));
    diag("info", "session %s: request %s was cut off by a restart", s->id, v->request);
    retry_or_fail(R, s, v, v->request, &f, "cut off by a runner restart");
}

/* A retry is scheduled (v->retry_at): 1 if it is due now, else 0 with a timer set. */
static int retry_due(sess_t *s, const session_view *v)
{
    if (timefmt_now_ms() >= v->retry_at) return 1;
    s->timer_ms = v->retry_at;
    return 0;
}

/* ---- chat sessions ------------------------------------------------------------------------ */

/* The agent's limits.costBudgetUsd, if set, is spent by the session's requests so far. */
static int over_budget(const json_t *agent, const session_view *v)
{
    json_t *b = json_object_get(json_object_get(agent, "limits"), "costBudgetUsd");
    return json_is_number(b) && v->cost_usd >= json_number_value(b);
}

/* Tool-call turns allowed in one reply: limits.maxTurns, else RUNNER_MAX_TURNS. */
static int max_turns(const json_t *agent)
{
    json_t *t = json_object_get(json_object_get(agent, "limits"), "maxTurns");
    return json_is_integer(t) && json_integer_value(t) > 0 ? (int)json_integer_value(t) : RUNNER_MAX_TURNS;
}

static json_t *load_agent(runner_t *R, sess_t *s, const char *name)
{
    int rc;
    if (s->agent) return s->agent;
    s->agent = defs_agent_get(R->conn, name, &rc);
    return s->agent;
}

/* A request of the log that this process does not have (its runner died: it is
 * closed and retried), or tool calls the model asked for (they run; their results
 * are the next request's, the model's next turn): 1 if there was either. */
static int under_way(runner_t *R, sess_t *s, const session_view *v)
{
    if (v->request[0]) {
        restart_cut(R, s, v);
        return 1;
    }
    if (json_array_size(v->open_calls)) {
        tools_run(R, s, v);
        return 1;
    }
    return 0;
}

static void drive_chat(runner_t *R, sess_t *s, const session_view *v)
{
    if (s->rq) {
        if (session_view_interrupted(v)) cut(R, s, "interrupted");    /* the commit re-drives: the answer starts */
        return;
    }
    if (under_way(R, s, v)) return;
    int tool_turn = session_view_tools_answered(v);
    if (!v->retry_at && !tool_turn && !session_view_needs_reply(v)) return;
    if (v->retry_at && !retry_due(s, v)) return;
    const char *name = json_string_value(json_object_get(v->created, PK_AGENT));
    json_t *agent = name ? load_agent(R, s, name) : NULL;
    if (!agent) {
        give_up(R, s, v, "agent_missing", "agent %s does not exist", name ? name : "?");
        return;
    }
    if (over_budget(agent, v)) {
        diag("info", "session %s: cost budget of agent %s reached ($%.6f)", s->id, name, v->cost_usd);
        put(R, s, event_session_cancelled("cost budget reached"));
        return;
    }
    if (tool_turn && !v->retry_at && !session_view_needs_reply(v) && v->tool_turns >= max_turns(agent)) {
        diag("info", "session %s: the model asked for tools %d times in one reply: stopped (maxTurns)", s->id,
                     v->tool_turns);
        put(R, s, event_tool_loop_stopped("maxTurns", v->tool_turns));
        return;
    }
    json_t *shown = tools_agent(R, s, agent, 1);
    if (!shown) return;     /* a server is starting: its timer looks again */
    start(R, s, v, shown, history(v), 0);
    json_decref(shown);
}

/* ---- workflow sessions ---------------------------------------------------------------------- */

static json_t *load_workflow(runner_t *R, sess_t *s, const session_view *v)
{
    int rc, got;
    if (s->workflow) return s->workflow;
    const char *name = json_string_value(json_object_get(v->created, PK_WORKFLOW));
    int version = (int)json_integer_value(json_object_get(v->created, PK_VERSION));
    if (name) s->workflow = defs_workflow_get(R->conn, name, version, &got, &rc);
    return s->workflow;
}

static void fail_workflow_reason(runner_t *R, sess_t *s, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail_workflow_reason(runner_t *R, sess_t *s, const char *reason, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag("info", "session %s: workflow failed%s%s: %s", s->id, reason ? ": " : "", reason ? reason : "", msg);
    put(R, s, reason ? event_failed(1, msg, reason, -1) : event_workflow_failed(msg));
}

#define fail_workflow(R, s, ...) fail_workflow_reason(R, s, NULL, __VA_ARGS__)

void runner_fail_workflow(runner_t *R, sess_t *s, const char *reason, const char *msg)
{
    fail_workflow_reason(R, s, reason, "%s", msg);
}

static const json_t *current_step(const json_t *doc, const char *phase, int step)
{
    size_t i;
    json_t *ph;
    json_array_foreach(json_object_get(doc, "phases"), i, ph) {
        if (!strcmp(json_string_value(json_object_get(ph, "name")), phase))
            return json_array_get(json_object_get(ph, "steps"), (size_t)step);
    }
    return NULL;
}

/* Start the next attempt of the agent step (announced with agent:started on the first). */
static void start_agent_step(runner_t *R, sess_t *s, const session_view *v, const json_t *step)
{
    char err[512];
    const char *name = json_string_value(json_object_get(step, "agent"));
    int rc;
    json_t *agent = defs_agent_get(R->conn, name, &rc);
    if (!agent) {
        give_up(R, s, v, "agent_missing", "agent %s does not exist", name);
        return;
    }
    if (over_budget(agent, v)) {
        json_decref(agent);
        give_up(R, s, v, "cost_budget", "cost budget of agent %s reached ($%.6f spent)", name, v->cost_usd);
        return;
    }
    buf_t prompt;
    buf_init(&prompt, 1 << 20);
    /* A skill the step invokes heads the prompt, its params rendered from the state. */
    const json_t *skill = json_object_get(step, "skill");
    json_t *params = NULL;
    int bad = 0;
    if (skill) {
        const json_t *tpl = json_object_get(skill, "params");
        bad = tpl ? workflow_render_json(tpl, v->state, v->input, R->workflow_state_max, &params, err, sizeof err) : 0;
        if (!bad)
            bad = agent_render_skill(agent, json_string_value(json_object_get(skill, "name")), params, &prompt, err,
                                     sizeof err) ||
                  buf_puts(&prompt, "\n\n");
        json_decref(params);
        if (bad) {
            buf_free(&prompt);
            json_decref(agent);
            fail_workflow_reason(R, s, bad == WORKFLOW_ETOOLARGE ? WORKFLOW_REASON_TOO_LARGE : NULL, "step %s[%d] skill: %s",
                                 v->phase, v->step, err);
            return;
        }
    }
    if (workflow_render(json_string_value(json_object_get(step, "prompt")), v->state, v->input,
                        &prompt, err, sizeof err)) {
        buf_free(&prompt);
        json_decref(agent);
        fail_workflow(R, s, "step %s[%d] prompt: %s", v->phase, v->step, err);
        return;
    }
    json_t *schema = json_object_get(step, "outputSchema");
    if (schema) buf_puts(&prompt, "\n\nAnswer with only a JSON value, no other text.");
    /* The prompt, then the step's conversation so far (its tool turns). */
    json_t *messages = json_pack("[{s:s, s:s}]", "role", "user", "content", prompt.p ? prompt.p : "");
    buf_free(&prompt);
    json_t *turns = history(v);
    json_array_extend(messages, turns);
    json_decref(turns);
    /* Its skills go in its system prompt, its MCP servers' tools are offered. */
    json_t *shown = tools_agent(R, s, agent, 1);
    if (!shown) {       /* a server is starting: its timer looks again */
        json_decref(messages);
        json_decref(agent);
        return;
    }
    if (v->attempts == 0 && v->tool_turns == 0)
        put(R, s, event_agent_started(name, json_object_get(agent, "model"), v->step));
    json_decref(s->agent);
    s->agent = agent;
    start(R, s, v, shown, messages, 1);
    json_decref(shown);
}

void runner_agent_step(runner_t *R, sess_t *s, const session_view *v, const json_t *step)
{
    if (s->rq || under_way(R, s, v)) return;
    if (session_view_tools_answered(v) && !v->retry_at && s->agent && v->tool_turns >= max_turns(s->agent)) {
        put(R, s, event_tool_loop_stopped("maxTurns", v->tool_turns));
        fail_workflow(R, s, "agent step %s[%d]: the model asked for tools %d times without an answer (limits.maxTurns)",
                      v->phase, v->step, v->tool_turns);
        return;
    }
    if (!v->retry_at || retry_due(s, v)) start_agent_step(R, s, v, step);
}

static void drive_workflow(runner_t *R, sess_t *s, const session_view *v)
{
    json_t *doc = load_workflow(R, s, v);
    if (!doc) {
        fail_workflow(R, s, "its workflow version is gone");
        return;
    }
    workflow_pos pos;
    workflow_next_t nx;
    session_view_pos(v, &pos);
    workflow_next(doc, &pos, v->state, v->input, &nx);
    switch (nx.kind) {
    case NEXT_START: {
        const char *first = json_string_value(json_object_get(doc, "initialPhase"));
        if (!first) first = json_string_value(json_object_get(json_array_get(json_object_get(doc, "phases"), 0), "name"));
        put(R, s, event_workflow_started(json_object_get(v->created, PK_WORKFLOW), json_object_get(v->created, PK_VERSION)));
        put(R, s, event_phase_entered(first));
        diag("info", "session %s: workflow started", s->id);
        break;
    }
    case NEXT_ENTER_PHASE: put(R, s, event_phase_entered(nx.phase)); break;
    case NEXT_TRANSITION: {
        put(R, s, event_phase_exited(v->phase, nx.phase));
        put(R, s, event_phase_entered(nx.phase));
        break;
    }
    case NEXT_COMPLETE:
        put(R, s, event_workflow_completed(v->state));
        diag("info", "session %s: workflow completed", s->id);
        break;
    case NEXT_FAIL: fail_workflow(R, s, "%s", nx.error); break;
    case NEXT_STEP:
        if (v->steps >= workflow_max_steps(doc))
            give_up(R, s, v, "step_limit", "the workflow executed its %d steps (maxSteps) and stops",
                    workflow_max_steps(doc));
        else
            steps_run(R, s, v, nx.def, nx.phase, nx.step, 0);
        break;
    case NEXT_WAIT: {
        if (!pos.step_open || !v->phase[0]) break;
        const json_t *step = current_step(doc, v->phase, v->step);
        if (step) steps_run(R, s, v, step, v->phase, v->step, 1);
        break;
    }
    }
}

/* ---- the entry point ---------------------------------------------------------------------- */

/* Make sure this process holds s's lease (taking it, or renewing it when due).
 * Returns 1 if held; 0 if another runner holds it (a timer is set for when its
 * lease runs out) or the database is busy (a timer is set to try again). */
static int hold(runner_t *R, sess_t *s, int64_t now)
{
    if (s->held && now < s->lease_renew_ms) return 1;
    if (s->held && now >= s->lease_expires_ms) {
        /* This process was away (paused, starved) past its lease: another runner
         * may have taken the session and even let it go since. What it had in
         * flight is stale; the log says what to do now. */
        diag("info", "session %s: lease expired while this runner was away", s->id);
        runner_lost(R, s);
    }
    int64_t expires = 0;
    int held = lease_acquire(R->conn, s->id, &R->me, R->lease_ms, &expires);
    if (held == 1) {
        s->held = 1;
        s->other_until = 0;
        s->lease_renew_ms = now + R->lease_ms / 3;
        s->lease_expires_ms = expires;
        return 1;
    }
    if (held == 0) {
        if (s->held || s->rq) diag("info", "session %s: lease lost", s->id);
        runner_lost(R, s);
        s->other_until = expires;
        s->timer_ms = expires + 50;
        return 0;
    }
    diag("info", "session %s: lease: %s", s->id, errs_str(held));
    s->timer_ms = now + 1000;
    return 0;
}

/* 1 if s's log has not moved since this process last read or wrote it (so a
 * drive would decide what it decided then). */
static int unchanged(runner_t *R, sess_t *s)
{
    char path[SSTORE_ID_MAX + 16];
    log_info info;
    if (!s->known_seq) return 0;
    snprintf(path, sizeof path, "sessions/%s", s->id);
    return log_head(R->conn, path, &info) == 0 && info.tail.seq == s->known_seq;
}

void runner_drive(runner_t *R, sess_t *s)
{
    int due = s->due, was_held = s->held;
    s->dirty = s->due = 0;
    if (R->stopping) return;
    if (s->nout) {      /* decide once what was decided is committed */
        s->dirty = 1;
        return;
    }
    int64_t now = timefmt_now_ms();
    /* Another runner drives it: its changes are not ours to act on until its lease
     * runs out (our timer). */
    if (!due && !s->held && s->other_until && now < s->other_until) return;
    if (due && s->timer_ms && now < s->timer_ms) due = 0;
    if (!hold(R, s, now)) return;
    if (!due && was_held && unchanged(R, s)) return;
    if (s->timer_ms && now >= s->timer_ms) s->timer_ms = 0;

    session_view v;
    offset_t none = {0, 0}, pos;
    session_view_init(&v);
    int rc = sstore_view(R->conn, s->id, 0, none, &v, &pos);
    if (rc) {
        session_view_free(&v);
        if (rc == LOG_ENOTFOUND || rc == LOG_EGONE) {
            runner_forget(R, s);
        } else {
            diag("info", "session %s: cannot read: %s", s->id, errs_str(rc));
            s->timer_ms = now + 1000;
        }
        return;
    }
    s->known_seq = pos.seq;
    if (session_view_finished(&v)) {
        session_view_free(&v);
        runner_forget(R, s);
        return;
    }
    if (R->session_events_max && v.events >= (uint64_t)R->session_events_max) {
        /* The session's log is as long as it may get: it ends here. */
        char msg[160];
        snprintf(msg, sizeof msg, "the session reached its limit of %lld events (DSTREAM_SESSION_EVENTS_MAX)",
                 (long long)R->session_events_max);
        if (s->rq) request_free(R, s->rq);
        if (v.request[0]) put(R, s, event_request_cancelled(v.request, "failed", msg));
        if (v.is_workflow) put(R, s, event_failed(1, msg, "event_limit", v.attempts));
        else put(R, s, event_session_cancelled(msg));
        s->timer_ms = 0;
        diag("info", "session %s: %s", s->id, msg);
    } else if (v.cancel_requested) {
        if (s->rq) {
            request_flush(R, s->rq);
            request_free(R, s->rq);
        }
        if (v.request[0])
            put(R, s, event_request_cancelled(v.request, "cancelled", NULL));
        /* Tool calls under way are abandoned (their servers are told); what they
         * did is not known, and nothing runs them again in a cancelled session. */
        if (s->calls) diag("info", "session %s: its tool calls under way are abandoned", s->id);
        tools_forget(R, s);
        put(R, s, event_session_cancelled("cancel requested"));
        s->timer_ms = 0;
        diag("info", "session %s: cancelled", s->id);
    } else if (v.is_workflow) {
        drive_workflow(R, s, &v);
    } else {
        drive_chat(R, s, &v);
    }
    session_view_free(&v);
    /* Nothing in flight and nothing to write: the lease goes back (a timer, if
     * any, takes it again); nothing at all: forget the session until it changes. */
    if (!s->rq && !s->nout && !s->calls) {
        if (s->held) lease_release(R->conn, s->id, &R->me);
        s->held = 0;
        if (!s->timer_ms) runner_forget(R, s);
    }
}

/* ---- a request ended ------------------------------------------------------------------------- */

/* Strip a ```json fence a model may wrap its JSON in. */
static void unfence(const char **p, size_t *len)
{
    const char *s = *p, *e = s + *len;
    while (s < e && strchr(" \t\r\n", *s)) s++;
    while (e > s && strchr(" \t\r\n", e[-1])) e--;
    if (e - s >= 6 && !strncmp(s, "```", 3) && !strncmp(e - 3, "```", 3)) {
        const char *nl = memchr(s, '\n', (size_t)(e - s));
        if (nl && nl < e - 3) {
            s = nl + 1;
            e -= 3;
        }
    }
    *p = s;
    *len = (size_t)(e - s);
}

/* A workflow agent step's reply: its output (text, or JSON checked against the
 * step's outputSchema), the state update and the step's completion, appended to
 * ev. Returns 1, or 0 after appending workflow:failed to ev instead (or nothing,
 * if the session's view cannot be read: the next drive retries the step). */
static int step_output(runner_t *R, sess_t *s, rq_t *q, json_t *usage, double cost, sstore_event *ev,
                       size_t *n)
{
    session_view v;
    offset_t none = {0, 0};
    char err[512] = "";
    json_t *output = NULL, *state = NULL;
    int ok = 0;
    session_view_init(&v);
    if (sstore_view(R->conn, s->id, 0, none, &v, NULL)) goto out;
    const json_t *step = s->workflow && v.phase[0] ? current_step(s->workflow, v.phase, v.step) : NULL;
    if (!step) goto out;
    json_t *schema = json_object_get(step, "outputSchema");
    int rc = 0;
    if (schema) {
        const char *t = q->full.p ? q->full.p : "";
        size_t len = q->full.len;
        unfence(&t, &len);
        output = json_loadb(t, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (!output) snprintf(err, sizeof err, "the agent's reply is not JSON");
        else if (workflow_check_schema(schema, output, err, sizeof err)) {
            char tmp[512];
            snprintf(tmp, sizeof tmp, "the agent's reply does not match outputSchema: %s", err);
            snprintf(err, sizeof err, "%s", tmp);
        }
    } else {
        output = json_stringn(q->full.p ? q->full.p : "", q->full.len);
    }
    if (!err[0]) {
        state = json_deep_copy(v.state);
        rc = workflow_apply_update(state, json_object_get(step, "update"), output, NULL, v.input, R->workflow_state_max,
                                   err, sizeof err);
        if (rc) {
            char tmp[512];
            snprintf(tmp, sizeof tmp, "step update: %s", err);
            snprintf(err, sizeof err, "%s", tmp);
        }
    }
    if (err[0]) {
        const char *reason = rc == WORKFLOW_ETOOLARGE ? WORKFLOW_REASON_TOO_LARGE : NULL;
        diag("info", "session %s: workflow failed%s%s: %s", s->id, reason ? ": " : "", reason ? reason : "", err);
        ev[(*n)++] = reason ? event_failed(1, err, reason, -1) : event_workflow_failed(err);
        goto out;
    }
    ev[(*n)++] = event_agent_completed(json_object_get(step, "agent"), output, timefmt_now_ms() - q->started_ms, usage,
                                       cost);
    ev[(*n)++] = event_state_updated(json_incref(state));
    ev[(*n)++] = event_step_completed(v.phase, v.step, NULL);
    ok = 1;
out:
    json_decref(output);
    json_decref(state);
    session_view_free(&v);
    return ok;
}

/* How q ended, for lib/retry (when it did not complete). */
static void classify(const rq_t *q, CURLcode result, long status, retry_failure *f)
{
    memset(f, 0, sizeof *f);
    f->should_retry = q->should_retry;
    f->retry_after = q->retry_after[0] ? q->retry_after : NULL;
    f->retry_after_ms = q->retry_after_ms;
    if (q->egress.refused) {
        f->kind = RETRY_REFUSED;   /* the address policy said why in q->egress.error */
    } else if (result != CURLE_OK && status != 200 && status != 0) {
        f->kind = RETRY_HTTP;
        f->status = status;
    } else if (result != CURLE_OK) {
        f->kind = RETRY_TRANSPORT;
    } else if (status != 200) {
        f->kind = RETRY_HTTP;
        f->status = status;
    } else if (q->malformed) {
        f->kind = RETRY_MALFORMED;
    } else if (q->stream_error) {
        f->kind = RETRY_STREAM_ERROR;
        f->error_type = q->error_type[0] ? q->error_type : NULL;
    } else {
        f->kind = RETRY_CUT;
    }
}

void runner_request_finished(runner_t *R, rq_t *q, CURLcode result)
{
    sess_t *s = q->s;
    long status = q->status;
    if (!status) curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &status);
    request_flush(R, q);
    record_finished(R, q, (int)result, status);
    if (q->full_over) {
        /* A workflow step's reply longer than its state may hold: the step fails at
         * once (another attempt would say the same). */
        char msg[200];
        snprintf(msg, sizeof msg, "the agent's reply is over %zu bytes (the limit on a workflow's state)", q->full.max);
        put(R, s, event_request_cancelled(q->id, "failed", msg));
        request_free(R, q);
        fail_workflow_reason(R, s, WORKFLOW_REASON_TOO_LARGE, "%s", msg);
        return;
    }
    /* Complete only when the provider's stream ended with its terminal event. */
    int complete = result == CURLE_OK && status == 200 && !q->stream_error && !q->malformed && q->done &&
                   provider_finish(q->parser) == 0;
    if (!complete) {
        retry_failure f;
        classify(q, result, status, &f);
        if (f.kind == RETRY_TRANSPORT) snprintf(q->error, sizeof q->error, "%s", curl_easy_strerror(result));
        else if (f.kind == RETRY_HTTP) snprintf(q->error, sizeof q->error, "HTTP %ld", status);
        else if (f.kind == RETRY_CUT) snprintf(q->error, sizeof q->error, "the stream ended without its terminal event");
        else if (f.kind == RETRY_REFUSED) snprintf(q->error, sizeof q->error, "%s", q->egress.error);
        char id[72], error[256], retry_after[96], etype[64];
        snprintf(id, sizeof id, "%s", q->id);
        snprintf(error, sizeof error, "%s", q->error);
        /* f points into q: keep what it needs past request_free. */
        snprintf(retry_after, sizeof retry_after, "%s", q->retry_after);
        snprintf(etype, sizeof etype, "%s", q->error_type);
        if (f.retry_after) f.retry_after = retry_after;
        if (f.error_type) f.error_type = etype;
        request_free(R, q);
        /* The budgets come from the log (they survive restarts): read it, with the
         * deltas just flushed or not, for the counters do not depend on them. */
        session_view v;
        offset_t none = {0, 0};
        session_view_init(&v);
        if (sstore_view(R->conn, s->id, 0, none, &v, NULL) == 0) retry_or_fail(R, s, &v, id, &f, error);
        else s->dirty = 1;  /* the drive finds the request cut off and retries it */
        session_view_free(&v);
        return;
    }
    double cost = cost_usd(R->pricing, q->model, q->in_tok, q->out_tok);
    json_t *usage = event_usage(q->in_tok, q->out_tok);
    sstore_event ev[SSTORE_EVENTS_MAX];
    size_t n = 0;
    /* Tool calls (of a chat reply or an agent step) are recorded here and run once
     * they are in the log (tools.c); the reply or step goes on with their results. */
    int calls = json_array_size(q->tool_calls) > 0;
    tools_record(R, s, q);
    ev[n++] = event_request_ended(q->id, q->stop, usage, cost);
    diag("info", "session %s: request %s ended (%s, %lld in / %lld out, $%.6f)", s->id, q->id, q->stop,
                 (long long)q->in_tok, (long long)q->out_tok, cost);
    /* A workflow step's last turn adds its completion, or workflow:failed, to the
     * same commit. */
    if (q->step_agent && !calls) step_output(R, s, q, usage, cost, ev, &n);
    json_decref(usage);
    emit(R, s, ev, n);
    /* A reply that asked for tools goes on once their results are in (drive_chat). */
    request_free(R, q);
}

void runner_shutdown(runner_t *R)
{
    /* Each request in flight is closed and rescheduled at once (on the restart
     * budget), so that the next runner picks it up without waiting. */
    for (sess_t *s = R->sessions; s; s = s->next) {
        if (!s->rq) continue;
        rq_t *q = s->rq;
        char id[72];
        snprintf(id, sizeof id, "%s", q->id);
        request_flush(R, q);
        request_free(R, q);
        session_view v;
        offset_t none = {0, 0};
        session_view_init(&v);
        if (sstore_view(R->conn, s->id, 0, none, &v, NULL) == 0) {
            retry_failure f = {RETRY_RESTART, 0, NULL, -1, NULL, -1};
            put(R, s, event_request_cancelled(id, "restart", NULL));
            diag("info", "session %s: request %s cancelled (restart)", s->id, id);
            retry_or_fail(R, s, &v, id, &f, "cut off by a runner restart");
        }
        session_view_free(&v);
    }
    runner_commit(R);
}

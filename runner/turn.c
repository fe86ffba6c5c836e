/* turn: one turn of a session's conversation with its provider: a request
 * started, cut, retried or failed, and its end turned into events.
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
 * scheduled (retryAt, a checkpoint's expiry: timers), or a final event.
 *
 * The driver (driver.c) calls in here for a chat session's turn and for a
 * workflow's agent step (through runner/steps.c); the loop, when a request ends. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/diag.h"
#include "../lib/agent.h"
#include "../lib/compact.h"
#include "../lib/cost.h"
#include "../lib/defs.h"
#include "../lib/event.h"
#include "../lib/lease.h"
#include "../lib/provcfg.h"
#include "../lib/rturn.h"
#include "../lib/timefmt.h"
#include "../lib/workflow.h"
#include "turn.h"
#include "outbox.h"
#include "request.h"
#include "stats.h"
#include "tap.h"
#include "tools.h"

/* ---- events ---------------------------------------------------------------------------- */

/* Queue one event built by lib/event (its payload becomes the outbox's). */
static void put(runner_t *R, sess_t *s, sstore_event e)
{
    outbox_emit_as(R, s, e.type, e.payload, e.actor);
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

/* The request in progress failed for good (or could not even start): the session
 * ends failed, with error saying why and reason naming the rule (lib/retry's
 * names, or a limit's). A workflow fails; a chat's pending reply fails and its
 * next user message may try again. */
void turn_give_up(runner_t *R, sess_t *s, const session_view *v, const char *reason, const char *fmt, ...)
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

/* A new request, answered live or from a recording (tap.c decides and sets its
 * tap), made s's request in flight: NULL if it cannot start (why in
 * R->start_error, if the configuration or a playback miss says). */
static rq_t *open_request(runner_t *R, sess_t *s, const json_t *agent, const json_t *messages, const char *id,
                          int attempt, int step_agent)
{
    rq_t *q = request_new(R, s, agent, messages, id, attempt, step_agent);
    if (!q) return NULL;
    int rec = tap_start(R, s, q);
    if (rec < 0) {
        request_free(R, q);
        return NULL;
    }
    request_send(R, q, rec == 0);
    return q;
}

/* Start attempt v->attempts + 1 of the request in progress under a new id. */
static int start(runner_t *R, sess_t *s, const session_view *v, const json_t *agent, json_t *messages,
                 int step_agent)
{
    char id[72];
    int attempt = v->attempts + 1;
    char why[256];
    const char *limit = rturn_limit(v, R->session_requests_max, R->message_requests_max, why, sizeof why);
    if (limit) {
        json_decref(messages);
        turn_give_up(R, s, v, limit, "%s", why);
        return -1;
    }
    /* After a failover the request goes to the fallback the log names. */
    json_t *routed = rturn_route_agent(agent, v->route);
    if (!routed) {
        json_decref(messages);
        turn_give_up(R, s, v, "refused", "the agent has no fallback %d any more (its document changed)", v->route);
        return -1;
    }
    new_request_id(id, sizeof id);
    /* A retry after a cut may continue the text its attempt committed: the history
     * ends with that text as the assistant's (lib/rturn). */
    const provcfg_provider *pp = provcfg_find(R->providers, json_string_value(json_object_get(routed, "provider")));
    rturn_cont cont;
    rturn_continuation(v, pp && pp->cont != PROVIDER_CONT_OFF, tap_records(R, s), &cont);
    if (cont.continued) json_array_append_new(messages, rturn_prefill(&cont));
    rq_t *q = open_request(R, s, routed, messages, id, attempt, step_agent);
    json_decref(messages);
    if (!q && R->start_error[0]) {
        /* The operator's configuration refuses it (lib/provcfg): final, said once. */
        json_decref(routed);
        turn_give_up(R, s, v, R->start_reason[0] ? R->start_reason : "refused", "%s", R->start_error);
        return -1;
    }
    if (!q) {
        const char *prov = json_string_value(json_object_get(routed, "provider"));
        turn_give_up(R, s, v, "start", "cannot start a request to provider %s", prov ? prov : "?");
        json_decref(routed);
        return -1;
    }
    json_decref(routed);
    sstore_event e = event_request_started(id, q->target.p->name, q->model, attempt);
    q->continued = cont.continued;
    if (cont.continued) {
        /* A workflow step's output is the whole reply: the text kept, then the rest. */
        if (step_agent && buf_append(&q->full, cont.text, cont.bytes)) q->full_over = 1;
        event_started_continued(&e, cont.from, cont.chars, cont.trimmed);
        diag("info", "session %s: request %s continues %s from its %lld character(s)", s->id, id, cont.from,
             (long long)cont.chars);
    } else if (cont.reason) {
        event_started_restarted(&e, cont.reason);
    }
    put(R, s, e);
    diag("info", "session %s: request %s started (%s, attempt %d)", s->id, id, q->model, attempt);
    return 0;
}

/* Cut the request in flight (ours) with reason, as an event. */
static void cut(runner_t *R, sess_t *s, const char *reason)
{
    rq_t *q = s->rq;
    if (!q) return;
    request_flush(R, q);
    sstore_event e = event_request_cancelled(q->id, reason, NULL);
    put(R, s, q->compaction ? event_compaction(e, NULL) : e);
    diag("info", "session %s: request %s cancelled (%s)", s->id, q->id, reason);
    request_free(R, q);
}

/* The request in progress goes on with route `next` of the agent (lib/rturn
 * rturn_failover): its attempt id is closed (provider:request_retried, reason
 * failover, due now) and provider:failover names the pair that failed and the one
 * that serves it from now, in the same commit; the next attempt goes there. */
static void failover(runner_t *R, sess_t *s, const session_view *v, const char *id, const retry_failure *f,
                     const retry_decision *d, const char *error, int next)
{
    const char *fp = "?", *fm = "?", *tp = "?", *tm = "?";
    rturn_route_pair(s->agent, v->route, &fp, &fm);
    rturn_route_pair(s->agent, next, &tp, &tm);
    int64_t now = timefmt_now_ms();
    int status = f->kind == RETRY_HTTP ? (int)f->status : 0;
    runner_stats_failover(fp, fm, tp, tm);
    put(R, s, event_request_retried(id, v->attempts + 1, "failover", d->reason, status, error, 0, now));
    put(R, s, event_failover(id, fp, fm, tp, tm, next - 1, d->reason, status, error));
    diag("info", "session %s: request %s: %s (%s) on %s/%s: failing over to %s/%s", s->id, id, error, d->reason, fp,
         fm, tp, tm);
    s->timer_ms = now;
}

/* Request id (of the request in progress) did not complete, for the reason in f:
 * fail over to the agent's next fallback (lib/rturn says when), schedule the next
 * attempt (provider:request_retried, due at retryAt) or, if the policy or its
 * budget says no, end it (request_cancelled, failed) and give up. */
static void retry_or_fail(runner_t *R, sess_t *s, const session_view *v, const char *id,
                          const retry_failure *f, const char *error, const char *cut_in, int continued)
{
    retry_decision d;
    int64_t now = timefmt_now_ms();
    retry_decide(f, v->failures, v->restarts, &R->retry, now, &d);
    /* A continuation refused as a request: asked again from the start, once (lib/rturn). */
    if (rturn_retry_refused(&d, continued, v->failures, R->retry.provider_retries)) {
        d.retry = 1;
        d.delay_ms = retry_delay_ms(v->failures + 1, NULL, now, R->retry.base_ms, R->retry.max_ms);
    }
    /* A compaction's summarization request goes to its own provider: it does not fail over. */
    int next = v->compact_started ? 0 : rturn_failover(s->agent, v, f, &d);
    if (next) {
        failover(R, s, v, id, f, &d, error, next);
        return;
    }
    if (d.retry) {
        runner_stats_retry(f);
        sstore_event e = event_request_retried(id, v->attempts + 1, f->kind == RETRY_RESTART ? "restart" : "failed",
                                               d.reason, (int)(f->kind == RETRY_HTTP ? f->status : 0), error,
                                               d.delay_ms, now + d.delay_ms);
        if (cut_in) event_retried_cut_in(&e, cut_in);
        put(R, s, v->compact_started ? event_compaction(e, NULL) : e);
        diag("info", "session %s: request %s: %s (%s); attempt %d in %lld ms", s->id, id, error, d.reason,
                     v->attempts + 1, (long long)d.delay_ms);
        s->timer_ms = now + d.delay_ms;
        return;
    }
    if (f->kind != RETRY_RESTART) {
        sstore_event e = event_request_cancelled(id, "failed", error);
        put(R, s, v->compact_started ? event_compaction(e, NULL) : e);
    }
    /* After failovers, the error says it was the last provider that failed too. */
    char on[400] = "";
    const char *rp, *rm;
    if (v->route && s->agent && rturn_route_pair(s->agent, v->route, &rp, &rm) == 0)
        snprintf(on, sizeof on, " on %s/%s, the agent's last fallback: every provider failed", rp, rm);
    if (d.exhausted)
        turn_give_up(R, s, v, d.budget == RETRY_BUDGET_RESTART ? "restarts" : "retries",
                     "%s (%s); gave up after %d attempt(s), %d provider error(s) and %d restart(s)%s", error, d.reason,
                     v->attempts, v->failures + (f->kind != RETRY_RESTART), v->restarts + (f->kind == RETRY_RESTART),
                     on);
    else
        turn_give_up(R, s, v, d.reason, "%s (%s: not retried)%s", error, d.reason, on);
}

/* The log says request v->request is in flight, and this process (which holds the
 * lease) does not have it: its runner is gone. Close it and retry on the restart
 * budget. */
static void restart_cut(runner_t *R, sess_t *s, const session_view *v)
{
    retry_failure f = {RETRY_RESTART, 0, NULL, -1, NULL, -1};
    sstore_event e = event_request_cancelled(v->request, "restart", NULL);
    put(R, s, v->compact_started ? event_compaction(e, NULL) : e);
    diag("info", "session %s: request %s was cut off by a restart", s->id, v->request);
    retry_or_fail(R, s, v, v->request, &f, "cut off by a runner restart", NULL, 0);
}

/* A retry is scheduled (v->retry_at): 1 if it is due now, else 0 with a timer set. */
static int retry_due(sess_t *s, const session_view *v)
{
    if (timefmt_now_ms() >= v->retry_at) return 1;
    s->timer_ms = v->retry_at;
    return 0;
}

/* ---- context compaction (lib/compact) -------------------------------------------------------- */

/* Start the summarization request of a compaction for reason, cutting v's history
 * at index cut: provider:request_started with purpose "compaction" (its attempts
 * its own, lib/session). before: the estimate of the request it comes before;
 * fixed: of that request's system prompt and tools without a summary. */
static void compaction_start(runner_t *R, sess_t *s, const session_view *v, const json_t *agent, const char *reason,
                             ssize_t cut, int64_t before, int64_t fixed)
{
    char why[256], id[72];
    const char *limit = rturn_limit(v, R->session_requests_max, R->message_requests_max, why, sizeof why);
    if (limit) {
        turn_give_up(R, s, v, limit, "%s", why);
        return;
    }
    const provcfg_t *c = R->providers;
    json_t *sagent = compact_agent(agent, c->compact_provider[0] ? c->compact_provider : NULL,
                                   c->compact_provider[0] ? c->compact_model : NULL);
    /* The transcript within three quarters of the model's window, where one is known
     * (an overflow's error said it, or the operator's models): the rest of the
     * summarization request and its reply fit beside it. */
    const char *sp = json_string_value(json_object_get(sagent, "provider"));
    const char *sm = json_string_value(json_object_get(sagent, "model"));
    int64_t win = provcfg_context_tokens(c, sp, sm);
    if (v->compact_window > 0 && !c->compact_provider[0] && (!win || v->compact_window < win)) win = v->compact_window;
    size_t max_bytes = win > 0 ? (size_t)(win * 3 / 4 * COMPACT_BYTES_PER_TOKEN) : 0;
    json_t *msgs = compact_request_messages(v->messages, (size_t)cut, json_string_value(v->summary), max_bytes);
    json_t *kept = json_array();
    for (size_t i = (size_t)cut; i < json_array_size(v->messages); i++)
        json_array_append(kept, json_array_get(v->messages, i));
    int attempt = v->compact_started ? v->attempts + 1 : 1;
    new_request_id(id, sizeof id);
    rq_t *q = open_request(R, s, sagent, msgs, id, attempt, 0);
    json_decref(msgs);
    json_decref(sagent);
    if (!q) {
        json_decref(kept);
        if (R->start_error[0])
            turn_give_up(R, s, v, R->start_reason[0] ? R->start_reason : "refused", "compaction: %s", R->start_error);
        else
            turn_give_up(R, s, v, "start", "cannot start the compaction's request");
        return;
    }
    q->compaction = 1;
    snprintf(q->compact_reason, sizeof q->compact_reason, "%s", reason);
    snprintf(q->compact_upto, sizeof q->compact_upto, "%s",
             json_string_value(json_object_get(json_array_get(v->messages, (size_t)cut), "offset")));
    q->compact_before = before;
    q->compact_kept = fixed + compact_estimate_messages(kept);
    json_decref(kept);
    put(R, s, event_compaction(event_request_started(id, q->target.p->name, q->model, attempt), reason));
    diag("info", "session %s: compaction (%s) started: request %s, history cut at %s, %lld tokens estimated",
         s->id, reason, id, q->compact_upto, (long long)before);
}

/* Before a chat's request (shown: its agent as sent, without a summary): 1 if a
 * compaction comes first (started, or it could not be and the reply failed), 0 to
 * go on. One is due when the log says so (an overflow's retry, compact:requested)
 * or when the request's estimate is over the agent's context budget. */
static int compaction(runner_t *R, sess_t *s, const session_view *v, const json_t *agent, const json_t *shown)
{
    const char *reason = v->compact_reason[0] ? v->compact_reason : v->compact_requested ? "request" : NULL;
    const char *summary = json_string_value(v->summary);
    int64_t window = provcfg_context_tokens(R->providers, json_string_value(json_object_get(agent, "provider")),
                                            json_string_value(json_object_get(agent, "model")));
    int64_t budget = compact_budget(agent, window);
    /* An overflow's error named the model's window: it bounds what is kept, less a
     * tenth for the estimate's error. */
    if (v->compact_window > 0 && (!budget || v->compact_window * 9 / 10 < budget)) budget = v->compact_window * 9 / 10;
    json_t *hist = rturn_history(v);
    int64_t fixed = compact_estimate_agent(shown, NULL);
    int64_t before = compact_estimate_agent(shown, summary) + compact_estimate_messages(hist);
    json_decref(hist);
    if (!reason && budget && before > budget && !(v->compacted_turn & COMPACT_DONE_BUDGET)) reason = "budget";
    if (!reason) return 0;
    /* Keep what fits in half the budget besides the system prompt and tools (the
     * other half is the summary's and the reply's); asked for, or without a
     * budget, the last user message and what followed it. */
    int64_t keep = strcmp(reason, "request") && budget ? budget / 2 - fixed : 0;
    ssize_t cut = compact_cut(v->messages, keep > 0 ? keep : 0);
    if (cut >= 0) {
        compaction_start(R, s, v, agent, reason, cut, before, fixed);
        return 1;
    }
    if (!strcmp(reason, "budget")) return 0;    /* nothing to compact: it goes as it is */
    if (!strcmp(reason, "overflow")) {
        turn_give_up(R, s, v, "context_overflow",
                     "the conversation is over the model's context window and has nothing left to compact "
                     "(%lld tokens estimated)", (long long)before);
        return 1;
    }
    put(R, s, event_session_compacted(NULL, NULL, NULL, 0, before, before, reason, "nothing to compact"));
    return 1;
}

/* q, a compaction's summarization request, ended: its end and session:compacted,
 * in one commit (so a runner killed after it never compacts twice, nor loses the
 * summary). An empty summary compacts nothing (the compaction is over all the same). */
static void compaction_done(runner_t *R, sess_t *s, rq_t *q)
{
    double cost = cost_usd(R->pricing, q->model, q->in_tok, q->out_tok);
    json_t *usage = event_usage(q->in_tok, q->out_tok);
    const char *t = q->full.p ? q->full.p : "";
    size_t len = q->full.len;
    while (len && strchr(" \t\r\n", *t)) t++, len--;
    while (len && strchr(" \t\r\n", t[len - 1])) len--;
    put(R, s, event_compaction(event_request_ended(q->id, q->stop, usage, cost), NULL));
    json_decref(usage);
    /* Only the summary's tokens (estimated) join what stays. */
    char *sum = len ? strndup(t, len) : NULL;
    int64_t after = q->compact_kept + compact_estimate_agent(NULL, sum ? sum : "");
    free(sum);
    if (len)
        put(R, s, event_session_compacted(q->id, q->compact_upto, t, len, q->compact_before, after, q->compact_reason,
                                          NULL));
    else
        put(R, s, event_session_compacted(q->id, NULL, NULL, 0, q->compact_before, q->compact_before, q->compact_reason,
                                          "the summary came back empty"));
    diag("info", "session %s: compacted (%s) up to %s: %lld -> %lld tokens estimated, summary %zu bytes", s->id,
         q->compact_reason, q->compact_upto, (long long)q->compact_before, (long long)after, len);
    request_free(R, q);
}

/* A chat's request id was refused as over the model's context window (msg, the
 * provider's words): compacted and retried once (provider:request_retried, cause
 * context_overflow: the compaction comes before the retry), or, if it was compacted
 * after an overflow already, the reply fails. */
static void overflowed(runner_t *R, sess_t *s, const char *id, const char *msg)
{
    session_view v;
    offset_t none = {0, 0};
    session_view_init(&v);
    if (sstore_view(R->conn, s->id, 0, none, &v, NULL)) {
        s->dirty = 1;   /* the drive finds the request cut off and retries it */
        goto out;
    }
    if (v.compacted_turn & COMPACT_DONE_OVERFLOW) {
        put(R, s, event_request_cancelled(id, "failed", msg));
        turn_give_up(R, s, &v, "context_overflow",
                     "the conversation is over the model's context window even after it was compacted: %s", msg);
        goto out;
    }
    int64_t now = timefmt_now_ms();
    put(R, s, event_context_window(event_request_retried(id, v.attempts + 1, "failed", "context_overflow", 400, msg, 0,
                                                         now), compact_overflow_window(msg)));
    diag("info", "session %s: request %s: over the context window (%s): compacting, then attempt %d", s->id, id, msg,
         v.attempts + 1);
    s->timer_ms = now;
out:
    session_view_free(&v);
}

/* ---- budgets ----------------------------------------------------------------------------------- */

/* Before a request of session v (agent: whose limits apply): 1 if its budget lets
 * it start; else 0, after doing what the budget says (lib/rturn rturn_budget_check):
 * end the session as before ("fail"), open a checkpoint ("ask"), wait for it (its
 * expiry as a timer), or end the session after a no or an expiry with
 * session:budget_exceeded and session:cancelled. Everything is in the log: a
 * runner killed while the checkpoint waits leaves it open. */
static int budget_gate(runner_t *R, sess_t *s, const session_view *v, const json_t *agent, const char *name)
{
    rturn_budget b;
    int64_t now = timefmt_now_ms();
    char id[32], msg[300], ts[40];
    rturn_budget_verdict verdict = rturn_budget_check(agent, v, now, &b);
    switch (verdict) {
    case RTURN_BUDGET_OK: return 1;
    case RTURN_BUDGET_WAIT:
        if (b.expires_ms && (!s->timer_ms || b.expires_ms < s->timer_ms)) s->timer_ms = b.expires_ms;
        return 0;
    case RTURN_BUDGET_FAIL:
        diag("info", "session %s: %s of agent %s reached (%g of %g)", s->id, b.limit, name, b.spent, b.max);
        if (v->is_workflow && !strcmp(b.limit, "costBudgetUsd")) {
            turn_give_up(R, s, v, "cost_budget", "cost budget of agent %s reached ($%.6f spent)", name, b.spent);
        } else if (v->is_workflow) {
            turn_give_up(R, s, v, "cost_budget", "limits.%s of agent %s reached (%.0f used of %.0f)", b.limit, name,
                         b.spent, b.max);
        } else {
            snprintf(msg, sizeof msg, "%s budget reached",
                     !strcmp(b.limit, "costBudgetUsd") ? "cost" : !strcmp(b.limit, "maxTokens") ? "token" : "request");
            put(R, s, event_session_cancelled(msg));
        }
        return 0;
    case RTURN_BUDGET_ASK:
        snprintf(id, sizeof id, "budget:%d", b.asks + 1);
        if (!strcmp(b.limit, "costBudgetUsd"))
            snprintf(msg, sizeof msg, "The session reached its cost budget: $%.4f spent of $%.4f (limits.costBudgetUsd). "
                     "Answer with a new limit to go on, or no to end the session.", b.spent, b.max);
        else
            snprintf(msg, sizeof msg, "The session reached its %s budget: %.0f used of %.0f (limits.%s). "
                     "Answer with a new limit to go on, or no to end the session.",
                     !strcmp(b.limit, "maxTokens") ? "token" : "request", b.spent, b.max, b.limit);
        if (b.timeout_ms) {
            timefmt_format(now + b.timeout_ms, ts, sizeof ts);
            s->timer_ms = now + b.timeout_ms;
        }
        put(R, s, event_budget_requested(id, msg, b.limit, b.max, b.spent, b.timeout_ms ? ts : NULL));
        diag("info", "session %s: %s reached (%g of %g): asks (%s)", s->id, b.limit, b.spent, b.max, id);
        return 0;
    case RTURN_BUDGET_EXPIRED:
    case RTURN_BUDGET_REJECTED: {
        int expired = verdict == RTURN_BUDGET_EXPIRED;
        if (expired) put(R, s, event_input_expired(b.id ? b.id : ""));
        put(R, s, event_budget_exceeded(b.id ? b.id : "", b.limit ? b.limit : "", b.max, b.spent,
                                        expired ? "timeout" : "rejected"));
        snprintf(msg, sizeof msg, "budget exceeded (limits.%s): %s", b.limit ? b.limit : "?",
                 expired ? "no answer in time" : "the answer was no");
        put(R, s, event_session_cancelled(msg));
        diag("info", "session %s: %s", s->id, msg);
        return 0;
    }
    }
    return 0;
}

/* ---- chat sessions ------------------------------------------------------------------------ */

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
    switch (rturn_under_way(v)) {
    case RTURN_RESTART_CUT: restart_cut(R, s, v); return 1;
    case RTURN_RUN_CALLS: tools_run(R, s, v); return 1;
    default: return 0;
    }
}

void turn_chat(runner_t *R, sess_t *s, const session_view *v)
{
    switch (rturn_chat(v, s->rq != NULL, timefmt_now_ms())) {
    case RTURN_INTERRUPT: cut(R, s, "interrupted"); return;    /* the commit re-drives: the answer starts */
    case RTURN_RESTART_CUT: restart_cut(R, s, v); return;
    case RTURN_RUN_CALLS: tools_run(R, s, v); return;
    case RTURN_RETRY_LATER: s->timer_ms = v->retry_at; return;
    case RTURN_NEEDS_AGENT: break;
    default: return;
    }
    const char *name = json_string_value(json_object_get(v->created, PK_AGENT));
    json_t *agent = name ? load_agent(R, s, name) : NULL;
    switch (rturn_chat_agent(v, agent)) {
    case RTURN_NO_AGENT:
        turn_give_up(R, s, v, "agent_missing", "agent %s does not exist", name ? name : "?");
        return;
    case RTURN_OVER_BUDGET:
        budget_gate(R, s, v, agent, name);
        return;
    case RTURN_TOOL_LOOP:
        diag("info", "session %s: the model asked for tools %d times in one reply: stopped (maxTurns)", s->id,
             v->tool_turns);
        put(R, s, event_tool_loop_stopped("maxTurns", v->tool_turns));
        return;
    case RTURN_START: break;
    }
    json_t *shown = tools_agent(R, s, agent, 1);
    if (!shown) return;     /* a server is starting: its timer looks again */
    if (compaction(R, s, v, agent, shown)) {
        json_decref(shown);
        return;
    }
    compact_apply_summary(shown, json_string_value(v->summary));
    start(R, s, v, shown, rturn_history(v), 0);
    json_decref(shown);
}

void turn_fail_workflow(runner_t *R, sess_t *s, const char *reason, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag("info", "session %s: workflow failed%s%s: %s", s->id, reason ? ": " : "", reason ? reason : "", msg);
    put(R, s, reason ? event_failed(1, msg, reason, -1) : event_workflow_failed(msg));
}


const json_t *turn_step_def(const json_t *doc, const char *phase, int step)
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
        turn_give_up(R, s, v, "agent_missing", "agent %s does not exist", name);
        return;
    }
    if (!budget_gate(R, s, v, agent, name)) {
        json_decref(agent);
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
            turn_fail_workflow(R, s, bad == WORKFLOW_ETOOLARGE ? WORKFLOW_REASON_TOO_LARGE : NULL,
                               "step %s[%d] skill: %s", v->phase, v->step, err);
            return;
        }
    }
    if (workflow_render(json_string_value(json_object_get(step, "prompt")), v->state, v->input,
                        &prompt, err, sizeof err)) {
        buf_free(&prompt);
        json_decref(agent);
        turn_fail_workflow(R, s, NULL, "step %s[%d] prompt: %s", v->phase, v->step, err);
        return;
    }
    json_t *schema = json_object_get(step, "outputSchema");
    if (schema) buf_puts(&prompt, "\n\nAnswer with only a JSON value, no other text.");
    /* The prompt, then the step's conversation so far (its tool turns). */
    json_t *messages = json_pack("[{s:s, s:s}]", "role", "user", "content", prompt.p ? prompt.p : "");
    buf_free(&prompt);
    json_t *turns = rturn_history(v);
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

void turn_agent_step(runner_t *R, sess_t *s, const session_view *v, const json_t *step)
{
    if (s->rq || under_way(R, s, v)) return;
    if (session_view_tools_answered(v) && !v->retry_at && s->agent && v->tool_turns >= rturn_max_turns(s->agent)) {
        put(R, s, event_tool_loop_stopped("maxTurns", v->tool_turns));
        turn_fail_workflow(R, s, NULL,
                           "agent step %s[%d]: the model asked for tools %d times without an answer (limits.maxTurns)",
                           v->phase, v->step, v->tool_turns);
        return;
    }
    if (!v->retry_at || retry_due(s, v)) start_agent_step(R, s, v, step);
}

/* ---- a request ended ------------------------------------------------------------------------- */

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
    const json_t *step = s->workflow && v.phase[0] ? turn_step_def(s->workflow, v.phase, v.step) : NULL;
    if (!step) goto out;
    json_t *schema = json_object_get(step, "outputSchema");
    int rc = 0;
    if (schema) {
        const char *t = q->full.p ? q->full.p : "";
        size_t len = q->full.len;
        rturn_unfence(&t, &len);
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

void turn_finished(runner_t *R, rq_t *q, CURLcode result)
{
    sess_t *s = q->s;
    long status = q->status;
    if (!status) curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &status);
    request_flush(R, q);
    if (q->tap) q->tap->finished(q, (int)result, status);
    if (q->full_over) {
        /* A workflow step's reply longer than its state may hold: the step fails at
         * once (another attempt would say the same). */
        char msg[200];
        snprintf(msg, sizeof msg, "the agent's reply is over %zu bytes (the limit on a workflow's state)", q->full.max);
        put(R, s, event_request_cancelled(q->id, "failed", msg));
        request_free(R, q);
        turn_fail_workflow(R, s, WORKFLOW_REASON_TOO_LARGE, "%s", msg);
        return;
    }
    rturn_end e = {result == CURLE_OK, curl_easy_strerror(result), status, q->egress.refused, q->egress.error,
                   q->malformed, q->stream_error, q->error_type, q->done, q->should_retry, q->retry_after,
                   q->retry_after_ms};
    /* Complete only when the provider's stream ended with its terminal event. */
    int complete = rturn_complete(&e) && provider_finish(q->parser) == 0;
    char over_msg[256];
    if (!complete && !q->compaction && !q->step_agent &&
        compact_overflow(status, q->errbody.p, q->errbody.len, over_msg, sizeof over_msg)) {
        char id[72];
        snprintf(id, sizeof id, "%s", q->id);
        request_free(R, q);
        overflowed(R, s, id, over_msg);
        return;
    }
    if (complete && q->compaction) {
        compaction_done(R, s, q);
        return;
    }
    if (!complete) {
        retry_failure f;
        rturn_classify(&e, &f, q->error, sizeof q->error);
        char id[72], error[256], retry_after[96], etype[64];
        snprintf(id, sizeof id, "%s", q->id);
        snprintf(error, sizeof error, "%s", q->error);
        /* f points into q: keep what it needs past request_free. */
        snprintf(retry_after, sizeof retry_after, "%s", q->retry_after);
        snprintf(etype, sizeof etype, "%s", q->error_type);
        if (f.retry_after) f.retry_after = retry_after;
        if (f.error_type) f.error_type = etype;
        /* Cut inside a tool-use block (or after one, its call never recorded): the
         * retry cannot continue it (lib/rturn). */
        const char *cut_in = json_array_size(q->tool_calls) || provider_open_calls(q->parser) ? "tool_use" : NULL;
        int continued = q->continued;
        request_free(R, q);
        /* The budgets come from the log (they survive restarts): read it, with the
         * deltas just flushed or not, for the counters do not depend on them. */
        session_view v;
        offset_t none = {0, 0};
        session_view_init(&v);
        if (sstore_view(R->conn, s->id, 0, none, &v, NULL) == 0) retry_or_fail(R, s, &v, id, &f, error, cut_in, continued);
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
    /* A reply that asked for tools goes on once their results are in (turn_chat). */
    request_free(R, q);
}

void turn_restart(runner_t *R, sess_t *s)
{
    rq_t *q = s->rq;
    if (!q) return;
    char id[72];
    snprintf(id, sizeof id, "%s", q->id);
    request_flush(R, q);
    request_free(R, q);
    session_view v;
    offset_t none = {0, 0};
    session_view_init(&v);
    if (sstore_view(R->conn, s->id, 0, none, &v, NULL) == 0) {
        retry_failure f = {RETRY_RESTART, 0, NULL, -1, NULL, -1};
        sstore_event e = event_request_cancelled(id, "restart", NULL);
        put(R, s, v.compact_started ? event_compaction(e, NULL) : e);
        diag("info", "session %s: request %s cancelled (restart)", s->id, id);
        retry_or_fail(R, s, &v, id, &f, "cut off by a runner restart", NULL, 0);
    }
    session_view_free(&v);
}

#include "rturn.h"

#include <stdio.h>
#include <string.h>

#include "timefmt.h"
#include "utf8.h"

rturn_need rturn_under_way(const session_view *v)
{
    if (v->request[0]) return RTURN_RESTART_CUT;
    if (json_array_size(v->open_calls)) return RTURN_RUN_CALLS;
    return RTURN_NOTHING;
}

rturn_need rturn_chat(const session_view *v, int in_flight, int64_t now)
{
    if (in_flight) return session_view_interrupted(v) ? RTURN_INTERRUPT : RTURN_IN_FLIGHT;
    rturn_need n = rturn_under_way(v);
    if (n != RTURN_NOTHING) return n;
    if (!v->retry_at && !session_view_tools_answered(v) && !session_view_needs_reply(v) && !v->compact_requested)
        return RTURN_NOTHING;
    if (v->retry_at && now < v->retry_at) return RTURN_RETRY_LATER;
    return RTURN_NEEDS_AGENT;
}

rturn_go rturn_chat_agent(const session_view *v, const json_t *agent)
{
    if (!agent) return RTURN_NO_AGENT;
    if (rturn_over_budget(agent, v)) return RTURN_OVER_BUDGET;
    /* Only a turn that goes back to the model with tool results counts; a new user
     * message or a retry starts afresh. */
    if (session_view_tools_answered(v) && !v->retry_at && !session_view_needs_reply(v) &&
        v->tool_turns >= rturn_max_turns(agent))
        return RTURN_TOOL_LOOP;
    return RTURN_START;
}

int rturn_over_budget(const json_t *agent, const session_view *v)
{
    rturn_budget b;
    return rturn_budget_check(agent, v, 0, &b) != RTURN_BUDGET_OK;
}

/* Limit k of the session: raised by an answer, else the session's own, else the
 * agent's (NULL: none). */
static const json_t *limit_of(const json_t *agent, const session_view *v, const char *k)
{
    const json_t *l = json_object_get(json_object_get(v->budget, "limits"), k);
    if (!l) l = json_object_get(json_object_get(v->created, PK_LIMITS), k);
    if (!l) l = json_object_get(json_object_get(agent, "limits"), k);
    return l;
}

rturn_budget_verdict rturn_budget_check(const json_t *agent, const session_view *v, int64_t now, rturn_budget *b)
{
    static const char *const names[] = {"costBudgetUsd", "maxTokens", "maxRequests"};
    memset(b, 0, sizeof *b);
    b->asks = (int)json_integer_value(json_object_get(v->budget, "asks"));
    const json_t *t = limit_of(agent, v, "askTimeoutMs");
    b->timeout_ms = json_is_integer(t) && json_integer_value(t) > 0 ? json_integer_value(t) : 0;
    double spent[] = {v->cost_usd, (double)(v->input_tokens + v->output_tokens), (double)v->requests};
    for (size_t i = 0; i < sizeof names / sizeof *names && !b->limit; i++) {
        const json_t *l = limit_of(agent, v, names[i]);
        if (json_is_number(l) && spent[i] >= json_number_value(l)) {
            b->limit = names[i];
            b->max = json_number_value(l);
            b->spent = spent[i];
        }
    }
    const json_t *open = json_object_get(v->budget, "open"), *no = json_object_get(v->budget, "rejected");
    if (open || no) {
        /* What the checkpoint asked about (the answer may have come from a fork's view). */
        const json_t *q = json_object_get(open ? open : no, PK_BUDGET);
        b->id = json_string_value(json_object_get(open ? open : no, PK_INTERACTION_ID));
        b->limit = json_string_value(json_object_get(q, PK_LIMIT));
        b->max = json_number_value(json_object_get(q, PK_MAX));
        b->spent = json_number_value(json_object_get(q, PK_SPENT));
        if (no) return RTURN_BUDGET_REJECTED;
        int64_t at = 0;
        const char *exp = json_string_value(json_object_get(open, PK_EXPIRES_AT));
        if (exp && timefmt_parse(exp, &at) == 0 && now >= at) return RTURN_BUDGET_EXPIRED;
        b->expires_ms = exp ? at : 0;
        return RTURN_BUDGET_WAIT;
    }
    if (!b->limit) return RTURN_BUDGET_OK;
    const json_t *on = limit_of(agent, v, "onExceed");
    return json_is_string(on) && !strcmp(json_string_value(on), "ask") ? RTURN_BUDGET_ASK : RTURN_BUDGET_FAIL;
}

int rturn_max_turns(const json_t *agent)
{
    json_t *t = json_object_get(json_object_get(agent, "limits"), "maxTurns");
    return json_is_integer(t) && json_integer_value(t) > 0 ? (int)json_integer_value(t) : RTURN_MAX_TURNS;
}

const char *rturn_limit(const session_view *v, int64_t session_requests_max, int64_t message_requests_max, char *msg,
                        size_t cap)
{
    if (session_requests_max && v->requests >= session_requests_max) {
        snprintf(msg, cap, "the session made its %lld provider requests (DSTREAM_SESSION_REQUESTS_MAX)",
                 (long long)session_requests_max);
        return "session_request_limit";
    }
    /* A queued message whose turn comes now starts its own count. */
    int64_t msg_requests = !v->request[0] && !v->attempts && !v->retry_at && json_array_size(v->queued)
                               ? 0 : v->message_requests;
    if (!v->is_workflow && message_requests_max && msg_requests >= message_requests_max) {
        snprintf(msg, cap, "the reply made its %lld provider requests (DSTREAM_MESSAGE_REQUESTS_MAX)",
                 (long long)message_requests_max);
        return "message_request_limit";
    }
    return NULL;
}

json_t *rturn_history(const session_view *v)
{
    json_t *out = json_array(), *m;
    size_t i;
    json_array_foreach(v->messages, i, m) {
        const char *reason = json_string_value(json_object_get(m, "reason"));
        const char *rid = json_string_value(json_object_get(m, "requestId"));
        if (reason && (!strcmp(reason, "restart") || !strcmp(reason, "failed"))) continue;
        if (json_is_true(json_object_get(m, "superseded"))) continue;  /* a later message replaced it */
        if (json_is_true(json_object_get(m, "compacted"))) continue;   /* its summary goes instead */
        if (v->request[0] && rid && !strcmp(rid, v->request)) continue;
        json_array_append(out, m);
    }
    if (!v->request[0] && !v->attempts && !v->retry_at && json_array_size(v->queued))
        json_array_append(out, json_array_get(v->queued, 0));
    return out;
}

/* A cut (not a provider's error): a restart, a lost connection, a stream that stopped. */
static int was_cut(const json_t *cut)
{
    const char *reason = json_string_value(json_object_get(cut, PK_REASON));
    const char *cause = json_string_value(json_object_get(cut, PK_CAUSE));
    if (reason && !strcmp(reason, "restart")) return 1;
    return cause && (!strcmp(cause, "connection") || !strcmp(cause, "stream_cut"));
}

void rturn_continuation(const session_view *v, int allowed, int recording, rturn_cont *c)
{
    memset(c, 0, sizeof *c);
    const json_t *cut = v->cut;
    if (!cut || !v->attempts) return;
    const json_t *content = json_object_get(cut, PK_CONTENT);
    const char *t = json_is_string(content) ? json_string_value(content) : "";
    size_t n = json_is_string(content) ? json_string_length(content) : 0;
    const char *in = json_string_value(json_object_get(cut, PK_CUT_IN));
    int thinking = json_is_true(json_object_get(cut, "thinking"));
    if (!n && !thinking && !in) return;    /* it streamed nothing: a retry like any other */
    c->from = json_string_value(json_object_get(cut, PK_REQUEST_ID));
    /* Anthropic refuses a final assistant message that ends in whitespace (Unicode's,
     * not only ASCII's): left off, counted in characters. */
    size_t keep = n, sp;
    int trimmed = 0;
    while (keep && (sp = utf8_space_end(t, keep))) {
        keep -= sp;
        trimmed++;
    }
    const char *cause = json_string_value(json_object_get(cut, PK_CAUSE));
    if (json_is_true(json_object_get(cut, PK_CONTINUED)) && cause && !strcmp(cause, "rejected"))
        c->reason = "refused";
    else if (thinking) c->reason = "thinking";
    else if (in) c->reason = in;
    else if (!was_cut(cut)) c->reason = "error";
    else if (!allowed) c->reason = "off";
    else if (recording) c->reason = "recording";
    else if (!keep) c->reason = "empty";
    if (c->reason || !c->from) return;
    c->continued = 1;
    c->text = t;
    c->bytes = keep;
    c->trimmed = trimmed;
    for (size_t i = 0; i < keep; i++)
        if (((unsigned char)t[i] & 0xc0) != 0x80) c->chars++;
}

int rturn_retry_refused(const retry_decision *d, int continued, int failures_used, int provider_retries)
{
    return continued && !d->retry && !d->exhausted && d->reason && !strcmp(d->reason, "rejected") &&
           failures_used < provider_retries;
}

json_t *rturn_prefill(const rturn_cont *c)
{
    return json_pack("{s:s, s:s%}", "role", "assistant", "content", c->text ? c->text : "", c->bytes);
}

int rturn_complete(const rturn_end *e)
{
    return e->transport_ok && e->status == 200 && !e->stream_error && !e->malformed && e->done;
}

void rturn_classify(const rturn_end *e, retry_failure *f, char *error, size_t cap)
{
    memset(f, 0, sizeof *f);
    f->should_retry = e->should_retry;
    f->retry_after = e->retry_after && e->retry_after[0] ? e->retry_after : NULL;
    f->retry_after_ms = e->retry_after_ms;
    if (e->refused) {
        f->kind = RETRY_REFUSED;
    } else if (!e->transport_ok && e->status != 200 && e->status != 0) {
        f->kind = RETRY_HTTP;   /* an answer came, then the transfer failed: the status says it */
        f->status = e->status;
    } else if (!e->transport_ok) {
        f->kind = RETRY_TRANSPORT;
    } else if (e->status != 200) {
        f->kind = RETRY_HTTP;
        f->status = e->status;
    } else if (e->malformed) {
        f->kind = RETRY_MALFORMED;
    } else if (e->stream_error) {
        f->kind = RETRY_STREAM_ERROR;
        f->error_type = e->error_type && e->error_type[0] ? e->error_type : NULL;
    } else {
        f->kind = RETRY_CUT;
    }
    if (f->kind == RETRY_TRANSPORT)
        snprintf(error, cap, "%s", e->transport_error ? e->transport_error : "transport error");
    else if (f->kind == RETRY_HTTP) snprintf(error, cap, "HTTP %ld", e->status);
    else if (f->kind == RETRY_CUT) snprintf(error, cap, "the stream ended without its terminal event");
    else if (f->kind == RETRY_REFUSED) snprintf(error, cap, "%s", e->refused_error ? e->refused_error : "refused");
}

rturn_call rturn_call_plan(const session_view *v, const json_t *call, int own)
{
    if (json_object_get(call, SESSION_CALL_APPROVAL)) {
        const json_t *answer = v ? json_object_get(v->early, json_string_value(json_object_get(call, PK_CALL_ID))) : NULL;
        return json_is_true(answer) ? RTURN_CALL_TAKE : json_is_false(answer) ? RTURN_CALL_DENY : RTURN_CALL_WAIT;
    }
    if (!own && json_is_true(json_object_get(call, PK_SIDE_EFFECTING))) return RTURN_CALL_CUT;
    if (!json_string_value(json_object_get(call, PK_SERVER)) || !json_string_value(json_object_get(call, PK_TOOL)))
        return RTURN_CALL_NO_TOOL;
    return RTURN_CALL_RUN;
}

void rturn_unfence(const char **p, size_t *len)
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

int rturn_route_pair(const json_t *agent, int route, const char **provider, const char **model)
{
    const json_t *o = route == 0 ? agent
                      : route > 0 ? json_array_get(json_object_get(agent, "fallbacks"), (size_t)route - 1) : NULL;
    *provider = json_string_value(json_object_get(o, "provider"));
    *model = json_string_value(json_object_get(o, "model"));
    return *provider && *model ? 0 : -1;
}

json_t *rturn_route_agent(const json_t *agent, int route)
{
    const char *provider, *model;
    if (rturn_route_pair(agent, route, &provider, &model)) return NULL;
    json_t *a = json_deep_copy(agent);
    if (!a || route == 0) return a;
    json_object_set_new(a, "provider", json_string(provider));
    json_object_set_new(a, "model", json_string(model));
    json_object_del(a, "endpoint");
    return a;
}

int rturn_failover(const json_t *agent, const session_view *v, const retry_failure *f, const retry_decision *d)
{
    const char *p, *m;
    if (!agent || f->kind == RETRY_RESTART || f->kind == RETRY_REFUSED) return 0;
    if (rturn_route_pair(agent, v->route + 1, &p, &m)) return 0;
    int overloaded = d->reason && !strcmp(d->reason, "overloaded");
    int spent = !d->retry && d->exhausted && d->budget == RETRY_BUDGET_PROVIDER;
    return overloaded || spent ? v->route + 1 : 0;
}

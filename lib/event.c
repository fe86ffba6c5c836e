/* event: typed event constructors (see event.h). */
#include "event.h"

#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* Free text (an error, a reason, a prompt) may come from a provider's or an MCP
 * server's answer, or be cut to a byte count: U+FFFD for what is not UTF-8, never
 * a NULL from json_pack (make aborts on one). */
static json_t *text(const char *s)
{
    return utf8_json(s);
}

static sstore_event make(const char *type, json_t *payload)
{
    sstore_event e;
    memset(&e, 0, sizeof e);
    if (!payload) abort();
    e.type = type;
    e.payload = payload;
    e.actor = "runner";
    return e;
}

sstore_event event_tool_called(const char *call_id, const char *name, const json_t *arguments,
                               const char *server, const char *tool, int side_effecting,
                               const char *request_id, const char *phase, int step)
{
    json_t *p = json_pack("{s:s, s:s, s:O, s:b}", PK_CALL_ID, call_id, PK_NAME, name, PK_ARGUMENTS,
                          arguments ? arguments : json_object(), PK_SIDE_EFFECTING, side_effecting);
    if (!arguments) json_decref(json_object_get(p, PK_ARGUMENTS));
    if (server) json_object_set_new(p, PK_SERVER, json_string(server));
    if (tool) json_object_set_new(p, PK_TOOL, json_string(tool));
    if (request_id) json_object_set_new(p, PK_REQUEST_ID, json_string(request_id));
    if (phase) {
        json_object_set_new(p, PK_PHASE, json_string(phase));
        json_object_set_new(p, PK_STEP, json_integer(step));
    }
    return make(EV_TOOL_CALLED, p);
}

sstore_event event_tool_result(const char *call_id, const json_t *result, int is_error, int failed,
                               int64_t duration_ms)
{
    json_t *p = json_pack("{s:s, s:O, s:b, s:b, s:I}", PK_CALL_ID, call_id, PK_RESULT,
                          result ? result : json_null(), PK_IS_ERROR, is_error, PK_FAILED, failed,
                          PK_DURATION_MS, (json_int_t)duration_ms);
    return make(EV_TOOL_RESULT, p);
}

sstore_event event_tool_denied(const char *call_id, const json_t *result)
{
    sstore_event e = event_tool_result(call_id, result, 1, 0, 0);
    json_object_set_new(e.payload, PK_DENIED, json_true());
    return e;
}

sstore_event event_tool_approved(const char *call_id)
{
    return make(EV_TOOL_APPROVED, json_pack("{s:s}", PK_CALL_ID, call_id));
}

sstore_event event_tool_loop_stopped(const char *reason, int turns)
{
    return make(EV_TOOL_LOOP_STOPPED, json_pack("{s:o, s:i}", PK_REASON, text(reason), PK_TURNS, turns));
}

sstore_event event_tool_server_failed(const char *server, const char *error)
{
    return make(EV_TOOL_SERVER_FAILED, json_pack("{s:s, s:o}", PK_SERVER, server, PK_ERROR, text(error)));
}

sstore_event event_step_started(const char *phase, int step, const char *kind, const json_t *name)
{
    json_t *p = json_pack("{s:s, s:i, s:s}", PK_PHASE, phase, PK_STEP, step, PK_KIND, kind);
    if (name) json_object_set(p, PK_NAME, (json_t *)name);
    return make(EV_STEP_STARTED, p);
}

sstore_event event_step_completed(const char *phase, int step, const char *interaction_id)
{
    json_t *p = json_pack("{s:s, s:i}", PK_PHASE, phase, PK_STEP, step);
    if (interaction_id) json_object_set_new(p, PK_INTERACTION_ID, json_string(interaction_id));
    return make(EV_STEP_COMPLETED, p);
}

sstore_event event_step_started_wait(const char *phase, int step, const char *kind, const json_t *name,
                                     const json_t *signals)
{
    sstore_event e = event_step_started(phase, step, kind, name);
    json_object_set_new(e.payload, PK_SIGNALS, json_deep_copy(signals));
    return e;
}

sstore_event event_step_branch(const char *phase, int step, const char *signal, int timeout, const char *to)
{
    sstore_event e = event_step_completed(phase, step, NULL);
    if (signal) json_object_set_new(e.payload, PK_SIGNAL, json_string(signal));
    if (timeout) json_object_set_new(e.payload, PK_TIMEOUT, json_true());
    if (to) json_object_set_new(e.payload, PK_TO, json_string(to));
    return e;
}

sstore_event event_timer_set(const char *phase, int step, int64_t due_ms)
{
    return make(EV_TIMER_SET, json_pack("{s:s, s:i, s:I}", PK_PHASE, phase, PK_STEP, step, PK_DUE_AT,
                                        (json_int_t)due_ms));
}

sstore_event event_timer_fired(const char *phase, int step, int64_t due_ms)
{
    return make(EV_TIMER_FIRED, json_pack("{s:s, s:i, s:I}", PK_PHASE, phase, PK_STEP, step, PK_DUE_AT,
                                          (json_int_t)due_ms));
}

sstore_event event_signal_received(const char *name, const json_t *payload)
{
    sstore_event e = make(EV_SIGNAL_RECEIVED, json_pack("{s:s, s:O}", PK_NAME, name, PK_PAYLOAD,
                                                        payload ? payload : json_null()));
    e.actor = "user";
    return e;
}

sstore_event event_state_updated(json_t *state)
{
    return make(EV_STATE_UPDATED, json_pack("{s:o}", PK_STATE, state));
}

sstore_event event_workflow_failed(const char *error)
{
    return make(EV_WORKFLOW_FAILED, json_pack("{s:o}", PK_ERROR, text(error)));
}

sstore_event event_input_requested(const char *interaction_id, const char *input, const char *prompt,
                                   const json_t *options, const char *expires_at)
{
    json_t *p = json_pack("{s:s, s:s, s:o}", PK_INTERACTION_ID, interaction_id, PK_INPUT, input, PK_PROMPT,
                          text(prompt));
    if (options) json_object_set(p, PK_OPTIONS, (json_t *)options);
    if (expires_at) json_object_set_new(p, PK_EXPIRES_AT, json_string(expires_at));
    return make(EV_INPUT_REQUESTED, p);
}

sstore_event event_approval_requested(const char *call_id, const char *prompt)
{
    return make(EV_INPUT_REQUESTED, json_pack("{s:s, s:o, s:o, s:s}", PK_INTERACTION_ID, call_id, PK_INPUT,
                                              json_string("approval"), PK_PROMPT, text(prompt), PK_CALL_ID, call_id));
}

sstore_event event_budget_requested(const char *interaction_id, const char *prompt, const char *limit, double max,
                                    double spent, const char *expires_at)
{
    sstore_event e = event_input_requested(interaction_id, SESSION_INPUT_BUDGET, prompt, NULL, expires_at);
    json_object_set_new(e.payload, PK_BUDGET, json_pack("{s:s, s:f, s:f}", PK_LIMIT, limit, PK_MAX, max, PK_SPENT, spent));
    return e;
}

sstore_event event_budget_exceeded(const char *interaction_id, const char *limit, double max, double spent,
                                   const char *reason)
{
    return make(EV_SESSION_BUDGET_EXCEEDED, json_pack("{s:s, s:s, s:f, s:f, s:s}", PK_INTERACTION_ID, interaction_id,
                                                      PK_LIMIT, limit, PK_MAX, max, PK_SPENT, spent, PK_REASON, reason));
}

sstore_event event_input_expired(const char *interaction_id)
{
    return make(EV_INPUT_EXPIRED, json_pack("{s:s}", PK_INTERACTION_ID, interaction_id));
}

sstore_event event_input_received(const char *interaction_id, const json_t *response)
{
    sstore_event e = make(EV_INPUT_RECEIVED, json_pack("{s:s, s:O}", PK_INTERACTION_ID, interaction_id,
                                                       PK_RESPONSE, response));
    e.actor = "system";
    return e;
}

sstore_event event_failed(int workflow, const char *error, const char *reason, int attempts)
{
    json_t *p = json_pack("{s:o}", PK_ERROR, text(error));
    if (reason) json_object_set_new(p, PK_REASON, text(reason));
    if (attempts >= 0) json_object_set_new(p, PK_ATTEMPTS, json_integer(attempts));
    return make(workflow ? EV_WORKFLOW_FAILED : EV_REPLY_FAILED, p);
}

sstore_event event_input_answered(const char *interaction_id, const json_t *response, const json_t *reason)
{
    sstore_event e = event_input_received(interaction_id, response);
    if (reason) json_object_set(e.payload, PK_REASON, (json_t *)reason);
    e.actor = "user";
    return e;
}

sstore_event event_session_created(const char *agent, const char *workflow, int version, const json_t *initial_state,
                                   const json_t *input, const json_t *recording)
{
    json_t *p = json_object();
    if (agent) {
        json_object_set_new(p, PK_AGENT, json_string(agent));
    } else {
        json_object_set_new(p, PK_WORKFLOW, json_string(workflow));
        json_object_set_new(p, PK_VERSION, json_integer(version));
        json_object_set_new(p, PK_INITIAL_STATE, initial_state ? json_deep_copy(initial_state) : json_object());
    }
    if (input) json_object_set(p, PK_INPUT, (json_t *)input);
    else json_object_set_new(p, PK_INPUT, json_object());
    if (recording) json_object_set(p, PK_RECORDING, (json_t *)recording);
    sstore_event e = make(EV_SESSION_CREATED, p);
    e.actor = "user";
    return e;
}

json_t *event_recording_setting(const char *mode, const char *timing)
{
    json_t *r = json_object();
    if (mode) json_object_set_new(r, PK_MODE, json_string(mode));
    if (timing) json_object_set_new(r, PK_TIMING, json_string(timing));
    return r;
}

sstore_event event_session_cancelled(const char *reason)
{
    return make(EV_SESSION_CANCELLED, json_pack("{s:s}", PK_REASON, reason));
}

sstore_event event_cancel_requested(void)
{
    sstore_event e = make(EV_CANCEL_REQUESTED, json_object());
    e.actor = "user";
    return e;
}

sstore_event event_stop_requested(void)
{
    sstore_event e = make(EV_STOP_REQUESTED, json_object());
    e.actor = "user";
    return e;
}

sstore_event event_reply_stopped(void)
{
    return make(EV_REPLY_STOPPED, json_object());
}

sstore_event event_message_user(const json_t *content, const char *mode, const char *skill, const char *replaces)
{
    sstore_event e = make(EV_MESSAGE_USER, json_pack("{s:O, s:s}", PK_CONTENT, content, PK_MODE, mode));
    if (skill) json_object_set_new(e.payload, PK_SKILL, json_string(skill));
    if (replaces) json_object_set_new(e.payload, PK_REPLACES, json_string(replaces));
    e.actor = "user";
    return e;
}

sstore_event event_workflow_started(const json_t *workflow, const json_t *version)
{
    return make(EV_WORKFLOW_STARTED, json_pack("{s:O, s:O}", PK_WORKFLOW, workflow ? workflow : json_null(),
                                               PK_VERSION, version ? version : json_null()));
}

sstore_event event_workflow_completed(const json_t *state)
{
    return make(EV_WORKFLOW_COMPLETED, json_pack("{s:O}", PK_STATE, state));
}

sstore_event event_phase_entered(const char *phase)
{
    return make(EV_PHASE_ENTERED, json_pack("{s:s}", PK_PHASE, phase));
}

sstore_event event_phase_exited(const char *phase, const char *to)
{
    return make(EV_PHASE_EXITED, json_pack("{s:s, s:s}", PK_PHASE, phase, PK_TO, to));
}

sstore_event event_agent_started(const char *agent, const json_t *model, int step)
{
    return make(EV_AGENT_STARTED, json_pack("{s:s, s:O, s:i}", PK_AGENT, agent, PK_MODEL, model ? model : json_null(),
                                            PK_STEP, step));
}

json_t *event_usage(int64_t input_tokens, int64_t output_tokens)
{
    return json_pack("{s:I, s:I}", PK_INPUT_TOKENS, (json_int_t)input_tokens, PK_OUTPUT_TOKENS,
                     (json_int_t)output_tokens);
}

sstore_event event_agent_completed(const json_t *agent, const json_t *output, int64_t duration_ms,
                                   const json_t *usage, double cost_usd)
{
    return make(EV_AGENT_COMPLETED, json_pack("{s:O, s:O, s:I, s:O, s:f}", PK_AGENT, agent, PK_OUTPUT, output,
                                              PK_DURATION_MS, (json_int_t)duration_ms, PK_USAGE, usage, PK_COST_USD,
                                              cost_usd));
}

sstore_event event_request_started(const char *request_id, const char *provider, const char *model, int attempt)
{
    return make(EV_PROVIDER_REQUEST_STARTED, json_pack("{s:s, s:s, s:s, s:i}", PK_REQUEST_ID, request_id, PK_PROVIDER,
                                                       provider, PK_MODEL, model, PK_ATTEMPT, attempt));
}

sstore_event event_request_ended(const char *request_id, const char *stop_reason, const json_t *usage,
                                 double cost_usd)
{
    return make(EV_PROVIDER_REQUEST_ENDED, json_pack("{s:s, s:s, s:O, s:f}", PK_REQUEST_ID, request_id, PK_STOP_REASON,
                                                     stop_reason, PK_USAGE, usage, PK_COST_USD, cost_usd));
}

sstore_event event_request_cancelled(const char *request_id, const char *reason, const char *error)
{
    json_t *p = json_pack("{s:s, s:o}", PK_REQUEST_ID, request_id, PK_REASON, text(reason));
    if (error) json_object_set_new(p, PK_ERROR, text(error));
    return make(EV_PROVIDER_REQUEST_CANCELLED, p);
}

sstore_event event_request_retried(const char *request_id, int attempt, const char *reason, const char *cause,
                                   int status, const char *error, int64_t delay_ms, int64_t retry_at_ms)
{
    return make(EV_PROVIDER_REQUEST_RETRIED,
                json_pack("{s:s, s:i, s:o, s:o, s:i, s:o, s:I, s:I}", PK_REQUEST_ID, request_id, PK_ATTEMPT, attempt,
                          PK_REASON, text(reason), PK_CAUSE, text(cause), PK_STATUS, status, PK_ERROR, text(error),
                          PK_DELAY_MS,
                          (json_int_t)delay_ms, PK_RETRY_AT, (json_int_t)retry_at_ms));
}

void event_started_continued(sstore_event *started, const char *from, int64_t chars, int trimmed)
{
    json_object_set_new(started->payload, PK_CONTINUED_FROM,
                        json_pack("{s:s, s:I, s:i}", PK_REQUEST_ID, from, PK_CHARS, (json_int_t)chars, PK_TRIMMED,
                                  trimmed));
}

void event_started_restarted(sstore_event *started, const char *reason)
{
    json_object_set_new(started->payload, PK_CONTINUED, json_false());
    json_object_set_new(started->payload, PK_REASON, text(reason));
}

void event_retried_cut_in(sstore_event *retried, const char *block)
{
    json_object_set_new(retried->payload, PK_CUT_IN, text(block));
}

sstore_event event_failover(const char *request_id, const char *from_provider, const char *from_model,
                            const char *to_provider, const char *to_model, int fallback, const char *cause,
                            int status, const char *error)
{
    return make(EV_PROVIDER_FAILOVER,
                json_pack("{s:s, s:{s:o, s:o}, s:{s:o, s:o}, s:i, s:o, s:i, s:o}", PK_REQUEST_ID, request_id, PK_FROM,
                          PK_PROVIDER, text(from_provider), PK_MODEL, text(from_model), PK_TO, PK_PROVIDER,
                          text(to_provider), PK_MODEL, text(to_model), PK_FALLBACK, fallback, PK_CAUSE, text(cause),
                          PK_STATUS, status, PK_ERROR, text(error)));
}

sstore_event event_recording_request(const char *request_id, const char *call_id, const char *key, int occurrence,
                                     const char *mode, const char *outcome, const char *rec_session,
                                     int rec_occurrence, const json_t *nearest, const char *reason)
{
    json_t *p = json_object();
    if (call_id) {
        json_object_set_new(p, PK_KIND, json_string("tool"));
        json_object_set_new(p, PK_CALL_ID, json_string(call_id));
    } else {
        json_object_set_new(p, PK_REQUEST_ID, json_string(request_id));
    }
    json_object_set_new(p, PK_KEY, json_string(key));
    json_object_set_new(p, PK_OCCURRENCE, json_integer(occurrence));
    json_object_set_new(p, PK_MODE, json_string(mode));
    json_object_set_new(p, PK_OUTCOME, json_string(outcome));
    if (rec_session)
        json_object_set_new(p, PK_RECORDING, json_pack("{s:s, s:i}", PK_SESSION, rec_session, PK_OCCURRENCE,
                                                       rec_occurrence));
    if (nearest) json_object_set(p, PK_NEAREST, (json_t *)nearest);
    if (reason) json_object_set_new(p, PK_REASON, text(reason));
    return make(EV_RECORDING_REQUEST, p);
}

/* Built by hand, not with json_pack (one a delta: the format's parse was half of
 * it); the same checks of UTF-8. */
sstore_event event_delta(int thinking, const char *request_id, const char *text, size_t len)
{
    json_t *p = json_object(), *id = json_string(request_id), *t = json_stringn(text, len);
    /* Each set takes its value, kept or not. */
    int bad = !p || !id || !t;
    if (!bad) bad = json_object_set_new_nocheck(p, PK_REQUEST_ID, id) | json_object_set_new_nocheck(p, PK_TEXT, t);
    else json_decref(id), json_decref(t);
    if (bad) {
        json_decref(p);
        p = NULL;     /* make aborts, as json_pack's NULL did */
    }
    return make(thinking ? EV_THINKING_DELTA : EV_TEXT_DELTA, p);
}

sstore_event event_compaction(sstore_event e, const char *reason)
{
    json_object_set_new(e.payload, PK_PURPOSE, json_string("compaction"));
    if (reason) json_object_set_new(e.payload, PK_REASON, text(reason));
    return e;
}

sstore_event event_session_compacted(const char *request_id, const char *up_to, const char *summary,
                                     size_t summary_len, int64_t tokens_before, int64_t tokens_after,
                                     const char *reason, const char *error)
{
    json_t *p = json_pack("{s:s, s:I, s:I}", PK_REASON, reason, PK_TOKENS_BEFORE, (json_int_t)tokens_before,
                          PK_TOKENS_AFTER, (json_int_t)tokens_after);
    if (request_id) json_object_set_new(p, PK_REQUEST_ID, json_string(request_id));
    if (up_to) json_object_set_new(p, PK_UP_TO, json_string(up_to));
    if (summary) {
        /* A model's text: kept whole, NULs and all (as text:delta keeps it). */
        json_t *s = json_stringn(summary, summary_len);
        json_object_set_new(p, PK_SUMMARY, s ? s : text(summary));
    }
    if (error) json_object_set_new(p, PK_ERROR, text(error));
    return make(EV_SESSION_COMPACTED, p);
}

sstore_event event_compact_requested(void)
{
    sstore_event e = make(EV_COMPACT_REQUESTED, json_object());
    e.actor = "user";
    return e;
}

sstore_event event_context_window(sstore_event e, int64_t tokens)
{
    if (tokens > 0) json_object_set_new(e.payload, PK_CONTEXT_TOKENS, json_integer((json_int_t)tokens));
    return e;
}

/* event: typed constructors for the events the runner and the pool write
 * (docs/events.md).
 *
 * The runner and the pool build events only through these constructors, by the
 * catalogue in session.h: each type an EV_* name, each payload key a PK_* name,
 * by which lib/session reduces them and every other reader reads them. (lib/sstore
 * writes session:forked itself, when it makes a fork.) A constructor returns an
 * sstore_event whose payload the caller owns (handed to sstore and then released);
 * arguments are borrowed unless a comment says "stolen". */
#ifndef DSTREAM_EVENT_H
#define DSTREAM_EVENT_H

#include <jansson.h>
#include <stdint.h>

#include "sstore.h"


/* A tool call as recorded before it runs. name: as the model (or the step) called
 * it; server/tool: what it resolved to (NULL when nothing); request_id: the model
 * request that asked (NULL for a workflow tool step, which gives phase and step). */
sstore_event event_tool_called(const char *call_id, const char *name, const json_t *arguments,
                               const char *server, const char *tool, int side_effecting,
                               const char *request_id, const char *phase, int step);
/* Its result (borrowed), whole. failed: no result came from the tool itself. */
sstore_event event_tool_result(const char *call_id, const json_t *result, int is_error, int failed,
                               int64_t duration_ms);
/* The result of a chat's tool call a person did not approve (not run): an error
 * result, not failed, denied. */
sstore_event event_tool_denied(const char *call_id, const json_t *result);
/* A chat's call that was approved is taken by the runner: it runs next (an open call
 * like any other from here). */
sstore_event event_tool_approved(const char *call_id);
sstore_event event_tool_loop_stopped(const char *reason, int turns);
sstore_event event_tool_server_failed(const char *server, const char *error);

sstore_event event_step_started(const char *phase, int step, const char *kind, const json_t *name);
/* interaction_id: the human step's id, or NULL. */
sstore_event event_step_completed(const char *phase, int step, const char *interaction_id);
/* A wait step (kind) opens: step:started with the names of the signals it waits
 * for (signals: a JSON array of strings, copied). */
sstore_event event_step_started_wait(const char *phase, int step, const char *kind, const json_t *name,
                                     const json_t *signals);
/* A wait step completes: with the signal it took (or NULL), timeout when its timer
 * fired first, and to: the phase its branch leads to (NULL: the next step). */
sstore_event event_step_branch(const char *phase, int step, const char *signal, int timeout, const char *to);
/* A sleep or wait step's timer, due at due_ms (ms since the epoch); its firing. */
sstore_event event_timer_set(const char *phase, int step, int64_t due_ms);
sstore_event event_timer_fired(const char *phase, int step, int64_t due_ms);
/* A signal sent to the session (actor user; POST /signals/{name}): its name and
 * payload (borrowed; NULL: null). */
sstore_event event_signal_received(const char *name, const json_t *payload);
/* The whole new state (stolen). */
sstore_event event_state_updated(json_t *state);
sstore_event event_workflow_failed(const char *error);
/* A request in progress failed for good: workflow:failed (workflow) or reply:failed
 * (a chat reply), with the rule that decided it (reason) and its attempts. */
sstore_event event_failed(int workflow, const char *error, const char *reason, int attempts);
/* A human checkpoint asks (its id, input kind and rendered prompt); options
 * (borrowed) and expires_at (RFC 3339) may be NULL. */
sstore_event event_input_requested(const char *interaction_id, const char *input, const char *prompt,
                                   const json_t *options, const char *expires_at);
/* input:requested for a chat's tool call callId that waits for approval: interaction id
 * the call's id, input "approval", the prompt naming the tool and its arguments. */
sstore_event event_approval_requested(const char *call_id, const char *prompt);
/* input:requested for a budget of the session that was reached (docs/agents.md,
 * "Budgets"): input "budget", budget{} the limit's name, its value (max) and what
 * the session used (spent); expires_at (RFC 3339) may be NULL. */
sstore_event event_budget_requested(const char *interaction_id, const char *prompt, const char *limit, double max,
                                    double spent, const char *expires_at);
/* session:budget_exceeded: the budget's checkpoint interaction_id was answered no
 * (reason "rejected") or expired unanswered ("timeout"); session:cancelled follows. */
sstore_event event_budget_exceeded(const char *interaction_id, const char *limit, double max, double spent,
                                   const char *reason);
sstore_event event_input_expired(const char *interaction_id);
/* The default answer of an expired checkpoint (actor system). */
sstore_event event_input_received(const char *interaction_id, const json_t *response);
/* An answer given by a person (actor user; POST /input). */
sstore_event event_input_answered(const char *interaction_id, const json_t *response, const json_t *reason);

/* ---- sessions, workflows, phases ---- */
/* A new session (actor user): of an agent, or of a workflow at version with its
 * initial state (NULL: {}); input NULL: {}; recording: event_recording_setting's, or
 * NULL. Arguments borrowed. */
sstore_event event_session_created(const char *agent, const char *workflow, int version, const json_t *initial_state,
                                   const json_t *input, const json_t *recording);
/* The recording{} of session:created and session:forked: mode and timing, each
 * NULL when not given. New reference. */
json_t *event_recording_setting(const char *mode, const char *timing);
sstore_event event_session_cancelled(const char *reason);
sstore_event event_cancel_requested(void);
/* stop:requested (a user's) and reply:stopped (the runner's): a chat's reply stops,
 * the chat goes on. */
sstore_event event_stop_requested(void);
sstore_event event_reply_stopped(void);
/* mode: interrupt, queue or background (actor user); skill: the name of the skill
 * the message invoked (its content is the rendered skill), or NULL. */
/* skill and replaces (the offset of the user message this one replaces, with what
 * answered it) may be NULL. */
sstore_event event_message_user(const json_t *content, const char *mode, const char *skill, const char *replaces);
sstore_event event_workflow_started(const json_t *workflow, const json_t *version);
sstore_event event_workflow_completed(const json_t *state);
sstore_event event_phase_entered(const char *phase);
sstore_event event_phase_exited(const char *phase, const char *to);

/* ---- agents and provider requests ---- */
sstore_event event_agent_started(const char *agent, const json_t *model, int step);
/* The usage{} of provider:request_ended and agent:completed. New reference. */
json_t *event_usage(int64_t input_tokens, int64_t output_tokens);
sstore_event event_agent_completed(const json_t *agent, const json_t *output, int64_t duration_ms,
                                   const json_t *usage, double cost_usd);
sstore_event event_request_started(const char *request_id, const char *provider, const char *model, int attempt);
sstore_event event_request_ended(const char *request_id, const char *stop_reason, const json_t *usage,
                                 double cost_usd);
/* reason: interrupted, stopped, cancelled, failed or restart; error may be NULL. */
sstore_event event_request_cancelled(const char *request_id, const char *reason, const char *error);
/* The attempt failed (reason "failed"), was cut off (reason "restart") or failed
 * over to the next provider (reason "failover", provider:failover follows); the next
 * is due at retry_at_ms. cause: lib/retry's rule; status: HTTP status or 0. */
sstore_event event_request_retried(const char *request_id, int attempt, const char *reason, const char *cause,
                                   int status, const char *error, int64_t delay_ms, int64_t retry_at_ms);
/* Say in started (event_request_started's) that its attempt continues the text of
 * cut attempt from: chars characters kept, trimmed whitespace characters left off
 * its end (docs/events.md). */
void event_started_continued(sstore_event *started, const char *from, int64_t chars, int trimmed);
/* Say in started that its attempt starts over although its cut attempt had output:
 * "continued": false and why (lib/rturn's reasons). */
void event_started_restarted(sstore_event *started, const char *reason);
/* Say in retried (event_request_retried's) the block its stream was cut in ("tool_use"). */
void event_retried_cut_in(sstore_event *retried, const char *block);
/* The request whose attempt request_id failed goes on with the agent's fallback
 * number `fallback` (0: its first), to_provider / to_model, instead of from_provider /
 * from_model; cause: lib/retry's rule, status the HTTP status or 0, error why. */
sstore_event event_failover(const char *request_id, const char *from_provider, const char *from_model,
                            const char *to_provider, const char *to_model, int fallback, const char *cause,
                            int status, const char *error);
/* A provider request (call_id NULL) or, with kind "tool", a tool call (request_id
 * NULL) of a session in a recording mode (docs/recording.md): its key, occurrence,
 * mode and outcome (recorded, hit, miss, diverged); on a hit the recording used
 * (rec_session and rec_occurrence; rec_session NULL: none), on a miss or divergence
 * the nearest (lib/recorder's rec_nearest, borrowed; NULL: none) and why it was not
 * answered from a recording, in words (rec_explain's; NULL: not given). */
sstore_event event_recording_request(const char *request_id, const char *call_id, const char *key, int occurrence,
                                     const char *mode, const char *outcome, const char *rec_session,
                                     int rec_occurrence, const json_t *nearest, const char *reason);
/* ---- context compaction (lib/compact) ---- */
/* e (a provider:request_* event) is of a compaction's summarization request: its
 * payload gets purpose "compaction" and, when given, the compaction's reason
 * ("budget", "overflow", "request": for provider:request_started). Returns e. */
sstore_event event_compaction(sstore_event e, const char *reason);
/* The history before up_to (the offset of the first message kept) is summarized by
 * summary (summary_len bytes) of request request_id; tokens_* are the estimates of
 * the next request before and after (lib/compact). Without up_to and summary (both
 * NULL), with error: an asked-for compaction that found nothing to compact. */
sstore_event event_session_compacted(const char *request_id, const char *up_to, const char *summary,
                                     size_t summary_len, int64_t tokens_before, int64_t tokens_after,
                                     const char *reason, const char *error);
/* e (provider:request_retried of cause context_overflow) says the model's context
 * window the provider's error named (tokens; 0: none, e as it was). Returns e. */
sstore_event event_context_window(sstore_event e, int64_t tokens);
/* compact:requested (actor user; POST /v1/sessions/{id}/compact). */
sstore_event event_compact_requested(void);
/* A piece of the reply (thinking: of the model's thinking), len bytes of text. */
sstore_event event_delta(int thinking, const char *request_id, const char *text, size_t len);

#endif

/* session: typed session events and the pure reducer, state = reduce(events).
 *
 * A session is a JSON-mode stream of envelopes (docs/events.md):
 *   {"type": "agent:completed", "payload": {...}, "createdAt": "RFC 3339",
 *    "actor": "user" | "runner" | "system", "causedBy": "<offset>" | null,
 *    "trace": {"traceId", "spanId", "parentSpanId"}}
 * The stored envelope has no "offset": an event's offset is its position in the
 * stream, added when it is served. No I/O in this module. */
#ifndef DSTREAM_SESSION_H
#define DSTREAM_SESSION_H

#include <jansson.h>
#include <stdint.h>

#include "buf.h"
#include "workflow.h"

/* A tool result longer than this (bytes of text, or of compact JSON) goes to the
 * model cut, with a marker; its tool:result event keeps it whole. */
#define SESSION_TOOL_RESULT_MAX (32 << 10)

/* The catalogue of event types (docs/events.md), each spelled here only: lib/event
 * builds events by these names and the reducer (session.c) reduces them by them. */
#define EV_SESSION_CREATED "session:created"
#define EV_SESSION_FORKED "session:forked"
#define EV_SESSION_CANCELLED "session:cancelled"
#define EV_SESSION_BUDGET_EXCEEDED "session:budget_exceeded"
#define EV_WORKFLOW_STARTED "workflow:started"
#define EV_WORKFLOW_COMPLETED "workflow:completed"
#define EV_WORKFLOW_FAILED "workflow:failed"
#define EV_PHASE_ENTERED "phase:entered"
#define EV_PHASE_EXITED "phase:exited"
#define EV_STEP_STARTED "step:started"
#define EV_STEP_COMPLETED "step:completed"
#define EV_AGENT_STARTED "agent:started"
#define EV_AGENT_COMPLETED "agent:completed"
#define EV_PROVIDER_REQUEST_STARTED "provider:request_started"
#define EV_PROVIDER_REQUEST_ENDED "provider:request_ended"
#define EV_PROVIDER_REQUEST_CANCELLED "provider:request_cancelled"
#define EV_PROVIDER_REQUEST_RETRIED "provider:request_retried"
#define EV_PROVIDER_FAILOVER "provider:failover"
#define EV_TEXT_DELTA "text:delta"
#define EV_THINKING_DELTA "thinking:delta"
#define EV_TOOL_CALLED "tool:called"
#define EV_TOOL_RESULT "tool:result"
#define EV_TOOL_APPROVED "tool:approved"
#define EV_TOOL_LOOP_STOPPED "tool:loop_stopped"
#define EV_TOOL_SERVER_FAILED "tool:server_failed"
#define EV_STATE_UPDATED "state:updated"
#define EV_INPUT_REQUESTED "input:requested"
#define EV_INPUT_RECEIVED "input:received"
#define EV_INPUT_EXPIRED "input:expired"
#define EV_MESSAGE_USER "message:user"
#define EV_CANCEL_REQUESTED "cancel:requested"
#define EV_STOP_REQUESTED "stop:requested"
#define EV_REPLY_STOPPED "reply:stopped"
#define EV_REPLY_FAILED "reply:failed"
#define EV_RECORDING_REQUEST "recording:request"
#define EV_SESSION_COMPACTED "session:compacted"
#define EV_COMPACT_REQUESTED "compact:requested"
#define EV_TIMER_SET "timer:set"
#define EV_TIMER_FIRED "timer:fired"
#define EV_SIGNAL_RECEIVED "signal:received"

/* The catalogue of payload keys (docs/events.md), each spelled here only: lib/event
 * writes payloads by these names, the reducer and every other reader of an event
 * read them by them (tests/unit/test_event.c checks each constructor uses only
 * these; `make check` that lib/event.c and the reducer spell none themselves).
 * Each comment names the events that carry the key ("{}" a key of a nested object). */
#define PK_AGENT "agent"                /* session:created, agent:started, agent:completed */
#define PK_WORKFLOW "workflow"          /* session:created, workflow:started */
#define PK_VERSION "version"            /* session:created, workflow:started */
#define PK_INITIAL_STATE "initialState" /* session:created */
#define PK_INPUT "input"                /* session:created (the session's), input:requested (its kind) */
#define PK_RECORDING "recording"        /* session:created, session:forked, recording:request */
#define PK_LABELS "labels"              /* session:created: {key: value} (lib/sfilter's limits) */
#define PK_MODE "mode"                  /* message:user, recording:request, recording{} */
#define PK_TIMING "timing"              /* recording{} of session:created and session:forked */
#define PK_SCOPE "scope"                /* recording{}: "all", or the session-id prefixes its recordings may come from */
#define PK_FROM "from"                  /* session:forked, provider:failover ({provider, model}) */
#define PK_AT "at"                      /* session:forked */
#define PK_REASON "reason"              /* session:cancelled, session:budget_exceeded, workflow:failed, reply:failed, provider:request_cancelled,
                                         * provider:request_retried, tool:loop_stopped, input:received */
#define PK_STATE "state"                /* workflow:completed, state:updated */
#define PK_SET "set"                    /* state:updated */
#define PK_ERROR "error"                /* workflow:failed, reply:failed, provider:request_cancelled,
                                         * provider:request_retried, tool:server_failed */
#define PK_ATTEMPTS "attempts"          /* workflow:failed, reply:failed */
#define PK_PHASE "phase"                /* phase:entered, phase:exited, step:started, step:completed, tool:called,
                                         * timer:set, timer:fired */
#define PK_TO "to"                      /* phase:exited, provider:failover ({provider, model}), step:completed (a
                                         * wait step's branch) */
#define PK_STEP "step"                  /* step:started, step:completed, agent:started, tool:called, timer:set,
                                         * timer:fired */
#define PK_KIND "kind"                  /* step:started, recording:request */
#define PK_NAME "name"                  /* step:started, tool:called, signal:received */
#define PK_MODEL "model"                /* agent:started, provider:request_started */
#define PK_OUTPUT "output"              /* agent:completed */
#define PK_DURATION_MS "durationMs"     /* agent:completed, tool:result */
#define PK_USAGE "usage"                /* agent:completed, provider:request_ended */
#define PK_INPUT_TOKENS "inputTokens"   /* usage{} */
#define PK_OUTPUT_TOKENS "outputTokens" /* usage{} */
#define PK_COST_USD "costUsd"           /* agent:completed, provider:request_ended */
#define PK_REQUEST_ID "requestId"       /* provider:request_*, text:delta, thinking:delta, tool:called,
                                         * recording:request */
#define PK_PROVIDER "provider"          /* provider:request_started, from{} and to{} of provider:failover */
#define PK_FALLBACK "fallback"          /* provider:failover: the index in the agent's fallbacks of `to` */
#define PK_ATTEMPT "attempt"            /* provider:request_started, provider:request_retried */
#define PK_STOP_REASON "stopReason"     /* provider:request_ended */
#define PK_CAUSE "cause"                /* provider:request_retried, provider:failover */
#define PK_STATUS "status"              /* provider:request_retried, provider:failover */
#define PK_DELAY_MS "delayMs"           /* provider:request_retried */
#define PK_RETRY_AT "retryAt"           /* provider:request_retried */
#define PK_TEXT "text"                  /* text:delta, thinking:delta */
#define PK_CALL_ID "callId"             /* tool:called, tool:result, recording:request (of a tool call),
                                         * input:requested (a chat's tool call waiting for approval) */
#define PK_ARGUMENTS "arguments"        /* tool:called */
#define PK_SERVER "server"              /* tool:called, tool:server_failed */
#define PK_TOOL "tool"                  /* tool:called */
#define PK_SIDE_EFFECTING "sideEffecting" /* tool:called */
#define PK_RESULT "result"              /* tool:result */
#define PK_IS_ERROR "isError"           /* tool:result */
#define PK_FAILED "failed"              /* tool:result */
#define PK_DENIED "denied"              /* tool:result (a person did not approve the call) */
#define PK_TURNS "turns"                /* tool:loop_stopped */
#define PK_INTERACTION_ID "interactionId" /* input:requested, input:received, input:expired, step:completed,
                                           * session:budget_exceeded */
#define PK_PROMPT "prompt"              /* input:requested */
#define PK_OPTIONS "options"            /* input:requested */
#define PK_EXPIRES_AT "expiresAt"       /* input:requested */
#define PK_RESPONSE "response"          /* input:received */
#define PK_CONTENT "content"            /* message:user */
#define PK_SKILL "skill"                /* message:user (the skill it invoked, by name) */
#define PK_REPLACES "replaces"          /* message:user (the offset of the user message it replaces) */
#define PK_KEY "key"                    /* recording:request, nearest{} */
#define PK_OCCURRENCE "occurrence"      /* recording:request, recording{} and nearest{} of it */
#define PK_OUTCOME "outcome"            /* recording:request */
#define PK_SESSION "session"            /* recording{} and nearest{} of recording:request */
#define PK_NEAREST "nearest"            /* recording:request */
#define PK_LIMITS "limits"              /* session:created (the session's own budget) */
#define PK_BUDGET "budget"              /* input:requested (input "budget") */
#define PK_LIMIT "limit"                /* budget{}, session:budget_exceeded: costBudgetUsd, maxTokens, maxRequests */
#define PK_MAX "max"                    /* budget{}, session:budget_exceeded: the limit's value */
#define PK_SPENT "spent"                /* budget{}, session:budget_exceeded: what the session used of it */
#define PK_FIELD "field"                /* nearest{} */
#define PK_RECORDED "recorded"          /* nearest{} */
#define PK_REQUESTED "requested"        /* nearest{} */
#define PK_PURPOSE "purpose"            /* provider:request_* of a compaction's summarization request ("compaction") */
#define PK_UP_TO "upTo"                 /* session:compacted (the offset of the first message kept) */
#define PK_SUMMARY "summary"            /* session:compacted */
#define PK_TOKENS_BEFORE "tokensBefore" /* session:compacted */
#define PK_TOKENS_AFTER "tokensAfter"   /* session:compacted */
#define PK_CONTEXT_TOKENS "contextTokens" /* provider:request_retried of cause context_overflow (the window the
                                         * provider's error names) */
#define PK_CONTINUED_FROM "continuedFrom" /* provider:request_started (a retry that continues a cut attempt) */
#define PK_CHARS "chars"                /* continuedFrom{}: characters (code points) of the cut attempt's text kept */
#define PK_TRIMMED "trimmed"            /* continuedFrom{}: whitespace characters dropped from its end */
#define PK_CONTINUED "continued"        /* provider:request_started (false: a retry that starts over, reason says why) */
#define PK_CUT_IN "cutIn"               /* provider:request_retried: the block the stream was cut in ("tool_use") */
#define PK_DUE_AT "dueAt"               /* timer:set, timer:fired (ms since the epoch) */
#define PK_PAYLOAD "payload"            /* signal:received */
#define PK_SIGNAL "signal"              /* step:completed (the signal a wait step took) */
#define PK_SIGNALS "signals"            /* step:started (the names a wait step waits for) */
#define PK_TIMEOUT "timeout"            /* step:completed (a wait step that timed out) */

/* The input kind of a budget's checkpoint (input:requested "input"). */
#define SESSION_INPUT_BUDGET "budget"

/* In the view's openCalls (not a payload key): a chat's call waiting for approval
 * holds the input:requested that asks for it (its payload and "offset"). */
#define SESSION_CALL_APPROVAL "approval"

typedef enum {
    SESSION_PENDING,
    SESSION_RUNNING,
    SESSION_AWAITING_INPUT,
    SESSION_COMPLETED,
    SESSION_FAILED,
    SESSION_CANCELLED
} session_status;

/* The catalogue: every event type dstream writes (docs/events.md). */
extern const char *const session_event_types[];

/* 1 if type is in the catalogue. */
int session_known_type(const char *type);

/* The catalogue of payload keys (PK_*), NULL-terminated. */
extern const char *const session_payload_keys[];
/* 1 if key is in it. */
int session_known_key(const char *key);

const char *session_status_name(session_status s);
/* Parse a status name; -1 if unknown. */
int session_status_parse(const char *s);

typedef struct session_trace {
    char trace_id[33];
    char span_id[17];
    char parent_span_id[17];    /* "" when this span has no parent */
} session_trace;

/* Parse a W3C traceparent ("00-<32 hex>-<16 hex>-<2 hex>") into a new span whose
 * parent is the header's span. Returns 0, or -1 if the header is malformed. */
int session_trace_from_header(const char *traceparent, session_trace *t);
/* A new trace with a new root span. */
void session_trace_new(session_trace *t);
/* A child span of parent, in the same trace. */
void session_trace_child(const session_trace *parent, session_trace *t);

/* An envelope as a JSON object (new reference; payload is borrowed and shared,
 * NULL: {}; caused_by may be NULL). session_event_dump writes it into out as
 * compact JSON, the bytes session_event_encode writes; both return 0 or a BUF_E*
 * code. */
json_t *session_event_build(const char *type, const json_t *payload, const char *actor, const char *caused_by,
                            const session_trace *trace, int64_t now_ms);
int session_event_dump(buf_t *out, const json_t *ev);

/* Serialize an envelope into out (compact JSON): the bytes of session_event_dump of
 * session_event_build's tree, written without the tree when the payload holds only
 * strings, integers, booleans and nulls. payload is borrowed (NULL: {}), caused_by
 * may be NULL. Returns 0 or a BUF_E* code. */
int session_event_encode(buf_t *out, const char *type, const json_t *payload, const char *actor,
                         const char *caused_by, const session_trace *trace, int64_t now_ms);

/* The reduced view of a session after some prefix of its events. */
typedef struct session_view {
    session_status status;
    int is_workflow;            /* created with a workflow (else with an agent) */
    json_t *created;            /* session:created payload (agent/workflow, version, input) */
    json_t *input;              /* the session input (borrowed from created) */
    json_t *state;              /* workflow state object (owned) */
    json_t *messages;           /* chat history: [{role, content, [interrupted]}] (owned) */
    json_t *pending;            /* the open human input request (payload + offset) or NULL; in a
                                 * chat, the first of its tool calls waiting for approval */
    json_t *early;              /* answers received before they were requested: {id: response} */
    json_t *queued;             /* user messages in queue mode waiting for the reply: [offset] */
    char phase[72];             /* current workflow phase, "" before the first */
    int step;                   /* steps completed in the phase */
    int step_open;              /* a step started and not completed */
    int started;                /* workflow:started (or a chat request) seen */
    char request[72];           /* provider request in flight, "" if none */
    int cancel_requested;
    int stop_requested;         /* a chat's reply under way was asked to stop (stop:requested) */
    /* The request in progress (a chat reply, or a tool turn of it, or an agent
     * step): counted from its first attempt, reset when it ends, when a new user
     * message is answered and when a workflow step starts. */
    int attempts;               /* provider requests started for it */
    int failures;               /* retries spent on provider errors */
    int restarts;               /* retries spent on runner restarts */
    int64_t retry_at;           /* a retry is due at this time (ms), 0 if none */
    int route;                  /* who serves it: 0 the agent's provider and model, n its
                                 * fallbacks[n - 1] (provider:failover) */
    /* Totals for the limits (docs/agents.md, "Limits"). */
    int64_t requests;           /* provider requests in the session */
    int64_t message_requests;   /* provider requests since the user message being answered */
    int64_t steps;              /* workflow steps started */
    /* Tools: calls recorded (tool:called) whose tool:result is not in yet, in
     * order, each its tool:called payload; the provider request that ended asking
     * for tools (its results go back in the next turn); model turns that asked for
     * tools since the reply (or agent step) began. */
    json_t *open_calls;
    int tool_wait;
    int tool_turns;
    int64_t input_tokens, output_tokens;
    /* Cost (docs/events.md, "Cost"): cost_usd is what all its requests cost, its
     * source's before the fork point included; of it, cost_inherited_usd came with
     * the fork and cost_recorded_usd was answered from recordings (not spent): what
     * it spent itself is the rest (session_cost_spent). played: the request being
     * answered from a recording (a recording:request hit), "" if none. */
    double cost_usd;
    double cost_inherited_usd, cost_recorded_usd;
    char played[72];
    /* Context compaction (lib/compact, docs/agents.md): compact_reason is set while
     * one is due or under way ("budget", "overflow", "request"); once its
     * summarization request started (compact_started), that request is the request
     * in progress and the counters it replaced (the reply's) wait in saved_*, put
     * back by session:compacted. compacted_turn: COMPACT_DONE_* of the request in
     * progress; compact_requested: a compact:requested waits; summary and
     * compacted_to: the last compaction's summary (a string, owned) and upTo. */
    char compact_reason[16];
    int compact_started;
    int saved_attempts, saved_failures, saved_restarts;
    int64_t saved_retry_at;
    session_status saved_status;
    int compacted_turn;
    int64_t compact_window;     /* the model's window an overflow's error named (0: none) */
    int compact_requested;
    json_t *summary;
    char compacted_to[40];
    /* The last attempt that did not complete (provider:request_retried), until the
     * next attempt starts: {requestId, content (its text, as committed), thinking
     * (true: it streamed thinking), cutIn, reason, cause}, or NULL. A retry may
     * continue its text (lib/rturn: rturn_continuation). */
    json_t *cut;
    /* Budgets that ask (docs/agents.md, "Budgets"): {"limits": the limits raised by
     * answers, "asks": budget checkpoints opened, "open": the one waiting (its
     * input:requested payload and "offset"), "rejected": the one answered no}. */
    json_t *budget;
    /* Timers and signals (docs/workflows.md, sleep and wait): the open step's timer
     * (timer:set's dueAt, ms; 0: none), the signals received and not yet taken by a
     * wait step, in order ([{name, payload, offset}]), what the open wait step waits
     * for (its step:started's signals, or NULL), and the phase a wait step's branch
     * leads to once the step completed ("" if none). */
    int64_t timer_due;
    json_t *signals;
    json_t *waiting;
    char branch[72];
    uint64_t events;            /* events reduced */
    char error[256];            /* why it failed */
} session_view;

/* The bytes of s (len bytes of UTF-8) that hold its first chars characters (code
 * points): len when it has no more. */
size_t session_chars_prefix(const char *s, size_t len, int64_t chars);
/* A continuation's text (text, len bytes) without the leading whitespace it gives
 * again (docs/events.md, "A reply continued": continuedFrom's trimmed), for a
 * reader that showed the cut attempt's text whole: at most *skip whitespace
 * characters (*skip counts down; any other character ends the skipping). Returns
 * how many leading bytes to leave out. */
size_t session_skip_ws(const char *text, size_t len, int *skip);

/* What the session spent itself: cost_usd less what it inherited and what it was
 * answered from recordings (never below 0). */
double session_cost_spent(const session_view *v);
/* {"spentUsd", "inheritedUsd", "recordedUsd"} of v. New reference. */
json_t *session_cost_json(const session_view *v);

void session_view_init(session_view *v);
void session_view_free(session_view *v);

/* Apply one event (a parsed envelope; offset, the event's own offset string, may be
 * NULL) to v. Unknown types are ignored (forward compatibility). Returns 0, or -1
 * if the envelope is malformed (no string "type", payload not an object). */
int session_reduce(session_view *v, const json_t *event, const char *offset);
/* session_reduce of an event given by its type and payload (borrowed; NULL: {}),
 * without its envelope: a writer folds what it just encoded without a tree. */
int session_reduce_payload(session_view *v, const char *type, const json_t *payload, const char *offset);

/* The view as JSON (snapshots and GET responses). New reference. */
json_t *session_view_to_json(const session_view *v);
/* Load a view saved by session_view_to_json. Returns 0 or -1. v must be freshly
 * initialised; on failure it is left initialised and empty. */
int session_view_from_json(session_view *v, const json_t *j);
/* A copy of src into dst (freshly initialised), sharing nothing with it: what a
 * snapshot taken at src's position would load. Returns 0 or -1 (dst left
 * initialised and empty). */
int session_view_copy(session_view *dst, const session_view *src);

/* The workflow position for workflow_next. Strings are borrowed from v. */
void session_view_pos(const session_view *v, workflow_pos *pos);

/* Chat sessions: 1 if a user message is waiting for a reply, no request is in
 * flight or scheduled, and the last reply did not fail (the runner should start
 * one). */
int session_view_needs_reply(const session_view *v);

/* 1 if the view's messages hold a user message at offset (a message may replace it). */
int session_view_has_user_message(const session_view *v, const char *offset);
/* The offset of the last user message that wanted a reply (not a background one),
 * borrowed from v, or NULL. */
const char *session_view_last_user(const session_view *v);

/* Chat sessions: 1 if a reply is under way (its request, a retry, its tool calls)
 * or due (a message waits for it). */
int session_view_replying(const session_view *v);

/* Chat sessions: 1 if a user message (mode interrupt) arrived after the reply in
 * flight began (the runner should cut that request and answer the message). */
int session_view_interrupted(const session_view *v);

/* 1 if the last provider request asked for tools, every call has its result, and
 * nothing is in flight: the results go back to the model in a new request. */
int session_view_tools_answered(const session_view *v);

/* The open call of a chat that waits for approval with interaction id `id` (its
 * tool:called payload, borrowed; its SESSION_CALL_APPROVAL the request), or NULL. */
const json_t *session_view_approval_call(const session_view *v, const char *id);

/* The tool:called payload of the open call callId (borrowed), or NULL. */
const json_t *session_view_open_call(const session_view *v, const char *call_id);

/* A workflow session whose open step waits only for a time or a signal (a sleep, a
 * wait) and has nothing to do yet: the time it waits for (ms since the epoch; it may
 * be past: then it is due), or 0 when only a signal ends its wait. -1 when the
 * session is anything else (running a step, asking, cancelled, finished, or a wait
 * that has a kept signal it takes): it has to be driven. Read-only, so that a runner
 * can park a sleeping session without taking its lease. */
int64_t session_view_waits_until(const session_view *v);

/* 1 if the session can take no more commands (a completed or failed workflow, a
 * cancelled session). A chat session whose reply failed is `failed` but not
 * finished: its next user message tries again. */
int session_view_finished(const session_view *v);

#endif

/* rturn: the runner's decisions about a turn, from data alone.
 *
 * A turn is one provider request of a chat reply or of a workflow agent step, with
 * its attempts. What the runner does about one is decided from the session's view
 * (lib/session: the log folded), what this process has in flight, and what the
 * request's end looked like; runner/turn.c then acts (starts, cuts, retries,
 * queues events). The decisions live here, with no I/O and no clock of their own,
 * so that the unit tests (tests/unit/test_rturn.c) reach the crash and retry paths
 * that only the bats suites reached before:
 *
 * - a request the log says is in flight that this process does not have was cut off
 *   by a restart of its runner (this process holds the lease now): it is closed and
 *   retried on the restart budget (lib/retry), never left hanging;
 * - a tool call this process did not record itself ran, or may have run, under a
 *   runner that died: it runs again only if it is read-only;
 * - a request that did not complete is classified for lib/retry by how it ended
 *   (the address policy, a transport error, an HTTP status, an unreadable or
 *   erroring stream, a stream cut before its terminal event);
 * - the limits (requests per session and per message, a cost budget, tool turns)
 *   stop a turn before it starts. */
#ifndef DSTREAM_RTURN_H
#define DSTREAM_RTURN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "retry.h"
#include "session.h"

#define RTURN_MAX_TURNS 8           /* tool-call turns per reply when the agent sets no limits.maxTurns */

/* What a chat session needs now (rturn_chat), before its agent is looked at. */
typedef enum {
    RTURN_NOTHING,          /* nothing to do until the log changes */
    RTURN_IN_FLIGHT,        /* this process's request is under way: leave it */
    RTURN_INTERRUPT,        /* ... and a user message interrupts it: cut it ("interrupted") */
    RTURN_RESTART_CUT,      /* the log has a request in flight this process does not: cut off by a restart */
    RTURN_RUN_CALLS,        /* tool calls are open: run them */
    RTURN_RETRY_LATER,      /* a retry is scheduled, due at v->retry_at */
    RTURN_NEEDS_AGENT       /* a request is due: decide with the agent (rturn_chat_agent) */
} rturn_need;

/* What a chat session's due request does, given its agent (rturn_chat_agent). */
typedef enum {
    RTURN_START,            /* start it */
    RTURN_NO_AGENT,         /* the agent does not exist: the reply fails */
    RTURN_OVER_BUDGET,      /* its cost budget is spent: the session is cancelled */
    RTURN_TOOL_LOOP         /* the model asked for tools maxTurns times in one reply: stopped */
} rturn_go;

/* A chat session with view v, this process having a request in flight or not, at
 * now (ms). */
rturn_need rturn_chat(const session_view *v, int in_flight, int64_t now);
/* The request rturn_chat found due, with the session's agent (NULL: none). */
rturn_go rturn_chat_agent(const session_view *v, const json_t *agent);

/* For a request about to start (any turn): RTURN_NOTHING, or RTURN_RESTART_CUT /
 * RTURN_RUN_CALLS as rturn_chat says them, for a session whose request is not in
 * this process. */
rturn_need rturn_under_way(const session_view *v);

/* A budget of the session (lib/rturn rturn_budget_check) is reached: its
 * costBudgetUsd, maxTokens or maxRequests, as the agent's limits set them, the
 * session's own (session:created's limits) replace them and answers to a budget's
 * checkpoint raised them; or a checkpoint of one is open or was answered no. */
int rturn_over_budget(const json_t *agent, const session_view *v);

/* What a session's budget says before a request (docs/agents.md, "Budgets"). */
typedef enum {
    RTURN_BUDGET_OK,            /* nothing reached: go on */
    RTURN_BUDGET_FAIL,          /* reached, onExceed "fail": the session ends (as before) */
    RTURN_BUDGET_ASK,           /* reached, onExceed "ask": open a checkpoint */
    RTURN_BUDGET_WAIT,          /* its checkpoint is open: wait (until expires_ms, if set) */
    RTURN_BUDGET_EXPIRED,       /* its checkpoint expired unanswered: the session ends */
    RTURN_BUDGET_REJECTED       /* its checkpoint was answered no: the session ends */
} rturn_budget_verdict;

typedef struct rturn_budget {
    const char *limit;          /* the limit reached: "costBudgetUsd", "maxTokens", "maxRequests" (or NULL) */
    double max, spent;          /* its value, and what the session used of it */
    int64_t timeout_ms;         /* limits.askTimeoutMs: how long a checkpoint waits (0: no end) */
    const char *id;             /* the checkpoint's interactionId (WAIT, EXPIRED, REJECTED; borrowed from v) */
    int64_t expires_ms;         /* WAIT: when it expires (0: never) */
    int asks;                   /* budget checkpoints opened so far */
} rturn_budget;

/* The budget's verdict for session v of agent (NULL: no limits) at now (ms), with
 * what it is about in b. */
rturn_budget_verdict rturn_budget_check(const json_t *agent, const session_view *v, int64_t now, rturn_budget *b);
/* Tool-call turns allowed in one reply: the agent's limits.maxTurns, else RTURN_MAX_TURNS. */
int rturn_max_turns(const json_t *agent);

/* A request limit stops the request about to start (requests per session, and per
 * user message for a chat; 0: no limit): the reason ("session_request_limit",
 * "message_request_limit") with the message in msg, or NULL. */
const char *rturn_limit(const session_view *v, int64_t session_requests_max, int64_t message_requests_max, char *msg,
                        size_t cap);

/* The history to send (new reference): replies cut off by a restart or a failure
 * are left out, and so are messages a later one replaced (superseded), messages a
 * compaction summarized (compacted: the summary goes in their place) and the reply
 * in flight (a retry of it); the first queued message, whose turn it is, goes last. */
json_t *rturn_history(const session_view *v);

/* Whether the next attempt of a request continues the text its cut attempt
 * committed (docs/agents.md, "A reply cut off is continued"): the retry sends the
 * history with a last assistant message holding that text (the provider's prefill),
 * and its reply is that text and what the model adds. A cut attempt is one that did
 * not complete (provider:request_retried: the view's cut). It is continued when it
 * was cut (a runner restart, a lost connection, a stream that stopped), streamed
 * only text (no thinking: a thinking block cannot be prefilled; not cut in a
 * tool-use block: its call is not in the log), its provider continues replies and
 * the session neither records nor plays back (a recording is one request's whole
 * answer, which playback asks for whole). Anthropic refuses a prefill that ends in
 * whitespace: the text is sent without its trailing whitespace, which the
 * continuation gives again, so the reply is the text kept and what follows. */
typedef struct rturn_cont {
    int continued;                  /* 1: the next attempt continues from text */
    const char *reason;             /* else why not: "thinking", "tool_use", "error" (the attempt
                                     * ended with a provider error, not a cut), "off" (its provider
                                     * does not continue replies), "recording", "empty" (nothing but
                                     * whitespace committed), "refused" (the provider refused the
                                     * continuation: rturn_retry_refused); NULL: there was nothing to continue */
    const char *from;               /* the cut attempt's request id (borrowed from the view) */
    const char *text;               /* the prefill: its text without trailing whitespace (borrowed) */
    size_t bytes;                   /* ... in bytes */
    int64_t chars;                  /* ... in characters (code points) */
    int trimmed;                    /* whitespace characters left off its end */
} rturn_cont;

/* Decide c for the request about to start in view v; allowed: its provider
 * continues replies (lib/provcfg), recording: the session records or plays back. */
void rturn_continuation(const session_view *v, int allowed, int recording, rturn_cont *c);
/* A continued request that the provider refused as a request (d: not retried, its
 * reason "rejected": an HTTP 400 or 422, an invalid_request_error) may have refused the
 * prefill itself (a model that does not take one): 1 if it is to be asked again from
 * the start, once, on the provider-error budget (failures_used of provider_retries),
 * rather than fail the reply. Its cut attempt then says reason "refused". */
int rturn_retry_refused(const retry_decision *d, int continued, int failures_used, int provider_retries);
/* The last message of a continued request's history: {"role": "assistant",
 * "content": c's text}. New reference. */
json_t *rturn_prefill(const rturn_cont *c);

/* How a provider request ended, as the runner saw it. */
typedef struct rturn_end {
    int transport_ok;               /* the transfer ended without a transport error */
    const char *transport_error;    /* else what it was */
    long status;                    /* the HTTP status (0: none came) */
    int refused;                    /* the address policy refused a connection ... */
    const char *refused_error;      /* ... saying why */
    int malformed;                  /* the parser could not read the stream */
    int stream_error;               /* an error event came in the stream ... */
    const char *error_type;         /* ... of this type ("" or NULL: none given) */
    int done;                       /* the stream's terminal event came */
    int should_retry;               /* x-should-retry: 1, 0, -1 not given */
    const char *retry_after;        /* Retry-After ("" or NULL: none) */
    int64_t retry_after_ms;         /* retry-after-ms, -1 if not given */
} rturn_end;

/* 1 if e is a complete reply as far as the transfer goes (the parser's own end,
 * provider_finish, is the caller's last word), else 0. */
int rturn_complete(const rturn_end *e);
/* An end that is not complete, for lib/retry: f (its strings point into e). The
 * error message goes into error (cap bytes) for the ends that make their own (a
 * transport error, an HTTP status, a cut stream, a refused connection); for an
 * unreadable or erroring stream error is left as the parser set it. */
void rturn_classify(const rturn_end *e, retry_failure *f, char *error, size_t cap);

/* What to do with an open tool call of view v (its tool:called payload as v's
 * openCalls hold it) that is not running here; own: this process recorded it (or
 * took its approval) and has not started it. v may be NULL: no answers. */
typedef enum {
    RTURN_CALL_RUN,         /* run it (again, if it is read-only and its runner died) */
    RTURN_CALL_CUT,         /* side-effecting and cut off by a restart: answered as failed, not run */
    RTURN_CALL_NO_TOOL,     /* it resolved to no tool: answered as failed */
    RTURN_CALL_WAIT,        /* it waits for its approval: nothing to do (it never ran) */
    RTURN_CALL_DENY,        /* its approval was refused: answered as denied, not run */
    RTURN_CALL_TAKE         /* it was approved: take it (tool:approved), the next look runs it */
} rturn_call;
rturn_call rturn_call_plan(const session_view *v, const json_t *call, int own);

/* Provider failover (docs/agents.md, "Provider failover"). A request's route is
 * who serves it: 0 the agent's own provider and model, n its fallbacks[n - 1]
 * (the view's route, set by provider:failover, back to 0 for each new request). */

/* The provider and model of route `route` of agent (borrowed): 0, or -1 if the
 * agent has no such route. */
int rturn_route_pair(const json_t *agent, int route, const char **provider, const char **model);
/* agent as route `route` serves it: a copy with that provider and model and, for
 * a fallback, without the agent's endpoint (a fallback goes to its provider's own
 * base URL). New reference; NULL if the agent has no such route. */
json_t *rturn_route_agent(const json_t *agent, int route);
/* The route the request in progress (view v, on route v->route) fails over to
 * after failure f, which lib/retry decided d about: the next one when there is
 * one and f is an overload (at once: no retry on an overloaded provider) or a
 * provider error whose retries are spent; else 0 (retry, or fail, as d says). A
 * restart, a refused connection or a failure that is not retried (an invalid
 * request, authentication) never fails over. */
int rturn_failover(const json_t *agent, const session_view *v, const retry_failure *f, const retry_decision *d);

/* Strip a ```json fence a model may wrap its JSON in (*p, *len narrowed). */
void rturn_unfence(const char **p, size_t *len);

#endif

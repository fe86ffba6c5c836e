/* compact: a chat's context compaction, decided from data alone.
 *
 * A chat whose next request would not fit its context budget (the agent's
 * limits.contextTokens, or the window the operator gives its model in
 * DSTREAM_PROVIDERS) is compacted before the request is sent: the older part of
 * its history is summarized by a model request of its own, the summary is
 * recorded (session:compacted, with the offset of the first message kept), and
 * later requests carry the summary, in the system prompt, and the messages from
 * that offset on (docs/agents.md, "Context compaction").
 *
 * Everything here is pure, for the runner (runner/turn.c), the pool (POST
 * /v1/sessions/{id}/compact asks whether anything can be compacted) and the unit
 * tests (tests/unit/test_compact.c):
 *
 * - the token estimate: no provider counts tokens for free before a request, so
 *   the size of a request is estimated from its bytes: COMPACT_BYTES_PER_TOKEN
 *   bytes of text (JSON for tool calls, results and definitions) a token, rounded
 *   up, and COMPACT_MESSAGE_TOKENS more for each message (its role and framing).
 *   English prose runs about 4 bytes a token in the tokenizers of both APIs; code
 *   and other scripts run fewer, so the estimate errs low on them, and the
 *   provider's own overflow error (compact_overflow) is the backstop;
 * - the cut: the history is only ever cut just before a user message, so a tool
 *   call is never parted from its result, and every call made before the cut has
 *   its result before it; of the cuts that keep the estimate of what follows within
 *   the target, the earliest (the most kept); if none does, the latest (only the
 *   last user message and what followed it kept);
 * - the summarization request: the compacted part as a plain transcript in one
 *   user message (so no tool_use block needs its tool's definition), after the
 *   previous summary if there was one, and an instruction to summarize;
 * - the provider's context-overflow error, in either wire format. */
#ifndef DSTREAM_COMPACT_H
#define DSTREAM_COMPACT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define COMPACT_BYTES_PER_TOKEN 4
#define COMPACT_MESSAGE_TOKENS 4
#define COMPACT_SUMMARY_TOKENS 2048     /* max_tokens of the summarization request */
#define COMPACT_OUTPUT_RESERVE 4096     /* an operator's window less this, when the agent sets no max_tokens */

/* The view's flags of the compactions done for the request in progress (bits of
 * session_view's compacted_turn): one of each kind at most per request. */
#define COMPACT_DONE_BUDGET 1
#define COMPACT_DONE_OVERFLOW 2

/* Estimated tokens of len bytes of text. */
int64_t compact_tokens(size_t len);
/* Estimated tokens of a history (lib/session's entries: content, toolCalls). */
int64_t compact_estimate_messages(const json_t *messages);
/* Estimated tokens of what an agent document as sent adds to every request: its
 * system prompt and its tools' definitions; summary: the summary carried with them
 * (NULL: none). */
int64_t compact_estimate_agent(const json_t *agent, const char *summary);

/* The context budget of a request for agent: its limits.contextTokens, or the
 * operator's window for its model (window, 0: none) less the reply's room (the
 * agent's parameters.max_tokens, else COMPACT_OUTPUT_RESERVE), whichever is
 * smaller; 0: no budget. */
int64_t compact_budget(const json_t *agent, int64_t window);

/* 1 if the view's history entry m goes to the model (not compacted, superseded, nor
 * a reply cut off by a restart or a failure). */
int compact_sent(const json_t *m);

/* The cut for the view's messages: the index of the user message the kept part
 * starts at, of the messages not yet compacted; the earliest whose kept part is
 * estimated at keep tokens or fewer, else the latest (keep <= 0: the latest).
 * -1: nothing to compact (no user message with something sent before it and every
 * call before it answered before it). */
ssize_t compact_cut(const json_t *messages, int64_t keep);

/* The messages of the summarization request: the view's messages not yet
 * compacted before index cut, as a transcript after prev (the previous summary,
 * or NULL), and the instruction. max_bytes > 0: a transcript longer than that
 * leaves out its earliest messages, saying how many (the summary of a history too
 * long for the model's window is of its latest part). New reference. */
json_t *compact_request_messages(const json_t *messages, size_t cut, const char *prev, size_t max_bytes);

/* The agent document of the summarization request: agent's provider (or
 * provider, when the operator names one; then model too), its model, its
 * endpoint, the summarizer's system prompt, COMPACT_SUMMARY_TOKENS. New reference. */
json_t *compact_agent(const json_t *agent, const char *provider, const char *model);

/* The agent document as sent (a private copy) carries summary: appended to its
 * system prompt under a heading saying what it is. */
void compact_apply_summary(json_t *shown, const char *summary);

/* 1 if an HTTP answer (status, body) is a context-overflow error: Anthropic's 400
 * invalid_request_error "prompt is too long: ...", or a 400 with OpenAI's
 * error.code "context_length_exceeded" (either shape from either kind, as
 * compatible servers mix them); its message into msg (cap bytes). */
int compact_overflow(long status, const char *body, size_t len, char *msg, size_t cap);

/* The model's context window an overflow error's message names (Anthropic's
 * "prompt is too long: N tokens > M maximum", OpenAI's "maximum context length is M
 * tokens"): M, or 0. */
int64_t compact_overflow_window(const char *msg);

#endif

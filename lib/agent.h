/* agent: agent definitions (what a chat session or a workflow step talks to).
 *
 * Document (object):
 *   name          string, [A-Za-z0-9_.-]{1,64}
 *   provider      the name of a provider the operator configured (lib/provcfg:
 *                 "anthropic" and "openai" unless the operator says otherwise)
 *   model         string, 1..128 bytes
 *   system        string, optional, at most 100000 bytes (system prompt)
 *   parameters    object, optional: temperature (number 0..2), top_p (0..1),
 *                 max_tokens (int 1..1000000), stop (array of up to 8 strings)
 *   tools         array, optional, up to 64: {name, description, inputSchema (object)}
 *   mcpServers    array, optional, up to 16: names of servers the operator configured
 *                 (lib/mcp.h); never commands or environment
 *   skills        array, optional, up to 64: {name, instructions (string, may contain
 *                 {{param}} placeholders), params (array of names, optional)}
 *   limits        object, optional: maxTokens (int >0), maxTurns (int >0),
 *                 costBudgetUsd (number >0), contextTokens (int 1..AGENT_CONTEXT_MAX),
 *                 maxRequests (int >0), onExceed ("fail", the default, or "ask": a
 *                 budget reached opens a checkpoint), askTimeoutMs (int >0: how long
 *                 that checkpoint waits)
 *   endpoint      string, optional: a base URL of its own, when the operator allows
 *                 it for the provider (no operator key is sent there)
 *   fallbacks     array, optional, up to 4: {provider, model}, each a configured provider
 *                 (lib/provcfg) and a pair other than the agent's and the others': who
 *                 serves a request when the one before failed after its retries or is
 *                 overloaded (docs/agents.md, "Provider failover")
 *   approval      object, optional: {name: "required"}, name a declared tool, a server
 *                 of mcpServers (all its tools) or <server>__<tool>: a chat's call of
 *                 it waits for a person's approval
 * Unknown top-level keys are mistakes. */
#ifndef DSTREAM_AGENT_H
#define DSTREAM_AGENT_H

#include <jansson.h>
#include <stddef.h>

#include "buf.h"

#define AGENT_CONTEXT_MAX 100000000     /* limits.contextTokens */

/* Validate an agent document. Returns 0, or -1 with every mistake named in err,
 * one per line, each prefixed by its JSON path ("limits.maxTurns: must be ..."). */
int agent_validate(const json_t *doc, char *err, size_t errcap);

/* Check the budget fields of limits object l at JSON path base (costBudgetUsd,
 * maxTokens, maxRequests, onExceed, askTimeoutMs; other keys are the caller's),
 * naming each mistake in e. An agent's limits and a session's (POST /v1/sessions
 * "limits") share these rules. */
struct jcheck_errlist;
void agent_check_budget(struct jcheck_errlist *e, const char *base, const json_t *l);

/* Validate a session's own limits (POST /v1/sessions "limits": costBudgetUsd,
 * maxTokens, maxRequests, onExceed, askTimeoutMs; nothing else). Returns 0, or -1
 * with every mistake named in err, one per line ("limits.onExceed: ..."). */
int agent_validate_limits(const json_t *limits, char *err, size_t errcap);

/* Render skill `name` of agent doc with params (object of strings): replaces each
 * {{param}} with its value. Appends to out. Returns 0, or -1 with err (no such
 * skill, missing or undeclared parameter). */
int agent_render_skill(const json_t *doc, const char *name, const json_t *params, buf_t *out,
                       char *err, size_t errcap);

/* The system prompt the model is given: the agent's system text, then each skill
 * (name, parameters, instructions with their {{placeholders}}) under "# Skills".
 * Appends to out; returns 0 or a BUF_E* code (out unchanged). */
int agent_system_prompt(const json_t *doc, buf_t *out);

/* 1 if the agent's `approval` says a call of the tool `name` (as the model called
 * it), which resolved to a tool of `server` (NULL: none), waits for approval. */
int agent_needs_approval(const json_t *doc, const char *name, const char *server);

/* Redact, in place, what a stored document may hold that a GET must never show:
 * the environment values of MCP servers in documents stored by earlier versions
 * (which allowed {name, command, env}). */
void agent_redact(json_t *doc);

/* 1 if s is a valid agent or workflow name: [A-Za-z0-9_.-]{1,64}, but not "." or "..". */
int agent_valid_name(const char *s);

/* 1 if s is a valid tool name as the providers accept it: [A-Za-z0-9_-]{1,64}. */
int agent_valid_tool_name(const char *s);

#endif

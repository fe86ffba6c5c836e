/* turn: one turn of a session's conversation with its provider (runner/turn.c):
 * a chat's reply or a workflow agent step's request, started, cut, retried or
 * failed, and its end turned into events. */
#ifndef DSTREAM_RUNNER_TURN_H
#define DSTREAM_RUNNER_TURN_H

#include "types.h"

/* A chat session's turn, from its view v: cut the request in flight if the user
 * interrupted it, run the tool calls asked for, start (or retry) the reply when one
 * is needed and no limit stops it. */
void turn_chat(runner_t *R, sess_t *s, const session_view *v);
/* For step_agent: start, retry or leave alone the open agent step. */
void turn_agent_step(runner_t *R, sess_t *s, const session_view *v, const json_t *step);
/* q ended with result (from curl, or from its playback): its deltas and its end
 * are queued (provider:request_ended, with its tool calls and, for an agent step's
 * last turn, the step's output), or it is retried or fails (lib/retry). q is freed. */
void turn_finished(runner_t *R, rq_t *q, CURLcode result);
/* The runner stops: s's request in flight is closed (restart) and rescheduled at
 * once on the restart budget, so that the next runner picks it up without waiting. */
void turn_restart(runner_t *R, sess_t *s);
/* The request in progress failed for good (or could not even start): the session
 * ends failed, with the message saying why and reason naming the rule (lib/retry's
 * names, or a limit's). A workflow fails; a chat's pending reply fails and its
 * next user message may try again. */
void turn_give_up(runner_t *R, sess_t *s, const session_view *v, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The workflow fails (workflow:failed, logged), and with reason when a rule or
 * limit decided it (NULL: none). */
void turn_fail_workflow(runner_t *R, sess_t *s, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The definition of step (its index) of phase in the workflow document doc, or NULL. */
const json_t *turn_step_def(const json_t *doc, const char *phase, int step);

#endif

/* workflow: declarative workflow documents and the pure decision core.
 *
 * No I/O here: the runner asks workflow_next() what to do given the document and
 * the session's reduced view, performs it, appends the events, and asks again.
 * The document format is described in docs/workflows.md; this header is the
 * contract. All JSON is jansson (json_t); ownership is stated per function.
 *
 * Document (top level object):
 *   name          string, [A-Za-z0-9_.-]{1,64}
 *   description   string, optional
 *   initialState  object, optional (default {})
 *   initialPhase  string, optional (default: the first phase)
 *   phases        array (1..64) of phase objects:
 *     name        string, unique, [A-Za-z0-9_.-]{1,64}
 *     terminal    bool, optional: the workflow completes after this phase's steps
 *     steps       array (0..64) of step objects, by "kind":
 *       "agent":  agent (string, an agent name), prompt (template string),
 *                 outputSchema (object, optional: the output must be a JSON value
 *                 of this JSON-Schema subset: type, properties, required, items,
 *                 enum), update (object, optional: state paths -> value templates,
 *                 where "$output" is the agent's output)
 *       "tool":   server (string), tool (string), arguments (object; string values
 *                 are templates), update (optional, "$output" = the tool result)
 *       "update": set (object: state paths -> JSON values; string values are
 *                 templates; "$input" is the session input)
 *       "human":  id (string, unique in the workflow), input ("approval" |
 *                 "choice" | "text"), prompt (template), options (array of strings,
 *                 required for choice, 2..20), timeoutMs (int >0, optional),
 *                 onTimeout (optional: {"response": <value>} used when the
 *                 checkpoint expires; without it expiry fails the workflow),
 *                 update (optional, "$response" = the answer)
 *       "sleep":  duration (workflow_duration) or until (a template rendering a
 *                 time, workflow_time): one of them
 *       "wait":   signals ({name: {to (phase, optional), update (optional,
 *                 "$payload" = the signal's payload)}}, 1..16), timeout (a
 *                 duration, optional), onTimeout ({to, update}, optional; needs
 *                 timeout; without it a timeout fails the workflow)
 *       Every step may have "name" (string) for display.
 *     transitions array (0..16), evaluated in order after the steps, of
 *                 {when: condition (optional: always), to: phase name}.
 *                 A non-terminal phase must have at least one transition, and a
 *                 phase whose transitions all fail fails the workflow.
 *
 * State paths are dotted ("review.approved"); they address nested objects,
 * created on write. Templates: "{{path}}" where path starts with "state." or
 * "input." (the session input); a string value is inserted as is, any other value
 * as compact JSON; a missing path is an error. Conditions: a small expression
 * language over the same paths: literals (numbers, "strings", true, false, null),
 * paths, == != < <= > >=, && || !, parentheses. A bare path is true when it is
 * present and not false/null/0/"". Comparisons between different types are false
 * (except != which is true); < <= > >= compare numbers or strings. */
#ifndef DSTREAM_WORKFLOW_H
#define DSTREAM_WORKFLOW_H

#include <jansson.h>
#include <stddef.h>

#include "buf.h"
#include "errs.h"
#include "wfexpr.h"
#include "wfschema.h"

#define WORKFLOW_ERR_MAX 512
#define WORKFLOW_STATE_MAX_DEFAULT (1 << 20) /* DSTREAM_WORKFLOW_STATE_MAX */
#define WORKFLOW_REASON_TOO_LARGE "state_too_large" /* workflow:failed's reason for it */
#define WORKFLOW_MAX_STEPS_DEFAULT 1000     /* steps a session may execute (maxSteps) */
#define WORKFLOW_MAX_STEPS_LIMIT 1000000    /* the largest maxSteps a document may set */

typedef enum {
    STEP_AGENT,
    STEP_TOOL,
    STEP_UPDATE,
    STEP_HUMAN,
    STEP_SLEEP,
    STEP_WAIT
} step_kind;

#define WORKFLOW_DURATION_MAX_MS 315360000000LL   /* 10 years: the longest sleep or wait timeout */

/* A sleep's duration or a wait's timeout: an integer (milliseconds) or a string of
 * numbers with units ms, s, m, h, d ("300ms", "1h30m"), 0 to WORKFLOW_DURATION_MAX_MS.
 * Returns 0 with *ms, or -1 with err saying what a duration is. */
int workflow_duration(const json_t *v, int64_t *ms, char *err, size_t errcap);

/* A sleep's until, as rendered: milliseconds since the epoch (digits only) or an
 * RFC 3339 time. Returns 0 with *ms, or -1. */
int workflow_time(const char *s, int64_t *ms);

/* Validate a workflow document. Returns 0, or -1 with every mistake found named in
 * err (one per line, each starting with a JSON path like "phases[1].steps[0].agent:"),
 * truncated to errcap bytes. */
int workflow_validate(const json_t *doc, char *err, size_t errcap);

/* The steps a session of doc may execute: its maxSteps, else
 * WORKFLOW_MAX_STEPS_DEFAULT. Past it the runner fails the workflow (step_limit). */
int workflow_max_steps(const json_t *doc);

/* Apply a step's "update" (or an "update" step's "set") object to state: each key
 * is a state path, each value is a JSON value where the strings "$output",
 * "$response" and "$input" are replaced by the given values (any may be NULL) and
 * other strings are templates. The new state may be at most max bytes as compact
 * JSON (0: no limit); what the update renders and copies in counts against max as
 * it goes, so an update that would pass it stops there, having built no more.
 * Returns 0, WORKFLOW_ETOOLARGE (past max) or -1 with err; state is only modified
 * on success. */
int workflow_apply_update(json_t *state, const json_t *update, const json_t *output,
                          const json_t *response, const json_t *input, size_t max, char *err,
                          size_t errcap);

/* The same for a wait step's branch: "$payload" is the signal's payload (NULL: none,
 * JSON null), "$input" the session input. */
int workflow_apply_signal(json_t *state, const json_t *update, const json_t *payload, const json_t *input,
                          size_t max, char *err, size_t errcap);

/* Render every string inside value (recursively; object keys untouched) as a
 * template against state and input, e.g. a tool step's "arguments", rendering at
 * most max bytes in all (0: no limit but WF_RENDER_MAX per string). Returns 0 with
 * a new value in *out (the caller owns it), or WORKFLOW_ETOOLARGE or -1 with err
 * and *out NULL. */
int workflow_render_json(const json_t *value, const json_t *state, const json_t *input, size_t max,
                         json_t **out, char *err, size_t errcap);

/* Where a session stands in its workflow (from the reducer, lib/session). */
typedef struct workflow_pos {
    int started;            /* workflow:started seen */
    int finished;           /* completed, failed or cancelled */
    const char *phase;      /* current phase, NULL before the first phase:entered */
    int step;               /* steps of the current phase completed */
    int step_open;          /* a step:started without its step:completed */
    const char *branch;     /* a wait step's branch: the phase to go to next, or NULL */
} workflow_pos;

typedef enum {
    NEXT_START,             /* append workflow:started and enter the initial phase */
    NEXT_ENTER_PHASE,       /* enter phase `phase` (phase:entered) */
    NEXT_STEP,              /* run step `step` of `phase` (a json object in `def`) */
    NEXT_TRANSITION,        /* phase:exited towards `phase` */
    NEXT_COMPLETE,          /* workflow:completed */
    NEXT_FAIL,              /* workflow:failed with `error` */
    NEXT_WAIT,              /* nothing to do: a step is in flight or the session is over */
} next_kind;

typedef struct workflow_next_t {
    next_kind kind;
    const char *phase;      /* borrowed from the document */
    int step;
    const json_t *def;      /* the step object, borrowed */
    step_kind step_kind;
    char error[WORKFLOW_ERR_MAX];
} workflow_next_t;

/* Decide the next action of a valid workflow document doc for a session at pos
 * with the given state and input. Pure: reads only its arguments. */
void workflow_next(const json_t *doc, const workflow_pos *pos, const json_t *state,
                   const json_t *input, workflow_next_t *out);

#endif

/* step: the workflow step kinds, one file each behind one interface.
 *
 * drive_workflow (driver.c) finds where a session stands (lib/workflow's
 * workflow_next) and looks the step's kind up in a table (step_kinds.c): `begin`
 * opens a step (NEXT_STEP), `resume` carries on with an open one (NEXT_WAIT: an
 * answer came, a timer fired, a call ended, the runner restarted). An executor
 * decides from the session's view alone and acts only through its context's operations, so that a
 * new kind is one file and one table row, and the unit tests (tests/unit/
 * test_steps.c) drive every kind against a fake context. Events are built with
 * lib/event's constructors. */
#ifndef DSTREAM_RUNNER_STEP_H
#define DSTREAM_RUNNER_STEP_H

#include <jansson.h>
#include <stdint.h>

#include "../lib/event.h"
#include "../lib/session.h"

typedef struct step_ctx step_ctx;

/* What an executor may do: implemented by the runner (runner/steps.c) and by the
 * fake of the unit tests. */
typedef struct step_ops {
    /* Queue an event for the session (its payload becomes the queue's). */
    void (*emit)(step_ctx *c, sstore_event e);
    /* The workflow fails with msg (workflow:failed, logged), and reason when a
     * rule or limit decided it (NULL: none). */
    void (*fail)(step_ctx *c, const char *reason, const char *msg);
    /* Look at the session again at this time (ms). */
    void (*timer)(step_ctx *c, int64_t at_ms);
    int64_t (*now)(step_ctx *c);
    /* Agent steps: start, retry or leave alone the step's provider request (the
     * provider machinery is shared with chat replies: runner/turn.c). */
    void (*agent_resume)(step_ctx *c);
    /* Tool steps: the server's tools as lib/mcp lists them (RMCP_READY 0, PENDING
     * 1, FAILED -1 with err), its configuration (NULL: none), and running the
     * session's open calls. */
    int (*tools)(step_ctx *c, const char *server, const json_t **tools, char *err, size_t errcap);
    const json_t *(*server_conf)(step_ctx *c, const char *server);
    void (*run_calls)(step_ctx *c);
    /* A fresh call id. */
    void (*new_call_id)(step_ctx *c, char *out, size_t cap);
} step_ops;

struct step_ctx {
    const step_ops *ops;
    void *ud;                   /* the implementation's */
    const session_view *v;
    const json_t *def;          /* the step's definition */
    const char *phase;
    int step;                   /* its index in the phase */
    size_t state_max;           /* bytes a state, or a step's arguments, may take (0: no limit) */
};

typedef struct step_exec {
    const char *kind;
    void (*begin)(step_ctx *c);
    void (*resume)(step_ctx *c);
} step_exec;

extern const step_exec step_agent, step_tool, step_update, step_human, step_sleep, step_wait;

/* Shared by the kinds: fail the workflow with a formatted message. */
void step_failf(step_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, for lib/workflow's result rc: past the state limit (WORKFLOW_ETOOLARGE)
 * the failure has the reason state_too_large. */
void step_fail_rc(step_ctx *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The tool step's completion when its call's result is in (called by the runner
 * when a step's call ends): tool:result, then state:updated + step:completed, or
 * workflow:failed when the tool failed or the update cannot be applied. call: the
 * tool:called payload. */
void step_tool_finish(step_ctx *c, const json_t *call, const json_t *result, int is_error, int failed,
                      int64_t duration_ms);

#endif

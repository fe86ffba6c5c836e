/* event: typed constructors for the events the runner writes (docs/events.md).
 *
 * Each event type and payload key is spelled here, once: the runner builds events
 * only through these constructors, and lib/session reduces them by the same
 * EV_* names (defined in session.h, the catalogue's home). A constructor returns an sstore_event whose payload the caller owns
 * (handed to sstore and then released); arguments are borrowed unless a comment
 * says "stolen". */
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
sstore_event event_tool_loop_stopped(const char *reason, int turns);
sstore_event event_tool_server_failed(const char *server, const char *error);

sstore_event event_step_started(const char *phase, int step, const char *kind, const json_t *name);
/* interaction_id: the human step's id, or NULL. */
sstore_event event_step_completed(const char *phase, int step, const char *interaction_id);
/* The whole new state (stolen). */
sstore_event event_state_updated(json_t *state);
sstore_event event_workflow_failed(const char *error);
/* request: the input:requested payload, built by the human step (stolen). */
sstore_event event_input_requested(json_t *request);
sstore_event event_input_expired(const char *interaction_id);
/* The default answer of an expired checkpoint (actor system). */
sstore_event event_input_received(const char *interaction_id, const json_t *response);

#endif

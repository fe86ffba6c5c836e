/* wsignal: the rules of signals to a workflow's wait steps, in one place for the
 * HTTP side (POST /v1/sessions/{id}/signals/{name}) and the runner (the wait step).
 *
 * A signal has a name (1 to 64 of A-Z a-z 0-9 _ . -) and a JSON payload. It is kept
 * in the session's view (signals, in the order received) until a wait step that
 * names it takes it: the one open when it arrives, or the first the session
 * reaches later. A wait step takes the earliest kept signal among the names it
 * waits for. No I/O. */
#ifndef DSTREAM_WSIGNAL_H
#define DSTREAM_WSIGNAL_H

#include <jansson.h>

#include "session.h"

#define WSIGNAL_PAYLOAD_MAX_DEFAULT (64 << 10)  /* DSTREAM_SIGNAL_PAYLOAD_MAX */
#define WSIGNAL_PENDING_MAX_DEFAULT 100         /* DSTREAM_SIGNALS_PENDING_MAX */

/* 1 if name is a signal's name. */
int wsignal_valid_name(const char *name);

/* 1 if a wait step of the workflow document waits for a signal called name. */
int wsignal_awaited(const json_t *workflow, const char *name);

/* The kept signal the wait step `step` (its definition) takes now: the earliest of
 * v's signals whose name it waits for ({name, payload, offset}, borrowed), or NULL. */
const json_t *wsignal_take(const session_view *v, const json_t *step);

#endif

/* Recording modes of sessions and their drift reports (lib/recorder, docs/recording.md). */
#ifndef DSTREAM_FCGI_RECORDINGS_H
#define DSTREAM_FCGI_RECORDINGS_H

#include <jansson.h>

#include "req.h"

/* The "mode" and "timing" of a session creation or fork body as
 * {"mode", "timing", "scope"} in *out (new reference; mode and timing only when
 * given; scope always: the body's "recordingScope" if the principal may give it, else
 * everything the principal may read of sessions, docs/recording.md). Returns 0, or -1
 * after answering 400 or 403. */
int recording_setting(req_t *r, const json_t *body, json_t **out);

/* /v1/recordings[/{key}]: GET the list (?session=&provider=&model=&limit=&cursor=),
 * GET one key's recordings with their chunks, DELETE them. Admin only (router.c). */
void recordings_handle(req_t *r, const char *key);

/* GET /v1/sessions/{id}/drift */
void recording_drift(req_t *r, const char *id);

#endif

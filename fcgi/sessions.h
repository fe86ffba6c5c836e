/* sessions: what other resources (fcgi/aisdk.c) share with /v1/sessions
 * (fcgi/sessions.c): the same commands, the same checks, the same errors. */
#ifndef DSTREAM_FCGI_SESSIONS_H
#define DSTREAM_FCGI_SESSIONS_H

#include <jansson.h>

#include "../lib/sstore.h"
#include "req.h"

#define SESSIONS_CONTENT_MAX (1 << 20)  /* bytes of a user message */

/* The chat session id of agent: *row gets it, created (as POST /v1/sessions
 * {"id", "agent"} does) when there is none. The caller has checked that the token
 * may write id. 0, or -1 after answering (422 unknown_agent, 409 chat_agent_mismatch
 * when id is a session of another agent or a workflow's, 5xx). */
int sessions_open_chat(req_t *r, const char *id, const char *agent, sstore_row *row);

/* Post content (a string) to session id as a user message in interrupt mode, as
 * POST /v1/sessions/{id}/messages does, replacing the user message at offset
 * replaces ("last": the last one) and what answered it, unless NULL; *at gets the
 * message's offset. 0, or -1 after answering (404, 409, 5xx). */
int sessions_say(req_t *r, const char *id, json_t *content, const char *replaces, offset_t *at);

/* A message's "replaces" (j): "last" or an offset, into out (the offset as the server
 * writes it). 0, or -1 after answering 400 bad_replaces. */
int sessions_replaces(req_t *r, const json_t *j, char out[OFFSET_LEN + 1]);

/* The session id that path ("{id}" or "{id}/...") begins with, into id: what follows
 * it ("" or "/..."), or NULL after answering 404 (not an id). */
const char *sessions_path_id(req_t *r, const char *path, char id[SSTORE_ID_MAX]);

/* POST /v1/sessions/{id}/stop: a chat's reply under way stops (stop:requested; the
 * runner answers reply:stopped); 202 {id, offset}, or the error. */
void sessions_stop(req_t *r, const char *id);

#endif

/* sessions: what other resources (fcgi/aisdk.c) share with /v1/sessions
 * (fcgi/sessions.c): the same commands, the same checks, the same errors. */
#ifndef DSTREAM_FCGI_SESSIONS_H
#define DSTREAM_FCGI_SESSIONS_H

#include <jansson.h>

#include "../lib/sstore.h"
#include "req.h"

#define SESSIONS_CONTENT_MAX (1 << 20)  /* bytes of a user message */
#define SESSIONS_REASON_MAX 4096        /* bytes of an answer's reason */

/* The chat session id of agent: *row gets it, created (as POST /v1/sessions
 * {"id", "agent"} does) when there is none. The caller has checked that the token
 * may write id. 0, or -1 after answering (422 unknown_agent, 409 chat_agent_mismatch
 * when id is a session of another agent or a workflow's, 5xx). */
int sessions_open_chat(req_t *r, const char *id, const char *agent, sstore_row *row);

/* The text of a user message's parts ([{"type": "text", "text": ...}, ...], name the
 * field's for errors), joined with newlines: a new string, or NULL after answering 400
 * (unsupported_part, bad_content: none, or over SESSIONS_CONTENT_MAX). */
json_t *sessions_text_parts(req_t *r, const json_t *parts, const char *name);

/* The chat session id of agent, which must exist: as sessions_open_chat, but 404
 * not_found when there is none. */
int sessions_chat(req_t *r, const char *id, const char *agent, sstore_row *row);

/* Post content (a string) to session id as a user message in interrupt mode, as
 * POST /v1/sessions/{id}/messages does, replacing the user message at offset
 * replaces ("last": the last one) and what answered it, unless NULL; *at gets the
 * message's offset; refuse_busy: refused with 409 busy while a reply is under way or
 * due. 0, or -1 after answering (404, 409, 5xx). */
int sessions_say(req_t *r, const char *id, json_t *content, const char *replaces, int refuse_busy, offset_t *at);

/* A message's "replaces" (j): "last" or an offset, into out (the offset as the server
 * writes it). 0, or -1 after answering 400 bad_replaces. */
int sessions_replaces(req_t *r, const json_t *j, char out[OFFSET_LEN + 1]);

/* 0 if an answer's interactionId, response and reason (NULL: none) are well-formed,
 * else -1 after answering 400 bad_input. */
int sessions_valid_answer(req_t *r, const json_t *iid, const json_t *resp, const json_t *reason);

/* Record answers ([{interactionId, response[, reason]}], at most SSTORE_EVENTS_MAX,
 * each checked with sessions_valid_answer; no interactionId: the one pending) to
 * session id's input requests in one command, as POST /v1/sessions/{id}/input does
 * for one: all or none. With skip_answered, those answered already are left out (409
 * input_answered if all are). *at gets the offset of the first written. 0, or -1
 * after answering. */
int sessions_answers(req_t *r, const char *id, const json_t *answers, int skip_answered, offset_t *at);

/* The session id that path ("{id}" or "{id}/...") begins with, into id: what follows
 * it ("" or "/..."), or NULL after answering 404 (not an id). */
const char *sessions_path_id(req_t *r, const char *path, char id[SSTORE_ID_MAX]);

/* The id of a new session into id: the one asked for (idj, a valid id string), or a
 * fresh one (under the token's prefix when its sessions:write scope has one). 0, or
 * -1 after answering 403 when the token may not create it. */
int sessions_new_id(req_t *r, const json_t *idj, char *id, size_t cap);

/* Fork session id (the caller may read it) at `at` (has_at; else its tail) into a new
 * session (sessions_new_id of idj) with recording setting rec (NULL: the source's),
 * as POST /v1/sessions/{id}/fork does; nid gets its id. 0, or -1 after answering
 * (400 bad_offset, 403, 404, 409 session_exists, 5xx). */
int sessions_fork(req_t *r, const char *id, const json_t *idj, int has_at, offset_t at, const json_t *rec,
                  char nid[SSTORE_ID_MAX]);

/* Create session id, a chat with agent name (is_agent) or a run of the latest version
 * of workflow name with input, with recording setting rec (NULL: none given),
 * labels (a JSON object lib/sfilter checked, or NULL: none) and its own budget limits
 * (NULL: none; checked by the caller), as POST /v1/sessions does; the caller has
 * checked that the token may write id. 0, or -1 after answering (422 unknown_agent /
 * unknown_workflow, 409 session_exists, 5xx). */
int sessions_create(req_t *r, const char *id, int is_agent, const char *name, const json_t *input, const json_t *rec,
                    const json_t *labels, const json_t *limits);

/* Answer session id's human input interaction (NULL: the one pending) with response,
 * as POST /v1/sessions/{id}/input does; *at gets the answer's offset. 0, or -1 after
 * answering (400 bad_response, 404, 409 input_not_requested / input_answered, ...). */
int sessions_answer(req_t *r, const char *id, const char *interaction, json_t *response, offset_t *at);

/* POST /v1/sessions/{id}/cancel: the session is cancelled (cancel:requested); 202
 * {id, offset}, or the error. */
void sessions_cancel(req_t *r, const char *id);

/* POST /v1/sessions/{id}/stop: a chat's reply under way stops (stop:requested; the
 * runner answers reply:stopped); 202 {id, offset}, or the error. */
void sessions_stop(req_t *r, const char *id);

/* POST /v1/sessions/{id}/compact: a chat's older history is summarized now
 * (compact:requested; the runner answers session:compacted); 202 {id, offset,
 * queued, upTo, messages}, or the error (409 busy, nothing_to_compact, not_a_chat). */
void sessions_compact(req_t *r, const char *id);

#endif

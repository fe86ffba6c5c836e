/* recorder: recordings of provider exchanges, for playback without the provider
 * (docs/recording.md).
 *
 * A request is known by its key: the SHA-256 of the canonical JSON (keys sorted,
 * compact) of its normalized form {"provider", "model", "system", "messages",
 * "tools", "parameters"}, built from the request body lib/provider makes. Nothing
 * else goes in: not the API key (it is only in the headers), not the endpoint's
 * host, not the request id, not the streaming switches. The same request asked
 * twice in a session (a 529, then its retry) is told apart by its occurrence, the
 * number of times the session asked it before.
 *
 * The rows live in sql/sqlite/010_recordings.sql: opened when the request starts, the
 * response body appended in chunks, ended when the exchange ended. A row never
 * ended (its runner was killed) stays incomplete and is never served. The
 * functions taking a log_conn_t do no transaction of their own: the runner calls
 * them inside its commit, so that a recording and the events it produced are
 * written together. */
#ifndef DSTREAM_RECORDER_H
#define DSTREAM_RECORDER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "log.h"

#define REC_KEY_LEN 64              /* hex SHA-256 */
#define REC_LINEAGE_MAX 16          /* a session and its ancestors, for lookups */
#define REC_NEAREST_SCAN 200        /* recordings compared when looking for the nearest */
#define REC_VALUE_MAX 160           /* bytes of a value shown in a difference */
#define REC_SCOPE_MAX 16            /* prefixes a session's recordingScope may name */

typedef enum { REC_LIVE, REC_RECORD, REC_PLAYBACK, REC_HYBRID } rec_mode;

/* "live", "record", "playback", "hybrid" -> mode; -1 if unknown. */
int rec_mode_parse(const char *s);
const char *rec_mode_name(rec_mode m);

/* The normalized request of a provider request body (lib/provider's
 * provider_request_body) for provider kind "anthropic" or "openai". New reference;
 * NULL if body is not an object. */
json_t *rec_normalize(const char *kind, const json_t *body);

/* The key of a normalized request: 64 hex digits and a NUL in out. 0, or -1. */
int rec_key(const json_t *norm, char out[REC_KEY_LEN + 1]);

/* The key of a recording of kind "provider" (rec_key of its normalized request),
 * "tool" (of {"kind": "tool", "call": {"server", "tool", "arguments"}}) or "tools"
 * (an MCP server's tool list: of {"kind": "tools", "server": {"server"}}); request is
 * what the row stores. 0, or -1 (unknown kind). */
int rec_key_of(const char *kind, const json_t *request, char out[REC_KEY_LEN + 1]);

/* The first difference between a recorded and a requested normalized request,
 * walking provider, model, system, tools, parameters, messages in that order and
 * inside them in order (object keys sorted): its path in path ("messages[2].content",
 * "system", "parameters.temperature"), and both values as compact JSON (cut at
 * REC_VALUE_MAX, "(absent)" when missing) in rec_v/req_v. Returns 1 if they
 * differ, 0 if equal. */
int rec_diff(const json_t *recorded, const json_t *requested, char *path, size_t pcap, char *rec_v,
             size_t rcap, char *req_v, size_t qcap);

/* How alike two normalized requests are (higher: closer): the fields equal
 * before the messages, then the messages equal from the start. */
long rec_similarity(const json_t *a, const json_t *b);

/* ---- the database ------------------------------------------------------------------- */

typedef struct rec_id {
    const char *session;
    const char *kind;               /* "provider", "tool" or "tools" */
    const char *key;
    int occurrence;
} rec_id;

/* Open a recording (replacing an unfinished one with the same identity). */
int rec_tx_open(log_conn_t *c, const rec_id *id, const char *request_id, const char *provider,
                const char *model, const char *request_json, int64_t now_ms);
/* Append chunk seq (0, 1, ...) received t_ms after the start. */
int rec_tx_chunk(log_conn_t *c, const rec_id *id, int seq, int64_t t_ms, const void *data, size_t len);
/* End it: complete, with the HTTP status, the transport result and meta (borrowed, may be NULL). */
int rec_tx_end(log_conn_t *c, const rec_id *id, long status, int result, const json_t *meta, int64_t now_ms);

/* A row of recordings as an engine hands it out (lib/store.h): the texts are the
 * engine's, valid during the callback only; has_* say whether a value is set. */
typedef struct rec_row {
    int64_t rowid;
    const char *session, *kind, *key;
    int has_occurrence;
    int64_t occurrence;
    const char *request_id, *provider, *model;
    int complete, pinned;
    int has_status, has_result, has_created, has_ended;
    int64_t status, result, created_ms, ended_ms;
    const char *meta;               /* JSON text, or NULL */
    int64_t bytes;                  /* of its chunks (lists) */
    const char *request;            /* the normalized request (full rows), or NULL */
} rec_row;

typedef struct rec_found {
    int64_t rowid;
    char session[64];
    int occurrence;
    long status;
    int result;
    json_t *meta;                   /* owned (NULL if none) */
} rec_found;

/* The complete recording of key to serve as answer n (n: how many earlier requests
 * of key the asking session had answered; an attempt cut off by a restart got no
 * answer and does not count): in the first session of lineage[0..nl) that has one,
 * the complete recording whose meta.ordinal is n (the runner writes each one's at
 * its end), or, for a recording without one (made before ordinals), the first complete
 * occurrence >= n there (with n = REC_LATEST: the last one there); if none of them
 * has it, the same in the session that recorded key last among those reach allows.
 * reach is the asking session's scope (docs/recording.md): a JSON array of the
 * session-id prefixes whose recordings it may use, or NULL for every session; the
 * lineage is the caller's to choose and is not filtered. Returns 1 (found, free
 * out->meta), 0 (none), or LOG_E*. */
#define REC_LATEST (-1)
int rec_find(log_conn_t *c, const char *kind, const char *key, int n, const char *const *lineage, size_t nl,
             const char *reach, rec_found *out);

/* Which recorded tool list of MCP server `server` the k-th answered provider request
 * of session (its k-th complete provider recording, 0 first, in the order they
 * started) was built with: the occurrence of that tools recording (meta.tools), -1 if
 * the session has no such request or it names none, or LOG_E*. Playback offers each
 * request the list its recorded counterpart had. */
int rec_tools_used(log_conn_t *c, const char *session, int k, const char *server);

/* Call fn for each chunk of recording rowid, in order. Returns 0, fn's non-zero, or LOG_E*. */
int rec_chunks(log_conn_t *c, int64_t rowid, int (*fn)(void *ud, int64_t t_ms, const void *p, size_t n),
               void *ud);

/* The complete recording nearest to norm (by rec_similarity; lineage first, then
 * the REC_NEAREST_SCAN most recent of the sessions reach allows, as in rec_find), as
 * the nearest{} of recording:request ({"key", "session", "occurrence", "field",
 * "recorded", "requested"}): where it differs first. New reference, or NULL if there
 * is no recording of the same provider kind that the asker may see. */
json_t *rec_nearest(log_conn_t *c, const char *kind, const json_t *norm, const char *const *lineage, size_t nl,
                    const char *reach);

/* Why a request (what: "request", "tool call") of key, its occurrence occ and
 * answer ordinal ord, was not answered from a recording, in words, into out: the
 * same request recorded fewer times than asked; or none, and where the nearest
 * (rec_nearest's, NULL: none) differs; or nothing like it at all. Names the key,
 * the occurrence and, for the nearest, its key, session and field. out is UTF-8 (a
 * value cut inside a character ends in '?'). */
void rec_explain(const char *what, const char *key, int occ, int ord, const json_t *near, char *out, size_t cap);

/* ---- managing recordings (GET /v1/recordings, dstream recordings) ------------------------ */

#define REC_LIST_MAX 100
#define REC_IMPORT_LINE_MAX (64 << 20)  /* longest line of an export accepted */

/* Recordings (without their chunks), newest first, filtered by session, provider
 * and model (each NULL: any), after cursor (a rowid, 0: from the newest), at most
 * limit: objects appended to arr; *next gets the cursor of the next page (0: none). */
int rec_list(log_conn_t *c, const char *session, const char *provider, const char *model, int64_t cursor, int limit,
             json_t *arr, int64_t *next);
/* Every recording of key, with its request and its chunks ({"t", "data"}, data as
 * text when it is UTF-8, else "base64"). New reference, NULL if none (or *rc set). */
json_t *rec_get(log_conn_t *c, const char *key, int *rc);
/* Delete every recording of key (pinned or not). Returns how many, or LOG_E* (< 0). */
int rec_delete(log_conn_t *c, const char *key);
/* Pin (1) or unpin (0) every recording of key. Returns how many, or LOG_E*. */
int rec_pin(log_conn_t *c, const char *key, int pinned);
/* The unpinned recordings of session go with it (sstore_delete, inside its transaction). */
int rec_tx_delete_session(log_conn_t *c, const char *session);
/* The unpinned recordings created before cutoff_ms: counted (and their bytes) and,
 * unless dry_run, deleted. 0 or LOG_E*. */
int rec_prune(log_conn_t *c, int64_t cutoff_ms, int dry_run, int64_t *count, int64_t *bytes);

/* Export: each recording (of session, or all when NULL) as one JSON line, its
 * chunks in base64: {"session", "kind", "key", "occurrence", "requestId",
 * "provider", "model", "request", "complete", "status", "result", "meta",
 * "createdMs", "endedMs", "pinned", "chunks": [{"t", "b64"}]}. fn gets each line
 * (without its newline); its non-zero stops. Returns 0, fn's value or LOG_E*. */
int rec_export(log_conn_t *c, const char *session, int (*fn)(void *ud, const char *line, size_t len), void *ud);
/* Parse and check one exported line: every field of the right type, each chunk
 * valid base64, the key that of the request (a line cannot file a request under
 * another's key). New reference, or NULL with the reason in err. */
json_t *rec_import_parse(const char *line, size_t len, char *err, size_t errcap);
/* Store a parsed line (replacing the recording with the same identity). 0 or LOG_E*. */
int rec_tx_import(log_conn_t *c, const json_t *rec);

/* Standard base64 (padding required) into out: 0, or -1 if s is not base64. */
int rec_base64_decode(const char *s, size_t len, buf_t *out);

/* ---- drift -------------------------------------------------------------------------- */

/* Add one session event (a parsed envelope) to a drift report {"requests": [...],
 * "hit", "miss", "diverged", "recorded"}: recording:request events become entries. */
void rec_drift_add(json_t *report, const json_t *event);
/* An empty drift report. New reference. */
json_t *rec_drift_new(void);

#endif

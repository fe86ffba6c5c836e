/* dstream-runner: shared state of the daemon (one thread, one event loop). */
#ifndef DSTREAM_RUNNER_H
#define DSTREAM_RUNNER_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdint.h>

#include "../lib/buf.h"
#include "../lib/log.h"
#include "../lib/provider.h"
#include "../lib/session.h"
#include "../lib/sstore.h"

#define RUNNER_MAX_ATTEMPTS 5       /* provider attempts per request */
#define RUNNER_MAX_TURNS 8          /* tool-call turns per chat reply */

typedef struct sess sess_t;

/* One provider request in flight (a curl easy handle). */
typedef struct rq {
    sess_t *s;
    CURL *easy;
    struct curl_slist *hdrs;
    provider_parser *parser;
    provider_kind kind;
    char id[72];
    char model[136];
    int attempt;
    long status;
    char retry_after[96];
    char *body;                 /* request JSON */
    char url[512];
    buf_t errbody;              /* body of a non-200 answer */
    buf_t text, thinking;       /* deltas not yet appended */
    buf_t full;                 /* the whole reply text (a workflow step's output) */
    json_t *tool_calls;         /* complete calls of this turn */
    int64_t in_tok, out_tok;
    char stop[40];
    int done;                   /* PEV_DONE seen */
    int stream_error;           /* PEV_ERROR seen or protocol error */
    char error[256];
    int emitted;                /* deltas were appended under this id */
    int64_t started_ms;
    int step_agent;             /* a workflow agent step (else a chat reply) */
    int turns;
} rq_t;

/* A session the runner knows of. */
struct sess {
    char id[SSTORE_ID_MAX];
    int dirty;                  /* look at it again */
    int64_t timer_ms;           /* wake at (0: none): retry, input timeout */
    int retry_attempt;          /* a retry is scheduled for this attempt */
    char retry_id[80];
    int held;                   /* we hold its lease */
    int64_t lease_renew_ms;
    rq_t *rq;
    json_t *agent;              /* agent document in use */
    json_t *workflow;           /* workflow document (workflow sessions) */
    sess_t *next;
};

typedef struct rmcp rmcp_t;

typedef struct runner {
    log_t *log;
    log_conn_t *conn;
    CURLM *multi;
    const char *owner;          /* lease owner id */
    int64_t lease_ms;
    const char *provider_url;   /* override every endpoint (tests) */
    json_t *pricing;
    char anthropic_key[512], openai_key[512];
    sess_t *sessions;
    int stopping;
    int64_t retry_base_ms, retry_max_ms;
    json_t *mcp_config;         /* the operator's MCP servers (DSTREAM_MCP_CONFIG) */
    rmcp_t *mcp;                /* their supervisor (runner/mcp.h) */
} runner_t;

/* driver.c */
sess_t *runner_session(runner_t *R, const char *id);
void runner_drive(runner_t *R, sess_t *s);
void runner_forget(runner_t *R, sess_t *s);
int runner_append(runner_t *R, sess_t *s, sstore_event *ev, size_t n);
void runner_request_finished(runner_t *R, rq_t *q, CURLcode result);
void runner_shutdown(runner_t *R);
/* s's timer fired: start its scheduled retry, or let drive() look at it. */
void runner_timer(runner_t *R, sess_t *s);
/* Start a scheduled retry: attempt under id (fresh: a new id, announced). */
void runner_retry(runner_t *R, sess_t *s, const session_view *v, const char *id, int attempt, int fresh);

/* request.c */
rq_t *request_start(runner_t *R, sess_t *s, const json_t *agent, const json_t *messages,
                    const char *id, int attempt, int step_agent);
void request_free(runner_t *R, rq_t *q);
/* Append the deltas received since the last flush. */
void request_flush(runner_t *R, rq_t *q);

void runner_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

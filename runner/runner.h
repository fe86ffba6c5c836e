/* dstream-runner: shared state of the daemon (one thread, one event loop). */
#ifndef DSTREAM_RUNNER_H
#define DSTREAM_RUNNER_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdint.h>

#include "../lib/buf.h"
#include "../lib/lease.h"
#include "../lib/log.h"
#include "../lib/provcfg.h"
#include "../lib/provider.h"
#include "../lib/retry.h"
#include "../lib/session.h"
#include "../lib/sstore.h"
#include "egress.h"

#define RUNNER_MAX_TURNS 8          /* tool-call turns per chat reply */
#define RUNNER_OUTBOX_MAX 4096      /* events one session may have waiting for a commit */

typedef struct sess sess_t;
typedef struct tcall tcall_t;
typedef struct rq rq_t;

/* What watches or answers a provider request besides the provider: a recording
 * or a playback (record.c), set on the request when it starts (q->tap, its data
 * q->rec). NULL for a live request that nothing records. */
typedef struct rq_tap {
    void (*body)(rq_t *q, const char *p, size_t len);      /* answer bytes as they come */
    void (*flush)(rq_t *q);                 /* the deltas so far were queued */
    /* A seed for the ids of q's tool calls that came without one: 0, or -1 for none. */
    int (*call_seed)(const rq_t *q, char *out, size_t cap);
    void (*finished)(rq_t *q, int result, long status);     /* the answer ended (CURLcode) */
    void (*free)(rq_t *q);                  /* q is being freed */
} rq_tap;

/* A write that belongs with a session's events (a recording's rows), made inside
 * the commit that writes them (runner/outbox runner_defer). */
typedef struct outbox_write {
    int (*tx)(log_conn_t *c, const char *sid, void *ud);    /* 0 or LOG_E* */
    void (*drop)(void *ud);     /* free ud, written or not */
    void *ud;
    struct outbox_write *next;
} outbox_write;

/* One provider request in flight (a curl easy handle). */
struct rq {
    sess_t *s;
    CURL *easy;
    struct curl_slist *hdrs;
    provider_parser *parser;
    provider_kind kind;
    char id[72];
    char model[136];
    int attempt;
    long status;
    char retry_after[96];       /* Retry-After */
    int64_t retry_after_ms;     /* retry-after-ms, -1 if not given */
    int should_retry;           /* x-should-retry: 1, 0, -1 if not given */
    char *body;                 /* request JSON */
    char url[512];
    provcfg_target target;      /* where it goes, and which key (lib/provcfg) */
    egress_t egress;            /* its connections held to the provider's addresses (runner/egress) */
    buf_t errbody;              /* body of a non-200 answer */
    buf_t text, thinking;       /* deltas not yet appended */
    buf_t full;                 /* the whole reply text (a workflow step's output) */
    int full_over;              /* the reply was longer than full may hold */
    json_t *tool_calls;         /* complete calls of this turn: {callId, name, arguments} (PK_*) */
    int64_t in_tok, out_tok;
    char stop[40];
    int done;                   /* PEV_DONE seen: the stream's terminal event */
    int stream_error;           /* PEV_ERROR seen */
    int malformed;              /* the parser could not read the stream */
    char error_type[64];        /* of the PEV_ERROR */
    char error[256];
    int emitted;                /* deltas were appended under this id */
    int64_t started_ms;
    int step_agent;             /* a workflow agent step (else a chat reply) */
    int turns;
    const rq_tap *tap;          /* recording or playback (record.c), NULL when live */
    struct rrec *rec;           /* ... its data */
};

/* A session the runner is looking after: one with something in flight or
 * scheduled here, or one it has been told about and not yet looked at. */
struct sess {
    char id[SSTORE_ID_MAX];
    int dirty;                  /* its log changed: look at it again */
    int due;                    /* its timer fired, or its lease needs renewing */
    int64_t timer_ms;           /* look again at (0: none): a retry, a checkpoint's
                                   expiry, another runner's lease expiring */
    int held;                   /* this process holds its lease */
    int64_t other_until;        /* another runner holds it until then (as last seen) */
    int64_t lease_renew_ms;
    int64_t lease_expires_ms;   /* our lease runs out then, unless renewed */
    uint64_t known_seq;         /* the log's tail as this process last knew it */
    rq_t *rq;
    json_t *agent;              /* agent document in use */
    json_t *workflow;           /* workflow document (workflow sessions) */
    session_view view;          /* the log's tail as this process last wrote it */
    uint64_t view_seq;          /* ... at this position (0: not known) */
    sstore_event *out;          /* events decided, waiting for the loop's commit */
    size_t nout, capout;
    int out_deltas_only;        /* every event in out is a delta */
    tcall_t *calls;             /* tool calls running here (tools.c) */
    json_t *own_calls;          /* {callId: true}: recorded by this process, not yet run */
    json_t *servers;            /* [{server, tools}] offered to the model in the last request */
    outbox_write *writes;       /* other writes waiting for the commit (recordings: record.c) */
    json_t *rec_tools;          /* {server: {list, occurrence}}: MCP tool lists recorded or played (record.c) */
    int rec_mode_known, rec_mode, rec_realtime; /* its recording mode, read once (record.c) */
    char *rec_reach;            /* its recording scope: JSON array of session-id prefixes, NULL: every session (record.c) */
    json_t *rec_occ;            /* requests counted by key in its log up to rec_occ_next (record.c) */
    offset_t rec_occ_next;
    int rec_occ_read;
    sess_t *next;
};

typedef struct rmcp rmcp_t;

typedef struct runner {
    log_t *log;
    log_conn_t *conn;
    CURLM *multi;
    lease_id me;                /* runner id + this process's instance */
    char instance[LEASE_INSTANCE_LEN + 1];
    int64_t lease_ms;
    provcfg_t *providers;       /* DSTREAM_PROVIDERS, with keys */
    char start_error[256];      /* why request_start last returned NULL */
    json_t *pricing;
    char anthropic_key[512], openai_key[512];
    sess_t *sessions;
    int stopping;
    retry_config retry;
    uint64_t dropped;           /* events not written: the lease was lost */
    uint64_t commits;           /* loop commits */
    /* Limits (docs/agents.md, "Limits"); 0: none. */
    int64_t message_requests_max;   /* provider requests per user message */
    int64_t session_requests_max;   /* provider requests per session */
    int64_t session_events_max;     /* events per session */
    size_t workflow_state_max;      /* bytes of a workflow's state, a step's output or arguments */
    size_t tool_result_max;         /* bytes of one tool result (its JSON) */
    json_t *mcp_config;         /* the operator's MCP servers (DSTREAM_MCP_CONFIG) */
    rmcp_t *mcp;                /* their supervisor (runner/mcp.h) */
    int rec_mode;               /* DSTREAM_RECORDING (lib/recorder rec_mode) */
    int rec_realtime;           /* DSTREAM_RECORDING_TIMING=realtime */
    char start_reason[32];      /* the reason to fail with, when a request cannot start */
    /* A workflow step's tool call (its tool:called payload has a phase) ended:
     * tools.c reports it here (steps_tool_done, set by main.c). */
    void (*step_call_done)(struct runner *R, sess_t *s, const json_t *call, const json_t *result, int is_error,
                           int failed, int64_t duration_ms);
} runner_t;

/* driver.c */
sess_t *runner_session(runner_t *R, const char *id);
void runner_drive(runner_t *R, sess_t *s);
void runner_forget(runner_t *R, sess_t *s);
void runner_shutdown(runner_t *R);
/* This process no longer holds s's lease: drop what it had in flight. */
void runner_lost(runner_t *R, sess_t *s);
/* Commit the outbox (outbox_commit) and stop what each session whose events were
 * not written had in flight. Returns 0, or LOG_E* if the transaction failed. */
int runner_commit(runner_t *R);

/* tools.c: tool calls on the operator's MCP servers (runner/mcp.h). */
/* The agent as the request presents it (new reference): its system prompt with
 * its skills and, with_tools, its MCP servers' tools under their exposed names
 * (s->servers keeps them, with the operator's bindings of the agent's declared
 * tools, for resolving the calls). NULL while a server is starting or listing its
 * tools again (s's timer is set to look again); a server that cannot be had is
 * left out, with tool:server_failed. */
json_t *tools_agent(runner_t *R, sess_t *s, const json_t *agent, int with_tools);
/* Record the calls the request q asked for (tool:called, each resolved to its
 * server and tool and tagged side-effecting or not). They run once in the log. */
void tools_record(runner_t *R, sess_t *s, const rq_t *q);
/* Run the calls the log has without a result that are not running here. A call
 * this process did not record (its runner died) runs again only if it is
 * read-only; a side-effecting one is answered as failed, never run twice. */
void tools_run(runner_t *R, sess_t *s, const session_view *v);
/* Abandon s's calls (their results are no longer wanted here). */
void tools_forget(runner_t *R, sess_t *s);

/* steps.c: the workflow step kinds (runner/step.h) on the runner. */
/* Begin (open 0) or resume (open 1) the step def of v at phase/step. */
void steps_run(runner_t *R, sess_t *s, const session_view *v, const json_t *def, const char *phase, int step,
               int open);
/* A step's tool call ended: complete the step from its result. */
void steps_tool_done(runner_t *R, sess_t *s, const json_t *call, const json_t *result, int is_error, int failed,
                     int64_t duration_ms);

/* outbox.c: every event the runner writes goes through here. */
/* Queue an event for s (payload: a new reference, now the outbox's). */
void runner_emit(runner_t *R, sess_t *s, const char *type, json_t *payload);
/* The same with another actor (a static string). */
void runner_emit_as(runner_t *R, sess_t *s, const char *type, json_t *payload, const char *actor);
/* Queue a write to make with s's events, in the same commit, after them: tx(c,
 * s's id, ud) inside the transaction (0 or LOG_E*: the session's savepoint is rolled
 * back), then drop(ud) once it is written or thrown away. */
void runner_defer(sess_t *s, int (*tx)(log_conn_t *c, const char *sid, void *ud), void (*drop)(void *ud), void *ud);
/* What a commit did with a session's queue when it was not written. */
#define OUTBOX_LOST 2               /* another runner holds its lease: dropped (counted in R->dropped) */
#define OUTBOX_GONE 3               /* the session is gone */
#define OUTBOX_FAILED 4             /* the append failed (logged; s's timer looks again) */
typedef struct outbox_outcome {
    sess_t *s;
    int what;                   /* OUTBOX_* */
} outbox_outcome;
/* Commit every session's queued events in one transaction, each session's only
 * while this process holds its lease (else they are dropped and counted). Returns
 * 0 with the sessions whose queue was not written and why in *outcomes (an array
 * of *n, the caller's to free; NULL when every queue was written): the caller
 * stops what they have in flight. Or LOG_E* if the transaction failed (the events
 * stay queued for the next try; *n is 0). */
int outbox_commit(runner_t *R, outbox_outcome **outcomes, size_t *n);
/* Free s's queued events and writes without writing them. */
void runner_outbox_clear(sess_t *s);

/* request.c */
/* A request to the provider of agent (new, not yet sent): NULL if it cannot be
 * made, with the reason in R->start_error when the operator's configuration
 * refuses it. */
rq_t *request_new(runner_t *R, sess_t *s, const json_t *agent, const json_t *messages,
                  const char *id, int attempt, int step_agent);
/* q becomes s's request in flight; live: sent to the provider (else its tap
 * answers it). */
void request_send(runner_t *R, rq_t *q, int live);
void request_free(runner_t *R, rq_t *q);
/* Queue the deltas received since the last flush. */
void request_flush(runner_t *R, rq_t *q);
/* Feed q response body bytes as if they came from the provider (playback). */
void request_feed(rq_t *q, const char *p, size_t len);

/* record.c: recording and playback (lib/recorder, docs/recording.md). */
/* DSTREAM_RECORDING and DSTREAM_RECORDING_TIMING. Returns 0, or -1 after saying why. */
int record_config(runner_t *R);
/* Decide q's recording mode before it goes out (and set its tap unless it is
 * live): 0 it goes live (recorded or not), 1 a recording answers it (it must not go
 * out), -1 it fails (playback miss: the reason in R->start_error and
 * R->start_reason). Queues recording:request. */
int record_start(runner_t *R, sess_t *s, rq_t *q);
/* A tool call (its tool:called payload) is about to run: 0 run it (recorded if the
 * mode records), 1 it is answered (*result, a new reference, *is_error, *failed):
 * from a recording, or failed by a playback miss. Queues recording:request. */
int record_tool_start(runner_t *R, sess_t *s, const json_t *call, json_t **result, int *is_error, int *failed);
/* Its result came: recorded if record_tool_start recorded it. */
void record_tool_done(runner_t *R, sess_t *s, const json_t *call, const json_t *result, int is_error, int failed);
/* An MCP server's tools for s, as rmcp_tools answers (RMCP_*): in playback from the
 * latest recording of the server's list (the server is not started; asked only if
 * no list was ever recorded); in record and hybrid modes from the server, each list
 * the session has not recorded yet recorded. */
int record_tools(runner_t *R, sess_t *s, const char *server, const json_t **tools, char *err, size_t errcap);
/* The loop: the wait before the next playback chunk is due, and feeding them; a
 * request whose recorded answer has been fed whole ends with finished(R, q, result). */
int64_t record_wait(runner_t *R, int64_t now, int64_t wait);
void record_pump(runner_t *R, void (*finished)(runner_t *R, rq_t *q, CURLcode result));

/* providers.c */
/* Load DSTREAM_PROVIDERS (with keys) into R->providers; the built-in providers take
 * the keys load_keys found. Returns 0, or -1 after saying why on stderr. */
int runner_providers(runner_t *R);
/* Decide where q's request for agent goes (q->target, q->kind, q->url) and set the curl
 * options that hold it there: no redirects, http(s) only, no proxy, every socket's
 * address checked against the provider's policy. Returns 0, or -1 with the reason
 * in R->start_error. */
int providers_prepare(runner_t *R, rq_t *q, const json_t *agent);

#endif

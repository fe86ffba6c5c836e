/* types: the dstream-runner daemon's shared state (one thread, one event loop): the
 * runner, the sessions it looks after and their provider requests. Each file's
 * functions are in its own header (driver.h, turn.h, outbox.h, ...). */
#ifndef DSTREAM_RUNNER_TYPES_H
#define DSTREAM_RUNNER_TYPES_H

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
#include "sessidx.h"

#define RUNNER_OUTBOX_MAX 4096      /* events one session may have waiting for a commit */
#define RUNNER_CURL_BUFFER 4096     /* bytes of a provider request's receive buffer (curl's: 16 KiB) */

typedef struct sess sess_t;
typedef struct tcall tcall_t;
typedef struct rq rq_t;

/* What watches or answers a provider request besides the provider: a recording
 * or a playback (tap.c), set on the request when it starts (q->tap, its data
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
 * the commit that writes them (runner/outbox outbox_defer). */
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
    int continued;              /* it continues a cut attempt's text (lib/rturn: rturn_continuation) */
    int64_t started_ms;
    int step_agent;             /* a workflow agent step (else a chat reply) */
    int turns;
    const rq_tap *tap;          /* recording or playback (tap.c), NULL when live */
    struct rrec *rec;           /* ... its data */
    /* A compaction's summarization request (lib/compact): its text gathers in full
     * (no deltas), for session:compacted with these. */
    int compaction;
    char compact_reason[16];
    char compact_upto[40];      /* the offset of the first message kept */
    int64_t compact_before;     /* tokens estimated of the request before ... */
    int64_t compact_kept;       /* ... and of what stays, without the summary */
    int64_t first_ms;           /* when its first text or thinking came; 0: not yet */
    int stats_on;               /* counted as sent (runner/stats.c) */
};

/* A session the runner is looking after: one with something in flight or
 * scheduled here, or one it has been told about and not yet looked at. */
struct sess {
    char id[SSTORE_ID_MAX];
    int dirty;                  /* its log changed: look at it again */
    int due;                    /* its timer fired, or its lease needs renewing */
    int scanned;                /* found unfinished at start: not looked at yet */
    int64_t timer_ms;           /* look again at (0: none): a retry, a checkpoint's
                                   expiry, another runner's lease expiring */
    lease_clock lease;          /* its lease as this process last saw it (lib/lease) */
    int64_t deferred_ms;        /* a new claim put off until then: this process holds more
                                   than its share of the leases (driver.c hold); 0: none */
    int claiming;               /* its lease is to be taken (or renewed) with the turn's
                                   other claims, then it is driven (runner_claim) */
    int claim_due;              /* ... and was due when the claim was asked */
    int put_off;                /* not driven at the last turn (its drive budget spent):
                                   driven first at the next */
    uint64_t drive_turn;        /* the last turn that drove it or put it off (R->drive_turns):
                                   each session once a turn */
    uint64_t known_seq;         /* the log's tail as this process last knew it */
    int64_t stream_id;          /* its log's stream id, as the change feed said (0: not yet) */
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
    outbox_write *writes;       /* other writes waiting for the commit (recordings: tap.c) */
    json_t *rec_tools;          /* {server: {list, occurrence}}: MCP tool lists recorded or played (tap.c) */
    int rec_mode_known, rec_mode, rec_realtime; /* its recording mode, read once (tap.c) */
    char *rec_reach;            /* its recording scope: JSON array of session-id prefixes, NULL: every session (tap.c) */
    json_t *rec_occ;            /* requests counted by key in its log up to rec_occ_next (tap.c) */
    offset_t rec_occ_next;
    int rec_occ_read;
    sess_t *next, *prev;        /* the loop's list (R->sessions), unless parked */
    sess_t *hnext;              /* R->idx's chain */
    size_t heap_at;             /* parked: its place in R->idx's heap + 1 (0: on the list) */
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
    char start_error[256];      /* why request_new or tap_start last refused a request */
    json_t *pricing;
    char anthropic_key[512], openai_key[512];
    sess_t *sessions;           /* the sessions the loop looks at each turn */
    sessidx idx;                /* every session by id; the parked ones by time (sessidx.c) */
    int stopping;
    retry_config retry;
    uint64_t dropped;           /* events not written: the lease was lost */
    uint64_t commits;           /* loop commits */
    uint64_t commit_retries;    /* ... made again the careful way, a session having failed (outbox.c) */
    uint64_t wakes_own;         /* changes of a session that were this process's own deltas */
    uint64_t drives;            /* sessions looked at (runner_drive) */
    uint64_t views_kept;        /* ... of them from the view kept, not the log */
    uint64_t renewed_commit;    /* leases renewed in a loop commit (outbox.c) */
    uint64_t renewed_drive;     /* ... in a claim, by a drive (driver.c) */
    uint64_t claims, claim_commits; /* leases taken or renewed by drives, and the commits that took them */
    uint64_t drives_put_off;    /* turns whose drive budget left sessions to the next */
    /* Leases given up, to be released in the next commit (outbox_release): a
     * session ending costs no commit of its own. */
    char (*releases)[SSTORE_ID_MAX];
    size_t nreleases, capreleases;
    int release_waits;          /* commits that renewed leases and so left them (outbox.c) */
    uint64_t released;          /* leases released in loop commits */
    int put_off_n;              /* the sessions the last turn left (sess_t.put_off) */
    uint64_t drive_turns;       /* turns that drove sessions (sess_t.drive_turn) */
    /* The share of the sessions between runners (driver.c hold): the other live
     * runners and the leases they hold, as their runner_stats rows said at the last
     * read (once a second, stats.c), plus the sessions this process found taken by
     * another since; this runner's rank among the live ones by id; the leases held
     * here, counted before a turn's first claim decision (fair_stale: not yet
     * this turn) plus those taken since. */
    int64_t fair_peers, fair_peer_leases, fair_rank, fair_mine;
    int fair_stale;
    uint64_t deferred;          /* new claims put off for the share */
    /* Limits (docs/agents.md, "Limits"); 0: none. */
    int64_t message_requests_max;   /* provider requests per user message */
    int64_t session_requests_max;   /* provider requests per session */
    int64_t session_events_max;     /* events per session */
    size_t workflow_state_max;      /* bytes of a workflow's state, a step's output or arguments */
    size_t tool_result_max;         /* bytes of one tool result (its JSON) */
    json_t *mcp_config;         /* the operator's MCP servers (DSTREAM_MCP_CONFIG) */
    rmcp_t *mcp;                /* their supervisor (runner/mcp_pool.h) */
    int rec_mode;               /* DSTREAM_RECORDING (lib/recorder rec_mode) */
    int rec_realtime;           /* DSTREAM_RECORDING_TIMING=realtime */
    char start_reason[32];      /* the reason to fail with, when a request cannot start */
    /* A workflow step's tool call (its tool:called payload has a phase) ended:
     * tools.c reports it here (steps_tool_done, set by dstream_runner.c). */
    void (*step_call_done)(struct runner *R, sess_t *s, const json_t *call, const json_t *result, int is_error,
                           int failed, int64_t duration_ms);
} runner_t;

#endif

/* rstats: the runner's counters, published through the database so that the
 * responder pool can serve them in GET /metrics.
 *
 * The runner and the pool share nothing but the database, so each runner keeps one
 * row of runner_stats (sql/009) up to date, at most once a second (a small write
 * of its own, committed with the group commit like any other); the pool reads the
 * rows on each scrape. A row whose updated_ms is old belongs to a runner that has
 * stopped or hangs. */
#ifndef DSTREAM_RSTATS_H
#define DSTREAM_RSTATS_H

#include <stdint.h>

#include "log.h"

#define RSTATS_OWNER_MAX 128

typedef struct rstats {
    char owner[RSTATS_OWNER_MAX];
    int64_t pid, started_ms, updated_ms, starts;
    int64_t sessions, leased, in_flight;
    int64_t requests, retries, failures;
    int64_t loops, loop_max_ms;
    int64_t dropped;            /* events not written: the session's lease was lost */
} rstats;

/* A runner process with this owner id started: count it (starts + 1) and reset the
 * row's figures to s's. Returns 0 or LOG_E*. */
int rstats_start(log_conn_t *c, const rstats *s);

/* Publish s (owner, pid and every figure but starts). Returns 0 or LOG_E*. */
int rstats_publish(log_conn_t *c, const rstats *s);

/* Call fn(ud, row) for every runner's row, by owner. Returns 0 or LOG_E* (a
 * database without the table yet reads as empty). */
int rstats_each(log_conn_t *c, void (*fn)(void *ud, const rstats *row), void *ud);

/* Call fn(ud, status, count) for the sessions of each status (deleted ones aside). */
int rstats_sessions(log_conn_t *c, void (*fn)(void *ud, const char *status, int64_t n), void *ud);

/* Figures by model, with histograms, by MCP server and by retry cause go to a small file beside
 * the database (DB-runner-OWNER.json, replaced whole by a rename) rather than into
 * a table: their shape (models, servers, buckets) is open-ended and only /metrics
 * reads them. */
#define RSTATS_BUCKETS 10
#define RSTATS_MODELS 32
#define RSTATS_MODEL_MAX 136

/* Upper bounds (seconds) of the histogram buckets; +Inf is the count. */
extern const double rstats_bucket_le[RSTATS_BUCKETS];

typedef struct rstats_hist {
    uint64_t bucket[RSTATS_BUCKETS];    /* observations <= rstats_bucket_le[i] (cumulative) */
    uint64_t count;
    double sum;
} rstats_hist;

typedef struct rstats_model {
    char model[RSTATS_MODEL_MAX];
    int64_t requests, failures;         /* attempts ended, and of those failed */
    int64_t input_tokens, output_tokens;
    double cost_usd;
    rstats_hist latency;                /* seconds from start to end of an attempt */
    rstats_hist first_token;            /* seconds from start to the first text */
} rstats_model;

/* Add one observation (seconds) to h. */
void rstats_hist_observe(rstats_hist *h, double seconds);

/* Figures by MCP server (the operator's servers, in the order of the runner's
 * configuration: the first RSTATS_MCP_SERVERS - 1 each have their own, the rest
 * share the last, named "other"). A call counts once started (rmcp_call_start on
 * a configured server), and once more under a reason if it failed. */
#define RSTATS_MCP_SERVERS 32
#define RSTATS_MCP_NAME_MAX 72

enum {
    RSTATS_MCP_ERROR,           /* the tool answered isError, a JSON-RPC error, or no result object */
    RSTATS_MCP_TIMEOUT,         /* no answer within the server's timeoutMs */
    RSTATS_MCP_CRASH,           /* the server exited, closed its output or broke the protocol mid-call */
    RSTATS_MCP_UNAVAILABLE,     /* not sent: the server failed to start too often */
    RSTATS_MCP_REASONS
};

/* The reasons' label values ("error", "timeout", "crash", "unavailable"). */
extern const char *const rstats_mcp_reason[RSTATS_MCP_REASONS];

typedef struct rstats_mcp {
    char server[RSTATS_MCP_NAME_MAX];
    int64_t calls;                          /* calls started */
    int64_t failures[RSTATS_MCP_REASONS];   /* calls that failed, by reason */
    int64_t starts;                         /* server processes started (restarts included) */
} rstats_mcp;

/* Provider retries by what caused them: the failed attempt's HTTP status ("429",
 * "529", ...) or, without one, "transport", "cut", "stream_error", "malformed" or
 * "restart" (lib/retry's kinds). The first RSTATS_RETRY_CAUSES - 1 causes seen each
 * have their own count; the rest share the last, named "other". */
#define RSTATS_RETRY_CAUSES 16
#define RSTATS_CAUSE_MAX 16

typedef struct rstats_retry {
    char cause[RSTATS_CAUSE_MAX];
    int64_t count;
} rstats_retry;

/* Count one retry caused by cause in v[0..*n) (see above). */
void rstats_retry_count(rstats_retry *v, int *n, const char *cause);

/* The OpenTelemetry export's figures (runner/traces.c): spans and POSTs the
 * receiver accepted, POSTs that failed. */
typedef struct rstats_otlp {
    int64_t spans;
    int64_t batches;
    int64_t failures;
} rstats_otlp;

/* Provider failovers (docs/agents.md, "Provider failover") by pair: from and to,
 * each "<provider>/<model>". The first RSTATS_FAILOVERS - 1 pairs seen each have
 * their own count; the rest share the last, whose from and to are "other". */
#define RSTATS_FAILOVERS 16
#define RSTATS_PAIR_MAX 200

typedef struct rstats_failover {
    char from[RSTATS_PAIR_MAX], to[RSTATS_PAIR_MAX];
    int64_t count;
} rstats_failover;

/* Count one failover from -> to in v[0..*n) (see above). */
void rstats_failover_count(rstats_failover *v, int *n, const char *from, const char *to);

/* The figures of models[0..n), MCP servers mcp[0..nmcp), retries[0..nretries), the
 * OpenTelemetry export (otlp; NULL: the runner does not export) and failovers
 * fo[0..nfo) for owner, saved beside the database at db_path. Returns 0 or -1. */
int rstats_figures_save(const char *db_path, const char *owner, const rstats_model *models, int n,
                        const rstats_mcp *mcp, int nmcp, const rstats_retry *retries, int nretries,
                        const rstats_otlp *otlp, const rstats_failover *fo, int nfo);

/* What rstats_figures_each calls for each figure of each runner's file (a NULL
 * callback: that kind is skipped), with ud. */
typedef struct rstats_figures_fn {
    void (*model)(void *ud, const char *owner, const rstats_model *m);
    void (*mcp)(void *ud, const char *owner, const rstats_mcp *m);
    void (*retry)(void *ud, const char *owner, const rstats_retry *r);
    void *ud;
    void (*otlp)(void *ud, const char *owner, const rstats_otlp *o);   /* after ud: optional */
    void (*failover)(void *ud, const char *owner, const rstats_failover *f);   /* optional */
} rstats_figures_fn;

/* Read every runner's file beside the database at db_path once (files that do not
 * parse are skipped) and call fn's callbacks for its models, MCP servers, retry
 * causes, OpenTelemetry export and failovers. Returns how many figures were passed. */
int rstats_figures_each(const char *db_path, const rstats_figures_fn *fn);

/* Keep owner's figures where the engine of c's database keeps them: a row of
 * runner_figures on PostgreSQL (written in a group: the pool may run on another
 * host), the file beside the database at db_path on SQLite (rstats_figures_save).
 * Returns 0 or -1. */
int rstats_figures_publish(log_conn_t *c, const char *db_path, const char *owner, const rstats_model *models,
                           int n, const rstats_mcp *mcp, int nmcp, const rstats_retry *retries, int nretries,
                           const rstats_otlp *otlp, const rstats_failover *fo, int nfo);

/* rstats_figures_each over what rstats_figures_publish kept for every runner. */
int rstats_figures_read(log_conn_t *c, const char *db_path, const rstats_figures_fn *fn);

#endif

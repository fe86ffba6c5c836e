/* metrics: the pool's counters, shared between its processes (see metrics.h).
 *
 * Counters are updated with atomic adds in the slot of the process that counts;
 * log and watcher figures are copied into it once a second by the process's main
 * thread (pool.c). A scrape sums the slots of live processes. */
#include "metrics.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../lib/buf.h"
#include "../lib/timefmt.h"
#include "../lib/retain.h"
#include "../lib/rstats.h"

static metrics_slot *slots;
static int nslots;
static metrics_slot *self;

int metrics_init(int n)
{
    void *p = mmap(NULL, (size_t)n * sizeof(metrics_slot), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    slots = p;
    nslots = n;
    return 0;
}

void metrics_attach(int i, int threads, int live_max)
{
    if (!slots || i < 0 || i >= nslots) return;
    self = &slots[i];
    __atomic_store_n(&self->busy, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&self->thread_readers, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&self->hub_readers, 0, __ATOMIC_RELAXED);
    self->threads = threads;
    self->live_max = live_max;
    __atomic_store_n(&self->pid, (int32_t)getpid(), __ATOMIC_RELEASE);
}

metrics_slot *metrics_self(void)
{
    return self;
}

void metrics_response(int status)
{
    if (!self) return;
    if (status == 0) {
        __atomic_add_fetch(&self->clients_gone, 1, __ATOMIC_RELAXED);
        return;
    }
    int k = status >= 200 && status < 600 ? status / 100 : 0;
    __atomic_add_fetch(&self->responses[k], 1, __ATOMIC_RELAXED);
}

void metrics_gauge(int64_t *gauge, int64_t delta)
{
    if (gauge) __atomic_add_fetch(gauge, delta, __ATOMIC_RELAXED);
}

static uint64_t sum(size_t off)
{
    uint64_t t = 0;
    for (int i = 0; i < nslots; i++) {
        if (!__atomic_load_n(&slots[i].pid, __ATOMIC_ACQUIRE)) continue;
        uint64_t v;
        memcpy(&v, (const char *)&slots[i] + off, sizeof v);
        t += v;
    }
    return t;
}

#define SUM(field) sum(offsetof(metrics_slot, field))

static void family(buf_t *b, const char *name, const char *type, const char *help)
{
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One part of the database's size (log_sizes): dstream_db_bytes{file="..."}. */
static void db_size(void *ud, const char *what, int64_t bytes)
{
    buf_printf(ud, "dstream_db_bytes{file=\"%s\"} %" PRId64 "\n", what, bytes);
}

/* A Prometheus label value: backslash, double quote and newline escaped. */
static void label(buf_t *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') buf_printf(b, "\\%c", *v);
        else if (*v == '\n') buf_printf(b, "\\n");
        else buf_printf(b, "%c", *v);
    }
}

/* The runners' rows of runner_stats (lib/rstats), one family at a time. */
typedef struct runner_rows {
    rstats *v;
    int n;
} runner_rows;

static void keep_row(void *ud, const rstats *row)
{
    runner_rows *rows = ud;
    if (rows->n >= 64) return;  /* more runner ids than any deployment has */
    rstats *v = realloc(rows->v, (size_t)(rows->n + 1) * sizeof *v);
    if (!v) return;
    rows->v = v;
    rows->v[rows->n++] = *row;
}

static void runner_family(buf_t *b, const runner_rows *rows, const char *name, const char *type,
                          const char *help, const char *extra, size_t off, int64_t div)
{
    if (!rows->n) return;
    if (help) family(b, name, type, help);
    for (int i = 0; i < rows->n; i++) {
        int64_t v;
        memcpy(&v, (const char *)&rows->v[i] + off, sizeof v);
        buf_printf(b, "%s{runner=\"", name);
        label(b, rows->v[i].owner);
        if (div > 1) buf_printf(b, "\"%s} %" PRId64 ".%03" PRId64 "\n", extra, v / div, v % div);
        else buf_printf(b, "\"%s} %" PRId64 "\n", extra, v);
    }
}

#define RUNNER(name, type, help, extra, field, div) \
    runner_family(b, rows, name, type, help, extra, offsetof(rstats, field), div)

static void session_count(void *ud, const char *status, int64_t n)
{
    buf_t *b = ud;
    buf_printf(b, "dstream_sessions{status=\"");
    label(b, status);
    buf_printf(b, "\"} %" PRId64 "\n", n);
}

/* What retention passes removed (lib/retain: totals kept in the database). */
typedef struct retain_figs {
    int64_t streams, sessions, snapshots, passes;
} retain_figs;

static void retain_total(void *ud, const char *what, int64_t n)
{
    retain_figs *f = ud;
    if (!strcmp(what, "streams")) f->streams = n;
    else if (!strcmp(what, "sessions")) f->sessions = n;
    else if (!strcmp(what, "snapshots")) f->snapshots = n;
    else if (!strcmp(what, "passes")) f->passes = n;
}

static void retain_metrics(req_t *r, buf_t *b)
{
    retain_figs f = {0, 0, 0, 0};
    retain_totals(r->log, retain_total, &f);
    family(b, "dstream_retention_deleted_streams_total", "counter",
           "Streams (not sessions') deleted by the retention policies (DSTREAM_RETENTION).");
    buf_printf(b, "dstream_retention_deleted_streams_total %" PRId64 "\n", f.streams);
    family(b, "dstream_retention_deleted_sessions_total", "counter",
           "Sessions deleted by the retention policies, each with its stream.");
    buf_printf(b, "dstream_retention_deleted_sessions_total %" PRId64 "\n", f.sessions);
    family(b, "dstream_retention_thinned_snapshots_total", "counter",
           "Snapshots of finished sessions removed by retention passes.");
    buf_printf(b, "dstream_retention_thinned_snapshots_total %" PRId64 "\n", f.snapshots);
    family(b, "dstream_retention_passes_total", "counter", "Retention passes finished.");
    buf_printf(b, "dstream_retention_passes_total %" PRId64 "\n", f.passes);
}

/* The runners' figures by model, MCP server and retry cause (lib/rstats: a file
 * beside the database per runner, read once per scrape). */
typedef struct fig_row {
    char owner[RSTATS_OWNER_MAX];
    union {
        rstats_model m;
        rstats_mcp s;
        rstats_retry r;
        rstats_otlp o;
        rstats_failover f;
    };
} fig_row;

typedef struct fig_rows {
    fig_row *v;
    int n;
} fig_rows;

typedef struct figures {
    fig_rows models, servers, retries, otlp, failovers;
} figures;

/* A new row of rows for owner (NULL past max rows or out of memory). */
static fig_row *row_add(fig_rows *rows, int max, const char *owner)
{
    if (rows->n >= max) return NULL;
    fig_row *v = realloc(rows->v, (size_t)(rows->n + 1) * sizeof *v);
    if (!v) return NULL;
    rows->v = v;
    snprintf(v[rows->n].owner, sizeof v[rows->n].owner, "%s", owner);
    return &v[rows->n++];
}

static void keep_model(void *ud, const char *owner, const rstats_model *m)
{
    fig_row *row = row_add(&((figures *)ud)->models, 64 * RSTATS_MODELS, owner);
    if (row) row->m = *m;
}

static void keep_mcp(void *ud, const char *owner, const rstats_mcp *m)
{
    fig_row *row = row_add(&((figures *)ud)->servers, 64 * RSTATS_MCP_SERVERS, owner);
    if (row) row->s = *m;
}

static void keep_retry(void *ud, const char *owner, const rstats_retry *r)
{
    fig_row *row = row_add(&((figures *)ud)->retries, 64 * RSTATS_RETRY_CAUSES, owner);
    if (row) row->r = *r;
}

static void keep_otlp(void *ud, const char *owner, const rstats_otlp *o)
{
    fig_row *row = row_add(&((figures *)ud)->otlp, 64, owner);
    if (row) row->o = *o;
}

static void keep_failover(void *ud, const char *owner, const rstats_failover *f)
{
    fig_row *row = row_add(&((figures *)ud)->failovers, 64 * RSTATS_FAILOVERS, owner);
    if (row) row->f = *f;
}

static void model_labels(buf_t *b, const fig_row *row)
{
    buf_printf(b, "{runner=\"");
    label(b, row->owner);
    buf_printf(b, "\",model=\"");
    label(b, row->m.model);
    buf_printf(b, "\"");
}

static void histogram(buf_t *b, const fig_rows *rows, const char *name, const char *help, size_t off)
{
    family(b, name, "histogram", help);
    for (int i = 0; i < rows->n; i++) {
        const rstats_hist *h = (const rstats_hist *)((const char *)&rows->v[i].m + off);
        for (int k = 0; k <= RSTATS_BUCKETS; k++) {
            buf_printf(b, "%s_bucket", name);
            model_labels(b, &rows->v[i]);
            if (k < RSTATS_BUCKETS) buf_printf(b, ",le=\"%g\"} %" PRIu64 "\n", rstats_bucket_le[k], h->bucket[k]);
            else buf_printf(b, ",le=\"+Inf\"} %" PRIu64 "\n", h->count);
        }
        buf_printf(b, "%s_sum", name);
        model_labels(b, &rows->v[i]);
        buf_printf(b, "} %.6f\n%s_count", h->sum, name);
        model_labels(b, &rows->v[i]);
        buf_printf(b, "} %" PRIu64 "\n", h->count);
    }
}

static void model_metrics(buf_t *b, const fig_rows *mrows)
{
    const fig_rows rows = *mrows;
    if (!rows.n) return;
    static const struct {
        const char *name, *type, *help, *extra;
        size_t off;
    } fam[] = {
        {"dstream_runner_model_requests_total", "counter", "Provider attempts ended, by model.", "",
         offsetof(rstats_model, requests)},
        {"dstream_runner_model_failures_total", "counter",
         "Provider attempts that ended without a 200 response or with an error in the stream, by model.", "",
         offsetof(rstats_model, failures)},
        {"dstream_runner_tokens_total", "counter", "Tokens the providers counted, by model and kind.",
         ",kind=\"input\"", offsetof(rstats_model, input_tokens)},
        {"dstream_runner_tokens_total", NULL, NULL, ",kind=\"output\"", offsetof(rstats_model, output_tokens)},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        if (fam[f].help) family(b, fam[f].name, fam[f].type, fam[f].help);
        for (int i = 0; i < rows.n; i++) {
            int64_t v;
            memcpy(&v, (const char *)&rows.v[i].m + fam[f].off, sizeof v);
            buf_printf(b, "%s", fam[f].name);
            model_labels(b, &rows.v[i]);
            buf_printf(b, "%s} %" PRId64 "\n", fam[f].extra, v);
        }
    }
    family(b, "dstream_runner_cost_usd_total", "counter", "Cost of the tokens (DSTREAM_PRICING), by model.");
    for (int i = 0; i < rows.n; i++) {
        buf_printf(b, "dstream_runner_cost_usd_total");
        model_labels(b, &rows.v[i]);
        buf_printf(b, "} %.6f\n", rows.v[i].m.cost_usd);
    }
    histogram(b, &rows, "dstream_runner_request_seconds", "Duration of provider attempts, by model.",
              offsetof(rstats_model, latency));
    histogram(b, &rows, "dstream_runner_first_token_seconds",
              "Time from the start of an attempt to its first output, by model.",
              offsetof(rstats_model, first_token));
}

static void mcp_labels(buf_t *b, const char *name, const fig_row *row)
{
    buf_printf(b, "%s{runner=\"", name);
    label(b, row->owner);
    buf_printf(b, "\",server=\"");
    label(b, row->s.server);
    buf_printf(b, "\"");
}

static void mcp_metrics(buf_t *b, const fig_rows *srows)
{
    const fig_rows rows = *srows;
    if (!rows.n) return;
    family(b, "dstream_runner_mcp_calls_total", "counter", "Tool calls started on the operator's MCP servers, by server.");
    for (int i = 0; i < rows.n; i++) {
        mcp_labels(b, "dstream_runner_mcp_calls_total", &rows.v[i]);
        buf_printf(b, "} %" PRId64 "\n", rows.v[i].s.calls);
    }
    family(b, "dstream_runner_mcp_call_failures_total", "counter",
           "MCP tool calls that failed, by server and reason (error: the tool or the server answered an error;"
           " timeout; crash: the server died or broke the protocol; unavailable: it failed to start).");
    for (int i = 0; i < rows.n; i++)
        for (int k = 0; k < RSTATS_MCP_REASONS; k++) {
            mcp_labels(b, "dstream_runner_mcp_call_failures_total", &rows.v[i]);
            buf_printf(b, ",reason=\"%s\"} %" PRId64 "\n", rstats_mcp_reason[k], rows.v[i].s.failures[k]);
        }
    family(b, "dstream_runner_mcp_server_starts_total", "counter",
           "MCP server processes started (a restart after a crash or an idle stop adds one), by server.");
    for (int i = 0; i < rows.n; i++) {
        mcp_labels(b, "dstream_runner_mcp_server_starts_total", &rows.v[i]);
        buf_printf(b, "} %" PRId64 "\n", rows.v[i].s.starts);
    }
}

static void retry_metrics(buf_t *b, const fig_rows *rows)
{
    if (!rows->n) return;
    family(b, "dstream_runner_retries_by_status_total", "counter",
           "Provider retries by what caused them: the failed attempt's HTTP status, or transport, cut,"
           " stream_error, malformed, restart.");
    for (int i = 0; i < rows->n; i++) {
        buf_printf(b, "dstream_runner_retries_by_status_total{runner=\"");
        label(b, rows->v[i].owner);
        buf_printf(b, "\",status=\"");
        label(b, rows->v[i].r.cause);
        buf_printf(b, "\"} %" PRId64 "\n", rows->v[i].r.count);
    }
}

/* The runners' OpenTelemetry export (runner/traces.c), of those that export. */
static void otlp_metrics(buf_t *b, const fig_rows *rows)
{
    static const struct {
        const char *name, *help;
    } fam[] = {
        {"dstream_runner_otlp_spans_exported_total", "Spans the OTLP receiver accepted (a span sent again counts again)."},
        {"dstream_runner_otlp_batches_total", "OTLP export requests the receiver accepted (a 2xx)."},
        {"dstream_runner_otlp_export_failures_total", "OTLP export requests that failed (no answer, or not a 2xx); each is tried again."},
    };
    if (!rows->n) return;
    for (int f = 0; f < 3; f++) {
        family(b, fam[f].name, "counter", fam[f].help);
        for (int i = 0; i < rows->n; i++) {
            const rstats_otlp *o = &rows->v[i].o;
            buf_printf(b, "%s{runner=\"", fam[f].name);
            label(b, rows->v[i].owner);
            buf_printf(b, "\"} %" PRId64 "\n", f == 0 ? o->spans : f == 1 ? o->batches : o->failures);
        }
    }
}

static void failover_metrics(buf_t *b, const fig_rows *rows)
{
    if (!rows->n) return;
    family(b, "dstream_runner_provider_failovers_total", "counter",
           "Provider requests that went on with an agent's fallback, by pair (<provider>/<model>).");
    for (int i = 0; i < rows->n; i++) {
        buf_printf(b, "dstream_runner_provider_failovers_total{runner=\"");
        label(b, rows->v[i].owner);
        buf_printf(b, "\",from=\"");
        label(b, rows->v[i].f.from);
        buf_printf(b, "\",to=\"");
        label(b, rows->v[i].f.to);
        buf_printf(b, "\"} %" PRId64 "\n", rows->v[i].f.count);
    }
}

/* What the runners publish (sql/009) and the sessions by status. */
static void runner_metrics(req_t *r, buf_t *b)
{
    runner_rows all = {NULL, 0}, *rows = &all;
    rstats_each(r->log, keep_row, &all);
    int64_t now = timefmt_now_ms();
    if (all.n) {
        family(b, "dstream_runner_up", "gauge",
               "1 if the runner published in the last 5 seconds (its loop is alive), else 0.");
        for (int i = 0; i < all.n; i++) {
            buf_printf(b, "dstream_runner_up{runner=\"");
            label(b, all.v[i].owner);
            buf_printf(b, "\"} %d\n", now - all.v[i].updated_ms <= 5000);
        }
    }
    RUNNER("dstream_runner_last_loop_timestamp_seconds", "gauge",
           "When the runner's loop last published its figures (Unix time).", "", updated_ms, 1000);
    RUNNER("dstream_runner_starts_total", "counter",
           "Runner processes started under this id (a restart adds one).", "", starts, 1);
    RUNNER("dstream_runner_sessions", "gauge", "Sessions the runner keeps, and those it holds the lease of.",
           ",state=\"known\"", sessions, 1);
    RUNNER("dstream_runner_sessions", "gauge", NULL, ",state=\"leased\"", leased, 1);
    RUNNER("dstream_runner_requests_in_flight", "gauge", "Provider requests in flight now.", "",
           in_flight, 1);
    RUNNER("dstream_runner_requests_total", "counter",
           "Provider attempts started since the runner started (retries included).", "", requests, 1);
    RUNNER("dstream_runner_retries_total", "counter", "Provider attempts that were retries.", "",
           retries, 1);
    RUNNER("dstream_runner_request_failures_total", "counter",
           "Provider attempts that ended without a 200 response or with an error in the stream.",
           "", failures, 1);
    RUNNER("dstream_runner_dropped_events_total", "counter",
           "Events not written because the runner had lost the session's lease by the time it committed them.",
           "", dropped, 1);
    RUNNER("dstream_runner_loops_total", "counter", "Iterations of the runner's loop.", "", loops, 1);
    RUNNER("dstream_runner_loop_max_seconds", "gauge",
           "Longest gap between two loop iterations in the last second published.", "", loop_max_ms,
           1000);
    free(all.v);
    figures fig;
    memset(&fig, 0, sizeof fig);
    rstats_figures_read(r->log, r->cfg->db_path,
                        &(rstats_figures_fn){keep_model, keep_mcp, keep_retry, &fig, keep_otlp, keep_failover});
    model_metrics(b, &fig.models);
    mcp_metrics(b, &fig.servers);
    retry_metrics(b, &fig.retries);
    otlp_metrics(b, &fig.otlp);
    failover_metrics(b, &fig.failovers);
    free(fig.failovers.v);
    free(fig.models.v);
    free(fig.servers.v);
    free(fig.retries.v);
    free(fig.otlp.v);
    family(b, "dstream_sessions", "gauge", "Sessions by status.");
    rstats_sessions(r->log, session_count, b);
    retain_metrics(r, b);
}

void metrics_handle(req_t *r)
{
    if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0) {
        res_method_not_allowed(r, "GET, HEAD");
        return;
    }
    if (!slots) {
        res_error(r, 404, "not_found", "no metrics in CGI mode");
        return;
    }
    buf_t b;
    buf_init(&b, 1 << 20);
    int procs = 0, threads = 0, live_max = 0;
    for (int i = 0; i < nslots; i++) {
        if (!__atomic_load_n(&slots[i].pid, __ATOMIC_ACQUIRE)) continue;
        procs++;
        threads += slots[i].threads;
        live_max += slots[i].live_max;
    }
    family(&b, "dstream_processes", "gauge", "Responder processes running.");
    buf_printf(&b, "dstream_processes %d\n", procs);
    family(&b, "dstream_threads", "gauge", "Responder threads, and those serving a request now.");
    buf_printf(&b, "dstream_threads{state=\"all\"} %d\n", threads);
    buf_printf(&b, "dstream_threads{state=\"busy\"} %" PRId64 "\n", (int64_t)SUM(busy));
    family(&b, "dstream_http_responses_total", "counter",
           "Responses completed, by status class.");
    static const char *const cls[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (int k = 0; k < 6; k++) {
        if (k == 1) continue;
        buf_printf(&b, "dstream_http_responses_total{code=\"%s\"} %" PRIu64 "\n", cls[k],
                   sum(offsetof(metrics_slot, responses) + (size_t)k * sizeof(uint64_t)));
    }
    family(&b, "dstream_live_readers", "gauge",
           "Live readers (long-poll, SSE) waiting now, by what holds them.");
    buf_printf(&b, "dstream_live_readers{held_by=\"hub\"} %" PRId64 "\n", (int64_t)SUM(hub_readers));
    buf_printf(&b, "dstream_live_readers{held_by=\"thread\"} %" PRId64 "\n",
               (int64_t)SUM(thread_readers));
    family(&b, "dstream_live_readers_max", "gauge", "Waiting readers the hubs can hold.");
    buf_printf(&b, "dstream_live_readers_max %d\n", live_max);
    family(&b, "dstream_clients_gone_total", "counter",
           "Requests whose client left before the response was complete (mostly live readers).");
    buf_printf(&b, "dstream_clients_gone_total %" PRIu64 "\n", SUM(clients_gone));
    family(&b, "dstream_live_readers_shed_total", "counter",
           "Live readers dropped because the hub's buffers (DSTREAM_LIVE_BUFFER_MAX) were full.");
    buf_printf(&b, "dstream_live_readers_shed_total %" PRIu64 "\n", SUM(readers_shed));
    family(&b, "dstream_writes_total", "counter", "Write operations committed (appends, creates, ...).");
    buf_printf(&b, "dstream_writes_total %" PRIu64 "\n", SUM(appends));
    family(&b, "dstream_commit_groups_total", "counter",
           "Group commits (each one transaction and one fsync).");
    buf_printf(&b, "dstream_commit_groups_total %" PRIu64 "\n", SUM(groups));
    family(&b, "dstream_wake_checks_total", "counter", "Change queries run by the watchers.");
    buf_printf(&b, "dstream_wake_checks_total %" PRIu64 "\n", SUM(wake_checks));
    family(&b, "dstream_wake_wakeups_total", "counter", "Waiting readers (threads, and hubs per changed stream) woken by the watchers.");
    buf_printf(&b, "dstream_wake_wakeups_total %" PRIu64 "\n", SUM(wake_wakeups));
    family(&b, "dstream_live_reads_ahead_total", "counter",
           "Live reads the hubs had the database fetch together, several streams' at once"
           " (one statement on PostgreSQL; SQLite reads each in process).");
    buf_printf(&b, "dstream_live_reads_ahead_total %" PRIu64 "\n", SUM(reads_ahead));
    family(&b, "dstream_read_cache_hits_total", "counter",
           "Reads whose first page the pool's cache of streams' history had (DSTREAM_READ_CACHE_KB;"
           " PostgreSQL only: SQLite reads its pages in process).");
    buf_printf(&b, "dstream_read_cache_hits_total %" PRIu64 "\n", SUM(cache_hits));
    family(&b, "dstream_read_cache_misses_total", "counter",
           "Reads that fetched their first page from the database (PostgreSQL, with the cache).");
    buf_printf(&b, "dstream_read_cache_misses_total %" PRIu64 "\n", SUM(cache_misses));
    family(&b, "dstream_read_cache_bytes", "gauge", "Bytes the pool's cache of streams' history holds.");
    buf_printf(&b, "dstream_read_cache_bytes %" PRIu64 "\n", SUM(cache_bytes));
    family(&b, "dstream_db_bytes", "gauge", "Size of the database files.");
    log_sizes(r->log, db_size, &b);
    runner_metrics(r, &b);
    res_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    res_header(r, "Cache-Control", "no-store");
    res_write(r, b.p, strcmp(r->method, "HEAD") ? b.len : 0);
    buf_free(&b);
}

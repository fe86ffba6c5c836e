/* stats: what the runner is doing, for GET /metrics.
 *
 * Provider attempts are counted where they start (request_send) and end
 * (request_free, with their final HTTP status and whether the stream reported an
 * error): their model, tokens, cost (DSTREAM_PRICING), duration and time to first
 * output go into figures by model (lib/rstats, a file beside the database). The
 * loop's turns are counted by runner_stats_tick; the sessions in memory are
 * counted when the figures are published, once a period. The MCP servers' figures
 * are counted by runner/mcp_pool where calls end, failures by reason and starts,
 * and go into the same file when they changed. */
#include "stats.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/diag.h"
#include "../lib/cost.h"

#include "../lib/timefmt.h"
#include "../lib/rstats.h"
#include "mcp_pool.h"

#define STATS_PERIOD_MS RUNNER_STATS_PERIOD_MS

static struct {
    int started;
    rstats s;
    int64_t next_publish_ms, last_tick_ms;
    int publish_failed;
    rstats_model models[RSTATS_MODELS];
    int nmodels;
    int models_changed, models_failed;
    rstats_mcp mcp[RSTATS_MCP_SERVERS];
    int nmcp;
    rstats_retry retries[RSTATS_RETRY_CAUSES];
    int nretries;
    rstats_failover failovers[RSTATS_FAILOVERS];
    int nfailovers;
    rstats_otlp otlp;
    int otlp_on;
} st;

void runner_stats_otlp(const rstats_otlp *o)
{
    if (st.otlp_on && !memcmp(&st.otlp, o, sizeof *o)) return;
    st.otlp = *o;
    st.otlp_on = 1;
    st.models_changed = 1;
}

void runner_stats_failover(const char *from_provider, const char *from_model, const char *to_provider,
                           const char *to_model)
{
    char from[RSTATS_PAIR_MAX], to[RSTATS_PAIR_MAX];
    snprintf(from, sizeof from, "%s/%s", from_provider, from_model);
    snprintf(to, sizeof to, "%s/%s", to_provider, to_model);
    rstats_failover_count(st.failovers, &st.nfailovers, from, to);
    st.models_changed = 1;
}

void runner_stats_retry(const retry_failure *f)
{
    static const char *const kinds[] = {
        [RETRY_HTTP] = "http", [RETRY_TRANSPORT] = "transport", [RETRY_CUT] = "cut",
        [RETRY_STREAM_ERROR] = "stream_error", [RETRY_MALFORMED] = "malformed", [RETRY_RESTART] = "restart",
        [RETRY_REFUSED] = "refused",
    };
    char cause[RSTATS_CAUSE_MAX];
    if (f->kind == RETRY_HTTP && f->status >= 100 && f->status <= 999) snprintf(cause, sizeof cause, "%ld", f->status);
    else snprintf(cause, sizeof cause, "%s", (unsigned)f->kind < sizeof kinds / sizeof *kinds && kinds[f->kind] ? kinds[f->kind] : "other");
    rstats_retry_count(st.retries, &st.nretries, cause);
    st.models_changed = 1;
}

/* An attempt ended (now): count it under its model (the first RSTATS_MODELS models seen;
 * later ones share the last slot, named "other"). */
static void ended(runner_t *R, const rq_t *q, int failed, int64_t now)
{
    rstats_model *m = NULL;
    for (int i = 0; i < st.nmodels && !m; i++)
        if (!strcmp(st.models[i].model, q->model)) m = &st.models[i];
    if (!m && st.nmodels < RSTATS_MODELS) {
        m = &st.models[st.nmodels++];
        memset(m, 0, sizeof *m);
        snprintf(m->model, sizeof m->model, "%s", st.nmodels == RSTATS_MODELS ? "other" : q->model);
    }
    if (!m) m = &st.models[RSTATS_MODELS - 1];
    m->requests++;
    m->failures += failed;
    m->input_tokens += q->in_tok;
    m->output_tokens += q->out_tok;
    m->cost_usd += cost_usd(R->pricing, q->model, q->in_tok, q->out_tok);
    if (q->started_ms > 0 && now >= q->started_ms) rstats_hist_observe(&m->latency, (double)(now - q->started_ms) / 1000);
    if (q->first_ms > 0 && q->first_ms >= q->started_ms)
        rstats_hist_observe(&m->first_token, (double)(q->first_ms - q->started_ms) / 1000);
    st.models_changed = 1;
}

/* The MCP servers' figures (runner/mcp_pool counts them where calls end), the servers
 * past RSTATS_MCP_SERVERS - 1 summed as "other"; servers never used left out.
 * Marks the figures changed when they differ from the last taken. */
static void take_mcp(runner_t *R)
{
    rstats_mcp v[RSTATS_MCP_SERVERS], one;
    int n = 0;
    memset(v, 0, sizeof v);
    for (size_t i = 0; rmcp_stats(R->mcp, i, &one) == 0; i++) {
        if (!one.calls && !one.starts) continue;
        rstats_mcp *m = &v[n < RSTATS_MCP_SERVERS ? n : RSTATS_MCP_SERVERS - 1];
        if (n < RSTATS_MCP_SERVERS) n++;
        if (n == RSTATS_MCP_SERVERS && m == &v[RSTATS_MCP_SERVERS - 1]) snprintf(m->server, sizeof m->server, "other");
        else snprintf(m->server, sizeof m->server, "%s", one.server);
        m->calls += one.calls;
        m->starts += one.starts;
        for (int r = 0; r < RSTATS_MCP_REASONS; r++) m->failures[r] += one.failures[r];
    }
    if (n == st.nmcp && !memcmp(v, st.mcp, sizeof v)) return;
    memcpy(st.mcp, v, sizeof v);
    st.nmcp = n;
    st.models_changed = 1;
}

int64_t runner_stats_leased(const runner_t *R)
{
    int64_t n = 0;
    for (const sess_t *s = R->sessions; s; s = s->next) n += s->lease.held != 0;
    return n;
}

/* The sessions in memory (those parked too: sleeping, no lease; sessidx.c) and the
 * leases held, for the figures. */
static void count_sessions(const runner_t *R)
{
    st.s.sessions = R->idx.nheap;
    st.s.leased = 0;
    for (const sess_t *s = R->sessions; s; s = s->next) {
        st.s.sessions++;
        st.s.leased += s->lease.held != 0;
    }
}

void runner_stats_sent(rq_t *q)
{
    q->stats_on = 1;
    st.s.requests++;
    st.s.retries += q->attempt > 1;
    st.s.in_flight++;
}

void runner_stats_freed(runner_t *R, const rq_t *q)
{
    if (!q->stats_on) return;
    st.s.in_flight--;
    int failed = q->stream_error || q->status != 200;
    st.s.failures += failed;
    ended(R, q, failed, timefmt_now_ms());
}

/* A runner whose row is older than this is not counted among the live ones. */
#define PEER_FRESH_MS (3 * STATS_PERIOD_MS)

typedef struct peers {
    const runner_t *R;
    int64_t since, n, leases, rank;
} peers;

static void peer_row(void *ud, const rstats *row)
{
    peers *p = ud;
    if (row->updated_ms < p->since || strcmp(row->owner, p->R->me.owner) == 0) return;
    p->n++;
    p->rank += strcmp(row->owner, p->R->me.owner) < 0;
    p->leases += row->leased;
}

/* The other live runners (a row published within PEER_FRESH_MS), the leases they
 * hold and this runner's rank among them by id, for driver.c's share: one read of
 * runner_stats a second. A failed read
 * keeps what was known. */
static void read_peers(runner_t *R, int64_t now)
{
    peers p = {R, now - PEER_FRESH_MS, 0, 0, 0};
    if (rstats_each(R->conn, peer_row, &p)) return;
    R->fair_peers = p.n;
    R->fair_peer_leases = p.leases;
    R->fair_rank = p.rank;
}

void runner_stats_tick(runner_t *R)
{
    int64_t now = timefmt_now_ms();
    if (!st.started) {
        snprintf(st.s.owner, sizeof st.s.owner, "%s", R->me.owner);
        st.s.pid = getpid();
        st.s.started_ms = st.s.updated_ms = now;
        st.started = 1;
        st.last_tick_ms = now;
        st.next_publish_ms = now + STATS_PERIOD_MS;
        count_sessions(R);
        if (rstats_start(R->conn, &st.s)) diag("info", "stats: cannot publish to runner_stats");
        read_peers(R, now);
    }
    st.s.loops++;
    if (now - st.last_tick_ms > st.s.loop_max_ms) st.s.loop_max_ms = now - st.last_tick_ms;
    st.last_tick_ms = now;
    R->fair_stale = 1;
}

void runner_stats_publish(runner_t *R, int pending)
{
    int64_t now = timefmt_now_ms();
    if (!st.started || !runner_stats_due(now, st.next_publish_ms, pending)) return;
    st.s.updated_ms = now;
    st.s.dropped = (int64_t)R->dropped;
    count_sessions(R);
    int rc = rstats_publish(R->conn, &st.s);
    if (rc && !st.publish_failed) diag("info", "stats: cannot publish to runner_stats: %s", errs_str(rc));
    st.publish_failed = rc != 0;
    read_peers(R, now);
    take_mcp(R);
    if (st.models_changed) {
        int mrc = rstats_figures_publish(R->conn, log_path(R->log), st.s.owner, st.models, st.nmodels, st.mcp,
                                         st.nmcp, st.retries, st.nretries, st.otlp_on ? &st.otlp : NULL,
                                         st.failovers, st.nfailovers);
        if (mrc && !st.models_failed)
            diag("info", "stats: cannot keep the figures by model (beside the database, or in runner_figures)");
        st.models_failed = mrc != 0;
        st.models_changed = mrc != 0;
    }
    st.next_publish_ms = now + STATS_PERIOD_MS;
    st.s.loop_max_ms = 0;
}

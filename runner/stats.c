/* stats: what the runner is doing, for GET /metrics.
 *
 * The figures are observed, not counted where things happen: each loop iteration
 * this looks at the sessions in memory and the provider requests in flight and
 * compares the requests with those of the iteration before. A request it has not
 * seen is an attempt started (a retry if its attempt number is above 1); one that
 * is gone has ended, as a failure if its last HTTP status was not 200 or its
 * stream reported an error (each request notes the tick that saw it and its place
 * in that tick's set: no set is sorted, and only a new one's names are copied);
 * its model, tokens, cost (DSTREAM_PRICING), duration
 * and time to first output go into figures by model (lib/rstats, a file beside the
 * database). Called between libcurl's work of the turn and the handling of
 * finished transfers, it sees every attempt at least once and with its final
 * status. Keeping the counting here leaves the driver untouched. The MCP servers'
 * figures are the exception: runner/mcp_pool counts calls, failures by reason and
 * starts where they happen (no look from outside sees why a call failed), and
 * they go into the same file when they changed. */
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

typedef struct seen {
    const rq_t *q;
    struct seen *spare;         /* the next of the spare entries (seen_new) */
    char id[sizeof(((rq_t *)0)->id)];
    int attempt;
    int failed;
    char model[RSTATS_MODEL_MAX];
    int64_t in_tok, out_tok;
    int64_t started_ms;
    int64_t first_ms;           /* when output was first seen; 0: not yet */
    int64_t last_ms;            /* when last seen: the tick right after the transfer's end */
} seen;

/* A tick's requests: their entries, each made once for an attempt and moved from
 * tick to tick by its pointer (not copied: a busy runner has hundreds in flight and
 * thousands of ticks a second). */
typedef struct seen_set {
    seen **v;
    size_t n, cap;
} seen_set;

static struct {
    int started;
    rstats s;
    int64_t next_publish_ms, last_tick_ms;
    seen_set prev, cur;
    uint64_t tick;              /* observe's: the requests note the last that saw them */
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

/* An attempt ended: count it under its model (the first RSTATS_MODELS models seen;
 * later ones share the last slot, named "other"). */
static void ended(runner_t *R, const seen *e)
{
    int64_t now = e->last_ms;
    rstats_model *m = NULL;
    for (int i = 0; i < st.nmodels && !m; i++)
        if (!strcmp(st.models[i].model, e->model)) m = &st.models[i];
    if (!m && st.nmodels < RSTATS_MODELS) {
        m = &st.models[st.nmodels++];
        memset(m, 0, sizeof *m);
        snprintf(m->model, sizeof m->model, "%s", st.nmodels == RSTATS_MODELS ? "other" : e->model);
    }
    if (!m) m = &st.models[RSTATS_MODELS - 1];
    m->requests++;
    m->failures += e->failed;
    m->input_tokens += e->in_tok;
    m->output_tokens += e->out_tok;
    m->cost_usd += cost_usd(R->pricing, e->model, e->in_tok, e->out_tok);
    if (e->started_ms > 0 && now >= e->started_ms) rstats_hist_observe(&m->latency, (double)(now - e->started_ms) / 1000);
    if (e->first_ms > 0 && e->first_ms >= e->started_ms)
        rstats_hist_observe(&m->first_token, (double)(e->first_ms - e->started_ms) / 1000);
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

/* Whether prev's entry e is q as the last tick saw it (not another request at
 * the same address, nor the same one's next attempt). */
static int same(const seen *e, const rq_t *q)
{
    return e && e->q == q && e->attempt == q->attempt && strcmp(e->id, q->id) == 0;
}

/* Entries of attempts that ended, kept for the next ones (seen_trim gives them back
 * in the first tick with nothing in flight). */
static seen *seen_spare;

static seen *seen_new(void)
{
    seen *e = seen_spare;
    if (e) seen_spare = e->spare;
    else if (!(e = malloc(sizeof *e))) return NULL;
    memset(e, 0, sizeof *e);
    return e;
}

static void seen_free(seen *e)
{
    e->spare = seen_spare;
    seen_spare = e;
}

static void seen_trim(void)
{
    while (seen_spare) {
        seen *e = seen_spare;
        seen_spare = e->spare;
        free(e);
    }
}

/* A bounded copy of a string into dst[cap] (the model and id of a request). */
static void put_str(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void observe(runner_t *R, int64_t now)
{
    /* Nothing in flight since the last tick: the room a burst of requests grew goes
     * (two ticks free both sets). */
    if (!st.prev.n && st.cur.cap > 64) {
        free(st.cur.v);
        memset(&st.cur, 0, sizeof st.cur);
    }
    st.cur.n = 0;
    st.tick++;
    st.s.sessions = R->idx.nheap;   /* parked: sleeping, no lease (sessidx.c) */
    st.s.leased = 0;
    /* Each request in flight: seen by the tick before (its entry there, found by the
     * place it noted in the request, moves here), or started since. Those of the
     * tick before that no request claimed have ended. */
    for (sess_t *s = R->sessions; s; s = s->next) {
        st.s.sessions++;
        st.s.leased += s->lease.held != 0;
        rq_t *q = s->rq;
        if (!q) continue;
        if (st.cur.n == st.cur.cap) {
            size_t cap = st.cur.cap ? st.cur.cap * 2 : 64;
            seen **v = realloc(st.cur.v, cap * sizeof *v);
            if (!v) return;     /* out of memory: figures lag, nothing else */
            st.cur.v = v;
            st.cur.cap = cap;
        }
        seen *e;
        if (q->stats_tick == st.tick - 1 && q->stats_slot < st.prev.n && same(st.prev.v[q->stats_slot], q)) {
            e = st.prev.v[q->stats_slot];   /* still in flight: its first output keeps its time */
            st.prev.v[q->stats_slot] = NULL;
        } else {
            if (!(e = seen_new())) return;
            e->q = q;
            put_str(e->id, sizeof e->id, q->id);
            put_str(e->model, sizeof e->model, q->model);
            e->attempt = q->attempt;
            st.s.requests++;
            st.s.retries += q->attempt > 1;
        }
        e->failed = q->stream_error || q->status != 200;
        e->in_tok = q->in_tok;
        e->out_tok = q->out_tok;
        e->started_ms = q->started_ms;
        e->last_ms = now;
        if (!e->first_ms && (q->text.len || q->thinking.len || q->emitted)) e->first_ms = now;
        q->stats_tick = st.tick;
        st.cur.v[st.cur.n] = e;
        q->stats_slot = st.cur.n++;
    }
    for (size_t i = 0; i < st.prev.n; i++) {
        seen *e = st.prev.v[i];
        if (!e) continue;
        st.s.failures += e->failed;
        ended(R, e);
        seen_free(e);
    }
    /* Nothing in flight now: the spare entries go at once, in this tick, so that
     * the memory trim after a burst (memtrim_turn, after the tick) finds none of
     * them pinning a page of the heap. */
    if (!st.cur.n) seen_trim();
    st.s.in_flight = (int64_t)st.cur.n;
    seen_set t = st.prev;
    st.prev = st.cur;
    st.cur = t;
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
        memset(&st.s, 0, sizeof st.s);
        snprintf(st.s.owner, sizeof st.s.owner, "%s", R->me.owner);
        st.s.pid = getpid();
        st.s.started_ms = st.s.updated_ms = now;
        st.started = 1;
        st.last_tick_ms = now;
        st.next_publish_ms = now + STATS_PERIOD_MS;
        if (rstats_start(R->conn, &st.s)) diag("info", "stats: cannot publish to runner_stats");
        read_peers(R, now);
    }
    st.s.loops++;
    if (now - st.last_tick_ms > st.s.loop_max_ms) st.s.loop_max_ms = now - st.last_tick_ms;
    st.last_tick_ms = now;
    observe(R, now);
    R->fair_mine = st.s.leased;
}

void runner_stats_publish(runner_t *R, int pending)
{
    int64_t now = timefmt_now_ms();
    if (!st.started || !runner_stats_due(now, st.next_publish_ms, pending)) return;
    st.s.updated_ms = now;
    st.s.dropped = (int64_t)R->dropped;
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

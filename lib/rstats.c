#include "rstats.h"

#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

static int put_start(log_conn_t *c, void *arg)
{
    return store_of(c)->rstats->put(c, arg, 1);
}

static int put(log_conn_t *c, void *arg)
{
    return store_of(c)->rstats->put(c, arg, 0);
}

int rstats_start(log_conn_t *c, const rstats *s)
{
    return log_transact(c, put_start, (void *)s);
}

int rstats_publish(log_conn_t *c, const rstats *s)
{
    return log_transact(c, put, (void *)s);
}

int rstats_each(log_conn_t *c, void (*fn)(void *ud, const rstats *row), void *ud)
{
    return store_of(c)->rstats->each(c, fn, ud);
}

int rstats_sessions(log_conn_t *c, void (*fn)(void *ud, const char *status, int64_t n), void *ud)
{
    return store_of(c)->rstats->sessions(c, fn, ud);
}

/* ---- figures by model, in a file beside the database ------------------------------ */

const double rstats_bucket_le[RSTATS_BUCKETS] = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};

void rstats_hist_observe(rstats_hist *h, double seconds)
{
    for (int i = 0; i < RSTATS_BUCKETS; i++)
        if (seconds <= rstats_bucket_le[i]) h->bucket[i]++;
    h->count++;
    h->sum += seconds;
}

/* DB-runner-OWNER.json, the owner's characters outside [A-Za-z0-9._-] as '_'. */
static int models_path(const char *db_path, const char *owner, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s-runner-", db_path);
    if (n < 0 || (size_t)n >= cap) return -1;
    size_t len = (size_t)n;
    for (const char *p = owner; *p && len + 6 < cap; p++)
        out[len++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                             *p == '.' || *p == '_' || *p == '-'
                         ? *p
                         : '_';
    if (len + 6 >= cap) return -1;
    memcpy(out + len, ".json", 6);
    return 0;
}

static json_t *hist_json(const rstats_hist *h)
{
    json_t *b = json_array();
    for (int i = 0; i < RSTATS_BUCKETS; i++) json_array_append_new(b, json_integer((json_int_t)h->bucket[i]));
    return json_pack("{s:o, s:I, s:f}", "buckets", b, "count", (json_int_t)h->count, "sum", h->sum);
}

static void hist_load(const json_t *j, rstats_hist *h)
{
    const json_t *b = json_object_get(j, "buckets");
    for (int i = 0; i < RSTATS_BUCKETS; i++) h->bucket[i] = (uint64_t)json_integer_value(json_array_get(b, (size_t)i));
    h->count = (uint64_t)json_integer_value(json_object_get(j, "count"));
    h->sum = json_number_value(json_object_get(j, "sum"));
}

const char *const rstats_mcp_reason[RSTATS_MCP_REASONS] = {"error", "timeout", "crash", "unavailable"};

static json_t *mcp_json(const rstats_mcp *m)
{
    json_t *f = json_object();
    for (int r = 0; r < RSTATS_MCP_REASONS; r++)
        json_object_set_new(f, rstats_mcp_reason[r], json_integer((json_int_t)m->failures[r]));
    return json_pack("{s:s, s:I, s:I, s:o}", "server", m->server, "calls", (json_int_t)m->calls, "starts",
                     (json_int_t)m->starts, "failures", f);
}

void rstats_retry_count(rstats_retry *v, int *n, const char *cause)
{
    /* The last slot, once taken, is "other" and takes every cause not before it. */
    int i = 0;
    while (i < *n && i < RSTATS_RETRY_CAUSES - 1 && strcmp(v[i].cause, cause)) i++;
    if (i == *n) {
        snprintf(v[i].cause, sizeof v[i].cause, "%s", i == RSTATS_RETRY_CAUSES - 1 ? "other" : cause);
        v[i].count = 0;
        (*n)++;
    }
    v[i].count++;
}

void rstats_failover_count(rstats_failover *v, int *n, const char *from, const char *to)
{
    int i = 0;
    while (i < *n && i < RSTATS_FAILOVERS - 1 && (strcmp(v[i].from, from) || strcmp(v[i].to, to))) i++;
    if (i == *n) {
        int other = i == RSTATS_FAILOVERS - 1;
        snprintf(v[i].from, sizeof v[i].from, "%s", other ? "other" : from);
        snprintf(v[i].to, sizeof v[i].to, "%s", other ? "other" : to);
        v[i].count = 0;
        (*n)++;
    }
    v[i].count++;
}

/* The figures document of owner: {"owner", "models", "mcpServers", "retries",
 * "failovers", "otlp"}. */
static json_t *figures_doc(const char *owner, const rstats_model *models, int n, const rstats_mcp *mcp, int nmcp,
                           const rstats_retry *retries, int nretries, const rstats_otlp *otlp,
                           const rstats_failover *fo, int nfo)
{
    json_t *arr = json_array(), *servers = json_array();
    for (int i = 0; i < n; i++) {
        const rstats_model *m = &models[i];
        json_array_append_new(arr, json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:o, s:o}", "model", m->model,
                                             "requests", (json_int_t)m->requests, "failures",
                                             (json_int_t)m->failures, "inputTokens",
                                             (json_int_t)m->input_tokens, "outputTokens",
                                             (json_int_t)m->output_tokens, "costUsd", m->cost_usd,
                                             "latency", hist_json(&m->latency), "firstToken",
                                             hist_json(&m->first_token)));
    }
    for (int i = 0; i < nmcp; i++) json_array_append_new(servers, mcp_json(&mcp[i]));
    json_t *causes = json_array();
    for (int i = 0; i < nretries; i++)
        json_array_append_new(causes, json_pack("{s:s, s:I}", "cause", retries[i].cause, "count",
                                                (json_int_t)retries[i].count));
    json_t *pairs = json_array();
    for (int i = 0; i < nfo; i++)
        json_array_append_new(pairs, json_pack("{s:s, s:s, s:I}", "from", fo[i].from, "to", fo[i].to, "count",
                                               (json_int_t)fo[i].count));
    json_t *doc = json_pack("{s:s, s:o, s:o, s:o, s:o}", "owner", owner, "models", arr, "mcpServers", servers, "retries",
                            causes, "failovers", pairs);
    if (doc && otlp)
        json_object_set_new(doc, "otlp", json_pack("{s:I, s:I, s:I}", "spans", (json_int_t)otlp->spans, "batches",
                                                   (json_int_t)otlp->batches, "failures", (json_int_t)otlp->failures));
    return doc;
}

int rstats_figures_save(const char *db_path, const char *owner, const rstats_model *models, int n,
                        const rstats_mcp *mcp, int nmcp, const rstats_retry *retries, int nretries,
                        const rstats_otlp *otlp, const rstats_failover *fo, int nfo)
{
    char path[4300], tmp[4400];
    if (models_path(db_path, owner, path, sizeof path)) return -1;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    json_t *doc = figures_doc(owner, models, n, mcp, nmcp, retries, nretries, otlp, fo, nfo);
    int rc = doc && json_dump_file(doc, tmp, JSON_COMPACT) == 0 && rename(tmp, path) == 0 ? 0 : -1;
    if (rc) unlink(tmp);
    json_decref(doc);
    return rc;
}

static void model_load(const json_t *o, const char *name, rstats_model *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->model, sizeof m->model, "%s", name);
    m->requests = json_integer_value(json_object_get(o, "requests"));
    m->failures = json_integer_value(json_object_get(o, "failures"));
    m->input_tokens = json_integer_value(json_object_get(o, "inputTokens"));
    m->output_tokens = json_integer_value(json_object_get(o, "outputTokens"));
    m->cost_usd = json_number_value(json_object_get(o, "costUsd"));
    hist_load(json_object_get(o, "latency"), &m->latency);
    hist_load(json_object_get(o, "firstToken"), &m->first_token);
}

static void mcp_load(const json_t *o, const char *name, rstats_mcp *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->server, sizeof m->server, "%s", name);
    m->calls = json_integer_value(json_object_get(o, "calls"));
    m->starts = json_integer_value(json_object_get(o, "starts"));
    const json_t *f = json_object_get(o, "failures");
    for (int r = 0; r < RSTATS_MCP_REASONS; r++)
        m->failures[r] = json_integer_value(json_object_get(f, rstats_mcp_reason[r]));
}

/* The name of entry k of the array key of doc (at most max entries), or NULL. */
static const char *entry(const json_t *doc, const char *key, size_t k, size_t max, const char *namekey,
                         const json_t **o)
{
    *o = k < max ? json_array_get(json_object_get(doc, key), k) : NULL;
    return json_string_value(json_object_get(*o, namekey));
}

/* Call fn's callbacks for the figures of one runner's document doc (NULL or not
 * one: nothing). Returns how many were passed. */
static int figures_walk(const json_t *doc, const rstats_figures_fn *fn)
{
    int count = 0;
    const char *owner = json_string_value(json_object_get(doc, "owner")), *name;
    const json_t *o;
    size_t n = owner ? json_array_size(json_object_get(doc, "models")) : 0;
    for (size_t k = 0; fn->model && k < n; k++) {
        if (!(name = entry(doc, "models", k, RSTATS_MODELS, "model", &o))) continue;
        rstats_model m;
        model_load(o, name, &m);
        fn->model(fn->ud, owner, &m);
        count++;
    }
    n = owner ? json_array_size(json_object_get(doc, "mcpServers")) : 0;
    for (size_t k = 0; fn->mcp && k < n; k++) {
        if (!(name = entry(doc, "mcpServers", k, RSTATS_MCP_SERVERS, "server", &o))) continue;
        rstats_mcp m;
        mcp_load(o, name, &m);
        fn->mcp(fn->ud, owner, &m);
        count++;
    }
    n = owner ? json_array_size(json_object_get(doc, "retries")) : 0;
    for (size_t k = 0; fn->retry && k < n; k++) {
        if (!(name = entry(doc, "retries", k, RSTATS_RETRY_CAUSES, "cause", &o))) continue;
        rstats_retry r;
        snprintf(r.cause, sizeof r.cause, "%s", name);
        r.count = json_integer_value(json_object_get(o, "count"));
        fn->retry(fn->ud, owner, &r);
        count++;
    }
    n = owner ? json_array_size(json_object_get(doc, "failovers")) : 0;
    for (size_t k = 0; fn->failover && k < n; k++) {
        if (!(name = entry(doc, "failovers", k, RSTATS_FAILOVERS, "from", &o))) continue;
        const char *to = json_string_value(json_object_get(o, "to"));
        if (!to) continue;
        rstats_failover f;
        snprintf(f.from, sizeof f.from, "%s", name);
        snprintf(f.to, sizeof f.to, "%s", to);
        f.count = json_integer_value(json_object_get(o, "count"));
        fn->failover(fn->ud, owner, &f);
        count++;
    }
    const json_t *ot = owner ? json_object_get(doc, "otlp") : NULL;
    if (fn->otlp && json_is_object(ot)) {
        rstats_otlp fig = {json_integer_value(json_object_get(ot, "spans")),
                           json_integer_value(json_object_get(ot, "batches")),
                           json_integer_value(json_object_get(ot, "failures"))};
        fn->otlp(fn->ud, owner, &fig);
        count++;
    }
    return count;
}

int rstats_figures_each(const char *db_path, const rstats_figures_fn *fn)
{
    char pattern[4300];
    glob_t g;
    int count = 0;
    /* The database path is the operator's; escape what glob would read as a pattern. */
    size_t len = 0;
    for (const char *p = db_path; *p && len + 20 < sizeof pattern; p++) {
        if (*p == '*' || *p == '?' || *p == '[' || *p == '\\') pattern[len++] = '\\';
        pattern[len++] = *p;
    }
    memcpy(pattern + len, "-runner-*.json", 15);
    if (glob(pattern, 0, NULL, &g) != 0) return 0;
    /* Each file is read once, for every kind of figure asked for. */
    for (size_t i = 0; i < g.gl_pathc; i++) {
        json_t *doc = json_load_file(g.gl_pathv[i], 0, NULL);
        count += figures_walk(doc, fn);
        json_decref(doc);
    }
    globfree(&g);
    return count;
}

/* ---- figures by model through the engine ---------------------------------------- */

typedef struct figures_put_arg {
    const char *owner, *doc;
} figures_put_arg;

static int figures_put(log_conn_t *c, void *arg)
{
    const figures_put_arg *a = arg;
    return store_of(c)->rstats->figures_put(c, a->owner, a->doc);
}

int rstats_figures_publish(log_conn_t *c, const char *db_path, const char *owner, const rstats_model *models,
                           int n, const rstats_mcp *mcp, int nmcp, const rstats_retry *retries, int nretries,
                           const rstats_otlp *otlp, const rstats_failover *fo, int nfo)
{
    if (!store_of(c)->rstats->figures_put)
        return rstats_figures_save(db_path, owner, models, n, mcp, nmcp, retries, nretries, otlp, fo, nfo);
    json_t *doc = figures_doc(owner, models, n, mcp, nmcp, retries, nretries, otlp, fo, nfo);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) return -1;
    int rc = log_transact(c, figures_put, &(figures_put_arg){owner, text}) ? -1 : 0;
    free(text);
    return rc;
}

typedef struct figures_read_arg {
    const rstats_figures_fn *fn;
    int count;
} figures_read_arg;

static void figures_row(void *ud, const char *text)
{
    figures_read_arg *a = ud;
    json_t *doc = json_loads(text, 0, NULL);
    a->count += figures_walk(doc, a->fn);
    json_decref(doc);
}

int rstats_figures_read(log_conn_t *c, const char *db_path, const rstats_figures_fn *fn)
{
    if (!store_of(c)->rstats->figures_each) return rstats_figures_each(db_path, fn);
    figures_read_arg a = {fn, 0};
    store_of(c)->rstats->figures_each(c, figures_row, &a);
    return a.count;
}


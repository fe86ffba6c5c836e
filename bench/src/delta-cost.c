/* delta-cost: the runner's work per text delta outside the loop, in three parts, for
 * bench/delta-cost.sh to count under valgrind (once with N and once with 0):
 *
 *   delta-cost feed anthropic|openai N    N chunks of a reply, each one text delta in
 *                                         the format's SSE, through provider_feed
 *   delta-cost commit DB N                N commits of one text delta to one chat
 *                                         session on the SQLite file (or postgresql://
 *                                         URI) DB: sstore_tx_append_cached with the view
 *                                         kept across commits, as runner/outbox.c does
 *   delta-cost groups DB N S K            N group commits over S chat sessions, each
 *                                         commit one delta to each of K sessions taken
 *                                         in turn, as runner/outbox.c's op_commit does
 *                                         (with lease_tx_held_many: every lease in one
 *                                         statement, then the appends, with
 *                                         sstore_tx_append_batch all in one batch; before it: each
 *                                         session in its nested savepoint after its
 *                                         lease check): what a busy runner's commit
 *                                         costs per delta, with S streams' pages in play
 *                                         (synchronous=FULL on a file: the real I/O)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "lease.h"
#include "log.h"
#include "provider.h"
#include "sstore.h"

static long texts;

static int on_event(void *ud, const provider_event *ev)
{
    (void)ud;
    texts += ev->kind == PEV_TEXT;
    return 0;
}

static int feed(int openai, long n)
{
    char chunk[512];
    provider_parser *p = provider_parser_new(openai ? PROVIDER_OPENAI : PROVIDER_ANTHROPIC, on_event, NULL);
    if (!p) return 1;
    for (long i = 0; i < n; i++) {
        int len = openai
            ? snprintf(chunk, sizeof chunk, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\","
                       "\"created\":1732000000,\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
                       "\"@ts%ld \"},\"finish_reason\":null}],\"usage\":null}\n\n", 1000000 + i)
            : snprintf(chunk, sizeof chunk, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                       "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"@ts%ld \"}}\n\n", 1000000 + i);
        if (provider_feed(p, chunk, (size_t)len)) return 1;
    }
    provider_parser_free(p);
    return texts == n ? 0 : 1;
}

typedef struct arg {
    const char *id;
    sstore_event *ev;
    size_t n;
    session_view *v;
    uint64_t *seq;
} arg;

static int op(log_conn_t *c, void *ud)
{
    arg *a = ud;
    session_trace tr;
    offset_t first;
    session_trace_new(&tr);
    return sstore_tx_append_cached(c, a->id, &tr, a->ev, a->n, a->v, a->seq, &first);
}

static int commit(const char *db, long n)
{
    char err[256];
    log_opts o;
    log_opts_default(&o);
    o.synchronous_full = 0;
    log_t *lg = log_open(db, &o, err, sizeof err);
    log_conn_t *c = lg ? log_conn_open(lg, err, sizeof err) : NULL;
    if (!c) {
        fprintf(stderr, "delta-cost: %s\n", err);
        return 1;
    }
    session_trace tr;
    session_trace_new(&tr);
    sstore_event created = event_session_created("bench", NULL, 0, NULL, NULL, NULL);
    sstore_create_req r;
    memset(&r, 0, sizeof r);
    r.id = "delta-cost";
    r.agent = "bench";
    r.created = created.payload;
    r.trace = &tr;
    if (sstore_create(c, &r)) return 1;
    session_view v;
    session_view_init(&v);
    uint64_t seq = 0;
    json_t *content = json_string("Go.");
    sstore_event start[2] = {event_message_user(content, "queue", NULL, NULL),
                             event_request_started("rq_1", "anthropic", "m", 1)};
    arg a = {"delta-cost", start, 2, &v, &seq};
    if (log_transact(c, op, &a)) return 1;
    for (long i = 0; i < n; i++) {
        char text[64];
        int k = snprintf(text, sizeof text, "@ts%ld ", 1000000 + i);
        sstore_event d = event_delta(0, "rq_1", text, (size_t)k);
        arg b = {"delta-cost", &d, 1, &v, &seq};
        if (log_transact(c, op, &b)) return 1;
        json_decref(d.payload);
    }
    return 0;
}

typedef struct gsess {
    char id[32];
    session_view v;
    uint64_t seq;
} gsess;

typedef struct garg {
    gsess *ss;
    long s, k, next, n;
    const lease_id *me;
} garg;

/* One delta to the next session in turn (the group's sessions go round). */
static int next_delta(log_conn_t *c, garg *a, const session_trace *tr)
{
    gsess *g = &a->ss[a->next];
    a->next = (a->next + 1) % a->s;
    char text[64];
    int len = snprintf(text, sizeof text, "@ts%ld ", 1000000 + a->n++);
    sstore_event d = event_delta(0, "rq_1", text, (size_t)len);
    offset_t first;
    int rc = sstore_tx_append_cached(c, g->id, tr, &d, 1, &g->v, &g->seq, &first);
    json_decref(d.payload);
    return rc;
}

static int op_group(log_conn_t *c, void *ud)
{
    garg *a = ud;
    session_trace tr;
    session_trace_new(&tr);
#ifdef LEASE_TX_HELD_MANY
    /* A tree with lease_tx_held_many: op_commit's fast way, every lease in one
     * statement, then each append with no savepoint of its own. */
    const char *ids[a->k];
    unsigned char renew[a->k];
    int held[a->k];
    for (long j = 0; j < a->k; j++) {
        ids[j] = a->ss[(a->next + j) % a->s].id;
        renew[j] = 0;
    }
    if (lease_tx_held_many(c, ids, renew, (size_t)a->k, a->me, 3600000, held)) return LOG_EIO;
#ifdef SSTORE_TX_APPEND_BATCH
    /* A tree with sstore_tx_append_batch: the deltas in one batch, as op_commit. */
    sstore_event d[a->k];
    sstore_batch b[a->k];
    for (long j = 0; j < a->k; j++) {
        if (!held[j]) return LOG_EIO;
        gsess *g = &a->ss[a->next];
        a->next = (a->next + 1) % a->s;
        char text[64];
        int len = snprintf(text, sizeof text, "@ts%ld ", 1000000 + a->n++);
        d[j] = event_delta(0, "rq_1", text, (size_t)len);
        b[j] = (sstore_batch){g->id, &d[j], 1, &g->v, &g->seq, {0, 0}};
    }
    int rc = sstore_tx_append_batch(c, &tr, b, (size_t)a->k, NULL);
    for (long j = 0; j < a->k; j++) json_decref(d[j].payload);
    return rc ? LOG_EIO : 0;
#endif
    for (long j = 0; j < a->k; j++)
        if (!held[j] || next_delta(c, a, &tr)) return LOG_EIO;
    return 0;
#endif
    for (long j = 0; j < a->k; j++) {
        if (log_tx_nest_begin(c)) return LOG_EIO;
        int rc = lease_tx_held(c, a->ss[a->next].id, a->me) == 1 ? next_delta(c, a, &tr) : LOG_EIO;
        if (log_tx_nest_end(c, rc != 0) || rc) return LOG_EIO;
    }
    return 0;
}

static int groups(const char *db, long n, long s, long k)
{
    char err[256];
    log_opts o;
    log_opts_default(&o);
    log_t *lg = log_open(db, &o, err, sizeof err);
    log_conn_t *c = lg ? log_conn_open(lg, err, sizeof err) : NULL;
    gsess *ss = calloc((size_t)s, sizeof *ss);
    if (!c || !ss || s < 1 || k < 1) {
        fprintf(stderr, "delta-cost: %s\n", c ? "bad arguments" : err);
        return 1;
    }
    char inst[LEASE_INSTANCE_LEN + 1];
    lease_new_instance(inst);
    lease_id me = {"bench", inst};
    for (long i = 0; i < s; i++) {
        gsess *g = &ss[i];
        snprintf(g->id, sizeof g->id, "dc-%ld", i);
        session_trace tr;
        session_trace_new(&tr);
        sstore_event created = event_session_created("bench", NULL, 0, NULL, NULL, NULL);
        sstore_create_req r;
        memset(&r, 0, sizeof r);
        r.id = g->id;
        r.agent = "bench";
        r.created = created.payload;
        r.trace = &tr;
        if (sstore_create(c, &r) || lease_acquire(c, g->id, &me, 3600000, NULL) != 1) return 1;
        session_view_init(&g->v);
        json_t *content = json_string("Go.");
        sstore_event start[2] = {event_message_user(content, "queue", NULL, NULL),
                                 event_request_started("rq_1", "anthropic", "m", 1)};
        arg a = {g->id, start, 2, &g->v, &g->seq};
        if (log_transact(c, op, &a)) return 1;
    }
    garg a = {ss, s, k, 0, 0, &me};
    for (long i = 0; i < n; i++)
        if (log_transact(c, op_group, &a)) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "feed")) return feed(!strcmp(argv[2], "openai"), strtol(argv[3], NULL, 10));
    if (argc == 4 && !strcmp(argv[1], "commit")) return commit(argv[2], strtol(argv[3], NULL, 10));
    if (argc == 6 && !strcmp(argv[1], "groups"))
        return groups(argv[2], strtol(argv[3], NULL, 10), strtol(argv[4], NULL, 10), strtol(argv[5], NULL, 10));
    fprintf(stderr, "usage: delta-cost feed anthropic|openai N | commit DB N | groups DB N S K\n");
    return 2;
}

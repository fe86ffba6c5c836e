/* retain: retention by policy (see retain.h).
 *
 * A pass walks each policy's prefix newest first, a page of the store's scan at
 * a time, and ranks what it finds: rank r is how many items of the policy are
 * newer. An item is a candidate when it is older than the policy's age or its
 * rank is at least `keep`; a candidate still stays when something needs it (a
 * live fork, a human, a run). Candidates are deleted in batches, one transaction
 * each, and looked at again inside it: the scan read them outside any
 * transaction, and a session may have been forked, or woken by a message, since.
 *
 * The pass can stop at any page (its budget) and go on later from its cursor.
 * Items created meanwhile are newer than the cursor, so they are not seen by
 * this pass; they would have raised the rank of the older ones, so a resumed
 * pass may delete fewer than an uninterrupted one, never more.
 *
 * A session and its stream are deleted together by sstore_tx_delete (its row
 * marked deleted, its snapshots and unpinned recordings gone) inside the batch's
 * transaction: a process killed mid-pass leaves every item whole or gone. Its row
 * is then forgotten (no fork needs it for its lineage), so that a steady load
 * leaves a steady number of rows. */
#include "retain.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opfile.h"
#include "sstore.h"
#include "store.h"
#include "timefmt.h"

int64_t retain_age_ms(const char *s)
{
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno || end == s || n < 0 || s[0] == '-' || s[0] == '+' || s[0] == ' ' || end[0] == '\0' || end[1] != '\0')
        return -1;
    long long unit = *end == 's' ? 1000 : *end == 'm' ? 60000 : *end == 'h' ? 3600000 : *end == 'd' ? 86400000 : 0;
    if (!unit || n > (1LL << 40)) return -1;
    return n * unit;
}

void retain_free(retain_cfg *cfg)
{
    for (size_t i = 0; i < cfg->n; i++) free(cfg->v[i].prefix);
    cfg->n = 0;
}

static int fail(retain_cfg *cfg, char *err, size_t errcap, size_t i, const char *what)
{
    snprintf(err, errcap, "policies[%zu]: %s", i, what);
    retain_free(cfg);
    return -1;
}

int retain_parse(const json_t *doc, retain_cfg *cfg, char *err, size_t errcap)
{
    memset(cfg, 0, sizeof *cfg);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)doc, k, v) {
        if (strcmp(k, "policies")) {
            snprintf(err, errcap, "unknown key \"%.64s\" (the file holds \"policies\")", k);
            return -1;
        }
    }
    json_t *arr = json_object_get(doc, "policies");
    if (!json_is_array(arr)) {
        snprintf(err, errcap, "\"policies\" must be an array");
        return -1;
    }
    if (json_array_size(arr) > RETAIN_POLICIES_MAX) {
        snprintf(err, errcap, "at most %d policies", RETAIN_POLICIES_MAX);
        return -1;
    }
    size_t i;
    json_t *p;
    json_array_foreach(arr, i, p) {
        if (!json_is_object(p)) return fail(cfg, err, errcap, i, "must be an object");
        json_object_foreach(p, k, v) {
            if (strcmp(k, "prefix") && strcmp(k, "maxAge") && strcmp(k, "age") && strcmp(k, "keep")) {
                char what[128];
                snprintf(what, sizeof what, "unknown key \"%.64s\" (prefix, maxAge, age, keep)", k);
                return fail(cfg, err, errcap, i, what);
            }
        }
        retain_policy *r = &cfg->v[cfg->n];
        const char *prefix = json_string_value(json_object_get(p, "prefix"));
        if (!prefix) return fail(cfg, err, errcap, i, "\"prefix\" must be a string (\"\": every stream)");
        for (size_t j = 0; j < cfg->n; j++)
            if (!strcmp(cfg->v[j].prefix, prefix)) return fail(cfg, err, errcap, i, "the same prefix as another policy");
        r->keep = -1;
        json_t *age = json_object_get(p, "maxAge"), *keep = json_object_get(p, "keep"),
               *clock = json_object_get(p, "age");
        if (age) {
            if (!json_is_string(age) || (r->max_age_ms = retain_age_ms(json_string_value(age))) <= 0)
                return fail(cfg, err, errcap, i, "\"maxAge\" must be an age such as \"90s\", \"30m\", \"12h\", \"7d\" (more than 0)");
        }
        if (keep) {
            if (!json_is_integer(keep) || json_integer_value(keep) < 0)
                return fail(cfg, err, errcap, i, "\"keep\" must be a whole number of at least 0");
            r->keep = json_integer_value(keep);
        }
        if (clock) {
            const char *c = json_string_value(clock);
            if (!c || (strcmp(c, "activity") && strcmp(c, "created")))
                return fail(cfg, err, errcap, i, "\"age\" must be \"activity\" or \"created\"");
            r->by_created = !strcmp(c, "created");
        }
        if (!age && !keep) return fail(cfg, err, errcap, i, "needs \"maxAge\" or \"keep\" (or both)");
        if (!(r->prefix = strdup(prefix))) return fail(cfg, err, errcap, i, "out of memory");
        cfg->n++;
    }
    return 0;
}

int retain_load(const char *path, retain_cfg *cfg, char *err, size_t errcap)
{
    char e[512];
    memset(cfg, 0, sizeof *cfg);
    json_t *doc = opfile_load(path, 022, "must not be writable by others (chmod go-w)", NULL, err, errcap);
    if (!doc) return -1;
    int rc = retain_parse(doc, cfg, e, sizeof e);
    if (rc) snprintf(err, errcap, "%s: %s", path, e);
    json_decref(doc);
    return rc;
}

int retain_policy_for(const retain_cfg *cfg, const char *path)
{
    int best = -1;
    size_t len = 0;
    for (size_t i = 0; i < cfg->n; i++) {
        size_t n = strlen(cfg->v[i].prefix);
        if (strncmp(path, cfg->v[i].prefix, n) == 0 && (best < 0 || n > len)) {
            best = (int)i;
            len = n;
        }
    }
    return best;
}

void retain_state_free(retain_state *st)
{
    free(st->before_path);
    memset(st, 0, sizeof *st);
}

const char *retain_reason_text(const char *reason)
{
    if (!strcmp(reason, "age")) return "older than the policy's maxAge";
    if (!strcmp(reason, "count")) return "beyond the newest the policy keeps";
    if (!strcmp(reason, "fork_needed")) return "a live fork reads it";
    if (!strcmp(reason, "waiting")) return "the session waits for input (a human)";
    if (!strcmp(reason, "running")) return "the session is pending or running";
    if (!strcmp(reason, "waiting_timer")) return "the session waits for a timer (a sleep, a wait's timeout)";
    if (!strcmp(reason, "waiting_signal")) return "the session waits for a signal";
    if (!strcmp(reason, "within_age")) return "younger than the policy's maxAge";
    if (!strcmp(reason, "within_count")) return "among the newest the policy keeps";
    return reason;
}

/* ---- deciding ---------------------------------------------------------------------- */

/* Why a session or stream that a rule would delete must stay, or NULL. */
static const char *protected_by(const char *status, int64_t forks)
{
    if (status && (!strcmp(status, "pending") || !strcmp(status, "running"))) return "running";
    if (status && !strcmp(status, "awaiting_input")) return "waiting";
    if (forks > 0) return "fork_needed";
    return NULL;
}

static void decide(const retain_policy *p, const retain_item *it, int64_t rank, int64_t now, retain_verdict *v)
{
    int64_t t = p->by_created ? it->created_ms : it->access_ms;
    v->path = it->path;
    v->session = it->session;
    v->prefix = p->prefix;
    v->age_ms = now > t ? now - t : 0;
    v->rank = rank;
    int old = p->max_age_ms > 0 && v->age_ms > p->max_age_ms;
    int over = p->keep >= 0 && rank >= p->keep;
    v->del = 0;
    if (!old && !over) {
        v->reason = p->max_age_ms > 0 ? "within_age" : "within_count";
        return;
    }
    const char *why = protected_by(it->session ? it->status : NULL, it->forks);
    if (why) {
        v->reason = why;
        return;
    }
    v->del = 1;
    v->reason = old ? "age" : "count";
}

/* A session kept as running or waiting says what it waits for when its log says
 * it waits for a timer (a workflow's sleep, a wait's timeout) or a signal (a wait
 * step): its view read (a snapshot and at most SSTORE_SNAPSHOT_EVERY events), only
 * for a report (dstream gc). The decision does not depend on it: the status keeps
 * such a session whatever it waits for. */
static void refine_wait(log_conn_t *c, const char *id, retain_verdict *v)
{
    session_view view;
    session_view_init(&view);
    if (sstore_view(c, id, 0, (offset_t){0, 0}, &view, NULL) == 0 && !session_view_finished(&view)) {
        if (view.waiting && !json_is_null(view.waiting)) v->reason = "waiting_signal";
        else if (view.timer_due > 0) v->reason = "waiting_timer";
    }
    session_view_free(&view);
}

/* ---- deleting ---------------------------------------------------------------------- */

typedef struct victim {
    char *path;
    char *session;              /* NULL: a plain stream */
} victim;

typedef struct batch {
    victim v[RETAIN_BATCH_ITEMS * 4];
    int n;
    int64_t msgs;
    /* results of the committed transaction */
    int64_t streams, sessions, skipped;
} batch;

static int any_child(void *ud, const sstore_row *row, int deleted)
{
    (void)row;
    (void)deleted;
    *(int *)ud = 1;
    return 1;
}

/* The row of session id, just deleted with no fork reading it, is forgotten too
 * (DELETE /v1/sessions keeps it, marked, for the lineage of forks below it: it
 * has none), and so is each deleted ancestor that no other row names as its
 * parent any more: without it, every session a pass deletes would leave a row
 * behind for ever. */
static int forget(log_conn_t *c, const char *id, const char *parent)
{
    const store_sessions_ops *ops = store_of(c)->sessions;
    char up[SSTORE_ID_MAX];
    int rc = ops->forget_deleted(c, id);
    snprintf(up, sizeof up, "%s", parent);
    for (int depth = 0; !rc && up[0] && depth < 64; depth++) {
        sstore_row row;
        int deleted = 0, kids = 0;
        if ((rc = ops->kin_get(c, up, &row, &deleted)) == LOG_ENOTFOUND) return 0;
        if (rc || !deleted) return rc;
        if ((rc = ops->children(c, up, 1, any_child, &kids)) || kids) return rc;
        if ((rc = ops->forget_deleted(c, up))) return rc;
        snprintf(up, sizeof up, "%s", row.parent);
    }
    return rc;
}

static int op_batch(log_conn_t *c, void *arg)
{
    batch *b = arg;
    int rc;
    b->streams = b->sessions = b->skipped = 0;
    for (int i = 0; i < b->n; i++) {
        victim *x = &b->v[i];
        log_info info;
        /* Looked at again inside the transaction: forked or woken since the scan? */
        if ((rc = log_head(c, x->path, &info)) == LOG_ENOTFOUND || rc == LOG_EGONE) {
            b->skipped++;
            continue;
        }
        if (rc) return rc;
        if (x->session) {
            sstore_row row;
            if ((rc = sstore_get(c, x->session, &row)) == LOG_ENOTFOUND) {
                b->skipped++;
                continue;
            }
            if (rc) return rc;
            if (protected_by(row.status, info.forks)) {
                b->skipped++;
                continue;
            }
            if ((rc = sstore_tx_delete(c, x->session))) return rc;
            if ((rc = forget(c, x->session, row.parent))) return rc;
            b->sessions++;
        } else {
            if (protected_by(NULL, info.forks)) {
                b->skipped++;
                continue;
            }
            rc = log_tx_delete(c, x->path);
            if (rc == LOG_ENOTFOUND || rc == LOG_EGONE) {
                b->skipped++;
                continue;
            }
            if (rc) return rc;
            b->streams++;
        }
    }
    const store_retain_ops *ops = store_of(c)->retain;
    if (b->streams && (rc = ops->add(c, "streams", b->streams))) return rc;
    if (b->sessions && (rc = ops->add(c, "sessions", b->sessions))) return rc;
    return 0;
}

static void batch_clear(batch *b)
{
    for (int i = 0; i < b->n; i++) {
        free(b->v[i].path);
        free(b->v[i].session);
    }
    b->n = 0;
    b->msgs = 0;
}

static int flush(log_conn_t *c, batch *b, retain_stats *out)
{
    if (!b->n) return 0;
    int rc = log_transact(c, op_batch, b);
    if (!rc) {
        out->streams += b->streams;
        out->sessions += b->sessions;
        out->skipped += b->skipped;
        out->batches++;
    }
    batch_clear(b);
    return rc;
}

/* ---- the pass ---------------------------------------------------------------------- */

typedef struct page {
    const retain_cfg *cfg;
    size_t policy;
    retain_state *st;
    const retain_opts *o;
    int64_t now;
    retain_stats *out;
    /* the items of the page, copied (the scan's are valid during its call) */
    retain_item it[RETAIN_SCAN_PAGE];
    char *paths[RETAIN_SCAN_PAGE], *sessions[RETAIN_SCAN_PAGE], status[RETAIN_SCAN_PAGE][24];
    int n;
    int oom;
} page;

static int take(void *ud, const retain_item *it)
{
    page *pg = ud;
    if (pg->n >= RETAIN_SCAN_PAGE) return 1;
    retain_item *d = &pg->it[pg->n];
    *d = *it;
    pg->paths[pg->n] = strdup(it->path);
    pg->sessions[pg->n] = it->session ? strdup(it->session) : NULL;
    if (!pg->paths[pg->n] || (it->session && !pg->sessions[pg->n])) {
        free(pg->paths[pg->n]);
        free(pg->sessions[pg->n]);
        pg->oom = 1;
        return 1;
    }
    snprintf(pg->status[pg->n], sizeof pg->status[0], "%s", it->status ? it->status : "");
    d->path = pg->paths[pg->n];
    d->session = pg->sessions[pg->n];
    d->status = it->status ? pg->status[pg->n] : NULL;
    pg->n++;
    return 0;
}

static void page_clear(page *pg)
{
    for (int i = 0; i < pg->n; i++) {
        free(pg->paths[i]);
        free(pg->sessions[i]);
    }
    pg->n = 0;
}

static int add_victim(batch *b, const retain_item *it)
{
    victim *x = &b->v[b->n];
    x->path = strdup(it->path);
    x->session = it->session ? strdup(it->session) : NULL;
    if (!x->path || (it->session && !x->session)) {
        free(x->path);
        free(x->session);
        return LOG_EIO;
    }
    b->n++;
    b->msgs += it->own_msgs > 0 ? it->own_msgs : 0;
    return 0;
}

/* One page of policy st->policy: decided, reported, deleted. Returns 1 when the
 * policy has more, 0 when it is done, or LOG_E*. */
static int one_page(log_conn_t *c, const retain_cfg *cfg, retain_state *st, const retain_opts *o, int64_t now,
                    int64_t end, batch *b, retain_stats *out)
{
    const retain_policy *p = &cfg->v[st->policy];
    static __thread page pg;    /* big: kept off the stack */
    int items = o->batch_items > 0 && o->batch_items <= RETAIN_BATCH_ITEMS * 4 ? o->batch_items : RETAIN_BATCH_ITEMS;
    int64_t msgs = o->batch_msgs > 0 ? o->batch_msgs : RETAIN_BATCH_MSGS;
    pg.n = 0;
    pg.oom = 0;
    int64_t before = st->before_path ? st->before_ms : INT64_MAX;
    int rc = store_of(c)->retain->scan(c, p->prefix, before, st->before_path, RETAIN_SCAN_PAGE, take, &pg);
    if (!rc && pg.oom) rc = LOG_EIO;
    int done = 0;               /* items of the page dealt with (the cursor moves past them) */
    int more = pg.n == RETAIN_SCAN_PAGE;
    for (; done < pg.n && !rc; done++) {
        const retain_item *it = &pg.it[done];
        if (retain_policy_for(cfg, it->path) != (int)st->policy) continue;   /* a longer prefix's */
        retain_verdict v;
        decide(p, it, st->rank, now, &v);
        if (v.del && !o->dry_run && b->n && (b->n >= items || b->msgs + it->own_msgs > msgs)) {
            /* The batch is full: committed first; out of time, the page stops here. */
            if ((rc = flush(c, b, out))) break;
            if (timefmt_now_ms() >= end) {
                more = 1;
                break;
            }
        }
        st->rank++;
        if (o->report && !v.del && it->session && (!strcmp(v.reason, "running") || !strcmp(v.reason, "waiting")))
            refine_wait(c, it->session, &v);
        if (o->report) o->report(o->ud, &v);
        if (!v.del) {
            out->kept++;
            continue;
        }
        if (o->dry_run) {
            if (it->session) out->sessions++;
            else out->streams++;
            continue;
        }
        rc = add_victim(b, it);
    }
    if (!rc) rc = flush(c, b, out);
    if (!rc && done > 0) {
        char *last = strdup(pg.it[done - 1].path);
        if (!last) rc = LOG_EIO;
        else {
            free(st->before_path);
            st->before_path = last;
            st->before_ms = pg.it[done - 1].created_ms;
        }
    }
    page_clear(&pg);
    if (rc) {
        batch_clear(b);
        return rc;
    }
    return more;
}

typedef struct thin_arg {
    char after[72];
    char last[72];
    int64_t removed;
    int seen;
} thin_arg;

static int op_thin(log_conn_t *c, void *arg)
{
    thin_arg *t = arg;
    t->removed = 0;
    t->last[0] = '\0';
    int rc = store_of(c)->retain->thin(c, t->after, RETAIN_THIN_SESSIONS, RETAIN_SNAPSHOT_EVERY, t->last,
                                       sizeof t->last, &t->removed);
    if (rc < 0) return rc;
    t->seen = rc;
    if (t->removed && (rc = store_of(c)->retain->add(c, "snapshots", t->removed))) return rc;
    return 0;
}

static int op_add_pass(log_conn_t *c, void *arg)
{
    (void)arg;
    return store_of(c)->retain->add(c, "passes", 1);
}

int retain_run(log_conn_t *c, const retain_cfg *cfg, retain_state *st, const retain_opts *o, retain_stats *out)
{
    int64_t now = o->now_ms ? o->now_ms : timefmt_now_ms();
    int64_t end = o->budget_ms > 0 ? timefmt_now_ms() + o->budget_ms : INT64_MAX;
    static __thread batch b;
    int rc;
    b.n = 0;
    b.msgs = 0;
    while (st->policy < cfg->n) {
        rc = one_page(c, cfg, st, o, now, end, &b, out);
        if (rc < 0) return rc;
        if (rc == 0) {
            free(st->before_path);
            st->before_path = NULL;
            st->before_ms = 0;
            st->rank = 0;
            st->policy++;
        }
        if (timefmt_now_ms() >= end) return 1;
    }
    if (!o->dry_run) {
        for (;;) {
            thin_arg t;
            memset(&t, 0, sizeof t);
            snprintf(t.after, sizeof t.after, "%s", st->thin_after);
            if ((rc = log_transact(c, op_thin, &t))) return rc;
            out->snapshots += t.removed;
            if (t.seen < RETAIN_THIN_SESSIONS) break;
            snprintf(st->thin_after, sizeof st->thin_after, "%s", t.last);
            if (timefmt_now_ms() >= end) return 1;
        }
        if ((rc = log_transact(c, op_add_pass, NULL))) return rc;
    }
    retain_state_free(st);
    out->passes++;
    return 0;
}

int retain_totals(log_conn_t *c, void (*fn)(void *ud, const char *what, int64_t n), void *ud)
{
    return store_of(c)->retain->totals(c, fn, ud);
}

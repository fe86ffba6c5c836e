/* lineage: the tree of forks around a session and the diff of two sessions
 * (lineage.h). */
#include "lineage.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "jdiff.h"
#include "session.h"
#include "sstore.h"
#include "store.h"
#include "timefmt.h"

/* ---- the tree ------------------------------------------------------------------------- */

typedef struct lnode {
    sstore_row row;
    int deleted, readable;
    int parent;                 /* index, or -1 */
    int *kids, nkids;           /* in the order their parent's listing gave them */
    int attached;               /* in its parent's kids */
    int visited;                /* its forks were listed */
    int cut;                    /* not all of its forks were looked at */
    int shown;
} lnode;

typedef struct tree {
    lnode *n;
    int len, limit;
    int cur;                    /* the node whose forks are being listed */
    int *queue, qt;
    lineage_readable_fn readable;
    void *ud;
} tree;

static int find(const tree *t, const char *id)
{
    for (int i = 0; i < t->len; i++)
        if (!strcmp(t->n[i].row.id, id)) return i;
    return -1;
}

/* A new node (the caller checked that there is room). */
static int add(tree *t, const sstore_row *row, int deleted, int parent)
{
    lnode *x = &t->n[t->len];
    memset(x, 0, sizeof *x);
    x->row = *row;
    x->deleted = deleted;
    x->readable = t->readable ? t->readable(t->ud, row->id) : 1;
    x->parent = parent;
    return t->len++;
}

static void attach(tree *t, int j)
{
    lnode *p = &t->n[t->n[j].parent];
    if (!p->kids && !(p->kids = calloc((size_t)t->limit, sizeof *p->kids))) abort();
    p->kids[p->nkids++] = j;
    t->n[j].attached = 1;
}

/* One fork of t->cur, oldest first; nonzero stops the listing. */
static int kid(void *ud, const sstore_row *row, int deleted)
{
    tree *t = ud;
    int j = find(t, row->id);
    if (j >= 0) {
        /* Already here: a session of the walk up (attached where its parent lists
         * it), or one met again through a reused id (left where it is). */
        if (t->n[j].parent == t->cur && !t->n[j].attached) {
            attach(t, j);
            t->queue[t->qt++] = j;
        }
        return 0;
    }
    if (t->len == t->limit) {
        t->n[t->cur].cut = 1;
        return 1;
    }
    j = add(t, row, deleted, t->cur);
    attach(t, j);
    t->queue[t->qt++] = j;
    return 0;
}

/* Which nodes are shown: a readable live one, and one (hidden or deleted) with a
 * shown one below it. */
static int mark_shown(tree *t, int j)
{
    lnode *x = &t->n[j];
    int any = 0;
    for (int i = 0; i < x->nkids; i++) any |= mark_shown(t, x->kids[i]);
    x->shown = (x->readable && !x->deleted) || any;
    return x->shown;
}

static json_t *node_json(const tree *t, int j, int *count)
{
    const lnode *x = &t->n[j];
    json_t *o = json_object(), *kids = json_array();
    if (x->readable) {
        char when[40];
        (*count)++;
        timefmt_format(x->row.created_ms, when, sizeof when);
        json_object_set_new(o, "id", json_string(x->row.id));
        json_object_set_new(o, "status", json_string(x->row.status));
        json_object_set_new(o, "agent", x->row.agent[0] ? json_string(x->row.agent) : json_null());
        json_object_set_new(o, "workflow", x->row.workflow[0] ? json_string(x->row.workflow) : json_null());
        json_object_set_new(o, "createdAt", json_string(when));
        offset_kind k;
        offset_t f;
        if (x->row.parent[0] && !offset_parse(x->row.fork_offset, strlen(x->row.fork_offset), &k, &f) &&
            k == OFFSET_AT) {
            json_object_set_new(o, "forkedAt", json_string(x->row.fork_offset));
            json_object_set_new(o, "forkedAtEvent", json_integer((json_int_t)f.seq));
        } else {
            json_object_set_new(o, "forkedAt", json_null());
        }
        if (x->deleted) json_object_set_new(o, "deleted", json_true());
    } else {
        json_object_set_new(o, "hidden", json_true());
    }
    if (x->cut) json_object_set_new(o, "truncated", json_true());
    for (int i = 0; i < x->nkids; i++)
        if (t->n[x->kids[i]].shown) json_array_append_new(kids, node_json(t, x->kids[i], count));
    json_object_set_new(o, "children", kids);
    return o;
}

int lineage_tree(log_conn_t *c, const char *id, int limit, lineage_readable_fn readable, void *ud, json_t **out)
{
    const store_sessions_ops *ops = store_of(c)->sessions;
    tree t;
    sstore_row row;
    int rc, deleted, truncated = 0;
    *out = NULL;
    if (limit < 1) limit = 1;
    memset(&t, 0, sizeof t);
    t.limit = limit, t.readable = readable, t.ud = ud;
    if (!(t.n = calloc((size_t)limit, sizeof *t.n)) || !(t.queue = calloc((size_t)limit, sizeof *t.queue))) abort();
    if ((rc = ops->kin_get(c, id, &row, &deleted))) goto out;
    if (deleted) {
        rc = LOG_ENOTFOUND;
        goto out;
    }
    add(&t, &row, 0, -1);
    /* Up to the root: the topmost ancestor there is a row of (a parent deleted for
     * good leaves its fork at the top), within the limit. */
    int top = 0;
    while (t.n[top].row.parent[0] && find(&t, t.n[top].row.parent) < 0) {
        if (t.len == t.limit) {
            truncated = 1;
            break;
        }
        rc = ops->kin_get(c, t.n[top].row.parent, &row, &deleted);
        if (rc == LOG_ENOTFOUND) break;
        if (rc) goto out;
        int p = add(&t, &row, deleted, -1);
        t.n[top].parent = p;
        top = p;
    }
    /* Down from it, breadth first: every fork of every node, while there is room. */
    t.queue[t.qt++] = top;
    for (int qh = 0; qh < t.qt; qh++) {
        int q = t.queue[qh];
        if (t.len == t.limit) break;
        t.cur = q;
        t.n[q].visited = 1;
        if ((rc = ops->children(c, t.n[q].row.id, t.limit + 1, kid, &t))) goto out;
    }
    /* What the limit left unlisted: the walk up stays whole (its nodes are attached
     * where they belong), and a node whose forks were not looked at says so. */
    for (int j = 0; j < t.len; j++) {
        if (j != top && !t.n[j].attached && t.n[j].parent >= 0) {
            t.n[t.n[j].parent].cut = 1;
            attach(&t, j);
        }
        if (!t.n[j].visited) t.n[j].cut = 1;
        if (t.n[j].cut) truncated = 1;
    }
    mark_shown(&t, top);
    int count = 0;
    json_t *root = node_json(&t, top, &count);
    *out = json_pack("{s:s, s:o, s:i, s:i, s:b}", "id", id, "root", root, "sessions", count, "limit", limit,
                     "truncated", truncated);
out:
    for (int j = 0; j < t.len; j++) free(t.n[j].kids);
    free(t.n);
    free(t.queue);
    return rc;
}

/* ---- the diff ------------------------------------------------------------------------- */

#define EVIT_BATCH 64
#define EVIT_READ_BYTES (256 * 1024)
#define LINEAGE_EVENT_MAX 16384     /* bytes of JSON of an event's payload shown */

/* The events of one side, in order, from a position up to its end, read in
 * batches; session:forked (a fork's own marker) is left out. */
typedef struct evit {
    log_conn_t *c;
    char path[SSTORE_ID_MAX + 16];
    offset_t next, end;
    json_t *ev[EVIT_BATCH];
    offset_t at[EVIT_BATCH];
    int n, i, done;
} evit;

static int evit_msg(void *ud, const void *data, size_t len, offset_t at)
{
    evit *it = ud;
    if (at.seq >= it->end.seq) {
        it->done = 1;
        return 2;
    }
    if (it->n == EVIT_BATCH) {
        it->next = at;
        return 2;
    }
    json_t *ev = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
    if (!ev) ev = json_null();
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type && !strcmp(type, EV_SESSION_FORKED)) {
        json_decref(ev);
        return 0;
    }
    it->ev[it->n] = ev;
    it->at[it->n++] = at;
    return 0;
}

static void evit_clear(evit *it)
{
    for (int i = it->i; i < it->n; i++) json_decref(it->ev[i]);
    it->n = it->i = 0;
}

/* The next event (borrowed) and its position: 1, 0 at the end, or LOG_E*. */
static int evit_peek(evit *it, json_t **ev, offset_t *at)
{
    while (it->i == it->n) {
        if (it->done || it->next.seq >= it->end.seq) return 0;
        evit_clear(it);
        log_read_req rr;
        memset(&rr, 0, sizeof rr);
        rr.path = it->path;
        rr.kind = OFFSET_AT;
        rr.from = it->next;
        rr.max_bytes = EVIT_READ_BYTES;
        int rc = log_read(it->c, &rr, evit_msg, it);
        if (rc != 0 && rc != 2) return rc;
        if (rc == 0) {
            if (rr.count == 0 || rr.up_to_date) it->done = 1;
            else it->next = rr.next;
        }
    }
    *ev = it->ev[it->i];
    *at = it->at[it->i];
    return 1;
}

static void evit_pop(evit *it)
{
    json_decref(it->ev[it->i++]);
}

/* Payload keys that name or time one run rather than what happened: left out when
 * two events are compared (docs/events.md, "Comparing sessions"). */
static int ignored_key(const char *k)
{
    static const char *const keys[] = {PK_REQUEST_ID, PK_CALL_ID, PK_INTERACTION_ID, PK_DURATION_MS,
                                       PK_RETRY_AT, PK_EXPIRES_AT};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(k, keys[i])) return 1;
    return 0;
}

/* Every key of a but the ignored ones is in b with an equal value. */
static int covers(const json_t *a, const json_t *b)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)a, k, v) {
        if (ignored_key(k)) continue;
        json_t *w = json_object_get(b, k);
        if (!w || !json_equal(v, w)) return 0;
    }
    return 1;
}

/* Two events agree: the same type, actor and payload, ids and times apart. */
static int agree(const json_t *a, const json_t *b)
{
    if (!json_is_object(a) || !json_is_object(b)) return json_equal((json_t *)a, (json_t *)b);
    const char *f[] = {"type", "actor"};
    for (int i = 0; i < 2; i++) {
        json_t *x = json_object_get(a, f[i]), *y = json_object_get(b, f[i]);
        if (!x != !y || (x && !json_equal(x, y))) return 0;
    }
    json_t *pa = json_object_get(a, "payload"), *pb = json_object_get(b, "payload");
    if (!json_is_object(pa) || !json_is_object(pb)) return json_equal(pa ? pa : json_null(), pb ? pb : json_null());
    return covers(pa, pb) && covers(pb, pa);
}

/* An event as shown: the envelope with its offset, a payload over
 * LINEAGE_EVENT_MAX bytes of JSON replaced by its size. */
static json_t *shown_event(const json_t *ev, offset_t at)
{
    char off[OFFSET_LEN + 1];
    offset_format(at, off);
    json_t *o = json_is_object(ev) ? json_copy((json_t *)ev) : json_pack("{s:O}", "message", ev);
    json_object_set_new(o, "offset", json_string(off));
    json_t *p = json_object_get(o, "payload");
    if (p) {
        char *s = json_dumps(p, JSON_COMPACT | JSON_ENCODE_ANY);
        size_t n = s ? strlen(s) : 0;
        free(s);
        if (n > LINEAGE_EVENT_MAX) {
            json_object_del(o, "payload");
            json_object_set_new(o, "payloadBytes", json_integer((json_int_t)n));
        }
    }
    return o;
}

/* A session's history as hops: itself up to end, then each ancestor up to where the
 * one below it forked (and no further than end). */
typedef struct hop {
    char id[SSTORE_ID_MAX];
    offset_t upto;
} hop;

static int chain(log_conn_t *c, const sstore_row *row, offset_t end, hop *h, int *n)
{
    sstore_row cur = *row;
    int deleted;
    *n = 0;
    memcpy(h[0].id, row->id, sizeof h[0].id);
    h[0].upto = end;
    *n = 1;
    while (cur.parent[0] && *n < LINEAGE_DEPTH_MAX) {
        offset_kind k;
        offset_t f;
        if (offset_parse(cur.fork_offset, strlen(cur.fork_offset), &k, &f) || k != OFFSET_AT) break;
        if (f.seq > h[*n - 1].upto.seq) f = h[*n - 1].upto;
        for (int i = 0; i < *n; i++)
            if (!strcmp(h[i].id, cur.parent)) return 0;     /* a reused id: stop */
        char pid[SSTORE_ID_MAX];
        memcpy(pid, cur.parent, sizeof pid);
        int rc = store_of(c)->sessions->kin_get(c, pid, &cur, &deleted);
        if (rc == LOG_ENOTFOUND) break;
        if (rc) return rc;
        memcpy(h[*n].id, pid, sizeof h[*n].id);
        h[*n].upto = f;
        (*n)++;
    }
    return 0;
}

/* Where the stored histories of a and b are one: the nearest session both hop
 * through, up to the nearer of the two points they read it to ({0, 0}: nowhere). */
static offset_t shared_until(const hop *ha, int na, const hop *hb, int nb)
{
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++)
            if (!strcmp(ha[i].id, hb[j].id)) return ha[i].upto.seq <= hb[j].upto.seq ? ha[i].upto : hb[j].upto;
    offset_t none = {0, 0};
    return none;
}

typedef struct changes {
    json_t *arr;
    int truncated;
} changes;

static void put_value(json_t *o, const char *name, const char *bytes_name, const json_t *v)
{
    if (!v) return;
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = s ? strlen(s) : 0;
    free(s);
    if (n > LINEAGE_VALUE_MAX) json_object_set_new(o, bytes_name, json_integer((json_int_t)n));
    else json_object_set(o, name, (json_t *)v);
}

/* A state path whose last key is an id or a time (ignored_key) or a message's
 * offset (its position in its own stream, which a fork's session:forked shifts):
 * left out of a diff's state, as those keys are out of its events' comparison. */
static int ignored_path(const char *path)
{
    const char *k = strrchr(path, '.');
    k = k ? k + 1 : path;
    if (strchr(k, '[')) return 0;
    return ignored_key(k) || !strcmp(k, "offset");
}

static int one_change(void *ud, const char *path, const json_t *da, const json_t *db)
{
    changes *ch = ud;
    if (ignored_path(path)) return 0;
    if (json_array_size(ch->arr) == LINEAGE_PATHS_MAX) {
        ch->truncated = 1;
        return 1;
    }
    json_t *o = json_pack("{s:s}", "path", path);
    put_value(o, "before", "beforeBytes", da);
    put_value(o, "after", "afterBytes", db);
    json_array_append_new(ch->arr, o);
    return 0;
}

static json_t *side_json(const char *id, offset_t at, offset_t until, json_t *first)
{
    char a[OFFSET_LEN + 1], u[OFFSET_LEN + 1];
    offset_format(at, a);
    offset_format(until, u);
    return json_pack("{s:s, s:s, s:s, s:o}", "id", id, "at", a, "until", u, "first", first);
}

int lineage_diff(log_conn_t *c, lineage_diff_req *q, json_t **out)
{
    sstore_row ra, rb;
    session_view va, vb;
    offset_t end_a, end_b;
    hop *ha = NULL, *hb = NULL;
    evit *ia = NULL, *ib = NULL;
    json_t *ja = NULL, *jb = NULL, *fa = NULL, *fb = NULL;
    buf_t path;
    int rc, na, nb;
    *out = NULL;
    session_view_init(&va);
    session_view_init(&vb);
    buf_init(&path, 4096);
    q->side = 'a';
    if ((rc = sstore_get(c, q->a, &ra))) goto out;
    if ((rc = sstore_view(c, q->a, q->has_at_a, q->at_a, &va, &end_a))) goto out;
    q->side = 'b';
    if ((rc = sstore_get(c, q->b, &rb))) goto out;
    if ((rc = sstore_view(c, q->b, q->has_at_b, q->at_b, &vb, &end_b))) goto out;
    q->side = 0;

    if (!(ha = calloc(LINEAGE_DEPTH_MAX, sizeof *ha)) || !(hb = calloc(LINEAGE_DEPTH_MAX, sizeof *hb))) abort();
    if ((rc = chain(c, &ra, end_a, ha, &na)) || (rc = chain(c, &rb, end_b, hb, &nb))) goto out;
    offset_t shared = shared_until(ha, na, hb, nb);

    /* Event by event past the shared history, while they agree. */
    if (!(ia = calloc(1, sizeof *ia)) || !(ib = calloc(1, sizeof *ib))) abort();
    ia->c = ib->c = c;
    snprintf(ia->path, sizeof ia->path, "%s", ra.stream);
    snprintf(ib->path, sizeof ib->path, "%s", rb.stream);
    ia->next = ib->next = shared;
    ia->end = end_a;
    ib->end = end_b;
    json_t *ea = NULL, *eb = NULL;
    offset_t oa = end_a, ob = end_b;
    size_t compared = 0;
    int truncated = 0, ha_ = 0, hb_ = 0;
    for (;;) {
        if ((ha_ = evit_peek(ia, &ea, &oa)) < 0) {
            rc = ha_;
            goto out;
        }
        if ((hb_ = evit_peek(ib, &eb, &ob)) < 0) {
            rc = hb_;
            goto out;
        }
        if (!ha_ || !hb_ || !agree(ea, eb)) break;
        if (compared == q->scan) {
            truncated = 1;
            break;
        }
        compared++;
        evit_pop(ia);
        evit_pop(ib);
    }
    offset_t until_a = ha_ ? oa : end_a, until_b = hb_ ? ob : end_b;
    int same = !ha_ && !hb_;
    fa = json_array();
    fb = json_array();
    for (int k = 0; k < q->context; k++) {
        if ((rc = evit_peek(ia, &ea, &oa)) < 0) goto out;
        if (!rc) break;
        json_array_append_new(fa, shown_event(ea, oa));
        evit_pop(ia);
    }
    for (int k = 0; k < q->context; k++) {
        if ((rc = evit_peek(ib, &eb, &ob)) < 0) goto out;
        if (!rc) break;
        json_array_append_new(fb, shown_event(eb, ob));
        evit_pop(ib);
    }
    rc = 0;

    /* The two folded views, path by path. */
    changes ch = {json_array(), 0};
    ja = session_view_to_json(&va);
    jb = session_view_to_json(&vb);
    if ((rc = jdiff_each(ja, jb, &path, one_change, &ch)) == 1) rc = 0;
    if (rc) {
        json_decref(ch.arr);
        goto out;
    }
    char so[OFFSET_LEN + 1];
    offset_format(shared, so);
    *out = json_pack("{s:o, s:o, s:o, s:I, s:b, s:b, s:{s:o, s:b}}", "a", side_json(q->a, end_a, until_a, fa), "b",
                     side_json(q->b, end_b, until_b, fb), "shared", shared.seq ? json_string(so) : json_null(),
                     "compared", (json_int_t)compared, "truncated", truncated, "same", same && !truncated, "state",
                     "changes", ch.arr, "truncated", ch.truncated);
    fa = fb = NULL;
out:
    if (ia) evit_clear(ia);
    if (ib) evit_clear(ib);
    free(ia);
    free(ib);
    free(ha);
    free(hb);
    json_decref(fa);
    json_decref(fb);
    json_decref(ja);
    json_decref(jb);
    buf_free(&path);
    session_view_free(&va);
    session_view_free(&vb);
    return rc;
}

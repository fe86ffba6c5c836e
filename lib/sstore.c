/* sstore: the session store.
 *
 * Why everything goes through here: a session's status (for listing) and its
 * snapshots are derived from its events, so they must change in the same
 * transaction as the events. A command runs inside log_transact: it computes the
 * view as of the tail (nearest snapshot plus at most SSTORE_SNAPSHOT_EVERY events),
 * lets the caller decide what to append from that view (so checks like "is there
 * an input pending" cannot race), appends, folds the new events into the view,
 * writes a snapshot every SSTORE_SNAPSHOT_EVERY events (at a phase of its own per
 * session: sstore_snapshot_phase), and updates the row. The raw stream API refuses
 * writes under "sessions/" (fcgi/stream.c), so no event can bypass this. A fork
 * gets a snapshot at its fork point, so computing its state never walks into its
 * parent's snapshots. */
#include "sstore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "timefmt.h"
#include "store.h"
#include "recorder.h"


int sstore_valid_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n >= SSTORE_ID_MAX) return 0;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            return 0;
    return 1;
}

void sstore_new_id(char *out, size_t cap)
{
    static const char alpha[] = "0123456789abcdefghijklmnopqrstuv";
    unsigned char b[20];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) memset(b, 7, sizeof b);
    size_t n = 0;
    for (size_t i = 0; i < sizeof b && n + 1 < cap; i++) out[n++] = alpha[b[i] & 31];
    out[n] = '\0';
}

static void stream_of(const char *id, char *out, size_t cap)
{
    /* By hand: every append names its stream (snprintf cost more than the copy). */
    static const char pre[] = "sessions/";
    size_t k = sizeof pre - 1, n = strnlen(id, cap > k ? cap - k - 1 : 0);
    if (cap <= k) {
        snprintf(out, cap, "sessions/%s", id);
        return;
    }
    memcpy(out, pre, k);
    memcpy(out + k, id, n);
    out[k + n] = '\0';
}

/* ---- replay ------------------------------------------------------------------------- */

typedef struct replay {
    session_view *v;
    uint64_t stop;          /* first seq not to reduce */
    int bad;
} replay;

int sstore_fold(session_view *v, const void *data, size_t len, offset_t at)
{
    char off[OFFSET_LEN + 1];
    json_t *ev = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
    offset_format(at, off);
    int rc = ev ? session_reduce(v, ev, off) : -1;
    json_decref(ev);
    return rc;
}

int sstore_snapshot_load(session_view *v, const char *text)
{
    json_t *j = text ? json_loads(text, JSON_ALLOW_NUL, NULL) : NULL;
    session_view tmp;
    session_view_init(&tmp);
    int rc = j && session_view_from_json(&tmp, j) == 0 ? 0 : -1;
    json_decref(j);
    if (rc) {
        session_view_free(&tmp);
        return -1;
    }
    session_view_free(v);
    *v = tmp;
    return 0;
}

static int replay_msg(void *ud, const void *data, size_t len, offset_t at)
{
    replay *rp = ud;
    if (at.seq >= rp->stop) return 2;
    if (sstore_fold(rp->v, data, len, at)) rp->bad++;
    return 0;
}

/* Load the newest snapshot at or before seq `upto` into v; *from gets its seq. */
/* Load the newest snapshot at or before seq `upto` into v; *from gets its seq. */
static int load_snapshot(log_conn_t *c, const char *id, uint64_t upto, session_view *v,
                         offset_t *from)
{
    char *text = NULL;
    offset_t at;
    from->seq = from->pos = 0;
    int rc = store_of(c)->sessions->snapshot_before(c, id, upto, &at, &text);
    if (rc < 0) return rc;
    if (rc == 1 && sstore_snapshot_load(v, text) == 0) *from = at;
    free(text);
    return 0;
}

/* Snapshots a batch of appends made (sstore_tx_append_batch), written together
 * once every session's events have landed: on PostgreSQL one statement for all of
 * them, where sessions that started together would otherwise put one each, one
 * round trip after the other, in the same commit. */
typedef struct snap_list {
    size_t n, cap;
    const char **id;            /* the batch's (live until the batch ends) */
    offset_t *at;
    char **view;                /* json_dumps' */
} snap_list;

static void snaps_free(snap_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->view[i]);
    free(l->id);
    free(l->at);
    free(l->view);
    memset(l, 0, sizeof *l);
}

static int snaps_add(snap_list *l, const char *id, offset_t at, char *view)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        const char **ids = realloc(l->id, cap * sizeof *ids);
        if (ids) l->id = ids;
        offset_t *ats = realloc(l->at, cap * sizeof *ats);
        if (ats) l->at = ats;
        char **views = realloc(l->view, cap * sizeof *views);
        if (views) l->view = views;
        if (!ids || !ats || !views) {
            free(view);
            return LOG_EIO;
        }
        l->cap = cap;
    }
    l->id[l->n] = id;
    l->at[l->n] = at;
    l->view[l->n++] = view;
    return 0;
}

/* The snapshots of l, together where the engine can. */
static int snaps_put(log_conn_t *c, snap_list *l)
{
    const store_sessions_ops *ops = store_of(c)->sessions;
    if (!l->n) return 0;
    if (ops->snapshot_put_many) return ops->snapshot_put_many(c, l->id, l->at, (const char *const *)l->view, l->n);
    for (size_t i = 0; i < l->n; i++) {
        int rc = ops->snapshot_put(c, l->id[i], l->at[i], l->view[i]);
        if (rc) return rc;
    }
    return 0;
}

/* The view v at `at` as session id's snapshot: put now, or added to later (then
 * put with the batch's others by snaps_put). */
static int save_snapshot(log_conn_t *c, const char *id, offset_t at, const session_view *v, snap_list *later)
{
    json_t *j = session_view_to_json(v);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) return LOG_EIO;
    if (later) return snaps_add(later, id, at, s);
    int rc = store_of(c)->sessions->snapshot_put(c, id, at, s);
    free(s);
    return rc;
}

int sstore_view(log_conn_t *c, const char *id, int has_at, offset_t at, session_view *v,
                offset_t *pos)
{
    char path[SSTORE_ID_MAX + 16];
    log_info info;
    offset_t from;
    int rc;
    stream_of(id, path, sizeof path);
    if ((rc = log_head(c, path, &info))) return rc;
    uint64_t upto = has_at ? at.seq : info.tail.seq;
    if (upto > info.tail.seq) return LOG_ERANGE;
    if ((rc = load_snapshot(c, id, upto, v, &from))) return rc;
    replay rp = {v, upto, 0};
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = path;
    rr.kind = OFFSET_AT;
    rr.from = from;
    rr.max_bytes = (size_t)-1;
    rc = from.seq < upto ? log_read(c, &rr, replay_msg, &rp) : 0;
    if (rc == 2) rc = 0;
    if (rc) return rc;
    /* `at` names a position of this session's stream, its byte part included. */
    offset_t here = from.seq < upto ? rr.next : from;
    if (has_at && here.seq == upto && here.pos != at.pos) return LOG_EOFFSET;
    if (pos) {
        *pos = here;
        if (rr.next.seq > upto) pos->seq = upto;
        if (!has_at) *pos = info.tail;
    }
    return 0;
}

/* ---- rows ------------------------------------------------------------------------------ */

int sstore_unfinished(log_conn_t *c, void (*fn)(void *ud, const char *id), void *ud)
{
    return store_of(c)->sessions->unfinished(c, fn, ud);
}

int sstore_otlp_cursor(log_conn_t *c, const char *id, uint64_t *seq)
{
    return store_of(c)->sessions->otlp_cursor(c, id, seq);
}

typedef struct otlp_move {
    const char *id;
    uint64_t from, to;
    int moved;
} otlp_move;

static int op_otlp_advance(log_conn_t *c, void *arg)
{
    otlp_move *m = arg;
    int rc = store_of(c)->sessions->otlp_advance(c, m->id, m->from, m->to);
    if (rc < 0) return rc;
    m->moved = rc;
    return 0;
}

int sstore_otlp_advance(log_conn_t *c, const char *id, uint64_t from, uint64_t to)
{
    otlp_move m = {id, from, to, 0};
    int rc = log_transact(c, op_otlp_advance, &m);
    return rc ? rc : m.moved;
}

int sstore_otlp_behind(log_conn_t *c, int (*fn)(void *ud, const char *id, uint64_t cursor), void *ud)
{
    return store_of(c)->sessions->otlp_behind(c, fn, ud);
}

int sstore_get(log_conn_t *c, const char *id, sstore_row *row)
{
    return store_of(c)->sessions->get(c, id, row);
}

static json_t *row_json(const sstore_row *row)
{
    json_t *j = json_object();
    json_object_set_new(j, "id", json_string(row->id));
    json_object_set_new(j, "status", json_string(row->status));
    json_object_set_new(j, "agent", row->agent[0] ? json_string(row->agent) : json_null());
    json_object_set_new(j, "workflow", row->workflow[0] ? json_string(row->workflow) : json_null());
    if (row->workflow[0]) json_object_set_new(j, "workflowVersion", json_integer(row->wf_version));
    json_object_set_new(j, "parent", row->parent[0] ? json_string(row->parent) : json_null());
    json_object_set_new(j, "createdMs", json_integer(row->created_ms));
    json_object_set_new(j, "updatedMs", json_integer(row->updated_ms));
    json_object_set_new(j, "labels", sstore_labels_json(row));
    return j;
}

json_t *sstore_labels_json(const sstore_row *row)
{
    json_t *l = row->labels[0] ? json_loads(row->labels, 0, NULL) : NULL;
    if (json_is_object(l)) return l;
    json_decref(l);
    return json_object();
}

int sstore_list(log_conn_t *c, const sstore_filter *f, const char *cursor, int limit, json_t *arr,
                char *next, size_t nextcap)
{
    return sstore_list_filtered(c, f, cursor, limit, NULL, NULL, arr, next, nextcap);
}

typedef struct list_arg {
    int limit;
    int (*keep)(void *ud, const char *id);
    void *ud;
    json_t *arr;
    char *next;
    size_t nextcap;
    int n, scanned;
    long long scan_ms;
    sstore_row last;
} list_arg;

/* One row of a page, newest first; nonzero ends the page. */
static int list_one(void *ud, const sstore_row *row)
{
    list_arg *a = ud;
    if (a->scanned >= SSTORE_LIST_SCAN && row->created_ms != a->scan_ms) {
        snprintf(a->next, a->nextcap, "%lld.", a->scan_ms);
        return 1;
    }
    a->scanned++;
    a->scan_ms = row->created_ms;
    if (a->keep && !a->keep(a->ud, row->id)) return 0;
    if (a->n == a->limit) {
        snprintf(a->next, a->nextcap, "%lld.%s", (long long)a->last.created_ms, a->last.id);
        return 1;
    }
    json_array_append_new(a->arr, row_json(row));
    a->last = *row;
    a->n++;
    return 0;
}

int sstore_list_filtered(log_conn_t *c, const sstore_filter *f, const char *cursor, int limit,
                         int (*keep)(void *ud, const char *id), void *ud, json_t *arr, char *next,
                         size_t nextcap)
{
    /* Cursor: "<created_ms>.<id>" of the last row the previous page showed, or
     * "<created_ms>." (no id): the sessions created before that millisecond. A cursor
     * only ever names a session the page showed, so a filtered page never hands out
     * the id of a session it hid (the caller's token may not read it). */
    long long cms = INT64_MAX;
    char cid[SSTORE_ID_MAX] = "\x7f";
    if (cursor && *cursor) {
        char *end;
        errno = 0;
        cms = strtoll(cursor, &end, 10);
        if (errno || end == cursor || cms < 0) return LOG_EINVAL;
        if (*end != '.' || (end[1] && !sstore_valid_id(end + 1))) return LOG_EINVAL;
        else snprintf(cid, sizeof cid, "%s", end + 1);
    }
    list_arg la;
    memset(&la, 0, sizeof la);
    la.limit = limit, la.keep = keep, la.ud = ud, la.arr = arr, la.next = next, la.nextcap = nextcap;
    next[0] = '\0';
    /* Filtered, a page may have to look at more rows: SSTORE_LIST_SCAN, then the rest
     * of the millisecond it is in (a handful of rows: sessions are created one at a
     * time), after which it ends short with the millisecond as its cursor. */
    static const sstore_filter all;
    return store_of(c)->sessions->list(c, f ? f : &all, cms, cid, keep ? -1 : limit + 1, list_one, &la);
}

static int set_status(log_conn_t *c, const char *id, const session_view *v)
{
    return store_of(c)->sessions->set_status(c, id, session_status_name(v->status), timefmt_now_ms());
}

/* ---- appending events ------------------------------------------------------------------- */

static int is_delta(const char *type)
{
    return !strcmp(type, EV_TEXT_DELTA) || !strcmp(type, EV_THINKING_DELTA);
}

/* The events ev[0..n) encoded into bufs (each initialised here: the caller frees
 * them) and msgs pointing into them, each a span of its own under trace's parent
 * span. 0, or LOG_EIO. */
static int events_encode(const sstore_event *ev, size_t n, const session_trace *trace, int64_t now, buf_t *bufs,
                         log_msg *msgs)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        /* Each event is a span of its own under the request's parent span. */
        session_trace t;
        session_trace_child(trace, &t);
        memcpy(t.parent_span_id, trace->parent_span_id, sizeof t.parent_span_id);
        buf_init(&bufs[i], 0);
        if (session_event_encode(&bufs[i], ev[i].type, ev[i].payload, ev[i].actor,
                                 ev[i].caused_by[0] ? ev[i].caused_by : NULL, &t, now))
            rc = LOG_EIO;
        msgs[i].data = bufs[i].p;
        msgs[i].len = bufs[i].len;
    }
    return rc;
}

/* The events ev[0..n), stored as msgs, landed at `appended`: fold them into v
 * (which describes the tail) and keep snapshots every SSTORE_SNAPSHOT_EVERY
 * events, at the session's phase (sstore_snapshot_phase). With check, v describes
 * the log up to seq `expect` only: if the events did not land right after it (the
 * log moved, or expect is 0: not known), v is first made again from the log, up
 * to where they landed. The deltas of a reply are folded from their payload as
 * given (their reducers copy what they keep; no envelope is built: it is encoded
 * without a tree, lib/session); every other event from its stored bytes, as every
 * view is made (sstore_fold). */
static int events_landed(log_conn_t *c, const char *id, const sstore_event *ev, const log_msg *msgs, size_t n,
                         session_view *v, offset_t appended, int check, uint64_t expect, snap_list *snaps)
{
    int rc = 0;
    if (check && (!expect || expect != appended.seq)) {
        /* Not the tail any more (or never known): from the log, up to our events. */
        session_view_free(v);
        session_view_init(v);
        rc = sstore_view(c, id, 1, appended, v, NULL);
    }
    /* Fold each new event, snapshotting on the boundaries it crosses. */
    session_status status_before = v->status;
    offset_t at = appended;
    unsigned phase = sstore_snapshot_phase(id);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (is_delta(ev[i].type)) {
            char off[OFFSET_LEN + 1];
            offset_format(at, off);
            session_reduce_payload(v, ev[i].type, ev[i].payload, off);
        } else {
            sstore_fold(v, msgs[i].data, msgs[i].len, at);
        }
        at.seq++;
        at.pos += msgs[i].len;
        if ((at.seq + phase) % SSTORE_SNAPSHOT_EVERY == 0) rc = save_snapshot(c, id, at, v, snaps);
    }
    /* The row's status and updatedMs follow every event but the deltas of a reply,
     * which change no status: a streaming reply does not rewrite the row per delta. */
    int deltas = 1;
    for (size_t i = 0; i < n && deltas; i++) deltas = is_delta(ev[i].type);
    if (rc == 0 && !(deltas && v->status == status_before)) rc = set_status(c, id, v);
    return rc;
}

/* Append events as one record (events_landed says the rest). */
static int append_events(log_conn_t *c, const char *id, const sstore_event *ev, size_t n,
                         const session_trace *trace, session_view *v, offset_t *first, int check,
                         uint64_t expect)
{
    char path[SSTORE_ID_MAX + 16];
    buf_t bufs[SSTORE_EVENTS_MAX];
    log_msg msgs[SSTORE_EVENTS_MAX];
    stream_of(id, path, sizeof path);
    if (n > SSTORE_EVENTS_MAX) return LOG_EINVAL;
    int rc = events_encode(ev, n, trace, timefmt_now_ms(), bufs, msgs);
    log_append_req ar;
    memset(&ar, 0, sizeof ar);
    ar.path = path;
    ar.content_type = "application/json";
    ar.msgs = msgs;
    ar.nmsgs = n;
    if (rc == 0) rc = log_tx_append(c, &ar);
    if (rc == 0 && first) *first = ar.appended;
    if (rc == 0) rc = events_landed(c, id, ev, msgs, n, v, ar.appended, check, expect, NULL);
    for (size_t i = 0; i < n; i++) buf_free(&bufs[i]);
    return rc;
}

typedef struct command_arg {
    const char *id;
    const session_trace *trace;
    sstore_decide_fn decide;
    void *ud;
    offset_t *first;
} command_arg;

static int op_command(log_conn_t *c, void *arg)
{
    command_arg *a = arg;
    session_view v;
    sstore_event ev[SSTORE_EVENTS_MAX];
    size_t n = 0;
    offset_t none = {0, 0}, seen;
    sstore_row row;
    int rc;
    if ((rc = sstore_get(c, a->id, &row))) return rc;
    session_view_init(&v);
    memset(ev, 0, sizeof ev);
    if ((rc = sstore_view(c, a->id, 0, none, &v, &seen))) goto out;
    if ((rc = a->decide(a->ud, &v, ev, &n))) goto out;
    /* Checked where they land: on PostgreSQL nothing is locked until the append, and
     * a runner's commit between the view and it puts them after events the view has
     * not folded (the snapshot or the row's status then made from it would not be
     * the log's); the view is then made again from the log, under the append's lock.
     * (On SQLite the group holds the writers' lock from its BEGIN: never so.) */
    rc = append_events(c, a->id, ev, n, a->trace, &v, a->first, 1, seen.seq);
out:
    session_view_free(&v);
    return rc;
}

int sstore_tx_append_cached(log_conn_t *c, const char *id, const session_trace *trace, const sstore_event *ev,
                            size_t n, session_view *v, uint64_t *v_seq, offset_t *first)
{
    offset_t at, start = {0, 0};
    int rc = 0;
    uint64_t seq = *v_seq;
    *v_seq = 0;
    /* The stream's row is read once, by the append (which locks it): whether v is
     * still the tail is checked there, against where the events land. The session's
     * row is not read at all: a session deleted since has its stream deleted in the
     * same transaction, so the append finds it gone (LOG_ENOTFOUND or LOG_EGONE). */
    for (size_t i = 0; rc == 0 && i < n; i += SSTORE_EVENTS_MAX) {
        size_t k = n - i < SSTORE_EVENTS_MAX ? n - i : SSTORE_EVENTS_MAX;
        rc = append_events(c, id, ev + i, k, trace, v, &at, i == 0, seq);
        if (rc == 0 && i == 0) start = at;
    }
    if (rc == 0 && first) *first = start;
    if (rc == 0) *v_seq = start.seq + n;
    return rc;
}

int sstore_tx_append_batch(log_conn_t *c, const session_trace *trace, sstore_batch *b, size_t n, size_t *failed)
{
    size_t nev = 0, k = 0, bad = 0, dummy;
    int64_t now = timefmt_now_ms();
    int rc = 0;
    snap_list snaps = {0, 0, NULL, NULL, NULL};
    if (!failed) failed = &dummy;
    *failed = 0;
    /* An engine that makes a batch one append at a time (SQLite) gets each
     * session's events alone, encoded and appended as sstore_tx_append_cached
     * does: gathered, all of a commit's would be held at once for nothing (after
     * a burst of 2,000 sessions the runner kept 1.2 MiB more of heap). */
    if (!log_batches_appends(c)) {
        for (size_t i = 0; i < n; i++) {
            rc = sstore_tx_append_cached(c, b[i].id, trace, b[i].ev, b[i].n, b[i].v, b[i].v_seq, &b[i].first);
            if (rc) {
                *failed = i;
                for (size_t j = 0; j < n; j++) *b[j].v_seq = 0;    /* undone with the operation */
                return rc;
            }
        }
        return 0;
    }
    for (size_t i = 0; i < n; i++) nev += b[i].n <= SSTORE_EVENTS_MAX ? b[i].n : 0;
    log_append_req *ar = calloc(n ? n : 1, sizeof *ar);
    size_t *ix = calloc(n ? n : 1, sizeof *ix);             /* ar[j] is b[ix[j]]'s */
    uint64_t *expect = calloc(n ? n : 1, sizeof *expect);
    char (*path)[SSTORE_ID_MAX + 16] = calloc(n ? n : 1, sizeof *path);
    buf_t *bufs = calloc(nev ? nev : 1, sizeof *bufs);
    log_msg *msgs = calloc(nev ? nev : 1, sizeof *msgs);
    size_t encoded = 0;
    if (!ar || !ix || !expect || !path || !bufs || !msgs) {
        rc = LOG_EIO;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        expect[i] = *b[i].v_seq;
        *b[i].v_seq = 0;
    }
    /* Every session's events encoded, then appended together: one record each. A
     * session with more events than a record holds is appended after the others,
     * the way sstore_tx_append_cached splits them. */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (b[i].n > SSTORE_EVENTS_MAX) continue;
        stream_of(b[i].id, path[k], sizeof path[k]);
        rc = events_encode(b[i].ev, b[i].n, trace, now, bufs + encoded, msgs + encoded);
        ar[k].path = path[k];
        ar[k].content_type = "application/json";
        ar[k].msgs = msgs + encoded;
        ar[k].nmsgs = b[i].n;
        encoded += b[i].n;
        if (rc) bad = i;
        ix[k++] = i;
    }
    if (rc == 0 && (rc = log_tx_append_many(c, ar, k, &bad)) != 0) bad = ix[bad];
    for (size_t j = 0; j < k && rc == 0; j++) {
        sstore_batch *e = &b[ix[j]];
        rc = events_landed(c, e->id, e->ev, ar[j].msgs, e->n, e->v, ar[j].appended, 1, expect[ix[j]], &snaps);
        if (rc) bad = ix[j];
        e->first = ar[j].appended;
        if (rc == 0) *e->v_seq = ar[j].appended.seq + e->n;
    }
    /* (A failure here fails the operation, the whole batch: any session names it.) */
    if (rc == 0 && (rc = snaps_put(c, &snaps)) != 0) bad = ix[0];
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (b[i].n <= SSTORE_EVENTS_MAX) continue;
        *b[i].v_seq = expect[i];
        rc = sstore_tx_append_cached(c, b[i].id, trace, b[i].ev, b[i].n, b[i].v, b[i].v_seq, &b[i].first);
        if (rc) bad = i;
    }
out:
    if (rc) {
        *failed = bad;
        for (size_t i = 0; i < n; i++) *b[i].v_seq = 0;    /* undone with the operation */
    }
    for (size_t i = 0; bufs && i < encoded; i++) buf_free(&bufs[i]);
    snaps_free(&snaps);
    free(ar);
    free(ix);
    free(expect);
    free(path);
    free(bufs);
    free(msgs);
    return rc;
}

int sstore_command(log_conn_t *c, const char *id, const session_trace *trace,
                   sstore_decide_fn decide, void *ud, offset_t *first)
{
    command_arg a = {id, trace, decide, ud, first};
    return log_transact(c, op_command, &a);
}

/* ---- create, fork, delete --------------------------------------------------------------- */

/* What a fork's session:forked says of recording (docs/recording.md): what the fork
 * named (named, borrowed; NULL: nothing) less the scope when it is its source's
 * (created: the source's session:created as its view has it), NULL when nothing is
 * left. New reference. */
static json_t *fork_recording(const json_t *named, const json_t *created)
{
    if (!named) return NULL;
    json_t *rec = json_copy((json_t *)named);
    json_t *was = json_object_get(json_object_get(created, PK_RECORDING), PK_SCOPE);
    if (was && json_equal(was, json_object_get(rec, PK_SCOPE))) json_object_del(rec, PK_SCOPE);
    if (json_object_size(rec)) return rec;
    json_decref(rec);
    return NULL;
}

static int op_create(log_conn_t *c, void *arg)
{
    sstore_create_req *r = arg;
    char path[SSTORE_ID_MAX + 16], ppath[SSTORE_ID_MAX + 16], off[OFFSET_LEN + 1] = "";
    session_view v;
    sstore_row prow;
    int rc;

    stream_of(r->id, path, sizeof path);
    session_view_init(&v);
    log_create_req cr;
    memset(&cr, 0, sizeof cr);
    cr.path = path;
    cr.content_type = "application/json";
    cr.ttl_s = cr.expires_ms = -1;
    if (r->parent) {
        if ((rc = sstore_get(c, r->parent, &prow))) goto out;
        stream_of(r->parent, ppath, sizeof ppath);
        cr.fork_from = ppath;
        cr.fork_has_offset = r->has_at;
        cr.fork_offset = r->at;
        cr.content_type = NULL;
    }
    /* A deleted session's id is free again (its stream is gone or, while forks
     * read it, still refused below by the stream's own conflict). */
    if ((rc = store_of(c)->sessions->forget_deleted(c, r->id))) goto out;
    if ((rc = log_tx_create(c, &cr))) goto out;
    if (!cr.created) {
        rc = LOG_ECONFLICT;
        goto out;
    }
    if (r->parent) {
        /* The fork's state starts as its parent's at the fork point. */
        offset_format(cr.info.fork, off);
        if ((rc = sstore_view(c, r->parent, 1, cr.info.fork, &v, NULL))) goto out;
        if ((rc = save_snapshot(c, r->id, cr.info.fork, &v, NULL))) goto out;
    }
    int64_t now = timefmt_now_ms();
    const char *agent = r->parent ? (r->fork_agent && prow.agent[0] ? r->fork_agent : prow.agent) : r->agent;
    const char *wf = r->parent ? prow.workflow : r->workflow;
    sstore_row row;
    memset(&row, 0, sizeof row);
    snprintf(row.id, sizeof row.id, "%s", r->id);
    snprintf(row.stream, sizeof row.stream, "%s", path);
    snprintf(row.agent, sizeof row.agent, "%s", agent ? agent : "");
    snprintf(row.workflow, sizeof row.workflow, "%s", wf ? wf : "");
    row.wf_version = !row.workflow[0] ? 0 : !r->parent ? r->wf_version : r->fork_version > 0 ? r->fork_version
                                                                                              : prow.wf_version;
    if (r->parent) snprintf(row.parent, sizeof row.parent, "%s", r->parent);
    if (r->parent) snprintf(row.fork_offset, sizeof row.fork_offset, "%s", off);
    /* A fork carries its parent's labels (its history begins with the same
     * session:created); the caller's otherwise. */
    snprintf(row.labels, sizeof row.labels, "%s", r->parent ? prow.labels : r->labels ? r->labels : "");
    snprintf(row.status, sizeof row.status, "%s", session_status_name(v.status));
    row.created_ms = row.updated_ms = now;
    if ((rc = store_of(c)->sessions->insert(c, &row))) goto out;

    sstore_event ev;
    memset(&ev, 0, sizeof ev);
    ev.actor = "user";
    if (r->parent) {
        ev.type = EV_SESSION_FORKED;
        ev.payload = json_pack("{s:s, s:s}", PK_FROM, r->parent, PK_AT, off);
        json_t *rec = fork_recording(r->forked_recording, v.created);
        if (rec) json_object_set_new(ev.payload, PK_RECORDING, rec);
        /* Another agent or version than its source's (a retry's): named, the reducer
         * puts it in place of the created one (lib/session.c). */
        if (r->fork_agent && prow.agent[0]) json_object_set_new(ev.payload, PK_AGENT, json_string(r->fork_agent));
        if (r->fork_version > 0 && prow.workflow[0])
            json_object_set_new(ev.payload, PK_VERSION, json_integer(r->fork_version));
    } else {
        ev.type = EV_SESSION_CREATED;
        ev.payload = json_incref(r->created);
    }
    rc = append_events(c, r->id, &ev, 1, r->trace, &v, NULL, 0, 0);
    json_decref(ev.payload);
    log_info tail;
    if (rc == 0 && (rc = log_head(c, path, &tail)) == 0) r->tail = tail.tail;
out:
    session_view_free(&v);
    return rc;
}

int sstore_create(log_conn_t *c, sstore_create_req *r)
{
    return log_transact(c, op_create, r);
}

static int op_delete(log_conn_t *c, void *arg)
{
    const char *id = arg;
    char path[SSTORE_ID_MAX + 16];
    sstore_row row;
    int rc;
    if ((rc = sstore_get(c, id, &row))) return rc;
    stream_of(id, path, sizeof path);
    rc = log_tx_delete(c, path);
    if (rc && rc != LOG_ENOTFOUND) return rc;
    if ((rc = store_of(c)->sessions->mark_deleted(c, id, timefmt_now_ms()))) return rc;
    /* Its recordings go with it, unless pinned (lib/recorder). */
    return rec_tx_delete_session(c, id);
}

int sstore_tx_delete(log_conn_t *c, const char *id)
{
    return op_delete(c, (void *)id);
}

int sstore_delete(log_conn_t *c, const char *id)
{
    return log_transact(c, op_delete, (void *)id);
}

json_t *sstore_session_json(const sstore_row *row, const session_view *v, offset_t pos)
{
    char off[OFFSET_LEN + 1], url[160];
    offset_format(pos, off);
    json_t *j = session_view_to_json(v);
    json_object_set_new(j, "id", json_string(row->id));
    json_object_set_new(j, "agent", row->agent[0] ? json_string(row->agent) : json_null());
    json_object_set_new(j, "workflow", row->workflow[0] ? json_string(row->workflow) : json_null());
    if (row->workflow[0]) json_object_set_new(j, "workflowVersion", json_integer(row->wf_version));
    json_object_set_new(j, "parent", row->parent[0] ? json_string(row->parent) : json_null());
    if (row->parent[0]) json_object_set_new(j, "forkOffset", json_string(row->fork_offset));
    json_object_set_new(j, "position", json_string(off));
    snprintf(url, sizeof url, "/v1/stream/%s", row->stream);
    json_object_set_new(j, "stream", json_string(url));
    snprintf(url, sizeof url, "/v1/sessions/%s/events", row->id);
    json_object_set_new(j, "events", json_string(url));
    json_object_set_new(j, "createdMs", json_integer(row->created_ms));
    json_object_set_new(j, "labels", sstore_labels_json(row));
    return j;
}

/* ---- retry ----------------------------------------------------------------------------- */

typedef struct retry_scan {
    int workflow;
    int after_user;         /* the event before this one was a user message that wanted a reply */
    int found;
    offset_t at;
} retry_scan;

static int retry_msg(void *ud, const void *data, size_t len, offset_t at)
{
    retry_scan *rs = ud;
    json_t *ev = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (rs->after_user) {
        rs->at = at;
        rs->found = 1;
        rs->after_user = 0;
    }
    if (type && rs->workflow && !strcmp(type, EV_STEP_STARTED)) {
        rs->at = at;
        rs->found = 1;
    } else if (type && !rs->workflow && !strcmp(type, EV_MESSAGE_USER)) {
        const char *mode = json_string_value(json_object_get(json_object_get(ev, "payload"), PK_MODE));
        rs->after_user = !mode || strcmp(mode, "background");
    }
    json_decref(ev);
    return 0;
}

int sstore_retry_point(log_conn_t *c, const char *id, offset_t *at)
{
    sstore_row row;
    log_info info;
    int rc;
    if ((rc = sstore_get(c, id, &row))) return rc;
    if ((rc = log_head(c, row.stream, &info))) return rc;
    retry_scan rs;
    memset(&rs, 0, sizeof rs);
    rs.workflow = row.workflow[0] != '\0';
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = row.stream;
    rr.kind = OFFSET_START;
    rr.max_bytes = (size_t)-1;
    if ((rc = log_read(c, &rr, retry_msg, &rs))) return rc;
    /* The user message was the last event: the fork keeps all of it. */
    if (rs.after_user) {
        rs.at = info.tail;
        rs.found = 1;
    }
    if (!rs.found) return LOG_ERANGE;
    *at = rs.at;
    return 0;
}

/* Unit tests for lib/sstore.c on a database in a temporary directory: create (and
 * an id that is taken), commands (refused ones write nothing), the view at every
 * offset of a long history equal to a full replay computed here by folding
 * session_reduce over the stream, snapshots that bound the replay, forks at past
 * offsets, listing with a status filter and cursor paging, delete, and the
 * runner's commits with the view it keeps (sstore_tx_append_cached). */
#include "sstore.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

/* ---- helpers -------------------------------------------------------------------- */

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!j) {
        fprintf(stderr, "bad test JSON %s: %s\n", text, e.text);
        abort();
    }
    return j;
}

/* Create session id running workflow wf (or, with wf NULL, talking to agent "writer"). */
static int create(const char *id, const char *wf, sstore_create_req *out)
{
    sstore_create_req r;
    session_trace t;
    memset(&r, 0, sizeof r);
    session_trace_new(&t);
    r.id = id;
    r.trace = &t;
    if (wf) {
        r.workflow = wf;
        r.wf_version = 3;
        r.created = json_pack("{s:s, s:i, s:{s:i}, s:{s:s}}", "workflow", wf, "version", 3,
                              "initialState", "n", 0, "input", "topic", "WAL");
    } else {
        r.agent = "writer";
        r.created = json_pack("{s:s, s:{}}", "agent", "writer", "input");
    }
    int rc = sstore_create(conn, &r);
    json_decref(r.created);
    r.created = NULL;
    if (out) *out = r;
    return rc;
}

static int fork_at(const char *id, const char *parent, int has_at, offset_t at)
{
    sstore_create_req r;
    session_trace t;
    memset(&r, 0, sizeof r);
    session_trace_new(&t);
    r.id = id;
    r.trace = &t;
    r.parent = parent;
    r.has_at = has_at;
    r.at = at;
    return sstore_create(conn, &r);
}

/* A command's events: types and payload texts, or a refusal. */
typedef struct cmd {
    size_t n;
    const char *type[3 * SSTORE_EVENTS_MAX];    /* (a command takes at most SSTORE_EVENTS_MAX) */
    json_t *payload[3 * SSTORE_EVENTS_MAX];
    int refuse;                 /* return this code instead */
    int called;
    uint64_t seen_events;       /* the view decide was given */
    char seen_status[24];
} cmd;

static void cmd_add(cmd *c, const char *type, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    c->type[c->n] = type;
    c->payload[c->n] = parse(text);
    c->n++;
}

static void cmd_free(cmd *c)
{
    for (size_t i = 0; i < c->n; i++) json_decref(c->payload[i]);
    c->n = 0;
}

static int decide(void *ud, const session_view *v, sstore_event *ev, size_t *n)
{
    cmd *c = ud;
    c->called++;
    c->seen_events = v->events;
    snprintf(c->seen_status, sizeof c->seen_status, "%s", session_status_name(v->status));
    if (c->refuse) return c->refuse;
    for (size_t i = 0; i < c->n; i++) {
        ev[i].type = c->type[i];
        ev[i].payload = c->payload[i];
        ev[i].actor = "runner";
    }
    *n = c->n;
    return 0;
}

static int run(const char *id, cmd *c, offset_t *first)
{
    session_trace t;
    session_trace_new(&t);
    int rc = sstore_command(conn, id, &t, decide, c, first);
    cmd_free(c);
    return rc;
}

/* Append one event to session id; 0 or the error. */
static int append1(const char *id, const char *type, const char *payload)
{
    cmd c;
    memset(&c, 0, sizeof c);
    cmd_add(&c, type, "%s", payload);
    return run(id, &c, NULL);
}

/* A session's stream as read back: the parsed envelopes, the offset of each
 * (where it starts) and the tail (offs[n]). */
typedef struct hist {
    size_t n;
    json_t *ev[1024];
    offset_t off[1025];
} hist;

static int hist_msg(void *ud, const void *data, size_t len, offset_t at)
{
    hist *h = ud;
    if (h->n >= 1024) return 1;
    h->ev[h->n] = json_loadb(data, len, 0, NULL);
    h->off[h->n] = at;
    h->n++;
    return 0;
}

static int hist_read(const char *id, hist *h)
{
    char path[128];
    snprintf(path, sizeof path, "sessions/%s", id);
    memset(h, 0, sizeof *h);
    log_read_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.kind = OFFSET_START;
    r.max_bytes = (size_t)-1;
    int rc = log_read(conn, &r, hist_msg, h);
    h->off[h->n] = r.next;
    return rc;
}

static void hist_free(hist *h)
{
    for (size_t i = 0; i < h->n; i++) json_decref(h->ev[i]);
    h->n = 0;
}

/* The view after the first k events of h, folded here (a full replay). */
static json_t *fold(const hist *h, size_t k)
{
    session_view v;
    session_view_init(&v);
    for (size_t i = 0; i < k; i++) {
        char off[OFFSET_LEN + 1];
        offset_format(h->off[i], off);
        if (session_reduce(&v, h->ev[i], off)) CHECK(!"stored event refused by the reducer");
    }
    json_t *j = session_view_to_json(&v);
    session_view_free(&v);
    return j;
}

/* sstore's view of id at `at` (has_at) or at its tail, as JSON; NULL on error
 * (*rc gets it). */
static json_t *view_at(const char *id, int has_at, offset_t at, offset_t *pos, int *rcp)
{
    session_view v;
    offset_t p = {0, 0};
    session_view_init(&v);
    int rc = sstore_view(conn, id, has_at, at, &v, &p);
    json_t *j = rc ? NULL : session_view_to_json(&v);
    session_view_free(&v);
    if (pos) *pos = p;
    if (rcp) *rcp = rc;
    return j;
}

static int same_json(json_t *a, json_t *b, const char *what, size_t k)
{
    if (a && b && json_equal(a, b)) return 1;
    char *sa = a ? json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    char *sb = b ? json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    fprintf(stderr, "  %s at %zu:\n    got  %s\n    want %s\n", what, k, sa ? sa : "(null)",
            sb ? sb : "(null)");
    free(sa);
    free(sb);
    return 0;
}

/* Every view of id, at every offset, equals the full replay; so does the tail. */
static void check_all_views(const char *id, const char *what)
{
    hist h;
    if (!CHECK_EQ_INT(hist_read(id, &h), 0)) return;
    int bad = 0;
    for (size_t k = 0; k <= h.n && bad < 3; k++) {
        offset_t pos;
        int rc;
        json_t *got = view_at(id, 1, h.off[k], &pos, &rc);
        json_t *want = fold(&h, k);
        if (!CHECK_EQ_INT(rc, 0) || !CHECK(same_json(got, want, what, k))) bad++;
        if (!CHECK(pos.seq == h.off[k].seq && pos.pos == h.off[k].pos)) {
            fprintf(stderr, "  %s: position at %zu is %ju_%ju, want %ju_%ju\n", what, k,
                    (uintmax_t)pos.seq, (uintmax_t)pos.pos, (uintmax_t)h.off[k].seq,
                    (uintmax_t)h.off[k].pos);
            bad++;
        }
        json_decref(got);
        json_decref(want);
    }
    offset_t pos, none = {0, 0};
    json_t *got = view_at(id, 0, none, &pos, NULL);
    json_t *want = fold(&h, h.n);
    CHECK(same_json(got, want, what, h.n));
    CHECK(pos.seq == h.off[h.n].seq && pos.pos == h.off[h.n].pos);
    /* The listed status is the derived one. */
    sstore_row row;
    if (CHECK_EQ_INT(sstore_get(conn, id, &row), 0))
        CHECK_EQ_STR(row.status, json_string_value(json_object_get(want, "status")));
    json_decref(got);
    json_decref(want);
    hist_free(&h);
}

/* The snapshots of session id, read through the store (newest first): how many,
 * how many not where its phase puts them (sstore_snapshot_phase), and the newest
 * position (-1: none). Returns 0 or LOG_E*. */
static int snapshots_of(const char *id, int64_t *count, int64_t *off_boundary, int64_t *newest)
{
    uint64_t upto = UINT64_MAX >> 1, phase = sstore_snapshot_phase(id);
    *count = *off_boundary = 0;
    *newest = -1;
    for (int i = 0; i < 100000; i++) {
        offset_t at;
        char *view = NULL;
        int rc = store_of(conn)->sessions->snapshot_before(conn, id, upto, &at, &view);
        free(view);
        if (rc < 0) return rc;
        if (rc == 0) break;
        (*count)++;
        if ((at.seq + phase) % SSTORE_SNAPSHOT_EVERY) (*off_boundary)++;
        if (*newest < 0) *newest = (int64_t)at.seq;
        if (at.seq == 0) break;
        upto = at.seq - 1;
    }
    return 0;
}

/* Where session id's newest snapshot falls once it has n events (-1: none yet). */
static int64_t newest_due(const char *id, uint64_t n)
{
    uint64_t phase = sstore_snapshot_phase(id);
    for (uint64_t k = n; k >= 1; k--)
        if ((k + phase) % SSTORE_SNAPSHOT_EVERY == 0) return (int64_t)k;
    return -1;
}

static int64_t snapshot_count(const char *id)
{
    int64_t n, off, newest;
    return snapshots_of(id, &n, &off, &newest) ? -1 : n;
}

/* Store view as session id's snapshot at `at` (a write of the store's, in a group). */
typedef struct snap_put {
    const char *id;
    offset_t at;
    const char *view;
} snap_put;

static int put_snapshot_tx(log_conn_t *c, void *arg)
{
    snap_put *p = arg;
    return store_of(c)->sessions->snapshot_put(c, p->id, p->at, p->view);
}

static int put_snapshot(const char *id, offset_t at, const char *view)
{
    snap_put p = {id, at, view};
    return log_transact(conn, put_snapshot_tx, &p);
}

/* Append a long, varied history to session id in commands of 1 to 5 events
 * (so that some commands cross a snapshot boundary). Returns the events added. */
static size_t grow(const char *id, size_t want, int chat)
{
    size_t added = 0;
    int i = 0, batch = 1;
    while (added < want) {
        cmd c;
        memset(&c, 0, sizeof c);
        for (int b = 0; b < batch && added < want; b++, i++, added++) {
            switch (i % 11) {
            case 0: cmd_add(&c, "phase:entered", "{\"phase\": \"p%d\"}", i); break;
            case 1: cmd_add(&c, "step:started", "{\"phase\": \"p\", \"step\": 0, \"kind\": \"update\"}"); break;
            case 2: cmd_add(&c, "state:updated", "{\"set\": {\"n\": %d, \"hist.i%d\": %d}}", i, i, i); break;
            case 3:
                if (chat) cmd_add(&c, "message:user", "{\"content\": \"q%d\", \"mode\": \"%s\"}", i,
                                  i % 3 ? "queue" : "interrupt");
                else cmd_add(&c, "provider:request_started", "{\"requestId\": \"r%d\"}", i);
                break;
            case 4:
                if (chat) cmd_add(&c, "provider:request_started", "{\"requestId\": \"r%d\"}", i - 1);
                else cmd_add(&c, "text:delta", "{\"requestId\": \"r%d\", \"text\": \"t%d\"}", i - 1, i);
                break;
            case 5:
                cmd_add(&c, chat ? "text:delta" : "thinking:delta", "{\"requestId\": \"r%d\", \"text\": \"x%d\"}", i - 2, i);
                break;
            case 6:
                cmd_add(&c, "provider:request_ended",
                        "{\"requestId\": \"r%d\", \"usage\": {\"inputTokens\": %d, \"outputTokens\": 1}, \"costUsd\": 0.1}",
                        i - 3, i);
                break;
            case 7: cmd_add(&c, "input:requested", "{\"interactionId\": \"h%d\", \"input\": \"text\", \"prompt\": \"?\"}", i); break;
            case 8: cmd_add(&c, "input:received", "{\"interactionId\": \"h%d\", \"response\": %d}", i - 1, i); break;
            case 9: cmd_add(&c, "step:completed", "{\"phase\": \"p\", \"step\": 0, \"interactionId\": \"h%d\"}", i - 2); break;
            default: cmd_add(&c, "message:user", "{\"content\": \"m%d\", \"mode\": \"background\"}", i); break;
            }
        }
        if (!CHECK_EQ_INT(run(id, &c, NULL), 0)) return added;
        batch = batch % 5 + 1;
    }
    return added;
}

/* ---- create ------------------------------------------------------------------------ */

static void test_create(void)
{
    sstore_create_req r;
    sstore_row row;
    CHECK_EQ_INT(create("c1", "blog-post", &r), 0);
    CHECK_EQ_UINT(r.tail.seq, 1);
    CHECK(r.tail.pos > 0);
    if (CHECK_EQ_INT(sstore_get(conn, "c1", &row), 0)) {
        CHECK_EQ_STR(row.id, "c1");
        CHECK_EQ_STR(row.stream, "sessions/c1");
        CHECK_EQ_STR(row.workflow, "blog-post");
        CHECK_EQ_STR(row.agent, "");
        CHECK_EQ_INT(row.wf_version, 3);
        CHECK_EQ_STR(row.parent, "");
        CHECK_EQ_STR(row.status, "pending");
        CHECK(row.created_ms > 0);
    }
    hist h;
    if (CHECK_EQ_INT(hist_read("c1", &h), 0) && CHECK_EQ_UINT(h.n, 1)) {
        json_t *e = h.ev[0];
        CHECK_EQ_STR(json_string_value(json_object_get(e, "type")), "session:created");
        CHECK_EQ_STR(json_string_value(json_object_get(e, "actor")), "user");
        CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(e, "payload"), "workflow")), "blog-post");
        CHECK(h.off[1].seq == r.tail.seq && h.off[1].pos == r.tail.pos);
    }
    hist_free(&h);
    session_view v;
    session_view_init(&v);
    offset_t none = {0, 0}, pos;
    if (CHECK_EQ_INT(sstore_view(conn, "c1", 0, none, &v, &pos), 0)) {
        CHECK(v.is_workflow);
        CHECK_EQ_INT(json_integer_value(json_object_get(v.state, "n")), 0);
        CHECK_EQ_UINT(v.events, 1);
        /* As GET /v1/sessions/c1 (and dstream --db) shows it. */
        if (CHECK_EQ_INT(sstore_get(conn, "c1", &row), 0)) {
            char off[OFFSET_LEN + 1];
            offset_format(pos, off);
            json_t *j = sstore_session_json(&row, &v, pos);
            CHECK_EQ_STR(json_string_value(json_object_get(j, "id")), "c1");
            CHECK_EQ_STR(json_string_value(json_object_get(j, "workflow")), "blog-post");
            CHECK(json_is_null(json_object_get(j, "agent")) && json_is_null(json_object_get(j, "parent")));
            CHECK_EQ_STR(json_string_value(json_object_get(j, "position")), off);
            CHECK_EQ_STR(json_string_value(json_object_get(j, "events")), "/v1/sessions/c1/events");
            CHECK_EQ_STR(json_string_value(json_object_get(j, "status")), session_status_name(v.status));
            CHECK(json_is_object(json_object_get(j, "state")));
            json_decref(j);
        }
    }
    session_view_free(&v);

    /* The id is taken: refused, and the first session is untouched. */
    CHECK_EQ_INT(create("c1", NULL, NULL), LOG_ECONFLICT);
    CHECK_EQ_INT(create("c1", "blog-post", NULL), LOG_ECONFLICT);
    if (CHECK_EQ_INT(sstore_get(conn, "c1", &row), 0)) CHECK_EQ_STR(row.workflow, "blog-post");
    if (CHECK_EQ_INT(hist_read("c1", &h), 0)) CHECK_EQ_UINT(h.n, 1);
    hist_free(&h);

    CHECK_EQ_INT(create("chat1", NULL, NULL), 0);
    if (CHECK_EQ_INT(sstore_get(conn, "chat1", &row), 0)) {
        CHECK_EQ_STR(row.agent, "writer");
        CHECK_EQ_STR(row.workflow, "");
    }
    CHECK_EQ_INT(sstore_get(conn, "nobody", &row), LOG_ENOTFOUND);

    CHECK(sstore_valid_id("a-B_9"));
    CHECK(!sstore_valid_id(""));
    CHECK(!sstore_valid_id("a/b"));
    CHECK(!sstore_valid_id("a.b"));
    char longid[80];
    memset(longid, 'x', 64);
    longid[64] = '\0';
    CHECK(!sstore_valid_id(longid));
    longid[63] = '\0';
    CHECK(sstore_valid_id(longid));
    char id1[32], id2[32];
    sstore_new_id(id1, sizeof id1);
    sstore_new_id(id2, sizeof id2);
    CHECK(sstore_valid_id(id1));
    CHECK(strlen(id1) >= 16);
    CHECK(strcmp(id1, id2) != 0);
}

/* ---- commands ------------------------------------------------------------------------ */

static void test_command(void)
{
    cmd c;
    offset_t first, none = {0, 0};
    sstore_row before, after;
    hist h;
    CHECK_EQ_INT(create("cmd1", "blog-post", NULL), 0);

    /* Several events in one command; *first is where they start. */
    memset(&c, 0, sizeof c);
    cmd_add(&c, "workflow:started", "{\"workflow\": \"blog-post\", \"version\": 3}");
    cmd_add(&c, "phase:entered", "{\"phase\": \"draft\"}");
    cmd_add(&c, "step:started", "{\"phase\": \"draft\", \"step\": 0, \"kind\": \"human\"}");
    cmd_add(&c, "input:requested", "{\"interactionId\": \"ok\", \"input\": \"approval\", \"prompt\": \"?\"}");
    CHECK_EQ_INT(run("cmd1", &c, &first), 0);
    CHECK_EQ_INT(c.called, 1);
    CHECK_EQ_UINT(c.seen_events, 1);   /* decided on the view as of the tail */
    CHECK_EQ_STR(c.seen_status, "pending");
    CHECK_EQ_UINT(first.seq, 1);
    if (CHECK_EQ_INT(hist_read("cmd1", &h), 0) && CHECK_EQ_UINT(h.n, 5)) {
        CHECK(h.off[1].pos == first.pos);
        CHECK_EQ_STR(json_string_value(json_object_get(h.ev[4], "type")), "input:requested");
        CHECK_EQ_STR(json_string_value(json_object_get(h.ev[4], "actor")), "runner");
        /* One trace per command: every event is a child span of it. */
        json_t *t1 = json_object_get(h.ev[1], "trace"), *t4 = json_object_get(h.ev[4], "trace");
        CHECK(json_equal(json_object_get(t1, "traceId"), json_object_get(t4, "traceId")));
        CHECK(json_equal(json_object_get(t1, "parentSpanId"), json_object_get(t4, "parentSpanId")));
        CHECK(!json_equal(json_object_get(t1, "spanId"), json_object_get(t4, "spanId")));
    }
    hist_free(&h);
    if (CHECK_EQ_INT(sstore_get(conn, "cmd1", &before), 0)) CHECK_EQ_STR(before.status, "awaiting_input");

    /* A refused command writes nothing and returns decide's code. */
    memset(&c, 0, sizeof c);
    cmd_add(&c, "input:received", "{\"interactionId\": \"ok\", \"response\": true}");
    c.refuse = SSTORE_EREFUSED - 7;
    CHECK_EQ_INT(run("cmd1", &c, &first), SSTORE_EREFUSED - 7);
    CHECK_EQ_STR(c.seen_status, "awaiting_input");
    if (CHECK_EQ_INT(hist_read("cmd1", &h), 0)) CHECK_EQ_UINT(h.n, 5);
    hist_free(&h);
    if (CHECK_EQ_INT(sstore_get(conn, "cmd1", &after), 0)) {
        CHECK_EQ_STR(after.status, "awaiting_input");
        CHECK_EQ_INT(after.updated_ms, before.updated_ms);
    }
    session_view v;
    session_view_init(&v);
    if (CHECK_EQ_INT(sstore_view(conn, "cmd1", 0, none, &v, NULL), 0)) {
        CHECK_EQ_UINT(v.events, 5);
        CHECK(v.pending != NULL);
    }
    session_view_free(&v);

    /* Nothing to append is not an error and writes nothing. */
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(run("cmd1", &c, &first), 0);
    if (CHECK_EQ_INT(hist_read("cmd1", &h), 0)) CHECK_EQ_UINT(h.n, 5);
    hist_free(&h);

    /* The status row follows the events. */
    CHECK_EQ_INT(append1("cmd1", "input:received", "{\"interactionId\": \"ok\", \"response\": true}"), 0);
    if (CHECK_EQ_INT(sstore_get(conn, "cmd1", &after), 0)) CHECK_EQ_STR(after.status, "running");
    CHECK_EQ_INT(append1("cmd1", "workflow:completed", "{\"state\": {}}"), 0);
    if (CHECK_EQ_INT(sstore_get(conn, "cmd1", &after), 0)) CHECK_EQ_STR(after.status, "completed");

    /* Unknown session: decide is never asked. */
    memset(&c, 0, sizeof c);
    cmd_add(&c, "cancel:requested", "{}");
    CHECK_EQ_INT(run("nosuch", &c, &first), LOG_ENOTFOUND);
    CHECK_EQ_INT(c.called, 0);
}

/* ---- views at offsets, snapshots ------------------------------------------------------------ */

static void test_views_and_snapshots(void)
{
    CHECK_EQ_INT(create("long", "blog-post", NULL), 0);
    CHECK_EQ_INT(append1("long", "workflow:started", "{\"workflow\": \"blog-post\", \"version\": 3}"), 0);
    size_t n = 2 + grow("long", 148, 0);   /* 150 events: two or three snapshots */
    hist h;
    if (!CHECK_EQ_INT(hist_read("long", &h), 0)) return;
    CHECK_EQ_UINT(h.n, n);

    /* The state changes with the position. */
    offset_t none = {0, 0};
    json_t *a = view_at("long", 1, h.off[3], NULL, NULL);
    json_t *b = view_at("long", 1, h.off[40], NULL, NULL);
    json_t *c = view_at("long", 0, none, NULL, NULL);
    if (CHECK(a && b && c)) {
        CHECK(!json_equal(json_object_get(a, "state"), json_object_get(b, "state")));
        CHECK(!json_equal(json_object_get(b, "state"), json_object_get(c, "state")));
        CHECK_EQ_INT(json_integer_value(json_object_get(a, "eventCount")), 3);
        CHECK_EQ_INT(json_integer_value(json_object_get(b, "eventCount")), 40);
        CHECK_EQ_INT(json_integer_value(json_object_get(c, "eventCount")), (json_int_t)n);
        CHECK(json_integer_value(json_object_get(json_object_get(b, "usage"), "inputTokens")) <
              json_integer_value(json_object_get(json_object_get(c, "usage"), "inputTokens")));
    }
    json_decref(a);
    json_decref(b);
    json_decref(c);

    /* Every position equals a full replay. */
    check_all_views("long", "long");

    /* Past the tail is a range error. */
    offset_t past = h.off[n];
    past.seq++;
    int rc;
    CHECK(view_at("long", 1, past, NULL, &rc) == NULL);
    CHECK_EQ_INT(rc, LOG_ERANGE);
    CHECK(view_at("nosuch", 1, h.off[1], NULL, &rc) == NULL);
    CHECK_EQ_INT(rc, LOG_ENOTFOUND);
    /* An `at` whose byte part is not this stream's position for its event (made
     * up, or another stream's) is refused, near a snapshot or between them. */
    offset_t odd = h.off[3];
    odd.pos++;
    CHECK(view_at("long", 1, odd, NULL, &rc) == NULL);
    CHECK_EQ_INT(rc, LOG_EOFFSET);
    odd = h.off[SSTORE_SNAPSHOT_EVERY];
    odd.pos = 9999999999999999ULL;
    CHECK(view_at("long", 1, odd, NULL, &rc) == NULL);
    CHECK_EQ_INT(rc, LOG_EOFFSET);
    odd = h.off[n];
    odd.pos--;
    CHECK(view_at("long", 1, odd, NULL, &rc) == NULL);
    CHECK_EQ_INT(rc, LOG_EOFFSET);
    /* A fork at such an offset is refused too (lib/log checks fork offsets). */
    odd = h.off[5];
    odd.pos += 2;
    CHECK_EQ_INT(fork_at("long-odd-fork", "long", 1, odd), LOG_EOFFSET);
    CHECK_EQ_INT(fork_at("long-fork-ok", "long", 1, h.off[5]), 0);

    /* One snapshot per SSTORE_SNAPSHOT_EVERY events, where the session's phase
     * puts them: the first within the first SSTORE_SNAPSHOT_EVERY events. */
    int64_t nsnap, off_boundary, newest;
    uint64_t first = SSTORE_SNAPSHOT_EVERY - sstore_snapshot_phase("long");
    CHECK_EQ_INT(snapshots_of("long", &nsnap, &off_boundary, &newest), 0);
    CHECK_EQ_INT(nsnap, (int64_t)((n - first) / SSTORE_SNAPSHOT_EVERY + 1));
    CHECK_EQ_INT(off_boundary, 0);
    CHECK_EQ_INT(newest, newest_due("long", n));

    /* Replay starts at the nearest snapshot: mark the first (at s1) and the views
     * from s1 to the next (s2) show the mark, those before s1 and from s2 on do not. */
    char *saved = NULL;
    offset_t at1;
    uint64_t s1 = first, s2 = first + SSTORE_SNAPSHOT_EVERY;
    CHECK(s2 < n);
    CHECK_EQ_INT(store_of(conn)->sessions->snapshot_before(conn, "long", s1, &at1, &saved), 1);
    if (saved && CHECK_EQ_INT(at1.seq, s1)) {
        json_t *snap = parse(saved);
        json_object_set_new(json_object_get(snap, "state"), "marked", json_true());
        char *marked = json_dumps(snap, JSON_COMPACT);
        json_decref(snap);
        CHECK_EQ_INT(put_snapshot("long", at1, marked), 0);
        const size_t at[] = {1, s1 - 1, s1, s1 + 1, (s1 + s2) / 2, s2 - 1, s2, s2 + 1, n - 1};
        for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
            json_t *v = view_at("long", 1, h.off[at[i]], NULL, NULL);
            int has = json_object_get(json_object_get(v, "state"), "marked") != NULL;
            if (!CHECK_EQ_INT(has, at[i] >= s1 && at[i] < s2)) fprintf(stderr, "  at %zu\n", at[i]);
            json_decref(v);
        }
        json_t *v = view_at("long", 0, none, NULL, NULL);   /* the tail: from a later one */
        CHECK(json_object_get(json_object_get(v, "state"), "marked") == NULL);
        json_decref(v);
        CHECK_EQ_INT(put_snapshot("long", at1, saved), 0);
        free(marked);
    }
    free(saved);
    check_all_views("long", "long after restoring the snapshot");
    hist_free(&h);

    /* A chat history: queued, interrupted, assembled replies. */
    CHECK_EQ_INT(create("longchat", NULL, NULL), 0);
    grow("longchat", 140, 1);
    check_all_views("longchat", "longchat");
}

/* ---- forks ----------------------------------------------------------------------------------- */

static void check_fork(const char *fid, const char *parent, size_t k)
{
    hist ph, fh;
    if (!CHECK_EQ_INT(hist_read(parent, &ph), 0)) return;
    if (!CHECK(k <= ph.n)) return;
    int has_at = k < ph.n;
    CHECK_EQ_INT(fork_at(fid, parent, has_at, ph.off[k]), 0);
    char at[OFFSET_LEN + 1];
    offset_format(ph.off[k], at);

    sstore_row row, prow;
    if (CHECK_EQ_INT(sstore_get(conn, fid, &row), 0) && CHECK_EQ_INT(sstore_get(conn, parent, &prow), 0)) {
        CHECK_EQ_STR(row.parent, parent);
        CHECK_EQ_STR(row.fork_offset, at);
        CHECK_EQ_STR(row.workflow, prow.workflow);
        CHECK_EQ_STR(row.agent, prow.agent);
        CHECK_EQ_INT(row.wf_version, prow.wf_version);
        char stream[96];
        snprintf(stream, sizeof stream, "sessions/%s", fid);
        CHECK_EQ_STR(row.stream, stream);
    }
    /* The fork's stream: the parent's events before `at`, then session:forked. */
    if (CHECK_EQ_INT(hist_read(fid, &fh), 0) && CHECK_EQ_UINT(fh.n, k + 1)) {
        for (size_t i = 0; i < k; i++) {
            if (!CHECK(json_equal(fh.ev[i], ph.ev[i]) && fh.off[i].seq == ph.off[i].seq &&
                       fh.off[i].pos == ph.off[i].pos)) {
                fprintf(stderr, "  %s: event %zu differs from %s's\n", fid, i, parent);
                break;
            }
        }
        json_t *last = fh.ev[k];
        CHECK_EQ_STR(json_string_value(json_object_get(last, "type")), "session:forked");
        CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(last, "payload"), "from")), parent);
        CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(last, "payload"), "at")), at);
        CHECK(fh.off[k].seq == ph.off[k].seq && fh.off[k].pos == ph.off[k].pos);

        /* Its view at its tail is the parent's at `at` plus the fork event. */
        session_view v;
        session_view_init(&v);
        offset_t none = {0, 0};
        if (CHECK_EQ_INT(sstore_view(conn, parent, 1, ph.off[k], &v, NULL), 0)) {
            char off[OFFSET_LEN + 1];
            offset_format(fh.off[k], off);
            CHECK_EQ_INT(session_reduce(&v, last, off), 0);
            json_t *want = session_view_to_json(&v);
            json_t *got = view_at(fid, 0, none, NULL, NULL);
            CHECK(same_json(got, want, fid, k + 1));
            json_decref(got);
            json_decref(want);
        }
        session_view_free(&v);
        /* Before the fork point it is the parent. */
        for (size_t j = 0; j <= k; j += (k / 7 + 1)) {
            json_t *got = view_at(fid, 1, fh.off[j], NULL, NULL);
            json_t *want = view_at(parent, 1, ph.off[j], NULL, NULL);
            CHECK(same_json(got, want, fid, j));
            json_decref(got);
            json_decref(want);
        }
    }
    hist_free(&fh);
    hist_free(&ph);
    check_all_views(fid, fid);
}

static void test_fork(void)
{
    hist ph;
    offset_t none = {0, 0};
    if (!CHECK_EQ_INT(hist_read("long", &ph), 0)) return;
    json_t *parent_before = view_at("long", 0, none, NULL, NULL);

    check_fork("f5", "long", 5);
    check_fork("f64", "long", 64);
    check_fork("f100", "long", 100);
    check_fork("f140", "long", 140);
    check_fork("ftail", "long", ph.n);     /* no `at`: the whole history */
    check_fork("f0", "long", 0);           /* at the very start: only session:forked */
    check_fork("chatf", "longchat", 77);

    /* A fork grows on its own (past its own snapshot boundaries); the parent does not move. */
    grow("f100", 90, 0);
    check_all_views("f100", "f100 grown");
    grow("f5", 70, 0);
    check_all_views("f5", "f5 grown");
    json_t *parent_after = view_at("long", 0, none, NULL, NULL);
    CHECK(same_json(parent_after, parent_before, "long after forks", 0));
    hist h;
    if (CHECK_EQ_INT(hist_read("long", &h), 0)) CHECK_EQ_UINT(h.n, ph.n);
    hist_free(&h);
    /* A fork of a fork. */
    check_fork("ff", "f100", 120);

    /* Mistakes. */
    offset_t past = ph.off[ph.n];
    past.seq++;
    CHECK_EQ_INT(fork_at("fx", "long", 1, past), LOG_ERANGE);
    CHECK_EQ_INT(fork_at("fx", "nosuch", 1, ph.off[1]), LOG_ENOTFOUND);
    CHECK_EQ_INT(fork_at("f5", "long", 1, ph.off[1]), LOG_ECONFLICT);
    CHECK_EQ_INT(fork_at("c1", "long", 1, ph.off[1]), LOG_ECONFLICT);
    sstore_row row;
    CHECK_EQ_INT(sstore_get(conn, "fx", &row), LOG_ENOTFOUND);
    json_decref(parent_before);
    json_decref(parent_after);
    hist_free(&ph);
}

/* ---- list ------------------------------------------------------------------------------------ */

/* Every session of the given status (NULL: all), walked in pages of `limit`. */
static json_t *list_all(const char *status, int limit, int *pages)
{
    json_t *all = json_array();
    char cursor[160] = "", next[160];
    *pages = 0;
    for (;;) {
        json_t *page = json_array();
        sstore_filter f;
        memset(&f, 0, sizeof f);
        if (status) snprintf(f.status, sizeof f.status, "%s", status);
        int rc = sstore_list(conn, &f, cursor, limit, page, next, sizeof next);
        if (!CHECK_EQ_INT(rc, 0)) {
            json_decref(page);
            break;
        }
        (*pages)++;
        CHECK(json_array_size(page) <= (size_t)limit);
        if (next[0]) CHECK_EQ_UINT(json_array_size(page), (size_t)limit);
        json_array_extend(all, page);
        json_decref(page);
        if (!next[0] || *pages > 1000) break;
        snprintf(cursor, sizeof cursor, "%s", next);
    }
    return all;
}

static size_t count_prefix(const json_t *arr, const char *prefix)
{
    size_t i, n = 0;
    json_t *r;
    json_array_foreach(arr, i, r) {
        if (!strncmp(json_string_value(json_object_get(r, "id")), prefix, strlen(prefix))) n++;
    }
    return n;
}

static void test_list(void)
{
    static const struct {
        const char *id, *type, *payload, *status;
    } s[] = {
        {"L-pending", NULL, NULL, "pending"},
        {"L-running", "workflow:started", "{}", "running"},
        {"L-awaiting", "input:requested", "{\"interactionId\": \"h\"}", "awaiting_input"},
        {"L-completed", "workflow:completed", "{}", "completed"},
        {"L-failed", "workflow:failed", "{\"error\": \"x\"}", "failed"},
        {"L-cancelled", "session:cancelled", "{}", "cancelled"},
        {"L-pending2", NULL, NULL, "pending"},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        CHECK_EQ_INT(create(s[i].id, "w", NULL), 0);
        if (s[i].type) CHECK_EQ_INT(append1(s[i].id, s[i].type, s[i].payload), 0);
    }
    int pages;
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        json_t *got = list_all(s[i].status, 100, &pages);
        size_t j, want = 0;
        json_t *r;
        for (j = 0; j < sizeof s / sizeof s[0]; j++) want += !strcmp(s[j].status, s[i].status);
        if (!CHECK_EQ_UINT(count_prefix(got, "L-"), want)) fprintf(stderr, "  status %s\n", s[i].status);
        json_array_foreach(got, j, r) CHECK_EQ_STR(json_string_value(json_object_get(r, "status")), s[i].status);
        json_decref(got);
    }

    /* Paging: every session once, newest first, whatever the page size. */
    json_t *whole = list_all(NULL, 100, &pages);
    size_t total = json_array_size(whole);
    CHECK(total >= 7 + 2);
    for (int limit = 1; limit <= 4; limit++) {
        json_t *got = list_all(NULL, limit, &pages);
        CHECK_EQ_UINT(json_array_size(got), total);
        CHECK_EQ_INT(pages, (int)((total + (size_t)limit - 1) / (size_t)limit));
        CHECK(json_equal(got, whole));
        json_decref(got);
    }
    size_t i;
    json_t *r, *prev = NULL;
    json_array_foreach(whole, i, r) {
        if (prev) {
            json_int_t a = json_integer_value(json_object_get(prev, "createdMs"));
            json_int_t b = json_integer_value(json_object_get(r, "createdMs"));
            const char *ia = json_string_value(json_object_get(prev, "id"));
            const char *ib = json_string_value(json_object_get(r, "id"));
            if (!CHECK(a > b || (a == b && strcmp(ia, ib) > 0))) fprintf(stderr, "  order: %s before %s\n", ia, ib);
        }
        prev = r;
    }
    json_t *pend = list_all("pending", 1, &pages);
    CHECK_EQ_UINT(count_prefix(pend, "L-pending"), 2);
    json_decref(pend);
    json_decref(whole);

    /* A row's fields. */
    json_t *one = list_all("failed", 100, &pages);
    json_array_foreach(one, i, r) {
        if (strcmp(json_string_value(json_object_get(r, "id")), "L-failed")) continue;
        CHECK_EQ_STR(json_string_value(json_object_get(r, "workflow")), "w");
        CHECK(json_is_null(json_object_get(r, "agent")));
        CHECK(json_is_null(json_object_get(r, "parent")));
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "workflowVersion")), 3);
    }
    json_decref(one);

    char next[160];
    json_t *arr = json_array();
    CHECK_EQ_INT(sstore_list(conn, NULL, "garbage", 10, arr, next, sizeof next), LOG_EINVAL);
    CHECK_EQ_INT(sstore_list(conn, NULL, "123.bad id", 10, arr, next, sizeof next), LOG_EINVAL);
    CHECK_EQ_INT(sstore_list(conn, NULL, "123", 10, arr, next, sizeof next), LOG_EINVAL);
    CHECK_EQ_UINT(json_array_size(arr), 0);
    json_decref(arr);
}

/* ---- a filtered list: its cursors name only what it shows ------------------------------ */

static int keep_visible(void *ud, const char *id)
{
    (void)ud;
    return strncmp(id, "hid-", 4) != 0;
}

/* Page through sstore_list_filtered (keep_visible) with limit; every cursor is checked
 * for a hidden id. Returns the visible ids seen, in order. */
static json_t *list_visible(int limit, int *pages)
{
    json_t *all = json_array();
    char cursor[160] = "", next[160];
    *pages = 0;
    for (;;) {
        json_t *page = json_array();
        int rc = sstore_list_filtered(conn, NULL, cursor, limit, keep_visible, NULL, page, next, sizeof next);
        if (!CHECK_EQ_INT(rc, 0)) {
            json_decref(page);
            break;
        }
        (*pages)++;
        if (!CHECK(strstr(next, "hid-") == NULL)) fprintf(stderr, "  cursor %s names a hidden session\n", next);
        size_t i;
        json_t *r;
        json_array_foreach(page, i, r) json_array_append(all, json_object_get(r, "id"));
        json_decref(page);
        if (!next[0] || *pages > 1000) break;
        snprintf(cursor, sizeof cursor, "%s", next);
    }
    return all;
}

/* Session rows as they are stored (no stream behind them: listing reads the rows
 * only), inserted through the store in one group. */
typedef struct rows_put {
    const char *const *ids;
    const int64_t *created_ms;
    int n;
} rows_put;

static int put_rows_tx(log_conn_t *c, void *arg)
{
    rows_put *p = arg;
    for (int i = 0; i < p->n; i++) {
        sstore_row row;
        memset(&row, 0, sizeof row);
        snprintf(row.id, sizeof row.id, "%s", p->ids[i]);
        snprintf(row.stream, sizeof row.stream, "s");
        snprintf(row.status, sizeof row.status, "pending");
        row.created_ms = p->created_ms[i];
        int rc = store_of(c)->sessions->insert(c, &row);
        if (rc) return rc;
    }
    return 0;
}

static int put_rows(const char *const *ids, const int64_t *created_ms, int n)
{
    rows_put p = {ids, created_ms, n};
    return log_transact(conn, put_rows_tx, &p);
}

static void test_list_hidden(void)
{
    /* A database of its own: this test counts (the earlier tests' rows would be listed). */
    test_db_close(dir, lg, conn);
    dir[0] = '\0';
    if (test_db_open("test-sstore", dir, sizeof dir, &lg, &conn)) return;
    /* Newest first: vis-3, hid-2, vis-1, hid-0 at 1 ms apart (a page of one that ends
     * on vis-3 came from a cursor naming hid-2 before). */
    static const char *const first[] = {"hid-0", "vis-1", "hid-2", "vis-3"};
    static const int64_t first_ms[] = {100, 101, 102, 103};
    CHECK_EQ_INT(put_rows(first, first_ms, 4), 0);
    int pages;
    json_t *got = list_visible(1, &pages);
    json_t *want = parse("[\"vis-3\", \"vis-1\"]");
    CHECK(json_equal(got, want));
    json_decref(want);
    json_decref(got);

    /* More hidden sessions than a page looks at: it ends short, with a cursor that
     * names none of them; the visible ones on both sides are all listed once. Two
     * hidden ones share the millisecond where the scan stops. */
    enum { HIDDEN = SSTORE_LIST_SCAN + 10 };
    static char idbuf[HIDDEN + 3][32];
    static const char *row_ids[HIDDEN + 3];
    static int64_t ms[HIDDEN + 3];
    for (int i = 0; i < HIDDEN; i++) {
        snprintf(idbuf[i], sizeof idbuf[i], "hid-x%05d", i);
        row_ids[i] = idbuf[i];
        ms[i] = 1000 + i / 2;
    }
    static const char *const vis[] = {"vis-old", "vis-mid", "vis-new"};
    static const int64_t vis_ms[] = {999, 1003, 900000};
    for (int i = 0; i < 3; i++) {
        row_ids[HIDDEN + i] = vis[i];
        ms[HIDDEN + i] = vis_ms[i];
    }
    CHECK_EQ_INT(put_rows(row_ids, ms, HIDDEN + 3), 0);
    got = list_visible(2, &pages);
    want = parse("[\"vis-new\", \"vis-mid\", \"vis-old\", \"vis-3\", \"vis-1\"]");
    if (!CHECK(json_equal(got, want))) {
        char *t = json_dumps(got, 0);
        fprintf(stderr, "  got %s\n", t);
        free(t);
    }
    CHECK(pages >= 2);
    json_decref(want);
    json_decref(got);
    /* "<ms>." is a cursor: what was created before that millisecond. */
    json_t *arr = json_array();
    char next[160];
    CHECK_EQ_INT(sstore_list_filtered(conn, NULL, "103.", 10, keep_visible, NULL, arr, next, sizeof next), 0);
    want = parse("[\"vis-1\"]");
    json_t *ids = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(arr, i, r) json_array_append(ids, json_object_get(r, "id"));
    CHECK(json_equal(ids, want));
    CHECK_EQ_STR(next, "");
    json_decref(ids);
    json_decref(want);
    json_decref(arr);
}

/* ---- delete ---------------------------------------------------------------------------------- */

static void test_delete(void)
{
    sstore_row row;
    offset_t none = {0, 0};
    int pages, rc;
    CHECK_EQ_INT(create("del1", "w", NULL), 0);
    CHECK_EQ_INT(sstore_delete(conn, "del1"), 0);
    CHECK_EQ_INT(sstore_get(conn, "del1", &row), LOG_ENOTFOUND);
    CHECK_EQ_INT(sstore_delete(conn, "del1"), LOG_ENOTFOUND);
    CHECK_EQ_INT(append1("del1", "cancel:requested", "{}"), LOG_ENOTFOUND);
    json_t *all = list_all(NULL, 100, &pages);
    CHECK_EQ_UINT(count_prefix(all, "del1"), 0);
    json_decref(all);
    CHECK(view_at("del1", 0, none, NULL, &rc) == NULL);
    CHECK(rc != 0);
    CHECK_EQ_INT(sstore_delete(conn, "nosuch"), LOG_ENOTFOUND);

    /* The id of a deleted session can be used again (or is refused as taken), but
     * never fails as a database error. */
    rc = create("del1", NULL, NULL);
    if (!CHECK(rc == 0 || rc == LOG_ECONFLICT)) fprintf(stderr, "  re-create after delete: %d (%s)\n", rc, errs_str(rc));

    /* A parent deleted under its forks: its snapshots go, the forks still read. */
    json_t *f100 = view_at("f100", 0, none, NULL, NULL);
    json_t *f140 = view_at("f140", 0, none, NULL, NULL);
    CHECK_EQ_INT(sstore_delete(conn, "long"), 0);
    CHECK_EQ_INT(sstore_get(conn, "long", &row), LOG_ENOTFOUND);
    CHECK_EQ_INT(snapshot_count("long"), 0);
    json_t *g100 = view_at("f100", 0, none, NULL, NULL);
    json_t *g140 = view_at("f140", 0, none, NULL, NULL);
    CHECK(same_json(g100, f100, "f100 after its parent was deleted", 0));
    CHECK(same_json(g140, f140, "f140 after its parent was deleted", 0));
    check_all_views("f140", "f140 after its parent was deleted");
    CHECK_EQ_INT(append1("f140", "cancel:requested", "{}"), 0);
    json_decref(f100);
    json_decref(f140);
    json_decref(g100);
    json_decref(g140);
}

/* The recording{} of session id's session:forked (new reference; NULL: none). */
static json_t *forked_recording(const char *id)
{
    hist h;
    json_t *rec = NULL;
    /* After the source's history it shares: the fork's first event of its own, last. */
    if (CHECK_EQ_INT(hist_read(id, &h), 0) && CHECK(h.n >= 1) &&
        CHECK_EQ_STR(json_string_value(json_object_get(h.ev[h.n - 1], "type")), EV_SESSION_FORKED))
        rec = json_incref(json_object_get(json_object_get(h.ev[h.n - 1], "payload"), PK_RECORDING));
    hist_free(&h);
    return rec;
}

/* A fork's session:forked names only the recording setting that differs from its
 * source's: the scope when it is another, nothing when nothing differs. */
static void test_fork_recording(void)
{
    sstore_create_req r;
    session_trace t;
    memset(&r, 0, sizeof r);
    session_trace_new(&t);
    r.id = "recsrc";
    r.trace = &t;
    r.agent = "writer";
    r.created = parse("{\"agent\": \"writer\", \"input\": {}, \"recording\": {\"mode\": \"record\", \"scope\": [\"t1\"]}}");
    if (!CHECK_EQ_INT(sstore_create(conn, &r), 0)) {
        json_decref(r.created);
        return;
    }
    json_decref(r.created);
    static const struct {
        const char *id, *named, *want;   /* what the fork names; what session:forked says (NULL: nothing) */
    } cases[] = {
        {"recf-same", "{\"scope\": [\"t1\"]}", NULL},
        {"recf-mode", "{\"mode\": \"playback\", \"scope\": [\"t1\"]}", "{\"mode\": \"playback\"}"},
        {"recf-scope", "{\"scope\": [\"t2\"]}", "{\"scope\": [\"t2\"]}"},
        {"recf-none", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&r, 0, sizeof r);
        r.id = cases[i].id;
        r.trace = &t;
        r.parent = "recsrc";
        r.forked_recording = cases[i].named ? parse(cases[i].named) : NULL;
        json_t *before = r.forked_recording ? json_deep_copy(r.forked_recording) : NULL;
        if (CHECK_EQ_INT(sstore_create(conn, &r), 0)) {
            json_t *got = forked_recording(cases[i].id), *want = cases[i].want ? parse(cases[i].want) : NULL;
            if (!CHECK(want ? json_equal(got, want) : got == NULL)) fprintf(stderr, "  fork %s\n", cases[i].id);
            json_decref(got);
            json_decref(want);
        }
        /* The caller's setting is borrowed: left as it was. */
        if (before) CHECK(json_equal(before, r.forked_recording));
        json_decref(before);
        json_decref(r.forked_recording);
    }
}

/* Labels: the row keeps the caller's, a fork its parent's, and the JSON of a session
 * and of a list row show them ({} for none). */
static void test_labels(void)
{
    sstore_create_req r;
    session_trace t;
    memset(&r, 0, sizeof r);
    session_trace_new(&t);
    r.id = "lab1";
    r.trace = &t;
    r.agent = "writer";
    r.labels = "{\"team\":\"red\"}";
    r.created = json_pack("{s:s, s:{}}", "agent", "writer", "input");
    CHECK_EQ_INT(sstore_create(conn, &r), 0);
    json_decref(r.created);
    CHECK_EQ_INT(create("lab2", NULL, NULL), 0);
    offset_t none = {0, 0};
    CHECK_EQ_INT(fork_at("lab3", "lab1", 0, none), 0);
    sstore_row row;
    CHECK_EQ_INT(sstore_get(conn, "lab3", &row), 0);
    CHECK_EQ_STR(row.labels, "{\"team\":\"red\"}");
    json_t *l = sstore_labels_json(&row);
    CHECK_EQ_STR(json_string_value(json_object_get(l, "team")), "red");
    json_decref(l);
    CHECK_EQ_INT(sstore_get(conn, "lab2", &row), 0);
    l = sstore_labels_json(&row);
    CHECK(json_is_object(l) && json_object_size(l) == 0);
    json_decref(l);
    sstore_filter f;
    memset(&f, 0, sizeof f);
    snprintf(f.labels, sizeof f.labels, "{\"team\":\"red\"}");
    json_t *page = json_array();
    char next[160];
    CHECK_EQ_INT(sstore_list(conn, &f, "", 10, page, next, sizeof next), 0);
    CHECK_EQ_UINT(json_array_size(page), 2);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(json_array_get(page, 0), "labels"), "team")), "red");
    json_decref(page);
}

/* Where a failed session is retried from: a chat just after its last user message
 * that wanted a reply (a background one does not count), its tail when that message
 * is the last event; a workflow its last step:started; nothing asked or started:
 * LOG_ERANGE; no session: LOG_ENOTFOUND. */
static void test_retry_point(void)
{
    hist h;
    offset_t at;
    CHECK_EQ_INT(create("rp1", NULL, NULL), 0);
    CHECK_EQ_INT(sstore_retry_point(conn, "rp1", &at), LOG_ERANGE);
    CHECK_EQ_INT(sstore_retry_point(conn, "rp-none", &at), LOG_ENOTFOUND);
    CHECK_EQ_INT(append1("rp1", EV_MESSAGE_USER, "{\"content\": \"hi\", \"mode\": \"interrupt\"}"), 0);
    CHECK_EQ_INT(hist_read("rp1", &h), 0);
    CHECK_EQ_INT(sstore_retry_point(conn, "rp1", &at), 0);
    CHECK(at.seq == h.off[h.n].seq && at.pos == h.off[h.n].pos);     /* the tail */
    hist_free(&h);
    CHECK_EQ_INT(append1("rp1", EV_PROVIDER_REQUEST_STARTED, "{\"requestId\": \"q1\"}"), 0);
    CHECK_EQ_INT(append1("rp1", EV_REPLY_FAILED, "{\"error\": \"no\"}"), 0);
    CHECK_EQ_INT(append1("rp1", EV_MESSAGE_USER, "{\"content\": \"aside\", \"mode\": \"background\"}"), 0);
    CHECK_EQ_INT(hist_read("rp1", &h), 0);
    CHECK_EQ_INT(sstore_retry_point(conn, "rp1", &at), 0);
    CHECK_EQ_UINT(at.seq, 2);                   /* just after the message at 1 */
    CHECK(at.pos == h.off[2].pos);
    hist_free(&h);

    CHECK_EQ_INT(create("rp2", "wf", NULL), 0);
    CHECK_EQ_INT(sstore_retry_point(conn, "rp2", &at), LOG_ERANGE);
    CHECK_EQ_INT(append1("rp2", EV_WORKFLOW_STARTED, "{}"), 0);
    CHECK_EQ_INT(append1("rp2", EV_STEP_STARTED, "{\"phase\": \"a\", \"step\": 0}"), 0);
    CHECK_EQ_INT(append1("rp2", EV_STEP_COMPLETED, "{\"phase\": \"a\", \"step\": 0}"), 0);
    CHECK_EQ_INT(append1("rp2", EV_STEP_STARTED, "{\"phase\": \"a\", \"step\": 1}"), 0);
    CHECK_EQ_INT(append1("rp2", EV_WORKFLOW_FAILED, "{\"error\": \"no\"}"), 0);
    CHECK_EQ_INT(hist_read("rp2", &h), 0);
    CHECK_EQ_INT(sstore_retry_point(conn, "rp2", &at), 0);
    CHECK_EQ_UINT(at.seq, 4);                   /* the second step:started */
    CHECK(at.pos == h.off[4].pos);
    hist_free(&h);
    /* A fork reads its source's history: its point may lie there. */
    offset_t none = {0, 0};
    CHECK_EQ_INT(fork_at("rp3", "rp2", 0, none), 0);
    CHECK_EQ_INT(sstore_retry_point(conn, "rp3", &at), 0);
    CHECK_EQ_UINT(at.seq, 4);

    /* A retry's fork may run another version (a workflow) or agent (a chat): on its
     * row and in its view; the other one does not apply. */
    sstore_create_req r;
    session_trace t;
    const struct { const char *id, *parent, *agent; int version, want_version; const char *want_agent; } forks[] = {
        {"rp4", "rp2", "other", 5, 5, ""}, {"rp5", "rp1", "other", 5, 0, "other"}};
    for (size_t i = 0; i < 2; i++) {
        memset(&r, 0, sizeof r);
        session_trace_new(&t);
        r.id = forks[i].id;
        r.trace = &t;
        r.parent = forks[i].parent;
        r.fork_agent = forks[i].agent;
        r.fork_version = forks[i].version;
        CHECK_EQ_INT(sstore_create(conn, &r), 0);
        sstore_row row;
        CHECK_EQ_INT(sstore_get(conn, forks[i].id, &row), 0);
        CHECK_EQ_INT(row.wf_version, forks[i].want_version);
        CHECK_EQ_STR(row.agent, forks[i].want_agent);
        session_view v;
        session_view_init(&v);
        CHECK_EQ_INT(sstore_view(conn, forks[i].id, 0, none, &v, NULL), 0);
        if (forks[i].want_version)
            CHECK_EQ_INT(json_integer_value(json_object_get(v.created, PK_VERSION)), forks[i].want_version);
        else
            CHECK_EQ_STR(json_string_value(json_object_get(v.created, PK_AGENT)), forks[i].want_agent);
        session_view_free(&v);
    }
}

/* ---- the runner's cached view ------------------------------------------------------------- */

typedef struct cached_arg {
    const char *id;
    cmd *c;
    session_view *v;
    uint64_t *v_seq;
    offset_t first;
} cached_arg;

static int op_cached(log_conn_t *c, void *arg)
{
    cached_arg *a = arg;
    sstore_event ev[3 * SSTORE_EVENTS_MAX];
    session_trace t;
    session_trace_new(&t);
    memset(ev, 0, sizeof ev);
    for (size_t i = 0; i < a->c->n; i++) {
        ev[i].type = a->c->type[i];
        ev[i].payload = a->c->payload[i];
        ev[i].actor = "runner";
    }
    return sstore_tx_append_cached(c, a->id, &t, ev, a->c->n, a->v, a->v_seq, &a->first);
}

/* One commit of the runner's (outbox.c): c's events through sstore_tx_append_cached
 * with its view and seq; then the view must be the log's at the tail, the seq the
 * tail's and first where the events begin. */
static void cached_commit(const char *id, cmd *c, session_view *v, uint64_t *v_seq, const char *what)
{
    hist before;
    if (!CHECK_EQ_INT(hist_read(id, &before), 0)) return;
    offset_t tail = before.off[before.n];
    hist_free(&before);
    cached_arg a = {id, c, v, v_seq, {0, 0}};
    size_t n = c->n;
    int rc = log_transact(conn, op_cached, &a);
    cmd_free(c);
    if (!CHECK_EQ_INT(rc, 0)) return;
    offset_t pos, none = {0, 0};
    json_t *want = view_at(id, 0, none, &pos, NULL);
    json_t *got = session_view_to_json(v);
    CHECK(same_json(got, want, what, (size_t)pos.seq));
    CHECK_EQ_UINT(*v_seq, pos.seq);
    CHECK_EQ_UINT(a.first.seq, tail.seq);
    CHECK_EQ_UINT(a.first.pos, tail.pos);
    CHECK_EQ_UINT(a.first.seq + n, pos.seq);
    json_decref(got);
    json_decref(want);
    /* The row's status follows the events too. */
    sstore_row row;
    json_t *st = view_at(id, 0, none, NULL, NULL);
    if (CHECK_EQ_INT(sstore_get(conn, id, &row), 0))
        CHECK_EQ_STR(row.status, json_string_value(json_object_get(st, "status")));
    json_decref(st);
}

/* The runner keeps a session's view across its commits (outbox.c): each commit
 * reads the stream's row once (its append) and folds its deltas from the events
 * it encoded. Whatever the view was (none, the tail, stale after another writer's
 * events, a batch past SSTORE_EVENTS_MAX, across snapshot boundaries), after the
 * commit it is the log's view at the tail, deltas with NULs and multi-byte text
 * included. */
/* A command whose view was made before another writer's events committed (on
 * PostgreSQL nothing is locked until its append): its events land after them, and
 * the snapshots and the row's status made from its view must still be the log's.
 * Each command here commits another connection's event from its decide, between its
 * view and its append; 40 of them cross snapshot boundaries on the way, inside
 * their own events too. */
typedef struct race {
    cmd c;
    log_conn_t *other;
    const char *id;
    int rc;
} race;

static int decide_race(void *ud, const session_view *v, sstore_event *ev, size_t *n)
{
    race *r = ud;
    session_trace t;
    session_trace_new(&t);
    cmd o;
    memset(&o, 0, sizeof o);
    cmd_add(&o, "message:user", "{\"content\": \"between\", \"mode\": \"background\"}");
    if (!r->rc) r->rc = sstore_command(r->other, r->id, &t, decide, &o, NULL);
    cmd_free(&o);
    return decide(&r->c, v, ev, n);
}

static void test_command_race(void)
{
    char err[256] = "";
    log_opts o = {0, 5000, 1, 0, 0};
    /* Another log of the database, as another process's (one log's groups are made
     * one at a time: a command of the same log inside another's would wait for it). */
    log_t *l2 = log_open(test_db_st()->uri, &o, err, sizeof err);
    log_conn_t *other = l2 ? log_conn_open(l2, err, sizeof err) : NULL;
    if (!CHECK(other != NULL)) {
        fprintf(stderr, "  %s\n", err);
        if (l2) log_close(l2);
        return;
    }
    CHECK_EQ_INT(create("race-1", NULL, NULL), 0);
    for (int i = 0; i < 40; i++) {
        race r;
        memset(&r, 0, sizeof r);
        r.other = other;
        r.id = "race-1";
        for (int k = 0; k < 1 + i % 3; k++)    /* so that boundaries fall in these too */
            cmd_add(&r.c, "message:user", "{\"content\": \"m%d.%d\", \"mode\": \"background\"}", i, k);
        session_trace t;
        session_trace_new(&t);
        CHECK_EQ_INT(sstore_command(conn, "race-1", &t, decide_race, &r, NULL), 0);
        CHECK_EQ_INT(r.rc, 0);
        cmd_free(&r.c);
    }
    int64_t count, off, newest;
    CHECK_EQ_INT(snapshots_of("race-1", &count, &off, &newest), 0);
    CHECK(count >= 2);
    check_all_views("race-1", "commands raced by another writer");
    log_conn_close(other);
    log_close(l2);
}

static void test_append_cached(void)
{
    CHECK_EQ_INT(create("cached-1", NULL, NULL), 0);
    session_view v;
    uint64_t v_seq = 0;
    session_view_init(&v);
    cmd c;
    memset(&c, 0, sizeof c);
    /* Not known yet: made from the log. */
    cmd_add(&c, "message:user", "{\"content\": \"q\", \"mode\": \"queue\"}");
    cmd_add(&c, "provider:request_started", "{\"requestId\": \"r1\"}");
    cmd_add(&c, "text:delta", "{\"requestId\": \"r1\", \"text\": \"a\\u0000b\"}");
    cached_commit("cached-1", &c, &v, &v_seq, "first commit");
    /* At the tail: deltas only, then a mix, many times (snapshots on the way). */
    for (int i = 0; i < 40; i++) {
        memset(&c, 0, sizeof c);
        cmd_add(&c, "text:delta", "{\"requestId\": \"r1\", \"text\": \"d%d \\u00e9\\u4e2d\"}", i);
        if (i % 3 == 0) cmd_add(&c, "thinking:delta", "{\"requestId\": \"r1\", \"text\": \"t%d\"}", i);
        if (i % 7 == 0) cmd_add(&c, "state:updated", "{\"set\": {\"n\": %d}}", i);
        cached_commit("cached-1", &c, &v, &v_seq, "commit at the tail");
    }
    /* Stale: another writer's events came in between. */
    CHECK_EQ_INT(append1("cached-1", "text:delta", "{\"requestId\": \"r1\", \"text\": \"other\"}"), 0);
    memset(&c, 0, sizeof c);
    cmd_add(&c, "text:delta", "{\"requestId\": \"r1\", \"text\": \"after\"}");
    cached_commit("cached-1", &c, &v, &v_seq, "commit after another writer");
    /* A seq that is not the tail's (a failed commit would leave 0; a wrong one). */
    v_seq = 3;
    memset(&c, 0, sizeof c);
    cmd_add(&c, "text:delta", "{\"requestId\": \"r1\", \"text\": \"wrong seq\"}");
    cached_commit("cached-1", &c, &v, &v_seq, "commit with a wrong seq");
    /* More events than one record holds, from a stale view. */
    CHECK_EQ_INT(append1("cached-1", "message:user", "{\"content\": \"q2\", \"mode\": \"queue\"}"), 0);
    memset(&c, 0, sizeof c);
    cmd_add(&c, "provider:request_ended",
            "{\"requestId\": \"r1\", \"usage\": {\"inputTokens\": 1, \"outputTokens\": 1}, \"costUsd\": 0.1}");
    cmd_add(&c, "provider:request_started", "{\"requestId\": \"r2\"}");
    for (size_t i = c.n; i < SSTORE_EVENTS_MAX + 5; i++)
        cmd_add(&c, "text:delta", "{\"requestId\": \"r2\", \"text\": \"b%zu\"}", i);
    cached_commit("cached-1", &c, &v, &v_seq, "commit of two records");
    /* A session that is gone: its error, and no seq. */
    memset(&c, 0, sizeof c);
    cmd_add(&c, "text:delta", "{\"requestId\": \"r2\", \"text\": \"x\"}");
    cached_arg a = {"cached-none", &c, &v, &v_seq, {0, 0}};
    CHECK_EQ_INT(log_transact(conn, op_cached, &a), LOG_ENOTFOUND);
    CHECK_EQ_UINT(v_seq, 0);
    cmd_free(&c);
    /* One deleted while the runner kept its view: gone, nothing written, no seq. */
    CHECK_EQ_INT(create("cached-2", NULL, NULL), 0);
    memset(&c, 0, sizeof c);
    cmd_add(&c, "text:delta", "{\"requestId\": \"r2\", \"text\": \"x\"}");
    cached_arg d = {"cached-2", &c, &v, &v_seq, {0, 0}};
    CHECK_EQ_INT(log_transact(conn, op_cached, &d), 0);
    CHECK(v_seq > 0);
    CHECK_EQ_INT(sstore_delete(conn, "cached-2"), 0);
    int gone = log_transact(conn, op_cached, &d);
    CHECK(gone == LOG_ENOTFOUND || gone == LOG_EGONE);
    CHECK_EQ_UINT(v_seq, 0);
    /* ... and a fork reading it keeps its stream (soft-deleted): still gone. */
    CHECK_EQ_INT(create("cached-3", NULL, NULL), 0);
    offset_t none = {0, 0};
    CHECK_EQ_INT(fork_at("cached-3f", "cached-3", 0, none), 0);
    CHECK_EQ_INT(sstore_delete(conn, "cached-3"), 0);
    cached_arg f = {"cached-3", &c, &v, &v_seq, {0, 0}};
    gone = log_transact(conn, op_cached, &f);
    CHECK(gone == LOG_ENOTFOUND || gone == LOG_EGONE);
    CHECK_EQ_UINT(v_seq, 0);
    cmd_free(&c);
    session_view_free(&v);
}

/* The runner's commit of many sessions at once (sstore_tx_append_batch): sessions
 * of one snapshot phase (these ids share one) that started together reach a
 * snapshot in the same commit, and their snapshots are written together (one
 * statement on PostgreSQL). Every view at every offset is still the full replay's,
 * each session has its snapshots where its phase puts them, and the views kept are
 * the log's at the tail. Sessions of other phases (most ids) snapshot in other
 * commits: a burst of sessions does not put all its snapshots in one. */
typedef struct batch_arg {
    sstore_batch *b;
    size_t n;
} batch_arg;

static int op_batch(log_conn_t *c, void *arg)
{
    batch_arg *a = arg;
    session_trace t;
    session_trace_new(&t);
    return sstore_tx_append_batch(c, &t, a->b, a->n, NULL);
}

static void test_append_batch(void)
{
    enum { N = 3 };
    const char *ids[N] = {"batch-1", "batch-41", "batch-144"};
    CHECK_EQ_UINT(sstore_snapshot_phase(ids[1]), sstore_snapshot_phase(ids[0]));
    CHECK_EQ_UINT(sstore_snapshot_phase(ids[2]), sstore_snapshot_phase(ids[0]));
    /* ... and ids differ in phase as a hash's do: 64 ids of a burst take many. */
    int seen[SSTORE_SNAPSHOT_EVERY] = {0}, phases = 0;
    for (int i = 0; i < 64; i++) {
        char id[32];
        snprintf(id, sizeof id, "burst-%d", i);
        unsigned p = sstore_snapshot_phase(id);
        if (!CHECK(p < SSTORE_SNAPSHOT_EVERY)) break;
        phases += !seen[p]++;
    }
    CHECK(phases >= 32);
    session_view v[N];
    uint64_t vs[N] = {0, 0, 0};
    for (int i = 0; i < N; i++) {
        CHECK_EQ_INT(create(ids[i], NULL, NULL), 0);
        session_view_init(&v[i]);
    }
    for (int round = 0; round < 70; round++) {
        cmd c[N];
        sstore_event ev[N][4];
        sstore_batch b[N];
        memset(c, 0, sizeof c);
        memset(ev, 0, sizeof ev);
        for (int i = 0; i < N; i++) {
            if (round == 0) {
                cmd_add(&c[i], "message:user", "{\"content\": \"q\", \"mode\": \"queue\"}");
                cmd_add(&c[i], "provider:request_started", "{\"requestId\": \"r1\"}");
            }
            cmd_add(&c[i], "text:delta", "{\"requestId\": \"r1\", \"text\": \"s%d-%d \"}", i, round);
            /* One session a little ahead: the boundaries fall in different commits too. */
            if (i == 2 && round % 5 == 0) cmd_add(&c[i], "thinking:delta", "{\"requestId\": \"r1\", \"text\": \"t\"}");
            for (size_t k = 0; k < c[i].n; k++) {
                ev[i][k].type = c[i].type[k];
                ev[i][k].payload = c[i].payload[k];
                ev[i][k].actor = "runner";
            }
            b[i] = (sstore_batch){ids[i], ev[i], c[i].n, &v[i], &vs[i], {0, 0}};
        }
        batch_arg a = {b, N};
        int rc = log_transact(conn, op_batch, &a);
        for (int i = 0; i < N; i++) cmd_free(&c[i]);
        if (!CHECK_EQ_INT(rc, 0)) break;
    }
    for (int i = 0; i < N; i++) {
        int64_t count, off, newest;
        CHECK_EQ_INT(snapshots_of(ids[i], &count, &off, &newest), 0);
        CHECK(count >= 1);
        CHECK_EQ_INT(off, 0);
        CHECK_EQ_INT(newest, newest_due(ids[i], vs[i]));
        check_all_views(ids[i], "a batch's session");
        offset_t pos, none = {0, 0};
        json_t *want = view_at(ids[i], 0, none, &pos, NULL);
        json_t *got = session_view_to_json(&v[i]);
        CHECK(same_json(got, want, "the view kept", (size_t)pos.seq));
        CHECK_EQ_UINT(vs[i], pos.seq);
        json_decref(got);
        json_decref(want);
        session_view_free(&v[i]);
    }
}

int main(void)
{
    if (test_db_open("test-sstore", dir, sizeof dir, &lg, &conn) == 0) {
        test_create();
        test_command();
        test_views_and_snapshots();
        test_fork();
        test_fork_recording();
        test_list();
        test_delete();
        test_list_hidden();
        test_labels();
        test_retry_point();
        test_append_cached();
    }
    test_db_close(dir, lg, conn);
    /* The runner's commits on PostgreSQL too (DSTREAM_TEST_PG). */
    for (int e = 1; test_db_engine(e); e++) {
        if (test_db_open("test-sstore-cached", dir, sizeof dir, &lg, &conn) == 0) {
            test_append_cached();
            test_append_batch();
            test_command_race();    /* (SQLite's group holds the writers' lock: no such window) */
        }
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

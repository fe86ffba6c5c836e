/* Unit tests for lib/lineage on each engine: the tree of forks from any of its
 * sessions (oldest first, positions), hidden sessions (no id, left out when nothing
 * readable is below), deleted ones (shown only above a live fork), the limit (the
 * walk up first, cut nodes marked); the diff: the shared history of a fork and its
 * parent and of two cousins, events that agree with ids and times apart
 * (requestId), the first events of each side, the state's paths, the scan's bound,
 * positions, and the errors with their side. On SQLite, and on PostgreSQL too when DSTREAM_TEST_PG is set. */
#include "lineage.h"

#include <stdlib.h>
#include <string.h>

#include "session.h"
#include "sstore.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

static int create(const char *id)
{
    sstore_create_req r;
    session_trace t;
    memset(&r, 0, sizeof r);
    session_trace_new(&t);
    r.id = id;
    r.trace = &t;
    r.agent = "writer";
    r.created = json_pack("{s:s, s:{}}", "agent", "writer", "input");
    int rc = sstore_create(conn, &r);
    json_decref(r.created);
    return rc;
}

/* Fork parent into id at its tail; the fork point in *at (may be NULL). */
static int fork_of(const char *id, const char *parent, offset_t *at)
{
    sstore_create_req r;
    session_trace t;
    sstore_row row;
    memset(&r, 0, sizeof r);
    session_trace_new(&t);
    r.id = id;
    r.trace = &t;
    r.parent = parent;
    int rc = sstore_create(conn, &r);
    if (!rc && at && !(rc = sstore_get(conn, id, &row))) {
        offset_kind k;
        offset_parse(row.fork_offset, strlen(row.fork_offset), &k, at);
    }
    return rc;
}

typedef struct one {
    const char *type;
    json_t *payload;
} one;

static int decide_one(void *ud, const session_view *v, sstore_event *ev, size_t *n)
{
    one *o = ud;
    (void)v;
    ev[0].type = o->type;
    ev[0].payload = o->payload;
    ev[0].actor = "user";
    *n = 1;
    return 0;
}

/* Append one event (its payload JSON text) to session id. */
static int add(const char *id, const char *type, const char *payload)
{
    session_trace t;
    offset_t first;
    session_trace_new(&t);
    one o = {type, json_loads(payload, 0, NULL)};
    int rc = sstore_command(conn, id, &t, decide_one, &o, &first);
    json_decref(o.payload);
    return rc;
}

static int say(const char *id, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "{\"content\": \"%s\", \"mode\": \"interrupt\"}", text);
    return add(id, EV_MESSAGE_USER, p);
}

static const char *hidden_prefix;

static int readable(void *ud, const char *id)
{
    (void)ud;
    return strncmp(id, hidden_prefix, strlen(hidden_prefix)) != 0;
}

static void put(char *out, size_t cap, const char *s)
{
    size_t len = strlen(out);
    snprintf(out + len, cap - len, "%s", s);
}

/* The tree as text: "id[at](kids...)", a hidden node "?", a deleted one "id!",
 * a cut one "id~", appended to out. */
static void shape(const json_t *n, char *out, size_t cap)
{
    size_t len = strlen(out);
    const char *id = json_string_value(json_object_get(n, "id"));
    json_t *at = json_object_get(n, "forkedAtEvent");
    snprintf(out + len, cap - len, "%s", id ? id : "?");
    len = strlen(out);
    if (at) snprintf(out + len, cap - len, "@%lld", (long long)json_integer_value(at));
    if (json_is_true(json_object_get(n, "deleted"))) put(out, cap, "!");
    if (json_is_true(json_object_get(n, "truncated"))) put(out, cap, "~");
    json_t *kids = json_object_get(n, "children"), *k;
    size_t i;
    if (!json_array_size(kids)) return;
    put(out, cap, "(");
    json_array_foreach(kids, i, k) {
        if (i) put(out, cap, " ");
        shape(k, out, cap);
    }
    put(out, cap, ")");
}

static char shown[1024];
static int shown_count, shown_truncated;

static int tree(const char *id, int limit, int hide)
{
    json_t *j = NULL;
    shown[0] = '\0';
    int rc = lineage_tree(conn, id, limit, hide ? readable : NULL, NULL, &j);
    if (!rc) {
        shape(json_object_get(j, "root"), shown, sizeof shown);
        shown_count = (int)json_integer_value(json_object_get(j, "sessions"));
        shown_truncated = json_is_true(json_object_get(j, "truncated"));
    }
    json_decref(j);
    return rc;
}

static void test_tree(void)
{
    CHECK_EQ_INT(create("r"), 0);
    CHECK_EQ_INT(say("r", "one"), 0);                  /* r: created, one */
    CHECK_EQ_INT(fork_of("a", "r", NULL), 0);          /* a at 2 */
    CHECK_EQ_INT(say("r", "two"), 0);
    CHECK_EQ_INT(fork_of("b", "r", NULL), 0);          /* b at 3 */
    CHECK_EQ_INT(say("a", "three"), 0);
    CHECK_EQ_INT(fork_of("aa", "a", NULL), 0);         /* aa at 4: created, one, forked, three */
    const char *whole = "r(a@2(aa@4) b@3)";
    const char *ids[] = {"r", "a", "b", "aa"};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(tree(ids[i], 200, 0), 0);
        CHECK_EQ_STR(shown, whole);
        CHECK_EQ_INT(shown_count, 4);
        CHECK_EQ_INT(shown_truncated, 0);
    }
    CHECK_EQ_INT(tree("nosuch", 200, 0), LOG_ENOTFOUND);

    /* The limit: the walk up comes first, then breadth first. */
    CHECK_EQ_INT(tree("aa", 2, 0), 0);
    CHECK_EQ_STR(shown, "a@2~(aa@4~)");
    CHECK_EQ_INT(shown_truncated, 1);
    CHECK_EQ_INT(tree("r", 3, 0), 0);
    CHECK_EQ_STR(shown, "r(a@2~ b@3~)");
    CHECK_EQ_INT(tree("r", 1, 0), 0);
    CHECK_EQ_STR(shown, "r~");

    /* Hidden: h-b (readable fork h-bx below it) and h-c (nothing readable below). */
    CHECK_EQ_INT(fork_of("h-b", "r", NULL), 0);
    CHECK_EQ_INT(fork_of("h-c", "r", NULL), 0);
    CHECK_EQ_INT(fork_of("h-c2", "h-c", NULL), 0);
    CHECK_EQ_INT(fork_of("bx", "h-b", NULL), 0);
    hidden_prefix = "h-";
    CHECK_EQ_INT(tree("bx", 200, 1), 0);
    CHECK_EQ_STR(shown, "r(a@2(aa@4) b@3 ?(bx@4))");
    CHECK_EQ_INT(shown_count, 5);
    hidden_prefix = "r";    /* the root hidden too */
    CHECK_EQ_INT(tree("a", 200, 1), 0);
    CHECK_EQ_STR(shown, "?(a@2(aa@4) b@3 h-b@3(bx@4) h-c@3(h-c2@4))");

    /* Deleted: shown above a live fork, left out otherwise. */
    CHECK_EQ_INT(sstore_delete(conn, "h-c2"), 0);
    CHECK_EQ_INT(sstore_delete(conn, "h-b"), 0);
    CHECK_EQ_INT(tree("r", 200, 0), 0);
    CHECK_EQ_STR(shown, "r(a@2(aa@4) b@3 h-b@3!(bx@4) h-c@3)");
    CHECK_EQ_INT(tree("h-b", 200, 0), LOG_ENOTFOUND);
}

static void side_events(const json_t *d, const char *side, char *out, size_t cap)
{
    json_t *ev;
    size_t i;
    out[0] = '\0';
    json_array_foreach(json_object_get(json_object_get(d, side), "first"), i, ev) {
        size_t len = strlen(out);
        json_t *p = json_object_get(ev, "payload");
        const char *c = json_string_value(json_object_get(p, PK_CONTENT));
        snprintf(out + len, cap - len, "%s%s", i ? " " : "",
                 c ? c : json_string_value(json_object_get(ev, "type")));
    }
}

static const char *off(const json_t *d, const char *side, const char *key)
{
    return json_string_value(side ? json_object_get(json_object_get(d, side), key) : json_object_get(d, key));
}

static json_t *diff(const char *a, const char *b, int context, size_t scan, int *rc)
{
    lineage_diff_req q;
    json_t *j = NULL;
    memset(&q, 0, sizeof q);
    q.a = a, q.b = b, q.context = context, q.scan = scan;
    *rc = lineage_diff(conn, &q, &j);
    return j;
}

static void test_diff(void)
{
    char s[512], fp[OFFSET_LEN + 1];
    offset_t at;
    int rc;
    CHECK_EQ_INT(create("d"), 0);
    CHECK_EQ_INT(say("d", "one"), 0);
    CHECK_EQ_INT(fork_of("e", "d", &at), 0);
    CHECK_EQ_INT(fork_of("f", "d", NULL), 0);
    offset_format(at, fp);
    CHECK_EQ_INT(say("d", "two"), 0);
    CHECK_EQ_INT(say("e", "three"), 0);
    CHECK_EQ_INT(say("e", "four"), 0);

    /* A fork and its parent: they share the history before the fork point and part
     * at once (the fork's session:forked is not compared). */
    json_t *d = diff("e", "d", 5, 100, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_STR(off(d, NULL, "shared"), fp);
    CHECK_EQ_STR(off(d, "b", "until"), fp);
    CHECK_EQ_INT(json_integer_value(json_object_get(d, "compared")), 0);
    side_events(d, "a", s, sizeof s);
    CHECK_EQ_STR(s, "three four");
    side_events(d, "b", s, sizeof s);
    CHECK_EQ_STR(s, "two");
    json_t *ch = json_object_get(json_object_get(d, "state"), "changes"), *c;
    size_t i;
    int seen = 0;
    json_array_foreach(ch, i, c) {
        if (!strcmp(json_string_value(json_object_get(c, "path")), "messages[1].content")) {
            CHECK_EQ_STR(json_string_value(json_object_get(c, "before")), "three");
            CHECK_EQ_STR(json_string_value(json_object_get(c, "after")), "two");
            seen++;
        }
        if (!strcmp(json_string_value(json_object_get(c, "path")), "messages[2]")) {
            CHECK(json_object_get(c, "after") == NULL);
            CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(c, "before"), "content")), "four");
            seen++;
        }
    }
    CHECK_EQ_INT(seen, 2);
    /* Not the messages' offsets (shifted by the fork's marker), nor ids. */
    json_array_foreach(ch, i, c) {
        const char *p = json_string_value(json_object_get(c, "path"));
        CHECK(!strstr(p, ".offset") && !strstr(p, ".requestId"));
    }
    json_decref(d);

    /* Cousins, after an event each that agrees but for its requestId, then differ. */
    CHECK_EQ_INT(fork_of("g", "e", NULL), 0);
    CHECK_EQ_INT(add("f", EV_PROVIDER_REQUEST_STARTED, "{\"requestId\": \"r1\", \"model\": \"m\"}"), 0);
    CHECK_EQ_INT(add("g", EV_PROVIDER_REQUEST_STARTED, "{\"requestId\": \"r2\", \"model\": \"m\"}"), 0);
    CHECK_EQ_INT(say("f", "f-own"), 0);
    CHECK_EQ_INT(say("g", "g-own"), 0);
    d = diff("f", "g", 1, 100, &rc);
    CHECK_EQ_INT(rc, 0);
    /* f read d up to the fork point, g (through e) too: that far is shared. */
    CHECK_EQ_STR(off(d, NULL, "shared"), fp);
    side_events(d, "a", s, sizeof s);
    CHECK_EQ_STR(s, "provider:request_started");     /* f's own, against e's "three" */
    json_decref(d);
    /* g against its own parent e: e's events are g's up to its end: then g's request
     * (that e has not) follows. */
    d = diff("g", "e", 3, 100, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(json_is_true(json_object_get(d, "same")) == 0);
    side_events(d, "a", s, sizeof s);
    CHECK_EQ_STR(s, "provider:request_started g-own");
    side_events(d, "b", s, sizeof s);
    CHECK_EQ_STR(s, "");
    json_decref(d);
    /* Two forks made the same way agree, ids apart, on their first event. */
    CHECK_EQ_INT(fork_of("h1", "d", NULL), 0);
    CHECK_EQ_INT(fork_of("h2", "d", NULL), 0);
    CHECK_EQ_INT(add("h1", EV_PROVIDER_REQUEST_STARTED, "{\"requestId\": \"r1\", \"model\": \"m\"}"), 0);
    CHECK_EQ_INT(add("h2", EV_PROVIDER_REQUEST_STARTED, "{\"requestId\": \"r2\", \"model\": \"m\"}"), 0);
    CHECK_EQ_INT(say("h1", "x"), 0);
    CHECK_EQ_INT(say("h2", "y"), 0);
    d = diff("h1", "h2", 1, 100, &rc);
    CHECK_EQ_INT(json_integer_value(json_object_get(d, "compared")), 1);
    side_events(d, "a", s, sizeof s);
    CHECK_EQ_STR(s, "x");
    CHECK(json_is_false(json_object_get(d, "truncated")));
    json_decref(d);
    /* The scan's bound: stopped at the first that agrees, said so. */
    d = diff("h1", "h2", 1, 0, &rc);
    CHECK(json_is_true(json_object_get(d, "truncated")));
    CHECK(json_is_false(json_object_get(d, "same")));
    CHECK_EQ_INT(json_integer_value(json_object_get(d, "compared")), 0);
    json_decref(d);

    /* Positions: d at the fork point against itself at its end. */
    lineage_diff_req q;
    memset(&q, 0, sizeof q);
    q.a = q.b = "d", q.has_at_a = 1, q.at_a = at, q.context = 2, q.scan = 100;
    d = NULL;
    CHECK_EQ_INT(lineage_diff(conn, &q, &d), 0);
    CHECK_EQ_STR(off(d, NULL, "shared"), fp);
    CHECK_EQ_STR(off(d, "a", "at"), fp);
    side_events(d, "b", s, sizeof s);
    CHECK_EQ_STR(s, "two");
    json_decref(d);
    q.has_at_b = 1, q.at_b = at;
    CHECK_EQ_INT(lineage_diff(conn, &q, &d), 0);
    CHECK(json_is_true(json_object_get(d, "same")));
    CHECK_EQ_INT(json_array_size(json_object_get(json_object_get(d, "state"), "changes")), 0);
    json_decref(d);

    /* Errors name their side. */
    q.at_b.seq = 1000;
    CHECK_EQ_INT(lineage_diff(conn, &q, &d), LOG_ERANGE);
    CHECK_EQ_INT(q.side, 'b');
    q.at_b = at;
    q.at_b.pos++;
    CHECK_EQ_INT(lineage_diff(conn, &q, &d), LOG_EOFFSET);
    CHECK_EQ_INT(q.side, 'b');
    q.at_a.seq = 1000;
    CHECK_EQ_INT(lineage_diff(conn, &q, &d), LOG_ERANGE);
    CHECK_EQ_INT(q.side, 'a');
    q.has_at_a = q.has_at_b = 0;
    q.b = "nosuch";
    CHECK_EQ_INT(lineage_diff(conn, &q, &d), LOG_ENOTFOUND);
    CHECK_EQ_INT(q.side, 'b');
    q.a = "nosuch", q.b = "d";
    CHECK_EQ_INT(lineage_diff(conn, &q, &d), LOG_ENOTFOUND);
    CHECK_EQ_INT(q.side, 'a');
    CHECK(d == NULL);
}

int main(void)
{
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("lineage", dir, sizeof dir, &lg, &conn) == 0) {
            test_tree();
            test_diff();
        }
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

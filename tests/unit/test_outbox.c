/* Unit tests for runner/outbox.c's group commit on a database in a temporary
 * directory, on each engine: the leases of a commit of many sessions are checked
 * (and renewed, for those due) in one statement, not one per session; and a
 * session that fails in the middle of a group (its session deleted, its lease
 * taken over by another runner, a write queued with its events refused) fails
 * alone, the others' events committed with their kept views right, the commit
 * made again the careful way (each session in a savepoint of its own) when a
 * session's writes failed. */
#include "../../runner/outbox.c"

#include <stdio.h>
#include <string.h>

#include "lease.h"
#include "test.h"
#include "test_db.h"

#define NSESS 20
#define TTL_MS 60000

static char dir[256];
static log_t *lg;
static log_conn_t *conn;
static runner_t R;
static sess_t *S[NSESS];
static const lease_id ID_A = {"A", "a0000001"};

/* Session number i: created, its lease taken by runner A, on R's list. */
static sess_t *sess_new(int i)
{
    sess_t *s = calloc(1, sizeof *s);
    if (!s) abort();
    snprintf(s->id, sizeof s->id, "ob-%02d", i);
    session_view_init(&s->view);
    sstore_create_req r;
    session_trace t;
    memset(&r, 0, sizeof r);
    session_trace_new(&t);
    r.id = s->id;
    r.trace = &t;
    r.agent = "writer";
    r.created = json_pack("{s:s, s:{}}", "agent", "writer", "input");
    int rc = sstore_create(conn, &r);
    json_decref(r.created);
    CHECK_EQ_INT(rc, 0);
    int64_t now = timefmt_now_ms(), expires = 0;
    CHECK_EQ_INT(lease_acquire(conn, s->id, &ID_A, TTL_MS, &expires), 1);
    lease_taken(&s->lease, now, TTL_MS, expires);
    s->next = R.sessions;
    if (R.sessions) R.sessions->prev = s;
    R.sessions = s;
    return s;
}

static void sess_free(sess_t *s)
{
    outbox_clear(s);
    free(s->out);
    session_view_free(&s->view);
    free(s);
}

static void delta(sess_t *s, const char *text)
{
    outbox_emit(&R, s, EV_TEXT_DELTA, json_pack("{s:s, s:s}", "requestId", "r1", "text", text));
}

/* The events in s's log (its tail's seq). */
static uint64_t tail_of(const sess_t *s)
{
    session_view v;
    offset_t pos = {0, 0}, none = {0, 0};
    session_view_init(&v);
    int rc = sstore_view(conn, s->id, 0, none, &v, &pos);
    session_view_free(&v);
    return rc ? 0 : pos.seq;
}

/* s's kept view is its log's at the tail. */
static int view_right(const sess_t *s)
{
    session_view v;
    offset_t pos = {0, 0}, none = {0, 0};
    session_view_init(&v);
    if (sstore_view(conn, s->id, 0, none, &v, &pos)) return 0;
    json_t *want = session_view_to_json(&v), *got = session_view_to_json(&s->view);
    int same = s->view_seq == pos.seq && json_equal(want, got);
    if (!same) fprintf(stderr, "  %s: view_seq %llu, tail %llu\n", s->id, (unsigned long long)s->view_seq,
                       (unsigned long long)pos.seq);
    json_decref(want);
    json_decref(got);
    session_view_free(&v);
    return same;
}

/* One outbox_commit: its rc; the outcome of each session in what[] (0: done). */
static int commit(int *what)
{
    outbox_outcome *oc = NULL;
    size_t n = 0;
    int rc = outbox_commit(&R, &oc, &n);
    for (int i = 0; i < NSESS; i++) what[i] = 0;
    for (size_t k = 0; k < n; k++)
        for (int i = 0; i < NSESS; i++)
            if (oc[k].s == S[i]) what[i] = oc[k].what;
    free(oc);
    return rc;
}

/* A commit of 20 sessions makes one lease statement (PostgreSQL), or one plus one
 * for the renewals when any is due (SQLite), not one per session. */
static void test_one_statement(void)
{
    int what[NSESS];
    for (int i = 0; i < NSESS; i++) delta(S[i], "a");
    uint64_t before = lease_tx_statements();
    CHECK_EQ_INT(commit(what), 0);
    CHECK_EQ_UINT(lease_tx_statements() - before, 1);
    for (int i = 0; i < NSESS; i++) {
        CHECK_EQ_INT(what[i], 0);
        CHECK_EQ_UINT(S[i]->nout, 0);
        CHECK(view_right(S[i]));
    }
    /* Five of them due for renewal: renewed in the same statement (SQLite: one more). */
    for (int i = 0; i < 5; i++) S[i]->lease.renew_ms = 0;
    for (int i = 0; i < NSESS; i++) delta(S[i], "b");
    uint64_t renewed = R.renewed_commit;
    before = lease_tx_statements();
    CHECK_EQ_INT(commit(what), 0);
    CHECK_EQ_UINT(lease_tx_statements() - before, test_db_is_pg() ? 1 : 2);
    CHECK_EQ_UINT(R.renewed_commit - renewed, 5);
    for (int i = 0; i < NSESS; i++) {
        CHECK_EQ_INT(what[i], 0);
        CHECK(view_right(S[i]));
    }
    CHECK(S[0]->lease.renew_ms > timefmt_now_ms());
    CHECK_EQ_UINT(R.commit_retries, 0);
}

/* A session with more events than one record holds (SSTORE_EVENTS_MAX) in a commit
 * with others: its events after the batch's, in records of their own; every view right. */
static void test_many_events(void)
{
    int what[NSESS];
    uint64_t t0 = tail_of(S[0]), t1 = tail_of(S[1]);
    for (int k = 0; k < SSTORE_EVENTS_MAX + 4; k++) delta(S[0], "e");
    delta(S[1], "f");
    CHECK_EQ_INT(commit(what), 0);
    CHECK_EQ_INT(what[0], 0);
    CHECK_EQ_INT(what[1], 0);
    CHECK_EQ_UINT(tail_of(S[0]), t0 + SSTORE_EVENTS_MAX + 4);
    CHECK_EQ_UINT(tail_of(S[1]), t1 + 1);
    CHECK(view_right(S[0]));
    CHECK(view_right(S[1]));
}

static int refuse_tx(log_conn_t *c, const char *sid, void *ud)
{
    (void)c;
    (void)sid;
    (void)ud;
    return LOG_EIO;
}

/* In the middle of a group: session 5 deleted, session 9's lease taken over by
 * runner B, session 13's recording write refused, session 17's stream closed
 * behind the runner's back. Each fails alone (the batch of the group's events
 * gives up, the commit is made again the careful way); the other 16 commit, their
 * views right, and the next commit appends after them. */
static void test_fail_alone(void)
{
    int what[NSESS];
    char sql[256];
    CHECK_EQ_INT(sstore_delete(conn, S[5]->id), 0);
    snprintf(sql, sizeof sql, "UPDATE leases SET owner = 'B', instance = 'b0000001' WHERE session = '%s'",
             S[9]->id);
    CHECK_EQ_INT(test_db_sql(sql, NULL, 0), 0);
    log_append_req close;
    memset(&close, 0, sizeof close);
    close.path = "sessions/ob-17";
    close.close = 1;
    CHECK_EQ_INT(log_append(conn, &close), 0);
    uint64_t tail[NSESS];
    for (int i = 0; i < NSESS; i++) {
        tail[i] = i == 5 ? 0 : tail_of(S[i]);
        delta(S[i], "c");
    }
    outbox_defer(S[13], refuse_tx, NULL, NULL);
    uint64_t retries = R.commit_retries, dropped = R.dropped;
    CHECK_EQ_INT(commit(what), 0);
    CHECK_EQ_UINT(R.commit_retries - retries, 1);
    CHECK_EQ_INT(what[5], OUTBOX_GONE);
    CHECK_EQ_INT(what[9], OUTBOX_LOST);
    CHECK_EQ_INT(what[13], OUTBOX_FAILED);
    CHECK_EQ_INT(what[17], OUTBOX_FAILED);
    CHECK_EQ_UINT(R.dropped - dropped, 1);
    for (int i = 0; i < NSESS; i++) {
        CHECK_EQ_UINT(S[i]->nout, 0);
        if (i == 5) continue;
        if (i == 9 || i == 13 || i == 17) {
            CHECK_EQ_UINT(tail_of(S[i]), tail[i]);      /* nothing of theirs written */
            CHECK_EQ_UINT(S[i]->view_seq, 0);
            continue;
        }
        CHECK_EQ_INT(what[i], 0);
        CHECK_EQ_UINT(tail_of(S[i]), tail[i] + 1);
        CHECK(view_right(S[i]));
    }
    /* The next commit of the others: the fast way again, after what they had. */
    for (int i = 0; i < NSESS; i++)
        if (i != 5 && i != 9 && i != 13 && i != 17) delta(S[i], "d");
    CHECK_EQ_INT(commit(what), 0);
    CHECK_EQ_UINT(R.commit_retries - retries, 1);
    for (int i = 0; i < NSESS; i++) {
        if (i == 5 || i == 9 || i == 13 || i == 17) continue;
        CHECK_EQ_INT(what[i], 0);
        CHECK_EQ_UINT(tail_of(S[i]), tail[i] + 2);
        CHECK(view_right(S[i]));
    }
}

/* The gap before a commit of deltas alone grows with the last commit's sessions. */
static void test_gap(void)
{
    outbox_pace p = {8, 5, 100};
    CHECK_EQ_INT(outbox_gap(&p, 0, 0), 0);
    CHECK_EQ_INT(outbox_gap(&p, 7, 0), 0);          /* a light load: at once */
    CHECK_EQ_INT(outbox_gap(&p, 8, 0), 1);          /* 0.8 ms, rounded up */
    CHECK_EQ_INT(outbox_gap(&p, 20, 0), 2);
    CHECK_EQ_INT(outbox_gap(&p, 21, 0), 3);
    CHECK_EQ_INT(outbox_gap(&p, 50, 0), 5);
    CHECK_EQ_INT(outbox_gap(&p, 200, 0), 5);        /* at most max_ms */
    CHECK_EQ_INT(outbox_gap(&p, INT64_MAX, 0), 5);
    CHECK_EQ_INT(outbox_gap(&p, 0, 1), 5);          /* after a failed commit */
    p.small = 0;                                    /* the rule off: the longest gap */
    CHECK_EQ_INT(outbox_gap(&p, 1, 0), 5);
    p = (outbox_pace){8, 1000, 0};                  /* no gap by the sessions: none under the rule */
    CHECK_EQ_INT(outbox_gap(&p, 300, 0), 0);
}

int main(void)
{
    test_gap();
    for (int e = 0; test_db_engine(e); e++) {
        memset(&R, 0, sizeof R);
        if (!CHECK_EQ_INT(test_db_open("test-outbox", dir, sizeof dir, &lg, &conn), 0)) continue;
        R.conn = conn;
        R.me = ID_A;
        R.lease_ms = TTL_MS;
        for (int i = 0; i < NSESS; i++) S[i] = sess_new(i);
        test_one_statement();
        test_many_events();
        test_fail_alone();
        for (int i = 0; i < NSESS; i++) sess_free(S[i]);
        R.sessions = NULL;
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

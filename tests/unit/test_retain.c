/* Unit tests for lib/retain: the policy file's parsing (every mistake named),
 * the policy of the longest prefix; and on each engine (lib/store.h's
 * store_retain_ops under it): the scan newest first under a prefix with the
 * session of a stream, deletion by age (activity or creation) and by count, a
 * dry run that deletes nothing and gives every kept item's reason (within age,
 * within count, a live fork, waiting for input, running), a session deleted
 * with its stream (its row marked, its stream gone), the thinning of a finished
 * session's snapshots (newest, oldest and every RETAIN_SNAPSHOT_EVERY kept; an
 * unfinished session's untouched), the totals kept for /metrics, and a batch
 * that finds an item running or forked since the scan leaves it. On SQLite,
 * and on PostgreSQL too when DSTREAM_TEST_PG is set. */
#include "../../lib/retain.c"    /* op_batch: the check again inside the transaction */

#include <stdlib.h>
#include <string.h>

#include "session.h"
#include "sstore.h"
#include "store.h"
#include "timefmt.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

static int parse(const char *text, retain_cfg *cfg, char *err, size_t cap)
{
    json_t *j = json_loads(text, 0, NULL);
    if (!CHECK(j != NULL)) return -2;
    int rc = retain_parse(j, cfg, err, cap);
    json_decref(j);
    return rc;
}

static void test_parse(void)
{
    retain_cfg cfg;
    char err[256];
    CHECK_EQ_INT(parse("{\"policies\": [{\"prefix\": \"logs/\", \"maxAge\": \"12h\"},"
                       " {\"prefix\": \"sessions/ci-\", \"maxAge\": \"7d\", \"age\": \"created\", \"keep\": 100},"
                       " {\"prefix\": \"\", \"keep\": 0}]}", &cfg, err, sizeof err), 0);
    CHECK_EQ_INT(cfg.n, 3);
    CHECK_EQ_INT(cfg.v[0].max_age_ms, 12 * 3600000LL);
    CHECK_EQ_INT(cfg.v[0].keep, -1);
    CHECK_EQ_INT(cfg.v[0].by_created, 0);
    CHECK_EQ_INT(cfg.v[1].by_created, 1);
    CHECK_EQ_INT(cfg.v[1].keep, 100);
    CHECK_EQ_INT(cfg.v[2].keep, 0);
    CHECK_EQ_INT(retain_policy_for(&cfg, "logs/a"), 0);
    CHECK_EQ_INT(retain_policy_for(&cfg, "sessions/ci-1"), 1);
    CHECK_EQ_INT(retain_policy_for(&cfg, "sessions/x"), 2);
    retain_free(&cfg);
    static const struct { const char *doc, *says; } bad[] = {
        {"{\"policy\": []}", "unknown key \"policy\""},
        {"{\"policies\": {}}", "must be an array"},
        {"{\"policies\": [1]}", "policies[0]: must be an object"},
        {"{\"policies\": [{\"maxAge\": \"1d\"}]}", "policies[0]: \"prefix\" must be a string"},
        {"{\"policies\": [{\"prefix\": \"a\"}]}", "policies[0]: needs \"maxAge\" or \"keep\""},
        {"{\"policies\": [{\"prefix\": \"a\", \"maxAge\": \"1w\"}]}", "\"maxAge\" must be an age"},
        {"{\"policies\": [{\"prefix\": \"a\", \"maxAge\": \"0s\"}]}", "\"maxAge\" must be an age"},
        {"{\"policies\": [{\"prefix\": \"a\", \"maxAge\": 60}]}", "\"maxAge\" must be an age"},
        {"{\"policies\": [{\"prefix\": \"a\", \"keep\": -1}]}", "\"keep\" must be a whole number"},
        {"{\"policies\": [{\"prefix\": \"a\", \"keep\": 1.5}]}", "\"keep\" must be a whole number"},
        {"{\"policies\": [{\"prefix\": \"a\", \"keep\": 1, \"age\": \"touched\"}]}", "\"age\" must be"},
        {"{\"policies\": [{\"prefix\": \"a\", \"keep\": 1, \"max\": 1}]}", "unknown key \"max\""},
        {"{\"policies\": [{\"prefix\": \"a\", \"keep\": 1}, {\"prefix\": \"a\", \"keep\": 2}]}",
         "policies[1]: the same prefix"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK_EQ_INT(parse(bad[i].doc, &cfg, err, sizeof err), -1);
        if (!CHECK(strstr(err, bad[i].says) != NULL)) fprintf(stderr, "  %s: %s\n", bad[i].doc, err);
        CHECK_EQ_INT(cfg.n, 0);
    }
    CHECK_EQ_INT(retain_age_ms("90s"), 90000);
    CHECK_EQ_INT(retain_age_ms("-1s"), -1);
    CHECK_EQ_INT(retain_age_ms("1"), -1);
}

/* ---- on the engines ----------------------------------------------------------- */

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

static int fork_of(const char *id, const char *parent)
{
    sstore_create_req r;
    session_trace t;
    memset(&r, 0, sizeof r);
    session_trace_new(&t);
    r.id = id;
    r.trace = &t;
    r.parent = parent;
    return sstore_create(conn, &r);
}

/* Stream path created `ago_ms` ago, last active `idle_ms` ago. */
static void age(const char *path, int64_t ago_ms, int64_t idle_ms)
{
    char sql[512], out[64];
    int64_t now = timefmt_now_ms();
    snprintf(sql, sizeof sql, "UPDATE streams SET created_ms = %lld, access_ms = %lld WHERE path = '%s'",
             (long long)(now - ago_ms), (long long)(now - idle_ms), path);
    CHECK_EQ_INT(test_db_sql(sql, out, sizeof out), 0);
}

static void set_status(const char *id, const char *status)
{
    char sql[256], out[64];
    snprintf(sql, sizeof sql, "UPDATE sessions SET status = '%s' WHERE id = '%s'", status, id);
    CHECK_EQ_INT(test_db_sql(sql, out, sizeof out), 0);
}

typedef struct seen {
    char s[4096];
} seen;

static int scan_fn(void *ud, const retain_item *it)
{
    seen *x = ud;
    size_t n = strlen(x->s);
    snprintf(x->s + n, sizeof x->s - n, "%s%s%s%s%s", n ? " " : "", it->path, it->session ? "=" : "",
             it->session ? it->session : "", it->session ? (it->status ? ":" : ":?") : "");
    if (it->session && it->status) {
        n = strlen(x->s);
        snprintf(x->s + n, sizeof x->s - n, "%s", it->status);
    }
    return 0;
}

static void report(void *ud, const retain_verdict *v)
{
    seen *x = ud;
    size_t n = strlen(x->s);
    snprintf(x->s + n, sizeof x->s - n, "%s%s %s %s", n ? ", " : "", v->path, v->del ? "delete" : "keep", v->reason);
}

static int run(const char *policy, int dry, seen *out, retain_stats *st)
{
    retain_cfg cfg;
    char err[256];
    if (parse(policy, &cfg, err, sizeof err)) {
        CHECK(0);
        fprintf(stderr, "  %s\n", err);
        return -1;
    }
    retain_state rs;
    memset(&rs, 0, sizeof rs);
    memset(st, 0, sizeof *st);
    if (out) out->s[0] = '\0';
    retain_opts o = {0};
    o.dry_run = dry;
    o.report = out ? report : NULL;
    o.ud = out;
    int rc = retain_run(conn, &cfg, &rs, &o, st);
    retain_state_free(&rs);
    retain_free(&cfg);
    return rc;
}

static int exists(const char *path)
{
    log_info info;
    return log_head(conn, path, &info) == 0;
}

static void total(void *ud, const char *what, int64_t n)
{
    seen *x = ud;
    size_t len = strlen(x->s);
    snprintf(x->s + len, sizeof x->s - len, "%s%s=%lld", len ? " " : "", what, (long long)n);
}

static void test_streams(void)
{
    const int64_t H = 3600000;
    /* logs/a..e created 5..1 hours ago; e written to a minute ago */
    const char *logs[] = {"logs/a", "logs/b", "logs/c", "logs/d", "logs/e"};
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_INT(test_db_create(conn, logs[i]), 0);
        age(logs[i], (5 - i) * H, (5 - i) * H);
    }
    age("logs/a", 5 * H, 60000);
    CHECK_EQ_INT(test_db_create(conn, "other/x"), 0);
    age("other/x", 10 * H, 10 * H);
    CHECK_EQ_INT(test_db_create(conn, "logs/keep/z"), 0);
    age("logs/keep/z", 9 * H, 9 * H);

    seen s = {""};
    CHECK_EQ_INT(store_of(conn)->retain->scan(conn, "logs/", INT64_MAX, NULL, 100, scan_fn, &s), 0);
    CHECK_EQ_STR(s.s, "logs/e logs/d logs/c logs/b logs/a logs/keep/z");
    s.s[0] = '\0';
    CHECK_EQ_INT(store_of(conn)->retain->scan(conn, "logs/", (int64_t)timefmt_now_ms() - 3 * H + 1000, "zzz", 2,
                                              scan_fn, &s), 0);
    CHECK_EQ_STR(s.s, "logs/c logs/b");

    /* By activity: logs/a was written to a minute ago; logs/keep/ has its own. */
    const char *pol = "{\"policies\": [{\"prefix\": \"logs/\", \"maxAge\": \"150m\"},"
                      " {\"prefix\": \"logs/keep/\", \"keep\": 1}]}";
    retain_stats st;
    CHECK_EQ_INT(run(pol, 1, &s, &st), 0);
    CHECK_EQ_STR(s.s, "logs/e keep within_age, logs/d keep within_age, logs/c delete age, logs/b delete age,"
                      " logs/a keep within_age, logs/keep/z keep within_count");
    CHECK_EQ_INT(st.streams, 2);
    CHECK_EQ_INT(st.kept, 4);
    CHECK(exists("logs/c") && exists("logs/b"));             /* a dry run deletes nothing */
    CHECK_EQ_INT(run(pol, 0, NULL, &st), 0);
    CHECK_EQ_INT(st.streams, 2);
    CHECK(!exists("logs/c") && !exists("logs/b") && exists("logs/a") && exists("other/x"));
    /* By creation, logs/a goes too; by count, only the newest stays. */
    CHECK_EQ_INT(run("{\"policies\": [{\"prefix\": \"logs/\", \"maxAge\": \"150m\", \"age\": \"created\"}]}", 0, &s,
                     &st), 0);
    CHECK(!exists("logs/a") && exists("logs/d") && !exists("logs/keep/z"));
    CHECK_EQ_INT(run("{\"policies\": [{\"prefix\": \"logs/\", \"keep\": 1}]}", 0, &s, &st), 0);
    CHECK_EQ_STR(s.s, "logs/e keep within_count, logs/d delete count");
    CHECK(exists("logs/e") && !exists("logs/d"));
    s.s[0] = '\0';
    CHECK_EQ_INT(retain_totals(conn, total, &s), 0);
    CHECK_EQ_STR(s.s, "passes=3 streams=5");
}

static void test_sessions(void)
{
    const int64_t D = 86400000;
    /* done: finished, old; par: finished, old, with a live fork (kid, new);
     * ask: waits for a human; run: running; pend: pending; new: finished, young */
    const char *ids[] = {"done", "par", "ask", "run", "pend", "new"};
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(create(ids[i]), 0);
    CHECK_EQ_INT(fork_of("kid", "par"), 0);
    age("sessions/new", 0, 0);
    age("sessions/kid", 1000, 1000);
    for (int i = 0; i < 5; i++) {
        char p[64];
        snprintf(p, sizeof p, "sessions/%s", ids[i]);
        age(p, (10 - i) * D, (10 - i) * D);
    }
    set_status("done", "completed");
    set_status("par", "failed");
    set_status("ask", "awaiting_input");
    set_status("run", "running");
    set_status("pend", "pending");
    set_status("new", "cancelled");
    set_status("kid", "completed");

    seen s = {""};
    CHECK_EQ_INT(store_of(conn)->retain->scan(conn, "sessions/", INT64_MAX, NULL, 100, scan_fn, &s), 0);
    CHECK_EQ_STR(s.s, "sessions/new=new:cancelled sessions/kid=kid:completed sessions/pend=pend:pending"
                      " sessions/run=run:running sessions/ask=ask:awaiting_input sessions/par=par:failed"
                      " sessions/done=done:completed");
    const char *pol = "{\"policies\": [{\"prefix\": \"sessions/\", \"maxAge\": \"1d\"}]}";
    retain_stats st;
    CHECK_EQ_INT(run(pol, 1, &s, &st), 0);
    CHECK_EQ_STR(s.s, "sessions/new keep within_age, sessions/kid keep within_age, sessions/pend keep running,"
                      " sessions/run keep running, sessions/ask keep waiting, sessions/par keep fork_needed,"
                      " sessions/done delete age");
    CHECK_EQ_INT(st.sessions, 1);
    CHECK_EQ_INT(run(pol, 0, NULL, &st), 0);
    CHECK_EQ_INT(st.sessions, 1);
    CHECK_EQ_INT(st.streams, 0);
    sstore_row row;
    int deleted = 0;
    CHECK_EQ_INT(sstore_get(conn, "done", &row), LOG_ENOTFOUND);
    /* Its row is forgotten too: no fork needs it. */
    CHECK_EQ_INT(store_of(conn)->sessions->kin_get(conn, "done", &row, &deleted), LOG_ENOTFOUND);
    CHECK(!exists("sessions/done"));
    CHECK(exists("sessions/par") && exists("sessions/ask") && exists("sessions/run") && exists("sessions/pend"));
    /* The fork gone, its parent goes at the next pass; the others stay. */
    CHECK_EQ_INT(sstore_delete(conn, "kid"), 0);
    CHECK_EQ_INT(run(pol, 0, &s, &st), 0);
    CHECK_EQ_INT(st.sessions, 1);
    CHECK(!exists("sessions/par") && exists("sessions/ask"));
    /* par's row is forgotten as well (only the deleted kid's row names it). */
    CHECK_EQ_INT(store_of(conn)->sessions->kin_get(conn, "par", &row, &deleted), LOG_ENOTFOUND);
    /* A chain: g1 <- g2 <- g3, g1 and g2 deleted by hand (kept, marked, while g3
     * reads them); g3 deleted by a pass: the three rows are forgotten. */
    CHECK_EQ_INT(create("g1"), 0);
    CHECK_EQ_INT(fork_of("g2", "g1"), 0);
    CHECK_EQ_INT(fork_of("g3", "g2"), 0);
    CHECK_EQ_INT(sstore_delete(conn, "g1"), 0);
    CHECK_EQ_INT(sstore_delete(conn, "g2"), 0);
    set_status("g3", "completed");
    age("sessions/g3", 2 * D, 2 * D);
    CHECK_EQ_INT(run(pol, 0, NULL, &st), 0);
    CHECK_EQ_INT(st.sessions, 1);
    CHECK_EQ_INT(store_of(conn)->sessions->kin_get(conn, "g3", &row, &deleted), LOG_ENOTFOUND);
    CHECK_EQ_INT(store_of(conn)->sessions->kin_get(conn, "g2", &row, &deleted), LOG_ENOTFOUND);
    CHECK_EQ_INT(store_of(conn)->sessions->kin_get(conn, "g1", &row, &deleted), LOG_ENOTFOUND);
    CHECK_EQ_INT(test_db_int("SELECT count(*) FROM streams WHERE path LIKE 'sessions/g%'"), 0);
    /* By count: the newest two (new, pend) are within it; ask and run stay anyway. */
    CHECK_EQ_INT(run("{\"policies\": [{\"prefix\": \"sessions/\", \"keep\": 1}]}", 1, &s, &st), 0);
    CHECK_EQ_STR(s.s, "sessions/new keep within_count, sessions/pend keep running, sessions/run keep running,"
                      " sessions/ask keep waiting");
}

static int op_snaps(log_conn_t *c, void *arg)
{
    const char *id = arg;
    for (uint64_t q = 3; q <= 3000; q += 64) {
        offset_t at = {q == 3 ? 3 : q - 3, q * 10};
        int rc = store_of(c)->sessions->snapshot_put(c, id, at, "{}");
        if (rc) return rc;
    }
    return 0;
}

/* Snapshots where a session's own phase puts them (sstore_snapshot_phase), after
 * one at 3 (as at a fork point). */
static int op_snaps_phased(log_conn_t *c, void *arg)
{
    const char *id = arg;
    uint64_t phase = sstore_snapshot_phase(id);
    offset_t first = {3, 30};
    int rc = store_of(c)->sessions->snapshot_put(c, id, first, "{}");
    for (uint64_t q = 4; q <= 3000 && !rc; q++) {
        offset_t at = {q, q * 10};
        if ((q + phase) % SSTORE_SNAPSHOT_EVERY == 0) rc = store_of(c)->sessions->snapshot_put(c, id, at, "{}");
    }
    return rc;
}

static void test_thin(void)
{
    CHECK_EQ_INT(create("thin1"), 0);
    CHECK_EQ_INT(create("thin2"), 0);
    /* thin1 (finished) and thin2 (running): the fork-point-like snapshot at 3, then
     * every 64, two at multiples of 1024, up to 2941 */
    CHECK_EQ_INT(log_transact(conn, op_snaps, "thin1"), 0);
    CHECK_EQ_INT(log_transact(conn, op_snaps, "thin2"), 0);
    set_status("thin1", "completed");
    set_status("thin2", "running");
    int64_t before2 = test_db_int("SELECT count(*) FROM snapshots WHERE session = 'thin2'");
    retain_stats st;
    CHECK_EQ_INT(run("{\"policies\": [{\"prefix\": \"nothing/\", \"keep\": 0}]}", 0, NULL, &st), 0);
    CHECK(st.snapshots > 0);
    CHECK_EQ_INT(st.snapshots, 43);
    CHECK_EQ_INT(test_db_int("SELECT count(*) FROM snapshots WHERE session = 'thin1'"), 4);
    CHECK_EQ_INT(test_db_int("SELECT count(*) FROM snapshots WHERE session = 'thin1' AND seq IN (3, 1024, 2048, 2944)"), 4);
    CHECK_EQ_INT(test_db_int("SELECT count(*) FROM snapshots WHERE session = 'thin2'"), before2);
    CHECK_EQ_INT(before2, 47);
    /* The state at any position is still the replay's. */
    session_view v;
    session_view_init(&v);
    offset_t pos;
    CHECK_EQ_INT(sstore_view(conn, "thin1", 0, pos, &v, &pos), 0);
    session_view_free(&v);
    CHECK_EQ_INT(run("{\"policies\": [{\"prefix\": \"nothing/\", \"keep\": 0}]}", 0, NULL, &st), 0);
    CHECK_EQ_INT(st.snapshots, 0);

    /* A session whose snapshots follow its phase keeps one every 1,024 events of
     * that phase: thin3's phase 19 puts them at 45, 109, ... 2989, and keeps 3,
     * 1005, 2029 and 2989. */
    CHECK_EQ_INT(create("thin3"), 0);
    CHECK_EQ_UINT(sstore_snapshot_phase("thin3"), 19);
    CHECK_EQ_INT(log_transact(conn, op_snaps_phased, "thin3"), 0);
    set_status("thin3", "completed");
    CHECK_EQ_INT(test_db_int("SELECT count(*) FROM snapshots WHERE session = 'thin3'"), 48);
    CHECK_EQ_INT(run("{\"policies\": [{\"prefix\": \"nothing/\", \"keep\": 0}]}", 0, NULL, &st), 0);
    CHECK_EQ_INT(st.snapshots, 44);
    CHECK_EQ_INT(test_db_int("SELECT count(*) FROM snapshots WHERE session = 'thin3'"), 4);
    CHECK_EQ_INT(test_db_int("SELECT count(*) FROM snapshots WHERE session = 'thin3' AND seq IN (3, 1005, 2029, 2989)"), 4);
}

/* A batch made from a scan that is out of date by the time it runs: a session that
 * was sent a message (running) or forked since is left, counted as skipped. */
static void test_recheck(void)
{
    CHECK_EQ_INT(create("rc1"), 0);
    CHECK_EQ_INT(create("rc2"), 0);
    set_status("rc1", "completed");
    set_status("rc2", "completed");
    static batch b;
    memset(&b, 0, sizeof b);
    b.v[0].path = strdup("sessions/rc1");
    b.v[0].session = strdup("rc1");
    b.v[1].path = strdup("sessions/rc2");
    b.v[1].session = strdup("rc2");
    b.n = 2;
    set_status("rc1", "running");                       /* woken after the scan */
    CHECK_EQ_INT(fork_of("rc2k", "rc2"), 0);            /* forked after the scan */
    CHECK_EQ_INT(log_transact(conn, op_batch, &b), 0);
    CHECK_EQ_INT(b.skipped, 2);
    CHECK_EQ_INT(b.sessions, 0);
    CHECK(exists("sessions/rc1") && exists("sessions/rc2"));
    set_status("rc1", "completed");
    CHECK_EQ_INT(log_transact(conn, op_batch, &b), 0);
    CHECK_EQ_INT(b.skipped, 1);
    CHECK_EQ_INT(b.sessions, 1);
    CHECK(!exists("sessions/rc1") && exists("sessions/rc2"));
    batch_clear(&b);
}

int main(void)
{
    test_parse();
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("retain", dir, sizeof dir, &lg, &conn) == 0) {
            test_streams();
            test_sessions();
            test_thin();
            test_recheck();
        }
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

/* Unit tests for lib/backup.c: a backup taken while writer threads keep appending
 * opens, passes the integrity check and the invariants, and holds every append
 * that was acknowledged before it started (and nothing torn); on PostgreSQL, copy
 * and restore name its own tools instead. On each engine (test_db.h): a target with
 * no database is said so; the check is
 * clean on a database with forks and deletions, names each invariant broken by
 * hand in the rows, and every session snapshot equals a replay of the session's
 * events (text with NULs too), each one altered by hand (a session's own, a fork's
 * at its fork point, its text cut at a NUL) named with the key that differs. The
 * rows are changed with the engine's command-line program (test_db_sql). A backup's
 * file: test_sqlite_backup.c. */
#include "backup.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "timefmt.h"
#include "event.h"
#include "log.h"
#include "sstore.h"
#include "test_db.h"

#define WRITERS 3
#define APPENDS 4000            /* per writer, at most: the loop is bounded */

static char dir[256];
static log_t *lg;
static log_conn_t *conn;
static atomic_int acked[WRITERS];   /* appends acknowledged so far, per writer */
static atomic_int stop;

/* A stream, or a fork of from at message `at` (-1: its tail) whose offset's byte
 * part is at_pos (offsets name both). */
static int create_at(const char *path, const char *from, int64_t at, uint64_t at_pos)
{
    log_create_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.content_type = "text/plain";
    r.ttl_s = r.expires_ms = -1;
    if (from) {
        r.fork_from = from;
        r.content_type = NULL;
        r.fork_has_offset = at >= 0;
        r.fork_offset.seq = (uint64_t)(at < 0 ? 0 : at);
        r.fork_offset.pos = at_pos;
    }
    return log_create(conn, &r);
}

static int create(const char *path, const char *from, int64_t at)
{
    return create_at(path, from, at, 0);
}

static void *writer(void *arg)
{
    int w = (int)(intptr_t)arg;
    char err[256], path[32], msg[64];
    log_conn_t *c = log_conn_open(lg, err, sizeof err);
    if (!c) return NULL;
    snprintf(path, sizeof path, "w%d", w);
    for (int i = 0; i < APPENDS && !atomic_load(&stop); i++) {
        snprintf(msg, sizeof msg, "writer %d message %d", w, i);
        if (test_db_append(c, path, msg)) break;
        atomic_store(&acked[w], i + 1);
    }
    log_conn_close(c);
    return NULL;
}

static void count_problem(void *ud, const char *problem)
{
    (*(int *)ud)++;
    fprintf(stderr, "  problem: %s\n", problem);
}

static int problems(const char *target)
{
    char err[256];
    int seen = 0;
    int n = backup_check(target, 10, count_problem, &seen, err, sizeof err);
    if (n < 0) fprintf(stderr, "  check failed: %s\n", err);
    return n;
}

/* The messages of a stream, read back: each must be "writer w message i" in order. */
typedef struct readback {
    int w, n, in_order;
} readback;

static int read_one(void *ud, const void *data, size_t len, offset_t at)
{
    readback *r = ud;
    char want[64];
    snprintf(want, sizeof want, "writer %d message %d", r->w, r->n);
    if (at.seq != (uint64_t)r->n || len != strlen(want) || memcmp(data, want, len)) r->in_order = 0;
    r->n++;
    return 0;
}

/* Read the whole stream path from c into r (every read until the tail). */
static int read_stream(log_conn_t *c, const char *path, readback *r)
{
    log_read_req q;
    memset(&q, 0, sizeof q);
    q.path = path;
    q.kind = OFFSET_START;
    q.max_bytes = (size_t)-1;
    for (int i = 0; i < 100000; i++) {
        int rc = log_read(c, &q, read_one, r);
        if (rc) return rc;
        if (q.up_to_date) return 0;
        q.kind = OFFSET_AT;
        q.from = q.next;
    }
    return -1;
}

static void test_backup_under_load(void)
{
    char path[32], dest[400];
    for (int w = 0; w < WRITERS; w++) {
        snprintf(path, sizeof path, "w%d", w);
        CHECK_EQ_INT(create(path, NULL, -1), 0);
    }
    pthread_t th[WRITERS];
    for (int w = 0; w < WRITERS; w++) pthread_create(&th[w], NULL, writer, (void *)(intptr_t)w);
    /* Let the writers get going (bounded: they may also simply finish). */
    for (int i = 0; i < 5000 && atomic_load(&acked[WRITERS - 1]) < 200; i++) usleep(1000);
    int before[WRITERS];
    for (int w = 0; w < WRITERS; w++) before[w] = atomic_load(&acked[w]);
    char err[256];
    const char *db = log_path(lg);
    snprintf(dest, sizeof dest, "%s/backup.db", dir);
    backup_info bi;
    int rc = backup_copy(db, dest, &bi, err, sizeof err);
    if (!CHECK_EQ_INT(rc, 0)) fprintf(stderr, "  %s\n", err);
    int after[WRITERS];
    for (int w = 0; w < WRITERS; w++) after[w] = atomic_load(&acked[w]);
    /* A second backup to the same file is refused and leaves it alone. */
    CHECK_EQ_INT(backup_copy(db, dest, NULL, err, sizeof err), BACKUP_EFAIL);
    CHECK(strstr(err, "exists") != NULL);
    atomic_store(&stop, 1);
    for (int w = 0; w < WRITERS; w++) pthread_join(th[w], NULL);

    /* The backup: sound, and every stream holds at least what was acknowledged
     * before it started and at most what was acknowledged when it ended, as a
     * prefix (message i is "writer w message i"). */
    CHECK_EQ_INT(problems(dest), 0);
    CHECK_EQ_INT(bi.streams, WRITERS);
    log_opts o = {0, 5000, 0, 0, 0};
    log_t *bl = log_open(dest, &o, err, sizeof err);
    log_conn_t *bc = bl ? log_conn_open(bl, err, sizeof err) : NULL;
    if (!CHECK(bc != NULL)) {
        fprintf(stderr, "  %s\n", err);
        log_close(bl);
        return;
    }
    int64_t total = 0;
    for (int w = 0; w < WRITERS; w++) {
        readback r = {w, 0, 1};
        snprintf(path, sizeof path, "w%d", w);
        CHECK_EQ_INT(read_stream(bc, path, &r), 0);
        int n = r.n;
        CHECK(r.in_order);
        CHECK(n >= before[w]);
        CHECK(n <= after[w]);
        total += n;
        printf("writer %d: %d acknowledged before the backup, %d in it, %d when it ended\n", w,
               before[w], n, after[w]);
    }
    CHECK_EQ_INT(total, bi.messages);
    CHECK(bi.bytes > 0);
    log_conn_close(bc);
    log_close(bl);
}

/* A target that holds no database: said so, by the copy and by the check, and
 * nothing is created. On PostgreSQL: a database without the log's tables, or none
 * at all (the same server, other databases: a URI's path is its name). */
static void test_no_database(void)
{
    char target[1200], dest[400], err[512];
    if (test_db_is_pg()) {
        const char *drop[1] = {"DROP DATABASE IF EXISTS t_pg_backup_empty"},
                   *create[1] = {"CREATE DATABASE t_pg_backup_empty"};
        int seen = 0;
        CHECK_EQ_INT(test_psql(test_db_pg_cluster(), drop, 1, NULL, 0), 0);
        CHECK_EQ_INT(test_psql(test_db_pg_cluster(), create, 1, NULL, 0), 0);
        CHECK_EQ_INT(test_db_pg_uri(test_db_pg_cluster(), "t_pg_backup_empty", target, sizeof target), 0);
        CHECK_EQ_INT(backup_check(target, 10, count_problem, &seen, err, sizeof err), BACKUP_ENODB);
        CHECK(strstr(err, "no dstream database") != NULL);
        CHECK_EQ_INT(test_db_pg_uri(test_db_pg_cluster(), "t_pg_backup_nothing", target, sizeof target), 0);
        CHECK_EQ_INT(backup_check(target, 10, count_problem, &seen, err, sizeof err), BACKUP_ENODB);
        CHECK_EQ_INT(seen, 0);
        CHECK_EQ_INT(test_psql(test_db_pg_cluster(), drop, 1, NULL, 0), 0);
        return;
    }
    snprintf(target, sizeof target, "%s/nothing.db", dir);
    snprintf(dest, sizeof dest, "%s/nothing-backup.db", dir);
    CHECK_EQ_INT(backup_copy(target, dest, NULL, err, sizeof err), BACKUP_ENODB);
    CHECK(strstr(err, "no such database") != NULL);
    CHECK(access(dest, F_OK) != 0);
    int seen = 0;
    CHECK_EQ_INT(backup_check(target, 10, count_problem, &seen, err, sizeof err), BACKUP_ENODB);
    CHECK(strstr(err, "no such database") != NULL);
    CHECK(access(target, F_OK) != 0);
}

/* PostgreSQL's copy and restore: its own tools, said plainly; no file left behind. */
static void test_copy_restore(void)
{
    char err[512], dest[400];
    snprintf(dest, sizeof dest, "%s/backup.db", dir);
    CHECK_EQ_INT(backup_copy(log_path(lg), dest, NULL, err, sizeof err), BACKUP_EFAIL);
    CHECK(strstr(err, "pg_dump") && strstr(err, "pg_basebackup"));
    CHECK(access(dest, F_OK) != 0);
    CHECK_EQ_INT(backup_restore(log_path(lg), dest, err, sizeof err), BACKUP_EFAIL);
    CHECK(strstr(err, "pg_restore") != NULL);
}

static void test_check_sound(void)
{
    char path[400], err[256];
    /* Forks, a soft-deleted parent, a deleted stream: all sound. */
    CHECK_EQ_INT(create("p", NULL, -1), 0);
    CHECK_EQ_INT(test_db_append(conn, "p", "one"), 0);
    CHECK_EQ_INT(test_db_append(conn, "p", "two!"), 0);
    CHECK_EQ_INT(create_at("f", "p", 1, 3), 0);     /* after "one" */
    CHECK_EQ_INT(test_db_append(conn, "f", "three"), 0);
    CHECK_EQ_INT(log_delete(conn, "p"), 0);
    CHECK_EQ_INT(create("gone", NULL, -1), 0);
    CHECK_EQ_INT(log_delete(conn, "gone"), 0);
    CHECK_EQ_INT(problems(log_path(lg)), 0);
    /* (Each broken invariant found: test_check_finds.) */

    /* A file that is not a database: the check cannot run. */
    if (test_db_is_pg()) return;
    snprintf(path, sizeof path, "%s/junk.db", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("this is not a database, not even close to one", f);
        fclose(f);
    }
    int seen = 0;
    CHECK(backup_check(path, 10, count_problem, &seen, err, sizeof err) < 0);
}

/* ---- snapshots against a replay ---------------------------------------------------- */

static int say(void *ud, const session_view *v, sstore_event *ev, size_t *n)
{
    (void)v;
    ev[0] = *(const sstore_event *)ud;
    *n = 1;
    return 0;
}

/* count user messages to session id, one command each. */
static int say_n(const char *id, int count)
{
    session_trace t;
    session_trace_new(&t);
    for (int i = 0; i < count; i++) {
        char text[48];
        snprintf(text, sizeof text, "%s says %d", id, i);
        json_t *c = json_string(text);
        sstore_event e = event_message_user(c, "queue", NULL, NULL);
        json_decref(c);
        int rc = sstore_command(conn, id, &t, say, &e, NULL);
        json_decref(e.payload);
        if (rc) return rc;
    }
    return 0;
}

/* A session, or a fork of parent at its tail. */
static int session(const char *id, const char *parent)
{
    sstore_create_req r;
    session_trace t;
    memset(&r, 0, sizeof r);
    session_trace_new(&t);
    r.id = id;
    r.trace = &t;
    r.parent = parent;
    if (!parent) {
        r.agent = "writer";
        r.created = json_pack("{s:s, s:{s:s}}", "agent", "writer", "input", "topic", "owls");
    }
    int rc = sstore_create(conn, &r);
    json_decref(r.created);
    return rc;
}

static char seen_problems[4096];

/* Every problem reported, one a line, into seen_problems. */
static void keep_problem(void *ud, const char *problem)
{
    (*(int *)ud)++;
    size_t len = strlen(seen_problems);
    snprintf(seen_problems + len, sizeof seen_problems - len, "%s\n", problem);
}

/* The check of the test's database: the number of problems, each in seen_problems. */
static int problems_kept(int limit, int *seen)
{
    char err[256];
    *seen = 0;
    seen_problems[0] = '\0';
    int n = backup_check(log_path(lg), limit, keep_problem, seen, err, sizeof err);
    if (n < 0) fprintf(stderr, "  check failed: %s\n", err);
    return n;
}

/* 1 when the check of the test's database finds nothing (else what it found is
 * printed). */
static int sound(void)
{
    int seen;
    int n = problems_kept(10, &seen);
    if (n > 0) fprintf(stderr, "  problems:\n%s", seen_problems);
    return n == 0;
}

/* SQL of one engine or the other's. */
static const char *dialect(const char *sqlite, const char *pg)
{
    return test_db_is_pg() ? pg : sqlite;
}

/* The digest d (lib/chain.h) written into message seq of stream id (seq < 0: into
 * the stream's row), in the engine's spelling of bytes. */
static int set_digest(int64_t id, int64_t seq, const uint8_t d[CHAIN_LEN])
{
    char hex[CHAIN_HEX + 1], sql[256], val[96];
    chain_hex(d, hex);
    snprintf(val, sizeof val, test_db_is_pg() ? "decode('%s', 'hex')" : "x'%s'", hex);
    if (seq < 0) snprintf(sql, sizeof sql, "UPDATE streams SET digest = %s WHERE id = %lld", val, (long long)id);
    else
        snprintf(sql, sizeof sql, "UPDATE messages SET digest = %s WHERE stream = %lld AND seq = %lld", val,
                 (long long)id, (long long)seq);
    return test_db_sql(sql, NULL, 0);
}

/* The hash chain of stream id's messages (seq, pos, data: n of them) from start,
 * written as the streams area writes it; the digest at its tail into end. */
static void chain_by_hand(int64_t id, const uint8_t start[CHAIN_LEN], const int64_t (*at)[2], const char *const *data,
                          int n, uint8_t end[CHAIN_LEN])
{
    memcpy(end, start, CHAIN_LEN);
    for (int i = 0; i < n; i++) {
        chain_link(end, (offset_t){(uint64_t)at[i][0], (uint64_t)at[i][1]}, data[i], strlen(data[i]), end);
        CHECK_EQ_INT(set_digest(id, at[i][0], end), 0);
    }
    CHECK_EQ_INT(set_digest(id, -1, end), 0);
}

/* A sound log, row by row as the streams area leaves it, on a database of its own:
 * w0 of three messages; p (deleted, kept for its fork) of two; f forked from p after
 * its first, with one of its own; a session's stream of two messages. Then each
 * invariant broken by hand is found, and undone. */
static void test_check_finds(void)
{
    CHECK_EQ_INT(test_db_sql("INSERT INTO streams (id, path, content_type, created_ms, access_ms, tail_seq, tail_pos,"
                             " parent, fork_seq, fork_pos, deleted, forks) VALUES"
                             " (1, 'w0', 'text/plain', 1, 1, 3, 6, NULL, 0, 0, 0, 0),"
                             " (2, 'p', 'text/plain', 1, 1, 2, 7, NULL, 0, 0, 1, 1),"
                             " (3, 'f', 'text/plain', 1, 1, 2, 8, 2, 1, 3, 0, 0),"
                             " (4, 'sessions/s1', 'application/json', 1, 1, 2, 4, NULL, 0, 0, 0, 0)", NULL, 0),
                 0);
    CHECK_EQ_INT(test_db_sql("INSERT INTO messages (stream, seq, pos, rec, data) VALUES"
                             " (1, 0, 0, 0, 'aa'), (1, 1, 2, 1, 'bbb'), (1, 2, 5, 2, 'c'),"
                             " (2, 0, 0, 0, 'one'), (2, 1, 3, 1, 'two!'), (3, 1, 3, 1, 'three'),"
                             " (4, 0, 0, 0, '{}'), (4, 1, 2, 1, '{}')", NULL, 0),
                 0);
    CHECK_EQ_INT(test_db_sql("INSERT INTO sessions (id, stream, status, created_ms, updated_ms) VALUES"
                             " ('s1', 'sessions/s1', 'idle', 1, 1)", NULL, 0),
                 0);
    /* Their hash chains: f's starts from p's digest at its fork point (after "one"). */
    static const int64_t w0_at[][2] = {{0, 0}, {1, 2}, {2, 5}}, p_at[][2] = {{0, 0}, {1, 3}}, f_at[][2] = {{1, 3}},
                         s1_at[][2] = {{0, 0}, {1, 2}};
    static const char *const w0_data[] = {"aa", "bbb", "c"}, *const p_data[] = {"one", "two!"},
                             *const f_data[] = {"three"}, *const s1_data[] = {"{}", "{}"};
    uint8_t zero[CHAIN_LEN] = {0}, end[CHAIN_LEN], p1[CHAIN_LEN];
    chain_by_hand(1, zero, w0_at, w0_data, 3, end);
    chain_by_hand(2, zero, p_at, p_data, 1, p1);
    chain_by_hand(2, zero, p_at, p_data, 2, end);
    chain_by_hand(3, p1, f_at, f_data, 1, end);
    chain_by_hand(4, zero, s1_at, s1_data, 2, end);
    CHECK(sound());

    static const struct {
        const char *breaks, *repairs, *named;
    } cases[] = {
        {"UPDATE messages SET pos = pos + 1 WHERE seq = 1 AND stream = (SELECT id FROM streams WHERE path = 'f')",
         "UPDATE messages SET pos = pos - 1 WHERE seq = 1 AND stream = (SELECT id FROM streams WHERE path = 'f')",
         "stream's first message"},
        {"UPDATE messages SET pos = pos + 1 WHERE seq = 2 AND stream = 1",
         "UPDATE messages SET pos = pos - 1 WHERE seq = 2 AND stream = 1", "message position does not follow"},
        {"UPDATE streams SET tail_seq = tail_seq + 1 WHERE path = 'w0'",
         "UPDATE streams SET tail_seq = tail_seq - 1 WHERE path = 'w0'", "not contiguous"},
        {"UPDATE streams SET tail_pos = tail_pos + 7 WHERE path = 'w0'",
         "UPDATE streams SET tail_pos = tail_pos - 7 WHERE path = 'w0'", "tail position wrong"},
        {"UPDATE messages SET seq = seq + 100000 WHERE seq = 1 AND stream = (SELECT id FROM streams WHERE path = 'w0')",
         "UPDATE messages SET seq = seq - 100000 WHERE seq = 100001 AND stream = (SELECT id FROM streams WHERE path = 'w0')",
         "not contiguous"},
        {"UPDATE messages SET rec = 2 WHERE seq = 1 AND stream = 1",
         "UPDATE messages SET rec = 1 WHERE seq = 1 AND stream = 1", "record starts after it"},
        {"UPDATE streams SET parent = 99999 WHERE path = 'f'",
         "UPDATE streams SET parent = (SELECT id FROM streams WHERE deleted = 1) WHERE path = 'f'",
         "fork whose parent is missing"},
        {"UPDATE streams SET forks = 0 WHERE deleted = 1", "UPDATE streams SET forks = 1 WHERE deleted = 1",
         "deleted stream kept"},
        {"INSERT INTO messages (stream, seq, pos, rec, data) VALUES (88888, 0, 0, 0, 'x')",
         "DELETE FROM messages WHERE stream = 88888", "messages of a stream that does not exist"},
        {"INSERT INTO producers (stream, producer, epoch, seq) VALUES (77777, 'pr', 0, 0)",
         "DELETE FROM producers WHERE stream = 77777", "producer state of a stream"},
        {"INSERT INTO sessions (id, stream, status, created_ms, updated_ms) VALUES"
         " ('lost', 'sessions/lost', 'pending', 0, 0)",
         "DELETE FROM sessions WHERE id = 'lost'", "session without its event stream"},
        {"INSERT INTO snapshots (session, seq, pos, view) VALUES ('s1', 1, 3, '{}')",
         "DELETE FROM snapshots WHERE session = 's1'", "not on a message boundary"},
        /* The walk: a snapshot on a boundary that a replay of the stream disagrees with. */
        {"INSERT INTO snapshots (session, seq, pos, view) VALUES ('s1', 1, 2, '{\"not\": \"a view\"}')",
         "DELETE FROM snapshots WHERE session = 's1'", "differs from a replay of its session's events: session=s1 seq=1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(test_db_sql(cases[i].breaks, NULL, 0), 0);
        int seen;
        int n = problems_kept(10, &seen);
        if (!CHECK(n >= 1 && strstr(seen_problems, cases[i].named)))
            fprintf(stderr, "  not found: %s (wanted %s) in:\n%s", cases[i].breaks, cases[i].named, seen_problems);
        CHECK_EQ_INT(test_db_sql(cases[i].repairs, NULL, 0), 0);
        CHECK(sound());
    }
    /* Reports stop at the limit; every problem is counted. */
    CHECK_EQ_INT(test_db_sql("UPDATE streams SET forks = 0 WHERE deleted = 1;"
                             " INSERT INTO sessions (id, stream, status, created_ms, updated_ms) VALUES"
                             " ('l1', 'sessions/l1', 'pending', 0, 0), ('l2', 'sessions/l2', 'pending', 0, 0)", NULL, 0),
                 0);
    int seen;
    CHECK_EQ_INT(problems_kept(1, &seen), 3);
    CHECK_EQ_INT(seen, 2);      /* one of each rule */
    CHECK_EQ_INT(test_db_sql("UPDATE streams SET forks = 1 WHERE deleted = 1;"
                             " DELETE FROM sessions WHERE id IN ('l1', 'l2')", NULL, 0),
                 0);
    CHECK(sound());
}

/* The snapshots' "session:seq", in order, into out (space between them). */
static const char *snapshot_list(char *out, size_t cap)
{
    if (test_db_sql("SELECT session || ':' || seq FROM snapshots ORDER BY session, seq", out, cap)) return "?";
    for (char *c = out; *c; c++)
        if (*c == '\n') *c = ' ';
    return out;
}

static void test_check_snapshots(void)
{
    char got[256];
    /* (The ids' snapshot phase is 0, sstore_snapshot_phase: their snapshots fall at
     * multiples of 64.) a: 141 events (snapshots at 64 and 128); b forked from it at 101 (its
     * fork-point snapshot) and 71 events more (its own at 128); c forked from b, e
     * from c, then c deleted: its stream stays for e, its snapshots go. */
    CHECK_EQ_INT(session("a105", NULL), 0);
    CHECK_EQ_INT(say_n("a105", 100), 0);
    CHECK_EQ_INT(session("b25", "a105"), 0);
    CHECK_EQ_INT(say_n("a105", 40), 0);
    CHECK_EQ_INT(say_n("b25", 70), 0);
    CHECK_EQ_INT(session("c33", "b25"), 0);
    CHECK_EQ_INT(say_n("c33", 3), 0);
    CHECK_EQ_INT(session("e75", "c33"), 0);
    CHECK_EQ_INT(say_n("e75", 2), 0);
    CHECK_EQ_INT(sstore_delete(conn, "c33"), 0);
    CHECK_EQ_STR(snapshot_list(got, sizeof got), "a105:64 a105:128 b25:101 b25:128 e75:176");
    CHECK_EQ_INT(problems(log_path(lg)), 0);

    /* Each altered snapshot is named; a fork's altered fork point is found in its
     * parent's replay (and its own replay, which starts there, may differ on). The
     * change in SQLite's SQL, then PostgreSQL's. */
    static const struct {
        const char *session;
        int seq;
        const char *alter, *alter_pg, *named;
        int problems;
    } cases[] = {
        {"a105", 128, "json_set(view, '$.eventCount', 7)", "jsonb_set(view::jsonb, '{eventCount}', '7')",
         "session=a105 seq=128 key=eventCount", 1},
        {"a105", 64, "json_set(view, '$.created.input.topic', 'bats')",
         "jsonb_set(view::jsonb, '{created,input,topic}', '\"bats\"')", "session=a105 seq=64 key=created.input.topic", 1},
        {"a105", 64, "json_remove(view, '$.messages[5]')", "view::jsonb #- '{messages,5}'",
         "session=a105 seq=64 key=messages[5]", 1},
        {"b25", 128, "json_set(view, '$.status', 'failed')", "jsonb_set(view::jsonb, '{status}', '\"failed\"')",
         "session=b25 seq=128 key=status", 1},
        {"b25", 128, "json_set(view, '$.messages[3].extra', 1)", "jsonb_set(view::jsonb, '{messages,3,extra}', '1')",
         "session=b25 seq=128 key=messages[3].extra", 1},
        {"b25", 101, "json_set(view, '$.queued[0]', 'x')", "jsonb_set(view::jsonb, '{queued,0}', '\"x\"')",
         "session=b25 seq=101 fork point, replayed in sessions/a105 key=queued[0]", 2},
        /* e's parent c was deleted: its fork point cannot be replayed, but e's own
         * replay needs it whole. */
        {"e75", 176, "'not a view'", "'not a view'",
         "session=e75 seq=176 key=(its fork-point snapshot, missing or not a view)", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sql[512];
        snprintf(sql, sizeof sql, "CREATE TABLE kept AS SELECT view FROM snapshots WHERE session = '%s' AND seq = %d;"
                 " UPDATE snapshots SET view = %s WHERE session = '%s' AND seq = %d", cases[i].session,
                 cases[i].seq, dialect(cases[i].alter, cases[i].alter_pg), cases[i].session, cases[i].seq);
        CHECK_EQ_INT(test_db_sql(sql, NULL, 0), 0);
        int seen;
        CHECK_EQ_INT(problems_kept(10, &seen), cases[i].problems);
        CHECK_EQ_INT(seen, cases[i].problems);
        if (!CHECK(strstr(seen_problems, cases[i].named) != NULL))
            fprintf(stderr, "  wanted %s in: %s\n", cases[i].named, seen_problems);
        snprintf(sql, sizeof sql, "UPDATE snapshots SET view = (SELECT view FROM kept) WHERE session = '%s' AND seq = %d;"
                 " DROP TABLE kept", cases[i].session, cases[i].seq);
        CHECK_EQ_INT(test_db_sql(sql, NULL, 0), 0);
        CHECK(sound());
    }
    /* Snapshots written before the cost split have neither cost nor playedRequest,
     * and those before timers and signals none of timerAt, signals, waitingFor and
     * branch: not a difference. An altered cost is. */
    CHECK_EQ_INT(test_db_sql(dialect("CREATE TABLE kept AS SELECT * FROM snapshots;"
                                     " UPDATE snapshots SET view = json_remove(view, '$.cost', '$.playedRequest',"
                                     " '$.timerAt', '$.signals', '$.waitingFor', '$.branch')",
                                     "CREATE TABLE kept AS SELECT * FROM snapshots;"
                                     " UPDATE snapshots SET view = view::jsonb - 'cost' - 'playedRequest'"
                                     " - 'timerAt' - 'signals' - 'waitingFor' - 'branch'"
                                     " WHERE view LIKE '{%'"), NULL, 0), 0);
    CHECK_EQ_INT(problems(log_path(lg)), 0);
    CHECK_EQ_INT(test_db_sql(dialect("UPDATE snapshots SET view = json_set(view, '$.cost', json('{\"spentUsd\": 1}'))"
                                     " WHERE session = 'a105' AND seq = 128",
                                     "UPDATE snapshots SET view = jsonb_set(view::jsonb, '{cost}', '{\"spentUsd\": 1}')"
                                     " WHERE session = 'a105' AND seq = 128"), NULL, 0), 0);
    CHECK_EQ_INT(problems(log_path(lg)), 1);
    CHECK_EQ_INT(test_db_sql("DELETE FROM snapshots; INSERT INTO snapshots SELECT * FROM kept; DROP TABLE kept", NULL, 0),
                 0);
    CHECK_EQ_INT(problems(log_path(lg)), 0);
    /* A live fork without its fork-point snapshot cannot be replayed: said so. */
    CHECK_EQ_INT(test_db_sql("CREATE TABLE kept AS SELECT * FROM snapshots WHERE session = 'b25' AND seq = 101;"
                             " DELETE FROM snapshots WHERE session = 'b25' AND seq = 101", NULL, 0), 0);
    int seen;
    CHECK_EQ_INT(problems_kept(10, &seen), 1);
    CHECK(strstr(seen_problems, "session=b25 seq=101 key=(its fork-point snapshot, missing or not a view)") != NULL);
    CHECK_EQ_INT(test_db_sql("INSERT INTO snapshots SELECT * FROM kept; DROP TABLE kept", NULL, 0), 0);
    /* Reports stop at the limit; every problem is counted (a:64, a:128, b's fork
     * point; b:128 agrees with a replay from b's altered fork point, e's cannot be
     * replayed). */
    CHECK_EQ_INT(test_db_sql(dialect("UPDATE snapshots SET view = json_set(view, '$.steps', 99)",
                                     "UPDATE snapshots SET view = jsonb_set(view::jsonb, '{steps}', '99')"
                                     " WHERE view LIKE '{%'"), NULL, 0), 0);
    CHECK_EQ_INT(problems_kept(2, &seen), 3);
    CHECK_EQ_INT(seen, 2);
}

/* Text holding NULs (JSON's \u0000), as a model may send: the snapshots of such a
 * session agree with its replay (they were "not JSON" to the check), and a snapshot
 * whose text was cut at the NUL (what a strlen on the way made of it) is named. On a
 * database of its own. */
static void test_check_snapshots_nul(void)
{
    CHECK_EQ_INT(session("z153", NULL), 0);
    session_trace t;
    session_trace_new(&t);
    for (int i = 0; i < 70; i++) {
        json_t *c = json_stringn("z\0says", 6);
        sstore_event e = event_message_user(c, "queue", NULL, NULL);
        json_decref(c);
        CHECK_EQ_INT(sstore_command(conn, "z153", &t, say, &e, NULL), 0);
        json_decref(e.payload);
    }
    CHECK_EQ_INT(test_db_int("SELECT count(*) FROM snapshots WHERE session = 'z153' AND view LIKE '%\\u0000%' ESCAPE '!'"),
                 1);
    CHECK_EQ_INT(problems(log_path(lg)), 0);
    CHECK_EQ_INT(test_db_sql("UPDATE snapshots SET view = replace(view, '\"z\\u0000says\"', '\"z\"')"
                             " WHERE session = 'z153'", NULL, 0),
                 0);
    int seen;
    CHECK_EQ_INT(problems_kept(10, &seen), 1);
    if (!CHECK(strstr(seen_problems, "session=z153 seq=64 key=messages[0].content") != NULL))
        fprintf(stderr, "  got: %s\n", seen_problems);
}

int main(void)
{
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("test", dir, sizeof dir, &lg, &conn) == 0) {
            if (test_db_is_pg()) test_copy_restore();
            else test_backup_under_load();
            test_no_database();
            test_check_sound();
            test_check_snapshots();
        }
        test_db_close(dir, lg, conn);
        if (test_db_open("test_rows", dir, sizeof dir, &lg, &conn) == 0) test_check_finds();
        test_db_close(dir, lg, conn);
        if (test_db_open("test_nul", dir, sizeof dir, &lg, &conn) == 0) test_check_snapshots_nul();
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

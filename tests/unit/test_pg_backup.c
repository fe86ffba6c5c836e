/* Unit tests for the PostgreSQL engine's backups (lib/store/pg/pg_backup.c, through
 * lib/backup.c): the check of a database in place names each invariant broken by
 * hand in the rows (test_sqlite_backup's cases, in PostgreSQL's SQL) and a session's
 * snapshot that differs from a replay of its stream (the walk hands the stream's
 * messages and snapshots up): sessions, forks and their fork-point snapshots made
 * through lib/sstore agree with their replay, and each snapshot altered by hand is
 * named with the key that differs; a database without the log's tables, or none at all,
 * is no database; copy and restore say to use PostgreSQL's own tools and leave
 * nothing behind. Runs only when DSTREAM_TEST_PG names a cluster (tests/pg.sh). */
#include "backup.h"

#include <string.h>
#include <unistd.h>

#include "event.h"
#include "sstore.h"
#include "store.h"
#include "store/pg/pg.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

static int exec_sql(const char *sql)
{
    PGresult *r = PQexec(pgc(conn)->pg, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) fprintf(stderr, "  %s: %s", sql, PQerrorMessage(pgc(conn)->pg));
    PQclear(r);
    return ok ? 0 : -1;
}

static char seen_problems[4096];

/* Every problem reported, one a line, into seen_problems. */
static void keep_problem(void *ud, const char *problem)
{
    (*(int *)ud)++;
    size_t len = strlen(seen_problems);
    snprintf(seen_problems + len, sizeof seen_problems - len, "%s\n", problem);
}

static int problems(void)
{
    char err[256];
    int seen = 0;
    seen_problems[0] = '\0';
    int n = backup_check(lg->target, 10, keep_problem, &seen, err, sizeof err);
    if (n < 0) fprintf(stderr, "  check failed: %s\n", err);
    return n;
}

/* 1 when the check finds nothing (else what it found is printed). */
static int sound(void)
{
    int n = problems();
    if (n > 0) fprintf(stderr, "  problems:\n%s", seen_problems);
    return n == 0;
}

/* A sound log, row by row as the streams area leaves it: w0 of three messages; p
 * (deleted, kept for its fork) of two; f forked from p after its first, with one of
 * its own; a session's stream of two messages. */
static void test_check_finds(void)
{
    CHECK_EQ_INT(exec_sql("INSERT INTO streams (id, path, content_type, created_ms, access_ms, tail_seq, tail_pos,"
                          " parent, fork_seq, fork_pos, deleted, forks) VALUES"
                          " (1, 'w0', 'text/plain', 1, 1, 3, 6, NULL, 0, 0, 0, 0),"
                          " (2, 'p', 'text/plain', 1, 1, 2, 7, NULL, 0, 0, 1, 1),"
                          " (3, 'f', 'text/plain', 1, 1, 2, 8, 2, 1, 3, 0, 0),"
                          " (4, 'sessions/s1', 'application/json', 1, 1, 2, 4, NULL, 0, 0, 0, 0)"),
                 0);
    CHECK_EQ_INT(exec_sql("INSERT INTO messages (stream, seq, pos, rec, data) VALUES"
                          " (1, 0, 0, 0, 'aa'), (1, 1, 2, 1, 'bbb'), (1, 2, 5, 2, 'c'),"
                          " (2, 0, 0, 0, 'one'), (2, 1, 3, 1, 'two!'), (3, 1, 3, 1, 'three'),"
                          " (4, 0, 0, 0, '{}'), (4, 1, 2, 1, '{}')"),
                 0);
    CHECK_EQ_INT(exec_sql("INSERT INTO sessions (id, stream, status, created_ms, updated_ms) VALUES"
                          " ('s1', 'sessions/s1', 'idle', 1, 1)"),
                 0);
    CHECK(sound());

    /* Each broken invariant is found, and undone. */
    static const struct {
        const char *breaks, *repairs, *named;
    } cases[] = {
        {"UPDATE messages SET pos = pos + 1 WHERE seq = 1 AND stream = 3",
         "UPDATE messages SET pos = pos - 1 WHERE seq = 1 AND stream = 3", "stream's first message"},
        {"UPDATE messages SET pos = pos + 1 WHERE seq = 2 AND stream = 1",
         "UPDATE messages SET pos = pos - 1 WHERE seq = 2 AND stream = 1", "message position does not follow"},
        {"UPDATE streams SET tail_seq = tail_seq + 1 WHERE path = 'w0'",
         "UPDATE streams SET tail_seq = tail_seq - 1 WHERE path = 'w0'", "not contiguous"},
        {"UPDATE streams SET tail_pos = tail_pos + 7 WHERE path = 'w0'",
         "UPDATE streams SET tail_pos = tail_pos - 7 WHERE path = 'w0'", "tail position wrong"},
        {"UPDATE messages SET seq = seq + 100000 WHERE seq = 1 AND stream = 1",
         "UPDATE messages SET seq = seq - 100000 WHERE seq = 100001 AND stream = 1", "not contiguous"},
        {"UPDATE messages SET rec = 2 WHERE seq = 1 AND stream = 1",
         "UPDATE messages SET rec = 1 WHERE seq = 1 AND stream = 1", "record starts after it"},
        {"UPDATE streams SET parent = 99999 WHERE path = 'f'", "UPDATE streams SET parent = 2 WHERE path = 'f'",
         "fork whose parent is missing"},
        {"UPDATE streams SET forks = 0 WHERE deleted = 1", "UPDATE streams SET forks = 1 WHERE deleted = 1",
         "deleted stream kept"},
        {"INSERT INTO messages (stream, seq, pos, rec, data) VALUES (88888, 0, 0, 0, '\\x00')",
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
        CHECK_EQ_INT(exec_sql(cases[i].breaks), 0);
        int n = problems();
        if (!CHECK(n >= 1 && strstr(seen_problems, cases[i].named)))
            fprintf(stderr, "  not found: %s (wanted %s)\n", cases[i].breaks, cases[i].named);
        CHECK_EQ_INT(exec_sql(cases[i].repairs), 0);
        CHECK(sound());
    }
    /* Reports stop at the limit; every problem is counted. */
    CHECK_EQ_INT(exec_sql("UPDATE streams SET forks = 0 WHERE deleted = 1;"
                          " INSERT INTO sessions (id, stream, status, created_ms, updated_ms) VALUES"
                          " ('l1', 'sessions/l1', 'pending', 0, 0), ('l2', 'sessions/l2', 'pending', 0, 0)"),
                 0);
    char err[256];
    int seen = 0;
    CHECK_EQ_INT(backup_check(lg->target, 1, keep_problem, &seen, err, sizeof err), 3);
    CHECK_EQ_INT(seen, 2);      /* one of each rule */
    CHECK_EQ_INT(exec_sql("UPDATE streams SET forks = 1 WHERE deleted = 1;"
                          " DELETE FROM sessions WHERE id IN ('l1', 'l2')"),
                 0);
    CHECK(sound());
}

/* No dstream database there: a database without the log's tables, or none. */
static void test_no_database(void)
{
    char err[512], target[512];
    int seen = 0;
    CHECK_EQ_INT(exec_sql("DROP DATABASE IF EXISTS t_pg_backup_empty"), 0);
    CHECK_EQ_INT(exec_sql("CREATE DATABASE t_pg_backup_empty"), 0);
    /* The same server, the other database (the URI's path is its name). */
    const char *q = strchr(lg->target, '?');
    snprintf(target, sizeof target, "postgresql:///t_pg_backup_empty%s", q ? q : "");
    CHECK_EQ_INT(backup_check(target, 10, keep_problem, &seen, err, sizeof err), BACKUP_ENODB);
    CHECK(strstr(err, "no dstream database") != NULL);
    snprintf(target, sizeof target, "postgresql:///t_pg_backup_nothing%s", q ? q : "");
    CHECK_EQ_INT(backup_check(target, 10, keep_problem, &seen, err, sizeof err), BACKUP_ENODB);
    CHECK_EQ_INT(seen, 0);
    CHECK_EQ_INT(exec_sql("DROP DATABASE t_pg_backup_empty"), 0);
}

/* copy and restore: PostgreSQL's own tools, said plainly; no file left behind. */
static void test_copy_restore(void)
{
    char err[512], dest[400];
    snprintf(dest, sizeof dest, "%s/backup.db", dir);
    CHECK_EQ_INT(backup_copy(lg->target, dest, NULL, err, sizeof err), BACKUP_EFAIL);
    CHECK(strstr(err, "pg_dump") && strstr(err, "pg_basebackup"));
    CHECK(access(dest, F_OK) != 0);
    CHECK_EQ_INT(backup_restore(lg->target, dest, err, sizeof err), BACKUP_EFAIL);
    CHECK(strstr(err, "pg_restore") != NULL);
}

/* ---- snapshots against a replay, on sessions made through lib/sstore ---------------- */

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
        sstore_event e = event_message_user(c, "queue", NULL);
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

static void test_check_snapshots(void)
{
    char err[256], got[256];
    /* a: 141 events (snapshots at 64 and 128); b forked from it at 101 (its
     * fork-point snapshot) and 71 events more (its own at 128); c forked from b, e
     * from c, then c deleted: its stream stays for e, its snapshots go. */
    CHECK_EQ_INT(session("a", NULL), 0);
    CHECK_EQ_INT(say_n("a", 100), 0);
    CHECK_EQ_INT(session("b", "a"), 0);
    CHECK_EQ_INT(say_n("a", 40), 0);
    CHECK_EQ_INT(say_n("b", 70), 0);
    CHECK_EQ_INT(session("c", "b"), 0);
    CHECK_EQ_INT(say_n("c", 3), 0);
    CHECK_EQ_INT(session("e", "c"), 0);
    CHECK_EQ_INT(say_n("e", 2), 0);
    CHECK_EQ_INT(sstore_delete(conn, "c"), 0);
    PGresult *r = PQexec(pgc(conn)->pg, "SELECT string_agg(session || ':' || seq, ' ' ORDER BY session, seq)"
                                        " FROM snapshots");
    snprintf(got, sizeof got, "%s", PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : "?");
    PQclear(r);
    CHECK_EQ_STR(got, "a:64 a:128 b:101 b:128 e:176");
    CHECK(sound());

    /* Each altered snapshot is named; a fork's altered fork point is found in its
     * parent's replay (and its own replay, which starts there, may differ on). */
    static const struct {
        const char *session;
        int seq;
        const char *alter, *named;
        int problems;
    } cases[] = {
        {"a", 128, "jsonb_set(view::jsonb, '{eventCount}', '7')", "session=a seq=128 key=eventCount", 1},
        {"a", 64, "jsonb_set(view::jsonb, '{created,input,topic}', '\"bats\"')",
         "session=a seq=64 key=created.input.topic", 1},
        {"a", 64, "view::jsonb #- '{messages,5}'", "session=a seq=64 key=messages[5]", 1},
        {"b", 128, "jsonb_set(view::jsonb, '{status}', '\"failed\"')", "session=b seq=128 key=status", 1},
        {"b", 101, "jsonb_set(view::jsonb, '{queued,0}', '\"x\"')",
         "session=b seq=101 fork point, replayed in sessions/a key=queued[0]", 2},
        {"e", 176, "'not a view'", "session=e seq=176 key=(its fork-point snapshot, missing or not a view)", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sql[512];
        snprintf(sql, sizeof sql, "CREATE TEMP TABLE kept AS SELECT view FROM snapshots WHERE session = '%s' AND seq = %d;"
                 " UPDATE snapshots SET view = %s WHERE session = '%s' AND seq = %d",
                 cases[i].session, cases[i].seq, cases[i].alter, cases[i].session, cases[i].seq);
        CHECK_EQ_INT(exec_sql(sql), 0);
        int seen = 0;
        seen_problems[0] = '\0';
        CHECK_EQ_INT(backup_check(lg->target, 10, keep_problem, &seen, err, sizeof err), cases[i].problems);
        CHECK_EQ_INT(seen, cases[i].problems);
        if (!CHECK(strstr(seen_problems, cases[i].named) != NULL))
            fprintf(stderr, "  wanted %s in: %s\n", cases[i].named, seen_problems);
        snprintf(sql, sizeof sql, "UPDATE snapshots SET view = (SELECT view FROM kept) WHERE session = '%s' AND seq = %d;"
                 " DROP TABLE kept", cases[i].session, cases[i].seq);
        CHECK_EQ_INT(exec_sql(sql), 0);
        CHECK(sound());
    }
    /* Reports stop at the limit; every problem is counted (a:64, a:128, b's fork
     * point; b:128 agrees with a replay from b's altered fork point, e's cannot be
     * replayed). */
    CHECK_EQ_INT(exec_sql("UPDATE snapshots SET view = jsonb_set(view::jsonb, '{steps}', '99')"
                          " WHERE view LIKE '{%'"), 0);
    int seen = 0;
    CHECK_EQ_INT(backup_check(lg->target, 2, keep_problem, &seen, err, sizeof err), 3);
    CHECK_EQ_INT(seen, 2);
}

int main(void)
{
    if (!test_db_engine(1)) {
        printf("test_pg_backup: DSTREAM_TEST_PG is not set: nothing to run\n");
        return TEST_MAIN_END();
    }
    if (test_db_open("pg_backup", dir, sizeof dir, &lg, &conn) == 0) {
        test_check_finds();
        test_no_database();
        test_copy_restore();
    }
    test_db_close(dir, lg, conn);
    /* A database of its own: sessions made through lib/sstore. */
    if (test_db_open("pg_backup_snapshots", dir, sizeof dir, &lg, &conn) == 0) test_check_snapshots();
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

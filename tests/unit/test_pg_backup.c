/* Unit tests for the PostgreSQL engine's backups (lib/store/pg/pg_backup.c, through
 * lib/backup.c): the check of a database in place names each invariant broken by
 * hand in the rows (test_sqlite_backup's cases, in PostgreSQL's SQL) and a session's
 * snapshot that differs from a replay of its stream (the walk hands the stream's
 * messages and snapshots up); a database without the log's tables, or none at all,
 * is no database; copy and restore say to use PostgreSQL's own tools and leave
 * nothing behind. Runs only when DSTREAM_TEST_PG names a cluster (tests/pg.sh). */
#include "backup.h"

#include <string.h>
#include <unistd.h>

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
    return TEST_MAIN_END();
}

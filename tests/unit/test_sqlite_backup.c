/* Unit tests for the SQLite engine's backups (lib/store/sqlite/sq_backup.c, through
 * lib/backup.c): a backup is one self-contained file (no -wal beside it); the
 * check names each invariant broken by hand in the rows; a snapshot altered by
 * hand (a session's own, or a fork's at its fork point, or its text cut at a NUL)
 * is named with the key that differs. The engine-neutral half: test_backup.c. */
#include "backup.h"

#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

#include "event.h"
#include "sstore.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

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

static int append(log_conn_t *c, const char *path, const char *text)
{
    log_msg m = {text, strlen(text)};
    log_append_req a;
    memset(&a, 0, sizeof a);
    a.path = path;
    a.msgs = &m;
    a.nmsgs = 1;
    return log_append(c, &a);
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

static sqlite3 *open_plain(const char *path)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sqlite3_close_v2(db);
        return NULL;
    }
    return db;
}

/* Streams w0, w1 and w2 of 5 messages each (the cases below break them). */
static void test_backup_file(void)
{
    char path[32], msg[64], db[400], dest[400], err[256];
    for (int w = 0; w < 3; w++) {
        snprintf(path, sizeof path, "w%d", w);
        CHECK_EQ_INT(create(path, NULL, -1), 0);
        for (int i = 0; i < 5; i++) {
            snprintf(msg, sizeof msg, "writer %d message %d", w, i);
            CHECK_EQ_INT(append(conn, path, msg), 0);
        }
    }
    snprintf(db, sizeof db, "%s/test.db", dir);
    snprintf(dest, sizeof dest, "%s/backup.db", dir);
    backup_info bi;
    if (!CHECK_EQ_INT(backup_copy(db, dest, &bi, err, sizeof err), 0)) fprintf(stderr, "  %s\n", err);
    CHECK_EQ_INT(bi.streams, 3);
    CHECK_EQ_INT(bi.messages, 15);
    CHECK(bi.pages > 0);
    CHECK(bi.rev > 0);
    /* Self-contained: no -wal beside it, and the journal mode is not WAL. */
    char wal[420];
    snprintf(wal, sizeof wal, "%s-wal", dest);
    CHECK(access(wal, F_OK) != 0);
    sqlite3 *b = open_plain(dest);
    if (!CHECK(b != NULL)) return;
    sqlite3_stmt *st;
    CHECK_EQ_INT(sqlite3_prepare_v2(b, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_step(st), SQLITE_ROW);
    CHECK_EQ_STR((const char *)sqlite3_column_text(st, 0), "delete");
    sqlite3_finalize(st);
    sqlite3_close_v2(b);
    CHECK_EQ_INT(problems(dest), 0);
}

static void test_check_finds(void)
{
    char path[400];
    /* Forks, a soft-deleted parent, a deleted stream: all sound. */
    CHECK_EQ_INT(create("p", NULL, -1), 0);
    CHECK_EQ_INT(append(conn, "p", "one"), 0);
    CHECK_EQ_INT(append(conn, "p", "two!"), 0);
    CHECK_EQ_INT(create_at("f", "p", 1, 3), 0);     /* after "one" */
    CHECK_EQ_INT(append(conn, "f", "three"), 0);
    CHECK_EQ_INT(log_delete(conn, "p"), 0);
    CHECK_EQ_INT(create("gone", NULL, -1), 0);
    CHECK_EQ_INT(log_delete(conn, "gone"), 0);
    snprintf(path, sizeof path, "%s/test.db", dir);
    sqlite3 *db = open_plain(path);
    if (!CHECK(db != NULL)) return;
    sqlite3_busy_timeout(db, 5000);
    CHECK_EQ_INT(problems(path), 0);

    /* Each broken invariant is found, and undone. */
    static const struct {
        const char *breaks, *repairs;
    } cases[] = {
        {"UPDATE messages SET pos = pos + 1 WHERE seq = 1 AND stream = (SELECT id FROM streams WHERE path = 'f')",
         "UPDATE messages SET pos = pos - 1 WHERE seq = 1 AND stream = (SELECT id FROM streams WHERE path = 'f')"},
        {"UPDATE streams SET tail_seq = tail_seq + 1 WHERE path = 'w0'",
         "UPDATE streams SET tail_seq = tail_seq - 1 WHERE path = 'w0'"},
        {"UPDATE streams SET tail_pos = tail_pos + 7 WHERE path = 'w1'",
         "UPDATE streams SET tail_pos = tail_pos - 7 WHERE path = 'w1'"},
        {"UPDATE messages SET seq = seq + 100000 WHERE seq = 3 AND stream = (SELECT id FROM streams WHERE path = 'w2')",
         "UPDATE messages SET seq = seq - 100000 WHERE seq = 100003 AND stream = (SELECT id FROM streams WHERE path = 'w2')"},
        {"UPDATE streams SET parent = 99999 WHERE path = 'f'",
         "UPDATE streams SET parent = (SELECT id FROM streams WHERE deleted = 1) WHERE path = 'f'"},
        {"UPDATE streams SET forks = 0 WHERE deleted = 1",
         "UPDATE streams SET forks = 1 WHERE deleted = 1"},
        {"INSERT INTO messages (stream, seq, pos, rec, data) VALUES (88888, 0, 0, 0, x'00')",
         "DELETE FROM messages WHERE stream = 88888"},
        {"INSERT INTO sessions (id, stream, status, created_ms, updated_ms) VALUES ('lost', 'sessions/lost', 'pending', 0, 0)",
         "DELETE FROM sessions WHERE id = 'lost'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(sqlite3_exec(db, cases[i].breaks, NULL, NULL, NULL), SQLITE_OK);
        int n = problems(path);
        if (!CHECK(n >= 1)) fprintf(stderr, "  not found: %s\n", cases[i].breaks);
        CHECK_EQ_INT(sqlite3_exec(db, cases[i].repairs, NULL, NULL, NULL), SQLITE_OK);
        CHECK_EQ_INT(problems(path), 0);
    }
    sqlite3_close_v2(db);
    /* (A file that is not a database: test_backup.c.) */
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

static char seen_problems[4096];

/* Every problem reported, one a line, into seen_problems. */
static void keep_problem(void *ud, const char *problem)
{
    (*(int *)ud)++;
    size_t len = strlen(seen_problems);
    snprintf(seen_problems + len, sizeof seen_problems - len, "%s\n", problem);
}

static void test_check_snapshots(void)
{
    char path[400], err[256];
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
    snprintf(path, sizeof path, "%s/test.db", dir);
    sqlite3 *db = open_plain(path);
    if (!CHECK(db != NULL)) return;
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt *st;
    CHECK_EQ_INT(sqlite3_prepare_v2(db, "SELECT group_concat(session || ':' || seq, ' ') FROM"
                                        " (SELECT * FROM snapshots ORDER BY session, seq)", -1, &st, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_step(st), SQLITE_ROW);
    CHECK_EQ_STR((const char *)sqlite3_column_text(st, 0), "a:64 a:128 b:101 b:128 e:176");
    sqlite3_finalize(st);
    CHECK_EQ_INT(problems(path), 0);

    /* Each altered snapshot is named; a fork's altered fork point is found in its
     * parent's replay (and its own replay, which starts there, may differ on). */
    static const struct {
        const char *session;
        int seq;
        const char *alter, *named;
        int problems;
    } cases[] = {
        {"a", 128, "json_set(view, '$.eventCount', 7)", "session=a seq=128 key=eventCount", 1},
        {"a", 64, "json_set(view, '$.created.input.topic', 'bats')", "session=a seq=64 key=created.input.topic", 1},
        {"a", 64, "json_remove(view, '$.messages[5]')", "session=a seq=64 key=messages[5]", 1},
        {"b", 128, "json_set(view, '$.status', 'failed')", "session=b seq=128 key=status", 1},
        {"b", 128, "json_set(view, '$.messages[3].extra', 1)", "session=b seq=128 key=messages[3].extra", 1},
        {"b", 101, "json_set(view, '$.queued[0]', 'x')",
         "session=b seq=101 fork point, replayed in sessions/a key=queued[0]", 2},
        /* e's parent c was deleted: its fork point cannot be replayed, but e's own
         * replay needs it whole. */
        {"e", 176, "'not a view'", "session=e seq=176 key=(its fork-point snapshot, missing or not a view)", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sql[512];
        snprintf(sql, sizeof sql, "CREATE TEMP TABLE kept AS SELECT view FROM snapshots WHERE session = '%s' AND seq = %d;"
                 " UPDATE snapshots SET view = %s WHERE session = '%s' AND seq = %d",
                 cases[i].session, cases[i].seq, cases[i].alter, cases[i].session, cases[i].seq);
        CHECK_EQ_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
        int seen = 0;
        seen_problems[0] = '\0';
        CHECK_EQ_INT(backup_check(path, 10, keep_problem, &seen, err, sizeof err), cases[i].problems);
        CHECK_EQ_INT(seen, cases[i].problems);
        if (!CHECK(strstr(seen_problems, cases[i].named) != NULL))
            fprintf(stderr, "  wanted %s in: %s\n", cases[i].named, seen_problems);
        snprintf(sql, sizeof sql, "UPDATE snapshots SET view = (SELECT view FROM kept) WHERE session = '%s' AND seq = %d;"
                 " DROP TABLE kept", cases[i].session, cases[i].seq);
        CHECK_EQ_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
        CHECK_EQ_INT(problems(path), 0);
    }
    /* Snapshots written before the cost split have neither cost nor playedRequest:
     * not a difference. An altered cost is. */
    CHECK_EQ_INT(sqlite3_exec(db, "CREATE TEMP TABLE kept AS SELECT * FROM snapshots;"
                                  " UPDATE snapshots SET view = json_remove(view, '$.cost', '$.playedRequest')",
                              NULL, NULL, NULL), SQLITE_OK);
    CHECK_EQ_INT(problems(path), 0);
    CHECK_EQ_INT(sqlite3_exec(db, "UPDATE snapshots SET view = json_set(view, '$.cost', json('{\"spentUsd\": 1}'))"
                                  " WHERE session = 'a' AND seq = 128", NULL, NULL, NULL), SQLITE_OK);
    CHECK_EQ_INT(problems(path), 1);
    CHECK_EQ_INT(sqlite3_exec(db, "DELETE FROM snapshots; INSERT INTO snapshots SELECT * FROM kept; DROP TABLE kept",
                              NULL, NULL, NULL), SQLITE_OK);
    CHECK_EQ_INT(problems(path), 0);
    /* A live fork without its fork-point snapshot cannot be replayed: said so. */
    CHECK_EQ_INT(sqlite3_exec(db, "CREATE TEMP TABLE kept AS SELECT * FROM snapshots WHERE session = 'b' AND seq = 101;"
                                  " DELETE FROM snapshots WHERE session = 'b' AND seq = 101", NULL, NULL, NULL),
                 SQLITE_OK);
    int seen = 0;
    seen_problems[0] = '\0';
    CHECK_EQ_INT(backup_check(path, 10, keep_problem, &seen, err, sizeof err), 1);
    CHECK(strstr(seen_problems, "session=b seq=101 key=(its fork-point snapshot, missing or not a view)") != NULL);
    CHECK_EQ_INT(sqlite3_exec(db, "INSERT INTO snapshots SELECT * FROM kept; DROP TABLE kept", NULL, NULL, NULL),
                 SQLITE_OK);
    /* Reports stop at the limit; every problem is counted (a:64, a:128, b's fork
     * point; b:128 agrees with a replay from b's altered fork point, e's cannot be
     * replayed). */
    CHECK_EQ_INT(sqlite3_exec(db, "UPDATE snapshots SET view = json_set(view, '$.steps', 99)", NULL, NULL, NULL),
                 SQLITE_OK);
    seen = 0;
    CHECK_EQ_INT(backup_check(path, 2, keep_problem, &seen, err, sizeof err), 3);
    CHECK_EQ_INT(seen, 2);
    sqlite3_close_v2(db);
}

/* Text holding NULs (JSON's \u0000), as a model may send: the snapshots of such a
 * session agree with its replay (they were "not JSON" to the check), and a snapshot
 * whose text was cut at the NUL (what a strlen on the way made of it) is named. */
static void test_check_snapshots_nul(void)
{
    char path[400], err[256];
    /* A database of its own: the test above leaves altered snapshots behind. */
    test_db_close(dir, lg, conn);
    dir[0] = '\0';
    if (test_db_open("test", dir, sizeof dir, &lg, &conn)) return;
    CHECK_EQ_INT(session("z", NULL), 0);
    session_trace t;
    session_trace_new(&t);
    for (int i = 0; i < 70; i++) {
        json_t *c = json_stringn("z\0says", 6);
        sstore_event e = event_message_user(c, "queue", NULL);
        json_decref(c);
        CHECK_EQ_INT(sstore_command(conn, "z", &t, say, &e, NULL), 0);
        json_decref(e.payload);
    }
    snprintf(path, sizeof path, "%s/test.db", dir);
    sqlite3 *db = open_plain(path);
    if (!CHECK(db != NULL)) return;
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt *st;
    CHECK_EQ_INT(sqlite3_prepare_v2(db, "SELECT count(*) FROM snapshots WHERE session = 'z' AND instr(view, '\\u0000') > 0",
                                    -1, &st, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_step(st), SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    CHECK_EQ_INT(problems(path), 0);
    CHECK_EQ_INT(sqlite3_exec(db, "UPDATE snapshots SET view = replace(view, '\"z\\u0000says\"', '\"z\"')"
                                  " WHERE session = 'z'", NULL, NULL, NULL),
                 SQLITE_OK);
    int seen = 0;
    seen_problems[0] = '\0';
    CHECK_EQ_INT(backup_check(path, 10, keep_problem, &seen, err, sizeof err), 1);
    if (!CHECK(strstr(seen_problems, "session=z seq=64 key=messages[0].content") != NULL))
        fprintf(stderr, "  got: %s\n", seen_problems);
    sqlite3_close_v2(db);
}

int main(void)
{
    if (test_db_open("test", dir, sizeof dir, &lg, &conn) == 0) {
        test_backup_file();
        test_check_finds();
        test_check_snapshots();
        test_check_snapshots_nul();
    }
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

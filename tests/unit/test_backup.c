/* Unit tests for lib/backup.c, through the engine's typed operations only: a
 * backup taken while writer threads keep appending opens, passes the integrity
 * check and the invariants, and holds every append that was acknowledged before it
 * started (and nothing torn); the check is clean on a database with forks and
 * deletions, and every session snapshot equals a replay of the session's events
 * (text with NULs too); a target with no database is said so. The checks that
 * break rows by hand are the engine's: test_sqlite_backup.c. */
#include "backup.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "timefmt.h"
#include "event.h"
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

static void *writer(void *arg)
{
    int w = (int)(intptr_t)arg;
    char err[256], path[32], msg[64];
    log_conn_t *c = log_conn_open(lg, err, sizeof err);
    if (!c) return NULL;
    snprintf(path, sizeof path, "w%d", w);
    for (int i = 0; i < APPENDS && !atomic_load(&stop); i++) {
        snprintf(msg, sizeof msg, "writer %d message %d", w, i);
        if (append(c, path, msg)) break;
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
    char err[256], db[400];
    snprintf(db, sizeof db, "%s/test.db", dir);
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
    log_opts o = {0, 5000, 0};
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
 * nothing is created. */
static void test_no_database(void)
{
    char target[400], dest[400], err[256];
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

static void test_check_sound(void)
{
    char path[400], err[256];
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
    CHECK_EQ_INT(problems(path), 0);
    /* (Each broken invariant found: test_sqlite_backup.c breaks them by hand.) */

    /* A file that is not a database: the check cannot run. */
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
    char path[400];
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
    CHECK_EQ_INT(problems(path), 0);
    /* (Each altered snapshot named: test_sqlite_backup.c alters them by hand.) */
}

/* Text holding NULs (JSON's \u0000), as a model may send: the snapshots of such a
 * session agree with its replay (they were "not JSON" to the check). */
static void test_check_snapshots_nul(void)
{
    char path[400];
    /* A database of its own. */
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
    CHECK_EQ_INT(problems(path), 0);
    /* (A snapshot cut at the NUL named: test_sqlite_backup.c.) */
}

int main(void)
{
    if (test_db_open("test", dir, sizeof dir, &lg, &conn) == 0) {
        test_backup_under_load();
        test_no_database();
        test_check_sound();
        test_check_snapshots();
        test_check_snapshots_nul();
    }
    test_db_close(dir, lg, conn);
    return TEST_MAIN_END();
}

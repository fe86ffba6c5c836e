/* Helper for the unit tests that need a database: a fresh one, opened through
 * lib/log with a connection for the calling thread, on each engine in turn.
 *
 * The engines: a test's body runs on SQLite (a file in a temporary directory),
 * then again on PostgreSQL when DSTREAM_TEST_PG names a cluster (the URI that
 * `tests/pg.sh start DIR` prints): each run gets a database of its own there,
 * made with psql and dropped at the end.
 *
 *     for (int e = 0; test_db_engine(e); e++) {
 *         if (test_db_open("name", dir, sizeof dir, &lg, &conn) == 0) ...;
 *         test_db_close(dir, lg, conn);
 *     }
 *
 * Nothing here includes an engine's header: a check that looks at or changes the
 * rows by hand runs its SQL with test_db_sql, through the engine's command-line
 * program (SQLite's or psql), as another process. */
#ifndef DSTREAM_TEST_DB_H
#define DSTREAM_TEST_DB_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "test.h"

/* The state of the current run (one per test binary). */
typedef struct test_db_state {
    int pg;                     /* the current run is PostgreSQL's */
    char name[64];              /* its database */
    char uri[1024];             /* and the URI of that database (on SQLite: its file) */
} test_db_state;

static inline test_db_state *test_db_st(void)
{
    static test_db_state st;
    return &st;
}

static inline const char *test_db_pg_cluster(void)
{
    const char *u = getenv("DSTREAM_TEST_PG");
    return u && u[0] ? u : NULL;
}

/* Run e of a test's body: 0 SQLite, 1 PostgreSQL (only when DSTREAM_TEST_PG is
 * set). Returns 1 when run e exists (and says which engine it is), else 0. */
static inline int test_db_engine(int e)
{
    test_db_st()->pg = e == 1;
    if (e == 0) return 1;
    if (e == 1 && test_db_pg_cluster()) {
        printf("-- again on PostgreSQL (DSTREAM_TEST_PG)\n");
        fflush(stdout);
        return 1;
    }
    test_db_st()->pg = 0;
    return 0;
}

/* Whether the current run is PostgreSQL's. */
static inline int test_db_is_pg(void)
{
    return test_db_st()->pg;
}

/* Run the command-line program argv[0] (found on PATH) with argv; its standard
 * output into out (if not NULL, cut at cap, the last newline dropped). Returns 0
 * when it exited with status 0, else -1. */
static inline int test_run_tool(const char *const *argv, char *out, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        setenv("PGOPTIONS", "-c client_min_messages=warning", 1);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    char buf[4096];
    ssize_t got;
    while ((got = read(fds[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < got && out && len + 1 < cap; i++) out[len++] = buf[i];
    }
    close(fds[0]);
    if (out && cap) {
        if (len > 0 && out[len - 1] == '\n') len--;
        out[len] = '\0';
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Run psql on uri with the statements of sql (each its own -c, so that CREATE
 * DATABASE is outside a transaction); its output, unaligned and without headers,
 * into out as test_run_tool's. Returns 0 when psql succeeded. */
static inline int test_psql(const char *uri, const char *const *sql, int nsql, char *out, size_t cap)
{
    const char *argv[32];
    int n = 0;
    if (nsql > 8) return -1;
    argv[n++] = "psql";
    argv[n++] = "-X";
    argv[n++] = "-q";
    argv[n++] = "-A";
    argv[n++] = "-t";
    argv[n++] = "-v";
    argv[n++] = "ON_ERROR_STOP=1";
    argv[n++] = "-d";
    argv[n++] = uri;
    for (int i = 0; i < nsql; i++) {
        argv[n++] = "-c";
        argv[n++] = sql[i];
    }
    argv[n] = NULL;
    return test_run_tool(argv, out, cap);
}

/* Run sql (one statement) on the current run's PostgreSQL database; out as
 * test_psql's. Returns 0 or -1. */
static inline int test_db_psql(const char *sql, char *out, size_t cap)
{
    const char *one[1] = {sql};
    return test_psql(test_db_st()->uri, one, 1, out, cap);
}

/* SQLite's command-line program (a separate process, as psql is for PostgreSQL:
 * no test links or includes SQLite's library for this). */
#define TEST_DB_SQLITE_CLI "sqlite3"

/* Run sql (one or more statements, ';' between them) on the current run's database
 * (its file, or PostgreSQL's database) through the engine's command-line program,
 * SQLite's or psql, as another process would: all of it or none (one transaction),
 * waiting up to 5 s for the test's own writes. Its output into out as
 * test_run_tool's: the rows one a line, columns split by '|', no headers, NULL as
 * "(null)". For the checks that look at or break an engine's rows by hand, in SQL
 * that both engines read (or chosen with test_db_is_pg), without an engine's
 * header. Returns 0, or -1 with the statement printed. */
static inline int test_db_sql(const char *sql, char *out, size_t cap)
{
    test_db_state *st = test_db_st();
    char body[8192];
    int n = snprintf(body, sizeof body, "%s; %s; COMMIT;", st->pg ? "BEGIN" : "BEGIN IMMEDIATE", sql);
    int rc = -1;
    if (n < 0 || (size_t)n >= sizeof body) {
        if (out && cap) out[0] = '\0';
    } else if (st->pg) {
        const char *argv[] = {"psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-P", "null=(null)",
                              "-d", st->uri, "-c", body, NULL};
        rc = test_run_tool(argv, out, cap);
    } else {
        const char *argv[] = {TEST_DB_SQLITE_CLI, "-batch", "-bail", "-noheader", "-list", "-nullvalue", "(null)",
                              "-cmd", ".timeout 5000", st->uri, body, NULL};
        rc = test_run_tool(argv, out, cap);
    }
    if (rc) fprintf(stderr, "  test_db_sql failed: %s\n", sql);
    return rc;
}

/* sql with each '?' replaced by arg as an SQL string literal (quotes doubled), into
 * out; the result, or "" when it does not fit. For test_db_sql's callers that look
 * a row up by a name. */
static inline const char *test_db_bind(const char *sql, const char *arg, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = sql; *p; p++) {
        if (*p != '?') {
            if (n + 1 >= cap) goto full;
            out[n++] = *p;
            continue;
        }
        if (n + 1 >= cap) goto full;
        out[n++] = '\'';
        for (const char *a = arg; *a; a++) {
            if (n + 2 >= cap) goto full;
            if (*a == '\'') out[n++] = '\'';
            out[n++] = *a;
        }
        if (n + 1 >= cap) goto full;
        out[n++] = '\'';
    }
    out[n] = '\0';
    return out;
full:
    if (cap) out[0] = '\0';
    return out;
}

/* The first column of test_db_sql(sql)'s first row as an integer: -1 when there is
 * no row, -2 when it is NULL, -3 when the statement failed. */
static inline int64_t test_db_int(const char *sql)
{
    char out[256];
    if (test_db_sql(sql, out, sizeof out)) return -3;
    if (!out[0]) return -1;
    out[strcspn(out, "|\n")] = '\0';
    if (!strcmp(out, "(null)")) return -2;
    return strtoll(out, NULL, 10);
}

/* The same as text, into out: "" when there is no row, when it is NULL, or when the
 * statement failed. */
static inline const char *test_db_str(const char *sql, char *out, size_t cap)
{
    if (test_db_sql(sql, out, cap)) return out;
    out[strcspn(out, "|\n")] = '\0';
    if (!strcmp(out, "(null)")) out[0] = '\0';
    return out;
}

/* The cluster's URI with database name instead of its own into out. Returns 0,
 * or -1 when it is not a URI of the form postgresql://[...]/db[?...]. */
static inline int test_db_pg_uri(const char *cluster, const char *name, char *out, size_t cap)
{
    const char *s = strstr(cluster, "://");
    if (!s) return -1;
    const char *slash = strchr(s + 3, '/');
    if (!slash) return -1;
    const char *rest = slash + 1 + strcspn(slash + 1, "?");
    int n = snprintf(out, cap, "%.*s/%s%s", (int)(slash - cluster), cluster, name, rest);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* Make dir (test_mkdtemp with name) and the database of the current run: its
 * target (the file dir/name.db, or the URI of a fresh PostgreSQL database) into
 * target. Returns 0, or -1 with the reason printed. */
static inline int test_db_target(const char *name, char *dir, size_t dircap, char *target, size_t cap)
{
    test_db_state *st = test_db_st();
    if (!CHECK(test_mkdtemp(dir, dircap, name) == 0)) return -1;
    if (!st->pg) {
        snprintf(st->uri, sizeof st->uri, "%s/%s.db", dir, name);
        snprintf(target, cap, "%s", st->uri);
        return 0;
    }
    /* t_<name>_<pid>: a-z, 0-9 and _ */
    size_t n = (size_t)snprintf(st->name, sizeof st->name, "t_");
    for (const char *p = name; *p && n + 12 < sizeof st->name; p++)
        st->name[n++] = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
    snprintf(st->name + n, sizeof st->name - n, "_%ld", (long)getpid());
    char drop[1200], create[1200];
    snprintf(drop, sizeof drop, "DROP DATABASE IF EXISTS %s WITH (FORCE)", st->name);
    snprintf(create, sizeof create, "CREATE DATABASE %s", st->name);
    const char *sql[2] = {drop, create};
    if (!CHECK(test_psql(test_db_pg_cluster(), sql, 2, NULL, 0) == 0) ||
        !CHECK(test_db_pg_uri(test_db_pg_cluster(), st->name, st->uri, sizeof st->uri) == 0)) {
        fprintf(stderr, "  cannot make a database on %s\n", test_db_pg_cluster());
        st->name[0] = '\0';
        return -1;
    }
    snprintf(target, cap, "%s", st->uri);
    return 0;
}

/* Make the database of the current run (test_db_target), open it as *lg with
 * connection *conn. Returns 0; or -1 with the reason printed (whatever was
 * opened is in *lg and *conn, for test_db_close). */
static inline int test_db_open(const char *name, char *dir, size_t dircap, log_t **lg,
                               log_conn_t **conn)
{
    char path[1100], err[256] = "";
    *lg = NULL;
    *conn = NULL;
    if (test_db_target(name, dir, dircap, path, sizeof path)) return -1;
    log_opts o = {0, 5000, 1, 0, 0};
    *lg = log_open(path, &o, err, sizeof err);
    *conn = *lg ? log_conn_open(*lg, err, sizeof err) : NULL;
    if (!CHECK(*conn != NULL)) {
        fprintf(stderr, "  %s\n", err);
        return -1;
    }
    return 0;
}

/* Make the text stream path on c (no TTL, no expiry): log_create's result. */
static inline int test_db_create(log_conn_t *c, const char *path)
{
    log_create_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.content_type = "text/plain";
    r.ttl_s = r.expires_ms = -1;
    return log_create(c, &r);
}

/* Read path on c from (kind, from), at most max_bytes, each message to fn: log_read's
 * result, its request in *r. */
static inline int test_db_read(log_conn_t *c, log_read_req *r, const char *path, offset_kind kind, offset_t from,
                               size_t max_bytes, log_msg_fn fn, void *ud)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->kind = kind;
    r->from = from;
    r->max_bytes = max_bytes;
    return log_read(c, r, fn, ud);
}

/* Make path on c a fork of from at offset at: log_create's result. */
static inline int test_db_fork(log_conn_t *c, const char *path, const char *from, offset_t at)
{
    log_create_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.ttl_s = r.expires_ms = -1;
    r.fork_from = from;
    r.fork_has_offset = 1;
    r.fork_offset = at;
    return log_create(c, &r);
}

/* Append msg to path on c, one message: log_append's result. */
static inline int test_db_append(log_conn_t *c, const char *path, const char *msg)
{
    log_msg m = {msg, strlen(msg)};
    log_append_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.msgs = &m;
    r.nmsgs = 1;
    return log_append(c, &r);
}

/* Append the JSON message data to path on c, or make path (a JSON stream, no TTL)
 * with it when there is none; the creation checked. */
static inline void test_db_append_json(log_conn_t *c, const char *path, const char *data)
{
    log_msg m = {data, strlen(data)};
    log_append_req a = {.path = path, .msgs = &m, .nmsgs = 1};
    if (log_append(c, &a) == LOG_ENOTFOUND) {
        log_create_req r = {.path = path, .content_type = "application/json", .ttl_s = -1, .expires_ms = -1,
                            .msgs = &m, .nmsgs = 1};
        CHECK_EQ_INT(log_create(c, &r), 0);
    }
}

/* Drop the current run's PostgreSQL database, if it made one (after its
 * connections are closed). */
static inline void test_db_drop(void)
{
    test_db_state *st = test_db_st();
    if (!st->pg || !st->name[0]) return;
    char drop[1200];
    snprintf(drop, sizeof drop, "DROP DATABASE IF EXISTS %s WITH (FORCE)", st->name);
    const char *sql[1] = {drop};
    CHECK(test_psql(test_db_pg_cluster(), sql, 1, NULL, 0) == 0);
    st->name[0] = '\0';
}

/* Close what test_db_open opened, remove the directory and the run's database. */
static inline void test_db_close(char *dir, log_t *lg, log_conn_t *conn)
{
    log_conn_close(conn);
    log_close(lg);
    if (dir[0]) test_rmtree(dir);
    dir[0] = '\0';
    test_db_drop();
}

#endif

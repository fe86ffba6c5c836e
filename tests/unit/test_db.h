/* Helper for the unit tests that need a database: a fresh one in a temporary
 * directory, opened through lib/log with a connection for the calling thread.
 *
 * With DSTREAM_TEST_PG set to the directory of a running tests/pg.sh cluster, the
 * fresh database is one of that cluster's instead (tests/pg.sh db DIR NAME: made
 * again for each test), so that the same test runs against the PostgreSQL engine. */
#ifndef DSTREAM_TEST_DB_H
#define DSTREAM_TEST_DB_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "test.h"

/* The cluster DSTREAM_TEST_PG names, or NULL (then the tests run on SQLite). */
static inline const char *test_pg_dir(void)
{
    const char *d = getenv("DSTREAM_TEST_PG");
    return d && *d ? d : NULL;
}

/* For the tests of the PostgreSQL engine only: 1 if there is a cluster to run on,
 * else 0 with the line that says why they are skipped. */
static inline int test_pg_target(void)
{
    if (test_pg_dir()) return 1;
    printf("skipped: DSTREAM_TEST_PG is not set (the directory of a tests/pg.sh cluster)\n");
    return 0;
}

/* The URI of a fresh database of the cluster named for name (into out); 0 or -1. */
static inline int test_pg_fresh(const char *name, char *out, size_t cap)
{
    char cmd[600], db[64];
    size_t i = 0;
    for (; name[i] && i < 40; i++)
        db[i] = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ? name[i] : '_';
    db[i] = '\0';
    snprintf(cmd, sizeof cmd, "tests/pg.sh db '%s' t_%s", test_pg_dir(), db);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    out[0] = '\0';
    if (!fgets(out, (int)cap, p)) out[0] = '\0';
    int rc = pclose(p);
    out[strcspn(out, "\n")] = '\0';
    return rc == 0 && strncmp(out, "postgresql://", 13) == 0 ? 0 : -1;
}

/* Make dir (test_mkdtemp with name), open dir/name.db as *lg with connection *conn.
 * Returns 0; or -1 with the reason printed (whatever was opened is in *lg and *conn,
 * for test_db_close). */
static inline int test_db_open(const char *name, char *dir, size_t dircap, log_t **lg,
                               log_conn_t **conn)
{
    char path[400], err[256] = "";
    *lg = NULL;
    *conn = NULL;
    if (!CHECK(test_mkdtemp(dir, dircap, name) == 0)) return -1;
    snprintf(path, sizeof path, "%s/%s.db", dir, name);
    if (test_pg_dir() && !CHECK(test_pg_fresh(name, path, sizeof path) == 0)) return -1;
    log_opts o = {0, 5000, 1};
    *lg = log_open(path, &o, err, sizeof err);
    *conn = *lg ? log_conn_open(*lg, err, sizeof err) : NULL;
    if (!CHECK(*conn != NULL)) {
        fprintf(stderr, "  %s\n", err);
        return -1;
    }
    return 0;
}

/* Close what test_db_open opened and remove the directory. */
static inline void test_db_close(const char *dir, log_t *lg, log_conn_t *conn)
{
    log_conn_close(conn);
    log_close(lg);
    if (dir[0]) test_rmtree(dir);
}

#endif

/* Helper for the unit tests that need a database: a fresh one in a temporary
 * directory, opened through lib/log with a connection for the calling thread. */
#ifndef DSTREAM_TEST_DB_H
#define DSTREAM_TEST_DB_H

#include <stdio.h>

#include "log.h"
#include "test.h"

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

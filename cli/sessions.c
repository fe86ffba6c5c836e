/* dstream sessions [--status S] [--limit N] / dstream session ID: what the runner
 * made of sessions, read from the database (on the server, no HTTP): status, the
 * request in progress, its attempts and the retries spent, when the next attempt
 * is due, and for a failed session the error that ended it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/sstore.h"
#include "../lib/timefmt.h"
#include "cli.h"

/* One line: id, status, attempts, and the error (or the request in progress). */
static void line(log_conn_t *c, const char *id, const char *status)
{
    session_view v;
    offset_t none = {0, 0};
    session_view_init(&v);
    if (sstore_view(c, id, 0, none, &v, NULL) == 0) {
        printf("%-26s %-15s attempts=%d", id, status, v.attempts);
        if (v.error[0]) printf(" error=%s", v.error);
        else if (v.request[0]) printf(" request=%s", v.request);
        printf("\n");
    }
    session_view_free(&v);
}

static int show(log_conn_t *c, const char *id)
{
    sstore_row row;
    session_view v;
    offset_t none = {0, 0}, pos;
    char at[40];
    int rc = sstore_get(c, id, &row);
    if (rc) {
        fprintf(stderr, "dstream: session %s: %s\n", id, rc == LOG_ENOTFOUND ? "no such session" : log_strerror(rc));
        return 1;
    }
    session_view_init(&v);
    if ((rc = sstore_view(c, id, 0, none, &v, &pos))) {
        fprintf(stderr, "dstream: session %s: %s\n", id, log_strerror(rc));
        session_view_free(&v);
        return 1;
    }
    printf("session   %s\n", id);
    printf("status    %s\n", session_status_name(v.status));
    if (row.agent[0]) printf("agent     %s\n", row.agent);
    if (row.workflow[0]) printf("workflow  %s (version %d)%s%s\n", row.workflow, row.wf_version, v.phase[0] ? ", phase " : "", v.phase);
    printf("events    %llu\n", (unsigned long long)v.events);
    printf("request   %s\n", v.request[0] ? v.request : "-");
    printf("attempts  %d (retries: %d after provider errors, %d after restarts)\n", v.attempts, v.failures,
           v.restarts);
    if (v.retry_at) {
        timefmt_format(v.retry_at, at, sizeof at);
        printf("retry at  %s\n", at);
    }
    printf("requests  %lld in the session\n", (long long)v.requests);
    if (v.error[0]) printf("error     %s\n", v.error);
    session_view_free(&v);
    return 0;
}

int cmd_sessions(const char *db, int argc, char **argv)
{
    const char *status = NULL, *id = NULL;
    long limit = 50;
    int one = argc > 0 && !strcmp(argv[0], "session");
    for (int i = 1; i < argc; i++) {
        if (!one && !strcmp(argv[i], "--status") && i + 1 < argc) {
            status = argv[++i];
        } else if (!one && !strcmp(argv[i], "--limit") && i + 1 < argc) {
            char *end;
            errno = 0;
            limit = strtol(argv[++i], &end, 10);
            if (errno || *end || limit < 1 || limit > 1000) {
                fprintf(stderr, "dstream: --limit must be 1 to 1000\n");
                return 2;
            }
        } else if (one && !id) {
            id = argv[i];
        } else {
            fprintf(stderr, "usage: dstream sessions [--status S] [--limit N] | dstream session ID\n");
            return 2;
        }
    }
    if (one && (!id || !sstore_valid_id(id))) {
        fprintf(stderr, "usage: dstream session ID\n");
        return 2;
    }
    if (status && session_status_parse(status) < 0) {
        fprintf(stderr, "dstream: no status %s (pending, running, awaiting_input, completed, failed, cancelled)\n", status);
        return 2;
    }
    char err[512];
    log_t *log = log_open(db, NULL, err, sizeof err);
    log_conn_t *c = log ? log_conn_open(log, err, sizeof err) : NULL;
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        log_close(log);
        return 1;
    }
    int rc = 0;
    if (one) {
        rc = show(c, id);
    } else {
        json_t *rows = json_array(), *r;
        char next[128];
        size_t i;
        if (sstore_list(c, status, "", (int)limit, rows, next, sizeof next)) {
            fprintf(stderr, "dstream: cannot list sessions\n");
            rc = 1;
        }
        json_array_foreach(rows, i, r)
            line(c, json_string_value(json_object_get(r, "id")), json_string_value(json_object_get(r, "status")));
        json_decref(rows);
    }
    log_conn_close(c);
    log_close(log);
    return rc;
}

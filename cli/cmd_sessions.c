/* dstream sessions [--status S] [--limit N] / dstream session ID: what the runner
 * made of sessions, read from the database (on the server, no HTTP): status, the
 * request in progress, its attempts and the retries spent, when the next attempt
 * is due, and for a failed session the error that ended it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/sfilter.h"
#include "../lib/sstore.h"
#include "../lib/timefmt.h"
#include "cli.h"
#include "http.h"

/* What the runner made of a session: attempts, retries, the request in flight,
 * the retry due, the error (--json). */
static json_t *progress_json(const session_view *v)
{
    char at[40] = "";
    if (v->retry_at) timefmt_format(v->retry_at, at, sizeof at);
    return json_pack("{s:s, s:I, s:s?, s:i, s:i, s:i, s:s?, s:I, s:s?}", "status", session_status_name(v->status), "events",
                     (json_int_t)v->events, "request", v->request[0] ? v->request : NULL, "attempts", v->attempts,
                     "failures", v->failures, "restarts", v->restarts, "retryAt", at[0] ? at : NULL, "requests",
                     (json_int_t)v->requests, "error", v->error[0] ? v->error : NULL);
}

/* One line: id, status, attempts, and the error (or the request in progress). */
static void line(log_conn_t *c, json_t *r)
{
    const char *id = json_string_value(json_object_get(r, "id"));
    const char *status = json_string_value(json_object_get(r, "status"));
    session_view v;
    offset_t none = {0, 0};
    session_view_init(&v);
    if (id && sstore_view(c, id, 0, none, &v, NULL) == 0) {
        if (cli_json) {
            json_t *j = progress_json(&v);
            json_object_update_missing(j, r);
            print_json(j);
            json_decref(j);
        } else {
            printf("%-26s %-15s attempts=%d", id, status ? status : "?", v.attempts);
            if (v.error[0]) printf(" error=%s", v.error);
            else if (v.request[0]) printf(" request=%s", v.request);
            printf("\n");
        }
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
        fprintf(stderr, "dstream: session %s: %s\n", id, rc == LOG_ENOTFOUND ? "no such session" : errs_str(rc));
        return rc == LOG_ENOTFOUND ? EXIT_NOTFOUND : EXIT_FAIL;
    }
    session_view_init(&v);
    if ((rc = sstore_view(c, id, 0, none, &v, &pos))) {
        fprintf(stderr, "dstream: session %s: %s\n", id, errs_str(rc));
        session_view_free(&v);
        return 1;
    }
    if (cli_json) {
        json_t *j = progress_json(&v);
        json_object_set_new(j, "id", json_string(id));
        json_object_set_new(j, "agent", row.agent[0] ? json_string(row.agent) : json_null());
        json_object_set_new(j, "workflow", row.workflow[0] ? json_string(row.workflow) : json_null());
        json_object_set_new(j, "phase", v.phase[0] ? json_string(v.phase) : json_null());
        print_json(j);
        json_decref(j);
        session_view_free(&v);
        return 0;
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

static log_conn_t *open_db(const char *db, log_t **log)
{
    char err[512];
    *log = log_open(db, NULL, err, sizeof err);
    log_conn_t *c = *log ? log_conn_open(*log, err, sizeof err) : NULL;
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        log_close(*log);
    }
    return c;
}

int cmd_session(const char *db, int argc, char **argv)
{
    if (argc != 1 || !sstore_valid_id(argv[0])) return cli_usage("session");
    log_t *log;
    log_conn_t *c = open_db(db, &log);
    if (!c) return 1;
    int rc = show(c, argv[0]);
    log_conn_close(c);
    log_close(log);
    return rc;
}

int cmd_sessions(const char *db, int argc, char **argv)
{
    const char *status = NULL;
    long limit = 50;
    sstore_filter f;
    char err[256];
    memset(&f, 0, sizeof f);
    for (int i = argc && !strcmp(argv[0], "list") ? 1 : 0; i < argc; i++) {
        if (!strcmp(argv[i], "--status") && i + 1 < argc) {
            status = argv[++i];
        } else if (!strcmp(argv[i], "--label") && i + 1 < argc) {
            if (sfilter_add_labels(&f, argv[++i], err, sizeof err)) {
                fprintf(stderr, "dstream: --label: %s\n", err);
                return 2;
            }
        } else if (!strcmp(argv[i], "--limit") && i + 1 < argc) {
            char *end;
            errno = 0;
            limit = strtol(argv[++i], &end, 10);
            if (errno || *end || limit < 1 || limit > 1000) {
                fprintf(stderr, "dstream: --limit must be 1 to 1000\n");
                return 2;
            }
        } else {
            fprintf(stderr, "dstream: on the database, sessions takes [list] [--status S] [--label K:V] [--limit N]\n");
            return cli_usage("sessions");
        }
    }
    if (status && session_status_parse(status) < 0) {
        fprintf(stderr, "dstream: no status %s (pending, running, awaiting_input, completed, failed, cancelled)\n", status);
        return 2;
    }
    log_t *log;
    log_conn_t *c = open_db(db, &log);
    if (!c) return 1;
    int rc = 0;
    json_t *rows = json_array(), *r;
    char next[128];
    size_t i;
    if (status) snprintf(f.status, sizeof f.status, "%s", status);
    if (sstore_list(c, &f, "", (int)limit, rows, next, sizeof next)) {
        fprintf(stderr, "dstream: cannot list sessions\n");
        rc = 1;
    }
    json_array_foreach(rows, i, r) line(c, r);
    json_decref(rows);
    log_conn_close(c);
    log_close(log);
    return rc;
}

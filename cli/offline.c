/* The debug commands that read the database file instead of asking the server
 * (`dstream --db PATH events ID`): events and events --follow, convo, requests,
 * export, search, sessions show and state, lineage, diff, streams head. The events are the
 * messages of the stream sessions/ID, each given its offset as the API does; a
 * session is shown as GET /v1/sessions/ID shows it (lib/sstore). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../lib/lineage.h"
#include "../lib/log.h"
#include "../lib/session.h"
#include "../lib/sstore.h"
#include "../lib/wake.h"
#include "cli.h"
#include "http.h"

const char *cli_db;

static int add_event(void *ud, const void *data, size_t len, offset_t at)
{
    json_t *ev = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
    if (!json_is_object(ev)) {
        json_decref(ev);
        return 0;
    }
    char off[OFFSET_LEN + 1];
    offset_format(at, off);
    /* The API's order: offset first. */
    json_t *o = json_pack("{s:s}", "offset", off);
    json_object_update(o, ev);
    json_decref(ev);
    json_array_append_new(ud, o);
    return 0;
}

/* The log and a connection on cli_db, which must exist (a mistyped path is not
 * made a new database; a server's database, a URI, is found by log_open). NULL with *rc the exit code (printed). */
static log_conn_t *open_db(log_t **log, int *rc)
{
    char err[512];
    *log = NULL;
    if (!log_target_is_uri(cli_db) && access(cli_db, R_OK)) {
        fprintf(stderr, "dstream: cannot read %s\n", cli_db);
        *rc = EXIT_FAIL;
        return NULL;
    }
    *log = log_open(cli_db, NULL, err, sizeof err);
    log_conn_t *c = *log ? log_conn_open(*log, err, sizeof err) : NULL;
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        log_close(*log);
        *log = NULL;
        *rc = EXIT_FAIL;
    }
    return c;
}

/* open_db, for session id (its stream path in path). */
static log_conn_t *open_session(const char *id, char *path, size_t cap, log_t **log, int *rc)
{
    *log = NULL;
    if (!sstore_valid_id(id) || (size_t)snprintf(path, cap, "sessions/%s", id) >= cap) {
        fprintf(stderr, "dstream: no session %s\n", id);
        *rc = EXIT_NOTFOUND;
        return NULL;
    }
    return open_db(log, rc);
}

static int session_error(const char *id, int lrc)
{
    fprintf(stderr, "dstream: session %s: %s\n", id, lrc == LOG_ENOTFOUND ? "no such session" : errs_str(lrc));
    return lrc == LOG_ENOTFOUND ? EXIT_NOTFOUND : EXIT_FAIL;
}

json_t *offline_events(const char *id, char *next, size_t ncap, int *rc)
{
    char path[300];
    log_t *log;
    log_conn_t *c = open_session(id, path, sizeof path, &log, rc);
    if (!c) return NULL;
    json_t *all = json_array();
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = path;
    rr.kind = OFFSET_START;
    *rc = 0;
    for (int pages = 0; pages < 1000000; pages++) {
        rr.max_bytes = 1 << 20;
        int lrc = log_read(c, &rr, add_event, all);
        if (lrc) {
            *rc = session_error(id, lrc);
            break;
        }
        rr.kind = OFFSET_AT;
        rr.from = rr.next;
        if (rr.up_to_date || !rr.count) break;
    }
    if (next && !*rc) {
        char off[OFFSET_LEN + 1];
        offset_format(rr.next, off);
        snprintf(next, ncap, "%s", off);
    }
    log_conn_close(c);
    log_close(log);
    if (*rc) {
        json_decref(all);
        return NULL;
    }
    return all;
}

json_t *offline_session(const char *id, const char *at, int *rc)
{
    char path[300];
    log_t *log;
    log_conn_t *c = open_session(id, path, sizeof path, &log, rc);
    if (!c) return NULL;
    sstore_row row;
    session_view v;
    offset_t pos, when = {0, 0};
    offset_kind kind = OFFSET_AT;
    json_t *j = NULL;
    session_view_init(&v);
    if (at && (offset_parse(at, strlen(at), &kind, &when) || kind != OFFSET_AT)) {
        fprintf(stderr, "dstream: --at: an offset of the session's events\n");
        *rc = EXIT_USAGE;
    } else {
        int lrc = sstore_get(c, id, &row);
        if (!lrc) lrc = sstore_view(c, id, at != NULL, when, &v, &pos);
        if (lrc == LOG_ERANGE || lrc == LOG_EOFFSET) {
            /* The server's 400 bad_offset. */
            fprintf(stderr, "dstream: --at %s: %s\n", at, lrc == LOG_ERANGE ? "beyond the session's last event"
                                                                          : "not a position of this session");
            *rc = EXIT_REJECTED;
        } else if (lrc) {
            *rc = session_error(id, lrc);
        } else {
            j = sstore_session_json(&row, &v, pos);
            if (at) json_object_set_new(j, "at", json_string(at));
        }
    }
    session_view_free(&v);
    log_conn_close(c);
    log_close(log);
    return j;
}

json_t *offline_lineage(const char *id, int limit, int *rc)
{
    char path[300];
    log_t *log;
    json_t *j = NULL;
    log_conn_t *c = open_session(id, path, sizeof path, &log, rc);
    if (!c) return NULL;
    int lrc = lineage_tree(c, id, limit, NULL, NULL, &j);
    if (lrc) *rc = session_error(id, lrc);
    log_conn_close(c);
    log_close(log);
    return j;
}

/* An optional --at of diff into *at (*has: given). 0, or -1 (printed). */
static int diff_at(const char *opt, const char *s, int *has, offset_t *at)
{
    offset_kind k;
    *has = s != NULL;
    if (!s) return 0;
    if (offset_parse(s, strlen(s), &k, at) || k == OFFSET_NOW) {
        fprintf(stderr, "dstream: %s %s: -1 or an offset of the session's events\n", opt, s);
        return -1;
    }
    if (k == OFFSET_START) at->seq = at->pos = 0;
    return 0;
}

json_t *offline_diff(const char *a, const char *b, const char *at, const char *with_at, int context, int *rc)
{
    char path[300];
    log_t *log;
    json_t *j = NULL;
    lineage_diff_req q;
    memset(&q, 0, sizeof q);
    if (!sstore_valid_id(b)) {
        fprintf(stderr, "dstream: no session %s\n", b);
        *rc = EXIT_NOTFOUND;
        return NULL;
    }
    if (diff_at("--at", at, &q.has_at_a, &q.at_a) || diff_at("--with-at", with_at, &q.has_at_b, &q.at_b)) {
        *rc = EXIT_REJECTED;
        return NULL;
    }
    log_conn_t *c = open_session(a, path, sizeof path, &log, rc);
    if (!c) return NULL;
    q.a = a, q.b = b, q.context = context, q.scan = LINEAGE_SCAN_DEFAULT;
    int lrc = lineage_diff(c, &q, &j);
    if (lrc == LOG_ERANGE || lrc == LOG_EOFFSET) {
        /* The server's 400 bad_offset. */
        fprintf(stderr, "dstream: %s %s: %s\n", q.side == 'b' ? "--with-at" : "--at", q.side == 'b' ? with_at : at,
                lrc == LOG_ERANGE ? "beyond the session's last event" : "not a position of this session");
        *rc = EXIT_REJECTED;
    } else if (lrc) {
        *rc = session_error(q.side == 'b' ? b : a, lrc);
    }
    log_conn_close(c);
    log_close(log);
    return j;
}

json_t *offline_list(const char *status, const char *cursor, int limit, int *rc)
{
    char next[128] = "";
    log_t *log;
    log_conn_t *c = open_db(&log, rc);
    if (!c) return NULL;
    json_t *rows = json_array();
    json_t *j = NULL;
    sstore_filter f;
    memset(&f, 0, sizeof f);
    if (status) snprintf(f.status, sizeof f.status, "%.23s", status);
    if (status && session_status_parse(status) < 0) {
        fprintf(stderr, "dstream: no status %s\n", status);
        *rc = EXIT_USAGE;
    } else if (sstore_list(c, &f, cursor, limit, rows, next, sizeof next)) {
        fprintf(stderr, "dstream: cannot list sessions\n");
        *rc = EXIT_FAIL;
    } else {
        j = json_pack("{s:O, s:s?}", "sessions", rows, "nextCursor", next[0] ? next : NULL);
    }
    json_decref(rows);
    log_conn_close(c);
    log_close(log);
    return j;
}

int offline_head(const char *path, log_info *info)
{
    log_t *log;
    int rc;
    log_conn_t *c = open_db(&log, &rc);
    if (!c) return rc;
    int lrc = log_head(c, path, info);
    if (lrc) fprintf(stderr, "dstream: %s: %s\n", path, errs_str(lrc));
    log_conn_close(c);
    log_close(log);
    return !lrc ? 0 : lrc == LOG_ENOTFOUND || lrc == LOG_EGONE ? EXIT_NOTFOUND : EXIT_FAIL;
}

/* ---- follow ---------------------------------------------------------------------- */

volatile sig_atomic_t cli_stop;

static void on_stop(int sig)
{
    (void)sig;
    cli_stop = 1;
}

void cli_catch_stop(struct sigaction old[2])
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
}

void cli_restore_stop(const struct sigaction old[2])
{
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
}

void cli_flush_stdout(void *ud)
{
    (void)ud;
    fflush(stdout);
}

typedef struct {
    int (*cb)(void *ud, json_t *ev);
    void *ud;
} follow_ctx;

static int follow_one(void *ud, const void *data, size_t len, offset_t at)
{
    follow_ctx *f = ud;
    json_t *one = json_array();
    add_event(one, data, len, at);
    int r = json_array_size(one) ? f->cb(f->ud, json_array_get(one, 0)) : 0;
    json_decref(one);
    return r;
}

int offline_follow(const char *id, const char *from, int (*cb)(void *ud, json_t *ev), void *ud)
{
    char path[300], err[512] = "";
    log_t *log;
    int rc;
    log_conn_t *c = open_session(id, path, sizeof path, &log, &rc);
    if (!c) return rc;
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = path;
    if (offset_parse(from, strlen(from), &rr.kind, &rr.from)) {
        fprintf(stderr, "dstream: bad offset %s\n", from);
        rc = EXIT_USAGE;
    } else {
        struct sigaction old[2];
        cli_catch_stop(old);
        follow_ctx f = {cb, ud};
        int lrc = wake_follow(log, c, &rr, follow_one, cli_flush_stdout, &f, 1, &cli_stop, err, sizeof err);
        cli_restore_stop(old);
        rc = !lrc ? 0 : err[0] ? (fprintf(stderr, "dstream: cannot follow: %s\n", err), EXIT_FAIL) : session_error(id, lrc);
    }
    log_conn_close(c);
    log_close(log);
    return rc;
}

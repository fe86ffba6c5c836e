/* The debug commands that read events (events, requests, export, search one session)
 * on the database file instead of over HTTP: `dstream --db PATH events ID`. The
 * events are the messages of the stream sessions/ID, each given its offset as the
 * API does. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../lib/log.h"
#include "../lib/sstore.h"
#include "cli.h"
#include "http.h"

const char *cli_db;

static int add_event(void *ud, const void *data, size_t len, offset_t at)
{
    json_t *ev = json_loadb(data, len, 0, NULL);
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

json_t *offline_events(const char *id, char *next, size_t ncap, int *rc)
{
    char err[512], path[300];
    if (!sstore_valid_id(id) || (size_t)snprintf(path, sizeof path, "sessions/%s", id) >= sizeof path) {
        fprintf(stderr, "dstream: no session %s\n", id);
        *rc = EXIT_NOTFOUND;
        return NULL;
    }
    if (access(cli_db, R_OK)) {
        fprintf(stderr, "dstream: cannot read %s\n", cli_db);
        *rc = EXIT_FAIL;
        return NULL;
    }
    log_t *log = log_open(cli_db, NULL, err, sizeof err);
    log_conn_t *c = log ? log_conn_open(log, err, sizeof err) : NULL;
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        log_close(log);
        *rc = EXIT_FAIL;
        return NULL;
    }
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
            fprintf(stderr, "dstream: session %s: %s\n", id, lrc == LOG_ENOTFOUND ? "no such session" : log_strerror(lrc));
            *rc = lrc == LOG_ENOTFOUND ? EXIT_NOTFOUND : EXIT_FAIL;
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

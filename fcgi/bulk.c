/* POST /v1/sessions/cancel, /delete, /retry: one operation on the sessions a filter
 * takes (docs/agents.md, "Labels and bulk operations").
 *
 * The body: {"filter": {status, agent, workflow, labels, createdBefore, createdAfter}
 * (lib/sfilter), "dryRun", "limit", "cursor"}. The sessions are those of the list
 * (lib/sstore's sstore_list_filtered, newest first) that the token may write (and, for
 * a retry, read: a fork reads its source), so a token scoped to some sessions never
 * touches, nor learns of, another, whatever its filter says. One call takes at most
 * `limit` of them (BULK_MAX) and answers `next`, the cursor to go on from.
 *
 * Each session is its own transaction (the same command a single cancel, delete or
 * fork runs), never one long one, and the calls are paced at DSTREAM_BULK_RATE
 * sessions a second: the group commit takes other writers' appends between them, so
 * a bulk delete of many sessions does not hold the writers up. The answer says per
 * session what was done (or, with dryRun, would be) and what was skipped and why;
 * the pool's log has one line per call with its counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/defs.h"
#include "../lib/diag.h"
#include "../lib/event.h"
#include "../lib/jcheck.h"
#include "../lib/sfilter.h"
#include "../lib/sstore.h"
#include "access.h"
#include "recordings.h"
#include "reply.h"
#include "router.h"

#define BULK_MAX 100            /* sessions one call takes at most */
#define BULK_DEFAULT 50         /* without a limit */

enum {
    E_FINISHED = SSTORE_EREFUSED - 1,
    E_CANCELLING = SSTORE_EREFUSED - 2,
};

typedef enum { B_CANCEL, B_DELETE, B_RETRY } bulk_kind;

typedef struct bulk {
    req_t *r;
    bulk_kind kind;
    int dry;
    json_t *rec;                /* a retry's recording setting: live */
    const char *agent;          /* a retry's: the agent its chats' forks talk to, or NULL */
    int version;                /* a retry's: the workflow version its forks run, or 0 */
    json_t *done, *skipped;
} bulk;

int sessions_bulk_action(const char *name)
{
    return !strcmp(name, "cancel") || !strcmp(name, "delete") || !strcmp(name, "retry");
}

/* The sessions a call may touch: those the token may write (a retry reads them too). */
static int touchable(void *ud, const char *id)
{
    bulk *b = ud;
    return access_allows(b->r, "sessions:write", id) &&
           (b->kind != B_RETRY || access_allows(b->r, "sessions:read", id));
}

static void skip(bulk *b, const char *id, const char *reason, const char *message)
{
    json_array_append_new(b->skipped, json_pack("{s:s, s:s, s:s}", "id", id, "reason", reason, "message", message));
}

static void failed(bulk *b, const char *id, int rc)
{
    skip(b, id, rc == LOG_ENOTFOUND ? "not_found" : "error",
         rc == LOG_ENOTFOUND ? "the session is gone" : errs_str(rc));
}

/* Why a cancel would change nothing in v, or NULL. */
static int cancel_verdict(const session_view *v)
{
    if (session_view_finished(v)) return E_FINISHED;
    if (v->cancel_requested) return E_CANCELLING;
    return 0;
}

static int decide_cancel(void *ud, const session_view *v, sstore_event *ev, size_t *n)
{
    (void)ud;
    int rc = cancel_verdict(v);
    if (rc) return rc;
    ev[0] = event_cancel_requested();
    json_decref(ev[0].payload);   /* an empty payload: sstore writes {} */
    ev[0].payload = NULL;
    *n = 1;
    return 0;
}

static void one_cancel(bulk *b, const json_t *row, const char *id)
{
    offset_t at = {0, 0};
    int rc;
    if (b->dry) {
        session_view v;
        session_view_init(&v);
        rc = sstore_view(b->r->log, id, 0, at, &v, NULL);
        if (!rc) rc = cancel_verdict(&v);
        session_view_free(&v);
    } else {
        session_trace tr;
        session_trace_new(&tr);
        rc = sstore_command(b->r->log, id, &tr, decide_cancel, NULL, &at);
    }
    if (rc == E_FINISHED) skip(b, id, "finished", "the session has finished");
    else if (rc == E_CANCELLING) skip(b, id, "cancel_requested", "the session is being cancelled already");
    else if (rc) failed(b, id, rc);
    else {
        json_t *d = json_pack("{s:s, s:O}", "id", id, "status", json_object_get(row, "status"));
        if (!b->dry) {
            char off[OFFSET_LEN + 1];
            offset_format(at, off);
            json_object_set_new(d, "offset", json_string(off));
        }
        json_array_append_new(b->done, d);
    }
}

static void one_delete(bulk *b, const json_t *row, const char *id)
{
    int rc = b->dry ? 0 : sstore_delete(b->r->log, id);
    if (rc) failed(b, id, rc);
    else json_array_append_new(b->done, json_pack("{s:s, s:O}", "id", id, "status", json_object_get(row, "status")));
}

/* A failed session forked from before what failed (sstore_retry_point), live. */
static void one_retry(bulk *b, const char *id)
{
    session_view v;
    offset_t at, none = {0, 0};
    char off[OFFSET_LEN + 1], nid[SSTORE_ID_MAX], fresh[SSTORE_ID_MAX];
    session_view_init(&v);
    int rc = sstore_view(b->r->log, id, 0, none, &v, NULL);
    session_status st = v.status;
    int is_workflow = v.is_workflow;
    session_view_free(&v);
    if (rc) {
        failed(b, id, rc);
        return;
    }
    if (st != SESSION_FAILED) {     /* it changed since it was listed */
        skip(b, id, "not_failed", "the session has not failed");
        return;
    }
    if (b->agent && is_workflow) {
        skip(b, id, "not_a_chat", "another agent is for chats: this is a workflow's session");
        return;
    }
    if ((rc = sstore_retry_point(b->r->log, id, &at))) {
        if (rc == LOG_ERANGE) skip(b, id, "no_retry_point", "nothing was asked or started that could run again");
        else failed(b, id, rc);
        return;
    }
    offset_format(at, off);
    json_t *d = json_pack("{s:s, s:s}", "id", id, "at", off);
    if (b->agent) json_object_set_new(d, "agent", json_string(b->agent));
    if (b->version) json_object_set_new(d, "workflowVersion", json_integer(b->version));
    if (b->dry) {
        json_array_append_new(b->done, d);
        return;
    }
    /* The new id as POST /v1/sessions/{id}/fork names one: under the token's prefix. */
    const char *prefix = access_prefix(b->r, "sessions:write");
    sstore_new_id(fresh, sizeof fresh);
    if (prefix && strlen(prefix) + strlen(fresh) < sizeof nid && sstore_valid_id(prefix))
        snprintf(nid, sizeof nid, "%s%s", prefix, fresh);
    else
        snprintf(nid, sizeof nid, "%s", fresh);
    if (!access_allows(b->r, "sessions:write", nid)) {
        json_decref(d);
        skip(b, id, "forbidden", "the token may not create the fork's session");
        return;
    }
    session_trace tr;
    session_trace_new(&tr);
    sstore_create_req cr;
    memset(&cr, 0, sizeof cr);
    cr.id = nid;
    cr.parent = id;
    cr.has_at = 1;
    cr.at = at;
    cr.forked_recording = b->rec;
    cr.fork_agent = b->agent;
    cr.fork_version = b->version;
    cr.trace = &tr;
    if ((rc = sstore_create(b->r->log, &cr))) {
        json_decref(d);
        failed(b, id, rc);
    } else {
        json_object_set_new(d, "newId", json_string(nid));
        json_array_append_new(b->done, d);
    }
}

/* Sleep so that the i-th session (from 1) is not begun before i / rate seconds
 * after t0. */
static void pace(const struct timespec *t0, int i, int rate)
{
    struct timespec now;
    if (rate <= 0) return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long due = (long long)i * 1000000000LL / rate;
    long long gone = (now.tv_sec - t0->tv_sec) * 1000000000LL + (now.tv_nsec - t0->tv_nsec);
    if (gone >= due) return;
    struct timespec d = {(time_t)((due - gone) / 1000000000LL), (long)((due - gone) % 1000000000LL)};
    nanosleep(&d, NULL);
}

/* The body's limit into *limit (absent: BULK_DEFAULT). 0, or -1 after answering. */
static int limit_of(req_t *r, const json_t *j, int *limit)
{
    *limit = BULK_DEFAULT;
    if (!j) return 0;
    if (!json_is_integer(j) || json_integer_value(j) < 1 || json_integer_value(j) > BULK_MAX) {
        res_error(r, 400, "bad_limit", "limit must be 1 to %d", BULK_MAX);
        return -1;
    }
    *limit = (int)json_integer_value(j);
    return 0;
}

/* A retry's "agent" and "workflowVersion" (a number or "latest", of the filter's
 * workflow) into b, checked against the stored definitions. 0, or -1 after
 * answering (400, 422 unknown_agent / unknown_workflow). */
static int retry_target(req_t *r, const json_t *body, const sstore_filter *f, bulk *b)
{
    const json_t *a = json_object_get(body, "agent"), *wv = json_object_get(body, "workflowVersion");
    int rc, got = 0;
    json_t *doc;
    if (a) {
        if (!json_is_string(a) || json_string_length(a) == 0 || json_string_length(a) > SFILTER_NAME_MAX ||
            strlen(json_string_value(a)) != json_string_length(a)) {
            res_error(r, 400, "bad_request", "agent must be an agent's name");
            return -1;
        }
        if (!(doc = defs_agent_get(r->log, json_string_value(a), &rc))) {
            if (rc == LOG_ENOTFOUND) res_error(r, 422, "unknown_agent", "no agent named %s", json_string_value(a));
            else reply_fail(r, rc);
            return -1;
        }
        json_decref(doc);
        b->agent = json_string_value(a);
    }
    if (wv) {
        int latest = json_is_string(wv) && !strcmp(json_string_value(wv), "latest");
        if (!latest && (!json_is_integer(wv) || json_integer_value(wv) < 1 || json_integer_value(wv) > 1000000000)) {
            res_error(r, 400, "bad_request", "workflowVersion must be a version number or \"latest\"");
            return -1;
        }
        if (!f->workflow[0]) {
            res_error(r, 400, "bad_request", "workflowVersion needs the filter's workflow: the version is of that one");
            return -1;
        }
        if (!(doc = defs_workflow_get(r->log, f->workflow, latest ? 0 : (int)json_integer_value(wv), &got, &rc))) {
            if (rc == LOG_ENOTFOUND)
                res_error(r, 422, "unknown_workflow", "workflow %s has no such version", f->workflow);
            else reply_fail(r, rc);
            return -1;
        }
        json_decref(doc);
        b->version = got;
    }
    return 0;
}

void sessions_bulk(req_t *r, const char *action)
{
    static const char *const known[] = {"filter", "dryRun", "limit", "cursor", NULL};
    static const char *const known_retry[] = {"filter", "dryRun", "limit", "cursor", "agent", "workflowVersion", NULL};
    json_t *body = req_json_object(r), *page = NULL, *none = NULL, *row;
    if (!body) return;
    bulk b;
    memset(&b, 0, sizeof b);
    b.r = r;
    b.kind = !strcmp(action, "cancel") ? B_CANCEL : !strcmp(action, "delete") ? B_DELETE : B_RETRY;
    const char *k;
    json_t *v;
    char err[256], next[160];
    sstore_filter f;
    int limit;
    json_object_foreach(body, k, v) {
        if (!jcheck_in_list(k, b.kind == B_RETRY ? known_retry : known)) {
            char q[JCHECK_QUOTE];
            res_error(r, 400, "bad_request", "unknown field \"%s\" (known: filter, dryRun, limit, cursor%s)",
                      jcheck_show(q, sizeof q, k, strlen(k)), b.kind == B_RETRY ? ", agent, workflowVersion" : "");
            goto out;
        }
    }
    json_t *fj = json_object_get(body, "filter"), *dry = json_object_get(body, "dryRun");
    json_t *cur = json_object_get(body, "cursor");
    if (fj ? sfilter_from_json(fj, &f, err, sizeof err) : (memset(&f, 0, sizeof f), 0)) {
        res_error(r, 400, "bad_filter", "%s", err);
        goto out;
    }
    if (b.kind == B_RETRY) {
        /* A retry takes failed sessions: the status is implied. */
        if (f.status[0] && strcmp(f.status, "failed")) {
            res_error(r, 400, "bad_filter", "retry takes failed sessions: status must be failed or left out");
            goto out;
        }
        snprintf(f.status, sizeof f.status, "failed");
        if (retry_target(r, body, &f, &b)) goto out;
    } else if (sfilter_empty(&f)) {
        res_error(r, 400, "bad_filter", "give a filter: at least one of status, agent, workflow, labels, "
                                        "createdBefore, createdAfter");
        goto out;
    }
    if (dry && !json_is_boolean(dry)) {
        res_error(r, 400, "bad_request", "dryRun must be true or false");
        goto out;
    }
    b.dry = json_is_true(dry);
    if (cur && (!json_is_string(cur) || json_string_length(cur) == 0 || json_string_length(cur) > 127 ||
                strlen(json_string_value(cur)) != json_string_length(cur))) {
        res_error(r, 400, "bad_cursor", "malformed cursor");
        goto out;
    }
    if (limit_of(r, json_object_get(body, "limit"), &limit)) goto out;
    if (b.kind == B_RETRY) {
        none = json_pack("{s:s}", "mode", "live");
        if (recording_setting(r, none, &b.rec)) goto out;
    }
    page = json_array();
    int rc = sstore_list_filtered(r->log, &f, cur ? json_string_value(cur) : "", limit, touchable, &b, page, next,
                                  sizeof next);
    if (rc) {
        if (rc == LOG_EINVAL) res_error(r, 400, "bad_cursor", "malformed cursor");
        else reply_fail(r, rc);
        goto out;
    }
    b.done = json_array();
    b.skipped = json_array();
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t i;
    json_array_foreach(page, i, row) {
        const char *id = json_string_value(json_object_get(row, "id"));
        if (!b.dry && i) pace(&t0, (int)i, r->cfg->bulk_rate);
        if (b.kind == B_CANCEL) one_cancel(&b, row, id);
        else if (b.kind == B_DELETE) one_delete(&b, row, id);
        else one_retry(&b, id);
    }
    size_t nd = json_array_size(b.done), ns = json_array_size(b.skipped);
    diag("info", "sessions %s%s: %zu matched, %zu done, %zu skipped%s", action, b.dry ? " (dry run)" : "",
         json_array_size(page), nd, ns, next[0] ? ", more to go" : "");
    json_t *o = json_pack("{s:s, s:b, s:O, s:O, s:{s:I, s:I, s:I}, s:o}", "action", action, "dryRun", b.dry, "done",
                          b.done, "skipped", b.skipped, "count", "matched", (json_int_t)json_array_size(page), "done",
                          (json_int_t)nd, "skipped", (json_int_t)ns, "next", next[0] ? json_string(next) : json_null());
    res_json(r, 200, o);
    json_decref(o);
out:
    json_decref(b.done);
    json_decref(b.skipped);
    json_decref(b.rec);
    json_decref(none);
    json_decref(page);
    json_decref(body);
}

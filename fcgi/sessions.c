/* /v1/sessions: agent and workflow sessions (lib/session, lib/sstore).
 *
 * Every command here appends an event through sstore_command, whose decide
 * function sees the session's view inside the write transaction: checks such as
 * "is this input pending" cannot race with another command or the runner. The
 * runner notices the commands through the log and acts on them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/agent.h"
#include "../lib/checkpoint.h"
#include "../lib/compact.h"
#include "../lib/defs.h"
#include "../lib/event.h"
#include "../lib/lineage.h"
#include "../lib/sfilter.h"
#include "../lib/sstore.h"
#include "../lib/workflow.h"
#include "../lib/wsignal.h"
#include "live.h"
#include "recordings.h"
#include "reply.h"
#include "access.h"
#include "router.h"
#include "sessions.h"
#include "stream.h"

#define LIST_MAX 100

enum {
    E_FINISHED = SSTORE_EREFUSED - 1,   /* the session is over */
    E_NOT_REQUESTED = SSTORE_EREFUSED - 2,
    E_ANSWERED = SSTORE_EREFUSED - 3,
    E_BAD_RESPONSE = SSTORE_EREFUSED - 4,
    E_CANCELLING = SSTORE_EREFUSED - 5,
    E_SKILL = SSTORE_EREFUSED - 6,      /* the skill cannot be used: message in the command */
    E_NOT_CHAT = SSTORE_EREFUSED - 7,   /* a workflow's session */
    E_REPLACES = SSTORE_EREFUSED - 8,   /* no user message to replace there */
    E_BUSY = SSTORE_EREFUSED - 9,       /* a reply is under way (sessions_say's refuse_busy) */
    E_WORKFLOW = SSTORE_EREFUSED - 10,  /* a workflow's session has no chat to compact */
    E_NOTHING = SSTORE_EREFUSED - 11,   /* nothing to compact */
    E_COMPACTING = SSTORE_EREFUSED - 12, /* a compaction is queued or under way */
    E_NOT_AWAITED = SSTORE_EREFUSED - 13, /* no wait step of the workflow names the signal */
    E_SIGNALS_FULL = SSTORE_EREFUSED - 14, /* the session keeps as many signals as it may */
};

static void trace_of(req_t *r, session_trace *t)
{
    const char *tp = req_header(r, "traceparent");
    if (!tp || session_trace_from_header(tp, t)) session_trace_new(t);
}

static void fail(req_t *r, int rc)
{
    switch (rc) {
    case LOG_ENOTFOUND: res_error(r, 404, "not_found", "no such session"); break;
    case E_FINISHED: res_error(r, 409, "session_finished", "the session has finished"); break;
    case E_NOT_REQUESTED:
        res_error(r, 409, "input_not_requested", "no input with that interactionId was requested");
        break;
    case E_ANSWERED: res_error(r, 409, "input_answered", "that input has already been answered"); break;
    case E_BAD_RESPONSE: res_error(r, 400, "bad_response", "the response does not fit the input's kind"); break;
    case E_CANCELLING: res_error(r, 409, "cancel_requested", "the session is being cancelled"); break;
    case E_NOT_CHAT: res_error(r, 409, "not_a_chat", "a workflow's session has no reply to stop"); break;
    case E_REPLACES:
        res_error(r, 409, "nothing_to_replace", "replaces names no user message of the session");
        break;
    case E_BUSY: res_error(r, 409, "busy", "a reply is under way"); break;
    case E_WORKFLOW: res_error(r, 409, "not_a_chat", "a workflow's session has no chat history to compact"); break;
    case E_NOTHING:
        res_error(r, 409, "nothing_to_compact",
                  "nothing to compact: the history holds no user message with earlier messages before it (the "
                  "last exchange is always kept)");
        break;
    case E_COMPACTING: res_error(r, 409, "busy", "a compaction is already queued or under way"); break;
    case E_NOT_AWAITED:
        res_error(r, 409, "signal_not_awaited", "no wait step of the session's workflow waits for that signal");
        break;
    case E_SIGNALS_FULL:
        res_error(r, 409, "too_many_signals",
                  "the session keeps as many signals not yet taken as it may (DSTREAM_SIGNALS_PENDING_MAX)");
        break;
    default: reply_fail(r, rc);
    }
}

static void accepted(req_t *r, const char *id, offset_t at)
{
    char off[OFFSET_LEN + 1];
    offset_format(at, off);
    json_t *o = json_pack("{s:s, s:s}", "id", id, "offset", off);
    res_json(r, 202, o);
    json_decref(o);
}

/* ---- create, list ------------------------------------------------------------------------ */

int sessions_new_id(req_t *r, const json_t *idj, char *id, size_t cap)
{
    if (idj) {
        snprintf(id, cap, "%s", json_string_value(idj));
    } else {
        char fresh[SSTORE_ID_MAX];
        const char *prefix = access_prefix(r, "sessions:write");
        sstore_new_id(fresh, sizeof fresh);
        if (prefix && strlen(prefix) + strlen(fresh) < cap && sstore_valid_id(prefix))
            snprintf(id, cap, "%s%s", prefix, fresh);
        else
            snprintf(id, cap, "%s", fresh);
    }
    return req_allow(r, "sessions:write", id) ? 0 : -1;
}

/* Create session id of agent (a chat) or of workflow name at version (doc its
 * definition), with its input and recording setting. 0, or the store's code
 * (LOG_ECONFLICT: the id is taken). */
static int insert(req_t *r, const char *id, const char *agent, const char *name, int version, const json_t *doc,
                  const json_t *input, const json_t *rec, const json_t *labels, const json_t *limits)
{
    json_t *created = event_session_created(agent, name, version, json_object_get(doc, "initialState"), input,
                                            rec).payload;
    char stored[SSTORE_LABELS_MAX] = "", err[256];
    /* The labels are in the log (session:created) and on the row (for filtering). */
    if (labels && json_object_size(labels)) {
        if (sfilter_labels(labels, stored, sizeof stored, err, sizeof err)) {
            json_decref(created);
            return LOG_EINVAL;
        }
        json_object_set(created, PK_LABELS, (json_t *)labels);
    }
    if (limits) json_object_set(created, PK_LIMITS, (json_t *)limits);   /* the session's own budget */
    session_trace tr;
    trace_of(r, &tr);
    sstore_create_req cr;
    memset(&cr, 0, sizeof cr);
    cr.id = id;
    cr.agent = agent;
    cr.workflow = agent ? NULL : name;
    cr.wf_version = version;
    cr.labels = stored;
    cr.created = created;
    cr.trace = &tr;
    int rc = sstore_create(r->log, &cr);
    json_decref(created);
    return rc;
}

int sessions_create(req_t *r, const char *id, int is_agent, const char *name, const json_t *input, const json_t *rec,
                    const json_t *labels, const json_t *limits)
{
    int rc, version = 0;
    json_t *doc = is_agent ? defs_agent_get(r->log, name, &rc) : defs_workflow_get(r->log, name, 0, &version, &rc);
    if (!doc) {
        if (rc == LOG_ENOTFOUND) res_error(r, 422, is_agent ? "unknown_agent" : "unknown_workflow", "no %s named %s", is_agent ? "agent" : "workflow", name);
        else reply_fail(r, rc);
        return -1;
    }
    rc = insert(r, id, is_agent ? name : NULL, name, version, doc, input, rec, labels, limits);
    json_decref(doc);
    if (rc == LOG_ECONFLICT) res_error(r, 409, "session_exists", "a session %s exists", id);
    else if (rc) reply_fail(r, rc);
    return rc ? -1 : 0;
}

static void create(req_t *r)
{
    json_t *body = req_json_object(r);
    if (!body) return;
    json_t *agent = json_object_get(body, "agent"), *wf = json_object_get(body, "workflow");
    json_t *input = json_object_get(body, "input"), *rec = NULL;
    json_t *idj = json_object_get(body, "id"), *labels = json_object_get(body, "labels");
    char id[SSTORE_ID_MAX], err[256], stored[SSTORE_LABELS_MAX];
    int rc;
    if ((agent != NULL) == (wf != NULL) || (agent && !json_is_string(agent)) || (wf && !json_is_string(wf))) {
        res_error(r, 400, "bad_session", "give exactly one of \"agent\" or \"workflow\" (a name)");
        goto out;
    }
    if (labels && sfilter_labels(labels, stored, sizeof stored, err, sizeof err)) {
        res_error(r, 400, "bad_labels", "%s", err);
        goto out;
    }
    if (idj && (!json_is_string(idj) || !sstore_valid_id(json_string_value(idj)))) {
        res_error(r, 400, "bad_id", "id must be 1 to 63 of [A-Za-z0-9_-]");
        goto out;
    }
    json_t *limits = json_object_get(body, "limits");
    char lerr[1024];
    if (limits && agent_validate_limits(limits, lerr, sizeof lerr)) {
        char *nl = strchr(lerr, '\n');
        if (nl) *nl = '\0';    /* the first mistake */
        res_error(r, 400, "bad_limits", "%s", lerr);
        goto out;
    }
    if (recording_setting(r, body, &rec)) goto out;
    if (sessions_new_id(r, idj, id, sizeof id)) goto out;
    if (sessions_create(r, id, agent != NULL, json_string_value(agent ? agent : wf), input, rec, labels, limits)) goto out;
    sstore_row row;
    session_view v;
    offset_t pos = {0, 0};
    session_view_init(&v);
    if ((rc = sstore_get(r->log, id, &row)) || (rc = sstore_view(r->log, id, 0, pos, &v, &pos))) {
        session_view_free(&v);
        reply_fail(r, rc);
        goto out;
    }
    res_headerf(r, "Location", "/v1/sessions/%s", id);
    json_t *j = sstore_session_json(&row, &v, pos);
    res_json(r, 201, j);
    json_decref(j);
    session_view_free(&v);
out:
    json_decref(rec);
    json_decref(body);
}

/* The chat of agent that row is: else 409 (answered) and -1. */
static int chat_of(req_t *r, const sstore_row *row, const char *agent)
{
    if (!row->workflow[0] && !strcmp(row->agent, agent)) return 0;
    res_error(r, 409, "chat_agent_mismatch", "session %s is %s %s, not a chat with agent %s", row->id,
              row->workflow[0] ? "a run of workflow" : "a chat with agent", row->workflow[0] ? row->workflow : row->agent,
              agent);
    return -1;
}

int sessions_open_chat(req_t *r, const char *id, const char *agent, sstore_row *row)
{
    json_t *doc = NULL, *none = NULL, *rec = NULL;
    int rc = sstore_get(r->log, id, row), ret = -1;
    if (!rc) return chat_of(r, row, agent);
    if (rc != LOG_ENOTFOUND) {
        reply_fail(r, rc);
        return -1;
    }
    if (!(doc = defs_agent_get(r->log, agent, &rc))) {
        if (rc == LOG_ENOTFOUND) res_error(r, 422, "unknown_agent", "no agent named %s", agent);
        else reply_fail(r, rc);
        goto out;
    }
    none = json_object();
    if (recording_setting(r, none, &rec)) goto out;
    rc = insert(r, id, agent, agent, 0, doc, NULL, rec, NULL, NULL);
    if (rc && rc != LOG_ECONFLICT) {
        reply_fail(r, rc);
        goto out;
    }
    /* Made by another request meanwhile (LOG_ECONFLICT): that one is it. */
    if ((rc = sstore_get(r->log, id, row))) reply_fail(r, rc);
    else ret = chat_of(r, row, agent);
out:
    json_decref(rec);
    json_decref(none);
    json_decref(doc);
    return ret;
}

int sessions_chat(req_t *r, const char *id, const char *agent, sstore_row *row)
{
    int rc = sstore_get(r->log, id, row);
    if (rc) {
        fail(r, rc);
        return -1;
    }
    return chat_of(r, row, agent);
}

/* The list shows the sessions the token may read. */
static int readable(void *ud, const char *id)
{
    return access_allows(ud, "sessions:read", id);
}

/* Each listed session's cost (costUsd, and cost: spent, inherited, recorded) from its
 * view, and the page's totals: what its sessions spent and were answered from
 * recordings, never what a fork inherited (its source counts that). */
static int add_costs(req_t *r, json_t *arr, json_t **totals)
{
    json_t *s;
    size_t i;
    double spent = 0, recorded = 0;
    json_array_foreach(arr, i, s) {
        session_view v;
        offset_t none = {0, 0};
        session_view_init(&v);
        int rc = sstore_view(r->log, json_string_value(json_object_get(s, "id")), 0, none, &v, NULL);
        if (rc == LOG_ENOTFOUND) {          /* deleted since it was listed */
            json_object_set_new(s, "costUsd", json_null());
            json_object_set_new(s, "cost", json_null());
            session_view_free(&v);
            continue;
        }
        if (rc) {
            session_view_free(&v);
            return rc;
        }
        json_object_set_new(s, "costUsd", json_real(v.cost_usd));
        json_object_set_new(s, "cost", session_cost_json(&v));
        spent += session_cost_spent(&v);
        recorded += v.cost_recorded_usd;
        session_view_free(&v);
    }
    *totals = json_pack("{s:f, s:f}", "spentUsd", spent, "recordedUsd", recorded);
    return 0;
}

/* The list's filter from the query: status, agent, workflow, label (key:value pairs
 * joined by commas), createdBefore, createdAfter (RFC 3339 or ms). 0, or -1 after
 * answering 400. */
static int list_filter(req_t *r, sstore_filter *f)
{
    char v[SSTORE_LABELS_MAX], err[256];
    int n;
    memset(f, 0, sizeof *f);
    n = req_query(r, "status", v, sizeof v);
    if (n == 0 || n < -1 || (n > 0 && session_status_parse(v) < 0)) {
        res_error(r, 400, "bad_status", "status must be pending, running, awaiting_input, completed, failed or cancelled");
        return -1;
    }
    if (n > 0) snprintf(f->status, sizeof f->status, "%.23s", v);
    static const char *const names[] = {"agent", "workflow"};
    for (int i = 0; i < 2; i++) {
        n = req_query(r, names[i], v, sizeof v);
        if (n == -1) continue;
        if (n <= 0 || n > SFILTER_NAME_MAX) {
            res_error(r, 400, "bad_filter", "%s must be a name of 1 to %d bytes, given once", names[i], SFILTER_NAME_MAX);
            return -1;
        }
        snprintf(i ? f->workflow : f->agent, sizeof f->agent, "%.71s", v);
    }
    n = req_query(r, "label", v, sizeof v);
    if (n != -1 && (n < 0 || sfilter_add_labels(f, v, err, sizeof err))) {
        if (n < 0) snprintf(err, sizeof err, "label must be given once (pairs joined by commas) and fit %zu bytes",
                            sizeof v - 1);
        res_error(r, 400, "bad_label", "%s", err);
        return -1;
    }
    static const char *const times[] = {"createdBefore", "createdAfter"};
    for (int i = 0; i < 2; i++) {
        int64_t ms;
        n = req_query(r, times[i], v, sizeof v);
        if (n == -1) continue;
        if (n <= 0 || sfilter_time(v, &ms)) {
            res_error(r, 400, "bad_filter", "%s must be an RFC 3339 date-time or milliseconds since the epoch",
                      times[i]);
            return -1;
        }
        if (i) f->has_after = 1, f->created_after = ms;
        else f->has_before = 1, f->created_before = ms;
    }
    return 0;
}

static void list(req_t *r)
{
    char cursor[128], lim[16];
    sstore_filter filter;
    if (list_filter(r, &filter)) return;
    int cn = req_query(r, "cursor", cursor, sizeof cursor);
    if (cn < -1) {
        res_error(r, 400, "bad_cursor", "malformed cursor");
        return;
    }
    long limit = 50;
    int ln = req_query(r, "limit", lim, sizeof lim);
    if (ln >= 0) {
        char *end;
        limit = strtol(lim, &end, 10);
        if (ln == 0 || *end || limit < 1 || limit > LIST_MAX) {
            res_error(r, 400, "bad_limit", "limit must be 1 to %d", LIST_MAX);
            return;
        }
    } else if (ln < -1) {
        res_error(r, 400, "bad_limit", "limit must be 1 to %d", LIST_MAX);
        return;
    }
    json_t *arr = json_array();
    char next[160];
    int rc = sstore_list_filtered(r->log, &filter, cn > 0 ? cursor : "", (int)limit, readable, r,
                                  arr, next, sizeof next);
    json_t *totals = NULL;
    if (!rc) rc = add_costs(r, arr, &totals);
    if (rc) {
        json_decref(arr);
        if (rc == LOG_EINVAL) res_error(r, 400, "bad_cursor", "malformed cursor");
        else reply_fail(r, rc);
        return;
    }
    json_t *o = json_pack("{s:o, s:o, s:o}", "sessions", arr, "nextCursor", next[0] ? json_string(next) : json_null(),
                          "totals", totals);
    res_json(r, 200, o);
    json_decref(o);
}

/* ---- one session ------------------------------------------------------------------------- */

static int parse_at(req_t *r, const char *v, int n, offset_t *at)
{
    offset_kind k;
    if (n <= 0 || offset_parse(v, (size_t)n, &k, at) || k == OFFSET_NOW) {
        res_error(r, 400, "bad_offset", "at must be -1 or an offset the server returned");
        return -1;
    }
    if (k == OFFSET_START) at->seq = at->pos = 0;
    return 0;
}

static void get(req_t *r, const char *id, int state_only)
{
    sstore_row row;
    session_view v;
    offset_t at = {0, 0}, pos;
    char q[64];
    int has_at = 0, rc;
    if (state_only) {
        int n = req_query(r, "at", q, sizeof q);
        if (n != -1) {
            if (parse_at(r, q, n, &at)) return;
            has_at = 1;
        }
    }
    if ((rc = sstore_get(r->log, id, &row))) {
        fail(r, rc);
        return;
    }
    session_view_init(&v);
    rc = sstore_view(r->log, id, has_at, at, &v, &pos);
    if (rc == LOG_ERANGE) res_error(r, 400, "bad_offset", "at is beyond the session's last event");
    else if (rc) fail(r, rc);
    else {
        json_t *j = sstore_session_json(&row, &v, pos);
        if (has_at) json_object_set_new(j, "at", json_string(q));
        res_json(r, 200, j);
        json_decref(j);
    }
    session_view_free(&v);
}

/* GET /v1/sessions/{id}/proof: where the session's event stream's hash chain
 * (lib/chain.h) stands, its tail's offset and digest, and for a fork where its chain
 * began: the fork point and its parent's digest there. */
static void proof(req_t *r, const char *id)
{
    sstore_row row;
    log_info info;
    char off[OFFSET_LEN + 1], hex[CHAIN_HEX + 1];
    int rc;
    if ((rc = sstore_get(r->log, id, &row)) || (rc = log_head(r->log, row.stream, &info))) {
        fail(r, rc);
        return;
    }
    offset_format(info.tail, off);
    chain_hex(info.digest, hex);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "session", row.id, "stream", row.stream, "algorithm",
                          "sha256", "offset", off, "digest", hex);
    json_t *fork = json_null();
    if (info.parent) {
        uint8_t at[CHAIN_LEN];
        if ((rc = log_digest_at(r->log, row.stream, info.fork.seq, at))) {
            json_decref(j);
            fail(r, rc);
            return;
        }
        offset_format(info.fork, off);
        chain_hex(at, hex);
        fork = json_pack("{s:s?, s:s, s:s}", "from", row.parent[0] ? row.parent : NULL, "offset", off, "digest", hex);
    }
    json_object_set_new(j, "fork", fork);
    res_header(r, "Cache-Control", "no-store");
    res_json(r, 200, j);
    json_decref(j);
}

static void events(req_t *r, const char *id)
{
    sstore_row row;
    int rc;
    if ((rc = sstore_get(r->log, id, &row))) {
        fail(r, rc);
        return;
    }
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = row.stream;
    char live[32], off[64];
    int ln = req_query(r, "live", live, sizeof live);
    if (ln == -2 || ln == -3 || (ln >= 0 && strcmp(live, "long-poll") && strcmp(live, "sse"))) {
        res_error(r, 400, "bad_live", "live must be long-poll or sse");
        return;
    }
    /* A browser EventSource resumes with Last-Event-ID, the offset after its last
     * event: over SSE it overrides ?offset= (the URL it reconnects to), otherwise
     * it stands in for a missing one. */
    int sse = ln >= 0 && strcmp(live, "sse") == 0;
    int resumed = sse || req_query(r, "offset", off, sizeof off) == -1
                      ? stream_resume_offset(r, &rr.kind, &rr.from) : 0;
    if (resumed < 0 || (!resumed && stream_parse_offset(r, &rr.kind, &rr.from))) return;
    frame_t f;
    frame_init(&f, sse ? &frame_events : ln >= 0 ? &frame_longpoll : &frame_catchup, 1);
    live_run(r, &rr, &f);
}

/* A whole-number query parameter in [lo, hi] into *v (def when absent). 0, or -1
 * after answering 400 code. */
static int query_int(req_t *r, const char *name, long lo, long hi, long def, const char *code, long *v)
{
    char q[24];
    int n = req_query(r, name, q, sizeof q);
    *v = def;
    if (n == -1) return 0;
    char *end = q;
    if (n > 0) *v = strtol(q, &end, 10);
    if (n <= 0 || *end || end == q || *v < lo || *v > hi) {
        res_error(r, 400, code, "%s must be a whole number from %ld to %ld", name, lo, hi);
        return -1;
    }
    return 0;
}

/* GET /v1/sessions/{id}/lineage: the tree of forks around it; the sessions the
 * token may not read are hidden (lib/lineage). */
static void lineage(req_t *r, const char *id)
{
    long limit;
    json_t *j = NULL;
    if (query_int(r, "limit", 1, LINEAGE_LIMIT_MAX, LINEAGE_LIMIT_DEFAULT, "bad_limit", &limit)) return;
    int rc = lineage_tree(r->log, id, (int)limit, readable, r, &j);
    if (rc) {
        fail(r, rc);
        return;
    }
    res_json(r, 200, j);
    json_decref(j);
}

/* An optional position query parameter (as state's at=) into *at; *has says whether
 * it was given. 0, or -1 after answering 400 bad_offset. */
static int query_at(req_t *r, const char *name, int *has, offset_t *at)
{
    char q[64];
    offset_kind k;
    int n = req_query(r, name, q, sizeof q);
    *has = n != -1;
    if (n == -1) return 0;
    if (n <= 0 || offset_parse(q, (size_t)n, &k, at) || k == OFFSET_NOW) {
        res_error(r, 400, "bad_offset", "%s must be -1 or an offset the server returned", name);
        return -1;
    }
    if (k == OFFSET_START) at->seq = at->pos = 0;
    return 0;
}

/* GET /v1/sessions/{a}/diff?with={b}[&at=][&withAt=][&context=]: where the two agree
 * and how they differ (lib/lineage). The token reads both. */
static void diff(req_t *r, const char *id)
{
    char with[SSTORE_ID_MAX + 1];
    long context;
    json_t *j = NULL;
    lineage_diff_req q;
    memset(&q, 0, sizeof q);
    int n = req_query(r, "with", with, sizeof with);
    if (n == -1 || n <= 0 || !sstore_valid_id(with)) {
        res_error(r, 400, "bad_with", "with must name the other session (1 to 63 of [A-Za-z0-9_-])");
        return;
    }
    if (!req_allow(r, "sessions:read", with)) return;
    if (query_at(r, "at", &q.has_at_a, &q.at_a) || query_at(r, "withAt", &q.has_at_b, &q.at_b) ||
        query_int(r, "context", 0, LINEAGE_CONTEXT_MAX, LINEAGE_CONTEXT_DEFAULT, "bad_context", &context))
        return;
    q.a = id;
    q.b = with;
    q.context = (int)context;
    q.scan = LINEAGE_SCAN_DEFAULT;
    int rc = lineage_diff(r->log, &q, &j);
    const char *which = q.side == 'b' ? "withAt" : "at";
    if (rc == LOG_ENOTFOUND) res_error(r, 404, "not_found", "no such session %s", q.side == 'b' ? with : id);
    else if (rc == LOG_ERANGE) res_error(r, 400, "bad_offset", "%s is beyond the session's last event", which);
    else if (rc == LOG_EOFFSET) res_error(r, 400, "bad_offset", "%s is not a position of the session", which);
    else if (rc) fail(r, rc);
    else res_json(r, 200, j);
    json_decref(j);
}

/* ---- commands ----------------------------------------------------------------------------- */

typedef struct message_cmd {
    json_t *content;            /* as given, or with the skill rendered before it (owned) */
    const char *mode;
    const char *skill_used;     /* the skill's name, once rendered, or NULL */
    json_t *event_payload;      /* the event's, once decided (freed by the caller) */
    log_conn_t *conn;
    const json_t *skill;        /* {"name", "params"} or NULL */
    const char *replaces;       /* the offset of the user message it replaces, "last", or NULL */
    char err[512];
    int refuse_busy;            /* refused (E_BUSY) while a reply is under way or due */
} message_cmd;

/* A message that invokes a skill of the session's agent: the rendered skill goes
 * first, then the content, and the payload names the skill. */
static int use_skill(message_cmd *m, const session_view *v)
{
    const char *agent = json_string_value(json_object_get(v->created, PK_AGENT));
    const char *name = json_string_value(json_object_get(m->skill, "name"));
    int rc;
    if (!agent) {
        snprintf(m->err, sizeof m->err, "only chat sessions take skills in messages");
        return E_SKILL;
    }
    json_t *doc = defs_agent_get(m->conn, agent, &rc);
    if (!doc) {
        snprintf(m->err, sizeof m->err, "the session's agent %s is gone", agent);
        return E_SKILL;
    }
    buf_t out;
    buf_init(&out, SESSIONS_CONTENT_MAX);
    rc = agent_render_skill(doc, name ? name : "", json_object_get(m->skill, "params"), &out, m->err,
                            sizeof m->err);
    json_decref(doc);
    size_t clen = json_string_length(m->content);
    if (!rc && clen) rc = buf_puts(&out, "\n\n") || buf_append(&out, json_string_value(m->content), clen);
    if (rc && !m->err[0]) snprintf(m->err, sizeof m->err, "the message is over %d bytes", SESSIONS_CONTENT_MAX);
    if (!rc) {
        json_decref(m->content);
        m->content = json_stringn(out.p ? out.p : "", out.len);
        m->skill_used = name;
    }
    buf_free(&out);
    return rc ? E_SKILL : 0;
}

static int decide_message(void *ud, const session_view *v, sstore_event *ev, size_t *n)
{
    message_cmd *m = ud;
    if (session_view_finished(v)) return E_FINISHED;
    if (v->cancel_requested) return E_CANCELLING;
    if (m->refuse_busy && session_view_replying(v)) return E_BUSY;
    int rc = m->skill ? use_skill(m, v) : 0;
    if (rc) return rc;
    const char *replaces = m->replaces && !strcmp(m->replaces, "last") ? session_view_last_user(v) : m->replaces;
    if (m->replaces && (!replaces || !session_view_has_user_message(v, replaces))) return E_REPLACES;
    ev[0] = event_message_user(m->content, m->mode, m->skill_used, replaces);
    json_decref(m->event_payload);
    m->event_payload = ev[0].payload;
    *n = 1;
    return 0;
}

/* Append the user message (content, mode, skill or NULL, replaces or NULL) to
 * session id, refused while a reply is under way when refuse_busy; *at gets its
 * offset. 0, or -1 after answering the refusal. */
static int say(req_t *r, const char *id, json_t *content, const char *mode, const json_t *skill,
               const char *replaces, int refuse_busy, offset_t *at)
{
    message_cmd m = {json_incref(content), mode, NULL, NULL, r->log, skill, replaces, "", refuse_busy};
    session_trace tr;
    trace_of(r, &tr);
    int rc = sstore_command(r->log, id, &tr, decide_message, &m, at);
    json_decref(m.content);
    json_decref(m.event_payload);
    if (rc == E_SKILL) res_error(r, 400, "bad_skill", "%s", m.err);
    else if (rc) fail(r, rc);
    return rc ? -1 : 0;
}

json_t *sessions_text_parts(req_t *r, const json_t *parts, const char *name)
{
    json_t *p;
    size_t i;
    buf_t text;
    buf_init(&text, SESSIONS_CONTENT_MAX);
    json_array_foreach(parts, i, p) {
        const char *type = json_string_value(json_object_get(p, "type"));
        json_t *t = json_object_get(p, "text");
        if (!type || strcmp(type, "text") || !json_is_string(t)) {
            buf_free(&text);
            res_error(r, 400, "unsupported_part", "%s[%zu] of the user's message: only text parts are supported", name, i);
            return NULL;
        }
        if ((text.len && buf_puts(&text, "\n")) || buf_append(&text, json_string_value(t), json_string_length(t))) {
            buf_free(&text);
            res_error(r, 400, "bad_content", "the user's message is over %d bytes", SESSIONS_CONTENT_MAX);
            return NULL;
        }
    }
    json_t *s = text.len ? json_stringn(text.p, text.len) : NULL;
    buf_free(&text);
    if (!s) res_error(r, 400, "bad_content", "the user's message has no text");
    return s;
}

int sessions_say(req_t *r, const char *id, json_t *content, const char *replaces, int refuse_busy, offset_t *at)
{
    return say(r, id, content, "interrupt", NULL, replaces, refuse_busy, at);
}

int sessions_replaces(req_t *r, const json_t *j, char out[OFFSET_LEN + 1])
{
    const char *s = json_string_value(j);
    offset_kind k;
    offset_t o;
    if (s && !strcmp(s, "last")) {
        snprintf(out, OFFSET_LEN + 1, "last");
        return 0;
    }
    if (!s || offset_parse(s, json_string_length(j), &k, &o) || k != OFFSET_AT) {
        res_error(r, 400, "bad_replaces", "replaces must be \"last\" or the offset of a user message of the session");
        return -1;
    }
    offset_format(o, out);
    return 0;
}

static void message(req_t *r, const char *id)
{
    json_t *body = req_json_object(r);
    if (!body) return;
    json_t *content = json_object_get(body, "content");
    json_t *modej = json_object_get(body, "mode");
    json_t *skill = json_object_get(body, "skill");
    json_t *replj = json_object_get(body, "replaces");
    const char *mode = modej ? json_string_value(modej) : "interrupt";
    json_t *empty = NULL;       /* a skill alone is a whole message */
    char replaces[OFFSET_LEN + 1];
    offset_t at;
    if (skill && (!json_is_object(skill) || !json_is_string(json_object_get(skill, "name")))) {
        res_error(r, 400, "bad_skill", "skill must be {\"name\": ..., \"params\": {...}}");
        goto out;
    }
    if (skill && !content) content = empty = json_string("");
    if (!json_is_string(content) || (json_string_length(content) == 0 && !skill) ||
        json_string_length(content) > SESSIONS_CONTENT_MAX) {
        res_error(r, 400, "bad_content", "content must be a non-empty string of at most %d bytes", SESSIONS_CONTENT_MAX);
        goto out;
    }
    if (!mode || (strcmp(mode, "interrupt") && strcmp(mode, "queue") && strcmp(mode, "background"))) {
        res_error(r, 400, "bad_mode", "mode must be interrupt, queue or background");
        goto out;
    }
    if (replj && sessions_replaces(r, replj, replaces)) goto out;
    if (!say(r, id, content, mode, skill, replj ? replaces : NULL, 0, &at)) accepted(r, id, at);
out:
    json_decref(empty);
    json_decref(body);
}

/* Answers (each {interactionId, response[, reason]}; no interactionId: the one
 * pending) to record in one command: all or none. With skip_answered, one whose input
 * has an answer already is left out (the AI SDK sends its chat's answers again);
 * E_ANSWERED when none is left. */
typedef struct input_cmd {
    const json_t *answers;
    const json_t *workflow;     /* the session's workflow document, or NULL */
    int skip_answered;
    json_t *made;               /* the payloads of the events decided (they hold them) */
} input_cmd;

static int decide_input(void *ud, const session_view *v, sstore_event *ev, size_t *n)
{
    input_cmd *c = ud;
    size_t i;
    const json_t *a;
    if (session_view_finished(v)) return E_FINISHED;
    if (v->cancel_requested) return E_CANCELLING;
    json_array_foreach(c->answers, i, a) {
        const char *iid = json_string_value(json_object_get(a, "interactionId")), *off;
        const json_t *resp = json_object_get(a, "response");
        if (!iid) iid = json_string_value(json_object_get(v->pending, PK_INTERACTION_ID));
        if (!iid) return E_NOT_REQUESTED;
        switch (checkpoint_decide(v, c->workflow, iid, resp, &off)) {
        case CHECKPOINT_ANSWERED:
            if (c->skip_answered) continue;
            return E_ANSWERED;
        case CHECKPOINT_NOT_REQUESTED: return E_NOT_REQUESTED;
        case CHECKPOINT_BAD_RESPONSE: return E_BAD_RESPONSE;
        case CHECKPOINT_OK: break;
        }
        for (size_t j = 0; j < *n; j++)     /* the same input twice in one request */
            if (!strcmp(json_string_value(json_object_get(ev[j].payload, PK_INTERACTION_ID)), iid)) return E_ANSWERED;
        if (*n == SSTORE_EVENTS_MAX) return E_BAD_RESPONSE;
        sstore_event e = event_input_answered(iid, resp, json_object_get(a, "reason"));
        json_array_append_new(c->made, e.payload);
        if (off) snprintf(e.caused_by, sizeof e.caused_by, "%s", off);
        ev[(*n)++] = e;
    }
    return *n ? 0 : E_ANSWERED;
}

int sessions_answers(req_t *r, const char *id, const json_t *answers, int skip_answered, offset_t *at)
{
    json_t *doc = NULL;
    sstore_row row;
    int rc, got;
    if ((rc = sstore_get(r->log, id, &row))) goto out;
    if (row.workflow[0]) doc = defs_workflow_get(r->log, row.workflow, row.wf_version, &got, &rc);
    input_cmd c = {answers, doc, skip_answered, json_array()};
    session_trace tr;
    trace_of(r, &tr);
    rc = sstore_command(r->log, id, &tr, decide_input, &c, at);
    json_decref(c.made);
out:
    json_decref(doc);
    if (rc) fail(r, rc);
    return rc ? -1 : 0;
}

int sessions_answer(req_t *r, const char *id, const char *interaction, json_t *response, offset_t *at)
{
    json_t *one = json_pack("[{s:O}]", "response", response);
    if (one && interaction) json_object_set_new(json_array_get(one, 0), "interactionId", json_string(interaction));
    int rc = sessions_answers(r, id, one, 0, at);
    json_decref(one);
    return rc;
}

int sessions_valid_answer(req_t *r, const json_t *iid, const json_t *resp, const json_t *reason)
{
    if (!json_is_string(iid) || json_string_length(iid) == 0 || json_string_length(iid) > 128 || !resp) {
        res_error(r, 400, "bad_input", "give interactionId (a string of 1 to 128 bytes) and response");
        return -1;
    }
    if (reason && (!json_is_string(reason) || json_string_length(reason) > SESSIONS_REASON_MAX)) {
        res_error(r, 400, "bad_input", "reason must be a string of at most %d bytes", SESSIONS_REASON_MAX);
        return -1;
    }
    return 0;
}

static void input(req_t *r, const char *id)
{
    json_t *body = req_json_object(r);
    if (!body) return;
    json_t *iid = json_object_get(body, "interactionId");
    json_t *resp = json_object_get(body, "response");
    json_t *reason = json_object_get(body, "reason");
    offset_t at;
    if (sessions_valid_answer(r, iid, resp, reason)) goto out;
    json_t *one = json_pack("[{s:O, s:O}]", "interactionId", iid, "response", resp);
    if (one && reason) json_object_set(json_array_get(one, 0), "reason", reason);
    if (!sessions_answers(r, id, one, 0, &at)) accepted(r, id, at);
    json_decref(one);
out:
    json_decref(body);
}

/* ---- signals ---------------------------------------------------------------------------- */

typedef struct signal_cmd {
    const char *name;
    const json_t *payload;
    const json_t *workflow;     /* the session's workflow document (NULL: a chat's) */
    int pending_max;
    json_t *made;               /* the payload of the event decided (it holds it) */
} signal_cmd;

/* A signal is recorded for a running workflow that waits for it somewhere; the
 * wait step open now (or the first reached later) takes it (lib/wsignal). */
static int decide_signal(void *ud, const session_view *v, sstore_event *ev, size_t *n)
{
    signal_cmd *c = ud;
    if (session_view_finished(v)) return E_FINISHED;
    if (v->cancel_requested) return E_CANCELLING;
    if (!v->is_workflow || !c->workflow || !wsignal_awaited(c->workflow, c->name)) return E_NOT_AWAITED;
    if (json_array_size(v->signals) >= (size_t)c->pending_max) return E_SIGNALS_FULL;
    ev[0] = event_signal_received(c->name, c->payload);
    json_decref(c->made);       /* a decide run again (the transaction retried) */
    c->made = ev[0].payload;
    *n = 1;
    return 0;
}

/* POST /v1/sessions/{id}/signals/{name}: the body (any JSON value; none: null) is
 * the payload. */
static void signal_session(req_t *r, const char *id, const char *name)
{
    json_t *payload = NULL, *doc = NULL;
    sstore_row row;
    offset_t at;
    int rc, got;
    if (!wsignal_valid_name(name)) {
        res_error(r, 400, "bad_signal_name", "a signal's name is 1 to 64 of A-Z a-z 0-9 _ . -");
        return;
    }
    buf_t b;
    size_t max = r->cfg->signal_payload_max;
    buf_init(&b, max ? max : 1);
    rc = req_body(r, &b);
    if (rc == BUF_ETOOBIG) {
        buf_free(&b);
        res_error(r, 413, "payload_too_large", "a signal's payload is at most %zu bytes (DSTREAM_SIGNAL_PAYLOAD_MAX)",
                  max);
        return;
    }
    if (rc == 0 && b.len) {
        const char *ct = req_header(r, "Content-Type");
        json_error_t e;
        if (!ct || !log_ctype_json(ct)) {
            buf_free(&b);
            res_error(r, 415, "unsupported_media_type", "send the payload as application/json");
            return;
        }
        payload = json_loadb(b.p, b.len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
        if (!payload) {
            buf_free(&b);
            res_error(r, 400, "invalid_json", "the payload is not valid JSON: %s", e.text);
            return;
        }
    } else if (rc) {
        buf_free(&b);
        res_error(r, 400, "invalid_json", "the payload could not be read");
        return;
    }
    buf_free(&b);
    if ((rc = sstore_get(r->log, id, &row))) goto out;
    if (row.workflow[0]) doc = defs_workflow_get(r->log, row.workflow, row.wf_version, &got, &rc);
    rc = 0;
    signal_cmd c = {name, payload, doc, r->cfg->signals_pending_max, NULL};
    session_trace tr;
    trace_of(r, &tr);
    rc = sstore_command(r->log, id, &tr, decide_signal, &c, &at);
    json_decref(c.made);
out:
    if (rc) fail(r, rc);
    else accepted(r, id, at);
    json_decref(doc);
    json_decref(payload);
}

static int decide_cancel(void *ud, const session_view *v, sstore_event *ev, size_t *n)
{
    (void)ud;
    if (session_view_finished(v)) return E_FINISHED;
    if (v->cancel_requested) {  /* already asked: nothing new to write */
        *n = 0;
        return 0;
    }
    ev[0] = event_cancel_requested();
    json_decref(ev[0].payload);   /* an empty payload: sstore writes {} */
    ev[0].payload = NULL;
    *n = 1;
    return 0;
}

/* A chat's reply under way stops; nothing under way (or already asked): nothing new
 * to write. */
static int decide_stop(void *ud, const session_view *v, sstore_event *ev, size_t *n)
{
    (void)ud;
    if (session_view_finished(v)) return E_FINISHED;
    if (v->cancel_requested) return E_CANCELLING;
    if (v->is_workflow) return E_NOT_CHAT;
    *n = 0;
    if (v->stop_requested || !session_view_replying(v)) return 0;
    ev[0] = event_stop_requested();
    json_decref(ev[0].payload);   /* an empty payload: sstore writes {} */
    ev[0].payload = NULL;
    *n = 1;
    return 0;
}

void sessions_stop(req_t *r, const char *id)
{
    session_trace tr;
    offset_t at;
    trace_of(r, &tr);
    int rc = sstore_command(r->log, id, &tr, decide_stop, NULL, &at);
    if (rc) fail(r, rc);
    else accepted(r, id, at);
}

/* What a compaction asked for will do: the offset its kept part starts at, and how
 * many history entries it summarizes. */
typedef struct compact_plan {
    char up_to[OFFSET_LEN + 1];
    size_t entries;
} compact_plan;

/* A chat with something to compact, and nothing under way: compact:requested (the
 * runner summarizes all but the last exchange). */
static int decide_compact(void *ud, const session_view *v, sstore_event *ev, size_t *n)
{
    compact_plan *plan = ud;
    if (session_view_finished(v)) return E_FINISHED;
    if (v->cancel_requested) return E_CANCELLING;
    if (v->is_workflow) return E_WORKFLOW;
    if (v->compact_requested || v->compact_reason[0]) return E_COMPACTING;
    if (session_view_replying(v) || v->status == SESSION_AWAITING_INPUT) return E_BUSY;
    ssize_t cut = compact_cut(v->messages, 0);
    if (cut < 0) return E_NOTHING;
    snprintf(plan->up_to, sizeof plan->up_to, "%s",
             json_string_value(json_object_get(json_array_get(v->messages, (size_t)cut), "offset")));
    plan->entries = 0;
    for (size_t i = 0; i < (size_t)cut; i++)
        if (compact_sent(json_array_get(v->messages, i))) plan->entries++;
    ev[0] = event_compact_requested();
    json_decref(ev[0].payload);   /* an empty payload: sstore writes {} */
    ev[0].payload = NULL;
    *n = 1;
    return 0;
}

void sessions_compact(req_t *r, const char *id)
{
    session_trace tr;
    offset_t at;
    compact_plan plan = {"", 0};
    char off[OFFSET_LEN + 1];
    trace_of(r, &tr);
    int rc = sstore_command(r->log, id, &tr, decide_compact, &plan, &at);
    if (rc) {
        fail(r, rc);
        return;
    }
    offset_format(at, off);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I}", "id", id, "offset", off, "queued", EV_COMPACT_REQUESTED, "upTo",
                          plan.up_to, "messages", (json_int_t)plan.entries);
    res_json(r, 202, o);
    json_decref(o);
}

void sessions_cancel(req_t *r, const char *id)
{
    session_trace tr;
    offset_t at;
    trace_of(r, &tr);
    int rc = sstore_command(r->log, id, &tr, decide_cancel, NULL, &at);
    if (rc) fail(r, rc);
    else accepted(r, id, at);
}

int sessions_fork(req_t *r, const char *id, const json_t *idj, int has_at, offset_t at, const json_t *rec,
                  char nid[SSTORE_ID_MAX])
{
    sstore_create_req cr;
    memset(&cr, 0, sizeof cr);
    cr.has_at = has_at;
    cr.at = at;
    if (sessions_new_id(r, idj, nid, SSTORE_ID_MAX)) return -1;
    session_trace tr;
    trace_of(r, &tr);
    cr.id = nid;
    cr.forked_recording = (json_t *)rec;
    cr.parent = id;
    cr.trace = &tr;
    int rc = sstore_create(r->log, &cr);
    if (rc == LOG_ERANGE) res_error(r, 400, "bad_offset", "at is beyond the session's last event");
    else if (rc == LOG_ECONFLICT) res_error(r, 409, "session_exists", "a session %s exists", nid);
    else if (rc) fail(r, rc);
    return rc ? -1 : 0;
}

static void fork_session(req_t *r, const char *id)
{
    json_t *body = req_json_object(r);
    if (!body) return;
    json_t *atj = json_object_get(body, "at"), *idj = json_object_get(body, "id"), *rec = NULL;
    char nid[SSTORE_ID_MAX];
    offset_t at = {0, 0};
    int rc;
    if (atj) {
        if (!json_is_string(atj)) {
            res_error(r, 400, "bad_offset", "at must be an offset string");
            goto out;
        }
        if (parse_at(r, json_string_value(atj), (int)json_string_length(atj), &at)) goto out;
    }
    if (idj && (!json_is_string(idj) || !sstore_valid_id(json_string_value(idj)))) {
        res_error(r, 400, "bad_id", "id must be 1 to 63 of [A-Za-z0-9_-]");
        goto out;
    }
    if (recording_setting(r, body, &rec) || sessions_fork(r, id, idj, atj != NULL, at, rec, nid)) goto out;
    sstore_row row;
    session_view v;
    offset_t pos = {0, 0};
    session_view_init(&v);
    if ((rc = sstore_get(r->log, nid, &row)) || (rc = sstore_view(r->log, nid, 0, pos, &v, &pos)))
        reply_fail(r, rc);
    else {
        res_headerf(r, "Location", "/v1/sessions/%s", nid);
        json_t *j = sstore_session_json(&row, &v, pos);
        res_json(r, 201, j);
        json_decref(j);
    }
    session_view_free(&v);
out:
    json_decref(rec);
    json_decref(body);
}

const char *sessions_path_id(req_t *r, const char *path, char id[SSTORE_ID_MAX])
{
    size_t n = strcspn(path, "/");
    if (n == 0 || n >= SSTORE_ID_MAX) {
        res_error(r, 404, "not_found", "no such session");
        return NULL;
    }
    memcpy(id, path, n);
    id[n] = '\0';
    if (!sstore_valid_id(id)) {
        res_error(r, 404, "not_found", "no such session");
        return NULL;
    }
    return path + n;
}

void sessions_handle(req_t *r, const char *rest)
{
    const char *m = r->method;
    if (!rest) {
        if (!strcmp(m, "GET")) list(r);
        else if (!strcmp(m, "POST")) create(r);
        else {
            res_method_not_allowed(r, "GET, POST");
        }
        return;
    }
    char id[SSTORE_ID_MAX];
    const char *sub = sessions_path_id(r, rest, id);
    if (!sub) return;
    if (!strcmp(m, "POST") && (!*sub || !strcmp(sub, "/")) && sessions_bulk_action(id)) {
        sessions_bulk(r, id);
        return;
    }
    if (*sub) sub++;
    static const struct {
        const char *sub, *method;
        void (*fn)(req_t *, const char *);
    } routes[] = {{"messages", "POST", message}, {"input", "POST", input},
                  {"cancel", "POST", sessions_cancel},    {"stop", "POST", sessions_stop},
                  {"compact", "POST", sessions_compact},
                  {"fork", "POST", fork_session}, {"events", "GET", events},
                  {"drift", "GET", recording_drift}, {"lineage", "GET", lineage},
                  {"diff", "GET", diff}, {"proof", "GET", proof}};
    if (!*sub) {
        if (!strcmp(m, "GET")) get(r, id, 0);
        else if (!strcmp(m, "DELETE")) {
            int rc = sstore_delete(r->log, id);
            if (rc) fail(r, rc);
            else {
                res_status(r, 204);
                res_end(r);
            }
        } else {
            res_method_not_allowed(r, "GET, DELETE");
        }
        return;
    }
    if (!strcmp(sub, "state")) {
        if (strcmp(m, "GET")) {
            res_method_not_allowed(r, "GET");
        } else {
            get(r, id, 1);
        }
        return;
    }
    if (!strncmp(sub, "signals/", 8)) {
        if (strcmp(m, "POST")) res_method_not_allowed(r, "POST");
        else signal_session(r, id, sub + 8);
        return;
    }
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(sub, routes[i].sub)) continue;
        if (strcmp(m, routes[i].method)) {
            res_method_not_allowed(r, routes[i].method);
            return;
        }
        routes[i].fn(r, id);
        return;
    }
    res_error(r, 404, "not_found", "no resource %s under a session", sub);
}

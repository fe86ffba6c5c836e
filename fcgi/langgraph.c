/* /v1/langgraph: what the LangGraph SDK's Client (@langchain/langgraph-sdk) calls, over
 * sessions (docs/clients.md). A thin mapping: an assistant is an agent or a workflow
 * (read-only), a thread is a session (its id the session's), a checkpoint a position
 * in its log, a run a user message and its reply (a workflow's: its start, or the
 * answer that resumes it), read from the log by frame_lgraph. Same scopes as the
 * sessions: reading a thread needs sessions:read on its id, writing it (a run, a
 * cancel, a delete) sessions:write.
 *
 *   POST /assistants/search, GET /assistants/{id}          agents, then workflows
 *   POST /threads, /threads/search; GET, DELETE /threads/{id}
 *   GET  /threads/{id}/state[/{checkpoint}], POST /threads/{id}/history, /copy (a fork)
 *   POST /threads/{id}/runs, /runs/stream, /runs/wait
 *   GET  /threads/{id}/runs/{run}, /join, /stream; POST /threads/{id}/runs/{run}/cancel */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/defs.h"
#include "../lib/sstore.h"
#include "../lib/timefmt.h"
#include "access.h"
#include "lgraph.h"
#include "live.h"
#include "reply.h"
#include "router.h"
#include "sessions.h"

#define LIST_MAX 100            /* a search's limit */
#define OFFSET_SKIP_MAX 1000    /* a search's offset */
#define SEARCH_SCAN_MAX 2000    /* sessions a thread search looks at */
#define HISTORY_MAX 100         /* states a history answers */

static void not_found(req_t *r, const char *what)
{
    res_error(r, 404, "not_found", "no such %s", what);
}

/* ---- assistants ------------------------------------------------------------------------- */

static json_t *assistant(const char *name, const char *kind, int version, int64_t created, int64_t updated)
{
    char c[32], u[32];
    timefmt_format(created, c, sizeof c);
    timefmt_format(updated, u, sizeof u);
    return json_pack("{s:s, s:s, s:s, s:{}, s:{}, s:{s:s}, s:i, s:s, s:s}", "assistant_id", name, "graph_id", name,
                     "name", name, "config", "context", "metadata", "kind", kind, "version", version, "created_at", c,
                     "updated_at", u);
}

/* Every agent, then every workflow, as assistants (an agent's name first). NULL after
 * answering the store's error. */
static json_t *assistants(req_t *r)
{
    json_t *agents = json_array(), *wfs = json_array(), *all = json_array(), *a;
    size_t i;
    int rc = defs_agent_list(r->log, agents);
    if (!rc) rc = defs_workflow_list(r->log, wfs);
    if (rc) {
        reply_fail(r, rc);
        json_decref(all);
        all = NULL;
        goto out;
    }
    json_array_foreach(agents, i, a) {
        json_int_t c = json_integer_value(json_object_get(a, "createdMs"));
        json_int_t u = json_integer_value(json_object_get(a, "updatedMs"));
        json_array_append_new(all, assistant(json_string_value(json_object_get(a, "name")), "agent", 1, c, u ? u : c));
    }
    json_array_foreach(wfs, i, a) {
        json_int_t c = json_integer_value(json_object_get(a, "createdMs"));
        json_array_append_new(all, assistant(json_string_value(json_object_get(a, "name")), "workflow",
                                             (int)json_integer_value(json_object_get(a, "latestVersion")), c, c));
    }
out:
    json_decref(agents);
    json_decref(wfs);
    return all;
}

/* The assistant named name (an agent's before a workflow's), or NULL. Borrowed from all. */
static json_t *find_assistant(json_t *all, const char *name)
{
    json_t *a;
    size_t i;
    json_array_foreach(all, i, a) if (!strcmp(json_string_value(json_object_get(a, "assistant_id")), name)) return a;
    return NULL;
}

/* limit and offset of a search body into *limit, *skip. -1 after answering 400. */
static int paging(req_t *r, const json_t *body, size_t *limit, size_t *skip)
{
    json_t *l = json_object_get(body, "limit"), *o = json_object_get(body, "offset");
    *limit = 10;
    *skip = 0;
    if ((l && (!json_is_integer(l) || json_integer_value(l) < 1 || json_integer_value(l) > LIST_MAX)) ||
        (o && (!json_is_integer(o) || json_integer_value(o) < 0 || json_integer_value(o) > OFFSET_SKIP_MAX))) {
        res_error(r, 400, "bad_limit", "limit must be 1 to %d and offset 0 to %d", LIST_MAX, OFFSET_SKIP_MAX);
        return -1;
    }
    if (l) *limit = (size_t)json_integer_value(l);
    if (o) *skip = (size_t)json_integer_value(o);
    return 0;
}

/* A string field of a search body: NULL when absent or null; -1 (answered 400) when
 * not a string. */
static int opt_string(req_t *r, const json_t *body, const char *key, const char **out)
{
    json_t *v = json_object_get(body, key);
    *out = json_is_string(v) ? json_string_value(v) : NULL;
    if (v && !json_is_null(v) && !json_is_string(v)) {
        res_error(r, 400, "bad_request", "%s must be a string", key);
        return -1;
    }
    return 0;
}

static void assistants_search(req_t *r)
{
    json_t *body = req_json_object(r), *all = NULL, *out = NULL, *a;
    const char *graph, *name;
    size_t limit, skip, i;
    if (!body) return;
    if (paging(r, body, &limit, &skip) || opt_string(r, body, "graph_id", &graph) ||
        opt_string(r, body, "name", &name) || !(all = assistants(r)))
        goto out;
    out = json_array();
    json_array_foreach(all, i, a) {
        const char *id = json_string_value(json_object_get(a, "assistant_id"));
        if ((graph && strcmp(graph, id)) || (name && !strstr(id, name))) continue;
        if (skip) {
            skip--;
            continue;
        }
        if (json_array_size(out) < limit) json_array_append(out, a);
    }
    res_json(r, 200, out);
out:
    json_decref(out);
    json_decref(all);
    json_decref(body);
}

static void assistants_handle(req_t *r, const char *rest)
{
    if (!strcmp(rest, "search")) {
        assistants_search(r);
        return;
    }
    json_t *all = assistants(r), *a;
    if (!all) return;
    if ((a = find_assistant(all, rest))) res_json(r, 200, a);
    else not_found(r, "assistant");
    json_decref(all);
}

/* ---- threads ---------------------------------------------------------------------------- */

/* 1 if name is an agent's, 0 if not, -1 after answering the store's error. */
static int is_agent(req_t *r, const char *name)
{
    int rc;
    json_t *doc = defs_agent_get(r->log, name, &rc);
    json_decref(doc);
    if (doc) return 1;
    if (rc == LOG_ENOTFOUND) return 0;
    reply_fail(r, rc);
    return -1;
}

static json_t *checkpoint(const char *id, offset_t at)
{
    char off[OFFSET_LEN + 1];
    offset_format(at, off);
    return json_pack("{s:s, s:s, s:s, s:n}", "thread_id", id, "checkpoint_ns", "", "checkpoint_id", off,
                     "checkpoint_map");
}

/* The thread that session row is, its view v. */
static json_t *thread_json(const sstore_row *row, const session_view *v)
{
    char c[32], u[32];
    const char *graph = row->workflow[0] ? row->workflow : row->agent;
    timefmt_format(row->created_ms, c, sizeof c);
    timefmt_format(row->updated_ms, u, sizeof u);
    json_t *ints = json_object(), *pending = lgraph_interrupts(v);
    json_t *iid = json_object_get(v->pending, PK_INTERACTION_ID);
    if (json_array_size(pending)) json_object_set(ints, json_is_string(iid) ? json_string_value(iid) : "input", pending);
    json_decref(pending);
    json_t *md = json_pack("{s:s, s:s}", "graph_id", graph, "assistant_id", graph);
    if (row->parent[0]) json_object_set_new(md, "forked_from", json_string(row->parent));
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o, s:{}}", "thread_id", row->id, "created_at", c,
                     "updated_at", u, "state_updated_at", u, "metadata", md, "status", lgraph_status(v), "values",
                     lgraph_values(v), "interrupts", ints, "config");
}

/* Row and view of thread id (at `at` when has_at; *pos where the view is). 0, or -1
 * after answering 404 (no such thread), 400 (a checkpoint not of it) or 5xx. */
static int thread_view(req_t *r, const char *id, int has_at, offset_t at, sstore_row *row, session_view *v,
                       offset_t *pos)
{
    int rc = sstore_get(r->log, id, row);
    if (!rc) rc = sstore_view(r->log, id, has_at, at, v, pos);
    if (rc == LOG_ENOTFOUND) not_found(r, "thread");
    else if (rc == LOG_ERANGE || rc == LOG_EOFFSET) res_error(r, 400, "bad_checkpoint", "no such checkpoint in thread %s", id);
    else if (rc) reply_fail(r, rc);
    return rc ? -1 : 0;
}

/* Answer thread id as it is now (status). */
static void answer_thread(req_t *r, const char *id, int status)
{
    sstore_row row;
    session_view v;
    offset_t none = {0, 0};
    session_view_init(&v);
    if (!thread_view(r, id, 0, none, &row, &v, NULL)) {
        json_t *t = thread_json(&row, &v);
        res_json(r, status, t);
        json_decref(t);
    }
    session_view_free(&v);
}

/* POST /threads {thread_id, metadata: {graph_id}, if_exists}: with graph_id an agent,
 * its chat now; else the thread is made by its first run (nothing is written). */
static void thread_create(req_t *r)
{
    json_t *body = req_json_object(r), *idj, *md;
    const char *graph = NULL, *exists = NULL;
    char id[SSTORE_ID_MAX];
    sstore_row row;
    int rc;
    if (!body) return;
    idj = json_object_get(body, "thread_id");
    md = json_object_get(body, "metadata");
    if (json_is_null(idj)) idj = NULL;
    if (idj && (!json_is_string(idj) || !sstore_valid_id(json_string_value(idj)))) {
        res_error(r, 400, "bad_id", "thread_id must be 1 to 63 of [A-Za-z0-9_-]");
        goto out;
    }
    if ((md && !json_is_null(md) && !json_is_object(md)) || opt_string(r, md, "graph_id", &graph) ||
        opt_string(r, body, "if_exists", &exists))
        goto out;
    if (exists && strcmp(exists, "raise") && strcmp(exists, "do_nothing")) {
        res_error(r, 400, "bad_if_exists", "if_exists must be raise or do_nothing");
        goto out;
    }
    if (sessions_new_id(r, idj, id, sizeof id)) goto out;
    rc = sstore_get(r->log, id, &row);
    if (!rc) {
        /* The thread there is answered only to a token that may read it. */
        if (!exists || strcmp(exists, "do_nothing")) res_error(r, 409, "thread_exists", "a thread %s exists", id);
        else if (req_allow(r, "sessions:read", id)) answer_thread(r, id, 200);
        goto out;
    }
    if (rc != LOG_ENOTFOUND) {
        reply_fail(r, rc);
        goto out;
    }
    if (graph) {
        int agent = is_agent(r, graph);
        if (agent < 0) goto out;
        if (agent) {
            if (!sessions_create(r, id, 1, graph, NULL, NULL, NULL, NULL)) answer_thread(r, id, 200);
            goto out;
        }
    }
    char now[32];
    timefmt_format(timefmt_now_ms(), now, sizeof now);
    json_t *t = json_pack("{s:s, s:s, s:s, s:s, s:O, s:s, s:{}, s:{}, s:{}}", "thread_id", id, "created_at", now,
                          "updated_at", now, "state_updated_at", now, "metadata", md ? md : json_null(), "status",
                          "idle", "values", "interrupts", "config");
    res_json(r, 200, t);
    json_decref(t);
out:
    json_decref(body);
}

static int readable(void *ud, const char *id)
{
    return access_allows(ud, "sessions:read", id);
}

/* Append thread id to out if it passes the filters (status, graph; NULL: any). 0, or
 * the store's error (a thread gone since it was listed is skipped). */
static int add_thread(req_t *r, json_t *out, const char *id, const char *status, const char *graph)
{
    sstore_row row;
    session_view v;
    offset_t none = {0, 0};
    session_view_init(&v);
    int rc = sstore_get(r->log, id, &row);
    if (!rc) rc = sstore_view(r->log, id, 0, none, &v, NULL);
    if (!rc && (!status || !strcmp(status, lgraph_status(&v))) &&
        (!graph || !strcmp(graph, row.workflow[0] ? row.workflow : row.agent)))
        json_array_append_new(out, thread_json(&row, &v));
    session_view_free(&v);
    return rc == LOG_ENOTFOUND ? 0 : rc;
}

/* POST /threads/search {ids, metadata: {graph_id}, status, limit, offset}: the threads
 * the token may read, newest first. */
static void thread_search(req_t *r)
{
    json_t *body = req_json_object(r), *out = json_array(), *ids, *md, *page = NULL, *s;
    const char *status = NULL, *graph = NULL;
    char cursor[160] = "", next[160];
    size_t limit, skip, i;
    int rc = 0;
    if (!body) goto out;
    ids = json_object_get(body, "ids");
    md = json_object_get(body, "metadata");
    if (paging(r, body, &limit, &skip) || opt_string(r, body, "status", &status) ||
        (md && !json_is_null(md) && !json_is_object(md)) || opt_string(r, md, "graph_id", &graph))
        goto out;
    if (ids && !json_is_null(ids) && (!json_is_array(ids) || json_array_size(ids) > LIST_MAX)) {
        res_error(r, 400, "bad_ids", "ids must be an array of at most %d thread ids", LIST_MAX);
        goto out;
    }
    if (json_is_array(ids)) {
        json_array_foreach(ids, i, s) {
            const char *id = json_string_value(s);
            if (!id || !sstore_valid_id(id) || !readable(r, id)) continue;
            if ((rc = add_thread(r, out, id, status, graph))) break;
        }
    } else {
        /* Pages of sessions the token may read until offset + limit are in, looking
         * at SEARCH_SCAN_MAX of them at most (each a view): a filter that matches few
         * answers what the newest of them hold. */
        size_t scanned = 0;
        do {
            json_decref(page);
            page = json_array();
            rc = sstore_list_filtered(r->log, NULL, cursor, LIST_MAX, readable, r, page, next, sizeof next);
            json_array_foreach(page, i, s) {
                if (rc || json_array_size(out) >= skip + limit || scanned++ >= SEARCH_SCAN_MAX) break;
                rc = add_thread(r, out, json_string_value(json_object_get(s, "id")), status, graph);
            }
            snprintf(cursor, sizeof cursor, "%s", next);
        } while (!rc && next[0] && json_array_size(out) < skip + limit && scanned < SEARCH_SCAN_MAX);
    }
    if (rc) {
        reply_fail(r, rc);
        goto out;
    }
    json_t *res = json_array();
    for (i = skip; i < json_array_size(out) && json_array_size(res) < limit; i++)
        json_array_append(res, json_array_get(out, i));
    res_json(r, 200, res);
    json_decref(res);
out:
    json_decref(page);
    json_decref(out);
    json_decref(body);
}

/* A ThreadState: v at checkpoint `at` of thread id; parent: the one before, or NULL. */
static json_t *state_json(const char *id, const session_view *v, offset_t at, const offset_t *parent)
{
    json_t *tasks = json_array(), *ints = lgraph_interrupts(v), *next = json_array();
    if (json_array_size(ints) || v->status == SESSION_PENDING || v->status == SESSION_RUNNING) {
        const char *name = v->is_workflow ? (v->phase[0] ? v->phase : "workflow") : "agent";
        json_array_append_new(next, json_string(name));
        json_array_append_new(tasks, json_pack("{s:s, s:s, s:n, s:O, s:n, s:n}", "id", name, "name", name, "error",
                                               "interrupts", ints, "checkpoint", "state"));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:{s:i}, s:n, s:o, s:o}", "values", lgraph_values(v), "next", next, "tasks",
                     tasks, "checkpoint", checkpoint(id, at), "metadata", "step", (int)v->events, "created_at",
                     "parent_checkpoint", parent ? checkpoint(id, *parent) : json_null(), "interrupts", ints);
}

/* A checkpoint id (an offset of the thread's log) into *at. -1 after answering 400. */
static int parse_checkpoint(req_t *r, const char *s, offset_t *at)
{
    offset_kind k;
    if (!s || offset_parse(s, strlen(s), &k, at) || k != OFFSET_AT) {
        res_error(r, 400, "bad_checkpoint", "a checkpoint_id is an offset the server returned");
        return -1;
    }
    return 0;
}

static void thread_state(req_t *r, const char *id, const char *ckpt)
{
    sstore_row row;
    session_view v;
    offset_t at = {0, 0}, pos;
    if (ckpt && parse_checkpoint(r, ckpt, &at)) return;
    session_view_init(&v);
    if (!thread_view(r, id, ckpt != NULL, at, &row, &v, &pos)) {
        json_t *s = state_json(id, &v, pos, NULL);
        res_json(r, 200, s);
        json_decref(s);
    }
    session_view_free(&v);
}

/* The checkpoint id of a config ({configurable: {checkpoint_id}} or {checkpoint_id}),
 * or NULL. */
static const char *config_checkpoint(const json_t *c)
{
    json_t *conf = json_object_get(c, "configurable");
    json_t *id = json_object_get(conf ? conf : c, "checkpoint_id");
    return json_string_value(id);
}

/* POST /threads/{id}/history {limit, before}: the thread's states, newest first: now,
 * then before each user message of a chat (each turn's start), back to the first. */
static void thread_history(req_t *r, const char *id)
{
    json_t *body = req_json_object(r), *out = NULL, *l, *before;
    sstore_row row;
    session_view v;
    offset_t none = {0, 0}, pos, marks[HISTORY_MAX + 1], limit_at = {0, 0};
    size_t n = 0, limit = 10;
    int has_before = 0;
    session_view_init(&v);
    if (!body) goto out;
    l = json_object_get(body, "limit");
    before = json_object_get(body, "before");
    if (l && (!json_is_integer(l) || json_integer_value(l) < 1 || json_integer_value(l) > HISTORY_MAX)) {
        res_error(r, 400, "bad_limit", "limit must be 1 to %d", HISTORY_MAX);
        goto out;
    }
    if (l) limit = (size_t)json_integer_value(l);
    if (before && !json_is_null(before)) {
        if (parse_checkpoint(r, config_checkpoint(before), &limit_at)) goto out;
        has_before = 1;
    }
    if (thread_view(r, id, 0, none, &row, &v, &pos)) goto out;
    /* The checkpoints: the tail, then each user message's offset, newest first. */
    if (!has_before || pos.seq < limit_at.seq) marks[n++] = pos;
    for (size_t i = json_array_size(v.messages); i-- > 0 && n < limit + 1;) {
        json_t *m = json_array_get(v.messages, i);
        const char *off = json_string_value(json_object_get(m, "offset"));
        offset_kind k;
        offset_t at;
        if (!off || offset_parse(off, strlen(off), &k, &at) || k != OFFSET_AT) continue;
        if ((n && at.seq >= marks[n - 1].seq) || (has_before && at.seq >= limit_at.seq)) continue;
        marks[n++] = at;
    }
    out = json_array();
    for (size_t i = 0; i < n && i < limit; i++) {
        session_view h;
        session_view_init(&h);
        int rc = i == 0 && !has_before ? 0 : sstore_view(r->log, id, 1, marks[i], &h, NULL);
        if (rc) {
            session_view_free(&h);
            reply_fail(r, rc);
            goto out;
        }
        json_array_append_new(out, state_json(id, i == 0 && !has_before ? &v : &h, marks[i],
                                              i + 1 < n ? &marks[i + 1] : NULL));
        session_view_free(&h);
    }
    res_json(r, 200, out);
out:
    session_view_free(&v);
    json_decref(out);
    json_decref(body);
}

/* POST /threads/{id}/copy: a fork at its tail under a fresh id. */
static void thread_copy(req_t *r, const char *id)
{
    char nid[SSTORE_ID_MAX];
    offset_t none = {0, 0};
    if (!sessions_fork(r, id, NULL, 0, none, NULL, nid)) answer_thread(r, nid, 200);
}

static void thread_delete(req_t *r, const char *id)
{
    int rc = sstore_delete(r->log, id);
    if (rc == LOG_ENOTFOUND) not_found(r, "thread");
    else if (rc) reply_fail(r, rc);
    else {
        res_status(r, 204);
        res_end(r);
    }
}

/* ---- runs ------------------------------------------------------------------------------- */

/* The text of a message's content: a string, or an array of {type: "text", text}. A
 * new string, or NULL after answering 400. */
static json_t *message_text(req_t *r, const json_t *m)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    const char *type = json_string_value(json_object_get(m, "type"));
    json_t *c = json_object_get(m, "content");
    if (!json_is_object(m) || !((role && (!strcmp(role, "user") || !strcmp(role, "human"))) ||
                                (type && !strcmp(type, "human")))) {
        res_error(r, 400, "bad_messages", "the last of input.messages must be the user's: {\"role\": \"user\", \"content\": ...}");
        return NULL;
    }
    if (json_is_string(c)) {
        if (json_string_length(c) == 0 || json_string_length(c) > SESSIONS_CONTENT_MAX) {
            res_error(r, 400, "bad_content", "the user's message must have 1 to %d bytes of text", SESSIONS_CONTENT_MAX);
            return NULL;
        }
        return json_incref(c);
    }
    if (!json_is_array(c)) {
        res_error(r, 400, "bad_content", "content must be a string or an array of text parts");
        return NULL;
    }
    return sessions_text_parts(r, c, "content");
}

/* The stream modes of v (a string or an array; absent: values) into *modes. -1 after
 * answering 400. */
static int stream_modes(req_t *r, const json_t *v, uint64_t *modes)
{
    json_t *one;
    size_t i, n = json_is_array(v) ? json_array_size(v) : 1;
    *modes = 0;
    if (!v || json_is_null(v)) {
        *modes = FRAME_LG_VALUES;
        return 0;
    }
    for (i = 0; i < n; i++) {
        one = json_is_array(v) ? json_array_get(v, i) : (json_t *)v;
        const char *m = json_string_value(one);
        if (m && !strcmp(m, "values")) *modes |= FRAME_LG_VALUES;
        else if (m && !strcmp(m, "messages-tuple")) *modes |= FRAME_LG_MESSAGES;
        else if (m && !strcmp(m, "updates")) *modes |= FRAME_LG_UPDATES;
        else if (m && !strcmp(m, "events")) *modes |= FRAME_LG_EVENTS;
        else {
            res_error(r, 400, "unsupported_stream_mode", "stream_mode: values, messages-tuple, updates and events are supported");
            return -1;
        }
    }
    return 0;
}

/* Serve the run of thread id that begins at `at` (kind: OFFSET_START for a workflow's
 * first) through fr with modes, sending nothing of the events before skip_seq (a
 * reconnection's; 0: all). */
static void serve_run(req_t *r, const char *id, offset_kind kind, offset_t at, const framer *fr, uint64_t modes,
                      uint64_t skip_seq)
{
    char path[SSTORE_ID_MAX + 16];
    snprintf(path, sizeof path, "sessions/%s", id);
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = path;
    rr.kind = kind;
    rr.from = at;
    frame_t f;
    frame_init(&f, fr, 0);
    f.lg.modes = modes;
    f.lg.skip_seq = skip_seq;
    live_run(r, &rr, &f);
}

static json_t *run_json(const char *id, const char *assistant, offset_t at, const char *status, const char *strategy)
{
    char run[OFFSET_LEN + 1], now[32];
    offset_format(at, run);
    timefmt_format(timefmt_now_ms(), now, sizeof now);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{}, s:s}", "run_id", run, "thread_id", id, "assistant_id",
                     assistant, "created_at", now, "updated_at", now, "status", status, "metadata",
                     "multitask_strategy", strategy);
}

typedef enum { RUN_CREATE, RUN_STREAM, RUN_WAIT } run_kind;

/* Start the run a body asks for on thread id: a chat's user message (the thread made
 * with the assistant's agent on first use), a workflow's start (the thread made by
 * it, input its input) or the answer to its interrupt (command.resume). *kind and
 * *at: where the run begins. 0, or -1 after answering. */
static int start_run(req_t *r, const char *id, const json_t *body, const char *assistant, const char *strategy,
                     offset_kind *kind, offset_t *at)
{
    json_t *input = json_object_get(body, "input"), *command = json_object_get(body, "command"), *content = NULL;
    sstore_row row;
    int rc = sstore_get(r->log, id, &row), ret = -1;
    *kind = OFFSET_AT;
    if (json_is_null(input)) input = NULL;
    if (json_is_null(command)) command = NULL;
    /* A run from an earlier checkpoint would branch the thread: a fork does that. */
    json_t *ck = json_object_get(body, "checkpoint"), *ckid = json_object_get(body, "checkpoint_id");
    if ((ck && !json_is_null(ck)) || (ckid && !json_is_null(ckid))) {
        res_error(r, 400, "unsupported_checkpoint", "a run goes on from the thread's end: copy the thread (a fork) to branch it");
        return -1;
    }
    if (command && (!json_is_object(command) || !json_object_get(command, "resume"))) {
        res_error(r, 400, "bad_command", "command must be {\"resume\": ...}: goto and update are not supported");
        return -1;
    }
    if (rc && rc != LOG_ENOTFOUND) {
        reply_fail(r, rc);
        return -1;
    }
    if (command) {
        if (rc) not_found(r, "thread");
        else ret = sessions_answer(r, id, NULL, json_object_get(command, "resume"), at);
        return ret;
    }
    int chat = rc ? is_agent(r, assistant) : !row.workflow[0];
    if (chat < 0) return -1;
    if (!chat) {
        /* A workflow runs once, from its start: its thread is made by the run. */
        if (!rc) {
            res_error(r, 409, "thread_busy", "thread %s is a workflow's run: answer its interrupt with command.resume", id);
            return -1;
        }
        if (input && !json_is_object(input)) {
            res_error(r, 400, "bad_input", "input must be an object");
            return -1;
        }
        if (sessions_create(r, id, 0, assistant, input, NULL, NULL, NULL)) return -1;
        *kind = OFFSET_START;
        at->seq = at->pos = 0;
        return 0;
    }
    json_t *msgs = json_object_get(input, "messages");
    if (!json_is_object(input) || !json_is_array(msgs) || json_array_size(msgs) == 0) {
        res_error(r, 400, "bad_messages", "input.messages must be a non-empty array (the last the user's message)");
        return -1;
    }
    if (!(content = message_text(r, json_array_get(msgs, json_array_size(msgs) - 1)))) return -1;
    if (rc) rc = sessions_open_chat(r, id, assistant, &row);
    else if (strcmp(row.agent, assistant)) {
        res_error(r, 409, "assistant_mismatch", "thread %s is a chat with %s, not %s", id, row.agent, assistant);
        rc = -1;
    }
    if (!rc) rc = sessions_say(r, id, content, NULL, strcmp(strategy, "interrupt") && strcmp(strategy, "rollback"), at);
    json_decref(content);
    return rc ? -1 : 0;
}

static void run_post(req_t *r, const char *id, run_kind what)
{
    json_t *body = req_json_object(r);
    const char *assistant, *strategy;
    uint64_t modes = 0;
    offset_kind kind;
    offset_t at;
    if (!body) return;
    if (opt_string(r, body, "assistant_id", &assistant) || opt_string(r, body, "multitask_strategy", &strategy) ||
        (what == RUN_STREAM && stream_modes(r, json_object_get(body, "stream_mode"), &modes)))
        goto out;
    if (!assistant) {
        res_error(r, 400, "bad_assistant", "assistant_id (an agent's or a workflow's name) is required");
        goto out;
    }
    if (!strategy) strategy = "interrupt";
    if (strcmp(strategy, "interrupt") && strcmp(strategy, "rollback") && strcmp(strategy, "reject") &&
        strcmp(strategy, "enqueue")) {
        res_error(r, 400, "bad_multitask_strategy", "multitask_strategy must be reject, interrupt, rollback or enqueue");
        goto out;
    }
    if (start_run(r, id, body, assistant, strategy, &kind, &at)) goto out;
    if (what == RUN_CREATE) {
        json_t *run = run_json(id, assistant, at, "pending", strategy);
        char off[OFFSET_LEN + 1];
        offset_format(at, off);
        res_headerf(r, "Content-Location", "/v1/langgraph/threads/%s/runs/%s", id, off);
        res_json(r, 200, run);
        json_decref(run);
    } else {
        serve_run(r, id, kind, at, what == RUN_WAIT ? &frame_lgraph_wait : &frame_lgraph, modes, 0);
    }
out:
    json_decref(body);
}

/* The run at `run` of thread id is under way: the last user message of a chat and its
 * reply not over, or a workflow not waiting nor over. */
static const char *run_status(const session_view *v, offset_t run)
{
    if (v->is_workflow) {
        if (v->status == SESSION_AWAITING_INPUT) return "interrupted";
        if (v->status == SESSION_FAILED) return "error";
        return v->status == SESSION_PENDING || v->status == SESSION_RUNNING ? "running" : "success";
    }
    for (size_t i = json_array_size(v->messages); i-- > 0;) {
        json_t *m = json_array_get(v->messages, i);
        const char *off = json_string_value(json_object_get(m, "offset"));
        const char *role = json_string_value(json_object_get(m, "role"));
        offset_kind k;
        offset_t at;
        if (!role || strcmp(role, "user") || !off || offset_parse(off, strlen(off), &k, &at)) continue;
        if (at.seq != run.seq) return "success";      /* a later message's */
        if (session_view_replying(v)) return "running";
        return v->status == SESSION_FAILED ? "error" : "success";
    }
    return "success";
}

static void run_get(req_t *r, const char *id, const char *run, const char *sub)
{
    sstore_row row;
    session_view v;
    offset_t at, none = {0, 0};
    char qs[32];
    /* Every mode unless one is named (several: every mode too; a reconnection names
     * none). */
    uint64_t modes = FRAME_LG_VALUES | FRAME_LG_MESSAGES | FRAME_LG_UPDATES;
    if (parse_checkpoint(r, run, &at)) return;
    if (!strcmp(sub, "/cancel")) {
        /* A chat's run stops (the chat goes on); a workflow's is cancelled. */
        if (sstore_get(r->log, id, &row)) not_found(r, "thread");
        else if (row.workflow[0]) sessions_cancel(r, id);
        else sessions_stop(r, id);
        return;
    }
    if (!strcmp(sub, "/join") || !strcmp(sub, "/stream")) {
        int n = req_query(r, "stream_mode", qs, sizeof qs);
        if (n == -2) {
            res_error(r, 400, "unsupported_stream_mode", "stream_mode: values, messages-tuple, updates and events are supported");
            return;
        }
        if (n >= 0) {
            json_t *m = json_string(qs);
            int bad = stream_modes(r, m, &modes);
            json_decref(m);
            if (bad) return;
        }
        /* A reconnecting SDK sends the id of the last event it had. */
        const char *last = !strcmp(sub, "/stream") ? req_header(r, "Last-Event-ID") : NULL;
        offset_t seen = {0, 0};
        if (last && parse_checkpoint(r, last, &seen)) return;
        if (sstore_get(r->log, id, &row)) {
            not_found(r, "thread");
            return;
        }
        serve_run(r, id, at.seq ? OFFSET_AT : OFFSET_START, at, !strcmp(sub, "/join") ? &frame_lgraph_wait : &frame_lgraph,
                  modes, seen.seq);
        return;
    }
    session_view_init(&v);
    if (!thread_view(r, id, 0, none, &row, &v, NULL)) {
        if (at.seq >= v.events) {
            not_found(r, "run");
        } else {
            json_t *j = run_json(id, row.workflow[0] ? row.workflow : row.agent, at, run_status(&v, at), "interrupt");
            res_json(r, 200, j);
            json_decref(j);
        }
    }
    session_view_free(&v);
}

/* GET /threads/{id}/runs[?limit=&offset=]: newest first, a chat's user messages (not
 * background ones), a workflow's start. */
static void run_list(req_t *r, const char *id)
{
    sstore_row row;
    session_view v;
    offset_t none = {0, 0};
    char q[16];
    long lim[2] = {10, 0};
    static const char *const names[] = {"limit", "offset"};
    for (int k = 0; k < 2; k++) {
        int n = req_query(r, names[k], q, sizeof q);
        char *end = NULL;
        if (n >= 0) lim[k] = strtol(q, &end, 10);
        if (n < -1 || (n >= 0 && (n == 0 || *end || lim[k] < (k ? 0 : 1) || lim[k] > (k ? OFFSET_SKIP_MAX : LIST_MAX)))) {
            res_error(r, 400, "bad_limit", "limit must be 1 to %d and offset 0 to %d", LIST_MAX, OFFSET_SKIP_MAX);
            return;
        }
    }
    session_view_init(&v);
    if (thread_view(r, id, 0, none, &row, &v, NULL)) goto out;
    const char *assistant = row.workflow[0] ? row.workflow : row.agent;
    json_t *out = json_array();
    long skip = lim[1];
    if (v.is_workflow) {
        if (!skip) json_array_append_new(out, run_json(id, assistant, none, run_status(&v, none), "interrupt"));
    } else {
        for (size_t i = json_array_size(v.messages); i-- > 0 && (long)json_array_size(out) < lim[0];) {
            json_t *m = json_array_get(v.messages, i);
            const char *off = json_string_value(json_object_get(m, "offset"));
            const char *role = json_string_value(json_object_get(m, "role"));
            offset_kind k;
            offset_t at;
            if (!role || strcmp(role, "user") || json_is_true(json_object_get(m, "background")) || !off ||
                offset_parse(off, strlen(off), &k, &at) || k != OFFSET_AT)
                continue;
            if (skip) {
                skip--;
                continue;
            }
            json_array_append_new(out, run_json(id, assistant, at, run_status(&v, at), "interrupt"));
        }
    }
    res_json(r, 200, out);
    json_decref(out);
out:
    session_view_free(&v);
}

static void threads_handle(req_t *r, const char *rest)
{
    const char *m = r->method;
    char id[SSTORE_ID_MAX], run[OFFSET_LEN + 2];
    if (!rest) {
        thread_create(r);
        return;
    }
    if (!strcmp(rest, "search")) {
        thread_search(r);
        return;
    }
    const char *sub = sessions_path_id(r, rest, id);
    if (!sub) return;
    if (!*sub) {
        if (!strcmp(m, "DELETE")) thread_delete(r, id);
        else answer_thread(r, id, 200);
    } else if (!strcmp(sub, "/state")) {
        thread_state(r, id, NULL);
    } else if (!strncmp(sub, "/state/", 7)) {
        thread_state(r, id, sub + 7);
    } else if (!strcmp(sub, "/history")) {
        thread_history(r, id);
    } else if (!strcmp(sub, "/copy")) {
        thread_copy(r, id);
    } else if (!strcmp(sub, "/runs")) {
        if (!strcmp(m, "GET")) run_list(r, id);
        else run_post(r, id, RUN_CREATE);
    } else if (!strcmp(sub, "/runs/stream")) {
        run_post(r, id, RUN_STREAM);
    } else if (!strcmp(sub, "/runs/wait")) {
        run_post(r, id, RUN_WAIT);
    } else {
        /* /runs/{run}[/join|/stream|/cancel] (router.c's table). */
        const char *p = sub + 6;
        size_t n = strcspn(p, "/");
        if (n >= sizeof run) {
            not_found(r, "run");
            return;
        }
        memcpy(run, p, n);
        run[n] = '\0';
        run_get(r, id, run, p + n);
    }
}

void langgraph_handle(req_t *r, const char *rest)
{
    /* rest: "assistants/..." or "threads[/...]" (router.c's table). */
    if (!strncmp(rest, "assistants/", 11)) assistants_handle(r, rest + 11);
    else if (!strcmp(rest, "threads")) threads_handle(r, NULL);
    else threads_handle(r, rest + 8);
}

/* /v1/aisdk/chat/{agent}: the Vercel AI SDK's chat transport over chat sessions
 * (docs/clients.md). A thin mapping: the chat id is the session's id, a message is
 * POST /v1/sessions/{id}/messages, the reply is read from the session's log by
 * frame_uimsg, stop is POST /v1/sessions/{id}/stop. Same scopes: writing the chat needs
 * sessions:write on its id, resuming sessions:read.
 *
 *   POST /v1/aisdk/chat/{agent}              {id, messages, trigger, messageId}:
 *        the last message (the user's; or "message") joins the session (created on first use),
 *        the answer is its reply as a UI message stream; or the last is the assistant's
 *        with tool approval responses: they answer the chat's input requests
 *        (POST /v1/sessions/{id}/input) and the reply goes on in the answer
 *   GET  /v1/aisdk/chat/{agent}/{id}/stream  the reply under way, from its start;
 *        204 when there is none
 *   POST /v1/aisdk/chat/{agent}/{id}/stop    the reply under way stops; the chat goes on
 *
 * Closing a reply's connection stops only that reader: the runner goes on, the
 * reply stays in the log for a resume. */
#include <stdio.h>
#include <string.h>

#include "../lib/sstore.h"
#include "live.h"
#include "reply.h"
#include "router.h"
#include "sessions.h"

/* Serve the reply that answers the user message at `at` of row's session; with
 * answers (non-NULL), as it goes on after the answers to its approvals recorded there. */
static void serve_reply(req_t *r, const sstore_row *row, offset_t at, const offset_t *answers)
{
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = row->stream;
    rr.kind = OFFSET_AT;
    rr.from = at;
    frame_t f;
    frame_init(&f, &frame_uimsg, 0);
    if (answers) {
        f.ui.resumed = 1;
        f.ui.from = *answers;
    }
    live_run(r, &rr, &f);
}

/* The offset of the user message that the reply of chat id answers (with
 * under_way, only a reply under way or due): 0, 1 when there is none (or no chat), or
 * -1 after answering an error. */
static int question(req_t *r, const char *id, int under_way, offset_t *at)
{
    session_view v;
    offset_t none = {0, 0};
    offset_kind k;
    session_view_init(&v);
    int rc = sstore_view(r->log, id, 0, none, &v, NULL);
    const char *off = !rc && (!under_way || session_view_replying(&v)) ? session_view_last_user(&v) : NULL;
    int found = off && offset_parse(off, strlen(off), &k, at) == 0 && k == OFFSET_AT;
    session_view_free(&v);
    if (rc == LOG_ENOTFOUND) return 1;
    if (rc) {
        reply_fail(r, rc);
        return -1;
    }
    return found ? 0 : 1;
}

/* The tool approval responses of the assistant's message `last` (its tool parts in
 * state approval-responded: {approval: {id, approved, reason}}) as answers
 * [{interactionId, response, reason}]: a new array, or NULL after answering 400. */
static json_t *approval_answers(req_t *r, const json_t *last)
{
    json_t *p, *out = json_array();
    size_t i;
    json_array_foreach(json_object_get(last, "parts"), i, p) {
        const char *state = json_string_value(json_object_get(p, "state"));
        json_t *ap = json_object_get(p, "approval");
        if (!state || strcmp(state, "approval-responded")) continue;
        json_t *iid = json_object_get(ap, "id"), *ok = json_object_get(ap, "approved");
        json_t *why = json_object_get(ap, "reason");
        if (!json_is_boolean(ok)) {
            res_error(r, 400, "bad_messages", "parts[%zu].approval.approved must be true or false", i);
            goto bad;
        }
        if (sessions_valid_answer(r, iid, ok, json_is_null(why) ? NULL : why)) goto bad;
        if (json_array_size(out) == SSTORE_EVENTS_MAX) {
            res_error(r, 400, "bad_messages", "at most %d tool approval responses at once", SSTORE_EVENTS_MAX);
            goto bad;
        }
        json_t *a = json_pack("{s:O, s:O}", "interactionId", iid, "response", ok);
        if (a && json_is_string(why)) json_object_set(a, "reason", why);
        json_array_append_new(out, a);
    }
    if (json_array_size(out)) return out;
    res_error(r, 400, "bad_messages", "the message posted (the last of messages) must be the user's, or the "
                                      "assistant's with tool approval responses");
bad:
    json_decref(out);
    return NULL;
}

/* The text of the message posted, which must be the user's and made of text parts
 * ({"role": "user", "parts": [{"type": "text", "text": ...}, ...]}). A new string, or
 * NULL after answering 400. */
static json_t *user_text(req_t *r, const json_t *last)
{
    json_t *parts = json_object_get(last, "parts");
    const char *role = json_string_value(json_object_get(last, "role"));
    if (!json_is_object(last) || !role || strcmp(role, "user") || !json_is_array(parts)) {
        res_error(r, 400, "bad_messages", "the message posted (the last of messages) must be the user's: {\"role\": \"user\", \"parts\": [...]}");
        return NULL;
    }
    return sessions_text_parts(r, parts, "parts");
}

static void send_message(req_t *r, const char *agent)
{
    json_t *body = req_json_object(r), *content = NULL;
    if (!body) return;
    json_t *idj = json_object_get(body, "id"), *messages = json_object_get(body, "messages");
    json_t *last = json_object_get(body, "message");
    json_t *trig = json_object_get(body, "trigger");
    const char *trigger = trig ? json_string_value(trig) : "submit-message";
    const char *msgid = json_string_value(json_object_get(body, "messageId"));
    char replaces[OFFSET_LEN + 1];
    sstore_row row;
    offset_t at;
    if (!json_is_string(idj) || !sstore_valid_id(json_string_value(idj))) {
        res_error(r, 400, "bad_id", "id (the chat's) must be 1 to 63 of [A-Za-z0-9_-]");
        goto out;
    }
    const char *id = json_string_value(idj);
    if (!req_allow(r, "sessions:write", id)) goto out;
    if (!trigger || (strcmp(trigger, "submit-message") && strcmp(trigger, "regenerate-message"))) {
        res_error(r, 400, "bad_trigger", "trigger must be submit-message or regenerate-message");
        goto out;
    }
    /* The SDK sends the whole chat; a client that sends only its new message (its
     * prepareSendMessagesRequest, as the SDK's persistence guide shows) names it "message". */
    if (!last && (!json_is_array(messages) || json_array_size(messages) == 0)) {
        res_error(r, 400, "bad_messages", "messages must be a non-empty array (or message the one to post)");
        goto out;
    }
    if (!last) last = json_array_get(messages, json_array_size(messages) - 1);
    /* The SDK sends its chat again with the assistant's message last once each of its
     * tool calls waiting for approval has an answer (addToolApprovalResponse,
     * sendAutomaticallyWhen): they are recorded, and the reply goes on from there. */
    const char *role = json_string_value(json_object_get(last, "role"));
    if (!strcmp(trigger, "submit-message") && role && !strcmp(role, "assistant")) {
        json_t *answers = approval_answers(r, last);
        offset_t q;
        int rc;
        /* Read from the reply's question (its earlier results), else from the answers. */
        if (answers && !sessions_chat(r, id, agent, &row) && !sessions_answers(r, id, answers, 1, &at) &&
            (rc = question(r, id, 0, &q)) >= 0)
            serve_reply(r, &row, rc ? at : q, &at);
        json_decref(answers);
        goto out;
    }
    /* Regenerating replaces the question the reply answered, and the reply: the one
     * a messageId of ours (msg_<offset>) names, else the last. */
    int regen = !strcmp(trigger, "regenerate-message");
    offset_kind k;
    offset_t o;
    if (regen && msgid && !strncmp(msgid, "msg_", 4) && !offset_parse(msgid + 4, strlen(msgid + 4), &k, &o) &&
        k == OFFSET_AT)
        offset_format(o, replaces);
    else
        snprintf(replaces, sizeof replaces, "last");
    if (!(content = user_text(r, last)) ||
        sessions_open_chat(r, id, agent, &row) || sessions_say(r, id, content, regen ? replaces : NULL, 0, &at))
        goto out;
    serve_reply(r, &row, at, NULL);
out:
    json_decref(content);
    json_decref(body);
}

/* The reply under way (or due): from the user message it answers. */
static void resume(req_t *r, const char *id)
{
    sstore_row row;
    offset_t at;
    int rc = question(r, id, 1, &at);
    if (rc < 0) return;
    if (!rc) rc = sstore_get(r->log, id, &row);
    if (rc == 1 || rc == LOG_ENOTFOUND) {      /* none under way; a chat not begun has none either */
        res_status(r, 204);
        res_end(r);
    } else if (rc) {
        reply_fail(r, rc);
    } else {
        serve_reply(r, &row, at, NULL);
    }
}

void aisdk_handle(req_t *r, const char *rest)
{
    /* rest: "{agent}" or "{agent}/{id}/stream" or "{agent}/{id}/stop" (router.c's table). */
    char agent[72], id[SSTORE_ID_MAX];
    size_t n = strcspn(rest, "/");
    if (n == 0 || n >= sizeof agent) {
        res_error(r, 404, "not_found", "no such agent");
        return;
    }
    memcpy(agent, rest, n);
    agent[n] = '\0';
    if (!rest[n] || !rest[n + 1]) {
        send_message(r, agent);
        return;
    }
    const char *sub = sessions_path_id(r, rest + n + 1, id);
    if (!sub) return;
    /* The agent names a new chat's: resume and stop go by the chat. */
    if (!strcmp(sub, "/stream")) resume(r, id);
    else sessions_stop(r, id);
}

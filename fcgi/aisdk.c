/* /v1/aisdk/chat/{agent}: the Vercel AI SDK's chat transport over chat sessions
 * (docs/clients.md). A thin mapping: the chat id is the session's id, a message is
 * POST /v1/sessions/{id}/messages, the reply is read from the session's log by
 * frame_uimsg, stop is POST /v1/sessions/{id}/stop. Same scopes: writing the chat needs
 * sessions:write on its id, resuming sessions:read.
 *
 *   POST /v1/aisdk/chat/{agent}              {id, messages, trigger, messageId}:
 *        the last message (the user's; or "message") joins the session (created on first use),
 *        the answer is its reply as a UI message stream
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

/* Serve the reply that answers the user message at `at` of row's session. */
static void serve_reply(req_t *r, const sstore_row *row, offset_t at)
{
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = row->stream;
    rr.kind = OFFSET_AT;
    rr.from = at;
    frame_t f;
    frame_init(&f, &frame_uimsg, 0);
    live_run(r, &rr, &f);
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
    serve_reply(r, &row, at);
out:
    json_decref(content);
    json_decref(body);
}

/* The reply under way (or due): from the user message it answers. */
static void resume(req_t *r, const char *id)
{
    sstore_row row;
    session_view v;
    offset_t none = {0, 0}, at;
    int rc = sstore_get(r->log, id, &row), active = 0;
    if (rc == LOG_ENOTFOUND) {      /* a chat not begun has no reply either */
        res_status(r, 204);
        res_end(r);
        return;
    }
    if (rc) {
        reply_fail(r, rc);
        return;
    }
    session_view_init(&v);
    rc = sstore_view(r->log, id, 0, none, &v, NULL);
    const char *off = !rc && session_view_replying(&v) ? session_view_last_user(&v) : NULL;
    offset_kind k;
    active = off && offset_parse(off, strlen(off), &k, &at) == 0 && k == OFFSET_AT;
    session_view_free(&v);
    if (rc) {
        reply_fail(r, rc);
    } else if (!active) {
        res_status(r, 204);
        res_end(r);
    } else {
        serve_reply(r, &row, at);
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

/* request: one streaming provider call on the runner's curl multi handle.
 *
 * libcurl hands the body over in arbitrary chunks; the provider parser turns them
 * into normalized events, which collect here until the loop flushes them into the
 * session as text/thinking deltas (one append per round, not per token). The API
 * key goes only into the request headers: it is never logged nor written to an
 * event. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../lib/db.h"
#include "runner.h"

static int on_event(void *ud, const provider_event *ev)
{
    rq_t *q = ud;
    switch (ev->kind) {
    case PEV_TEXT:
        buf_append(&q->text, ev->text, ev->len);
        if (q->step_agent) buf_append(&q->full, ev->text, ev->len);
        break;
    case PEV_THINKING: buf_append(&q->thinking, ev->text, ev->len); break;
    case PEV_TOOL_CALL: {
        json_t *args = json_loads(ev->args ? ev->args : "{}", 0, NULL);
        /* Some OpenAI-compatible servers send no call id: make one up. */
        char made[96];
        snprintf(made, sizeof made, "call_%s_%zu", q->id, json_array_size(q->tool_calls));
        json_array_append_new(q->tool_calls,
                              json_pack("{s:s, s:s, s:o}", "callId", ev->id && *ev->id ? ev->id : made,
                                        "name", ev->name ? ev->name : "", "arguments",
                                        args ? args : json_object()));
        break;
    }
    case PEV_USAGE:
        if (ev->input_tokens) q->in_tok = ev->input_tokens;
        if (ev->output_tokens) q->out_tok = ev->output_tokens;
        break;
    case PEV_STOP: snprintf(q->stop, sizeof q->stop, "%s", ev->stop_reason ? ev->stop_reason : ""); break;
    case PEV_ERROR:
        q->stream_error = 1;
        snprintf(q->error, sizeof q->error, "%s: %.*s", ev->error_type ? ev->error_type : "error",
                 (int)(ev->len > 200 ? 200 : ev->len), ev->text ? ev->text : "");
        break;
    case PEV_DONE: q->done = 1; break;
    }
    return 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    rq_t *q = ud;
    size_t len = size * n;
    if (q->status == 0) curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &q->status);
    if (q->status != 200) {
        buf_append(&q->errbody, p, len);   /* bounded by its ceiling */
        return len;
    }
    if (provider_feed(q->parser, p, len) < 0 && !q->stream_error) {
        q->stream_error = 1;
        snprintf(q->error, sizeof q->error, "malformed provider stream");
    }
    return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    rq_t *q = ud;
    size_t len = size * n;
    if (len > 12 && strncasecmp(p, "retry-after:", 12) == 0) {
        const char *v = p + 12;
        while (*v == ' ') v++;
        size_t vl = len - (size_t)(v - p);
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n')) vl--;
        snprintf(q->retry_after, sizeof q->retry_after, "%.*s", (int)vl, v);
    }
    return len;
}

rq_t *request_start(runner_t *R, sess_t *s, const json_t *agent, const json_t *messages,
                    const char *id, int attempt, int step_agent)
{
    const char *prov = json_string_value(json_object_get(agent, "provider"));
    int kind = provider_kind_parse(prov ? prov : "");
    if (kind < 0) return NULL;
    rq_t *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->s = s;
    q->kind = (provider_kind)kind;
    q->attempt = attempt;
    q->step_agent = step_agent;
    q->started_ms = db_now_ms();
    snprintf(q->id, sizeof q->id, "%s", id);
    snprintf(q->model, sizeof q->model, "%s", json_string_value(json_object_get(agent, "model")));
    buf_init(&q->errbody, 64 << 10);
    buf_init(&q->text, 16 << 20);
    buf_init(&q->thinking, 16 << 20);
    buf_init(&q->full, 16 << 20);
    q->tool_calls = json_array();
    q->parser = provider_parser_new(q->kind, on_event, q);
    json_t *body = provider_request_body(q->kind, agent, messages);
    q->body = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    const char *base = R->provider_url ? R->provider_url
                                       : json_string_value(json_object_get(agent, "endpoint"));
    provider_request_url(q->kind, base, q->url, sizeof q->url);
    buf_t h;
    buf_init(&h, 8192);
    provider_request_headers(q->kind, q->kind == PROVIDER_ANTHROPIC ? R->anthropic_key : R->openai_key, &h);
    q->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    for (char *line = h.p, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (*line) q->hdrs = curl_slist_append(q->hdrs, line);
    }
    explicit_bzero(h.p, h.len);    /* the key was in there */
    buf_free(&h);
    q->easy = curl_easy_init();
    if (!q->parser || !q->body || !q->easy) {
        request_free(R, q);
        return NULL;
    }
    curl_easy_setopt(q->easy, CURLOPT_URL, q->url);
    curl_easy_setopt(q->easy, CURLOPT_HTTPHEADER, q->hdrs);
    curl_easy_setopt(q->easy, CURLOPT_POSTFIELDS, q->body);
    curl_easy_setopt(q->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(q->easy, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(q->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(q->easy, CURLOPT_HEADERDATA, q);
    curl_easy_setopt(q->easy, CURLOPT_PRIVATE, q);
    curl_easy_setopt(q->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(q->easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    /* A stream that stays silent this long is dead (pings come every few s). */
    curl_easy_setopt(q->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(q->easy, CURLOPT_LOW_SPEED_TIME, 120L);
    curl_multi_add_handle(R->multi, q->easy);
    s->rq = q;
    return q;
}

void request_free(runner_t *R, rq_t *q)
{
    if (!q) return;
    if (q->easy) {
        curl_multi_remove_handle(R->multi, q->easy);
        curl_easy_cleanup(q->easy);
    }
    curl_slist_free_all(q->hdrs);   /* held the key: */
    provider_parser_free(q->parser);
    free(q->body);
    buf_free(&q->errbody);
    buf_free(&q->text);
    buf_free(&q->thinking);
    buf_free(&q->full);
    json_decref(q->tool_calls);
    if (q->s && q->s->rq == q) q->s->rq = NULL;
    free(q);
}

void request_flush(runner_t *R, rq_t *q)
{
    sstore_event ev[2];
    size_t n = 0;
    memset(ev, 0, sizeof ev);
    if (q->thinking.len) {
        ev[n].type = "thinking:delta";
        ev[n].actor = "runner";
        ev[n].payload = json_pack("{s:s, s:s%}", "requestId", q->id, "text", q->thinking.p, q->thinking.len);
        n++;
    }
    if (q->text.len) {
        ev[n].type = "text:delta";
        ev[n].actor = "runner";
        ev[n].payload = json_pack("{s:s, s:s%}", "requestId", q->id, "text", q->text.p, q->text.len);
        n++;
    }
    if (n == 0) return;
    if (runner_append(R, q->s, ev, n) == 0) q->emitted = 1;
    for (size_t i = 0; i < n; i++) json_decref(ev[i].payload);
    buf_reset(&q->text);
    buf_reset(&q->thinking);
}

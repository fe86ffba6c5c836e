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

#include "../lib/timefmt.h"
#include "../lib/event.h"
#include "../lib/recorder.h"
#include "../lib/sha256.h"
#include "request.h"
#include "outbox.h"
#include "providers.h"
#include "stats.h"

static int on_event(void *ud, const provider_event *ev)
{
    rq_t *q = ud;
    switch (ev->kind) {
    case PEV_TEXT:
        /* A summary is not a reply: it goes whole into session:compacted. */
        if (q->compaction) {
            buf_append(&q->full, ev->text, ev->len);
            break;
        }
        buf_append(&q->text, ev->text, ev->len);
        if (!q->first_ms) q->first_ms = timefmt_now_ms();
        /* A step's output is bounded like the state it goes into: past it the
         * step fails (state_too_large) rather than keep a cut reply. */
        if (q->step_agent && !q->full_over && buf_append(&q->full, ev->text, ev->len)) q->full_over = 1;
        break;
    case PEV_THINKING:
        if (q->compaction) break;
        buf_append(&q->thinking, ev->text, ev->len);
        if (!q->first_ms) q->first_ms = timefmt_now_ms();
        break;
    case PEV_TOOL_CALL: {
        json_t *args = json_loads(ev->args ? ev->args : "{}", 0, NULL);
        /* Some OpenAI-compatible servers send no call id: make one up. Recorded or
         * played back, from the request's key and ordinal, so that playback makes the
         * same one and the next request has the recorded key; else from the request id. */
        char made[96], seed[REC_KEY_LEN + 16];
        size_t idx = json_array_size(q->tool_calls);
        if (q->tap && q->tap->call_seed(q, seed, sizeof seed) == 0) {
            uint8_t d[SHA256_LEN];
            char hex[2 * 12 + 1];
            sha256(seed, strlen(seed), d);
            sha256_hex(d, 12, hex);
            snprintf(made, sizeof made, "call_%s_%zu", hex, idx);
        } else {
            snprintf(made, sizeof made, "call_%s_%zu", q->id, idx);
        }
        json_array_append_new(q->tool_calls,
                              json_pack("{s:s, s:s, s:o}", PK_CALL_ID, ev->id && *ev->id ? ev->id : made,
                                        PK_NAME, ev->name ? ev->name : "", PK_ARGUMENTS,
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
        snprintf(q->error_type, sizeof q->error_type, "%s", ev->error_type ? ev->error_type : "");
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
    if (q->tap) q->tap->body(q, p, len);
    if (q->status == 0) curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &q->status);
    if (q->status != 200) {
        buf_append(&q->errbody, p, len);   /* bounded by its ceiling */
        return len;
    }
    if (provider_feed(q->parser, p, len) < 0 && !q->stream_error && !q->malformed) {
        q->malformed = 1;
        snprintf(q->error, sizeof q->error, "malformed provider stream");
    }
    /* A step's reply past its limit: stop reading (the transfer ends with an error;
     * runner_request_finished fails the step, not retrying it). */
    return q->full_over ? 0 : len;
}

/* The value of header name (with its colon) if line is that header, else NULL. */
static const char *header_value(const char *line, size_t len, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    if (len <= nl || strncasecmp(line, name, nl) != 0) return NULL;
    const char *v = line + nl;
    while (*v == ' ' || *v == '\t') v++;
    size_t vl = len - (size_t)(v - line);
    while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' ')) vl--;
    *vlen = vl;
    return v;
}

/* The provider's retry hints (lib/retry): Retry-After, retry-after-ms, x-should-retry. */
static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    rq_t *q = ud;
    size_t len = size * n, vl;
    const char *v;
    if ((v = header_value(p, len, "retry-after:", &vl))) {
        snprintf(q->retry_after, sizeof q->retry_after, "%.*s", (int)vl, v);
    } else if ((v = header_value(p, len, "retry-after-ms:", &vl))) {
        char num[24], *end;
        snprintf(num, sizeof num, "%.*s", (int)(vl < 23 ? vl : 23), v);
        double ms = strtod(num, &end);
        if (end != num && *end == '\0' && ms >= 0 && ms < 1e12) q->retry_after_ms = (int64_t)ms;
    } else if ((v = header_value(p, len, "x-should-retry:", &vl))) {
        if (vl == 4 && !strncasecmp(v, "true", 4)) q->should_retry = 1;
        else if (vl == 5 && !strncasecmp(v, "false", 5)) q->should_retry = 0;
    }
    return len;
}

rq_t *request_new(runner_t *R, sess_t *s, const json_t *agent, const json_t *messages,
                  const char *id, int attempt, int step_agent)
{
    R->start_error[0] = '\0';
    rq_t *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->s = s;
    q->attempt = attempt;
    q->retry_after_ms = -1;
    q->should_retry = -1;
    q->step_agent = step_agent;
    q->started_ms = timefmt_now_ms();
    snprintf(q->id, sizeof q->id, "%s", id);
    snprintf(q->model, sizeof q->model, "%s", json_string_value(json_object_get(agent, "model")));
    buf_init(&q->errbody, 64 << 10);
    buf_init(&q->text, 16 << 20);
    buf_init(&q->thinking, 16 << 20);
    buf_init(&q->full, R->workflow_state_max && R->workflow_state_max < (16u << 20) ? R->workflow_state_max : 16u << 20);
    q->tool_calls = json_array();
    /* Where it goes, with which key, and the kind from the operator's provider. */
    q->easy = curl_easy_init();
    if (!q->easy || providers_prepare(R, q, agent)) {
        request_free(R, q);
        return NULL;
    }
    q->parser = provider_parser_new(q->kind, on_event, q);
    json_t *body = provider_request_body(q->kind, agent, messages);
    /* A history that ends with the assistant's text continues it (runner/turn.c):
     * the provider's style may want more than the message. */
    const json_t *last = json_array_get(messages, json_array_size(messages) - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    if (body && role && !strcmp(role, "assistant")) provider_body_continue(body, q->target.p->cont);
    q->body = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    buf_t h;
    buf_init(&h, 8192);
    provider_request_headers(q->kind, q->target.key, &h);
    q->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    for (char *line = h.p, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (*line) q->hdrs = curl_slist_append(q->hdrs, line);
    }
    if (h.p) explicit_bzero(h.p, h.len);    /* the key was in there */
    buf_free(&h);
    if (!q->parser || !q->body) {
        request_free(R, q);
        return NULL;
    }
    curl_easy_setopt(q->easy, CURLOPT_HTTPHEADER, q->hdrs);
    curl_easy_setopt(q->easy, CURLOPT_POSTFIELDS, q->body);
    curl_easy_setopt(q->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(q->easy, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(q->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(q->easy, CURLOPT_HEADERDATA, q);
    curl_easy_setopt(q->easy, CURLOPT_PRIVATE, q);
    curl_easy_setopt(q->easy, CURLOPT_NOSIGNAL, 1L);
    /* The receive buffer, one per request in flight: curl's 16 KiB default was a
     * quarter of what 2,000 streaming sessions cost; a provider's events are a few
     * hundred bytes, and a larger read only takes more turns of the callback. */
    curl_easy_setopt(q->easy, CURLOPT_BUFFERSIZE, (long)RUNNER_CURL_BUFFER);
    curl_easy_setopt(q->easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    /* A stream that stays silent this long is dead (pings come every few s). */
    curl_easy_setopt(q->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(q->easy, CURLOPT_LOW_SPEED_TIME, 120L);
    return q;
}

void request_send(runner_t *R, rq_t *q, int live)
{
    if (live) curl_multi_add_handle(R->multi, q->easy);
    q->s->rq = q;
    runner_stats_sent(q);
}

void request_free(runner_t *R, rq_t *q)
{
    if (!q) return;
    runner_stats_freed(R, q);
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
    if (q->tap) q->tap->free(q);
    if (q->s && q->s->rq == q) q->s->rq = NULL;
    free(q);
}

void request_flush(runner_t *R, rq_t *q)
{
    sstore_event e;
    if (q->thinking.len) {
        e = event_delta(1, q->id, q->thinking.p, q->thinking.len);
        outbox_emit(R, q->s, e.type, e.payload);
    }
    if (q->text.len) {
        e = event_delta(0, q->id, q->text.p, q->text.len);
        outbox_emit(R, q->s, e.type, e.payload);
    }
    if (q->thinking.len || q->text.len) q->emitted = 1;
    buf_reset(&q->text);
    buf_reset(&q->thinking);
    if (q->tap) q->tap->flush(q);
}

void request_feed(rq_t *q, const char *p, size_t len)
{
    on_body((char *)p, 1, len, q);
}

/* provider: LLM provider wire formats, normalized.
 *
 * A response body goes through two layers. The first is a Server-Sent Events line
 * reader written for bytes that arrive in arbitrary pieces: it keeps the partial
 * line in a bounded buffer, remembers a '\r' that ended the last feed (so a "\n"
 * opening the next one is not taken for an empty line), and assembles "event:" and
 * "data:" fields until a blank line dispatches them, as the WHATWG EventSource
 * algorithm does. Nothing else about the stream is kept between feeds, which is
 * why any chunking of the same bytes gives the same events.
 *
 * The second layer, the format's own file (lib/anthropic, lib/openai) on the slots
 * of lib/provevent, turns each dispatched JSON payload into provider_events. Text
 * and thinking pieces go out as they come. Tool calls are the one thing that must
 * be held back: both APIs stream their arguments as fragments of a JSON text (cut
 * anywhere, even inside a string escape), so each call in progress has a slot that
 * collects them, and the call is delivered whole once its block stops (Anthropic)
 * or the choice finishes (OpenAI), after checking that the result is JSON. Slots
 * and argument buffers have ceilings, so a hostile stream costs bounded memory.
 *
 * The request side is put together here too (body, URL, headers): each format's
 * messages are its file's, the history they come from lib/chathist's. Retries are
 * lib/retry's, cost lib/cost's. */
#include "provider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anthropic.h"
#include "chathist.h"
#include "chunkscan.h"
#include "openai.h"

#define PROVIDER_DEFAULT_MAX_TOKENS 4096    /* Anthropic requires max_tokens */

#define ANTHROPIC_BASE "https://api.anthropic.com"
#define OPENAI_BASE "https://api.openai.com"
#define ANTHROPIC_VERSION "2023-06-01"

/* ---- SSE ----------------------------------------------------------------------- */

/* A blank line: hand the assembled event to the format's handler. */
static int dispatch(provider_parser *p)
{
    int rc = 0;
    if (!p->has_data) goto out;
    const char *d = p->data.p ? p->data.p : "";
    size_t n = p->data.len;
    /* Keep-alives of whitespace are not worth failing a stream for. */
    while (n && pev_is_ws(*d)) d++, n--;
    while (n && pev_is_ws(d[n - 1])) n--;
    if (n == 0) goto out;
    if (p->kind == PROVIDER_OPENAI && n == 6 && !memcmp(d, "[DONE]", 6)) {
        rc = pev_slots_flush(p);
        if (!rc) rc = pev_done(p);
        goto out;
    }
    /* A piece of text, the most of any reply, without a tree; the rest with one. */
    chunkscan_text t;
    if (!p->generic && chunkscan_text_of(p->kind == PROVIDER_OPENAI, d, n, &p->scratch, &t)) {
        if (t.len) {
            provider_event ev = {.kind = t.thinking ? PEV_THINKING : PEV_TEXT, .text = t.text, .len = t.len};
            rc = pev_emit(p, &ev);
        }
        goto out;
    }
    json_t *j = json_loadb(d, n, JSON_ALLOW_NUL, NULL);
    if (!json_is_object(j)) {
        rc = -1;
    } else if (p->kind == PROVIDER_ANTHROPIC) {
        rc = anthropic_event(p, p->event.p ? p->event.p : "message", j);
    } else {
        rc = openai_event(p, j);
    }
    json_decref(j);
out:
    buf_reset(&p->event);
    buf_reset(&p->data);
    p->has_data = 0;
    return rc;
}

/* One complete line, its ending removed. */
static int sse_line(provider_parser *p, const char *s, size_t n)
{
    if (p->first_line) {
        p->first_line = 0;
        if (n >= 3 && !memcmp(s, "\xef\xbb\xbf", 3)) s += 3, n -= 3;
    }
    if (n == 0) return dispatch(p);
    if (s[0] == ':') return 0;  /* a comment: keep-alive */
    /* "field: value", the one space after the colon optional; a line without a
     * colon is a field with an empty value (WHATWG HTML, "server-sent events"). */
    const char *colon = memchr(s, ':', n);
    size_t flen = colon ? (size_t)(colon - s) : n;
    const char *v = colon ? colon + 1 : s + n;
    size_t vlen = (size_t)(s + n - v);
    if (vlen && *v == ' ') v++, vlen--;
    if (flen == 5 && !memcmp(s, "event", 5)) {
        buf_reset(&p->event);
        return buf_append(&p->event, v, vlen) ? -1 : 0;
    }
    if (flen == 4 && !memcmp(s, "data", 4)) {
        /* Several data lines make one payload, joined with newlines. */
        if (p->has_data && buf_append(&p->data, "\n", 1)) return -1;
        p->has_data = 1;
        return buf_append(&p->data, v, vlen) ? -1 : 0;
    }
    return 0;   /* id, retry and unknown fields mean nothing here */
}

provider_parser *provider_parser_new(provider_kind kind, provider_event_fn fn, void *ud)
{
    provider_parser *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->kind = kind;
    p->fn = fn;
    p->ud = ud;
    buf_init(&p->line, PROVIDER_LINE_MAX);
    buf_init(&p->event, PROVIDER_LINE_MAX);
    buf_init(&p->data, PROVIDER_DATA_MAX);
    buf_init(&p->scratch, PROVIDER_DATA_MAX);
    p->first_line = 1;
    return p;
}

void provider_parser_free(provider_parser *p)
{
    if (!p) return;
    buf_free(&p->line);
    buf_free(&p->event);
    buf_free(&p->data);
    buf_free(&p->scratch);
    for (size_t i = 0; i < p->ntools; i++) pev_slot_free(&p->tools[i]);
    free(p->tools);
    free(p);
}

int provider_feed(provider_parser *p, const char *data, size_t len)
{
    /* After an error or a stop the parser stays stopped; after the end, the rest
     * of the body is of no interest. */
    if (p->status) return p->status;
    if (p->done) return 0;
    size_t i = 0;
    int rc = 0;
    while (i < len) {
        if (p->cr) {
            /* "\r\n" split between feeds is still one line ending. */
            p->cr = 0;
            if (data[i] == '\n') {
                i++;
                continue;
            }
        }
        /* Copy up to the next line ending; a line cut by the feed waits in p->line. */
        size_t j = i;
        while (j < len && data[j] != '\n' && data[j] != '\r') j++;
        if (j < len && p->line.len == 0) {
            /* A whole line in this feed: read where curl put it, no copy. */
            if (j - i > PROVIDER_LINE_MAX) {
                rc = -1;
                goto out;
            }
            p->cr = data[j] == '\r';
            rc = sse_line(p, data + i, j - i);
            i = j + 1;
            if (rc || p->done) goto out;
            continue;
        }
        if (j > i && buf_append(&p->line, data + i, j - i)) {
            rc = -1;    /* a line over PROVIDER_LINE_MAX */
            goto out;
        }
        if (j == len) break;
        p->cr = data[j] == '\r';
        i = j + 1;
        rc = sse_line(p, p->line.p ? p->line.p : "", p->line.len);
        buf_reset(&p->line);
        if (rc || p->done) goto out;
    }
out:
    p->status = rc;
    return rc;
}

int provider_finish(provider_parser *p)
{
    if (p->done) return 0;
    if (p->status) return -1;
    /* A last line without its ending, or an event without its blank line, is
     * taken as if they had come: they can only complete a stream, not fake one. */
    int rc = 0;
    if (p->line.len) rc = sse_line(p, p->line.p, p->line.len);
    buf_reset(&p->line);
    if (!rc && !p->done) rc = dispatch(p);
    p->status = rc;
    return p->done ? 0 : -1;
}

size_t provider_open_calls(const provider_parser *p)
{
    return p ? p->ntools : 0;
}

int provider_kind_parse(const char *s)
{
    if (!s) return -1;
    if (!strcmp(s, "anthropic")) return PROVIDER_ANTHROPIC;
    if (!strcmp(s, "openai")) return PROVIDER_OPENAI;
    return -1;
}

/* ---- request body -------------------------------------------------------------- */

static json_t *tools_for(provider_kind kind, const json_t *agent)
{
    json_t *tools = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(agent, "tools"), i, t) {
        json_t *name = json_object_get(t, "name");
        json_t *desc = json_object_get(t, "description");
        json_t *schema = json_object_get(t, "inputSchema");
        if (!json_is_string(name)) continue;
        json_t *f = json_pack("{s:o}", "name", json_deep_copy(name));
        if (json_is_string(desc)) json_object_set_new(f, "description", json_deep_copy(desc));
        json_object_set_new(f, kind == PROVIDER_ANTHROPIC ? "input_schema" : "parameters",
                            json_is_object(schema) ? json_deep_copy(schema)
                                                   : json_pack("{s:s}", "type", "object"));
        if (kind == PROVIDER_OPENAI) f = json_pack("{s:s,s:o}", "type", "function", "function", f);
        json_array_append_new(tools, f);
    }
    return tools;
}

json_t *provider_request_body(provider_kind kind, const json_t *agent, const json_t *messages)
{
    if (!json_is_object(agent)) return NULL;
    json_t *params = json_object_get(agent, "parameters");
    json_t *model = json_object_get(agent, "model");
    json_t *body = json_pack("{s:s}", "model",
                             json_is_string(model) ? json_string_value(model) : "");
    if (!body) abort();

    /* max_tokens: the agent's parameter, else its limit; Anthropic needs one. */
    json_t *max = json_object_get(params, "max_tokens");
    if (!json_is_integer(max)) max = json_object_get(json_object_get(agent, "limits"), "maxTokens");
    if (json_is_integer(max))
        json_object_set_new(body, "max_tokens", json_integer(json_integer_value(max)));
    else if (kind == PROVIDER_ANTHROPIC)
        json_object_set_new(body, "max_tokens", json_integer(PROVIDER_DEFAULT_MAX_TOKENS));

    json_t *sys = json_object_get(agent, "system");
    if (kind == PROVIDER_ANTHROPIC && json_string_length(sys))
        json_object_set_new(body, "system", json_deep_copy(sys));

    /* Normalize a private copy: the caller's history is left untouched. */
    json_t *hist = json_is_array(messages) ? json_deep_copy(messages) : json_array();
    json_t *norm = chathist_normalize(hist);
    json_object_set_new(body, "messages",
                        kind == PROVIDER_ANTHROPIC ? anthropic_messages(norm)
                                                   : openai_messages(agent, norm));
    json_decref(norm);
    json_decref(hist);

    json_t *tools = tools_for(kind, agent);
    if (json_array_size(tools)) json_object_set(body, "tools", tools);
    json_decref(tools);

    json_t *v;
    if (json_is_number(v = json_object_get(params, "temperature")))
        json_object_set_new(body, "temperature", json_deep_copy(v));
    if (json_is_number(v = json_object_get(params, "top_p")))
        json_object_set_new(body, "top_p", json_deep_copy(v));
    if (json_is_array(v = json_object_get(params, "stop")) && json_array_size(v))
        json_object_set_new(body, kind == PROVIDER_ANTHROPIC ? "stop_sequences" : "stop",
                            json_deep_copy(v));

    json_object_set_new(body, "stream", json_true());
    if (kind == PROVIDER_OPENAI)
        json_object_set_new(body, "stream_options", json_pack("{s:b}", "include_usage", 1));
    return body;
}

static const char *const cont_names[] = {"off", "prefill", "continue_final_message"};

int provider_cont_parse(const char *s)
{
    for (size_t i = 0; s && i < sizeof cont_names / sizeof cont_names[0]; i++)
        if (!strcmp(s, cont_names[i])) return (int)i;
    return -1;
}

const char *provider_cont_name(provider_cont c)
{
    return (unsigned)c < sizeof cont_names / sizeof cont_names[0] ? cont_names[c] : "off";
}

void provider_body_continue(json_t *body, provider_cont c)
{
    /* vLLM's chat template otherwise opens a new assistant turn after the message. */
    if (c != PROVIDER_CONT_FINAL_MESSAGE) return;
    json_object_set_new(body, "continue_final_message", json_true());
    json_object_set_new(body, "add_generation_prompt", json_false());
}

const char *provider_default_base(provider_kind kind)
{
    return kind == PROVIDER_ANTHROPIC ? ANTHROPIC_BASE : OPENAI_BASE;
}

/* 1 if seg (len n) is an API version segment: "v", a digit, then letters and digits
 * ("v1", "v4", "v1beta"). */
static int version_segment(const char *seg, size_t n)
{
    if (n < 2 || seg[0] != 'v' || seg[1] < '0' || seg[1] > '9') return 0;
    for (size_t i = 2; i < n; i++)
        if (!((seg[i] >= '0' && seg[i] <= '9') || (seg[i] >= 'a' && seg[i] <= 'z'))) return 0;
    return 1;
}

/* The three forms of a base URL (docs/agents.md, Providers): the whole endpoint URL
 * (its path ends in the API's own path, "/chat/completions" or "/messages"): as is;
 * a path ending in a version segment (the OpenAI SDK's habit, "https://host/v1",
 * "https://host/openai/v1"): the API's path appended; anything else (the Anthropic
 * SDK's habit, and every base URL before this rule): "/v1" and the API's path. */
void provider_request_url(provider_kind kind, const char *base, char *out, size_t cap)
{
    if (!cap) return;
    if (!base || !*base) base = provider_default_base(kind);
    const char *api = kind == PROVIDER_ANTHROPIC ? "/messages" : "/chat/completions";
    size_t n = strlen(base), alen = strlen(api);
    if (n && base[n - 1] == '/') n--;
    /* The path starts at the first '/' after "scheme://". */
    const char *auth = strstr(base, "://");
    size_t path = auth ? (size_t)(auth - base) + 3 : 0;
    while (path < n && base[path] != '/') path++;
    const char *ver = "/v1";
    if (n - path >= alen && !memcmp(base + n - alen, api, alen)) {
        api = ver = "";
    } else {
        size_t seg = n;
        while (seg > path && base[seg - 1] != '/') seg--;
        if (seg > path && version_segment(base + seg, n - seg)) ver = "";
    }
    /* Truncation leaves a URL that fails to connect, not an overflow. */
    snprintf(out, cap, "%.*s%s%s", (int)(n > 65535 ? 65535 : n), base, ver, api);
}

int provider_request_headers(provider_kind kind, const char *key, buf_t *out)
{
    size_t mark = out->len;
    int rc = 0;
    /* A key with a line break would smuggle in a header of its own. */
    for (const char *k = key; k && *k; k++)
        if ((unsigned char)*k < 0x20 || *k == 0x7f) return -1;
    if (key && *key)
        rc = buf_printf(out, kind == PROVIDER_ANTHROPIC ? "x-api-key: %s\n"
                                                         : "Authorization: Bearer %s\n", key);
    if (!rc && kind == PROVIDER_ANTHROPIC)
        rc = buf_puts(out, "anthropic-version: " ANTHROPIC_VERSION "\n");
    if (!rc) rc = buf_puts(out, "Accept: text/event-stream\n");
    if (rc) {
        out->len = mark;
        if (out->p) out->p[mark] = '\0';
    }
    return rc;
}

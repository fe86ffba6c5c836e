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
 * The second layer turns each dispatched JSON payload into provider_events. Text
 * and thinking pieces go out as they come. Tool calls are the one thing that must
 * be held back: both APIs stream their arguments as fragments of a JSON text (cut
 * anywhere, even inside a string escape), so each call in progress has a slot that
 * collects them, and the call is delivered whole once its block stops (Anthropic)
 * or the choice finishes (OpenAI), after checking that the result is JSON. Slots
 * and argument buffers have ceilings, so a hostile stream costs bounded memory.
 *
 * The request side (body, URL, headers) lives here too because it is the other half
 * of the same two wire formats. Retries are lib/retry's, cost lib/cost's. */
#include "provider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define PROVIDER_DATA_MAX PROVIDER_LINE_MAX /* one event's data, all its lines */
#define PROVIDER_TOOLS_OPEN_MAX 64          /* tool calls in progress at once */
#define PROVIDER_TOOL_ID_MAX 4096           /* a tool call's id or name */
#define PROVIDER_DEFAULT_MAX_TOKENS 4096    /* Anthropic requires max_tokens */

#define ANTHROPIC_BASE "https://api.anthropic.com"
#define OPENAI_BASE "https://api.openai.com"
#define ANTHROPIC_VERSION "2023-06-01"

typedef struct tool_slot {
    int64_t index;      /* content block index (Anthropic) or tool_calls[].index */
    buf_t id, name, args;
    json_t *input;      /* a non-empty "input" given at content_block_start */
} tool_slot;

struct provider_parser {
    provider_kind kind;
    provider_event_fn fn;
    void *ud;
    buf_t line;         /* the line being read, without its ending */
    buf_t event;        /* the "event:" field of the event being assembled */
    buf_t data;         /* its "data:" lines, joined with '\n' */
    int has_data;       /* a data field was seen (it may be empty) */
    int cr;             /* the last byte fed was '\r' */
    int first_line;     /* a UTF-8 BOM may open the stream */
    int status;         /* sticky: -1 or the callback's value once non-zero */
    int done;           /* PEV_DONE was delivered */
    tool_slot tools[PROVIDER_TOOLS_OPEN_MAX];
    size_t ntools;
    int64_t input_tokens, output_tokens;
};

/* ---- events and tool-call slots ------------------------------------------------ */

/* A parser without a callback still parses and checks: the fuzzer relies on it. */
static int emit(provider_parser *p, provider_event *ev)
{
    return p->fn ? p->fn(p->ud, ev) : 0;
}

static int emit_text(provider_parser *p, pev_kind kind, const json_t *s)
{
    /* Empty pieces carry nothing; jansson strings may hold NULs, hence the length. */
    size_t n = json_string_length(s);
    if (!json_is_string(s) || n == 0) return 0;
    provider_event ev = {.kind = kind, .text = json_string_value(s), .len = n};
    return emit(p, &ev);
}

static int emit_usage(provider_parser *p)
{
    provider_event ev = {.kind = PEV_USAGE, .input_tokens = p->input_tokens,
                         .output_tokens = p->output_tokens};
    return emit(p, &ev);
}

static int emit_done(provider_parser *p)
{
    provider_event ev = {.kind = PEV_DONE};
    /* Set first: a callback that stops the parser here still saw a whole stream. */
    p->done = 1;
    return emit(p, &ev);
}

static void slot_free(tool_slot *t)
{
    buf_free(&t->id);
    buf_free(&t->name);
    buf_free(&t->args);
    json_decref(t->input);
    t->input = NULL;
}

/* A linear search: there are at most PROVIDER_TOOLS_OPEN_MAX slots, usually one. */
static tool_slot *slot_find(provider_parser *p, int64_t index)
{
    for (size_t i = 0; i < p->ntools; i++)
        if (p->tools[i].index == index) return &p->tools[i];
    return NULL;
}

/* The slot for index, opened if new. NULL when too many calls are open at once. */
static tool_slot *slot_open(provider_parser *p, int64_t index)
{
    tool_slot *t = slot_find(p, index);
    if (t) return t;
    if (p->ntools == PROVIDER_TOOLS_OPEN_MAX) return NULL;
    /* Slots live in the parser; nothing is allocated until an argument arrives. */
    t = &p->tools[p->ntools++];
    t->index = index;
    buf_init(&t->id, PROVIDER_TOOL_ID_MAX);
    buf_init(&t->name, PROVIDER_TOOL_ID_MAX);
    buf_init(&t->args, PROVIDER_TOOL_ARGS_MAX);
    t->input = NULL;
    return t;
}

/* Replace a slot's id or name with s (a JSON string; anything else is ignored). */
static int slot_set(buf_t *b, const json_t *s)
{
    if (!json_is_string(s)) return 0;
    buf_reset(b);
    return buf_append(b, json_string_value(s), json_string_length(s)) ? -1 : 0;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Deliver slot i as one PEV_TOOL_CALL and close it. -1 if its arguments are not
 * JSON or its id or name holds a NUL, else 0 or the callback's value. */
static int slot_close(provider_parser *p, size_t i)
{
    tool_slot *t = &p->tools[i];
    const char *a = t->args.p ? t->args.p : "";
    size_t n = t->args.len;
    char *dumped = NULL;
    int rc = 0;
    while (n && is_ws(*a)) a++, n--;
    if (n == 0) {
        /* No deltas: the arguments given up front, or none at all. */
        dumped = t->input ? json_dumps(t->input, JSON_COMPACT) : NULL;
        a = dumped ? dumped : "{}";
    } else if (json_validate(a, n, NULL) != 0) {
        rc = -1;
        goto out;
    }
    /* An id or a name is a C string from here on (event keys, tool look-ups): one
     * holding a NUL (JSON's \u0000) would be read cut short, so the stream is malformed. */
    if ((t->id.len && memchr(t->id.p, '\0', t->id.len)) || (t->name.len && memchr(t->name.p, '\0', t->name.len))) {
        rc = -1;
        goto out;
    }
    provider_event ev = {.kind = PEV_TOOL_CALL, .id = t->id.p ? t->id.p : "",
                         .name = t->name.p ? t->name.p : "", .args = a};
    rc = emit(p, &ev);
out:
    free(dumped);
    slot_free(t);
    /* Keep the rest in the order they opened, which is the order they go out in. */
    memmove(&p->tools[i], &p->tools[i + 1], (p->ntools - i - 1) * sizeof p->tools[0]);
    p->ntools--;
    return rc;
}

/* Deliver every open call, in the order they were opened. */
static int slots_flush(provider_parser *p)
{
    int rc = 0;
    while (!rc && p->ntools) rc = slot_close(p, 0);
    return rc;
}

/* A token count; *found is set if there was one. A negative count from a confused
 * server counts as none rather than reducing a total. */
static int64_t tokens(const json_t *o, const char *key, int *found)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) return 0;
    *found = 1;
    return json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

/* ---- Anthropic Messages -------------------------------------------------------- */

/* message_start and message_delta carry cumulative counts; cache reads and writes
 * are input too, so the input total is their sum with input_tokens. */
static int anthropic_usage(provider_parser *p, const json_t *u)
{
    if (!json_is_object(u)) return 0;
    int in = 0, out = 0;
    int64_t sum = tokens(u, "input_tokens", &in) +
                  tokens(u, "cache_creation_input_tokens", &in) +
                  tokens(u, "cache_read_input_tokens", &in);
    int64_t o = tokens(u, "output_tokens", &out);
    if (in) p->input_tokens = sum;
    if (out) p->output_tokens = o;
    return in || out ? emit_usage(p) : 0;
}

/* An error inside a 200 stream (overloaded_error, api_error): reported, not fatal
 * to the parser; the server closes the stream after it. */
static int anthropic_error(provider_parser *p, const json_t *d)
{
    json_t *e = json_object_get(d, "error");
    const char *type = json_string_value(json_object_get(e, "type"));
    json_t *msg = json_object_get(e, "message");
    provider_event ev = {.kind = PEV_ERROR, .error_type = type ? type : "error",
                         .text = json_is_string(msg) ? json_string_value(msg) : "",
                         .len = json_string_length(msg)};
    return emit(p, &ev);
}

static int anthropic_block_start(provider_parser *p, int64_t index, const json_t *cb)
{
    const char *type = json_string_value(json_object_get(cb, "type"));
    if (!type) return 0;
    if (!strcmp(type, "text")) return emit_text(p, PEV_TEXT, json_object_get(cb, "text"));
    if (!strcmp(type, "thinking"))
        return emit_text(p, PEV_THINKING, json_object_get(cb, "thinking"));
    if (strcmp(type, "tool_use") != 0) return 0;  /* server tools, redacted thinking */

    /* A block index reused without a stop starts over. */
    tool_slot *t = slot_find(p, index);
    int rc = t ? slot_close(p, (size_t)(t - p->tools)) : 0;
    if (rc) return rc;
    if (!(t = slot_open(p, index))) return -1;
    if (slot_set(&t->id, json_object_get(cb, "id")) ||
        slot_set(&t->name, json_object_get(cb, "name")))
        return -1;
    /* The API opens with "input": {} and streams the rest; a proxy that sends the
     * whole input here instead is honoured when no fragment follows. */
    json_t *input = json_object_get(cb, "input");
    if (json_is_object(input) && json_object_size(input)) t->input = json_deep_copy(input);
    return 0;
}

static int anthropic_block_delta(provider_parser *p, int64_t index, const json_t *delta)
{
    const char *type = json_string_value(json_object_get(delta, "type"));
    if (!type) return 0;
    if (!strcmp(type, "text_delta")) return emit_text(p, PEV_TEXT, json_object_get(delta, "text"));
    if (!strcmp(type, "thinking_delta"))
        return emit_text(p, PEV_THINKING, json_object_get(delta, "thinking"));
    if (strcmp(type, "input_json_delta") != 0) return 0;  /* signature_delta, citations */

    /* Fragments are kept as raw text: they only become JSON all together. A
     * fragment for a block that is not a tool call is ignored like any stray. */
    json_t *part = json_object_get(delta, "partial_json");
    tool_slot *t = slot_find(p, index);
    if (!t || !json_is_string(part)) return 0;
    return buf_append(&t->args, json_string_value(part), json_string_length(part)) ? -1 : 0;
}

static int anthropic_event(provider_parser *p, const char *name, const json_t *d)
{
    /* The payload names its own type; the SSE event name is the fallback. */
    const char *type = json_string_value(json_object_get(d, "type"));
    if (!type) type = name;
    json_t *ix = json_object_get(d, "index");
    int64_t index = json_is_integer(ix) ? json_integer_value(ix) : 0;

    if (!strcmp(type, "message_start"))
        return anthropic_usage(p, json_object_get(json_object_get(d, "message"), "usage"));
    if (!strcmp(type, "content_block_start"))
        return anthropic_block_start(p, index, json_object_get(d, "content_block"));
    if (!strcmp(type, "content_block_delta"))
        return anthropic_block_delta(p, index, json_object_get(d, "delta"));
    if (!strcmp(type, "content_block_stop")) {
        tool_slot *t = slot_find(p, index);
        return t ? slot_close(p, (size_t)(t - p->tools)) : 0;
    }
    if (!strcmp(type, "message_delta")) {
        int rc = anthropic_usage(p, json_object_get(d, "usage"));
        json_t *delta = json_object_get(d, "delta");
        const char *stop = json_string_value(json_object_get(delta, "stop_reason"));
        if (rc || !stop) return rc;
        provider_event ev = {.kind = PEV_STOP, .stop_reason = stop};
        return emit(p, &ev);
    }
    if (!strcmp(type, "message_stop")) {
        /* A block left open is delivered rather than lost. */
        int rc = slots_flush(p);
        return rc ? rc : emit_done(p);
    }
    if (!strcmp(type, "error")) return anthropic_error(p, d);
    return 0;   /* ping, and types added after this was written */
}

/* ---- OpenAI Chat Completions --------------------------------------------------- */

/* e is the error object, or a bare message string; "type" is OpenAI's, "code"
 * what some compatible servers send instead. */
static int openai_error(provider_parser *p, const json_t *e)
{
    const char *type = json_string_value(json_object_get(e, "type"));
    if (!type) type = json_string_value(json_object_get(e, "code"));
    json_t *msg = json_is_string(e) ? (json_t *)e : json_object_get(e, "message");
    provider_event ev = {.kind = PEV_ERROR, .error_type = type ? type : "error",
                         .text = json_is_string(msg) ? json_string_value(msg) : "",
                         .len = json_string_length(msg)};
    return emit(p, &ev);
}

/* One tool_calls[] element: the first names the call, the rest carry arguments. */
static int openai_tool_delta(provider_parser *p, const json_t *tc)
{
    json_t *ix = json_object_get(tc, "index");
    json_t *id = json_object_get(tc, "id");
    json_t *fn = json_object_get(tc, "function");
    tool_slot *t = NULL;
    if (json_is_integer(ix)) {
        t = slot_open(p, json_integer_value(ix));
    } else {
        /* Some servers leave out index: a new id opens a call, else the last one. */
        int64_t next = 0;
        for (size_t i = 0; i < p->ntools; i++) {
            tool_slot *s = &p->tools[i];
            if (json_string_length(id) && s->id.p && !strcmp(s->id.p, json_string_value(id))) t = s;
            if (s->index >= next) next = s->index + 1;
        }
        if (!t && !json_string_length(id) && p->ntools) t = &p->tools[p->ntools - 1];
        if (!t) t = slot_open(p, next);
    }
    if (!t) return -1;
    /* id and name arrive once; servers that repeat them must not double them. */
    if (!t->id.len && json_string_length(id) && slot_set(&t->id, id)) return -1;
    json_t *name = json_object_get(fn, "name");
    if (!t->name.len && json_string_length(name) && slot_set(&t->name, name)) return -1;
    json_t *args = json_object_get(fn, "arguments");
    if (json_is_string(args))
        return buf_append(&t->args, json_string_value(args), json_string_length(args)) ? -1 : 0;
    if (json_is_object(args) || json_is_array(args)) {
        /* A few servers send the arguments as a JSON value rather than text. */
        char *s = json_dumps(args, JSON_COMPACT);
        int rc = s && buf_puts(&t->args, s) == 0 ? 0 : -1;
        free(s);
        return rc;
    }
    return 0;
}

static int openai_choice(provider_parser *p, const json_t *c)
{
    json_t *delta = json_object_get(c, "delta");
    int rc;
    /* llama.cpp, vLLM and DeepSeek say reasoning_content; OpenRouter says reasoning. */
    json_t *r = json_object_get(delta, "reasoning_content");
    if (!json_is_string(r)) r = json_object_get(delta, "reasoning");
    if ((rc = emit_text(p, PEV_THINKING, r))) return rc;
    if ((rc = emit_text(p, PEV_TEXT, json_object_get(delta, "content")))) return rc;
    json_t *calls = json_object_get(delta, "tool_calls");
    size_t i;
    json_t *tc;
    json_array_foreach(calls, i, tc)
        if ((rc = openai_tool_delta(p, tc))) return rc;
    /* The calls are complete once the choice finishes; they go out before the
     * stop so that a consumer sees every call before it learns why the turn ended. */
    const char *finish = json_string_value(json_object_get(c, "finish_reason"));
    if (!finish) return 0;
    if ((rc = slots_flush(p))) return rc;
    provider_event ev = {.kind = PEV_STOP, .stop_reason = finish};
    return emit(p, &ev);
}

static int openai_event(provider_parser *p, const json_t *d)
{
    int rc;
    /* OpenAI puts an error under "error"; vLLM sends {"object": "error", ...}. */
    json_t *err = json_object_get(d, "error");
    if (err && !json_is_null(err)) return openai_error(p, err);
    const char *object = json_string_value(json_object_get(d, "object"));
    if (object && !strcmp(object, "error")) return openai_error(p, d);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(d, "choices"), i, c) {
        /* Only the first choice: dstream never asks for n > 1. */
        json_t *ix = json_object_get(c, "index");
        if (ix && json_integer_value(ix) != 0) continue;
        if ((rc = openai_choice(p, c))) return rc;
    }
    /* With include_usage every chunk has "usage": null but the last one; some
     * servers fill it in on every chunk, which is harmless: the last one wins. */
    json_t *u = json_object_get(d, "usage");
    if (!json_is_object(u)) return 0;
    int found = 0;
    p->input_tokens = tokens(u, "prompt_tokens", &found);
    p->output_tokens = tokens(u, "completion_tokens", &found);
    return emit_usage(p);
}

/* ---- SSE ----------------------------------------------------------------------- */

/* A blank line: hand the assembled event to the format's handler. */
static int dispatch(provider_parser *p)
{
    int rc = 0;
    if (!p->has_data) goto out;
    const char *d = p->data.p ? p->data.p : "";
    size_t n = p->data.len;
    /* Keep-alives of whitespace are not worth failing a stream for. */
    while (n && is_ws(*d)) d++, n--;
    while (n && is_ws(d[n - 1])) n--;
    if (n == 0) goto out;
    if (p->kind == PROVIDER_OPENAI && n == 6 && !memcmp(d, "[DONE]", 6)) {
        rc = slots_flush(p);
        if (!rc) rc = emit_done(p);
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
    p->first_line = 1;
    return p;
}

void provider_parser_free(provider_parser *p)
{
    if (!p) return;
    buf_free(&p->line);
    buf_free(&p->event);
    buf_free(&p->data);
    for (size_t i = 0; i < p->ntools; i++) slot_free(&p->tools[i]);
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

int provider_kind_parse(const char *s)
{
    if (!s) return -1;
    if (!strcmp(s, "anthropic")) return PROVIDER_ANTHROPIC;
    if (!strcmp(s, "openai")) return PROVIDER_OPENAI;
    return -1;
}

/* ---- request body -------------------------------------------------------------- */

static const char *role_of(const json_t *m)
{
    const char *r = json_string_value(json_object_get(m, "role"));
    return r ? r : "";
}

/* A message's content as text: strings as they are, other JSON serialized (tool
 * results may be any value), nothing as "". New reference. */
static json_t *content_text(const json_t *m)
{
    json_t *c = json_object_get(m, "content");
    if (!c || json_is_null(c)) return json_string("");
    if (json_is_string(c)) return json_deep_copy(c);
    char *s = json_dumps(c, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *r = json_string(s ? s : "");
    free(s);
    return r;
}

static int content_empty(const json_t *m)
{
    json_t *c = json_object_get(m, "content");
    return !c || json_is_null(c) || (json_is_string(c) && json_string_length(c) == 0);
}

static const char *call_id(const json_t *m)
{
    const char *s = json_string_value(json_object_get(m, "callId"));
    return s && *s ? s : NULL;
}

/* 1 if a tool result for id follows entry i before the next assistant entry. */
static int answered(const json_t *hist, size_t i, const char *id)
{
    for (size_t j = i + 1; j < json_array_size(hist); j++) {
        const json_t *m = json_array_get(hist, j);
        if (!strcmp(role_of(m), "assistant")) return 0;
        const char *c = call_id(m);
        if (!strcmp(role_of(m), "tool") && c && !strcmp(c, id)) return 1;
    }
    return 0;
}

/* Put the history in an order both APIs accept. Each requires an assistant's tool
 * calls to be answered by the very next message(s), so: a call without a result
 * (its reply was interrupted) is dropped, as is a result without its call; a user
 * message that landed between calls and results (a background message) waits
 * until the results are in; an assistant entry left with no text and no calls (an
 * interrupted reply that produced nothing) is dropped, as are empty user
 * messages. hist is a private copy; returns a new array of its entries. */
static json_t *history_normalize(json_t *hist)
{
    json_t *out = json_array(), *deferred = json_array(), *pending = json_object();
    size_t i, k;
    json_t *m, *c;
    json_array_foreach(hist, i, m) {
        const char *role = role_of(m);
        if (!strcmp(role, "user")) {
            if (content_empty(m)) continue;
            json_array_append(json_object_size(pending) ? deferred : out, m);
        } else if (!strcmp(role, "assistant")) {
            json_array_extend(out, deferred);
            json_array_clear(deferred);
            json_object_clear(pending);
            json_t *kept = json_array();
            json_array_foreach(json_object_get(m, "toolCalls"), k, c) {
                const char *id = call_id(c);
                if (!id || json_object_get(pending, id) || !answered(hist, i, id)) continue;
                json_array_append(kept, c);
                json_object_set_new(pending, id, json_true());
            }
            if (!json_array_size(kept) && content_empty(m)) {
                json_decref(kept);
                continue;
            }
            json_object_set_new(m, "toolCalls", kept);
            json_array_append(out, m);
        } else if (!strcmp(role, "tool")) {
            const char *id = call_id(m);
            if (!id || !json_object_get(pending, id)) continue;
            json_object_del(pending, id);
            json_array_append(out, m);
            if (!json_object_size(pending)) {
                json_array_extend(out, deferred);
                json_array_clear(deferred);
            }
        }
    }
    json_array_extend(out, deferred);
    json_decref(deferred);
    json_decref(pending);
    return out;
}

/* Tool-call arguments as JSON text (OpenAI wants a string). New reference. */
static json_t *args_text(const json_t *call)
{
    json_t *a = json_object_get(call, "arguments");
    if (json_is_string(a)) return json_deep_copy(a);
    if (!a || json_is_null(a)) return json_string("{}");
    char *s = json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *r = json_string(s ? s : "{}");
    free(s);
    return r;
}

/* Tool-call arguments as an object (Anthropic's input must be one). New reference. */
static json_t *args_object(const json_t *call)
{
    json_t *a = json_object_get(call, "arguments");
    if (json_is_object(a)) return json_deep_copy(a);
    if (json_is_string(a)) {
        json_t *o = json_loadb(json_string_value(a), json_string_length(a), JSON_ALLOW_NUL, NULL);
        if (json_is_object(o)) return o;
        json_decref(o);
    }
    return json_object();
}

static json_t *text_block(json_t *text)
{
    return json_pack("{s:s,s:o}", "type", "text", "text", text);
}

/* Append blocks (stolen) as a message of role, merged into the previous message
 * when it has the same role: Anthropic requires roles to alternate. */
static void anthropic_push(json_t *msgs, const char *role, json_t *blocks)
{
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    if (!json_array_size(blocks)) {
        json_decref(blocks);
    } else if (last && !strcmp(role_of(last), role)) {
        json_array_extend(json_object_get(last, "content"), blocks);
        json_decref(blocks);
    } else {
        json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", role, "content", blocks));
    }
}

/* Final touches: tool results go before any text in a user message (the API
 * requires it), and a lone text block is sent as a plain string. */
static void anthropic_tidy(json_t *msgs)
{
    size_t i, k;
    json_t *m, *b;
    json_array_foreach(msgs, i, m) {
        json_t *content = json_object_get(m, "content");
        json_t *sorted = json_array(), *rest = json_array();
        json_array_foreach(content, k, b) {
            const char *t = json_string_value(json_object_get(b, "type"));
            json_array_append(t && !strcmp(t, "tool_result") ? sorted : rest, b);
        }
        json_array_extend(sorted, rest);
        json_decref(rest);
        json_t *only = json_array_get(sorted, 0);
        const char *type = json_string_value(json_object_get(only, "type"));
        if (json_array_size(sorted) == 1 && !strcmp(type, "text"))
            json_object_set(m, "content", json_object_get(only, "text"));
        else
            json_object_set(m, "content", sorted);
        json_decref(sorted);
    }
}

static json_t *anthropic_messages(const json_t *hist)
{
    json_t *msgs = json_array();
    size_t i, k;
    json_t *m, *c;
    json_array_foreach(hist, i, m) {
        const char *role = role_of(m);
        json_t *blocks = json_array();
        if (!strcmp(role, "user")) {
            json_array_append_new(blocks, text_block(content_text(m)));
        } else if (!strcmp(role, "assistant")) {
            if (!content_empty(m)) json_array_append_new(blocks, text_block(content_text(m)));
            json_array_foreach(json_object_get(m, "toolCalls"), k, c) {
                json_t *name = json_object_get(c, "name");
                json_array_append_new(blocks, json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use",
                    "id", call_id(c), "name", json_is_string(name) ? json_string_value(name) : "",
                    "input", args_object(c)));
            }
        } else {
            json_array_append_new(blocks, json_pack("{s:s,s:s,s:o}", "type", "tool_result",
                "tool_use_id", call_id(m), "content", content_text(m)));
            role = "user";
        }
        anthropic_push(msgs, role, blocks);
    }
    anthropic_tidy(msgs);
    return msgs;
}

static json_t *openai_messages(const json_t *agent, const json_t *hist)
{
    json_t *msgs = json_array();
    size_t i, k;
    json_t *m, *c;
    json_t *sys = json_object_get(agent, "system");
    if (json_string_length(sys))
        json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "system", "content",
                                              json_deep_copy(sys)));
    json_array_foreach(hist, i, m) {
        const char *role = role_of(m);
        if (!strcmp(role, "user")) {
            json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "user", "content",
                                                  content_text(m)));
        } else if (!strcmp(role, "assistant")) {
            json_t *calls = json_object_get(m, "toolCalls");
            /* content may be null only when the message carries tool calls. */
            json_t *text = content_empty(m) && json_array_size(calls) ? json_null()
                                                                      : content_text(m);
            json_t *o = json_pack("{s:s,s:o}", "role", "assistant", "content", text);
            if (json_array_size(calls)) {
                json_t *tc = json_array();
                json_array_foreach(calls, k, c) {
                    json_t *name = json_object_get(c, "name");
                    json_array_append_new(tc, json_pack("{s:s,s:s,s:{s:s,s:o}}", "id", call_id(c),
                        "type", "function", "function",
                        "name", json_is_string(name) ? json_string_value(name) : "",
                        "arguments", args_text(c)));
                }
                json_object_set_new(o, "tool_calls", tc);
            }
            json_array_append_new(msgs, o);
        } else {
            json_array_append_new(msgs, json_pack("{s:s,s:s,s:o}", "role", "tool",
                "tool_call_id", call_id(m), "content", content_text(m)));
        }
    }
    return msgs;
}

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
    json_t *norm = history_normalize(hist);
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

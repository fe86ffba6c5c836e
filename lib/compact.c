#include "compact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "chathist.h"

#define TRANSCRIPT_MAX (64u << 20)

static const char SYSTEM[] =
    "You summarize conversations between a user and an AI assistant so that the assistant can go on "
    "with the conversation from the summary alone, the earlier messages being gone.";
static const char INSTRUCTION[] =
    "Summarize the conversation above. Keep what the rest of the conversation may need: what the user "
    "wants and asked for, the facts, names, numbers, decisions and conclusions, what the tools were "
    "asked and answered, and what is still open. Be concise; answer with the summary only.";
static const char HEADING[] =
    "# Summary of the earlier conversation\n\n"
    "The conversation began before the messages you see; what was said then is summarized here:\n\n";

int64_t compact_tokens(size_t len)
{
    return (int64_t)((len + COMPACT_BYTES_PER_TOKEN - 1) / COMPACT_BYTES_PER_TOKEN);
}

static size_t json_len(const json_t *j)
{
    if (!j) return 0;
    if (json_is_string(j)) return json_string_length(j);
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = s ? strlen(s) : 0;
    free(s);
    return n;
}

int compact_sent(const json_t *m)
{
    const char *reason = json_string_value(json_object_get(m, "reason"));
    if (reason && (!strcmp(reason, "restart") || !strcmp(reason, "failed"))) return 0;
    return !json_is_true(json_object_get(m, "superseded")) && !json_is_true(json_object_get(m, "compacted"));
}

static int64_t entry_tokens(const json_t *m)
{
    int64_t t = COMPACT_MESSAGE_TOKENS + compact_tokens(json_len(json_object_get(m, "content")));
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(m, "toolCalls"), i, c)
        t += compact_tokens(json_len(json_object_get(c, "name")) + json_len(json_object_get(c, "arguments")));
    return t;
}

/* Estimated tokens of the entries of messages from index `from` that are sent. */
static int64_t estimate_from(const json_t *messages, size_t from)
{
    int64_t t = 0;
    for (size_t i = from; i < json_array_size(messages); i++) {
        const json_t *m = json_array_get(messages, i);
        if (compact_sent(m)) t += entry_tokens(m);
    }
    return t;
}

int64_t compact_estimate_messages(const json_t *messages)
{
    return estimate_from(messages, 0);
}

int64_t compact_estimate_agent(const json_t *agent, const char *summary)
{
    int64_t t = compact_tokens(json_len(json_object_get(agent, "system")));
    const json_t *tools = json_object_get(agent, "tools");
    if (json_array_size(tools)) t += compact_tokens(json_len(tools));
    if (summary) t += compact_tokens(sizeof HEADING - 1 + strlen(summary));
    return t;
}

int64_t compact_budget(const json_t *agent, int64_t window)
{
    const json_t *ct = json_object_get(json_object_get(agent, "limits"), "contextTokens");
    int64_t a = json_is_integer(ct) && json_integer_value(ct) > 0 ? json_integer_value(ct) : 0, w = 0;
    if (window > 0) {
        const json_t *mt = json_object_get(json_object_get(agent, "parameters"), "max_tokens");
        int64_t out = json_is_integer(mt) ? json_integer_value(mt) : COMPACT_OUTPUT_RESERVE;
        /* A reply allowed most of the window still leaves the prompt half of it. */
        w = window - out > window / 2 ? window - out : window / 2;
    }
    if (a && w) return a < w ? a : w;
    return a ? a : w;
}

static const char *role(const json_t *m)
{
    return chathist_role(m);
}

ssize_t compact_cut(const json_t *messages, int64_t keep)
{
    size_t n = json_array_size(messages), first = 0, i, k;
    while (first < n && json_is_true(json_object_get(json_array_get(messages, first), "compacted"))) first++;
    /* Where each call's result is (a call never answered is dropped from what is
     * sent, lib/chathist, and parts nothing). */
    json_t *answered_at = json_object();
    for (i = first; i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        const char *id = chathist_call_id(m);
        if (!strcmp(role(m), "tool") && id) json_object_set_new(answered_at, id, json_integer((json_int_t)i));
    }
    ssize_t earliest_fit = -1, latest = -1;
    size_t open_until = 0;      /* a call before i is answered at this index or later */
    int sent_before = 0;
    for (i = first; i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        if (i > first && sent_before && open_until <= i && !strcmp(role(m), "user") && compact_sent(m) &&
            json_is_string(json_object_get(m, "offset"))) {
            latest = (ssize_t)i;
            if (earliest_fit < 0 && keep > 0 && estimate_from(messages, i) <= keep) earliest_fit = (ssize_t)i;
        }
        if (compact_sent(m)) sent_before = 1;
        if (!strcmp(role(m), "assistant") && compact_sent(m)) {
            const json_t *c;
            json_array_foreach(json_object_get(m, "toolCalls"), k, c) {
                const char *id = chathist_call_id(c);
                const json_t *at = id ? json_object_get(answered_at, id) : NULL;
                if (at && (size_t)json_integer_value(at) + 1 > open_until)
                    open_until = (size_t)json_integer_value(at) + 1;
            }
        }
    }
    json_decref(answered_at);
    return earliest_fit >= 0 ? earliest_fit : latest;
}

/* Append an entry's content as text. */
static void put_text(buf_t *b, const json_t *m)
{
    json_t *t = chathist_text(m);
    buf_append(b, json_string_value(t), json_string_length(t));
    json_decref(t);
}

/* Entry m of the transcript into b (nothing for an entry that is not sent). */
static void put_entry(buf_t *b, const json_t *m)
{
    const json_t *c;
    size_t k;
    if (!compact_sent(m)) return;
    const char *r = role(m);
    if (!strcmp(r, "user")) {
        buf_puts(b, "\nUser: ");
        put_text(b, m);
    } else if (!strcmp(r, "assistant")) {
        if (!chathist_empty(m)) {
            buf_puts(b, "\nAssistant: ");
            put_text(b, m);
        }
        json_array_foreach(json_object_get(m, "toolCalls"), k, c) {
            char *args = json_dumps(json_object_get(c, "arguments"), JSON_COMPACT | JSON_ENCODE_ANY);
            const char *name = json_string_value(json_object_get(c, "name"));
            buf_printf(b, "\nAssistant called the tool %s with %s", name ? name : "?", args ? args : "{}");
            free(args);
        }
    } else if (!strcmp(r, "tool")) {
        buf_puts(b, "\nTool result: ");
        put_text(b, m);
    }
    buf_puts(b, "\n");
}

json_t *compact_request_messages(const json_t *messages, size_t cut, const char *prev, size_t max_bytes)
{
    buf_t b;
    size_t n = cut < json_array_size(messages) ? cut : json_array_size(messages), from = 0, left = 0;
    buf_init(&b, TRANSCRIPT_MAX);
    if (max_bytes) {
        /* The latest entries that fit (after the previous summary), the earliest left out. */
        size_t total = prev ? strlen(prev) : 0;
        from = n;
        while (from > 0) {
            buf_t one;
            buf_init(&one, TRANSCRIPT_MAX);
            put_entry(&one, json_array_get(messages, from - 1));
            size_t len = one.len;
            buf_free(&one);
            if (total + len > max_bytes) break;
            total += len;
            from--;
        }
        for (size_t i = 0; i < from; i++) left += compact_sent(json_array_get(messages, i));
    }
    if (prev) {
        buf_puts(&b, "Summary of the conversation before what follows:\n");
        buf_puts(&b, prev);
        buf_puts(&b, "\n\n");
    }
    buf_puts(&b, "The conversation:\n");
    if (left) buf_printf(&b, "\n[its %zu earliest messages are left out: too long to summarize at once]\n", left);
    for (size_t i = from; i < n; i++) put_entry(&b, json_array_get(messages, i));
    buf_puts(&b, "\n");
    buf_puts(&b, INSTRUCTION);
    /* At the ceiling the transcript is cut short; the instruction may be lost
     * with it, and the model summarizes what it got. */
    json_t *out = json_pack("[{s:s, s:s%}]", "role", "user", "content", b.p ? b.p : "", b.len);
    buf_free(&b);
    return out;
}

json_t *compact_agent(const json_t *agent, const char *provider, const char *model)
{
    json_t *a = json_pack("{s:s, s:{s:i}}", "system", SYSTEM, "parameters", "max_tokens", COMPACT_SUMMARY_TOKENS);
    const json_t *name = json_object_get(agent, "name");
    if (name) json_object_set(a, "name", (json_t *)name);
    if (provider && model) {
        json_object_set_new(a, "provider", json_string(provider));
        json_object_set_new(a, "model", json_string(model));
    } else {
        json_object_set(a, "provider", json_object_get(agent, "provider"));
        json_object_set(a, "model", json_object_get(agent, "model"));
        const json_t *ep = json_object_get(agent, "endpoint");
        if (ep) json_object_set(a, "endpoint", (json_t *)ep);
    }
    return a;
}

void compact_apply_summary(json_t *shown, const char *summary)
{
    if (!summary) return;
    const char *sys = json_string_value(json_object_get(shown, "system"));
    buf_t b;
    buf_init(&b, TRANSCRIPT_MAX);
    if (sys && *sys) {
        buf_puts(&b, sys);
        buf_puts(&b, "\n\n");
    }
    buf_puts(&b, HEADING);
    buf_puts(&b, summary);
    json_object_set_new(shown, "system", json_stringn(b.p ? b.p : "", b.len));
    buf_free(&b);
}

/* The integer that s begins with (after spaces), or -1. */
static int64_t number_at(const char *s)
{
    while (*s == ' ') s++;
    int64_t n = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9' && digits < 12; s++, digits++) n = n * 10 + (*s - '0');
    return digits && digits < 12 ? n : -1;
}

int64_t compact_overflow_window(const char *msg)
{
    const char *p;
    int64_t m = -1;
    if (!msg) return 0;
    if ((p = strstr(msg, "maximum context length is "))) {
        m = number_at(p + 26);
    } else if ((p = strstr(msg, " > ")) && strstr(p, " maximum")) {
        m = number_at(p + 3);
    }
    return m > 0 ? m : 0;
}

int compact_overflow(long status, const char *body, size_t len, char *msg, size_t cap)
{
    if (cap) msg[0] = '\0';
    if (status != 400 || !body) return 0;
    json_t *j = json_loadb(body, len, 0, NULL);
    const json_t *e = json_object_get(j, "error");
    const char *type = json_string_value(json_object_get(e, "type"));
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *m = json_string_value(json_object_get(e, "message"));
    int over = (code && !strcmp(code, "context_length_exceeded")) ||
               (type && !strcmp(type, "invalid_request_error") && m && !strncmp(m, "prompt is too long", 18));
    if (over && cap) snprintf(msg, cap, "%s", m ? m : "the prompt is over the model's context window");
    json_decref(j);
    return over;
}

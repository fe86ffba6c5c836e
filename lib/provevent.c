#include "provevent.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"

/* A parser without a callback still parses and checks: the fuzzer relies on it. */
int pev_emit(provider_parser *p, provider_event *ev)
{
    return p->fn ? p->fn(p->ud, ev) : 0;
}

int pev_text(provider_parser *p, pev_kind kind, const json_t *s)
{
    /* Empty pieces carry nothing; jansson strings may hold NULs, hence the length. */
    size_t n = json_string_length(s);
    if (!json_is_string(s) || n == 0) return 0;
    provider_event ev = {.kind = kind, .text = json_string_value(s), .len = n};
    return pev_emit(p, &ev);
}

int pev_error(provider_parser *p, const char *type, const json_t *msg)
{
    provider_event ev = {.kind = PEV_ERROR, .error_type = type ? type : "error",
                         .text = json_is_string(msg) ? json_string_value(msg) : "",
                         .len = json_string_length(msg)};
    return pev_emit(p, &ev);
}

int pev_usage(provider_parser *p)
{
    provider_event ev = {.kind = PEV_USAGE, .input_tokens = p->input_tokens,
                         .output_tokens = p->output_tokens};
    return pev_emit(p, &ev);
}

int pev_done(provider_parser *p)
{
    provider_event ev = {.kind = PEV_DONE};
    /* Set first: a callback that stops the parser here still saw a whole stream. */
    p->done = 1;
    return pev_emit(p, &ev);
}

void pev_slot_free(tool_slot *t)
{
    buf_free(&t->id);
    buf_free(&t->name);
    buf_free(&t->args);
    json_decref(t->input);
    t->input = NULL;
}

/* A linear search: there are at most PROVIDER_TOOLS_OPEN_MAX slots, usually one. */
tool_slot *pev_slot_find(provider_parser *p, int64_t index)
{
    for (size_t i = 0; i < p->ntools; i++)
        if (p->tools[i].index == index) return &p->tools[i];
    return NULL;
}

/* The slot for index, opened if new. NULL when too many calls are open at once. */
tool_slot *pev_slot_open(provider_parser *p, int64_t index)
{
    tool_slot *t = pev_slot_find(p, index);
    if (t) return t;
    if (p->ntools == PROVIDER_TOOLS_OPEN_MAX) return NULL;
    if (p->ntools == p->captools) {
        size_t cap = p->captools ? p->captools * 2 : 1;
        if (cap > PROVIDER_TOOLS_OPEN_MAX) cap = PROVIDER_TOOLS_OPEN_MAX;
        tool_slot *v = realloc(p->tools, cap * sizeof *v);
        if (!v) return NULL;
        p->tools = v;
        p->captools = cap;
    }
    /* A slot's buffers allocate nothing until an argument arrives. */
    t = &p->tools[p->ntools++];
    t->index = index;
    buf_init(&t->id, PROVIDER_TOOL_ID_MAX);
    buf_init(&t->name, PROVIDER_TOOL_ID_MAX);
    buf_init(&t->args, PROVIDER_TOOL_ARGS_MAX);
    t->input = NULL;
    return t;
}

/* Replace a slot's id or name with s (a JSON string; anything else is ignored). */
int pev_slot_set(buf_t *b, const json_t *s)
{
    if (!json_is_string(s)) return 0;
    buf_reset(b);
    return buf_append(b, json_string_value(s), json_string_length(s)) ? -1 : 0;
}

int pev_is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Deliver slot i as one PEV_TOOL_CALL and close it. -1 if its arguments are not
 * JSON or its id or name holds a NUL, else 0 or the callback's value. */
int pev_slot_close(provider_parser *p, size_t i)
{
    tool_slot *t = &p->tools[i];
    const char *a = t->args.p ? t->args.p : "";
    size_t n = t->args.len;
    char *dumped = NULL;
    int rc = 0;
    while (n && pev_is_ws(*a)) a++, n--;
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
    rc = pev_emit(p, &ev);
out:
    free(dumped);
    pev_slot_free(t);
    /* Keep the rest in the order they opened, which is the order they go out in. */
    memmove(&p->tools[i], &p->tools[i + 1], (p->ntools - i - 1) * sizeof p->tools[0]);
    p->ntools--;
    return rc;
}

/* Deliver every open call, in the order they were opened. */
int pev_slots_flush(provider_parser *p)
{
    int rc = 0;
    while (!rc && p->ntools) rc = pev_slot_close(p, 0);
    return rc;
}

/* A token count; *found is set if there was one. A negative count from a confused
 * server counts as none rather than reducing a total. */
int64_t pev_tokens(const json_t *o, const char *key, int *found)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) return 0;
    *found = 1;
    return json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

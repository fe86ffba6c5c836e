#include "chathist.h"

#include <stdlib.h>
#include <string.h>

const char *chathist_role(const json_t *m)
{
    const char *r = json_string_value(json_object_get(m, "role"));
    return r ? r : "";
}

/* A message's content as text: strings as they are, other JSON serialized (tool
 * results may be any value), nothing as "". New reference. */
json_t *chathist_text(const json_t *m)
{
    json_t *c = json_object_get(m, "content");
    if (!c || json_is_null(c)) return json_string("");
    if (json_is_string(c)) return json_deep_copy(c);
    char *s = json_dumps(c, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *r = json_string(s ? s : "");
    free(s);
    return r;
}

int chathist_empty(const json_t *m)
{
    json_t *c = json_object_get(m, "content");
    return !c || json_is_null(c) || (json_is_string(c) && json_string_length(c) == 0);
}

const char *chathist_call_id(const json_t *m)
{
    const char *s = json_string_value(json_object_get(m, "callId"));
    return s && *s ? s : NULL;
}

/* 1 if a tool result for id follows entry i before the next assistant entry. */
static int answered(const json_t *hist, size_t i, const char *id)
{
    for (size_t j = i + 1; j < json_array_size(hist); j++) {
        const json_t *m = json_array_get(hist, j);
        if (!strcmp(chathist_role(m), "assistant")) return 0;
        const char *c = chathist_call_id(m);
        if (!strcmp(chathist_role(m), "tool") && c && !strcmp(c, id)) return 1;
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
json_t *chathist_normalize(json_t *hist)
{
    json_t *out = json_array(), *deferred = json_array(), *pending = json_object();
    size_t i, k;
    json_t *m, *c;
    json_array_foreach(hist, i, m) {
        const char *role = chathist_role(m);
        if (!strcmp(role, "user")) {
            if (chathist_empty(m)) continue;
            json_array_append(json_object_size(pending) ? deferred : out, m);
        } else if (!strcmp(role, "assistant")) {
            json_array_extend(out, deferred);
            json_array_clear(deferred);
            json_object_clear(pending);
            json_t *kept = json_array();
            json_array_foreach(json_object_get(m, "toolCalls"), k, c) {
                const char *id = chathist_call_id(c);
                if (!id || json_object_get(pending, id) || !answered(hist, i, id)) continue;
                json_array_append(kept, c);
                json_object_set_new(pending, id, json_true());
            }
            if (!json_array_size(kept) && chathist_empty(m)) {
                json_decref(kept);
                continue;
            }
            json_object_set_new(m, "toolCalls", kept);
            json_array_append(out, m);
        } else if (!strcmp(role, "tool")) {
            const char *id = chathist_call_id(m);
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

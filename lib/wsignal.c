/* wsignal: signals to wait steps (see wsignal.h). */
#include "wsignal.h"

#include <string.h>

#include "agent.h"

int wsignal_valid_name(const char *name)
{
    return name && agent_valid_name(name);
}

int wsignal_awaited(const json_t *doc, const char *name)
{
    size_t i, j;
    json_t *ph, *st;
    if (!name) return 0;
    json_array_foreach(json_object_get(doc, "phases"), i, ph) {
        json_array_foreach(json_object_get(ph, "steps"), j, st) {
            const char *kind = json_string_value(json_object_get(st, "kind"));
            if (kind && !strcmp(kind, "wait") && json_object_get(json_object_get(st, "signals"), name)) return 1;
        }
    }
    return 0;
}

const json_t *wsignal_take(const session_view *v, const json_t *step)
{
    size_t i;
    const json_t *sig;
    const json_t *names = json_object_get(step, "signals");
    json_array_foreach(v->signals, i, sig) {
        const char *name = json_string_value(json_object_get(sig, PK_NAME));
        if (name && json_object_get(names, name)) return sig;
    }
    return NULL;
}

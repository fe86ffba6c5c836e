/* checkpoint: human checkpoints' answers (see checkpoint.h). */
#include "checkpoint.h"

#include <string.h>

const json_t *checkpoint_step(const json_t *doc, const char *id)
{
    size_t i, j;
    json_t *ph, *st;
    if (!id) return NULL;
    json_array_foreach(json_object_get(doc, "phases"), i, ph) {
        json_array_foreach(json_object_get(ph, "steps"), j, st) {
            const char *kind = json_string_value(json_object_get(st, "kind"));
            const char *sid = json_string_value(json_object_get(st, "id"));
            if (kind && sid && !strcmp(kind, "human") && !strcmp(sid, id)) return st;
        }
    }
    return NULL;
}

int checkpoint_budget_fits(const json_t *response)
{
    static const char *const limits[] = {"costBudgetUsd", "maxTokens", "maxRequests"};
    if (json_is_false(response)) return 1;
    if (json_is_number(response)) return json_number_value(response) > 0;
    if (!json_is_object(response) || json_object_size(response) == 0) return 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)response, k, v) {
        int known = 0;
        for (size_t i = 0; i < sizeof limits / sizeof *limits; i++) known |= !strcmp(k, limits[i]);
        if (!known || !json_is_number(v) || json_number_value(v) <= 0) return 0;
    }
    return 1;
}

int checkpoint_fits(const json_t *asking, const json_t *response)
{
    const char *kind = json_string_value(json_object_get(asking, "input"));
    if (!response) return 0;
    if (!kind) return 1;
    if (!strcmp(kind, "approval")) return json_is_boolean(response);
    if (!strcmp(kind, "text")) return json_is_string(response);
    if (!strcmp(kind, SESSION_INPUT_BUDGET)) return checkpoint_budget_fits(response);
    if (!strcmp(kind, "choice")) {
        size_t i;
        json_t *o;
        json_array_foreach(json_object_get(asking, "options"), i, o)
            if (json_equal(o, response)) return 1;
        return 0;
    }
    return 1;
}

checkpoint_verdict checkpoint_decide(const session_view *v, const json_t *workflow, const char *id,
                                     const json_t *response, const char **caused_by)
{
    const char *pid = v->pending ? json_string_value(json_object_get(v->pending, PK_INTERACTION_ID)) : NULL;
    *caused_by = NULL;
    if (json_object_get(v->early, id)) return CHECKPOINT_ANSWERED;
    if (pid && !strcmp(pid, id)) {
        if (!checkpoint_fits(v->pending, response)) return CHECKPOINT_BAD_RESPONSE;
        *caused_by = json_string_value(json_object_get(v->pending, "offset"));
        return CHECKPOINT_OK;
    }
    /* A chat's tool call waiting for approval (a yes or no). */
    const json_t *call = session_view_approval_call(v, id);
    if (call) {
        const json_t *ask = json_object_get(call, SESSION_CALL_APPROVAL);
        if (!checkpoint_fits(ask, response)) return CHECKPOINT_BAD_RESPONSE;
        *caused_by = json_string_value(json_object_get(ask, "offset"));
        return CHECKPOINT_OK;
    }
    /* Not asked yet: kept for when the runner reaches that checkpoint. */
    const json_t *st = checkpoint_step(workflow, id);
    if (!st) return CHECKPOINT_NOT_REQUESTED;
    return checkpoint_fits(st, response) ? CHECKPOINT_OK : CHECKPOINT_BAD_RESPONSE;
}

const json_t *checkpoint_answer(const session_view *v, const json_t *step)
{
    const json_t *a = json_object_get(v->early, json_string_value(json_object_get(step, "id")));
    return a && checkpoint_fits(step, a) ? a : NULL;
}

/* workflow: updates, validation and the decision core (paths, templates and
 * conditions are lib/wfexpr's, the JSON-Schema subset lib/wfschema's).
 *
 * Everything here is pure: functions read their arguments and write only their
 * out-parameters, so that the runner can replay a session's events through
 * workflow_next() and reach the same decisions every time.
 *
 * Documents come from clients, so nothing here trusts them. The validator walks the
 * whole document and names every mistake instead of stopping at the first, because
 * a user fixing a workflow wants the full list in one round trip. workflow_next()
 * never assumes the
 * document was validated either; a broken one yields NEXT_FAIL, not a crash. */
#include "workflow.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "jcheck.h"
#include "timefmt.h"
#include "wfexpr.h"
#include "wfschema.h"

/* Limits. Beyond them an input is a mistake rather than a resource problem; they
 * bound the parser's work, the recursion depth and the size of error messages. */
#define WF_RENDER_MAX (1u << 20)   /* bytes of one string rendered into state */
#define WF_PHASES_MAX 64
#define WF_STEPS_MAX 64
#define WF_TRANSITIONS_MAX 16
#define WF_OPTIONS_MIN 2
#define WF_OPTIONS_MAX 20
#define WF_TOOL_MAX 128            /* bytes in a tool name */
#define WF_SIGNALS_MAX 16          /* signals one wait step waits for */

/* Which of "$output", "$response" and "$input" a value may use. SUB_ON says the
 * three are special at all: in tool arguments they are plain template text. */
#define SUB_OUTPUT 1u
#define SUB_RESPONSE 2u
#define SUB_INPUT 4u
#define SUB_ON 8u
#define SUB_PAYLOAD 16u

/* The values the specials stand for (any may be NULL: JSON null). */
typedef struct specials {
    const json_t *output, *response, *input, *payload;
} specials;

/* ---- updates ------------------------------------------------------------------------ */

/* What one update or value may still add, in bytes: the strings it renders and the
 * values it copies in. Checked before each is built, so that a template that names
 * a large value many times ("{{state.big}}" x 48) fails at the limit instead of
 * building all of it. max 0: no limit (but WF_RENDER_MAX per string still holds). */
typedef struct budget {
    size_t max, left;
    int over;               /* the limit stopped it: WORKFLOW_ETOOLARGE */
} budget;

static void over_budget(budget *bud, char *err, size_t errcap)
{
    bud->over = 1;
    jcheck_seterr(err, errcap, "it would take more than %zu bytes (the limit on a workflow's state)", bud->max);
}

/* A new value for v: with SUB_ON, the strings "$output", "$response" and "$input"
 * become copies of those values (JSON null when absent); every other string is
 * rendered as a template against state and input. Whatever it adds is taken from
 * bud. */
static json_t *subst(const json_t *v, unsigned flags, const specials *sp, const json_t *state,
                     budget *bud, int depth, char *err, size_t errcap)
{
    const json_t *input = sp->input;
    json_t *res = NULL;
    /* Values come from stored documents; the bound keeps recursion shallow
     * whatever a client built. */
    if (depth > WF_VALUE_DEPTH) {
        jcheck_seterr(err, errcap, "value nested deeper than %d", WF_VALUE_DEPTH);
        return NULL;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        const json_t *sub = NULL;
        int special = 0;
        if (flags & SUB_ON) {
            if (strcmp(s, "$output") == 0) special = 1, sub = sp->output;
            else if (strcmp(s, "$response") == 0) special = 1, sub = sp->response;
            else if (strcmp(s, "$payload") == 0) special = 1, sub = sp->payload;
            else if (strcmp(s, "$input") == 0) special = 1, sub = input;
        }
        if (special) {
            /* Its size as JSON, measured without building the text. */
            size_t n = sub ? json_dumpb(sub, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 4;
            if (bud->max && n > bud->left) {
                over_budget(bud, err, errcap);
                return NULL;
            }
            if (bud->max) bud->left -= n;
            res = sub ? json_deep_copy(sub) : json_null();
            if (!res) jcheck_seterr(err, errcap, "out of memory");
            return res;
        }
        buf_t b;
        size_t cap = bud->max && bud->left < WF_RENDER_MAX ? bud->left : WF_RENDER_MAX;
        buf_init(&b, cap);
        int rc = wfexpr_template(s, state, input, &b, err, errcap);
        if (rc == 0) {
            res = json_stringn(b.p ? b.p : "", b.len);
            if (!res) jcheck_seterr(err, errcap, "rendered text is not valid UTF-8");
            else if (bud->max) bud->left -= b.len;
        } else if (rc == -2 && bud->max && cap == bud->left) {
            over_budget(bud, err, errcap);
        }
        buf_free(&b);
        return res;
    }
    /* Containers are rebuilt, never shared with the document: the state must not
     * alias the workflow definition that the runner keeps using. */
    if (json_is_object(v)) {
        res = json_object();
        const char *key;
        const json_t *x;
        json_object_foreach((json_t *)v, key, x) {
            json_t *nx = subst(x, flags, sp, state, bud, depth + 1, err, errcap);
            if (!nx || json_object_set_new(res, key, nx)) goto fail;
        }
        return res;
    }
    if (json_is_array(v)) {
        res = json_array();
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) {
            json_t *nx = subst(x, flags, sp, state, bud, depth + 1, err, errcap);
            if (!nx || json_array_append_new(res, nx)) goto fail;
        }
        return res;
    }
    res = json_deep_copy(v);
    if (!res) jcheck_seterr(err, errcap, "out of memory");
    return res;
fail:
    json_decref(res);
    return NULL;
}

static int apply(json_t *state, const json_t *update, const specials *sp, size_t max, char *err, size_t errcap)
{
    int rc = -1;
    budget bud = {max, max, 0};
    json_t *copy = NULL;
    char msg[WORKFLOW_ERR_MAX], q[JCHECK_QUOTE];
    if (!json_is_object(state)) {
        jcheck_seterr(err, errcap, "state is not an object");
        return -1;
    }
    if (!update) return 0;
    if (!json_is_object(update)) {
        jcheck_seterr(err, errcap, "update is not an object");
        return -1;
    }
    /* Work on a copy and swap it in at the end, so that a failure in the third
     * key leaves the first two unapplied. Templates read the state as it was
     * before the update, whatever the order of the keys. */
    copy = json_deep_copy(state);
    if (!copy) {
        jcheck_seterr(err, errcap, "out of memory");
        return -1;
    }
    const char *key;
    size_t klen;
    const json_t *v;
    /* By the key's real length: one with a NUL inside is not the path before it. */
    json_object_keylen_foreach((json_t *)update, key, klen, v) {
        const char *k = jcheck_show(q, sizeof q, key, klen);
        if (!wfexpr_path_ok(key, klen)) {
            jcheck_seterr(err, errcap, "%s: not a state path", k);
            goto out;
        }
        json_t *nv = subst(v, SUB_ON, sp, state, &bud, 0, msg, sizeof msg);
        if (!nv) {
            jcheck_seterr(err, errcap, "%s: %s", k, msg);
            if (bud.over) rc = WORKFLOW_ETOOLARGE;
            goto out;
        }
        if (workflow_set_path(copy, key, nv)) {
            jcheck_seterr(err, errcap, "%s: a value that is not an object is in the way", k);
            goto out;
        }
    }
    /* The state as a whole, as its state:updated event will carry it. */
    size_t n = max ? json_dumpb(copy, NULL, 0, JSON_COMPACT) : 0;
    if (n > max) {
        jcheck_seterr(err, errcap, "the state would be %zu bytes, more than its limit of %zu", n, max);
        rc = WORKFLOW_ETOOLARGE;
        goto out;
    }
    /* Swap the contents, not the object: the caller's reference stays valid. */
    json_object_clear(state);
    if (json_object_update(state, copy)) {
        jcheck_seterr(err, errcap, "out of memory");
        goto out;
    }
    rc = 0;
out:
    json_decref(copy);
    return rc;
}

int workflow_apply_update(json_t *state, const json_t *update, const json_t *output,
                          const json_t *response, const json_t *input, size_t max, char *err,
                          size_t errcap)
{
    specials sp = {output, response, input, NULL};
    return apply(state, update, &sp, max, err, errcap);
}

int workflow_apply_signal(json_t *state, const json_t *update, const json_t *payload, const json_t *input,
                          size_t max, char *err, size_t errcap)
{
    specials sp = {NULL, NULL, input, payload};
    return apply(state, update, &sp, max, err, errcap);
}

int workflow_render_json(const json_t *value, const json_t *state, const json_t *input, size_t max,
                         json_t **out, char *err, size_t errcap)
{
    budget bud = {max, max, 0};
    *out = NULL;
    if (!value) {
        jcheck_seterr(err, errcap, "no value");
        return -1;
    }
    specials sp = {NULL, NULL, input, NULL};
    *out = subst(value, 0, &sp, state, &bud, 0, err, errcap);
    return *out ? 0 : bud.over ? WORKFLOW_ETOOLARGE : -1;
}

/* ---- durations and times ---------------------------------------------------------------- */

int workflow_duration(const json_t *v, int64_t *ms, char *err, size_t errcap)
{
    static const char *const want = "must be a duration: milliseconds (an integer), or a string of numbers "
                                    "with units ms, s, m, h, d (\"300ms\", \"1h30m\")";
    *ms = 0;
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 0 || n > WORKFLOW_DURATION_MAX_MS) goto range;
        *ms = n;
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s || !*s || json_string_length(v) > 64) {
        jcheck_seterr(err, errcap, "%s", want);
        return -1;
    }
    int64_t total = 0;
    while (*s) {
        int64_t n = 0;
        int digits = 0;
        for (; *s >= '0' && *s <= '9'; s++, digits++) {
            if (n > WORKFLOW_DURATION_MAX_MS) goto range;
            n = n * 10 + (*s - '0');
        }
        int64_t unit;
        if (!strncmp(s, "ms", 2)) unit = 1, s += 2;
        else if (*s == 's') unit = 1000, s++;
        else if (*s == 'm') unit = 60000, s++;
        else if (*s == 'h') unit = 3600000, s++;
        else if (*s == 'd') unit = 86400000, s++;
        else unit = 0;
        if (!digits || !unit) {
            jcheck_seterr(err, errcap, "%s", want);
            return -1;
        }
        if (n > WORKFLOW_DURATION_MAX_MS / unit) goto range;
        total += n * unit;
        if (total > WORKFLOW_DURATION_MAX_MS) goto range;
    }
    *ms = total;
    return 0;
range:
    jcheck_seterr(err, errcap, "must be from 0 to %lld ms (10 years)", (long long)WORKFLOW_DURATION_MAX_MS);
    return -1;
}

int workflow_time(const char *s, int64_t *ms)
{
    char *end;
    if (!s || !*s) return -1;
    if (*s >= '0' && *s <= '9' && strspn(s, "0123456789") == strlen(s)) {
        errno = 0;
        long long n = strtoll(s, &end, 10);
        if (errno || *end) return -1;
        *ms = n;
        return 0;
    }
    return timefmt_parse(s, ms);
}

/* ---- validation -------------------------------------------------------------------- */

typedef struct vctx {
    jcheck_errlist *e;
    const json_t *phases;   /* the phases array, when it is one */
    json_t *ids;            /* human step ids seen: id -> where */
} vctx;

/* The string at obj.key, or NULL after naming the mistake (see jcheck_string). */
static const char *get_string(jcheck_errlist *e, const char *base, const json_t *obj,
                              const char *key, int required)
{
    return json_string_value(jcheck_string(e, base, obj, key, required));
}

/* Names share agent_valid_name's alphabet: they appear in URLs and event payloads. */
static void check_name(jcheck_errlist *e, const char *base, const json_t *obj, const char *key,
                       int required)
{
    char path[WF_JPATH];
    const char *s = get_string(e, base, obj, key, required);
    jcheck_key(path, sizeof path, base, key);
    if (s && !agent_valid_name(s)) jcheck_mistake(e, path, "must be 1 to 64 of A-Z a-z 0-9 _ . -");
}

/* Syntax only: no state exists when a workflow is stored, so unknown paths can
 * only be found when the step runs. */
static void check_template(jcheck_errlist *e, const char *path, const char *tpl)
{
    char msg[WORKFLOW_ERR_MAX];
    if (wfexpr_template(tpl, NULL, NULL, NULL, msg, sizeof msg)) jcheck_mistake(e, path, "%s", msg);
}

static void check_template_field(jcheck_errlist *e, const char *base, const json_t *obj,
                                 const char *key, int required)
{
    char path[WF_JPATH];
    const char *s = get_string(e, base, obj, key, required);
    jcheck_key(path, sizeof path, base, key);
    if (s) check_template(e, path, s);
}

/* An agent step's skill: {"name": a skill of the agent, "params": {name: template}}.
 * Whether the agent has that skill is known only when the step runs (agents change
 * independently of workflows); the shape is checked here. */
static void check_skill(jcheck_errlist *e, const char *base, const json_t *st)
{
    static const char *const keys[] = {"name", "params", NULL};
    char path[WF_JPATH], sub[WF_JPATH];
    const json_t *sk = json_object_get(st, "skill");
    if (!sk) return;
    jcheck_key(path, sizeof path, base, "skill");
    if (!json_is_object(sk)) {
        jcheck_mistake(e, path, "must be {\"name\": skill, \"params\": {name: template}}");
        return;
    }
    jcheck_unknown_keys(e, path, sk, keys);
    check_name(e, path, sk, "name", 1);
    const json_t *params = json_object_get(sk, "params");
    jcheck_key(sub, sizeof sub, path, "params");
    if (params && !json_is_object(params)) jcheck_mistake(e, sub, "must be an object of templates");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)params, k, v) {
        char p2[WF_JPATH];
        jcheck_key(p2, sizeof p2, sub, k);
        if (!json_is_string(v)) jcheck_mistake(e, p2, "must be a string (a template)");
        else check_template(e, p2, json_string_value(v));
    }
}

/* The strings of an update value or of tool arguments: specials where flags
 * allow them, templates otherwise. */
static void check_value(jcheck_errlist *e, const char *path, const json_t *v, unsigned flags,
                        int depth)
{
    char sub[WF_JPATH];
    if (depth > WF_VALUE_DEPTH) {
        jcheck_mistake(e, path, "nested deeper than %d", WF_VALUE_DEPTH);
        return;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (flags & SUB_ON) {
            if (strcmp(s, "$output") == 0) {
                if (!(flags & SUB_OUTPUT))
                    jcheck_mistake(e, path, "\"$output\" exists only in agent and tool steps");
                return;
            }
            if (strcmp(s, "$response") == 0) {
                if (!(flags & SUB_RESPONSE))
                    jcheck_mistake(e, path, "\"$response\" exists only in human steps");
                return;
            }
            if (strcmp(s, "$payload") == 0) {
                if (!(flags & SUB_PAYLOAD))
                    jcheck_mistake(e, path, "\"$payload\" exists only in a wait step's signals");
                return;
            }
            if (strcmp(s, "$input") == 0) return;
        }
        check_template(e, path, s);
    } else if (json_is_object(v)) {
        const char *key;
        const json_t *x;
        json_object_foreach((json_t *)v, key, x) {
            jcheck_key(sub, sizeof sub, path, key);
            check_value(e, sub, x, flags, depth + 1);
        }
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) {
            jcheck_index(sub, sizeof sub, path, "", i);
            check_value(e, sub, x, flags, depth + 1);
        }
    }
}

/* obj.key as an update: an object of state paths to values, whose specials
 * are limited to flags (what the step kind can supply). */
static void check_update(jcheck_errlist *e, const char *base, const json_t *obj, const char *key,
                         int required, unsigned flags)
{
    char path[WF_JPATH], sub[WF_JPATH];
    const json_t *upd = json_object_get(obj, key);
    jcheck_key(path, sizeof path, base, key);
    if (!upd) {
        if (required) jcheck_mistake(e, path, "missing");
        return;
    }
    if (!json_is_object(upd)) {
        jcheck_mistake(e, path, "must be an object of state paths");
        return;
    }
    const char *k;
    size_t klen;
    const json_t *v;
    json_object_keylen_foreach((json_t *)upd, k, klen, v) {
        jcheck_key(sub, sizeof sub, path, k);
        if (!wfexpr_path_ok(k, klen))
            jcheck_mistake(e, sub, "not a state path (dot-separated names of A-Z a-z 0-9 _ -)");
        check_value(e, sub, v, flags | SUB_ON, 0);
    }
}

/* Index of the first phase named name, or -1. */
static long find_phase(const json_t *phases, const char *name)
{
    size_t i;
    const json_t *ph;
    json_array_foreach(phases, i, ph) {
        const json_t *n = json_object_get(ph, "name");
        if (json_is_string(n) && strcmp(json_string_value(n), name) == 0) return (long)i;
    }
    return -1;
}

static const char *const agent_keys[] = {"kind", "name", "agent", "prompt", "outputSchema",
                                         "update", "skill", NULL};
static const char *const tool_keys[] = {"kind", "name", "server", "tool", "arguments",
                                        "update", NULL};
static const char *const update_keys[] = {"kind", "name", "set", NULL};
static const char *const human_keys[] = {"kind", "name", "id", "input", "prompt", "options",
                                         "timeoutMs", "onTimeout", "update", NULL};
static const char *const sleep_keys[] = {"kind", "name", "duration", "until", NULL};
static const char *const wait_keys[] = {"kind", "name", "signals", "timeout", "onTimeout", NULL};

/* The step kinds by their document names; -1 for anything else. */
static int kind_of(const char *s, step_kind *k)
{
    if (!s) return -1;
    if (strcmp(s, "agent") == 0) *k = STEP_AGENT;
    else if (strcmp(s, "tool") == 0) *k = STEP_TOOL;
    else if (strcmp(s, "update") == 0) *k = STEP_UPDATE;
    else if (strcmp(s, "human") == 0) *k = STEP_HUMAN;
    else if (strcmp(s, "sleep") == 0) *k = STEP_SLEEP;
    else if (strcmp(s, "wait") == 0) *k = STEP_WAIT;
    else return -1;
    return 0;
}

/* A human checkpoint. Its rules tie fields together (options with choice,
 * onTimeout with timeoutMs, the default answer with the input kind), so it is
 * checked as a whole rather than field by field. */
static void check_human(vctx *v, const char *base, const json_t *st)
{
    jcheck_errlist *e = v->e;
    char path[WF_JPATH], sub[WF_JPATH], q[JCHECK_QUOTE];
    jcheck_unknown_keys(e, base, st, human_keys);

    const char *id = get_string(e, base, st, "id", 1);
    jcheck_key(path, sizeof path, base, "id");
    if (id && !agent_valid_name(id)) {
        jcheck_mistake(e, path, "must be 1 to 64 of A-Z a-z 0-9 _ . -");
    } else if (id) {
        /* Answers name the checkpoint by id, so two alike could not be told apart. */
        const json_t *seen = json_object_get(v->ids, id);
        if (seen)
            jcheck_mistake(e, path, "duplicate id \"%s\" (also %s)",
                           jcheck_show(q, sizeof q, id, strlen(id)), json_string_value(seen));
        else
            json_object_set_new(v->ids, id, json_string(path));
    }

    const char *input = get_string(e, base, st, "input", 1);
    int choice = input && strcmp(input, "choice") == 0;
    jcheck_key(path, sizeof path, base, "input");
    if (input && !choice && strcmp(input, "approval") != 0 && strcmp(input, "text") != 0)
        jcheck_mistake(e, path, "must be \"approval\", \"choice\" or \"text\"");

    check_template_field(e, base, st, "prompt", 1);

    const json_t *opts = json_object_get(st, "options");
    int opts_ok = 0;
    jcheck_key(path, sizeof path, base, "options");
    if (opts && input && !choice) {
        jcheck_mistake(e, path, "only allowed with input \"choice\"");
    } else if (!opts && choice) {
        jcheck_mistake(e, path, "missing (required for input \"choice\")");
    } else if (opts) {
        size_t n = json_array_size(opts), i, j;
        const json_t *o;
        opts_ok = 1;
        if (!json_is_array(opts) || n < WF_OPTIONS_MIN || n > WF_OPTIONS_MAX) {
            jcheck_mistake(e, path, "must be an array of %d to %d strings", WF_OPTIONS_MIN,
                           WF_OPTIONS_MAX);
            opts_ok = 0;
        }
        json_array_foreach(opts, i, o) {
            jcheck_index(sub, sizeof sub, base, "options", i);
            if (!json_is_string(o) || json_string_length(o) == 0) {
                jcheck_mistake(e, sub, "must be a non-empty string");
                opts_ok = 0;
                continue;
            }
            for (j = 0; j < i; j++)
                if (json_equal(o, json_array_get(opts, j))) break;
            if (j < i) jcheck_mistake(e, sub, "duplicate option (also options[%zu])", j);
        }
    }

    const json_t *tmo = json_object_get(st, "timeoutMs");
    jcheck_key(path, sizeof path, base, "timeoutMs");
    if (tmo && (!json_is_integer(tmo) || json_integer_value(tmo) <= 0))
        jcheck_mistake(e, path, "must be an integer > 0");

    const json_t *ot = json_object_get(st, "onTimeout");
    jcheck_key(path, sizeof path, base, "onTimeout");
    if (ot) {
        static const char *const ot_keys[] = {"response", NULL};
        if (!json_is_object(ot)) {
            jcheck_mistake(e, path, "must be an object {\"response\": value}");
        } else {
            jcheck_unknown_keys(e, path, ot, ot_keys);
            const json_t *resp = json_object_get(ot, "response");
            jcheck_key(sub, sizeof sub, path, "response");
            /* The default answer must fit the input as a real answer must
             * (POST /v1/sessions/{id}/input applies the same rule). */
            if (!resp) {
                jcheck_mistake(e, sub, "missing");
            } else if (choice && opts_ok) {
                size_t i;
                const json_t *o;
                int any = 0;
                json_array_foreach(opts, i, o)
                    if (json_equal(o, resp)) any = 1;
                if (!any) jcheck_mistake(e, sub, "must be one of the options");
            } else if (input && strcmp(input, "approval") == 0 && !json_is_boolean(resp)) {
                jcheck_mistake(e, sub, "must be true or false for input \"approval\"");
            } else if (input && strcmp(input, "text") == 0 && !json_is_string(resp)) {
                jcheck_mistake(e, sub, "must be a string for input \"text\"");
            }
        }
        if (!tmo)
            jcheck_mistake(e, path, "needs timeoutMs (without it the checkpoint never expires)");
    }
    check_update(e, base, st, "update", 0, SUB_RESPONSE | SUB_INPUT);
}

/* obj.key as a duration (workflow_duration), when present or required. */
static void check_duration(jcheck_errlist *e, const char *base, const json_t *obj, const char *key, int required)
{
    char path[WF_JPATH], msg[WORKFLOW_ERR_MAX];
    const json_t *d = json_object_get(obj, key);
    int64_t ms;
    jcheck_key(path, sizeof path, base, key);
    if (!d) {
        if (required) jcheck_mistake(e, path, "missing");
        return;
    }
    if (workflow_duration(d, &ms, msg, sizeof msg)) jcheck_mistake(e, path, "%s", msg);
}

/* A wait step's branch ({"to": phase, "update": {...}}, both optional): where the
 * workflow goes once it is taken, and what it sets. flags: the specials its
 * update may use. */
static void check_branch(vctx *v, const char *path, const json_t *br, unsigned flags)
{
    static const char *const keys[] = {"to", "update", NULL};
    jcheck_errlist *e = v->e;
    char sub[WF_JPATH], q[JCHECK_QUOTE];
    if (!json_is_object(br)) {
        jcheck_mistake(e, path, "must be an object {\"to\": phase, \"update\": {...}} (both optional)");
        return;
    }
    jcheck_unknown_keys(e, path, br, keys);
    const char *to = get_string(e, path, br, "to", 0);
    jcheck_key(sub, sizeof sub, path, "to");
    if (to && v->phases && find_phase(v->phases, to) < 0)
        jcheck_mistake(e, sub, "no phase named \"%s\"", jcheck_show(q, sizeof q, to, strlen(to)));
    check_update(e, path, br, "update", 0, flags);
}

/* A sleep step: a duration, or a time rendered from the state (one of them). */
static void check_sleep(vctx *v, const char *base, const json_t *st)
{
    jcheck_errlist *e = v->e;
    jcheck_unknown_keys(e, base, st, sleep_keys);
    int has_d = json_object_get(st, "duration") != NULL, has_u = json_object_get(st, "until") != NULL;
    if (has_d == has_u) {
        jcheck_mistake(e, base, "a sleep step needs exactly one of duration and until");
        return;
    }
    check_duration(e, base, st, "duration", 0);
    check_template_field(e, base, st, "until", 0);
}

/* A wait step: the signals it waits for, each with its branch, and an optional
 * timeout with its own. */
static void check_wait(vctx *v, const char *base, const json_t *st)
{
    jcheck_errlist *e = v->e;
    char path[WF_JPATH], sub[WF_JPATH];
    jcheck_unknown_keys(e, base, st, wait_keys);
    const json_t *sigs = json_object_get(st, "signals");
    jcheck_key(path, sizeof path, base, "signals");
    if (!sigs) {
        jcheck_mistake(e, path, "missing");
    } else if (!json_is_object(sigs) || json_object_size(sigs) == 0 || json_object_size(sigs) > WF_SIGNALS_MAX) {
        jcheck_mistake(e, path, "must be an object of 1 to %d signals: {name: {\"to\", \"update\"}}", WF_SIGNALS_MAX);
    } else {
        const char *name;
        const json_t *br;
        json_object_foreach((json_t *)sigs, name, br) {
            jcheck_key(sub, sizeof sub, path, name);
            if (!agent_valid_name(name)) jcheck_mistake(e, sub, "a signal's name must be 1 to 64 of A-Z a-z 0-9 _ . -");
            check_branch(v, sub, br, SUB_PAYLOAD | SUB_INPUT);
        }
    }
    check_duration(e, base, st, "timeout", 0);
    const json_t *ot = json_object_get(st, "onTimeout");
    jcheck_key(path, sizeof path, base, "onTimeout");
    if (ot) {
        check_branch(v, path, ot, SUB_INPUT);
        if (!json_object_get(st, "timeout"))
            jcheck_mistake(e, path, "needs timeout (without it the wait never times out)");
    }
}

/* One step: its kind decides which keys it may have and what they mean. */
static void check_step(vctx *v, const char *base, const json_t *st)
{
    jcheck_errlist *e = v->e;
    char path[WF_JPATH];
    if (!json_is_object(st)) {
        jcheck_mistake(e, base, "a step must be an object");
        return;
    }
    get_string(e, base, st, "name", 0);
    const char *kind = get_string(e, base, st, "kind", 1);
    step_kind k;
    jcheck_key(path, sizeof path, base, "kind");
    /* Without a known kind the allowed keys are unknown too: say only that. */
    if (!kind) return;
    if (kind_of(kind, &k)) {
        jcheck_mistake(e, path, "must be \"agent\", \"tool\", \"update\", \"human\", \"sleep\" or \"wait\"");
        return;
    }
    switch (k) {
    case STEP_AGENT: {
        jcheck_unknown_keys(e, base, st, agent_keys);
        check_name(e, base, st, "agent", 1);
        check_template_field(e, base, st, "prompt", 1);
        check_skill(e, base, st);
        const json_t *os = json_object_get(st, "outputSchema");
        jcheck_key(path, sizeof path, base, "outputSchema");
        if (os) wfschema_check_doc(e, path, os, 0);
        check_update(e, base, st, "update", 0, SUB_OUTPUT | SUB_INPUT);
        break;
    }
    case STEP_TOOL: {
        jcheck_unknown_keys(e, base, st, tool_keys);
        check_name(e, base, st, "server", 1);
        const char *tool = get_string(e, base, st, "tool", 1);
        jcheck_key(path, sizeof path, base, "tool");
        if (tool && (tool[0] == '\0' || strlen(tool) > WF_TOOL_MAX))
            jcheck_mistake(e, path, "must be 1 to %d bytes", WF_TOOL_MAX);
        const json_t *args = json_object_get(st, "arguments");
        jcheck_key(path, sizeof path, base, "arguments");
        if (args && !json_is_object(args)) jcheck_mistake(e, path, "must be an object");
        else if (args) check_value(e, path, args, 0, 0);
        check_update(e, base, st, "update", 0, SUB_OUTPUT | SUB_INPUT);
        break;
    }
    case STEP_UPDATE:
        jcheck_unknown_keys(e, base, st, update_keys);
        check_update(e, base, st, "set", 1, SUB_INPUT);
        break;
    case STEP_HUMAN:
        check_human(v, base, st);
        break;
    case STEP_SLEEP:
        check_sleep(v, base, st);
        break;
    case STEP_WAIT:
        check_wait(v, base, st);
        break;
    }
}

/* A transition: its target must exist and its condition must parse, so that
 * a stored workflow cannot fail on a typo only when a session gets that far. */
static void check_transition(vctx *v, const char *base, const json_t *t)
{
    static const char *const keys[] = {"when", "to", NULL};
    jcheck_errlist *e = v->e;
    char path[WF_JPATH], msg[WORKFLOW_ERR_MAX], q[JCHECK_QUOTE];
    if (!json_is_object(t)) {
        jcheck_mistake(e, base, "a transition must be an object {\"when\", \"to\"}");
        return;
    }
    jcheck_unknown_keys(e, base, t, keys);
    const char *when = get_string(e, base, t, "when", 0);
    jcheck_key(path, sizeof path, base, "when");
    if (when && workflow_check_condition(when, msg, sizeof msg)) jcheck_mistake(e, path, "%s", msg);
    const char *to = get_string(e, base, t, "to", 1);
    jcheck_key(path, sizeof path, base, "to");
    if (to && v->phases && find_phase(v->phases, to) < 0)
        jcheck_mistake(e, path, "no phase named \"%s\"", jcheck_show(q, sizeof q, to, strlen(to)));
}

/* Phase pi: its own fields, then its steps and transitions, then the rules
 * that relate them (terminal phases end, the others must lead somewhere). */
static void check_phase(vctx *v, size_t pi, const json_t *ph)
{
    static const char *const keys[] = {"name", "terminal", "steps", "transitions", NULL};
    jcheck_errlist *e = v->e;
    char base[WF_JPATH], path[WF_JPATH], sub[WF_JPATH], q[JCHECK_QUOTE];
    jcheck_index(base, sizeof base, "", "phases", pi);
    if (!json_is_object(ph)) {
        jcheck_mistake(e, base, "a phase must be an object");
        return;
    }
    jcheck_unknown_keys(e, base, ph, keys);
    check_name(e, base, ph, "name", 1);
    const char *name = json_string_value(json_object_get(ph, "name"));
    long first = name ? find_phase(v->phases, name) : -1;
    jcheck_key(path, sizeof path, base, "name");
    if (name && first >= 0 && (size_t)first < pi)
        jcheck_mistake(e, path, "duplicate phase name \"%s\" (also phases[%ld])",
                       jcheck_show(q, sizeof q, name, strlen(name)), first);

    const json_t *term = json_object_get(ph, "terminal");
    jcheck_key(path, sizeof path, base, "terminal");
    if (term && !json_is_boolean(term)) jcheck_mistake(e, path, "must be true or false");
    int terminal = json_is_true(term);

    /* steps and transitions may be left out: an absent list is an empty one. */
    const json_t *steps = json_object_get(ph, "steps");
    jcheck_key(path, sizeof path, base, "steps");
    if (steps && (!json_is_array(steps) || json_array_size(steps) > WF_STEPS_MAX)) {
        jcheck_mistake(e, path, "must be an array of at most %d steps", WF_STEPS_MAX);
    }
    size_t i;
    const json_t *x;
    json_array_foreach(steps, i, x) {
        jcheck_index(sub, sizeof sub, base, "steps", i);
        check_step(v, sub, x);
    }

    const json_t *trans = json_object_get(ph, "transitions");
    jcheck_key(path, sizeof path, base, "transitions");
    if (trans && (!json_is_array(trans) || json_array_size(trans) > WF_TRANSITIONS_MAX))
        jcheck_mistake(e, path, "must be an array of at most %d transitions", WF_TRANSITIONS_MAX);
    json_array_foreach(trans, i, x) {
        jcheck_index(sub, sizeof sub, base, "transitions", i);
        check_transition(v, sub, x);
    }
    size_t nt = json_array_size(trans);
    if (terminal && nt > 0)
        jcheck_mistake(e, path, "a terminal phase ends the workflow: it has no transitions");
    if (!terminal && nt == 0 && (!trans || json_is_array(trans)))
        jcheck_mistake(e, path, "a phase that is not terminal needs at least one transition");
}

/* A non-terminal phase that runs no step (and so cannot change the state). */
static int phase_stepless(const json_t *ph)
{
    return json_is_object(ph) && json_array_size(json_object_get(ph, "steps")) == 0 &&
           !json_is_true(json_object_get(ph, "terminal"));
}

/* A phase without steps cannot change the state (nor the input), so its
 * conditions answer the same every time: a session that goes round a cycle of
 * such phases once goes round it for ever, writing events as fast as the runner
 * can. Any cycle through transitions (conditional or not) among phases without
 * steps is therefore a mistake. Reachability over those phases (at most
 * WF_PHASES_MAX, so a cubic closure is cheap) finds every cycle; each is named
 * once, at its first phase, with the phases it goes through. */
static void check_loops(vctx *v)
{
    enum { N = WF_PHASES_MAX };
    size_t n = json_array_size(v->phases), i, j, k, t;
    if (n > N) return;
    unsigned char reach[N][N];
    memset(reach, 0, sizeof reach);
    for (i = 0; i < n; i++) {
        const json_t *ph = json_array_get(v->phases, i), *tr;
        if (!phase_stepless(ph)) continue;
        json_array_foreach(json_object_get(ph, "transitions"), t, tr) {
            const char *to = json_string_value(json_object_get(tr, "to"));
            long next = to ? find_phase(v->phases, to) : -1;
            if (next >= 0 && phase_stepless(json_array_get(v->phases, (size_t)next)))
                reach[i][next] = 1;
        }
    }
    for (k = 0; k < n; k++)
        for (i = 0; i < n; i++)
            if (reach[i][k])
                for (j = 0; j < n; j++) reach[i][j] |= reach[k][j];
    char path[WF_JPATH], names[256], q[JCHECK_QUOTE];
    for (i = 0; i < n; i++) {
        if (!reach[i][i]) continue;
        int first = 1;
        for (j = 0; j < i && first; j++)
            if (reach[i][j] && reach[j][i]) first = 0;
        if (!first) continue;
        size_t len = 0;
        names[0] = '\0';
        for (j = i; j < n && len < sizeof names; j++) {
            if (!(reach[i][j] && reach[j][i])) continue;
            const char *nm = json_string_value(json_object_get(json_array_get(v->phases, j), "name"));
            int w = snprintf(names + len, sizeof names - len, "%s\"%s\"", len ? ", " : "",
                             jcheck_show(q, sizeof q, nm ? nm : "?", nm ? strlen(nm) : 1));
            if (w < 0) break;
            len += (size_t)w;
        }
        jcheck_index(path, sizeof path, "", "phases", i);
        jcheck_mistake(v->e, path, "loops for ever through phases without steps (%s): a phase with no "
                       "step cannot change the state, so its transitions answer the same every time",
                       names);
    }
}

int workflow_validate(const json_t *doc, char *err, size_t errcap)
{
    static const char *const keys[] = {"name", "description", "initialState", "initialPhase",
                                       "phases", "maxSteps", NULL};
    jcheck_errlist e;
    vctx v = {&e, NULL, NULL};
    char q[JCHECK_QUOTE];
    jcheck_init(&e, err, errcap, WF_JPATH);
    if (!json_is_object(doc)) {
        jcheck_mistake(&e, "$", "a workflow must be a JSON object");
        return -1;
    }
    /* Human ids are unique across phases, so they are collected document-wide. */
    v.ids = json_object();
    if (!v.ids) {
        jcheck_mistake(&e, "$", "out of memory");
        return -1;
    }
    jcheck_unknown_keys(&e, "", doc, keys);
    check_name(&e, "", doc, "name", 1);
    get_string(&e, "", doc, "description", 0);
    const json_t *is = json_object_get(doc, "initialState");
    if (is && !json_is_object(is)) jcheck_mistake(&e, "initialState", "must be an object");
    const json_t *ms = json_object_get(doc, "maxSteps");
    if (ms && (!json_is_integer(ms) || json_integer_value(ms) < 1 ||
               json_integer_value(ms) > WORKFLOW_MAX_STEPS_LIMIT))
        jcheck_mistake(&e, "maxSteps", "must be an integer from 1 to %d", WORKFLOW_MAX_STEPS_LIMIT);

    const json_t *phases = json_object_get(doc, "phases");
    if (!phases) {
        jcheck_mistake(&e, "phases", "missing");
    } else if (!json_is_array(phases) || json_array_size(phases) == 0 ||
               json_array_size(phases) > WF_PHASES_MAX) {
        jcheck_mistake(&e, "phases", "must be an array of 1 to %d phases", WF_PHASES_MAX);
    }
    if (json_is_array(phases)) {
        v.phases = phases;
        size_t i;
        const json_t *ph;
        json_array_foreach(phases, i, ph) check_phase(&v, i, ph);
        check_loops(&v);
    }

    /* Checked last, when the phases (and so the names it may refer to) are known. */
    const char *ip = get_string(&e, "", doc, "initialPhase", 0);
    if (ip && v.phases && find_phase(v.phases, ip) < 0)
        jcheck_mistake(&e, "initialPhase", "no phase named \"%s\"",
                       jcheck_show(q, sizeof q, ip, strlen(ip)));
    json_decref(v.ids);
    return e.n ? -1 : 0;
}

int workflow_max_steps(const json_t *doc)
{
    const json_t *ms = json_object_get(doc, "maxSteps");
    json_int_t n = json_is_integer(ms) ? json_integer_value(ms) : 0;
    return n >= 1 && n <= WORKFLOW_MAX_STEPS_LIMIT ? (int)n : WORKFLOW_MAX_STEPS_DEFAULT;
}

/* ---- the decision core ----------------------------------------------------------- */

static void next_fail(workflow_next_t *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Decide NEXT_FAIL with a message; the runner puts it in workflow:failed. */
static void next_fail(workflow_next_t *out, const char *fmt, ...)
{
    va_list ap;
    out->kind = NEXT_FAIL;
    va_start(ap, fmt);
    vsnprintf(out->error, sizeof out->error, fmt, ap);
    va_end(ap);
}

void workflow_next(const json_t *doc, const workflow_pos *pos, const json_t *state,
                   const json_t *input, workflow_next_t *out)
{
    char q[JCHECK_QUOTE], msg[WORKFLOW_ERR_MAX];
    memset(out, 0, sizeof *out);
    out->kind = NEXT_WAIT;
    /* A finished session has nothing left to do, whatever else pos says. */
    if (!pos || pos->finished) return;

    const json_t *phases = json_object_get(doc, "phases");
    if (!json_is_array(phases) || json_array_size(phases) == 0) {
        next_fail(out, "the workflow has no phases");
        return;
    }
    /* Before the first phase:entered the answer is the initial phase, whether
     * the runner still has to start the workflow or only to enter it. */
    if (!pos->started || !pos->phase) {
        const json_t *ip = json_object_get(doc, "initialPhase");
        const char *first = json_string_value(ip ? ip : json_object_get(json_array_get(phases, 0),
                                                                        "name"));
        if (!first || find_phase(phases, first) < 0) {
            next_fail(out, "the initial phase is not in the workflow");
            return;
        }
        out->kind = pos->started ? NEXT_ENTER_PHASE : NEXT_START;
        out->phase = first;
        return;
    }

    /* Checked before step_open: a session whose phase the document does not
     * know (a stored event from a different version) cannot go on at all. */
    long pi = find_phase(phases, pos->phase);
    if (pi < 0) {
        next_fail(out, "phase \"%s\" is not in the workflow",
                  jcheck_show(q, sizeof q, pos->phase, strlen(pos->phase)));
        return;
    }
    const json_t *ph = json_array_get(phases, (size_t)pi);
    out->phase = json_string_value(json_object_get(ph, "name"));
    if (pos->step_open) return;     /* NEXT_WAIT: the step's result comes first */
    /* A wait step's branch leads out of the phase at once, its later steps unrun. */
    if (pos->branch) {
        if (find_phase(phases, pos->branch) < 0) {
            next_fail(out, "a wait step's branch leads to \"%s\", not a phase of the workflow",
                      jcheck_show(q, sizeof q, pos->branch, strlen(pos->branch)));
            return;
        }
        out->kind = NEXT_TRANSITION;
        out->phase = json_string_value(json_object_get(json_array_get(phases, (size_t)find_phase(phases, pos->branch)),
                                                       "name"));
        return;
    }

    const json_t *steps = json_object_get(ph, "steps");
    size_t nsteps = json_array_size(steps);
    if (pos->step < 0) {
        next_fail(out, "invalid position: step %d", pos->step);
        return;
    }
    /* The reducer counts completed steps, so that count is the next index. */
    if ((size_t)pos->step < nsteps) {
        const json_t *st = json_array_get(steps, (size_t)pos->step);
        if (kind_of(json_string_value(json_object_get(st, "kind")), &out->step_kind)) {
            next_fail(out, "phases[%ld].steps[%d]: unknown step kind", pi, pos->step);
            return;
        }
        out->kind = NEXT_STEP;
        out->step = pos->step;
        out->def = st;
        return;
    }
    /* A terminal phase completes even if a transition slipped past validation. */
    if (json_is_true(json_object_get(ph, "terminal"))) {
        out->kind = NEXT_COMPLETE;
        return;
    }
    /* First matching transition wins, as written; a condition that does not
     * parse fails the workflow rather than being read as false. */
    const json_t *trans = json_object_get(ph, "transitions");
    size_t i;
    const json_t *t;
    json_array_foreach(trans, i, t) {
        const json_t *when = json_object_get(t, "when");
        if (when) {
            int r = workflow_eval(json_string_value(when), state, input, msg, sizeof msg);
            if (r < 0) {
                next_fail(out, "phases[%ld].transitions[%zu].when: %s", pi, i, msg);
                return;
            }
            if (r == 0) continue;
        }
        const char *to = json_string_value(json_object_get(t, "to"));
        if (!to || find_phase(phases, to) < 0) {
            next_fail(out, "phases[%ld].transitions[%zu].to: not a phase of the workflow", pi, i);
            return;
        }
        out->kind = NEXT_TRANSITION;
        out->phase = to;    /* borrowed from the document like every name here */
        return;
    }
    next_fail(out, "no transition from phase %s matched",
              jcheck_show(q, sizeof q, out->phase, strlen(out->phase)));
}

/* agent: validation of agent documents and rendering of their skills.
 *
 * Like lib/workflow, the validator names every mistake it finds, one per line with
 * its JSON path, so that a client fixes a document in one round trip. Unknown keys
 * are mistakes wherever the shape is ours (top level, parameters, limits, tools,
 * skills): a misspelt "maxTurn" silently ignored would be worse than a 400.
 * Free-form maps (a tool's inputSchema) are left to their owners. */
#include "agent.h"

#include <string.h>

#include "jcheck.h"

/* Limits of the document format (see agent.h). */
#define AGENT_NAME_MAX 64
#define AGENT_MODEL_MAX 128
#define AGENT_SYSTEM_MAX 100000
#define AGENT_STOP_MAX 8
#define AGENT_TOOLS_MAX 64
#define AGENT_SERVERS_MAX 16
#define AGENT_SKILLS_MAX 64
#define AGENT_PARAMS_MAX 64
#define AGENT_MAX_TOKENS 1000000
#define AGENT_ENDPOINT_MAX 2048
#define AGENT_FALLBACKS_MAX 4   /* fallbacks: a request tries at most 5 providers */
#define AGENT_JPATH 256      /* bytes of a JSON path in a message */

/* Checked byte by byte with an early stop, so a long hostile string costs at
 * most 65 steps. */
int agent_valid_name(const char *s)
{
    if (!s) return 0;
    size_t n = 0;
    for (; s[n]; n++) {
        unsigned char c = (unsigned char)s[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-';
        if (!ok || n >= AGENT_NAME_MAX) return 0;
    }
    /* "." and ".." could not be addressed as /v1/agents/{name}. */
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return 0;
    return n > 0;
}

/* Provider tool names: both Anthropic and OpenAI accept [A-Za-z0-9_-]{1,64}
 * and no dots, so a dotted name is caught here rather than by the provider. */
int agent_valid_tool_name(const char *s)
{
    return agent_valid_name(s) && !strchr(s, '.');
}

/* ---- mistakes ----------------------------------------------------------------------- */

/* A required name; returns it only when valid, so callers check uniqueness
 * of names that are otherwise right. */
static const char *check_name(jcheck_errlist *e, const char *base, const json_t *obj,
                              const char *key)
{
    char path[AGENT_JPATH];
    const json_t *v = jcheck_string(e, base, obj, key, 1);
    jcheck_key(path, sizeof path, base, key);
    if (v && !agent_valid_name(json_string_value(v))) {
        jcheck_mistake(e, path, "must be 1 to 64 of A-Z a-z 0-9 _ . -");
        return NULL;
    }
    return json_string_value(v);
}

/* An object's array field: absent is fine (NULL), anything but an array of at
 * most max elements is a mistake. */
static const json_t *get_array(jcheck_errlist *e, const char *base, const json_t *obj,
                               const char *key, size_t max)
{
    char path[AGENT_JPATH];
    const json_t *v = json_object_get(obj, key);
    jcheck_key(path, sizeof path, base, key);
    if (!v) return NULL;
    if (!json_is_array(v) || json_array_size(v) > max) {
        jcheck_mistake(e, path, "must be an array of at most %zu", max);
        return NULL;
    }
    return v;
}

/* Report a name already used by an earlier element of arr (by its "name"). */
static void check_unique(jcheck_errlist *e, const char *path, const json_t *arr, size_t i,
                         const char *name)
{
    char q[JCHECK_QUOTE];
    for (size_t j = 0; j < i; j++) {
        const json_t *n = json_object_get(json_array_get(arr, j), "name");
        if (json_is_string(n) && strcmp(json_string_value(n), name) == 0) {
            jcheck_mistake(e, path, "duplicate name \"%s\" (also [%zu])",
                           jcheck_show(q, sizeof q, name, strlen(name)), j);
            return;
        }
    }
}

/* ---- placeholders --------------------------------------------------------------------- */

/* Walk the {{param}} placeholders of text. For each, call fn with the trimmed
 * name (not NUL-terminated); literal runs go to lit when it is set. Returns 0,
 * -1 for an unterminated "{{" (its column in *col), or what fn returned. */
typedef int (*ph_fn)(void *ud, const char *name, size_t n);

static int placeholders(const char *text, ph_fn fn, void *ud,
                        int (*lit)(void *ud, const char *p, size_t n), size_t *col)
{
    const char *p = text;
    for (;;) {
        const char *open = strstr(p, "{{");
        size_t n = open ? (size_t)(open - p) : strlen(p);
        if (lit && n && lit(ud, p, n)) return -2;
        if (!open) return 0;
        const char *close = strstr(open + 2, "}}");
        if (!close) {
            *col = (size_t)(open - text) + 1;
            return -1;
        }
        const char *a = open + 2, *b = close;
        while (a < b && (*a == ' ' || *a == '\t')) a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
        int rc = fn(ud, a, (size_t)(b - a));
        if (rc) return rc;
        p = close + 2;
    }
}

/* Is name[0..n) one of the strings in the array decl? */
static int declared(const json_t *decl, const char *name, size_t n)
{
    size_t i;
    const json_t *d;
    json_array_foreach(decl, i, d)
        if (json_is_string(d) && json_string_length(d) == n &&
            memcmp(json_string_value(d), name, n) == 0)
            return 1;
    return 0;
}

typedef struct skill_check {
    jcheck_errlist *e;
    const char *path;
    const json_t *params;
} skill_check;

/* Validation: each placeholder of the instructions names a declared param. */
static int check_placeholder(void *ud, const char *name, size_t n)
{
    skill_check *sc = ud;
    char q[JCHECK_QUOTE];
    if (!declared(sc->params, name, n))
        jcheck_mistake(sc->e, sc->path, "uses {{%s}}, which params does not declare",
                       jcheck_show(q, sizeof q, name, n));
    return 0;
}

/* ---- validation ----------------------------------------------------------------------- */

/* Sampling parameters, with the ranges both providers accept; the runner maps
 * them onto each provider's request. */
static void check_parameters(jcheck_errlist *e, const json_t *doc)
{
    static const char *const keys[] = {"temperature", "top_p", "max_tokens", "stop", NULL};
    const json_t *p = json_object_get(doc, "parameters");
    char path[AGENT_JPATH];
    if (!p) return;
    if (!json_is_object(p)) {
        jcheck_mistake(e, "parameters", "must be an object");
        return;
    }
    jcheck_unknown_keys(e, "parameters", p, keys);
    const json_t *t = json_object_get(p, "temperature");
    if (t && (!json_is_number(t) || json_number_value(t) < 0 || json_number_value(t) > 2))
        jcheck_mistake(e, "parameters.temperature", "must be a number from 0 to 2");
    t = json_object_get(p, "top_p");
    if (t && (!json_is_number(t) || json_number_value(t) < 0 || json_number_value(t) > 1))
        jcheck_mistake(e, "parameters.top_p", "must be a number from 0 to 1");
    t = json_object_get(p, "max_tokens");
    if (t && (!json_is_integer(t) || json_integer_value(t) < 1 ||
              json_integer_value(t) > AGENT_MAX_TOKENS))
        jcheck_mistake(e, "parameters.max_tokens", "must be an integer from 1 to %d",
                       AGENT_MAX_TOKENS);
    const json_t *stop = get_array(e, "parameters", p, "stop", AGENT_STOP_MAX);
    size_t i;
    const json_t *s;
    json_array_foreach(stop, i, s) {
        jcheck_index(path, sizeof path, "parameters", "stop", i);
        if (!json_is_string(s) || json_string_length(s) == 0)
            jcheck_mistake(e, path, "must be a non-empty string");
    }
}

/* Tools declared to the model. Names must be unique: the model calls a tool by
 * name, and two alike could not be told apart. */
static void check_tools(jcheck_errlist *e, const json_t *doc)
{
    static const char *const keys[] = {"name", "description", "inputSchema", NULL};
    const json_t *tools = get_array(e, "", doc, "tools", AGENT_TOOLS_MAX);
    char base[AGENT_JPATH], path[AGENT_JPATH];
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        jcheck_index(base, sizeof base, "", "tools", i);
        if (!json_is_object(t)) {
            jcheck_mistake(e, base, "a tool must be an object");
            continue;
        }
        jcheck_unknown_keys(e, base, t, keys);
        const json_t *name = jcheck_string(e, base, t, "name", 1);
        jcheck_key(path, sizeof path, base, "name");
        if (name && !agent_valid_tool_name(json_string_value(name)))
            jcheck_mistake(e, path, "must be 1 to 64 of A-Z a-z 0-9 _ -");
        else if (name)
            check_unique(e, path, tools, i, json_string_value(name));
        jcheck_string(e, base, t, "description", 0);
        const json_t *is = json_object_get(t, "inputSchema");
        jcheck_key(path, sizeof path, base, "inputSchema");
        if (!is) jcheck_mistake(e, path, "missing");
        else if (!json_is_object(is)) jcheck_mistake(e, path, "must be an object (a JSON Schema)");
    }
}

/* MCP servers, by name only. What runs as a server (command, arguments,
 * environment) is the operator's to say, in the runner's MCP configuration
 * (lib/mcp.h); an agent document comes from an API client and can name nothing
 * to execute. An object in the old form {name, command, env} is refused with a
 * message that says where commands belong now. */
static void check_servers(jcheck_errlist *e, const json_t *doc)
{
    const json_t *servers = get_array(e, "", doc, "mcpServers", AGENT_SERVERS_MAX);
    char path[AGENT_JPATH];
    size_t i;
    const json_t *s;
    json_array_foreach(servers, i, s) {
        jcheck_index(path, sizeof path, "", "mcpServers", i);
        if (json_is_object(s) && (json_object_get(s, "command") || json_object_get(s, "env"))) {
            jcheck_mistake(e, path, "commands and environment cannot be given in an agent: name a server "
                                    "of the operator's MCP configuration (DSTREAM_MCP_CONFIG)");
            continue;
        }
        if (!json_is_string(s) || !agent_valid_name(json_string_value(s))) {
            jcheck_mistake(e, path, "must be the name of a configured MCP server (1 to 64 of A-Z a-z 0-9 _ . -)");
            continue;
        }
        for (size_t j = 0; j < i; j++)
            if (json_equal(s, json_array_get(servers, j))) {
                jcheck_mistake(e, path, "duplicate server (also [%zu])", j);
                break;
            }
    }
}

/* The tool a name of `approval` names in doc: a declared tool, a server of its
 * mcpServers (all that server's tools) or one tool of such a server
 * (<server>__<tool>, as the model sees it). 1 if it names one. */
static int names_tool(const json_t *doc, const char *name)
{
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(doc, "tools"), i, t) {
        const char *d = json_string_value(json_object_get(t, "name"));
        if (d && !strcmp(name, d)) return 1;
    }
    json_array_foreach(json_object_get(doc, "mcpServers"), i, t) {
        const char *s = json_string_value(t);
        size_t n = s ? strlen(s) : 0;
        if (s && (!strcmp(name, s) || (!strncmp(name, s, n) && !strncmp(name + n, "__", 2) &&
                                       agent_valid_tool_name(name + n + 2))))
            return 1;
    }
    return 0;
}

/* approval: {name: "required"}, each name a tool or server of the agent's
 * (names_tool). A call of such a tool in a chat waits for a person's answer. */
static void check_approval(jcheck_errlist *e, const json_t *doc)
{
    const json_t *a = json_object_get(doc, "approval"), *v;
    const char *k;
    char path[AGENT_JPATH];
    if (!a) return;
    if (!json_is_object(a)) {
        jcheck_mistake(e, "approval", "must be an object: {\"<tool or server>\": \"required\"}");
        return;
    }
    if (json_object_size(a) > AGENT_TOOLS_MAX + AGENT_SERVERS_MAX)
        jcheck_mistake(e, "approval", "at most %d names", AGENT_TOOLS_MAX + AGENT_SERVERS_MAX);
    json_object_foreach((json_t *)a, k, v) {
        jcheck_key(path, sizeof path, "approval", k);
        if (!json_is_string(v) || strcmp(json_string_value(v), "required"))
            jcheck_mistake(e, path, "must be \"required\"");
        if (!names_tool(doc, k))
            jcheck_mistake(e, path, "names no tool of the agent: a declared tool, a server of mcpServers or "
                                    "<server>__<tool>");
    }
}

/* Skills: instructions whose placeholders must all be declared params, so that
 * rendering can only fail on what the caller passes, never on the document. */
static void check_skills(jcheck_errlist *e, const json_t *doc)
{
    static const char *const keys[] = {"name", "instructions", "params", NULL};
    const json_t *skills = get_array(e, "", doc, "skills", AGENT_SKILLS_MAX);
    char base[AGENT_JPATH], path[AGENT_JPATH], sub[AGENT_JPATH];
    size_t i, j;
    const json_t *s, *x;
    json_array_foreach(skills, i, s) {
        jcheck_index(base, sizeof base, "", "skills", i);
        if (!json_is_object(s)) {
            jcheck_mistake(e, base, "a skill must be an object");
            continue;
        }
        jcheck_unknown_keys(e, base, s, keys);
        const char *name = check_name(e, base, s, "name");
        jcheck_key(path, sizeof path, base, "name");
        if (name) check_unique(e, path, skills, i, name);

        const json_t *params = get_array(e, base, s, "params", AGENT_PARAMS_MAX);
        json_array_foreach(params, j, x) {
            jcheck_index(sub, sizeof sub, base, "params", j);
            if (!json_is_string(x) || !agent_valid_name(json_string_value(x))) {
                jcheck_mistake(e, sub, "must be a name of 1 to 64 of A-Z a-z 0-9 _ . -");
                continue;
            }
            for (size_t k = 0; k < j; k++)
                if (json_equal(x, json_array_get(params, k)))
                    jcheck_mistake(e, sub, "duplicate parameter (also params[%zu])", k);
        }

        const json_t *ins = jcheck_string(e, base, s, "instructions", 1);
        jcheck_key(path, sizeof path, base, "instructions");
        if (!ins) continue;
        skill_check sc = {e, path, params};
        size_t col = 0;
        if (placeholders(json_string_value(ins), check_placeholder, &sc, NULL, &col) == -1)
            jcheck_mistake(e, path, "unterminated \"{{\" at column %zu", col);
    }
}

/* Spending limits; zero would stop a session before it starts, so all are > 0. */
static void check_limits(jcheck_errlist *e, const json_t *doc)
{
    static const char *const keys[] = {"maxTokens", "maxTurns", "costBudgetUsd", "contextTokens", "maxRequests",
                                       "onExceed", "askTimeoutMs", NULL};
    const json_t *l = json_object_get(doc, "limits");
    if (!l) return;
    if (!json_is_object(l)) {
        jcheck_mistake(e, "limits", "must be an object");
        return;
    }
    jcheck_unknown_keys(e, "limits", l, keys);
    const json_t *v = json_object_get(l, "maxTurns");
    if (v && (!json_is_integer(v) || json_integer_value(v) <= 0))
        jcheck_mistake(e, "limits.maxTurns", "must be an integer > 0");
    v = json_object_get(l, "contextTokens");
    if (v && (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > AGENT_CONTEXT_MAX))
        jcheck_mistake(e, "limits.contextTokens", "must be an integer from 1 to %d", AGENT_CONTEXT_MAX);
    agent_check_budget(e, "limits", l);
}

void agent_check_budget(jcheck_errlist *e, const char *base, const json_t *l)
{
    char path[AGENT_JPATH];
    static const char *const ints[] = {"maxTokens", "maxRequests", "askTimeoutMs"};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        const json_t *v = json_object_get(l, ints[i]);
        jcheck_key(path, sizeof path, base, ints[i]);
        if (v && (!json_is_integer(v) || json_integer_value(v) <= 0)) jcheck_mistake(e, path, "must be an integer > 0");
    }
    const json_t *v = json_object_get(l, "costBudgetUsd");
    jcheck_key(path, sizeof path, base, "costBudgetUsd");
    if (v && (!json_is_number(v) || json_number_value(v) <= 0)) jcheck_mistake(e, path, "must be a number > 0");
    v = json_object_get(l, "onExceed");
    jcheck_key(path, sizeof path, base, "onExceed");
    if (v && (!json_is_string(v) || (strcmp(json_string_value(v), "fail") && strcmp(json_string_value(v), "ask"))))
        jcheck_mistake(e, path, "must be \"fail\" or \"ask\"");
}

int agent_validate_limits(const json_t *limits, char *err, size_t errcap)
{
    static const char *const keys[] = {"maxTokens", "costBudgetUsd", "maxRequests", "onExceed", "askTimeoutMs", NULL};
    jcheck_errlist e;
    jcheck_init(&e, err, errcap, AGENT_JPATH);
    if (!json_is_object(limits)) {
        jcheck_mistake(&e, "limits", "must be an object");
        return -1;
    }
    jcheck_unknown_keys(&e, "limits", limits, keys);
    agent_check_budget(&e, "limits", limits);
    return e.n ? -1 : 0;
}

/* fallbacks: [{provider, model}], each pair another than the agent's own and than
 * the others, tried in order when the one before fails (docs/agents.md, "Provider
 * failover"). Whether each provider exists is the operator's to say (lib/provcfg). */
static void check_fallbacks(jcheck_errlist *e, const json_t *doc)
{
    static const char *const keys[] = {"provider", "model", NULL};
    const json_t *list = get_array(e, "", doc, "fallbacks", AGENT_FALLBACKS_MAX), *f;
    char path[AGENT_JPATH], sub[AGENT_JPATH];
    size_t i;
    json_array_foreach(list, i, f) {
        jcheck_index(path, sizeof path, "", "fallbacks", i);
        if (!json_is_object(f)) {
            jcheck_mistake(e, path, "must be an object: {\"provider\": \"<configured provider>\", \"model\": \"...\"}");
            continue;
        }
        jcheck_unknown_keys(e, path, f, keys);
        const json_t *p = jcheck_string(e, path, f, "provider", 1), *m = jcheck_string(e, path, f, "model", 1);
        jcheck_key(sub, sizeof sub, path, "provider");
        if (p && !agent_valid_name(json_string_value(p)))
            jcheck_mistake(e, sub, "must be a provider name (1 to 64 of A-Z a-z 0-9 _ . -)");
        jcheck_key(sub, sizeof sub, path, "model");
        if (m && (json_string_length(m) == 0 || json_string_length(m) > AGENT_MODEL_MAX))
            jcheck_mistake(e, sub, "must be 1 to %d bytes", AGENT_MODEL_MAX);
        if (!p || !m) continue;
        if (json_equal(p, json_object_get(doc, "provider")) && json_equal(m, json_object_get(doc, "model"))) {
            jcheck_mistake(e, path, "is the agent's own provider and model");
            continue;
        }
        for (size_t j = 0; j < i; j++) {
            const json_t *o = json_array_get(list, j);
            if (json_equal(p, json_object_get(o, "provider")) && json_equal(m, json_object_get(o, "model"))) {
                jcheck_mistake(e, path, "duplicate fallback (also [%zu])", j);
                break;
            }
        }
    }
}

/* http(s)://something, printable, no spaces: enough to catch a pasted model name
 * or a missing scheme; the runner's HTTP client is the final judge. */
static void check_endpoint(jcheck_errlist *e, const json_t *doc)
{
    const json_t *v = jcheck_string(e, "", doc, "endpoint", 0);
    if (!v) return;
    const char *s = json_string_value(v);
    size_t n = json_string_length(v), skip = 0;
    if (n >= 8 && memcmp(s, "https://", 8) == 0) skip = 8;
    else if (n >= 7 && memcmp(s, "http://", 7) == 0) skip = 7;
    int ok = skip && n > skip && n <= AGENT_ENDPOINT_MAX;
    for (size_t i = 0; ok && i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f) ok = 0;
    if (!ok) jcheck_mistake(e, "endpoint", "must be an http:// or https:// URL without spaces");
}

int agent_validate(const json_t *doc, char *err, size_t errcap)
{
    static const char *const keys[] = {"name", "provider", "model", "system", "parameters",
                                       "tools", "mcpServers", "skills", "limits", "endpoint",
                                       "approval", "fallbacks", NULL};
    jcheck_errlist e;
    jcheck_init(&e, err, errcap, AGENT_JPATH);
    if (!json_is_object(doc)) {
        jcheck_mistake(&e, "$", "an agent must be a JSON object");
        return -1;
    }
    jcheck_unknown_keys(&e, "", doc, keys);
    check_name(&e, "", doc, "name");

    /* Which names exist is the operator's to say (lib/provcfg checks them). */
    const json_t *v = jcheck_string(&e, "", doc, "provider", 1);
    if (v && !agent_valid_name(json_string_value(v)))
        jcheck_mistake(&e, "provider", "must be a provider name (1 to 64 of A-Z a-z 0-9 _ . -)");
    v = jcheck_string(&e, "", doc, "model", 1);
    if (v && (json_string_length(v) == 0 || json_string_length(v) > AGENT_MODEL_MAX))
        jcheck_mistake(&e, "model", "must be 1 to %d bytes", AGENT_MODEL_MAX);
    v = jcheck_string(&e, "", doc, "system", 0);
    if (v && json_string_length(v) > AGENT_SYSTEM_MAX)
        jcheck_mistake(&e, "system", "longer than %d bytes", AGENT_SYSTEM_MAX);

    check_parameters(&e, doc);
    check_tools(&e, doc);
    check_servers(&e, doc);
    check_approval(&e, doc);
    check_skills(&e, doc);
    check_limits(&e, doc);
    check_endpoint(&e, doc);
    check_fallbacks(&e, doc);
    return e.n ? -1 : 0;
}

/* ---- skills ------------------------------------------------------------------------- */

typedef struct skill_render {
    const json_t *params;   /* given values, all declared and strings */
    const json_t *decl;     /* the skill's params */
    buf_t *out;
    int rc;                 /* buf_append's error, if that is what stopped us */
    char *err;
    size_t errcap;
} skill_render;

/* Append literal text; buf's code is kept to tell "too big" from "no memory". */
static int render_lit(void *ud, const char *p, size_t n)
{
    skill_render *r = ud;
    r->rc = buf_append(r->out, p, n);
    return r->rc ? -2 : 0;
}

/* Append a parameter's value. An undeclared placeholder only reaches here in a
 * document that skipped validation. */
static int render_placeholder(void *ud, const char *name, size_t n)
{
    skill_render *r = ud;
    char q[JCHECK_QUOTE];
    const json_t *v = NULL;
    if (declared(r->decl, name, n)) v = json_object_getn(r->params, name, n);
    if (!v) {
        jcheck_seterr(r->err, r->errcap, "undeclared parameter {{%s}} in the instructions",
                      jcheck_show(q, sizeof q, name, n));
        return -3;
    }
    /* A value is inserted as it is: a "{{x}}" inside it stays text, so values
     * cannot reach other parameters. */
    return render_lit(ud, json_string_value(v), json_string_length(v));
}

int agent_render_skill(const json_t *doc, const char *name, const json_t *params, buf_t *out,
                       char *err, size_t errcap)
{
    char q[JCHECK_QUOTE];
    const json_t *skill = NULL, *s;
    size_t i;
    if (!name || !out) {
        jcheck_seterr(err, errcap, "no skill name or output buffer");
        return -1;
    }
    /* First by name, like the validator's uniqueness rule expects. */
    json_array_foreach(json_object_get(doc, "skills"), i, s) {
        const json_t *n = json_object_get(s, "name");
        if (json_is_string(n) && strcmp(json_string_value(n), name) == 0) {
            skill = s;
            break;
        }
    }
    if (!skill) {
        jcheck_seterr(err, errcap, "no skill named \"%s\"",
                      jcheck_show(q, sizeof q, name, strlen(name)));
        return -1;
    }
    const char *ins = json_string_value(json_object_get(skill, "instructions"));
    if (!ins) {
        jcheck_seterr(err, errcap, "skill \"%s\" has no instructions",
                      jcheck_show(q, sizeof q, name, strlen(name)));
        return -1;
    }
    if (params && !json_is_object(params)) {
        jcheck_seterr(err, errcap, "params must be an object of strings");
        return -1;
    }
    /* The declared params are the skill's signature: every one must be given,
     * and nothing else may be. */
    const json_t *decl = json_object_get(skill, "params");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)params, key, v) {
        if (!declared(decl, key, strlen(key))) {
            jcheck_seterr(err, errcap, "undeclared parameter \"%s\"",
                          jcheck_show(q, sizeof q, key, strlen(key)));
            return -1;
        }
        if (!json_is_string(v)) {
            jcheck_seterr(err, errcap, "parameter \"%s\" must be a string",
                          jcheck_show(q, sizeof q, key, strlen(key)));
            return -1;
        }
    }
    json_array_foreach(decl, i, v) {
        if (json_is_string(v) && !json_object_get(params, json_string_value(v))) {
            jcheck_seterr(err, errcap, "missing parameter \"%s\"",
                          jcheck_show(q, sizeof q, json_string_value(v), json_string_length(v)));
            return -1;
        }
    }

    size_t mark = out->len, col = 0;
    skill_render r = {params, decl, out, 0, err, errcap};
    int rc = placeholders(ins, render_placeholder, &r, render_lit, &col);
    if (rc == -1)
        jcheck_seterr(err, errcap, "unterminated \"{{\" at column %zu of the instructions", col);
    else if (rc == -2 && r.rc == BUF_ETOOBIG)
        jcheck_seterr(err, errcap, "rendered skill over %zu bytes", out->max);
    else if (rc == -2)
        jcheck_seterr(err, errcap, "out of memory");
    if (rc) {
        /* All or nothing, like every append to a buf. */
        out->len = mark;
        if (out->p) out->p[mark] = '\0';
        return -1;
    }
    return 0;
}

/* ---- approval ---------------------------------------------------------------------------- */

int agent_needs_approval(const json_t *doc, const char *name, const char *server)
{
    const json_t *a = json_object_get(doc, "approval");
    return (name && json_object_get(a, name)) || (server && json_object_get(a, server));
}

/* ---- output ----------------------------------------------------------------------------- */

void agent_redact(json_t *doc)
{
    size_t i;
    json_t *s, *v;
    const char *k;
    /* Only documents stored before servers moved to the operator's configuration
     * can hold these; their values may be secrets. */
    json_array_foreach(json_object_get(doc, "mcpServers"), i, s) {
        json_t *env = json_object_get(s, "env");
        json_object_foreach(env, k, v) json_object_set_new(env, k, json_string("[redacted]"));
    }
}

/* ---- the system prompt ------------------------------------------------------------------ */

int agent_system_prompt(const json_t *doc, buf_t *out)
{
    size_t mark = out->len, i, j;
    const json_t *sys = json_object_get(doc, "system"), *skills = json_object_get(doc, "skills"), *s, *p;
    int rc = 0;
    if (json_is_string(sys)) rc = buf_append(out, json_string_value(sys), json_string_length(sys));
    if (!rc && json_array_size(skills)) {
        if (out->len > mark) rc = buf_puts(out, "\n\n");
        if (!rc)
            rc = buf_puts(out, "# Skills\n\nYou have these skills. A message that invokes one begins with its "
                               "instructions, its {{parameters}} filled in.\n");
        json_array_foreach(skills, i, s) {
            const char *name = json_string_value(json_object_get(s, "name"));
            const char *ins = json_string_value(json_object_get(s, "instructions"));
            if (rc || !name || !ins) continue;
            rc = buf_printf(out, "\n## %s", name);
            json_array_foreach(json_object_get(s, "params"), j, p)
                if (!rc && json_is_string(p))
                    rc = buf_printf(out, "%s%s", j ? ", " : " (parameters: ", json_string_value(p));
            if (!rc && json_array_size(json_object_get(s, "params"))) rc = buf_puts(out, ")");
            if (!rc) rc = buf_printf(out, "\n\n%s\n", ins);
        }
    }
    if (rc) {
        out->len = mark;
        if (out->p) out->p[mark] = '\0';
    }
    return rc;
}

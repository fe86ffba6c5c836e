#include "provcfg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "agent.h"
#include "jcheck.h"
#include "opfile.h"

#define PATHCAP 160

/* ---- building ---------------------------------------------------------------------- */

static void provider_clear(provcfg_provider *p)
{
    if (p->key) {
        explicit_bzero(p->key, strlen(p->key));
        free(p->key);
    }
    for (size_t i = 0; i < p->nhosts; i++) free(p->hosts[i]);
    for (size_t i = 0; i < p->nprivate_hosts; i++) free(p->private_hosts[i]);
    free(p->hosts);
    free(p->private_hosts);
    free(p->nets);
    json_decref(p->models);
    memset(p, 0, sizeof *p);
}

void provcfg_free(provcfg_t *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) provider_clear(&c->v[i]);
    free(c->v);
    free(c);
}

/* Set p's base URL (already checked by url_parse) without its trailing '/'. */
static void set_base(provcfg_provider *p, const char *base)
{
    char why[8];
    url_t u;
    snprintf(p->base, sizeof p->base, "%s", base);
    size_t n = strlen(p->base);
    while (n && p->base[n - 1] == '/') p->base[--n] = '\0';
    if (url_parse(p->base, &u, why, sizeof why) == 0) snprintf(p->base_host, sizeof p->base_host, "%s", u.host);
}

static provcfg_provider *add(provcfg_t *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->v[i].name, name)) {
            provider_clear(&c->v[i]);       /* the file redefines a built-in */
            snprintf(c->v[i].name, sizeof c->v[i].name, "%s", name);
            return &c->v[i];
        }
    provcfg_provider *v = realloc(c->v, (c->n + 1) * sizeof *v);
    if (!v) return NULL;
    c->v = v;
    provcfg_provider *p = &c->v[c->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    return p;
}

static int add_builtins(provcfg_t *c)
{
    static const struct { const char *name; provider_kind kind; } b[] = {
        {"anthropic", PROVIDER_ANTHROPIC}, {"openai", PROVIDER_OPENAI}};
    for (size_t i = 0; i < 2; i++) {
        provcfg_provider *p = add(c, b[i].name);
        if (!p) return -1;
        p->kind = b[i].kind;
        p->builtin = 1;
        p->cont = b[i].kind == PROVIDER_ANTHROPIC ? PROVIDER_CONT_PREFILL : PROVIDER_CONT_OFF;
        snprintf(p->key_from, sizeof p->key_from, "builtin");
        set_base(p, provider_default_base(b[i].kind));
    }
    return 0;
}

int provcfg_builtin_keys(provcfg_t *c, const char *anthropic, const char *openai)
{
    for (size_t i = 0; i < c->n; i++) {
        provcfg_provider *p = &c->v[i];
        const char *k = p->kind == PROVIDER_ANTHROPIC ? anthropic : openai;
        if (!p->builtin || p->key || !k || !*k) continue;
        if (!(p->key = strdup(k))) return -1;
    }
    return 0;
}

/* ---- the file ------------------------------------------------------------------------- */

static int valid_env_name(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

/* A host pattern: "*", "*.name" or a name, in the characters a host may have. */
static int valid_pattern(const char *s)
{
    if (!strcmp(s, "*")) return 1;
    if (s[0] == '*' && s[1] == '.') s += 2;
    size_t n = strlen(s);
    if (n == 0 || n > URL_HOST_MAX || s[0] == '.' || s[n - 1] == '.' || strstr(s, "..")) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '.' || *s == '_'))
            return 0;
    return 1;
}

static char *dup_lower(const char *s)
{
    char *d = strdup(s);
    for (char *p = d; p && *p; p++)
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
    return d;
}

static void load_allow_endpoints(jcheck_errlist *e, const char *base, provcfg_provider *p,
                                 const json_t *v)
{
    char path[PATHCAP], sub[PATHCAP], q[JCHECK_QUOTE];
    jcheck_key(path, sizeof path, base, "allowEndpoints");
    if (!v || json_is_false(v)) return;
    if (json_is_true(v)) v = NULL;      /* any host: the pattern "*" */
    else if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > PROVCFG_LIST_MAX) {
        jcheck_mistake(e, path, "must be false, true or an array of 1 to %d host patterns", PROVCFG_LIST_MAX);
        return;
    }
    size_t n = v ? json_array_size(v) : 1;
    if (!(p->hosts = calloc(n, sizeof *p->hosts))) {
        jcheck_mistake(e, path, "out of memory");
        return;
    }
    p->endpoints = 1;
    for (size_t i = 0; i < n; i++) {
        const char *s = v ? json_string_value(json_array_get(v, i)) : "*";
        jcheck_index(sub, sizeof sub, path, "", i);
        if (!s || !valid_pattern(s)) {
            jcheck_mistake(e, sub, "must be a host, \"*.domain\" or \"*\" (got %s)",
                           s ? jcheck_show(q, sizeof q, s, strlen(s)) : "no string");
            continue;
        }
        p->hosts[p->nhosts++] = dup_lower(s);
    }
}

static void load_allow_private(jcheck_errlist *e, const char *base, provcfg_provider *p,
                               const json_t *v)
{
    char path[PATHCAP], sub[PATHCAP], q[JCHECK_QUOTE];
    jcheck_key(path, sizeof path, base, "allowPrivate");
    if (!v) return;
    if (!json_is_array(v) || json_array_size(v) > PROVCFG_LIST_MAX) {
        jcheck_mistake(e, path, "must be an array of at most %d addresses, CIDR blocks or host names",
                       PROVCFG_LIST_MAX);
        return;
    }
    size_t n = json_array_size(v);
    p->nets = calloc(n ? n : 1, sizeof *p->nets);
    p->private_hosts = calloc(n ? n : 1, sizeof *p->private_hosts);
    if (!p->nets || !p->private_hosts) {
        jcheck_mistake(e, path, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(v, i));
        jcheck_index(sub, sizeof sub, path, "", i);
        if (s && url_net_parse(s, &p->nets[p->nnets]) == 0) p->nnets++;
        else if (s && strcmp(s, "*") && valid_pattern(s) && url_addr_parse(s, &(url_addr){0}) != 0)
            p->private_hosts[p->nprivate_hosts++] = dup_lower(s);
        else
            jcheck_mistake(e, sub, "must be an address (\"127.0.0.1\", \"::1\"), a CIDR block "
                           "(\"10.0.0.0/8\") or a host name (got %s)",
                           s ? jcheck_show(q, sizeof q, s, strlen(s)) : "no string");
    }
}

static void load_key(jcheck_errlist *e, const char *base, provcfg_provider *p, const json_t *doc,
                     int file_private, int with_keys)
{
    char path[PATHCAP], q[JCHECK_QUOTE];
    const json_t *key = jcheck_string(e, base, doc, "key", 0);
    const json_t *env = jcheck_string(e, base, doc, "keyEnv", 0);
    if (key && env) {
        jcheck_key(path, sizeof path, base, "key");
        jcheck_mistake(e, path, "give key or keyEnv, not both");
        return;
    }
    if (key) {
        jcheck_key(path, sizeof path, base, "key");
        const char *k = json_string_value(key);
        int ok = json_string_length(key) > 0 && json_string_length(key) < PROVCFG_KEY_MAX &&
                 strlen(k) == json_string_length(key);
        for (const char *c = k; ok && *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) ok = 0;
        /* Never quoted in a message: it is a secret. */
        if (!ok) jcheck_mistake(e, path, "must be 1 to %d printable ASCII characters", PROVCFG_KEY_MAX - 1);
        else if (!file_private)
            jcheck_mistake(e, path, "a key may be written in the file only when the file is readable by "
                                    "its owner alone (chmod 600); else name a variable with keyEnv");
        else if (with_keys && !(p->key = strdup(k))) jcheck_mistake(e, path, "out of memory");
        snprintf(p->key_from, sizeof p->key_from, "file");
    }
    if (env) {
        jcheck_key(path, sizeof path, base, "keyEnv");
        const char *name = json_string_value(env);
        if (!valid_env_name(name)) {
            jcheck_mistake(e, path, "not a variable name: %s", jcheck_show(q, sizeof q, name, strlen(name)));
            return;
        }
        snprintf(p->key_from, sizeof p->key_from, "env %s", name);
        const char *k = with_keys ? getenv(name) : NULL;
        if (k && *k && !(p->key = strdup(k))) jcheck_mistake(e, path, "out of memory");
    }
}

/* A base URL or endpoint on a special address must be allowed by p's allowPrivate.
 * Returns NULL, or why not into why. */
static const char *literal_refused(const provcfg_provider *p, const url_t *u, char *why, size_t cap)
{
    if (u->is_addr) return provcfg_addr_allowed(p, u->host, &u->addr, why, cap) ? NULL : why;
    if (url_host_is_localhost(u->host)) {
        url_addr lo4, lo6;
        url_addr_parse("127.0.0.1", &lo4);
        url_addr_parse("::1", &lo6);
        for (size_t i = 0; i < p->nprivate_hosts; i++)
            if (url_host_match(p->private_hosts[i], u->host)) return NULL;
        for (size_t i = 0; i < p->nnets; i++)
            if (url_net_match(&p->nets[i], &lo4) || url_net_match(&p->nets[i], &lo6)) return NULL;
        snprintf(why, cap, "%s is a loopback name (not in the provider's allowPrivate)", u->host);
        return why;
    }
    return NULL;
}

/* models: {"<model>": {"contextTokens": N}}: the operator's context window of each
 * model it names (lib/compact compacts a chat before a request would exceed it). */
static void load_models(jcheck_errlist *e, const char *base, provcfg_provider *p, const json_t *v)
{
    static const char *const keys[] = {"contextTokens", NULL};
    char path[PATHCAP], sub[PATHCAP];
    const char *model;
    const json_t *m;
    jcheck_key(path, sizeof path, base, "models");
    if (!v) return;
    if (!json_is_object(v) || json_object_size(v) > PROVCFG_MODELS_MAX) {
        jcheck_mistake(e, path, "must be an object of at most %d models", PROVCFG_MODELS_MAX);
        return;
    }
    json_object_foreach((json_t *)v, model, m) {
        jcheck_key(sub, sizeof sub, path, model);
        if (!*model || strlen(model) > 128) {
            jcheck_mistake(e, sub, "a model name is 1 to 128 bytes");
            continue;
        }
        if (!json_is_object(m)) {
            jcheck_mistake(e, sub, "must be an object ({\"contextTokens\": N})");
            continue;
        }
        jcheck_unknown_keys(e, sub, m, keys);
        const json_t *ct = json_object_get(m, "contextTokens");
        if (ct && (!json_is_integer(ct) || json_integer_value(ct) < 1 || json_integer_value(ct) > PROVCFG_CONTEXT_MAX)) {
            char k[PATHCAP];
            jcheck_key(k, sizeof k, sub, "contextTokens");
            jcheck_mistake(e, k, "must be an integer from 1 to %d", PROVCFG_CONTEXT_MAX);
        }
    }
    p->models = json_deep_copy(v);
}

/* compaction: {"provider", "model"}: what summarizes the chats compacted, instead of
 * each agent's own provider and model. */
static void load_compaction(jcheck_errlist *e, provcfg_t *c, const json_t *v)
{
    static const char *const keys[] = {"provider", "model", NULL};
    if (!v) return;
    if (!json_is_object(v)) {
        jcheck_mistake(e, "compaction", "must be an object ({\"provider\", \"model\"})");
        return;
    }
    jcheck_unknown_keys(e, "compaction", v, keys);
    const json_t *pr = jcheck_string(e, "compaction", v, "provider", 1);
    const json_t *mo = jcheck_string(e, "compaction", v, "model", 1);
    if (pr && !provcfg_find(c, json_string_value(pr)))
        jcheck_mistake(e, "compaction.provider", "no provider named %.64s is configured", json_string_value(pr));
    if (mo && (json_string_length(mo) < 1 || json_string_length(mo) > 128))
        jcheck_mistake(e, "compaction.model", "must be 1 to 128 bytes");
    if (pr && mo) {
        snprintf(c->compact_provider, sizeof c->compact_provider, "%s", json_string_value(pr));
        snprintf(c->compact_model, sizeof c->compact_model, "%s", json_string_value(mo));
    }
}

static void load_provider(jcheck_errlist *e, provcfg_t *c, const char *name, const json_t *doc,
                          int file_private, int with_keys)
{
    static const char *const keys[] = {"kind", "baseUrl", "key", "keyEnv", "allowEndpoints",
                                       "allowPrivate", "models", "continuation", NULL};
    char base[PATHCAP], path[PATHCAP], why[256];
    jcheck_key(base, sizeof base, "providers", name);
    if (!agent_valid_name(name)) {
        jcheck_mistake(e, base, "a provider name is 1 to 64 of A-Z a-z 0-9 _ . -");
        return;
    }
    if (!json_is_object(doc)) {
        jcheck_mistake(e, base, "a provider must be an object");
        return;
    }
    jcheck_unknown_keys(e, base, doc, keys);
    provcfg_provider *p = add(c, name);
    if (!p) {
        jcheck_mistake(e, base, "out of memory");
        return;
    }
    const json_t *kind = jcheck_string(e, base, doc, "kind", 1);
    int k = kind ? provider_kind_parse(json_string_value(kind)) : -1;
    jcheck_key(path, sizeof path, base, "kind");
    if (kind && k < 0) jcheck_mistake(e, path, "must be \"anthropic\" or \"openai\"");
    p->kind = k < 0 ? PROVIDER_ANTHROPIC : (provider_kind)k;
    /* Claude models continue a prefill; OpenAI's own API does not continue a last
     * assistant message (many compatible servers do, when asked: the operator says). */
    p->cont = p->kind == PROVIDER_ANTHROPIC ? PROVIDER_CONT_PREFILL : PROVIDER_CONT_OFF;
    const json_t *cont = jcheck_string(e, base, doc, "continuation", 0);
    int ct = cont ? provider_cont_parse(json_string_value(cont)) : -1;
    jcheck_key(path, sizeof path, base, "continuation");
    if (cont && ct < 0) jcheck_mistake(e, path, "must be \"prefill\", \"continue_final_message\" or \"off\"");
    else if (cont) p->cont = (provider_cont)ct;
    load_allow_endpoints(e, base, p, json_object_get(doc, "allowEndpoints"));
    load_allow_private(e, base, p, json_object_get(doc, "allowPrivate"));
    load_key(e, base, p, doc, file_private, with_keys);
    load_models(e, base, p, json_object_get(doc, "models"));

    const json_t *bu = jcheck_string(e, base, doc, "baseUrl", 0);
    jcheck_key(path, sizeof path, base, "baseUrl");
    const char *url = bu ? json_string_value(bu) : provider_default_base(p->kind);
    url_t u;
    if (url_parse(url, &u, why, sizeof why)) jcheck_mistake(e, path, "%s", why);
    else if (strchr(u.rest, '?')) jcheck_mistake(e, path, "a query is not allowed");
    else if (literal_refused(p, &u, why, sizeof why)) jcheck_mistake(e, path, "%s", why);
    else set_base(p, url);
}

provcfg_t *provcfg_load(const char *path, int with_keys, char *err, size_t errcap)
{
    static const char *const keys[] = {"builtins", "providers", "compaction", NULL};
    jcheck_errlist e;
    jcheck_init(&e, err, errcap, PATHCAP);
    provcfg_t *c = calloc(1, sizeof *c);
    json_t *doc = NULL;
    if (!c) {
        jcheck_mistake(&e, "$", "out of memory");
        return NULL;
    }
    if (path && *path) {
        /* The operator's file (lib/opfile): a key written in it needs a file
         * that nobody else can read. */
        char why[512];
        mode_t mode = 0;
        doc = opfile_load(path, S_IWGRP | S_IWOTH, "is writable by group or others (chmod go-w)", &mode, why,
                          sizeof why);
        if (!doc) {
            jcheck_mistake(&e, "$", "%s", why);
            goto fail;
        }
        int private = (mode & 077) == 0;
        jcheck_unknown_keys(&e, "", doc, keys);
        const json_t *b = json_object_get(doc, "builtins");
        if (b && !json_is_boolean(b)) jcheck_mistake(&e, "builtins", "must be true or false");
        if (!json_is_false(b) && add_builtins(c)) jcheck_mistake(&e, "$", "out of memory");
        const json_t *ps = json_object_get(doc, "providers"), *p;
        const char *name;
        if (ps && (!json_is_object(ps) || json_object_size(ps) > PROVCFG_PROVIDERS_MAX))
            jcheck_mistake(&e, "providers", "must be an object of at most %d providers", PROVCFG_PROVIDERS_MAX);
        else json_object_foreach((json_t *)ps, name, p) load_provider(&e, c, name, p, private, with_keys);
        load_compaction(&e, c, json_object_get(doc, "compaction"));
    } else if (add_builtins(c)) {
        jcheck_mistake(&e, "$", "out of memory");
    }
    if (e.n) goto fail;
    json_decref(doc);
    return c;
fail:
    json_decref(doc);       /* a key held in it is a copy we are about to drop too */
    provcfg_free(c);
    return NULL;
}

/* ---- decisions ----------------------------------------------------------------------------- */

int64_t provcfg_context_tokens(const provcfg_t *c, const char *provider, const char *model)
{
    const provcfg_provider *p = provcfg_find(c, provider);
    const json_t *ct = p && model ? json_object_get(json_object_get(p->models, model), "contextTokens") : NULL;
    return json_is_integer(ct) ? json_integer_value(ct) : 0;
}

const provcfg_provider *provcfg_find(const provcfg_t *c, const char *name)
{
    for (size_t i = 0; c && name && i < c->n; i++)
        if (!strcmp(c->v[i].name, name)) return &c->v[i];
    return NULL;
}

int provcfg_addr_allowed(const provcfg_provider *p, const char *host, const url_addr *a,
                         char *why, size_t whycap)
{
    const char *cls = url_addr_class(a);
    if (!cls) return 1;
    for (size_t i = 0; i < p->nnets; i++)
        if (url_net_match(&p->nets[i], a)) return 1;
    for (size_t i = 0; host && i < p->nprivate_hosts; i++)
        if (url_host_match(p->private_hosts[i], host)) return 1;
    char s[64];
    url_addr_format(a, s, sizeof s);
    if (whycap) snprintf(why, whycap, "%s is a%s %s address (not in the allowPrivate of provider %s)", s,
                         cls[0] == 'u' ? "n" : "", cls, p->name);
    return 0;
}

/* Check endpoint (an agent's) for provider p. Returns 0, or -1 with why. */
static int check_endpoint(const provcfg_provider *p, const char *endpoint, url_t *u, char *why,
                          size_t cap)
{
    if (!p->endpoints) {
        snprintf(why, cap, "provider %s does not let agents choose an endpoint (the operator's "
                           "allowEndpoints)", p->name);
        return -1;
    }
    char msg[200];
    if (url_parse(endpoint, u, msg, sizeof msg)) {
        snprintf(why, cap, "%s", msg);
        return -1;
    }
    if (strchr(u->rest, '?')) {
        snprintf(why, cap, "a query is not allowed");
        return -1;
    }
    size_t i;
    for (i = 0; i < p->nhosts; i++)
        if (url_host_match(p->hosts[i], u->host)) break;
    if (i == p->nhosts) {
        snprintf(why, cap, "host %s is not one provider %s allows (allowEndpoints)", u->host, p->name);
        return -1;
    }
    return literal_refused(p, u, why, cap) ? -1 : 0;
}

int provcfg_target_of(const provcfg_t *c, const json_t *agent, provcfg_target *t, char *why,
                      size_t whycap)
{
    char q[JCHECK_QUOTE];
    memset(t, 0, sizeof *t);
    const char *name = json_string_value(json_object_get(agent, "provider"));
    const provcfg_provider *p = provcfg_find(c, name);
    if (!p) {
        jcheck_seterr(why, whycap, "no provider named \"%s\" is configured",
                      name ? jcheck_show(q, sizeof q, name, strlen(name)) : "");
        return -1;
    }
    t->p = p;
    const json_t *ep = json_object_get(agent, "endpoint");
    if (ep) {
        url_t u;
        const char *s = json_string_value(ep);
        if (!s || check_endpoint(p, s, &u, why, whycap)) {
            if (!s) jcheck_seterr(why, whycap, "must be a string");
            return -1;
        }
        snprintf(t->base, sizeof t->base, "%s", s);
        size_t n = strlen(t->base);
        while (n && t->base[n - 1] == '/') t->base[--n] = '\0';
        snprintf(t->host, sizeof t->host, "%s", u.host);
        t->agent_endpoint = 1;
        t->key = NULL;      /* the operator's key never goes where an agent says */
        return 0;
    }
    snprintf(t->base, sizeof t->base, "%s", p->base);
    snprintf(t->host, sizeof t->host, "%s", p->base_host);
    t->key = p->key;
    return 0;
}

int provcfg_check_agent(const provcfg_t *c, const json_t *agent, char *err, size_t errcap)
{
    jcheck_errlist e;
    provcfg_target t;
    char why[400];
    jcheck_init(&e, err, errcap, PATHCAP);
    if (provcfg_target_of(c, agent, &t, why, sizeof why))
        jcheck_mistake(&e, t.p ? "endpoint" : "provider", "%s", why);
    /* A fallback's provider must be configured as well (it never takes the
     * agent's endpoint: each goes to its provider's own base URL). */
    size_t i;
    const json_t *f;
    json_array_foreach(json_object_get(agent, "fallbacks"), i, f) {
        const char *name = json_string_value(json_object_get(f, "provider"));
        char path[64], q[JCHECK_QUOTE];
        if (!name || provcfg_find(c, name)) continue;
        snprintf(path, sizeof path, "fallbacks[%zu].provider", i);
        jcheck_mistake(&e, path, "no provider named \"%s\" is configured", jcheck_show(q, sizeof q, name, strlen(name)));
    }
    return e.n ? -1 : 0;
}

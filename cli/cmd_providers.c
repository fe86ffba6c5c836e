/* dstream providers [FILE]: check the operator's provider file (lib/provcfg) the
 * way dstream-fcgi and dstream-runner will read it, and say what it means: each
 * provider's kind, base URL, where its key comes from (never the key), which
 * endpoints agents may give and which private addresses it may reach. */
#include <stdio.h>
#include <stdlib.h>

#include "../lib/provcfg.h"
#include "cli.h"
#include "http.h"

/* What print_provider says, as JSON (never the key). */
static json_t *provider_json(const provcfg_provider *p)
{
    const char *key = p->builtin ? (p->kind == PROVIDER_ANTHROPIC ? "ANTHROPIC_API_KEY or DSTREAM_CREDENTIALS"
                                                                  : "OPENAI_API_KEY or DSTREAM_CREDENTIALS")
                                 : p->key_from[0] ? p->key_from : NULL;
    json_t *hosts = json_array(), *reach = json_array();
    for (size_t i = 0; p->endpoints && i < p->nhosts; i++) json_array_append_new(hosts, json_string(p->hosts[i]));
    for (size_t i = 0; i < p->nnets; i++) {
        char a[64], n[80];
        url_addr_format(&p->nets[i].addr, a, sizeof a);
        snprintf(n, sizeof n, "%s/%d", a, p->nets[i].bits);
        json_array_append_new(reach, json_string(n));
    }
    for (size_t i = 0; i < p->nprivate_hosts; i++) json_array_append_new(reach, json_string(p->private_hosts[i]));
    char url[URL_MAX + 32];
    provider_request_url(p->kind, p->base, url, sizeof url);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:b, s:s?, s:b, s:o, s:o, s:s}", "name", p->name, "kind",
                          p->kind == PROVIDER_ANTHROPIC ? "anthropic" : "openai", "base", p->base, "requestUrl", url,
                          "builtin", p->builtin,
                          "keyFrom", key, "keyNotSetHere", !p->builtin && p->key_from[0] && !p->key, "endpointHosts", hosts, "mayReach", reach,
                          "continuation", provider_cont_name(p->cont));
    if (p->models) json_object_set(j, "models", p->models);     /* context windows (docs/agents.md) */
    return j;
}

static void print_provider(const provcfg_provider *p)
{
    printf("%s: %s at %s", p->name, p->kind == PROVIDER_ANTHROPIC ? "anthropic" : "openai", p->base);
    if (p->builtin)
        printf(", key from %s", p->kind == PROVIDER_ANTHROPIC ? "ANTHROPIC_API_KEY or DSTREAM_CREDENTIALS"
                                                              : "OPENAI_API_KEY or DSTREAM_CREDENTIALS");
    else if (p->key_from[0])
        printf(", key from %s%s", p->key_from, p->key ? "" : " (not set here)");
    else
        printf(", no key");
    if (!p->endpoints) printf(", agents may not give an endpoint");
    else {
        printf(", agent endpoints (no key sent) on");
        for (size_t i = 0; i < p->nhosts; i++) printf(" %s", p->hosts[i]);
    }
    if (p->nnets || p->nprivate_hosts) {
        char a[64];
        printf(", may reach");
        for (size_t i = 0; i < p->nnets; i++) {
            url_addr_format(&p->nets[i].addr, a, sizeof a);
            printf(" %s/%d", a, p->nets[i].bits);
        }
        for (size_t i = 0; i < p->nprivate_hosts; i++) printf(" %s", p->private_hosts[i]);
    }
    char url[URL_MAX + 32];
    provider_request_url(p->kind, p->base, url, sizeof url);
    printf("\n  requests go to %s\n  a reply cut off is %s\n", url,
           p->cont == PROVIDER_CONT_OFF ? "asked again from the start (continuation off)"
           : p->cont == PROVIDER_CONT_PREFILL ? "continued (continuation prefill)"
                                              : "continued (continuation continue_final_message)");
    const char *model;
    const json_t *m;
    json_object_foreach(p->models, model, m) {
        const json_t *ct = json_object_get(m, "contextTokens");
        if (json_is_integer(ct)) printf("  model %s: a context window of %lld tokens\n", model, (long long)json_integer_value(ct));
    }
}

int cmd_providers(int argc, char **argv)
{
    if (argc > 1) return cli_usage("providers");
    const char *path = argc == 1 ? argv[0] : getenv("DSTREAM_PROVIDERS");
    char err[4096];
    provcfg_t *c = provcfg_load(path, 1, err, sizeof err);
    if (!c) {
        fprintf(stderr, "dstream providers: %s:\n%s\n", path && *path ? path : "(built-ins)", err);
        return 1;
    }
    if (cli_json) {
        json_t *all = json_array();
        for (size_t i = 0; i < c->n; i++) json_array_append_new(all, provider_json(&c->v[i]));
        json_t *j = json_pack("{s:s?, s:o}", "file", path && *path ? path : NULL, "providers", all);
        if (c->compact_provider[0])
            json_object_set_new(j, "compaction", json_pack("{s:s, s:s}", "provider", c->compact_provider, "model",
                                                           c->compact_model));
        print_json(j);
        json_decref(j);
        provcfg_free(c);
        return 0;
    }
    printf("%s: %zu provider%s\n", path && *path ? path : "no file (built-ins)", c->n, c->n == 1 ? "" : "s");
    for (size_t i = 0; i < c->n; i++) print_provider(&c->v[i]);
    if (c->compact_provider[0])
        printf("compaction: chats are summarized by %s of provider %s\n", c->compact_model, c->compact_provider);
    else
        printf("compaction: chats are summarized by each agent's own provider and model\n");
    provcfg_free(c);
    return 0;
}

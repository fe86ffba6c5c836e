/* provcfg: the operator's providers (DSTREAM_PROVIDERS), and where a request may go.
 *
 * The operator owns the machine, the keys and the network; API clients own agent
 * documents. An agent names a provider; the operator's configuration says what
 * that name means: its wire format (kind), its base URL, its key, whether agents
 * may give their own `endpoint` and on which hosts, and which private or loopback
 * addresses its requests may reach. The rules that follow from it:
 *
 *   - the operator's key goes only to the provider's configured base URL; a request
 *     to an endpoint an agent supplied carries no operator key at all;
 *   - an agent's endpoint is refused unless the operator allows endpoints for that
 *     provider and the host matches one of its patterns;
 *   - loopback, link-local, private, unspecified, multicast and reserved addresses
 *     (lib/url) are refused, for base URLs and endpoints alike, unless the
 *     provider's allowPrivate names them (an address, a CIDR block or a host name);
 *     the runner checks the address of every socket it opens, so a name that
 *     resolves (or later re-resolves) to such an address gains nothing.
 *
 * The file (JSON):
 *
 *   {"builtins": true,                       optional: keep "anthropic" and "openai"
 *    "providers": {
 *      "NAME": {"kind": "anthropic" | "openai",
 *               "baseUrl": "https://...",    optional: the kind's public API
 *               "keyEnv": "VARIABLE",        the key from the runner's environment
 *               "key": "sk-...",             or in the file (only if mode 0600)
 *               "allowEndpoints": false | true | ["host", "*.example.com"],
 *               "allowPrivate": ["127.0.0.1", "10.0.0.0/8", "llm.internal"],
 *               "models": {"MODEL": {"contextTokens": N}},   optional: context windows
 *               "continuation": "prefill" | "continue_final_message" | "off"}},
 *                                            how a reply cut off is continued (lib/rturn);
 *                                            default "prefill" for kind anthropic, "off" for
 *                                            openai (OpenAI's API does not continue)
 *    "compaction": {"provider": "NAME", "model": "MODEL"}}   optional: who summarizes
 *
 * It must be a regular file owned by root or the user reading it, writable by
 * nobody else; a key written in it needs mode 0600 (or 0400). Without a file, or
 * unless it says "builtins": false, the names "anthropic" and "openai" exist with
 * their public base URLs and no endpoints allowed (their keys are the runner's
 * ANTHROPIC_API_KEY / OPENAI_API_KEY / DSTREAM_CREDENTIALS). */
#ifndef DSTREAM_PROVCFG_H
#define DSTREAM_PROVCFG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "provider.h"
#include "url.h"

#define PROVCFG_PROVIDERS_MAX 64
#define PROVCFG_LIST_MAX 32         /* patterns in allowEndpoints, entries in allowPrivate */
#define PROVCFG_KEY_MAX 1024
#define PROVCFG_MODELS_MAX 256          /* models one provider names */
#define PROVCFG_CONTEXT_MAX 100000000   /* a model's contextTokens */

typedef struct provcfg_provider {
    char name[65];
    provider_kind kind;
    char base[URL_MAX + 1];         /* no trailing '/' */
    char base_host[URL_HOST_MAX + 1];  /* its host (lib/url's one spelling) */
    int builtin;                    /* a built-in name, not from the file */
    char *key;                      /* the operator's key, or NULL (none, or not loaded) */
    char key_from[80];              /* where the key comes from, for messages: "file",
                                       "env NAME", "builtin"; "" none. Never the key. */
    int endpoints;                  /* agents may give an endpoint on a host in hosts */
    char **hosts;                   /* allowEndpoints patterns ("*": any host) */
    size_t nhosts;
    url_net *nets;                  /* allowPrivate addresses and blocks */
    size_t nnets;
    char **private_hosts;           /* allowPrivate host names (patterns) */
    size_t nprivate_hosts;
    json_t *models;                 /* {"<model>": {"contextTokens": N}}, or NULL */
    provider_cont cont;             /* continuation: how a reply cut off is continued */
} provcfg_provider;

typedef struct provcfg {
    provcfg_provider *v;
    size_t n;
    char compact_provider[65];      /* compaction's provider and model ("": the agent's own) */
    char compact_model[129];
} provcfg_t;

/* Load the configuration at path (NULL or "": the built-ins alone). with_keys: read
 * the keys (the runner); without, key and keyEnv are checked but no secret is
 * read (the HTTP pool). Returns NULL with every mistake in err, one per line. */
provcfg_t *provcfg_load(const char *path, int with_keys, char *err, size_t errcap);

/* Free c, wiping the keys it holds. */
void provcfg_free(provcfg_t *c);

/* The context window the operator gives model of provider (models.contextTokens), 0: none. */
int64_t provcfg_context_tokens(const provcfg_t *c, const char *provider, const char *model);

/* The provider called name, or NULL. */
const provcfg_provider *provcfg_find(const provcfg_t *c, const char *name);

/* Check an agent document's provider, endpoint and fallbacks' providers against c.
 * Returns 0, or -1 with each mistake as a line "provider: ..." / "endpoint: ..." /
 * "fallbacks[i].provider: ..." in err. */
int provcfg_check_agent(const provcfg_t *c, const json_t *agent, char *err, size_t errcap);

/* Where a request for agent goes. */
typedef struct provcfg_target {
    const provcfg_provider *p;
    char base[URL_MAX + 1];         /* the base URL to send to */
    char host[URL_HOST_MAX + 1];    /* its host, for the connect-time check */
    int agent_endpoint;             /* base is the agent's: no operator key, no shared connection */
    const char *key;                /* the operator key to send, or NULL */
} provcfg_target;

/* Decide where agent's request goes (checking it as provcfg_check_agent does).
 * t->key is the provider's key for its own base URL, and NULL for an endpoint the
 * agent gave. Returns 0, or -1 with the reason in why. */
int provcfg_target_of(const provcfg_t *c, const json_t *agent, provcfg_target *t, char *why,
                      size_t whycap);

/* Give the built-in providers (those not redefined by the file) the runner's keys
 * for kinds anthropic and openai (either may be NULL or ""). Returns 0 or -1 (out
 * of memory). */
int provcfg_builtin_keys(provcfg_t *c, const char *anthropic, const char *openai);

/* May a request of provider p for host connect to address a? Returns 1, or 0 with
 * the reason in why ("169.254.169.254 is a link-local address"). */
int provcfg_addr_allowed(const provcfg_provider *p, const char *host, const url_addr *a,
                         char *why, size_t whycap);

#endif

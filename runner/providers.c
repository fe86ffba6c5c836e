/* providers: where the runner's provider requests may go (lib/provcfg), held in
 * place on each curl handle.
 *
 * lib/provcfg decides the URL and the key; this file makes libcurl keep to that
 * decision through runner/egress (no redirect, so a key cannot be carried to
 * wherever a Location points; only http and https; no proxy; every socket checked
 * by the address it is about to connect to): a host name that resolves to a
 * loopback, link-local or private address, now or after DNS changes its answer, is
 * refused unless the provider's allowPrivate names it. Requests to an endpoint an
 * agent gave carry no operator key and use a connection of their own (never one
 * opened for another request, nor kept). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../lib/diag.h"
#include "providers.h"

int providers_load(runner_t *R)
{
    char err[2048];
    const char *path = getenv("DSTREAM_PROVIDERS");
    R->providers = provcfg_load(path, 1, err, sizeof err);
    if (!R->providers) {
        diag("error", "DSTREAM_PROVIDERS %s:\n%s", path ? path : "", err);
        return -1;
    }
    if (provcfg_builtin_keys(R->providers, R->anthropic_key, R->openai_key)) {
        diag("error", "out of memory");
        return -1;
    }
    /* Only provcfg holds them from now on. */
    explicit_bzero(R->anthropic_key, sizeof R->anthropic_key);
    explicit_bzero(R->openai_key, sizeof R->openai_key);
    return 0;
}

/* The provider's rule for q's connections (lib/provcfg): its own base URL's
 * addresses, an allowed agent endpoint's, and private ones only where named. */
static int provider_rule(void *ud, const url_addr *addr, char *why, size_t cap)
{
    rq_t *q = ud;
    return provcfg_addr_allowed(q->target.p, q->target.host, addr, why, cap);
}

int providers_prepare(runner_t *R, rq_t *q, const json_t *agent)
{
    char why[sizeof R->start_error];
    if (provcfg_target_of(R->providers, agent, &q->target, why, sizeof why)) {
        snprintf(R->start_error, sizeof R->start_error, "%s", why);
        return -1;
    }
    q->kind = q->target.p->kind;
    provider_request_url(q->kind, q->target.base, q->url, sizeof q->url);
    CURL *e = q->easy;
    curl_easy_setopt(e, CURLOPT_URL, q->url);
    egress_setup(e, &q->egress, provider_rule, q);
    if (q->target.agent_endpoint) {
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    }
    return 0;
}

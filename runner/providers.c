/* providers: where the runner's provider requests may go (lib/provcfg), held in
 * place on each curl handle.
 *
 * lib/provcfg decides the URL and the key; this file makes libcurl keep to that
 * decision: redirects are never followed (a 3xx is a failed request, so a key
 * cannot be carried to wherever a Location points), only http and https, no proxy
 * from the environment, and every socket curl opens is checked, by the address it
 * is about to connect to, before it exists (CURLOPT_OPENSOCKETFUNCTION). A host
 * name that resolves to a loopback, link-local or private address, now or after
 * DNS changes its answer, is refused there unless the provider's allowPrivate
 * names it. Requests to an endpoint an agent gave carry no operator key and use a
 * connection of their own (never one opened for another request, nor kept). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "runner.h"

int runner_providers(runner_t *R)
{
    char err[2048];
    const char *path = getenv("DSTREAM_PROVIDERS");
    R->providers = provcfg_load(path, 1, err, sizeof err);
    if (!R->providers) {
        fprintf(stderr, "dstream-runner: DSTREAM_PROVIDERS %s:\n%s\n", path ? path : "", err);
        return -1;
    }
    if (provcfg_builtin_keys(R->providers, R->anthropic_key, R->openai_key)) {
        fprintf(stderr, "dstream-runner: out of memory\n");
        return -1;
    }
    /* Only provcfg holds them from now on. */
    explicit_bzero(R->anthropic_key, sizeof R->anthropic_key);
    explicit_bzero(R->openai_key, sizeof R->openai_key);
    return 0;
}

static curl_socket_t open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    rq_t *q = ud;
    url_addr addr;
    char why[sizeof q->error - 16];
    int ok = purpose == CURLSOCKTYPE_IPCXN &&
             ((a->family == AF_INET && a->addrlen >= sizeof(struct sockaddr_in)) ||
              (a->family == AF_INET6 && a->addrlen >= sizeof(struct sockaddr_in6))) &&
             url_addr_from_sockaddr(&a->addr, &addr) == 0;
    if (!ok) snprintf(why, sizeof why, "not an IP connection");
    else ok = provcfg_addr_allowed(q->target.p, q->target.host, &addr, why, sizeof why);
    if (!ok) {
        q->refused = 1;
        snprintf(q->error, sizeof q->error, "refused: %s", why);
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
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
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, q);
    if (q->target.agent_endpoint) {
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    }
    return 0;
}

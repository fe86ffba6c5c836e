#include "egress.h"

#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>

static curl_socket_t open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    egress_t *g = ud;
    url_addr addr;
    char why[160];
    int ok = purpose == CURLSOCKTYPE_IPCXN &&
             ((a->family == AF_INET && a->addrlen >= sizeof(struct sockaddr_in)) ||
              (a->family == AF_INET6 && a->addrlen >= sizeof(struct sockaddr_in6))) &&
             url_addr_from_sockaddr(&a->addr, &addr) == 0;
    if (!ok) snprintf(why, sizeof why, "not an IP connection");
    else ok = g->rule(g->ud, &addr, why, sizeof why);
    if (!ok) {
        g->refused = 1;
        snprintf(g->error, sizeof g->error, "refused: %s", why);
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

void egress_setup(CURL *e, egress_t *g, egress_rule rule, void *ud)
{
    g->rule = rule;
    g->ud = ud;
    g->refused = 0;
    g->error[0] = '\0';
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, g);
}

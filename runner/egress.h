/* egress: the runner's outgoing HTTP requests held to the operator's address policy.
 *
 * Provider requests (runner/providers.c) and webhook deliveries (runner/deliver.c)
 * go to URLs that an operator's rule allows, and must not be talked into going
 * elsewhere: egress_setup makes a curl handle follow no redirect (a 3xx is a failed
 * request), speak only http and https, ignore proxies from the environment, and
 * check every socket curl opens by the address it is about to connect to, before
 * the socket exists. A host name that resolves to a refused address, now or after
 * DNS changes its answer, is refused there. */
#ifndef DSTREAM_EGRESS_H
#define DSTREAM_EGRESS_H

#include <curl/curl.h>
#include <stddef.h>

#include "../lib/url.h"

/* May the request connect to addr? Returns 1, or 0 with the reason in why (cap
 * bytes). */
typedef int (*egress_rule)(void *ud, const url_addr *addr, char *why, size_t cap);

/* One request's guard; lives as long as the curl handle (it is the socket
 * callback's data). refused and error tell the request's end what happened. */
typedef struct egress {
    egress_rule rule;
    void *ud;
    int refused;                /* a connection was refused by the rule */
    char error[200];            /* "refused: ..." */
} egress_t;

/* Set the guard on e, with rule(ud, ...) deciding each connection. */
void egress_setup(CURL *e, egress_t *g, egress_rule rule, void *ud);

#endif

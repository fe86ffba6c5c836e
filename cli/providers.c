/* dstream providers [FILE]: check the operator's provider file (lib/provcfg) the
 * way dstream-fcgi and dstream-runner will read it, and say what it means: each
 * provider's kind, base URL, where its key comes from (never the key), which
 * endpoints agents may give and which private addresses it may reach. */
#include <stdio.h>
#include <stdlib.h>

#include "../lib/provcfg.h"
#include "cli.h"

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
    printf("\n");
}

int cmd_providers(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "usage: dstream providers [FILE]   (default $DSTREAM_PROVIDERS)\n");
        return 2;
    }
    const char *path = argc == 1 ? argv[0] : getenv("DSTREAM_PROVIDERS");
    char err[4096];
    provcfg_t *c = provcfg_load(path, 1, err, sizeof err);
    if (!c) {
        fprintf(stderr, "dstream providers: %s:\n%s\n", path && *path ? path : "(built-ins)", err);
        return 1;
    }
    printf("%s: %zu provider%s\n", path && *path ? path : "no file (built-ins)", c->n, c->n == 1 ? "" : "s");
    for (size_t i = 0; i < c->n; i++) print_provider(&c->v[i]);
    provcfg_free(c);
    return 0;
}

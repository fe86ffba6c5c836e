/* libFuzzer harness for lib/url.c and the decisions of lib/provcfg.c.
 *
 * Invariants checked on every input (as a NUL-terminated string):
 *  - url_parse accepts only http(s) URLs whose host is lower case in host
 *    characters, whose port is 1..65535, with no '@' before the path; what it
 *    accepted parses again, rebuilt from its parts, to the same host, port and
 *    address;
 *  - no address slips through as a name: when the resolver would read the host
 *    as a numeric address (getaddrinfo with AI_NUMERICHOST), url_parse has it as
 *    that same address;
 *  - an IPv4-mapped IPv6 address has the class of the IPv4 address it maps;
 *  - url_encode_path writes only pchar characters and '%XX', and decodes back;
 *  - a block url_net_parse accepts contains its own address;
 *  - through lib/provcfg, an endpoint an agent gives never gets the operator's
 *    key, and is never a literal special address the provider did not allow;
 *    the provider's own base URL always gets it. */
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "provcfg.h"
#include "url.h"

#define REQUIRE(cond) \
    do { \
        if (!(cond)) abort(); \
    } while (0)

static provcfg_t *cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char path[] = "/tmp/fuzz-url-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) abort();
    static const char text[] =
        "{\"providers\": {\"p\": {\"kind\": \"openai\", \"baseUrl\": \"https://llm.example.com\","
        " \"key\": \"sk-fuzz\", \"allowEndpoints\": true, \"allowPrivate\": [\"10.0.0.0/8\"]}}}";
    if (write(fd, text, sizeof text - 1) != (ssize_t)(sizeof text - 1)) abort();
    close(fd);
    chmod(path, 0600);
    char err[1024];
    cfg = provcfg_load(path, 1, err, sizeof err);
    unlink(path);
    if (!cfg) abort();
    return 0;
}

static int unhex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void check_encode(const char *s)
{
    static char out[4 * 4096 + 1], back[4096 + 1];
    int n = url_encode_path(s, out, sizeof out);
    REQUIRE(n >= 0 && (size_t)n == strlen(out));
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        char c = out[i];
        if (c == '%') {
            REQUIRE(i + 2 < n && unhex(out[i + 1]) >= 0 && unhex(out[i + 2]) >= 0);
            back[k++] = (char)(unhex(out[i + 1]) * 16 + unhex(out[i + 2]));
            i += 2;
        } else {
            REQUIRE((unsigned char)c > 0x20 && (unsigned char)c < 0x7f && !strchr("?#%\"<>\\^`{|}[]", c));
            back[k++] = c;
        }
    }
    back[k] = '\0';
    REQUIRE(strcmp(back, s) == 0);
}

static void check_parsed(const char *s, const url_t *u)
{
    REQUIRE(u->host[0] && u->port >= 1 && u->port <= 65535);
    for (const char *h = u->host; *h; h++)
        REQUIRE((*h >= 'a' && *h <= 'z') || (*h >= '0' && *h <= '9') || strchr("-._:", *h));
    REQUIRE(u->rest >= s && u->rest <= s + strlen(s));
    REQUIRE(!memchr(s, '@', (size_t)(u->rest - s)));
    REQUIRE(!strchr(s, '#'));

    /* Rebuilt from its parts, it parses to the same thing. */
    char again[URL_MAX + 64], why[128];
    url_t v;
    snprintf(again, sizeof again, "%s://%s%s%s:%u%s", u->https ? "https" : "http",
             u->is_addr && u->addr.family == AF_INET6 ? "[" : "", u->host,
             u->is_addr && u->addr.family == AF_INET6 ? "]" : "", u->port, u->rest);
    if (strlen(again) <= URL_MAX) {
        REQUIRE(url_parse(again, &v, why, sizeof why) == 0);
        REQUIRE(strcmp(v.host, u->host) == 0 && v.port == u->port && v.is_addr == u->is_addr);
        REQUIRE(!u->is_addr || memcmp(&v.addr, &u->addr, sizeof v.addr) == 0);
    }

    /* What the resolver would take as a number, url_parse takes as that number. */
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_flags = AI_NUMERICHOST;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(u->host, NULL, &hints, &res) == 0) {
        url_addr a;
        REQUIRE(u->is_addr);
        REQUIRE(url_addr_from_sockaddr(res->ai_addr, &a) == 0);
        REQUIRE(memcmp(&a, &u->addr, sizeof a) == 0);
        freeaddrinfo(res);
    }

    /* The operator's key never goes to an endpoint an agent gives. */
    json_t *agent = json_pack("{s:s, s:s}", "provider", "p", "endpoint", s);
    provcfg_target t;
    if (agent && provcfg_target_of(cfg, agent, &t, why, sizeof why) == 0) {
        REQUIRE(t.key == NULL && t.agent_endpoint);
        if (u->is_addr) {
            const char *cls = url_addr_class(&u->addr);
            url_net ten;
            url_net_parse("10.0.0.0/8", &ten);
            REQUIRE(!cls || url_net_match(&ten, &u->addr));
        }
    }
    json_decref(agent);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    url_t u;
    char why[128];
    int rc = url_parse(s, &u, why, sizeof why);
    REQUIRE(rc == 0 || rc == -1);
    if (rc == 0) check_parsed(s, &u);
    else REQUIRE(why[0] != '\0');

    check_encode(s);

    url_addr a;
    if (url_addr_parse(s, &a) == 0 && a.family == AF_INET) {
        url_addr m = {AF_INET6, {0}};
        m.b[10] = m.b[11] = 0xff;
        memcpy(m.b + 12, a.b, 4);
        const char *c4 = url_addr_class(&a), *c6 = url_addr_class(&m);
        REQUIRE((!c4 && !c6) || (c4 && c6 && !strcmp(c4, c6)));
    }
    url_net n;
    if (url_net_parse(s, &n) == 0) REQUIRE(url_net_match(&n, &n.addr));

    json_t *own = json_pack("{s:s}", "provider", "p");
    provcfg_target t;
    REQUIRE(own && provcfg_target_of(cfg, own, &t, why, sizeof why) == 0);
    REQUIRE(t.key && !strcmp(t.key, "sk-fuzz") && !t.agent_endpoint);
    json_decref(own);
    free(s);
    return 0;
}

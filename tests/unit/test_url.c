/* Tests for lib/url: path encoding, URL parsing and the address policy. */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "test.h"
#include "url.h"

static void test_encode_path(void)
{
    char out[64];
    CHECK_EQ_INT(url_encode_path("a/b-c_d.e~f", out, sizeof out), 11);
    CHECK_EQ_STR(out, "a/b-c_d.e~f");
    /* The Location the hygiene review found: ?, # and space keep their place. */
    CHECK(url_encode_path("loc?x#y z", out, sizeof out) > 0);
    CHECK_EQ_STR(out, "loc%3Fx%23y%20z");
    CHECK(url_encode_path("100%\r\n\x01\x7f\xc3\xa9", out, sizeof out) > 0);
    CHECK_EQ_STR(out, "100%25%0D%0A%01%7F%C3%A9");
    CHECK(url_encode_path("a:b@c!$&'()*+,;=", out, sizeof out) > 0);
    CHECK_EQ_STR(out, "a:b@c!$&'()*+,;=");
    CHECK_EQ_INT(url_encode_path("", out, sizeof out), 0);
    CHECK_EQ_STR(out, "");
    /* Exactly fitting, then one byte short. */
    CHECK_EQ_INT(url_encode_path("a b", out, 6), 5);
    CHECK_EQ_INT(url_encode_path("a b", out, 5), -1);
    CHECK_EQ_STR(out, "");
    CHECK_EQ_INT(url_encode_path("x", out, 0), -1);
}

/* The class of a URL's host, or "name" for a host name, "bad" if refused. */
static const char *host_class(const char *s)
{
    static url_t u;
    char why[128];
    if (url_parse(s, &u, why, sizeof why)) return "bad";
    if (!u.is_addr) return "name";
    const char *c = url_addr_class(&u.addr);
    return c ? c : "public";
}

static void test_parse(void)
{
    url_t u;
    char why[128];
    CHECK_EQ_INT(url_parse("https://API.Anthropic.com", &u, why, sizeof why), 0);
    CHECK_EQ_STR(u.host, "api.anthropic.com");
    CHECK_EQ_INT(u.https, 1);
    CHECK_EQ_UINT(u.port, 443);
    CHECK_EQ_STR(u.rest, "");
    CHECK_EQ_INT(url_parse("http://example.com.:8080/v1?x=1", &u, why, sizeof why), 0);
    CHECK_EQ_STR(u.host, "example.com");
    CHECK_EQ_UINT(u.port, 8080);
    CHECK_EQ_STR(u.rest, "/v1?x=1");
    CHECK_EQ_INT(u.is_addr, 0);

    /* Refused forms, each with its reason. */
    static const struct { const char *url, *why; } bad[] = {
        {"ftp://x", "must be an http"},
        {"api.openai.com", "must be an http"},
        {"https://", "has no host"},
        {"https:///v1", "has no host"},
        {"http://a b", "spaces"},
        {"http://a\nb", "spaces"},
        {"http://\xc3\xa9.example", "non-ASCII"},
        {"http://user:pass@example.com", "userinfo"},
        {"http://user@example.com", "userinfo"},
        {"http://example.com@127.0.0.1/", "userinfo"},
        {"http://example.com#frag", "fragment"},
        {"http://example.com:0", "bad port"},
        {"http://example.com:65536", "bad port"},
        {"http://example.com:", "bad port"},
        {"http://example.com:8o", "bad port"},
        {"http://example.com:+80", "bad port"},
        {"http://[::1", "malformed IPv6"},
        {"http://[::1%25eth0]", "host cannot have"},
        {"http://[127.0.0.1]", "malformed IPv6"},
        {"http://exa%6dple.com", "host cannot have"},
        {"http://a..b", "malformed host"},
        {"http://.a", "malformed host"},
        {"http://1.0../x", "malformed host"},
        {"http://a\\@b", "userinfo"},
        {"http://a\\b", "host cannot have"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        int rc = url_parse(bad[i].url, &u, why, sizeof why);
        if (!CHECK_EQ_INT(rc, -1)) fprintf(stderr, "  accepted %s\n", bad[i].url);
        else if (!CHECK(strstr(why, bad[i].why))) fprintf(stderr, "  %s: %s\n", bad[i].url, why);
    }
    char big[URL_MAX + 16];
    memset(big, 'a', sizeof big - 1);
    memcpy(big, "http://", 7);
    big[sizeof big - 1] = '\0';
    CHECK_EQ_INT(url_parse(big, &u, why, sizeof why), -1);

    /* Every spelling of loopback is loopback, whatever its form. */
    static const char *const loop[] = {
        "http://127.0.0.1", "http://127.1", "http://2130706433", "http://0x7f000001",
        "http://017700000001", "http://0x7f.0.0.1", "http://127.0.0.1.", "http://[::1]",
        "http://[::ffff:127.0.0.1]", "http://[::ffff:7f00:1]", "http://[0:0:0:0:0:ffff:7f00:1]",
        "http://[64:ff9b::7f00:1]", "http://[2002:7f00:1::]", "http://127.255.255.254:8080/x",
    };
    for (size_t i = 0; i < sizeof loop / sizeof loop[0]; i++)
        if (!CHECK_EQ_STR(host_class(loop[i]), "loopback")) fprintf(stderr, "  %s\n", loop[i]);
    CHECK_EQ_INT(url_parse("http://2130706433:81", &u, why, sizeof why), 0);
    CHECK_EQ_STR(u.host, "127.0.0.1");   /* one spelling, for messages and matching */
    CHECK_EQ_UINT(u.port, 81);

    CHECK_EQ_STR(host_class("http://169.254.169.254/latest/meta-data"), "link-local");
    CHECK_EQ_STR(host_class("http://[fe80::1]"), "link-local");
    CHECK_EQ_STR(host_class("http://10.1.2.3"), "private");
    CHECK_EQ_STR(host_class("http://172.31.255.255"), "private");
    CHECK_EQ_STR(host_class("http://192.168.0.1"), "private");
    CHECK_EQ_STR(host_class("http://100.64.0.1"), "private");
    CHECK_EQ_STR(host_class("http://[fd00::1]"), "private");
    CHECK_EQ_STR(host_class("http://[fc00::1]"), "private");
    CHECK_EQ_STR(host_class("http://0.0.0.0"), "unspecified");
    CHECK_EQ_STR(host_class("http://0"), "unspecified");
    CHECK_EQ_STR(host_class("http://[::]"), "unspecified");
    CHECK_EQ_STR(host_class("http://224.0.0.1"), "multicast");
    CHECK_EQ_STR(host_class("http://[ff02::1]"), "multicast");
    CHECK_EQ_STR(host_class("http://255.255.255.255"), "reserved");
    CHECK_EQ_STR(host_class("http://[::ffff:10.0.0.1]"), "private");
    CHECK_EQ_STR(host_class("http://[::ffff:169.254.169.254]"), "link-local");
    CHECK_EQ_STR(host_class("http://[2001:db8::1]"), "reserved");
    CHECK_EQ_STR(host_class("http://8.8.8.8"), "public");
    CHECK_EQ_STR(host_class("http://172.32.0.1"), "public");
    CHECK_EQ_STR(host_class("http://[2606:4700::1111]"), "public");
    CHECK_EQ_STR(host_class("http://[::ffff:8.8.8.8]"), "public");
    CHECK_EQ_STR(host_class("http://1.2.3.4.5"), "name");
    CHECK_EQ_STR(host_class("http://deadbeef"), "name");
    CHECK_EQ_STR(host_class("http://256.1.1.1"), "name");
}

static void test_sockaddr(void)
{
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
    url_addr a;
    char s[64];
    memset(&in, 0, sizeof in);
    in.sin_family = AF_INET;
    inet_pton(AF_INET, "169.254.169.254", &in.sin_addr);
    CHECK_EQ_INT(url_addr_from_sockaddr((struct sockaddr *)&in, &a), 0);
    CHECK_EQ_STR(url_addr_class(&a), "link-local");
    url_addr_format(&a, s, sizeof s);
    CHECK_EQ_STR(s, "169.254.169.254");
    memset(&in6, 0, sizeof in6);
    in6.sin6_family = AF_INET6;
    inet_pton(AF_INET6, "::ffff:127.0.0.2", &in6.sin6_addr);
    CHECK_EQ_INT(url_addr_from_sockaddr((struct sockaddr *)&in6, &a), 0);
    CHECK_EQ_STR(url_addr_class(&a), "loopback");
    struct sockaddr un = {.sa_family = AF_UNIX};
    CHECK_EQ_INT(url_addr_from_sockaddr(&un, &a), -1);
}

static void test_nets(void)
{
    url_net n;
    url_addr a;
    CHECK_EQ_INT(url_net_parse("127.0.0.1", &n), 0);
    CHECK_EQ_INT(n.bits, 32);
    CHECK_EQ_INT(url_addr_parse("127.0.0.1", &a), 0);
    CHECK(url_net_match(&n, &a));
    CHECK_EQ_INT(url_addr_parse("::ffff:127.0.0.1", &a), 0);
    CHECK(url_net_match(&n, &a));       /* the mapped form is the same address */
    CHECK_EQ_INT(url_addr_parse("127.0.0.2", &a), 0);
    CHECK(!url_net_match(&n, &a));
    CHECK_EQ_INT(url_net_parse("10.0.0.0/8", &n), 0);
    CHECK_EQ_INT(url_addr_parse("10.200.0.1", &a), 0);
    CHECK(url_net_match(&n, &a));
    CHECK_EQ_INT(url_addr_parse("11.0.0.1", &a), 0);
    CHECK(!url_net_match(&n, &a));
    CHECK_EQ_INT(url_net_parse("fd00::/8", &n), 0);
    CHECK_EQ_INT(url_addr_parse("fd12::1", &a), 0);
    CHECK(url_net_match(&n, &a));
    CHECK_EQ_INT(url_addr_parse("10.0.0.1", &a), 0);
    CHECK(!url_net_match(&n, &a));      /* families differ */
    CHECK_EQ_INT(url_net_parse("172.16.0.0/12", &n), 0);
    CHECK_EQ_INT(url_addr_parse("172.31.1.1", &a), 0);
    CHECK(url_net_match(&n, &a));
    CHECK_EQ_INT(url_net_parse("0.0.0.0/0", &n), 0);
    CHECK(url_net_match(&n, &a));
    static const char *const bad[] = {"", "/8", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1",
                                      "10.0.0.0/8x", "127.1", "2130706433", "::1/129",
                                      "localhost", "10.0.0.0/0008"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!CHECK_EQ_INT(url_net_parse(bad[i], &n), -1)) fprintf(stderr, "  accepted %s\n", bad[i]);
}

static void test_hosts(void)
{
    CHECK(url_host_match("*", "api.example.com"));
    CHECK(url_host_match("*.example.com", "api.example.com"));
    CHECK(url_host_match("*.example.com", "a.b.EXAMPLE.com"));
    CHECK(!url_host_match("*.example.com", "example.com"));
    CHECK(!url_host_match("*.example.com", "evilexample.com"));
    CHECK(!url_host_match("*.example.com", "example.com.evil.net"));
    CHECK(url_host_match("api.example.com", "API.example.com"));
    CHECK(!url_host_match("api.example.com", "api.example.com.evil.net"));
    CHECK(url_host_is_localhost("localhost"));
    CHECK(url_host_is_localhost("a.LOCALHOST"));
    CHECK(!url_host_is_localhost("localhost.example.com"));
    CHECK(!url_host_is_localhost("notlocalhost"));
}

int main(void)
{
    test_encode_path();
    test_parse();
    test_sockaddr();
    test_nets();
    test_hosts();
    return TEST_MAIN_END();
}

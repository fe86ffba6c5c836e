/* Tests for lib/url: path encoding and the policy for outgoing URLs. */
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

int main(void)
{
    test_encode_path();
    return TEST_MAIN_END();
}

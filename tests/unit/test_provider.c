/* Unit tests for lib/provider.c: the SSE reader's protocol errors (over-long lines,
 * data that is not JSON, arguments over the limit, NULs in ids), the request body's parts both formats share, URL and headers. The formats'
 * own streams and messages are test_anthropic's and test_openai's. */
#include "test_prov.h"

static int feed_str(provider_parser *p, const char *s)
{
    return provider_feed(p, s, strlen(s));
}

static void test_protocol_errors(void)
{
    rec r = {.stop_at = 0};
    buf_init(&r.out, 0);

    /* A line of exactly PROVIDER_LINE_MAX bytes is fine; one more byte is not. */
    char *big = malloc(PROVIDER_LINE_MAX + 2);
    memset(big, 'x', PROVIDER_LINE_MAX + 1);
    big[0] = ':';
    provider_parser *p = provider_parser_new(PROVIDER_OPENAI, on_event, &r);
    int rc = 0;
    for (size_t i = 0; i < PROVIDER_LINE_MAX && !rc; i += 4096)
        rc = provider_feed(p, big + i, PROVIDER_LINE_MAX - i < 4096 ? PROVIDER_LINE_MAX - i : 4096);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(feed_str(p, "\r"), 0);
    CHECK_EQ_INT(feed_str(p, "\ndata: [DONE]\n\n"), 0);
    CHECK_EQ_INT(provider_finish(p), 0);
    provider_parser_free(p);

    p = provider_parser_new(PROVIDER_OPENAI, on_event, &r);
    CHECK_EQ_INT(provider_feed(p, big, PROVIDER_LINE_MAX), 0);
    CHECK_EQ_INT(provider_feed(p, big, 1), -1);
    CHECK_EQ_INT(feed_str(p, "\n\ndata: [DONE]\n\n"), -1);   /* stays failed */
    CHECK_EQ_INT(provider_finish(p), -1);
    provider_parser_free(p);

    /* Data lines adding up to more than a line may hold. */
    p = provider_parser_new(PROVIDER_ANTHROPIC, on_event, &r);
    memcpy(big, "data:", 5);
    big[PROVIDER_LINE_MAX - 1] = '\n';
    CHECK_EQ_INT(provider_feed(p, big, PROVIDER_LINE_MAX), 0);
    CHECK_EQ_INT(provider_feed(p, big, PROVIDER_LINE_MAX), -1);
    provider_parser_free(p);
    free(big);

    /* Data that is not a JSON object. */
    static const char *const bad[] = {
        "data: {\"type\":\"message_start\"\n\n",
        "data: [1]\n\n",
        "data: hello\n\n",
        "data: {\"type\":\"ping\"} x\n\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = provider_parser_new(i % 2 ? PROVIDER_OPENAI : PROVIDER_ANTHROPIC, on_event, &r);
        CHECK_EQ_INT(feed_str(p, bad[i]), -1);
        provider_parser_free(p);
    }

    /* A tool call whose id or name holds a NUL (\u0000) is malformed: both are C
     * strings past the parser (tool look-ups, event keys) and would be read cut short. */
    static const char *const nul[] = {
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\\u0000x\","
        "\"function\":{\"name\":\"search\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\","
        "\"function\":{\"name\":\"search\\u0000evil\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]\n\n",
    };
    for (size_t i = 0; i < sizeof nul / sizeof nul[0]; i++) {
        p = provider_parser_new(PROVIDER_OPENAI, on_event, &r);
        if (!CHECK_EQ_INT(feed_str(p, nul[i]), -1)) fprintf(stderr, "  %s\n", nul[i]);
        provider_parser_free(p);
    }
    /* Text with a NUL is text: every byte of it is delivered. */
    p = provider_parser_new(PROVIDER_OPENAI, on_event, &r);
    buf_reset(&r.out);
    CHECK_EQ_INT(feed_str(p, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\\u0000b\"}}]}\n\n"), 0);
    CHECK(r.out.len > 0 && strstr(r.out.p, "a\\u0000b") != NULL);
    provider_parser_free(p);

    /* vLLM reports errors as {"object": "error", ...}. */
    buf_reset(&r.out);
    p = provider_parser_new(PROVIDER_OPENAI, on_event, &r);
    CHECK_EQ_INT(feed_str(p, "data: {\"object\":\"error\",\"message\":\"too long\","
                             "\"type\":\"BadRequestError\",\"code\":400}\n\n"), 0);
    CHECK_EQ_STR(r.out.p, "error:BadRequestError|too long\n");
    CHECK_EQ_INT(provider_finish(p), -1);
    provider_parser_free(p);

    /* Tool-call arguments that do not assemble into JSON. */
    p = provider_parser_new(PROVIDER_ANTHROPIC, on_event, &r);
    CHECK_EQ_INT(feed_str(p,
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}\n\n"
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n"), 0);
    CHECK_EQ_INT(feed_str(p, "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"), -1);
    provider_parser_free(p);

    /* Whitespace-only data, unknown events and fields are ignored; a leading BOM
     * is dropped; ids and retry fields mean nothing. */
    buf_reset(&r.out);
    p = provider_parser_new(PROVIDER_ANTHROPIC, on_event, &r);
    CHECK_EQ_INT(feed_str(p, "\xef\xbb\xbf" "event: ping\ndata:\n\n"
                             "data: \ndata:  \n\n"
                             "id: 5\nretry: 100\nfoo\n"
                             "event: future_event\ndata: {\"type\":\"future_event\",\"x\":1}\n\n"
                             "event: message_stop\ndata: {}\n\n"), 0);
    CHECK_EQ_INT(provider_finish(p), 0);
    CHECK_EQ_STR(r.out.p, "done\n");
    provider_parser_free(p);

    /* A content block without a stop is delivered by message_stop. */
    buf_reset(&r.out);
    p = provider_parser_new(PROVIDER_ANTHROPIC, on_event, &r);
    CHECK_EQ_INT(feed_str(p,
        "data: {\"type\":\"content_block_start\",\"index\":4,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{\"k\":1}}}\n\n"
        "data: {\"type\":\"message_stop\"}\n\n"
        "data: this is after the end and ignored\n\n"), 0);
    CHECK_EQ_STR(r.out.p, "tool:t|n|{\"k\":1}\ndone\n");
    provider_parser_free(p);

    /* A callback that stops the parser: test_openai, on its stream. */
    buf_free(&r.out);
}

/* ---- request body --------------------------------------------------------------- */

/* max_tokens, system, tools and parameters; calls without text; no agent or history. */
static void test_request_body(void)
{
    json_t *b;
    /* max_tokens: the parameter beats the limit; without either Anthropic gets
     * a default and OpenAI none. Without system, tools or parameters, nothing of
     * them is sent. */
    json_t *a2 = json_loads("{\"model\":\"m\",\"parameters\":{\"max_tokens\":50},\"limits\":{\"maxTokens\":9}}", 0, NULL);
    json_t *a3 = json_loads("{\"model\":\"m\"}", 0, NULL);
    json_t *h = json_loads("[{\"role\":\"user\",\"content\":\"hi\"}]", 0, NULL);
    b = provider_request_body(PROVIDER_ANTHROPIC, a2, h);
    check_body(b, "{\"model\":\"m\",\"max_tokens\":50,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                  "\"stream\":true}", __LINE__);
    json_decref(b);
    b = provider_request_body(PROVIDER_ANTHROPIC, a3, h);
    check_body(b, "{\"model\":\"m\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                  "\"stream\":true}", __LINE__);
    json_decref(b);
    b = provider_request_body(PROVIDER_OPENAI, a3, h);
    check_body(b, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
                  "\"stream_options\":{\"include_usage\":true}}", __LINE__);
    json_decref(b);

    /* An assistant message with calls but no text sends null content to OpenAI
     * and no empty text block to Anthropic. */
    json_t *h2 = json_loads("[{\"role\":\"user\",\"content\":\"t?\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"toolCalls\":[{\"callId\":\"c1\",\"name\":\"now\"}]},"
        "{\"role\":\"tool\",\"callId\":\"c1\",\"content\":\"noon\"},"
        "{\"role\":\"tool\",\"callId\":\"c1\",\"content\":\"again\"},"
        "{\"role\":\"tool\",\"callId\":\"zz\",\"content\":\"stray\"}]", 0, NULL);
    b = provider_request_body(PROVIDER_OPENAI, a3, h2);
    check_body(b, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"t?\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
        "\"function\":{\"name\":\"now\",\"arguments\":\"{}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"noon\"}],\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true}}", __LINE__);
    json_decref(b);
    b = provider_request_body(PROVIDER_ANTHROPIC, a3, h2);
    check_body(b, "{\"model\":\"m\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\",\"content\":\"t?\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"now\",\"input\":{}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"c1\",\"content\":\"noon\"}]}],"
        "\"stream\":true}", __LINE__);
    json_decref(b);

    CHECK(provider_request_body(PROVIDER_OPENAI, NULL, h) == NULL);
    b = provider_request_body(PROVIDER_OPENAI, a3, NULL);
    CHECK(b && json_array_size(json_object_get(b, "messages")) == 0);
    json_decref(b);

    json_decref(h2);
    json_decref(h);
    json_decref(a3);
    json_decref(a2);
}

static void test_url_headers(void)
{
    char url[256];
    /* A base URL (NULL or "": the provider's own) and the request's URL. */
    static const struct {
        provider_kind kind;
        const char *base, *want;
    } urls[] = {
        {PROVIDER_ANTHROPIC, NULL, "https://api.anthropic.com/v1/messages"},
        {PROVIDER_OPENAI, "", "https://api.openai.com/v1/chat/completions"},
        {PROVIDER_OPENAI, "http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1/chat/completions"},
        {PROVIDER_ANTHROPIC, "http://proxy//", "http://proxy//v1/messages"},  /* only one '/' is stripped */
        /* The OpenAI SDK's habit: a base ending in a version segment gets the API's path. */
        {PROVIDER_OPENAI, "http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/chat/completions"},
        {PROVIDER_OPENAI, "https://gw.example/team/openai/v1/",
         "https://gw.example/team/openai/v1/chat/completions"},
        {PROVIDER_ANTHROPIC, "https://gw.example/anthropic/v1", "https://gw.example/anthropic/v1/messages"},
        {PROVIDER_OPENAI, "https://g.example/v1beta", "https://g.example/v1beta/chat/completions"},
        /* A prefix without a version (the Anthropic SDK's habit) gets /v1 as before. */
        {PROVIDER_ANTHROPIC, "https://gw.example/anthropic", "https://gw.example/anthropic/v1/messages"},
        {PROVIDER_OPENAI, "https://gw.example/vx1", "https://gw.example/vx1/v1/chat/completions"},
        {PROVIDER_OPENAI, "http://v1.example:8080",
         "http://v1.example:8080/v1/chat/completions"},     /* a host is no segment */
        /* The whole endpoint URL is used as is. */
        {PROVIDER_OPENAI, "https://g.example/v1beta/openai/chat/completions",
         "https://g.example/v1beta/openai/chat/completions"},
        {PROVIDER_ANTHROPIC, "https://gw.example/x/messages/", "https://gw.example/x/messages"},
        {PROVIDER_ANTHROPIC, "https://gw.example/chat/completions",
         "https://gw.example/chat/completions/v1/messages"},
    };
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        provider_request_url(urls[i].kind, urls[i].base, url, sizeof url);
        if (!CHECK_EQ_STR(url, urls[i].want)) fprintf(stderr, "  base %s\n", urls[i].base ? urls[i].base : "(null)");
    }
    provider_request_url(PROVIDER_ANTHROPIC, NULL, url, 10);
    CHECK_EQ_STR(url, "https://a");

    buf_t h;
    buf_init(&h, 0);
    CHECK_EQ_INT(provider_request_headers(PROVIDER_ANTHROPIC, "sk-ant-1", &h), 0);
    CHECK_EQ_STR(h.p, "x-api-key: sk-ant-1\nanthropic-version: 2023-06-01\nAccept: text/event-stream\n");
    buf_reset(&h);
    CHECK_EQ_INT(provider_request_headers(PROVIDER_OPENAI, "sk-1", &h), 0);
    CHECK_EQ_STR(h.p, "Authorization: Bearer sk-1\nAccept: text/event-stream\n");
    buf_reset(&h);
    CHECK_EQ_INT(provider_request_headers(PROVIDER_OPENAI, "", &h), 0);
    CHECK_EQ_STR(h.p, "Accept: text/event-stream\n");
    buf_reset(&h);
    CHECK_EQ_INT(provider_request_headers(PROVIDER_ANTHROPIC, NULL, &h), 0);
    CHECK_EQ_STR(h.p, "anthropic-version: 2023-06-01\nAccept: text/event-stream\n");
    /* A key with a line break is refused and the buffer left as it was. */
    CHECK_EQ_INT(provider_request_headers(PROVIDER_OPENAI, "k\r\nX-Evil: 1", &h), -1);
    CHECK_EQ_STR(h.p, "anthropic-version: 2023-06-01\nAccept: text/event-stream\n");
    buf_t small;
    buf_init(&small, 20);
    CHECK(provider_request_headers(PROVIDER_ANTHROPIC, "sk-ant-1", &small) == BUF_ETOOBIG);
    CHECK_EQ_UINT(small.len, 0);
    buf_free(&small);
    buf_free(&h);

    CHECK_EQ_INT(provider_kind_parse("anthropic"), PROVIDER_ANTHROPIC);
    CHECK_EQ_INT(provider_kind_parse("openai"), PROVIDER_OPENAI);
    CHECK_EQ_INT(provider_kind_parse("OpenAI"), -1);
    CHECK_EQ_INT(provider_kind_parse(NULL), -1);
}

/* A history that ends with the assistant's text (a reply continued): it is the last
 * message of either format, and only vLLM's style adds its flags. */
static void test_continue(void)
{
    json_t *a = json_loads("{\"model\":\"m\"}", 0, NULL);
    json_t *h = json_loads("[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"Hel\"}]", 0, NULL);
    json_t *b = provider_request_body(PROVIDER_ANTHROPIC, a, h);
    provider_body_continue(b, PROVIDER_CONT_PREFILL);
    check_body(b, "{\"model\":\"m\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                  "{\"role\":\"assistant\",\"content\":\"Hel\"}],\"stream\":true}", __LINE__);
    json_decref(b);
    b = provider_request_body(PROVIDER_OPENAI, a, h);
    provider_body_continue(b, PROVIDER_CONT_FINAL_MESSAGE);
    check_body(b, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                  "{\"role\":\"assistant\",\"content\":\"Hel\"}],\"stream\":true,"
                  "\"stream_options\":{\"include_usage\":true},\"continue_final_message\":true,"
                  "\"add_generation_prompt\":false}", __LINE__);
    json_decref(b);
    CHECK_EQ_INT(provider_cont_parse("prefill"), PROVIDER_CONT_PREFILL);
    CHECK_EQ_INT(provider_cont_parse("continue_final_message"), PROVIDER_CONT_FINAL_MESSAGE);
    CHECK_EQ_INT(provider_cont_parse("off"), PROVIDER_CONT_OFF);
    CHECK_EQ_INT(provider_cont_parse("on"), -1);
    CHECK_EQ_STR(provider_cont_name(PROVIDER_CONT_FINAL_MESSAGE), "continue_final_message");
    json_decref(a);
    json_decref(h);
}

int main(void)
{
    test_protocol_errors();
    test_request_body();
    test_url_headers();
    test_continue();
    return TEST_MAIN_END();
}

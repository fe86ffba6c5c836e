/* Unit tests for lib/openai.c (through lib/provider's parser and request body): the
 * Chat Completions stream fed every way, its error chunk, a loose server's stream,
 * every prefix, a callback that stops the parser, and a request's messages. */
#include "test_prov.h"

/* ---- OpenAI ------------------------------------------------------------------- */

/* Reasoning, text, two interleaved tool calls cut mid-token and mid-escape, the
 * usage chunk with empty choices, [DONE]. */
static const char openai_stream[] =
    ": OPENROUTER PROCESSING\n"
    "\n"
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"Thinking...\"},\"finish_reason\":null}],\"usage\":null}\n"
    "\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n"
    "\n"
    "data:{\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" w\xc3\xb6rld\"},\"finish_reason\":null}]}\n"
    "\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":null}]}\n"
    "\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n"
    "\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"loc\"}}]},\"finish_reason\":null}]}\n"
    "\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"search\",\"arguments\":\"{\\\"q\\\":\\\"a\\\\u00\"}}]},\"finish_reason\":null}]}\n"
    "\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"ation\\\":\\\"Paris\\\"}\"}}]},\"finish_reason\":null}]}\n"
    "\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"e9\\\"}\"}}]},\"finish_reason\":null}]}\n"
    "\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n"
    "\n"
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":31,\"completion_tokens\":42,\"total_tokens\":73}}\n"
    "\n"
    "data: [DONE]\n"
    "\n";

static const char openai_want[] =
    "thinking:Thinking...\n"
    "text:Hello\n"
    "text: w\xc3\xb6rld\n"
    "tool:call_a|get_weather|{\"location\":\"Paris\"}\n"
    "tool:call_b|search|{\"q\":\"a\\u00e9\"}\n"
    "stop:tool_calls\n"
    "usage:31/42\n"
    "done\n";

/* An error chunk after data; the server then closes. */
static const char openai_error_stream[] =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n"
    "\n"
    "data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"rate_limit_error\",\"code\":\"rate_limit\"}}\n"
    "\n";

static const char openai_error_want[] =
    "text:Hi\n"
    "error:rate_limit_error|Rate limit reached\n";

/* A call with no arguments, ended by [DONE] with no finish_reason, and no index
 * (as some servers send), plus a "reasoning" delta and a final line without its
 * blank line. */
static const char openai_loose_stream[] =
    "data: {\"choices\":[{\"delta\":{\"reasoning\":\"hmm\"}}]}\n"
    "\n"
    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"c9\",\"function\":{\"name\":\"now\"}}]}}]}\n"
    "\n"
    "data: [DONE]";

static const char openai_loose_want[] =
    "thinking:hmm\n"
    "tool:c9|now|{}\n"
    "done\n";

static void test_streams(void)
{
    check_stream(PROVIDER_OPENAI, "openai", openai_stream, openai_want, 0, 0);
    check_stream(PROVIDER_OPENAI, "openai-error", openai_error_stream, openai_error_want, 0, -1);
    check_stream(PROVIDER_OPENAI, "openai-loose", openai_loose_stream, openai_loose_want, 0, 0);
}

static void test_cut_off(void)
{
    check_prefixes(PROVIDER_OPENAI, openai_stream, openai_want, "data: [DONE]");
}

/* The callback's non-zero value stops the parser and sticks. */
static void test_callback_stops(void)
{
    rec stop = {.stop_at = 2};
    buf_init(&stop.out, 0);
    provider_parser *p = provider_parser_new(PROVIDER_OPENAI, on_event, &stop);
    CHECK_EQ_INT(provider_feed(p, openai_stream, strlen(openai_stream)), 7);
    CHECK_EQ_INT(provider_feed(p, "data: [DONE]\n\n", 14), 7);
    CHECK_EQ_INT(provider_finish(p), -1);
    CHECK_EQ_STR(stop.out.p, "thinking:Thinking...\ntext:Hello\n");
    provider_parser_free(p);
    buf_free(&stop.out);
}

static const char openai_body_want[] =
    "{\"model\":\"claude-x\",\"max_tokens\":1000,\"messages\":["
    "{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":\"Let me check.\",\"tool_calls\":["
    "{\"id\":\"toolu_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
    "{\"id\":\"toolu_2\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{\\\"tz\\\":\\\"CET\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"toolu_1\",\"content\":\"18C, cloudy\"},"
    "{\"role\":\"tool\",\"tool_call_id\":\"toolu_2\",\"content\":\"{\\\"time\\\":\\\"12:00\\\"}\"},"
    "{\"role\":\"user\",\"content\":\"(I am in a hurry)\"},"
    "{\"role\":\"assistant\",\"content\":\"18C at noon.\"},"
    "{\"role\":\"user\",\"content\":\"And tomorrow?\"},"
    "{\"role\":\"user\",\"content\":\"Actually, Lyon.\"},"
    "{\"role\":\"assistant\",\"content\":\"In Lyon it\"},"
    "{\"role\":\"user\",\"content\":\"Go on\"},"
    "{\"role\":\"user\",\"content\":\"Stop.\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather for a city\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\"}}}],"
    "\"temperature\":0.5,\"top_p\":0.9,\"stop\":[\"END\"],\"stream\":true,"
    "\"stream_options\":{\"include_usage\":true}}";


int main(void)
{
    test_streams();
    test_cut_off();
    test_callback_stops();
    /* The agent and history of test_prov.h as a request body. */
    check_request_body(PROVIDER_OPENAI, openai_body_want, __LINE__);
    return TEST_MAIN_END();
}

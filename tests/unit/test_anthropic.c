/* Unit tests for lib/anthropic.c (through lib/provider's parser and request body):
 * the Anthropic Messages stream fed every way, its error event, every prefix and a
 * cut inside a tool call, and a request's messages. */
#include "test_prov.h"

/* ---- Anthropic ---------------------------------------------------------------- */

/* Thinking, text (one delta in two data lines, one without the space after
 * "data:"), two tool calls whose arguments are cut mid-token and mid-escape, a
 * comment, pings, usage, stop. */
static const char anthropic_stream[] =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\","
    "\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"stop_reason\":null,"
    "\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n"
    "\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n"
    "\n"
    "event: ping\n"
    "data: {\"type\": \"ping\"}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me think\"}}\n"
    "\n"
    ": a comment, ignored\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIM\"}}\n"
    "\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n"
    "\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello, \"}}\n"
    "\n"
    "event: content_block_delta\n"
    "data:{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"w\xc3\xb6rld \\u2603\"}}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":1,\n"
    "data: \"delta\":{\"type\":\"text_delta\",\"text\":\"!\\n\"}}\n"
    "\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":1}\n"
    "\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"get_weather\",\"input\":{}}}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"locat\"}}\n"
    "\n"
    "event: ping\n"
    "data: {\"type\": \"ping\"}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ion\\\": \\\"Paris\\\\u00\"}}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"e9\\\"}\"}}\n"
    "\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":2}\n"
    "\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_02\",\"name\":\"search\",\"input\":{}}}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\":[1,2.\"}}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"5e3,tr\"}}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ue]}\"}}\n"
    "\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":3}\n"
    "\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}\n"
    "\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n"
    "\n";

static const char anthropic_want[] =
    "usage:25/1\n"
    "thinking:Let me think\n"
    "text:Hello, \n"
    "text:w\xc3\xb6rld \xe2\x98\x83\n"
    "text:!\\n\n"
    "tool:toolu_01|get_weather|{\"location\": \"Paris\\u00e9\"}\n"
    "tool:toolu_02|search|{\"q\":[1,2.5e3,true]}\n"
    "usage:25/89\n"
    "stop:tool_use\n"
    "done\n";

/* An error event after some text, and then the connection closes. */
static const char anthropic_error_stream[] =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n"
    "\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"partial\"}}\n"
    "\n"
    "event: error\n"
    "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n"
    "\n";

static const char anthropic_error_want[] =
    "usage:10/1\n"
    "text:partial\n"
    "error:overloaded_error|Overloaded\n";

static void test_streams(void)
{
    check_stream(PROVIDER_ANTHROPIC, "anthropic", anthropic_stream, anthropic_want, 0, 0);
    check_stream(PROVIDER_ANTHROPIC, "anthropic-error", anthropic_error_stream,
                 anthropic_error_want, 0, -1);
}

static void test_cut_off(void)
{
    check_prefixes(PROVIDER_ANTHROPIC, anthropic_stream, anthropic_want,
                   "data: {\"type\":\"message_stop\"}");

    /* Cut inside a tool call: the call is not delivered. */
    const char *cut = strstr(anthropic_stream, "\"ion\\\"");
    buf_t out;
    run_result r = run(PROVIDER_ANTHROPIC, anthropic_stream, (size_t)(cut - anthropic_stream), 0, 0, &out);
    CHECK_EQ_INT(r.finish_rc, -1);
    CHECK(out.p && !strstr(out.p, "tool:"));
    buf_free(&out);
}

static const char anthropic_body_want[] =
    "{\"model\":\"claude-x\",\"max_tokens\":1000,\"system\":\"Be brief.\",\"messages\":["
    "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Let me check.\"},"
    "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":\"Paris\"}},"
    "{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"get_time\",\"input\":{\"tz\":\"CET\"}}]},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"18C, cloudy\"},"
    "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_2\",\"content\":\"{\\\"time\\\":\\\"12:00\\\"}\"},"
    "{\"type\":\"text\",\"text\":\"(I am in a hurry)\"}]},"
    "{\"role\":\"assistant\",\"content\":\"18C at noon.\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"And tomorrow?\"},"
    "{\"type\":\"text\",\"text\":\"Actually, Lyon.\"}]},"
    "{\"role\":\"assistant\",\"content\":\"In Lyon it\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Go on\"},{\"type\":\"text\",\"text\":\"Stop.\"}]}],"
    "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather for a city\","
    "\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}},"
    "{\"name\":\"get_time\",\"input_schema\":{\"type\":\"object\"}}],"
    "\"temperature\":0.5,\"top_p\":0.9,\"stop_sequences\":[\"END\"],\"stream\":true}";


int main(void)
{
    test_streams();
    test_cut_off();
    /* The agent and history of test_prov.h as a request body. */
    check_request_body(PROVIDER_ANTHROPIC, anthropic_body_want, __LINE__);
    return TEST_MAIN_END();
}

/* Unit tests for lib/provider.c: both stream parsers fed whole, byte by byte and in
 * pseudo-random chunks (with \n, \r\n and \r line endings), cut-off and over-long
 * streams, the request bodies, URL and headers, retry delays and cost. */
#include "provider.h"

#include <stdlib.h>
#include <string.h>

#include "test.h"

/* ---- recording events --------------------------------------------------------- */

/* Each event becomes one line of text, so that a whole stream's events compare as
 * one string and a prefix of the events is a prefix of the string. */
typedef struct rec {
    buf_t out;
    int stop_at;    /* return 7 from the callback at this event (1-based); 0: never */
    int n;
} rec;

static int on_event(void *ud, const provider_event *ev)
{
    rec *r = ud;
    buf_t *b = &r->out;
    switch (ev->kind) {
    case PEV_TEXT:
    case PEV_THINKING:
        buf_puts(b, ev->kind == PEV_TEXT ? "text:" : "thinking:");
        buf_json_escape(b, ev->text, ev->len);
        break;
    case PEV_TOOL_CALL:
        buf_printf(b, "tool:%s|%s|%s", ev->id, ev->name, ev->args);
        break;
    case PEV_USAGE:
        buf_printf(b, "usage:%jd/%jd", (intmax_t)ev->input_tokens, (intmax_t)ev->output_tokens);
        break;
    case PEV_STOP:
        buf_printf(b, "stop:%s", ev->stop_reason);
        break;
    case PEV_ERROR:
        buf_printf(b, "error:%s|", ev->error_type);
        buf_json_escape(b, ev->text, ev->len);
        break;
    case PEV_DONE:
        buf_puts(b, "done");
        break;
    }
    buf_puts(b, "\n");
    return ++r->n == r->stop_at ? 7 : 0;
}

typedef struct run_result {
    int feed_rc;    /* the first non-zero provider_feed result, or 0 */
    int finish_rc;
} run_result;

/* A tiny deterministic PRNG so that every chunking is reproducible. */
static uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* Feed s in chunks: chunk 0 means whole, 1 byte by byte, otherwise random sizes
 * 1..chunk drawn from seed. Events go to out. */
static run_result run(provider_kind kind, const char *s, size_t n, size_t chunk, uint32_t seed,
                      buf_t *out)
{
    rec r = {.stop_at = 0};
    buf_init(&r.out, 0);
    run_result res = {0, 0};
    provider_parser *p = provider_parser_new(kind, on_event, &r);
    size_t i = 0;
    while (i < n) {
        size_t k = n - i;
        if (chunk == 1) k = 1;
        else if (chunk > 1 && k > 1) k = 1 + xorshift(&seed) % (chunk < k ? chunk : k);
        int rc = provider_feed(p, s + i, k);
        if (rc && !res.feed_rc) res.feed_rc = rc;
        i += k;
    }
    res.finish_rc = provider_finish(p);
    provider_parser_free(p);
    *out = r.out;
    return res;
}

/* s with every "\n" replaced by eol. Caller frees. */
static char *with_eol(const char *s, const char *eol, size_t *n)
{
    buf_t b;
    buf_init(&b, 0);
    for (; *s; s++) {
        if (*s == '\n') buf_puts(&b, eol);
        else buf_append(&b, s, 1);
    }
    *n = b.len;
    return b.p;
}

/* Run s every way and check each gives want with the given feed/finish results. */
static void check_stream(provider_kind kind, const char *name, const char *s, const char *want,
                         int want_feed, int want_finish)
{
    static const char *const eols[] = {"\n", "\r\n", "\r"};
    for (size_t e = 0; e < 3; e++) {
        size_t n;
        char *src = with_eol(s, eols[e], &n);
        /* Whole and byte by byte with \n; random chunks with every line ending. */
        static const size_t chunks[] = {0, 1, 2, 3, 7, 16, 64, 500};
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            if (e && chunks[c] < 2) continue;
            for (uint32_t seed = 1; seed <= (chunks[c] > 1 ? 5u : 1u); seed++) {
                buf_t out;
                run_result r = run(kind, src, n, chunks[c], seed * 2654435761u, &out);
                int ok = CHECK_EQ_STR(out.p ? out.p : "", want);
                ok &= CHECK_EQ_INT(r.feed_rc, want_feed);
                ok &= CHECK_EQ_INT(r.finish_rc, want_finish);
                if (!ok)
                    fprintf(stderr, "  (stream %s, eol %zu, chunk %zu, seed %u)\n", name, e,
                            chunks[c], seed);
                buf_free(&out);
            }
        }
        free(src);
    }
}

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
    check_stream(PROVIDER_ANTHROPIC, "anthropic", anthropic_stream, anthropic_want, 0, 0);
    check_stream(PROVIDER_ANTHROPIC, "anthropic-error", anthropic_error_stream,
                 anthropic_error_want, 0, -1);
    check_stream(PROVIDER_OPENAI, "openai", openai_stream, openai_want, 0, 0);
    check_stream(PROVIDER_OPENAI, "openai-error", openai_error_stream, openai_error_want, 0, -1);
    check_stream(PROVIDER_OPENAI, "openai-loose", openai_loose_stream, openai_loose_want, 0, 0);
}

/* Every prefix of a stream: the events are a prefix of the full stream's (a tool
 * call is never delivered half-assembled), and finish says "cut off" until the
 * final event has been read. */
static void check_prefixes(provider_kind kind, const char *s, const char *want, const char *last)
{
    size_t n = strlen(s);
    size_t end = (size_t)(strstr(s, last) - s) + strlen(last);
    unsigned bad = 0;
    for (size_t len = 0; len < n; len++) {
        buf_t out;
        run_result r = run(kind, s, len, 0, 0, &out);
        const char *got = out.p ? out.p : "";
        size_t gl = strlen(got);
        int ok = r.feed_rc == 0 && strncmp(got, want, gl) == 0 && (gl == 0 || got[gl - 1] == '\n');
        ok &= r.finish_rc == (len >= end ? 0 : -1);
        if (!ok && bad++ < 3)
            fprintf(stderr, "prefix %zu: feed %d finish %d events:\n%s", len, r.feed_rc,
                    r.finish_rc, got);
        buf_free(&out);
    }
    CHECK_EQ_UINT(bad, 0);
}

static void test_cut_off(void)
{
    check_prefixes(PROVIDER_ANTHROPIC, anthropic_stream, anthropic_want,
                   "data: {\"type\":\"message_stop\"}");
    check_prefixes(PROVIDER_OPENAI, openai_stream, openai_want, "data: [DONE]");

    /* Cut inside a tool call: the call is not delivered. */
    const char *cut = strstr(anthropic_stream, "\"ion\\\"");
    buf_t out;
    run_result r = run(PROVIDER_ANTHROPIC, anthropic_stream, (size_t)(cut - anthropic_stream), 0, 0, &out);
    CHECK_EQ_INT(r.finish_rc, -1);
    CHECK(out.p && !strstr(out.p, "tool:"));
    buf_free(&out);
}

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

    /* The callback's non-zero value stops the parser and sticks. */
    rec stop = {.stop_at = 2};
    buf_init(&stop.out, 0);
    p = provider_parser_new(PROVIDER_OPENAI, on_event, &stop);
    CHECK_EQ_INT(feed_str(p, openai_stream), 7);
    CHECK_EQ_INT(feed_str(p, "data: [DONE]\n\n"), 7);
    CHECK_EQ_INT(provider_finish(p), -1);
    CHECK_EQ_STR(stop.out.p, "thinking:Thinking...\ntext:Hello\n");
    provider_parser_free(p);
    buf_free(&stop.out);
    buf_free(&r.out);
}

/* ---- request body --------------------------------------------------------------- */

static const char agent_json[] =
    "{\"name\":\"weather\",\"provider\":\"anthropic\",\"model\":\"claude-x\",\"system\":\"Be brief.\","
    "\"parameters\":{\"temperature\":0.5,\"top_p\":0.9,\"stop\":[\"END\"]},"
    "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather for a city\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}},"
    "{\"name\":\"get_time\"}],"
    "\"limits\":{\"maxTokens\":1000}}";

/* Tool calls and results with a background message landing between them, two
 * user messages in a row around a reply interrupted before it said anything, a
 * reply interrupted midway, and one interrupted after calling a tool that never
 * ran. */
static const char history_json[] =
    "[{\"role\":\"user\",\"content\":\"Weather in Paris?\",\"offset\":\"1\"},"
    "{\"role\":\"assistant\",\"content\":\"Let me check.\",\"requestId\":\"r1\",\"thinking\":\"hm\","
    "\"toolCalls\":[{\"callId\":\"toolu_1\",\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}},"
    "{\"callId\":\"toolu_2\",\"name\":\"get_time\",\"arguments\":\"{\\\"tz\\\":\\\"CET\\\"}\"}]},"
    "{\"role\":\"user\",\"content\":\"(I am in a hurry)\",\"background\":true},"
    "{\"role\":\"tool\",\"callId\":\"toolu_1\",\"content\":\"18C, cloudy\"},"
    "{\"role\":\"tool\",\"callId\":\"toolu_2\",\"content\":{\"time\":\"12:00\"}},"
    "{\"role\":\"assistant\",\"content\":\"18C at noon.\",\"requestId\":\"r2\"},"
    "{\"role\":\"user\",\"content\":\"And tomorrow?\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"requestId\":\"r3\",\"interrupted\":true},"
    "{\"role\":\"user\",\"content\":\"Actually, Lyon.\"},"
    "{\"role\":\"assistant\",\"content\":\"In Lyon it\",\"requestId\":\"r4\",\"interrupted\":true},"
    "{\"role\":\"user\",\"content\":\"Go on\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"requestId\":\"r5\",\"interrupted\":true,"
    "\"toolCalls\":[{\"callId\":\"toolu_9\",\"name\":\"get_time\",\"arguments\":{}}]},"
    "{\"role\":\"user\",\"content\":\"Stop.\"}]";

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

/* Compare a body against the expected JSON text, printing both on a mismatch. */
static void check_body(json_t *got, const char *want_text, int line)
{
    json_t *want = json_loads(want_text, 0, NULL);
    if (!test_note(want != NULL, __FILE__, line, "expected body parses")) return;
    if (!test_note(got && json_equal(got, want), __FILE__, line, "request body")) {
        char *a = got ? json_dumps(got, JSON_INDENT(1)) : NULL, *b = json_dumps(want, JSON_INDENT(1));
        fprintf(stderr, "got:\n%s\nwant:\n%s\n", a ? a : "NULL", b);
        free(a);
        free(b);
    }
    json_decref(want);
}

static void test_request_body(void)
{
    json_t *agent = json_loads(agent_json, 0, NULL);
    json_t *hist = json_loads(history_json, 0, NULL);
    if (!CHECK(agent && hist)) return;
    json_t *hist_before = json_deep_copy(hist);

    json_t *b = provider_request_body(PROVIDER_ANTHROPIC, agent, hist);
    check_body(b, anthropic_body_want, __LINE__);
    json_decref(b);
    b = provider_request_body(PROVIDER_OPENAI, agent, hist);
    check_body(b, openai_body_want, __LINE__);
    json_decref(b);
    CHECK(json_equal(hist, hist_before));   /* the caller's history is untouched */

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
    json_decref(hist_before);
    json_decref(hist);
    json_decref(agent);
}

static void test_url_headers(void)
{
    char url[256];
    provider_request_url(PROVIDER_ANTHROPIC, NULL, url, sizeof url);
    CHECK_EQ_STR(url, "https://api.anthropic.com/v1/messages");
    provider_request_url(PROVIDER_OPENAI, "", url, sizeof url);
    CHECK_EQ_STR(url, "https://api.openai.com/v1/chat/completions");
    provider_request_url(PROVIDER_OPENAI, "http://127.0.0.1:8080/", url, sizeof url);
    CHECK_EQ_STR(url, "http://127.0.0.1:8080/v1/chat/completions");
    provider_request_url(PROVIDER_ANTHROPIC, "http://proxy//", url, sizeof url);
    CHECK_EQ_STR(url, "http://proxy//v1/messages");  /* only one '/' is stripped */
    /* The OpenAI SDK's habit: a base ending in a version segment gets the API's path. */
    provider_request_url(PROVIDER_OPENAI, "http://127.0.0.1:8080/v1", url, sizeof url);
    CHECK_EQ_STR(url, "http://127.0.0.1:8080/v1/chat/completions");
    provider_request_url(PROVIDER_OPENAI, "https://gw.example/team/openai/v1/", url, sizeof url);
    CHECK_EQ_STR(url, "https://gw.example/team/openai/v1/chat/completions");
    provider_request_url(PROVIDER_ANTHROPIC, "https://gw.example/anthropic/v1", url, sizeof url);
    CHECK_EQ_STR(url, "https://gw.example/anthropic/v1/messages");
    provider_request_url(PROVIDER_OPENAI, "https://g.example/v1beta", url, sizeof url);
    CHECK_EQ_STR(url, "https://g.example/v1beta/chat/completions");
    /* A prefix without a version (the Anthropic SDK's habit) gets /v1 as before. */
    provider_request_url(PROVIDER_ANTHROPIC, "https://gw.example/anthropic", url, sizeof url);
    CHECK_EQ_STR(url, "https://gw.example/anthropic/v1/messages");
    provider_request_url(PROVIDER_OPENAI, "https://gw.example/vx1", url, sizeof url);
    CHECK_EQ_STR(url, "https://gw.example/vx1/v1/chat/completions");
    provider_request_url(PROVIDER_OPENAI, "http://v1.example:8080", url, sizeof url);
    CHECK_EQ_STR(url, "http://v1.example:8080/v1/chat/completions");  /* a host is no segment */
    /* The whole endpoint URL is used as is. */
    provider_request_url(PROVIDER_OPENAI, "https://g.example/v1beta/openai/chat/completions", url, sizeof url);
    CHECK_EQ_STR(url, "https://g.example/v1beta/openai/chat/completions");
    provider_request_url(PROVIDER_ANTHROPIC, "https://gw.example/x/messages/", url, sizeof url);
    CHECK_EQ_STR(url, "https://gw.example/x/messages");
    provider_request_url(PROVIDER_ANTHROPIC, "https://gw.example/chat/completions", url, sizeof url);
    CHECK_EQ_STR(url, "https://gw.example/chat/completions/v1/messages");
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

int main(void)
{
    test_streams();
    test_cut_off();
    test_protocol_errors();
    test_request_body();
    test_url_headers();
    return TEST_MAIN_END();
}

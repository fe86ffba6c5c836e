/* Unit tests for lib/chunkscan.c: the text chunks it reads without a tree, the ones
 * it leaves to jansson, and, for every chunk here, the provider parser's events with
 * the scanner and without it (p->generic) compared byte for byte: quotes,
 * backslashes, control characters, NULs, invalid UTF-8, 4-byte UTF-8 raw and as
 * surrogate pairs, lone surrogates, keys in any order, duplicates. */
#include <stdlib.h>
#include <string.h>

#include "chunkscan.h"
#include "provider.h"
#include "test.h"

/* Each event, its kind and raw bytes length-prefixed: runs compare exactly. */
static int record(void *ud, const provider_event *ev)
{
    buf_t *b = ud;
    buf_printf(b, "%d:%zu:", (int)ev->kind, ev->len);
    if (ev->text) buf_append(b, ev->text, ev->len);
    buf_printf(b, "|%s|%s|%s|%jd|%jd|%s|%s\n", ev->id ? ev->id : "-", ev->name ? ev->name : "-",
               ev->args ? ev->args : "-", (intmax_t)ev->input_tokens, (intmax_t)ev->output_tokens,
               ev->stop_reason ? ev->stop_reason : "-", ev->error_type ? ev->error_type : "-");
    return 0;
}

/* The events of one SSE event whose data is json[0..n), and the feed's result. */
static int events_of(provider_kind kind, int generic, const char *json, size_t n, buf_t *out)
{
    provider_parser *p = provider_parser_new(kind, record, out);
    p->generic = generic;
    int rc = provider_feed(p, "data: ", 6);
    if (!rc) rc = provider_feed(p, json, n);
    if (!rc) rc = provider_feed(p, "\n\n", 2);
    buf_printf(out, "rc=%d\n", rc);
    provider_parser_free(p);
    return rc;
}

/* Both paths give the same bytes; returns whether the scanner took the chunk. */
static int same(provider_kind kind, const char *json, size_t n, const char *file, int line)
{
    buf_t a, b, scratch;
    buf_init(&a, 0);
    buf_init(&b, 0);
    buf_init(&scratch, 0);
    events_of(kind, 0, json, n, &a);
    events_of(kind, 1, json, n, &b);
    int ok = a.len == b.len && (a.len == 0 || !memcmp(a.p, b.p, a.len));
    if (!ok) fprintf(stderr, "%s:%d: scanner %.*s\n     jansson %.*s\n", file, line, (int)a.len, a.p, (int)b.len, b.p);
    test_note(ok, file, line, "the scanner's events are jansson's");
    chunkscan_text t;
    int took = chunkscan_text_of(kind == PROVIDER_OPENAI, json, n, &scratch, &t);
    buf_free(&a);
    buf_free(&b);
    buf_free(&scratch);
    return took;
}

#define SAME(kind, lit) same(kind, lit, sizeof lit - 1, __FILE__, __LINE__)
#define ANT(text) "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" text "\"}}"
#define OAI(text) "{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1732000000,\"model\":\"m\"," \
                  "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" text "\"},\"finish_reason\":null}],\"usage\":null}"

/* Text pieces the scanner takes, in both formats: every byte as jansson gives it. */
static void test_text_bytes(void)
{
#define BOTH(text) \
    do { \
        CHECK(SAME(PROVIDER_ANTHROPIC, ANT(text)) == 1); \
        CHECK(SAME(PROVIDER_OPENAI, OAI(text)) == 1); \
    } while (0)
    BOTH("Hello");
    BOTH("");
    BOTH("say \\\"hi\\\"");
    BOTH("back\\\\slash \\/ slash");
    BOTH("\\b\\f\\n\\r\\t");
    BOTH("\\u0001\\u001f\\u007f");
    BOTH("nul\\u0000in the middle\\u0000");
    BOTH("\\u00e9\\u20ac\\uFFFD");
    BOTH("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 raw");
    BOTH("\\ud83d\\ude00 \\uD83D\\uDE00 pair");
    BOTH("\xf4\x8f\xbf\xbf max");
    BOTH("\xe2\x80\xa8 line separator");
#undef BOTH
    /* Thinking, keys in any order, whitespace everywhere, the index anywhere. */
    CHECK(SAME(PROVIDER_ANTHROPIC, "{\"delta\":{\"thinking\":\"hm \\\"\",\"type\":\"thinking_delta\"},"
                                   "\"type\":\"content_block_delta\",\"index\":3}") == 1);
    CHECK(SAME(PROVIDER_ANTHROPIC, " {\n \"type\" : \"content_block_delta\" ,\t\"delta\" : { \"type\" : "
                                   "\"text_delta\" , \"text\" : \"a\" } , \"index\" : -0 } ") == 1);
    CHECK(SAME(PROVIDER_OPENAI, "{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":null,\"refusal\":null},"
                                "\"logprobs\":null,\"finish_reason\":null,\"index\":0}],\"system_fingerprint\":null}") == 1);
    CHECK(SAME(PROVIDER_OPENAI, "{\"choices\":[{\"delta\":{}}],\"obfuscation\":\"x\",\"error\":null}") == 1);
}

/* Chunks left to jansson: each still gives what jansson's path gives. */
static void test_left_to_jansson(void)
{
    const char *ant[] = {
        ANT("bad \xff byte"), ANT("overlong \xc0\x80"), ANT("surrogate \xed\xa0\x80"), ANT("cut \xf0\x9f\x98"),
        ANT("lone \\ud800"), ANT("lone \\udc00"), ANT("high then not low \\ud83d\\u0041"),
        ANT("bad escape \\x"), ANT("short \\u12"), ANT("raw\ttab"), ANT("raw\nnewline"),
        "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}",
        "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"a\",\"text\":\"b\"}}",
        "{\"type\":\"content_block_delta\",\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}",
        "{\"t\\u0079pe\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}",
        "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":null}}",
        "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"},}",
        "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}} x",
        "{\"type\":\"content_block_delta\",\"index\":1.5,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}",
        "{\"type\":\"content_block_delta\",\"index\":01,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}",
        "{\"type\":\"content_block_delta\",\"index\":99999999999999999999,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}",
        "{\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}",
        "{\"type\":\"message_stop\"}",
        "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"",
    };
    for (size_t i = 0; i < sizeof ant / sizeof *ant; i++)
        CHECK(same(PROVIDER_ANTHROPIC, ant[i], strlen(ant[i]), __FILE__, __LINE__) == 0);
    const char *oai[] = {
        OAI("bad \xff byte"), OAI("lone \\ud800"),
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}",
        "{\"choices\":[{\"index\":1,\"delta\":{\"content\":\"a\"}}]}",
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}},{\"index\":1,\"delta\":{\"content\":\"b\"}}]}",
        "{\"choices\":[]}",
        "{\"choices\":[{\"delta\":{\"reasoning_content\":\"r\",\"content\":\"a\"}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[]}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}",
        "{\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"error\":{\"message\":\"x\"}}",
        "{\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"object\":\"error\",\"message\":\"x\"}",
        "{\"choices\":[{\"delta\":{\"content\":\"a\",\"content\":\"b\"}}]}",
        "{\"usage\":null}",
        "[{\"choices\":[]}]",
    };
    for (size_t i = 0; i < sizeof oai / sizeof *oai; i++)
        CHECK(same(PROVIDER_OPENAI, oai[i], strlen(oai[i]), __FILE__, __LINE__) == 0);
}

/* Every byte value in a text, raw and escaped: the two paths agree on each. */
static void test_every_byte(void)
{
    char json[256];
    for (int c = 0; c < 256; c++) {
        int n = snprintf(json, sizeof json, "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"<%c>\"}}", c);
        same(PROVIDER_ANTHROPIC, json, (size_t)n, __FILE__, __LINE__);
        n = snprintf(json, sizeof json, "{\"choices\":[{\"delta\":{\"content\":\"\\u%04x<\\%c>\"}}]}", c, c);
        same(PROVIDER_OPENAI, json, (size_t)n, __FILE__, __LINE__);
    }
    /* A NUL byte raw in the data (not JSON): both refuse it. */
    static const char nul[] = "{\"choices\":[{\"delta\":{\"content\":\"a\0b\"}}]}";
    CHECK(same(PROVIDER_OPENAI, nul, sizeof nul - 1, __FILE__, __LINE__) == 0);
}

/* A text that holds no escape is read where it lies; one with escapes is decoded. */
static void test_no_copy(void)
{
    buf_t scratch;
    buf_init(&scratch, 0);
    chunkscan_text t;
    static const char plain[] = ANT("plain");
    CHECK_EQ_INT(chunkscan_text_of(0, plain, sizeof plain - 1, &scratch, &t), 1);
    CHECK(t.text > plain && t.text < plain + sizeof plain && t.len == 5 && !memcmp(t.text, "plain", 5));
    static const char esc[] = OAI("a\\u0000\\ud83d\\ude00");
    CHECK_EQ_INT(chunkscan_text_of(1, esc, sizeof esc - 1, &scratch, &t), 1);
    CHECK(t.text == scratch.p && t.len == 6 && !memcmp(t.text, "a\0\xf0\x9f\x98\x80", 6) && !t.thinking);
    buf_free(&scratch);
}

int main(void)
{
    test_text_bytes();
    test_left_to_jansson();
    test_every_byte();
    test_no_copy();
    return TEST_MAIN_END();
}

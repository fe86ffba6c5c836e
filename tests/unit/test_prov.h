/* Shared by the provider tests (test_provider, test_anthropic, test_openai): a
 * stream's events as lines of text, fed whole, byte by byte and in pseudo-random
 * chunks with every line ending; every prefix of a stream; a request body compared
 * with the JSON expected; the agent and history the request bodies are made of. */
#ifndef DSTREAM_TEST_PROV_H
#define DSTREAM_TEST_PROV_H

#include <stdlib.h>
#include <string.h>

#include "provider.h"
#include "test.h"

/* ---- recording events --------------------------------------------------------- */

/* Each event becomes one line of text, so that a whole stream's events compare as
 * one string and a prefix of the events is a prefix of the string. */
typedef struct rec {
    buf_t out;
    int stop_at;    /* return 7 from the callback at this event (1-based); 0: never */
    int n;
} rec;

static inline int on_event(void *ud, const provider_event *ev)
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
static inline uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* Feed s in chunks: chunk 0 means whole, 1 byte by byte, otherwise random sizes
 * 1..chunk drawn from seed. Events go to out. */
static inline run_result run(provider_kind kind, const char *s, size_t n, size_t chunk, uint32_t seed,
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
static inline char *with_eol(const char *s, const char *eol, size_t *n)
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
static inline void check_stream(provider_kind kind, const char *name, const char *s, const char *want,
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

/* Every prefix of a stream: the events are a prefix of the full stream's (a tool
 * call is never delivered half-assembled), and finish says "cut off" until the
 * final event has been read. */
static inline void check_prefixes(provider_kind kind, const char *s, const char *want, const char *last)
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

/* ---- request body --------------------------------------------------------------- */

__attribute__((unused)) static const char agent_json[] =
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
__attribute__((unused)) static const char history_json[] =
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

/* Compare a body against the expected JSON text, printing both on a mismatch. */
static inline void check_body(json_t *got, const char *want_text, int line)
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

/* The agent and history above as kind's request body, against want_text; the
 * caller's history is left untouched. */
static inline void check_request_body(provider_kind kind, const char *want_text, int line)
{
    json_t *agent = json_loads(agent_json, 0, NULL);
    json_t *hist = json_loads(history_json, 0, NULL);
    if (test_note(agent && hist, __FILE__, line, "agent and history parse")) {
        json_t *hist_before = json_deep_copy(hist);
        json_t *b = provider_request_body(kind, agent, hist);
        check_body(b, want_text, line);
        json_decref(b);
        test_note(json_equal(hist, hist_before), __FILE__, line, "history untouched");
        json_decref(hist_before);
    }
    json_decref(hist);
    json_decref(agent);
}

#endif

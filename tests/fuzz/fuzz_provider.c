/* libFuzzer harness for the stream parsers of lib/provider.c.
 *
 * Input: byte 0 says how many chunk-size bytes follow (0..7); those bytes, cycled,
 * give the sizes (1..256) of the pieces the rest is fed in (none: one byte at a
 * time). The rest is the response body, given to both parsers (Anthropic and
 * OpenAI), each fed once whole and once in those pieces.
 *
 * Invariants checked on every input:
 *  - how the body is cut changes nothing: the same events, the same provider_feed
 *    result and the same provider_finish result;
 *  - provider_feed returns only 0 or -1 (the callback never stops it here), and a
 *    parser that failed stays failed;
 *  - every event is well formed: text pieces are non-empty, a tool call has an id,
 *    a name and arguments that are JSON, token counts are not negative, stop and
 *    error events name their reason, and nothing follows PEV_DONE;
 *  - provider_finish returns 0 exactly when PEV_DONE was delivered. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "provider.h"

#define REQUIRE(cond) \
    do { \
        if (!(cond)) abort(); \
    } while (0)

typedef struct rec {
    buf_t out;      /* the events, serialized, to compare runs */
    int done;
} rec;

static int on_event(void *ud, const provider_event *ev)
{
    rec *r = ud;
    REQUIRE(!r->done);
    switch (ev->kind) {
    case PEV_TEXT:
    case PEV_THINKING:
        REQUIRE(ev->text && ev->len > 0);
        break;
    case PEV_TOOL_CALL:
        REQUIRE(ev->id && ev->name && ev->args);
        REQUIRE(json_validate(ev->args, strlen(ev->args), NULL) == 0);
        break;
    case PEV_USAGE:
        REQUIRE(ev->input_tokens >= 0 && ev->output_tokens >= 0);
        break;
    case PEV_STOP:
        REQUIRE(ev->stop_reason);
        break;
    case PEV_ERROR:
        REQUIRE(ev->error_type && ev->text);
        break;
    case PEV_DONE:
        r->done = 1;
        break;
    default:
        abort();
    }
    /* The kind, then every field, length-prefixed so that runs compare exactly. */
    REQUIRE(buf_printf(&r->out, "%d:%zu:", (int)ev->kind, ev->len) == 0);
    if (ev->text) REQUIRE(buf_append(&r->out, ev->text, ev->len) == 0);
    REQUIRE(buf_printf(&r->out, "|%s|%s|%s|%jd|%jd|%s|%s\n", ev->id ? ev->id : "-",
                       ev->name ? ev->name : "-", ev->args ? ev->args : "-",
                       (intmax_t)ev->input_tokens, (intmax_t)ev->output_tokens,
                       ev->stop_reason ? ev->stop_reason : "-",
                       ev->error_type ? ev->error_type : "-") == 0);
    return 0;
}

typedef struct result {
    int feed, finish, done;
} result;

/* Feed body in pieces whose sizes cycle through sizes[0..nsizes) (each byte + 1);
 * nsizes 0 feeds it whole, and sizes NULL one byte at a time. */
static result run(provider_kind kind, const uint8_t *body, size_t n, const uint8_t *sizes,
                  size_t nsizes, rec *r)
{
    result res = {0, 0, 0};
    provider_parser *p = provider_parser_new(kind, on_event, r);
    REQUIRE(p);
    size_t i = 0, k = 0;
    while (i < n) {
        size_t len = n - i;
        if (!sizes) len = 1;
        else if (nsizes) len = (size_t)sizes[k++ % nsizes] + 1;
        if (len > n - i) len = n - i;
        int rc = provider_feed(p, (const char *)body + i, len);
        REQUIRE(rc == 0 || rc == -1);
        /* Once failed, always failed. */
        if (res.feed) REQUIRE(rc == res.feed);
        res.feed = rc;
        i += len;
    }
    res.finish = provider_finish(p);
    REQUIRE(res.finish == 0 || res.finish == -1);
    REQUIRE((res.finish == 0) == r->done);
    REQUIRE(provider_finish(p) == res.finish);
    res.done = r->done;
    provider_parser_free(p);
    return res;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    size_t nsizes = data[0] % 8;
    if (size < 1 + nsizes) return 0;
    const uint8_t *sizes = data + 1;
    const uint8_t *body = data + 1 + nsizes;
    size_t n = size - 1 - nsizes;

    for (int kind = PROVIDER_ANTHROPIC; kind <= PROVIDER_OPENAI; kind++) {
        rec whole = {.done = 0}, cut = {.done = 0};
        buf_init(&whole.out, 0);
        buf_init(&cut.out, 0);
        result a = run((provider_kind)kind, body, n, sizes, 0, &whole);
        result b = run((provider_kind)kind, body, n, nsizes ? sizes : NULL, nsizes, &cut);
        REQUIRE(a.feed == b.feed && a.finish == b.finish && a.done == b.done);
        REQUIRE(whole.out.len == cut.out.len);
        REQUIRE(whole.out.len == 0 || memcmp(whole.out.p, cut.out.p, whole.out.len) == 0);
        buf_free(&whole.out);
        buf_free(&cut.out);
    }
    return 0;
}

/* libFuzzer harness for lib/chunkscan.c, differential: every input is read by the
 * scanner and by jansson (JSON_ALLOW_NUL, as lib/provider does), in both formats.
 *
 * Invariants checked on every input:
 *  - a chunk the scanner takes is one jansson takes, an object;
 *  - the format's generic path (anthropic_event / openai_event) then gives exactly
 *    one text or thinking event with the same bytes as the scanner, or none when the
 *    scanner found no text (or an empty one), and nothing else;
 *  - a text the scanner decoded is well-formed UTF-8. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "anthropic.h"
#include "buf.h"
#include "chunkscan.h"
#include "openai.h"
#include "provider.h"
#include "utf8.h"

#define REQUIRE(cond) \
    do { \
        if (!(cond)) abort(); \
    } while (0)

typedef struct seen {
    int n;
    pev_kind kind;
    buf_t text;
} seen;

static int on_event(void *ud, const provider_event *ev)
{
    seen *s = ud;
    s->n++;
    s->kind = ev->kind;
    if (ev->kind == PEV_TEXT || ev->kind == PEV_THINKING) REQUIRE(buf_append(&s->text, ev->text, ev->len) == 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    for (int openai = 0; openai <= 1; openai++) {
        buf_t scratch;
        buf_init(&scratch, 0);
        chunkscan_text t;
        int took = chunkscan_text_of(openai, d, size, &scratch, &t);
        REQUIRE(took == 0 || took == 1);
        if (took) {
            REQUIRE(utf8_valid(t.text ? t.text : "", t.len));
            json_t *j = json_loadb(d, size, JSON_ALLOW_NUL, NULL);
            REQUIRE(json_is_object(j));
            seen s = {0, PEV_DONE, {0}};
            buf_init(&s.text, 0);
            provider_parser *p = provider_parser_new(openai ? PROVIDER_OPENAI : PROVIDER_ANTHROPIC, on_event, &s);
            REQUIRE(p);
            int rc = openai ? openai_event(p, j) : anthropic_event(p, "message", j);
            REQUIRE(rc == 0 && provider_open_calls(p) == 0);
            if (t.len == 0) {
                REQUIRE(s.n == 0);
            } else {
                REQUIRE(s.n == 1 && s.kind == (t.thinking ? PEV_THINKING : PEV_TEXT));
                REQUIRE(s.text.len == t.len && memcmp(s.text.p, t.text, t.len) == 0);
            }
            provider_parser_free(p);
            buf_free(&s.text);
            json_decref(j);
        }
        buf_free(&scratch);
    }
    return 0;
}

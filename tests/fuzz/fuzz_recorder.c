/* libFuzzer harness for the parser of lib/recorder: one line of a recordings export
 * (rec_import_parse, with rec_base64_decode), as `dstream recordings import` reads it.
 *
 * Invariants checked on every input:
 *  - a line accepted is an object whose key is the key of its request (recomputed
 *    here), whose kind is provider or tool, and whose every chunk decodes;
 *  - a line refused says why (a non-empty message);
 *  - base64 that decodes encodes back to the same text (sse_base64). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "recorder.h"
#include "sse.h"

#define REQUIRE(cond) \
    do { \
        if (!(cond)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256] = "";
    json_t *o = rec_import_parse((const char *)data, size, err, sizeof err);
    if (!o) {
        REQUIRE(err[0] != '\0');
    } else {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        REQUIRE(kind && (!strcmp(kind, "provider") || !strcmp(kind, "tool")));
        char key[REC_KEY_LEN + 1];
        json_t *req = json_object_get(o, "request");
        json_t *keyed = !strcmp(kind, "tool") ? json_pack("{s:s, s:O}", "kind", "tool", "call", req) : json_incref(req);
        REQUIRE(rec_key(keyed, key) == 0);
        json_decref(keyed);
        REQUIRE(!strcmp(key, json_string_value(json_object_get(o, "key"))));
        json_decref(o);
    }
    buf_t b, e;
    buf_init(&b, 1 << 20);
    buf_init(&e, 1 << 22);
    if (rec_base64_decode((const char *)data, size, &b) == 0) {
        REQUIRE(sse_base64(&e, b.p ? b.p : "", b.len) == 0);
        REQUIRE(e.len == size && (size == 0 || !memcmp(e.p, data, size)));
    }
    buf_free(&b);
    buf_free(&e);
    return 0;
}

/* chunkscan: a provider's text chunk read without a JSON tree.
 *
 * Nearly every chunk of a streaming reply is one piece of text, in one of two
 * shapes: Anthropic's {"type":"content_block_delta","index":N,"delta":{"type":
 * "text_delta","text":"..."}} (or thinking_delta) and OpenAI's {"id":...,"choices":
 * [{"index":0,"delta":{"content":"..."},"finish_reason":null}],...}. Parsing each
 * into a jansson tree costs a dozen allocations for one string. This scanner
 * recognises those shapes (keys in any order, whitespace anywhere JSON allows it)
 * and nothing else: anything it does not fully understand (another event type, a
 * key that matters twice, a nested value where a scalar is expected, a float, an
 * escape in a key, a text that jansson would refuse) is answered "not mine", and
 * lib/provider parses the chunk with jansson as before. So what it accepts gives
 * exactly the text jansson's path gives (test_chunkscan and fuzz_chunkscan compare
 * the two byte for byte), and what it refuses costs one scan more. */
#ifndef DSTREAM_CHUNKSCAN_H
#define DSTREAM_CHUNKSCAN_H

#include <stddef.h>

#include "buf.h"

typedef struct chunkscan_text {
    const char *text;   /* the piece, UTF-8, may hold NULs: use len; NULL when none */
    size_t len;
    int thinking;       /* 1: a piece of thinking (Anthropic thinking_delta) */
} chunkscan_text;

/* Read the JSON text d[0..n) as one text chunk of the Anthropic (openai 0) or
 * OpenAI (openai 1) stream. Returns 1 if it is one: *out holds its text (len 0: a
 * chunk that carries none), pointing into d when the string held no escape, else
 * into scratch (reset first; its contents are the caller's to reuse after). Returns
 * 0 if the chunk is anything else, or not JSON: the caller parses it the generic way. */
int chunkscan_text_of(int openai, const char *d, size_t n, buf_t *scratch, chunkscan_text *out);

#endif

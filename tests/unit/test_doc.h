/* Loading the examples of the Markdown files in docs/ in unit tests, so that the
 * docs show documents the code accepts. Tests run from the repository root. */
#ifndef DSTREAM_TEST_DOC_H
#define DSTREAM_TEST_DOC_H

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* The first ```json block of a Markdown file, parsed (new reference); NULL after
 * saying why on stderr. */
static json_t *test_doc_json_block(const char *file)
{
    FILE *f = fopen(file, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open (tests run from the repository root)\n", file);
        return NULL;
    }
    static char text[1 << 17];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *start = strstr(text, "```json\n");
    if (!start) return NULL;
    start += 8;
    char *end = strstr(start, "\n```");
    if (!end) return NULL;
    json_error_t je;
    json_t *j = json_loadb(start, (size_t)(end - start), 0, &je);
    if (!j) fprintf(stderr, "%s: line %d of the block: %s\n", file, je.line, je.text);
    return j;
}

#endif

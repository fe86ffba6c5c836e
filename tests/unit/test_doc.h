/* Helpers for the unit tests of JSON documents (lib/agent, lib/workflow): loading
 * the examples of the Markdown files in docs/, so that the docs show documents the
 * code accepts (tests run from the repository root), writing test JSON readably,
 * and reading validators' one-mistake-per-line messages. */
#ifndef DSTREAM_TEST_DOC_H
#define DSTREAM_TEST_DOC_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Not every test uses every helper. */
#define TEST_DOC_FN static __attribute__((unused))

/* Parse JSON written with ' for " (so that tests stay readable); \' gives an
 * escaped quote. Aborts on a typo in a test: nothing after it would mean much. */
TEST_DOC_FN json_t *test_json(const char *text, size_t flags)
{
    char *s = strdup(text);
    if (!s) abort();
    for (char *p = s; *p; p++)
        if (*p == '\'') *p = '"';
    json_error_t je;
    json_t *j = json_loads(s, JSON_DECODE_ANY | flags, &je);
    if (!j) {
        fprintf(stderr, "test JSON does not parse: %s: %s\n", je.text, s);
        abort();
    }
    free(s);
    return j;
}

/* Does some line of err start with want? */
TEST_DOC_FN int test_has_line(const char *err, const char *want)
{
    size_t n = strlen(want);
    for (const char *p = err; p && *p;) {
        if (strncmp(p, want, n) == 0) return 1;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return 0;
}

/* How many lines (mistakes) err holds. */
TEST_DOC_FN int test_count_lines(const char *err)
{
    if (!*err) return 0;
    int n = 1;
    for (; *err; err++) n += *err == '\n';
    return n;
}

/* The first ```json block of a Markdown file, parsed (new reference); NULL after
 * saying why on stderr. */
TEST_DOC_FN json_t *test_doc_json_block(const char *file)
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

/* Unit tests for lib/diag.c: text lines as before, JSON lines that parse and carry
 * the message intact (quotes, newlines and control characters escaped), unknown
 * formats refused. Standard error goes to a file for the checks. */
#include "diag.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

static char dir[256], path[300];

/* Run diag with stderr to a fresh file; return the file's text in out. */
static void capture(const char *level, const char *msg, char *out, size_t cap)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *f = freopen(path, "w", stderr);
    if (f) diag(level, "%s", msg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *r = fopen(path, "r");
    size_t n = r ? fread(out, 1, cap - 1, r) : 0;
    out[n] = '\0';
    if (r) fclose(r);
}

int main(void)
{
    char out[4096];
    if (test_mkdtemp(dir, sizeof dir, "diag")) return 1;
    snprintf(path, sizeof path, "%s/stderr", dir);

    CHECK_EQ_INT(diag_init("dstream-fcgi", NULL, 0), 0);
    capture("info", "plain words", out, sizeof out);
    CHECK_EQ_STR(out, "dstream-fcgi: plain words\n");
    CHECK_EQ_INT(diag_init("dstream-runner", "text", 1), 0);
    capture("info", "started", out, sizeof out);
    CHECK(strstr(out, " dstream-runner: started\n") != NULL && out[4] == '-');

    CHECK_EQ_INT(diag_init("dstream-runner", "json", 0), 0);
    const char *nasty = "a \"quoted\" word,\nthen a new line\tand \x01 a control";
    capture("warn", nasty, out, sizeof out);
    CHECK(strchr(out, '\n') == out + strlen(out) - 1);   /* one line */
    json_error_t e;
    json_t *o = json_loads(out, 0, &e);
    if (CHECK(o != NULL)) {
        CHECK_EQ_STR(json_string_value(json_object_get(o, "message")), nasty);
        CHECK_EQ_STR(json_string_value(json_object_get(o, "program")), "dstream-runner");
        CHECK_EQ_STR(json_string_value(json_object_get(o, "level")), "warn");
        const char *t = json_string_value(json_object_get(o, "time"));
        CHECK(t && strlen(t) >= 20 && t[10] == 'T');
    }
    json_decref(o);
    /* A message naming a path that is not UTF-8 is still one JSON line (U+FFFD). */
    capture("warn", "stream pub/\xff\xfe gone", out, sizeof out);
    o = json_loads(out, 0, &e);
    if (CHECK(o != NULL))
        CHECK_EQ_STR(json_string_value(json_object_get(o, "message")), "stream pub/\xef\xbf\xbd\xef\xbf\xbd gone");
    json_decref(o);

    CHECK_EQ_INT(diag_init("x", "xml", 0), -1);
    capture("info", "still json", out, sizeof out);
    CHECK(out[0] == '{');
    test_rmtree(dir);
    return TEST_MAIN_END();
}

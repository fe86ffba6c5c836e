#include "diag.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timefmt.h"
#include "utf8.h"

static const char *prog = "dstream";
static int json_lines, text_time;

int diag_init(const char *program, const char *format, int with_time)
{
    if (program) prog = program;
    text_time = with_time;
    if (!format || !*format || !strcmp(format, "text")) {
        json_lines = 0;
        return 0;
    }
    if (!strcmp(format, "json")) {
        json_lines = 1;
        return 0;
    }
    return -1;
}

void diag(const char *level, const char *fmt, ...)
{
    char msg[2048], ts[40];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    timefmt_format(timefmt_now_ms(), ts, sizeof ts);
    if (!json_lines) {
        if (text_time) fprintf(stderr, "%s %s: %s\n", ts, prog, msg);
        else fprintf(stderr, "%s: %s\n", prog, msg);
        return;
    }
    /* A message that names a client's path may hold bytes that are not UTF-8 (or a
     * character cut at 2047 bytes): U+FFFD for them, the line stays JSON. */
    json_t *o = json_pack("{s:s, s:s, s:s, s:o}", "time", ts, "program", prog, "level", level, "message",
                          utf8_json(msg));
    char *line = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    if (line) fprintf(stderr, "%s\n", line);
    else fprintf(stderr, "%s: %s\n", prog, msg);   /* out of memory */
    free(line);
    json_decref(o);
}

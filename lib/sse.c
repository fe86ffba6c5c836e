#include "sse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int event_lines(buf_t *b, const char *name, const char *id, const void *data, size_t len);

int sse_event(buf_t *b, const char *name, const char *id, const void *data, size_t len)
{
    size_t mark = b->len;
    int rc = event_lines(b, name, id, data, len);
    if (rc) {       /* all or nothing: no half event may reach a client */
        b->len = mark;
        if (b->p) b->p[mark] = '\0';
    }
    return rc;
}

static int event_lines(buf_t *b, const char *name, const char *id, const void *data, size_t len)
{
    const char *p = data, *end = p + len;
    int rc = 0;
    if (name && (rc = buf_printf(b, "event: %s\n", name))) return rc;
    for (;;) {
        const char *q = p;
        while (q < end && *q != '\r' && *q != '\n') q++;
        /* Clients drop one space after "data:", so a line that starts with a
         * space gets one more; others get none (the protocol's "data:" form). */
        if ((rc = buf_puts(b, q > p && *p == ' ' ? "data: " : "data:")) ||
            (rc = buf_append(b, p, (size_t)(q - p))) ||
            (rc = buf_puts(b, "\n")))
            return rc;
        if (q >= end) break;
        p = q + (q[0] == '\r' && q + 1 < end && q[1] == '\n' ? 2 : 1);
        if (p >= end) {     /* a trailing line break leaves one empty line */
            if ((rc = buf_puts(b, "data:\n"))) return rc;
            break;
        }
    }
    /* The id last: clients (and the conformance suite) read "data:" right after
     * "event:", and the id counts only once the event is complete anyway. */
    if (id && (rc = buf_printf(b, "id: %s\n", id))) return rc;
    return buf_puts(b, "\n");
}

int sse_base64(buf_t *b, const void *data, size_t len)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = data;
    int rc = buf_reserve(b, (len + 2) / 3 * 4);
    if (rc) return rc;
    char *o = b->p + b->len;
    size_t i = 0;
    for (; i + 2 < len; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = tab[v >> 18];
        *o++ = tab[(v >> 12) & 63];
        *o++ = tab[(v >> 6) & 63];
        *o++ = tab[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < len ? (uint32_t)s[i + 1] << 8 : 0);
        *o++ = tab[v >> 18];
        *o++ = tab[(v >> 12) & 63];
        *o++ = i + 1 < len ? tab[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    b->len = (size_t)(o - b->p);
    b->p[b->len] = '\0';
    return 0;
}

int sse_event_base64(buf_t *b, const char *name, const void *data, size_t len)
{
    size_t mark = b->len;
    int rc = 0;
    if ((name && (rc = buf_printf(b, "event: %s\n", name))) || (rc = buf_puts(b, "data:")) ||
        (rc = sse_base64(b, data, len)) || (rc = buf_puts(b, "\n\n"))) {
        b->len = mark;
        if (b->p) b->p[mark] = '\0';
    }
    return rc;
}

int sse_comment(buf_t *b, const char *text)
{
    return buf_printf(b, ": %s\n\n", text);
}

#define CURSOR_EPOCH_MS 1728432000000LL   /* 2024-10-09T00:00:00Z */
#define CURSOR_INTERVAL_MS 20000LL

void sse_cursor(int64_t now_ms, const char *client, char *out, size_t cap)
{
    int64_t cur = (now_ms - CURSOR_EPOCH_MS) / CURSOR_INTERVAL_MS;
    if (client && *client) {
        char *end;
        errno = 0;
        long long c = strtoll(client, &end, 10);
        if (!errno && !*end && c >= cur && c < INT64_MAX / 2) {
            /* 1 s to 1 h of jitter, in whole intervals, at least one. */
            int64_t jitter_s = 1 + (int64_t)(random() % 3600);
            int64_t step = (jitter_s * 1000 + CURSOR_INTERVAL_MS - 1) / CURSOR_INTERVAL_MS;
            cur = c + (step < 1 ? 1 : step);
        }
    }
    snprintf(out, cap, "%" PRId64, cur);
}

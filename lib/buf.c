#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

static int json_escape(buf_t *b, const char *s, size_t len);

void buf_init(buf_t *b, size_t max)
{
    b->p = NULL;
    b->len = b->cap = 0;
    b->max = max ? max : (size_t)-1 / 2;
}

void buf_free(buf_t *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

void buf_reset(buf_t *b)
{
    b->len = 0;
    if (b->p) b->p[0] = '\0';
}

int buf_reserve(buf_t *b, size_t n)
{
    if (n > b->max || b->len > b->max - n) return BUF_ETOOBIG;
    size_t need = b->len + n + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return BUF_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int buf_append(buf_t *b, const void *data, size_t len)
{
    int rc = buf_reserve(b, len);
    if (rc) return rc;
    if (len) memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = '\0';
    return 0;
}

int buf_puts(buf_t *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_vprintf(buf_t *b, const char *fmt, va_list ap)
{
    va_list cp;
    va_copy(cp, ap);
    int n = vsnprintf(NULL, 0, fmt, cp);
    va_end(cp);
    if (n < 0) return BUF_ENOMEM;
    int rc = buf_reserve(b, (size_t)n);
    if (rc) return rc;
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int buf_printf(buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

int buf_json_escape(buf_t *b, const char *s, size_t len)
{
    size_t mark = b->len;
    int rc = json_escape(b, s, len);
    if (rc) {       /* all or nothing */
        b->len = mark;
        if (b->p) b->p[mark] = '\0';
    }
    return rc;
}

static int json_escape(buf_t *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            /* A JSON text is UTF-8: a byte that starts no well-formed sequence
             * goes out as U+FFFD (the client's path or header echoed). */
            size_t n = utf8_seq(s + i, len - i);
            if (n) {
                i += n - 1;
                continue;
            }
            int rc = buf_append(b, s + start, i - start);
            if (rc || (rc = buf_append(b, "\\ufffd", 6))) return rc;
            start = i + 1;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        int rc = buf_append(b, s + start, i - start);
        if (rc) return rc;
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        size_t n = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u'; esc[2] = '0'; esc[3] = '0';
            esc[4] = hex[c >> 4]; esc[5] = hex[c & 15];
            n = 6;
        }
        if ((rc = buf_append(b, esc, n))) return rc;
        start = i + 1;
    }
    return buf_append(b, s + start, len - start);
}

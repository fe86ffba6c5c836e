#include "json.h"

#include <string.h>

#include "utf8.h"

typedef struct parser {
    const unsigned char *s;
    size_t len, i;
    size_t depth;
    int err;
} parser;

static int value(parser *p);

static void ws(parser *p)
{
    while (p->i < p->len) {
        unsigned char c = p->s[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->i++;
    }
}

static int fail(parser *p, int code)
{
    if (!p->err) p->err = code;
    return -1;
}

static int lit(parser *p, const char *w)
{
    size_t n = strlen(w);
    if (p->len - p->i < n || memcmp(p->s + p->i, w, n) != 0) return fail(p, JSON_EINVAL);
    p->i += n;
    return 0;
}

static int hex4(parser *p, unsigned *out)
{
    if (p->len - p->i < 4) return fail(p, JSON_EINVAL);
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return fail(p, JSON_EINVAL);
    }
    *out = v;
    return 0;
}

/* One UTF-8 sequence starting at p->i (already known to be >= 0x80): well-formed
 * by lib/utf8's rule, the one every text of dstream is held to. */
static int utf8(parser *p)
{
    size_t n = utf8_seq((const char *)p->s + p->i, p->len - p->i);
    if (!n) return fail(p, JSON_EINVAL);
    p->i += n;
    return 0;
}

static int string(parser *p)
{
    p->i++; /* opening quote */
    while (p->i < p->len) {
        unsigned char c = p->s[p->i];
        if (c == '"') { p->i++; return 0; }
        if (c < 0x20) return fail(p, JSON_EINVAL);
        if (c == '\\') {
            p->i++;
            if (p->i >= p->len) break;
            c = p->s[p->i++];
            if (c == 'u') {
                unsigned u;
                if (hex4(p, &u)) return -1;
                /* Lone surrogates are accepted, as most parsers (and JS) do. */
            } else if (!strchr("\"\\/bfnrt", c) || c == 0) {
                return fail(p, JSON_EINVAL);
            }
        } else if (c >= 0x80) {
            if (utf8(p)) return -1;
        } else {
            p->i++;
        }
    }
    return fail(p, JSON_EINVAL);
}

static int digits(parser *p)
{
    size_t start = p->i;
    while (p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    return p->i > start ? 0 : fail(p, JSON_EINVAL);
}

static int number(parser *p)
{
    if (p->s[p->i] == '-') p->i++;
    if (p->i >= p->len) return fail(p, JSON_EINVAL);
    if (p->s[p->i] == '0') p->i++;
    else if (digits(p)) return -1;
    if (p->i < p->len && p->s[p->i] == '.') {
        p->i++;
        if (digits(p)) return -1;
    }
    if (p->i < p->len && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->len && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (digits(p)) return -1;
    }
    return 0;
}

static int container(parser *p, unsigned char close)
{
    if (++p->depth > JSON_MAX_DEPTH) return fail(p, JSON_EDEPTH);
    p->i++;
    ws(p);
    if (p->i < p->len && p->s[p->i] == close) { p->i++; p->depth--; return 0; }
    for (;;) {
        if (close == '}') {
            ws(p);
            if (p->i >= p->len || p->s[p->i] != '"') return fail(p, JSON_EINVAL);
            if (string(p)) return -1;
            ws(p);
            if (p->i >= p->len || p->s[p->i] != ':') return fail(p, JSON_EINVAL);
            p->i++;
        }
        if (value(p)) return -1;
        ws(p);
        if (p->i >= p->len) return fail(p, JSON_EINVAL);
        if (p->s[p->i] == ',') { p->i++; continue; }
        if (p->s[p->i] == close) { p->i++; p->depth--; return 0; }
        return fail(p, JSON_EINVAL);
    }
}

/* A value with leading whitespace skipped; trailing whitespace is left. */
static int value(parser *p)
{
    ws(p);
    if (p->i >= p->len) return fail(p, JSON_EINVAL);
    switch (p->s[p->i]) {
    case '{': return container(p, '}');
    case '[': return container(p, ']');
    case '"': return string(p);
    case 't': return lit(p, "true");
    case 'f': return lit(p, "false");
    case 'n': return lit(p, "null");
    default:
        if (p->s[p->i] == '-' || (p->s[p->i] >= '0' && p->s[p->i] <= '9')) return number(p);
        return fail(p, JSON_EINVAL);
    }
}

int json_validate(const char *s, size_t len, size_t *errpos)
{
    parser p = {(const unsigned char *)s, len, 0, 0, 0};
    if (value(&p) == 0) {
        ws(&p);
        if (p.i == len) return 0;
        fail(&p, JSON_EINVAL);
    }
    if (errpos) *errpos = p.i;
    return p.err;
}

int json_messages(const char *s, size_t len, int *is_array, json_span_fn fn, void *ud,
                  size_t *errpos)
{
    int rc = json_validate(s, len, errpos);
    if (rc) return rc;
    parser p = {(const unsigned char *)s, len, 0, 0, 0};
    ws(&p);
    if (p.s[p.i] != '[') {
        size_t start = p.i, end = len;
        while (end > start && strchr(" \t\r\n", s[end - 1])) end--;
        *is_array = 0;
        return fn(ud, s + start, end - start);
    }
    *is_array = 1;
    p.i++;
    ws(&p);
    if (p.s[p.i] == ']') return 0;
    for (;;) {
        ws(&p);
        size_t start = p.i;
        value(&p);      /* already validated: cannot fail */
        if ((rc = fn(ud, s + start, p.i - start))) return rc;
        ws(&p);
        if (p.s[p.i] == ']') return 0;
        p.i++;      /* ',' */
    }
}

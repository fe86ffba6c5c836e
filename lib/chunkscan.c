#include "chunkscan.h"

#include <stdint.h>
#include <string.h>

#include "utf8.h"

/* What the scanner has not read yet. */
typedef struct scan {
    const char *p, *end;
} scan;

/* A string's body as it is in the text (between its quotes). */
typedef struct span {
    const char *p;
    size_t n;
    int esc;    /* it holds a backslash: decoding is needed */
    int set;
} span;

static void ws(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static int eat(scan *s, char c)
{
    ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The four hex digits at p (there are at least four bytes) into *v; 0 if not hex. */
static int hex4(const char *p, unsigned *v)
{
    unsigned r = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return 0;
        r = r << 4 | (unsigned)h;
    }
    *v = r;
    return 1;
}

/* A string, checked by jansson's rules (JSON_ALLOW_NUL): no raw control character,
 * only JSON's escapes, \u surrogates in pairs, well-formed UTF-8. 1 with *sp its body,
 * else 0. */
static int string(scan *s, span *sp)
{
    ws(s);
    if (s->p >= s->end || *s->p != '"') return 0;
    const char *q = ++s->p;
    int esc = 0;
    while (q < s->end) {
        unsigned char c = (unsigned char)*q;
        if (c == '"') {
            sp->p = s->p;
            sp->n = (size_t)(q - s->p);
            sp->esc = esc;
            sp->set = 1;
            s->p = q + 1;
            return 1;
        }
        if (c >= 0x20 && c < 0x80 && c != '\\') {
            q++;
            continue;
        }
        if (c < 0x20) return 0;
        if (c >= 0x80) {
            size_t k = utf8_seq(q, (size_t)(s->end - q));
            if (!k) return 0;
            q += k;
            continue;
        }
        /* An escape. */
        esc = 1;
        if (s->end - q < 2) return 0;
        switch (q[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            q += 2;
            continue;
        case 'u':
            break;
        default:
            return 0;
        }
        unsigned v, lo;
        if (s->end - q < 6 || !hex4(q + 2, &v)) return 0;
        q += 6;
        if (v >= 0xdc00 && v <= 0xdfff) return 0;
        if (v >= 0xd800 && v <= 0xdbff) {
            if (s->end - q < 6 || q[0] != '\\' || q[1] != 'u' || !hex4(q + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                return 0;
            q += 6;
        }
    }
    return 0;
}

/* 1 if span sp is exactly the text w (no escapes). */
static int is(const span *sp, const char *w)
{
    size_t n = strlen(w);
    return sp->set && !sp->esc && sp->n == n && !memcmp(sp->p, w, n);
}

/* An integer as jansson reads one, of at most 18 digits (no overflow to think of):
 * 1 with *v, else 0 (a float, a longer one: left to jansson). */
static int integer(scan *s, int64_t *v)
{
    const char *q = s->p;
    int neg = 0;
    if (q < s->end && *q == '-') neg = 1, q++;
    if (q >= s->end || *q < '0' || *q > '9') return 0;
    int64_t r = 0;
    int digits = 0;
    if (*q == '0') {
        q++;
        digits = 1;
    } else {
        while (q < s->end && *q >= '0' && *q <= '9') {
            if (++digits > 18) return 0;
            r = r * 10 + (*q++ - '0');
        }
    }
    if (q < s->end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E')) return 0;
    s->p = q;
    *v = neg ? -r : r;
    return 1;
}

static int word(scan *s, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n)) return 0;
    s->p += n;
    return 1;
}

/* A scalar the scanner may read past: a string ('s', *sp), an integer ('i', *iv),
 * true or false ('b'), null ('n'). 0 for anything else (an object, an array, a float). */
static char scalar(scan *s, span *sp, int64_t *iv)
{
    ws(s);
    if (s->p >= s->end) return 0;
    switch (*s->p) {
    case '"': return string(s, sp) ? 's' : 0;
    case 't': return word(s, "true") ? 'b' : 0;
    case 'f': return word(s, "false") ? 'b' : 0;
    case 'n': return word(s, "null") ? 'n' : 0;
    default: return integer(s, iv) ? 'i' : 0;
    }
}

/* The next member of an object whose '{' was read: 1 with *key (then its ':' read),
 * 0 at the object's end ('}' read), -1 if it is not one this scanner reads. */
static int member(scan *s, int *first, span *key)
{
    if (eat(s, '}')) return 0;
    if (!*first && !eat(s, ',')) return -1;
    *first = 0;
    memset(key, 0, sizeof *key);
    /* A key with an escape may spell one that matters: left to jansson. */
    if (!string(s, key) || key->esc || !eat(s, ':')) return -1;
    return 1;
}

/* Skip a member's value that does not matter; 0 unless it is a scalar. */
static int skip(scan *s)
{
    span v = {0};
    int64_t i;
    return scalar(s, &v, &i) != 0;
}

/* Anthropic's "delta" of a content_block_delta: text_delta or thinking_delta. */
static int anthropic_delta(scan *s, span *text, int *thinking)
{
    span type = {0}, t = {0}, th = {0}, key;
    int first = 1, r;
    if (!eat(s, '{')) return 0;
    while ((r = member(s, &first, &key)) == 1) {
        if (is(&key, "type")) {
            if (type.set || !string(s, &type)) return 0;
        } else if (is(&key, "text")) {
            if (t.set || !string(s, &t)) return 0;
        } else if (is(&key, "thinking")) {
            if (th.set || !string(s, &th)) return 0;
        } else if (!skip(s)) {
            return 0;
        }
    }
    if (r < 0) return 0;
    if (is(&type, "text_delta")) {
        *text = t;
    } else if (is(&type, "thinking_delta")) {
        *text = th;
        *thinking = 1;
    } else {
        return 0;   /* input_json_delta, signature_delta, ...: the generic path */
    }
    return 1;
}

static int anthropic(scan *s, span *text, int *thinking)
{
    span type = {0}, key;
    int first = 1, r, delta = 0;
    if (!eat(s, '{')) return 0;
    while ((r = member(s, &first, &key)) == 1) {
        if (is(&key, "type")) {
            if (type.set || !string(s, &type)) return 0;
        } else if (is(&key, "delta")) {
            if (delta || !anthropic_delta(s, text, thinking)) return 0;
            delta = 1;
        } else if (!skip(s)) {
            return 0;   /* "index" is read past: a text piece does not use it */
        }
    }
    /* Without "type" the SSE event's name would decide: the generic path. */
    return r == 0 && delta && is(&type, "content_block_delta");
}

/* OpenAI's choices[0].delta: its content; reasoning and tool calls are not read here. */
static int openai_delta(scan *s, span *text)
{
    span key, v = {0};
    int first = 1, r, content = 0;
    int64_t iv;
    if (!eat(s, '{')) return 0;
    while ((r = member(s, &first, &key)) == 1) {
        if (is(&key, "content")) {
            memset(&v, 0, sizeof v);
            char k = scalar(s, &v, &iv);
            if (content || !k) return 0;
            content = 1;
            if (k == 's') *text = v;    /* null (a role-only chunk): no text */
        } else if (is(&key, "reasoning_content") || is(&key, "reasoning") || is(&key, "tool_calls")) {
            return 0;
        } else if (!skip(s)) {
            return 0;
        }
    }
    return r == 0;
}

static int openai_choice(scan *s, span *text)
{
    span key, v;
    int first = 1, r, index = 0, delta = 0;
    int64_t iv = 0;
    if (!eat(s, '{')) return 0;
    while ((r = member(s, &first, &key)) == 1) {
        memset(&v, 0, sizeof v);
        if (is(&key, "index")) {
            if (index || scalar(s, &v, &iv) != 'i' || iv != 0) return 0;
            index = 1;
        } else if (is(&key, "delta")) {
            if (delta || !openai_delta(s, text)) return 0;
            delta = 1;
        } else if (is(&key, "finish_reason")) {
            /* A finish (a string) flushes calls and stops: the generic path. */
            char k = scalar(s, &v, &iv);
            if (!k || k == 's') return 0;
        } else if (!skip(s)) {
            return 0;
        }
    }
    return r == 0;
}

static int openai(scan *s, span *text)
{
    span key, v;
    int first = 1, r, choices = 0;
    int64_t iv;
    if (!eat(s, '{')) return 0;
    while ((r = member(s, &first, &key)) == 1) {
        memset(&v, 0, sizeof v);
        if (is(&key, "choices")) {
            if (choices || !eat(s, '[') || !openai_choice(s, text) || !eat(s, ']')) return 0;
            choices = 1;
        } else if (is(&key, "error")) {
            if (scalar(s, &v, &iv) != 'n') return 0;
        } else if (is(&key, "object")) {
            char k = scalar(s, &v, &iv);
            if (!k || (k == 's' && (v.esc || is(&v, "error")))) return 0;
        } else if (!skip(s)) {
            return 0;   /* "usage" as an object among them: the generic path */
        }
    }
    return r == 0 && choices;
}

/* The UTF-8 of code point c into o; returns the bytes written. */
static size_t utf8_put(char *o, unsigned long c)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | c >> 6);
        o[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xe0 | c >> 12);
        o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | c >> 18);
    o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    o[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* The value of a string checked by string(): its escapes undone into scratch. A
 * decoded string is never longer than its body. 0, or -1 out of memory. */
static int decode(const span *sp, buf_t *scratch, chunkscan_text *out)
{
    if (!sp->esc) {
        out->text = sp->p;
        out->len = sp->n;
        return 0;
    }
    buf_reset(scratch);
    if (buf_reserve(scratch, sp->n + 1)) return -1;
    char *o = scratch->p;
    const char *q = sp->p, *end = sp->p + sp->n;
    while (q < end) {
        if (*q != '\\') {
            *o++ = *q++;
            continue;
        }
        char e = q[1];
        q += 2;
        switch (e) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned v, lo;
            hex4(q, &v);
            q += 4;
            unsigned long c = v;
            if (v >= 0xd800 && v <= 0xdbff) {
                hex4(q + 2, &lo);
                q += 6;
                c = 0x10000 + (((unsigned long)v - 0xd800) << 10) + (lo - 0xdc00);
            }
            o += utf8_put(o, c);
            break;
        }
        default: *o++ = e; break;   /* '"', '\\', '/' */
        }
    }
    scratch->len = (size_t)(o - scratch->p);
    scratch->p[scratch->len] = '\0';
    out->text = scratch->p;
    out->len = scratch->len;
    return 0;
}

int chunkscan_text_of(int openai_kind, const char *d, size_t n, buf_t *scratch, chunkscan_text *out)
{
    scan s = {d, d + n};
    span text = {0};
    int thinking = 0;
    memset(out, 0, sizeof *out);
    int ok = openai_kind ? openai(&s, &text) : anthropic(&s, &text, &thinking);
    ws(&s);
    if (!ok || s.p != s.end) return 0;
    out->thinking = thinking;
    if (text.set && decode(&text, scratch, out)) return 0;
    return 1;
}

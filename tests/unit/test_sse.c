/* Unit tests for lib/sse.c: event framing (line breaks, injection, the blank line
 * that ends an event), base64 against the RFC 4648 vectors and a binary round
 * trip, comments, the Stream-Cursor, and buffers that hit their ceiling.
 *
 * Framing is checked twice: against the exact bytes expected, and by decoding the
 * output with the parser the SSE specification describes (HTML, "Interpreting an
 * event stream"), which is what a browser or the protocol's client will see. */
#include "sse.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "test.h"

#define CURSOR_EPOCH 1728432000000LL
#define CURSOR_INTERVAL 20000LL

/* ---- a spec-conforming SSE parser, for round trips -------------------------------- */

typedef struct sse_parsed {
    int nevents;          /* events dispatched (blank lines after data) */
    char event[64];       /* the last event's "event" field, "" if none */
    char id[64];          /* the last "id" field, "" if none */
    buf_t data;           /* the last event's data, lines joined with LF */
} sse_parsed;

/* Parse s[0..n) as an event stream: lines end in CR, LF or CRLF; "field:value"
 * with one leading space of the value removed; data lines joined with LF; an
 * empty line dispatches. Only the last event is kept. */
static void sse_parse(const char *s, size_t n, sse_parsed *out)
{
    buf_t data;
    char event[64] = "";
    int have_data = 0;
    buf_init(&data, 0);
    buf_append(&data, "", 0);
    memset(out->event, 0, sizeof out->event);
    memset(out->id, 0, sizeof out->id);
    out->nevents = 0;
    buf_init(&out->data, 0);
    const char *p = s, *end = s + n;
    while (p < end) {
        const char *q = p;
        while (q < end && *q != '\r' && *q != '\n') q++;
        if (q >= end) break;    /* an unterminated last line is not a line */
        size_t ll = (size_t)(q - p);
        if (ll == 0) {
            if (have_data) {
                out->nevents++;
                snprintf(out->event, sizeof out->event, "%s", event);
                buf_reset(&out->data);
                buf_append(&out->data, data.p, data.len);
            }
            buf_reset(&data);
            have_data = 0;
            event[0] = '\0';
        } else if (p[0] != ':') {
            const char *colon = memchr(p, ':', ll);
            size_t fl = colon ? (size_t)(colon - p) : ll;
            const char *v = colon ? colon + 1 : q;
            if (v < q && *v == ' ') v++;
            size_t vl = (size_t)(q - v);
            if (fl == 4 && memcmp(p, "data", 4) == 0) {
                if (have_data) buf_append(&data, "\n", 1);
                buf_append(&data, v, vl);
                have_data = 1;
            } else if (fl == 5 && memcmp(p, "event", 5) == 0) {
                snprintf(event, sizeof event, "%.*s", (int)vl, v);
            } else if (fl == 2 && memcmp(p, "id", 2) == 0) {
                snprintf(out->id, sizeof out->id, "%.*s", (int)vl, v);
            }
        }
        p = q + (q[0] == '\r' && q + 1 < end && q[1] == '\n' ? 2 : 1);
    }
    buf_free(&data);
}

/* The payload as the client should see it: every CR, LF or CRLF becomes one LF. */
static size_t normalize_breaks(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\r') {
            out[o++] = '\n';
            if (i + 1 < n && s[i + 1] == '\n') i++;
        } else {
            out[o++] = s[i];
        }
    }
    return o;
}

/* ---- sse_event --------------------------------------------------------------------- */

/* Frame data and compare with want; also check the structure every event must
 * have (no CR, one blank line, at the end) and that a spec parser gets the payload
 * back. Returns 1 if every check passed. */
static int event_is(const char *name, const char *id, const char *data, size_t len,
                    const char *want, int line)
{
    buf_t b;
    buf_init(&b, 0);
    int ok = 1;
    int rc = sse_event(&b, name, id, data, len);
    ok &= test_eq_int(rc, 0, __FILE__, line, "sse_event", "0");
    if (rc) {
        buf_free(&b);
        return 0;
    }
    ok &= test_eq_mem(b.p, b.len, want, strlen(want), __FILE__, line, "event", "want");
    /* No CR survives, and the only blank line is the one that ends the event. */
    ok &= test_note(memchr(b.p, '\r', b.len) == NULL, __FILE__, line, "no CR in the event");
    ok &= test_note(b.len >= 2 && memcmp(b.p + b.len - 2, "\n\n", 2) == 0, __FILE__, line,
                    "event ends with a blank line");
    const char *blank = strstr(b.p, "\n\n");
    ok &= test_note(blank == b.p + b.len - 2, __FILE__, line, "exactly one blank line");
    /* Every line is a field of its own: event, id or data. */
    for (const char *p = b.p; p < b.p + b.len - 1;) {
        const char *nl = memchr(p, '\n', (size_t)(b.p + b.len - p));
        int field = strncmp(p, "data:", 5) == 0 || (name && strncmp(p, "event: ", 7) == 0) ||
                    (id && strncmp(p, "id: ", 4) == 0);
        ok &= test_note(field, __FILE__, line, "every line is an event, id or data field");
        p = nl + 1;
        if (*p == '\n') break;
    }
    /* What a client decodes: one event, its name and id, the payload with line
     * breaks normalised to LF. */
    sse_parsed ps;
    sse_parse(b.p, b.len, &ps);
    char *norm = malloc(len + 1);
    size_t nl = normalize_breaks(data, len, norm);
    ok &= test_eq_int(ps.nevents, 1, __FILE__, line, "decoded events", "1");
    ok &= test_eq_str(ps.event, name ? name : "", __FILE__, line, "decoded event", "name");
    ok &= test_eq_str(ps.id, id ? id : "", __FILE__, line, "decoded id", "id");
    ok &= test_eq_mem(ps.data.p ? ps.data.p : "", ps.data.len, norm, nl, __FILE__, line,
                      "decoded data", "payload");
    free(norm);
    buf_free(&ps.data);
    buf_free(&b);
    return ok;
}

#define EVENT_IS(name, id, lit, want) event_is((name), (id), (lit), sizeof(lit) - 1, (want), __LINE__)

static void test_event_fields(void)
{
    EVENT_IS(NULL, NULL, "hello", "data:hello\n\n");
    EVENT_IS("data", NULL, "hello", "event: data\ndata:hello\n\n");
    EVENT_IS(NULL, "0000000000000001_0000000000000005", "hello",
             "data:hello\nid: 0000000000000001_0000000000000005\n\n");
    EVENT_IS("message", "7", "hello", "event: message\ndata:hello\nid: 7\n\n");
    /* The name comes right before the data, the id after it, whatever the payload. */
    EVENT_IS("control", NULL, "{\"upToDate\":true}", "event: control\ndata:{\"upToDate\":true}\n\n");
}

static void test_event_line_breaks(void)
{
    EVENT_IS(NULL, NULL, "", "data:\n\n");
    EVENT_IS(NULL, NULL, "a\nb", "data:a\ndata:b\n\n");
    EVENT_IS(NULL, NULL, "a\rb", "data:a\ndata:b\n\n");
    /* CRLF is one line break, not two. */
    EVENT_IS(NULL, NULL, "a\r\nb", "data:a\ndata:b\n\n");
    EVENT_IS(NULL, NULL, "a\r\nb\nc\rd", "data:a\ndata:b\ndata:c\ndata:d\n\n");
    /* Empty lines inside the payload stay, as empty data lines. */
    EVENT_IS(NULL, NULL, "a\n\nb", "data:a\ndata:\ndata:b\n\n");
    EVENT_IS(NULL, NULL, "a\r\rb", "data:a\ndata:\ndata:b\n\n");
    EVENT_IS(NULL, NULL, "a\r\n\r\nb", "data:a\ndata:\ndata:b\n\n");
    /* LF then CR is two breaks; CR CR LF is two. */
    EVENT_IS(NULL, NULL, "a\n\rb", "data:a\ndata:\ndata:b\n\n");
    EVENT_IS(NULL, NULL, "a\r\r\nb", "data:a\ndata:\ndata:b\n\n");
    /* A trailing break leaves an empty last line, so the client gets it back. */
    EVENT_IS(NULL, NULL, "a\n", "data:a\ndata:\n\n");
    EVENT_IS(NULL, NULL, "a\r", "data:a\ndata:\n\n");
    EVENT_IS(NULL, NULL, "a\r\n", "data:a\ndata:\n\n");
    EVENT_IS(NULL, NULL, "a\n\n", "data:a\ndata:\ndata:\n\n");
    EVENT_IS(NULL, NULL, "\n", "data:\ndata:\n\n");
    EVENT_IS(NULL, NULL, "\r\n", "data:\ndata:\n\n");
    EVENT_IS(NULL, NULL, "\r", "data:\ndata:\n\n");
    /* A leading break. */
    EVENT_IS(NULL, NULL, "\na", "data:\ndata:a\n\n");
}

/* A NUL byte is data like any other (checked apart: the helpers use C strings). */
static void test_event_nul(void)
{
    buf_t b;
    buf_init(&b, 0);
    CHECK_EQ_INT(sse_event(&b, NULL, NULL, "a\0b\nc", 5), 0);
    CHECK_MEM(b.p, b.len, "data:a\0b\ndata:c\n\n", 17);
    buf_free(&b);
}

static void test_event_injection(void)
{
    /* A payload that looks like fields stays data, whichever line break it uses. */
    EVENT_IS("data", NULL, "x\nevent: control\ndata: {\"injected\":true}\n\nmore",
             "event: data\ndata:x\ndata:event: control\ndata:data: {\"injected\":true}\n"
             "data:\ndata:more\n\n");
    EVENT_IS("data", NULL, "safe\r\n\r\nevent: control\r\ndata: {\"bad\":1}\r\n\r\nend",
             "event: data\ndata:safe\ndata:\ndata:event: control\ndata:data: {\"bad\":1}\n"
             "data:\ndata:end\n\n");
    EVENT_IS("data", NULL, "start\r\revent: control\rdata: {\"cr\":1}\r\rend",
             "event: data\ndata:start\ndata:\ndata:event: control\ndata:data: {\"cr\":1}\n"
             "data:\ndata:end\n\n");
    EVENT_IS("data", NULL, "event: control", "event: data\ndata:event: control\n\n");
    EVENT_IS("data", NULL, "id: 99\nretry: 1", "event: data\ndata:id: 99\ndata:retry: 1\n\n");
    /* Exactly one event comes out of the hostile payload, and it is a data event. */
    const char evil[] = "a\n\nevent: control\ndata: {}\n\n";
    buf_t b;
    buf_init(&b, 0);
    CHECK_EQ_INT(sse_event(&b, "data", NULL, evil, sizeof evil - 1), 0);
    sse_parsed ps;
    sse_parse(b.p, b.len, &ps);
    CHECK_EQ_INT(ps.nevents, 1);
    CHECK_EQ_STR(ps.event, "data");
    buf_free(&ps.data);
    buf_free(&b);
}

/* The SSE specification removes one space after "data:"; a payload line that
 * begins with a space must therefore still reach the client with it. */
static void test_event_leading_space(void)
{
    buf_t b;
    buf_init(&b, 0);
    const char text[] = " indented\n  two\nnone";
    CHECK_EQ_INT(sse_event(&b, "data", NULL, text, sizeof text - 1), 0);
    sse_parsed ps;
    sse_parse(b.p, b.len, &ps);
    CHECK_EQ_INT(ps.nevents, 1);
    CHECK_MEM(ps.data.p ? ps.data.p : "", ps.data.len, text, sizeof text - 1);
    buf_free(&ps.data);
    buf_free(&b);
}

/* Events append: two in one buffer are two events. */
static void test_event_appends(void)
{
    buf_t b;
    buf_init(&b, 0);
    CHECK_EQ_INT(sse_event(&b, "data", NULL, "one", 3), 0);
    CHECK_EQ_INT(sse_event(&b, "control", NULL, "two", 3), 0);
    const char want[] = "event: data\ndata:one\n\nevent: control\ndata:two\n\n";
    CHECK_MEM(b.p, b.len, want, sizeof want - 1);
    sse_parsed ps;
    sse_parse(b.p, b.len, &ps);
    CHECK_EQ_INT(ps.nevents, 2);
    CHECK_EQ_STR(ps.event, "control");
    CHECK_MEM(ps.data.p, ps.data.len, "two", 3);
    buf_free(&ps.data);
    buf_free(&b);
}

/* ---- base64 ------------------------------------------------------------------------ */

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Strict decoder: length a multiple of 4, padding only at the end. Returns the
 * decoded length or -1. */
static long b64decode(const char *s, size_t n, unsigned char *out)
{
    if (n % 4) return -1;
    long o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=') {
                if (i + 4 != n || k < 2) return -1;
                pad++;
                v[k] = 0;
            } else {
                if (pad) return -1;
                if ((v[k] = b64val((unsigned char)s[i + k])) < 0) return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (unsigned char)(w >> 16);
        if (pad < 2) out[o++] = (unsigned char)(w >> 8);
        if (pad < 1) out[o++] = (unsigned char)w;
    }
    return o;
}

static void test_base64_vectors(void)
{
    /* RFC 4648, section 10. */
    static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        buf_t b;
        buf_init(&b, 0);
        CHECK_EQ_INT(sse_base64(&b, in[i], strlen(in[i])), 0);
        CHECK_EQ_STR(b.p ? b.p : "(null)", out[i]);
        CHECK_EQ_UINT(b.len, strlen(out[i]));
        buf_free(&b);

        /* As an event: one data line holding the encoding. */
        buf_t e, want;
        buf_init(&e, 0);
        buf_init(&want, 0);
        CHECK_EQ_INT(sse_event_base64(&e, "data", in[i], strlen(in[i])), 0);
        buf_printf(&want, "event: data\ndata:%s\n\n", out[i]);
        CHECK_MEM(e.p, e.len, want.p, want.len);
        buf_free(&e);
        buf_reset(&want);
        buf_init(&e, 0);
        CHECK_EQ_INT(sse_event_base64(&e, NULL, in[i], strlen(in[i])), 0);
        buf_printf(&want, "data:%s\n\n", out[i]);
        CHECK_MEM(e.p, e.len, want.p, want.len);
        buf_free(&e);
        buf_free(&want);
    }
}

static void test_base64_binary(void)
{
    unsigned char all[256], dec[256];
    for (int i = 0; i < 256; i++) all[i] = (unsigned char)i;
    /* Every length from 0 to 256 (each remainder mod 3, every byte value). */
    for (size_t n = 0; n <= 256; n++) {
        buf_t b;
        buf_init(&b, 0);
        if (!CHECK_EQ_INT(sse_base64(&b, all + (256 - n), n), 0)) break;
        CHECK_EQ_UINT(b.len, (n + 2) / 3 * 4);
        CHECK_EQ_UINT(strlen(b.p), b.len);
        long m = b64decode(b.p, b.len, dec);
        CHECK_EQ_INT(m, (long)n);
        if (m == (long)n) CHECK_MEM(dec, n, all + (256 - n), n);
        buf_free(&b);
    }
    /* The full range inside an event: only the alphabet, and it decodes back. */
    buf_t e;
    buf_init(&e, 0);
    CHECK_EQ_INT(sse_event_base64(&e, "data", all, sizeof all), 0);
    CHECK(memchr(e.p, '\r', e.len) == NULL);
    sse_parsed ps;
    sse_parse(e.p, e.len, &ps);
    CHECK_EQ_INT(ps.nevents, 1);
    long m = ps.data.p ? b64decode(ps.data.p, ps.data.len, dec) : -1;
    CHECK_EQ_INT(m, 256);
    if (m == 256) CHECK_MEM(dec, 256, all, 256);
    buf_free(&ps.data);
    buf_free(&e);

    /* sse_base64 appends after what the buffer holds. */
    buf_t b;
    buf_init(&b, 0);
    buf_puts(&b, "x:");
    CHECK_EQ_INT(sse_base64(&b, "foobar", 6), 0);
    CHECK_EQ_STR(b.p, "x:Zm9vYmFy");
    buf_free(&b);
}

/* ---- comments ---------------------------------------------------------------------- */

static void test_comment(void)
{
    buf_t b;
    buf_init(&b, 0);
    CHECK_EQ_INT(sse_comment(&b, "keep-alive"), 0);
    CHECK_EQ_STR(b.p, ": keep-alive\n\n");
    CHECK_EQ_INT(sse_comment(&b, ""), 0);
    CHECK_EQ_STR(b.p, ": keep-alive\n\n: \n\n");
    /* A comment dispatches nothing. */
    sse_parsed ps;
    sse_parse(b.p, b.len, &ps);
    CHECK_EQ_INT(ps.nevents, 0);
    buf_free(&ps.data);
    buf_free(&b);
}

/* ---- the cursor -------------------------------------------------------------------- */

static long long cursor_of(int64_t now, const char *client)
{
    char out[32], *end;
    memset(out, 'x', sizeof out);
    sse_cursor(now, client, out, sizeof out);
    long long v = strtoll(out, &end, 10);
    if (end == out || *end) {
        fprintf(stderr, "cursor \"%.31s\" is not a number\n", out);
        return -999;
    }
    return v;
}

static void test_cursor(void)
{
    /* No client cursor: the current 20-second interval since 2024-10-09. */
    CHECK_EQ_INT(cursor_of(CURSOR_EPOCH, NULL), 0);
    CHECK_EQ_INT(cursor_of(CURSOR_EPOCH + 19999, NULL), 0);
    CHECK_EQ_INT(cursor_of(CURSOR_EPOCH + 20000, NULL), 1);
    CHECK_EQ_INT(cursor_of(CURSOR_EPOCH + 20000 * 12345 + 7, NULL), 12345);
    int64_t now = 1760000000123LL;   /* 2025-10-09 */
    long long cur = (now - CURSOR_EPOCH) / CURSOR_INTERVAL;
    CHECK_EQ_INT(cursor_of(now, NULL), cur);
    CHECK_EQ_INT(cursor_of(now, ""), cur);
    char out[32];
    sse_cursor(now, NULL, out, sizeof out);
    CHECK_EQ_STR(out, "1578400");

    /* An older client cursor: the current interval. */
    char cl[32];
    snprintf(cl, sizeof cl, "%lld", cur - 1);
    CHECK_EQ_INT(cursor_of(now, cl), cur);
    CHECK_EQ_INT(cursor_of(now, "0"), cur);
    CHECK_EQ_INT(cursor_of(now, "-5"), cur);

    /* The current or a future one: strictly later, by 1 s to 1 h of jitter in
     * whole intervals (1 to 180), so caches see a URL they have not stored. */
    static const long long ahead[] = {0, 1, 1000};
    for (int i = 0; i < 3; i++) {
        long long c = cur + ahead[i];
        snprintf(cl, sizeof cl, "%lld", c);
        for (int k = 0; k < 200; k++) {
            long long v = cursor_of(now, cl);
            if (!CHECK(v > c) || !CHECK(v <= c + 180)) break;
        }
    }

    /* A cursor that is not a number is ignored. */
    CHECK_EQ_INT(cursor_of(now, "abc"), cur);
    snprintf(cl, sizeof cl, "%lldx", cur + 5);
    CHECK_EQ_INT(cursor_of(now, cl), cur);
    CHECK_EQ_INT(cursor_of(now, "99999999999999999999999"), cur);
    CHECK_EQ_INT(cursor_of(now, "1e9"), cur);
}

/* ---- the ceiling ------------------------------------------------------------------- */

static void test_too_big(void)
{
    static char big[4096];
    memset(big, 'a', sizeof big);
    buf_t b;

    buf_init(&b, 64);
    CHECK_EQ_INT(sse_event(&b, "data", NULL, big, sizeof big), BUF_ETOOBIG);
    CHECK(b.p == NULL || b.p[b.len] == '\0');   /* still a valid string */
    buf_free(&b);

    /* Too big in the fields alone. */
    buf_init(&b, 8);
    CHECK_EQ_INT(sse_event(&b, "a-rather-long-event-name", NULL, "x", 1), BUF_ETOOBIG);
    CHECK(b.p == NULL || b.p[b.len] == '\0');   /* still a valid string */
    buf_free(&b);
    buf_init(&b, 16);
    CHECK_EQ_INT(sse_event(&b, NULL, "an-id-longer-than-sixteen", "x", 1), BUF_ETOOBIG);
    buf_free(&b);

    /* Many short lines: each line's "data:" counts against the ceiling. */
    static char lines[200];
    for (size_t i = 0; i < sizeof lines; i++) lines[i] = i % 2 ? '\n' : 'x';
    buf_init(&b, 500);
    CHECK_EQ_INT(sse_event(&b, NULL, NULL, lines, sizeof lines), BUF_ETOOBIG);
    buf_free(&b);
    /* The same fits in a buffer just big enough: 100 lines "data:x\n", one
     * "data:\n" for the trailing break, one blank line. */
    buf_init(&b, 100 * 7 + 6 + 1);
    CHECK_EQ_INT(sse_event(&b, NULL, NULL, lines, sizeof lines), 0);
    CHECK_EQ_UINT(b.len, 100 * 7 + 6 + 1);
    buf_free(&b);

    /* base64: the encoding does not fit; the buffer is left as it was. */
    buf_init(&b, 10);
    buf_puts(&b, "ab");
    CHECK_EQ_INT(sse_base64(&b, "foobar", 6), 0);    /* 2 + 8 = 10: fits */
    CHECK_EQ_STR(b.p, "abZm9vYmFy");
    buf_reset(&b);
    buf_puts(&b, "abc");
    CHECK_EQ_INT(sse_base64(&b, "foobar", 6), BUF_ETOOBIG);
    CHECK_EQ_STR(b.p, "abc");
    CHECK_EQ_UINT(b.len, 3);
    buf_free(&b);
    buf_init(&b, 32);
    CHECK_EQ_INT(sse_event_base64(&b, "data", big, sizeof big), BUF_ETOOBIG);
    CHECK(b.p == NULL || b.p[b.len] == '\0');   /* still a valid string */
    buf_free(&b);

    /* Comments too. */
    buf_init(&b, 8);
    CHECK_EQ_INT(sse_comment(&b, "keep-alive"), BUF_ETOOBIG);
    CHECK_EQ_UINT(b.len, 0);
    buf_free(&b);
}

int main(void)
{
    test_event_fields();
    test_event_line_breaks();
    test_event_nul();
    test_event_injection();
    test_event_leading_space();
    test_event_appends();
    test_base64_vectors();
    test_base64_binary();
    test_comment();
    test_cursor();
    test_too_big();
    return TEST_MAIN_END();
}

#include "req.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/utf8.h"

#define HEAD_MAX 16384

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

static int unhex(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decode s[0..n) into out; plus_space for query strings. Returns the length,
 * -1 if malformed (a bad escape, a NUL), -2 if it does not fit in cap. */
static int pct_decode(const char *s, size_t n, char *out, size_t cap, int plus_space)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            int h, l;
            if (i + 2 >= n) return -1;
            if ((h = unhex(s[i + 1])) < 0 || (l = unhex(s[i + 2])) < 0) return -1;
            c = h * 16 + l;
            i += 2;
        } else if (c == '+' && plus_space) {
            c = ' ';
        }
        if (c == 0) return -1;
        if (o + 1 >= cap) return -2;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return (int)o;
}

int req_begin(req_t *r, const req_backend *be, void *ctx)
{
    r->be = be;
    r->ctx = ctx;
    r->status = 200;
    r->head_sent = 0;
    r->gone = 0;
    r->sent = 0;
    r->path[0] = '\0';
    buf_init(&r->head, HEAD_MAX);
    r->method = be->param(r, "REQUEST_METHOD");
    if (!r->method) r->method = "GET";
    const char *uri = be->param(r, "REQUEST_URI");
    if (!uri) uri = be->param(r, "SCRIPT_NAME");
    if (!uri) uri = "/";
    const char *q = strchr(uri, '?');
    size_t plen = q ? (size_t)(q - uri) : strlen(uri);
    r->query = q ? q + 1 : "";
    int rc = pct_decode(uri, plen, r->path, sizeof r->path, 0);
    if (rc == -2) {
        r->path[0] = '\0';
        return REQ_ETOOLONG;
    }
    return rc < 0 ? REQ_EMALFORMED : 0;
}

static const char *mem_param(req_t *r, const char *name)
{
    (void)r;
    (void)name;
    return NULL;
}

static ssize_t mem_read(req_t *r, void *buf, size_t n)
{
    (void)r;
    (void)buf;
    (void)n;
    return 0;
}

static int mem_write(req_t *r, const void *p, size_t n)
{
    return buf_append(r->ctx, p, n) ? -1 : 0;
}

static int mem_flush(req_t *r)
{
    (void)r;
    return 0;
}

static int mem_fd(req_t *r)
{
    (void)r;
    return -1;
}

static const req_backend mem_backend = {mem_param, mem_read, mem_write, mem_flush, mem_fd, NULL, NULL};

void req_mem_begin(req_t *r, buf_t *out, const char *query, int head_sent)
{
    r->be = &mem_backend;
    r->ctx = out;
    r->status = 200;
    r->head_sent = head_sent;
    r->gone = 0;
    r->sent = 0;
    r->method = "GET";
    r->path[0] = '\0';
    r->query = query;
    buf_init(&r->head, HEAD_MAX);
}

void req_end(req_t *r)
{
    buf_free(&r->head);
}

const char *req_header(req_t *r, const char *name)
{
    char var[128];
    size_t n = 0;
    if (!strcasecmp(name, "Content-Type")) return r->be->param(r, "CONTENT_TYPE");
    if (!strcasecmp(name, "Content-Length")) return r->be->param(r, "CONTENT_LENGTH");
    n = (size_t)snprintf(var, sizeof var, "HTTP_");
    for (const char *p = name; *p && n + 1 < sizeof var; p++)
        var[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    var[n] = '\0';
    return r->be->param(r, var);
}

static int query_find(req_t *r, const char *name, char *out, size_t cap, int decode)
{
    size_t nl = strlen(name);
    const char *p = r->query;
    int found = -1;
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t klen = eq ? (size_t)(eq - p) : len;
        if (klen == nl && memcmp(p, name, nl) == 0) {
            if (found != -1) return -3;     /* given twice: ambiguous */
            const char *v = eq ? eq + 1 : p + len;
            size_t vlen = eq ? len - klen - 1 : 0;
            /* A query value is text: bytes that are not UTF-8 are malformed. */
            int rc;
            if (decode) {
                rc = pct_decode(v, vlen, out, cap, 1);
            } else if (vlen >= cap) {
                rc = -1;
            } else {
                memcpy(out, v, vlen);
                out[vlen] = '\0';
                rc = (int)vlen;
            }
            found = rc < 0 || !utf8_valid(out, (size_t)rc) ? -2 : rc;
        }
        p += len;
        if (*p == '&') p++;
    }
    return found;
}

int req_query(req_t *r, const char *name, char *out, size_t cap)
{
    return query_find(r, name, out, cap, 1);
}

int req_query_raw(req_t *r, const char *name, char *out, size_t cap)
{
    return query_find(r, name, out, cap, 0);
}

int req_body(req_t *r, buf_t *b)
{
    char tmp[16384];
    for (;;) {
        ssize_t n = r->be->read(r, tmp, sizeof tmp);
        if (n < 0) return -1;
        if (n == 0) return 0;
        int rc = buf_append(b, tmp, (size_t)n);
        if (rc == BUF_ETOOBIG) {
            /* Drain the rest so the connection stays usable. */
            while (r->be->read(r, tmp, sizeof tmp) > 0) {}
            return BUF_ETOOBIG;
        }
        if (rc) return -1;
    }
}

void req_drain(req_t *r)
{
    char tmp[16384];
    size_t got = 0, max = r->cfg->body_max + REQ_DRAIN_SLACK;
    while (got < max) {
        ssize_t n = r->be->read(r, tmp, sizeof tmp);
        if (n <= 0) return;
        got += (size_t)n;
    }
}

void res_status(req_t *r, int status)
{
    r->status = status;
}

void res_header(req_t *r, const char *name, const char *value)
{
    /* A header value never carries CR or LF: that would split the response. */
    if (strpbrk(value, "\r\n")) return;
    buf_printf(&r->head, "%s: %s\r\n", name, value);
}

void res_header_lines(req_t *r, const char *lines, size_t len)
{
    buf_append(&r->head, lines, len);
}

void res_headerf(req_t *r, const char *name, const char *fmt, ...)
{
    char v[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    res_header(r, name, v);
}

static int send_head(req_t *r)
{
    if (r->head_sent) return 0;
    char line[64];
    int n = snprintf(line, sizeof line, "Status: %d %s\r\n", r->status, reason(r->status));
    r->head_sent = 1;
    if (r->be->write(r, line, (size_t)n) || r->be->write(r, r->head.p ? r->head.p : "", r->head.len) ||
        r->be->write(r, "\r\n", 2)) {
        r->gone = 1;
        return -1;
    }
    return 0;
}

int res_write(req_t *r, const void *p, size_t n)
{
    if (r->gone || send_head(r)) return -1;
    if (n && r->be->write(r, p, n)) {
        r->gone = 1;
        return -1;
    }
    r->sent += n;
    return 0;
}

int res_flush(req_t *r)
{
    if (r->gone || send_head(r)) return -1;
    if (r->be->flush(r)) {
        r->gone = 1;
        return -1;
    }
    return 0;
}

int res_end(req_t *r)
{
    return send_head(r);
}

void res_error(req_t *r, int status, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    buf_t b;
    buf_init(&b, 4096);
    buf_printf(&b, "{\"error\":{\"code\":\"");
    buf_json_escape(&b, code, strlen(code));
    buf_puts(&b, "\",\"message\":\"");
    buf_json_escape(&b, msg, strlen(msg));
    buf_puts(&b, "\"}}");
    res_status(r, status);
    res_header(r, "Content-Type", "application/json");
    res_headerf(r, "Content-Length", "%zu", b.len);
    res_write(r, b.p, b.len);
    buf_free(&b);
}

/* ---- CGI backend: one request from the environment and stdin ----------------------- */

static const char *cgi_param(req_t *r, const char *name)
{
    (void)r;
    return getenv(name);
}

static ssize_t cgi_read(req_t *r, void *buf, size_t n)
{
    (void)r;
    /* Honour CONTENT_LENGTH: a CGI server need not close stdin. */
    static long long left = -2;
    if (left == -2) {
        const char *cl = getenv("CONTENT_LENGTH");
        char *end;
        left = cl && *cl ? strtoll(cl, &end, 10) : 0;
        if (!cl || !*cl || *end || left < 0) left = 0;
    }
    if (left <= 0) return 0;
    if ((long long)n > left) n = (size_t)left;
    ssize_t got = read(0, buf, n);
    if (got > 0) left -= got;
    return got;
}

static int cgi_write(req_t *r, const void *p, size_t n)
{
    (void)r;
    return fwrite(p, 1, n, stdout) == n ? 0 : -1;
}

static int cgi_flush(req_t *r)
{
    (void)r;
    return fflush(stdout) == 0 ? 0 : -1;
}

static int cgi_fd(req_t *r)
{
    (void)r;
    return -1;
}

const req_backend req_cgi_backend = {cgi_param, cgi_read, cgi_write, cgi_flush, cgi_fd, NULL, NULL};

/* ---- JSON helpers ----------------------------------------------------------------------- */

#define JSON_BODY_MAX (4 << 20)

json_t *req_json_object(req_t *r)
{
    const char *ct = req_header(r, "Content-Type");
    if (!ct || !log_ctype_json(ct)) {
        res_error(r, 415, "unsupported_media_type", "send the body as application/json");
        return NULL;
    }
    buf_t b;
    size_t max = r->cfg->body_max < JSON_BODY_MAX ? r->cfg->body_max : JSON_BODY_MAX;
    buf_init(&b, max);
    int rc = req_body(r, &b);
    if (rc == BUF_ETOOBIG) {
        buf_free(&b);
        res_error(r, 413, "body_too_large", "request body exceeds %zu bytes", max);
        return NULL;
    }
    json_error_t e;
    json_t *j = rc ? NULL : json_loadb(b.p ? b.p : "", b.len, JSON_REJECT_DUPLICATES, &e);
    buf_free(&b);
    if (!j) {
        res_error(r, 400, "invalid_json", "body is not valid JSON%s%s", rc ? "" : ": ", rc ? "" : e.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        res_error(r, 400, "invalid_json", "body must be a JSON object");
        return NULL;
    }
    return j;
}

void res_method_not_allowed(req_t *r, const char *allowed)
{
    res_header(r, "Allow", allowed);
    res_error(r, 405, "method_not_allowed", "%s is not allowed here (use %s)", r->method, allowed);
}

void res_json(req_t *r, int status, const json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    if (!s) {
        /* A document that could not be built or written (a json_pack refused a
         * string): an error in JSON, never an empty 200. */
        res_error(r, 500, "internal", "the response could not be encoded");
        return;
    }
    size_t n = strlen(s);
    res_status(r, status);
    res_header(r, "Content-Type", "application/json");
    res_header(r, "Cache-Control", "no-store");
    res_headerf(r, "Content-Length", "%zu", n);
    res_write(r, s, n);
    free(s);
}

/* The message of a validation error: the mistake when there is one; else how many,
 * then the first ones, "; "-separated, up to RES_INVALID_LIST lines and
 * RES_INVALID_MESSAGE bytes ("... and K more" says what is only in details). */
#define RES_INVALID_LIST 5
#define RES_INVALID_MESSAGE 1024
static void invalid_message(const json_t *details, char *out, size_t cap)
{
    size_t n = json_array_size(details);
    if (n == 0) {
        snprintf(out, cap, "invalid document");
        return;
    }
    if (n == 1) {
        snprintf(out, cap, "%s", json_string_value(json_array_get(details, 0)));
        return;
    }
    size_t len = (size_t)snprintf(out, cap, "%zu mistakes: ", n), shown = 0;
    for (; shown < n && shown < RES_INVALID_LIST && len < cap; shown++) {
        const char *line = json_string_value(json_array_get(details, shown));
        /* Room for this line and the tail that may follow it. */
        if (shown > 0 && len + 2 + strlen(line) + 32 >= cap) break;
        int w = snprintf(out + len, cap - len, "%s%s", shown ? "; " : "", line);
        len = w < 0 || (size_t)w >= cap - len ? cap - 1 : len + (size_t)w;
    }
    if (shown < n && len < cap) snprintf(out + len, cap - len, "; and %zu more (error.details)", n - shown);
}

void res_invalid(req_t *r, const char *code, const char *lines)
{
    json_t *details = json_array();
    const char *p = lines;
    while (*p) {
        size_t n = strcspn(p, "\n");
        if (n) {
            char *line = utf8_lossy(p, n);      /* UTF-8 whatever the validator echoed */
            json_array_append_new(details, line ? json_stringn_nocheck(line, strlen(line)) : NULL);
            free(line);
        }
        p += n;
        if (*p) p++;
    }
    char msg[RES_INVALID_MESSAGE];
    invalid_message(details, msg, sizeof msg);
    json_t *err = json_pack("{s:{s:s, s:s, s:o}}", "error", "code", code, "message", msg, "details", details);
    res_json(r, 400, err);
    json_decref(err);
}

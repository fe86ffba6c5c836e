/* cli/http: libcurl + jansson for the debug commands (cli/http.h). */
#include "http.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../lib/env.h"
#include "cli.h"

#define BODY_MAX (256u << 20)
#define LINE_MAX_SSE (64u << 20)

static const char *base_url(void)
{
    return env_str("DSTREAM_URL", "http://127.0.0.1:8080");
}

int http_opts(int argc, char **argv, cli_opts *o)
{
    memset(o, 0, sizeof *o);
    o->tty = isatty(1) && !getenv("NO_COLOR");
    o->json = cli_json;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if ((!strcmp(argv[i], "--url") || !strcmp(argv[i], "--token")) && i + 1 < argc) {
            setenv(argv[i][2] == 'u' ? "DSTREAM_URL" : "DSTREAM_TOKEN", argv[i + 1], 1);
            i++;
        } else {
            argv[n++] = argv[i];
        }
    }
    if (o->json) o->tty = 0;
    return n;
}

int cli_args(int argc, char **argv, cli_opts *o, int want, const char *name, int *rc)
{
    argc = http_opts(argc, argv, o);
    if (argc == want) return 0;
    *rc = cli_usage(name);
    return -1;
}

const char *c_on(const cli_opts *o, const char *code) { return o->tty ? code : ""; }
const char *c_off(const cli_opts *o) { return o->tty ? "\033[0m" : ""; }

void print_json(const json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s) puts(s);
    free(s);
}

int http_escape(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.' || c == '~';
        if (n + (plain ? 1 : 3) >= cap) return -1;
        if (plain) {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = 0;
    return 0;
}

static volatile sig_atomic_t stop_flag;
static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static int progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)ud, (void)a, (void)b, (void)c, (void)d;
    return stop_flag ? 1 : 0;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    return buf_append(ud, p, sz * n) ? 0 : sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    http_res *r = ud;
    size_t len = sz * n;
    static const char nxt[] = "stream-next-offset:", utd[] = "stream-up-to-date:", cls[] = "stream-closed: true",
                      cty[] = "content-type:";
    if (len > sizeof nxt && !strncasecmp(p, nxt, sizeof nxt - 1)) {
        size_t i = sizeof nxt - 1, k = 0;
        while (i < len && p[i] == ' ') i++;
        while (i < len && p[i] != '\r' && p[i] != '\n' && k + 1 < sizeof r->next_offset) r->next_offset[k++] = p[i++];
        r->next_offset[k] = 0;
    } else if (len >= sizeof utd - 1 && !strncasecmp(p, utd, sizeof utd - 1)) {
        r->up_to_date = 1;
    } else if (len >= sizeof cls - 1 && !strncasecmp(p, cls, sizeof cls - 1)) {
        r->closed = 1;
    } else if (len > sizeof cty && !strncasecmp(p, cty, sizeof cty - 1)) {
        size_t i = sizeof cty - 1, k = 0;
        while (i < len && p[i] == ' ') i++;
        while (i < len && p[i] != '\r' && p[i] != '\n' && k + 1 < sizeof r->content_type) r->content_type[k++] = p[i++];
        r->content_type[k] = 0;
    }
    return len;
}

static CURL *easy(const char *path, struct curl_slist **hs)
{
    static int inited;
    if (!inited) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        inited = 1;
    }
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    buf_t u;
    buf_init(&u, 16384);
    const char *b = base_url();
    size_t bl = strlen(b);
    while (bl && b[bl - 1] == '/') bl--;
    if (buf_append(&u, b, bl) || buf_puts(&u, path)) {
        buf_free(&u);
        curl_easy_cleanup(c);
        return NULL;
    }
    curl_easy_setopt(c, CURLOPT_URL, u.p);
    buf_free(&u);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress);
    const char *tok = getenv("DSTREAM_TOKEN");
    if (tok && *tok) {
        buf_t h;
        buf_init(&h, 4096);
        if (!buf_printf(&h, "Authorization: Bearer %s", tok)) *hs = curl_slist_append(*hs, h.p);
        buf_free(&h);
    }
    return c;
}

/* The server could not be reached: say which URL, and that --db is the offline
 * mode (docs/cli.md), for every command that asks the server. */
static int unreachable(CURLcode cc)
{
    return cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_RESOLVE_PROXY ||
           cc == CURLE_OPERATION_TIMEDOUT;
}

static void say_unreachable(CURLcode cc)
{
    const char *u = getenv("DSTREAM_URL");
    fprintf(stderr,
            "dstream: cannot reach the server at %s (%s); it is $DSTREAM_URL or --url%s. "
            "To read the database directly instead (offline): dstream --db [PATH] COMMAND\n",
            base_url(), curl_easy_strerror(cc), u && *u ? "" : ", by default http://127.0.0.1:8080");
}

/* METHOD PATH with body data (len bytes, ctype) or none (data NULL). */
static int call(const char *method, const char *path, const char *ctype, const char *data, size_t len, http_res *res)
{
    memset(res, 0, sizeof *res);
    buf_init(&res->body, BODY_MAX);
    struct curl_slist *hs = NULL;
    CURL *c = easy(path, &hs);
    if (!c) {
        fprintf(stderr, "dstream: cannot make a request\n");
        return EXIT_FAIL;
    }
    if (data) {
        buf_t h;
        buf_init(&h, 4096);
        if (!buf_printf(&h, "Content-Type: %s", ctype)) hs = curl_slist_append(hs, h.p);
        buf_free(&h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD")) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &res->body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, res);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 120000L);
    CURLcode cc = curl_easy_perform(c);
    int rc = 0;
    if (cc != CURLE_OK) {
        if (unreachable(cc)) say_unreachable(cc);
        else fprintf(stderr, "dstream: %s %s%s: %s\n", method, base_url(), path, curl_easy_strerror(cc));
        rc = EXIT_FAIL;
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &res->status);
        if (res->body.len) res->json = json_loadb(res->body.p, res->body.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    }
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
    return rc;
}

int http_call(const char *method, const char *path, const json_t *body, http_res *res)
{
    char *data = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;   /* a signal's payload may be any value */
    int rc = call(method, path, "application/json", body ? (data ? data : "") : NULL, data ? strlen(data) : 0, res);
    free(data);
    return rc;
}

int http_post_raw(const char *path, const char *ctype, const char *data, size_t len, http_res *res)
{
    return call("POST", path, ctype, data, len, res);
}

void http_res_free(http_res *res)
{
    buf_free(&res->body);
    json_decref(res->json);
    res->json = NULL;
}

int http_exit(const char *what, const http_res *res)
{
    if (res->status >= 200 && res->status < 300) return EXIT_OK;
    json_t *e = json_object_get(res->json, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    fprintf(stderr, "dstream: %s: HTTP %ld%s%s%s%s\n", what, res->status, code ? " " : "", code ? code : "",
            msg ? ": " : "", msg ? msg : "");
    if (res->status == 404) return EXIT_NOTFOUND;
    if (res->status == 401 || res->status == 403) return EXIT_REFUSED;
    if (res->status >= 400 && res->status < 500) return EXIT_REJECTED;
    return EXIT_FAIL;
}

json_t *http_json(const char *method, const char *path, const json_t *body, int *rc)
{
    http_res r;
    if ((*rc = http_call(method, path, body, &r))) {
        http_res_free(&r);
        return NULL;
    }
    if ((*rc = http_exit(path, &r))) {
        http_res_free(&r);
        return NULL;
    }
    json_t *j = r.json ? json_incref(r.json) : json_object();
    http_res_free(&r);
    return j;
}

/* ---- SSE ------------------------------------------------------------------------- */

typedef struct {
    buf_t line, data;
    char event[128];
    char id[128];
    char last_id[128];
    sse_cb cb;
    void *ud;
    int stopped;
} sse_state;

static int sse_line(sse_state *s, char *l, size_t n)
{
    if (n == 0) {
        if (s->data.len || s->event[0]) {
            if (s->id[0]) memcpy(s->last_id, s->id, sizeof s->id);
            int r = s->cb(s->ud, s->event[0] ? s->event : "message", s->data.p ? s->data.p : "", s->id);
            buf_reset(&s->data);
            s->event[0] = s->id[0] = 0;
            if (r) {
                s->stopped = r;
                return -1;
            }
        }
        return 0;
    }
    if (l[0] == ':') return 0;
    char *colon = memchr(l, ':', n);
    size_t fl = colon ? (size_t)(colon - l) : n;
    char *v = colon ? colon + 1 : l + n;
    if (colon && v < l + n && *v == ' ') v++;
    size_t vl = (size_t)(l + n - v);
    if (fl == 5 && !memcmp(l, "event", 5)) {
        if (vl >= sizeof s->event) vl = sizeof s->event - 1;
        memcpy(s->event, v, vl);
        s->event[vl] = 0;
    } else if (fl == 4 && !memcmp(l, "data", 4)) {
        if (s->data.len && buf_append(&s->data, "\n", 1)) return -1;
        if (buf_append(&s->data, v, vl)) return -1;
    } else if (fl == 2 && !memcmp(l, "id", 2)) {
        if (vl >= sizeof s->id) vl = sizeof s->id - 1;
        memcpy(s->id, v, vl);
        s->id[vl] = 0;
    }
    return 0;
}

static size_t on_sse(char *p, size_t sz, size_t n, void *ud)
{
    sse_state *s = ud;
    size_t len = sz * n;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '\n') {
            size_t ll = s->line.len;
            if (ll && s->line.p[ll - 1] == '\r') ll--;
            if (sse_line(s, s->line.p ? s->line.p : (char *)"", ll)) return 0;
            buf_reset(&s->line);
        } else if (buf_append(&s->line, p + i, 1)) {
            return 0;
        }
    }
    return len;
}

int http_sse(const char *path, const char *last_id, sse_cb cb, void *ud)
{
    sse_state s;
    memset(&s, 0, sizeof s);
    buf_init(&s.line, LINE_MAX_SSE);
    buf_init(&s.data, LINE_MAX_SSE);
    s.cb = cb;
    s.ud = ud;
    if (last_id) snprintf(s.last_id, sizeof s.last_id, "%s", last_id);
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int rc = 0, answered = 0;
    CURLcode last = CURLE_OK;
    for (int failures = 0; !stop_flag && failures < 5;) {
        struct curl_slist *hs = NULL;
        CURL *c = easy(path, &hs);
        if (!c) {
            rc = EXIT_FAIL;
            break;
        }
        if (s.last_id[0]) {
            char h[200];
            snprintf(h, sizeof h, "Last-Event-ID: %s", s.last_id);
            hs = curl_slist_append(hs, h);
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_sse);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
        buf_reset(&s.line);
        CURLcode cc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hs);
        curl_easy_cleanup(c);
        if (s.stopped) {
            rc = s.stopped;
            break;
        }
        if (stop_flag) break;
        if (status >= 400) {
            http_res r;
            memset(&r, 0, sizeof r);
            r.status = status;
            rc = http_exit(path, &r);
            break;
        }
        if (status) answered = 1;
        if (cc != CURLE_OK && unreachable(cc) && !answered) {
            /* Never reached: nothing to resume. */
            say_unreachable(cc);
            rc = EXIT_FAIL;
            break;
        }
        if (cc != CURLE_OK) {
            failures++;
            last = cc;
            fprintf(stderr, "dstream: %s: %s; reconnecting\n", path, curl_easy_strerror(cc));
            usleep(200000u * (unsigned)failures);
        } else {
            failures = 0;
        }
    }
    if (!stop_flag && !s.stopped && rc == 0) {
        if (unreachable(last)) say_unreachable(last);
        rc = EXIT_FAIL;
    }
    if (s.stopped < 0) rc = 0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    buf_free(&s.line);
    buf_free(&s.data);
    return rc;
}

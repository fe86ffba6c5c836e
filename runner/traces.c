/* traces: OpenTelemetry export from the runner (traces.h). */
#include "traces.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/buf.h"
#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/errs.h"
#include "../lib/otlp.h"
#include "../lib/sstore.h"
#include "../lib/timefmt.h"

#define INFLIGHT_MAX 4            /* exports in flight at once (each one session's batch) */
#define LOOK_MS 100               /* changed sessions are looked at most this often */
#define LOOK_BUDGET_MS 10         /* of the loop's time per turn; what is left waits for the next */
#define BACKOFF_MIN_MS 500        /* after a failed export: doubled each time, up to */
#define BACKOFF_MAX_MS 30000
#define BODY_MAX (64u << 20)      /* bytes of one export request */
#define READ_PAGE (1u << 20)      /* bytes of the log read at a time */
#define SESSIONS_MAX 100000       /* sessions looked after at once; beyond: a full scan later */

typedef struct xsess {
    struct xsess *next;
    char id[SSTORE_ID_MAX + 1];
    int dirty;                  /* its log changed since it was last looked at */
    int built;                  /* tr holds its log up to `at` */
    otlp_trace tr;
    offset_t at;                /* where the log's read goes on */
    int64_t retry_at;           /* after a failure: not before then */
    int failures;               /* failed exports in a row */
    CURL *easy;                 /* the export in flight, or NULL */
    struct curl_slist *hdrs;
    buf_t body;
    uint64_t from, upto;        /* the cursor the batch in flight moves */
    size_t nspans;
    char error[CURL_ERROR_SIZE];
} xsess;

struct traces {
    log_conn_t *conn;
    CURLM *multi;
    char url[2048];
    struct curl_slist *headers; /* the operator's (DSTREAM_OTLP_HEADERS) */
    long batch;
    long timeout_ms;
    int scan;                   /* look at every session behind its cursor */
    int64_t next_look;
    xsess *sessions;
    size_t nsessions, nflying;
    rstats_otlp stats;
};

/* DSTREAM_OTLP_HEADERS: "name=value,name=value" (OTEL_EXPORTER_OTLP_HEADERS's form).
 * Names are tokens; values have no control characters. What is wrong is said
 * without the value (a secret). */
static int parse_headers(traces_t *X, const char *s, char *err, size_t cap)
{
    while (s && *s) {
        const char *end = strchr(s, ','), *eq = strchr(s, '=');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (!eq || eq >= s + len || eq == s) {
            snprintf(err, cap, "DSTREAM_OTLP_HEADERS: each entry is name=value, separated by commas");
            return -1;
        }
        size_t nlen = (size_t)(eq - s);
        while (nlen && s[nlen - 1] == ' ') nlen--;
        const char *v = eq + 1, *vend = s + len;
        while (v < vend && *v == ' ') v++;
        for (size_t i = 0; i < nlen; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c <= ' ' || c >= 127 || strchr("()<>@,;:\\\"/[]?={}", c)) {
                snprintf(err, cap, "DSTREAM_OTLP_HEADERS: a header name holds a character a name may not");
                return -1;
            }
        }
        /* The value percent-decoded, as OpenTelemetry's exporters read it ("Bearer%20x"). */
        char val[3072];
        size_t vn = 0;
        for (const char *p = v; p < vend; p++) {
            unsigned char c = (unsigned char)*p;
            if (c == '%' && vend - p >= 3 && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
                char hx[3] = {p[1], p[2], 0};
                c = (unsigned char)strtoul(hx, NULL, 16);
                p += 2;
            }
            if (c < ' ' || c == 127) {
                snprintf(err, cap, "DSTREAM_OTLP_HEADERS: the value of %.*s holds a control character", (int)nlen, s);
                explicit_bzero(val, sizeof val);
                return -1;
            }
            if (vn + 1 >= sizeof val) break;
            val[vn++] = (char)c;
        }
        char line[4096];
        int w = snprintf(line, sizeof line, "%.*s: %.*s", (int)nlen, s, (int)vn, val);
        explicit_bzero(val, sizeof val);
        if (nlen == 0 || vn + 1 >= sizeof val || w < 0 || (size_t)w >= sizeof line) {
            explicit_bzero(line, sizeof line);
            snprintf(err, cap, "DSTREAM_OTLP_HEADERS: a header is empty or longer than 3 KiB");
            return -1;
        }
        struct curl_slist *l = curl_slist_append(X->headers, line);
        explicit_bzero(line, sizeof line);
        if (!l) {
            snprintf(err, cap, "out of memory");
            return -1;
        }
        X->headers = l;
        s = end ? end + 1 : NULL;
    }
    return 0;
}

traces_t *traces_new(log_conn_t *conn, CURLM *multi, char *err, size_t cap)
{
    err[0] = '\0';
    const char *ep = getenv("DSTREAM_OTLP_ENDPOINT");
    if (!ep || !*ep) return NULL;
    traces_t *X = calloc(1, sizeof *X);
    if (!X) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    X->conn = conn;
    X->multi = multi;
    X->scan = 1;
    size_t n = strlen(ep);
    while (n && ep[n - 1] == '/') n--;
    long long v;
    if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8)) {
        snprintf(err, cap, "DSTREAM_OTLP_ENDPOINT: an http:// or https:// URL (the receiver's base: /v1/traces is added)");
    } else if ((size_t)snprintf(X->url, sizeof X->url, "%.*s/v1/traces", (int)n, ep) >= sizeof X->url) {
        snprintf(err, cap, "DSTREAM_OTLP_ENDPOINT: longer than %zu bytes", sizeof X->url - 11);
    } else if (!env_int("DSTREAM_OTLP_BATCH", 512, 1, 100000, &v, err, cap)) {
        X->batch = (long)v;
        if (!env_int("DSTREAM_OTLP_TIMEOUT_MS", 10000, 100, 600000, &v, err, cap)) {
            X->timeout_ms = (long)v;
            parse_headers(X, getenv("DSTREAM_OTLP_HEADERS"), err, cap);
        }
    }
    if (err[0]) {
        traces_free(X);
        return NULL;
    }
    X->headers = curl_slist_append(X->headers, "Content-Type: application/x-protobuf");
    X->headers = curl_slist_append(X->headers, "Expect:");
    diag("info", "OpenTelemetry: exporting traces to %s, at most %ld spans a request", X->url, X->batch);
    return X;
}

static void flight_end(traces_t *X, xsess *s)
{
    if (!s->easy) return;
    curl_multi_remove_handle(X->multi, s->easy);
    curl_easy_cleanup(s->easy);
    s->easy = NULL;
    buf_free(&s->body);
    X->nflying--;
}

static void sess_free(traces_t *X, xsess *s)
{
    flight_end(X, s);
    otlp_trace_free(&s->tr);
    free(s);
}

void traces_free(traces_t *X)
{
    if (!X) return;
    while (X->sessions) {
        xsess *s = X->sessions;
        X->sessions = s->next;
        sess_free(X, s);
    }
    curl_slist_free_all(X->headers);
    free(X);
}

static xsess *sess_get(traces_t *X, const char *id)
{
    for (xsess *s = X->sessions; s; s = s->next)
        if (!strcmp(s->id, id)) return s;
    if (X->nsessions >= SESSIONS_MAX) {
        X->scan = 1;    /* picked up by a scan once there is room */
        return NULL;
    }
    xsess *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    snprintf(s->id, sizeof s->id, "%s", id);
    s->next = X->sessions;
    X->sessions = s;
    X->nsessions++;
    return s;
}

void traces_note(traces_t *X, const char *path)
{
    if (!X || !path || strncmp(path, "sessions/", 9) != 0 || !sstore_valid_id(path + 9)) return;
    xsess *s = sess_get(X, path + 9);
    if (s) s->dirty = 1;
}

static int on_behind(void *ud, const char *id, uint64_t cursor)
{
    (void)cursor;
    xsess *s = sess_get(ud, id);
    if (s) s->dirty = 1;
    return s ? 0 : 1;
}

int64_t traces_wait(traces_t *X, int64_t now, int64_t wait)
{
    if (!X) return wait;
    /* A scan of the sessions behind (the first tick's, one after an overflow or a
     * failed one) at the next look, in flight or not. */
    if (X->scan && X->next_look - now < wait) wait = X->next_look - now < 0 ? 0 : X->next_look - now;
    /* At the ceiling of exports in flight, the end of one wakes the loop. */
    if (X->nflying >= INFLIGHT_MAX) return wait;
    int64_t due = INT64_MAX;
    for (xsess *s = X->sessions; s; s = s->next) {
        if (s->easy || !s->dirty) continue;
        int64_t at = s->retry_at > X->next_look ? s->retry_at : X->next_look;
        if (at < due) due = at;
    }
    if (due == INT64_MAX) return wait;
    return due - now < wait ? (due - now < 0 ? 0 : due - now) : wait;
}

static int add_event(void *ud, const void *data, size_t len, offset_t at)
{
    return otlp_trace_feed_raw(ud, at.seq, data, len) ? 1 : 0;
}

/* Read s's log from where its trace stopped to the tail. Returns 0, or LOG_E*. */
static int catch_up(traces_t *X, xsess *s)
{
    char path[SSTORE_ID_MAX + 16];
    snprintf(path, sizeof path, "sessions/%s", s->id);
    if (!s->built) {
        otlp_trace_free(&s->tr);
        otlp_trace_init(&s->tr, s->id);
        memset(&s->at, 0, sizeof s->at);
        s->built = 1;
    }
    for (int pages = 0; pages < 100000; pages++) {
        log_read_req rr;
        memset(&rr, 0, sizeof rr);
        rr.path = path;
        rr.kind = s->at.seq || s->at.pos ? OFFSET_AT : OFFSET_START;
        rr.from = s->at;
        rr.max_bytes = READ_PAGE;
        int rc = log_read(X->conn, &rr, add_event, &s->tr);
        if (rc) {
            s->built = 0;
            return rc > 0 ? BUF_ENOMEM : rc;
        }
        s->at = rr.next;
        if (rr.up_to_date || !rr.count) break;
    }
    return 0;
}

/* 1 while s's trace has spans open under its session span (a reply, a step under
 * way): kept in memory, else rebuilt from the log when it changes again. */
static int busy(const xsess *s)
{
    for (size_t i = 0; i < s->tr.n; i++)
        if (s->tr.v[i].open && (long)i != s->tr.root) return 1;
    return 0;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

/* Look at s: its spans past the cursor go out in a batch, if any. */
static void look(traces_t *X, xsess *s, int64_t now)
{
    s->dirty = 0;
    uint64_t cursor = 0;
    int rc = sstore_otlp_cursor(X->conn, s->id, &cursor);
    if (!rc) rc = catch_up(X, s);
    if (rc == LOG_ENOTFOUND || rc == LOG_EGONE) {
        s->built = 0;
        otlp_trace_free(&s->tr);
        return;
    }
    if (rc) {
        diag("info", "OpenTelemetry: session %s: reading its log: %s", s->id, errs_str(rc));
        s->dirty = 1;
        s->retry_at = now + BACKOFF_MIN_MS;
        return;
    }
    size_t *idx = s->tr.n ? malloc(s->tr.n * sizeof *idx) : NULL;
    if (s->tr.n && !idx) {
        s->dirty = 1;
        return;
    }
    uint64_t upto;
    size_t n = otlp_select(&s->tr, cursor, (size_t)X->batch, idx, &upto);
    if (n == 0) {
        /* Nothing ended past the cursor: it stays (a write per look would double
         * the commits of a busy session); the next span's end moves it. */
        free(idx);
        if (!busy(s)) {
            s->built = 0;
            otlp_trace_free(&s->tr);
        }
        return;
    }
    buf_init(&s->body, BODY_MAX);
    rc = otlp_encode_pb(&s->tr, idx, n, &s->body);
    free(idx);
    if (rc) {
        diag("warn", "OpenTelemetry: session %s: a batch of %zu spans does not fit in %u bytes", s->id, n, BODY_MAX);
        buf_free(&s->body);
        s->retry_at = now + BACKOFF_MAX_MS;
        s->dirty = 1;
        return;
    }
    s->from = cursor;
    s->upto = upto;
    s->nspans = n;
    s->error[0] = '\0';
    CURL *e = s->easy = curl_easy_init();
    if (!e) {
        buf_free(&s->body);
        s->dirty = 1;
        return;
    }
    curl_easy_setopt(e, CURLOPT_URL, X->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, s->body.p);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)s->body.len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, X->headers);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, X->timeout_ms);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_USERAGENT, "dstream-otlp");
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->error);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_multi_add_handle(X->multi, e);
    X->nflying++;
}

int traces_finished(traces_t *X, CURLMsg *msg)
{
    if (!X) return 0;
    xsess *s = X->sessions;
    while (s && s->easy != msg->easy_handle) s = s->next;
    if (!s) return 0;
    long status = 0;
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
    int ok = msg->data.result == CURLE_OK && status >= 200 && status < 300;
    int64_t now = timefmt_now_ms();
    if (ok) {
        int rc = sstore_otlp_advance(X->conn, s->id, s->from, s->upto);
        if (rc < 0) diag("info", "OpenTelemetry: session %s: keeping its cursor: %s", s->id, errs_str(rc));
        X->stats.spans += (int64_t)s->nspans;
        X->stats.batches++;
        s->failures = 0;
        s->retry_at = 0;
        /* More past the batch (a long session, or events since): look again. */
        if (rc != 1 || s->upto < s->tr.fed) s->dirty = 1;
    } else {
        X->stats.failures++;
        int64_t backoff = BACKOFF_MIN_MS;
        for (int i = 0; i < s->failures && backoff < BACKOFF_MAX_MS; i++) backoff *= 2;
        if (backoff > BACKOFF_MAX_MS) backoff = BACKOFF_MAX_MS;
        s->failures++;
        s->retry_at = now + backoff;
        s->dirty = 1;
        if (msg->data.result != CURLE_OK)
            diag("info", "OpenTelemetry: session %s: export of %zu spans failed (%s), again in %lld ms", s->id,
                 s->nspans, s->error[0] ? s->error : curl_easy_strerror(msg->data.result), (long long)backoff);
        else
            diag("info", "OpenTelemetry: session %s: export of %zu spans failed (HTTP %ld), again in %lld ms", s->id,
                 s->nspans, status, (long long)backoff);
    }
    flight_end(X, s);
    return 1;
}

void traces_tick(traces_t *X)
{
    if (!X) return;
    int64_t now = timefmt_now_ms();
    if (now < X->next_look) return;
    X->next_look = now + LOOK_MS;
    if (X->scan) {
        /* At start (and after an overflow): every session with events past its
         * cursor, the spans a crash or a receiver's outage left unsent. */
        X->scan = 0;
        int rc = sstore_otlp_behind(X->conn, on_behind, X);
        if (rc) {
            diag("info", "OpenTelemetry: the sessions behind: %s", errs_str(rc));
            X->scan = 1;
        }
    }
    /* A backlog (a start after an outage, the first start with an endpoint: every
     * session's spans so far) is taken a few milliseconds a turn. */
    int64_t budget_end = now + LOOK_BUDGET_MS;
    for (xsess **pp = &X->sessions, *s; (s = *pp);) {
        if (s->dirty && !s->easy && now >= s->retry_at && X->nflying < INFLIGHT_MAX) {
            if (timefmt_now_ms() >= budget_end) {
                X->next_look = now;     /* the rest in the next turn */
            } else {
                look(X, s, now);
            }
        }
        /* Nothing left to do for it: forgotten until its log changes again. */
        if (!s->dirty && !s->easy && !s->built) {
            *pp = s->next;
            X->nsessions--;
            sess_free(X, s);
            continue;
        }
        pp = &s->next;
    }
}

void traces_stats_get(const traces_t *X, rstats_otlp *s)
{
    if (X) *s = X->stats;
    else memset(s, 0, sizeof *s);
}

/* /v1/stream/{path}: the Durable Streams protocol.
 *
 * This file maps HTTP onto lib/log: it parses and validates headers, picks the
 * status for each LOG_E* result, and frames reads. Live reads share the catch-up
 * read and differ only in how they wait and frame (live.c). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/json.h"
#include "../lib/sse.h"
#include "../lib/timefmt.h"
#include "../lib/url.h"
#include "../lib/utf8.h"
#include "live.h"
#include "reply.h"
#include "router.h"
#include "stream.h"

#define MSGS_MAX 100000      /* messages in one JSON append */
#define PRODUCER_NUM_MAX 9007199254740991LL   /* 2^53 - 1 */

static int header_true(req_t *r, const char *name)
{
    const char *v = req_header(r, name);
    return v && strcasecmp(v, "true") == 0;
}

/* ---- parsing helpers ------------------------------------------------------------ */

static int parse_uint(const char *s, int64_t max, int64_t *out)
{
    if (!s || !*s) return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9') return -1;
    if (strlen(s) > 1 && s[0] == '0') return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < 0 || v > max) return -1;
    *out = v;
    return 0;
}

typedef struct msgs {
    log_msg *v;
    size_t n, cap;
} msgs_t;

static int msgs_push(void *ud, const char *p, size_t len)
{
    msgs_t *m = ud;
    if (m->n == m->cap) {
        if (m->cap >= MSGS_MAX) return ERRS_CALLBACK;
        size_t cap = m->cap ? m->cap * 2 : 16;
        log_msg *v = realloc(m->v, cap * sizeof *v);
        if (!v) return ERRS_CALLBACK;
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n].data = p;
    m->v[m->n].len = len;
    m->n++;
    return 0;
}

/* Split a body into messages for a stream of content type ct. Returns 0, or
 * answers the request and returns -1. allow_empty_array: PUT accepts "[]". */
enum { SPLIT_INVALID = -1, SPLIT_EMPTY = -2, SPLIT_TOO_MANY = -3 };

/* Split a body into messages for content type ct: one message, or for JSON each
 * element of a top-level array. Returns 0 or a SPLIT_* code (nothing answered). */
static int split_msgs(const char *ct, buf_t *body, msgs_t *m, int allow_empty_array, size_t *errpos)
{
    if (!log_ctype_equal(ct, "application/json")) {
        if (body->len) msgs_push(m, body->p, body->len);
        return 0;
    }
    if (body->len == 0) return 0;
    int is_array = 0;
    int rc = json_messages(body->p, body->len, &is_array, msgs_push, m, errpos);
    if (rc == ERRS_CALLBACK) return SPLIT_TOO_MANY;
    if (rc) return SPLIT_INVALID;
    if (is_array && m->n == 0 && !allow_empty_array) return SPLIT_EMPTY;
    return 0;
}

static void split_fail(req_t *r, int rc, size_t errpos)
{
    if (rc == SPLIT_TOO_MANY)
        res_error(r, 413, "too_many_messages", "more than %d messages in one append", MSGS_MAX);
    else if (rc == SPLIT_EMPTY)
        res_error(r, 400, "empty_array", "an empty JSON array appends nothing");
    else
        res_error(r, 400, "invalid_json", "body is not valid JSON (byte %zu)", errpos);
}

/* Split, answering the request on failure. Returns 0 or -1. */
static int split_body(req_t *r, const char *ct, buf_t *body, msgs_t *m, int allow_empty_array)
{
    size_t errpos = 0;
    int rc = split_msgs(ct, body, m, allow_empty_array, &errpos);
    if (rc) split_fail(r, rc, errpos);
    return rc ? -1 : 0;
}

static int read_body(req_t *r, buf_t *body)
{
    buf_init(body, r->cfg->body_max);
    int rc = req_body(r, body);
    if (rc == BUF_ETOOBIG) {
        res_error(r, 413, "body_too_large", "request body exceeds %zu bytes", r->cfg->body_max);
        return -1;
    }
    if (rc) {
        res_error(r, 400, "bad_body", "could not read the request body");
        return -1;
    }
    return 0;
}

/* A Content-Type is stored and sent back with every response of the stream: one
 * with control characters (or too long) is refused, and never echoed. Returns 0, or
 * answers 400 and returns -1. */
static int check_ctype(req_t *r, const char *ct)
{
    if (!ct || !*ct || log_ctype_valid(ct)) return 0;
    res_error(r, 400, "bad_content_type",
              "Content-Type must be 1 to %d printable ASCII characters", LOG_CTYPE_MAX - 1);
    return -1;
}

/* ---- PUT: create ------------------------------------------------------------------ */

static int parse_fork(req_t *r, log_create_req *cr, char *src, size_t cap)
{
    const char *from = req_header(r, "Stream-Forked-From");
    const char *off = req_header(r, "Stream-Fork-Offset");
    const char *sub = req_header(r, "Stream-Fork-Sub-Offset");
    if (!from) {
        if (off || sub) {
            res_error(r, 400, "bad_fork", "Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From");
            return -1;
        }
        return 0;
    }
    if (sub && parse_uint(sub, INT64_MAX / 2, &cr->fork_sub)) {
        res_error(r, 400, "bad_fork", "Stream-Fork-Sub-Offset must be a non-negative integer");
        return -1;
    }
    if (cr->fork_sub > 0 && !off) {
        res_error(r, 400, "bad_fork", "Stream-Fork-Sub-Offset needs Stream-Fork-Offset");
        return -1;
    }
    /* Accept "/v1/stream/a/b", a full URL ending so, or a bare stream path. */
    const char *p = strstr(from, "/v1/stream/");
    p = p ? p + strlen("/v1/stream/") : from;
    if (*p == '/') p++;
    const char *q = strchr(p, '?');
    size_t n = q ? (size_t)(q - p) : strlen(p);
    if (n == 0 || n >= cap) {
        res_error(r, 400, "bad_fork", "Stream-Forked-From does not name a stream");
        return -1;
    }
    memcpy(src, p, n);
    src[n] = '\0';
    /* A fork reads its source: the token must be allowed to. */
    if (!strncmp(src, "sessions/", 9) ? !req_allow(r, "sessions:read", src + 9) : !req_allow(r, "streams:read", src))
        return -1;
    cr->fork_from = src;
    if (off) {
        offset_kind k;
        if (offset_parse(off, strlen(off), &k, &cr->fork_offset) || k == OFFSET_NOW) {
            res_error(r, 400, "bad_offset", "Stream-Fork-Offset is not a valid offset");
            return -1;
        }
        cr->fork_has_offset = 1;
        if (k == OFFSET_START) cr->fork_offset = (offset_t){0, 0};
    }
    return 0;
}

static void do_put(req_t *r, const char *path)
{
    log_create_req cr;
    memset(&cr, 0, sizeof cr);
    char src[LOG_PATH_MAX];
    buf_t body;
    msgs_t m = {0};
    const char *ct = req_header(r, "Content-Type");
    const char *ttl = req_header(r, "Stream-TTL");
    const char *exp = req_header(r, "Stream-Expires-At");

    cr.path = path;
    cr.content_type = ct && *ct ? ct : NULL;
    cr.ttl_s = cr.expires_ms = -1;
    cr.closed = header_true(r, "Stream-Closed");
    if (ttl && exp) {
        res_error(r, 400, "bad_ttl", "Stream-TTL and Stream-Expires-At are exclusive");
        return;
    }
    if (ttl && (parse_uint(ttl, 100LL * 365 * 86400, &cr.ttl_s) || cr.ttl_s == 0)) {
        res_error(r, 400, "bad_ttl", "Stream-TTL must be a positive integer of seconds");
        return;
    }
    if (exp && timefmt_parse(exp, &cr.expires_ms)) {
        res_error(r, 400, "bad_expires_at", "Stream-Expires-At must be an RFC 3339 timestamp");
        return;
    }
    if (check_ctype(r, ct)) return;
    if (parse_fork(r, &cr, src, sizeof src)) return;
    if (read_body(r, &body)) return;
    /* Data written to a stream that has already expired could never be read. */
    if (body.len && cr.expires_ms >= 0 && cr.expires_ms <= timefmt_now_ms()) {
        res_error(r, 400, "bad_expires_at", "Stream-Expires-At is in the past: the data could never be read");
        goto out;
    }
    /* How the body splits depends on the type the stream will have. */
    const char *type = cr.content_type ? cr.content_type : "application/octet-stream";
    log_info srcinfo;
    if (!cr.content_type && cr.fork_from && log_head(r->log, cr.fork_from, &srcinfo) == 0)
        type = srcinfo.content_type;
    if (split_body(r, type, &body, &m, 1)) goto out;
    cr.msgs = m.v;
    cr.nmsgs = m.n;
    int rc = log_create(r->log, &cr);
    if (rc) {
        if (rc == LOG_ERANGE)
            res_error(r, 400, "bad_fork_offset", "the fork offset (and sub-offset) must lie within the source");
        else reply_fail(r, rc);
        goto out;
    }
    res_status(r, cr.created ? 201 : 200);
    reply_meta(r, &cr.info);
    reply_offset(r, "Stream-Next-Offset", cr.info.tail);
    reply_digest(r, cr.info.digest);
    if (cr.info.closed) res_header(r, "Stream-Closed", "true");
    if (cr.created) {
        /* From the configured public URL (else relative), never from the client's
         * Host, and encoded as a URL path. */
        char enc[3 * LOG_PATH_MAX + 1];
        if (url_encode_path(path, enc, sizeof enc) >= 0)
            res_headerf(r, "Location", "%s/v1/stream/%s", r->cfg->public_url ? r->cfg->public_url : "", enc);
    }
    res_header(r, "Content-Length", "0");
    res_end(r);
out:
    free(m.v);
    buf_free(&body);
}

/* ---- POST: append and close ----------------------------------------------------------- */

static int parse_producer(req_t *r, log_append_req *ar)
{
    const char *id = req_header(r, "Producer-Id");
    const char *ep = req_header(r, "Producer-Epoch");
    const char *sq = req_header(r, "Producer-Seq");
    if (!id && !ep && !sq) return 0;
    if (!id || !ep || !sq) {
        res_error(r, 400, "bad_producer",
                  "Producer-Id, Producer-Epoch and Producer-Seq must be sent together");
        return -1;
    }
    if (!*id || strlen(id) >= LOG_PRODUCER_MAX) {
        res_error(r, 400, "bad_producer", "Producer-Id must be 1 to %d bytes", LOG_PRODUCER_MAX - 1);
        return -1;
    }
    /* Integers a JavaScript client can represent exactly: at most 2^53 - 1. */
    if (parse_uint(ep, PRODUCER_NUM_MAX, &ar->epoch) || parse_uint(sq, PRODUCER_NUM_MAX, &ar->seq)) {
        res_error(r, 400, "bad_producer", "Producer-Epoch and Producer-Seq must be non-negative integers");
        return -1;
    }
    ar->producer = id;
    return 0;
}

static void do_post(req_t *r, const char *path)
{
    log_append_req ar;
    memset(&ar, 0, sizeof ar);
    buf_t body;
    msgs_t m = {0};
    log_info info;
    int rc;

    ar.path = path;
    ar.close = header_true(r, "Stream-Closed");
    ar.content_type = req_header(r, "Content-Type");
    ar.stream_seq = req_header(r, "Stream-Seq");
    if (check_ctype(r, ar.content_type)) return;
    if (ar.stream_seq && (!*ar.stream_seq || strlen(ar.stream_seq) >= LOG_STREAM_SEQ_MAX)) {
        res_error(r, 400, "bad_stream_seq", "Stream-Seq must be 1 to %d bytes", LOG_STREAM_SEQ_MAX - 1);
        return;
    }
    if (parse_producer(r, &ar)) return;
    if (read_body(r, &body)) return;

    if (body.len == 0 && !ar.close) {
        res_error(r, 400, "empty_body", "an append needs a body (or Stream-Closed: true)");
        goto out;
    }
    if (body.len && (!ar.content_type || !*ar.content_type)) {
        res_error(r, 400, "missing_content_type", "an append needs a Content-Type");
        goto out;
    }
    /* Split by the request's own type, with no look-up first: when it differs
     * from the stream's the append refuses it (409) whatever the split. Only a
     * body that does not split needs the stream, to answer in the protocol's
     * order: missing or deleted, closed or another type, then the body. */
    size_t errpos = 0;
    int split = body.len ? split_msgs(ar.content_type, &body, &m, 0, &errpos) : 0;
    if (split) {
        if ((rc = log_head(r->log, path, &info))) reply_fail(r, rc);
        else if (info.closed) {
            reply_offset(r, "Stream-Next-Offset", info.tail);
            reply_fail(r, LOG_ECLOSED);
        } else if (!log_ctype_equal(ar.content_type, info.content_type)) reply_fail(r, LOG_ECTYPE);
        else split_fail(r, split, errpos);
        goto out;
    }
    ar.msgs = m.v;
    ar.nmsgs = m.n;
    rc = log_append(r->log, &ar);
    if (ar.producer && (rc == 0 || rc == LOG_EFENCED || rc == LOG_EGAP || rc == LOG_EBADSEQ)) {
        res_headerf(r, "Producer-Epoch", "%" PRId64, rc == LOG_EFENCED ? ar.producer_epoch : ar.epoch);
    }
    switch (rc) {
    case 0: break;
    case LOG_EFENCED:
        res_error(r, 403, "stale_epoch", "producer epoch %" PRId64 " is older than %" PRId64,
                  ar.epoch, ar.producer_epoch);
        goto out;
    case LOG_EGAP:
        res_headerf(r, "Producer-Expected-Seq", "%" PRId64, ar.expected_seq);
        res_headerf(r, "Producer-Received-Seq", "%" PRId64, ar.seq);
        res_error(r, 409, "sequence_gap", "expected producer sequence %" PRId64 ", got %" PRId64,
                  ar.expected_seq, ar.seq);
        goto out;
    case LOG_EBADSEQ:
        res_error(r, 400, "bad_producer_seq", "%s", errs_str(rc));
        goto out;
    case LOG_ECLOSED:
        reply_offset(r, "Stream-Next-Offset", ar.info.tail);
        reply_fail(r, rc);
        goto out;
    default:
        reply_fail(r, rc);
        goto out;
    }
    /* A duplicate reports the highest sequence accepted, not the one it repeated. */
    if (ar.producer) res_headerf(r, "Producer-Seq", "%" PRId64, ar.duplicate ? ar.last_seq : ar.seq);
    res_status(r, ar.producer && !ar.duplicate && ar.nmsgs > 0 ? 200 : 204);
    reply_offset(r, "Stream-Next-Offset", ar.info.tail);
    if (ar.info.closed) res_header(r, "Stream-Closed", "true");
    res_end(r);
out:
    free(m.v);
    buf_free(&body);
}

/* ---- GET: catch-up (live reads in live.c) ----------------------------------------------- */

int stream_parse_offset(req_t *r, offset_kind *kind, offset_t *from)
{
    char v[64];
    int n = req_query(r, "offset", v, sizeof v);
    if (n == -1) {
        *kind = OFFSET_START;
        from->seq = from->pos = 0;
        return 0;
    }
    if (n < 0 || n == 0 || offset_parse(v, (size_t)n, kind, from)) {
        res_error(r, 400, "bad_offset", "offset must be -1, now, or an offset the server returned");
        return -1;
    }
    return 0;
}

int stream_resume_offset(req_t *r, offset_kind *kind, offset_t *from)
{
    const char *last = req_header(r, "Last-Event-ID");
    if (!last || !*last) return 0;
    if (offset_parse(last, strlen(last), kind, from) || *kind != OFFSET_AT) {
        res_error(r, 400, "bad_offset", "Last-Event-ID is not an offset the server returned");
        return -1;
    }
    return 1;
}

static void do_head(req_t *r, const char *path)
{
    log_info info;
    int rc = log_head(r->log, path, &info);
    if (rc) {
        reply_fail(r, rc);
        return;
    }
    reply_meta(r, &info);
    reply_offset(r, "Stream-Next-Offset", info.tail);
    reply_digest(r, info.digest);
    if (info.closed) res_header(r, "Stream-Closed", "true");
    res_header(r, "Cache-Control", "no-store");
    res_end(r);
}

/* GET: a catch-up or live read, framed by its transport (frame_*.c, live.c). */
static void do_get(req_t *r, const char *path)
{
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    char live[32];
    int ln = req_query(r, "live", live, sizeof live);
    if (ln == -2 || ln == -3 || (ln >= 0 && strcmp(live, "long-poll") != 0 && strcmp(live, "sse") != 0)) {
        res_error(r, 400, "bad_live", "live must be long-poll or sse");
        return;
    }
    int sse = ln >= 0 && strcmp(live, "sse") == 0;
    rr.path = path;
    /* An EventSource reconnecting to the same URL says where it was. */
    int resumed = sse ? stream_resume_offset(r, &rr.kind, &rr.from) : 0;
    if (resumed < 0 || (!resumed && stream_parse_offset(r, &rr.kind, &rr.from))) return;
    if (ln >= 0) {
        char tmp[64];
        if (req_query(r, "offset", tmp, sizeof tmp) < 0) {
            res_error(r, 400, "missing_offset", "live reads need an offset (-1, now or a returned offset)");
            return;
        }
    }
    frame_t f;
    frame_init(&f, sse ? &frame_sse : ln >= 0 ? &frame_longpoll : &frame_catchup, 0);
    live_run(r, &rr, &f);
}

/* ---- DELETE -------------------------------------------------------------------------------- */

static void do_delete(req_t *r, const char *path)
{
    int rc = log_delete(r->log, path);
    if (rc) {
        reply_fail(r, rc);
        return;
    }
    res_status(r, 204);
    res_end(r);
}

static int valid_path(req_t *r, const char *path)
{
    size_t n = strlen(path);
    if (n == 0) {
        res_error(r, 400, "bad_path", "a stream path is needed after /v1/stream/");
        return 0;
    }
    if (n > r->cfg->path_max) {
        res_error(r, 414, "path_too_long", "stream path exceeds %zu bytes", r->cfg->path_max);
        return 0;
    }
    for (const char *p = path; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            res_error(r, 400, "bad_path", "stream path has control characters");
            return 0;
        }
    }
    /* "." and ".." segments would name one stream by several URLs (and nginx
     * normalises them away before routing): refuse them. */
    for (const char *seg = path; seg; seg = strchr(seg, '/') ? strchr(seg, '/') + 1 : NULL) {
        size_t len = strcspn(seg, "/");
        if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.')) {
            res_error(r, 400, "bad_path", "stream path has a . or .. segment");
            return 0;
        }
    }
    return 1;
}

void stream_handle(req_t *r, const char *path)
{
    const char *m = r->method;
    if (!valid_path(r, path)) return;
    /* A stream path is text: it is made only of UTF-8 (every JSON document that names
     * it, a wake message, a claim, would be refused otherwise). Checked at creation
     * only, so that a stream made before the rule can still be read and deleted. */
    if (strcmp(m, "PUT") == 0 && !utf8_valid(path, strlen(path))) {
        res_error(r, 400, "bad_path", "stream path is not valid UTF-8");
        return;
    }
    /* Session streams are written only through /v1/sessions, which keeps their
     * status and snapshots in step (lib/sstore). */
    if (strncmp(path, "sessions/", 9) == 0 && strcmp(m, "GET") && strcmp(m, "HEAD")) {
        res_error(r, 403, "read_only", "session streams are written through /v1/sessions");
        return;
    }
    if (strcmp(m, "GET") == 0) do_get(r, path);
    else if (strcmp(m, "HEAD") == 0) do_head(r, path);
    else if (strcmp(m, "PUT") == 0) do_put(r, path);
    else if (strcmp(m, "POST") == 0) do_post(r, path);
    else if (strcmp(m, "DELETE") == 0) do_delete(r, path);
    else {
        res_header(r, "Allow", "GET, HEAD, PUT, POST, DELETE, OPTIONS");
        res_error(r, 405, "method_not_allowed", "%s is not supported on streams", m);
    }
}

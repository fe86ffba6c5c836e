/* Unit tests for lib/log.c through its public API, on a database in a temporary
 * directory: create, append, read, close, Stream-Seq, idempotent producers,
 * delete, expiry, group commit under concurrent writers, and the gap hunter (many
 * writers through several handles while a reader tails: offsets contiguous).
 *
 * With DSTREAM_TEST_PG naming a PostgreSQL cluster (tests/run-unit.sh starts one),
 * every case but SQLite's writers' lock runs a second time on that engine, on a
 * database of its own (tests/unit/test_db.h). */
#include "log.h"

#include <pthread.h>
#include <unistd.h>
#include <sys/file.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errs.h"
#include "timefmt.h"
#include "wake.h"
#include "test.h"
#include "test_db.h"

static char dir[256];
static const char *pg_uri;     /* the PostgreSQL run: its database (the cases' own) */
static log_t *lg;
static log_conn_t *conn;

/* ---- helpers -------------------------------------------------------------------- */

static int create(const char *path, const char *ctype, int64_t ttl_s, int64_t expires_ms,
                  int closed, log_create_req *out)
{
    log_create_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.content_type = ctype;
    r.ttl_s = ttl_s;
    r.expires_ms = expires_ms;
    r.closed = closed;
    int rc = log_create(conn, &r);
    if (out) *out = r;
    return rc;
}

static int create_plain(const char *path)
{
    return create(path, "text/plain", -1, -1, 0, NULL);
}

/* Append the NUL-terminated strings of msgs[0..n) as one request. */
static int append_n(const char *path, const char *const *msgs, size_t n, log_append_req *out)
{
    log_msg m[16];
    log_append_req r;
    memset(&r, 0, sizeof r);
    for (size_t i = 0; i < n && i < 16; i++) m[i] = (log_msg){msgs[i], strlen(msgs[i])};
    r.path = path;
    r.content_type = "text/plain";
    r.msgs = m;
    r.nmsgs = n;
    if (out) {
        /* Carry the caller's request options (close, seq, producer) over. */
        r.close = out->close;
        r.stream_seq = out->stream_seq;
        r.producer = out->producer;
        r.epoch = out->epoch;
        r.seq = out->seq;
        if (out->content_type) r.content_type = out->content_type;
    }
    int rc = log_append(conn, &r);
    r.msgs = NULL;
    if (out) *out = r;
    return rc;
}

static int append1(const char *path, const char *msg)
{
    return append_n(path, &msg, 1, NULL);
}

enum { MAXMSG = 2048 };

typedef struct got {
    size_t n;
    char *data[MAXMSG];
    size_t len[MAXMSG];
    offset_t at[MAXMSG];
} got;

static void got_free(got *g)
{
    for (size_t i = 0; i < g->n && i < MAXMSG; i++) free(g->data[i]);
    g->n = 0;
}

static int collect(void *ud, const void *data, size_t len, offset_t at)
{
    got *g = ud;
    if (g->n < MAXMSG) {
        g->data[g->n] = malloc(len + 1);
        memcpy(g->data[g->n], data, len);
        g->data[g->n][len] = '\0';
        g->len[g->n] = len;
        g->at[g->n] = at;
    }
    g->n++;
    return 0;
}

static int read_from(const char *path, offset_kind kind, offset_t from, size_t max_bytes, got *g,
                     log_read_req *out)
{
    log_read_req r;
    int rc = test_db_read(conn, &r, path, kind, from, max_bytes, collect, g);
    if (out) *out = r;
    return rc;
}

static int read_all(const char *path, got *g, log_read_req *out)
{
    return read_from(path, OFFSET_START, (offset_t){0, 0}, (size_t)-1, g, out);
}

#define CHECK_OFFSET(o, s, p) \
    do { \
        CHECK_EQ_UINT((o).seq, (s)); \
        CHECK_EQ_UINT((o).pos, (p)); \
    } while (0)

/* ---- create ------------------------------------------------------------------------ */

static void test_create(void)
{
    log_create_req r;
    CHECK_EQ_INT(create("/c/one", "text/plain", -1, -1, 0, &r), 0);
    CHECK_EQ_INT(r.created, 1);
    CHECK(r.info.id > 0);
    CHECK_EQ_STR(r.info.content_type, "text/plain");
    CHECK_EQ_INT(r.info.json, 0);
    CHECK_EQ_INT(r.info.closed, 0);
    CHECK_EQ_INT(r.info.ttl_s, -1);
    CHECK_EQ_INT(r.info.expires_ms, -1);
    CHECK_OFFSET(r.info.tail, 0, 0);
    CHECK_EQ_INT(r.info.parent, 0);
    int64_t id = r.info.id;

    /* The same again is accepted and changes nothing. */
    CHECK_EQ_INT(create("/c/one", "text/plain", -1, -1, 0, &r), 0);
    CHECK_EQ_INT(r.created, 0);
    CHECK_EQ_INT(r.info.id, id);
    /* Media types compare without case and parameters. */
    CHECK_EQ_INT(create("/c/one", "Text/Plain; charset=utf-8", -1, -1, 0, &r), 0);
    CHECK_EQ_INT(r.created, 0);

    /* Any other configuration conflicts. */
    CHECK_EQ_INT(create("/c/one", "application/json", -1, -1, 0, NULL), LOG_ECONFLICT);
    CHECK_EQ_INT(create("/c/one", "text/plain", 60, -1, 0, NULL), LOG_ECONFLICT);
    CHECK_EQ_INT(create("/c/one", "text/plain", -1, timefmt_now_ms() + 3600000, 0, NULL),
                 LOG_ECONFLICT);
    CHECK_EQ_INT(create("/c/one", "text/plain", -1, -1, 1, NULL), LOG_ECONFLICT);

    /* A conflict did not disturb the stream. */
    log_info info;
    CHECK_EQ_INT(log_head(conn, "/c/one", &info), 0);
    CHECK_EQ_INT(info.id, id);
    CHECK_EQ_STR(info.content_type, "text/plain");

    /* JSON mode follows the content type; TTL and expiry are kept. */
    CHECK_EQ_INT(create("/c/json", "application/json; charset=utf-8", 3600, -1, 0, &r), 0);
    CHECK_EQ_INT(r.info.json, 1);
    CHECK_EQ_INT(r.info.ttl_s, 3600);
    int64_t exp = timefmt_now_ms() + 86400000;
    CHECK_EQ_INT(create("/c/exp", "text/plain", -1, exp, 0, &r), 0);
    CHECK_EQ_INT(r.info.expires_ms, exp);
    CHECK_EQ_INT(log_head(conn, "/c/exp", &info), 0);
    CHECK_EQ_INT(info.expires_ms, exp);

    /* Initial data. */
    log_msg m[2] = {{"hello", 5}, {"world!", 6}};
    memset(&r, 0, sizeof r);
    r.path = "/c/data";
    r.content_type = "text/plain";
    r.ttl_s = r.expires_ms = -1;
    r.msgs = m;
    r.nmsgs = 2;
    CHECK_EQ_INT(log_create(conn, &r), 0);
    CHECK_EQ_INT(r.created, 1);
    CHECK_OFFSET(r.info.tail, 2, 11);
    got g = {0};
    CHECK_EQ_INT(read_all("/c/data", &g, NULL), 0);
    if (CHECK_EQ_UINT(g.n, 2)) {
        CHECK_EQ_STR(g.data[0], "hello");
        CHECK_EQ_STR(g.data[1], "world!");
    }
    got_free(&g);

    /* Created closed. */
    CHECK_EQ_INT(create("/c/closed", "text/plain", -1, -1, 1, &r), 0);
    CHECK_EQ_INT(r.info.closed, 1);
    CHECK_EQ_INT(append1("/c/closed", "x"), LOG_ECLOSED);

    /* Paths are distinct streams. */
    CHECK_EQ_INT(create("/c/one/", "application/json", -1, -1, 0, &r), 0);
    CHECK_EQ_INT(r.created, 1);
    CHECK(r.info.id != id);
}

/* ---- append and read -------------------------------------------------------------- */

static void test_append_read(void)
{
    const char *p = "/a/s";
    log_append_req ar;
    CHECK_EQ_INT(create_plain(p), 0);

    static const char *const first[] = {"a", "bb", "ccc"};
    memset(&ar, 0, sizeof ar);
    CHECK_EQ_INT(append_n(p, first, 3, &ar), 0);
    CHECK_OFFSET(ar.appended, 0, 0);
    CHECK_OFFSET(ar.info.tail, 3, 6);
    CHECK_EQ_INT(ar.duplicate, 0);

    static const char *const second[] = {"dddd"};
    memset(&ar, 0, sizeof ar);
    CHECK_EQ_INT(append_n(p, second, 1, &ar), 0);
    CHECK_OFFSET(ar.appended, 3, 6);
    CHECK_OFFSET(ar.info.tail, 4, 10);

    log_info info;
    CHECK_EQ_INT(log_head(conn, p, &info), 0);
    CHECK_OFFSET(info.tail, 4, 10);

    /* From the start: everything, with the offsets each message starts at. */
    got g = {0};
    log_read_req rr;
    CHECK_EQ_INT(read_all(p, &g, &rr), 0);
    static const char *const all[] = {"a", "bb", "ccc", "dddd"};
    static const offset_t at[] = {{0, 0}, {1, 1}, {2, 3}, {3, 6}};
    if (CHECK_EQ_UINT(g.n, 4)) {
        for (int i = 0; i < 4; i++) {
            CHECK_EQ_STR(g.data[i], all[i]);
            CHECK_OFFSET(g.at[i], at[i].seq, at[i].pos);
        }
    }
    CHECK_EQ_UINT(rr.count, 4);
    CHECK_EQ_UINT(rr.bytes, 10);
    CHECK_OFFSET(rr.next, 4, 10);
    CHECK_EQ_INT(rr.up_to_date, 1);
    CHECK_OFFSET(rr.info.tail, 4, 10);
    got_free(&g);

    /* From the middle: the message the offset names and the rest. */
    CHECK_EQ_INT(read_from(p, OFFSET_AT, (offset_t){2, 3}, (size_t)-1, &g, &rr), 0);
    if (CHECK_EQ_UINT(g.n, 2)) {
        CHECK_EQ_STR(g.data[0], "ccc");
        CHECK_OFFSET(g.at[0], 2, 3);
        CHECK_EQ_STR(g.data[1], "dddd");
    }
    CHECK_OFFSET(rr.next, 4, 10);
    CHECK_EQ_INT(rr.up_to_date, 1);
    got_free(&g);

    /* A next offset read back resumes exactly where the last read stopped. */
    CHECK_EQ_INT(read_from(p, OFFSET_AT, (offset_t){1, 1}, 1, &g, &rr), 0);
    CHECK_EQ_UINT(g.n, 1);
    CHECK_OFFSET(rr.next, 2, 3);
    CHECK_EQ_INT(rr.up_to_date, 0);
    got_free(&g);

    /* At the tail, and "now": nothing, up to date. */
    CHECK_EQ_INT(read_from(p, OFFSET_AT, (offset_t){4, 10}, (size_t)-1, &g, &rr), 0);
    CHECK_EQ_UINT(g.n, 0);
    CHECK_EQ_UINT(rr.count, 0);
    CHECK_OFFSET(rr.next, 4, 10);
    CHECK_EQ_INT(rr.up_to_date, 1);
    CHECK_EQ_INT(read_from(p, OFFSET_NOW, (offset_t){0, 0}, (size_t)-1, &g, &rr), 0);
    CHECK_EQ_UINT(g.n, 0);
    CHECK_OFFSET(rr.next, 4, 10);
    CHECK_EQ_INT(rr.up_to_date, 1);

    /* An offset whose byte part is not this stream's position for its message
     * (made up, or minted by another stream) is refused, not read from. */
    CHECK_EQ_INT(read_from(p, OFFSET_AT, (offset_t){1, 9999999999999999ULL}, (size_t)-1, &g, NULL),
                 LOG_EOFFSET);
    CHECK_EQ_INT(read_from(p, OFFSET_AT, (offset_t){2, 2}, (size_t)-1, &g, NULL), LOG_EOFFSET);
    CHECK_EQ_INT(read_from(p, OFFSET_AT, (offset_t){4, 9}, (size_t)-1, &g, NULL), LOG_EOFFSET);
    CHECK_EQ_INT(read_from(p, OFFSET_AT, (offset_t){0, 1}, (size_t)-1, &g, NULL), LOG_EOFFSET);
    CHECK_EQ_UINT(g.n, 0);

    /* Beyond the tail. */
    CHECK_EQ_INT(read_from(p, OFFSET_AT, (offset_t){5, 10}, (size_t)-1, &g, NULL), LOG_ERANGE);
    CHECK_EQ_INT(read_from(p, OFFSET_AT, (offset_t){OFFSET_MAX, 0}, (size_t)-1, &g, NULL),
                 LOG_ERANGE);
    CHECK_EQ_UINT(g.n, 0);

    /* An empty stream reads as nothing, up to date at 0. */
    CHECK_EQ_INT(create_plain("/a/empty"), 0);
    CHECK_EQ_INT(read_all("/a/empty", &g, &rr), 0);
    CHECK_EQ_UINT(g.n, 0);
    CHECK_OFFSET(rr.next, 0, 0);
    CHECK_EQ_INT(rr.up_to_date, 1);

    /* Missing streams. */
    CHECK_EQ_INT(read_all("/a/missing", &g, NULL), LOG_ENOTFOUND);
    CHECK_EQ_INT(append1("/a/missing", "x"), LOG_ENOTFOUND);
    CHECK_EQ_INT(log_head(conn, "/a/missing", &info), LOG_ENOTFOUND);

    /* Bytes are stored as given: NULs, high bytes, an empty message. */
    CHECK_EQ_INT(create("/a/bin", "application/octet-stream", -1, -1, 0, NULL), 0);
    log_msg bin[2] = {{"\0\xff\x01", 3}, {"", 0}};
    memset(&ar, 0, sizeof ar);
    ar.path = "/a/bin";
    ar.msgs = bin;
    ar.nmsgs = 2;
    CHECK_EQ_INT(log_append(conn, &ar), 0);
    CHECK_OFFSET(ar.info.tail, 2, 3);
    CHECK_EQ_INT(read_all("/a/bin", &g, NULL), 0);
    if (CHECK_EQ_UINT(g.n, 2)) {
        CHECK_MEM(g.data[0], g.len[0], "\0\xff\x01", 3);
        CHECK_EQ_UINT(g.len[1], 0);
    }
    got_free(&g);

    /* A content type other than the stream's is refused; parameters do not count. */
    memset(&ar, 0, sizeof ar);
    ar.content_type = "application/json";
    CHECK_EQ_INT(append_n(p, second, 1, &ar), LOG_ECTYPE);
    memset(&ar, 0, sizeof ar);
    ar.content_type = "TEXT/PLAIN;charset=utf-8";
    CHECK_EQ_INT(append_n(p, second, 1, &ar), 0);
    CHECK_OFFSET(ar.appended, 4, 10);
}

/* A callback's non-zero result stops the read. */
static int stop_after_two(void *ud, const void *data, size_t len, offset_t at)
{
    int *n = ud;
    return ++*n == 2 ? 42 : 0;
}

static void test_paging(void)
{
    const char *p = "/p/s";
    CHECK_EQ_INT(create_plain(p), 0);
    for (int i = 0; i < 10; i++) {
        char m[16];
        snprintf(m, sizeof m, "message-%02d", i);      /* 10 bytes each */
        CHECK_EQ_INT(append1(p, m), 0);
    }

    /* A page ends with the message that reaches max_bytes. */
    got g = {0};
    log_read_req rr;
    CHECK_EQ_INT(read_from(p, OFFSET_START, (offset_t){0, 0}, 25, &g, &rr), 0);
    CHECK_EQ_UINT(g.n, 3);
    CHECK_EQ_UINT(rr.count, 3);
    CHECK_EQ_UINT(rr.bytes, 30);
    CHECK_OFFSET(rr.next, 3, 30);
    CHECK_EQ_INT(rr.up_to_date, 0);
    got_free(&g);
    CHECK_EQ_INT(read_from(p, OFFSET_START, (offset_t){0, 0}, 30, &g, &rr), 0);
    CHECK_EQ_UINT(g.n, 3);
    got_free(&g);
    /* At least one message, however small the limit. */
    CHECK_EQ_INT(read_from(p, OFFSET_START, (offset_t){0, 0}, 1, &g, &rr), 0);
    CHECK_EQ_UINT(g.n, 1);
    CHECK_OFFSET(rr.next, 1, 10);
    got_free(&g);

    /* Following next page by page reads everything once, in order. */
    for (size_t max = 1; max <= 40; max += 13) {
        offset_t from = {0, 0};
        int pages = 0, in_order = 1;
        size_t total = 0;
        for (;;) {
            got pg = {0};
            if (read_from(p, OFFSET_AT, from, max, &pg, &rr) != 0 || ++pages > 20) {
                in_order = 0;
                got_free(&pg);
                break;
            }
            for (size_t i = 0; i < pg.n; i++) {
                char want[16];
                snprintf(want, sizeof want, "message-%02zu", total + i);
                if (strcmp(pg.data[i], want) != 0 || pg.at[i].seq != total + i ||
                    pg.at[i].pos != (total + i) * 10)
                    in_order = 0;
            }
            total += pg.n;
            got_free(&pg);
            from = rr.next;
            if (rr.up_to_date) break;
        }
        CHECK(in_order);
        CHECK_EQ_UINT(total, 10);
        CHECK_OFFSET(from, 10, 100);
    }

    /* A callback can stop the read early; its value is returned. */
    int n = 0;
    memset(&rr, 0, sizeof rr);
    rr.path = p;
    rr.kind = OFFSET_START;
    rr.max_bytes = (size_t)-1;
    CHECK_EQ_INT(log_read(conn, &rr, stop_after_two, &n), 42);
    CHECK_EQ_INT(n, 2);
}

/* Long reads: more messages than an engine fetches in one statement (PostgreSQL:
 * 4,096 rows, 4 MiB), read whole, from the middle, with budgets that end inside a
 * batch, and through a fork whose messages come from two streams. Each message
 * is checked in order, at its own offset, with its own bytes. */
enum { LONG_MSGS = 5000, LONG_FORK_AT = 3000, LONG_FORK_MSGS = 50 };

/* Message seq of /long/s (and, past LONG_FORK_AT, of its fork /long/f: 'f'). */
static size_t long_msg(uint64_t seq, int fork, char *buf)
{
    size_t len = 900 + (size_t)(seq * 37 % 200);
    memset(buf, fork ? 'f' : 'a' + (int)(seq % 26), len);
    snprintf(buf, 8, "%07u", (unsigned)seq);
    buf[7] = '.';
    return len;
}

/* A read's messages checked one by one against make's (a fork's own from
 * fork_at on): each at its offset with its bytes. */
typedef struct made_walk {
    size_t (*make)(uint64_t seq, int fork, char *buf);     /* at most 2,100 bytes */
    uint64_t fork_at;
    int fork;               /* reading the fork */
    offset_t next;          /* the offset the next message must have */
    size_t count, bytes;
    int bad;
} made_walk;

static int made_check(void *ud, const void *data, size_t len, offset_t at)
{
    made_walk *w = ud;
    char want[2100];
    size_t wlen = w->make(at.seq, w->fork && at.seq >= w->fork_at, want);
    if (at.seq != w->next.seq || at.pos != w->next.pos || len != wlen || (len && memcmp(data, want, len))) w->bad++;
    w->next = (offset_t){at.seq + 1, at.pos + len};
    w->count++;
    w->bytes += len;
    return 0;
}

/* path made a fork of src at offset at (no TTL, no expiry): log_create's result. */
static int fork_at(const char *path, const char *src, offset_t at)
{
    log_create_req fr;
    memset(&fr, 0, sizeof fr);
    fr.path = path;
    fr.ttl_s = -1;
    fr.expires_ms = -1;
    fr.fork_from = src;
    fr.fork_has_offset = 1;
    fr.fork_offset = at;
    return log_create(conn, &fr);
}

/* Messages [from, from + n) of path as make writes them (at most 2,100 bytes
 * each), appended 100 to a request. */
static int append_made(const char *path, uint64_t from, uint64_t n, int fork,
                       size_t (*make)(uint64_t seq, int fork, char *buf))
{
    static char bufs[100][2100];
    log_msg m[100];
    for (uint64_t s = from; s < from + n; s += 100) {
        size_t k = 0;
        for (; k < 100 && s + k < from + n; k++) m[k] = (log_msg){bufs[k], make(s + k, fork, bufs[k])};
        log_append_req r;
        memset(&r, 0, sizeof r);
        r.path = path;
        r.msgs = m;
        r.nmsgs = k;
        int rc = log_append(conn, &r);
        if (rc) return rc;
    }
    return 0;
}

/* Read path from `from` with max_bytes, each message checked; the request back. */
static log_read_req long_read(const char *path, offset_t from, size_t max_bytes, made_walk *w)
{
    log_read_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.kind = OFFSET_AT;
    r.from = from;
    r.max_bytes = max_bytes;
    w->next = from;
    CHECK_EQ_INT(log_read(conn, &r, made_check, w), 0);
    CHECK_EQ_INT(w->bad, 0);
    CHECK_EQ_UINT(r.count, w->count);
    CHECK_EQ_UINT(r.bytes, w->bytes);
    CHECK_OFFSET(r.next, w->next.seq, w->next.pos);
    return r;
}

static void test_long_reads(void)
{
    char buf[1200];
    uint64_t pos[LONG_MSGS + LONG_FORK_MSGS + 1];
    pos[0] = 0;
    for (uint64_t i = 0; i < LONG_MSGS + LONG_FORK_MSGS; i++)
        pos[i + 1] = pos[i] + long_msg(i, 0, buf);
    CHECK_EQ_INT(create("/long/s", "application/octet-stream", -1, -1, 0, NULL), 0);
    CHECK_EQ_INT(append_made("/long/s", 0, LONG_MSGS, 0, long_msg), 0);

    /* Whole: past a batch's rows (4,096) and bytes (4 MiB). */
    made_walk w = {long_msg, LONG_FORK_AT, 0, {0, 0}, 0, 0, 0};
    log_read_req r = long_read("/long/s", (offset_t){0, 0}, (size_t)-1, &w);
    CHECK_EQ_UINT(r.count, LONG_MSGS);
    CHECK_EQ_INT(r.up_to_date, 1);
    /* Budgets: one byte (one message), one that ends inside a message, one past
     * 4 MiB, from the start and from the middle. */
    size_t budgets[] = {1, 100000, 100001, (4 << 20) + 1234, 3000000};
    uint64_t starts[] = {0, 1, 2500, 4990};
    for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++)
        for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
            uint64_t at = starts[s], end = at;
            while (end < LONG_MSGS && pos[end] - pos[at] < budgets[b]) end++;  /* the last one reaches it */
            w = (made_walk){long_msg, LONG_FORK_AT, 0, {0, 0}, 0, 0, 0};
            r = long_read("/long/s", (offset_t){at, pos[at]}, budgets[b], &w);
            CHECK_EQ_UINT(r.count, end - at);
            CHECK_EQ_INT(r.up_to_date, end == LONG_MSGS);
        }

    /* A fork at LONG_FORK_AT with messages of its own: the source's part, then its own. */
    CHECK_EQ_INT(fork_at("/long/f", "/long/s", (offset_t){LONG_FORK_AT, pos[LONG_FORK_AT]}), 0);
    CHECK_EQ_INT(append_made("/long/f", LONG_FORK_AT, LONG_FORK_MSGS, 1, long_msg), 0);
    uint64_t fpos[LONG_FORK_AT + LONG_FORK_MSGS + 1];
    for (uint64_t i = 0; i <= LONG_FORK_AT + LONG_FORK_MSGS; i++)
        fpos[i] = i <= LONG_FORK_AT ? pos[i] : fpos[i - 1] + long_msg(i - 1, 1, buf);
    size_t fbudgets[] = {(size_t)-1, 1, fpos[LONG_FORK_AT] - fpos[2990] + 5, 2000000};
    uint64_t fstarts[] = {0, 2990, LONG_FORK_AT, LONG_FORK_AT + 10};
    for (size_t b = 0; b < sizeof fbudgets / sizeof fbudgets[0]; b++)
        for (size_t s = 0; s < sizeof fstarts / sizeof fstarts[0]; s++) {
            uint64_t at = fstarts[s], end = at;
            while (end < LONG_FORK_AT + LONG_FORK_MSGS && fpos[end] - fpos[at] < fbudgets[b]) end++;
            w = (made_walk){long_msg, LONG_FORK_AT, 1, {0, 0}, 0, 0, 0};
            r = long_read("/long/f", (offset_t){at, fpos[at]}, fbudgets[b], &w);
            CHECK_EQ_UINT(r.count, end - at);
            CHECK_EQ_INT(r.up_to_date, end == LONG_FORK_AT + LONG_FORK_MSGS);
        }
    /* A client's position that is not the message's own is refused, as before. */
    w = (made_walk){long_msg, LONG_FORK_AT, 0, {0, 0}, 0, 0, 0};
    log_read_req bad;
    memset(&bad, 0, sizeof bad);
    bad.path = "/long/s";
    bad.kind = OFFSET_AT;
    bad.from = (offset_t){2500, pos[2500] + 1};
    bad.max_bytes = (size_t)-1;
    CHECK_EQ_INT(log_read(conn, &bad, made_check, &w), LOG_EOFFSET);
}

/* The walk of a read's pages: messages of varied sizes, runs of empty ones among
 * them, more than a page of rows (PostgreSQL: 4,096), and a fork that reads its
 * source's part. Read from many offsets with budgets that stop inside a page, on
 * an empty message, on a message that ends exactly at the budget: each message at
 * its own offset with its own bytes, the read ending where the budget says, and
 * the digest it reports the one log_digest_at gives for where it stopped (the
 * engine fetches only the page's last one, or looks it up). */
enum { WALK_MSGS = 4705, WALK_FORK_AT = 3000, WALK_FORK_MSGS = 200 };   /* the last one empty */

static size_t walk_msg(uint64_t seq, int fork, char *buf)
{
    size_t len = seq % 7 == 0 || seq % 11 == 3 ? 0 : (size_t)(seq * 13 % 97) + (seq % 50 == 1 ? 2000 : 0);
    for (size_t j = 0; j < len; j++) buf[j] = (char)((fork ? 'A' : 'a') + (seq + j) % 26);
    return len;
}

/* Read path from (at, pos[at]) with budget; n messages, positions pos[]: checks
 * every message, where the read ends, and its digest. */
static void walk_read(const char *path, int fork, const uint64_t *pos, uint64_t n, uint64_t at, size_t budget)
{
    uint64_t end = at;
    while (end < n) {
        end++;
        if (pos[end] - pos[at] >= budget) break;      /* the message that reaches it */
    }
    made_walk w = {walk_msg, WALK_FORK_AT, fork, {at, pos[at]}, 0, 0, 0};
    log_read_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.kind = OFFSET_AT;
    r.from = w.next;
    r.max_bytes = budget;
    CHECK_EQ_INT(log_read(conn, &r, made_check, &w), 0);
    uint8_t want[CHAIN_LEN];
    CHECK_EQ_INT(log_digest_at(conn, path, end, want), 0);
    if (!CHECK_EQ_INT(w.bad, 0) || !CHECK_EQ_UINT(w.count, end - at) || !CHECK_EQ_UINT(r.next.seq, end) ||
        !CHECK_EQ_UINT(r.next.pos, pos[end]) || !CHECK_EQ_INT(r.up_to_date, end == n) ||
        !CHECK(memcmp(r.digest, want, CHAIN_LEN) == 0))
        printf("#   %s from %llu, budget %zu\n", path, (unsigned long long)at, budget);
}

static void test_page_walk(void)
{
    static uint64_t pos[WALK_MSGS + 1], fpos[WALK_FORK_AT + WALK_FORK_MSGS + 1];
    char buf[2100];
    pos[0] = 0;
    for (uint64_t i = 0; i < WALK_MSGS; i++) pos[i + 1] = pos[i] + walk_msg(i, 0, buf);
    fpos[0] = 0;
    for (uint64_t i = 0; i < WALK_FORK_AT + WALK_FORK_MSGS; i++)
        fpos[i + 1] = fpos[i] + walk_msg(i, i >= WALK_FORK_AT, buf);
    CHECK_EQ_INT(create("/pw/s", "application/octet-stream", -1, -1, 0, NULL), 0);
    CHECK_EQ_INT(append_made("/pw/s", 0, WALK_MSGS, 0, walk_msg), 0);
    CHECK_EQ_INT(fork_at("/pw/f", "/pw/s", (offset_t){WALK_FORK_AT, pos[WALK_FORK_AT]}), 0);
    CHECK_EQ_INT(append_made("/pw/f", WALK_FORK_AT, WALK_FORK_MSGS, 1, walk_msg), 0);

    /* From the start, an empty message (0, 3, 7), one of 2,000 bytes (51), the
     * middle, across the first page's end (4,090), the last ones. */
    uint64_t starts[] = {0, 2, 3, 7, 51, 2345, 4090, 4699};
    size_t budgets[] = {1, 2, 60, 97, 1000, 2100, 50000, (size_t)-1};
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        uint64_t at = starts[s];
        for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++)
            walk_read("/pw/s", 0, pos, WALK_MSGS, at, budgets[b]);
        /* Budgets that end exactly where a later message ends, with empty ones
         * after it (or inside one): the read stops at that message. */
        for (uint64_t k = at + 1; k < WALK_MSGS && k < at + 40; k++)
            if (walk_msg(k, 0, buf) == 0 && pos[k] > pos[at]) {
                walk_read("/pw/s", 0, pos, WALK_MSGS, at, (size_t)(pos[k] - pos[at]));
                walk_read("/pw/s", 0, pos, WALK_MSGS, at, (size_t)(pos[k] - pos[at] - 1));
            }
    }
    walk_read("/pw/s", 0, pos, WALK_MSGS, WALK_MSGS, (size_t)-1);     /* at the tail: none */
    /* The fork: its source's part (from the source's rows), then its own. */
    uint64_t fstarts[] = {0, 2999, WALK_FORK_AT, WALK_FORK_AT + 7};
    size_t fbudgets[] = {1, 97, 5000, (size_t)-1};
    for (size_t s = 0; s < sizeof fstarts / sizeof fstarts[0]; s++)
        for (size_t b = 0; b < sizeof fbudgets / sizeof fbudgets[0]; b++)
            walk_read("/pw/f", 1, fpos, WALK_FORK_AT + WALK_FORK_MSGS, fstarts[s], fbudgets[b]);
}

/* ---- close, Stream-Seq --------------------------------------------------------------- */

static void test_close(void)
{
    const char *p = "/cl/s";
    log_append_req ar;
    CHECK_EQ_INT(create_plain(p), 0);
    CHECK_EQ_INT(append1(p, "one"), 0);

    /* Append and close in one request. */
    static const char *const last[] = {"two"};
    memset(&ar, 0, sizeof ar);
    ar.close = 1;
    CHECK_EQ_INT(append_n(p, last, 1, &ar), 0);
    CHECK_EQ_INT(ar.info.closed, 1);
    CHECK_OFFSET(ar.info.tail, 2, 6);

    log_info info;
    CHECK_EQ_INT(log_head(conn, p, &info), 0);
    CHECK_EQ_INT(info.closed, 1);
    CHECK_EQ_INT(append1(p, "three"), LOG_ECLOSED);
    CHECK_EQ_INT(log_head(conn, p, &info), 0);
    CHECK_OFFSET(info.tail, 2, 6);

    /* A closed stream still reads. */
    got g = {0};
    log_read_req rr;
    CHECK_EQ_INT(read_all(p, &g, &rr), 0);
    CHECK_EQ_UINT(g.n, 2);
    CHECK_EQ_INT(rr.info.closed, 1);
    CHECK_EQ_INT(rr.up_to_date, 1);
    got_free(&g);

    /* Close with no data. */
    CHECK_EQ_INT(create_plain("/cl/t"), 0);
    memset(&ar, 0, sizeof ar);
    ar.close = 1;
    CHECK_EQ_INT(append_n("/cl/t", NULL, 0, &ar), 0);
    CHECK_EQ_INT(ar.info.closed, 1);
    CHECK_OFFSET(ar.info.tail, 0, 0);
    CHECK_EQ_INT(append1("/cl/t", "late"), LOG_ECLOSED);
}

static void test_stream_seq(void)
{
    const char *p = "/seq/s";
    log_append_req ar;
    CHECK_EQ_INT(create_plain(p), 0);
    static const char *const one[] = {"x"};
    static const struct {
        const char *seq;
        int rc;
    } steps[] = {
        {"001", 0}, {"002", 0}, {"002", LOG_ESEQ}, {"001", LOG_ESEQ},
        {"010", 0}, {"009", LOG_ESEQ}, {"010", LOG_ESEQ}, {"0100", 0},
    };
    uint64_t tail = 0;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        memset(&ar, 0, sizeof ar);
        ar.stream_seq = steps[i].seq;
        int rc = append_n(p, one, 1, &ar);
        if (!CHECK_EQ_INT(rc, steps[i].rc)) fprintf(stderr, "  Stream-Seq %s\n", steps[i].seq);
        if (rc == 0) tail++;
    }
    log_info info;
    CHECK_EQ_INT(log_head(conn, p, &info), 0);
    CHECK_EQ_UINT(info.tail.seq, tail);         /* refused appends wrote nothing */
    CHECK_EQ_STR(info.stream_seq, "0100");
    /* Appends without a Stream-Seq are not ordered by it. */
    CHECK_EQ_INT(append1(p, "free"), 0);
}

/* ---- idempotent producers ------------------------------------------------------------ */

static int produce(const char *path, const char *producer, int64_t epoch, int64_t seq,
                   const char *msg, log_append_req *ar)
{
    memset(ar, 0, sizeof *ar);
    ar->producer = producer;
    ar->epoch = epoch;
    ar->seq = seq;
    return append_n(path, &msg, 1, ar);
}

static void test_producer(void)
{
    const char *p = "/prod/s";
    log_append_req ar;
    log_info info;
    CHECK_EQ_INT(create_plain(p), 0);

    /* A new producer starts at seq 0. */
    CHECK_EQ_INT(produce(p, "w1", 0, 0, "m0", &ar), 0);
    CHECK_EQ_INT(ar.duplicate, 0);
    CHECK_EQ_INT(ar.producer_epoch, 0);
    CHECK_EQ_INT(ar.last_seq, 0);
    CHECK_OFFSET(ar.appended, 0, 0);
    CHECK_EQ_INT(produce(p, "w1", 0, 1, "m1", &ar), 0);
    CHECK_EQ_INT(ar.duplicate, 0);
    CHECK_EQ_INT(ar.last_seq, 1);

    /* A retry is a duplicate and appends nothing. */
    CHECK_EQ_INT(produce(p, "w1", 0, 1, "m1", &ar), 0);
    CHECK_EQ_INT(ar.duplicate, 1);
    CHECK_EQ_INT(produce(p, "w1", 0, 0, "m0", &ar), 0);
    CHECK_EQ_INT(ar.duplicate, 1);
    CHECK_EQ_INT(log_head(conn, p, &info), 0);
    CHECK_OFFSET(info.tail, 2, 4);

    /* A gap is refused with the seq that was expected. */
    CHECK_EQ_INT(produce(p, "w1", 0, 3, "m3", &ar), LOG_EGAP);
    CHECK_EQ_INT(ar.expected_seq, 2);
    CHECK_EQ_INT(ar.duplicate, 0);
    CHECK_EQ_INT(produce(p, "w1", 0, 2, "m2", &ar), 0);
    CHECK_EQ_INT(ar.duplicate, 0);

    /* A new epoch starts again at 0 and fences the old one. */
    CHECK_EQ_INT(produce(p, "w1", 1, 0, "e1m0", &ar), 0);
    CHECK_EQ_INT(ar.duplicate, 0);
    CHECK_EQ_INT(ar.producer_epoch, 1);
    CHECK_EQ_INT(produce(p, "w1", 0, 3, "zombie", &ar), LOG_EFENCED);
    CHECK_EQ_INT(ar.producer_epoch, 1);
    CHECK_EQ_INT(produce(p, "w1", 0, 0, "zombie", &ar), LOG_EFENCED);
    /* A later epoch must begin at seq 0. */
    CHECK_EQ_INT(produce(p, "w1", 2, 1, "bad", &ar), LOG_EBADSEQ);
    CHECK_EQ_INT(produce(p, "w1", 1, 1, "e1m1", &ar), 0);

    /* Producers are independent of each other. */
    CHECK_EQ_INT(produce(p, "w2", 0, 0, "other", &ar), 0);
    CHECK_EQ_INT(ar.duplicate, 0);
    int rc = produce(p, "w3", 0, 5, "skip", &ar);
    CHECK(rc == LOG_EGAP || rc == LOG_EBADSEQ);

    /* Only the accepted appends are in the stream, in order. */
    got g = {0};
    CHECK_EQ_INT(read_all(p, &g, NULL), 0);
    static const char *const want[] = {"m0", "m1", "m2", "e1m0", "e1m1", "other"};
    if (CHECK_EQ_UINT(g.n, 6))
        for (int i = 0; i < 6; i++) CHECK_EQ_STR(g.data[i], want[i]);
    got_free(&g);

    /* Producer state belongs to its stream. */
    CHECK_EQ_INT(create_plain("/prod/t"), 0);
    CHECK_EQ_INT(produce("/prod/t", "w1", 0, 0, "fresh", &ar), 0);
    CHECK_EQ_INT(ar.duplicate, 0);
}

/* ---- delete, expiry -------------------------------------------------------------------- */

static void test_delete(void)
{
    const char *p = "/d/s";
    log_create_req cr;
    log_append_req ar;
    log_info info;
    got g = {0};
    CHECK_EQ_INT(create_plain(p), 0);
    CHECK_EQ_INT(append1(p, "old"), 0);
    CHECK_EQ_INT(produce(p, "w", 0, 0, "old2", &ar), 0);

    CHECK_EQ_INT(log_delete(conn, p), 0);
    CHECK_EQ_INT(log_head(conn, p, &info), LOG_ENOTFOUND);
    CHECK_EQ_INT(read_all(p, &g, NULL), LOG_ENOTFOUND);
    CHECK_EQ_INT(append1(p, "x"), LOG_ENOTFOUND);
    CHECK_EQ_INT(log_delete(conn, p), LOG_ENOTFOUND);
    CHECK_EQ_INT(log_delete(conn, "/d/never"), LOG_ENOTFOUND);
    /* A path that is not UTF-8 names no stream (none can be made: the pool refuses
     * one): not found, not a database error, on either engine. */
    CHECK_EQ_INT(log_head(conn, "/d/\xff\xfe", &info), LOG_ENOTFOUND);
    CHECK_EQ_INT(read_all("/d/\xc0\xaf", &g, NULL), LOG_ENOTFOUND);
    CHECK_EQ_INT(log_delete(conn, "/d/\xff"), LOG_ENOTFOUND);

    /* The path can be created anew, with another configuration, empty. */
    CHECK_EQ_INT(create(p, "application/json", -1, -1, 0, &cr), 0);
    CHECK_EQ_INT(cr.created, 1);
    CHECK_OFFSET(cr.info.tail, 0, 0);
    CHECK_EQ_INT(read_all(p, &g, NULL), 0);
    CHECK_EQ_UINT(g.n, 0);
    /* Old producer state went with the old stream. */
    CHECK_EQ_INT(produce(p, "w", 0, 0, "{}", &ar), LOG_ECTYPE);
    memset(&ar, 0, sizeof ar);
    ar.content_type = "application/json";
    ar.producer = "w";
    CHECK_EQ_INT(append_n(p, (const char *const[]){"{}"}, 1, &ar), 0);
    CHECK_EQ_INT(ar.duplicate, 0);
    CHECK_EQ_INT(read_all(p, &g, NULL), 0);
    if (CHECK_EQ_UINT(g.n, 1)) CHECK_EQ_STR(g.data[0], "{}");
    got_free(&g);
}

static void count_change(void *ud, int64_t id, const char *path)
{
    (void)id;
    if (strncmp(path, "/rev/", 5) == 0) ++*(int *)ud;
}

/* log_changes after deletions: a watcher sees every later change, also when the
 * stream holding the highest revision was removed, and when every stream was. */
static void test_changes_after_delete(void)
{
    log_cursor rev = LOG_CURSOR_START;
    int n = 0;
    CHECK_EQ_INT(create_plain("/rev/a"), 0);
    CHECK_EQ_INT(append1("/rev/a", "1"), 0);
    CHECK_EQ_INT(create_plain("/rev/b"), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(append1("/rev/b", "x"), 0);
    CHECK_EQ_INT(log_changes(conn, &rev, count_change, &n), 0);   /* from now on */
    CHECK_EQ_INT(log_delete(conn, "/rev/b"), 0);                  /* held the highest revision */
    n = 0;
    CHECK_EQ_INT(log_changes(conn, &rev, count_change, &n), 0);
    CHECK_EQ_INT(create_plain("/rev/c"), 0);
    CHECK_EQ_INT(append1("/rev/c", "new"), 0);
    n = 0;
    CHECK_EQ_INT(log_changes(conn, &rev, count_change, &n), 0);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(append1("/rev/a", "2"), 0);
    n = 0;
    CHECK_EQ_INT(log_changes(conn, &rev, count_change, &n), 0);
    CHECK_EQ_INT(n, 1);
    log_delete(conn, "/rev/a");
    log_delete(conn, "/rev/c");
}

typedef struct tails_seen {
    int n;
    uint64_t tail;              /* the last reported for /tails/a */
} tails_seen;

static void on_tail(void *ud, int64_t id, const char *path, uint64_t tail)
{
    tails_seen *t = ud;
    (void)id;
    if (strcmp(path, "/tails/a") != 0) return;
    t->n++;
    t->tail = tail;
}

/* log_changes_tails: each changed stream with where its log ends now, on every
 * append; 0 once it is closed (a reader knows only that it changed). */
static void test_changes_tails(void)
{
    log_cursor rev = LOG_CURSOR_START;
    tails_seen t = {0, 0};
    CHECK_EQ_INT(create_plain("/tails/a"), 0);
    CHECK_EQ_INT(log_changes_tails(conn, &rev, on_tail, &t), 0);   /* from now on */
    CHECK_EQ_INT(t.n, 0);
    static const char *const three[] = {"1", "2", "3"};
    CHECK_EQ_INT(append_n("/tails/a", three, 3, NULL), 0);
    CHECK_EQ_INT(log_changes_tails(conn, &rev, on_tail, &t), 0);
    CHECK_EQ_INT(t.n, 1);
    CHECK_EQ_UINT(t.tail, 3);
    CHECK_EQ_INT(append1("/tails/a", "4"), 0);
    CHECK_EQ_INT(append1("/tails/a", "5"), 0);
    t.n = 0;
    CHECK_EQ_INT(log_changes_tails(conn, &rev, on_tail, &t), 0);
    CHECK_EQ_INT(t.n, 1);
    CHECK_EQ_UINT(t.tail, 5);
    t.n = 0;
    CHECK_EQ_INT(log_changes_tails(conn, &rev, on_tail, &t), 0);   /* nothing since */
    CHECK_EQ_INT(t.n, 0);
    log_append_req ar;
    memset(&ar, 0, sizeof ar);
    ar.close = 1;
    CHECK_EQ_INT(append_n("/tails/a", NULL, 0, &ar), 0);
    CHECK_EQ_INT(log_changes_tails(conn, &rev, on_tail, &t), 0);
    CHECK_EQ_INT(t.n, 1);
    CHECK_EQ_UINT(t.tail, 0);
    log_delete(conn, "/tails/a");
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_expiry(void)
{
    /* The rule itself, at its edges. */
    log_info info;
    memset(&info, 0, sizeof info);
    info.access_ms = 1000;
    info.ttl_s = 10;
    info.expires_ms = -1;
    CHECK_EQ_INT(log_expired(&info, 10999), 0);
    CHECK_EQ_INT(log_expired(&info, 11000), 1);
    info.ttl_s = -1;
    info.expires_ms = 5000;
    CHECK_EQ_INT(log_expired(&info, 4999), 0);
    CHECK_EQ_INT(log_expired(&info, 5000), 1);
    info.expires_ms = -1;
    CHECK_EQ_INT(log_expired(&info, INT64_MAX / 2), 0);

    /* A stream whose expiry passes disappears for every operation. */
    const char *p = "/e/s";
    int64_t exp = timefmt_now_ms() + 300;
    log_create_req cr;
    CHECK_EQ_INT(create(p, "text/plain", -1, exp, 0, &cr), 0);
    CHECK_EQ_INT(append1(p, "soon gone"), 0);
    CHECK_EQ_INT(create("/e/t", "text/plain", -1, exp, 0, NULL), 0);
    CHECK_EQ_INT(create("/e/u", "text/plain", -1, exp, 0, NULL), 0);
    CHECK_EQ_INT(log_head(conn, p, &info), 0);
    int64_t deadline = timefmt_now_ms() + 5000;
    while (timefmt_now_ms() <= exp && timefmt_now_ms() < deadline) sleep_ms(20);
    got g = {0};
    CHECK_EQ_INT(log_head(conn, p, &info), LOG_ENOTFOUND);
    CHECK_EQ_INT(read_all(p, &g, NULL), LOG_ENOTFOUND);
    CHECK_EQ_INT(append1(p, "late"), LOG_ENOTFOUND);
    CHECK_EQ_UINT(g.n, 0);
    /* Deleting an expired stream answers as if it were not there. */
    CHECK_EQ_INT(log_delete(conn, "/e/t"), LOG_ENOTFOUND);
    /* Its path is free for a new stream, which starts empty. */
    CHECK_EQ_INT(create(p, "text/plain", -1, -1, 0, &cr), 0);
    CHECK_EQ_INT(cr.created, 1);
    CHECK_OFFSET(cr.info.tail, 0, 0);
    CHECK_EQ_INT(read_all(p, &g, NULL), 0);
    CHECK_EQ_UINT(g.n, 0);
    /* The sweep removes what is left (/e/u, and /e/t if delete did not). */
    int swept = log_sweep(conn);
    CHECK(swept >= 1 && swept <= 2);
    CHECK_EQ_INT(log_sweep(conn), 0);
    CHECK_EQ_INT(log_head(conn, "/e/u", &info), LOG_ENOTFOUND);
    CHECK_EQ_INT(log_head(conn, p, &info), 0);

    /* An expiry already in the past: the create may be refused as invalid or
     * accepted, but either way there is no stream to find (and no EIO). */
    int rc = create("/e/past", "text/plain", -1, timefmt_now_ms() - 1000, 0, &cr);
    if (!CHECK(rc == 0 || rc == LOG_EINVAL))
        fprintf(stderr, "  create with a past Stream-Expires-At: %d (%s)\n", rc,
                errs_str(rc));
    CHECK_EQ_INT(log_head(conn, "/e/past", &info), LOG_ENOTFOUND);
    /* Likewise a TTL of 0 seconds. */
    rc = create("/e/ttl0", "text/plain", 0, -1, 0, &cr);
    if (!CHECK(rc == 0 || rc == LOG_EINVAL))
        fprintf(stderr, "  create with Stream-TTL 0: %d (%s)\n", rc, errs_str(rc));
}

/* A read's touch of a sliding TTL is a write group, skipped while the recorded
 * access is younger than min(ttl/10, the touch setting). */
static void test_touch(void)
{
    /* The rule at its edges. */
    log_info info;
    memset(&info, 0, sizeof info);
    info.access_ms = 1000;
    info.expires_ms = -1;
    info.ttl_s = 10;                                    /* ttl/10 = 1000 ms */
    CHECK_EQ_INT(log_touch_due(&info, 1999, 1000), 0);
    CHECK_EQ_INT(log_touch_due(&info, 2000, 1000), 1);
    CHECK_EQ_INT(log_touch_due(&info, 1499, 500), 0);   /* the setting is smaller */
    CHECK_EQ_INT(log_touch_due(&info, 1500, 500), 1);
    info.ttl_s = 2;                                     /* ttl/10 = 200 ms is smaller */
    CHECK_EQ_INT(log_touch_due(&info, 1199, 1000), 0);
    CHECK_EQ_INT(log_touch_due(&info, 1200, 1000), 1);
    CHECK_EQ_INT(log_touch_due(&info, 1000, 0), 1);     /* 0: every read touches */
    info.ttl_s = INT64_MAX / 1000;                      /* no overflow */
    CHECK_EQ_INT(log_touch_due(&info, 1999, 1000), 0);
    CHECK_EQ_INT(log_touch_due(&info, 2000, 1000), 1);
    info.ttl_s = -1;                                    /* no sliding TTL: never */
    CHECK_EQ_INT(log_touch_due(&info, INT64_MAX / 2, 0), 0);

    /* N reads within the interval: no write group at all. */
    enum { N = 20 };
    const char *p = "/touch/s";
    CHECK_EQ_INT(create(p, "text/plain", 3600, -1, 0, NULL), 0);
    CHECK_EQ_INT(append1(p, "x"), 0);
    log_set_touch_ms(lg, 60000);
    uint64_t g0, o0, g1, o1;
    log_stats(lg, &g0, &o0);
    int touched = 0;
    for (int i = 0; i < N; i++) {
        got g = {0};
        log_read_req rr;
        CHECK_EQ_INT(read_all(p, &g, &rr), 0);
        CHECK_EQ_UINT(g.n, 1);
        CHECK_EQ_INT(rr.info.ttl_s, 3600);
        int rc = log_touch(conn, &rr.info);
        CHECK(rc == 0 || rc == 1);
        touched += rc == 1;
        got_free(&g);
    }
    log_stats(lg, &g1, &o1);
    CHECK_EQ_INT(touched, 0);
    CHECK_EQ_UINT(g1 - g0, 0);

    /* The same reads past the interval (0 here): one write group each, and the
     * access time moves. */
    log_set_touch_ms(lg, 0);
    CHECK_EQ_INT(log_head(conn, p, &info), 0);
    int64_t before = info.access_ms;
    log_stats(lg, &g0, &o0);
    for (int i = 0; i < N; i++) {
        got g = {0};
        log_read_req rr;
        CHECK_EQ_INT(read_all(p, &g, &rr), 0);
        CHECK_EQ_INT(log_touch(conn, &rr.info), 1);
        got_free(&g);
    }
    log_stats(lg, &g1, &o1);
    CHECK_EQ_UINT(g1 - g0, N);
    CHECK_EQ_UINT(o1 - o0, N);
    CHECK_EQ_INT(log_head(conn, p, &info), 0);
    CHECK(info.access_ms >= before);

    /* With a real interval: skipped within it, written once it has passed. */
    log_set_touch_ms(lg, 50);
    CHECK_EQ_INT(log_head(conn, p, &info), 0);
    int64_t deadline = timefmt_now_ms() + 5000;
    while (timefmt_now_ms() - info.access_ms < 50 && timefmt_now_ms() < deadline) sleep_ms(10);
    log_stats(lg, &g0, &o0);
    CHECK_EQ_INT(log_touch(conn, &info), 1);
    log_stats(lg, &g1, &o1);
    CHECK_EQ_UINT(g1 - g0, 1);
    CHECK_EQ_INT(log_head(conn, p, &info), 0);
    if (timefmt_now_ms() - info.access_ms < 50) CHECK_EQ_INT(log_touch(conn, &info), 0);
    log_set_touch_ms(lg, LOG_TOUCH_MS_DEFAULT);

    /* A stream without a sliding TTL is never touched. */
    CHECK_EQ_INT(create("/touch/plain", "text/plain", -1, -1, 0, NULL), 0);
    CHECK_EQ_INT(log_head(conn, "/touch/plain", &info), 0);
    CHECK_EQ_INT(log_touch(conn, &info), 0);
}

static void count_path(void *ud, const char *path, const log_info *info)
{
    (void)path;
    (void)info;
    (*(int *)ud)++;
}

/* The sweep deletes many expired streams with many messages in batches: no group
 * holds more than the bounds, and everything expired is gone at the end. */
static void test_sweep_batches(void)
{
    enum { STREAMS = 20, APPENDS = 10, PER = 13, EMPTY = 10, BATCH_STREAMS = 3, BATCH_MSGS = 50, TTL_S = 2 };
    CHECK(log_sweep(conn) >= 0);    /* what earlier cases left expired */
    /* They expire TTL_S after their last write (a sliding TTL), not at one time
     * fixed before they are written: however slow the writes on a busy machine,
     * none expires before its last one. */
    char path[64];
    const char *msgs[PER];
    for (int k = 0; k < PER; k++) msgs[k] = "some message";
    for (int i = 0; i < STREAMS; i++) {
        snprintf(path, sizeof path, "/sweep/x/%d", i);
        CHECK_EQ_INT(create(path, "text/plain", TTL_S, -1, 0, NULL), 0);
        for (int a = 0; a < APPENDS; a++) CHECK_EQ_INT(append_n(path, msgs, PER, NULL), 0);
    }
    /* A fork of one, expiring with it, with messages of its own. */
    log_create_req fr;
    memset(&fr, 0, sizeof fr);
    fr.path = "/sweep/x/fork";
    fr.content_type = "text/plain";
    fr.ttl_s = TTL_S;
    fr.expires_ms = -1;
    fr.fork_from = "/sweep/x/0";
    CHECK_EQ_INT(log_create(conn, &fr), 0);
    CHECK_EQ_INT(append_n("/sweep/x/fork", msgs, PER, NULL), 0);
    /* Empty ones, made last: the first batch (newest first) is bound by streams. */
    for (int i = 0; i < EMPTY; i++) {
        snprintf(path, sizeof path, "/sweep/x/empty%d", i);
        CHECK_EQ_INT(create(path, "text/plain", TTL_S, -1, 0, NULL), 0);
    }
    int64_t exp = timefmt_now_ms() + TTL_S * 1000;
    /* One that stays. */
    CHECK_EQ_INT(create("/sweep/live", "text/plain", -1, -1, 0, NULL), 0);
    CHECK_EQ_INT(append1("/sweep/live", "kept"), 0);

    int64_t deadline = timefmt_now_ms() + 5000;
    while (timefmt_now_ms() <= exp && timefmt_now_ms() < deadline) sleep_ms(20);
    uint64_t g0, o0, g1, o1;
    log_stats(lg, &g0, &o0);
    log_sweep_limits lim = {BATCH_STREAMS, BATCH_MSGS, 600000};
    log_sweep_stats st;
    CHECK_EQ_INT(log_sweep_run(conn, &lim, &st), STREAMS + 1 + EMPTY);
    log_stats(lg, &g1, &o1);
    CHECK_EQ_INT(st.streams, STREAMS + 1 + EMPTY);
    CHECK_EQ_INT(st.messages, STREAMS * APPENDS * PER + PER);
    CHECK_EQ_INT(st.more, 0);
    CHECK_EQ_INT(st.max_batch_streams, BATCH_STREAMS);
    CHECK_EQ_INT(st.max_batch_messages, BATCH_MSGS);
    CHECK(st.batches >= (STREAMS * APPENDS * PER + PER) / BATCH_MSGS);
    /* Each batch was a write group of its own, one operation. */
    CHECK_EQ_UINT(g1 - g0, (uint64_t)st.batches);
    CHECK_EQ_UINT(o1 - o0, (uint64_t)st.batches);
    printf("  sweep: %lld streams, %lld messages in %lld groups (at most %lld streams, %lld messages a group)\n",
           (long long)st.streams, (long long)st.messages, (long long)st.batches,
           (long long)st.max_batch_streams, (long long)st.max_batch_messages);

    /* Everything expired is gone; nothing left to sweep; the live one stays. */
    int n = 0;
    log_list(conn, "/sweep/", count_path, &n);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(log_sweep(conn), 0);
    log_info info;
    CHECK_EQ_INT(log_head(conn, "/sweep/live", &info), 0);
    got g = {0};
    CHECK_EQ_INT(read_all("/sweep/live", &g, NULL), 0);
    CHECK_EQ_UINT(g.n, 1);
    got_free(&g);
}

/* ---- misc ------------------------------------------------------------------------------ */

static void test_ctype_and_errors(void)
{
    CHECK(log_ctype_equal("text/plain", "text/plain"));
    CHECK(log_ctype_equal("text/plain", "TEXT/Plain"));
    CHECK(log_ctype_equal("text/plain; charset=utf-8", "text/plain"));
    CHECK(log_ctype_equal(" text/plain ;x=y", "text/plain"));
    CHECK(!log_ctype_equal("text/plain", "text/plainx"));
    CHECK(!log_ctype_equal("text/plain", "text/html"));
    CHECK(!log_ctype_equal("application/json", "application/json-seq"));
    CHECK(!log_ctype_equal("", "text/plain"));
    /* A type with control characters (echoed into every response) is invalid. */
    CHECK(log_ctype_valid("text/plain; charset=utf-8"));
    CHECK(!log_ctype_valid(""));
    CHECK(!log_ctype_valid("text/plain\x01"));
    CHECK(!log_ctype_valid("text/plain\r\nX-Evil: 1"));
    CHECK(!log_ctype_valid("text/plain\t"));
    CHECK(!log_ctype_valid("text/\x7f"));
    CHECK(!log_ctype_valid("text/\xc3\xa9"));
    char big[LOG_CTYPE_MAX + 1];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(!log_ctype_valid(big));
    big[LOG_CTYPE_MAX - 1] = '\0';
    CHECK(log_ctype_valid(big));
    log_create_req cr;
    memset(&cr, 0, sizeof cr);
    cr.path = "/m/badtype";
    cr.content_type = "text/plain\x01";
    cr.ttl_s = cr.expires_ms = -1;
    CHECK_EQ_INT(log_create(conn, &cr), LOG_EINVAL);
    static const int codes[] = {
        LOG_OK, LOG_ENOTFOUND, LOG_ECONFLICT, LOG_ECLOSED, LOG_ECTYPE, LOG_ESEQ,
        LOG_EFENCED, LOG_EGAP, LOG_EBADSEQ, LOG_EGONE, LOG_EINVAL, LOG_EEMPTY, LOG_ERANGE,
        LOG_EBUSY, LOG_EIO, LOG_ESRCGONE, LOG_EOFFSET, LOG_EFULL, LOG_EDOWN,
    };
    int distinct = 1;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(errs_str(codes[i]), errs_str(codes[j])) == 0) distinct = 0;
    CHECK(distinct);
    CHECK(errs_str(-1000) != NULL);
}

/* ---- group commit ------------------------------------------------------------------------ */

enum { WRITERS = 8, PER_WRITER = 200 };

typedef struct writer {
    log_t *log;
    int id;
    int failures;
    char err[256];
} writer;

static void *write_many(void *arg)
{
    writer *w = arg;
    log_conn_t *c = log_conn_open(w->log, w->err, sizeof w->err);
    if (!c) {
        w->failures = PER_WRITER;
        return NULL;
    }
    for (int j = 0; j < PER_WRITER; j++) {
        char m[32];
        int n = snprintf(m, sizeof m, "w%d-%03d%.*s", w->id, j, j % 5, "xxxxx");
        log_msg msg = {m, (size_t)n};
        log_append_req r;
        memset(&r, 0, sizeof r);
        r.path = "/g/s";
        r.msgs = &msg;
        r.nmsgs = 1;
        if (log_append(c, &r) != 0) w->failures++;
    }
    log_conn_close(c);
    return NULL;
}

/* A database of its own in the test directory, with one connection and one text
 * stream at stream_path: 0, or -1 (checked and reported, nothing left open). */
static int own_db(const char *name, int sync_full, int busy_ms, const char *stream_path, log_t **l,
                  log_conn_t **c)
{
    char path[1200], err[256];
    if (pg_uri) snprintf(path, sizeof path, "%s", pg_uri);    /* one database: streams of their own */
    else snprintf(path, sizeof path, "%s/%s", dir, name);
    log_opts o = {sync_full, busy_ms, 1, 0, 0};
    *c = NULL;
    if (!CHECK((*l = log_open(path, &o, err, sizeof err)) != NULL)) {
        fprintf(stderr, "  log_open: %s\n", err);
        return -1;
    }
    if (!CHECK((*c = log_conn_open(*l, err, sizeof err)) != NULL)) {
        log_close(*l);
        return -1;
    }
    log_create_req cr;
    memset(&cr, 0, sizeof cr);
    cr.path = stream_path;
    cr.content_type = "text/plain";
    cr.ttl_s = cr.expires_ms = -1;
    CHECK_EQ_INT(log_create(*c, &cr), 0);
    return 0;
}

static void test_group_commit(void)
{
    log_t *l;
    log_conn_t *c;
    if (own_db("group.db", 1, 10000, "/g/s", &l, &c)) return;

    writer w[WRITERS];
    pthread_t t[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){l, i, 0, ""};
        CHECK_EQ_INT(pthread_create(&t[i], NULL, write_many, &w[i]), 0);
    }
    int failures = 0;
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(t[i], NULL);
        failures += w[i].failures;
        if (w[i].err[0]) fprintf(stderr, "  writer %d: %s\n", i, w[i].err);
    }
    CHECK_EQ_INT(failures, 0);

    /* All there, offsets strictly increasing and consistent with the sizes, and
     * each writer's messages in the order it wrote them. */
    got *g = calloc(1, sizeof *g);
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = "/g/s";
    rr.kind = OFFSET_START;
    rr.max_bytes = (size_t)-1;
    CHECK_EQ_INT(log_read(c, &rr, collect, g), 0);
    CHECK_EQ_UINT(g->n, WRITERS * PER_WRITER);
    CHECK_EQ_UINT(rr.info.tail.seq, WRITERS * PER_WRITER);
    int next[WRITERS] = {0};
    int offsets_ok = 1, order_ok = 1;
    uint64_t pos = 0;
    for (size_t i = 0; i < g->n && i < MAXMSG; i++) {
        if (g->at[i].seq != i || g->at[i].pos != pos) offsets_ok = 0;
        pos += g->len[i];
        int wid, j;
        char *end;
        if (g->data[i][0] != 'w') { order_ok = 0; continue; }
        wid = (int)strtol(g->data[i] + 1, &end, 10);
        if (*end != '-' || wid < 0 || wid >= WRITERS) { order_ok = 0; continue; }
        j = (int)strtol(end + 1, NULL, 10);
        if (j != next[wid]) order_ok = 0;
        next[wid] = j + 1;
    }
    CHECK(offsets_ok);
    CHECK(order_ok);
    CHECK_EQ_UINT(rr.info.tail.pos, pos);
    for (int i = 0; i < WRITERS; i++) CHECK_EQ_INT(next[i], PER_WRITER);
    got_free(g);
    free(g);

    uint64_t groups = 0, ops = 0;
    log_stats(l, &groups, &ops);
    CHECK_EQ_UINT(ops, WRITERS * PER_WRITER + 1);      /* the appends and the create */
    CHECK(groups >= 1);
    CHECK(groups <= ops);
    printf("# group commit: %" PRIu64 " operations in %" PRIu64 " groups\n", ops, groups);

    log_conn_close(c);
    log_close(l);
}

/* ---- a writer stopped while it holds the writers' lock ------------------------------- */

/* Another process took the writers' file lock and stopped (here: this test holds it
 * through a file description of its own): a commit waits for it at most the busy
 * timeout, then goes ahead under SQLite's own lock, which nobody holds. Without the
 * bound it would wait for ever (alarm() turns that into a failure). */
static void test_stopped_lock_holder(void)
{
    char lockpath[320];
    log_t *l;
    log_conn_t *c;
    if (own_db("wlock.db", 0, 300, "/wl/s", &l, &c)) return;
    snprintf(lockpath, sizeof lockpath, "%s/wlock.db-wlock", dir);
    int fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (!CHECK(fd >= 0) || !CHECK(flock(fd, LOCK_EX) == 0)) {
        if (fd >= 0) close(fd);
        log_conn_close(c);
        log_close(l);
        return;
    }
    alarm(20);
    log_msg m = {"after the wait", 14};
    log_append_req r;
    memset(&r, 0, sizeof r);
    r.path = "/wl/s";
    r.msgs = &m;
    r.nmsgs = 1;
    CHECK_EQ_INT(log_append(c, &r), 0);
    alarm(0);
    flock(fd, LOCK_UN);
    close(fd);
    /* The lock free again: taken at once. */
    CHECK_EQ_INT(log_append(c, &r), 0);
    log_info info;
    CHECK_EQ_INT(log_head(c, "/wl/s", &info), 0);
    CHECK_EQ_UINT(info.tail.seq, 2);
    log_conn_close(c);
    log_close(l);
}

/* ---- the gap hunter ------------------------------------------------------------------- */

/* Many writers append to one stream through several handles (each its own group
 * commit: on PostgreSQL, transactions that run at once) while a reader tails it
 * from where it got to: every read starts exactly where the last ended, its
 * messages are contiguous (seq and pos), so no offset is ever skipped and later
 * filled in by a commit that came late; every append got an offset of its own. */
enum { GAP_HANDLES = 3, GAP_WRITERS = 12, GAP_PER_WRITER = 150 };

typedef struct gap_writer {
    log_t *log;
    int id;
    int failures;
    uint64_t *seqs;            /* the offset each append got */
    char err[256];
} gap_writer;

typedef struct gap_reader {
    log_t *log;
    uint64_t want;             /* messages to see */
    uint64_t seen, reads, empty, skips, bad_pos, max_batch;
    int failures;
    int writers_done;          /* atomic: then the reader stops once up to date */
    char err[256];
} gap_reader;

static void *gap_write(void *arg)
{
    gap_writer *w = arg;
    log_conn_t *c = log_conn_open(w->log, w->err, sizeof w->err);
    if (!c) {
        w->failures = GAP_PER_WRITER;
        return NULL;
    }
    for (int j = 0; j < GAP_PER_WRITER; j++) {
        char m[48];
        int n = snprintf(m, sizeof m, "gap %d %d%.*s", w->id, j, j % 7, "yyyyyyy");
        log_msg msg = {m, (size_t)n};
        log_append_req r;
        memset(&r, 0, sizeof r);
        r.path = "/gap/s";
        r.msgs = &msg;
        r.nmsgs = 1;
        if (log_append(c, &r) != 0) w->failures++;
        else w->seqs[j] = r.appended.seq;
    }
    log_conn_close(c);
    return NULL;
}

typedef struct gap_page {
    offset_t expect;
    uint64_t n, skips, bad_pos;
} gap_page;

static int gap_collect(void *ud, const void *data, size_t len, offset_t at)
{
    gap_page *p = ud;
    (void)data;
    if (at.seq != p->expect.seq) p->skips++;
    if (at.pos != p->expect.pos) p->bad_pos++;
    p->expect.seq = at.seq + 1;
    p->expect.pos = at.pos + len;
    p->n++;
    return 0;
}

static void *gap_read(void *arg)
{
    gap_reader *g = arg;
    log_conn_t *c = log_conn_open(g->log, g->err, sizeof g->err);
    if (!c) {
        g->failures = 1;
        return NULL;
    }
    offset_t next = {0, 0};
    int64_t deadline = timefmt_now_ms() + 120000;
    while (g->seen < g->want && timefmt_now_ms() < deadline) {
        /* Done when up to date by a read begun after the last append committed. */
        int done = __atomic_load_n(&g->writers_done, __ATOMIC_ACQUIRE);
        gap_page p = {next, 0, 0, 0};
        log_read_req r;
        memset(&r, 0, sizeof r);
        r.path = "/gap/s";
        r.kind = OFFSET_AT;
        r.from = next;
        r.max_bytes = 4096;
        if (log_read(c, &r, gap_collect, &p) != 0) {
            g->failures++;
            break;
        }
        g->reads++;
        if (!p.n) {
            g->empty++;
            struct timespec nap = {0, 200000};  /* the writers share the cores */
            nanosleep(&nap, NULL);
        }
        if (p.n > g->max_batch) g->max_batch = p.n;
        g->skips += p.skips;
        g->bad_pos += p.bad_pos;
        g->seen += p.n;
        /* The read ends where its last message ended, and never past the tail. */
        if (r.next.seq != p.expect.seq || r.next.pos != p.expect.pos || r.next.seq > r.info.tail.seq) g->skips++;
        next = r.next;
        if (r.up_to_date && done) break;
    }
    log_conn_close(c);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_gap_hunter(const char *engine)
{
    log_t *l[GAP_HANDLES] = {NULL};
    log_conn_t *c;
    char err[256];
    if (own_db("gap.db", 0, 10000, "/gap/s", &l[0], &c)) return;
    for (int i = 1; i < GAP_HANDLES; i++) {
        log_opts o = {0, 10000, 0, 0, 0};
        char path[1200];
        if (pg_uri) snprintf(path, sizeof path, "%s", pg_uri);
        else snprintf(path, sizeof path, "%s/gap.db", dir);
        if (!CHECK((l[i] = log_open(path, &o, err, sizeof err)) != NULL)) fprintf(stderr, "  %s\n", err);
    }
    enum { N = GAP_WRITERS * GAP_PER_WRITER };
    uint64_t *seqs = calloc(N, sizeof *seqs);
    gap_writer w[GAP_WRITERS];
    gap_reader rd = {.log = l[GAP_HANDLES - 1], .want = N};
    pthread_t tw[GAP_WRITERS], tr;
    int64_t t0 = timefmt_now_ms();
    int started = 0;
    if (CHECK(seqs != NULL) && CHECK(l[GAP_HANDLES - 1] != NULL)) {
        CHECK_EQ_INT(pthread_create(&tr, NULL, gap_read, &rd), 0);
        for (int i = 0; i < GAP_WRITERS; i++) {
            w[i] = (gap_writer){l[i % GAP_HANDLES], i, 0, seqs + (size_t)i * GAP_PER_WRITER, ""};
            if (!w[i].log) w[i].log = l[0];
            CHECK_EQ_INT(pthread_create(&tw[i], NULL, gap_write, &w[i]), 0);
        }
        started = 1;
    }
    int failures = 0;
    for (int i = 0; started && i < GAP_WRITERS; i++) {
        pthread_join(tw[i], NULL);
        failures += w[i].failures;
        if (w[i].err[0]) fprintf(stderr, "  writer %d: %s\n", i, w[i].err);
    }
    int64_t t_write = timefmt_now_ms() - t0;
    __atomic_store_n(&rd.writers_done, 1, __ATOMIC_RELEASE);
    if (started) pthread_join(tr, NULL);
    int64_t t_all = timefmt_now_ms() - t0;
    CHECK_EQ_INT(failures, 0);
    CHECK_EQ_INT(rd.failures, 0);
    CHECK_EQ_UINT(rd.seen, N);
    CHECK_EQ_UINT(rd.skips, 0);
    CHECK_EQ_UINT(rd.bad_pos, 0);
    /* Every append got an offset of its own: 0 .. N-1, each once. */
    if (seqs) {
        qsort(seqs, N, sizeof *seqs, cmp_u64);
        int distinct = 1;
        for (size_t i = 0; i < N; i++)
            if (seqs[i] != i) distinct = 0;
        CHECK(distinct);
    }
    log_info info;
    CHECK_EQ_INT(log_head(c, "/gap/s", &info), 0);
    CHECK_EQ_UINT(info.tail.seq, N);
    uint64_t groups = 0, ops = 0, g1, o1;
    for (int i = 0; i < GAP_HANDLES; i++)
        if (l[i]) {
            log_stats(l[i], &g1, &o1);
            groups += g1;
            ops += o1;
        }
    printf("# gap hunter (%s): %d appends by %d threads through %d handles in %" PRId64 " ms"
           " (%.0f/s, %" PRIu64 " groups); reader: %" PRIu64 " messages in %" PRIu64 " reads (%" PRIu64
           " empty, up to %" PRIu64 " a read), done at %" PRId64 " ms; skipped offsets %" PRIu64
           ", position mismatches %" PRIu64 "\n",
           engine, N, GAP_WRITERS, GAP_HANDLES, t_write, t_write > 0 ? N * 1000.0 / (double)t_write : 0.0, groups,
           rd.seen, rd.reads, rd.empty, rd.max_batch, t_all, rd.skips, rd.bad_pos);
    free(seqs);
    log_conn_close(c);
    for (int i = GAP_HANDLES - 1; i >= 0; i--) log_close(l[i]);
}

/* The cases that hold on every engine, on lg/conn. */
/* Text that is not UTF-8: a write that would store it (a new stream's path, a
 * Producer-Id, a Stream-Seq) is LOG_EINVAL and writes nothing, on both engines
 * (SQLite stored such bytes, PostgreSQL answered "not found" for a write); a
 * look-up of such a path (head, read, delete, append, a fork's source, a listing)
 * finds nothing. Inside a group too. */
static int tx_not_utf8(log_conn_t *c, void *arg)
{
    (void)arg;
    log_create_req cr;
    memset(&cr, 0, sizeof cr);
    cr.path = "/u8/\xff";
    cr.ttl_s = cr.expires_ms = -1;
    int rc = log_tx_create(c, &cr);
    if (rc != LOG_EINVAL) return rc ? rc : -100;
    log_append_req ar;
    memset(&ar, 0, sizeof ar);
    ar.path = "/u8/s";
    ar.stream_seq = "\xc0\xaf";
    rc = log_tx_append(c, &ar);
    if (rc != LOG_EINVAL) return rc ? rc : -101;
    return log_tx_delete(c, "/u8/\xfe") == LOG_ENOTFOUND ? 0 : -102;
}

static void count_listed(void *ud, const char *path, const log_info *info)
{
    (void)path;
    (void)info;
    (*(int *)ud)++;
}

static void test_not_utf8(void)
{
    const char *p = "/u8/s";
    log_append_req ar;
    log_create_req cr;
    log_info info;
    got g = {0};
    CHECK_EQ_INT(create_plain(p), 0);
    CHECK_EQ_INT(append1(p, "a"), 0);

    CHECK_EQ_INT(create_plain("/u8/\xff"), LOG_EINVAL);
    CHECK_EQ_INT(create_plain("/u8/a\xe2\x82"), LOG_EINVAL);
    CHECK_EQ_INT(produce(p, "\xff", 0, 0, "b", &ar), LOG_EINVAL);
    CHECK_EQ_INT(produce(p, "w\xed\xa0\x80", 0, 0, "b", &ar), LOG_EINVAL);
    memset(&ar, 0, sizeof ar);
    ar.stream_seq = "1\xfe";
    CHECK_EQ_INT(append_n(p, (const char *const[]){"b"}, 1, &ar), LOG_EINVAL);
    CHECK_EQ_INT(log_transact(conn, tx_not_utf8, NULL), 0);
    /* Nothing of them was written: one message, no Stream-Seq, and a producer's
     * first append at seq 0 of a UTF-8 name still starts it. */
    CHECK_EQ_INT(log_head(conn, p, &info), 0);
    CHECK_OFFSET(info.tail, 1, 1);
    CHECK_EQ_STR(info.stream_seq, "");
    CHECK_EQ_INT(produce(p, "w\xc3\xa9", 0, 0, "b", &ar), 0);
    CHECK_EQ_INT(ar.duplicate, 0);

    /* Look-ups of such a path find nothing. */
    CHECK_EQ_INT(log_head(conn, "/u8/\xff", &info), LOG_ENOTFOUND);
    CHECK_EQ_INT(read_all("/u8/\xff", &g, NULL), LOG_ENOTFOUND);
    CHECK_EQ_INT(append1("/u8/\xff", "x"), LOG_ENOTFOUND);
    CHECK_EQ_INT(log_delete(conn, "/u8/\xff"), LOG_ENOTFOUND);
    memset(&cr, 0, sizeof cr);
    cr.path = "/u8/fork";
    cr.ttl_s = cr.expires_ms = -1;
    cr.fork_from = "/u8/\xff";
    CHECK_EQ_INT(log_create(conn, &cr), LOG_ENOTFOUND);
    int listed = 0;
    CHECK_EQ_INT(log_list(conn, "/u8/\xff", count_listed, &listed), 0);
    CHECK_EQ_INT(listed, 0);
    CHECK_EQ_INT(log_list(conn, "/u8/", count_listed, &listed), 0);
    CHECK_EQ_INT(listed, 1);
    got_free(&g);
}

/* ---- log_tx_append_many: many appends written together --------------------------------- */

typedef struct batch_arg {
    log_append_req *r;
    size_t n;
    size_t failed;
    int one_by_one;             /* log_tx_append each, as before the batch */
} batch_arg;

static int op_batch(log_conn_t *c, void *ud)
{
    batch_arg *a = ud;
    a->failed = (size_t)-1;
    if (!a->one_by_one) return log_tx_append_many(c, a->r, a->n, &a->failed);
    for (size_t i = 0; i < a->n; i++) {
        int rc = log_tx_append(c, &a->r[i]);
        if (rc) {
            a->failed = i;
            return rc;
        }
    }
    return 0;
}

enum { AM_STREAMS = 6, AM_REQS = 8, AM_MSGS = 3 };

/* The batch's requests: stream, messages (several to one stream, twice to two). */
static const int am_stream[AM_REQS] = {3, 1, 3, 0, 5, 1, 4, 2};
static const int am_count[AM_REQS] = {2, 1, 3, 1, 2, 2, 1, 1};

typedef struct am_reqs {
    char path[AM_REQS][32];
    char text[AM_REQS][AM_MSGS][32];
    log_msg m[AM_REQS][AM_MSGS];
    log_append_req r[AM_REQS];
} am_reqs;

/* The round's requests to the streams under prefix (its texts the same for every prefix). */
static void am_fill(am_reqs *q, const char *prefix, int round)
{
    memset(q, 0, sizeof *q);
    for (int i = 0; i < AM_REQS; i++) {
        snprintf(q->path[i], sizeof q->path[i], "%s/%d", prefix, am_stream[i]);
        for (int j = 0; j < am_count[i]; j++) {
            int len = snprintf(q->text[i][j], sizeof q->text[i][j], "r%d-q%d-m%d%s", round, i, j,
                               j == 1 ? " (longer)" : "");
            q->m[i][j] = (log_msg){q->text[i][j], (size_t)len};
        }
        q->r[i].path = q->path[i];
        q->r[i].content_type = "text/plain";
        q->r[i].msgs = q->m[i];
        q->r[i].nmsgs = (size_t)am_count[i];
    }
}

/* A batch of appends (several to a stream, two streams more than once) gives what
 * the same appends one by one give: each request's offset, each stream's messages,
 * each message's digest (the hash chain) and the tail's; a stream closed, deleted or
 * soft-deleted (a fork still reads it) in a batch is refused as log_append refuses it,
 * the batch's index of it said, and the operation that gives up on it leaves none of
 * the batch behind; the next batch appends after what was there. */
static void test_append_many(void)
{
    am_reqs *b = calloc(1, sizeof *b), *c = calloc(1, sizeof *c);
    got g1 = {0}, g2 = {0};
    char path[32], other[32];
    /* PostgreSQL writes a batch together; SQLite one append at a time, so that a
     * caller (sstore_tx_append_batch) need not gather one. */
    CHECK_EQ_INT(log_batches_appends(conn), test_db_st()->pg);
    for (int i = 0; i < AM_STREAMS; i++) {
        snprintf(path, sizeof path, "/am/b/%d", i);
        CHECK_EQ_INT(create_plain(path), 0);
        snprintf(path, sizeof path, "/am/c/%d", i);
        CHECK_EQ_INT(create_plain(path), 0);
    }
    for (int round = 0; round < 2; round++) {
        am_fill(b, "/am/b", round);
        am_fill(c, "/am/c", round);
        batch_arg ab = {b->r, AM_REQS, 0, 0}, ac = {c->r, AM_REQS, 0, 1};
        CHECK_EQ_INT(log_transact(conn, op_batch, &ab), 0);
        CHECK_EQ_INT(log_transact(conn, op_batch, &ac), 0);
        for (int i = 0; i < AM_REQS; i++) {
            CHECK_EQ_UINT(b->r[i].appended.seq, c->r[i].appended.seq);
            CHECK_EQ_UINT(b->r[i].appended.pos, c->r[i].appended.pos);
            CHECK_EQ_UINT(b->r[i].info.tail.seq, c->r[i].info.tail.seq);
            CHECK(memcmp(b->r[i].info.digest, c->r[i].info.digest, CHAIN_LEN) == 0);
        }
    }
    /* Offsets contiguous, in the batch's order: stream 3 got requests 0 and 2. */
    CHECK_OFFSET(b->r[0].appended, 5, 58);
    CHECK_EQ_UINT(b->r[2].appended.seq, b->r[0].appended.seq + 2);
    for (int i = 0; i < AM_STREAMS; i++) {
        log_read_req r1, r2;
        snprintf(path, sizeof path, "/am/b/%d", i);
        snprintf(other, sizeof other, "/am/c/%d", i);
        CHECK_EQ_INT(read_all(path, &g1, &r1), 0);
        CHECK_EQ_INT(read_all(other, &g2, &r2), 0);
        CHECK(g1.n > 0);
        if (!CHECK_EQ_UINT(g1.n, g2.n)) continue;
        for (size_t k = 0; k < g1.n; k++) {
            uint8_t d1[CHAIN_LEN], d2[CHAIN_LEN];
            CHECK_EQ_STR(g1.data[k], g2.data[k]);
            CHECK_EQ_UINT(g1.at[k].seq, k);
            CHECK_EQ_UINT(g1.at[k].pos, g2.at[k].pos);
            CHECK_EQ_INT(log_digest_at(conn, path, k + 1, d1), 0);
            CHECK_EQ_INT(log_digest_at(conn, other, k + 1, d2), 0);
            CHECK(memcmp(d1, d2, CHAIN_LEN) == 0);
        }
        CHECK(memcmp(r1.digest, r2.digest, CHAIN_LEN) == 0);
        got_free(&g1);
        got_free(&g2);
    }

    /* Refused in a batch as alone: closed, deleted, soft-deleted. */
    log_append_req one;
    memset(&one, 0, sizeof one);
    one.close = 1;
    CHECK_EQ_INT(append_n("/am/b/2", NULL, 0, &one), 0);
    CHECK_EQ_INT(log_delete(conn, "/am/b/4"), 0);
    log_create_req fr;
    memset(&fr, 0, sizeof fr);
    fr.path = "/am/fork";
    fr.ttl_s = fr.expires_ms = -1;
    fr.fork_from = "/am/b/5";
    CHECK_EQ_INT(log_create(conn, &fr), 0);
    CHECK_EQ_INT(log_delete(conn, "/am/b/5"), 0);
    const char *bad[3] = {"/am/b/2", "/am/b/4", "/am/b/5"};
    log_info before[2], now;
    CHECK_EQ_INT(log_head(conn, "/am/b/0", &before[0]), 0);
    CHECK_EQ_INT(log_head(conn, "/am/b/1", &before[1]), 0);
    for (int k = 0; k < 3; k++) {
        int alone = append1(bad[k], "x");
        CHECK(alone == LOG_ECLOSED || alone == LOG_ENOTFOUND || alone == LOG_EGONE);
        am_fill(b, "/am/b", 9);
        b->r[0].path = "/am/b/0";
        b->r[1].path = bad[k];
        b->r[2].path = "/am/b/1";
        batch_arg ab = {b->r, 3, 0, 0};
        CHECK_EQ_INT(log_transact(conn, op_batch, &ab), alone);
        CHECK_EQ_UINT(ab.failed, 1);
        CHECK_EQ_INT(log_head(conn, "/am/b/0", &now), 0);
        CHECK_OFFSET(now.tail, before[0].tail.seq, before[0].tail.pos);
        CHECK_EQ_INT(log_head(conn, "/am/b/1", &now), 0);
        CHECK_OFFSET(now.tail, before[1].tail.seq, before[1].tail.pos);
    }
    am_fill(b, "/am/b", 10);
    b->r[0].path = "/am/b/1";
    b->r[1].path = "/am/b/0";
    batch_arg ab = {b->r, 2, 0, 0};
    CHECK_EQ_INT(log_transact(conn, op_batch, &ab), 0);
    CHECK_OFFSET(b->r[0].appended, before[1].tail.seq, before[1].tail.pos);
    CHECK_OFFSET(b->r[1].appended, before[0].tail.seq, before[0].tail.pos);
    CHECK_EQ_INT(read_all("/am/b/0", &g1, NULL), 0);
    if (CHECK_EQ_UINT(g1.n, before[0].tail.seq + 1)) CHECK_EQ_STR(g1.data[g1.n - 1], "r10-q1-m0");
    got_free(&g1);
    free(b);
    free(c);
}

/* Two handles (two hosts' runners) commit batches over the same streams, in
 * opposite orders, again and again: none of them fails (on PostgreSQL each batch
 * locks its streams' rows in id order, so the two queue; taken one by one in the
 * batch's order they deadlock, and PostgreSQL fails one of the two: LOG_EBUSY). */
enum { ORD_STREAMS = 8, ORD_ROUNDS = 25 };

typedef struct orderer {
    log_t *l;
    int reverse;
    int failures;
} orderer;

static void *order_many(void *arg)
{
    orderer *o = arg;
    char err[256], path[ORD_STREAMS][32];
    log_msg m = {"o", 1};
    log_append_req r[ORD_STREAMS];
    log_conn_t *c = log_conn_open(o->l, err, sizeof err);
    if (!c) {
        o->failures = ORD_ROUNDS;
        return NULL;
    }
    for (int round = 0; round < ORD_ROUNDS; round++) {
        memset(r, 0, sizeof r);
        for (int i = 0; i < ORD_STREAMS; i++) {
            snprintf(path[i], sizeof path[i], "/am/o/%d", o->reverse ? ORD_STREAMS - 1 - i : i);
            r[i].path = path[i];
            r[i].msgs = &m;
            r[i].nmsgs = 1;
        }
        batch_arg a = {r, ORD_STREAMS, 0, 0};
        int rc = log_transact(c, op_batch, &a);
        if (rc) {
            o->failures++;
            fprintf(stderr, "  batch %s, round %d: %s\n", o->reverse ? "reversed" : "in order", round, errs_str(rc));
        }
    }
    log_conn_close(c);
    return NULL;
}

static void test_append_many_orders(void)
{
    log_t *l[2];
    log_conn_t *c[2];
    if (own_db("orders.db", 0, 10000, "/am/o/0", &l[0], &c[0])) return;
    if (own_db("orders.db", 0, 10000, "/am/o/1", &l[1], &c[1])) {
        log_conn_close(c[0]);
        log_close(l[0]);
        return;
    }
    for (int i = 2; i < ORD_STREAMS; i++) {
        char path[32];
        snprintf(path, sizeof path, "/am/o/%d", i);
        CHECK_EQ_INT(test_db_create(c[0], path), 0);
    }
    orderer o[2] = {{l[0], 0, 0}, {l[1], 1, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK_EQ_INT(pthread_create(&t[i], NULL, order_many, &o[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK_EQ_INT(o[0].failures + o[1].failures, 0);
    for (int i = 0; i < ORD_STREAMS; i++) {
        char path[32];
        log_info info;
        snprintf(path, sizeof path, "/am/o/%d", i);
        CHECK_EQ_INT(log_head(c[0], path, &info), 0);
        CHECK_OFFSET(info.tail, 2 * ORD_ROUNDS, 2 * ORD_ROUNDS);
    }
    for (int i = 0; i < 2; i++) {
        log_conn_close(c[i]);
        log_close(l[i]);
    }
}

typedef struct own_seen {
    int n[3];
    uint64_t tail[3];           /* the last reported for /own/0, 1, 2 */
} own_seen;

static void on_own(void *ud, int64_t id, const char *path, uint64_t tail)
{
    own_seen *o = ud;
    (void)id;
    if (strncmp(path, "/own/", 5) != 0 || path[5] < '0' || path[5] > '2' || path[6]) return;
    o->n[path[5] - '0']++;
    o->tail[path[5] - '0'] = tail;
}

/* log_changes_tails on the connection that made the changes (the runner's look
 * after its commits, which PostgreSQL answers from what the connection's groups
 * kept): every stream a batch changed, with its tail; a later change by another
 * connection comes after, with its own tail; a stream closed by the batch, 0. */
static void test_changes_own(void)
{
    log_cursor rev = LOG_CURSOR_START;
    char err[256];
    log_conn_t *other = log_conn_open(lg, err, sizeof err);
    if (!CHECK(other != NULL)) return;
    char path[3][16];
    log_msg m[2] = {{"ab", 2}, {"c", 1}};
    log_append_req r[3];
    for (int i = 0; i < 3; i++) {
        snprintf(path[i], sizeof path[i], "/own/%d", i);
        CHECK_EQ_INT(create_plain(path[i]), 0);
    }
    own_seen o;
    memset(&o, 0, sizeof o);
    CHECK_EQ_INT(log_changes_tails(conn, &rev, on_own, &o), 0);   /* from now on */
    for (int round = 0; round < 3; round++) {
        memset(r, 0, sizeof r);
        for (int i = 0; i < 3; i++) {
            r[i].path = path[i];
            r[i].msgs = m;
            r[i].nmsgs = 2;
            r[i].close = round == 2 && i == 2;
        }
        batch_arg a = {r, 3, 0, 0};
        CHECK_EQ_INT(log_transact(conn, op_batch, &a), 0);
        if (round == 1) {       /* another connection appends to /own/1 after it */
            log_msg one = {"z", 1};
            log_append_req x;
            memset(&x, 0, sizeof x);
            x.path = path[1];
            x.msgs = &one;
            x.nmsgs = 1;
            CHECK_EQ_INT(log_append(other, &x), 0);
        }
        if (round == 0) continue;   /* two batches before a look */
        memset(&o, 0, sizeof o);
        CHECK_EQ_INT(log_changes_tails(conn, &rev, on_own, &o), 0);
        for (int i = 0; i < 3; i++) CHECK(o.n[i] >= 1);
        CHECK_EQ_UINT(o.tail[0], round == 1 ? 4 : 6);
        CHECK_EQ_UINT(o.tail[1], round == 1 ? 5 : 7);
        CHECK_EQ_UINT(o.tail[2], round == 1 ? 4 : 0);
    }
    memset(&o, 0, sizeof o);
    CHECK_EQ_INT(log_changes_tails(conn, &rev, on_own, &o), 0);      /* nothing since */
    CHECK_EQ_INT(o.n[0] + o.n[1] + o.n[2], 0);
    log_conn_close(other);
    for (int i = 0; i < 3; i++) log_delete(conn, path[i]);
}

/* Two change cursors on the connection that makes the changes (the runner's loop
 * and its trace exporter once shared one): each reports every stream changed since
 * its own last look, whichever looked in between and whatever it was told. On
 * PostgreSQL what the connection's groups kept for its look (pg_own_keep) belongs
 * to one cursor; the other looks in the database. */
static void test_changes_two_cursors(void)
{
    char err[256];
    log_conn_t *other = log_conn_open(lg, err, sizeof err);
    if (!CHECK(other != NULL)) return;
    /* A feed of the log listens, as in the runner (PostgreSQL's looks from memory
     * need one); given a moment to. */
    wake_t *w = wake_start(lg, NULL, err, sizeof err);
    if (!CHECK(w != NULL)) {
        log_conn_close(other);
        return;
    }
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    char path[3][16];
    log_msg m = {"ab", 2};
    for (int i = 0; i < 3; i++) {
        snprintf(path[i], sizeof path[i], "/own/%d", i);
        CHECK_EQ_INT(create_plain(path[i]), 0);
    }
    log_cursor cur[2] = {LOG_CURSOR_START, LOG_CURSOR_START};
    own_seen o;
    uint64_t tail[3] = {0, 0, 0};
    int owed[2][3];
    memset(owed, 0, sizeof owed);
    for (int k = 0; k < 2; k++) CHECK_EQ_INT(log_changes_tails(conn, &cur[k], on_own, &o), 0);
    /* Rounds of: this connection's batch (or another's append) to some streams,
     * then a look by one cursor or the other, or by both in either order. */
    for (int round = 0; round < 24; round++) {
        int which = round % 3, by_other = round % 5 == 4;
        log_append_req r[3];
        memset(r, 0, sizeof r);
        int n = 0;
        for (int i = 0; i < 3; i++) {
            if (i == which && round % 2) continue;     /* not every stream every time */
            r[n].path = path[i];
            r[n].msgs = &m;
            r[n++].nmsgs = 1;
            tail[i]++;
            owed[0][i] = owed[1][i] = 1;
        }
        if (by_other) {
            for (int i = 0; i < n; i++) CHECK_EQ_INT(log_append(other, &r[i]), 0);
        } else {
            batch_arg a = {r, (size_t)n, 0, 0};
            CHECK_EQ_INT(log_transact(conn, op_batch, &a), 0);
        }
        int first = (round / 3) % 2, both = round % 4 == 3;
        for (int step = 0; step < 1 + both; step++) {
            int k = step ? !first : first;
            memset(&o, 0, sizeof o);
            CHECK_EQ_INT(log_changes_tails(conn, &cur[k], on_own, &o), 0);
            for (int i = 0; i < 3; i++) {
                if (owed[k][i] && !CHECK(o.n[i] >= 1))
                    fprintf(stderr, "  round %d: cursor %d missed %s\n", round, k, path[i]);
                if (o.n[i]) CHECK_EQ_UINT(o.tail[i], tail[i]);
                owed[k][i] = 0;
            }
        }
    }
    for (int k = 0; k < 2; k++) {       /* each reports what it still owes, then nothing */
        memset(&o, 0, sizeof o);
        CHECK_EQ_INT(log_changes_tails(conn, &cur[k], on_own, &o), 0);
        for (int i = 0; i < 3; i++)
            if (owed[k][i]) CHECK(o.n[i] >= 1);
        memset(&o, 0, sizeof o);
        CHECK_EQ_INT(log_changes_tails(conn, &cur[k], on_own, &o), 0);
        CHECK_EQ_INT(o.n[0] + o.n[1] + o.n[2], 0);
    }
    wake_stop(w);
    log_conn_close(other);
    for (int i = 0; i < 3; i++) log_delete(conn, path[i]);
}

/* log_read_batch: on SQLite the reads until its end see one snapshot (one read
 * transaction), a group begun meanwhile ends it first (and commits), the reads
 * after its end see what committed since; PostgreSQL has none: each read alone. */
static void test_read_batch(void)
{
    char err[256];
    log_conn_t *other = log_conn_open(lg, err, sizeof err);
    if (!CHECK(other != NULL)) return;
    int one_snapshot = !test_db_is_pg();
    CHECK_EQ_INT(log_reads_ahead(conn), !one_snapshot);   /* the one or the other */
    CHECK_EQ_INT(create_plain("/rb/a"), 0);
    CHECK_EQ_INT(create_plain("/rb/b"), 0);
    CHECK_EQ_INT(append1("/rb/a", "1"), 0);
    CHECK_EQ_INT(append1("/rb/b", "1"), 0);
    got g = {0};
    log_info info;
    for (int round = 0; round < 2; round++) {
        CHECK_EQ_INT(log_read_batch(conn, 1), 0);
        CHECK_EQ_INT(log_read_batch(conn, 1), 0);      /* once on, on */
        CHECK_EQ_INT(read_all("/rb/a", &g, NULL), 0);
        CHECK_EQ_UINT(g.n, 1 + round);
        got_free(&g);
        /* Another connection appends to both after the batch's first read. */
        log_msg m = {"2", 1};
        log_append_req x[2];
        memset(x, 0, sizeof x);
        x[0].path = "/rb/a", x[1].path = "/rb/b";
        for (int i = 0; i < 2; i++) {
            x[i].msgs = &m;
            x[i].nmsgs = 1;
            CHECK_EQ_INT(log_append(other, &x[i]), 0);
        }
        CHECK_EQ_INT(read_all("/rb/b", &g, NULL), 0);
        CHECK_EQ_UINT(g.n, (one_snapshot ? 1 : 2) + round);
        got_free(&g);
        CHECK_EQ_INT(log_head(conn, "/rb/a", &info), 0);
        CHECK_EQ_UINT(info.tail.seq, (one_snapshot ? 1 : 2) + round);
        if (round == 0) {
            CHECK_EQ_INT(log_read_batch(conn, 0), 0);
        } else {
            /* A group of this connection ends the batch: its write is made and kept. */
            CHECK_EQ_INT(append1("/rb/a", "3"), 0);
        }
        CHECK_EQ_INT(read_all("/rb/a", &g, NULL), 0);  /* after its end: what committed since */
        CHECK_EQ_UINT(g.n, round == 0 ? 2 : 4);
        got_free(&g);
        CHECK_EQ_INT(log_read_batch(conn, 0), 0);      /* off, or already ended: nothing */
    }
    CHECK_EQ_INT(read_all("/rb/b", &g, NULL), 0);
    CHECK_EQ_UINT(g.n, 3);
    got_free(&g);
    log_conn_close(other);
    log_delete(conn, "/rb/a");
    log_delete(conn, "/rb/b");
}

static void engine_cases(void)
{
    test_create();
    test_append_read();
    test_paging();
    test_long_reads();
    test_page_walk();
    test_close();
    test_stream_seq();
    test_producer();
    test_delete();
    test_not_utf8();
    test_changes_after_delete();
    test_changes_tails();
    test_expiry();
    test_touch();
    test_sweep_batches();
    test_ctype_and_errors();
    test_append_many();
    test_changes_own();
    test_changes_two_cursors();
    test_read_batch();
}

int main(void)
{
    /* On SQLite, then on PostgreSQL when DSTREAM_TEST_PG names a cluster
     * (test_db.h): all but the writers' lock, which is SQLite's. */
    for (int e = 0; test_db_engine(e); e++) {
        const char *engine = test_db_is_pg() ? "postgresql" : "sqlite";
        if (test_db_open("test-log", dir, sizeof dir, &lg, &conn) == 0) {
            CHECK_EQ_STR(log_engine_name(lg), engine);
            engine_cases();
        }
        pg_uri = test_db_is_pg() ? test_db_st()->uri : NULL;
        if (dir[0]) test_group_commit();    /* SQLite: a database of its own, in the same directory */
        if (dir[0] && !test_db_is_pg()) test_stopped_lock_holder();
        if (dir[0]) test_append_many_orders();
        if (dir[0]) test_gap_hunter(engine);
        pg_uri = NULL;
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

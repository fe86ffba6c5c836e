/* Unit tests for lib/chain.c and the hash chain the engines keep: the formula
 * (against SHA-256 of the bytes it names, put together here by hand), and on each
 * engine (test_db.h): every append path chains its messages (one message, a batch
 * of several, several appends of one stream in one group as the runner commits
 * them, writers of several threads whose appends the group commit gathers); a read
 * says the digest at the end of what it returned, and a read of nothing the tail's;
 * a fork's chain starts from its parent's digest at its fork point (and a fork at a
 * sub-offset chains the bytes it copied); the migration chains the rows written
 * before it; and the check names the first broken link of a stream whose row was
 * altered behind dstream's back, and the next one when the altered row's digest was
 * recomputed to match. */
#include "chain.h"

#include <pthread.h>
#include <string.h>

#include "backup.h"
#include "log.h"
#include "sha256.h"
#include "test_db.h"

static char dir[256];
static log_t *lg;
static log_conn_t *conn;

/* The formula put together by hand: SHA-256 over prev, the offset as text, data. */
static void by_hand(const uint8_t prev[32], uint64_t seq, uint64_t pos, const char *data, size_t len, uint8_t out[32])
{
    char buf[4096];
    int n = snprintf(buf + 32, sizeof buf - 32, "%016llu_%016llu", (unsigned long long)seq, (unsigned long long)pos);
    memcpy(buf, prev, 32);
    memcpy(buf + 32 + n, data, len);
    sha256(buf, 32 + (size_t)n + len, out);
}

static void test_formula(void)
{
    uint8_t zero[32] = {0}, a[32], b[32], c[32];
    chain_link(zero, (offset_t){0, 0}, "one", 3, a);
    by_hand(zero, 0, 0, "one", 3, b);
    CHECK(!memcmp(a, b, 32));
    /* A known value: printf '\0...\0' '0000000000000000_0000000000000000one' | sha256sum */
    char hex[CHAIN_HEX + 1];
    chain_hex(a, hex);
    CHECK_EQ_STR(hex, "48ff071482990e6ead888321a4d1e32716b9737b2067954fb44256d0f73bfb2c");
    chain_link(a, (offset_t){1, 3}, "two", 3, c);
    by_hand(a, 1, 3, "two", 3, b);
    CHECK(!memcmp(c, b, 32));
    /* Each input counts: the offset, the previous digest, the bytes. */
    chain_link(a, (offset_t){1, 4}, "two", 3, b);
    CHECK(memcmp(c, b, 32) != 0);
    chain_link(zero, (offset_t){1, 3}, "two", 3, b);
    CHECK(memcmp(c, b, 32) != 0);
    chain_link(a, (offset_t){1, 3}, "twO", 3, b);
    CHECK(memcmp(c, b, 32) != 0);
    /* Empty data; out may be prev. */
    memcpy(b, a, 32);
    chain_link(b, (offset_t){5, 9}, NULL, 0, b);
    by_hand(a, 5, 9, "", 0, c);
    CHECK(!memcmp(b, c, 32));
    /* Hex both ways; anything else refused. */
    CHECK_EQ_INT(chain_parse(hex, strlen(hex), b), 0);
    CHECK(!memcmp(a, b, 32));
    hex[3] = 'F';
    CHECK_EQ_INT(chain_parse(hex, strlen(hex), b), 0);
    hex[3] = 'g';
    CHECK_EQ_INT(chain_parse(hex, strlen(hex), b), -1);
    CHECK_EQ_INT(chain_parse(hex, 63, b), -1);
    CHECK_EQ_INT(chain_parse(NULL, 64, b), -1);
    /* A verification step: a stored digest that matches, one that does not (prev
     * then takes the stored one), none at all. */
    uint8_t prev[32] = {0};
    CHECK_EQ_INT(chain_step(prev, (offset_t){0, 0}, "one", 3, a), 1);
    CHECK(!memcmp(prev, a, 32));
    CHECK_EQ_INT(chain_step(prev, (offset_t){1, 3}, "two", 3, zero), 0);
    CHECK(!memcmp(prev, zero, 32));
    CHECK_EQ_INT(chain_step(prev, (offset_t){1, 3}, "two", 3, NULL), 0);
}

/* ---- on an engine ------------------------------------------------------------------------- */

static int create(const char *path, const char *ctype, const char *from, int64_t at, uint64_t at_pos, int64_t sub)
{
    log_create_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.content_type = ctype;
    r.ttl_s = r.expires_ms = -1;
    if (from) {
        r.fork_from = from;
        r.fork_has_offset = at >= 0;
        r.fork_offset = (offset_t){(uint64_t)(at < 0 ? 0 : at), at_pos};
        r.fork_sub = sub;
    }
    return log_create(conn, &r);
}

/* Append n messages as one request body. */
static int append(log_conn_t *c, const char *path, const char *const *msgs, size_t n)
{
    log_msg m[16];
    for (size_t i = 0; i < n; i++) m[i] = (log_msg){msgs[i], strlen(msgs[i])};
    log_append_req r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.msgs = m;
    r.nmsgs = n;
    return log_append(c, &r);
}

/* What a read returned, and its digests recomputed by hand from them. */
typedef struct seen {
    uint8_t d[32];              /* chained by hand from the start given */
    size_t n;
    int ok;                     /* each offset followed the one before */
    offset_t next;
} seen;

static int on_msg(void *ud, const void *data, size_t len, offset_t at)
{
    seen *s = ud;
    if (s->n && (at.seq != s->next.seq || at.pos != s->next.pos)) s->ok = 0;
    by_hand(s->d, at.seq, at.pos, data, len, s->d);
    s->next = (offset_t){at.seq + 1, at.pos + len};
    s->n++;
    return 0;
}

/* Read path from `from` (NULL: -1) up to max bytes, recomputing from start: 1 when
 * the read's digest is what was recomputed. */
static int read_matches(const char *path, const offset_t *from, size_t max, const uint8_t start[32], log_read_req *rr,
                        seen *s)
{
    memset(rr, 0, sizeof *rr);
    memset(s, 0, sizeof *s);
    s->ok = 1;
    memcpy(s->d, start, 32);
    rr->path = path;
    rr->kind = from ? OFFSET_AT : OFFSET_START;
    if (from) rr->from = *from;
    rr->max_bytes = max;
    if (!CHECK_EQ_INT(log_read(conn, rr, on_msg, s), 0)) return 0;
    return s->ok && !memcmp(rr->digest, s->d, 32);
}

static int head_digest(const char *path, uint8_t out[32])
{
    log_info info;
    int rc = log_head(conn, path, &info);
    if (!rc) memcpy(out, info.digest, 32);
    return rc;
}

static char problems[4096];

static void keep(void *ud, const char *p)
{
    (void)ud;
    size_t len = strlen(problems);
    snprintf(problems + len, sizeof problems - len, "%s\n", p);
}

/* The check's problems into `problems`; their number. */
static int check(void)
{
    char err[256];
    problems[0] = '\0';
    int n = backup_check(log_path(lg), 10, keep, NULL, err, sizeof err);
    if (n < 0) fprintf(stderr, "  check failed: %s\n", err);
    return n;
}

/* 1 when the check finds nothing (else what it found is printed). */
static int sound(void)
{
    int n = check();
    if (n) fprintf(stderr, "  problems:\n%s", problems);
    return n == 0;
}

static void test_appends_and_reads(void)
{
    static const uint8_t zero[32] = {0};
    log_read_req rr;
    seen s;
    uint8_t d[32], at1[32];
    static const char *const one[] = {"alpha"}, *const three[] = {"b", "cc", "ddd"}, *const json3[] = {"1", "[2]", "{}"};
    CHECK_EQ_INT(create("c", "text/plain", NULL, -1, 0, 0), 0);
    /* Empty: the chain's start, zeros. */
    CHECK_EQ_INT(head_digest("c", d), 0);
    CHECK(!memcmp(d, zero, 32));
    CHECK(read_matches("c", NULL, 1 << 20, zero, &rr, &s));
    CHECK(!memcmp(rr.digest, zero, 32));
    CHECK_EQ_INT(append(conn, "c", one, 1), 0);
    CHECK_EQ_INT(append(conn, "c", three, 3), 0);       /* several in one statement (PostgreSQL's arrays) */
    CHECK(read_matches("c", NULL, 1 << 20, zero, &rr, &s));
    CHECK_EQ_INT(s.n, 4);
    CHECK_EQ_INT(head_digest("c", d), 0);
    CHECK(!memcmp(d, rr.digest, 32));
    /* A read that stops early: the digest where it stopped, and a read from there
     * chains on from it to the tail's. */
    CHECK(read_matches("c", NULL, 5, zero, &rr, &s));
    CHECK_EQ_INT(s.n, 1);
    memcpy(at1, rr.digest, 32);
    offset_t next = rr.next;
    CHECK(read_matches("c", &next, 1 << 20, at1, &rr, &s));
    CHECK_EQ_INT(s.n, 3);
    CHECK(!memcmp(rr.digest, d, 32));
    /* At the tail: nothing read, the tail's digest; log_digest_at anywhere. */
    next = rr.next;
    CHECK(read_matches("c", &next, 1 << 20, d, &rr, &s));
    CHECK_EQ_INT(s.n, 0);
    CHECK(!memcmp(rr.digest, d, 32));
    uint8_t x[32];
    CHECK_EQ_INT(log_digest_at(conn, "c", 1, x), 0);
    CHECK(!memcmp(x, at1, 32));
    CHECK_EQ_INT(log_digest_at(conn, "c", 0, x), 0);
    CHECK(!memcmp(x, zero, 32));
    CHECK_EQ_INT(log_digest_at(conn, "c", 4, x), 0);
    CHECK(!memcmp(x, d, 32));
    CHECK_EQ_INT(log_digest_at(conn, "c", 5, x), LOG_ERANGE);
    CHECK_EQ_INT(log_digest_at(conn, "nope", 0, x), LOG_ENOTFOUND);
    /* A JSON stream created with its first messages. */
    log_msg m[3];
    for (int i = 0; i < 3; i++) m[i] = (log_msg){json3[i], strlen(json3[i])};
    log_create_req cr = {.path = "j", .content_type = "application/json", .ttl_s = -1, .expires_ms = -1, .msgs = m,
                         .nmsgs = 3};
    CHECK_EQ_INT(log_create(conn, &cr), 0);
    CHECK(read_matches("j", NULL, 1 << 20, zero, &rr, &s));
    CHECK_EQ_INT(s.n, 3);
    CHECK(!memcmp(cr.info.digest, rr.digest, 32));
    CHECK(sound());
}

/* Appends of one stream and another, several each, in one group (the runner's commits). */
static int group_of_appends(log_conn_t *c, void *arg)
{
    (void)arg;
    static const char *const a[] = {"g1"}, *const b[] = {"g2", "g3"};
    for (int i = 0; i < 3; i++) {
        log_msg m[2] = {{a[0], 2}, {b[i % 2], 2}};
        log_append_req r = {.path = i % 2 ? "g" : "h", .msgs = m, .nmsgs = (size_t)(1 + i % 2)};
        int rc = log_tx_append(c, &r);
        if (rc) return rc;
        r.path = "g";
        r.nmsgs = 1;
        if ((rc = log_tx_append(c, &r))) return rc;
    }
    return 0;
}

#define THREADS 4
#define PER_THREAD 40

static void *writer(void *arg)
{
    char err[256], msg[32];
    log_conn_t *c = log_conn_open(lg, err, sizeof err);
    if (!c) return NULL;
    for (int i = 0; i < PER_THREAD; i++) {
        snprintf(msg, sizeof msg, "w%d-%d", (int)(intptr_t)arg, i);
        const char *one[] = {msg};
        if (append(c, i % 2 ? "t1" : "t2", one, 1)) break;
    }
    log_conn_close(c);
    return NULL;
}

static void test_groups(void)
{
    static const uint8_t zero[32] = {0};
    log_read_req rr;
    seen s;
    uint8_t d[32];
    CHECK_EQ_INT(create("g", "text/plain", NULL, -1, 0, 0), 0);
    CHECK_EQ_INT(create("h", "text/plain", NULL, -1, 0, 0), 0);
    CHECK_EQ_INT(log_transact(conn, group_of_appends, NULL), 0);
    CHECK(read_matches("g", NULL, 1 << 20, zero, &rr, &s));
    CHECK_EQ_INT(s.n, 5);
    CHECK_EQ_INT(head_digest("g", d), 0);
    CHECK(!memcmp(d, rr.digest, 32));
    CHECK(read_matches("h", NULL, 1 << 20, zero, &rr, &s));
    CHECK_EQ_INT(s.n, 2);
    /* Writers of several threads: their appends gathered into groups. */
    CHECK_EQ_INT(create("t1", "text/plain", NULL, -1, 0, 0), 0);
    CHECK_EQ_INT(create("t2", "text/plain", NULL, -1, 0, 0), 0);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, writer, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    CHECK(read_matches("t1", NULL, 1 << 20, zero, &rr, &s));
    CHECK_EQ_INT(s.n, THREADS * PER_THREAD / 2);
    CHECK_EQ_INT(head_digest("t1", d), 0);
    CHECK(!memcmp(d, rr.digest, 32));
    CHECK(read_matches("t2", NULL, 1 << 20, zero, &rr, &s));
    CHECK_EQ_INT(s.n, THREADS * PER_THREAD / 2);
    CHECK(sound());
}

static void test_forks(void)
{
    static const uint8_t zero[32] = {0};
    static const char *const msgs[] = {"one", "two!", "three"}, *const own[] = {"fork's"};
    log_read_req rr;
    seen s;
    uint8_t p1[32], p3[32], d[32], x[32];
    CHECK_EQ_INT(create("p", "text/plain", NULL, -1, 0, 0), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(append(conn, "p", &msgs[i], 1), 0);
    CHECK(read_matches("p", NULL, 3, zero, &rr, &s));
    memcpy(p1, rr.digest, 32);                          /* after "one" */
    CHECK_EQ_INT(head_digest("p", p3), 0);
    /* A fork after "one": its chain starts from p's digest there. */
    CHECK_EQ_INT(create("f", NULL, "p", 1, 3, 0), 0);
    CHECK_EQ_INT(head_digest("f", d), 0);
    CHECK(!memcmp(d, p1, 32));
    CHECK_EQ_INT(append(conn, "f", own, 1), 0);
    CHECK(read_matches("f", NULL, 1 << 20, zero, &rr, &s));     /* through its parent's message */
    CHECK_EQ_INT(s.n, 2);
    by_hand(p1, 1, 3, own[0], strlen(own[0]), x);
    CHECK(!memcmp(rr.digest, x, 32));
    CHECK_EQ_INT(log_digest_at(conn, "f", 1, x), 0);
    CHECK(!memcmp(x, p1, 32));
    /* A fork of a fork below the first's fork point: the root's digest; at the tail of p. */
    CHECK_EQ_INT(create("ff", NULL, "f", 1, 3, 0), 0);
    CHECK_EQ_INT(head_digest("ff", d), 0);
    CHECK(!memcmp(d, p1, 32));
    CHECK_EQ_INT(create("pt", NULL, "p", -1, 0, 0), 0);
    CHECK_EQ_INT(head_digest("pt", d), 0);
    CHECK(!memcmp(d, p3, 32));
    CHECK_EQ_INT(create("p0", NULL, "p", 0, 0, 0), 0);
    CHECK_EQ_INT(head_digest("p0", d), 0);
    CHECK(!memcmp(d, zero, 32));
    /* A fork at a sub-offset copies the first bytes of the record there: chained
     * from the digest before that record. */
    CHECK_EQ_INT(create("fs", NULL, "p", 1, 3, 2), 0);
    CHECK(read_matches("fs", NULL, 1 << 20, zero, &rr, &s));
    CHECK_EQ_INT(s.n, 2);
    by_hand(p1, 1, 3, "tw", 2, x);
    CHECK(!memcmp(rr.digest, x, 32));
    /* The parent deleted (kept for its forks): the fork's chain still reads. */
    CHECK_EQ_INT(log_delete(conn, "p"), 0);
    CHECK(read_matches("f", NULL, 1 << 20, zero, &rr, &s));
    CHECK(sound());
}

/* The digest of message seq of path's own rows, set to d by hand. */
static int set_digest(const char *path, int64_t seq, const uint8_t d[32])
{
    char hex[CHAIN_HEX + 1], sql[512];
    chain_hex(d, hex);
    snprintf(sql, sizeof sql,
             test_db_is_pg() ? "UPDATE messages SET digest = decode('%s', 'hex') WHERE seq = %lld AND stream ="
                               " (SELECT id FROM streams WHERE path = '%s')"
                             : "UPDATE messages SET digest = x'%s' WHERE seq = %lld AND stream ="
                               " (SELECT id FROM streams WHERE path = '%s')",
             hex, (long long)seq, path);
    return test_db_sql(sql, NULL, 0);
}

static int set_data(const char *path, int64_t seq, const char *data)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             test_db_is_pg() ? "UPDATE messages SET data = convert_to('%s', 'UTF8') WHERE seq = %lld AND stream ="
                               " (SELECT id FROM streams WHERE path = '%s')"
                             : "UPDATE messages SET data = CAST('%s' AS BLOB) WHERE seq = %lld AND stream ="
                               " (SELECT id FROM streams WHERE path = '%s')",
             data, (long long)seq, path);
    return test_db_sql(sql, NULL, 0);
}

static void test_tamper(void)
{
    static const uint8_t zero[32] = {0};
    static const char *const msgs[] = {"aaa", "bbb", "ccc", "ddd"};
    log_read_req rr;
    seen s;
    uint8_t d1[32], d2[32], x[32];
    CHECK_EQ_INT(create("x", "text/plain", NULL, -1, 0, 0), 0);
    CHECK_EQ_INT(create("y", "text/plain", NULL, -1, 0, 0), 0);
    CHECK_EQ_INT(append(conn, "x", msgs, 4), 0);
    CHECK_EQ_INT(append(conn, "y", msgs, 2), 0);
    CHECK_EQ_INT(check(), 0);
    CHECK(read_matches("x", NULL, 6, zero, &rr, &s));
    memcpy(d2, rr.digest, 32);                          /* after the second */
    CHECK(read_matches("x", NULL, 3, zero, &rr, &s));
    memcpy(d1, rr.digest, 32);
    /* One message's bytes altered: its own link breaks, and only x's. */
    CHECK_EQ_INT(set_data("x", 2, "cXc"), 0);
    CHECK_EQ_INT(check(), 1);
    if (!CHECK(strstr(problems, "hash chain broken: path=x offset=0000000000000002_0000000000000006\n") == problems))
        fprintf(stderr, "  problems: %s", problems);
    /* Its digest recomputed to match: the next link breaks. */
    chain_link(d2, (offset_t){2, 6}, "cXc", 3, x);
    CHECK_EQ_INT(set_digest("x", 2, x), 0);
    CHECK_EQ_INT(check(), 1);
    if (!CHECK(strstr(problems, "hash chain broken: path=x offset=0000000000000003_0000000000000009\n") == problems))
        fprintf(stderr, "  problems: %s", problems);
    /* Put back: sound again. */
    CHECK_EQ_INT(set_data("x", 2, "ccc"), 0);
    chain_link(d2, (offset_t){2, 6}, "ccc", 3, x);
    CHECK_EQ_INT(set_digest("x", 2, x), 0);
    CHECK_EQ_INT(check(), 0);
    /* The last message altered and its digest recomputed: the stream row's digest
     * (the tail's) is the link that breaks. */
    CHECK_EQ_INT(set_data("y", 1, "bXb"), 0);
    chain_link(d1, (offset_t){1, 3}, "bXb", 3, x);
    CHECK_EQ_INT(set_digest("y", 1, x), 0);
    CHECK_EQ_INT(check(), 1);
    if (!CHECK(strstr(problems, "stream's digest is not its chain's at the tail: path=y\n") == problems))
        fprintf(stderr, "  problems: %s", problems);
    /* The first message: its link from zeros. */
    CHECK_EQ_INT(set_data("x", 0, "AAA"), 0);
    CHECK(check() >= 2);
    CHECK(strstr(problems, "hash chain broken: path=x offset=0000000000000000_0000000000000000\n") != NULL);
}

/* A database written before the chain: the migration gives its rows their digests,
 * the same an append would have given them. */
static void test_migration(void)
{
    static const uint8_t zero[32] = {0};
    static const char *const msgs[] = {"one", "two", "three"};
    log_read_req rr;
    seen s;
    uint8_t f_before[32], m_before[32], d[32];
    CHECK_EQ_INT(create("m", "text/plain", NULL, -1, 0, 0), 0);
    CHECK_EQ_INT(append(conn, "m", msgs, 3), 0);
    CHECK_EQ_INT(create("mf", NULL, "m", 2, 6, 0), 0);
    CHECK_EQ_INT(append(conn, "mf", msgs, 1), 0);
    CHECK_EQ_INT(create("mff", NULL, "mf", 1, 3, 0), 0);
    CHECK_EQ_INT(append(conn, "mff", msgs + 2, 1), 0);
    CHECK_EQ_INT(head_digest("m", m_before), 0);
    CHECK_EQ_INT(head_digest("mff", f_before), 0);
    log_conn_close(conn);
    log_close(lg);
    conn = NULL;
    /* The columns gone and the migration not applied: the schema before it. */
    CHECK_EQ_INT(test_db_sql("ALTER TABLE messages DROP COLUMN digest; ALTER TABLE streams DROP COLUMN digest;"
                             " DELETE FROM schema_version WHERE version = 17",
                             NULL, 0),
                 0);
    char err[256];
    /* A check of the database as it is: no chain to look at, nothing wrong. */
    CHECK_EQ_INT(backup_check(test_db_st()->uri, 10, keep, NULL, err, sizeof err), 0);
    log_opts o = {0, 5000, 1, 0, 0};
    lg = log_open(test_db_st()->uri, &o, err, sizeof err);
    if (!CHECK(lg != NULL)) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    conn = log_conn_open(lg, err, sizeof err);
    if (!CHECK(conn != NULL)) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK_EQ_INT(head_digest("m", d), 0);
    CHECK(!memcmp(d, m_before, 32));
    CHECK_EQ_INT(head_digest("mff", d), 0);
    CHECK(!memcmp(d, f_before, 32));
    CHECK(read_matches("mff", NULL, 1 << 20, zero, &rr, &s));
    CHECK_EQ_INT(s.n, 2);
    CHECK(sound());
}

int main(void)
{
    test_formula();
    for (int e = 0; test_db_engine(e); e++) {
        if (test_db_open("test-chain", dir, sizeof dir, &lg, &conn) == 0) {
            test_appends_and_reads();
            test_groups();
            test_forks();
            test_tamper();
            test_migration();
        }
        test_db_close(dir, lg, conn);
    }
    return TEST_MAIN_END();
}

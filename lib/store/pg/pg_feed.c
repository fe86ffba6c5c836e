/* The PostgreSQL engine's change feed: noticing commits made by any process on
 * any host.
 *
 * Each process has one LISTEN connection (channel "dstream"); every committed
 * group that changed streams sent one NOTIFY naming them ("12,40,41", or "*",
 * pg_engine.c). The descriptor the caller (lib/wake) polls is a duplicate of that
 * connection's socket, kept at the same number across reconnections (dup2), so
 * the caller's poll never needs to learn a new one. event() (and moved(), for a
 * caller that polls without the descriptor) consumes the input and collects the
 * notified ids; changes() reports them.
 *
 * The backstop: notifications are not durable (a connection lost and made again
 * misses those sent meanwhile), so the feed also keeps a cursor on the streams'
 * xid column (every change stamps it with pg_current_xact_id()):
 * changes_since(cursor) reports the rows with xid >= cursor (found through
 * stream_changes, whose rows name the streams each committed group changed:
 * sql/pg/021_stream_changes.sql; a row there naming none makes it scan the
 * stream rows), then moves the cursor
 * to the xmin of the snapshot it read with (the oldest transaction still running
 * then): a change that commits later has an xid at or above it, so none is missed,
 * some could be reported twice (harmless). A row whose xid is that of a NOTIFY
 * the feed already reported (each payload names its transaction: "xid:ids") is
 * not reported again by the feed's own look. The feed looks through the cursor on "*",
 * after a reconnection (then also reporting -1: every waiter wakes and looks), and
 * at least once a second (moved() says so). A deleted stream's row is gone: it
 * is reported by the NOTIFY only (or by the -1 after a reconnection).
 *
 * The groups of this process need not wait for their NOTIFY to come back: a
 * group that committed tells its process's feeds at once (pg_feed_committed,
 * from the group's end, before lib/log.c's on_commit pokes the watcher), which
 * report its streams at their next look, and skip its NOTIFY when it comes and
 * its rows in the cursor's looks (by its xid, noted before the COMMIT:
 * pg_feed_expect, since the NOTIFY, or a look's snapshot, can see the commit
 * before the COMMIT's answer comes): a reader in the committing process is woken one
 * trip through the server's notification queue and LISTEN connection sooner,
 * and once. Other processes and hosts learn it by the NOTIFY as before.
 *
 * A connection that looks through the cursor itself (the runner's, after each of
 * its commits) keeps what its own groups changed when every change was to a row
 * the group held (pg_own_keep): its next look reports those from memory and has
 * the server skip their rows. That is one cursor's (the last positioned on the
 * connection): another cursor's look there is in the database, skips nothing and
 * leaves it alone. While a feed of the log listens, and every change
 * the process noted since that connection's last look in the database was such a
 * group of its own, the look needs no statement at all (look_kept): a change by
 * anyone else is noted before anyone is told of it (another connection's group at
 * its end, another host's when its NOTIFY is read, a LISTEN connection lost or
 * made again), and whoever looks after that looks in the database, from its cursor
 * (which a look from memory leaves where it was), so that a change committed
 * before its NOTIFY was read is reported by the look its NOTIFY causes; and at
 * least once a second.
 *
 * Switchover: a primary fenced read-only (default_transaction_read_only, before a
 * standby is promoted) keeps its connections but no longer sees the streams'
 * writes. The look through the cursor notices (transaction_read_only is on), and
 * the feed then connects again, LISTEN and cursor, as after a lost connection, and
 * has every connection of the process made again (pg_stale_all: one that only
 * reads would never learn it): a multi-host target with
 * target_session_attrs=read-write finds the new primary. */
#include "pg.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FEED_IDS_MAX 1024       /* notified ids kept between two looks ("everything" past it) */
#define FEED_XIDS_MAX 4096      /* notified transactions remembered until the next look */
#define FEED_BACKSTOP_MS 1000   /* look through the cursor at least this often */
#define FEED_LOCAL_MAX 1024     /* ids committed here kept between two looks ("everything" past it) */
#define FEED_OWN_MAX 64         /* transactions committed here whose NOTIFY is to be skipped */

struct store_feed {
    log_t *log;
    log_conn_t *conn;           /* for changes_since */
    PGconn *listen;
    int fd;                     /* what the caller polls: dup of the socket, or of quiet[0] */
    int quiet[2];               /* a pipe nobody writes: fd while not connected */
    log_cursor cur;
    int64_t last_look_ms;
    int lost;                   /* the LISTEN connection was lost: reconnect, report everything */
    int all;                    /* a "*" came: look through the cursor */
    int nids;
    int64_t ids[FEED_IDS_MAX];
    int nxids, xids_over;       /* notified transactions since the last look (over: too many) */
    int64_t xids[FEED_XIDS_MAX];    /* Commits of this process (pg_feed_committed, from other threads), under mu. */
    pthread_mutex_t mu;
    int nlocal, local_all;
    int64_t local[FEED_LOCAL_MAX];
    int nlxids;
    int64_t lxids[FEED_LOCAL_MAX];  /* their transactions: the cursor's look skips them */
    int64_t own[FEED_OWN_MAX];      /* ring: their NOTIFYs, skipped when they come */
    unsigned own_next;
    int npending;
    int64_t pending[FEED_OWN_MAX];  /* expected, not yet committed: reported by pg_feed_committed */
    int64_t skip[FEED_XIDS_MAX + FEED_LOCAL_MAX + FEED_OWN_MAX];    /* the look's (skips) */
    store_feed *next_feed;          /* in feeds */
    int up;                         /* listening (atomic: look_kept asks from other threads) */
};

/* Every open feed of the process (pg_feed_committed finds those of its log). */
static pthread_mutex_t feeds_mu = PTHREAD_MUTEX_INITIALIZER;
static store_feed *feeds;

/* Changes to streams the process learned of (atomic): its groups' commits, and
 * its feeds' NOTIFYs of others' and their LISTEN connections lost and made again
 * (look_kept). */
static uint64_t changes_noted;

static void noted(void)
{
    __atomic_add_fetch(&changes_noted, 1, __ATOMIC_SEQ_CST);
}

void pg_changes_note(pg_conn *c, int kept)
{
    noted();
    if (kept) c->own_noted++;
}

/* Whether a feed of l listens: every change by anyone else reaches it (noted). */
static int listened(const log_t *l)
{
    int up = 0;
    pthread_mutex_lock(&feeds_mu);
    for (store_feed *f = feeds; f && !up; f = f->next_feed)
        up = f->log == l && __atomic_load_n(&f->up, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&feeds_mu);
    return up;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int skips(store_feed *f, int64_t *hold);

/* A set of stream ids (ids are above 0), open addressing; v NULL: every add is new. */
typedef struct id_set {
    int64_t *v;
    size_t mask;
} id_set;

static void id_set_init(id_set *s, int n)
{
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    s->v = calloc(cap, sizeof *s->v);
    s->mask = cap - 1;
}

/* Where id is in s, or the empty slot where it would go. */
static size_t id_set_slot(const id_set *s, int64_t id)
{
    size_t h = (size_t)((uint64_t)id * 0x9e3779b97f4a7c15ull >> 20) & s->mask;
    while (s->v[h] && s->v[h] != id) h = (h + 1) & s->mask;
    return h;
}

/* 1 if id was not in s (now it is). */
static int id_set_add(id_set *s, int64_t id)
{
    if (!s->v) return 1;
    size_t h = id_set_slot(s, id);
    if (s->v[h] == id) return 0;
    s->v[h] = id;
    return 1;
}

int pg_own_keep(pg_conn *c, int64_t xid)
{
    if (!c->look_ms || c->changed_unkept || c->changed_all || c->nchanged == 0 || c->nown_xids == PG_OWN_GROUPS ||
        c->nown + c->nchanged > PG_OWN_MAX)
        return 0;
    /* Every stream it changed is a row it holds, as it changed it (the rows, one
     * a stream, found through a set of the ids changed). */
    int rows[PG_CHANGED_MAX], n = 0;
    size_t plen = 0;
    id_set changed;
    id_set_init(&changed, c->nchanged);
    if (!changed.v) return 0;
    for (int i = 0; i < c->nchanged; i++) id_set_add(&changed, c->changed[i]);
    for (int k = 0; k < c->nrows && n <= c->nchanged; k++) {
        const pg_row *r = &c->rows[k];
        if (changed.v[id_set_slot(&changed, r->info.id)] != r->info.id) continue;
        if (r->stale || r->deleted || n == c->nchanged) n = c->nchanged + 1;   /* not as it changed it */
        else rows[n++] = k, plen += strlen(r->path) + 1;
    }
    free(changed.v);
    if (n != c->nchanged) return 0;
    if (c->nown + c->nchanged > c->own_cap) {
        int cap = c->own_cap ? c->own_cap : 256;
        while (cap < c->nown + c->nchanged) cap *= 2;
        pg_own *o = realloc(c->own, (size_t)cap * sizeof *o);
        if (!o) return 0;
        c->own = o;
        c->own_cap = cap;
    }
    if (c->own_plen + plen > c->own_pcap) {
        size_t cap = c->own_pcap ? c->own_pcap : 8192;
        while (cap < c->own_plen + plen) cap *= 2;
        char *p = realloc(c->own_paths, cap);
        if (!p) return 0;
        c->own_paths = p;
        c->own_pcap = cap;
    }
    for (int i = 0; i < c->nchanged; i++) {
        const pg_row *r = &c->rows[rows[i]];
        size_t len = strlen(r->path) + 1;
        memcpy(c->own_paths + c->own_plen, r->path, len);
        c->own[c->nown++] = (pg_own){r->info.id, r->info.closed ? 0 : r->info.tail.seq, c->own_plen};
        c->own_plen += len;
    }
    c->own_xids[c->nown_xids++] = xid;
    return 1;
}

/* The transactions of c's groups kept (pg_own_keep) as an xid8[] literal, "{}"
 * for none. */
static void own_xids(const pg_conn *c, char *out, size_t cap)
{
    size_t k = 0;
    out[k++] = '{';
    for (int i = 0; i < c->nown_xids; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%" PRId64, i ? "," : "", c->own_xids[i]);
    out[k++] = '}';
    out[k] = '\0';
}

/* This connection's own changes kept, the latest of each stream first (its tail
 * the newest), but those of streams in seen (NULL set: none); then forgotten (their
 * transactions stay, skipped by the next look in the database). */
static void own_report(pg_conn *pc, id_set *seen, void (*fn)(void *, int64_t, const char *),
                       void (*tail_fn)(void *, int64_t, const char *, uint64_t), void *ud)
{
    for (int i = pc->nown - 1; i >= 0; i--) {
        const pg_own *o = &pc->own[i];
        if (!id_set_add(seen, o->id)) continue;
        const char *path = pc->own_paths + o->path;
        if (tail_fn) tail_fn(ud, o->id, path, o->tail);
        else fn(ud, o->id, path);
    }
    pc->nown = 0;
    pc->own_plen = 0;
}

/* A look answered from memory alone: the changes the process noted since c's last
 * look in the database were all c's own groups kept, a feed of its log listened
 * meanwhile (a change by anyone else, another connection of the process included,
 * is noted before its waiters are told, and whoever looks after that looks in the
 * database), and that look is less than the backstop's period old. Its cursor
 * stays; the next look in the database skips the groups reported here. The
 * runner's look after each of its commits was a statement that found nothing but
 * its own writes. 1 if answered. */
static int look_kept(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *),
                     void (*tail_fn)(void *, int64_t, const char *, uint64_t), void *ud)
{
    pg_conn *pc = pgc(c);
    if (!pc->look_ms || cur->v < 0 || mono_ms() - pc->look_ms >= FEED_BACKSTOP_MS) return 0;
    if (__atomic_load_n(&changes_noted, __ATOMIC_SEQ_CST) - pc->look_noted != pc->own_noted) return 0;
    if (!listened(c->log)) return 0;
    id_set seen = {NULL, 0};
    if (pc->nown > 1) id_set_init(&seen, pc->nown);
    own_report(pc, &seen, fn, tail_fn, ud);
    free(seen.v);
    pc->looks_kept++;
    return 1;
}

/* Rows stamped at or above the cursor's xid, but (f not NULL) those whose xid is
 * in f's skip list, made when the rows have come (skips).
 * *ro (may be NULL) is set when the server is read-only. */
static int changes_skip(log_conn_t *c, log_cursor *cur, store_feed *f,
                        void (*fn)(void *, int64_t, const char *),
                        void (*tail_fn)(void *, int64_t, const char *, uint64_t), void *ud, int *ro)
{
    int rc;
    pg_params p;
    char from[24], mine[PG_OWN_GROUPS * 21 + 3];
    pg_conn *pc = pgc(c);
    /* The connection's own groups kept are one cursor's (pg.h, look_cur): the last
     * to be positioned there. One that lost them finds their rows from its own
     * position, which a look from memory never moved past them. */
    if (!f && (!pc->look_cur || cur->v < 0)) pc->look_cur = cur;
    int owner = f || pc->look_cur == cur;
    if (!f && owner && look_kept(c, cur, fn, tail_fn, ud)) return 0;
    /* What is noted from here on, the statement's snapshot may not have seen. */
    uint64_t noted_now = __atomic_load_n(&changes_noted, __ATOMIC_SEQ_CST);
    pg_params_init(&p);
    /* From LOG_CURSOR_START: only the position (no row has an xid above 2^62). */
    snprintf(from, sizeof from, "%" PRId64, cur->v < 0 ? INT64_MAX : cur->v);
    pg_text(&p, from);
    if (owner) own_xids(pc, mine, sizeof mine);
    else snprintf(mine, sizeof mine, "{}");
    pg_text(&p, mine);
    /* The stream rows that stream_changes names from the cursor on, each by its
     * primary key; or, when one of its rows there names none (NULL: any stream,
     * or what a trim deleted), every stream row stamped from the cursor on, a
     * scan. The two branches behind one-time filters. The rows of this
     * connection's own groups kept (pg_own_keep) are not read: reported from
     * here. */
    PGresult *r = pg_run(c,
                         "WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS x,"
                         " current_setting('transaction_read_only') AS ro),"
                         " ch AS (SELECT ids FROM stream_changes WHERE xid >= $1::xid8"
                         "  AND (ids IS NULL OR xid <> ALL ($2::xid8[]))),"
                         " a AS (SELECT EXISTS (SELECT 1 FROM ch WHERE ids IS NULL) AS scan),"
                         " st AS (SELECT id, path, xid, deleted, closed, tail_seq FROM streams"
                         "  WHERE (SELECT scan FROM a) AND xid >= $1::xid8"
                         " UNION ALL SELECT t.id, t.path, t.xid, t.deleted, t.closed, t.tail_seq"
                         "  FROM (SELECT DISTINCT unnest(ids) AS id FROM ch) n JOIN LATERAL"
                         "  (SELECT * FROM streams WHERE id = n.id AND xid >= $1::xid8) t ON true"
                         "  WHERE NOT (SELECT scan FROM a))"
                         " SELECT s.x, st.id, st.path, st.xid::text, s.ro,"
                         " CASE WHEN st.deleted <> 0 OR st.closed <> 0 THEN 0 ELSE st.tail_seq END"
                         " FROM s LEFT JOIN st ON true",
                         &p, 0, &rc);
    if (!r) return rc;
    /* A read-only server (a primary fenced for a switchover, still up): what it says
     * is soon no longer the streams' state. The connection is made again at its
     * next statement; the caller's LISTEN connection too (ro). */
    const char *ro_s = pg_text_of(r, 0, 4);
    if (ro_s && !strcmp(ro_s, "on")) {
        pgc(c)->readonly = 1;
        if (ro) *ro = 1;
    }
    int64_t next = cur->v;
    const int64_t *skip = f ? f->skip : NULL;
    int64_t hold = INT64_MAX;
    int nskip = f ? skips(f, &hold) : 0;
    /* The ids reported, when this connection's own changes are to follow: each
     * stream once, at the latest tail (a row here, of a change by another after
     * them, is as new as theirs or newer). */
    id_set seen_ids = {NULL, 0};
    if (owner && pc->nown && cur->v >= 0) id_set_init(&seen_ids, PQntuples(r) + pc->nown);
    for (int i = 0; i < PQntuples(r); i++) {
        if (i == 0) next = strtoll(pg_text_of(r, 0, 0), NULL, 10);
        if (pg_null_at(r, i, 1) || cur->v < 0) continue;
        int64_t xid = strtoll(pg_text_of(r, i, 3), NULL, 10);
        int seen = 0;
        for (int k = 0; k < nskip && !seen; k++) seen = skip[k] == xid;
        if (seen) continue;
        const char *path = pg_text_of(r, i, 2);
        if (tail_fn) tail_fn(ud, pg_int_of(r, i, 1), path ? path : "", (uint64_t)pg_int_of(r, i, 5));
        else fn(ud, pg_int_of(r, i, 1), path ? path : "");
        id_set_add(&seen_ids, pg_int_of(r, i, 1));
    }
    PQclear(r);
    int first = cur->v < 0;
    cur->v = next < hold ? next : hold;
    if (!owner) return 0;
    /* This connection's own (none before a cursor's first position). */
    if (first) pc->nown = 0;
    own_report(pc, &seen_ids, fn, tail_fn, ud);
    free(seen_ids.v);
    pc->nown_xids = 0;
    pc->look_noted = noted_now;
    pc->own_noted = 0;
    pc->look_ms = mono_ms();
    return 0;
}

/* The change feed on a connection (store_feed_ops.changes_since). */
static int changes_since(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *), void *ud)
{
    return changes_skip(c, cur, NULL, fn, NULL, ud, NULL);
}

/* The same with each stream's tail (store_feed_ops.changes_tails). */
static int changes_tails(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *, uint64_t),
                         void *ud)
{
    return changes_skip(c, cur, NULL, NULL, fn, ud, NULL);
}

static int listen_on(store_feed *f)
{
    char err[256];
    if (f->listen) PQfinish(f->listen);
    f->listen = pg_connect(f->log->target, err, sizeof err);
    if (f->listen) {
        PGresult *r = PQexec(f->listen, "LISTEN dstream");
        int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (ok && PQsetnonblocking(f->listen, 1) == 0 && dup2(PQsocket(f->listen), f->fd) >= 0) {
            /* What others committed while nobody listened: in the database. */
            noted();
            __atomic_store_n(&f->up, 1, __ATOMIC_SEQ_CST);
            return 0;
        }
        PQfinish(f->listen);
        f->listen = NULL;
    }
    /* Not connected: the descriptor stays quiet; the backstop tries again. */
    dup2(f->quiet[0], f->fd);
    return -1;
}

/* The LISTEN connection is lost (or its server fenced): until it listens again,
 * no look is answered from memory. */
static void feed_lost(store_feed *f)
{
    __atomic_store_n(&f->up, 0, __ATOMIC_SEQ_CST);
    noted();
    f->lost = 1;
    dup2(f->quiet[0], f->fd);
}

static void feed_close(store_feed *f)
{
    if (!f) return;
    pthread_mutex_lock(&feeds_mu);
    for (store_feed **p = &feeds; *p; p = &(*p)->next_feed)
        if (*p == f) {
            *p = f->next_feed;
            break;
        }
    pthread_mutex_unlock(&feeds_mu);
    pthread_mutex_destroy(&f->mu);
    if (f->listen) PQfinish(f->listen);
    if (f->fd >= 0) close(f->fd);
    if (f->quiet[0] >= 0) close(f->quiet[0]);
    if (f->quiet[1] >= 0) close(f->quiet[1]);
    pg_conn_close(f->conn);
    free(f);
}

static void ignore(void *ud, int64_t id, const char *path)
{
    (void)ud, (void)id, (void)path;
}

static store_feed *feed_open(log_t *l, char *err, size_t errlen)
{
    store_feed *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    f->log = l;
    f->fd = f->quiet[0] = f->quiet[1] = -1;
    pthread_mutex_init(&f->mu, NULL);
    f->cur = LOG_CURSOR_START;
    if (pipe2(f->quiet, O_CLOEXEC) || (f->fd = fcntl(f->quiet[0], F_DUPFD_CLOEXEC, 0)) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        goto fail;
    }
    if (!(f->conn = pg_conn_open(l, err, errlen))) goto fail;
    /* Listen first, then position the cursor: nothing committed between is lost. */
    if (listen_on(f)) {
        snprintf(err, errlen, "cannot LISTEN on the database");
        goto fail;
    }
    if (changes_since(f->conn, &f->cur, ignore, NULL)) {
        snprintf(err, errlen, "cannot read the streams' change cursor");
        goto fail;
    }
    f->last_look_ms = mono_ms();
    pthread_mutex_lock(&feeds_mu);
    f->next_feed = feeds;
    feeds = f;
    pthread_mutex_unlock(&feeds_mu);
    return f;
fail:
    feed_close(f);
    return NULL;
}

static int feed_fd(store_feed *f)
{
    return f->fd;
}

/* LISTEN stays on while the process runs: notifications cost a process that
 * nobody waits in one read each. */
static void feed_watch(store_feed *f, int on)
{
    (void)f, (void)on;
}

static void note_id(store_feed *f, int64_t id)
{
    for (int i = 0; i < f->nids; i++)
        if (f->ids[i] == id) return;
    if (f->nids < FEED_IDS_MAX) f->ids[f->nids++] = id;
    else f->all = 1;
}

static void take_payload(store_feed *f, const char *s)
{
    char *end;
    long long xid = strtoll(s, &end, 10);
    if (end == s || *end != ':') {      /* not ours: look through the cursor */
        noted();
        f->all = 1;
        return;
    }
    s = end + 1;
    /* A group of this process: reported when it committed (pg_feed_committed). */
    int own = 0;
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < FEED_OWN_MAX && !own; i++)
        if (f->own[i] == (int64_t)xid) {
            f->own[i] = 0;
            own = 1;
        }
    pthread_mutex_unlock(&f->mu);
    if (own) return;
    noted();            /* another's: every connection's next look is in the database */
    if (!strcmp(s, "*")) {
        f->all = 1;
        return;
    }
    /* Its rows are reported now: the cursor's look need not report them again. */
    if (f->nxids < FEED_XIDS_MAX) f->xids[f->nxids++] = (int64_t)xid;
    else f->xids_over = 1;
    while (*s) {
        long long v = strtoll(s, &end, 10);
        if (end == s) {         /* not ours: look through the cursor */
            f->all = 1;
            return;
        }
        note_id(f, (int64_t)v);
        s = *end == ',' ? end + 1 : end;
    }
}

/* Read what the LISTEN connection has (never waits): 1 if anything was notified
 * or the connection is lost. */
static int drain(store_feed *f)
{
    if (!f->listen || !PQconsumeInput(f->listen) || PQstatus(f->listen) != CONNECTION_OK) {
        feed_lost(f);               /* (a dead socket reads as ready for ever: quiet) */
        return 1;
    }
    int got = 0;
    PGnotify *n;
    while ((n = PQnotifies(f->listen))) {
        take_payload(f, n->extra ? n->extra : "*");
        PQfreemem(n);
        got = 1;
    }
    return got;
}

void pg_feed_expect(log_t *l, int64_t xid, int all)
{
    pthread_mutex_lock(&feeds_mu);
    for (store_feed *f = feeds; f; f = f->next_feed) {
        if (f->log != l) continue;
        pthread_mutex_lock(&f->mu);
        f->own[f->own_next++ % FEED_OWN_MAX] = xid;
        /* Its rows can be in a look's snapshot before pg_feed_committed has told
         * us: skipped by that look (else reported by it, and by the commit's ids). */
        if (!all && f->npending < FEED_OWN_MAX) f->pending[f->npending++] = xid;
        pthread_mutex_unlock(&f->mu);
    }
    pthread_mutex_unlock(&feeds_mu);
}

void pg_feed_committed(log_t *l, int64_t xid, int committed, const int64_t *ids, int n, int all)
{
    pthread_mutex_lock(&feeds_mu);
    for (store_feed *f = feeds; f; f = f->next_feed) {
        if (f->log != l) continue;
        pthread_mutex_lock(&f->mu);
        for (int i = 0; i < f->npending; i++)
            if (f->pending[i] == xid) {
                f->pending[i] = f->pending[--f->npending];
                break;
            }
        /* Kept as they come (the look drops repeats): past the room, "everything".
         * Not known to have committed: the backstop's look reports what did. */
        if (committed && (all || f->nlocal + n > FEED_LOCAL_MAX)) {
            f->local_all = 1;
        } else if (committed) {
            for (int i = 0; i < n; i++) f->local[f->nlocal++] = ids[i];
        }
        if (committed && f->nlxids < FEED_LOCAL_MAX) f->lxids[f->nlxids++] = xid;
        pthread_mutex_unlock(&f->mu);
    }
    pthread_mutex_unlock(&feeds_mu);
}

/* The look's skip list, made once its rows have come (a commit in its snapshot
 * was expected before it was made): the commits reported (xids), and those of
 * this process that their ids report (pending, lxids; not while local_all, as
 * take_local). Their number; *hold: the oldest pending, where the cursor stops
 * (its outcome may yet be lost: the next looks then report its rows). */
static int skips(store_feed *f, int64_t *hold)
{
    int n = 0;
    if (!f->xids_over) {
        memcpy(f->skip, f->xids, (size_t)f->nxids * sizeof f->xids[0]);
        n = f->nxids;
    }
    pthread_mutex_lock(&f->mu);
    if (!f->local_all) {
        for (int i = 0; i < f->npending; i++) {
            f->skip[n++] = f->pending[i];
            if (f->pending[i] < *hold) *hold = f->pending[i];
        }
        for (int i = 0; i < f->nlxids; i++) f->skip[n++] = f->lxids[i];
    }
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* The commits of this process since the last look, into what the look reports:
 * 1 if there were any. */
static int take_local(store_feed *f)
{
    pthread_mutex_lock(&f->mu);
    int got = f->nlocal || f->local_all;
    if (f->local_all) {
        f->all = 1;
    } else {
        for (int i = 0; i < f->nlocal; i++) note_id(f, f->local[i]);
    }
    /* Reported by id: the cursor's look need not report their rows again. Come as
     * "everything" (a group that changed more streams than its NOTIFY names, or
     * more than the room here), they are that look's to report: skipped by it,
     * they were reported by nobody, and a waiter of this process slept through
     * them (the runner through a commit that ended 2,000 sessions at once). */
    for (int i = 0; i < f->nlxids && !f->local_all; i++) {
        if (f->nxids < FEED_XIDS_MAX) f->xids[f->nxids++] = f->lxids[i];
        else f->xids_over = 1;
    }
    f->nlocal = f->local_all = f->nlxids = 0;
    pthread_mutex_unlock(&f->mu);
    return got;
}

static int feed_event(store_feed *f)
{
    return drain(f);
}

static int feed_moved(store_feed *f)
{
    take_local(f);
    if (!f->lost) drain(f);
    return f->nids || f->all || f->lost || mono_ms() - f->last_look_ms >= FEED_BACKSTOP_MS;
}

static int feed_changes(store_feed *f, void (*fn)(void *, int64_t, const char *), void *ud)
{
    take_local(f);
    int backstop = f->all || f->lost || mono_ms() - f->last_look_ms >= FEED_BACKSTOP_MS;
    if (f->lost && listen_on(f) == 0) {
        f->lost = 0;
        fn(ud, -1, "");         /* what was notified meanwhile is lost: every waiter looks */
    }
    int nids = f->nids;
    f->nids = 0;
    for (int i = 0; i < nids; i++) fn(ud, f->ids[i], "");
    if (!backstop) return 0;
    f->all = 0;
    f->last_look_ms = mono_ms();
    int ro = 0;
    int rc = changes_skip(f->conn, &f->cur, f, fn, NULL, ud, &ro);
    /* The look moves the cursor only to its snapshot's xmin: while an older
     * transaction runs (another host's, autovacuum's), the rows of a commit already
     * reported come again in the next look, so its xid stays skipped until the
     * cursor has passed it (else a waiter is woken twice for one commit). */
    int keep = 0;
    for (int i = 0; i < f->nxids && !f->xids_over; i++)
        if (f->cur.v < 0 || f->xids[i] >= f->cur.v) f->xids[keep++] = f->xids[i];
    f->nxids = keep;
    f->xids_over = 0;
    if (ro) {
        /* Fenced for a switchover: its NOTIFYs have stopped, the new primary's never
         * come here. Listen again (the target's read-write host, when it has one)
         * and wake every waiter then. */
        feed_lost(f);
        pg_stale_all();         /* and every connection of the process reads there too */
    }
    return rc;
}

const store_feed_ops pg_feed_ops = {
    .open = feed_open,
    .close = feed_close,
    .fd = feed_fd,
    .watch = feed_watch,
    .event = feed_event,
    .moved = feed_moved,
    .changes = feed_changes,
    .changes_since = changes_since,
    .changes_tails = changes_tails,
};

/* log: durable append-only streams, on whichever engine keeps the database.
 *
 * Storage is the engine's (lib/store.h; SQLite's essay is at the top of
 * lib/store/sqlite/sq_streams.c): a stream's row keeps its tail, closed flag, last
 * Stream-Seq and TTL data; its messages are rows keyed by (stream, seq); a fork
 * stores only its own messages and reads the rest from its ancestors. This file
 * holds what is the same on every engine: opening the handles, and the group
 * commit.
 *
 * Group commit. With acknowledged meaning durable, a commit costs an fsync, and an
 * fsync costs far more than the SQL of an append. So writers do not commit one by
 * one: each write is an operation (a function plus its arguments) placed on the
 * process's queue. When no commit is in flight, the thread that finds its own
 * operation queued becomes the leader: it takes the whole queue, asks the engine
 * to begin one write transaction on its own connection, runs every operation
 * between the engine's op_begin and op_end (a savepoint, so one failing operation
 * rolls back alone), commits once and wakes the others. Operations that arrive
 * meanwhile wait for the next leader, which is how groups form under load without
 * any timer: an idle system commits at once, a busy one amortises each fsync over
 * everyone who arrived while the last one ran. An operation is answered only
 * after the commit that holds it has succeeded; if that commit fails every
 * operation in the group fails. An engine may run a group made only of appends
 * as a trial, without a savepoint each (store.h: group_trial): should one of
 * them fail, the engine rolls the whole transaction back (LOG_ERERUN) and the
 * group runs again, each operation in its savepoint, so that a failing append
 * still fails alone. Other processes serialise with us through the
 * engine's own locks. An engine with many writers (group_lock) is first handed
 * every stream path the group's creates, appends and deletes will write, so that
 * it locks them in one global order before any operation runs: two hosts' groups
 * that touch the same streams in opposite orders then queue instead of
 * deadlocking. */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store.h"
#include "timefmt.h"
#include "utf8.h"
#include "store/pg/pg_engine.h"
#include "store/sqlite/sq_engine.h"

typedef struct log_op {
    int (*fn)(log_conn_t *c, void *arg);
    void *arg;
    int rc;
    const char *lock[2];        /* the stream paths it writes, for the engine's group_lock */
    int rerun;                  /* it may run again (store.h: group_trial): an append */
    int done;                   /* committed (or failed); else, when posted: lead */
    sem_t sem;                  /* posted once: done, or this thread leads next */
    struct log_op *next;
} log_op;

/* ---- handles ---------------------------------------------------------------- */

const store_engine *store_engine_for(const char *target, char *err, size_t errlen)
{
    if (!target || !*target) {
        snprintf(err, errlen, "no database given");
        return NULL;
    }
    if (log_target_is_uri(target)) return &store_pg;
    return &store_sqlite;
}

log_t *log_open(const char *target, const log_opts *opts, char *err, size_t errlen)
{
    const store_engine *e = store_engine_for(target, err, errlen);
    if (!e) return NULL;
    log_t *l = calloc(1, sizeof *l);
    if (!l || !(l->target = strdup(target))) {
        free(l);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->engine = e;
    l->opts.synchronous_full = opts ? opts->synchronous_full : 1;
    l->opts.busy_timeout_ms = opts && opts->busy_timeout_ms > 0 ? opts->busy_timeout_ms : 5000;
    l->opts.migrate = opts ? opts->migrate : 1;
    l->opts.cache_kib = opts ? opts->cache_kib : 0;
    l->opts.read_cache_kib = opts && opts->read_cache_kib > 0 ? opts->read_cache_kib : 0;
    l->touch_ms = LOG_TOUCH_MS_DEFAULT;
    pthread_mutex_init(&l->mu, NULL);
    if (e->open(l, err, errlen)) {
        pthread_mutex_destroy(&l->mu);
        free(l->target);
        free(l);
        return NULL;
    }
    return l;
}

void log_opts_default(log_opts *o)
{
    o->synchronous_full = 1;
    o->busy_timeout_ms = 5000;
    o->migrate = 1;
    o->cache_kib = 0;
    o->read_cache_kib = 0;
}

const char *log_path(const log_t *l)
{
    return l->target;
}

const char *log_engine_name(const log_t *l)
{
    return l->engine->name;
}

int log_schema_version(const log_t *l)
{
    return l->engine->schema_version();
}

void log_set_max_bytes(log_t *l, int64_t max_bytes)
{
    l->max_bytes = max_bytes;
}

void log_set_touch_ms(log_t *l, int64_t touch_ms)
{
    l->touch_ms = touch_ms < 0 ? 0 : touch_ms;
}

void log_close(log_t *l)
{
    if (!l) return;
    l->engine->close(l);
    pthread_mutex_destroy(&l->mu);
    free(l->target);
    free(l);
}

int log_writing(log_t *l)
{
    return __atomic_load_n(&l->writing, __ATOMIC_ACQUIRE);
}

void log_on_commit(log_t *l, void (*fn)(void *), void *ud)
{
    l->on_commit = fn;
    l->on_commit_ud = ud;
}

void log_stats(log_t *l, uint64_t *groups, uint64_t *ops)
{
    pthread_mutex_lock(&l->mu);
    *groups = l->groups;
    *ops = l->ops;
    pthread_mutex_unlock(&l->mu);
}

void log_read_cache_stats(log_t *l, uint64_t *hits, uint64_t *misses, uint64_t *bytes)
{
    *hits = *misses = *bytes = 0;
    if (l->engine->read_cache_stats) l->engine->read_cache_stats(l, hits, misses, bytes);
}

log_conn_t *log_conn_open(log_t *l, char *err, size_t errlen)
{
    return l->engine->conn_open(l, err, errlen);
}

void log_conn_close(log_conn_t *c)
{
    if (c) c->log->engine->conn_close(c);
}

/* ---- group commit ------------------------------------------------------------ */

/* Hand the engine the paths the group will write (group_lock), when it wants them. */
static int lock_paths(log_conn_t *c, log_op *group)
{
    const store_engine *e = c->log->engine;
    if (!e->group_lock) return 0;
    size_t n = 0;
    for (log_op *op = group; op; op = op->next) n += 2;
    const char **paths = calloc(n ? n : 1, sizeof *paths);
    if (!paths) return 0;       /* no order taken: a deadlock still fails as LOG_EBUSY */
    size_t k = 0;
    for (log_op *op = group; op; op = op->next)
        for (int i = 0; i < 2; i++)
            if (op->lock[i]) paths[k++] = op->lock[i];
    int rc = k ? e->group_lock(c, paths, k) : 0;
    free(paths);
    return rc;
}

/* Run one group: everything queued when the leader took over. */
static void lead(log_conn_t *c, log_op *group)
{
    const store_engine *e = c->log->engine;
    __atomic_store_n(&c->log->writing, 1, __ATOMIC_RELEASE);
    c->group_ops = 0;
    c->group_trial = 1;
    for (log_op *op = group; op; op = op->next) {
        c->group_ops++;
        if (!op->rerun) c->group_trial = 0;
    }
    int rc;
    for (;;) {
        rc = e->group_begin(c);
        if (rc == 0) {
            rc = lock_paths(c, group);
            for (log_op *op = rc ? NULL : group; op; op = op->next) {
                if ((rc = e->op_begin(c))) break;
                c->op_undone = 0;
                op->rc = op->fn(c, op->arg);
                rc = e->op_end(c, op->rc);
                if (c->op_undone && op->rc >= 0) op->rc = c->op_undone;
                if (rc) break;
            }
            rc = e->group_end(c, rc);
        }
        /* The trial failed (store.h: group_trial), rolled back: once more, each
         * operation in a savepoint of its own. */
        if (rc != LOG_ERERUN) break;
        if (!c->group_trial) {
            rc = LOG_EIO;       /* an engine's bug: no trial to give up */
            break;
        }
        c->group_trial = 0;
    }
    c->group_trial = 0;
    /* Whatever the outcome: the watcher that ignored file events while we wrote
     * (log_writing) looks now. */
    __atomic_store_n(&c->log->writing, 0, __ATOMIC_RELEASE);
    if (c->log->on_commit) c->log->on_commit(c->log->on_commit_ud);
    e->group_release(c);
    if (rc)
        for (log_op *op = group; op; op = op->next) op->rc = rc;
}

/* Queue fn(arg) for the next group commit and wait until it has committed (or
 * failed). Returns fn's result, or LOG_EBUSY/LOG_EIO/LOG_EFULL/LOG_EDOWN when the group failed.
 *
 * Each waiting thread sleeps on a semaphore of its own and is posted exactly once:
 * when its group has committed, or when it is to lead the next group (the leader
 * hands over to the first operation queued during its commit). No thread wakes
 * for someone else's commit, and nobody takes the mutex to find out. */
/* log_transact, for an operation that writes the streams at p1 and p2 (either NULL);
 * rerun: it may run again as part of a trial (store.h: group_trial). */
static int transact_paths(log_conn_t *c, int (*fn)(log_conn_t *, void *), void *arg, const char *p1,
                          const char *p2, int rerun)
{
    log_t *l = c->log;
    log_op op = {fn, arg, 0, {p1, p2}, rerun, 0, {{0}}, NULL};
    sem_init(&op.sem, 0, 0);
    pthread_mutex_lock(&l->mu);
    if (l->tail) l->tail->next = &op;
    else l->head = &op;
    l->tail = &op;
    int leads = !l->leading;
    l->leading = 1;
    pthread_mutex_unlock(&l->mu);
    if (!leads) {
        while (sem_wait(&op.sem) && errno == EINTR) {}
        if (op.done) {
            sem_destroy(&op.sem);
            return op.rc;
        }
    }
    /* Lead: take everything queued (op is among it), commit it as one group. */
    pthread_mutex_lock(&l->mu);
    log_op *group = l->head;
    l->head = l->tail = NULL;
    pthread_mutex_unlock(&l->mu);
    lead(c, group);
    size_t n = 0;
    pthread_mutex_lock(&l->mu);
    log_op *next_leader = l->head;
    if (!next_leader) l->leading = 0;
    for (log_op *o = group; o; o = o->next) n++;
    l->groups++;
    l->ops += n;
    pthread_mutex_unlock(&l->mu);
    for (log_op *o = group, *next; o; o = next) {
        next = o->next;     /* o may be gone once posted */
        o->done = 1;
        if (o != &op) sem_post(&o->sem);
    }
    if (next_leader) sem_post(&next_leader->sem);
    sem_destroy(&op.sem);
    return op.rc;
}

int log_transact(log_conn_t *c, int (*fn)(log_conn_t *, void *), void *arg)
{
    return transact_paths(c, fn, arg, NULL, NULL, 0);
}

/* ---- the streams' operations, on the engine --------------------------------- */

static int op_create(log_conn_t *c, void *arg)
{
    return store_of(c)->streams->create(c, arg);
}

static int op_append(log_conn_t *c, void *arg)
{
    return store_of(c)->streams->append(c, arg);
}

typedef struct delete_arg {
    const char *path;
    int answer;                 /* what the caller gets once the group committed */
} delete_arg;

/* An expired stream is removed too, but answered as missing: the removal must
 * commit, so the engine's answer comes back outside the operation. */
static int op_delete(log_conn_t *c, void *arg)
{
    delete_arg *d = arg;
    return store_of(c)->streams->remove(c, d->path, &d->answer);
}

static int op_touch(log_conn_t *c, void *arg)
{
    return store_of(c)->streams->touch(c, *(int64_t *)arg);
}

static int op_sweep(log_conn_t *c, void *arg)
{
    return store_of(c)->streams->sweep(c, arg);
}

/* ---- the inputs' text, checked before the engine --------------------------------
 *
 * Text a write stores (a new stream's path, a Producer-Id, a Stream-Seq) must be
 * UTF-8, on every engine: LOG_EINVAL otherwise (a database whose text is UTF-8
 * only, PostgreSQL's, could not hold it, and SQLite would keep bytes no JSON
 * document can name). A path a request looks up is another matter: on such an
 * engine (store_engine.utf8_text) one that is not UTF-8 names nothing, and is
 * answered as missing here, before the engine sees it; on SQLite it goes on, as
 * a stream made before the rule (fcgi/stream.c) may have such a path and is still
 * read, appended to and deleted. */

static int text_ok(const char *s)
{
    return !s || utf8_valid(s, strlen(s));
}

/* 0 if path may name a stream on c's engine, else LOG_ENOTFOUND. */
static int lookable(log_conn_t *c, const char *path)
{
    return store_of(c)->utf8_text && !text_ok(path) ? LOG_ENOTFOUND : 0;
}

static int create_check(log_conn_t *c, const log_create_req *r)
{
    if (!text_ok(r->path)) return LOG_EINVAL;
    if (r->content_type && !log_ctype_valid(r->content_type)) return LOG_EINVAL;
    return lookable(c, r->fork_from);
}

static int append_check(log_conn_t *c, const log_append_req *r)
{
    if (!text_ok(r->producer) || !text_ok(r->stream_seq)) return LOG_EINVAL;
    if (r->content_type && *r->content_type && !log_ctype_valid(r->content_type)) return LOG_EINVAL;
    return lookable(c, r->path);
}

int log_create(log_conn_t *c, log_create_req *r)
{
    int rc = create_check(c, r);
    return rc ? rc : transact_paths(c, op_create, r, r->path, r->fork_from, 0);
}

int log_tx_create(log_conn_t *c, log_create_req *r)
{
    int rc = create_check(c, r);
    return rc ? rc : op_create(c, r);
}

int log_append(log_conn_t *c, log_append_req *r)
{
    int rc = append_check(c, r);
    return rc ? rc : transact_paths(c, op_append, r, r->path, NULL, 1);
}

int log_tx_append(log_conn_t *c, log_append_req *r)
{
    int rc = append_check(c, r);
    return rc ? rc : op_append(c, r);
}

int log_batches_appends(log_conn_t *c)
{
    return store_of(c)->streams->append_many != NULL;
}

int log_tx_append_many(log_conn_t *c, log_append_req *r, size_t n, size_t *failed)
{
    size_t dummy;
    if (!failed) failed = &dummy;
    *failed = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = append_check(c, &r[i]);
        if (rc) {
            *failed = i;
            return rc;
        }
    }
    const store_streams_ops *s = store_of(c)->streams;
    if (s->append_many) return n ? s->append_many(c, r, n, failed) : 0;
    for (size_t i = 0; i < n; i++) {
        int rc = op_append(c, &r[i]);
        if (rc) {
            *failed = i;
            return rc;
        }
    }
    return 0;
}

int log_delete(log_conn_t *c, const char *path)
{
    delete_arg d = {path, 0};
    int rc = lookable(c, path);
    if (!rc) rc = transact_paths(c, op_delete, &d, path, NULL, 0);
    return rc ? rc : d.answer;
}

int log_tx_delete(log_conn_t *c, const char *path)
{
    delete_arg d = {path, 0};
    int rc = lookable(c, path);
    if (!rc) rc = op_delete(c, &d);
    return rc ? rc : d.answer;
}

int log_touch(log_conn_t *c, const log_info *info)
{
    if (!info->id || !log_touch_due(info, timefmt_now_ms(), c->log->touch_ms)) return 0;
    int64_t id = info->id;
    int rc = log_transact(c, op_touch, &id);
    return rc < 0 ? rc : 1;
}

int log_sweep_run(log_conn_t *c, const log_sweep_limits *lim, log_sweep_stats *st)
{
    log_sweep_stats mine;
    if (!st) st = &mine;
    memset(st, 0, sizeof *st);
    int streams = lim && lim->streams > 0 ? lim->streams : LOG_SWEEP_STREAMS;
    int64_t messages = lim && lim->messages > 0 ? lim->messages : LOG_SWEEP_MESSAGES;
    int64_t budget = lim && lim->budget_ms > 0 ? lim->budget_ms : LOG_SWEEP_BUDGET_MS;
    int64_t end = timefmt_now_ms() + budget;
    for (;;) {
        log_sweep_batch b = {streams, messages, 0, 0, 0};
        int rc = log_transact(c, op_sweep, &b);
        if (rc < 0) return rc;
        st->batches++;
        st->streams += b.streams;
        st->messages += b.messages;
        if (b.streams > st->max_batch_streams) st->max_batch_streams = b.streams;
        if (b.messages > st->max_batch_messages) st->max_batch_messages = b.messages;
        /* A batch that did nothing cannot be followed by one that does more. */
        if (!b.more || (b.streams == 0 && b.messages == 0)) break;
        if (timefmt_now_ms() >= end) {
            st->more = 1;
            break;
        }
    }
    return st->streams > INT32_MAX ? INT32_MAX : (int)st->streams;
}

int log_sweep(log_conn_t *c)
{
    return log_sweep_run(c, NULL, NULL);
}

int log_read(log_conn_t *c, log_read_req *r, log_msg_fn fn, void *ud)
{
    int rc = lookable(c, r->path);
    if (rc) {
        r->count = r->bytes = 0;
        r->up_to_date = 0;
        return rc;
    }
    return store_of(c)->streams->read(c, r, fn, ud);
}

size_t log_read_ahead(log_conn_t *c, const log_read_req *r, size_t n)
{
    const store_streams_ops *ops = store_of(c)->streams;
    if (!ops->read_ahead) return 0;
    /* Only the reads log_read would run (a path the engine refuses would fail
     * the statement of all of them). */
    log_read_req ok[LOG_READ_AHEAD_MAX];
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof ok / sizeof *ok; i++)
        if (!lookable(c, r[i].path)) ok[k++] = r[i];
    return ops->read_ahead(c, ok, k);
}

int log_reads_ahead(log_conn_t *c)
{
    return store_of(c)->streams->read_ahead != NULL;
}

int log_read_batch(log_conn_t *c, int on)
{
    const store_streams_ops *ops = store_of(c)->streams;
    return ops->read_batch ? ops->read_batch(c, on) : 0;
}

int log_head(log_conn_t *c, const char *path, log_info *info)
{
    int rc = lookable(c, path);
    return rc ? rc : store_of(c)->streams->head(c, path, info);
}

int log_digest_at(log_conn_t *c, const char *path, uint64_t seq, uint8_t out[CHAIN_LEN])
{
    int rc = lookable(c, path);
    return rc ? rc : store_of(c)->streams->digest_at(c, path, seq, out);
}

int log_sizes(log_conn_t *c, void (*fn)(void *ud, const char *what, int64_t bytes), void *ud)
{
    return store_of(c)->sizes(c, fn, ud);
}

int log_tx_nest_begin(log_conn_t *c)
{
    return store_of(c)->nest_begin(c);
}

int log_tx_nest_end(log_conn_t *c, int undo)
{
    return store_of(c)->nest_end(c, undo);
}

int log_list(log_conn_t *c, const char *prefix, void (*fn)(void *ud, const char *path, const log_info *info),
             void *ud)
{
    if (!prefix) prefix = "";
    if (lookable(c, prefix)) return 0;      /* no stream's path starts so there */
    return store_of(c)->streams->list(c, prefix, fn, ud);
}

void log_release_memory(log_conn_t *c)
{
    const store_engine *e = c->log->engine;
    if (e->release_memory) e->release_memory(c);
}

int log_changes(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *), void *ud)
{
    return store_of(c)->feed->changes_since(c, cur, fn, ud);
}

int log_changes_tails(log_conn_t *c, log_cursor *cur, void (*fn)(void *, int64_t, const char *, uint64_t),
                      void *ud)
{
    return store_of(c)->feed->changes_tails(c, cur, fn, ud);
}

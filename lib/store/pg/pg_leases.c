/* The PostgreSQL engine's leases (lib/lease.h): one row per session with its
 * expiry on the database's clock (every host compares against the same clock),
 * and the owner lock of a runner id as a row of runner_owners.
 *
 * The owner lock. SQLite's is a flock(2) beside the database, gone when the
 * process goes. Here the runners may be on several hosts, so the lock is a row
 * runner_owners(owner, instance, host, pid, expires_ms): owner_lock takes it for
 * this process (a token of its own in instance), and the lease code renews it
 * (acquire and renew, at most once per half of PG_OWNER_TTL_MS). It is taken when
 * free, expired, or held by a process of this host that is gone (same host name,
 * pid no longer alive: a restart does not wait for the expiry). A session-level
 * advisory lock on a connection kept for the process's life was the other choice:
 * it is lost silently when that connection drops, and nothing fences the runner
 * then; a row keeps its holder named until it expires.
 *
 * The fencing: a runner id whose owner row is held, unexpired, by another
 * process acquires nothing (a runner that lost its row, paused past the expiry
 * while another process of the same id started, is refused every lease, and its
 * own leases are taken back at once by the new holder, whose instance then fails
 * the old one's renew in every append). A runner id nobody locked behaves as on
 * SQLite: a lease of the caller's own owner id is taken back at once. */
#include "pg.h"

#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "../../timefmt.h"

/* Milliseconds on the database's clock. */
#define NOW_MS "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint"

/* How long an owner row lasts without renewal. */
#define PG_OWNER_TTL_MS 60000
#define PG_OWNERS_MAX 16        /* owner ids one process locks */

/* The owner rows this process holds: owner id -> its token. */
static pthread_mutex_t owners_mu = PTHREAD_MUTEX_INITIALIZER;
static int nowners;
static struct {
    char owner[256];
    char token[33];
} owners[PG_OWNERS_MAX];

/* This process's token for owner into out (33 bytes); 0 if it holds none. */
static int owner_token(const char *owner, char *out)
{
    int found = 0;
    pthread_mutex_lock(&owners_mu);
    for (int i = 0; i < nowners && !found; i++)
        if (!strcmp(owners[i].owner, owner)) {
            memcpy(out, owners[i].token, sizeof owners[i].token);
            found = 1;
        }
    pthread_mutex_unlock(&owners_mu);
    return found;
}

/* Renew this process's owner row of owner (if it holds one) while it is still
 * this process's, when less than half its time is left; an expired row nobody
 * took is this process's again. */
static int owner_renew(log_conn_t *c, const char *owner)
{
    char token[33];
    if (!owner_token(owner, token)) return 0;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, owner);
    pg_text(&p, token);
    pg_int(&p, PG_OWNER_TTL_MS);
    return pg_exec(c, "UPDATE runner_owners SET expires_ms = " NOW_MS " + $3::bigint"
                      " WHERE owner = $1::text AND instance = $2::text"
                      " AND expires_ms < " NOW_MS " + $3::bigint / 2", &p);
}

static int pg_acquire_many(log_conn_t *c, lease_arg *a, size_t n);

/* One statement: insert, or take over when it is our owner id's (ours, or a dead
 * predecessor's) or expired; never while another process holds our owner id's
 * row: pg_acquire_many's for one session. */
static int pg_acquire(log_conn_t *c, lease_arg *a)
{
    return pg_acquire_many(c, a, 1);
}

static int pg_renew(log_conn_t *c, const char *session, const lease_id *me, int64_t ttl_ms)
{
    int rc;
    if ((rc = owner_renew(c, me->owner))) return rc;
    pg_params p;
    pg_params_init(&p);
    pg_int(&p, ttl_ms);
    pg_text(&p, session);
    pg_text(&p, me->owner);
    pg_text(&p, me->instance);
    PGresult *r = pg_run(c, "UPDATE leases SET expires_ms = " NOW_MS " + $1::bigint"
                            " WHERE session = $2::text AND owner = $3::text AND instance = $4::text",
                         &p, 0, &rc);
    if (!r) return rc;
    rc = pg_affected(r) > 0;
    PQclear(r);
    return rc;
}

static int pg_held(log_conn_t *c, const char *session, const lease_id *me)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, session);
    pg_text(&p, me->owner);
    pg_text(&p, me->instance);
    /* Its row held until the transaction ends (pg_held_many). */
    PGresult *r = pg_run(c, "SELECT 1 FROM leases WHERE session = $1::text AND owner = $2::text"
                            " AND instance = $3::text FOR NO KEY UPDATE", &p, 0, &rc);
    if (!r) return rc;
    rc = PQntuples(r) > 0;
    PQclear(r);
    return rc;
}

/* An index of session ids, sorted, for finding the index of a returned one. */
typedef struct held_ix {
    const char *id;
    size_t i;
} held_ix;

static int held_ix_cmp(const void *a, const void *b)
{
    return strcmp(((const held_ix *)a)->id, ((const held_ix *)b)->id);
}

/* The parameters after the ids of a statement over many leases: this process's
 * owner id and instance, the leases' ttl, its owner row's token (NULL: it holds
 * none), the owner row's ttl. */
static void owner_params(pg_params *p, const lease_id *me, int64_t ttl_ms, const char *token)
{
    pg_text(p, me->owner);
    pg_text(p, me->instance);
    pg_int(p, ttl_ms);
    pg_text(p, token);
    pg_int(p, PG_OWNER_TTL_MS);
}

/* The room a statement over n ids takes: each id's pointer and length for
 * pg_array, and their sorted index. Returns 0, or -1 out of memory (ids_free
 * still to be called). */
typedef struct ids_room {
    const void **elem;
    size_t *len;
    held_ix *ix;
} ids_room;

static int ids_alloc(ids_room *d, size_t n)
{
    d->elem = malloc(n * sizeof *d->elem);
    d->len = malloc(n * sizeof *d->len);
    d->ix = malloc(n * sizeof *d->ix);
    return d->elem && d->len && d->ix ? 0 : -1;
}

static void ids_free(ids_room *d)
{
    free(d->elem);
    free(d->len);
    free(d->ix);
}

/* The index sorted (id[i] at i), then the first entry of id in it, or NULL. */
static void ids_sort(ids_room *d, const char *const *id, size_t n)
{
    for (size_t i = 0; i < n; i++) d->ix[i] = (held_ix){id[i], i};
    qsort(d->ix, n, sizeof *d->ix, held_ix_cmp);
}

static held_ix *ids_find(const ids_room *d, size_t n, const char *id)
{
    held_ix key = {id, 0};
    held_ix *f = id ? bsearch(&key, d->ix, n, sizeof *d->ix, held_ix_cmp) : NULL;
    while (f && f > d->ix && !strcmp(f[-1].id, id)) f--;
    return f;
}

/* The leases of n sessions at once, in one statement: those due renewed (an
 * UPDATE ... RETURNING in a WITH), the others only checked, each by the primary
 * key (= ANY of an array: an index scan whatever the plan, where a join with the
 * array could scan the whole table); the owner row renewed as owner_renew does
 * when any lease is (a data-modifying WITH runs whether read or not). The ids
 * returned are matched to their index through a sorted copy.
 *
 * Every row is held until the transaction ends, locked first in the ids' order
 * (l, the claims' order; the renewals' UPDATE after it, through its one-time
 * filter): a claim of a lease that ran out then waits for the commit that checked
 * it and reads the session's log with that commit's events. A row only read could
 * be taken over between the check and the commit, and the taker drive the
 * session from a log without them (tests/unit/test_lease.c test_fence). */
static int pg_held_many(log_conn_t *c, const char *const *session, const unsigned char *renew, size_t n,
                        const lease_id *me, int64_t ttl_ms, int *held, unsigned *nstmts)
{
    int rc = 0;
    char token[33];
    int have = owner_token(me->owner, token);
    ids_room d;
    char *arr[2] = {NULL, NULL};
    PGresult *r = NULL;
    if (ids_alloc(&d, n)) {
        rc = LOG_EIO;
        goto out;
    }
    pg_params p;
    pg_params_init(&p);
    /* $1 the sessions only checked, $2 those renewed. */
    for (int a = 0; a < 2; a++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!renew[i] == !a) {
                d.elem[k] = session[i];
                d.len[k++] = strlen(session[i]);
            }
        if (!(arr[a] = pg_array(&p, PG_TEXT_OID, k, d.elem, d.len))) {
            rc = LOG_EIO;
            goto out;
        }
    }
    owner_params(&p, me, ttl_ms, have ? token : NULL);
    r = pg_run(c, "WITH o AS (UPDATE runner_owners SET expires_ms = " NOW_MS " + $7::bigint"
                  " WHERE owner = $3::text AND instance = $6::text AND cardinality($2::text[]) > 0"
                  " AND expires_ms < " NOW_MS " + $7::bigint / 2),"
                  " l AS (SELECT session FROM leases WHERE session = ANY($1::text[] || $2::text[])"
                  " AND owner = $3::text AND instance = $4::text ORDER BY session FOR NO KEY UPDATE),"
                  " w AS (UPDATE leases SET expires_ms = " NOW_MS " + $5::bigint"
                  " WHERE session = ANY($2::text[]) AND owner = $3::text AND instance = $4::text"
                  " AND (SELECT count(*) FROM l) >= 0 RETURNING session)"
                  " SELECT session FROM w UNION ALL"
                  " SELECT session FROM l WHERE session = ANY($1::text[])",
               &p, 0, &rc);
    (*nstmts)++;
    if (!r) goto out;
    ids_sort(&d, session, n);
    for (int k = 0; k < PQntuples(r); k++) {
        held_ix *f = ids_find(&d, n, pg_text_of(r, k, 0));
        if (f) held[f->i] = 1;
    }
out:
    PQclear(r);
    free(arr[0]);
    free(arr[1]);
    ids_free(&d);
    return rc;
}

/* The leases of n sessions taken in one statement (lease_acquire_many: the
 * runner's claims of a loop turn, 40 and more during a burst of new sessions,
 * where two statements each were 80 round trips; lease_acquire: n = 1): the owner
 * row renewed as owner_renew does, an INSERT ... ON CONFLICT over the distinct ids
 * in order (two processes claiming the same sessions lock their rows in the same
 * order), taking a lease over when it is our owner id's (ours, or a dead
 * predecessor's) or expired, never while another process holds our owner id's row,
 * and for each id it did not take the holder's expiry, or now + ttl when there is
 * no row (refused for the owner id), read by the primary key: the statement's
 * snapshot, before its own insert. The ids returned are matched to their
 * arguments through a sorted copy. */
static int pg_acquire_many(log_conn_t *c, lease_arg *a, size_t n)
{
    int rc = 0;
    char token[33];
    int have = n ? owner_token(a[0].me->owner, token) : 0;
    ids_room d;
    const char **names = malloc(n * sizeof *names);
    char *arr = NULL;
    PGresult *r = NULL;
    if (ids_alloc(&d, n) || !names) {
        rc = LOG_EIO;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        d.elem[i] = names[i] = a[i].session;
        d.len[i] = strlen(a[i].session);
        a[i].held = 0;
        a[i].expires_ms = 0;
    }
    pg_params p;
    pg_params_init(&p);
    if (!(arr = pg_array(&p, PG_TEXT_OID, n, d.elem, d.len))) {
        rc = LOG_EIO;
        goto out;
    }
    owner_params(&p, a[0].me, a[0].ttl_ms, have ? token : NULL);
    r = pg_run(c, "WITH o AS (UPDATE runner_owners SET expires_ms = " NOW_MS " + $6::bigint"
                  " WHERE owner = $2::text AND instance = $5::text"
                  " AND expires_ms < " NOW_MS " + $6::bigint / 2),"
                  " n AS (SELECT " NOW_MS " AS now),"
                  " ins AS (INSERT INTO leases (session, owner, instance, expires_ms)"
                  " SELECT q.s, $2::text, $3::text, n.now + $4::bigint"
                  " FROM (SELECT DISTINCT s FROM unnest($1::text[]) s ORDER BY s) q, n"
                  " WHERE NOT EXISTS (SELECT 1 FROM runner_owners o WHERE o.owner = $2::text"
                  " AND o.instance IS DISTINCT FROM $5::text AND o.expires_ms > n.now)"
                  " ON CONFLICT (session) DO UPDATE SET owner = EXCLUDED.owner,"
                  " instance = EXCLUDED.instance, expires_ms = EXCLUDED.expires_ms"
                  " WHERE leases.owner = EXCLUDED.owner"
                  " OR leases.expires_ms < EXCLUDED.expires_ms - $4::bigint"
                  " RETURNING session, expires_ms)"
                  " SELECT session, expires_ms, 1 FROM ins UNION ALL"
                  " SELECT u.s, coalesce((SELECT l.expires_ms FROM leases l WHERE l.session = u.s),"
                  " (SELECT now FROM n) + $4::bigint), 0"
                  " FROM (SELECT DISTINCT s FROM unnest($1::text[]) s) u"
                  " WHERE u.s NOT IN (SELECT session FROM ins)",
               &p, 0, &rc);
    if (!r) goto out;
    ids_sort(&d, names, n);
    for (int k = 0; k < PQntuples(r); k++) {
        /* Every argument with this id (a caller's duplicates get the same answer). */
        const char *id = pg_text_of(r, k, 0);
        for (held_ix *f = ids_find(&d, n, id); f && f < d.ix + n && !strcmp(f->id, id); f++) {
            a[f->i].held = pg_int_of(r, k, 2) == 1;
            a[f->i].expires_ms = pg_int_of(r, k, 1);
        }
    }
out:
    PQclear(r);
    free(arr);
    free(names);
    ids_free(&d);
    return rc;
}

static int pg_release(log_conn_t *c, lease_arg *a)
{
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, a->session);
    pg_text(&p, a->me->owner);
    pg_text(&p, a->me->instance);
    return pg_exec(c, "DELETE FROM leases WHERE session = $1::text AND owner = $2::text"
                      " AND instance = $3::text", &p);
}

/* The leases of n sessions given up in one statement (the runner's commit:
 * outbox.c), their rows locked in the ids' order first, as pg_acquire_many locks
 * them: a claim of the same sessions by another runner waits, never in a cycle. */
static int pg_release_many(log_conn_t *c, const char *const *session, size_t n, const lease_id *me)
{
    ids_room d;
    int rc = 0;
    char *arr = NULL;
    pg_params p;
    pg_params_init(&p);
    if (ids_alloc(&d, n) == 0) {
        for (size_t i = 0; i < n; i++) {
            d.elem[i] = session[i];
            d.len[i] = strlen(session[i]);
        }
        arr = pg_array(&p, PG_TEXT_OID, n, d.elem, d.len);
    }
    if (!arr) {
        rc = LOG_EIO;
    } else {
        pg_text(&p, me->owner);
        pg_text(&p, me->instance);
        rc = pg_exec(c, "WITH l AS MATERIALIZED (SELECT session FROM leases WHERE session = ANY($1::text[])"
                        " AND owner = $2::text AND instance = $3::text ORDER BY session FOR UPDATE)"
                        " DELETE FROM leases d USING l WHERE d.session = l.session", &p);
    }
    free(arr);
    ids_free(&d);
    return rc;
}

/* 1 if the process pid of this host is gone. */
static int gone(int64_t pid)
{
    if (pid <= 0 || pid > 0x7fffffff) return 1;
    if ((pid_t)pid == getpid()) return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* One attempt at owner's row: 1 taken, 0 held by another live process (its host
 * and pid in holder), or LOG_E*. */
static int try_take(log_conn_t *c, const char *owner, const char *token, const char *host,
                    char *holder, size_t cap)
{
    int rc;
    pg_params p;
    pg_params_init(&p);
    pg_text(&p, owner);
    PGresult *r = pg_run(c, "SELECT host, pid, expires_ms > " NOW_MS " FROM runner_owners"
                            " WHERE owner = $1::text", &p, 0, &rc);
    if (!r) return rc;
    int taken_over = 0;    /* a dead process of this host holds it: take it at once */
    char old_host[256] = "";
    int64_t old_pid = 0;
    if (PQntuples(r) > 0) {
        snprintf(old_host, sizeof old_host, "%s", pg_text_of(r, 0, 0) ? pg_text_of(r, 0, 0) : "");
        old_pid = pg_int_of(r, 0, 1);
        const char *live = pg_text_of(r, 0, 2);
        taken_over = live && live[0] == 't' && !strcmp(old_host, host) && gone(old_pid);
    }
    PQclear(r);
    pg_params_init(&p);
    pg_text(&p, owner);
    pg_text(&p, token);
    pg_text(&p, host);
    pg_int(&p, getpid());
    pg_int(&p, PG_OWNER_TTL_MS);
    pg_int(&p, taken_over);
    pg_int(&p, old_pid);
    /* Taken when there is no row, it expired, or (taken_over) it still names the
     * dead process seen above. */
    r = pg_run(c, "INSERT INTO runner_owners (owner, instance, host, pid, expires_ms)"
                  " VALUES ($1::text, $2::text, $3::text, $4::bigint, " NOW_MS " + $5::bigint)"
                  " ON CONFLICT (owner) DO UPDATE SET instance = EXCLUDED.instance, host = EXCLUDED.host,"
                  " pid = EXCLUDED.pid, expires_ms = EXCLUDED.expires_ms"
                  " WHERE runner_owners.expires_ms <= EXCLUDED.expires_ms - $5::bigint"
                  " OR ($6::bigint = 1 AND runner_owners.host = $3::text AND runner_owners.pid = $7::bigint)"
                  " RETURNING 1", &p, 0, &rc);
    if (!r) return rc;
    int got = PQntuples(r) > 0;
    PQclear(r);
    if (!got) snprintf(holder, cap, "%s%s pid %lld", old_host[0] ? "on " : "", old_host, (long long)old_pid);
    return got;
}

static int pg_owner_lock(log_t *l, const char *owner, char *err, size_t errlen)
{
    char host[256] = "", token[33], holder[320] = "";
    unsigned char b[16];
    int fd = -1, rc = 0;
    log_conn_t *c = NULL;
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown");
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        uint64_t x = (uint64_t)timefmt_now_ms() * 1000003u ^ (uint64_t)getpid();
        memcpy(b, &x, sizeof x);
        memcpy(b + 8, &x, sizeof x);
    }
    for (size_t i = 0; i < sizeof b; i++) snprintf(token + 2 * i, 3, "%02x", b[i]);
    pthread_mutex_lock(&owners_mu);
    int room = nowners < PG_OWNERS_MAX && strlen(owner) < sizeof owners[0].owner;
    pthread_mutex_unlock(&owners_mu);
    if (!room) {
        snprintf(err, errlen, "cannot lock runner id \"%s\": too many ids or too long", owner);
        goto out;
    }
    if (!(c = pg_conn_open(l, err, errlen))) goto out;
    /* A predecessor of this host killed a moment ago is seen gone at once; one of
     * another host still going away may need a moment: wait up to
     * LEASE_LOCK_WAIT_MS for its row to expire. */
    for (int waited = 0; (rc = try_take(c, owner, token, host, holder, sizeof holder)) == 0 &&
                         waited < LEASE_LOCK_WAIT_MS;
         waited += 50) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (rc < 0) {
        snprintf(err, errlen, "cannot take the runner lock of \"%s\": database error %d", owner, rc);
        goto out;
    }
    if (rc == 0) {
        snprintf(err, errlen,
                 "another runner with id \"%s\" is running on this database (%s; its lock lasts "
                 "%d s after its last renewal); stop it first, or give this one another DSTREAM_RUNNER_ID",
                 owner, holder, PG_OWNER_TTL_MS / 1000);
        goto out;
    }
    /* The lock is the row; the descriptor only answers lease_lock's contract. */
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open /dev/null: %s", strerror(errno));
        goto out;
    }
    pthread_mutex_lock(&owners_mu);
    int i;
    for (i = 0; i < nowners && strcmp(owners[i].owner, owner); i++) {
    }
    if (i == nowners && nowners < PG_OWNERS_MAX) nowners++;
    if (i < PG_OWNERS_MAX) {
        snprintf(owners[i].owner, sizeof owners[i].owner, "%s", owner);
        memcpy(owners[i].token, token, sizeof token);
    }
    pthread_mutex_unlock(&owners_mu);
out:
    if (c) pg_conn_close(c);
    return fd;
}

const store_leases_ops pg_leases_ops = {
    .acquire = pg_acquire,
    .renew = pg_renew,
    .held = pg_held,
    .held_many = pg_held_many,
    .acquire_many = pg_acquire_many,
    .release = pg_release,
    .release_many = pg_release_many,
    .owner_lock = pg_owner_lock,
};

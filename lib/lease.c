/* lease: which runner process drives a session (see lease.h); the rows are the
 * engine's (lib/store.h). */
#include "lease.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "store.h"
#include "timefmt.h"

void lease_new_instance(char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[LEASE_INSTANCE_LEN / 2];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        /* Not expected once the system is up; the pid and clock still differ. */
        uint64_t x = (uint64_t)timefmt_now_ms() * 1000003u ^ (uint64_t)getpid();
        memcpy(b, &x, sizeof b < sizeof x ? sizeof b : sizeof x);
    }
    for (size_t i = 0; i < sizeof b; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[LEASE_INSTANCE_LEN] = '\0';
}

static int op_acquire(log_conn_t *c, void *arg)
{
    return store_of(c)->leases->acquire(c, arg);
}

int lease_acquire(log_conn_t *c, const char *session, const lease_id *me, int64_t ttl_ms,
                  int64_t *expires_ms)
{
    lease_arg a = {session, me, ttl_ms, 0, 0};
    int rc = log_transact(c, op_acquire, &a);
    if (rc) return rc;
    if (expires_ms) *expires_ms = a.expires_ms;
    return a.held;
}

typedef struct acquire_many {
    lease_arg *a;
    size_t n;
} acquire_many;

static int op_acquire_many(log_conn_t *c, void *arg)
{
    acquire_many *m = arg;
    if (store_of(c)->leases->acquire_many) return store_of(c)->leases->acquire_many(c, m->a, m->n);
    for (size_t i = 0; i < m->n; i++) {
        int rc = store_of(c)->leases->acquire(c, &m->a[i]);
        if (rc) return rc;
    }
    return 0;
}

int lease_acquire_many(log_conn_t *c, const char *const *session, size_t n, const lease_id *me, int64_t ttl_ms,
                       int *held, int64_t *expires_ms)
{
    if (n == 0) return 0;
    lease_arg *a = calloc(n, sizeof *a);
    if (!a) abort();     /* as the runner does when out of memory */
    for (size_t i = 0; i < n; i++) a[i] = (lease_arg){session[i], me, ttl_ms, 0, 0};
    acquire_many m = {a, n};
    int rc = log_transact(c, op_acquire_many, &m);
    for (size_t i = 0; i < n && rc == 0; i++) {
        held[i] = a[i].held;
        expires_ms[i] = a[i].expires_ms;
    }
    free(a);
    return rc;
}

static uint64_t tx_statements;

uint64_t lease_tx_statements(void)
{
    return __atomic_load_n(&tx_statements, __ATOMIC_RELAXED);
}

int lease_tx_renew(log_conn_t *c, const char *session, const lease_id *me, int64_t ttl_ms)
{
    __atomic_add_fetch(&tx_statements, 1, __ATOMIC_RELAXED);
    return store_of(c)->leases->renew(c, session, me, ttl_ms);
}

int lease_tx_held(log_conn_t *c, const char *session, const lease_id *me)
{
    __atomic_add_fetch(&tx_statements, 1, __ATOMIC_RELAXED);
    return store_of(c)->leases->held(c, session, me);
}

int lease_tx_held_many(log_conn_t *c, const char *const *session, const unsigned char *renew, size_t n,
                       const lease_id *me, int64_t ttl_ms, int *held)
{
    unsigned k = 0;
    memset(held, 0, n * sizeof *held);
    if (n == 0) return 0;
    int rc = store_of(c)->leases->held_many(c, session, renew, n, me, ttl_ms, held, &k);
    __atomic_add_fetch(&tx_statements, k, __ATOMIC_RELAXED);
    return rc;
}

static int op_release(log_conn_t *c, void *arg)
{
    return store_of(c)->leases->release(c, arg);
}

int lease_release(log_conn_t *c, const char *session, const lease_id *me)
{
    lease_arg a = {session, me, 0, 0, 0};
    return log_transact(c, op_release, &a);
}

int lease_tx_release_many(log_conn_t *c, const char *const *session, size_t n, const lease_id *me)
{
    const store_leases_ops *ops = store_of(c)->leases;
    if (n && ops->release_many) {
        __atomic_add_fetch(&tx_statements, 1, __ATOMIC_RELAXED);
        return ops->release_many(c, session, n, me);
    }
    for (size_t i = 0; i < n; i++) {
        lease_arg a = {session[i], me, 0, 0, 0};
        __atomic_add_fetch(&tx_statements, 1, __ATOMIC_RELAXED);
        int rc = ops->release(c, &a);
        if (rc) return rc;
    }
    return 0;
}

int lease_tx_release(log_conn_t *c, const char *session, const lease_id *me)
{
    return lease_tx_release_many(c, &session, 1, me);
}

int lease_lock(log_t *l, const char *owner, char *err, size_t errlen)
{
    return l->engine->leases->owner_lock(l, owner, err, errlen);
}

lease_plan lease_plan_at(const lease_clock *l, int due, int64_t now)
{
    if (!due && !l->held && l->other_until && now < l->other_until) return LEASE_WAIT;
    if (l->held && now < l->renew_ms) return LEASE_KEEP;
    if (l->held && now >= l->expires_ms) return LEASE_EXPIRED;
    return LEASE_TAKE;
}

void lease_taken(lease_clock *l, int64_t now, int64_t ttl_ms, int64_t expires_ms)
{
    l->held = 1;
    l->other_until = 0;
    l->renew_ms = now + ttl_ms / 3;
    l->expires_ms = expires_ms;
}

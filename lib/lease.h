/* lease: which runner process drives a session.
 *
 * A lease row names the runner id that holds it (owner: DSTREAM_RUNNER_ID) and the
 * process (instance: a nonce chosen at every start), and an expiry. A runner holds
 * the owner lock of its id for its whole life (lease_lock), so a row with the
 * caller's own owner id and another instance can only be a dead predecessor's: it
 * is taken back at once. Any other holder's lease is taken only once expired.
 * Every runner append checks, in its own transaction, that the process still
 * holds the lease (lease_tx_renew), so a paused or partitioned runner that lost a
 * session cannot write into it any more. */
#ifndef DSTREAM_LEASE_H
#define DSTREAM_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"

#define LEASE_INSTANCE_LEN 16          /* hex characters of an instance nonce */

typedef struct lease_id {
    const char *owner;                 /* runner id */
    const char *instance;              /* this process */
} lease_id;

/* A new random instance nonce into out (LEASE_INSTANCE_LEN + 1 bytes). */
void lease_new_instance(char *out);

/* Take or renew the lease on session for me until now + ttl_ms. Succeeds when
 * nobody holds it, its holder's lease expired, or the holder has me's owner id.
 * *expires_ms (if not NULL) gets the lease's expiry: ours on success, the holder's
 * when refused. Returns 1 held, 0 held by another runner, or LOG_E*. */
int lease_acquire(log_conn_t *c, const char *session, const lease_id *me, int64_t ttl_ms,
                  int64_t *expires_ms);

/* lease_acquire of n sessions in one transaction (one commit, where each of its own
 * was one): held[i] and expires_ms[i] as lease_acquire's for session[i]. Returns 0,
 * or the LOG_E* that failed the transaction (then none was taken). */
int lease_acquire_many(log_conn_t *c, const char *const *session, size_t n, const lease_id *me, int64_t ttl_ms,
                       int *held, int64_t *expires_ms);

/* For use inside log_transact: 1 if me (owner and instance) holds the lease on
 * session, which is then renewed until now + ttl_ms; 0 if not (taken over, or
 * released); LOG_E* on a database error. */
int lease_tx_renew(log_conn_t *c, const char *session, const lease_id *me, int64_t ttl_ms);
/* The same check without the renewal (no write): for a commit made while the lease
 * has long to run. */
int lease_tx_held(log_conn_t *c, const char *session, const lease_id *me);
/* For use inside log_transact: the leases of n sessions at once (a runner's
 * commit of many), with the same meaning as lease_tx_held for each, and
 * lease_tx_renew for each whose renew[i] is set: held[i] gets 1 if me (owner and
 * instance) holds session[i]'s lease (then renewed until now + ttl_ms when
 * renew[i]), else 0. One statement on PostgreSQL; on SQLite one, or two when some
 * are renewed. Returns 0, or LOG_E* on a database error (held says nothing
 * then). */
#define LEASE_TX_HELD_MANY 1
int lease_tx_held_many(log_conn_t *c, const char *const *session, const unsigned char *renew, size_t n,
                       const lease_id *me, int64_t ttl_ms, int *held);
/* The lease statements made inside transactions by this process so far: one per
 * lease_tx_renew and lease_tx_held (PostgreSQL's renew makes one more, of the
 * owner row), the statements it made per lease_tx_held_many. For the tests and
 * the benchmarks. */
uint64_t lease_tx_statements(void);

/* A runner process's view of one session's lease, as it last saw it, and what to
 * do about it when the session is to be looked at (no I/O: the runner's driver
 * acts on the answer). A lease is renewed once a third of it has run, in a commit
 * or a look; a process that comes back after its lease ran out (paused, starved)
 * must drop what it had in flight first, for another runner may have taken the
 * session meanwhile; a session another runner holds is left alone until that lease
 * runs out, unless its own timer fired. */
typedef struct lease_clock {
    int held;                          /* this process holds it */
    int64_t renew_ms;                  /* ... renewed from then */
    int64_t expires_ms;                /* ... and it runs out then */
    int64_t other_until;               /* another runner holds it until then (0: none known) */
} lease_clock;

typedef enum {
    LEASE_WAIT,                        /* another runner holds it: do not look now */
    LEASE_KEEP,                        /* held, not due for renewal: look */
    LEASE_TAKE,                        /* take or renew it (lease_acquire), then look */
    LEASE_EXPIRED                      /* held, but ran out while away: drop what is in flight, then take */
} lease_plan;

/* What to do about l at now (ms); due: the session's own timer fired (or its lease
 * is due for renewal). */
lease_plan lease_plan_at(const lease_clock *l, int due, int64_t now);
/* l was taken or renewed at now for ttl_ms, running out at expires_ms. */
void lease_taken(lease_clock *l, int64_t now, int64_t ttl_ms, int64_t expires_ms);

/* Give up the lease (if me holds it). */
int lease_release(log_conn_t *c, const char *session, const lease_id *me);
/* The same inside the caller's transaction (the runner's commit: outbox.c), for
 * one session or n (on PostgreSQL one statement, the rows locked in the ids'
 * order). */
int lease_tx_release(log_conn_t *c, const char *session, const lease_id *me);
int lease_tx_release_many(log_conn_t *c, const char *const *session, size_t n, const lease_id *me);

/* Take the owner lock of runner id owner on l's database, released when the
 * process ends however it ends (waiting up to LEASE_LOCK_WAIT_MS for a predecessor
 * that is still going away). On SQLite: an exclusive flock(2) on
 * "<database>.runner-<owner>.lock". On PostgreSQL: a row naming this process,
 * renewed by its acquire and renew, lasting a while past the last renewal (or
 * until a process of the same host sees this one gone); while another process
 * holds the row, this one's runner id acquires no lease. Returns a descriptor
 * (keep it open for the process's life), or -1 with a message in err: another
 * live process holds the lock (it runs with the same id), or the lock cannot be
 * taken. */
#define LEASE_LOCK_WAIT_MS 3000
int lease_lock(log_t *l, const char *owner, char *err, size_t errlen);

/* The arguments of the engine's acquire and release (lib/store.h). */
typedef struct lease_arg {
    const char *session;
    const lease_id *me;
    int64_t ttl_ms;
    int held;                          /* out: acquired */
    int64_t expires_ms;                /* out: ours, or the holder's */
} lease_arg;

#endif

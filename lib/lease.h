/* lease: which runner drives a session. */
#ifndef DSTREAM_LEASE_H
#define DSTREAM_LEASE_H

#include <stdint.h>

#include "log.h"

/* Take or renew the lease on session for owner until now + ttl_ms. Succeeds when
 * nobody holds it, owner already does, or the holder's lease expired. Returns 1
 * held, 0 held by another runner, or LOG_E*. */
int lease_acquire(log_conn_t *c, const char *session, const char *owner, int64_t ttl_ms);

/* Give up the lease (if owner holds it). */
int lease_release(log_conn_t *c, const char *session, const char *owner);

#endif

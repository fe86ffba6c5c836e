/* deliver: the runner's side of subscriptions (lib/subscription).
 *
 * Each turn of the runner's loop: the streams changed since the last turn (noted
 * by the loop's look through the change cursor: deliver_note) link and wake
 * subscriptions (sub_changed), leases that ran out end their wakes, and
 * the webhook wakes that are due go out as signed POSTs on the runner's own curl
 * multi handle, next to the provider requests. A delivery is marked in flight in
 * the database before it starts, until DSTREAM_WEBHOOK_TIMEOUT_MS (+1 s) has
 * passed: a runner killed meanwhile leaves it due again for the next one, and a
 * wake recorded before a crash is delivered after it. Targets are held to
 * DSTREAM_WEBHOOK_ALLOW on every connection (lib/webhook); redirects are never
 * followed (a 3xx is a failed delivery). */
#ifndef DSTREAM_RUNNER_DELIVER_H
#define DSTREAM_RUNNER_DELIVER_H

#include <curl/curl.h>
#include <stdint.h>

#include "../lib/log.h"

typedef struct deliver deliver_t;

/* Read the settings (DSTREAM_WEBHOOK_ALLOW, DSTREAM_WEBHOOK_TIMEOUT_MS,
 * DSTREAM_PUBLIC_URL). NULL with err if they are malformed. */
deliver_t *deliver_new(log_conn_t *conn, CURLM *multi, char *err, size_t cap);
/* Cut what is in flight (it stays due in the database) and free D. */
void deliver_free(deliver_t *D);
/* wait, shortened to when the next delivery or lease is due. */
int64_t deliver_wait(deliver_t *D, int64_t now, int64_t wait);
/* A stream that changed, as the runner's look through the change cursor (made at
 * every wake of its commit watcher) reports it: kept for the next deliver_tick,
 * which matches it against the subscriptions. */
void deliver_note(deliver_t *D, const char *path);
/* Match the changed streams noted since the last call (the first call recovers
 * every subscription instead), look at due leases and due deliveries. */
void deliver_tick(deliver_t *D);
/* If msg's transfer is a delivery: record its outcome and return 1; else 0. */
int deliver_finished(deliver_t *D, CURLMsg *msg);

#endif

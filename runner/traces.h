/* traces: the runner's OpenTelemetry export (lib/otlp, docs/otlp.md).
 *
 * With DSTREAM_OTLP_ENDPOINT set, each session's spans are rebuilt from its log
 * (lib/otlp) and POSTed as OTLP/HTTP protobuf to {endpoint}/v1/traces, with the
 * headers of DSTREAM_OTLP_HEADERS (never logged), on the runner's own curl multi
 * handle next to the provider requests: the loop never waits for the receiver. A
 * session's cursor (sstore_otlp_*) moves past a batch only after the receiver
 * answered it with a 2xx, so a crash loses no span; a batch sent but not
 * acknowledged is sent again (same ids, same content). A receiver that fails is
 * tried again with backoff; each POST holds at most DSTREAM_OTLP_BATCH spans. */
#ifndef DSTREAM_RUNNER_TRACES_H
#define DSTREAM_RUNNER_TRACES_H

#include <curl/curl.h>
#include <stdint.h>

#include "../lib/log.h"
#include "../lib/rstats.h"

typedef struct traces traces_t;


/* Read the settings. Returns the exporter, or NULL: with err[0] set when the
 * settings are malformed, else (err empty) because DSTREAM_OTLP_ENDPOINT is unset. */
traces_t *traces_new(log_conn_t *conn, CURLM *multi, char *err, size_t cap);
/* Cut what is in flight (it is sent again by the next runner) and free X. */
void traces_free(traces_t *X);
/* wait, shortened to when the exporter has work due. */
int64_t traces_wait(traces_t *X, int64_t now, int64_t wait);
/* A stream changed: told by the runner's look through its change cursor (one look
 * serves the loop, the subscriptions and the exporter; a second cursor on the
 * runner's connection would be answered apart from what the connection's own
 * commits kept for the loop's). */
void traces_note(traces_t *X, const char *path);
/* Look at the sessions whose logs changed and start the exports due. */
void traces_tick(traces_t *X);
/* If msg's transfer is an export: record its outcome and return 1; else 0. */
int traces_finished(traces_t *X, CURLMsg *msg);
/* The figures so far (for /metrics): spans and POSTs the receiver accepted, POSTs
 * that failed (not a 2xx, or no answer). */
void traces_stats_get(const traces_t *X, rstats_otlp *s);

#endif

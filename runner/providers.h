/* providers: where a provider request goes, held there (runner/providers.c). */
#ifndef DSTREAM_RUNNER_PROVIDERS_H
#define DSTREAM_RUNNER_PROVIDERS_H

#include "types.h"

/* Load DSTREAM_PROVIDERS (with keys) into R->providers; the built-in providers take
 * the keys load_keys found. Returns 0, or -1 after saying why on stderr. */
int providers_load(runner_t *R);
/* Decide where q's request for agent goes (q->target, q->kind, q->url) and set the curl
 * options that hold it there: no redirects, http(s) only, no proxy, every socket's
 * address checked against the provider's policy. Returns 0, or -1 with the reason
 * in R->start_error. */
int providers_prepare(runner_t *R, rq_t *q, const json_t *agent);

#endif

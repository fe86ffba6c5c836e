/* subrule: the pure rules of subscriptions: names, paths and globs, the PUT body
 * (sub_config), the wake tokens ("<generation>.<wake id>.<expiry>.<mac>", an HMAC
 * under a key derived from the signing key), the delivery backoff. No I/O and no
 * database: lib/subscription keeps the state (it includes this header). */
#ifndef DSTREAM_SUBRULE_H
#define DSTREAM_SUBRULE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "errs.h"
#include "webhook.h"

#define SUB_ID_MAX         128      /* A-Z a-z 0-9 . _ ~ - */
#define SUB_LEASE_MIN_MS   1000
#define SUB_LEASE_MAX_MS   600000
#define SUB_LEASE_DEF_MS   30000
#define SUB_STREAMS_MAX    1000     /* explicit streams in one request */
#define SUB_DESC_MAX       1024
#define SUB_WORKER_MAX     256
#define SUB_WAKE_ID_LEN    26       /* "w_" + 24 hex */
#define SUB_TOKEN_MAX      160
#define SUB_RETRY_MAX_MS   60000


typedef struct sub_config {
    int webhook;               /* 1: webhook, 0: pull-wake */
    char *pattern;             /* NULL: none */
    char **streams;            /* normalized, sorted, unique */
    size_t nstreams;
    char *url;                 /* webhook.url */
    char *wake_stream;
    int64_t lease_ttl_ms;
    char *description;
    char hash[65];             /* of all the above */
} sub_config;

/* 1 if id may name a subscription. */
int sub_id_valid(const char *id);
/* A stream path or pattern as the protocol writes it, stream-root relative:
 * leading and trailing '/' dropped. Refused (-1): empty, too long, control bytes,
 * or under the reserved "__ds". */
int sub_path_norm(const char *in, char *out, size_t cap);
/* 1 if path matches the glob pattern: '*' is one segment, '**' any number. */
int sub_glob_match(const char *pattern, const char *path);

/* Parse a PUT body. Returns 0 (free with sub_config_free), or -1 with the mistake
 * in err. The webhook URL's policy is the caller's (lib/webhook). */
int sub_config_parse(const json_t *doc, sub_config *c, char *err, size_t cap);
void sub_config_free(sub_config *c);

/* A wake token of subscription id for generation gen and wake_id, valid for an
 * hour from now, into out. */
void sub_token_make(const webhook_key *k, const char *id, int64_t gen, const char *wake_id, int64_t now,
                    char out[SUB_TOKEN_MAX]);
/* Check token tok of subscription id: its MAC under k and its expiry at now; *gen
 * and wake get what it names. Returns 0, SUB_ETOKEN (not a genuine token of id) or
 * SUB_EEXPIRED. */
int sub_token_check(const webhook_key *k, const char *id, const char *tok, int64_t now, int64_t *gen,
                    char wake[SUB_WAKE_ID_LEN + 1]);

/* The retry delay after `attempts` failures: 1 s doubling to 60 s, +-20% by
 * jitter (0..1). */
int64_t sub_backoff_ms(int attempts, double jitter);

#endif

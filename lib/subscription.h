/* subscription: Durable Streams subscriptions (PROTOCOL.md sections 6 and 7).
 *
 * A subscription links streams, by a glob `pattern` and by explicit `streams`, and
 * keeps one cursor per link: `acked`, the last processed offset (inclusive). It has
 * pending work when a linked stream's tail is past its cursor. Pending work makes a
 * wake, one at a time: `generation` goes up by one, a fresh `wake_id` names it and
 * the tails of the moment are its snapshot. A webhook wake waits in the table until
 * the runner has delivered it (runner/deliver.c: signed POST, retried with backoff,
 * the schedule kept here so that a restart honours it); a pull-wake wake is a
 * message appended to the subscription's wake stream, for workers to claim.
 *
 * Whoever holds a wake (the webhook receiver, or the worker that claimed it) holds
 * a lease of lease_ttl_ms, and a token: "<generation>.<wake id>.<expiry>.<mac>",
 * an HMAC under a key derived from the signing key, so the server keeps no token.
 * A callback, ack or release passes only if the token is genuine and names the
 * current generation and wake, and the request's own generation and wake_id do
 * too: anything older is FENCED, and so is everything after the lease ran out.
 * `done` (or a receiver answering {"done": true}, which acks the snapshot) ends
 * the wake; if work is still pending a new wake follows at once.
 *
 * Streams that appear later and match a pattern are linked at their start (the
 * runner reports each changed stream: sub_changed); streams that exist when a
 * subscription is created, or are added explicitly, are linked at their tail.
 * Every function runs in its own transaction (log_transact) and returns 0 or a
 * negative SUB_E* or LOG_E* code. The rows are the store's (lib/store.h's
 * store_subs_ops, typed by sub_row and sub_link below): this module keeps the
 * rules, the JSON, the tokens and the wake messages, and sees no SQL. */
#ifndef DSTREAM_SUBSCRIPTION_H
#define DSTREAM_SUBSCRIPTION_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "subrule.h"
#include "webhook.h"

/* ---- the rows (the store keeps them: lib/store.h's store_subs_ops) ------------------ */

/* A subscription's row: its configuration and the state of its wake. The text
 * members are malloc'd by whoever fills the row (NULL: none); sub_row_free frees
 * them. */
typedef struct sub_row {
    char id[SUB_ID_MAX + 1];
    int webhook;                           /* 1: webhook, 0: pull-wake */
    char *pattern, *url, *wake_stream, *description;
    char hash[65];                         /* of the configuration (sub_config's) */
    int64_t lease_ttl_ms, created_ms;
    int64_t generation;                    /* of the latest wake, 0 before the first */
    char wake_id[SUB_WAKE_ID_LEN + 1];     /* the current wake, "" when idle */
    char *snapshot;                        /* its {"path": "tail", ...} (JSON text) */
    char *holder;                          /* the pull-wake worker holding it */
    int64_t lease_until;                   /* ms; 0: no lease */
    int deliver;                           /* a webhook wake its receiver has not accepted yet */
    int attempts;                          /* failed deliveries of this wake */
    int64_t next_attempt_ms;               /* when that delivery is due */
} sub_row;

/* Free the text members of a row (the row itself is the caller's). */
void sub_row_free(sub_row *r);

/* A link of a subscription to a stream, with its cursor. */
typedef struct sub_link {
    char *path;
    int explicit_;                         /* linked explicitly (else by the pattern only) */
    char acked[OFFSET_LEN + 1];            /* the last processed offset */
    char tail[OFFSET_LEN + 1];             /* its stream's tail now; the start when it has none */
} sub_link;

/* Create, or re-confirm an identical configuration (*created 0); SUB_EEXISTS if
 * it differs. Links the matching and the explicit streams at their tails. */
int sub_put(log_conn_t *c, const char *id, const sub_config *cfg, int *created);
/* The subscription as the protocol serializes it (new reference), or NULL with
 * *rc. base: the public URL for jwks_url ("" for relative). */
json_t *sub_get(log_conn_t *c, const char *id, const char *base, int *rc);
/* Delete it and its links; a token of it never passes again. */
int sub_delete(log_conn_t *c, const char *id);
/* Link paths explicitly (at their tails; a linked one stays as it is). */
int sub_streams_add(log_conn_t *c, const char *id, char *const *paths, size_t n);
/* Drop an explicit link (a glob link of the same stream stays). */
int sub_stream_remove(log_conn_t *c, const char *id, const char *path);

/* Pull-wake: claim the pending wake for worker. *out gets the response body
 * (new reference): the wake on 0, {current_holder, generation} on SUB_ECLAIMED. */
int sub_claim(log_conn_t *c, const char *id, const char *worker, json_t **out);

typedef enum { SUB_CALLBACK, SUB_ACK, SUB_RELEASE } sub_action;
/* A webhook callback, or a pull-wake ack or release, with its bearer token and
 * JSON body. *next_wake: 1 if the end of this wake made a new one. */
int sub_finish(log_conn_t *c, const char *id, sub_action action, const char *token, const json_t *req,
               int *next_wake);

/* The JWK Set (new reference); makes the signing key on first use. */
json_t *sub_jwks(log_conn_t *c, int *rc);

/* ---- for the runner ------------------------------------------------------------------ */

/* At start: link the streams that appeared meanwhile, wake whatever is pending. */
int sub_recover(log_conn_t *c);
/* 1 if any subscription exists, 0 if none, or LOG_E* when the table cannot be read. */
int sub_any(log_conn_t *c);
/* These streams changed (appended, created, deleted): link new matches, wake. */
int sub_changed(log_conn_t *c, char *const *paths, size_t n);
/* End the wakes whose lease ran out (and wake again if work is pending). */
int sub_expire(log_conn_t *c, int64_t now);
/* The earliest time a delivery or a lease is due, or INT64_MAX. */
int64_t sub_next_due(log_conn_t *c);

typedef struct sub_delivery {
    char id[SUB_ID_MAX + 1];
    int64_t generation;
    char wake_id[SUB_WAKE_ID_LEN + 1];
    char url[URL_MAX + 1];
    char *body;                /* malloc'd JSON */
    size_t len;
    char signature[WEBHOOK_SIG_MAX];
} sub_delivery;

/* Take up to max deliveries due at now, marking each as in flight until now +
 * hold_ms (then, unanswered, it is due again: after a crash too). base: the
 * public URL for callback_url. Returns how many (0..max) or a negative code;
 * free each with sub_delivery_free. */
int sub_deliveries_take(log_conn_t *c, int64_t now, int64_t hold_ms, const char *base, sub_delivery *out,
                        size_t max);
void sub_delivery_free(sub_delivery *d);
/* The outcome of a delivery: ok (a 2xx), done (it answered {"done": true}), else
 * error says why; a wake that moved on meanwhile is left alone. */
int sub_delivered(log_conn_t *c, const sub_delivery *d, int ok, int done, const char *error, int64_t now);

#endif

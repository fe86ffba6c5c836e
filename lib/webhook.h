/* webhook: where subscription webhooks may go, and how they are signed.
 *
 * Targets. A webhook URL comes from an API client, so it is held to the same
 * trust boundary as an agent's endpoint (lib/url): only what the operator lists in
 * DSTREAM_WEBHOOK_ALLOW is reached. The list holds host patterns ("*",
 * "*.example.com", "hooks.example.com") and address blocks ("127.0.0.1",
 * "10.0.0.0/8", "::1"). A URL is allowed when its host matches a pattern, or is an
 * address inside a listed block; an address of a special range (loopback, private,
 * link-local, ...) only inside a listed block, whatever its spelling, and "localhost"
 * only when a listed block holds a loopback address. The runner checks the address
 * of every socket again before it connects (webhook_addr_allowed), so a name that
 * later resolves to a refused address reaches nothing. https is required, except
 * for loopback targets (the protocol's development exception). An empty list
 * allows no webhook at all.
 *
 * Signing (PROTOCOL.md 6.5, 7.1): Ed25519 over "<unix seconds>.<raw body>", sent as
 * "Webhook-Signature: t=<s>,kid=<kid>,ed25519=<base64url>"; the public key is
 * published as a JWK Set whose kid is "ds_" + the key's RFC 7638 thumbprint. */
#ifndef DSTREAM_WEBHOOK_H
#define DSTREAM_WEBHOOK_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "url.h"

#define WEBHOOK_KID_MAX 64
#define WEBHOOK_SIG_MAX 200   /* the Webhook-Signature value, NUL included */

typedef struct webhook_key {
    char kid[WEBHOOK_KID_MAX];
    uint8_t pub[32];
    uint8_t priv[32];       /* secret: never logged, never in a response */
} webhook_key;

/* A new random key pair with its kid. Returns 0, or -1 if the crypto library fails. */
int webhook_key_generate(webhook_key *k);
/* Set k->kid from k->pub. */
void webhook_key_kid(webhook_key *k);
/* The public JWK of k (new reference). */
json_t *webhook_jwk(const webhook_key *k);
/* The Webhook-Signature value for body sent at unix time t into out
 * (WEBHOOK_SIG_MAX bytes). Returns 0 or -1. */
int webhook_sign(const webhook_key *k, int64_t t, const void *body, size_t n, char *out, size_t cap);
/* 1 if sig (a Webhook-Signature value) is k's signature of body. */
int webhook_verify(const webhook_key *k, const char *sig, const void *body, size_t n);

/* Unpadded base64url of n bytes into out; returns the length, or -1 if cap is short. */
int webhook_b64url(const void *p, size_t n, char *out, size_t cap);

typedef struct webhook_allow webhook_allow;

/* Parse the operator's list (spaces or commas between entries; NULL or "" is the
 * empty list). Returns the list (free with webhook_allow_free), or NULL with the
 * mistake in err. */
webhook_allow *webhook_allow_parse(const char *text, char *err, size_t cap);
void webhook_allow_free(webhook_allow *a);
/* 1 if url may be a webhook target; else 0 with the reason in why. */
int webhook_url_allowed(const webhook_allow *a, const char *url, char *why, size_t cap);
/* 1 if a connection for host (the URL's) may go to address addr; else 0 and why. */
int webhook_addr_allowed(const webhook_allow *a, const char *host, const url_addr *addr, char *why, size_t cap);

#endif

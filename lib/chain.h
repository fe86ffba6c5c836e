/* chain: the hash chain that makes every stream's log tamper-evident.
 *
 * Each message of a stream has a digest that covers the digest before it, its
 * offset and its bytes:
 *
 *     digest(n) = SHA-256( digest(n-1) || offset(n) || data(n) )
 *
 * digest(n-1) is the 32 raw bytes of the previous message's digest; offset(n) is
 * the message's own offset as the server writes it (33 ASCII bytes,
 * "SSSSSSSSSSSSSSSS_PPPPPPPPPPPPPPPP": messages and bytes before it, lib/offset.h);
 * data(n) its bytes as stored (what a read returns). A stream's chain starts from
 * 32 zero bytes; a fork's from its parent's digest at the fork point (the digest of
 * the last message it inherits, or zeros when it inherits none), so a fork and its
 * parent agree on every message they share. The digest of a position is the digest
 * of the message just before it (zeros at the start): what a client recomputes
 * from what it read. Nothing here touches a database: the engines store a digest
 * per message row and the tail's on the stream row, and verify the rows with
 * chain_step (lib/store/). */
#ifndef DSTREAM_CHAIN_H
#define DSTREAM_CHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "offset.h"

#define CHAIN_LEN 32            /* a digest's bytes */
#define CHAIN_HEX (2 * CHAIN_LEN)

/* The digest of the message at `at` with data[0..len) after prev: into out (which
 * may be prev). */
void chain_link(const uint8_t prev[CHAIN_LEN], offset_t at, const void *data, size_t len, uint8_t out[CHAIN_LEN]);

/* Lower-case hex of a digest into out (CHAIN_HEX + 1 bytes). */
void chain_hex(const uint8_t d[CHAIN_LEN], char out[CHAIN_HEX + 1]);

/* A digest from CHAIN_HEX hex digits (either case) at s (n bytes). 0, or -1 when s
 * is not exactly that. */
int chain_parse(const char *s, size_t n, uint8_t out[CHAIN_LEN]);

/* One link of a verification: 1 if stored (a message's digest as its row holds it,
 * NULL when the row holds none) is the digest of the message after prev, else 0.
 * prev becomes stored (or, when NULL, what it should have been), so that the next
 * link is checked against what its row claims: a row altered behind dstream's back
 * breaks its own link, and one whose digest was recomputed to match breaks the next. */
int chain_step(uint8_t prev[CHAIN_LEN], offset_t at, const void *data, size_t len, const uint8_t *stored);

#endif

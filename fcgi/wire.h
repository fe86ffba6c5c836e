/* wire: the FastCGI records of a response, the one place that writes them.
 *
 * libfcgi reads a request (its parameters and body); from then on the response is
 * ours. A wire_t is one response on one connection: its FCGI_STDOUT records, then an
 * empty FCGI_STDOUT and FCGI_END_REQUEST. Writing never blocks: what the socket does
 * not take now waits in the wire, in order, until a later wire_send (the responder
 * thread hands such a connection to the live hub, which sends it as the socket
 * drains). Responder threads and the hub both write through this file. */
#ifndef DSTREAM_WIRE_H
#define DSTREAM_WIRE_H

#include <stddef.h>

#include "../lib/buf.h"

typedef struct wire {
    int fd;                 /* the connection; -1 when none */
    int reqid;              /* the FastCGI request id */
    buf_t pend;             /* records the socket has not taken yet, */
    size_t off;             /* from this offset */
} wire_t;

enum { WIRE_DONE = 0, WIRE_AGAIN = 1, WIRE_GONE = -1 };

/* Start a response on fd for request reqid; nothing is written. */
void wire_init(wire_t *w, int fd, int reqid);
/* Send what waits, then len bytes of data as FCGI_STDOUT records, then the end of the
 * request if end, without blocking; what the socket does not take waits in w.
 * Returns WIRE_DONE (all out), WIRE_AGAIN (some waits) or WIRE_GONE (the connection
 * failed, or no memory to keep the rest). */
int wire_write(wire_t *w, const void *data, size_t len, int end);
/* Keep len bytes as FCGI_STDOUT records in w without writing (small pieces of one
 * response, sent together by the next wire_write or wire_send). 0 or -1. */
int wire_queue(wire_t *w, const void *data, size_t len);
/* Send what waits, without blocking: WIRE_DONE, WIRE_AGAIN or WIRE_GONE. */
int wire_send(wire_t *w);
/* Block until what waits is sent or ms pass: WIRE_DONE, WIRE_AGAIN (timed out) or
 * WIRE_GONE. For a connection no event loop can take. */
int wire_drain(wire_t *w, int ms);
/* Bytes waiting for the socket. */
size_t wire_pending(const wire_t *w);
/* Free what waits (the connection stays open: the caller closes w->fd). */
void wire_free(wire_t *w);

#endif

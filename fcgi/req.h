/* req: the small request/response interface every HTTP resource is written against.
 *
 * A resource reads the method, path, query, headers and body of a req_t and answers
 * with res_*; it never sees libfcgi. Two backends implement the transport: FastCGI
 * (FCGX_Request, many per process) and CGI (environment + stdin/stdout, one request
 * and exit). Response headers are collected until the first body byte or flush. */
#ifndef DSTREAM_REQ_H
#define DSTREAM_REQ_H

#include <stddef.h>
#include <sys/types.h>

#include "../lib/buf.h"
#include "../lib/log.h"

typedef struct req req_t;

/* The longest decoded request path, NUL included (DSTREAM_PATH_MAX cannot go past it). */
#define REQ_PATH_MAX 2048
struct wire;

typedef struct req_backend {
    const char *(*param)(req_t *r, const char *name);  /* CGI variable or NULL */
    ssize_t (*read)(req_t *r, void *buf, size_t n);    /* body; 0 at end */
    int (*write)(req_t *r, const void *p, size_t n);   /* 0 or -1 */
    /* Push what was written, as far as the connection takes it now: 0, or -1 if the
     * client is gone. Never blocks in the FastCGI backend (see pending). */
    int (*flush)(req_t *r);
    int (*fd)(req_t *r);                               /* connection fd or -1 */
    /* Bytes written that the connection has not taken yet (the client does not
     * read): the request should go to the live hub rather than write more. May be
     * NULL (never any). */
    size_t (*pending)(req_t *r);
    /* Take the response's connection away from the transport: *out gets it with
     * what waits to be sent (fcgi/wire.h), now the caller's. 0, or -1 if it cannot.
     * May be NULL. */
    int (*detach)(req_t *r, struct wire *out);
} req_backend;

typedef struct cfg {
    const char *db_path;
    size_t body_max;            /* DSTREAM_BODY_MAX: largest request body */
    size_t read_max;            /* DSTREAM_READ_MAX: bytes per catch-up response */
    int longpoll_ms;            /* DSTREAM_LONGPOLL_MS */
    int heartbeat_ms;           /* DSTREAM_HEARTBEAT_MS */
    int sse_max_ms;             /* DSTREAM_SSE_MAX_MS: an SSE response is ended after */
    int reply_max_ms;           /* DSTREAM_REPLY_MAX_MS: a chat reply's stream (frame_uimsg) is ended after */
    int bulk_rate;              /* DSTREAM_BULK_RATE: sessions a bulk operation takes per second */
    size_t path_max;            /* DSTREAM_PATH_MAX */
    int wake_inotify;           /* DSTREAM_WAKE: inotify (1) or poll (0) */
    int wake_poll_us;           /* DSTREAM_WAKE_POLL_US */
    int live_max;               /* DSTREAM_LIVE_MAX: live readers parked per process */
    size_t live_buffer_max;     /* DSTREAM_LIVE_BUFFER_MAX: bytes the hub keeps for slow readers */
    const char *public_url;     /* DSTREAM_PUBLIC_URL, no trailing '/'; NULL: relative Location */
    const struct provcfg *providers;  /* DSTREAM_PROVIDERS (no keys read): agents are checked against it */
    const struct json_t *mcp_config;  /* DSTREAM_MCP_CONFIG, or NULL: the server names agents and
                                         workflows may use (lib/mcp mcp_check_agent) */
    int auth_off;               /* DSTREAM_AUTH=off: no tokens, loopback clients only */
    size_t signal_payload_max;  /* DSTREAM_SIGNAL_PAYLOAD_MAX: bytes of a signal's payload */
    int signals_pending_max;    /* DSTREAM_SIGNALS_PENDING_MAX: signals a session keeps untaken */
    const char *cors_origins;   /* DSTREAM_CORS_ORIGINS, each NUL-terminated, "" last; or NULL */
} cfg_t;

struct auth_t;

struct req {
    const req_backend *be;
    void *ctx;                  /* backend state */
    const cfg_t *cfg;
    log_conn_t *log;
    struct wake_waiter *waiter; /* this thread's live-read waiter, or NULL (CGI) */
    struct hub *hub;            /* the process's live hub, or NULL (CGI) */
    int waiting;                /* a live reader waiting on this thread (metrics) */
    int parked;                 /* handed to the hub, which completes the response */
    const struct auth_t *auth;  /* the verified token, or NULL (none, or auth off) */
    const char *cors_origin;    /* the request's Origin if allowed (points into cfg), or NULL */

    const char *method;
    char path[REQ_PATH_MAX];    /* decoded path, no query */
    const char *query;          /* raw query string, "" if none */

    int status;
    buf_t head;                 /* response headers being collected */
    int head_sent;
    int gone;                   /* the client went away */
    size_t sent;                /* body bytes written */
};

#define REQ_EMALFORMED (-1)   /* a bad percent escape or a NUL in the path: 400 */
#define REQ_ETOOLONG   (-2)   /* the decoded path does not fit REQ_PATH_MAX: 414 */

/* Prepare r for a new request on backend be. Returns 0, REQ_EMALFORMED or
 * REQ_ETOOLONG (the caller answers 400 or 414 path_too_long). */
int req_begin(req_t *r, const req_backend *be, void *ctx);
/* Prepare r to write a response into out (the live hub answers parked readers this
 * way): query is the request's query string; head_sent 1 if the headers are out. */
void req_mem_begin(req_t *r, buf_t *out, const char *query, int head_sent);
/* Release what the request holds. */
void req_end(req_t *r);

/* A request header by its HTTP name ("Content-Type", "Stream-Seq"); NULL if absent. */
const char *req_header(req_t *r, const char *name);
/* Query parameter name, percent-decoded into out. Returns its length, or -1 if absent,
 * -2 if it does not fit or is malformed (a bad escape, a NUL, bytes that are not
 * UTF-8), -3 if it is given more than once. */
int req_query(req_t *r, const char *name, char *out, size_t cap);
/* The same, copied as sent (no percent-decoding): for values that never need an
 * escape, so that what is checked is what a proxy in front saw (the access token). */
int req_query_raw(req_t *r, const char *name, char *out, size_t cap);
/* Read the whole body into b (whose max is the limit). Returns 0, BUF_ETOOBIG, or -1. */
int req_body(req_t *r, buf_t *b);

/* Read and drop what is left of the body, at most the largest body nginx lets
 * through (r->cfg->body_max + REQ_DRAIN_SLACK): a response sent over unread bytes,
 * or a reader that must see its client's hang-up, needs the socket emptied first. */
#define REQ_DRAIN_SLACK (4 << 20)   /* nginx's client_max_body_size is DSTREAM_BODY_MAX + 2 MiB */
void req_drain(req_t *r);

void res_status(req_t *r, int status);
/* Add a response header; value is copied. */
void res_header(req_t *r, const char *name, const char *value);
/* Add header lines already formed ("Name: value\r\n" each, len bytes; a constant
 * the caller vouches for: no check, no formatting). */
void res_header_lines(req_t *r, const char *lines, size_t len);
void res_headerf(req_t *r, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Write body bytes (sending the headers first if needed). 0 or -1 if gone. */
int res_write(req_t *r, const void *p, size_t n);
/* Push what was written to the client. 0, or -1 if the client is gone. */
int res_flush(req_t *r);
/* Finish the headers with no body. */
int res_end(req_t *r);
/* A JSON error {"error":{"code","message"}} with status. */
void res_error(req_t *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 405 with the Allow header: allowed lists the methods ("GET, DELETE"). */
void res_method_not_allowed(req_t *r, const char *allowed);

/* May the request's principal use scope ("streams:read", "sessions:write", "admin",
 * ...) on resource (a stream path, a session id, or NULL)? Returns 1; or answers
 * 401 (no valid token: WWW-Authenticate: Bearer) or 403 (missing scope) and
 * returns 0. With auth off (DSTREAM_AUTH=off) everything is allowed (fcgi/access.c). */
int req_allow(req_t *r, const char *scope, const char *resource);

/* The FastCGI and CGI backends. */
extern const req_backend req_cgi_backend;



/* ---- JSON helpers (jansson) ---------------------------------------------------- */
#include <jansson.h>

/* Parse the request body as a JSON object (Content-Type must be JSON). Returns the
 * object (new reference), or NULL after answering 400/413/415. */
json_t *req_json_object(req_t *r);
/* Answer status with j as a compact JSON body (j is borrowed). */
void res_json(req_t *r, int status, const json_t *j);
/* A 400 with code and the validator's lines (one mistake per line) as details; the
 * message is the mistake, or with several how many and the first of them. */
void res_invalid(req_t *r, const char *code, const char *lines);
#endif

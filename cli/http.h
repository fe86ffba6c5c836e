/* cli/http: the debug commands' HTTP client (libcurl, jansson) against DSTREAM_URL
 * with DSTREAM_TOKEN, and what they share: options, output, exit codes.
 *
 * Exit codes of the remote commands (docs/cli.md):
 *   0 done; 1 failed (network, server error, a session that failed); 2 usage;
 *   3 not found (404); 4 refused (401, 403); 5 rejected (another 4xx). */
#ifndef DSTREAM_CLI_HTTP_H
#define DSTREAM_CLI_HTTP_H

#include <jansson.h>
#include <stdio.h>

#include "../lib/buf.h"
#include "../lib/log.h"

#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_NOTFOUND 3
#define EXIT_REFUSED 4
#define EXIT_REJECTED 5

/* Options every remote command takes: --url URL, --token TOKEN (--json and --help
 * are taken out by cli/dstream.c: cli_json). http_opts removes them from argv (in
 * place) and returns the new argc. */
typedef struct {
    int json;      /* --json: machine output, one JSON document (or one a line) */
    int tty;       /* stdout is a terminal and NO_COLOR is unset: colour */
} cli_opts;
int http_opts(int argc, char **argv, cli_opts *o);

/* http_opts, then exactly `want` arguments left. Returns 0; else the usage of
 * command name on stderr and *rc is EXIT_USAGE. */
int cli_args(int argc, char **argv, cli_opts *o, int want, const char *name, int *rc);

typedef struct {
    long status;   /* HTTP status, 0 on a transport error */
    buf_t body;
    json_t *json;  /* the body parsed, or NULL */
    char next_offset[64];  /* Stream-Next-Offset */
    int up_to_date;        /* Stream-Up-To-Date present */
    int closed;            /* Stream-Closed: true */
    char content_type[LOG_CTYPE_MAX];
} http_res;

/* METHOD PATH (a path beginning with /v1/, query included) with an optional JSON
 * body. Returns 0 when an answer came (any status), else EXIT_FAIL (printed: a
 * server that cannot be reached is said as such, with its URL and that --db is the
 * offline mode). */
int http_call(const char *method, const char *path, const json_t *body, http_res *res);
/* POST PATH with len bytes of data as content type ctype (a stream's append). */
int http_post_raw(const char *path, const char *ctype, const char *data, size_t len, http_res *res);
void http_res_free(http_res *res);
/* The exit code for res (0 for 2xx), the server's error printed for others. */
int http_exit(const char *what, const http_res *res);
/* GET or other call in one: the parsed JSON on success (caller decrefs), else NULL
 * with *rc set to the exit code. */
json_t *http_json(const char *method, const char *path, const json_t *body, int *rc);

/* Follow PATH (an SSE resource) from last_id (NULL: as PATH says): cb for every
 * event; a nonzero return from cb stops and is returned. Reconnects (with
 * Last-Event-ID) when the server ends a response. Returns 0 on Ctrl-C. */
typedef int (*sse_cb)(void *ud, const char *event, const char *data, const char *id);
int http_sse(const char *path, const char *last_id, sse_cb cb, void *ud);

/* s escaped for a URL path segment or a query value, into out (bounded). */
int http_escape(const char *s, char *out, size_t cap);

/* Colour on a terminal: the escape, or "" when piped. */
const char *c_on(const cli_opts *o, const char *code);
const char *c_off(const cli_opts *o);

/* Print a JSON value on one line (--json), then a newline. */
void print_json(const json_t *j);

#endif

/* pool: N processes x M threads answering FastCGI requests on one listening socket. */
#ifndef DSTREAM_POOL_H
#define DSTREAM_POOL_H

#include "req.h"

typedef struct pool_opts {
    const char *listen;     /* unix socket path or ":port"/"host:port"; NULL: fd 0 */
    int backlog;
    int procs;
    int threads;
    size_t stack_kb;
    int grace_ms;           /* how long SIGTERM waits for requests in flight */
} pool_opts;

/* Serve until SIGTERM/SIGINT. Returns the process exit status. */
int pool_run(const pool_opts *po, const cfg_t *cfg, log_t *log);

/* Serve one CGI request from the environment. Returns the exit status. */
int cgi_run(const cfg_t *cfg, log_t *log);

/* 1 once the process has been asked to stop: long responses should end. */
int pool_stopping(void);

#endif

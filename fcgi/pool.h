/* pool: N processes x M threads answering FastCGI requests on one listening socket. */
#ifndef DSTREAM_POOL_H
#define DSTREAM_POOL_H

#include "req.h"

typedef struct pool_opts {
    const char *listen;     /* unix socket path or ":port"/"host:port"; NULL: fd */
    int fd;                 /* without listen: the inherited socket (0, or systemd's 3) */
    int backlog;
    int procs;
    int threads;
    size_t stack_kb;
    int grace_ms;           /* how long SIGTERM waits for requests in flight */
} pool_opts;

/* The listening socket systemd passed (socket activation: LISTEN_PID is this
 * process and LISTEN_FDS >= 1), or -1. Clears LISTEN_* so that children do not
 * take it for theirs. */
int pool_systemd_fd(void);

/* Serve until SIGTERM/SIGINT. Returns the process exit status. */
int pool_run(const pool_opts *po, const cfg_t *cfg, log_t *log);

/* Serve one CGI request from the environment. Returns the exit status. */
int cgi_run(const cfg_t *cfg, log_t *log);

#endif

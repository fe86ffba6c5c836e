/* pool: the FastCGI process and thread pool.
 *
 * The parent opens the listening socket (or inherits it: as fd 0 from spawn-fcgi,
 * as fd 3 from systemd's socket activation),
 * forks `procs` children and restarts any that die. Each child runs `threads`
 * threads that each loop on FCGX_Accept_r with their own request and their own
 * SQLite connection. There is no accept mutex: the kernel hands each connection
 * to one accept() caller, and with fastcgi_keep_conn a mutex held across a
 * long-lived response would stall every other thread (DESIGN.md, pitfalls).
 *
 * Stopping: SIGTERM/SIGINT are blocked in every thread and taken by sigwait in
 * the child's main thread, which raises the stop flag (long responses check it
 * and end), waits up to grace_ms for requests in flight, and exits. */
#include "pool.h"

#include <errno.h>
#include <fcgiapp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/diag.h"
#include "../lib/wake.h"
#include "access.h"
#include "hub.h"
#include "live.h"
#include "metrics.h"
#include "router.h"
#include "wire.h"

#define FINISH_WAIT_MS 120000   /* nginx's fastcgi_send_timeout in nginx/dstream.conf */

static atomic_int stopping;
static atomic_int in_flight;

/* ---- FastCGI backend --------------------------------------------------------------- */

/* A request read by libfcgi and answered through our own wire (wire.c). */
typedef struct fconn {
    FCGX_Request fr;
    wire_t w;
} fconn;

#define WRITE_DIRECT 16384      /* smaller writes gather until the next flush */

static const char *fcgi_param(req_t *r, const char *name)
{
    fconn *c = r->ctx;
    return FCGX_GetParam(name, c->fr.envp);
}

static ssize_t fcgi_read(req_t *r, void *buf, size_t n)
{
    fconn *c = r->ctx;
    int got = FCGX_GetStr(buf, (int)(n > 1 << 30 ? 1 << 30 : n), c->fr.in);
    return got < 0 ? -1 : got;
}

static int fcgi_write(req_t *r, const void *p, size_t n)
{
    fconn *c = r->ctx;
    if (c->w.fd < 0) return -1;
    if (n < WRITE_DIRECT) return wire_queue(&c->w, p, n);
    return wire_write(&c->w, p, n, 0) == WIRE_GONE ? -1 : 0;
}

static int fcgi_flush(req_t *r)
{
    fconn *c = r->ctx;
    return c->w.fd >= 0 && wire_send(&c->w) != WIRE_GONE ? 0 : -1;
}

static int fcgi_fd(req_t *r)
{
    fconn *c = r->ctx;
    return c->w.fd;
}

static size_t fcgi_pending(req_t *r)
{
    fconn *c = r->ctx;
    return wire_pending(&c->w);
}

/* The live hub takes the connection over (hub.c) with what waits to be sent. */
static int fcgi_detach(req_t *r, wire_t *out)
{
    fconn *c = r->ctx;
    if (c->w.fd < 0) return -1;
    *out = c->w;
    wire_init(&c->w, -1, 0);
    return 0;
}

static const req_backend fcgi_backend = {fcgi_param, fcgi_read,    fcgi_write, fcgi_flush,
                                         fcgi_fd,    fcgi_pending, fcgi_detach};

/* The end of a request the thread answered: the end records, sent now if the
 * socket takes them, else by the hub as it drains (no thread waits on a client
 * that does not read); without a hub, here, for as long as nginx would wait. */
static void finish(fconn *c, hub_t *hub, req_t *r)
{
    int keep = 0;
    if (c->w.fd >= 0) {
        int rc = wire_write(&c->w, NULL, 0, 1);
        if (rc == WIRE_AGAIN && !(hub && hub_finish(hub, r) == 0))
            rc = wire_drain(&c->w, FINISH_WAIT_MS);
        /* A web server that keeps its connections (FCGI_KEEP_CONN) sends the next
         * request on this one once the response is out; the hub closes its own. */
        keep = c->w.fd >= 0 && rc == WIRE_DONE && c->fr.keepConnection;
        if (c->w.fd >= 0 && !keep) close(c->w.fd);
    }
    wire_free(&c->w);
    wire_init(&c->w, -1, 0);
    /* libfcgi read the request; the response was ours: it writes nothing for it,
     * and reads the next request on a kept connection. */
    FCGX_Free(&c->fr, 0);
    if (!keep) c->fr.ipcFd = -1;
}

static void serve(req_t *r)
{
    route(r);
    res_end(r);
    /* A resource that answered without reading the body (a 404, a 405, a refused
     * path) leaves it in the socket: closing over unread bytes resets the connection,
     * and nginx, still sending, loses the answer (502). Read the rest, bounded. */
    if (!r->parked) req_drain(r);
}

/* Answer a request whose path req_begin refused (rc). */
static void refuse(req_t *r, int rc)
{
    res_common_headers(r);
    if (rc == REQ_ETOOLONG)
        res_error(r, 414, "path_too_long", "request path exceeds %d bytes", REQ_PATH_MAX - 1);
    else
        res_error(r, 400, "bad_request", "malformed request path");
}

typedef struct worker {
    int listen_fd;
    const cfg_t *cfg;
    log_t *log;
    wake_t *wake;
    hub_t *hub;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    fconn c;
    char err[256];
    log_conn_t *conn = log_conn_open(w->log, err, sizeof err);
    if (!conn) {
        diag("warn", "%s", err);
        return NULL;
    }
    wake_waiter_t *waiter = w->wake ? wake_waiter_new(w->wake) : NULL;
    FCGX_InitRequest(&c.fr, w->listen_fd, 0);
    wire_init(&c.w, -1, 0);
    while (!atomic_load(&stopping)) {
        if (FCGX_Accept_r(&c.fr) < 0) {
            if (atomic_load(&stopping)) break;
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        atomic_fetch_add(&in_flight, 1);
        wire_init(&c.w, c.fr.ipcFd, c.fr.requestId);
        metrics_slot *m = metrics_self();
        if (m) metrics_gauge(&m->busy, 1);
        req_t r;
        memset(&r, 0, sizeof r);
        r.cfg = w->cfg;
        r.log = conn;
        r.waiter = waiter;
        r.hub = w->hub;
        int brc = req_begin(&r, &fcgi_backend, &c);
        if (brc < 0) {
            refuse(&r, brc);
            req_drain(&r);
        } else {
            serve(&r);
        }
        finish(&c, w->hub, &r);
        req_end(&r);
        /* A parked reader is counted by the hub when its response completes. */
        if (!r.parked) metrics_response(r.gone ? 0 : r.status);
        if (m) metrics_gauge(&m->busy, -1);
        atomic_fetch_sub(&in_flight, 1);
    }
    wake_waiter_free(waiter);
    log_conn_close(conn);
    return NULL;
}

/* Copy the log's and the watcher's figures into this process's metrics slot. */
static void publish(log_t *log, wake_t *wake)
{
    metrics_slot *m = metrics_self();
    if (!m) return;
    uint64_t groups, ops;
    log_stats(log, &groups, &ops);
    __atomic_store_n(&m->groups, groups, __ATOMIC_RELAXED);
    __atomic_store_n(&m->appends, ops, __ATOMIC_RELAXED);
    uint64_t hits, misses, bytes;
    log_read_cache_stats(log, &hits, &misses, &bytes);
    __atomic_store_n(&m->cache_hits, hits, __ATOMIC_RELAXED);
    __atomic_store_n(&m->cache_misses, misses, __ATOMIC_RELAXED);
    __atomic_store_n(&m->cache_bytes, bytes, __ATOMIC_RELAXED);
    if (wake) {
        wake_stats st;
        wake_get_stats(wake, &st);
        __atomic_store_n(&m->wake_checks, st.checks, __ATOMIC_RELAXED);
        __atomic_store_n(&m->wake_wakeups, st.wakeups, __ATOMIC_RELAXED);
    }
}

static int child_main(const pool_opts *po, const cfg_t *cfg, log_t *log, int fd, int slot)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[256];
    wake_opts wo = {cfg->wake_inotify, cfg->wake_poll_us};
    wake_t *wake = wake_start(log, &wo, err, sizeof err);
    if (!wake) diag("warn", "no live wake-ups: %s", err);
    hub_t *hub = NULL;
    if (wake && cfg->live_max > 0 && !(hub = hub_start(cfg, log, wake, err, sizeof err)))
        diag("warn", "no live hub (a thread per live reader): %s", err);
    metrics_attach(slot, po->threads, hub ? cfg->live_max : 0);
    worker w = {fd, cfg, log, wake, hub};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, po->stack_kb * 1024);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < po->threads; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, worker_main, &w)) {
            diag("warn", "thread %d: %s", i, strerror(errno));
            break;
        }
    }
    pthread_attr_destroy(&attr);

    /* Wait for the signal to stop; meanwhile publish the figures once a second. */
    for (;;) {
        struct timespec second = {1, 0};
        if (sigtimedwait(&set, NULL, &second) > 0) break;
        publish(log, wake);
    }
    atomic_store(&stopping, 1);
    live_stop();
    if (wake) wake_all(wake);
    hub_stop(hub);
    for (int waited = 0; atomic_load(&in_flight) > 0 && waited < po->grace_ms; waited += 10) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    _exit(0);
}

static volatile sig_atomic_t parent_stop;

static void on_parent_signal(int sig)
{
    (void)sig;
    parent_stop = 1;
}

int pool_systemd_fd(void)
{
    const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");
    if (!pid || !n) return -1;
    char *end;
    errno = 0;
    long long p = strtoll(pid, &end, 10);
    int ok = !errno && !*end && p == (long long)getpid();
    long long k = strtoll(n, &end, 10);
    ok = ok && !errno && !*end && k >= 1;
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    struct stat st;
    /* SD_LISTEN_FDS_START: the first passed descriptor is 3. */
    if (!ok || fstat(3, &st) || !S_ISSOCK(st.st_mode)) return -1;
    return 3;
}

int pool_run(const pool_opts *po, const cfg_t *cfg, log_t *log)
{
    int fd = po->fd;
    if (FCGX_Init() != 0) {
        diag("warn", "FCGX_Init failed");
        return 1;
    }
    if (po->listen) {
        if (po->listen[0] == '/' || po->listen[0] == '.') unlink(po->listen);
        fd = FCGX_OpenSocket(po->listen, po->backlog);
        if (fd < 0) {
            diag("warn", "cannot listen on %s", po->listen);
            return 1;
        }
    }

    if (metrics_init(po->procs)) diag("warn", "no shared memory for /metrics");
    pid_t *kids = calloc((size_t)po->procs, sizeof *kids);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_parent_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    diag("info", "%d processes x %d threads on %s; up to %d waiting live readers per process",
            po->procs, po->threads, po->listen ? po->listen : fd == 3 ? "the socket systemd passed" : "fd 0",
            cfg->live_max);
    while (!parent_stop) {
        for (int i = 0; i < po->procs && !parent_stop; i++) {
            if (kids[i] > 0) continue;
            pid_t pid = fork();
            if (pid == 0) {
                free(kids);
                return child_main(po, cfg, log, fd, i);
            }
            if (pid < 0) {
                diag("warn", "fork: %s", strerror(errno));
                break;
            }
            kids[i] = pid;
        }
        int status;
        pid_t dead = waitpid(-1, &status, 0);
        if (dead < 0) continue;   /* EINTR from a signal */
        for (int i = 0; i < po->procs; i++) {
            if (kids[i] != dead) continue;
            kids[i] = 0;
            if (!parent_stop)
                diag("warn", "worker %d exited (status %d), restarting",
                        (int)dead, status);
        }
        if (!parent_stop) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);   /* no hot restart loop */
        }
    }
    for (int i = 0; i < po->procs; i++)
        if (kids[i] > 0) kill(kids[i], SIGTERM);
    for (int i = 0; i < po->procs; i++)
        if (kids[i] > 0) waitpid(kids[i], NULL, 0);
    free(kids);
    if (po->listen && po->listen[0] == '/') unlink(po->listen);
    return 0;
}

int cgi_run(const cfg_t *cfg, log_t *log)
{
    char err[256];
    log_conn_t *conn = log_conn_open(log, err, sizeof err);
    req_t r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.log = conn;
    if (!conn) {
        printf("Status: 503 Service Unavailable\r\nContent-Type: application/json\r\n" ACCESS_INERT_LINES "\r\n"
               "{\"error\":{\"code\":\"unavailable\",\"message\":\"database unavailable\"}}");
        return 0;
    }
    int brc = req_begin(&r, &req_cgi_backend, NULL);
    if (brc < 0) {
        refuse(&r, brc);
    } else {
        serve(&r);
    }
    res_flush(&r);
    req_end(&r);
    log_conn_close(conn);
    return 0;
}

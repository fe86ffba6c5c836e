/* dstream-fcgi: the HTTP side of dstream, as a FastCGI responder pool or a CGI program.
 *
 * Settings come from the environment (documented in README.md) and may be overridden
 * by options. Under a CGI server (GATEWAY_INTERFACE set) it answers one request and
 * exits; otherwise it listens (--listen, or fd 0 when spawned by spawn-fcgi). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/wsignal.h"
#include "../lib/log.h"
#include "../lib/mcp.h"
#include "../lib/provcfg.h"
#include "../lib/url.h"
#include "access.h"
#include "pool.h"
#include "router.h"

/* The pool's cache of streams' history on PostgreSQL (DSTREAM_READ_CACHE_KB, for the
 * process: log_opts.read_cache_kib); SQLite reads its pages in process and has none. */
#define FCGI_READ_CACHE_KB 8192

/* DSTREAM_PUBLIC_URL: the base URL clients reach the server at, for Location
 * headers (never the client's Host). Exits on a value that is not one. */
static const char *public_url(void)
{
    static char base[URL_MAX + 1];
    const char *v = env_str("DSTREAM_PUBLIC_URL", NULL);
    char why[128];
    url_t u;
    if (!v) return NULL;
    int bad = url_parse(v, &u, why, sizeof why);
    if (!bad && strchr(u.rest, '?')) bad = snprintf(why, sizeof why, "a query is not allowed");
    if (bad) {
        diag("warn", "DSTREAM_PUBLIC_URL=%s: %s", v, why);
        exit(2);
    }
    snprintf(base, sizeof base, "%s", v);
    size_t n = strlen(base);
    while (n && base[n - 1] == '/') base[--n] = '\0';
    return base;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: dstream-fcgi [--db PATH] [--listen SOCKET|HOST:PORT] [--procs N] "
            "[--threads N]\n"
            "       dstream-fcgi --routes   (print the routes it serves: METHOD PATH, one a line)\n"
            "Environment: DSTREAM_DB, DSTREAM_LISTEN, DSTREAM_PROCS, DSTREAM_THREADS,\n"
            "  DSTREAM_BODY_MAX, DSTREAM_READ_MAX, DSTREAM_LONGPOLL_MS, DSTREAM_HEARTBEAT_MS,\n"
            "  DSTREAM_SYNC (full|normal), DSTREAM_BACKLOG, DSTREAM_LIVE_MAX, DSTREAM_AUTH (on|off),\n"
            "  DSTREAM_CORS_ORIGINS. See README.md and docs/security.md.\n"
            "Without --listen it serves the socket systemd passes (LISTEN_FDS) or fd 0.\n");
}

/* FastCGI (spawn-fcgi, mod_fcgid) hands over a listening socket as fd 0; a CGI
 * server may give a connected one as standard input (Apache's mod_cgid does). */
static int stdin_is_listening(void)
{
    struct stat st;
    int on = 0;
    socklen_t len = sizeof on;
    return fstat(0, &st) == 0 && S_ISSOCK(st.st_mode) &&
           getsockopt(0, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on;
}

int main(int argc, char **argv)
{
    if (diag_init("dstream-fcgi", getenv("DSTREAM_LOG_FORMAT"), 0)) {
        fprintf(stderr, "dstream-fcgi: DSTREAM_LOG_FORMAT must be text or json\n");
        return 2;
    }
    cfg_t cfg;
    pool_opts po;
    memset(&cfg, 0, sizeof cfg);
    cfg.db_path = env_str("DSTREAM_DB", "dstream.db");
    cfg.body_max = (size_t)env_num("DSTREAM_BODY_MAX", 64 << 20, 1, 1LL << 32);
    cfg.read_max = (size_t)env_num("DSTREAM_READ_MAX", 1 << 20, 1, 1LL << 32);
    cfg.longpoll_ms = (int)env_num("DSTREAM_LONGPOLL_MS", 30000, 10, 3600000);
    cfg.heartbeat_ms = (int)env_num("DSTREAM_HEARTBEAT_MS", 15000, 10, 3600000);
    cfg.sse_max_ms = (int)env_num("DSTREAM_SSE_MAX_MS", 60000, 100, 86400000);
    cfg.reply_max_ms = (int)env_num("DSTREAM_REPLY_MAX_MS", 600000, 100, 86400000);
    cfg.bulk_rate = (int)env_num("DSTREAM_BULK_RATE", 50, 1, 100000);
    cfg.path_max = (size_t)env_num("DSTREAM_PATH_MAX", 1024, 1, LOG_PATH_MAX);
    cfg.wake_inotify = strcmp(env_str("DSTREAM_WAKE", "inotify"), "poll") != 0;
    cfg.wake_poll_us = (int)env_num("DSTREAM_WAKE_POLL_US", 1000, 50, 10000000);
    cfg.live_max = (int)env_num("DSTREAM_LIVE_MAX", 16384, 0, 1 << 20);
    cfg.live_buffer_max = (size_t)env_num("DSTREAM_LIVE_BUFFER_MAX", 256LL << 20, 65536, 1LL << 40);
    cfg.signal_payload_max = (size_t)env_num("DSTREAM_SIGNAL_PAYLOAD_MAX", WSIGNAL_PAYLOAD_MAX_DEFAULT, 0, 1LL << 30);
    cfg.signals_pending_max = (int)env_num("DSTREAM_SIGNALS_PENDING_MAX", WSIGNAL_PENDING_MAX_DEFAULT, 1, 1 << 20);
    cfg.public_url = public_url();
    po.listen = env_str("DSTREAM_LISTEN", NULL);
    po.procs = (int)env_num("DSTREAM_PROCS", 1, 1, 256);
    po.threads = (int)env_num("DSTREAM_THREADS", 32, 1, 16384);
    po.backlog = (int)env_num("DSTREAM_BACKLOG", 1024, 1, 65535);
    po.stack_kb = (size_t)env_num("DSTREAM_STACK_KB", 256, 64, 65536);
    po.grace_ms = (int)env_num("DSTREAM_GRACE_MS", 5000, 0, 600000);
    const char *sync = env_str("DSTREAM_SYNC", "full");
    const char *auth = env_str("DSTREAM_AUTH", "on");
    if (strcmp(auth, "on") && strcmp(auth, "off")) {
        diag("warn", "DSTREAM_AUTH must be on or off");
        return 2;
    }
    cfg.auth_off = !strcmp(auth, "off");

    static const struct option opts[] = {
        {"db", required_argument, NULL, 'd'},     {"listen", required_argument, NULL, 'l'},
        {"procs", required_argument, NULL, 'p'},  {"threads", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},         {"routes", no_argument, NULL, 'R'},
        {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "d:l:p:t:h", opts, NULL)) != -1) {
        char *end;
        long n;
        switch (ch) {
        case 'd': cfg.db_path = optarg; break;
        case 'l': po.listen = optarg; break;
        case 'p':
        case 't':
            n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 16384) {
                usage();
                return 2;
            }
            if (ch == 'p') po.procs = (int)n;
            else po.threads = (int)n;
            break;
        case 'R':
            /* The router's own table (router.c): what docs/openapi.json must describe. */
            for (size_t i = 0; i < router_nroutes; i++) {
                const char *m = router_routes[i].methods;
                for (m += strspn(m, ", "); *m; m += strspn(m, ", ")) {
                    int k = (int)strcspn(m, ", ");
                    printf("%.*s %s\n", k, m, router_routes[i].path);
                    m += k;
                }
            }
            return fflush(stdout) ? 1 : 0;
        default: usage(); return ch == 'h' ? 0 : 2;
        }
    }

    /* Each thread holds a SQLite connection (3 descriptors), an eventfd and its
     * FastCGI connection: raise the soft limit on descriptors to the hard one. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* The hub's readers each hold a socket: keep room for the threads' descriptors. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        long room = (long)rl.rlim_cur - 6L * po.threads - 64;
        if (room < 0) room = 0;
        if (cfg.live_max > room) {
            diag("info", "DSTREAM_LIVE_MAX %d lowered to %ld (descriptor limit %ld)",
                    cfg.live_max, room, (long)rl.rlim_cur);
            cfg.live_max = (int)room;
        }
    }

    /* The pool checks agents against the operator's providers; it reads no key. */
    char perr[2048];
    provcfg_t *providers = provcfg_load(getenv("DSTREAM_PROVIDERS"), 0, perr, sizeof perr);
    cfg.providers = providers;
    if (!providers) {
        diag("warn", "DSTREAM_PROVIDERS %s:\n%s", getenv("DSTREAM_PROVIDERS"), perr);
        return 2;
    }
    /* The operator's MCP servers, for their names only (agents and workflows may
     * name no other); refused as the runner refuses it. */
    const char *mcp_path = getenv("DSTREAM_MCP_CONFIG");
    json_t *mcp = NULL;
    if (mcp_path && *mcp_path && !(mcp = mcp_config_load(mcp_path, perr, sizeof perr))) {
        diag("warn", "DSTREAM_MCP_CONFIG %s:\n%s", mcp_path, perr);
        provcfg_free(providers);
        return 2;
    }
    cfg.mcp_config = mcp;
    char aerr[256];
    if (access_check_config(&cfg, po.listen, aerr, sizeof aerr)) {
        diag("warn", "%s", aerr);
        provcfg_free(providers);
        json_decref(mcp);
        return 2;
    }
    char *origins = access_origins_parse(getenv("DSTREAM_CORS_ORIGINS"));
    cfg.cors_origins = origins;
    if (cfg.auth_off) diag("info", "DSTREAM_AUTH=off: no tokens asked, loopback clients only");

    log_opts lo = {strcmp(sync, "normal") != 0, 5000, 1, 0,
                   (int)env_num("DSTREAM_READ_CACHE_KB", FCGI_READ_CACHE_KB, 0, 1 << 20)};
    int64_t max_bytes = env_num("DSTREAM_DB_MAX_BYTES", 0, 0, 1LL << 50);
    int64_t touch_ms = env_num("DSTREAM_TTL_TOUCH_MS", LOG_TOUCH_MS_DEFAULT, 0, 3600000);
    char err[512];
    log_t *log = log_open(cfg.db_path, &lo, err, sizeof err);
    if (!log) {
        diag("warn", "%s", err);
        provcfg_free(providers);
        json_decref(mcp);
        free(origins);
        if (getenv("GATEWAY_INTERFACE")) {
            printf("Status: 503 Service Unavailable\r\nContent-Type: application/json\r\n" ACCESS_INERT_LINES "\r\n"
                   "{\"error\":{\"code\":\"unavailable\",\"message\":\"database unavailable\"}}");
            return 0;
        }
        return 1;
    }
    log_set_max_bytes(log, max_bytes);
    log_set_touch_ms(log, touch_ms);
    int status;
    po.fd = po.listen ? -1 : pool_systemd_fd();
    if (po.fd < 0 && !po.listen && stdin_is_listening()) po.fd = 0;
    if (po.fd >= 0 && access_check_fd(&cfg, po.fd, aerr, sizeof aerr)) {
        diag("warn", "%s", aerr);
        status = 2;
    } else if (getenv("GATEWAY_INTERFACE") && !po.listen && po.fd < 0)
        status = cgi_run(&cfg, log);
    else if (!po.listen && po.fd < 0) {
        diag("warn", "no --listen given and stdin is not a listening socket");
        usage();
        status = 2;
    } else
        status = pool_run(&po, &cfg, log);
    log_close(log);
    provcfg_free(providers);
    json_decref(mcp);
    free(origins);
    return status;
}

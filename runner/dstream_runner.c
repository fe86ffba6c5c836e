/* dstream-runner: the daemon that executes sessions.
 *
 * One process, one thread, one loop: poll() waits on the epoll set of every
 * provider transfer's socket (curlev.c: libcurl is then handed only the sockets
 * that are ready, not every transfer each turn), on the commit watcher's eventfd
 * (lib/wake: any session changed, in any process), on a signal pipe and on the MCP
 * servers' pipes, with a timeout from the nearest timer (libcurl's own, retries,
 * checkpoint expiry, lease renewal, another runner's lease running out).
 * Nothing is re-examined on a clock: a session is looked at when its log changes,
 * its timer fires or a lease expires (and all unfinished ones once, at start).
 * Each turn of the loop ends with one commit of everything it decided, for every
 * session (outbox.c). Every DSTREAM_SWEEP_MS it also removes expired streams
 * (retention), a few bounded batches at a time so that the loop is never held long,
 * and, with DSTREAM_RETENTION, applies the operator's retention policies the same
 * way (lib/retain: a pass in slices of a few milliseconds, resumed on the next).
 * Settings come from the environment (README.md, "Runner"). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../lib/diag.h"
#include "../lib/env.h"
#include "../lib/errs.h"
#include "../lib/log.h"
#include "../lib/timefmt.h"
#include "../lib/mcp.h"
#include "../lib/opfile.h"
#include "../lib/retain.h"
#include "../lib/wake.h"
#include "curlev.h"
#include "deliver.h"
#include "driver.h"
#include "mcp_pool.h"
#include "memtrim.h"
#include "outbox.h"
#include "providers.h"
#include "request.h"
#include "stats.h"
#include "steps.h"
#include "tap.h"
#include "traces.h"
#include "turn.h"

/* One retention sweep of the loop: at most this many batches' worth of work
 * within this many milliseconds; a backlog is taken up again soon after. */
#define RUNNER_SWEEP_STREAMS 50
#define RUNNER_SWEEP_MESSAGES 2000
#define RUNNER_SWEEP_BUDGET_MS 20
#define RUNNER_SWEEP_AGAIN_MS 200
#define RUNNER_CACHE_KIB 16384   /* its connections' SQLite page cache (log_opts.cache_kib) */

/* The loop polls the MCP pool's pipes itself and tells their readiness in curl's
 * terms (rmcp_process reads curl_waitfd): the same bits. */
_Static_assert(POLLIN == CURL_WAIT_POLLIN && POLLOUT == CURL_WAIT_POLLOUT && POLLPRI == CURL_WAIT_POLLPRI,
               "poll and curl_waitfd bits differ");

/* Whether s has something for the next commit: events, or a reply's text not
 * yet made into deltas (request_flush). */
static int awaits_commit(const sess_t *s)
{
    return s->nout || (s->rq && (s->rq->text.len || s->rq->thinking.len));
}

/* Monotonic microseconds, for the loop's budgets. */
static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The turn's drives, each session once. While deltas wait for the commit that
 * follows them, or may be on their way (a request in flight), the drives stop
 * once budget_us is spent (after one at least) and those left go first at the
 * next turn: a burst of sessions starting or ending (each drive a view read, on
 * PostgreSQL a few round trips: 40 of them 10-15 ms) is driven over several
 * turns, each ending in a commit, instead of holding every streaming session's
 * deltas behind it. 0: no budget. Returns the sessions driven. */
static int drive_all(runner_t *R, int64_t budget_us)
{
    int64_t end = 0;
    for (sess_t *s = R->sessions; s && budget_us && !end; s = s->next)
        if (awaits_commit(s) || s->rq) end = mono_us() + budget_us;
    int driven = 0, put = 0;
    /* Those the last turn left go first, in a pass of their own; each session is
     * looked at once a turn (drive_turn), so that one driven in the first pass is
     * not driven again in the second. The mark is the turn's number, not a flag to
     * clear after the passes: a drive may take its session off the list (parked,
     * forgotten), out of reach of a walk of the list, and a parked session that
     * kept a flag saying "driven this turn" was never driven again once its timer
     * put it back (a retry, a sleep: the session stuck, the loop spinning). */
    uint64_t turn = ++R->drive_turns;
    for (int first = R->put_off_n > 0; first >= 0; first--) {
        for (sess_t *s = R->sessions, *next; s; s = next) {
            next = s->next;
            if (!(s->dirty || s->due) || s->drive_turn == turn || (first && !s->put_off)) continue;
            s->drive_turn = turn;
            if (end && driven && mono_us() >= end) {
                s->put_off = 1;
                put++;
                continue;
            }
            s->put_off = 0;
            runner_drive(R, s);
            driven++;
        }
    }
    R->put_off_n = put;
    if (put) R->drives_put_off++;
    return driven;
}

static int sigpipe_fds[2] = {-1, -1};

static void on_signal(int sig)
{
    char c = (char)sig;
    ssize_t n = write(sigpipe_fds[1], &c, 1);
    (void)n;
}

/* systemd's notification protocol, without libsystemd: one datagram to
 * $NOTIFY_SOCKET ("@" means the abstract namespace). */
static void sd_notify_msg(const char *msg)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) return;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path));
    if (sa.sun_path[0] == '@') sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
    sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
    close(fd);
}

/* Provider keys: the environment, or a credentials file readable by its owner
 * only ({"anthropic": "...", "openai": "..."}). */
static int load_keys(runner_t *R)
{
    const char *a = getenv("ANTHROPIC_API_KEY"), *o = getenv("OPENAI_API_KEY");
    if (a) snprintf(R->anthropic_key, sizeof R->anthropic_key, "%s", a);
    if (o) snprintf(R->openai_key, sizeof R->openai_key, "%s", o);
    const char *path = env_str("DSTREAM_CREDENTIALS", NULL);
    if (!path) return 0;
    char err[1024];
    json_t *j = opfile_load(path, 077, "must not be readable by others (chmod 600)", NULL, err, sizeof err);
    if (!j) {
        diag("error", "credentials: %s", err);
        return -1;
    }
    const char *ka = json_string_value(json_object_get(j, "anthropic"));
    const char *ko = json_string_value(json_object_get(j, "openai"));
    if (ka && !R->anthropic_key[0]) snprintf(R->anthropic_key, sizeof R->anthropic_key, "%s", ka);
    if (ko && !R->openai_key[0]) snprintf(R->openai_key, sizeof R->openai_key, "%s", ko);
    json_decref(j);
    return 0;
}

/* The operator's MCP servers: a JSON file that nobody but its owner may change
 * (it names programs the runner executes); lib/mcp reads it as the pool does. */
static int load_mcp_config(runner_t *R)
{
    char err[4096];
    const char *path = env_str("DSTREAM_MCP_CONFIG", NULL);
    if (!path) return 0;
    R->mcp_config = mcp_config_load(path, err, sizeof err);
    if (!R->mcp_config) {
        diag("error", "MCP configuration %s:\n%s", path, err);
        return -1;
    }
    return 0;
}

/* A server became ready or failed: sessions waiting for its tools look again. */
static void on_mcp_change(void *ud, const char *server)
{
    runner_t *R = ud;
    (void)server;
    for (sess_t *s = R->sessions; s; s = s->next) s->dirty = 1;
}

/* A stream changed, its log now ending at tail (0: not known). A session this
 * process holds and whose log ends where its own last commit left it (its deltas:
 * outbox.c) is not looked at again: the drive would find it unchanged. */
static void on_change(void *ud, int64_t id, const char *path, uint64_t tail)
{
    runner_t *R = ud;
    if (!path || strncmp(path, "sessions/", 9) != 0) return;
    const char *sid = path + 9;
    if (!sstore_valid_id(sid)) return;
    sess_t *s = sessidx_find(&R->idx, sid);
    if (s && tail && tail == s->known_seq && id == s->stream_id && !s->heap_at &&
        lease_plan_at(&s->lease, 0, timefmt_now_ms()) == LEASE_KEEP) {
        R->wakes_own++;
        return;
    }
    s = runner_session(R, sid);
    s->stream_id = id;
    s->dirty = 1;
}

/* The loop's look through the change cursor: each change for the sessions
 * (on_change) and for the subscriptions' matching (deliver_note, once it exists):
 * one look serves both. */
typedef struct look {
    runner_t *R;
    deliver_t *deliver;
    traces_t *traces;
} look;

static void on_look(void *ud, int64_t id, const char *path, uint64_t tail)
{
    look *l = ud;
    if (l->deliver) deliver_note(l->deliver, path);
    if (l->traces) traces_note(l->traces, path);
    on_change(l->R, id, path, tail);
}

/* When the drive renews the lease of s, which streams a reply. Once a third of the
 * lease ran (lib/lease) the loop's next commit renews it (outbox_renewing), with
 * the events of every session in that commit, not in a transaction of its own;
 * the drive does only if no commit did by half the lease (they keep failing). */
static int64_t renew_at(const runner_t *R, const sess_t *s)
{
    return s->lease.renew_ms + R->lease_ms / 6;
}

/* Sessions with work left, at start (crash recovery). */
static void scan_one(void *ud, const char *id)
{
    sess_t *s = runner_session(ud, id);
    s->dirty = s->scanned = 1;
}

static void scan(runner_t *R)
{
    sstore_unfinished(R->conn, scan_one, R);
}

int main(int argc, char **argv)
{
    if (diag_init("dstream-runner", getenv("DSTREAM_LOG_FORMAT"), 1)) {
        diag("error", "DSTREAM_LOG_FORMAT must be text or json");
        return 2;
    }
    runner_t R;
    char err[512], host[128] = "runner";
    memset(&R, 0, sizeof R);
    const char *db = env_str("DSTREAM_DB", "dstream.db");
    if (argc > 2 && !strcmp(argv[1], "--db")) db = argv[2];
    else if (argc > 1) {
        diag("error", "usage: dstream-runner [--db PATH]   (settings: README.md, Runner)");
        return 2;
    }
    gethostname(host, sizeof host - 1);
    R.me.owner = env_str("DSTREAM_RUNNER_ID", host);
    lease_new_instance(R.instance);
    R.me.instance = R.instance;
    R.lease_ms = env_num("DSTREAM_LEASE_MS", 15000, 0, LLONG_MAX);
    if (R.lease_ms < 100) R.lease_ms = 100;
    R.retry.base_ms = env_num("DSTREAM_RETRY_BASE_MS", 500, 0, LLONG_MAX);
    R.retry.max_ms = env_num("DSTREAM_RETRY_MAX_MS", 30000, 0, LLONG_MAX);
    R.retry.provider_retries = (int)env_num("DSTREAM_PROVIDER_RETRIES", 4, 0, INT_MAX);
    R.retry.restart_retries = (int)env_num("DSTREAM_RESTART_RETRIES", 10, 0, INT_MAX);
    R.message_requests_max = env_num("DSTREAM_MESSAGE_REQUESTS_MAX", 50, 0, LLONG_MAX);
    R.session_requests_max = env_num("DSTREAM_SESSION_REQUESTS_MAX", 1000, 0, LLONG_MAX);
    R.session_events_max = env_num("DSTREAM_SESSION_EVENTS_MAX", 100000, 0, LLONG_MAX);
    R.workflow_state_max = (size_t)env_num("DSTREAM_WORKFLOW_STATE_MAX", WORKFLOW_STATE_MAX_DEFAULT, 0, LLONG_MAX);
    R.tool_result_max = (size_t)env_num("DSTREAM_TOOL_RESULT_MAX", 1 << 20, 0, LLONG_MAX);
    /* One process per runner id and database, for the whole process's life
     * (first: a second process says so before it loads anything). */
    /* A page cache that holds the tails of the streams it writes: at 200 streaming
     * sessions SQLite's default (2,000 KiB) read back a page from the file for one
     * delta in three (bench/RESULTS.md); runner/memtrim.c gives it back when idle. */
    log_opts lo = {strcmp(env_str("DSTREAM_SYNC", "full"), "normal") != 0, 5000, 1, RUNNER_CACHE_KIB, 0};
    if ((R.log = log_open(db, &lo, err, sizeof err))) log_set_max_bytes(R.log, env_num("DSTREAM_DB_MAX_BYTES", 0, 0, 1LL << 50));
    if (!R.log) {
        diag("error", "%s", err);
        return 1;
    }
    if (lease_lock(R.log, R.me.owner, err, sizeof err) < 0) {
        diag("error", "refusing to start: %s", err);
        log_close(R.log);
        return 1;
    }
    const char *pricing = env_str("DSTREAM_PRICING", NULL);
    if (pricing) {
        json_error_t e;
        R.pricing = json_load_file(pricing, 0, &e);
        if (!json_is_object(R.pricing)) {
            diag("error", "pricing %s: %s", pricing, e.text);
            log_close(R.log);
            return 2;
        }
    }
    if (load_keys(&R) || providers_load(&R) || load_mcp_config(&R) || tap_config(&R)) {
        json_decref(R.mcp_config);
        json_decref(R.pricing);
        provcfg_free(R.providers);
        log_close(R.log);
        return 2;
    }
    /* The operator's retention policies (lib/retain), checked before anything runs. */
    static retain_cfg retention;
    const char *retention_path = env_str("DSTREAM_RETENTION", NULL);
    if (retention_path && retain_load(retention_path, &retention, err, sizeof err)) {
        diag("error", "retention: %s", err);
        json_decref(R.mcp_config);
        json_decref(R.pricing);
        provcfg_free(R.providers);
        log_close(R.log);
        return 2;
    }
    R.mcp = rmcp_new(R.mcp_config, on_mcp_change, &R);
    R.step_call_done = steps_tool_done;     /* tools.c reports a step's call here */

    /* From here a refusal goes out through out, which frees what was made (as a
     * normal stop does), so that nothing is left behind by an exit status 1 or 2. */
    int status = 0;
    retain_state gc_state;
    memset(&gc_state, 0, sizeof gc_state);
    wake_t *wake = NULL;
    wake_waiter_t *waiter = NULL;
    deliver_t *deliver = NULL;
    look lk = {&R, NULL, NULL};  /* the loop's look through the change cursor (on_look) */
    traces_t *traces = NULL;
    curlev_t *cev = NULL;
    if (!(R.conn = log_conn_open(R.log, err, sizeof err))) {
        diag("error", "%s", err);
        status = 1;
        goto out;
    }
    wake = wake_start(R.log, NULL, err, sizeof err);
    waiter = wake ? wake_waiter_new(wake) : NULL;
    if (!waiter) {
        diag("error", "commit watcher: %s", err);
        status = 1;
        goto out;
    }
    wake_watch_any(waiter);
    log_cursor rev = LOG_CURSOR_START;
    log_changes_tails(R.conn, &rev, on_change, &R);

    if (pipe2(sigpipe_fds, O_CLOEXEC | O_NONBLOCK)) {
        diag("error", "pipe: %s", strerror(errno));
        status = 1;
        goto out;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    curl_global_init(CURL_GLOBAL_DEFAULT);
    R.multi = curl_multi_init();
    if (!(cev = curlev_new(R.multi, err, sizeof err))) {   /* before any transfer is added */
        diag("error", "%s", err);
        status = 1;
        goto out;
    }
    deliver = deliver_new(R.conn, R.multi, err, sizeof err);   /* subscriptions */
    if (!deliver) {
        diag("error", "%s", err);
        status = 2;
        goto out;
    }
    lk.deliver = deliver;
    traces = traces_new(R.conn, R.multi, err, sizeof err);      /* OpenTelemetry export */
    if (!traces && err[0]) {
        diag("error", "%s", err);
        status = 2;
        goto out;
    }
    lk.traces = traces;
    int64_t watchdog_us = env_num("WATCHDOG_USEC", 0, 0, LLONG_MAX), next_watchdog = 0;
    diag("info", "started (owner %s, instance %s, database %s, %zu providers)", R.me.owner, R.me.instance, db,
                 R.providers->n);
    sd_notify_msg("READY=1\nSTATUS=running sessions");
    scan(&R);   /* crash recovery: every unfinished session, once */

    int commit_failed = 0;
    /* Deltas alone wait for the next commit (gathering meanwhile) at most a gap
     * after the last one began: none after a commit of fewer sessions' deltas than
     * FLUSH_SMALL (at a light load, 20 sessions, one or two a commit, a gap would
     * only be a wait), else 100 us for each session the last one carried, at most
     * FLUSH_MS (200 sessions: the runner's CPU a delta 40-41 -> 34-36 us on SQLite,
     * 22-23 -> 17-18 on PostgreSQL against a flat 2 ms, p99 the same; 20 sessions
     * wait at most 2 ms, as before; bench/RESULTS.md). */
    outbox_pace pace = {env_num("DSTREAM_RUNNER_FLUSH_SMALL", 8, 0, LLONG_MAX),
                        env_num("DSTREAM_RUNNER_FLUSH_MS", 5, 0, LLONG_MAX),
                        env_num("DSTREAM_RUNNER_FLUSH_SESSION_US", 100, 0, 1000000)};
    int64_t last_flush = 0, last_batch = 0;
    int64_t drive_budget_us = env_num("DSTREAM_RUNNER_DRIVE_BUDGET_US", 2000, 0, LLONG_MAX);
    /* Retention: expired streams are removed a little at a time (a few batches, a
     * few milliseconds of the loop), more often while a backlog lasts. */
    int64_t sweep_ms = env_num("DSTREAM_SWEEP_MS", 60000, 0, LLONG_MAX);
    int64_t next_sweep = timefmt_now_ms() + sweep_ms;
    /* Retention by policy: a pass in slices of the same few milliseconds, on the
     * sweep's period, the next slice soon after while the pass has work left. */
    retain_stats gc_pass;
    memset(&gc_pass, 0, sizeof gc_pass);
    int64_t next_gc = retention.n && sweep_ms ? timefmt_now_ms() + sweep_ms : 0;
    int gc_batch = (int)env_num("DSTREAM_RETENTION_BATCH", RETAIN_BATCH_ITEMS, 1, RETAIN_BATCH_ITEMS * 4);
    if (retention.n) diag("info", "retention: %zu policies from %s, a pass every %lld ms", retention.n,
                          retention_path, (long long)sweep_ms);
    memtrim_t trim = {0, 0};
    while (!R.stopping) {
        /* Wait for a transfer, a change, a signal or the nearest timer. */
        int64_t now = timefmt_now_ms();
        /* Sessions cost nothing while idle; the loop itself turns once a second
         * to publish its figures (runner/stats.c: "runner up" in /metrics). */
        int64_t wait = 1000;
        if (watchdog_us) {
            if (now >= next_watchdog) {
                sd_notify_msg("WATCHDOG=1");
                next_watchdog = now + watchdog_us / 2000;
            }
            if (next_watchdog - now < wait) wait = next_watchdog - now;
        }
        /* Parked sessions (waiting only for a time, sessidx.c): those due join the
         * list, and of the others only the soonest counts. */
        int64_t parked = runner_unpark(&R, now);
        if (parked && parked - now < wait) wait = parked - now;
        size_t live = 0;
        /* (after a failed commit, the longest gap: a retry every FLUSH_MS) */
        int64_t gap = outbox_gap(&pace, last_batch, commit_failed);
        /* (leases given up go with the next commit: outbox_release) */
        if (R.nreleases && last_flush + gap - now < wait) wait = last_flush + gap - now;
        for (sess_t *s = R.sessions; s; s = s->next) {
            live++;
            /* (a drive waits for its session's commit; one put off goes at the next turn) */
            if ((s->dirty && !s->nout) || (s->put_off && (s->dirty || s->due))) wait = 0;
            if (s->timer_ms && s->timer_ms - now < wait) wait = s->timer_ms - now;
            if (s->lease.held && s->rq && renew_at(&R, s) - now < wait) wait = renew_at(&R, s) - now;
            if (awaits_commit(s) && last_flush + gap - now < wait)
                wait = last_flush + gap - now;
            if (s->lease.held && s->rq) {   /* the commit that renews it */
                int64_t at = s->lease.renew_ms > last_flush + gap ? s->lease.renew_ms : last_flush + gap;
                if (at - now < wait) wait = at - now;
            }
        }
        if (sweep_ms && next_sweep - now < wait) wait = next_sweep - now;
        if (next_gc && next_gc - now < wait) wait = next_gc - now;
        wait = tap_wait(&R, now, wait);
        wait = deliver_wait(deliver, now, wait);
        wait = traces_wait(traces, now, wait);
        wait = curlev_wait(cev, wait);
        if (commit_failed && wait > 100) wait = 100;
        if (wait < 0) wait = 0;
        int timeout = rmcp_timeout(R.mcp, (int)wait);
        struct curl_waitfd extra[2 + RMCP_FDS_MAX] = {{wake_waiter_fd(waiter), CURL_WAIT_POLLIN, 0},
                                                      {sigpipe_fds[0], CURL_WAIT_POLLIN, 0}};
        unsigned nmcp = rmcp_waitfds(R.mcp, extra + 2, RMCP_FDS_MAX);
        /* The transfers' sockets are one descriptor here (curlev.c); the others'
         * readiness is told as curl_multi_poll told it (in, out, pri). */
        struct pollfd pfd[3 + RMCP_FDS_MAX];
        unsigned nfd = 2 + nmcp;
        for (unsigned i = 0; i < nfd; i++) pfd[i] = (struct pollfd){extra[i].fd, (short)extra[i].events, 0};
        pfd[nfd] = (struct pollfd){curlev_fd(cev), POLLIN, 0};
        if (poll(pfd, nfd + 1, timeout) > 0)
            for (unsigned i = 0; i < nfd; i++) extra[i].revents = pfd[i].revents & (POLLIN | POLLOUT | POLLPRI);
        rmcp_process(R.mcp, extra + 2, nmcp);
        if (extra[1].revents) {
            char buf[16];
            while (read(sigpipe_fds[0], buf, sizeof buf) > 0) {}
            R.stopping = 1;
        }
        if (extra[0].revents) {
            wake_clear(waiter);
            log_changes_tails(R.conn, &rev, on_look, &lk);
        }
        curlev_run(cev, pfd[nfd].revents != 0);
        runner_stats_tick(&R);
        /* After a burst of sessions, what it left free goes back to the system:
         * the page cache the burst filled, then what glibc keeps. */
        memtrim_turn(&trim, live, R.conn);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(R.multi, &left))) {
            if (msg->msg != CURLMSG_DONE || deliver_finished(deliver, msg) || traces_finished(traces, msg)) continue;
            rq_t *q = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
            if (q) turn_finished(&R, q, msg->data.result);
        }
        tap_pump(&R, turn_finished);
        /* Timers that fired and leases to renew, then every session to look at. */
        now = timefmt_now_ms();
        runner_unpark(&R, now);
        for (sess_t *s = R.sessions; s; s = s->next) {
            if ((s->timer_ms && now >= s->timer_ms) || (s->lease.held && s->rq && now >= renew_at(&R, s))) s->due = 1;
        }
        drive_all(&R, drive_budget_us);
        runner_claim(&R);
        deliver_tick(deliver);
        traces_tick(traces);
        if (traces) {
            rstats_otlp ot;
            traces_stats_get(traces, &ot);
            runner_stats_otlp(&ot);
        }
        if (sweep_ms && (now = timefmt_now_ms()) >= next_sweep) {
            log_sweep_limits lim = {RUNNER_SWEEP_STREAMS, RUNNER_SWEEP_MESSAGES, RUNNER_SWEEP_BUDGET_MS};
            log_sweep_stats st;
            memset(&st, 0, sizeof st);
            int rc = log_sweep_run(R.conn, &lim, &st);
            if (rc < 0) diag("warn", "retention sweep: %s", errs_str(rc));
            else if (st.streams) diag("info", "retention sweep: %lld expired streams removed (%lld messages)%s",
                                      (long long)st.streams, (long long)st.messages, st.more ? ", more left" : "");
            next_sweep = timefmt_now_ms() + (st.more ? RUNNER_SWEEP_AGAIN_MS : sweep_ms);
        }
        if (next_gc && (now = timefmt_now_ms()) >= next_gc) {
            retain_opts go;
            memset(&go, 0, sizeof go);
            go.budget_ms = RUNNER_SWEEP_BUDGET_MS;
            go.batch_items = gc_batch;
            go.batch_msgs = RUNNER_SWEEP_MESSAGES;
            retain_stats was = gc_pass;
            int rc = retain_run(R.conn, &retention, &gc_state, &go, &gc_pass);
            if (rc < 0) diag("warn", "retention: %s", errs_str(rc));
            else if (gc_pass.streams != was.streams || gc_pass.sessions != was.sessions)
                diag("info", "retention: %lld sessions and %lld streams deleted so far in this pass%s",
                     (long long)gc_pass.sessions, (long long)gc_pass.streams, rc == 1 ? ", more left" : "");
            if (rc == 0) {
                if (gc_pass.streams || gc_pass.sessions || gc_pass.snapshots)
                    diag("info", "retention: pass done: %lld sessions and %lld streams deleted, %lld kept,"
                                 " %lld snapshots thinned", (long long)gc_pass.sessions, (long long)gc_pass.streams,
                         (long long)gc_pass.kept, (long long)gc_pass.snapshots);
                memset(&gc_pass, 0, sizeof gc_pass);
            }
            next_gc = timefmt_now_ms() + (rc == 1 ? RUNNER_SWEEP_AGAIN_MS : sweep_ms);
        }
        /* The deltas gathered, then one commit for everything: at once when
         * anything but deltas waits or the last commit was small, else at most one
         * every gap (deltas gather meanwhile: fewer, bigger commits under
         * load). */
        now = timefmt_now_ms();
        int urgent = 0;
        for (sess_t *s = R.sessions; s && !urgent; s = s->next) urgent = s->nout && !s->out_deltas_only;
        if (urgent || now - last_flush >= gap) {
            int64_t batch = 0;
            for (sess_t *s = R.sessions; s; s = s->next) {
                batch += awaits_commit(s);
                if (s->rq) request_flush(&R, s->rq);
            }
            commit_failed = runner_commit(&R) != 0;
            last_flush = now;
            last_batch = batch;
        }
        /* The figures after the commit, never between a delta's read and its
         * commit: their publish is a commit of its own (runner/stats.h). */
        int pending = 0;
        for (sess_t *s = R.sessions; s && !pending; s = s->next)
            pending = awaits_commit(s);
        runner_stats_publish(&R, pending);
    }

    diag("info", "stopping: cutting requests in flight");
    sd_notify_msg("STOPPING=1");
    runner_shutdown(&R);
    runner_forget_all(&R);
    runner_commit(&R);      /* the leases they held, released */
out:
    retain_state_free(&gc_state);
    retain_free(&retention);
    rmcp_free(R.mcp);
    json_decref(R.mcp_config);
    deliver_free(deliver);
    traces_free(traces);
    if (R.multi) {
        curl_multi_cleanup(R.multi);
        curl_global_cleanup();
    }
    curlev_free(cev);
    wake_waiter_free(waiter);
    wake_stop(wake);
    log_conn_close(R.conn);
    log_close(R.log);
    json_decref(R.pricing);
    provcfg_free(R.providers);
    free(R.releases);
    if (status) return status;
    diag("info", "stopped (%llu commits, %llu events dropped after a lost lease; %llu views decided on, %llu of"
                 " them kept across commits; %llu changes that were this process's own deltas; leases renewed"
                 " %llu times in commits, %llu by drives; %llu leases taken or renewed by drives in %llu commits; %llu new"
                 " sessions' claims put off for the share; %llu commits made again one session at a time; %llu turns"
                 " whose drives were cut at their budget; %llu leases given up in commits)",
         (unsigned long long)R.commits, (unsigned long long)R.dropped, (unsigned long long)R.drives,
         (unsigned long long)R.views_kept, (unsigned long long)R.wakes_own, (unsigned long long)R.renewed_commit,
         (unsigned long long)R.renewed_drive, (unsigned long long)R.claims, (unsigned long long)R.claim_commits,
         (unsigned long long)R.deferred, (unsigned long long)R.commit_retries,
         (unsigned long long)R.drives_put_off, (unsigned long long)R.released);
    return 0;
}

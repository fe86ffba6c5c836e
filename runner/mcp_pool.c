/* runner/mcp_pool: supervision of the operator's MCP servers (see mcp_pool.h).
 *
 * Each configured server is a small state machine driven from the runner's loop:
 *
 *   STOPPED --use--> INIT --initialize ok--> LISTING --last page--> READY
 *      ^               |                        |                      |
 *      +--- reaped ----+---- exit / EOF / timeout / bad answer --------+
 *
 * Nothing blocks: a start is fork+exec, the pipes are non-blocking, a dying
 * process is reaped with WNOHANG on later turns (a SIGKILL follows a SIGTERM that
 * was ignored), and every wait is a deadline checked by rmcp_process. Calls wait
 * in the server's queue until it is READY and a concurrency slot is free; each
 * has its deadline from the moment it is sent. Finished calls collect in a list
 * delivered at the end of rmcp_process, so a completion callback never runs
 * inside a call of the runner into this module.
 *
 * A READY server that sends notifications/tools/list_changed is marked stale; the
 * next rmcp_tools for it lists its tools again (page by page, as at its start,
 * with the same deadline) and answers PENDING until the new list is in, so the
 * next request offers what the server offers now. Calls go on meanwhile. A server
 * that says "changed" at every list is listed at most RMCP_RELISTS_MAX times in a
 * row before its latest list is used as it is. */
#include "mcp_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/diag.h"
#include "../lib/buf.h"
#include "../lib/timefmt.h"
#include "../lib/mcp.h"
#include "../lib/utf8.h"

#define RMCP_WRITE_MAX (64 << 20)   /* bytes queued for a server's stdin */
#define RMCP_ERR_LINE 2048          /* a stderr line logged at most this long */
#define RMCP_BACKOFF_MS 250         /* first restart delay, doubled per crash */
#define RMCP_BACKOFF_MAX_MS 30000
#define RMCP_CURSOR_MAX 1024
#define RMCP_LIST_PAGES 64          /* tools/list pages followed */
#define RMCP_DYING_MS 500           /* from a closed output to giving up on the exit status */
#define RMCP_START_MS 10000         /* the least time a start is given */
#define RMCP_RELISTS_MAX 3          /* lists again in a row before a changing list is used as it is */

typedef enum { S_STOPPED, S_INIT, S_LISTING, S_READY, S_STOPPING } sstate;

struct rmcp_call {
    struct rmcp_server *srv;
    char tool[132];
    json_t *args;
    int64_t id;                 /* 0 while queued */
    int64_t deadline;
    rmcp_done_fn done;
    void *ud;
    json_t *output;             /* when finished */
    int is_error, failed;
    rmcp_call *next;
};

typedef struct rmcp_server {
    char name[72];
    const json_t *conf;
    sstate state;
    pid_t pid;                  /* 0: no process (or reaped) */
    int in, out, err;           /* pipes, -1 when closed */
    mcp_reader rd;
    buf_t wq;                   /* bytes for stdin */
    buf_t errline;
    int64_t next_id;
    int64_t init_id, list_id;   /* the request we wait for in INIT / LISTING */
    int64_t phase_deadline;     /* INIT/LISTING must answer by then */
    int64_t kill_at;            /* S_STOPPING: SIGKILL at */
    char cursor[RMCP_CURSOR_MAX];
    int pages;
    json_t *tools, *listing;
    int stale;                  /* it said its tools changed: list them again before they are next offered */
    int relisting;              /* READY, and listing its tools again (list_id, phase_deadline, listing) */
    int relists;                /* lists again since its tools were last handed out */
    rmcp_call *queue;           /* waiting, in order */
    rmcp_call *flight;          /* sent */
    int inflight;
    int timeout_ms, concurrency, idle_ms;
    int64_t last_used;
    int start_failures;         /* in a row, without reaching READY */
    int64_t failed_until;       /* failed: refuse until then */
    int64_t restart_at;         /* a wanted restart waits until then */
    int crashes;
    int wanted;                 /* someone waits for its tools: start when allowed */
    int64_t dying_until;        /* its output closed: fail its calls by then at the latest */
    char why[256];              /* the last failure, for err and tool errors */
    int64_t calls, starts;      /* for /metrics (rmcp_stats) */
    int64_t failures[RSTATS_MCP_REASONS];
} rmcp_server;

struct rmcp {
    rmcp_server *srv;
    size_t n;
    rmcp_call *finished;
    rmcp_change_fn on_change;
    void *ud;
};

static int conf_int(const json_t *conf, const char *key, int def)
{
    json_t *v = json_object_get(conf, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (int)json_integer_value(v) : def;
}

rmcp_t *rmcp_new(const json_t *config, rmcp_change_fn on_change, void *ud)
{
    rmcp_t *m = calloc(1, sizeof *m);
    if (!m) abort();
    m->on_change = on_change;
    m->ud = ud;
    const json_t *servers = json_object_get(config, "mcpServers");
    m->srv = calloc(json_object_size(servers) + 1, sizeof *m->srv);
    if (!m->srv) abort();
    const char *name;
    const json_t *conf;
    json_object_foreach((json_t *)servers, name, conf) {
        rmcp_server *s = &m->srv[m->n++];
        snprintf(s->name, sizeof s->name, "%s", name);
        s->conf = conf;
        s->in = s->out = s->err = -1;
        s->timeout_ms = conf_int(conf, "timeoutMs", MCP_TIMEOUT_MS);
        s->concurrency = conf_int(conf, "concurrency", MCP_CONCURRENCY);
        s->idle_ms = conf_int(conf, "idleStopMs", MCP_IDLE_STOP_MS);
        mcp_reader_init(&s->rd, 0);
        buf_init(&s->wq, RMCP_WRITE_MAX);
        buf_init(&s->errline, RMCP_ERR_LINE);
    }
    return m;
}

static rmcp_server *find(rmcp_t *m, const char *name)
{
    for (size_t i = 0; m && name && i < m->n; i++)
        if (!strcmp(m->srv[i].name, name)) return &m->srv[i];
    return NULL;
}

const json_t *rmcp_server_conf(rmcp_t *m, const char *server)
{
    rmcp_server *s = find(m, server);
    return s ? s->conf : NULL;
}

/* ---- calls ----------------------------------------------------------------------------- */

static void call_free(rmcp_call *c)
{
    json_decref(c->args);
    json_decref(c->output);
    free(c);
}

/* Finish c (already unlinked) with output (stolen); delivered by rmcp_process.
 * reason: why it failed (RSTATS_MCP_*, counted for its server), or -1. */
static void finish(rmcp_t *m, rmcp_call *c, json_t *output, int is_error, int failed, int reason)
{
    if (c->srv && reason >= 0) c->srv->failures[reason]++;
    c->output = output ? output : json_string("");
    c->is_error = is_error;
    c->failed = failed;
    c->next = NULL;
    rmcp_call **pp = &m->finished;
    while (*pp) pp = &(*pp)->next;
    *pp = c;
}

static void fail_list(rmcp_t *m, rmcp_call **list, const char *why, int reason)
{
    while (*list) {
        rmcp_call *c = *list;
        *list = c->next;
        finish(m, c, json_string(why), 1, 1, reason);
    }
}

static int unlink_call(rmcp_call **list, rmcp_call *c)
{
    for (rmcp_call **pp = list; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            return 1;
        }
    return 0;
}

/* ---- processes ----------------------------------------------------------------------------- */

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* The child's environment: enough to find programs and a home, plus the operator's
 * env for this server. The runner's own environment holds provider keys and is
 * never passed on. Returns a NULL-terminated array (free with free_env). */
static char **child_env(const json_t *conf)
{
    static const char *const keep[] = {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", NULL};
    const json_t *env = json_object_get(conf, "env");
    size_t n = 0, cap = json_object_size(env) + 8;
    char **out = calloc(cap, sizeof *out);
    if (!out) abort();
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)env, k, v) {
        size_t len = strlen(k) + json_string_length(v) + 2;
        out[n] = malloc(len);
        if (!out[n]) abort();
        snprintf(out[n++], len, "%s=%s", k, json_string_value(v));
    }
    for (int i = 0; keep[i]; i++) {
        const char *val = getenv(keep[i]);
        if (json_object_get(env, keep[i])) continue;
        if (!val && strcmp(keep[i], "PATH") == 0) val = "/usr/local/bin:/usr/bin:/bin";
        if (!val) continue;
        size_t len = strlen(keep[i]) + strlen(val) + 2;
        out[n] = malloc(len);
        if (!out[n]) abort();
        snprintf(out[n++], len, "%s=%s", keep[i], val);
    }
    return out;
}

static void free_env(char **env)
{
    for (size_t i = 0; env && env[i]; i++) free(env[i]);
    free(env);
}

/* A start (initialize, each tools/list page) may take the call timeout, and never
 * less than RMCP_START_MS: a program's start on a busy machine is not a hung call. */
static int start_timeout(const rmcp_server *s)
{
    return s->timeout_ms > RMCP_START_MS ? s->timeout_ms : RMCP_START_MS;
}

static void send_line(rmcp_server *s, int rc)
{
    if (rc) diag("info", "mcp %s: cannot queue a message (%s)", s->name, rc == BUF_ETOOBIG ? "stdin backlog full" : "no memory");
}

static void send_request(rmcp_server *s, int64_t id, const char *method, json_t *params)
{
    send_line(s, mcp_build_request(&s->wq, id, method, params));
    json_decref(params);
}

/* fork+exec the server with its pipes; returns 0 or -1 with s->why. */
static int spawn(rmcp_server *s)
{
    int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
    const json_t *args = json_object_get(s->conf, "args");
    const char *cmd = json_string_value(json_object_get(s->conf, "command"));
    const char *cwd = json_string_value(json_object_get(s->conf, "cwd"));
    size_t na = json_array_size(args);
    if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC)) {
        snprintf(s->why, sizeof s->why, "cannot make pipes: %s", strerror(errno));
        goto fail;
    }
    /* Everything the child needs is built before fork: after it, only
     * async-signal-safe calls. */
    char **argv = calloc(na + 2, sizeof *argv);
    if (!argv) abort();
    argv[0] = (char *)cmd;
    for (size_t i = 0; i < na; i++) argv[i + 1] = (char *)json_string_value(json_array_get(args, i));
    char **envp = child_env(s->conf);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        if (dup2(pin[0], 0) < 0 || dup2(pout[1], 1) < 0 || dup2(perr[1], 2) < 0) _exit(126);
        /* Descriptors of the runner (database, sockets) stay out of the server. */
        if (close_range(3, ~0U, 0))
            for (int fd = 3; fd < 4096; fd++) close(fd);
        if (cwd && chdir(cwd)) _exit(126);
        execve(cmd, argv, envp);
        _exit(127);
    }
    free(argv);
    free_env(envp);
    if (pid < 0) {
        snprintf(s->why, sizeof s->why, "cannot fork: %s", strerror(errno));
        goto fail;
    }
    setpgid(pid, pid);  /* also from here: whichever runs first wins, both agree */
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    s->pid = pid;
    s->in = pin[1];
    s->out = pout[0];
    s->err = perr[0];
    fcntl(s->in, F_SETFL, O_NONBLOCK);
    fcntl(s->out, F_SETFL, O_NONBLOCK);
    fcntl(s->err, F_SETFL, O_NONBLOCK);
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        if (pin[i] >= 0) close(pin[i]);
        if (pout[i] >= 0) close(pout[i]);
        if (perr[i] >= 0) close(perr[i]);
    }
    return -1;
}

static void start(rmcp_t *m, rmcp_server *s)
{
    int64_t now = timefmt_now_ms();
    buf_reset(&s->wq);
    buf_reset(&s->errline);
    mcp_reader_free(&s->rd);
    mcp_reader_init(&s->rd, 0);
    json_decref(s->listing);
    s->listing = NULL;
    s->next_id = 1;
    s->restart_at = 0;
    if (spawn(s)) {
        diag("info", "mcp %s: %s", s->name, s->why);
        s->start_failures++;
        s->restart_at = now + RMCP_BACKOFF_MS;
        if (s->start_failures >= RMCP_START_FAILURES) {
            s->failed_until = now + RMCP_FAILED_MS;
            s->wanted = 0;
            fail_list(m, &s->queue, s->why, RSTATS_MCP_UNAVAILABLE);
            if (m->on_change) m->on_change(m->ud, s->name);
        }
        return;
    }
    s->starts++;
    diag("info", "mcp %s: started (pid %d)", s->name, (int)s->pid);
    s->state = S_INIT;
    s->init_id = s->next_id++;
    s->phase_deadline = now + start_timeout(s);
    s->last_used = now;
    send_request(s, s->init_id, "initialize", mcp_initialize_params("1"));
}

/* Begin stopping the process (its pipes closed: it sees EOF on stdin); it is
 * reaped later. why: for the calls in flight, which fail. */
static void stop(rmcp_t *m, rmcp_server *s, const char *why, int crashed)
{
    int was_ready = s->state == S_READY;
    int64_t now = timefmt_now_ms();
    s->dying_until = 0;
    close_fd(&s->in);
    close_fd(&s->out);
    close_fd(&s->err);
    fail_list(m, &s->flight, why, RSTATS_MCP_CRASH);
    s->inflight = 0;
    json_decref(s->tools);
    s->tools = NULL;
    json_decref(s->listing);
    s->listing = NULL;
    s->stale = s->relisting = s->relists = 0;     /* a start lists anew */
    if (s->pid > 0) {
        kill(-s->pid, SIGTERM);
        s->state = S_STOPPING;
        s->kill_at = now + RMCP_STOP_GRACE_MS;
    } else {
        s->state = S_STOPPED;
    }
    if (!crashed) return;
    snprintf(s->why, sizeof s->why, "%s", why);
    if (!was_ready) s->start_failures++;
    s->crashes++;
    int64_t delay = RMCP_BACKOFF_MS;
    for (int i = 1; i < s->crashes && delay < RMCP_BACKOFF_MAX_MS; i++) delay *= 2;
    s->restart_at = now + (delay > RMCP_BACKOFF_MAX_MS ? RMCP_BACKOFF_MAX_MS : delay);
    if (s->start_failures >= RMCP_START_FAILURES) {
        diag("info", "mcp %s: failed %d starts in a row: unavailable for %d s", s->name, s->start_failures,
                     RMCP_FAILED_MS / 1000);
        s->failed_until = now + RMCP_FAILED_MS;
        s->wanted = 0;
        fail_list(m, &s->queue, s->why, RSTATS_MCP_UNAVAILABLE);
    }
    if (m->on_change) m->on_change(m->ud, s->name);
}

/* ---- the protocol ------------------------------------------------------------------------------ */

static void send_calls(rmcp_server *s)
{
    int64_t now = timefmt_now_ms();
    while (s->state == S_READY && s->queue && s->inflight < s->concurrency) {
        rmcp_call *c = s->queue;
        s->queue = c->next;
        c->id = s->next_id++;
        c->deadline = now + s->timeout_ms;
        c->next = s->flight;
        s->flight = c;
        s->inflight++;
        s->last_used = now;
        send_request(s, c->id, "tools/call", mcp_call_params(c->tool, c->args));
    }
}

static void list_page(rmcp_server *s)
{
    s->list_id = s->next_id++;
    s->phase_deadline = timefmt_now_ms() + start_timeout(s);
    send_request(s, s->list_id, "tools/list", mcp_list_params(s->cursor));
}

/* Ask for its tools from the first page (at its start, or again when they changed). */
static void list_tools(rmcp_server *s)
{
    s->cursor[0] = '\0';
    s->pages = 0;
    json_decref(s->listing);
    s->listing = json_array();
    list_page(s);
}

typedef struct msg_ctx {
    rmcp_t *m;
    rmcp_server *s;
    int broken;                 /* stop after this message: protocol failure */
    char why[256];
} msg_ctx;

static void on_response(msg_ctx *x, const mcp_msg *msg)
{
    rmcp_server *s = x->s;
    char err[256];
    if (s->state == S_INIT && msg->id == s->init_id) {
        char version[32];
        if (msg->kind == MCP_MSG_ERROR) {
            snprintf(x->why, sizeof x->why, "initialize failed: %.200s", msg->message);
            utf8_scrub(x->why);     /* %.200s may cut a character in two */
        } else if (mcp_parse_initialize(msg->result, version, sizeof version, err, sizeof err)) {
            snprintf(x->why, sizeof x->why, "%s", err);
        } else {
            diag("info", "mcp %s: initialized (protocol %s)", s->name, version);
            send_line(s, mcp_build_notification(&s->wq, "notifications/initialized", NULL));
            s->state = S_LISTING;
            list_tools(s);
            return;
        }
        x->broken = 1;
        return;
    }
    if ((s->state == S_LISTING || s->relisting) && msg->id == s->list_id) {
        int skipped = 0;
        if (msg->kind == MCP_MSG_ERROR) {
            snprintf(x->why, sizeof x->why, "tools/list failed: %.200s", msg->message);
            utf8_scrub(x->why);     /* %.200s may cut a character in two */
            x->broken = 1;
            return;
        }
        if (mcp_parse_tools(msg->result, s->listing, s->cursor, sizeof s->cursor, &skipped, err, sizeof err)) {
            snprintf(x->why, sizeof x->why, "%s", err);
            x->broken = 1;
            return;
        }
        if (skipped) diag("info", "mcp %s: %d malformed tools left out", s->name, skipped);
        if (s->cursor[0] && ++s->pages < RMCP_LIST_PAGES) {
            list_page(s);
            return;
        }
        json_decref(s->tools);
        s->tools = s->listing;
        s->listing = NULL;
        if (s->relisting) {
            s->relisting = 0;
            diag("info", "mcp %s: tools listed again, %zu tools", s->name, json_array_size(s->tools));
            if (x->m->on_change) x->m->on_change(x->m->ud, s->name);
            return;
        }
        s->state = S_READY;
        s->start_failures = 0;
        s->wanted = 0;
        s->last_used = timefmt_now_ms();
        diag("info", "mcp %s: ready, %zu tools", s->name, json_array_size(s->tools));
        send_calls(s);
        if (x->m->on_change) x->m->on_change(x->m->ud, s->name);
        return;
    }
    for (rmcp_call *c = s->flight; c; c = c->next) {
        if (c->id != msg->id) continue;
        unlink_call(&s->flight, c);
        s->inflight--;
        s->last_used = timefmt_now_ms();
        if (msg->kind == MCP_MSG_ERROR) {
            char text[512];
            snprintf(text, sizeof text, "MCP error %lld: %.400s", (long long)msg->code, msg->message);
            finish(x->m, c, json_string(utf8_scrub(text)), 1, 1, RSTATS_MCP_ERROR);
        } else {
            int is_error = 0;
            json_t *out = mcp_call_output(msg->result, &is_error);
            if (out) finish(x->m, c, out, is_error, 0, is_error ? RSTATS_MCP_ERROR : -1);
            else finish(x->m, c, json_string("the server's result is not an object"), 1, 1, RSTATS_MCP_ERROR);
        }
        send_calls(s);
        return;
    }
    /* A late answer to a call that timed out, or an id we never used. */
    diag("info", "mcp %s: answer to unknown request %lld ignored", s->name, (long long)msg->id);
}

static int on_msg(void *ud, const mcp_msg *msg)
{
    msg_ctx *x = ud;
    rmcp_server *s = x->s;
    switch (msg->kind) {
    case MCP_MSG_RESPONSE:
    case MCP_MSG_ERROR: on_response(x, msg); break;
    case MCP_MSG_REQUEST:
        /* We offer no capabilities: ping is answered, anything else refused. */
        if (!strcmp(msg->method, "ping")) send_line(s, mcp_build_reply(&s->wq, msg->rid, NULL, 0, NULL));
        else send_line(s, mcp_build_reply(&s->wq, msg->rid, NULL, MCP_ERR_METHOD_NOT_FOUND, "not supported by dstream"));
        break;
    case MCP_MSG_NOTIFICATION:
        if (!strcmp(msg->method, "notifications/message")) {
            char *d = json_dumps(json_object_get(msg->params, "data"), JSON_COMPACT | JSON_ENCODE_ANY);
            diag("info", "mcp %s: %s: %.500s", s->name,
                         json_string_value(json_object_get(msg->params, "level")) ?: "log", d ? d : "");
            free(d);
        } else if (!strcmp(msg->method, "notifications/tools/list_changed")) {
            s->stale = 1;
            diag("info", "mcp %s: its tools changed (listed again before they are next offered)", s->name);
        } else {
            diag("info", "mcp %s: notification %.100s", s->name, msg->method);
        }
        break;
    case MCP_MSG_INVALID: diag("info", "mcp %s: unreadable message: %s", s->name, msg->message); break;
    }
    return x->broken;
}

/* ---- I/O ------------------------------------------------------------------------------------------ */

static void read_out(rmcp_t *m, rmcp_server *s)
{
    char buf[65536];
    for (int rounds = 0; rounds < 64 && s->out >= 0; rounds++) {
        ssize_t n = read(s->out, buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n <= 0) {
            /* Its stdout closed: it exited, or will. The calls in flight fail once it
             * is reaped (to say how it ended) or after a short grace. */
            close_fd(&s->out);
            s->dying_until = timefmt_now_ms() + RMCP_DYING_MS;
            return;
        }
        msg_ctx x = {m, s, 0, ""};
        mcp_reader_feed(&s->rd, buf, (size_t)n, on_msg, &x);
        if (x.broken) {
            diag("info", "mcp %s: %s", s->name, x.why);
            stop(m, s, x.why, 1);
            return;
        }
    }
}

static void log_err_line(rmcp_server *s)
{
    if (s->errline.len) diag("info", "mcp %s: stderr: %s", s->name, s->errline.p);
    buf_reset(&s->errline);
}

static void read_err(rmcp_server *s)
{
    char buf[8192];
    for (int rounds = 0; rounds < 16 && s->err >= 0; rounds++) {
        ssize_t n = read(s->err, buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n <= 0) {
            log_err_line(s);
            close_fd(&s->err);
            return;
        }
        for (ssize_t i = 0; i < n; i++) {
            char c = buf[i];
            if (c == '\n') {
                log_err_line(s);
            } else {
                if (s->errline.len + 1 >= RMCP_ERR_LINE) log_err_line(s);
                buf_append(&s->errline, (unsigned char)c < 0x20 && c != '\t' ? "?" : &c, 1);
            }
        }
    }
}

static void write_in(rmcp_t *m, rmcp_server *s)
{
    while (s->in >= 0 && s->wq.len) {
        ssize_t n = write(s->in, s->wq.p, s->wq.len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n < 0) {
            stop(m, s, "the MCP server closed its input", 1);
            return;
        }
        memmove(s->wq.p, s->wq.p + n, s->wq.len - (size_t)n);
        s->wq.len -= (size_t)n;
        s->wq.p[s->wq.len] = '\0';
    }
}

/* ---- the interface ------------------------------------------------------------------------------ */

/* Start s if it is stopped and may start now. */
static void want(rmcp_t *m, rmcp_server *s)
{
    int64_t now = timefmt_now_ms();
    s->last_used = now;
    if (s->state != S_STOPPED) return;
    if (s->failed_until && now < s->failed_until) return;
    if (s->failed_until) {          /* the failed period is over: try afresh */
        s->failed_until = 0;
        s->start_failures = 0;
    }
    if (s->restart_at && now < s->restart_at) return;
    start(m, s);
}

int rmcp_tools(rmcp_t *m, const char *server, const json_t **tools, char *err, size_t errcap)
{
    rmcp_server *s = find(m, server);
    if (!s) {
        snprintf(err, errcap, "no MCP server named %s is configured", server);
        return RMCP_FAILED;
    }
    want(m, s);
    if (s->state == S_READY && s->stale && !s->relisting && s->relists < RMCP_RELISTS_MAX) {
        s->stale = 0;
        s->relisting = 1;
        s->relists++;
        list_tools(s);
    }
    if (s->state == S_READY && !s->relisting) {
        s->relists = 0;
        *tools = s->tools;
        return RMCP_READY;
    }
    if (s->state == S_READY) return RMCP_PENDING;   /* on_change says when the list is in */
    if (s->failed_until && timefmt_now_ms() < s->failed_until) {
        snprintf(err, errcap, "MCP server %s is unavailable: %s", s->name, s->why);
        return RMCP_FAILED;
    }
    s->wanted = 1;
    return RMCP_PENDING;
}

rmcp_call *rmcp_call_start(rmcp_t *m, const char *server, const char *tool, const json_t *arguments,
                           rmcp_done_fn done, void *ud)
{
    rmcp_call *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    rmcp_server *s = find(m, server);
    snprintf(c->tool, sizeof c->tool, "%s", tool);
    c->args = arguments ? json_deep_copy(arguments) : json_object();
    c->done = done;
    c->ud = ud;
    c->srv = s;
    if (!s) {
        char why[160];
        snprintf(why, sizeof why, "no MCP server named %.64s is configured", server);
        finish(m, c, json_string(utf8_scrub(why)), 1, 1, -1);
        return c;
    }
    s->calls++;
    want(m, s);
    if (s->failed_until && timefmt_now_ms() < s->failed_until) {
        char why[400];
        snprintf(why, sizeof why, "MCP server %s is unavailable: %s", s->name, s->why);
        finish(m, c, json_string(why), 1, 1, RSTATS_MCP_UNAVAILABLE);
        return c;
    }
    rmcp_call **pp = &s->queue;
    while (*pp) pp = &(*pp)->next;
    *pp = c;
    send_calls(s);
    return c;
}

void rmcp_abandon(rmcp_t *m, rmcp_call *c)
{
    rmcp_server *s = c->srv;
    if (unlink_call(&m->finished, c) || (s && unlink_call(&s->queue, c))) {
        call_free(c);
        return;
    }
    if (s && unlink_call(&s->flight, c)) {
        s->inflight--;
        json_t *p = mcp_cancel_params(c->id, "the session no longer waits for it");
        send_line(s, mcp_build_notification(&s->wq, "notifications/cancelled", p));
        json_decref(p);
        call_free(c);
        send_calls(s);
    }
}

unsigned rmcp_waitfds(rmcp_t *m, struct curl_waitfd *out, unsigned cap)
{
    unsigned n = 0;
    for (size_t i = 0; m && i < m->n; i++) {
        rmcp_server *s = &m->srv[i];
        if (s->out >= 0 && n < cap) out[n++] = (struct curl_waitfd){s->out, CURL_WAIT_POLLIN, 0};
        if (s->err >= 0 && n < cap) out[n++] = (struct curl_waitfd){s->err, CURL_WAIT_POLLIN, 0};
        if (s->in >= 0 && s->wq.len && n < cap) out[n++] = (struct curl_waitfd){s->in, CURL_WAIT_POLLOUT, 0};
    }
    return n;
}

static void reap(rmcp_t *m, rmcp_server *s, int64_t now)
{
    int status;
    if (s->pid <= 0) return;
    pid_t r = waitpid(s->pid, &status, WNOHANG);
    if (r == 0) {
        if (s->state == S_STOPPING && now >= s->kill_at) {
            kill(-s->pid, SIGKILL);
            s->kill_at = now + RMCP_STOP_GRACE_MS;
        }
        if (s->dying_until && now >= s->dying_until)
            stop(m, s, s->state == S_READY ? "the MCP server closed its output during the call"
                                          : "the MCP server closed its output at start, before it was ready", 1);
        return;
    }
    char why[200] = "";
    const char *when = s->state == S_READY ? "during the call" : "at start, before it was ready";
    if (r == s->pid && WIFEXITED(status))
        snprintf(why, sizeof why, "the MCP server exited with status %d %s", WEXITSTATUS(status), when);
    else if (r == s->pid && WIFSIGNALED(status))
        snprintf(why, sizeof why, "the MCP server was killed by signal %d %s", WTERMSIG(status), when);
    else
        snprintf(why, sizeof why, "the MCP server went away %s", when);
    kill(-s->pid, SIGKILL);     /* whatever it left behind in its group */
    s->pid = 0;
    if (s->state == S_STOPPING) {
        s->state = S_STOPPED;
        return;
    }
    /* It exited on its own. */
    diag("info", "mcp %s: %s", s->name, why + 15);
    stop(m, s, why, 1);
    s->state = S_STOPPED;
}

void rmcp_process(rmcp_t *m, const struct curl_waitfd *fds, unsigned n)
{
    if (!m) return;
    for (unsigned i = 0; i < n; i++) {
        if (!fds[i].revents) continue;
        for (size_t k = 0; k < m->n; k++) {
            rmcp_server *s = &m->srv[k];
            if (fds[i].fd == s->out && s->out >= 0) read_out(m, s);
            else if (fds[i].fd == s->err && s->err >= 0) read_err(s);
            else if (fds[i].fd == s->in && s->in >= 0) write_in(m, s);
        }
    }
    int64_t now = timefmt_now_ms();
    for (size_t k = 0; k < m->n; k++) {
        rmcp_server *s = &m->srv[k];
        if ((s->state == S_INIT || s->state == S_LISTING || s->relisting) && now >= s->phase_deadline) {
            char why[160];
            snprintf(why, sizeof why, "the MCP server did not answer %s within %d ms",
                     s->state == S_INIT ? "initialize" : "tools/list", start_timeout(s));
            diag("info", "mcp %s: %s", s->name, why);
            stop(m, s, why, 1);
        }
        for (rmcp_call *c = s->flight, *next; c; c = next) {
            next = c->next;
            if (now < c->deadline) continue;
            unlink_call(&s->flight, c);
            s->inflight--;
            json_t *p = mcp_cancel_params(c->id, "timeout");
            send_line(s, mcp_build_notification(&s->wq, "notifications/cancelled", p));
            json_decref(p);
            char why[160];
            snprintf(why, sizeof why, "the tool did not answer within %d ms", s->timeout_ms);
            diag("info", "mcp %s: call %lld (%s) timed out", s->name, (long long)c->id, c->tool);
            finish(m, c, json_string(why), 1, 1, RSTATS_MCP_TIMEOUT);
        }
        send_calls(s);
        if (s->state == S_READY && !s->relisting && !s->flight && !s->queue && now - s->last_used >= s->idle_ms) {
            diag("info", "mcp %s: idle, stopping", s->name);
            stop(m, s, "stopped", 0);
        }
        reap(m, s, now);
        /* Calls waiting for a server that went down: start it again when allowed. */
        if (s->state == S_STOPPED && (s->queue || s->wanted)) want(m, s);
        if (s->wq.len && s->in >= 0) write_in(m, s);
    }
    /* Deliver; a callback may start new calls, which land on m->finished only
     * through finish() and are delivered on a later turn. */
    rmcp_call *list = m->finished;
    m->finished = NULL;
    while (list) {
        rmcp_call *c = list;
        list = c->next;
        rmcp_outcome o = {c->output, c->is_error, c->failed};
        c->done(c->ud, &o);
        call_free(c);
    }
}

int rmcp_timeout(rmcp_t *m, int max)
{
    int64_t now = timefmt_now_ms(), t = now + max;
    for (size_t k = 0; m && k < m->n; k++) {
        rmcp_server *s = &m->srv[k];
        if (m->finished) t = now;
        if (s->state == S_INIT || s->state == S_LISTING || s->relisting)
            t = s->phase_deadline < t ? s->phase_deadline : t;
        for (rmcp_call *c = s->flight; c; c = c->next) t = c->deadline < t ? c->deadline : t;
        if (s->state == S_READY && !s->flight && !s->queue && s->last_used + s->idle_ms < t)
            t = s->last_used + s->idle_ms;
        if (s->pid > 0 && (s->state == S_STOPPING || s->dying_until) && now + 10 < t) t = now + 10;
        if (s->state == S_STOPPED && (s->queue || s->wanted) && s->restart_at && s->restart_at < t)
            t = s->restart_at;
    }
    return t <= now ? 0 : (int)(t - now);
}

int rmcp_stats(rmcp_t *m, size_t i, rstats_mcp *out)
{
    if (!m || i >= m->n) return -1;
    const rmcp_server *s = &m->srv[i];
    memset(out, 0, sizeof *out);
    snprintf(out->server, sizeof out->server, "%s", s->name);
    out->calls = s->calls;
    out->starts = s->starts;
    memcpy(out->failures, s->failures, sizeof out->failures);
    return 0;
}

void rmcp_free(rmcp_t *m)
{
    if (!m) return;
    for (size_t k = 0; k < m->n; k++) {
        rmcp_server *s = &m->srv[k];
        if (s->state != S_STOPPED && s->state != S_STOPPING) stop(m, s, "the runner is stopping", 0);
        fail_list(m, &s->queue, "the runner is stopping", RSTATS_MCP_UNAVAILABLE);
        /* Give each a moment to go, then make sure it has. */
        for (int i = 0; s->pid > 0 && i < 20; i++) {
            if (waitpid(s->pid, NULL, WNOHANG) == s->pid) s->pid = 0;
            else usleep(10000);
        }
        if (s->pid > 0) {
            kill(-s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
        }
        mcp_reader_free(&s->rd);
        buf_free(&s->wq);
        buf_free(&s->errline);
        json_decref(s->tools);
        json_decref(s->listing);
    }
    /* Unfinished business is dropped: the runner is going away and its sessions'
     * logs say what a restart must redo. */
    while (m->finished) {
        rmcp_call *c = m->finished;
        m->finished = c->next;
        call_free(c);
    }
    free(m->srv);
    free(m);
}

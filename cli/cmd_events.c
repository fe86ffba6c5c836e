/* dstream events|convo|requests|export|search: reading sessions' events over HTTP,
 * or with --db on the database file (cli/offline.c).
 *
 *   dstream events ID [--follow] [--type T] [--last N] [--around OFFSET [--context N]]
 *   dstream convo ID
 *   dstream requests ID
 *   dstream export ID [--format jsonl|yaml]
 *   dstream search TEXT [--status S] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "http.h"
#include "../lib/otlp.h"
#include "../lib/session.h"

#define BOLD "\033[1m"
#define DIM "\033[2m"
#define CYAN "\033[36m"
#define RED "\033[31m"
#define EVENTS_MAX 1000000

int session_path(char *out, size_t cap, const char *id, const char *suffix);

/* Every event of session id (an array, caller decrefs) and the offset after the
 * last in next (for a follow). NULL on failure, *rc set. */
static json_t *all_events(const char *id, char *next, size_t ncap, int *rc)
{
    if (cli_db) return offline_events(id, next, ncap, rc);
    json_t *all = json_array();
    char off[64] = "-1";
    for (int pages = 0; pages < 100000; pages++) {
        char path[1400], q[128];
        snprintf(q, sizeof q, "/events?offset=%s", off);
        if (session_path(path, sizeof path, id, q)) {
            *rc = EXIT_USAGE;
            break;
        }
        http_res r;
        if ((*rc = http_call("GET", path, NULL, &r)) || (*rc = http_exit(path, &r))) {
            http_res_free(&r);
            break;
        }
        json_array_extend(all, r.json);
        int done = r.up_to_date || !r.next_offset[0] || !strcmp(r.next_offset, off) || json_array_size(all) > EVENTS_MAX;
        if (r.next_offset[0]) snprintf(off, sizeof off, "%s", r.next_offset);
        http_res_free(&r);
        if (done) {
            if (next) snprintf(next, ncap, "%s", off);
            return all;
        }
    }
    json_decref(all);
    return NULL;
}

static void print_event(const cli_opts *o, json_t *ev)
{
    if (o->json) {
        print_json(ev);
        return;
    }
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *at = json_string_value(json_object_get(ev, "createdAt"));
    char *p = json_dumps(json_object_get(ev, "payload"), JSON_COMPACT | JSON_ENCODE_ANY);
    size_t plen = p ? strlen(p) : 0;
    int cut = o->tty && plen > 160;
    printf("%s%s%s %s %s%-26s%s %.*s%s\n", c_on(o, DIM), json_string_value(json_object_get(ev, "offset")), c_off(o),
           at ? at + 11 : "", c_on(o, CYAN), type ? type : "?", c_off(o), cut ? 160 : (int)plen, p ? p : "",
           cut ? "…" : "");
    free(p);
}

static int type_match(const char *want, json_t *ev)
{
    if (!want) return 1;
    const char *t = json_string_value(json_object_get(ev, "type"));
    if (!t) return 0;
    size_t n = strlen(want);
    /* "tool" or "tool:" matches every tool:* type; otherwise the exact type. */
    if (want[n - 1] == ':') return !strncmp(t, want, n);
    return !strcmp(t, want) || (!strchr(want, ':') && !strncmp(t, want, n) && t[n] == ':');
}

typedef struct {
    const cli_opts *o;
    const char *type;
} follow_state;

static int follow_print(void *ud, json_t *ev)
{
    follow_state *f = ud;
    if (ev && type_match(f->type, ev)) print_event(f->o, ev);
    fflush(stdout);
    return 0;
}

static int follow_event(void *ud, const char *event, const char *data, const char *id)
{
    (void)event, (void)id;
    json_t *ev = json_loads(data, JSON_ALLOW_NUL, NULL);
    follow_print(ud, ev);
    json_decref(ev);
    return 0;
}

static long parse_count(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= 0 && v <= EVENTS_MAX ? v : -1;
}

int cmd_events(int argc, char **argv)
{
    cli_opts o;
    argc = http_opts(argc, argv, &o);
    const char *id = NULL, *type = NULL, *around = NULL;
    int follow = 0;
    long last = -1, context = 5;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--follow") || !strcmp(argv[i], "-f")) follow = 1;
        else if (!strcmp(argv[i], "--type") && i + 1 < argc) type = argv[++i];
        else if (!strcmp(argv[i], "--last") && i + 1 < argc) last = parse_count(argv[++i]);
        else if (!strcmp(argv[i], "--around") && i + 1 < argc) around = argv[++i];
        else if (!strcmp(argv[i], "--context") && i + 1 < argc) context = parse_count(argv[++i]);
        else if (!id && argv[i][0] != '-') id = argv[i];
        else id = NULL, i = argc;
    }
    if (!id || (last < 0 && last != -1) || context < 0 || (type && !*type)) return cli_usage("events");
    int rc;
    char next[64];
    json_t *all = all_events(id, next, sizeof next, &rc);
    if (!all) return rc;
    json_t *sel = json_array(), *ev;
    size_t k;
    json_array_foreach(all, k, ev) if (type_match(type, ev)) json_array_append(sel, ev);
    size_t n = json_array_size(sel), from = 0, to = n;
    if (around) {
        size_t at = n;
        json_array_foreach(sel, k, ev) {
            const char *off = json_string_value(json_object_get(ev, "offset"));
            if (off && strcmp(off, around) >= 0) {
                at = k;
                break;
            }
        }
        from = at > (size_t)context ? at - (size_t)context : 0;
        to = at + (size_t)context + 1 < n ? at + (size_t)context + 1 : n;
    }
    if (last >= 0 && to - from > (size_t)last) from = to - (size_t)last;
    for (k = from; k < to; k++) {
        ev = json_array_get(sel, k);
        if (around && !o.json && o.tty) {
            const char *off = json_string_value(json_object_get(ev, "offset"));
            if (off && !strcmp(off, around)) fputs(BOLD "> " "\033[0m", stdout);
        }
        print_event(&o, ev);
    }
    json_decref(sel);
    json_decref(all);
    fflush(stdout);
    if (!follow) return 0;
    follow_state f = {&o, type};
    /* On the database: wait for its commits (lib/wake), as dstream tail does. */
    if (cli_db) return offline_follow(id, next, follow_print, &f);
    char path[1400], q[128];
    snprintf(q, sizeof q, "/events?live=sse&offset=%s", next);
    if (session_path(path, sizeof path, id, q)) return EXIT_USAGE;
    return http_sse(path, NULL, follow_event, &f);
}

/* ---- convo ----------------------------------------------------------------------- */

static void print_text(const char *s)
{
    fputs(s ? s : "", stdout);
}

/* A JSON string written whole: a model's text may hold NULs (JSON's \u0000). */
static void print_json_text(const json_t *s)
{
    if (json_is_string(s)) fwrite(json_string_value(s), 1, json_string_length(s), stdout);
}

int cmd_convo(int argc, char **argv)
{
    cli_opts o;
    int rc;
    if (cli_args(argc, argv, &o, 1, "convo", &rc)) return rc;
    char path[1200];
    if (session_path(path, sizeof path, argv[0], NULL)) return EXIT_USAGE;
    json_t *s = cli_db ? offline_session(argv[0], NULL, &rc) : http_json("GET", path, NULL, &rc);
    if (!s) return rc;
    if (o.json) {
        json_t *j = json_pack("{s:O, s:O}", "messages", json_object_get(s, "messages"), "queued",
                              json_object_get(s, "queued"));
        print_json(j);
        json_decref(j);
        json_decref(s);
        return 0;
    }
    json_t *m;
    size_t k;
    json_array_foreach(json_object_get(s, "messages"), k, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *content = json_object_get(m, "content");
        if (k) putchar('\n');
        printf("%s%s%s", c_on(&o, BOLD), role ? role : "?", c_off(&o));
        if (role && !strcmp(role, "tool")) printf(" (%s)", json_string_value(json_object_get(m, "callId")));
        if (json_is_true(json_object_get(m, "background"))) printf(" [background]");
        if (json_is_true(json_object_get(m, "interrupted"))) {
            const char *why = json_string_value(json_object_get(m, "reason"));
            printf(" %s[interrupted%s%s]%s", c_on(&o, RED), why ? ": " : "", why ? why : "", c_off(&o));
        }
        printf(":\n");
        if (json_is_string(content)) {
            print_json_text(content);
        } else if (content && !json_is_null(content)) {
            char *d = json_dumps(content, JSON_COMPACT | JSON_ENCODE_ANY);
            print_text(d);
            free(d);
        }
        json_t *c;
        size_t i;
        json_array_foreach(json_object_get(m, "toolCalls"), i, c) {
            char *a = json_dumps(json_object_get(c, "arguments"), JSON_COMPACT | JSON_ENCODE_ANY);
            printf("%s-> %s(%s) [%s]%s\n", c_on(&o, CYAN), json_string_value(json_object_get(c, "name")), a ? a : "",
                   json_string_value(json_object_get(c, "callId")), c_off(&o));
            free(a);
        }
        putchar('\n');
    }
    json_array_foreach(json_object_get(s, "queued"), k, m) {
        json_t *content = json_object_get(m, "content");
        printf("\n%suser [queued]%s:\n", c_on(&o, BOLD), c_off(&o));
        print_json_text(content);
        putchar('\n');
    }
    json_decref(s);
    return 0;
}

/* ---- requests -------------------------------------------------------------------- */

static long long ms_of(const char *rfc3339)
{
    /* 2026-11-22T13:05:02.117Z: the milliseconds of the day are enough for durations
     * (a request spanning midnight counts a day more). */
    if (!rfc3339 || strlen(rfc3339) < 23) return 0;
    const char *t = rfc3339 + 11;
    long long d = (rfc3339[8] - '0') * 10 + (rfc3339[9] - '0');
    long long h = (t[0] - '0') * 10 + (t[1] - '0'), m = (t[3] - '0') * 10 + (t[4] - '0'),
              s = (t[6] - '0') * 10 + (t[7] - '0'), f = (t[9] - '0') * 100 + (t[10] - '0') * 10 + (t[11] - '0');
    return ((d * 24 + h) * 60 + m) * 60000 + s * 1000 + f;
}

int cmd_requests(int argc, char **argv)
{
    cli_opts o;
    int rc;
    if (cli_args(argc, argv, &o, 1, "requests", &rc)) return rc;
    json_t *all = all_events(argv[0], NULL, 0, &rc);
    if (!all) return rc;
    json_t *rows = json_array(), *idx = json_object(), *played = json_object(), *ev, *r;
    size_t k, j;
    json_array_foreach(all, k, ev) {
        const char *type = json_string_value(json_object_get(ev, "type"));
        json_t *p = json_object_get(ev, "payload");
        const char *req = json_string_value(json_object_get(p, PK_REQUEST_ID));
        /* Whose cost each row is (docs/events.md, "Cost"): a fork's requests before
         * its fork point are its source's; a request answered from a recording cost nothing. */
        if (type && !strcmp(type, EV_SESSION_FORKED))
            json_array_foreach(rows, j, r) json_object_set_new(r, "costFrom", json_string("inherited"));
        if (type && req && !strcmp(type, EV_RECORDING_REQUEST) &&
            !strcmp(json_string_value(json_object_get(p, PK_OUTCOME)) ?: "", "hit"))
            json_object_set_new(played, req, json_true());
        if (!type || !req || strncmp(type, "provider:request_", 17)) continue;
        json_t *row = json_object_get(idx, req);
        if (!strcmp(type, EV_PROVIDER_REQUEST_STARTED)) {
            row = json_pack("{s:s, s:O, s:O, s:O, s:s, s:s, s:O}", "requestId", req, "provider",
                            json_object_get(p, PK_PROVIDER), "model", json_object_get(p, PK_MODEL), "attempt",
                            json_object_get(p, PK_ATTEMPT), "outcome", "open", "startedAt",
                            json_string_value(json_object_get(ev, "createdAt")) ?: "", "offset",
                            json_object_get(ev, "offset"));
            if (!row) continue;
            json_object_set_new(row, "costFrom", json_string(json_object_get(played, req) ? "recording" : "spent"));
            /* A compaction's summarization request (docs/agents.md, "Context compaction"). */
            if (json_is_string(json_object_get(p, PK_PURPOSE))) json_object_set(row, "purpose", json_object_get(p, PK_PURPOSE));
            /* A retry that continued a cut attempt's text (docs/events.md). */
            if (json_is_object(json_object_get(p, PK_CONTINUED_FROM)))
                json_object_set(row, "continuedFrom", json_object_get(p, PK_CONTINUED_FROM));
            json_object_set(idx, req, row);
            json_array_append_new(rows, row);
            continue;
        }
        if (!row) continue;
        long long dur = ms_of(json_string_value(json_object_get(ev, "createdAt"))) -
                        ms_of(json_string_value(json_object_get(row, "startedAt")));
        json_object_set_new(row, "durationMs", json_integer(dur < 0 ? 0 : dur));
        if (!strcmp(type, EV_PROVIDER_REQUEST_ENDED)) {
            json_object_set_new(row, "outcome", json_string("ended"));
            json_object_set(row, "stopReason", json_object_get(p, PK_STOP_REASON));
            json_object_set(row, "usage", json_object_get(p, PK_USAGE));
            json_object_set(row, "costUsd", json_object_get(p, PK_COST_USD));
        } else if (!strcmp(type, EV_PROVIDER_REQUEST_CANCELLED)) {
            json_object_set(row, "outcome", json_object_get(p, PK_REASON));
            if (json_object_get(p, PK_ERROR)) json_object_set(row, "error", json_object_get(p, PK_ERROR));
        } else if (!strcmp(type, EV_PROVIDER_REQUEST_RETRIED)) {
            /* reason failover: the next attempt went to the agent's next fallback. */
            const char *why = json_string_value(json_object_get(p, PK_REASON));
            json_object_set_new(row, "outcome", json_string(why && !strcmp(why, "failover") ? "failover" : "retried"));
            json_object_set(row, "cause", json_object_get(p, PK_CAUSE));
            json_object_set(row, "error", json_object_get(p, PK_ERROR));
        }
    }
    if (o.json) {
        json_array_foreach(rows, k, ev) print_json(ev);
    } else {
        if (o.tty) printf("%s%-22s %-3s %-10s %-20s %-10s %8s %7s %7s %10s%s\n", BOLD, "REQUEST", "#", "PROVIDER",
                          "MODEL", "OUTCOME", "MS", "IN", "OUT", "USD", c_off(&o));
        double total = 0, inherited = 0, recorded = 0;
        json_array_foreach(rows, k, ev) {
            json_t *u = json_object_get(ev, "usage");
            const char *from = json_string_value(json_object_get(ev, "costFrom")) ?: "spent";
            double c = json_number_value(json_object_get(ev, "costUsd"));
            total += c;
            if (!strcmp(from, "inherited")) inherited += c;
            else if (!strcmp(from, "recording")) recorded += c;
            printf("%-22s %-3lld %-10s %-20s %-10s %8lld %7lld %7lld %10.6f",
                   json_string_value(json_object_get(ev, "requestId")),
                   (long long)json_integer_value(json_object_get(ev, "attempt")),
                   json_string_value(json_object_get(ev, "provider")) ?: "-",
                   json_string_value(json_object_get(ev, "model")) ?: "-",
                   json_string_value(json_object_get(ev, "outcome")) ?: "?",
                   (long long)json_integer_value(json_object_get(ev, "durationMs")),
                   (long long)json_integer_value(json_object_get(u, PK_INPUT_TOKENS)),
                   (long long)json_integer_value(json_object_get(u, PK_OUTPUT_TOKENS)),
                   json_number_value(json_object_get(ev, "costUsd")));
            const char *err = json_string_value(json_object_get(ev, "error"));
            if (json_string_value(json_object_get(ev, "purpose")))
                printf("  (%s)", json_string_value(json_object_get(ev, "purpose")));
            if (err) printf("  %s", err);
            putchar('\n');
        }
        if (inherited > 0 || recorded > 0)
            printf("%zu requests, $%.6f: $%.6f spent, $%.6f inherited from the fork's source, $%.6f answered from"
                   " recordings (not spent)\n", json_array_size(rows), total, total - inherited - recorded, inherited,
                   recorded);
        else
            printf("%zu requests, $%.6f\n", json_array_size(rows), total);
    }
    json_decref(rows);
    json_decref(idx);
    json_decref(played);
    json_decref(all);
    return 0;
}

/* ---- export ---------------------------------------------------------------------- */

static void yaml_scalar(json_t *v)
{
    if (json_is_string(v)) {
        char *d = json_dumps(v, JSON_ENCODE_ANY); /* a JSON string is a YAML double-quoted one */
        fputs(d ? d : "\"\"", stdout);
        free(d);
    } else if (json_is_object(v)) {
        fputs("{}", stdout);
    } else if (json_is_array(v)) {
        fputs("[]", stdout);
    } else {
        char *d = json_dumps(v, JSON_ENCODE_ANY);
        fputs(d ? d : "null", stdout);
        free(d);
    }
}

static int yaml_nested(json_t *v) { return (json_is_object(v) && json_object_size(v)) || (json_is_array(v) && json_array_size(v)); }

/* v after a key's colon or an item's dash: " scalar" on the line, or a nested
 * block on the lines below, indented by indent. */
static void yaml_value(json_t *v, int indent, int depth)
{
    if (!yaml_nested(v)) {
        putchar(' ');
        yaml_scalar(v);
        putchar('\n');
        return;
    }
    if (depth > 64) {
        fputs(" null\n", stdout);
        return;
    }
    putchar('\n');
    if (json_is_object(v)) {
        const char *key;
        json_t *x;
        json_object_foreach(v, key, x) {
            json_t *ks = json_string(key);
            printf("%*s", indent, "");
            yaml_scalar(ks);
            json_decref(ks);
            putchar(':');
            yaml_value(x, indent + 2, depth + 1);
        }
    } else {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            printf("%*s-", indent, "");
            yaml_value(x, indent + 2, depth + 1);
        }
    }
}

int cmd_export(int argc, char **argv)
{
    cli_opts o;
    argc = http_opts(argc, argv, &o);
    const char *id = NULL, *fmt = "jsonl";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--format") && i + 1 < argc) fmt = argv[++i];
        else if (!id) id = argv[i];
        else id = NULL, i = argc;
    }
    if (!id || (strcmp(fmt, "jsonl") && strcmp(fmt, "yaml"))) return cli_usage("export");
    if (o.json) fmt = "jsonl";
    int rc;
    json_t *all = all_events(id, NULL, 0, &rc), *ev;
    if (!all) return rc;
    size_t k;
    if (!strcmp(fmt, "yaml")) printf("# dstream session %s\n", id);
    json_array_foreach(all, k, ev) {
        if (fmt[0] == 'j') {
            print_json(ev);
        } else {
            fputs("---", stdout);
            yaml_value(ev, 0, 0);
        }
    }
    json_decref(all);
    return fflush(stdout) ? EXIT_FAIL : 0;
}

/* ---- otlp ------------------------------------------------------------------------ */

/* The session's spans as the runner exports them (lib/otlp): every span that has
 * ended, rebuilt from all its events, in one ExportTraceServiceRequest. */
int cmd_otlp(int argc, char **argv)
{
    cli_opts o;
    argc = http_opts(argc, argv, &o);
    if (argc != 1) return cli_usage("otlp");
    const char *id = argv[0];
    if (!o.json && isatty(1)) {
        fprintf(stderr, "dstream: otlp writes protobuf: redirect it to a file or a pipe, or use --json\n");
        return EXIT_USAGE;
    }
    int rc;
    json_t *all = all_events(id, NULL, 0, &rc), *ev;
    if (!all) return rc;
    otlp_trace t;
    otlp_trace_init(&t, id);
    size_t k;
    rc = 0;
    json_array_foreach(all, k, ev) {
        offset_kind kind;
        offset_t at;
        const char *off = json_string_value(json_object_get(ev, "offset"));
        if (!off || offset_parse(off, strlen(off), &kind, &at) || kind != OFFSET_AT) continue;
        if (otlp_trace_feed(&t, at.seq, ev)) rc = EXIT_FAIL;
    }
    json_decref(all);
    size_t *idx = t.n ? malloc(t.n * sizeof *idx) : NULL;
    uint64_t upto;
    size_t n = idx ? otlp_select(&t, 0, t.n, idx, &upto) : 0;
    if (o.json) {
        json_t *j = otlp_encode_json(&t, idx, n);
        if (j) print_json(j);
        else rc = EXIT_FAIL;
        json_decref(j);
    } else {
        buf_t b;
        buf_init(&b, 0);
        if (otlp_encode_pb(&t, idx, n, &b) || fwrite(b.p ? b.p : "", 1, b.len, stdout) != b.len) rc = EXIT_FAIL;
        buf_free(&b);
    }
    free(idx);
    otlp_trace_free(&t);
    if (rc) fprintf(stderr, "dstream: session %s: the trace could not be written\n", id);
    return fflush(stdout) ? EXIT_FAIL : rc;
}

/* ---- search ---------------------------------------------------------------------- */

int cmd_search(int argc, char **argv)
{
    cli_opts o;
    argc = http_opts(argc, argv, &o);
    const char *text = NULL, *status = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--status") && i + 1 < argc) status = argv[++i];
        else if (!text) text = argv[i];
        else text = NULL, i = argc;
    }
    if (!text || !*text) return cli_usage("search");
    char cursor[256] = "";
    int rc = 0, found = 0, nread = 0, progress = isatty(2) && !o.json && !getenv("NO_COLOR");
    for (int pages = 0; pages < 100000; pages++) {
        char path[1024], es[64] = "", ec[600] = "";
        if ((status && http_escape(status, es, sizeof es)) || http_escape(cursor, ec, sizeof ec)) return EXIT_USAGE;
        snprintf(path, sizeof path, "/v1/sessions?limit=100%s%s%s%s", status ? "&status=" : "", es,
                 cursor[0] ? "&cursor=" : "", ec);
        json_t *j = cli_db ? offline_list(status, cursor, 100, &rc) : http_json("GET", path, NULL, &rc), *s;
        if (!j) return rc;
        size_t k;
        json_array_foreach(json_object_get(j, "sessions"), k, s) {
            const char *sid = json_string_value(json_object_get(s, "id"));
            /* Progress on a terminal: the sessions read so far. */
            if (progress) fprintf(stderr, "\r\033[Ksearching: %d sessions read, %d found", ++nread, found);
            json_t *all = sid ? all_events(sid, NULL, 0, &rc) : NULL, *ev;
            size_t i;
            json_array_foreach(all, i, ev) {
                char *p = json_dumps(json_object_get(ev, "payload"), JSON_COMPACT | JSON_ENCODE_ANY);
                json_t *ps = json_string(p ? p : "");
                /* Match the text as it is written (escapes undone), not as JSON. */
                int hit = p && (strstr(p, text) || strstr(json_string_value(ps) ? json_string_value(ps) : "", text));
                if (!hit) {
                    json_t *pl = json_object_get(ev, "payload"), *x;
                    const char *key;
                    json_object_foreach(pl, key, x) if (json_is_string(x) && strstr(json_string_value(x), text)) hit = 1;
                }
                json_decref(ps);
                if (hit) {
                    found++;
                    if (progress) fputs("\r\033[K", stderr);
                    if (o.json) {
                        json_t *r = json_pack("{s:s, s:O}", "session", sid, "event", ev);
                        print_json(r);
                        json_decref(r);
                    } else {
                        printf("%s%s%s ", c_on(&o, BOLD), sid, c_off(&o));
                        print_event(&o, ev);
                    }
                }
                free(p);
            }
            json_decref(all);
        }
        const char *next = json_string_value(json_object_get(j, "nextCursor"));
        if (next) snprintf(cursor, sizeof cursor, "%s", next);
        json_decref(j);
        if (!next) break;
    }
    if (progress) fputs("\r\033[K", stderr);
    return found ? 0 : EXIT_NOTFOUND;
}

/* dstream sessions|chat|cancel|answer: sessions over HTTP (DSTREAM_URL, DSTREAM_TOKEN);
 * `dstream sessions` with --db reads the database instead (cli/cmd_sessions.c).
 *
 *   dstream sessions [list] [--status S] [--label K:V] [--limit N] [--all]
 *   dstream sessions show|delete ID
 *   dstream sessions cancel|delete|retry FILTER... [--dry-run] [--limit N] [--all]
 *     (retry: [--to-agent NAME] [--to-version N|latest])
 *   dstream sessions create (--agent NAME | --workflow NAME) [--input JSON] [--id ID]
 *   dstream sessions fork ID --at OFFSET [--id NEW]
 *   dstream sessions state ID [--at OFFSET]
 *   dstream sessions compact ID
 *   dstream sessions signal ID NAME [JSON]
 *   dstream chat ID MESSAGE [--queue|--background]
 *   dstream cancel ID
 *   dstream answer ID INTERACTION RESPONSE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "http.h"
#include "../lib/session.h"

#define BOLD "\033[1m"
#define DIM "\033[2m"
#define RED "\033[31m"
#define GREEN "\033[32m"
#define YELLOW "\033[33m"

static int usage_sessions(void) { return cli_usage("sessions"); }

/* "/v1/sessions/ID" + suffix into out. */
int session_path(char *out, size_t cap, const char *id, const char *suffix)
{
    char e[512];
    if (http_escape(id, e, sizeof e)) {
        fprintf(stderr, "dstream: session id too long\n");
        return -1;
    }
    if ((size_t)snprintf(out, cap, "/v1/sessions/%s%s", e, suffix ? suffix : "") >= cap) return -1;
    return 0;
}

static const char *status_colour(const char *st)
{
    if (!st) return "";
    if (!strcmp(st, "completed")) return GREEN;
    if (!strcmp(st, "failed") || !strcmp(st, "cancelled")) return RED;
    if (!strcmp(st, "awaiting_input") || !strcmp(st, "running")) return YELLOW;
    return "";
}

static void age(long long ms, char *out, size_t cap)
{
    long long now = (long long)time(NULL) * 1000, s = ms > 0 ? (now - ms) / 1000 : 0;
    if (s < 0) s = 0;
    if (s < 120) snprintf(out, cap, "%llds", s);
    else if (s < 7200) snprintf(out, cap, "%lldm", s / 60);
    else if (s < 172800) snprintf(out, cap, "%lldh", s / 3600);
    else snprintf(out, cap, "%lldd", s / 86400);
}

/* --label K:V (repeated: every one) into labels ("k:v,k2:v2", the query's form). 0,
 * or -1 when it does not fit. */
static int add_label(char *labels, size_t cap, const char *kv)
{
    size_t n = strlen(labels);
    if (!*kv || strchr(kv, ',') || (size_t)snprintf(labels + n, cap - n, "%s%s", n ? "," : "", kv) >= cap - n) {
        fprintf(stderr, "dstream: --label takes KEY:VALUE (no comma)\n");
        return -1;
    }
    return 0;
}

static int list(const cli_opts *o, int argc, char **argv)
{
    const char *status = NULL, *limit = "50";
    char labels[1024] = "";
    int all = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--status") && i + 1 < argc) status = argv[++i];
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc) limit = argv[++i];
        else if (!strcmp(argv[i], "--label") && i + 1 < argc) {
            if (add_label(labels, sizeof labels, argv[++i])) return EXIT_USAGE;
        } else if (!strcmp(argv[i], "--all")) all = 1;
        else return usage_sessions();
    }
    char cursor[256] = "";
    int rc = 0, first = 1;
    double spent = 0, recorded = 0;
    for (int pages = 0; pages < 100000; pages++) {
        char path[4096], es[64] = "", ec[600] = "", el[32] = "", elab[3072] = "";
        if ((status && http_escape(status, es, sizeof es)) || http_escape(cursor, ec, sizeof ec) ||
            http_escape(limit, el, sizeof el) || http_escape(labels, elab, sizeof elab)) {
            fprintf(stderr, "dstream: bad argument\n");
            return EXIT_USAGE;
        }
        snprintf(path, sizeof path, "/v1/sessions?limit=%s%s%s%s%s%s%s", el, status ? "&status=" : "", es,
                 cursor[0] ? "&cursor=" : "", ec, labels[0] ? "&label=" : "", elab);
        json_t *j = http_json("GET", path, NULL, &rc);
        if (!j) return rc;
        json_t *arr = json_object_get(j, "sessions"), *s;
        size_t k;
        if (o->json) {
            json_array_foreach(arr, k, s) print_json(s);
        } else {
            if (first && o->tty)
                printf("%s%-24s %-15s %-24s %6s %10s%s\n", BOLD, "ID", "STATUS", "AGENT/WORKFLOW", "AGE", "SPENT USD",
                       c_off(o));
            json_array_foreach(arr, k, s) {
                const char *st = json_string_value(json_object_get(s, "status"));
                const char *ag = json_string_value(json_object_get(s, "agent"));
                const char *wf = json_string_value(json_object_get(s, "workflow"));
                json_t *cost = json_object_get(s, "cost");
                char a[32];
                age((long long)json_integer_value(json_object_get(s, "createdMs")), a, sizeof a);
                /* Its own spending only: a fork's inherited cost is its source's row. */
                printf("%-24s %s%-15s%s %-24s %6s %10.6f\n", json_string_value(json_object_get(s, "id")),
                       c_on(o, status_colour(st)), st ? st : "?", c_off(o),
                       ag ? ag : wf ? wf : "-", a, json_number_value(json_object_get(cost, "spentUsd")));
                spent += json_number_value(json_object_get(cost, "spentUsd"));
                recorded += json_number_value(json_object_get(cost, "recordedUsd"));
            }
        }
        first = 0;
        const char *next = json_string_value(json_object_get(j, "nextCursor"));
        int more = next && all;
        if (next && !all && !o->json) fprintf(stderr, "(more: --all)\n");
        if (more) snprintf(cursor, sizeof cursor, "%s", next);
        json_decref(j);
        if (!more) break;
    }
    if (!o->json && o->tty) printf("%s$%.6f spent, $%.6f answered from recordings (not spent)%s\n", c_on(o, BOLD), spent,
                                   recorded, c_off(o));
    return 0;
}

static void print_summary(const cli_opts *o, json_t *s)
{
    const char *st = json_string_value(json_object_get(s, "status"));
    const char *ag = json_string_value(json_object_get(s, "agent"));
    const char *wf = json_string_value(json_object_get(s, "workflow"));
    json_t *u = json_object_get(s, "usage");
    printf("%sid%s        %s\n", c_on(o, BOLD), c_off(o), json_string_value(json_object_get(s, "id")));
    printf("%sstatus%s    %s%s%s\n", c_on(o, BOLD), c_off(o), c_on(o, status_colour(st)), st ? st : "?", c_off(o));
    printf("%s%s%s%s  %s\n", c_on(o, BOLD), ag ? "agent" : "workflow", c_off(o), ag ? "   " : "", ag ? ag : wf ? wf : "-");
    const char *parent = json_string_value(json_object_get(s, "parent"));
    if (parent)
        printf("%sforked%s    from %s at %s\n", c_on(o, BOLD), c_off(o), parent,
               json_string_value(json_object_get(s, "forkOffset")));
    const char *ph = json_string_value(json_object_get(s, "phase"));
    if (ph) printf("%sphase%s     %s\n", c_on(o, BOLD), c_off(o), ph);
    printf("%sposition%s  %s (%lld events)\n", c_on(o, BOLD), c_off(o), json_string_value(json_object_get(s, "position")),
           (long long)json_integer_value(json_object_get(s, "eventCount")));
    json_t *cost = json_object_get(s, "cost");
    double inherited = json_number_value(json_object_get(cost, "inheritedUsd")),
           recorded = json_number_value(json_object_get(cost, "recordedUsd"));
    printf("%susage%s     %lld in, %lld out, $%.6f spent", c_on(o, BOLD), c_off(o),
           (long long)json_integer_value(json_object_get(u, "inputTokens")),
           (long long)json_integer_value(json_object_get(u, "outputTokens")),
           json_number_value(json_object_get(cost ? cost : s, cost ? "spentUsd" : "costUsd")));
    if (inherited > 0) printf(", $%.6f inherited from %s", inherited, parent ? parent : "its source");
    if (recorded > 0) printf(", $%.6f answered from recordings (not spent)", recorded);
    putchar('\n');
    const char *err = json_string_value(json_object_get(s, "error"));
    if (err) printf("%serror%s     %s\n", c_on(o, BOLD), c_off(o), err);
    json_t *p = json_object_get(s, "pendingInput");
    if (json_is_object(p)) {
        char *d = json_dumps(p, JSON_COMPACT);
        printf("%sawaiting%s  %s\n", c_on(o, BOLD), c_off(o), d ? d : "");
        free(d);
    }
    json_t *st_ = json_object_get(s, "state");
    if (json_is_object(st_) && json_object_size(st_)) {
        char *d = json_dumps(st_, JSON_COMPACT);
        printf("%sstate%s     %s\n", c_on(o, BOLD), c_off(o), d ? d : "");
        free(d);
    }
}

/* The session (at offset at, if not NULL): over HTTP, or from the database (--db). */
static int show(const cli_opts *o, const char *id, const char *at)
{
    char path[1200], q[200] = "", e[160];
    int rc;
    if (at && (http_escape(at, e, sizeof e) || (size_t)snprintf(q, sizeof q, "/state?at=%s", e) >= sizeof q))
        return EXIT_USAGE;
    if (session_path(path, sizeof path, id, q)) return EXIT_USAGE;
    json_t *j = cli_db ? offline_session(id, at, &rc) : http_json("GET", path, NULL, &rc);
    if (!j) return rc;
    if (o->json) print_json(j);
    else print_summary(o, j);
    json_decref(j);
    return 0;
}

static int create(const cli_opts *o, int argc, char **argv)
{
    json_t *body = json_object();
    for (int i = 0; i < argc; i++) {
        if ((!strcmp(argv[i], "--agent") || !strcmp(argv[i], "--workflow") || !strcmp(argv[i], "--id")) &&
            i + 1 < argc) {
            json_object_set_new(body, argv[i] + 2, json_string(argv[i + 1]));
            i++;
        } else if (!strcmp(argv[i], "--input") && i + 1 < argc) {
            json_error_t e;
            json_t *in = json_loads(argv[++i], JSON_DECODE_ANY, &e);
            if (!in) {
                fprintf(stderr, "dstream: --input: %s\n", e.text);
                json_decref(body);
                return EXIT_USAGE;
            }
            json_object_set_new(body, "input", in);
        } else {
            json_decref(body);
            return usage_sessions();
        }
    }
    int rc;
    json_t *j = http_json("POST", "/v1/sessions", body, &rc);
    json_decref(body);
    if (!j) return rc;
    if (o->json) print_json(j);
    else printf("%s\n", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    return 0;
}

static int simple_post(const cli_opts *o, const char *method, const char *id, const char *suffix, json_t *body)
{
    char path[1200];
    int rc;
    if (session_path(path, sizeof path, id, suffix)) {
        json_decref(body);
        return EXIT_USAGE;
    }
    json_t *j = http_json(method, path, body, &rc);
    json_decref(body);
    if (!j) return rc;
    if (o->json) print_json(j);
    else if (json_string_value(json_object_get(j, "offset")))
        printf("%s\n", json_string_value(json_object_get(j, "offset")));
    json_decref(j);
    return 0;
}

/* dstream sessions cancel|delete|retry FILTER... [--dry-run] [--limit N] [--all]:
 * POST /v1/sessions/{op} with the filter of the options (--status, --agent,
 * --workflow, --label K:V, --created-before, --created-after: an RFC 3339 time or
 * milliseconds); a retry's --to-agent and --to-version (the body's agent and
 * workflowVersion); --all follows `next` until every session the filter takes was
 * taken. Prints what was done (or would be) and what was skipped and why. */
static int bulk(const cli_opts *o, const char *op, int argc, char **argv)
{
    json_t *filter = json_object(), *labels = json_object(), *body = NULL, *target = json_object();
    int dry = 0, all = 0, rc = 0;
    long limit = 0;
    static const struct { const char *opt, *key; } fields[] = {
        {"--status", "status"}, {"--agent", "agent"}, {"--workflow", "workflow"},
        {"--created-before", "createdBefore"}, {"--created-after", "createdAfter"}};
    for (int i = 0; i < argc; i++) {
        size_t f;
        for (f = 0; f < sizeof fields / sizeof fields[0]; f++)
            if (!strcmp(argv[i], fields[f].opt)) break;
        if (f < sizeof fields / sizeof fields[0] && i + 1 < argc) {
            const char *v = argv[++i];
            char *end;
            long long ms = strtoll(v, &end, 10);
            /* A time in milliseconds goes as a number. */
            if (f >= 3 && *v && !*end && ms >= 0) json_object_set_new(filter, fields[f].key, json_integer(ms));
            else json_object_set_new(filter, fields[f].key, json_string(v));
        } else if (!strcmp(argv[i], "--label") && i + 1 < argc) {
            const char *kv = argv[++i], *colon = strchr(kv, ':');
            if (!colon || colon == kv) {
                fprintf(stderr, "dstream: --label takes KEY:VALUE\n");
                rc = EXIT_USAGE;
                goto out;
            }
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)(colon - kv) < 127 ? (int)(colon - kv) : 127, kv);
            json_object_set_new(labels, key, json_string(colon + 1));
        } else if (!strcmp(argv[i], "--limit") && i + 1 < argc) {
            char *end;
            limit = strtol(argv[++i], &end, 10);
            if (*end || limit < 1) {
                fprintf(stderr, "dstream: --limit takes a number\n");
                rc = EXIT_USAGE;
                goto out;
            }
        } else if (!strcmp(op, "retry") && !strcmp(argv[i], "--to-agent") && i + 1 < argc) {
            json_object_set_new(target, "agent", json_string(argv[++i]));
        } else if (!strcmp(op, "retry") && !strcmp(argv[i], "--to-version") && i + 1 < argc) {
            const char *v = argv[++i];
            char *end;
            long n = strtol(v, &end, 10);
            json_object_set_new(target, "workflowVersion", *v && !*end ? json_integer(n) : json_string(v));
        } else if (!strcmp(argv[i], "--dry-run")) {
            dry = 1;
        } else if (!strcmp(argv[i], "--all")) {
            all = 1;
        } else {
            rc = usage_sessions();
            goto out;
        }
    }
    if (json_object_size(labels)) json_object_set(filter, "labels", labels);
    if (!json_object_size(filter) && strcmp(op, "retry")) {
        fprintf(stderr, "dstream: sessions %s takes a filter: --status, --agent, --workflow, --label, "
                        "--created-before or --created-after\n", op);
        rc = EXIT_USAGE;
        goto out;
    }
    char path[64];
    /* (op is one of the three names: the guard is for the compiler's format
     * analysis under -fsanitize=undefined, which cannot see it.) */
    snprintf(path, sizeof path, "/v1/sessions/%s", op ? op : "");
    long done = 0, skipped = 0;
    const char *verb = !strcmp(op, "cancel") ? "cancelled" : !strcmp(op, "delete") ? "deleted" : "retried";
    for (int pages = 0; pages < 100000; pages++) {
        json_t *next = body ? json_object_get(body, "next") : NULL;
        json_t *req = json_pack("{s:O, s:b}", "filter", filter, "dryRun", dry);
        if (limit) json_object_set_new(req, "limit", json_integer(limit));
        if (json_is_string(next)) json_object_set(req, "cursor", next);
        json_object_update(req, target);
        json_decref(body);
        body = http_json("POST", path, req, &rc);
        json_decref(req);
        if (!body) goto out;
        json_t *d;
        size_t k;
        if (o->json) print_json(body);
        json_array_foreach(json_object_get(body, "done"), k, d) {
            const char *nid = json_string_value(json_object_get(d, "newId"));
            if (!o->json)
                printf("%s%s %s%s%s\n", dry ? "would be " : "", verb, json_string_value(json_object_get(d, "id")),
                       nid ? " -> " : "", nid ? nid : "");
            done++;
        }
        json_array_foreach(json_object_get(body, "skipped"), k, d) {
            if (!o->json)
                fprintf(stderr, "skipped %s: %s (%s)\n", json_string_value(json_object_get(d, "id")),
                        json_string_value(json_object_get(d, "reason")),
                        json_string_value(json_object_get(d, "message")));
            skipped++;
        }
        if (!json_is_string(json_object_get(body, "next")) || !all) break;
    }
    if (!o->json) {
        fprintf(stderr, "%ld %s%s, %ld skipped%s\n", done, dry ? "would be " : "", verb, skipped, dry ? " (dry run)" : "");
        if (json_is_string(json_object_get(body, "next")) && !all) fprintf(stderr, "(more: --all)\n");
    }
out:
    json_decref(body);
    json_decref(labels);
    json_decref(filter);
    json_decref(target);
    return rc;
}

/* sessions signal ID NAME [JSON]: the signal, with JSON (any value) as its payload
 * (none: null); prints the offset of its signal:received. */
static int signal_session(const cli_opts *o, const char *id, int argc, char **argv)
{
    char suffix[300], e[200];
    json_t *payload = NULL;
    if (argc < 1 || argc > 2) return usage_sessions();
    if (http_escape(argv[0], e, sizeof e) || (size_t)snprintf(suffix, sizeof suffix, "/signals/%s", e) >= sizeof suffix) {
        fprintf(stderr, "dstream: signal name too long\n");
        return EXIT_USAGE;
    }
    if (argc == 2) {
        json_error_t err;
        if (!(payload = json_loads(argv[1], JSON_DECODE_ANY, &err))) {
            fprintf(stderr, "dstream: the payload is not JSON: %s\n", err.text);
            return EXIT_USAGE;
        }
    }
    return simple_post(o, "POST", id, suffix, payload);
}

int cmd_sessions_http(int argc, char **argv)
{
    cli_opts o;
    argc = http_opts(argc, argv, &o);
    if (argc == 0 || argv[0][0] == '-') return list(&o, argc, argv);
    const char *sub = argv[0];
    if (!strcmp(sub, "list")) return list(&o, argc - 1, argv + 1);
    if (!strcmp(sub, "create")) return create(&o, argc - 1, argv + 1);
    /* A bulk operation: a filter of options, not an id. */
    if ((!strcmp(sub, "cancel") || !strcmp(sub, "retry") || !strcmp(sub, "delete")) &&
        (argc == 1 || argv[1][0] == '-'))
        return bulk(&o, sub, argc - 1, argv + 1);
    if (argc < 2) return usage_sessions();
    const char *id = argv[1];
    if (!strcmp(sub, "show") && argc == 2) return show(&o, id, NULL);
    if (!strcmp(sub, "delete") && argc == 2) {
        char path[1200];
        http_res r;
        if (session_path(path, sizeof path, id, NULL)) return EXIT_USAGE;
        int rc = http_call("DELETE", path, NULL, &r);
        if (!rc) rc = http_exit(path, &r);
        http_res_free(&r);
        if (!rc) {
            json_t *j = json_pack("{s:s}", "deleted", id);
            if (o.json) print_json(j);
            else printf("deleted %s\n", id);
            json_decref(j);
        }
        return rc;
    }
    if (!strcmp(sub, "state")) {
        if (argc == 2) return show(&o, id, NULL);
        if (argc == 4 && !strcmp(argv[2], "--at")) return show(&o, id, argv[3]);
        return usage_sessions();
    }
    if (!strcmp(sub, "compact") && argc == 2) {
        /* The older history summarized now (POST /compact): what was queued. */
        char path[1200];
        int rc;
        if (session_path(path, sizeof path, id, "/compact")) return EXIT_USAGE;
        json_t *j = http_json("POST", path, NULL, &rc);
        if (!j) return rc;
        if (o.json) print_json(j);
        else
            printf("%s queued at %s: %lld message(s) before %s to be summarized\n",
                   json_string_value(json_object_get(j, "queued")) ?: "?",
                   json_string_value(json_object_get(j, "offset")) ?: "?",
                   (long long)json_integer_value(json_object_get(j, "messages")),
                   json_string_value(json_object_get(j, "upTo")) ?: "?");
        json_decref(j);
        return 0;
    }
    if (!strcmp(sub, "signal")) return signal_session(&o, id, argc - 2, argv + 2);
    if (!strcmp(sub, "fork")) {
        json_t *body = json_object();
        for (int i = 2; i < argc; i++) {
            if ((!strcmp(argv[i], "--at") || !strcmp(argv[i], "--id")) && i + 1 < argc) {
                json_object_set_new(body, argv[i] + 2, json_string(argv[i + 1]));
                i++;
            } else {
                json_decref(body);
                return usage_sessions();
            }
        }
        if (!json_object_get(body, "at")) {
            json_decref(body);
            return usage_sessions();
        }
        char path[1200];
        int rc;
        if (session_path(path, sizeof path, id, "/fork")) {
            json_decref(body);
            return EXIT_USAGE;
        }
        json_t *j = http_json("POST", path, body, &rc);
        json_decref(body);
        if (!j) return rc;
        if (o.json) print_json(j);
        else printf("%s\n", json_string_value(json_object_get(j, "id")));
        json_decref(j);
        return 0;
    }
    return usage_sessions();
}

int cmd_cancel(int argc, char **argv)
{
    cli_opts o;
    int rc;
    if (cli_args(argc, argv, &o, 1, "cancel", &rc)) return rc;
    return simple_post(&o, "POST", argv[0], "/cancel", NULL);
}

int cmd_answer(int argc, char **argv)
{
    cli_opts o;
    int rc;
    if (cli_args(argc, argv, &o, 3, "answer", &rc)) return rc;
    json_t *resp = json_loads(argv[2], JSON_DECODE_ANY, NULL);
    if (!resp) resp = json_string(argv[2]);
    json_t *body = json_pack("{s:s, s:o}", "interactionId", argv[1], "response", resp);
    return simple_post(&o, "POST", argv[0], "/input", body);
}

/* ---- chat ------------------------------------------------------------------------ */

typedef struct {
    const cli_opts *o;
    const char *id;       /* the session's */
    cli_opts err;         /* stderr's: colour and thinking when it is a terminal */
    char after[64];       /* offset of our message */
    int seen_ours;
    json_t *ours;         /* request ids started after our message */
    int printed;
    int dim;              /* a thinking run is open on stderr: one DIM for all its deltas */
    int skip_ws;          /* a continuation's whitespace, printed already (docs/events.md) */
} chat_state;

/* Ends the open thinking run, so what comes next is not dimmed. */
static void chat_undim(chat_state *c)
{
    if (c->dim) fputs(c_off(&c->err), stderr);
    c->dim = 0;
}

static int chat_event(void *ud, const char *event, const char *data, const char *id)
{
    chat_state *c = ud;
    (void)id;
    json_t *ev = json_loads(data, JSON_ALLOW_NUL, NULL);
    if (!ev) return 0;
    json_t *p = json_object_get(ev, "payload");
    const char *off = json_string_value(json_object_get(ev, "offset"));
    const char *req = json_string_value(json_object_get(p, PK_REQUEST_ID));
    int rc = 0;
    if (!c->seen_ours) {
        if (off && !strcmp(off, c->after)) c->seen_ours = 1;
        json_decref(ev);
        return 0;
    }
    const char *purpose = json_string_value(json_object_get(p, PK_PURPOSE));
    if (purpose && !strcmp(purpose, "compaction")) {
        /* A compaction's summarization request: not the reply's (session:compacted says it). */
    } else if (!strcmp(event, EV_PROVIDER_REQUEST_STARTED) && req) {
        json_object_set_new(c->ours, req, json_true());
        /* A retry that continues the cut reply (printed up to its cut): what follows is
         * printed after it, without the whitespace the continuation gives again. */
        json_t *tr = json_object_get(json_object_get(p, PK_CONTINUED_FROM), PK_TRIMMED);
        c->skip_ws = json_is_integer(tr) && json_integer_value(tr) > 0 && json_integer_value(tr) < 64
                         ? (int)json_integer_value(tr) : 0;
    } else if (!strcmp(event, EV_TEXT_DELTA) && req && json_object_get(c->ours, req)) {
        /* Whole, by length: a model's text may hold NULs (JSON's \u0000). */
        const json_t *t = json_object_get(p, PK_TEXT);
        if (json_is_string(t) && !c->o->json) {
            size_t n = json_string_length(t), skip = c->skip_ws ? session_skip_ws(json_string_value(t), n, &c->skip_ws) : 0;
            chat_undim(c);
            fwrite(json_string_value(t) + skip, 1, n - skip, stdout);
            fflush(stdout);
            c->printed = 1;
        }
    } else if (!strcmp(event, EV_THINKING_DELTA) && req && json_object_get(c->ours, req) && c->err.tty) {
        const json_t *t = json_object_get(p, PK_TEXT);
        if (json_is_string(t)) {
            if (!c->dim) fputs(c_on(&c->err, DIM), stderr);
            c->dim = 1;
            fwrite(json_string_value(t), 1, json_string_length(t), stderr);
        }
    } else if (!strcmp(event, EV_TOOL_CALLED) && req && json_object_get(c->ours, req)) {
        chat_undim(c);
        fprintf(stderr, "%s[tool %s]%s\n", c_on(&c->err, DIM), json_string_value(json_object_get(p, PK_NAME)),
                c_off(&c->err));
    } else if (!strcmp(event, EV_PROVIDER_REQUEST_ENDED) && req && json_object_get(c->ours, req)) {
        const char *sr = json_string_value(json_object_get(p, PK_STOP_REASON));
        if (!sr || (strcmp(sr, "tool_use") && strcmp(sr, "tool_calls"))) rc = -1;
    } else if (!strcmp(event, EV_PROVIDER_REQUEST_CANCELLED) && req && json_object_get(c->ours, req)) {
        const char *r = json_string_value(json_object_get(p, PK_REASON));
        if (r && strcmp(r, "restart")) {
            chat_undim(c);
            fprintf(stderr, "\ndstream: the reply was %s%s%s\n", !strcmp(r, "interrupted") ? "interrupted" : r,
                    json_string_value(json_object_get(p, PK_ERROR)) ? ": " : "",
                    json_string_value(json_object_get(p, PK_ERROR)) ? json_string_value(json_object_get(p, PK_ERROR)) : "");
            rc = !strcmp(r, "failed") ? 0 : EXIT_FAIL;
        }
    } else if (!strcmp(event, EV_PROVIDER_FAILOVER) && req && json_object_get(c->ours, req)) {
        /* The reply goes on with the agent's next fallback. */
        const json_t *from = json_object_get(p, PK_FROM), *to = json_object_get(p, PK_TO);
        chat_undim(c);
        fprintf(stderr, "%s[failed over from %s/%s to %s/%s: %s]%s\n", c_on(&c->err, DIM),
                json_string_value(json_object_get(from, PK_PROVIDER)) ?: "?",
                json_string_value(json_object_get(from, PK_MODEL)) ?: "?",
                json_string_value(json_object_get(to, PK_PROVIDER)) ?: "?",
                json_string_value(json_object_get(to, PK_MODEL)) ?: "?",
                json_string_value(json_object_get(p, PK_CAUSE)) ?: "?", c_off(&c->err));
    } else if (!strcmp(event, EV_INPUT_REQUESTED) && json_is_string(json_object_get(p, PK_CALL_ID))) {
        /* A tool call of the reply waits for approval: the reply goes on once answered. */
        chat_undim(c);
        fprintf(stderr, "\ndstream: %s\ndstream: the reply waits for approval: dstream answer %s %s true|false\n",
                json_string_value(json_object_get(p, PK_PROMPT)), c->id, json_string_value(json_object_get(p, PK_CALL_ID)));
        rc = -1;
    } else if (!strcmp(event, EV_REPLY_FAILED)) {
        chat_undim(c);
        fprintf(stderr, "\ndstream: the reply failed: %s\n", json_string_value(json_object_get(p, PK_ERROR)));
        rc = EXIT_FAIL;
    } else if (!strcmp(event, EV_SESSION_CANCELLED)) {
        chat_undim(c);
        fprintf(stderr, "\ndstream: the session was cancelled\n");
        rc = EXIT_FAIL;
    } else if (!strcmp(event, EV_REPLY_STOPPED)) {
        /* Stopped before its request began (a request in flight said so above). */
        chat_undim(c);
        fprintf(stderr, "\ndstream: the reply was stopped\n");
        rc = EXIT_FAIL;
    }
    if (c->o->json && json_object_get(c->ours, req ? req : "")) print_json(ev);
    json_decref(ev);
    return rc;
}

int cmd_chat(int argc, char **argv)
{
    cli_opts o;
    argc = http_opts(argc, argv, &o);
    const char *mode = "interrupt", *id = NULL, *msg = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--queue")) mode = "queue";
        else if (!strcmp(argv[i], "--background")) mode = "background";
        else if (!strcmp(argv[i], "--interrupt")) mode = "interrupt";
        else if (!id) id = argv[i];
        else if (!msg) msg = argv[i];
        else id = NULL, i = argc;
    }
    if (!id || !msg) return cli_usage("chat");
    char path[1200];
    int rc;
    if (session_path(path, sizeof path, id, "/messages")) return EXIT_USAGE;
    json_t *body = json_pack("{s:s, s:s}", "content", msg, "mode", mode);
    json_t *j = http_json("POST", path, body, &rc);
    json_decref(body);
    if (!j) return rc;
    const char *off = json_string_value(json_object_get(j, "offset"));
    if (!strcmp(mode, "background") || !off) {
        if (o.json) print_json(j);
        else if (off) printf("%s\n", off);
        json_decref(j);
        return 0;
    }
    chat_state c;
    memset(&c, 0, sizeof c);
    c.o = &o;
    c.id = id;
    c.err = o;
    c.err.tty = isatty(2) && !getenv("NO_COLOR") && !o.json;
    snprintf(c.after, sizeof c.after, "%s", off);
    c.ours = json_object();
    json_decref(j);
    char ev[1400], e[160];
    if (session_path(ev, sizeof ev, id, "/events?live=sse&offset=") || http_escape(c.after, e, sizeof e) ||
        strlen(ev) + strlen(e) + 1 > sizeof ev) {
        json_decref(c.ours);
        return EXIT_USAGE;
    }
    memcpy(ev + strlen(ev), e, strlen(e) + 1);
    rc = http_sse(ev, NULL, chat_event, &c);
    chat_undim(&c);
    if (c.printed && !o.json) putchar('\n');
    json_decref(c.ours);
    return rc;
}

/* dstream lineage and diff: the tree of forks around a session and where two
 * sessions (or two positions) part, over HTTP (GET /v1/sessions/{id}/lineage,
 * /diff) or with --db on the database (cli/offline.c, the same lib/lineage).
 *
 *   dstream lineage ID [--limit N]
 *   dstream diff A B [--at OFFSET] [--with-at OFFSET] [--context N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "http.h"

#define BOLD "\033[1m"
#define DIM "\033[2m"
#define RED "\033[31m"
#define GREEN "\033[32m"
#define SHOWN_MAX 160      /* characters of a payload or value a text line shows */

int session_path(char *out, size_t cap, const char *id, const char *suffix);

/* A count option's value (0 .. max), or -1. */
static long count_of(const char *s, long max)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= 0 && v <= max ? v : -1;
}

/* GET PATH's JSON (caller decrefs), or NULL with *rc. */
static json_t *get(const char *id, const char *suffix, int *rc)
{
    char path[1600];
    if (session_path(path, sizeof path, id, suffix)) {
        *rc = EXIT_USAGE;
        return NULL;
    }
    return http_json("GET", path, NULL, rc);
}

/* ---- lineage ---------------------------------------------------------------------------- */

static void print_node(const cli_opts *o, const json_t *n, const char *self, const char *lead, int last, int top)
{
    char line[512], sub[512];
    const char *id = json_string_value(json_object_get(n, "id"));
    snprintf(line, sizeof line, "%s%s", lead, top ? "" : last ? "`- " : "|- ");
    if (!id) {
        printf("%s%s(hidden)%s\n", line, c_on(o, DIM), c_off(o));
    } else {
        const char *at = json_string_value(json_object_get(n, "forkedAt"));
        int me = self && !strcmp(id, self);
        printf("%s%s%s%s  %s  %s", line, me ? c_on(o, BOLD) : "", id, me ? c_off(o) : "",
               json_string_value(json_object_get(n, "status")) ?: "?",
               json_string_value(json_object_get(n, "createdAt")) ?: "");
        if (at) printf("  forked at event %lld (%s)", (long long)json_integer_value(json_object_get(n, "forkedAtEvent")), at);
        if (json_is_true(json_object_get(n, "deleted"))) printf("  %sdeleted%s", c_on(o, RED), c_off(o));
        if (me) printf("  <-");
        printf("\n");
    }
    if (json_is_true(json_object_get(n, "truncated")))
        printf("%s%s   %s(forks not all looked at)%s\n", lead, top ? "" : last ? "   " : "|  ", c_on(o, DIM), c_off(o));
    snprintf(sub, sizeof sub, "%s%s", lead, top ? "" : last ? "   " : "|  ");
    json_t *kids = json_object_get(n, "children");
    size_t k, nk = json_array_size(kids);
    json_t *kid;
    json_array_foreach(kids, k, kid) print_node(o, kid, self, sub, k + 1 == nk, 0);
}

int cmd_lineage(int argc, char **argv)
{
    cli_opts o;
    argc = http_opts(argc, argv, &o);
    const char *id = NULL;
    long limit = 200;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--limit") && i + 1 < argc) limit = count_of(argv[++i], 1000);
        else if (!id && argv[i][0] != '-') id = argv[i];
        else id = NULL, i = argc;
    }
    if (!id || limit < 1) return cli_usage("lineage");
    int rc;
    char q[48];
    snprintf(q, sizeof q, "/lineage?limit=%ld", limit);
    json_t *j = cli_db ? offline_lineage(id, (int)limit, &rc) : get(id, q, &rc);
    if (!j) return rc;
    if (o.json) {
        print_json(j);
    } else {
        print_node(&o, json_object_get(j, "root"), id, "", 1, 1);
        if (json_is_true(json_object_get(j, "truncated")))
            printf("%s(cut at %lld sessions looked at: --limit)%s\n", c_on(&o, DIM),
                   (long long)json_integer_value(json_object_get(j, "limit")), c_off(&o));
    }
    json_decref(j);
    return 0;
}

/* ---- diff ------------------------------------------------------------------------------- */

/* v as compact JSON, cut to SHOWN_MAX characters (with "..."), into out. */
static void shown(const json_t *v, char *out, size_t cap)
{
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(12)) : NULL;
    if (!s) {
        snprintf(out, cap, "-");
        return;
    }
    if (strlen(s) > SHOWN_MAX) snprintf(out, cap, "%.*s...", SHOWN_MAX, s);
    else snprintf(out, cap, "%s", s);
    free(s);
}

static void print_side(const cli_opts *o, const char *name, const json_t *side)
{
    char p[SHOWN_MAX + 8];
    json_t *first = json_object_get(side, "first"), *ev;
    size_t k;
    if (!json_array_size(first)) printf("  %s: (nothing more)\n", name);
    json_array_foreach(first, k, ev) {
        json_t *pl = json_object_get(ev, "payload");
        if (pl) shown(pl, p, sizeof p);
        else snprintf(p, sizeof p, "(%lld bytes)", (long long)json_integer_value(json_object_get(ev, "payloadBytes")));
        printf("  %s%s%s %s %s%s%s %s\n", k ? "" : c_on(o, BOLD), name, k ? "" : c_off(o),
               json_string_value(json_object_get(ev, "offset")) ?: "", c_on(o, BOLD),
               json_string_value(json_object_get(ev, "type")) ?: "?", c_off(o), p);
    }
}

int cmd_diff(int argc, char **argv)
{
    cli_opts o;
    argc = http_opts(argc, argv, &o);
    const char *a = NULL, *b = NULL, *at = NULL, *with_at = NULL;
    long context = 3;
    int bad = 0;
    for (int i = 0; i < argc && !bad; i++) {
        if (!strcmp(argv[i], "--at") && i + 1 < argc) at = argv[++i];
        else if (!strcmp(argv[i], "--with-at") && i + 1 < argc) with_at = argv[++i];
        else if (!strcmp(argv[i], "--context") && i + 1 < argc) context = count_of(argv[++i], 20);
        else if (!a && argv[i][0] != '-') a = argv[i];
        else if (!b && argv[i][0] != '-') b = argv[i];
        else bad = 1;
    }
    if (bad || !a || !b || context < 0) return cli_usage("diff");
    int rc;
    json_t *j;
    if (cli_db) {
        j = offline_diff(a, b, at, with_at, (int)context, &rc);
    } else {
        char eb[512], ea[512] = "", ew[512] = "", q[1700];
        if (http_escape(b, eb, sizeof eb) || (at && http_escape(at, ea, sizeof ea)) ||
            (with_at && http_escape(with_at, ew, sizeof ew)))
            return cli_usage("diff");
        snprintf(q, sizeof q, "/diff?with=%s&context=%ld%s%s%s%s", eb, context, at ? "&at=" : "", ea,
                 with_at ? "&withAt=" : "", ew);
        j = get(a, q, &rc);
    }
    if (!j) return rc;
    if (o.json) {
        print_json(j);
        json_decref(j);
        return 0;
    }
    json_t *sa = json_object_get(j, "a"), *sb = json_object_get(j, "b");
    const char *shared = json_string_value(json_object_get(j, "shared"));
    printf("a: %s up to %s\n", json_string_value(json_object_get(sa, "id")) ?: "",
           json_string_value(json_object_get(sa, "at")) ?: "");
    printf("b: %s up to %s\n", json_string_value(json_object_get(sb, "id")) ?: "",
           json_string_value(json_object_get(sb, "at")) ?: "");
    printf("shared history: %s; then %lld events agree%s\n", shared ? shared : "none",
           (long long)json_integer_value(json_object_get(j, "compared")),
           json_is_true(json_object_get(j, "truncated")) ? " (stopped there: not compared further)" : "");
    if (json_is_true(json_object_get(j, "same"))) {
        printf("%sthe events agree to the end of both%s\n", c_on(&o, GREEN), c_off(&o));
    } else {
        printf("they part at a %s, b %s:\n", json_string_value(json_object_get(sa, "until")) ?: "",
               json_string_value(json_object_get(sb, "until")) ?: "");
        print_side(&o, "a", sa);
        print_side(&o, "b", sb);
    }
    json_t *st = json_object_get(j, "state"), *ch = json_object_get(st, "changes"), *c;
    size_t k;
    printf("state: %zu path%s differ%s\n", json_array_size(ch), json_array_size(ch) == 1 ? "" : "s",
           json_array_size(ch) == 1 ? "s" : "");
    json_array_foreach(ch, k, c) {
        char va[SHOWN_MAX + 8], vb[SHOWN_MAX + 8];
        shown(json_object_get(c, "before"), va, sizeof va);
        shown(json_object_get(c, "after"), vb, sizeof vb);
        if (json_object_get(c, "beforeBytes"))
            snprintf(va, sizeof va, "(%lld bytes)", (long long)json_integer_value(json_object_get(c, "beforeBytes")));
        if (json_object_get(c, "afterBytes"))
            snprintf(vb, sizeof vb, "(%lld bytes)", (long long)json_integer_value(json_object_get(c, "afterBytes")));
        printf("  %s: %s%s%s -> %s%s%s\n", json_string_value(json_object_get(c, "path")) ?: "", c_on(&o, RED), va,
               c_off(&o), c_on(&o, GREEN), vb, c_off(&o));
    }
    if (json_is_true(json_object_get(st, "truncated"))) printf("  ... (more than 200 paths differ: the first 200 are shown)\n");
    json_decref(j);
    return 0;
}

/* dstream gc [--dry-run] [--policy FILE]: the operator's retention policies
 * (lib/retain; the file of DSTREAM_RETENTION unless --policy names one) applied to
 * the database now, one whole pass, or with --dry-run only explained: every item
 * under a policy, deleted (why: age, count) or kept (why: within age or count, a
 * live fork reads it, waiting for input, running). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/env.h"
#include "../lib/errs.h"
#include "../lib/retain.h"
#include "cli.h"

typedef struct gc_out {
    int dry;
} gc_out;

static void print_age(char *out, size_t cap, int64_t ms)
{
    int64_t s = ms / 1000;
    if (s >= 86400) snprintf(out, cap, "%lldd", (long long)(s / 86400));
    else if (s >= 3600) snprintf(out, cap, "%lldh", (long long)(s / 3600));
    else if (s >= 60) snprintf(out, cap, "%lldm", (long long)(s / 60));
    else snprintf(out, cap, "%llds", (long long)s);
}

static void report(void *ud, const retain_verdict *v)
{
    gc_out *g = ud;
    if (cli_json) {
        json_t *j = json_pack("{s:s, s:s?, s:s, s:s, s:s, s:I, s:I}", "path", v->path, "session", v->session,
                              "policy", v->prefix, "action",
                              v->del ? (g->dry ? "would delete" : "delete") : "keep", "reason", v->reason,
                              "ageS", (json_int_t)(v->age_ms / 1000), "rank", (json_int_t)v->rank);
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (s) printf("%s\n", s);
        free(s);
        json_decref(j);
        return;
    }
    char age[32];
    print_age(age, sizeof age, v->age_ms);
    printf("%-6s %-8s %s  (%s: %s; age %s, #%lld under \"%s\")\n", v->del ? "delete" : "keep",
           v->session ? "session" : "stream", v->path, v->reason, retain_reason_text(v->reason), age,
           (long long)v->rank + 1, v->prefix);
}

int cmd_gc(log_t *log, int argc, char **argv)
{
    const char *file = env_str("DSTREAM_RETENTION", NULL);
    gc_out g = {0};
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--dry-run")) g.dry = 1;
        else if (!strcmp(argv[i], "--policy") && i + 1 < argc) file = argv[++i];
        else return cli_usage("gc");
    }
    if (!file) {
        fprintf(stderr, "dstream: gc: no policy file (--policy FILE or DSTREAM_RETENTION)\n");
        return 2;
    }
    retain_cfg cfg;
    char err[512];
    if (retain_load(file, &cfg, err, sizeof err)) {
        fprintf(stderr, "dstream: gc: %s\n", err);
        return 2;
    }
    log_conn_t *c = log_conn_open(log, err, sizeof err);
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        retain_free(&cfg);
        return 1;
    }
    retain_state st;
    retain_stats s;
    memset(&st, 0, sizeof st);
    memset(&s, 0, sizeof s);
    retain_opts o;
    memset(&o, 0, sizeof o);
    o.dry_run = g.dry;
    o.report = report;
    o.ud = &g;
    int rc = retain_run(c, &cfg, &st, &o, &s);
    retain_state_free(&st);
    log_conn_close(c);
    retain_free(&cfg);
    if (rc < 0) {
        fprintf(stderr, "dstream: gc: %s (what was deleted before stays deleted)\n", errs_str(rc));
        return 1;
    }
    if (cli_json)
        printf("{\"dryRun\":%s,\"sessions\":%lld,\"streams\":%lld,\"kept\":%lld,\"skipped\":%lld,\"snapshots\":%lld}\n",
               g.dry ? "true" : "false", (long long)s.sessions, (long long)s.streams, (long long)s.kept,
               (long long)s.skipped, (long long)s.snapshots);
    else if (g.dry)
        printf("would delete %lld sessions and %lld streams; %lld kept (dry run: nothing deleted)\n",
               (long long)s.sessions, (long long)s.streams, (long long)s.kept);
    else
        printf("deleted %lld sessions and %lld streams; %lld kept, %lld found needed at deletion;"
               " %lld snapshots thinned\n",
               (long long)s.sessions, (long long)s.streams, (long long)s.kept, (long long)s.skipped,
               (long long)s.snapshots);
    return 0;
}

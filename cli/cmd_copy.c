/* dstream copy --from DB --to DB: a whole database copied to another, between
 * engines or on one, then verified (lib/dbcopy); --verify compares two databases
 * without copying. Exit 0: copied (or alike) and verified; 1: refused (the
 * destination is not empty), failed, or a difference (named); 2: usage. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../lib/dbcopy.h"
#include "../lib/utf8.h"
#include "cli.h"
#include "http.h"

/* A target as printed: a URI's password hidden ("postgresql://u:***@h/db"). */
static void shown(const char *target, char *out, size_t cap)
{
    const char *scheme = strstr(target, "://");
    const char *at = scheme ? strchr(scheme + 3, '@') : NULL;
    const char *colon = at ? memchr(scheme + 3, ':', (size_t)(at - scheme - 3)) : NULL;
    if (colon) snprintf(out, cap, "%.*s:***%s", (int)(colon - target), target, at);
    else snprintf(out, cap, "%s", target);
}

/* Progress on stderr, for a copy long enough to have any (a line every
 * DBCOPY_PROGRESS_ROWS rows, and the total of such a table). */
static void progress(void *ud, const char *table, int64_t rows, int done)
{
    (void)ud;
    if (rows >= DBCOPY_PROGRESS_ROWS)
        fprintf(stderr, "copy: %s: %lld rows%s\n", table, (long long)rows, done ? ", done" : "");
}

int cmd_copy(const char *dbpath, int argc, char **argv)
{
    const char *from = NULL, *to = NULL;
    int verify = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--from") && i + 1 < argc) from = argv[++i];
        else if (!strcmp(argv[i], "--to") && i + 1 < argc) to = argv[++i];
        else if (!strcmp(argv[i], "--verify")) verify = 1;
        else return cli_usage("copy");
    }
    if (!from) from = dbpath;
    if (!to || !*to || !*from) return cli_usage("copy");
    char f[512], t[512], err[1024];
    shown(from, f, sizeof f);
    shown(to, t, sizeof t);
    int64_t rows[DBCOPY_TABLES] = {0};
    int rc = verify ? dbcopy_verify(from, to, err, sizeof err)
                    : dbcopy_run(from, to, progress, NULL, rows, err, sizeof err);
    if (cli_json) {
        json_t *j = json_pack("{s:o, s:o, s:b}", "from", utf8_json(f), "to", utf8_json(t), "ok", !rc);
        if (rc == DBCOPY_EDIFF) json_object_set_new(j, "difference", utf8_json(err));
        else if (rc) json_object_set_new(j, "error", utf8_json(err));
        if (!verify && (!rc || rc == DBCOPY_EDIFF)) {
            json_t *tables = json_object();
            for (int i = 0; i < DBCOPY_TABLES; i++)
                json_object_set_new(tables, dbcopy_table_name(i), json_integer(rows[i]));
            json_object_set_new(j, "rows", tables);
        }
        print_json(j);
        json_decref(j);
    }
    if (rc == DBCOPY_EDIFF) {
        fprintf(stderr, "dstream: copy: %s and %s differ: %s\n", f, t, err);
        return EXIT_FAIL;
    }
    if (rc) {
        fprintf(stderr, "dstream: copy: %s\n", err);
        return EXIT_FAIL;
    }
    if (!cli_json) {
        if (verify) {
            printf("copy: %s and %s hold the same rows and messages\n", f, t);
            return 0;
        }
        printf("copy: %s -> %s: verified\n", f, t);
        for (int i = 0; i < DBCOPY_TABLES; i++) printf("  %-20s %lld\n", dbcopy_table_name(i), (long long)rows[i]);
    }
    return 0;
}

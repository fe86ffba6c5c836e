/* dstream check [FILE]: the engine's integrity check and the log's own invariants
 * (lib/backup) on the database, or on FILE (a backup). Prints each problem, then a
 * summary; exits 0 when sound, 1 on problems, 2 on usage or if it cannot look. */
#include <stdio.h>
#include <string.h>

#include "../lib/backup.h"
#include "../lib/utf8.h"
#include "cli.h"
#include "http.h"

/* A problem printed, or kept in the array ud (--json). */
static void print_problem(void *ud, const char *problem)
{
    /* A problem names what the database holds: a stream path made before paths had
     * to be UTF-8 too (U+FFFD for its bad bytes; json_string would drop the line). */
    if (ud) json_array_append_new(ud, utf8_json(problem));
    else printf("problem: %s\n", problem);
}

int cmd_check(const char *dbpath, int argc, char **argv)
{
    if (argc > 1) return cli_usage("check");
    const char *path = argc == 1 ? argv[0] : dbpath;
    char err[512];
    json_t *problems = cli_json ? json_array() : NULL;
    int n = backup_check(path, 20, print_problem, problems, err, sizeof err);
    if (n < 0) {
        /* It could not look: no such database, or not one that opens (the message
         * names it), or the check itself failed. */
        if (n == BACKUP_ENODB || n == BACKUP_EOPEN) fprintf(stderr, "dstream: %s\n", err);
        else fprintf(stderr, "dstream: check %s: %s\n", path, err);
        json_decref(problems);
        return 2;
    }
    if (problems) {
        json_t *j = json_pack("{s:o, s:b, s:o}", "check", utf8_json(path), "ok", !n, "problems", problems);
        print_json(j);
        json_decref(j);
        return n ? 1 : 0;
    }
    if (n) {
        printf("check: %s: %d problem%s\n", path, n, n == 1 ? "" : "s");
        return 1;
    }
    printf("check: %s: ok\n", path);
    return 0;
}

int check_file(const char *path)
{
    char *argv[1] = {(char *)path};
    return cmd_check(path, 1, argv) == 0 ? 0 : 1;
}

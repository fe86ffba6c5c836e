/* dstream backup FILE and dstream restore FILE (lib/backup).
 *
 * backup copies the live database while the servers go on writing, then checks
 * the copy (unless --no-check). restore checks a backup, then copies it over the
 * database in one write transaction; stop the runner and the pool first, since
 * their live readers and sessions would otherwise see history change under them. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../lib/backup.h"
#include "../lib/timefmt.h"
#include "../lib/utf8.h"
#include "cli.h"
#include "http.h"

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cmd_backup(const char *dbpath, int argc, char **argv)
{
    int check = 1;
    if (argc > 0 && strcmp(argv[0], "--no-check") == 0) {
        check = 0;
        argc--, argv++;
    }
    if (argc != 1) return cli_usage("backup");
    char err[512];
    backup_info bi;
    long long t0 = mono_ms();
    int rc = backup_copy(dbpath, argv[0], &bi, err, sizeof err);
    long long took = mono_ms() - t0;
    if (rc == BACKUP_ENODB || rc == BACKUP_EOPEN) {
        fprintf(stderr, "dstream: %s\n", err);
        return rc == BACKUP_ENODB ? 2 : 1;
    }
    if (rc) {
        fprintf(stderr, "dstream: backup: %s\n", err);
        return 1;
    }
    if (cli_json) {
        json_t *j = json_pack("{s:o, s:I, s:I, s:I, s:I, s:I}", "backup", utf8_json(argv[0]), "streams", (json_int_t)bi.streams,
                              "messages", (json_int_t)bi.messages, "revision", (json_int_t)bi.rev, "bytes",
                              (json_int_t)bi.bytes, "ms", (json_int_t)took);
        print_json(j);
        json_decref(j);
    } else {
        printf("backup: %s: %lld streams, %lld messages, revision %lld, %lld bytes, copied in %lld ms\n", argv[0],
               (long long)bi.streams, (long long)bi.messages, (long long)bi.rev, (long long)bi.bytes, took);
    }
    return check ? check_file(argv[0]) : 0;
}

int cmd_restore(const char *dbpath, int argc, char **argv)
{
    if (argc != 1) return cli_usage("restore");
    if (check_file(argv[0])) {
        fprintf(stderr, "dstream: restore: %s is not a sound backup; nothing changed\n", argv[0]);
        return 1;
    }
    char err[512];
    if (backup_restore(dbpath, argv[0], err, sizeof err)) {
        fprintf(stderr, "dstream: %s\n", err);
        return 1;
    }
    if (cli_json) {
        json_t *j = json_pack("{s:o, s:o}", "restored", utf8_json(dbpath), "from", utf8_json(argv[0]));
        print_json(j);
        json_decref(j);
    } else {
        printf("restore: %s now holds %s\n", dbpath, argv[0]);
    }
    return 0;
}

/* dstream backup FILE and dstream restore FILE (lib/backup).
 *
 * backup copies the live database while the servers go on writing, then checks
 * the copy (unless --no-check). restore checks a backup, then copies it over the
 * database in one write transaction; stop the runner and the pool first, since
 * their live readers and sessions would otherwise see history change under them. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../lib/backup.h"
#include "../lib/timefmt.h"
#include "../lib/store/sqlite/sqlite.h"
#include "../lib/store/sqlite/db.h"
#include "../lib/utf8.h"
#include "cli.h"
#include "http.h"

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static sqlite3 *open_db(const char *path, int migrate)
{
    char err[512];
    sqlite3 *db;
    db_opts o;
    db_opts_default(&o);
    o.migrate = migrate;
    if (db_open(path, &o, &db, err, sizeof err)) {
        fprintf(stderr, "dstream: %s\n", err);
        return NULL;
    }
    return db;
}

int cmd_backup(const char *dbpath, int argc, char **argv)
{
    int check = 1;
    if (argc > 0 && strcmp(argv[0], "--no-check") == 0) {
        check = 0;
        argc--, argv++;
    }
    if (argc != 1) return cli_usage("backup");
    if (access(dbpath, F_OK)) {
        fprintf(stderr, "dstream: %s: no such database\n", dbpath);
        return 2;
    }
    sqlite3 *db = open_db(dbpath, 0);
    if (!db) return 1;
    char err[512];
    backup_info bi;
    long long t0 = mono_ms();
    int rc = backup_copy(db, argv[0], &bi, err, sizeof err);
    long long took = mono_ms() - t0;
    sqlite3_close_v2(db);
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
    sqlite3 *src = NULL, *dst = open_db(dbpath, 0);
    if (!dst) return 1;
    int rc = 1;
    if (sqlite3_open_v2(argv[0], &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fprintf(stderr, "dstream: %s: %s\n", argv[0], src ? sqlite3_errmsg(src) : "out of memory");
        goto out;
    }
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
    if (!b) {
        fprintf(stderr, "dstream: restore: %s\n", sqlite3_errmsg(dst));
        goto out;
    }
    int step = sqlite3_backup_step(b, -1);
    sqlite3_backup_finish(b);
    if (step != SQLITE_DONE) {
        fprintf(stderr, "dstream: restore: %s (is a server writing?)\n", sqlite3_errstr(step));
        goto out;
    }
    /* The copy brought the backup's journal mode along: back to WAL, then migrate. */
    sqlite3_close_v2(dst);
    dst = open_db(dbpath, 1);
    if (!dst) goto out;
    if (cli_json) {
        json_t *j = json_pack("{s:o, s:o}", "restored", utf8_json(dbpath), "from", utf8_json(argv[0]));
        print_json(j);
        json_decref(j);
    } else {
        printf("restore: %s now holds %s\n", dbpath, argv[0]);
    }
    rc = 0;
out:
    sqlite3_close_v2(src);
    sqlite3_close_v2(dst);
    return rc;
}

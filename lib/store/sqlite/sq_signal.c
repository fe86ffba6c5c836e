/* The SQLite engine's commit signal: a small file beside the database (DB-wake)
 * that every dstream connection writes to after each of its commits.
 *
 * Other processes learn of a commit by an inotify watch (IN_MODIFY) on this file
 * (sq_feed.c). They used to watch the -wal file instead, but its frames are written
 * before the commit is visible (the fsync and the wal-index update come after), so
 * a watcher had to poll quickly for a while after each event, and every frame of
 * every commit ran the kernel's notification for every watcher. SQLite calls a
 * connection's wal hook after each of its commits in WAL mode, once the commit is
 * durable and visible and the write lock released: the hook writes here (one pwrite
 * of a counter, no fsync: only the event matters, never the content), so an event
 * now means "a commit is visible" and a watcher looks once.
 *
 * The hook replaces SQLite's automatic checkpoint (sqlite3WalDefaultHook, which
 * registering a hook removes), so it makes the same decision: a PASSIVE checkpoint
 * once the WAL holds SQ_CHECKPOINT_PAGES pages.
 *
 * The file is created, when missing, with the database file's mode (and, by root,
 * its owner), as SQLite creates the -wal and -shm files: whoever may open the
 * database may signal and watch. It may be removed or replaced under running
 * processes: a writer compares the path with its descriptor at most once a second
 * and opens it again; a watcher watches the new file (sq_feed.c). A writer that
 * cannot open it (no write permission) commits without signalling: the others
 * then notice its commits by their once-a-second look. So do commits of programs
 * that are not dstream (the sqlite3 shell). */
#include "sq.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SQ_SIGNAL_RECHECK_MS 1000   /* how often a writer checks the file is still the one named */

void sq_signal_path(const char *target, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s-wake", target);
}

int sq_signal_create(const char *target)
{
    char path[4200];
    struct stat db;
    sq_signal_path(target, path, sizeof path);
    if (stat(target, &db)) return -1;
    mode_t mode = db.st_mode & 0666;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd >= 0) {
        /* The umask must not narrow it, and root's file must stay the owner's. */
        if (fchmod(fd, mode)) {}
        if (geteuid() == 0 && fchown(fd, db.st_uid, db.st_gid)) {}
        return fd;
    }
    if (errno != EEXIST) return -1;
    return open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
}

static int64_t coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Open the file again if the path names another (or none) since it was opened. */
static void recheck(sq_signal *s)
{
    char path[4200];
    struct stat a, b;
    sq_signal_path(s->target, path, sizeof path);
    if (s->fd >= 0 && fstat(s->fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
        a.st_dev == b.st_dev)
        return;
    if (s->fd >= 0) close(s->fd);
    s->fd = sq_signal_create(s->target);
}

void sq_signal_commit(sq_signal *s)
{
    int64_t now = coarse_ms();
    if (now - s->checked_ms >= SQ_SIGNAL_RECHECK_MS) {
        s->checked_ms = now;
        recheck(s);
    }
    if (s->fd < 0) return;
    s->n++;
    ssize_t n = pwrite(s->fd, &s->n, sizeof s->n, 0);
    (void)n;    /* a failed signal costs the watchers their once-a-second look only */
}

static int wal_hook(void *ud, sqlite3 *db, const char *name, int pages)
{
    sq_conn *c = ud;
    sq_signal_commit(&c->sig);
    if (pages >= SQ_CHECKPOINT_PAGES) sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;   /* anything else would fail the statement that committed */
}

void sq_signal_attach(sq_conn *c, const char *target)
{
    c->sig.target = target;
    c->sig.fd = sq_signal_create(target);
    c->sig.checked_ms = coarse_ms();
    sqlite3_wal_hook(c->db, wal_hook, c);
}

void sq_signal_detach(sq_conn *c)
{
    if (c->db) sqlite3_wal_hook(c->db, NULL, NULL);
    if (c->sig.fd >= 0) close(c->sig.fd);
    c->sig.fd = -1;
}

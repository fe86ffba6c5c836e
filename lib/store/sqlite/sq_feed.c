/* The SQLite engine's change feed: noticing commits made by any process.
 *
 * SQLite offers no cross-process notification, and a reader must not hold a read
 * transaction while it waits (the WAL could not be checkpointed). Every commit of
 * a dstream connection writes to the signal file beside the database (DB-wake,
 * signal.c) once it is visible, so an inotify watch (IN_MODIFY) on that file fires
 * on any process's commit, at no cost while idle, and an event means a commit can
 * be seen now: the caller (lib/wake) looks once, first with a cheap `PRAGMA
 * data_version`, and only when it moved, for which streams changed. Events that
 * come while this process holds the write lock (log_writing) are its own commit's
 * (or of one that landed before it, which the same look finds): the end of the
 * write pokes the caller, so they ask for no look of their own. A commit that
 * signals nothing (a writer without write access to the file, the sqlite3 shell)
 * is found by the caller's once-a-second look.
 *
 * The file may be removed or replaced while watched: the watch is then made again
 * on the file the path names (created if missing), and the caller looks once, for
 * commits made before the new watch.
 *
 * Finding the streams that changed: every change to a stream row stamps it with a
 * database-wide revision (streams.rev, indexed: max(rev) + 1, safe because SQLite
 * has one writer at a time); the feed asks for rows with rev above the last it saw. */
#include "sq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "sq_db.h"

struct store_feed {
    log_t *log;
    log_conn_t *conn;
    sqlite3 *probe;             /* for PRAGMA data_version */
    sqlite3_stmt *dv;           /* PRAGMA data_version, kept prepared */
    char sig[4200];             /* the signal file (signal.c) */
    int ifd, wd;
    int watching;
    int64_t data_version;
    log_cursor cur;
};

static int64_t data_version(store_feed *f)
{
    int64_t v = -1;
    if (!f->dv && sqlite3_prepare_v3(f->probe, "PRAGMA data_version", -1, SQLITE_PREPARE_PERSISTENT,
                                     &f->dv, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(f->dv) == SQLITE_ROW) v = sqlite3_column_int64(f->dv, 0);
    sqlite3_reset(f->dv);
    return v;
}

static void feed_close(store_feed *f)
{
    if (!f) return;
    if (f->ifd >= 0) close(f->ifd);
    sqlite3_finalize(f->dv);
    sqlite3_close_v2(f->probe);
    sq_conn_close(f->conn);
    free(f);
}

static void ignore(void *ud, int64_t id, const char *path)
{
    (void)ud, (void)id, (void)path;
}

static store_feed *feed_open(log_t *l, char *err, size_t errlen)
{
    store_feed *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    f->log = l;
    f->ifd = f->wd = -1;
    f->cur = LOG_CURSOR_START;
    sq_signal_path(l->target, f->sig, sizeof f->sig);
    db_opts o = {l->opts.synchronous_full, l->opts.busy_timeout_ms, 0, 0};
    if (!(f->conn = sq_conn_open(l, err, errlen))) goto fail;
    if (db_open(l->target, &o, &f->probe, err, errlen)) goto fail;
    if (sq_changes_since(f->conn, &f->cur, ignore, NULL)) {
        snprintf(err, errlen, "cannot read the stream revision");
        goto fail;
    }
    f->data_version = data_version(f);
    f->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);   /* watched once someone waits */
    return f;
fail:
    feed_close(f);
    return NULL;
}

static int feed_fd(store_feed *f)
{
    return f->ifd;
}

/* Watch the file the path names now (created if missing). Returns 1 if that is
 * another file than the one watched (or none was): the caller looks once. */
static int add_watch(store_feed *f)
{
    if (f->ifd < 0) return 0;
    uint32_t mask = IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;
    int wd = inotify_add_watch(f->ifd, f->sig, mask);
    if (wd < 0 && errno == ENOENT) {
        int fd = sq_signal_create(f->log->target);
        if (fd >= 0) close(fd);
        wd = inotify_add_watch(f->ifd, f->sig, mask);
    }
    if (wd == f->wd) return 0;
    /* The old one's IN_IGNORED that follows names a wd no longer ours. */
    if (f->wd >= 0) inotify_rm_watch(f->ifd, f->wd);
    f->wd = wd;
    return 1;
}

/* While nobody waits in this process the file is not watched at all: a busy
 * writer elsewhere then costs this process nothing. Asked again while on (the
 * caller's once-a-second look), it watches the file the path names now. */
static void feed_watch(store_feed *f, int on)
{
    f->watching = on;
    if (on) {
        add_watch(f);
    } else if (f->wd >= 0) {
        inotify_rm_watch(f->ifd, f->wd);
        f->wd = -1;
    }
}

static int feed_event(store_feed *f)
{
    char evbuf[4096] __attribute__((aligned(8)));
    ssize_t len = read(f->ifd, evbuf, sizeof evbuf);
    int modified = 0, lost = 0;
    for (ssize_t off = 0; off < len;) {
        struct inotify_event *ev = (struct inotify_event *)(evbuf + off);
        if (ev->wd == f->wd) {
            /* Removed, renamed, or (IN_ATTRIB) its link count changed: the path may
             * name another file now. */
            if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
                f->wd = -1;
                lost = 1;
            }
            lost |= (ev->mask & IN_ATTRIB) != 0;
            modified |= (ev->mask & IN_MODIFY) != 0;
        }
        off += (ssize_t)sizeof *ev + ev->len;
    }
    if (lost && f->watching && (add_watch(f) || f->wd < 0)) return 1;
    if (!modified) return 0;
    /* While this process writes, the signals are its own commit's (SQLite lets
     * one writer at a time commit; one that signalled just before it is seen by
     * the same look), and the end of the write pokes the caller. */
    return __atomic_load_n(&f->log->writing, __ATOMIC_ACQUIRE) ? 0 : 1;
}

static int feed_moved(store_feed *f)
{
    int64_t v = data_version(f);
    if (v == f->data_version && v >= 0) return 0;
    f->data_version = v;
    return 1;
}

static int feed_changes(store_feed *f, void (*fn)(void *, int64_t, const char *), void *ud)
{
    return sq_changes_since(f->conn, &f->cur, fn, ud);
}

/* The highest revision (one look at the index's end) is where the changes end. */
static int feed_skip(store_feed *f, int (*alone)(void *), void *ud)
{
    int64_t top;
    if (sq_max_rev(f->conn, &top) || !alone(ud)) return -1;
    /* (A counter that went back, the stream of the highest removed: a change.) */
    int moved = f->cur.v >= 0 && top != f->cur.v;
    f->cur.v = top;
    return moved;
}

const store_feed_ops sq_feed_ops = {
    .open = feed_open,
    .close = feed_close,
    .fd = feed_fd,
    .watch = feed_watch,
    .event = feed_event,
    .moved = feed_moved,
    .changes = feed_changes,
    .skip = feed_skip,
    .changes_since = sq_changes_since,
    .changes_tails = sq_changes_tails,
};

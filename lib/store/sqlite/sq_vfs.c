/* sq_vfs: a commit's WAL frames written with a few system calls, not two each.
 *
 * SQLite writes each frame of a commit to the -wal file with two pwrite calls
 * (its 24-byte header, then the page), then syncs the file. A runner's commit
 * of 200 sessions' deltas is some 50 frames: 100 calls, each frame across two of
 * the kernel's pages (a 4,120-byte stride), 16 % of the runner's CPU at 200
 * streaming sessions (bench/RESULTS.md). This VFS is the system's own ("unix"),
 * with the writes to a -wal file gathered in memory while they follow one
 * another (or land inside what is gathered: a frame written again within its
 * transaction) and written out together, in writes of up to 124 KiB, before
 * anything else touches the file:
 * its sync (which SQLite calls at every commit under synchronous=FULL, before the
 * commit is published in the wal-index), a read, its size, a truncation, a file
 * control, its close. A write elsewhere in the file writes out what was gathered
 * first, so the file sees the writes in their order. Nothing is acknowledged
 * before the sync as before: a crash loses what a crash before the writes
 * would have, a transaction that never committed. A write error (a full disk)
 * comes back from the call that wrote it out, the commit's sync, which fails the
 * commit as the write would have.
 *
 * Only connections opened with synchronous=FULL use it (db_open): under NORMAL a
 * commit publishes its frames without a sync of the -wal file, and readers of
 * other processes read them from the file at once.
 *
 * The database file and everything else pass straight through: locks, the shared
 * memory of the wal-index, memory maps. */
#include "sq_db.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GATHER_MAX (4u << 20)   /* a commit larger than this is written as it comes */
#define GATHER_KEEP (256u << 10) /* the buffer kept between commits, at most */
#define WRITE_MAX (124u << 10)  /* a write's size, at most (flush) */

typedef struct wfile {
    sqlite3_file base;          /* first: the file SQLite sees */
    sqlite3_file *real;         /* the unix VFS's file, in the same allocation */
    int wal;                    /* a -wal file: its writes are gathered */
    char *buf;                  /* what is gathered: the bytes of [off, off + len) */
    size_t len, cap;
    sqlite3_int64 off;
} wfile;

/* The real file follows ours, aligned. */
#define WFILE_SIZE ((sizeof(wfile) + 15) & ~(size_t)15)

static sqlite3_vfs gather_vfs;
static sqlite3_vfs *real_vfs;
static unsigned long long writes_out;   /* for the tests: writes that reached a -wal file */

/* Write out what is gathered, in pieces of at most WRITE_MAX bytes: the unix VFS
 * writes at most 128 KiB a call (it masks the length to 17 bits), which a larger
 * piece would find as a short write, a full disk. */
static int flush(wfile *w)
{
    int rc = SQLITE_OK;
    for (size_t done = 0; done < w->len && rc == SQLITE_OK;) {
        size_t n = w->len - done < WRITE_MAX ? w->len - done : WRITE_MAX;
        rc = w->real->pMethods->xWrite(w->real, w->buf + done, (int)n, w->off + (sqlite3_int64)done);
        __atomic_add_fetch(&writes_out, 1, __ATOMIC_RELAXED);
        done += n;
    }
    w->len = 0;
    if (w->cap > GATHER_KEEP) {
        free(w->buf);
        w->buf = NULL;
        w->cap = 0;
    }
    return rc;
}

static int x_close(sqlite3_file *f)
{
    wfile *w = (wfile *)f;
    int rc = flush(w);
    int rc2 = w->real->pMethods->xClose(w->real);
    free(w->buf);
    w->buf = NULL;
    return rc != SQLITE_OK ? rc : rc2;
}

static int x_read(sqlite3_file *f, void *p, int amt, sqlite3_int64 ofst)
{
    wfile *w = (wfile *)f;
    int rc = flush(w);
    return rc != SQLITE_OK ? rc : w->real->pMethods->xRead(w->real, p, amt, ofst);
}

static int x_write(sqlite3_file *f, const void *p, int amt, sqlite3_int64 ofst)
{
    wfile *w = (wfile *)f;
    if (!w->wal || amt <= 0) return w->real->pMethods->xWrite(w->real, p, amt, ofst);
    size_t n = (size_t)amt;
    if (w->len && ofst >= w->off && ofst + amt <= w->off + (sqlite3_int64)w->len) {
        memcpy(w->buf + (ofst - w->off), p, n);     /* a frame written again */
        return SQLITE_OK;
    }
    int rc;
    if (w->len && (ofst != w->off + (sqlite3_int64)w->len || w->len + n > GATHER_MAX) &&
        (rc = flush(w)) != SQLITE_OK)
        return rc;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 64 * 1024;
        while (cap < w->len + n) cap *= 2;
        char *b = cap <= GATHER_MAX ? realloc(w->buf, cap) : NULL;
        if (!b) {   /* too large, or no memory: this one as it comes */
            if ((rc = flush(w)) != SQLITE_OK) return rc;
            __atomic_add_fetch(&writes_out, 1, __ATOMIC_RELAXED);
            return w->real->pMethods->xWrite(w->real, p, amt, ofst);
        }
        w->buf = b;
        w->cap = cap;
    }
    if (!w->len) w->off = ofst;
    memcpy(w->buf + w->len, p, n);
    w->len += n;
    return SQLITE_OK;
}

static int x_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    wfile *w = (wfile *)f;
    int rc = flush(w);
    return rc != SQLITE_OK ? rc : w->real->pMethods->xTruncate(w->real, size);
}

static int x_sync(sqlite3_file *f, int flags)
{
    wfile *w = (wfile *)f;
    int rc = flush(w);
    return rc != SQLITE_OK ? rc : w->real->pMethods->xSync(w->real, flags);
}

static int x_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    wfile *w = (wfile *)f;
    int rc = flush(w);
    return rc != SQLITE_OK ? rc : w->real->pMethods->xFileSize(w->real, size);
}

static int x_lock(sqlite3_file *f, int lock)
{
    wfile *w = (wfile *)f;
    return w->real->pMethods->xLock(w->real, lock);
}

static int x_unlock(sqlite3_file *f, int lock)
{
    wfile *w = (wfile *)f;
    return w->real->pMethods->xUnlock(w->real, lock);
}

static int x_check_reserved(sqlite3_file *f, int *out)
{
    wfile *w = (wfile *)f;
    return w->real->pMethods->xCheckReservedLock(w->real, out);
}

static int x_file_control(sqlite3_file *f, int op, void *arg)
{
    wfile *w = (wfile *)f;
    int rc = flush(w);
    return rc != SQLITE_OK ? rc : w->real->pMethods->xFileControl(w->real, op, arg);
}

static int x_sector_size(sqlite3_file *f)
{
    wfile *w = (wfile *)f;
    return w->real->pMethods->xSectorSize(w->real);
}

static int x_device(sqlite3_file *f)
{
    wfile *w = (wfile *)f;
    return w->real->pMethods->xDeviceCharacteristics(w->real);
}

static int x_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
    wfile *w = (wfile *)f;
    return w->real->pMethods->xShmMap(w->real, pg, pgsz, extend, pp);
}

static int x_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    wfile *w = (wfile *)f;
    return w->real->pMethods->xShmLock(w->real, offset, n, flags);
}

static void x_shm_barrier(sqlite3_file *f)
{
    wfile *w = (wfile *)f;
    w->real->pMethods->xShmBarrier(w->real);
}

static int x_shm_unmap(sqlite3_file *f, int del)
{
    wfile *w = (wfile *)f;
    return w->real->pMethods->xShmUnmap(w->real, del);
}

static int x_fetch(sqlite3_file *f, sqlite3_int64 ofst, int amt, void **pp)
{
    wfile *w = (wfile *)f;
    return w->real->pMethods->xFetch(w->real, ofst, amt, pp);
}

static int x_unfetch(sqlite3_file *f, sqlite3_int64 ofst, void *p)
{
    wfile *w = (wfile *)f;
    return w->real->pMethods->xUnfetch(w->real, ofst, p);
}

/* Ours as the real file's version has them: a version 1 file has no shared memory,
 * a version 2 one no memory map. */
#define METHODS(v)                                                                                  \
    {                                                                                               \
        v, x_close, x_read, x_write, x_truncate, x_sync, x_file_size, x_lock, x_unlock,            \
            x_check_reserved, x_file_control, x_sector_size, x_device, v >= 2 ? x_shm_map : NULL,   \
            v >= 2 ? x_shm_lock : NULL, v >= 2 ? x_shm_barrier : NULL, v >= 2 ? x_shm_unmap : NULL, \
            v >= 3 ? x_fetch : NULL, v >= 3 ? x_unfetch : NULL                                      \
    }
static const sqlite3_io_methods methods[3] = {METHODS(1), METHODS(2), METHODS(3)};

static int x_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    wfile *w = (wfile *)f;
    memset(w, 0, sizeof *w);
    w->real = (sqlite3_file *)((char *)f + WFILE_SIZE);
    w->real->pMethods = NULL;
    int rc = real_vfs->xOpen(real_vfs, name, w->real, flags, out);
    /* (SQLite closes a file whose methods are set even when its open failed) */
    int v = w->real->pMethods ? w->real->pMethods->iVersion : 0;
    f->pMethods = v <= 0 ? NULL : &methods[(v > 3 ? 3 : v) - 1];
    w->wal = (flags & SQLITE_OPEN_WAL) != 0;
    return rc;
}

/* The rest of the VFS is the system's. */
static int x_delete(sqlite3_vfs *v, const char *name, int sync)
{
    (void)v;
    return real_vfs->xDelete(real_vfs, name, sync);
}

static int x_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    (void)v;
    return real_vfs->xAccess(real_vfs, name, flags, out);
}

static int x_full_path(sqlite3_vfs *v, const char *name, int n, char *out)
{
    (void)v;
    return real_vfs->xFullPathname(real_vfs, name, n, out);
}

static void *x_dl_open(sqlite3_vfs *v, const char *name)
{
    (void)v;
    return real_vfs->xDlOpen(real_vfs, name);
}

static void x_dl_error(sqlite3_vfs *v, int n, char *msg)
{
    (void)v;
    real_vfs->xDlError(real_vfs, n, msg);
}

static void (*x_dl_sym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    (void)v;
    return real_vfs->xDlSym(real_vfs, h, sym);
}

static void x_dl_close(sqlite3_vfs *v, void *h)
{
    (void)v;
    real_vfs->xDlClose(real_vfs, h);
}

static int x_randomness(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return real_vfs->xRandomness(real_vfs, n, out);
}

static int x_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    return real_vfs->xSleep(real_vfs, us);
}

static int x_current_time(sqlite3_vfs *v, double *out)
{
    (void)v;
    return real_vfs->xCurrentTime(real_vfs, out);
}

static int x_last_error(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return real_vfs->xGetLastError ? real_vfs->xGetLastError(real_vfs, n, out) : 0;
}

static int x_current_time64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    (void)v;
    return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

static int registered;

static void do_register(void)
{
    real_vfs = sqlite3_vfs_find(NULL);
    /* Its files must have the shared-memory and map methods (the unix VFS's do). */
    if (!real_vfs || real_vfs->iVersion < 2 || !real_vfs->xCurrentTimeInt64) return;
    gather_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)(WFILE_SIZE + (size_t)real_vfs->szOsFile),
        .mxPathname = real_vfs->mxPathname,
        .zName = SQ_VFS_NAME,
        .xOpen = x_open,
        .xDelete = x_delete,
        .xAccess = x_access,
        .xFullPathname = x_full_path,
        .xDlOpen = x_dl_open,
        .xDlError = x_dl_error,
        .xDlSym = x_dl_sym,
        .xDlClose = x_dl_close,
        .xRandomness = x_randomness,
        .xSleep = x_sleep,
        .xCurrentTime = x_current_time,
        .xGetLastError = x_last_error,
        .xCurrentTimeInt64 = x_current_time64,
    };
    registered = sqlite3_vfs_register(&gather_vfs, 0) == SQLITE_OK;
}

const char *sq_vfs_name(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, do_register);
    return registered ? SQ_VFS_NAME : NULL;
}

unsigned long long sq_vfs_wal_writes(void)
{
    return __atomic_load_n(&writes_out, __ATOMIC_RELAXED);
}

/* backup: the engine-neutral half of backups (lib/backup.h). The engine copies,
 * restores and checks; this module puts a copy in place whole, and folds the
 * session streams the engine walks to compare every snapshot with a replay. */
#include "backup.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jdiff.h"
#include "sstore.h"
#include "store.h"

static int fsync_path(const char *path, int dir)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int backup_copy(const char *target, const char *dest, backup_info *bi, char *err, size_t errlen)
{
    char tmp[4200];
    struct stat st;
    const store_engine *e = store_engine_for(target, err, errlen);
    if (!e) return BACKUP_EOPEN;
    if (lstat(dest, &st) == 0) {
        snprintf(err, errlen, "%s exists: a backup is never written over a file", dest);
        return BACKUP_EFAIL;
    }
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%d", dest, (int)getpid()) >= (int)sizeof tmp) {
        snprintf(err, errlen, "destination path too long");
        return BACKUP_EFAIL;
    }
    unlink(tmp);
    int rc = e->backup->copy(target, tmp, bi, err, errlen);
    if (rc) goto out;
    rc = BACKUP_EFAIL;
    if (fsync_path(tmp, 0) || rename(tmp, dest)) {
        snprintf(err, errlen, "%s: %s", dest, strerror(errno));
        goto out;
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", dest);
    fsync_path(dirname(dir), 1);
    if (bi && stat(dest, &st) == 0) bi->bytes = (int64_t)st.st_size;
    rc = 0;
out:
    if (rc) unlink(tmp);
    return rc;
}

int backup_restore(const char *target, const char *from, char *err, size_t errlen)
{
    const store_engine *e = store_engine_for(target, err, errlen);
    if (!e) return BACKUP_EOPEN;
    return e->backup->restore(target, from, err, errlen);
}

/* ---- snapshots against a replay -------------------------------------------------------- */

#define SNAP_RULE "snapshot differs from a replay of its session's events"

/* The fold of the session stream being walked. */
typedef struct snap_check {
    int limit, problems;
    backup_report_fn report;
    void *ud;
    session_view v;
    int64_t at;                 /* the next message the fold wants */
    int gap;                    /* a message was missing: the fold stops (the contiguity rule says why) */
} snap_check;

static void snap_problem(snap_check *k, const char *session, int64_t seq, const char *via, const char *what)
{
    if (k->problems++ >= k->limit) return;
    char line[1024];
    snprintf(line, sizeof line, SNAP_RULE ": session=%.100s seq=%lld%s%.200s key=%.300s", session,
             (long long)seq, via[0] ? " fork point, replayed in " : "", via, what);
    k->report(k->ud, line);
}

/* A session stream begins: a fork starts from its own snapshot at the fork point,
 * as lib/sstore does. */
static int walk_stream(void *ud, const char *session, int fork, int64_t fork_seq, const char *fork_view, int deleted)
{
    snap_check *k = ud;
    session_view_free(&k->v);
    session_view_init(&k->v);
    k->at = fork ? fork_seq : 0;
    k->gap = 0;
    if (fork && !(fork_view && sstore_snapshot_load(&k->v, fork_view) == 0)) {
        /* A deleted session's snapshots went with it: its stream, kept for its
         * forks, cannot be replayed (nor its forks' fork points checked). */
        if (!deleted) snap_problem(k, session, fork_seq, "", "(its fork-point snapshot, missing or not a view)");
        return 1;
    }
    return 0;
}

static int walk_message(void *ud, int64_t seq, int64_t pos, const void *data, size_t len)
{
    snap_check *k = ud;
    if (k->gap || seq != k->at) {
        k->gap = 1;
        return 1;
    }
    offset_t o = {(uint64_t)seq, (uint64_t)pos};
    sstore_fold(&k->v, data, len, o);
    k->at++;
    return 0;
}

/* Keys the view gained after snapshots were first written (the cost split,
 * docs/events.md#cost; timers and signals, docs/workflows.md): a snapshot of an
 * earlier version has none of them, and is compared without them. */
static const char *const SNAP_LATER[] = {"cost", "playedRequest", "timerAt", "signals", "waitingFor", "branch"};

/* The replayed view against a snapshot's stored text, when the fold reached its
 * position (a position it cannot reach: the boundary and contiguity rules say why). */
static void walk_snapshot(void *ud, const char *session, int64_t seq, const char *text, const char *via)
{
    snap_check *k = ud;
    if (k->at != seq) return;
    json_t *want = session_view_to_json(&k->v);
    json_t *got = text ? json_loads(text, JSON_ALLOW_NUL, NULL) : NULL;
    for (size_t i = 0; got && i < sizeof SNAP_LATER / sizeof *SNAP_LATER; i++)
        if (!json_object_get(got, SNAP_LATER[i])) json_object_del(want, SNAP_LATER[i]);
    if (!got || !json_equal(want, got)) {
        buf_t key;
        buf_init(&key, 4096);
        const json_t *da, *db;
        int differs = got && jdiff(want, got, &key, &da, &db) && key.len;
        snap_problem(k, session, seq, via, !got ? "(not JSON)" : differs ? key.p : "(the whole view)");
        buf_free(&key);
    }
    json_decref(want);
    json_decref(got);
}

int backup_check(const char *target, int limit, backup_report_fn report, void *ud, char *err, size_t errlen)
{
    const store_engine *e = store_engine_for(target, err, errlen);
    if (!e) return BACKUP_EOPEN;
    snap_check k = {.limit = limit, .report = report, .ud = ud};
    session_view_init(&k.v);
    backup_walk w = {walk_stream, walk_message, walk_snapshot, &k};
    int n = e->backup->check(target, limit, report, ud, &w, err, errlen);
    session_view_free(&k.v);
    return n < 0 ? n : n + k.problems;
}

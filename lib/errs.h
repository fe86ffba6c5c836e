/* errs: the one space of error codes. A function of lib/ that can fail returns 0 or
 * a negative code from here, and each family has its own range, so a code means one
 * thing wherever it travels (a function may return codes of several families: auth
 * returns AUTH_E* and LOG_E*, a subscription call SUB_E* and LOG_E*), and errs_str
 * names any of them.
 *
 *   LOG_E*      -1 ..  -99   the log and the store under it (lib/log.h)
 *   AUTH_E*   -100 .. -199   tokens (lib/auth.h)
 *   SSTORE_E* -200 .. -299   the session store; -201 .. -299 are a command's own
 *                            refusals (lib/sstore.h: sstore_decide_fn)
 *   SUB_E*    -300 .. -399   subscriptions (lib/subscription.h)
 *   BUF_E*    -400 .. -499   bounded buffers (lib/buf.h)
 *   JSON_E*   -500 .. -599   the JSON scanner (lib/json.h)
 *   WORKFLOW_E* -600 .. -699 workflow documents (lib/workflow.h)
 *   BACKUP_E* -700 .. -799   backups, restores and checks of a database (lib/backup.h)
 *   DBCOPY_E* -800 .. -899   copies of a database to another (lib/dbcopy.h)
 *   ERRS_CALLBACK     -900   a caller's callback failed: the function that called
 *                            it passes this back (log_read, wake_follow, json_messages)
 *
 * Values inside a range may be added; a range is never reused. Codes that do not
 * travel (a static function's -1, a parser's local -2) are not in this space. */
#ifndef DSTREAM_ERRS_H
#define DSTREAM_ERRS_H

enum {
    LOG_OK = 0,
    LOG_ENOTFOUND = -1,    /* no such stream (or it expired) */
    LOG_ECONFLICT = -2,    /* exists with another configuration */
    LOG_ECLOSED = -3,      /* append to a closed stream */
    LOG_ECTYPE = -4,       /* content type differs from the stream's */
    LOG_ESEQ = -5,         /* Stream-Seq not greater than the last one */
    LOG_EFENCED = -6,      /* producer epoch older than the stream's */
    LOG_EGAP = -7,         /* producer sequence skips ahead */
    LOG_EBADSEQ = -8,      /* producer sequence invalid for a new epoch */
    LOG_EGONE = -9,        /* soft-deleted: still read by forks */
    LOG_EINVAL = -10,      /* malformed request data (bad JSON, bad offset) */
    LOG_EEMPTY = -11,      /* nothing to append */
    LOG_ERANGE = -12,      /* offset beyond the stream's tail */
    LOG_EBUSY = -13,       /* database locked past the busy timeout */
    LOG_EIO = -14,         /* database error */
    LOG_ESRCGONE = -15,    /* fork source is soft-deleted */
    LOG_EOFFSET = -16,     /* offset names no position of this stream */
    LOG_EFULL = -17,       /* the database or the disk is full: nothing was written */
    LOG_EDOWN = -18,       /* the database server cannot be reached (connection lost or
                            * refused): not acknowledged, try again later */
    LOG_ERERUN = -19,      /* between an engine and lib/log.c only, never returned by
                            * lib/log.c: the group's trial run failed, run it again
                            * with a savepoint per operation (store.h: group_trial) */

    AUTH_EINVALID = -100,  /* malformed, unknown, or the secret does not match */
    AUTH_EEXPIRED = -101,  /* past its expiry */
    AUTH_EEXISTS = -102,   /* a token of that name exists */
    AUTH_ESCOPE = -103,    /* a scope that does not parse */

    SSTORE_EREFUSED = -200,     /* a command's check refused it (see its code) */
    SSTORE_EREFUSED_LAST = -299, /* a command's own refusals lie in -201 .. here */

    SUB_ENOTFOUND = -300,  /* no such subscription */
    SUB_EEXISTS = -301,    /* exists with another configuration */
    SUB_EINVAL = -302,     /* malformed request body */
    SUB_ETOKEN = -303,     /* not a token of this subscription */
    SUB_EEXPIRED = -304,   /* a genuine token past its expiry */
    SUB_EFENCED = -305,    /* another generation or wake, or the lease ran out */
    SUB_ECLAIMED = -306,   /* another worker holds the lease */
    SUB_ENOWORK = -307,    /* nothing pending to claim */
    SUB_EOFFSET = -308,    /* an ack names an unknown stream or an offset out of range */
    SUB_EKIND = -309,      /* the action is for the other delivery type */

    BUF_ENOMEM = -400,     /* out of memory */
    BUF_ETOOBIG = -401,    /* over the buffer's ceiling */

    JSON_EINVAL = -500,    /* not a JSON text */
    JSON_EDEPTH = -501,    /* nested deeper than JSON_MAX_DEPTH */

    WORKFLOW_ETOOLARGE = -600, /* an update or a value past its byte limit */
    BACKUP_EFAIL = -700,   /* the copy, restore or check could not be done (its message says why) */
    BACKUP_ENODB = -701,   /* the target names no database */
    BACKUP_EOPEN = -702,   /* the database could not be opened */

    DBCOPY_EFAIL = -800,   /* the copy could not be done (its message says why) */
    DBCOPY_EOPEN = -801,   /* a database could not be opened */
    DBCOPY_ENOTEMPTY = -802, /* the destination holds rows already */
    DBCOPY_EDIFF = -803,   /* the copy differs from its source (the message names the first difference) */

    ERRS_CALLBACK = -900   /* a caller's callback failed (its own reason is the caller's) */
};

/* A short English description of any code of this space ("stream not found"); for
 * a code outside it, "unknown error". Never NULL; static storage. */
const char *errs_str(int rc);

#endif

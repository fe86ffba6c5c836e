#include "errs.h"

const char *errs_str(int rc)
{
    switch (rc) {
    case LOG_OK: return "ok";
    case LOG_ENOTFOUND: return "stream not found";
    case LOG_ECONFLICT: return "stream exists with a different configuration";
    case LOG_ECLOSED: return "stream is closed";
    case LOG_ECTYPE: return "content type does not match the stream's";
    case LOG_ESEQ: return "Stream-Seq must be greater than the last one";
    case LOG_EFENCED: return "producer epoch is stale";
    case LOG_EGAP: return "producer sequence gap";
    case LOG_EBADSEQ: return "a new producer epoch must start at sequence 0";
    case LOG_EGONE: return "stream was deleted";
    case LOG_EINVAL: return "invalid request";
    case LOG_EEMPTY: return "nothing to append";
    case LOG_ERANGE: return "offset is beyond the end of the stream";
    case LOG_EBUSY: return "database is busy";
    case LOG_EIO: return "database error";
    case LOG_ESRCGONE: return "fork source was deleted";
    case LOG_EOFFSET: return "offset does not name a position of this stream";
    case LOG_EDOWN: return "the database server cannot be reached: try again later";
    case LOG_EFULL: return "the database is full (DSTREAM_DB_MAX_BYTES, or the disk): nothing was written";
    case AUTH_EINVALID: return "token is malformed, unknown, or its secret does not match";
    case AUTH_EEXPIRED: return "token has expired";
    case AUTH_EEXISTS: return "a token of that name exists";
    case AUTH_ESCOPE: return "scope does not parse";
    case SSTORE_EREFUSED: return "the session refused the command";
    case SUB_ENOTFOUND: return "subscription not found";
    case SUB_EEXISTS: return "subscription exists with a different configuration";
    case SUB_EINVAL: return "invalid subscription request";
    case SUB_ETOKEN: return "not a token of this subscription";
    case SUB_EEXPIRED: return "subscription token has expired";
    case SUB_EFENCED: return "another generation or wake holds the subscription, or the lease ran out";
    case SUB_ECLAIMED: return "another worker holds the lease";
    case SUB_ENOWORK: return "nothing pending to claim";
    case SUB_EOFFSET: return "unknown stream or offset out of range";
    case SUB_EKIND: return "the action is for the other delivery type";
    case BUF_ENOMEM: return "out of memory";
    case BUF_ETOOBIG: return "over the buffer's limit";
    case JSON_EINVAL: return "not a JSON text";
    case JSON_EDEPTH: return "JSON nested too deep";
    case WORKFLOW_ETOOLARGE: return "the workflow's state or a value is over its byte limit";
    case BACKUP_EFAIL: return "the backup, restore or check could not be done";
    case BACKUP_ENODB: return "no such database";
    case BACKUP_EOPEN: return "the database could not be opened";
    case DBCOPY_EFAIL: return "the copy could not be done";
    case DBCOPY_EOPEN: return "a database of the copy could not be opened";
    case DBCOPY_ENOTEMPTY: return "the destination is not empty";
    case DBCOPY_EDIFF: return "the copy differs from its source";
    case ERRS_CALLBACK: return "a callback failed";
    default:
        if (rc < SSTORE_EREFUSED && rc >= SSTORE_EREFUSED_LAST) return "the session refused the command";
        return "unknown error";
    }
}

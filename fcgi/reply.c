/* reply: the HTTP face of lib/log's results, for every resource and framer. */
#include "reply.h"

#include <inttypes.h>

#include "../lib/timefmt.h"

void reply_offset(req_t *r, const char *name, offset_t o)
{
    char s[OFFSET_LEN + 1];
    offset_format(o, s);
    res_header(r, name, s);
}

void reply_digest(req_t *r, const uint8_t d[CHAIN_LEN])
{
    char hex[CHAIN_HEX + 1];
    chain_hex(d, hex);
    res_header(r, "Stream-Digest", hex);
}

void reply_fail(req_t *r, int rc)
{
    switch (rc) {
    case LOG_ENOTFOUND: res_error(r, 404, "not_found", "stream not found"); break;
    case LOG_EGONE: res_error(r, 410, "gone", "stream was deleted"); break;
    case LOG_ECONFLICT: res_error(r, 409, "conflict", "%s", errs_str(rc)); break;
    case LOG_ECLOSED:
        res_header(r, "Stream-Closed", "true");
        res_error(r, 409, "stream_closed", "stream is closed");
        break;
    case LOG_ECTYPE: res_error(r, 409, "content_type_mismatch", "%s", errs_str(rc)); break;
    case LOG_ESEQ: res_error(r, 409, "sequence_conflict", "%s", errs_str(rc)); break;
    case LOG_EINVAL: res_error(r, 400, "bad_request", "%s", errs_str(rc)); break;
    case LOG_EEMPTY: res_error(r, 400, "empty_body", "%s", errs_str(rc)); break;
    case LOG_ERANGE: res_error(r, 400, "offset_out_of_range", "%s", errs_str(rc)); break;
    case LOG_EOFFSET: res_error(r, 400, "bad_offset", "%s", errs_str(rc)); break;
    case LOG_ESRCGONE: res_error(r, 409, "source_deleted", "%s", errs_str(rc)); break;
    case LOG_EFULL: res_error(r, 507, "insufficient_storage", "%s", errs_str(rc)); break;
    case LOG_EBUSY:
        res_header(r, "Retry-After", "1");
        res_error(r, 503, "busy", "%s", errs_str(rc));
        break;
    case LOG_EDOWN:
        res_header(r, "Retry-After", "1");
        res_error(r, 503, "unavailable", "%s", errs_str(rc));
        break;
    default: res_error(r, 500, "internal", "%s", errs_str(rc)); break;
    }
}

void reply_meta(req_t *r, const log_info *info)
{
    char ts[40];
    res_header(r, "Content-Type", info->content_type);
    if (info->ttl_s >= 0) res_headerf(r, "Stream-TTL", "%" PRId64, info->ttl_s);
    if (info->expires_ms >= 0) {
        timefmt_format(info->expires_ms, ts, sizeof ts);
        res_header(r, "Stream-Expires-At", ts);
    }
}

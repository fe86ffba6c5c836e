/* Live reads: long-poll and SSE. */
#include "stream.h"

void stream_live(req_t *r, const char *path, log_read_req *rr, int sse)
{
    (void)path;
    (void)rr;
    (void)sse;
    res_error(r, 501, "not_implemented", "live reads are not implemented yet");
}

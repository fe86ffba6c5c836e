/* Recording modes of sessions and their drift reports (lib/recorder,
 * docs/recording.md). A session's mode is part of what it was created with
 * (session:created's "recording"), a fork's of its session:forked; the runner
 * reads it from there. The drift report is the session's recording:request
 * events, in order, with their counts. */
#include <stdio.h>
#include <string.h>

#include "../lib/recorder.h"
#include "../lib/sstore.h"
#include "recordings.h"
#include "reply.h"

int recording_setting(req_t *r, const json_t *body, json_t **out)
{
    json_t *m = json_object_get(body, "mode"), *t = json_object_get(body, "timing");
    *out = NULL;
    if (!m && !t) return 0;
    if (m && rec_mode_parse(json_string_value(m)) < 0) {
        res_error(r, 400, "bad_mode", "mode must be live, record, playback or hybrid");
        return -1;
    }
    const char *ts = json_string_value(t);
    if (t && (!ts || (strcmp(ts, "fast") && strcmp(ts, "realtime")))) {
        res_error(r, 400, "bad_timing", "timing must be fast or realtime");
        return -1;
    }
    *out = json_object();
    if (m) json_object_set(*out, "mode", m);
    if (t) json_object_set(*out, "timing", t);
    return 0;
}

typedef struct drift_ctx {
    json_t *report;
    json_t *mode;               /* the session's recording setting, as last seen */
} drift_ctx;

static int drift_msg(void *ud, const void *data, size_t len, offset_t at)
{
    drift_ctx *d = ud;
    if (!memmem(data, len < 80 ? len : 80, "\"type\":\"", 8)) return 0;
    if (!memmem(data, len < 80 ? len : 80, "recording:", 10) && !memmem(data, len < 80 ? len : 80, "session:", 8))
        return 0;
    json_t *e = json_loadb(data, len, 0, NULL);
    const char *type = json_string_value(json_object_get(e, "type"));
    if (type && (!strcmp(type, EV_SESSION_CREATED) || !strcmp(type, EV_SESSION_FORKED))) {
        json_t *rec = json_object_get(json_object_get(e, "payload"), "recording");
        if (!strcmp(type, EV_SESSION_FORKED)) {     /* a fork's report starts at its fork point */
            json_decref(d->report);
            d->report = rec_drift_new();
        }
        if (rec) {
            json_decref(d->mode);
            d->mode = json_incref(rec);
        }
    } else if (type) {
        char off[OFFSET_LEN + 1];
        offset_format(at, off);
        json_object_set_new(e, "offset", json_string(off));
        rec_drift_add(d->report, e);
    }
    json_decref(e);
    return 0;
}

void recording_drift(req_t *r, const char *id)
{
    sstore_row row;
    int rc;
    if ((rc = sstore_get(r->log, id, &row))) {
        if (rc == LOG_ENOTFOUND) res_error(r, 404, "not_found", "no such session");
        else reply_fail(r, rc);
        return;
    }
    drift_ctx d = {rec_drift_new(), NULL};
    log_read_req rr;
    memset(&rr, 0, sizeof rr);
    rr.path = row.stream;
    rr.kind = OFFSET_START;
    rr.max_bytes = (size_t)-1;
    rc = log_read(r->log, &rr, drift_msg, &d);
    if (rc) {
        reply_fail(r, rc);
    } else {
        json_object_set_new(d.report, "session", json_string(id));
        json_object_set_new(d.report, "mode", json_string(json_string_value(json_object_get(d.mode, "mode")) ?: "default"));
        res_json(r, 200, d.report);
    }
    json_decref(d.mode);
    json_decref(d.report);
}

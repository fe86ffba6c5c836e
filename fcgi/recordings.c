/* Recording modes of sessions and their drift reports (lib/recorder,
 * docs/recording.md). A session's mode is part of what it was created with
 * (session:created's "recording"), a fork's of its session:forked; the runner
 * reads it from there. The drift report is the session's recording:request
 * events, in order, with their counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/event.h"
#include "../lib/recorder.h"
#include "../lib/sstore.h"
#include "access.h"
#include "recordings.h"
#include "reply.h"

/* The scope a session's recordings may come from: the body's "recordingScope" (a
 * list of session-id prefixes, each one the principal may read: an admin names any)
 * or, without one, all the principal may read (access_read_scope). New reference,
 * or NULL after answering 400 or 403. */
static json_t *recording_scope(req_t *r, const json_t *body)
{
    json_t *named = json_object_get(body, "recordingScope"), *p;
    size_t i;
    if (!named) return access_read_scope(r);
    if (!json_is_array(named) || json_array_size(named) > REC_SCOPE_MAX) {
        res_error(r, 400, "bad_recording_scope", "recordingScope must be a list of at most %d session-id prefixes",
                  REC_SCOPE_MAX);
        return NULL;
    }
    json_array_foreach(named, i, p) {
        if (!json_is_string(p) || json_string_length(p) >= SSTORE_ID_MAX || strlen(json_string_value(p)) != json_string_length(p)) {
            res_error(r, 400, "bad_recording_scope", "each prefix of recordingScope must be a string of 0 to %d bytes",
                      SSTORE_ID_MAX - 1);
            return NULL;
        }
        /* A prefix the principal could not read all of is not its to give. */
        if (!access_allows(r, "sessions:read", json_string_value(p))) {
            res_error(r, 403, "forbidden", "the token's scopes do not include sessions:read on every session under"
                      " recordingScope's prefix %s", json_string_value(p));
            return NULL;
        }
    }
    return json_deep_copy(named);
}

int recording_setting(req_t *r, const json_t *body, json_t **out)
{
    json_t *m = json_object_get(body, "mode"), *t = json_object_get(body, "timing");
    *out = NULL;
    if (m && rec_mode_parse(json_string_value(m)) < 0) {
        res_error(r, 400, "bad_mode", "mode must be live, record, playback or hybrid");
        return -1;
    }
    const char *ts = json_string_value(t);
    if (t && (!ts || (strcmp(ts, "fast") && strcmp(ts, "realtime")))) {
        res_error(r, 400, "bad_timing", "timing must be fast or realtime");
        return -1;
    }
    json_t *scope = recording_scope(r, body);
    if (!scope) return -1;
    *out = event_recording_setting(json_string_value(m), ts);
    json_object_set_new(*out, PK_SCOPE, scope);
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
    json_t *e = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
    const char *type = json_string_value(json_object_get(e, "type"));
    if (type && (!strcmp(type, EV_SESSION_CREATED) || !strcmp(type, EV_SESSION_FORKED))) {
        json_t *rec = json_object_get(json_object_get(e, "payload"), PK_RECORDING);
        if (!strcmp(type, EV_SESSION_FORKED)) {     /* a fork's report starts at its fork point */
            json_decref(d->report);
            d->report = rec_drift_new();
        }
        if (json_is_object(rec)) {   /* a fork's names what it changes (lib/session's r_session_forked) */
            json_t *now = json_is_object(d->mode) && !strcmp(type, EV_SESSION_FORKED) ? json_deep_copy(d->mode) : json_object();
            json_object_update(now, rec);
            json_decref(d->mode);
            d->mode = now;
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
        json_object_set_new(d.report, "mode", json_string(json_string_value(json_object_get(d.mode, PK_MODE)) ?: "default"));
        res_json(r, 200, d.report);
    }
    json_decref(d.mode);
    json_decref(d.report);
}

/* ---- /v1/recordings (admin: recordings hold the conversations of every session) ---------- */

/* A filter of the list: 1 given (in out), 0 absent, -1 answered 400. */
static int filter(req_t *r, const char *name, char *out, size_t cap)
{
    int n = req_query(r, name, out, cap);
    if (n == -1) return 0;
    if (n <= 0) {
        res_error(r, 400, "bad_filter", "%s must be 1 to %zu characters", name, cap - 1);
        return -1;
    }
    return 1;
}

static void list(req_t *r)
{
    char session[72], provider[72], model[136], cursor[24], lim[16];
    int hs, hp, hm;
    if ((hs = filter(r, "session", session, sizeof session)) < 0 || (hp = filter(r, "provider", provider, sizeof provider)) < 0 ||
        (hm = filter(r, "model", model, sizeof model)) < 0)
        return;
    long long cur = 0, limit = 50;
    char *end;
    int cn = req_query(r, "cursor", cursor, sizeof cursor);
    if (cn >= 0) cur = strtoll(cursor, &end, 10);
    if (cn == 0 || cn < -1 || (cn > 0 && (*end || cur < 1))) {
        res_error(r, 400, "bad_cursor", "malformed cursor");
        return;
    }
    int ln = req_query(r, "limit", lim, sizeof lim);
    if (ln >= 0) limit = strtoll(lim, &end, 10);
    if (ln == 0 || ln < -1 || (ln > 0 && (*end || limit < 1 || limit > REC_LIST_MAX))) {
        res_error(r, 400, "bad_limit", "limit must be 1 to %d", REC_LIST_MAX);
        return;
    }
    json_t *arr = json_array();
    int64_t next = 0;
    int rc = rec_list(r->log, hs ? session : NULL, hp ? provider : NULL, hm ? model : NULL, cur, (int)limit, arr, &next);
    if (rc) {
        json_decref(arr);
        reply_fail(r, rc);
        return;
    }
    char nc[24];
    snprintf(nc, sizeof nc, "%lld", (long long)next);
    json_t *o = json_pack("{s:o, s:o}", "recordings", arr, "nextCursor", next ? json_string(nc) : json_null());
    res_json(r, 200, o);
    json_decref(o);
}

static int valid_key(const char *k)
{
    size_t n = strlen(k);
    if (n != REC_KEY_LEN) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((k[i] >= '0' && k[i] <= '9') || (k[i] >= 'a' && k[i] <= 'f'))) return 0;
    return 1;
}

void recordings_handle(req_t *r, const char *key)
{
    const char *m = r->method;
    if (!key) {
        if (!strcmp(m, "GET")) list(r);
        else {
            res_method_not_allowed(r, "GET");
        }
        return;
    }
    if (!valid_key(key)) {
        res_error(r, 404, "not_found", "no recording with that key (64 lower-case hex digits)");
        return;
    }
    int rc = 0;
    if (!strcmp(m, "GET")) {
        json_t *recs = rec_get(r->log, key, &rc);
        if (rc) reply_fail(r, rc);
        else if (!recs) res_error(r, 404, "not_found", "no recording with that key");
        else {
            json_t *o = json_pack("{s:s, s:o}", "key", key, "recordings", recs);
            res_json(r, 200, o);
            json_decref(o);
        }
    } else if (!strcmp(m, "DELETE")) {
        rc = rec_delete(r->log, key);
        if (rc < 0) reply_fail(r, rc);
        else if (rc == 0) res_error(r, 404, "not_found", "no recording with that key");
        else {
            res_status(r, 204);
            res_end(r);
        }
    } else {
        res_method_not_allowed(r, "GET, DELETE");
    }
}

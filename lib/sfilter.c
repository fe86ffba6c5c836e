/* sfilter: session labels and filters (see sfilter.h for the rules). */
#include "sfilter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jcheck.h"
#include "timefmt.h"

static int key_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
           ch == '.' || ch == '/' || ch == '-';
}

static int value_char(char ch)
{
    return key_char(ch) || ch == ':' || ch == '@' || ch == '+';
}

/* 0 if the n bytes at s are a key (value: a value), else -1 with err. */
static int check_one(const char *s, size_t n, int value, char *err, size_t errcap)
{
    char q[JCHECK_QUOTE];
    size_t max = value ? SFILTER_VALUE_MAX : SFILTER_KEY_MAX;
    if ((!value && n == 0) || n > max) {
        jcheck_seterr(err, errcap, "label %s \"%s\" must be %d to %zu bytes", value ? "value" : "key",
                      jcheck_show(q, sizeof q, s, n), value ? 0 : 1, max);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (value ? !value_char(s[i]) : !key_char(s[i])) {
            jcheck_seterr(err, errcap, "label %s \"%s\" may hold only %s", value ? "value" : "key",
                          jcheck_show(q, sizeof q, s, n),
                          value ? "letters, digits and _ . / - : @ +" : "letters, digits and _ . / -");
            return -1;
        }
    return 0;
}

int sfilter_labels(const json_t *labels, char *out, size_t cap, char *err, size_t errcap)
{
    const char *k;
    json_t *v;
    if (!json_is_object(labels)) {
        jcheck_seterr(err, errcap, "labels must be an object of strings");
        return -1;
    }
    if (json_object_size(labels) > SFILTER_LABELS) {
        jcheck_seterr(err, errcap, "at most %d labels", SFILTER_LABELS);
        return -1;
    }
    json_object_foreach((json_t *)labels, k, v) {
        char q[JCHECK_QUOTE];
        if (check_one(k, strlen(k), 0, err, errcap)) return -1;
        if (!json_is_string(v)) {
            jcheck_seterr(err, errcap, "label \"%s\" must be a string", jcheck_show(q, sizeof q, k, strlen(k)));
            return -1;
        }
        if (check_one(json_string_value(v), json_string_length(v), 1, err, errcap)) return -1;
    }
    out[0] = '\0';
    if (json_object_size(labels) == 0) return 0;
    char *s = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS);
    int rc = s && strlen(s) < cap ? 0 : -1;
    if (!rc) snprintf(out, cap, "%s", s);
    else jcheck_seterr(err, errcap, "labels are too large");
    free(s);
    return rc;
}

int sfilter_add_labels(sstore_filter *f, const char *text, char *err, size_t errcap)
{
    json_t *o = f->labels[0] ? json_loads(f->labels, 0, NULL) : json_object();
    int rc = -1;
    if (!o) {
        jcheck_seterr(err, errcap, "labels are malformed");
        return -1;
    }
    for (const char *p = text;;) {
        size_t n = strcspn(p, ","), kn = strcspn(p, ":");
        char key[SFILTER_KEY_MAX + 1], q[JCHECK_QUOTE];
        if (kn >= n) {
            jcheck_seterr(err, errcap, "label \"%s\" must be key:value", jcheck_show(q, sizeof q, p, n));
            goto out;
        }
        if (check_one(p, kn, 0, err, errcap) || check_one(p + kn + 1, n - kn - 1, 1, err, errcap)) goto out;
        memcpy(key, p, kn);
        key[kn] = '\0';
        json_t *old = json_object_get(o, key);
        if (old && (strlen(json_string_value(old)) != n - kn - 1 ||
                    memcmp(json_string_value(old), p + kn + 1, n - kn - 1))) {
            jcheck_seterr(err, errcap, "label \"%s\" is given two values", key);
            goto out;
        }
        json_object_set_new(o, key, json_stringn(p + kn + 1, n - kn - 1));
        if (!p[n]) break;
        p += n + 1;
    }
    char out[SSTORE_LABELS_MAX];
    if ((rc = sfilter_labels(o, out, sizeof out, err, errcap)) == 0) snprintf(f->labels, sizeof f->labels, "%s", out);
out:
    json_decref(o);
    return rc;
}

int sfilter_time(const char *s, int64_t *ms)
{
    if (!s || !*s) return -1;
    if (s[0] >= '0' && s[0] <= '9' && s[strspn(s, "0123456789")] == '\0') {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || *end || v < 0) return -1;
        *ms = v;
        return 0;
    }
    return timefmt_parse(s, ms);
}

/* A name (agent, workflow) of a filter into out. */
static int name_of(const json_t *j, const char *what, char *out, size_t cap, char *err, size_t errcap)
{
    if (!json_is_string(j) || json_string_length(j) == 0 || json_string_length(j) > SFILTER_NAME_MAX ||
        strlen(json_string_value(j)) != json_string_length(j)) {
        jcheck_seterr(err, errcap, "%s must be a name of 1 to %d bytes", what, SFILTER_NAME_MAX);
        return -1;
    }
    snprintf(out, cap, "%s", json_string_value(j));
    return 0;
}

static int time_of(const json_t *j, const char *what, int64_t *ms, char *err, size_t errcap)
{
    if (json_is_integer(j) && json_integer_value(j) >= 0) {
        *ms = json_integer_value(j);
        return 0;
    }
    if (json_is_string(j) && strlen(json_string_value(j)) == json_string_length(j) &&
        !sfilter_time(json_string_value(j), ms))
        return 0;
    jcheck_seterr(err, errcap, "%s must be an RFC 3339 date-time or milliseconds since the epoch", what);
    return -1;
}

int sfilter_from_json(const json_t *doc, sstore_filter *f, char *err, size_t errcap)
{
    static const char *const known[] = {"status", "agent", "workflow", "labels", "createdBefore", "createdAfter",
                                        NULL};
    const char *k;
    json_t *v;
    memset(f, 0, sizeof *f);
    if (!json_is_object(doc)) {
        jcheck_seterr(err, errcap, "filter must be an object");
        return -1;
    }
    json_object_foreach((json_t *)doc, k, v) {
        char q[JCHECK_QUOTE];
        if (!jcheck_in_list(k, known)) {
            jcheck_seterr(err, errcap, "filter has an unknown key \"%s\" (known: status, agent, workflow, labels, "
                                       "createdBefore, createdAfter)", jcheck_show(q, sizeof q, k, strlen(k)));
            return -1;
        }
    }
    if ((v = json_object_get(doc, "status"))) {
        if (!json_is_string(v) || session_status_parse(json_string_value(v)) < 0) {
            jcheck_seterr(err, errcap, "status must be pending, running, awaiting_input, completed, failed or cancelled");
            return -1;
        }
        snprintf(f->status, sizeof f->status, "%s", json_string_value(v));
    }
    if ((v = json_object_get(doc, "agent")) && name_of(v, "agent", f->agent, sizeof f->agent, err, errcap)) return -1;
    if ((v = json_object_get(doc, "workflow")) && name_of(v, "workflow", f->workflow, sizeof f->workflow, err, errcap))
        return -1;
    if ((v = json_object_get(doc, "labels")) && sfilter_labels(v, f->labels, sizeof f->labels, err, errcap))
        return -1;
    if ((v = json_object_get(doc, "createdBefore"))) {
        if (time_of(v, "createdBefore", &f->created_before, err, errcap)) return -1;
        f->has_before = 1;
    }
    if ((v = json_object_get(doc, "createdAfter"))) {
        if (time_of(v, "createdAfter", &f->created_after, err, errcap)) return -1;
        f->has_after = 1;
    }
    return 0;
}

int sfilter_empty(const sstore_filter *f)
{
    return !f->status[0] && !f->agent[0] && !f->workflow[0] && !f->labels[0] && !f->has_before && !f->has_after;
}

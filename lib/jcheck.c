/* jcheck: mistakes, paths and quoting for the document validators (see jcheck.h). */
#include "jcheck.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define JCHECK_MSG 512   /* bytes of one mistake's message */

void jcheck_init(jcheck_errlist *e, char *buf, size_t cap, size_t pathcap)
{
    e->p = buf;
    e->cap = cap;
    e->len = 0;
    e->n = 0;
    /* Our own path buffers are JCHECK_PATH_MAX bytes; 0 would leave them unset. */
    e->pathcap = pathcap && pathcap < JCHECK_PATH_MAX ? pathcap : JCHECK_PATH_MAX;
    if (buf && cap) buf[0] = '\0';
}

void jcheck_mistake(jcheck_errlist *e, const char *path, const char *fmt, ...)
{
    char msg[JCHECK_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    e->n++;   /* counted even when it no longer fits: the document stays invalid */
    if (!e->p || e->len + 1 >= e->cap) return;
    int k = snprintf(e->p + e->len, e->cap - e->len, "%s%s: %s", e->len ? "\n" : "",
                     path[0] ? path : "$", msg);
    if (k < 0) return;
    /* snprintf reports what it would have written; keep len at the NUL it wrote. */
    e->len += (size_t)k < e->cap - e->len ? (size_t)k : e->cap - e->len - 1;
}

void jcheck_key(char *out, size_t cap, const char *base, const char *key)
{
    char q[JCHECK_QUOTE];
    if (snprintf(out, cap, "%s%s%s", base, base[0] ? "." : "",
                 jcheck_show(q, sizeof q, key, strlen(key))) < 0)
        out[0] = '\0';
}

void jcheck_index(char *out, size_t cap, const char *base, const char *key, size_t i)
{
    if (snprintf(out, cap, "%s%s%s[%zu]", base, base[0] && key[0] ? "." : "", key, i) < 0)
        out[0] = '\0';
}

const char *jcheck_show(char *dst, size_t cap, const char *s, size_t n)
{
    size_t k = 0, lim = n < JCHECK_SHOW ? n : JCHECK_SHOW;
    if (cap < JCHECK_QUOTE) return "";
    for (; k < lim; k++) {
        unsigned char c = (unsigned char)s[k];
        dst[k] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (lim < n) {
        memcpy(dst + k, "...", 3);
        k += 3;
    }
    dst[k] = '\0';
    return dst;
}

void jcheck_seterr(char *err, size_t cap, const char *fmt, ...)
{
    if (!err || cap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

int jcheck_in_list(const char *s, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(s, list[i]) == 0) return 1;
    return 0;
}

void jcheck_unknown_keys(jcheck_errlist *e, const char *base, const json_t *obj,
                         const char *const *known)
{
    const char *key;
    const json_t *v;
    char path[JCHECK_PATH_MAX];
    json_object_foreach((json_t *)obj, key, v) {
        if (jcheck_in_list(key, known)) continue;
        jcheck_key(path, e->pathcap, base, key);
        jcheck_mistake(e, path, "unknown key");
    }
}

const json_t *jcheck_string(jcheck_errlist *e, const char *base, const json_t *obj,
                            const char *key, int required)
{
    char path[JCHECK_PATH_MAX];
    const json_t *v = json_object_get(obj, key);
    jcheck_key(path, e->pathcap, base, key);
    if (!v) {
        if (required) jcheck_mistake(e, path, "missing");
        return NULL;
    }
    if (!json_is_string(v)) {
        jcheck_mistake(e, path, "must be a string");
        return NULL;
    }
    return v;
}

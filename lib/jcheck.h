/* jcheck: the shared pieces of the document validators (lib/agent, lib/workflow).
 *
 * A validator walks a client's JSON document and names every mistake it finds, one
 * per line as "path: message", so that the client fixes everything in one round
 * trip. Paths read like "phases[1].steps[0].agent"; keys that come from the client
 * are quoted with jcheck_show, so a hostile key can neither break the
 * one-mistake-per-line format nor make a message arbitrarily long.
 *
 * Nothing here allocates: messages go to buffers the caller owns and are cut, never
 * overflowed, at their capacity. */
#ifndef DSTREAM_JCHECK_H
#define DSTREAM_JCHECK_H

#include <jansson.h>
#include <stddef.h>

#define JCHECK_SHOW 48                  /* bytes of client text quoted in a message */
#define JCHECK_QUOTE (JCHECK_SHOW + 4)  /* bytes a jcheck_show buffer needs */
#define JCHECK_PATH_MAX 512             /* the longest pathcap jcheck_init accepts */

/* The mistakes found so far: lines "path: message" in the caller's buffer p, cut
 * at its capacity; n counts every mistake, shown or not. pathcap bounds the paths
 * that jcheck builds itself (jcheck_unknown_keys, jcheck_string). Set up with
 * jcheck_init; the fields are read by the validator (n above all). */
typedef struct jcheck_errlist {
    char *p;
    size_t cap, len;
    int n;
    size_t pathcap;
} jcheck_errlist;

/* Start an empty list writing into buf (cap bytes, may be NULL: mistakes are then
 * only counted); buf becomes "" at once. pathcap is the size of the path buffers
 * of this kind of document; 0 or more than JCHECK_PATH_MAX means JCHECK_PATH_MAX.
 * buf stays the caller's and must outlive e. */
void jcheck_init(jcheck_errlist *e, char *buf, size_t cap, size_t pathcap);

/* Add one mistake at path ("" is the document itself, shown as "$"). The message
 * is cut at 511 bytes. Once the buffer is full later mistakes are only counted,
 * so the caller still learns that the document is invalid. */
void jcheck_mistake(jcheck_errlist *e, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Write base.key into out (cap > 0 bytes), or key alone when base is "". key is
 * quoted with jcheck_show; the whole is cut to fit. */
void jcheck_key(char *out, size_t cap, const char *base, const char *key);

/* Write base.key[i] into out (cap > 0 bytes): key alone when base is "", base[i]
 * when key is "" (an element of base itself). key is ours, not the client's, so
 * it is not quoted; the whole is cut to fit. */
void jcheck_index(char *out, size_t cap, const char *base, const char *key, size_t i);

/* Copy at most JCHECK_SHOW of the n bytes at s into dst (cap >= JCHECK_QUOTE,
 * else nothing is copied and "" returned) for quoting in a message: control bytes
 * become '?' and a cut is marked with "...". Returns dst, NUL-terminated. */
const char *jcheck_show(char *dst, size_t cap, const char *s, size_t n);

/* Format one message into err (cap bytes), cut to fit. err may be NULL or cap 0,
 * for callers that want no message; it is then dropped. */
void jcheck_seterr(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 if s is one of the strings of list (NULL-terminated), else 0. */
int jcheck_in_list(const char *s, const char *const *list);

/* Name every key of object obj (at path base) that known (NULL-terminated) does
 * not list: "base.key: unknown key". A misspelt optional key would otherwise be
 * ignored without a word, which is worse than a 400. */
void jcheck_unknown_keys(jcheck_errlist *e, const char *base, const json_t *obj,
                         const char *const *known);

/* obj.key when it is a string. Otherwise NULL, after naming the mistake: "must be
 * a string", or "missing" when required. The result is borrowed from obj. */
const json_t *jcheck_string(jcheck_errlist *e, const char *base, const json_t *obj,
                            const char *key, int required);

#endif

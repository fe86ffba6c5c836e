/* subrule: the pure rules of subscriptions (lib/subscription.h says what they are):
 * which names and paths are valid, how a glob matches, what a PUT body may hold and
 * its canonical hash, the wake tokens' format and MAC, the delivery backoff. No
 * database here: lib/subscription keeps the state and its SQL. */
#include "subrule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sha256.h"

#define SEGS_MAX 512                      /* path segments a glob looks at */
#define TOKEN_TTL_MS (3600 * 1000)        /* a token is refused after an hour whatever happens */

/* ---- names, paths and globs ---------------------------------------------------------- */

int sub_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > SUB_ID_MAX) return 0;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '_' || *p == '~' || *p == '-'))
            return 0;
    return 1;
}

int sub_path_norm(const char *in, char *out, size_t cap)
{
    while (*in == '/') in++;
    size_t n = strlen(in);
    while (n && in[n - 1] == '/') n--;
    if (n == 0 || n >= cap || n > LOG_PATH_MAX) return -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)in[i] < 0x20 || in[i] == 0x7f) return -1;
    if (!strncmp(in, "__ds", 4) && (n == 4 || in[4] == '/')) return -1;
    memcpy(out, in, n);
    out[n] = '\0';
    return 0;
}

typedef struct seg {
    const char *p;
    size_t n;
} seg;

/* Split at '/', empty segments dropped. Returns the count, or -1 past SEGS_MAX. */
static int split(const char *s, seg *out)
{
    int n = 0;
    while (*s) {
        size_t len = strcspn(s, "/");
        if (len) {
            if (n == SEGS_MAX) return -1;
            out[n++] = (seg){s, len};
        }
        s += len;
        if (*s) s++;
    }
    return n;
}

static int seg_is(const seg *s, const char *lit)
{
    return s->n == strlen(lit) && !memcmp(s->p, lit, s->n);
}

/* Wildcard matching over segments, the classic way: '**' is a star (any run of
 * segments), '*' one segment; on a mismatch the last star takes one more segment.
 * Linear in practice, never exponential. */
int sub_glob_match(const char *pattern, const char *path)
{
    static __thread seg ps[SEGS_MAX], ss[SEGS_MAX];
    int np = split(pattern, ps), ns = split(path, ss);
    if (np < 0 || ns < 0) return 0;
    int pi = 0, si = 0, star = -1, mark = 0;
    while (si < ns) {
        if (pi < np && seg_is(&ps[pi], "**")) {
            star = pi++;
            mark = si;
        } else if (pi < np && (seg_is(&ps[pi], "*") ||
                               (ps[pi].n == ss[si].n && !memcmp(ps[pi].p, ss[si].p, ss[si].n)))) {
            pi++;
            si++;
        } else if (star >= 0) {
            pi = star + 1;
            si = ++mark;
        } else {
            return 0;
        }
    }
    while (pi < np && seg_is(&ps[pi], "**")) pi++;
    return pi == np;
}

/* ---- configuration ------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void sub_config_free(sub_config *c)
{
    for (size_t i = 0; i < c->nstreams; i++) free(c->streams[i]);
    free(c->streams);
    free(c->pattern);
    free(c->url);
    free(c->wake_stream);
    free(c->description);
    memset(c, 0, sizeof *c);
}

static int bad(char *err, size_t cap, const char *msg)
{
    snprintf(err, cap, "%s", msg);
    return -1;
}

int sub_config_parse(const json_t *doc, sub_config *c, char *err, size_t cap)
{
    char p[LOG_PATH_MAX + 1];
    memset(c, 0, sizeof *c);
    if (!json_is_object(doc)) return bad(err, cap, "the body must be a JSON object");
    const char *type = json_string_value(json_object_get(doc, "type"));
    if (!type || (strcmp(type, "webhook") && strcmp(type, "pull-wake")))
        return bad(err, cap, "type must be \"webhook\" or \"pull-wake\"");
    c->webhook = !strcmp(type, "webhook");
    json_t *v = json_object_get(doc, "pattern");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v) || sub_path_norm(json_string_value(v), p, sizeof p))
            return bad(err, cap, "pattern must be a glob over stream paths (not empty, not under __ds)");
        c->pattern = strdup(p);
    }
    v = json_object_get(doc, "streams");
    if (v && !json_is_null(v)) {
        if (!json_is_array(v) || json_array_size(v) > SUB_STREAMS_MAX)
            return sub_config_free(c), bad(err, cap, "streams must be an array of at most 1000 stream paths");
        c->streams = calloc(json_array_size(v) + 1, sizeof *c->streams);
        size_t i;
        json_t *s;
        json_array_foreach(v, i, s) {
            if (!json_is_string(s) || sub_path_norm(json_string_value(s), p, sizeof p))
                return sub_config_free(c), bad(err, cap, "streams must hold stream paths (not empty, not under __ds)");
            c->streams[c->nstreams++] = strdup(p);
        }
        qsort(c->streams, c->nstreams, sizeof *c->streams, cmp_str);
        size_t o = 0;
        for (i = 0; i < c->nstreams; i++) {
            if (o && !strcmp(c->streams[o - 1], c->streams[i])) free(c->streams[i]);
            else c->streams[o++] = c->streams[i];
        }
        c->nstreams = o;
    }
    if (!c->pattern && !c->nstreams) return sub_config_free(c), bad(err, cap, "give a pattern, streams, or both");
    v = json_object_get(doc, "lease_ttl_ms");
    c->lease_ttl_ms = SUB_LEASE_DEF_MS;
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < SUB_LEASE_MIN_MS || json_integer_value(v) > SUB_LEASE_MAX_MS)
            return sub_config_free(c), bad(err, cap, "lease_ttl_ms must be an integer from 1000 to 600000");
        c->lease_ttl_ms = json_integer_value(v);
    }
    v = json_object_get(doc, "description");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v) || strlen(json_string_value(v)) > SUB_DESC_MAX)
            return sub_config_free(c), bad(err, cap, "description must be a string of at most 1024 bytes");
        c->description = strdup(json_string_value(v));
    }
    if (c->webhook) {
        const char *url = json_string_value(json_object_get(json_object_get(doc, "webhook"), "url"));
        if (!url || !*url || strlen(url) > URL_MAX)
            return sub_config_free(c), bad(err, cap, "a webhook subscription needs webhook.url (at most 480 bytes)");
        c->url = strdup(url);
    } else {
        const char *ws = json_string_value(json_object_get(doc, "wake_stream"));
        if (!ws || sub_path_norm(ws, p, sizeof p))
            return sub_config_free(c), bad(err, cap, "a pull-wake subscription needs wake_stream (a stream path)");
        c->wake_stream = strdup(p);
    }
    /* The hash of the normalized configuration decides re-confirmation. */
    json_t *canon = json_pack("{s:s, s:s?, s:[], s:s?, s:s?, s:I, s:s?}", "type", type, "pattern", c->pattern,
                              "streams", "url", c->url, "wake_stream", c->wake_stream, "lease_ttl_ms",
                              (json_int_t)c->lease_ttl_ms, "description", c->description);
    json_t *arr = json_object_get(canon, "streams");
    for (size_t i = 0; i < c->nstreams; i++) json_array_append_new(arr, json_string(c->streams[i]));
    char *text = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS);
    uint8_t h[SHA256_LEN];
    sha256(text, strlen(text), h);
    sha256_hex(h, sizeof h, c->hash);
    free(text);
    json_decref(canon);
    return 0;
}

/* ---- wake tokens ---------------------------------------------------------------------- */

static void token_mac(const webhook_key *k, const char *id, const char *body, char out[48])
{
    uint8_t key[SHA256_LEN], mac[SHA256_LEN];
    static const char label[] = "dstream subscription token";
    sha256_hmac(k->priv, sizeof k->priv, label, sizeof label - 1, key);
    size_t il = strlen(id), bl = strlen(body);
    char *msg = malloc(il + bl + 2);
    if (!msg) abort();
    memcpy(msg, id, il);
    msg[il] = '\n';
    memcpy(msg + il + 1, body, bl + 1);
    sha256_hmac(key, sizeof key, msg, il + 1 + bl, mac);
    free(msg);
    webhook_b64url(mac, sizeof mac, out, 48);
}

void sub_token_make(const webhook_key *k, const char *id, int64_t gen, const char *wake_id, int64_t now,
                    char out[SUB_TOKEN_MAX])
{
    char body[96], mac[48];
    snprintf(body, sizeof body, "%lld.%s.%lld", (long long)gen, wake_id, (long long)(now + TOKEN_TTL_MS));
    token_mac(k, id, body, mac);
    snprintf(out, SUB_TOKEN_MAX, "%s.%s", body, mac);
}

int sub_token_check(const webhook_key *k, const char *id, const char *tok, int64_t now, int64_t *gen,
                    char wake[SUB_WAKE_ID_LEN + 1])
{
    char body[96], mac[48];
    const char *dot = strrchr(tok, '.');
    if (!dot || (size_t)(dot - tok) >= sizeof body || strlen(tok) >= SUB_TOKEN_MAX) return SUB_ETOKEN;
    memcpy(body, tok, (size_t)(dot - tok));
    body[dot - tok] = '\0';
    token_mac(k, id, body, mac);
    if (strlen(dot + 1) != strlen(mac) || !sha256_equal(dot + 1, mac, strlen(mac))) return SUB_ETOKEN;
    char *end;
    long long g = strtoll(body, &end, 10);
    const char *w = end + 1, *e = *end == '.' ? strchr(w, '.') : NULL;
    if (!e || e - w != SUB_WAKE_ID_LEN) return SUB_ETOKEN;
    long long exp = strtoll(e + 1, &end, 10);
    if (*end) return SUB_ETOKEN;
    if (exp < now) return SUB_EEXPIRED;
    *gen = g;
    memcpy(wake, w, SUB_WAKE_ID_LEN);
    wake[SUB_WAKE_ID_LEN] = '\0';
    return 0;
}

/* ---- delivery backoff ------------------------------------------------------------------ */

int64_t sub_backoff_ms(int attempts, double jitter)
{
    int64_t base = 1000;
    for (int i = 1; i < attempts && base < SUB_RETRY_MAX_MS; i++) base *= 2;
    if (base > SUB_RETRY_MAX_MS) base = SUB_RETRY_MAX_MS;
    if (jitter < 0) jitter = 0;
    if (jitter > 1) jitter = 1;
    return base + (int64_t)((double)base * 0.2 * (jitter * 2 - 1));
}

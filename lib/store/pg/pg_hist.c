/* A process's cache of streams' history on PostgreSQL (log_opts.read_cache_kib).
 *
 * A stream's messages below its tail never change: an append adds after the
 * tail, retention only takes messages from the front (and then the read's first
 * message, which comes from the database, says where the stream begins), and a
 * stream deleted and made again is another row, with another id. So the pages
 * a read fetched can serve the next reads of the same messages, in any thread
 * of the process, for what it costs to check that they are still the stream's:
 * a read that finds them here asks PostgreSQL for the stream's row, its first
 * message from the read's offset, the digest of the last message kept (which
 * chains every message before it: the same digest at the same seq of the same
 * stream is the same history) and the messages after it (pg_streams.c:
 * READ_CACHED), in one statement as a read without the cache. On this 2-core
 * machine a 1,000-message page costs PostgreSQL's backend about 430 us of CPU
 * and libpq 110 us, the check about 56 and 24 (bench/RESULTS.md): what SQLite
 * spares itself by reading the database's pages in process, this spares
 * PostgreSQL's side. SQLite has no such cache (its page cache is this).
 *
 * One entry per path (the stream that path names, at one id), its messages
 * [lo, hi) end to end in one buffer; reads from an offset in [from, hi) find
 * it, from being the offset of the read that kept it (no message lay between
 * from and lo then, and none can appear there since). Entries are shared by
 * reference: a read holds one while it delivers from it, so an entry is never
 * changed once another thread may see it, but for the messages appended to it
 * in place while only the table holds it (a stream read as it grows). The table
 * keeps at most cap bytes, an entry at most a quarter of it, the least recently
 * used going first. Every operation takes the table's mutex for a few
 * comparisons; nothing is copied under it but the pages kept. */
#include "pg.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HIST_ENTRIES 64         /* entries the table has room for, at most */

struct pg_hist {
    pthread_mutex_t mu;
    size_t cap, bytes;          /* the most the entries may hold, and what they hold */
    uint64_t clock;             /* ticks of use, for the least recently used */
    int n;
    pg_hist_ent *ents[HIST_ENTRIES];
    uint64_t hits, misses;
};

static uint32_t path_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static size_t ent_size(const pg_hist_ent *e)
{
    return e->data_cap + (e->n_cap + 1) * sizeof *e->off + strlen(e->path) + sizeof *e;
}

static void ent_free(pg_hist_ent *e)
{
    if (!e) return;
    free(e->path);
    free(e->off);
    free(e->data);
    free(e);
}

pg_hist *pg_hist_new(size_t cap)
{
    if (cap == 0) return NULL;
    pg_hist *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    pthread_mutex_init(&h->mu, NULL);
    h->cap = cap;
    return h;
}

void pg_hist_free(pg_hist *h)
{
    if (!h) return;
    for (int i = 0; i < h->n; i++) ent_free(h->ents[i]);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* The table's index of path's entry, or -1. Under mu. */
static int find(const pg_hist *h, const char *path, uint32_t hash)
{
    for (int i = 0; i < h->n; i++)
        if (h->ents[i]->hash == hash && !strcmp(h->ents[i]->path, path)) return i;
    return -1;
}

/* Entry i out of the table (the table's reference dropped). Under mu. */
static void unlink_at(pg_hist *h, int i)
{
    pg_hist_ent *e = h->ents[i];
    h->bytes -= e->size;
    h->ents[i] = h->ents[--h->n];
    e->in_table = 0;
    if (--e->refs == 0) ent_free(e);
}

pg_hist_ent *pg_hist_get(pg_hist *h, const char *path, uint64_t lo)
{
    if (!h) return NULL;
    uint32_t hash = path_hash(path);
    pg_hist_ent *e = NULL;
    pthread_mutex_lock(&h->mu);
    int i = find(h, path, hash);
    if (i >= 0 && h->ents[i]->from <= lo && lo < h->ents[i]->hi) {
        e = h->ents[i];
        e->refs++;
        e->used = ++h->clock;
    }
    pthread_mutex_unlock(&h->mu);
    return e;
}

void pg_hist_put(pg_hist *h, pg_hist_ent *e)
{
    if (!h || !e) return;
    pthread_mutex_lock(&h->mu);
    int last = --e->refs == 0;
    pthread_mutex_unlock(&h->mu);
    if (last) ent_free(e);
}

void pg_hist_drop(pg_hist *h, pg_hist_ent *e)
{
    if (!h || !e) return;
    pthread_mutex_lock(&h->mu);
    if (e->in_table)
        for (int i = 0; i < h->n; i++)
            if (h->ents[i] == e) {
                unlink_at(h, i);
                break;
            }
    int last = --e->refs == 0;
    pthread_mutex_unlock(&h->mu);
    if (last) ent_free(e);
}

void pg_hist_note(pg_hist *h, int hit)
{
    if (h) __atomic_add_fetch(hit ? &h->hits : &h->misses, 1, __ATOMIC_RELAXED);
}

void pg_hist_stats(pg_hist *h, uint64_t *hits, uint64_t *misses, uint64_t *bytes)
{
    *hits = *misses = *bytes = 0;
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    *hits = __atomic_load_n(&h->hits, __ATOMIC_RELAXED);
    *misses = __atomic_load_n(&h->misses, __ATOMIC_RELAXED);
    *bytes = h->bytes;
    pthread_mutex_unlock(&h->mu);
}

/* Room for n more messages of len more bytes in e: 0, or -1 (out of memory: e
 * as it was). */
static int ent_grow(pg_hist_ent *e, size_t n, size_t len)
{
    size_t used = e->n ? e->off[e->n] : 0;
    if (e->n + n > e->n_cap) {
        size_t cap = e->n_cap ? e->n_cap : 16;
        while (cap < e->n + n) cap *= 2;
        uint32_t *o = realloc(e->off, (cap + 1) * sizeof *o);
        if (!o) return -1;
        if (!e->off) o[0] = 0;
        e->off = o;
        e->n_cap = cap;
    }
    if (used + len > e->data_cap) {
        size_t cap = e->data_cap ? e->data_cap : 1024;
        while (cap < used + len) cap *= 2;
        char *d = realloc(e->data, cap);
        if (!d) return -1;
        e->data = d;
        e->data_cap = cap;
    }
    return 0;
}

/* The messages of m[0..n) after e's (each its bytes at m[i].data, m[i].len). */
static void ent_append(pg_hist_ent *e, const pg_hist_msg *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t at = e->off[e->n];
        memcpy(e->data + at, m[i].data, m[i].len);
        e->off[++e->n] = at + (uint32_t)m[i].len;
    }
}

/* Entries of the table beyond its cap go, the least recently used first, but
 * for keep. Under mu. */
static void evict(pg_hist *h, const pg_hist_ent *keep)
{
    while (h->bytes > h->cap && h->n > 0) {
        int old = -1;
        for (int i = 0; i < h->n; i++)
            if (h->ents[i] != keep && (old < 0 || h->ents[i]->used < h->ents[old]->used)) old = i;
        if (old < 0) break;
        unlink_at(h, old);
    }
}

void pg_hist_keep(pg_hist *h, const char *path, int64_t id, uint64_t from, offset_t start,
                  const pg_hist_msg *m, size_t n, const uint8_t digest[CHAIN_LEN])
{
    if (!h || n == 0) return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += m[i].len;
    if (len > h->cap / 4 || len > UINT32_MAX / 2) return;
    uint32_t hash = path_hash(path);
    pthread_mutex_lock(&h->mu);
    int i = find(h, path, hash);
    pg_hist_ent *e = i >= 0 ? h->ents[i] : NULL;
    /* The page continues path's entry: appended in place, while only the table
     * holds it (a read holding it sees it as it took it). */
    if (e && e->id == id && e->hi == start.seq && e->lo_pos + e->off[e->n] == start.pos) {
        size_t was = e->size;
        if (e->refs == 1 && e->off[e->n] + len <= h->cap / 4 && ent_grow(e, n, len) == 0) {
            ent_append(e, m, n);
            e->hi += n;
            memcpy(e->digest, digest, CHAIN_LEN);
            e->size = ent_size(e);
            h->bytes += e->size - was;
            e->used = ++h->clock;
            evict(h, e);
        }
        pthread_mutex_unlock(&h->mu);
        return;
    }
    /* Another entry for path stays when it serves reads from further back (the
     * reads from there grow it: READ_CACHED's messages after it continue it), or
     * from as far back and as far on. */
    if (e && e->id == id && (e->from < from || (e->from == from && e->hi >= start.seq + n))) {
        pthread_mutex_unlock(&h->mu);
        return;
    }
    pthread_mutex_unlock(&h->mu);
    /* A new entry, made outside the lock. */
    pg_hist_ent *ne = calloc(1, sizeof *ne);
    if (!ne || !(ne->path = strdup(path)) || ent_grow(ne, n, len)) {
        ent_free(ne);
        return;
    }
    ent_append(ne, m, n);
    ne->id = id;
    ne->from = from;
    ne->lo = start.seq;
    ne->hi = start.seq + n;
    ne->lo_pos = start.pos;
    memcpy(ne->digest, digest, CHAIN_LEN);
    ne->hash = hash;
    ne->refs = 1;
    ne->in_table = 1;
    ne->size = ent_size(ne);
    pthread_mutex_lock(&h->mu);
    ne->used = ++h->clock;
    if ((i = find(h, path, hash)) >= 0) unlink_at(h, i);
    if (h->n == HIST_ENTRIES) {
        int old = 0;
        for (int k = 1; k < h->n; k++)
            if (h->ents[k]->used < h->ents[old]->used) old = k;
        unlink_at(h, old);
    }
    h->ents[h->n++] = ne;
    h->bytes += ne->size;
    evict(h, ne);
    pthread_mutex_unlock(&h->mu);
}

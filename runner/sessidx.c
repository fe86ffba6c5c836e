/* sessidx: the runner's sessions by id and its parked ones by time.
 *
 * A session that waits only for a time (a sleep, a wait's timeout, a checkpoint's
 * expiry, a retry) has nothing in flight and holds no lease: it leaves the loop's
 * list, which the loop walks every turn, and waits here, in a min-heap on its
 * timer, so that 10,000 sleeping sessions cost a turn of the loop one look at the
 * heap's top. A change to its log (a signal, a cancel) finds it by id in the hash
 * table and takes it out; its time pops it. Both O(1) or O(log n). */
#include "sessidx.h"

#include <stdlib.h>
#include <string.h>

#include "types.h"

static size_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

sess_t *sessidx_find(sessidx *x, const char *id)
{
    if (!x->nbuckets) return NULL;
    for (sess_t *s = x->buckets[hash(id) & (x->nbuckets - 1)]; s; s = s->hnext)
        if (!strcmp(s->id, id)) return s;
    return NULL;
}

static void grow(sessidx *x)
{
    size_t nb = x->nbuckets ? x->nbuckets * 2 : 64;
    sess_t **b = calloc(nb, sizeof *b);
    if (!b) abort();
    for (size_t i = 0; i < x->nbuckets; i++)
        for (sess_t *s = x->buckets[i], *next; s; s = next) {
            next = s->hnext;
            size_t k = hash(s->id) & (nb - 1);
            s->hnext = b[k];
            b[k] = s;
        }
    free(x->buckets);
    x->buckets = b;
    x->nbuckets = nb;
}

void sessidx_add(sessidx *x, sess_t *s)
{
    if (x->n >= x->nbuckets) grow(x);
    size_t k = hash(s->id) & (x->nbuckets - 1);
    s->hnext = x->buckets[k];
    x->buckets[k] = s;
    x->n++;
}

void sessidx_del(sessidx *x, sess_t *s)
{
    if (s->heap_at) sessidx_unpark(x, s);
    if (!x->nbuckets) return;
    for (sess_t **pp = &x->buckets[hash(s->id) & (x->nbuckets - 1)]; *pp; pp = &(*pp)->hnext)
        if (*pp == s) {
            *pp = s->hnext;
            x->n--;
            return;
        }
}

/* ---- the heap ---------------------------------------------------------------------- */

static void put(sessidx *x, size_t i, sess_t *s)
{
    x->heap[i] = s;
    s->heap_at = i + 1;
}

static void up(sessidx *x, size_t i)
{
    sess_t *s = x->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (x->heap[p]->timer_ms <= s->timer_ms) break;
        put(x, i, x->heap[p]);
        i = p;
    }
    put(x, i, s);
}

static void down(sessidx *x, size_t i)
{
    sess_t *s = x->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= x->nheap) break;
        if (c + 1 < x->nheap && x->heap[c + 1]->timer_ms < x->heap[c]->timer_ms) c++;
        if (s->timer_ms <= x->heap[c]->timer_ms) break;
        put(x, i, x->heap[c]);
        i = c;
    }
    put(x, i, s);
}

void sessidx_park(sessidx *x, sess_t *s)
{
    if (s->heap_at) return;
    if (x->nheap == x->capheap) {
        size_t cap = x->capheap ? x->capheap * 2 : 64;
        sess_t **h = realloc(x->heap, cap * sizeof *h);
        if (!h) abort();
        x->heap = h;
        x->capheap = cap;
    }
    put(x, x->nheap++, s);
    up(x, x->nheap - 1);
}

void sessidx_unpark(sessidx *x, sess_t *s)
{
    size_t i = s->heap_at - 1;
    if (!s->heap_at) return;
    s->heap_at = 0;
    sess_t *last = x->heap[--x->nheap];
    if (i == x->nheap) return;
    put(x, i, last);
    if (i > 0 && x->heap[(i - 1) / 2]->timer_ms > last->timer_ms) up(x, i);
    else down(x, i);
}

int64_t sessidx_next_due(const sessidx *x)
{
    return x->nheap ? x->heap[0]->timer_ms : 0;
}

sess_t *sessidx_pop_due(sessidx *x, int64_t now)
{
    if (!x->nheap || x->heap[0]->timer_ms > now) return NULL;
    sess_t *s = x->heap[0];
    sessidx_unpark(x, s);
    return s;
}

void sessidx_free(sessidx *x)
{
    free(x->buckets);
    free(x->heap);
    memset(x, 0, sizeof *x);
}

/* sessidx: where the runner finds its sessions (runner/sessidx.c): every one by id
 * (a hash table), and those that wait only for a time, parked, by that time (a
 * binary min-heap on their timer_ms). */
#ifndef DSTREAM_RUNNER_SESSIDX_H
#define DSTREAM_RUNNER_SESSIDX_H

#include <stddef.h>
#include <stdint.h>

typedef struct sess sess_t;

typedef struct sessidx {
    sess_t **buckets;           /* chains through s->hnext */
    size_t nbuckets, n;
    sess_t **heap;              /* parked sessions, the soonest first; s->heap_at is index + 1 */
    size_t nheap, capheap;
} sessidx;

/* The session with this id, or NULL. */
sess_t *sessidx_find(sessidx *x, const char *id);
/* Index s by its id (not there yet). */
void sessidx_add(sessidx *x, sess_t *s);
/* Drop s from the index, and from the heap if it is parked. */
void sessidx_del(sessidx *x, sess_t *s);
/* Park s until its timer_ms (> 0): O(log n). */
void sessidx_park(sessidx *x, sess_t *s);
/* Take s out of the heap (it is parked): O(log n). */
void sessidx_unpark(sessidx *x, sess_t *s);
/* The soonest parked timer (ms), or 0 when none is parked. */
int64_t sessidx_next_due(const sessidx *x);
/* A parked session whose timer is at or before now, taken out of the heap; NULL
 * when there is none. */
sess_t *sessidx_pop_due(sessidx *x, int64_t now);
/* Free the index's memory (not the sessions). */
void sessidx_free(sessidx *x);

#endif

/* metrics: GET /metrics, the pool's counters in the Prometheus text format.
 *
 * Every pool process owns one slot of a table in shared memory that the parent maps
 * before it forks, so whichever process answers the scrape reports them all. */
#ifndef DSTREAM_METRICS_H
#define DSTREAM_METRICS_H

#include <stdint.h>

#include "req.h"

typedef struct metrics_slot {
    int32_t pid;                /* 0: unused */
    int32_t threads;            /* responder threads */
    int32_t live_max;           /* DSTREAM_LIVE_MAX of the hub, 0 without one */
    int64_t busy;               /* threads serving a request now */
    int64_t thread_readers;     /* live readers waiting on a thread now */
    int64_t hub_readers;        /* live readers the hub holds now */
    uint64_t responses[6];      /* by status class: [2] = 2xx ... [5] = 5xx, [0] other */
    uint64_t clients_gone;      /* requests whose client left before the response ended */
    uint64_t readers_shed;      /* live readers dropped for being too far behind */
    uint64_t appends;           /* write operations committed (log_stats ops) */
    uint64_t groups;            /* group commits (log_stats groups) */
    uint64_t wake_checks;       /* change queries of the watcher */
    uint64_t wake_wakeups;      /* waiters woken */
    uint64_t reads_ahead;       /* live reads the hub had fetched together (log_read_ahead) */
    uint64_t cache_hits;        /* reads whose first page the history cache had (log_read_cache_stats) */
    uint64_t cache_misses;      /* reads that fetched it from the database */
    uint64_t cache_bytes;       /* the bytes the history cache holds */
} metrics_slot;

/* In the parent, before forking: room for nslots processes. 0, or -1. */
int metrics_init(int nslots);
/* In child i: take slot i (counters carry on across restarts of the process). */
void metrics_attach(int i, int threads, int live_max);
/* This process's slot, or NULL (CGI, or no table). */
metrics_slot *metrics_self(void);

/* A response of status was completed (or, status 0, its client left). */
void metrics_response(int status);
/* Add delta to one of this process's gauges (pointer into metrics_self()). */
void metrics_gauge(int64_t *gauge, int64_t delta);

/* GET /metrics. */
void metrics_handle(req_t *r);

#endif

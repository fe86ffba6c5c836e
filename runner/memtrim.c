/* memtrim: the runner's memory given back after a burst (see memtrim.h). */
#include "memtrim.h"

#include <malloc.h>

int memtrim_due(memtrim_t *m, size_t active)
{
    if (active > m->peak) m->peak = active;
    if (m->peak >= MEMTRIM_MIN) m->burst = 1;
    if (!m->burst) return 0;
    if (active ? m->peak < MEMTRIM_MIN || active > m->peak / 4 : 0) return 0;
    m->peak = active;
    m->burst = active != 0;
    return 1;
}

int memtrim_turn(memtrim_t *m, size_t active, log_conn_t *c)
{
    if (!memtrim_due(m, active)) return 0;
    if (c) log_release_memory(c);
    malloc_trim(0);
    return 1;
}

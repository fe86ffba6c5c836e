/* step_kinds: the table of step kinds (see step.h), looked up by name. */
#include "step_kinds.h"

#include <string.h>

static const step_exec *const kinds[] = {&step_agent, &step_tool, &step_update, &step_human, &step_sleep, &step_wait, NULL};

const step_exec *step_lookup(const char *kind)
{
    for (int i = 0; kind && kinds[i]; i++)
        if (!strcmp(kinds[i]->kind, kind)) return kinds[i];
    return NULL;
}

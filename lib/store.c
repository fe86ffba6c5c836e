/* store: choosing the engine for a database target (see store.h). */
#include "store.h"

#include <stdio.h>
#include <strings.h>

#include "store/sqlite/engine.h"

const store_engine *store_engine_for(const char *target, char *err, size_t errlen)
{
    if (!target || !*target) {
        snprintf(err, errlen, "no database given");
        return NULL;
    }
    if (strncasecmp(target, "postgresql://", 13) == 0 || strncasecmp(target, "postgres://", 11) == 0) {
        snprintf(err, errlen, "this build has no PostgreSQL engine");
        return NULL;
    }
    return &store_sqlite;
}

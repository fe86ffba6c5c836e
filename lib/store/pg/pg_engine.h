/* The PostgreSQL engine, as lib/log.c chooses it: its table, and nothing of libpq. */
#ifndef DSTREAM_STORE_PG_ENGINE_H
#define DSTREAM_STORE_PG_ENGINE_H

#include "../../store.h"

extern const store_engine store_pg;

#endif

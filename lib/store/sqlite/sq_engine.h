/* The SQLite engine, as lib/store.c chooses it: its table, and nothing of SQLite. */
#ifndef DSTREAM_STORE_SQLITE_ENGINE_H
#define DSTREAM_STORE_SQLITE_ENGINE_H

#include "../../store.h"

extern const store_engine store_sqlite;

#endif

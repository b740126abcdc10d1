/*
 * Private to the PostgreSQL back-end (store_pg.c, store_pg_schema.c): its
 * numbered migrations.
 */
#ifndef ALLOT_STORE_PG_H
#define ALLOT_STORE_PG_H

#include "store_impl.h"

struct pg_migration {
    int version;
    const char *sql; /* constant: no user data */
};

extern const struct pg_migration pg_migrations[];
extern const int pg_n_migrations;

#endif

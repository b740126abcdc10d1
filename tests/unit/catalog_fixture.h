/*
 * Test fixture shared by the unit tests that need the GPU catalog: a
 * cmocka group setup that loads the embedded default catalog into `cat`
 * and a teardown that frees it. Include after cmocka.h.
 */
#ifndef ALLOT_TESTS_CATALOG_FIXTURE_H
#define ALLOT_TESTS_CATALOG_FIXTURE_H

#include "allot/catalog.h"

static struct allot_catalog *cat;

static int setup(void **state)
{
    char err[256];

    (void)state;
    cat = allot_catalog_default(err, sizeof(err));
    return cat ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    allot_catalog_free(cat);
    return 0;
}

#endif

/*
 * What the fuzz targets of tests/fuzz share: the libFuzzer entry point
 * each target file defines (declared here for -Wmissing-prototypes), and
 * FUZZ_CHECK, which aborts on a broken invariant so libFuzzer (and the
 * replay driver, replay.c) reports the input that broke it.
 */
#ifndef ALLOT_TESTS_FUZZ_H
#define ALLOT_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Runs one input (IN, `size` bytes, borrowed, not NUL-terminated). Returns
 * 0; a breach of an invariant aborts. Called by libFuzzer or replay.c. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif

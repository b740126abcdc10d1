/*
 * Seed lists of allot-sim fill: "42-51", "1,5,7-9". No state. Caller:
 * fill_cli.c.
 */
#ifndef ALLOT_SIM_FILL_SEEDS_H
#define ALLOT_SIM_FILL_SEEDS_H

#include <stddef.h>
#include <stdint.h>

#define SIM_FILL_MAX_SEEDS 100000 /* seeds in one list */

/* Parses a seed list "42-51", "1,5,7-9" into a new array (*out, owned by the
 * caller, free with allot_free) of *n (OUT) seeds. Returns 0, ALLOT_EINVAL
 * (malformed, descending range, more than 100000 seeds) or ALLOT_ENOMEM. */
int sim_fill_parse_seeds(const char *s, uint64_t **out, int *n);

#endif

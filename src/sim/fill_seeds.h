/*
 * Seed lists of allot-sim fill: "42-51", "1,5,7-9". Each seed is one more
 * run per policy, so a list holds at most SIM_FILL_MAX_SEEDS seeds, none
 * twice (a repeated seed would count one run twice in the means). No
 * state. Caller: fill_cli.c.
 */
#ifndef ALLOT_SIM_FILL_SEEDS_H
#define ALLOT_SIM_FILL_SEEDS_H

#include <stddef.h>
#include <stdint.h>

#define SIM_FILL_MAX_SEEDS 1000 /* seeds in one list (docs/allot-sim.md) */

/*
 * Parses a seed list "42-51", "1,5,7-9" (IN, comma-separated seeds and
 * ascending ranges of decimal integers 0..10^19-1) into a new array (*out,
 * owned by the caller, free with allot_free) of *n (OUT) seeds in list
 * order. Returns 0, ALLOT_EINVAL with a message in err (malformed, a
 * descending range, a seed given twice, more than SIM_FILL_MAX_SEEDS seeds)
 * or ALLOT_ENOMEM.
 */
int sim_fill_parse_seeds(const char *s, uint64_t **out, int *n, char *err, size_t errlen);

#endif

/*
 * The FGD authors' published fill results (analysis_allo_discrete.csv of
 * their repository's cached results): one row per workload, policy, tune
 * and seed with the GPU allocation % at each arrived % bucket 0..130.
 * allot-sim fill --expected compares its table with their 10-seed means.
 *
 * Read with the strict CSV reader (csvread.h): the header must name
 * workload, sc_policy, tune and seed, may name total_gpus and buckets
 * "0".."130", each once; every value is checked (allocation in 0..100).
 * No state. Callers: fill_cli.c, fill_report.c.
 */
#ifndef ALLOT_SIM_FILL_PUBLISHED_H
#define ALLOT_SIM_FILL_PUBLISHED_H

#include "fill_run.h"

#include <stddef.h>
#include <stdint.h>

/* Published results (the FGD authors' analysis_allo_discrete.csv). */
struct sim_fill_published {
    size_t n;
    struct sim_fill_pub_row {
        char workload[64];
        char policy[32]; /* our name: "fgd", "bestfit", ... */
        double tune;
        int64_t seed;
        double alloc[SIM_FILL_BUCKETS]; /* NaN where the file has no value */
    } * v;                              /* owned */
};

/* Reads `path` (IN). Returns 0, ALLOT_EIO or ALLOT_EINVAL ("FILE:LINE: what"),
 * ALLOT_ENOMEM; *out (OUT) is freed with sim_fill_published_free. */
int sim_fill_published_read(const char *path, struct sim_fill_published *out, char *err,
                            size_t errlen);

/* Mean unallocated % at `bucket` over the seeds of (workload, policy, tune);
 * NaN when the file has none. *n_seeds (OUT, may be NULL) gets their count. */
double sim_fill_published_unalloc(const struct sim_fill_published *p, const char *workload,
                                  const char *policy, double tune, int bucket, int *n_seeds);

/* Frees the rows and leaves it empty; accepts NULL. */
void sim_fill_published_free(struct sim_fill_published *p);

#endif

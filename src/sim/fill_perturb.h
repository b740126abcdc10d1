/*
 * Perturbed openb workloads for allot-sim fill --perturb: the same trace
 * with its fractional GPU requests or its cluster changed in a controlled,
 * seeded way, so that a policy tuned on one workload and seed range (allot
 * was tuned on openb default, seeds 42-51) can be measured on workloads it
 * was not tuned on.
 *
 * A perturbation is a comma list of steps, applied in this order whatever
 * the order written:
 *   flip        every fractional pod (one GPU, gpu_milli s < 1000) asks for
 *               1000 - s instead;
 *   scale=F     every fractional pod asks for round(s x F), at least 1 and
 *               at most 1000 (a whole GPU), 0 < F <= 10;
 *   subset=P    a random share P (0 < P <= 1) of the GPU nodes is kept
 *               (round(P x nodes), at least one), in file order;
 *   seed=N      the seed of the subset's draw (default 1).
 * Whole-GPU and CPU-only pods are never changed. After the steps the
 * trace's GPU count, request and typical-task mix are recomputed, and the
 * workload name gets the spec appended ("default+flip"), so that
 * published figures of the unperturbed workload are not compared with it.
 *
 * No state; pure computation on the caller's trace. Callers: fill_cli.c.
 */
#ifndef ALLOT_SIM_FILL_PERTURB_H
#define ALLOT_SIM_FILL_PERTURB_H

#include "fill_trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A parsed perturbation spec. Zero-initialised = no change. */
struct sim_fill_perturb {
    bool flip;      /* s -> 1000 - s for fractional pods */
    double scale;   /* 0: none; else s -> round(s x scale), in 1..1000 */
    double subset;  /* 0: none; else the share of GPU nodes kept, (0, 1] */
    uint64_t seed;  /* the subset's draw */
    char spec[128]; /* the spec as given, for the workload name */
};

/*
 * Parses `spec` (IN, e.g. "flip", "scale=0.8", "subset=0.33,seed=7") into
 * *out (OUT). Returns 0, or ALLOT_EINVAL with a message naming the bad
 * step in err (an unknown or repeated step, a value where none is taken or
 * none where one is needed, a number out of range, seed without subset).
 */
int sim_fill_perturb_parse(const char *spec, struct sim_fill_perturb *out, char *err,
                           size_t errlen);

/*
 * Applies *p (IN) to the trace *t (IN/OUT): changes its tasks' GPU milli
 * and its node list, then recomputes t->gpus, t->request_milli and t->mix
 * and appends "+SPEC" to t->workload. Returns 0, ALLOT_EINVAL (a changed
 * pod the core rejects; message in err) or ALLOT_ENOMEM; on failure the
 * trace may be partly changed and must be freed.
 */
int sim_fill_perturb_apply(struct sim_fill_trace *t, const struct sim_fill_perturb *p, char *err,
                           size_t errlen);

#endif

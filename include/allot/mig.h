/*
 * MIG geometry: which GPU-instance placements are free on one GPU, allocate
 * and free instances, check whether a layout is feasible, and choose the
 * placement that keeps the most future options open.
 *
 * Pure functions over a small value type (struct allot_mig_state) that lives inside
 * each GPU of the cluster model. Rules enforced for a GPU of model m:
 * instances never overlap in memory slices; a placement must be one listed
 * for the profile; at most profile.max_instances of a profile; at most
 * m.max_gpu_instances instances; compute slices in use never exceed
 * m.compute_slices.
 */
#ifndef ALLOT_MIG_H
#define ALLOT_MIG_H

#include "allot/catalog.h"

#include <stdbool.h>
#include <stdint.h>

struct allot_mig_instance {
    uint8_t profile; /* local profile index in the model */
    uint8_t start;
    uint8_t size;
    uint8_t compute; /* compute slices, so allot_mig_free() needs no model */
};

struct allot_mig_state {
    uint8_t used_mask; /* bit i set: memory slice i occupied */
    uint8_t n_instances;
    uint8_t compute_used;                                    /* compute slices in use */
    struct allot_mig_instance inst[ALLOT_MIG_MAX_INSTANCES]; /* [0, n_instances), by start */
};

/* True when profile `prof` (local index) can be created at memory slice `start`. */
bool allot_mig_can_place(const struct allot_gpu_model *m, const struct allot_mig_state *s, int prof,
                         int start);

/* Writes the free valid placements of `prof` into out[0..max) and returns how
 * many there are (may exceed max; only max are written). */
int allot_mig_list_placements(const struct allot_gpu_model *m, const struct allot_mig_state *s,
                              int prof, struct allot_mig_placement *out, int max);

/* Creates an instance of `prof` at `start`. Returns 0, ALLOT_EINVAL for an
 * unknown profile or a placement not listed, ALLOT_ENOSPC when occupied or a
 * count limit is reached. `s` is unchanged on error. */
int allot_mig_alloc(const struct allot_gpu_model *m, struct allot_mig_state *s, int prof,
                    int start);

/* Destroys the instance starting at `start`. Returns 0 or ALLOT_ENOENT. */
int allot_mig_free(struct allot_mig_state *s, int start);

/* Number of (profile, placement) pairs still creatable on `s`, each weighted
 * by its memory slices; the measure of "future options" that placement
 * choice maximises. */
int allot_mig_options(const struct allot_gpu_model *m, const struct allot_mig_state *s);

/* Chooses the placement of `prof` that leaves the most options (ties: the
 * highest start, keeping low slots, where big profiles live, open). Writes
 * it to *out and returns 0, or ALLOT_ENOSPC when none is free (ALLOT_EINVAL
 * for an unknown profile). */
int allot_mig_best_placement(const struct allot_gpu_model *m, const struct allot_mig_state *s,
                             int prof, struct allot_mig_placement *out);

/* True when instances of the `n` profiles (local indices, any order) can
 * coexist on one empty GPU of model m. */
bool allot_mig_layout_feasible(const struct allot_gpu_model *m, const int *profs, int n);

/* Counts the maximal layouts of model m: sets of placed instances to which
 * no further instance can be added (distinct as sets of (profile, start)). */
long allot_mig_count_maximal_layouts(const struct allot_gpu_model *m);

#endif

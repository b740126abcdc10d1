/*
 * GPU catalog: the models allot knows, their memory and SM count, and for
 * MIG-capable models the GPU-instance profiles with their valid placements
 * (facts from NVIDIA's MIG user guide, shipped as data/gpus.json and
 * embedded into the library at build time).
 *
 * The catalog is immutable once loaded. Profile names are interned across
 * models into global profile ids, so a task can ask for "1g.10gb" once and
 * each model maps that id to its own local profile index (or none).
 * At run time the agent's NVML answers win over the catalog.
 */
#ifndef ALLOT_CATALOG_H
#define ALLOT_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ALLOT_MAX_MODELS          64 /* model masks are uint64_t */
#define ALLOT_MODEL_NAME_MAX      32
#define ALLOT_MAX_ALIASES         6
#define ALLOT_MIG_MAX_SLICES      8  /* memory slices per GPU */
#define ALLOT_MIG_MAX_PROFILES    16 /* profiles per model */
#define ALLOT_MIG_MAX_PLACEMENTS  8  /* placements per profile */
#define ALLOT_MIG_MAX_INSTANCES   8  /* GPU instances per GPU */
#define ALLOT_MAX_GLOBAL_PROFILES 128

struct allot_mig_placement {
    uint8_t start; /* first occupied memory slice */
    uint8_t size;  /* number of memory slices */
};

struct allot_mig_profile {
    char name[ALLOT_MODEL_NAME_MAX]; /* e.g. "3g.40gb" */
    int id;                          /* NVML GPU-instance profile id */
    int global_id;                   /* index into allot_catalog.profile_names */
    int compute_slices;
    int memory_slices;
    int max_instances;  /* of this profile alone on an empty GPU */
    int64_t memory_mib; /* usable memory of one instance (approximate) */
    int n_placements;
    struct allot_mig_placement placements[ALLOT_MIG_MAX_PLACEMENTS];
};

struct allot_gpu_model {
    char name[ALLOT_MODEL_NAME_MAX];                       /* canonical, e.g. "A100-80GB" */
    char aliases[ALLOT_MAX_ALIASES][ALLOT_MODEL_NAME_MAX]; /* e.g. "A100", "V100M16" */
    int n_aliases;
    int64_t memory_mib;
    int sm_count;
    bool mig;              /* MIG-capable */
    int compute_slices;    /* MIG only: 7 (4 on A30) */
    int memory_slices;     /* MIG only: 8 (4 on A30) */
    int max_gpu_instances; /* MIG only */
    int n_profiles;
    struct allot_mig_profile profiles[ALLOT_MIG_MAX_PROFILES];
    /* global profile id -> local index in profiles[], -1 when absent */
    int8_t profile_by_global[ALLOT_MAX_GLOBAL_PROFILES];
};

struct allot_catalog {
    int n_models;
    struct allot_gpu_model *models; /* owned, n_models entries */
    int n_profile_names;
    char profile_names[ALLOT_MAX_GLOBAL_PROFILES][ALLOT_MODEL_NAME_MAX];
};

/*
 * Parses a catalog from JSON text (`len` bytes, need not be NUL-terminated).
 * Validates every entry: names unique (aliases included), memory and SM count
 * positive, MIG geometry consistent (placements inside the GPU, size equal to
 * the profile's memory slices, slice counts within the model's). On error
 * returns NULL and writes a message naming the entry and field into `err`.
 * The caller owns the result; free with allot_catalog_free().
 */
struct allot_catalog *allot_catalog_parse(const char *json, size_t len, char *err, size_t errlen);

/* Parses the catalog embedded in the library (data/gpus.json). */
struct allot_catalog *allot_catalog_default(char *err, size_t errlen);

/* Frees a catalog; accepts NULL. */
void allot_catalog_free(struct allot_catalog *cat);

/* Returns the model index of `name` (canonical or alias, case-insensitive) or -1. */
int allot_catalog_find_model(const struct allot_catalog *cat, const char *name);

/* Returns the global profile id of `name` (e.g. "1g.10gb") or -1. */
int allot_catalog_find_profile(const struct allot_catalog *cat, const char *name);

#endif

/*
 * NVML client of allot-agent: GPU discovery, sampling, Xid events and MIG
 * apply through NVIDIA's management library, loaded at run time with
 * dlopen(), so the agent builds and runs on machines without a driver.
 *
 * Every NVML entry point is resolved with dlsym() (the _v2/_v3 names first,
 * then the plain ones); a missing library fails nvml_open(), a missing
 * symbol or an NVML_ERROR_NOT_SUPPORTED answer only clears a feature bit
 * (ALLOT_NVML_F_*) in the result, never a crash. Unexpected NVML errors on
 * one GPU show in that GPU's health verdict and text.
 *
 * Handle protocol: nvml_open() initialises NVML once (nvmlInit_v2) and
 * registers for Xid events; nvml_close() shuts NVML down and unloads the
 * library. A struct nvml is used by one thread at a time (the agent's loop
 * or one worker); NVML itself is thread-safe. Results are written into
 * caller-owned structs: nothing returned needs freeing.
 *
 * Callers: the agent's inventory (discovery at start), its loop (samples,
 * events, MIG apply on idle GPUs) and tests/unit/test_nvml.c, which runs it
 * against the fake library of tests/fake/fake_nvml.c.
 */
#ifndef ALLOT_AGENT_NVML_H
#define ALLOT_AGENT_NVML_H

#include "allot/catalog.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ALLOT_NVML_DEFAULT_LIB "libnvidia-ml.so.1"
#define ALLOT_NVML_UUID_MAX    96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define ALLOT_NVML_NAME_MAX    96 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define ALLOT_NVML_BUS_ID_MAX  32 /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
#define ALLOT_NVML_MAX_PEERS   18 /* NVML_NVLINK_MAX_LINKS */
#define ALLOT_NVML_MAX_MIG     ALLOT_MIG_MAX_INSTANCES
#define ALLOT_NVML_TEXT_MAX    256
#define ALLOT_NVML_MAX_PROCS   128 /* processes kept per sample */

/* What could be read. Per GPU (nvml_gpu.supported), per sample
 * (nvml_sample.supported) or for the library (nvml_has()). A clear bit
 * means the symbol is missing, NVML answered NOT_SUPPORTED, or the call
 * failed (then the GPU's health text names the call). */
enum allot_nvml_feature {
    ALLOT_NVML_F_PCI = 1u << 0,           /* bus_id */
    ALLOT_NVML_F_MINOR = 1u << 1,         /* minor (/dev/nvidiaN) */
    ALLOT_NVML_F_MIG = 1u << 2,           /* MIG-capable: mig_current/pending */
    ALLOT_NVML_F_MIG_LIST = 1u << 3,      /* mig[] lists the instances */
    ALLOT_NVML_F_NVLINK = 1u << 4,        /* peers[] */
    ALLOT_NVML_F_ECC = 1u << 5,           /* ecc_uncorrected */
    ALLOT_NVML_F_RETIRED_PAGES = 1u << 6, /* retired_* */
    ALLOT_NVML_F_REMAPPED_ROWS = 1u << 7, /* remapped_* */
    ALLOT_NVML_F_XID = 1u << 8,           /* Xid events registered for this GPU */
    ALLOT_NVML_F_UTIL = 1u << 9,          /* sample: util_gpu, util_mem */
    ALLOT_NVML_F_MEMORY = 1u << 10,       /* sample: mem_used_mib, mem_total_mib */
    ALLOT_NVML_F_ENERGY = 1u << 11,       /* sample: energy_mj */
    ALLOT_NVML_F_TEMP = 1u << 12,         /* sample: temp_c */
    ALLOT_NVML_F_PROCS = 1u << 13,        /* sample: procs[] */
    ALLOT_NVML_F_EVENTS = 1u << 14,       /* library: an event set exists */
    ALLOT_NVML_F_MIG_APPLY = 1u << 15,    /* library: every MIG create/destroy symbol */
};

enum allot_nvml_health {
    ALLOT_NVML_HEALTHY = 0,
    ALLOT_NVML_DEGRADED,  /* usable; something optional failed or a reset is pending */
    ALLOT_NVML_UNHEALTHY, /* do not schedule: identity unreadable, lost, ECC, remap failure */
};

/* One GPU instance (with its compute instance) of a MIG-enabled GPU. */
struct nvml_mig_instance {
    int gi_id;                          /* GPU instance id */
    int ci_id;                          /* first compute instance id; -1 when the GI has none */
    int n_ci;                           /* compute instances in the GI (allot makes one) */
    int profile_id;                     /* NVML GPU-instance profile id */
    char profile[ALLOT_MODEL_NAME_MAX]; /* "1g.10gb"; "" when NVML gives no name */
    int compute_slices;                 /* the profile's sliceCount */
    int start, size;                    /* placement, in memory slices */
    int64_t memory_mib;                 /* the MIG device's memory, else the profile's */
    char uuid[ALLOT_NVML_UUID_MAX];     /* "MIG-..." of the first CI; "" when unknown */
};

/* The GPUs (or NVSwitches) one GPU reaches over active NVLinks. */
struct nvml_peer {
    char bus_id[ALLOT_NVML_BUS_ID_MAX]; /* the remote end's PCI bus id */
    int index;                          /* local GPU index; -1: not a GPU of this node */
    int links;                          /* active links to it */
};

struct nvml_gpu {
    int index;
    char uuid[ALLOT_NVML_UUID_MAX];
    char name[ALLOT_NVML_NAME_MAX];     /* as NVML names it, e.g. "NVIDIA H100 80GB HBM3" */
    char bus_id[ALLOT_NVML_BUS_ID_MAX]; /* "00000000:3B:00.0" */
    int64_t memory_mib;                 /* total */
    int minor;                          /* -1 when unknown */
    unsigned supported;                 /* ALLOT_NVML_F_* */
    int mig_current, mig_pending;       /* 1 enabled, 0 disabled, -1 not MIG-capable */
    int n_mig;
    struct nvml_mig_instance mig[ALLOT_NVML_MAX_MIG];
    int n_peers;
    struct nvml_peer peers[ALLOT_NVML_MAX_PEERS];
    uint64_t ecc_uncorrected;          /* volatile (since the last driver load) */
    unsigned retired_sbe, retired_dbe; /* retired pages by cause */
    bool retired_pending;
    unsigned remapped_corr, remapped_unc;
    bool remap_pending, remap_failed;
    bool lost; /* NVML answered NVML_ERROR_GPU_IS_LOST: the rest was not read */
    enum allot_nvml_health health;
    char health_text[ALLOT_NVML_TEXT_MAX]; /* "ok", or the reasons joined by "; " */
};

struct nvml_proc {
    uint32_t pid;
    int64_t used_bytes; /* -1 when NVML does not know */
    int gi_id, ci_id;   /* -1 outside MIG */
};

struct nvml_sample {
    unsigned supported;     /* ALLOT_NVML_F_UTIL ... ALLOT_NVML_F_PROCS */
    int util_gpu, util_mem; /* percent over NVML's last sample period */
    int64_t mem_used_mib, mem_total_mib;
    uint64_t energy_mj; /* since the driver was loaded */
    int temp_c;
    int n_procs;      /* compute processes NVML reported */
    int n_procs_kept; /* min(n_procs, ALLOT_NVML_MAX_PROCS) entries of procs[] */
    struct nvml_proc procs[ALLOT_NVML_MAX_PROCS];
};

struct nvml_xid {
    int index;        /* GPU; -1 when the event's device is not one of ours */
    uint64_t xid;     /* the Xid code */
    int gi_id, ci_id; /* -1 when not tied to a MIG instance */
};

/* A GPU-instance profile as NVML describes it on one GPU. */
struct nvml_mig_profile {
    int nvml_index;                  /* NVML_GPU_INSTANCE_PROFILE_* constant */
    int id;                          /* profile id (for create) */
    char name[ALLOT_MODEL_NAME_MAX]; /* "1g.10gb"; "" when NVML gives no name */
    int compute_slices;              /* sliceCount */
    int memory_slices;               /* placement size */
    int max_instances;
    int64_t memory_mib;
    int n_placements;
    struct allot_mig_placement placements[ALLOT_MIG_MAX_PLACEMENTS];
};

struct nvml;

/*
 * Loads the NVML library `lib` (NULL: "libnvidia-ml.so.1", found as dlopen
 * finds it, so LD_LIBRARY_PATH is honoured), resolves its symbols, calls
 * nvmlInit_v2 (or nvmlInit) and registers for Xid events where supported.
 * Returns the handle (free with nvml_close()), or NULL with a message in
 * err when the library cannot be loaded, lacks nvmlInit, or nvmlInit fails.
 */
struct nvml *nvml_open(const char *lib, char *err, size_t errlen);

/* Frees the event set, calls nvmlShutdown and unloads the library; accepts NULL. */
void nvml_close(struct nvml *nv);

/* True when the library-level feature (ALLOT_NVML_F_EVENTS, ALLOT_NVML_F_MIG_APPLY) is there. */
bool nvml_has(const struct nvml *nv, unsigned feature);

/* The message of the last failed call on nv (never NULL; "" when none). */
const char *nvml_last_error(const struct nvml *nv);

/*
 * Discovers the GPUs: fills out[0..min(n, max)) where n is the number of
 * GPUs NVML counts, with identity, memory, MIG mode and instances, NVLink
 * peers (index resolved among the GPUs found), ECC and page retirement or
 * row remapping, and a health verdict. A GPU whose calls fail is still
 * listed (unhealthy, with the failing call in health_text).
 * Returns n (>= 0), or ALLOT_EIO when NVML cannot count the GPUs.
 */
int nvml_devices(struct nvml *nv, struct nvml_gpu *out, int max);

/*
 * Samples GPU `index`: utilisation, memory, energy, temperature and the
 * compute processes with their GPU memory (the list is re-read with a
 * bigger buffer while NVML answers NVML_ERROR_INSUFFICIENT_SIZE).
 * Features that fail are left out of out->supported.
 * Returns 0, ALLOT_ENOENT (no such GPU), ALLOT_EIO (GPU unreachable) or
 * ALLOT_ENOMEM.
 */
int nvml_sample(struct nvml *nv, int index, struct nvml_sample *out);

/*
 * Takes the Xid events that are waiting (never blocks: the wait has a 0 ms
 * timeout) into out[0..max). Events left over stay for the next call.
 * Returns the number taken, 0 when none or when events are unsupported,
 * or ALLOT_EIO when NVML fails.
 */
int nvml_events_poll(struct nvml *nv, struct nvml_xid *out, int max);

/*
 * Turns MIG mode of GPU `index` on or off. *activated (may be NULL) tells
 * whether the new mode is current; false means it is pending until the GPU
 * is reset. Returns 0, ALLOT_ENOENT, ALLOT_ESTATE (not MIG-capable, or
 * instances still exist when disabling) or ALLOT_EIO.
 */
int nvml_mig_set_mode(struct nvml *nv, int index, bool enable, bool *activated);

/*
 * Finds GPU-instance profile `name` ("1g.10gb", case-insensitive) of GPU
 * `index`, whose MIG mode must be on. Matches NVML's own profile name
 * (nvmlDeviceGetGpuInstanceProfileInfoV); where NVML gives no names, the
 * catalog's profile of that name in `model` (may be NULL) gives the NVML
 * profile id and compute slices to match. Fills *out with NVML's figures
 * and valid placements. Returns 0, ALLOT_ENOENT (no such profile),
 * ALLOT_ESTATE (MIG off or unsupported) or ALLOT_EIO.
 */
int nvml_mig_find_profile(struct nvml *nv, int index, const char *name,
                          const struct allot_gpu_model *model, struct nvml_mig_profile *out);

/*
 * Creates a GPU instance of profile `name` at placement start `start` on GPU
 * `index` (nvmlDeviceCreateGpuInstanceWithPlacement), then one compute
 * instance spanning it. A failed compute instance destroys the GPU
 * instance again. Fills *out (may be NULL) with the new instance.
 * Returns 0, ALLOT_ENOENT (no such profile), ALLOT_EINVAL (start is no
 * placement of the profile), ALLOT_ENOSPC (the slices are taken),
 * ALLOT_ESTATE (MIG off, or MIG apply unsupported) or ALLOT_EIO.
 */
int nvml_mig_create(struct nvml *nv, int index, const char *name, int start,
                    const struct allot_gpu_model *model, struct nvml_mig_instance *out);

/*
 * Destroys GPU instance `gi_id` of GPU `index` and its compute instances.
 * Returns 0, ALLOT_ENOENT (no such instance), ALLOT_ESTATE (in use, MIG off
 * or unsupported) or ALLOT_EIO.
 */
int nvml_mig_destroy(struct nvml *nv, int index, int gi_id);

/*
 * Maps an NVML device name ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB")
 * and its total memory (MiB; <= 0 when unknown) to the catalog's canonical
 * model name: a name or alias match whose memory agrees within 12 %, else
 * the model of the same family ("H100", "A100") with the nearest memory
 * within 12 %. Returns a string owned by `cat`, or NULL when unknown.
 */
const char *nvml_model_name(const char *nvml_name, int64_t mem_mib,
                            const struct allot_catalog *cat);

#endif

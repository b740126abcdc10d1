/*
 * A fake libnvidia-ml.so.1 for the agent's NVML client tests (test_nvml):
 * the NVML entry points allot uses, with NVIDIA's ABI, over a machine
 * described in a text file named by the environment variable
 * FAKE_NVML_CONFIG (read at the first nvmlInit; no variable: no GPUs).
 *
 * Built twice (CMakeLists.txt): the full library, which exports the
 * versioned and the plain names like a real driver, and FAKE_NVML_MINIMAL,
 * an old-driver stand-in with only plain names and no MIG, NVLink, ECC,
 * energy or event symbols, so missing symbols can be tested.
 *
 * Config lines ('#' starts a comment; values with spaces in double quotes):
 *   gpu KEY=VALUE...      a GPU, numbered in order. Keys: name, mem (MiB),
 *                         uuid, bus ("00000000:3B:00.0"), minor,
 *                         mig=none|off|on, mig_pending_only=1 (mode changes
 *                         stay pending), ecc=N|na, sbe=N, dbe=N,
 *                         pages=na, pages_pending=1, remap_corr=N,
 *                         remap_unc=N, remap_pending=1, remap_failed=1,
 *                         remap=na, util_gpu, util_mem, temp, energy (mJ),
 *                         events=0, nvlinks=N (links the GPU has)
 *   gi GPU INDEX START [noci]   a GPU instance of profile constant INDEX
 *                         (NVML_GPU_INSTANCE_PROFILE_*) with one compute
 *                         instance, unless noci
 *   nvlink A B [N]        N (1) active links between GPUs A and B
 *   nvswitch A N          N active links from GPU A to an NVSwitch
 *   proc GPU PID MIB [GI CI]    a compute process
 *   procs GPU COUNT FIRST_PID MIB   COUNT processes
 *   grow GPU N            each INSUFFICIENT_SIZE process answer adds N more
 *   xid GPU CODE          a pending Xid event
 *   fail FUNCTION GPU|* CODE [COUNT]   FUNCTION (exported name) answers
 *                         CODE (NVML_ERROR_* name or number) for that GPU,
 *                         COUNT times (default: always)
 *
 * MIG geometry: A30 (name contains "A30") has 4 compute / 4 memory slices,
 * every other MIG GPU the A100/H100 one (7/8), with profile ids as NVIDIA's
 * and names "MIG <c>g.<gb>gb" from the GPU's memory. MIG state lives in
 * memory until the last nvmlShutdown. Not thread-safe (tests are not).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- NVIDIA's ABI (as in nvml.h) -------------------------------------------- */

typedef int nvmlReturn_t;
#define NVML_SUCCESS                         0
#define NVML_ERROR_UNINITIALIZED             1
#define NVML_ERROR_INVALID_ARGUMENT          2
#define NVML_ERROR_NOT_SUPPORTED             3
#define NVML_ERROR_NO_PERMISSION             4
#define NVML_ERROR_NOT_FOUND                 6
#define NVML_ERROR_INSUFFICIENT_SIZE         7
#define NVML_ERROR_DRIVER_NOT_LOADED         9
#define NVML_ERROR_TIMEOUT                   10
#define NVML_ERROR_FUNCTION_NOT_FOUND        13
#define NVML_ERROR_GPU_IS_LOST               15
#define NVML_ERROR_IN_USE                    19
#define NVML_ERROR_INSUFFICIENT_RESOURCES    23
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_UNKNOWN                   999

typedef struct fk_handle *nvmlDevice_t;
typedef struct fk_gi *nvmlGpuInstance_t;
typedef struct fk_ci *nvmlComputeInstance_t;
typedef struct fk_set *nvmlEventSet_t;
typedef int nvmlEnableState_t; /* enums are int-sized */

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
typedef struct {
    unsigned int start, size;
} nvmlGpuInstancePlacement_t;
typedef struct {
    unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
        copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;
typedef struct {
    unsigned int version, id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
        copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
    char name[96];
} nvmlGpuInstanceProfileInfo_v2_t;
typedef struct {
    nvmlDevice_t device;
    unsigned int id, profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;
typedef struct {
    unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount,
        sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;
typedef struct {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned int id, profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

_Static_assert(sizeof(nvmlPciInfo_t) == 68, "ABI");
_Static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "ABI");
_Static_assert(sizeof(nvmlEventData_t) == 32, "ABI");
_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152, "ABI");
_Static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32, "ABI");

#define XID_EVENT   0x8ULL
#define PROFILE_V2  ((unsigned int)(sizeof(nvmlGpuInstanceProfileInfo_v2_t) | (2u << 24)))
#define NONE_ID     0xFFFFFFFFu
#define MAX_GPUS    16
#define MAX_GI      8
#define MAX_CI      8
#define MAX_LINKS   18
#define MAX_RULES   64
#define MAX_XID     32
#define LINK_OFF    (-2)
#define LINK_SWITCH (-1)

/* ---- the fake machine ------------------------------------------------------------ */

enum { KIND_GPU = 0x47505530, KIND_MIG = 0x4d494730 };

struct fk_prof {
    int index; /* NVML_GPU_INSTANCE_PROFILE_* */
    unsigned id;
    int slices, mslices, max, nstarts;
    int starts[8];
    const char *suffix;
};

static const struct fk_prof prof78[] = {
    {0, 19, 1, 1, 7, 7, {0, 1, 2, 3, 4, 5, 6}, ""},
    {1, 14, 2, 2, 3, 3, {0, 2, 4}, ""},
    {2, 9, 3, 4, 2, 2, {0, 4}, ""},
    {3, 5, 4, 4, 1, 1, {0}, ""},
    {4, 0, 7, 8, 1, 1, {0}, ""},
    {7, 20, 1, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, "+me"},
    {9, 15, 1, 2, 4, 4, {0, 2, 4, 6}, ""},
};
static const struct fk_prof prof44[] = {
    {0, 14, 1, 1, 4, 4, {0, 1, 2, 3}, ""},
    {1, 5, 2, 2, 2, 2, {0, 2}, ""},
    {3, 0, 4, 4, 1, 1, {0}, ""},
};
/* NVML_COMPUTE_INSTANCE_PROFILE_* -> compute slices */
static const int ci_slices[] = {1, 2, 3, 4, 7, 8, 6};

/* The common head of a device handle: a GPU or a MIG device (a CI). */
struct fk_handle {
    int kind;
};

struct fk_gpu;
struct fk_gi;

struct fk_ci {
    struct fk_handle h; /* KIND_MIG: this CI is also its MIG device */
    bool used;
    unsigned id, profile;
    int slices;
    struct fk_gi *gi;
    char uuid[96];
};

struct fk_gi {
    bool used;
    unsigned id;
    const struct fk_prof *prof;
    unsigned start;
    struct fk_gpu *gpu;
    struct fk_ci ci[MAX_CI];
};

struct fk_proc {
    unsigned pid;
    unsigned long long bytes;
    unsigned gi, ci;
};

struct fk_gpu {
    struct fk_handle h; /* KIND_GPU */
    int index;
    char name[96], uuid[96], bus[32];
    unsigned domain, bus_no, dev_no;
    unsigned long long mem_mib;
    int minor;
    int mig, mig_pending; /* -1 not capable, 0 off, 1 on */
    bool mig_pending_only, a30;
    bool ecc_na, pages_na, remap_na;
    unsigned long long ecc;
    unsigned sbe, dbe, remap_corr, remap_unc;
    bool pages_pending, remap_pending, remap_failed, events;
    unsigned util_gpu, util_mem, temp;
    unsigned long long energy;
    int n_links;
    int link_peer[MAX_LINKS];
    struct fk_proc *procs;
    unsigned n_procs, cap_procs, grow, next_pid;
    unsigned long long xid[MAX_XID];
    int n_xid;
    struct fk_gi gi[MAX_GI];
};

struct fk_rule {
    char fn[64];
    int gpu; /* -1: any */
    int code;
    int count; /* -1: always */
};

struct fk_set {
    bool reg[MAX_GPUS];
};

static struct {
    int refs;
    int n_gpus;
    struct fk_gpu gpus[MAX_GPUS];
    int n_rules;
    struct fk_rule rules[MAX_RULES];
} S;

/* The injected answer of `fn` on GPU `gpu` (-1: no GPU), or NVML_SUCCESS. */
static nvmlReturn_t injected(const char *fn, int gpu)
{
    for (int i = 0; i < S.n_rules; i++) {
        struct fk_rule *r = &S.rules[i];

        if (r->count == 0 || strcmp(r->fn, fn) != 0 || (r->gpu >= 0 && r->gpu != gpu))
            continue;
        if (r->count > 0)
            r->count--;
        return r->code;
    }
    return NVML_SUCCESS;
}

#define FAIL(fn, gpu)                                                                              \
    do {                                                                                           \
        nvmlReturn_t rc_ = injected(fn, gpu);                                                      \
        if (rc_ != NVML_SUCCESS)                                                                   \
            return rc_;                                                                            \
    } while (0)

static struct fk_gpu *as_gpu(nvmlDevice_t d)
{
    return d && d->kind == KIND_GPU ? (struct fk_gpu *)d : NULL;
}

static struct fk_ci *as_mig(nvmlDevice_t d)
{
    return d && d->kind == KIND_MIG ? (struct fk_ci *)d : NULL;
}

/* The GPU a handle belongs to (a MIG device's parent). */
static struct fk_gpu *owner(nvmlDevice_t d)
{
    struct fk_ci *c = as_mig(d);

    return c ? c->gi->gpu : as_gpu(d);
}

static const struct fk_prof *profiles(const struct fk_gpu *g, int *n)
{
    if (g->a30) {
        *n = (int)(sizeof(prof44) / sizeof(prof44[0]));
        return prof44;
    }
    *n = (int)(sizeof(prof78) / sizeof(prof78[0]));
    return prof78;
}

static const struct fk_prof *prof_by(const struct fk_gpu *g, int index, unsigned id, bool by_id)
{
    int n;
    const struct fk_prof *ps = profiles(g, &n);

    for (int i = 0; i < n; i++) {
        if (by_id ? ps[i].id == id : ps[i].index == index)
            return &ps[i];
    }
    return NULL;
}

static unsigned long long prof_mib(const struct fk_gpu *g, const struct fk_prof *p)
{
    return g->mem_mib * (unsigned long long)p->mslices / (g->a30 ? 4u : 8u);
}

/* ---- MIG instances (config and API) -------------------------------------------- */

static nvmlReturn_t gi_create(struct fk_gpu *g, const struct fk_prof *p, unsigned start,
                              struct fk_gi **out)
{
    unsigned want = ((1u << p->mslices) - 1u) << start, used = 0, id = 1;
    int same = 0, all = 0, slot = -1;
    bool valid = false;

    for (int i = 0; i < p->nstarts; i++)
        valid = valid || (unsigned)p->starts[i] == start;
    if (!valid)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < MAX_GI; i++) {
        const struct fk_gi *o = &g->gi[i];

        if (!o->used) {
            if (slot < 0)
                slot = i;
            continue;
        }
        used |= ((1u << o->prof->mslices) - 1u) << o->start;
        same += o->prof == p;
        all++;
    }
    if ((used & want) || same >= p->max || all >= (g->a30 ? 4 : 7) || slot < 0)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    for (bool taken = true; taken; id += taken) {
        taken = false;
        for (int i = 0; i < MAX_GI; i++)
            taken = taken || (g->gi[i].used && g->gi[i].id == id);
    }
    memset(&g->gi[slot], 0, sizeof(g->gi[slot]));
    g->gi[slot] = (struct fk_gi){.used = true, .id = id, .prof = p, .start = start, .gpu = g};
    *out = &g->gi[slot];
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_create(struct fk_gi *gi, unsigned profile, struct fk_ci **out)
{
    int used = 0, slot = -1;
    unsigned id = 0;

    if (profile >= sizeof(ci_slices) / sizeof(ci_slices[0]) ||
        ci_slices[profile] > gi->prof->slices)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < MAX_CI; i++) {
        if (gi->ci[i].used)
            used += gi->ci[i].slices;
        else if (slot < 0)
            slot = i;
    }
    if (slot < 0 || used + ci_slices[profile] > gi->prof->slices)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    for (bool taken = true; taken; id += taken) {
        taken = false;
        for (int i = 0; i < MAX_CI; i++)
            taken = taken || (gi->ci[i].used && gi->ci[i].id == id);
    }
    gi->ci[slot] = (struct fk_ci){.h = {KIND_MIG},
                                  .used = true,
                                  .id = id,
                                  .profile = profile,
                                  .slices = ci_slices[profile],
                                  .gi = gi};
    snprintf(gi->ci[slot].uuid, sizeof(gi->ci[slot].uuid),
             "MIG-fa4e%04d-%04u-%04u-0000-000000000000", gi->gpu->index, gi->id, id);
    *out = &gi->ci[slot];
    return NVML_SUCCESS;
}

/* ---- config ------------------------------------------------------------------------ */

/* Splits line into at most max tokens; "..." groups spaces (quotes dropped). */
static int tokenize(char *line, char **tok, int max)
{
    int n = 0;
    char *r = line, *w;

    while (n < max) {
        while (*r == ' ' || *r == '\t')
            r++;
        if (!*r || *r == '#' || *r == '\n')
            break;
        tok[n++] = w = r;
        while (*r && *r != ' ' && *r != '\t' && *r != '\n') {
            if (*r == '"') {
                r++;
                while (*r && *r != '"')
                    *w++ = *r++;
                if (*r == '"')
                    r++;
            } else {
                *w++ = *r++;
            }
        }
        if (*r)
            r++;
        *w = '\0';
    }
    return n;
}

static const struct {
    const char *name;
    int code;
} codes[] = {
    {"NVML_ERROR_UNINITIALIZED", 1},
    {"NVML_ERROR_INVALID_ARGUMENT", 2},
    {"NVML_ERROR_NOT_SUPPORTED", 3},
    {"NVML_ERROR_NO_PERMISSION", 4},
    {"NVML_ERROR_NOT_FOUND", 6},
    {"NVML_ERROR_INSUFFICIENT_SIZE", 7},
    {"NVML_ERROR_DRIVER_NOT_LOADED", 9},
    {"NVML_ERROR_TIMEOUT", 10},
    {"NVML_ERROR_FUNCTION_NOT_FOUND", 13},
    {"NVML_ERROR_GPU_IS_LOST", 15},
    {"NVML_ERROR_IN_USE", 19},
    {"NVML_ERROR_INSUFFICIENT_RESOURCES", 23},
    {"NVML_ERROR_UNKNOWN", 999},
};

static int parse_code(const char *s)
{
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        if (strcmp(codes[i].name, s) == 0)
            return codes[i].code;
    }
    return (int)strtol(s, NULL, 0);
}

static struct fk_gpu *gpu_arg(const char *s)
{
    int i = (int)strtol(s, NULL, 10);

    return i >= 0 && i < S.n_gpus ? &S.gpus[i] : NULL;
}

static int add_procs(struct fk_gpu *g, unsigned n, unsigned pid, unsigned long long mib,
                     unsigned gi, unsigned ci)
{
    if (g->n_procs + n > g->cap_procs) {
        unsigned cap = (g->n_procs + n) * 2;
        struct fk_proc *p = realloc(g->procs, cap * sizeof(*p));

        if (!p)
            return -1;
        g->procs = p;
        g->cap_procs = cap;
    }
    for (unsigned i = 0; i < n; i++)
        g->procs[g->n_procs++] = (struct fk_proc){pid + i, mib << 20, gi, ci};
    if (pid + n > g->next_pid)
        g->next_pid = pid + n;
    return 0;
}

static int gpu_key(struct fk_gpu *g, const char *k, const char *v)
{
    unsigned long long n = strtoull(v, NULL, 0);

    if (!strcmp(k, "name")) {
        snprintf(g->name, sizeof(g->name), "%s", v);
        g->a30 = strstr(v, "A30") != NULL;
    } else if (!strcmp(k, "mem")) {
        g->mem_mib = n;
    } else if (!strcmp(k, "uuid")) {
        snprintf(g->uuid, sizeof(g->uuid), "%s", v);
    } else if (!strcmp(k, "bus")) {
        if (sscanf(v, "%x:%x:%x.0", &g->domain, &g->bus_no, &g->dev_no) != 3)
            return -1;
        snprintf(g->bus, sizeof(g->bus), "%08X:%02X:%02X.0", g->domain, g->bus_no, g->dev_no);
    } else if (!strcmp(k, "minor")) {
        g->minor = (int)n;
    } else if (!strcmp(k, "mig")) {
        g->mig = !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? 0 : -1;
        g->mig_pending = g->mig;
    } else if (!strcmp(k, "mig_pending_only")) {
        g->mig_pending_only = n != 0;
    } else if (!strcmp(k, "ecc")) {
        g->ecc_na = !strcmp(v, "na");
        g->ecc = n;
    } else if (!strcmp(k, "sbe")) {
        g->sbe = (unsigned)n;
    } else if (!strcmp(k, "dbe")) {
        g->dbe = (unsigned)n;
    } else if (!strcmp(k, "pages")) {
        g->pages_na = !strcmp(v, "na");
    } else if (!strcmp(k, "pages_pending")) {
        g->pages_pending = n != 0;
    } else if (!strcmp(k, "remap_corr")) {
        g->remap_corr = (unsigned)n;
    } else if (!strcmp(k, "remap_unc")) {
        g->remap_unc = (unsigned)n;
    } else if (!strcmp(k, "remap_pending")) {
        g->remap_pending = n != 0;
    } else if (!strcmp(k, "remap_failed")) {
        g->remap_failed = n != 0;
    } else if (!strcmp(k, "remap")) {
        g->remap_na = !strcmp(v, "na");
    } else if (!strcmp(k, "util_gpu")) {
        g->util_gpu = (unsigned)n;
    } else if (!strcmp(k, "util_mem")) {
        g->util_mem = (unsigned)n;
    } else if (!strcmp(k, "temp")) {
        g->temp = (unsigned)n;
    } else if (!strcmp(k, "energy")) {
        g->energy = n;
    } else if (!strcmp(k, "events")) {
        g->events = n != 0;
    } else if (!strcmp(k, "nvlinks")) {
        g->n_links = (int)(n > MAX_LINKS ? MAX_LINKS : n);
    } else {
        return -1;
    }
    return 0;
}

static int new_gpu(char **tok, int nt)
{
    struct fk_gpu *g;
    int i = S.n_gpus;

    if (i == MAX_GPUS)
        return -1;
    g = &S.gpus[S.n_gpus++];
    memset(g, 0, sizeof(*g));
    g->h.kind = KIND_GPU;
    g->index = i;
    snprintf(g->name, sizeof(g->name), "NVIDIA H100 80GB HBM3");
    g->mem_mib = 81559;
    snprintf(g->uuid, sizeof(g->uuid), "GPU-fa4e0000-0000-0000-0000-%012d", i);
    g->bus_no = 0x10u + (unsigned)i;
    snprintf(g->bus, sizeof(g->bus), "%08X:%02X:%02X.0", 0u, g->bus_no, 0u);
    g->minor = i;
    g->mig = g->mig_pending = -1;
    g->events = true;
    g->temp = 40;
    g->next_pid = 1000;
    for (int l = 0; l < MAX_LINKS; l++)
        g->link_peer[l] = LINK_OFF;
    for (int k = 1; k < nt; k++) {
        char *eq = strchr(tok[k], '=');

        if (!eq)
            return -1;
        *eq = '\0';
        if (gpu_key(g, tok[k], eq + 1) < 0)
            return -1;
    }
    return 0;
}

static int add_link(struct fk_gpu *g, int peer)
{
    if (g->n_links == 0)
        g->n_links = MAX_LINKS;
    for (int l = 0; l < g->n_links; l++) {
        if (g->link_peer[l] == LINK_OFF) {
            g->link_peer[l] = peer;
            return 0;
        }
    }
    return -1;
}

static int config_line(char **tok, int nt)
{
    struct fk_gpu *g = nt > 1 ? gpu_arg(tok[1]) : NULL;

    if (!strcmp(tok[0], "gpu"))
        return new_gpu(tok, nt);
    if (!strcmp(tok[0], "fail") && nt >= 4 && S.n_rules < MAX_RULES) {
        struct fk_rule *r = &S.rules[S.n_rules++];

        snprintf(r->fn, sizeof(r->fn), "%s", tok[1]);
        r->gpu = !strcmp(tok[2], "*") ? -1 : (int)strtol(tok[2], NULL, 10);
        r->code = parse_code(tok[3]);
        r->count = nt > 4 ? (int)strtol(tok[4], NULL, 10) : -1;
        return 0;
    }
    if (!g)
        return -1;
    if (!strcmp(tok[0], "gi") && nt >= 4) {
        const struct fk_prof *p = prof_by(g, (int)strtol(tok[2], NULL, 0), 0, false);
        struct fk_gi *gi;
        struct fk_ci *ci;

        if (!p || gi_create(g, p, (unsigned)strtoul(tok[3], NULL, 10), &gi) != NVML_SUCCESS)
            return -1;
        if (nt > 4 && !strcmp(tok[4], "noci"))
            return 0;
        for (unsigned k = 0; k < sizeof(ci_slices) / sizeof(ci_slices[0]); k++) {
            if (ci_slices[k] == p->slices)
                return ci_create(gi, k, &ci) == NVML_SUCCESS ? 0 : -1;
        }
        return -1;
    }
    if (!strcmp(tok[0], "nvlink") && nt >= 3) {
        struct fk_gpu *b = gpu_arg(tok[2]);
        int n = nt > 3 ? (int)strtol(tok[3], NULL, 10) : 1;

        if (!b || b == g)
            return -1;
        for (int i = 0; i < n; i++) {
            if (add_link(g, b->index) < 0 || add_link(b, g->index) < 0)
                return -1;
        }
        return 0;
    }
    if (!strcmp(tok[0], "nvswitch") && nt >= 3) {
        for (long i = strtol(tok[2], NULL, 10); i > 0; i--) {
            if (add_link(g, LINK_SWITCH) < 0)
                return -1;
        }
        return 0;
    }
    if (!strcmp(tok[0], "proc") && nt >= 4) {
        unsigned gi = nt > 5 ? (unsigned)strtoul(tok[4], NULL, 10) : NONE_ID;
        unsigned ci = nt > 5 ? (unsigned)strtoul(tok[5], NULL, 10) : NONE_ID;

        return add_procs(g, 1, (unsigned)strtoul(tok[2], NULL, 10), strtoull(tok[3], NULL, 10), gi,
                         ci);
    }
    if (!strcmp(tok[0], "procs") && nt >= 5)
        return add_procs(g, (unsigned)strtoul(tok[2], NULL, 10),
                         (unsigned)strtoul(tok[3], NULL, 10), strtoull(tok[4], NULL, 10), NONE_ID,
                         NONE_ID);
    if (!strcmp(tok[0], "grow") && nt >= 3) {
        g->grow = (unsigned)strtoul(tok[2], NULL, 10);
        return 0;
    }
    if (!strcmp(tok[0], "xid") && nt >= 3 && g->n_xid < MAX_XID) {
        g->xid[g->n_xid++] = strtoull(tok[2], NULL, 10);
        return 0;
    }
    return -1;
}

static void reset(void)
{
    for (int i = 0; i < S.n_gpus; i++)
        free(S.gpus[i].procs);
    memset(&S, 0, sizeof(S));
}

static nvmlReturn_t load_config(void)
{
    const char *path = getenv("FAKE_NVML_CONFIG");
    char line[512];
    int lineno = 0;
    FILE *f;

    reset();
    if (!path || !*path)
        return NVML_SUCCESS;
    f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "fake_nvml: cannot open %s\n", path);
        return NVML_ERROR_UNKNOWN;
    }
    while (fgets(line, sizeof(line), f)) {
        char *tok[16];
        int nt = tokenize(line, tok, 16);

        lineno++;
        if (nt > 0 && config_line(tok, nt) < 0) {
            fprintf(stderr, "fake_nvml: %s:%d: bad line\n", path, lineno);
            fclose(f);
            reset();
            return NVML_ERROR_UNKNOWN;
        }
    }
    fclose(f);
    return NVML_SUCCESS;
}

/* ---- library -------------------------------------------------------------------------- */

static nvmlReturn_t do_init(const char *fn)
{
    nvmlReturn_t rc;

    if (S.refs > 0) {
        FAIL(fn, -1);
        S.refs++;
        return NVML_SUCCESS;
    }
    rc = load_config();
    if (rc != NVML_SUCCESS)
        return rc;
    rc = injected(fn, -1);
    if (rc != NVML_SUCCESS) {
        reset();
        return rc;
    }
    S.refs = 1;
    return NVML_SUCCESS;
}

#define READY()                                                                                    \
    do {                                                                                           \
        if (S.refs == 0)                                                                           \
            return NVML_ERROR_UNINITIALIZED;                                                       \
    } while (0)

nvmlReturn_t nvmlInit(void)
{
    return do_init("nvmlInit");
}

nvmlReturn_t nvmlShutdown(void)
{
    READY();
    if (--S.refs == 0)
        reset();
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t rc)
{
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        if (codes[i].code == rc)
            return codes[i].name;
    }
    return rc == NVML_SUCCESS ? "Success" : "Unknown Error";
}

static nvmlReturn_t do_count(const char *fn, unsigned int *n)
{
    READY();
    FAIL(fn, -1);
    if (!n)
        return NVML_ERROR_INVALID_ARGUMENT;
    *n = (unsigned)S.n_gpus;
    return NVML_SUCCESS;
}

static nvmlReturn_t do_handle(const char *fn, unsigned int i, nvmlDevice_t *d)
{
    READY();
    FAIL(fn, (int)i);
    if (!d || i >= (unsigned)S.n_gpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    *d = &S.gpus[i].h;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *n)
{
    return do_count("nvmlDeviceGetCount", n);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d)
{
    return do_handle("nvmlDeviceGetHandleByIndex", i, d);
}

/* Fails unless d is a usable device; `mig_ok`: a MIG device handle will do. */
#define DEVICE(fn, d, mig_ok)                                                                      \
    struct fk_gpu *g = owner(d);                                                                   \
    READY();                                                                                       \
    if (!g || (!(mig_ok) && as_mig(d)))                                                            \
        return NVML_ERROR_INVALID_ARGUMENT;                                                        \
    FAIL(fn, g->index)

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
    DEVICE("nvmlDeviceGetName", d, true);
    if (!name || len < strlen(g->name) + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(name, g->name, strlen(g->name) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
    struct fk_ci *c = as_mig(d);
    const char *u;

    DEVICE("nvmlDeviceGetUUID", d, true);
    u = c ? c->uuid : g->uuid;
    if (!uuid || len < strlen(u) + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(uuid, u, strlen(u) + 1);
    return NVML_SUCCESS;
}

/* NVML's memory info of d; the v2 function calls it directly, as a driver
 * built with -Bsymbolic would (not through a preloaded hook) */
static nvmlReturn_t memory_info(nvmlDevice_t d, nvmlMemory_t *m)
{
    struct fk_ci *c = as_mig(d);
    unsigned long long used = 0;

    DEVICE("nvmlDeviceGetMemoryInfo", d, true);
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < g->n_procs; i++) {
        if (!c || (g->procs[i].gi == c->gi->id && g->procs[i].ci == c->id))
            used += g->procs[i].bytes;
    }
    m->total = (c ? prof_mib(g, c->gi->prof) : g->mem_mib) << 20;
    m->used = used;
    m->free = m->total > used ? m->total - used : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    return memory_info(d, m);
}

static void fill_pci(const struct fk_gpu *g, nvmlPciInfo_t *p, bool legacy_only)
{
    memset(p, 0, legacy_only ? 36 : sizeof(*p));
    snprintf(p->busIdLegacy, sizeof(p->busIdLegacy), "%04X:%02X:%02X.0", g->domain, g->bus_no,
             g->dev_no);
    p->domain = g->domain;
    p->bus = g->bus_no;
    p->device = g->dev_no;
    p->pciDeviceId = 0x233010DE;
    if (!legacy_only)
        snprintf(p->busId, sizeof(p->busId), "%s", g->bus);
}

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    DEVICE("nvmlDeviceGetPciInfo", d, false);
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    fill_pci(g, p, true); /* the old, shorter struct: busId[16] first */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor)
{
    DEVICE("nvmlDeviceGetMinorNumber", d, false);
    if (!minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *minor = (unsigned)g->minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    DEVICE("nvmlDeviceGetUtilizationRates", d, false);
    if (!u)
        return NVML_ERROR_INVALID_ARGUMENT;
    u->gpu = g->util_gpu;
    u->memory = g->util_mem;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
    DEVICE("nvmlDeviceGetTemperature", d, false);
    if (!t || sensor != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *t = g->temp;
    return NVML_SUCCESS;
}

#include "fake_nvml_procs.inc"

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, void *b)
{
    return procs("nvmlDeviceGetComputeRunningProcesses", d, n, b, sizeof(nvmlProcessInfo_v1_t));
}

#ifndef FAKE_NVML_MINIMAL

/* ---- the versioned names ---------------------------------------------------------------- */

nvmlReturn_t nvmlInit_v2(void)
{
    return do_init("nvmlInit_v2");
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    return do_count("nvmlDeviceGetCount_v2", n);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    return do_handle("nvmlDeviceGetHandleByIndex_v2", i, d);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    DEVICE("nvmlDeviceGetPciInfo_v3", d, false);
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    fill_pci(g, p, false);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, void *b)
{
    return procs("nvmlDeviceGetComputeRunningProcesses_v2", d, n, b, sizeof(nvmlProcessInfo_v2_t));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, void *b)
{
    return procs("nvmlDeviceGetComputeRunningProcesses_v3", d, n, b, sizeof(nvmlProcessInfo_v2_t));
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj)
{
    DEVICE("nvmlDeviceGetTotalEnergyConsumption", d, false);
    if (!mj)
        return NVML_ERROR_INVALID_ARGUMENT;
    *mj = g->energy;
    return NVML_SUCCESS;
}

/* ---- ECC, pages, rows -------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter,
                                         unsigned long long *n)
{
    DEVICE("nvmlDeviceGetTotalEccErrors", d, false);
    if (g->ecc_na)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!n || (type != 0 && type != 1) || (counter != 0 && counter != 1))
        return NVML_ERROR_INVALID_ARGUMENT;
    *n = type == 1 ? g->ecc : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned int *count,
                                       unsigned long long *addr)
{
    unsigned n, want;

    DEVICE("nvmlDeviceGetRetiredPages", d, false);
    if (g->pages_na)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!count || (cause != 0 && cause != 1))
        return NVML_ERROR_INVALID_ARGUMENT;
    n = cause == 0 ? g->sbe : g->dbe;
    want = *count;
    *count = n;
    if (want < n)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    for (unsigned i = 0; addr && i < n; i++)
        addr[i] = 0x1000ULL * (i + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, nvmlEnableState_t *p)
{
    DEVICE("nvmlDeviceGetRetiredPagesPendingStatus", d, false);
    if (g->pages_na)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    *p = g->pages_pending ? 1 : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failed)
{
    DEVICE("nvmlDeviceGetRemappedRows", d, false);
    if (g->remap_na)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!corr || !unc || !pending || !failed)
        return NVML_ERROR_INVALID_ARGUMENT;
    *corr = g->remap_corr;
    *unc = g->remap_unc;
    *pending = g->remap_pending;
    *failed = g->remap_failed;
    return NVML_SUCCESS;
}

/* ---- NVLink ---------------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, nvmlEnableState_t *on)
{
    DEVICE("nvmlDeviceGetNvLinkState", d, false);
    if (g->n_links == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!on || link >= (unsigned)g->n_links)
        return NVML_ERROR_INVALID_ARGUMENT;
    *on = g->link_peer[link] != LINK_OFF;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link,
                                                 nvmlPciInfo_t *p)
{
    DEVICE("nvmlDeviceGetNvLinkRemotePciInfo_v2", d, false);
    if (!p || link >= (unsigned)g->n_links || g->link_peer[link] == LINK_OFF)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g->link_peer[link] == LINK_SWITCH) {
        struct fk_gpu sw;

        memset(&sw, 0, sizeof(sw));
        sw.bus_no = 0xC0;
        snprintf(sw.bus, sizeof(sw.bus), "00000000:C0:00.0");
        fill_pci(&sw, p, false);
    } else {
        fill_pci(&S.gpus[g->link_peer[link]], p, false);
    }
    return NVML_SUCCESS;
}

/* ---- events -----------------------------------------------------------------------------------
 */

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    READY();
    FAIL("nvmlEventSetCreate", -1);
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    *set = calloc(1, sizeof(**set));
    return *set ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    READY();
    free(set);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *types)
{
    DEVICE("nvmlDeviceGetSupportedEventTypes", d, false);
    if (!types)
        return NVML_ERROR_INVALID_ARGUMENT;
    *types = g->events ? (XID_EVENT | 0x1ULL | 0x2ULL) : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set)
{
    DEVICE("nvmlDeviceRegisterEvents", d, false);
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->events)
        return NVML_ERROR_NOT_SUPPORTED;
    if (types & XID_EVENT)
        set->reg[g->index] = true;
    return NVML_SUCCESS;
}

static nvmlReturn_t event_wait(const char *fn, nvmlEventSet_t set, nvmlEventData_t *data, bool v2)
{
    READY();
    FAIL(fn, -1);
    if (!set || !data)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < S.n_gpus; i++) {
        struct fk_gpu *g = &S.gpus[i];

        if (!set->reg[i] || g->n_xid == 0)
            continue;
        data->device = &g->h;
        data->eventType = XID_EVENT;
        data->eventData = g->xid[0];
        if (v2)
            data->gpuInstanceId = data->computeInstanceId = NONE_ID;
        memmove(g->xid, g->xid + 1, (size_t)--g->n_xid * sizeof(g->xid[0]));
        return NVML_SUCCESS;
    }
    return NVML_ERROR_TIMEOUT;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int ms)
{
    return event_wait("nvmlEventSetWait_v2", set, data, true);
}

nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int ms)
{
    return event_wait("nvmlEventSetWait", set, data, false);
}

/* ---- MIG ----------------------------------------------------------------------------------------
 */

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pend)
{
    DEVICE("nvmlDeviceGetMigMode", d, false);
    if (g->mig < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!cur || !pend)
        return NVML_ERROR_INVALID_ARGUMENT;
    *cur = (unsigned)g->mig;
    *pend = (unsigned)g->mig_pending;
    return NVML_SUCCESS;
}

static bool has_instances(const struct fk_gpu *g)
{
    for (int i = 0; i < MAX_GI; i++) {
        if (g->gi[i].used)
            return true;
    }
    return false;
}

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t d, unsigned int mode, nvmlReturn_t *status)
{
    DEVICE("nvmlDeviceSetMigMode", d, false);
    if (g->mig < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!status || mode > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mode == 0 && has_instances(g))
        return NVML_ERROR_IN_USE;
    g->mig_pending = (int)mode;
    if (g->mig_pending_only) {
        *status = NVML_ERROR_IN_USE;
    } else {
        g->mig = (int)mode;
        *status = NVML_SUCCESS;
    }
    return NVML_SUCCESS;
}

static void fill_profile(const struct fk_gpu *g, const struct fk_prof *p,
                         nvmlGpuInstanceProfileInfo_t *info)
{
    memset(info, 0, sizeof(*info));
    info->id = p->id;
    info->isP2pSupported = 0;
    info->sliceCount = (unsigned)p->slices;
    info->instanceCount = (unsigned)p->max;
    info->multiprocessorCount = (unsigned)p->slices * 16;
    info->memorySizeMB = prof_mib(g, p);
}

/* The profile of constant k when MIG is on, or the NVML answer. */
static nvmlReturn_t profile_k(struct fk_gpu *g, unsigned int k, const struct fk_prof **p)
{
    if (g->mig != 1)
        return NVML_ERROR_NOT_SUPPORTED;
    if (k >= 0x11)
        return NVML_ERROR_INVALID_ARGUMENT;
    *p = prof_by(g, (int)k, 0, false);
    return *p ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t d, unsigned int k,
                                                 nvmlGpuInstanceProfileInfo_t *info)
{
    const struct fk_prof *p = NULL;
    nvmlReturn_t rc;

    DEVICE("nvmlDeviceGetGpuInstanceProfileInfo", d, false);
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = profile_k(g, k, &p);
    if (rc == NVML_SUCCESS)
        fill_profile(g, p, info);
    return rc;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t d, unsigned int k,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info)
{
    const struct fk_prof *p = NULL;
    nvmlGpuInstanceProfileInfo_t v1;
    nvmlReturn_t rc;

    DEVICE("nvmlDeviceGetGpuInstanceProfileInfoV", d, false);
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != PROFILE_V2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    rc = profile_k(g, k, &p);
    if (rc != NVML_SUCCESS)
        return rc;
    fill_profile(g, p, &v1);
    info->id = v1.id;
    info->isP2pSupported = v1.isP2pSupported;
    info->sliceCount = v1.sliceCount;
    info->instanceCount = v1.instanceCount;
    info->multiprocessorCount = v1.multiprocessorCount;
    info->memorySizeMB = v1.memorySizeMB;
    snprintf(info->name, sizeof(info->name), "MIG %dg.%llugb%s", p->slices,
             (v1.memorySizeMB + 512) / 1024, p->suffix);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t d, unsigned int id,
                                                           nvmlGpuInstancePlacement_t *pl,
                                                           unsigned int *count)
{
    const struct fk_prof *p;

    DEVICE("nvmlDeviceGetGpuInstancePossiblePlacements_v2", d, false);
    if (g->mig != 1)
        return NVML_ERROR_NOT_SUPPORTED;
    p = prof_by(g, 0, id, true);
    if (!p || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!pl) {
        *count = (unsigned)p->nstarts;
        return NVML_SUCCESS;
    }
    if (*count < (unsigned)p->nstarts) {
        *count = (unsigned)p->nstarts;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (int i = 0; i < p->nstarts; i++)
        pl[i] = (nvmlGpuInstancePlacement_t){(unsigned)p->starts[i], (unsigned)p->mslices};
    *count = (unsigned)p->nstarts;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t d, unsigned int id,
                                                      const nvmlGpuInstancePlacement_t *pl,
                                                      nvmlGpuInstance_t *gi)
{
    const struct fk_prof *p;

    DEVICE("nvmlDeviceCreateGpuInstanceWithPlacement", d, false);
    if (g->mig != 1)
        return NVML_ERROR_NOT_SUPPORTED;
    p = prof_by(g, 0, id, true);
    if (!p || !pl || !gi || pl->size != (unsigned)p->mslices)
        return NVML_ERROR_INVALID_ARGUMENT;
    return gi_create(g, p, pl->start, gi);
}

static bool live_gi(const struct fk_gi *gi)
{
    return gi && gi->used && S.refs > 0;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gi)
{
    READY();
    if (!live_gi(gi))
        return NVML_ERROR_INVALID_ARGUMENT;
    FAIL("nvmlGpuInstanceDestroy", gi->gpu->index);
    for (int i = 0; i < MAX_CI; i++) {
        if (gi->ci[i].used)
            return NVML_ERROR_IN_USE;
    }
    gi->used = false;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t d, unsigned int id, nvmlGpuInstance_t *out,
                                       unsigned int *count)
{
    unsigned n = 0;

    DEVICE("nvmlDeviceGetGpuInstances", d, false);
    if (g->mig != 1)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!out || !count || !prof_by(g, 0, id, true))
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < MAX_GI; i++) {
        if (g->gi[i].used && g->gi[i].prof->id == id) {
            if (n == *count)
                return NVML_ERROR_INSUFFICIENT_SIZE;
            out[n++] = &g->gi[i];
        }
    }
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t d, unsigned int id, nvmlGpuInstance_t *out)
{
    DEVICE("nvmlDeviceGetGpuInstanceById", d, false);
    if (g->mig != 1)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < MAX_GI; i++) {
        if (g->gi[i].used && g->gi[i].id == id) {
            *out = &g->gi[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t *info)
{
    READY();
    if (!live_gi(gi) || !info)
        return NVML_ERROR_INVALID_ARGUMENT;
    FAIL("nvmlGpuInstanceGetInfo", gi->gpu->index);
    info->device = &gi->gpu->h;
    info->id = gi->id;
    info->profileId = gi->prof->id;
    info->placement = (nvmlGpuInstancePlacement_t){gi->start, (unsigned)gi->prof->mslices};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gi, unsigned int k,
                                                          unsigned int eng,
                                                          nvmlComputeInstanceProfileInfo_t *info)
{
    READY();
    if (!live_gi(gi) || !info || eng != 0 || k >= sizeof(ci_slices) / sizeof(ci_slices[0]))
        return NVML_ERROR_INVALID_ARGUMENT;
    FAIL("nvmlGpuInstanceGetComputeInstanceProfileInfo", gi->gpu->index);
    if (ci_slices[k] > gi->prof->slices)
        return NVML_ERROR_NOT_SUPPORTED;
    memset(info, 0, sizeof(*info));
    info->id = k;
    info->sliceCount = (unsigned)ci_slices[k];
    info->instanceCount = (unsigned)(gi->prof->slices / ci_slices[k]);
    info->multiprocessorCount = (unsigned)ci_slices[k] * 16;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gi, unsigned int profile,
                                                  nvmlComputeInstance_t *ci)
{
    READY();
    if (!live_gi(gi) || !ci)
        return NVML_ERROR_INVALID_ARGUMENT;
    FAIL("nvmlGpuInstanceCreateComputeInstance", gi->gpu->index);
    return ci_create(gi, profile, ci);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gi, unsigned int profile,
                                                nvmlComputeInstance_t *out, unsigned int *count)
{
    unsigned n = 0;

    READY();
    if (!live_gi(gi) || !out || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    FAIL("nvmlGpuInstanceGetComputeInstances", gi->gpu->index);
    for (int i = 0; i < MAX_CI; i++) {
        if (gi->ci[i].used && gi->ci[i].profile == profile) {
            if (n == *count)
                return NVML_ERROR_INSUFFICIENT_SIZE;
            out[n++] = &gi->ci[i];
        }
    }
    *count = n;
    return NVML_SUCCESS;
}

static bool live_ci(const struct fk_ci *ci)
{
    return ci && ci->h.kind == KIND_MIG && ci->used && live_gi(ci->gi);
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t ci,
                                           nvmlComputeInstanceInfo_t *info)
{
    READY();
    if (!live_ci(ci) || !info)
        return NVML_ERROR_INVALID_ARGUMENT;
    FAIL("nvmlComputeInstanceGetInfo_v2", ci->gi->gpu->index);
    info->device = &ci->gi->gpu->h;
    info->gpuInstance = ci->gi;
    info->id = ci->id;
    info->profileId = ci->profile;
    info->placement = (nvmlGpuInstancePlacement_t){0, (unsigned)ci->slices};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t ci)
{
    struct fk_gpu *g;

    READY();
    if (!live_ci(ci))
        return NVML_ERROR_INVALID_ARGUMENT;
    g = ci->gi->gpu;
    FAIL("nvmlComputeInstanceDestroy", g->index);
    for (unsigned i = 0; i < g->n_procs; i++) {
        if (g->procs[i].gi == ci->gi->id && g->procs[i].ci == ci->id)
            return NVML_ERROR_IN_USE;
    }
    ci->used = false;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *count)
{
    DEVICE("nvmlDeviceGetMaxMigDeviceCount", d, false);
    if (g->mig < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = g->a30 ? 4 : 7;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index,
                                                 nvmlDevice_t *mig)
{
    unsigned n = 0;

    DEVICE("nvmlDeviceGetMigDeviceHandleByIndex", d, false);
    if (g->mig != 1)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < MAX_GI; i++) {
        for (int c = 0; g->gi[i].used && c < MAX_CI; c++) {
            if (g->gi[i].ci[c].used && n++ == index) {
                *mig = &g->gi[i].ci[c].h;
                return NVML_SUCCESS;
            }
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int *id)
{
    struct fk_ci *c = as_mig(d);

    DEVICE("nvmlDeviceGetGpuInstanceId", d, true);
    if (!c)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!id)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = c->gi->id;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned int *id)
{
    struct fk_ci *c = as_mig(d);

    DEVICE("nvmlDeviceGetComputeInstanceId", d, true);
    if (!c)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!id)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = c->id;
    return NVML_SUCCESS;
}

#endif /* !FAKE_NVML_MINIMAL */

/* what liballot-cuda.so's tests need beyond the agent's (its own file:
 * the file-size rule); part of this translation unit, it reads the state
 * above */
#include "fake_nvml_shim.inc"

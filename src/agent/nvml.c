/*
 * NVML client of allot-agent (nvml.h): NVIDIA's management library loaded
 * with dlopen(), every entry point resolved with dlsym(), so the agent has
 * no link-time dependency on the driver and a missing symbol only clears a
 * feature bit. This file: loading, discovery, sampling, Xid events and the
 * model-name mapping; MIG profiles and apply are in nvml_mig.c, the NVML
 * ABI declarations in nvml_int.h.
 *
 * Where NVIDIA versioned an entry point, the newest stable one is tried
 * first (nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
 * nvmlDeviceGetPciInfo_v3, nvmlEventSetWait_v2, ...), then the plain name.
 * The process lists are the exception: nvmlDeviceGetComputeRunningProcesses_v2
 * comes first, because some R535 drivers write 32-byte entries through _v3
 * (a struct NVIDIA later reverted); _v3 is used only without _v2, with a
 * buffer of 32 bytes per entry so that even those drivers cannot overrun it.
 *
 * Error policy of discovery (nvml_devices): a failing identity call (handle,
 * name, UUID, memory) or NVML_ERROR_GPU_IS_LOST makes the GPU unhealthy;
 * volatile uncorrectable ECC errors and a row-remapping failure too.
 * Optional features answer NOT_SUPPORTED or FUNCTION_NOT_FOUND quietly
 * (bit cleared); any other error clears the bit and degrades the GPU with a
 * text naming the call. The library never prints (ALLOT_LOG only).
 *
 * State: struct nvml (nvml_int.h) owns the dlopen handle, the resolved
 * table, the Xid event set, the device handles seen at open (to map events
 * to indexes), a reusable process-list buffer and the last error text. One
 * thread at a time.
 */
#include "nvml_int.h"

#include "allot/common.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define PROC_STRIDE 32 /* bytes per process entry allocated (see above) */
#define PROC_TRIES  5  /* process-list reads while the list keeps growing */

/* Each slot with the names tried, newest first. */
static const struct {
    size_t off;
    const char *names[3];
} syms[] = {
#define SYM(field, ...)                                                                            \
    {                                                                                              \
        offsetof(struct nvml_fns, field),                                                          \
        {                                                                                          \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    }
    SYM(init, "nvmlInit_v2", "nvmlInit"),
    SYM(shutdown, "nvmlShutdown"),
    SYM(count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"),
    SYM(handle, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"),
    SYM(name, "nvmlDeviceGetName"),
    SYM(uuid, "nvmlDeviceGetUUID"),
    SYM(memory, "nvmlDeviceGetMemoryInfo"),
    SYM(pci, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"),
    SYM(pci_legacy, "nvmlDeviceGetPciInfo"),
    SYM(minor, "nvmlDeviceGetMinorNumber"),
    SYM(mig_mode, "nvmlDeviceGetMigMode"),
    SYM(set_mig_mode, "nvmlDeviceSetMigMode"),
    SYM(gi_profile_v, "nvmlDeviceGetGpuInstanceProfileInfoV"),
    SYM(gi_profile, "nvmlDeviceGetGpuInstanceProfileInfo"),
    SYM(gi_placements, "nvmlDeviceGetGpuInstancePossiblePlacements_v2"),
    SYM(gi_list, "nvmlDeviceGetGpuInstances"),
    SYM(gi_by_id, "nvmlDeviceGetGpuInstanceById"),
    SYM(gi_info, "nvmlGpuInstanceGetInfo"),
    SYM(gi_create, "nvmlDeviceCreateGpuInstanceWithPlacement"),
    SYM(gi_destroy, "nvmlGpuInstanceDestroy"),
    SYM(ci_profile, "nvmlGpuInstanceGetComputeInstanceProfileInfo"),
    SYM(ci_create, "nvmlGpuInstanceCreateComputeInstance"),
    SYM(ci_list, "nvmlGpuInstanceGetComputeInstances"),
    SYM(ci_info, "nvmlComputeInstanceGetInfo_v2", "nvmlComputeInstanceGetInfo"),
    SYM(ci_destroy, "nvmlComputeInstanceDestroy"),
    SYM(mig_count, "nvmlDeviceGetMaxMigDeviceCount"),
    SYM(mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex"),
    SYM(mig_gi_id, "nvmlDeviceGetGpuInstanceId"),
    SYM(mig_ci_id, "nvmlDeviceGetComputeInstanceId"),
    SYM(link_state, "nvmlDeviceGetNvLinkState"),
    SYM(link_remote, "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"),
    SYM(ecc, "nvmlDeviceGetTotalEccErrors"),
    SYM(retired, "nvmlDeviceGetRetiredPages"),
    SYM(retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus"),
    SYM(remapped, "nvmlDeviceGetRemappedRows"),
    SYM(util, "nvmlDeviceGetUtilizationRates"),
    SYM(energy, "nvmlDeviceGetTotalEnergyConsumption"),
    SYM(temp, "nvmlDeviceGetTemperature"),
    SYM(procs_v2, "nvmlDeviceGetComputeRunningProcesses_v2"),
    SYM(procs_v3, "nvmlDeviceGetComputeRunningProcesses_v3"),
    SYM(procs_v1, "nvmlDeviceGetComputeRunningProcesses"),
    SYM(ev_create, "nvmlEventSetCreate"),
    SYM(ev_free, "nvmlEventSetFree"),
    SYM(ev_types, "nvmlDeviceGetSupportedEventTypes"),
    SYM(ev_register, "nvmlDeviceRegisterEvents"),
    SYM(ev_wait, "nvmlEventSetWait_v2", "nvmlEventSetWait"),
#undef SYM
};

/* ---- texts ------------------------------------------------------------------- */

/* "Unknown Error (NVML_ERROR_UNKNOWN)": our own table, so texts do not
 * depend on nvmlErrorString being there. */
const char *nvml__rc_text(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_SUCCESS:
        return "Success (NVML_SUCCESS)";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized (NVML_ERROR_UNINITIALIZED)";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument (NVML_ERROR_INVALID_ARGUMENT)";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported (NVML_ERROR_NOT_SUPPORTED)";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions (NVML_ERROR_NO_PERMISSION)";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found (NVML_ERROR_NOT_FOUND)";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size (NVML_ERROR_INSUFFICIENT_SIZE)";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded (NVML_ERROR_DRIVER_NOT_LOADED)";
    case NVML_ERROR_TIMEOUT:
        return "Timeout (NVML_ERROR_TIMEOUT)";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return "NVML Shared Library Not Found (NVML_ERROR_LIBRARY_NOT_FOUND)";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return "Function Not Found (NVML_ERROR_FUNCTION_NOT_FOUND)";
    case NVML_ERROR_CORRUPTED_INFOROM:
        return "Corrupted infoROM (NVML_ERROR_CORRUPTED_INFOROM)";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost (NVML_ERROR_GPU_IS_LOST)";
    case NVML_ERROR_RESET_REQUIRED:
        return "GPU requires reset (NVML_ERROR_RESET_REQUIRED)";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "Driver/library version mismatch (NVML_ERROR_LIB_RM_VERSION_MISMATCH)";
    case NVML_ERROR_IN_USE:
        return "In use by another client (NVML_ERROR_IN_USE)";
    case NVML_ERROR_MEMORY:
        return "Insufficient Memory (NVML_ERROR_MEMORY)";
    case NVML_ERROR_NO_DATA:
        return "No data (NVML_ERROR_NO_DATA)";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return "Insufficient resources (NVML_ERROR_INSUFFICIENT_RESOURCES)";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return "Argument version mismatch (NVML_ERROR_ARGUMENT_VERSION_MISMATCH)";
    case NVML_ERROR_UNKNOWN:
        return "Unknown Error (NVML_ERROR_UNKNOWN)";
    default:
        return "NVML error";
    }
}

void nvml__set_err(struct nvml *nv, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(nv->err, sizeof(nv->err), fmt, ap);
    va_end(ap);
    ALLOT_LOG(ALLOT_LOG_DEBUG, "nvml", "%s", nv->err);
}

/* Records the failed call `call` with code rc; returns the ALLOT_E* code
 * it maps to. */
int nvml__fail_call(struct nvml *nv, const char *call, nvmlReturn_t rc)
{
    nvml__set_err(nv, "%s: %s", call, nvml__rc_text(rc));
    switch (rc) {
    case NVML_ERROR_INVALID_ARGUMENT:
        return ALLOT_EINVAL;
    case NVML_ERROR_NOT_FOUND:
        return ALLOT_ENOENT;
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return ALLOT_ENOSPC;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_IN_USE:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return ALLOT_ESTATE;
    case NVML_ERROR_MEMORY:
        return ALLOT_ENOMEM;
    default:
        return ALLOT_EIO;
    }
}

/* Adds reason `fmt` to the GPU's health text and raises its verdict to
 * at least `level`. */
void nvml__health_add(struct nvml_gpu *g, enum allot_nvml_health level, const char *fmt, ...)
{
    size_t len = strlen(g->health_text);
    va_list ap;

    if (level > g->health)
        g->health = level;
    if (len > 0 && len + 2 < sizeof(g->health_text)) {
        memcpy(g->health_text + len, "; ", 3);
        len += 2;
    }
    if (len + 1 >= sizeof(g->health_text))
        return;
    va_start(ap, fmt);
    vsnprintf(g->health_text + len, sizeof(g->health_text) - len, fmt, ap);
    va_end(ap);
}

/*
 * The answer of an optional query: true on success. NOT_SUPPORTED and
 * FUNCTION_NOT_FOUND mean "this GPU or driver lacks it" and pass quietly;
 * a lost GPU is unhealthy; anything else degrades the GPU, naming the call.
 */
bool nvml__optional_ok(struct nvml_gpu *g, const char *call, nvmlReturn_t rc)
{
    if (rc == NVML_SUCCESS)
        return true;
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND)
        return false;
    if (rc == NVML_ERROR_GPU_IS_LOST)
        g->lost = true;
    nvml__health_add(g, rc == NVML_ERROR_GPU_IS_LOST ? ALLOT_NVML_UNHEALTHY : ALLOT_NVML_DEGRADED,
                     "%s: %s", call, nvml__rc_text(rc));
    return false;
}

static bool lost(const struct nvml_gpu *g)
{
    return g->lost;
}

/* ---- open and close ------------------------------------------------------ */

static void resolve(struct nvml *nv)
{
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *p = NULL;

        for (int k = 0; k < 3 && syms[i].names[k] && !p; k++)
            p = dlsym(nv->dl, syms[i].names[k]);
        /* POSIX guarantees that a dlsym result converts to a function
         * pointer; copy it into the slot as the object pointer it is. */
        memcpy((char *)&nv->f + syms[i].off, &p, sizeof(p));
    }
    nv->pci_from_legacy = !nv->f.pci && nv->f.pci_legacy;
    if (!nv->f.pci)
        nv->f.pci = nv->f.pci_legacy;
    if (nv->f.gi_create && nv->f.gi_destroy && nv->f.gi_by_id && nv->f.gi_info &&
        (nv->f.gi_profile_v || nv->f.gi_profile) && nv->f.ci_profile && nv->f.ci_create &&
        nv->f.ci_list && nv->f.ci_destroy && nv->f.set_mig_mode && nv->f.mig_mode)
        nv->features |= ALLOT_NVML_F_MIG_APPLY;
}

/* Creates the Xid event set and registers every GPU that supports Xid
 * events. Failures only leave events off (logged). */
static int events_open(struct nvml *nv)
{
    unsigned int n = 0;
    nvmlReturn_t rc;

    if (!nv->f.ev_create || !nv->f.ev_register || !nv->f.ev_wait || !nv->f.count || !nv->f.handle)
        return 0;
    if (nv->f.count(&n) != NVML_SUCCESS)
        return 0;
    if (n > 0) {
        nv->ev_devs = allot_calloc(n, sizeof(nvmlDevice_t));
        nv->xid_on = allot_calloc(n, sizeof(*nv->xid_on));
        if (!nv->ev_devs || !nv->xid_on)
            return ALLOT_ENOMEM;
    }
    nv->n_ev_devs = (int)n;
    rc = nv->f.ev_create(&nv->events);
    if (rc != NVML_SUCCESS) {
        nv->events = NULL;
        ALLOT_LOG(ALLOT_LOG_INFO, "nvml", "no Xid events: nvmlEventSetCreate: %s",
                  nvml__rc_text(rc));
        return 0;
    }
    nv->features |= ALLOT_NVML_F_EVENTS;
    for (unsigned int i = 0; i < n; i++) {
        unsigned long long types = nvmlEventTypeXidCriticalError;

        if (nv->f.handle(i, &nv->ev_devs[i]) != NVML_SUCCESS) {
            nv->ev_devs[i] = NULL;
            continue;
        }
        if (nv->f.ev_types && nv->f.ev_types(nv->ev_devs[i], &types) != NVML_SUCCESS)
            types = 0;
        if (!(types & nvmlEventTypeXidCriticalError))
            continue;
        rc = nv->f.ev_register(nv->ev_devs[i], nvmlEventTypeXidCriticalError, nv->events);
        nv->xid_on[i] = rc == NVML_SUCCESS;
        if (rc != NVML_SUCCESS)
            ALLOT_LOG(ALLOT_LOG_INFO, "nvml", "GPU %u: no Xid events: %s", i, nvml__rc_text(rc));
    }
    return 0;
}

struct nvml *nvml_open(const char *lib, char *err, size_t errlen)
{
    struct nvml *nv;
    const char *what;
    nvmlReturn_t rc;
    int r;

    if (!lib)
        lib = ALLOT_NVML_DEFAULT_LIB;
    nv = allot_calloc(1, sizeof(*nv));
    if (!nv) {
        allot_fmt(err, errlen, "NVML: out of memory");
        return NULL;
    }
    nv->dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!nv->dl) {
        what = dlerror();
        allot_fmt(err, errlen, "NVML: cannot load %s: %s", lib, what ? what : "dlopen failed");
        goto free_nv;
    }
    resolve(nv);
    if (!nv->f.init || !nv->f.shutdown) {
        allot_fmt(err, errlen, "NVML: %s has no nvmlInit_v2/nvmlInit or nvmlShutdown", lib);
        goto close_dl;
    }
    rc = nv->f.init();
    if (rc != NVML_SUCCESS) {
        allot_fmt(err, errlen, "NVML: nvmlInit failed: %s", nvml__rc_text(rc));
        goto close_dl;
    }
    r = events_open(nv);
    if (r < 0) {
        allot_fmt(err, errlen, "NVML: %s", allot_strerror(r));
        nvml_close(nv);
        return NULL;
    }
    return nv;

close_dl:
    dlclose(nv->dl);
free_nv:
    allot_free(nv);
    return NULL;
}

void nvml_close(struct nvml *nv)
{
    if (!nv)
        return;
    if (nv->events && nv->f.ev_free)
        nv->f.ev_free(nv->events);
    nv->f.shutdown();
    dlclose(nv->dl);
    allot_free(nv->ev_devs);
    allot_free(nv->xid_on);
    allot_free(nv->procs);
    allot_free(nv);
}

bool nvml_has(const struct nvml *nv, unsigned feature)
{
    return nv && (nv->features & feature) == feature;
}

const char *nvml_last_error(const struct nvml *nv)
{
    return nv ? nv->err : "no NVML";
}

/* ---- discovery ---------------------------------------------------------------- */

/* The PCI address of one GPU, numerically, for matching NVLink peers. */
struct pci_addr {
    bool known;
    unsigned domain, bus, device;
};

static void read_nvlink(struct nvml *nv, nvmlDevice_t dev, struct nvml_gpu *g,
                        struct pci_addr *peer_addr)
{
    if (!nv->f.link_state || !nv->f.link_remote)
        return;
    for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; link++) {
        nvmlEnableState_t active = NVML_FEATURE_DISABLED;
        nvmlPciInfo_t pci;
        nvmlReturn_t rc = nv->f.link_state(dev, link, &active);
        int p;

        /* links past the GPU's last answer INVALID_ARGUMENT */
        if (rc == NVML_ERROR_INVALID_ARGUMENT && link > 0)
            break;
        if (!nvml__optional_ok(g, "nvmlDeviceGetNvLinkState", rc))
            return;
        g->supported |= ALLOT_NVML_F_NVLINK;
        if (active != NVML_FEATURE_ENABLED)
            continue;
        memset(&pci, 0, sizeof(pci));
        rc = nv->f.link_remote(dev, link, &pci);
        if (!nvml__optional_ok(g, "nvmlDeviceGetNvLinkRemotePciInfo", rc))
            continue;
        pci.busId[sizeof(pci.busId) - 1] = '\0';
        for (p = 0; p < g->n_peers; p++) {
            if (peer_addr[p].domain == pci.domain && peer_addr[p].bus == pci.bus &&
                peer_addr[p].device == pci.device)
                break;
        }
        if (p == g->n_peers) {
            if (g->n_peers == ALLOT_NVML_MAX_PEERS)
                continue;
            g->n_peers++;
            allot_strlcpy(g->peers[p].bus_id, pci.busId, sizeof(g->peers[p].bus_id));
            g->peers[p].index = -1;
            peer_addr[p] = (struct pci_addr){true, pci.domain, pci.bus, pci.device};
        }
        g->peers[p].links++;
    }
}

static void read_ecc_and_pages(struct nvml *nv, nvmlDevice_t dev, struct nvml_gpu *g)
{
    unsigned long long ecc = 0;
    nvmlReturn_t rc;

    if (nv->f.ecc) {
        rc = nv->f.ecc(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc);
        if (nvml__optional_ok(g, "nvmlDeviceGetTotalEccErrors", rc)) {
            g->supported |= ALLOT_NVML_F_ECC;
            g->ecc_uncorrected = ecc;
            if (ecc > 0)
                nvml__health_add(g, ALLOT_NVML_UNHEALTHY, "%llu volatile uncorrectable ECC errors",
                                 ecc);
        }
    }
    if (nv->f.retired && !lost(g)) {
        unsigned int sbe = 0, dbe = 0;
        nvmlReturn_t r1, r2;

        /* a zero-sized buffer asks for the count; INSUFFICIENT_SIZE also
         * reports it */
        r1 = nv->f.retired(dev, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, &sbe,
                           NULL);
        if (r1 == NVML_ERROR_INSUFFICIENT_SIZE)
            r1 = NVML_SUCCESS;
        if (nvml__optional_ok(g, "nvmlDeviceGetRetiredPages", r1)) {
            r2 = nv->f.retired(dev, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &dbe, NULL);
            if (r2 == NVML_ERROR_INSUFFICIENT_SIZE)
                r2 = NVML_SUCCESS;
            if (nvml__optional_ok(g, "nvmlDeviceGetRetiredPages", r2)) {
                g->supported |= ALLOT_NVML_F_RETIRED_PAGES;
                g->retired_sbe = sbe;
                g->retired_dbe = dbe;
            }
        }
        if ((g->supported & ALLOT_NVML_F_RETIRED_PAGES) && nv->f.retired_pending) {
            nvmlEnableState_t pending = NVML_FEATURE_DISABLED;

            rc = nv->f.retired_pending(dev, &pending);
            if (nvml__optional_ok(g, "nvmlDeviceGetRetiredPagesPendingStatus", rc) &&
                pending == NVML_FEATURE_ENABLED) {
                g->retired_pending = true;
                nvml__health_add(g, ALLOT_NVML_DEGRADED, "page retirement pending (reset needed)");
            }
        }
    }
    if (nv->f.remapped && !lost(g)) {
        unsigned int corr = 0, unc = 0, pending = 0, failed = 0;

        rc = nv->f.remapped(dev, &corr, &unc, &pending, &failed);
        if (nvml__optional_ok(g, "nvmlDeviceGetRemappedRows", rc)) {
            g->supported |= ALLOT_NVML_F_REMAPPED_ROWS;
            g->remapped_corr = corr;
            g->remapped_unc = unc;
            g->remap_pending = pending != 0;
            g->remap_failed = failed != 0;
            if (g->remap_failed)
                nvml__health_add(g, ALLOT_NVML_UNHEALTHY, "row remapping failed");
            else if (g->remap_pending)
                nvml__health_add(g, ALLOT_NVML_DEGRADED, "row remapping pending (reset needed)");
        }
    }
}

/* Identity: a failure here makes the GPU unhealthy. Returns false when
 * the rest cannot be read (no handle, GPU lost). */
static bool read_identity(struct nvml *nv, nvmlDevice_t dev, struct nvml_gpu *g)
{
    nvmlMemory_t mem;
    nvmlReturn_t rc;

    rc = nv->f.name ? nv->f.name(dev, g->name, sizeof(g->name)) : NVML_ERROR_FUNCTION_NOT_FOUND;
    g->name[sizeof(g->name) - 1] = '\0';
    if (rc != NVML_SUCCESS) {
        g->name[0] = '\0';
        nvml__health_add(g, ALLOT_NVML_UNHEALTHY, "nvmlDeviceGetName: %s", nvml__rc_text(rc));
    }
    if (rc != NVML_ERROR_GPU_IS_LOST) {
        rc = nv->f.uuid ? nv->f.uuid(dev, g->uuid, sizeof(g->uuid)) : NVML_ERROR_FUNCTION_NOT_FOUND;
        g->uuid[sizeof(g->uuid) - 1] = '\0';
        if (rc != NVML_SUCCESS) {
            g->uuid[0] = '\0';
            nvml__health_add(g, ALLOT_NVML_UNHEALTHY, "nvmlDeviceGetUUID: %s", nvml__rc_text(rc));
        }
    }
    if (rc != NVML_ERROR_GPU_IS_LOST) {
        memset(&mem, 0, sizeof(mem));
        rc = nv->f.memory ? nv->f.memory(dev, &mem) : NVML_ERROR_FUNCTION_NOT_FOUND;
        if (rc == NVML_SUCCESS)
            g->memory_mib = nvml__mib(mem.total);
        else
            nvml__health_add(g, ALLOT_NVML_UNHEALTHY, "nvmlDeviceGetMemoryInfo: %s",
                             nvml__rc_text(rc));
    }
    if (rc == NVML_ERROR_GPU_IS_LOST)
        g->lost = true;
    return !g->lost;
}

static void read_gpu(struct nvml *nv, int index, struct nvml_gpu *g, struct pci_addr *self,
                     struct pci_addr peer_addr[ALLOT_NVML_MAX_PEERS])
{
    nvmlDevice_t dev = NULL;
    nvmlReturn_t rc;

    memset(g, 0, sizeof(*g));
    g->index = index;
    g->minor = -1;
    g->mig_current = g->mig_pending = -1;
    rc = nv->f.handle((unsigned int)index, &dev);
    if (rc != NVML_SUCCESS) {
        g->lost = rc == NVML_ERROR_GPU_IS_LOST;
        nvml__health_add(g, ALLOT_NVML_UNHEALTHY, "nvmlDeviceGetHandleByIndex: %s",
                         nvml__rc_text(rc));
        goto done;
    }
    if (!read_identity(nv, dev, g))
        goto done;
    if (nv->f.pci) {
        nvmlPciInfo_t pci;

        memset(&pci, 0, sizeof(pci));
        rc = nv->f.pci(dev, &pci);
        if (nvml__optional_ok(g, "nvmlDeviceGetPciInfo", rc)) {
            pci.busId[sizeof(pci.busId) - 1] = '\0';
            pci.busIdLegacy[sizeof(pci.busIdLegacy) - 1] = '\0';
            allot_strlcpy(g->bus_id,
                          nv->pci_from_legacy || !pci.busId[0] ? pci.busIdLegacy : pci.busId,
                          sizeof(g->bus_id));
            g->supported |= ALLOT_NVML_F_PCI;
            *self = (struct pci_addr){true, pci.domain, pci.bus, pci.device};
        }
    }
    if (nv->f.minor && !lost(g)) {
        unsigned int minor = 0;

        if (nvml__optional_ok(g, "nvmlDeviceGetMinorNumber", nv->f.minor(dev, &minor))) {
            g->minor = (int)minor;
            g->supported |= ALLOT_NVML_F_MINOR;
        }
    }
    if (nv->f.mig_mode && !lost(g)) {
        unsigned int cur = 0, pend = 0;

        if (nvml__optional_ok(g, "nvmlDeviceGetMigMode", nv->f.mig_mode(dev, &cur, &pend))) {
            g->mig_current = cur == NVML_DEVICE_MIG_ENABLE;
            g->mig_pending = pend == NVML_DEVICE_MIG_ENABLE;
            g->supported |= ALLOT_NVML_F_MIG;
            if (g->mig_current == 1)
                nvml__read_mig_instances(nv, dev, g);
        }
    }
    if (!lost(g))
        read_nvlink(nv, dev, g, peer_addr);
    if (!lost(g))
        read_ecc_and_pages(nv, dev, g);
    if (index < nv->n_ev_devs && nv->xid_on[index])
        g->supported |= ALLOT_NVML_F_XID;
done:
    if (g->health_text[0] == '\0')
        allot_strlcpy(g->health_text, "ok", sizeof(g->health_text));
}

int nvml_devices(struct nvml *nv, struct nvml_gpu *out, int max)
{
    struct pci_addr *self, (*peers)[ALLOT_NVML_MAX_PEERS];
    unsigned int n = 0;
    nvmlReturn_t rc;
    int kept;

    if (!nv->f.count || !nv->f.handle) {
        nvml__set_err(nv, "NVML: no nvmlDeviceGetCount or nvmlDeviceGetHandleByIndex");
        return ALLOT_EIO;
    }
    rc = nv->f.count(&n);
    if (rc != NVML_SUCCESS)
        return nvml__fail_call(nv, "nvmlDeviceGetCount", rc) == ALLOT_ENOMEM ? ALLOT_ENOMEM
                                                                             : ALLOT_EIO;
    kept = max < 0 ? 0 : ((int)n < max ? (int)n : max);
    if (kept == 0)
        return (int)n;
    self = allot_calloc((size_t)kept, sizeof(*self));
    peers = allot_calloc((size_t)kept, sizeof(*peers));
    if (!self || !peers) {
        allot_free(self);
        allot_free(peers);
        nvml__set_err(nv, "NVML: out of memory");
        return ALLOT_ENOMEM;
    }
    for (int i = 0; i < kept; i++)
        read_gpu(nv, i, &out[i], &self[i], peers[i]);
    /* NVLink peers that are GPUs of this node get their index */
    for (int i = 0; i < kept; i++) {
        for (int p = 0; p < out[i].n_peers; p++) {
            for (int j = 0; j < kept; j++) {
                if (j != i && self[j].known && self[j].domain == peers[i][p].domain &&
                    self[j].bus == peers[i][p].bus && self[j].device == peers[i][p].device) {
                    out[i].peers[p].index = j;
                    break;
                }
            }
        }
    }
    allot_free(self);
    allot_free(peers);
    return (int)n;
}

/* ---- sampling ----------------------------------------------------------------- */

/* Reads the compute processes of dev into out. Returns 0, or ALLOT_ENOMEM;
 * an NVML failure only leaves ALLOT_NVML_F_PROCS out. */
static int read_procs(struct nvml *nv, nvmlDevice_t dev, struct nvml_sample *out)
{
    nvmlReturn_t (*fn)(nvmlDevice_t, unsigned int *, void *);
    const char *call;
    size_t stride;
    unsigned int want = nv->procs_cap > 0 ? (unsigned int)nv->procs_cap : 32;
    unsigned int n = 0;
    nvmlReturn_t rc = NVML_ERROR_INSUFFICIENT_SIZE;

    if (nv->f.procs_v2) {
        fn = nv->f.procs_v2;
        call = "nvmlDeviceGetComputeRunningProcesses_v2";
        stride = sizeof(nvmlProcessInfo_v2_t);
    } else if (nv->f.procs_v3) {
        fn = nv->f.procs_v3;
        call = "nvmlDeviceGetComputeRunningProcesses_v3";
        stride = sizeof(nvmlProcessInfo_v2_t);
    } else if (nv->f.procs_v1) {
        fn = nv->f.procs_v1;
        call = "nvmlDeviceGetComputeRunningProcesses";
        stride = sizeof(nvmlProcessInfo_v1_t);
    } else {
        return 0;
    }
    /* The list may grow between the call that sized it and the next one:
     * retry a few times, with some room to spare. */
    for (int tries = 0; tries < PROC_TRIES && rc == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
        if (want > nv->procs_cap) {
            void *p = allot_realloc(nv->procs, (size_t)want * PROC_STRIDE);

            if (!p) {
                nvml__set_err(nv, "NVML: out of memory for %u processes", want);
                return ALLOT_ENOMEM;
            }
            nv->procs = p;
            nv->procs_cap = want;
        }
        n = (unsigned int)nv->procs_cap;
        rc = fn(dev, &n, nv->procs);
        if (rc == NVML_ERROR_INSUFFICIENT_SIZE)
            want = (n > want ? n : want) + (n > want ? n : want) / 4 + 8;
    }
    if (rc != NVML_SUCCESS) {
        nvml__set_err(nv, "%s: %s", call, nvml__rc_text(rc));
        return 0;
    }
    if (n > nv->procs_cap)
        n = (unsigned int)nv->procs_cap; /* a library that claims more than it wrote */
    out->supported |= ALLOT_NVML_F_PROCS;
    out->n_procs = (int)n;
    for (unsigned int i = 0; i < n && out->n_procs_kept < ALLOT_NVML_MAX_PROCS; i++) {
        const char *e = (const char *)nv->procs + (size_t)i * stride;
        struct nvml_proc *pr = &out->procs[out->n_procs_kept++];

        if (stride == sizeof(nvmlProcessInfo_v1_t)) {
            nvmlProcessInfo_v1_t v;

            memcpy(&v, e, sizeof(v));
            pr->pid = v.pid;
            pr->used_bytes = v.usedGpuMemory == (unsigned long long)NVML_VALUE_NOT_AVAILABLE
                                 ? -1
                                 : (int64_t)v.usedGpuMemory;
            pr->gi_id = pr->ci_id = -1;
        } else {
            nvmlProcessInfo_v2_t v;

            memcpy(&v, e, sizeof(v));
            pr->pid = v.pid;
            pr->used_bytes = v.usedGpuMemory == (unsigned long long)NVML_VALUE_NOT_AVAILABLE
                                 ? -1
                                 : (int64_t)v.usedGpuMemory;
            pr->gi_id = nvml__id_or_none(v.gpuInstanceId);
            pr->ci_id = nvml__id_or_none(v.computeInstanceId);
        }
    }
    return 0;
}

/* Handle of GPU `index`, or an ALLOT_E* code with the message set. */
int nvml__device(struct nvml *nv, int index, nvmlDevice_t *dev)
{
    nvmlReturn_t rc;

    if (!nv->f.handle) {
        nvml__set_err(nv, "NVML: no nvmlDeviceGetHandleByIndex");
        return ALLOT_EIO;
    }
    if (index < 0) {
        nvml__set_err(nv, "NVML: no GPU %d", index);
        return ALLOT_ENOENT;
    }
    rc = nv->f.handle((unsigned int)index, dev);
    if (rc == NVML_ERROR_INVALID_ARGUMENT || rc == NVML_ERROR_NOT_FOUND) {
        nvml__set_err(nv, "NVML: no GPU %d", index);
        return ALLOT_ENOENT;
    }
    if (rc != NVML_SUCCESS) {
        nvml__set_err(nv, "GPU %d: nvmlDeviceGetHandleByIndex: %s", index, nvml__rc_text(rc));
        return ALLOT_EIO;
    }
    return 0;
}

/* Sample step: true when rc is success; a lost GPU stops the sample. */
static bool sample_ok(struct nvml *nv, int index, const char *call, nvmlReturn_t rc, bool *gone)
{
    if (rc == NVML_SUCCESS)
        return true;
    if (rc == NVML_ERROR_GPU_IS_LOST)
        *gone = true;
    if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND)
        nvml__set_err(nv, "GPU %d: %s: %s", index, call, nvml__rc_text(rc));
    return false;
}

int nvml_sample(struct nvml *nv, int index, struct nvml_sample *out)
{
    nvmlDevice_t dev = NULL;
    bool gone = false;
    int r;

    memset(out, 0, sizeof(*out));
    out->temp_c = -1;
    r = nvml__device(nv, index, &dev);
    if (r < 0)
        return r;
    if (nv->f.util) {
        nvmlUtilization_t u = {0, 0};

        if (sample_ok(nv, index, "nvmlDeviceGetUtilizationRates", nv->f.util(dev, &u), &gone)) {
            out->util_gpu = (int)u.gpu;
            out->util_mem = (int)u.memory;
            out->supported |= ALLOT_NVML_F_UTIL;
        }
    }
    if (nv->f.memory && !gone) {
        nvmlMemory_t m;

        memset(&m, 0, sizeof(m));
        if (sample_ok(nv, index, "nvmlDeviceGetMemoryInfo", nv->f.memory(dev, &m), &gone)) {
            out->mem_used_mib = nvml__mib(m.used);
            out->mem_total_mib = nvml__mib(m.total);
            out->supported |= ALLOT_NVML_F_MEMORY;
        }
    }
    if (nv->f.energy && !gone) {
        unsigned long long mj = 0;

        if (sample_ok(nv, index, "nvmlDeviceGetTotalEnergyConsumption", nv->f.energy(dev, &mj),
                      &gone)) {
            out->energy_mj = mj;
            out->supported |= ALLOT_NVML_F_ENERGY;
        }
    }
    if (nv->f.temp && !gone) {
        unsigned int t = 0;

        if (sample_ok(nv, index, "nvmlDeviceGetTemperature",
                      nv->f.temp(dev, NVML_TEMPERATURE_GPU, &t), &gone)) {
            out->temp_c = (int)t;
            out->supported |= ALLOT_NVML_F_TEMP;
        }
    }
    if (!gone) {
        r = read_procs(nv, dev, out);
        if (r < 0)
            return r;
    }
    return gone ? ALLOT_EIO : 0;
}

/* ---- Xid events ---------------------------------------------------------------- */

int nvml_events_poll(struct nvml *nv, struct nvml_xid *out, int max)
{
    int n = 0;

    if (!nv->events)
        return 0;
    while (n < max) {
        nvmlEventData_t d;
        nvmlReturn_t rc;

        memset(&d, 0, sizeof(d));
        /* nvmlEventSetWait (v1) writes only the first three fields */
        d.gpuInstanceId = d.computeInstanceId = 0xFFFFFFFFu;
        rc = nv->f.ev_wait(nv->events, &d, 0);
        if (rc == NVML_ERROR_TIMEOUT)
            break;
        if (rc != NVML_SUCCESS) {
            nvml__set_err(nv, "nvmlEventSetWait: %s", nvml__rc_text(rc));
            return n > 0 ? n : ALLOT_EIO;
        }
        if (!(d.eventType & nvmlEventTypeXidCriticalError))
            continue;
        out[n].index = -1;
        for (int i = 0; i < nv->n_ev_devs; i++) {
            if (nv->ev_devs[i] && nv->ev_devs[i] == d.device) {
                out[n].index = i;
                break;
            }
        }
        out[n].xid = d.eventData;
        out[n].gi_id = nvml__id_or_none(d.gpuInstanceId);
        out[n].ci_id = nvml__id_or_none(d.computeInstanceId);
        n++;
    }
    return n;
}

/* ---- model names ---------------------------------------------------------------------- */

/* |a - b| <= 12 % of b */
static bool memory_agrees(int64_t mem_mib, int64_t model_mib)
{
    int64_t d = mem_mib > model_mib ? mem_mib - model_mib : model_mib - mem_mib;

    return mem_mib <= 0 || d * 100 <= model_mib * 12;
}

/* True when `name` is `family` or starts with "family-". */
static bool in_family(const char *name, const char *family, size_t flen)
{
    return strncasecmp(name, family, flen) == 0 && (name[flen] == '\0' || name[flen] == '-');
}

const char *nvml_model_name(const char *nvml_name, int64_t mem_mib, const struct allot_catalog *cat)
{
    static const char *const prefixes[] = {"NVIDIA ", "Tesla ", "Quadro "};
    const struct allot_gpu_model *best = NULL;
    int64_t best_d = 0;
    char family[ALLOT_MODEL_NAME_MAX];
    const char *s;
    size_t flen;
    int m;

    if (!nvml_name || !cat)
        return NULL;
    s = nvml_name;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t plen = strlen(prefixes[i]);

        if (strncasecmp(s, prefixes[i], plen) == 0)
            s += plen;
    }
    /* "A100-SXM4-40GB", "T4", "H200": a name or alias of the catalog */
    m = allot_catalog_find_model(cat, s);
    if (m >= 0 && memory_agrees(mem_mib, cat->models[m].memory_mib))
        return cat->models[m].name;
    /* "H100 80GB HBM3", "A100 80GB PCIe": the family with the nearest memory */
    flen = strcspn(s, " -");
    if (flen == 0 || flen >= sizeof(family))
        return NULL;
    memcpy(family, s, flen);
    family[flen] = '\0';
    for (int i = 0; i < cat->n_models; i++) {
        const struct allot_gpu_model *g = &cat->models[i];
        bool hit = in_family(g->name, family, flen);
        int64_t d;

        for (int a = 0; a < g->n_aliases && !hit; a++)
            hit = in_family(g->aliases[a], family, flen);
        if (!hit || !memory_agrees(mem_mib, g->memory_mib))
            continue;
        d = mem_mib > g->memory_mib ? mem_mib - g->memory_mib : g->memory_mib - mem_mib;
        if (mem_mib <= 0) {
            /* no memory to compare: the model the family's short name means */
            m = allot_catalog_find_model(cat, family);
            return m >= 0 ? cat->models[m].name : NULL;
        }
        if (!best || d < best_d) {
            best = g;
            best_d = d;
        }
    }
    return best ? best->name : NULL;
}

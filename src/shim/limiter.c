/*
 * The compute share (ALLOT_GPU_SM_LIMIT, percent): a duty-cycle limiter on
 * the launch path. Every launch is charged an estimate of the GPU time it
 * takes; an allowance accrues at PERCENT of the wall clock; a launch that
 * finds more charged than allowed sleeps until the allowance catches up.
 * With a shared region the books are the job's, per device (all its
 * processes draw on one budget); without one, the process's own. The estimate is measured: one
 * launch at a time is bracketed by a pair of timing events on its stream, and when that pair
 * completes its elapsed time corrects the charge for that launch (the feedback) and updates the
 * estimate (an exponential average, one for kernels and one for graph launches).
 *
 * State: one struct under one mutex, taken before the region's (the
 * driver calls made under it are not hooked). Off (no limit, or 100) the hooks cost one
 * load and a branch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/* Unused allowance kept for later, so a short idle spell lets a burst
 * through: 20 ms of GPU time at most. */
#define BURST_NS 20000000ll
/* A probe whose end has not completed after this long is abandoned (its
 * context may be gone). */
#define PROBE_GIVE_UP_NS 2000000000ull
/* At most one probe started per this long: the events cost little, but the
 * launch they bracket holds the limiter's lock. */
#define PROBE_EVERY_NS 5000000ull

typedef CUresult (*event_create_fn)(CUevent *, unsigned int);
typedef CUresult (*event_record_fn)(CUevent, CUstream);
typedef CUresult (*event_query_fn)(CUevent);
typedef CUresult (*event_elapsed_fn)(float *, CUevent, CUevent);
typedef CUresult (*event_destroy_fn)(CUevent);

/* How often a job sharing a GPU with others recomputes its rate (and
 * tells the others it still wants time). */
#define RATE_EVERY_NS 5000000ull

static struct {
    pthread_mutex_t lock;
    int percent;           /* 1..99; 0: off */
    const char *share_dir; /* ALLOT_GPU_SHARE_DIR (borrowed), NULL: no sharing */
    const char *share_id;  /* ALLOT_GPU_SHARE_ID (borrowed): this task's entry there */
    struct {
        struct shim_share *s; /* owned; NULL: not shared (yet) */
        bool tried;
        int rate;    /* percent, 0: not computed yet */
        uint64_t at; /* when it was */
    } share[SHIM_MAX_DEV];
    int64_t debt_ns;       /* without a region: charged minus allowed */
    uint64_t last_ns;      /* without a region: when the allowance last accrued */
    int64_t correction_ns; /* measured minus charged, not yet applied */
    uint64_t est_ns[2];
    bool measured[2]; /* est_ns[kind] holds a measurement (0 ns is one) */
    /* the probe: a launch bracketed by two events */
    bool pending;
    int probe_kind;
    uint64_t probe_ctx, probe_since, probe_charged;
    CUevent start, end; /* created lazily in probe_ctx */
    uint64_t events_ctx;
} lim = {.lock = PTHREAD_MUTEX_INITIALIZER};

uint64_t shim_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ALLOT_GPU_SHARE_DIR and ALLOT_GPU_SHARE_ID, once the limit is known.
 * The weight and the ceiling are the agent's, in the job's entry there
 * (share.c), never the job's environment. */
static void load_sharing(void)
{
    const char *dir = getenv("ALLOT_GPU_SHARE_DIR"), *id = getenv("ALLOT_GPU_SHARE_ID");
    static const char *const gone[] = {"ALLOT_GPU_SM_WEIGHT", "ALLOT_GPU_SM_SOFT",
                                       "ALLOT_GPU_SM_CEILING"};

    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
        if (getenv(gone[i]))
            shim_warn("%s is not read: the weight and ceiling are the agent's, in the share "
                      "entry",
                      gone[i]);
    if (!dir || !*dir)
        return;
    if (!id || !*id) {
        shim_warn("ALLOT_GPU_SHARE_DIR without ALLOT_GPU_SHARE_ID: the limit is hard");
        return;
    }
    lim.share_dir = dir;
    lim.share_id = id;
}

void shim_limiter_init(void)
{
    const char *s = getenv("ALLOT_GPU_SM_LIMIT");
    int p = 0;

    if (s && *s && !shim_parse_percent(s, &p))
        shim_warn("ALLOT_GPU_SM_LIMIT=%s is not a percent from 1 to 100: not limited", s);
    lim.percent = p >= 100 ? 0 : p;
    lim.last_ns = shim_now_ns();
    if (lim.percent)
        load_sharing();
}

/*
 * The job's percent on dev now: its limit, or with ALLOT_GPU_SHARE_DIR
 * its weighted fair part among the GPU's active jobs (recomputed every
 * RATE_EVERY_NS, which also tells the others this job wants time).
 * Called locked.
 */
static int rate_for(int dev, uint64_t now)
{
    char hex[33];

    if (!lim.share_dir || dev < 0 || dev >= SHIM_MAX_DEV)
        return lim.percent;
    if (!lim.share[dev].tried) {
        lim.share[dev].tried = true;
        if (shim_cuda_uuid_hex(dev, hex))
            lim.share[dev].s = shim_share_open(lim.share_dir, hex, lim.share_id);
        else
            shim_warn("device %d: no UUID for a GPU share folder: the limit is hard", dev);
    }
    if (!lim.share[dev].s)
        return lim.percent;
    if (!lim.share[dev].at || now - lim.share[dev].at >= RATE_EVERY_NS) {
        uint64_t wall = shim_share_now();

        shim_share_touch(lim.share[dev].s, wall);
        lim.share[dev].rate = shim_share_rate(lim.share[dev].s, wall);
        lim.share[dev].at = now;
    }
    /* 0: no usable entry of the agent's, so no idle time for this job */
    return lim.share[dev].rate ? lim.share[dev].rate : lim.percent;
}

bool shim_limiter_on(void)
{
    return __atomic_load_n(&lim.percent, __ATOMIC_RELAXED) != 0;
}

static void drop_events(void)
{
    event_destroy_fn destroy = (event_destroy_fn)shim_real(SHIM_FN_cuEventDestroy_v2);

    if (destroy && lim.start)
        destroy(lim.start);
    if (destroy && lim.end)
        destroy(lim.end);
    lim.start = lim.end = NULL;
    lim.events_ctx = 0;
}

/* Reads a completed probe into the estimate and the charge. Called locked. */
static void poll_probe(uint64_t ctx, uint64_t now)
{
    event_query_fn query = (event_query_fn)shim_real(SHIM_FN_cuEventQuery);
    event_elapsed_fn elapsed = (event_elapsed_fn)shim_real(SHIM_FN_cuEventElapsedTime_v2);
    float ms = 0;
    uint64_t measured, *est;

    if (!elapsed)
        elapsed = (event_elapsed_fn)shim_real(SHIM_FN_cuEventElapsedTime);
    if (!lim.pending)
        return;
    if (ctx != lim.probe_ctx || !query || !elapsed) {
        if (now - lim.probe_since > PROBE_GIVE_UP_NS)
            lim.pending = false;
        return;
    }
    if (query(lim.end) != CUDA_SUCCESS) {
        if (now - lim.probe_since > PROBE_GIVE_UP_NS)
            lim.pending = false;
        return;
    }
    lim.pending = false;
    if (elapsed(&ms, lim.start, lim.end) != CUDA_SUCCESS || !(ms >= 0))
        return;
    measured = (uint64_t)((double)ms * 1e6);
    /* the feedback: what that launch really took, not what was charged */
    lim.correction_ns += (int64_t)measured - (int64_t)lim.probe_charged;
    shim_meter(0, (int64_t)measured - (int64_t)lim.probe_charged);
    est = &lim.est_ns[lim.probe_kind];
    *est = lim.measured[lim.probe_kind] ? (*est * 7 + measured) / 8 : measured;
    lim.measured[lim.probe_kind] = true;
}

uint64_t shim_limiter_before(int kind, int dev, uint64_t ctx)
{
    struct shim_region *region = shim_account_region();
    uint64_t charge, slept = 0;

    pthread_mutex_lock(&lim.lock);
    for (;;) {
        uint64_t now = shim_now_ns(), wait_ns;
        int64_t corr;
        struct timespec ts;

        poll_probe(ctx, now);
        charge = lim.est_ns[kind];
        if (!lim.measured[kind] && lim.pending && lim.probe_kind == kind) {
            /* nothing measured yet: wait for the first measurement rather
             * than queue launches charged at nothing */
            wait_ns = 50000;
        } else {
            int percent = rate_for(dev, now);

            corr = lim.correction_ns;
            lim.correction_ns = 0;
            wait_ns = region
                          ? shim_region_sm_charge(region, dev, percent, BURST_NS, corr, charge, now)
                          : shim_sm_charge(&lim.debt_ns, &lim.last_ns, percent, BURST_NS, corr,
                                           charge, now);
            if (!wait_ns)
                break;
        }
        if (wait_ns > 100000000)
            wait_ns = 100000000; /* look again at least every 100 ms */
        pthread_mutex_unlock(&lim.lock);
        ts.tv_sec = (time_t)(wait_ns / 1000000000);
        ts.tv_nsec = (long)(wait_ns % 1000000000);
        nanosleep(&ts, NULL);
        slept += wait_ns;
        pthread_mutex_lock(&lim.lock);
    }
    pthread_mutex_unlock(&lim.lock);
    shim_meter(slept, (int64_t)charge);
    return charge;
}

bool shim_limiter_probe_start(int kind, uint64_t ctx, CUstream s, bool ptsz)
{
    event_create_fn create = (event_create_fn)shim_real(SHIM_FN_cuEventCreate);
    event_record_fn record =
        (event_record_fn)shim_real(ptsz ? SHIM_FN_cuEventRecord_ptsz : SHIM_FN_cuEventRecord);
    bool started = false;

    if (!create || !record || !ctx)
        return false;
    pthread_mutex_lock(&lim.lock);
    if (lim.pending ||
        (lim.probe_since && shim_now_ns() - lim.probe_since < PROBE_EVERY_NS && lim.measured[kind]))
        goto out;
    if (lim.events_ctx != ctx) {
        drop_events();
        /* 0: timing enabled */
        if (create(&lim.start, 0) != CUDA_SUCCESS || create(&lim.end, 0) != CUDA_SUCCESS) {
            drop_events();
            goto out;
        }
        lim.events_ctx = ctx;
    }
    if (record(lim.start, s) != CUDA_SUCCESS)
        goto out;
    lim.pending = true;
    lim.probe_kind = kind;
    lim.probe_ctx = ctx;
    lim.probe_since = shim_now_ns();
    lim.probe_charged = lim.est_ns[kind];
    started = true;
out:
    /* the lock stays held from here to shim_limiter_probe_end: the launch
     * between the two events must be the one measured */
    if (!started)
        pthread_mutex_unlock(&lim.lock);
    return started;
}

void shim_limiter_probe_end(CUstream s, bool ptsz, bool launched)
{
    event_record_fn record =
        (event_record_fn)shim_real(ptsz ? SHIM_FN_cuEventRecord_ptsz : SHIM_FN_cuEventRecord);

    if (!launched || !record || record(lim.end, s) != CUDA_SUCCESS)
        lim.pending = false;
    pthread_mutex_unlock(&lim.lock);
}

void shim_limiter_reset_child(void)
{
    pthread_mutex_init(&lim.lock, NULL);
    lim.pending = false;
    lim.start = lim.end = NULL; /* the parent's events are not the child's */
    lim.events_ctx = 0;
    lim.debt_ns = lim.correction_ns = 0;
    lim.last_ns = shim_now_ns();
}

/*
 * The queue's tuned configuration (the table in include/allot/queue.h) and
 * its scheduling options as JSON: allotd serves them (GET /v1/scheduler)
 * and allot plan reads them back into the options it replays with, both
 * through this one list of fields.
 */
#include "allot/queue.h"

#include "allot/common.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

void allot_queue_opts_tuned(struct allot_queue_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->order = "fair";
    o->placement = "allot";
    o->quotas = o->borrowing = o->preemption = o->backfill = true;
    o->grace_s = ALLOT_TUNED_GRACE_S;
    o->min_runtime_s = ALLOT_TUNED_MIN_RUNTIME_S;
    o->half_life_s = ALLOT_TUNED_HALF_LIFE_S;
    o->hold_half_life_s = ALLOT_TUNED_HOLD_S;
    o->las_threshold_gpu_s = ALLOT_TUNED_LAS_GPU_S;
    o->reserve_gangs = ALLOT_TUNED_RESERVE_GANGS;
    o->large_gang_gpus = ALLOT_TUNED_LARGE_GANG_GPUS;
    o->fair_reclaim_s = ALLOT_TUNED_FAIR_RECLAIM_S;
    o->fair_cap = ALLOT_TUNED_FAIR_CAP_PCT / 100.0;
    o->defrag_s = ALLOT_TUNED_DEFRAG_S;
    o->defrag_loss_s = ALLOT_TUNED_DEFRAG_LOSS_S;
}

/* The whole-number fields, in seconds (GPU-seconds, percent, GPUs). */
enum {
    F_GRACE,
    F_MIN_RUN,
    F_FAIR_RECLAIM,
    F_FAIR_CAP,
    F_LARGE,
    F_AGING,
    F_LAS,
    F_HOLD,
    F_DEFRAG, /* from here on: optional (0 when missing) */
    F_DEFRAG_LOSS,
    N_INTS
};
static const char *const int_keys[N_INTS] = {
    "preempt_grace_s",     "preempt_min_runtime_s", "fair_reclaim_s",
    "fair_cap_percent",    "large_gang_gpus",       "aging_s",
    "las_threshold_gpu_s", "lending_hold_s",        "defrag_s",
    "defrag_loss_s"};

json_t *allot_queue_opts_json(const struct allot_queue_opts *o)
{
    const int64_t v[N_INTS] = {
        [F_GRACE] = o->grace_s,
        [F_MIN_RUN] = o->min_runtime_s,
        [F_FAIR_RECLAIM] = o->fair_reclaim_s,
        [F_FAIR_CAP] = llround(o->fair_cap * 100.0),
        [F_LARGE] = o->large_gang_gpus,
        [F_AGING] = o->aging_s,
        [F_LAS] = o->las_threshold_gpu_s,
        [F_HOLD] = llround(o->hold_half_life_s),
        [F_DEFRAG] = o->defrag_s,
        [F_DEFRAG_LOSS] = o->defrag_loss_s,
    };
    json_t *j = json_pack("{s:s,s:s,s:b}", "order", o->order ? o->order : "", "placement",
                          o->placement ? o->placement : "", "reserve_gangs", (int)o->reserve_gangs);

    for (int i = 0; j && i < N_INTS; i++)
        if (json_object_set_new(j, int_keys[i], json_integer((json_int_t)v[i])) != 0) {
            json_decref(j);
            j = NULL;
        }
    return j;
}

int allot_queue_opts_from_json(struct allot_queue_opts *o, const json_t *j, char *err,
                               size_t errlen)
{
    json_t *order = json_object_get(j, "order"), *pl = json_object_get(j, "placement");
    json_t *rg = json_object_get(j, "reserve_gangs");
    int64_t v[N_INTS];

    for (int i = 0; i < N_INTS; i++) {
        json_t *x = json_object_get(j, int_keys[i]);
        v[i] = json_is_integer(x) ? (int64_t)json_integer_value(x) : !x && i >= F_DEFRAG ? 0 : -1;
        if (v[i] < 0 || v[i] > INT32_MAX) {
            allot_fmt(err, errlen, "\"%s\" missing or not a whole number from 0 to %d", int_keys[i],
                      INT32_MAX);
            return ALLOT_EINVAL;
        }
    }
    if (!json_is_string(order) || !json_is_string(pl) || !json_is_boolean(rg)) {
        allot_fmt(err, errlen, "\"%s\" missing or of the wrong type",
                  !json_is_string(order) ? "order"
                  : !json_is_string(pl)  ? "placement"
                                         : "reserve_gangs");
        return ALLOT_EINVAL;
    }
    o->order = json_string_value(order);
    o->placement = json_string_value(pl);
    o->reserve_gangs = json_is_true(rg);
    o->grace_s = v[F_GRACE];
    o->min_runtime_s = v[F_MIN_RUN];
    o->fair_reclaim_s = v[F_FAIR_RECLAIM];
    o->fair_cap = (double)v[F_FAIR_CAP] / 100.0;
    o->large_gang_gpus = (int)v[F_LARGE];
    o->aging_s = v[F_AGING];
    o->las_threshold_gpu_s = v[F_LAS];
    o->hold_half_life_s = (double)v[F_HOLD];
    o->defrag_s = v[F_DEFRAG];
    o->defrag_loss_s = v[F_DEFRAG_LOSS];
    return 0;
}

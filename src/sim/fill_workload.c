/*
 * The arrival order of one seed (fill_workload.h): a Fisher-Yates shuffle
 * of the trace, then clones appended or pods removed, all drawn from one
 * PRNG stream derived from the seed.
 */
#include "fill_workload.h"

#include "allot/common.h"

#include <string.h>

void sim_fill_workload_free(struct sim_fill_workload *w)
{
    if (!w)
        return;
    allot_free(w->task);
    allot_free(w->clone);
    memset(w, 0, sizeof(*w));
}

int64_t sim_fill_task_request(const struct allot_task *t)
{
    return (int64_t)t->num_gpu * t->gpu_milli;
}

int sim_fill_workload_make(const struct sim_fill_trace *t, uint64_t seed, double tune,
                           struct sim_fill_workload *out)
{
    size_t n = t->n_tasks, cap = n ? n : 1;
    struct allot_rng r;
    double target = tune * (double)t->gpus * ALLOT_MILLI;
    int64_t total = t->request_milli;

    memset(out, 0, sizeof(*out));
    out->task = allot_malloc(cap * sizeof(*out->task));
    out->clone = allot_malloc(cap * sizeof(*out->clone));
    if (!out->task || !out->clone)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        out->task[i] = (uint32_t)i;
        out->clone[i] = -1;
    }
    /* a stream of its own: the node ranks and the random policy use `seed` */
    allot_rng_seed(&r, allot_hash_mix(seed, 0x66696c6cULL));
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)allot_rng_below(&r, i);
        uint32_t x = out->task[i - 1];
        out->task[i - 1] = out->task[j];
        out->task[j] = x;
    }
    out->n = n;
    if (tune > 0 && total > 0 && n > 0 && (double)total < target) {
        for (;;) {
            size_t idx = (size_t)allot_rng_below(&r, n);
            const struct allot_task *c = &t->tasks[idx];
            /* the authors compare the clone's per-GPU milli, not its total */
            if ((double)(total + (c->num_gpu ? c->gpu_milli : 0)) > target)
                break;
            if (out->n == cap) {
                size_t c1 = cap, c2 = cap;
                if (allot_grow((void **)&out->task, &c1, cap + 1, sizeof(*out->task)) ||
                    allot_grow((void **)&out->clone, &c2, cap + 1, sizeof(*out->clone)))
                    goto oom;
                cap = c1 < c2 ? c1 : c2;
            }
            if (out->n_clones >= INT32_MAX)
                break;
            out->task[out->n] = (uint32_t)idx;
            out->clone[out->n] = (int32_t)out->n_clones++;
            out->n++;
            total += sim_fill_task_request(c);
        }
    } else if (tune > 0 && total > 0 && (double)total > target) {
        while ((double)total > target && out->n > 0) {
            size_t j = (size_t)allot_rng_below(&r, out->n);
            total -= sim_fill_task_request(&t->tasks[out->task[j]]);
            memmove(out->task + j, out->task + j + 1, (out->n - j - 1) * sizeof(*out->task));
            memmove(out->clone + j, out->clone + j + 1, (out->n - j - 1) * sizeof(*out->clone));
            out->n--;
            out->n_removed++;
        }
    }
    out->request_milli = total;
    return 0;
oom:
    sim_fill_workload_free(out);
    return ALLOT_ENOMEM;
}

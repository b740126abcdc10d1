/*
 * Fuzz target: Slurm's history as allot-sim replay --sacct reads it
 * (src/sim/slurm.c). The bytes are read as a sacct -P export (UTC and
 * +05:30) and as `scontrol show nodes -o` output (with and without
 * --gpu-model); an accepted export is also turned into a replay setup on
 * the nodes it gave (or the default shape). Invariants: the parsers return
 * 0 or ALLOT_EINVAL with a message naming a line; an accepted export's
 * jobs have known tenants, GPUs in 1..SLURM_MAX_GPUS (or 0), durations in
 * 0..SLURM_MAX_DURATION, and its counts add up; accepted node groups have
 * a catalog model, 1..16 GPUs, positive cores and memory, and counts >= 1.
 */
#include "fuzz.h"

#include "allot/catalog.h"
#include "allot/common.h"
#include "slurm.h"

#include <string.h>

static struct allot_catalog *cat; /* owned; loaded once, kept for the process */

static void check_trace(const struct replay_trace *tr, const struct slurm_sacct_counts *c)
{
    FUZZ_CHECK(tr->n == c->jobs);
    FUZZ_CHECK(c->jobs + c->steps + c->never_started + c->running <= c->lines);
    for (size_t i = 0; i < tr->n; i++) {
        const struct replay_trace_job *j = &tr->v[i];

        FUZZ_CHECK(j->tenant >= 0 && j->tenant < tr->n_tenants);
        FUZZ_CHECK(j->prio >= -1 && j->prio < tr->n_prio);
        FUZZ_CHECK(j->gpus >= 0 && j->gpus <= SLURM_MAX_GPUS);
        FUZZ_CHECK(j->duration >= 0 && j->duration <= SLURM_MAX_DURATION);
        FUZZ_CHECK(j->line >= 2);
    }
}

static void check_groups(const struct replay_node_group *g, int n)
{
    FUZZ_CHECK(n >= 1 && n <= REPLAY_MAX_GROUPS);
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(g[i].model_idx >= 0 && g[i].model_idx < cat->n_models);
        FUZZ_CHECK(strcmp(g[i].model, cat->models[g[i].model_idx].name) == 0);
        FUZZ_CHECK(g[i].gpus >= 1 && g[i].gpus <= ALLOT_MAX_GPUS);
        FUZZ_CHECK(g[i].cpu_milli > 0 && g[i].mem_mib > 0 && g[i].count >= 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t tz[] = {0, 5 * 3600 + 1800};
    struct replay_node_group *g = NULL;
    int ng = 0;
    char err[512];
    size_t cpu_only = 0;

    if (!cat) {
        cat = allot_catalog_default(err, sizeof(err));
        if (!cat)
            abort();
    }
    for (int k = 0; k < 2; k++) {
        int rc;

        err[0] = 0;
        rc = slurm_parse_nodes((const char *)data, size, "nodes", cat, k ? "A100" : NULL, &g, &ng,
                               &cpu_only, err, sizeof(err));
        FUZZ_CHECK(rc == 0 || (rc == ALLOT_EINVAL && err[0]));
        if (rc == 0) {
            check_groups(g, ng);
            if (k == 0)
                break;
        }
        allot_free(g);
        g = NULL;
        ng = 0;
    }
    for (size_t k = 0; k < sizeof(tz) / sizeof(tz[0]); k++) {
        struct replay_trace tr = {0};
        struct slurm_sacct_counts c;
        int rc;

        err[0] = 0;
        rc = slurm_parse_sacct((const char *)data, size, "sacct", tz[k], &tr, &c, err, sizeof(err));
        FUZZ_CHECK(rc == 0 || (rc == ALLOT_EINVAL && err[0]));
        if (rc == 0) {
            struct replay_setup s;
            struct replay_trace_opts o = {.groups = g, .n_groups = ng, .from = -1, .to = -1};

            check_trace(&tr, &c);
            rc = replay_setup_trace(&s, &tr, &o, err, sizeof(err));
            FUZZ_CHECK(rc == 0 || rc == ALLOT_EINVAL);
            if (rc == 0) {
                FUZZ_CHECK(s.n_jobs >= 1 && s.n_jobs <= tr.n);
                FUZZ_CHECK(s.n_nodes >= 1 && replay_setup_gpus(&s) >= 1);
                replay_setup_free(&s);
            }
        }
        replay_trace_free(&tr);
    }
    allot_free(g);
    return 0;
}

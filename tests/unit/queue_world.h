/*
 * The small world the queue's unit tests run in (test_queue.c,
 * test_queue_share.c, test_queue_reason.c): a cluster of 4-GPU H100 nodes, tenants ml/team-a
 * and ml/team-b, a queue, and a decision callback that counts starts,
 * preemptions and stops and keeps the last reason. Every cycle checks the
 * queue's invariants. Include after catalog_fixture.h and queue_fixture.h.
 */
#ifndef ALLOT_TESTS_QUEUE_WORLD_H
#define ALLOT_TESTS_QUEUE_WORLD_H

#include "allot/common.h"
#include "allot/queue.h"

#include <string.h>

struct world {
    struct allot_cluster *c;
    struct allot_tenants *t;
    struct allot_queue *q;
    int a, b; /* tenants team-a, team-b */
    int starts, preempts, stops;
    char last_why[256];
    int pairs[64][2]; /* (victim, preemptor) ids */
    int n_pairs;
};

static int evictions; /* victims stopped because they could not be put back */

static void on_decision(int kind, const struct allot_job *j, const char *why, void *ud)
{
    struct world *w = ud;

    if (kind == ALLOT_DEC_START)
        w->starts++;
    else if (kind == ALLOT_DEC_STOP)
        w->stops++;
    else {
        const char *by = strstr(why, "job ");
        w->preempts++;
        if (by && w->n_pairs < 64) {
            const struct allot_job *p = NULL;
            for (int i = 0; i < allot_queue_job_count(w->q); i++)
                if (allot_queue_job(w->q, i) && strcmp(allot_queue_job(w->q, i)->name, by + 4) == 0)
                    p = allot_queue_job(w->q, i);
            assert_non_null(p);
            w->pairs[w->n_pairs][0] = j->id;
            w->pairs[w->n_pairs][1] = p->id;
            w->n_pairs++;
        }
    }
    if (kind == ALLOT_DEC_STOP && strstr(why, "out of memory"))
        evictions++;
    allot_strlcpy(w->last_why, why, sizeof(w->last_why));
}

/* nodes x 4 H100; team-a and team-b with nominal `nom` GPUs each. */
static void world_init(struct world *w, int nodes, int nom, struct allot_queue_opts o)
{
    char err[256], name[16];

    memset(w, 0, sizeof(*w));
    w->c = allot_cluster_new(cat, 0);
    for (int i = 0; i < nodes; i++) {
        struct allot_node_spec sp = {.name = name,
                                     .model = "H100",
                                     .cpu_milli = 64000,
                                     .mem_mib = 262144,
                                     .n_gpus = 4,
                                     .island_size = 4};
        allot_fmt(name, sizeof(name), "h%d", i);
        assert_true(allot_cluster_add_node(w->c, &sp, err, sizeof(err)) >= 0);
    }
    w->t = allot_tenants_new(cat);
    w->a = allot_tenants_add(w->t, "ml/team-a", err, sizeof(err));
    w->b = allot_tenants_add(w->t, "ml/team-b", err, sizeof(err));
    for (int i = 0; i < 2; i++) {
        struct allot_quota q = {.nominal = (int64_t)nom * 1000,
                                .borrow_limit = ALLOT_UNLIMITED,
                                .lend_limit = ALLOT_UNLIMITED};
        assert_int_equal(allot_tenants_set_quota(w->t, i ? w->b : w->a, ALLOT_RES_GPU, q), 0);
    }
    allot_tenants_fill_nominal(w->t);
    w->q = allot_queue_new(w->c, w->t, &o, err, sizeof(err));
    assert_non_null(w->q);
}

static void world_free(struct world *w)
{
    allot_queue_free(w->q);
    allot_tenants_free(w->t);
    allot_cluster_free(w->c);
}

/* A checkpointable job of `tasks` tasks of `gpus` whole GPUs and 1 CPU
 * each, on the nodes of `set` (NULL: any); fails the test when refused. */
static int submit_in(struct world *w, const char *name, int tenant, int tasks, int gpus,
                     int64_t now, int64_t est, const struct allot_nodeset *set)
{
    char err[256];
    struct allot_job_spec s = {
        .name = name,
        .tenant = tenant,
        .prio_class = -1,
        .n_tasks = tasks,
        .task = {.num_gpu = gpus, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 1000},
        .est_runtime_s = est,
        .checkpointable = true};
    int id;

    s.task.nodes = set;
    id = allot_queue_submit(w->q, &s, now, err, sizeof(err));
    if (id < 0)
        fail_msg("submit %s: %s", name, err);
    return id;
}

static int submit(struct world *w, const char *name, int tenant, int tasks, int gpus, int64_t now,
                  int64_t est)
{
    return submit_in(w, name, tenant, tasks, gpus, now, est, NULL);
}

static void cycle(struct world *w, int64_t now)
{
    char err[256];

    assert_int_equal(allot_queue_cycle(w->q, now, on_decision, w), 0);
    if (allot_queue_check_invariants(w->q, err, sizeof(err)) != 0)
        fail_msg("after cycle at %lld: %s", (long long)now, err);
}

/* Adds node `name`: 4 A100-80GB GPUs in mode (enum allot_gpu_mode). */
static inline void world_add_moded_node(struct world *w, const char *name, int mode)
{
    struct allot_node_spec sp = {.name = name,
                                 .model = "A100-80GB",
                                 .cpu_milli = 64000,
                                 .mem_mib = 262144,
                                 .n_gpus = 4,
                                 .island_size = 4,
                                 .gpu_mode = mode};
    char err[256];

    if (allot_cluster_add_node(w->c, &sp, err, sizeof(err)) < 0)
        fail_msg("node %s: %s", name, err);
}

/* Adds node `name`: 4 H100s (one NVLink island), 64 CPUs, labelled
 * zone=`zone` (NULL: no label). Returns its index. */
static inline int world_add_zone_node(struct world *w, const char *name, const char *zone)
{
    struct allot_label l = {"zone", (char *)zone};
    struct allot_node_spec sp = {.name = name,
                                 .model = "H100",
                                 .cpu_milli = 64000,
                                 .mem_mib = 262144,
                                 .n_gpus = 4,
                                 .island_size = 4,
                                 .n_labels = zone ? 1 : 0,
                                 .labels = &l};
    char err[256];
    int i = allot_cluster_add_node(w->c, &sp, err, sizeof(err));

    if (i < 0)
        fail_msg("node %s: %s", name, err);
    return i;
}

/* Adds node `name`: 4 A100-80GB GPUs in MIG mode. */
static inline void world_add_mig_node(struct world *w, const char *name)
{
    world_add_moded_node(w, name, ALLOT_GPU_MIG);
}

#endif

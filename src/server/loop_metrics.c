/*
 * The scheduling loop's Prometheus figures (GET /metrics): live jobs,
 * nodes and GPUs, the cycle and queue-wait histograms and the preemption
 * counters the loop keeps as it runs (loop.c), and the per-tenant and
 * per-model gauges it renders after each cycle.
 */
#include "loop_int.h"

const double loop_cycle_buckets[N_CYCLE_BUCKETS] = {0.0001, 0.0005, 0.001, 0.005, 0.01,
                                                    0.05,   0.1,    0.5,   1,     5};
const double loop_wait_buckets[N_WAIT_BUCKETS] = {1,   5,    15,    60,    300,
                                                  900, 3600, 14400, 43200, 86400};

int64_t loop_gpu_total(struct loop *l)
{
    int64_t n;

    if (!l)
        return 0;
    pthread_mutex_lock(&l->dmu);
    n = l->gpus;
    pthread_mutex_unlock(&l->dmu);
    return n;
}

void loop_metrics(struct loop *l, FILE *out)
{
    if (!l)
        return; /* still starting */
    pthread_mutex_lock(&l->dmu);
    fprintf(out,
            "# HELP allot_jobs Live jobs by state.\n# TYPE allot_jobs gauge\n"
            "allot_jobs{state=\"pending\"} %lld\nallot_jobs{state=\"running\"} %lld\n"
            "# HELP allot_nodes Registered nodes.\n# TYPE allot_nodes gauge\nallot_nodes %lld\n"
            "# HELP allot_gpus GPUs of the registered nodes.\n# TYPE allot_gpus gauge\n"
            "allot_gpus %lld\n"
            "# HELP allot_gpus_allocated GPUs allocated (fractions count in part).\n"
            "# TYPE allot_gpus_allocated gauge\nallot_gpus_allocated %.3f\n"
            "# HELP allot_sched_cycle_seconds Scheduling cycle latency.\n"
            "# TYPE allot_sched_cycle_seconds histogram\n",
            (long long)l->jobs_pending, (long long)l->jobs_running, (long long)l->nodes,
            (long long)l->gpus, (double)l->gpu_used_milli / 1000.0);
    for (int b = 0; b < N_CYCLE_BUCKETS; b++)
        fprintf(out, "allot_sched_cycle_seconds_bucket{le=\"%g\"} %llu\n", loop_cycle_buckets[b],
                (unsigned long long)l->cycle_le[b]);
    fprintf(out,
            "allot_sched_cycle_seconds_bucket{le=\"+Inf\"} %llu\n"
            "allot_sched_cycle_seconds_sum %.6f\nallot_sched_cycle_seconds_count %llu\n"
            "# HELP allot_sched_cycles_cut_total Core cycles that stopped at cycle-work "
            "decisions (the next went on from there).\n"
            "# TYPE allot_sched_cycles_cut_total counter\nallot_sched_cycles_cut_total %llu\n"
            "# HELP allot_sched_preemptions_total Jobs preempted for another job, by reason "
            "(move: by defragmentation, to make room; other: priority, reclaim, LAS, "
            "backfill).\n"
            "# TYPE allot_sched_preemptions_total counter\n"
            "allot_sched_preemptions_total{reason=\"move\"} %llu\n"
            "allot_sched_preemptions_total{reason=\"other\"} %llu\n",
            (unsigned long long)l->cycles, l->cycle_sum, (unsigned long long)l->cycles,
            (unsigned long long)l->cycles_cut, (unsigned long long)l->moves,
            (unsigned long long)(l->preempts - l->moves));
    fprintf(out, "# HELP allot_queue_wait_seconds Time from (re)queueing to start.\n"
                 "# TYPE allot_queue_wait_seconds histogram\n");
    for (int b = 0; b < N_WAIT_BUCKETS; b++)
        fprintf(out, "allot_queue_wait_seconds_bucket{le=\"%g\"} %llu\n", loop_wait_buckets[b],
                (unsigned long long)l->wait_le[b]);
    fprintf(out,
            "allot_queue_wait_seconds_bucket{le=\"+Inf\"} %llu\n"
            "allot_queue_wait_seconds_sum %.3f\nallot_queue_wait_seconds_count %llu\n",
            (unsigned long long)l->waits, l->wait_sum, (unsigned long long)l->waits);
    if (l->gauges)
        fputs(l->gauges, out);
    pthread_mutex_unlock(&l->dmu);
}

/* Whether core tenant i is in the stored tenants document (one added since
 * the list was made is). */
static bool listed(const struct loop *l, int i)
{
    return i >= l->n_t_listed || l->t_listed[i];
}

char *loop_gauges_text(struct loop *l)
{
    const struct allot_catalog *cat = l->srv->cat;
    int nt = allot_tenants_count(l->t), nn = allot_cluster_node_count(l->c);
    int64_t *jobs = allot_calloc((size_t)nt * 2 + 1, sizeof(*jobs));
    int64_t mg[ALLOT_MAX_MODELS] = {0}, mfree[ALLOT_MAX_MODELS] = {0};
    char *buf = NULL;
    size_t len = 0;
    FILE *f;

    if (!jobs || !(f = open_memstream(&buf, &len))) {
        allot_free(jobs);
        return NULL;
    }
    for (size_t i = 0; i < l->n_live; i++) {
        const struct allot_job *qj = allot_queue_job(l->q, l->live[i].qid);

        if (qj->spec.tenant >= 0 && qj->spec.tenant < nt)
            jobs[qj->spec.tenant * 2 + (qj->state != ALLOT_JOB_PENDING)]++;
    }
    for (size_t i = 0; i < l->n_held; i++)
        if (l->held[i].tenant > 0 && l->held[i].tenant < nt)
            jobs[l->held[i].tenant * 2]++;
    fprintf(f, "# HELP allot_tenant_jobs Live jobs by tenant and state.\n"
               "# TYPE allot_tenant_jobs gauge\n");
    /* every leaf (jobs run in leaves), 0 too: a series that vanishes at 0
     * reads as "no data" on a dashboard, and absent() alerts misfire */
    for (int i = 1; i < nt; i++)
        for (int s = 0; s < 2 && listed(l, i); s++)
            if (jobs[i * 2 + s] || allot_tenants_get(l->t, i)->first_child < 0)
                fprintf(f, "allot_tenant_jobs{tenant=\"%s\",state=\"%s\"} %lld\n",
                        allot_tenants_get(l->t, i)->path, s ? "running" : "pending",
                        (long long)jobs[i * 2 + s]);
    /* each metric's samples form one group (the text format's rule) */
    fprintf(f, "# HELP allot_tenant_gpus GPUs a tenant's subtree uses.\n"
               "# TYPE allot_tenant_gpus gauge\n");
    for (int i = 1; i < nt; i++)
        if (listed(l, i))
            fprintf(f, "allot_tenant_gpus{tenant=\"%s\"} %.3f\n", allot_tenants_get(l->t, i)->path,
                    (double)allot_tenants_get(l->t, i)->usage[ALLOT_RES_GPU] / 1000.0);
    fprintf(f, "# HELP allot_tenant_gpu_nominal GPUs a tenant is guaranteed.\n"
               "# TYPE allot_tenant_gpu_nominal gauge\n");
    for (int i = 1; i < nt; i++) {
        const struct allot_tenant *t = allot_tenants_get(l->t, i);

        if (listed(l, i) && t->quota[ALLOT_RES_GPU].nominal != ALLOT_UNLIMITED)
            fprintf(f, "allot_tenant_gpu_nominal{tenant=\"%s\"} %.3f\n", t->path,
                    (double)t->quota[ALLOT_RES_GPU].nominal / 1000.0);
    }
    for (int i = 0; i < nn; i++) {
        const struct allot_node *n = allot_cluster_node(l->c, i);

        if (n->model < 0 || n->model >= ALLOT_MAX_MODELS)
            continue;
        mg[n->model] += n->n_gpus;
        /* free where new work may go: not on a cordoned, draining, lost or
         * fenced node */
        for (int g = 0; n->state == ALLOT_NODE_READY && g < n->n_gpus; g++)
            mfree[n->model] += n->gpus[g].free_milli;
    }
    int64_t free_all = 0;
    for (int m = 0; m < ALLOT_MAX_MODELS; m++)
        free_all += mfree[m];
    fprintf(f,
            "# HELP allot_gpus_free Free GPUs on the nodes that take new work (fractions count "
            "in part).\n# TYPE allot_gpus_free gauge\nallot_gpus_free %.3f\n",
            (double)free_all / 1000.0);
    gate_metrics(l, f, srv_now());
    fprintf(f, "# HELP allot_model_gpus GPUs by model.\n# TYPE allot_model_gpus gauge\n");
    for (int m = 0; m < cat->n_models && m < ALLOT_MAX_MODELS; m++)
        if (mg[m])
            fprintf(f, "allot_model_gpus{model=\"%s\"} %lld\n", cat->models[m].name,
                    (long long)mg[m]);
    fprintf(f, "# HELP allot_model_gpus_free Free GPUs by model on the nodes that take new work "
               "(fractions count in part).\n# TYPE allot_model_gpus_free gauge\n");
    for (int m = 0; m < cat->n_models && m < ALLOT_MAX_MODELS; m++)
        if (mg[m])
            fprintf(f, "allot_model_gpus_free{model=\"%s\"} %.3f\n", cat->models[m].name,
                    (double)mfree[m] / 1000.0);
    fclose(f);
    allot_free(jobs);
    return buf;
}

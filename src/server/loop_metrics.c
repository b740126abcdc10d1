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

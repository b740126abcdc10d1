/*
 * Offline reference packer (see offline.h).
 *
 * State: a flat copy of the nodes (model, free CPU, free memory, per-GPU
 * free milli) and, per task, where it sits (node and GPU mask, or -1).
 * Every change goes through put()/take(), which keep the copy and the
 * placements consistent; nothing else writes them.
 *
 * Packing starts from three packings of the same pods: a greedy one
 * (CPU-only pods first, then GPU pods largest request first, each to the
 * node that fits it best: the smallest GPU gap left, then the least CPU
 * left beyond what the node's free GPUs need at the pods' mean CPU per GPU
 * milli), and the fgd (exact mix) and allot policies fed the pods in
 * arrival order. The local search then takes each GPU pod that did not
 * fit, largest first, and tries every node: if taking one placed pod with
 * a smaller GPU request off that node makes room, the pod goes in and the
 * one taken off goes to its best other node, or, a GPU pod only, stays out
 * (a net gain of GPU milli). CPU-only pods are never left out to make
 * room. The start that leaves out the fewest CPU-only pods, then places
 * the most GPU milli after the search, wins.
 */
#include "offline.h"

#include "allot/common.h"
#include "allot/sched.h"
#include "fdio.h"
#include "fill_workload.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct onode {
    int model;
    int n_gpus;
    int64_t cpu, mem;          /* free */
    int32_t g[ALLOT_MAX_GPUS]; /* free milli per GPU */
};

struct otask {
    int num_gpu;
    int milli; /* per GPU; 0 when no GPU */
    int64_t cpu, mem;
    uint64_t mask; /* allowed models; 0 = any */
    int node;      /* -1: not placed */
    uint32_t gpus; /* GPUs taken */
};

struct pack {
    struct onode *node; /* owned */
    size_t n_nodes;
    struct otask *task; /* owned */
    size_t n_tasks;
    int64_t used;         /* GPU milli placed */
    double cpu_per_milli; /* typical CPU per GPU milli of the GPU tasks */
};

static int64_t task_request(const struct otask *t)
{
    return (int64_t)t->num_gpu * t->milli;
}

static bool admits(const struct onode *n, const struct otask *t)
{
    if (t->mask && (n->model < 0 || !(t->mask >> n->model & 1)))
        return false;
    return n->cpu >= t->cpu && n->mem >= t->mem && n->n_gpus >= t->num_gpu;
}

/* GPUs t would take on n (0 for a CPU-only task); false when it does not fit.
 * A fraction takes the fitting GPU with the least free milli. */
static bool pick_gpus(const struct onode *n, const struct otask *t, uint32_t *mask)
{
    *mask = 0;
    if (!admits(n, t))
        return false;
    if (t->num_gpu == 0)
        return true;
    if (t->milli >= ALLOT_MILLI) {
        int k = t->num_gpu;
        for (int i = 0; i < n->n_gpus && k > 0; i++)
            if (n->g[i] == ALLOT_MILLI) {
                *mask |= 1u << i;
                k--;
            }
        return k == 0;
    }
    {
        int best = -1;
        for (int i = 0; i < n->n_gpus; i++)
            if (n->g[i] >= t->milli && (best < 0 || n->g[i] < n->g[best]))
                best = i;
        if (best < 0)
            return false;
        *mask = 1u << best;
        return true;
    }
}

static void put(struct pack *p, size_t ti, size_t ni, uint32_t mask)
{
    struct otask *t = &p->task[ti];
    struct onode *n = &p->node[ni];

    n->cpu -= t->cpu;
    n->mem -= t->mem;
    for (int i = 0; i < n->n_gpus; i++)
        if (mask >> i & 1)
            n->g[i] -= t->milli;
    t->node = (int)ni;
    t->gpus = mask;
    p->used += task_request(t);
}

static void take(struct pack *p, size_t ti)
{
    struct otask *t = &p->task[ti];
    struct onode *n = &p->node[t->node];

    n->cpu += t->cpu;
    n->mem += t->mem;
    for (int i = 0; i < n->n_gpus; i++)
        if (t->gpus >> i & 1)
            n->g[i] += t->milli;
    t->node = -1;
    t->gpus = 0;
    p->used -= task_request(t);
}

static void pack_reset(struct pack *p, const struct onode *fresh);

/* Free GPU milli of n. */
static int64_t gpu_free(const struct onode *n)
{
    int64_t s = 0;

    for (int i = 0; i < n->n_gpus; i++)
        s += n->g[i];
    return s;
}

/* How well t fits on n with `mask` (lower is better), folded into one
 * double: the GPU gap it leaves first (whole GPUs: free whole GPUs left on
 * the node; a fraction: milli left on its GPU), then the CPU left beyond
 * what the node's free GPUs need at the mean CPU per GPU milli, least
 * first, a shortfall after any surplus. */
static double fit_cost(const struct pack *p, const struct onode *n, const struct otask *t,
                       uint32_t mask)
{
    double gap = 0, surplus;
    int64_t cpu_after = n->cpu - t->cpu;

    if (t->num_gpu > 0 && t->milli >= ALLOT_MILLI) {
        for (int i = 0; i < n->n_gpus; i++)
            gap += n->g[i] == ALLOT_MILLI && !(mask >> i & 1);
        gap *= ALLOT_MILLI;
    } else if (t->num_gpu > 0) {
        gap = n->g[__builtin_ctz(mask)] - t->milli;
    }
    surplus = (double)cpu_after - p->cpu_per_milli * (double)(gpu_free(n) - task_request(t));
    return gap * 1e9 + (surplus >= 0 ? surplus : 1e8 - surplus);
}

/* The best node for t (or -1) and its mask; `skip` is a node to leave out. */
static int best_node(const struct pack *p, const struct otask *t, int skip, uint32_t *mask)
{
    int best = -1;
    double best_cost = HUGE_VAL;

    *mask = 0;
    for (size_t i = 0; i < p->n_nodes; i++) {
        uint32_t m;
        double c;
        if ((int)i == skip || !pick_gpus(&p->node[i], t, &m))
            continue;
        c = fit_cost(p, &p->node[i], t, m);
        if (c < best_cost) {
            best_cost = c;
            best = (int)i;
            *mask = m;
        }
    }
    return best;
}

/* Sort order: GPU tasks before CPU-only ones, larger GPU asks first (more
 * GPUs, then more milli per GPU), more CPU first, then input order. */
static const struct pack *sort_pack; /* qsort has no context argument */

static int cmp_task(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    const struct otask *s = &sort_pack->task[x], *t = &sort_pack->task[y];

    if (s->num_gpu != t->num_gpu)
        return s->num_gpu > t->num_gpu ? -1 : 1;
    if (s->milli != t->milli)
        return s->milli > t->milli ? -1 : 1;
    if (s->cpu != t->cpu)
        return s->cpu > t->cpu ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void sort_tasks(struct pack *p, size_t *order)
{
    for (size_t i = 0; i < p->n_tasks; i++)
        order[i] = i;
    sort_pack = p;
    qsort(order, p->n_tasks, sizeof(*order), cmp_task);
    sort_pack = NULL;
}

/* Places every task on its best node: the GPU tasks in `order` and the
 * CPU-only ones first (cpu_first: they take their CPU before the GPU tasks
 * compete for it) or last (they get what CPU is left). */
static void greedy(struct pack *p, const size_t *order, bool cpu_first)
{
    for (int pass = 0; pass < 2; pass++) {
        bool cpu_pass = cpu_first ? pass == 0 : pass == 1;
        for (size_t k = 0; k < p->n_tasks; k++) {
            const struct otask *t = &p->task[order[k]];
            uint32_t m;
            int ni;
            if ((t->num_gpu == 0) != cpu_pass)
                continue;
            ni = best_node(p, t, -1, &m);
            if (ni >= 0)
                put(p, order[k], (size_t)ni, m);
        }
    }
}

/*
 * One pass of the local search: for every GPU task that is not placed,
 * largest first, look for a node where taking one placed task with a
 * smaller GPU request off makes room; the task taken off goes to its best
 * other node, or (a GPU task only) stays out when the trade still gains
 * GPU milli. Returns true when something improved.
 */
static bool search_pass(struct pack *p, const size_t *order, size_t *on_node, size_t *cnt,
                        size_t *start)
{
    bool improved = false;
    /* the least CPU of a CPU-only task that found no other node since the
     * last move: larger ones are not tried (CPU only shrinks meanwhile, so
     * they would not find one either, short of the node they sit on) */
    int64_t stuck_cpu = INT64_MAX;

    /* tasks per node, rebuilt per pass */
    memset(cnt, 0, p->n_nodes * sizeof(*cnt));
    for (size_t i = 0; i < p->n_tasks; i++)
        if (p->task[i].node >= 0)
            cnt[p->task[i].node]++;
    start[0] = 0;
    for (size_t n = 0; n < p->n_nodes; n++)
        start[n + 1] = start[n] + cnt[n];
    memset(cnt, 0, p->n_nodes * sizeof(*cnt));
    for (size_t i = 0; i < p->n_tasks; i++)
        if (p->task[i].node >= 0) {
            size_t n = (size_t)p->task[i].node;
            on_node[start[n] + cnt[n]++] = i;
        }
    for (size_t k = 0; k < p->n_tasks; k++) {
        size_t fi = order[k];
        struct otask *f = &p->task[fi];
        bool done = false;
        if (f->node >= 0 || f->num_gpu == 0)
            continue;
        for (size_t n = 0; n < p->n_nodes && !done; n++) {
            struct onode *nd = &p->node[n];
            if (f->mask && (nd->model < 0 || !(f->mask >> nd->model & 1)))
                continue;
            if (nd->n_gpus < f->num_gpu)
                continue;
            for (size_t j = start[n]; j < start[n] + cnt[n] && !done; j++) {
                size_t ei = on_node[j];
                struct otask *e = &p->task[ei];
                uint32_t fm, em, eg;
                int other;
                if (e->node != (int)n || task_request(e) >= task_request(f) ||
                    (e->num_gpu == 0 && e->cpu >= stuck_cpu))
                    continue;
                eg = e->gpus;
                take(p, ei);
                if (!pick_gpus(nd, f, &fm)) {
                    put(p, ei, n, eg);
                    continue;
                }
                put(p, fi, n, fm);
                other = best_node(p, e, (int)n, &em);
                if (other >= 0) {
                    put(p, ei, (size_t)other, em);
                } else if (e->num_gpu == 0) {
                    /* CPU-only pods are never dropped to make room */
                    take(p, fi);
                    put(p, ei, n, eg);
                    stuck_cpu = e->cpu;
                    continue;
                }
                done = true;
                improved = true;
                stuck_cpu = INT64_MAX;
            }
        }
    }
    return improved;
}

/*
 * Places the tasks in input (arrival) order with a scheduler policy
 * (`policy`; the exact mix of these tasks is handed in, fgd uses it, allot
 * learns its own) on a fresh cluster whose ranks are shuffled by `seed`, and
 * records the placements in p (reset to `fresh` first). Returns 0 or
 * ALLOT_ENOMEM / ALLOT_EINVAL.
 */
static int sched_seed(struct pack *p, const struct onode *fresh, const struct allot_catalog *cat,
                      const struct allot_node_spec *nodes, const struct allot_task *tasks,
                      const char *policy, uint64_t seed)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    struct allot_frag_mix mix = {0};
    struct allot_sched *s = NULL;
    char err[256];
    int rc = ALLOT_ENOMEM;

    pack_reset(p, fresh);
    if (!c)
        goto done;
    for (size_t i = 0; i < p->n_nodes; i++) {
        rc = allot_cluster_add_node(c, &nodes[i], err, sizeof(err));
        if (rc < 0)
            goto done;
    }
    allot_cluster_shuffle_ranks(c, seed);
    rc = allot_frag_mix_build(tasks, p->n_tasks, SIM_FILL_COVERAGE, &mix);
    if (rc)
        goto done;
    {
        struct allot_sched_opts so = {.seed = seed, .mix = &mix};
        s = allot_sched_new(c, allot_sched_policy_find(policy), &so);
    }
    rc = ALLOT_ENOMEM;
    if (!s)
        goto done;
    for (size_t k = 0; k < p->n_tasks; k++) {
        struct allot_placement pl;
        int r;
        allot_sched_observe(s, &tasks[k]);
        r = allot_sched_place(s, &tasks[k], &pl, NULL, 0);
        if (r == ALLOT_ENOSPC)
            continue;
        if (r) {
            rc = r;
            goto done;
        }
        put(p, k, (size_t)pl.node, pl.gpu_mask);
    }
    rc = 0;
done:
    allot_sched_free(s);
    allot_frag_mix_clear(&mix);
    allot_cluster_free(c);
    return rc;
}

static void pack_reset(struct pack *p, const struct onode *fresh)
{
    memcpy(p->node, fresh, p->n_nodes * sizeof(*p->node));
    for (size_t i = 0; i < p->n_tasks; i++) {
        p->task[i].node = -1;
        p->task[i].gpus = 0;
    }
    p->used = 0;
}

int sim_offline_pack(const struct allot_catalog *cat, const struct allot_node_spec *nodes,
                     size_t n_nodes, const struct allot_task *tasks, size_t n_tasks, uint64_t seed,
                     int search_rounds, struct sim_offline_result *out)
{
    /* the starts: a CPU-aware greedy over the tasks sorted largest first
     * (CPU-only tasks first, then last), and the online policies fed the
     * tasks in arrival order (fgd with the exact mix of these tasks) */
    static const char *const starts[] = {"greedy-cpu-first", "greedy-cpu-last", "fgd", "allot"};
    struct pack p = {.n_nodes = n_nodes, .n_tasks = n_tasks};
    struct onode *fresh = NULL;
    size_t *order = NULL, *on_node = NULL, *cnt = NULL, *start = NULL;
    double cpu_sum = 0, milli_sum = 0;
    int rc = ALLOT_ENOMEM;
    bool have = false;

    memset(out, 0, sizeof(*out));
    p.node = allot_calloc(n_nodes ? n_nodes : 1, sizeof(*p.node));
    fresh = allot_calloc(n_nodes ? n_nodes : 1, sizeof(*fresh));
    p.task = allot_calloc(n_tasks ? n_tasks : 1, sizeof(*p.task));
    order = allot_calloc(n_tasks ? n_tasks : 1, sizeof(*order));
    on_node = allot_calloc(n_tasks ? n_tasks : 1, sizeof(*on_node));
    cnt = allot_calloc(n_nodes + 1, sizeof(*cnt));
    start = allot_calloc(n_nodes + 1, sizeof(*start));
    if (!p.node || !fresh || !p.task || !order || !on_node || !cnt || !start)
        goto done;
    for (size_t i = 0; i < n_nodes; i++) {
        const struct allot_node_spec *s = &nodes[i];
        struct onode *n = &fresh[i];
        n->model = s->n_gpus ? allot_catalog_find_model(cat, s->model) : -1;
        if (s->n_gpus && n->model < 0) {
            rc = ALLOT_EINVAL;
            goto done;
        }
        n->n_gpus = s->n_gpus < ALLOT_MAX_GPUS ? s->n_gpus : ALLOT_MAX_GPUS;
        n->cpu = s->cpu_milli;
        n->mem = s->mem_mib;
        for (int g = 0; g < n->n_gpus; g++)
            n->g[g] = ALLOT_MILLI;
    }
    for (size_t i = 0; i < n_tasks; i++) {
        const struct allot_task *t = &tasks[i];
        p.task[i] = (struct otask){.num_gpu = t->num_gpu,
                                   .milli = t->num_gpu ? t->gpu_milli : 0,
                                   .cpu = t->cpu_milli,
                                   .mem = t->mem_mib,
                                   .mask = t->model_mask,
                                   .node = -1};
        out->request_milli += task_request(&p.task[i]);
        if (t->num_gpu) {
            cpu_sum += (double)t->cpu_milli;
            milli_sum += (double)task_request(&p.task[i]);
        }
    }
    p.cpu_per_milli = milli_sum > 0 ? cpu_sum / milli_sum : 0;
    sort_tasks(&p, order);
    for (size_t v = 0; v < sizeof(starts) / sizeof(starts[0]); v++) {
        struct sim_offline_result r = {.request_milli = out->request_milli};
        pack_reset(&p, fresh);
        if (!strncmp(starts[v], "greedy", 6)) {
            greedy(&p, order, !strcmp(starts[v], "greedy-cpu-first"));
        } else {
            rc = sched_seed(&p, fresh, cat, nodes, tasks, starts[v], seed);
            if (rc)
                goto done;
        }
        for (int round = 0; round < search_rounds; round++)
            if (!search_pass(&p, order, on_node, cnt, start))
                break;
        r.used_milli = p.used;
        for (size_t i = 0; i < n_tasks; i++)
            if (p.task[i].node < 0) {
                if (p.task[i].num_gpu)
                    r.failed_gpu++;
                else
                    r.failed_cpu++;
            }
        /* the most GPU placed, then the fewest CPU-only pods left out */
        if (!have || r.used_milli > out->used_milli ||
            (r.used_milli == out->used_milli && r.failed_cpu < out->failed_cpu)) {
            *out = r;
            have = true;
        }
    }
    rc = 0;
done:
    allot_free(p.node);
    allot_free(fresh);
    allot_free(p.task);
    allot_free(order);
    allot_free(on_node);
    allot_free(cnt);
    allot_free(start);
    return rc;
}

#define SEARCH_ROUNDS 3

int sim_offline_fill(const struct sim_fill_trace *t, uint64_t seed, double tune, const int *points,
                     int n_points, struct sim_offline_result *out)
{
    struct sim_fill_workload w;
    struct allot_task *prefix = NULL;
    int64_t cap = t->gpus * ALLOT_MILLI;
    int rc = sim_fill_workload_make(t, seed, tune, &w);

    if (rc)
        return rc;
    prefix = allot_calloc(w.n ? w.n : 1, sizeof(*prefix));
    if (!prefix) {
        sim_fill_workload_free(&w);
        return ALLOT_ENOMEM;
    }
    for (int i = 0; i < n_points && rc == 0; i++) {
        int64_t arrived = 0;
        size_t k = 0;
        for (; k < w.n; k++) {
            const struct allot_task *x = &t->tasks[w.task[k]];
            int64_t req = (int64_t)x->num_gpu * (x->num_gpu ? x->gpu_milli : 0);
            if ((arrived + req) * 100 > (int64_t)points[i] * cap)
                break;
            arrived += req;
            prefix[k] = *x;
        }
        rc =
            sim_offline_pack(t->cat, t->nodes, t->n_nodes, prefix, k, seed, SEARCH_ROUNDS, &out[i]);
    }
    allot_free(prefix);
    sim_fill_workload_free(&w);
    return rc;
}

#define MAX_JOBS 64

/* What a worker sends back for one seed. */
struct wire {
    int32_t rc;
    struct sim_offline_result r[SIM_OFFLINE_MAX_POINTS];
};

/* Runs seeds[first..first+n) (n <= MAX_JOBS) on n forked workers; results
 * into v[seed index * n_points + point]. */
static int run_batch(const struct sim_fill_trace *t, const uint64_t *seeds, int first, int n,
                     double tune, const int *points, int n_points, struct sim_offline_result *v)
{
    int fd[MAX_JOBS];
    pid_t pid[MAX_JOBS];
    int rc = 0;

    for (int i = 0; i < n; i++) {
        fd[i] = -1;
        pid[i] = -1;
    }
    fflush(NULL); /* the children must not inherit unwritten stdio buffers */
    for (int i = 0; i < n && rc == 0; i++) {
        int pp[2];
        if (pipe(pp) < 0) {
            rc = ALLOT_EIO;
            break;
        }
        pid[i] = fork();
        if (pid[i] < 0) {
            close(pp[0]);
            close(pp[1]);
            rc = ALLOT_EIO;
            break;
        }
        if (pid[i] == 0) {
            struct wire w = {0};
            close(pp[0]);
            for (int k = 0; k < i; k++)
                close(fd[k]);
            w.rc = sim_offline_fill(t, seeds[first + i], tune, points, n_points, w.r);
            _exit(fdio_write_all(pp[1], &w, sizeof(w)) ? 1 : 0);
        }
        close(pp[1]);
        fd[i] = pp[0];
    }
    for (int i = 0; i < n; i++) {
        struct wire w;
        if (fd[i] >= 0) {
            if (fdio_read_all(fd[i], &w, sizeof(w)) || w.rc)
                rc = rc ? rc : (w.rc ? w.rc : ALLOT_EIO);
            else
                memcpy(v + (size_t)(first + i) * (size_t)n_points, w.r,
                       (size_t)n_points * sizeof(*w.r));
            close(fd[i]);
        }
        if (pid[i] > 0)
            while (waitpid(pid[i], NULL, 0) < 0 && errno == EINTR)
                ;
    }
    return rc;
}

int sim_offline_fill_seeds(const struct sim_fill_trace *t, const uint64_t *seeds, int n_seeds,
                           double tune, int workers, const int *points, int n_points,
                           struct sim_offline_result *out)
{
    int rc = 0;

    if (n_points <= 0 || n_points > SIM_OFFLINE_MAX_POINTS || n_seeds <= 0)
        return ALLOT_EINVAL;
    workers = workers < 1 ? 1 : workers > MAX_JOBS ? MAX_JOBS : workers;
    for (int s = 0; s < n_seeds && rc == 0; s += workers) {
        int n = n_seeds - s < workers ? n_seeds - s : workers;
        if (n == 1)
            rc = sim_offline_fill(t, seeds[s], tune, points, n_points,
                                  out + (size_t)s * (size_t)n_points);
        else
            rc = run_batch(t, seeds, s, n, tune, points, n_points, out);
    }
    return rc;
}

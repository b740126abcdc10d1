/*
 * allot-sim fill: the openb fill experiment (see fill.h and
 * docs/BENCHMARKS.md section 1).
 *
 * What a job measures, after every arrival (placed or failed): arrived GPU
 * milli, allocated GPU milli and the cluster's fragmentation F under the
 * original trace's typical-task mix. Arrivals are filed by arrived % of
 * capacity rounded to an integer (half to even, like the authors' pandas
 * round); a bucket's value is the mean over its arrivals and an empty
 * bucket takes the mean over its two neighbours (the authors' analysis
 * script does the same). F is kept per node in fixed point (1e-6 milli) and
 * updated only for the node a placement touched, so the fragmentation rate
 * costs one allot_frag_node() per placement and the sum stays exact and
 * deterministic.
 *
 * Workers: with jobs > 1 each policy x seed job runs in a forked child that
 * writes its result and decision-log text to a pipe and exits; the parent
 * polls the pipes, and writes the logs to the sink in job order as soon as
 * every earlier job is in. The child computes exactly what the in-process
 * path computes, so the results do not depend on the number of workers.
 */
#include "fill.h"
#include "fdio.h"

#include "cliopt.h"
#include "offline.h"
#include "svgplot.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FRAG_FIXED 1e6 /* fragmentation kept in 1e-6 milli-GPU units */
#define MAX_SEEDS  100000
#define MAX_JOBS   256

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- text buffer and hash ------------------------------------------------ */

void sim_fill_text_add(struct sim_fill_text *x, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (x->err)
        return;
    for (;;) {
        size_t room = x->cap - x->len;
        va_start(ap, fmt);
        n = vsnprintf(x->buf ? x->buf + x->len : NULL, x->buf ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            x->err = ALLOT_EINVAL;
            return;
        }
        if (x->buf && (size_t)n < room) {
            x->len += (size_t)n;
            return;
        }
        if (allot_grow((void **)&x->buf, &x->cap, x->len + (size_t)n + 1 + 4096, 1)) {
            x->err = ALLOT_ENOMEM;
            return;
        }
    }
}

void sim_fill_text_free(struct sim_fill_text *x)
{
    if (!x)
        return;
    allot_free(x->buf);
    memset(x, 0, sizeof(*x));
}

uint64_t sim_fill_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* ---- trace conversion ----------------------------------------------------- */

void sim_fill_trace_free(struct sim_fill_trace *t)
{
    if (!t)
        return;
    allot_catalog_free(t->cat);
    openb_nodes_free(&t->onodes);
    openb_pods_free(&t->opods);
    allot_free(t->nodes);
    allot_free(t->tasks);
    allot_frag_mix_clear(&t->mix);
    memset(t, 0, sizeof(*t));
}

/* Model mask of a gpu_spec ("" = any). Returns 0 or ALLOT_EINVAL with the
 * offending entry in `bad`. */
static int spec_mask(const struct allot_catalog *cat, const char *spec, uint64_t *mask, char *bad,
                     size_t badlen)
{
    const char *p = spec;

    *mask = 0;
    if (!*spec)
        return 0;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        char name[ALLOT_MODEL_NAME_MAX];
        int m = -1;
        if (len > 0 && len < sizeof(name)) {
            memcpy(name, p, len);
            name[len] = '\0';
            m = allot_catalog_find_model(cat, name);
        }
        if (m < 0) {
            allot_fmt(bad, badlen, "%.*s", (int)(len < 64 ? len : 64), p);
            return ALLOT_EINVAL;
        }
        *mask |= 1ULL << m;
        if (!bar)
            return 0;
        p = bar + 1;
    }
}

static void set_workload_name(struct sim_fill_trace *t, const char *pods_file)
{
    const char *base = strrchr(pods_file, '/');
    size_t len;

    base = base ? base + 1 : pods_file;
    len = strlen(base);
    if (len > 4 && strcmp(base + len - 4, ".csv") == 0)
        len -= 4;
    if (len >= sizeof(t->workload))
        len = sizeof(t->workload) - 1;
    memcpy(t->workload, base, len);
    t->workload[len] = '\0';
}

int sim_fill_trace_from_lists(struct sim_fill_trace *out, struct openb_nodes *nodes,
                              struct openb_pods *pods, const char *nodes_file,
                              const char *pods_file, char *err, size_t errlen)
{
    int rc = ALLOT_EINVAL;

    memset(out, 0, sizeof(*out));
    out->onodes = *nodes;
    out->opods = *pods;
    memset(nodes, 0, sizeof(*nodes));
    memset(pods, 0, sizeof(*pods));
    set_workload_name(out, pods_file);
    out->cat = allot_catalog_default(err, errlen);
    if (!out->cat)
        goto fail;
    out->nodes = allot_calloc(out->onodes.n ? out->onodes.n : 1, sizeof(*out->nodes));
    out->tasks = allot_calloc(out->opods.n ? out->opods.n : 1, sizeof(*out->tasks));
    if (!out->nodes || !out->tasks)
        goto oom;
    for (size_t i = 0; i < out->onodes.n; i++) {
        const struct openb_node *o = &out->onodes.v[i];
        struct allot_node_spec *s = &out->nodes[out->n_nodes];
        if (o->gpu == 0)
            continue; /* CPU-only nodes take no part (BENCHMARKS.md) */
        if (allot_catalog_find_model(out->cat, o->model) < 0) {
            allot_fmt(err, errlen, "%s:%zu: GPU model \"%s\" is not in the GPU catalog", nodes_file,
                      i + 2, o->model);
            goto fail;
        }
        if (o->gpu > ALLOT_MAX_GPUS) {
            allot_fmt(err, errlen, "%s:%zu: %d GPUs on one node; at most %d are supported",
                      nodes_file, i + 2, o->gpu, ALLOT_MAX_GPUS);
            goto fail;
        }
        *s = (struct allot_node_spec){.name = o->name,
                                      .model = o->model,
                                      .cpu_milli = o->cpu_milli,
                                      .mem_mib = o->memory_mib,
                                      .n_gpus = o->gpu,
                                      .gpu_mode = ALLOT_GPU_SHARED};
        out->gpus += o->gpu;
        out->n_nodes++;
    }
    if (out->n_nodes == 0) {
        allot_fmt(err, errlen, "%s: no node with GPUs", nodes_file);
        goto fail;
    }
    out->n_tasks = out->opods.n;
    for (size_t i = 0; i < out->opods.n; i++) {
        const struct openb_pod *p = &out->opods.v[i];
        struct allot_task *t = &out->tasks[i];
        char bad[80], msg[160];
        *t = (struct allot_task){.num_gpu = p->num_gpu,
                                 .gpu_milli = p->num_gpu ? p->gpu_milli : 0,
                                 .cpu_milli = p->cpu_milli,
                                 .mem_mib = out->opods.has_memory ? p->memory_mib : 0,
                                 .mig_profile = -1};
        if (spec_mask(out->cat, p->gpu_spec, &t->model_mask, bad, sizeof(bad))) {
            allot_fmt(err, errlen, "%s:%zu: gpu_spec entry \"%s\" is not in the GPU catalog",
                      pods_file, i + 2, bad);
            goto fail;
        }
        if (allot_task_validate(out->cat, t, msg, sizeof(msg))) {
            allot_fmt(err, errlen, "%s:%zu: %s", pods_file, i + 2, msg);
            goto fail;
        }
        out->request_milli += (int64_t)t->num_gpu * t->gpu_milli;
    }
    rc = allot_frag_mix_build(out->tasks, out->n_tasks, SIM_FILL_COVERAGE, &out->mix);
    if (rc == ALLOT_ENOMEM)
        goto oom;
    if (rc) {
        allot_fmt(err, errlen, "%s: cannot build the typical-task mix", pods_file);
        goto fail;
    }
    return 0;
oom:
    rc = ALLOT_ENOMEM;
    allot_fmt(err, errlen, "out of memory");
fail:
    sim_fill_trace_free(out);
    return rc;
}

int sim_fill_trace_load(struct sim_fill_trace *out, const char *nodes_path, const char *pods_path,
                        char *err, size_t errlen)
{
    struct openb_nodes nodes = {0};
    struct openb_pods pods = {0};
    int rc;

    memset(out, 0, sizeof(*out));
    rc = openb_read_nodes(nodes_path, &nodes, err, errlen);
    if (rc)
        return rc;
    rc = openb_read_pods(pods_path, &pods, err, errlen);
    if (rc) {
        openb_nodes_free(&nodes);
        return rc;
    }
    return sim_fill_trace_from_lists(out, &nodes, &pods, nodes_path, pods_path, err, errlen);
}

/* ---- workload --------------------------------------------------------------- */

void sim_fill_workload_free(struct sim_fill_workload *w)
{
    if (!w)
        return;
    allot_free(w->task);
    allot_free(w->clone);
    memset(w, 0, sizeof(*w));
}

static int64_t task_request(const struct allot_task *t)
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
            total += task_request(c);
        }
    } else if (tune > 0 && total > 0 && (double)total > target) {
        while ((double)total > target && out->n > 0) {
            size_t j = (size_t)allot_rng_below(&r, out->n);
            total -= task_request(&t->tasks[out->task[j]]);
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

/* ---- one job ------------------------------------------------------------------ */

/* round(num / den) with ties to even, den > 0, num >= 0. */
static int64_t round_half_even(int64_t num, int64_t den)
{
    int64_t q = num / den, r = num % den;

    if (2 * r > den || (2 * r == den && (q & 1)))
        q++;
    return q;
}

static int64_t frag_fixed(double f)
{
    return llround(f * FRAG_FIXED);
}

/* One decision-log line; node NULL for a pod that found no node. */
static void log_line(struct sim_fill_text *log, const char *policy, uint64_t seed, size_t k,
                     const char *pod, int32_t clone, const char *node, uint32_t mask)
{
    char suffix[32] = "";

    if (!log)
        return;
    if (clone >= 0)
        allot_fmt(suffix, sizeof(suffix), "-tuned-%d", clone);
    if (node)
        sim_fill_text_add(log, "%s\t%llu\t%zu\t%s%s\t%s\t0x%x\n", policy, (unsigned long long)seed,
                          k, pod, suffix, node, mask);
    else
        sim_fill_text_add(log, "%s\t%llu\t%zu\t%s%s\t-\t-\n", policy, (unsigned long long)seed, k,
                          pod, suffix);
}

int sim_fill_run(const struct sim_fill_trace *t, const struct allot_sched_policy_ops *policy,
                 uint64_t seed, double tune, bool check, struct sim_fill_text *log,
                 struct sim_fill_result *out, char *err, size_t errlen)
{
    double t0 = now_s();
    struct allot_cluster *c = NULL;
    struct allot_sched *s = NULL;
    struct sim_fill_workload w = {0};
    int64_t *fq = NULL, fsum = 0, used = 0, arrived = 0;
    int64_t cap = t->gpus * ALLOT_MILLI;
    double asum[SIM_FILL_TRACKED] = {0}, rsum[SIM_FILL_TRACKED] = {0};
    uint64_t cnt[SIM_FILL_TRACKED] = {0};
    int64_t last_bucket = -1;
    int rc;

    memset(out, 0, sizeof(*out));
    c = allot_cluster_new(t->cat, 0);
    fq = allot_calloc(t->n_nodes, sizeof(*fq));
    if (!c || !fq)
        goto oom;
    for (size_t i = 0; i < t->n_nodes; i++) {
        rc = allot_cluster_add_node(c, &t->nodes[i], err, errlen);
        if (rc < 0)
            goto done;
    }
    allot_cluster_shuffle_ranks(c, seed);
    {
        struct allot_sched_opts so = {.seed = seed,
                                      .mix = strcmp(policy->name, "allot") != 0 ? &t->mix : NULL};
        s = allot_sched_new(c, policy, &so);
    }
    if (!s || sim_fill_workload_make(t, seed, tune, &w))
        goto oom;
    for (size_t i = 0; i < t->n_nodes; i++) {
        fq[i] = frag_fixed(allot_frag_node(&t->mix, allot_cluster_node(c, (int)i)));
        fsum += fq[i];
    }
    for (size_t k = 0; k < w.n; k++) {
        const struct allot_task *tk = &t->tasks[w.task[k]];
        const char *pod = t->opods.v[w.task[k]].name;
        struct allot_placement pl;
        char msg[256];
        int64_t b;
        rc = allot_sched_place(s, tk, &pl, msg, sizeof(msg));
        if (rc == 0) {
            const struct allot_node *n = allot_cluster_node(c, pl.node);
            used += (int64_t)__builtin_popcount(pl.gpu_mask) * pl.gpu_milli;
            fsum -= fq[pl.node];
            fq[pl.node] = frag_fixed(allot_frag_node(&t->mix, n));
            fsum += fq[pl.node];
            log_line(log, policy->name, seed, k, pod, w.clone[k], n->name, pl.gpu_mask);
        } else if (rc == ALLOT_ENOSPC) {
            out->failed++;
            log_line(log, policy->name, seed, k, pod, w.clone[k], NULL, 0);
        } else {
            allot_fmt(err, errlen, "%s seed %llu pod %s: %s", policy->name,
                      (unsigned long long)seed, pod, rc == ALLOT_EINVAL ? msg : allot_strerror(rc));
            goto done;
        }
        arrived += task_request(tk);
        b = round_half_even(arrived * 100, cap);
        if (check) {
            rc = allot_sched_check_invariants(s, msg, sizeof(msg));
            if (rc == 0 && used != allot_cluster_used_milli(c)) {
                allot_fmt(msg, sizeof(msg), "used GPU tally %lld, cluster says %lld",
                          (long long)used, (long long)allot_cluster_used_milli(c));
                rc = ALLOT_EINTERNAL;
            }
            if (rc == 0 && b != last_bucket &&
                fabs((double)fsum / FRAG_FIXED - allot_frag_cluster(&t->mix, c)) > 1e-3) {
                allot_fmt(msg, sizeof(msg), "fragmentation tally %.6f, cluster says %.6f",
                          (double)fsum / FRAG_FIXED, allot_frag_cluster(&t->mix, c));
                rc = ALLOT_EINTERNAL;
            }
            if (rc) {
                allot_fmt(err, errlen, "%s seed %llu after pod %zu (%s): invariant broken: %s",
                          policy->name, (unsigned long long)seed, k, pod, msg);
                rc = ALLOT_EINTERNAL;
                goto done;
            }
        }
        last_bucket = b;
        if (b < SIM_FILL_TRACKED) {
            int64_t idle = cap - used;
            asum[b] += (double)used * 100.0 / (double)cap;
            rsum[b] += idle > 0 ? (double)fsum / FRAG_FIXED * 100.0 / (double)idle : 0.0;
            cnt[b]++;
        }
    }
    if (log && log->err) {
        rc = log->err;
        allot_fmt(err, errlen, "decision log: %s", allot_strerror(rc));
        goto done;
    }
    for (int b = 0; b < SIM_FILL_BUCKETS; b++) {
        double a = asum[b], r = rsum[b];
        uint64_t k = cnt[b];
        if (k == 0) {
            /* empty bucket: the mean over its neighbours, as the authors do */
            if (b > 0) {
                a += asum[b - 1];
                r += rsum[b - 1];
                k += cnt[b - 1];
            }
            a += asum[b + 1];
            r += rsum[b + 1];
            k += cnt[b + 1];
        }
        out->alloc_pct[b] = k ? a / (double)k : NAN;
        out->frag_pct[b] = k ? r / (double)k : NAN;
    }
    out->pods = w.n;
    out->arrived_milli = arrived;
    out->used_milli = used;
    out->frag_end = (double)fsum / FRAG_FIXED;
    rc = 0;
    goto done;
oom:
    rc = ALLOT_ENOMEM;
    allot_fmt(err, errlen, "out of memory");
done:
    out->seconds = now_s() - t0;
    sim_fill_workload_free(&w);
    allot_free(fq);
    allot_sched_free(s);
    allot_cluster_free(c);
    return rc;
}

/* ---- the experiment ---------------------------------------------------------- */

struct job_out {
    int rc;
    char err[256];
    struct sim_fill_result res;
    struct sim_fill_text log;
    bool done;
};

static void job_run(const struct sim_fill_trace *t, const struct sim_fill_opts *o, int j,
                    struct job_out *jo)
{
    int pi = j / o->n_seeds, si = j % o->n_seeds;

    jo->rc = sim_fill_run(t, o->policies[pi], o->seeds[si], o->tune, o->check, &jo->log, &jo->res,
                          jo->err, sizeof(jo->err));
}

/* What a worker writes to its pipe, followed by log_len bytes of log. */
struct wire_head {
    uint32_t magic;
    int32_t rc;
    char err[256];
    struct sim_fill_result res;
    uint64_t log_len;
};
#define WIRE_MAGIC 0x46494c4cu

/* The child's side: run the job, send it, exit without flushing stdio. */
static void __attribute__((noreturn))
worker_main(const struct sim_fill_trace *t, const struct sim_fill_opts *o, int j, int fd)
{
    struct job_out jo = {0};
    struct wire_head h = {.magic = WIRE_MAGIC};

    job_run(t, o, j, &jo);
    h.rc = jo.rc;
    memcpy(h.err, jo.err, sizeof(h.err));
    h.res = jo.res;
    h.log_len = jo.rc ? 0 : jo.log.len;
    if (fdio_write_all(fd, &h, sizeof(h)) ||
        (h.log_len && fdio_write_all(fd, jo.log.buf, jo.log.len)))
        _exit(1);
    _exit(0);
}

/* Turns what a worker sent (raw, taken over) into jo. */
static int wire_parse(struct sim_fill_text *raw, struct job_out *jo)
{
    struct wire_head h;

    if (raw->len < sizeof(h))
        return ALLOT_EIO;
    memcpy(&h, raw->buf, sizeof(h));
    if (h.magic != WIRE_MAGIC || raw->len - sizeof(h) != h.log_len)
        return ALLOT_EIO;
    jo->rc = h.rc;
    memcpy(jo->err, h.err, sizeof(jo->err));
    jo->err[sizeof(jo->err) - 1] = '\0';
    jo->res = h.res;
    memmove(raw->buf, raw->buf + sizeof(h), (size_t)h.log_len);
    raw->len = (size_t)h.log_len;
    raw->buf[raw->len] = '\0';
    jo->log = *raw;
    memset(raw, 0, sizeof(*raw));
    return 0;
}

struct slot {
    pid_t pid; /* 0 when free */
    int fd;
    int job;
    struct sim_fill_text in;
};

static void slots_kill(struct slot *sl, int n)
{
    for (int i = 0; i < n; i++) {
        if (sl[i].pid <= 0)
            continue;
        kill(sl[i].pid, SIGTERM);
        close(sl[i].fd);
        while (waitpid(sl[i].pid, NULL, 0) < 0 && errno == EINTR)
            ;
        sim_fill_text_free(&sl[i].in);
        sl[i].pid = 0;
    }
}

/* Reads what is available from a worker; returns 1 at EOF, 0 otherwise,
 * negative on error. */
static int slot_read(struct slot *s)
{
    if (allot_grow((void **)&s->in.buf, &s->in.cap, s->in.len + 65536 + 1, 1))
        return ALLOT_ENOMEM;
    for (;;) {
        ssize_t r = read(s->fd, s->in.buf + s->in.len, s->in.cap - s->in.len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return ALLOT_EIO;
        s->in.len += (size_t)r;
        return r == 0;
    }
}

/* Emits the logs of finished jobs in job order from *next on. */
static int emit_ready(struct job_out *jobs, int n, int *next, const struct sim_fill_opts *o,
                      uint64_t *hash, char *err, size_t errlen)
{
    while (*next < n && jobs[*next].done) {
        struct job_out *jo = &jobs[*next];
        if (jo->rc) {
            allot_fmt(err, errlen, "%s", jo->err);
            return jo->rc;
        }
        *hash = sim_fill_fnv1a(*hash, jo->log.buf, jo->log.len);
        if (o->log && jo->log.len && fwrite(jo->log.buf, 1, jo->log.len, o->log) != jo->log.len) {
            allot_fmt(err, errlen, "decision log: write failed");
            return ALLOT_EIO;
        }
        sim_fill_text_free(&jo->log);
        (*next)++;
    }
    return 0;
}

/* A progress bar on stderr (only when it is a terminal: opts->progress). */
static void progress(const struct sim_fill_opts *o, int done, int n)
{
    if (o->progress)
        fprintf(stderr, "\rfill: [%-30.*s] %d/%d jobs%s", done * 30 / n,
                "##############################", done, n, done == n ? "\n" : "");
}

static int run_forked(const struct sim_fill_trace *t, const struct sim_fill_opts *o,
                      struct job_out *jobs, int n, uint64_t *hash, char *err, size_t errlen)
{
    int nw = o->jobs < n ? o->jobs : n, next = 0, emitted = 0, finished = 0, rc = 0;
    struct slot *sl = allot_calloc((size_t)nw, sizeof(*sl));
    struct pollfd *pf = allot_calloc((size_t)nw, sizeof(*pf));

    if (!sl || !pf) {
        rc = ALLOT_ENOMEM;
        allot_fmt(err, errlen, "out of memory");
        goto out;
    }
    while (finished < n) {
        for (int i = 0; i < nw && next < n; i++) {
            int p[2];
            if (sl[i].pid)
                continue;
            fflush(NULL); /* the child must not inherit unwritten stdio buffers */
            if (pipe(p) < 0) {
                rc = ALLOT_EIO;
                allot_fmt(err, errlen, "pipe: %s", strerror(errno));
                goto out;
            }
            sl[i].pid = fork();
            if (sl[i].pid < 0) {
                sl[i].pid = 0;
                close(p[0]);
                close(p[1]);
                rc = ALLOT_EIO;
                allot_fmt(err, errlen, "fork: %s", strerror(errno));
                goto out;
            }
            if (sl[i].pid == 0) {
                close(p[0]);
                for (int k = 0; k < nw; k++)
                    if (k != i && sl[k].pid)
                        close(sl[k].fd);
                worker_main(t, o, next, p[1]);
            }
            close(p[1]);
            sl[i].fd = p[0];
            sl[i].job = next++;
        }
        int m = 0;
        for (int i = 0; i < nw; i++)
            if (sl[i].pid) {
                pf[m].fd = sl[i].fd;
                pf[m].events = POLLIN;
                pf[m].revents = 0;
                m++;
            }
        if (poll(pf, (nfds_t)m, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = ALLOT_EIO;
            allot_fmt(err, errlen, "poll: %s", strerror(errno));
            goto out;
        }
        for (int i = 0, q = 0; i < nw; i++) {
            int st = 0, r;
            struct job_out *jo;
            if (!sl[i].pid)
                continue;
            if (!pf[q++].revents)
                continue;
            r = slot_read(&sl[i]);
            if (r < 0) {
                rc = r;
                allot_fmt(err, errlen, "reading a worker: %s", allot_strerror(r));
                goto out;
            }
            if (r == 0)
                continue;
            close(sl[i].fd);
            while (waitpid(sl[i].pid, &st, 0) < 0 && errno == EINTR)
                ;
            sl[i].pid = 0;
            jo = &jobs[sl[i].job];
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || wire_parse(&sl[i].in, jo)) {
                rc = ALLOT_EIO;
                allot_fmt(err, errlen, "the worker for %s seed %llu died",
                          o->policies[sl[i].job / o->n_seeds]->name,
                          (unsigned long long)o->seeds[sl[i].job % o->n_seeds]);
                sim_fill_text_free(&sl[i].in);
                goto out;
            }
            jo->done = true;
            finished++;
            if (jo->rc) {
                rc = jo->rc;
                allot_fmt(err, errlen, "%s", jo->err);
                goto out;
            }
            progress(o, finished, n);
            rc = emit_ready(jobs, n, &emitted, o, hash, err, errlen);
            if (rc)
                goto out;
        }
    }
out:
    if (sl)
        slots_kill(sl, nw);
    allot_free(sl);
    allot_free(pf);
    return rc;
}

/* Mean and sample sd of the finite values among v[0..n). */
static void mean_sd(const double *v, int n, double *mean, double *sd)
{
    double s = 0, ss = 0;
    int k = 0;

    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) {
            s += v[i];
            k++;
        }
    *mean = k ? s / k : NAN;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]))
            ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = k > 1 ? sqrt(ss / (k - 1)) : (k ? 0.0 : NAN);
}

int sim_fill_experiment(const struct sim_fill_trace *t, const struct sim_fill_opts *o,
                        struct sim_fill_summary *out, uint64_t *hash, char *err, size_t errlen)
{
    int n = o->n_policies * o->n_seeds, rc = 0, emitted = 0;
    struct job_out *jobs;
    double *v = NULL, *f = NULL, sd;

    *hash = SIM_FILL_FNV_INIT;
    if (n <= 0) {
        allot_fmt(err, errlen, "no policy or no seed");
        return ALLOT_EINVAL;
    }
    jobs = allot_calloc((size_t)n, sizeof(*jobs));
    v = allot_calloc((size_t)o->n_seeds, sizeof(*v));
    f = allot_calloc((size_t)o->n_seeds, sizeof(*f));
    if (!jobs || !v || !f) {
        rc = ALLOT_ENOMEM;
        allot_fmt(err, errlen, "out of memory");
        goto out;
    }
    progress(o, 0, n);
    if (o->jobs > 1 && n > 1) {
        rc = run_forked(t, o, jobs, n, hash, err, errlen);
    } else {
        for (int j = 0; j < n && !rc; j++) {
            job_run(t, o, j, &jobs[j]);
            jobs[j].done = true;
            progress(o, j + 1, n);
            rc = emit_ready(jobs, n, &emitted, o, hash, err, errlen);
        }
    }
    if (rc)
        goto out;
    for (int p = 0; p < o->n_policies; p++) {
        struct sim_fill_summary *s = &out[p];
        memset(s, 0, sizeof(*s));
        s->policy = o->policies[p];
        for (int i = 0; i < o->n_seeds; i++) {
            const struct sim_fill_result *r = &jobs[p * o->n_seeds + i].res;
            s->seconds += r->seconds;
            s->failed += r->failed;
            s->pods += r->pods;
        }
        for (int b = 0; b < SIM_FILL_BUCKETS; b++) {
            for (int i = 0; i < o->n_seeds; i++) {
                const struct sim_fill_result *r = &jobs[p * o->n_seeds + i].res;
                v[i] = 100.0 - r->alloc_pct[b];
                f[i] = r->frag_pct[b];
            }
            mean_sd(v, o->n_seeds, &s->unalloc_mean[b], &s->unalloc_sd[b]);
            mean_sd(f, o->n_seeds, &s->frag_mean[b], &sd);
        }
    }
out:
    for (int j = 0; jobs && j < n; j++)
        sim_fill_text_free(&jobs[j].log);
    allot_free(jobs);
    allot_free(v);
    allot_free(f);
    return rc;
}

/* ---- published results ---------------------------------------------------------- */

void sim_fill_published_free(struct sim_fill_published *p)
{
    if (!p)
        return;
    allot_free(p->v);
    memset(p, 0, sizeof(*p));
}

/* Splits line (modified in place) at commas into at most max fields. */
static int split_fields(char *line, char **f, int max)
{
    int n = 0;

    for (char *p = line;;) {
        char *c = strchr(p, ',');
        if (n == max)
            return -1;
        f[n++] = p;
        if (!c)
            return n;
        *c = '\0';
        p = c + 1;
    }
}

static bool parse_double(const char *s, double *v)
{
    char *end;

    if (!*s)
        return false;
    errno = 0;
    *v = strtod(s, &end);
    return *end == '\0' && errno == 0 && isfinite(*v);
}

/* "06-FGD" -> "fgd"; "03-GpuClustering" -> "gpuclustering". */
static void policy_name(const char *sc, char *out, size_t outlen)
{
    const char *dash = strchr(sc, '-');
    size_t i = 0;

    for (const char *p = dash ? dash + 1 : sc; *p && i + 1 < outlen; p++)
        out[i++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    out[i] = '\0';
}

#define PUB_MAX_FIELDS 256
#define PUB_MAX_LINE   16384 /* bytes per line of the published CSV, with newline */

int sim_fill_published_read(const char *path, struct sim_fill_published *out, char *err,
                            size_t errlen)
{
    size_t cap = 0, lineno = 0;
    int rc = ALLOT_EINVAL, col_w = -1, col_p = -1, col_t = -1, col_s = -1, nh = 0;
    int bucket_of[PUB_MAX_FIELDS];
    char line[PUB_MAX_LINE], *f[PUB_MAX_FIELDS];
    FILE *in = fopen(path, "r");

    memset(out, 0, sizeof(*out));
    if (!in) {
        allot_fmt(err, errlen, "%s: %s", path, strerror(errno));
        return ALLOT_EIO;
    }
    while (fgets(line, sizeof(line), in)) {
        size_t len = strlen(line);
        int nf;
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        else if (!feof(in)) {
            allot_fmt(err, errlen, "%s:%zu: line longer than %d bytes", path, lineno,
                      PUB_MAX_LINE - 2);
            goto fail;
        }
        if (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        nf = split_fields(line, f, PUB_MAX_FIELDS);
        if (nf < 0) {
            allot_fmt(err, errlen, "%s:%zu: more than %d columns", path, lineno, PUB_MAX_FIELDS);
            goto fail;
        }
        if (lineno == 1) {
            nh = nf;
            for (int i = 0; i < nf; i++) {
                double b;
                bucket_of[i] = -1;
                if (!strcmp(f[i], "workload"))
                    col_w = i;
                else if (!strcmp(f[i], "sc_policy"))
                    col_p = i;
                else if (!strcmp(f[i], "tune"))
                    col_t = i;
                else if (!strcmp(f[i], "seed"))
                    col_s = i;
                else if (parse_double(f[i], &b) && b >= 0 && b < SIM_FILL_BUCKETS && b == floor(b))
                    bucket_of[i] = (int)b;
            }
            if (col_w < 0 || col_p < 0 || col_t < 0 || col_s < 0) {
                allot_fmt(err, errlen, "%s:1: header lacks one of workload, sc_policy, tune, seed",
                          path);
                goto fail;
            }
            continue;
        }
        if (nf != nh) {
            allot_fmt(err, errlen, "%s:%zu: %d columns, the header has %d", path, lineno, nf, nh);
            goto fail;
        }
        if (allot_grow((void **)&out->v, &cap, out->n + 1, sizeof(*out->v))) {
            rc = ALLOT_ENOMEM;
            allot_fmt(err, errlen, "out of memory");
            goto fail;
        }
        {
            struct sim_fill_pub_row *r = &out->v[out->n];
            double seed;
            for (int b = 0; b < SIM_FILL_BUCKETS; b++)
                r->alloc[b] = NAN;
            allot_strlcpy(r->workload, f[col_w], sizeof(r->workload));
            policy_name(f[col_p], r->policy, sizeof(r->policy));
            if (!parse_double(f[col_t], &r->tune) || !parse_double(f[col_s], &seed)) {
                allot_fmt(err, errlen, "%s:%zu: tune or seed is not a number", path, lineno);
                goto fail;
            }
            r->seed = (long)seed;
            for (int i = 0; i < nf; i++) {
                if (bucket_of[i] < 0 || !*f[i])
                    continue;
                if (!parse_double(f[i], &r->alloc[bucket_of[i]])) {
                    allot_fmt(err, errlen, "%s:%zu: column %d: \"%.32s\" is not a number", path,
                              lineno, i + 1, f[i]);
                    goto fail;
                }
            }
            out->n++;
        }
    }
    if (ferror(in)) {
        rc = ALLOT_EIO;
        allot_fmt(err, errlen, "%s: read error", path);
        goto fail;
    }
    if (lineno == 0) {
        allot_fmt(err, errlen, "%s: empty file", path);
        goto fail;
    }
    fclose(in);
    return 0;
fail:
    fclose(in);
    sim_fill_published_free(out);
    return rc;
}

double sim_fill_published_unalloc(const struct sim_fill_published *p, const char *workload,
                                  const char *policy, double tune, int bucket, int *n_seeds)
{
    double s = 0;
    int k = 0;

    for (size_t i = 0; p && bucket >= 0 && bucket < SIM_FILL_BUCKETS && i < p->n; i++) {
        const struct sim_fill_pub_row *r = &p->v[i];
        if (strcmp(r->workload, workload) != 0 || strcmp(r->policy, policy) != 0 ||
            fabs(r->tune - tune) > 1e-9 || !isfinite(r->alloc[bucket]))
            continue;
        s += 100.0 - r->alloc[bucket];
        k++;
    }
    if (n_seeds)
        *n_seeds = k;
    return k ? s / k : NAN;
}

/* ---- seeds ----------------------------------------------------------------------- */

static bool parse_u64(const char *s, size_t len, uint64_t *v)
{
    uint64_t x = 0;

    if (len == 0 || len > 19)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    *v = x;
    return true;
}

int sim_fill_parse_seeds(const char *s, uint64_t **out, int *n)
{
    uint64_t *v = NULL;
    size_t cap = 0, k = 0;
    const char *p = s;

    *out = NULL;
    *n = 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *dash = memchr(p, '-', len);
        uint64_t a, b;
        if (dash) {
            if (!parse_u64(p, (size_t)(dash - p), &a) ||
                !parse_u64(dash + 1, len - (size_t)(dash - p) - 1, &b) || b < a)
                goto bad;
        } else if (!parse_u64(p, len, &a)) {
            goto bad;
        } else {
            b = a;
        }
        if (b - a >= MAX_SEEDS || k + (b - a) + 1 > MAX_SEEDS)
            goto bad;
        for (uint64_t x = a;; x++) {
            if (allot_grow((void **)&v, &cap, k + 1, sizeof(*v))) {
                allot_free(v);
                return ALLOT_ENOMEM;
            }
            v[k++] = x;
            if (x == b)
                break;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    *out = v;
    *n = (int)k;
    return 0;
bad:
    allot_free(v);
    return ALLOT_EINVAL;
}

/* ---- command line ------------------------------------------------------------------ */

/* The published policies plus ours: what "--policy all" runs. */
static const char *const all_policies[] = {"random",  "dotprod", "gpuclustering", "gpupacking",
                                           "bestfit", "fgd",     "allot"};
#define N_ALL (sizeof(all_policies) / sizeof(all_policies[0]))

enum {
    OPT_NODES,
    OPT_PODS,
    OPT_POLICY,
    OPT_SEEDS,
    OPT_TUNE,
    OPT_JSON,
    OPT_PLOT,
    OPT_EXPECTED,
    OPT_DLOG,
    OPT_JOBS,
    OPT_CHECK,
    OPT_OFFLINE,
    OPT_HELP,
    N_OPTS
};

/* Every option, described once: drives parsing and --help (STYLE 15). */
static const struct cliopt fill_options[N_OPTS] = {
    [OPT_NODES] = {"nodes", "FILE", NULL, "openb node list (required)"},
    [OPT_PODS] = {"pods", "FILE", NULL, "openb pod list (required)"},
    [OPT_POLICY] = {"policy", "P[,P...]|all", "all",
                    "placement policies; all: the six published ones and allot"},
    [OPT_SEEDS] = {"seeds", "LIST", "42-51", "seeds, e.g. 42-51 or 1,5,7-9"},
    [OPT_TUNE] = {"tune", "X", "1.3", "inflate or trim the trace to X times the GPU capacity"},
    [OPT_JSON] = {"json", "OUT", NULL, "write the curves as JSON"},
    [OPT_PLOT] = {"plot", "OUT.svg", NULL, "plot unallocated GPU % vs arrived %"},
    [OPT_EXPECTED] = {"expected", "DIR", NULL,
                      "compare with DIR/analysis_allo_discrete.csv (published)"},
    [OPT_DLOG] = {"decision-log", "OUT", NULL, "write one line per placement decision"},
    [OPT_JOBS] = {"jobs", "N", "1", "worker processes (results do not depend on N)"},
    [OPT_CHECK] = {"check", NULL, NULL, "check scheduler invariants after every placement"},
    [OPT_OFFLINE] = {"offline", NULL, NULL, "add an offline reference packing (offline.h)"},
    [OPT_HELP] = {"help", NULL, NULL, "show this help"},
};

static void fill_usage(FILE *f)
{
    cliopt_usage(f,
                 "usage: allot-sim fill --nodes FILE --pods FILE [options]\n"
                 "Replays an openb pod trace onto the openb GPU cluster, filled to --tune x\n"
                 "its GPU capacity, under each policy and seed (docs/BENCHMARKS.md section 1),\n"
                 "and prints the unallocated GPU share at arrived 80..130 % of capacity.\n"
                 "--policy all: random,dotprod,gpuclustering,gpupacking,bestfit,fgd,allot;\n"
                 "firstfit and spread may be named explicitly.\n\n"
                 "options:\n",
                 fill_options, N_OPTS, 28);
}

static int __attribute__((format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "allot-sim fill: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    fill_usage(stderr);
    return 2;
}

/* Splits a comma list of policy names into ops (out has room for max). */
static int parse_policies(const char *s, const struct allot_sched_policy_ops **out, int max,
                          char *bad, size_t badlen)
{
    int n = 0;

    if (!strcmp(s, "all")) {
        for (size_t i = 0; i < N_ALL; i++) {
            out[n] = allot_sched_policy_find(all_policies[i]);
            if (!out[n]) {
                allot_strlcpy(bad, all_policies[i], badlen);
                return -1;
            }
            n++;
        }
        return n;
    }
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char name[64];
        allot_fmt(name, sizeof(name), "%.*s", (int)(len < 63 ? len : 63), p);
        if (n == max || len == 0 || len >= sizeof(name) ||
            !(out[n] = allot_sched_policy_find(name))) {
            allot_strlcpy(bad, name, badlen);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (out[i] == out[n]) {
                allot_strlcpy(bad, name, badlen);
                return -1;
            }
        n++;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

static const int table_points[] = {80, 90, 95, 100, 110, 120, 130};
#define N_POINTS (sizeof(table_points) / sizeof(table_points[0]))

/* One row per policy; "-" where there is no data. Cells are 13 columns
 * wide ("±" takes two bytes for one column). */
static void print_table(const struct sim_fill_trace *t, const struct sim_fill_summary *sum, int np,
                        const struct sim_fill_published *pub, double tune)
{
    char cell[64];

    printf("%-14s", "policy");
    for (size_t i = 0; i < N_POINTS; i++)
        printf("%11d %%", table_points[i]);
    printf("%11s%9s%s\n", "frag@100", "seconds", pub ? "  pub@100    diff" : "");
    for (int p = 0; p < np; p++) {
        const struct sim_fill_summary *s = &sum[p];
        double x = sim_fill_published_unalloc(pub, t->workload, s->policy->name, tune, 100, NULL);
        printf("%-14s", s->policy->name);
        for (size_t i = 0; i < N_POINTS; i++) {
            int b = table_points[i];
            allot_fmt(cell, sizeof(cell), "%.2f±%.2f", s->unalloc_mean[b], s->unalloc_sd[b]);
            printf("%*s", isfinite(s->unalloc_mean[b]) ? 14 : 13,
                   isfinite(s->unalloc_mean[b]) ? cell : "-");
        }
        printf("%11.2f%9.2f", s->frag_mean[100], s->seconds);
        if (pub && isfinite(x) && isfinite(s->unalloc_mean[100]))
            printf("%9.2f%+8.2f", x, s->unalloc_mean[100] - x);
        else if (pub)
            printf("%9s%8s", "-", "-");
        printf("\n");
    }
}

/* A JSON object with one value per bucket ("0".."130"); NaN is null. */
static json_t *json_buckets(const double *v)
{
    json_t *o = json_object();
    char key[8];
    int bad = !o;

    for (int b = 0; !bad && b < SIM_FILL_BUCKETS; b++) {
        allot_fmt(key, sizeof(key), "%d", b);
        bad = json_object_set_new(o, key, isfinite(v[b]) ? json_real(v[b]) : json_null());
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Writes the curves as JSON; NaN (no data) is null. Returns 0 or 1. */
static int write_json(const char *path, const struct sim_fill_trace *t,
                      const struct sim_fill_summary *sum, int np, const uint64_t *seeds, int ns,
                      double tune, uint64_t hash, const struct sim_fill_published *pub)
{
    json_t *jseeds = json_array(), *jpol = json_array(), *root;
    char hex[32];
    int bad = !jseeds || !jpol;

    for (int i = 0; !bad && i < ns; i++)
        bad = json_array_append_new(jseeds, json_integer((json_int_t)seeds[i]));
    for (int p = 0; !bad && p < np; p++) {
        double x = sim_fill_published_unalloc(pub, t->workload, sum[p].policy->name, tune, 100,
                                              NULL); /* NaN without pub */
        /* "o" steals its reference, also on failure (jansson >= 2.11) */
        bad = json_array_append_new(
            jpol,
            json_pack("{s:s, s:o, s:o, s:o, s:f, s:I, s:o}", "name", sum[p].policy->name,
                      "unallocated_pct", json_buckets(sum[p].unalloc_mean), "unallocated_sd",
                      json_buckets(sum[p].unalloc_sd), "frag_rate_pct",
                      json_buckets(sum[p].frag_mean), "seconds", sum[p].seconds, "failed_pods",
                      (json_int_t)sum[p].failed, "published_unallocated_pct_100",
                      isfinite(x) ? json_real(x) : json_null()));
    }
    allot_fmt(hex, sizeof(hex), "%016llx", (unsigned long long)hash);
    root = json_pack("{s:s, s:s, s:I, s:I, s:I, s:f, s:o, s:s, s:o}", "experiment", "fill",
                     "workload", t->workload, "gpus", (json_int_t)t->gpus, "nodes",
                     (json_int_t)t->n_nodes, "pods", (json_int_t)t->n_tasks, "tune", tune, "seeds",
                     jseeds, "decision_log_fnv1a64", hex, "policies", jpol);
    if (!root || bad) {
        fprintf(stderr, "allot-sim fill: %s: out of memory building JSON\n", path);
        bad = 1;
    } else if (json_dump_file(root, path,
                              JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6))) {
        fprintf(stderr, "allot-sim fill: %s: cannot write\n", path);
        bad = 1;
    }
    json_decref(root);
    return bad;
}

/* Plots unallocated % against arrived % for every policy, from arrived
 * PLOT_X0 % on (below it every policy sits on the diagonal 100 - x). */
#define PLOT_X0 60

static int write_plot(const char *path, const struct sim_fill_trace *t,
                      const struct sim_fill_summary *sum, int np, int ns, double tune)
{
    char title[256], err[512];
    double x[SIM_FILL_BUCKETS], ymax = 10;
    struct svgplot *p;
    int rc;

    allot_fmt(title, sizeof(title), "openb fill: %s, %lld GPUs, tune %.2f, mean of %d seed%s",
              t->workload, (long long)t->gpus, tune, ns, ns == 1 ? "" : "s");
    p = svgplot_new(title, "arrived GPU request (% of GPU capacity)",
                    "unallocated GPU (% of GPU capacity)");
    for (int b = 0; b < SIM_FILL_BUCKETS; b++)
        x[b] = b;
    for (int i = 0; i < np; i++) {
        svgplot_add_series(p, sum[i].policy->name, x + PLOT_X0, sum[i].unalloc_mean + PLOT_X0,
                           SIM_FILL_BUCKETS - PLOT_X0, 0);
        for (int b = PLOT_X0; b < SIM_FILL_BUCKETS; b++)
            if (isfinite(sum[i].unalloc_mean[b]) && sum[i].unalloc_mean[b] > ymax)
                ymax = sum[i].unalloc_mean[b];
    }
    svgplot_add_vline(p, 100, "arrived = 100 %");
    svgplot_set_xrange(p, PLOT_X0, 130);
    svgplot_set_yrange(p, 0, fmin(100, ceil(ymax / 5) * 5));
    svgplot_set_size(p, 960, 600);
    rc = svgplot_write(p, path, err, sizeof(err));
    svgplot_free(p);
    if (rc)
        fprintf(stderr, "allot-sim fill: %s\n", err);
    return rc ? 1 : 0;
}

int sim_fill_main(int argc, char **argv)
{
    const char *val[N_OPTS] = {0};
    bool given[N_OPTS] = {0};
    const struct allot_sched_policy_ops *pol[64];
    struct sim_fill_trace trace;
    struct sim_fill_published pub = {0}, *pubp = NULL;
    struct sim_fill_summary *sum = NULL;
    struct sim_fill_opts o = {0};
    uint64_t *seeds = NULL, hash = 0;
    char err[512], bad[64];
    int np, ns, status = 1;
    double tune = 1.3, t0;
    int64_t jobs = 1;
    FILE *dlog = NULL;

    memset(&trace, 0, sizeof(trace));
    /* Errors name the option as typed, e.g. "--tune=2" (CLIOPT_ECHO_ARG). */
    if (cliopt_parse(fill_options, N_OPTS, argc, argv, val, given, CLIOPT_ECHO_ARG, err,
                     sizeof(err)))
        return usage_error("%s", err);
    if (given[OPT_HELP]) {
        fill_usage(stdout);
        return 0;
    }
    if (!val[OPT_NODES] || !val[OPT_PODS])
        return usage_error("%s", "--nodes and --pods are required");
    np = parse_policies(val[OPT_POLICY] ? val[OPT_POLICY] : "all", pol, 64, bad, sizeof(bad));
    if (np < 0)
        return usage_error("unknown or repeated policy \"%s\"", bad);
    if (val[OPT_TUNE] && (!parse_double(val[OPT_TUNE], &tune) || tune <= 0 || tune > 100))
        return usage_error("--tune \"%s\": want a number in (0, 100]", val[OPT_TUNE]);
    if (val[OPT_JOBS] && !cliopt_parse_int(val[OPT_JOBS], 1, MAX_JOBS, &jobs))
        return usage_error("--jobs \"%s\": want an integer 1..%d", val[OPT_JOBS], MAX_JOBS);
    switch (sim_fill_parse_seeds(val[OPT_SEEDS] ? val[OPT_SEEDS] : "42-51", &seeds, &ns)) {
    case 0:
        break;
    case ALLOT_ENOMEM:
        fprintf(stderr, "allot-sim fill: out of memory\n");
        return 1;
    default:
        return usage_error("--seeds \"%s\": want e.g. 42-51 or 1,5,7-9", val[OPT_SEEDS]);
    }

    if (sim_fill_trace_load(&trace, val[OPT_NODES], val[OPT_PODS], err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    if (val[OPT_EXPECTED]) {
        char path[4096];
        allot_fmt(path, sizeof(path), "%s/analysis_allo_discrete.csv", val[OPT_EXPECTED]);
        if (sim_fill_published_read(path, &pub, err, sizeof(err))) {
            fprintf(stderr, "%s\n", err);
            goto out;
        }
        pubp = &pub;
    }
    if (val[OPT_DLOG]) {
        dlog = fopen(val[OPT_DLOG], "w");
        if (!dlog) {
            fprintf(stderr, "allot-sim fill: %s: %s\n", val[OPT_DLOG], strerror(errno));
            goto out;
        }
    }
    sum = allot_calloc((size_t)np, sizeof(*sum));
    if (!sum) {
        fprintf(stderr, "allot-sim fill: out of memory\n");
        goto out;
    }
    o = (struct sim_fill_opts){.policies = pol,
                               .n_policies = np,
                               .seeds = seeds,
                               .n_seeds = ns,
                               .tune = tune,
                               .jobs = (int)jobs,
                               .check = given[OPT_CHECK],
                               .progress = isatty(STDERR_FILENO),
                               .log = dlog};
    printf("openb fill: %s on %s: %zu GPU nodes, %lld GPUs, %zu pods, tune %.2f, %d seed%s, "
           "%d job%s\n",
           trace.workload, val[OPT_NODES], trace.n_nodes, (long long)trace.gpus, trace.n_tasks,
           tune, ns, ns == 1 ? "" : "s", (int)jobs, jobs == 1 ? "" : "s");
    printf("unallocated GPU %% of capacity (mean±sd over seeds) at arrived GPU request %%; "
           "frag@100: fragmentation rate %%\n");
    fflush(stdout);
    t0 = now_s();
    if (sim_fill_experiment(&trace, &o, sum, &hash, err, sizeof(err))) {
        fprintf(stderr, "allot-sim fill: %s\n", err);
        goto out;
    }
    if (dlog) {
        int e = fclose(dlog);
        dlog = NULL;
        if (e) {
            fprintf(stderr, "allot-sim fill: %s: write failed\n", val[OPT_DLOG]);
            goto out;
        }
    }
    print_table(&trace, sum, np, pubp, tune);
    if (given[OPT_OFFLINE] && sim_offline_print_row(&trace, seeds, ns, tune, (int)jobs,
                                                    table_points, N_POINTS, err, sizeof(err))) {
        fprintf(stderr, "allot-sim fill: %s\n", err);
        goto out;
    }
    printf("decision-log hash: fnv1a64 %016llx\n", (unsigned long long)hash);
    printf("wall seconds: %.2f\n", now_s() - t0);
    fflush(stdout);
    status = 0;
    if (val[OPT_JSON] && write_json(val[OPT_JSON], &trace, sum, np, seeds, ns, tune, hash, pubp))
        status = 1;
    if (val[OPT_PLOT] && write_plot(val[OPT_PLOT], &trace, sum, np, ns, tune))
        status = 1;
out:
    if (dlog)
        fclose(dlog);
    allot_free(sum);
    allot_free(seeds);
    sim_fill_published_free(&pub);
    sim_fill_trace_free(&trace);
    return status;
}

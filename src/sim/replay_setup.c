/*
 * The setups of the replay experiment (replay.h): tenants from a Philly VC
 * list or a tenants file, the cluster size, and the jobs to replay (from the
 * Philly digest inside the window, or from the synthetic generator), with
 * the --load rescaling. Reads files; keeps nothing global.
 */
#include "replay.h"

#include "allot/common.h"
#include "allot/tenant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
/* ---- setup ------------------------------------------------------------------ */

void replay_setup_free(struct replay_setup *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_tenants; i++)
        allot_free(s->tenants[i].path);
    allot_free(s->tenants);
    allot_free(s->jobs);
    sim_tenants_conf_free(&s->conf);
    allot_catalog_free(s->cat);
    memset(s, 0, sizeof(*s));
}

static int oom(char *err, size_t errlen)
{
    allot_fmt(err, errlen, "out of memory");
    return ALLOT_ENOMEM;
}

static int setup_begin(struct replay_setup *s, char *err, size_t errlen)
{
    char e[256];

    memset(s, 0, sizeof(*s));
    s->quota_scale = 1.0;
    s->to_asked = -1;
    s->cat = allot_catalog_default(e, sizeof(e));
    if (!s->cat) {
        allot_fmt(err, errlen, "GPU catalog: %s", e);
        return ALLOT_EINVAL;
    }
    s->model = allot_catalog_find_model(s->cat, REPLAY_NODE_MODEL);
    if (s->model < 0) {
        allot_fmt(err, errlen, "GPU catalog: no model %s", REPLAY_NODE_MODEL);
        return ALLOT_EINVAL;
    }
    allot_fmt(s->shape.model, sizeof(s->shape.model), "%s", REPLAY_NODE_MODEL);
    s->shape.model_idx = s->model;
    s->shape.gpus = REPLAY_NODE_GPUS;
    s->shape.cpu_milli = REPLAY_NODE_CPU;
    s->shape.mem_mib = REPLAY_NODE_MEM;
    s->node_gpus = REPLAY_NODE_GPUS;
    s->cpu_per_gpu = REPLAY_CPU_PER_GPU;
    s->mem_per_gpu = REPLAY_MEM_PER_GPU;
    return 0;
}

/* A node shape's resources per GPU, capped at the default 4 cores and
 * 32 GiB: what each GPU of a job asks for, so every job fits every shape
 * with enough GPUs. */
static void per_gpu_cap(struct replay_setup *s, const struct replay_node_group *g)
{
    int64_t c = g->cpu_milli / g->gpus, m = g->mem_mib / g->gpus;

    s->cpu_per_gpu = c < s->cpu_per_gpu ? c : s->cpu_per_gpu;
    s->mem_per_gpu = m < s->mem_per_gpu ? m : s->mem_per_gpu;
}

/* Sets the nodes of a setup: groups[0..n) when n > 0, else nodes of `shape`
 * (NULL: the default) sized later from the tenants. */
static int set_nodes(struct replay_setup *s, const struct replay_node_group *shape,
                     const struct replay_node_group *groups, int n, char *err, size_t errlen)
{
    int64_t total = 0;

    if (n > REPLAY_MAX_GROUPS) {
        allot_fmt(err, errlen, "%d node groups; at most %d are supported", n, REPLAY_MAX_GROUPS);
        return ALLOT_EINVAL;
    }
    if (shape) {
        s->shape = *shape;
        s->shape.count = 0;
        s->model = shape->model_idx;
        s->node_gpus = shape->gpus;
        per_gpu_cap(s, shape);
    }
    if (n <= 0)
        return 0;
    s->node_gpus = 0;
    s->model = -2;
    for (int i = 0; i < n; i++) {
        if (groups[i].count <= 0 || groups[i].gpus < 1 || groups[i].gpus > ALLOT_MAX_GPUS)
            continue; /* emptied by a removal; or no GPUs: nothing to replay on */
        if (s->model == -2)
            s->model = groups[i].model_idx;
        s->groups[s->n_groups++] = groups[i];
        total += groups[i].count;
        s->node_gpus = groups[i].gpus > s->node_gpus ? groups[i].gpus : s->node_gpus;
        if (groups[i].model_idx != s->model)
            s->model = -1;
        per_gpu_cap(s, &groups[i]);
    }
    if (total < 1 || total > REPLAY_MAX_NODES) {
        allot_fmt(err, errlen, "the cluster has %lld nodes; want 1..%d", (long long)total,
                  REPLAY_MAX_NODES);
        return ALLOT_EINVAL;
    }
    s->n_nodes = (int)total;
    return 0;
}

int64_t replay_setup_gpus(const struct replay_setup *s)
{
    int64_t g = 0;

    if (s->n_groups == 0)
        return (int64_t)s->n_nodes * s->shape.gpus;
    for (int i = 0; i < s->n_groups; i++)
        g += (int64_t)s->groups[i].count * s->groups[i].gpus;
    return g;
}

const char *replay_setup_describe(const struct replay_setup *s, char *buf, size_t n)
{
    size_t used = 0;

    if (s->n_groups == 0) {
        allot_fmt(buf, n, "%d nodes x %d %s", s->n_nodes, s->shape.gpus, s->shape.model);
        return buf;
    }
    buf[0] = 0;
    for (int i = 0; i < s->n_groups && used < n; i++) {
        allot_fmt(buf + used, n - used, "%s%d x %d %s", i ? " + " : "", s->groups[i].count,
                  s->groups[i].gpus, s->groups[i].model);
        used += strlen(buf + used);
    }
    return buf;
}

/* Tenants from a VC list: one leaf per VC, nominal = its GPUs. */
static int tenants_from_vcs(struct replay_setup *s, const char *path, char *err, size_t errlen)
{
    struct philly_vcs vcs = {0};
    int rc = philly_read_vcs(path, &vcs, err, errlen);

    if (rc)
        return rc;
    s->tenants = allot_calloc(vcs.n, sizeof(*s->tenants));
    if (!s->tenants) {
        rc = oom(err, errlen);
        goto out;
    }
    for (size_t i = 0; i < vcs.n; i++) {
        struct replay_tenant *t = &s->tenants[i];

        t->path = allot_strdup(vcs.v[i].name);
        if (!t->path) {
            rc = oom(err, errlen);
            goto out;
        }
        s->n_tenants++;
        t->nodes = vcs.v[i].nodes;
        t->nominal_milli = (int64_t)t->nodes * s->shape.gpus * ALLOT_MILLI;
        t->conf = -1;
        s->n_nodes += t->nodes;
    }
out:
    philly_vcs_free(&vcs);
    return rc;
}

/* Tenants from the parsed tenants file s->conf (called `path`): its leaves,
 * each with a finite GPU nominal unless the nodes are explicit. */
static int tenants_adopt(struct replay_setup *s, const char *path, char *err, size_t errlen)
{
    int64_t total = 0;

    s->has_conf = true;
    s->tenants = allot_calloc(s->conf.n, sizeof(*s->tenants));
    if (!s->tenants)
        return oom(err, errlen);
    for (size_t i = 0; i < s->conf.n; i++) {
        const struct sim_tenant_conf *c = &s->conf.v[i];
        struct replay_tenant *t;

        if (!c->leaf)
            continue;
        if (s->n_groups == 0 &&
            (!c->has_quota[ALLOT_RES_GPU] || c->quota[ALLOT_RES_GPU].nominal == ALLOT_UNLIMITED)) {
            allot_fmt(err, errlen,
                      "%s:%u: tenant \"%s\" has no finite gpu nominal quota: the replay sizes "
                      "the cluster and the entitlements from them",
                      path, c->line, c->path);
            return ALLOT_EINVAL;
        }
        t = &s->tenants[s->n_tenants];
        t->path = allot_strdup(c->path);
        if (!t->path)
            return oom(err, errlen);
        s->n_tenants++;
        /* explicit nodes: a tenant without a finite nominal counts 0 */
        t->nominal_milli =
            c->has_quota[ALLOT_RES_GPU] && c->quota[ALLOT_RES_GPU].nominal != ALLOT_UNLIMITED
                ? c->quota[ALLOT_RES_GPU].nominal
                : 0;
        t->conf = (int)i;
        total += t->nominal_milli;
    }
    if (s->n_groups > 0)
        return 0;
    s->n_nodes = (int)((total + (int64_t)s->shape.gpus * ALLOT_MILLI - 1) /
                       ((int64_t)s->shape.gpus * ALLOT_MILLI));
    if (s->n_nodes < 1)
        s->n_nodes = 1;
    if (s->n_nodes > REPLAY_MAX_NODES) {
        allot_fmt(err, errlen, "%s: the tenants' GPU nominal quotas ask for more than %d nodes",
                  path, REPLAY_MAX_NODES);
        return ALLOT_EINVAL;
    }
    return 0;
}

static int tenants_from_conf(struct replay_setup *s, const char *path, char *err, size_t errlen)
{
    int rc = sim_tenants_read(path, s->cat, &s->conf, err, errlen);

    return rc ? rc : tenants_adopt(s, path, err, errlen);
}

static int tenants_load(struct replay_setup *s, const char *vcs_path, const char *tenants_path,
                        char *err, size_t errlen)
{
    if ((vcs_path != NULL) == (tenants_path != NULL)) {
        allot_fmt(err, errlen, "give exactly one of a VC list and a tenants file");
        return ALLOT_EINVAL;
    }
    return vcs_path ? tenants_from_vcs(s, vcs_path, err, errlen)
                    : tenants_from_conf(s, tenants_path, err, errlen);
}

/* Leaf tenant of a trace VC name: the leaf with that path, else the only
 * leaf whose last path element is the name; -1 when none, -2 ambiguous. */
static int tenant_of_vc(const struct replay_setup *s, const char *vc)
{
    int found = -1;

    for (int i = 0; i < s->n_tenants; i++)
        if (strcmp(s->tenants[i].path, vc) == 0)
            return i;
    for (int i = 0; i < s->n_tenants; i++) {
        const char *slash = strrchr(s->tenants[i].path, '/');

        if (slash && strcmp(slash + 1, vc) == 0) {
            if (found >= 0)
                return -2;
            found = i;
        }
    }
    return found;
}

static void gang_shape(const struct replay_setup *s, int64_t g, int *n_tasks, int *per_task)
{
    *n_tasks = (int)((g + s->node_gpus - 1) / s->node_gpus);
    *per_task = g < s->node_gpus ? (int)g : s->node_gpus;
}

static int cmp_job(const void *a, const void *b)
{
    const struct replay_job *x = a, *y = b;

    if (x->submit != y->submit)
        return x->submit < y->submit ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

static double window_gpu_s(const struct replay_setup *s)
{
    return (double)replay_setup_gpus(s) * (double)(s->to - s->from);
}

/* Rescales the cluster so the offered GPU-time is `load` x capacity. */
static int rescale(struct replay_setup *s, double load, char *err, size_t errlen)
{
    double want_gpus = s->offered_gpu_s / (load * (double)(s->to - s->from));
    double f = want_gpus / (double)replay_setup_gpus(s);

    if (s->has_conf) {
        double n = llround((double)s->n_nodes * f);

        n = n < 1 ? 1 : n;
        if (n > REPLAY_MAX_NODES)
            goto too_big;
        s->quota_scale = n / (double)s->n_nodes;
        s->n_nodes = (int)n;
        for (int i = 0; i < s->n_tenants; i++)
            s->tenants[i].nominal_milli =
                llround((double)s->tenants[i].nominal_milli * s->quota_scale);
        return 0;
    }
    s->n_nodes = 0;
    for (int i = 0; i < s->n_tenants; i++) {
        double n = llround((double)s->tenants[i].nodes * f);

        s->tenants[i].nodes = n < 1 ? 1 : (int)fmin(n, REPLAY_MAX_NODES);
        s->tenants[i].nominal_milli = (int64_t)s->tenants[i].nodes * s->shape.gpus * ALLOT_MILLI;
        s->n_nodes += s->tenants[i].nodes;
        if (s->n_nodes > REPLAY_MAX_NODES)
            goto too_big;
    }
    return 0;
too_big:
    allot_fmt(err, errlen, "--load %g asks for more than %d nodes", load, REPLAY_MAX_NODES);
    return ALLOT_EINVAL;
}

static void finish_setup(struct replay_setup *s)
{
    s->offered_gpu_s = 0;
    for (size_t i = 0; i < s->n_jobs; i++)
        s->offered_gpu_s +=
            (double)s->jobs[i].n_tasks * s->jobs[i].gpus * (double)s->jobs[i].duration;
}

/*
 * Bounds the window of a trace setup. Nothing arrives after the last
 * arrival, and even if the jobs of the window ran one after the other they
 * would all be done by the last arrival plus the sum of their run times:
 * a `to` past that end is clamped to it, so that `--to 9999-12-31` on a
 * three-day trace does not ask for millions of hourly bins (the caller may
 * run on past `to`, --drain, to finish what is still queued). A window
 * longer than REPLAY_MAX_DAYS is refused. Returns 0 or ALLOT_EINVAL.
 */
static int bound_window(struct replay_setup *s, char *err, size_t errlen)
{
    int64_t last = s->from, work = 0, end;
    char a[32], b[32];

    for (size_t i = 0; i < s->n_jobs; i++) {
        last = s->jobs[i].submit > last ? s->jobs[i].submit : last;
        /* durations come from the reader, at most 10^9 s each */
        work = work < INT64_MAX / 4 ? work + s->jobs[i].duration : work;
    }
    end = last + work + 1;
    s->to_asked = -1;
    if (s->to > end) {
        s->to_asked = s->to;
        s->to = end;
    }
    if (s->to - s->from > (int64_t)REPLAY_MAX_DAYS * 86400) {
        allot_fmt(err, errlen,
                  "the window [%s, %s) spans %.0f days; at most %d are supported (give a "
                  "later --from or an earlier --to)",
                  philly_format_time(s->from, a, sizeof(a)),
                  philly_format_time(s->to, b, sizeof(b)),
                  floor((double)(s->to - s->from) / 86400.0), REPLAY_MAX_DAYS);
        return ALLOT_EINVAL;
    }
    return 0;
}

int replay_setup_philly(struct replay_setup *s, const char *jobs_path, const char *vcs_path,
                        const char *tenants_path, int64_t from, int64_t to, double load, char *err,
                        size_t errlen)
{
    return replay_setup_philly_shape(s, NULL, jobs_path, vcs_path, tenants_path, from, to, load,
                                     err, errlen);
}

int replay_setup_philly_shape(struct replay_setup *s, const struct replay_node_group *shape,
                              const char *jobs_path, const char *vcs_path, const char *tenants_path,
                              int64_t from, int64_t to, double load, char *err, size_t errlen)
{
    struct philly_jobs pj = {0};
    int *map = NULL, rc;
    int64_t first = INT64_MAX, last = INT64_MIN;

    if ((rc = setup_begin(s, err, errlen)) < 0 ||
        (rc = set_nodes(s, shape, NULL, 0, err, errlen)) < 0 ||
        (rc = tenants_load(s, vcs_path, tenants_path, err, errlen)) < 0 ||
        (rc = philly_read_jobs(jobs_path, &pj, err, errlen)) < 0)
        goto fail;
    map = allot_malloc((size_t)pj.n_vcs * sizeof(*map) + 1);
    s->jobs = allot_calloc(pj.n, sizeof(*s->jobs));
    if (!map || !s->jobs) {
        rc = oom(err, errlen);
        goto fail;
    }
    for (int v = 0; v < pj.n_vcs; v++) {
        map[v] = tenant_of_vc(s, pj.vcs[v]);
        if (map[v] == -2) {
            allot_fmt(err, errlen, "%s: VC \"%s\" matches the last path element of several tenants",
                      tenants_path, pj.vcs[v]);
            rc = ALLOT_EINVAL;
            goto fail;
        }
    }
    s->read_jobs = pj.n;
    for (size_t i = 0; i < pj.n; i++) {
        const struct philly_job *j = &pj.v[i];

        if (map[j->vc] < 0 || j->num_gpus == 0 || j->duration == 0)
            continue;
        first = j->submit < first ? j->submit : first;
        last = j->submit > last ? j->submit : last;
    }
    s->from = from >= 0 ? from : first;
    s->to = to >= 0 ? to : (last == INT64_MIN ? INT64_MAX : last + 1);
    if (first == INT64_MAX || s->from >= s->to) {
        allot_fmt(err, errlen, "%s: no job of a known VC with GPUs and a duration %s", jobs_path,
                  first == INT64_MAX ? "at all" : "in the window");
        rc = ALLOT_EINVAL;
        goto fail;
    }
    for (size_t i = 0; i < pj.n; i++) {
        const struct philly_job *j = &pj.v[i];
        struct replay_job *r = &s->jobs[s->n_jobs];

        /* outside a window the user gave; a default bound is the span of
         * the jobs kept, so what lies beyond it is counted by its kind */
        if ((from >= 0 && j->submit < s->from) || (to >= 0 && j->submit >= s->to)) {
            s->outside++;
            continue;
        }
        if (map[j->vc] < 0) {
            s->other_vc++;
            continue;
        }
        if (j->num_gpus == 0 || j->duration == 0) {
            s->zero++;
            continue;
        }
        if (!ALLOT_ALWAYS(j->submit >= s->from && j->submit < s->to)) {
            s->outside++;
            continue;
        }
        r->submit = j->submit;
        r->duration = j->duration;
        r->tenant = map[j->vc];
        gang_shape(s, j->num_gpus, &r->n_tasks, &r->gpus);
        s->rounded_up += r->n_tasks * r->gpus != j->num_gpus;
        r->prio_class = -1;
        r->line = j->line;
        s->n_jobs++;
    }
    if (s->n_jobs == 0) {
        allot_fmt(err, errlen, "%s: no job to replay in the window", jobs_path);
        rc = ALLOT_EINVAL;
        goto fail;
    }
    if ((rc = bound_window(s, err, errlen)) < 0)
        goto fail;
    qsort(s->jobs, s->n_jobs, sizeof(*s->jobs), cmp_job);
    finish_setup(s);
    if (load > 0 && (rc = rescale(s, load, err, errlen)) < 0)
        goto fail;
    s->load = s->offered_gpu_s / window_gpu_s(s);
    allot_fmt(s->source, sizeof(s->source), "%s", jobs_path);
    allot_free(map);
    philly_jobs_free(&pj);
    return 0;
fail:
    allot_free(map);
    philly_jobs_free(&pj);
    replay_setup_free(s);
    return rc;
}

int replay_setup_synthetic(struct replay_setup *s, const char *vcs_path, const char *tenants_path,
                           int days, int64_t start, double load, uint64_t seed, char *err,
                           size_t errlen)
{
    return replay_setup_synthetic_shape(s, NULL, vcs_path, tenants_path, days, start, load, seed,
                                        err, errlen);
}

int replay_setup_synthetic_shape(struct replay_setup *s, const struct replay_node_group *shape,
                                 const char *vcs_path, const char *tenants_path, int days,
                                 int64_t start, double load, uint64_t seed, char *err,
                                 size_t errlen)
{
    static const double default_mix[MTGEN_KINDS] = {0.3, 0.5, 0.2};
    struct mtgen_tenant *mt = NULL;
    struct mtgen_job *gj = NULL;
    struct mtgen_opts o = {.days = days, .load = load, .seed = seed};
    int kind_class[MTGEN_KINDS];
    size_t n = 0;
    int rc;

    if ((rc = setup_begin(s, err, errlen)) < 0 ||
        (rc = set_nodes(s, shape, NULL, 0, err, errlen)) < 0 ||
        (rc = tenants_load(s, vcs_path, tenants_path, err, errlen)) < 0)
        goto fail;
    o.start = start >= 0 ? start : philly_days_from_civil(2024, 1, 1) * 86400;
    mt = allot_calloc((size_t)s->n_tenants, sizeof(*mt));
    if (!mt) {
        rc = oom(err, errlen);
        goto fail;
    }
    for (int i = 0; i < s->n_tenants; i++) {
        const struct sim_tenant_conf *c =
            s->tenants[i].conf >= 0 ? &s->conf.v[s->tenants[i].conf] : NULL;

        mt[i].gpus = s->tenants[i].nominal_milli / ALLOT_MILLI;
        memcpy(mt[i].mix, c && c->has_mix ? c->mix : default_mix, sizeof(mt[i].mix));
    }
    for (int k = 0; k < MTGEN_KINDS; k++) {
        kind_class[k] = -1;
        for (int p = 0; s->has_conf && p < s->conf.n_prio; p++)
            if (strcmp(s->conf.prio[p].name, mtgen_kind_names[k]) == 0)
                kind_class[k] = p;
    }
    rc = mtgen_generate(mt, s->n_tenants, &o, &gj, &n);
    if (rc == ALLOT_EINVAL) {
        allot_fmt(err, errlen, "synthetic workload: bad days (%d) or load (%g)", days, load);
        goto fail;
    }
    if (rc < 0 || (n && !(s->jobs = allot_calloc(n, sizeof(*s->jobs))))) {
        rc = oom(err, errlen);
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        struct replay_job *r = &s->jobs[i];

        r->submit = gj[i].submit;
        r->duration = gj[i].duration;
        r->tenant = gj[i].tenant;
        gang_shape(s, gj[i].gpus, &r->n_tasks, &r->gpus);
        r->prio_class = kind_class[gj[i].kind];
    }
    s->n_jobs = s->read_jobs = n;
    s->from = o.start;
    s->to = o.start + (int64_t)days * 86400;
    if (n == 0) {
        allot_fmt(err, errlen, "synthetic workload: no jobs (do the tenants have GPUs?)");
        rc = ALLOT_EINVAL;
        goto fail;
    }
    finish_setup(s);
    s->load = s->offered_gpu_s / window_gpu_s(s);
    allot_fmt(s->source, sizeof(s->source), "synthetic, %d days, seed %llu", days,
              (unsigned long long)seed);
    allot_free(mt);
    allot_free(gj);
    return 0;
fail:
    allot_free(mt);
    allot_free(gj);
    replay_setup_free(s);
    return rc;
}

/* ---- traces (Slurm accounting, allot plan's history) --------------------------- */

int replay_trace_intern(struct replay_trace *t, bool prio, const char *name)
{
    char ***v = prio ? &t->prio : &t->tenants;
    int *n = prio ? &t->n_prio : &t->n_tenants;
    char **grown;

    for (int i = 0; i < *n; i++)
        if (strcmp((*v)[i], name) == 0)
            return i;
    grown = allot_realloc(*v, (size_t)(*n + 1) * sizeof(**v));
    if (!grown)
        return ALLOT_ENOMEM;
    *v = grown;
    grown[*n] = allot_strdup(name);
    if (!grown[*n])
        return ALLOT_ENOMEM;
    return (*n)++;
}

int replay_trace_add(struct replay_trace *t, const struct replay_trace_job *j)
{
    if (t->n == t->cap && allot_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)) < 0)
        return ALLOT_ENOMEM;
    t->v[t->n++] = *j;
    return 0;
}

void replay_trace_free(struct replay_trace *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_tenants; i++)
        allot_free(t->tenants[i]);
    for (int i = 0; i < t->n_prio; i++)
        allot_free(t->prio[i]);
    allot_free(t->tenants);
    allot_free(t->prio);
    allot_free(t->v);
    memset(t, 0, sizeof(*t));
}

/* Strict decimal in [0, max]: digits only. */
static bool parse_count(const char *s, size_t n, int64_t max, int64_t *out)
{
    int64_t v = 0;

    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (max - (s[i] - '0')) / 10)
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

int replay_parse_group(const char *spec, const struct allot_catalog *cat,
                       struct replay_node_group *g, char *err, size_t errlen)
{
    const char *p = spec, *x = strchr(spec, 'x'), *colon;
    char model[ALLOT_MODEL_NAME_MAX];
    int64_t count = 1, gpus = REPLAY_NODE_GPUS, cores, mem;
    size_t n;
    int idx;

    memset(g, 0, sizeof(*g));
    /* "16xH100": the count is the digits before the first 'x' */
    if (x && x > p && strspn(p, "0123456789") == (size_t)(x - p)) {
        if (!parse_count(p, (size_t)(x - p), REPLAY_MAX_NODES, &count) || count < 1)
            goto bad;
        p = x + 1;
    }
    colon = strchr(p, ':');
    n = colon ? (size_t)(colon - p) : strlen(p);
    if (n == 0 || n >= sizeof(model))
        goto bad;
    memcpy(model, p, n);
    model[n] = 0;
    idx = allot_catalog_find_model(cat, model);
    if (idx < 0) {
        allot_fmt(err, errlen, "node group \"%s\": no GPU model \"%s\" in the catalog", spec,
                  model);
        return ALLOT_EINVAL;
    }
    if (colon) {
        const char *q = colon + 1, *c2 = strchr(q, ':');

        if (!parse_count(q, c2 ? (size_t)(c2 - q) : strlen(q), ALLOT_MAX_GPUS, &gpus) || gpus < 1)
            goto bad;
        colon = c2;
    }
    cores = 8 * gpus;
    mem = 65536 * gpus;
    if (colon) {
        const char *q = colon + 1, *c2 = strchr(q, ':');

        if (!parse_count(q, c2 ? (size_t)(c2 - q) : strlen(q), 100000, &cores) || cores < 1)
            goto bad;
        if (c2) {
            const char *m = c2 + 1;
            size_t ml = strlen(m), digits = strspn(m, "0123456789");
            int64_t unit = 1024; /* GiB by default */

            if (digits < ml) {
                if (strcmp(m + digits, "Mi") == 0)
                    unit = 1;
                else if (strcmp(m + digits, "Gi") == 0)
                    unit = 1024;
                else if (strcmp(m + digits, "Ti") == 0)
                    unit = 1024 * 1024;
                else
                    goto bad;
            }
            if (!parse_count(m, digits, INT64_MAX / (1024 * 1024) / 1024, &mem) || mem < 1)
                goto bad;
            mem *= unit;
        }
    }
    allot_fmt(g->model, sizeof(g->model), "%s", cat->models[idx].name);
    g->model_idx = idx;
    g->gpus = (int)gpus;
    g->cpu_milli = cores * ALLOT_MILLI;
    g->mem_mib = mem;
    g->count = (int)count;
    return 0;
bad:
    allot_fmt(err, errlen,
              "node group \"%s\": want [COUNTx]MODEL[:GPUS[:CORES[:MEM]]], e.g. 16xH100-80GB or "
              "4xA100-80GB:4:64:512Gi (GPUS 1..%d, MEM in GiB or with Mi/Gi/Ti)",
              spec, ALLOT_MAX_GPUS);
    return ALLOT_EINVAL;
}

/* A tenant path element made of a trace's tenant name: characters outside
 * [A-Za-z0-9_.-] become '_'. */
static void path_of(const char *name, char *out, size_t n)
{
    size_t i = 0;

    for (; name[i] && i + 1 < n && i < SIM_TENANT_PATH_MAX; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-';

        out[i] = ok ? c : '_';
    }
    out[i] = 0;
    if (i == 0)
        allot_fmt(out, n, "_");
}

/* A tenants document with one leaf per trace tenant: nominal = share of
 * `gpus` by the GPU-time asked in the window (or equal). */
static int tenants_generate(struct replay_setup *s, const struct replay_trace *tr,
                            const double *gpu_s, double gpus, bool equal, char *err, size_t errlen)
{
    size_t cap = 64 + (size_t)tr->n_tenants * (SIM_TENANT_PATH_MAX + 96), used;
    char *doc = allot_malloc(cap), name[SIM_TENANT_PATH_MAX + 1];
    double total = 0;
    int rc;

    if (!doc)
        return oom(err, errlen);
    for (int i = 0; i < tr->n_tenants; i++)
        total += gpu_s[i];
    allot_fmt(doc, cap, "version: 1\ntenants:\n");
    used = strlen(doc);
    for (int i = 0; i < tr->n_tenants; i++) {
        double share = equal || total <= 0 ? 1.0 / tr->n_tenants : gpu_s[i] / total;
        double nominal = floor(share * gpus * 1000.0) / 1000.0;

        path_of(tr->tenants[i], name, sizeof(name));
        allot_fmt(doc + used, cap - used, "  - path: \"%s\"\n    quotas: {gpu: %.3f}\n", name,
                  nominal);
        used += strlen(doc + used);
    }
    rc = sim_tenants_parse(doc, used, "the accounts", s->cat, &s->conf, err, errlen);
    allot_free(doc);
    return rc ? rc : tenants_adopt(s, "the accounts", err, errlen);
}

/* After nominal changes: the nominals below each listed tenant with a
 * nominal of its own still add up to no more than it (as a tenants
 * document must), so that a raised leaf is not capped by its parent
 * unseen (sim_tenants_nominals_over). */
static int nominals_fit(const struct replay_setup *s, char *err, size_t errlen)
{
    int pi = -1, res = 0;
    int64_t sum = 0;
    int rc = sim_tenants_nominals_over(&s->conf, &pi, &res, &sum);

    if (rc < 0)
        return oom(err, errlen);
    if (rc) {
        allot_fmt(err, errlen,
                  "--quota: the GPU nominals below \"%s\" add up to %.3f, more than its own "
                  "%.3f: raise it too (--quota %s=gpu:N)",
                  s->conf.v[pi].path, (double)sum / ALLOT_MILLI,
                  (double)s->conf.v[pi].quota[res].nominal / ALLOT_MILLI, s->conf.v[pi].path);
        return ALLOT_EINVAL;
    }
    return 0;
}

/* Applies the caller's GPU nominal changes to s->conf. */
static int apply_quota(struct replay_setup *s, const struct replay_trace_opts *o, char *err,
                       size_t errlen)
{
    for (int q = 0; q < o->n_quota; q++) {
        int found = -1;

        for (size_t i = 0; i < s->conf.n; i++) {
            const char *p = s->conf.v[i].path, *slash = strrchr(p, '/');

            if (strcmp(p, o->quota[q].tenant) == 0 ||
                (slash && strcmp(slash + 1, o->quota[q].tenant) == 0)) {
                found = (int)i;
                break;
            }
        }
        if (found < 0) {
            allot_fmt(err, errlen, "--quota: no tenant \"%s\"", o->quota[q].tenant);
            return ALLOT_EINVAL;
        }
        if (!s->conf.v[found].has_quota[ALLOT_RES_GPU]) {
            s->conf.v[found].quota[ALLOT_RES_GPU].borrow_limit = ALLOT_UNLIMITED;
            s->conf.v[found].quota[ALLOT_RES_GPU].lend_limit = ALLOT_UNLIMITED;
        }
        s->conf.v[found].has_quota[ALLOT_RES_GPU] = true;
        s->conf.v[found].quota[ALLOT_RES_GPU].nominal = o->quota[q].gpu_milli;
    }
    return o->n_quota ? nominals_fit(s, err, errlen) : 0;
}

int replay_setup_trace(struct replay_setup *s, const struct replay_trace *tr,
                       const struct replay_trace_opts *o, char *err, size_t errlen)
{
    int *map = NULL, *prio = NULL, rc;
    double *gpu_s = NULL, span;
    int64_t first = INT64_MAX, last = INT64_MIN;
    bool given = o->tenants_path || o->tenants_buf;

    if ((rc = setup_begin(s, err, errlen)) < 0 ||
        (rc = set_nodes(s, o->shape, o->groups, o->n_groups, err, errlen)) < 0)
        goto fail;
    if (o->load > 0 && o->n_groups > 0) {
        allot_fmt(err, errlen, "--load rescales a cluster sized from the tenants, not given nodes");
        rc = ALLOT_EINVAL;
        goto fail;
    }
    map = allot_malloc(((size_t)tr->n_tenants + 1) * sizeof(*map));
    prio = allot_malloc(((size_t)tr->n_prio + 1) * sizeof(*prio));
    gpu_s = allot_calloc((size_t)tr->n_tenants + 1, sizeof(*gpu_s));
    s->jobs = allot_calloc(tr->n + 1, sizeof(*s->jobs));
    if (!map || !prio || !gpu_s || !s->jobs) {
        rc = oom(err, errlen);
        goto fail;
    }
    if (o->tenants_path)
        rc = tenants_from_conf(s, o->tenants_path, err, errlen);
    else if (o->tenants_buf)
        rc = sim_tenants_parse(o->tenants_buf, o->tenants_len,
                               o->tenants_name ? o->tenants_name : "tenants", s->cat, &s->conf, err,
                               errlen);
    if (rc < 0)
        goto fail;
    if (o->tenants_buf && !o->tenants_path &&
        ((rc = apply_quota(s, o, err, errlen)) < 0 ||
         (rc = tenants_adopt(s, o->tenants_name ? o->tenants_name : "tenants", err, errlen)) < 0))
        goto fail;
    for (int v = 0; v < tr->n_tenants; v++) {
        /* a tenants document names them as the trace does; without one
         * each trace tenant becomes the generated leaf of the same index */
        map[v] = given ? tenant_of_vc(s, tr->tenants[v]) : v;
        if (map[v] == -2) {
            allot_fmt(err, errlen, "tenant \"%s\" matches the last path element of several leaves",
                      tr->tenants[v]);
            rc = ALLOT_EINVAL;
            goto fail;
        }
    }
    for (int p = 0; p < tr->n_prio; p++) {
        prio[p] = -1;
        for (int k = 0; s->has_conf && k < s->conf.n_prio; k++)
            if (strcmp(s->conf.prio[k].name, tr->prio[p]) == 0)
                prio[p] = k;
    }
    s->read_jobs = tr->n;
    for (size_t i = 0; i < tr->n; i++) {
        const struct replay_trace_job *j = &tr->v[i];

        if (map[j->tenant] < 0 || j->gpus <= 0 || j->duration <= 0)
            continue;
        first = j->submit < first ? j->submit : first;
        last = j->submit > last ? j->submit : last;
    }
    s->from = o->from >= 0 ? o->from : first;
    s->to = o->to >= 0 ? o->to : (last == INT64_MIN ? INT64_MAX : last + 1);
    if (first == INT64_MAX || s->from >= s->to) {
        allot_fmt(err, errlen, "%s: no job of a known tenant with GPUs and a duration %s",
                  tr->source, first == INT64_MAX ? "at all" : "in the window");
        rc = ALLOT_EINVAL;
        goto fail;
    }
    for (size_t i = 0; i < tr->n; i++) {
        const struct replay_trace_job *j = &tr->v[i];
        struct replay_job *r = &s->jobs[s->n_jobs];

        if ((o->from >= 0 && j->submit < s->from) || (o->to >= 0 && j->submit >= s->to)) {
            s->outside++; /* outside a window the user gave (see above) */
            continue;
        }
        if (map[j->tenant] < 0) {
            s->other_vc++;
            continue;
        }
        if (j->gpus <= 0 || j->duration <= 0) {
            s->zero++;
            continue;
        }
        if (!ALLOT_ALWAYS(j->submit >= s->from && j->submit < s->to)) {
            s->outside++;
            continue;
        }
        if (j->gpus > REPLAY_MAX_JOB_GPUS || (s->n_groups > 0 && j->gpus > replay_setup_gpus(s))) {
            s->too_big++;
            continue;
        }
        r->submit = j->submit;
        r->duration = j->duration;
        r->tenant = map[j->tenant];
        if (j->task_gpus > 0 && j->task_gpus <= s->node_gpus && j->gpus % j->task_gpus == 0) {
            r->n_tasks = (int)(j->gpus / j->task_gpus);
            r->gpus = j->task_gpus;
        } else {
            gang_shape(s, j->gpus, &r->n_tasks, &r->gpus);
        }
        s->rounded_up += (int64_t)r->n_tasks * r->gpus != j->gpus;
        r->prio_class = j->prio >= 0 && j->prio < tr->n_prio ? prio[j->prio] : -1;
        r->line = j->line;
        gpu_s[j->tenant] += (double)j->gpus * (double)j->duration;
        s->n_jobs++;
    }
    if (s->n_jobs == 0) {
        allot_fmt(err, errlen, "%s: no job to replay in the window", tr->source);
        rc = ALLOT_EINVAL;
        goto fail;
    }
    if ((rc = bound_window(s, err, errlen)) < 0)
        goto fail;
    span = (double)(s->to - s->from);
    if (!given) {
        double offered = 0;

        for (int v = 0; v < tr->n_tenants; v++)
            offered += gpu_s[v];
        if ((rc = tenants_generate(s, tr, gpu_s,
                                   s->n_groups ? (double)replay_setup_gpus(s) : offered / span,
                                   o->equal_shares, err, errlen)) < 0 ||
            (rc = apply_quota(s, o, err, errlen)) < 0)
            goto fail;
        /* tenants_adopt ran before the changes: take them into the leaves */
        for (int t = 0; t < s->n_tenants; t++) {
            const struct sim_tenant_conf *c = &s->conf.v[s->tenants[t].conf];

            s->tenants[t].nominal_milli = c->quota[ALLOT_RES_GPU].nominal;
        }
    } else if (o->tenants_path && o->n_quota) {
        allot_fmt(err, errlen, "--quota goes with a tenants document in memory, not a file");
        rc = ALLOT_EINVAL;
        goto fail;
    }
    qsort(s->jobs, s->n_jobs, sizeof(*s->jobs), cmp_job);
    finish_setup(s);
    if (o->load > 0 && (rc = rescale(s, o->load, err, errlen)) < 0)
        goto fail;
    s->load = s->offered_gpu_s / window_gpu_s(s);
    allot_fmt(s->source, sizeof(s->source), "%s", tr->source);
    allot_free(map);
    allot_free(prio);
    allot_free(gpu_s);
    return 0;
fail:
    allot_free(map);
    allot_free(prio);
    allot_free(gpu_s);
    replay_setup_free(s);
    return rc;
}

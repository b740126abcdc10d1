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
    return 0;
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
        t->nominal_milli = (int64_t)t->nodes * REPLAY_NODE_GPUS * ALLOT_MILLI;
        t->conf = -1;
        s->n_nodes += t->nodes;
    }
out:
    philly_vcs_free(&vcs);
    return rc;
}

/* Tenants from a tenants file: its leaves, each with a finite GPU nominal. */
static int tenants_from_conf(struct replay_setup *s, const char *path, char *err, size_t errlen)
{
    int64_t total = 0;
    int rc = sim_tenants_read(path, s->cat, &s->conf, err, errlen);

    if (rc)
        return rc;
    s->has_conf = true;
    s->tenants = allot_calloc(s->conf.n, sizeof(*s->tenants));
    if (!s->tenants)
        return oom(err, errlen);
    for (size_t i = 0; i < s->conf.n; i++) {
        const struct sim_tenant_conf *c = &s->conf.v[i];
        struct replay_tenant *t;

        if (!c->leaf)
            continue;
        if (!c->has_quota[ALLOT_RES_GPU] || c->quota[ALLOT_RES_GPU].nominal == ALLOT_UNLIMITED) {
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
        t->nominal_milli = c->quota[ALLOT_RES_GPU].nominal;
        t->conf = (int)i;
        total += t->nominal_milli;
    }
    s->n_nodes =
        (int)((total + REPLAY_NODE_GPUS * ALLOT_MILLI - 1) / (REPLAY_NODE_GPUS * ALLOT_MILLI));
    if (s->n_nodes < 1)
        s->n_nodes = 1;
    if (s->n_nodes > REPLAY_MAX_NODES) {
        allot_fmt(err, errlen, "%s: the tenants' GPU nominal quotas ask for more than %d nodes",
                  path, REPLAY_MAX_NODES);
        return ALLOT_EINVAL;
    }
    return 0;
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

static void gang_shape(int g, int *n_tasks, int *per_task)
{
    *n_tasks = (g + REPLAY_NODE_GPUS - 1) / REPLAY_NODE_GPUS;
    *per_task = g < REPLAY_NODE_GPUS ? g : REPLAY_NODE_GPUS;
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
    return (double)s->n_nodes * REPLAY_NODE_GPUS * (double)(s->to - s->from);
}

/* Rescales the cluster so the offered GPU-time is `load` x capacity. */
static int rescale(struct replay_setup *s, double load, char *err, size_t errlen)
{
    double want_gpus = s->offered_gpu_s / (load * (double)(s->to - s->from));
    double f = want_gpus / ((double)s->n_nodes * REPLAY_NODE_GPUS);

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
        s->tenants[i].nominal_milli = (int64_t)s->tenants[i].nodes * REPLAY_NODE_GPUS * ALLOT_MILLI;
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
    struct philly_jobs pj = {0};
    int *map = NULL, rc;
    int64_t first = INT64_MAX, last = INT64_MIN;

    if ((rc = setup_begin(s, err, errlen)) < 0 ||
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

        if (j->submit < s->from || j->submit >= s->to) {
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
        r->submit = j->submit;
        r->duration = j->duration;
        r->tenant = map[j->vc];
        gang_shape(j->num_gpus, &r->n_tasks, &r->gpus);
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
    static const double default_mix[MTGEN_KINDS] = {0.3, 0.5, 0.2};
    struct mtgen_tenant *mt = NULL;
    struct mtgen_job *gj = NULL;
    struct mtgen_opts o = {.days = days, .load = load, .seed = seed};
    int kind_class[MTGEN_KINDS];
    size_t n = 0;
    int rc;

    if ((rc = setup_begin(s, err, errlen)) < 0 ||
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
        gang_shape(gj[i].gpus, &r->n_tasks, &r->gpus);
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

/*
 * Implementation of mtgen.h. Arrivals of each (tenant, kind) stream are a
 * non-homogeneous Poisson process drawn by thinning: candidates at the
 * peak rate, each kept with probability shape(t) / peak. Each kind's shape
 * is normalised once to a mean of 1 over a week (minute steps), so the
 * stream's average rate is exactly what the sizing asks for.
 */
#include "mtgen.h"

#include "allot/common.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

const char *const mtgen_kind_names[MTGEN_KINDS] = {
    [MTGEN_INFERENCE] = "inference",
    [MTGEN_TRAINING] = "training",
    [MTGEN_NOTEBOOK] = "notebooks",
};

#define DAY   86400
#define WEEK  (7 * DAY)
#define PILOT 4096 /* draws that estimate the mean GPU-time of one arrival */
#define PI    3.14159265358979323846

static double unit(struct allot_rng *r)
{
    return (double)(allot_rng_next(r) >> 11) * 0x1.0p-53;
}

static double expo(struct allot_rng *r)
{
    return -log1p(-unit(r));
}

static double normal(struct allot_rng *r)
{
    double u = unit(r), v = unit(r);

    return sqrt(-2.0 * log1p(-u)) * cos(2.0 * PI * v);
}

/* Log-uniform in [lo, hi]. */
static int64_t log_uniform(struct allot_rng *r, double lo, double hi)
{
    return (int64_t)llround(exp(log(lo) + unit(r) * (log(hi) - log(lo))));
}

/* Relative arrival intensity of `kind` at epoch second a (not normalised). */
static double shape_raw(int kind, int64_t a)
{
    int64_t days = a >= 0 ? a / DAY : (a - DAY + 1) / DAY;
    int weekday = (int)(((days + 4) % 7 + 7) % 7); /* 0 = Sunday; 1970-01-01 was a Thursday */
    double h = (double)(a - days * DAY) / 3600.0;
    bool workday = weekday >= 1 && weekday <= 5;

    switch (kind) {
    case MTGEN_INFERENCE:
        return 1.0 + 0.6 * cos(2.0 * PI * (h - 14.0) / 24.0);
    case MTGEN_TRAINING:
        return workday ? 1.2 : 0.5;
    default: /* notebooks: office hours, busiest late morning and mid-afternoon */
        if (!workday || h < 8.0 || h >= 19.0)
            return 0.0;
        return 1.0 + 0.5 * cos(2.0 * PI * (h - 11.0) / 4.0);
    }
}

/* Mean and peak of a kind's shape over one week (minute steps). */
static void shape_stats(int kind, double *mean, double *peak)
{
    double s = 0, m = 0;

    for (int64_t t = 0; t < WEEK; t += 60) {
        double x = shape_raw(kind, t);

        s += x;
        m = x > m ? x : m;
    }
    *mean = s * 60.0 / (double)WEEK;
    *peak = m;
}

/* Largest of 1, 2, 4, ... 32 that is at most `cap` (at least 1). */
static int cap_gpus(int g, int64_t cap)
{
    while (g > 1 && g > cap)
        g /= 2;
    return g;
}

/* Draws one arrival of `kind`: fills jobs (room for 12) and returns their count. */
static int draw(struct allot_rng *r, int kind, int64_t tenant_gpus, struct mtgen_job *jobs)
{
    switch (kind) {
    case MTGEN_INFERENCE:
        jobs[0].gpus = cap_gpus(unit(r) < 0.9 ? 1 : 2, tenant_gpus);
        jobs[0].duration = log_uniform(r, 1800, 8 * 3600);
        jobs[0].submit = 0;
        return 1;
    case MTGEN_TRAINING: {
        static const int sizes[] = {1, 2, 4, 8, 16, 32};
        static const double cum[] = {0.30, 0.50, 0.70, 0.90, 0.97, 1.0};
        double u = unit(r);
        int k = 2 + (int)allot_rng_below(r, 11), g = 0, off = 0;

        for (int i = 0; i < 6; i++)
            if (u < cum[i] || i == 5) {
                g = sizes[i];
                break;
            }
        g = cap_gpus(g, tenant_gpus);
        for (int i = 0; i < k; i++) {
            double d = exp(log(7200.0) + 1.5 * normal(r));

            d = d < 300 ? 300 : d > 5.0 * DAY ? 5.0 * DAY : d;
            jobs[i].gpus = g;
            jobs[i].duration = (int64_t)llround(d);
            jobs[i].submit = off;
            off += (int)allot_rng_below(r, 31);
        }
        return k;
    }
    default:
        jobs[0].gpus = 1;
        jobs[0].duration = log_uniform(r, 900, 6 * 3600);
        jobs[0].submit = 0;
        return 1;
    }
}

static uint64_t stream_seed(uint64_t seed, int tenant, int kind)
{
    return allot_hash_mix(allot_hash_mix(seed, (uint64_t)tenant + 1), (uint64_t)kind + 101);
}

struct keyed {
    struct mtgen_job j;
    uint64_t seq;
};

static int cmp_job(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;

    if (x->j.submit != y->j.submit)
        return x->j.submit < y->j.submit ? -1 : 1;
    if (x->j.tenant != y->j.tenant)
        return x->j.tenant < y->j.tenant ? -1 : 1;
    if (x->j.kind != y->j.kind)
        return x->j.kind < y->j.kind ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

int mtgen_generate(const struct mtgen_tenant *t, int n_tenants, const struct mtgen_opts *o,
                   struct mtgen_job **out, size_t *n)
{
    struct keyed *v = NULL;
    size_t nv = 0, cap = 0;
    int64_t horizon;
    uint64_t seq = 0;

    *out = NULL;
    *n = 0;
    if (n_tenants < 0 || o->days < 1 || o->days > 3660 || !(o->load >= 0 && o->load <= 10))
        return ALLOT_EINVAL;
    for (int i = 0; i < n_tenants; i++) {
        double s = 0;

        if (t[i].gpus < 0)
            return ALLOT_EINVAL;
        for (int k = 0; k < MTGEN_KINDS; k++) {
            if (!(t[i].mix[k] >= 0))
                return ALLOT_EINVAL;
            s += t[i].mix[k];
        }
        if (fabs(s - 1.0) > 1e-6)
            return ALLOT_EINVAL;
    }
    horizon = (int64_t)o->days * DAY;
    for (int k = 0; k < MTGEN_KINDS; k++) {
        double mean, peak;

        shape_stats(k, &mean, &peak);
        for (int i = 0; i < n_tenants; i++) {
            struct mtgen_job buf[12];
            struct allot_rng r;
            double target = o->load * t[i].mix[k] * (double)t[i].gpus * (double)horizon, m = 0;
            double rate, tt = 0;

            if (target <= 0)
                continue;
            /* pilot: the mean GPU-seconds of one arrival, from its own stream */
            allot_rng_seed(&r, stream_seed(o->seed ^ 0x5bd1e995u, i, k));
            for (int p = 0; p < PILOT; p++) {
                int c = draw(&r, k, t[i].gpus, buf);

                for (int q = 0; q < c; q++)
                    m += (double)buf[q].gpus * (double)buf[q].duration;
            }
            m /= PILOT;
            rate = target / (m * (double)horizon) / mean; /* candidate rate at shape 1 */
            allot_rng_seed(&r, stream_seed(o->seed, i, k));
            for (;;) {
                int64_t at;
                int c;

                tt += expo(&r) / (rate * peak);
                if (tt >= (double)horizon)
                    break;
                at = (int64_t)tt;
                if (unit(&r) * peak >= shape_raw(k, o->start + at))
                    continue;
                c = draw(&r, k, t[i].gpus, buf);
                for (int q = 0; q < c; q++) {
                    int64_t s = at + buf[q].submit;

                    if (s >= horizon)
                        continue;
                    if (allot_grow((void **)&v, &cap, nv + 1, sizeof(*v)) < 0) {
                        allot_free(v);
                        return ALLOT_ENOMEM;
                    }
                    v[nv].j = buf[q];
                    v[nv].j.submit = o->start + s;
                    v[nv].j.tenant = i;
                    v[nv].j.kind = k;
                    v[nv].seq = seq++;
                    nv++;
                }
            }
        }
    }
    if (nv == 0)
        return 0;
    qsort(v, nv, sizeof(*v), cmp_job);
    *out = allot_malloc(nv * sizeof(**out));
    if (!*out) {
        allot_free(v);
        return ALLOT_ENOMEM;
    }
    for (size_t i = 0; i < nv; i++)
        (*out)[i] = v[i].j;
    *n = nv;
    allot_free(v);
    return 0;
}

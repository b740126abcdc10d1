/*
 * Perturbed workloads (fill_perturb.h). The spec parser walks the comma
 * list with the strict number parser of the command lines (cliopt.h); the
 * steps rewrite the trace's task array and node array in place, then
 * rebuild what is derived from them.
 */
#include "fill_perturb.h"

#include "allot/common.h"
#include "cliopt.h"

#include <math.h>
#include <string.h>

#define MAX_SCALE 10.0

/* Fractional pods: one GPU, a share of it. */
static bool fractional(const struct allot_task *t)
{
    return t->num_gpu == 1 && t->gpu_milli > 0 && t->gpu_milli < ALLOT_MILLI;
}

int sim_fill_perturb_parse(const char *spec, struct sim_fill_perturb *out, char *err, size_t errlen)
{
    bool seen_seed = false;

    memset(out, 0, sizeof(*out));
    out->seed = 1;
    if (strlen(spec) >= sizeof(out->spec) || !*spec) {
        allot_fmt(err, errlen, "want flip, scale=F, subset=P[,seed=N] (comma-separated)");
        return ALLOT_EINVAL;
    }
    allot_strlcpy(out->spec, spec, sizeof(out->spec));
    for (const char *p = spec;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char step[128], *eq;
        const char *val;

        allot_fmt(step, sizeof(step), "%.*s", (int)len, p);
        eq = strchr(step, '=');
        val = eq ? eq + 1 : NULL;
        if (eq)
            *eq = '\0';
        if (!strcmp(step, "flip") && !val) {
            if (out->flip)
                goto repeated;
            out->flip = true;
        } else if (!strcmp(step, "scale") && val) {
            if (out->scale > 0)
                goto repeated;
            if (!cliopt_parse_double(val, &out->scale) || out->scale <= 0 ||
                out->scale > MAX_SCALE) {
                allot_fmt(err, errlen, "scale=%s: want a factor in (0, %g]", val, MAX_SCALE);
                return ALLOT_EINVAL;
            }
        } else if (!strcmp(step, "subset") && val) {
            if (out->subset > 0)
                goto repeated;
            if (!cliopt_parse_double(val, &out->subset) || out->subset <= 0 || out->subset > 1) {
                allot_fmt(err, errlen, "subset=%s: want a share of the nodes in (0, 1]", val);
                return ALLOT_EINVAL;
            }
        } else if (!strcmp(step, "seed") && val) {
            int64_t s;

            if (seen_seed)
                goto repeated;
            if (!cliopt_parse_int(val, 0, INT64_MAX, &s)) {
                allot_fmt(err, errlen, "seed=%s: want an integer 0..%lld", val,
                          (long long)INT64_MAX);
                return ALLOT_EINVAL;
            }
            out->seed = (uint64_t)s;
            seen_seed = true;
        } else {
            allot_fmt(err, errlen,
                      "\"%.*s\": want flip, scale=F, subset=P or seed=N (comma-separated)",
                      (int)(len < 40 ? len : 40), p);
            return ALLOT_EINVAL;
        }
        if (!comma)
            break;
        p = comma + 1;
        continue;
    repeated:
        allot_fmt(err, errlen, "\"%s\" given twice", step);
        return ALLOT_EINVAL;
    }
    if (seen_seed && out->subset == 0) {
        allot_fmt(err, errlen, "seed=N only goes with subset=P (it draws the nodes)");
        return ALLOT_EINVAL;
    }
    return 0;
}

/* Keeps round(share x n) GPU nodes, at least one, drawn with `seed`, in
 * file order. */
static int keep_subset(struct sim_fill_trace *t, double share, uint64_t seed)
{
    size_t n = t->n_nodes, k = (size_t)llround(share * (double)n), *idx;
    unsigned char *keep;
    struct allot_rng r;

    k = k < 1 ? 1 : k > n ? n : k;
    idx = allot_malloc((n ? n : 1) * sizeof(*idx));
    keep = allot_calloc(n ? n : 1, 1);
    if (!idx || !keep) {
        allot_free(idx);
        allot_free(keep);
        return ALLOT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    /* a stream of its own, apart from the workload's and the policies' */
    allot_rng_seed(&r, allot_hash_mix(seed, 0x73756273ULL));
    for (size_t i = 0; i < k; i++) { /* partial Fisher-Yates: idx[0..k) drawn */
        size_t j = i + (size_t)allot_rng_below(&r, n - i), x = idx[i];

        idx[i] = idx[j];
        idx[j] = x;
        keep[idx[i]] = 1;
    }
    t->gpus = 0;
    t->n_nodes = 0;
    for (size_t i = 0; i < n; i++)
        if (keep[i]) {
            t->nodes[t->n_nodes++] = t->nodes[i];
            t->gpus += t->nodes[i].n_gpus;
        }
    allot_free(idx);
    allot_free(keep);
    return 0;
}

int sim_fill_perturb_apply(struct sim_fill_trace *t, const struct sim_fill_perturb *p, char *err,
                           size_t errlen)
{
    size_t wl = strlen(t->workload);
    int rc;

    t->request_milli = 0;
    for (size_t i = 0; i < t->n_tasks; i++) {
        struct allot_task *k = &t->tasks[i];
        char msg[160];

        if (fractional(k)) {
            if (p->flip)
                k->gpu_milli = ALLOT_MILLI - k->gpu_milli;
            if (p->scale > 0) {
                long long s = llround((double)k->gpu_milli * p->scale);

                k->gpu_milli = (int)(s < 1 ? 1 : s > ALLOT_MILLI ? ALLOT_MILLI : s);
            }
            if (allot_task_validate(t->cat, k, msg, sizeof(msg))) {
                allot_fmt(err, errlen, "--perturb %s: pod %s: %s", p->spec, t->opods.v[i].name,
                          msg);
                return ALLOT_EINVAL;
            }
        }
        t->request_milli += (int64_t)k->num_gpu * k->gpu_milli;
    }
    if (p->subset > 0 && keep_subset(t, p->subset, p->seed) < 0)
        goto oom; /* its only failure */
    allot_frag_mix_clear(&t->mix);
    rc = allot_frag_mix_build(t->tasks, t->n_tasks, SIM_FILL_COVERAGE, &t->mix);
    if (rc == ALLOT_ENOMEM)
        goto oom;
    if (rc) {
        allot_fmt(err, errlen, "--perturb %s: cannot build the typical-task mix", p->spec);
        return rc;
    }
    allot_fmt(t->workload + wl, sizeof(t->workload) - wl, "+%s", p->spec);
    return 0;
oom:
    allot_fmt(err, errlen, "out of memory");
    return ALLOT_ENOMEM;
}

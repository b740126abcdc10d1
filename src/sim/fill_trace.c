/*
 * openb lists -> catalog node specs and allot_task shapes (fill_trace.h).
 * The conversion validates every pod against the catalog with the core's
 * own task check, so the runs never meet a task the scheduler rejects.
 */
#include "fill_trace.h"

#include "allot/common.h"

#include <string.h>

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
            continue; /* CPU-only nodes take no part (docs/benchmarks.md) */
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

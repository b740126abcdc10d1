/*
 * Fuzz target: the body of POST /v1/jobs. The bytes go through what
 * allotd does with a body (json_loadb with JSON_REJECT_DUPLICATES, an
 * object required) into jobspec_parse with the built-in GPU catalog.
 * Invariants: the result is 0, 400 or 422, with a message when not 0; an
 * accepted spec lies inside the ranges jobspec.h and docs/api.yaml give;
 * and the spec as the store keeps it (json_dumps, JSON_COMPACT) parses
 * again, as the scheduling loop does, into the same job.
 */
#include "fuzz.h"

#include "jobspec.h"

#include "allot/catalog.h"

#include <string.h>

static struct allot_catalog *cat; /* owned; loaded once, kept for the process */

static void check_spec(const struct jobspec *s)
{
    const struct allot_task *t = &s->task;

    FUZZ_CHECK(s->tenant && *s->tenant && strlen(s->tenant) <= 255);
    FUZZ_CHECK(s->name && strlen(s->name) <= 128);
    FUZZ_CHECK(!s->priority || strlen(s->priority) <= 31);
    FUZZ_CHECK(s->n_tasks >= 1 && s->n_tasks <= 1024);
    FUZZ_CHECK(s->limit_s >= 0 && s->limit_s <= INT64_C(1) << 40);
    FUZZ_CHECK(t->num_gpu >= 0 && t->num_gpu <= ALLOT_MAX_GPUS);
    FUZZ_CHECK(t->gpu_milli >= 0 && t->gpu_milli <= ALLOT_MILLI);
    FUZZ_CHECK(t->gpu_mem_mib >= 0 && t->gpu_mem_mib <= INT64_C(1) << 40);
    FUZZ_CHECK(t->cpu_milli >= 0 && t->cpu_milli <= INT64_C(65536000));
    FUZZ_CHECK(t->mem_mib >= 0 && t->mem_mib <= INT64_C(1) << 40);
    FUZZ_CHECK(t->mig_profile >= -1 && t->mig_profile < cat->n_profile_names);
    /* one kind of GPU request: none, whole GPUs, one MIG instance, a fraction */
    if (t->num_gpu == 0)
        FUZZ_CHECK(t->gpu_milli == 0 && t->gpu_mem_mib == 0 && t->mig_profile < 0);
    if (t->num_gpu > 1)
        FUZZ_CHECK(t->gpu_milli == ALLOT_MILLI && t->mig_profile < 0 && t->gpu_mem_mib == 0);
    if (t->mig_profile >= 0)
        FUZZ_CHECK(t->num_gpu == 1);
    if (cat->n_models < 64)
        FUZZ_CHECK((t->model_mask >> cat->n_models) == 0);
}

static bool str_eq(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static bool same_spec(const struct jobspec *a, const struct jobspec *b)
{
    const struct allot_task *x = &a->task, *y = &b->task;

    return str_eq(a->name, b->name) && str_eq(a->tenant, b->tenant) &&
           str_eq(a->priority, b->priority) && a->n_tasks == b->n_tasks &&
           a->limit_s == b->limit_s && a->checkpointable == b->checkpointable &&
           a->requeue == b->requeue && x->num_gpu == y->num_gpu && x->gpu_milli == y->gpu_milli &&
           x->gpu_mem_mib == y->gpu_mem_mib && x->mig_profile == y->mig_profile &&
           x->cpu_milli == y->cpu_milli && x->mem_mib == y->mem_mib &&
           x->model_mask == y->model_mask && x->tenant == y->tenant && x->isolation == y->isolation;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct jobspec s, again;
    char err[512];
    json_t *b, *stored = NULL;
    char *text = NULL;
    int rc;

    if (!cat) {
        cat = allot_catalog_default(err, sizeof(err));
        FUZZ_CHECK(cat != NULL);
    }
    b = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(b))
        goto out;
    err[0] = '\0';
    rc = jobspec_parse(b, cat, &s, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == 400 || rc == 422);
    FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
    if (rc) {
        FUZZ_CHECK(err[0] != '\0');
        goto out;
    }
    check_spec(&s);
    /* the loop parses the stored text again and must find the same job */
    text = json_dumps(b, JSON_COMPACT);
    FUZZ_CHECK(text != NULL);
    stored = json_loads(text, 0, NULL);
    FUZZ_CHECK(stored != NULL);
    FUZZ_CHECK(jobspec_parse(stored, cat, &again, err, sizeof(err)) == 0);
    FUZZ_CHECK(same_spec(&s, &again));
out:
    json_decref(stored);
    free(text);
    json_decref(b);
    return 0;
}

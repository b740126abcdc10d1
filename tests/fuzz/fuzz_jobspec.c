/*
 * Fuzz target: the body of POST /v1/jobs. The bytes go through what
 * allotd does with a body (json_loadb with JSON_REJECT_DUPLICATES, an
 * object required) into jobspec_parse with the built-in GPU catalog.
 * Its first line also goes to the array and dependency parsers
 * (jobspec_array_parse, jobspec_deps_parse) on their own. Invariants: the
 * result is 0, 400 or 422, with a message when not 0; an accepted spec
 * lies inside the ranges jobspec.h and docs/api.yaml give (array indices
 * ascending and in range, throttle below the member count, dependencies
 * with valid ids and kinds); and the spec as the store keeps it
 * (json_dumps, JSON_COMPACT) parses again, as the scheduling loop does,
 * into the same job.
 */
#include "fuzz.h"

#include "jobspec.h"

#include "allot/catalog.h"

#include <string.h>

static struct allot_catalog *cat; /* owned; loaded once, kept for the process */

static void check_deps(const struct jobdep *d, int n)
{
    FUZZ_CHECK(n >= 0 && n <= JOBSPEC_DEPS_MAX);
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(d[i].id >= 1 && d[i].id <= INT64_C(1) << 53);
        FUZZ_CHECK(d[i].kind >= JOBDEP_AFTEROK && d[i].kind <= JOBDEP_AFTERNOTOK);
        FUZZ_CHECK(jobdep_kind_name(d[i].kind) != NULL);
    }
}

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
    FUZZ_CHECK(!s->array == !s->array_count);
    FUZZ_CHECK(s->array_count >= 0 && s->array_count <= JOBSPEC_ARRAY_MAX);
    FUZZ_CHECK(s->array_throttle >= 0 &&
               (!s->array_throttle || s->array_throttle < s->array_count));
    check_deps(s->deps, s->n_deps);
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
           x->model_mask == y->model_mask && x->tenant == y->tenant &&
           x->isolation == y->isolation && str_eq(a->array, b->array) &&
           a->array_count == b->array_count && a->array_throttle == b->array_throttle &&
           a->n_deps == b->n_deps &&
           !memcmp(a->deps, b->deps, (size_t)a->n_deps * sizeof(*a->deps));
}

/* The array and dependency expressions on their own: s is the input's
 * first line. */
static void check_expressions(const char *s)
{
    static int idx[JOBSPEC_ARRAY_MAX];
    struct jobdep deps[JOBSPEC_DEPS_MAX];
    char err[256] = "";
    int n, throttle = -1, again_throttle = -1;

    n = jobspec_array_parse(s, idx, &throttle, err, sizeof(err));
    FUZZ_CHECK(n == -1 || (n >= 1 && n <= JOBSPEC_ARRAY_MAX));
    if (n < 0) {
        FUZZ_CHECK(err[0] != '\0');
    } else {
        for (int i = 0; i < n; i++)
            FUZZ_CHECK(idx[i] >= 0 && idx[i] < JOBSPEC_ARRAY_MAX && (!i || idx[i - 1] < idx[i]));
        FUZZ_CHECK(throttle >= 0 && (!throttle || throttle < n));
        FUZZ_CHECK(jobspec_array_parse(s, NULL, &again_throttle, err, sizeof(err)) == n);
        FUZZ_CHECK(again_throttle == throttle);
    }
    err[0] = '\0';
    n = jobspec_deps_parse(s, deps, err, sizeof(err));
    FUZZ_CHECK(n == -1 || n >= 1);
    if (n < 0)
        FUZZ_CHECK(err[0] != '\0');
    else
        check_deps(deps, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char line[1100];
    const uint8_t *nl = memchr(data, '\n', size);
    size_t n = nl ? (size_t)(nl - data) : size;
    struct jobspec s, again;
    char err[512];
    json_t *b, *stored = NULL;
    char *text = NULL;
    int rc;

    if (!cat) {
        cat = allot_catalog_default(err, sizeof(err));
        FUZZ_CHECK(cat != NULL);
    }
    /* a C string, as jansson hands strings to jobspec_parse (a NUL ends it) */
    if (n >= sizeof(line))
        n = sizeof(line) - 1;
    memcpy(line, data, n);
    line[n] = '\0';
    check_expressions(line);

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

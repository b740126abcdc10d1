/*
 * Validation of job requests (see jobspec.h). Types and unknown fields
 * are 400; shapes the cluster can never run (a MIG profile or GPU model
 * the catalog does not know, more GPUs than a node can have, exclusive
 * fields combined) are 422. Pure: no I/O, no store.
 */
#include "jobspec.h"

#include "allot/common.h"
#include "allot/queue.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const fields[] = {"name",
                                     "tenant",
                                     "tasks",
                                     "gpus",
                                     "mig",
                                     "gpu_milli",
                                     "gpu_memory",
                                     "cpus",
                                     "memory",
                                     "priority",
                                     "command",
                                     "env",
                                     "workdir",
                                     "image",
                                     "gpu_models",
                                     "time_limit",
                                     "checkpointable",
                                     "checkpoint_interval",
                                     "labels",
                                     "requeue",
                                     "array",
                                     "dependency",
                                     "rdma_vfs",
                                     "qos",
                                     "hold",
                                     "signal",
                                     "node_selector",
                                     "begin_time",
                                     "nodelist",
                                     "exclude_nodes",
                                     "script",
                                     NULL};

/* Linux's MAX_ARG_STRLEN: one argument or KEY=VALUE, its NUL counted */
#define ARG_ONE_MAX (128 * 1024)

#define E400(...) (allot_fmt(err, errlen, __VA_ARGS__), 400)
#define E422(...) (allot_fmt(err, errlen, __VA_ARGS__), 422)

int jobspec_warning(const char *s, int64_t limit, int *sig, int64_t *before, char *err,
                    size_t errlen)
{
    char name[32];
    const char *at = strchr(s, '@');

    *before = 60;
    allot_fmt(name, sizeof(name), "%.*s", at ? (int)(at - s) : (int)strlen(s), s);
    if (!(*sig = allot_signal_parse(name)))
        return E422(
            "field \"signal\": \"%s\" is not SIG[@SECONDS] with SIG one of " ALLOT_SIGNAL_NAMES, s);
    if (at && !allot_parse_num(at + 1, 0, 65535, before))
        return E422("field \"signal\": \"%s\": SECONDS after '@' must be 0..65535", s);
    if (!limit)
        return E422("field \"signal\" is sent before the time limit: it needs \"time_limit\"");
    if (*before >= limit)
        return E422("field \"signal\": %lld s before a time limit of %lld s is before the job "
                    "starts",
                    (long long)*before, (long long)limit);
    return 0;
}

static int get_int(json_t *b, const char *k, int64_t lo, int64_t hi, int64_t *out, char *err,
                   size_t errlen)
{
    json_t *v = json_object_get(b, k);

    if (!v)
        return 0;
    if (!json_is_integer(v))
        return E400("field \"%s\" must be an integer", k);
    if (json_integer_value(v) < lo || json_integer_value(v) > hi)
        return E422("field \"%s\" is %lld; must be in %lld..%lld", k,
                    (long long)json_integer_value(v), (long long)lo, (long long)hi);
    *out = json_integer_value(v);
    return 0;
}

static int get_str(json_t *b, const char *k, size_t max, const char **out, char *err, size_t errlen)
{
    json_t *v = json_object_get(b, k);

    if (!v)
        return 0;
    if (!json_is_string(v))
        return E400("field \"%s\" must be a string", k);
    if (json_string_length(v) > max || strlen(json_string_value(v)) != json_string_length(v))
        return E422("field \"%s\" is longer than %zu bytes or holds a NUL", k, max);
    *out = json_string_value(v);
    return 0;
}

static const char *const qos_names[] = {"guaranteed", "burstable", "best-effort"};

/* "qos": one of qos_names (enum allot_qos order); burstable when absent. */
static int get_qos(json_t *b, int *out, char *err, size_t errlen)
{
    const char *q = NULL;
    int rc = get_str(b, "qos", 31, &q, err, errlen);

    *out = ALLOT_QOS_BURSTABLE;
    if (rc || !q)
        return rc;
    for (int i = 0; i < (int)(sizeof(qos_names) / sizeof(qos_names[0])); i++)
        if (!strcmp(q, qos_names[i])) {
            *out = i;
            return 0;
        }
    return E422("field \"qos\": unknown QoS \"%s\" (guaranteed, burstable or best-effort)", q);
}

/* An array of strings or an object of strings. */
static int get_strings(json_t *b, const char *k, bool object, char *err, size_t errlen)
{
    json_t *v = json_object_get(b, k), *x;
    const char *key;
    size_t i;

    if (!v)
        return 0;
    if (object ? !json_is_object(v) : !json_is_array(v))
        return E400("field \"%s\" must be %s", k,
                    object ? "an object of strings" : "an array of strings");
    size_t bytes = 0, n = object ? json_object_size(v) : json_array_size(v);

    if (n > JOBSPEC_STRINGS_MAX)
        return E400("field \"%s\" has %zu entries: at most %d", k, n, JOBSPEC_STRINGS_MAX);
    if (object) {
        json_object_foreach(v, key, x)
        {
            if (!json_is_string(x))
                return E400("field \"%s.%s\" must be a string", k, key);
            if (strlen(key) + 1 + json_string_length(x) >= ARG_ONE_MAX) /* as KEY=VALUE */
                return E400("field \"%s.%.64s\" is over %d bytes with its name, the kernel's "
                            "limit for one variable",
                            k, key, ARG_ONE_MAX - 1);
            bytes += strlen(key) + json_string_length(x);
        }
    } else {
        json_array_foreach(v, i, x)
        {
            if (!json_is_string(x))
                return E400("field \"%s[%zu]\" must be a string", k, i);
            if (json_string_length(x) >= ARG_ONE_MAX)
                return E400("field \"%s[%zu]\" is %zu bytes: at most %d, the kernel's limit for "
                            "one argument",
                            k, i, json_string_length(x), ARG_ONE_MAX - 1);
            bytes += json_string_length(x);
        }
    }
    if (bytes > JOBSPEC_STRINGS_BYTES_MAX)
        return E400("field \"%s\" holds %zu bytes of text: at most %d (KiB: %d)", k, bytes,
                    JOBSPEC_STRINGS_BYTES_MAX, JOBSPEC_STRINGS_BYTES_MAX / 1024);
    return 0;
}

/* "nodelist" / "exclude_nodes" (sbatch -w / -x): an array of node names
 * (allot_node_name_ok), into *out (borrowed; NULL when absent). A node
 * list must name one node at least. */
static int get_nodes(json_t *b, const char *k, json_t **out, char *err, size_t errlen)
{
    json_t *v = json_object_get(b, k), *x;
    size_t i;
    int rc = get_strings(b, k, false, err, errlen);

    *out = NULL;
    if (rc || !v)
        return rc;
    json_array_foreach(v, i, x)
    {
        if (!allot_node_name_ok(json_string_value(x)))
            return E422("field \"%s[%zu]\": \"%.64s\" is not a node name (1..63 of A-Z a-z "
                        "0-9 . _ -)",
                        k, i, json_string_value(x));
    }
    if (!json_array_size(v) && !strcmp(k, "nodelist"))
        return E422("field \"nodelist\" names no node: leave it out to run on any node");
    *out = v;
    return 0;
}

/* 422 when "exclude_nodes" takes every node of "nodelist" away: the job
 * could never start. (A set of the excluded names: no quadratic scan.) */
static int nodes_left(const struct jobspec *js, char *err, size_t errlen)
{
    json_t *out, *x;
    size_t i;
    bool left = false;

    if (!js->nodelist || !json_array_size(js->exclude))
        return 0;
    if (!(out = json_object()))
        return E422("out of memory");
    json_array_foreach(js->exclude, i, x) json_object_set(out, json_string_value(x), json_true());
    json_array_foreach(js->nodelist, i, x) left |= !json_object_get(out, json_string_value(x));
    json_decref(out);
    if (!left)
        return E422("fields \"nodelist\" and \"exclude_nodes\": every node listed is excluded; "
                    "the job could never start");
    return 0;
}

/* "node_selector": {"KEY": "VALUE", ...}, labels a node must all carry
 * (at most ALLOT_MAX_SELECT), into t->select. */
static int get_selector(json_t *b, struct allot_task *t, char *err, size_t errlen)
{
    json_t *v = json_object_get(b, "node_selector"), *x;
    const char *key, *problem;
    int n = 0;

    if (!v)
        return 0;
    if (!json_is_object(v))
        return E400("field \"node_selector\" must be an object of strings (label: value)");
    if (json_object_size(v) > ALLOT_MAX_SELECT)
        return E400("field \"node_selector\" has %zu labels: at most %d", json_object_size(v),
                    ALLOT_MAX_SELECT);
    json_object_foreach(v, key, x)
    {
        if (!json_is_string(x))
            return E400("field \"node_selector.%.80s\" must be a string", key);
        if ((problem = allot_label_key_problem(key)))
            return E400("field \"node_selector\": label \"%.80s\" %s", key, problem);
        if (strlen(json_string_value(x)) != json_string_length(x))
            return E400("field \"node_selector.%s\": value holds a NUL character", key);
        if ((problem = allot_label_value_problem(json_string_value(x))))
            return E400("field \"node_selector.%s\": value %s", key, problem);
        t->select[n++] = allot_label_hash(key, json_string_value(x));
    }
    /* in one order: the same labels are the same task shape, however given */
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && t->select[k - 1] > t->select[k]; k--) {
            uint64_t w = t->select[k];
            t->select[k] = t->select[k - 1];
            t->select[k - 1] = w;
        }
    return 0;
}

/* A decimal number in lo..hi at *p, advancing *p; -1 when there is none. */
static int64_t number(const char **p, int64_t lo, int64_t hi)
{
    char *end;
    long long v;

    if (**p < '0' || **p > '9')
        return -1;
    errno = 0;
    v = strtoll(*p, &end, 10);
    if (errno || v < lo || v > hi)
        return -1;
    *p = end;
    return v;
}

int jobspec_array_parse(const char *s, int *idx, int *throttle, char *err, size_t errlen)
{
    unsigned char seen[(JOBSPEC_ARRAY_MAX + 7) / 8] = {0};
    const char *p = s;
    int count = 0;

    *throttle = 0;
    if (!*p) {
        allot_fmt(err, errlen, "field \"array\" is empty");
        return -1;
    }
    for (;;) {
        int64_t lo = number(&p, 0, JOBSPEC_ARRAY_MAX - 1), hi = lo, step = 1;

        if (lo >= 0 && *p == '-') {
            p++;
            hi = number(&p, lo, JOBSPEC_ARRAY_MAX - 1);
            if (hi >= 0 && *p == ':') {
                p++;
                step = number(&p, 1, JOBSPEC_ARRAY_MAX);
            }
        }
        if (lo < 0 || hi < 0 || step < 0) {
            allot_fmt(err, errlen,
                      "field \"array\": bad range at \"%.20s\" (want A, A-B or A-B:STEP with "
                      "0 <= A <= B <= %d)",
                      p, JOBSPEC_ARRAY_MAX - 1);
            return -1;
        }
        for (int64_t i = lo; i <= hi; i += step) {
            if (seen[i / 8] & (1u << (i % 8))) {
                allot_fmt(err, errlen, "field \"array\": index %lld appears twice", (long long)i);
                return -1;
            }
            seen[i / 8] |= (unsigned char)(1u << (i % 8));
            count++;
        }
        if (*p != ',')
            break;
        p++;
    }
    if (*p == '%') {
        p++;
        int64_t t = number(&p, 1, JOBSPEC_ARRAY_MAX);
        if (t < 0) {
            allot_fmt(err, errlen, "field \"array\": the throttle after %% must be 1..%d",
                      JOBSPEC_ARRAY_MAX);
            return -1;
        }
        *throttle = t >= count ? 0 : (int)t;
    }
    if (*p) {
        allot_fmt(err, errlen, "field \"array\": unexpected \"%.20s\"", p);
        return -1;
    }
    if (idx) {
        int n = 0;
        for (int i = 0; i < JOBSPEC_ARRAY_MAX; i++)
            if (seen[i / 8] & (1u << (i % 8)))
                idx[n++] = i;
    }
    return count;
}

static const char *const dep_kinds[] = {"afterok", "afterany", "afternotok"};

const char *jobdep_kind_name(int kind)
{
    return kind >= 0 && kind < 3 ? dep_kinds[kind] : "?";
}

int jobspec_deps_parse(const char *s, struct jobdep *deps, char *err, size_t errlen)
{
    const char *p = s;
    int n = 0;

    do {
        int kind = -1;
        size_t len = strcspn(p, ":,");

        for (int k = 0; k < 3; k++)
            if (len == strlen(dep_kinds[k]) && !strncmp(p, dep_kinds[k], len))
                kind = k;
        if (kind < 0 || p[len] != ':') {
            allot_fmt(err, errlen,
                      "field \"dependency\": want afterok|afterany|afternotok:ID[:ID...] "
                      "joined by \",\", got \"%.20s\"",
                      p);
            return -1;
        }
        p += len;
        while (*p == ':') {
            int64_t id;

            p++;
            id = number(&p, 1, INT64_C(1) << 53);
            if (id < 0) {
                allot_fmt(err, errlen, "field \"dependency\": bad job id at \"%.20s\"", p);
                return -1;
            }
            int64_t index = -1;
            if (*p == '_') { /* one member of an array, as in Slurm's 12_3 */
                p++;
                index = number(&p, 0, JOBSPEC_ARRAY_MAX - 1);
                if (index < 0) {
                    allot_fmt(err, errlen,
                              "field \"dependency\": bad array index at \"%.20s\" (ID_INDEX, "
                              "0..%d)",
                              p, JOBSPEC_ARRAY_MAX - 1);
                    return -1;
                }
            }
            if (n == JOBSPEC_DEPS_MAX) {
                allot_fmt(err, errlen, "field \"dependency\": more than %d jobs", JOBSPEC_DEPS_MAX);
                return -1;
            }
            deps[n++] = (struct jobdep){.id = id, .kind = kind, .index = (int)index};
        }
    } while (*p == ',' && p++);
    if (*p || !n) {
        allot_fmt(err, errlen, "field \"dependency\": unexpected \"%.20s\"", p);
        return -1;
    }
    return n;
}

int jobspec_parse(json_t *b, const struct allot_catalog *cat, struct jobspec *out, char *err,
                  size_t errlen)
{
    const char *k, *mig = NULL, *dep = NULL, *warn = NULL;
    json_t *v;
    int64_t tasks = 1, gpus = -1, milli = -1, gmem = -1, mem = 0, limit = 0, vfs = 0, ckpt = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    out->name = "";
    json_object_foreach(b, k, v)
    {
        bool ok = false;
        for (const char *const *f = fields; *f && !ok; f++)
            ok = !strcmp(*f, k);
        if (!ok)
            return E400("unknown field \"%s\"", k);
    }
    if (!json_object_get(b, "tenant"))
        return E400("field \"tenant\" is required (only a token bound to a leaf tenant may "
                    "leave it out: its jobs run there)");
    if ((rc = get_str(b, "tenant", 255, &out->tenant, err, errlen)) ||
        (rc = get_str(b, "name", 128, &out->name, err, errlen)) ||
        (rc = get_str(b, "priority", 31, &out->priority, err, errlen)) ||
        (rc = get_str(b, "mig", 31, &mig, err, errlen)) ||
        (rc = get_str(b, "array", 1024, &out->array, err, errlen)) ||
        (rc = get_str(b, "dependency", 4096, &dep, err, errlen)) ||
        (rc = get_str(b, "signal", 31, &warn, err, errlen)) ||
        (rc = get_str(b, "script", JOBSPEC_SCRIPT_MAX, &out->script, err, errlen)) ||
        (rc = get_int(b, "tasks", 1, 1024, &tasks, err, errlen)) ||
        (rc = get_int(b, "gpus", 0, 1000000, &gpus, err, errlen)) ||
        (rc = get_int(b, "gpu_milli", 1, 999, &milli, err, errlen)) ||
        (rc = get_int(b, "gpu_memory", 1, INT64_C(1) << 40, &gmem, err, errlen)) ||
        (rc = get_int(b, "memory", 0, INT64_C(1) << 40, &mem, err, errlen)) ||
        (rc = get_int(b, "rdma_vfs", 0, ALLOT_MAX_TASK_RDMA_VFS, &vfs, err, errlen)) ||
        (rc = get_int(b, "time_limit", 0, INT64_C(1) << 40, &limit, err, errlen)) ||
        (rc = get_int(b, "checkpoint_interval", 1, INT64_C(1) << 40, &ckpt, err, errlen)) ||
        (rc = get_int(b, "begin_time", 0, JOBSPEC_BEGIN_MAX, &out->begin_s, err, errlen)) ||
        (rc = get_strings(b, "command", false, err, errlen)) ||
        (rc = get_strings(b, "gpu_models", false, err, errlen)) ||
        (rc = get_strings(b, "env", true, err, errlen)) ||
        (rc = get_strings(b, "labels", true, err, errlen)))
        return rc;
    json_object_foreach(json_object_get(b, "env"), k, v)
    {
        if (!allot_env_name_ok(k))
            return E400("field \"env\": \"%.64s\" is not a variable name (1..256 printable "
                        "ASCII characters, no '=' or space)",
                        k);
        if (allot_env_reserved(k))
            return E400("field \"env.%s\": the node sets it to enforce GPU sharing; a job may not",
                        k);
    }
    if ((rc = get_qos(b, &out->qos, err, errlen)))
        return rc;
    if (out->script && strncmp(out->script, "#!", 2) != 0)
        return E422("field \"script\" must start with \"#!\" and the interpreter to run it "
                    "(#!/bin/bash), as sbatch asks");
    if (out->script && strchr(out->script, '\r'))
        return E422("field \"script\" has DOS line breaks (\\r\\n): convert it (dos2unix), as "
                    "sbatch asks");
    if ((v = json_object_get(b, "workdir")) && !json_is_string(v))
        return E400("field \"workdir\" must be a string");
    if ((v = json_object_get(b, "image")) && !json_is_string(v))
        return E400("field \"image\" must be a string");
    if ((v = json_object_get(b, "checkpointable")) && !json_is_boolean(v))
        return E400("field \"checkpointable\" must be a boolean");
    out->checkpointable = json_is_true(v);
    if (ckpt && !out->checkpointable)
        return E422("field \"checkpoint_interval\" needs \"checkpointable\": true");
    out->checkpoint_s = ckpt;
    if ((v = json_object_get(b, "requeue")) && !json_is_boolean(v))
        return E400("field \"requeue\" must be a boolean");
    out->requeue = !v || json_is_true(v);
    if ((v = json_object_get(b, "hold")) && !json_is_boolean(v))
        return E400("field \"hold\" must be a boolean");
    out->hold = json_is_true(v);
    if (!*out->tenant)
        return E422("field \"tenant\" must name a tenant");
    if (out->array && (out->array_count = jobspec_array_parse(
                           out->array, NULL, &out->array_throttle, err, errlen)) < 0)
        return 422;
    if (dep && (out->n_deps = jobspec_deps_parse(dep, out->deps, err, errlen)) < 0)
        return 422;

    struct allot_task *t = &out->task;
    t->mig_profile = -1;
    t->cpu_milli = 1000;
    if ((v = json_object_get(b, "cpus"))) {
        if (!json_is_number(v))
            return E400("field \"cpus\" must be a number");
        double c = json_number_value(v);
        /* a stored spec of 0 (an older allotd took it) still reads; new
         * submissions are held to 0.001 at least (api_jobs_submit) */
        if (!(c >= 0 && c <= 65536))
            return E422("field \"cpus\" must be in 0.001..65536");
        t->cpu_milli = (int64_t)llround(c * 1000);
    }
    t->mem_mib = mem;
    t->rdma_vfs = (int)vfs;
    int kinds = (gpus >= 0) + (mig != NULL) + (milli >= 0 || gmem >= 0);
    if (kinds > 1)
        return E422("fields \"gpus\", \"mig\" and \"gpu_milli\"/\"gpu_memory\" exclude each "
                    "other");
    if (gpus > ALLOT_MAX_GPUS)
        return E422("field \"gpus\" is %lld; no node holds more than %d GPUs", (long long)gpus,
                    ALLOT_MAX_GPUS);
    if (gpus >= 0) {
        t->num_gpu = (int)gpus;
        t->gpu_milli = gpus ? ALLOT_MILLI : 0;
    } else if (mig) {
        t->num_gpu = 1;
        t->mig_profile = allot_catalog_find_profile(cat, mig);
        if (t->mig_profile < 0)
            return E422("field \"mig\": unknown MIG profile \"%s\"", mig);
    } else if (milli >= 0 || gmem >= 0) {
        t->num_gpu = 1;
        t->gpu_milli = milli >= 0 ? (int)milli : 0;
        t->gpu_mem_mib = gmem >= 0 ? gmem : 0;
    }
    if ((v = json_object_get(b, "gpu_models"))) {
        size_t i;
        json_t *m;

        json_array_foreach(v, i, m)
        {
            int idx = allot_catalog_find_model(cat, json_string_value(m));
            if (idx < 0)
                return E422("field \"gpu_models[%zu]\": unknown GPU model \"%s\"", i,
                            json_string_value(m));
            t->model_mask |= UINT64_C(1) << idx;
        }
    }
    if ((rc = get_selector(b, t, err, errlen)) ||
        (rc = get_nodes(b, "nodelist", &out->nodelist, err, errlen)) ||
        (rc = get_nodes(b, "exclude_nodes", &out->exclude, err, errlen)) ||
        (rc = nodes_left(out, err, errlen)))
        return rc;
    if (allot_task_validate(cat, t, err, errlen) < 0)
        return 422;
    out->n_tasks = (int)tasks;
    out->limit_s = limit;
    if (warn &&
        (rc = jobspec_warning(warn, limit, &out->warn_sig, &out->warn_before_s, err, errlen)))
        return rc;
    return 0;
}

/* The command of a job with a script (see jobspec_for_node): a shell puts
 * $1, the script, into a file of its own in the task's temporary folder
 * (a job's private /tmp where the agent gives one; /tmp when $TMPDIR
 * takes none), gives the script Slurm's names for what the node tells
 * every task (SLURM_JOB_ID from ALLOT_JOB_ID ..., where the job did not
 * set them), and becomes the interpreter its #! line names with the file
 * and the job's arguments (as the kernel would, and also where that
 * folder is mounted noexec). What fails before the script runs says so
 * and exits 126. */
static const char script_runner[] =
    "t=allot-script.XXXXXX; f=$(mktemp \"${TMPDIR:-/tmp}/$t\" 2>/dev/null || mktemp \"/tmp/$t\") "
    "&& printf '%s' \"$1\" > \"$f\" || { echo \"allot-script: cannot write the job's script "
    "into ${TMPDIR:-/tmp}\" >&2; exit 126; }; shift; "
    "s() { eval \"[ -z \\\"\\${$1+x}\\\" ] && [ -n \\\"\\${$2+x}\\\" ] && export "
    "$1=\\\"\\$$2\\\"\"; }; "
    "s SLURM_JOB_ID ALLOT_JOB_ID; s SLURM_JOBID ALLOT_JOB_ID; s SLURM_JOB_NAME ALLOT_JOB_NAME; "
    "s SLURM_ARRAY_JOB_ID ALLOT_ARRAY_JOB_ID; s SLURM_ARRAY_TASK_ID ALLOT_ARRAY_TASK_ID; "
    "s SLURM_PROCID ALLOT_TASK_INDEX; s SLURM_NTASKS ALLOT_NUM_TASKS; "
    "s SLURM_CPUS_PER_TASK ALLOT_CPUS_PER_TASK; s SLURM_JOB_NODELIST ALLOT_TASK_NODES; "
    "s SLURMD_NODENAME ALLOT_NODE; unset -f s; "
    "IFS= read -r l < \"$f\"; set -f; set -- ${l#??} \"$f\" \"$@\"; exec \"$@\"";

json_t *jobspec_for_node(json_t *spec)
{
    json_t *script = json_object_get(spec, "script"), *copy, *cmd, *args, *x;
    size_t i;

    if (!json_is_string(script))
        return spec;
    copy = json_copy(spec); /* shallow: the fields are shared, "command" replaced */
    /* sh -c RUNNER $0 $1=SCRIPT ARGS... */
    cmd = json_pack("[ssssO]", "/bin/sh", "-c", script_runner, "allot-script", script);
    args = json_object_get(spec, "command");
    bool ok = copy && cmd;
    json_array_foreach(args, i, x) ok = ok && json_array_append(cmd, x) == 0;
    json_decref(spec);
    if (!ok || json_object_del(copy, "script")) {
        json_decref(copy);
        json_decref(cmd);
        return NULL;
    }
    if (json_object_set_new(copy, "command", cmd)) { /* cmd taken either way */
        json_decref(copy);
        return NULL;
    }
    return copy;
}

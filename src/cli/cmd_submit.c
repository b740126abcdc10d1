/*
 * allot submit: a job from flags, a job file (-f), a batch script with
 * its directives (script.c), or several of them, over POST /v1/jobs
 * (docs/api.yaml); allot run submits through it too.
 *
 * submit always sends an Idempotency-Key (the user's, or 128 random bits
 * made here) and so may repeat a request whose reply was lost: the server
 * answers the repeat with the job the first attempt created, never a
 * second one.
 */
#include "cli.h"

#include "allot/cluster.h"
#include "allot/common.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- submit ---- */

const struct cli_opt jobs_submit_opts[] = {
    {"file", 'f', "FILE", "job as JSON or YAML (the fields of POST /v1/jobs); flags override it"},
    {"tenant", 't', "TENANT",
     "leaf tenant to run in (here or in the file; default: the token's own, when it is bound to "
     "a leaf)"},
    {"name", 'n', "NAME", "job name"},
    {"tasks", 0, "N", "tasks of the gang (default 1)"},
    {"gpus", 'g', "N", "whole GPUs per task"},
    {"mig", 0, "PROFILE", "one MIG instance per task, e.g. 1g.10gb"},
    {"gpu-milli", 0, "M", "a fraction of one GPU per task, in thousandths (1..999)"},
    {"gpu-memory", 0, "SIZE", "GPU memory per task (MiB, or with K/M/G/T)"},
    {"cpus", 'c', "C", "CPUs per task, 0.001..65536 (default 1; fractions allowed)"},
    {"mem", 'm', "SIZE", "memory per task (MiB, or with K/M/G/T)"},
    {"cpus-per-gpu", 0, "C", "CPUs per GPU of each task (instead of --cpus; as sbatch)"},
    {"mem-per-gpu", 0, "SIZE", "memory per GPU of each task (instead of --mem; as sbatch)"},
    {"mem-per-cpu", 0, "SIZE", "memory per CPU of each task (instead of --mem; as sbatch)"},
    {"rdma-vfs", 0, "N", "RDMA virtual functions (SR-IOV VFs of the node's HCAs) per task"},
    {"priority", 'p', "CLASS", "priority class"},
    {"qos", 0, "QOS", "guaranteed, burstable (default) or best-effort: order inside the tenant"},
    {"gpu-model", 0, "MODEL", "allowed GPU model (repeatable)"},
    {"constraint", 'C', "K=V[,K=V]",
     "run only on nodes carrying these labels (repeatable, at most 4 in all; a bare K: the label "
     "K with an empty value), as sbatch -C and a Kubernetes nodeSelector"},
    {"nodelist", 'w', "LIST",
     "run only on these nodes: names or a host list such as gpu[01-04],cpu7 (repeatable); any "
     "of them, not all (sbatch -w takes all)"},
    {"exclude", 'x', "LIST", "never run on these nodes (a host list as for -w; repeatable)"},
    {"wrap", 0, "COMMAND",
     "run COMMAND with /bin/sh -c (as sbatch --wrap; instead of -- or a SCRIPT)"},
    {"image", 0, "IMAGE", "container image"},
    {"workdir", 0, "DIR", "working directory"},
    {"env", 'e', "K=V", "environment variable (repeatable)"},
    {"label", 'l', "K=V", "label (repeatable)"},
    {"time-limit", 0, "DURATION", "time limit (seconds, or with s/m/h/d)"},
    {"signal", 0, "SIG[@SECONDS]",
     "send SIG to its processes SECONDS (default 60) before the time limit (as sbatch --signal)"},
    {"checkpointable", 0, NULL, "the job can be checkpointed and preempted safely"},
    {"checkpoint-interval", 0, "DURATION",
     "with --checkpointable: it saves its work this often (lets the scheduler move it)"},
    {"no-requeue", 0, NULL, "run at most once: end (lost, cancelled) where it would be requeued"},
    {"hold", 'H', NULL, "submit it held: it does not start until `allot release` (as sbatch -H)"},
    {"begin", 'b', "TIME",
     "start no earlier than TIME: now+DURATION, YYYY-MM-DD[THH:MM[:SS]] or HH:MM[:SS], local "
     "time or UTC with a trailing Z (as sbatch --begin)"},
    {"array", 'a', "SPEC", "job array, e.g. 0-99%10 (indices, ranges A-B[:STEP]; %N: N at once)"},
    {"dependency", 'd', "DEP",
     "afterok|afterany|afternotok:ID[:ID...][,...] (ID_INDEX: an array member)"},
    {"idempotency-key", 0, "KEY", "key of this submission (default: a random one)"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage submit_usage = {
    "submit",
    "[OPTIONS] [-f JOB.yaml] [-- COMMAND ARGS...]\n       allot submit [OPTIONS] SCRIPT "
    "[ARGS...]",
    "Submits a job and prints its id (with -o json|yaml: the whole job).\n"
    "A SCRIPT (\"#!\" first, at most 64 KiB) is sent with the job and runs on its node, as with\n"
    "sbatch; its #ALLOT lines (allot's options) and #SBATCH lines (Slurm's) add the options\n"
    "the command line does not give. Every word after SCRIPT is its argument.\n"
    "A submission repeated with the same idempotency key returns the first job."};

/* 128 random bits as hex, prefixed; 0 or CLI_SERVER. */
static int random_key(char *out, size_t n)
{
    unsigned char r[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, r, sizeof(r)) : -1;

    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof(r)) {
        cli_error("internal", "cannot read /dev/urandom");
        return CLI_SERVER;
    }
    size_t k = (size_t)allot_fmt(out, n, "allot-");
    for (size_t i = 0; i < sizeof(r) && k + 2 < n; i++, k += 2)
        allot_fmt(out + k, n - k, "%02x", r[i]);
    return CLI_OK;
}

/* Whether s[0..len) may name a job's variable: allotd's rule
 * (allot_env_name_ok), checked before anything is sent. */
static bool env_name_ok(const char *s, size_t len)
{
    char name[300];

    if (len >= sizeof(name))
        return false;
    memcpy(name, s, len);
    name[len] = '\0';
    return allot_env_name_ok(name);
}

/* K=V pairs into an object field of job; for --env, K must be a variable
 * name (env_name_ok). */
static int set_pairs(json_t *job, const char *field, const char *opt, const char *const *v,
                     size_t n)
{
    json_t *o;

    if (!n)
        return CLI_OK;
    o = json_object_get(job, field);
    if (!json_is_object(o)) {
        o = json_object();
        json_object_set_new(job, field, o);
    }
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(v[i], '=');
        char key[256];

        if (!eq || eq == v[i] || (size_t)(eq - v[i]) >= sizeof(key))
            return cli_usage_error("--%s: \"%s\" is not KEY=VALUE", opt, v[i]);
        if (!strcmp(opt, "env") && !env_name_ok(v[i], (size_t)(eq - v[i])))
            return cli_usage_error("--env: \"%.*s\" is not a variable name (printable ASCII "
                                   "characters, no space)",
                                   (int)(eq - v[i]), v[i]);
        allot_fmt(key, sizeof(key), "%.*s", (int)(eq - v[i]), v[i]);
        json_object_set_new(o, key, json_string(eq + 1));
    }
    return CLI_OK;
}

/* --constraint K=V[,K=V] (n times) into "node_selector", over what a job
 * file gave (args_constraint). */
static int set_selector(json_t *job, const char *const *v, size_t n)
{
    struct allot_label l[ALLOT_MAX_SELECT];
    char *buf;
    int k = args_constraint(v, n, &buf, l);
    json_t *o = json_object_get(job, "node_selector");

    if (k > 0 && !json_is_object(o)) {
        o = json_object();
        json_object_set_new(job, "node_selector", o);
    }
    for (int j = 0; j < k; j++)
        json_object_set_new(o, l[j].key, json_string(l[j].value));
    free(buf);
    return k < 0 ? -k : CLI_OK;
}

/* "a string", "an object" ...: what a JSON value is, for a message. */
static const char *json_kind(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        return "a string";
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "a list";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* Checks the job's `command` (from the file, or the words after --): a
 * list of strings, not empty but for a job with a script (then its
 * arguments). `file` names the job file in the message (NULL: none).
 * Returns CLI_OK or CLI_USAGE (printed). */
static int check_command(json_t *cmd, const char *file, bool script)
{
    size_t i;
    json_t *x;

    if (cmd && !json_is_array(cmd))
        return cli_usage_error("%s: field \"command\" must be a list of strings, like "
                               "[python3, train.py], not %s",
                               file ? file : "the job", json_kind(cmd));
    json_array_foreach(cmd, i, x)
    {
        if (!json_is_string(x))
            return cli_usage_error("%s: field \"command\" must be a list of strings; item %zu "
                                   "is %s",
                                   file ? file : "the job", i, json_kind(x));
    }
    if (json_array_size(cmd) == 0 && !script)
        return cli_usage_error("a job needs a command: give it after --, as `command` in the "
                               "file, or a script (allot submit job.sh)");
    return CLI_OK;
}

/* "nodelist" or "exclude_nodes" of job as a list of node names: the host
 * lists of the option (n values), else the file's (a host list or a list
 * of them), each expanded (allot_hostlist_expand). An empty list in the
 * file is none. Returns CLI_OK or CLI_USAGE (printed). */
static int set_nodes(json_t *job, const char *field, const char *opt, const char *file,
                     const char *const *v, size_t n)
{
    json_t *f = json_object_get(job, field), *x, *list, *seen;
    char where[300];
    size_t i;
    int rc = CLI_OK;

    if (!n && (!f || (json_is_array(f) && !json_array_size(f)))) {
        json_object_del(job, field);
        return CLI_OK;
    }
    if (!n && !json_is_string(f) && !json_is_array(f))
        return cli_usage_error("%s: field \"%s\" must be a host list such as gpu[01-04] or a "
                               "list of them, not %s",
                               file, field, json_kind(f));
    list = json_array();
    seen = json_object();
    if (!list || !seen)
        rc = cli_usage_error("--%s: out of memory", opt);
    allot_fmt(where, sizeof(where), "--%s", opt);
    for (i = 0; i < n && rc == CLI_OK; i++)
        rc = args_hosts(list, seen, v[i], where);
    if (!n && json_is_string(f) && rc == CLI_OK) {
        allot_fmt(where, sizeof(where), "%s: field \"%s\"", file, field);
        rc = args_hosts(list, seen, json_string_value(f), where);
    }
    if (!n && json_is_array(f))
        json_array_foreach(f, i, x)
        {
            allot_fmt(where, sizeof(where), "%s: field \"%s\", item %zu", file, field, i);
            if (rc == CLI_OK && !json_is_string(x))
                rc = cli_usage_error("%s is not a string", where);
            else if (rc == CLI_OK)
                rc = args_hosts(list, seen, json_string_value(x), where);
        }
    json_decref(seen);
    if (rc == CLI_OK)
        json_object_set_new(job, field, list);
    else
        json_decref(list);
    return rc;
}

/* --cpus-per-gpu, --mem-per-gpu and --mem-per-cpu (sbatch's) into the
 * job's per-task "cpus" and "memory", from its whole GPUs ("gpus") and
 * CPUs (default 1), whatever gave those (flags, the file). CLI_OK or
 * CLI_USAGE (printed). */
static int per_unit(const struct cli_args *a, json_t *job)
{
    const char *cg = args_get(a, "cpus-per-gpu"), *mg = args_get(a, "mem-per-gpu"),
               *mc = args_get(a, "mem-per-cpu");
    json_int_t gpus = json_integer_value(json_object_get(job, "gpus"));
    json_t *cpus = json_object_get(job, "cpus");
    double c = cpus ? json_number_value(cpus) : 1, d;
    int64_t mib;
    int rc;

    if ((cg && args_get(a, "cpus")) || ((mg || mc) && args_get(a, "mem")) || (mg && mc))
        return cli_usage_error("%s", cg && args_get(a, "cpus")
                                         ? "--cpus-per-gpu and --cpus exclude each other"
                                         : "--mem, --mem-per-gpu and --mem-per-cpu exclude each "
                                           "other");
    if ((cg || mg) && gpus < 1)
        return cli_usage_error("--%s: the job asks for no whole GPUs (--gpus N)",
                               cg ? "cpus-per-gpu" : "mem-per-gpu");
    if (cg) {
        if ((rc = args_num("cpus-per-gpu", cg, 0.001, 65536, &d)) != CLI_OK)
            return rc;
        c = d * (double)gpus;
        if (c > 65536)
            return cli_usage_error("--cpus-per-gpu: %g CPUs per task, over 65536", c);
        json_object_set_new(job, "cpus", json_real(c));
    }
    if (mg || mc) {
        if ((rc = args_mib(mg ? "mem-per-gpu" : "mem-per-cpu", mg ? mg : mc, &mib)) != CLI_OK)
            return rc;
        json_object_set_new(job, "memory",
                            json_integer(mg ? mib * gpus : (json_int_t)ceil((double)mib * c)));
    }
    return CLI_OK;
}

/* The job the options of a and the script text (NULL: none) ask for. */
static int build_job(const struct cli_args *a, const char *script, json_t **out)
{
    static const struct {
        const char *opt, *field;
    } strs[] = {{"tenant", "tenant"},     {"name", "name"},   {"mig", "mig"},
                {"priority", "priority"}, {"qos", "qos"},     {"image", "image"},
                {"workdir", "workdir"},   {"array", "array"}, {"dependency", "dependency"},
                {"signal", "signal"}};
    const char *s;
    json_t *job;
    int64_t i64;
    double d;
    int rc = CLI_OK;

    *out = NULL;
    if ((s = args_get(a, "file"))) {
        if (!(job = input_load(s)))
            return CLI_USAGE;
        if (!json_is_object(job)) {
            json_decref(job);
            return cli_usage_error("%s: a job file holds one object (the fields of a job)", s);
        }
    } else {
        job = json_object();
    }
    /* a file's durations and begin time as the options take them ("2h",
     * "2:00:00", "now+1h"), sent in seconds */
    static const char *const durations[] = {"time_limit", "checkpoint_interval", "begin_time"};
    for (size_t i = 0; i < 3 && rc == CLI_OK; i++) {
        json_t *v = json_object_get(job, durations[i]);
        char opt[64];

        if (!json_is_string(v))
            continue;
        allot_fmt(opt, sizeof(opt), "%s (in %s)", durations[i], args_get(a, "file"));
        rc = i == 2 ? args_begin(opt, json_string_value(v), (int64_t)time(NULL), &i64)
                    : args_seconds(opt, json_string_value(v), &i64);
        if (rc == CLI_OK)
            json_object_set_new(job, durations[i], json_integer(i64));
    }
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        if ((s = args_get(a, strs[i].opt)))
            json_object_set_new(job, strs[i].field, json_string(s));
    /* a relative --workdir (or workdir in the file) is the submitter's, as
     * sbatch --chdir: made whole here, not left to the node's directory */
    if ((s = json_string_value(json_object_get(job, "workdir"))) && s[0] != '/' && *s) {
        char cwd[4096], whole[8192];

        if (!getcwd(cwd, sizeof(cwd))) {
            json_decref(job);
            return cli_usage_error("--workdir %s: the current folder is unknown (%s): give "
                                   "the whole path",
                                   s, strerror(errno));
        }
        if (strcmp(s, ".") == 0)
            allot_strlcpy(whole, cwd, sizeof(whole));
        else
            allot_fmt(whole, sizeof(whole), "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", s);
        json_object_set_new(job, "workdir", json_string(whole));
    }
    if (rc == CLI_OK && (s = args_get(a, "tasks")) && !(rc = args_int("tasks", s, 1, 1024, &i64)))
        json_object_set_new(job, "tasks", json_integer(i64));
    if (rc == CLI_OK && (s = args_get(a, "gpus")) && !(rc = args_int("gpus", s, 0, 1024, &i64)))
        json_object_set_new(job, "gpus", json_integer(i64));
    if (rc == CLI_OK && (s = args_get(a, "rdma-vfs")) &&
        !(rc = args_int("rdma-vfs", s, 0, ALLOT_MAX_TASK_RDMA_VFS, &i64)))
        json_object_set_new(job, "rdma_vfs", json_integer(i64));
    if (rc == CLI_OK && (s = args_get(a, "gpu-milli")) &&
        !(rc = args_int("gpu-milli", s, 1, 999, &i64)))
        json_object_set_new(job, "gpu_milli", json_integer(i64));
    if (rc == CLI_OK && (s = args_get(a, "gpu-memory")) && !(rc = args_mib("gpu-memory", s, &i64)))
        json_object_set_new(job, "gpu_memory", json_integer(i64));
    if (rc == CLI_OK && (s = args_get(a, "mem")) && !(rc = args_mib("mem", s, &i64)))
        json_object_set_new(job, "memory", json_integer(i64));
    if (rc == CLI_OK && (s = args_get(a, "cpus")) && !(rc = args_num("cpus", s, 0.001, 65536, &d)))
        json_object_set_new(job, "cpus", json_real(d));
    if (rc == CLI_OK && (s = args_get(a, "time-limit")) &&
        !(rc = args_seconds("time-limit", s, &i64)))
        json_object_set_new(job, "time_limit", json_integer(i64));
    if (rc == CLI_OK && args_has(a, "checkpointable"))
        json_object_set_new(job, "checkpointable", json_true());
    if (rc == CLI_OK && (s = args_get(a, "checkpoint-interval")) &&
        !(rc = args_seconds("checkpoint-interval", s, &i64)))
        json_object_set_new(job, "checkpoint_interval", json_integer(i64));
    if (rc == CLI_OK && args_has(a, "no-requeue"))
        json_object_set_new(job, "requeue", json_false());
    if (rc == CLI_OK && args_has(a, "hold"))
        json_object_set_new(job, "hold", json_true());
    if (rc == CLI_OK && (s = args_get(a, "begin")) &&
        !(rc = args_begin("begin", s, (int64_t)time(NULL), &i64)))
        json_object_set_new(job, "begin_time", json_integer(i64));
    if (rc == CLI_OK) {
        const char *const *v;
        size_t n;

        v = args_all(a, "env", &n);
        rc = set_pairs(job, "env", "env", v, n);
        v = args_all(a, "label", &n);
        if (rc == CLI_OK)
            rc = set_pairs(job, "labels", "label", v, n);
        v = args_all(a, "constraint", &n);
        if (rc == CLI_OK)
            rc = set_selector(job, v, n);
        v = args_all(a, "nodelist", &n);
        if (rc == CLI_OK)
            rc = set_nodes(job, "nodelist", "nodelist", args_get(a, "file"), v, n);
        v = args_all(a, "exclude", &n);
        if (rc == CLI_OK)
            rc = set_nodes(job, "exclude_nodes", "exclude", args_get(a, "file"), v, n);
        v = args_all(a, "gpu-model", &n);
        if (rc == CLI_OK && n) {
            json_t *m = json_array();
            for (size_t i = 0; i < n; i++)
                json_array_append_new(m, json_string(v[i]));
            json_object_set_new(job, "gpu_models", m);
        }
    }
    if (rc == CLI_OK && (s = args_get(a, "wrap"))) {
        if (a->rest || script)
            rc = cli_usage_error("--wrap gives the command: not with %s",
                                 script ? "a script" : "one after --");
        else
            json_object_set_new(job, "command", json_pack("[sss]", "/bin/sh", "-c", s));
    }
    if (rc == CLI_OK && a->rest) {
        json_t *cmd = json_array();
        for (int i = 0; i < a->n_rest; i++)
            json_array_append_new(cmd, json_string(a->rest[i]));
        json_object_set_new(job, "command", cmd);
    }
    if (rc == CLI_OK)
        rc = per_unit(a, job);
    if (rc == CLI_OK) {
        int kinds = !!json_object_get(job, "gpus") + !!json_object_get(job, "mig") +
                    !!(json_object_get(job, "gpu_milli") || json_object_get(job, "gpu_memory"));
        if (kinds > 1)
            rc = cli_usage_error("--gpus, --mig and --gpu-milli/--gpu-memory exclude each other");
        else
            rc = check_command(json_object_get(job, "command"), args_get(a, "file"),
                               script || json_object_get(job, "script"));
    }
    if (rc == CLI_OK && script) {
        if (json_object_get(job, "script") || (json_object_get(job, "command") && !a->rest))
            rc = cli_usage_error("%s: a script and the file's %s exclude each other",
                                 args_get(a, "file"),
                                 json_object_get(job, "script") ? "script" : "command");
        else
            json_object_set_new(job, "script", json_string(script));
    }
    if (rc != CLI_OK) {
        json_decref(job);
        return rc;
    }
    *out = job;
    return CLI_OK;
}

int jobs_submit(struct cli *c, struct cli_args *a, const struct cli_usage *u, bool one_job,
                json_t **reply)
{
    struct cli_script sc = {0};
    struct client *cl;
    json_t *job = NULL;
    char key[64];
    const char *k;
    long st = 0;
    int rc;

    *reply = NULL;
    if (a->n_pos > 1)
        return cli_usage_error("unexpected argument \"%s\": one script at most; put its "
                               "arguments, or a command, after --",
                               a->pos[1]);
    if (a->n_pos == 1 && (rc = script_load(c, a->pos[0], u, a, &sc)) != CLI_OK)
        return rc;
    if ((rc = build_job(a, sc.text, &job)) != CLI_OK) {
        if (sc.argc) /* the option may be one of the script's */
            fprintf(stderr, "allot: (options came from the #ALLOT and #SBATCH lines of %s too)\n",
                    a->pos[0]);
        goto out;
    }
    /* as sbatch, a script knows where it was submitted from */
    if (sc.text && !json_object_get(json_object_get(job, "env"), "SLURM_SUBMIT_DIR")) {
        char cwd[4096];
        json_t *env = json_object_get(job, "env");
        if (!json_is_object(env))
            json_object_set_new(job, "env", env = json_object());
        if (getcwd(cwd, sizeof(cwd)))
            json_object_set_new(env, "SLURM_SUBMIT_DIR", json_string(cwd));
    }
    /* as sbatch, a job of a script is named after it */
    if (sc.text && !json_object_get(job, "name")) {
        const char *base = strrchr(a->pos[0], '/');
        char name[129]; /* allotd takes 128 bytes of a name */
        allot_strlcpy(name, base ? base + 1 : a->pos[0], sizeof(name));
        json_object_set_new(job, "name", json_string(name));
    }
    /* --array, or "array" in the job file */
    if (one_job && json_object_get(job, "array")) {
        rc = cli_usage_error("allot run follows one job, and this is an array (--array, or "
                             "\"array\" in the job file or a directive of the script): submit "
                             "it with allot submit (allot ls --array ID, allot logs ID_INDEX)");
        goto out;
    }
    k = args_get(a, "idempotency-key");
    if (k && (!*k || strlen(k) > 128)) {
        rc = cli_usage_error("--idempotency-key must be 1..128 bytes");
        goto out;
    }
    if (!k) {
        if ((rc = random_key(key, sizeof(key))) != CLI_OK)
            goto out;
        k = key;
    }
    if (!(cl = cli_client(c))) {
        rc = CLI_USAGE;
        goto out;
    }
    rc = client_call(cl, "POST", "/v1/jobs", job, k, CLIENT_RETRY_ALWAYS, reply, &st);
    if (rc != CLI_OK)
        goto out;
    if (st == 200)
        fprintf(stderr, "allot: job %lld was already submitted with idempotency key %s\n",
                (long long)json_integer_value(json_object_get(*reply, "id")), k);
    if (json_object_get(*reply, "array_size"))
        fprintf(stderr, "allot: array %lld: %lld jobs\n",
                (long long)json_integer_value(json_object_get(*reply, "id")),
                (long long)json_integer_value(json_object_get(*reply, "array_size")));
out:
    json_decref(job);
    script_free(&sc);
    return rc;
}

int cmd_submit(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    json_t *reply = NULL;
    int rc = args_parse_operand(c, jobs_submit_opts, &submit_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    rc = jobs_submit(c, &a, &submit_usage, false, &reply);
    if (rc == CLI_OK && !out_structured(c, reply))
        printf("%lld\n", (long long)json_integer_value(json_object_get(reply, "id")));
    json_decref(reply);
    args_free(&a);
    return rc;
}

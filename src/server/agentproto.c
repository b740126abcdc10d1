/*
 * The agents' request bodies, checked (agentproto.h). Wrong types and
 * unknown fields are 400, impossible inventories 422; every message names
 * the field.
 */
#include "agentproto.h"

#include "allot/common.h"
#include "allot/cluster.h"
#include "allot/store.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

int agentproto_rdma_vfs(const json_t *inv)
{
    const json_t *x;
    size_t i;
    int64_t sum = 0;

    json_array_foreach(json_object_get(inv, "rdma"), i, x)
    {
        json_int_t v = json_integer_value(json_object_get(x, "vfs"));
        sum += v > 0 && v <= ALLOT_MAX_RDMA_VFS ? v : 0;
    }
    return sum > ALLOT_MAX_RDMA_VFS ? ALLOT_MAX_RDMA_VFS : (int)sum;
}

/* Checks an inventory; returns 0, 400 or 422 with a message. */
int agentproto_inventory(json_t *b, const struct allot_catalog *cat, int *n_gpus, char *err,
                         size_t errlen)
{
    static const char *const fields[] = {"name",   "cpus",        "memory",   "gpus", "gpu_mode",
                                         "labels", "island_size", "underlay", "rdma", NULL};
    static const char *const gpu_fields[] = {"model", "uuid", NULL};
    json_t *v, *g, *gv;
    const char *k, *model = NULL;
    size_t i;

    json_object_foreach(b, k, v)
    {
        bool ok = false;
        for (const char *const *f = fields; *f && !ok; f++)
            ok = !strcmp(*f, k);
        if (!ok)
            return allot_fmt(err, errlen, "unknown field \"%s\"", k), 400;
    }
    if (!json_is_string(json_object_get(b, "name")))
        return allot_fmt(err, errlen, "field \"name\" must be a string"), 400;
    if (!allot_node_name_ok(json_string_value(json_object_get(b, "name"))))
        return allot_fmt(err, errlen, "field \"name\": 1..63 of A-Z a-z 0-9 . _ -"), 422;
    if (!json_is_number(json_object_get(b, "cpus")))
        return allot_fmt(err, errlen, "field \"cpus\" must be a number"), 400;
    if (!json_is_integer(json_object_get(b, "memory")))
        return allot_fmt(err, errlen, "field \"memory\" must be an integer (MiB)"), 400;
    if (json_number_value(json_object_get(b, "cpus")) <= 0 ||
        json_number_value(json_object_get(b, "cpus")) > 65536 ||
        json_integer_value(json_object_get(b, "memory")) <= 0)
        return allot_fmt(err, errlen, "fields \"cpus\" and \"memory\" must be positive"), 422;
    if ((v = json_object_get(b, "gpu_mode")) &&
        (!json_is_string(v) || (strcmp(json_string_value(v), "shared") != 0 &&
                                strcmp(json_string_value(v), "exclusive") != 0 &&
                                strcmp(json_string_value(v), "mig") != 0)))
        return allot_fmt(err, errlen, "field \"gpu_mode\": shared, exclusive or mig"), 400;
    if ((v = json_object_get(b, "labels"))) {
        const char *problem;
        if (!json_is_object(v))
            return allot_fmt(err, errlen, "field \"labels\" must be an object of strings"), 400;
        if (json_object_size(v) > AGENTPROTO_MAX_LABELS)
            return allot_fmt(err, errlen, "field \"labels\" has %zu labels: at most %d",
                             json_object_size(v), AGENTPROTO_MAX_LABELS),
                   400;
        json_object_foreach(v, k, g)
        {
            if (!json_is_string(g))
                return allot_fmt(err, errlen, "field \"labels.%.80s\" must be a string", k), 400;
            if ((problem = allot_label_key_problem(k)))
                return allot_fmt(err, errlen, "field \"labels\": label \"%.80s\" %s", k, problem),
                       400;
            problem = strlen(json_string_value(g)) != json_string_length(g)
                          ? "holds a NUL character"
                          : allot_label_value_problem(json_string_value(g));
            if (problem)
                return allot_fmt(err, errlen, "field \"labels.%s\": value %s", k, problem), 400;
        }
    }
    if ((v = json_object_get(b, "island_size")) &&
        (!json_is_integer(v) || json_integer_value(v) < 0 ||
         json_integer_value(v) > ALLOT_MAX_GPUS))
        return allot_fmt(err, errlen, "field \"island_size\" must be an integer 0..%d",
                         ALLOT_MAX_GPUS),
               400;
    if ((v = json_object_get(b, "underlay"))) {
        unsigned a, c, d, e;
        int n = 0;
        const char *u = json_string_value(v);
        if (!u || sscanf(u, "%3u.%3u.%3u.%3u%n", &a, &c, &d, &e, &n) != 4 || u[n] || a > 255 ||
            c > 255 || d > 255 || e > 255)
            return allot_fmt(err, errlen, "field \"underlay\" must be an IPv4 address"), 400;
    }
    if ((v = json_object_get(b, "rdma"))) {
        size_t ri;
        json_t *x;
        if (!json_is_array(v) || json_array_size(v) > 64)
            return allot_fmt(err, errlen, "field \"rdma\" must be an array of at most 64"), 400;
        json_array_foreach(v, ri, x)
        {
            if (!json_is_object(x) || !json_is_string(json_object_get(x, "name")) ||
                json_string_length(json_object_get(x, "name")) > 64 ||
                (json_object_get(x, "vfs") && !json_is_integer(json_object_get(x, "vfs"))))
                return allot_fmt(err, errlen,
                                 "field \"rdma[%zu]\": want {\"name\": string, \"vfs\": int}", ri),
                       400;
            if (json_integer_value(json_object_get(x, "vfs")) < 0 ||
                json_integer_value(json_object_get(x, "vfs")) > ALLOT_MAX_RDMA_VFS)
                return allot_fmt(err, errlen, "field \"rdma[%zu].vfs\" must be in 0..%d", ri,
                                 ALLOT_MAX_RDMA_VFS),
                       422;
        }
    }
    v = json_object_get(b, "gpus");
    if (v && !json_is_array(v))
        return allot_fmt(err, errlen, "field \"gpus\" must be an array"), 400;
    if (json_array_size(v) > ALLOT_MAX_GPUS)
        return allot_fmt(err, errlen, "field \"gpus\": at most %d GPUs per node", ALLOT_MAX_GPUS),
               422;
    json_array_foreach(v, i, g)
    {
        if (!json_is_object(g) || !json_is_string(json_object_get(g, "model")))
            return allot_fmt(err, errlen, "field \"gpus[%zu].model\" must be a string", i), 400;
        json_object_foreach(g, k, gv)
        {
            bool ok = false;
            for (const char *const *f = gpu_fields; *f && !ok; f++)
                ok = !strcmp(*f, k);
            if (!ok)
                return allot_fmt(err, errlen, "unknown field \"gpus[%zu].%s\"", i, k), 400;
        }
        const char *m = json_string_value(json_object_get(g, "model"));
        if (allot_catalog_find_model(cat, m) < 0)
            return allot_fmt(err, errlen, "field \"gpus[%zu].model\": unknown GPU model \"%s\"", i,
                             m),
                   422;
        if (model && allot_catalog_find_model(cat, m) != allot_catalog_find_model(cat, model))
            return allot_fmt(err, errlen,
                             "field \"gpus\": mixed models (%s, %s); register one node per model",
                             model, m),
                   422;
        model = m;
    }
    /* what the core takes (allot_cluster_add_node): a node is refused here,
     * not stored and then left out of the scheduler */
    const char *mode = json_string_value(json_object_get(b, "gpu_mode"));
    if (model && mode && !strcmp(mode, "mig") &&
        !cat->models[allot_catalog_find_model(cat, model)].mig)
        return allot_fmt(err, errlen,
                         "field \"gpu_mode\": mig, but GPU model %s has no MIG profiles", model),
               422;
    *n_gpus = (int)json_array_size(v);
    return 0;
}

/* The first key of obj not in allowed, or NULL. */
static const char *unknown_key(json_t *obj, const char *const *allowed)
{
    const char *k;
    json_t *v;

    json_object_foreach(obj, k, v)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = !strcmp(*a, k);
        if (!ok)
            return k;
    }
    return NULL;
}

#define E400(...) (allot_fmt(err, errlen, __VA_ARGS__), 400)

int agentproto_heartbeat(json_t *b, struct hb_body *out, char *err, size_t errlen)
{
    static const char *const fields[] = {"jobs", "health", "usage",    "wait_ms", "known",
                                         "logs", "live",   "stopping", NULL};
    static const char *const job_fields[] = {"id",         "state", "exit_code", "detail",
                                             "runtime_ms", "run",   "fenced",    NULL};
    const char *bad;
    json_t *x;
    size_t i;

    memset(out, 0, sizeof(*out));
    out->live = -1;
    if (!b)
        return 0;
    if (!json_is_object(b))
        return E400("the body must be a JSON object");
    if ((bad = unknown_key(b, fields)))
        return E400("unknown field \"%s\"", bad);
    x = json_object_get(b, "live");
    if (x && (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 100000))
        return E400("field \"live\" must be an integer 0..100000");
    out->live = x ? json_integer_value(x) : -1;
    x = json_object_get(b, "stopping");
    if (x) {
        json_t *v;
        bool ok = json_is_array(x) && json_array_size(x) <= AGENTPROTO_MAX_STOPPING;
        json_array_foreach(x, i, v) ok &= json_is_integer(v) && json_integer_value(v) > 0;
        if (!ok)
            return E400("field \"stopping\" must be an array of at most %d job ids",
                        AGENTPROTO_MAX_STOPPING);
        out->stopping = x;
    }
    out->jobs = json_object_get(b, "jobs");
    if (out->jobs &&
        (!json_is_array(out->jobs) || json_array_size(out->jobs) > AGENTPROTO_MAX_REPORTS))
        return E400("field \"jobs\" must be an array of at most %d", AGENTPROTO_MAX_REPORTS);
    json_array_foreach(out->jobs, i, x)
    {
        int st = allot_store_job_state_parse(json_string_value(json_object_get(x, "state")));

        if (!json_is_object(x))
            return E400("field \"jobs[%zu]\" must be an object", i);
        if ((bad = unknown_key(x, job_fields)))
            return E400("unknown field \"jobs[%zu].%s\"", i, bad);
        if (!json_is_integer(json_object_get(x, "id")) ||
            (st != ALLOT_SJ_RUNNING && st != ALLOT_SJ_SUCCEEDED && st != ALLOT_SJ_FAILED &&
             st != ALLOT_SJ_LOST) ||
            (json_object_get(x, "exit_code") &&
             !json_is_integer(json_object_get(x, "exit_code"))) ||
            (json_object_get(x, "runtime_ms") &&
             (!json_is_integer(json_object_get(x, "runtime_ms")) ||
              json_integer_value(json_object_get(x, "runtime_ms")) < 0)) ||
            (json_object_get(x, "detail") &&
             (!json_is_string(json_object_get(x, "detail")) ||
              json_string_length(json_object_get(x, "detail")) > 512)) ||
            (json_object_get(x, "run") && !json_is_integer(json_object_get(x, "run"))) ||
            (json_object_get(x, "fenced") && !json_is_boolean(json_object_get(x, "fenced"))))
            return E400("field \"jobs[%zu]\": want {\"id\": int, \"state\": "
                        "running|succeeded|failed|lost, \"exit_code\": int, \"detail\": "
                        "string, \"runtime_ms\": int, \"run\": int, \"fenced\": bool}",
                        i);
    }
    x = json_object_get(b, "wait_ms");
    if (x && (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 60000))
        return E400("field \"wait_ms\" must be an integer 0..60000");
    out->wait_ms = json_integer_value(x);
    x = json_object_get(b, "known");
    if (x && (!json_is_string(x) || json_string_length(x) > 64))
        return E400("field \"known\" must be a version string");
    out->known = json_string_value(x);
    x = json_object_get(b, "logs");
    if (x) {
        const char *u = json_string_value(json_object_get(x, "url"));
        const char *k = json_string_value(json_object_get(x, "key"));
        if (!json_is_object(x) || json_object_size(x) != 2 || !u || !k || strlen(u) > 256 ||
            strlen(k) > 80 || !allot_url_base_ok(u))
            return E400("field \"logs\": want {\"url\": \"http(s)://HOST[:PORT][/PATH]\" (no "
                        "query, fragment or user), \"key\": string}");
        out->logs = x;
    }
    x = json_object_get(b, "health");
    if (x && (!json_is_object(x) || !json_is_array(json_object_get(x, "gpus")) ||
              json_array_size(json_object_get(x, "gpus")) > ALLOT_MAX_GPUS))
        return E400("field \"health\": want {\"gpus\": [at most %d objects]}", ALLOT_MAX_GPUS);
    out->health = x;
    x = json_object_get(b, "usage");
    if (x && !json_is_object(x))
        return E400("field \"usage\" must be an object");
    x = json_object_get(x, "samples");
    if (x && (!json_is_array(x) || json_array_size(x) > AGENTPROTO_MAX_SAMPLES))
        return E400("field \"usage.samples\" must be an array of at most %d",
                    AGENTPROTO_MAX_SAMPLES);
    json_t *smp;
    json_array_foreach(x, i, smp)
    {
        static const char *const sf[] = {
            "job",      "task",          "at",        "cpu_ns",      "mem_bytes",
            "gpu_util", "gpu_mem_bytes", "energy_mj", "interval_ms", NULL};
        /* no plausibility bound on the figures: a shim region the job can
         * write feeds some of them, and a sample refused here would be sent
         * again and fail every later heartbeat of its node */
        static const long long lo[] = {1, 0, 1, -1, -1, -1, -1, -1, 0};
        static const long long hi[] = {INT64_MAX, 1023,      INT64_MAX, INT64_MAX, INT64_MAX,
                                       100,       INT64_MAX, INT64_MAX, 3600000};

        if (!json_is_object(smp))
            return E400("field \"usage.samples[%zu]\" must be an object", i);
        if ((bad = unknown_key(smp, sf)))
            return E400("unknown field \"usage.samples[%zu].%s\"", i, bad);
        for (size_t k = 0; sf[k]; k++) {
            json_t *v = json_object_get(smp, sf[k]);
            if (!v && !strcmp(sf[k], "interval_ms"))
                continue; /* optional */
            if (!json_is_integer(v) || json_integer_value(v) < lo[k] ||
                json_integer_value(v) > hi[k])
                return E400("field \"usage.samples[%zu].%s\" must be an integer %lld..%lld", i,
                            sf[k], lo[k], hi[k]);
        }
    }
    out->samples = x;
    x = json_object_get(json_object_get(b, "usage"), "gpus");
    if (x && (!json_is_array(x) || json_array_size(x) > ALLOT_MAX_GPUS))
        return E400("field \"usage.gpus\" must be an array of at most %d", ALLOT_MAX_GPUS);
    out->gpus = x;
    x = json_object_get(json_object_get(b, "usage"), "net");
    if (x && (!json_is_array(x) || json_array_size(x) > 4096))
        return E400("field \"usage.net\" must be an array of at most 4096");
    json_t *nt;
    json_array_foreach(x, i, nt)
    {
        static const char *const nf[] = {"vni", "rx_bytes", "tx_bytes", NULL};
        if (!json_is_object(nt) || unknown_key(nt, nf) ||
            json_integer_value(json_object_get(nt, "vni")) <= 0 ||
            !json_is_integer(json_object_get(nt, "rx_bytes")) ||
            !json_is_integer(json_object_get(nt, "tx_bytes")) ||
            json_integer_value(json_object_get(nt, "rx_bytes")) < 0 ||
            json_integer_value(json_object_get(nt, "tx_bytes")) < 0)
            return E400("field \"usage.net[%zu]\": want {\"vni\": int > 0, \"rx_bytes\": int, "
                        "\"tx_bytes\": int}",
                        i);
    }
    out->net = x;
    return 0;
}

/*
 * Job routes: submit (strict validation, Idempotency-Key, committed with
 * its "submitted" event and audit entry before the reply, then handed to
 * the scheduling loop), list (filters, keyset paging), get (with pending
 * reason and placement), cancel, events. A caller bound to a tenant only
 * ever sees jobs of its subtree; other jobs answer 404, as if missing.
 */
#include "http.h"
#include "jobspec.h"
#include "loop.h"
#include "netconf.h"
#include "refs.h"
#include "reqparse.h"

#include "allot/common.h"

#include <stdlib.h>
#include <string.h>

json_t *api_job_json(const struct allot_store_job *j)
{
    json_t *spec = json_loads(j->spec ? j->spec : "{}", 0, NULL);
    json_t *pl = j->placement ? json_loads(j->placement, 0, NULL) : NULL;
    json_t *o =
        json_pack("{s:I,s:s,s:s,s:s,s:o,s:o,s:I,s:I,s:I}", "id", (json_int_t)j->id, "name",
                  j->name ? j->name : "", "tenant", j->tenant ? j->tenant : "", "state",
                  allot_store_job_state_name(j->state), "spec", spec ? spec : json_object(),
                  "placement", pl ? pl : json_null(), "submit_time", (json_int_t)j->submit_time,
                  "start_time", (json_int_t)j->start_time, "end_time", (json_int_t)j->end_time);

    if (!o)
        return NULL;
    json_object_set_new(o, "pending_reason",
                        j->pending_reason ? json_string(j->pending_reason) : json_null());
    json_object_set_new(o, "exit_code",
                        j->has_exit_code ? json_integer(j->exit_code) : json_null());
    json_object_set_new(o, "held", json_boolean(j->held));
    json_object_set_new(o, "user", j->user ? json_string(j->user) : json_null());
    if (j->idem_key)
        json_object_set_new(o, "idempotency_key", json_string(j->idem_key));
    if (j->array_parent) {
        json_object_set_new(o, "array_job_id", json_integer(j->array_parent));
        json_object_set_new(o, "array_index", json_integer(j->array_index));
    }
    if (j->n_deps) {
        json_t *d = json_array();
        for (size_t i = 0; i < j->n_deps; i++)
            json_array_append_new(d, json_integer(j->deps[i]));
        json_object_set_new(o, "depends_on", d);
    }
    return o;
}

struct submit_write {
    struct req *r;
    struct allot_store_job *j;
    const int *idx; /* array indices (n of them), or NULL: not an array */
    int n;
    int64_t *ids; /* OUT: the ids of the n jobs (1 when not an array) */
    int64_t now;
    const char *priority; /* the class it names, or NULL */
    int64_t max_live;     /* live jobs a tenant may have (0: no limit) */
    bool existed;
    bool no_class; /* OUT: that class was removed since it was checked */
    int64_t live;  /* OUT: the tenant's live jobs, when the new ones would pass max_live
                      (nothing written), else -1 */
};

/* Checks, inside a write, that priority class `name` is stored now (one
 * checked before may have been removed since; its removal is refused only
 * while a stored job names it). Returns 0, the store's error, or
 * ALLOT_EINVAL with *no_class set. */
static int class_stored(struct allot_store *st, const char *name, bool *no_class)
{
    struct allot_store_prio_class *pc = NULL;
    size_t npc = 0;
    bool found = false;
    int rc = allot_store_prio_list(st, &pc, &npc);

    for (size_t i = 0; !rc && i < npc; i++)
        found |= !strcmp(pc[i].name, name);
    allot_store_prios_free(pc, npc);
    if (!rc && !found) {
        *no_class = true;
        rc = ALLOT_EINVAL;
    }
    return rc;
}

/* Whether w's jobs keep their tenant within --max-jobs-per-tenant (its
 * first job already stored): 0, or ALLOT_ESTATE with w->live set when they
 * would not, or the store's error. Counted exactly only when the estimate
 * (srv->live_est, the committer thread's) says it may be near: a count
 * reads every live job of the tenant's index. */
static int live_check(struct allot_store *st, struct submit_write *w)
{
    struct server *srv = w->r->srv;
    int64_t n = w->idx ? w->n : 1, guess = -1;
    json_t *e;
    int rc;

    if (!srv->live_est)
        srv->live_est = json_object();
    if ((e = json_object_get(srv->live_est, w->j->tenant)))
        guess = json_integer_value(e); /* before this submission */
    if (guess < 0 || guess + n > w->max_live) {
        if ((rc = allot_store_job_count_live(st, w->j->tenant, &guess)) != 0)
            return rc;
        guess--; /* without the first, stored just now */
        if (guess + n > w->max_live) {
            w->live = guess;
            json_object_set_new(srv->live_est, w->j->tenant, json_integer(guess));
            return ALLOT_ESTATE;
        }
    }
    /* with these: a write undone later leaves it above the truth, never below */
    json_object_set_new(srv->live_est, w->j->tenant, json_integer(guess + n));
    return 0;
}

/* Group-commit write: the job (every member of an array), a "submitted"
 * event each (and "held" for one submitted held) and one audit entry (only the job lookup when its
 * Idempotency-Key was seen before: the key belongs to the first member). */
static int submit_fn(struct allot_store *st, void *arg)
{
    struct submit_write *w = arg;
    char target[64];
    int rc = 0;

    /* the class was checked before this write: one removed since is refused now */
    if (w->priority && (rc = class_stored(st, w->priority, &w->no_class)) != 0)
        return rc;
    w->j->array_parent = w->idx ? ALLOT_STORE_ARRAY_NEW : 0;
    for (int i = 0; i < (w->idx ? w->n : 1) && !rc; i++) {
        struct allot_store_event ev = {.time = w->now, .kind = "submitted"};

        if (w->idx) {
            w->j->array_index = w->idx[i];
            if (i == 1) {
                w->j->array_parent = w->ids[0];
                w->j->idem_key = NULL;
            }
        }
        rc = allot_store_job_submit(st, w->j, &w->ids[i], i ? NULL : &w->existed);
        if (rc || w->existed)
            return rc;
        /* counted after the first is in (a retry of a stored one is no new job) */
        if (i == 0 && w->max_live > 0 && (rc = live_check(st, w)) != 0)
            return rc; /* ALLOT_ESTATE undoes this write's own inserts */
        ev.job_id = w->ids[i];
        rc = allot_store_event_add(st, &ev, NULL);
        if (!rc && w->j->held) { /* submitted held: as `allot hold` records it */
            char who[API_WHO_MAX], detail[API_WHO_MAX + 32];
            allot_fmt(detail, sizeof(detail), "submitted held by %s",
                      api_who(w->r, who, sizeof(who)));
            ev.kind = "held";
            ev.detail = detail;
            rc = allot_store_event_add(st, &ev, NULL);
        }
    }
    if (!rc) {
        if (w->idx)
            allot_fmt(target, sizeof(target), "job/%lld[%d members]", (long long)w->ids[0], w->n);
        else
            allot_fmt(target, sizeof(target), "job/%lld", (long long)w->ids[0]);
        rc = api_audit(st, w->r, target, "ok", w->now);
    }
    return rc;
}

/* Checks that every name of the job's "nodelist" and "exclude_nodes" is
 * a registered node (as sbatch -w and -x: a misspelt name would leave the
 * job waiting, or running where it was to stay off). Returns 0, 422 with
 * a message, or the store's error. */
static int check_nodes(struct allot_store *st, const struct jobspec *js, char *err, size_t errlen)
{
    json_t *lists[2] = {js->nodelist, js->exclude}, *x;
    const char *field[2] = {"nodelist", "exclude_nodes"};
    size_t i;

    for (int l = 0; l < 2; l++)
        json_array_foreach(lists[l], i, x)
        {
            struct allot_store_node n = {0};
            int rc = allot_store_node_get(st, json_string_value(x), &n);
            allot_store_node_clear(&n);
            if (rc == ALLOT_ENOENT) {
                allot_fmt(err, errlen,
                          "field \"%s[%zu]\": no node \"%s\" is registered (allot nodes "
                          "lists them)",
                          field[l], i, json_string_value(x));
                return 422;
            }
            if (rc)
                return rc;
        }
    return 0;
}

/* Checks that every dependency names a job the caller may see, and fills
 * ids[] with them. Returns 0 or 422 with a message (a job the caller may
 * not see reads as missing). */
static int check_deps(struct req *r, struct allot_store *st, const struct jobspec *js, int64_t *ids,
                      char *err, size_t errlen)
{
    for (int i = 0; i < js->n_deps; i++) {
        const struct jobdep *dep = &js->deps[i];
        struct allot_store_job d = {0};
        int rc = allot_store_job_get(st, dep->id, &d);
        bool ok = rc == 0 && auth_sees_tenant(&r->who, d.tenant);
        bool array = rc == 0 && d.array_parent == d.id;

        allot_store_job_clear(&d);
        if (rc < 0 && rc != ALLOT_ENOENT)
            return rc;
        if (!ok)
            return allot_fmt(err, errlen, "field \"dependency\": no job %lld", (long long)dep->id),
                   422;
        ids[i] = dep->id;
        if (dep->index < 0)
            continue;
        /* "ID_INDEX": one member of array ID (stored as the member's own id) */
        if (!array)
            return allot_fmt(err, errlen,
                             "field \"dependency\": job %lld is not an array (ID_INDEX names a "
                             "member of one)",
                             (long long)dep->id),
                   422;
        rc = allot_store_job_member(st, dep->id, dep->index, &d);
        ids[i] = d.id;
        allot_store_job_clear(&d);
        if (rc == ALLOT_ENOENT)
            return allot_fmt(err, errlen, "field \"dependency\": array %lld has no index %d",
                             (long long)dep->id, dep->index),
                   422;
        if (rc < 0)
            return rc;
    }
    return 0;
}

struct cancel_write {
    struct req *r;
    int64_t id, now;
    bool array;               /* every live member of the array {id} starts */
    struct allot_store_job j; /* OUT: the job as read (and cancelled) */
    int64_t *ids;             /* OUT: the other members cancelled (allot_free) */
    size_t n_ids, cap_ids;
    bool first; /* OUT: the job {id} itself was cancelled */
};

/* Ends live job *j as cancelled by `who` (api_who), with its event. */
static int cancel_one(struct allot_store *st, struct allot_store_job *j, int64_t now,
                      const char *who)
{
    char detail[API_WHO_MAX + 32];
    struct allot_store_event ev = {
        .job_id = j->id, .time = now, .kind = "cancelled", .detail = detail};
    int rc;

    allot_fmt(detail, sizeof(detail), "cancelled by %s", who && *who ? who : "a user");
    j->state = ALLOT_SJ_CANCELLED;
    j->end_time = now;
    allot_free(j->pending_reason);
    j->pending_reason = allot_strdup(detail); /* why it ended, as allot ls shows */
    if (!j->pending_reason)
        return ALLOT_ENOMEM;
    rc = allot_store_job_update(st, j);
    return rc ? rc : allot_store_event_add(st, &ev, NULL);
}

int api_array_each(struct allot_store *st, int64_t parent, unsigned states,
                   int (*fn)(struct allot_store *st, struct allot_store_job *j, void *arg),
                   void *arg)
{
    struct allot_store_job_filter f = {.array_parent = parent, .states = states, .limit = 1000};
    struct allot_store_job_page pg = {0};
    int rc;

    do {
        rc = allot_store_job_list(st, &f, &pg);
        for (size_t i = 0; i < pg.n && !rc; i++)
            rc = fn(st, &pg.jobs[i], arg);
        f.cursor = pg.next_cursor;
        allot_store_job_page_free(&pg);
    } while (!rc && f.cursor);
    return rc;
}

/* A live member of array w->id other than the first, cancelled. */
static int cancel_member(struct allot_store *st, struct allot_store_job *j, void *arg)
{
    struct cancel_write *w = arg;
    char who[API_WHO_MAX];
    int rc;

    if (j->id == w->id)
        return 0;
    rc = allot_grow((void **)&w->ids, &w->cap_ids, w->n_ids + 1, sizeof(*w->ids));
    if (!rc)
        rc = cancel_one(st, j, w->now, api_who(w->r, who, sizeof(who)));
    if (!rc)
        w->ids[w->n_ids++] = j->id;
    return rc;
}

/* Group-commit write: reads the job where it is written, so a job the
 * loop or an agent ended meanwhile answers 409 (for an array: only when
 * no member was live). */
static int cancel_fn(struct allot_store *st, void *arg)
{
    struct cancel_write *w = arg;
    char target[64], who[API_WHO_MAX];
    int rc = allot_store_job_get(st, w->id, &w->j);
    bool live, array = w->array && w->j.array_parent == w->id;

    if (rc)
        return rc;
    live = !allot_store_job_state_terminal(w->j.state);
    if (array && (rc = api_array_each(st, w->id, ALLOT_SJ_LIVE_MASK, cancel_member, w)) != 0)
        return rc;
    if (!live && !w->n_ids)
        return ALLOT_ESTATE;
    if (live && (rc = cancel_one(st, &w->j, w->now, api_who(w->r, who, sizeof(who)))) != 0)
        return rc;
    w->first = live;
    allot_fmt(target, sizeof(target), array ? "job/%lld[]" : "job/%lld", (long long)w->id);
    return api_audit(st, w->r, target, "ok", w->now);
}

/* An Idempotency-Key: 1..128 printable ASCII characters (space too), so
 * that the job's JSON can show it as it was sent. */
static bool idem_key_ok(const char *k)
{
    size_t n = strlen(k);

    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] < 0x20 || (unsigned char)k[i] > 0x7e)
            return false;
    return true;
}

/* A job that names no memory (or 0) gets allotd's default (default-mem-per-gpu
 * for each whole GPU it asks, else default-mem-per-cpu for each CPU, both
 * from its parsed spec), put in its spec: reserved, capped on the node and
 * billed like an asked amount, and shown as the job's. None configured: it
 * stays without. */
static void default_memory(const struct server *s, json_t *b, struct jobspec *js)
{
    const struct allot_task *t = &js->task;
    bool whole = t->num_gpu > 0 && t->gpu_milli == 1000 && t->mig_profile < 0;
    int64_t mib = 0;

    /* "memory": 0 is no amount: it gets the default too (else it would
     * be a way round the cap the default sets) */
    if (json_integer_value(json_object_get(b, "memory")) > 0)
        return;
    if (whole && s->cfg.def_mem_per_gpu > 0)
        mib = (int64_t)t->num_gpu * (s->cfg.def_mem_per_gpu >> 20);
    else if (s->cfg.def_mem_per_cpu > 0)
        mib = (t->cpu_milli * (s->cfg.def_mem_per_cpu >> 20) + 999) / 1000;
    if (mib > 0 && json_object_set_new(b, "memory", json_integer(mib)) == 0)
        js->task.mem_mib = mib; /* js's strings point into b: adding a key keeps them */
}

/* The most GPUs one registered node of the models in mask has (0: no node
 * of them registered yet, or a node registered a moment ago may be one). */
static int models_max_gpus(struct server *s, uint64_t mask, char *names, size_t len)
{
    const struct allot_catalog *cat = s->cat;
    int most = 0;
    size_t at = 0;

    *names = '\0';
    if (atomic_load(&s->nodes_adding) > 0)
        return 0;
    for (int m = 0; m < cat->n_models && m < ALLOT_MAX_MODELS; m++) {
        int g;
        if (!((mask >> m) & 1))
            continue;
        g = atomic_load(&s->model_gpus[m]);
        most = g > most ? g : most;
        if (at < len)
            at += (size_t)allot_fmt(names + at, len - at, "%s%s", at ? ", " : "",
                                    cat->models[m].name);
    }
    return most;
}

/* False (after a 422) when the registered nodes can never run the job:
 * more whole GPUs, CPU or memory per task than any node has (than any node
 * of the GPU models it names, once one of them is registered), more whole
 * GPUs in all than the cluster has, or a fraction of more memory than any
 * GPU fractions may use has. None is checked before one is known. */
static bool submittable(struct req *r, const struct jobspec *js)
{
    const struct allot_task *t = &js->task;
    bool whole = t->num_gpu > 0 && t->gpu_milli == 1000 && t->mig_profile < 0;
    int maxg = atomic_load(&r->srv->max_node_gpus);
    int64_t all = atomic_load(&r->srv->whole_gpus), mib = atomic_load(&r->srv->max_gpu_mib);
    int64_t cpu = atomic_load(&r->srv->max_cpu_milli), mem = atomic_load(&r->srv->max_mem_mib);

    /* a node registered a moment ago is not in the loop's counts yet: no
     * refusal from them until it is (the job waits instead) */
    if (atomic_load(&r->srv->nodes_adding) > 0)
        all = mib = cpu = mem = 0;

    char names[256];
    int modg = t->model_mask && t->num_gpu > 0 && t->mig_profile < 0
                   ? models_max_gpus(r->srv, t->model_mask, names, sizeof(names))
                   : 0;

    if (maxg > 0 && t->num_gpu > maxg && t->mig_profile < 0)
        api_error(r, 422, "invalid",
                  "field \"gpus\" is %d; the largest registered node has %d GPUs", t->num_gpu,
                  maxg);
    else if (modg > 0 && t->num_gpu > modg)
        api_error(r, 422, "invalid",
                  "field \"gpus\" is %d; the largest registered node of the GPU models it "
                  "names (%s) has %d GPUs",
                  t->num_gpu, names, modg);
    else if (whole && all > 0 && (int64_t)js->n_tasks * t->num_gpu > all)
        api_error(r, 422, "invalid",
                  "the job asks for %lld GPUs (%d task%s of %d); the registered nodes have %lld "
                  "whole GPUs",
                  (long long)js->n_tasks * t->num_gpu, js->n_tasks, js->n_tasks == 1 ? "" : "s",
                  t->num_gpu, (long long)all);
    else if (cpu > 0 && t->cpu_milli > cpu)
        api_error(r, 422, "invalid",
                  "field \"cpus\" is %g; the largest registered node has %g CPUs",
                  (double)t->cpu_milli / 1000, (double)cpu / 1000);
    else if (mem > 0 && t->mem_mib > mem)
        api_error(r, 422, "invalid",
                  "field \"memory\" is %lld MiB; the largest registered node has %lld MiB",
                  (long long)t->mem_mib, (long long)mem);
    else if (r->srv->cfg.network && !strcmp(r->srv->cfg.network, "on") &&
             js->n_tasks > (1LL << (32 - r->srv->cfg.net_prefix)) - 3)
        api_error(r, 422, "invalid",
                  "the job has %d tasks; a tenant's network holds %lld addresses (allotd's "
                  "net-prefix %lld)",
                  js->n_tasks, (1LL << (32 - r->srv->cfg.net_prefix)) - 3,
                  (long long)r->srv->cfg.net_prefix);
    else if (!whole && t->gpu_mem_mib > 0 && mib > 0 && t->gpu_mem_mib > mib)
        api_error(r, 422, "invalid",
                  "field \"gpu_memory\" is %lld MiB; the largest GPU fractions may use (a node in "
                  "shared mode) has %lld MiB",
                  (long long)t->gpu_mem_mib, (long long)mib);
    else
        return true;
    return false;
}

/* Whether stored spec text a and request text b ask the same (the same
 * JSON, whatever the order of its keys): an Idempotency-Key names one
 * request. Without mem_given the memory allotd put in by default is left
 * out (its default may have changed between a request and its retry), and
 * so are the fields users change after submission (allot priority, allot
 * time-limit): a retry of the request made before is the same request. */
static bool same_request(const char *a, const char *b, bool mem_given)
{
    static const char *const changed_later[] = {"priority", "time_limit"};
    json_t *x = a ? json_loads(a, 0, NULL) : NULL, *y = b ? json_loads(b, 0, NULL) : NULL;

    if (!mem_given) {
        json_object_del(x, "memory");
        json_object_del(y, "memory");
    }
    for (size_t i = 0; i < sizeof(changed_later) / sizeof(changed_later[0]); i++) {
        json_object_del(x, changed_later[i]);
        json_object_del(y, changed_later[i]);
    }
    bool same = x && y && json_equal(x, y);

    json_decref(x);
    json_decref(y);
    return same;
}

int api_jobs_submit(struct req *r)
{
    const char *key = api_header(r, "Idempotency-Key");
    struct allot_store_job j = {0}, got = {0};
    struct jobspec js;
    char err[512];
    json_t *b = api_body_object(r);
    char *spec = NULL;
    bool existed = false, reused = false; /* reused: the key, for another request */
    int64_t now = srv_now(), *ids = NULL, deps[JOBSPEC_DEPS_MAX];
    int rc, n, throttle, *idx = NULL;

    if (!b)
        return 0;
    /* a token bound to a tenant submits there unless it names a tenant */
    bool own_tenant = !json_object_get(b, "tenant") && r->who.tenant && *r->who.tenant;
    if (own_tenant)
        json_object_set_new(b, "tenant", json_string(r->who.tenant));
    rc = jobspec_parse(b, r->srv->cat, &js, err, sizeof(err));
    if (rc) {
        api_error(r, rc, rc == 400 ? "bad_request" : "invalid", "%s", err);
        goto out;
    }
    /* what the node sets for every task would be overridden unseen */
    const char *ek;
    json_t *ev;
    json_object_foreach(json_object_get(b, "env"), ek, ev) if (allot_env_node_set(ek))
    {
        api_error(r, 422, "invalid",
                  "field \"env.%.64s\": the node sets it for every task (docs/agent.md); a job "
                  "may not",
                  ek);
        goto out;
    }
    /* relative to what? the node's agent has a directory of its own: a
     * new job names its folder whole (allot submit makes --workdir so) */
    const char *wd = json_string_value(json_object_get(b, "workdir"));
    if (wd && wd[0] != '/') {
        api_error(r, 422, "invalid",
                  "field \"workdir\" must be an absolute path (the node runs the job there, "
                  "not where it was submitted from)");
        goto out;
    }
    /* what no node could run: checked for new jobs (stored ones read as before) */
    const char *img = json_string_value(json_object_get(b, "image"));
    if (img && !allot_image_name_ok(img)) {
        api_error(r, 422, "invalid",
                  "field \"image\": \"%.64s\" is not an image name: a folder of the nodes' "
                  "--image-dir, 1..128 of [A-Za-z0-9._:-] (not a registry reference)",
                  img);
        goto out;
    }
    /* a job without a program could only fail on its node, after taking
     * its place (stored jobs of an older allotd still read) */
    json_t *cmd = json_object_get(b, "command");
    if (!js.script && (!json_array_size(cmd) || !*json_string_value(json_array_get(cmd, 0)))) {
        api_error(r, 422, "invalid",
                  json_array_size(cmd)
                      ? "field \"command\": its first entry, the program to run, is empty"
                      : "field \"command\" is required: the program to run and its arguments, "
                        "a list of strings such as [\"python3\", \"train.py\"]");
        goto out;
    }
    if (json_array_size(json_object_get(b, "gpu_models")) && js.task.num_gpu == 0) {
        api_error(r, 422, "invalid",
                  "field \"gpu_models\" picks GPUs, and the job asks for none (gpus, mig, "
                  "gpu_milli or gpu_memory): it would run on any node");
        goto out;
    }
    bool mem_given = json_integer_value(json_object_get(b, "memory")) > 0;
    default_memory(r->srv, b, &js);
    /* every task runs on some CPU: none asked would be none limited and
     * none billed */
    if (js.task.cpu_milli < 1) {
        api_error(r, 422, "invalid", "field \"cpus\" must be in 0.001..65536");
        goto out;
    }
    if (!submittable(r, &js))
        goto out;
    if (key && !idem_key_ok(key)) {
        api_error(r, 400, "bad_request",
                  "header Idempotency-Key must be 1..128 printable ASCII characters");
        goto out;
    }
    if (!auth_sees_tenant(&r->who, js.tenant)) {
        api_error(r, 403, "forbidden", "this token may not submit jobs to tenant \"%s\"",
                  js.tenant);
        goto out;
    }
    spec = json_dumps(b, JSON_COMPACT | JSON_REAL_PRECISION(15)); /* 0.1 stays 0.1 */
    n = js.array ? js.array_count : 1;
    if (spec && strlen(spec) * (size_t)n > JOBSPEC_STORED_MAX) {
        api_error(r, 413, "too_large",
                  "%d job%s of %zu bytes each would store %zu MiB: at most %d MiB per submission "
                  "(a smaller command, environment or script, or a smaller array)",
                  n, n == 1 ? "" : "s", strlen(spec), strlen(spec) * (size_t)n >> 20,
                  JOBSPEC_STORED_MAX >> 20);
        goto out;
    }
    j.tenant = (char *)js.tenant;
    j.name = (char *)js.name;
    j.token_id = r->who.token_id;
    j.spec = spec;
    j.state = ALLOT_SJ_PENDING;
    j.submit_time = now;
    j.idem_key = (char *)key;
    j.held = js.hold;
    struct allot_store *st = api_reader(r);
    if (!st)
        goto out;
    ids = allot_calloc((size_t)n, sizeof(*ids));
    idx = js.array ? allot_calloc((size_t)n, sizeof(*idx)) : NULL;
    if (!ids || (js.array && !idx)) {
        api_error(r, 500, "internal", "out of memory");
        goto out;
    }
    if (idx)
        jobspec_array_parse(js.array, idx, &throttle, err, sizeof(err));
    rc = refs_check(r->srv, st, js.tenant, js.priority, err, sizeof(err));
    if (rc == 422 && own_tenant) { /* say where the tenant came from */
        char why[sizeof(err)];
        allot_strlcpy(why, err, sizeof(why));
        allot_fmt(err, sizeof(err), "no field \"tenant\", so this token's own: %s", why);
    }
    if (rc == 0)
        rc = check_nodes(st, &js, err, sizeof(err));
    if (rc == 0)
        rc = check_deps(r, st, &js, deps, err, sizeof(err));
    if (rc == 0) {
        struct submit_write w = {.r = r,
                                 .j = &j,
                                 .idx = idx,
                                 .n = n,
                                 .ids = ids,
                                 .now = now,
                                 .priority = js.priority,
                                 .max_live = r->srv->cfg.max_jobs_per_tenant,
                                 .live = -1};

        j.deps = deps;
        j.n_deps = (size_t)js.n_deps;
        rc = srv_write(r->srv, submit_fn, &w);
        existed = w.existed;
        if (rc)
            r->audited = false;
        if (w.no_class) {
            allot_fmt(err, sizeof(err), "no priority class %s (it was just removed)", js.priority);
            rc = 422;
        } else if (w.live >= 0) {
            allot_fmt(err, sizeof(err),
                      "tenant %s has %lld pending, starting or running jobs; %d more would pass "
                      "the %lld a tenant may have (allotd --max-jobs-per-tenant)",
                      js.tenant, (long long)w.live, n, (long long)w.max_live);
            rc = 403;
        } else if (existed) {
            rc = allot_store_job_get(st, ids[0], &got);
            reused = rc == 0 && !same_request(got.spec, spec, mem_given);
        }
    }
    if (reused)
        api_error(r, 422, "idempotency_key_reused",
                  "Idempotency-Key \"%s\" was used for job %lld with another request body; a new "
                  "request needs a new key",
                  key, (long long)got.id);
    else if (rc == 422)
        api_error(r, 422, "invalid", "%s", err);
    else if (rc == 403)
        api_error(r, 403, "too_many_jobs", "%s", err);
    else if (rc < 0)
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    else {
        /* a new job is what was just written: no need to read it back */
        char user[512];
        if (!existed) {
            auth_user_name(r->who.tenant, r->who.name, user, sizeof(user));
            j.user = user;
            j.id = ids[0];
            j.array_parent = js.array ? ids[0] : 0;
            j.array_index = idx ? idx[0] : 0;
            j.idem_key = (char *)key;
        }
        json_t *o = api_job_json(existed ? &got : &j);

        for (int i = 0; i < n && !existed; i++) {
            /* the loop gets the job as written, each member with its place */
            struct allot_store_job m = j;
            m.user = NULL;
            m.id = ids[i];
            m.array_parent = js.array ? ids[0] : 0;
            m.array_index = idx ? idx[i] : 0;
            loop_post_job(r->srv->loop, &m);
        }
        if (js.array)
            json_object_set_new(o, "array_size", json_integer(n));
        api_json(r, existed ? 200 : 201, o);
    }
    allot_store_job_clear(&got);
out:
    allot_free(ids);
    allot_free(idx);
    free(spec);
    json_decref(b);
    return 0;
}

/* A page of GET /v1/jobs holds up to its limit of jobs, and stops after
 * the job whose specs and placements pass this many bytes. */
#define LIST_BYTES_MAX (8 * 1024 * 1024)
/* ... read from the store this many at a time (each spec up to a few
 * hundred KiB: a whole page of 1,000 at once would hold them all) */
#define LIST_CHUNK 100

int api_jobs_list(struct req *r)
{
    const char *tenant = api_query(r, "tenant"), *state = api_query(r, "state");
    const char *cur = api_query(r, "cursor"), *lim = api_query(r, "limit"), *order;
    struct allot_store_job_filter f = {.limit = 100};
    struct allot_store_job_page pg = {0};
    int64_t v;
    json_t *a;
    int rc;

    /* one state, or several separated by commas */
    if (state && !*state)
        return api_error(r, 400, "bad_query", "state is empty (leave it out for every state)");
    for (const char *p = state; p && *p;) {
        const char *end = strchr(p, ',');
        char one[32];
        int s;

        allot_fmt(one, sizeof(one), "%.*s", end ? (int)(end - p) : (int)strlen(p), p);
        if ((s = allot_store_job_state_parse(one)) < 0) {
            char names[256] = "";
            for (int k = 0; k < ALLOT_SJ_NSTATES; k++) {
                size_t n = strlen(names);
                allot_fmt(names + n, sizeof(names) - n, "%s%s", k ? ", " : "",
                          allot_store_job_state_name(k));
            }
            return api_error(r, 400, "bad_query",
                             "unknown state \"%.64s\" (one of %s, or several separated by commas)",
                             one, names);
        }
        f.states |= 1u << s;
        p = end ? end + 1 : p + strlen(p);
        if (end && !*p)
            return api_error(r, 400, "bad_query", "state ends with a comma");
    }
    if (cur) {
        if (!allot_parse_num(cur, 0, INT64_MAX, &v))
            return api_error(r, 400, "bad_query", "cursor must be a number");
        f.cursor = v;
    }
    if (lim) {
        if (!allot_parse_num(lim, 1, 1000, &v))
            return api_error(r, 400, "bad_query", "limit must be in 1..1000");
        f.limit = (int)v;
    }
    if (api_query(r, "array")) {
        if (!allot_parse_num(api_query(r, "array"), 1, INT64_MAX, &v))
            return api_error(r, 400, "bad_query", "array must be a job id");
        f.array_parent = v;
    }
    if ((f.user = api_query(r, "user")) && !*f.user)
        return api_error(r, 400, "bad_query", "user must not be empty");
    if ((order = api_query(r, "order")) && strcmp(order, "oldest") != 0) {
        if (strcmp(order, "newest") != 0)
            return api_error(r, 400, "bad_query", "order must be oldest or newest");
        f.newest_first = true; /* the cursor goes on below the last id given */
    }
    if (!api_query_flag(r, "subtree", &f.tenant_subtree))
        return 0;
    /* (a token bound to a tenant lists its own subtree without one: below) */
    if (f.tenant_subtree && !tenant && !(r->who.tenant && *r->who.tenant))
        return api_error(r, 400, "bad_query", "subtree needs tenant (the top of the subtree)");
    f.tenant = tenant;
    if (r->who.role != ALLOT_ROLE_ADMIN && *r->who.tenant) {
        if (!tenant) {
            f.tenant = r->who.tenant;
            f.tenant_subtree = true;
        } else if (!auth_in_scope(r->who.tenant, tenant)) {
            return api_json(r, 200, json_pack("{s:[],s:I}", "jobs", "next_cursor", (json_int_t)0));
        }
    }
    struct allot_store *st = api_reader(r);

    if (!st)
        return 0;
    /* read LIST_CHUNK jobs at a time, and stop once their specs pass
     * LIST_BYTES_MAX (big commands or environments): the next page goes
     * on from the last job given */
    int want = f.limit;
    size_t bytes = 0;
    a = json_array();
    v = 0;
    do {
        f.limit = want - (int)json_array_size(a) < LIST_CHUNK ? want - (int)json_array_size(a)
                                                              : LIST_CHUNK;
        if ((rc = allot_store_job_list(st, &f, &pg)) < 0) {
            json_decref(a);
            return api_error(r, rc == ALLOT_EINVAL ? 400 : 500, "bad_query", "%s",
                             allot_strerror(rc));
        }
        v = pg.next_cursor;
        for (size_t i = 0; i < pg.n; i++) {
            json_t *o = api_job_json(&pg.jobs[i]), *sp = json_object_get(o, "spec"), *sc;
            /* a list gives a script's size, GET /v1/jobs/{id} the script */
            if ((sc = json_object_get(sp, "script")) && json_is_string(sc)) {
                json_object_set_new(sp, "script_bytes",
                                    json_integer((json_int_t)json_string_length(sc)));
                json_object_del(sp, "script");
            }
            json_array_append_new(a, o);
            bytes += (pg.jobs[i].spec ? strlen(pg.jobs[i].spec) : 0) +
                     (pg.jobs[i].placement ? strlen(pg.jobs[i].placement) : 0);
            if (bytes > LIST_BYTES_MAX && (i + 1 < pg.n || v)) {
                v = pg.jobs[i].id;
                break;
            }
        }
        allot_store_job_page_free(&pg);
        f.cursor = v;
    } while (v && bytes <= LIST_BYTES_MAX && (int)json_array_size(a) < want);
    return api_json(r, 200, json_pack("{s:o,s:I}", "jobs", a, "next_cursor", (json_int_t)v));
}

bool api_job_visible(struct req *r, struct allot_store_job *j)
{
    int64_t id;
    int rc;

    if (!allot_parse_num(r->params[0], 1, INT64_MAX, &id)) {
        api_error(r, 404, "not_found", "no job %s", r->params[0]);
        return false;
    }
    struct allot_store *st = api_reader(r);

    if (!st)
        return false;
    rc = allot_store_job_get(st, id, j);
    if (rc == ALLOT_ENOENT || (rc == 0 && !auth_sees_job(&r->who, j->id, j->tenant))) {
        allot_store_job_clear(j);
        api_error(r, 404, "not_found", "no job %lld", (long long)id);
        return false;
    }
    if (rc < 0) {
        api_error(r, 500, "store", "%s", allot_strerror(rc));
        return false;
    }
    return true;
}

/* The job's tenant network ({tenant, vni, subnet, gateway}) when its tasks
 * have addresses in it, else NULL. */
static json_t *job_network(struct req *r, const struct allot_store_job *j)
{
    struct allot_store *st = srv_reader(r->srv);
    struct allot_store_net *v = NULL;
    size_t n = 0;
    json_t *out = NULL;

    if (!j->placement || !strstr(j->placement, "\"address\"") || !st ||
        allot_store_net_list(st, &v, &n) < 0)
        return NULL;
    for (size_t i = 0; i < n && !out; i++) {
        uint32_t a;
        int p;
        char gw[32];
        if (strcmp(v[i].tenant, j->tenant) != 0 || !netconf_cidr(v[i].subnet, true, &a, &p))
            continue;
        netconf_fmt(a + 1, -1, gw, sizeof(gw));
        out = json_pack("{s:s,s:I,s:s,s:s}", "tenant", v[i].tenant, "vni", (json_int_t)v[i].vni,
                        "subnet", v[i].subnet, "gateway", gw);
    }
    allot_store_nets_free(v, n);
    return out;
}

/* The time of the latest save job j (its JSON: o) reported (allot
 * checkpoint), when it runs and the save is of its current run; else NULL.
 * A store read only for a running checkpointable job. */
static json_t *job_last_save(struct req *r, const struct allot_store_job *j, const json_t *o)
{
    struct allot_store *st = srv_reader(r->srv);
    struct allot_store_event ev = {0};
    json_t *out = NULL;

    if (st && (j->state == ALLOT_SJ_STARTING || j->state == ALLOT_SJ_RUNNING) &&
        json_is_true(json_object_get(json_object_get(o, "spec"), "checkpointable")) &&
        allot_store_event_last(st, j->id, "checkpoint", &ev) == 0 && ev.time >= j->start_time)
        out = json_integer((json_int_t)ev.time);
    allot_store_event_clear(&ev);
    return out;
}

int api_jobs_get(struct req *r)
{
    struct allot_store_job j = {0};
    json_t *o, *net, *saved;

    if (!api_job_visible(r, &j))
        return 0;
    o = api_job_json(&j);
    if (o && (net = job_network(r, &j)))
        json_object_set_new(o, "network", net);
    if (o && (saved = job_last_save(r, &j, o)))
        json_object_set_new(o, "last_checkpoint", saved);
    api_json(r, 200, o);
    allot_store_job_clear(&j);
    return 0;
}

int api_jobs_cancel(struct req *r)
{
    struct allot_store_job j = {0};
    int64_t now = srv_now();
    bool array;
    int rc;

    if (!api_no_body(r) || !api_query_flag(r, "array", &array) || !api_job_visible(r, &j))
        return 0;
    if (r->who.role == ALLOT_ROLE_VIEWER) {
        api_error(r, 403, "forbidden", "a viewer may not cancel jobs");
        goto out;
    }
    struct cancel_write w = {.r = r, .id = j.id, .now = now, .array = array};

    rc = srv_write(r->srv, cancel_fn, &w);
    if (rc)
        r->audited = false;
    allot_store_job_clear(&j);
    j = w.j; /* the job as the write saw it */
    if (rc == ALLOT_ESTATE)
        api_error(r, 409, "conflict", "job %lld already ended (%s)", (long long)j.id,
                  allot_store_job_state_name(j.state));
    else if (rc < 0)
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    else {
        json_t *o = api_job_json(&j);

        loop_post(r->srv->loop, LOOP_JOB_CANCELLED, j.id, NULL);
        for (size_t i = 0; i < w.n_ids; i++)
            loop_post(r->srv->loop, LOOP_JOB_CANCELLED, w.ids[i], NULL);
        if (w.array && j.array_parent == j.id)
            json_object_set_new(o, "members_cancelled",
                                json_integer((json_int_t)w.n_ids + w.first));
        api_json(r, 200, o);
    }
    allot_free(w.ids);
out:
    allot_store_job_clear(&j);
    return 0;
}

struct hold_write {
    struct req *r;
    int64_t id, now;
    bool held;                /* hold (true) or release */
    bool array;               /* every pending member of the array {id} starts */
    struct allot_store_job j; /* OUT: the job as read, then as written */
    int64_t *ids;             /* OUT: the jobs whose hold changed (allot_free) */
    size_t n_ids, cap_ids;
    size_t pending; /* pending jobs the write found (changed or not) */
};

/* Holds or releases pending job j, with its event, unless it already is
 * (nothing written then). */
static int hold_one(struct allot_store *st, struct allot_store_job *j, void *arg)
{
    struct hold_write *w = arg;
    char detail[API_WHO_MAX + 32];
    int64_t id = j->id;
    struct allot_store_event ev = {
        .job_id = id, .time = w->now, .kind = w->held ? "held" : "released", .detail = detail};
    int rc;

    w->pending++;
    if (j->held == w->held)
        return 0;
    char who[API_WHO_MAX];
    allot_fmt(detail, sizeof(detail), "%s by %s", ev.kind, api_who(w->r, who, sizeof(who)));
    if ((rc = allot_store_job_hold(st, id, w->held)) != 0 ||
        (rc = allot_store_event_add(st, &ev, NULL)) != 0 ||
        (rc = allot_grow((void **)&w->ids, &w->cap_ids, w->n_ids + 1, sizeof(*w->ids))) != 0)
        return rc;
    w->ids[w->n_ids++] = id;
    return 0;
}

/* Group-commit write: the job (or its array's pending members) as the
 * write reads it; ALLOT_ESTATE when it is not pending (for an array: when
 * no member is). Holding a held job, or releasing one that is not, writes
 * nothing and succeeds, so a request whose reply was lost is repeated. */
static int hold_fn(struct allot_store *st, void *arg)
{
    struct hold_write *w = arg;
    char target[64];
    int rc = allot_store_job_get(st, w->id, &w->j);
    bool array = w->array && w->j.array_parent == w->id;

    if (rc)
        return rc;
    if (array)
        rc = api_array_each(st, w->id, 1u << ALLOT_SJ_PENDING, hold_one, w);
    else if (w->j.state == ALLOT_SJ_PENDING)
        rc = hold_one(st, &w->j, w);
    if (rc)
        return rc;
    if (!w->pending)
        return ALLOT_ESTATE;
    allot_store_job_clear(&w->j);
    if ((rc = allot_store_job_get(st, w->id, &w->j)) != 0)
        return rc;
    allot_fmt(target, sizeof(target), array ? "job/%lld[]" : "job/%lld", (long long)w->id);
    return api_audit(st, w->r, target, "ok", w->now);
}

/* POST /v1/jobs/{id}/hold and /release. */
static int hold_or_release(struct req *r, bool held)
{
    struct allot_store_job j = {0};
    bool array;
    int rc;

    if (!api_no_body(r) || !api_query_flag(r, "array", &array) || !api_job_visible(r, &j))
        return 0;
    if (r->who.role == ALLOT_ROLE_VIEWER) {
        api_error(r, 403, "forbidden", "a viewer may not %s jobs", held ? "hold" : "release");
        goto out;
    }
    struct hold_write w = {.r = r, .id = j.id, .now = srv_now(), .held = held, .array = array};

    rc = srv_write(r->srv, hold_fn, &w);
    if (rc)
        r->audited = false;
    allot_store_job_clear(&j);
    j = w.j;
    if (rc == ALLOT_ESTATE) {
        if (w.array && j.array_parent == j.id)
            api_error(r, 409, "conflict", "no job of array %lld is pending", (long long)j.id);
        else
            api_error(r, 409, "conflict", "job %lld is %s: only a pending job is %s",
                      (long long)j.id, allot_store_job_state_name(j.state),
                      held ? "held" : "released");
    } else if (rc < 0) {
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    } else {
        json_t *o = api_job_json(&j);
        char why[96];

        for (size_t i = 0; i < w.n_ids; i++)
            loop_post(r->srv->loop, held ? LOOP_JOB_HOLD : LOOP_JOB_RELEASE, w.ids[i], NULL);
        /* the answer's reason is what the loop will say, not the one it
         * stored before: held, or none until its next cycle finds one */
        if (j.state == ALLOT_SJ_PENDING && j.held)
            loop_held_reason(j.id, why, sizeof(why));
        if (j.state == ALLOT_SJ_PENDING)
            json_object_set_new(o, "pending_reason", j.held ? json_string(why) : json_null());
        if (w.array && j.array_parent == j.id)
            json_object_set_new(o, held ? "members_held" : "members_released",
                                json_integer((json_int_t)w.n_ids));
        api_json(r, 200, o);
    }
    allot_free(w.ids);
out:
    allot_store_job_clear(&j);
    return 0;
}

int api_jobs_hold(struct req *r)
{
    return hold_or_release(r, true);
}

int api_jobs_release(struct req *r)
{
    return hold_or_release(r, false);
}

struct prio_write {
    struct req *r;
    int64_t id, now;
    const char *cls;          /* the class asked for */
    bool array;               /* every pending member of the array {id} starts */
    struct allot_store_job j; /* OUT: the job as read, then as written */
    int64_t *ids;             /* OUT: the jobs whose class changed (allot_free) */
    size_t n_ids, cap_ids;
    size_t pending; /* pending jobs the write found (changed or not) */
    bool no_class;  /* OUT: no such class */
};

/* Gives pending job j class w->cls in its stored spec, with its "priority"
 * event, unless it has that class already (nothing written then: a
 * request whose reply was lost is repeated). */
static int prio_one(struct allot_store *st, struct allot_store_job *j, void *arg)
{
    struct prio_write *w = arg;
    char detail[API_WHO_MAX + 200];
    json_t *spec = json_loads(j->spec ? j->spec : "", 0, NULL);
    const char *old = json_string_value(json_object_get(spec, "priority"));
    int rc;

    w->pending++;
    if (old && !strcmp(old, w->cls)) {
        json_decref(spec);
        return 0;
    }
    char who[API_WHO_MAX];
    allot_fmt(detail, sizeof(detail), "priority class %s -> %s by %s", old ? old : "(default)",
              w->cls, api_who(w->r, who, sizeof(who)));
    struct allot_store_event ev = {
        .job_id = j->id, .time = w->now, .kind = "priority", .detail = detail};
    char *text = spec && !json_object_set_new(spec, "priority", json_string(w->cls))
                     ? json_dumps(spec, JSON_COMPACT | JSON_REAL_PRECISION(15))
                     : NULL;
    json_decref(spec);
    if (!text)
        return ALLOT_ENOMEM;
    if ((rc = allot_store_job_set_spec(st, j->id, text)) == 0 &&
        (rc = allot_store_event_add(st, &ev, NULL)) == 0 &&
        (rc = allot_grow((void **)&w->ids, &w->cap_ids, w->n_ids + 1, sizeof(*w->ids))) == 0)
        w->ids[w->n_ids++] = j->id;
    free(text);
    return rc;
}

/* Group-commit write: pending job w->id's priority class (or that of its
 * array's pending members), with the events and one audit entry.
 * ALLOT_ESTATE when it is not pending (for an array: when no member is),
 * ALLOT_EINVAL (no_class) when the class is not there. */
static int prio_fn(struct allot_store *st, void *arg)
{
    struct prio_write *w = arg;
    char target[64];
    int rc = allot_store_job_get(st, w->id, &w->j);
    bool array = w->array && w->j.array_parent == w->id;

    if (rc)
        return rc;
    if (!array && w->j.state != ALLOT_SJ_PENDING)
        return ALLOT_ESTATE;
    if ((rc = class_stored(st, w->cls, &w->no_class)) != 0)
        return rc;
    if (array)
        rc = api_array_each(st, w->id, 1u << ALLOT_SJ_PENDING, prio_one, w);
    else
        rc = prio_one(st, &w->j, w);
    if (rc)
        return rc;
    if (!w->pending)
        return ALLOT_ESTATE;
    if (!w->n_ids)
        return 0; /* asked again: nothing written */
    allot_store_job_clear(&w->j);
    if ((rc = allot_store_job_get(st, w->id, &w->j)) != 0)
        return rc;
    allot_fmt(target, sizeof(target), array ? "job/%lld[]" : "job/%lld", (long long)w->id);
    return api_audit(st, w->r, target, "ok", w->now);
}

/* POST /v1/jobs/{id}/priority {"priority": CLASS}: a waiting job's
 * priority class (scontrol update ... Priority), keeping its place among
 * the jobs of its class by its submission; with ?array=true, every
 * pending member of the array {id} starts. */
int api_jobs_priority(struct req *r)
{
    struct allot_store_job j = {0};
    json_t *b = NULL, *v;
    const char *k;
    bool array;
    int rc;

    if (!api_query_flag(r, "array", &array) || !(b = api_body_object(r)))
        return 0;
    json_object_foreach(b, k, v) if (strcmp(k, "priority") != 0)
    {
        api_error(r, 400, "bad_request", "unknown field \"%.64s\" (only \"priority\" may change)",
                  k);
        goto out;
    }
    v = json_object_get(b, "priority");
    if (!json_is_string(v) || !*json_string_value(v) || strlen(json_string_value(v)) > 64) {
        api_error(r, 400, "bad_request", "field \"priority\" must be a class name (1..64 bytes)");
        goto out;
    }
    if (!api_job_visible(r, &j))
        goto out;
    if (r->who.role == ALLOT_ROLE_VIEWER) {
        api_error(r, 403, "forbidden", "a viewer may not change a job's priority");
        goto out;
    }
    struct prio_write w = {
        .r = r, .id = j.id, .now = srv_now(), .cls = json_string_value(v), .array = array};
    rc = srv_write(r->srv, prio_fn, &w);
    if (rc)
        r->audited = false;
    allot_store_job_clear(&j);
    j = w.j;
    if (w.no_class)
        api_error(r, 422, "invalid", "no priority class %s (see GET /v1/priority-classes)", w.cls);
    else if (rc == ALLOT_ESTATE && w.array && j.array_parent == j.id)
        api_error(r, 409, "conflict", "no job of array %lld is pending", (long long)j.id);
    else if (rc == ALLOT_ESTATE)
        api_error(r, 409, "conflict",
                  "job %lld is %s: a priority class changes only while the job waits (requeue it "
                  "to wait again)",
                  (long long)j.id, allot_store_job_state_name(j.state));
    else if (rc < 0)
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    else {
        json_t *o = api_job_json(&j);

        for (size_t i = 0; i < w.n_ids; i++)
            loop_post(r->srv->loop, LOOP_JOB_PRIORITY, w.ids[i], NULL);
        if (w.array && j.array_parent == j.id)
            json_object_set_new(o, "members_changed", json_integer((json_int_t)w.n_ids));
        api_json(r, 200, o);
    }
    allot_free(w.ids);
out:
    allot_store_job_clear(&j);
    json_decref(b);
    return 0;
}

struct requeue_write {
    struct req *r;
    int64_t id, now;
    bool array;               /* every starting or running member of the array {id} */
    struct allot_store_job j; /* OUT: the job as read */
    int64_t (*runs)[2];       /* OUT: job and run (start) of each to requeue (allot_free) */
    size_t n_runs, cap_runs;
    int64_t no_requeue; /* OUT: a job submitted with "requeue": false (409) */
    const char *why;    /* the "requeued" event's detail */
};

/* Whether stored job j may be requeued: it runs, and its spec does not say
 * "requeue": false (the user said a second run would do harm). */
static int requeue_one(struct allot_store *st, struct allot_store_job *j, void *arg)
{
    struct requeue_write *w = arg;
    json_t *spec = json_loads(j->spec ? j->spec : "{}", 0, NULL);
    bool refuse = json_is_false(json_object_get(spec, "requeue"));
    int rc;

    json_decref(spec);
    if (j->state != ALLOT_SJ_STARTING && j->state != ALLOT_SJ_RUNNING)
        return 0;
    if (refuse) {
        w->no_requeue = j->id;
        return 409; /* refused: srv_write passes it back */
    }
    if ((rc = allot_grow((void **)&w->runs, &w->cap_runs, w->n_runs + 1, sizeof(*w->runs))) != 0)
        return rc;
    /* stored with the answer: a requeue answered is not lost if allotd
     * stops before its loop takes it */
    if ((rc = loop_requeue_stored(st, j->id, w->why, w->now)) != 0)
        return rc;
    w->runs[w->n_runs][0] = j->id;
    w->runs[w->n_runs][1] = j->start_time;
    w->n_runs++;
    return 0;
}

/* Group-commit write: the job (or its array's running members) as the
 * write reads it, each requeued (pending, a "requeued" event); ALLOT_ESTATE
 * when none runs, 409 for a job that may not run twice; and the audit
 * entry. The loop follows (loop_post_requeued), as for a fenced job. */
static int requeue_fn(struct allot_store *st, void *arg)
{
    struct requeue_write *w = arg;
    char target[48];
    int rc = allot_store_job_get(st, w->id, &w->j);
    bool array = w->array && w->j.array_parent == w->id;

    if (rc)
        return rc;
    if (array)
        rc = api_array_each(st, w->id, (1u << ALLOT_SJ_STARTING) | (1u << ALLOT_SJ_RUNNING),
                            requeue_one, w);
    else
        rc = requeue_one(st, &w->j, w);
    if (rc)
        return rc;
    if (!w->n_runs)
        return ALLOT_ESTATE;
    allot_fmt(target, sizeof(target), array ? "job/%lld[]" : "job/%lld", (long long)w->id);
    return api_audit(st, w->r, target, "ok", w->now);
}

int api_jobs_requeue(struct req *r)
{
    struct allot_store_job j = {0};
    char why[API_WHO_MAX + 32];
    bool array;
    int rc;

    if (!api_no_body(r) || !api_query_flag(r, "array", &array) || !api_job_visible(r, &j))
        return 0;
    if (r->who.role == ALLOT_ROLE_VIEWER) {
        api_error(r, 403, "forbidden", "a viewer may not requeue jobs");
        goto out;
    }
    char who[API_WHO_MAX];
    allot_fmt(why, sizeof(why), "requeued by %s", api_who(r, who, sizeof(who)));
    struct requeue_write w = {.r = r, .id = j.id, .now = srv_now(), .array = array, .why = why};

    rc = srv_write(r->srv, requeue_fn, &w);
    if (rc)
        r->audited = false;
    allot_store_job_clear(&j);
    j = w.j;
    if (rc == 409) {
        api_error(r, 409, "conflict",
                  "job %lld was submitted with \"requeue\": false (--no-requeue): it is not run "
                  "twice",
                  (long long)w.no_requeue);
    } else if (rc == ALLOT_ESTATE) {
        if (w.array && j.array_parent == j.id)
            api_error(r, 409, "conflict", "no job of array %lld is starting or running",
                      (long long)j.id);
        else
            api_error(r, 409, "conflict",
                      "job %lld is %s: only a starting or running job is requeued", (long long)j.id,
                      allot_store_job_state_name(j.state));
    } else if (rc < 0) {
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    } else {
        json_t *o = api_job_json(&j);

        /* these runs only: one that ended meanwhile leaves the next alone */
        for (size_t i = 0; i < w.n_runs; i++)
            loop_post_requeued(r->srv->loop, w.runs[i][0], w.runs[i][1]);
        if (w.array && j.array_parent == j.id)
            json_object_set_new(o, "members_requeued", json_integer((json_int_t)w.n_runs));
        api_json(r, 202, o);
    }
    allot_free(w.runs);
out:
    allot_store_job_clear(&j);
    return 0;
}

/* Stored checkpoint reports of one run are at least this far apart. */
#define CHECKPOINT_EVERY_S 60

struct checkpoint_write {
    struct req *r;
    int64_t id, now, at;
    int64_t run;   /* a job credential's run: the report must be of it (0: any) */
    int state;     /* OUT: the job's state as the write saw it */
    int64_t start; /* OUT: ... and its run's start */
};

/* The report's event and audit entry, checked against the job as the
 * write reads it (it may have ended or started again since the handler
 * read it): ALLOT_ESTATE when it does not run, ALLOT_EINVAL when `at` is
 * outside its run. A run that began within the second the last one ended
 * is stored as starting a second later: its start may be ahead of now. */
static int checkpoint_fn(struct allot_store *st, void *arg)
{
    struct checkpoint_write *w = arg;
    struct allot_store_job j = {0};
    char detail[64], target[64];
    /* at the save's time: a restarted loop reads the last one back (adopt_job) */
    struct allot_store_event ev = {
        .job_id = w->id, .time = w->at, .kind = "checkpoint", .detail = detail};
    int rc = allot_store_job_get(st, w->id, &j);

    w->state = j.state;
    w->start = j.start_time;
    if (rc == 0 && ((w->state != ALLOT_SJ_RUNNING && w->state != ALLOT_SJ_STARTING) ||
                    (w->run && w->start != w->run)))
        rc = ALLOT_ESTATE;
    else if (rc == 0 && (w->at < (w->start < w->now ? w->start : w->now) || w->at > w->now))
        rc = ALLOT_EINVAL;
    allot_store_job_clear(&j);
    if (rc)
        return rc;
    /* a save of this run stored within CHECKPOINT_EVERY_S before this one
     * (or after it) stands for it: a job reporting in a loop adds an event
     * and an audit entry a minute at most (the loop still gets this one) */
    struct allot_store_event last = {0};
    bool recent = allot_store_event_last(st, w->id, "checkpoint", &last) == 0 &&
                  last.time >= w->start && last.time >= w->at - CHECKPOINT_EVERY_S;
    allot_store_event_clear(&last);
    if (recent)
        return 0;
    allot_fmt(detail, sizeof(detail), "saved its work (reported at %lld)", (long long)w->now);
    allot_fmt(target, sizeof(target), "job/%lld", (long long)w->id);
    rc = allot_store_event_add(st, &ev, NULL);
    return rc ? rc : api_audit(st, w->r, target, w->run ? "ok (job credential)" : "ok", w->now);
}

/* POST /v1/jobs/{id}/checkpoint: a running checkpointable job saved its
 * work, now or at "at" (unix seconds, inside its current run). The queue
 * then counts what a preemption or a move would lose from that save
 * (docs/tenancy.md, "Defragmentation"). */
int api_jobs_checkpoint(struct req *r)
{
    static const char *const fields[] = {"at", NULL};
    struct allot_store_job j = {0};
    int64_t now = srv_now(), at = now;
    json_t *b = NULL, *v = NULL, *spec = NULL;

    if (r->body_len && (!(b = api_body_object(r)) || !api_known_fields(r, b, fields, NULL)))
        goto out;
    if (b && (v = json_object_get(b, "at")) && !json_is_integer(v)) {
        api_error(r, 400, "bad_request", "field \"at\" must be an integer (unix seconds)");
        goto out;
    }
    if (b && v)
        at = (int64_t)json_integer_value(v);
    if (!api_job_visible(r, &j))
        goto out;
    spec = json_loads(j.spec, 0, NULL);
    if (r->who.role == ALLOT_ROLE_VIEWER)
        api_error(r, 403, "forbidden", "a viewer may not report checkpoints");
    else if (!json_is_true(json_object_get(spec, "checkpointable")))
        api_error(r, 422, "invalid",
                  "job %lld is not checkpointable (submit it with "
                  "\"checkpointable\": true)",
                  (long long)j.id);
    else {
        struct checkpoint_write w = {
            .r = r, .id = j.id, .now = now, .at = at, .run = r->who.job_run};
        int rc = srv_write(r->srv, checkpoint_fn, &w);

        if (rc)
            r->audited = false;
        if (rc == ALLOT_ESTATE && w.run) /* its run ended since auth_resolve (or runs anew) */
            api_error(r, 401, "unauthorized",
                      "the job's credential is of its run %lld, which has ended", (long long)w.run);
        else if (rc == ALLOT_ESTATE)
            api_error(r, 409, "conflict", "job %lld does not run (%s)", (long long)j.id,
                      allot_store_job_state_name(w.state));
        else if (rc == ALLOT_EINVAL)
            api_error(r, 422, "invalid",
                      "field \"at\": %lld is outside the job's current run (%lld to %lld)",
                      (long long)at, (long long)w.start, (long long)now);
        else if (rc < 0)
            api_error(r, 500, "store", "%s", allot_strerror(rc));
        else {
            loop_post_checkpoint(r->srv->loop, j.id, at);
            api_json(r, 200,
                     json_pack("{s:I,s:I}", "id", (json_int_t)j.id, "saved_at", (json_int_t)at));
        }
    }
out:
    json_decref(spec);
    json_decref(b);
    allot_store_job_clear(&j);
    return 0;
}

int api_jobs_events(struct req *r)
{
    struct allot_store_job j = {0};
    struct allot_store_event *ev = NULL;
    size_t n = 0;
    int64_t after = 0, limit = 100;
    json_t *a;
    int rc;

    if ((api_query(r, "after") && !allot_parse_num(api_query(r, "after"), 0, INT64_MAX, &after)) ||
        (api_query(r, "limit") && !allot_parse_num(api_query(r, "limit"), 1, 1000, &limit)))
        return api_error(r, 400, "bad_query", "after must be >= 0, limit 1..1000");
    if (!api_job_visible(r, &j))
        return 0;
    struct allot_store *st = api_reader(r);

    if (!st) {
        allot_store_job_clear(&j);
        return 0;
    }
    rc = allot_store_event_list(st, j.id, after, (int)limit, &ev, &n);
    allot_store_job_clear(&j);
    if (rc < 0)
        return api_error(r, 500, "store", "%s", allot_strerror(rc));
    a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_pack("{s:I,s:I,s:s}", "seq", (json_int_t)ev[i].seq, "time",
                              (json_int_t)ev[i].time, "kind", ev[i].kind);
        json_object_set_new(o, "detail", ev[i].detail ? json_string(ev[i].detail) : json_null());
        json_array_append_new(a, o);
    }
    allot_store_events_free(ev, n);
    return api_json(r, 200, json_pack("{s:o}", "events", a));
}

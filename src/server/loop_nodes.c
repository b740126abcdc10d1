/*
 * Nodes in the scheduling loop: the core's nodes from the stored
 * inventories (added, changed), a node seen again after it was lost, GPU
 * health fencing, leases (a node past its lease is lost and its jobs go
 * back to the queue), and evictions (a drained node's jobs, an idle job).
 * Loop thread only; split from loop.c.
 */
#include "loop_int.h"

#include "agentproto.h"
#include "log.h"

#include "allot/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Sets node `name`'s state in the store (lock held, in a batch). */
static int store_node_state(struct allot_store *st, const char *name, int state)
{
    struct allot_store_node n = {0};
    int rc = allot_store_node_get(st, name, &n);

    if (rc == 0 && n.state != state) {
        n.state = state;
        rc = allot_store_node_put(st, &n);
    }
    allot_store_node_clear(&n);
    return rc;
}

/* A lost node back: ready, or the state an admin gave it (cordoned or
 * draining, before it was lost or while it was: node_return_key), as
 * Slurm keeps a node's drain across its being down. */
struct back_write {
    const char *name;
    int state; /* OUT: the stored state it is back in */
};

/* Marks node `name` lost, keeping an admin's cordon or drain for its
 * return (node_back_fn). */
static int node_lost_state(struct allot_store *st, const char *name)
{
    struct allot_store_node n = {0};
    int rc = allot_store_node_get(st, name, &n);

    if (rc == 0) /* ready too: what an earlier node of the name left goes */
        rc = loop_node_return_set(st, name, n.state);
    allot_store_node_clear(&n);
    return rc ? rc : store_node_state(st, name, ALLOT_SN_LOST);
}

static int node_back_fn(struct allot_store *st, void *arg)
{
    struct back_write *w = arg;
    int rc = loop_node_return_get(st, w->name);

    if (rc < 0)
        return rc;
    w->state = rc;
    rc = store_node_state(st, w->name, w->state);
    return rc == 0 ? loop_node_return_set(st, w->name, ALLOT_SN_READY) : rc;
}

/* The meta key that keeps lost node `name`'s return state. */
static void return_key(char *key, size_t len, const char *name)
{
    allot_fmt(key, len, "node_return/%s", name);
}

int loop_node_return_get(struct allot_store *st, const char *name)
{
    char key[128], *was = NULL;
    int rc, state = ALLOT_SN_READY;

    return_key(key, sizeof(key), name);
    rc = allot_store_meta_get(st, key, &was);
    if (rc < 0 && rc != ALLOT_ENOENT)
        return rc;
    if (was && !strcmp(was, allot_store_node_state_name(ALLOT_SN_CORDONED)))
        state = ALLOT_SN_CORDONED;
    else if (was && !strcmp(was, allot_store_node_state_name(ALLOT_SN_DRAINING)))
        state = ALLOT_SN_DRAINING;
    allot_free(was);
    return state;
}

int loop_node_return_set(struct allot_store *st, const char *name, int state)
{
    char key[128];

    return_key(key, sizeof(key), name);
    return allot_store_meta_set(st, key,
                                state == ALLOT_SN_CORDONED || state == ALLOT_SN_DRAINING
                                    ? allot_store_node_state_name(state)
                                    : "");
}

/* ---- the core's nodes from the stored inventories ---- */

/* The core's node spec for a stored inventory (inv); labels point into
 * lab (AGENTPROTO_MAX_LABELS) and inv. */
static void inventory_spec(json_t *inv, const char *name, struct allot_node_spec *ns,
                           struct allot_label lab[AGENTPROTO_MAX_LABELS])
{
    json_t *gpus = json_object_get(inv, "gpus"), *labels = json_object_get(inv, "labels");
    const char *mode = json_string_value(json_object_get(inv, "gpu_mode"));
    const char *k;
    json_t *v;

    *ns = (struct allot_node_spec){.name = name};
    ns->cpu_milli = (int64_t)llround(json_number_value(json_object_get(inv, "cpus")) * 1000);
    ns->mem_mib = json_integer_value(json_object_get(inv, "memory"));
    ns->n_gpus = (int)json_array_size(gpus);
    ns->island_size = (int)json_integer_value(json_object_get(inv, "island_size"));
    ns->rdma_vfs = agentproto_rdma_vfs(inv);
    if (ns->n_gpus)
        ns->model = json_string_value(json_object_get(json_array_get(gpus, 0), "model"));
    ns->gpu_mode = !mode || !strcmp(mode, "shared") ? ALLOT_GPU_SHARED
                   : !strcmp(mode, "mig")           ? ALLOT_GPU_MIG
                                                    : ALLOT_GPU_EXCLUSIVE;
    json_object_foreach(labels, k, v)
    {
        if (ns->n_labels == AGENTPROTO_MAX_LABELS) { /* stored by an allotd without the limit */
            LOG_WARN("loop", "node %s: more than %d labels stored; the rest are left out", name,
                     AGENTPROTO_MAX_LABELS);
            break;
        }
        lab[ns->n_labels].key = (char *)k;
        lab[ns->n_labels++].value = (char *)json_string_value(v);
    }
    ns->labels = lab;
}

/* What a node adds to the limits submissions are checked against
 * (api_jobs_submit refuses what can never run): GPUs outside MIG mode,
 * the largest GPU's memory that fractions can ask for, GPUs, CPU and
 * memory per node (the largest figures: a node that changes size or is
 * removed has them counted again, limits_recount). The loop thread alone
 * writes them; a change takes the old size away first (sign -1) and adds
 * the new one. */
static void node_limits(struct loop *l, const struct allot_node_spec *ns, int sign)
{
    int mi = ns->n_gpus ? allot_catalog_find_model(l->srv->cat, ns->model) : -1;
    int64_t mib = mi >= 0 ? l->srv->cat->models[mi].memory_mib : 0;

    if (ns->gpu_mode != ALLOT_GPU_MIG)
        atomic_fetch_add(&l->srv->whole_gpus, sign * ns->n_gpus);
    if (sign < 0)
        return;
    if (ns->gpu_mode == ALLOT_GPU_SHARED && mib > atomic_load(&l->srv->max_gpu_mib))
        atomic_store(&l->srv->max_gpu_mib, mib);
    if (ns->n_gpus > atomic_load(&l->srv->max_node_gpus))
        atomic_store(&l->srv->max_node_gpus, ns->n_gpus);
    if (mi >= 0 && mi < ALLOT_MAX_MODELS && ns->n_gpus > atomic_load(&l->srv->model_gpus[mi]))
        atomic_store(&l->srv->model_gpus[mi], ns->n_gpus);
    if (ns->cpu_milli > atomic_load(&l->srv->max_cpu_milli))
        atomic_store(&l->srv->max_cpu_milli, ns->cpu_milli);
    if (ns->mem_mib > atomic_load(&l->srv->max_mem_mib))
        atomic_store(&l->srv->max_mem_mib, ns->mem_mib);
}

/* The largest figures per node counted again over the core's nodes (a
 * removed one has no size), after a node shrank or went. While a node
 * registered a moment ago is not in the core yet (nodes_adding), its GPUs
 * (counted by api_nodes_register) may be the largest: that limit is kept
 * until the next recount. */
static void limits_recount(struct loop *l)
{
    const struct allot_catalog *cat = allot_cluster_catalog(l->c);
    int64_t mib = 0, cpu = 0, mem = 0;
    int gpus = 0, per_model[ALLOT_MAX_MODELS] = {0};

    for (int i = 0; i < allot_cluster_node_count(l->c); i++) {
        const struct allot_node *n = allot_cluster_node(l->c, i);

        if (n->n_gpus > 0 && n->model >= 0 && n->model < ALLOT_MAX_MODELS &&
            n->n_gpus > per_model[n->model])
            per_model[n->model] = n->n_gpus;

        if (n->n_gpus > 0 && n->gpus[0].mode == ALLOT_GPU_SHARED && n->model >= 0 &&
            cat->models[n->model].memory_mib > mib)
            mib = cat->models[n->model].memory_mib;
        gpus = n->n_gpus > gpus ? n->n_gpus : gpus;
        cpu = n->cpu_milli > cpu ? n->cpu_milli : cpu;
        mem = n->mem_mib > mem ? n->mem_mib : mem;
    }
    atomic_store(&l->srv->max_gpu_mib, mib);
    atomic_store(&l->srv->max_cpu_milli, cpu);
    atomic_store(&l->srv->max_mem_mib, mem);
    for (int m = 0; m < ALLOT_MAX_MODELS; m++)
        atomic_store(&l->srv->model_gpus[m], per_model[m]);
    if (atomic_load(&l->srv->nodes_adding) == 0)
        atomic_store(&l->srv->max_node_gpus, gpus);
}

/* Its address on the data-centre network: the tenant overlays' peer. */
static void node_underlay(struct loop *l, int i, json_t *inv)
{
    const char *ul = json_string_value(json_object_get(inv, "underlay"));

    allot_free(l->underlay[i]);
    l->underlay[i] = ul ? allot_strdup(ul) : NULL;
}

static int node_take(struct loop *l, int i, const char *name, const char *inventory, char *err,
                     size_t errlen);

/* The stored state's counterpart in the core: ready only when the node
 * may work, lost, or else draining (cordoned and draining alike take no
 * new work). */
static void node_state_from_store(struct loop *l, int i, const char *name, int sstate)
{
    allot_cluster_set_state(l->c, i,
                            sstate == ALLOT_SN_LOST ? ALLOT_NODE_LOST
                            : sstate == ALLOT_SN_READY && loop_node_may_work(l, i, name)
                                ? ALLOT_NODE_READY
                                : ALLOT_NODE_DRAINING);
}

int loop_add_node(struct loop *l, const char *name, const char *inventory, int sstate)
{
    json_t *inv = json_loads(inventory ? inventory : "{}", 0, NULL);
    struct allot_label lab[AGENTPROTO_MAX_LABELS];
    struct allot_node_spec ns;
    char err[256];
    int rc, i = allot_cluster_find_node(l->c, name);

    /* a name the core keeps from a removed node (loop_remove_node): lost
     * and of no size, it takes the new registration's */
    if (i >= 0 && inv && json_object_get(l->removed, name)) {
        json_decref(inv);
        if (node_take(l, i, name, inventory, err, sizeof(err)) < 0) {
            LOG_ERROR("loop", "node %s not added again: %s", name, err);
            return 0;
        }
        json_object_del(l->removed, name);
        l->fenced[i] = false;
        l->expiry[i] = srv_now() + l->srv->cfg.lease / 1000;
        node_state_from_store(l, i, name, sstate);
        LOG_INFO("loop", "node %s added again (%s)", name, allot_store_node_state_name(sstate));
        return 0;
    }
    if (i >= 0 || !inv) {
        json_decref(inv);
        return 0;
    }
    inventory_spec(inv, name, &ns, lab);
    size_t cap_before = l->cap_fenced;
    if (allot_grow((void **)&l->expiry, &l->cap_expiry, (size_t)allot_cluster_node_count(l->c) + 1,
                   sizeof(*l->expiry)) < 0 ||
        allot_grow((void **)&l->fenced, &l->cap_fenced, (size_t)allot_cluster_node_count(l->c) + 1,
                   sizeof(*l->fenced)) < 0) {
        json_decref(inv);
        return ALLOT_ENOMEM;
    }
    for (size_t f = cap_before; f < l->cap_fenced; f++)
        l->fenced[f] = false;
    size_t ucap = l->cap_underlay;
    if (allot_grow((void **)&l->underlay, &l->cap_underlay,
                   (size_t)allot_cluster_node_count(l->c) + 1, sizeof(*l->underlay)) < 0) {
        json_decref(inv);
        return ALLOT_ENOMEM;
    }
    for (size_t f = ucap; f < l->cap_underlay; f++)
        l->underlay[f] = NULL;
    rc = allot_cluster_add_node(l->c, &ns, err, sizeof(err));
    if (rc < 0)
        LOG_ERROR("loop", "node %s not added: %s", name, err);
    else {
        /* a full lease from now, also after a restart of allotd */
        l->expiry[rc] = srv_now() + l->srv->cfg.lease / 1000;
        node_underlay(l, rc, inv);
        if (sstate != ALLOT_SN_READY)
            allot_cluster_set_state(
                l->c, rc, sstate == ALLOT_SN_LOST ? ALLOT_NODE_LOST : ALLOT_NODE_DRAINING);
        LOG_INFO("loop", "node %s added (%d GPUs, %s)", name, ns.n_gpus,
                 allot_store_node_state_name(sstate));
        node_limits(l, &ns, 1);
    }
    if (ns.n_gpus > atomic_load(&l->srv->max_node_gpus))
        atomic_store(&l->srv->max_node_gpus, ns.n_gpus);
    json_decref(inv);
    return rc < 0 ? rc : 0;
}

int loop_node_keep_name(struct loop *l, const char *name)
{
    int rc = loop_add_node(l, name, "{}", ALLOT_SN_LOST), i = allot_cluster_find_node(l->c, name);

    if (rc < 0 || i < 0)
        return rc < 0 ? rc : ALLOT_ENOMEM;
    if (!l->removed)
        l->removed = json_object();
    if (json_object_set_new(l->removed, name, json_true()) < 0)
        return ALLOT_ENOMEM;
    LOG_INFO("loop", "node %s: not registered; its place kept for the jobs that name it", name);
    return i;
}

/* Gives the core's node i the inventory (JSON text) the store now holds
 * for it: 0, or ALLOT_ESTATE while it is ready or holds tasks (err says
 * which), or another error. */
static int node_take(struct loop *l, int i, const char *name, const char *inventory, char *err,
                     size_t errlen)
{
    json_t *inv = json_loads(inventory ? inventory : "{}", 0, NULL);
    const struct allot_node *n = allot_cluster_node(l->c, i);
    struct allot_label lab[AGENTPROTO_MAX_LABELS];
    struct allot_node_spec ns, was;
    int rc;

    if (!inv) {
        allot_fmt(err, errlen, "its new inventory does not read as JSON");
        return ALLOT_EINVAL;
    }
    /* what it counted for until now */
    was = (struct allot_node_spec){
        .n_gpus = n->n_gpus,
        .gpu_mode = n->n_gpus ? n->gpus[0].mode : ALLOT_GPU_SHARED,
        .model = n->model >= 0 ? allot_cluster_catalog(l->c)->models[n->model].name : NULL};
    inventory_spec(inv, name, &ns, lab);
    err[0] = '\0';
    rc = allot_cluster_update_node(l->c, i, &ns, err, errlen);
    if (rc == 0) {
        node_limits(l, &was, -1);
        node_limits(l, &ns, 1);
        limits_recount(l);
        node_underlay(l, i, inv);
        LOG_INFO("loop", "node %s changed (%d %s GPUs)", name, ns.n_gpus,
                 ns.model ? ns.model : "no");
    }
    json_decref(inv);
    return rc;
}

/* A known node that registered another inventory while out of service and
 * empty (api_nodes_register): the core's node takes the new size. Placed
 * on since allotd looked, or made ready meanwhile, it takes no new work
 * and takes the size once empty (pending_retry); a node not in the core
 * (its first add failed) is added now. */
void loop_change_node(struct loop *l, const char *name, const char *inventory, int sstate)
{
    int i = allot_cluster_find_node(l->c, name), rc;
    char err[256];

    if (i < 0) {
        loop_add_node(l, name, inventory, sstate);
        return;
    }
    rc = node_take(l, i, name, inventory, err, sizeof(err));
    if (rc == ALLOT_ESTATE) {
        if (!l->pending_inv)
            l->pending_inv = json_object();
        json_object_set_new(l->pending_inv, name, json_string(inventory ? inventory : "{}"));
        if (allot_cluster_node(l->c, i)->state == ALLOT_NODE_READY)
            allot_cluster_set_state(l->c, i, ALLOT_NODE_DRAINING);
        LOG_INFO("loop", "node %s takes its new inventory once empty (%s)", name, err);
    } else if (rc < 0) {
        LOG_ERROR("loop", "node %s keeps its old size: %s", name, err[0] ? err : "error");
    }
}

/* The nodes waiting for a new inventory (loop_change_node) that are empty now:
 * they take it, and the state the store holds for them again. */
void loop_pending_retry(struct loop *l)
{
    const char *name;
    json_t *v, *tmp;
    char err[256];

    json_object_foreach_safe(l->pending_inv, tmp, name, v)
    {
        int i = allot_cluster_find_node(l->c, name), rc;
        struct allot_store_node sn = {0};

        if (i < 0) {
            json_object_del(l->pending_inv, name);
            continue;
        }
        if (allot_cluster_node(l->c, i)->n_tasks > 0)
            continue;
        /* made ready meanwhile (a lost node's heartbeat): out of the index
         * for the change, its state back below */
        if (allot_cluster_node(l->c, i)->state == ALLOT_NODE_READY)
            allot_cluster_set_state(l->c, i, ALLOT_NODE_DRAINING);
        rc = node_take(l, i, name, json_string_value(v), err, sizeof(err));
        if (rc < 0)
            LOG_ERROR("loop", "node %s keeps its old size: %s", name, err[0] ? err : "error");
        /* its admin state back (ready unless cordoned, draining or fenced) */
        if (allot_cluster_node(l->c, i)->state != ALLOT_NODE_LOST && srv_reader(l->srv) &&
            allot_store_node_get(srv_reader(l->srv), name, &sn) == 0 &&
            sn.state == ALLOT_SN_READY && !l->fenced[i])
            allot_cluster_set_state(l->c, i, ALLOT_NODE_READY);
        allot_store_node_clear(&sn);
        json_object_del(l->pending_inv, name); /* pending no more: loop_node_may_work */
    }
}

bool loop_node_may_work(const struct loop *l, int i, const char *name)
{
    return !l->fenced[i] && !json_object_get(l->pending_inv, name);
}

void loop_node_seen(struct loop *l, const char *name, int64_t expiry)
{
    int i = allot_cluster_find_node(l->c, name);

    if (i < 0)
        return;
    l->expiry[i] = expiry;
    if (allot_cluster_node(l->c, i)->state != ALLOT_NODE_LOST)
        return;
    struct back_write w = {.name = name};
    if (srv_write(l->srv, node_back_fn, &w) == 0) {
        allot_cluster_set_state(l->c, i,
                                w.state == ALLOT_SN_READY && loop_node_may_work(l, i, name)
                                    ? ALLOT_NODE_READY
                                    : ALLOT_NODE_DRAINING);
        LOG_INFO("loop", "node %s is back (%s)", name, allot_store_node_state_name(w.state));
    }
}

/* The agent of node `name` reports an unhealthy GPU (or none any more):
 * like a failed health check in Slurm, the node takes no new work until
 * its GPUs are healthy again; running jobs stay. The admin's state
 * (cordoned, draining) is restored when the fence lifts. */
void loop_node_health(struct loop *l, const char *name, bool unhealthy)
{
    int i = allot_cluster_find_node(l->c, name);
    struct allot_store_node n = {0};

    if (i < 0 || l->fenced[i] == unhealthy)
        return;
    l->fenced[i] = unhealthy;
    if (allot_cluster_node(l->c, i)->state == ALLOT_NODE_LOST)
        return;
    if (unhealthy) {
        allot_cluster_set_state(l->c, i, ALLOT_NODE_DRAINING);
        LOG_WARN("loop", "node %s fenced: its agent reports an unhealthy GPU", name);
        return;
    }
    int st = ALLOT_SN_READY;
    if (srv_reader(l->srv) && allot_store_node_get(srv_reader(l->srv), name, &n) == 0)
        st = n.state;
    allot_store_node_clear(&n);
    allot_cluster_set_state(l->c, i,
                            st == ALLOT_SN_READY && loop_node_may_work(l, i, name)
                                ? ALLOT_NODE_READY
                                : ALLOT_NODE_DRAINING);
    LOG_INFO("loop", "node %s: its GPUs are healthy again; fence lifted", name);
}

/* True when one of job j's tasks is on node i. */
static bool job_on_node(const struct allot_job *j, int i)
{
    if (j->state != ALLOT_JOB_RUNNING && j->state != ALLOT_JOB_STOPPING)
        return false;
    for (int k = 0; k < j->spec.n_tasks; k++)
        if (j->pl[k].node == i)
            return true;
    return false;
}

int loop_requeue_stored(struct allot_store *st, int64_t sid, const char *why, int64_t now)
{
    struct allot_store_job j = {0};
    struct allot_store_event ev = {
        .job_id = sid, .time = now, .kind = "requeued", .detail = (char *)why};
    int rc = allot_store_job_get(st, sid, &j);

    /* once only: a job already pending was requeued by another path in
     * the meantime (its agent's fenced report, then its node's lease) */
    if (rc == 0 && !allot_store_job_state_terminal(j.state) && j.state != ALLOT_SJ_PENDING) {
        j.state = ALLOT_SJ_PENDING;
        allot_free(j.placement);
        j.placement = NULL;
        allot_free(j.pending_reason);
        j.pending_reason = allot_strdup(why);
        rc = allot_store_job_update(st, &j);
        if (!rc)
            rc = allot_store_event_add(st, &ev, NULL);
    }
    allot_store_job_clear(&j);
    return rc == ALLOT_ENOENT ? 0 : rc;
}

static bool lease_over(struct loop *l, int i, int64_t now)
{
    return now > l->expiry[i] && allot_cluster_node(l->c, i)->state != ALLOT_NODE_LOST;
}

/* Group-commit write: every node past its lease and the jobs placed on
 * it become lost. Reads the loop's state only (the loop thread waits). */
static int lost_fn(struct allot_store *st, void *arg)
{
    struct loop_write *w = arg;
    struct loop *l = w->l;
    int rc = 0;

    for (int i = 0; i < allot_cluster_node_count(l->c) && !rc; i++) {
        const char *name = allot_cluster_node(l->c, i)->name;
        char why[160];

        if (!lease_over(l, i, w->now))
            continue;
        allot_fmt(why, sizeof(why), "node %s lost: no heartbeat within its lease", name);
        rc = node_lost_state(st, name);
        for (size_t k = 0; k < l->n_live && !rc; k++) {
            if (!job_on_node(allot_queue_job(l->q, l->live[k].qid), i))
                continue;
            rc = l->live[k].requeue
                     ? loop_requeue_stored(st, l->live[k].sid, why, w->now)
                     : loop_end_job(st, l->live[k].sid, ALLOT_SJ_LOST, "lost", why, w->now);
        }
    }
    return rc;
}

/* Marks every node whose lease ran out as lost, with its jobs: first in
 * the store, then in the core. */
static void requeue_node(struct loop *l, int i, int64_t now);

void loop_check_leases(struct loop *l, int64_t now)
{
    struct loop_write w = {.l = l, .now = now};
    int n = allot_cluster_node_count(l->c);
    bool any = false;

    for (int i = 0; i < n && !any; i++)
        any = lease_over(l, i, now);
    if (!any)
        return;
    if (srv_write(l->srv, lost_fn, &w) < 0) {
        LOG_ERROR("loop", "cannot record lost nodes; retrying next cycle");
        return;
    }
    for (int i = 0; i < n; i++) {
        if (!lease_over(l, i, now))
            continue;
        const char *name = allot_cluster_node(l->c, i)->name;
        LOG_WARN("loop", "node %s lost: no heartbeat within its lease", name);
        /* what its agent last said of its GPUs is no longer known: GET
         * /v1/nodes shows no health and the metrics no GPU figures until
         * its next heartbeat (where its logs are read from stays) */
        pthread_mutex_lock(&l->srv->agents_lock);
        json_t *e = json_object_get(l->srv->agents, name);
        json_object_del(e, "health");
        json_object_del(e, "gpus");
        pthread_mutex_unlock(&l->srv->agents_lock);
        requeue_node(l, i, now);
        allot_cluster_set_state(l->c, i, ALLOT_NODE_LOST);
        loop_linger_forget_node(l, name); /* its agent fenced its tasks */
    }
}

/* Takes live job k out of the core: back to pending as a new core job of
 * the same stored job, keeping its place, when it may be requeued; else it
 * is dropped (its end is stored: a job that runs once never runs again). */
static void requeue_live(struct loop *l, size_t k, int64_t now)
{
    struct live *e = &l->live[k];
    char *spec;

    allot_queue_cancel(l->q, e->qid, now);
    spec = e->requeue ? strdup(e->spec_text) : NULL;
    if (spec) {
        /* a new core job for the same stored one: pending again */
        struct allot_store_job sj = {.id = e->sid,
                                     .spec = spec,
                                     .state = ALLOT_SJ_PENDING,
                                     .submit_time = allot_queue_job(l->q, e->qid)->first_submit,
                                     .array_parent = e->parent,
                                     .array_index = e->index,
                                     .token_id = e->token_id,
                                     .start_time = e->wstart}; /* its next run starts later */
        size_t n;
        struct live *again;

        loop_drop_live(l, k);
        loop_submit_job(l, &sj, false);
        if ((again = loop_find_live(l, sj.id, &n)) != NULL)
            again->queued_at = now; /* waits from here (the core keeps its place) */
        free(spec);
    } else {
        loop_drop_live(l, k);
    }
}

/* Takes the jobs on node i out of the core (requeue_live). */
static void requeue_node(struct loop *l, int i, int64_t now)
{
    for (size_t k = l->n_live; k-- > 0;)
        if (job_on_node(allot_queue_job(l->q, l->live[k].qid), i))
            requeue_live(l, k, now);
}

/* Stored job `sid` evicted (why): back to pending, or, when it runs once
 * ("requeue": false), ended as cancelled: its user said a second run
 * would do harm. On a group-commit handle. */
static int evict_stored(struct allot_store *st, int64_t sid, bool requeue, const char *why,
                        int64_t now)
{
    char once[300];

    if (requeue)
        return loop_requeue_stored(st, sid, why, now);
    allot_fmt(once, sizeof(once), "%s; not run again (requeue: false)", why);
    return loop_end_job(st, sid, ALLOT_SJ_CANCELLED, "cancelled", once, now);
}

struct evict_write {
    struct loop *l;
    int node;
    int64_t now;
};

/* Group-commit write: every job on the node back to pending, with why. */
static int evict_fn(struct allot_store *st, void *arg)
{
    struct evict_write *w = arg;
    struct loop *l = w->l;
    char why[200];
    int rc = 0;

    allot_fmt(why, sizeof(why), "evicted: node %s is being drained",
              allot_cluster_node(l->c, w->node)->name);
    for (size_t k = 0; k < l->n_live && !rc; k++)
        if (job_on_node(allot_queue_job(l->q, l->live[k].qid), w->node))
            rc = evict_stored(st, l->live[k].sid, l->live[k].requeue, why, w->now);
    return rc;
}

/* An admin drained node `name` with eviction: its jobs go back to pending
 * (their agents stop them: they leave the node's desired state). */
void loop_evict_node(struct loop *l, const char *name)
{
    int i = allot_cluster_find_node(l->c, name);
    struct evict_write w = {.l = l, .node = i, .now = srv_now()};

    if (i < 0)
        return;
    if (srv_write(l->srv, evict_fn, &w) < 0) {
        LOG_ERROR("loop", "node %s: cannot record the eviction of its jobs", name);
        return;
    }
    LOG_INFO("loop", "node %s drained: its jobs are evicted and queue again", name);
    requeue_node(l, i, w.now);
}

struct evict_job_write {
    int64_t sid, now;
    const char *why;
    bool requeue;
};

static int evict_job_fn(struct allot_store *st, void *arg)
{
    struct evict_job_write *w = arg;

    return evict_stored(st, w->sid, w->requeue, w->why, w->now);
}

/* Sends running job `sid` back to the queue (its agent stops it), with why. */
void loop_evict_job(struct loop *l, int64_t sid, int64_t run, const char *why)
{
    size_t k;
    struct live *e = loop_find_live(l, sid, &k);
    struct evict_job_write w = {.sid = sid, .now = srv_now(), .why = why};
    const struct allot_job *qj = e ? allot_queue_job(l->q, e->qid) : NULL;

    /* a report of a run that already went back to the queue (a heartbeat
     * allotd read twice, one held while it was stopped) leaves the job's
     * new run alone */
    if (!qj || (qj->state != ALLOT_JOB_RUNNING && qj->state != ALLOT_JOB_STOPPING) ||
        (run && e->wstart != run))
        return;
    w.requeue = e->requeue;
    if (why && srv_write(l->srv, evict_job_fn, &w) < 0) {
        LOG_ERROR("loop", "job %lld: cannot record its eviction", (long long)sid);
        return;
    }
    LOG_INFO("loop", "job %lld evicted: %s", (long long)sid, why ? why : "requeued (stored)");
    requeue_live(l, k, w.now);
}

void loop_remove_node(struct loop *l, const char *name)
{
    int i = allot_cluster_find_node(l->c, name), rc;
    struct allot_store_node sn = {0};
    char err[256];

    if (i < 0)
        return;
    rc = srv_reader(l->srv) ? allot_store_node_get(srv_reader(l->srv), name, &sn) : ALLOT_EIO;
    if (rc == 0) {
        /* registered again since, its message perhaps handled first (and
         * ignored: the name was still the old node's): the new machine's
         * inventory, whichever came first */
        loop_change_node(l, name, sn.inventory, sn.state);
        allot_store_node_clear(&sn);
        return;
    }
    allot_store_node_clear(&sn);
    if (rc != ALLOT_ENOENT) { /* unreadable: kept */
        LOG_ERROR("loop",
                  "node %s: removed, but the store does not read (%s); its size "
                  "counts until allotd restarts",
                  name, allot_strerror(rc));
        return;
    }
    json_object_del(l->pending_inv, name);
    l->fenced[i] = false;
    if (allot_cluster_node(l->c, i)->state == ALLOT_NODE_READY)
        allot_cluster_set_state(l->c, i, ALLOT_NODE_DRAINING);
    if (node_take(l, i, name, "{}", err, sizeof(err)) < 0) {
        LOG_ERROR("loop", "node %s: removed, but its size still counts: %s", name, err);
        return;
    }
    allot_cluster_set_state(l->c, i, ALLOT_NODE_LOST);
    if (!l->removed)
        l->removed = json_object();
    json_object_set_new(l->removed, name, json_true());
    LOG_INFO("loop", "node %s removed", name);
}

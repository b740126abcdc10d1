/*
 * The scheduling loop of allotd (see loop.h).
 *
 * State owned by the loop thread alone: the core (cluster, tenants,
 * queue) and the live set, one entry per job the core holds that has not
 * ended, with what was last written to the store for it (state, run
 * count, pending reason hash). After each cycle the loop compares every
 * live job's core state with that record and writes only what changed,
 * in one store batch; decisions become job events. Finished jobs leave
 * the live set, so the loop's own memory follows the live jobs.
 *
 * Shared state: the message queue (l->mu, l->cv) and the published
 * desired state per node (l->dmu, a JSON object name -> task array) and
 * the metrics (l->dmu too).
 *
 * Held jobs (dependencies, array throttles) wait outside the core in the
 * gate (loop_gate.c); a pass of the gate runs before a cycle whenever a
 * job ended or was held.
 *
 * Restart: live jobs are rebuilt in submission order (loop_jobs.c). One
 * that was starting or running is adopted where it runs (allot_queue_adopt:
 * same node and GPUs, quota charged, its start time and last reported save
 * kept), so its agent keeps it running; one whose stored placement no
 * longer fits is queued again.
 */
#include "loop_int.h"

#include "jobspec.h"
#include "log.h"
#include "meter.h"
#include "tenants.h"

#include "allot/common.h"
#include "allot/queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t loop_hash_str(const char *s)
{
    return allot_fnv1a(ALLOT_FNV1A_INIT, s, s ? strlen(s) : 0);
}

/* ---- messages ---- */

static void msg_free(struct msg *m)
{
    allot_free(m->name);
    if (m->has_job)
        allot_store_job_clear(&m->job);
    allot_free(m);
}

static int post(struct loop *l, struct msg *m)
{
    pthread_mutex_lock(&l->mu);
    if (l->tail)
        l->tail->next = m;
    else
        l->head = m;
    l->tail = m;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

int loop_post(struct loop *l, int kind, int64_t id, const char *name)
{
    struct msg *m = allot_calloc(1, sizeof(*m));

    if (!m || (name && !(m->name = allot_strdup(name)))) {
        allot_free(m);
        LOG_ERROR("loop", "out of memory queueing a message");
        return ALLOT_ENOMEM;
    }
    m->kind = kind;
    m->id = id;
    return post(l, m);
}

/* A message about run `run` of job id, with text `why` (copied; may be NULL). */
static int post_run(struct loop *l, int kind, int64_t id, int64_t run, const char *why)
{
    struct msg *m = allot_calloc(1, sizeof(*m));

    if (!m || (why && !(m->name = allot_strdup(why)))) {
        allot_free(m);
        LOG_ERROR("loop", "out of memory queueing a message");
        return ALLOT_ENOMEM;
    }
    m->kind = kind;
    m->id = id;
    m->run = run;
    return post(l, m);
}

int loop_post_evict(struct loop *l, int64_t id, int64_t run, const char *why)
{
    return post_run(l, LOOP_JOB_EVICT, id, run, why);
}

int loop_post_checkpoint(struct loop *l, int64_t id, int64_t at)
{
    return post_run(l, LOOP_JOB_CHECKPOINT, id, at, NULL);
}

int loop_post_requeued(struct loop *l, int64_t id, int64_t run)
{
    return post_run(l, LOOP_JOB_EVICT, id, run, NULL);
}

int loop_post_signal(struct loop *l, int64_t id, int64_t run, int sig)
{
    struct msg *m = allot_calloc(1, sizeof(*m));

    if (!m)
        return ALLOT_ENOMEM;
    *m = (struct msg){.kind = LOOP_JOB_SIGNAL, .id = id, .run = run, .sig = sig};
    return post(l, m);
}

int loop_post_limit(struct loop *l, int64_t id)
{
    return loop_post(l, LOOP_JOB_LIMIT, id, NULL);
}

int loop_post_running(struct loop *l, int64_t id, int64_t at)
{
    return post_run(l, LOOP_JOB_RUNNING, id, at, NULL);
}

int loop_post_job(struct loop *l, const struct allot_store_job *j)
{
    struct msg *m = allot_calloc(1, sizeof(*m));

    if (!m)
        return loop_post(l, LOOP_JOB_SUBMITTED, j->id, NULL);
    m->kind = LOOP_JOB_SUBMITTED;
    m->id = j->id;
    m->job = (struct allot_store_job){.id = j->id,
                                      .tenant = allot_strdup(j->tenant ? j->tenant : ""),
                                      .name = allot_strdup(j->name ? j->name : ""),
                                      .token_id = j->token_id,
                                      .spec = allot_strdup(j->spec ? j->spec : "{}"),
                                      .state = j->state,
                                      .submit_time = j->submit_time,
                                      .array_parent = j->array_parent,
                                      .array_index = j->array_index,
                                      .held = j->held};
    m->has_job = true;
    if (!m->job.tenant || !m->job.name || !m->job.spec) {
        msg_free(m); /* the loop reads it from the store instead */
        return loop_post(l, LOOP_JOB_SUBMITTED, j->id, NULL);
    }
    return post(l, m);
}

/* ---- building the core ---- */

static bool conf_has_class(const struct sim_tenants_conf *conf, const char *name)
{
    for (int i = 0; i < conf->n_prio; i++)
        if (!strcmp(conf->prio[i].name, name))
            return true;
    return false;
}

/* True when a job in the core has priority class slot k. */
static bool class_in_use(const struct loop *l, int k)
{
    for (size_t i = 0; i < l->n_live; i++)
        if (allot_queue_job(l->q, l->live[i].qid)->spec.prio_class == k)
            return true;
    return false;
}

/* Puts class i of conf into the core: a known name is changed in place
 * (its jobs follow, like a Slurm QOS), a new one takes a free slot or the
 * slot of a deleted class that no job uses any more. */
static void apply_class(struct loop *l, const struct sim_tenants_conf *conf, int i)
{
    const struct sim_prio_conf *c = &conf->prio[i];
    int k = -1;

    for (int j = 0; j < l->n_prio && k < 0; j++)
        if (!strcmp(l->prio[j].name, c->name))
            k = j;
    if (k >= 0 && l->prio[k].value == c->value && l->prio[k].preemptible == c->preemptible)
        return;
    if (k < 0 && l->n_prio < ALLOT_PRIO_CLASSES) {
        k = allot_queue_add_prio_class(l->q, c->name, c->value, c->preemptible);
        if (k >= 0)
            l->n_prio++;
    } else {
        for (int j = 0; j < l->n_prio && k < 0; j++)
            if (!conf_has_class(conf, l->prio[j].name) && !class_in_use(l, j))
                k = j; /* deleted and unused: reused */
        if (k >= 0 && allot_queue_set_prio_class(l->q, k, c->name, c->value, c->preemptible) < 0)
            k = -1;
    }
    if (k < 0) {
        LOG_WARN("loop", "priority class %s not applied: %d classes in use", c->name,
                 ALLOT_PRIO_CLASSES);
        return;
    }
    allot_strlcpy(l->prio[k].name, c->name, sizeof(l->prio[k].name));
    l->prio[k].value = c->value;
    l->prio[k].preemptible = c->preemptible;
}

/* Reads the tenant tree and classes from the store into the core. */
static int load_tenants(struct loop *l)
{
    struct sim_tenants_conf conf = {0};
    char err[512];
    json_t *doc;
    int rc;

    struct allot_store *rd = srv_reader(l->srv);

    doc = rd ? tenants_doc_from_store(rd) : NULL;
    if (!doc)
        return ALLOT_EIO;
    if (!json_array_size(json_object_get(doc, "tenants"))) {
        json_decref(doc);
        return 0; /* nothing applied yet */
    }
    rc = tenants_doc_parse(doc, l->srv->cat, &conf, err, sizeof(err));
    lnet_tenants(l, doc); /* the tenants' network quotas and egress */
    json_decref(doc);
    /* a tenant that spent its budget (hold_borrowed) borrows nothing more */
    for (size_t i = 0; rc == 0 && i < conf.n; i++)
        if (meter_borrow_held(conf.v[i].path))
            for (int res = 0; res < ALLOT_RES_MAX; res++)
                if (conf.v[i].has_quota[res])
                    conf.v[i].quota[res].borrow_limit = 0;
    /* a tenant whose nominal changed: which of its running jobs are
     * borrowed is counted again, so that a new guarantee is kept (by
     * reclaim); the others keep the flags their jobs started with */
    bool *only = NULL, any = false;
    if (rc == 0)
        rc = tenants_apply_noting(l->t, &conf, l->srv->cat, &only, &any, err, sizeof(err));
    int n = rc == 0 && (any || !only) ? allot_queue_recount_borrowed(l->q, only) : 0;
    if (n > 0)
        LOG_INFO("loop",
                 "quotas changed: %d running jobs count as borrowed or inside their "
                 "tenant's nominal anew",
                 n);
    allot_free(only);
    if (rc == 0) {
        int nt = allot_tenants_count(l->t);
        bool *v = allot_calloc((size_t)nt + 1, sizeof(*v));

        for (int i = 1; v && i < nt; i++)
            v[i] = tenants_listed(&conf, allot_tenants_get(l->t, i)->path);
        if (v) { /* out of memory: the gauges keep the last list */
            allot_free(l->t_listed);
            l->t_listed = v;
            l->n_t_listed = nt;
        }
    }
    for (int i = 0; rc == 0 && i < conf.n_prio; i++)
        apply_class(l, &conf, i);
    if (rc < 0)
        LOG_ERROR("loop", "tenants not applied: %s", err);
    sim_tenants_conf_free(&conf);
    return rc;
}

/* Ends stored job `sid` in `state` with `why` as its reason and an event
 * `kind` (on a group-commit handle). A job already ended stays as it is. */
int loop_end_job(struct allot_store *st, int64_t sid, int state, const char *kind, const char *why,
                 int64_t now)
{
    struct allot_store_job j = {0};
    struct allot_store_event ev = {
        .job_id = sid, .time = now, .kind = (char *)kind, .detail = (char *)why};
    int rc = allot_store_job_get(st, sid, &j);

    if (rc == 0 && !allot_store_job_state_terminal(j.state)) {
        j.state = state;
        j.end_time = now;
        allot_free(j.pending_reason);
        j.pending_reason = allot_strdup(why);
        rc = allot_store_job_update(st, &j);
        if (!rc)
            rc = allot_store_event_add(st, &ev, NULL);
    }
    allot_store_job_clear(&j);
    return rc == ALLOT_ENOENT ? 0 : rc;
}

struct end_write {
    int64_t sid;
    int state;
    const char *kind, *why;
};

static int end_fn(struct allot_store *st, void *arg)
{
    struct end_write *w = arg;

    return loop_end_job(st, w->sid, w->state, w->kind, w->why, srv_now());
}

void loop_end_stored(struct loop *l, int64_t sid, int state, const char *kind, const char *why)
{
    struct end_write w = {.sid = sid, .state = state, .kind = kind, .why = why};

    if (srv_write(l->srv, end_fn, &w) < 0)
        LOG_ERROR("loop", "job %lld: cannot record its end (%s)", (long long)sid, kind);
    l->hold_dirty = true;
}

/* Marks a job the core refuses as failed. */
void loop_reject(struct loop *l, int64_t sid, const char *why)
{
    loop_end_stored(l, sid, ALLOT_SJ_FAILED, "rejected", why);
    LOG_WARN("loop", "job %lld rejected: %s", (long long)sid, why);
}

static int rebuild(struct loop *l)
{
    struct allot_store_node *nodes = NULL;
    struct allot_store_job_filter f = {.states = ALLOT_SJ_LIVE_MASK, .limit = 1000};
    struct allot_store_job_page pg = {0};
    size_t nn = 0;
    int rc;

    struct allot_store *rd = srv_reader(l->srv);

    if (!rd)
        return ALLOT_EIO;
    rc = allot_store_node_list(rd, &nodes, &nn);
    if (rc < 0)
        return rc;
    /* cordoned and draining nodes are ready while the jobs that run there
     * are adopted (the core places nothing on them, adopted jobs included);
     * their states follow before the first cycle. A lost node has no live
     * jobs: they were requeued or ended when it was lost. */
    for (size_t i = 0; i < nn; i++) {
        loop_add_node(l, nodes[i].name, nodes[i].inventory,
                      nodes[i].state == ALLOT_SN_LOST ? ALLOT_SN_LOST : ALLOT_SN_READY);
        /* a full lease from now, or the one the node's agent was last
         * granted where longer (allotd started again, or a standby took
         * over, with a shorter --lease): its agent fences its tasks by that
         * one, and a node lost before then would have its jobs run twice */
        int k = allot_cluster_find_node(l->c, nodes[i].name);
        if (k >= 0 && nodes[i].lease_expiry > l->expiry[k])
            l->expiry[k] = nodes[i].lease_expiry;
    }
    rc = load_tenants(l);
    if (rc < 0 && rc != ALLOT_EINVAL) {
        allot_store_nodes_free(nodes, nn);
        return rc;
    }
    /* the running jobs' last saves in one query, not one a job (adopt_saved) */
    l->saves_read = allot_store_event_last_running(rd, "checkpoint", &l->saves, &l->n_saves) == 0 &&
                    allot_store_event_last_running(rd, "preempted", &l->stops, &l->n_stops) == 0 &&
                    allot_store_event_last_running(rd, "running", &l->runs_ev, &l->n_runs_ev) == 0;
    l->rebuilding = true;
    do {
        rc = allot_store_job_list(rd, &f, &pg);
        for (size_t i = 0; i < pg.n; i++)
            loop_submit_job(l, &pg.jobs[i], true);
        f.cursor = pg.next_cursor;
        allot_store_job_page_free(&pg);
    } while (rc == 0 && f.cursor);
    l->rebuilding = false;
    allot_store_events_free(l->saves, l->n_saves);
    allot_store_events_free(l->stops, l->n_stops);
    allot_store_events_free(l->runs_ev, l->n_runs_ev);
    l->saves = l->stops = l->runs_ev = NULL;
    l->n_saves = l->n_stops = l->n_runs_ev = 0;
    l->saves_read = false;
    for (size_t i = 0; i < nn; i++) {
        int k = allot_cluster_find_node(l->c, nodes[i].name);
        if (k >= 0 && nodes[i].state != ALLOT_SN_READY)
            allot_cluster_set_state(
                l->c, k, nodes[i].state == ALLOT_SN_LOST ? ALLOT_NODE_LOST : ALLOT_NODE_DRAINING);
    }
    allot_store_nodes_free(nodes, nn);
    if (rc < 0)
        return rc;
    LOG_INFO("loop", "rebuilt: %d nodes, %zu live jobs", allot_cluster_node_count(l->c), l->n_live);
    return 0;
}

/* ---- leases ---- */

/* ---- handling messages ---- */

/* Applies message m. Returns true when it may change what a cycle decides
 * (a heartbeat of a node that was not lost does not). */
static bool handle(struct loop *l, struct msg *m)
{
    struct allot_store_job j = {0};
    struct allot_store_node n = {0};
    struct live *e;
    size_t idx;
    int rc;

    switch (m->kind) {
    case LOOP_JOB_SUBMITTED:
        /* a job newer than every one the loop holds cannot be live yet: no
         * scan; the job itself came with the message (no store read) */
        if (m->id <= l->max_sid && (loop_find_live(l, m->id, &idx) || gate_holds(l, m->id)))
            break;
        if (m->has_job) {
            loop_submit_job(l, &m->job, true);
            break;
        }
        rc = srv_reader(l->srv) ? allot_store_job_get(srv_reader(l->srv), m->id, &j) : ALLOT_EIO;
        if (rc == 0 && !allot_store_job_state_terminal(j.state))
            loop_submit_job(l, &j, true);
        allot_store_job_clear(&j);
        break;
    case LOOP_JOB_CANCELLED:
    case LOOP_JOB_FINISHED:
        e = loop_find_live(l, m->id, &idx);
        if (!e) {
            for (size_t i = 0; i < l->n_held; i++)
                if (l->held[i].sid == m->id) {
                    gate_unhold(l, i);
                    break;
                }
            break;
        }
        /* a job reported done while the core requeued it ends as cancelled */
        if (m->kind == LOOP_JOB_CANCELLED ||
            allot_queue_job(l->q, e->qid)->state == ALLOT_JOB_PENDING)
            rc = allot_queue_cancel(l->q, e->qid, srv_now());
        else
            rc = allot_queue_finish(l->q, e->qid, srv_now());
        if (rc < 0 && rc != ALLOT_ESTATE)
            LOG_ERROR("loop", "job %lld: %s", (long long)m->id, allot_strerror(rc));
        loop_drop_live(l, idx);
        break;
    case LOOP_NODE_ADDED:
    case LOOP_NODE_CHANGED:
        rc = srv_reader(l->srv) ? allot_store_node_get(srv_reader(l->srv), m->name, &n) : ALLOT_EIO;
        if (rc == 0 && m->kind == LOOP_NODE_ADDED)
            loop_add_node(l, n.name, n.inventory, n.state);
        else if (rc == 0)
            loop_change_node(l, n.name, n.inventory, n.state);
        allot_store_node_clear(&n);
        atomic_fetch_sub(&l->srv->nodes_adding, 1); /* counted now (or never will be) */
        break;
    case LOOP_NODE_REMOVED:
        loop_remove_node(l, m->name);
        break;
    case LOOP_LINGER_GONE: /* the cycle's desired state shows the next run */
        break;
    case LOOP_JOB_STOPPED: /* a preempted job's processes are gone: its grace ends */
        e = loop_find_live(l, m->id, &idx);
        if (e && allot_queue_stopped(l->q, e->qid, srv_now()) == 0)
            LOG_DEBUG("loop", "job %lld: its processes are gone before its grace period ended",
                      (long long)m->id);
        break;
    case LOOP_TENANTS:
        load_tenants(l);
        break;
    case LOOP_NODE_SEEN: {
        int i = allot_cluster_find_node(l->c, m->name);
        bool was_lost = i >= 0 && allot_cluster_node(l->c, i)->state == ALLOT_NODE_LOST;

        loop_node_seen(l, m->name, m->id);
        return was_lost;
    }
    case LOOP_NODE_EVICT:
        loop_evict_node(l, m->name);
        break;
    case LOOP_JOB_EVICT: /* no why: the requeue is stored already (loop_post_requeued) */
        loop_evict_job(l, m->id, m->run, m->name);
        break;
    case LOOP_JOB_HOLD:
        gate_user_hold(l, m->id);
        break;
    case LOOP_JOB_RELEASE:
        gate_user_release(l, m->id);
        break;
    case LOOP_JOB_PRIORITY:
        gate_user_changed(l, m->id);
        break;
    case LOOP_JOB_SIGNAL:
        loop_job_signal(l, m->id, m->run, m->sig);
        break;
    case LOOP_JOB_LIMIT:
        loop_job_limit(l, m->id);
        break;
    case LOOP_JOB_CHECKPOINT:
        /* a save of an earlier run (requeued since) or of a job that
         * ended meanwhile changes nothing */
        e = loop_find_live(l, m->id, &idx);
        rc = e ? allot_queue_checkpointed(l->q, e->qid, m->run, srv_now()) : ALLOT_ENOENT;
        if (rc)
            LOG_DEBUG("loop", "job %lld: checkpoint at %lld not counted: %s", (long long)m->id,
                      (long long)m->run, allot_strerror(rc));
        break;
    case LOOP_JOB_RUNNING:
        /* its time limit counts from now on (a report of a run that ended
         * meanwhile finds no running job; one of an earlier run than the
         * current counts from the current's start at the earliest) */
        e = loop_find_live(l, m->id, &idx);
        if (e)
            allot_queue_running(l->q, e->qid, m->run);
        break;
    case LOOP_NODE_HEALTH:
        loop_node_health(l, m->name ? m->name : "", m->id != 0);
        break;
    case LOOP_NODE_STATE: {
        int i = allot_cluster_find_node(l->c, m->name);

        /* cordoned and draining nodes keep their jobs and take no new ones;
         * nor does a node fenced for an unhealthy GPU */
        if (i >= 0 && allot_cluster_node(l->c, i)->state != ALLOT_NODE_LOST)
            allot_cluster_set_state(l->c, i,
                                    m->id == ALLOT_SN_READY && loop_node_may_work(l, i, m->name)
                                        ? ALLOT_NODE_READY
                                        : ALLOT_NODE_DRAINING);
        break;
    }
    }
    return true;
}

/* ---- a cycle ---- */

static void on_decision(int kind, const struct allot_job *job, const char *why, void *ud)
{
    struct loop *l = ud;

    if (allot_grow((void **)&l->decs, &l->cap_decs, l->n_decs + 1, sizeof(*l->decs)) < 0)
        return; /* events are best effort; states are diffed after the cycle */
    if (kind == ALLOT_DEC_START) {
        double w = (double)(srv_now() - loop_queued_since(l, job));

        pthread_mutex_lock(&l->dmu);
        l->waits++;
        l->wait_sum += w;
        for (int b = 0; b < N_WAIT_BUCKETS; b++)
            if (w <= loop_wait_buckets[b])
                l->wait_le[b]++;
        pthread_mutex_unlock(&l->dmu);
    } else if (kind == ALLOT_DEC_PREEMPT) {
        pthread_mutex_lock(&l->dmu);
        l->preempts++;
        l->moves += job->moving;
        pthread_mutex_unlock(&l->dmu);
    }
    l->decs[l->n_decs].kind = kind;
    l->decs[l->n_decs].qid = job->id;
    /* a victim without a grace period is stopped as it is preempted */
    l->decs[l->n_decs].at_once = kind == ALLOT_DEC_PREEMPT && job->state != ALLOT_JOB_STOPPING;
    allot_strlcpy(l->decs[l->n_decs].why, why ? why : "", sizeof(l->decs[0].why));
    l->n_decs++;
}

static json_t *placement_json(struct loop *l, const struct allot_job *qj)
{
    const struct allot_catalog *cat = l->srv->cat;
    json_t *tasks = json_array();

    for (int k = 0; k < qj->spec.n_tasks; k++) {
        const struct allot_placement *p = &qj->pl[k];
        const struct allot_node *n = allot_cluster_node(l->c, p->node);
        json_t *g = json_array();

        for (int b = 0; b < ALLOT_MAX_GPUS; b++)
            if (p->gpu_mask & (1u << b))
                json_array_append_new(g, json_integer(b));
        json_t *o =
            json_pack("{s:i,s:s,s:o,s:i,s:I,s:I,s:I}", "task", k, "node", n->name, "gpus", g,
                      "gpu_milli", p->gpu_milli, "gpu_memory", (json_int_t)p->gpu_mem_mib,
                      "cpu_milli", (json_int_t)p->cpu_milli, "memory", (json_int_t)p->mem_mib);
        if (p->rdma_vfs > 0) /* how many; the node's agent picks which */
            json_object_set_new(o, "rdma_vfs", json_integer(p->rdma_vfs));
        if (n->model >= 0)
            json_object_set_new(o, "model", json_string(cat->models[n->model].name));
        if (p->mig_profile >= 0 && n->model >= 0) {
            json_object_set_new(o, "mig_profile",
                                json_string(cat->models[n->model].profiles[p->mig_profile].name));
            json_object_set_new(o, "mig_start", json_integer(p->mig_start));
        }
        json_array_append_new(tasks, o);
    }
    /* "borrowed": started above its tenant's nominal quota (metering bills it so) */
    return json_pack("{s:o,s:b}", "tasks", tasks, "borrowed", qj->borrowed);
}

static const char *dec_event(int kind)
{
    return kind == ALLOT_DEC_START ? "placed" : kind == ALLOT_DEC_PREEMPT ? "preempted" : "stopped";
}

/* Pending jobs whose reason is recomputed per cycle besides the new ones:
 * a reason scans the nodes, so computing every waiting job's in every
 * cycle would cost O(pending x nodes) per change. A waiting job's reason is
 * at most ceil(pending / REASONS_PER_CYCLE) cycles old. */
#define REASONS_PER_CYCLE 64

static void changes_clear(struct loop *l)
{
    for (size_t i = 0; i < l->n_chg; i++) {
        allot_free(l->chg[i].reason);
        free(l->chg[i].placement);
    }
    l->n_chg = 0;
}

/* The tenant at path, or the nearest ancestor, whose spent budget holds its
 * borrowing (hold_borrowed), into who; false when none does. */
static bool budget_holder(const char *path, char *who, size_t len)
{
    allot_strlcpy(who, path, len);
    for (;;) {
        if (*who && meter_borrow_held(who))
            return true;
        char *slash = strrchr(who, '/');
        if (!slash)
            return false;
        *slash = '\0';
    }
}

/* Works out, on the loop thread, what the store needs after this cycle:
 * new states, placements (as JSON text) and pending reasons of live jobs,
 * so that the group-commit write (changes_fn) only writes. Returns 0 or
 * ALLOT_ENOMEM (the changes found so far are kept; the rest next cycle). */
static int changes_prepare(struct loop *l)
{
    size_t n = l->n_live, window = n < REASONS_PER_CYCLE ? n : REASONS_PER_CYCLE;
    bool nodes = allot_cluster_node_count(l->c) > 0;

    changes_clear(l);
    for (size_t i = 0; i < n; i++) {
        struct live *e = &l->live[i];
        const struct allot_job *qj = allot_queue_job(l->q, e->qid);
        struct change c = {.i = i, .want = e->wstate};
        const char *reason = NULL;
        bool fresh = qj->runs != e->wruns;

        if (qj->state == ALLOT_JOB_PENDING) {
            c.want = ALLOT_SJ_PENDING;
            /* new in pending, or its turn in the round robin */
            if (!fresh && e->wstate == ALLOT_SJ_PENDING &&
                (i + n - l->reason_cursor % n) % n >= window)
                continue;
            reason = nodes ? allot_queue_reason(l->q, e->qid) : "no node is registered yet";
            /* a tenant whose budget holds its borrowing says so */
            char who[256];
            if (reason && qj->spec.tenant > 0 &&
                budget_holder(allot_tenants_get(l->t, qj->spec.tenant)->path, who, sizeof(who))) {
                allot_fmt(l->reason_buf, sizeof(l->reason_buf),
                          "%s (the budget of %s is spent this month: hold_borrowed)", reason, who);
                reason = l->reason_buf;
            }
        } else if (qj->state == ALLOT_JOB_DONE) {
            /* ended by the core: its runtime limit (failed), or preempted
             * while it runs once (cancelled: it did nothing wrong) */
            int k = qj->why.kind;
            c.want = k == ALLOT_WHY_PREEMPTED || k == ALLOT_WHY_GRACE_OVER || k == ALLOT_WHY_EVICTED
                         ? ALLOT_SJ_CANCELLED
                         : ALLOT_SJ_FAILED;
            reason = allot_queue_reason(l->q, e->qid);
        } else if (fresh) {
            c.want = ALLOT_SJ_STARTING;
            c.start = true;
        } else if (qj->state == ALLOT_JOB_STOPPING) {
            reason = allot_queue_reason(l->q, e->qid); /* preempted, in its grace period */
            c.reason_only = true;
        }
        c.reason_hash = loop_hash_str(reason);
        if (c.want == e->wstate && c.reason_hash == e->wreason && !fresh)
            continue;
        if (allot_grow((void **)&l->chg, &l->cap_chg, l->n_chg + 1, sizeof(*l->chg)) < 0)
            return ALLOT_ENOMEM;
        if (reason && !(c.reason = allot_strdup(reason)))
            return ALLOT_ENOMEM;
        if (c.start) {
            json_t *pl = placement_json(l, qj);
            const char *tp =
                qj->spec.tenant >= 0 ? allot_tenants_get(l->t, qj->spec.tenant)->path : "";
            char why[256] = "waiting for an address in its tenant's network (out of memory)";

            /* its tasks' addresses in the tenant network, stored with the
             * start; none left: it does not start (never outside its
             * network) but waits at the gate until its tenant has room */
            if (pl && lnet_on(l) && lnet_assign(l, e, tp, pl) < 0) {
                json_decref(pl);
                pl = NULL;
                lnet_room(l, tp, qj->spec.n_tasks, why, sizeof(why));
                allot_free(c.reason);
                if (!(c.reason = allot_strdup(why)))
                    return ALLOT_ENOMEM;
                c.reason_hash = loop_hash_str(why);
                c.want = ALLOT_SJ_PENDING;
                c.start = false;
                e->net_wait = true;
            } else {
                c.placement = pl ? json_dumps(pl, JSON_COMPACT) : NULL;
                json_decref(pl);
                if (!c.placement) {
                    allot_free(c.reason);
                    return ALLOT_ENOMEM;
                }
            }
        }
        c.runs = qj->runs;
        l->chg[l->n_chg++] = c;
    }
    l->reason_cursor = n ? (l->reason_cursor % n + window) % n : 0;
    return 0;
}

/* The stored start of a job's new run: now, and always after its last
 * run's, so that the start names the run (the agents' "run"). */
static int64_t run_start(int64_t last, int64_t now)
{
    return now > last ? now : last + 1;
}

/* Group-commit write: the cycle's decisions as events, and the changes
 * changes_prepare found, written as they are (a job cancelled or ended
 * meanwhile is left alone: the store refuses to change an ended job). Runs
 * while the loop thread waits for it, so it may update the live records. */
static int changes_fn(struct allot_store *st, void *arg)
{
    struct loop_write *w = arg;
    struct loop *l = w->l;
    int64_t now = w->now;
    int nrc = lnet_write(st, l); /* tenant networks cut for this cycle's starts */

    if (nrc)
        return nrc;
    for (size_t k = 0; k < l->n_chg; k++) {
        const struct change *c = &l->chg[k];
        struct live *e = &l->live[c->i];
        struct allot_store_job j = {.id = e->sid,
                                    .state = c->want,
                                    .placement = c->want == ALLOT_SJ_PENDING ? NULL
                                                 : c->placement              ? c->placement
                                                                             : e->wplacement,
                                    .pending_reason = c->reason,
                                    .start_time = c->start ? run_start(e->wstart, now) : e->wstart,
                                    .end_time = allot_store_job_state_terminal(c->want) ? now : 0};
        struct allot_store_job cur = {0};
        int rc;

        if (c->reason_only) { /* the stored job as it is, with the new reason */
            rc = allot_store_job_get(st, e->sid, &cur);
            if (rc == 0 && !allot_store_job_state_terminal(cur.state)) {
                allot_free(cur.pending_reason);
                cur.pending_reason = c->reason ? allot_strdup(c->reason) : NULL;
                rc = c->reason && !cur.pending_reason ? ALLOT_ENOMEM
                                                      : allot_store_job_update(st, &cur);
            }
            allot_store_job_clear(&cur);
            if (rc == 0)
                e->wreason = c->reason_hash;
            else if (rc != ALLOT_ESTATE && rc != ALLOT_ENOENT)
                return rc;
            continue;
        }
        rc = allot_store_job_update(st, &j);
        l->chg[k].ended = rc == 0 && allot_store_job_state_terminal(c->want);
        if (rc == 0) {
            e->wstate = c->want;
            e->wruns = c->runs;
            e->wreason = c->reason_hash;
            e->wstart = j.start_time;
            if (c->placement) {
                free(e->wplacement);
                e->wplacement = l->chg[k].placement;
                l->chg[k].placement = NULL; /* kept by the live record */
            }
        } else if (rc == ALLOT_ESTATE && c->start) {
            e->start_refused = true; /* held (or ended) meanwhile: the loop looks */
        } else if ((rc == ALLOT_ESTATE || rc == ALLOT_ENOENT) &&
                   allot_store_job_state_terminal(c->want)) {
            e->wstate = c->want; /* it ended meanwhile: nothing more to write */
        } else if (rc != ALLOT_ESTATE && rc != ALLOT_ENOENT) {
            return rc;
        }
    }
    /* the decisions' events, after the starts: a start the store refused
     * (the job was held) placed nothing */
    for (size_t d = 0; d < l->n_decs; d++) {
        /* every core job came through loop_submit_job, which reserved its id */
        int32_t i =
            ALLOT_ALWAYS((size_t)l->decs[d].qid < l->cap_live_at) ? l->live_at[l->decs[d].qid] : -1;
        struct allot_store_event ev = {
            .time = now, .kind = (char *)dec_event(l->decs[d].kind), .detail = l->decs[d].why};
        if (i < 0 || (l->decs[d].kind == ALLOT_DEC_START &&
                      (l->live[i].start_refused || l->live[i].net_wait)))
            continue;
        ev.job_id = l->live[i].sid;
        allot_store_event_add(st, &ev, NULL);
        if (l->decs[d].at_once) { /* its trail says it stopped, as a grace's end does */
            ev.kind = "stopped";
            ev.detail = "stopped at once: no grace period in the queue (no victim of this "
                        "preemption checkpoints, or --preempt-grace 0s); its agent gives its "
                        "processes --grace to exit";
            allot_store_event_add(st, &ev, NULL);
        }
    }
    /* a job the core ended ends its trail as one its agent ended does:
     * failed (its time limit) or cancelled (preempted, it runs once) */
    for (size_t k = 0; k < l->n_chg; k++) {
        const struct change *c = &l->chg[k];
        struct allot_store_event ev = {.job_id = l->live[c->i].sid,
                                       .time = now,
                                       .kind = (char *)allot_store_job_state_name(c->want),
                                       .detail = c->reason};
        int rc = c->ended ? allot_store_event_add(st, &ev, NULL) : 0;
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Jobs whose start the store refused in this cycle's write: a user held
 * them between the cycle's decision and its write. They go to the gate
 * (gate_user_hold reads the store: a job released meanwhile stays and
 * starts in a later cycle), so the core does not keep their GPUs. */
static void refused_to_gate(struct loop *l)
{
    int64_t sids[64], *nets = NULL;
    size_t n = 0, nn = 0, waiting = 0;

    for (size_t i = 0; i < l->n_live; i++)
        waiting += l->live[i].net_wait;
    /* a list only when some job waits for a network address (most cycles none) */
    if (waiting)
        nets = allot_malloc(waiting * sizeof(*nets));

    for (size_t i = 0; i < l->n_live; i++) {
        if (l->live[i].start_refused) {
            l->live[i].start_refused = false;
            if (n < sizeof(sids) / sizeof(sids[0]))
                sids[n++] = l->live[i].sid; /* more: refused again next cycle */
        }
        /* every one (stored pending, its core job running: it must leave
         * the core now); out of memory: its next run is placed again */
        if (l->live[i].net_wait) {
            l->live[i].net_wait = false;
            if (nets)
                nets[nn++] = l->live[i].sid;
            else
                l->live[i].wruns = -1;
        }
    }
    for (size_t k = 0; k < n; k++)
        gate_user_hold(l, sids[k]);
    for (size_t k = 0; k < nn; k++)
        gate_net_wait(l, nets[k]);
    allot_free(nets);
}

static void publish(struct loop *l, double secs, int cut)
{
    json_t *d = json_object();
    int64_t pend = 0, run = 0;
    char *gauges = loop_gauges_text(l);
    struct fresh_run *fr = NULL;   /* entries whose run is shown for the first time */
    struct linger_drop *dr = NULL; /* runs shown no more */
    size_t n_fr = 0, cap_fr = 0, n_dr = 0, cap_dr = 0;
    json_t *waits = NULL;

    for (size_t i = 0; i < l->n_live; i++) {
        const struct allot_job *qj = allot_queue_job(l->q, l->live[i].qid);
        bool placed = qj->state != ALLOT_JOB_PENDING && qj->state != ALLOT_JOB_DONE;
        /* which run of the job this is (its stored start time, unique per
         * job): an agent starts a run once, and never an older one again;
         * 0 while the start is not stored yet (the agent waits) */
        int64_t wrun = placed && l->live[i].wruns == qj->runs ? l->live[i].wstart : 0;

        /* its last run not noted (out of memory): its new one waits a cycle */
        if (loop_linger_seen(l, i, wrun, &dr, &n_dr, &cap_dr) < 0)
            wrun = 0;
        if (!placed) {
            pend += qj->state == ALLOT_JOB_PENDING;
            json_decref(l->live[i].spec);
            l->live[i].spec = NULL;
            lnet_release(l, &l->live[i]); /* not running: its addresses go back */
            allot_free(l->live[i].job_token);
            l->live[i].job_token = NULL;
            json_decref(l->live[i].task_hosts);
            l->live[i].task_hosts = NULL, l->live[i].hosts_run = 0;
            json_decref(l->live[i].signals); /* they were for a run that ended */
            l->live[i].signals = NULL;
            continue;
        }
        run++;
        if (!l->live[i].spec)
            l->live[i].spec = jobspec_for_node(json_loads(l->live[i].spec_text, 0, NULL));
        json_t *pl = placement_json(l, qj), *x;
        size_t k;

        /* where its tasks run (NULL: one task), made once the run is stored */
        if (wrun && l->live[i].hosts_run != wrun) {
            json_decref(l->live[i].task_hosts);
            l->live[i].task_hosts = lnet_task_hosts(pl, l->live[i].wplacement);
            l->live[i].hosts_run = wrun;
        }
        json_t *hosts = wrun ? l->live[i].task_hosts : NULL;
        json_array_foreach(json_object_get(pl, "tasks"), k, x)
        {
            const char *node = json_string_value(json_object_get(x, "node"));
            json_t *arr = json_object_get(d, node);

            if (!arr) {
                arr = json_array();
                json_object_set_new(d, node, arr);
            }
            json_object_set_new(x, "job", json_integer(l->live[i].sid));
            if (l->live[i].parent) {
                json_object_set_new(x, "array_job_id", json_integer(l->live[i].parent));
                json_object_set_new(x, "array_index", json_integer(l->live[i].index));
            }
            json_object_set(x, "spec", l->live[i].spec);
            if (hosts) /* shared by its tasks' entries: where the others run */
                json_object_set(x, "task_hosts", hosts);
            if (wrun && l->live[i].signals && l->live[i].signals_run == wrun)
                json_object_set(x, "signals", l->live[i].signals); /* allot signal */
            json_object_set_new(x, "user", json_string(loop_token_name(l, l->live[i].token_id)));
            json_object_set_new(x, "stopping", json_boolean(qj->state == ALLOT_JOB_STOPPING));
            if (qj->state == ALLOT_JOB_STOPPING) { /* what is left of its grace period */
                json_object_set_new(
                    x, "grace_ms",
                    json_integer(qj->stop_at > srv_now() ? (qj->stop_at - srv_now()) * 1000 : 0));
                loop_linger_stopping(l, l->live[i].sid, node);
            }
            json_object_set_new(x, "run", json_integer(wrun));
            /* shown for the first time: held back (run 0) while an earlier
             * run is on its way out of a node (loop_linger_publish) */
            if (wrun && wrun != l->live[i].shown_run)
                loop_linger_fresh(&fr, &n_fr, &cap_fr, i, x, wrun);
            /* a checkpointable job's own credential, for its reports (its
             * agent puts it in ALLOT_JOB_TOKEN; auth.c) */
            if (wrun && qj->spec.checkpointable) {
                struct live *e = &l->live[i];

                if (!e->job_token || e->token_run != wrun) { /* once a run, not a cycle */
                    char tok[AUTH_JOB_TOKEN_MAX];

                    auth_job_token(l->srv, e->sid, wrun, tok, sizeof(tok));
                    allot_free(e->job_token);
                    e->job_token = allot_strdup(tok);
                    e->token_run = wrun;
                }
                if (e->job_token)
                    json_object_set_new(x, "job_token", json_string(e->job_token));
            }
            /* the tenant's weight: jobs sharing a GPU split its time by it (the shim) */
            if (qj->spec.tenant >= 0) {
                double w = allot_tenants_get(l->t, qj->spec.tenant)->weight * 100.0;
                json_object_set_new(x, "share_weight",
                                    json_integer(w < 1     ? 1
                                                 : w > 1e6 ? 1000000
                                                           : (json_int_t)w));
            }
            if (lnet_on(l) && qj->spec.tenant >= 0) {
                const struct allot_tenant *tn = allot_tenants_get(l->t, qj->spec.tenant);
                lnet_decorate(l, &l->live[i], tn->path,
                              qj->spec.prio_class >= 0 && qj->spec.prio_class < l->n_prio
                                  ? l->prio[qj->spec.prio_class].value
                                  : 0,
                              qj->spec.task.isolation == ALLOT_ISO_EXCLUSIVE_NODE, x,
                              l->live[i].wplacement, k);
            }
            json_array_append(arr, x);
        }
        json_decref(pl);
    }
    pend += (int64_t)l->n_held;
    json_t *peers = lnet_peers(l, d);
    pthread_mutex_lock(&l->dmu);
    loop_linger_publish(l, dr, n_dr, fr, n_fr, &waits);
    allot_free(fr);
    json_decref(l->desired);
    l->desired = d;
    json_decref(l->peers);
    l->peers = peers;
    l->cycles++;
    l->cycles_cut += (uint64_t)cut;
    l->cycle_sum += secs;
    for (int b = 0; b < N_CYCLE_BUCKETS; b++)
        if (secs <= loop_cycle_buckets[b])
            l->cycle_le[b]++;
    l->jobs_pending = pend;
    l->jobs_running = run;
    l->nodes = allot_cluster_node_count(l->c) - (int64_t)json_object_size(l->removed);
    l->gpus = allot_cluster_gpu_count(l->c);
    l->gpu_used_milli = allot_cluster_used_milli(l->c);
    free(l->gauges);
    l->gauges = gauges;
    pthread_cond_broadcast(&l->dcv);
    pthread_mutex_unlock(&l->dmu);
    loop_linger_done(l, dr, n_dr, waits);
}

static void cycle(struct loop *l)
{
    struct timespec t0, t1;
    int64_t now = srv_now();
    int rc, cut = 0;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (l->hold_dirty)
        gate_pass(l);
    l->n_decs = 0;
    /* Without nodes nothing can be placed. The core's placement scheduler
     * also passes a NULL array to memset when the cluster has no state
     * class yet (UBSan: src/core/sched.c shape_cache), so no cycle runs. */
    /* A cycle stops at cycle-work decisions; the next goes on at once,
     * until a change is waiting and the pass has run for cycle-gap: then
     * the loop takes the change first (the core starts a fresh cycle), so
     * that a change waits for cycle-gap and one such cycle at most, not
     * for the whole round. The pass's decisions are written together. */
    rc = 0;
    l->more = allot_cluster_node_count(l->c) > 0;
    while (rc == 0 && l->more) {
        rc = allot_queue_cycle(l->q, now, on_decision, l);
        l->more = rc == 0 && allot_queue_more(l->q);
        cut += l->more;
        if (l->more) {
            struct timespec t;
            bool waiting;
            clock_gettime(CLOCK_MONOTONIC, &t);
            pthread_mutex_lock(&l->mu);
            waiting = l->stop || (l->head && (t.tv_sec - t0.tv_sec) * 1000 +
                                                     (t.tv_nsec - t0.tv_nsec) / 1000000 >=
                                                 l->srv->cfg.cycle_gap);
            pthread_mutex_unlock(&l->mu);
            if (waiting)
                break;
        }
    }
    if (rc < 0)
        LOG_WARN("loop", "cycle stopped early: %s", allot_strerror(rc));
    struct loop_write w = {.l = l, .now = now};
    if (changes_prepare(l) < 0)
        LOG_ERROR("loop", "out of memory noting the cycle's changes; the rest next cycle");
    if ((l->n_decs || l->n_chg) && srv_write(l->srv, changes_fn, &w) < 0) {
        LOG_ERROR("loop", "commit of decisions failed; rewriting them next cycle");
        for (size_t i = 0; i < l->n_live; i++) {
            l->live[i].wstate = -1; /* differs from every state: written again */
            l->live[i].start_refused = false;
            l->live[i].net_wait = false;
        }
    } else if (l->n_decs || l->n_chg) {
        lnet_written(l);
        refused_to_gate(l);
    }
    changes_clear(l);
    /* jobs the core ended (time limit, a job that runs once preempted)
     * leave the live set once their end is stored; a write that failed is
     * made again next cycle */
    for (size_t i = l->n_live; i-- > 0;)
        if (allot_queue_job(l->q, l->live[i].qid)->state == ALLOT_JOB_DONE &&
            allot_store_job_state_terminal(l->live[i].wstate))
            loop_drop_live(l, i);
    loop_time_warnings(l, now); /* shown by this cycle's desired state */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    publish(l, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, cut);
    if (l->n_decs)
        LOG_DEBUG("loop", "cycle: %zu decisions, %zu live jobs", l->n_decs, l->n_live);
}

static void ts_add_ms(struct timespec *t, int64_t ms)
{
    t->tv_sec += ms / 1000;
    t->tv_nsec += (ms % 1000) * 1000000;
    if (t->tv_nsec >= 1000000000) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000;
    }
}

static void *loop_main(void *arg)
{
    struct loop *l = arg;
    int64_t interval_ms = l->srv->cfg.cycle_interval, gap_ms = l->srv->cfg.cycle_gap;
    int64_t busy = l->srv->cfg.cycle_busy > 0 ? l->srv->cfg.cycle_busy : 100;
    int64_t last_ms = 0; /* the CPU time the last cycle took */

    char nerr[300];
    if (lnet_start(l, nerr, sizeof(nerr)) < 0)
        LOG_ERROR("loop", "%s: tasks get no tenant network", nerr);
    if (rebuild(l) < 0)
        LOG_ERROR("loop", "rebuild from the store incomplete");
    cycle(l);
    if (l->srv->cfg.ready_delay > 0) {
        struct timespec d = {l->srv->cfg.ready_delay / 1000,
                             (l->srv->cfg.ready_delay % 1000) * 1000000};
        nanosleep(&d, NULL);
    }
    atomic_store(&l->srv->ready, true);
    LOG_INFO("loop", "ready");
    for (;;) {
        struct timespec until, gap_end;
        struct msg *m;
        bool stop;

        clock_gettime(CLOCK_REALTIME, &until);
        gap_end = until;
        ts_add_ms(&until, interval_ms);
        /* a held job's begin time comes before the next periodic cycle */
        if (l->next_begin && l->next_begin < until.tv_sec) /* time() may lag a tick */
            until = (struct timespec){.tv_sec = (time_t)l->next_begin, .tv_nsec = 50000000};
        /* the gap: cycle-gap, or longer after a cycle that computed long,
         * so that cycles take at most cycle-busy percent of a core while
         * changes stream in (the rest is the requests'; a cycle's wait for
         * its commit does not count) */
        int64_t back_ms = last_ms * (100 - busy) / busy;
        ts_add_ms(&gap_end,
                  back_ms > gap_ms ? (back_ms < interval_ms ? back_ms : interval_ms) : gap_ms);
        pthread_mutex_lock(&l->mu);
        while (!l->head && !l->stop)
            if (pthread_cond_timedwait(&l->cv, &l->mu, &until) == ETIMEDOUT)
                break;
        /* changes that come close together share one cycle: wait out the
         * gap since the last cycle, gathering more */
        while (l->head && !l->stop)
            if (pthread_cond_timedwait(&l->cv, &l->mu, &gap_end) == ETIMEDOUT)
                break;
        m = l->head;
        l->head = l->tail = NULL;
        stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        bool periodic = !m, changed = false;
        while (m) {
            struct msg *next = m->next;
            changed |= handle(l, m);
            msg_free(m);
            m = next;
        }
        if (stop)
            break;
        if (json_object_size(l->pending_inv))
            loop_pending_retry(l);
        loop_check_leases(l, srv_now());
        /* heartbeats alone change nothing to decide: no cycle, no commit */
        int64_t now_ms = allot_mono_ms();
        if (l->next_begin && srv_now() >= l->next_begin)
            l->hold_dirty = true; /* a held job's begin time has come */
        /* l->more: the last pass yielded to these messages with its
         * round unfinished (cycle()), so a cycle runs even if they change
         * nothing */
        if (periodic || changed || l->more || l->hold_dirty ||
            now_ms - l->last_cycle_ms >= interval_ms) {
            struct timespec c0, c1;
            l->last_cycle_ms = now_ms;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
            cycle(l);
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
            last_ms = (int64_t)(c1.tv_sec - c0.tv_sec) * 1000 + (c1.tv_nsec - c0.tv_nsec) / 1000000;
        }
    }
    return NULL;
}

void loop_queue_opts(const struct server_config *cfg, struct allot_queue_opts *qo)
{
    *qo = (struct allot_queue_opts){.order = cfg->order,
                                    .placement = cfg->placement,
                                    .quotas = true,
                                    .borrowing = true,
                                    .preemption = true,
                                    .backfill = true,
                                    .grace_s = cfg->preempt_grace / 1000,
                                    .min_runtime_s = cfg->preempt_min_runtime / 1000,
                                    .half_life_s = ALLOT_TUNED_HALF_LIFE_S,
                                    .cycle_work = (int)cfg->cycle_work,
                                    .reserve_gangs = cfg->reserve_gangs,
                                    .large_gang_gpus = (int)cfg->large_gang_gpus,
                                    .aging_s = cfg->aging / 1000,
                                    .fair_reclaim_s = cfg->fair_reclaim / 1000,
                                    .fair_cap = (double)cfg->fair_cap / 100.0,
                                    .defrag_s = cfg->defrag / 1000,
                                    .defrag_loss_s = cfg->defrag_loss / 1000,
                                    .las_threshold_gpu_s = cfg->las_threshold / 1000,
                                    .hold_half_life_s = (double)cfg->lending_hold / 1000.0,
                                    /* a job's time limit counts from its agent's
                                     * "running", not from its placement */
                                    .limit_from_running = true,
                                    .seed = 1};
}

struct loop *loop_start(struct server *s, char *err, size_t errlen)
{
    const struct allot_sched_policy_ops *pl = allot_sched_policy_find(s->cfg.placement);
    struct allot_queue_opts qo;
    struct loop *l;

    loop_queue_opts(&s->cfg, &qo);
    if (!pl) {
        allot_fmt(err, errlen, "placement: unknown policy \"%s\"", s->cfg.placement);
        return NULL;
    }
    l = allot_calloc(1, sizeof(*l));
    if (!l) {
        allot_fmt(err, errlen, "out of memory");
        return NULL;
    }
    l->srv = s;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    pthread_mutex_init(&l->dmu, NULL);
    pthread_cond_init(&l->dcv, NULL);
    l->desired = json_object();
    l->c = allot_cluster_new(
        s->cat, pl->flags & ALLOT_SCHED_POLICY_POD_CLASSES ? ALLOT_CLASS_POD_CLASSES : 0);
    l->t = allot_tenants_new(s->cat);
    if (!l->c || !l->t) {
        allot_fmt(err, errlen, "out of memory");
        goto fail;
    }
    l->q = allot_queue_new(l->c, l->t, &qo, err, errlen);
    if (!l->q)
        goto fail;
    /* published before the thread can mark the server ready, so API
     * threads that see ready also see the loop */
    s->loop = l;
    if (pthread_create(&l->thread, NULL, loop_main, l) != 0) {
        s->loop = NULL;
        allot_fmt(err, errlen, "cannot start the scheduling thread");
        goto fail;
    }
    return l;
fail:
    allot_queue_free(l->q);
    allot_tenants_free(l->t);
    allot_free(l->t_listed);
    allot_cluster_free(l->c);
    json_decref(l->desired);
    allot_free(l);
    return NULL;
}

void loop_stop(struct loop *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    for (size_t i = 0; i < l->n_live; i++) {
        json_decref(l->live[i].spec);
        json_decref(l->live[i].shown_nodes);
        free(l->live[i].spec_text);
        free(l->live[i].wplacement);
        allot_free(l->live[i].job_token);
        allot_free(l->live[i].net_hosts);
        json_decref(l->live[i].task_hosts);
        json_decref(l->live[i].signals);
    }
    allot_free(l->live);
    lnet_stop(l);
    for (size_t i = 0; i < l->cap_underlay; i++)
        allot_free(l->underlay[i]);
    allot_free(l->underlay);
    json_decref(l->peers);
    json_decref(l->pending_inv);
    json_decref(l->removed);
    json_decref(l->linger);
    json_decref(l->linger_jobs);
    json_decref(l->linger_held);
    json_decref(l->stop_wait);
    json_decref(l->stop_seen);
    json_decref(l->replied);
    changes_clear(l);
    allot_free(l->chg);
    for (size_t i = 0; i < l->n_held; i++)
        allot_free(l->held[i].deps);
    allot_free(l->held);
    allot_free(l->live_at);
    allot_free(l->expiry);
    allot_free(l->fenced);
    allot_free(l->decs);
    for (struct msg *m = l->head; m;) {
        struct msg *next = m->next;
        msg_free(m);
        m = next;
    }
    allot_queue_free(l->q);
    allot_tenants_free(l->t);
    allot_free(l->t_listed);
    allot_cluster_free(l->c);
    json_decref(l->desired);
    json_decref(l->token_names);
    free(l->gauges);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->dmu);
    pthread_cond_destroy(&l->dcv);
    allot_free(l);
}

static void node_version(json_t *a, char *version, size_t vlen)
{
    char *text = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);

    allot_fmt(version, vlen, "%016llx", (unsigned long long)loop_hash_str(text));
    free(text);
}

/* How many long polls may wait at once: in a pool of N threads, N - 2
 * (two answer everything else); with a thread per connection, half the
 * connections. */
static int64_t long_poll_cap(const struct server_config *cfg)
{
    if (cfg->workers == 0)
        return cfg->max_connections / 2;
    return cfg->workers > 3 ? cfg->workers - 2 : 1;
}

json_t *loop_desired_wait(struct loop *l, const char *name, const char *known, int64_t wait_ms,
                          char *version, size_t vlen)
{
    struct timespec until;
    json_t *a = NULL;
    bool waiting = false;

    clock_gettime(CLOCK_REALTIME, &until);
    ts_add_ms(&until, wait_ms);
    pthread_mutex_lock(&l->dmu);
    for (;;) {
        a = json_deep_copy(json_object_get(l->desired, name));
        if (!a)
            a = json_array();
        node_version(a, version, vlen);
        if (!known || wait_ms <= 0 || strcmp(version, known) != 0 || l->closing)
            break;
        if (!waiting) {
            if (l->waiters >= long_poll_cap(&l->srv->cfg))
                break; /* every worker would wait: answer now */
            waiting = true;
            l->waiters++;
        }
        if (pthread_cond_timedwait(&l->dcv, &l->dmu, &until) == ETIMEDOUT) {
            json_decref(a);
            a = json_deep_copy(json_object_get(l->desired, name));
            if (!a)
                a = json_array();
            node_version(a, version, vlen);
            break;
        }
        json_decref(a);
    }
    if (waiting)
        l->waiters--;
    loop_linger_replied(l, name, version);
    pthread_mutex_unlock(&l->dmu);
    return a;
}

void loop_release_waiters(struct loop *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->dmu);
    l->closing = true;
    pthread_cond_broadcast(&l->dcv);
    pthread_mutex_unlock(&l->dmu);
}

json_t *loop_desired(struct loop *l, const char *name)
{
    json_t *a;

    pthread_mutex_lock(&l->dmu);
    a = json_deep_copy(json_object_get(l->desired, name));
    pthread_mutex_unlock(&l->dmu);
    return a ? a : json_array();
}

size_t loop_node_tasks(struct loop *l, const char *name, int64_t *rdma_vfs)
{
    size_t n, k;
    json_t *x;

    *rdma_vfs = 0;
    if (!l)
        return 0; /* still starting */
    pthread_mutex_lock(&l->dmu);
    n = json_array_size(json_object_get(l->desired, name));
    json_array_foreach(json_object_get(l->desired, name), k, x) *rdma_vfs +=
        json_integer_value(json_object_get(x, "rdma_vfs"));
    pthread_mutex_unlock(&l->dmu);
    return n;
}

json_t *loop_node_peers(struct loop *l, const char *name)
{
    json_t *p;

    pthread_mutex_lock(&l->dmu);
    p = json_object_get(l->peers, name);
    p = p ? json_deep_copy(p) : NULL;
    pthread_mutex_unlock(&l->dmu);
    /* with tenant networks on, every node hears so (no peers yet: none), so
     * that its agent refuses a task sent without its network */
    if (!p && l->srv->cfg.network && !strcmp(l->srv->cfg.network, "on"))
        p = json_object();
    return p;
}

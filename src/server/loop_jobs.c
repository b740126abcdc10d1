/*
 * Stored jobs into the scheduling loop's core (see loop.c): a job read
 * from the store (at a restart, or just submitted) is submitted to the
 * queue, or adopted where it runs with its last reported save, or held by
 * the gate; the live set records it until it ends.
 */
#include "loop_int.h"

#include "jobspec.h"
#include "log.h"

#include "allot/common.h"
#include "allot/queue.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Reads a stored placement (placement_json's shape) back into pl[0..n).
 * Returns 0, or -1 when it does not match the cluster or the job. */
static int placement_parse(struct loop *l, const char *text, int n, struct allot_placement *pl)
{
    json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
    json_t *tasks = json_object_get(doc, "tasks");
    int rc = json_is_array(tasks) && (int)json_array_size(tasks) == n ? 0 : -1;

    for (int k = 0; rc == 0 && k < n; k++) {
        json_t *t = json_array_get(tasks, (size_t)k), *g = json_object_get(t, "gpus"), *x;
        const char *prof = json_string_value(json_object_get(t, "mig_profile"));
        int node = allot_cluster_find_node(l->c, json_string_value(json_object_get(t, "node"))
                                                     ? json_string_value(json_object_get(t, "node"))
                                                     : "");
        size_t i;
        memset(&pl[k], 0, sizeof(pl[k]));
        pl[k].node = node;
        pl[k].mig_profile = -1;
        pl[k].mig_start = -1;
        pl[k].gpu_milli = (int)json_integer_value(json_object_get(t, "gpu_milli"));
        pl[k].gpu_mem_mib = json_integer_value(json_object_get(t, "gpu_memory"));
        if (node < 0 || !json_is_array(g)) {
            rc = -1;
            break;
        }
        json_array_foreach(g, i, x)
        {
            json_int_t b = json_integer_value(x);
            if (!json_is_integer(x) || b < 0 || b >= ALLOT_MAX_GPUS)
                rc = -1;
            else
                pl[k].gpu_mask |= 1u << b;
        }
        if (prof) {
            const struct allot_node *nd = allot_cluster_node(l->c, node);
            const struct allot_gpu_model *m =
                nd->model >= 0 ? &l->srv->cat->models[nd->model] : NULL;
            for (int p = 0; m && p < m->n_profiles; p++)
                if (strcmp(m->profiles[p].name, prof) == 0)
                    pl[k].mig_profile = p;
            pl[k].mig_start = (int)json_integer_value(json_object_get(t, "mig_start"));
            if (pl[k].mig_profile < 0 || !json_is_integer(json_object_get(t, "mig_start")))
                rc = -1;
        }
    }
    json_decref(doc);
    return rc;
}

static int cmp_save(const void *key, const void *e)
{
    int64_t a = *(const int64_t *)key, b = ((const struct allot_store_event *)e)->job_id;

    return a < b ? -1 : a > b;
}

/* An adopted job's last reported save (its checkpoint event, at the save's
 * time) counts again, when it is of the run it is adopted in: from the
 * saves the rebuild read in one query, else read for this job. */
static void adopt_saved(struct loop *l, int64_t sid, int qid, int64_t now)
{
    struct allot_store *st = l->saves_read ? NULL : srv_reader(l->srv);
    struct allot_store_event ev = {0};
    int rc = ALLOT_ENOENT;

    if (l->saves_read) {
        const struct allot_store_event *e =
            l->n_saves ? bsearch(&sid, l->saves, l->n_saves, sizeof(*e), cmp_save) : NULL;
        if (e) {
            ev.time = e->time;
            rc = 0;
        }
    } else {
        rc = st ? allot_store_event_last(st, sid, "checkpoint", &ev) : ALLOT_EIO;
    }

    if (rc == 0 && allot_queue_checkpointed(l->q, qid, ev.time, now) == 0)
        LOG_DEBUG("loop", "job %lld: its save at %lld counts", (long long)sid, (long long)ev.time);
    else if (rc != 0 && rc != ALLOT_ENOENT)
        LOG_WARN("loop", "job %lld: its last save not read (%s): counted from its start",
                 (long long)sid, allot_strerror(rc));
    allot_store_event_clear(&ev);
}

/* An adopted running job's time limit counts from when its agent said
 * it runs (its "running" event of this run), not from its placement. */
static void adopt_running(struct loop *l, int64_t sid, int qid)
{
    struct allot_store *st = srv_reader(l->srv);
    struct allot_store_event ev = {0};

    if (l->saves_read) {
        const struct allot_store_event *e =
            l->n_runs_ev ? bsearch(&sid, l->runs_ev, l->n_runs_ev, sizeof(*e), cmp_save) : NULL;
        if (e)
            allot_queue_running(l->q, qid, e->time);
    } else if (st && allot_store_event_last(st, sid, "running", &ev) == 0) {
        allot_queue_running(l->q, qid, ev.time); /* an earlier run's: from this one's start */
    }
    allot_store_event_clear(&ev);
}

/* Whether stored job sid was preempted in the run it would be adopted in
 * (a "preempted" event after its last "placed" one). Its grace period
 * was in the core's memory only, and its agent stops it or has: adopted
 * as running it would hold its GPUs with nothing running, for good. While
 * rebuilding, only the jobs the one query found are read again. */
static bool preempted_in_run(struct loop *l, int64_t sid, int64_t start)
{
    struct allot_store *st = srv_reader(l->srv);
    struct allot_store_event p = {0}, s = {0};
    bool yes;

    if (l->saves_read &&
        (!l->n_stops || !bsearch(&sid, l->stops, l->n_stops, sizeof(*l->stops), cmp_save)))
        return false;
    /* of this run (a placed event can be missing: a cycle's events are
     * best effort) and after its last placement */
    yes = st && allot_store_event_last(st, sid, "preempted", &p) == 0 && p.time >= start &&
          (allot_store_event_last(st, sid, "placed", &s) != 0 || p.seq > s.seq);
    allot_store_event_clear(&p);
    allot_store_event_clear(&s);
    return yes;
}

/* A stored job that was starting or running when allotd stopped is adopted
 * where it runs (its node's agent keeps it running); one whose placement no
 * longer fits, or that was preempted (in its grace period), is queued
 * again. Returns the core id or a negative code. */
static int adopt_job(struct loop *l, const struct allot_store_job *j,
                     const struct allot_job_spec *spec, char *err, size_t errlen)
{
    struct allot_placement *pl;
    int qid = ALLOT_EINVAL;

    if ((j->state != ALLOT_SJ_STARTING && j->state != ALLOT_SJ_RUNNING) || !j->placement)
        return ALLOT_ENOENT;
    if (preempted_in_run(l, j->id, j->start_time)) {
        LOG_INFO("loop", "job %lld was preempted before allotd restarted: queued again",
                 (long long)j->id);
        return ALLOT_ESTATE;
    }
    pl = allot_calloc((size_t)spec->n_tasks, sizeof(*pl));
    if (!pl)
        return ALLOT_ENOMEM;
    if (placement_parse(l, j->placement, spec->n_tasks, pl) == 0) {
        int64_t now = srv_now(),
                start = j->start_time > 0 && j->start_time <= now ? j->start_time : now;
        qid = allot_queue_adopt(l->q, spec, pl, start, now, err, errlen);
        if (qid >= 0 && spec->checkpointable)
            adopt_saved(l, j->id, qid, now);
        if (qid >= 0 && j->state == ALLOT_SJ_RUNNING && spec->limit_s)
            adopt_running(l, j->id, qid);
    } else {
        allot_fmt(err, errlen, "stored placement does not match the cluster");
    }
    allot_free(pl);
    if (qid < 0)
        LOG_WARN("loop", "job %lld not adopted where it ran (%s): queued again", (long long)j->id,
                 err);
    return qid;
}

struct requeue_write {
    int64_t sid;
    const char *why;
};

static int requeue_fn(struct allot_store *st, void *arg)
{
    const struct requeue_write *w = arg;

    return loop_requeue_stored(st, w->sid, w->why, srv_now());
}

/* Makes room in live_at for any id the next submission can get (at most
 * the core's current job count), so that indexing it cannot fail. */
static int live_at_reserve(struct loop *l)
{
    size_t old = l->cap_live_at, need = (size_t)allot_queue_job_count(l->q) + 1;

    if (allot_grow((void **)&l->live_at, &l->cap_live_at, need, sizeof(*l->live_at)) < 0)
        return ALLOT_ENOMEM;
    for (size_t i = old; i < l->cap_live_at; i++)
        l->live_at[i] = -1;
    return 0;
}

/* When stored job j last became pending, as far as the store tells: its
 * submission, or its begin time (`begin`, its spec's) when that came
 * later (as Slurm's eligible time), or for a pending job that ran before
 * (requeued: its start_time is its last run's) no earlier than that run's
 * start. */
static int64_t queued_at(const struct allot_store_job *j, int64_t begin, int64_t now)
{
    int64_t at = j->submit_time > begin ? j->submit_time : begin;

    if (j->state == ALLOT_SJ_PENDING && j->start_time > at)
        at = j->start_time;
    return at > 0 && at <= now ? at : now;
}

int loop_class_slot(const struct loop *l, const char *name)
{
    for (int i = 0; name && i < l->n_prio; i++)
        if (!strcmp(l->prio[i].name, name))
            return i;
    return -1;
}

/* The core's set of the nodes js may use: its "nodelist" less its
 * "exclude_nodes", or every node but those. A name no node has (deleted
 * before allotd started) keeps a place in the core as a removed node
 * does (loop_node_keep_name), so that the node registering again under
 * it is the one the set names. *out NULL: any node. Returns 0 or a
 * negative code. */
static int job_nodes(struct loop *l, const struct jobspec *js, const struct allot_nodeset **out)
{
    json_t *lists[2] = {js->exclude, js->nodelist}, *x;
    int nn, n = 0, rc = 0;
    int32_t *idx = NULL;
    bool *out_of = NULL; /* excluded, by index */
    size_t i;

    *out = NULL;
    if (!js->nodelist && !js->exclude)
        return 0;
    for (int k = 0; k < 2 && rc >= 0; k++) /* every name a place first */
        json_array_foreach(lists[k], i, x)
        {
            if (rc >= 0 && allot_cluster_find_node(l->c, json_string_value(x)) < 0)
                rc = loop_node_keep_name(l, json_string_value(x));
        }
    nn = allot_cluster_node_count(l->c);
    if (rc >= 0 && (!(idx = allot_malloc(((size_t)nn + 1) * sizeof(*idx))) ||
                    !(out_of = allot_calloc((size_t)nn + 1, sizeof(*out_of)))))
        rc = ALLOT_ENOMEM;
    for (int k = 0; k < 2 && rc >= 0; k++)
        json_array_foreach(lists[k], i, x)
        {
            int v = allot_cluster_find_node(l->c, json_string_value(x));
            if (v < 0)
                continue;
            if (k == 1 && !out_of[v]) /* listed, not excluded, not yet taken */
                idx[n++] = v;
            out_of[v] = true; /* excluded, or taken: a name given twice counts once */
        }
    if (rc >= 0 && !js->nodelist) /* the exclusions alone */
        for (int v = 0; v < nn; v++)
            if (out_of[v])
                idx[n++] = v;
    if (rc >= 0)
        *out = allot_cluster_nodeset(l->c, !js->nodelist, idx, n, &rc);
    allot_free(idx);
    allot_free(out_of);
    return rc < 0 ? rc : 0;
}

/* Puts stored job j into the core. With `gate`, a pending job with
 * dependencies, an array throttle or a begin time still to come is held
 * back instead (gate_hold); the gate lets it in once they allow. A pending job a user held goes to
 * the gate always, until released. */
void loop_submit_job(struct loop *l, const struct allot_store_job *j, bool gate)
{
    struct allot_job_spec spec = {0};
    struct jobspec js;
    char err[512];
    json_t *b = json_loads(j->spec, 0, NULL);
    int qid;
    bool adopted;

    if (!b || jobspec_parse(b, l->srv->cat, &js, err, sizeof(err))) {
        loop_reject(l, j->id, b ? err : "stored spec is not JSON");
        json_decref(b);
        return;
    }
    /* the core's name for it, which its reasons and events give ("preempted
     * for higher-priority job 42 (train)"): the id, which is unique, and the
     * name the user gave, if any */
    char cname[160];
    if (*js.name)
        allot_fmt(cname, sizeof(cname), "%lld (%.128s)", (long long)j->id, js.name);
    else
        allot_fmt(cname, sizeof(cname), "%lld", (long long)j->id);
    spec.name = cname;
    spec.tenant = allot_tenants_find(l->t, js.tenant);
    spec.prio_class = loop_class_slot(l, js.priority);
    spec.qos = js.qos;
    spec.n_tasks = js.n_tasks;
    spec.task = js.task;
    spec.limit_s = js.limit_s;
    spec.checkpointable = js.checkpointable;
    spec.once = !js.requeue; /* preempted: it ends instead of running again */
    spec.checkpoint_interval_s = js.checkpoint_s;
    spec.seq = j->id; /* jobs of one second (an array's members) in submission order */
    if (job_nodes(l, &js, &spec.task.nodes) < 0) {
        loop_reject(l, j->id, "out of memory");
        json_decref(b);
        return;
    }
    if (spec.tenant <= 0) {
        allot_fmt(err, sizeof(err), "tenant %s is not known to the scheduler", js.tenant);
        loop_reject(l, j->id, err);
        json_decref(b);
        return;
    }
    if (j->state == ALLOT_SJ_PENDING &&
        (j->held || (gate && (js.n_deps || js.array_throttle || js.begin_s > srv_now())))) {
        gate_hold(l, j, &js);
        json_decref(b);
        return;
    }
    if (allot_grow((void **)&l->live, &l->cap_live, l->n_live + 1, sizeof(*l->live)) < 0 ||
        live_at_reserve(l) < 0) {
        loop_reject(l, j->id, "out of memory");
        json_decref(b);
        return;
    }
    qid = adopt_job(l, j, &spec, err, sizeof(err));
    int wstate = j->state; /* the stored state the live entry starts from */
    if (qid < 0 && qid != ALLOT_ENOENT && qid != ALLOT_ENOMEM && !spec.once) {
        /* a run that is not adopted ends here: its trail says so, as a
         * requeue for a lost node's does ("requeued", then placed anew) */
        char why[400];
        struct requeue_write w = {.sid = j->id, .why = why};
        if (qid == ALLOT_ESTATE)
            allot_strlcpy(why,
                          "queued again at allotd's restart: it was preempted, and its grace "
                          "period is not stored",
                          sizeof(why));
        else
            allot_fmt(why, sizeof(why),
                      "queued again at allotd's restart: not adopted where it "
                      "ran (%.300s)",
                      err);
        if (srv_write(l->srv, requeue_fn, &w) == 0)
            wstate = ALLOT_SJ_PENDING;
        else
            LOG_WARN("loop", "job %lld: its requeue's event was not stored", (long long)j->id);
    }
    if (qid == ALLOT_ESTATE && spec.once) {
        /* preempted before allotd restarted, and it runs once: it ends, as
         * it would have when its grace period ended */
        loop_end_stored(l, j->id, ALLOT_SJ_CANCELLED, "cancelled",
                        "ended (it runs once): preempted before allotd restarted");
        json_decref(b);
        return;
    }
    adopted = qid >= 0;
    if (!adopted) {
        /* its place in the queue is its submission, also when it comes back
         * after a restart or the loss of its node; or its begin time, when
         * it has one: a job that waited for it does not go before the jobs
         * submitted meanwhile, nor count that wait as its age */
        int64_t now = srv_now(), at = j->submit_time > js.begin_s ? j->submit_time : js.begin_s;
        qid = allot_queue_submit(l->q, &spec, at > 0 && at <= now ? at : now, err, sizeof(err));
    }
    if (qid < 0) {
        loop_reject(l, j->id, err);
        json_decref(b);
        return;
    }
    char *spec_text = strdup(j->spec);
    json_decref(b);
    if (!spec_text) {
        allot_queue_cancel(l->q, qid, srv_now());
        allot_queue_forget(l->q, qid);
        loop_reject(l, j->id, "out of memory");
        return;
    }
    /* where an adopted job runs, as stored (written back when it ends) */
    char *wpl = adopted && j->placement ? strdup(j->placement) : NULL;
    if (j->id > l->max_sid)
        l->max_sid = j->id;
    l->live[l->n_live++] = (struct live){.sid = j->id,
                                         .qid = qid,
                                         .wstate = wstate,
                                         .wruns = adopted ? 1 : 0,
                                         .wreason = loop_hash_str(j->pending_reason),
                                         .wstart = j->start_time,
                                         .wplacement = wpl,
                                         .spec_text = spec_text,
                                         .requeue = js.requeue,
                                         .parent = j->array_parent,
                                         .index = j->array_index,
                                         .token_id = j->token_id,
                                         .warn_sig = js.warn_sig,
                                         .warn_before = js.warn_before_s,
                                         .net_t = -1,
                                         .queued_at = queued_at(j, js.begin_s, srv_now())};
    l->live_at[qid] = (int32_t)(l->n_live - 1);
    if (adopted)
        lnet_adopt(l, &l->live[l->n_live - 1], j->tenant, j->placement);
    if (adopted && js.warn_sig) { /* its warning, if this run had it before a restart */
        struct allot_store_event ev = {0};
        struct allot_store *rd = srv_reader(l->srv);
        if (rd && allot_store_event_last(rd, j->id, LOOP_WARNING_EVENT, &ev) == 0 &&
            ev.time >= j->start_time)
            l->live[l->n_live - 1].warned_run = j->start_time;
        allot_store_event_clear(&ev);
    }
    if (l->rebuilding) /* its last run may still be on its way out */
        loop_linger_rebuilt(l, &l->live[l->n_live - 1], j, adopted);
}

int64_t loop_queued_since(const struct loop *l, const struct allot_job *j)
{
    int32_t k = j->id >= 0 && (size_t)j->id < l->cap_live_at ? l->live_at[j->id] : -1;
    int64_t at = k >= 0 && (size_t)k < l->n_live ? l->live[k].queued_at : 0;

    return at > j->submit ? at : j->submit;
}

struct live *loop_find_live(struct loop *l, int64_t sid, size_t *idx)
{
    for (size_t i = 0; i < l->n_live; i++)
        if (l->live[i].sid == sid) {
            *idx = i;
            return &l->live[i];
        }
    return NULL;
}

void loop_drop_live(struct loop *l, size_t i)
{
    const struct allot_job *qj = allot_queue_job(l->q, l->live[i].qid);

    /* the core forgets the ended job too, so that nothing in the daemon
     * grows with the number of finished jobs (its slot is reused) */
    if (qj && qj->state == ALLOT_JOB_DONE && allot_queue_forget(l->q, l->live[i].qid) < 0)
        LOG_WARN("loop", "job %lld: the core keeps its slot (out of memory)",
                 (long long)l->live[i].sid);
    lnet_release(l, &l->live[i]);
    loop_linger_left(l, &l->live[i]); /* requeued anew: its next run waits for it */
    json_decref(l->live[i].spec);
    free(l->live[i].spec_text);
    free(l->live[i].wplacement);
    allot_free(l->live[i].job_token);
    json_decref(l->live[i].task_hosts);
    json_decref(l->live[i].signals);
    l->hold_dirty = true; /* a job that others wait for may have ended */
    l->live_at[l->live[i].qid] = -1;
    l->live[i] = l->live[--l->n_live];
    if (i < l->n_live)
        l->live_at[l->live[i].qid] = (int32_t)i;
}

const char *loop_token_name(struct loop *l, int64_t id)
{
    struct allot_store_token t = {0};
    struct allot_store *rd;
    char key[32];
    json_t *v;

    allot_fmt(key, sizeof(key), "%lld", (long long)id);
    if (!l->token_names)
        l->token_names = json_object();
    if ((v = json_object_get(l->token_names, key)))
        return json_string_value(v);
    rd = srv_reader(l->srv);
    if (!rd || allot_store_token_get(rd, id, &t) < 0)
        return "";
    char who[512];
    auth_user_name(t.tenant, t.name, who, sizeof(who));
    json_object_set_new(l->token_names, key, json_string(who));
    allot_store_token_clear(&t);
    return json_string_value(json_object_get(l->token_names, key));
}

void loop_job_signal(struct loop *l, int64_t sid, int64_t run, int sig)
{
    size_t idx;
    struct live *e = loop_find_live(l, sid, &idx);
    struct timespec ts;
    json_int_t seq, last;
    json_t *sigs;

    /* microseconds of the wall clock: a restarted allotd (whose list is
     * gone) goes on past what the agents have sent, also within a second */
    clock_gettime(CLOCK_REALTIME, &ts);
    seq = (json_int_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;

    /* a signal is for one run: not once it ended, or runs again */
    if (!e || e->wstart != run || allot_queue_job(l->q, e->qid)->state != ALLOT_JOB_RUNNING)
        return;
    /* a new array, never the one published: the HTTP threads copy the
     * desired state (under dmu) while the loop goes on */
    sigs = e->signals && e->signals_run == run ? json_copy(e->signals) : json_array();
    if (!sigs) {
        LOG_ERROR("loop", "job %lld: out of memory: a signal is lost", (long long)sid);
        return;
    }
    /* increasing within the run, so that an agent sends each once */
    last =
        json_integer_value(json_object_get(json_array_get(sigs, json_array_size(sigs) - 1), "seq"));
    if (seq <= last)
        seq = last + 1;
    if (json_array_size(sigs) >= LOOP_SIGNALS_MAX)
        json_array_remove(sigs, 0);
    json_array_append_new(sigs, json_pack("{s:I,s:i}", "seq", seq, "sig", sig));
    json_decref(e->signals);
    e->signals = sigs;
    e->signals_run = run;
}

struct warn_write {
    const int64_t *sids;
    const int *sigs;
    const int64_t *befores;
    size_t n;
    int64_t now;
};

static int warn_fn(struct allot_store *st, void *arg)
{
    const struct warn_write *w = arg;
    int rc = 0;

    for (size_t i = 0; i < w->n && rc == 0; i++) {
        char detail[160];
        struct allot_store_event ev = {
            .job_id = w->sids[i], .time = w->now, .kind = LOOP_WARNING_EVENT, .detail = detail};

        allot_fmt(detail, sizeof(detail), "SIG%s sent: %lld s before its time limit",
                  allot_signal_name(w->sigs[i]), (long long)w->befores[i]);
        rc = allot_store_event_add(st, &ev, NULL);
    }
    return rc;
}

void loop_time_warnings(struct loop *l, int64_t now)
{
    enum { BATCH = 64 };
    int64_t sids[BATCH], befores[BATCH];
    int sigs[BATCH];
    size_t n = 0;

    for (size_t i = 0; i < l->n_live && n < BATCH; i++) {
        struct live *e = &l->live[i];
        const struct allot_job *qj;

        if (!e->warn_sig || e->warned_run == e->wstart ||
            (e->wstate != ALLOT_SJ_STARTING && e->wstate != ALLOT_SJ_RUNNING))
            continue;
        qj = allot_queue_job(l->q, e->qid);
        /* its limit counts from its running report (limit_from_running),
         * or from its placement and the start allowance when none came */
        int64_t from =
            qj->run_from != INT64_MAX ? qj->run_from : qj->start + ALLOT_LIMIT_START_ALLOWANCE_S;
        if (qj->state != ALLOT_JOB_RUNNING || !qj->spec.limit_s ||
            now < from + qj->spec.limit_s - e->warn_before)
            continue;
        e->warned_run = e->wstart;
        loop_job_signal(l, e->sid, e->wstart, e->warn_sig);
        sids[n] = e->sid, sigs[n] = e->warn_sig, befores[n] = e->warn_before;
        n++;
    }
    struct warn_write w = {.sids = sids, .sigs = sigs, .befores = befores, .n = n, .now = now};
    if (n && srv_write(l->srv, warn_fn, &w) != 0) /* sent all the same: said in the log */
        LOG_WARN("loop", "%zu time-limit warnings sent, their events not stored", n);
}

void loop_job_limit(struct loop *l, int64_t sid)
{
    size_t idx;
    struct live *e = loop_find_live(l, sid, &idx);
    struct allot_store *rd = srv_reader(l->srv);
    struct allot_store_job j = {0};
    json_t *spec = NULL;
    char *text = NULL;
    int rc;

    /* the limit as stored now, not as a message says: two changes made at
     * once may reach the loop in another order than they were written */
    if (!e || !rd || allot_store_job_get(rd, sid, &j) != 0 || !j.spec ||
        !(spec = json_loads(j.spec, 0, NULL)) || !(text = strdup(j.spec))) {
        if (e)
            LOG_ERROR("loop", "job %lld: its new time limit could not be read", (long long)sid);
        json_decref(spec);
        allot_store_job_clear(&j);
        return;
    }
    int64_t limit_s = json_integer_value(json_object_get(spec, "time_limit"));
    if ((rc = allot_queue_set_limit(l->q, e->qid, limit_s)) != 0 && rc != ALLOT_ESTATE)
        LOG_ERROR("loop", "job %lld: time limit %lld s: %s", (long long)sid, (long long)limit_s,
                  allot_strerror(rc));
    free(e->spec_text); /* the spec the desired state shows: as stored now */
    e->spec_text = text;
    json_decref(e->spec); /* parsed again while it is placed */
    e->spec = NULL;
    json_decref(spec);
    allot_store_job_clear(&j);
}

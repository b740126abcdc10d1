/*
 * The gate of the scheduling loop: pending jobs with dependencies
 * (afterok, afterany, afternotok, as in Slurm), in an array with a
 * throttle ("0-99%10") or with a begin time still to come (sbatch
 * --begin) wait here, outside the core, until gate_check lets them in. A dependency on an array's
 * first job means every member, one on ID_INDEX that member alone. A job whose dependency can never
 * hold any more (afterok of a job that failed, afternotok of one that succeeded) ends as cancelled
 * with the reason, and so, in turn, do the jobs that wait for it with afterok.
 */
#include "loop_int.h"

#include "jobspec.h"
#include "log.h"

#include "allot/common.h"

#include <stdio.h>
#include <string.h>

void gate_hold(struct loop *l, const struct allot_store_job *j, const struct jobspec *js)
{
    struct held *h, one;
    size_t at, lo = 0, hi = l->n_held;

    if (allot_grow((void **)&l->held, &l->cap_held, l->n_held + 1, sizeof(*l->held)) < 0) {
        loop_reject(l, j->id, "out of memory");
        return;
    }
    /* the list stays in id order (submission order: an array's members are
     * next to each other, which gate_pass's throttle count relies on, and
     * a job held again goes back to its old place) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (l->held[mid].sid < j->id)
            lo = mid + 1;
        else
            hi = mid;
    }
    at = lo;
    h = &one;
    *h = (struct held){.sid = j->id,
                       .parent = j->array_parent,
                       .throttle = js->array_throttle,
                       .tenant = allot_tenants_find(l->t, js->tenant),
                       .n_deps = js->n_deps,
                       .wreason = loop_hash_str(j->pending_reason),
                       .user_held = j->held,
                       .begin = js->begin_s};
    if (js->n_deps) {
        h->deps = allot_malloc((size_t)js->n_deps * sizeof(*h->deps));
        if (!h->deps) {
            loop_reject(l, j->id, "out of memory");
            return;
        }
        memcpy(h->deps, js->deps, (size_t)js->n_deps * sizeof(*h->deps));
        /* a dependency on one member is looked up once, not at every pass */
        struct allot_store *rd = srv_reader(l->srv);
        for (int i = 0; rd && i < h->n_deps; i++) {
            struct allot_store_job m = {0};
            if (h->deps[i].index >= 0 &&
                allot_store_job_member(rd, h->deps[i].id, h->deps[i].index, &m) == 0)
                h->deps[i].member = m.id;
            allot_store_job_clear(&m);
        }
    }
    memmove(&l->held[at + 1], &l->held[at], (l->n_held - at) * sizeof(*l->held));
    l->held[at] = one;
    l->n_held++;
    if (j->id > l->max_sid)
        l->max_sid = j->id;
    l->hold_dirty = true;
}

/* What holds a job in the gate, the first that applies. */
enum gate_why { WHY_USER, WHY_BEGIN, WHY_DEPENDENCY, WHY_NETWORK, WHY_THROTTLE, N_WHY };

void gate_metrics(const struct loop *l, FILE *f, int64_t now)
{
    int64_t why[N_WHY] = {0};

    for (size_t i = 0; i < l->n_held; i++) {
        const struct held *h = &l->held[i];

        /* a begin time just come, not yet seen by a gate pass, still holds */
        why[h->user_held       ? WHY_USER
            : h->begin > now   ? WHY_BEGIN
            : h->n_deps        ? WHY_DEPENDENCY
            : h->net_tasks > 0 ? WHY_NETWORK
            : h->throttle      ? WHY_THROTTLE
                               : WHY_BEGIN]++;
    }
    fprintf(f,
            "# HELP allot_jobs_held Pending jobs the scheduler does not consider yet: held by a "
            "user, waiting for their begin time, for a dependency, for their array's throttle, "
            "or for addresses in their tenant's network.\n# TYPE allot_jobs_held gauge\n"
            "allot_jobs_held{reason=\"user\"} %lld\nallot_jobs_held{reason=\"begin\"} %lld\n"
            "allot_jobs_held{reason=\"dependency\"} %lld\n"
            "allot_jobs_held{reason=\"throttle\"} %lld\nallot_jobs_held{reason=\"network\"} %lld\n",
            (long long)why[WHY_USER], (long long)why[WHY_BEGIN], (long long)why[WHY_DEPENDENCY],
            (long long)why[WHY_THROTTLE], (long long)why[WHY_NETWORK]);
}

bool gate_holds(const struct loop *l, int64_t sid)
{
    for (size_t i = 0; i < l->n_held; i++)
        if (l->held[i].sid == sid)
            return true;
    return false;
}

void gate_unhold(struct loop *l, size_t i)
{
    allot_free(l->held[i].deps);
    memmove(&l->held[i], &l->held[i + 1], (l->n_held - i - 1) * sizeof(*l->held));
    l->n_held--;
    l->hold_dirty = true;
}

enum gate { GATE_OPEN, GATE_WAIT, GATE_NEVER };

/* How the jobs a dependency names ended so far: one job, or every member
 * when it names an array's first job (as Slurm does). */
struct dep_state {
    int64_t id;
    int index; /* with id: the dependency read (struct jobdep) */
    bool all_ended, any_ok, any_notok;
    int first_bad;        /* the state of an ended, unsuccessful one */
    int64_t first_bad_id; /* ... and its job (an array's member) */
    int64_t open_id;      /* the first that has not ended (an array's member), 0: none */
    int open_index;       /* ... its index in the array */
};

static void dep_account(struct dep_state *d, int64_t job, int index, int state)
{
    if (!allot_store_job_state_terminal(state)) {
        if (d->all_ended) {
            d->open_id = job;
            d->open_index = index;
        }
        d->all_ended = false;
    } else if (state == ALLOT_SJ_SUCCEEDED) {
        d->any_ok = true;
    } else {
        if (!d->any_notok) {
            d->first_bad = state;
            d->first_bad_id = job;
        }
        d->any_notok = true;
    }
}

static int dep_read(struct allot_store *rd, const struct jobdep *dep, struct dep_state *d)
{
    int64_t id = dep->id;
    struct allot_store_job j = {0};
    int rc = dep->member > 0   ? allot_store_job_get(rd, dep->member, &j)
             : dep->index >= 0 ? allot_store_job_member(rd, id, dep->index, &j)
                               : allot_store_job_get(rd, id, &j);

    *d = (struct dep_state){.id = id, .index = dep->index, .all_ended = true};
    if (rc == ALLOT_ENOENT) {
        d->any_notok = true; /* cannot happen: the store keeps every job */
        d->first_bad = ALLOT_SJ_CANCELLED;
        return 0;
    }
    if (rc == 0 && dep->index < 0 && j.array_parent == id) {
        struct allot_store_job_filter f = {.array_parent = id, .limit = 1000};
        struct allot_store_job_page pg = {0};

        do {
            rc = allot_store_job_list(rd, &f, &pg);
            for (size_t i = 0; i < pg.n; i++)
                dep_account(d, pg.jobs[i].id, pg.jobs[i].array_index, pg.jobs[i].state);
            f.cursor = pg.next_cursor;
            allot_store_job_page_free(&pg);
        } while (rc == 0 && f.cursor);
    } else if (rc == 0) {
        dep_account(d, j.id, j.array_index, j.state); /* one job, or one member (ID_INDEX) */
    }
    allot_store_job_clear(&j);
    return rc;
}

/* Dependencies and throttle (gate_check without the user's hold). */
static enum gate gate_rules(struct allot_store *rd, const struct held *h, int in_queue,
                            struct dep_state *cache, char *why, size_t len)
{
    for (int i = 0; i < h->n_deps; i++) {
        const struct jobdep *d = &h->deps[i];
        long long id = (long long)d->id;
        char name[48]; /* the job as the dependency names it: 12, or 12_3 */

        if (d->index >= 0)
            allot_fmt(name, sizeof(name), "%lld_%d", id, d->index);
        else
            allot_fmt(name, sizeof(name), "%lld", id);
        if ((cache->id != d->id || cache->index != d->index) && dep_read(rd, d, cache) < 0) {
            cache->id = 0;
            allot_fmt(why, len, "waiting for job %s: its state cannot be read", name);
            return GATE_WAIT;
        }
        /* an array whose first job ended: the member it still waits for */
        char open[96] = "";
        if (d->index < 0 && cache->open_id && cache->open_id != d->id)
            allot_fmt(open, sizeof(open), "; member %lld (%lld_%d) has not ended",
                      (long long)cache->open_id, id, cache->open_index);
        switch (d->kind) {
        case JOBDEP_AFTEROK:
            if (cache->any_notok) {
                if (d->index < 0 && cache->first_bad_id != d->id) /* a member of array `id` */
                    allot_fmt(why, len,
                              "dependency can never be satisfied: job %lld of array %lld %s "
                              "(afterok)",
                              (long long)cache->first_bad_id, id,
                              allot_store_job_state_name(cache->first_bad));
                else
                    allot_fmt(why, len, "dependency can never be satisfied: job %s %s (afterok)",
                              name, allot_store_job_state_name(cache->first_bad));
                return GATE_NEVER;
            }
            if (!cache->all_ended) {
                allot_fmt(why, len, "waiting for job %s to succeed (afterok%s)", name, open);
                return GATE_WAIT;
            }
            break;
        case JOBDEP_AFTERANY:
            if (!cache->all_ended) {
                allot_fmt(why, len, "waiting for job %s to end (afterany%s)", name, open);
                return GATE_WAIT;
            }
            break;
        default: /* JOBDEP_AFTERNOTOK */
            if (cache->all_ended && !cache->any_notok) {
                allot_fmt(why, len,
                          "dependency can never be satisfied: job %s succeeded "
                          "(afternotok)",
                          name);
                return GATE_NEVER;
            }
            if (!cache->all_ended) {
                allot_fmt(why, len, "waiting for job %s to fail (afternotok%s)", name, open);
                return GATE_WAIT;
            }
            break;
        }
    }
    if (h->throttle && in_queue >= h->throttle) {
        allot_fmt(why, len,
                  "array throttle: at most %d job%s of array %lld queued or running at once",
                  h->throttle, h->throttle > 1 ? "s" : "", (long long)h->parent);
        return GATE_WAIT;
    }
    return GATE_OPEN;
}

void loop_held_reason(int64_t sid, char *buf, size_t len)
{
    allot_fmt(buf, len, "held: `allot release %lld` lets it start", (long long)sid);
}

/* "waiting for its begin time, 2026-12-06T10:00:00Z": no "in 5 minutes",
 * which would change the stored reason at every pass. */
static void begin_reason(int64_t begin, char *buf, size_t len)
{
    char when[32];

    allot_fmt(buf, len, "waiting for its begin time, %s",
              allot_utc_text(begin, when, sizeof(when)));
}

/* The one rule for "may this held job enter the queue": a user does not
 * hold it, its begin time has come (`now`), every dependency holds, its
 * array has fewer than `throttle` members in the queue (`in_queue`), and,
 * when an earlier start found no address for it, its tenant's network has
 * room for its tasks. Never when a dependency cannot hold any more, held
 * or not (the job ends cancelled, and so do its own afterok dependants).
 * `cache` keeps the last dependency read (array members share theirs). */
static enum gate gate_check(struct loop *l, struct allot_store *rd, const struct held *h,
                            int in_queue, int64_t now, struct dep_state *cache, char *why,
                            size_t len)
{
    enum gate v = gate_rules(rd, h, in_queue, cache, why, len);
    const struct allot_tenant *t = allot_tenants_get(l->t, h->tenant);

    if (h->user_held && v != GATE_NEVER) {
        loop_held_reason(h->sid, why, len);
        return GATE_WAIT;
    }
    if (h->begin > now && v != GATE_NEVER) {
        begin_reason(h->begin, why, len);
        return GATE_WAIT;
    }
    /* its tasks' addresses in the tenant network: it starts only in it */
    if (v == GATE_OPEN && h->net_tasks > 0 && t && !lnet_room(l, t->path, h->net_tasks, why, len))
        return GATE_WAIT;
    return v;
}

/* What one gate pass decided for a held job. */
struct gate_out {
    int verdict; /* enum gate */
    char why[160];
};

struct gate_write {
    struct loop *l;
    struct gate_out *out; /* one per held job */
    int64_t now;
};

/* Group-commit write: new pending reasons of held jobs, and the ones whose
 * dependency can never hold end as cancelled. */
static int gate_fn(struct allot_store *st, void *arg)
{
    struct gate_write *w = arg;
    struct loop *l = w->l;

    for (size_t i = 0; i < l->n_held; i++) {
        struct held *h = &l->held[i];
        struct gate_out *o = &w->out[i];
        struct allot_store_job j = {0};
        int rc;

        if (o->verdict == GATE_NEVER) {
            rc = loop_end_job(st, h->sid, ALLOT_SJ_CANCELLED, "cancelled", o->why, w->now);
        } else if (o->verdict == GATE_WAIT && loop_hash_str(o->why) != h->wreason) {
            rc = allot_store_job_get(st, h->sid, &j);
            if (rc == 0 && !allot_store_job_state_terminal(j.state)) {
                allot_free(j.pending_reason);
                j.pending_reason = allot_strdup(o->why);
                rc = allot_store_job_update(st, &j);
            }
            allot_store_job_clear(&j);
            if (rc == 0)
                h->wreason = loop_hash_str(o->why);
        } else {
            continue;
        }
        if (rc < 0 && rc != ALLOT_ENOENT)
            return rc;
    }
    return 0;
}

/* Members of array `parent` in the core (pending or running). */
static int array_in_queue(const struct loop *l, int64_t parent)
{
    int n = 0;

    for (size_t i = 0; i < l->n_live; i++)
        n += l->live[i].parent == parent;
    return n;
}

/* Evaluates every held job (after something ended or was held): writes
 * the pending reasons that changed, cancels jobs whose dependencies can
 * never hold, and lets the others into the core in submission order. */
void gate_pass(struct loop *l)
{
    struct allot_store *rd = srv_reader(l->srv);
    struct dep_state cache = {0};
    struct gate_write w = {.l = l, .now = srv_now()};
    int64_t parent = 0;
    int in_queue = 0;

    l->hold_dirty = false;
    if (!l->n_held) {
        l->next_begin = 0;
        return;
    }
    if (!rd) {
        l->hold_dirty = true; /* the store cannot be read now: the next cycle tries again */
        return;
    }
    l->next_begin = 0;
    w.out = allot_calloc(l->n_held, sizeof(*w.out));
    if (!w.out) {
        l->hold_dirty = true;
        return;
    }
    for (size_t i = 0; i < l->n_held; i++) {
        const struct held *h = &l->held[i];

        if (h->throttle && h->parent != parent) {
            parent = h->parent;
            in_queue = array_in_queue(l, parent);
        }
        w.out[i].verdict =
            gate_check(l, rd, h, in_queue, w.now, &cache, w.out[i].why, sizeof(w.out[i].why));
        if (w.out[i].verdict == GATE_OPEN && h->throttle)
            in_queue++; /* it enters below: the next member sees it */
    }
    if (srv_write(l->srv, gate_fn, &w) < 0) {
        LOG_ERROR("loop", "cannot record the gate's decisions; retrying next cycle");
        l->hold_dirty = true;
        allot_free(w.out);
        return;
    }
    /* the sids let in, then the held list without the jobs that left it */
    int64_t *open = allot_malloc(l->n_held * sizeof(*open));
    size_t keep = 0, n_open = 0;

    for (size_t i = 0; i < l->n_held; i++) {
        if (w.out[i].verdict == GATE_WAIT || (w.out[i].verdict == GATE_OPEN && !open)) {
            l->held[keep++] = l->held[i]; /* out of memory: stays held, tried again */
            l->hold_dirty |= w.out[i].verdict == GATE_OPEN;
            continue;
        }
        if (w.out[i].verdict == GATE_OPEN)
            open[n_open++] = l->held[i].sid;
        else
            l->hold_dirty = true; /* ended: its dependants may end too */
        allot_free(l->held[i].deps);
    }
    l->n_held = keep;
    for (size_t i = 0; i < l->n_held; i++) /* when to look again (loop_main) */
        if (l->held[i].begin > w.now && (!l->next_begin || l->held[i].begin < l->next_begin))
            l->next_begin = l->held[i].begin;
    for (size_t k = 0; k < n_open; k++) {
        struct allot_store_job j = {0};

        size_t at;
        struct live *e;

        if (allot_store_job_get(rd, open[k], &j) == 0 && j.state == ALLOT_SJ_PENDING) {
            loop_submit_job(l, &j, false);
            /* its stored reason is the gate's ("held: ...", "waiting for
             * job ..."): the next cycle writes the queue's at once, not in
             * its turn of the reasons' round robin */
            if ((e = loop_find_live(l, open[k], &at)))
                e->wstate = -1;
        }
        allot_store_job_clear(&j);
    }
    allot_free(open);
    allot_free(w.out);
}

/* Live job sid (at k) leaves the core and comes in again as the store
 * holds it now, when it is pending there (and held, with `held`): its
 * submission keeps its place; a held one goes to the gate. */
static void reenter(struct loop *l, int64_t sid, size_t k, bool held)
{
    struct allot_store_job j = {0};
    struct allot_store *rd = srv_reader(l->srv);

    if (rd && allot_store_job_get(rd, sid, &j) == 0 && j.state == ALLOT_SJ_PENDING &&
        (j.held || !held)) {
        allot_queue_cancel(l->q, l->live[k].qid, srv_now());
        loop_drop_live(l, k);
        loop_submit_job(l, &j, true);
    }
    allot_store_job_clear(&j);
}

void gate_user_hold(struct loop *l, int64_t sid)
{
    size_t k;

    for (size_t i = 0; i < l->n_held; i++)
        if (l->held[i].sid == sid) { /* waiting for its dependencies too */
            l->held[i].user_held = true;
            l->hold_dirty = true;
            return;
        }
    /* in the core, pending; or placed in a cycle whose write of its start
     * the store refused, the hold having come first. The store is the
     * truth: held and pending there, it started nowhere (the store refuses
     * a held job's start, and agents start only stored runs). Released
     * again meanwhile, it stays; unreadable, a refused start comes back
     * here next cycle */
    if (loop_find_live(l, sid, &k))
        reenter(l, sid, k, true);
}

void gate_user_changed(struct loop *l, int64_t sid)
{
    struct allot_store_job j = {0};
    struct allot_store *rd;
    json_t *spec;
    size_t k;
    struct live *e = loop_find_live(l, sid, &k);

    /* in the gate (read from the store when it enters) or ended: nothing to do */
    if (!e)
        return;
    if (allot_queue_job(l->q, e->qid)->state == ALLOT_JOB_PENDING) {
        reenter(l, sid, k, false);
        return;
    }
    /* placed between the change and this look (the store took the change
     * while the start was on its way): it runs, and may be preempted, as a
     * job of the class the store holds */
    if (!(rd = srv_reader(l->srv)) || allot_store_job_get(rd, sid, &j) != 0)
        return;
    if ((spec = json_loads(j.spec ? j.spec : "", 0, NULL)) != NULL) {
        int cls = loop_class_slot(l, json_string_value(json_object_get(spec, "priority")));
        if (allot_queue_job(l->q, e->qid)->spec.prio_class != cls &&
            allot_queue_set_job_class(l->q, e->qid, cls) == 0)
            LOG_INFO("loop", "job %lld: priority class changed while it started", (long long)sid);
        json_decref(spec);
    }
    allot_store_job_clear(&j);
}

void gate_user_release(struct loop *l, int64_t sid)
{
    struct allot_store_job j = {0};
    struct allot_store *rd;
    size_t k;

    for (size_t i = 0; i < l->n_held; i++)
        if (l->held[i].sid == sid) {
            l->held[i].user_held = false;
            l->hold_dirty = true;
            return;
        }
    /* not here: held after this loop read it (a message lost to memory) */
    if (loop_find_live(l, sid, &k) || !(rd = srv_reader(l->srv)))
        return;
    if (allot_store_job_get(rd, sid, &j) == 0 && j.state == ALLOT_SJ_PENDING && !j.held)
        loop_submit_job(l, &j, true);
    allot_store_job_clear(&j);
}

void gate_net_wait(struct loop *l, int64_t sid)
{
    struct allot_store_job j = {0};
    struct allot_store *rd = srv_reader(l->srv);
    struct jobspec js;
    char err[256];
    json_t *b = NULL;
    size_t k;
    struct live *e = loop_find_live(l, sid, &k);

    /* the store is the truth: pending there, it started nowhere */
    if (!e || !rd || allot_store_job_get(rd, sid, &j) != 0 || j.state != ALLOT_SJ_PENDING ||
        !(b = json_loads(j.spec, 0, NULL)) ||
        jobspec_parse(b, l->srv->cat, &js, err, sizeof(err))) {
        json_decref(b);
        allot_store_job_clear(&j);
        return; /* placed again next cycle, and refused again */
    }
    allot_queue_cancel(l->q, e->qid, srv_now());
    loop_drop_live(l, k);
    gate_hold(l, &j, &js); /* js points into b: freed after */
    for (size_t i = 0; i < l->n_held; i++)
        if (l->held[i].sid == sid)
            l->held[i].net_tasks = js.n_tasks > 0 ? js.n_tasks : 1;
    json_decref(b);
    allot_store_job_clear(&j);
}

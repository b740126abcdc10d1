/*
 * One run of a job at a time (docs/allotd.md, "One run of a job at a
 * time"). When the desired state stops showing a run of a job (the job was
 * requeued, preempted, evicted, or a task of its gang failed), the nodes
 * it was shown on may still be stopping it for its grace period. The
 * job's next run is published with run 0 (its agents wait) until every
 * such node has said it no longer holds the job: a heartbeat from an agent
 * that had a desired state made after the drop, whose "stopping" list
 * lacks the job. At allotd's start the nodes of each job's last run not
 * adopted count likewise (read from the store), and every run adopted as
 * starting waits for every node (it may have been held; its agent may
 * have started it, so it is held with "hold": true, not run 0, which would
 * stop it). A lost node no longer counts (its agent fences its tasks); an
 * agent that sends no "stopping" list (older than the field) counts once
 * it had that desired state, one that sends no version once it had a
 * reply made after the drop.
 *
 * State under l->dmu: l->linger (node -> {job id: seq of the desired state
 * that first left it out}), l->linger_jobs (job id -> how many nodes), and
 * l->linger_held (job id -> true while a new run of it is held).
 * loop_linger_heard runs on a request thread, the rest on the loop thread.
 */
#include "loop_int.h"

#include "allot/common.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void sid_key(char *k, size_t n, int64_t sid)
{
    allot_fmt(k, n, "%lld", (long long)sid);
}

/* Job sid's run is on its way out of node since desired state seq (one
 * entry per job and node, its latest drop). */
static void note(struct loop *l, int64_t sid, const char *node, uint64_t seq)
{
    char k[24];
    json_t *on;

    if (!l->linger)
        l->linger = json_object();
    if (!l->linger_jobs)
        l->linger_jobs = json_object();
    on = json_object_get(l->linger, node);
    if (!on && json_object_set_new(l->linger, node, json_object()) == 0)
        on = json_object_get(l->linger, node);
    sid_key(k, sizeof(k), sid);
    if (!on) {
        LOG_ERROR("loop",
                  "out of memory: job %lld's next run may start before its last ends "
                  "on node %s",
                  (long long)sid, node);
        return;
    }
    if (!json_object_get(on, k))
        json_object_set_new(
            l->linger_jobs, k,
            json_integer(json_integer_value(json_object_get(l->linger_jobs, k)) + 1));
    json_object_set_new(on, k, json_integer((json_int_t)seq));
}

/* Removes job key's entry on node `on` (an object of l->linger). */
static void gone(struct loop *l, json_t *on, const char *key)
{
    char k[24];

    allot_strlcpy(k, key, sizeof(k)); /* key may be on's own: freed below */
    json_int_t left = json_integer_value(json_object_get(l->linger_jobs, k)) - 1;

    json_object_del(on, k);
    if (left > 0)
        json_object_set_new(l->linger_jobs, k, json_integer(left));
    else
        json_object_del(l->linger_jobs, k);
}

/* The nodes on their way out of which allotd waits for a run of job k
 * ("a", "a, b": all of a gang's), into buf (for the log); NULL when none. */
static const char *where(const struct loop *l, const char *k, char *buf, size_t len)
{
    const char *node;
    json_t *on;
    size_t at = 0;

    *buf = '\0';
    int more = 0;

    json_object_foreach(l->linger, node, on)
    {
        if (!json_object_get(on, k))
            continue;
        if (at + strlen(node) + 2 + 24 < len) /* room for it and ", and N more" */
            at += (size_t)allot_fmt(buf + at, len - at, "%s%s", at ? ", " : "", node);
        else
            more++;
    }
    if (more && at)
        allot_fmt(buf + at, len - at, ", and %d more", more);
    return *buf ? buf : NULL;
}

/* Desired-state entry x shows no run yet: its agents wait (run 0), and
 * its credential goes with it. */
static void run_zero(json_t *x)
{
    json_object_set_new(x, "run", json_integer(0));
    json_object_del(x, "job_token");
}

/* note() on a node in service: a lost node's agent fenced its tasks, and
 * one allotd does not know never answers (allotd counts them gone). */
static void note_up(struct loop *l, int64_t sid, const char *node, uint64_t seq)
{
    int i = node ? allot_cluster_find_node(l->c, node) : -1;

    if (i >= 0 && allot_cluster_node(l->c, i)->state != ALLOT_NODE_LOST)
        note(l, sid, node, seq);
}

/* Job sid's run shown on `nodes` leaves them with desired state seq. */
static void left(struct loop *l, int64_t sid, const json_t *nodes, uint64_t seq)
{
    size_t k;
    json_t *x;

    json_array_foreach(nodes, k, x) note_up(l, sid, json_string_value(x), seq);
}

void loop_linger_left(struct loop *l, struct live *e)
{
    char k[24];

    if (!e->shown_run && !e->held_run)
        return;
    sid_key(k, sizeof(k), e->sid);
    pthread_mutex_lock(&l->dmu);
    left(l, e->sid, e->shown_nodes, l->dseq + 1);
    json_object_del(l->linger_held, k); /* a new live entry holds it again */
    pthread_mutex_unlock(&l->dmu);
    json_decref(e->shown_nodes);
    e->shown_nodes = NULL;
    e->shown_run = 0;
}

void loop_linger_stopping(struct loop *l, int64_t sid, const char *node)
{
    char k[24];
    json_t *on;

    if (!node || (!l->stop_seen && !(l->stop_seen = json_object())))
        return;
    sid_key(k, sizeof(k), sid);
    on = json_object_get(l->stop_seen, k);
    if (!on && json_object_set_new(l->stop_seen, k, json_object()) == 0)
        on = json_object_get(l->stop_seen, k);
    if (on)
        json_object_set_new(on, node, json_true());
}

/* Under l->dmu: the jobs the state being published (seq) shows stopping
 * wait for their nodes from seq on (a job shown stopping already keeps
 * its seq and nodes); those it shows no more wait no more. */
static void stopping_publish(struct loop *l, uint64_t seq)
{
    const char *k;
    json_t *v;
    void *tmp;

    if (!l->stop_wait && !(l->stop_wait = json_object()))
        return;
    json_object_foreach_safe(l->stop_wait, tmp, k, v)
    {
        if (!json_object_get(l->stop_seen, k))
            json_object_del(l->stop_wait, k);
    }
    json_object_foreach(l->stop_seen, k, v)
    {
        if (!json_object_get(l->stop_wait, k))
            json_object_set_new(l->stop_wait, k,
                                json_pack("{s:I,s:O}", "seq", (json_int_t)seq, "nodes", v));
    }
    json_object_clear(l->stop_seen);
}

void loop_linger_publish(struct loop *l, const struct linger_drop *dr, size_t n_dr,
                         const struct fresh_run *fr, size_t n_fr, json_t **waits)
{
    uint64_t seq = l->dseq + 1; /* the desired state being published */

    stopping_publish(l, seq);
    for (size_t d = 0; d < n_dr; d++)
        left(l, dr[d].sid, dr[d].nodes, seq);
    /* a run shown for the first time waits while an earlier one is there */
    for (size_t f = 0; f < n_fr; f++) {
        struct live *e = &l->live[fr[f].i];
        char k[24];
        const char *node;
        char nodes[512];

        sid_key(k, sizeof(k), e->sid);
        if (json_object_get(l->linger_jobs, k)) {
            if (e->adopted_run == fr[f].run) { /* its agent may run it: kept, not started */
                json_object_set_new(fr[f].x, "hold", json_true());
            } else {
                run_zero(fr[f].x);
            }
            if (!l->linger_held)
                l->linger_held = json_object();
            json_object_set_new(l->linger_held, k, json_true());
            if (e->held_run != fr[f].run && (node = where(l, k, nodes, sizeof(nodes)))) {
                e->held_run = fr[f].run;
                if (!*waits)
                    *waits = json_array();
                json_array_append_new(*waits, json_pack("[I,s]", (json_int_t)e->sid, node));
            }
            continue;
        }
        json_object_del(l->linger_held, k);
        if (e->shown_run != fr[f].run) { /* the first of its tasks here */
            e->shown_run = fr[f].run;
            json_decref(e->shown_nodes);
            e->shown_nodes = json_array();
        }
        const char *n = json_string_value(json_object_get(fr[f].x, "node"));
        bool has = false;
        size_t i;
        json_t *y;
        json_array_foreach(e->shown_nodes, i, y) has |= n && !strcmp(json_string_value(y), n);
        if (n && !has)
            json_array_append_new(e->shown_nodes, json_string(n));
    }
    l->dseq = seq;
}

void loop_linger_replied(struct loop *l, const char *node, const char *version)
{
    json_t *r = json_pack("[s,I]", version, (json_int_t)l->dseq);

    if (!l->replied)
        l->replied = json_object();
    if (r)
        json_object_set_new(l->replied, node, r);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

void loop_linger_heard(struct loop *l, const char *node, const char *known, const json_t *stopping)
{
    size_t n = json_array_size(stopping), i;
    int64_t *ids = n ? allot_malloc(n * sizeof(*ids)) : NULL;
    bool freed = false;
    const char *k;
    json_t *v, *on;
    void *tmp;

    if (!l || (n && !ids)) {
        allot_free(ids);
        return; /* out of memory: the next heartbeat says it again */
    }
    for (i = 0; i < n; i++)
        ids[i] = json_integer_value(json_array_get(stopping, i));
    if (n)
        qsort(ids, n, sizeof(*ids), cmp_i64);
    pthread_mutex_lock(&l->dmu);
    json_t *r = json_object_get(l->replied, node);
    const char *ver = json_string_value(json_array_get(r, 0));
    uint64_t seq = (uint64_t)json_integer_value(json_array_get(r, 1));

    /* the agent had the desired state of that reply (no version: the
     * reply itself), made at seq: it stopped every run that state no
     * longer shows, and lists those whose processes are still there */
    on = json_object_get(l->linger, node);
    if (ver && (!known || !strcmp(ver, known))) {
        json_object_foreach_safe(on, tmp, k, v)
        {
            int64_t sid = strtoll(k, NULL, 10);
            if ((uint64_t)json_integer_value(v) > seq ||
                (n && bsearch(&sid, ids, n, sizeof(*ids), cmp_i64)))
                continue;
            freed |= json_object_get(l->linger_held, k) != NULL;
            gone(l, on, k);
        }
    }
    if (on && !json_object_size(on))
        json_object_del(l->linger, node);
    /* preempted jobs in their grace period that this node showed stopping
     * (a state from their seq on) and lists no more: gone here. Only an
     * agent that sends the list says so (an older one says nothing). */
    int64_t gone_ids[16];
    size_t n_gone = 0;
    if (stopping && ver && (!known || !strcmp(ver, known))) {
        json_object_foreach_safe(l->stop_wait, tmp, k, v)
        {
            int64_t sid = strtoll(k, NULL, 10);
            json_t *nodes = json_object_get(v, "nodes");
            if (!json_object_get(nodes, node) ||
                (uint64_t)json_integer_value(json_object_get(v, "seq")) > seq ||
                (n && bsearch(&sid, ids, n, sizeof(*ids), cmp_i64)))
                continue;
            if (json_object_size(nodes) == 1 && n_gone == sizeof(gone_ids) / sizeof(gone_ids[0]))
                continue; /* the last node of more than can be told now: the next heartbeat */
            json_object_del(nodes, node);
            if (!json_object_size(nodes)) {
                gone_ids[n_gone++] = sid;
                json_object_del(l->stop_wait, k);
            }
        }
    }
    pthread_mutex_unlock(&l->dmu);
    allot_free(ids);
    if (freed) /* a held run may be shown now */
        loop_post(l, LOOP_LINGER_GONE, 0, NULL);
    for (size_t g = 0; g < n_gone; g++)
        loop_post(l, LOOP_JOB_STOPPED, gone_ids[g], NULL);
}

void loop_linger_forget_node(struct loop *l, const char *node)
{
    const char *k;
    json_t *v, *on;
    void *tmp;

    pthread_mutex_lock(&l->dmu);
    on = json_object_get(l->linger, node);
    json_object_foreach_safe(on, tmp, k, v) gone(l, on, k);
    json_object_del(l->linger, node);
    json_object_del(l->replied, node);
    pthread_mutex_unlock(&l->dmu);
}

void loop_linger_rebuilt(struct loop *l, struct live *e, const struct allot_store_job *j,
                         bool adopted)
{
    struct allot_store *rd = srv_reader(l->srv);
    struct allot_store_run run = {0};
    json_t *p = NULL, *t;
    size_t i;

    if (!rd || j->start_time <= 0)
        return; /* never ran */
    if (adopted) {
        if (j->state != ALLOT_SJ_STARTING)
            return; /* its agent said it runs: nothing else runs it */
        e->adopted_run = j->start_time;
        /* it may have been held when allotd stopped (a hold is not stored
         * before the placement is), and which nodes it waited for is not
         * stored: every node in service answers once, which says whether
         * it still stops an earlier run of the job */
        e->held_run = j->start_time; /* no "waiting" event naming one node */
        pthread_mutex_lock(&l->dmu);
        for (int n = 0; n < allot_cluster_node_count(l->c); n++)
            note_up(l, j->id, allot_cluster_node(l->c, n)->name, l->dseq);
        pthread_mutex_unlock(&l->dmu);
        return;
    }
    /* its last run (requeued before the restart, or not adopted now) */
    if (allot_store_run_last(rd, j->id, &run) == 0)
        p = json_loads(run.placement ? run.placement : "", 0, NULL);
    pthread_mutex_lock(&l->dmu);
    json_array_foreach(json_object_get(p, "tasks"), i, t)
        note_up(l, j->id, json_string_value(json_object_get(t, "node")), l->dseq);
    pthread_mutex_unlock(&l->dmu);
    json_decref(p);
    allot_store_run_clear(&run);
}

int loop_linger_seen(struct loop *l, size_t i, int64_t run, struct linger_drop **dr, size_t *n,
                     size_t *cap)
{
    struct live *e = &l->live[i];

    if (!e->shown_run || e->shown_run == run)
        return 0;
    if (allot_grow((void **)dr, cap, *n + 1, sizeof(**dr)) < 0)
        return ALLOT_ENOMEM; /* kept as shown: noted at a later cycle */
    (*dr)[(*n)++] = (struct linger_drop){.sid = e->sid, .nodes = e->shown_nodes};
    e->shown_nodes = NULL;
    e->shown_run = 0;
    return 0;
}

void loop_linger_fresh(struct fresh_run **fr, size_t *n, size_t *cap, size_t i, json_t *x,
                       int64_t run)
{
    if (allot_grow((void **)fr, cap, *n + 1, sizeof(**fr)) < 0) {
        run_zero(x); /* not looked at: not shown either (the next cycle tries again) */
        return;
    }
    (*fr)[(*n)++] = (struct fresh_run){.i = i, .x = x, .run = run};
}

struct wait_write {
    json_t *waits;
    int64_t now;
};

static int wait_fn(struct allot_store *st, void *arg)
{
    const struct wait_write *w = arg;
    size_t i;
    json_t *x;
    int rc = 0;

    json_array_foreach(w->waits, i, x)
    {
        char detail[600];
        const char *on = json_string_value(json_array_get(x, 1));
        allot_fmt(detail, sizeof(detail), "its new run waits for its last to end on node%s %s",
                  strchr(on, ',') ? "s" : "", on);
        struct allot_store_event ev = {.job_id = json_integer_value(json_array_get(x, 0)),
                                       .time = w->now,
                                       .kind = "waiting",
                                       .detail = detail};
        if (rc == 0)
            rc = allot_store_event_add(st, &ev, NULL);
    }
    return rc;
}

void loop_linger_done(struct loop *l, struct linger_drop *dr, size_t n_dr, json_t *waits)
{
    size_t i;
    json_t *x;

    for (size_t d = 0; d < n_dr; d++)
        json_decref(dr[d].nodes);
    allot_free(dr);
    json_array_foreach(waits, i, x)
    {
        LOG_INFO("loop", "job %lld: its new run waits for the last to end on node %s",
                 (long long)json_integer_value(json_array_get(x, 0)),
                 json_string_value(json_array_get(x, 1)));
    }
    struct wait_write w = {.waits = waits, .now = srv_now()};
    if (json_array_size(waits) && srv_write(l->srv, wait_fn, &w) < 0)
        LOG_WARN("loop", "the waiting events of %zu jobs were not stored", json_array_size(waits));
    json_decref(waits);
}

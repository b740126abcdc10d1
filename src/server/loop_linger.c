/*
 * One run of a job at a time (docs/allotd.md, "One run at a time"). When
 * the desired state stops showing a run of a job on a node (the job was
 * requeued, preempted, evicted, or a task of its gang failed), that node's
 * agent may still be stopping it for its grace period. The job's next run
 * is published with run 0 (its agents wait) until every such node has said
 * it no longer holds the job: a heartbeat from an agent that had a desired
 * state made after the drop, whose "stopping" list lacks the job. A lost
 * node no longer counts (its agent fences its tasks), and an agent that
 * sends no "stopping" list (older than the field) counts once it had that
 * desired state. Everything here is under l->dmu; loop_linger_publish runs
 * on the loop thread, loop_linger_heard on a request thread.
 */
#include "loop_int.h"

#include "allot/common.h"
#include "log.h"

#include <string.h>

/* Whether d's array for node holds job sid's run `run`. */
static bool shows_run(const json_t *arr, int64_t sid, int64_t run)
{
    size_t i;
    json_t *x;

    json_array_foreach(arr, i, x)
    {
        if (json_integer_value(json_object_get(x, "job")) == sid &&
            json_integer_value(json_object_get(x, "run")) == run)
            return true;
    }
    return false;
}

static bool lingers(const struct loop *l, int64_t sid, const char **node)
{
    for (size_t i = 0; i < l->n_linger; i++)
        if (l->linger[i].sid == sid) {
            *node = l->linger[i].node;
            return true;
        }
    return false;
}

/* Job sid's run left node at desired state seq: noted (one entry per job
 * and node, its latest drop). */
static void note(struct loop *l, int64_t sid, const char *node, uint64_t seq)
{
    for (size_t i = 0; i < l->n_linger; i++)
        if (l->linger[i].sid == sid && !strcmp(l->linger[i].node, node)) {
            l->linger[i].seq = seq;
            return;
        }
    if (allot_grow((void **)&l->linger, &l->cap_linger, l->n_linger + 1, sizeof(*l->linger)) < 0) {
        LOG_ERROR("loop",
                  "out of memory: job %lld's next run may start before its last ends "
                  "on node %s",
                  (long long)sid, node);
        return;
    }
    l->linger[l->n_linger].sid = sid;
    l->linger[l->n_linger].seq = seq;
    allot_strlcpy(l->linger[l->n_linger].node, node, sizeof(l->linger[0].node));
    l->n_linger++;
}

void loop_linger_publish(struct loop *l, json_t *d, const struct fresh_run *fr, size_t n_fr)
{
    const char *node;
    json_t *arr;
    uint64_t seq = l->dseq + 1; /* d's */

    /* the runs the last desired state showed that d does not */
    json_object_foreach(l->desired, node, arr)
    {
        const json_t *now = json_object_get(d, node);
        int i = allot_cluster_find_node(l->c, node);
        size_t k;
        json_t *x;

        if (i < 0 || allot_cluster_node(l->c, i)->state == ALLOT_NODE_LOST)
            continue; /* its agent fenced its tasks; allotd counts them gone */
        json_array_foreach(arr, k, x)
        {
            int64_t sid = json_integer_value(json_object_get(x, "job"));
            int64_t run = json_integer_value(json_object_get(x, "run"));

            if (run != 0 && !shows_run(now, sid, run)) /* run 0: never started there */
                note(l, sid, node, seq);
        }
    }
    /* a run shown for the first time waits while an earlier one is there */
    for (size_t f = 0; f < n_fr; f++) {
        struct live *e = &l->live[fr[f].i];

        if (lingers(l, e->sid, &node)) {
            json_object_set_new(fr[f].x, "run", json_integer(0));
            json_object_del(fr[f].x, "job_token");
            if (e->held_run != fr[f].run) {
                e->held_run = fr[f].run;
                LOG_INFO("loop", "job %lld: its new run waits for the last to end on node %s",
                         (long long)e->sid, node);
            }
        } else {
            e->shown_run = fr[f].run;
        }
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

void loop_linger_heard(struct loop *l, const char *node, const char *known, const json_t *stopping)
{
    bool gone = false;

    if (!l || !known)
        return;
    pthread_mutex_lock(&l->dmu);
    json_t *r = json_object_get(l->replied, node);
    const char *v = json_string_value(json_array_get(r, 0));
    uint64_t seq = (uint64_t)json_integer_value(json_array_get(r, 1));

    /* the agent had the desired state of that reply, made at seq: it
     * stopped every run that state no longer shows, and lists those whose
     * processes are still there */
    for (size_t i = l->n_linger; v && !strcmp(v, known) && i-- > 0;) {
        const struct linger *g = &l->linger[i];
        bool held = false;
        size_t k;
        json_t *x;

        if (g->seq > seq || strcmp(g->node, node) != 0)
            continue;
        json_array_foreach(stopping, k, x) held |= json_integer_value(x) == g->sid;
        if (!held) {
            l->linger[i] = l->linger[--l->n_linger];
            gone = true;
        }
    }
    pthread_mutex_unlock(&l->dmu);
    if (gone)
        loop_post(l, LOOP_LINGER_GONE, 0, NULL);
}

void loop_linger_forget_node(struct loop *l, const char *node)
{
    pthread_mutex_lock(&l->dmu);
    for (size_t i = l->n_linger; i-- > 0;)
        if (!strcmp(l->linger[i].node, node))
            l->linger[i] = l->linger[--l->n_linger];
    json_object_del(l->replied, node);
    pthread_mutex_unlock(&l->dmu);
}

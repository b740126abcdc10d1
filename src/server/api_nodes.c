/*
 * Node routes: the agent endpoints (register with an inventory; heartbeat
 * carrying job state reports, answered with the node's desired state from
 * the scheduling loop) and the node list. A node's inventory is fixed
 * once registered: registering again with the same inventory is a no-op,
 * with another one a 409. An admin cordons a node (no new jobs), drains it
 * (no new jobs; the running ones finish: drained once empty) or makes it
 * ready again (uncordon).
 */
#include "agentproto.h"
#include "http.h"
#include "loop.h"
#include "meter.h"

#include "allot/cluster.h"
#include "allot/common.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

struct register_write {
    struct req *r;
    const char *name, *inv, *target;
    int64_t now, expiry;
    int credential;                     /* CRED_*: the node credential the agent asks for */
    uint8_t hash[ALLOT_STORE_HASH_LEN]; /* CRED_HASH: its secret's SHA-256 */
    bool busy;                          /* tasks are placed on the node (the loop's count) */
    int status;      /* OUT: 201 new, 200 same or changed inventory, 409 another one refused,
                        403 another agent's */
    bool changed;    /* OUT: the node took the new inventory */
    int old_state;   /* OUT: the stored state (enum allot_store_node_state) */
    char secret[80]; /* OUT: the node credential issued ("" when none, or CRED_HASH) */
    bool bound;      /* OUT: the node speaks with its own credential now (issued, or the caller) */
    int returns;     /* OUT: a lost node: the state it returns in (loop_node_return_get) */
};

enum { CRED_NONE, CRED_ISSUE, CRED_HASH };

/* Whether the caller is another node's credential (a token "node/X" with X
 * not `node`): it speaks for its own node only, and registers no other. */
static bool other_nodes_credential(const struct req *r, const char *node)
{
    const char *n = r->who.name ? r->who.name : "";

    return r->who.role == ALLOT_ROLE_AGENT && !strncmp(n, "node/", 5) && strcmp(n + 5, node) != 0;
}

/* Whether the calling token may speak for stored node n: the agent token
 * it is bound to may; so may any other once that one is revoked or expired (or when
 * none is bound yet), and the node is then bound to the caller (put with
 * its token). 1 yes, 0 no, or a negative ALLOT_E*. One agent's token cannot
 * heartbeat, report or take over another agent's node; an admin's can (it
 * binds nothing). */
static int node_speaker(struct allot_store *st, struct req *r, struct allot_store_node *n)
{
    struct allot_store_token t = {0};
    int rc;

    if (other_nodes_credential(r, n->name))
        return 0;
    /* an admin may speak for any node, and binds none to itself */
    if (n->token_id == r->who.token_id || r->who.role != ALLOT_ROLE_AGENT)
        return 1;
    if (n->token_id != 0) {
        rc = allot_store_token_get(st, n->token_id, &t);
        bool live = rc == 0 && t.revoked == 0 && (!t.expires || srv_now() < t.expires);
        allot_store_token_clear(&t);
        if (rc < 0 && rc != ALLOT_ENOENT)
            return rc;
        if (live)
            return 0;
    }
    n->token_id = r->who.token_id;
    rc = allot_store_node_put(st, n);
    return rc < 0 ? rc : 1;
}

/* A node credential for node `name`, registered by an agent token that
 * is not its credential yet (a join token several nodes may share): a new
 * agent token "node/NAME" the node is bound to from now on, so that the
 * join token, and every other node holding it, can no longer speak for
 * this node. *secret gets the token ("" when the caller already is the
 * node's credential). 0 or a negative ALLOT_E*. */
static int node_credential(struct allot_store *st, struct register_write *w)
{
    struct allot_store_node n = {0};
    char tname[160], target[64];
    int rc;

    w->secret[0] = '\0';
    allot_fmt(tname, sizeof(tname), "node/%s", w->name);
    if (w->r->who.name && !strcmp(w->r->who.name, tname)) {
        w->bound = true;
        return 0;
    }
    struct allot_store_token t = {
        .name = tname, .role = ALLOT_ROLE_AGENT, .tenant = "", .created = w->now};
    if (w->credential == CRED_HASH) /* the agent's own secret, kept before it asked */
        memcpy(t.hash, w->hash, sizeof(t.hash));
    else
        auth_new_secret(w->secret, sizeof(w->secret), t.hash);
    if ((rc = allot_store_token_add(st, &t, &t.id)) < 0 ||
        (rc = allot_store_node_get(st, w->name, &n)) < 0)
        goto out;
    n.token_id = t.id;
    if ((rc = allot_store_node_put(st, &n)) < 0)
        goto out;
    allot_fmt(target, sizeof(target), "token/%lld", (long long)t.id);
    rc = api_audit(st, w->r, target, "ok (node credential)", w->now);
    w->bound = rc == 0;
out:
    allot_store_node_clear(&n);
    if (rc < 0)
        w->secret[0] = '\0';
    return rc;
}

/* Group-commit write: a new node, or a heartbeat of a known one. */
static int register_fn(struct allot_store *st, void *arg)
{
    struct register_write *w = arg;
    struct allot_store_node old = {0};
    int rc = allot_store_node_get(st, w->name, &old);

    if (rc == 0) {
        bool same = !strcmp(old.inventory ? old.inventory : "", w->inv);
        int speaker = node_speaker(st, w->r, &old);

        w->old_state = old.state;
        rc = speaker < 0 ? speaker : 0;
        if (old.state == ALLOT_SN_LOST) {
            int back = loop_node_return_get(st, w->name);
            w->returns = back < 0 ? ALLOT_SN_READY : back;
        }
        /* another inventory (the server changed: GPUs, their mode,
         * memory) only while the node is out of service and runs nothing,
         * as a node is drained before its hardware changes */
        if (speaker == 0)
            w->status = 403;
        else if (!same && (old.state == ALLOT_SN_READY || w->busy))
            w->status = 409;
        else
            w->status = 200;
        if (!rc && w->status == 200 && !same) {
            char *was = old.inventory;
            old.inventory = (char *)w->inv;
            rc = allot_store_node_put(st, &old);
            old.inventory = was;
            w->changed = rc == 0;
        }
        if (!rc && w->status == 200) {
            rc = allot_store_node_heartbeat(st, w->name, w->now, w->expiry);
            if (!rc)
                rc = api_audit(st, w->r, w->target, same ? "ok (again)" : "ok (new inventory)",
                               w->now);
        }
    } else if (rc == ALLOT_ENOENT && other_nodes_credential(w->r, w->name)) {
        w->status = 403;
        rc = 0;
    } else if (rc == ALLOT_ENOENT) {
        struct allot_store_node n = {
            .name = (char *)w->name,
            .inventory = (char *)w->inv,
            .state = ALLOT_SN_READY,
            .last_heartbeat = w->now,
            .lease_expiry = w->expiry,
            .token_id = w->r->who.role == ALLOT_ROLE_AGENT ? w->r->who.token_id : 0};
        w->status = 201;
        rc = allot_store_node_put(st, &n);
        if (!rc)
            rc = api_audit(st, w->r, w->target, "ok", w->now);
    }
    if (!rc && (w->status == 200 || w->status == 201) && w->credential != CRED_NONE &&
        w->r->who.role == ALLOT_ROLE_AGENT)
        rc = node_credential(st, w);
    allot_store_node_clear(&old);
    return rc;
}

/* Tells the loop of a node stored new (LOOP_NODE_ADDED) or with another
 * inventory (LOOP_NODE_CHANGED) of n_gpus GPUs: the submission limits
 * count it at once, and no "can never run" refusal comes from the loop's
 * counts until it has taken it (nodes_adding). */
static void node_to_loop(struct req *r, const char *name, int n_gpus, int kind)
{
    int cur = atomic_load(&r->srv->max_node_gpus);

    /* counted as adding first: a recount of the limits meanwhile
     * (limits_recount) keeps the raise below */
    atomic_fetch_add(&r->srv->nodes_adding, 1);
    while (n_gpus > cur && !atomic_compare_exchange_weak(&r->srv->max_node_gpus, &cur, n_gpus))
        ;
    if (loop_post(r->srv->loop, kind, 0, name) < 0)
        atomic_fetch_sub(&r->srv->nodes_adding, 1);
}

int api_nodes_register(struct req *r)
{
    json_t *b = api_body_object(r);
    char err[512], target[96];
    char *inv = NULL;
    int64_t now = srv_now();
    int rc, n_gpus = 0, status = 201;
    int64_t vfs_used = 0;

    const char *cq = api_query(r, "credential");
    uint8_t hash[ALLOT_STORE_HASH_LEN] = {0};
    bool issue = false;
    int credential = CRED_NONE;

    if (!b)
        return 0;
    /* a flag (allotd makes the secret and shows it once), or the SHA-256
     * of the agent's own secret, 64 hex digits (nothing secret travels
     * back: a lost answer loses nothing) */
    if (cq && strlen(cq) == 2 * ALLOT_STORE_HASH_LEN &&
        strspn(cq, "0123456789abcdefABCDEF") == 2 * ALLOT_STORE_HASH_LEN) {
        for (int i = 0; i < ALLOT_STORE_HASH_LEN; i++) {
            unsigned x;
            sscanf(cq + 2 * i, "%2x", &x);
            hash[i] = (uint8_t)x;
        }
        credential = CRED_HASH;
    } else if (!api_query_flag(r, "credential", &issue)) {
        goto out;
    } else if (issue) {
        credential = CRED_ISSUE;
    }
    rc = agentproto_inventory(b, r->srv->cat, &n_gpus, err, sizeof(err));
    if (rc) {
        api_error(r, rc, rc == 400 ? "bad_request" : "invalid", "%s", err);
        goto out;
    }
    const char *name = json_string_value(json_object_get(b, "name"));
    inv = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    allot_fmt(target, sizeof(target), "node/%s", name);
    struct register_write w = {.r = r,
                               .busy = loop_node_tasks(r->srv->loop, name, &vfs_used) > 0,
                               .name = name,
                               .inv = inv,
                               .target = target,
                               .now = now,
                               .expiry = now + r->srv->cfg.lease / 1000,
                               .credential = credential};
    memcpy(w.hash, hash, sizeof(hash));
    rc = srv_write(r->srv, register_fn, &w);
    status = w.status;
    if (rc)
        r->audited = false;
    if (rc == ALLOT_EEXIST && credential == CRED_HASH)
        api_error(r, 409, "conflict",
                  "query argument \"credential\": that secret is already a token's; make a new "
                  "one");
    else if (rc < 0)
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    else if (status == 409)
        api_error(r, 409, "conflict",
                  "node %s is registered with another inventory; it takes a new one only out of "
                  "service and empty: %s",
                  name,
                  w.old_state == ALLOT_SN_READY
                      ? "cordon or drain it first (allot drain NAME), then register again"
                      : "its jobs have not ended yet; register again once they have");
    else if (status == 403 && other_nodes_credential(r, name))
        api_error(r, 403, "forbidden", "a node credential (token %s) speaks for its own node only",
                  r->who.name);
    else if (status == 403)
        api_error(r, 403, "forbidden",
                  "node %s belongs to another agent token; revoke that token to move the node",
                  name);
    else {
        /* a new node, or a known one's new inventory: the loop counts it
         * (a changed one before the lease: a lost node changes while lost) */
        if (status == 201 || w.changed)
            node_to_loop(r, name, n_gpus, status == 201 ? LOOP_NODE_ADDED : LOOP_NODE_CHANGED);
        if (status != 201)
            loop_post(r->srv->loop, LOOP_NODE_SEEN, now + r->srv->cfg.lease / 1000, name);
        json_int_t expiry = (json_int_t)now + (json_int_t)(r->srv->cfg.lease / 1000);

        /* a known node keeps its state: cordoned stays cordoned (a lost one
         * is back with this registration's lease, in the state an admin gave
         * it, else ready) */
        const char *state = allot_store_node_state_name(
            status == 200 && w.old_state != ALLOT_SN_LOST ? w.old_state : w.returns);
        json_t *o = json_pack("{s:s,s:s,s:I,s:I}", "name", name, "state", state, "lease_expiry",
                              expiry, "lease_ms", (json_int_t)r->srv->cfg.lease);
        if (w.secret[0]) /* shown once, as a token's secret is */
            json_object_set_new(o, "node_token", json_string(w.secret));
        if (credential != CRED_NONE) /* whether the asked-for credential speaks for it now */
            json_object_set_new(o, "node_credential", json_boolean(w.bound));
        api_json(r, status, o);
    }
out:
    free(inv);
    json_decref(b);
    return 0;
}

/* How many distinct nodes the placement (JSON text) uses, and whether
 * `name` is one of them. */
static int placement_nodes(const char *placement, const char *name, bool *on)
{
    json_t *pl = placement ? json_loads(placement, 0, NULL) : NULL, *t, *seen = json_object();
    int n;
    size_t i;

    *on = false;
    json_array_foreach(json_object_get(pl, "tasks"), i, t)
    {
        const char *nn = json_string_value(json_object_get(t, "node"));

        if (nn) {
            *on |= !strcmp(nn, name);
            json_object_set_new(seen, nn, json_true());
        }
    }
    n = (int)json_object_size(seen);
    json_decref(seen);
    json_decref(pl);
    return n;
}

/* How many distinct nodes reported `kind` of a gang's tasks on them
 * ("node-running" or "node-done" events) in its current run (after its
 * last "placed" event), counting `node`'s report being written; *had says
 * whether `node` had reported it already. A node whose tasks succeeded
 * counts as running too (tasks that end before the agent's next report
 * are reported ended, never running). Reads every page of the job's
 * events (a job that reports its saves has many). */
static int nodes_reported(struct allot_store *st, int64_t job, const char *kind, const char *node,
                          bool *had, int *rc)
{
    struct allot_store_event *ev = NULL;
    json_t *seen = json_object();
    int64_t after = 0;
    size_t n = 0;
    int count;

    do {
        *rc = allot_store_event_list(st, job, after, ALLOT_STORE_PAGE_MAX, &ev, &n);
        for (size_t i = 0; !*rc && i < n; i++) {
            if (!strcmp(ev[i].kind, "placed"))
                json_object_clear(seen); /* a new run: the earlier one's reports are gone */
            else if ((!strcmp(ev[i].kind, kind) ||
                      (!strcmp(kind, "node-running") && !strcmp(ev[i].kind, "node-done"))) &&
                     ev[i].detail)
                json_object_set_new(seen, ev[i].detail, json_true());
            after = ev[i].seq;
        }
        allot_store_events_free(ev, n);
    } while (!*rc && n == ALLOT_STORE_PAGE_MAX);
    *had = json_object_get(seen, node) != NULL;
    json_object_set_new(seen, node, json_true());
    count = (int)json_object_size(seen);
    json_decref(seen);
    return count;
}

/* Adds the job's event `kind` for `node` (a gang's node reporting), once
 * per node and run. */
static int node_event(struct allot_store *st, int64_t job, const char *kind, const char *node,
                      int64_t now, bool had)
{
    struct allot_store_event ev = {
        .job_id = job, .time = now, .kind = (char *)kind, .detail = (char *)node};

    return had ? 0 : allot_store_event_add(st, &ev, NULL);
}

/* Whether stored job spec text lets the job be requeued (its "requeue",
 * true unless false). */
static bool spec_requeue(const char *spec)
{
    json_t *v = spec ? json_loads(spec, 0, NULL) : NULL;
    bool requeue = !json_is_false(json_object_get(v, "requeue"));

    json_decref(v);
    return requeue;
}

/* Applies one job report of node `node` (inside the heartbeat's write).
 * *ended gets the job's id when the report ended it (the loop must hear
 * of it). A report that succeeded ends a job whose tasks are on several
 * nodes only once every one of them reported (a "node-done" event each);
 * a failure or loss ends it at once (the other tasks are stopped). */
static int job_report(struct allot_store *st, const char *node, json_t *rep, int64_t now,
                      int64_t *ended, int64_t *evict, int64_t *evict_run, int64_t *started)
{
    json_t *jid = json_object_get(rep, "id"), *js = json_object_get(rep, "state");
    json_t *jx = json_object_get(rep, "exit_code");
    const char *detail = json_string_value(json_object_get(rep, "detail"));
    struct allot_store_job j = {0};
    int state, rc, nodes = 0;
    bool on = false;

    json_t *run = json_object_get(rep, "run");

    *ended = *evict = *evict_run = *started = 0;
    state = allot_store_job_state_parse(json_string_value(js));
    rc = allot_store_job_get(st, json_integer_value(jid), &j);
    if (rc == 0)
        nodes = placement_nodes(j.placement, node, &on);
    if (rc == ALLOT_ENOENT ||
        (rc == 0 && (allot_store_job_state_terminal(j.state) || !on ||
                     (json_integer_value(run) != 0 && json_integer_value(run) != j.start_time)))) {
        allot_store_job_clear(&j);
        return 0; /* stale report: the job ended, moved, never was here, or runs anew */
    }
    if (rc < 0)
        return rc;
    if (state == ALLOT_SJ_LOST && j.state != ALLOT_SJ_PENDING && spec_requeue(j.spec)) {
        /* its agent stopped it on its own (allotd was out of reach), or
         * lost it (its supervisor died: no exit status): it queues again,
         * as when its node is lost, stored in this heartbeat's write (the
         * agent does not report it twice); the loop's core follows */
        char why[300];
        if (json_is_true(json_object_get(rep, "fenced")))
            allot_fmt(why, sizeof(why),
                      "stopped on node %s: its agent could not reach allotd for most of its lease",
                      node);
        else
            allot_fmt(why, sizeof(why), "lost on node %s: %.200s", node,
                      detail ? detail : "its process vanished");
        rc = loop_requeue_stored(st, j.id, why, now);
        *evict = rc ? 0 : j.id;
        *evict_run = j.start_time;
        allot_store_job_clear(&j);
        return rc;
    }
    /* a gang runs once every node of it runs its tasks (its time limit
     * counts from then) and succeeds once every node's tasks succeeded:
     * until then each node's report is an event of its own */
    const char *step = state == ALLOT_SJ_RUNNING && j.state == ALLOT_SJ_STARTING    ? "node-running"
                       : state == ALLOT_SJ_SUCCEEDED && j.state != ALLOT_SJ_PENDING ? "node-done"
                                                                                    : NULL;
    bool had = false;
    int reported = nodes > 1 && step ? nodes_reported(st, j.id, step, node, &had, &rc) : 0;

    if (rc) {
        allot_store_job_clear(&j);
        return rc;
    }
    if (reported && reported < nodes) {
        rc = node_event(st, j.id, step, node, now, had);
    } else if (state == ALLOT_SJ_RUNNING && j.state == ALLOT_SJ_STARTING) {
        struct allot_store_event ev = {.job_id = j.id, .time = now, .kind = "running"};
        j.state = ALLOT_SJ_RUNNING;
        rc = allot_store_job_update(st, &j);
        if (!rc)
            rc = allot_store_event_add(st, &ev, NULL);
        *started = j.id;
    } else if ((state == ALLOT_SJ_SUCCEEDED || state == ALLOT_SJ_FAILED ||
                state == ALLOT_SJ_LOST) &&
               j.state != ALLOT_SJ_PENDING) {
        json_t *rt = json_object_get(rep, "runtime_ms");
        char evd[700], where[700];
        /* a job on several nodes: which node's tasks ended it */
        if (detail && nodes > 1) {
            allot_fmt(where, sizeof(where), "on node %s: %s", node, detail);
            detail = where;
        }
        /* the event says how long the job's processes ran, as the agent measured */
        if (rt)
            allot_fmt(evd, sizeof(evd), "%s%sran %.3f s", detail ? detail : "", detail ? "; " : "",
                      (double)json_integer_value(rt) / 1000.0);
        struct allot_store_event ev = {.job_id = j.id,
                                       .time = now,
                                       .kind = (char *)allot_store_job_state_name(state),
                                       .detail = rt ? evd : (char *)detail};
        j.state = state;
        j.end_time = now;
        j.has_exit_code = jx != NULL;
        j.exit_code = (int)json_integer_value(jx);
        allot_free(j.pending_reason);
        j.pending_reason = detail ? allot_strdup(detail) : NULL; /* why it ended */
        rc = allot_store_job_update(st, &j);
        if (!rc)
            rc = allot_store_event_add(st, &ev, NULL);
        if (!rc)
            *ended = j.id;
    }
    allot_store_job_clear(&j);
    return rc;
}

struct beat_write {
    struct req *r;
    const char *name, *target;
    json_t *jobs;
    json_t *samples; /* usage samples to store (each once) */
    int64_t now, expiry;
    struct allot_store_node *n; /* OUT: the node */
    int64_t *ended;             /* OUT: jobs that ended (64 at most) */
    size_t n_ended;
    int64_t *evict; /* OUT: jobs its agent fenced or lost, requeued in this write (64 at most) */
    int64_t *evict_run; /* OUT: ... and the run of each it stopped */
    size_t n_evict;
    int64_t *started; /* OUT: jobs now running (their time limits count from now) */
    size_t n_started;
    bool foreign; /* OUT: the node belongs to another agent token (nothing written) */
};

/* Group-commit write: the lease, the job reports and their audit entry. */
static int beat_fn(struct allot_store *st, void *arg)
{
    struct beat_write *w = arg;
    json_t *x;
    size_t i;
    int rc = allot_store_node_get(st, w->name, w->n);

    if (!rc) {
        rc = node_speaker(st, w->r, w->n);
        if (rc == 0) {
            w->foreign = true;
            return ALLOT_ESTATE; /* rolls back: nothing of it is stored */
        }
        rc = rc < 0 ? rc : 0;
    }
    if (!rc)
        rc = allot_store_node_heartbeat(st, w->name, w->now, w->expiry);
    json_array_foreach(w->jobs, i, x)
    {
        if (rc)
            break;
        rc = job_report(st, w->name, x, w->now, &w->ended[w->n_ended], &w->evict[w->n_evict],
                        &w->evict_run[w->n_evict], &w->started[w->n_started]);
        w->n_ended += w->ended[w->n_ended] != 0;
        w->n_evict += w->evict[w->n_evict] != 0;
        w->n_started += w->started[w->n_started] != 0;
    }
    json_t *mine = json_object(); /* "JOB:TASK" -> placed on this node? */
    char at[128];
    int64_t oldest = INT64_MAX; /* the earliest time a sample stored speaks for, ms */
    json_array_foreach(w->samples, i, x)
    {
        struct allot_store_sample smp = {
            .job_id = json_integer_value(json_object_get(x, "job")),
            .task = (int)json_integer_value(json_object_get(x, "task")),
            .at = json_integer_value(json_object_get(x, "at")),
            .cpu_ns = json_integer_value(json_object_get(x, "cpu_ns")),
            .mem_bytes = json_integer_value(json_object_get(x, "mem_bytes")),
            .gpu_util = json_integer_value(json_object_get(x, "gpu_util")),
            .gpu_mem_bytes = json_integer_value(json_object_get(x, "gpu_mem_bytes")),
            .energy_mj = json_integer_value(json_object_get(x, "energy_mj")),
            .interval_ms = json_integer_value(json_object_get(x, "interval_ms"))};
        if (rc)
            break;
        /* a node measures only what runs or ran on it: samples of another
         * node's task (or of no job) are not stored; those of the run their
         * time falls in are (the agent sends what it measured before a
         * requeue or a preemption took the job away, or sends it late) */
        char key[48];
        allot_fmt(key, sizeof(key), "%lld:%d", (long long)smp.job_id, smp.task);
        json_t *known = json_object_get(mine, key);
        if (!known) {
            struct allot_store_job j = {0};
            int grc = allot_store_job_get(st, smp.job_id, &j);

            task_node(grc == 0 ? j.placement : NULL, smp.task, at, sizeof(at));
            allot_store_job_clear(&j);
            if (grc == 0 && strcmp(at, w->name) != 0) {
                struct allot_store_run run = {0};

                /* the run its time falls in (the job may run elsewhere by now) */
                grc = allot_store_run_at(st, smp.job_id, smp.at / 1000, &run);
                if (grc == 0)
                    task_node(run.placement, smp.task, at, sizeof(at));
                allot_store_run_clear(&run);
                grc = grc == ALLOT_ENOENT ? 0 : grc;
            }
            if (grc < 0 && grc != ALLOT_ENOENT) {
                rc = grc;
                break;
            }
            known = json_boolean(!strcmp(at, w->name));
            json_object_set_new(mine, key, known);
        }
        if (json_is_true(known)) {
            rc = allot_store_sample_add(st, &smp, NULL);
            if (smp.at - METER_SAMPLE_SPAN(&smp) < oldest)
                oldest = smp.at - METER_SAMPLE_SPAN(&smp);
        }
    }
    json_decref(mine);
    /* samples of an hour already rolled up for good: roll it up again */
    if (!rc && oldest != INT64_MAX) {
        rc = meter_reopen(st, oldest, w->now);
        meter_note_samples(w->r->srv, oldest);
    }
    if (!rc && json_array_size(w->jobs))
        rc = api_audit(st, w->r, w->target, "ok", w->now);
    return rc;
}

int api_nodes_heartbeat(struct req *r)
{
    const char *name = r->params[0];
    struct allot_store_node n = {0};
    struct hb_body hb = {0};
    json_t *b = NULL, *jobs, *logs, *health;
    int64_t now = srv_now(), expiry = now + r->srv->cfg.lease / 1000;
    int64_t ended[64], evict[64], evict_run[64], started[64], wait_ms;
    const char *known;
    size_t i, n_ended = 0;
    char target[96], err[512];
    int rc;

    if (r->body_len && !(b = api_body_object(r)))
        return 0;
    if (agentproto_heartbeat(b, &hb, err, sizeof(err))) {
        api_error(r, 400, "bad_request", "%s", err);
        goto out;
    }
    jobs = hb.jobs;
    logs = hb.logs;
    health = hb.health;
    known = hb.known;
    wait_ms = hb.wait_ms;
    allot_fmt(target, sizeof(target), "node/%s", name);
    struct beat_write w = {.r = r,
                           .name = name,
                           .target = target,
                           .jobs = jobs,
                           .samples = hb.samples,
                           .now = now,
                           .expiry = expiry,
                           .n = &n,
                           .ended = ended,
                           .evict = evict,
                           .evict_run = evict_run,
                           .started = started};
    rc = srv_write(r->srv, beat_fn, &w);
    n_ended = w.n_ended;
    if (rc)
        r->audited = false;
    if (rc == ALLOT_ENOENT) {
        api_error(r, 404, "not_found", "no node %s; register it first", name);
    } else if (w.foreign) {
        api_error(r, 403, "forbidden", "node %s belongs to another agent token%s", name,
                  other_nodes_credential(r, name) ? " (a node credential speaks for its own only)"
                                                  : "");
    } else if (rc == ALLOT_EFENCED) {
        api_standby(r); /* another allotd leads: only it renews leases */
    } else if (rc < 0) {
        /* the store failed, not the node: its lease is renewed all the same
         * (in the loop's books), so that its agent does not fence its tasks
         * and allotd does not count it lost for what went wrong here; its
         * reports and samples are sent again */
        loop_post(r->srv->loop, LOOP_NODE_SEEN, expiry, name);
        json_t *e = json_pack("{s:{s:s,s:s},s:I}", "error", "code", "store", "message",
                              allot_strerror(rc), "lease_expiry", (json_int_t)expiry);
        api_json(r, 503, e);
    } else {
        for (i = 0; i < n_ended; i++)
            loop_post(r->srv->loop, LOOP_JOB_FINISHED, ended[i], NULL);
        for (i = 0; i < w.n_started; i++)
            loop_post_running(r->srv->loop, started[i], now);
        for (i = 0; i < w.n_evict; i++) /* stored: the core follows */
            loop_post_requeued(r->srv->loop, evict[i], evict_run[i]);
        loop_post(r->srv->loop, LOOP_NODE_SEEN, expiry, name);
        /* earlier runs of jobs that are no longer there: their next may start */
        loop_linger_heard(r->srv->loop, name, known, hb.stopping);
        if (logs || health || hb.gpus || hb.net || hb.live >= 0) {
            /* where `allot logs` reads this node's task logs; its GPUs' health */
            pthread_mutex_lock(&r->srv->agents_lock);
            json_t *e = json_object_get(r->srv->agents, name);
            if (!e) {
                e = json_object();
                json_object_set_new(r->srv->agents, name, e);
            }
            if (logs)
                json_object_update(e, logs);
            if (health) {
                /* an unhealthy GPU fences the node (no new work); the reason shows in
                 * GET /v1/nodes; the loop hears of every change */
                char why[600] = "";
                size_t len = 0, gi;
                json_t *g;
                json_array_foreach(json_object_get(health, "gpus"), gi, g)
                {
                    const char *h = json_string_value(json_object_get(g, "health"));
                    const char *txt = json_string_value(json_object_get(g, "text"));
                    if (h && !strcmp(h, "unhealthy") && len < sizeof(why))
                        len += (size_t)allot_fmt(
                            why + len, sizeof(why) - len, "%sGPU %lld unhealthy: %.120s",
                            len ? "; " : "",
                            (long long)json_integer_value(json_object_get(g, "index")),
                            txt ? txt : "");
                }
                const char *was = json_string_value(json_object_get(e, "fenced"));
                if (strcmp(was ? was : "", why) != 0) {
                    json_object_set_new(e, "fenced", *why ? json_string(why) : json_null());
                    loop_post(r->srv->loop, LOOP_NODE_HEALTH, *why ? 1 : 0, name);
                }
                json_object_set_new(e, "health", json_deep_copy(health));
            }
            if (hb.gpus) /* the latest readings, for /metrics */
                json_object_set_new(e, "gpus", json_deep_copy(hb.gpus));
            if (hb.net) /* the tenant networks' traffic on the node, for /metrics */
                json_object_set_new(e, "net", json_deep_copy(hb.net));
            if (hb.live >= 0) /* tasks still there, ended by allotd or not: drained waits */
                json_object_set_new(e, "live", json_integer(hb.live));
            pthread_mutex_unlock(&r->srv->agents_lock);
        }
        /* long poll: an agent that already has this desired state waits
         * (at most wait_ms) for the next one, so a placement reaches it
         * within one cycle instead of one heartbeat interval */
        char version[32];
        srv_reader_release(r->srv); /* no store read from here: the wait holds no handle */
        json_t *desired =
            loop_desired_wait(r->srv->loop, name, known, json_array_size(jobs) ? 0 : wait_ms,
                              version, sizeof(version));
        /* lease_ms: the lease as this allotd counts it (another allotd may
         * count another since the node registered): its agent fences by it */
        json_t *reply = json_pack("{s:s,s:s,s:I,s:I,s:o,s:s}", "node", name, "state",
                                  allot_store_node_state_name(n.state), "lease_expiry",
                                  (json_int_t)expiry, "lease_ms", (json_int_t)r->srv->cfg.lease,
                                  "jobs", desired, "version", version);
        json_t *peers = loop_node_peers(r->srv->loop, name);
        if (peers) /* tenant networks: the other nodes of each overlay */
            json_object_set_new(reply, "network", json_pack("{s:o}", "peers", peers));
        api_json(r, 200, reply);
    }
    allot_store_node_clear(&n);
    goto out;
out:
    json_decref(b);
    return 0;
}

int api_nodes_list(struct req *r)
{
    struct allot_store_node *n = NULL;
    size_t cnt = 0;
    json_t *a;
    int rc;

    struct allot_store *st = api_reader(r);

    if (!st)
        return 0;
    rc = allot_store_node_list(st, &n, &cnt);
    if (rc < 0)
        return api_error(r, 500, "store", "%s", allot_strerror(rc));
    a = json_array();
    for (size_t i = 0; i < cnt; i++) {
        json_t *inv = json_loads(n[i].inventory ? n[i].inventory : "{}", 0, NULL);
        int64_t vfs_used;
        size_t tasks = loop_node_tasks(r->srv->loop, n[i].name, &vfs_used);
        int vfs = agentproto_rdma_vfs(inv);
        json_t *health, *fenced;

        pthread_mutex_lock(&r->srv->agents_lock);
        health =
            json_deep_copy(json_object_get(json_object_get(r->srv->agents, n[i].name), "health"));
        fenced =
            json_deep_copy(json_object_get(json_object_get(r->srv->agents, n[i].name), "fenced"));
        pthread_mutex_unlock(&r->srv->agents_lock);
        const char *state = srv_node_state(r->srv, &n[i]);

        json_array_append_new(a, json_pack("{s:s,s:s,s:o,s:I,s:I,s:I}", "name", n[i].name, "state",
                                           state, "inventory", inv ? inv : json_object(),
                                           "last_heartbeat", (json_int_t)n[i].last_heartbeat,
                                           "lease_expiry", (json_int_t)n[i].lease_expiry, "tasks",
                                           (json_int_t)tasks));
        json_object_set_new(json_array_get(a, json_array_size(a) - 1), "health",
                            health ? health : json_null());
        /* why the node takes no new work although ready: an unhealthy GPU */
        json_object_set_new(json_array_get(a, json_array_size(a) - 1), "fenced",
                            fenced ? fenced : json_null());
        if (vfs > 0) /* RDMA virtual functions: what the scheduler places against */
            json_object_set_new(json_array_get(a, json_array_size(a) - 1), "rdma_vfs",
                                json_pack("{s:i,s:I}", "total", vfs, "used", (json_int_t)vfs_used));
    }
    allot_store_nodes_free(n, cnt);
    return api_json(r, 200, json_pack("{s:o}", "nodes", a));
}

const char *srv_node_state(struct server *s, const struct allot_store_node *n)
{
    if (n->state != ALLOT_SN_DRAINING)
        return allot_store_node_state_name(n->state);
    /* a draining node without tasks left is drained (as in Slurm): none
     * placed, and none its agent still runs (a job cancelled or preempted
     * ends in allotd at once, its processes after their grace); 0 when
     * not told: an agent that does not count its tasks, or no word from it
     * since this allotd started (its next heartbeat tells) */
    pthread_mutex_lock(&s->agents_lock);
    json_int_t live =
        json_integer_value(json_object_get(json_object_get(s->agents, n->name), "live"));
    pthread_mutex_unlock(&s->agents_lock);
    int64_t vfs;
    return !live && !loop_node_tasks(s->loop, n->name, &vfs) ? "drained" : "draining";
}

/* ---- cordon, drain, uncordon ---- */

struct state_write {
    struct req *r;
    const char *name;
    int state;
    int64_t now;
    int old;   /* OUT: the state before */
    bool lost; /* OUT: the node is lost: it takes the state when it returns */
};

/* Group-commit write: the node's administrative state and the audit entry.
 * A lost node keeps it for its return (its next heartbeat). */
static int state_fn(struct allot_store *st, void *arg)
{
    struct state_write *w = arg;
    struct allot_store_node n = {0};
    char target[96];
    int rc = allot_store_node_get(st, w->name, &n);

    if (rc == 0 && n.state == ALLOT_SN_LOST) {
        w->lost = true;
        w->old = n.state;
        rc = loop_node_return_set(st, w->name, w->state);
    } else if (rc == 0) {
        w->old = n.state;
        n.state = w->state;
        rc = allot_store_node_put(st, &n);
    }
    allot_fmt(target, sizeof(target), "node/%s", w->name);
    if (rc == 0)
        rc = api_audit(st, w->r, target, "ok", w->now);
    allot_store_node_clear(&n);
    return rc;
}

static int set_state(struct req *r, int state)
{
    struct state_write w = {.r = r, .name = r->params[0], .state = state, .now = srv_now()};
    int rc;

    if (!api_no_body(r))
        return 0;
    rc = srv_write(r->srv, state_fn, &w);

    if (rc)
        r->audited = false;
    if (rc == ALLOT_ENOENT)
        return api_error(r, 404, "not_found", "no node %s", w.name);
    if (rc < 0)
        return api_error(r, 500, "store", "%s", allot_strerror(rc));
    if (w.lost) /* it stays lost; it returns in that state */
        return api_json(r, 200,
                        json_pack("{s:s,s:s,s:s,s:s}", "name", w.name, "state", "lost", "previous",
                                  "lost", "returns_as", allot_store_node_state_name(state)));
    loop_post(r->srv->loop, LOOP_NODE_STATE, state, w.name);
    /* the states as GET /v1/nodes says them (a draining node with no task
     * left is drained) */
    struct allot_store_node now = {.name = (char *)w.name, .state = state};
    struct allot_store_node was = {.name = (char *)w.name, .state = w.old};
    return api_json(r, 200,
                    json_pack("{s:s,s:s,s:s}", "name", w.name, "state",
                              srv_node_state(r->srv, &now), "previous",
                              srv_node_state(r->srv, &was)));
}

int api_nodes_cordon(struct req *r)
{
    return set_state(r, ALLOT_SN_CORDONED);
}

int api_nodes_drain(struct req *r)
{
    bool evict;

    if (!api_query_flag(r, "evict", &evict))
        return 0;
    set_state(r, ALLOT_SN_DRAINING);
    /* after the node took no new jobs: its jobs go back to the queue */
    if (evict && r->status == 200)
        loop_post(r->srv->loop, LOOP_NODE_EVICT, 0, r->params[0]);
    return 0;
}

int api_nodes_uncordon(struct req *r)
{
    return set_state(r, ALLOT_SN_READY);
}

/* ---- removal ---- */

struct delete_write {
    struct req *r;
    const char *name;
    int64_t now;
    int state;       /* OUT: the stored state (ALLOT_SN_*) */
    int64_t revoked; /* OUT: the node credential revoked with it, or 0 */
};

/* Group-commit write: a lost node's row goes, with its own credential (a
 * token "node/NAME"; a join token several nodes share stays), and the
 * audit entries. ALLOT_ESTATE for a node that is not lost. */
static int delete_fn(struct allot_store *st, void *arg)
{
    struct delete_write *w = arg;
    struct allot_store_node n = {0};
    struct allot_store_token t = {0};
    char target[96], cred[96];
    int rc = allot_store_node_get(st, w->name, &n);

    if (rc == 0) {
        w->state = n.state;
        if (n.state != ALLOT_SN_LOST)
            rc = ALLOT_ESTATE;
    }
    allot_fmt(cred, sizeof(cred), "node/%s", w->name);
    if (rc == 0 && n.token_id) {
        rc = allot_store_token_get(st, n.token_id, &t);
        if (rc == 0 && !t.revoked && t.name && !strcmp(t.name, cred)) {
            rc = allot_store_token_revoke(st, t.id, w->now);
            allot_fmt(target, sizeof(target), "token/%lld", (long long)t.id);
            if (rc == 0)
                rc = api_audit(st, w->r, target, "ok (its node removed)", w->now);
            w->revoked = rc == 0 ? t.id : 0;
        } else if (rc == ALLOT_ENOENT) {
            rc = 0;
        }
    }
    if (rc == 0)
        rc = allot_store_node_delete(st, w->name);
    if (rc == 0) /* the state an admin gave it is not a new node's of the name */
        rc = loop_node_return_set(st, w->name, ALLOT_SN_READY);
    allot_fmt(target, sizeof(target), "node/%s", w->name);
    if (rc == 0)
        rc = api_audit(st, w->r, target, "ok", w->now);
    allot_store_token_clear(&t);
    allot_store_node_clear(&n);
    return rc;
}

/* DELETE /v1/nodes/{name}: forgets a decommissioned node. Only a lost one
 * (its agent stopped: no heartbeat within the lease), since a running
 * agent registers its node again; it runs nothing (its jobs went back to
 * the queue or ended when it was lost). Its history (jobs, usage, audit)
 * stays; the same name registered later is a new node. */
int api_nodes_delete(struct req *r)
{
    struct delete_write w = {.r = r, .name = r->params[0], .now = srv_now()};
    int64_t vfs;
    size_t tasks = loop_node_tasks(r->srv->loop, w.name, &vfs);
    int rc;

    /* a lost node's tasks left the core with it; here only if it came
     * back and took work since (the write sees whether it is lost) */
    if (tasks) {
        r->audited = false;
        return api_error(r, 409, "conflict",
                         "node %s still has %zu tasks placed; drain it and let them end "
                         "(allot drain --wait %s), then stop its agent",
                         w.name, tasks, w.name);
    }
    rc = srv_write(r->srv, delete_fn, &w);
    if (rc)
        r->audited = false;
    if (rc == ALLOT_ENOENT)
        return api_error(r, 404, "not_found", "no node %s", w.name);
    if (rc == ALLOT_ESTATE) {
        char drain[160] = "";
        if (w.state != ALLOT_SN_DRAINING)
            allot_fmt(drain, sizeof(drain), "drain it (allot drain --wait %s), ", w.name);
        return api_error(r, 409, "conflict",
                         "node %s is %s: only a lost node can be removed, since a running agent "
                         "registers its node again; %sstop allot-agent there, and remove it "
                         "once it shows as lost (no heartbeat within the %llds lease)",
                         w.name, allot_store_node_state_name(w.state), drain,
                         (long long)(r->srv->cfg.lease / 1000));
    }
    if (rc < 0)
        return api_error(r, 500, "store", "%s", allot_strerror(rc));
    if (w.revoked)
        auth_forget_tokens(r->srv);
    pthread_mutex_lock(&r->srv->agents_lock);
    json_object_del(r->srv->agents, w.name); /* its health, its agent's address */
    pthread_mutex_unlock(&r->srv->agents_lock);
    loop_post(r->srv->loop, LOOP_NODE_REMOVED, 0, w.name);
    json_t *o = json_pack("{s:s,s:s,s:s}", "name", w.name, "state", "removed", "previous",
                          allot_store_node_state_name(w.state));
    if (w.revoked)
        json_object_set_new(o, "credential_revoked", json_integer(w.revoked));
    return api_json(r, 200, o);
}

/*
 * The scheduling loop of allotd: one thread owns liballot-core (the
 * cluster built from registered nodes, the tenant tree, the queue and its
 * placement scheduler). API threads hand it work through loop_post(); it
 * runs a cycle after each batch of changes and every cycle-interval,
 * commits the decisions (placements, pending reasons) to the store, and
 * publishes each node's desired state for heartbeats (loop_desired).
 * On start it rebuilds the core from the store (live jobs only) and then
 * marks the server ready.
 *
 * Leases: a node whose lease (renewed by each heartbeat) runs out is
 * marked lost in the core and the store, and the jobs placed on it go
 * back to pending, keeping their place in the queue (their submission
 * time), or end as lost ("requeue": false); its next heartbeat makes it
 * ready again. After a restart every
 * node gets at least one full lease to send a heartbeat.
 */
#ifndef ALLOT_SERVER_LOOP_H
#define ALLOT_SERVER_LOOP_H

#include "server.h"

#include <stdio.h>

enum loop_msg_kind {
    LOOP_JOB_SUBMITTED,  /* id: store job id */
    LOOP_JOB_CANCELLED,  /* id: store job id (already terminal in the store) */
    LOOP_JOB_FINISHED,   /* id: store job id (already terminal in the store) */
    LOOP_NODE_ADDED,     /* name: node name (stored) */
    LOOP_TENANTS,        /* the tenant tree or priority classes changed */
    LOOP_NODE_SEEN,      /* name: node that sent a heartbeat; id: its lease expiry */
    LOOP_NODE_STATE,     /* name: node an admin cordoned, drained or made ready; id: its
                            enum allot_store_node_state */
    LOOP_JOB_EVICT,      /* id: a running job to send back to the queue; name: why */
    LOOP_NODE_HEALTH,    /* name: a node whose agent reports (id 1) an unhealthy GPU, or
                            (id 0) none any more */
    LOOP_NODE_EVICT,     /* name: a drained node whose jobs are to be evicted (requeued) */
    LOOP_JOB_CHECKPOINT, /* id: a running job that saved its work at `run` */
    LOOP_JOB_HOLD,       /* id: a pending job a user held (stored): out of the core */
    LOOP_JOB_RELEASE,    /* id: a held job a user released (stored): the gate may let it in */
    LOOP_JOB_PRIORITY,   /* id: a pending job's priority class changed (stored): read again */
    LOOP_NODE_CHANGED,   /* name: a node out of service and empty that registered another
                            inventory (stored) */
    LOOP_NODE_REMOVED,   /* name: a lost node an admin removed from the store */
    LOOP_JOB_RUNNING,    /* id: a job its agent reported running (stored) since `run` */
    LOOP_LINGER_GONE,    /* an earlier run of a job left a node: its next may be shown */
    LOOP_JOB_STOPPED,    /* id's processes are gone on every node in its grace period */
    LOOP_JOB_SIGNAL,     /* id: a running job a user signalled (stored) in its run `run` */
    LOOP_JOB_LIMIT,      /* id: a live job whose time limit a user changed (stored) */
};

/* Starts the loop thread and sets s->loop (before the thread can mark the
 * server ready). Returns the loop, or NULL with a message on failure. */
struct loop *loop_start(struct server *s, char *err, size_t errlen);

/* The queue options the loop runs with under configuration cfg (strings
 * borrowed from it): loop_start's, and what GET /v1/scheduler shows. */
struct allot_queue_opts;
struct server_config;
void loop_queue_opts(const struct server_config *cfg, struct allot_queue_opts *qo);
/* Stops the thread (finishing the cycle in progress) and frees. NULL ok. */
void loop_stop(struct loop *l);
/* Queues a message for the loop (never blocks on a cycle). Returns 0 or
 * ALLOT_ENOMEM. `name` is copied; may be NULL. */
int loop_post(struct loop *l, int kind, int64_t id, const char *name);

/* The pending reason of a job a user holds (`allot hold`): the gate's, and
 * the hold route's answer before the loop has written it. */
void loop_held_reason(int64_t sid, char *buf, size_t len);
/* The state an admin gave lost node `name` for its return (the store's
 * meta table, on st): ALLOT_SN_CORDONED, ALLOT_SN_DRAINING or
 * ALLOT_SN_READY (none), or a negative ALLOT_E*. _set keeps `state`
 * (ready, lost: none). */
int loop_node_return_get(struct allot_store *st, const char *name);
int loop_node_return_set(struct allot_store *st, const char *name, int state);
/* A heartbeat of node's agent, which had the desired state of version
 * `known` (NULL: none) and lists the jobs allotd ended there whose
 * processes may still be there (`stopping`, NULL: an agent that does not
 * tell): the earlier runs it no longer holds count as gone (loop_linger.c). */
void loop_linger_heard(struct loop *l, const char *node, const char *known, const json_t *stopping);
/* LOOP_JOB_EVICT of job id in run `run` (its start time as stored; 0:
 * whichever it is in when the loop gets to it), with why (copied). */
int loop_post_evict(struct loop *l, int64_t id, int64_t run, const char *why);
/* LOOP_JOB_EVICT without a why: job id's requeue from run `run` is stored
 * already (loop_requeue_stored, in the writer's own transaction); the
 * loop puts the core job back to pending. */
int loop_post_requeued(struct loop *l, int64_t id, int64_t run);
/* Puts stored job sid back to pending, without placement, with a
 * "requeued" event saying why (on a group-commit handle). Returns 0 or the
 * store's code. */
struct allot_store;
int loop_requeue_stored(struct allot_store *st, int64_t sid, const char *why, int64_t now);
/* LOOP_JOB_CHECKPOINT: job id saved its work at `at` (unix seconds). */
int loop_post_checkpoint(struct loop *l, int64_t id, int64_t at);
/* LOOP_JOB_LIMIT: job id's time limit changed (stored). */
int loop_post_limit(struct loop *l, int64_t id);
/* LOOP_JOB_SIGNAL: a user sent signal `sig` to job id, stored as running
 * run `run` (its start time). */
int loop_post_signal(struct loop *l, int64_t id, int64_t run, int sig);
/* LOOP_JOB_RUNNING: job id's processes run since `at` (its time limit
 * counts from then). */
int loop_post_running(struct loop *l, int64_t id, int64_t at);
/* Tells the loop of job j just committed (a copy is queued: the loop does
 * not read it back from the store). Returns 0 or ALLOT_ENOMEM. */
int loop_post_job(struct loop *l, const struct allot_store_job *j);
/* The desired state of node `name`: a new JSON array of the tasks placed
 * there ({"job":ID,"task":I,"gpus":[...],...}). */
json_t *loop_desired(struct loop *l, const char *name);
/* Like loop_desired, with its version (a hash of the array, hex) in
 * `version`. When `known` equals that version and wait_ms > 0, waits up to
 * wait_ms for a cycle to change the node's desired state first (long poll;
 * at most workers - 2 callers wait at once, the others answer at once). */
json_t *loop_desired_wait(struct loop *l, const char *name, const char *known, int64_t wait_ms,
                          char *version, size_t vlen);
/* Wakes every caller waiting in loop_desired_wait and makes later ones
 * answer at once (at shutdown, before the HTTP server stops). */
void loop_release_waiters(struct loop *l);

/* The VXLAN peers of node `name`'s tenant networks ({vni: [underlay
 * addresses of the other nodes hosting it]}; new reference): {} when it
 * hosts none, NULL when allotd runs no tenant networks. */
json_t *loop_node_peers(struct loop *l, const char *name);

/* How many tasks are placed on node `name` (0 for an unknown node), and
 * in *rdma_vfs the RDMA VFs they hold. */
size_t loop_node_tasks(struct loop *l, const char *name, int64_t *rdma_vfs);
/* Scheduler metrics in Prometheus text format. */
void loop_metrics(struct loop *l, FILE *out);
/* GPUs of the registered nodes as of the last cycle (0 while starting). */
int64_t loop_gpu_total(struct loop *l);

#endif

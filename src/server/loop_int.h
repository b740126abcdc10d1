/*
 * Internals of the scheduling loop shared by loop.c (messages, the core,
 * decisions, leases, publishing) and loop_gate.c (the gate: jobs held back
 * for their dependencies or their array's throttle). Everything here is
 * used by the loop thread only, except the fields loop.h's comment names
 * as shared (the message queue under mu, the published state under dmu).
 */
#ifndef ALLOT_SERVER_LOOP_INT_H
#define ALLOT_SERVER_LOOP_INT_H

#include "jobspec.h"
#include "loop.h"

#include "allot/queue.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct msg {
    struct msg *next;
    int kind;
    int64_t id;
    int64_t run;                /* LOOP_JOB_EVICT: the run it is about (its start time); 0: any.
                                   LOOP_JOB_CHECKPOINT: when it saved. LOOP_JOB_SIGNAL: the
                                   run it is for */
    char *name;                 /* owned */
    int sig;                    /* LOOP_JOB_SIGNAL: the signal */
    struct allot_store_job job; /* LOOP_JOB_SUBMITTED by loop_post_job: the job as
                                   written (strings owned), so the loop need not read it */
    bool has_job;
};

struct live {
    int64_t sid;         /* store job id */
    int qid;             /* core job id */
    int wstate;          /* store state last written (enum allot_store_job_state) */
    int64_t wruns;       /* core run count when last written */
    uint64_t wreason;    /* hash of the pending reason last written */
    char *spec_text;     /* owned (malloc): the stored spec, as JSON text */
    json_t *spec;        /* owned: spec_text parsed while the job is placed (the
                            desired state shows it), else NULL: memory follows
                            the running jobs, not the waiting ones */
    bool requeue;        /* back to pending when its node is lost, it is evicted or
                            preempted; false: it runs once (ends instead) */
    int64_t parent;      /* array it belongs to (its first job's id), 0 = none */
    int index;           /* its index in that array */
    int64_t wstart;      /* start time last written */
    char *wplacement;    /* owned (malloc): placement last written, or NULL */
    int64_t token_id;    /* who submitted it: the agent maps the token's name to a user */
    char *job_token;     /* owned (allot_malloc): its run's own credential (checkpointable
                            jobs, auth_job_token), made once per run, NULL when none */
    int64_t token_run;   /* the run job_token is of */
    int net_t;           /* its tenant network (loop_net.c), -1 none */
    uint32_t *net_hosts; /* owned: the host indices its tasks hold there */
    int n_net_hosts;
    bool start_refused;  /* the store refused its start (a user held it): to the gate */
    bool net_wait;       /* placed, but its tenant network had no address for it: to the
                            gate until it has (gate_net_wait) */
    int64_t shown_run;   /* the run the desired state shows (not 0), or 0 */
    json_t *shown_nodes; /* owned: the nodes it shows that run on (loop_linger.c) */
    int64_t held_run;    /* the run last held back for an earlier one */
    int64_t adopted_run; /* a run adopted as starting at allotd's start: its agent may have
                            started it, so it is held with "hold" (not run 0) */
    json_t *task_hosts;  /* owned: where its tasks run (lnet_task_hosts), made once for run
                            hosts_run while the job of several tasks is placed, else NULL */
    int64_t hosts_run;
    json_t *signals; /* owned: signals users sent run signals_run ([{"seq": us, "sig": N}],
                        the latest LOOP_SIGNALS_MAX; the desired state shows them, each
                        node's agent sends each once), or NULL */
    int64_t signals_run;
    int warn_sig;        /* its time-limit warning ("signal": SIG@SECONDS), 0: none; sent */
    int64_t warn_before; /* this many seconds before the limit, once in run warned_run */
    int64_t warned_run;
    int64_t queued_at; /* when it last became pending (submitted, or requeued after a
                          run): the queue-wait metric counts from it, where the core
                          keeps its submission for its place (loop_queued_since) */
};

/* A run the desired state stops showing (publish, loop_linger_publish). */
struct linger_drop {
    int64_t sid;
    json_t *nodes; /* owned: the nodes it was shown on */
};

/* An entry of the desired state being made whose run is shown for the
 * first time (publish, loop_linger_publish). */
struct fresh_run {
    size_t i;  /* live index */
    json_t *x; /* the entry */
    int64_t run;
};

/* What a cycle writes for one live job (changes_prepare, changes_fn). */
struct change {
    size_t i;         /* index in the live set */
    int want;         /* store state to write */
    int64_t runs;     /* the core's run count it reflects */
    bool start;       /* a new run: its start is written (not a reason of a run written before) */
    bool reason_only; /* a placed job's reason alone (its state as stored stays: its agent
                         may have made it running since the loop wrote it) */
    char *reason;     /* owned (allot_malloc), or NULL */
    uint64_t reason_hash;
    char *placement; /* owned (malloc): the new placement, or NULL */
    bool ended;      /* written as ended by the core (its time limit, a preemption of a job
                        that runs once): its final event follows the cycle's decisions' */
};

/* A pending job the core does not see yet: it waits for its dependencies
 * or for its array's throttle (the gate, gate_check). */
struct held {
    int64_t sid;
    int64_t parent; /* array (first job's id), 0 = none */
    int throttle;   /* at most this many of the array in the core; 0 = any */
    int tenant;     /* core tenant index, for the gauges */
    int n_deps;
    struct jobdep *deps; /* owned */
    uint64_t wreason;    /* hash of the pending reason last written */
    bool user_held;      /* held by a user (allot hold) until released */
    int net_tasks;       /* > 0: waits for this many free addresses in its tenant's network */
    int64_t begin;       /* does not start before this time (Unix s); 0: any time */
};

#define N_CYCLE_BUCKETS 10
#define N_WAIT_BUCKETS  10
/* The histograms' upper bounds in seconds (loop_metrics.c). */
extern const double loop_cycle_buckets[N_CYCLE_BUCKETS];
extern const double loop_wait_buckets[N_WAIT_BUCKETS];

struct loop {
    struct server *srv;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct msg *head, *tail;
    bool stop;

    /* loop thread only */
    struct allot_cluster *c;
    struct allot_tenants *t;
    bool *t_listed; /* owned: per core tenant index, whether the stored document lists it
                       (a pruned tenant stays in the core but leaves the gauges) */
    int n_t_listed;
    /* while rebuilding: every running job's last save of its run, by job id
     * (allot_store_event_last_running, one query), when it could be read */
    struct allot_store_event *saves;
    size_t n_saves;
    bool saves_read;
    bool rebuilding; /* rebuild() is submitting the stored jobs */
    /* while rebuilding: the running jobs preempted in their run, by job id
     * (their grace was in allotd's memory only) */
    struct allot_store_event *stops;
    size_t n_stops;
    /* while rebuilding: when each running job's agent said it runs (its
     * time limit counts from then) */
    struct allot_store_event *runs_ev;
    size_t n_runs_ev;
    struct allot_queue *q;
    /* the core's priority classes by slot (apply_class) */
    struct {
        char name[32];
        int value;
        bool preemptible;
    } prio[ALLOT_PRIO_CLASSES];
    int n_prio;
    struct live *live;
    size_t n_live, cap_live;
    struct change *chg; /* owned: this cycle's changes */
    size_t n_chg, cap_chg;
    size_t reason_cursor;  /* round robin of pending reasons (changes_prepare) */
    int64_t last_cycle_ms; /* CLOCK_MONOTONIC of the last cycle's start */
    int64_t max_sid;       /* largest store id the live set or the gate ever held */
    json_t *token_names;   /* owned: token id (text) -> name, read on first use */
    struct held *held;     /* owned, in submission order */
    size_t n_held, cap_held;
    bool hold_dirty;    /* a job ended or was held: evaluate the gate again */
    int64_t next_begin; /* the earliest begin time a held job waits for (Unix s); 0: none */
    bool more;          /* the last cycle stopped at cycle-work: the next goes on */
    int32_t *live_at;   /* owned: by core job id, its index in live, or -1 */
    size_t cap_live_at;
    int64_t *expiry; /* lease expiry per core node index */
    size_t cap_expiry;
    bool *fenced; /* per core node index: an unhealthy GPU keeps new work off it */
    size_t cap_fenced;
    char **underlay; /* per core node index: its data-centre address (owned), or NULL */
    size_t cap_underlay;
    struct lnet *net; /* owned: tenant networks (loop_net.c), NULL when network is off */
    struct dec {
        int kind;
        int qid;
        bool at_once; /* a preemption that stops the job now (no grace period) */
        char why[128];
    } * decs;
    size_t n_decs, cap_decs;

    /* published, under dmu */
    pthread_mutex_t dmu;
    pthread_cond_t dcv; /* broadcast when the desired state is published */
    int waiters;        /* callers in loop_desired_wait */
    bool closing;       /* loop_release_waiters was called */
    json_t *desired;
    uint64_t dseq;       /* desired states published */
    json_t *linger;      /* owned: node -> {job id: dseq} of runs on their way out of it */
    json_t *linger_jobs; /* owned: job id -> on how many nodes a run of it is on its way out */
    json_t *linger_held; /* owned: job id -> true while a new run of it is held back */
    json_t *stop_wait;   /* owned: job id -> {"seq": dseq that first showed it stopping,
                            "nodes": {node: true}} of preempted jobs in their grace
                            period whose nodes have not all said its processes are gone */
    json_t *stop_seen;   /* owned, loop thread: job id -> {node: true} of the jobs the
                            desired state being built shows stopping */
    json_t *replied;     /* owned: node -> [version, dseq] of its last reply */
    uint64_t cycles;
    uint64_t cycles_cut; /* core cycles stopped at cycle-work (allot_queue_more) */
    uint64_t preempts;   /* jobs preempted (signalled or stopped for another job) */
    uint64_t moves;      /* ... of them, moved by defragmentation */
    double cycle_sum;
    uint64_t cycle_le[N_CYCLE_BUCKETS];
    int64_t jobs_pending, jobs_running, nodes, gpus, gpu_used_milli;
    char *gauges;          /* owned: per-tenant and per-model gauges, Prometheus text */
    json_t *peers;         /* node -> {vni: [underlay of the other nodes]} (lnet_peers) */
    json_t *pending_inv;   /* loop thread: node -> an inventory it takes once empty and
                              out of service (change_node); the node takes no work meanwhile */
    char reason_buf[1024]; /* loop thread: a pending reason made here (changes_prepare) */
    json_t *removed;       /* loop thread: node -> true for the nodes an admin removed
                              (loop_remove_node): in the core, of no size, not counted */
    uint64_t wait_le[N_WAIT_BUCKETS], waits;
    double wait_sum;
};

/* FNV-1a of a string (NULL hashes like ""): pending reasons are compared
 * through it. */
uint64_t loop_hash_str(const char *s);

/* Ends stored job `sid` in `state` with `why` as its reason and an event
 * `kind` (on a group-commit handle). A job already ended stays as it is. */
int loop_end_job(struct allot_store *st, int64_t sid, int state, const char *kind, const char *why,
                 int64_t now);

/* Marks a job the core refuses as failed. */
void loop_reject(struct loop *l, int64_t sid, const char *why);
/* Ends stored job sid in `state` with an event `kind` saying why (its own
 * write; logged when it cannot be written). */
void loop_end_stored(struct loop *l, int64_t sid, int state, const char *kind, const char *why);

/* Puts stored job j into the core. With `gate`, a pending job with
 * dependencies or an array throttle is held back instead (gate_hold); the
 * gate lets it in once they allow. */
void loop_submit_job(struct loop *l, const struct allot_store_job *j, bool gate);

/* The core's priority class slot of class `name` (NULL: the default), or -1
 * (the default; a class the core does not know runs as the default). */
int loop_class_slot(const struct loop *l, const char *name);

/* What a group-commit write of the loop reads: the loop and the time. */
struct loop_write {
    struct loop *l;
    int64_t now;
};

/* The live record of stored job sid (*idx its index), or NULL. */
struct live *loop_find_live(struct loop *l, int64_t sid, size_t *idx);
/* When core job j last became pending, as the queue-wait metric counts it:
 * its requeue in the core (a preemption) or in the loop (its node lost, a
 * restart), whichever is later. */
int64_t loop_queued_since(const struct loop *l, const struct allot_job *j);
/* Takes live record i out (its core job forgotten once ended). */
void loop_drop_live(struct loop *l, size_t i);
/* The signals a run keeps (the latest), and the event of a time-limit
 * warning, which a restarted loop reads back so that a run gets its
 * warning once (loop_submit_job). */
#define LOOP_SIGNALS_MAX   8
#define LOOP_WARNING_EVENT "warning"
/* Signal `sig` for job sid's run `run` (LOOP_JOB_SIGNAL): kept in its
 * live record for the desired state, unless the job runs no more or
 * runs another run. */
void loop_job_signal(struct loop *l, int64_t sid, int64_t run, int sig);
/* Job sid's time limit changed (LOOP_JOB_LIMIT): the core's, and the spec
 * the loop keeps, read again from the store. A job in the gate reads its
 * spec when it enters. */
void loop_job_limit(struct loop *l, int64_t sid);
/* Sends the time-limit warnings (a job's "signal": SIG@SECONDS) that are
 * due at `now` through loop_job_signal, each once a run, and stores a
 * LOOP_WARNING_EVENT for each. Cheap when none is due. */
void loop_time_warnings(struct loop *l, int64_t now);
/* The user name of token id (auth_user_name: the submitting user as the
 * agent's user map knows it), cached; "" when it cannot be read. */
const char *loop_token_name(struct loop *l, int64_t id);

/* ---- nodes (loop_nodes.c) ---- */

/* Adds stored node `name` (its inventory, JSON text, and stored state) to
 * the core; a name the core has is left alone. 0 or ALLOT_ENOMEM. */
int loop_add_node(struct loop *l, const char *name, const char *inventory, int sstate);
/* A name a job's node list or exclusions hold that no node has (deleted
 * before allotd started): kept in the core as a removed node is (lost, of
 * no size, not counted), so that the node registering again under it
 * takes that place and the job's set names it. Returns its index or a
 * negative code. */
int loop_node_keep_name(struct loop *l, const char *name);
/* A known node that registered another inventory while out of service and
 * empty takes it (at once, or once empty: loop_pending_retry). */
void loop_change_node(struct loop *l, const char *name, const char *inventory, int sstate);
/* The nodes waiting for a new inventory that are empty now take it. */
void loop_pending_retry(struct loop *l);
/* An admin removed lost node `name` (api_nodes_delete): the core keeps
 * its name and index, lost and of no size (nothing counts it: capacity,
 * metrics, overlay peers); a node the store has again is left alone, and
 * a later registration of the name gives it a size (loop_add_node). */
void loop_remove_node(struct loop *l, const char *name);
/* Whether node i (name) may take work when its admin state lets it: not
 * fenced for an unhealthy GPU, not waiting for a new inventory. The one
 * rule every path that makes a node ready follows. */
bool loop_node_may_work(const struct loop *l, int i, const char *name);
/* A heartbeat of node `name` renews its lease; a lost node is ready again. */
void loop_node_seen(struct loop *l, const char *name, int64_t expiry);
/* An unhealthy GPU fences node `name` (no new work) until it is healthy. */
void loop_node_health(struct loop *l, const char *name, bool unhealthy);
/* Nodes past their lease are lost; their jobs go back to the queue. */
void loop_check_leases(struct loop *l, int64_t now);
/* A drained node's jobs, evicted: back to the queue at once. */
void loop_evict_node(struct loop *l, const char *name);
/* Running job sid back to the queue (its agent stops it), with why (NULL:
 * the store has it already, the core follows); only while it is in run
 * `run` (its start time; 0: whichever). */
void loop_evict_job(struct loop *l, int64_t sid, int64_t run, const char *why);

/* ---- tenant networks (loop_net.c) ---- */

/* Sets up l->net when the network option is on, with the stored tenant
 * networks. Returns 0 or ALLOT_E* (message in err). */
int lnet_start(struct loop *l, char *err, size_t errlen);
void lnet_stop(struct loop *l);
bool lnet_on(const struct loop *l);
/* Takes note of the tenants document's quotas.network entries. */
void lnet_tenants(struct loop *l, json_t *doc);
/* Gives live job e addresses in its tenant's network: "address" in each
 * task of placement (placement_json's shape). 0, ALLOT_ENOSPC, ALLOT_ENOMEM. */
int lnet_assign(struct loop *l, struct live *e, const char *tenant, json_t *placement);
/* Marks the addresses of an adopted job's stored placement as taken. */
void lnet_adopt(struct loop *l, struct live *e, const char *tenant, const char *placement);
/* Gives back what e holds (its job stopped running, or left). */
void lnet_release(struct loop *l, struct live *e);
/* Whether tenant's network has room for n more tasks now (its subnet has n
 * free addresses, or one can still be cut for it); why it has not in why. */
bool lnet_room(struct loop *l, const char *tenant, int n, char *why, size_t len);
/* Writes the tenant networks cut since the last write (in changes_fn);
 * lnet_written after the commit. */
int lnet_write(struct allot_store *st, struct loop *l);
void lnet_written(struct loop *l);
/* Adds task `index`'s "network" to its desired-state entry. */
void lnet_decorate(struct loop *l, const struct live *e, const char *tenant, int prio_value,
                   bool exclusive, json_t *task, const char *stored_placement, size_t index);
/* Per node, the VXLAN peers of each tenant network it hosts (new ref). */
json_t *lnet_peers(struct loop *l, json_t *desired);
/* Where the tasks of a job of several tasks run, for each of its
 * desired-state entries (a new ref, or NULL for one task): "nodes", their
 * nodes by task index, comma-separated, and with its tenant's network
 * "addresses", the tasks' addresses there (from the stored placement
 * `stored`), so that the tasks can find each other. */
json_t *lnet_task_hosts(const json_t *placement, const char *stored);

/* ---- the gate (loop_gate.c) ---- */

/* Holds pending job j (spec js) back from the core. */
void gate_hold(struct loop *l, const struct allot_store_job *j, const struct jobspec *js);
/* True when job sid is held in the gate. */
bool gate_holds(const struct loop *l, int64_t sid);
/* Forgets held job i (cancelled). */
void gate_unhold(struct loop *l, size_t i);
/* Evaluates every held job when something ended or was held: writes the
 * pending reasons that changed, cancels the jobs whose dependencies can
 * never hold, and submits the others to the core in submission order. */
void gate_pass(struct loop *l);
/* A user held job sid (stored): a pending job leaves the core for the
 * gate; one in the gate waits for the release too. */
void gate_user_hold(struct loop *l, int64_t sid);
/* A user released job sid (stored): the gate's next pass may let it in. */
void gate_user_release(struct loop *l, int64_t sid);
/* Pending job sid's stored spec changed (its priority class): it leaves
 * the core and comes in again as stored, its submission keeping its place
 * among the jobs of its class. One in the gate reads the store when it
 * enters; one placed meanwhile keeps the class it was placed with. */
void gate_user_changed(struct loop *l, int64_t sid);
/* Placed job sid (pending in the store) found no address in its tenant's
 * network: it leaves the core for the gate, which lets it in again once
 * its tenant's network has room for its tasks (lnet_room). */
void gate_net_wait(struct loop *l, int64_t sid);
/* Per-tenant and per-model gauges as Prometheus text, rendered after each
 * cycle (loop_metrics.c; allocated by open_memstream; NULL when out of
 * memory). */
char *loop_gauges_text(struct loop *l);
/* Writes the metric allot_jobs_held: the jobs in the gate by what holds
 * them, the first that applies (a begin time: one after `now`). */
void gate_metrics(const struct loop *l, FILE *f, int64_t now);

/* Notes the runs dr the desired state being published no longer shows,
 * and shows each of its fresh entries fr with run 0 while an earlier run
 * of its job is on its way out of a node ([job id, node] into *waits, a
 * new array, for each job held the first time for that run). Under
 * l->dmu, on the loop thread, before the desired state is published. */
void loop_linger_publish(struct loop *l, const struct linger_drop *dr, size_t n_dr,
                         const struct fresh_run *fr, size_t n_fr, json_t **waits);
/* Live job i shows run `run` now (0: none): the run it showed until now,
 * if another, goes into dr (its nodes with it). 0 or ALLOT_ENOMEM (it is
 * looked at again next cycle). Loop thread. */
int loop_linger_seen(struct loop *l, size_t i, int64_t run, struct linger_drop **dr, size_t *n,
                     size_t *cap);
/* Live job e leaves the live set (it ended, or is submitted to the core
 * anew): the run it showed, if any, is on its way out of its nodes. Takes
 * l->dmu; loop thread. */
void loop_linger_left(struct loop *l, struct live *e);
/* The desired state being built shows job sid stopping (its grace period)
 * on node: once every such node's agent, having had that state, no longer
 * lists it as stopping, its grace ends early (LOOP_JOB_STOPPED). */
void loop_linger_stopping(struct loop *l, int64_t sid, const char *node);
/* Desired-state entry x of live job i shows run `run` for the first time:
 * into fr for loop_linger_publish (shown with run 0 when there is no
 * memory for it). */
void loop_linger_fresh(struct fresh_run **fr, size_t *n, size_t *cap, size_t i, json_t *x,
                       int64_t run);
/* After the publication (l->dmu released): frees dr and logs and stores a
 * "waiting" event for each job in waits (consumed). */
void loop_linger_done(struct loop *l, struct linger_drop *dr, size_t n_dr, json_t *waits);
/* At allotd's start (rebuild), live job e was just made from stored job j
 * (adopted or not): its last run, when not adopted, may be on its way out
 * of its nodes; a run adopted as starting that waited for an earlier one
 * waits until every node has answered once. Reads the store. */
void loop_linger_rebuilt(struct loop *l, struct live *e, const struct allot_store_job *j,
                         bool adopted);
/* The reply to node's heartbeat carries the desired state of `version`.
 * Under l->dmu. */
void loop_linger_replied(struct loop *l, const char *node, const char *version);
/* Node is lost: the runs on their way out of it count as gone. Takes
 * l->dmu. */
void loop_linger_forget_node(struct loop *l, const char *node);

#endif

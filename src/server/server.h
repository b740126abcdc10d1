/*
 * allotd internals shared by the files of src/server/: the server object,
 * the request handed to API handlers, and the helpers handlers use.
 *
 * Threading: HTTP threads (libmicrohttpd: one per connection, or a pool)
 * run the handlers; one scheduling thread (loop.c) owns liballot-core.
 * Store access: a thread reads through a handle lent to it (srv_reader,
 * from the idle handles or opened on first use); an HTTP thread gives it
 * back when its request ends (srv_reader_release), so handles number the
 * requests in flight, not the connections; every write goes through the
 * store's group committer (srv_write),
 * which owns the writing handle and commits the writes of many threads in
 * one transaction, so concurrent submissions share one fsync. Locks: the
 * readers list, the loop's message queue and the metrics locks are leaves
 * (nothing else is taken while one is held).
 */
#ifndef ALLOT_SERVER_H
#define ALLOT_SERVER_H

#include "allot/catalog.h"
#include "allot/store.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Values of the option table (main.c). */
struct server_config {
    char *data_dir;
    char *store;           /* store URL; NULL: sqlite:DATA_DIR/allot.db */
    char *advertise_url;   /* where clients reach this allotd when it leads */
    int64_t lead_check;    /* ms: how often the lead is tried or checked */
    int64_t store_readers; /* store read handles open at once, at most */
    char *listen;
    char *config;
    char *log_file;
    char *log_format;
    char *log_level;
    char *tls_cert;
    char *tls_key;
    char *placement;
    char *order;
    char *ui_dir;
    int64_t workers;             /* 0: a thread per connection; N: a pool of N */
    int64_t max_connections;     /* connections served at once */
    int64_t max_conn_per_ip;     /* of them from one client address (0: no limit) */
    int64_t max_jobs_per_tenant; /* live jobs one tenant may have (0: no limit) */
    int64_t body_max;
    int64_t cycle_interval;      /* ms */
    int64_t cycle_gap;           /* ms: least time between two cycles */
    int64_t cycle_busy;          /* percent of the time cycles may take while changes stream in */
    int64_t cycle_work;          /* decisions one cycle makes at most (opts.cycle_work) */
    bool reserve_gangs;          /* opts.reserve_gangs */
    int64_t large_gang_gpus;     /* opts.large_gang_gpus */
    int64_t aging;               /* ms: opts.aging_s; 0 = off */
    int64_t fair_reclaim;        /* ms: opts.fair_reclaim_s; 0 = off */
    int64_t fair_cap;            /* percent: opts.fair_cap x 100; 0 = off */
    int64_t defrag;              /* ms: opts.defrag_s; 0 = off */
    int64_t defrag_loss;         /* ms: opts.defrag_loss_s */
    int64_t las_threshold;       /* ms of GPU-time: opts.las_threshold_gpu_s; 0 = off */
    int64_t lending_hold;        /* ms: opts.hold_half_life_s; 0 = off */
    int64_t lease;               /* ms */
    int64_t def_mem_per_cpu;     /* bytes of memory a job that names none gets per CPU; 0: none */
    int64_t def_mem_per_gpu;     /* ... per whole GPU (before per CPU); 0: none */
    int64_t preempt_grace;       /* ms */
    int64_t preempt_min_runtime; /* ms */
    int64_t ready_delay;         /* ms: test hook, stays 503 this long */
    bool metrics_auth;           /* /metrics needs a valid token (any role) */
    int64_t rate_limit;          /* requests per second per token; 0 = off */
    int64_t rate_burst;          /* requests a token may send at once */
    int64_t meter_interval;      /* ms between metering roll-up passes */
    int64_t idle_threshold;      /* percent: a GPU job under it is idle */
    int64_t idle_window;         /* ms idle before a job is flagged (0: never) */
    char *idle_class_windows;    /* "CLASS=DURATION,...": per priority class */
    char *idle_action;           /* "notify" or "preempt" (preemptible jobs only) */
    int64_t anomaly_z;           /* robust z-score over which a tenant's hour is anomalous */
    int64_t anomaly_history;     /* ms of hourly history a tenant is compared with */
    int64_t anomaly_window;      /* ms: a job's last quarter against the rest */
    char *network;               /* "on": tasks get tenant networks (docs/network.md) */
    char *net_pool;              /* CIDR the tenant subnets are cut from */
    int64_t net_prefix;          /* prefix length of one tenant's subnet */
    int64_t net_vni_base;        /* VXLAN id of the first tenant network */
};

struct http;
struct loop;

struct server {
    struct server_config cfg;
    char store_url[4200];
    struct allot_store *wst;   /* owned; the group committer's handle */
    struct allot_store_gc *gc; /* owned; every write goes through it */
    pthread_mutex_t readers_lock;
    pthread_cond_t readers_cv;    /* a handle came back (with readers_lock) */
    struct allot_store **readers; /* owned: every read handle opened */
    size_t n_readers, cap_readers;
    struct allot_store **idle_readers; /* those no thread holds (its thread ended) */
    size_t n_idle, cap_idle;
    pthread_key_t reader_key;            /* a thread's handle; given back when the thread ends */
    struct allot_catalog *cat;           /* owned, immutable */
    struct http *http;                   /* owned */
    struct loop *loop;                   /* owned */
    atomic_bool ready;                   /* the core was rebuilt from the store */
    atomic_bool standby;                 /* another allotd leads; this one waits to take over */
    atomic_bool fenced;                  /* a write was fenced: it lost the lead (docs/ha.md) */
    atomic_int_fast64_t epoch;           /* the leader epoch it took (0: it does not lead) */
    struct allot_store *lst;             /* owned: the handle that holds the lead (docs/ha.md) */
    pthread_mutex_t leader_lock;         /* leaf lock: guards leader_url */
    char leader_url[512];                /* where the leader said clients reach it ("" unknown) */
    atomic_int store_failing;            /* a store write failed with this error, and writes have
                                            not worked for SRV_STORE_CLEAR_MS since (0): /readyz
                                            says so */
    atomic_int_fast64_t store_failed_ms; /* allot_mono_ms of the last failed store write */
    atomic_int max_node_gpus;            /* most GPUs on one registered node (0: none yet) */
    atomic_int model_gpus[ALLOT_MAX_MODELS]; /* most GPUs on one node the loop added, per
                                                catalog model (0: none of it yet) */
    atomic_int_fast64_t whole_gpus;          /* GPUs of registered nodes not in MIG mode (the loop
                                                counts them as it adds nodes; 0: none yet) */
    atomic_int_fast64_t max_gpu_mib;         /* memory of the largest GPU of a node in shared mode,
                                                where fractions go (0: none yet) */
    atomic_int_fast64_t max_cpu_milli; /* most CPU (milli) on one node the loop added (0: none) */
    atomic_int_fast64_t max_mem_mib;   /* most memory (MiB) on one node the loop added */
    atomic_int nodes_adding;           /* nodes registered that the loop has not added yet:
                                          whole_gpus, max_gpu_mib, max_cpu_milli and
                                          max_mem_mib may lack them */
    pthread_mutex_t refs_lock;         /* leaf lock: guards refs */
    struct refs *refs;                 /* owned: tenants and classes jobs may name (refs.c) */
    atomic_uint_fast64_t refs_gen;     /* bumped by every change of them */
    pthread_mutex_t tokens_lock;       /* leaf lock: guards tokens */
    json_t *tokens;              /* owned: valid tokens seen, by the hex of their hash -> [id, role,
                                    tenant]; emptied when a token is revoked (auth.c) */
    uint64_t tokens_gen;         /* guarded by tokens_lock: bumped when tokens is emptied */
    pthread_mutex_t agents_lock; /* leaf lock: guards agents */
    /* owned, the committer thread's only: tenant path -> its live jobs as
     * last counted plus those stored since (never below the truth: jobs
     * that end lower it), so that --max-jobs-per-tenant counts exactly only
     * near the limit */
    json_t *live_est;
    json_t *agents; /* owned: node name -> {"url", "key"} of its agent's log endpoint, as its
                       heartbeats tell (memory only) */
    atomic_int_fast64_t lead_ok_ms;  /* monotonic ms of the last check that found the lead
                                        ours (0: none yet) */
    atomic_int_fast64_t meter_at;    /* time of the last metering roll-up (0: none yet) */
    atomic_int_fast64_t meter_dirty; /* the earliest hour that samples stored since the
                                        last roll-up pass read speak for (INT64_MAX: none) */
    uint8_t job_key[32];             /* the key of job credentials (meta "job_key"), set
                                        once before the loop starts (auth_job_key_init) */
    atomic_bool job_key_ready;       /* job_key is set (release/acquire): until then no job
                                        credential is taken (a standby never sets it) */
};

/* Who called: resolved from the bearer token. */
/* The role of a job's own credential (auth_job_token): never stored, good
 * only for the routes that name it, on that job, during that run. */
#define ROLE_JOB ALLOT_ROLE_NROLES

struct principal {
    int64_t token_id; /* a job credential: the token that submitted the job */
    int role;         /* enum allot_store_role, or ROLE_JOB */
    int64_t job_id;   /* ROLE_JOB: the job it speaks for, and the run (stored */
    int64_t job_run;  /* start) it is good for; else 0 */
    char *tenant;     /* owned; "" = cluster-wide */
    char *name;       /* owned: the token's name ("node/NAME": a node's credential) */
    int64_t expires;  /* when the token stops being valid (0: never) */
    bool resolved;    /* a valid token was presented */
};

#define SRV_RESP_HEADERS 8 /* extra headers one reply carries at most (ui.c: 6) */

/* One API request as handlers see it. */
struct req {
    struct server *srv;
    const char *method;
    const char *path;
    char *body; /* NUL-terminated, owned by the HTTP layer */
    size_t body_len;
    void *conn;           /* struct MHD_Connection * */
    char params[2][128];  /* {id}, {name} path parameters, in order */
    struct principal who; /* filled before the handler runs */
    const char *action;   /* audit action of a mutating route */
    int status;           /* response status set by the reply helpers */
    char *resp;           /* owned response body */
    size_t resp_len;      /* its length (it may hold NUL bytes) */
    struct {
        char name[32];
        char value[256];      /* a longer value is cut: keep them short (ui.c: the CSP) */
    } hdrs[SRV_RESP_HEADERS]; /* extra response headers (api_set_header) */
    int n_hdrs;
    const char *content_type; /* static */
    bool audited;             /* the handler wrote the audit entry */
    bool auth_unread;         /* auth_resolve could not read the store: not a bad token */
    int64_t auth_expired;     /* auth_resolve found the token expired at this time (0: not) */
};

/* ---- replies (http.c) ---- */

/* Replies with `status` and the JSON `v` (reference stolen). Returns 0. */
int api_json(struct req *r, int status, json_t *v);
/* Replies {"error":{"code":code,"message":...}} with `status`. Returns 0. */
int api_error(struct req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Replies 503 "standby" naming the leader (docs/ha.md): this allotd
 * stands by while another one leads. Returns 0. */
int api_standby(struct req *r);
/* Replies with `len` bytes (copied) of any content. */
int api_bytes(struct req *r, int status, const char *content_type, const void *buf, size_t len);
/* Replies with plain text (copied). */
int api_text(struct req *r, int status, const char *content_type, const char *text);
/* The value of query argument `key`, or NULL. */
const char *api_query(struct req *r, const char *key);
/* Query argument `key` as a flag: *out true for "1" or "true", false for
 * "0", "false" or none. Anything else replies 400 naming it and returns
 * false. */
bool api_query_flag(struct req *r, const char *key, bool *out);
/* The value of request header `key`, or NULL. */
const char *api_header(struct req *r, const char *key);
/* Adds response header name: value (IN, copied; at most 31 and 95 bytes)
 * to the reply. Returns 0, or ALLOT_ENOSPC past SRV_RESP_HEADERS (a bug). */
int api_set_header(struct req *r, const char *name, const char *value);

/* Parses the body as a JSON object. On failure replies 400 and returns NULL. */
json_t *api_body_object(struct req *r);
/* For a route that takes no body: true for none or an empty JSON object;
 * otherwise replies 400 (malformed JSON, not an object, a field) and
 * returns false. */
bool api_no_body(struct req *r);
/* Replies 400 naming the first key of `obj` not in the NULL-terminated
 * `allowed` list and returns false; true when all keys are known. */
bool api_known_fields(struct req *r, json_t *obj, const char *const *allowed, const char *where);

/* ---- auth (auth.c) ---- */

/* Makes a new secret token ("allot_" + 64 hex) into buf (>= 71 bytes) and
 * its hash. */
void auth_new_secret(char *buf, size_t len, uint8_t hash[ALLOT_STORE_HASH_LEN]);
/* Resolves the Authorization header into r->who. Returns true when valid. */
bool auth_resolve(struct req *r);
/* After auth_resolve said no: the 401 of a bad token, or the 503 (store,
 * Retry-After) of a store that could not be read to tell. Returns 0. */
int auth_refuse(struct req *r, const char *msg);
/* Forgets every token auth_resolve cached (after a revocation). */
void auth_forget_tokens(struct server *s);
/* True when tenant path `t` lies in the subtree of `scope` ("" = all). */
bool auth_in_scope(const char *scope, const char *t);
/* True when the caller may see/act on tenant `t`. */
bool auth_sees_tenant(const struct principal *p, const char *t);
/* True when the caller may see/act on job `id` of tenant `t`: a job's own
 * credential sees that job alone. */
bool auth_sees_job(const struct principal *p, int64_t id, const char *t);
/* The user name of a token named `name` bound to tenant `scope` ("" or
 * NULL: cluster-wide): "SCOPE:NAME", or NAME. A tenant admin names the
 * tokens of its own subtree only, so "SCOPE:NAME" is not a name another
 * tenant (or a cluster-wide token) can take in an agent's user map. The
 * store's job listing names users the same way (STORE_JOB_USER). */
void auth_user_name(const char *scope, const char *name, char *buf, size_t n);
/* The caller's user name (auth_user_name of its token), as the "by NAME"
 * of the events it causes tells it; "a user" when it has none. Returns buf. */
const char *api_who(const struct req *r, char *buf, size_t n);
/* Room for api_who: a tenant path (255), ':' and a token's name (128). */
#define API_WHO_MAX 400
/* The role's name ("job" for ROLE_JOB). */
const char *auth_role_name(int role);
/* Reads the key of job credentials from the store (meta "job_key"),
 * making it on first use; the leader calls it before its loop starts.
 * Returns 0 or the store's code. */
int auth_job_key_init(struct server *s);
#define AUTH_JOB_TOKEN_MAX 128
/* The credential of run `run` (its stored start) of job `job` into buf
 * (>= AUTH_JOB_TOKEN_MAX bytes): "allotjob_JOB_RUN_" + 64 hex of an
 * HMAC-SHA-256 under the key. */
void auth_job_token(const struct server *s, int64_t job, int64_t run, char *buf, size_t len);
void auth_principal_clear(struct principal *p);

/* ---- audit (api_admin.c) ---- */

/* Appends an audit entry for the caller on `st` (inside a write function
 * of the group committer, with the mutation it records). Returns the
 * store's code. */
int api_audit(struct allot_store *st, struct req *r, const char *target, const char *result,
              int64_t now);

/* ---- the store ---- */

/* The calling thread's read handle (lent from the idle ones or opened on
 * first use, closed at shutdown); NULL when it cannot be opened (logged). */
struct allot_store *srv_reader(struct server *s);
/* Gives the calling thread's read handle back to the idle ones (a request
 * ended, or is about to wait long); the next srv_reader lends one again.
 * Idle handles beyond SRV_IDLE_READERS are closed. */
void srv_reader_release(struct server *s);
#define SRV_IDLE_READERS  128
#define SRV_READER_WAIT_S 10 /* a request waits this long for a read handle (--store-readers) */
/* The read handle, or NULL after replying 500. */
struct allot_store *api_reader(struct req *r);
/* The node of task `task` in a job's placement (JSON text), or "". */
void task_node(const char *placement, int64_t task, char *node, size_t len);
/* Runs fn(st, arg) in the next group transaction; returns once durable
 * (0) or failed (fn's error or the commit's). */
int srv_write(struct server *s, allot_store_write_fn fn, void *arg);
int64_t srv_now(void);
/* How long store writes must work without one failing before the store
 * counts as working again: on a full disk a small write (a heartbeat's)
 * may still fit while the rest fail, which must not flap /readyz. */
#define SRV_STORE_CLEAR_MS 5000

/* ---- handlers ---- */
/* The state a node is shown in (GET /v1/nodes, allot_node_state): its
 * stored state, except that a draining node with no task placed (loop)
 * and none its agent still runs is "drained", as in Slurm. Takes the
 * agents lock. */
const char *srv_node_state(struct server *s, const struct allot_store_node *n);

int api_healthz(struct req *r);
int api_readyz(struct req *r);
/* /metrics: public, or for any valid token under --metrics-auth (it
 * checks the token itself; 401 without one). */
int api_metrics(struct req *r);
int api_tokens_create(struct req *r);
int api_tokens_list(struct req *r);
int api_tokens_revoke(struct req *r);
int api_audit_list(struct req *r);
int api_audit_verify(struct req *r);
int api_tenants_put(struct req *r);
int api_tenants_get(struct req *r);
int api_tenants_check(struct req *r);
int api_prio_list(struct req *r);
int api_prio_put(struct req *r);
int api_prio_delete(struct req *r);
int api_jobs_submit(struct req *r);
int api_jobs_list(struct req *r);
int api_jobs_get(struct req *r);
int api_jobs_cancel(struct req *r);
int api_jobs_requeue(struct req *r);
int api_jobs_hold(struct req *r);
int api_jobs_release(struct req *r);
int api_jobs_priority(struct req *r);
int api_jobs_checkpoint(struct req *r);
int api_jobs_signal(struct req *r);
int api_jobs_time_limit(struct req *r);
/* Reads job {id} (r->params[0]) into *j if the caller may see it; else
 * replies (404, or 500 when the store cannot be read) and returns false. */
bool api_job_visible(struct req *r, struct allot_store_job *j);
/* Calls fn(st, member, arg) for each member of array `parent` in one of
 * `states` (a mask of 1 << ALLOT_SJ_*), a page at a time, until fn fails.
 * Returns 0 or the first error (the store's or fn's). */
int api_array_each(struct allot_store *st, int64_t parent, unsigned states,
                   int (*fn)(struct allot_store *st, struct allot_store_job *j, void *arg),
                   void *arg);
int api_jobs_events(struct req *r);
int api_jobs_logs(struct req *r);
int api_nodes_register(struct req *r);
int api_nodes_heartbeat(struct req *r);
int api_nodes_list(struct req *r);
int api_nodes_cordon(struct req *r);
int api_nodes_drain(struct req *r);
int api_nodes_uncordon(struct req *r);
int api_nodes_delete(struct req *r);
int api_usage(struct req *r);
int api_whoami(struct req *r);
int api_scheduler(struct req *r);
int api_idle(struct req *r);
int api_anomalies(struct req *r);
int api_invoices(struct req *r);
int api_pricebook_get(struct req *r);
int api_pricebook_put(struct req *r);

/* Job JSON as the API shows it (new reference). */
json_t *api_job_json(const struct allot_store_job *j);

#endif

/*
 * allotd: the control plane of allot. This file owns the option table
 * (one table drives defaults, the config file, the command line, --help
 * and etc/allotd.conf.example), the `init` command that creates the store
 * and the first admin token, and the serving life cycle: open the store,
 * listen, start the scheduling loop, then wait for signals (SIGTERM and
 * SIGINT drain and exit 0, SIGHUP reopens the log file). Signals are
 * blocked in every thread and taken by the main thread with sigwait().
 *
 * Exit codes: 0 done; 1 runtime failure (store, listen); 2 usage or
 * configuration error.
 */
#include "http.h"
#include "log.h"
#include "meter.h"
#include "loop.h"
#include "refs.h"

#include "allot/common.h"
#include "allot/config.h"
#include "allot/queue.h"
#include "allot/sched.h"

#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define F(x) offsetof(struct server_config, x)
/* a default from the tuned table of include/allot/queue.h, as text */
#define TUNED_(x) #x
#define TUNED(x)  TUNED_(x)

#ifndef ALLOT_WEB_DIR
#define ALLOT_WEB_DIR "/usr/local/share/allot/web"
#endif

static const char *const log_formats[] = {"text", "json", NULL};
static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const idle_actions[] = {"notify", "preempt", NULL};
static const char *const on_off[] = {"off", "on", NULL};

/* Policy names are checked with the options, before allotd listens. */
static int placement_known(const void *field, char *err, size_t errlen)
{
    const char *name = *(char *const *)field;

    char known[256] = "";
    size_t n = 0;

    if (name && allot_sched_policy_find(name))
        return 0;
    for (int i = 0; allot_sched_policies[i] && n < sizeof(known); i++)
        n += (size_t)allot_fmt(known + n, sizeof(known) - n, "%s%s", i ? ", " : "",
                               allot_sched_policies[i]->name);
    allot_fmt(err, errlen, "placement: unknown policy \"%s\" (%s)", name ? name : "", known);
    return ALLOT_EINVAL;
}

static int order_known(const void *field, char *err, size_t errlen)
{
    const char *name = *(char *const *)field;

    if (name && allot_queue_policy_find(name))
        return 0;
    allot_fmt(err, errlen, "order: unknown policy \"%s\" (fair, fifo, las, sjf)", name ? name : "");
    return ALLOT_EINVAL;
}

static int listen_ok(const void *field, char *err, size_t errlen)
{
    return http_parse_listen(*(char *const *)field, NULL, err, errlen);
}

static const struct allot_config_option options[] = {
    {.name = "data-dir",
     .type = ALLOT_CFG_STRING,
     .offset = F(data_dir),
     .help = "Folder of the store (DIR/allot.db, SQLite). Required unless --store names "
             "the store."},
    {.name = "store",
     .type = ALLOT_CFG_STRING,
     .offset = F(store),
     .help = "Store URL: sqlite:PATH, or postgres://[USER@]HOST[:PORT]/DATABASE for several "
             "allotd sharing one PostgreSQL database, one leading and the others standing by "
             "(docs/ha.md). Keep the password out of the URL: libpq reads PGPASSWORD and "
             "~/.pgpass. Default: sqlite:DATA_DIR/allot.db."},
    {.name = "advertise-url",
     .type = ALLOT_CFG_STRING,
     .offset = F(advertise_url),
     .help = "The URL clients and agents reach this allotd at, which standbys name while "
             "it leads (docs/ha.md). Default: http(s)://LISTEN-ADDRESS:PORT."},
    {.name = "store-readers",
     .type = ALLOT_CFG_INT,
     .offset = F(store_readers),
     .def = "0",
     .min = 0,
     .max = 4096,
     .help = "Store read handles open at once, at most (0: 64 on SQLite, 32 on "
             "PostgreSQL; at least 4): with PostgreSQL each is a connection, and the "
             "server's max_connections (100 by default) is shared by every allotd. A request "
             "that finds them all lent waits for one (10 s at most, then 503)."},
    {.name = "lead-check",
     .type = ALLOT_CFG_DURATION,
     .offset = F(lead_check),
     .def = "1s",
     .min = 50,
     .max = 60000,
     .help = "How often a standby tries to take the lead, and the leader checks it still "
             "holds it (it stops, exit status 3, when it does not)."},
    {.name = "listen",
     .type = ALLOT_CFG_STRING,
     .offset = F(listen),
     .def = "127.0.0.1:7070",
     .validate = listen_ok,
     .help = "IPv4 address and port of the HTTP API. Port 0 picks a free port; the "
             "daemon prints `listening on ADDR:PORT` to stderr once it accepts connections."},
    {.name = "config",
     .type = ALLOT_CFG_STRING,
     .offset = F(config),
     .help = "Config file read before the command line (command-line options win). "
             "Only meaningful on the command line."},
    {.name = "tls-cert",
     .type = ALLOT_CFG_STRING,
     .offset = F(tls_cert),
     .help = "PEM certificate (chain) file: with tls-key, the API is served over HTTPS "
             "only."},
    {.name = "tls-key",
     .type = ALLOT_CFG_STRING,
     .offset = F(tls_key),
     .help = "PEM private key file of tls-cert."},
    {.name = "log-file",
     .type = ALLOT_CFG_STRING,
     .offset = F(log_file),
     .help = "Append logs to this file instead of stderr; SIGHUP reopens it (log rotation)."},
    {.name = "log-format",
     .type = ALLOT_CFG_ENUM,
     .offset = F(log_format),
     .def = "text",
     .choices = log_formats,
     .help = "Log line format: text, or json (one JSON object per line)."},
    {.name = "log-level",
     .type = ALLOT_CFG_ENUM,
     .offset = F(log_level),
     .def = "info",
     .choices = log_levels,
     .help = "Most verbose level logged."},
    {.name = "workers",
     .type = ALLOT_CFG_INT,
     .offset = F(workers),
     .def = "0",
     .min = 0,
     .max = 256,
     .help = "HTTP threads. 0: a thread per connection (up to max-connections), so a request "
             "that waits (for its commit, or an agent's long poll) holds up no other "
             "connection; N: a pool of N threads the connections share."},
    {.name = "max-connections",
     .type = ALLOT_CFG_INT,
     .offset = F(max_connections),
     .def = "1024",
     .min = 4,
     .max = 65536,
     .help = "Connections served at once; more are closed as they arrive."},
    {.name = "max-jobs-per-tenant",
     .type = ALLOT_CFG_INT,
     .offset = F(max_jobs_per_tenant),
     .def = "100000",
     .min = 0,
     .max = INT64_C(1) << 40,
     .help = "Pending, starting and running jobs one tenant may have (array members each "
             "count), as Slurm's MaxSubmitJobs; a submission past it is refused (403 "
             "too_many_jobs) and nothing of it stored. 0: no limit."},
    {.name = "max-connections-per-ip",
     .type = ALLOT_CFG_INT,
     .offset = F(max_conn_per_ip),
     .def = "256",
     .min = 0,
     .max = 65536,
     .help = "Connections served at once from one client address (0: no such limit), so that "
             "one client holding connections open (slowly sent requests) cannot take every "
             "connection from the agents and the others. Clients behind one address (a proxy, "
             "NAT) share it."},
    {.name = "default-mem-per-cpu",
     .type = ALLOT_CFG_SIZE,
     .offset = F(def_mem_per_cpu),
     .def = "0",
     .min = 0,
     .max = INT64_C(1) << 50,
     .help = "Memory per CPU for a job that names none: reserved, capped and billed (as "
             "Slurm's DefMemPerCPU). 0: such a job has no memory limit and is billed no memory."},
    {.name = "default-mem-per-gpu",
     .type = ALLOT_CFG_SIZE,
     .offset = F(def_mem_per_gpu),
     .def = "0",
     .min = 0,
     .max = INT64_C(1) << 50,
     .help = "Memory per whole GPU for a job that names none, before default-mem-per-cpu (as "
             "Slurm's DefMemPerGPU). 0: none."},
    {.name = "body-max",
     .type = ALLOT_CFG_SIZE,
     .offset = F(body_max),
     .def = "1M",
     .min = 1024,
     .max = 1 << 30,
     .help = "Largest request body accepted; larger ones get 413."},
    {.name = "cycle-interval",
     .type = ALLOT_CFG_DURATION,
     .offset = F(cycle_interval),
     .def = "1s",
     .min = 10,
     .max = 3600000,
     .help = "A scheduling cycle runs after every change and at least this often."},
    {.name = "cycle-gap",
     .type = ALLOT_CFG_DURATION,
     .offset = F(cycle_gap),
     .def = "10ms",
     .min = 0,
     .max = 1000,
     .help = "Least time between two cycles: changes that come closer together share one "
             "cycle (under load, fewer and larger cycles)."},
    {.name = "cycle-busy",
     .type = ALLOT_CFG_INT,
     .offset = F(cycle_busy),
     .def = "10",
     .min = 1,
     .max = 100,
     .help = "Most of a core (percent) scheduling cycles may take while changes keep "
             "coming: after a cycle that computed for T (CPU time) the next waits at least "
             "T x (100 - P) / P, so that requests keep the rest (100: only cycle-gap)."},
    {.name = "cycle-work",
     .type = ALLOT_CFG_INT,
     .offset = F(cycle_work),
     .def = "16",
     .min = 1,
     .max = 1000000,
     .help = "Most starts, stops, victim searches and queue rebuilds one cycle makes (every "
             "512 waiting jobs looked at count as one more): a cycle that reaches it stops, and "
             "the next goes on from there at once; once the "
             "cycles of one pass have run for cycle-gap and a change is waiting, the loop "
             "takes the change first, so that it waits for cycle-gap and one such cycle, not "
             "for every decision that came due at once."},
    {.name = "fair-reclaim",
     .type = ALLOT_CFG_DURATION,
     .offset = F(fair_reclaim),
     .def = TUNED(ALLOT_TUNED_FAIR_RECLAIM_S) "s",
     .min = 0,
     .max = 86400000,
     .help = "Fair-share reclaim (0s: off): a job whose tenant, with it, stays within its fair "
             "share of the GPUs (the cluster shared in proportion to nominal quotas among the "
             "tenants with work) may preempt another tenant's borrowed job that loses at most "
             "this much work since its last checkpoint, if that tenant keeps at least its own "
             "fair share."},
    {.name = "fair-cap",
     .type = ALLOT_CFG_INT,
     .offset = F(fair_cap),
     .def = TUNED(ALLOT_TUNED_FAIR_CAP_PCT),
     .min = 0,
     .max = 100000,
     .help = "Fair-share cap in percent (0: off, else at least 100): while other tenants' work "
             "waits, a tenant beyond its nominal GPUs starts no job that would take it past this "
             "percentage of its fair share of the GPUs (as for fair-reclaim), so that it does "
             "not fill the room other tenants' gangs wait for."},
    {.name = "defrag-interval",
     .type = ALLOT_CFG_DURATION,
     .offset = F(defrag),
     .def = TUNED(ALLOT_TUNED_DEFRAG_S) "s",
     .min = 0,
     .max = 86400000,
     .help = "Defragmentation (0s: off): at most this often, for the oldest jobs that quota "
             "admits but that wait for whole GPUs no node has free, checkpointable jobs of "
             "fewer GPUs that checkpointed lately (defrag-loss) are moved elsewhere, when a "
             "trial shows the waiting job and every moved job placed at once. A moved job "
             "gets preempt-grace to save its work and starts again at once where the trial "
             "found room. Only jobs whose saves the scheduler can count on move: those that "
             "give checkpoint_interval (a job that does not loses all its run, past "
             "preempt-min-runtime)."},
    {.name = "defrag-loss",
     .type = ALLOT_CFG_DURATION,
     .offset = F(defrag_loss),
     .def = TUNED(ALLOT_TUNED_DEFRAG_LOSS_S) "s",
     .min = 0,
     .max = 86400000,
     .help = "Most work since its last checkpoint (grace period included) that a job moved "
             "by defragmentation may lose."},
    {.name = "reserve-gangs",
     .type = ALLOT_CFG_BOOL,
     .offset = F(reserve_gangs),
     .def = ALLOT_TUNED_RESERVE_GANGS ? "true" : "false",
     .help = "A gang of large-gang-gpus GPUs or more that finds no room reserves the GPUs it "
             "waits for at once (under fair order, the gang of the tenant whose turn it is): "
             "later work starts only if it does not delay it, runs inside its own tenant's "
             "nominal, or is preemptible; preemptible work starts as the gang's backfill and "
             "is preempted for it when its room comes."},
    {.name = "large-gang-gpus",
     .type = ALLOT_CFG_INT,
     .offset = F(large_gang_gpus),
     .def = TUNED(ALLOT_TUNED_LARGE_GANG_GPUS),
     .min = 1,
     .max = 1000000,
     .help = "Jobs of at least this many GPUs in all are large gangs: they may reserve the "
             "GPUs they wait for (at once with reserve-gangs, else once aged)."},
    {.name = "aging",
     .type = ALLOT_CFG_DURATION,
     .offset = F(aging),
     .def = "0s",
     .min = 0,
     .max = 31536000000,
     .help = "A job that has waited this long goes ahead of the fair order, and a large gang "
             "then reserves the GPUs it waits for (0s: off)."},
    {.name = "las-threshold",
     .type = ALLOT_CFG_DURATION,
     .offset = F(las_threshold),
     .def = TUNED(ALLOT_TUNED_LAS_GPU_S) "s",
     .min = 0,
     .max = 31536000000,
     .help = "Two-queue LAS inside a tenant, in GPU-time (GPUs x run time; 0s: off): a job "
             "that has had less GPU service than this goes ahead of the tenant's jobs that "
             "have had more, and may preempt them (within the tenant, past their minimum "
             "runtime)."},
    {.name = "lending-hold",
     .type = ALLOT_CFG_DURATION,
     .offset = F(lending_hold),
     .def = "0s",
     .min = 0,
     .max = 31536000000,
     .help = "Lending hold (0s: off): of its nominal quota, a tenant's recent peak use is not "
             "lent to other tenants; the held amount halves every this long after the use "
             "ends. Fewer borrowed jobs start only to be reclaimed soon after, but a job may "
             "wait on idle GPUs: off by default (the Philly replay measures it at 2h)."},
    {.name = "placement",
     .type = ALLOT_CFG_STRING,
     .offset = F(placement),
     .def = "allot",
     .validate = placement_known,
     .help = "Placement policy by name (allot, fgd, bestfit, firstfit, spread, ...)."},
    {.name = "order",
     .type = ALLOT_CFG_STRING,
     .offset = F(order),
     .def = "fair",
     .validate = order_known,
     .help = "Queue ordering policy by name (fair, fifo, las, sjf)."},
    {.name = "preempt-grace",
     .type = ALLOT_CFG_DURATION,
     .offset = F(preempt_grace),
     .def = TUNED(ALLOT_TUNED_GRACE_S) "s",
     .min = 0,
     .max = 86400000,
     .help = "Time a preempted checkpointable job keeps its GPUs between SIGTERM and SIGKILL "
             "(its agent kills it at the end) before they go to the job that preempted it, "
             "or until its processes are gone if sooner (its agents say so). The victims of a "
             "preemption with a checkpointable one all get it and leave together; victims none "
             "of which checkpoints are stopped at once: their agent gives them its own "
             "--grace, and the preemptor's task starts on their GPUs once they are gone."},
    {.name = "preempt-min-runtime",
     .type = ALLOT_CFG_DURATION,
     .offset = F(preempt_min_runtime),
     .def = TUNED(ALLOT_TUNED_MIN_RUNTIME_S) "s",
     .min = 0,
     .max = 86400000,
     .help = "A job runs at least this long before it may be preempted."},
    {.name = "lease",
     .type = ALLOT_CFG_DURATION,
     .offset = F(lease),
     .def = "30s",
     .min = 1000,
     .max = 86400000,
     .help = "A node's lease: how long after its last heartbeat it stays alive."},
    {.name = "metrics-auth",
     .type = ALLOT_CFG_BOOL,
     .offset = F(metrics_auth),
     .def = "false",
     .help = "/metrics answers only requests with a valid token (any role; 401 otherwise). "
             "Off: anyone who reaches the port may read it, per-tenant figures included."},
    {.name = "rate-limit",
     .type = ALLOT_CFG_INT,
     .offset = F(rate_limit),
     .def = "0",
     .min = 0,
     .max = 1000000,
     .help = "Requests per second each token may make on /v1 (a token bucket); over it "
             "the API answers 429 with Retry-After. 0 turns the limit off."},
    {.name = "rate-burst",
     .type = ALLOT_CFG_INT,
     .offset = F(rate_burst),
     .def = "100",
     .min = 1,
     .max = 1000000,
     .help = "Requests a token may make at once before rate-limit applies."},
    {.name = "meter-interval",
     .type = ALLOT_CFG_DURATION,
     .offset = F(meter_interval),
     .def = "60s",
     .min = 100,
     .max = 3600000,
     .help = "How often the hourly usage roll-ups are brought up to date (the current hour "
             "included); /v1/usage and invoices see usage this fresh."},
    {.name = "idle-threshold",
     .type = ALLOT_CFG_INT,
     .offset = F(idle_threshold),
     .def = "5",
     .min = 0,
     .max = 100,
     .help = "A job holding GPUs whose measured utilisation stays under this percent for "
             "idle-window is flagged idle (allot idle, /v1/idle, allot_idle_jobs)."},
    {.name = "idle-window",
     .type = ALLOT_CFG_DURATION,
     .offset = F(idle_window),
     .def = "1h",
     .min = 0,
     .max = 604800000,
     .help = "How long a job must stay under idle-threshold to be flagged. 0: never."},
    {.name = "idle-class-windows",
     .type = ALLOT_CFG_STRING,
     .offset = F(idle_class_windows),
     .def = "",
     .help = "Per priority class idle windows, CLASS=DURATION separated by commas "
             "(notebook=4h,inference=0); other classes use idle-window."},
    {.name = "idle-action",
     .type = ALLOT_CFG_ENUM,
     .offset = F(idle_action),
     .def = "notify",
     .choices = idle_actions,
     .help = "What happens to an idle job: notify (a log line and an audit entry), or "
             "preempt (also sends a job of a preemptible class back to the queue)."},
    {.name = "anomaly-z",
     .type = ALLOT_CFG_INT,
     .offset = F(anomaly_z),
     .def = "4",
     .min = 1,
     .max = 1000,
     .help = "A tenant whose GPU use in the last hour has a robust z-score (median and MAD "
             "of its own hourly history) at or over this is reported (allot anomalies)."},
    {.name = "anomaly-history",
     .type = ALLOT_CFG_DURATION,
     .offset = F(anomaly_history),
     .def = "336h",
     .min = 43200000,
     .max = 31536000000,
     .help = "How much of a tenant's hourly history its last hour is compared with."},
    {.name = "anomaly-window",
     .type = ALLOT_CFG_DURATION,
     .offset = F(anomaly_window),
     .def = "1h",
     .min = 0,
     .max = 604800000,
     .help = "A running job whose GPU utilisation or memory in the last quarter of this "
             "window differs abruptly from the rest of it is reported. 0: never."},
    {.name = "network",
     .type = ALLOT_CFG_ENUM,
     .offset = F(network),
     .def = "off",
     .choices = on_off,
     .help = "on: every task gets an address in its tenant's network, which agents started "
             "with --network on isolate (docs/network.md)."},
    {.name = "net-pool",
     .type = ALLOT_CFG_STRING,
     .offset = F(net_pool),
     .def = "10.96.0.0/12",
     .help = "IPv4 range the tenant subnets are cut from (one subnet per tenant, never "
             "overlapping; kept in the store, so a restart keeps them)."},
    {.name = "net-prefix",
     .type = ALLOT_CFG_INT,
     .offset = F(net_prefix),
     .def = "24",
     .min = 16,
     .max = 29,
     .help = "Prefix length of one tenant's subnet (24: 253 tasks of a tenant at once)."},
    {.name = "net-vni-base",
     .type = ALLOT_CFG_INT,
     .offset = F(net_vni_base),
     .def = "4096",
     .min = 1,
     .max = 16000000,
     .help = "VXLAN id of the first tenant network; the others follow."},
    {.name = "ui-dir",
     .type = ALLOT_CFG_STRING,
     .offset = F(ui_dir),
     .def = ALLOT_WEB_DIR,
     .help = "Folder of the web dashboard's files, served under /ui/ (web/ in the source "
             "tree). Empty: no dashboard."},
    {.name = "debug-ready-delay",
     .type = ALLOT_CFG_DURATION,
     .offset = F(ready_delay),
     .def = "0",
     .min = 0,
     .max = 60000,
     .help = "Testing only: stay in the starting state (503) this long after the core "
             "is rebuilt. Off (0) by default."},
};
#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

static struct server srv;

/* A handle a thread no longer holds goes to the idle list for the next
 * one, or is closed when SRV_IDLE_READERS are idle already. Also the
 * thread-specific key's destructor (a thread that ends holding one). */
static void reader_release(void *p)
{
    struct server *s = &srv;
    struct allot_store *st = p;

    pthread_mutex_lock(&s->readers_lock);
    if (s->n_idle >= SRV_IDLE_READERS) {
        for (size_t i = 0; i < s->n_readers; i++)
            if (s->readers[i] == st) {
                s->readers[i] = s->readers[--s->n_readers];
                break;
            }
        pthread_cond_signal(&s->readers_cv);
        pthread_mutex_unlock(&s->readers_lock);
        allot_store_close(st);
        return;
    }
    if (ALLOT_ALWAYS(s->n_idle < s->cap_idle)) /* room was reserved at the handle's opening */
        s->idle_readers[s->n_idle++] = st;
    pthread_cond_signal(&s->readers_cv);
    pthread_mutex_unlock(&s->readers_lock);
}

void srv_reader_release(struct server *s)
{
    struct allot_store *st = pthread_getspecific(s->reader_key);

    if (!st)
        return;
    pthread_setspecific(s->reader_key, NULL);
    reader_release(st);
}

struct allot_store *srv_reader(struct server *s)
{
    char err[512];
    struct allot_store *st = pthread_getspecific(s->reader_key);

    if (st)
        return st;
    pthread_mutex_lock(&s->readers_lock);
    /* at most --store-readers open: wait for one to come back */
    if (s->n_idle == 0 && s->n_readers >= (size_t)s->cfg.store_readers) {
        struct timespec until;
        int w = 0;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += SRV_READER_WAIT_S;
        while (s->n_idle == 0 && s->n_readers >= (size_t)s->cfg.store_readers && w == 0)
            w = pthread_cond_timedwait(&s->readers_cv, &s->readers_lock, &until);
    }
    if (s->n_idle > 0) {
        st = s->idle_readers[--s->n_idle];
    } else if (s->n_readers < (size_t)s->cfg.store_readers &&
               allot_grow((void **)&s->readers, &s->cap_readers, s->n_readers + 1,
                          sizeof(struct allot_store *)) == 0 &&
               allot_grow((void **)&s->idle_readers, &s->cap_idle, s->n_readers + 1,
                          sizeof(struct allot_store *)) == 0 &&
               allot_store_open(s->store_url, NULL, &st, err, sizeof(err)) == 0) {
        s->readers[s->n_readers++] = st; /* the idle list has room for every handle */
    } else if (s->n_readers >= (size_t)s->cfg.store_readers) {
        LOG_WARN("main", "all %lld store read handles stayed lent for %d s",
                 (long long)s->cfg.store_readers, SRV_READER_WAIT_S);
    } else {
        LOG_ERROR("main", "cannot open a read handle: %s", st ? "" : err);
    }
    pthread_mutex_unlock(&s->readers_lock);
    if (st && pthread_setspecific(s->reader_key, st) != 0) {
        /* not recorded as this thread's, it would be lent twice: back it goes */
        LOG_ERROR("main", "cannot lend a read handle: out of memory");
        reader_release(st);
        return NULL;
    }
    return st;
}

int srv_write(struct server *s, allot_store_write_fn fn, void *arg)
{
    int rc = allot_store_gc_submit(s->gc, fn, arg);

    /* the store itself failing (a full disk, an I/O error), not a refusal:
     * said once when it starts and once when it ends, with its words; it
     * ends when writes work and none failed for SRV_STORE_CLEAR_MS (on a
     * full disk a heartbeat's small write may still fit) */
    if (rc == ALLOT_EIO || rc == ALLOT_ENOMEM) {
        atomic_store(&s->store_failed_ms, allot_mono_ms());
        if (!atomic_exchange(&s->store_failing, rc)) {
            char why[256];
            allot_store_gc_last_error(s->gc, why, sizeof(why));
            LOG_ERROR("main", "store writes fail: %s (%s)", allot_strerror(rc), why);
        }
    } else if (rc == 0 && atomic_load(&s->store_failing) &&
               allot_mono_ms() - atomic_load(&s->store_failed_ms) >= SRV_STORE_CLEAR_MS &&
               atomic_exchange(&s->store_failing, 0)) {
        LOG_INFO("main", "store writes work again (none failed for %d s)",
                 SRV_STORE_CLEAR_MS / 1000);
    }
    /* another allotd took the lead: from now on this one answers as a
     * standby (its requests retried elsewhere) until keep_lead stops it */
    if (rc == ALLOT_EFENCED && !atomic_load(&s->fenced)) {
        /* the leader that took over wrote its URL with its epoch: clients
         * are sent there (named before any answer says "standby") */
        struct allot_store *rd = srv_reader(s);
        char *url = NULL;

        if (!rd || allot_store_meta_get(rd, "leader_url", &url) != 0)
            url = NULL;
        pthread_mutex_lock(&s->leader_lock);
        allot_strlcpy(s->leader_url, url ? url : "", sizeof(s->leader_url));
        pthread_mutex_unlock(&s->leader_lock);
        allot_free(url);
    }
    if (rc == ALLOT_EFENCED && !atomic_exchange(&s->fenced, true)) {
        atomic_store(&s->ready, false);
        atomic_store(&s->standby, true);
        LOG_ERROR("main", "a write was fenced: another allotd took the lead; answering as a "
                          "standby until this one stops");
    }
    return rc;
}

/* Closes every thread's read handle; the threads have stopped. */
static void close_readers(struct server *s)
{
    for (size_t i = 0; i < s->n_readers; i++)
        allot_store_close(s->readers[i]);
    allot_free(s->readers);
    allot_free(s->idle_readers);
    s->readers = s->idle_readers = NULL;
    s->n_readers = s->cap_readers = s->n_idle = s->cap_idle = 0;
}

int64_t srv_now(void)
{
    return (int64_t)time(NULL);
}

#define USAGE                                                                                      \
    "usage: allotd init --data-dir DIR | --store URL\n"                                            \
    "       allotd --data-dir DIR [--listen 127.0.0.1:7070] [--config FILE] [OPTIONS]\n"           \
    "       allotd --print-config-example | --print-routes | --help\n"

/* --help: the usage and every option; after a usage error only the usage
 * (the error stays the first line a user sees). */
static void usage(FILE *out, bool full)
{
    fputs(USAGE, out);
    if (!full) {
        fputs("allotd --help lists the options (docs/allotd.md)\n", out);
        return;
    }
    fputs("\nThe control plane of allot (docs/allotd.md). `init` creates the store and prints\n"
          "the first admin token once. Options:\n\n",
          out);
    allot_config_help(options, N_OPTIONS, out);
}

static int store_url(const struct server_config *c, char *buf, size_t len)
{
    if (c->store && *c->store) {
        if (allot_fmt(buf, len, "%s", c->store) >= (int)len) {
            fprintf(stderr, "allotd: --store: the URL is too long\n");
            usage(stderr, false);
            return -1;
        }
        return 0;
    }
    if (!c->data_dir || !*c->data_dir) {
        fprintf(stderr, "allotd: --data-dir (or --store) is required\n");
        usage(stderr, false);
        return -1;
    }
    allot_fmt(buf, len, "sqlite:%s/allot.db", c->data_dir);
    return 0;
}

/* The store URL as logs may show it: a password in it (USER:PASSWORD@ in
 * the authority, or a password= parameter) is replaced by ***. */
static void store_url_shown(const char *url, char *buf, size_t len)
{
    const char *auth = strstr(url, "://"), *p = url;
    size_t o = 0;

    if (!len)
        return;
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (o + 1 < len)                                                                           \
            buf[o++] = (c);                                                                        \
    } while (0)
    if (auth) {
        const char *host = auth + 3, *end = host + strcspn(host, "/?"), *at = NULL, *colon;

        for (const char *q = host; q < end; q++)
            if (*q == '@')
                at = q; /* the last one: a password may hold '@' */
        colon = at ? memchr(host, ':', (size_t)(at - host)) : NULL;
        for (; p < (colon ? colon + 1 : host); p++)
            PUT(*p);
        if (colon) {
            PUT('*');
            PUT('*');
            PUT('*');
            p = at;
        }
    }
    while (*p) {
        if (!strncmp(p, "password=", 9) &&
            (p == url || p[-1] == '?' || p[-1] == '&' || p[-1] == ' ')) {
            for (int i = 0; i < 9; i++)
                PUT(p[i]);
            PUT('*');
            PUT('*');
            PUT('*');
            p += 9 + strcspn(p + 9, "& ");
            continue;
        }
        PUT(*p++);
    }
#undef PUT
    buf[o] = '\0';
}

static int cmd_init(struct server_config *c)
{
    struct allot_store_opts so = {.flags = ALLOT_STORE_CREATE | ALLOT_STORE_MIGRATE};
    struct allot_store_token t = {.name = "admin", .role = ALLOT_ROLE_ADMIN, .tenant = ""};
    struct allot_store_audit a = {.action = "store.init", .target = "token/1", .result = "ok"};
    struct allot_store_token *all = NULL;
    struct allot_store *st = NULL;
    char url[4200], err[512], secret[80];
    size_t n = 0;
    int rc;

    if (store_url(c, url, sizeof(url)) < 0)
        return 2;
    if (c->data_dir && *c->data_dir && mkdir(c->data_dir, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "allotd: %s: %s\n", c->data_dir, strerror(errno));
        return 1;
    }
    rc = allot_store_open(url, &so, &st, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "allotd: %s\n", err);
        return 1;
    }
    rc = allot_store_token_list(st, &all, &n);
    allot_store_tokens_free(all, n);
    if (rc == 0 && n > 0) {
        store_url_shown(url, err, sizeof(err));
        fprintf(stderr, "allotd: %s is already initialised (it holds tokens)\n", err);
        allot_store_close(st);
        return 1;
    }
    auth_new_secret(secret, sizeof(secret), t.hash);
    t.created = a.time = srv_now();
    rc = allot_store_begin(st);
    if (!rc)
        rc = allot_store_token_add(st, &t, &t.id);
    if (!rc)
        rc = allot_store_audit_append(st, &a, NULL);
    if (!rc)
        rc = allot_store_commit(st);
    else
        allot_store_rollback(st);
    if (rc < 0) {
        fprintf(stderr, "allotd: cannot store the admin token: %s\n", allot_store_errmsg(st));
        allot_store_close(st);
        return 1;
    }
    allot_store_close(st);
    printf("%s\n", secret);
    fflush(stdout);
    return 0;
}

enum lead_outcome { LEAD_TAKEN, LEAD_STOP, LEAD_LOST, LEAD_ERROR };

/* Waits up to the lead check for a signal of `set`; true when one asks
 * allotd to stop (SIGHUP reopens the log and keeps waiting). */
static bool stop_signal(struct server *s, const sigset_t *set)
{
    struct timespec t = {s->cfg.lead_check / 1000, (s->cfg.lead_check % 1000) * 1000000};
    int sig = sigtimedwait(set, NULL, &t);

    if (sig < 0)
        return false;
    if (sig == SIGHUP) {
        if (log_reopen() < 0)
            fprintf(stderr, "allotd: cannot reopen %s\n", s->cfg.log_file);
        LOG_INFO("main", "SIGHUP: log reopened");
        return false;
    }
    LOG_INFO("main", "signal %d: draining", sig);
    return true;
}

/* Stands by until this allotd holds the lead, or a signal stops it. Until
 * then /readyz and the API answer 503 "standby", naming the leader. */
static enum lead_outcome await_lead(struct server *s, const sigset_t *set)
{
    bool leading = false, said = false;
    unsigned failed = 0;

    for (;;) {
        char *leader = NULL;

        /* the first failure and then one a minute: the store may be away */
        if (allot_store_lead(s->lst, &leading) < 0) {
            if (failed++ % (unsigned)(60000 / s->cfg.lead_check + 1) == 0)
                LOG_WARN("main", "cannot ask for the lead: %s", allot_store_errmsg(s->lst));
        } else {
            failed = 0;
        }
        if (leading) {
            atomic_store(&s->standby, false);
            return LEAD_TAKEN;
        }
        atomic_store(&s->standby, true);
        allot_store_meta_get(s->lst, "leader_url", &leader);
        pthread_mutex_lock(&s->leader_lock);
        allot_strlcpy(s->leader_url, leader ? leader : "", sizeof(s->leader_url));
        pthread_mutex_unlock(&s->leader_lock);
        if (!said) {
            LOG_INFO("main", "standing by: another allotd leads (%s)",
                     leader && *leader ? leader : "where is not known yet");
            said = true;
        }
        allot_free(leader);
        if (stop_signal(s, set))
            return LEAD_STOP;
    }
}

/* While leading: waits for a signal, checking the lead every lead-check.
 * LEAD_LOST when it is gone (the store's session ended): this allotd must
 * stop at once; its writes are already fenced. */
static enum lead_outcome keep_lead(struct server *s, const sigset_t *set)
{
    bool leading = true;

    for (;;) {
        if (stop_signal(s, set))
            return LEAD_STOP;
        if (allot_store_lead(s->lst, &leading) < 0) {
            LOG_WARN("main", "cannot check the lead: %s", allot_store_errmsg(s->lst));
            continue;
        }
        if (!leading) {
            LOG_ERROR("main", "lost the lead (the store's session ended): stopping; another "
                              "allotd takes over");
            return LEAD_LOST;
        }
        atomic_store(&s->lead_ok_ms, allot_mono_ms());
    }
}

/* PostgreSQL ends the session of an allotd frozen this long (ms) while it
 * holds the lead or the write lock (docs/ha.md): ten lead checks, at least
 * 10 s. */
static int frozen_ms(const struct server *s)
{
    return s->cfg.lead_check * 10 > 10000 ? (int)(s->cfg.lead_check * 10) : 10000;
}

static int serve(struct server *s)
{
    struct allot_store_opts so = {.flags = ALLOT_STORE_MIGRATE, .idle_in_tx_ms = frozen_ms(s)};
    struct allot_store_opts lo = {.idle_session_ms = frozen_ms(s)};
    char url[4200], err[512], advertise[512];
    int64_t epoch = 0;
    sigset_t set;
    int port = 0, rc = 1;

    if (store_url(&s->cfg, url, sizeof(url)) < 0)
        return 2;
    /* Block the signals the main thread waits for before any thread exists
     * (the store's group committer, the HTTP pool, the loop): a thread
     * created earlier would inherit them unblocked and SIGTERM or SIGHUP
     * could be delivered there and kill the daemon with the default action. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    allot_strlcpy(s->store_url, url, sizeof(s->store_url));
    /* read handles: each a server connection on PostgreSQL, shared by every allotd */
    if (s->cfg.store_readers == 0)
        s->cfg.store_readers = strncmp(url, "sqlite:", 7) == 0 ? 64 : 32;
    else if (s->cfg.store_readers < 4)
        s->cfg.store_readers = 4; /* the loop and the metering thread hold one each */
    int orc = allot_store_open(url, &so, &s->wst, err, sizeof(err));
    if (orc < 0) {
        char db[4200];
        struct stat sb;

        if (s->cfg.store && *s->cfg.store) {
            /* a server's store: `init` makes it when the database holds none;
             * else the server says what is wrong (down, no such database) */
            fprintf(stderr, "allotd: %s (%s)\n", err,
                    orc == ALLOT_ENOENT ? "a new store: run `allotd init --store URL` first"
                                        : "check that the database server is up and the URL "
                                          "names it and an existing database");
            return 1;
        }
        allot_fmt(db, sizeof(db), "%s/allot.db", s->cfg.data_dir);
        if (stat(db, &sb) == 0) /* there is a store: init is not the answer */
            fprintf(stderr,
                    "allotd: %s (the store %s exists: check its permissions and "
                    "the file system, which must be writable)\n",
                    err, db);
        else
            fprintf(stderr, "allotd: %s (run `allotd init --data-dir %s` first)\n", err,
                    s->cfg.data_dir);
        return 1;
    }
    { /* an SQLite store made before it was made 0600: said, not changed */
        struct stat sb;
        if (!strncmp(url, "sqlite:", 7) && stat(url + 7, &sb) == 0 && (sb.st_mode & 077))
            LOG_WARN("main",
                     "the store %s may be read by others (mode %03o): it holds the key job "
                     "credentials are made with and the jobs' environments; chmod 600 it",
                     url + 7, (unsigned)(sb.st_mode & 0777));
    }
    pthread_mutex_init(&s->readers_lock, NULL);
    pthread_cond_init(&s->readers_cv, NULL);
    pthread_key_create(&s->reader_key, reader_release);
    pthread_mutex_init(&s->refs_lock, NULL);
    pthread_mutex_init(&s->agents_lock, NULL);
    pthread_mutex_init(&s->tokens_lock, NULL);
    pthread_mutex_init(&s->leader_lock, NULL);
    s->tokens = json_object();
    s->agents = json_object();
    s->cat = allot_catalog_default(err, sizeof(err));
    if (!s->cat) {
        fprintf(stderr, "allotd: GPU catalog: %s\n", err);
        goto out_cat;
    }
    /* the handle that holds the lead: several allotd may share the store */
    if (allot_store_open(url, &lo, &s->lst, err, sizeof(err)) < 0) {
        fprintf(stderr, "allotd: %s\n", err);
        goto out_cat;
    }
    signal(SIGPIPE, SIG_IGN);
    s->http = http_start(s, s->cfg.listen, (int)s->cfg.workers, (int)s->cfg.max_connections, &port,
                         err, sizeof(err));
    if (!s->http) {
        fprintf(stderr, "allotd: %s\n", err);
        goto out_cat;
    }
    {
        char host[64];
        const char *colon = strrchr(s->cfg.listen, ':');
        size_t hl = (size_t)(colon - s->cfg.listen);
        char shown[4200];

        memcpy(host, s->cfg.listen, hl < sizeof(host) ? hl : sizeof(host) - 1);
        host[hl < sizeof(host) ? hl : sizeof(host) - 1] = '\0';
        fprintf(stderr, "listening on %s:%d\n", host, port);
        fflush(stderr);
        store_url_shown(url, shown, sizeof(shown));
        LOG_INFO("main", "listening on %s:%d%s, store %s", host, port,
                 s->cfg.tls_cert && *s->cfg.tls_cert ? " (HTTPS)" : "", shown);
        if (s->cfg.advertise_url && *s->cfg.advertise_url)
            allot_strlcpy(advertise, s->cfg.advertise_url, sizeof(advertise));
        else {
            allot_fmt(advertise, sizeof(advertise), "%s://%s:%d",
                      s->cfg.tls_cert && *s->cfg.tls_cert ? "https" : "http", host, port);
            if (!strcmp(host, "0.0.0.0") || !strcmp(host, "[::]") || !strcmp(host, "::"))
                LOG_WARN("main",
                         "no --advertise-url: standbys would send clients to %s, which is no "
                         "address to reach; set --advertise-url when several allotd share the "
                         "store",
                         advertise);
        }
    }
    /* standing by until the lead is ours (docs/ha.md) */
    switch (await_lead(s, &set)) {
    case LEAD_TAKEN:
        break;
    case LEAD_STOP:
        rc = 0;
        goto out_http;
    default:
        goto out_http;
    }
    /* every write from here on checks that no other allotd took over
     * since. The last leader may hold the write lock still (frozen inside a
     * transaction): the server ends its session after frozen_ms, so this
     * tries again for twice that */
    for (int64_t until = srv_now() + 2 * frozen_ms(s) / 1000;;) {
        if (allot_store_take_lead(s->wst, advertise, &epoch) == 0)
            break;
        if (srv_now() >= until) {
            fprintf(stderr, "allotd: cannot take the lead: %s\n", allot_store_errmsg(s->wst));
            goto out_http;
        }
        LOG_WARN("main", "cannot take the lead yet: %s; trying again", allot_store_errmsg(s->wst));
        struct timespec w = {1, 0};
        nanosleep(&w, NULL);
        /* a lead check meanwhile: its session stays busy (not ended for
         * idling), and a lead lost meanwhile is not taken */
        bool still = false;
        if (allot_store_lead(s->lst, &still) == 0 && !still) {
            fprintf(stderr, "allotd: lost the lead while taking it\n");
            goto out_http;
        }
    }
    atomic_store(&s->lead_ok_ms, allot_mono_ms());
    pthread_mutex_lock(&s->leader_lock);
    s->leader_url[0] = '\0'; /* the one it stood by for no longer leads */
    pthread_mutex_unlock(&s->leader_lock);
    LOG_INFO("main", "leading (epoch %lld) as %s", (long long)epoch, advertise);
    atomic_store(&s->epoch, epoch);
    /* a lone write waits at most 200 us for company before it commits */
    s->gc = allot_store_gc_new(s->wst, 256, 200);
    if (!s->gc) {
        fprintf(stderr, "allotd: cannot start the group committer\n");
        goto out_http;
    }
    /* the key of the jobs' own credentials, before the loop hands any out */
    int krc = auth_job_key_init(s);
    if (krc) {
        fprintf(stderr, "allotd: cannot read or make the key of job credentials: %s\n",
                krc == ALLOT_EINVAL ? "meta \"job_key\" is not 64 hex digits"
                                    : allot_strerror(krc));
        goto out_http;
    }
    if (!loop_start(s, err, sizeof(err))) {
        fprintf(stderr, "allotd: %s\n", err);
        goto out_http;
    }
    if (!meter_start(s, err, sizeof(err))) {
        fprintf(stderr, "allotd: %s\n", err);
        goto out_http;
    }
    switch (keep_lead(s, &set)) {
    case LEAD_LOST:
        rc = 3;
        atomic_store(&s->ready, false);
        goto out_http;
    default:
        break;
    }
    rc = 0;
    atomic_store(&s->ready, false);
out_http:
    meter_stop(s);
    loop_release_waiters(s->loop);
    http_stop(s->http);
    s->http = NULL;
    meter_net_free(); /* no /metrics any more */
    loop_stop(s->loop);
    s->loop = NULL;
out_cat:
    allot_catalog_free(s->cat);
    allot_store_gc_free(s->gc);
    close_readers(s);
    pthread_key_delete(s->reader_key);
    refs_free(s);
    json_decref(s->agents);
    json_decref(s->live_est);
    json_decref(s->tokens);
    allot_store_close(s->lst);
    allot_store_close(s->wst);
    if (!rc)
        LOG_INFO("main", "stopped");
    return rc;
}

int main(int argc, char **argv)
{
    struct server_config *c = &srv.cfg;
    char err[512];
    bool init = false;
    int i = 1, rc;

    if (allot_config_defaults(options, N_OPTIONS, c, err, sizeof(err)) < 0) {
        fprintf(stderr, "allotd: %s\n", err);
        return 2;
    }
    for (int k = 1; k < argc && argv[k]; k++) {
        if (!strcmp(argv[k], "--help") || !strcmp(argv[k], "-h")) {
            usage(stdout, true);
            return 0;
        }
        if (!strcmp(argv[k], "--print-config-example")) {
            allot_config_example(options, N_OPTIONS, "allotd", stdout);
            return 0;
        }
        if (!strcmp(argv[k], "--print-routes")) {
            for (size_t r = 0; r < http_n_routes; r++)
                printf("%s %s\n", http_routes[r].method, http_routes[r].pattern);
            return 0;
        }
    }
    if (argc > 1 && argv[1] && !strcmp(argv[1], "init")) {
        init = true;
        i = 2;
    }
    if (allot_config_load_args(options, N_OPTIONS, c, argc, argv, &i, err, sizeof(err)) < 0) {
        fprintf(stderr, "allotd: %s\n", err);
        usage(stderr, false);
        return 2;
    }
    if (i < argc) {
        fprintf(stderr, "allotd: unexpected argument \"%s\"\n", argv[i]);
        usage(stderr, false);
        return 2;
    }
    if ((c->tls_cert && *c->tls_cert) != (c->tls_key && *c->tls_key)) {
        fprintf(stderr, "allotd: --tls-cert and --tls-key go together\n");
        usage(stderr, false);
        return 2;
    }
    if (c->fair_cap > 0 && c->fair_cap < 100) {
        fprintf(stderr, "allotd: --fair-cap %lld: 0 (off) or a percentage of at least 100\n",
                (long long)c->fair_cap);
        usage(stderr, false);
        return 2;
    }
    {
        /* the queue counts these in whole seconds: a fraction would be cut
         * off unseen (500ms of grace would be none) */
        const struct {
            const char *name;
            int64_t ms;
        } secs[] = {
            {"preempt-grace", c->preempt_grace}, {"preempt-min-runtime", c->preempt_min_runtime},
            {"fair-reclaim", c->fair_reclaim},   {"aging", c->aging},
            {"las-threshold", c->las_threshold}, {"defrag-interval", c->defrag},
            {"defrag-loss", c->defrag_loss}};
        for (size_t k = 0; k < sizeof(secs) / sizeof(secs[0]); k++)
            if (secs[k].ms % 1000) {
                fprintf(stderr, "allotd: --%s %lldms: the scheduler counts whole seconds\n",
                        secs[k].name, (long long)secs[k].ms);
                usage(stderr, false);
                return 2;
            }
    }
    if (log_setup(c->log_file, !strcmp(c->log_format, "json"), c->log_level) < 0) {
        fprintf(stderr, "allotd: cannot open log file %s\n", c->log_file);
        return 1;
    }
    struct stat ui;
    if (!init && c->ui_dir && *c->ui_dir && (stat(c->ui_dir, &ui) < 0 || !S_ISDIR(ui.st_mode)))
        LOG_WARN("main", "the dashboard's files are not at %s (--ui-dir): /ui/ answers 404",
                 c->ui_dir);
    curl_global_init(CURL_GLOBAL_DEFAULT); /* before any thread: api_logs.c */
    rc = init ? cmd_init(c) : serve(&srv);
    curl_global_cleanup();
    log_close();
    allot_config_free(options, N_OPTIONS, c);
    return rc;
}

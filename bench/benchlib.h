/*
 * Shared plumbing of the control-plane benchmarks (bench/api.c,
 * bench/cluster.c): start a real allotd in a temporary folder on
 * 127.0.0.1:0 and stop it by its pid, plain-socket HTTP/1.1 keep-alive
 * requests (blocking, for set-up), and a one-thread epoll load driver
 * that keeps N connections busy and records each request's latency.
 * The job mix of ../shared/bench/jobmix.sh is regenerated here (same
 * MINSTD generator) or read from its TSV output. Every wait is bounded
 * in time. Benchmarks print figures; nothing here asserts on timing.
 */
#ifndef ALLOT_BENCH_BENCHLIB_H
#define ALLOT_BENCH_BENCHLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A running allotd. */
struct bench_daemon {
    pid_t pid;
    int port;
    char dir[256];   /* temporary data folder, removed by bench_daemon_stop */
    char log[320];   /* its stderr */
    char admin[128]; /* the admin token printed by `allotd init` */
    char store[512]; /* --store URL of a PostgreSQL database ("": DIR's SQLite file) */
};

/* Daemons started after this keep their store in a fresh database of the
 * PostgreSQL server at `server` ("postgres://USER@HOST:PORT"; NULL: back to
 * SQLite), created here and dropped by bench_daemon_stop. Returns 0 or -1. */
int bench_use_postgres(const char *server);

/* Path of allotd: $ALLOTD, else "allotd" next to this executable. OUT:
 * buf. Returns 0 or -1. */
int bench_allotd_path(char *buf, size_t size);

/* Runs `allotd init` in a fresh temp folder, then serves on 127.0.0.1:0
 * with the NULL-terminated extra arguments, reads the port from the
 * `listening on` line and waits for /readyz (each wait <= 20 s).
 * Returns 0, or -1 with the daemon stopped and a message on stderr. */
int bench_daemon_start(struct bench_daemon *d, const char *allotd, const char *const *extra);

/* SIGTERM to the daemon's pid, waits up to 30 s (then SIGKILL), removes
 * its folder. Prints the log's tail on stderr when it did not exit 0. */
void bench_daemon_stop(struct bench_daemon *d);

/* `field` ("VmRSS" or "VmHWM") of process pid in KiB, or -1. */
long bench_proc_kib(pid_t pid, const char *field);

/* Seconds on the monotonic clock. */
double bench_now(void);

/* A blocking keep-alive connection to 127.0.0.1:port. */
struct bench_conn {
    int fd;
    int port;
    char *buf; /* owned: response buffer */
    size_t len, cap;
};

/* Connects (TCP_NODELAY). Returns 0 or -1. */
int bench_conn_open(struct bench_conn *c, int port);
void bench_conn_close(struct bench_conn *c);

/* One request; reconnects once if the server closed the connection.
 * extra: more header lines, each ending in "\r\n", or NULL. OUT: *status,
 * and *body (owned by c, valid until the next call; NUL-terminated).
 * Returns 0 or -1 (timeout 30 s). */
int bench_call(struct bench_conn *c, const char *method, const char *path, const char *token,
               const char *extra, const char *body, int *status, const char **body_out);

/* Formats a complete request into buf. Returns its length, or 0 if it
 * does not fit. */
size_t bench_format_request(char *buf, size_t cap, const char *method, const char *path,
                            const char *token, const char *extra, const char *body);

/* Parses one response at the start of buf[0..len). Returns its total
 * length when complete (OUT: status, body offset and length), 0 when
 * more bytes are needed, -1 when malformed or chunked. */
long bench_parse_response(const char *buf, size_t len, int *status, size_t *body_off,
                          size_t *body_len);

/* The load driver: `clients` connections each send a request built by
 * next() as soon as the previous reply arrived, until next() returns 0
 * for every connection or max_s passes. */
struct bench_load {
    int port;
    int clients;
    double max_s;
    /* Builds client k's next request into buf (cap bytes); returns its
     * length, or 0 when this client is done. */
    size_t (*next)(void *ud, int k, char *buf, size_t cap);
    /* Called with each reply (body not NUL-terminated); may be NULL. */
    void (*reply)(void *ud, int k, int status, const char *body, size_t len);
    /* Called about every 10 ms while running; may be NULL. */
    void (*tick)(void *ud);
    void *ud;
    /* OUT */
    double *lat_ms; /* owned: one latency per completed request */
    size_t n_lat, cap_lat;
    size_t n_bad;   /* replies not 2xx, and connection errors */
    double wall_s;  /* first send to last reply */
    bool timed_out; /* max_s passed with requests left */
};

/* Runs the load. Returns 0, or -1 when no connection could be opened. */
int bench_load_run(struct bench_load *L);
void bench_load_free(struct bench_load *L);

/* Percentile p (0..100) of n values, sorting them in place. */
double bench_percentile(double *v, size_t n, double p);

/* One job of the mix (jobmix.sh's columns). */
struct bench_job {
    int idx, gpus, account; /* account 1..4 */
    char qos[8];            /* high, normal, low */
    int time_limit_min, sleep_s;
};

/* The mix: from the TSV file `path` (jobmix.sh's output) when path is
 * not NULL, else generated like `jobmix.sh n seed`. OUT: *jobs (malloc'd,
 * caller frees). Returns the number of jobs, or -1. */
long bench_jobmix(const char *path, long n, long seed, struct bench_job **jobs);

/* The tenants document: a1..a4 with fair-share weights 40/30/20/10, no
 * quotas, priority classes high/normal/low (none preemptible, as Slurm's
 * QoS levels in ../shared/bench/slurm). */
extern const char bench_tenants_json[];

/* Creates the tenants, an agent token and one member token per tenant
 * through the API. OUT: agent, member[4] (each cap bytes). Returns 0/-1. */
int bench_setup_tenants(struct bench_conn *c, const char *admin, char *agent, char member[4][128],
                        size_t cap);

/* Registers nodes n0001..n<count> (8 A100 GPUs, 64 CPUs, 500 GiB)
 * through the agent API with `clients` connections, calling tick(ud)
 * about every 10 ms when not NULL. OUT: *secs. Returns the number
 * registered (201 or 200), or -1. */
long bench_register_nodes(int port, const char *agent, int count, int clients, void (*tick)(void *),
                          void *ud, double *secs);

/* GET /metrics and reads gauge `name` (the full series name, labels
 * included). Returns 0 (OUT: *v) or -1. */
int bench_metric(struct bench_conn *c, const char *name, double *v);

/* Reads several gauges from one GET /metrics. Returns 0 or -1. */
int bench_metrics(struct bench_conn *c, const char *const *names, double *v, int n);

/* The submit body of job j into buf. Returns its length or 0. */
size_t bench_job_body(char *buf, size_t cap, const struct bench_job *j);

#endif

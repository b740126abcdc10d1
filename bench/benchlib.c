/*
 * Shared plumbing of the control-plane benchmarks (see benchlib.h).
 * Plain sockets and epoll, so the load generator costs the 2-core
 * machine as little CPU as possible next to the daemon it measures.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include "benchlib.h"

#include <libpq-fe.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REQ_CAP 8192

double bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

int bench_allotd_path(char *buf, size_t size)
{
    const char *env = getenv("ALLOTD");
    char self[1024];
    ssize_t n;

    if (env && *env) {
        snprintf(buf, size, "%s", env);
        return 0;
    }
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    snprintf(buf, size, "%s/allotd", self);
    return access(buf, X_OK) == 0 ? 0 : -1;
}

long bench_proc_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t fl = strlen(field);
    long v = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, fl) && line[fl] == ':') {
            v = strtol(line + fl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* ---- the daemon ---- */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void print_log_tail(const struct bench_daemon *d)
{
    char buf[4096];
    FILE *f = fopen(d->log, "r");
    long sz;
    size_t n;

    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fseek(f, sz > (long)sizeof(buf) - 1 ? sz - (long)sizeof(buf) + 1 : 0, SEEK_SET);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "---- allotd log (tail)\n%s\n----\n", buf);
}

/* Runs `allotd init`; reads the token from its stdout. */
static int run_init(struct bench_daemon *d, const char *allotd)
{
    int p[2], status = 0;
    pid_t pid;
    ssize_t n = 0, r;
    double end = bench_now() + 20;

    if (pipe(p) < 0)
        return -1;
    pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

        if (fd >= 0)
            dup2(fd, 2);
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        if (d->store[0])
            execl(allotd, allotd, "init", "--store", d->store, (char *)NULL);
        else
            execl(allotd, allotd, "init", "--data-dir", d->dir, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    while ((size_t)n < sizeof(d->admin) - 1 && bench_now() < end) {
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        if (poll(&pf, 1, 1000) <= 0)
            continue;
        r = read(p[0], d->admin + n, sizeof(d->admin) - 1 - (size_t)n);
        if (r <= 0)
            break;
        n += r;
    }
    close(p[0]);
    d->admin[n] = '\0';
    d->admin[strcspn(d->admin, "\r\n")] = '\0';
    while (waitpid(pid, &status, WNOHANG) == 0 && bench_now() < end)
        sleep_ms(10);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !d->admin[0]) {
        fprintf(stderr, "bench: allotd init failed\n");
        return -1;
    }
    return 0;
}

static int find_port(struct bench_daemon *d)
{
    const char *pfx = "listening on 127.0.0.1:";
    double end = bench_now() + 20;
    char line[512];

    while (bench_now() < end) {
        FILE *f = fopen(d->log, "r");
        int status;

        while (f && fgets(line, sizeof(line), f))
            if (!strncmp(line, pfx, strlen(pfx))) {
                d->port = (int)strtol(line + strlen(pfx), NULL, 10);
                fclose(f);
                return d->port > 0 ? 0 : -1;
            }
        if (f)
            fclose(f);
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            d->pid = 0;
            return -1;
        }
        sleep_ms(20);
    }
    return -1;
}

/* ---- a PostgreSQL store (bench_use_postgres) ---- */

static char pg_server[400];
static unsigned pg_count;

/* Runs one statement on the server's maintenance database. */
static int pg_admin(const char *sql)
{
    char url[480];
    PGconn *c;
    PGresult *r;
    int rc;

    snprintf(url, sizeof(url), "%s/postgres", pg_server);
    c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "bench: %s", PQerrorMessage(c));
        PQfinish(c);
        return -1;
    }
    r = PQexec(c, sql);
    rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -1;
    if (rc < 0)
        fprintf(stderr, "bench: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return rc;
}

int bench_use_postgres(const char *server)
{
    if (!server) {
        pg_server[0] = '\0';
        return 0;
    }
    if (strlen(server) >= sizeof(pg_server) - 64 || strncmp(server, "postgres", 8) != 0)
        return -1;
    snprintf(pg_server, sizeof(pg_server), "%s", server);
    return 0;
}

static int pg_newdb(struct bench_daemon *d)
{
    char sql[200];

    snprintf(sql, sizeof(sql),
             "CREATE DATABASE allot_bench_%d_%u TEMPLATE template0 ENCODING 'SQL_ASCII' "
             "LC_COLLATE 'C' LC_CTYPE 'C'",
             (int)getpid(), ++pg_count);
    if (pg_admin(sql) < 0)
        return -1;
    snprintf(d->store, sizeof(d->store), "%s/allot_bench_%d_%u", pg_server, (int)getpid(),
             pg_count);
    return 0;
}

int bench_daemon_start(struct bench_daemon *d, const char *allotd, const char *const *extra)
{
    const char *argv[64];
    int n = 0, st = 0;
    struct bench_conn c = {.fd = -1};
    double end;

    memset(d, 0, sizeof(*d));
    if (pg_server[0] && pg_newdb(d) < 0)
        return -1;
    snprintf(d->dir, sizeof(d->dir), "%s/allot-bench-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(d->dir)) {
        perror("bench: mkdtemp");
        return -1;
    }
    /* allotd init wants to create the folder itself */
    rmdir(d->dir);
    snprintf(d->log, sizeof(d->log), "%s.log", d->dir);
    if (run_init(d, allotd) < 0)
        goto fail;
    argv[n++] = allotd;
    argv[n++] = d->store[0] ? "--store" : "--data-dir";
    argv[n++] = d->store[0] ? d->store : d->dir;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    /* every client of a bench comes from one address */
    argv[n++] = "--max-connections-per-ip";
    argv[n++] = "0";
    for (int i = 0; extra && extra[i] && n < 62; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    d->pid = fork();
    if (d->pid < 0) {
        d->pid = 0;
        goto fail;
    }
    if (d->pid == 0) {
        int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        int nul = open("/dev/null", O_RDWR);

        if (fd < 0 || nul < 0)
            _exit(127);
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(fd, 2);
        execv(allotd, (char *const *)argv);
        _exit(127);
    }
    if (find_port(d) < 0) {
        fprintf(stderr, "bench: no `listening on` line from allotd\n");
        goto fail;
    }
    if (bench_conn_open(&c, d->port) < 0)
        goto fail;
    end = bench_now() + 20;
    while (bench_now() < end) {
        const char *b;
        if (bench_call(&c, "GET", "/readyz", NULL, NULL, NULL, &st, &b) == 0 && st == 200)
            break;
        sleep_ms(20);
    }
    bench_conn_close(&c);
    if (st != 200) {
        fprintf(stderr, "bench: allotd not ready within 20 s\n");
        goto fail;
    }
    return 0;
fail:
    print_log_tail(d);
    bench_daemon_stop(d);
    return -1;
}

void bench_daemon_stop(struct bench_daemon *d)
{
    int status = 0;
    bool clean = true;

    if (d->pid > 0) {
        double end = bench_now() + 30;
        pid_t r = 0;

        kill(d->pid, SIGTERM);
        while ((r = waitpid(d->pid, &status, WNOHANG)) == 0 && bench_now() < end)
            sleep_ms(10);
        if (r == 0) {
            fprintf(stderr, "bench: allotd %d ignored SIGTERM for 30 s: SIGKILL\n", (int)d->pid);
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &status, 0);
            clean = false;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            clean = false;
        d->pid = 0;
    }
    if (!clean)
        print_log_tail(d);
    if (d->dir[0])
        nftw(d->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (d->store[0]) {
        char sql[600];

        snprintf(sql, sizeof(sql), "DROP DATABASE %s WITH (FORCE)", strrchr(d->store, '/') + 1);
        pg_admin(sql);
        d->store[0] = '\0';
    }
    if (d->log[0])
        unlink(d->log);
    d->dir[0] = d->log[0] = '\0';
}

/* ---- HTTP ---- */

size_t bench_format_request(char *buf, size_t cap, const char *method, const char *path,
                            const char *token, const char *extra, const char *body)
{
    size_t bl = body ? strlen(body) : 0;
    int n = snprintf(buf, cap,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%s%s"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     method, path, token ? "Authorization: Bearer " : "", token ? token : "",
                     token ? "\r\n" : "", extra ? extra : "", bl, body ? body : "");

    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

long bench_parse_response(const char *buf, size_t len, int *status, size_t *body_off,
                          size_t *body_len)
{
    const char *end = NULL, *p;
    size_t hl, cl = 0;

    for (size_t i = 3; i < len; i++)
        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r') {
            end = buf + i + 1;
            break;
        }
    if (!end)
        return len > 65536 ? -1 : 0;
    if (len < 12 || strncmp(buf, "HTTP/1.", 7))
        return -1;
    *status = (int)strtol(buf + 9, NULL, 10);
    hl = (size_t)(end - buf);
    for (p = buf; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        if (!strncasecmp(p, "Content-Length:", 15))
            cl = (size_t)strtoull(p + 15, NULL, 10);
        else if (!strncasecmp(p, "Transfer-Encoding:", 18))
            return -1; /* allotd answers with a known length */
        p = nl + 1;
    }
    if (len < hl + cl)
        return 0;
    *body_off = hl;
    *body_len = cl;
    return (long)(hl + cl);
}

int bench_conn_open(struct bench_conn *c, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1;

    if (!c->buf) {
        c->cap = 1 << 16;
        c->buf = malloc(c->cap);
        if (!c->buf)
            return -1;
    }
    c->len = 0;
    c->port = port;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

void bench_conn_close(struct bench_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
}

static int call_once(struct bench_conn *c, const char *req, size_t rl, int *status,
                     const char **body)
{
    double end = bench_now() + 30;
    size_t off = 0, bo = 0, bl = 0;
    long total = 0;

    while (off < rl) {
        ssize_t w = send(c->fd, req + off, rl - off, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    c->len = 0;
    while ((total = bench_parse_response(c->buf, c->len, status, &bo, &bl)) == 0) {
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        ssize_t r;

        if (bench_now() > end)
            return -1;
        if (c->len + 1 >= c->cap) {
            char *nb = realloc(c->buf, c->cap * 2);
            if (!nb)
                return -1;
            c->buf = nb;
            c->cap *= 2;
        }
        if (poll(&pf, 1, 1000) <= 0)
            continue;
        r = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
        if (r <= 0)
            return -1;
        c->len += (size_t)r;
    }
    if (total < 0)
        return -1;
    memmove(c->buf, c->buf + bo, bl);
    c->buf[bl] = '\0';
    *body = c->buf;
    return 0;
}

int bench_call(struct bench_conn *c, const char *method, const char *path, const char *token,
               const char *extra, const char *body, int *status, const char **body_out)
{
    size_t need = (body ? strlen(body) : 0) + 1024 + (extra ? strlen(extra) : 0);
    char *req = malloc(need);
    size_t rl;
    int rc = -1;

    if (!req)
        return -1;
    rl = bench_format_request(req, need, method, path, token, extra, body);
    if (rl) {
        rc = c->fd >= 0 ? call_once(c, req, rl, status, body_out) : -1;
        if (rc < 0) { /* the server may have closed an idle connection */
            if (c->fd >= 0)
                close(c->fd);
            c->fd = -1;
            if (bench_conn_open(c, c->port) == 0)
                rc = call_once(c, req, rl, status, body_out);
        }
    }
    free(req);
    return rc;
}

/* ---- the load driver ---- */

struct lconn {
    int fd;
    bool done;
    char req[REQ_CAP];
    size_t rlen, sent;
    char *in;
    size_t ilen, icap;
    double t0;
};

static int lconn_open(struct bench_load *L, struct lconn *c, int ep, int k)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)L->port)};
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)k};
    int one = 1;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

static int lconn_send(struct lconn *c)
{
    while (c->sent < c->rlen) {
        ssize_t w = send(c->fd, c->req + c->sent, c->rlen - c->sent, MSG_NOSIGNAL);
        if (w <= 0)
            return -1; /* requests are small: a blocking socket takes them whole */
        c->sent += (size_t)w;
    }
    return 0;
}

/* Client k's next request, or done. */
static void lconn_next(struct bench_load *L, struct lconn *c, int k, size_t *active)
{
    c->rlen = c->done ? 0 : L->next(L->ud, k, c->req, sizeof(c->req));
    c->sent = 0;
    c->ilen = 0;
    if (!c->rlen) {
        if (!c->done)
            (*active)--;
        c->done = true;
        return;
    }
    c->t0 = bench_now();
    if (lconn_send(c) < 0) {
        L->n_bad++;
        (*active)--;
        c->done = true;
    }
}

static int record(struct bench_load *L, double ms)
{
    if (L->n_lat == L->cap_lat) {
        size_t nc = L->cap_lat ? L->cap_lat * 2 : 4096;
        double *n = realloc(L->lat_ms, nc * sizeof(*n));
        if (!n)
            return -1;
        L->lat_ms = n;
        L->cap_lat = nc;
    }
    L->lat_ms[L->n_lat++] = ms;
    return 0;
}

int bench_load_run(struct bench_load *L)
{
    struct lconn *cs = calloc((size_t)L->clients, sizeof(*cs));
    struct epoll_event evs[256];
    double start, end, last_tick;
    size_t active = 0;
    int ep = epoll_create1(EPOLL_CLOEXEC), rc = -1;

    L->n_lat = L->n_bad = 0;
    L->timed_out = false;
    if (!cs || ep < 0)
        goto out;
    for (int k = 0; k < L->clients; k++) {
        cs[k].fd = -1;
        if (lconn_open(L, &cs[k], ep, k) < 0) {
            fprintf(stderr, "bench: cannot connect client %d\n", k);
            goto out;
        }
    }
    start = last_tick = bench_now();
    end = start + L->max_s;
    active = (size_t)L->clients;
    for (int k = 0; k < L->clients; k++)
        lconn_next(L, &cs[k], k, &active);
    while (active > 0) {
        double now = bench_now();
        int n;

        if (now > end) {
            L->timed_out = true;
            break;
        }
        if (L->tick && now - last_tick >= 0.01) {
            L->tick(L->ud);
            last_tick = now;
        }
        n = epoll_wait(ep, evs, 256, 10);
        for (int i = 0; i < n; i++) {
            int k = (int)evs[i].data.u32, st = 0;
            struct lconn *c = &cs[k];
            size_t bo = 0, bl = 0;
            long total;
            ssize_t r;

            if (c->done)
                continue;
            if (c->ilen + 4096 > c->icap) {
                size_t nc = c->icap ? c->icap * 2 : 16384;
                char *nb = realloc(c->in, nc);
                if (!nb)
                    goto out;
                c->in = nb;
                c->icap = nc;
            }
            r = recv(c->fd, c->in + c->ilen, c->icap - c->ilen, 0);
            if (r <= 0) {
                L->n_bad++;
                c->done = true;
                active--;
                continue;
            }
            c->ilen += (size_t)r;
            total = bench_parse_response(c->in, c->ilen, &st, &bo, &bl);
            if (total == 0)
                continue;
            if (total < 0) {
                L->n_bad++;
                c->done = true;
                active--;
                continue;
            }
            if (record(L, (bench_now() - c->t0) * 1e3) < 0)
                goto out;
            if (st < 200 || st > 299)
                L->n_bad++;
            if (L->reply)
                L->reply(L->ud, k, st, c->in + bo, bl);
            lconn_next(L, c, k, &active);
        }
    }
    L->wall_s = bench_now() - start;
    rc = 0;
out:
    for (int k = 0; cs && k < L->clients; k++) {
        if (cs[k].fd >= 0)
            close(cs[k].fd);
        free(cs[k].in);
    }
    free(cs);
    if (ep >= 0)
        close(ep);
    return rc;
}

void bench_load_free(struct bench_load *L)
{
    free(L->lat_ms);
    L->lat_ms = NULL;
    L->n_lat = L->cap_lat = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

double bench_percentile(double *v, size_t n, double p)
{
    size_t i;

    if (!n)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* ---- the job mix and the tenants ---- */

long bench_jobmix(const char *path, long n, long seed, struct bench_job **jobs)
{
    struct bench_job *js;
    long m = 0;

    if (path) {
        FILE *f = fopen(path, "r");
        char line[256];
        size_t cap = 0;

        if (!f) {
            perror(path);
            return -1;
        }
        js = NULL;
        while (fgets(line, sizeof(line), f) && m < 10000000) {
            struct bench_job j = {0};
            char acct[16];

            if (sscanf(line, "%d\t%d\t%15s\t%7s\t%d\t%d", &j.idx, &j.gpus, acct, j.qos,
                       &j.time_limit_min, &j.sleep_s) != 6 ||
                acct[0] != 'a')
                continue;
            j.account = (int)strtol(acct + 1, NULL, 10);
            if ((size_t)m == cap) {
                size_t nc = cap ? cap * 2 : 1024;
                struct bench_job *nj = realloc(js, nc * sizeof(*nj));
                if (!nj) {
                    free(js);
                    fclose(f);
                    return -1;
                }
                js = nj;
                cap = nc;
            }
            js[m++] = j;
        }
        fclose(f);
        *jobs = js;
        return m;
    }
    js = calloc((size_t)n, sizeof(*js));
    if (!js)
        return -1;
    /* jobmix.sh: x = 48271 * x mod (2^31 - 1), twice per job */
    uint64_t x = (uint64_t)seed;
    for (m = 0; m < n; m++) {
        struct bench_job *j = &js[m];
        uint64_t q;

        x = (48271 * x) % 2147483647;
        j->gpus = 1 + (int)(x % 8);
        x = (48271 * x) % 2147483647;
        q = x % 10;
        snprintf(j->qos, sizeof(j->qos), "%s", q == 0 ? "high" : q == 1 ? "low" : "normal");
        j->idx = (int)m + 1;
        j->account = 1 + (int)(m % 4);
        j->time_limit_min = 60;
        j->sleep_s = 3000;
    }
    *jobs = js;
    return n;
}

const char bench_tenants_json[] =
    "{\"version\":1,\"priority_classes\":["
    "{\"name\":\"high\",\"value\":100,\"preemptible\":false},"
    "{\"name\":\"normal\",\"value\":10,\"preemptible\":false},"
    "{\"name\":\"low\",\"value\":1,\"preemptible\":false}],"
    "\"tenants\":[{\"path\":\"a1\",\"weight\":40},{\"path\":\"a2\",\"weight\":30},"
    "{\"path\":\"a3\",\"weight\":20},{\"path\":\"a4\",\"weight\":10}]}";

static int make_token(struct bench_conn *c, const char *admin, const char *role, const char *tenant,
                      char *out, size_t cap)
{
    char body[256];
    const char *reply;
    int st = 0, rc = -1;

    snprintf(body, sizeof(body), "{\"role\":\"%s\",\"tenant\":\"%s\",\"name\":\"bench-%s%s\"}",
             role, tenant, role, tenant);
    if (bench_call(c, "POST", "/v1/tokens", admin, NULL, body, &st, &reply) < 0 || st != 201) {
        fprintf(stderr, "bench: token %s/%s: %d\n", role, tenant, st);
        return -1;
    }
    json_t *j = json_loads(reply, 0, NULL);
    const char *t = json_string_value(json_object_get(j, "token"));
    if (t && strlen(t) < cap) {
        snprintf(out, cap, "%s", t);
        rc = 0;
    }
    json_decref(j);
    return rc;
}

int bench_setup_tenants(struct bench_conn *c, const char *admin, char *agent, char member[4][128],
                        size_t cap)
{
    const char *reply;
    int st = 0;

    if (bench_call(c, "PUT", "/v1/tenants", admin, NULL, bench_tenants_json, &st, &reply) < 0 ||
        st != 200) {
        fprintf(stderr, "bench: PUT /v1/tenants: %d %s\n", st, st ? reply : "");
        return -1;
    }
    if (make_token(c, admin, "agent", "", agent, cap) < 0)
        return -1;
    for (int i = 0; i < 4; i++) {
        char t[8];
        snprintf(t, sizeof(t), "a%d", i + 1);
        if (make_token(c, admin, "member", t, member[i], 128) < 0)
            return -1;
    }
    return 0;
}

size_t bench_job_body(char *buf, size_t cap, const struct bench_job *j)
{
    int n = snprintf(buf, cap,
                     "{\"name\":\"b%d\",\"tenant\":\"a%d\",\"gpus\":%d,\"priority\":\"%s\","
                     "\"time_limit\":%d,\"command\":[\"sleep\",\"%d\"]}",
                     j->idx, j->account, j->gpus, j->qos, j->time_limit_min * 60, j->sleep_s);

    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

/* ---- nodes and metrics ---- */

struct reg {
    const char *agent;
    int count, next;
    long ok;
    void (*tick)(void *);
    void *ud;
};

static void reg_tick(void *ud)
{
    struct reg *r = ud;

    r->tick(r->ud);
}

static size_t reg_next(void *ud, int k, char *buf, size_t cap)
{
    struct reg *r = ud;
    char body[1024];
    int n;

    (void)k;
    if (r->next >= r->count)
        return 0;
    r->next++;
    n = snprintf(body, sizeof(body),
                 "{\"name\":\"n%04d\",\"cpus\":64,\"memory\":512000,\"gpu_mode\":\"exclusive\","
                 "\"gpus\":[",
                 r->next);
    for (int g = 0; g < 8 && n > 0 && (size_t)n < sizeof(body); g++)
        n += snprintf(body + n, sizeof(body) - (size_t)n, "%s{\"model\":\"A100-80GB\"}",
                      g ? "," : "");
    if (n <= 0 || (size_t)n >= sizeof(body) - 4)
        return 0;
    snprintf(body + n, sizeof(body) - (size_t)n, "]}");
    return bench_format_request(buf, cap, "POST", "/v1/nodes/register", r->agent, NULL, body);
}

static void reg_reply(void *ud, int k, int status, const char *body, size_t len)
{
    struct reg *r = ud;

    (void)k;
    if (status == 200 || status == 201)
        r->ok++;
    else
        fprintf(stderr, "bench: register: %d %.*s\n", status, (int)(len > 300 ? 300 : len), body);
}

long bench_register_nodes(int port, const char *agent, int count, int clients, void (*tick)(void *),
                          void *ud, double *secs)
{
    struct reg r = {.agent = agent, .count = count, .tick = tick, .ud = ud};
    struct bench_load L = {.port = port,
                           .clients = clients,
                           .max_s = 120,
                           .next = reg_next,
                           .reply = reg_reply,
                           .tick = tick ? reg_tick : NULL,
                           .ud = &r};

    if (bench_load_run(&L) < 0)
        return -1;
    *secs = L.wall_s;
    bench_load_free(&L);
    return r.ok;
}

int bench_metrics(struct bench_conn *c, const char *const *names, double *v, int n)
{
    const char *body;
    int st = 0, found = 0;

    if (bench_call(c, "GET", "/metrics", NULL, NULL, NULL, &st, &body) < 0 || st != 200)
        return -1;
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(names[i]);
        const char *p = body;

        while ((p = strstr(p, names[i]))) {
            if ((p == body || p[-1] == '\n') && p[nl] == ' ') {
                v[i] = strtod(p + nl + 1, NULL);
                found++;
                break;
            }
            p += nl;
        }
    }
    return found == n ? 0 : -1;
}

int bench_metric(struct bench_conn *c, const char *name, double *v)
{
    return bench_metrics(c, &name, v, 1);
}

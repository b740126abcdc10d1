/*
 * The fill experiment (fill.h): every policy x seed job, run in-process or
 * on a pool of forked worker processes, its decision log hashed and written
 * in job order, and the results aggregated per policy.
 *
 * Workers: with workers > 1 each policy x seed job runs in a forked child
 * that writes its result and decision-log text to a pipe and exits; the
 * parent polls the pipes, and writes the logs to the sink in job order as
 * soon as every earlier job is in. The child computes exactly what the
 * in-process path computes, so the results do not depend on the number of
 * workers. State: the slot table of the running children, owned by
 * run_forked() for one experiment.
 */
#include "fill.h"

#include "allot/common.h"
#include "fdio.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct job_out {
    int rc;
    char err[256];
    struct sim_fill_result res;
    struct sim_fill_text log;
    bool done;
};

static void job_run(const struct sim_fill_trace *t, const struct sim_fill_opts *o, int j,
                    struct job_out *jo)
{
    int pi = j / o->n_seeds, si = j % o->n_seeds;

    jo->rc = sim_fill_run(t, o->policies[pi], o->seeds[si], o->tune, o->check, &jo->log, &jo->res,
                          jo->err, sizeof(jo->err));
}

/* What a worker writes to its pipe, followed by log_len bytes of log. */
struct wire_head {
    uint32_t magic;
    int32_t rc;
    char err[256];
    struct sim_fill_result res;
    uint64_t log_len;
};
#define WIRE_MAGIC 0x46494c4cu

/* The child's side: run the job, send it, exit without flushing stdio. */
static void __attribute__((noreturn))
worker_main(const struct sim_fill_trace *t, const struct sim_fill_opts *o, int j, int fd)
{
    struct job_out jo = {0};
    struct wire_head h = {.magic = WIRE_MAGIC};

    job_run(t, o, j, &jo);
    h.rc = jo.rc;
    memcpy(h.err, jo.err, sizeof(h.err));
    h.res = jo.res;
    h.log_len = jo.rc ? 0 : jo.log.len;
    if (fdio_write_all(fd, &h, sizeof(h)) ||
        (h.log_len && fdio_write_all(fd, jo.log.buf, jo.log.len)))
        _exit(1);
    _exit(0);
}

/* Turns what a worker sent (raw, taken over) into jo. */
static int wire_parse(struct sim_fill_text *raw, struct job_out *jo)
{
    struct wire_head h;

    if (raw->len < sizeof(h))
        return ALLOT_EIO;
    memcpy(&h, raw->buf, sizeof(h));
    if (h.magic != WIRE_MAGIC || raw->len - sizeof(h) != h.log_len)
        return ALLOT_EIO;
    jo->rc = h.rc;
    memcpy(jo->err, h.err, sizeof(jo->err));
    jo->err[sizeof(jo->err) - 1] = '\0';
    jo->res = h.res;
    memmove(raw->buf, raw->buf + sizeof(h), (size_t)h.log_len);
    raw->len = (size_t)h.log_len;
    raw->buf[raw->len] = '\0';
    jo->log = *raw;
    memset(raw, 0, sizeof(*raw));
    return 0;
}

struct slot {
    pid_t pid; /* 0 when free */
    int fd;
    int job;
    struct sim_fill_text in;
};

static void slots_kill(struct slot *sl, int n)
{
    for (int i = 0; i < n; i++) {
        if (sl[i].pid <= 0)
            continue;
        kill(sl[i].pid, SIGTERM);
        close(sl[i].fd);
        while (waitpid(sl[i].pid, NULL, 0) < 0 && errno == EINTR)
            ;
        sim_fill_text_free(&sl[i].in);
        sl[i].pid = 0;
    }
}

/* Reads what is available from a worker; returns 1 at EOF, 0 otherwise,
 * negative on error. */
static int slot_read(struct slot *s)
{
    if (allot_grow((void **)&s->in.buf, &s->in.cap, s->in.len + 65536 + 1, 1))
        return ALLOT_ENOMEM;
    for (;;) {
        ssize_t r = read(s->fd, s->in.buf + s->in.len, s->in.cap - s->in.len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return ALLOT_EIO;
        s->in.len += (size_t)r;
        return r == 0;
    }
}

/* Emits the logs of finished jobs in job order from *next on. */
static int emit_ready(struct job_out *jobs, int n, int *next, const struct sim_fill_opts *o,
                      uint64_t *hash, char *err, size_t errlen)
{
    while (*next < n && jobs[*next].done) {
        struct job_out *jo = &jobs[*next];
        if (jo->rc) {
            allot_fmt(err, errlen, "%s", jo->err);
            return jo->rc;
        }
        *hash = allot_fnv1a(*hash, jo->log.buf, jo->log.len);
        if (o->log && jo->log.len && fwrite(jo->log.buf, 1, jo->log.len, o->log) != jo->log.len) {
            allot_fmt(err, errlen, "decision log: write failed");
            return ALLOT_EIO;
        }
        sim_fill_text_free(&jo->log);
        (*next)++;
    }
    return 0;
}

/* A progress bar on stderr (only when it is a terminal: opts->progress). */
static void progress(const struct sim_fill_opts *o, int done, int n)
{
    if (o->progress)
        fprintf(stderr, "\rfill: [%-30.*s] %d/%d runs%s", done * 30 / n,
                "##############################", done, n, done == n ? "\n" : "");
}

/* Starts job `job` in slot sl[i] (free) on a forked worker; sl[0..nw) are
 * the other slots, whose pipes the child closes. Returns 0 or ALLOT_EIO
 * with a message in err. */
static int spawn_worker(const struct sim_fill_trace *t, const struct sim_fill_opts *o,
                        struct slot *sl, int nw, int i, int job, char *err, size_t errlen)
{
    int p[2];

    fflush(NULL); /* the child must not inherit unwritten stdio buffers */
    if (pipe(p) < 0) {
        allot_fmt(err, errlen, "pipe: %s", strerror(errno));
        return ALLOT_EIO;
    }
    sl[i].pid = fork();
    if (sl[i].pid < 0) {
        sl[i].pid = 0;
        close(p[0]);
        close(p[1]);
        allot_fmt(err, errlen, "fork: %s", strerror(errno));
        return ALLOT_EIO;
    }
    if (sl[i].pid == 0) {
        close(p[0]);
        for (int k = 0; k < nw; k++)
            if (k != i && sl[k].pid)
                close(sl[k].fd);
        worker_main(t, o, job, p[1]);
    }
    close(p[1]);
    sl[i].fd = p[0];
    sl[i].job = job;
    return 0;
}

/* Reads what slot s's worker has sent; when it is done, reaps it and
 * files its result in jobs[]. Returns 1 when the job is in, 0 when more is
 * to come, or a negative code with a message in err. */
static int collect_worker(const struct sim_fill_opts *o, struct slot *s, struct job_out *jobs,
                          char *err, size_t errlen)
{
    struct job_out *jo;
    int st = 0, r = slot_read(s);

    if (r < 0) {
        allot_fmt(err, errlen, "reading a worker: %s", allot_strerror(r));
        return r;
    }
    if (r == 0)
        return 0;
    close(s->fd);
    while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
        ;
    s->pid = 0;
    jo = &jobs[s->job];
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || wire_parse(&s->in, jo)) {
        allot_fmt(err, errlen, "the worker for %s seed %llu died",
                  o->policies[s->job / o->n_seeds]->name,
                  (unsigned long long)o->seeds[s->job % o->n_seeds]);
        sim_fill_text_free(&s->in);
        return ALLOT_EIO;
    }
    jo->done = true;
    if (jo->rc) {
        allot_fmt(err, errlen, "%s", jo->err);
        return jo->rc;
    }
    return 1;
}

/* Runs the n jobs on up to o->workers forked workers, polling their pipes,
 * and writes the logs in job order as soon as every earlier job is in. */
static int run_forked(const struct sim_fill_trace *t, const struct sim_fill_opts *o,
                      struct job_out *jobs, int n, uint64_t *hash, char *err, size_t errlen)
{
    int nw = o->workers < n ? o->workers : n, next = 0, emitted = 0, finished = 0, rc = 0;
    struct slot *sl = allot_calloc((size_t)nw, sizeof(*sl));
    struct pollfd *pf = allot_calloc((size_t)nw, sizeof(*pf));

    if (!sl || !pf) {
        rc = ALLOT_ENOMEM;
        allot_fmt(err, errlen, "out of memory");
        goto out;
    }
    while (finished < n) {
        int m = 0;

        for (int i = 0; i < nw && next < n; i++)
            if (!sl[i].pid && (rc = spawn_worker(t, o, sl, nw, i, next++, err, errlen)) < 0)
                goto out;
        for (int i = 0; i < nw; i++)
            if (sl[i].pid) {
                pf[m].fd = sl[i].fd;
                pf[m].events = POLLIN;
                pf[m].revents = 0;
                m++;
            }
        if (poll(pf, (nfds_t)m, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = ALLOT_EIO;
            allot_fmt(err, errlen, "poll: %s", strerror(errno));
            goto out;
        }
        for (int i = 0, q = 0; i < nw; i++) {
            if (!sl[i].pid || !pf[q++].revents)
                continue;
            rc = collect_worker(o, &sl[i], jobs, err, errlen);
            if (rc < 0)
                goto out;
            if (rc == 0)
                continue;
            finished++;
            progress(o, finished, n);
            rc = emit_ready(jobs, n, &emitted, o, hash, err, errlen);
            if (rc)
                goto out;
        }
    }
out:
    if (sl)
        slots_kill(sl, nw);
    allot_free(sl);
    allot_free(pf);
    return rc;
}

/* Mean and sample sd of the finite values among v[0..n). */
static void mean_sd(const double *v, int n, double *mean, double *sd)
{
    double s = 0, ss = 0;
    int k = 0;

    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) {
            s += v[i];
            k++;
        }
    *mean = k ? s / k : NAN;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]))
            ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = k > 1 ? sqrt(ss / (k - 1)) : (k ? 0.0 : NAN);
}

int sim_fill_experiment(const struct sim_fill_trace *t, const struct sim_fill_opts *o,
                        struct sim_fill_summary *out, uint64_t *hash, char *err, size_t errlen)
{
    int n = o->n_policies * o->n_seeds, rc = 0, emitted = 0;
    struct job_out *jobs;
    double *v = NULL, *f = NULL, sd;

    *hash = ALLOT_FNV1A_INIT;
    if (n <= 0) {
        allot_fmt(err, errlen, "no policy or no seed");
        return ALLOT_EINVAL;
    }
    jobs = allot_calloc((size_t)n, sizeof(*jobs));
    v = allot_calloc((size_t)o->n_seeds, sizeof(*v));
    f = allot_calloc((size_t)o->n_seeds, sizeof(*f));
    if (!jobs || !v || !f) {
        rc = ALLOT_ENOMEM;
        allot_fmt(err, errlen, "out of memory");
        goto out;
    }
    progress(o, 0, n);
    if (o->workers > 1 && n > 1) {
        rc = run_forked(t, o, jobs, n, hash, err, errlen);
    } else {
        for (int j = 0; j < n && !rc; j++) {
            job_run(t, o, j, &jobs[j]);
            jobs[j].done = true;
            progress(o, j + 1, n);
            rc = emit_ready(jobs, n, &emitted, o, hash, err, errlen);
        }
    }
    if (rc)
        goto out;
    for (int p = 0; p < o->n_policies; p++) {
        struct sim_fill_summary *s = &out[p];
        memset(s, 0, sizeof(*s));
        s->policy = o->policies[p];
        for (int i = 0; i < o->n_seeds; i++) {
            const struct sim_fill_result *r = &jobs[p * o->n_seeds + i].res;
            s->seconds += r->seconds;
            s->failed += r->failed;
            s->pods += r->pods;
        }
        for (int b = 0; b < SIM_FILL_BUCKETS; b++) {
            for (int i = 0; i < o->n_seeds; i++) {
                const struct sim_fill_result *r = &jobs[p * o->n_seeds + i].res;
                v[i] = 100.0 - r->alloc_pct[b];
                f[i] = r->frag_pct[b];
            }
            mean_sd(v, o->n_seeds, &s->unalloc_mean[b], &s->unalloc_sd[b]);
            mean_sd(f, o->n_seeds, &s->frag_mean[b], &sd);
        }
    }
out:
    for (int j = 0; jobs && j < n; j++)
        sim_fill_text_free(&jobs[j].log);
    allot_free(jobs);
    allot_free(v);
    allot_free(f);
    return rc;
}

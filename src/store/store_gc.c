/*
 * Group commit for allot-store: submitter threads queue writes, one
 * committer thread runs a batch of them in one transaction (each write in
 * its own savepoint) and wakes the batch's submitters once COMMIT returned.
 * N concurrent submissions therefore cost one fsync, and no submitter is
 * answered before its write is durable.
 *
 * State: a FIFO of requests (struct gc_req on the submitters' stacks, so a
 * submit allocates nothing), guarded by one mutex; `work` wakes the
 * committer, `done` wakes submitters (each checks its own flag). The
 * committer holds the mutex only to take a batch and to publish results,
 * never while it talks to the database, so writes keep queueing (forming
 * the next batch) during a commit. One lock, no lock order to declare.
 * Threading contract: include/allot/store.h ("group commit").
 */
#include "store_impl.h"

#include "allot/common.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

struct gc_req {
    allot_store_write_fn fn;
    void *arg; /* the submitter's, borrowed */
    int rc;
    bool done;
    struct gc_req *next;
};

struct allot_store_gc {
    struct allot_store *st; /* borrowed; used only by the committer thread */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work;        /* requests queued, or stopping */
    pthread_cond_t done;        /* a batch finished */
    struct gc_req *head, *tail; /* queued, not yet taken */
    int queued;
    bool stopping;
    int max_batch;
    long max_wait_ns;
    uint64_t commits;
    char last_err[256]; /* the back-end's text for the last failing batch ("" since one worked) */
};

/* Runs one batch (a list linked through next, n >= 1) in one transaction;
 * fills each request's rc. Called without the mutex. */
static void gc_run_batch(struct allot_store_gc *gc, struct gc_req *batch)
{
    struct allot_store *st = gc->st;
    int rc = allot_store_begin(st);

    for (struct gc_req *r = batch; r; r = r->next) {
        if (rc != 0) {
            r->rc = rc;
            continue;
        }
        r->rc = allot_store_begin(st); /* the write's savepoint */
        if (r->rc != 0)
            continue;
        r->rc = r->fn(st, r->arg);
        /* a write that left a batch of its own open is a bug: close it */
        while (ALLOT_NEVER(st->depth > 2)) {
            allot_store_rollback(st);
            r->rc = ALLOT_EINTERNAL;
        }
        if (r->rc == 0)
            r->rc = allot_store_commit(st);
        else
            allot_store_rollback(st);
    }
    if (rc != 0)
        return;
    rc = allot_store_commit(st);
    if (rc != 0)
        for (struct gc_req *r = batch; r; r = r->next)
            if (r->rc == 0)
                r->rc = rc;
}

static void deadline_after(struct timespec *ts, long ns)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_nsec += ns % 1000000000L;
    ts->tv_sec += ns / 1000000000L + ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

static void *gc_main(void *arg)
{
    struct allot_store_gc *gc = arg;

    pthread_mutex_lock(&gc->mu);
    for (;;) {
        struct gc_req *batch, *last;
        struct timespec deadline;
        int n;

        while (!gc->head && !gc->stopping)
            pthread_cond_wait(&gc->work, &gc->mu);
        if (!gc->head)
            break; /* stopping with nothing queued */
        /* a batch that is not full waits a little for company */
        if (gc->queued < gc->max_batch && gc->max_wait_ns > 0 && !gc->stopping) {
            deadline_after(&deadline, gc->max_wait_ns);
            while (gc->queued < gc->max_batch && !gc->stopping)
                if (pthread_cond_timedwait(&gc->work, &gc->mu, &deadline) == ETIMEDOUT)
                    break;
        }
        batch = last = gc->head;
        for (n = 1; n < gc->max_batch && last->next; n++)
            last = last->next;
        gc->head = last->next;
        if (!gc->head)
            gc->tail = NULL;
        last->next = NULL;
        gc->queued -= n;
        pthread_mutex_unlock(&gc->mu);

        gc_run_batch(gc, batch);
        /* the store itself failing (a full disk, an I/O error): keep its
         * words, which the handle loses at its next call */
        bool failed = false, worked = false;
        for (struct gc_req *r = batch; r; r = r->next) {
            failed |= r->rc == ALLOT_EIO || r->rc == ALLOT_ENOMEM;
            worked |= r->rc == 0;
        }
        char text[sizeof(gc->last_err)] = "";
        if (failed)
            allot_strlcpy(text, allot_store_errmsg(gc->st), sizeof(text));

        pthread_mutex_lock(&gc->mu);
        if (failed)
            allot_strlcpy(gc->last_err, text[0] ? text : "no word from the store",
                          sizeof(gc->last_err));
        else if (worked)
            gc->last_err[0] = '\0';
        gc->commits++;
        for (struct gc_req *r = batch, *next; r; r = next) {
            next = r->next; /* r lives on a stack that may go once done is set */
            r->done = true;
        }
        pthread_cond_broadcast(&gc->done);
    }
    pthread_mutex_unlock(&gc->mu);
    return NULL;
}

void allot_store_gc_last_error(struct allot_store_gc *gc, char *buf, size_t len)
{
    pthread_mutex_lock(&gc->mu);
    allot_strlcpy(buf, gc->last_err, len);
    pthread_mutex_unlock(&gc->mu);
}

struct allot_store_gc *allot_store_gc_new(struct allot_store *st, int max_batch, int max_wait_us)
{
    struct allot_store_gc *gc;
    pthread_condattr_t ca;

    if (max_batch < 0 || max_wait_us < 0)
        return NULL;
    gc = allot_calloc(1, sizeof *gc);
    if (!gc)
        return NULL;
    gc->st = st;
    gc->max_batch = max_batch ? max_batch : 64;
    gc->max_wait_ns = (long)max_wait_us * 1000L;
    if (pthread_condattr_init(&ca) != 0)
        goto free_gc;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&gc->mu, NULL) != 0)
        goto free_attr;
    if (pthread_cond_init(&gc->work, &ca) != 0)
        goto free_mu;
    if (pthread_cond_init(&gc->done, NULL) != 0)
        goto free_work;
    if (pthread_create(&gc->thread, NULL, gc_main, gc) != 0)
        goto free_done;
    pthread_condattr_destroy(&ca);
    return gc;
free_done:
    pthread_cond_destroy(&gc->done);
free_work:
    pthread_cond_destroy(&gc->work);
free_mu:
    pthread_mutex_destroy(&gc->mu);
free_attr:
    pthread_condattr_destroy(&ca);
free_gc:
    allot_free(gc);
    return NULL;
}

int allot_store_gc_submit(struct allot_store_gc *gc, allot_store_write_fn fn, void *arg)
{
    struct gc_req req = {.fn = fn, .arg = arg};

    pthread_mutex_lock(&gc->mu);
    if (gc->stopping) {
        pthread_mutex_unlock(&gc->mu);
        return ALLOT_ESTATE;
    }
    /* req stays on this stack only while queued or running: the committer
     * unlinks it before it sets req.done, and we wait for that */
    if (gc->tail)
        gc->tail->next = &req;
    else
        gc->head = &req; /* cppcheck-suppress autoVariables */
    gc->tail = &req;     /* cppcheck-suppress autoVariables */
    gc->queued++;
    pthread_cond_signal(&gc->work);
    while (!req.done)
        pthread_cond_wait(&gc->done, &gc->mu);
    pthread_mutex_unlock(&gc->mu);
    return req.rc;
}

uint64_t allot_store_gc_commits(struct allot_store_gc *gc)
{
    uint64_t n;

    pthread_mutex_lock(&gc->mu);
    n = gc->commits;
    pthread_mutex_unlock(&gc->mu);
    return n;
}

void allot_store_gc_free(struct allot_store_gc *gc)
{
    if (!gc)
        return;
    pthread_mutex_lock(&gc->mu);
    gc->stopping = true;
    pthread_cond_signal(&gc->work);
    pthread_mutex_unlock(&gc->mu);
    pthread_join(gc->thread, NULL);
    pthread_cond_destroy(&gc->done);
    pthread_cond_destroy(&gc->work);
    pthread_mutex_destroy(&gc->mu);
    allot_free(gc);
}

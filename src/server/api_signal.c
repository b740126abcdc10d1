/*
 * POST /v1/jobs/{id}/signal: a user sends a signal to a starting or
 * running job (as `scancel --signal`): to the process group of each of
 * its tasks, on every node it runs on, once; with ?array=true on an
 * array's first job, to every starting or running member. The request is stored as an
 * event of the job ("signal"); the loop keeps it with the job's run, the
 * desired state shows it to the nodes (loop_job_signal), and each node's
 * agent sends it to its tasks at its next heartbeat (docs/agent.md). A
 * signal is for the run it was sent to: one that starts again later does
 * not get it.
 */
#include "loop.h"
#include "server.h"

#include "allot/common.h"
#include "log.h"

#include <string.h>

struct signal_write {
    struct req *r;
    int64_t id, now;
    int sig;
    bool array;    /* every starting or running member of array {id} */
    int state;     /* OUT: the job's state as the write saw it */
    int64_t *ids;  /* OUT: the jobs signalled (allot_free) ... */
    int64_t *runs; /* ... and their runs (start times) */
    size_t n, cap_ids, cap_runs;
};

/* Job j, starting or running, gets the signal: its event, and it is
 * counted for the loop. */
static int signal_one(struct allot_store *st, struct allot_store_job *j, void *arg)
{
    struct signal_write *w = arg;
    char detail[API_WHO_MAX + 32];
    struct allot_store_event ev = {
        .job_id = j->id, .time = w->now, .kind = "signal", .detail = detail};
    int rc;

    if (j->state != ALLOT_SJ_STARTING && j->state != ALLOT_SJ_RUNNING)
        return 0;
    if ((rc = allot_grow((void **)&w->ids, &w->cap_ids, w->n + 1, sizeof(*w->ids))) ||
        (rc = allot_grow((void **)&w->runs, &w->cap_runs, w->n + 1, sizeof(*w->runs))))
        return rc;
    char who[API_WHO_MAX];
    allot_fmt(detail, sizeof(detail), "SIG%s sent by %s", allot_signal_name(w->sig),
              api_who(w->r, who, sizeof(who)));
    if ((rc = allot_store_event_add(st, &ev, NULL)) != 0)
        return rc;
    w->ids[w->n] = j->id;
    w->runs[w->n++] = j->start_time;
    return 0;
}

/* Group-commit write: reads the job where it is written, so one that ended
 * meanwhile answers 409 (an array: when no member starts or runs). */
static int signal_fn(struct allot_store *st, void *arg)
{
    struct signal_write *w = arg;
    struct allot_store_job j = {0};
    char target[64];
    int rc = allot_store_job_get(st, w->id, &j);
    bool array = rc == 0 && w->array && j.array_parent == w->id;

    w->state = j.state;
    w->n = 0;
    if (rc == 0)
        rc = array ? api_array_each(st, w->id, (1u << ALLOT_SJ_STARTING) | (1u << ALLOT_SJ_RUNNING),
                                    signal_one, w)
                   : signal_one(st, &j, w);
    allot_store_job_clear(&j);
    if (rc == 0 && !w->n)
        rc = ALLOT_ESTATE;
    if (rc)
        return rc;
    allot_fmt(target, sizeof(target), array ? "job/%lld[]" : "job/%lld", (long long)w->id);
    return api_audit(st, w->r, target, allot_signal_name(w->sig), w->now);
}

int api_jobs_signal(struct req *r)
{
    static const char *const fields[] = {"signal", NULL};
    struct allot_store_job j = {0};
    json_t *b = api_body_object(r), *v;
    char num[32];
    const char *s;
    bool array;
    int sig;

    if (!b || !api_known_fields(r, b, fields, NULL))
        goto out;
    v = json_object_get(b, "signal");
    if (json_is_integer(v))
        allot_fmt(num, sizeof(num), "%lld", (long long)json_integer_value(v));
    s = json_is_integer(v) ? num : json_string_value(v);
    if (!s) {
        api_error(r, 400, "bad_request",
                  "field \"signal\" is required: a signal's name (\"USR1\") or number");
        goto out;
    }
    if (!(sig = allot_signal_parse(s))) {
        api_error(r, 422, "invalid",
                  "field \"signal\": \"%.32s\" is not a signal a job may be sent "
                  "(" ALLOT_SIGNAL_NAMES ")",
                  s);
        goto out;
    }
    if (!api_query_flag(r, "array", &array) || !api_job_visible(r, &j))
        goto out;
    if (r->who.role == ALLOT_ROLE_VIEWER) {
        api_error(r, 403, "forbidden", "a viewer may not signal jobs");
        goto out;
    }
    struct signal_write w = {.r = r, .id = j.id, .now = srv_now(), .sig = sig, .array = array};
    int rc = srv_write(r->srv, signal_fn, &w);

    if (rc)
        r->audited = false;
    if (rc == ALLOT_ESTATE && w.array && j.array_parent == j.id)
        api_error(r, 409, "conflict", "no job of array %lld starts or runs", (long long)j.id);
    else if (rc == ALLOT_ESTATE)
        api_error(r, 409, "conflict", "job %lld is %s: only a starting or running job is signalled",
                  (long long)j.id, allot_store_job_state_name(w.state));
    else if (rc < 0)
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    else {
        json_t *o =
            json_pack("{s:I,s:s}", "id", (json_int_t)j.id, "signal", allot_signal_name(sig));

        for (size_t i = 0; i < w.n; i++)
            if (loop_post_signal(r->srv->loop, w.ids[i], w.runs[i], sig) != 0)
                LOG_ERROR("api", "job %lld: out of memory: its signal is lost",
                          (long long)w.ids[i]);
        if (w.array && j.array_parent == j.id)
            json_object_set_new(o, "members_signalled", json_integer((json_int_t)w.n));
        else
            json_object_set_new(o, "run", json_integer(w.runs[0]));
        api_json(r, 202, o);
    }
    allot_free(w.ids);
    allot_free(w.runs);
out:
    json_decref(b);
    allot_store_job_clear(&j);
    return 0;
}

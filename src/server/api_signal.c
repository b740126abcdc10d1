/*
 * POST /v1/jobs/{id}/signal: a user sends a signal to a starting or
 * running job (as `scancel --signal`): to every process of each of its
 * tasks, on every node it runs on, once. The request is stored as an
 * event of the job ("signal"); the loop keeps it with the job's run, the
 * desired state shows it to the nodes (loop_job_signal), and each node's
 * agent sends it to its tasks at its next heartbeat (docs/agent.md). A
 * signal is for the run it was sent to: one that starts again later does
 * not get it.
 */
#include "loop.h"
#include "server.h"

#include "allot/common.h"

#include <string.h>

struct signal_write {
    struct req *r;
    int64_t id, now;
    int sig;
    int state;   /* OUT: the job's state as the write saw it */
    int64_t run; /* OUT: its run (start time) */
};

static int signal_fn(struct allot_store *st, void *arg)
{
    struct signal_write *w = arg;
    struct allot_store_job j = {0};
    char detail[160], target[64];
    struct allot_store_event ev = {
        .job_id = w->id, .time = w->now, .kind = "signal", .detail = detail};
    int rc = allot_store_job_get(st, w->id, &j);

    w->state = j.state;
    w->run = j.start_time;
    allot_store_job_clear(&j);
    if (rc == 0 && w->state != ALLOT_SJ_STARTING && w->state != ALLOT_SJ_RUNNING)
        rc = ALLOT_ESTATE;
    if (rc)
        return rc;
    allot_fmt(detail, sizeof(detail), "SIG%s sent by %s", allot_signal_name(w->sig),
              w->r->who.name && *w->r->who.name ? w->r->who.name : "a user");
    allot_fmt(target, sizeof(target), "job/%lld", (long long)w->id);
    rc = allot_store_event_add(st, &ev, NULL);
    return rc ? rc : api_audit(st, w->r, target, detail, w->now);
}

int api_jobs_signal(struct req *r)
{
    static const char *const fields[] = {"signal", NULL};
    struct allot_store_job j = {0};
    json_t *b = api_body_object(r), *v;
    char num[32];
    const char *s;
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
                  "field \"signal\": \"%.32s\" is not a signal a job may be sent (HUP, INT, "
                  "QUIT, ABRT, KILL, USR1, USR2, ALRM, TERM, CONT, STOP or TSTP)",
                  s);
        goto out;
    }
    if (!api_job_visible(r, &j))
        goto out;
    if (r->who.role == ALLOT_ROLE_VIEWER) {
        api_error(r, 403, "forbidden", "a viewer may not signal jobs");
        goto out;
    }
    struct signal_write w = {.r = r, .id = j.id, .now = srv_now(), .sig = sig};
    int rc = srv_write(r->srv, signal_fn, &w);

    if (rc)
        r->audited = false;
    if (rc == ALLOT_ESTATE)
        api_error(r, 409, "conflict", "job %lld is %s: only a starting or running job is signalled",
                  (long long)j.id, allot_store_job_state_name(w.state));
    else if (rc < 0)
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    else if (loop_post_signal(r->srv->loop, j.id, w.run, sig) != 0)
        api_error(r, 500, "internal", "out of memory");
    else
        api_json(r, 202,
                 json_pack("{s:I,s:s,s:I}", "id", (json_int_t)j.id, "signal",
                           allot_signal_name(sig), "run", (json_int_t)w.run));
out:
    json_decref(b);
    allot_store_job_clear(&j);
    return 0;
}

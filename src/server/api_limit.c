/*
 * POST /v1/jobs/{id}/time-limit {"time_limit": SECONDS}: a job's runtime
 * limit changed while it waits or runs, as Slurm's `scontrol update
 * JobId=ID TimeLimit=...`: written in its stored spec (so it holds across
 * restarts) with a "limit" event, and given to the queue (LOOP_JOB_LIMIT).
 * As with Slurm, a member may only lower a limit; raising it, or taking
 * it away (0), is for admins and tenant admins.
 */
#include "jobspec.h"
#include "loop.h"
#include "server.h"

#include "allot/common.h"

#include <stdlib.h>
#include <string.h>

struct limit_write {
    struct req *r;
    int64_t id, now, limit;
    struct allot_store_job j; /* OUT: the job as read, then as written */
    int64_t old;              /* OUT: its limit before (0: none) */
    bool raise_denied;        /* OUT: a member asked to raise or take it away */
    char why[300];            /* OUT: why its "signal" warning refuses the limit, or "" */
};

static int limit_fn(struct allot_store *st, void *arg)
{
    struct limit_write *w = arg;
    char detail[API_WHO_MAX + 100], target[64];
    struct allot_store_event ev = {
        .job_id = w->id, .time = w->now, .kind = "limit", .detail = detail};
    int rc = allot_store_job_get(st, w->id, &w->j);
    json_t *spec;
    char *text;

    if (rc)
        return rc;
    if (allot_store_job_state_terminal(w->j.state))
        return ALLOT_ESTATE;
    if (!(spec = json_loads(w->j.spec ? w->j.spec : "", 0, NULL)))
        return ALLOT_EIO;
    w->old = json_integer_value(json_object_get(spec, "time_limit"));
    const char *warn = json_string_value(json_object_get(spec, "signal"));
    int sig;
    int64_t before;
    /* no limit is no end: a member may give one, never take one away */
    w->raise_denied = w->r->who.role == ALLOT_ROLE_MEMBER &&
                      ((!w->limit && w->old) || (w->old && w->limit > w->old));
    /* its warning (--signal) keeps its rule against the new limit */
    if (w->raise_denied ||
        (w->limit != w->old && warn &&
         jobspec_warning(warn, w->limit, &sig, &before, w->why, sizeof(w->why)) != 0)) {
        json_decref(spec);
        return ALLOT_EINVAL;
    }
    if (w->limit == w->old) { /* asked again: nothing written */
        json_decref(spec);
        return 0;
    }
    if (w->limit)
        json_object_set_new(spec, "time_limit", json_integer(w->limit));
    else
        json_object_del(spec, "time_limit");
    text = json_dumps(spec, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(spec);
    if (!text)
        return ALLOT_ENOMEM;
    char was[32] = "none", now[32] = "none";
    if (w->old)
        allot_fmt(was, sizeof(was), "%lld s", (long long)w->old);
    if (w->limit)
        allot_fmt(now, sizeof(now), "%lld s", (long long)w->limit);
    char who[API_WHO_MAX];
    allot_fmt(detail, sizeof(detail), "time limit %s -> %s by %s", was, now,
              api_who(w->r, who, sizeof(who)));
    rc = allot_store_job_set_spec(st, w->id, text);
    free(text);
    if (rc == 0)
        rc = allot_store_event_add(st, &ev, NULL);
    if (rc == 0) {
        allot_store_job_clear(&w->j);
        rc = allot_store_job_get(st, w->id, &w->j);
    }
    allot_fmt(target, sizeof(target), "job/%lld", (long long)w->id);
    return rc ? rc : api_audit(st, w->r, target, "ok", w->now);
}

int api_jobs_time_limit(struct req *r)
{
    static const char *const fields[] = {"time_limit", NULL};
    struct allot_store_job j = {0};
    json_t *b = api_body_object(r), *v;

    if (!b || !api_known_fields(r, b, fields, NULL))
        goto out;
    v = json_object_get(b, "time_limit");
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > (INT64_C(1) << 40)) {
        api_error(r, 400, "bad_request",
                  "field \"time_limit\" is required: seconds, 0..2^40 (0: none)");
        goto out;
    }
    if (!api_job_visible(r, &j))
        goto out;
    if (r->who.role == ALLOT_ROLE_VIEWER) {
        api_error(r, 403, "forbidden", "a viewer may not change a job's time limit");
        goto out;
    }
    struct limit_write w = {
        .r = r, .id = j.id, .now = srv_now(), .limit = (int64_t)json_integer_value(v)};
    int rc = srv_write(r->srv, limit_fn, &w);

    if (rc)
        r->audited = false;
    if (rc == ALLOT_EINVAL && w.raise_denied)
        api_error(r, 403, "forbidden",
                  "a member may only lower a job's time limit (%lld s now); an admin or tenant "
                  "admin raises it or takes it away",
                  (long long)w.old);
    else if (rc == ALLOT_EINVAL)
        api_error(r, 422, "invalid", "the job keeps its warning: %s", w.why);
    else if (rc == ALLOT_ESTATE)
        api_error(r, 409, "conflict", "job %lld already ended (%s)", (long long)j.id,
                  allot_store_job_state_name(w.j.state));
    else if (rc < 0)
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    else {
        if (w.limit != w.old)
            loop_post_limit(r->srv->loop, j.id);
        api_json(r, 200, api_job_json(&w.j));
    }
    allot_store_job_clear(&w.j);
out:
    json_decref(b);
    allot_store_job_clear(&j);
    return 0;
}

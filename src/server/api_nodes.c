/*
 * Node routes: the agent endpoints (register with an inventory; heartbeat
 * carrying job state reports, answered with the node's desired state from
 * the scheduling loop) and the node list. A node's inventory is fixed
 * once registered: registering again with the same inventory is a no-op,
 * with another one a 409.
 */
#include "http.h"
#include "loop.h"

#include "allot/cluster.h"
#include "allot/common.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static bool name_ok(const char *s)
{
    size_t n = strlen(s);

    if (!n || n > 63)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' && *s != '.')
            return false;
    return true;
}

/* Checks an inventory; returns 0, 400 or 422 with a message. */
static int check_inventory(json_t *b, const struct allot_catalog *cat, int *n_gpus, char *err,
                           size_t errlen)
{
    static const char *const fields[] = {"name",     "cpus",   "memory", "gpus",
                                         "gpu_mode", "labels", NULL};
    static const char *const gpu_fields[] = {"model", "uuid", NULL};
    json_t *v, *g, *gv;
    const char *k, *model = NULL;
    size_t i;

    json_object_foreach(b, k, v)
    {
        bool ok = false;
        for (const char *const *f = fields; *f && !ok; f++)
            ok = !strcmp(*f, k);
        if (!ok)
            return allot_fmt(err, errlen, "unknown field \"%s\"", k), 400;
    }
    if (!json_is_string(json_object_get(b, "name")))
        return allot_fmt(err, errlen, "field \"name\" must be a string"), 400;
    if (!name_ok(json_string_value(json_object_get(b, "name"))))
        return allot_fmt(err, errlen, "field \"name\": 1..63 of A-Z a-z 0-9 . _ -"), 422;
    if (!json_is_number(json_object_get(b, "cpus")))
        return allot_fmt(err, errlen, "field \"cpus\" must be a number"), 400;
    if (!json_is_integer(json_object_get(b, "memory")))
        return allot_fmt(err, errlen, "field \"memory\" must be an integer (MiB)"), 400;
    if (json_number_value(json_object_get(b, "cpus")) <= 0 ||
        json_number_value(json_object_get(b, "cpus")) > 65536 ||
        json_integer_value(json_object_get(b, "memory")) <= 0)
        return allot_fmt(err, errlen, "fields \"cpus\" and \"memory\" must be positive"), 422;
    if ((v = json_object_get(b, "gpu_mode")) &&
        (!json_is_string(v) || (strcmp(json_string_value(v), "shared") != 0 &&
                                strcmp(json_string_value(v), "exclusive") != 0 &&
                                strcmp(json_string_value(v), "mig") != 0)))
        return allot_fmt(err, errlen, "field \"gpu_mode\": shared, exclusive or mig"), 400;
    if ((v = json_object_get(b, "labels"))) {
        if (!json_is_object(v))
            return allot_fmt(err, errlen, "field \"labels\" must be an object of strings"), 400;
        json_object_foreach(v, k, g) if (!json_is_string(g)) return allot_fmt(
            err, errlen,
            "field \"labels.%s\" must be "
            "a string",
            k),
            400;
    }
    v = json_object_get(b, "gpus");
    if (v && !json_is_array(v))
        return allot_fmt(err, errlen, "field \"gpus\" must be an array"), 400;
    if (json_array_size(v) > ALLOT_MAX_GPUS)
        return allot_fmt(err, errlen, "field \"gpus\": at most %d GPUs per node", ALLOT_MAX_GPUS),
               422;
    json_array_foreach(v, i, g)
    {
        if (!json_is_object(g) || !json_is_string(json_object_get(g, "model")))
            return allot_fmt(err, errlen, "field \"gpus[%zu].model\" must be a string", i), 400;
        json_object_foreach(g, k, gv)
        {
            bool ok = false;
            for (const char *const *f = gpu_fields; *f && !ok; f++)
                ok = !strcmp(*f, k);
            if (!ok)
                return allot_fmt(err, errlen, "unknown field \"gpus[%zu].%s\"", i, k), 400;
        }
        const char *m = json_string_value(json_object_get(g, "model"));
        if (allot_catalog_find_model(cat, m) < 0)
            return allot_fmt(err, errlen, "field \"gpus[%zu].model\": unknown GPU model \"%s\"", i,
                             m),
                   422;
        if (model && allot_catalog_find_model(cat, m) != allot_catalog_find_model(cat, model))
            return allot_fmt(err, errlen,
                             "field \"gpus\": mixed models (%s, %s); register one node per model",
                             model, m),
                   422;
        model = m;
    }
    *n_gpus = (int)json_array_size(v);
    return 0;
}

int api_nodes_register(struct req *r)
{
    struct allot_store_node old = {0};
    json_t *b = api_body_object(r);
    char err[512], target[96];
    char *inv = NULL;
    int64_t now = srv_now();
    int rc, n_gpus = 0, status = 201;

    if (!b)
        return 0;
    rc = check_inventory(b, r->srv->cat, &n_gpus, err, sizeof(err));
    if (rc) {
        api_error(r, rc, rc == 400 ? "bad_request" : "invalid", "%s", err);
        goto out;
    }
    const char *name = json_string_value(json_object_get(b, "name"));
    inv = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    allot_fmt(target, sizeof(target), "node/%s", name);
    srv_lock(r->srv);
    rc = allot_store_node_get(r->srv->st, name, &old);
    if (rc == 0) {
        status = strcmp(old.inventory ? old.inventory : "", inv) ? 409 : 200;
        rc = status == 200
                 ? allot_store_node_heartbeat(r->srv->st, name, now, now + r->srv->cfg.lease / 1000)
                 : 0;
        if (!rc && status == 200)
            rc = api_audit(r, target, "ok (again)", now);
    } else if (rc == ALLOT_ENOENT) {
        struct allot_store_node n = {.name = (char *)name,
                                     .inventory = inv,
                                     .state = ALLOT_SN_READY,
                                     .last_heartbeat = now,
                                     .lease_expiry = now + r->srv->cfg.lease / 1000};
        rc = allot_store_begin(r->srv->st);
        if (!rc)
            rc = allot_store_node_put(r->srv->st, &n);
        if (!rc)
            rc = api_audit(r, target, "ok", now);
        if (!rc)
            rc = allot_store_commit(r->srv->st);
        else {
            r->audited = false;
            allot_store_rollback(r->srv->st);
        }
    }
    srv_unlock(r->srv);
    if (rc < 0)
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    else if (status == 409)
        api_error(r, 409, "conflict", "node %s is registered with another inventory", name);
    else {
        if (status == 201) {
            int cur = atomic_load(&r->srv->max_node_gpus);
            while (n_gpus > cur &&
                   !atomic_compare_exchange_weak(&r->srv->max_node_gpus, &cur, n_gpus))
                ;
            loop_post(r->srv->loop, LOOP_NODE_ADDED, 0, name);
        } else {
            loop_post(r->srv->loop, LOOP_NODE_SEEN, now + r->srv->cfg.lease / 1000, name);
        }
        json_int_t expiry = (json_int_t)now + (json_int_t)(r->srv->cfg.lease / 1000);

        api_json(
            r, status,
            json_pack("{s:s,s:s,s:I}", "name", name, "state", "ready", "lease_expiry", expiry));
    }
    allot_store_node_clear(&old);
out:
    free(inv);
    json_decref(b);
    return 0;
}

/* Applies one job report of node `node` (store lock held, in a batch).
 * Returns 0, 1 when the job ended (the loop must hear of it), or an error. */
static int job_report(struct req *r, json_t *rep, int64_t now, int64_t *ended)
{
    json_t *jid = json_object_get(rep, "id"), *js = json_object_get(rep, "state");
    json_t *jx = json_object_get(rep, "exit_code");
    struct allot_store_job j = {0};
    int st, rc;

    *ended = 0;
    st = allot_store_job_state_parse(json_string_value(js));
    rc = allot_store_job_get(r->srv->st, json_integer_value(jid), &j);
    if (rc == ALLOT_ENOENT || (rc == 0 && allot_store_job_state_terminal(j.state))) {
        allot_store_job_clear(&j);
        return 0; /* stale report: the job ended or never was */
    }
    if (rc < 0)
        return rc;
    if (st == ALLOT_SJ_RUNNING && j.state == ALLOT_SJ_STARTING) {
        struct allot_store_event ev = {.job_id = j.id, .time = now, .kind = "running"};
        j.state = ALLOT_SJ_RUNNING;
        rc = allot_store_job_update(r->srv->st, &j);
        if (!rc)
            rc = allot_store_event_add(r->srv->st, &ev, NULL);
    } else if ((st == ALLOT_SJ_SUCCEEDED || st == ALLOT_SJ_FAILED) && j.state != ALLOT_SJ_PENDING) {
        struct allot_store_event ev = {
            .job_id = j.id, .time = now, .kind = (char *)allot_store_job_state_name(st)};
        j.state = st;
        j.end_time = now;
        j.has_exit_code = jx != NULL;
        j.exit_code = (int)json_integer_value(jx);
        rc = allot_store_job_update(r->srv->st, &j);
        if (!rc)
            rc = allot_store_event_add(r->srv->st, &ev, NULL);
        if (!rc)
            *ended = j.id;
    }
    allot_store_job_clear(&j);
    return rc;
}

int api_nodes_heartbeat(struct req *r)
{
    static const char *const fields[] = {"jobs", "health", "usage", NULL};
    static const char *const job_fields[] = {"id", "state", "exit_code", NULL};
    const char *name = r->params[0];
    struct allot_store_node n = {0};
    json_t *b = NULL, *jobs = NULL, *x;
    int64_t now = srv_now(), expiry = now + r->srv->cfg.lease / 1000;
    int64_t ended[64];
    size_t i, n_ended = 0;
    char target[96];
    int rc;

    if (r->body_len) {
        if (!(b = api_body_object(r)))
            return 0;
        if (!api_known_fields(r, b, fields, NULL))
            goto out;
        jobs = json_object_get(b, "jobs");
        if (jobs && (!json_is_array(jobs) || json_array_size(jobs) > 64)) {
            api_error(r, 400, "bad_request", "field \"jobs\" must be an array of at most 64");
            goto out;
        }
        json_array_foreach(jobs, i, x)
        {
            int st;
            if (!json_is_object(x) || !api_known_fields(r, x, job_fields, "jobs[]"))
                goto bad_job;
            st = allot_store_job_state_parse(json_string_value(json_object_get(x, "state")));
            if (!json_is_integer(json_object_get(x, "id")) ||
                (st != ALLOT_SJ_RUNNING && st != ALLOT_SJ_SUCCEEDED && st != ALLOT_SJ_FAILED) ||
                (json_object_get(x, "exit_code") &&
                 !json_is_integer(json_object_get(x, "exit_code"))))
                goto bad_job;
        }
    }
    allot_fmt(target, sizeof(target), "node/%s", name);
    srv_lock(r->srv);
    rc = allot_store_node_get(r->srv->st, name, &n);
    if (!rc)
        rc = allot_store_begin(r->srv->st);
    if (!rc) {
        rc = allot_store_node_heartbeat(r->srv->st, name, now, expiry);
        json_array_foreach(jobs, i, x)
        {
            if (rc)
                break;
            rc = job_report(r, x, now, &ended[n_ended]);
            n_ended += ended[n_ended] != 0;
        }
        if (!rc && json_array_size(jobs))
            rc = api_audit(r, target, "ok", now);
        if (!rc)
            rc = allot_store_commit(r->srv->st);
        else {
            r->audited = false;
            allot_store_rollback(r->srv->st);
        }
    }
    srv_unlock(r->srv);
    if (rc == ALLOT_ENOENT)
        api_error(r, 404, "not_found", "no node %s; register it first", name);
    else if (rc < 0)
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    else {
        for (i = 0; i < n_ended; i++)
            loop_post(r->srv->loop, LOOP_JOB_FINISHED, ended[i], NULL);
        loop_post(r->srv->loop, LOOP_NODE_SEEN, expiry, name);
        api_json(r, 200,
                 json_pack("{s:s,s:s,s:I,s:o}", "node", name, "state",
                           allot_store_node_state_name(n.state), "lease_expiry", (json_int_t)expiry,
                           "jobs", loop_desired(r->srv->loop, name)));
    }
    allot_store_node_clear(&n);
    goto out;
bad_job:
    if (!r->resp)
        api_error(r, 400, "bad_request",
                  "field \"jobs[%zu]\": want {\"id\": int, \"state\": running|succeeded|failed, "
                  "\"exit_code\": int}",
                  i);
out:
    json_decref(b);
    return 0;
}

int api_nodes_list(struct req *r)
{
    struct allot_store_node *n = NULL;
    size_t cnt = 0;
    json_t *a;
    int rc;

    srv_lock(r->srv);
    rc = allot_store_node_list(r->srv->st, &n, &cnt);
    srv_unlock(r->srv);
    if (rc < 0)
        return api_error(r, 500, "store", "%s", allot_strerror(rc));
    a = json_array();
    for (size_t i = 0; i < cnt; i++) {
        json_t *inv = json_loads(n[i].inventory ? n[i].inventory : "{}", 0, NULL);
        json_array_append_new(a, json_pack("{s:s,s:s,s:o,s:I,s:I}", "name", n[i].name, "state",
                                           allot_store_node_state_name(n[i].state), "inventory",
                                           inv ? inv : json_object(), "last_heartbeat",
                                           (json_int_t)n[i].last_heartbeat, "lease_expiry",
                                           (json_int_t)n[i].lease_expiry));
    }
    allot_store_nodes_free(n, cnt);
    return api_json(r, 200, json_pack("{s:o}", "nodes", a));
}

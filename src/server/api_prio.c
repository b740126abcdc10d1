/*
 * Priority-class routes: GET /v1/priority-classes lists them (highest value
 * first), PUT /v1/priority-classes/{name} creates or changes one, DELETE
 * removes one. The classes are also part of the tenants document (PUT
 * /v1/tenants replaces them all); a change here is checked by the same
 * parser, on the tenants document with the change applied, inside the
 * group-commit write, so two concurrent changes cannot together break a
 * rule (at most 16 classes, valid names and values).
 *
 * A changed class applies to its queued and running jobs too (as a
 * changed Slurm QOS does). A class that a live job names cannot be deleted
 * (409, as Slurm refuses to remove a QOS its jobs use); once deleted, new
 * submissions naming it are refused (422).
 */
#include "http.h"
#include "loop.h"
#include "refs.h"
#include "tenants.h"

#include "allot/common.h"

#include <string.h>

static json_t *class_json(const struct allot_store_prio_class *c)
{
    return json_pack("{s:s,s:i,s:b}", "name", c->name, "value", c->value, "preemptible",
                     c->preemptible);
}

int api_prio_list(struct req *r)
{
    struct allot_store_prio_class *c = NULL;
    size_t n = 0;
    json_t *a;
    struct allot_store *st = api_reader(r);

    if (!st)
        return 0;
    if (allot_store_prio_list(st, &c, &n) < 0)
        return api_error(r, 500, "store", "cannot read the priority classes");
    a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, class_json(&c[i]));
    allot_store_prios_free(c, n);
    return api_json(r, 200, json_pack("{s:o}", "priority_classes", a));
}

struct prio_write {
    struct req *r;
    const struct allot_store_prio_class *c; /* NULL: delete r->params[0] */
    const struct allot_catalog *cat;
    char err[512];
    bool existed;
};

/* Checks the stored tenants document with class w->c put in (or the
 * named class removed): 0, ALLOT_ENOENT (deleting a missing class) or
 * ALLOT_EINVAL with the parser's message in w->err. */
static int check_with_change(struct allot_store *st, struct prio_write *w, const char *name)
{
    struct sim_tenants_conf conf = {0};
    json_t *doc = tenants_doc_from_store(st), *pc, *x;
    size_t i;
    int rc;

    if (!doc)
        return ALLOT_EIO;
    pc = json_object_get(doc, "priority_classes");
    w->existed = false;
    json_array_foreach(pc, i, x) if (!strcmp(json_string_value(json_object_get(x, "name")), name))
    {
        w->existed = true;
        json_array_remove(pc, i);
        break;
    }
    if (w->c)
        json_array_append_new(pc, class_json(w->c));
    rc = !w->c && !w->existed ? ALLOT_ENOENT
                              : tenants_doc_parse(doc, w->cat, &conf, w->err, sizeof(w->err));
    sim_tenants_conf_free(&conf);
    json_decref(doc);
    return rc;
}

/* Group-commit write: the check, the change and its audit entry. */
static int prio_fn(struct allot_store *st, void *arg)
{
    struct prio_write *w = arg;
    const char *name = w->r->params[0];
    char target[64];
    int rc = check_with_change(st, w, name);

    if (rc)
        return rc;
    int64_t job = 0;
    if (!w->c && (rc = tenants_class_in_use(st, name, &job)) > 0) {
        allot_fmt(w->err, sizeof(w->err),
                  "priority class %s is named by live job %lld (and maybe others); it can be "
                  "removed once no pending or running job names it",
                  name, (long long)job);
        return ALLOT_ESTATE;
    }
    if (rc < 0)
        return rc;
    rc = w->c ? allot_store_prio_put(st, w->c) : allot_store_prio_delete(st, name);
    allot_fmt(target, sizeof(target), "priorityclass/%s", name);
    return rc ? rc : api_audit(st, w->r, target, "ok", srv_now());
}

static int prio_change(struct req *r, const struct allot_store_prio_class *c)
{
    struct prio_write w = {.r = r, .c = c, .cat = r->srv->cat};
    int rc = srv_write(r->srv, prio_fn, &w);

    if (rc)
        r->audited = false;
    if (rc == ALLOT_ENOENT)
        return api_error(r, 404, "not_found", "no priority class %s", r->params[0]);
    if (rc == ALLOT_EINVAL)
        return api_error(r, 422, "invalid", "%s", w.err);
    if (rc == ALLOT_ESTATE)
        return api_error(r, 409, "conflict", "%s", w.err);
    if (rc < 0)
        return api_error(r, 500, "store", "%s", allot_strerror(rc));
    refs_changed(r->srv);
    loop_post(r->srv->loop, LOOP_TENANTS, 0, NULL);
    if (!c)
        return api_json(r, 200, json_pack("{s:s}", "deleted", r->params[0]));
    return api_json(r, w.existed ? 200 : 201, class_json(c));
}

int api_prio_put(struct req *r)
{
    static const char *const fields[] = {"value", "preemptible", NULL};
    struct allot_store_prio_class c = {.name = r->params[0]};
    json_t *b = api_body_object(r), *v;

    if (!b)
        return 0;
    if (!api_known_fields(r, b, fields, "priority class"))
        goto out;
    v = json_object_get(b, "value");
    if (!json_is_integer(v)) {
        api_error(r, 400, "bad_request", "field \"value\" is required and must be an integer");
        goto out;
    }
    if (json_integer_value(v) < -1000000000 || json_integer_value(v) > 1000000000) {
        api_error(r, 422, "invalid", "field \"value\" must be in -1000000000..1000000000");
        goto out;
    }
    c.value = (int)json_integer_value(v);
    v = json_object_get(b, "preemptible");
    if (v && !json_is_boolean(v)) {
        api_error(r, 400, "bad_request", "field \"preemptible\" must be a boolean");
        goto out;
    }
    c.preemptible = v ? json_is_true(v) : true; /* the tenants file's default */
    prio_change(r, &c);
out:
    json_decref(b);
    return 0;
}

int api_prio_delete(struct req *r)
{
    return prio_change(r, NULL);
}

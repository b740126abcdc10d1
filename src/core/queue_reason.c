/*
 * The queue's pending reasons (allot_queue_reason, see
 * include/allot/queue.h): the text of what holds a job back, built from
 * its recorded why (queue_set_why) when asked: a quota or a borrowing
 * limit, a fair-share cap, a shape no ready node has at all (that first,
 * over any quota), free room, a reclaim or reservation. Reads the queue
 * and the cluster, writes only the job's reason buffer.
 */
#include "queue_int.h"

/* ---- pending reasons -------------------------------------------------------------------- */

static void gpus_text(char *buf, size_t len, int64_t milli)
{
    if (milli % ALLOT_MILLI == 0)
        allot_fmt(buf, len, "%lld", (long long)(milli / ALLOT_MILLI));
    else
        allot_fmt(buf, len, "%.2f", (double)milli / ALLOT_MILLI);
}

static void amount_text(char *buf, size_t len, int res, int64_t v)
{
    if (res == ALLOT_RES_GPU || res >= ALLOT_RES_MODEL0)
        gpus_text(buf, len, v);
    else if (res == ALLOT_RES_CPU)
        allot_fmt(buf, len, "%.1f", (double)v / 1000.0);
    else
        allot_fmt(buf, len, "%lld MiB", (long long)v);
}

void queue_set_why(struct allot_job *j, int kind, int who, int res, int other, int64_t a, int64_t b)
{
    j->why =
        (struct allot_why){.kind = kind, .who = who, .res = res, .other = other, .a = a, .b = b};
}

static void text_quota_limit(struct allot_queue *q, struct allot_job *j, int who, int res)
{
    const struct allot_tenant *x = allot_tenants_get(q->t, who);
    char rn[64], used[32], nom[32];
    const char *unit = res == ALLOT_RES_CPU ? " CPU" : "";

    allot_res_name(q->t, res, rn, sizeof(rn));
    amount_text(used, sizeof(used), res, x->usage[res]);
    /* a root without a quota is bounded by the cluster (allot_tenants_admits) */
    amount_text(nom, sizeof(nom), res,
                who == 0 && x->quota[res].nominal == ALLOT_UNLIMITED ? q->capacity.v[res]
                                                                     : x->quota[res].nominal);
    /* what other tenants keep unlent counts against j at a cohort too: say
     * how much */
    char held[96] = "";
    int64_t w = who == j->spec.tenant ? 0 : allot_tenants_withheld(q->t, j->spec.tenant, who, res);
    if (w > 0) {
        char wt[32];
        amount_text(wt, sizeof(wt), res, w);
        allot_fmt(held, sizeof(held), "; other tenants keep %s unlent: lend limit or lending hold",
                  wt);
    }
    /* borrowing past its nominal up to its limit: say that limit, not the
     * nominal the usage is already above ("at nominal (6/2 GPU)") */
    const struct allot_quota *qt = &x->quota[res];
    if (q->o.borrowing && qt->nominal != ALLOT_UNLIMITED && qt->borrow_limit > 0 &&
        qt->borrow_limit < ALLOT_UNLIMITED - qt->nominal && x->usage[res] > qt->nominal) {
        char lim[32], bl[32], ask[64] = "";
        int64_t limit = qt->nominal + qt->borrow_limit;
        amount_text(lim, sizeof(lim), res, limit);
        amount_text(bl, sizeof(bl), res, qt->borrow_limit);
        if (x->usage[res] < limit) { /* room left, but less than the job asks */
            char a[32];
            amount_text(a, sizeof(a), res, j->req.v[res]);
            allot_fmt(ask, sizeof(ask), ", the job asks for %s", a);
        }
        allot_fmt(j->reason, sizeof(j->reason),
                  "%s %s: borrowing limit reached (%s/%s %s%s in use%s: nominal %s + "
                  "borrow_limit %s%s)",
                  who == j->spec.tenant ? "tenant" : "cohort", x->path, used, lim,
                  res == ALLOT_RES_CPU ? "" : rn, unit, ask, nom, bl, held);
        return;
    }
    if (who == j->spec.tenant) {
        const char *tail = !q->o.borrowing                   ? "borrowing is off"
                           : x->quota[res].borrow_limit == 0 ? "borrowing not allowed"
                                                             : "borrowing limit reached";
        allot_fmt(j->reason, sizeof(j->reason), "tenant %s at nominal (%s/%s %s%s), %s", x->path,
                  used, nom, res == ALLOT_RES_CPU ? "" : rn, unit, tail);
    } else {
        /* "2.28/6 GPU in use" alone reads as room left: say what the job asks */
        char a[32];
        amount_text(a, sizeof(a), res, j->req.v[res]);
        if (who == 0) /* the cluster's own quota, or without one its capacity */
            allot_fmt(j->reason, sizeof(j->reason),
                      "cluster %s exhausted (%s/%s %s in use, the job asks for %s%s)",
                      x->quota[res].nominal == ALLOT_UNLIMITED ? "capacity" : "quota", used, nom,
                      rn, a, held);
        else
            allot_fmt(j->reason, sizeof(j->reason),
                      "cohort %s has no unused %s (%s/%s in use, the job asks for %s%s)", x->path,
                      rn, used, nom, a, held);
    }
}

/* Whether some tenant at or below `who` (the cluster for 0) uses more
 * of res than its nominal: borrowed work a reclaim could take back. */
static bool borrowed_under(const struct allot_queue *q, int who, int res)
{
    int nt = allot_tenants_count(q->t);

    for (int t = 1; t < nt; t++) {
        const struct allot_tenant *x = allot_tenants_get(q->t, t);
        int a = t;
        if (x->first_child >= 0 || x->quota[res].nominal == ALLOT_UNLIMITED ||
            x->usage[res] <= x->quota[res].nominal)
            continue;
        while (a > 0 && a != who)
            a = allot_tenants_get(q->t, a)->parent;
        if (a == who)
            return true;
    }
    return false;
}

/* The quota that holds j back; and, where j's own tenant is within its
 * nominal (a cohort or the cluster is full of borrowed work), that the
 * borrowed work is taken back for it once it has run its minimum runtime,
 * so that a wait of up to that long does not read as a refusal. */
static void text_quota(struct allot_queue *q, struct allot_job *j, int who, int res)
{
    size_t len;

    text_quota_limit(q, j, who, res);
    len = strlen(j->reason);
    if (who != j->spec.tenant && q->o.preemption && q->o.quotas &&
        allot_tenants_in_nominal(q->t, j->spec.tenant, &j->req) && borrowed_under(q, who, res) &&
        len < sizeof(j->reason))
        allot_fmt(j->reason + len, sizeof(j->reason) - len,
                  "; within its tenant's nominal: borrowed work is reclaimed for it once that "
                  "work has run %lld s",
                  (long long)q->o.min_runtime_s);
}

/* Says j can never start when it asks for more than its tenants could
 * ever hold (allot_tenants_ever_admits); false when it could. */
static bool text_never(struct allot_queue *q, struct allot_job *j)
{
    int who = -1, res = 0;
    char rn[64], ask[32], nom[32], lim[32], bl[32];

    if (allot_tenants_ever_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing, &who, &res))
        return false;
    const struct allot_tenant *x = allot_tenants_get(q->t, who);
    const struct allot_quota *qt = &x->quota[res];
    const char *kind = who == j->spec.tenant ? "tenant" : "cohort";

    allot_res_name(q->t, res, rn, sizeof(rn));
    amount_text(ask, sizeof(ask), res, j->req.v[res]);
    if (who == 0) {
        bool cap = qt->nominal == ALLOT_UNLIMITED;
        amount_text(lim, sizeof(lim), res, cap ? q->capacity.v[res] : qt->nominal);
        allot_fmt(j->reason, sizeof(j->reason),
                  "can never start: it asks for %s %s, more than the cluster's %s (%s)", ask, rn,
                  lim, cap ? "capacity" : "quota");
    } else if (q->o.borrowing && qt->borrow_limit > 0) { /* a finite borrow limit bound it */
        amount_text(nom, sizeof(nom), res, qt->nominal);
        amount_text(bl, sizeof(bl), res, qt->borrow_limit);
        amount_text(lim, sizeof(lim), res, qt->nominal + qt->borrow_limit);
        allot_fmt(j->reason, sizeof(j->reason),
                  "can never start: it asks for %s %s, more than %s %s may ever hold (%s: "
                  "nominal %s + borrow_limit %s)",
                  ask, rn, kind, x->path, lim, nom, bl);
    } else {
        amount_text(nom, sizeof(nom), res, qt->nominal);
        allot_fmt(j->reason, sizeof(j->reason),
                  "can never start: it asks for %s %s, more than %s %s may ever hold (its "
                  "nominal %s; borrowing %s)",
                  ask, rn, kind, x->path, nom, q->o.borrowing ? "not allowed" : "is off");
    }
    return true;
}

/* Whether a tenant other than `who` has jobs that wait and may start. */
static bool others_wait(const struct allot_queue *q, int who)
{
    for (size_t t = 0; t < q->tc_n; t++)
        if ((int)t != who && q->tc[t].pending - q->tc[t].never > 0)
            return true;
    return false;
}

/* Explains the fair-share cap (opts.fair_cap) that holds j back. */
static void text_fair_cap(struct allot_queue *q, struct allot_job *j, int who)
{
    const struct allot_tenant *x = allot_tenants_get(q->t, who);
    char used[32], nom[32], share[32];
    int64_t f = queue_fair_share(q, who);

    amount_text(used, sizeof(used), ALLOT_RES_GPU, x->usage[ALLOT_RES_GPU]);
    amount_text(nom, sizeof(nom), ALLOT_RES_GPU, x->quota[ALLOT_RES_GPU].nominal);
    if (f >= 0)
        amount_text(share, sizeof(share), ALLOT_RES_GPU, f);
    else /* no shares this round (out of memory): the figure is not known */
        allot_strlcpy(share, "?", sizeof(share));
    allot_fmt(j->reason, sizeof(j->reason),
              "tenant %s holds %s GPUs (nominal %s); while other tenants wait it may borrow up to "
              "%g times its fair share of %s GPUs",
              x->path, used, nom, q->o.fair_cap, share);
}

/* " MODEL" when j's task names one GPU model, else "". */
static void model_text(const struct allot_queue *q, const struct allot_task *t, char *buf,
                       size_t len)
{
    const struct allot_catalog *cat = allot_cluster_catalog(q->c);

    *buf = '\0';
    if (t->model_mask && __builtin_popcountll(t->model_mask) == 1)
        allot_fmt(buf, len, " %s", cat->models[__builtin_ctzll(t->model_mask)].name);
}

/* Which nodes j's own choice leaves it: "with its labels", "of its node
 * list", "it does not exclude" (NULL when it chooses none by labels or
 * name). */
static const char *chosen_nodes(const struct allot_task *t)
{
    if (t->select[0] && t->nodes)
        return t->nodes->exclude ? "with its labels that it does not exclude"
                                 : "of its node list with its labels";
    if (t->nodes)
        return t->nodes->exclude ? "it does not exclude" : "of its node list";
    return t->select[0] ? "with its labels" : NULL;
}

/* Puts "among the nodes with its labels: " (or of its node list, ...)
 * before j's reason when j chooses nodes: what it says is of those nodes
 * alone. */
static void labels_prefix(struct allot_job *j)
{
    char rest[sizeof(j->reason)];
    const char *which = chosen_nodes(&j->spec.task);

    if (!which)
        return;
    allot_strlcpy(rest, j->reason, sizeof(rest));
    allot_fmt(j->reason, sizeof(j->reason), "among the nodes %s: %s", which, rest);
}

/* When no ready node has the GPUs j's task asks for at all (their model
 * and count in a mode that serves it), not for want of free ones: writes
 * that reason, how many nodes with them are out of service and how many
 * have them in another mode (allot_gpu_mode_serves), and returns true. */
static bool text_unshaped(struct allot_queue *q, struct allot_job *j)
{
    const struct allot_task *t = &j->spec.task;
    int nn = allot_cluster_node_count(q->c);
    char model[48];
    int shaped = 0, down = 0, moded = 0;

    const struct allot_catalog *cat = allot_cluster_catalog(q->c);
    int offered = 0; /* nodes whose model has the MIG profile asked for */

    model_text(q, t, model, sizeof(model));
    for (int i = 0; i < nn && t->num_gpu > 0; i++) {
        const struct allot_node *n = allot_cluster_node(q->c, i);
        int usable = 0;
        if (!allot_node_may_host(n, t)) /* labels, model, GPU count */
            continue;
        if (t->mig_profile >= 0 && cat->models[n->model].profile_by_global[t->mig_profile] < 0)
            continue; /* this model has no such slice */
        offered++;
        for (int g = 0; g < n->n_gpus; g++)
            usable += allot_gpu_mode_serves(n->gpus[g].mode, t);
        if (usable < t->num_gpu) {
            moded += n->state == ALLOT_NODE_READY;
            continue;
        }
        shaped += n->state == ALLOT_NODE_READY;
        down += n->state != ALLOT_NODE_READY;
    }
    if (t->num_gpu == 0 || shaped > 0)
        return false;
    if (t->mig_profile >= 0 && offered == 0) {
        allot_fmt(j->reason, sizeof(j->reason),
                  "no node has a GPU model that offers MIG profile %s%s%s%s",
                  cat->profile_names[t->mig_profile], model[0] ? " (asked for:" : "", model,
                  model[0] ? ")" : "");
        labels_prefix(j);
        return true;
    }
    bool frac = allot_task_is_fraction(t);
    const char *want = t->mig_profile >= 0 ? " in MIG mode"
                       : frac              ? " in shared mode"
                                           : " outside MIG mode";
    const char *other = t->mig_profile >= 0 ? "outside MIG mode"
                        : frac              ? "in exclusive or MIG mode"
                                            : "in MIG mode";
    int len = allot_fmt(j->reason, sizeof(j->reason), "no ready node has %d%s GPU%s%s", t->num_gpu,
                        model, t->num_gpu > 1 ? "s" : "", moded ? want : "");
    if (down && len > 0 && (size_t)len < sizeof(j->reason))
        len += allot_fmt(j->reason + len, sizeof(j->reason) - (size_t)len,
                         " (%d node%s with them lost, cordoned or draining)", down,
                         down > 1 ? "s" : "");
    if (moded && len > 0 && (size_t)len < sizeof(j->reason))
        allot_fmt(j->reason + len, sizeof(j->reason) - (size_t)len,
                  " (%d ready node%s %s theirs %s)", moded, moded > 1 ? "s" : "",
                  moded > 1 ? "have" : "has", other);
    labels_prefix(j);
    return true;
}

/* Says so when the nodes j may use, in any state, hold fewer GPUs in all
 * than its gang asks (a selector or GPU models can make that so): no
 * waiting starts it. */
static bool text_never_hosted(struct allot_queue *q, struct allot_job *j)
{
    const struct allot_task *t = &j->spec.task;
    int nn = allot_cluster_node_count(q->c);
    int64_t gpus = 0, need = (int64_t)t->num_gpu * j->spec.n_tasks;

    if (!allot_task_picks_nodes(t) || t->num_gpu == 0)
        return false;
    for (int i = 0; i < nn; i++) {
        const struct allot_node *n = allot_cluster_node(q->c, i);
        if (allot_node_may_host(n, t))
            gpus += n->n_gpus;
    }
    if (gpus == 0 || gpus >= need)
        return false; /* none: the other reasons say so; enough: waiting may help */
    const char *which = chosen_nodes(t); /* several choices at once: "it may use" */
    if (t->model_mask)
        which = which ? "it may use" : "with its GPU models";
    allot_fmt(j->reason, sizeof(j->reason),
              "it can never start: the nodes %s have %lld GPU%s in all; it asks for %lld", which,
              (long long)gpus, gpus > 1 ? "s" : "", (long long)need);
    return true;
}

/* Ready nodes where task t would fit but for tenant isolation (another
 * tenant holding the node or GPU exclusively, or t's own tenant's
 * exclusive level): the one fit test (allot_node_fits) on a copy of the
 * node without the holders' marks, for t as a sharer. */
static int kept_by_isolation(const struct allot_queue *q, const struct allot_task *t)
{
    struct allot_task probe = *t;
    int nn = allot_cluster_node_count(q->c), kept = 0;

    probe.isolation = ALLOT_ISO_SHARED;
    if (q->n_excl == 0 && t->isolation == ALLOT_ISO_SHARED)
        return 0; /* no holder's mark anywhere, and t a sharer */
    for (int i = 0; i < nn; i++) {
        const struct allot_node *n = allot_cluster_node(q->c, i);
        struct allot_node open;
        bool marked = n->excl_tenant != 0 || t->isolation != ALLOT_ISO_SHARED;
        for (int g = 0; g < n->n_gpus && !marked; g++)
            marked = n->gpus[g].excl_tenant != 0;
        /* unmarked, the copy fits as the node does: not at all (the caller's
         * case); short of CPU, memory or GPUs, no copy fits either */
        if (n->state != ALLOT_NODE_READY || !marked || n->cpu_free < t->cpu_milli ||
            n->mem_free < t->mem_mib || n->n_gpus < t->num_gpu)
            continue;
        open = *n;
        open.excl_tenant = 0;
        for (int g = 0; g < open.n_gpus; g++)
            open.gpus[g].excl_tenant = 0;
        kept += allot_node_fits(q->c, &open, &probe);
    }
    return kept;
}

/* What one task asks, for a reason: "a 1g.10gb slice", "500 milli-GPU and
 * 50.0 % of a GPU's memory", "2.0 CPU and 4096 MiB memory". */
static void task_text(const struct allot_queue *q, const struct allot_task *t, char *buf,
                      size_t len)
{
    const struct allot_catalog *cat = allot_cluster_catalog(q->c);
    char model[48];

    model_text(q, t, model, sizeof(model));
    if (t->mig_profile >= 0)
        allot_fmt(buf, len, "a %s slice", cat->profile_names[t->mig_profile]);
    else if (t->num_gpu > 0 && t->gpu_mem_mib)
        allot_fmt(buf, len, "%d milli-GPU and %lld MiB of one%s GPU", t->gpu_milli,
                  (long long)t->gpu_mem_mib, model);
    else if (t->num_gpu > 0)
        allot_fmt(buf, len, "%d milli-GPU and %.1f %% of one%s GPU's memory", t->gpu_milli,
                  t->gpu_milli / 10.0, model);
    else if (t->mem_mib > 0)
        allot_fmt(buf, len, "%.1f CPU and %lld MiB memory", (double)t->cpu_milli / 1000,
                  (long long)t->mem_mib);
    else
        allot_fmt(buf, len, "%.1f CPU", (double)t->cpu_milli / 1000);
}

/* Says so when no node of j's node list (or no node it does not exclude)
 * is ready, with its labels when it selects them too. */
static bool text_unlisted(struct allot_queue *q, struct allot_job *j)
{
    const struct allot_task *t = &j->spec.task;
    int nn = allot_cluster_node_count(q->c), ready = 0, other = 0, in_set = 0;

    if (!t->nodes)
        return false;
    for (int i = 0; i < nn; i++) {
        const struct allot_node *n = allot_cluster_node(q->c, i);
        if (!allot_nodeset_has(t->nodes, i))
            continue;
        in_set++;
        if (!t->select[0] || allot_node_selected(n, t)) {
            ready += n->state == ALLOT_NODE_READY;
            other += n->state != ALLOT_NODE_READY;
        }
    }
    if (ready > 0)
        return false;
    if (in_set > 0 && other == 0) /* there, but without its labels */
        allot_fmt(j->reason, sizeof(j->reason), "no node %s has the labels of its node selector",
                  t->nodes->exclude ? "it does not exclude" : "of its node list");
    else if (other > 0)
        allot_fmt(j->reason, sizeof(j->reason),
                  "no node %s is ready (%d lost, cordoned or draining)", chosen_nodes(t), other);
    else
        allot_fmt(j->reason, sizeof(j->reason), "no node is left %s",
                  t->nodes->exclude ? "that it does not exclude" : "in its node list");
    return true;
}

/* Says so when no ready node carries the labels the job selects. */
static bool text_unselected(struct allot_queue *q, struct allot_job *j)
{
    const struct allot_task *t = &j->spec.task;
    int nn = allot_cluster_node_count(q->c), ready = 0, other = 0;

    if (!t->select[0] || t->nodes)
        return false; /* with a node list: text_unlisted */
    for (int i = 0; i < nn; i++) {
        const struct allot_node *n = allot_cluster_node(q->c, i);
        if (allot_node_selected(n, t)) {
            ready += n->state == ALLOT_NODE_READY;
            other += n->state != ALLOT_NODE_READY;
        }
    }
    if (ready > 0)
        return false;
    if (other > 0)
        allot_fmt(j->reason, sizeof(j->reason),
                  "no ready node has the labels of its node selector (%d node%s out of service "
                  "%s)",
                  other, other > 1 ? "s" : "", other > 1 ? "have them" : "has them");
    else
        allot_fmt(j->reason, sizeof(j->reason), "no node has the labels of its node selector");
    return true;
}

/* Explains why a gang found no room. */
static void text_capacity(struct allot_queue *q, struct allot_job *j)
{
    const struct allot_task *t = &j->spec.task;
    const struct allot_catalog *cat = allot_cluster_catalog(q->c);
    int best_whole = 0, admit = 0, fits = 0, nn = allot_cluster_node_count(q->c);
    int gpu_room = 0, host_whole = 0; /* CPU and memory aside: nodes with the GPU room */
    int ready = 0, down = 0;          /* nodes it may use, ready or not */
    int iso_ok = 0;                   /* ... ready, and isolation lets it on them */
    bool whole = t->num_gpu > 0 && t->mig_profile < 0 && !allot_task_is_fraction(t);
    char model[48], what[160];
    int len;

    /* no ready node has the labels or GPUs; too few GPUs there ever */
    if (text_unlisted(q, j) || text_unselected(q, j) || text_never_hosted(q, j) ||
        text_unshaped(q, j))
        return;
    for (int i = 0; i < nn; i++) {
        const struct allot_node *n = allot_cluster_node(q->c, i);
        int w;
        if (!allot_node_may_host(n, t))
            continue;
        down += n->state != ALLOT_NODE_READY;
        if (n->state != ALLOT_NODE_READY)
            continue;
        ready++;
        /* a node tenant isolation keeps it off is said apart (kept below):
         * its GPUs are no room for it here either */
        if (!allot_node_isolation_allows(n, t))
            continue;
        iso_ok++;
        w = allot_node_whole_free(n);
        host_whole = w > host_whole ? w : host_whole;
        gpu_room += whole                                  ? w >= t->num_gpu
                    : t->mig_profile < 0 && t->num_gpu > 0 ? allot_node_fitting_gpus(n, t) > 0
                                                           : 1; /* a MIG slot: not told apart */
        if (!allot_node_admits(n, t))
            continue;
        admit++;
        fits += allot_node_fits(q->c, n, t);
        w = allot_node_whole_free(n);
        if (w > best_whole)
            best_whole = w;
    }
    model_text(q, t, model, sizeof(model));
    task_text(q, t, what, sizeof(what));
    /* short of CPU or memory where GPUs are free, and of the GPUs too: the
     * GPUs are what it waits for (most whole GPUs free on a node it may use) */
    bool gpus_short = t->num_gpu > 0 && admit == 0 && gpu_room == 0;
    if (gpus_short)
        best_whole = host_whole;
    if (!whole && j->spec.n_tasks > 1 && fits > 0) /* one fits, not all of them at once */
        len = allot_fmt(j->reason, sizeof(j->reason), "no room for %d tasks of %s each at once",
                        j->spec.n_tasks, what);
    else if ((t->num_gpu == 0 || (admit == 0 && !gpus_short)) && t->rdma_vfs > 0)
        len = allot_fmt(j->reason, sizeof(j->reason), "no node has %s and %d RDMA VFs free%s%s",
                        what, t->rdma_vfs, model[0] ? " with GPU model" : "", model);
    else if (ready == 0 && down > 0) /* not for want of CPU: no node takes work */
        len = allot_fmt(j->reason, sizeof(j->reason),
                        "no ready node (%d lost, cordoned or draining)", down);
    else if (ready == 0)
        len = allot_fmt(j->reason, sizeof(j->reason), "no node is registered");
    else if (t->num_gpu == 0 || (admit == 0 && !gpus_short)) {
        if (t->num_gpu > 0) /* the GPU task's CPU and memory, not its GPU share */
            allot_fmt(what, sizeof(what), "%.1f CPU and %lld MiB memory",
                      (double)t->cpu_milli / 1000, (long long)t->mem_mib);
        len = allot_fmt(j->reason, sizeof(j->reason), "no node has %s free%s%s", what,
                        model[0] ? " with GPU model" : "", model);
    } else if (t->mig_profile >= 0)
        len = allot_fmt(j->reason, sizeof(j->reason), "no MIG GPU has a free %s slot",
                        cat->profile_names[t->mig_profile]);
    else if (t->gpu_mem_mib)
        len = allot_fmt(j->reason, sizeof(j->reason), "no%s GPU has %d milli-GPU and %lld MiB free",
                        model, t->gpu_milli, (long long)t->gpu_mem_mib);
    else if (t->gpu_milli < ALLOT_MILLI) /* its share of the memory too (allot_fraction_mem) */
        len = allot_fmt(j->reason, sizeof(j->reason),
                        "no%s GPU has %d milli-GPU and %.1f %% of its memory free", model,
                        t->gpu_milli, t->gpu_milli / 10.0);
    else if (j->spec.n_tasks > 1)
        len = allot_fmt(j->reason, sizeof(j->reason),
                        "no room for %d tasks of %d%s GPUs each (most free on one node: %d)",
                        j->spec.n_tasks, t->num_gpu, model, best_whole);
    else
        len = allot_fmt(j->reason, sizeof(j->reason),
                        "no node has %d free%s GPU%s (most free on one node: %d)", t->num_gpu,
                        model, t->num_gpu > 1 ? "s in one NVLink island" : "", best_whole);
    /* a job that chooses nodes: what was said is of those nodes alone, and
     * of a node list, how many of them are out of service */
    if (chosen_nodes(t) && len > 0 && (size_t)len < sizeof(j->reason)) {
        if (t->nodes && down > 0 && ready > 0)
            allot_fmt(j->reason + len, sizeof(j->reason) - (size_t)len,
                      " (%d of them lost, cordoned or draining)", down);
        labels_prefix(j);
        len = (int)strlen(j->reason);
    }
    /* where no node takes even one task, say first when isolation is why */
    int kept = fits ? 0 : kept_by_isolation(q, t);
    if (kept > 0 && iso_ok == 0) { /* no elsewhere */
        allot_fmt(j->reason, sizeof(j->reason),
                  "tenant isolation keeps it off every ready node (%d with room for it)", kept);
        labels_prefix(j); /* of those nodes alone */
        return;
    }
    if (kept > 0 && len > 0 && (size_t)len < sizeof(j->reason)) {
        char rest[sizeof(j->reason)];
        allot_strlcpy(rest, j->reason, sizeof(rest));
        allot_fmt(j->reason, sizeof(j->reason),
                  "tenant isolation keeps it off %d ready node%s with room; elsewhere %s", kept,
                  kept > 1 ? "s" : "", rest);
    }
}

int64_t allot_queue_capacity(const struct allot_queue *q, int res)
{
    return res >= 0 && res < ALLOT_RES_MAX ? q->capacity.v[res] : 0;
}

const char *allot_queue_reason(struct allot_queue *q, int id)
{
    struct allot_job *j;
    const struct allot_why *w;
    char *r;
    size_t n;

    if (id < 0 || (size_t)id >= q->n_jobs || !q->jobs[id].name)
        return "";
    j = &q->jobs[id];
    w = &j->why;
    /* a job whose victims are in their grace period waits for them, whatever
     * its placement attempts meanwhile find (the text only: decisions read
     * j->why) */
    if (j->state == ALLOT_JOB_PENDING && j->stopping_victims > 0 &&
        j->reclaim_why.kind == ALLOT_WHY_RECLAIM)
        w = &j->reclaim_why;
    r = j->reason;
    n = sizeof(j->reason);
    /* held back by quota or fair share, but more than its tenants could
     * ever hold: say it can never start, not what holds it back now */
    if ((w->kind == ALLOT_WHY_QUOTA || w->kind == ALLOT_WHY_FAIR_CAP) && q->o.quotas &&
        text_never(q, j))
        return r;
    /* held back by quota or fair share, but no ready node has the GPUs it
     * asks for at all (a MIG slice and no node in MIG mode): that, which no
     * freed quota changes, is what the user must know */
    if ((w->kind == ALLOT_WHY_QUOTA || w->kind == ALLOT_WHY_FAIR_CAP) &&
        (text_unlisted(q, j) || text_unselected(q, j) || text_never_hosted(q, j) ||
         text_unshaped(q, j)))
        return r;
    switch (w->kind) {
    case ALLOT_WHY_NEW:
        allot_fmt(r, n, "not yet considered by the scheduler");
        break;
    case ALLOT_WHY_RUNNING:
        if (j->state == ALLOT_JOB_STOPPING && j->preempted_for >= 0 &&
            (size_t)j->preempted_for < q->n_jobs && q->jobs[j->preempted_for].name) {
            /* a time, not a count down: the reason stays the same while it stops */
            char at[32];
            allot_fmt(r, n, "stopping: preempted for job %s; its grace period ends at %s",
                      q->jobs[j->preempted_for].name, allot_utc_text(j->stop_at, at, sizeof(at)));
        } else
            allot_fmt(r, n, "%s", j->state == ALLOT_JOB_STOPPING ? "stopping (grace period)" : "");
        break;
    case ALLOT_WHY_QUOTA:
        text_quota(q, j, w->who, w->res);
        break;
    case ALLOT_WHY_CAPACITY:
        text_capacity(q, j);
        break;
    case ALLOT_WHY_RECLAIM:
        if (w->res == ALLOT_PREEMPT_MOVE) {
            allot_fmt(r, n, "waiting for %lld GPU%s that jobs of %s free by moving (grace %lld s)",
                      (long long)(w->a / ALLOT_MILLI), w->a / ALLOT_MILLI == 1 ? "" : "s",
                      allot_tenants_get(q->t, w->who)->path, (long long)w->b);
            break;
        }
        allot_fmt(r, n, "waiting for %s of %lld GPU%s from %s (grace %lld s)",
                  w->res == ALLOT_PREEMPT_RECLAIM || w->res == ALLOT_PREEMPT_FAIR ? "reclaim"
                                                                                  : "preemption",
                  (long long)(w->a / ALLOT_MILLI), w->a / ALLOT_MILLI == 1 ? "" : "s",
                  allot_tenants_get(q->t, w->who)->path, (long long)w->b);
        break;
    case ALLOT_WHY_HELD:
        if (w->a < 0)
            allot_fmt(r, n, "held back: GPUs reserved for job %s (large gang waiting since %lld s)",
                      q->jobs[w->other].name, (long long)w->b);
        else
            allot_fmt(r, n, "held back: GPUs reserved for job %s (expected start in %lld s)",
                      q->jobs[w->other].name, (long long)w->a);
        break;
    case ALLOT_WHY_PREEMPTED:
        allot_fmt(r, n, "%s: %s job %s", j->spec.once ? "ended (it runs once)" : "requeued",
                  queue_preempt_text(w->res), q->jobs[w->other].name);
        break;
    case ALLOT_WHY_EVICTED:
        allot_fmt(r, n,
                  "stopped and %s: out of memory while putting it back after a "
                  "preemption trial",
                  j->spec.once ? "ended" : "requeued");
        break;
    case ALLOT_WHY_GRACE_OVER:
        allot_fmt(r, n, "%s after preemption", j->spec.once ? "ended (it runs once)" : "requeued");
        break;
    case ALLOT_WHY_CANCELLED:
        allot_fmt(r, n, "cancelled");
        break;
    case ALLOT_WHY_FINISHED:
        allot_fmt(r, n, "finished");
        break;
    case ALLOT_WHY_LIMIT:
        allot_fmt(r, n, "stopped at its runtime limit (%lld s)", (long long)w->a);
        break;
    case ALLOT_WHY_FAIR_CAP: {
        /* the quota of a tenant or cohort, where it refuses too (a tenant
         * that may not borrow at all is not told of what it may borrow;
         * the cluster's quota is its room); the cap binds only past the
         * room there is when no other tenant waits (its fair share is then
         * all it could use): say that */
        int qwho = 0, qres = 0;
        if (q->o.quotas &&
            !allot_tenants_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing, &qwho, &qres) &&
            qwho != 0)
            text_quota(q, j, qwho, qres);
        else if (others_wait(q, w->who))
            text_fair_cap(q, j, w->who);
        else
            text_capacity(q, j);
        break;
    }
    default:
        allot_fmt(r, n, "unknown");
    }
    return r;
}

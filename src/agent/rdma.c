/*
 * SR-IOV RDMA virtual functions (rdma.h): the inventory and the VFs read
 * from sysfs, a task's VFs chosen, recorded, given to it (its environment,
 * device rules and network namespace) and freed again.
 *
 * Invariant: a VF is held by at most one task that is starting, running or
 * stopping. The held set is never kept apart from the tasks: it is read
 * from them (struct task: vfs) each time, and a restarted agent rebuilds
 * it from the tasks' records (rdma_task_adopt), so it cannot drift.
 */
#include "rdma.h"

#include "agent.h"
#include "net.h"
#include "net_int.h"

#include "allot/common.h"
#include "log.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RDMA_MAX_VFS_PER_PF 65536 /* what the SR-IOV capability can count */

static const char *const pf_classes[] = {"infiniband", "net"};

/* A physical function: a device of pf_classes whose PCI device may have
 * VFs. */
struct pf {
    const char *cls; /* one of pf_classes */
    char name[64];
    char dev[PATH_MAX]; /* its PCI device's real path: one device is listed once */
    long vfs;           /* sriov_numvfs; -1: no SR-IOV */
};

/* The integer in a small sysfs file, or -1. */
static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;

    if (!f)
        return -1;
    if (fscanf(f, "%ld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

/* A name from sysfs (or a record) that is kept and passed on command
 * lines: shorter than len, of [A-Za-z0-9._:@-], not starting with '-' or
 * '.' (no option, no "." or ".."). */
static bool name_ok(const char *s, size_t len)
{
    size_t n = strlen(s);

    return n > 0 && n < len && s[0] != '-' && s[0] != '.' &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@-") == n;
}

/* ---- physical functions and the inventory ---- */

static int pf_add(struct pf **v, size_t *n, size_t *cap, const struct pf *p)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i].dev, p->dev))
            return 0; /* the same PCI device, seen through the other class */
    if (allot_grow((void **)v, cap, *n + 1, sizeof(**v)) < 0)
        return ALLOT_ENOMEM;
    (*v)[(*n)++] = *p;
    return 0;
}

/* Reads ROOT/NAME of class c into a PF; 0, or -1 when it is none. */
static int pf_read(const char *root, size_t c, const char *name, struct pf *p)
{
    char path[PATH_MAX + 64];

    allot_fmt(path, sizeof(path), "%s/%s/device/sriov_numvfs", root, name);
    p->vfs = read_long(path);
    if (c == 1 && p->vfs <= 0)
        return -1; /* network devices only when they have VFs */
    p->cls = pf_classes[c];
    allot_strlcpy(p->name, name, sizeof(p->name));
    allot_fmt(path, sizeof(path), "%s/%s/device", root, name);
    if (!realpath(path, p->dev)) /* no PCI device: the entry stands alone */
        allot_fmt(p->dev, sizeof(p->dev), "%s/%s", root, name);
    return 0;
}

/* The PFs under SYSFS, by class and name: *out (allot_free). Returns the
 * count or ALLOT_ENOMEM. */
static int pf_list(const char *sysfs, struct pf **out)
{
    struct pf *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    *out = NULL;
    for (size_t c = 0; c < sizeof(pf_classes) / sizeof(pf_classes[0]); c++) {
        char root[PATH_MAX];
        struct dirent **ents = NULL;
        int ne;

        allot_fmt(root, sizeof(root), "%s/class/%s", sysfs, pf_classes[c]);
        ne = scandir(root, &ents, NULL, alphasort);
        for (int i = 0; i < ne; i++) {
            struct pf p;
            if (!rc && name_ok(ents[i]->d_name, sizeof(p.name)) &&
                pf_read(root, c, ents[i]->d_name, &p) == 0)
                rc = pf_add(&v, &n, &cap, &p);
            free(ents[i]);
        }
        free(ents);
    }
    if (rc < 0) {
        allot_free(v);
        return rc;
    }
    *out = v;
    return (int)n;
}

json_t *rdma_inventory_json(const char *sysfs)
{
    struct pf *p = NULL;
    int n = pf_list(sysfs, &p);
    json_t *out = n >= 0 ? json_array() : NULL;

    for (int i = 0; out && i < n; i++) {
        json_t *o = json_pack("{s:s,s:I}", "name", p[i].name, "vfs",
                              (json_int_t)(p[i].vfs > 0 ? p[i].vfs : 0));
        if (json_array_append_new(out, o) < 0) {
            json_decref(out);
            out = NULL;
        }
    }
    allot_free(p);
    return out;
}

/* ---- virtual functions ---- */

/* The names in folder dir that fit len, sorted, at most RDMA_VF_NAMES, into
 * names (RDMA_VF_NAMES strings of len bytes). Returns how many. */
static int names_in(const char *dir, char *names, size_t len)
{
    struct dirent **ents = NULL;
    int ne = scandir(dir, &ents, NULL, alphasort), n = 0;

    for (int i = 0; i < ne; i++) {
        if (n < RDMA_VF_NAMES && name_ok(ents[i]->d_name, len))
            allot_strlcpy(names + (size_t)n++ * len, ents[i]->d_name, len);
        free(ents[i]);
    }
    free(ents);
    return n;
}

/* The VF's uverbs nodes: VFDIR/infiniband_verbs/uverbsN with the numbers
 * of its `dev` file ("231:192"). */
static void uverbs_of(const char *vfdir, struct rdma_vf *v)
{
    char dir[PATH_MAX + 32], path[PATH_MAX + 64], names[RDMA_VF_NAMES][16];
    int n;

    allot_fmt(dir, sizeof(dir), "%s/infiniband_verbs", vfdir);
    n = names_in(dir, names[0], sizeof(names[0]));
    for (int i = 0; i < n; i++) {
        struct rdma_uverbs *u = &v->uverbs[v->n_uverbs];
        FILE *f;

        allot_fmt(path, sizeof(path), "%s/%s/dev", dir, names[i]);
        if (!(f = fopen(path, "r")))
            continue;
        if (fscanf(f, "%d:%d", &u->major, &u->minor) == 2 && u->major > 0 && u->minor >= 0) {
            allot_strlcpy(u->name, names[i], sizeof(u->name));
            v->n_uverbs++;
        }
        fclose(f);
    }
}

/* Reads VF k of PF p; 0, or -1 when sysfs has no such VF. */
static int vf_read(const char *sysfs, const struct pf *p, int k, struct rdma_vf *v)
{
    char link[PATH_MAX], target[PATH_MAX], dir[PATH_MAX + 32];
    const char *base;
    ssize_t len;

    allot_fmt(link, sizeof(link), "%s/class/%s/%s/device/virtfn%d", sysfs, p->cls, p->name, k);
    len = readlink(link, target, sizeof(target) - 1);
    if (len <= 0)
        return -1;
    target[len] = '\0';
    base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (!name_ok(base, sizeof(v->pci)))
        return -1;
    memset(v, 0, sizeof(*v));
    allot_strlcpy(v->pci, base, sizeof(v->pci));
    allot_strlcpy(v->pf, p->name, sizeof(v->pf));
    v->index = k;
    allot_fmt(dir, sizeof(dir), "%s/net", link);
    v->n_netdevs = names_in(dir, v->netdevs[0], sizeof(v->netdevs[0]));
    allot_fmt(dir, sizeof(dir), "%s/infiniband", link);
    v->n_devices = names_in(dir, v->devices[0], sizeof(v->devices[0]));
    uverbs_of(link, v);
    return 0;
}

static bool listed(const struct rdma_vf *v, size_t n, const char *pci)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].pci, pci))
            return true;
    return false;
}

int rdma_vf_list(const char *sysfs, struct rdma_vf **out)
{
    struct pf *p = NULL;
    struct rdma_vf *v = NULL, vf;
    size_t n = 0, cap = 0;
    int np = pf_list(sysfs, &p), rc = 0;

    *out = NULL;
    if (np < 0)
        return np;
    for (int i = 0; i < np && !rc; i++)
        for (long k = 0; k < p[i].vfs && k < RDMA_MAX_VFS_PER_PF && !rc; k++) {
            if (vf_read(sysfs, &p[i], (int)k, &vf) < 0 || listed(v, n, vf.pci))
                continue;
            if (allot_grow((void **)&v, &cap, n + 1, sizeof(*v)) < 0)
                rc = ALLOT_ENOMEM;
            else
                v[n++] = vf;
        }
    allot_free(p);
    if (rc < 0) {
        allot_free(v);
        return rc;
    }
    *out = v;
    return (int)n;
}

int rdma_pick(const struct rdma_vf *v, int nv, rdma_held_fn held, void *ud, int want, int *idx)
{
    int got = 0;

    for (int i = 0; i < nv && got < want; i++)
        if (!held(v[i].pci, ud))
            idx[got++] = i;
    return got;
}

/* ---- the record: DIR/rdma.json ---- */

static json_t *strings_json(const char *names, size_t len, int n)
{
    json_t *a = json_array();

    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(names + (size_t)i * len)) < 0) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

static json_t *vf_json(const struct rdma_vf *v)
{
    json_t *uv = json_array();

    for (int i = 0; uv && i < v->n_uverbs; i++)
        if (json_array_append_new(uv, json_pack("{s:s,s:i,s:i}", "name", v->uverbs[i].name, "major",
                                                v->uverbs[i].major, "minor", v->uverbs[i].minor)) <
            0) {
            json_decref(uv);
            uv = NULL;
        }
    /* "o" takes the arrays also when packing fails; a NULL one fails it */
    return json_pack("{s:s,s:s,s:i,s:o,s:o,s:o}", "pci", v->pci, "pf", v->pf, "index", v->index,
                     "netdevs", strings_json(v->netdevs[0], sizeof(v->netdevs[0]), v->n_netdevs),
                     "devices", strings_json(v->devices[0], sizeof(v->devices[0]), v->n_devices),
                     "uverbs", uv);
}

int rdma_record_save(const char *dir, const struct rdma_vf *v, int n)
{
    json_t *a = json_array(), *o;
    int rc = ALLOT_EIO;

    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, vf_json(&v[i])) < 0) {
            json_decref(a);
            a = NULL;
        }
    o = json_pack("{s:o}", "vfs", a);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (text && agent_write_atomic(dir, "rdma.json", text) == 0)
        rc = 0;
    free(text);
    json_decref(o);
    return rc;
}

/* The strings of array j that pass name_ok into names (RDMA_VF_NAMES of
 * len bytes). Returns how many. */
static int strings_of(json_t *j, char *names, size_t len)
{
    json_t *x;
    size_t i;
    int n = 0;

    json_array_foreach(j, i, x)
    {
        const char *s = json_string_value(x);
        if (n < RDMA_VF_NAMES && s && name_ok(s, len))
            allot_strlcpy(names + (size_t)n++ * len, s, len);
    }
    return n;
}

static int vf_parse(json_t *j, struct rdma_vf *v)
{
    const char *pci = json_string_value(json_object_get(j, "pci"));
    const char *pf = json_string_value(json_object_get(j, "pf"));
    json_t *x;
    size_t i;

    if (!pci || !name_ok(pci, sizeof(v->pci)))
        return ALLOT_EINVAL;
    memset(v, 0, sizeof(*v));
    allot_strlcpy(v->pci, pci, sizeof(v->pci));
    allot_strlcpy(v->pf, pf ? pf : "", sizeof(v->pf));
    v->index = (int)json_integer_value(json_object_get(j, "index"));
    v->n_netdevs = strings_of(json_object_get(j, "netdevs"), v->netdevs[0], sizeof(v->netdevs[0]));
    v->n_devices = strings_of(json_object_get(j, "devices"), v->devices[0], sizeof(v->devices[0]));
    json_array_foreach(json_object_get(j, "uverbs"), i, x)
    {
        struct rdma_uverbs *u = &v->uverbs[v->n_uverbs];
        const char *name = json_string_value(json_object_get(x, "name"));
        if (v->n_uverbs == RDMA_VF_NAMES || !name || !name_ok(name, sizeof(u->name)))
            continue;
        allot_strlcpy(u->name, name, sizeof(u->name));
        u->major = (int)json_integer_value(json_object_get(x, "major"));
        u->minor = (int)json_integer_value(json_object_get(x, "minor"));
        v->n_uverbs += u->major > 0 && u->minor >= 0;
    }
    return 0;
}

int rdma_record_load(const char *dir, struct rdma_vf **out)
{
    char path[PATH_MAX];
    json_t *o, *vfs;
    struct rdma_vf *v = NULL;
    size_t i, n;
    int rc = 0;

    *out = NULL;
    allot_fmt(path, sizeof(path), "%s/rdma.json", dir);
    if (access(path, F_OK) < 0)
        return 0;
    o = json_load_file(path, 0, NULL);
    vfs = json_object_get(o, "vfs");
    n = json_array_size(vfs);
    if (!json_is_array(vfs))
        rc = ALLOT_EINVAL;
    else if (n && !(v = allot_calloc(n, sizeof(*v))))
        rc = ALLOT_ENOMEM;
    for (i = 0; v && !rc && i < n; i++)
        rc = vf_parse(json_array_get(vfs, i), &v[i]);
    json_decref(o);
    if (rc < 0) {
        allot_free(v);
        return rc;
    }
    *out = v;
    return (int)n;
}

/* ---- handing them to the task ---- */

static void join(char *buf, size_t len, const char *s)
{
    size_t l = strlen(buf);

    if (l + 1 < len)
        allot_fmt(buf + l, len - l, "%s%s", l ? "," : "", s);
}

void rdma_env_of(const struct rdma_vf *v, int n, struct rdma_env *e)
{
    memset(e, 0, sizeof(*e));
    for (int i = 0; i < n; i++) {
        join(e->vfs, sizeof(e->vfs), v[i].pci);
        for (int k = 0; k < v[i].n_netdevs; k++)
            join(e->netdevs, sizeof(e->netdevs), v[i].netdevs[k]);
        for (int k = 0; k < v[i].n_devices; k++)
            join(e->devices, sizeof(e->devices), v[i].devices[k]);
    }
}

int rdma_netdevs_enter(const struct rdma_vf *v, int n, const char *ns, char *err, size_t errlen)
{
    char out[512];

    for (int i = 0; i < n; i++)
        for (int k = 0; k < v[i].n_netdevs; k++) {
            const char *dev = v[i].netdevs[k];
            char path[300];
            int rc;

            /* no IPv6 on it before it is up: a link-local or SLAAC address
             * would talk on the HCA's network past the tenant's rules (a
             * kernel without IPv6 has nothing to turn off) */
            allot_fmt(path, sizeof(path), "net/ipv6/conf/%s/disable_ipv6", dev);
            rc = net_run(out, sizeof(out), NULL, "ip link set dev %s netns %s", dev, ns);
            if (!rc && access("/proc/sys/net/ipv6", F_OK) == 0 &&
                (rc = net_sysctl_in(ns, path, "1")) < 0)
                allot_fmt(out, sizeof(out), "IPv6 cannot be turned off on it");
            if (!rc)
                rc = net_run(out, sizeof(out), NULL, "ip -n %s link set dev %s up", ns, dev);
            if (rc) {
                allot_fmt(err, errlen, "RDMA VF %s: its netdev %s cannot move into %s: %s",
                          v[i].pci, dev, ns, out);
                rdma_netdevs_leave(v, n, ns); /* what moved goes back */
                return -1;
            }
        }
    return 0;
}

void rdma_netdevs_leave(const struct rdma_vf *v, int n, const char *ns)
{
    char out[512];

    for (int i = 0; i < n; i++)
        for (int k = 0; k < v[i].n_netdevs; k++) {
            const char *dev = v[i].netdevs[k];
            if (net_run(NULL, 0, NULL, "ip -n %s link show dev %s", ns, dev) != 0)
                continue; /* not there (never moved, or the namespace is gone) */
            if (net_run(out, sizeof(out), NULL, "ip -n %s link set dev %s netns %d", ns, dev,
                        (int)getpid()))
                LOG_WARN("rdma", "netdev %s of RDMA VF %s stays in %s: %s", dev, v[i].pci, ns, out);
            else
                LOG_INFO("rdma", "netdev %s of RDMA VF %s back from %s", dev, v[i].pci, ns);
        }
}

/* ---- tasks ---- */

struct held_by {
    const struct agent *a;
    const struct task *self;
};

static bool task_live(const struct task *t)
{
    return t->state == TASK_STARTING || t->state == TASK_RUNNING || t->state == TASK_STOPPING;
}

/* rdma_held_fn: a live task other than self holds pci. */
static bool held_by_task(const char *pci, void *ud)
{
    const struct held_by *h = ud;

    for (size_t i = 0; i < h->a->n_tasks; i++) {
        const struct task *t = &h->a->tasks[i];
        if (t == h->self || !task_live(t))
            continue;
        for (int k = 0; k < t->n_vfs; k++)
            if (!strcmp(t->vfs[k], pci))
                return true;
    }
    return false;
}

/* t holds v[0..n) and their uverbs nodes. */
static void hold(struct task *t, const struct rdma_vf *v, int n)
{
    t->n_vfs = t->n_devs = 0;
    for (int i = 0; i < n && t->n_vfs < AGENT_MAX_TASK_VFS; i++) {
        allot_strlcpy(t->vfs[t->n_vfs++], v[i].pci, sizeof(t->vfs[0]));
        for (int k = 0; k < v[i].n_uverbs && t->n_devs < AGENT_MAX_TASK_DEVS; k++) {
            struct task_dev *d = &t->devs[t->n_devs++];
            d->major = v[i].uverbs[k].major;
            d->minor = v[i].uverbs[k].minor;
            d->mode = 0666;
            allot_fmt(d->path, sizeof(d->path), "/dev/infiniband/%s", v[i].uverbs[k].name);
        }
    }
}

/* The desired entry's "rdma_vfs": 0..AGENT_MAX_TASK_VFS into *want, or -1
 * with why. */
static int wanted(json_t *d, int *want, char *why, size_t wlen)
{
    json_t *x = json_object_get(d, "rdma_vfs");
    json_int_t n = json_integer_value(x);

    *want = 0;
    if (x && (!json_is_integer(x) || n < 0 || n > AGENT_MAX_TASK_VFS)) {
        allot_fmt(why, wlen, "rdma_vfs: want 0 to %d RDMA VFs per task", AGENT_MAX_TASK_VFS);
        return -1;
    }
    *want = (int)n;
    return 0;
}

int rdma_task_assign(struct agent *a, struct task *t, json_t *d, const char *dir, char *why,
                     size_t wlen)
{
    struct held_by h = {a, t};
    struct rdma_vf *all = NULL, *pick = NULL;
    struct rdma_env e;
    int idx[AGENT_MAX_TASK_VFS], want, nv, got, rc = -1;

    t->n_vfs = t->n_devs = 0;
    if (wanted(d, &want, why, wlen) < 0)
        return -1;
    if (!want)
        return 0;
    if ((nv = rdma_vf_list(a->cfg.sysfs, &all)) < 0 ||
        !(pick = allot_calloc((size_t)want, sizeof(*pick)))) {
        allot_fmt(why, wlen, "RDMA VFs cannot be listed: %s",
                  allot_strerror(nv < 0 ? nv : ALLOT_ENOMEM));
        goto out;
    }
    got = rdma_pick(all, nv, held_by_task, &h, want, idx);
    if (got < want) {
        allot_fmt(why, wlen, "not enough RDMA VFs: %d asked, %d of the node's %d free", want, got,
                  nv);
        goto out;
    }
    for (int i = 0; i < got; i++)
        pick[i] = all[idx[i]];
    if (rdma_record_save(dir, pick, got) < 0) {
        allot_fmt(why, wlen, "%s: cannot record the task's RDMA VFs", dir);
        goto out;
    }
    hold(t, pick, got);
    rdma_env_of(pick, got, &e);
    LOG_INFO("rdma", "task %s: RDMA VFs %s", t->key, e.vfs);
    rc = 0;
out:
    allot_free(all);
    allot_free(pick);
    return rc;
}

/* rdma_held_fn: a stopping task other than self holds pci. */
static bool held_by_stopping(const char *pci, void *ud)
{
    const struct held_by *h = ud;

    for (size_t i = 0; i < h->a->n_tasks; i++) {
        const struct task *t = &h->a->tasks[i];
        if (t == h->self || t->state != TASK_STOPPING)
            continue;
        for (int k = 0; k < t->n_vfs; k++)
            if (!strcmp(t->vfs[k], pci))
                return true;
    }
    return false;
}

bool rdma_task_must_wait(struct agent *a, const struct task *t, json_t *d)
{
    struct held_by h = {a, t};
    struct rdma_vf *all = NULL;
    int want, nv, free_now = 0, coming = 0;
    char why[128];

    if (wanted(d, &want, why, sizeof(why)) < 0 || !want ||
        (nv = rdma_vf_list(a->cfg.sysfs, &all)) < 0)
        return false; /* nothing to wait for, or rdma_task_assign says why not */
    for (int i = 0; i < nv; i++) {
        free_now += !held_by_task(all[i].pci, &h);
        coming += held_by_stopping(all[i].pci, &h);
    }
    allot_free(all);
    return free_now < want && free_now + coming >= want;
}

int rdma_task_env(const char *dir, struct rdma_env *e)
{
    struct rdma_vf *v = NULL;
    int n = rdma_record_load(dir, &v);

    if (n > 0)
        rdma_env_of(v, n, e);
    allot_free(v);
    return n > 0 ? n : 0;
}

int rdma_task_enter(const char *dir, const char *ns, char *why, size_t wlen)
{
    struct rdma_vf *v = NULL;
    int n = rdma_record_load(dir, &v), rc = 0;

    if (n < 0) {
        allot_fmt(why, wlen, "%s/rdma.json: %s", dir, allot_strerror(n));
        return -1;
    }
    if (n > 0)
        rc = rdma_netdevs_enter(v, n, ns, why, wlen);
    allot_free(v);
    return rc;
}

void rdma_task_release(struct task *t, const char *dir)
{
    struct rdma_vf *v = NULL;
    char ns[96];
    int n;

    if (t->net && (n = rdma_record_load(dir, &v)) > 0) {
        net_ns_name(t->key, ns, sizeof(ns));
        rdma_netdevs_leave(v, n, ns);
    }
    allot_free(v);
    if (t->n_vfs)
        LOG_INFO("rdma", "task %s: its %d RDMA VFs are free again", t->key, t->n_vfs);
    t->n_vfs = t->n_devs = 0;
}

void rdma_task_adopt(struct task *t, const char *dir)
{
    struct rdma_vf *v = NULL;
    int n = rdma_record_load(dir, &v);

    if (n < 0)
        LOG_WARN("rdma", "%s/rdma.json: %s: its RDMA VFs are not known", dir, allot_strerror(n));
    hold(t, v, n > 0 ? n : 0);
    allot_free(v);
}

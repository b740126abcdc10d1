/*
 * Tenant networks in the scheduling loop (docs/network.md): each tenant
 * gets a subnet of net-pool and a VXLAN id once (stored in tenant_nets, so
 * restarts keep them); each task of a starting job gets a free address in
 * its tenant's subnet, written in its placement with the job's start, and
 * given back when the job stops running. The desired state sent to the
 * agents carries, per task, its network (address, gateway, VXLAN id, the
 * tenant's rates and egress policy) and, per node, the underlay addresses
 * of the other nodes that host each of its tenant networks (VXLAN peers).
 * Loop thread only.
 */
#include "loop_int.h"
#include "netconf.h"

#include "allot/common.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

struct lnet_tenant {
    char *tenant; /* owned */
    int64_t vni;
    uint32_t base;    /* subnet address */
    uint8_t *used;    /* owned: one byte per host index */
    uint32_t n_hosts; /* 2^(32 - prefix) */
    bool stored;      /* in tenant_nets already */
};

/* A network of an earlier net-prefix: its VXLAN id (0: not known) and
 * addresses stay out of use while this allotd runs, since tasks of it may
 * still run: a stored one (its tenant's network is cut anew, replacing it
 * in the store), or the subnet of an adopted task's address outside its
 * tenant's network now. */
struct lnet_old {
    int64_t vni;
    uint32_t base;
    int prefix;
};

struct lnet {
    uint32_t pool;
    int pool_prefix, prefix;
    int64_t vni_base;
    struct lnet_tenant *t;
    size_t n, cap;
    struct lnet_old *old;
    size_t n_old, cap_old;
    json_t *conf; /* tenant -> quotas.network (from the tenants document) */
};

bool lnet_on(const struct loop *l)
{
    return l->net != NULL;
}

static struct lnet_tenant *tenant_add(struct lnet *n, const char *tenant, int64_t vni,
                                      uint32_t base, bool stored)
{
    struct lnet_tenant *t;

    if (allot_grow((void **)&n->t, &n->cap, n->n + 1, sizeof(*n->t)) < 0)
        return NULL;
    t = &n->t[n->n];
    memset(t, 0, sizeof(*t));
    t->n_hosts = 1u << (32 - n->prefix);
    t->tenant = allot_strdup(tenant);
    t->used = allot_calloc(t->n_hosts, 1);
    if (!t->tenant || !t->used) {
        allot_free(t->tenant);
        allot_free(t->used);
        return NULL;
    }
    t->vni = vni;
    t->base = base;
    t->stored = stored;
    t->used[0] = t->used[1] = t->used[t->n_hosts - 1] = 1; /* network, gateway, broadcast */
    n->n++;
    return t;
}

int lnet_start(struct loop *l, char *err, size_t errlen)
{
    struct allot_store *st = srv_reader(l->srv);
    struct allot_store_net *v = NULL;
    size_t n = 0;
    struct lnet *net;
    int rc;

    if (strcmp(l->srv->cfg.network, "on") != 0)
        return 0;
    if (!(net = allot_calloc(1, sizeof(*net))))
        return ALLOT_ENOMEM;
    net->prefix = (int)l->srv->cfg.net_prefix;
    net->vni_base = l->srv->cfg.net_vni_base;
    net->conf = json_object();
    if (!netconf_cidr(l->srv->cfg.net_pool, true, &net->pool, &net->pool_prefix) ||
        net->pool_prefix > net->prefix) {
        allot_fmt(err, errlen, "net-pool %s: an IPv4 network of prefix at most net-prefix (%d)",
                  l->srv->cfg.net_pool, net->prefix);
        json_decref(net->conf);
        allot_free(net);
        return ALLOT_EINVAL;
    }
    l->net = net;
    rc = st ? allot_store_net_list(st, &v, &n) : ALLOT_EIO;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint32_t a;
        int p;
        if (!netconf_cidr(v[i].subnet, true, &a, &p) || p != net->prefix) {
            /* a network of an earlier net-prefix: not used, but its VXLAN id
             * and addresses are not given to anyone else */
            LOG_WARN("net", "tenant %s: subnet %s does not fit net-prefix %d; a new one is cut",
                     v[i].tenant, v[i].subnet, net->prefix);
            if (allot_grow((void **)&net->old, &net->cap_old, net->n_old + 1, sizeof(*net->old)) <
                0)
                rc = ALLOT_ENOMEM;
            else if (netconf_cidr(v[i].subnet, true, &a, &p))
                net->old[net->n_old++] = (struct lnet_old){v[i].vni, a, p};
            else
                net->old[net->n_old++] = (struct lnet_old){v[i].vni, 0, -1};
            continue;
        }
        if (!tenant_add(net, v[i].tenant, v[i].vni, a, true))
            rc = ALLOT_ENOMEM;
    }
    allot_store_nets_free(v, n);
    if (rc)
        allot_fmt(err, errlen, "tenant networks: %s", allot_strerror(rc));
    return rc;
}

void lnet_stop(struct loop *l)
{
    struct lnet *n = l->net;

    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++) {
        allot_free(n->t[i].tenant);
        allot_free(n->t[i].used);
    }
    allot_free(n->t);
    allot_free(n->old);
    json_decref(n->conf);
    allot_free(n);
    l->net = NULL;
}

void lnet_tenants(struct loop *l, json_t *doc)
{
    json_t *x;
    size_t i;

    if (!l->net)
        return;
    json_object_clear(l->net->conf);
    json_array_foreach(json_object_get(doc, "tenants"), i, x)
    {
        json_t *net = json_object_get(json_object_get(x, "quotas"), "network");
        const char *path = json_string_value(json_object_get(x, "path"));
        if (net && path)
            json_object_set(l->net->conf, path, net);
    }
}

static struct lnet_tenant *find_tenant(struct lnet *n, const char *tenant)
{
    for (size_t i = 0; i < n->n; i++)
        if (!strcmp(n->t[i].tenant, tenant))
            return &n->t[i];
    return NULL;
}

/* Whether a/pa and b/pb share an address. */
static bool cidr_overlap(uint32_t a, int pa, uint32_t b, int pb)
{
    int p = pa < pb ? pa : pb;
    uint32_t mask = p ? ~0u << (32 - p) : 0;

    return ((a ^ b) & mask) == 0;
}

/* The first subnet of the pool no tenant holds and no network of an earlier
 * net-prefix overlaps: true with *base, or false when none is left. */
static bool free_subnet(const struct lnet *n, uint32_t *base)
{
    uint64_t subnets = 1ull << (n->prefix - n->pool_prefix);

    for (uint64_t k = 0; k < subnets; k++) {
        uint32_t b = n->pool + (uint32_t)(k << (32 - n->prefix));
        bool taken = false;

        for (size_t i = 0; i < n->n && !taken; i++)
            taken = n->t[i].base == b;
        for (size_t i = 0; i < n->n_old && !taken; i++)
            taken = n->old[i].prefix >= 0 &&
                    cidr_overlap(b, n->prefix, n->old[i].base, n->old[i].prefix);
        if (!taken) {
            *base = b;
            return true;
        }
    }
    return false;
}

/* The tenant's network, cut from the pool when it has none yet (the next
 * free subnet and VXLAN id; written with the cycle's changes, replacing a
 * stored one of an earlier net-prefix). */
static struct lnet_tenant *tenant_net(struct lnet *n, const char *tenant)
{
    struct lnet_tenant *t = find_tenant(n, tenant);
    int64_t vni = n->vni_base;
    uint32_t base;

    if (t)
        return t;
    for (size_t i = 0; i < n->n; i++)
        if (n->t[i].vni >= vni)
            vni = n->t[i].vni + 1;
    for (size_t i = 0; i < n->n_old; i++)
        if (n->old[i].vni >= vni)
            vni = n->old[i].vni + 1;
    return free_subnet(n, &base) ? tenant_add(n, tenant, vni, base, false) : NULL;
}

static void hosts_release(struct loop *l, struct live *e)
{
    struct lnet_tenant *t =
        l->net && e->net_t >= 0 && (size_t)e->net_t < l->net->n ? &l->net->t[e->net_t] : NULL;

    for (int k = 0; t && k < e->n_net_hosts; k++)
        if (e->net_hosts[k] < t->n_hosts)
            t->used[e->net_hosts[k]] = 0;
    allot_free(e->net_hosts);
    e->net_hosts = NULL;
    e->n_net_hosts = 0;
    e->net_t = -1;
}

void lnet_release(struct loop *l, struct live *e)
{
    if (e->n_net_hosts || e->net_hosts) {
        hosts_release(l, e);
        l->hold_dirty = true; /* a job waiting for an address may start */
    }
}

bool lnet_room(struct loop *l, const char *tenant, int want, char *why, size_t len)
{
    struct lnet *n = l->net;
    struct lnet_tenant *t = n ? find_tenant(n, tenant) : NULL;
    uint32_t usable = n ? (1u << (32 - n->prefix)) - 3 : 0, free = 0;
    char subnet[32];

    if (!n)
        return true;
    if ((uint32_t)want > usable) {
        allot_fmt(why, len,
                  "tenant network: the job has %d tasks, more than a tenant's subnet holds (%u "
                  "addresses at net-prefix %d)",
                  want, usable, n->prefix);
        return false;
    }
    if (!t) {
        uint32_t base;

        if (free_subnet(n, &base))
            return true;
        allot_fmt(why, len,
                  "waiting for a subnet for tenant %s's network: net-pool %s has none left", tenant,
                  l->srv->cfg.net_pool);
        return false;
    }
    for (uint32_t h = 0; h < t->n_hosts; h++)
        free += !t->used[h];
    if (free >= (uint32_t)want)
        return true;
    netconf_fmt(t->base, n->prefix, subnet, sizeof(subnet));
    allot_fmt(why, len,
              "waiting for %d addresses in tenant %s's network: %u of %u free in its subnet %s",
              want, tenant, free, usable, subnet);
    return false;
}

int lnet_assign(struct loop *l, struct live *e, const char *tenant, json_t *placement)
{
    struct lnet *n = l->net;
    json_t *tasks = json_object_get(placement, "tasks"), *x;
    struct lnet_tenant *t;
    size_t k;

    if (!n)
        return 0;
    lnet_release(l, e); /* a job started again gets new addresses */
    if (!(t = tenant_net(n, tenant))) {
        LOG_ERROR("net", "tenant %s: no subnet left in net-pool %s", tenant, l->srv->cfg.net_pool);
        return ALLOT_ENOSPC;
    }
    e->net_t = (int)(t - n->t);
    e->net_hosts = allot_calloc(json_array_size(tasks) + 1, sizeof(*e->net_hosts));
    if (!e->net_hosts)
        return ALLOT_ENOMEM;
    json_array_foreach(tasks, k, x)
    {
        uint32_t h = 2;
        char addr[32];

        while (h < t->n_hosts && t->used[h])
            h++;
        if (h >= t->n_hosts) {
            LOG_ERROR("net", "tenant %s: its subnet is full", tenant);
            hosts_release(l, e);
            return ALLOT_ENOSPC;
        }
        t->used[h] = 1;
        e->net_hosts[e->n_net_hosts++] = h;
        netconf_fmt(t->base + h, n->prefix, addr, sizeof(addr));
        json_object_set_new(x, "address", json_string(addr));
    }
    return 0;
}

void lnet_adopt(struct loop *l, struct live *e, const char *tenant, const char *placement)
{
    struct lnet *n = l->net;
    json_t *pl, *x;
    struct lnet_tenant *t;
    size_t k;

    if (!n || !placement)
        return;
    pl = json_loads(placement, 0, NULL);
    t = pl ? find_tenant(n, tenant) : NULL;
    /* an address outside its tenant's network now (one of an earlier
     * net-prefix, whose stored row is gone): no subnet cut from here on
     * may overlap its subnet (the address's prefix) while its task runs */
    json_array_foreach(json_object_get(pl, "tasks"), k, x)
    {
        uint32_t a;
        int p;
        if (netconf_cidr(json_string_value(json_object_get(x, "address")), false, &a, &p) &&
            (!t || a - t->base >= t->n_hosts) &&
            allot_grow((void **)&n->old, &n->cap_old, n->n_old + 1, sizeof(*n->old)) == 0)
            n->old[n->n_old++] =
                (struct lnet_old){0, p > 0 && p < 32 ? a & (~0u << (32 - p)) : a, p};
    }
    if (t && (e->net_hosts = allot_calloc(json_array_size(json_object_get(pl, "tasks")) + 1,
                                          sizeof(*e->net_hosts)))) {
        e->net_t = (int)(t - n->t);
        json_array_foreach(json_object_get(pl, "tasks"), k, x)
        {
            uint32_t a;
            int p;
            if (!netconf_cidr(json_string_value(json_object_get(x, "address")), false, &a, &p) ||
                a - t->base >= t->n_hosts)
                continue;
            t->used[a - t->base] = 1;
            e->net_hosts[e->n_net_hosts++] = a - t->base;
        }
    }
    json_decref(pl);
}

int lnet_write(struct allot_store *st, struct loop *l)
{
    struct lnet *n = l->net;
    int rc = 0;

    for (size_t i = 0; n && rc == 0 && i < n->n; i++) {
        char subnet[32];
        if (n->t[i].stored)
            continue;
        netconf_fmt(n->t[i].base, n->prefix, subnet, sizeof(subnet));
        struct allot_store_net sn = {
            .tenant = n->t[i].tenant, .vni = n->t[i].vni, .subnet = subnet};
        rc = allot_store_net_add(st, &sn);
    }
    return rc;
}

void lnet_written(struct loop *l)
{
    for (size_t i = 0; l->net && i < l->net->n; i++)
        l->net->t[i].stored = true;
}

void lnet_decorate(struct loop *l, const struct live *e, const char *tenant, int prio_value,
                   bool exclusive, json_t *task, const char *stored_placement, size_t index)
{
    struct lnet *n = l->net;
    struct lnet_tenant *t = n && e->net_t >= 0 && (size_t)e->net_t < n->n ? &n->t[e->net_t] : NULL;
    json_t *pl, *addr;
    struct netconf c;
    char subnet[32], gw[32];

    if (!t)
        return;
    pl = stored_placement ? json_loads(stored_placement, 0, NULL) : NULL;
    addr = json_object_get(json_array_get(json_object_get(pl, "tasks"), index), "address");
    if (!json_is_string(addr)) {
        json_decref(pl);
        return;
    }
    netconf_parse(json_object_get(n->conf, tenant), &c);
    netconf_fmt(t->base, n->prefix, subnet, sizeof(subnet));
    netconf_fmt(t->base + 1, -1, gw, sizeof(gw));
    /* tc priority 0 goes first: the higher the class's value, the lower */
    int prio = prio_value >= 1000 ? 0 : prio_value >= 100 ? 2 : prio_value >= 0 ? 4 : 6;
    json_t *o = json_pack("{s:s,s:I,s:s,s:O,s:s,s:s,s:{s:I,s:I},s:i,s:b}", "tenant", tenant, "vni",
                          (json_int_t)t->vni, "subnet", subnet, "address", addr, "gateway", gw,
                          "egress", c.egress, "rate", "guarantee_bps", (json_int_t)c.nominal_bps,
                          "ceil_bps", (json_int_t)c.ceil_bps, "prio", prio, "exclusive", exclusive);
    json_object_set_new(o, "allow", c.allow ? json_deep_copy(c.allow) : json_array());
    json_object_set_new(task, "network", o);
    json_decref(pl);
}

json_t *lnet_peers(struct loop *l, json_t *desired)
{
    json_t *per_vni, *out = json_object(), *arr, *x;
    const char *node, *vk;
    size_t i;

    if (!l->net)
        return out;
    per_vni = json_object();
    /* vni -> {node: true} */
    json_object_foreach(desired, node, arr)
    {
        json_array_foreach(arr, i, x)
        {
            json_t *net = json_object_get(x, "network");
            char key[32];
            if (!net)
                continue;
            allot_fmt(key, sizeof(key), "%lld",
                      (long long)json_integer_value(json_object_get(net, "vni")));
            json_t *nodes = json_object_get(per_vni, key);
            if (!nodes) {
                nodes = json_object();
                json_object_set_new(per_vni, key, nodes);
            }
            json_object_set_new(nodes, node, json_true());
        }
    }
    /* node -> {vni: [underlay of the other nodes]} */
    json_object_foreach(per_vni, vk, x)
    {
        const char *a, *b;
        json_t *ta, *tb;
        json_object_foreach(x, a, ta)
        {
            json_t *mine = json_object_get(out, a), *list = json_array();
            if (!mine) {
                mine = json_object();
                json_object_set_new(out, a, mine);
            }
            json_object_foreach(x, b, tb)
            {
                int ni = strcmp(a, b) ? allot_cluster_find_node(l->c, b) : -1;
                if (ni >= 0 && (size_t)ni < l->cap_underlay && l->underlay[ni] && *l->underlay[ni])
                    json_array_append_new(list, json_string(l->underlay[ni]));
            }
            json_object_set_new(mine, vk, list);
        }
    }
    json_decref(per_vni);
    return out;
}

/* The strings `key` of each entry of `tasks` (up to a '/': an address
 * without its prefix length), comma-separated (a new string), or NULL when
 * one has none or memory runs out. */
static json_t *joined(const json_t *tasks, const char *key)
{
    char *buf = NULL;
    size_t len = 0, cap = 0, i;
    json_t *x, *out = NULL;

    json_array_foreach(tasks, i, x)
    {
        const char *v = json_string_value(json_object_get(x, key));
        size_t n = v ? strcspn(v, "/") : 0;

        if (!v || allot_grow((void **)&buf, &cap, len + n + 2, 1) < 0)
            goto out;
        if (len)
            buf[len++] = ',';
        memcpy(buf + len, v, n);
        len += n;
        buf[len] = 0;
    }
    out = buf ? json_string(buf) : NULL;
out:
    allot_free(buf);
    return out;
}

json_t *lnet_task_hosts(const json_t *placement, const char *stored)
{
    const json_t *tasks = json_object_get(placement, "tasks");
    json_t *o, *pl, *addrs;

    if (json_array_size(tasks) < 2 || !(o = json_object()))
        return NULL;
    json_object_set_new(o, "nodes", joined(tasks, "node"));
    /* the addresses are those stored with the placement (the network gave them) */
    pl = stored ? json_loads(stored, 0, NULL) : NULL;
    addrs = joined(json_object_get(pl, "tasks"), "address");
    if (addrs && json_array_size(json_object_get(pl, "tasks")) == json_array_size(tasks))
        json_object_set_new(o, "addresses", addrs);
    else
        json_decref(addrs);
    json_decref(pl);
    if (!json_object_get(o, "nodes")) {
        json_decref(o);
        return NULL;
    }
    return o;
}

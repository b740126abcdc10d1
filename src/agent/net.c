/*
 * Tenant networks on a node (net.h, docs/network.md): the registry of the
 * tasks whose network is set up here, their namespaces and veths, the
 * tenants' bridges and VXLAN devices with their forwarding entries, and
 * net_sync, which makes the node match the registry (rules and classes in
 * net_rules.c). Names are allot's own: netns allot-KEY, links al-HASH
 * (veth, host side), alb-VNI (bridge), alx-VNI (VXLAN); a namespace is
 * marked as this node's by the alias "allot:NODE" on its loopback, so that
 * agents sharing /run/netns (emulated nodes on one host) never take each
 * other's.
 *
 * Every bridge of a tenant has the same address (the gateway) and the same
 * MAC (02:a1:1b:VNI) on every node, an anycast gateway: a task's traffic
 * to its gateway stays on its own node whichever node answers its ARP.
 */
#include "devnode.h"
#include "net_int.h"

#include "allot/common.h"
#include "log.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool ipv4_ok(const char *s)
{
    struct in_addr a;
    return s && inet_pton(AF_INET, s, &a) == 1;
}

/* "A.B.C.D/P" with P 0..32 (slash required when need_prefix). */
static bool cidr_ok(const char *s, bool need_prefix)
{
    char addr[48];
    const char *slash = s ? strchr(s, '/') : NULL;
    char *end;
    long p;

    if (!s || (!slash && need_prefix) || strlen(s) >= sizeof(addr))
        return false;
    net_addr_only(s, addr, sizeof(addr));
    if (!ipv4_ok(addr))
        return false;
    if (!slash)
        return true;
    p = strtol(slash + 1, &end, 10);
    return end != slash + 1 && !*end && p >= 0 && p <= 32;
}

int net_prefix_len(const char *cidr)
{
    const char *slash = strchr(cidr, '/');
    return slash ? (int)strtol(slash + 1, NULL, 10) : 32; /* checked by cidr_ok before */
}

void net_addr_only(const char *cidr, char *buf, size_t len)
{
    allot_strlcpy(buf, cidr, len);
    buf[strcspn(buf, "/")] = '\0';
}

/* An address (host order) and prefix of "A.B.C.D[/P]" (checked before). */
static uint32_t addr_of(const char *cidr, int *plen)
{
    char a[48];
    struct in_addr x = {0};

    net_addr_only(cidr, a, sizeof(a));
    inet_pton(AF_INET, a, &x);
    if (plen)
        *plen = net_prefix_len(cidr);
    return ntohl(x.s_addr);
}

static bool same_prefix(uint32_t a, uint32_t b, int plen)
{
    uint32_t mask = plen <= 0 ? 0 : plen >= 32 ? 0xffffffffu : ~(0xffffffffu >> plen);

    return ((a ^ b) & mask) == 0;
}

void net_ns_name(const char *key, char *buf, size_t len)
{
    allot_fmt(buf, len, "allot-%s", key);
}

/* ---- parsing ---- */

#define FIELD_STR(name, dst, check)                                                                \
    do {                                                                                           \
        const char *v_ = json_string_value(json_object_get(j, name));                              \
        if (!v_ || strlen(v_) >= sizeof(dst) || !(check)) {                                        \
            allot_fmt(err, errlen, "network.%s: missing or not valid", name);                      \
            return -1;                                                                             \
        }                                                                                          \
        allot_strlcpy(dst, v_, sizeof(dst));                                                       \
    } while (0)

int net_parse(json_t *j, struct net_spec *s, char *err, size_t errlen)
{
    json_t *x, *rate;
    size_t i;

    memset(s, 0, sizeof(*s));
    if (!json_is_object(j)) {
        allot_fmt(err, errlen, "network: not an object");
        return -1;
    }
    FIELD_STR("tenant", s->tenant, *v_);
    FIELD_STR("subnet", s->subnet, cidr_ok(v_, true));
    FIELD_STR("address", s->address, cidr_ok(v_, true));
    FIELD_STR("gateway", s->gateway, ipv4_ok(v_));
    /* a layout allotd makes: a subnet of /8../30, the address and the
     * gateway in it (a subnet of 0.0.0.0/0 would route the node's own
     * traffic into the tenant's bridge) */
    int sp, ap;
    uint32_t sa = addr_of(s->subnet, &sp), aa = addr_of(s->address, &ap),
             ga = addr_of(s->gateway, NULL);
    if (sp < 8 || sp > 30) {
        allot_fmt(err, errlen, "network.subnet: a prefix of /8 to /30, not /%d", sp);
        return -1;
    }
    if (ap != sp || !same_prefix(sa, aa, sp) || aa == sa || aa == ga) {
        allot_fmt(err, errlen, "network.address: a host address of its subnet %s", s->subnet);
        return -1;
    }
    if (!same_prefix(sa, ga, sp) || ga == sa) {
        allot_fmt(err, errlen, "network.gateway: an address of its subnet %s", s->subnet);
        return -1;
    }
    x = json_object_get(j, "vni");
    if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 0xffffff) {
        allot_fmt(err, errlen, "network.vni: an integer 1..16777215");
        return -1;
    }
    s->vni = (uint32_t)json_integer_value(x);
    allot_strlcpy(s->egress, "off", sizeof(s->egress));
    if (json_object_get(j, "egress"))
        FIELD_STR("egress", s->egress,
                  !strcmp(v_, "off") || !strcmp(v_, "nat") || !strcmp(v_, "allow"));
    json_array_foreach(json_object_get(j, "allow"), i, x)
    {
        const char *c = json_string_value(x);
        if (!cidr_ok(c, false) || s->n_allow >= NET_MAX_ALLOW) {
            allot_fmt(err, errlen, "network.allow[%zu]: an IPv4 CIDR (at most %d)", i,
                      NET_MAX_ALLOW);
            return -1;
        }
        allot_strlcpy(s->allow[s->n_allow++], c, sizeof(s->allow[0]));
    }
    rate = json_object_get(j, "rate");
    s->guarantee_bps = json_integer_value(json_object_get(rate, "guarantee_bps"));
    s->ceil_bps = json_integer_value(json_object_get(rate, "ceil_bps"));
    if (s->guarantee_bps < 0 || s->ceil_bps < 0) {
        allot_fmt(err, errlen, "network.rate: negative");
        return -1;
    }
    x = json_object_get(j, "prio");
    s->prio = (int)json_integer_value(x);
    if (x && (!json_is_integer(x) || s->prio < 0 || s->prio >= NET_PRIOS)) {
        allot_fmt(err, errlen, "network.prio: 0..%d", NET_PRIOS - 1);
        return -1;
    }
    s->exclusive = json_is_true(json_object_get(j, "exclusive"));
    return 0;
}

/* The spec as the "network" object it was parsed from (new reference). */
static json_t *spec_json(const struct net_spec *s)
{
    json_t *allow = json_array();

    for (int i = 0; i < s->n_allow; i++)
        json_array_append_new(allow, json_string(s->allow[i]));
    return json_pack("{s:s,s:I,s:s,s:s,s:s,s:s,s:o,s:{s:I,s:I},s:i,s:b}", "tenant", s->tenant,
                     "vni", (json_int_t)s->vni, "subnet", s->subnet, "address", s->address,
                     "gateway", s->gateway, "egress", s->egress, "allow", allow, "rate",
                     "guarantee_bps", (json_int_t)s->guarantee_bps, "ceil_bps",
                     (json_int_t)s->ceil_bps, "prio", s->prio, "exclusive", s->exclusive);
}

/* ---- the handle ---- */

/* The network prefix of ADDR/P as "N/P" into buf. */
static void prefix_of(const char *addr, int plen, char *buf, size_t len)
{
    struct in_addr a;
    uint32_t mask = plen <= 0 ? 0 : plen >= 32 ? 0xffffffffu : ~(0xffffffffu >> plen);
    char txt[INET_ADDRSTRLEN];

    inet_pton(AF_INET, addr, &a);
    a.s_addr = htonl(ntohl(a.s_addr) & mask);
    inet_ntop(AF_INET, &a, txt, sizeof(txt));
    allot_fmt(buf, len, "%s/%d", txt, plen);
}

int net_dc_nets_add(struct net *n, const char *list, char *err, size_t errlen)
{
    char buf[1024], *save = NULL;

    if (!list || !*list)
        return 0;
    if (strlen(list) >= sizeof(buf)) {
        allot_fmt(err, errlen, "--dc-nets is longer than %zu bytes", sizeof(buf) - 1);
        return -1;
    }
    allot_strlcpy(buf, list, sizeof(buf));
    for (char *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        if (!cidr_ok(c, true)) {
            allot_fmt(err, errlen, "--dc-nets: \"%s\" is not an IPv4 prefix (ADDR/LEN)", c);
            return -1;
        }
        if (n->n_uplink_nets >= NET_MAX_DC_NETS) {
            allot_fmt(err, errlen, "--dc-nets: more than %d prefixes with the uplink's",
                      NET_MAX_DC_NETS);
            return -1;
        }
        char addr[48];
        net_addr_only(c, addr, sizeof(addr));
        prefix_of(addr, net_prefix_len(c), n->uplink_nets[n->n_uplink_nets++],
                  sizeof(n->uplink_nets[0]));
    }
    return 0;
}

static void peers_load(struct net *n)
{
    char path[4200];

    allot_fmt(path, sizeof(path), "%s/net-peers.json", n->state_dir);
    n->peers = json_load_file(path, 0, NULL);
    if (!json_is_object(n->peers)) {
        json_decref(n->peers);
        n->peers = json_object();
    }
}

struct net *net_new(const struct net_config *cfg, char *err, size_t errlen)
{
    struct net *n = allot_calloc(1, sizeof(*n));
    json_t *addrs = NULL, *ifc, *ai;
    size_t i, k;

    if (!n) {
        allot_fmt(err, errlen, "out of memory");
        return NULL;
    }
    allot_strlcpy(n->node, cfg->node, sizeof(n->node));
    allot_strlcpy(n->state_dir, cfg->state_dir, sizeof(n->state_dir));
    if (!cfg->underlay || !ipv4_ok(cfg->underlay)) {
        allot_fmt(err, errlen,
                  "--network on needs --underlay-ip (this node's IPv4 address on "
                  "the data-centre network)");
        goto fail;
    }
    allot_strlcpy(n->underlay, cfg->underlay, sizeof(n->underlay));
    if (cfg->uplink && *cfg->uplink)
        allot_strlcpy(n->uplink, cfg->uplink, sizeof(n->uplink));
    /* the tools everything goes through, checked once */
    if (net_run(NULL, 0, NULL, "nft --version") || net_run(NULL, 0, NULL, "tc -V") ||
        net_run(NULL, 0, NULL, "bridge -V")) {
        allot_fmt(err, errlen, "needs nft (nftables), tc and bridge (iproute2) in PATH");
        goto fail;
    }
    addrs = net_run_json("ip -j -4 addr show");
    if (!json_is_array(addrs)) {
        allot_fmt(err, errlen, "cannot run `ip -j addr show` (iproute2)");
        goto fail;
    }
    json_array_foreach(addrs, i, ifc)
    {
        const char *name = json_string_value(json_object_get(ifc, "ifname"));
        bool has_underlay = false;

        json_array_foreach(json_object_get(ifc, "addr_info"), k, ai)
        {
            const char *l = json_string_value(json_object_get(ai, "local"));
            has_underlay |= l && !strcmp(l, n->underlay);
        }
        if (!*n->uplink && has_underlay && name)
            allot_strlcpy(n->uplink, name, sizeof(n->uplink));
        if (!name || strcmp(name, n->uplink) != 0)
            continue;
        n->mtu = (int)json_integer_value(json_object_get(ifc, "mtu"));
        json_array_foreach(json_object_get(ifc, "addr_info"), k, ai)
        {
            const char *l = json_string_value(json_object_get(ai, "local"));
            const char *fam = json_string_value(json_object_get(ai, "family"));

            if (!l || !ipv4_ok(l) || (fam && strcmp(fam, "inet") != 0))
                continue;
            /* every one is kept out of egress nat: none left out silently */
            if (n->n_uplink_nets >= NET_MAX_DC_NETS) {
                allot_fmt(err, errlen, "the uplink %s has more than %d IPv4 networks", name,
                          NET_MAX_DC_NETS);
                json_decref(addrs);
                goto fail;
            }
            prefix_of(l, (int)json_integer_value(json_object_get(ai, "prefixlen")),
                      n->uplink_nets[n->n_uplink_nets++], sizeof(n->uplink_nets[0]));
        }
    }
    json_decref(addrs);
    n->n_uplink_own = n->n_uplink_nets;
    if (net_dc_nets_add(n, cfg->dc_nets, err, errlen) < 0)
        goto fail;
    if (!*n->uplink) {
        allot_fmt(err, errlen, "no interface has the underlay address %s (--uplink)", n->underlay);
        goto fail;
    }
    if (n->mtu <= 0) {
        json_t *l = net_run_json("ip -j link show dev %s", n->uplink);
        n->mtu = (int)json_integer_value(json_object_get(json_array_get(l, 0), "mtu"));
        json_decref(l);
        if (n->mtu <= 0) {
            allot_fmt(err, errlen, "--uplink %s: no such interface", n->uplink);
            goto fail;
        }
    }
    n->uplink_bps = cfg->rate && *cfg->rate ? net_parse_rate(cfg->rate) : 0;
    if (n->uplink_bps < 0) {
        allot_fmt(err, errlen, "--uplink-rate %s: a rate such as 10Gbit or 200Mbit", cfg->rate);
        goto fail;
    }
    if (!n->uplink_bps) { /* the link's speed in Mbit/s, where sysfs knows it */
        char path[256], buf[32] = "";
        FILE *f;
        allot_fmt(path, sizeof(path), "/sys/class/net/%s/speed", n->uplink);
        if ((f = fopen(path, "r"))) {
            if (!fgets(buf, sizeof(buf), f))
                buf[0] = '\0';
            fclose(f);
        }
        long mbit = strtol(buf, NULL, 10); /* -1 where the driver does not know */
        n->uplink_bps = mbit > 0 ? (int64_t)mbit * 1000000 : 10000000000LL;
    }
    peers_load(n);
    LOG_INFO("net", "tenant networks on: underlay %s on %s (mtu %d, %lld bit/s)", n->underlay,
             n->uplink, n->mtu, (long long)n->uplink_bps);
    return n;
fail:
    allot_free(n);
    return NULL;
}

void net_free(struct net *n)
{
    if (!n)
        return;
    json_decref(n->peers);
    json_decref(n->usage);
    allot_free(n->e);
    allot_free(n->sig_state);
    allot_free(n->sig_nft);
    allot_free(n->sig_tc);
    allot_free(n);
}

/* ---- links ---- */

static void veth_name(const char *node, const char *key, char *buf, size_t len)
{
    uint64_t h = allot_fnv1a(allot_fnv1a(ALLOT_FNV1A_INIT, node, strlen(node)), key, strlen(key));

    allot_fmt(buf, len, "al-%012llx", (unsigned long long)(h & 0xffffffffffffULL));
}

static bool link_exists(const char *name)
{
    return net_run(NULL, 0, NULL, "ip link show dev %s", name) == 0;
}

static void no_ipv6(const char *ifname)
{
    char path[128];

    allot_fmt(path, sizeof(path), "net/ipv6/conf/%s/disable_ipv6", ifname);
    net_sysctl(path, "1");
}

/* The tenant's bridge (gateway address, anycast MAC) and VXLAN device,
 * made when missing. 0 or -1 with why. */
static int tenant_ensure(struct net *n, const struct net_spec *s, char *err, size_t errlen)
{
    char out[512], br[16], vx[16];
    int mtu = n->mtu - 50; /* VXLAN over IPv4: 50 bytes of headers */

    allot_fmt(br, sizeof(br), "alb-%u", s->vni);
    allot_fmt(vx, sizeof(vx), "alx-%u", s->vni);
    if (!link_exists(br)) {
        if (net_run(out, sizeof(out), NULL,
                    "ip link add %s address 02:a1:1b:%02x:%02x:%02x mtu %d type bridge", br,
                    (s->vni >> 16) & 0xff, (s->vni >> 8) & 0xff, s->vni & 0xff, mtu)) {
            allot_fmt(err, errlen, "bridge %s: %s", br, out);
            return -1;
        }
        no_ipv6(br);
        LOG_INFO("net", "tenant %s: bridge %s, gateway %s", s->tenant, br, s->gateway);
    }
    /* set every time, not only when made: a bridge left halfway by a failed
     * setup, or changed by hand, is mended (each step is idempotent) */
    if (net_run(out, sizeof(out), NULL, "ip addr replace %s/%d dev %s", s->gateway,
                net_prefix_len(s->subnet), br) ||
        net_run(out, sizeof(out), NULL, "ip link set %s up", br)) {
        allot_fmt(err, errlen, "bridge %s: %s", br, out);
        return -1;
    }
    if (!link_exists(vx)) {
        if (net_run(out, sizeof(out), NULL,
                    "ip link add %s mtu %d type vxlan id %u dstport %d local %s dev %s nolearning",
                    vx, mtu, s->vni, NET_VXLAN_PORT, n->underlay, n->uplink)) {
            allot_fmt(err, errlen, "VXLAN %s: %s", vx, out);
            return -1;
        }
        no_ipv6(vx);
        LOG_INFO("net", "tenant %s: VXLAN %s (VNI %u) on %s", s->tenant, vx, s->vni, n->uplink);
    }
    if (net_run(out, sizeof(out), NULL, "ip link set %s master %s up", vx, br)) {
        allot_fmt(err, errlen, "VXLAN %s: %s", vx, out);
        return -1;
    }
    return 0;
}

static struct net_entry *find(struct net *n, const char *key)
{
    for (size_t i = 0; i < n->n; i++)
        if (!strcmp(n->e[i].key, key))
            return &n->e[i];
    return NULL;
}

/* Removes a task's namespace and veth (either may be gone already). */
static void task_links_del(const char *ns, const char *veth)
{
    net_run(NULL, 0, NULL, "ip netns del %s", ns);
    if (link_exists(veth))
        net_run(NULL, 0, NULL, "ip link del %s", veth);
}

static int write_record(const char *dir, const struct net_entry *e)
{
    json_t *o =
        json_pack("{s:s,s:s,s:o}", "ns", e->ns, "veth", e->veth, "network", spec_json(&e->s));
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    int rc = text && agent_write_atomic(dir, "net.json", text) == 0 ? 0 : -1;

    free(text);
    json_decref(o);
    return rc;
}

static int add_entry(struct net *n, const struct net_entry *e)
{
    if (allot_grow((void **)&n->e, &n->cap, n->n + 1, sizeof(*n->e)) < 0)
        return -1;
    n->e[n->n++] = *e;
    return 0;
}

int net_task_up(struct net *n, const char *key, const struct net_spec *s, const char *dir,
                char *err, size_t errlen)
{
    struct net_entry e = {0};
    char out[512], batch[1024];
    int mtu = n->mtu - 50;

    if (find(n, key))
        return 0;
    /* a tenant subnet over the node's own (connected) networks would take
     * the node's traffic to them into the tenant's bridge (its route is the
     * more specific): refused, whatever allotd's pool. --dc-nets are only
     * kept out of egress; the pool may lie inside one of them */
    int sp, np;
    uint32_t sa = addr_of(s->subnet, &sp);
    for (int i = 0; i < n->n_uplink_own; i++) {
        uint32_t na = addr_of(n->uplink_nets[i], &np);
        if (same_prefix(sa, na, sp < np ? sp : np)) {
            allot_fmt(err, errlen,
                      "tenant subnet %s overlaps this node's network %s (its uplink's): "
                      "choose allotd's --net-pool apart from it",
                      s->subnet, n->uplink_nets[i]);
            return -1;
        }
    }
    if (same_prefix(sa, addr_of(n->underlay, NULL), sp)) {
        allot_fmt(err, errlen, "tenant subnet %s holds this node's underlay address %s", s->subnet,
                  n->underlay);
        return -1;
    }
    allot_strlcpy(e.key, key, sizeof(e.key));
    net_ns_name(key, e.ns, sizeof(e.ns));
    veth_name(n->node, key, e.veth, sizeof(e.veth));
    e.s = *s;
    /* recorded first: an agent killed halfway finds what to take down */
    if (write_record(dir, &e) < 0) {
        allot_fmt(err, errlen, "%s: cannot record the task's network", dir);
        return -1;
    }
    if (tenant_ensure(n, s, err, errlen) < 0)
        goto undo;
    if (net_run(out, sizeof(out), NULL, "ip netns add %s", e.ns)) {
        allot_fmt(err, errlen, "namespace %s: %s", e.ns, out);
        goto undo;
    }
    /* the task's MAC follows from its address (06:a1:A:B:C:D): an address
     * allotd gives again later keeps its MAC, so the tenant's other tasks
     * (their ARP caches, the bridges' learned entries) still find it */
    char addr[48], mac[24];
    struct in_addr ia;
    net_addr_only(s->address, addr, sizeof(addr));
    inet_pton(AF_INET, addr, &ia);
    const unsigned char *b = (const unsigned char *)&ia.s_addr;
    allot_fmt(mac, sizeof(mac), "06:a1:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3]);
    if (net_run(out, sizeof(out), NULL,
                "ip link add %s mtu %d type veth peer name eth0 address %s mtu %d netns %s", e.veth,
                mtu, mac, mtu, e.ns)) {
        allot_fmt(err, errlen, "veth %s: %s", e.veth, out);
        goto undo;
    }
    /* an entry the bridge learned for that MAC elsewhere (the address's task
     * on another node before) would keep frames away from it here */
    net_run(NULL, 0, NULL, "bridge fdb del %s dev alx-%u master", mac, s->vni);
    no_ipv6(e.veth);
    if (net_run(out, sizeof(out), NULL, "ip link set %s master alb-%u up", e.veth, s->vni)) {
        allot_fmt(err, errlen, "veth %s: %s", e.veth, out);
        goto undo;
    }
    /* inside: the owner's mark, loopback, the address and the default route */
    allot_fmt(batch, sizeof(batch),
              "link set lo alias allot:%s\nlink set lo up\nlink set eth0 up\n"
              "addr add %s dev eth0\nroute add default via %s dev eth0\n",
              n->node, s->address, s->gateway);
    if (net_run(out, sizeof(out), batch, "ip -n %s -batch -", e.ns)) {
        allot_fmt(err, errlen, "namespace %s: %s", e.ns, out);
        goto undo;
    }
    if (add_entry(n, &e) < 0) {
        allot_fmt(err, errlen, "out of memory");
        goto undo;
    }
    /* isolated before it runs: the rules include it now, or it does not run */
    if (net_sync(n, false) < 0) {
        struct net_entry *me = find(n, key);
        if (me)
            *me = n->e[--n->n];
        allot_fmt(err, errlen,
                  "the node's tenant network rules could not be applied "
                  "(the agent's log says why)");
        goto undo;
    }
    LOG_INFO("net", "task %s: namespace %s, %s on alb-%u, %s via %s", key, e.ns, e.veth, s->vni,
             s->address, s->gateway);
    return 0;
undo:
    task_links_del(e.ns, e.veth);
    net_sync(n, false); /* a bridge made for it alone goes again */
    return -1;
}

void net_task_down(struct net *n, const char *key)
{
    struct net_entry *e = find(n, key);

    if (!e)
        return;
    task_links_del(e->ns, e->veth);
    LOG_INFO("net", "task %s: namespace %s and %s removed", key, e->ns, e->veth);
    *e = n->e[--n->n];
    net_sync(n, false);
}

bool net_task_adopt(struct net *n, const char *key, const char *dir)
{
    char path[4400], err[256];
    json_t *o;
    struct net_entry e = {0};
    bool ok = false;

    allot_fmt(path, sizeof(path), "%s/net.json", dir);
    if (!(o = json_load_file(path, 0, NULL)))
        return false;
    allot_strlcpy(e.key, key, sizeof(e.key));
    net_ns_name(key, e.ns, sizeof(e.ns));
    veth_name(n->node, key, e.veth, sizeof(e.veth));
    if (net_parse(json_object_get(o, "network"), &e.s, err, sizeof(err)) < 0)
        LOG_WARN("net", "%s: %s", path, err);
    else if (!find(n, key) && add_entry(n, &e) == 0)
        ok = true;
    json_decref(o);
    return ok;
}

void net_task_refresh(struct net *n, const char *key, json_t *j)
{
    struct net_entry *e = find(n, key);
    struct net_spec s;
    char err[256];

    if (!e || !j)
        return;
    if (net_parse(j, &s, err, sizeof(err)) < 0) {
        /* fail closed: the tenant's old policy may be wider than the new */
        if (strcmp(e->s.egress, "off") != 0)
            LOG_WARN("net",
                     "task %s: its new network policy does not read (%s): egress off "
                     "until it does",
                     key, err);
        allot_strlcpy(e->s.egress, "off", sizeof(e->s.egress));
        e->s.n_allow = 0;
        return;
    }
    if (s.vni != e->s.vni || strcmp(s.address, e->s.address) != 0 ||
        strcmp(s.gateway, e->s.gateway) != 0 || strcmp(s.subnet, e->s.subnet) != 0)
        return; /* a running task keeps its address */
    e->s = s;
}

/* ---- peers and FDB ---- */

void net_set_peers(struct net *n, json_t *network)
{
    json_t *p = json_object_get(network, "peers");
    char path[4200];

    n->cluster_on = json_is_object(p);
    if (!json_is_object(p) || json_equal(p, n->peers))
        return;
    json_decref(n->peers);
    n->peers = json_deep_copy(p);
    allot_fmt(path, sizeof(path), "%s/net-peers.json", n->state_dir);
    if (json_dump_file(n->peers, path, JSON_COMPACT) < 0)
        LOG_WARN("net", "%s: cannot keep the peers", path);
}

bool net_cluster_on(const struct net *n)
{
    return n && n->cluster_on;
}

/* Is ip among VNI's peers (not this node)? */
static bool is_peer(const struct net *n, uint32_t vni, const char *ip)
{
    char k[16];
    json_t *x;
    size_t i;

    allot_fmt(k, sizeof(k), "%u", vni);
    json_array_foreach(json_object_get(n->peers, k), i,
                       x) if (json_string_value(x) &&
                              !strcmp(json_string_value(x), ip)) return true;
    return false;
}

/* The VXLAN device's default entries: one per peer, none for others. */
static void fdb_sync(struct net *n, uint32_t vni)
{
    char k[16], vx[16];
    json_t *fdb, *x;
    size_t i;

    allot_fmt(k, sizeof(k), "%u", vni);
    allot_fmt(vx, sizeof(vx), "alx-%u", vni);
    fdb = net_run_json("bridge -j fdb show dev %s", vx);
    json_array_foreach(fdb, i, x)
    {
        const char *mac = json_string_value(json_object_get(x, "mac"));
        const char *dst = json_string_value(json_object_get(x, "dst"));
        if (mac && dst && !strcmp(mac, "00:00:00:00:00:00") &&
            (!is_peer(n, vni, dst) || !strcmp(dst, n->underlay))) {
            net_run(NULL, 0, NULL, "bridge fdb del 00:00:00:00:00:00 dev %s dst %s", vx, dst);
            LOG_INFO("net", "VNI %u: peer %s removed", vni, dst);
        }
    }
    json_array_foreach(json_object_get(n->peers, k), i, x)
    {
        const char *ip = json_string_value(x);
        bool have = false;
        json_t *f;
        size_t j;

        if (!ipv4_ok(ip) || !strcmp(ip, n->underlay))
            continue;
        json_array_foreach(fdb, j, f)
        {
            const char *mac = json_string_value(json_object_get(f, "mac"));
            const char *dst = json_string_value(json_object_get(f, "dst"));
            have |= mac && dst && !strcmp(mac, "00:00:00:00:00:00") && !strcmp(dst, ip);
        }
        if (have)
            continue;
        if (net_run(NULL, 0, NULL, "bridge fdb append 00:00:00:00:00:00 dev %s dst %s", vx, ip))
            LOG_WARN("net", "VNI %u: cannot add peer %s", vni, ip);
        else
            LOG_INFO("net", "VNI %u: peer %s", vni, ip);
    }
    json_decref(fdb);
}

/* ---- traffic counters ---- */

json_t *net_usage_json(struct net *n)
{
    json_t *links, *l, *per, *v, *out;
    const char *k;
    size_t i;

    if (!n || !n->n) /* no tenant network here: nothing to read */
        return json_array();
    if (n->usage && allot_mono_ms() - n->usage_ms < 1000)
        return json_incref(n->usage);
    links = net_run_json("ip -j -s link show");
    per = json_object();
    json_array_foreach(links, i, l)
    {
        const char *name = json_string_value(json_object_get(l, "ifname"));
        json_t *st = json_object_get(l, "stats64"), *c;
        unsigned vni;
        char tail, key[16];

        if (!name ||
            (sscanf(name, "alb-%u%c", &vni, &tail) != 1 &&
             sscanf(name, "alx-%u%c", &vni, &tail) != 1) ||
            !vni)
            continue;
        allot_fmt(key, sizeof(key), "%u", vni);
        if (!(c = json_object_get(per, key))) {
            c = json_pack("{s:I,s:I,s:I}", "vni", (json_int_t)vni, "rx_bytes", (json_int_t)0,
                          "tx_bytes", (json_int_t)0);
            json_object_set_new(per, key, c);
        }
        json_object_set_new(
            c, "rx_bytes",
            json_integer(json_integer_value(json_object_get(c, "rx_bytes")) +
                         json_integer_value(json_object_get(json_object_get(st, "rx"), "bytes"))));
        json_object_set_new(
            c, "tx_bytes",
            json_integer(json_integer_value(json_object_get(c, "tx_bytes")) +
                         json_integer_value(json_object_get(json_object_get(st, "tx"), "bytes"))));
    }
    json_decref(links);
    out = json_array();
    json_object_foreach(per, k, v) json_array_append(out, v);
    json_decref(per);
    json_decref(n->usage);
    n->usage = json_incref(out);
    n->usage_ms = allot_mono_ms();
    return out;
}

/* ---- the tenants view ---- */

static int cmp_tenant(const void *a, const void *b)
{
    const struct net_tenant *x = a, *y = b;
    return x->vni < y->vni ? -1 : x->vni > y->vni;
}

int net_tenants(const struct net *n, struct net_tenant **out)
{
    struct net_tenant *t = n->n ? allot_calloc(n->n, sizeof(*t)) : NULL;
    int nt = 0;

    *out = NULL;
    if (n->n && !t)
        return -1;
    for (size_t i = 0; i < n->n; i++) {
        const struct net_spec *s = &n->e[i].s;
        int k = 0;

        while (k < nt && t[k].vni != s->vni)
            k++;
        if (k == nt) {
            t[nt].vni = s->vni;
            t[nt].s = s;
            nt++;
        }
        /* the tenant's figures on this node: the largest any task carries */
        if (s->guarantee_bps > t[k].guarantee_bps)
            t[k].guarantee_bps = s->guarantee_bps;
        if (s->ceil_bps > t[k].ceil_bps)
            t[k].ceil_bps = s->ceil_bps;
        t[k].exclusive |= s->exclusive;
        t[k].prios |= 1u << s->prio;
    }
    if (nt > 1)
        qsort(t, (size_t)nt, sizeof(*t), cmp_tenant);
    for (int k = 0; k < nt; k++)
        t[k].minor = (unsigned)(k + 1) << 4;
    *out = t;
    return nt;
}

/* ---- sync ---- */

static bool vni_needed(const struct net_tenant *t, int nt, uint32_t vni)
{
    for (int k = 0; k < nt; k++)
        if (t[k].vni == vni)
            return true;
    return false;
}

/* Deletes allot's links that no task needs: veths of forgotten tasks,
 * bridges and VXLAN devices of tenants with no task here. */
static void links_sweep(struct net *n, const struct net_tenant *t, int nt)
{
    json_t *links = net_run_json("ip -j link show"), *l;
    size_t i;

    json_array_foreach(links, i, l)
    {
        const char *name = json_string_value(json_object_get(l, "ifname"));
        unsigned vni;
        char tail;
        bool need = true;

        if (!name)
            continue;
        if (!strncmp(name, "al-", 3) && strlen(name) == 15 &&
            strspn(name + 3, "0123456789abcdef") == 12) { /* allot's veths only */
            need = false;
            for (size_t k = 0; k < n->n && !need; k++)
                need = !strcmp(n->e[k].veth, name);
        } else if ((sscanf(name, "alb-%u%c", &vni, &tail) == 1 ||
                    sscanf(name, "alx-%u%c", &vni, &tail) == 1)) {
            need = vni_needed(t, nt, vni);
        }
        if (need)
            continue;
        if (net_run(NULL, 0, NULL, "ip link del %s", name) == 0)
            LOG_INFO("net", "%s removed: no task needs it", name);
    }
    json_decref(links);
}

/* Deletes namespaces allot-* marked as this node's that no task needs. */
static void ns_sweep(struct net *n)
{
    DIR *d = opendir("/run/netns");
    struct dirent *de;
    char mark[80];

    allot_fmt(mark, sizeof(mark), "allot:%s", n->node);
    while (d && (de = readdir(d))) {
        bool need = false;
        json_t *lo;

        if (strncmp(de->d_name, "allot-", 6) != 0)
            continue;
        for (size_t k = 0; k < n->n && !need; k++)
            need = !strcmp(n->e[k].ns, de->d_name);
        if (need)
            continue;
        lo = net_run_json("ip -n %s -j link show dev lo", de->d_name);
        const char *alias = json_string_value(json_object_get(json_array_get(lo, 0), "ifalias"));
        if (alias && !strcmp(alias, mark) &&
            net_run(NULL, 0, NULL, "ip netns del %s", de->d_name) == 0)
            LOG_INFO("net", "namespace %s removed: no task needs it", de->d_name);
        json_decref(lo);
    }
    if (d)
        closedir(d);
}

bool net_changed(char **sig, const char *text)
{
    if (*sig && text && !strcmp(*sig, text))
        return false;
    allot_free(*sig);
    *sig = text ? allot_strdup(text) : NULL;
    return true;
}

/* What the links and FDB entries follow: the tasks and the peers. */
static char *state_text(const struct net *n)
{
    char *peers = json_dumps(n->peers, JSON_COMPACT | JSON_SORT_KEYS);
    size_t len = (peers ? strlen(peers) : 0) + n->n * 80 + 16;
    char *s = allot_malloc(len);
    size_t at = 0;

    if (s) {
        s[0] = '\0';
        for (size_t i = 0; i < n->n; i++)
            at += (size_t)allot_fmt(s + at, len - at, "%s %s %u;", n->e[i].key, n->e[i].veth,
                                    n->e[i].s.vni);
        allot_fmt(s + at, len - at, "%s", peers ? peers : "");
    }
    free(peers);
    return s;
}

int net_sync(struct net *n, bool all)
{
    struct net_tenant *t;
    int nt = net_tenants(n, &t), rc = 0;
    char err[256], *st;

    if (nt < 0)
        return -1;
    st = state_text(n);
    if (all)
        ns_sweep(n);
    if (!st || net_changed(&n->sig_state, st) || all) {
        links_sweep(n, t, nt);
        for (int k = 0; k < nt; k++) {
            /* a bridge someone deleted by hand comes back */
            if (tenant_ensure(n, t[k].s, err, sizeof(err)) < 0) {
                LOG_WARN("net", "tenant %s: %s", t[k].s->tenant, err);
                rc = -1;
            }
            fdb_sync(n, t[k].vni);
        }
    }
    allot_free(st);
    for (int k = 0; k < nt; k++)
        if (strcmp(t[k].s->egress, "off") != 0 && net_sysctl("net/ipv4/ip_forward", "1") < 0)
            LOG_WARN("net", "cannot turn IPv4 forwarding on: egress of tenant %s", t[k].s->tenant);
    if (net_nft_apply(n, t, nt) < 0)
        rc = -1;
    /* shaping is no isolation: a tree that cannot be built is logged (and tried
     * again at the next change), tasks still start */
    net_tc_apply(n, t, nt);
    allot_free(t);
    return rc;
}

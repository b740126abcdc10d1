/*
 * The node-wide rules of the tenant networks (net_int.h, docs/network.md),
 * both rebuilt whole from the tenants present when they change:
 *
 * - the nftables table `inet allot`, the only table the agent writes
 *   (replaced atomically with `nft -f`, deleted when no tenant is left):
 *   input drops everything from tenant bridges to the node's own
 *   addresses except ping to the tenant's gateway, and VXLAN packets of a
 *   tenant's VNI from anyone but its peers; forward keeps each tenant on
 *   its own bridge, lets it out of the uplink per its egress policy (nat:
 *   anywhere but the data-centre network itself, the uplink's prefixes
 *   and --dc-nets; allow: only its list), never to the VXLAN port, and
 *   drops the rest; postrouting masquerades what goes out;
 * - the uplink's HTB tree a110: (the root qdisc of the uplink, replaced
 *   only when it is allot's): a110:1 the link, a110:ffff the default class
 *   (the node's own traffic), per tenant a class with its guarantee as
 *   rate and its ceiling as ceil, and below it one leaf per priority of
 *   its tasks here (HTB prio = the task's). Overlay packets are classified
 *   by their VXLAN VNI and inner source address (u32), NATed ones by the
 *   skb priority the forward rule sets (HTB reads a110:MINOR from it).
 *
 * Called by net_sync (net.c) only.
 */
#include "net_int.h"

#include "allot/common.h"
#include "log.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing text with a sticky error (checked once at the end). */
struct text {
    char *p;
    size_t len, cap;
    bool err;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->err)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->err = true;
            return;
        }
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        if (allot_grow((void **)&t->p, &t->cap, t->len + (size_t)n + 4096, 1) < 0) {
            t->err = true;
            return;
        }
    }
}

static void leaf_of(const struct net_tenant *tn, int prio, char *buf, size_t len)
{
    allot_fmt(buf, len, "%x:%x", NET_TC_MAJOR, tn->minor | (unsigned)(prio + 1));
}

/* "{ A : a110:11, B : a110:12 }": the tenant's task addresses to their leaves. */
static void prio_map(struct text *x, const struct net *n, const struct net_tenant *tn)
{
    bool first = true;

    add(x, "{ ");
    for (size_t i = 0; i < n->n; i++) {
        char addr[48], leaf[16];
        if (n->e[i].s.vni != tn->vni)
            continue;
        net_addr_only(n->e[i].s.address, addr, sizeof(addr));
        leaf_of(tn, n->e[i].s.prio, leaf, sizeof(leaf));
        add(x, "%s%s : %s", first ? "" : ", ", addr, leaf);
        first = false;
    }
    add(x, " }");
}

static void peer_set(struct text *x, const struct net *n, uint32_t vni, int *count)
{
    char k[16];
    json_t *v;
    size_t i;

    *count = 0;
    allot_fmt(k, sizeof(k), "%u", vni);
    add(x, "{ ");
    json_array_foreach(json_object_get(n->peers, k), i, v)
    {
        struct in_addr a;
        const char *ip = json_string_value(v);
        if (!ip || inet_pton(AF_INET, ip, &a) != 1 || !strcmp(ip, n->underlay))
            continue;
        add(x, "%s%s", *count ? ", " : "", ip);
        (*count)++;
    }
    add(x, " }");
}

/* A hash of table inet allot as the kernel holds it (stateless: no
 * counters), or 0 when it cannot be listed (gone). */
static uint64_t nft_listed(void)
{
    size_t cap = 1 << 20;
    char *out = allot_malloc(cap);
    uint64_t h = 0;

    if (out && net_run(out, cap, NULL, "nft -s list table inet allot") == 0)
        h = allot_fnv1a(ALLOT_FNV1A_INIT, out, strlen(out)) | 1;
    allot_free(out);
    return h;
}

int net_nft_apply(struct net *n, const struct net_tenant *t, int nt)
{
    char out[1024], *text;
    int rc = 0;

    if (!nt) {
        if (!net_changed(&n->sig_nft, "none"))
            return 0;
        if (net_run(NULL, 0, NULL, "nft list table inet allot") == 0) {
            if (net_run(out, sizeof(out), NULL, "nft delete table inet allot")) {
                LOG_WARN("net", "nftables table inet allot not deleted: %s", out);
                allot_free(n->sig_nft);
                n->sig_nft = NULL;
                return -1;
            }
            LOG_INFO("net", "nftables table inet allot deleted: no tenant here");
        }
        return 0;
    }
    if (!(text = net_nft_text(n, t, nt)))
        return -1;
    /* the table as applied, still there as it was? A ruleset flushed by
     * someone else (a restart of the nftables service, a firewall's
     * reload) is applied again, before any task relies on it */
    if (n->sig_nft && strcmp(n->sig_nft, "none") != 0 && nft_listed() != n->nft_listed) {
        LOG_WARN("net", "nftables table inet allot was changed or removed by someone else: "
                        "applying it again");
        allot_free(n->sig_nft);
        n->sig_nft = NULL;
    }
    if (net_changed(&n->sig_nft, text)) {
        if (net_run(out, sizeof(out), text, "nft -f -")) {
            LOG_ERROR("net", "nftables table inet allot not applied: %s", out);
            allot_free(n->sig_nft);
            n->sig_nft = NULL; /* try again at the next sync */
            rc = -1;
        } else {
            n->nft_listed = nft_listed();
            LOG_INFO("net", "nftables table inet allot: %d tenants", nt);
        }
    }
    allot_free(text);
    return rc;
}

char *net_nft_text(const struct net *n, const struct net_tenant *t, int nt)
{
    struct text x = {0}, peers = {0};
    bool nat = false;

    add(&x, "table inet allot\ndelete table inet allot\ntable inet allot {\n");
    add(&x, "  chain input {\n    type filter hook input priority -10; policy accept;\n");
    for (int k = 0; k < nt; k++) {
        int np;
        peers.len = 0;
        peer_set(&peers, n, t[k].vni, &np);
        x.err |= peers.err; /* the set is part of the text */
        if (np)
            add(&x, "    udp dport %d @th,96,24 %u ip saddr != %s counter drop\n", NET_VXLAN_PORT,
                t[k].vni, peers.p ? peers.p : "{ }");
        else
            add(&x, "    udp dport %d @th,96,24 %u counter drop\n", NET_VXLAN_PORT, t[k].vni);
        add(&x, "    iifname \"alb-%u\" ct state established,related accept\n", t[k].vni);
        add(&x, "    iifname \"alb-%u\" ip daddr %s icmp type echo-request accept\n", t[k].vni,
            t[k].s->gateway);
    }
    add(&x, "    iifname \"alb-*\" counter drop\n  }\n");
    add(&x, "  chain forward {\n    type filter hook forward priority -10; policy accept;\n");
    /* no tenant sends VXLAN into the underlay, whatever its egress: a
     * masqueraded datagram from this node's address would pass the peers'
     * VNI check and land on another tenant's segment there */
    add(&x, "    iifname \"alb-*\" oifname \"%s\" udp dport %d counter drop\n", n->uplink,
        NET_VXLAN_PORT);
    for (int k = 0; k < nt; k++) {
        const struct net_spec *s = t[k].s;
        unsigned v = t[k].vni;

        add(&x, "    iifname \"alb-%u\" oifname \"alb-%u\" accept\n", v, v);
        if (!strcmp(s->egress, "nat")) {
            add(&x, "    iifname \"alb-%u\" oifname \"%s\" ip saddr %s", v, n->uplink, s->subnet);
            if (n->n_uplink_nets) {
                add(&x, " ip daddr != { ");
                for (int i = 0; i < n->n_uplink_nets; i++)
                    add(&x, "%s%s", i ? ", " : "", n->uplink_nets[i]);
                add(&x, " }");
            }
            add(&x, " meta priority set ip saddr map ");
            prio_map(&x, n, &t[k]);
            add(&x, " accept\n");
            nat = true;
        } else if (!strcmp(s->egress, "allow") && s->n_allow) {
            add(&x, "    iifname \"alb-%u\" oifname \"%s\" ip saddr %s ip daddr { ", v, n->uplink,
                s->subnet);
            for (int i = 0; i < s->n_allow; i++)
                add(&x, "%s%s", i ? ", " : "", s->allow[i]);
            add(&x, " } meta priority set ip saddr map ");
            prio_map(&x, n, &t[k]);
            add(&x, " accept\n");
            nat = true;
        }
        add(&x, "    iifname \"%s\" oifname \"alb-%u\" ct state established,related accept\n",
            n->uplink, v);
    }
    add(&x, "    iifname \"alb-*\" counter drop\n    oifname \"alb-*\" counter drop\n  }\n");
    if (nat) {
        add(&x, "  chain postrouting {\n    type nat hook postrouting priority 110; "
                "policy accept;\n");
        for (int k = 0; k < nt; k++)
            if (strcmp(t[k].s->egress, "off") != 0)
                add(&x, "    oifname \"%s\" ip saddr %s masquerade\n", n->uplink, t[k].s->subnet);
        add(&x, "  }\n");
    }
    add(&x, "}\n");
    allot_free(peers.p);
    if (x.err) {
        allot_free(x.p);
        return NULL;
    }
    return x.p;
}

/* The HTB rate words for rate r (bit/s): rate, burst of 5 ms (at least a
 * full frame). */
static void htb_rate(struct text *x, const char *word, int64_t r)
{
    int64_t burst = r / 8 / 200;

    if (burst < 1600)
        burst = 1600;
    add(x, " %s %lldbit %sburst %lld", word, (long long)r, !strcmp(word, "ceil") ? "c" : "",
        (long long)burst);
}

/* Is the uplink's root qdisc allot's (a110:)? */
static bool tc_ours(const struct net *n)
{
    json_t *q = net_run_json("tc -j qdisc show dev %s root", n->uplink), *x;
    char handle[16];
    bool ours = false;
    size_t i;

    allot_fmt(handle, sizeof(handle), "%x:", NET_TC_MAJOR);
    json_array_foreach(q, i, x)
    {
        const char *h = json_string_value(json_object_get(x, "handle"));
        ours |= json_is_true(json_object_get(x, "root")) && h && !strcmp(h, handle);
    }
    json_decref(q);
    return ours;
}

int net_tc_apply(struct net *n, const struct net_tenant *t, int nt)
{
    const char *u = n->uplink;
    char out[1024], *text;
    int rc = 0;

    if (!nt) {
        if (!net_changed(&n->sig_tc, "none"))
            return 0;
        if (tc_ours(n)) {
            net_run(NULL, 0, NULL, "tc qdisc del dev %s root", u);
            LOG_INFO("net", "tc tree on %s removed: no tenant here", u);
        }
        return 0;
    }
    if (!(text = net_tc_text(n, t, nt)))
        return -1;
    if (net_changed(&n->sig_tc, text)) {
        /* a tree of allot's goes first (its classes would stay under replace) */
        if (tc_ours(n))
            net_run(NULL, 0, NULL, "tc qdisc del dev %s root", u);
        if (net_run(out, sizeof(out), text, "tc -batch -")) {
            LOG_ERROR("net", "tc tree on %s not applied: %s", u, out);
            allot_free(n->sig_tc);
            n->sig_tc = NULL;
            rc = -1;
        } else {
            LOG_INFO("net", "tc tree on %s: %d tenants, %lld bit/s", u, nt,
                     (long long)n->uplink_bps);
        }
    }
    allot_free(text);
    return rc;
}

char *net_tc_text(const struct net *n, const struct net_tenant *t, int nt)
{
    const char *u = n->uplink;
    int64_t total = n->uplink_bps, sum = 0;
    struct text x = {0};

    /* replace: whatever root qdisc the uplink had (mq, fq_codel, noqueue) */
    add(&x, "qdisc replace dev %s root handle %x: htb default ffff\n", u, NET_TC_MAJOR);
    add(&x, "class add dev %s parent %x: classid %x:1 htb", u, NET_TC_MAJOR, NET_TC_MAJOR);
    htb_rate(&x, "rate", total);
    htb_rate(&x, "ceil", total);
    add(&x, " quantum 60000\n");
    for (int k = 0; k < nt; k++) {
        int64_t g = t[k].exclusive ? total : t[k].guarantee_bps;
        int64_t c =
            t[k].exclusive || !t[k].ceil_bps || t[k].ceil_bps > total ? total : t[k].ceil_bps;
        int leaves = __builtin_popcount(t[k].prios);

        if (g > c)
            g = c;
        if (g < 8000)
            g = 8000; /* HTB needs a rate: no guarantee is almost none */
        sum += g;
        add(&x, "class add dev %s parent %x:1 classid %x:%x htb", u, NET_TC_MAJOR, NET_TC_MAJOR,
            t[k].minor);
        htb_rate(&x, "rate", g);
        htb_rate(&x, "ceil", c);
        add(&x, " quantum 60000\n");
        for (int p = 0; p < NET_PRIOS; p++) {
            char leaf[16];
            if (!(t[k].prios & (1u << p)))
                continue;
            leaf_of(&t[k], p, leaf, sizeof(leaf));
            add(&x, "class add dev %s parent %x:%x classid %s htb", u, NET_TC_MAJOR, t[k].minor,
                leaf);
            htb_rate(&x, "rate", g / leaves > 8000 ? g / leaves : 8000);
            htb_rate(&x, "ceil", c);
            add(&x, " prio %d quantum 60000\n", p);
        }
        /* overlay packets of its VNI, by inner source address, else its first leaf */
        for (size_t i = 0; i < n->n; i++) {
            struct in_addr a;
            char addr[48], leaf[16];
            if (n->e[i].s.vni != t[k].vni)
                continue;
            net_addr_only(n->e[i].s.address, addr, sizeof(addr));
            inet_pton(AF_INET, addr, &a);
            uint32_t ip = ntohl(a.s_addr);
            leaf_of(&t[k], n->e[i].s.prio, leaf, sizeof(leaf));
            add(&x,
                "filter add dev %s parent %x: protocol ip prio 1 u32 match u8 17 0xff at 9 "
                "match u16 %d 0xffff at 22 match u32 0x%08x 0xffffff00 at 32 match u16 0x%04x "
                "0xffff at 62 match u16 0x%04x 0xffff at 64 flowid %s\n",
                u, NET_TC_MAJOR, NET_VXLAN_PORT, t[k].vni << 8, ip >> 16, ip & 0xffff, leaf);
        }
        char first[16];
        leaf_of(&t[k], __builtin_ctz(t[k].prios), first, sizeof(first));
        add(&x,
            "filter add dev %s parent %x: protocol ip prio 2 u32 match u8 17 0xff at 9 match u16 "
            "%d 0xffff at 22 match u32 0x%08x 0xffffff00 at 32 flowid %s\n",
            u, NET_TC_MAJOR, NET_VXLAN_PORT, t[k].vni << 8, first);
    }
    /* the rest (the node's own traffic): what the tenants leave, at least 1 % */
    int64_t rest = total - sum > total / 100 ? total - sum : total / 100;
    add(&x, "class add dev %s parent %x:1 classid %x:ffff htb", u, NET_TC_MAJOR, NET_TC_MAJOR);
    htb_rate(&x, "rate", rest > 8000 ? rest : 8000);
    htb_rate(&x, "ceil", total);
    add(&x, " prio 7 quantum 60000\n");
    if (x.err) {
        allot_free(x.p);
        return NULL;
    }
    return x.p;
}

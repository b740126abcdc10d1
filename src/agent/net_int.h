/*
 * Internals of the agent's tenant networks (net.h): the registry, the
 * per-tenant view net_sync derives from it, and the helpers the three
 * files share (net.c: registry, links, namespaces, FDB; net_rules.c: the
 * nftables table and the tc tree; net_sys.c: running ip/nft/tc, sysctls,
 * rates).
 */
#ifndef ALLOT_AGENT_NET_INT_H
#define ALLOT_AGENT_NET_INT_H

#include "net.h"

#include <stdarg.h>

#define NET_TC_MAJOR   0xa110u /* the uplink's HTB qdisc is a110: */
#define NET_VXLAN_PORT 4789

/* One task with a network here. */
struct net_entry {
    char key[48];  /* "JOB-INDEX" */
    char ns[64];   /* allot-KEY */
    char veth[16]; /* al-HASH, the host side */
    struct net_spec s;
};

/* One tenant present on the node, derived from its tasks. */
struct net_tenant {
    uint32_t vni;
    const struct net_spec *s; /* its first task's spec (borrowed from the registry) */
    int64_t guarantee_bps, ceil_bps;
    bool exclusive;
    unsigned prios; /* bit p: a task of priority p runs here */
    unsigned minor; /* its tc class a110:MINOR; leaves MINOR|(p+1) */
};

struct net {
    char node[64], underlay[48], uplink[32], state_dir[4096];
    int n_uplink_nets;
    int n_uplink_own; /* the first ones: the uplink's own (connected) networks */
    char uplink_nets[NET_MAX_DC_NETS][48]; /* the data-centre network: the uplink's
                                              prefixes, then --dc-nets */
    int64_t uplink_bps;
    int mtu;             /* the uplink's */
    struct net_entry *e; /* owned */
    size_t n, cap;
    json_t *peers;   /* owned: {"VNI": ["IP", ...]} */
    bool cluster_on; /* the last heartbeat's reply carried the overlays' peers: allotd runs
                        tenant networks (net_cluster_on) */
    /* what was last applied (owned; NULL: unknown, apply again) */
    char *sig_state, *sig_nft, *sig_tc;
    uint64_t nft_listed; /* hash of table inet allot as listed after it was applied */
    json_t *usage;       /* owned: the last net_usage_json reading */
    int64_t usage_ms;    /* when (monotonic ms) */
};

/* The tenants of the registry, sorted by VNI, tc minors assigned: *out
 * (allot_free). Returns the count, or -1. */
int net_tenants(const struct net *n, struct net_tenant **out);
/* The prefix length of "A.B.C.D/P" (32 without one). */
int net_prefix_len(const char *cidr);
/* Adds the prefixes of `list` (--dc-nets: comma-separated IPv4 CIDRs; NULL
 * or "": none) to the data-centre network that egress nat leaves out.
 * Returns 0, or -1 with the bad entry named in err. */
int net_dc_nets_add(struct net *n, const char *list, char *err, size_t errlen);
/* The address part of "A.B.C.D/P" into buf. */
void net_addr_only(const char *cidr, char *buf, size_t len);

/* Replaces *sig (owned) with text and returns true when they differ:
 * something changed since it was last applied. */
bool net_changed(char **sig, const char *text);

/* The ruleset text `nft -f` gets for tenants t[0..nt) (nt > 0): the table
 * inet allot, replaced whole. New string (allot_free), NULL when out of
 * memory. */
char *net_nft_text(const struct net *n, const struct net_tenant *t, int nt);
/* The `tc -batch` text of the uplink's HTB tree for t[0..nt) (nt > 0). New
 * string (allot_free), NULL when out of memory. */
char *net_tc_text(const struct net *n, const struct net_tenant *t, int nt);

/* Applies the nftables table `inet allot` for tenants t[0..nt) (deletes it
 * when nt is 0). 0 or -1 (logged). */
int net_nft_apply(struct net *n, const struct net_tenant *t, int nt);
/* Builds the uplink's HTB tree for t[0..nt) (removes it when nt is 0).
 * 0 or -1 (logged). */
int net_tc_apply(struct net *n, const struct net_tenant *t, int nt);

/* Runs a command given as a format (words split on spaces, no quoting),
 * with `input` on its standard input (NULL: none); its output (stdout and
 * stderr) into out when out is not NULL. Returns its exit status (0 ok),
 * or -1 when it could not run. */
int net_run(char *out, size_t outlen, const char *input, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Like net_run but returns the output as parsed JSON (new reference), or
 * NULL when it failed or printed no JSON. */
json_t *net_run_json(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Writes value to /proc/sys/PATH (in the agent's network namespace). */
int net_sysctl(const char *path, const char *value);
/* The same in named network namespace ns (/run/netns/NS), from a child
 * that enters it. 0 or -1. */
int net_sysctl_in(const char *ns, const char *path, const char *value);
/* Parses "10Gbit", "200Mbit", "1500kbit", "123" (bit/s). -1 when bad. */
int64_t net_parse_rate(const char *s);

#endif

/*
 * Tenant networks on a node (docs/network.md): the agent's side of
 * `--network on`. A task whose desired-state entry carries "network" runs
 * in its own network namespace (allot-JOB-TASK), joined by a veth pair
 * (host side al-HASH, task side eth0) to its tenant's bridge alb-VNI on
 * the node; the bridges of one tenant on all nodes are joined by a VXLAN
 * device alx-VNI (one VNI per tenant) whose forwarding entries list the
 * tenant's peer nodes. One nftables table, `inet allot`, keeps tenants
 * apart and away from the node's own addresses, and NATs or filters their
 * egress; an HTB tree on the uplink shares its bandwidth between tenants.
 *
 * State: the registry (struct net) lists the tasks whose network is set up
 * here, each also recorded in its task folder (net.json), so a restarted
 * agent re-adopts them. Everything node-wide (bridges, VXLAN devices, FDB
 * entries, the nftables table, the tc tree) is derived from the registry
 * and the peers allotd sent, and net_sync makes the node match: what no
 * task needs is removed (also what a killed agent left behind), so nothing
 * leaks. Single-threaded, like the agent. Changes go through iproute2,
 * nftables and tc run as child processes (net_sys.c).
 *
 * Callers: task.c (up when a task starts, down when it is forgotten, the
 * namespace joined by the task's process before exec), main.c (options,
 * adoption, peers and sync after each heartbeat), rdma.c (a task's VF
 * netdevs move into its namespace).
 */
#ifndef ALLOT_AGENT_NET_H
#define ALLOT_AGENT_NET_H

#include "allot/common.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_MAX_ALLOW   ALLOT_NET_MAX_ALLOW
#define NET_MAX_DC_NETS 24 /* data-centre prefixes: the uplink's IPv4 networks and --dc-nets */
#define NET_PRIOS       8  /* tc priorities 0 (first) .. 7 */

/* One task's network, from its desired-state entry's "network" object. */
struct net_spec {
    char tenant[256];
    uint32_t vni;     /* 1 .. 2^24-1, one per tenant */
    char subnet[48];  /* "198.18.16.0/24" */
    char address[48]; /* the task's "198.18.16.5/24" */
    char gateway[48]; /* "198.18.16.1": the bridge's address on every node */
    char egress[8];   /* off, nat or allow */
    int n_allow;
    char allow[NET_MAX_ALLOW][48];   /* CIDRs reachable with egress allow */
    int64_t guarantee_bps, ceil_bps; /* the tenant's on this node; 0: none */
    int prio;                        /* 0 .. 7 */
    bool exclusive;                  /* the node's network to this tenant */
};

struct net_config {
    const char *node;      /* node name (borrowed) */
    const char *underlay;  /* the node's data-centre IPv4 address (borrowed) */
    const char *uplink;    /* interface towards it; NULL or "": the one with underlay */
    const char *rate;      /* the uplink's capacity, "10Gbit"; NULL or "": its speed */
    const char *state_dir; /* where peers are kept across restarts (borrowed) */
    const char *dc_nets;   /* more data-centre prefixes, "10.0.0.0/8,..."; NULL or "": none */
};

struct net;

/* Opens the node's network side: finds the uplink and its address
 * prefixes, reads the peers kept in STATE/net-peers.json. Returns a new
 * handle (net_free) or NULL with a message in err. */
struct net *net_new(const struct net_config *cfg, char *err, size_t errlen);
/* Frees the handle; what is set up on the node stays (tasks keep running). */
void net_free(struct net *n);

/* Parses desired-state "network" j (borrowed) into *s. Returns 0 or -1
 * with the field at fault in err. */
int net_parse(json_t *j, struct net_spec *s, char *err, size_t errlen);

/* The namespace name of task KEY ("allot-KEY") into buf. */
void net_ns_name(const char *key, char *buf, size_t len);

/* Sets up task KEY's network: records it in DIR/net.json, makes its
 * tenant's bridge and VXLAN device when missing, its namespace, veth,
 * address and default route, then syncs the node's rules so the task is
 * isolated before it starts. Returns 0 or -1 with the reason in err (what
 * was made is taken down again). */
int net_task_up(struct net *n, const char *key, const struct net_spec *s, const char *dir,
                char *err, size_t errlen);
/* Takes task KEY's namespace and veth down and forgets it; its tenant's
 * bridge, VXLAN device, rules and classes go at the next sync when it was
 * the tenant's last task here. Nothing when KEY has no network. */
void net_task_down(struct net *n, const char *key);
/* Re-adopts task KEY from DIR/net.json (after an agent restart): true when
 * it had a network. */
bool net_task_adopt(struct net *n, const char *key, const char *dir);

/* Follows what may change for a running task of KEY in its desired entry's
 * "network" j (borrowed): its tenant's rates and egress policy, its
 * priority (the address and VNI stay what they were). Applied at the next
 * sync. Nothing when KEY has no network or j does not parse. */
void net_task_refresh(struct net *n, const char *key, json_t *j);

/* Takes the reply's top-level "network" object (borrowed): {"peers":
 * {"VNI": ["UNDERLAY-IP", ...]}}, kept on disk. NULL (allotd runs no
 * tenant networks) keeps the peers and turns net_cluster_on off. */
void net_set_peers(struct net *n, json_t *network);
/* Whether allotd runs tenant networks: its last heartbeat reply carried the
 * overlays' peers (net_set_peers). Then every task must come with its
 * network. */
bool net_cluster_on(const struct net *n);

/* Makes the node match the registry and peers: bridges, VXLAN devices and
 * their FDB entries, the nftables table, the tc tree; removes allot's
 * links, namespaces, table and classes that no task needs. Cheap when
 * nothing changed, unless `all` (at start: also looks for stray
 * namespaces of this node). Logs what fails; returns -1 when the links or
 * the nftables table could not be made (the isolation), else 0 (also when
 * only the tc tree failed). */
int net_sync(struct net *n, bool all);

/* The byte counters of each tenant network on the node, for the
 * heartbeat's usage.net (new reference): [{"vni", "rx_bytes", "tx_bytes"}],
 * the sums of its VXLAN device (between nodes) and bridge (to and from the
 * node: gateway, egress). Read through netlink (`ip -s`), so they are the
 * agent's network namespace's whatever /sys shows; at most once a second
 * (the last reading in between). [] when n is NULL or no task here has a
 * network. */
json_t *net_usage_json(struct net *n);

#endif

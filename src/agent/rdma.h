/*
 * SR-IOV RDMA virtual functions as a node resource (docs/network.md, "RDMA
 * and InfiniBand"). allotd counts them (a node's capacity is the sum of
 * `vfs` in its inventory's `rdma`, a task asks "rdma_vfs": N); the agent
 * chooses which VFs a task gets, as a Kubernetes device plugin does.
 *
 * What sysfs shows (one root, --sysfs, so tests use a made-up tree):
 * physical functions (PFs) are the RDMA devices of class/infiniband and
 * the network devices of class/net with VFs (device/sriov_numvfs), one PCI
 * device counted once even when both classes show it; a PF's VF K is the
 * link device/virtfnK to the VF's PCI folder, whose basename is its PCI
 * address, with its netdevs (net/NAME), RDMA devices (infiniband/NAME) and
 * uverbs nodes (infiniband_verbs/uverbsN, /dev/infiniband/uverbsN, the
 * numbers in its `dev` file).
 *
 * A task's VFs are recorded in its folder (DIR/rdma.json) before it starts
 * and held (struct task: n_vfs, vfs) while it starts, runs or stops; a
 * restarted agent reads the records back with its tasks, so a VF is never
 * handed out twice. The free VFs are taken in a fixed order: PFs by class
 * (infiniband, then net) and name, then by K.
 *
 * Callers: inventory.c (the inventory), task.c (assign before a task
 * starts, release when it ends or is forgotten, adopt after a restart).
 * Single-threaded, like the agent. Netdevs move with `ip` (net_run).
 */
#ifndef ALLOT_AGENT_RDMA_H
#define ALLOT_AGENT_RDMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define RDMA_VF_NAMES 4 /* netdevs, RDMA devices, uverbs nodes kept per VF */

/* One uverbs character device of a VF: /dev/infiniband/NAME. */
struct rdma_uverbs {
    char name[16]; /* uverbsN */
    int major, minor;
};

/* One virtual function as sysfs shows it. */
struct rdma_vf {
    char pci[32]; /* its PCI address, "0000:3b:00.2" */
    char pf[64];  /* the PF's name in its class (mlx5_0, ens1f0) */
    int index;    /* K of the PF's virtfnK */
    int n_netdevs, n_devices, n_uverbs;
    char netdevs[RDMA_VF_NAMES][16]; /* its network devices (IFNAMSIZ) */
    char devices[RDMA_VF_NAMES][64]; /* its RDMA devices (mlx5_2) */
    struct rdma_uverbs uverbs[RDMA_VF_NAMES];
};

/* The node's RDMA devices for the inventory (new reference): an array of
 * {"name", "vfs"}: every RDMA device of SYSFS/class/infiniband, and the
 * network devices of SYSFS/class/net with VFs whose PCI device no RDMA
 * device listed already. NULL when out of memory. */
json_t *rdma_inventory_json(const char *sysfs);

/* The VFs under SYSFS (usually /sys), in the order they are handed out:
 * *out (allot_free; NULL when none). Returns the count, or ALLOT_ENOMEM. */
int rdma_vf_list(const char *sysfs, struct rdma_vf **out);

/* Says whether the VF of PCI address pci is held by a task (ud: the
 * caller's). */
typedef bool (*rdma_held_fn)(const char *pci, void *ud);

/* Takes up to `want` VFs of v[0..nv) that held() does not claim, in v's
 * order: their indices into idx[0..want). Returns how many it took (less
 * than want when fewer are free). */
int rdma_pick(const struct rdma_vf *v, int nv, rdma_held_fn held, void *ud, int want, int *idx);

/* Records VFs v[0..n) in DIR/rdma.json (atomically). 0 or ALLOT_EIO. */
int rdma_record_save(const char *dir, const struct rdma_vf *v, int n);
/* Reads DIR/rdma.json: *out (allot_free; NULL when none). Returns the
 * count (0 when there is no record), ALLOT_EINVAL when it does not parse,
 * or ALLOT_ENOMEM. */
int rdma_record_load(const char *dir, struct rdma_vf **out);

/* What the task's environment gets, comma-separated (truncated to fit). */
struct rdma_env {
    char vfs[1024];     /* ALLOT_RDMA_VFS: PCI addresses */
    char netdevs[1024]; /* ALLOT_RDMA_NETDEVS */
    char devices[1024]; /* ALLOT_RDMA_DEVICES */
};
/* Fills *e from v[0..n). */
void rdma_env_of(const struct rdma_vf *v, int n, struct rdma_env *e);

/* Moves the netdevs of v[0..n) into network namespace ns (a name under
 * /run/netns) and sets them up. Returns 0, or -1 with the reason in err,
 * after moving back what it moved. */
int rdma_netdevs_enter(const struct rdma_vf *v, int n, const char *ns, char *err, size_t errlen);
/* Moves the netdevs of v[0..n) that are in namespace ns back into the
 * agent's own. Logs what fails. */
void rdma_netdevs_leave(const struct rdma_vf *v, int n, const char *ns);

struct agent;
struct task;

/* Before task t (desired entry d, borrowed; folder dir) starts: picks the
 * "rdma_vfs" VFs it asks for among those no other live task holds, records
 * them in DIR/rdma.json and holds them in t (vfs, devs: their uverbs
 * nodes). Nothing when it asks for none. Returns 0, or -1 with the reason
 * (the task then fails to start): too many asked, fewer free than asked,
 * no record written. */
int rdma_task_assign(struct agent *a, struct task *t, json_t *d, const char *dir, char *why,
                     size_t wlen);
/* Whether task t (desired entry d, borrowed) must wait before it starts:
 * fewer VFs than it asks for are free, but enough will be once the tasks
 * being stopped have ended (allotd counts a stopped task's VFs free at
 * once; the agent hands a VF over only when its task's process is gone). */
bool rdma_task_must_wait(struct agent *a, const struct task *t, json_t *d);
/* The task's environment values from its record in dir. Returns the
 * number of VFs (0: none, e untouched). */
int rdma_task_env(const char *dir, struct rdma_env *e);
/* Moves the netdevs of the task's VFs (its record in dir) into its network
 * namespace ns. 0, or -1 with the reason in why. */
int rdma_task_enter(const char *dir, const char *ns, char *why, size_t wlen);
/* Frees task t's VFs (its process ended, it failed to start, or it is
 * forgotten): their netdevs back from its namespace when it has one, and t
 * no longer holds them. The record stays until the folder goes. */
void rdma_task_release(struct task *t, const char *dir);
/* After an agent restart: t (its folder dir) holds the VFs its record
 * lists. */
void rdma_task_adopt(struct task *t, const char *dir);

#endif

/*
 * The bodies agents send allotd, checked by pure functions (no store, no
 * I/O) so a fuzz target can drive them: the inventory of POST
 * /v1/nodes/register and the heartbeat of POST /v1/nodes/{name}/heartbeat.
 */
#ifndef ALLOT_SERVER_AGENTPROTO_H
#define ALLOT_SERVER_AGENTPROTO_H

#include "allot/catalog.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENTPROTO_MAX_REPORTS 64
/* Labels a node's inventory may carry (allot_label_key_problem's rule each). */
#define AGENTPROTO_MAX_LABELS 32

/* A heartbeat body, checked; pointers borrowed from the body. */
struct hb_body {
    json_t *jobs;      /* array of reports, or NULL */
    json_t *logs;      /* {"url", "key"}, or NULL */
    json_t *health;    /* {"gpus": [...]}, or NULL */
    const char *known; /* version of the desired state the agent has, or NULL */
    int64_t wait_ms;   /* long poll, 0..60000 */
    json_t *samples;   /* usage.samples: array of checked samples, or NULL */
    json_t *gpus;      /* usage.gpus: the GPUs' current readings, or NULL */
    json_t *net;       /* usage.net: per tenant network, its traffic counters, or NULL */
    int64_t live;      /* tasks on the node whose processes may still be there (a task
                          allotd ended may still be in its grace); -1 when not told */
    json_t *stopping;  /* ids of the jobs allotd ended on the node whose processes may
                          still be there (array), or NULL when not told */
};

/* Most job ids a heartbeat's "stopping" may list. */
#define AGENTPROTO_MAX_STOPPING 4096

/* Most usage samples one heartbeat may carry. */
#define AGENTPROTO_MAX_SAMPLES 1000

/* Checks an inventory body. Returns 0 (n_gpus set), or 400 (unknown field,
 * wrong type) or 422 (impossible: unknown model, mixed models, too many
 * GPUs) with a message naming the field. */
int agentproto_inventory(json_t *b, const struct allot_catalog *cat, int *n_gpus, char *err,
                         size_t errlen);

/* The RDMA virtual functions an inventory registers (the sum of its
 * rdma[].vfs, at most ALLOT_MAX_RDMA_VFS): the node's VF capacity. */
int agentproto_rdma_vfs(const json_t *inv);

/* Checks a heartbeat body (NULL: an empty one). Returns 0 with *out filled,
 * or 400 with a message naming the field. */
int agentproto_heartbeat(json_t *b, struct hb_body *out, char *err, size_t errlen);

#endif

/*
 * The node sets of a cluster (struct allot_nodeset, allot_cluster_nodeset):
 * one immutable object per distinct set, found again through an index by
 * content hash, all freed with the cluster. Private to liballot-core.
 */
#ifndef ALLOT_CORE_NODESET_INT_H
#define ALLOT_CORE_NODESET_INT_H

#include "allot/cluster.h"

#include <stddef.h>
#include <stdint.h>

struct nodesets {
    struct allot_nodeset **v; /* owned: every set made, each one allocation */
    size_t n, cap;
    int32_t *tab;   /* owned: open addressing over v by hash; -1 empty */
    size_t tab_cap; /* 0 or a power of two, at least 2n */
};

/* The set of n_nodes' indices idx (n of them, any order, repeats
 * allowed), or all but those when exclude: see allot_cluster_nodeset. */
const struct allot_nodeset *nodesets_intern(struct nodesets *ns, int n_nodes, bool exclude,
                                            const int32_t *idx, int n, int *rc);
void nodesets_free(struct nodesets *ns);

#endif

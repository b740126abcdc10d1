/*
 * Cluster descriptions: a JSON file that lists a cluster's nodes (one entry
 * per node, or a group entry that expands to many identically configured
 * nodes), parsed into a struct allot_cluster, and a cluster written back in
 * the same format. The format is documented in docs/cluster-description.md.
 *
 * The parser is strict: unknown fields, wrong JSON types, out-of-range
 * numbers and unknown names are errors whose message names the entry (by
 * index in "nodes" and by name) and the field, so a typo fails loudly
 * instead of silently producing a different cluster. Descriptions may come
 * from operators or other programs, so every size is bounded (the limits
 * below).
 *
 * No I/O: callers (allot-sim, allotd) read the file and hand in a buffer.
 * Both functions are re-entrant; they use jansson, whose allocations go
 * through allot_malloc() so that fault-injection tests reach them.
 */
#ifndef ALLOT_CLUSTERDESC_H
#define ALLOT_CLUSTERDESC_H

#include "allot/catalog.h"
#include "allot/cluster.h"

#include <stddef.h>

#define ALLOT_CLUSTERDESC_VERSION     1
#define ALLOT_CLUSTERDESC_MAX_CPU     1000000000LL          /* cpu_milli: a million cores */
#define ALLOT_CLUSTERDESC_MAX_MEM     (1LL << 40)           /* memory_mib: 1 EiB */
#define ALLOT_CLUSTERDESC_MAX_COUNT   100000                /* nodes in one group entry */
#define ALLOT_CLUSTERDESC_MAX_NODES   1000000               /* nodes in a description */
#define ALLOT_CLUSTERDESC_MAX_RACK    1000000               /* highest rack id */
#define ALLOT_CLUSTERDESC_NAME_MAX    253                   /* node name length */
#define ALLOT_CLUSTERDESC_MAX_LABELS  64                    /* labels per node */
#define ALLOT_CLUSTERDESC_LABEL_KEY   ALLOT_LABEL_KEY_MAX   /* label key length */
#define ALLOT_CLUSTERDESC_LABEL_VALUE ALLOT_LABEL_VALUE_MAX /* label value length */

/*
 * Parses a cluster description.
 *   cat     IN  GPU catalog that model names resolve against (borrowed; it
 *               must outlive the returned cluster).
 *   json    IN  the description's text, `len` bytes; need not be
 *               NUL-terminated.
 *   err     OUT on failure, a NUL-terminated message naming the entry and
 *               field (truncated to `errlen` bytes); set to "" on success.
 *               May be NULL when errlen is 0.
 * Returns a new cluster with class flags 0 (see allot_cluster_new), nodes
 * in file order (a group's nodes in name order), ranks equal to the node
 * indices and draining nodes already drained; the caller frees it with
 * allot_cluster_free(). Returns NULL on any error, including "out of
 * memory", having freed everything it allocated.
 */
struct allot_cluster *allot_clusterdesc_parse(const struct allot_catalog *cat, const char *json,
                                              size_t len, char *err, size_t errlen);

/*
 * Writes the description of cluster `c`: every node as one entry (no groups,
 * no defaults), in node-index order, with its capacities (not what is free),
 * GPU mode, NVLink island size, rack, labels and state. Parsing the result
 * over the same catalog gives a cluster with the same nodes.
 *   out     OUT on success, the text (NUL-terminated, allocated with
 *               allot_malloc: the caller frees it with allot_free()); NULL
 *               on failure.
 *   len     OUT on success, strlen(*out); 0 on failure.
 * Returns 0; ALLOT_ENOMEM; ALLOT_EINVAL when a node cannot be described
 * (state lost, a name or label that the parser would reject, GPUs in mixed
 * modes or islands that no island_size yields); ALLOT_ERANGE when a number
 * exceeds the limits above.
 */
int allot_clusterdesc_dump(const struct allot_cluster *c, char **out, size_t *len);

#endif

/*
 * An openb trace converted for the scheduling core, the input of the fill
 * experiment (fill.h): the openb node and pod lists as read (openb.h),
 * the GPU nodes as catalog node specs, the pods as allot_task shapes in
 * file order, and the typical-task mix of the original trace (frag.h),
 * which the fgd policy and the fragmentation figures use.
 *
 * A trace is built once and then only read: the workload generator
 * (fill_workload.h), the fill runs (fill_run.h) and the offline packer
 * (offline.h) borrow it, also from forked worker processes.
 */
#ifndef ALLOT_SIM_FILL_TRACE_H
#define ALLOT_SIM_FILL_TRACE_H

#include "allot/cluster.h"
#include "allot/frag.h"
#include "openb.h"

#include <stddef.h>
#include <stdint.h>

#define SIM_FILL_COVERAGE 0.95 /* typical tasks cover >= 95 % of the trace's pods */

/* A trace converted for the core. Strings point into the owned openb lists. */
struct sim_fill_trace {
    struct allot_catalog *cat;     /* owned */
    struct openb_nodes onodes;     /* owned: the node list as read */
    struct openb_pods opods;       /* owned: the pod list as read */
    size_t n_nodes;                /* GPU nodes kept (CPU-only nodes skipped) */
    struct allot_node_spec *nodes; /* owned, n_nodes entries; names borrowed from onodes */
    size_t n_tasks;                /* == opods.n */
    struct allot_task *tasks;      /* owned, n_tasks entries, in file order */
    int64_t gpus;                  /* GPUs over the kept nodes */
    int64_t request_milli;         /* GPU milli the whole trace asks for */
    struct allot_frag_mix mix;     /* owned: typical tasks of the original trace */
    char workload[128];            /* pod file name without folder and ".csv" */
};

/*
 * Converts parsed openb lists into `*out` (OUT, overwritten), taking over
 * both lists (they are left empty). `nodes_file`/`pods_file` (IN) name the
 * files in messages. Nodes with no GPU are skipped; a node model or a
 * gpu_spec entry that the GPU catalog does not know, more GPUs on a node or
 * pod than the core supports, or no GPU node at all is an error. Returns 0,
 * ALLOT_EINVAL with "FILE:LINE: what" in `err`, or ALLOT_ENOMEM. On failure
 * everything taken over is freed and *out is empty.
 */
int sim_fill_trace_from_lists(struct sim_fill_trace *out, struct openb_nodes *nodes,
                              struct openb_pods *pods, const char *nodes_file,
                              const char *pods_file, char *err, size_t errlen);

/* Reads both files with the strict openb reader, then converts (above).
 * Returns 0, ALLOT_EIO, ALLOT_EINVAL (message "FILE:LINE: ...") or ALLOT_ENOMEM. */
int sim_fill_trace_load(struct sim_fill_trace *out, const char *nodes_path, const char *pods_path,
                        char *err, size_t errlen);

/* Frees what the trace owns and leaves it empty; accepts NULL. */
void sim_fill_trace_free(struct sim_fill_trace *t);

#endif

/*
 * Slurm's own history for allot-sim replay (docs/planning.md): the
 * accounting export of `sacct -P` (pipe-separated, a header line naming
 * the columns) read into a replay trace (replay.h), and the node list of
 * `scontrol show nodes -o` (one node a line, Key=Value fields) read into
 * node groups.
 *
 * sacct: columns matched by name (JobID, Account, Submit, Start, End,
 * State and AllocTRES or ReqTRES are required; QOS, when present, names
 * the job's priority class; others are ignored). Steps (123.batch, 123.0)
 * are skipped; array tasks (123_4) and heterogeneous components (123+1)
 * are jobs. A job counts when it started and ended (COMPLETED, FAILED,
 * TIMEOUT, CANCELLED with a start, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY,
 * BOOT_FAIL, DEADLINE, REQUEUED); never-started jobs (no Start, or
 * CANCELLED with Start = End and no AllocTRES, as Slurm records a job
 * cancelled while pending) and still-running jobs are counted and skipped. GPUs: gres/gpu of
 * AllocTRES (ReqTRES when AllocTRES is empty), else the sum of its gres/gpu:MODEL entries. Times
 * are YYYY-MM-DDTHH:MM:SS in the local time of the export, turned into UTC by subtracting
 * `tz_offset_s`.
 *
 * Strict: a malformed line stops the read with "NAME:LINE: what is wrong".
 * Pure parsing on memory buffers (the file readers wrap them); no globals.
 * Callers: replay_cli.c, the fuzz target tests/fuzz/fuzz_sacct.c.
 */
#ifndef ALLOT_SIM_SLURM_H
#define ALLOT_SIM_SLURM_H

#include "replay.h"

#include <stddef.h>
#include <stdint.h>

#define SLURM_MAX_FILE     (1u << 30) /* bytes of an export (1 GiB) */
#define SLURM_MAX_LINE     65536      /* bytes of one line */
#define SLURM_MAX_GPUS     100000     /* GPUs of one job or node entry */
#define SLURM_MAX_TZ_S     (14 * 3600)
#define SLURM_MAX_DURATION 1000000000 /* seconds of one job (about 31 years) */

/* What the sacct reader counted besides the jobs it kept. */
struct slurm_sacct_counts {
    size_t lines;         /* data lines */
    size_t steps;         /* job steps skipped */
    size_t never_started; /* pending, or cancelled before starting */
    size_t running;       /* started, not ended */
    size_t jobs;          /* jobs kept in the trace */
};

/*
 * Parses the sacct export in buf[0..len) (IN, borrowed; `name` in messages)
 * and appends its jobs to *tr (IN/OUT; tenants = accounts, priority
 * classes = QOS names). `tz_offset_s` is the export's offset from UTC
 * (seconds east, |offset| <= 14 h). *counts (OUT) may be NULL. Returns 0,
 * ALLOT_EINVAL ("NAME:LINE: ...") or ALLOT_ENOMEM with a message in err.
 */
int slurm_parse_sacct(const char *buf, size_t len, const char *name, int64_t tz_offset_s,
                      struct replay_trace *tr, struct slurm_sacct_counts *counts, char *err,
                      size_t errlen);

/* The same on the file at `path` (ALLOT_EIO when it cannot be read). */
int slurm_read_sacct(const char *path, int64_t tz_offset_s, struct replay_trace *tr,
                     struct slurm_sacct_counts *counts, char *err, size_t errlen);

/*
 * Parses `scontrol show nodes -o` output in buf[0..len) into node groups
 * (*groups OUT: a new array, allot_free; *n OUT), one group per distinct
 * (model, GPUs, CPUTot, RealMemory). A Gres model (gpu:a100:4) is looked up
 * in `cat` by name or alias after dropping an "nvidia_"/"tesla_" prefix and
 * writing '_' as '-' (a100_80gb -> A100-80GB); `gpu_model` (a catalog name,
 * or NULL) is used for untyped GPUs (gpu:4) and models the catalog does not
 * know. Nodes without GPUs are left out (*cpu_only). Returns 0, ALLOT_EINVAL
 * ("NAME:LINE: ...") or ALLOT_ENOMEM with a message in err.
 */
int slurm_parse_nodes(const char *buf, size_t len, const char *name,
                      const struct allot_catalog *cat, const char *gpu_model,
                      struct replay_node_group **groups, int *n, size_t *cpu_only, char *err,
                      size_t errlen);

/* The same on the file at `path`. */
int slurm_read_nodes(const char *path, const struct allot_catalog *cat, const char *gpu_model,
                     struct replay_node_group **groups, int *n, size_t *cpu_only, char *err,
                     size_t errlen);

/* Parses a --tz value: "UTC", "Z" or [+-]HH:MM into seconds east of UTC.
 * Returns 0 or ALLOT_EINVAL. */
int slurm_parse_tz(const char *s, int64_t *offset_s);

#endif

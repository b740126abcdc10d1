/*
 * Strict reader for the Alibaba "openb" trace files (cluster-trace-gpu-v2023,
 * the FGD paper's benchmark; docs/benchmarks.md, "openb fill"): the node list
 * (`sn,cpu_milli,memory_mib,gpu,model`) and the pod lists in their three
 * shapes (full, "nomem" without memory_mib, "multigpu" with only the first
 * five columns).
 *
 * Columns are matched by name, so the shape is detected from the header and
 * column order does not matter; an unknown or repeated column and a missing
 * required one are errors that name the column. Every row is validated; the
 * first bad one stops the read with ALLOT_EINVAL and a `FILE:LINE: what is
 * wrong` message. Lines end in LF or CRLF, the last one may lack its newline,
 * quoted fields, NUL and other control bytes, blank lines and lines over
 * OPENB_MAX_LINE bytes are rejected, and numbers are range-checked (no
 * overflow on hostile input).
 *
 * A parsed list owns one text block that all its strings point into: the
 * strings live until the list is freed and must not be freed one by one.
 * Lists are plain values owned by the caller; nothing here is shared, so
 * distinct lists may be used from distinct threads.
 *
 * Called by the simulator's trace loaders and by the benchmark drivers.
 */
#ifndef ALLOT_SIM_OPENB_H
#define ALLOT_SIM_OPENB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OPENB_MAX_LINE      65536        /* bytes per line, newline excluded */
#define OPENB_MAX_FILE      (1u << 28)   /* bytes per file (256 MiB) */
#define OPENB_MAX_GPUS      64           /* GPUs per node and per pod */
#define OPENB_MILLI_PER_GPU 1000         /* gpu_milli of one whole GPU */
#define OPENB_MAX_CPU_MILLI 1000000000LL /* one million cores */
#define OPENB_MAX_MEM_MIB   (1LL << 32)  /* 4 PiB */
#define OPENB_MAX_TIME      (1LL << 40)  /* seconds, ~35,000 years */

/* One node of a node list. Strings point into the owning list's storage. */
struct openb_node {
    const char *name;   /* column `sn`; non-empty, unique, UTF-8, no space */
    int64_t cpu_milli;  /* 0..OPENB_MAX_CPU_MILLI */
    int64_t memory_mib; /* 0..OPENB_MAX_MEM_MIB */
    int gpu;            /* number of GPUs, 0..OPENB_MAX_GPUS */
    const char *model;  /* GPU model; "" exactly when gpu == 0 */
};

/* One pod of a pod list. Strings point into the owning list's storage;
 * columns absent from the file read as "" (strings) or -1 (numbers). */
struct openb_pod {
    const char *name;       /* non-empty, unique, UTF-8, no space */
    int64_t cpu_milli;      /* 0..OPENB_MAX_CPU_MILLI */
    int64_t memory_mib;     /* 0..OPENB_MAX_MEM_MIB; -1 when the file has no memory_mib */
    int num_gpu;            /* 0..OPENB_MAX_GPUS */
    int gpu_milli;          /* per GPU: 0 when num_gpu == 0, 1..1000 when num_gpu == 1,
                               1000 when num_gpu > 1 */
    const char *gpu_spec;   /* allowed models joined by '|'; "" = any model */
    const char *qos;        /* e.g. "LS", "BE" (free text, not interpreted) */
    const char *phase;      /* column pod_phase, e.g. "Running" (free text) */
    int64_t creation_time;  /* seconds; -1 when absent or empty */
    int64_t deletion_time;  /* seconds, >= creation_time; -1 when absent or empty */
    int64_t scheduled_time; /* seconds, >= creation_time; -1 when absent or empty */
};

/* A node list. Zero-initialise before use; free with openb_nodes_free(). */
struct openb_nodes {
    size_t n;             /* number of nodes, >= 1 after a successful read */
    struct openb_node *v; /* owned array of n nodes, in file order */
    char *text;           /* owned storage the nodes' strings point into */
};

/* A pod list. Zero-initialise before use; free with openb_pods_free(). */
struct openb_pods {
    size_t n;            /* number of pods, >= 1 after a successful read */
    struct openb_pod *v; /* owned array of n pods, in file order */
    bool has_memory;     /* the file has a memory_mib column */
    bool has_spec;       /* the file has a gpu_spec column */
    bool has_times;      /* the file has creation/deletion/scheduled_time columns */
    char *text;          /* owned storage the pods' strings point into */
};

/*
 * Reads the node list at `path` into `*out` (OUT; overwritten, so it must not
 * hold a live list). Returns 0; ALLOT_EIO when the file cannot be read (err:
 * "PATH: <strerror>"); ALLOT_EINVAL on malformed content (err: "PATH:LINE:
 * what is wrong", or "PATH: what is wrong" for whole-file problems);
 * ALLOT_ENOMEM. On failure *out is left empty (nothing to free). `err` (OUT,
 * may be NULL when errlen is 0) receives a NUL-terminated message, truncated
 * to errlen bytes.
 */
int openb_read_nodes(const char *path, struct openb_nodes *out, char *err, size_t errlen);

/*
 * Same as openb_read_nodes() on the `len` bytes at `buf` (IN, borrowed, not
 * NUL-terminated, may contain any bytes), which are copied; `name` (IN) is
 * the file name used in messages.
 */
int openb_parse_nodes(const char *buf, size_t len, const char *name, struct openb_nodes *out,
                      char *err, size_t errlen);

/*
 * Reads the pod list at `path` into `*out`, detecting the full, nomem and
 * multigpu shapes (and any other set of known columns that includes name,
 * cpu_milli, num_gpu and gpu_milli) from the header. Pod names must be
 * unique. Returns and reports errors as openb_read_nodes().
 */
int openb_read_pods(const char *path, struct openb_pods *out, char *err, size_t errlen);

/* Same as openb_read_pods() on a buffer; see openb_parse_nodes(). */
int openb_parse_pods(const char *buf, size_t len, const char *name, struct openb_pods *out,
                     char *err, size_t errlen);

/* Frees what `l` owns and leaves it empty; accepts NULL and an empty list. */
void openb_nodes_free(struct openb_nodes *l);

/* Frees what `l` owns and leaves it empty; accepts NULL and an empty list. */
void openb_pods_free(struct openb_pods *l);

/*
 * True when a pod with GPU spec `spec` (IN: models joined by '|', "" = any)
 * may run on a GPU of model `model` (IN). Names are compared exactly.
 */
bool openb_spec_allows(const char *spec, const char *model);

#endif

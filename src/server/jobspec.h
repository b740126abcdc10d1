/*
 * Job requests of the allotd API: strict validation of a submitted body
 * and its translation into liballot-core's job spec. The same function
 * checks a POST /v1/jobs body (HTTP worker) and turns a stored spec back
 * into a core job (scheduling loop), so both agree on every field.
 */
#ifndef ALLOT_SERVER_JOBSPEC_H
#define ALLOT_SERVER_JOBSPEC_H

#include "allot/catalog.h"
#include "allot/cluster.h"

#include <jansson.h>

/* Job arrays ("0-99%10", "1,3,5-11:2"): indices 0..JOBSPEC_ARRAY_MAX-1,
 * at most JOBSPEC_ARRAY_MAX members. Dependencies ("afterok:12:13,
 * afterany:14"): at most JOBSPEC_DEPS_MAX job ids, all of which must hold. */
#define JOBSPEC_ARRAY_MAX 10000
#define JOBSPEC_DEPS_MAX  64
/* "command", "env", "gpu_models" and "labels": at most this many entries,
 * and this many bytes of text (keys and values) each; a job's stored spec
 * times its array's members, at most JOBSPEC_STORED_MAX bytes */
#define JOBSPEC_STRINGS_MAX       4096
#define JOBSPEC_STRINGS_BYTES_MAX (128 * 1024)
#define JOBSPEC_STORED_MAX        (64 * 1024 * 1024)
/* "script": a batch script sent with the job (sbatch job.sh), at most
 * this many bytes: it reaches the node as one argument of its command,
 * and Linux takes at most 128 KiB per argument */
#define JOBSPEC_SCRIPT_MAX (64 * 1024)
/* "begin_time": Unix seconds up to the end of year 9999 */
#define JOBSPEC_BEGIN_MAX INT64_C(253402300799)

enum jobdep_kind {
    JOBDEP_AFTEROK = 0, /* after the job succeeded */
    JOBDEP_AFTERANY,    /* after the job ended, however */
    JOBDEP_AFTERNOTOK,  /* after the job failed, was cancelled or lost */
};

struct jobdep {
    int64_t id;
    int kind;       /* enum jobdep_kind */
    int index;      /* "ID_INDEX": the member of array ID with that index alone; -1: job ID
                     * (an array's first id: every member) */
    int64_t member; /* with index: that member's own id once looked up (the gate), else 0 */
};

struct jobspec {
    const char *name;     /* borrowed from the JSON */
    const char *tenant;   /* borrowed */
    const char *priority; /* borrowed; NULL = default class */
    int qos;              /* enum allot_qos; burstable unless the body says */
    int n_tasks;
    struct allot_task task;
    int64_t limit_s;
    int warn_sig; /* sent warn_before_s before the time limit ("signal"); 0: none */
    int64_t warn_before_s;
    bool checkpointable;
    int64_t checkpoint_s; /* it saves its work this often (s); 0 = not said */
    bool requeue;         /* goes back to pending when its node is lost (default) */
    bool hold;            /* submitted held: it waits for `allot release` */
    int64_t begin_s;      /* not to start before this time (Unix s; sbatch --begin); 0: any time */
    const char *array;    /* borrowed; NULL = not an array */
    int array_count;      /* members of the array (0 = not an array) */
    int array_throttle;   /* at most this many members in the queue at once; 0 = all */
    int n_deps;
    struct jobdep deps[JOBSPEC_DEPS_MAX];
    json_t *nodelist;   /* borrowed: "nodelist", the node names it may use; NULL = any */
    json_t *exclude;    /* borrowed: "exclude_nodes", node names it may not use; NULL = none */
    const char *script; /* borrowed: the batch script it runs ("#!..."), its "command" the
                           script's arguments; NULL = none */
};

/* Checks body `b` (borrowed) and fills *out. Returns 0, or 400 (unknown
 * field, wrong type: message names the field) or 422 (valid JSON that
 * asks for something impossible) with a message in err. */
int jobspec_parse(json_t *b, const struct allot_catalog *cat, struct jobspec *out, char *err,
                  size_t errlen);

/* "signal": "SIG[@SECONDS]" (sbatch --signal): SIG to the job's processes
 * SECONDS (default 60) before its time limit `limit` (s), which it needs,
 * and which must be longer. Fills *sig and *before; returns 0, or 422 with
 * a message in err. The one check of a warning against a limit (a
 * submission's, and a changed limit's: api_limit.c). */
int jobspec_warning(const char *s, int64_t limit, int *sig, int64_t *before, char *err,
                    size_t errlen);

/* Parses an array expression into its indices, ascending, into idx
 * (JOBSPEC_ARRAY_MAX entries; NULL to only check and count) and the
 * throttle (0 = none). Returns the number of members, or -1 with a
 * message in err. */
int jobspec_array_parse(const char *s, int *idx, int *throttle, char *err, size_t errlen);

/* Parses a dependency expression into deps[JOBSPEC_DEPS_MAX]. Returns the
 * number of dependencies, or -1 with a message in err. */
int jobspec_deps_parse(const char *s, struct jobdep *deps, char *err, size_t errlen);

/* The spec as a node runs it (the desired state's "spec"): `spec` itself
 * (its reference taken over), or for a job with a "script" a copy whose
 * "command" writes the script into the task's temporary folder and runs
 * it with the job's arguments (its "#!" line picks the interpreter), so
 * that a node needs no shared file system for it. NULL stays NULL; NULL
 * on allocation failure. */
json_t *jobspec_for_node(json_t *spec);

/* "afterok", "afterany", "afternotok". */
const char *jobdep_kind_name(int kind);

#endif

/*
 * Strict reader for the Microsoft Philly trace digest used by the replay
 * experiment (docs/benchmarks.md, "Philly multi-tenant replay"): the job list
 * (`timestamp,duration,num_gpus,gpu_time,cluster`, one job per row) and the
 * virtual-cluster sizes (`vc,node num`, size in 8-GPU nodes).
 *
 * Columns are matched by name (order free); an unknown, repeated or missing
 * column is an error naming it. Every row is validated; the first bad one
 * stops the read with ALLOT_EINVAL and a `FILE:LINE: what is wrong` message.
 * Lines end in LF or CRLF; the last one may lack its newline. Blank lines are
 * errors except at the very end of the file (the published digest ends with
 * one). Quotes, NUL and other control bytes, and lines longer than
 * PHILLY_MAX_LINE are rejected.
 *
 * Values: `timestamp` is `YYYY-MM-DD HH:MM:SS` in UTC (converted here to
 * seconds since 1970-01-01 from the civil date; no libc time zone code);
 * `duration` and `gpu_time` are non-negative decimals (`66`, `66.0`; no
 * sign, no exponent); `num_gpus` a non-negative integer; `gpu_time` must
 * equal duration x num_gpus within half a second per GPU (catches swapped
 * columns); `cluster` (the VC) is 1..PHILLY_MAX_NAME bytes of [A-Za-z0-9_.-].
 * Jobs with 0 GPUs or 0 duration are read as they are: dropping them is the
 * caller's decision.
 *
 * A parsed list owns one text block its strings point into: they live until
 * the list is freed. Lists are plain values owned by the caller.
 * Called by the replay experiment (replay.c) and its tests.
 */
#ifndef ALLOT_SIM_PHILLY_H
#define ALLOT_SIM_PHILLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PHILLY_MAX_LINE     4096               /* bytes per line, newline excluded */
#define PHILLY_MAX_FILE     (1u << 28)         /* bytes per file (256 MiB) */
#define PHILLY_MAX_GPUS     4096               /* GPUs of one job */
#define PHILLY_MAX_DURATION (100LL * 31622400) /* seconds: a century */
#define PHILLY_MAX_NAME     63                 /* bytes of a VC name */
#define PHILLY_MAX_NODES    100000             /* nodes of one VC */

/* One job. */
struct philly_job {
    int64_t submit;   /* seconds since 1970-01-01 00:00:00 UTC */
    int64_t duration; /* seconds, rounded to the nearest, 0..PHILLY_MAX_DURATION */
    int num_gpus;     /* 0..PHILLY_MAX_GPUS */
    int vc;           /* index into the list's vcs[] */
    uint32_t line;    /* line of the row in the file (for messages) */
};

/* A job list. Zero-initialise before use; free with philly_jobs_free(). */
struct philly_jobs {
    size_t n;             /* jobs, >= 1 after a successful read */
    struct philly_job *v; /* owned array of n jobs, in file order */
    int n_vcs;            /* distinct VC names */
    const char **vcs;     /* owned array of n_vcs names (pointing into text), in
                             order of first appearance */
    char *text;           /* owned storage the names point into */
};

/* One virtual cluster of a VC list. */
struct philly_vc {
    const char *name; /* points into the owning list's text; unique */
    int nodes;        /* 1..PHILLY_MAX_NODES 8-GPU nodes */
};

/* A VC list. Zero-initialise before use; free with philly_vcs_free(). */
struct philly_vcs {
    size_t n;            /* VCs, >= 1 after a successful read */
    struct philly_vc *v; /* owned array, in file order */
    char *text;          /* owned storage the names point into */
};

/*
 * Reads the job list at `path` into `*out` (OUT; overwritten, so it must not
 * hold a live list). Returns 0; ALLOT_EIO when the file cannot be read (err:
 * "PATH: <strerror>"); ALLOT_EINVAL on malformed content (err: "PATH:LINE:
 * what is wrong", or "PATH: what is wrong" for whole-file problems);
 * ALLOT_ENOMEM. On failure *out is left empty. `err` (OUT, may be NULL when
 * errlen is 0) receives a NUL-terminated message.
 */
int philly_read_jobs(const char *path, struct philly_jobs *out, char *err, size_t errlen);

/* Same on the `len` bytes at `buf` (IN, borrowed, copied, any bytes); `name`
 * (IN) is the file name used in messages. */
int philly_parse_jobs(const char *buf, size_t len, const char *name, struct philly_jobs *out,
                      char *err, size_t errlen);

/* Reads the VC list (`vc,node num`) at `path`; VC names must be unique.
 * Returns and reports errors as philly_read_jobs(). */
int philly_read_vcs(const char *path, struct philly_vcs *out, char *err, size_t errlen);

/* Same on a buffer; see philly_parse_jobs(). */
int philly_parse_vcs(const char *buf, size_t len, const char *name, struct philly_vcs *out,
                     char *err, size_t errlen);

/* Free what the list owns and leave it empty; accept NULL and empty lists. */
void philly_jobs_free(struct philly_jobs *l);
void philly_vcs_free(struct philly_vcs *l);

/* Days from 1970-01-01 to the proleptic Gregorian date y-m-d (m 1..12,
 * d 1..31, not checked here); negative before 1970. */
int64_t philly_days_from_civil(int64_t y, int m, int d);

/*
 * Parses `s` (IN) as `YYYY-MM-DD` (midnight) or `YYYY-MM-DD HH:MM:SS`, UTC,
 * into seconds since 1970-01-01 (*out, OUT). Year 1970..9999; the date must
 * exist (leap years honoured); seconds 0..59. Returns 0 or ALLOT_EINVAL.
 */
int philly_parse_time(const char *s, int64_t *out);

/* Writes `t` (seconds since 1970, >= 0) as `YYYY-MM-DD HH:MM:SS` into buf
 * (size >= 20 for the whole text; truncated otherwise). Returns buf. */
char *philly_format_time(int64_t t, char *buf, size_t size);

#endif

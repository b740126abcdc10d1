/*
 * Metering (meter.c, meter_collect.c, meter_time.c): turns the store's runs (when a job held what)
 * and the agents' samples (what it measured) into usage rows per hour, tenant, user, GPU model,
 * item and reserved/borrowed; keeps the hourly roll-ups in the store up to date (a thread); answers
 * /v1/usage. docs/metering.md describes the rules.
 */
#ifndef ALLOT_SERVER_METER_H
#define ALLOT_SERVER_METER_H

#include "server.h"

#include "allot/catalog.h"
#include "allot/store.h"

#include <jansson.h>
#include <stdio.h>

struct meter_bill; /* one job task's GPU time in one row (meter_collect.c) */

/* Rows being accumulated, unique by key. `job` is set only when the rows
 * are kept per job (0 in roll-ups). Every pointer is owned by the acc. */
struct meter_acc {
    json_t *index; /* key text -> row index */
    struct allot_store_usage *rows;
    int64_t *job;  /* per row */
    int64_t *jobs; /* per row: jobs seen (counted once per row and job) */
    json_t *seen;  /* "row|job" keys already counted */
    size_t n, cap;
    bool per_job;
    /* per row, job and task: what measured billing needs, summed into the
     * rows' gpu_bill_ppm_s by meter_collect */
    json_t *bill_index; /* "row|job|task" -> index into bills */
    struct meter_bill *bills;
    size_t n_bills, cap_bills;
};

#define METER_HOUR 3600 /* s */
/* ms: consecutive samples further apart are never differenced (three of
 * the agent's interval when it says one, which is at most 5 minutes); so
 * also how far before a window samples are read */
#define METER_SAMPLE_GAP 900000
/* The longest time sample x may speak for (its agent's three intervals,
 * within METER_SAMPLE_GAP). */
#define METER_SAMPLE_SPAN(x)                                                                       \
    ((x)->interval_ms > 0 && 3 * (x)->interval_ms < METER_SAMPLE_GAP ? 3 * (x)->interval_ms        \
                                                                     : METER_SAMPLE_GAP)

void meter_acc_init(struct meter_acc *a, bool per_job);
void meter_acc_free(struct meter_acc *a);

/* The row of a in hour `hour` (unix seconds, a multiple of METER_HOUR) with
 * these keys (job counts only when a->per_job), created zeroed (measured
 * fields -1) when new. The strings are copied. Returns the row, owned by a
 * and valid until its next call, or NULL when out of memory. */
struct allot_store_usage *meter_acc_row(struct meter_acc *a, int64_t hour, const char *tenant,
                                        const char *user, const char *model, const char *item,
                                        bool borrowed, int64_t job);

/* The GPU share, item and model of one task of a stored placement. ppm:
 * GPU-equivalents x 1e6 (whole GPUs 1e6 each, a MIG slice its compute
 * slices over the GPU's, a fraction the larger of its gpu_milli and its
 * share of the GPU's memory). item: "gpu", "mig:PROFILE", "fraction" or
 * "cpu". */
void meter_task_share(const struct allot_catalog *cat, json_t *task, int64_t *ppm, char *item,
                      size_t itemlen, char *model, size_t modellen);

/*
 * Adds to `a` what runs[] held and samples[] measured within [from, to)
 * (unix seconds), split per hour. A run still going counts until `now`.
 * samples[] must be ordered by job, task and time and may start before
 * `from` (earlier ones only serve as the base of the first difference).
 * Then sets each row's gpu_bill_ppm_s: the GPU time of each of its job
 * tasks scaled by that task's own utilisation in the row (relative to a
 * fraction's compute share, at most all of it), or all of it when the
 * task has no utilisation there (docs/billing.md). Call it once per acc.
 * Returns 0 or ALLOT_ENOMEM.
 */
int meter_collect(const struct allot_catalog *cat, const struct allot_store_run *runs,
                  size_t n_runs, const struct allot_store_sample *smp, size_t n_smp, int64_t from,
                  int64_t to, int64_t now, struct meter_acc *a);

/* Adds to `a` what runs[] held within [from, to) (unix seconds), split
 * per hour; no samples (meter_collect without them). Returns 0 or
 * ALLOT_ENOMEM. */
int meter_collect_runs(const struct allot_catalog *cat, const struct allot_store_run *runs,
                       size_t n_runs, int64_t from, int64_t to, int64_t now, struct meter_acc *a);

/* Starts / stops the roll-up thread. */
bool meter_start(struct server *s, char *err, size_t errlen);
void meter_stop(struct server *s);
/* Frees the per-tenant network totals /metrics keeps (once nothing serves
 * /metrics any more). */
void meter_net_free(void);
/* Runs one roll-up pass now (also what the thread does); 0 or ALLOT_E*. */
int meter_rollup(struct server *s, int64_t now);
/* Samples that speak for the time from at_ms (unix ms) on were just stored
 * (inside the heartbeat's write): when their hour is already final, the
 * roll-up goes back to it, but never into a month before now's (invoiced
 * months stay as they were). 0 or ALLOT_E*. */
int meter_reopen(struct allot_store *st, int64_t at_ms, int64_t now);
/* ... and, in the same write, keeps a roll-up pass that may have read
 * the store before them from making their hour final. */
void meter_note_samples(struct server *s, int64_t at_ms);

/* The start of the hour (UTC) holding t (unix seconds), also for t < 0. */
int64_t meter_floor_hour(int64_t t);
/* Parses a time argument: unix seconds, YYYY-MM-DD or YYYY-MM (UTC). */
bool meter_parse_time(const char *s, int64_t *out);
/* A day, YYYY-MM-DD (UTC) and nothing else, into its first second. */
bool meter_parse_date(const char *s, int64_t *out);
/* [start, end) of month "YYYY-MM" (UTC). */
bool meter_parse_month(const char *s, int64_t *start, int64_t *end);
/* The month (UTC) holding time t: [*start, *end) in unix seconds. */
void meter_month_of(int64_t t, int64_t *start, int64_t *end);

/* Usage rows for [from, to) (whole hours) seen by the caller: the
 * roll-ups, or per job straight from runs and samples (per_job). `tenant`
 * ("" = all) limits them to a subtree. `jobs` (may be NULL; not with
 * per_job) gets the allocation rows per job, to count jobs by. Both are
 * initialised here and freed by the caller. Returns 0 or ALLOT_E*. */
int meter_query(struct req *r, int64_t from, int64_t to, const char *tenant, bool per_job,
                struct meter_acc *out, struct meter_acc *jobs);

/* For a report filtered by ?tenant= that came out empty: when `tenant`
 * is not in the tenant tree either (a typo, not a quiet tenant), replies
 * 404 and returns true. A tenant removed since keeps its reports while
 * they have rows. */
bool meter_no_tenant(struct req *r, const char *tenant, bool empty);

/* Writes the metering series of /metrics: per tenant this month's GPU
 * seconds by model, cost and budget; per GPU its health and the agents'
 * latest readings under DCGM-exporter names. */
void meter_metrics(struct server *s, FILE *f);

/* The jobs flagged idle at the last pass (new reference): [{job, tenant,
 * user, class, gpus, util_avg, idle_since, wasted_gpu_hours, preemptible}]. */
json_t *meter_idle_jobs(void);
/* The anomalies seen at the last pass (new reference): [{kind
 * (tenant-usage, job-pattern), tenant, job (or null), detail, score, since}]. */
json_t *meter_anomaly_list(void);

/* True when tenant `tenant` has spent its monthly budget and its budget
 * holds borrowing (hold_borrowed): the loop applies its quotas without
 * borrowing until the budget allows again. */
bool meter_borrow_held(const char *tenant);

/* ---- billing.c ---- */

/* The stored price book (new reference), NULL when none is set (*rc 0) or
 * on a store failure (*rc set). Its rate tables are keyed by the names of
 * cat (canonical model and profile names), also for a book stored with
 * aliases by an older allotd. */
json_t *billing_pricebook(struct allot_store *st, const struct allot_catalog *cat, int *rc);
/* Adds each tenant's billed amount of rows[0..n) (minor units) into out
 * (tenant -> integer). Returns 0 or ALLOT_ENOMEM. */
int billing_costs(const struct allot_catalog *cat, json_t *pb, const struct allot_store_usage *rows,
                  size_t n, json_t *out);

#endif

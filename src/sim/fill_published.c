/*
 * The published fill results reader (fill_published.h), on the strict CSV
 * reader: a column table of the four named columns, total_gpus and the 131
 * bucket columns "0".."130", built once per read, so an unknown or
 * repeated column is an error naming it.
 */
#include "fill_published.h"

#include "allot/common.h"
#include "csvread.h"

#include <math.h>
#include <string.h>

#define PUB_MAX_FILE (64u << 20) /* bytes */
#define PUB_MAX_LINE 16382       /* bytes per line, newline excluded */

enum {
    PC_WORKLOAD,
    PC_POLICY,
    PC_TUNE,
    PC_SEED,
    PC_GPUS,
    PC_BUCKET0,
    PC_COUNT = PC_BUCKET0 + SIM_FILL_BUCKETS
};

#define PUB_HEADER "workload,sc_policy,tune,seed,total_gpus,0,1,...,130"
#define MAX_TUNE   100.0
#define MAX_SEED   INT64_C(1000000000000000000)

static const struct csv_format pub_format = {PUB_MAX_FILE, PUB_MAX_LINE, CSV_MAX_COLS, false};

void sim_fill_published_free(struct sim_fill_published *p)
{
    if (!p)
        return;
    allot_free(p->v);
    memset(p, 0, sizeof(*p));
}

/* "06-FGD" -> "fgd"; "03-GpuClustering" -> "gpuclustering". Returns false
 * when the name does not fit. */
static bool policy_name(const char *sc, char *out, size_t outlen)
{
    const char *dash = strchr(sc, '-');
    size_t i = 0;
    const char *p = dash ? dash + 1 : sc;

    for (; *p && i + 1 < outlen; p++)
        out[i++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    out[i] = '\0';
    return *p == '\0' && i > 0;
}

/* Parses the current line of `r`, which must have `width` fields (the
 * header's), into row `row` (OUT). */
static int parse_row(struct csv_reader *r, const int *idx, size_t width,
                     struct sim_fill_pub_row *row)
{
    char qb[80], col[48];
    int64_t seed = 0;
    int rc;

    for (int b = 0; b < SIM_FILL_BUCKETS; b++)
        row->alloc[b] = NAN;
    if ((rc = csv_check_width(r, width)) < 0)
        return rc;
    if (strlen(r->f[idx[PC_WORKLOAD]]) >= sizeof(row->workload) || !*r->f[idx[PC_WORKLOAD]])
        return csv_fail(r, "workload %s is empty or longer than %zu bytes",
                        csv_quote(qb, sizeof(qb), r->f[idx[PC_WORKLOAD]]),
                        sizeof(row->workload) - 1);
    allot_strlcpy(row->workload, r->f[idx[PC_WORKLOAD]], sizeof(row->workload));
    if (!policy_name(r->f[idx[PC_POLICY]], row->policy, sizeof(row->policy)))
        return csv_fail(r, "sc_policy %s is empty or too long",
                        csv_quote(qb, sizeof(qb), r->f[idx[PC_POLICY]]));
    if ((rc = csv_decimal(r, "tune", r->f[idx[PC_TUNE]], MAX_TUNE, &row->tune)) < 0 ||
        (rc = csv_int(r, "seed", r->f[idx[PC_SEED]], MAX_SEED, 0, &seed)) < 0)
        return rc;
    row->seed = seed;
    for (int b = 0; b < SIM_FILL_BUCKETS; b++) {
        int i = idx[PC_BUCKET0 + b];

        if (i < 0 || !*r->f[i])
            continue; /* no value: NaN, as the authors' files have for some buckets */
        allot_fmt(col, sizeof(col), "column %d (arrived %d %%)", i + 1, b);
        if ((rc = csv_decimal(r, col, r->f[i], 100.0, &row->alloc[b])) < 0)
            return rc;
    }
    return 0;
}

int sim_fill_published_read(const char *path, struct sim_fill_published *out, char *err,
                            size_t errlen)
{
    static const char *const named[PC_BUCKET0] = {"workload", "sc_policy", "tune", "seed",
                                                  "total_gpus"};
    char names[SIM_FILL_BUCKETS][4];
    struct csv_col cols[PC_COUNT];
    struct csv_layout lay = {cols, PC_COUNT, PUB_HEADER, "expected columns of"};
    struct csv_reader r;
    int idx[PC_COUNT];
    size_t cap = 0, width;
    int rc;

    memset(out, 0, sizeof(*out));
    for (int k = 0; k < PC_BUCKET0; k++)
        cols[k] = (struct csv_col){named[k], k < PC_GPUS};
    for (int b = 0; b < SIM_FILL_BUCKETS; b++) {
        allot_fmt(names[b], sizeof(names[b]), "%d", b);
        cols[PC_BUCKET0 + b] = (struct csv_col){names[b], false};
    }
    rc = csv_open(&r, &pub_format, &lay, idx, path, NULL, 0, NULL, err, errlen);
    if (rc < 0)
        return rc;
    width = r.nf; /* the header's fields */
    out->v = csv_alloc_rows(&r, sizeof(*out->v), &cap);
    if (!out->v) {
        rc = ALLOT_ENOMEM;
        goto out_text;
    }
    while ((rc = csv_next(&r)) > 0) {
        if ((rc = parse_row(&r, idx, width, &out->v[out->n])) < 0)
            break;
        out->n++;
    }
out_text:
    allot_free(r.text);
    if (rc < 0)
        sim_fill_published_free(out);
    return rc < 0 ? rc : 0;
}

double sim_fill_published_unalloc(const struct sim_fill_published *p, const char *workload,
                                  const char *policy, double tune, int bucket, int *n_seeds)
{
    double s = 0;
    int k = 0;

    for (size_t i = 0; p && bucket >= 0 && bucket < SIM_FILL_BUCKETS && i < p->n; i++) {
        const struct sim_fill_pub_row *r = &p->v[i];
        if (strcmp(r->workload, workload) != 0 || strcmp(r->policy, policy) != 0 ||
            fabs(r->tune - tune) > 1e-9 || !isfinite(r->alloc[bucket]))
            continue;
        s += 100.0 - r->alloc[bucket];
        k++;
    }
    if (n_seeds)
        *n_seeds = k;
    return k ? s / k : NAN;
}

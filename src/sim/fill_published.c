/*
 * The published fill results reader (fill_published.h): a line splitter
 * at commas and strtod() for the numbers.
 */
#include "fill_published.h"

#include "allot/common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_fill_published_free(struct sim_fill_published *p)
{
    if (!p)
        return;
    allot_free(p->v);
    memset(p, 0, sizeof(*p));
}

/* Splits line (modified in place) at commas into at most max fields. */
static int split_fields(char *line, char **f, int max)
{
    int n = 0;

    for (char *p = line;;) {
        char *c = strchr(p, ',');
        if (n == max)
            return -1;
        f[n++] = p;
        if (!c)
            return n;
        *c = '\0';
        p = c + 1;
    }
}

static bool parse_double(const char *s, double *v)
{
    char *end;

    if (!*s)
        return false;
    errno = 0;
    *v = strtod(s, &end);
    return *end == '\0' && errno == 0 && isfinite(*v);
}

/* "06-FGD" -> "fgd"; "03-GpuClustering" -> "gpuclustering". */
static void policy_name(const char *sc, char *out, size_t outlen)
{
    const char *dash = strchr(sc, '-');
    size_t i = 0;

    for (const char *p = dash ? dash + 1 : sc; *p && i + 1 < outlen; p++)
        out[i++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    out[i] = '\0';
}

#define PUB_MAX_FIELDS 256
#define PUB_MAX_LINE   16384 /* bytes per line of the published CSV, with newline */

int sim_fill_published_read(const char *path, struct sim_fill_published *out, char *err,
                            size_t errlen)
{
    size_t cap = 0, lineno = 0;
    int rc = ALLOT_EINVAL, col_w = -1, col_p = -1, col_t = -1, col_s = -1, nh = 0;
    int bucket_of[PUB_MAX_FIELDS];
    char line[PUB_MAX_LINE], *f[PUB_MAX_FIELDS];
    FILE *in = fopen(path, "r");

    memset(out, 0, sizeof(*out));
    if (!in) {
        allot_fmt(err, errlen, "%s: %s", path, strerror(errno));
        return ALLOT_EIO;
    }
    while (fgets(line, sizeof(line), in)) {
        size_t len = strlen(line);
        int nf;
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        else if (!feof(in)) {
            allot_fmt(err, errlen, "%s:%zu: line longer than %d bytes", path, lineno,
                      PUB_MAX_LINE - 2);
            goto fail;
        }
        if (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        nf = split_fields(line, f, PUB_MAX_FIELDS);
        if (nf < 0) {
            allot_fmt(err, errlen, "%s:%zu: more than %d columns", path, lineno, PUB_MAX_FIELDS);
            goto fail;
        }
        if (lineno == 1) {
            nh = nf;
            for (int i = 0; i < nf; i++) {
                double b;
                bucket_of[i] = -1;
                if (!strcmp(f[i], "workload"))
                    col_w = i;
                else if (!strcmp(f[i], "sc_policy"))
                    col_p = i;
                else if (!strcmp(f[i], "tune"))
                    col_t = i;
                else if (!strcmp(f[i], "seed"))
                    col_s = i;
                else if (parse_double(f[i], &b) && b >= 0 && b < SIM_FILL_BUCKETS && b == floor(b))
                    bucket_of[i] = (int)b;
            }
            if (col_w < 0 || col_p < 0 || col_t < 0 || col_s < 0) {
                allot_fmt(err, errlen, "%s:1: header lacks one of workload, sc_policy, tune, seed",
                          path);
                goto fail;
            }
            continue;
        }
        if (nf != nh) {
            allot_fmt(err, errlen, "%s:%zu: %d columns, the header has %d", path, lineno, nf, nh);
            goto fail;
        }
        if (allot_grow((void **)&out->v, &cap, out->n + 1, sizeof(*out->v))) {
            rc = ALLOT_ENOMEM;
            allot_fmt(err, errlen, "out of memory");
            goto fail;
        }
        {
            struct sim_fill_pub_row *r = &out->v[out->n];
            double seed;
            for (int b = 0; b < SIM_FILL_BUCKETS; b++)
                r->alloc[b] = NAN;
            allot_strlcpy(r->workload, f[col_w], sizeof(r->workload));
            policy_name(f[col_p], r->policy, sizeof(r->policy));
            if (!parse_double(f[col_t], &r->tune) || !parse_double(f[col_s], &seed)) {
                allot_fmt(err, errlen, "%s:%zu: tune or seed is not a number", path, lineno);
                goto fail;
            }
            r->seed = (long)seed;
            for (int i = 0; i < nf; i++) {
                if (bucket_of[i] < 0 || !*f[i])
                    continue;
                if (!parse_double(f[i], &r->alloc[bucket_of[i]])) {
                    allot_fmt(err, errlen, "%s:%zu: column %d: \"%.32s\" is not a number", path,
                              lineno, i + 1, f[i]);
                    goto fail;
                }
            }
            out->n++;
        }
    }
    if (ferror(in)) {
        rc = ALLOT_EIO;
        allot_fmt(err, errlen, "%s: read error", path);
        goto fail;
    }
    if (lineno == 0) {
        allot_fmt(err, errlen, "%s: empty file", path);
        goto fail;
    }
    fclose(in);
    return 0;
fail:
    fclose(in);
    sim_fill_published_free(out);
    return rc;
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

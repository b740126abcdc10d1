/*
 * Implementation of philly.h: a strict reader for the Philly job digest and
 * the VC size list.
 *
 * The whole file is read into one block (the list's `text`), split in place
 * into NUL-terminated fields, and the parsed records point into it. Lines
 * are walked once. Columns are described once, in a table per file kind; the
 * header is matched against the table by name. Civil dates are converted
 * with Howard Hinnant's days_from_civil algorithm, so nothing depends on the
 * C library's time zone handling.
 */
#include "philly.h"

#include "allot/common.h"
#include "csvread.h"

#include <math.h>
#include <string.h>

/* Fields kept per line; both layouts have fewer. Kept at 8, not CSV_MAX_COLS:
 * a header whose only known name lies past field 8 is a missing header. */
#define MAX_COLS 8

enum job_col { JC_TIME, JC_DURATION, JC_GPUS, JC_GPU_TIME, JC_CLUSTER, JC_COUNT };

static const struct csv_col job_cols[JC_COUNT] = {
    [JC_TIME] = {"timestamp", true},  [JC_DURATION] = {"duration", true},
    [JC_GPUS] = {"num_gpus", true},   [JC_GPU_TIME] = {"gpu_time", true},
    [JC_CLUSTER] = {"cluster", true},
};
static const struct csv_format philly_format = {PHILLY_MAX_FILE, PHILLY_MAX_LINE, MAX_COLS, true};
static const struct csv_layout job_layout = {
    job_cols, JC_COUNT, "timestamp,duration,num_gpus,gpu_time,cluster", "expected"};

enum vc_col { VC_NAME, VC_NODES, VC_COUNT };

static const struct csv_col vc_cols[VC_COUNT] = {
    [VC_NAME] = {"vc", true}, [VC_NODES] = {"node num", true}};
static const struct csv_layout vc_layout = {vc_cols, VC_COUNT, "vc,node num", "expected"};

/* Reads exactly `n` digits at s into *v. */
static bool digits(const char *s, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        *v = *v * 10 + (s[i] - '0');
    }
    return true;
}

int64_t philly_days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int philly_parse_time(const char *s, int64_t *out)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h = 0, mi = 0, sec = 0;
    size_t len = strlen(s);

    if ((len != 10 && len != 19) || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) ||
        s[7] != '-' || !digits(s + 8, 2, &d))
        return ALLOT_EINVAL;
    if (len == 19 && (s[10] != ' ' || !digits(s + 11, 2, &h) || s[13] != ':' ||
                      !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec)))
        return ALLOT_EINVAL;
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && leap(y)) ||
        h > 23 || mi > 59 || sec > 59)
        return ALLOT_EINVAL;
    *out = philly_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
    return 0;
}

char *philly_format_time(int64_t t, char *buf, size_t size)
{
    /* civil_from_days, the inverse of philly_days_from_civil */
    int64_t z = t / 86400 + 719468, sod = t % 86400;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153, d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;

    y += m <= 2;
    allot_fmt(buf, size, "%04lld-%02lld-%02lld %02lld:%02lld:%02lld", (long long)y, (long long)m,
              (long long)d, (long long)(sod / 3600), (long long)(sod / 60 % 60),
              (long long)(sod % 60));
    return buf;
}

/* Checks a VC name: 1..PHILLY_MAX_NAME bytes of [A-Za-z0-9_.-]. */
static int check_name(struct csv_reader *r, const char *col, const char *s)
{
    char qb[80];
    size_t len = strlen(s);

    if (len == 0)
        return csv_fail(r, "%s is empty", col);
    if (len > PHILLY_MAX_NAME)
        return csv_fail(r, "%s %s longer than %d bytes", col, csv_quote(qb, sizeof(qb), s),
                        PHILLY_MAX_NAME);
    for (const char *p = s; *p; p++) {
        char c = *p;

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return csv_fail(r, "%s %s: only letters, digits, '_', '.' and '-' are allowed", col,
                            csv_quote(qb, sizeof(qb), s));
    }
    return 0;
}

/* An open-addressing set of names (values: index + 1; 0 = empty slot). */
struct name_set {
    size_t cap;
    int *slot;
    const char *const *names; /* borrowed: names by index */
};

static int set_init(struct name_set *s, size_t n, const char *const *names)
{
    s->cap = 16;
    while (s->cap < 2 * n)
        s->cap *= 2;
    s->names = names;
    s->slot = allot_calloc(s->cap, sizeof(*s->slot));
    return s->slot ? 0 : ALLOT_ENOMEM;
}

/* Returns the index of `name` or -1, with *pos the slot to fill when absent. */
static int set_find(const struct name_set *s, const char *name, size_t *pos)
{
    size_t j;

    for (j = csv_name_hash(name) & (s->cap - 1); s->slot[j]; j = (j + 1) & (s->cap - 1))
        if (strcmp(s->names[s->slot[j] - 1], name) == 0)
            return s->slot[j] - 1;
    *pos = j;
    return -1;
}

/* ---- job lists ---- */

static int job_row(struct csv_reader *r, const int *idx, struct philly_job *jb, double *gpu_time)
{
    char qb[80];
    int64_t v;
    double dur = 0;
    int rc;

    if ((rc = csv_check_width(r, JC_COUNT)) < 0)
        return rc;
    if (philly_parse_time(r->f[idx[JC_TIME]], &jb->submit) < 0)
        return csv_fail(r, "timestamp %s is not a valid \"YYYY-MM-DD HH:MM:SS\" (UTC, from 1970)",
                        csv_quote(qb, sizeof(qb), r->f[idx[JC_TIME]]));
    if (strlen(r->f[idx[JC_TIME]]) != 19)
        return csv_fail(r, "timestamp %s lacks the time of day",
                        csv_quote(qb, sizeof(qb), r->f[idx[JC_TIME]]));
    if ((rc = csv_decimal(r, "duration", r->f[idx[JC_DURATION]], (double)PHILLY_MAX_DURATION,
                          &dur)) < 0 ||
        (rc = csv_int(r, "num_gpus", r->f[idx[JC_GPUS]], PHILLY_MAX_GPUS, CSV_SIGN_FIRST, &v)) < 0)
        return rc;
    jb->num_gpus = (int)v;
    jb->duration = llround(dur);
    if ((rc = csv_decimal(r, "gpu_time", r->f[idx[JC_GPU_TIME]],
                          (double)PHILLY_MAX_DURATION * PHILLY_MAX_GPUS, gpu_time)) < 0)
        return rc;
    if (fabs(*gpu_time - dur * jb->num_gpus) > 0.5 * (jb->num_gpus > 1 ? jb->num_gpus : 1))
        return csv_fail(r, "gpu_time %s is not duration x num_gpus (%.1f)",
                        csv_quote(qb, sizeof(qb), r->f[idx[JC_GPU_TIME]]), dur * jb->num_gpus);
    return check_name(r, "cluster", r->f[idx[JC_CLUSTER]]);
}

/* Loads (see csv_open()) and parses a job list into *out (OUT), which then
 * owns the text. */
static int parse_jobs(const char *path, const char *buf, size_t len, const char *name,
                      struct philly_jobs *out, char *err, size_t errlen)
{
    struct csv_reader r;
    int idx[JC_COUNT] = {0};
    struct philly_job *v = NULL;
    const char **vcs = NULL;
    struct name_set set = {0};
    size_t n = 0, cap;
    int n_vcs = 0, rc;

    memset(out, 0, sizeof(*out));
    rc = csv_open(&r, &philly_format, &job_layout, idx, path, buf, len, name, err, errlen);
    if (rc < 0)
        return rc;
    cap = csv_rows_left(&r);
    v = allot_calloc(cap, sizeof(*v));
    /* names: at most one per row; the set borrows the array as it fills */
    vcs = allot_calloc(cap, sizeof(*vcs));
    if (!v || !vcs || set_init(&set, cap, vcs) < 0) {
        rc = csv_report(r.file, 0, err, errlen, ALLOT_ENOMEM, "out of memory");
        goto out_arrays;
    }
    while ((rc = csv_next(&r)) > 0) {
        double gpu_time = 0;
        const char *vc;
        size_t pos = 0;
        int k;

        if ((rc = job_row(&r, idx, &v[n], &gpu_time)) < 0)
            goto out_arrays;
        vc = r.f[idx[JC_CLUSTER]];
        k = set_find(&set, vc, &pos);
        if (k < 0) {
            k = n_vcs++;
            vcs[k] = vc;
            set.slot[pos] = k + 1;
        }
        v[n].vc = k;
        v[n].line = (uint32_t)r.line;
        n++;
    }
    if (rc < 0)
        goto out_arrays;
    allot_free(set.slot);
    out->n = n;
    out->v = v;
    out->n_vcs = n_vcs;
    out->vcs = vcs;
    out->text = r.text;
    return 0;

out_arrays:
    allot_free(set.slot);
    allot_free(vcs);
    allot_free(v);
    allot_free(r.text);
    return rc;
}

/* ---- VC lists ---- */

/* Loads (see csv_open()) and parses a vc list into *out (OUT), which then
 * owns the text. */
static int parse_vcs(const char *path, const char *buf, size_t len, const char *name,
                     struct philly_vcs *out, char *err, size_t errlen)
{
    struct csv_reader r;
    int idx[VC_COUNT] = {0};
    struct philly_vc *v = NULL;
    const char **names = NULL;
    struct name_set set = {0};
    size_t n = 0, cap;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = csv_open(&r, &philly_format, &vc_layout, idx, path, buf, len, name, err, errlen);
    if (rc < 0)
        return rc;
    cap = csv_rows_left(&r);
    v = allot_calloc(cap, sizeof(*v));
    names = allot_calloc(cap, sizeof(*names));
    if (!v || !names || set_init(&set, cap, names) < 0) {
        rc = csv_report(r.file, 0, err, errlen, ALLOT_ENOMEM, "out of memory");
        goto out_arrays;
    }
    while ((rc = csv_next(&r)) > 0) {
        char qb[80];
        int64_t nodes = 0;
        size_t pos = 0;
        int k;

        if ((rc = csv_check_width(&r, VC_COUNT)) < 0 ||
            (rc = check_name(&r, "vc", r.f[idx[VC_NAME]])) < 0 ||
            (rc = csv_int(&r, "node num", r.f[idx[VC_NODES]], PHILLY_MAX_NODES, CSV_SIGN_FIRST,
                          &nodes)) < 0)
            goto out_arrays;
        if (nodes == 0) {
            rc = csv_fail(&r, "node num is 0: a VC needs at least one node");
            goto out_arrays;
        }
        k = set_find(&set, r.f[idx[VC_NAME]], &pos);
        if (k >= 0) {
            rc = csv_fail(&r, "duplicate vc %s", csv_quote(qb, sizeof(qb), r.f[idx[VC_NAME]]));
            goto out_arrays;
        }
        names[n] = r.f[idx[VC_NAME]];
        set.slot[pos] = (int)n + 1;
        v[n].name = names[n];
        v[n].nodes = (int)nodes;
        n++;
    }
    if (rc < 0)
        goto out_arrays;
    allot_free(set.slot);
    allot_free(names);
    out->n = n;
    out->v = v;
    out->text = r.text;
    return 0;

out_arrays:
    allot_free(set.slot);
    allot_free(names);
    allot_free(v);
    allot_free(r.text);
    return rc;
}

/* ---- entry points ---- */

int philly_read_jobs(const char *path, struct philly_jobs *out, char *err, size_t errlen)
{
    return parse_jobs(path, NULL, 0, path, out, err, errlen);
}

int philly_parse_jobs(const char *buf, size_t len, const char *name, struct philly_jobs *out,
                      char *err, size_t errlen)
{
    return parse_jobs(NULL, buf, len, name, out, err, errlen);
}

int philly_read_vcs(const char *path, struct philly_vcs *out, char *err, size_t errlen)
{
    return parse_vcs(path, NULL, 0, path, out, err, errlen);
}

int philly_parse_vcs(const char *buf, size_t len, const char *name, struct philly_vcs *out,
                     char *err, size_t errlen)
{
    return parse_vcs(NULL, buf, len, name, out, err, errlen);
}

void philly_jobs_free(struct philly_jobs *l)
{
    if (!l)
        return;
    allot_free(l->v);
    allot_free(l->vcs);
    allot_free(l->text);
    memset(l, 0, sizeof(*l));
}

void philly_vcs_free(struct philly_vcs *l)
{
    if (!l)
        return;
    allot_free(l->v);
    allot_free(l->text);
    memset(l, 0, sizeof(*l));
}

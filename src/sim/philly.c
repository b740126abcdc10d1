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

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COLS 8 /* fields kept per line; both layouts have fewer */

struct col_def {
    const char *name;
};

enum job_col { JC_TIME, JC_DURATION, JC_GPUS, JC_GPU_TIME, JC_CLUSTER, JC_COUNT };

static const struct col_def job_cols[JC_COUNT] = {
    [JC_TIME] = {"timestamp"},    [JC_DURATION] = {"duration"}, [JC_GPUS] = {"num_gpus"},
    [JC_GPU_TIME] = {"gpu_time"}, [JC_CLUSTER] = {"cluster"},
};
#define JOB_HEADER "timestamp,duration,num_gpus,gpu_time,cluster"

enum vc_col { VC_NAME, VC_NODES, VC_COUNT };

static const struct col_def vc_cols[VC_COUNT] = {[VC_NAME] = {"vc"}, [VC_NODES] = {"node num"}};
#define VC_HEADER "vc,node num"

/* Reading state over one file's text, which it splits in place. */
struct rd {
    char *p;          /* next unread byte */
    char *end;        /* one past the last byte; *end is writable */
    size_t line;      /* 1-based number of the line last returned */
    const char *file; /* display name, borrowed */
    char *err;        /* caller's message buffer, borrowed */
    size_t errlen;
    char *f[MAX_COLS]; /* fields of the current line */
    size_t nf;         /* fields on the current line (may exceed MAX_COLS) */
};

static void vreport(const char *file, size_t line, char *err, size_t errlen, const char *fmt,
                    va_list ap) __attribute__((format(printf, 5, 0)));

/* Writes "FILE: msg" (line == 0) or "FILE:LINE: msg" to the caller's buffer. */
static void vreport(const char *file, size_t line, char *err, size_t errlen, const char *fmt,
                    va_list ap)
{
    int n;

    if (!err || errlen == 0)
        return;
    if (line)
        n = allot_fmt(err, errlen, "%s:%zu: ", file, line);
    else
        n = allot_fmt(err, errlen, "%s: ", file);
    if (n >= 0 && (size_t)n < errlen)
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
}

static int report(const char *file, size_t line, char *err, size_t errlen, int rc, const char *fmt,
                  ...) __attribute__((format(printf, 6, 7)));

static int report(const char *file, size_t line, char *err, size_t errlen, int rc, const char *fmt,
                  ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport(file, line, err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

/* Reports a problem on the current line; returns ALLOT_EINVAL. */
static int rd_fail(struct rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int rd_fail(struct rd *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport(r->file, r->line, r->err, r->errlen, fmt, ap);
    va_end(ap);
    return ALLOT_EINVAL;
}

/* Quotes a value for a message: at most 40 bytes shown, bytes that are not
 * printable ASCII escaped as \xNN, "..." appended when cut. Returns buf. */
static const char *quote(char *buf, size_t size, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, shown = 0;

    if (size < 8)
        return "";
    buf[o++] = '"';
    for (; *s && o + 8 < size; s++) {
        unsigned char c = (unsigned char)*s;

        if (shown == 40) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        } else {
            buf[o++] = (char)c;
        }
        shown++;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

/* True when only line ends (LF, CRLF) remain from p to end. */
static bool only_blank_lines(const char *p, const char *end)
{
    for (; p < end; p++) {
        if (*p == '\n')
            continue;
        if (*p == '\r' && p + 1 < end && p[1] == '\n')
            continue;
        return false;
    }
    return true;
}

/*
 * Returns the next line split into r->f / r->nf: 1 when there is one, 0 at
 * the end of the text (trailing blank lines included), ALLOT_EINVAL for a
 * blank line elsewhere, an oversized line, or one holding a control byte or
 * a quote. A final CR is dropped.
 */
static int rd_next(struct rd *r)
{
    char *s = r->p, *e, *nl;
    size_t len;

    if (s >= r->end || (r->line > 0 && only_blank_lines(s, r->end)))
        return 0;
    r->line++;
    nl = memchr(s, '\n', (size_t)(r->end - s));
    e = nl ? nl : r->end;
    r->p = nl ? nl + 1 : r->end;
    if (e > s && e[-1] == '\r')
        e--;
    len = (size_t)(e - s);
    if (len > PHILLY_MAX_LINE)
        return rd_fail(r, "line longer than %d bytes", PHILLY_MAX_LINE);
    if (len == 0)
        return rd_fail(r, "empty line");
    r->nf = 0;
    r->f[r->nf++] = s;
    for (char *q = s; q < e; q++) {
        unsigned char c = (unsigned char)*q;

        if (c == ',') {
            *q = '\0';
            if (r->nf < MAX_COLS)
                r->f[r->nf] = q + 1;
            r->nf++;
        } else if (c == '\0') {
            return rd_fail(r, "NUL byte at column %zu", (size_t)(q - s) + 1);
        } else if (c == '\r') {
            return rd_fail(r, "carriage return inside the line at column %zu", (size_t)(q - s) + 1);
        } else if (c < 0x20 || c == 0x7f) {
            return rd_fail(r, "control character 0x%02x at column %zu", c, (size_t)(q - s) + 1);
        } else if (c == '"') {
            return rd_fail(r, "'\"' at column %zu: quoted fields are not supported",
                           (size_t)(q - s) + 1);
        }
    }
    *e = '\0'; /* e is the CR, the LF or r->end, all writable */
    return 1;
}

/*
 * Reads the header and maps each of the `ndefs` columns of `defs` (all
 * required) to its field index in `idx` (OUT). Returns 0 or ALLOT_EINVAL
 * naming the unknown, repeated or missing column.
 */
static int rd_header(struct rd *r, const struct col_def *defs, size_t ndefs, int *idx,
                     const char *expect)
{
    char qb[80];
    size_t i, k, nstored;
    bool any_known = false;
    int rc;

    rc = rd_next(r);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return report(r->file, 0, r->err, r->errlen, ALLOT_EINVAL,
                      "empty file, expected the header \"%s\"", expect);
    for (k = 0; k < ndefs; k++)
        idx[k] = -1;
    nstored = r->nf < MAX_COLS ? r->nf : MAX_COLS;
    for (i = 0; i < nstored && !any_known; i++)
        for (k = 0; k < ndefs; k++)
            if (strcmp(r->f[i], defs[k].name) == 0)
                any_known = true;
    if (!any_known)
        return rd_fail(r, "missing header line, expected \"%s\"", expect);
    /* With more fields than columns one of the first ndefs + 1 (all stored,
     * ndefs < MAX_COLS) is unknown or repeated, so the loop fails in time. */
    for (i = 0; i < nstored; i++) {
        for (k = 0; k < ndefs; k++)
            if (strcmp(r->f[i], defs[k].name) == 0)
                break;
        if (k == ndefs)
            return rd_fail(r, "unknown column %s (expected \"%s\")", quote(qb, sizeof(qb), r->f[i]),
                           expect);
        if (idx[k] >= 0)
            return rd_fail(r, "duplicate column \"%s\"", defs[k].name);
        idx[k] = (int)i;
    }
    for (k = 0; k < ndefs; k++)
        if (idx[k] < 0)
            return rd_fail(r, "missing column \"%s\"", defs[k].name);
    if (only_blank_lines(r->p, r->end))
        return rd_fail(r, "header but no data rows");
    return 0;
}

static int rd_check_width(struct rd *r, size_t ncols)
{
    if (r->nf != ncols)
        return rd_fail(r, "expected %zu fields, got %zu", ncols, r->nf);
    return 0;
}

/* Parses `s` as a decimal integer in 0..max (no sign, no blanks). */
static int rd_int(struct rd *r, const char *col, const char *s, int64_t max, int64_t *out)
{
    char qb[80];
    int64_t v = 0;

    if (*s == '\0')
        return rd_fail(r, "%s is empty", col);
    if (*s == '-' && s[1] >= '0' && s[1] <= '9')
        return rd_fail(r, "%s %s is negative", col, quote(qb, sizeof(qb), s));
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return rd_fail(r, "%s %s is not an integer", col, quote(qb, sizeof(qb), s));
        if (v > (max - (*p - '0')) / 10)
            return rd_fail(r, "%s %s out of range 0..%lld", col, quote(qb, sizeof(qb), s),
                           (long long)max);
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return 0;
}

/* Parses `s` as a non-negative decimal `D[.D]` (digits required before the
 * point, and after it when there is one) no larger than max. */
static int rd_decimal(struct rd *r, const char *col, const char *s, double max, double *out)
{
    char qb[80];
    const char *p = s;
    size_t ndig = 0;

    if (*s == '\0')
        return rd_fail(r, "%s is empty", col);
    if (*s == '-' && s[1] >= '0' && s[1] <= '9')
        return rd_fail(r, "%s %s is negative", col, quote(qb, sizeof(qb), s));
    while (*p >= '0' && *p <= '9') {
        p++;
        ndig++;
    }
    if (ndig > 0 && *p == '.') {
        const char *frac = ++p;

        while (*p >= '0' && *p <= '9')
            p++;
        if (p == frac)
            ndig = 0;
    }
    if (ndig == 0 || *p != '\0' || ndig > 15)
        return rd_fail(r, "%s %s is not a decimal number", col, quote(qb, sizeof(qb), s));
    *out = strtod(s, NULL);
    if (!(*out <= max))
        return rd_fail(r, "%s %s out of range 0..%.0f", col, quote(qb, sizeof(qb), s), max);
    return 0;
}

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
static int check_name(struct rd *r, const char *col, const char *s)
{
    char qb[80];
    size_t len = strlen(s);

    if (len == 0)
        return rd_fail(r, "%s is empty", col);
    if (len > PHILLY_MAX_NAME)
        return rd_fail(r, "%s %s longer than %d bytes", col, quote(qb, sizeof(qb), s),
                       PHILLY_MAX_NAME);
    for (const char *p = s; *p; p++) {
        char c = *p;

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return rd_fail(r, "%s %s: only letters, digits, '_', '.' and '-' are allowed", col,
                           quote(qb, sizeof(qb), s));
    }
    return 0;
}

/* Upper bound on the data rows left. */
static size_t rows_left(const struct rd *r)
{
    size_t n = 1;
    const char *p = r->p;

    while (p < r->end && (p = memchr(p, '\n', (size_t)(r->end - p))) != NULL) {
        n++;
        p++;
    }
    return n;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
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

    for (j = name_hash(name) & (s->cap - 1); s->slot[j]; j = (j + 1) & (s->cap - 1))
        if (strcmp(s->names[s->slot[j] - 1], name) == 0)
            return s->slot[j] - 1;
    *pos = j;
    return -1;
}

/* ---- job lists ---- */

static int job_row(struct rd *r, const int *idx, struct philly_job *jb, double *gpu_time)
{
    char qb[80];
    int64_t v;
    double dur = 0;
    int rc;

    if ((rc = rd_check_width(r, JC_COUNT)) < 0)
        return rc;
    if (philly_parse_time(r->f[idx[JC_TIME]], &jb->submit) < 0)
        return rd_fail(r, "timestamp %s is not a valid \"YYYY-MM-DD HH:MM:SS\" (UTC, from 1970)",
                       quote(qb, sizeof(qb), r->f[idx[JC_TIME]]));
    if (strlen(r->f[idx[JC_TIME]]) != 19)
        return rd_fail(r, "timestamp %s lacks the time of day",
                       quote(qb, sizeof(qb), r->f[idx[JC_TIME]]));
    if ((rc = rd_decimal(r, "duration", r->f[idx[JC_DURATION]], (double)PHILLY_MAX_DURATION,
                         &dur)) < 0 ||
        (rc = rd_int(r, "num_gpus", r->f[idx[JC_GPUS]], PHILLY_MAX_GPUS, &v)) < 0)
        return rc;
    jb->num_gpus = (int)v;
    jb->duration = llround(dur);
    if ((rc = rd_decimal(r, "gpu_time", r->f[idx[JC_GPU_TIME]],
                         (double)PHILLY_MAX_DURATION * PHILLY_MAX_GPUS, gpu_time)) < 0)
        return rc;
    if (fabs(*gpu_time - dur * jb->num_gpus) > 0.5 * (jb->num_gpus > 1 ? jb->num_gpus : 1))
        return rd_fail(r, "gpu_time %s is not duration x num_gpus (%.1f)",
                       quote(qb, sizeof(qb), r->f[idx[JC_GPU_TIME]]), dur * jb->num_gpus);
    return check_name(r, "cluster", r->f[idx[JC_CLUSTER]]);
}

/* Parses `text` (len bytes plus one writable byte), taking ownership of it. */
static int parse_jobs_owned(char *text, size_t len, const char *name, struct philly_jobs *out,
                            char *err, size_t errlen)
{
    struct rd r = {.p = text, .end = text + len, .file = name, .err = err, .errlen = errlen};
    int idx[JC_COUNT] = {0};
    struct philly_job *v = NULL;
    const char **vcs = NULL;
    struct name_set set = {0};
    size_t n = 0, cap;
    int n_vcs = 0, rc;

    memset(out, 0, sizeof(*out));
    if ((rc = rd_header(&r, job_cols, JC_COUNT, idx, JOB_HEADER)) < 0)
        goto out_text;
    cap = rows_left(&r);
    v = allot_calloc(cap, sizeof(*v));
    /* names: at most one per row; the set borrows the array as it fills */
    vcs = allot_calloc(cap, sizeof(*vcs));
    if (!v || !vcs || set_init(&set, cap, vcs) < 0) {
        rc = report(name, 0, err, errlen, ALLOT_ENOMEM, "out of memory");
        goto out_arrays;
    }
    while ((rc = rd_next(&r)) > 0) {
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
    out->text = text;
    return 0;

out_arrays:
    allot_free(set.slot);
    allot_free(vcs);
    allot_free(v);
out_text:
    allot_free(text);
    return rc;
}

/* ---- VC lists ---- */

static int parse_vcs_owned(char *text, size_t len, const char *name, struct philly_vcs *out,
                           char *err, size_t errlen)
{
    struct rd r = {.p = text, .end = text + len, .file = name, .err = err, .errlen = errlen};
    int idx[VC_COUNT] = {0};
    struct philly_vc *v = NULL;
    const char **names = NULL;
    struct name_set set = {0};
    size_t n = 0, cap;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = rd_header(&r, vc_cols, VC_COUNT, idx, VC_HEADER)) < 0)
        goto out_text;
    cap = rows_left(&r);
    v = allot_calloc(cap, sizeof(*v));
    names = allot_calloc(cap, sizeof(*names));
    if (!v || !names || set_init(&set, cap, names) < 0) {
        rc = report(name, 0, err, errlen, ALLOT_ENOMEM, "out of memory");
        goto out_arrays;
    }
    while ((rc = rd_next(&r)) > 0) {
        char qb[80];
        int64_t nodes = 0;
        size_t pos = 0;
        int k;

        if ((rc = rd_check_width(&r, VC_COUNT)) < 0 ||
            (rc = check_name(&r, "vc", r.f[idx[VC_NAME]])) < 0 ||
            (rc = rd_int(&r, "node num", r.f[idx[VC_NODES]], PHILLY_MAX_NODES, &nodes)) < 0)
            goto out_arrays;
        if (nodes == 0) {
            rc = rd_fail(&r, "node num is 0: a VC needs at least one node");
            goto out_arrays;
        }
        k = set_find(&set, r.f[idx[VC_NAME]], &pos);
        if (k >= 0) {
            rc = rd_fail(&r, "duplicate vc %s", quote(qb, sizeof(qb), r.f[idx[VC_NAME]]));
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
    out->text = text;
    return 0;

out_arrays:
    allot_free(set.slot);
    allot_free(names);
    allot_free(v);
out_text:
    allot_free(text);
    return rc;
}

/* ---- entry points ---- */

static int copy_text(const char *buf, size_t len, const char *name, char **text, char *err,
                     size_t errlen)
{
    if (len > PHILLY_MAX_FILE)
        return report(name, 0, err, errlen, ALLOT_EINVAL, "larger than %u bytes",
                      (unsigned)PHILLY_MAX_FILE);
    *text = allot_malloc(len + 1);
    if (!*text)
        return report(name, 0, err, errlen, ALLOT_ENOMEM, "out of memory");
    if (len)
        memcpy(*text, buf, len);
    (*text)[len] = '\0';
    return 0;
}

static int read_text(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    void *buf = NULL;
    size_t cap = 0, n = 0;
    int rc = 0;

    if (!f)
        return report(path, 0, err, errlen, ALLOT_EIO, "%s", strerror(errno));
    for (;;) {
        size_t want, got;

        if (allot_grow(&buf, &cap, n + 65536 + 2, 1) < 0) {
            rc = report(path, 0, err, errlen, ALLOT_ENOMEM, "out of memory");
            goto out_buf;
        }
        want = cap - n - 1;
        if (want > (size_t)PHILLY_MAX_FILE + 1 - n)
            want = (size_t)PHILLY_MAX_FILE + 1 - n; /* one byte past the limit tells */
        got = fread((char *)buf + n, 1, want, f);
        n += got;
        if (n > PHILLY_MAX_FILE) {
            rc = report(path, 0, err, errlen, ALLOT_EINVAL, "larger than %u bytes",
                        (unsigned)PHILLY_MAX_FILE);
            goto out_buf;
        }
        if (got < want) {
            if (ferror(f)) {
                rc = report(path, 0, err, errlen, ALLOT_EIO, "%s", strerror(errno));
                goto out_buf;
            }
            break;
        }
    }
    fclose(f);
    ((char *)buf)[n] = '\0';
    *text = buf;
    *len = n;
    return 0;

out_buf:
    allot_free(buf);
    fclose(f);
    return rc;
}

int philly_read_jobs(const char *path, struct philly_jobs *out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = read_text(path, &text, &len, err, errlen)) < 0)
        return rc;
    return parse_jobs_owned(text, len, path, out, err, errlen);
}

int philly_parse_jobs(const char *buf, size_t len, const char *name, struct philly_jobs *out,
                      char *err, size_t errlen)
{
    char *text = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = copy_text(buf, len, name, &text, err, errlen)) < 0)
        return rc;
    return parse_jobs_owned(text, len, name, out, err, errlen);
}

int philly_read_vcs(const char *path, struct philly_vcs *out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = read_text(path, &text, &len, err, errlen)) < 0)
        return rc;
    return parse_vcs_owned(text, len, path, out, err, errlen);
}

int philly_parse_vcs(const char *buf, size_t len, const char *name, struct philly_vcs *out,
                     char *err, size_t errlen)
{
    char *text = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = copy_text(buf, len, name, &text, err, errlen)) < 0)
        return rc;
    return parse_vcs_owned(text, len, name, out, err, errlen);
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

/*
 * Implementation of openb.h: a strict reader for the openb node and pod lists.
 *
 * The whole file is read into one block (the list's `text`), split in place
 * into NUL-terminated fields, and the parsed records point into it, so a
 * list costs three allocations whatever its size (text, record array, a
 * transient hash set for the duplicate-name check). Lines are walked once;
 * data row i (0-based) is always on line i + 2, since blank lines are errors.
 *
 * Column layouts are described once, in a table per file kind; the header is
 * matched against the table by name and the resulting index map drives the
 * row parsers.
 */
#include "openb.h"

#include "allot/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fields kept per line; a header or row with more is rejected before any
 * field past this is needed (every layout has fewer columns). */
#define MAX_COLS 16

struct col_def {
    const char *name;
    bool required;
};

enum node_col { NC_SN, NC_CPU, NC_MEM, NC_GPU, NC_MODEL, NC_COUNT };

static const struct col_def node_cols[NC_COUNT] = {
    [NC_SN] = {"sn", true},   [NC_CPU] = {"cpu_milli", true}, [NC_MEM] = {"memory_mib", true},
    [NC_GPU] = {"gpu", true}, [NC_MODEL] = {"model", true},
};

enum pod_col {
    PC_NAME,
    PC_CPU,
    PC_MEM,
    PC_NUM_GPU,
    PC_GPU_MILLI,
    PC_SPEC,
    PC_QOS,
    PC_PHASE,
    PC_CTIME,
    PC_DTIME,
    PC_STIME,
    PC_COUNT
};

static const struct col_def pod_cols[PC_COUNT] = {
    [PC_NAME] = {"name", true},
    [PC_CPU] = {"cpu_milli", true},
    [PC_MEM] = {"memory_mib", false},
    [PC_NUM_GPU] = {"num_gpu", true},
    [PC_GPU_MILLI] = {"gpu_milli", true},
    [PC_SPEC] = {"gpu_spec", false},
    [PC_QOS] = {"qos", false},
    [PC_PHASE] = {"pod_phase", false},
    [PC_CTIME] = {"creation_time", false},
    [PC_DTIME] = {"deletion_time", false},
    [PC_STIME] = {"scheduled_time", false},
};

#define NODE_HEADER "sn,cpu_milli,memory_mib,gpu,model"
#define POD_HEADER                                                                                 \
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"            \
    "deletion_time,scheduled_time"

/* Reading state over one file's text, which it splits in place. */
struct rd {
    char *p;          /* next unread byte */
    char *end;        /* one past the last byte; *end is writable */
    size_t line;      /* 1-based number of the line last returned */
    const char *file; /* display name, borrowed */
    char *err;        /* caller's message buffer, borrowed */
    size_t errlen;
    char *f[MAX_COLS]; /* fields of the current line */
    size_t nf;         /* number of fields on the current line (may exceed MAX_COLS) */
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

/* Quotes a field value for a message: at most 40 bytes shown, bytes that are
 * not printable ASCII escaped as \xNN, "..." appended when cut. Returns buf. */
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

/*
 * Returns the next line split into r->f / r->nf: 1 when there is one, 0 at
 * the end of the text, ALLOT_EINVAL for a blank or oversized line or one
 * holding a control byte or a quote. A final CR is dropped.
 */
static int rd_next(struct rd *r)
{
    char *s = r->p, *e, *nl;
    size_t len;

    if (s >= r->end)
        return 0;
    r->line++;
    nl = memchr(s, '\n', (size_t)(r->end - s));
    e = nl ? nl : r->end;
    r->p = nl ? nl + 1 : r->end;
    if (e > s && e[-1] == '\r')
        e--;
    len = (size_t)(e - s);
    if (len > OPENB_MAX_LINE)
        return rd_fail(r, "line longer than %d bytes", OPENB_MAX_LINE);
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
 * Reads the header line and maps each of the `ndefs` columns of `defs` to
 * its field index in `idx` (OUT; -1 when absent). Returns 0 or ALLOT_EINVAL
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
    /* With more fields than columns one of the first ndefs + 1 (all stored,
     * ndefs < MAX_COLS) is unknown or repeated, so the loop fails in time. */
    nstored = r->nf < MAX_COLS ? r->nf : MAX_COLS;
    for (i = 0; i < nstored && !any_known; i++)
        for (k = 0; k < ndefs; k++)
            if (strcmp(r->f[i], defs[k].name) == 0)
                any_known = true;
    if (!any_known)
        return rd_fail(r, "missing header line, expected \"%s\"", expect);
    for (i = 0; i < nstored; i++) {
        for (k = 0; k < ndefs; k++)
            if (strcmp(r->f[i], defs[k].name) == 0)
                break;
        if (k == ndefs)
            return rd_fail(r, "unknown column %s (expected columns of \"%s\")",
                           quote(qb, sizeof(qb), r->f[i]), expect);
        if (idx[k] >= 0)
            return rd_fail(r, "duplicate column \"%s\"", defs[k].name);
        idx[k] = (int)i;
    }
    for (k = 0; k < ndefs; k++)
        if (defs[k].required && idx[k] < 0)
            return rd_fail(r, "missing column \"%s\"", defs[k].name);
    if (r->p >= r->end)
        return rd_fail(r, "header but no data rows");
    return 0;
}

/* Checks the current row has `ncols` fields. */
static int rd_check_width(struct rd *r, size_t ncols)
{
    if (r->nf != ncols)
        return rd_fail(r, "expected %zu fields, got %zu", ncols, r->nf);
    return 0;
}

/*
 * Parses field `s` of column `col` as a decimal integer in 0..max into *out.
 * An empty field gives -1 when `empty_ok`, an error otherwise. Leading
 * blanks, '+', fractions and trailing junk are errors.
 */
static int rd_int(struct rd *r, const char *col, const char *s, int64_t max, bool empty_ok,
                  int64_t *out)
{
    char qb[80];
    const char *d = *s == '-' ? s + 1 : s;
    char *end;
    long long v;

    if (*s == '\0') {
        if (empty_ok) {
            *out = -1;
            return 0;
        }
        return rd_fail(r, "%s is empty", col);
    }
    if (*d < '0' || *d > '9')
        return rd_fail(r, "%s %s is not an integer", col, quote(qb, sizeof(qb), s));
    errno = 0;
    v = strtoll(s, &end, 10);
    if (*end != '\0')
        return rd_fail(r, "%s %s is not an integer", col, quote(qb, sizeof(qb), s));
    if (v < 0 || (errno == ERANGE && *s == '-'))
        return rd_fail(r, "%s %s is negative", col, quote(qb, sizeof(qb), s));
    if (errno == ERANGE || v > max)
        return rd_fail(r, "%s %s out of range 0..%lld", col, quote(qb, sizeof(qb), s),
                       (long long)max);
    *out = v;
    return 0;
}

/* rd_int() for an int-sized column (max fits in int). */
static int rd_small(struct rd *r, const char *col, const char *s, int max, int *out)
{
    int64_t v = 0;
    int rc = rd_int(r, col, s, max, false, &v);

    if (rc == 0)
        *out = (int)v;
    return rc;
}

/* Upper bound on the data rows left: the newlines left, plus one for an
 * unterminated last line. */
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

/*
 * Checks that the `n` names at `base`, `stride` bytes apart (each a const
 * char * field), are unique. Row i is reported as line i + 2. Returns 0,
 * ALLOT_EINVAL naming the duplicate, or ALLOT_ENOMEM.
 */
static int check_unique(struct rd *r, const char *what, const void *base, size_t stride, size_t n)
{
    char qb[80];
    size_t cap = 16, *slot, i, j;
    int rc = 0;

    while (cap < 2 * n)
        cap *= 2;
    slot = allot_calloc(cap, sizeof(*slot)); /* row + 1; 0 = empty */
    if (!slot)
        return report(r->file, 0, r->err, r->errlen, ALLOT_ENOMEM, "out of memory");
    for (i = 0; i < n; i++) {
        const char *name = *(const char *const *)((const char *)base + i * stride);

        for (j = name_hash(name) & (cap - 1); slot[j]; j = (j + 1) & (cap - 1)) {
            const char *other = *(const char *const *)((const char *)base + (slot[j] - 1) * stride);

            if (strcmp(name, other) == 0) {
                r->line = i + 2;
                rc = rd_fail(r, "duplicate %s name %s (first on line %zu)", what,
                             quote(qb, sizeof(qb), name), slot[j] + 1);
                goto out_slot;
            }
        }
        slot[j] = i + 1;
    }
out_slot:
    allot_free(slot);
    return rc;
}

/* ---- node lists ---- */

static int node_row(struct rd *r, const int *idx, struct openb_node *nd)
{
    char qb[80];
    int rc;

    if ((rc = rd_check_width(r, NC_COUNT)) < 0)
        return rc;
    nd->name = r->f[idx[NC_SN]];
    nd->model = r->f[idx[NC_MODEL]];
    if (*nd->name == '\0')
        return rd_fail(r, "sn (the node name) is empty");
    if ((rc = rd_int(r, "cpu_milli", r->f[idx[NC_CPU]], OPENB_MAX_CPU_MILLI, false,
                     &nd->cpu_milli)) < 0 ||
        (rc = rd_int(r, "memory_mib", r->f[idx[NC_MEM]], OPENB_MAX_MEM_MIB, false,
                     &nd->memory_mib)) < 0 ||
        (rc = rd_small(r, "gpu", r->f[idx[NC_GPU]], OPENB_MAX_GPUS, &nd->gpu)) < 0)
        return rc;
    if (nd->gpu > 0 && *nd->model == '\0')
        return rd_fail(r, "model is empty for a node with %d GPUs", nd->gpu);
    if (nd->gpu == 0 && *nd->model != '\0')
        return rd_fail(r, "model %s given for a node with no GPUs",
                       quote(qb, sizeof(qb), nd->model));
    if (strchr(nd->model, '|'))
        return rd_fail(r, "model %s contains '|'", quote(qb, sizeof(qb), nd->model));
    return 0;
}

/* Parses `text` (len bytes plus one writable byte), taking ownership of it. */
static int parse_nodes_owned(char *text, size_t len, const char *name, struct openb_nodes *out,
                             char *err, size_t errlen)
{
    struct rd r = {.p = text, .end = text + len, .file = name, .err = err, .errlen = errlen};
    int idx[NC_COUNT] = {0};
    struct openb_node *v;
    size_t n = 0, cap;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = rd_header(&r, node_cols, NC_COUNT, idx, NODE_HEADER)) < 0)
        goto out_text;
    cap = rows_left(&r);
    v = allot_calloc(cap, sizeof(*v));
    if (!v) {
        rc = report(name, 0, err, errlen, ALLOT_ENOMEM, "out of memory");
        goto out_text;
    }
    while ((rc = rd_next(&r)) > 0) {
        if ((rc = node_row(&r, idx, &v[n])) < 0)
            goto out_v;
        n++;
    }
    if (rc < 0)
        goto out_v;
    if ((rc = check_unique(&r, "node", &v[0].name, sizeof(*v), n)) < 0)
        goto out_v;
    out->n = n;
    out->v = v;
    out->text = text;
    return 0;

out_v:
    allot_free(v);
out_text:
    allot_free(text);
    return rc;
}

/* ---- pod lists ---- */

/* Checks a gpu_spec: "" or non-empty model names joined by '|'. */
static int check_spec(struct rd *r, const char *spec)
{
    char qb[80];
    size_t len = strlen(spec);

    if (len == 0)
        return 0;
    if (spec[0] == '|' || spec[len - 1] == '|' || strstr(spec, "||"))
        return rd_fail(r, "gpu_spec %s has an empty model name", quote(qb, sizeof(qb), spec));
    return 0;
}

static const char *opt_str(const struct rd *r, const int *idx, enum pod_col c)
{
    return idx[c] >= 0 ? r->f[idx[c]] : "";
}

static int opt_time(struct rd *r, const int *idx, enum pod_col c, int64_t *out)
{
    if (idx[c] < 0) {
        *out = -1;
        return 0;
    }
    return rd_int(r, pod_cols[c].name, r->f[idx[c]], OPENB_MAX_TIME, true, out);
}

static int pod_row(struct rd *r, const int *idx, size_t ncols, struct openb_pod *pd)
{
    int rc;

    if ((rc = rd_check_width(r, ncols)) < 0)
        return rc;
    pd->name = r->f[idx[PC_NAME]];
    if (*pd->name == '\0')
        return rd_fail(r, "name is empty");
    pd->memory_mib = -1;
    if ((rc = rd_int(r, "cpu_milli", r->f[idx[PC_CPU]], OPENB_MAX_CPU_MILLI, false,
                     &pd->cpu_milli)) < 0 ||
        (idx[PC_MEM] >= 0 && (rc = rd_int(r, "memory_mib", r->f[idx[PC_MEM]], OPENB_MAX_MEM_MIB,
                                          false, &pd->memory_mib)) < 0) ||
        (rc = rd_small(r, "num_gpu", r->f[idx[PC_NUM_GPU]], OPENB_MAX_GPUS, &pd->num_gpu)) < 0 ||
        (rc = rd_small(r, "gpu_milli", r->f[idx[PC_GPU_MILLI]], OPENB_MILLI_PER_GPU,
                       &pd->gpu_milli)) < 0)
        return rc;
    if (pd->num_gpu == 0 && pd->gpu_milli != 0)
        return rd_fail(r, "gpu_milli %d with num_gpu 0", pd->gpu_milli);
    if (pd->num_gpu == 1 && pd->gpu_milli == 0)
        return rd_fail(r, "gpu_milli 0 with num_gpu 1");
    if (pd->num_gpu > 1 && pd->gpu_milli != OPENB_MILLI_PER_GPU)
        return rd_fail(r, "gpu_milli %d with num_gpu %d: only single-GPU pods may share a GPU",
                       pd->gpu_milli, pd->num_gpu);
    pd->gpu_spec = opt_str(r, idx, PC_SPEC);
    pd->qos = opt_str(r, idx, PC_QOS);
    pd->phase = opt_str(r, idx, PC_PHASE);
    if ((rc = check_spec(r, pd->gpu_spec)) < 0)
        return rc;
    if ((rc = opt_time(r, idx, PC_CTIME, &pd->creation_time)) < 0 ||
        (rc = opt_time(r, idx, PC_DTIME, &pd->deletion_time)) < 0 ||
        (rc = opt_time(r, idx, PC_STIME, &pd->scheduled_time)) < 0)
        return rc;
    if (pd->creation_time >= 0 && pd->deletion_time >= 0 && pd->deletion_time < pd->creation_time)
        return rd_fail(r, "deletion_time %lld before creation_time %lld",
                       (long long)pd->deletion_time, (long long)pd->creation_time);
    if (pd->creation_time >= 0 && pd->scheduled_time >= 0 && pd->scheduled_time < pd->creation_time)
        return rd_fail(r, "scheduled_time %lld before creation_time %lld",
                       (long long)pd->scheduled_time, (long long)pd->creation_time);
    return 0;
}

/* Parses `text` (len bytes plus one writable byte), taking ownership of it. */
static int parse_pods_owned(char *text, size_t len, const char *name, struct openb_pods *out,
                            char *err, size_t errlen)
{
    struct rd r = {.p = text, .end = text + len, .file = name, .err = err, .errlen = errlen};
    int idx[PC_COUNT] = {0};
    struct openb_pod *v;
    size_t n = 0, cap, ncols = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = rd_header(&r, pod_cols, PC_COUNT, idx, POD_HEADER)) < 0)
        goto out_text;
    for (size_t k = 0; k < PC_COUNT; k++)
        ncols += idx[k] >= 0;
    cap = rows_left(&r);
    v = allot_calloc(cap, sizeof(*v));
    if (!v) {
        rc = report(name, 0, err, errlen, ALLOT_ENOMEM, "out of memory");
        goto out_text;
    }
    while ((rc = rd_next(&r)) > 0) {
        if ((rc = pod_row(&r, idx, ncols, &v[n])) < 0)
            goto out_v;
        n++;
    }
    if (rc < 0)
        goto out_v;
    if ((rc = check_unique(&r, "pod", &v[0].name, sizeof(*v), n)) < 0)
        goto out_v;
    out->n = n;
    out->v = v;
    out->has_memory = idx[PC_MEM] >= 0;
    out->has_spec = idx[PC_SPEC] >= 0;
    out->has_times = idx[PC_CTIME] >= 0 || idx[PC_DTIME] >= 0 || idx[PC_STIME] >= 0;
    out->text = text;
    return 0;

out_v:
    allot_free(v);
out_text:
    allot_free(text);
    return rc;
}

/* ---- entry points ---- */

/* Copies `len` bytes of `buf` into a new block with one spare byte. */
static int copy_text(const char *buf, size_t len, const char *name, char **text, char *err,
                     size_t errlen)
{
    if (len > OPENB_MAX_FILE)
        return report(name, 0, err, errlen, ALLOT_EINVAL, "larger than %u bytes",
                      (unsigned)OPENB_MAX_FILE);
    *text = allot_malloc(len + 1);
    if (!*text)
        return report(name, 0, err, errlen, ALLOT_ENOMEM, "out of memory");
    if (len)
        memcpy(*text, buf, len);
    (*text)[len] = '\0';
    return 0;
}

/* Reads the file at `path` into a new block (*text, *len) with one spare byte. */
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
        if (want > (size_t)OPENB_MAX_FILE + 1 - n)
            want = (size_t)OPENB_MAX_FILE + 1 - n; /* one byte past the limit tells */
        got = fread((char *)buf + n, 1, want, f);
        n += got;
        if (n > OPENB_MAX_FILE) {
            rc = report(path, 0, err, errlen, ALLOT_EINVAL, "larger than %u bytes",
                        (unsigned)OPENB_MAX_FILE);
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

int openb_read_nodes(const char *path, struct openb_nodes *out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = read_text(path, &text, &len, err, errlen)) < 0)
        return rc;
    return parse_nodes_owned(text, len, path, out, err, errlen);
}

int openb_parse_nodes(const char *buf, size_t len, const char *name, struct openb_nodes *out,
                      char *err, size_t errlen)
{
    char *text = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = copy_text(buf, len, name, &text, err, errlen)) < 0)
        return rc;
    return parse_nodes_owned(text, len, name, out, err, errlen);
}

int openb_read_pods(const char *path, struct openb_pods *out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = read_text(path, &text, &len, err, errlen)) < 0)
        return rc;
    return parse_pods_owned(text, len, path, out, err, errlen);
}

int openb_parse_pods(const char *buf, size_t len, const char *name, struct openb_pods *out,
                     char *err, size_t errlen)
{
    char *text = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = copy_text(buf, len, name, &text, err, errlen)) < 0)
        return rc;
    return parse_pods_owned(text, len, name, out, err, errlen);
}

void openb_nodes_free(struct openb_nodes *l)
{
    if (!l)
        return;
    allot_free(l->v);
    allot_free(l->text);
    memset(l, 0, sizeof(*l));
}

void openb_pods_free(struct openb_pods *l)
{
    if (!l)
        return;
    allot_free(l->v);
    allot_free(l->text);
    memset(l, 0, sizeof(*l));
}

bool openb_spec_allows(const char *spec, const char *model)
{
    size_t mlen = strlen(model);
    const char *p = spec;

    if (*spec == '\0')
        return true;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);

        if (len == mlen && memcmp(p, model, len) == 0)
            return true;
        if (!bar)
            return false;
        p = bar + 1;
    }
}

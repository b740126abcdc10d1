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
#include "csvread.h"

#include <string.h>

enum node_col { NC_SN, NC_CPU, NC_MEM, NC_GPU, NC_MODEL, NC_COUNT };

static const struct csv_col node_cols[NC_COUNT] = {
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

static const struct csv_col pod_cols[PC_COUNT] = {
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

/* Fields kept per line: 16, more than either layout has. */
#define OPENB_MAX_COLS 16

static const struct csv_format openb_format = {OPENB_MAX_FILE, OPENB_MAX_LINE, OPENB_MAX_COLS,
                                               false};
static const struct csv_layout node_layout = {node_cols, NC_COUNT, NODE_HEADER,
                                              "expected columns of"};
static const struct csv_layout pod_layout = {pod_cols, PC_COUNT, POD_HEADER, "expected columns of"};

/* csv_int() for an int-sized column (max fits in int). */
static int rd_small(struct csv_reader *r, const char *col, const char *s, int max, int *out)
{
    int64_t v = 0;
    int rc = csv_int(r, col, s, max, 0, &v);

    if (rc == 0)
        *out = (int)v;
    return rc;
}

/*
 * Checks that the `n` names at `base`, `stride` bytes apart (each a const
 * char * field), are unique. Row i is reported as line i + 2. Returns 0,
 * ALLOT_EINVAL naming the duplicate, or ALLOT_ENOMEM.
 */
static int check_unique(struct csv_reader *r, const char *what, const void *base, size_t stride,
                        size_t n)
{
    char qb[80];
    size_t cap = 16, *slot, i, j;
    int rc = 0;

    while (cap < 2 * n)
        cap *= 2;
    slot = allot_calloc(cap, sizeof(*slot)); /* row + 1; 0 = empty */
    if (!slot)
        return csv_report(r->file, 0, r->err, r->errlen, ALLOT_ENOMEM, "out of memory");
    for (i = 0; i < n; i++) {
        const char *name = *(const char *const *)((const char *)base + i * stride);

        for (j = csv_name_hash(name) & (cap - 1); slot[j]; j = (j + 1) & (cap - 1)) {
            const char *other = *(const char *const *)((const char *)base + (slot[j] - 1) * stride);

            if (strcmp(name, other) == 0) {
                r->line = i + 2;
                rc = csv_fail(r, "duplicate %s name %s (first on line %zu)", what,
                              csv_quote(qb, sizeof(qb), name), slot[j] + 1);
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

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not one
 * (a stray continuation byte, an overlong form, a surrogate, a code point
 * above U+10FFFF, a truncated sequence). */
static size_t utf8_len(const unsigned char *s)
{
    size_t n;
    uint32_t cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2, cp = s[0] & 0x1fu;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3, cp = s[0] & 0x0fu;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4, cp = s[0] & 0x07u;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0; /* also stops at the terminating NUL */
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* A node or pod name (`what` names its column in messages) must be
 * non-empty, valid UTF-8 and free of spaces: names are fields of the
 * tab-separated decision log and of reports that split at blanks.
 * (csvread has already refused control characters.) */
static int check_name(struct csv_reader *r, const char *what, const char *name)
{
    char qb[80];

    if (*name == '\0')
        return csv_fail(r, "%s is empty", what);
    for (const unsigned char *p = (const unsigned char *)name; *p;) {
        size_t n = utf8_len(p);

        if (n == 0)
            return csv_fail(r, "%s %s is not valid UTF-8 (byte %zu)", what,
                            csv_quote(qb, sizeof(qb), name),
                            (size_t)(p - (const unsigned char *)name) + 1);
        if (*p == ' ')
            return csv_fail(r, "%s %s contains a space", what, csv_quote(qb, sizeof(qb), name));
        p += n;
    }
    return 0;
}

static int node_row(struct csv_reader *r, const int *idx, struct openb_node *nd)
{
    char qb[80];
    int rc;

    if ((rc = csv_check_width(r, NC_COUNT)) < 0)
        return rc;
    nd->name = r->f[idx[NC_SN]];
    nd->model = r->f[idx[NC_MODEL]];
    if ((rc = check_name(r, "sn (the node name)", nd->name)) < 0)
        return rc;
    rc = csv_int(r, "cpu_milli", r->f[idx[NC_CPU]], OPENB_MAX_CPU_MILLI, 0, &nd->cpu_milli);
    if (rc == 0)
        rc = csv_int(r, "memory_mib", r->f[idx[NC_MEM]], OPENB_MAX_MEM_MIB, 0, &nd->memory_mib);
    if (rc == 0)
        rc = rd_small(r, "gpu", r->f[idx[NC_GPU]], OPENB_MAX_GPUS, &nd->gpu);
    if (rc < 0)
        return rc;
    if (nd->gpu > 0 && *nd->model == '\0')
        return csv_fail(r, "model is empty for a node with %d GPUs", nd->gpu);
    if (nd->gpu == 0 && *nd->model != '\0')
        return csv_fail(r, "model %s given for a node with no GPUs",
                        csv_quote(qb, sizeof(qb), nd->model));
    if (strchr(nd->model, '|'))
        return csv_fail(r, "model %s contains '|'", csv_quote(qb, sizeof(qb), nd->model));
    return 0;
}

/* Loads (see csv_open()) and parses a node list into *out (OUT), which then
 * owns the text. */
static int parse_nodes(const char *path, const char *buf, size_t len, const char *name,
                       struct openb_nodes *out, char *err, size_t errlen)
{
    struct csv_reader r;
    int idx[NC_COUNT] = {0};
    struct openb_node *v;
    size_t n = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = csv_open(&r, &openb_format, &node_layout, idx, path, buf, len, name, err, errlen);
    if (rc < 0)
        return rc;
    if (!(v = csv_alloc_rows(&r, sizeof(*v), NULL))) {
        rc = ALLOT_ENOMEM;
        goto out_text;
    }
    while ((rc = csv_next(&r)) > 0) {
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
    out->text = r.text;
    return 0;

out_v:
    allot_free(v);
out_text:
    allot_free(r.text);
    return rc;
}

/* ---- pod lists ---- */

/* Checks a gpu_spec: "" or non-empty model names joined by '|'. */
static int check_spec(struct csv_reader *r, const char *spec)
{
    char qb[80];
    size_t len = strlen(spec);

    if (len == 0)
        return 0;
    if (spec[0] == '|' || spec[len - 1] == '|' || strstr(spec, "||"))
        return csv_fail(r, "gpu_spec %s has an empty model name", csv_quote(qb, sizeof(qb), spec));
    return 0;
}

static const char *opt_str(const struct csv_reader *r, const int *idx, enum pod_col c)
{
    return idx[c] >= 0 ? r->f[idx[c]] : "";
}

static int opt_time(struct csv_reader *r, const int *idx, enum pod_col c, int64_t *out)
{
    if (idx[c] < 0) {
        *out = -1;
        return 0;
    }
    return csv_int(r, pod_cols[c].name, r->f[idx[c]], OPENB_MAX_TIME, CSV_EMPTY_OK, out);
}

static int pod_row(struct csv_reader *r, const int *idx, size_t ncols, struct openb_pod *pd)
{
    int rc;

    if ((rc = csv_check_width(r, ncols)) < 0)
        return rc;
    pd->name = r->f[idx[PC_NAME]];
    if ((rc = check_name(r, "name", pd->name)) < 0)
        return rc;
    pd->memory_mib = -1;
    rc = csv_int(r, "cpu_milli", r->f[idx[PC_CPU]], OPENB_MAX_CPU_MILLI, 0, &pd->cpu_milli);
    if (rc == 0 && idx[PC_MEM] >= 0)
        rc = csv_int(r, "memory_mib", r->f[idx[PC_MEM]], OPENB_MAX_MEM_MIB, 0, &pd->memory_mib);
    if (rc == 0)
        rc = rd_small(r, "num_gpu", r->f[idx[PC_NUM_GPU]], OPENB_MAX_GPUS, &pd->num_gpu);
    if (rc == 0)
        rc = rd_small(r, "gpu_milli", r->f[idx[PC_GPU_MILLI]], OPENB_MILLI_PER_GPU, &pd->gpu_milli);
    if (rc < 0)
        return rc;
    if (pd->num_gpu == 0 && pd->gpu_milli != 0)
        return csv_fail(r, "gpu_milli %d with num_gpu 0", pd->gpu_milli);
    if (pd->num_gpu == 1 && pd->gpu_milli == 0)
        return csv_fail(r, "gpu_milli 0 with num_gpu 1");
    if (pd->num_gpu > 1 && pd->gpu_milli != OPENB_MILLI_PER_GPU)
        return csv_fail(r, "gpu_milli %d with num_gpu %d: only single-GPU pods may share a GPU",
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
        return csv_fail(r, "deletion_time %lld before creation_time %lld",
                        (long long)pd->deletion_time, (long long)pd->creation_time);
    if (pd->creation_time >= 0 && pd->scheduled_time >= 0 && pd->scheduled_time < pd->creation_time)
        return csv_fail(r, "scheduled_time %lld before creation_time %lld",
                        (long long)pd->scheduled_time, (long long)pd->creation_time);
    return 0;
}

/* Loads (see csv_open()) and parses a pod list into *out (OUT), which then
 * owns the text. */
static int parse_pods(const char *path, const char *buf, size_t len, const char *name,
                      struct openb_pods *out, char *err, size_t errlen)
{
    struct csv_reader r;
    int idx[PC_COUNT] = {0};
    struct openb_pod *v;
    size_t n = 0, ncols = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = csv_open(&r, &openb_format, &pod_layout, idx, path, buf, len, name, err, errlen);
    if (rc < 0)
        return rc;
    for (size_t k = 0; k < PC_COUNT; k++)
        ncols += idx[k] >= 0;
    if (!(v = csv_alloc_rows(&r, sizeof(*v), NULL))) {
        rc = ALLOT_ENOMEM;
        goto out_text;
    }
    while ((rc = csv_next(&r)) > 0) {
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
    out->text = r.text;
    return 0;

out_v:
    allot_free(v);
out_text:
    allot_free(r.text);
    return rc;
}

/* ---- entry points ---- */

int openb_read_nodes(const char *path, struct openb_nodes *out, char *err, size_t errlen)
{
    return parse_nodes(path, NULL, 0, path, out, err, errlen);
}

int openb_parse_nodes(const char *buf, size_t len, const char *name, struct openb_nodes *out,
                      char *err, size_t errlen)
{
    return parse_nodes(NULL, buf, len, name, out, err, errlen);
}

int openb_read_pods(const char *path, struct openb_pods *out, char *err, size_t errlen)
{
    return parse_pods(path, NULL, 0, path, out, err, errlen);
}

int openb_parse_pods(const char *buf, size_t len, const char *name, struct openb_pods *out,
                     char *err, size_t errlen)
{
    return parse_pods(NULL, buf, len, name, out, err, errlen);
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

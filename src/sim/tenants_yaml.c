/*
 * Implementation of tenants_yaml.h: libyaml loads the file into its document
 * tree (node marks give the line numbers), then one pass walks the tree with
 * a key table per mapping, and a final pass checks what spans tenants
 * (repeated paths, leaves, children's nominal against a listed parent's).
 *
 * libyaml resolves an alias to the node its anchor names, so a node reached
 * twice during the walk is an alias: every visit marks the node and a second
 * visit is an error. libyaml allocates with its own malloc; everything this
 * file keeps goes through allot_malloc.
 */
#include "tenants_yaml.h"

#include "allot/common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_AMOUNT_MILLI (1000000000LL * 1000) /* 10^9 GPUs or cores */
#define MAX_AMOUNT_MIB   (1LL << 50)

struct ctx {
    yaml_document_t *doc;
    const char *file; /* borrowed display name */
    char *err;        /* caller's buffer */
    size_t errlen;
    const struct allot_catalog *cat; /* borrowed, may be NULL */
    unsigned char *seen;             /* owned: per node index (1-based), visited */
    size_t n_nodes;
};

static int fail(struct ctx *c, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes "FILE:LINE: msg" (or "FILE: msg" without a node); returns EINVAL. */
static int fail(struct ctx *c, const yaml_node_t *n, const char *fmt, ...)
{
    va_list ap;
    int k;

    if (!c->err || c->errlen == 0)
        return ALLOT_EINVAL;
    if (n)
        k = allot_fmt(c->err, c->errlen, "%s:%zu: ", c->file, n->start_mark.line + 1);
    else
        k = allot_fmt(c->err, c->errlen, "%s: ", c->file);
    if (k >= 0 && (size_t)k < c->errlen) {
        va_start(ap, fmt);
        vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return ALLOT_EINVAL;
}

/* Returns node `idx`, marking it visited; NULL (and an error) on a second
 * visit, which only an alias can cause. */
static yaml_node_t *visit(struct ctx *c, int idx, const yaml_node_t *from, int *rc)
{
    yaml_node_t *n = yaml_document_get_node(c->doc, idx);

    if (!n || idx < 1 || (size_t)idx > c->n_nodes) {
        *rc = fail(c, from, "internal: bad node reference");
        return NULL;
    }
    if (c->seen[idx - 1]) {
        *rc = fail(c, from, "aliases (*name) are not supported (the anchor is on line %zu)",
                   n->start_mark.line + 1);
        return NULL;
    }
    c->seen[idx - 1] = 1;
    return n;
}

static bool default_tag(const yaml_node_t *n)
{
    const char *want = n->type == YAML_SCALAR_NODE     ? YAML_DEFAULT_SCALAR_TAG
                       : n->type == YAML_SEQUENCE_NODE ? YAML_DEFAULT_SEQUENCE_TAG
                                                       : YAML_DEFAULT_MAPPING_TAG;

    return n->tag && strcmp((const char *)n->tag, want) == 0;
}

static const char *type_name(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE     ? "a scalar"
           : n->type == YAML_SEQUENCE_NODE ? "a list"
                                           : "a mapping";
}

/* The text of scalar node n, for `what`; NULL (and an error) otherwise. */
static const char *scalar(struct ctx *c, const yaml_node_t *n, const char *what, int *rc)
{
    const char *s;

    if (!default_tag(n)) {
        *rc = fail(c, n, "%s: tags are not supported", what);
        return NULL;
    }
    if (n->type != YAML_SCALAR_NODE) {
        *rc = fail(c, n, "%s must be a scalar, not %s", what, type_name(n));
        return NULL;
    }
    s = (const char *)n->data.scalar.value;
    if (strlen(s) != n->data.scalar.length) {
        *rc = fail(c, n, "%s contains a NUL byte", what);
        return NULL;
    }
    if (*s == '\0') {
        *rc = fail(c, n, "%s is empty", what);
        return NULL;
    }
    return s;
}

/*
 * The text of scalar node n where a number or an amount is expected, for
 * `what`: as scalar(), but a quoted scalar ("2", '2') or one with a tag
 * (!!str 2; libyaml resolves it to the default tag) or an anchor is a
 * string, not a number, and an error. A plain scalar spans exactly its
 * text, so a longer span means properties before it. NULL (and an error)
 * otherwise.
 */
static const char *number_scalar(struct ctx *c, const yaml_node_t *n, const char *what, int *rc)
{
    const char *s = scalar(c, n, what, rc);
    bool ascii = true;

    if (!s)
        return NULL;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        *rc = fail(c, n, "%s \"%.40s\" is quoted, so a string: write it without quotes", what, s);
        return NULL;
    }
    for (const char *p = s; *p; p++)
        ascii = ascii && (unsigned char)*p < 0x80;
    /* marks count characters: compare only when they are bytes */
    if (ascii && n->end_mark.index - n->start_mark.index != n->data.scalar.length) {
        *rc = fail(c, n, "%s \"%.40s\" has a tag or an anchor (such as !!str): write it plain",
                   what, s);
        return NULL;
    }
    return s;
}

/*
 * Matches the keys of mapping n (for `what`) against keys[0..nkeys); the
 * value node of key k goes to vals[k] (NULL when absent). A key starting
 * with "gpu:" is accepted when `prefix_ok` and passed back through
 * extra/n_extra (room for ALLOT_MAX_MODELS). Unknown or repeated keys are
 * errors.
 */
static int map_fields(struct ctx *c, const yaml_node_t *n, const char *what,
                      const char *const *keys, int nkeys, yaml_node_t **vals,
                      yaml_node_pair_t **extra, int *n_extra)
{
    int rc = 0;

    for (int k = 0; k < nkeys; k++)
        vals[k] = NULL;
    if (n_extra)
        *n_extra = 0;
    if (!default_tag(n))
        return fail(c, n, "%s: tags are not supported", what);
    if (n->type != YAML_MAPPING_NODE)
        return fail(c, n, "%s must be a mapping, not %s", what, type_name(n));
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = visit(c, p->key, n, &rc), *vn;
        const char *key;
        int k;

        if (!kn || !(key = scalar(c, kn, "a key", &rc)))
            return rc;
        for (k = 0; k < nkeys; k++)
            if (strcmp(key, keys[k]) == 0)
                break;
        if (k == nkeys && extra && strncmp(key, "gpu:", 4) == 0) {
            for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < p; q++)
                if (strcmp((const char *)yaml_document_get_node(c->doc, q->key)->data.scalar.value,
                           key) == 0)
                    return fail(c, kn, "%s: key \"%s\" given twice", what, key);
            if (*n_extra >= ALLOT_MAX_MODELS)
                return fail(c, kn, "%s: too many per-model quotas", what);
            extra[(*n_extra)++] = p;
            continue;
        }
        if (k == nkeys) {
            char list[256] = "";
            size_t o = 0;

            for (int i = 0; i < nkeys; i++)
                o += (size_t)allot_fmt(list + o, o < sizeof(list) ? sizeof(list) - o : 0, "%s%s",
                                       i ? ", " : "", keys[i]);
            return fail(c, kn, "%s: unknown key \"%.64s\" (expected %s%s)", what, key, list,
                        extra ? ", gpu:<model>" : "");
        }
        if (vals[k])
            return fail(c, kn, "%s: key \"%s\" given twice", what, key);
        vn = visit(c, p->value, kn, &rc);
        if (!vn)
            return rc;
        vals[k] = vn;
    }
    return 0;
}

/* Parses `D[.D]` with at most `max_frac` fraction digits into units of
 * 10^-max_frac (so 3 gives milli). Returns false on bad syntax or overflow. */
static bool parse_fixed(const char *s, int max_frac, int64_t max, int64_t *out)
{
    int64_t v = 0;
    int frac = -1;
    const char *p = s;

    if (*p < '0' || *p > '9')
        return false;
    for (; *p; p++) {
        if (*p == '.' && frac < 0) {
            frac = 0;
            if (p[1] < '0' || p[1] > '9')
                return false;
            continue;
        }
        if (*p < '0' || *p > '9' || (frac >= 0 && ++frac > max_frac))
            return false;
        if (v > (INT64_MAX / 10) - 10)
            return false;
        v = v * 10 + (*p - '0');
    }
    for (int i = frac < 0 ? 0 : frac; i < max_frac; i++) {
        if (v > INT64_MAX / 10)
            return false;
        v *= 10;
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

enum unit { U_GPU, U_CPU, U_MEM };

static enum unit res_unit(int res)
{
    return res == ALLOT_RES_CPU                                 ? U_CPU
           : (res == ALLOT_RES_MEM || res == ALLOT_RES_GPU_MEM) ? U_MEM
                                                                : U_GPU;
}

/* Parses an amount in the unit of `u` (see the header) or "unlimited". */
static int parse_amount(struct ctx *c, const yaml_node_t *n, const char *what, enum unit u,
                        int64_t *out)
{
    static const char *const help[] = {
        [U_GPU] = "a number of GPUs (up to 3 decimals) or unlimited",
        [U_CPU] = "cores (up to 3 decimals), milli-cores like 500m, or unlimited",
        [U_MEM] = "MiB, or a whole number with Mi, Gi or Ti, or unlimited",
    };
    int rc = 0;
    const char *s = number_scalar(c, n, what, &rc);
    size_t len;
    bool ok = false;

    if (!s)
        return rc;
    len = strlen(s);
    if (strcmp(s, "unlimited") == 0) {
        *out = ALLOT_UNLIMITED;
        return 0;
    }
    if (u == U_GPU) {
        ok = parse_fixed(s, 3, MAX_AMOUNT_MILLI, out);
    } else if (u == U_CPU) {
        if (len > 1 && s[len - 1] == 'm' && len < 32) {
            char num[32];

            memcpy(num, s, len - 1);
            num[len - 1] = '\0';
            ok = parse_fixed(num, 0, MAX_AMOUNT_MILLI, out);
        } else {
            ok = parse_fixed(s, 3, MAX_AMOUNT_MILLI, out);
        }
    } else {
        static const struct {
            const char *sfx;
            int shift;
        } units[] = {{"Mi", 0}, {"Gi", 10}, {"Ti", 20}};
        int shift = 0;
        char num[32];

        if (len < sizeof(num)) {
            memcpy(num, s, len + 1);
            for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
                if (len > 2 && strcmp(s + len - 2, units[i].sfx) == 0) {
                    num[len - 2] = '\0';
                    shift = units[i].shift;
                }
            ok = parse_fixed(num, 0, MAX_AMOUNT_MIB >> shift, out);
            *out <<= ok ? shift : 0;
        }
    }
    if (!ok)
        return fail(c, n, "%s \"%.40s\": want %s", what, s, help[u]);
    return 0;
}

/* Writes amount v of resource res for a message. */
static const char *amount_text(char *buf, size_t len, int res, int64_t v)
{
    switch (res_unit(res)) {
    case U_GPU:
        allot_fmt(buf, len, "%lld.%03lld GPUs", (long long)(v / 1000), (long long)(v % 1000));
        break;
    case U_CPU:
        allot_fmt(buf, len, "%lld.%03lld cores", (long long)(v / 1000), (long long)(v % 1000));
        break;
    case U_MEM:
        allot_fmt(buf, len, "%lld MiB", (long long)v);
        break;
    }
    return buf;
}

static int parse_bool(struct ctx *c, const yaml_node_t *n, const char *what, bool *out)
{
    int rc = 0;
    const char *s = scalar(c, n, what, &rc);

    if (!s)
        return rc;
    if (strcmp(s, "true") == 0)
        *out = true;
    else if (strcmp(s, "false") == 0)
        *out = false;
    else
        return fail(c, n, "%s \"%.40s\": want true or false", what, s);
    return 0;
}

/* A name or path element: 1..max bytes of [A-Za-z0-9_.-]. */
static bool name_ok(const char *s, size_t len)
{
    if (len == 0 || (s[0] == '.' && (len == 1 || (len == 2 && s[1] == '.'))))
        return false; /* no empty, "." or ".." step */
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            return false;
    }
    return true;
}

bool sim_tenant_path_ok(const char *s)
{
    size_t len = strlen(s);

    if (len > SIM_TENANT_PATH_MAX)
        return false;
    for (const char *p = s;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);

        if (!name_ok(p, n))
            return false;
        if (!slash)
            return true;
        p = slash + 1;
    }
}

/* ---- one quota, one tenant, one class ---- */

enum { Q_NOMINAL, Q_BORROW, Q_LEND, Q_COUNT };
static const char *const quota_keys[Q_COUNT] = {"nominal", "borrow_limit", "lend_limit"};

static int parse_quota(struct ctx *c, const yaml_node_t *n, const char *what, int res,
                       struct allot_quota *q, bool *summed)
{
    yaml_node_t *v[Q_COUNT];
    enum unit u = res_unit(res);
    int rc;

    q->borrow_limit = ALLOT_UNLIMITED;
    q->lend_limit = ALLOT_UNLIMITED;
    if (n->type == YAML_SCALAR_NODE)
        return parse_amount(c, n, what, u, &q->nominal);
    if ((rc = map_fields(c, n, what, quota_keys, Q_COUNT, v, NULL, NULL)) < 0)
        return rc;
    /* no nominal: a parent's limits over its tenants' nominals added up
     * (check_tree refuses it on a leaf) */
    *summed = !v[Q_NOMINAL];
    q->nominal = ALLOT_UNLIMITED;
    if ((v[Q_NOMINAL] && (rc = parse_amount(c, v[Q_NOMINAL], "nominal", u, &q->nominal)) < 0) ||
        (v[Q_BORROW] &&
         (rc = parse_amount(c, v[Q_BORROW], "borrow_limit", u, &q->borrow_limit)) < 0) ||
        (v[Q_LEND] && (rc = parse_amount(c, v[Q_LEND], "lend_limit", u, &q->lend_limit)) < 0))
        return rc;
    return 0;
}

enum { R_GPU, R_CPU, R_MEM, R_GPU_MEM, R_COUNT };
static const char *const res_keys[R_COUNT] = {"gpu", "cpu", "memory", "gpu_memory"};
static const int res_ids[R_COUNT] = {ALLOT_RES_GPU, ALLOT_RES_CPU, ALLOT_RES_MEM,
                                     ALLOT_RES_GPU_MEM};

static int parse_quotas(struct ctx *c, const yaml_node_t *n, struct sim_tenant_conf *t)
{
    yaml_node_t *v[R_COUNT];
    yaml_node_pair_t *extra[ALLOT_MAX_MODELS];
    int n_extra = 0, rc;

    if ((rc = map_fields(c, n, "quotas", res_keys, R_COUNT, v, extra, &n_extra)) < 0)
        return rc;
    for (int k = 0; k < R_COUNT; k++) {
        if (!v[k])
            continue;
        if ((rc = parse_quota(c, v[k], res_keys[k], res_ids[k], &t->quota[res_ids[k]],
                              &t->nominal_summed[res_ids[k]])) < 0)
            return rc;
        t->has_quota[res_ids[k]] = true;
    }
    for (int i = 0; i < n_extra; i++) {
        yaml_node_t *kn = yaml_document_get_node(c->doc, extra[i]->key), *vn;
        const char *key = (const char *)kn->data.scalar.value;
        int model = c->cat ? allot_catalog_find_model(c->cat, key + 4) : -1, res;

        if (model < 0)
            return fail(c, kn, "quotas: unknown GPU model \"%.40s\" in \"%.48s\"", key + 4, key);
        res = ALLOT_RES_MODEL0 + model;
        if (t->has_quota[res])
            return fail(c, kn, "quotas: \"%.48s\" names the same model as an earlier key", key);
        if (!(vn = visit(c, extra[i]->value, kn, &rc)) ||
            (rc = parse_quota(c, vn, key, res, &t->quota[res], &t->nominal_summed[res])) < 0)
            return rc;
        t->has_quota[res] = true;
    }
    return 0;
}

static int parse_mix(struct ctx *c, const yaml_node_t *n, struct sim_tenant_conf *t)
{
    yaml_node_t *v[MTGEN_KINDS];
    int64_t sum = 0;
    int rc;

    if ((rc = map_fields(c, n, "synthetic", mtgen_kind_names, MTGEN_KINDS, v, NULL, NULL)) < 0)
        return rc;
    for (int k = 0; k < MTGEN_KINDS; k++) {
        const char *s;
        int64_t x = 0;

        if (!v[k])
            continue;
        if (!(s = number_scalar(c, v[k], mtgen_kind_names[k], &rc)))
            return rc;
        if (!parse_fixed(s, 3, 1000, &x))
            return fail(c, v[k], "%s \"%.40s\": want a share 0..1 (up to 3 decimals)",
                        mtgen_kind_names[k], s);
        t->mix[k] = (double)x / 1000.0;
        sum += x;
    }
    if (sum != 1000)
        return fail(c, n, "synthetic: the shares add up to %.3f, not 1", (double)sum / 1000.0);
    t->has_mix = true;
    return 0;
}

enum { T_PATH, T_WEIGHT, T_ISOLATION, T_QUOTAS, T_SYNTHETIC, T_COUNT };
static const char *const tenant_keys[T_COUNT] = {"path", "weight", "isolation", "quotas",
                                                 "synthetic"};

static int parse_tenant(struct ctx *c, const yaml_node_t *n, struct sim_tenant_conf *t)
{
    static const char *const iso[] = {[ALLOT_ISO_SHARED] = "shared",
                                      [ALLOT_ISO_EXCLUSIVE_GPU] = "exclusive-gpu",
                                      [ALLOT_ISO_EXCLUSIVE_NODE] = "exclusive-node"};
    yaml_node_t *v[T_COUNT];
    const char *s;
    int rc = 0;

    t->line = (unsigned)n->start_mark.line + 1;
    t->weight = 1.0;
    t->isolation = ALLOT_ISO_SHARED;
    if ((rc = map_fields(c, n, "a tenant", tenant_keys, T_COUNT, v, NULL, NULL)) < 0)
        return rc;
    if (!v[T_PATH])
        return fail(c, n, "a tenant needs a path");
    if (!(s = scalar(c, v[T_PATH], "path", &rc)))
        return rc;
    if (!sim_tenant_path_ok(s))
        return fail(c, v[T_PATH],
                    "path \"%.64s\": want names of [A-Za-z0-9_.-] joined by '/', at most %d bytes",
                    s, SIM_TENANT_PATH_MAX);
    t->path = allot_strdup(s);
    if (!t->path)
        return ALLOT_ENOMEM;
    if (v[T_WEIGHT]) {
        int64_t w = 0;

        if (!(s = number_scalar(c, v[T_WEIGHT], "weight", &rc)))
            return rc;
        if (!parse_fixed(s, 3, 1000000000LL, &w) || w == 0)
            return fail(c, v[T_WEIGHT], "weight \"%.40s\": want a number > 0 (up to 3 decimals)",
                        s);
        t->weight = (double)w / 1000.0;
    }
    if (v[T_ISOLATION]) {
        size_t k;

        if (!(s = scalar(c, v[T_ISOLATION], "isolation", &rc)))
            return rc;
        for (k = 0; k < sizeof(iso) / sizeof(iso[0]); k++)
            if (strcmp(s, iso[k]) == 0)
                break;
        if (k == sizeof(iso) / sizeof(iso[0]))
            return fail(c, v[T_ISOLATION],
                        "isolation \"%.40s\": want shared, exclusive-gpu or exclusive-node", s);
        t->isolation = (int)k;
    }
    if (v[T_QUOTAS] && (rc = parse_quotas(c, v[T_QUOTAS], t)) < 0)
        return rc;
    if (v[T_SYNTHETIC] && (rc = parse_mix(c, v[T_SYNTHETIC], t)) < 0)
        return rc;
    return 0;
}

enum { P_NAME, P_VALUE, P_PREEMPTIBLE, P_COUNT };
static const char *const prio_keys[P_COUNT] = {"name", "value", "preemptible"};

static int parse_prio(struct ctx *c, const yaml_node_t *n, struct sim_prio_conf *p)
{
    yaml_node_t *v[P_COUNT];
    const char *s;
    int64_t val = 0;
    int rc = 0;

    p->line = (unsigned)n->start_mark.line + 1;
    p->preemptible = true;
    if ((rc = map_fields(c, n, "a priority class", prio_keys, P_COUNT, v, NULL, NULL)) < 0)
        return rc;
    if (!v[P_NAME] || !v[P_VALUE])
        return fail(c, n, "a priority class needs a name and a value");
    if (!(s = scalar(c, v[P_NAME], "name", &rc)))
        return rc;
    if (strlen(s) >= sizeof(p->name) || !name_ok(s, strlen(s)))
        return fail(c, v[P_NAME], "name \"%.40s\": want 1..31 bytes of [A-Za-z0-9_.-]", s);
    allot_strlcpy(p->name, s, sizeof(p->name));
    if (!(s = number_scalar(c, v[P_VALUE], "value", &rc)))
        return rc;
    if (!parse_fixed(s[0] == '-' ? s + 1 : s, 0, 1000000000LL, &val))
        return fail(c, v[P_VALUE], "value \"%.40s\": want an integer -1000000000..1000000000", s);
    p->value = (int)(s[0] == '-' ? -val : val);
    if (v[P_PREEMPTIBLE] &&
        (rc = parse_bool(c, v[P_PREEMPTIBLE], "preemptible", &p->preemptible)) < 0)
        return rc;
    return 0;
}

/* ---- checks across tenants ---- */

static int cmp_path(const void *a, const void *b, void *ud)
{
    const struct sim_tenant_conf *v = ud;
    int ia = *(const int *)a, ib = *(const int *)b;
    int r = strcmp(v[ia].path, v[ib].path);

    return r ? r : (ia > ib) - (ia < ib);
}

/* Sorted index: binary search of a path (length len). */
static int find_sorted(const struct sim_tenant_conf *v, const int *ord, size_t n, const char *path,
                       size_t len)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *m = v[ord[mid]].path;
        int r = strncmp(m, path, len);

        if (r == 0 && m[len] != '\0')
            r = 1;
        if (r < 0)
            lo = mid + 1;
        else if (r > 0)
            hi = mid;
        else
            return ord[mid];
    }
    return -1;
}

/* Sorts tenant indices by path (a merge sort: O(n log n), stable). */
static void sort_ord(int *ord, int *tmp, size_t n, const struct sim_tenant_conf *v)
{
    if (n < 2)
        return;
    sort_ord(ord, tmp, n / 2, v);
    sort_ord(ord + n / 2, tmp, n - n / 2, v);
    for (size_t i = 0, a = 0, b = n / 2; i < n; i++)
        tmp[i] = (b >= n || (a < n / 2 && cmp_path(&ord[a], &ord[b], (void *)v) <= 0)) ? ord[a++]
                                                                                       : ord[b++];
    memcpy(ord, tmp, n * sizeof(*ord));
}

/* The nearest listed ancestor of each tenant of conf (up[i], -1 none),
 * looked up through ord (indices sorted by path) or, when NULL, a scan. */
static void find_ups(const struct sim_tenants_conf *conf, const int *ord, int *up)
{
    for (size_t i = 0; i < conf->n; i++) {
        const char *p = conf->v[i].path;

        up[i] = -1;
        for (size_t len = strlen(p); len > 0 && up[i] < 0; len--) {
            if (p[len - 1] != '/')
                continue;
            if (ord) {
                up[i] = find_sorted(conf->v, ord, conf->n, p, len - 1);
            } else {
                for (size_t k = 0; k < conf->n && up[i] < 0; k++)
                    if (strlen(conf->v[k].path) == len - 1 && !strncmp(conf->v[k].path, p, len - 1))
                        up[i] = (int)k;
            }
        }
    }
}

/* The first listed tenant whose own nominal of some resource is less than
 * the nominals of the tenants nearest below it add up to (*res and *sum:
 * which resource, and that sum), or -1. up: find_ups; sum: n scratch. */
static int over_parent(const struct sim_tenants_conf *conf, const int *up, int64_t *sum,
                       int *res_out, int64_t *sum_out)
{
    size_t n = conf->n;

    for (int res = 0; res < ALLOT_RES_MAX; res++) {
        memset(sum, 0, n * sizeof(*sum));
        for (size_t i = 0; i < n; i++) {
            int64_t v = conf->v[i].quota[res].nominal;

            /* capped: 8,192 children of 2^50 MiB pass INT64_MAX (fuzz_tenants) */
            if (up[i] >= 0 && conf->v[i].has_quota[res] && v != ALLOT_UNLIMITED)
                sum[up[i]] = v > INT64_MAX - sum[up[i]] ? INT64_MAX : sum[up[i]] + v;
        }
        for (size_t pi = 0; pi < n; pi++) {
            const struct sim_tenant_conf *p = &conf->v[pi];

            if (p->has_quota[res] && p->quota[res].nominal != ALLOT_UNLIMITED &&
                sum[pi] > p->quota[res].nominal) {
                *res_out = res;
                *sum_out = sum[pi];
                return (int)pi;
            }
        }
    }
    return -1;
}

int sim_tenants_nominals_over(const struct sim_tenants_conf *c, int *at, int *res, int64_t *sum)
{
    int *up = allot_malloc((c->n + 1) * sizeof(*up));
    int64_t *scratch = allot_malloc((c->n + 1) * sizeof(*scratch));
    int rc = ALLOT_ENOMEM;

    if (up && scratch) {
        find_ups(c, c->sorted, up);
        *at = over_parent(c, up, scratch, res, sum);
        rc = *at >= 0;
    }
    allot_free(up);
    allot_free(scratch);
    return rc;
}

/* A resource's name as a quotas key ("gpu", "gpu:A100-80GB"). */
static const char *res_name(const struct ctx *c, int res, char *name, size_t n)
{
    if (res >= ALLOT_RES_MODEL0 && c->cat)
        allot_fmt(name, n, "gpu:%s", c->cat->models[res - ALLOT_RES_MODEL0].name);
    else
        allot_strlcpy(name, res_keys[res < R_COUNT ? res : 0], n);
    return name;
}

static int check_tree(struct ctx *c, struct sim_tenants_conf *conf)
{
    size_t n = conf->n;
    int *ord = allot_malloc(n * sizeof(*ord)), *tmp = allot_malloc(n * sizeof(*tmp));
    int *up = allot_malloc(n * sizeof(*up)); /* nearest listed ancestor or -1 */
    int64_t *sum = allot_malloc(n * sizeof(*sum));
    int rc = 0;

    if (!ord || !tmp || !up || !sum) {
        rc = ALLOT_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        ord[i] = (int)i;
        conf->v[i].leaf = true;
    }
    sort_ord(ord, tmp, n, conf->v);
    for (size_t i = 1; i < n; i++) {
        const struct sim_tenant_conf *a = &conf->v[ord[i - 1]], *b = &conf->v[ord[i]];

        if (strcmp(a->path, b->path) == 0) {
            yaml_node_t at = {.start_mark.line = b->line - 1};
            rc = fail(c, &at, "tenant \"%s\" listed twice (first on line %u)", b->path, a->line);
            goto out;
        }
    }
    /* a tenant with a listed one below it is a parent (the one nearest
     * below marks it; farther ancestors are marked by the nearer ones) */
    find_ups(conf, ord, up);
    for (size_t i = 0; i < n; i++)
        if (up[i] >= 0)
            conf->v[up[i]].leaf = false;
    /* a nominal left out only where there are children to sum */
    for (int res = 0; res < ALLOT_RES_MAX; res++)
        for (size_t i = 0; i < n; i++)
            if (conf->v[i].nominal_summed[res] && conf->v[i].leaf) {
                yaml_node_t at = {.start_mark.line = conf->v[i].line - 1};
                char name[64];

                rc = fail(c, &at,
                          "%s: nominal is missing (only a tenant with tenants below it may "
                          "leave it out: its nominal is theirs added up)",
                          res_name(c, res, name, sizeof(name)));
                goto out;
            }
    /* children's nominal quotas against a listed parent's */
    int res, pi;
    int64_t over;
    if ((pi = over_parent(conf, up, sum, &res, &over)) >= 0) {
        const struct sim_tenant_conf *p = &conf->v[pi];
        yaml_node_t at = {.start_mark.line = p->line - 1};
        char a[48], b[48], name[64];

        res_name(c, res, name, sizeof(name));
        rc = fail(c, &at,
                  "the %s nominal quotas of the tenants below \"%s\" add up to %s, more than its "
                  "own %s",
                  name, p->path, amount_text(a, sizeof(a), res, over),
                  amount_text(b, sizeof(b), res, p->quota[res].nominal));
    }
out:
    if (rc == 0) { /* kept for lookups (sim_tenants_conf_find) */
        allot_free(conf->sorted);
        conf->sorted = ord;
        ord = NULL;
    }
    allot_free(ord);
    allot_free(tmp);
    allot_free(up);
    allot_free(sum);
    return rc;
}

/* ---- the document ---- */

enum { D_VERSION, D_TENANTS, D_PRIO, D_COUNT };
static const char *const doc_keys[D_COUNT] = {"version", "tenants", "priority_classes"};

static int parse_doc(struct ctx *c, yaml_node_t *root, struct sim_tenants_conf *out)
{
    yaml_node_t *v[D_COUNT];
    const char *s;
    int rc = 0;
    size_t n;

    c->seen[0] = 1; /* the root is node 1 */
    if ((rc = map_fields(c, root, "the file", doc_keys, D_COUNT, v, NULL, NULL)) < 0)
        return rc;
    if (!v[D_VERSION])
        return fail(c, root, "version is missing (want version: 1)");
    if (!(s = number_scalar(c, v[D_VERSION], "version", &rc)))
        return rc;
    if (strcmp(s, "1") != 0)
        return fail(c, v[D_VERSION], "version \"%.40s\" is not supported (want 1)", s);
    if (!v[D_TENANTS])
        return fail(c, root, "tenants is missing");
    if (v[D_TENANTS]->type != YAML_SEQUENCE_NODE || !default_tag(v[D_TENANTS]))
        return fail(c, v[D_TENANTS], "tenants must be a list");
    n = (size_t)(v[D_TENANTS]->data.sequence.items.top - v[D_TENANTS]->data.sequence.items.start);
    if (n == 0)
        return fail(c, v[D_TENANTS], "tenants is empty");
    if (n > SIM_TENANTS_MAX)
        return fail(c, v[D_TENANTS], "more than %d tenants", SIM_TENANTS_MAX);
    out->v = allot_calloc(n, sizeof(*out->v));
    if (!out->v)
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *tn = visit(c, v[D_TENANTS]->data.sequence.items.start[i], v[D_TENANTS], &rc);

        if (!tn)
            return rc;
        out->n++;
        if ((rc = parse_tenant(c, tn, &out->v[i])) < 0)
            return rc;
    }
    if (v[D_PRIO]) {
        yaml_node_t *pn = v[D_PRIO];

        if (pn->type != YAML_SEQUENCE_NODE || !default_tag(pn))
            return fail(c, pn, "priority_classes must be a list");
        for (yaml_node_item_t *it = pn->data.sequence.items.start; it < pn->data.sequence.items.top;
             it++) {
            yaml_node_t *cn = visit(c, *it, pn, &rc);
            struct sim_prio_conf *p;

            if (!cn)
                return rc;
            if (out->n_prio == ALLOT_PRIO_CLASSES)
                return fail(c, cn, "more than %d priority classes", ALLOT_PRIO_CLASSES);
            p = &out->prio[out->n_prio];
            if ((rc = parse_prio(c, cn, p)) < 0)
                return rc;
            for (int k = 0; k < out->n_prio; k++)
                if (strcmp(out->prio[k].name, p->name) == 0)
                    return fail(c, cn, "priority class \"%s\" defined twice (first on line %u)",
                                p->name, out->prio[k].line);
            out->n_prio++;
        }
    }
    return check_tree(c, out);
}

int sim_tenants_parse(const char *buf, size_t len, const char *name,
                      const struct allot_catalog *cat, struct sim_tenants_conf *out, char *err,
                      size_t errlen)
{
    struct ctx c = {.file = name, .err = err, .errlen = errlen, .cat = cat};
    yaml_parser_t parser;
    yaml_document_t doc, doc2;
    yaml_node_t *root;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    if (len > SIM_TENANTS_MAX_FILE)
        return fail(&c, NULL, "larger than %u bytes", (unsigned)SIM_TENANTS_MAX_FILE);
    if (memchr(buf, '\0', len))
        return fail(&c, NULL, "contains a NUL byte");
    if (!yaml_parser_initialize(&parser))
        return ALLOT_ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&parser, &doc)) {
        yaml_node_t at = {.start_mark = parser.problem_mark};

        rc = parser.error == YAML_MEMORY_ERROR
                 ? ALLOT_ENOMEM
                 : fail(&c, &at, "%s%s%s", parser.context ? parser.context : "",
                        parser.context ? ": " : "", parser.problem ? parser.problem : "bad YAML");
        goto out_parser;
    }
    c.doc = &doc;
    root = yaml_document_get_root_node(&doc);
    if (!root) {
        rc = fail(&c, NULL, "empty file, expected a mapping with version and tenants");
        goto out_doc;
    }
    c.n_nodes = (size_t)(doc.nodes.top - doc.nodes.start);
    c.seen = allot_calloc(c.n_nodes, 1);
    if (!c.seen) {
        rc = ALLOT_ENOMEM;
        goto out_doc;
    }
    if ((rc = parse_doc(&c, root, out)) < 0)
        goto out_seen;
    if (!yaml_parser_load(&parser, &doc2)) {
        yaml_node_t at = {.start_mark = parser.problem_mark};

        rc = fail(&c, &at, "%s", parser.problem ? parser.problem : "bad YAML");
        goto out_seen;
    }
    if (yaml_document_get_root_node(&doc2)) {
        yaml_node_t at = {.start_mark = yaml_document_get_root_node(&doc2)->start_mark};

        rc = fail(&c, &at, "a second document: one document per file");
    }
    yaml_document_delete(&doc2);
out_seen:
    allot_free(c.seen);
out_doc:
    yaml_document_delete(&doc);
out_parser:
    yaml_parser_delete(&parser);
    if (rc == ALLOT_ENOMEM)
        fail(&c, NULL, "out of memory");
    if (rc < 0)
        sim_tenants_conf_free(out);
    return rc;
}

int sim_tenants_read(const char *path, const struct allot_catalog *cat,
                     struct sim_tenants_conf *out, char *err, size_t errlen)
{
    FILE *f;
    char *buf;
    size_t n;
    int rc;

    memset(out, 0, sizeof(*out));
    f = fopen(path, "rb");
    if (!f) {
        allot_fmt(err, errlen, "%s: %s", path, strerror(errno));
        return ALLOT_EIO;
    }
    buf = allot_malloc((size_t)SIM_TENANTS_MAX_FILE + 1);
    if (!buf) {
        fclose(f);
        allot_fmt(err, errlen, "%s: out of memory", path);
        return ALLOT_ENOMEM;
    }
    n = fread(buf, 1, (size_t)SIM_TENANTS_MAX_FILE + 1, f);
    if (ferror(f)) {
        allot_fmt(err, errlen, "%s: %s", path, strerror(errno));
        rc = ALLOT_EIO;
    } else {
        rc = sim_tenants_parse(buf, n, path, cat, out, err, errlen);
    }
    fclose(f);
    allot_free(buf);
    return rc;
}

void sim_tenants_conf_free(struct sim_tenants_conf *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        allot_free(c->v[i].path);
    allot_free(c->v);
    allot_free(c->sorted);
    memset(c, 0, sizeof(*c));
}

int sim_tenants_conf_find(const struct sim_tenants_conf *c, const char *path)
{
    if (c->sorted)
        return find_sorted(c->v, c->sorted, c->n, path, strlen(path));
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].path, path) == 0)
            return (int)i;
    return -1;
}

int sim_tenants_conf_below(const struct sim_tenants_conf *c, const char *path)
{
    size_t len = strlen(path), lo = 0, hi = c->n;

    if (!c->sorted) {
        for (size_t i = 0; i < c->n; i++)
            if (strncmp(c->v[i].path, path, len) == 0 && c->v[i].path[len] == '/')
                return (int)i;
        return -1;
    }
    /* the first path not before path + "/" in the sorted order: the paths
     * below path come together there ('/' sorts before every character
     * a path step may hold) */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *m = c->v[c->sorted[mid]].path;
        int r = strncmp(m, path, len);

        if (r == 0)
            r = (unsigned char)m[len] < '/' ? -1 : 0;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < c->n) {
        const char *m = c->v[c->sorted[lo]].path;

        if (strncmp(m, path, len) == 0 && m[len] == '/')
            return c->sorted[lo];
    }
    return -1;
}

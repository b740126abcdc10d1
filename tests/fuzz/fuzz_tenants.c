/*
 * Fuzz target: the tenant tree in its two request forms. The bytes are
 * read as the tenants file of allot-sim and `allot apply -f` (YAML, by
 * sim_tenants_parse), and, when they are a JSON object, as the body of
 * PUT /v1/tenants (tenants_doc_check, then tenants_doc_parse, which
 * rewrites the document as YAML for the same parser). Invariants: the
 * parsers return 0 or ALLOT_EINVAL with a message; an accepted tree obeys
 * tenants_yaml.h (unique well-formed paths, weight > 0, known isolation,
 * quotas >= 0, classes named and unique, leaves marked, children's
 * nominals within a listed parent's) and applies to a fresh core tree
 * without error, as allotd's scheduling loop applies it.
 */
#include "fuzz.h"

#include "tenants.h"

#include "allot/catalog.h"
#include "allot/common.h"

#include <math.h>
#include <string.h>

static struct allot_catalog *cat; /* owned; loaded once, kept for the process */

static bool path_ok(const char *p)
{
    size_t n = strlen(p);

    if (!n || n > SIM_TENANT_PATH_MAX || p[0] == '/' || p[n - 1] == '/' || strstr(p, "//"))
        return false;
    return true;
}

/* True when b lies below a ("a/..."). */
static bool below(const char *a, const char *b)
{
    size_t n = strlen(a);

    return !strncmp(a, b, n) && b[n] == '/';
}

static void check_conf(const struct sim_tenants_conf *c)
{
    FUZZ_CHECK(c->n >= 1 && c->n <= SIM_TENANTS_MAX && c->v);
    FUZZ_CHECK(c->n_prio >= 0 && c->n_prio <= ALLOT_PRIO_CLASSES);
    for (size_t i = 0; i < c->n; i++) {
        const struct sim_tenant_conf *t = &c->v[i];
        bool leaf = true;

        FUZZ_CHECK(t->path && path_ok(t->path));
        FUZZ_CHECK(isfinite(t->weight) && t->weight > 0);
        FUZZ_CHECK(t->isolation >= ALLOT_ISO_SHARED && t->isolation <= ALLOT_ISO_EXCLUSIVE_NODE);
        for (int r = 0; r < ALLOT_RES_MAX; r++) {
            if (!t->has_quota[r])
                continue;
            FUZZ_CHECK(r < ALLOT_RES_MODEL0 + cat->n_models);
            FUZZ_CHECK(t->quota[r].nominal >= 0 && t->quota[r].borrow_limit >= 0 &&
                       t->quota[r].lend_limit >= 0);
        }
        if (t->has_mix) {
            double sum = 0;

            for (int k = 0; k < MTGEN_KINDS; k++) {
                FUZZ_CHECK(t->mix[k] >= 0);
                sum += t->mix[k];
            }
            FUZZ_CHECK(fabs(sum - 1) < 1e-6);
        }
        /* quadratic, but accepted inputs of a fuzzing run are small */
        for (size_t j = 0; j < c->n && c->n <= 1000; j++) {
            FUZZ_CHECK(j == i || strcmp(t->path, c->v[j].path) != 0);
            if (below(t->path, c->v[j].path))
                leaf = false;
        }
        FUZZ_CHECK(c->n > 1000 || t->leaf == leaf);
    }
    for (int i = 0; i < c->n_prio; i++) {
        FUZZ_CHECK(memchr(c->prio[i].name, '\0', sizeof(c->prio[i].name)) != NULL);
        FUZZ_CHECK(c->prio[i].name[0] != '\0');
        for (int j = 0; j < i; j++)
            FUZZ_CHECK(strcmp(c->prio[i].name, c->prio[j].name) != 0);
    }
}

static const struct sim_tenants_conf *sorting; /* qsort has no context argument */

static int by_path(const void *a, const void *b)
{
    return strcmp(sorting->v[*(const size_t *)a].path, sorting->v[*(const size_t *)b].path);
}

/* Index of the listed tenant whose path is the len bytes at p, or -1. */
static long find_listed(const struct sim_tenants_conf *c, const size_t *ord, const char *p,
                        size_t len)
{
    size_t lo = 0, hi = c->n;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *m = c->v[ord[mid]].path;
        int r = strncmp(m, p, len);

        if (r == 0 && m[len])
            r = 1;
        if (r == 0)
            return (long)ord[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* tenants_yaml.h: the nominal quotas of the tenants whose nearest listed
 * ancestor is P add up to at most P's own (summed without overflow). */
static void check_nominal_sums(const struct sim_tenants_conf *c)
{
    size_t *ord = malloc(c->n * sizeof(*ord));
    long *up = malloc(c->n * sizeof(*up));
    int64_t *sum = malloc(c->n * sizeof(*sum));

    if (!ord || !up || !sum)
        goto out; /* out of memory: nothing to check */
    for (size_t i = 0; i < c->n; i++)
        ord[i] = i;
    sorting = c;
    qsort(ord, c->n, sizeof(*ord), by_path);
    for (size_t i = 0; i < c->n; i++) {
        const char *p = c->v[i].path;

        up[i] = -1;
        for (size_t len = strlen(p); len > 0 && up[i] < 0; len--)
            if (p[len - 1] == '/')
                up[i] = find_listed(c, ord, p, len - 1);
    }
    for (int r = 0; r < ALLOT_RES_MAX; r++) {
        memset(sum, 0, c->n * sizeof(*sum));
        for (size_t i = 0; i < c->n; i++) {
            int64_t v = c->v[i].quota[r].nominal;

            if (up[i] >= 0 && c->v[i].has_quota[r] && v != ALLOT_UNLIMITED)
                sum[up[i]] = v > INT64_MAX - sum[up[i]] ? INT64_MAX : sum[up[i]] + v;
        }
        for (size_t i = 0; i < c->n; i++)
            if (c->v[i].has_quota[r] && c->v[i].quota[r].nominal != ALLOT_UNLIMITED)
                FUZZ_CHECK(sum[i] <= c->v[i].quota[r].nominal);
    }
out:
    free(ord);
    free(up);
    free(sum);
}

/* An accepted tree applies to a fresh core tree, as in the loop. */
static void check_apply(const struct sim_tenants_conf *c)
{
    struct allot_tenants *t = allot_tenants_new(cat);
    char err[512];

    if (!t)
        return; /* out of memory: nothing to check */
    FUZZ_CHECK(tenants_apply(t, c, cat, err, sizeof(err)) == 0);
    allot_tenants_free(t);
}

static void check_result(int rc, const struct sim_tenants_conf *c, const char *err)
{
    FUZZ_CHECK(rc == 0 || rc == ALLOT_EINVAL);
    if (rc) {
        FUZZ_CHECK(err[0] != '\0');
        FUZZ_CHECK(c->n == 0 && c->v == NULL);
        return;
    }
    check_conf(c);
    check_nominal_sums(c);
    check_apply(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sim_tenants_conf c = {0};
    char err[512];
    json_t *doc;
    int rc;

    if (!cat) {
        cat = allot_catalog_default(err, sizeof(err));
        FUZZ_CHECK(cat != NULL);
    }
    err[0] = '\0';
    rc = sim_tenants_parse((const char *)data, size, "fuzz", cat, &c, err, sizeof(err));
    check_result(rc, &c, err);
    sim_tenants_conf_free(&c);

    doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (json_is_object(doc) && !tenants_doc_check(doc, err, sizeof(err))) {
        err[0] = '\0';
        rc = tenants_doc_parse(doc, cat, &c, err, sizeof(err));
        check_result(rc, &c, err);
        sim_tenants_conf_free(&c);
    }
    json_decref(doc);
    return 0;
}

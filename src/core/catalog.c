/*
 * GPU catalog: parses and validates the catalog JSON (data/gpus.json, embedded
 * into the library at build time as allot_catalog_json) into an immutable
 * struct allot_catalog, and looks models and MIG profiles up by name.
 *
 * Invariants of a returned catalog: every model and alias name is unique
 * (case-insensitively) and 1..ALLOT_MODEL_NAME_MAX-1 printable, non-space
 * ASCII characters; memory and SM counts are positive; for MIG models every
 * placement lies inside the GPU's memory slices and has the profile's size,
 * slice counts never exceed the model's, and profile names are interned into
 * global ids so that profile_by_global maps each id to a local index or -1.
 * The format is strict: unknown fields and wrong JSON types are errors, so a
 * typo in the data file fails loudly instead of being ignored.
 *
 * No file I/O: the caller hands in a buffer. JSON parsing uses jansson through
 * allot_json_loadb() (jsonload.h), so fault-injection tests reach its
 * allocations too and a parse hit by an allocation failure is rejected.
 *
 * Callers: the cluster model (model and profile lookups), allot-sim and allotd
 * (loading the catalog), tests.
 */
#include "allot/catalog.h"
#include "allot/common.h"

#include "jsonload.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Generated from data/gpus.json by scripts/embed.cmake. */
extern const char allot_catalog_json[];
extern const unsigned long allot_catalog_json_len;

#define CATALOG_VERSION 1

/* Parser state: where we are (for messages) and where errors go. */
struct parse_ctx {
    char *err;
    size_t errlen;
    char where[128]; /* e.g. `model "A100-80GB": profile "3g.40gb"`; "" at top level */
};

static const char *const top_fields[] = {"version", "models", "notes", NULL};
static const char *const model_fields[] = {"name", "aliases", "memory_mib", "sm_count",
                                           "mig",  "notes",   NULL};
static const char *const mig_fields[] = {"compute_slices", "memory_slices", "max_gpu_instances",
                                         "profiles",       "notes",         NULL};
static const char *const profile_fields[] = {
    "name",  "id", "compute_slices", "memory_slices", "max_instances", "memory_mib", "placements",
    "notes", NULL};

/* ---- error reporting ----------------------------------------------------- */

/* Writes "<where>: <message>" into the error buffer; returns ALLOT_EINVAL. */
static int fail(struct parse_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct parse_ctx *c, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = allot_json_verrf(c->err, c->errlen, c->where, fmt, ap);
    va_end(ap);
    return rc;
}

static void set_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen > 0)
        allot_strlcpy(err, msg, errlen);
}

/* ---- field helpers ------------------------------------------------------- */

/* Rejects any key of `obj` that is not in `allowed`. */
static int check_fields(struct parse_ctx *c, json_t *obj, const char *const *allowed)
{
    const char *bad = allot_json_unknown_key(obj, allowed);
    json_t *notes = json_object_get(obj, "notes");

    if (bad)
        return fail(c, "unknown field \"%s\"", bad);
    if (notes && !json_is_string(notes))
        return fail(c, "field \"notes\" must be a string");
    return 0;
}

/* Reads integer field `key` into *out, requiring lo <= value <= hi. */
static int get_int(struct parse_ctx *c, json_t *obj, const char *key, json_int_t lo, json_int_t hi,
                   json_int_t *out)
{
    json_t *v = json_object_get(obj, key);
    json_int_t x;

    if (!v)
        return fail(c, "missing required field \"%s\"", key);
    if (!json_is_integer(v))
        return fail(c, "field \"%s\" must be an integer", key);
    x = json_integer_value(v);
    if (x < lo || x > hi) {
        if (hi == INT64_MAX || hi == INT32_MAX)
            return fail(c, "field \"%s\" is %lld; must be at least %lld", key, (long long)x,
                        (long long)lo);
        return fail(c, "field \"%s\" is %lld; must be in %lld..%lld", key, (long long)x,
                    (long long)lo, (long long)hi);
    }
    *out = x;
    return 0;
}

/* Checks a catalog name (model, alias or profile): non-empty, fits the fixed
 * buffers, printable ASCII without spaces (names are matched as typed). */
static int check_name(struct parse_ctx *c, const char *what, const char *s)
{
    size_t n = strlen(s);

    if (n == 0)
        return fail(c, "%s is empty", what);
    if (n >= ALLOT_MODEL_NAME_MAX)
        return fail(c, "%s \"%s\" is longer than %d characters", what, s, ALLOT_MODEL_NAME_MAX - 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch <= 0x20 || ch >= 0x7f)
            return fail(c, "%s \"%s\" contains a space or non-printable character", what, s);
    }
    return 0;
}

/* Reads the required string field `key` as a name into dst. */
static int get_name(struct parse_ctx *c, json_t *obj, const char *key, char *dst)
{
    json_t *v = json_object_get(obj, key);
    int rc;

    if (!v)
        return fail(c, "missing required field \"%s\"", key);
    if (!json_is_string(v))
        return fail(c, "field \"%s\" must be a string", key);
    rc = check_name(c, key, json_string_value(v));
    if (rc)
        return rc;
    allot_strlcpy(dst, json_string_value(v), ALLOT_MODEL_NAME_MAX);
    return 0;
}

/* ---- MIG profiles -------------------------------------------------------- */

static int parse_placements(struct parse_ctx *c, json_t *arr, const struct allot_gpu_model *m,
                            struct allot_mig_profile *p)
{
    size_t n;

    if (!arr)
        return fail(c, "missing required field \"placements\"");
    if (!json_is_array(arr))
        return fail(c, "field \"placements\" must be an array");
    n = json_array_size(arr);
    if (n == 0)
        return fail(c, "field \"placements\" is empty");
    if (n > ALLOT_MIG_MAX_PLACEMENTS)
        return fail(c, "field \"placements\" has %zu entries; at most %d", n,
                    ALLOT_MIG_MAX_PLACEMENTS);
    for (size_t i = 0; i < n; i++) {
        json_t *pl = json_array_get(arr, i);
        json_int_t start, size;

        if (!json_is_array(pl) || json_array_size(pl) != 2 ||
            !json_is_integer(json_array_get(pl, 0)) || !json_is_integer(json_array_get(pl, 1)))
            return fail(c, "placement %zu must be an array [start, size] of two integers", i);
        start = json_integer_value(json_array_get(pl, 0));
        size = json_integer_value(json_array_get(pl, 1));
        if (start < 0)
            return fail(c, "placement %zu [%lld,%lld] has a negative start", i, (long long)start,
                        (long long)size);
        if (size != p->memory_slices)
            return fail(c, "placement %zu [%lld,%lld] has size %lld; profile memory_slices is %d",
                        i, (long long)start, (long long)size, (long long)size, p->memory_slices);
        if (start > m->memory_slices - size) /* not start + size: it could overflow */
            return fail(c, "placement %zu [%lld,%lld] exceeds memory_slices %d", i,
                        (long long)start, (long long)size, m->memory_slices);
        for (size_t j = 0; j < i; j++) {
            if (p->placements[j].start == start)
                return fail(c, "placement %zu [%lld,%lld] is listed twice", i, (long long)start,
                            (long long)size);
        }
        p->placements[i].start = (uint8_t)start;
        p->placements[i].size = (uint8_t)size;
    }
    p->n_placements = (int)n;
    return 0;
}

static int parse_profile(struct parse_ctx *c, json_t *obj, size_t idx, struct allot_gpu_model *m,
                         struct allot_mig_profile *p)
{
    char model_where[sizeof(c->where)];
    json_int_t v = 0;
    int rc;

    allot_strlcpy(model_where, c->where, sizeof(model_where));
    allot_fmt(c->where, sizeof(c->where), "%s: profile %zu", model_where, idx);
    if (!json_is_object(obj))
        return fail(c, "must be an object");
    rc = get_name(c, obj, "name", p->name);
    if (rc)
        return rc;
    allot_fmt(c->where, sizeof(c->where), "%s: profile \"%s\"", model_where, p->name);
    rc = check_fields(c, obj, profile_fields);
    if (rc)
        return rc;
    if ((rc = get_int(c, obj, "id", 0, INT32_MAX, &v)))
        return rc;
    p->id = (int)v;
    if ((rc = get_int(c, obj, "compute_slices", 1, ALLOT_MIG_MAX_SLICES, &v)))
        return rc;
    if (v > m->compute_slices)
        return fail(c, "field \"compute_slices\" is %lld; exceeds the model's compute_slices %d",
                    (long long)v, m->compute_slices);
    p->compute_slices = (int)v;
    if ((rc = get_int(c, obj, "memory_slices", 1, ALLOT_MIG_MAX_SLICES, &v)))
        return rc;
    if (v > m->memory_slices)
        return fail(c, "field \"memory_slices\" is %lld; exceeds the model's memory_slices %d",
                    (long long)v, m->memory_slices);
    p->memory_slices = (int)v;
    if ((rc = get_int(c, obj, "memory_mib", 1, m->memory_mib, &v)))
        return rc;
    p->memory_mib = v;
    rc = parse_placements(c, json_object_get(obj, "placements"), m, p);
    if (rc)
        return rc;
    /* After the placements: max_instances is bounded by how many there are. */
    if ((rc = get_int(c, obj, "max_instances", 1, m->max_gpu_instances, &v)))
        return rc;
    if (v > p->n_placements)
        return fail(c, "field \"max_instances\" is %lld; exceeds the %d placements listed",
                    (long long)v, p->n_placements);
    p->max_instances = (int)v;
    p->global_id = -1;

    for (int i = 0; i < m->n_profiles; i++) {
        if (strcasecmp(m->profiles[i].name, p->name) == 0)
            return fail(c, "duplicate profile name (also profile %d)", i);
        if (m->profiles[i].id == p->id)
            return fail(c, "duplicate profile id %d (also profile \"%s\")", p->id,
                        m->profiles[i].name);
    }
    return 0;
}

static int parse_mig(struct parse_ctx *c, json_t *obj, struct allot_gpu_model *m)
{
    json_t *profiles;
    json_int_t v = 0;
    size_t n;
    int rc;

    if (!json_is_object(obj))
        return fail(c, "field \"mig\" must be an object");
    rc = check_fields(c, obj, mig_fields);
    if (rc)
        return rc;
    if ((rc = get_int(c, obj, "compute_slices", 1, ALLOT_MIG_MAX_SLICES, &v)))
        return rc;
    m->compute_slices = (int)v;
    if ((rc = get_int(c, obj, "memory_slices", 1, ALLOT_MIG_MAX_SLICES, &v)))
        return rc;
    m->memory_slices = (int)v;
    if ((rc = get_int(c, obj, "max_gpu_instances", 1, ALLOT_MIG_MAX_INSTANCES, &v)))
        return rc;
    m->max_gpu_instances = (int)v;

    profiles = json_object_get(obj, "profiles");
    if (!profiles)
        return fail(c, "missing required field \"profiles\"");
    if (!json_is_array(profiles))
        return fail(c, "field \"profiles\" must be an array");
    n = json_array_size(profiles);
    if (n == 0)
        return fail(c, "field \"profiles\" is empty");
    if (n > ALLOT_MIG_MAX_PROFILES)
        return fail(c, "field \"profiles\" has %zu entries; at most %d", n, ALLOT_MIG_MAX_PROFILES);
    for (size_t i = 0; i < n; i++) {
        char saved[sizeof(c->where)];

        allot_strlcpy(saved, c->where, sizeof(saved));
        rc = parse_profile(c, json_array_get(profiles, i), i, m, &m->profiles[i]);
        if (rc)
            return rc;
        allot_strlcpy(c->where, saved, sizeof(c->where));
        m->n_profiles = (int)i + 1;
    }
    m->mig = true;
    return 0;
}

/* ---- models -------------------------------------------------------------- */

static int parse_aliases(struct parse_ctx *c, json_t *arr, struct allot_gpu_model *m)
{
    size_t n;

    if (!arr)
        return 0;
    if (!json_is_array(arr))
        return fail(c, "field \"aliases\" must be an array");
    n = json_array_size(arr);
    if (n > ALLOT_MAX_ALIASES)
        return fail(c, "field \"aliases\" has %zu entries; at most %d", n, ALLOT_MAX_ALIASES);
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(arr, i);
        int rc;

        if (!json_is_string(a))
            return fail(c, "alias %zu must be a string", i);
        rc = check_name(c, "alias", json_string_value(a));
        if (rc)
            return rc;
        allot_strlcpy(m->aliases[i], json_string_value(a), ALLOT_MODEL_NAME_MAX);
    }
    m->n_aliases = (int)n;
    return 0;
}

static int parse_model(struct parse_ctx *c, json_t *obj, size_t idx, struct allot_gpu_model *m)
{
    json_t *mig;
    json_int_t v = 0;
    int rc;

    allot_fmt(c->where, sizeof(c->where), "model %zu", idx);
    if (!json_is_object(obj))
        return fail(c, "must be an object");
    rc = get_name(c, obj, "name", m->name);
    if (rc)
        return rc;
    allot_fmt(c->where, sizeof(c->where), "model \"%s\"", m->name);
    rc = check_fields(c, obj, model_fields);
    if (rc)
        return rc;
    rc = parse_aliases(c, json_object_get(obj, "aliases"), m);
    if (rc)
        return rc;
    if ((rc = get_int(c, obj, "memory_mib", 1, INT64_MAX, &v)))
        return rc;
    m->memory_mib = v;
    if ((rc = get_int(c, obj, "sm_count", 1, INT32_MAX, &v)))
        return rc;
    m->sm_count = (int)v;
    for (int g = 0; g < ALLOT_MAX_GLOBAL_PROFILES; g++)
        m->profile_by_global[g] = -1;
    mig = json_object_get(obj, "mig");
    if (mig)
        return parse_mig(c, mig, m);
    return 0;
}

/* True when `name` equals model m's name or one of its aliases. */
static bool model_has_name(const struct allot_gpu_model *m, const char *name)
{
    if (strcasecmp(m->name, name) == 0)
        return true;
    for (int a = 0; a < m->n_aliases; a++) {
        if (strcasecmp(m->aliases[a], name) == 0)
            return true;
    }
    return false;
}

/* Rejects a name or alias of model `i` that another model (or model i itself,
 * twice) already uses. Names are compared case-insensitively because lookups
 * are. */
static int check_unique_names(struct parse_ctx *c, const struct allot_catalog *cat, int i)
{
    const struct allot_gpu_model *m = &cat->models[i];

    for (int a = 0; a < m->n_aliases; a++) {
        if (strcasecmp(m->aliases[a], m->name) == 0)
            return fail(c, "alias \"%s\" repeats the model's name", m->aliases[a]);
        for (int b = 0; b < a; b++) {
            if (strcasecmp(m->aliases[a], m->aliases[b]) == 0)
                return fail(c, "alias \"%s\" is listed twice", m->aliases[a]);
        }
    }
    for (int j = 0; j < i; j++) {
        const struct allot_gpu_model *o = &cat->models[j];

        if (model_has_name(o, m->name))
            return fail(c, "duplicate model name \"%s\" (already used by model \"%s\")", m->name,
                        o->name);
        for (int a = 0; a < m->n_aliases; a++) {
            if (model_has_name(o, m->aliases[a]))
                return fail(c, "duplicate alias \"%s\" (already used by model \"%s\")",
                            m->aliases[a], o->name);
        }
    }
    return 0;
}

/* Interns model i's profile names into global ids. */
static int intern_profiles(struct parse_ctx *c, struct allot_catalog *cat, int i)
{
    struct allot_gpu_model *m = &cat->models[i];

    for (int p = 0; p < m->n_profiles; p++) {
        int g = allot_catalog_find_profile(cat, m->profiles[p].name);

        if (g < 0) {
            if (cat->n_profile_names >= ALLOT_MAX_GLOBAL_PROFILES)
                return fail(c, "profile \"%s\": more than %d distinct profile names in the catalog",
                            m->profiles[p].name, ALLOT_MAX_GLOBAL_PROFILES);
            g = cat->n_profile_names++;
            allot_strlcpy(cat->profile_names[g], m->profiles[p].name, ALLOT_MODEL_NAME_MAX);
        }
        m->profiles[p].global_id = g;
        m->profile_by_global[g] = (int8_t)p;
    }
    return 0;
}

static int parse_root(struct parse_ctx *c, json_t *root, struct allot_catalog *cat)
{
    json_t *models;
    json_int_t version = 0;
    size_t n;
    int rc;

    if (!json_is_object(root))
        return fail(c, "catalog must be a JSON object");
    rc = check_fields(c, root, top_fields);
    if (rc)
        return rc;
    if ((rc = get_int(c, root, "version", CATALOG_VERSION, CATALOG_VERSION, &version)))
        return rc;
    models = json_object_get(root, "models");
    if (!models)
        return fail(c, "missing required field \"models\"");
    if (!json_is_array(models))
        return fail(c, "field \"models\" must be an array");
    n = json_array_size(models);
    if (n > ALLOT_MAX_MODELS)
        return fail(c, "field \"models\" has %zu entries; at most %d", n, ALLOT_MAX_MODELS);

    cat->models = allot_calloc(n, sizeof(*cat->models));
    if (!cat->models) {
        set_err(c->err, c->errlen, "out of memory");
        return ALLOT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        rc = parse_model(c, json_array_get(models, i), i, &cat->models[i]);
        if (rc)
            return rc;
        cat->n_models = (int)i + 1;
        rc = check_unique_names(c, cat, (int)i);
        if (rc)
            return rc;
        rc = intern_profiles(c, cat, (int)i);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- public API ---------------------------------------------------------- */

/*
 * IN: json (len bytes, need not be NUL-terminated); err/errlen: message buffer
 * (may be NULL/0). Returns a catalog owned by the caller (allot_catalog_free)
 * or NULL with a message in err: a validation error naming the entry and
 * field, a JSON syntax error with its line and column, or "out of memory".
 */
struct allot_catalog *allot_catalog_parse(const char *json, size_t len, char *err, size_t errlen)
{
    struct parse_ctx c = {.err = err, .errlen = errlen, .where = ""};
    struct allot_catalog *cat = NULL;
    json_error_t jerr;
    json_t *root;
    bool oom;

    set_err(err, errlen, "");
    if (!json) {
        set_err(err, errlen, "no catalog text");
        return NULL;
    }
    root = allot_json_loadb(json, len, &jerr, &oom);
    if (!root) {
        if (oom)
            set_err(err, errlen, "out of memory");
        else
            allot_fmt(err, errlen, "catalog JSON: line %d column %d: %s", jerr.line, jerr.column,
                      jerr.text);
        return NULL;
    }
    cat = allot_calloc(1, sizeof(*cat));
    if (!cat) {
        set_err(err, errlen, "out of memory");
        goto out_root;
    }
    if (parse_root(&c, root, cat) != 0) {
        allot_catalog_free(cat);
        cat = NULL;
    }
out_root:
    json_decref(root);
    return cat;
}

/*
 * Parses the catalog embedded from data/gpus.json. err/errlen as for
 * allot_catalog_parse(). Returns a caller-owned catalog or NULL.
 */
struct allot_catalog *allot_catalog_default(char *err, size_t errlen)
{
    return allot_catalog_parse(allot_catalog_json, (size_t)allot_catalog_json_len, err, errlen);
}

/* Frees `cat` and its models; accepts NULL. */
void allot_catalog_free(struct allot_catalog *cat)
{
    if (!cat)
        return;
    allot_free(cat->models);
    allot_free(cat);
}

/*
 * IN: cat, name (canonical name or alias, any case; NULL allowed).
 * Returns the model's index in cat->models or -1 when unknown.
 */
int allot_catalog_find_model(const struct allot_catalog *cat, const char *name)
{
    if (!cat || !name)
        return -1;
    for (int i = 0; i < cat->n_models; i++) {
        if (model_has_name(&cat->models[i], name))
            return i;
    }
    return -1;
}

/*
 * IN: cat, name of a MIG profile such as "1g.10gb" (any case; NULL allowed).
 * Returns its global profile id (index into cat->profile_names) or -1.
 */
int allot_catalog_find_profile(const struct allot_catalog *cat, const char *name)
{
    if (!cat || !name)
        return -1;
    for (int g = 0; g < cat->n_profile_names; g++) {
        if (strcasecmp(cat->profile_names[g], name) == 0)
            return g;
    }
    return -1;
}

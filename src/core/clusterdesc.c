/*
 * Cluster descriptions (see clusterdesc.h and docs/cluster-description.md):
 * a strict JSON parser that builds a struct allot_cluster through
 * allot_cluster_add_node(), and the writer that turns a cluster back into a
 * description.
 *
 * Parsing happens in two steps per "nodes" entry: every field is read and
 * checked first (with the entry's index and name in every message), and
 * only then are its nodes added, so a malformed entry adds nothing. Any
 * error frees the whole cluster: the caller gets a complete cluster or NULL.
 * Group entries ({"name_prefix", "count"}) expand to names prefix + index,
 * zero-padded to the width of count-1 and at least 3 digits.
 *
 * The writer emits one entry per node with every field spelled out (no
 * defaults, no groups) and refuses nodes the parser would reject, so
 * parse(dump(c)) always succeeds and reproduces c's nodes. It uses the
 * parser's own validation helpers, which keeps the two in step.
 *
 * jansson: parsing goes through allot_json_loadb() (jsonload.h), which
 * routes jansson's allocations to allot_malloc() and rejects a parse during
 * which one failed. A limit no caller can lift: when the dropped byte is a string's closing quote,
 * jansson 2.14 decodes past the end of its token buffer (the growth that fails there is the one at
 * a saved length of 16, 32, 64... bytes, quotes included), so an allocation failure at exactly that
 * point may crash inside jansson. No I/O; callers own the buffers.
 */
#include "allot/clusterdesc.h"

#include "allot/common.h"

#include "jsonload.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parser state: where we are (for messages) and where errors go. */
struct desc_ctx {
    const struct allot_catalog *cat; /* borrowed */
    char *err;                       /* borrowed, caller's buffer */
    size_t errlen;
    char where[ALLOT_CLUSTERDESC_NAME_MAX + 64]; /* `nodes[3] "gpu-a-01"`; "" at top level */
};

/* What "defaults" supplies to entries that leave a field out. */
struct node_defaults {
    bool has_cpu, has_mem;
    int64_t cpu_milli;
    int64_t mem_mib;
    int gpu_mode;
    int64_t island_size;
};

static const char *const top_fields[] = {"version", "defaults", "nodes", NULL};
static const char *const default_fields[] = {"gpu_mode", "island_size", "cpu_milli", "memory_mib",
                                             NULL};
static const char *const node_fields[] = {
    "name",     "name_prefix", "count", "model",  "gpus",  "cpu_milli", "memory_mib",
    "gpu_mode", "island_size", "rack",  "labels", "state", NULL};

/* Indexed by enum allot_gpu_mode and enum allot_node_state. */
static const char *const mode_names[] = {"shared", "exclusive", "mig", NULL};
static const char *const state_names[] = {"ready", "draining", NULL};

#define MIN_NAME_DIGITS 3

/* ---- error reporting ----------------------------------------------------- */

/* Writes "<where>: <message>" into the error buffer; returns ALLOT_EINVAL. */
static int fail(struct desc_ctx *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct desc_ctx *d, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = allot_json_verrf(d->err, d->errlen, d->where, fmt, ap);
    va_end(ap);
    return rc;
}

static void set_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen > 0)
        allot_strlcpy(err, msg, errlen);
}

static int out_of_memory(struct desc_ctx *d)
{
    set_err(d->err, d->errlen, "out of memory");
    return ALLOT_ENOMEM;
}

/* ---- validation shared by the parser and the writer ---------------------- */

/* What is wrong with `s` as a node name or label key (1..max printable
 * ASCII characters, no spaces), or NULL when nothing is. */
static const char *name_problem(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n == 0)
        return "is empty";
    if (n > max)
        return "is too long";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch <= 0x20 || ch >= 0x7f)
            return "contains a space, a control character or a non-ASCII character";
    }
    return NULL;
}

/* Number of decimal digits of v >= 0. */
static int digits(int64_t v)
{
    int n = 1;

    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* ---- field readers ------------------------------------------------------- */

/* Rejects any key of `obj` that is not in `allowed`. */
static int check_fields(struct desc_ctx *d, json_t *obj, const char *const *allowed)
{
    const char *bad = allot_json_unknown_key(obj, allowed);

    return bad ? fail(d, "unknown field \"%s\"", bad) : 0;
}

/* Reads integer field `key` of `obj` into *out when present (*found tells),
 * requiring lo <= value <= hi. JSON reals (8.5, and 8.0 too) are refused. */
static int get_int(struct desc_ctx *d, json_t *obj, const char *key, int64_t lo, int64_t hi,
                   bool *found, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    json_int_t x;

    *found = v != NULL;
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return fail(d, "field \"%s\" must be an integer", key);
    x = json_integer_value(v);
    if (x < lo || x > hi)
        return fail(d, "field \"%s\" is %lld; must be in %lld..%lld", key, (long long)x,
                    (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

/* Reads string field `key` of `obj`, one of `names` (NULL-terminated), into
 * *out (the index) when present (*found tells). */
static int get_enum(struct desc_ctx *d, json_t *obj, const char *key, const char *const *names,
                    bool *found, int *out)
{
    json_t *v = json_object_get(obj, key);
    char choices[128] = "";
    size_t used = 0;

    *found = v != NULL;
    if (!v)
        return 0;
    for (int i = 0; names[i]; i++) {
        if (json_is_string(v) && strcmp(json_string_value(v), names[i]) == 0) {
            *out = i;
            return 0;
        }
        if (used < sizeof(choices))
            used += (size_t)allot_fmt(choices + used, sizeof(choices) - used, "%s%s", i ? ", " : "",
                                      names[i]);
    }
    if (!json_is_string(v))
        return fail(d, "field \"%s\" must be a string, one of %s", key, choices);
    return fail(d, "field \"%s\" is \"%s\"; must be one of %s", key, json_string_value(v), choices);
}

/* Checks the name-like string field `key` (value v); returns the name
 * (borrowed from v) or NULL with the error written. */
static const char *get_name(struct desc_ctx *d, json_t *v, const char *key, size_t max)
{
    const char *s = json_string_value(v), *problem; /* NULL unless a string */

    if (!s) {
        fail(d, "field \"%s\" must be a string", key);
        return NULL;
    }
    problem = name_problem(s, max);
    if (problem && strcmp(problem, "is too long") == 0) {
        fail(d, "field \"%s\" is longer than %zu characters", key, max);
        return NULL;
    }
    if (problem) {
        fail(d, "field \"%s\" %s", key, problem);
        return NULL;
    }
    return s;
}

/* Reads "labels" (an object of strings) into out[], borrowing the strings
 * from the JSON tree; *n gets the count. */
static int get_labels(struct desc_ctx *d, json_t *v, struct allot_label *out, int *n)
{
    const char *key, *problem;
    json_t *val;

    *n = 0;
    if (!v)
        return 0;
    if (!json_is_object(v))
        return fail(d, "field \"labels\" must be an object of strings");
    if (json_object_size(v) > ALLOT_CLUSTERDESC_MAX_LABELS)
        return fail(d, "field \"labels\" has %zu entries; at most %d", json_object_size(v),
                    ALLOT_CLUSTERDESC_MAX_LABELS);
    json_object_foreach(v, key, val)
    {
        problem = allot_label_key_problem(key);
        if (problem) {
            if (strcmp(problem, "is too long") == 0)
                return fail(d, "field \"labels\": key \"%s\" is longer than %d characters", key,
                            ALLOT_CLUSTERDESC_LABEL_KEY);
            return fail(d, "field \"labels\": key \"%s\" %s", key, problem);
        }
        if (!json_is_string(val))
            return fail(d,
                        "field \"labels\": \"%s\" must be a string (labels map strings to "
                        "strings)",
                        key);
        problem = allot_label_value_problem(json_string_value(val));
        if (problem) {
            if (strcmp(problem, "is too long") == 0)
                return fail(d, "field \"labels\": value of \"%s\" is longer than %d bytes", key,
                            ALLOT_CLUSTERDESC_LABEL_VALUE);
            return fail(d, "field \"labels\": value of \"%s\" %s", key, problem);
        }
        /* allot_cluster_add_node copies the strings and never writes them */
        out[*n].key = (char *)key;
        out[*n].value = (char *)json_string_value(val);
        (*n)++;
    }
    return 0;
}

/* Writes the catalog's model names, comma-separated, into buf. */
static void model_list(const struct allot_catalog *cat, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int m = 0; m < cat->n_models && used < size; m++)
        used +=
            (size_t)allot_fmt(buf + used, size - used, "%s%s", m ? ", " : "", cat->models[m].name);
}

/* ---- entries --------------------------------------------------------------- */

static int parse_defaults(struct desc_ctx *d, json_t *v, struct node_defaults *def)
{
    bool found;
    int rc;

    if (!v)
        return 0;
    allot_strlcpy(d->where, "defaults", sizeof(d->where));
    if (!json_is_object(v))
        return fail(d, "must be an object");
    rc = check_fields(d, v, default_fields);
    if (!rc)
        rc = get_enum(d, v, "gpu_mode", mode_names, &found, &def->gpu_mode);
    if (!rc)
        rc = get_int(d, v, "island_size", 0, ALLOT_MAX_GPUS, &found, &def->island_size);
    if (!rc)
        rc = get_int(d, v, "cpu_milli", 0, ALLOT_CLUSTERDESC_MAX_CPU, &def->has_cpu,
                     &def->cpu_milli);
    if (!rc)
        rc =
            get_int(d, v, "memory_mib", 0, ALLOT_CLUSTERDESC_MAX_MEM, &def->has_mem, &def->mem_mib);
    if (!rc)
        d->where[0] = '\0';
    return rc;
}

/* One entry of "nodes", read and checked but not yet added. */
struct entry {
    const char *name;   /* borrowed from the JSON tree; NULL for a group */
    const char *prefix; /* borrowed; NULL for a single node */
    int64_t count;      /* nodes to add: 1 for a single node */
    int width;          /* digits of a group's index */
    struct allot_node_spec spec;
    int state;
    struct allot_label labels[ALLOT_CLUSTERDESC_MAX_LABELS];
};

/* Reads the entry's identity: "name", or "name_prefix" with "count". */
static int read_identity(struct desc_ctx *d, size_t i, json_t *e, struct entry *en)
{
    json_t *jname = json_object_get(e, "name"), *jprefix = json_object_get(e, "name_prefix");
    bool found;
    int rc;

    if (jname && jprefix)
        return fail(d, "fields \"name\" and \"name_prefix\" both given; give one (\"name\" for a "
                       "node, \"name_prefix\" and \"count\" for a group)");
    if (!jname && !jprefix)
        return fail(d, "missing field \"name\" (or \"name_prefix\" and \"count\" for a group)");
    if (jname) {
        en->name = get_name(d, jname, "name", ALLOT_CLUSTERDESC_NAME_MAX);
        if (!en->name)
            return ALLOT_EINVAL;
        allot_fmt(d->where, sizeof(d->where), "nodes[%zu] \"%s\"", i, en->name);
        if (json_object_get(e, "count"))
            return fail(d, "field \"count\" needs \"name_prefix\" (it makes a group) instead "
                           "of \"name\"");
        en->count = 1;
        return 0;
    }
    en->prefix = get_name(d, jprefix, "name_prefix", ALLOT_CLUSTERDESC_NAME_MAX - MIN_NAME_DIGITS);
    if (!en->prefix)
        return ALLOT_EINVAL;
    allot_fmt(d->where, sizeof(d->where), "nodes[%zu] (name_prefix \"%s\")", i, en->prefix);
    rc = get_int(d, e, "count", 1, ALLOT_CLUSTERDESC_MAX_COUNT, &found, &en->count);
    if (rc)
        return rc;
    if (!found)
        return fail(d, "missing field \"count\" (a group with \"name_prefix\" needs it)");
    en->width = digits(en->count - 1);
    if (en->width < MIN_NAME_DIGITS)
        en->width = MIN_NAME_DIGITS;
    if (strlen(en->prefix) + (size_t)en->width > ALLOT_CLUSTERDESC_NAME_MAX)
        return fail(d,
                    "field \"name_prefix\" is too long: with %d digits the names would be "
                    "longer than %d characters",
                    en->width, ALLOT_CLUSTERDESC_NAME_MAX);
    return 0;
}

/* Reads the entry's GPUs: "gpus", "model", "gpu_mode", "island_size". */
static int read_gpus(struct desc_ctx *d, json_t *e, const struct node_defaults *def,
                     struct entry *en)
{
    json_t *jmodel = json_object_get(e, "model");
    int64_t gpus = 0, island = def->island_size;
    int model = -1, mode = def->gpu_mode;
    bool found, mode_found;
    int rc;

    rc = get_int(d, e, "gpus", 0, ALLOT_MAX_GPUS, &found, &gpus);
    if (rc)
        return rc;
    if (!found)
        return fail(d, "missing field \"gpus\" (0 for a CPU-only node)");
    if (gpus == 0 && jmodel)
        return fail(d, "field \"model\" given but \"gpus\" is 0");
    if (gpus > 0) {
        char known[512];

        if (!jmodel)
            return fail(d, "missing field \"model\" (needed when \"gpus\" is above 0)");
        if (!json_is_string(jmodel))
            return fail(d, "field \"model\" must be a string");
        model = allot_catalog_find_model(d->cat, json_string_value(jmodel));
        if (model < 0) {
            model_list(d->cat, known, sizeof(known));
            return fail(d, "field \"model\": unknown model \"%s\" (known: %s)",
                        json_string_value(jmodel), known);
        }
        en->spec.model = json_string_value(jmodel);
    }
    rc = get_enum(d, e, "gpu_mode", mode_names, &mode_found, &mode);
    if (!rc)
        rc = get_int(d, e, "island_size", 0, ALLOT_MAX_GPUS, &found, &island);
    if (rc)
        return rc;
    if (model >= 0 && mode == ALLOT_GPU_MIG && !d->cat->models[model].mig)
        return fail(d, "field \"gpu_mode\"%s is \"mig\" but model \"%s\" is not MIG-capable",
                    mode_found ? "" : " (from \"defaults\")", d->cat->models[model].name);
    en->spec.n_gpus = (int)gpus;
    en->spec.gpu_mode = mode;
    en->spec.island_size = (int)island;
    return 0;
}

/* Reads entry i of "nodes" into *en, checking every field. */
static int read_entry(struct desc_ctx *d, size_t i, json_t *e, const struct node_defaults *def,
                      struct entry *en)
{
    int64_t rack = 0;
    bool found;
    int rc;

    memset(en, 0, sizeof(*en));
    allot_fmt(d->where, sizeof(d->where), "nodes[%zu]", i);
    if (!json_is_object(e))
        return fail(d, "must be an object");
    rc = read_identity(d, i, e, en);
    if (!rc)
        rc = check_fields(d, e, node_fields);
    if (!rc)
        rc = read_gpus(d, e, def, en);
    if (rc)
        return rc;
    en->spec.cpu_milli = def->cpu_milli;
    rc = get_int(d, e, "cpu_milli", 0, ALLOT_CLUSTERDESC_MAX_CPU, &found, &en->spec.cpu_milli);
    if (rc)
        return rc;
    if (!found && !def->has_cpu)
        return fail(d, "missing field \"cpu_milli\" (give it here or in \"defaults\")");
    en->spec.mem_mib = def->mem_mib;
    rc = get_int(d, e, "memory_mib", 0, ALLOT_CLUSTERDESC_MAX_MEM, &found, &en->spec.mem_mib);
    if (rc)
        return rc;
    if (!found && !def->has_mem)
        return fail(d, "missing field \"memory_mib\" (give it here or in \"defaults\")");
    rc = get_int(d, e, "rack", 0, ALLOT_CLUSTERDESC_MAX_RACK, &found, &rack);
    if (!rc)
        rc = get_labels(d, json_object_get(e, "labels"), en->labels, &en->spec.n_labels);
    if (!rc)
        rc = get_enum(d, e, "state", state_names, &found, &en->state);
    en->spec.rack = (int)rack;
    en->spec.labels = en->labels;
    return rc;
}

/* Adds the nodes of a checked entry (index i) to c. */
static int add_entry(struct desc_ctx *d, size_t i, const struct entry *en, struct allot_cluster *c)
{
    char name[ALLOT_CLUSTERDESC_NAME_MAX + 1], aerr[ALLOT_CLUSTERDESC_NAME_MAX + 128];
    struct allot_node_spec spec = en->spec;

    spec.name = en->name ? en->name : name;
    for (int64_t k = 0; k < en->count; k++) {
        int idx;

        if (en->prefix)
            allot_fmt(name, sizeof(name), "%s%0*lld", en->prefix, en->width, (long long)k);
        idx = allot_cluster_add_node(c, &spec, aerr, sizeof(aerr));
        if (idx == ALLOT_ENOMEM)
            return out_of_memory(d);
        if (idx < 0) {
            /* the cluster's message names the node and the problem */
            allot_fmt(d->where, sizeof(d->where), "nodes[%zu]", i);
            return fail(d, "%s", aerr);
        }
        if (en->state == ALLOT_NODE_DRAINING &&
            allot_cluster_set_state(c, idx, ALLOT_NODE_DRAINING) != 0)
            return fail(d, "node \"%s\": cannot be drained", spec.name);
    }
    return 0;
}

/* Upper bound of the nodes that "nodes" asks for (a group counts as its
 * "count" when that is a valid one, anything else as 1), so that a huge
 * description is refused before any node is built. */
static int64_t planned_nodes(json_t *nodes)
{
    int64_t total = 0;

    for (size_t i = 0; i < json_array_size(nodes); i++) {
        json_t *e = json_array_get(nodes, i);
        json_t *count = json_is_object(e) ? json_object_get(e, "count") : NULL;
        json_int_t k = json_is_integer(count) ? json_integer_value(count) : 1;

        total += k >= 1 && k <= ALLOT_CLUSTERDESC_MAX_COUNT ? k : 1;
    }
    return total;
}

static int parse_root(struct desc_ctx *d, json_t *root, struct allot_cluster *c)
{
    struct node_defaults def = {.gpu_mode = ALLOT_GPU_SHARED};
    struct entry en;
    json_t *v, *nodes;
    int rc;

    if (!json_is_object(root))
        return fail(d, "the top level must be an object");
    rc = check_fields(d, root, top_fields);
    if (rc)
        return rc;
    v = json_object_get(root, "version");
    if (!v)
        return fail(d, "missing field \"version\" (must be %d)", ALLOT_CLUSTERDESC_VERSION);
    if (!json_is_integer(v))
        return fail(d, "field \"version\" must be an integer");
    if (json_integer_value(v) != ALLOT_CLUSTERDESC_VERSION)
        return fail(d, "field \"version\" is %lld; only version %d is supported",
                    (long long)json_integer_value(v), ALLOT_CLUSTERDESC_VERSION);
    rc = parse_defaults(d, json_object_get(root, "defaults"), &def);
    if (rc)
        return rc;
    nodes = json_object_get(root, "nodes");
    if (!nodes)
        return fail(d, "missing field \"nodes\"");
    if (!json_is_array(nodes))
        return fail(d, "field \"nodes\" must be an array");
    if (planned_nodes(nodes) > ALLOT_CLUSTERDESC_MAX_NODES)
        return fail(d, "field \"nodes\" describes %lld nodes; at most %d",
                    (long long)planned_nodes(nodes), ALLOT_CLUSTERDESC_MAX_NODES);
    for (size_t i = 0; i < json_array_size(nodes) && !rc; i++) {
        rc = read_entry(d, i, json_array_get(nodes, i), &def, &en);
        if (!rc)
            rc = add_entry(d, i, &en, c);
    }
    return rc;
}

/*
 * Parses a cluster description; see clusterdesc.h for the contract.
 * cat and json are borrowed; the returned cluster belongs to the caller.
 */
struct allot_cluster *allot_clusterdesc_parse(const struct allot_catalog *cat, const char *json,
                                              size_t len, char *err, size_t errlen)
{
    struct desc_ctx d = {.cat = cat, .err = err, .errlen = errlen, .where = ""};
    struct allot_cluster *c = NULL;
    json_error_t jerr;
    json_t *root;
    bool oom;

    set_err(err, errlen, "");
    if (!cat || !json) {
        set_err(err, errlen, cat ? "no cluster description text" : "no GPU catalog");
        return NULL;
    }
    root = allot_json_loadb(json, len, &jerr, &oom);
    if (!root) {
        if (oom)
            set_err(err, errlen, "out of memory");
        else
            allot_fmt(err, errlen, "JSON syntax error at line %d:%d: %s", jerr.line, jerr.column,
                      jerr.text);
        return NULL;
    }
    c = allot_cluster_new(cat, 0);
    if (!c) {
        set_err(err, errlen, "out of memory");
        goto out_root;
    }
    if (parse_root(&d, root, c) != 0) {
        allot_cluster_free(c);
        c = NULL;
    }
out_root:
    json_decref(root);
    return c;
}

/* ---- the writer ------------------------------------------------------------ */

/* A growing text buffer with a sticky error (STYLE.md 13). */
struct dump_buf {
    char *p; /* owned, allot_malloc'd, NUL-terminated when non-NULL */
    size_t len, cap;
    int err; /* first error, 0 while none */
};

/* Makes room for `n` more bytes plus the NUL; false (error set) when not. */
static bool buf_reserve(struct dump_buf *b, size_t n)
{
    if (b->err)
        return false;
    if (allot_grow((void **)&b->p, &b->cap, b->len + n + 1, 1) != 0) {
        b->err = ALLOT_ENOMEM;
        return false;
    }
    return true;
}

static void buf_add(struct dump_buf *b, const char *s)
{
    size_t n = strlen(s);

    if (!buf_reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

/* Appends j on one line (", " and ": " separators, keys in insertion order). */
static void buf_add_json(struct dump_buf *b, const json_t *j)
{
    size_t need;

    if (b->err)
        return;
    need = json_dumpb(j, NULL, 0, 0); /* the size it needs; 0 on failure */
    if (need == 0) {
        b->err = ALLOT_ENOMEM;
        return;
    }
    if (!buf_reserve(b, need))
        return;
    if (json_dumpb(j, b->p + b->len, need, 0) != need) {
        b->err = ALLOT_ENOMEM;
        return;
    }
    b->len += need;
    b->p[b->len] = '\0';
}

/* Island size that reproduces the node's per-GPU islands (0: one island),
 * or -1 when none does. */
static int island_size_of(const struct allot_node *n)
{
    int s = 0;

    while (s < n->n_gpus && n->gpus[s].island == 0)
        s++;
    if (s == n->n_gpus)
        return 0;
    if (s == 0)
        return -1;
    for (int k = 0; k < n->n_gpus; k++)
        if (n->gpus[k].island != k / s)
            return -1;
    return s;
}

/* Checks that the parser would accept node n back; returns 0 or an ALLOT_E*
 * code. */
static int check_describable(const struct allot_cluster *c, const struct allot_node *n)
{
    const struct allot_catalog *cat = allot_cluster_catalog(c);

    if (n->state != ALLOT_NODE_READY && n->state != ALLOT_NODE_DRAINING)
        return ALLOT_EINVAL;
    if (!n->name || name_problem(n->name, ALLOT_CLUSTERDESC_NAME_MAX))
        return ALLOT_EINVAL;
    if (n->cpu_milli < 0 || n->cpu_milli > ALLOT_CLUSTERDESC_MAX_CPU || n->mem_mib < 0 ||
        n->mem_mib > ALLOT_CLUSTERDESC_MAX_MEM || n->rack < 0 ||
        n->rack > ALLOT_CLUSTERDESC_MAX_RACK || n->n_labels > ALLOT_CLUSTERDESC_MAX_LABELS)
        return ALLOT_ERANGE;
    if (n->n_gpus < 0 || n->n_gpus > ALLOT_MAX_GPUS)
        return ALLOT_ERANGE;
    if (n->n_gpus > 0) {
        if (n->model < 0 || n->model >= cat->n_models || n->gpus[0].mode > ALLOT_GPU_MIG)
            return ALLOT_EINVAL;
        for (int g = 1; g < n->n_gpus; g++)
            if (n->gpus[g].mode != n->gpus[0].mode)
                return ALLOT_EINVAL;
        if (island_size_of(n) < 0)
            return ALLOT_EINVAL;
    }
    for (int l = 0; l < n->n_labels; l++) {
        const struct allot_label *lb = &n->labels[l];

        if (!lb->key || !lb->value || allot_label_key_problem(lb->key) ||
            allot_label_value_problem(lb->value))
            return ALLOT_EINVAL;
        for (int k = 0; k < l; k++)
            if (strcmp(n->labels[k].key, lb->key) == 0)
                return ALLOT_EINVAL;
    }
    return 0;
}

/* Builds node n's entry; returns NULL when out of memory. */
static json_t *node_json(const struct allot_cluster *c, const struct allot_node *n)
{
    json_t *o = json_object(), *labels;
    bool bad = !o;

    /* json_object_set_new() frees the value and fails when o or it is NULL */
    bad |= json_object_set_new(o, "name", json_string(n->name)) != 0;
    if (n->n_gpus > 0)
        bad |= json_object_set_new(
                   o, "model", json_string(allot_cluster_catalog(c)->models[n->model].name)) != 0;
    bad |= json_object_set_new(o, "gpus", json_integer(n->n_gpus)) != 0;
    bad |= json_object_set_new(o, "cpu_milli", json_integer(n->cpu_milli)) != 0;
    bad |= json_object_set_new(o, "memory_mib", json_integer(n->mem_mib)) != 0;
    if (n->n_gpus > 0) {
        bad |= json_object_set_new(o, "gpu_mode", json_string(mode_names[n->gpus[0].mode])) != 0;
        bad |= json_object_set_new(o, "island_size", json_integer(island_size_of(n))) != 0;
    }
    bad |= json_object_set_new(o, "rack", json_integer(n->rack)) != 0;
    if (n->n_labels > 0) {
        labels = json_object();
        for (int l = 0; l < n->n_labels && labels; l++)
            bad |=
                json_object_set_new(labels, n->labels[l].key, json_string(n->labels[l].value)) != 0;
        bad |= json_object_set_new(o, "labels", labels) != 0;
    }
    bad |= json_object_set_new(o, "state", json_string(state_names[n->state])) != 0;
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/*
 * Writes the description of cluster c (borrowed) into *out (allot_malloc'd,
 * the caller frees it with allot_free) and its length into *len; see
 * clusterdesc.h. Returns 0 or a negative ALLOT_E* code, leaving *out NULL.
 */
int allot_clusterdesc_dump(const struct allot_cluster *c, char **out, size_t *len)
{
    struct dump_buf b = {0};
    int n_nodes;

    if (!out || !len)
        return ALLOT_EINVAL;
    *out = NULL;
    *len = 0;
    if (!c)
        return ALLOT_EINVAL;
    n_nodes = allot_cluster_node_count(c);
    for (int i = 0; i < n_nodes; i++) {
        int rc = check_describable(c, allot_cluster_node(c, i));

        if (rc)
            return rc;
    }
    allot_json_use_allot_alloc();
    buf_add(&b, "{\"version\": 1,\n \"nodes\": [");
    for (int i = 0; i < n_nodes && !b.err; i++) {
        json_t *o = node_json(c, allot_cluster_node(c, i));

        if (!o) {
            b.err = ALLOT_ENOMEM;
            break;
        }
        buf_add(&b, i ? ",\n  " : "\n  ");
        buf_add_json(&b, o);
        json_decref(o);
    }
    buf_add(&b, n_nodes ? "\n ]}\n" : "]}\n");
    if (b.err) {
        allot_free(b.p);
        return b.err;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

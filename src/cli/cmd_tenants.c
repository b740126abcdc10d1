/*
 * Tenant verbs over GET and PUT /v1/tenants: `tenants` (the tree and the
 * priority classes), `quota` (each tenant's quotas per resource) and
 * `apply -f tenants.yaml` (the simulator's tenants file, see
 * etc/tenants.example.yaml).
 *
 * The server's PUT replaces the whole document. `apply` without --prune
 * merges: it reads the current document, replaces the tenants and classes
 * the file lists and keeps the others; with --prune the file is the whole
 * tree and unlisted tenants and classes are removed (refused with 409
 * while a removed tenant has live jobs). The simulator-only `synthetic`
 * field of a tenant is dropped.
 */
#include "cli.h"

#include "allot/common.h"

#include <string.h>

static int get_doc(struct cli *c, json_t **doc)
{
    struct client *cl = cli_client(c);

    *doc = NULL;
    if (!cl)
        return CLI_USAGE;
    return client_call(cl, "GET", "/v1/tenants", NULL, NULL, CLIENT_RETRY_ALWAYS, doc, NULL);
}

/* Is path `p` equal to `root` or below it? */
static bool under(const char *p, const char *root)
{
    size_t n = strlen(root);

    return p && !strncmp(p, root, n) && (p[n] == '\0' || p[n] == '/');
}

int tenants_known(struct cli *c, const char *path)
{
    json_t *doc = NULL, *x;
    size_t i;
    int rc = get_doc(c, &doc), known = 0;

    if (rc != CLI_OK)
        return rc;
    json_array_foreach(json_object_get(doc, "tenants"), i, x)
    {
        const char *p = json_string_value(json_object_get(x, "path"));
        known |= p && !strcmp(p, path);
    }
    json_decref(doc);
    return known ? CLI_OK : CLI_NOTFOUND;
}

/* One quota amount as text. */
static const char *amount(json_t *v, char *buf, size_t n)
{
    if (!v)
        return "unlimited";
    return out_cell(v, buf, n);
}

/* "gpu=16/+8 cpu=1024" : nominal, then +borrow limit when set. */
static void quota_summary(json_t *q, char *buf, size_t n)
{
    const char *k;
    json_t *v;
    size_t len = 0;

    buf[0] = '\0';
    json_object_foreach(q, k, v)
    {
        char a[32], b[32];

        if (json_is_object(v)) {
            json_t *bl = json_object_get(v, "borrow_limit");
            len +=
                (size_t)allot_fmt(buf + len, len < n ? n - len : 0, "%s%s=%s%s%s", len ? " " : "",
                                  k, amount(json_object_get(v, "nominal"), a, sizeof(a)),
                                  bl ? "/+" : "", bl ? amount(bl, b, sizeof(b)) : "");
        } else {
            len += (size_t)allot_fmt(buf + len, len < n ? n - len : 0, "%s%s=%s", len ? " " : "", k,
                                     amount(v, a, sizeof(a)));
        }
        if (len >= n)
            break;
    }
}

/* ---- tenants ---- */

static const struct cli_opt tenants_opts[] = {
    {"priority-classes", 'P', NULL, "list the priority classes instead of the tenants"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage tenants_usage = {
    "tenants", "[TENANT] [--priority-classes]",
    "Lists the tenant tree (or the subtree of TENANT) with weights, isolation\n"
    "and quotas. With -o json|yaml: the whole document, which `allot apply -f`\n"
    "takes back unchanged."};

int cmd_tenants(struct cli *c, int argc, char **argv)
{
    static const char *const titles[] = {"PATH", "WEIGHT", "ISOLATION", "QUOTAS (nominal/+borrow)"};
    static const char *const ctitles[] = {"NAME", "VALUE", "PREEMPTIBLE"};
    struct cli_args a;
    json_t *doc = NULL, *x;
    size_t i;
    int rc = args_parse(c, tenants_opts, &tenants_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos > 1) {
        rc = cli_usage_error("allot tenants [TENANT]");
        goto out;
    }
    if ((rc = get_doc(c, &doc)) != CLI_OK)
        goto out;
    if (a.n_pos) {
        json_t *ts = json_object_get(doc, "tenants");
        for (i = json_array_size(ts); i-- > 0;)
            if (!under(json_string_value(json_object_get(json_array_get(ts, i), "path")), a.pos[0]))
                json_array_remove(ts, i);
        if (!json_array_size(ts)) {
            cli_error("not_found", "no tenant %s", a.pos[0]);
            rc = CLI_NOTFOUND;
            goto out;
        }
    }
    if (out_structured(
            c, args_has(&a, "priority-classes") ? json_object_get(doc, "priority_classes") : doc))
        goto out;
    if (args_has(&a, "priority-classes")) {
        struct table *t = table_new(3, ctitles);
        json_array_foreach(json_object_get(doc, "priority_classes"), i, x)
        {
            char b1[32], b2[32];
            const char *cells[3] = {json_string_value(json_object_get(x, "name")),
                                    out_cell(json_object_get(x, "value"), b1, sizeof(b1)),
                                    out_cell(json_object_get(x, "preemptible"), b2, sizeof(b2))};
            table_row(t, cells);
        }
        table_print(t, stdout);
        goto out;
    }
    struct table *t = table_new(4, titles);
    json_array_foreach(json_object_get(doc, "tenants"), i, x)
    {
        char w[32], q[512];
        json_t *wt = json_object_get(x, "weight");
        json_t *iso = json_object_get(x, "isolation");

        quota_summary(json_object_get(x, "quotas"), q, sizeof(q));
        const char *cells[4] = {json_string_value(json_object_get(x, "path")),
                                wt ? out_cell(wt, w, sizeof(w)) : "1",
                                iso ? json_string_value(iso) : "shared", q};
        table_row(t, cells);
    }
    table_print(t, stdout);
out:
    json_decref(doc);
    args_free(&a);
    return rc;
}

/* ---- quota ---- */

static const struct cli_opt no_opts[] = {{NULL, 0, NULL, NULL}};

static const struct cli_usage quota_usage = {
    "quota", "[TENANT]",
    "Shows each tenant's quotas, one row per resource: nominal (guaranteed),\n"
    "borrow limit and lend limit. TENANT limits the list to its subtree.\n"
    "With -o json|yaml: [{tenant, resource, nominal, borrow_limit, lend_limit}]."};

int cmd_quota(struct cli *c, int argc, char **argv)
{
    static const char *const titles[] = {"TENANT", "RESOURCE", "NOMINAL", "BORROW-LIMIT",
                                         "LEND-LIMIT"};
    struct cli_args a;
    json_t *doc = NULL, *rows = NULL, *x;
    size_t i;
    int rc = args_parse(c, no_opts, &quota_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos > 1) {
        rc = cli_usage_error("allot quota [TENANT]");
        goto out;
    }
    if ((rc = get_doc(c, &doc)) != CLI_OK)
        goto out;
    rows = json_array();
    json_array_foreach(json_object_get(doc, "tenants"), i, x)
    {
        const char *path = json_string_value(json_object_get(x, "path")), *k;
        json_t *v;

        if (a.n_pos && !under(path, a.pos[0]))
            continue;
        json_object_foreach(json_object_get(x, "quotas"), k, v)
        {
            json_t *nom = json_is_object(v) ? json_object_get(v, "nominal") : v;
            json_t *bl = json_is_object(v) ? json_object_get(v, "borrow_limit") : NULL;
            json_t *ll = json_is_object(v) ? json_object_get(v, "lend_limit") : NULL;

            json_t *row = json_pack("{s:s,s:s}", "tenant", path, "resource", k);

            json_object_set(row, "nominal", nom ? nom : json_null());
            json_object_set_new(row, "borrow_limit",
                                bl ? json_incref(bl) : json_string("unlimited"));
            json_object_set_new(row, "lend_limit", ll ? json_incref(ll) : json_string("unlimited"));
            json_array_append_new(rows, row);
        }
    }
    if (a.n_pos && !json_array_size(rows)) {
        bool known = false;
        json_array_foreach(json_object_get(doc, "tenants"), i, x)
        {
            known |= under(json_string_value(json_object_get(x, "path")), a.pos[0]);
        }
        if (!known) {
            cli_error("not_found", "no tenant %s", a.pos[0]);
            rc = CLI_NOTFOUND;
            goto out;
        }
    }
    if (out_structured(c, rows))
        goto out;
    struct table *t = table_new(5, titles);
    json_array_foreach(rows, i, x)
    {
        char b1[32], b2[32], b3[32];
        const char *cells[5] = {json_string_value(json_object_get(x, "tenant")),
                                json_string_value(json_object_get(x, "resource")),
                                amount(json_object_get(x, "nominal"), b1, sizeof(b1)),
                                amount(json_object_get(x, "borrow_limit"), b2, sizeof(b2)),
                                amount(json_object_get(x, "lend_limit"), b3, sizeof(b3))};
        table_row(t, cells);
    }
    table_print(t, stdout);
out:
    json_decref(rows);
    json_decref(doc);
    args_free(&a);
    return rc;
}

/* ---- apply ---- */

static const struct cli_opt apply_opts[] = {
    {"file", 'f', "FILE", "tenants file, YAML or JSON (required; - for stdin)"},
    {"prune", 0, NULL, "remove tenants and priority classes the file does not list"},
    {"dry-run", 0, NULL, "print what would change; change nothing"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage apply_usage = {
    "apply", "-f TENANTS.yaml [--prune] [--dry-run]",
    "Applies a tenants file (the format of etc/tenants.example.yaml): tenants and\n"
    "priority classes it lists are created or updated; with --prune, those it\n"
    "does not list are removed. Prints one line per tenant and class that\n"
    "changes (created, configured, pruned)."};

/* The elements of array arr by their `key` (a new object; lookups in it
 * are O(1), so a tree of thousands of tenants compares in linear time). */
static json_t *index_by(json_t *arr, const char *key)
{
    json_t *idx = json_object(), *x;
    size_t i;

    json_array_foreach(arr, i, x)
    {
        const char *v = json_string_value(json_object_get(x, key));
        if (idx && v)
            json_object_set(idx, v, x);
    }
    return idx;
}

/* Every path above a tenant of arr ("a" and "a/b" for "a/b/c"): the
 * parents the server keeps for them (a new object). */
static json_t *parents_of(json_t *arr)
{
    json_t *set = json_object(), *x;
    size_t i;
    char buf[1024];

    json_array_foreach(arr, i, x)
    {
        const char *p = json_string_value(json_object_get(x, "path"));

        for (size_t k = 0; set && p && p[k] && k < sizeof(buf); k++)
            if (p[k] == '/') {
                memcpy(buf, p, k);
                buf[k] = '\0';
                json_object_set_new(set, buf, json_true());
            }
    }
    return set;
}

/* A copy of a tenant or priority class with the server's defaults filled
 * in (weight 1 as a real, isolation shared, no quotas, not preemptible),
 * so that a file that leaves them out compares equal to what GET returns. */
static json_t *normal(json_t *x)
{
    json_t *n = json_deep_copy(x), *w;

    if (!n)
        return NULL;
    if (json_object_get(n, "path")) {
        w = json_object_get(n, "weight");
        json_object_set_new(n, "weight", json_real(!w ? 1.0 : json_number_value(w)));
        if (!json_object_get(n, "isolation"))
            json_object_set_new(n, "isolation", json_string("shared"));
        if (!json_object_get(n, "quotas"))
            json_object_set_new(n, "quotas", json_object());
    } else if (!json_object_get(n, "preemptible")) {
        json_object_set_new(n, "preemptible", json_false());
    }
    return n;
}

static bool same(json_t *a, json_t *b)
{
    json_t *na = normal(a), *nb = normal(b);
    bool eq = na && nb && json_equal(na, nb);

    json_decref(na);
    json_decref(nb);
    return eq;
}

/* Prints (and counts) the differences of list `key` between cur and next. */
static int diff(const char *kind, const char *key, json_t *cur, json_t *next, bool print)
{
    json_t *was = index_by(cur, key), *now = index_by(next, key);
    /* a parent of a listed tenant stays (the server creates it) */
    json_t *parents = !strcmp(key, "path") ? parents_of(next) : json_object();
    size_t i;
    json_t *x;
    int changes = 0;

    json_array_foreach(next, i, x)
    {
        const char *name = json_string_value(json_object_get(x, key));
        json_t *old = name ? json_object_get(was, name) : NULL;
        const char *what = !old ? "created" : !same(old, x) ? "configured" : NULL;

        if (what) {
            changes++;
            if (print)
                printf("%s/%s %s\n", kind, name, what);
        }
    }
    json_array_foreach(cur, i, x)
    {
        const char *name = json_string_value(json_object_get(x, key));

        if (name && !json_object_get(parents, name) && !json_object_get(now, name)) {
            changes++;
            if (print)
                printf("%s/%s pruned\n", kind, name);
        }
    }
    json_decref(was);
    json_decref(now);
    json_decref(parents);
    return changes;
}

/* Changes from the server's tree cur to next (tenants and classes). */
static int diff_count(json_t *cur, json_t *next)
{
    return diff("tenant", "path", json_object_get(cur, "tenants"), json_object_get(next, "tenants"),
                false) +
           diff("priorityclass", "name", json_object_get(cur, "priority_classes"),
                json_object_get(next, "priority_classes"), false);
}

/* Leaves in tenants those at or below scope (as allotd's auth_in_scope). */
static void only_scope(json_t *tenants, const char *scope)
{
    size_t n = strlen(scope);

    for (size_t i = json_array_size(tenants); i-- > 0;) {
        const char *p = json_string_value(json_object_get(json_array_get(tenants, i), "path"));
        if (!p || strncmp(p, scope, n) != 0 || (p[n] != '\0' && p[n] != '/'))
            json_array_remove(tenants, i);
    }
}

/* The tree to write for file doc over the server's cur: *next (new
 * reference) and its *changes. Prints the dry run, or that nothing
 * changes; *write (OUT) says whether a write is due. */
static int apply_merge(struct cli *c, struct cli_args *a, json_t *doc, json_t *cur,
                       json_t **next_out, int *changes_out, bool *write)
{
    json_t *next, *x;
    size_t i;

    *next_out = next = json_deep_copy(doc);
    if (!next)
        return cli_usage_error("out of memory");
    if (!json_object_get(next, "version") && json_object_get(cur, "version"))
        json_object_set(next, "version", json_object_get(cur, "version"));
    if (!args_has(a, "prune")) {
        /* keep what the file does not mention */
        json_t *nt = json_object_get(next, "tenants");
        json_t *np = json_object_get(next, "priority_classes");
        json_t *listed = index_by(nt, "path"), *classes;

        json_array_foreach(json_object_get(cur, "tenants"), i, x)
        {
            const char *p = json_string_value(json_object_get(x, "path"));
            if (p && !json_object_get(listed, p))
                json_array_append(nt, x);
        }
        json_decref(listed);
        if (!np && json_array_size(json_object_get(cur, "priority_classes"))) {
            np = json_array();
            json_object_set_new(next, "priority_classes", np);
        }
        classes = index_by(np, "name");
        json_array_foreach(json_object_get(cur, "priority_classes"), i, x)
        {
            const char *n = json_string_value(json_object_get(x, "name"));
            if (n && !json_object_get(classes, n))
                json_array_append(np, x);
        }
        json_decref(classes);
    } else {
        /* the file is the whole tree: a stored parent it implies but does
         * not list becomes a tenant of weight 1 and no quota of its own,
         * whatever the stored tree gave it (listed, so the change shows) */
        json_t *nt = json_object_get(next, "tenants");
        json_t *listed = index_by(nt, "path"), *parents = parents_of(nt);
        json_t *stored = index_by(json_object_get(cur, "tenants"), "path");
        const char *p;
        json_t *v;
        json_object_foreach(parents, p, v)
        {
            if (!json_object_get(listed, p) && json_object_get(stored, p))
                json_array_append_new(nt, json_pack("{s:s}", "path", p));
        }
        json_decref(listed);
        json_decref(parents);
        json_decref(stored);
    }
    bool print = c->fmt == CLI_FMT_TABLE, dry = args_has(a, "dry-run");
    int changes = *changes_out = diff_count(cur, next);
    if (dry || !changes) {
        /* nothing is written, but allotd checks the tree as it would a
         * write (POST /v1/tenants/check): a file it would refuse is
         * refused now. An allotd without that route (older), or a token
         * that may not write the tree, leaves the diff unchecked. */
        json_t *reply = NULL;
        struct client_error e;
        int rc = client_try_call(cli_client(c), "POST", "/v1/tenants/check", next,
                                 CLIENT_RETRY_ALWAYS, &reply, &e);
        json_decref(reply);
        if (rc != CLI_OK && (e.status == 403 || e.status == 404 || e.status == 405)) {
            if (dry)
                fprintf(stderr, "allot: the file was not checked by allotd (%s)\n",
                        e.status == 403 ? "only an admin's dry run is" : "an older allotd");
            /* a token bound to a tenant reads only its subtree: compare that
             * part alone, or every tenant outside it would read as created */
            const char *scope = NULL;
            json_t *me = NULL;
            if (dry && e.status == 403 &&
                client_call(cli_client(c), "GET", "/v1/whoami", NULL, NULL, CLIENT_RETRY_ALWAYS,
                            &me, NULL) == CLI_OK &&
                (scope = json_string_value(json_object_get(me, "tenant"))) && *scope) {
                only_scope(json_object_get(next, "tenants"), scope);
                changes = *changes_out = diff_count(cur, next);
                fprintf(stderr,
                        "allot: compared below %s only: the part of the tree this token "
                        "reads\n",
                        scope);
            }
            json_decref(me);
        } else if (rc != CLI_OK) {
            return e.status ? client_error_print(&e) : rc;
        }
    }
    if (dry) {
        if (print) {
            diff("tenant", "path", json_object_get(cur, "tenants"),
                 json_object_get(next, "tenants"), true);
            diff("priorityclass", "name", json_object_get(cur, "priority_classes"),
                 json_object_get(next, "priority_classes"), true);
            printf("(dry run: %d change%s, nothing applied)\n", changes, changes == 1 ? "" : "s");
        } else {
            out_structured(c, next);
        }
        return CLI_OK;
    }
    if (!changes) {
        /* nothing to write: the server already holds this document; the
         * counts a write would have answered with */
        json_t *counts = json_pack(
            "{s:I,s:I}", "tenants", (json_int_t)json_array_size(json_object_get(next, "tenants")),
            "priority_classes",
            (json_int_t)json_array_size(json_object_get(next, "priority_classes")));
        if (!out_structured(c, counts))
            printf("no changes\n");
        json_decref(counts);
        return CLI_OK;
    }
    *write = true;
    return CLI_OK;
}

int cmd_apply(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    json_t *doc = NULL, *cur = NULL, *next = NULL, *reply = NULL, *x;
    const char *file;
    size_t i;
    int rc = args_parse(c, apply_opts, &apply_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos || !(file = args_get(&a, "file"))) {
        rc = cli_usage_error("allot apply -f TENANTS.yaml [--prune]");
        goto out;
    }
    if (!(doc = input_load(file))) {
        rc = CLI_USAGE;
        goto out;
    }
    /* a file of priority classes alone, merged: the tenants stay */
    if (json_is_object(doc) && !json_object_get(doc, "tenants") && !args_has(&a, "prune") &&
        json_is_array(json_object_get(doc, "priority_classes")))
        json_object_set_new(doc, "tenants", json_array());
    if (!json_is_object(doc) || !json_is_array(json_object_get(doc, "tenants"))) {
        rc = cli_usage_error("%s: a tenants file is an object with a `tenants` list (a file of "
                             "`priority_classes` alone is merged without --prune)",
                             file);
        goto out;
    }
    json_array_foreach(json_object_get(doc, "tenants"), i, x)
    {
        json_object_del(x, "synthetic");
    }
    /* read, merge, write only if the tree is still the one read (If-Match
     * its ETag): another apply in between makes allotd answer 412, and the
     * whole read-merge-write starts again (a few times), so no change of
     * the other is lost */
    for (int attempt = 0;; attempt++) {
        struct client_error e;
        int changes = 0;
        char etag[96] = "", line[128];
        bool changed = false;

        json_decref(cur);
        json_decref(next);
        cur = next = NULL;
        if ((rc = get_doc(c, &cur)) != CLI_OK)
            goto out;
        client_reply_header(cli_client(c), "ETag", etag, sizeof(etag));
        rc = apply_merge(c, &a, doc, cur, &next, &changes, &changed);
        if (rc != CLI_OK || !changed)
            goto out;
        if (etag[0]) {
            allot_fmt(line, sizeof(line), "If-Match: %s", etag);
            client_next_header(cli_client(c), line);
        }
        rc = client_try_call(cli_client(c), "PUT", "/v1/tenants", next, CLIENT_RETRY_ALWAYS, &reply,
                             &e);
        if (rc != CLI_OK && e.status == 412 && attempt < 10)
            continue;
        if (rc != CLI_OK && e.status)
            client_error_print(&e);
        break;
    }
    if (rc != CLI_OK)
        goto out;
    json_array_foreach(json_object_get(reply, "warnings"), i, x)
    {
        char t[512];
        fprintf(stderr, "allot: warning: %s\n", out_text(json_string_value(x), t, sizeof(t)));
    }
    if (!out_structured(c, reply)) {
        /* what changed, printed once the server has taken it */
        diff("tenant", "path", json_object_get(cur, "tenants"), json_object_get(next, "tenants"),
             true);
        diff("priorityclass", "name", json_object_get(cur, "priority_classes"),
             json_object_get(next, "priority_classes"), true);
    }
out:
    json_decref(reply);
    json_decref(next);
    json_decref(cur);
    json_decref(doc);
    args_free(&a);
    return rc;
}

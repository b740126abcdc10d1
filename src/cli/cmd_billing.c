/*
 * Metering and billing verbs: `usage` (GET /v1/usage), `invoice` (GET
 * /v1/invoices) and `pricebook` (GET and PUT /v1/pricebook). See
 * docs/metering.md and docs/billing.md.
 */
#include "cli.h"

#include "allot/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends "&key=escaped(value)" to q when value is set. */
static int add_query(struct client *cl, char *q, size_t len, const char *key, const char *value)
{
    char *esc;
    size_t n = strlen(q);

    if (!value)
        return 0;
    if (!(esc = client_escape(cl, value)))
        return -1;
    allot_fmt(q + n, len - n, "%s%s=%s", strchr(q, '?') ? "&" : "?", key, esc);
    allot_free(esc);
    return 0;
}

static void money(char *buf, size_t len, json_t *minor)
{
    long long v = json_integer_value(minor);

    allot_fmt(buf, len, "%s%lld.%02lld", v < 0 ? "-" : "", llabs(v) / 100, llabs(v) % 100);
}

/* A rate of `minor` minor units per hour (it may be a fraction of one: a
 * discounted memory rate of 0.8 cents): two decimals of the currency, or
 * as many as it takes (up to six), so that it never reads 0.00. */
static void rate_text(char *buf, size_t len, double minor)
{
    double v = minor / 100.0;

    /* within a billionth: 0.7 / 100 (0.00699999...) is 0.007 */
    for (int d = 2; d <= 6; d++) {
        allot_fmt(buf, len, "%.*f", d, v);
        double diff = strtod(buf, NULL) - v;
        if ((diff < 0 ? -diff : diff) <= 1e-9)
            return;
    }
}

/* v with `prec` decimals, "-" when it is not a number. */
static const char *num(json_t *v, int prec, char *buf, size_t len)
{
    if (!json_is_number(v))
        return "-";
    allot_fmt(buf, len, "%.*f", prec, json_number_value(v));
    return buf;
}

/* Field k of o (seconds) in hours, 3 decimals. */
static const char *hours(json_t *o, const char *k, char *buf, size_t len)
{
    allot_fmt(buf, len, "%.3f", json_number_value(json_object_get(o, k)) / 3600.0);
    return buf;
}

/*
 * The common start of these read-only verbs: parses the options (no
 * positional argument), makes the client and builds q = path?opt=value for
 * each option named in `query` that was given. Returns CLI_OK (a is to be
 * freed, *cl set) or an exit code (a freed; CLI_HELP after --help).
 */
static int prologue(struct cli *c, int argc, char **argv, const struct cli_opt *opts,
                    const struct cli_usage *u, const char *path, const char *const *query,
                    struct cli_args *a, struct client **cl, char *q, size_t qlen)
{
    int rc = args_parse(c, opts, u, argc, argv, a);

    *cl = NULL;
    if (rc != CLI_OK)
        return rc;
    allot_strlcpy(q, path, qlen);
    if (a->n_pos)
        rc = cli_usage_error("allot %s takes no arguments (got %s)", u->verb, a->pos[0]);
    else if (!(*cl = cli_client(c)))
        rc = CLI_USAGE;
    for (const char *const *k = query; rc == CLI_OK && *k; k++)
        if (add_query(*cl, q, qlen, *k, args_get(a, *k)))
            rc = CLI_SERVER; /* out of memory */
    if (rc != CLI_OK)
        args_free(a);
    return rc;
}

/* prologue, then GET q into *reply. */
static int fetch(struct cli *c, int argc, char **argv, const struct cli_opt *opts,
                 const struct cli_usage *u, const char *path, const char *const *query,
                 struct cli_args *a, json_t **reply)
{
    struct client *cl;
    char q[2048];
    int rc = prologue(c, argc, argv, opts, u, path, query, a, &cl, q, sizeof(q));

    *reply = NULL;
    if (rc != CLI_OK)
        return rc;
    rc = client_call(cl, "GET", q, NULL, NULL, CLIENT_RETRY_ALWAYS, reply, NULL);
    if (rc != CLI_OK)
        args_free(a);
    return rc;
}

/* ---- usage ---- */

static const struct cli_opt usage_opts[] = {
    {"tenant", 't', "TENANT", "only this tenant's subtree"},
    {"from", 0, "WHEN", "start: YYYY-MM-DD, YYYY-MM or unix seconds (default: this month)"},
    {"to", 0, "WHEN", "end, the same forms (default: now)"},
    {"by", 'b', "KEY", "tenant (default), user, job, model, item, day or hour"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage usage_usage = {
    "usage", "[--tenant T] [--from WHEN] [--to WHEN] [--by tenant|user|job|model|item|day|hour]",
    "What was allocated and measured, per group: GPU-hours (GPU-equivalents:\n"
    "a MIG instance counts its compute slices, a fraction its share), CPU\n"
    "core-hours, memory GiB-hours, the mean measured GPU utilisation and the\n"
    "jobs. Whole hours, UTC. -o csv prints the same columns, and gpu_seconds\n"
    "(exact), for a spreadsheet; -o json|yaml the API's answer."};

int cmd_usage(struct cli *c, int argc, char **argv)
{
    static const char *const titles[] = {"KEY",           "GPU-HOURS", "CPU-CORE-HOURS",
                                         "MEM-GIB-HOURS", "SM-UTIL%",  "JOBS"};
    static const char *const query[] = {"by", "tenant", "from", "to", NULL};
    struct cli_args a;
    json_t *reply = NULL, *x;
    size_t i;
    int rc = fetch(c, argc, argv, usage_opts, &usage_usage, "/v1/usage", query, &a, &reply);

    if (rc != CLI_OK)
        return rc;
    if (out_structured(c, reply))
        goto out;
    json_t *rows = json_object_get(reply, "rows");
    if (c->fmt == CLI_FMT_CSV) {
        printf("key,gpu_hours,gpu_seconds,cpu_core_hours,memory_gib_hours,sm_util_avg,jobs\n");
        json_array_foreach(rows, i, x)
        {
            const char *k = json_string_value(json_object_get(x, "key"));
            char u[32];
            printf("\"%s\",%.6f,%.3f,%.6f,%.6f,%s,%lld\n", k ? k : "",
                   json_number_value(json_object_get(x, "gpu_hours")),
                   json_number_value(json_object_get(x, "gpu_seconds")),
                   json_number_value(json_object_get(x, "cpu_core_seconds")) / 3600.0,
                   json_number_value(json_object_get(x, "memory_gib_seconds")) / 3600.0,
                   json_is_number(json_object_get(x, "sm_util_avg"))
                       ? num(json_object_get(x, "sm_util_avg"), 1, u, sizeof(u))
                       : "",
                   (long long)json_integer_value(json_object_get(x, "jobs")));
        }
        goto out;
    }
    struct table *t = table_new(6, titles);
    for (i = 0; i <= json_array_size(rows); i++) {
        json_t *r =
            i < json_array_size(rows) ? json_array_get(rows, i) : json_object_get(reply, "totals");
        char b[5][32];
        const char *cells[6] = {
            i < json_array_size(rows) ? json_string_value(json_object_get(r, "key")) : "(total)",
            num(json_object_get(r, "gpu_hours"), 3, b[0], 32),
            hours(r, "cpu_core_seconds", b[1], 32),
            hours(r, "memory_gib_seconds", b[2], 32),
            num(json_object_get(r, "sm_util_avg"), 1, b[3], 32),
            out_cell(json_object_get(r, "jobs"), b[4], 32)};
        table_row(t, cells);
    }
    table_print(t, stdout);
out:
    json_decref(reply);
    args_free(&a);
    return rc;
}

/* ---- invoice ---- */

static const struct cli_opt invoice_opts[] = {
    {"period", 'p', "YYYY-MM", "the month (default: this month, so far)"},
    {"tenant", 't', "TENANT", "only this tenant's subtree"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage invoice_usage = {
    "invoice", "[--period YYYY-MM] [--tenant T] [-o table|json|yaml|csv|html]",
    "The month's invoice: per tenant, line items by GPU model, MIG profile or\n"
    "fraction, reserved (inside the nominal quota) or borrowed, off-peak, with\n"
    "hours, rate and amount, and the tenant's total and budget. An admin also\n"
    "sees the cluster's cost and the unbilled part (idle capacity and net\n"
    "discounts): the totals plus unbilled equal the cluster's cost."};

int cmd_invoice(struct cli *c, int argc, char **argv)
{
    static const char *const titles[] = {"TENANT", "ITEM", "MODEL",  "KIND/PROFILE", "CAPACITY",
                                         "HOURS",  "RATE", "AMOUNT", "PRICES OF"};
    static const char *const query[] = {"period", "tenant", NULL};
    struct cli_args a;
    struct client *cl;
    json_t *reply = NULL, *t, *l;
    char q[2048];
    size_t i, k;
    int rc = prologue(c, argc, argv, invoice_opts, &invoice_usage, "/v1/invoices", query, &a, &cl,
                      q, sizeof(q));

    if (rc != CLI_OK)
        return rc;
    if (c->fmt == CLI_FMT_CSV || c->fmt == CLI_FMT_HTML) {
        char *body = NULL;
        size_t len = 0;
        if (add_query(cl, q, sizeof(q), "format", c->fmt == CLI_FMT_CSV ? "csv" : "html")) {
            rc = CLI_SERVER; /* out of memory */
            goto out;
        }
        if ((rc = client_get_bytes(cl, q, &body, &len)) == CLI_OK)
            fwrite(body, 1, len, stdout);
        allot_free(body);
        goto out;
    }
    if ((rc = client_call(cl, "GET", q, NULL, NULL, CLIENT_RETRY_ALWAYS, &reply, NULL)) != CLI_OK)
        goto out;
    if (out_structured(c, reply))
        goto out;
    /* the versions that priced the month: one, several, or none yet */
    char books[256] = "";
    json_array_foreach(json_object_get(reply, "price_books"), i, t)
    {
        size_t n = strlen(books);
        allot_fmt(books + n, sizeof(books) - n, "%s%s", n ? ", " : "", json_string_value(t));
    }
    if (!json_object_get(reply, "price_books") &&
        json_is_string(json_object_get(reply, "price_book")))
        allot_strlcpy(books, json_string_value(json_object_get(reply, "price_book")),
                      sizeof(books)); /* an older allotd */
    printf("Invoice %s (%s, %s%s)\n\n", json_string_value(json_object_get(reply, "period")),
           json_string_value(json_object_get(reply, "currency")),
           !*books              ? "no price book in force"
           : strchr(books, ',') ? "price books of "
                                : "price book of ",
           books);
    /* a month whose prices changed has lines per price book version: say which */
    const char *first = NULL;
    bool versions = false;
    json_array_foreach(json_object_get(reply, "tenants"), i, t)
    {
        json_array_foreach(json_object_get(t, "lines"), k, l)
        {
            const char *v = json_string_value(json_object_get(l, "price_book"));
            if (!first)
                first = v;
            versions |= v && first && strcmp(v, first) != 0;
        }
    }
    struct table *tb = table_new(versions ? 9 : 8, titles);
    json_array_foreach(json_object_get(reply, "tenants"), i, t)
    {
        const char *tn = json_string_value(json_object_get(t, "tenant"));
        char m[40], bud[80];
        json_array_foreach(json_object_get(t, "lines"), k, l)
        {
            char h[32], r[32], kp[80];
            const char *kind = json_string_value(json_object_get(l, "kind"));
            const char *prof = json_string_value(json_object_get(l, "profile"));
            allot_fmt(kp, sizeof(kp), "%s%s%s%s", kind ? kind : "", prof ? " " : "",
                      prof ? prof : "",
                      json_is_true(json_object_get(l, "offpeak")) ? " off-peak" : "");
            money(m, sizeof(m), json_object_get(l, "amount_minor"));
            rate_text(r, sizeof(r), json_number_value(json_object_get(l, "rate_minor")));
            const char *model = json_string_value(json_object_get(l, "model"));
            const char *cells[9] = {tn,
                                    json_string_value(json_object_get(l, "item")),
                                    model ? model : "",
                                    kp,
                                    json_string_value(json_object_get(l, "capacity")),
                                    num(json_object_get(l, "hours"), 3, h, sizeof(h)),
                                    r,
                                    m,
                                    json_string_value(json_object_get(l, "price_book"))};
            table_row(tb, cells);
        }
        money(m, sizeof(m), json_object_get(t, "total_minor"));
        bud[0] = '\0';
        if (json_is_integer(json_object_get(t, "budget_minor"))) {
            char bm[40];
            money(bm, sizeof(bm), json_object_get(t, "budget_minor"));
            allot_fmt(bud, sizeof(bud), "budget %s", bm);
        }
        const char *total[9] = {tn, "total", "", bud, "", "", "", m, ""};
        table_row(tb, total);
    }
    table_print(tb, stdout);
    /* the subtrees above the tenants billed (research for research/nlp, ...) */
    const char *sk;
    json_t *sv;
    bool header = false;
    /* with the budgets set on them (an organisation's covers its teams),
     * also where nothing was spent yet */
    json_t *subs = json_deep_copy(json_object_get(reply, "subtrees"));
    if (!subs)
        subs = json_object();
    json_object_foreach(json_object_get(reply, "budgets"), sk, sv)
    {
        if (!json_object_get(subs, sk))
            json_object_set_new(subs, sk, json_integer(0));
    }
    json_object_foreach(subs, sk, sv)
    {
        char m[40], b[40];
        json_t *bud = json_object_get(json_object_get(reply, "budgets"), sk);
        bool billed = false;
        json_array_foreach(json_object_get(reply, "tenants"), i, t) billed |=
            !strcmp(sk, json_string_value(json_object_get(t, "tenant")));
        if (billed)
            continue;
        if (!header)
            printf("\nsubtree totals:\n");
        header = true;
        money(m, sizeof(m), sv);
        if (bud) {
            money(b, sizeof(b), bud);
            printf("  %-30s %s of budget %s (%lld %%)\n", sk, m, b,
                   json_integer_value(bud) > 0 ? (long long)((__int128)json_integer_value(sv) *
                                                             100 / json_integer_value(bud))
                                               : 100LL);
        } else {
            printf("  %-30s %s\n", sk, m);
        }
    }
    json_decref(subs);
    json_t *un = json_object_get(reply, "unbilled"), *cc = json_object_get(reply, "cluster");
    if (un && cc) {
        char m1[40], m2[40], m3[40], m4[40];
        money(m1, sizeof(m1), json_object_get(reply, "billed_minor"));
        money(m2, sizeof(m2), json_object_get(un, "idle_minor"));
        money(m3, sizeof(m3), json_object_get(un, "adjustments_minor"));
        money(m4, sizeof(m4), json_object_get(cc, "amount_minor"));
        printf("\nbilled %s + idle capacity %s + discounts net of premiums %s = cluster %s\n", m1,
               m2, m3, m4);
    }
out:
    json_decref(reply);
    args_free(&a);
    return rc;
}

/* ---- pricebook ---- */

static const struct cli_opt pricebook_opts[] = {
    {"file", 'f', "FILE", "with apply: the price book (YAML or JSON; - for stdin)"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage pricebook_usage = {
    "pricebook", "[show] | apply -f FILE",
    "Shows the price book, or sets it from a YAML or JSON file (admin). See\n"
    "etc/pricebook.example.yaml and docs/billing.md."};

int cmd_pricebook(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    struct client *cl;
    json_t *reply = NULL, *doc = NULL;
    int rc = args_parse(c, pricebook_opts, &pricebook_usage, argc, argv, &a);
    const char *sub;

    if (rc != CLI_OK)
        return rc;
    sub = a.n_pos ? a.pos[0] : "show";
    if (a.n_pos > 1 || (strcmp(sub, "show") != 0 && strcmp(sub, "apply") != 0)) {
        rc = cli_usage_error("allot pricebook [show] | apply -f FILE");
        goto out;
    }
    if (!strcmp(sub, "apply") && !args_get(&a, "file")) {
        rc = cli_usage_error("allot pricebook apply needs -f FILE");
        goto out;
    }
    if (!(cl = cli_client(c))) {
        rc = CLI_USAGE;
        goto out;
    }
    if (!strcmp(sub, "apply")) {
        if (!(doc = input_load(args_get(&a, "file")))) {
            rc = CLI_USAGE;
            goto out;
        }
        rc = client_call(cl, "PUT", "/v1/pricebook", doc, NULL, CLIENT_RETRY_ALWAYS, &reply, NULL);
        json_t *w;
        size_t i;
        json_array_foreach(json_object_get(reply, "warnings"), i, w)
            fprintf(stderr, "allot: warning: %s\n", json_string_value(w));
        if (rc == CLI_OK && !out_structured(c, reply))
            printf("price book applied: %zu version(s)\n",
                   json_array_size(json_object_get(reply, "books")));
        goto out;
    }
    rc = client_call(cl, "GET", "/v1/pricebook", NULL, NULL, CLIENT_RETRY_ALWAYS, &reply, NULL);
    if (rc == CLI_OK && !out_structured(c, reply))
        out_yaml(stdout, reply);
out:
    json_decref(doc);
    json_decref(reply);
    args_free(&a);
    return rc;
}

/* ---- idle ---- */

static const struct cli_opt idle_opts[] = {{"tenant", 't', "TENANT", "only this tenant's subtree"},
                                           {NULL, 0, NULL, NULL}};

static const struct cli_usage idle_usage = {
    "idle", "[--tenant T]",
    "Running jobs that hold GPUs they do not use: measured utilisation under\n"
    "allotd's idle-threshold for their class's idle window. WASTED is the\n"
    "GPU-hours held since the job went idle."};

int cmd_idle(struct cli *c, int argc, char **argv)
{
    static const char *const titles[] = {"JOB",  "TENANT", "USER",       "CLASS",
                                         "GPUS", "UTIL%",  "IDLE-SINCE", "WASTED-GPU-H"};
    static const char *const query[] = {"tenant", NULL};
    struct cli_args a;
    json_t *reply = NULL, *x;
    size_t i;
    int rc = fetch(c, argc, argv, idle_opts, &idle_usage, "/v1/idle", query, &a, &reply);

    if (rc != CLI_OK)
        return rc;
    if (out_structured(c, reply))
        goto out;
    struct table *t = table_new(8, titles);
    json_array_foreach(json_object_get(reply, "jobs"), i, x)
    {
        char b[6][40];
        const char *cls = json_string_value(json_object_get(x, "class"));
        const char *cells[8] = {out_cell(json_object_get(x, "job"), b[0], 40),
                                json_string_value(json_object_get(x, "tenant")),
                                json_string_value(json_object_get(x, "user")),
                                cls && *cls ? cls : "(default)",
                                num(json_object_get(x, "gpus"), 2, b[1], 40),
                                num(json_object_get(x, "util_avg"), 1, b[2], 40),
                                out_time(json_object_get(x, "idle_since"), b[3], 40),
                                num(json_object_get(x, "wasted_gpu_hours"), 3, b[4], 40)};
        table_row(t, cells);
    }
    table_print(t, stdout);
out:
    json_decref(reply);
    args_free(&a);
    return rc;
}

/* ---- anomalies ---- */

static const struct cli_usage anomalies_usage = {
    "anomalies", "[--tenant T]",
    "What allotd's metering found unusual at its last pass: tenants whose GPU\n"
    "use in the last hour is far above their own history (robust z-score),\n"
    "and running jobs whose GPU utilisation or memory changed abruptly.\n"
    "Unhealthy GPUs fence their node instead (allot nodes)."};

int cmd_anomalies(struct cli *c, int argc, char **argv)
{
    static const char *const titles[] = {"KIND", "TENANT", "JOB", "SINCE", "SCORE", "DETAIL"};
    static const char *const query[] = {"tenant", NULL};
    struct cli_args a;
    json_t *reply = NULL, *x;
    size_t i;
    int rc = fetch(c, argc, argv, idle_opts, &anomalies_usage, "/v1/anomalies", query, &a, &reply);

    if (rc != CLI_OK)
        return rc;
    if (out_structured(c, reply))
        goto out;
    struct table *t = table_new(6, titles);
    json_array_foreach(json_object_get(reply, "anomalies"), i, x)
    {
        char b[3][40];
        json_t *job = json_object_get(x, "job");
        const char *cells[6] = {json_string_value(json_object_get(x, "kind")),
                                json_string_value(json_object_get(x, "tenant")),
                                json_is_integer(job) ? out_cell(job, b[0], 40) : "-",
                                out_time(json_object_get(x, "since"), b[1], 40),
                                num(json_object_get(x, "score"), 1, b[2], 40),
                                json_string_value(json_object_get(x, "detail"))};
        table_row(t, cells);
    }
    table_print(t, stdout);
out:
    json_decref(reply);
    args_free(&a);
    return rc;
}

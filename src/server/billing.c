/*
 * The price book and invoices (docs/billing.md).
 *
 * The price book is one JSON document (the CLI reads YAML) kept in the
 * store's meta table: a currency, versions with effective dates, and
 * per-tenant budgets. An hour is priced by the version in force at its
 * start. Rates are kept keyed by the catalog's canonical model and profile
 * names (a book may name them by alias, in any case), the names metering
 * writes, so a rate is found by a plain lookup. A new book may not change
 * the prices of a closed month (one before the current one, UTC): the
 * versions effective before it stay as they are. Money is integer minor units (cents); amounts are
 * exact integers
 * (__int128) until each invoice line is rounded once, half up.
 *
 * Reconciliation: the cluster's cost is its capacity (the node spans) at
 * list price. Every tenant line is also priced at list; the "unbilled"
 * line is the cluster's cost minus every tenant's total, which is the idle
 * capacity at list plus the net of discounts and premiums. So the tenants'
 * totals plus the unbilled line equal the cluster's cost to the cent, by
 * construction, and the parts of the unbilled line say why.
 */
#include "log.h"
#include "meter.h"
#include "server.h"

#include "allot/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PB_KEY   "price_book"
#define PB_MAX   64 /* versions */
#define RATE_MAX 100000000LL

typedef __int128 i128;

/* ---- validation ---- */

static bool int_in(json_t *v, long long lo, long long hi)
{
    return json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi;
}

/* Whether s is three capital letters (an ISO 4217 code's shape). */
static bool currency_code(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (s[i] < 'A' || s[i] > 'Z')
            return false;
    return s[3] == '\0';
}

/* Whether currency s has hundredths as its minor unit (ISO 4217 exponent
 * 2): the invoices print minor units as UNITS.CC. The codes with another
 * exponent (0, 3 or 4) are listed; every other code has 2. */
static bool currency_cents(const char *s)
{
    static const char *const other[] = {
        "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND",
        "VUV", "XAF", "XOF", "XPF", "BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND", "CLF", "UYW"};

    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
        if (!strcmp(s, other[i]))
            return false;
    return true;
}

/* Checks a price book; writes why into err. */
static bool pb_valid(const struct allot_catalog *cat, json_t *pb, char *err, size_t len)
{
    static const char *const top[] = {"currency", "books", "budgets", NULL};
    static const char *const book_f[] = {"effective",
                                         "gpu_hour",
                                         "mig_hour",
                                         "fraction_markup_pct",
                                         "cpu_core_hour",
                                         "memory_gib_hour",
                                         "reserved_discount_pct",
                                         "borrowed_premium_pct",
                                         "offpeak",
                                         "bill",
                                         NULL};
    static const char *const budget_f[] = {"monthly_minor", "warn_pct", "hold_borrowed", NULL};
    const char *k, *prev = NULL;
    json_t *v, *books;
    size_t i;

#define KNOWN(obj, list, where)                                                                    \
    json_object_foreach(obj, k, v)                                                                 \
    {                                                                                              \
        bool ok_ = false;                                                                          \
        for (const char *const *f = list; *f; f++)                                                 \
            ok_ |= !strcmp(*f, k);                                                                 \
        if (!ok_)                                                                                  \
            return allot_fmt(err, len, "unknown field \"%s%s\"", where, k), false;                 \
    }
    if (!json_is_object(pb))
        return allot_fmt(err, len, "the price book must be an object"), false;
    KNOWN(pb, top, "");
    v = json_object_get(pb, "currency");
    if (!json_is_string(v) || json_string_length(v) != 3 || !currency_code(json_string_value(v)))
        return allot_fmt(err, len, "field \"currency\": an ISO 4217 code in capitals such as EUR"),
               false;
    if (!currency_cents(json_string_value(v)))
        return allot_fmt(err, len,
                         "field \"currency\": %s has no hundredths (ISO 4217 minor unit other "
                         "than 2); allot bills in hundredths of a unit",
                         json_string_value(v)),
               false;
    books = json_object_get(pb, "books");
    if (!json_is_array(books) || json_array_size(books) == 0 || json_array_size(books) > PB_MAX)
        return allot_fmt(err, len, "field \"books\": a list of 1 to %d versions", PB_MAX), false;
    json_array_foreach(books, i, v)
    {
        json_t *b = v, *x;
        const char *eff = json_string_value(json_object_get(b, "effective"));
        int64_t t;
        char w[32];

        if (!json_is_object(b))
            return allot_fmt(err, len, "books[%zu] must be an object", i), false;
        allot_fmt(w, sizeof(w), "books[%zu].", i);
        KNOWN(b, book_f, w);
        if (!eff || !meter_parse_date(eff, &t))
            return allot_fmt(err, len, "books[%zu].effective: a date YYYY-MM-DD", i), false;
        if (prev && strcmp(prev, eff) >= 0)
            return allot_fmt(err, len, "books: effective dates must increase (%s after %s)", eff,
                             prev),
                   false;
        prev = eff;
        x = json_object_get(b, "gpu_hour");
        if (!json_is_object(x))
            return allot_fmt(err, len, "books[%zu].gpu_hour: model -> minor units per GPU-hour", i),
                   false;
        json_object_foreach(x, k, v)
        {
            if (allot_catalog_find_model(cat, k) < 0)
                return allot_fmt(err, len, "books[%zu].gpu_hour: unknown GPU model \"%s\"", i, k),
                       false;
            if (!int_in(v, 0, RATE_MAX))
                return allot_fmt(err, len, "books[%zu].gpu_hour.%s: an integer 0..%lld", i, k,
                                 RATE_MAX),
                       false;
        }
        x = json_object_get(b, "mig_hour");
        if (x && !json_is_object(x))
            return allot_fmt(err, len, "books[%zu].mig_hour: profile -> minor units per hour", i),
                   false;
        json_object_foreach(x, k, v)
        {
            if (allot_catalog_find_profile(cat, k) < 0)
                return allot_fmt(err, len, "books[%zu].mig_hour: unknown MIG profile \"%s\"", i, k),
                       false;
            if (!int_in(v, 0, RATE_MAX))
                return allot_fmt(err, len, "books[%zu].mig_hour.%s: an integer 0..%lld", i, k,
                                 RATE_MAX),
                       false;
        }
        static const char *const ints[] = {"cpu_core_hour", "memory_gib_hour"};
        for (size_t q = 0; q < 2; q++)
            if ((x = json_object_get(b, ints[q])) && !int_in(x, 0, RATE_MAX))
                return allot_fmt(err, len, "books[%zu].%s: an integer 0..%lld", i, ints[q],
                                 RATE_MAX),
                       false;
        static const char *const pcts[] = {"reserved_discount_pct", "borrowed_premium_pct",
                                           "fraction_markup_pct"};
        for (size_t q = 0; q < 3; q++)
            if ((x = json_object_get(b, pcts[q])) && !int_in(x, 0, q == 0 ? 100 : 1000))
                return allot_fmt(err, len, "books[%zu].%s: an integer percent 0..%d", i, pcts[q],
                                 q == 0 ? 100 : 1000),
                       false;
        if ((x = json_object_get(b, "offpeak"))) {
            static const char *const op_f[] = {"start_hour", "end_hour", "discount_pct", NULL};
            char w2[48];
            allot_fmt(w2, sizeof(w2), "books[%zu].offpeak.", i);
            if (!json_is_object(x))
                return allot_fmt(err, len, "books[%zu].offpeak must be an object", i), false;
            KNOWN(x, op_f, w2);
            if (!int_in(json_object_get(x, "start_hour"), 0, 23) ||
                !int_in(json_object_get(x, "end_hour"), 0, 23) ||
                !int_in(json_object_get(x, "discount_pct"), 0, 100))
                return allot_fmt(err, len,
                                 "books[%zu].offpeak: {start_hour: 0..23, end_hour: 0..23, "
                                 "discount_pct: 0..100} (UTC hours)",
                                 i),
                       false;
            if (json_integer_value(json_object_get(x, "start_hour")) ==
                json_integer_value(json_object_get(x, "end_hour")))
                return allot_fmt(err, len,
                                 "books[%zu].offpeak: start_hour and end_hour are the same, so no "
                                 "hour is off-peak (leave offpeak out for none)",
                                 i),
                       false;
        }
        if ((x = json_object_get(b, "bill")) &&
            (!json_is_string(x) || (strcmp(json_string_value(x), "allocated") != 0 &&
                                    strcmp(json_string_value(x), "measured") != 0)))
            return allot_fmt(err, len, "books[%zu].bill: allocated or measured", i), false;
    }
    v = json_object_get(pb, "budgets");
    if (v && !json_is_object(v))
        return allot_fmt(err, len, "field \"budgets\": tenant -> {monthly_minor, warn_pct}"), false;
    json_t *bud;
    json_object_foreach(v, k, bud)
    {
        char w[300];
        json_t *x2;
        const char *k2;
        allot_fmt(w, sizeof(w), "budgets.%s.", k);
        if (!json_is_object(bud))
            return allot_fmt(err, len, "budgets.%s must be an object", k), false;
        json_object_foreach(bud, k2, x2)
        {
            bool ok_ = false;
            for (const char *const *f = budget_f; *f; f++)
                ok_ |= !strcmp(*f, k2);
            if (!ok_)
                return allot_fmt(err, len, "unknown field \"%s%s\"", w, k2), false;
        }
        if (!int_in(json_object_get(bud, "monthly_minor"), 0, INT64_MAX / 4) ||
            (json_object_get(bud, "warn_pct") && !int_in(json_object_get(bud, "warn_pct"), 1, 100)))
            return allot_fmt(err, len,
                             "budgets.%s: {monthly_minor: integer 0..%lld, warn_pct: 1..100}", k,
                             (long long)(INT64_MAX / 4)),
                   false;
        if ((x2 = json_object_get(bud, "hold_borrowed")) && !json_is_boolean(x2))
            return allot_fmt(err, len, "budgets.%s.hold_borrowed: true or false", k), false;
    }
#undef KNOWN
    return true;
}

/* The catalog's spelling of a gpu_hour key (a model's canonical name for
 * any of its names, in any case) or of a mig_hour key (a profile's name for
 * any case of it); NULL when the catalog does not know it. */
static const char *pb_canonical_key(const struct allot_catalog *cat, bool model, const char *k)
{
    int x = model ? allot_catalog_find_model(cat, k) : allot_catalog_find_profile(cat, k);

    if (x < 0)
        return NULL;
    return model ? cat->models[x].name : cat->profile_names[x];
}

/*
 * Rewrites the keys of every version's gpu_hour and mig_hour to the
 * catalog's spelling, so that pricing, which looks rates up by the names
 * the metering writes (canonical), finds them whatever name the book used.
 * strict (a book being stored): two keys naming one model or profile are
 * refused, err naming both. Lenient (a stored book written before books
 * were stored canonical): the canonically spelt key wins, else the first.
 * A key the catalog does not know (lenient only) is kept as it is.
 * Returns 0, ALLOT_EINVAL (strict; err says why) or ALLOT_ENOMEM.
 */
static int pb_canonical(const struct allot_catalog *cat, json_t *pb, bool strict, char *err,
                        size_t len)
{
    static const char *const tables[] = {"gpu_hour", "mig_hour"};
    json_t *b;
    size_t i;

    json_array_foreach(json_object_get(pb, "books"), i, b)
    {
        for (size_t q = 0; q < 2; q++) {
            json_t *tab = json_object_get(b, tables[q]), *out, *from, *v;
            const char *k;
            int rc = 0;

            if (!json_is_object(tab))
                continue;
            out = json_object();
            from = json_object(); /* canonical -> the key that named it */
            if (!out || !from)
                rc = ALLOT_ENOMEM;
            json_object_foreach(tab, k, v)
            {
                const char *name = pb_canonical_key(cat, q == 0, k);
                const char *first;

                if (rc)
                    break;
                if (!name)
                    name = k;
                first = json_string_value(json_object_get(from, name));
                if (first && strict) {
                    allot_fmt(err, len, "books[%zu].%s: \"%s\" and \"%s\" both name %s %s", i,
                              tables[q], first, k, q == 0 ? "GPU model" : "MIG profile", name);
                    rc = ALLOT_EINVAL;
                    break;
                }
                if (first && strcmp(k, name) != 0)
                    continue; /* an alias after the canonical key (or another alias) */
                if (json_object_set(out, name, v) < 0 ||
                    json_object_set_new(from, name, json_string(k)) < 0)
                    rc = ALLOT_ENOMEM;
            }
            if (!rc && json_object_set(b, tables[q], out) < 0)
                rc = ALLOT_ENOMEM;
            json_decref(out);
            json_decref(from);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* The stored price book (new reference) or NULL when none is set; its
 * rate tables keyed by the catalog's names. */
json_t *billing_pricebook(struct allot_store *st, const struct allot_catalog *cat, int *rc)
{
    char *text = NULL;
    json_t *pb;

    *rc = allot_store_meta_get(st, PB_KEY, &text);
    if (*rc == ALLOT_ENOENT || (*rc == 0 && !text)) {
        *rc = 0;
        return NULL;
    }
    if (*rc)
        return NULL;
    pb = json_loads(text, 0, NULL);
    allot_free(text);
    if (pb && pb_canonical(cat, pb, false, NULL, 0) < 0) {
        json_decref(pb);
        *rc = ALLOT_ENOMEM;
        return NULL;
    }
    return pb;
}

int api_pricebook_get(struct req *r)
{
    struct allot_store *st = api_reader(r);
    json_t *pb;
    int rc;

    if (!st)
        return 0;
    pb = billing_pricebook(st, r->srv->cat, &rc);
    if (rc)
        return api_error(r, 500, "internal", "price book: %s", allot_strerror(rc));
    if (!pb)
        return api_error(r, 404, "not_found", "no price book is set (PUT /v1/pricebook)");
    /* prices are the cluster's; a budget is its tenant's business: the
     * caller sees the budgets of the tenants it sees */
    json_t *budgets = json_object_get(pb, "budgets");
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(budgets, tmp, k, v)
    {
        if (!auth_sees_tenant(&r->who, k))
            json_object_del(budgets, k);
    }
    return api_json(r, 200, pb);
}

/* The version of books effective on date `eff` (YYYY-MM-DD), or NULL. */
static json_t *pb_version(json_t *books, const char *eff)
{
    json_t *b;
    size_t i;

    json_array_foreach(books, i, b)
    {
        const char *e = json_string_value(json_object_get(b, "effective"));
        if (e && !strcmp(e, eff))
            return b;
    }
    return NULL;
}

static int64_t book_int(json_t *b, const char *k);

/* A copy of version b without what prices nothing: a rate or percentage of
 * 0, an empty gpu_hour or mig_hour, an off-peak window with no discount or
 * no hours, bill: allocated (the defaults, written out or not). */
static json_t *version_priced(json_t *b)
{
    json_t *c = json_deep_copy(b), *v, *op;
    const char *k;
    void *tmp;

    json_object_foreach_safe(c, tmp, k, v)
    {
        if ((json_is_integer(v) && json_integer_value(v) == 0) ||
            (json_is_object(v) && !json_object_size(v)) ||
            (!strcmp(k, "bill") && json_is_string(v) && !strcmp(json_string_value(v), "allocated")))
            json_object_del(c, k);
    }
    op = json_object_get(c, "offpeak");
    if (op && (book_int(op, "discount_pct") == 0 ||
               book_int(op, "start_hour") == book_int(op, "end_hour")))
        json_object_del(c, "offpeak");
    return c;
}

/* Whether versions a and b price every hour alike. */
static bool version_same(json_t *a, json_t *b)
{
    json_t *x = version_priced(a), *y = version_priced(b);
    bool same = x && y && json_equal(x, y);

    json_decref(x);
    json_decref(y);
    return same;
}

/*
 * Whether storing book `next` over `prev` (both canonical) leaves the
 * invoices of closed months as they were: every version effective before
 * the start of the month of `now` (UTC) is in next unchanged, next adds no
 * version effective before it, and the currency stays while such versions
 * exist. Writes why not (naming the version) into err. The versions of
 * the current month and later may change freely: its invoice is not
 * closed.
 */
static bool pb_keeps_past(json_t *prev, json_t *next, int64_t now, char *err, size_t len)
{
    json_t *pv = json_object_get(prev, "books"), *nv = json_object_get(next, "books"), *b;
    time_t t = (time_t)now;
    struct tm tm;
    char month[16];
    bool past = false;
    size_t i;

    gmtime_r(&t, &tm);
    strftime(month, sizeof(month), "%Y-%m-01", &tm);
    json_array_foreach(pv, i, b)
    {
        const char *eff = json_string_value(json_object_get(b, "effective"));
        json_t *same;

        if (!eff || strcmp(eff, month) >= 0)
            continue;
        past = true;
        same = pb_version(nv, eff);
        if (!same || !version_same(same, b))
            return allot_fmt(err, len,
                             "books: version %s priced months already invoiced (before %s): it "
                             "cannot be %s; add a version effective %s or later instead",
                             eff, month, same ? "changed" : "removed", month),
                   false;
    }
    json_array_foreach(nv, i, b)
    {
        const char *eff = json_string_value(json_object_get(b, "effective"));

        if (eff && strcmp(eff, month) < 0 && !pb_version(pv, eff))
            return allot_fmt(err, len,
                             "books: a new version effective %s would reprice months already "
                             "invoiced (before %s); new versions take effect %s or later",
                             eff, month, month),
                   false;
    }
    if (past && !json_equal(json_object_get(prev, "currency"), json_object_get(next, "currency")))
        return allot_fmt(err, len,
                         "currency: the months already invoiced (before %s) are in %s; it "
                         "cannot change",
                         month, json_string_value(json_object_get(prev, "currency"))),
               false;
    return true;
}

struct pb_write {
    struct req *r;
    json_t *pb;       /* the book to store (canonical), borrowed */
    const char *text; /* the same as JSON text */
    char err[400];    /* OUT: why not (ALLOT_ESTATE) */
};

/* Group-commit write: the book, unless it rewrites a closed month's prices
 * (ALLOT_ESTATE, w->err says why; checked against the book stored now, in
 * the write, so two admins' books cannot pass the check together). */
static int pb_write_fn(struct allot_store *st, void *arg)
{
    struct pb_write *w = arg;
    int rc;
    json_t *prev = billing_pricebook(st, w->r->srv->cat, &rc);

    if (rc)
        return rc;
    if (prev && !pb_keeps_past(prev, w->pb, srv_now(), w->err, sizeof(w->err))) {
        json_decref(prev);
        return ALLOT_ESTATE;
    }
    json_decref(prev);
    rc = allot_store_meta_set(st, PB_KEY, w->text);

    if (!rc) {
        rc = api_audit(st, w->r, "pricebook", "ok", srv_now());
        w->r->audited = rc == 0;
    }
    return rc;
}

/* What the stored book leaves unpriced or names in vain, as the reply's
 * "warnings" (each also logged): budgets of tenants the tree does not
 * have, and GPU models of registered nodes without a gpu_hour rate in the
 * newest version (their hours would be billed at 0). */
static json_t *pb_warnings(struct req *r, json_t *pb)
{
    struct allot_store *st = api_reader(r);
    struct allot_store_tenant *t = NULL;
    struct allot_store_node *nd = NULL;
    size_t nt = 0, nn = 0;
    json_t *w = json_array(), *books = json_object_get(pb, "books"), *x;
    json_t *rates = json_object_get(json_array_get(books, json_array_size(books) - 1), "gpu_hour");
    json_t *seen = json_object();
    const char *k;
    char msg[400];

    if (!st || !w || !seen) {
        json_decref(seen);
        return w;
    }
    if (allot_store_tenant_list(st, &t, &nt) == 0)
        json_object_foreach(json_object_get(pb, "budgets"), k, x)
        {
            /* a listed tenant, or a parent only implied by one (research
             * for research/nlp) */
            bool found = false;
            size_t kl = strlen(k);
            for (size_t i = 0; i < nt && !found; i++)
                found =
                    !strncmp(t[i].path, k, kl) && (t[i].path[kl] == '\0' || t[i].path[kl] == '/');
            if (!found) {
                allot_fmt(msg, sizeof(msg),
                          "budgets.%s: no such tenant (yet): the budget applies once it exists", k);
                json_array_append_new(w, json_string(msg));
            }
        }
    allot_store_tenants_free(t, nt);
    if (rates && allot_store_node_list(st, &nd, &nn) == 0)
        for (size_t i = 0; i < nn; i++) {
            json_t *inv = json_loads(nd[i].inventory ? nd[i].inventory : "{}", 0, NULL), *g;
            size_t j;

            json_array_foreach(json_object_get(inv, "gpus"), j, g)
            {
                const char *m = json_string_value(json_object_get(g, "model"));
                int mi = m ? allot_catalog_find_model(r->srv->cat, m) : -1;
                const char *name = mi >= 0 ? r->srv->cat->models[mi].name : m;

                if (!name || json_object_get(rates, name) || json_object_get(seen, name))
                    continue;
                json_object_set_new(seen, name, json_true());
                allot_fmt(msg, sizeof(msg),
                          "gpu_hour has no rate for %s (node %s has them): their hours are "
                          "billed at 0",
                          name, nd[i].name);
                json_array_append_new(w, json_string(msg));
            }
            json_decref(inv);
        }
    allot_store_nodes_free(nd, nn);
    json_decref(seen);
    size_t i;
    json_array_foreach(w, i, x) LOG_WARN("billing", "price book: %s", json_string_value(x));
    return w;
}

int api_pricebook_put(struct req *r)
{
    json_t *pb = api_body_object(r);
    char err[400];
    char *text;
    int rc = 0;

    if (!pb)
        return 0;
    if (!pb_valid(r->srv->cat, pb, err, sizeof(err)) ||
        (rc = pb_canonical(r->srv->cat, pb, true, err, sizeof(err))) < 0) {
        json_decref(pb);
        if (rc == ALLOT_ENOMEM)
            return api_error(r, 500, "internal", "out of memory");
        return api_error(r, 422, "invalid", "price book: %s", err);
    }
    text = json_dumps(pb, JSON_COMPACT | JSON_PRESERVE_ORDER);
    struct pb_write w = {.r = r, .pb = pb, .text = text};
    rc = text ? srv_write(r->srv, pb_write_fn, &w) : ALLOT_ENOMEM;
    free(text);
    if (rc == ALLOT_ESTATE) {
        json_decref(pb);
        return api_error(r, 409, "conflict", "price book: %s", w.err);
    }
    if (rc) {
        json_decref(pb);
        return api_error(r, 500, "internal", "cannot store the price book: %s", allot_strerror(rc));
    }
    json_t *warn = pb_warnings(r, pb);
    if (json_array_size(warn))
        json_object_set_new(pb, "warnings", warn);
    else
        json_decref(warn);
    return api_json(r, 200, pb);
}

/* ---- invoices ---- */

/* The version in force at time t (the last with effective <= t), or NULL. */
static json_t *book_at(json_t *pb, int64_t t)
{
    json_t *books = json_object_get(pb, "books"), *b, *best = NULL;
    size_t i;

    json_array_foreach(books, i, b)
    {
        int64_t e;
        if (meter_parse_time(json_string_value(json_object_get(b, "effective")), &e) && e <= t)
            best = b;
    }
    return best;
}

static int64_t book_int(json_t *b, const char *k)
{
    return json_integer_value(json_object_get(b, k));
}

static bool offpeak_at(json_t *b, int64_t hour)
{
    json_t *op = json_object_get(b, "offpeak");
    int h = (int)((hour / 3600) % 24);
    int s = (int)book_int(op, "start_hour"), e = (int)book_int(op, "end_hour");

    if (!op || book_int(op, "discount_pct") == 0 || s == e)
        return false;
    return s < e ? h >= s && h < e : h >= s || h < e;
}

/* One invoice line being summed: exact amounts in minor x 1e6 x 3600 x
 * 1e4 (ppm-seconds x rate per hour x two percent factors). */
struct line {
    char key[300];
    char tenant[256];
    const char *item; /* "gpu", "cpu", "memory" */
    char model[64], kind[16], profile[32];
    bool borrowed, offpeak;
    char version[16];  /* the price book version that prices it (its effective date) */
    double qty_hours;  /* GPU-hours, core-hours or GiB-hours */
    i128 list_num;     /* at list price */
    i128 bill_num;     /* after discount / premium / off-peak */
    double rate_minor; /* per hour of qty_hours, after adjustments */
};

#define DEN ((i128)1000000 * 3600 * 10000)

static int64_t round_den(i128 num)
{
    i128 q = num / DEN, rem = num % DEN;

    if (rem < 0) {
        rem += DEN;
        q -= 1;
    }
    return (int64_t)(q + (rem * 2 >= DEN ? 1 : 0));
}

struct invoice {
    struct line *lines;
    size_t n, cap;
    json_t *index;
};

/* The line of v with these keys, created empty when new; NULL when out of
 * memory. Every key that can change the rate is in it, the price book
 * version b included, so that all of a line is priced at one rate. */
static struct line *inv_line(struct invoice *v, json_t *b, const char *tenant, const char *item,
                             const char *model, const char *kind, const char *profile,
                             bool borrowed, bool offpeak)
{
    const char *version = json_string_value(json_object_get(b, "effective"));
    char key[700];
    json_t *ix;

    allot_fmt(key, sizeof(key), "%s|%s|%s|%s|%s|%d|%d|%s", tenant, item, model, kind, profile,
              borrowed, offpeak, version ? version : "");
    if ((ix = json_object_get(v->index, key)))
        return &v->lines[json_integer_value(ix)];
    if (allot_grow((void **)&v->lines, &v->cap, v->n + 1, sizeof(*v->lines)) < 0 ||
        json_object_set_new(v->index, key, json_integer((json_int_t)v->n)) < 0)
        return NULL;
    struct line *l = &v->lines[v->n++];
    memset(l, 0, sizeof(*l));
    allot_strlcpy(l->tenant, tenant, sizeof(l->tenant));
    l->item = item;
    allot_strlcpy(l->model, model, sizeof(l->model));
    allot_strlcpy(l->kind, kind, sizeof(l->kind));
    allot_strlcpy(l->profile, profile, sizeof(l->profile));
    l->borrowed = borrowed;
    l->offpeak = offpeak;
    allot_strlcpy(l->version, version ? version : "", sizeof(l->version));
    return l;
}

/* Adds the price of q (ppm-seconds of the line's unit, as in its hours)
 * at `rate` x fnum / fden per unit-hour to line l (book b's version), at
 * list and with the book's adjustments. fnum / fden converts the line's
 * unit into the one the rate is for (GPU-hours into MIG instance-hours) or
 * marks it up (fractions), so the line's rate is per hour of its hours. */
static void line_add(struct line *l, json_t *b, i128 q, i128 fnum, i128 fden, i128 rate)
{
    int64_t adj = l->borrowed ? 100 + book_int(b, "borrowed_premium_pct")
                              : 100 - book_int(b, "reserved_discount_pct");
    int64_t off = l->offpeak ? 100 - book_int(json_object_get(b, "offpeak"), "discount_pct") : 100;

    q = q * fnum / fden;
    l->list_num += q * rate * 10000;
    l->bill_num += q * rate * adj * off;
    l->rate_minor =
        (double)rate * (double)fnum / (double)fden * (double)adj * (double)off / 10000.0;
}

/* Prices one roll-up row into v. */
static int price_row(const struct allot_catalog *cat, json_t *pb, const struct allot_store_usage *u,
                     struct invoice *v)
{
    json_t *b = book_at(pb, u->hour);
    bool off;
    struct line *l;

    if (!b)
        return 0; /* no price in force: not billed (the unbilled line shows it) */
    off = offpeak_at(b, u->hour);
    if (u->gpu_ppm_s > 0 && *u->model) {
        int mi = allot_catalog_find_model(cat, u->model);
        int64_t rate =
            book_int(json_object_get(b, "gpu_hour"), mi >= 0 ? cat->models[mi].name : u->model);
        const char *kind = !strcmp(u->item, "gpu")        ? "whole"
                           : !strncmp(u->item, "mig:", 4) ? "mig"
                                                          : "fraction";
        const char *prof = !strncmp(u->item, "mig:", 4) ? u->item + 4 : "";
        i128 q = u->gpu_ppm_s;

        /* measured: each job task's time scaled by its own utilisation of
         * its share (metering works it out per task: gpu_bill_ppm_s); a row
         * rolled up before allotd kept that (-1) by the row's mean, as then */
        if (!strcmp(json_string_value(json_object_get(b, "bill")) ?: "", "measured")) {
            if (u->gpu_bill_ppm_s >= 0)
                q = u->gpu_bill_ppm_s;
            else if (u->util_ms > 0)
                q = q * u->util_pct_ms / ((i128)u->util_ms * 100);
        }
        l = inv_line(v, b, u->tenant, "gpu", u->model, kind, prof, u->borrowed, off);
        if (!l)
            return ALLOT_ENOMEM;
        json_t *mig = json_object_get(json_object_get(b, "mig_hour"), prof);
        const struct allot_gpu_model *gm = mi >= 0 ? &cat->models[mi] : NULL;
        l->qty_hours += (double)q / 1e6 / 3600.0; /* GPU-hours */
        if (*prof && mig && gm) {
            /* a rate per instance-hour: instance-seconds = ppm-seconds / one instance's ppm */
            for (int p = 0; p < gm->n_profiles; p++)
                if (!strcmp(gm->profiles[p].name, prof) && gm->profiles[p].compute_slices > 0)
                    line_add(l, b, q, gm->compute_slices, gm->profiles[p].compute_slices,
                             json_integer_value(mig));
        } else {
            int64_t markup =
                !strcmp(kind, "fraction") ? 100 + book_int(b, "fraction_markup_pct") : 100;
            line_add(l, b, q, markup, 100, rate);
        }
    }
    if (u->cpu_milli_s > 0 && book_int(b, "cpu_core_hour") > 0) {
        l = inv_line(v, b, u->tenant, "cpu", "", "", "", u->borrowed, off);
        if (!l)
            return ALLOT_ENOMEM;
        l->qty_hours += (double)u->cpu_milli_s / 1000.0 / 3600.0;
        line_add(l, b, (i128)u->cpu_milli_s * 1000, 1, 1, book_int(b, "cpu_core_hour"));
    }
    if (u->mem_mib_s > 0 && book_int(b, "memory_gib_hour") > 0) {
        l = inv_line(v, b, u->tenant, "memory", "", "", "", u->borrowed, off);
        if (!l)
            return ALLOT_ENOMEM;
        l->qty_hours += (double)u->mem_mib_s / 1024.0 / 3600.0;
        line_add(l, b, (i128)u->mem_mib_s * 1000000 / 1024, 1, 1, book_int(b, "memory_gib_hour"));
    }
    return 0;
}

/* The cluster's capacity over [from, to) at list price (exact numerator)
 * and its GPU-hours. */
static int cluster_cost(struct allot_store *st, const struct allot_catalog *cat, json_t *pb,
                        int64_t from, int64_t to, int64_t now, i128 *num, double *gpu_hours)
{
    struct allot_store_node_span *sp = NULL;
    size_t n = 0;
    int rc = allot_store_node_span_list(st, from, to, &sp, &n);

    *num = 0;
    *gpu_hours = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *inv = json_loads(sp[i].inventory, 0, NULL);
        json_t *gpus = json_object_get(inv, "gpus");
        const char *m = json_string_value(json_object_get(json_array_get(gpus, 0), "model"));
        int mi = m ? allot_catalog_find_model(cat, m) : -1;
        int64_t s = sp[i].start > from ? sp[i].start : from;
        int64_t e = sp[i].end ? sp[i].end : now;
        i128 cpus_milli = (i128)llround(json_number_value(json_object_get(inv, "cpus")) * 1000);
        i128 mem_mib = json_integer_value(json_object_get(inv, "memory"));

        if (e > to)
            e = to;
        for (int64_t h = s - ((s % 3600) + 3600) % 3600; h < e; h += 3600) {
            int64_t lo = s > h ? s : h, hi = e < h + 3600 ? e : h + 3600;
            json_t *b = book_at(pb, h);
            if (hi <= lo || !b)
                continue;
            if (mi >= 0) {
                i128 q = (i128)json_array_size(gpus) * 1000000 * (hi - lo);
                *num += q * book_int(json_object_get(b, "gpu_hour"), cat->models[mi].name) * 10000;
                *gpu_hours += (double)json_array_size(gpus) * (double)(hi - lo) / 3600.0;
            }
            *num += cpus_milli * 1000 * (hi - lo) * book_int(b, "cpu_core_hour") * 10000;
            *num += mem_mib * 1000000 / 1024 * (hi - lo) * book_int(b, "memory_gib_hour") * 10000;
        }
        json_decref(inv);
    }
    allot_store_node_spans_free(sp, n);
    return rc;
}

static int line_cmp(const void *a, const void *b)
{
    const struct line *x = a, *y = b;
    int c = strcmp(x->tenant, y->tenant);

    if (c)
        return c;
    if ((c = strcmp(x->item, y->item)))
        return c;
    if ((c = strcmp(x->model, y->model)))
        return c;
    if ((c = strcmp(x->kind, y->kind)))
        return c;
    if ((c = strcmp(x->profile, y->profile)))
        return c;
    if (x->borrowed != y->borrowed)
        return x->borrowed - y->borrowed;
    if (x->offpeak != y->offpeak)
        return x->offpeak - y->offpeak;
    return strcmp(x->version, y->version); /* YYYY-MM-DD: in time order */
}

static json_t *opt_str(const char *s)
{
    return *s ? json_string(s) : json_null();
}

/* Builds the invoice of [from, to) as JSON. */
static int invoice_build(struct req *r, json_t *pb, const char *period, int64_t from, int64_t to,
                         const char *tenant, json_t **out)
{
    struct allot_store *st = api_reader(r);
    struct meter_acc rows;
    struct invoice v = {.index = json_object()};
    int64_t now = srv_now();
    int rc;
    i128 cluster_num = 0;
    double cluster_hours = 0;

    *out = NULL;
    if (!st || !v.index) {
        json_decref(v.index);
        return ALLOT_EIO;
    }
    rc = meter_query(r, from, to, "", false, &rows, NULL);
    for (size_t i = 0; rc == 0 && i < rows.n; i++)
        rc = price_row(r->srv->cat, pb, &rows.rows[i], &v);
    if (rc == 0)
        rc = cluster_cost(st, r->srv->cat, pb, from, to < now ? to : now, now, &cluster_num,
                          &cluster_hours);
    meter_acc_free(&rows);
    if (rc) {
        allot_free(v.lines);
        json_decref(v.index);
        return rc;
    }
    if (v.n)
        qsort(v.lines, v.n, sizeof(*v.lines), line_cmp);

    json_t *tenants = json_array(), *cur = NULL, *budgets = json_object_get(pb, "budgets");
    int64_t sum_total = 0, sum_list = 0, t_total = 0;
    const char *cur_name = NULL;
    bool whole = r->who.role == ALLOT_ROLE_ADMIN && !*tenant;

    for (size_t i = 0; i <= v.n; i++) {
        struct line *l = i < v.n ? &v.lines[i] : NULL;

        if (cur && (!l || strcmp(l->tenant, cur_name) != 0)) {
            json_t *bud = json_object_get(budgets, cur_name);
            json_object_set_new(cur, "total_minor", json_integer(t_total));
            json_object_set_new(cur, "budget_minor",
                                bud ? json_integer(book_int(bud, "monthly_minor")) : json_null());
            json_array_append_new(tenants, cur);
            cur = NULL;
        }
        if (!l)
            break;
        int64_t amount = round_den(l->bill_num), list = round_den(l->list_num);
        sum_total += amount;
        sum_list += list;
        /* lines of tenants outside the asked subtree count for the totals only */
        if (!auth_in_scope(tenant, l->tenant))
            continue;
        if (!cur) {
            cur = json_pack("{s:s,s:[]}", "tenant", l->tenant, "lines");
            cur_name = l->tenant;
            t_total = 0;
        }
        t_total += amount;
        json_array_append_new(
            json_object_get(cur, "lines"),
            json_pack("{s:s,s:o,s:o,s:o,s:s,s:b,s:s,s:f,s:f,s:I,s:I}", "item", l->item, "model",
                      opt_str(l->model), "kind", opt_str(l->kind), "profile", opt_str(l->profile),
                      "capacity", l->borrowed ? "borrowed" : "reserved", "offpeak", l->offpeak,
                      "price_book", l->version, "hours", round(l->qty_hours * 1e6) / 1e6,
                      "rate_minor", l->rate_minor, "amount_minor", (json_int_t)amount, "list_minor",
                      (json_int_t)list));
    }
    int64_t cluster = round_den(cluster_num);
    json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:o}", "period", period, "currency",
                          json_string_value(json_object_get(pb, "currency")), "from",
                          (json_int_t)from, "to", (json_int_t)to, "tenants", tenants);
    /* each subtree's total: a tenant's own lines and those of the tenants below it */
    json_t *sub = json_object(), *tt;
    size_t ti;
    json_array_foreach(tenants, ti, tt)
    {
        const char *path = json_string_value(json_object_get(tt, "tenant"));
        json_int_t total = json_integer_value(json_object_get(tt, "total_minor"));
        char anc[256];
        for (const char *p = path; p;) {
            p = strchr(p, '/');
            allot_fmt(anc, sizeof(anc), "%.*s", p ? (int)(p - path) : (int)strlen(path), path);
            /* only subtrees the invoice holds whole: one the caller sees
             * and the tenant asked for (if any) covers (a member of
             * research/nlp gets no "research" total made of its own lines) */
            if (auth_sees_tenant(&r->who, anc) && (!*tenant || auth_in_scope(tenant, anc)))
                json_object_set_new(
                    sub, anc, json_integer(json_integer_value(json_object_get(sub, anc)) + total));
            if (p)
                p++;
        }
    }
    json_object_set_new(o, "subtrees", sub);
    /* every budget the caller sees in the asked subtree, also of a tenant
     * without lines of its own (an organisation's budget covers its teams:
     * set it beside subtrees' total) */
    json_t *bud_all = json_object(), *bv;
    const char *bk2;
    json_object_foreach(budgets, bk2, bv)
    {
        if (auth_sees_tenant(&r->who, bk2) && (!*tenant || auth_in_scope(tenant, bk2)))
            json_object_set_new(bud_all, bk2, json_integer(book_int(bv, "monthly_minor")));
    }
    json_object_set_new(o, "budgets", bud_all);
    /* the versions in force during the month (a version priced it when
     * it took effect before the month's end and no other replaced it before
     * the month began); price_book: the last of them, null before any */
    json_t *used = json_array(), *bk, *last = NULL;
    size_t bi;
    json_array_foreach(json_object_get(pb, "books"), bi, bk)
    {
        int64_t e, e2;
        json_t *next = json_array_get(json_object_get(pb, "books"), bi + 1);
        if (!meter_parse_time(json_string_value(json_object_get(bk, "effective")), &e) || e >= to)
            continue;
        if (next && meter_parse_time(json_string_value(json_object_get(next, "effective")), &e2) &&
            e2 <= from)
            continue;
        json_array_append(used, json_object_get(bk, "effective"));
        last = json_object_get(bk, "effective");
    }
    json_object_set_new(o, "price_book", last ? json_copy(last) : json_null());
    json_object_set_new(o, "price_books", used);
    if (whole) {
        /* unbilled = idle capacity at list + net discounts/premiums */
        json_object_set_new(o, "unbilled",
                            json_pack("{s:I,s:I,s:I}", "amount_minor",
                                      (json_int_t)(cluster - sum_total), "idle_minor",
                                      (json_int_t)(cluster - sum_list), "adjustments_minor",
                                      (json_int_t)(sum_list - sum_total)));
        json_object_set_new(o, "cluster",
                            json_pack("{s:I,s:f}", "amount_minor", (json_int_t)cluster, "gpu_hours",
                                      round(cluster_hours * 1e6) / 1e6));
        json_object_set_new(o, "billed_minor", json_integer(sum_total));
    }
    allot_free(v.lines);
    json_decref(v.index);
    *out = o;
    return 0;
}

static void money(char *buf, size_t len, int64_t minor)
{
    allot_fmt(buf, len, "%s%lld.%02lld", minor < 0 ? "-" : "", llabs(minor) / 100,
              llabs(minor) % 100);
}

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void html_text(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
}

static const char *js(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static char *invoice_text(json_t *inv, bool html, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    json_t *t, *l;
    size_t i, k;
    char books[256] = ""; /* the versions that priced the month */

    json_array_foreach(json_object_get(inv, "price_books"), i, t)
    {
        size_t n = strlen(books);
        allot_fmt(books + n, sizeof(books) - n, "%s%s", n ? ", " : "", json_string_value(t));
    }
    char m[40];

    if (!f)
        return NULL;
    if (html)
        fprintf(f,
                "<!doctype html><html><head><meta charset=\"utf-8\"><title>allot invoice "
                "%s</title><style>body{font-family:sans-serif}td,th{padding:2px "
                "8px;text-align:left}td.n{text-align:right}</style></head><body>"
                "<h1>Invoice %s</h1><p>Currency %s, %s%s</p>\n",
                js(inv, "period"), js(inv, "period"), js(inv, "currency"),
                json_array_size(json_object_get(inv, "price_books")) > 1 ? "price books of "
                : json_array_size(json_object_get(inv, "price_books"))   ? "price book of "
                                                                         : "no price book in force",
                books);
    else
        fputs("tenant,item,model,kind,profile,capacity,offpeak,hours,rate_minor,amount_minor,"
              "amount,price_book\n",
              f);
    json_array_foreach(json_object_get(inv, "tenants"), i, t)
    {
        if (html) {
            fputs("<h2>", f);
            html_text(f, js(t, "tenant"));
            fputs("</h2><table><tr><th>item</th><th>model</th><th>kind</th><th>profile</th>"
                  "<th>capacity</th><th>off-peak</th><th>hours</th><th>rate</th>"
                  "<th>amount</th><th>prices of</th></tr>\n",
                  f);
        }
        json_array_foreach(json_object_get(t, "lines"), k, l)
        {
            money(m, sizeof(m), json_integer_value(json_object_get(l, "amount_minor")));
            if (html) {
                fputs("<tr>", f);
                const char *cols[] = {"item", "model", "kind", "profile", "capacity"};
                for (size_t c = 0; c < 5; c++) {
                    fputs("<td>", f);
                    html_text(f, js(l, cols[c]));
                    fputs("</td>", f);
                }
                fprintf(f,
                        "<td>%s</td><td class=n>%.3f</td><td class=n>%.2f</td><td "
                        "class=n>%s</td><td>",
                        json_is_true(json_object_get(l, "offpeak")) ? "yes" : "",
                        json_real_value(json_object_get(l, "hours")),
                        json_real_value(json_object_get(l, "rate_minor")) / 100.0, m);
                html_text(f, js(l, "price_book"));
                fputs("</td></tr>\n", f);
            } else {
                csv_field(f, js(t, "tenant"));
                const char *cols[] = {"item", "model", "kind", "profile", "capacity"};
                for (size_t c = 0; c < 5; c++) {
                    fputc(',', f);
                    csv_field(f, js(l, cols[c]));
                }
                fprintf(f, ",%s,%.6f,%.4f,%lld,%s,",
                        json_is_true(json_object_get(l, "offpeak")) ? "yes" : "no",
                        json_real_value(json_object_get(l, "hours")),
                        json_real_value(json_object_get(l, "rate_minor")),
                        (long long)json_integer_value(json_object_get(l, "amount_minor")), m);
                csv_field(f, js(l, "price_book"));
                fputc('\n', f);
            }
        }
        money(m, sizeof(m), json_integer_value(json_object_get(t, "total_minor")));
        if (html && json_is_integer(json_object_get(t, "budget_minor"))) {
            char b[40];
            money(b, sizeof(b), json_integer_value(json_object_get(t, "budget_minor")));
            fprintf(f,
                    "<tr><th colspan=8>total (budget %s)</th><td class=n><b>%s</b></td><td></td>"
                    "</tr></table>\n",
                    b, m);
        } else if (html)
            fprintf(f,
                    "<tr><th colspan=8>total</th><td class=n><b>%s</b></td><td></td></tr>"
                    "</table>\n",
                    m);
        else {
            csv_field(f, js(t, "tenant"));
            fprintf(f, ",total,,,,,,,,%lld,%s,\n",
                    (long long)json_integer_value(json_object_get(t, "total_minor")), m);
        }
    }
    /* the subtrees above the tenants billed, with their budgets */
    if (html && json_object_size(json_object_get(inv, "subtrees"))) {
        const char *sk;
        json_t *sv;

        fputs("<h2>Subtree totals</h2><table><tr><th>tenant and below</th><th>total</th>"
              "<th>budget</th></tr>\n",
              f);
        json_object_foreach(json_object_get(inv, "subtrees"), sk, sv)
        {
            json_t *b = json_object_get(json_object_get(inv, "budgets"), sk);
            char bs[40] = "";

            money(m, sizeof(m), json_integer_value(sv));
            if (b)
                money(bs, sizeof(bs), json_integer_value(b));
            fputs("<tr><td>", f);
            html_text(f, sk);
            fprintf(f, "</td><td class=n>%s</td><td class=n>%s</td></tr>\n", m, bs);
        }
        fputs("</table>\n", f);
    }
    json_t *u = json_object_get(inv, "unbilled"), *c = json_object_get(inv, "cluster");
    if (u && c) {
        char m2[40];
        money(m, sizeof(m), json_integer_value(json_object_get(u, "amount_minor")));
        money(m2, sizeof(m2), json_integer_value(json_object_get(c, "amount_minor")));
        if (html)
            fprintf(f, "<p>Unbilled (idle capacity and adjustments): %s<br>Cluster cost: %s</p>\n",
                    m, m2);
        else
            fprintf(f, "(unbilled),total,,,,,,,,%lld,%s,\n(cluster),total,,,,,,,,%lld,%s,\n",
                    (long long)json_integer_value(json_object_get(u, "amount_minor")), m,
                    (long long)json_integer_value(json_object_get(c, "amount_minor")), m2);
    }
    if (html)
        fputs("</body></html>\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

int api_invoices(struct req *r)
{
    const char *period = api_query(r, "period");
    const char *tenant = api_query(r, "tenant") ? api_query(r, "tenant") : "";
    const char *format = api_query(r, "format") ? api_query(r, "format") : "json";
    struct allot_store *st = api_reader(r);
    int64_t from, to;
    json_t *pb, *inv;
    int rc;
    char month[16];

    if (!st)
        return 0;
    if (!period) {
        time_t t = (time_t)srv_now();
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(month, sizeof(month), "%Y-%m", &tm);
        period = month;
    }
    if (!meter_parse_month(period, &from, &to))
        return api_error(r, 400, "bad_request", "period: a month YYYY-MM (got \"%s\")", period);
    if (strcmp(format, "json") != 0 && strcmp(format, "csv") != 0 && strcmp(format, "html") != 0)
        return api_error(r, 400, "bad_request", "format: json, csv or html (got \"%s\")", format);
    if (*tenant && !auth_sees_tenant(&r->who, tenant) && !auth_in_scope(tenant, r->who.tenant))
        return api_error(r, 404, "not_found", "no such tenant: %s", tenant);
    pb = billing_pricebook(st, r->srv->cat, &rc);
    if (rc)
        return api_error(r, 500, "internal", "price book: %s", allot_strerror(rc));
    if (!pb)
        return api_error(r, 409, "no_price_book",
                         "no price book is set: an admin sets one with allot pricebook apply");
    rc = invoice_build(r, pb, period, from, to, tenant, &inv);
    json_decref(pb);
    if (rc)
        return api_error(r, 500, "internal", "invoice: %s", allot_strerror(rc));
    if (meter_no_tenant(r, tenant, json_array_size(json_object_get(inv, "tenants")) == 0)) {
        json_decref(inv);
        return 0;
    }
    if (!strcmp(format, "json"))
        return api_json(r, 200, inv);
    size_t len = 0;
    char *text = invoice_text(inv, !strcmp(format, "html"), &len);
    json_decref(inv);
    if (!text)
        return api_error(r, 500, "internal", "out of memory");
    api_bytes(r, 200, !strcmp(format, "html") ? "text/html; charset=utf-8" : "text/csv", text, len);
    free(text);
    return 0;
}

int billing_costs(const struct allot_catalog *cat, json_t *pb, const struct allot_store_usage *rows,
                  size_t n, json_t *out)
{
    struct invoice v = {.index = json_object()};
    int rc = v.index ? 0 : ALLOT_ENOMEM;

    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = price_row(cat, pb, &rows[i], &v);
    for (size_t i = 0; rc == 0 && i < v.n; i++) {
        json_t *cur = json_object_get(out, v.lines[i].tenant);
        json_int_t sum = json_integer_value(cur) + round_den(v.lines[i].bill_num);
        if (json_object_set_new(out, v.lines[i].tenant, json_integer(sum)) < 0)
            rc = ALLOT_ENOMEM;
    }
    allot_free(v.lines);
    json_decref(v.index);
    return rc;
}

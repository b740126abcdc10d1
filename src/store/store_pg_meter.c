/*
 * The PostgreSQL back-end's metering tables (see "metering" in
 * allot/store.h): runs and node spans (written by the schema's triggers,
 * read here), agents' samples, the hourly roll-ups and tenant networks.
 */
#include "store_pg.h"

#include "allot/common.h"

#include <string.h>

#define RUN_COLS                                                                                   \
    "SELECT r.id, r.job_id, r.tenant, COALESCE(t.name, ''), r.placement, r.start_time,"            \
    " COALESCE(r.end_time, 0) FROM runs r LEFT JOIN tokens t ON t.id = r.token_id"

static int run_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_run *r = elem;
    int rc;

    (void)s;
    r->id = pg_col_i64(res, row, 0);
    r->job_id = pg_col_i64(res, row, 1);
    r->start = pg_col_i64(res, row, 5);
    r->end = pg_col_i64(res, row, 6);
    if ((rc = pg_col_text(res, row, 2, &r->tenant)) || (rc = pg_col_text(res, row, 3, &r->user)) ||
        (rc = pg_col_text(res, row, 4, &r->placement)))
        return rc;
    return 0;
}

int pg_run_list(struct allot_store *base, int64_t from, int64_t to, struct allot_store_run **out,
                size_t *n)
{
    struct pgp p = {0};

    pgp_int(&p, from);
    pgp_int(&p, to);
    return pg_rows((struct pg_store *)base,
                   RUN_COLS " WHERE r.start_time < $2 AND (r.end_time IS NULL OR r.end_time > $1)"
                            " ORDER BY r.id",
                   &p, sizeof **out, run_row, store_clear_run, (void **)out, n);
}

int pg_run_last(struct allot_store *base, int64_t job_id, int64_t before,
                struct allot_store_run *out)
{
    struct pgp p = {0};

    pgp_int(&p, job_id);
    pgp_int(&p, before);
    return pg_row((struct pg_store *)base,
                  RUN_COLS " WHERE r.job_id = $1 AND r.start_time <= $2 ORDER BY r.id DESC LIMIT 1",
                  &p, sizeof *out, run_row, store_clear_run, out);
}

static int span_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_node_span *sp = elem;
    int rc;

    (void)s;
    sp->start = pg_col_i64(res, row, 2);
    sp->end = pg_col_i64(res, row, 3);
    if ((rc = pg_col_text(res, row, 0, &sp->node)) ||
        (rc = pg_col_text(res, row, 1, &sp->inventory)))
        return rc;
    return 0;
}

int pg_node_span_list(struct allot_store *base, int64_t from, int64_t to,
                      struct allot_store_node_span **out, size_t *n)
{
    struct pgp p = {0};

    pgp_int(&p, from);
    pgp_int(&p, to);
    return pg_rows((struct pg_store *)base,
                   "SELECT node, inventory, start_time, COALESCE(end_time, 0) FROM node_spans"
                   " WHERE start_time < $2 AND (end_time IS NULL OR end_time > $1) ORDER BY id",
                   &p, sizeof **out, span_row, store_clear_span, (void **)out, n);
}

int pg_sample_add(struct allot_store *base, const struct allot_store_sample *x, bool *added)
{
    struct pgp p = {0};
    long changed = 0;
    int rc;

    pgp_int(&p, x->job_id);
    pgp_int(&p, x->task);
    pgp_int(&p, x->at);
    pgp_int(&p, x->cpu_ns);
    pgp_int(&p, x->mem_bytes);
    pgp_int(&p, x->gpu_util);
    pgp_int(&p, x->gpu_mem_bytes);
    pgp_int(&p, x->energy_mj);
    pgp_int(&p, x->interval_ms);
    rc = pg_write((struct pg_store *)base,
                  "INSERT INTO samples(job_id, task, at, cpu_ns, mem_bytes, gpu_util,"
                  " gpu_mem_bytes, energy_mj, interval_ms)"
                  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
                  &p, &changed);
    *added = rc == 0 && changed == 1;
    return rc;
}

static int sample_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_sample *x = elem;

    (void)s;
    x->job_id = pg_col_i64(res, row, 0);
    x->task = (int)pg_col_i64(res, row, 1);
    x->at = pg_col_i64(res, row, 2);
    x->cpu_ns = pg_col_i64(res, row, 3);
    x->mem_bytes = pg_col_i64(res, row, 4);
    x->gpu_util = pg_col_i64(res, row, 5);
    x->gpu_mem_bytes = pg_col_i64(res, row, 6);
    x->energy_mj = pg_col_i64(res, row, 7);
    x->interval_ms = pg_col_i64(res, row, 8);
    return 0;
}

int pg_sample_list(struct allot_store *base, int64_t from, int64_t to,
                   struct allot_store_sample **out, size_t *n)
{
    struct pgp p = {0};

    pgp_int(&p, from);
    pgp_int(&p, to);
    return pg_rows((struct pg_store *)base,
                   "SELECT job_id, task, at, cpu_ns, mem_bytes, gpu_util, gpu_mem_bytes,"
                   " energy_mj, interval_ms FROM samples WHERE at >= $1 AND at < $2"
                   " ORDER BY job_id, task, at",
                   &p, sizeof **out, sample_row, store_clear_none, (void **)out, n);
}

int pg_usage_replace(struct allot_store *base, int64_t from, int64_t to,
                     const struct allot_store_usage *rows, size_t n)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};
    int rc;

    pgp_int(&p, from);
    pgp_int(&p, to);
    if ((rc = pg_do(s, "DELETE FROM usage_hourly WHERE hour >= $1 AND hour < $2", &p)) != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const struct allot_store_usage *u = &rows[i];

        memset(&p, 0, sizeof p);
        pgp_int(&p, u->hour);
        pgp_text(&p, u->tenant);
        pgp_text(&p, u->user);
        pgp_text(&p, u->model);
        pgp_text(&p, u->item);
        pgp_int(&p, u->borrowed ? 1 : 0);
        pgp_int(&p, u->gpu_ppm_s);
        pgp_int(&p, u->cpu_milli_s);
        pgp_int(&p, u->mem_mib_s);
        pgp_int(&p, u->util_pct_ms);
        pgp_int(&p, u->util_ms);
        pgp_int(&p, u->gpu_mem_peak);
        pgp_int(&p, u->energy_mj);
        pgp_int(&p, u->cpu_used_ms);
        pgp_int(&p, u->gpu_bill_ppm_s);
        if ((rc = pg_do(s,
                        "INSERT INTO usage_hourly(hour, tenant, \"user\", model, item, borrowed,"
                        " gpu_ppm_s, cpu_milli_s, mem_mib_s, util_pct_ms, util_ms, gpu_mem_peak,"
                        " energy_mj, cpu_used_ms, gpu_bill_ppm_s) VALUES ($1, $2, $3, $4, $5,"
                        " $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
                        &p)) != 0)
            return rc;
    }
    return 0;
}

static int usage_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_usage *u = elem;
    int rc;

    (void)s;
    u->hour = pg_col_i64(res, row, 0);
    u->borrowed = pg_col_i64(res, row, 5) != 0;
    u->gpu_ppm_s = pg_col_i64(res, row, 6);
    u->cpu_milli_s = pg_col_i64(res, row, 7);
    u->mem_mib_s = pg_col_i64(res, row, 8);
    u->util_pct_ms = pg_col_i64(res, row, 9);
    u->util_ms = pg_col_i64(res, row, 10);
    u->gpu_mem_peak = pg_col_i64(res, row, 11);
    u->energy_mj = pg_col_i64(res, row, 12);
    u->cpu_used_ms = pg_col_i64(res, row, 13);
    u->gpu_bill_ppm_s = pg_col_i64(res, row, 14);
    if ((rc = pg_col_text(res, row, 1, &u->tenant)) || (rc = pg_col_text(res, row, 2, &u->user)) ||
        (rc = pg_col_text(res, row, 3, &u->model)) || (rc = pg_col_text(res, row, 4, &u->item)))
        return rc;
    return 0;
}

int pg_usage_list(struct allot_store *base, int64_t from, int64_t to,
                  struct allot_store_usage **out, size_t *n)
{
    struct pgp p = {0};

    pgp_int(&p, from);
    pgp_int(&p, to);
    return pg_rows((struct pg_store *)base,
                   "SELECT hour, tenant, \"user\", model, item, borrowed, gpu_ppm_s, cpu_milli_s,"
                   " mem_mib_s, util_pct_ms, util_ms, gpu_mem_peak, energy_mj, cpu_used_ms,"
                   " gpu_bill_ppm_s FROM usage_hourly WHERE hour >= $1 AND hour < $2"
                   " ORDER BY hour, tenant, \"user\", model, item, borrowed",
                   &p, sizeof **out, usage_row, store_clear_usage, (void **)out, n);
}

int pg_net_add(struct allot_store *base, const struct allot_store_net *nt)
{
    struct pgp p = {0};

    pgp_text(&p, nt->tenant);
    pgp_int(&p, nt->vni);
    pgp_text(&p, nt->subnet);
    return pg_do((struct pg_store *)base,
                 "INSERT INTO tenant_nets(tenant, vni, subnet) VALUES ($1, $2, $3) "
                 "ON CONFLICT (tenant) DO UPDATE SET vni = EXCLUDED.vni, subnet = EXCLUDED.subnet",
                 &p);
}

static int net_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_net *nt = elem;
    int rc;

    (void)s;
    nt->vni = pg_col_i64(res, row, 1);
    if ((rc = pg_col_text(res, row, 0, &nt->tenant)) ||
        (rc = pg_col_text(res, row, 2, &nt->subnet)))
        return rc;
    return 0;
}

int pg_net_list(struct allot_store *base, struct allot_store_net **out, size_t *n)
{
    return pg_rows((struct pg_store *)base,
                   "SELECT tenant, vni, subnet FROM tenant_nets ORDER BY vni", NULL, sizeof **out,
                   net_row, store_clear_net, (void **)out, n);
}

/*
 * The SQLite back-end's metering tables (see "metering" in allot/store.h):
 * runs and node spans (written by the schema's triggers, read here),
 * agents' samples and the hourly roll-ups.
 */
#include "store_sqlite.h"

#include "allot/common.h"

#include <string.h>

static int run_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_run *r = elem;
    int rc;

    (void)s;
    r->id = sqlite3_column_int64(st, 0);
    r->job_id = sqlite3_column_int64(st, 1);
    r->start = sqlite3_column_int64(st, 5);
    r->end = sqlite3_column_int64(st, 6);
    if ((rc = sq_col_text(st, 2, &r->tenant)) || (rc = sq_col_text(st, 3, &r->user)) ||
        (rc = sq_col_text(st, 4, &r->placement)))
        return rc;
    return 0;
}

int sq_run_list(struct allot_store *base, int64_t from, int64_t to, struct allot_store_run **out,
                size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_RUN_LIST, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, from);
    sqlite3_bind_int64(st, 2, to);
    return sq_rows(s, st, sizeof **out, run_row, store_clear_run, (void **)out, n);
}

int sq_run_last(struct allot_store *base, int64_t job_id, int64_t before,
                struct allot_store_run *out)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_RUN_LAST, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int64(st, 2, before);
    return sq_row(s, st, sizeof *out, run_row, store_clear_run, out);
}

static int span_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_node_span *p = elem;
    int rc;

    (void)s;
    p->start = sqlite3_column_int64(st, 2);
    p->end = sqlite3_column_int64(st, 3);
    if ((rc = sq_col_text(st, 0, &p->node)) || (rc = sq_col_text(st, 1, &p->inventory)))
        return rc;
    return 0;
}

int sq_node_span_list(struct allot_store *base, int64_t from, int64_t to,
                      struct allot_store_node_span **out, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_SPAN_LIST, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, from);
    sqlite3_bind_int64(st, 2, to);
    return sq_rows(s, st, sizeof **out, span_row, store_clear_span, (void **)out, n);
}

int sq_sample_add(struct allot_store *base, const struct allot_store_sample *x, bool *added)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_SAMPLE_ADD, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, x->job_id);
    sqlite3_bind_int(st, 2, x->task);
    sqlite3_bind_int64(st, 3, x->at);
    sqlite3_bind_int64(st, 4, x->cpu_ns);
    sqlite3_bind_int64(st, 5, x->mem_bytes);
    sqlite3_bind_int64(st, 6, x->gpu_util);
    sqlite3_bind_int64(st, 7, x->gpu_mem_bytes);
    sqlite3_bind_int64(st, 8, x->energy_mj);
    sqlite3_bind_int64(st, 9, x->interval_ms);
    rc = sq_done(s, st, sqlite3_step(st));
    *added = rc == 0 && sqlite3_changes(s->db) == 1;
    return rc;
}

static int sample_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_sample *x = elem;

    (void)s;
    x->job_id = sqlite3_column_int64(st, 0);
    x->task = sqlite3_column_int(st, 1);
    x->at = sqlite3_column_int64(st, 2);
    x->cpu_ns = sqlite3_column_int64(st, 3);
    x->mem_bytes = sqlite3_column_int64(st, 4);
    x->gpu_util = sqlite3_column_int64(st, 5);
    x->gpu_mem_bytes = sqlite3_column_int64(st, 6);
    x->energy_mj = sqlite3_column_int64(st, 7);
    x->interval_ms = sqlite3_column_int64(st, 8);
    return 0;
}

int sq_sample_list(struct allot_store *base, int64_t from, int64_t to,
                   struct allot_store_sample **out, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_SAMPLE_LIST, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, from);
    sqlite3_bind_int64(st, 2, to);
    return sq_rows(s, st, sizeof **out, sample_row, store_clear_none, (void **)out, n);
}

int sq_usage_replace(struct allot_store *base, int64_t from, int64_t to,
                     const struct allot_store_usage *rows, size_t n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_USAGE_DELETE, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, from);
    sqlite3_bind_int64(st, 2, to);
    if ((rc = sq_done(s, st, sqlite3_step(st))) != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const struct allot_store_usage *u = &rows[i];

        if (!(st = sq_stmt(s, SQ_USAGE_INSERT, &rc)))
            return rc;
        sqlite3_bind_int64(st, 1, u->hour);
        sq_bind_text(st, 2, u->tenant);
        sq_bind_text(st, 3, u->user);
        sq_bind_text(st, 4, u->model);
        sq_bind_text(st, 5, u->item);
        sqlite3_bind_int(st, 6, u->borrowed ? 1 : 0);
        sqlite3_bind_int64(st, 7, u->gpu_ppm_s);
        sqlite3_bind_int64(st, 8, u->cpu_milli_s);
        sqlite3_bind_int64(st, 9, u->mem_mib_s);
        sqlite3_bind_int64(st, 10, u->util_pct_ms);
        sqlite3_bind_int64(st, 11, u->util_ms);
        sqlite3_bind_int64(st, 12, u->gpu_mem_peak);
        sqlite3_bind_int64(st, 13, u->energy_mj);
        sqlite3_bind_int64(st, 14, u->cpu_used_ms);
        sqlite3_bind_int64(st, 15, u->gpu_bill_ppm_s);
        if ((rc = sq_done(s, st, sqlite3_step(st))) != 0)
            return rc;
    }
    return 0;
}

static int usage_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_usage *u = elem;
    int rc;

    (void)s;
    u->hour = sqlite3_column_int64(st, 0);
    u->borrowed = sqlite3_column_int(st, 5) != 0;
    u->gpu_ppm_s = sqlite3_column_int64(st, 6);
    u->cpu_milli_s = sqlite3_column_int64(st, 7);
    u->mem_mib_s = sqlite3_column_int64(st, 8);
    u->util_pct_ms = sqlite3_column_int64(st, 9);
    u->util_ms = sqlite3_column_int64(st, 10);
    u->gpu_mem_peak = sqlite3_column_int64(st, 11);
    u->energy_mj = sqlite3_column_int64(st, 12);
    u->cpu_used_ms = sqlite3_column_int64(st, 13);
    u->gpu_bill_ppm_s = sqlite3_column_int64(st, 14);
    if ((rc = sq_col_text(st, 1, &u->tenant)) || (rc = sq_col_text(st, 2, &u->user)) ||
        (rc = sq_col_text(st, 3, &u->model)) || (rc = sq_col_text(st, 4, &u->item)))
        return rc;
    return 0;
}

int sq_usage_list(struct allot_store *base, int64_t from, int64_t to,
                  struct allot_store_usage **out, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_USAGE_LIST, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, from);
    sqlite3_bind_int64(st, 2, to);
    return sq_rows(s, st, sizeof **out, usage_row, store_clear_usage, (void **)out, n);
}

/* ---- tenant networks ---- */

int sq_net_add(struct allot_store *base, const struct allot_store_net *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_NET_ADD, &rc)))
        return rc;
    sq_bind_text(st, 1, n->tenant);
    sqlite3_bind_int64(st, 2, n->vni);
    sq_bind_text(st, 3, n->subnet);
    return sq_done(s, st, sqlite3_step(st));
}

static int net_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_net *n = elem;
    int rc;

    (void)s;
    n->vni = sqlite3_column_int64(st, 1);
    if ((rc = sq_col_text(st, 0, &n->tenant)) || (rc = sq_col_text(st, 2, &n->subnet)))
        return rc;
    return 0;
}

int sq_net_list(struct allot_store *base, struct allot_store_net **out, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_NET_LIST, &rc)))
        return rc;
    return sq_rows(s, st, sizeof **out, net_row, store_clear_net, (void **)out, n);
}

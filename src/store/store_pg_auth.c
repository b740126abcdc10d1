/*
 * The PostgreSQL back-end's tokens (the SHA-256 of each secret) and audit
 * rows (the hash chain itself is store.c's).
 */
#include "store_pg.h"

#include "allot/common.h"

#include <string.h>

/* ---- tokens ------------------------------------------------------------------------------------
 */

#define TOKEN_COLS "id, name, role, tenant, hash, created, revoked, expires"

int pg_token_add(struct allot_store *base, const struct allot_store_token *t, int64_t *id)
{
    struct pgp p = {0};

    pgp_text(&p, t->name);
    pgp_text(&p, allot_store_role_name(t->role));
    pgp_text(&p, t->tenant);
    pgp_bytes(&p, t->hash, ALLOT_STORE_HASH_LEN);
    pgp_int(&p, t->created);
    pgp_int(&p, t->revoked);
    pgp_int(&p, t->expires);
    return pg_int((struct pg_store *)base,
                  "INSERT INTO tokens(name, role, tenant, hash, created, revoked, expires)"
                  " VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
                  &p, id);
}

static int token_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_token *t = elem;
    int rc;

    t->id = pg_col_i64(res, row, 0);
    t->created = pg_col_i64(res, row, 5);
    t->revoked = pg_col_i64(res, row, 6);
    t->expires = pg_col_i64(res, row, 7);
    if ((rc = pg_col_text(res, row, 1, &t->name)) || (rc = pg_col_text(res, row, 3, &t->tenant)) ||
        (rc = pg_col_enum(s, res, row, 2, allot_store_role_name, &t->role)) ||
        (rc = pg_col_hash(res, row, 4, t->hash)))
        return rc;
    return 0;
}

int pg_token_get(struct allot_store *base, int64_t id, const uint8_t *hash,
                 struct allot_store_token *out)
{
    struct pgp p = {0};

    if (hash)
        pgp_bytes(&p, hash, ALLOT_STORE_HASH_LEN);
    else
        pgp_int(&p, id);
    return pg_row((struct pg_store *)base,
                  hash ? "SELECT " TOKEN_COLS " FROM tokens WHERE hash = $1"
                       : "SELECT " TOKEN_COLS " FROM tokens WHERE id = $1",
                  &p, sizeof *out, token_row, store_clear_token, out);
}

int pg_token_revoke(struct allot_store *base, int64_t id, int64_t when)
{
    struct pg_store *s = (struct pg_store *)base;
    struct allot_store_token t;
    struct pgp p = {0};
    long changed = 0;
    int rc;

    pgp_int(&p, id);
    pgp_int(&p, when);
    if ((rc = pg_write(s, "UPDATE tokens SET revoked = $2 WHERE id = $1 AND revoked = 0", &p,
                       &changed)) != 0 ||
        changed == 1)
        return rc;
    /* nothing changed: missing, or revoked before */
    memset(&t, 0, sizeof t);
    rc = pg_token_get(base, id, NULL, &t);
    allot_store_token_clear(&t);
    return rc == 0 ? ALLOT_ESTATE : rc;
}

int pg_token_list(struct allot_store *base, struct allot_store_token **out, size_t *n)
{
    return pg_rows((struct pg_store *)base, "SELECT " TOKEN_COLS " FROM tokens ORDER BY id", NULL,
                   sizeof **out, token_row, store_clear_token, (void **)out, n);
}

/* ---- audit rows -------------------------------------------------------------------------------
 */

int pg_audit_last(struct allot_store *base, int64_t *seq, uint8_t hash[ALLOT_STORE_HASH_LEN])
{
    struct pg_store *s = (struct pg_store *)base;
    PGresult *res;
    int rc;

    *seq = 0;
    memset(hash, 0, ALLOT_STORE_HASH_LEN);
    if (!(res = pg_run(s, "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", NULL, &rc)))
        return rc;
    if (PQntuples(res) > 0) {
        *seq = pg_col_i64(res, 0, 0);
        /* a mangled head: append after it anyway; verify reports it */
        pg_col_hash(res, 0, 1, hash);
    }
    PQclear(res);
    return 0;
}

int pg_audit_insert(struct allot_store *base, const struct allot_store_audit *e)
{
    struct pgp p = {0};

    pgp_int(&p, e->seq);
    pgp_int(&p, e->time);
    pgp_int(&p, e->token_id);
    pgp_text(&p, e->action);
    pgp_text(&p, e->target);
    pgp_text(&p, e->result);
    pgp_bytes(&p, e->prev_hash, ALLOT_STORE_HASH_LEN);
    pgp_bytes(&p, e->hash, ALLOT_STORE_HASH_LEN);
    return pg_do((struct pg_store *)base,
                 "INSERT INTO audit(seq, time, token_id, action, target, result, prev_hash, hash)"
                 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                 &p);
}

static int audit_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_audit *a = elem;
    int rc;

    (void)s;
    a->seq = pg_col_i64(res, row, 0);
    a->time = pg_col_i64(res, row, 1);
    a->token_id = pg_col_i64(res, row, 2);
    if ((rc = pg_col_text(res, row, 3, &a->action)) ||
        (rc = pg_col_text(res, row, 4, &a->target)) || (rc = pg_col_text(res, row, 5, &a->result)))
        return rc;
    /* a NULL text column (someone altered the table) reads as "" so that
     * verify can report the entry instead of failing */
    if ((!a->action && !(a->action = store_dupn("", 0))) ||
        (!a->target && !(a->target = store_dupn("", 0))) ||
        (!a->result && !(a->result = store_dupn("", 0))))
        return ALLOT_ENOMEM;
    /* a mangled hash stays zeros: verify reports the entry */
    pg_col_hash(res, row, 6, a->prev_hash);
    pg_col_hash(res, row, 7, a->hash);
    return 0;
}

int pg_audit_list(struct allot_store *base, int64_t after, int limit,
                  struct allot_store_audit **out, size_t *n)
{
    struct pgp p = {0};

    pgp_int(&p, after);
    pgp_int(&p, limit);
    return pg_rows((struct pg_store *)base,
                   "SELECT seq, time, token_id, action, target, result, prev_hash, hash"
                   " FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2",
                   &p, sizeof **out, audit_row, store_clear_audit, (void **)out, n);
}

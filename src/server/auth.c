/*
 * Bearer tokens of allotd: making secrets (256 random bits from libsodium,
 * shown once, stored only as their SHA-256), resolving the Authorization
 * header into a principal, and the tenant-scope rules every handler uses:
 * a token bound to tenant T acts on T and the tenants below it; a token
 * bound to "" acts everywhere.
 */
#include "http.h"
#include "reqparse.h"

#include "allot/common.h"

#include <sodium.h>
#include <string.h>

#define SECRET_PREFIX "allot_"

void auth_new_secret(char *buf, size_t len, uint8_t hash[ALLOT_STORE_HASH_LEN])
{
    uint8_t raw[32];
    static const char hex[] = "0123456789abcdef";
    size_t o = strlen(SECRET_PREFIX);

    randombytes_buf(raw, sizeof(raw));
    allot_strlcpy(buf, SECRET_PREFIX, len);
    for (size_t i = 0; i < sizeof(raw) && o + 2 < len; i++) {
        buf[o++] = hex[raw[i] >> 4];
        buf[o++] = hex[raw[i] & 15];
    }
    buf[o] = '\0';
    sodium_memzero(raw, sizeof(raw));
    allot_store_sha256(buf, strlen(buf), hash);
}

/* Most tokens the cache keeps before it starts again. */
#define TOKEN_CACHE_MAX 10000

void auth_forget_tokens(struct server *s)
{
    pthread_mutex_lock(&s->tokens_lock);
    json_object_clear(s->tokens);
    s->tokens_gen++;
    pthread_mutex_unlock(&s->tokens_lock);
}

/* The principal of a valid token from the cache: true when found. On a
 * miss *gen is the cache's generation, for remember(). */
static bool cached(struct req *r, const char *key, uint64_t *gen)
{
    json_t *e;
    bool hit;

    pthread_mutex_lock(&r->srv->tokens_lock);
    *gen = r->srv->tokens_gen;
    e = json_object_get(r->srv->tokens, key);
    hit = e != NULL;
    if (hit) {
        auth_principal_clear(&r->who);
        r->who.token_id = json_integer_value(json_array_get(e, 0));
        r->who.role = (int)json_integer_value(json_array_get(e, 1));
        r->who.tenant = allot_strdup(json_string_value(json_array_get(e, 2)));
        r->who.name = allot_strdup(json_string_value(json_array_get(e, 3)));
        r->who.resolved = r->who.tenant != NULL && r->who.name != NULL;
    }
    pthread_mutex_unlock(&r->srv->tokens_lock);
    return hit;
}

bool auth_resolve(struct req *r)
{
    const char *h = req_bearer(api_header(r, "Authorization"));
    struct allot_store_token t = {0};
    uint8_t hash[ALLOT_STORE_HASH_LEN];
    char key[2 * ALLOT_STORE_HASH_LEN + 1];
    uint64_t gen = 0;
    int rc;

    if (!h)
        return false;
    allot_store_sha256(h, strlen(h), hash);
    for (int i = 0; i < ALLOT_STORE_HASH_LEN; i++)
        allot_fmt(key + 2 * i, 3, "%02x", hash[i]);
    /* valid tokens are remembered: a request costs no store read; a
     * revocation empties the cache (auth_forget_tokens). Not on a standby:
     * the leader revokes, and only the store tells (docs/ha.md) */
    bool remember = !atomic_load(&r->srv->standby);
    if (remember && cached(r, key, &gen))
        return r->who.resolved;
    struct allot_store *st = srv_reader(r->srv);
    if (!st)
        return false;
    rc = allot_store_token_find(st, hash, &t);
    if (rc < 0 || t.revoked || t.role < 0 || t.role >= ALLOT_ROLE_NROLES) {
        allot_store_token_clear(&t);
        return false;
    }
    /* remembered only when no revocation came between the miss and the
     * read: the store may have answered from before it */
    pthread_mutex_lock(&r->srv->tokens_lock);
    if (remember && r->srv->tokens_gen == gen) {
        if (json_object_size(r->srv->tokens) >= TOKEN_CACHE_MAX)
            json_object_clear(r->srv->tokens);
        json_object_set_new(r->srv->tokens, key,
                            json_pack("[I,i,s,s]", (json_int_t)t.id, t.role,
                                      t.tenant ? t.tenant : "", t.name ? t.name : ""));
    }
    pthread_mutex_unlock(&r->srv->tokens_lock);
    auth_principal_clear(&r->who);
    r->who.token_id = t.id;
    r->who.role = t.role;
    r->who.tenant = t.tenant ? t.tenant : allot_strdup("");
    r->who.name = t.name ? t.name : allot_strdup("");
    t.tenant = NULL;
    t.name = NULL;
    r->who.resolved = r->who.tenant != NULL && r->who.name != NULL;
    allot_store_token_clear(&t);
    return r->who.resolved;
}

bool auth_in_scope(const char *scope, const char *t)
{
    size_t n = strlen(scope);

    if (!n)
        return true;
    return !strncmp(scope, t, n) && (t[n] == '\0' || t[n] == '/');
}

bool auth_sees_tenant(const struct principal *p, const char *t)
{
    if (p->role == ALLOT_ROLE_ADMIN)
        return true;
    if (p->role == ALLOT_ROLE_AGENT)
        return false;
    return auth_in_scope(p->tenant ? p->tenant : "", t);
}

void auth_principal_clear(struct principal *p)
{
    allot_free(p->tenant);
    allot_free(p->name);
    memset(p, 0, sizeof(*p));
}

/*
 * Bearer tokens of allotd: making secrets (256 random bits from libsodium,
 * shown once, stored only as their SHA-256), resolving the Authorization
 * header into a principal, and the tenant-scope rules every handler uses:
 * a token bound to tenant T acts on T and the tenants below it; a token
 * bound to "" acts everywhere.
 *
 * A job's own credential ("allotjob_JOB_RUN_MAC") is not stored: the MAC,
 * an HMAC-SHA-256 of the job and its run under a key kept in the store's
 * meta table, proves allotd made it. It is good while that run of the job
 * runs, for the routes that allow ROLE_JOB, on that job alone (docs/allotd.md,
 * "Job credentials"). Until the key is read (a standby, or a leader before
 * its loop starts) none is taken.
 */
#include "http.h"
#include "reqparse.h"

#include "allot/common.h"

#include <sodium.h>
#include <string.h>
#include <time.h>

#define SECRET_PREFIX "allot_"
#define JOB_PREFIX    "allotjob_"
#define JOB_KEY       "job_key"

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
    if (hit && json_integer_value(json_array_get(e, 4)) &&
        srv_now() >= json_integer_value(json_array_get(e, 4))) {
        auth_principal_clear(&r->who); /* known, and expired: refused without a read */
        r->auth_expired = json_integer_value(json_array_get(e, 4));
    } else if (hit) {
        auth_principal_clear(&r->who);
        r->who.token_id = json_integer_value(json_array_get(e, 0));
        r->who.role = (int)json_integer_value(json_array_get(e, 1));
        r->who.tenant = allot_strdup(json_string_value(json_array_get(e, 2)));
        r->who.name = allot_strdup(json_string_value(json_array_get(e, 3)));
        r->who.expires = json_integer_value(json_array_get(e, 4));
        r->who.resolved = r->who.tenant != NULL && r->who.name != NULL;
    }
    pthread_mutex_unlock(&r->srv->tokens_lock);
    return hit;
}

/* ---- job credentials ---- */

static int job_key_fn(struct allot_store *st, void *arg)
{
    struct server *s = arg;
    char *hex = NULL, made[2 * sizeof(s->job_key) + 1];
    size_t n = 0;
    int rc = allot_store_meta_get(st, JOB_KEY, &hex);

    if (rc == ALLOT_ENOENT) {
        uint8_t raw[sizeof(s->job_key)];

        randombytes_buf(raw, sizeof(raw));
        sodium_bin2hex(made, sizeof(made), raw, sizeof(raw));
        sodium_memzero(raw, sizeof(raw));
        rc = allot_store_meta_set(st, JOB_KEY, made);
        hex = rc ? NULL : allot_strdup(made);
        sodium_memzero(made, sizeof(made));
        if (!rc && !hex)
            rc = ALLOT_ENOMEM;
    }
    if (!rc && (sodium_hex2bin(s->job_key, sizeof(s->job_key), hex, strlen(hex), NULL, &n, NULL) ||
                n != sizeof(s->job_key)))
        rc = ALLOT_EINVAL; /* someone wrote the meta row by hand */
    if (hex)
        sodium_memzero(hex, strlen(hex));
    allot_free(hex);
    return rc;
}

int auth_job_key_init(struct server *s)
{
    int rc = srv_write(s, job_key_fn, s);

    if (!rc)
        atomic_store_explicit(&s->job_key_ready, true, memory_order_release);
    return rc;
}

static void job_mac(const struct server *s, int64_t job, int64_t run,
                    uint8_t mac[crypto_auth_hmacsha256_BYTES])
{
    char msg[96];

    allot_fmt(msg, sizeof(msg), "allot job credential 1 %lld %lld", (long long)job, (long long)run);
    crypto_auth_hmacsha256(mac, (const uint8_t *)msg, strlen(msg), s->job_key);
}

void auth_job_token(const struct server *s, int64_t job, int64_t run, char *buf, size_t len)
{
    uint8_t mac[crypto_auth_hmacsha256_BYTES];
    char hex[2 * sizeof(mac) + 1];

    if (ALLOT_NEVER(len < AUTH_JOB_TOKEN_MAX)) {
        *buf = '\0';
        return;
    }
    job_mac(s, job, run, mac);
    sodium_bin2hex(hex, sizeof(hex), mac, sizeof(mac));
    allot_fmt(buf, len, JOB_PREFIX "%lld_%lld_%s", (long long)job, (long long)run, hex);
}

/* One number of a job credential and the '_' after it; moves *p past them. */
static bool job_field(const char **p, int64_t *out)
{
    const char *u = strchr(*p, '_');
    char num[24];

    if (!u || u == *p || (size_t)(u - *p) >= sizeof(num))
        return false;
    memcpy(num, *p, (size_t)(u - *p));
    num[u - *p] = '\0';
    *p = u + 1;
    return allot_parse_num(num, 1, INT64_MAX, out);
}

/* A job credential into r->who: made by this store's key, and the job runs
 * that run now (a credential of an earlier run is refused). */
static bool job_resolve(struct req *r, const char *h)
{
    const char *p = h + strlen(JOB_PREFIX);
    struct allot_store_job j = {0};
    char want[AUTH_JOB_TOKEN_MAX], name[40];
    int64_t job, run;

    if (!atomic_load_explicit(&r->srv->job_key_ready, memory_order_acquire) ||
        !job_field(&p, &job) || !job_field(&p, &run))
        return false;
    /* the one spelling allotd makes (no leading zeros, lower-case hex) */
    auth_job_token(r->srv, job, run, want, sizeof(want));
    if (strlen(h) != strlen(want) || sodium_memcmp(want, h, strlen(want)) != 0)
        return false;
    struct allot_store *st = srv_reader(r->srv);
    int rc = st ? allot_store_job_get(st, job, &j) : ALLOT_EIO;
    if (rc < 0) {
        r->auth_unread = rc != ALLOT_ENOENT;
        return false;
    }
    bool live =
        (j.state == ALLOT_SJ_STARTING || j.state == ALLOT_SJ_RUNNING) && j.start_time == run;
    auth_principal_clear(&r->who);
    if (live) {
        allot_fmt(name, sizeof(name), "job/%lld", (long long)job);
        r->who.token_id = j.token_id;
        r->who.role = ROLE_JOB;
        r->who.job_id = job;
        r->who.job_run = run;
        r->who.tenant = j.tenant;
        j.tenant = NULL;
        r->who.name = allot_strdup(name);
        r->who.resolved = r->who.tenant != NULL && r->who.name != NULL;
    }
    allot_store_job_clear(&j);
    return r->who.resolved;
}

int auth_refuse(struct req *r, const char *msg)
{
    if (r->auth_unread) {
        api_set_header(r, "Retry-After", "1");
        return api_error(r, 503, "store",
                         "the store could not be read to check the token; retry "
                         "shortly");
    }
    if (r->auth_expired) {
        char when[32];
        return api_error(r, 401, "unauthorized",
                         "the token expired at %s; an admin makes a new one (allot tokens "
                         "create)",
                         allot_utc_text(r->auth_expired, when, sizeof(when)));
    }
    return api_error(r, 401, "unauthorized", "%s", msg);
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
    if (!strncmp(h, JOB_PREFIX, strlen(JOB_PREFIX)))
        return job_resolve(r, h);
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
    rc = st ? allot_store_token_find(st, hash, &t) : ALLOT_EIO;
    if (rc < 0 || t.revoked || t.role < 0 || t.role >= ALLOT_ROLE_NROLES) {
        /* a store that cannot be read says nothing about the token */
        r->auth_unread = rc < 0 && rc != ALLOT_ENOENT;
        allot_store_token_clear(&t);
        return false;
    }
    if (t.expires && srv_now() >= t.expires) {
        r->auth_expired = t.expires;
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
                            json_pack("[I,i,s,s,I]", (json_int_t)t.id, t.role,
                                      t.tenant ? t.tenant : "", t.name ? t.name : "",
                                      (json_int_t)t.expires));
    }
    pthread_mutex_unlock(&r->srv->tokens_lock);
    auth_principal_clear(&r->who);
    r->who.token_id = t.id;
    r->who.role = t.role;
    r->who.tenant = t.tenant ? t.tenant : allot_strdup("");
    r->who.name = t.name ? t.name : allot_strdup("");
    r->who.expires = t.expires;
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
    if (p->role == ALLOT_ROLE_AGENT || p->role == ROLE_JOB)
        return false;
    return auth_in_scope(p->tenant ? p->tenant : "", t);
}

bool auth_sees_job(const struct principal *p, int64_t id, const char *t)
{
    if (p->role == ROLE_JOB)
        return p->job_id == id;
    return auth_sees_tenant(p, t);
}

const char *auth_role_name(int role)
{
    return role == ROLE_JOB ? "job" : allot_store_role_name(role);
}

void auth_principal_clear(struct principal *p)
{
    allot_free(p->tenant);
    allot_free(p->name);
    memset(p, 0, sizeof(*p));
}

void auth_user_name(const char *scope, const char *name, char *buf, size_t n)
{
    if (scope && *scope)
        allot_fmt(buf, n, "%s:%s", scope, name ? name : "");
    else
        allot_strlcpy(buf, name ? name : "", n);
}

const char *api_who(const struct req *r, char *buf, size_t n)
{
    auth_user_name(r->who.tenant, r->who.name, buf, n);
    if (!*buf)
        allot_strlcpy(buf, "a user", n);
    return buf;
}

/*
 * The HTTP layer of allotd (see http.h). libmicrohttpd calls
 * http_access() several times per request: first with the headers (a
 * Content-Length eight times body-max or more is answered 413 at once, as
 * is one over it that waits for 100 Continue), then with body
 * chunks (collected up to body-max; more is discarded and answered 413),
 * then once more to run the route. Route matching, the token and role
 * check, the 503 while the core is being rebuilt, the audit entry of a
 * refused mutating call and the metrics all happen here, so handlers only
 * do their own work. Runs on libmicrohttpd's worker threads.
 */
#include "http.h"

#include "allot/common.h"
#include "log.h"
#include "reqparse.h"
#include "ui.h"

#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#define A(r)        ROLE_BIT(ALLOT_ROLE_##r)
#define ROLES_USERS (A(ADMIN) | A(TENANT_ADMIN) | A(MEMBER) | A(VIEWER))
#define ROLES_JOBS  (A(ADMIN) | A(TENANT_ADMIN) | A(MEMBER))

const struct route http_routes[] = {
    {"GET", "/healthz", api_healthz, ROLES_NONE, NULL, false},
    {"GET", "/readyz", api_readyz, ROLES_NONE, NULL, false},
    /* public unless --metrics-auth: api_metrics then asks for any valid token */
    {"GET", "/metrics", api_metrics, ROLES_NONE, NULL, false},
    {"POST", "/v1/tokens", api_tokens_create, A(ADMIN) | A(TENANT_ADMIN), "token.create", false},
    {"GET", "/v1/tokens", api_tokens_list, A(ADMIN) | A(TENANT_ADMIN), NULL, true},
    {"DELETE", "/v1/tokens/{id}", api_tokens_revoke, A(ADMIN) | A(TENANT_ADMIN), "token.revoke",
     false},
    {"GET", "/v1/audit", api_audit_list, A(ADMIN), NULL, true},
    {"GET", "/v1/audit/verify", api_audit_verify, A(ADMIN), NULL, true},
    {"PUT", "/v1/tenants", api_tenants_put, A(ADMIN), "tenant.apply", false},
    {"GET", "/v1/tenants", api_tenants_get, ROLES_USERS, NULL, true},
    /* what PUT would answer, nothing written: an admin's dry run */
    {"POST", "/v1/tenants/check", api_tenants_check, A(ADMIN), NULL, true},
    {"GET", "/v1/priority-classes", api_prio_list, ROLES_USERS, NULL, true},
    {"PUT", "/v1/priority-classes/{name}", api_prio_put, A(ADMIN), "priorityclass.put", false},
    {"DELETE", "/v1/priority-classes/{name}", api_prio_delete, A(ADMIN), "priorityclass.delete",
     false},
    {"POST", "/v1/jobs", api_jobs_submit, ROLES_JOBS, "job.submit", false},
    {"GET", "/v1/jobs", api_jobs_list, ROLES_USERS, NULL, true},
    {"GET", "/v1/jobs/{id}", api_jobs_get, ROLES_USERS, NULL, true},
    {"POST", "/v1/jobs/{id}/cancel", api_jobs_cancel, ROLES_USERS, "job.cancel", false},
    {"POST", "/v1/jobs/{id}/requeue", api_jobs_requeue, ROLES_USERS, "job.requeue", false},
    {"POST", "/v1/jobs/{id}/hold", api_jobs_hold, ROLES_USERS, "job.hold", false},
    {"POST", "/v1/jobs/{id}/signal", api_jobs_signal, ROLES_USERS, "job.signal", false},
    {"POST", "/v1/jobs/{id}/time-limit", api_jobs_time_limit, ROLES_USERS, "job.time_limit", false},
    {"POST", "/v1/jobs/{id}/release", api_jobs_release, ROLES_USERS, "job.release", false},
    {"POST", "/v1/jobs/{id}/priority", api_jobs_priority, ROLES_USERS, "job.priority", false},
    {"POST", "/v1/jobs/{id}/checkpoint", api_jobs_checkpoint, ROLES_USERS | ROLE_BIT(ROLE_JOB),
     "job.checkpoint", false},
    {"GET", "/v1/jobs/{id}/events", api_jobs_events, ROLES_USERS, NULL, true},
    {"GET", "/v1/jobs/{id}/logs", api_jobs_logs, ROLES_USERS, NULL, false},
    {"GET", "/v1/nodes", api_nodes_list, ROLES_USERS, NULL, false},
    {"POST", "/v1/nodes/register", api_nodes_register, A(ADMIN) | A(AGENT), "node.register", false},
    {"POST", "/v1/nodes/{name}/cordon", api_nodes_cordon, A(ADMIN), "node.cordon", false},
    {"POST", "/v1/nodes/{name}/drain", api_nodes_drain, A(ADMIN), "node.drain", false},
    {"POST", "/v1/nodes/{name}/uncordon", api_nodes_uncordon, A(ADMIN), "node.uncordon", false},
    {"DELETE", "/v1/nodes/{name}", api_nodes_delete, A(ADMIN), "node.delete", false},
    {"POST", "/v1/nodes/{name}/heartbeat", api_nodes_heartbeat, A(ADMIN) | A(AGENT),
     "node.heartbeat", false},
    {"GET", "/v1/whoami", api_whoami, ROLES_USERS | A(AGENT), NULL, true},
    {"GET", "/v1/scheduler", api_scheduler, ROLES_USERS, NULL, true},
    {"GET", "/v1/usage", api_usage, ROLES_USERS, NULL, false},
    {"GET", "/v1/idle", api_idle, ROLES_USERS, NULL, false},
    {"GET", "/v1/anomalies", api_anomalies, ROLES_USERS, NULL, false},
    {"GET", "/v1/invoices", api_invoices, ROLES_USERS, NULL, false},
    {"GET", "/v1/pricebook", api_pricebook_get, ROLES_USERS, NULL, false},
    {"PUT", "/v1/pricebook", api_pricebook_put, A(ADMIN), "pricebook.put", false},
};
const size_t http_n_routes = sizeof(http_routes) / sizeof(http_routes[0]);

/* ---- metrics ---- */

static const int metric_codes[] = {200, 201, 202, 204, 301, 302, 304, 308, 400, 401, 403,
                                   404, 405, 409, 412, 413, 422, 429, 500, 502, 503};
#define N_CODES   (sizeof(metric_codes) / sizeof(metric_codes[0]))
#define N_BUCKETS 12
static const double buckets[N_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                          0.05,   0.1,   0.25,   0.5,   1,    2.5};
#define MAX_ROUTES 48

struct metric_cell {
    uint64_t count;
    double sum;
    uint64_t le[N_BUCKETS];
};

/* Token buckets of the per-token rate limit, by token id (open
 * addressing; a full table admits everything rather than refuse). */
#define RATE_SLOTS 4096
struct bucket {
    int64_t token_id; /* 0: free slot */
    double tokens;
    double at; /* monotonic seconds of the last refill */
};

/* Refused calls audited per token: REFUSED_AUDITED in each window of
 * REFUSED_WINDOW_S seconds; the others are counted and named in the next
 * one audited, so a token refused in a loop cannot fill the store with
 * audit entries (open addressing; a slot idle past its window is taken
 * over, a full table audits everything). */
#define REFUSED_SLOTS    4096
#define REFUSED_AUDITED  10
#define REFUSED_WINDOW_S 10
struct refused {
    int64_t token_id; /* 0: free slot */
    int64_t window;   /* monotonic seconds / REFUSED_WINDOW_S */
    int64_t skipped;  /* refusals not audited since the last audited one */
    int n;            /* audited in this window */
};

struct http {
    struct server *srv;
    char *tls_cert, *tls_key; /* owned: PEM text while serving HTTPS, else NULL */
    pthread_mutex_t rlock;
    struct bucket *rate;     /* owned, RATE_SLOTS entries; NULL when the limit is off */
    struct refused *refused; /* owned, REFUSED_SLOTS entries */
    struct MHD_Daemon *d;
    int64_t body_max;
    pthread_mutex_t mlock;
    /* [route][code]; route index http_n_routes = no route matched,
     * http_n_routes + 1 = the dashboard's files (ROUTE_UI) */
    struct metric_cell cells[MAX_ROUTES + 2][N_CODES];
};

static void metric_record(struct http *h, size_t route, int status, double secs)
{
    size_t c = 0;

    while (c < N_CODES && metric_codes[c] != status)
        c++;
    for (size_t k = 0; c == N_CODES && k < N_CODES; k++)
        if (metric_codes[k] == 500) /* an unexpected status is a server bug */
            c = k;
    pthread_mutex_lock(&h->mlock);
    struct metric_cell *m = &h->cells[route][c];
    m->count++;
    m->sum += secs;
    for (int b = 0; b < N_BUCKETS; b++)
        if (secs <= buckets[b])
            m->le[b]++;
    pthread_mutex_unlock(&h->mlock);
}

#define ROUTE_UI (http_n_routes + 1)

/* The labels of route index i: a route's, "unmatched", or the dashboard's. */
static const char *route_method(size_t i)
{
    return i < http_n_routes ? http_routes[i].method : i == ROUTE_UI ? "GET" : "other";
}

static const char *route_name(size_t i)
{
    return i < http_n_routes ? http_routes[i].pattern : i == ROUTE_UI ? "/ui/" : "unmatched";
}

void http_metrics(struct http *h, FILE *out)
{
    fprintf(out, "# HELP allot_api_requests_total API requests by route and status code.\n"
                 "# TYPE allot_api_requests_total counter\n");
    pthread_mutex_lock(&h->mlock);
    for (size_t i = 0; i <= ROUTE_UI; i++)
        for (size_t c = 0; c < N_CODES; c++) {
            const struct metric_cell *m = &h->cells[i][c];
            if (!m->count)
                continue;
            fprintf(out, "allot_api_requests_total{method=\"%s\",route=\"%s\",code=\"%d\"} %llu\n",
                    route_method(i), route_name(i), metric_codes[c], (unsigned long long)m->count);
        }
    fprintf(out, "# HELP allot_api_request_seconds API request latency by route and status code.\n"
                 "# TYPE allot_api_request_seconds histogram\n");
    for (size_t i = 0; i <= ROUTE_UI; i++)
        for (size_t c = 0; c < N_CODES; c++) {
            const struct metric_cell *m = &h->cells[i][c];
            char lab[256];

            if (!m->count)
                continue;
            allot_fmt(lab, sizeof(lab), "method=\"%s\",route=\"%s\",code=\"%d\"", route_method(i),
                      route_name(i), metric_codes[c]);
            for (int b = 0; b < N_BUCKETS; b++)
                fprintf(out, "allot_api_request_seconds_bucket{%s,le=\"%g\"} %llu\n", lab,
                        buckets[b], (unsigned long long)m->le[b]);
            fprintf(out, "allot_api_request_seconds_bucket{%s,le=\"+Inf\"} %llu\n", lab,
                    (unsigned long long)m->count);
            fprintf(out, "allot_api_request_seconds_sum{%s} %.6f\n", lab, m->sum);
            fprintf(out, "allot_api_request_seconds_count{%s} %llu\n", lab,
                    (unsigned long long)m->count);
        }
    pthread_mutex_unlock(&h->mlock);
}

/* ---- replies ---- */

static void set_resp(struct req *r, int status, const char *type, char *body)
{
    allot_free(r->resp);
    r->status = status;
    r->content_type = type;
    r->resp = body;
    r->resp_len = body ? strlen(body) : 0;
}

int api_json(struct req *r, int status, json_t *v)
{
    /* 15 digits: a user's 0.1 reads back as 0.1, not 0.10000000000000001 */
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    char *copy = s ? allot_strdup(s) : NULL;

    free(s);
    json_decref(v);
    if (!copy) {
        set_resp(r, 500, "application/json",
                 allot_strdup("{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}"));
        return 0;
    }
    set_resp(r, status, "application/json", copy);
    return 0;
}

int api_error(struct req *r, int status, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *o = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
    if (!o) { /* a message naming what came in may be no UTF-8 (a path's %FF): shown as ? */
        for (char *p = msg; *p; p++)
            if ((unsigned char)*p >= 0x80)
                *p = '?';
        o = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
    }
    return api_json(r, status, o);
}

int api_bytes(struct req *r, int status, const char *content_type, const void *buf, size_t len)
{
    char *copy = allot_malloc(len + 1);

    if (!copy)
        return api_error(r, 500, "internal", "out of memory");
    memcpy(copy, buf, len);
    copy[len] = '\0';
    set_resp(r, status, content_type, copy);
    r->resp_len = len;
    return 0;
}

int api_text(struct req *r, int status, const char *content_type, const char *text)
{
    set_resp(r, status, content_type, allot_strdup(text));
    return 0;
}

const char *api_query(struct req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

bool api_query_flag(struct req *r, const char *key, bool *out)
{
    const char *v = api_query(r, key);

    *out = v && (!strcmp(v, "1") || !strcmp(v, "true"));
    if (!v || *out || !strcmp(v, "0") || !strcmp(v, "false"))
        return true;
    api_error(r, 400, "bad_query", "query argument \"%s\": want true or false, not \"%.40s\"", key,
              v);
    return false;
}

const char *api_header(struct req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

int api_set_header(struct req *r, const char *name, const char *value)
{
    if (!ALLOT_ALWAYS(r->n_hdrs < SRV_RESP_HEADERS))
        return ALLOT_ENOSPC;
    allot_strlcpy(r->hdrs[r->n_hdrs].name, name, sizeof(r->hdrs[0].name));
    allot_strlcpy(r->hdrs[r->n_hdrs].value, value, sizeof(r->hdrs[0].value));
    r->n_hdrs++;
    return 0;
}

json_t *api_body_object(struct req *r)
{
    json_error_t e;
    json_t *v;

    if (!r->body_len) {
        api_error(r, 400, "bad_request", "a JSON object body is required");
        return NULL;
    }
    v = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &e);
    if (!v) {
        api_error(r, 400, "malformed_json", "line %d column %d: %s", e.line, e.column, e.text);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        api_error(r, 400, "bad_request", "the body must be a JSON object");
        return NULL;
    }
    return v;
}

bool api_no_body(struct req *r)
{
    static const char *const none[] = {NULL};
    json_t *b;
    bool ok;

    if (!r->body_len)
        return true;
    if (!(b = api_body_object(r)))
        return false;
    ok = api_known_fields(r, b, none, NULL);
    json_decref(b);
    return ok;
}

bool api_known_fields(struct req *r, json_t *obj, const char *const *allowed, const char *where)
{
    const char *k;
    json_t *v;

    json_object_foreach(obj, k, v)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = !strcmp(*a, k);
        if (!ok) {
            api_error(r, 400, "bad_request", "unknown field \"%s%s%s\"", where ? where : "",
                      where ? "." : "", k);
            return false;
        }
    }
    return true;
}

/* ---- routing ---- */

/* req_route_match writes up to REQ_MAX_PARAMS segments into r->params
 * (the segment size is checked by the call's type). */
_Static_assert(sizeof(((struct req *)0)->params) / sizeof(((struct req *)0)->params[0]) >=
                   REQ_MAX_PARAMS,
               "struct req holds fewer path parameters than reqparse.h writes");

struct conn_ctx {
    struct req r;
    size_t cap;
    bool too_large;
    struct timespec t0;
};

static double since(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, struct req *r)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;
    const char *body = r->resp ? r->resp : "";

    resp = MHD_create_response_from_buffer(r->resp ? r->resp_len : 0, (void *)body,
                                           MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type",
                            r->content_type ? r->content_type : "application/json");
    for (int i = 0; i < r->n_hdrs; i++)
        MHD_add_response_header(resp, r->hdrs[i].name, r->hdrs[i].value);
    if (r->status == 429)
        MHD_add_response_header(resp, "Retry-After", "1");
    ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

struct audit_write {
    struct req *r;
    const char *target, *result;
    int64_t now;
};

/* Group-commit write: the audit entry of a refused mutating call. */
static int audit_fn(struct allot_store *st, void *arg)
{
    struct audit_write *w = arg;

    return api_audit(st, w->r, w->target, w->result, w->now);
}

static double mono_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Takes one request from token id's bucket; false when it is empty. */
static bool rate_take(struct http *h, int64_t id)
{
    const struct server_config *c = &h->srv->cfg;
    double now = mono_now();
    bool ok = true;

    if (!h->rate)
        return true;
    pthread_mutex_lock(&h->rlock);
    for (size_t k = 0; k < RATE_SLOTS; k++) {
        struct bucket *b = &h->rate[((uint64_t)id * 0x9e3779b97f4a7c15ULL + k) % RATE_SLOTS];

        if (b->token_id && b->token_id != id)
            continue;
        if (!b->token_id)
            *b = (struct bucket){.token_id = id, .tokens = (double)c->rate_burst, .at = now};
        b->tokens += (now - b->at) * (double)c->rate_limit;
        if (b->tokens > (double)c->rate_burst)
            b->tokens = (double)c->rate_burst;
        b->at = now;
        ok = b->tokens >= 1;
        if (ok)
            b->tokens -= 1;
        break;
    }
    pthread_mutex_unlock(&h->rlock);
    return ok;
}

/* Whether token id's refused call is audited now; *skipped gets how many
 * of its refusals went unaudited since its last audited one. */
static bool refused_take(struct http *h, int64_t id, int64_t *skipped)
{
    int64_t window = (int64_t)(mono_now() / REFUSED_WINDOW_S);
    bool ok = true;

    *skipped = 0;
    pthread_mutex_lock(&h->rlock);
    for (size_t k = 0; k < REFUSED_SLOTS; k++) {
        struct refused *b = &h->refused[((uint64_t)id * 0x9e3779b97f4a7c15ULL + k) % REFUSED_SLOTS];

        if (b->token_id && b->token_id != id && (b->window == window || b->skipped))
            continue; /* another token's, in use */
        if (b->token_id != id)
            *b = (struct refused){.token_id = id, .window = window};
        if (b->window != window) {
            b->window = window;
            b->n = 0;
        }
        ok = b->n < REFUSED_AUDITED;
        if (ok) {
            b->n++;
            *skipped = b->skipped;
            b->skipped = 0;
        } else {
            b->skipped++;
        }
        break;
    }
    pthread_mutex_unlock(&h->rlock);
    return ok;
}

struct header_count {
    const char *name;
    int n;
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    struct header_count *c = cls;

    (void)kind;
    (void)value;
    if (key && !strcasecmp(key, c->name))
        c->n++;
    return MHD_YES;
}

/* How many times header `name` came with the request (names are
 * case-insensitive; libmicrohttpd keeps each occurrence). */
static int header_count(struct req *r, const char *name)
{
    struct header_count c = {.name = name};

    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_header, &c);
    return c.n;
}

/* The request's path as an audit entry's target: a control character (a
 * byte that would end or recolour a line where the entry is read: a raw
 * newline or escape sequence in a refused request's path) and every byte
 * from 0x7f (C1 controls, and bytes that are no UTF-8, which the entry's
 * JSON could not hold) are written as %XX, as in a URL. */
static void audit_path(char *out, size_t len, const char *path)
{
    size_t n = 0;

    for (const unsigned char *p = (const unsigned char *)path; *p && n + 4 <= len; p++) {
        if (*p < 0x20 || *p >= 0x7f)
            n += (size_t)snprintf(out + n, len - n, "%%%02X", *p);
        else
            out[n++] = (char)*p;
    }
    out[n < len ? n : len - 1] = '\0';
}

static void dispatch(struct http *h, struct req *r, size_t *route_out)
{
    int64_t skipped = 0; /* refusals of r's token not audited before this one */
    bool path_seen = false;
    size_t i;

    if (ui_path(r->path)) {
        *route_out = ROUTE_UI;
        ui_serve(r);
        return;
    }
    for (i = 0; i < http_n_routes; i++) {
        memset(r->params, 0, sizeof(r->params));
        if (!req_route_match(http_routes[i].pattern, r->path, r->params))
            continue;
        path_seen = true;
        /* HEAD is a GET without its body (libmicrohttpd leaves it out):
         * load balancers' health checks use it */
        if (!strcmp(http_routes[i].method, r->method) ||
            (!strcmp(r->method, "HEAD") && !strcmp(http_routes[i].method, "GET")))
            break;
    }
    *route_out = i;
    if (i == http_n_routes && !path_seen) {
        api_error(r, 404, "not_found", "no such route: %s", r->path);
        return;
    }
    if (i == http_n_routes) {
        /* the methods the path takes, as HTTP asks of a 405 */
        char allow[128] = "";
        size_t len = 0;
        for (size_t k = 0; k < http_n_routes && len < sizeof(allow); k++)
            if (req_route_match(http_routes[k].pattern, r->path, r->params))
                len += (size_t)allot_fmt(allow + len, sizeof(allow) - len, "%s%s", len ? ", " : "",
                                         http_routes[k].method);
        api_set_header(r, "Allow", allow);
        api_error(r, 405, "method_not_allowed", "%s is not allowed on %s (allowed: %s)", r->method,
                  r->path, allow);
        return;
    }
    const struct route *rt = &http_routes[i];
    r->action = rt->action;
    /* two credentials are ambiguous: rather than act as one of them (which
     * one a proxy or a library keeps differs), refuse the request whole */
    if (header_count(r, "Authorization") > 1) {
        api_error(r, 400, "bad_request", "more than one Authorization header");
        return;
    }
    if (rt->roles != ROLES_NONE) {
        /* a standby serves the reads of the store alone (docs/ha.md) */
        if (!atomic_load(&h->srv->ready) && !(rt->standby && atomic_load(&h->srv->standby))) {
            if (atomic_load(&h->srv->standby))
                api_standby(r);
            else
                api_error(r, 503, "starting", "allotd is starting; retry shortly");
            return;
        }
        if (!auth_resolve(r)) {
            auth_refuse(r, "a valid bearer token is required");
            return;
        }
        if (!rate_take(h, r->who.token_id)) {
            api_error(r, 429, "rate_limited", "over %lld requests per second for this token",
                      (long long)h->srv->cfg.rate_limit);
            return; /* not audited: a flood must not flood the log */
        }
        if (!(rt->roles & ROLE_BIT(r->who.role))) {
            api_error(r, 403, "forbidden", "role %s may not %s %s", auth_role_name(r->who.role),
                      rt->method, rt->pattern);
            goto audit;
        }
    }
    rt->fn(r);
    if (!r->resp)
        api_error(r, 500, "internal", "no reply");
    /* a write refused because another allotd took the lead failed here, not
     * in the request: answered as a standby would, so the client retries */
    if (r->status >= 500 && atomic_load(&h->srv->fenced)) {
        allot_free(r->resp);
        r->resp = NULL;
        r->n_hdrs = 0;
        api_standby(r);
    }
audit:
    if (rt->action && r->who.resolved && !r->audited && r->status >= 400 &&
        refused_take(h, r->who.token_id, &skipped)) {
        char result[128], more[64] = "";
        char target[160];

        struct audit_write w = {.r = r, .target = target, .result = result, .now = srv_now()};

        if (skipped)
            allot_fmt(more, sizeof(more), " (%lld refused call%s before it not audited)",
                      (long long)skipped, skipped == 1 ? "" : "s");
        allot_fmt(result, sizeof(result), "error %d%s%s", r->status,
                  r->who.role == ROLE_JOB ? " (job credential)" : "", more);
        audit_path(target, sizeof(target), r->path);
        if (srv_write(h->srv, audit_fn, &w) < 0)
            LOG_WARN("http", "audit append failed for %s %s", r->method, r->path);
    }
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* How the request path and query are unescaped (MHD_OPTION_UNESCAPE_CALLBACK;
 * in place, returns the new length): %XX as usual, except that %00 becomes
 * DEL (0x7f), so that no NUL cuts a path or a value short (an id, a number
 * or a name holding DEL is none, and is refused), and that in the path
 * (which starts with '/') %2F stays as it is: an escaped slash is no
 * separator (DELETE /v1/tokens/28%00/x or GET /v1/jobs/1%2Fevents name no
 * route). */
static size_t http_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    bool path = *s == '/';
    char *w = s;

    (void)cls, (void)c;
    for (const char *r = s; *r;) {
        int hi = r[0] == '%' ? hex_digit(r[1]) : -1, lo = hi >= 0 ? hex_digit(r[2]) : -1;
        int v = hi * 16 + lo;

        if (hi < 0 || lo < 0 || (path && v == '/')) {
            *w++ = *r++;
            continue;
        }
        *w++ = v ? (char)v : '\x7f';
        r += 3;
    }
    *w = '\0';
    return (size_t)(w - s);
}

static enum MHD_Result http_access(void *cls, struct MHD_Connection *c, const char *url,
                                   const char *method, const char *version, const char *upload_data,
                                   size_t *upload_size, void **con_cls)
{
    struct http *h = cls;
    struct conn_ctx *x = *con_cls;

    if (!x) {
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");

        x = allot_calloc(1, sizeof(*x));
        if (!x)
            return MHD_NO;
        clock_gettime(CLOCK_MONOTONIC, &x->t0);
        x->r.srv = h->srv;
        x->r.method = method;
        x->r.path = url;
        x->r.conn = c;
        *con_cls = x;
        long long len = cl ? strtoll(cl, NULL, 10) : 0;

        /* A body somewhat over the limit is read and dropped, so the
         * client, still sending, gets its 413 cleanly; one far over it is
         * answered at once and the connection closed unread. */
        if (len > h->body_max)
            x->too_large = true;
        /* a client waiting for 100 Continue has sent nothing yet: no reason
         * to read what it would send */
        const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect");
        if (len / 8 > h->body_max ||
            (x->too_large && expect && !strcasecmp(expect, "100-continue"))) {
            api_error(&x->r, 413, "too_large", "request body over %lld bytes",
                      (long long)h->body_max);
            metric_record(h, http_n_routes, 413, since(&x->t0));
            return send_reply(c, &x->r);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;

        *upload_size = 0;
        if (x->too_large || x->r.body_len + n > (size_t)h->body_max) {
            x->too_large = true;
            return MHD_YES;
        }
        if (allot_grow((void **)&x->r.body, &x->cap, x->r.body_len + n + 1, 1) < 0)
            return MHD_NO;
        memcpy(x->r.body + x->r.body_len, upload_data, n);
        x->r.body_len += n;
        x->r.body[x->r.body_len] = '\0';
        return MHD_YES;
    }
    size_t route = http_n_routes;
    if (x->r.status)
        return MHD_YES; /* answered already (413 on the headers) */
    if (x->too_large)
        api_error(&x->r, 413, "too_large", "request body over %lld bytes", (long long)h->body_max);
    else
        dispatch(h, &x->r, &route);
    double took = since(&x->t0);
    metric_record(h, route, x->r.status, took);
    if (allot_log_enabled(ALLOT_LOG_DEBUG)) { /* who asked, and how long the answer took */
        char who[INET6_ADDRSTRLEN] = "?";
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;

        if (sa && sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, who,
                      sizeof(who));
        else if (sa && sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, who,
                      sizeof(who));
        LOG_DEBUG("http", "%s %s %s -> %d in %.1f ms", who, method, url, x->r.status,
                  took * 1000.0);
    }
    return send_reply(c, &x->r);
}

static void http_done(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct conn_ctx *x = *con_cls;

    /* the thread's store handle goes back: a connection that stays open
     * holds none between requests */
    srv_reader_release(((struct http *)cls)->srv);
    if (!x)
        return;
    allot_free(x->r.body);
    allot_free(x->r.resp);
    auth_principal_clear(&x->r.who);
    allot_free(x);
    *con_cls = NULL;
}

/* Reads a whole (small) file into a NUL-terminated string. */
static char *read_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (!f) {
        allot_fmt(err, errlen, "%s: cannot open", path);
        return NULL;
    }
    do {
        if (allot_grow((void **)&buf, &cap, len + 4097, 1) < 0 || len > (1u << 20)) {
            allot_fmt(err, errlen, "%s: too large or out of memory", path);
            allot_free(buf);
            fclose(f);
            return NULL;
        }
        n = fread(buf + len, 1, 4096, f);
        len += n;
    } while (n > 0);
    fclose(f);
    buf[len] = '\0';
    return buf;
}

int http_parse_listen(const char *listen, struct sockaddr_in *sa, char *err, size_t errlen)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    char host[64];
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    int64_t p;

    if (!colon || (size_t)(colon - listen) >= sizeof(host) ||
        !allot_parse_num(colon + 1, 0, 65535, &p)) {
        allot_fmt(err, errlen, "listen: expected IPv4-ADDRESS:PORT, got \"%s\"",
                  listen ? listen : "");
        return ALLOT_EINVAL;
    }
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        allot_fmt(err, errlen, "listen: \"%s\" is not an IPv4 address (in \"%s\")", host, listen);
        return ALLOT_EINVAL;
    }
    a.sin_port = htons((uint16_t)p);
    if (sa)
        *sa = a;
    return 0;
}

struct http *http_start(struct server *s, const char *listen, int workers, int max_conn, int *port,
                        char *err, size_t errlen)
{
    struct sockaddr_in sa;
    struct http *h;

    if (http_parse_listen(listen, &sa, err, errlen))
        return NULL;
    h = allot_calloc(1, sizeof(*h));
    if (!h) {
        allot_fmt(err, errlen, "out of memory");
        return NULL;
    }
    if (http_n_routes > MAX_ROUTES) {
        allot_fmt(err, errlen, "route table over %d entries", MAX_ROUTES);
        allot_free(h);
        return NULL;
    }
    h->srv = s;
    h->body_max = s->cfg.body_max;
    pthread_mutex_init(&h->mlock, NULL);
    pthread_mutex_init(&h->rlock, NULL);
    if ((s->cfg.rate_limit > 0 && !(h->rate = allot_calloc(RATE_SLOTS, sizeof(*h->rate)))) ||
        !(h->refused = allot_calloc(REFUSED_SLOTS, sizeof(*h->refused)))) {
        allot_fmt(err, errlen, "out of memory");
        pthread_mutex_destroy(&h->mlock);
        pthread_mutex_destroy(&h->rlock);
        allot_free(h->rate);
        allot_free(h);
        return NULL;
    }
    unsigned flags =
        MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    /* a thread per connection: a request that waits (its commit, a long
     * poll) holds up no other connection, as it does in a shared pool */
    if (workers == 0)
        flags |= MHD_USE_THREAD_PER_CONNECTION;
    if (s->cfg.tls_cert && *s->cfg.tls_cert) {
        if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) {
            allot_fmt(err, errlen, "this libmicrohttpd has no TLS support");
            goto fail;
        }
        h->tls_cert = read_file(s->cfg.tls_cert, err, errlen);
        h->tls_key = h->tls_cert ? read_file(s->cfg.tls_key, err, errlen) : NULL;
        if (!h->tls_key)
            goto fail;
        flags |= MHD_USE_TLS;
    }
    h->d =
        /* the port only names the address in libmicrohttpd's own messages */
        MHD_start_daemon(flags, ntohs(sa.sin_port), NULL, NULL, http_access, h,
                         /* first: libmicrohttpd says so of any other place */
                         MHD_OPTION_EXTERNAL_LOGGER, log_http_lib, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                         MHD_OPTION_UNESCAPE_CALLBACK, http_unescape, NULL,
                         /* a pool only for 2 workers or more (libmicrohttpd warns about a
                          * size of 0 or 1): else the connection limit, set once more */
                         workers > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_CONNECTION_LIMIT,
                         (unsigned)(workers > 1 ? workers : max_conn), MHD_OPTION_CONNECTION_LIMIT,
                         (unsigned)max_conn, MHD_OPTION_NOTIFY_COMPLETED, http_done, h,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                         MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->cfg.max_conn_per_ip,
                         h->tls_cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, h->tls_cert,
                         MHD_OPTION_HTTPS_MEM_KEY, h->tls_key, MHD_OPTION_END);
    if (!h->d) {
        int e = errno;
        allot_fmt(err, errlen, "cannot listen on %s%s%s%s", listen, e ? ": " : "",
                  e ? strerror(e) : "",
                  h->tls_cert ? " (or the TLS certificate and key do not load)" : "");
        goto fail;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : (int)ntohs(sa.sin_port);
    return h;
fail:
    pthread_mutex_destroy(&h->mlock);
    pthread_mutex_destroy(&h->rlock);
    allot_free(h->rate);
    allot_free(h->refused);
    allot_free(h->tls_cert);
    allot_free(h->tls_key);
    allot_free(h);
    return NULL;
}

void http_stop(struct http *h)
{
    if (!h)
        return;
    MHD_quiesce_daemon(h->d);
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mlock);
    pthread_mutex_destroy(&h->rlock);
    allot_free(h->rate);
    allot_free(h->refused);
    allot_free(h->tls_cert);
    allot_free(h->tls_key);
    allot_free(h);
}

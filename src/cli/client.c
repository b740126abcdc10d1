/*
 * The HTTP client of the command line, on libcurl: one easy handle per run
 * (so pages and repeated calls reuse the connection), the bearer token,
 * JSON bodies, retries, paging, and the mapping of the server's errors
 * `{"error":{"code","message"}}` to `allot: CODE: MESSAGE` and exit codes.
 *
 * Retries: a request whose connection could not be opened reached nobody
 * and is always tried again; so is one answered 429 or 503 (the server did
 * nothing). A request that may have reached the server (the connection
 * broke, the reply was lost or timed out) is tried again only when the
 * caller says it is safe: reads, PUT of a whole document, and a submission
 * that carries an Idempotency-Key, whose repeat returns the job the first
 * attempt made. At most 1 + conf.retries attempts, with backoff from 250 ms
 * doubling to at most 4 s; a 429 waits its Retry-After (at most 10 s).
 * https:// URLs are checked against the system's CAs or conf.cacert.
 *
 * Several allotd (docs/ha.md): conf.server may list URLs separated by
 * commas. A retry after a connection that could not be opened goes to the
 * next one; a standby's 503 names the leader, and the retry goes there.
 */
#include "cli.h"

#include "allot/common.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPLY_MAX (256u << 20) /* a reply larger than this is refused */
#define PAGE_MAX  1000         /* the API's largest page */

struct client {
    CURL *h;      /* owned */
    char **bases; /* owned: the server URLs, without a trailing slash */
    int n_bases;
    int cur;        /* bases[cur] is tried next */
    char hint[512]; /* the leader a standby named ("": none): tried next */
    char *auth;     /* owned: the Authorization header line */
    char *cacert;   /* owned: CA file for https, or NULL */
    long timeout;   /* ms */
    int retries;
    bool verbose;
    long long outage_ms;   /* > 0: wait this long for an allotd that does not answer */
    bool answered;         /* an allotd answered a call of this process (an outage is one) */
    long long outage_from; /* CLOCK_MONOTONIC ms of the outage's first failed call; -1: none */
    char next_header[256]; /* a header line for the next call only ("": none) */
    char errbuf[CURL_ERROR_SIZE];
};

struct buf {
    char *p;
    size_t len, cap;
    bool too_big;
};

static size_t on_data(char *data, size_t size, size_t n, void *ud)
{
    struct buf *b = ud;
    size_t len = size * n;

    if (b->len + len + 1 > REPLY_MAX) {
        b->too_big = true;
        return 0;
    }
    if (allot_grow((void **)&b->p, &b->cap, b->len + len + 1, 1) < 0)
        return 0;
    memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = '\0';
    return len;
}

struct client *cli_client(struct cli *c)
{
    struct client *cl;
    const char *s = c->conf.server;
    char tmp[4096];

    if (c->http)
        return c->http;
    /* the config file it read, or would have ($XDG_CONFIG_HOME too) */
    const char *conf = c->conf.config ? c->conf.config : "~/.config/allot/config";
    if (!s || !*s) {
        cli_usage_error("no server: give --server, set ALLOT_SERVER or put `server URL` in %s",
                        conf);
        return NULL;
    }
    if (!c->conf.token || !*c->conf.token) {
        cli_usage_error("no token: give --token, set ALLOT_TOKEN or put `token TOKEN` in %s", conf);
        return NULL;
    }
    for (const char *p = s; *p; p++) {
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            cli_usage_error("server \"%s\": a URL holds no spaces or control characters", s);
            return NULL;
        }
    }
    if (strpbrk(c->conf.token, "\r\n")) {
        cli_usage_error("the token holds a line break");
        return NULL;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        cli_error("internal", "cannot initialise libcurl");
        return NULL;
    }
    cl = allot_calloc(1, sizeof(*cl));
    if (!cl)
        goto oom;
    switch (allot_server_list(s, &cl->bases, &cl->n_bases)) {
    case 0:
        /* the routes are /v1/...: a URL that names them too finds none */
        for (int i = 0; i < cl->n_bases; i++) {
            const char *last = strrchr(cl->bases[i], '/'); /* its path's last segment */
            if (last && last[-1] != '/' && !strcmp(last + 1, "v1")) {
                cli_usage_error("server \"%s\": give allotd's URL without /v1 (the routes "
                                "begin with it)",
                                cl->bases[i]);
                client_free(cl);
                return NULL;
            }
        }
        break;
    case ALLOT_EINVAL:
        client_free(cl);
        cli_usage_error("server \"%s\": give http:// or https:// URLs, separated by commas", s);
        return NULL;
    default:
        goto oom;
    }
    allot_fmt(tmp, sizeof(tmp), "Authorization: Bearer %s", c->conf.token);
    cl->auth = allot_strdup(tmp);
    cl->h = curl_easy_init();
    if (c->conf.cacert && *c->conf.cacert && !(cl->cacert = allot_strdup(c->conf.cacert)))
        goto oom;
    if (!cl->n_bases || !cl->auth || !cl->h)
        goto oom;
    cl->timeout = (long)c->conf.timeout;
    cl->retries = (int)c->conf.retries;
    cl->outage_from = -1;
    cl->verbose = c->conf.verbose;
    c->http = cl;
    return cl;
oom:
    client_free(cl);
    cli_error("internal", "out of memory");
    return NULL;
}

void client_free(struct client *cl)
{
    if (!cl)
        return;
    if (cl->h)
        curl_easy_cleanup(cl->h);
    allot_server_list_free(cl->bases, cl->n_bases);
    allot_free(cl->auth);
    allot_free(cl->cacert);
    allot_free(cl);
    curl_global_cleanup();
}

char *client_escape(struct client *cl, const char *s)
{
    char *e = curl_easy_escape(cl->h, s, 0);
    char *copy = e ? allot_strdup(e) : NULL;

    curl_free(e);
    return copy;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Did the request possibly reach the server? Connect failures did not. */
static bool reached_nobody(CURLcode rc)
{
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST;
}

static bool transient(CURLcode rc)
{
    return rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING ||
           rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_PARTIAL_FILE;
}

static int exit_of_status(long st)
{
    switch (st) {
    case 401:
    case 403:
        return CLI_DENIED;
    case 404:
        return CLI_NOTFOUND;
    case 409:
        return CLI_CONFLICT;
    case 400:
    case 405:
    case 413:
    case 422:
        return CLI_INVALID;
    default:
        return CLI_SERVER;
    }
}

/* The server's error reply (status st, body b) into e. */
static void error_of(long st, const struct buf *b, struct client_error *e)
{
    json_t *v = b->p ? json_loadb(b->p, b->len, 0, NULL) : NULL;
    json_t *err = json_object_get(v, "error");
    const char *code = json_string_value(json_object_get(err, "code"));
    const char *msg = json_string_value(json_object_get(err, "message"));

    e->status = st;
    allot_strlcpy(e->code, code && msg ? code : "", sizeof(e->code));
    if (code && msg)
        allot_strlcpy(e->message, msg, sizeof(e->message));
    else if (!v && b->p && b->len && memchr(b->p, '<', b->len < 64 ? b->len : 64))
        /* an HTML page: not allotd (a wrong --server, a proxy's page) */
        allot_fmt(e->message, sizeof(e->message),
                  "the answer is an HTML page, not allotd's JSON: is --server (ALLOT_SERVER) "
                  "allotd's URL, with no path?");
    else
        allot_fmt(e->message, sizeof(e->message), "%.200s", b->p ? b->p : "(no body)");
    json_decref(v);
}

int client_error_print(const struct client_error *e)
{
    if (*e->code) {
        cli_error(e->code, "%s", e->message);
        return exit_of_status(e->status);
    }
    /* not allotd's own error: a server that is not allotd, or one between */
    cli_error("http", "HTTP %ld: %s", e->status, e->message);
    return CLI_SERVER;
}

/* Prints the server's error reply; returns its exit code. */
static int report_error(long st, const struct buf *b)
{
    struct client_error e;

    error_of(st, b, &e);
    return client_error_print(&e);
}

/* A connection that timed out before it was made reached nobody either (a
 * machine that is down answers nothing at all). */
static bool connect_timed_out(CURL *h, CURLcode rc)
{
    curl_off_t t = 0;

    return rc == CURLE_OPERATION_TIMEDOUT &&
           curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &t) == CURLE_OK && t == 0;
}

/* True when the reply b is a standby's (docs/ha.md) naming a leader the
 * client may follow from `from` (allot_leader_url): copied into out. */
static bool standby_leader(const struct buf *b, const char *from, char *out, size_t len)
{
    json_t *v = b->len ? json_loadb(b->p, b->len, 0, NULL) : NULL;
    const char *code = json_string_value(json_object_get(json_object_get(v, "error"), "code"));
    bool ok = code && !strcmp(code, "standby") &&
              allot_leader_url(from, json_string_value(json_object_get(v, "leader")), out, len);

    json_decref(v);
    return ok;
}

/* client_call, and with raw set: a 2xx body is handed over as it is; with
 * held set, an error reply is not printed but kept there (held->status 0:
 * none was, or it was no reply of the server's, printed as always). */
void client_wait_outages(struct client *cl, long long ms)
{
    cl->outage_ms = ms;
    cl->outage_from = -1;
}

/* Retries spent on a call that reached no allotd, or one that is busy or
 * starting (503): with client_wait_outages, whether to go on waiting (it
 * says so once an outage, and sleeps), else false. */
static bool outage_wait(struct client *cl, CURLcode crc, long st, const char *url)
{
    long long now = allot_mono_ms();

    /* never answered: a wrong --server, or no allotd, not an outage */
    if (cl->outage_ms <= 0 || !cl->answered || (crc == CURLE_OK && st != 503))
        return false;
    if (cl->outage_from < 0) {
        cl->outage_from = now;
        fprintf(stderr,
                "allot: allotd does not answer (%s); waiting up to %lld minutes for it to come "
                "back\n",
                crc != CURLE_OK ? (cl->errbuf[0] ? cl->errbuf : curl_easy_strerror(crc))
                                : "server busy or starting",
                cl->outage_ms / 60000);
    } else if (now - cl->outage_from >= cl->outage_ms) {
        fprintf(stderr, "allot: gave up waiting for allotd (%s) after %lld minutes\n", url,
                cl->outage_ms / 60000);
        return false;
    }
    sleep_ms(2000);
    return true;
}

static int call(struct client *cl, const char *method, const char *path, json_t *body,
                const char *idem_key, enum client_retry retry, json_t **reply, long *status,
                struct buf *raw, struct client_error *held)
{
    struct curl_slist *hdr = NULL, *h2;
    struct buf b = {0};
    char *text = NULL, url[8192], line[256];
    long st = 0;
    int rc = CLI_SERVER;
    CURLcode crc = CURLE_OK;

    if (reply)
        *reply = NULL;
    if (held)
        *held = (struct client_error){0};
    if (strlen(path) > sizeof(url) - 2600) {
        cli_error("usage", "request URL too long");
        return CLI_USAGE;
    }
    if (body && !(text = json_dumps(body, JSON_COMPACT))) {
        cli_error("internal", "out of memory");
        return CLI_SERVER;
    }
    hdr = curl_slist_append(hdr, cl->auth);
    if (hdr && (h2 = curl_slist_append(hdr, "Accept: application/json")))
        hdr = h2;
    if (hdr && text && (h2 = curl_slist_append(hdr, "Content-Type: application/json")))
        hdr = h2;
    if (hdr && idem_key) {
        allot_fmt(line, sizeof(line), "Idempotency-Key: %s", idem_key);
        if ((h2 = curl_slist_append(hdr, line)))
            hdr = h2;
    }
    if (hdr && cl->next_header[0] && (h2 = curl_slist_append(hdr, cl->next_header)))
        hdr = h2;
    cl->next_header[0] = '\0';
    /* Expect: 100-continue would cost a round trip per submission */
    if (hdr && text && (h2 = curl_slist_append(hdr, "Expect:")))
        hdr = h2;
    if (!hdr) {
        free(text);
        cli_error("internal", "out of memory");
        return CLI_SERVER;
    }
    for (int attempt = 0, hops = 0; attempt <= cl->retries;) {
        CURL *h = cl->h;

        allot_fmt(url, sizeof(url), "%s%s", cl->hint[0] ? cl->hint : cl->bases[cl->cur], path);
        curl_easy_reset(h);
        cl->errbuf[0] = '\0';
        b.len = 0;
        b.too_big = false;
        if (b.p)
            b.p[0] = '\0';
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, cl->timeout);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, cl->timeout < 10000 ? cl->timeout : 10000);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cl->errbuf);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        if (cl->cacert)
            curl_easy_setopt(h, CURLOPT_CAINFO, cl->cacert);
        curl_easy_setopt(h, CURLOPT_USERAGENT, "allot/0.1");
        if (text) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
        } else if (!strcmp(method, "GET")) {
            curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        }
        if (cl->verbose)
            fprintf(stderr, "> %s %s%s%s\n", method, url, idem_key ? " key=" : "",
                    idem_key ? idem_key : "");
        crc = curl_easy_perform(h);
        st = 0;
        if (crc == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        if (cl->verbose && crc == CURLE_OK)
            fprintf(stderr, "< HTTP %ld\n", st);
        else if (cl->verbose)
            fprintf(stderr, "< %s\n", curl_easy_strerror(crc));
        bool nobody = reached_nobody(crc) || connect_timed_out(h, crc);
        bool again = crc == CURLE_OK  ? (st == 429 || st == 503)
                     : nobody         ? true
                     : transient(crc) ? retry == CLIENT_RETRY_ALWAYS
                                      : false;
        if (!again)
            break;
        /* another allotd, at once and without using a retry (at most once
         * per URL and once more): the leader a standby named, else the
         * next URL when this one could not be reached or is a standby,
         * or ... */
        if (hops <= cl->n_bases) {
            const char *from = cl->hint[0] ? cl->hint : cl->bases[cl->cur];
            bool moved = false;

            if (crc == CURLE_OK && st == 503 &&
                standby_leader(&b, from, cl->hint, sizeof(cl->hint))) {
                moved = true;
                if (cl->verbose)
                    fprintf(stderr, "allot: a standby; the leader is %s\n", cl->hint);
            } else if (cl->n_bases > 1 && (nobody || (crc == CURLE_OK && st == 503) ||
                                           (transient(crc) && retry == CLIENT_RETRY_ALWAYS))) {
                /* ... or after no answer from one that took the connection
                 * (frozen, or cut off from the store: it may have lost the
                 * lead), when the request may be sent again */
                if (cl->hint[0])
                    cl->hint[0] = '\0';
                else
                    cl->cur = (cl->cur + 1) % cl->n_bases;
                moved = true;
            }
            if (moved) {
                hops++;
                continue;
            }
        }
        if (attempt == cl->retries) {
            if (!outage_wait(cl, crc, st, url))
                break;
            hops = 0; /* every URL again */
            continue;
        }
        attempt++;
        hops = 0;
        long wait = 250L << (attempt - 1 < 4 ? attempt - 1 : 4);
        curl_off_t after = 0;
        if (wait > 4000)
            wait = 4000;
        /* a rate-limited token is told when to come back (at most 10 s) */
        if (st == 429 && curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &after) == CURLE_OK &&
            after > 0)
            wait = after >= 10 ? 10000 : (long)after * 1000;
        if (cl->verbose || crc != CURLE_OK)
            fprintf(stderr, "allot: %s; retrying in %ld ms (%d of %d)\n",
                    crc == CURLE_OK ? (st == 429 ? "rate limited" : "server busy or starting")
                    : cl->errbuf[0] ? cl->errbuf
                                    : curl_easy_strerror(crc),
                    wait, attempt, cl->retries);
        sleep_ms(wait);
    }
    if (status)
        *status = st;
    cl->answered |= crc == CURLE_OK && st != 503;
    if (cl->outage_from >= 0 && crc == CURLE_OK && st != 503) {
        fprintf(stderr, "allot: allotd answers again\n");
        cl->outage_from = -1;
    }
    if (crc == CURLE_URL_MALFORMAT || crc == CURLE_UNSUPPORTED_PROTOCOL) {
        cli_usage_error("server %s: %s", url, cl->errbuf[0] ? cl->errbuf : curl_easy_strerror(crc));
        rc = CLI_USAGE;
    } else if (crc != CURLE_OK) {
        if (b.too_big)
            cli_error("bad_reply", "the reply of %s is larger than %u MiB", url, REPLY_MAX >> 20);
        else
            cli_error("connection", "%s %s: %s%s", method, url,
                      cl->errbuf[0] ? cl->errbuf : curl_easy_strerror(crc),
                      crc == CURLE_PEER_FAILED_VERIFICATION
                          ? " (a private CA or self-signed certificate: give --cacert FILE)"
                          : "");
        rc = CLI_SERVER;
    } else if (st < 200 || st > 299) {
        if (held) {
            error_of(st, &b, held);
            rc = exit_of_status(st);
        } else {
            rc = report_error(st, &b);
        }
    } else if (raw) {
        *raw = b;
        b = (struct buf){0};
        rc = CLI_OK;
    } else if (b.len == 0) {
        rc = CLI_OK;
    } else {
        json_error_t je;
        json_t *v = json_loadb(b.p, b.len, 0, &je);

        if (!v) {
            cli_error("bad_reply", "%s %s: the reply is not JSON: %s", method, url, je.text);
            rc = CLI_SERVER;
        } else {
            rc = CLI_OK;
            if (reply)
                *reply = v;
            else
                json_decref(v);
        }
    }
    curl_slist_free_all(hdr);
    allot_free(b.p);
    free(text);
    return rc;
}

int client_call(struct client *cl, const char *method, const char *path, json_t *body,
                const char *idem_key, enum client_retry retry, json_t **reply, long *status)
{
    return call(cl, method, path, body, idem_key, retry, reply, status, NULL, NULL);
}

int client_try_call(struct client *cl, const char *method, const char *path, json_t *body,
                    enum client_retry retry, json_t **reply, struct client_error *err)
{
    return call(cl, method, path, body, NULL, retry, reply, NULL, NULL, err);
}

void client_next_header(struct client *cl, const char *line)
{
    allot_strlcpy(cl->next_header, line, sizeof(cl->next_header));
}

int client_get_bytes(struct client *cl, const char *path, char **out, size_t *len)
{
    struct buf b = {0};
    int rc = call(cl, "GET", path, NULL, NULL, CLIENT_RETRY_ALWAYS, NULL, NULL, &b, NULL);

    *out = b.p;
    *len = b.len;
    return rc;
}

int client_try_get_bytes(struct client *cl, const char *path, char **out, size_t *len,
                         struct client_error *err)
{
    struct buf b = {0};
    int rc = call(cl, "GET", path, NULL, NULL, CLIENT_RETRY_ALWAYS, NULL, NULL, &b, err);

    *out = b.p;
    *len = b.len;
    return rc;
}

bool client_reply_header(struct client *cl, const char *name, char *buf, size_t len)
{
    struct curl_header *h = NULL;

    /* the last response of the last request (-1): a redirect's are not it */
    if (curl_easy_header(cl->h, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK || !h) {
        allot_strlcpy(buf, "", len);
        return false;
    }
    allot_strlcpy(buf, h->value, len);
    return true;
}

int client_list(struct client *cl, const char *path, const char *items_key,
                const char *cursor_param, const char *next_key, long long cursor, size_t max,
                json_t **out)
{
    json_t *all = json_array();
    char url[4096];
    const char *knob = getenv("ALLOT_CLI_PAGE");
    size_t page = PAGE_MAX;
    int rc = CLI_OK, dir = 0;

    *out = NULL;
    if (!all)
        return CLI_SERVER;
    /* testing only: smaller pages, so tests cross page boundaries cheaply */
    if (knob && strtol(knob, NULL, 10) >= 1 && strtol(knob, NULL, 10) <= PAGE_MAX)
        page = (size_t)strtol(knob, NULL, 10);
    /* each page moves the cursor strictly one way, so this ends */
    for (;;) {
        json_t *r = NULL, *items, *x;
        size_t want = page, i;

        if (max && max - json_array_size(all) < want)
            want = max - json_array_size(all);
        allot_fmt(url, sizeof(url), "%s%climit=%zu", path, strchr(path, '?') ? '&' : '?', want);
        if (cursor) {
            size_t n = strlen(url);
            allot_fmt(url + n, sizeof(url) - n, "&%s=%lld", cursor_param, cursor);
        }
        rc = client_call(cl, "GET", url, NULL, NULL, CLIENT_RETRY_ALWAYS, &r, NULL);
        if (rc != CLI_OK)
            break;
        items = json_object_get(r, items_key);
        if (!json_is_array(items)) {
            cli_error("bad_reply", "GET %s: no \"%s\" array in the reply", url, items_key);
            json_decref(r);
            rc = CLI_SERVER;
            break;
        }
        json_array_foreach(items, i, x)
        {
            json_array_append(all, x);
        }
        long long next;
        if (next_key) {
            next = json_integer_value(json_object_get(r, next_key));
        } else {
            json_t *last = json_array_get(items, json_array_size(items) - 1);
            next = json_array_size(items) == want ? json_integer_value(json_object_get(last, "seq"))
                                                  : 0;
        }
        json_decref(r);
        /* a cursor moves one way, up or (newest first) down towards 0: one
         * that stands or turns back would list pages again (not allotd) */
        if (next > 0 && cursor && (next == cursor || (dir && (next > cursor ? 1 : -1) != dir))) {
            cli_error("server", "%s: the page cursor did not move on (%lld after %lld)", path, next,
                      cursor);
            rc = CLI_SERVER;
            break;
        }
        if (next <= 0 || (max && json_array_size(all) >= max))
            break;
        if (cursor)
            dir = next > cursor ? 1 : -1;
        cursor = next;
    }
    if (rc != CLI_OK) {
        json_decref(all);
        return rc;
    }
    *out = all;
    return CLI_OK;
}

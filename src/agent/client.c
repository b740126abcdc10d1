/*
 * The agent's client of allotd: JSON over one keep-alive libcurl handle,
 * with the agent token as bearer. No retries here: the main loop retries
 * on its own schedule, and every agent request is safe to repeat.
 *
 * Several allotd (docs/ha.md): --server may list URLs separated by commas.
 * A request whose connection cannot be opened, or that a standby answers
 * (503 "standby", naming the leader), goes at once to the leader it named,
 * else to the next URL; at most once to each.
 */
#include "agent.h"

#include "allot/common.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

struct agent_client {
    CURL *h;
    char **bases; /* the server URLs without a trailing slash */
    int n_bases;
    int cur;        /* bases[cur] is used */
    char hint[512]; /* the leader a standby named ("": none): used first */
    struct curl_slist *headers;
    char *buf;
    size_t len, cap;
};

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    struct agent_client *c = ud;
    size_t add = size * n;

    if (c->len + add > (64u << 20))
        return 0; /* an answer over 64 MiB is not allotd's */
    if (allot_grow((void **)&c->buf, &c->cap, c->len + add + 1, 1) < 0)
        return 0;
    memcpy(c->buf + c->len, p, add);
    c->len += add;
    c->buf[c->len] = '\0';
    return add;
}

/* The request headers with token as bearer, or NULL. */
static struct curl_slist *headers_for(const char *token)
{
    struct curl_slist *h, *more;
    char auth[600];

    allot_fmt(auth, sizeof(auth), "Authorization: Bearer %s", token);
    if (!(h = curl_slist_append(NULL, auth)))
        return NULL;
    if (!(more = curl_slist_append(h, "Content-Type: application/json"))) {
        curl_slist_free_all(h);
        return NULL;
    }
    return more;
}

int client_set_token(struct agent_client *c, const char *token)
{
    struct curl_slist *h = headers_for(token);

    if (!h)
        return ALLOT_ENOMEM;
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, h);
    curl_slist_free_all(c->headers);
    c->headers = h;
    return 0;
}

/* True when the reply is a standby's naming a leader the agent may follow
 * from `from` (allot_leader_url): copied into out. */
static bool standby_leader(json_t *reply, const char *from, char *out, size_t len)
{
    const char *code = json_string_value(json_object_get(json_object_get(reply, "error"), "code"));

    return code && !strcmp(code, "standby") &&
           allot_leader_url(from, json_string_value(json_object_get(reply, "leader")), out, len);
}

struct agent_client *client_new(const char *server, const char *token, const char *cacert)
{
    struct agent_client *c = allot_calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->h = curl_easy_init();
    c->headers = headers_for(token);
    if (!c->h || !c->headers) {
        client_free(c);
        return NULL;
    }
    if (allot_server_list(server, &c->bases, &c->n_bases) != 0) {
        client_free(c);
        return NULL;
    }
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->h, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
    curl_easy_setopt(c->h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (cacert && *cacert)
        curl_easy_setopt(c->h, CURLOPT_CAINFO, cacert);
    return c;
}

int client_servers(const struct agent_client *c)
{
    return c->n_bases;
}

void client_free(struct agent_client *c)
{
    if (!c)
        return;
    if (c->h)
        curl_easy_cleanup(c->h);
    curl_slist_free_all(c->headers);
    allot_server_list_free(c->bases, c->n_bases);
    allot_free(c->buf);
    allot_free(c);
}

long client_post(struct agent_client *c, const char *path, json_t *body, int64_t timeout_ms,
                 json_t **reply, char *err, size_t errlen)
{
    char url[4400];
    char *text = json_dumps(body, JSON_COMPACT);
    long status = -1;
    CURLcode rc = CURLE_OK;

    *reply = NULL;
    if (!text) {
        allot_fmt(err, errlen, "out of memory");
        return -1;
    }
    /* every attempt within timeout_ms: the caller's time (a heartbeat's
     * is what is left before the agent fences) is not the time of each */
    int64_t deadline = allot_mono_ms() + timeout_ms;
    for (int attempt = 0; attempt <= c->n_bases; attempt++) {
        int64_t left = deadline - allot_mono_ms();

        if (attempt > 0 && left <= 0)
            break;
        if (attempt < c->n_bases - 1 && left > timeout_ms / c->n_bases)
            left = timeout_ms / c->n_bases; /* the next URLs' share stays */
        allot_fmt(url, sizeof(url), "%s%s", c->hint[0] ? c->hint : c->bases[c->cur], path);
        json_decref(*reply);
        *reply = NULL;
        status = -1;
        c->len = 0;
        curl_easy_setopt(c->h, CURLOPT_URL, url);
        curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, (long)(left > 1 ? left : 1));
        rc = curl_easy_perform(c->h);
        if (rc == CURLE_OK) {
            curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
            if (c->len)
                *reply = json_loadb(c->buf, c->len, 0, NULL);
        }
        /* another allotd leads: the one a standby named, else the next URL;
         * with several, also after any failure to get an answer (one that
         * takes connections and answers nothing, frozen or cut off from the
         * store, may have lost the lead), the standby it named included */
        bool nobody = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
                      (rc != CURLE_OK && c->n_bases > 1);

        if (status == 503 && standby_leader(*reply, c->hint[0] ? c->hint : c->bases[c->cur],
                                            c->hint, sizeof(c->hint)))
            continue;
        if (nobody || (status == 503 && c->n_bases > 1)) {
            if (c->hint[0])
                c->hint[0] = '\0';
            else
                c->cur = (c->cur + 1) % c->n_bases;
            continue;
        }
        break;
    }
    free(text);
    if (rc != CURLE_OK) {
        allot_fmt(err, errlen, "%s: %s", url, curl_easy_strerror(rc));
        return -1;
    }
    if (status < 200 || status > 299) {
        json_t *e = json_object_get(*reply, "error");
        allot_fmt(err, errlen, "%s answered %ld: %s", url, status,
                  json_string_value(json_object_get(e, "message"))
                      ? json_string_value(json_object_get(e, "message"))
                      : "(no message)");
    }
    return status;
}

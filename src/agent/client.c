/*
 * The agent's client of allotd: JSON over one keep-alive libcurl handle,
 * with the agent token as bearer. No retries here: the main loop retries
 * on its own schedule, and every agent request is safe to repeat.
 */
#include "agent.h"

#include "allot/common.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

struct agent_client {
    CURL *h;
    char *base;
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

struct agent_client *client_new(const char *server, const char *token, const char *cacert)
{
    struct agent_client *c = allot_calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->h = curl_easy_init();
    c->base = allot_strdup(server);
    c->headers = headers_for(token);
    if (!c->h || !c->base || !c->headers) {
        client_free(c);
        return NULL;
    }
    /* a trailing slash would double the one every path starts with */
    size_t bl = strlen(c->base);
    while (bl && c->base[bl - 1] == '/')
        c->base[--bl] = '\0';
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

void client_free(struct agent_client *c)
{
    if (!c)
        return;
    if (c->h)
        curl_easy_cleanup(c->h);
    curl_slist_free_all(c->headers);
    allot_free(c->base);
    allot_free(c->buf);
    allot_free(c);
}

long client_post(struct agent_client *c, const char *path, json_t *body, int64_t timeout_ms,
                 json_t **reply, char *err, size_t errlen)
{
    char url[4400];
    char *text = json_dumps(body, JSON_COMPACT);
    long status = -1;
    CURLcode rc;

    *reply = NULL;
    if (!text) {
        allot_fmt(err, errlen, "out of memory");
        return -1;
    }
    allot_fmt(url, sizeof(url), "%s%s", c->base, path);
    c->len = 0;
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, text);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    rc = curl_easy_perform(c->h);
    free(text);
    if (rc != CURLE_OK) {
        allot_fmt(err, errlen, "%s: %s", url, curl_easy_strerror(rc));
        return -1;
    }
    curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
    if (c->len)
        *reply = json_loadb(c->buf, c->len, 0, NULL);
    if (status < 200 || status > 299) {
        json_t *e = json_object_get(*reply, "error");
        allot_fmt(err, errlen, "%s answered %ld: %s", url, status,
                  json_string_value(json_object_get(e, "message"))
                      ? json_string_value(json_object_get(e, "message"))
                      : "(no message)");
    }
    return status;
}

/*
 * GET /v1/jobs/{id}/logs?task=N&offset=O&limit=L: a task's output, read
 * from the agent of the node the task runs (or ran) on, as the API server
 * reads a pod's from its kubelet. The agent tells allotd where its log
 * endpoint is, and the key to use, with every heartbeat (server->agents,
 * memory only). The answer is the bytes from offset on (at most limit,
 * 1 MiB by default), with the log's whole size in X-Allot-Log-Size, so a
 * follower asks again from offset + bytes received, and the node in
 * X-Allot-Log-Node. X-Allot-Log-Complete is the agent's word on whether
 * the log is complete ("yes": nothing of the task writes to it any more,
 * "no"), passed on as it came (absent from an agent that does not say):
 * allotd marks a cancelled job ended before its agent stopped its task,
 * which writes on through its grace, so a follower stops only once the
 * job ended and the log is complete.
 *
 * A job that is placed (or ended placed) is read where its placement says.
 * One without a placement, pending again after a preemption or a lost
 * node (or cancelled while it waited), is read where its last run was, from
 * the store's runs: X-Allot-Log-Run says "previous" then, "current" else.
 */
#include "http.h"
#include "reqparse.h"

#include "allot/common.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct fetch {
    char *buf;
    size_t len, cap;
    char size[32];    /* X-Allot-Log-Size */
    char complete[8]; /* X-Allot-Log-Complete ("": the agent did not say) */
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct fetch *f = ud;
    size_t add = size * n;

    if (f->len + add > (2u << 20) || allot_grow((void **)&f->buf, &f->cap, f->len + add + 1, 1) < 0)
        return 0;
    memcpy(f->buf + f->len, p, add);
    f->len += add;
    return add;
}

/* The value of header line p (len bytes) into out when it is header
 * `name` (with its colon), trimmed. */
static void header_value(const char *p, size_t len, const char *name, char *out, size_t olen)
{
    size_t nl = strlen(name);

    if (len <= nl || strncasecmp(p, name, nl) != 0)
        return;
    size_t vl = len - nl;
    const char *v = p + nl;
    while (vl && (*v == ' ' || *v == '\t'))
        v++, vl--;
    while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
        vl--;
    allot_fmt(out, olen, "%.*s", (int)vl, v);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    struct fetch *f = ud;
    size_t len = size * n;

    header_value(p, len, "X-Allot-Log-Size:", f->size, sizeof(f->size));
    header_value(p, len, "X-Allot-Log-Complete:", f->complete, sizeof(f->complete));
    return len;
}

void task_node(const char *placement, int64_t task, char *node, size_t len)
{
    json_t *pl = placement ? json_loads(placement, 0, NULL) : NULL;
    json_t *t = json_array_get(json_object_get(pl, "tasks"), (size_t)task);

    allot_strlcpy(node,
                  json_string_value(json_object_get(t, "node"))
                      ? json_string_value(json_object_get(t, "node"))
                      : "",
                  len);
    json_decref(pl);
}

int api_jobs_logs(struct req *r)
{
    struct allot_store_job j = {0};
    int64_t id, task = 0, offset = 0, limit = 1 << 20;
    char node[128], url[4400], auth[128] = "";
    struct fetch f = {0};
    long status = 0;
    bool previous = false; /* not placed now: its last run's log */
    int rc;

    if ((api_query(r, "task") && !allot_parse_num(api_query(r, "task"), 0, 1023, &task)) ||
        (api_query(r, "offset") &&
         !allot_parse_num(api_query(r, "offset"), 0, INT64_MAX, &offset)) ||
        (api_query(r, "limit") && !allot_parse_num(api_query(r, "limit"), 1, 1 << 20, &limit)))
        return api_error(r, 400, "bad_query", "task 0..1023, offset >= 0, limit 1..1048576");
    if (!allot_parse_num(r->params[0], 1, INT64_MAX, &id))
        return api_error(r, 404, "not_found", "no job %s", r->params[0]);
    struct allot_store *st = api_reader(r);
    if (!st)
        return 0;
    rc = allot_store_job_get(st, id, &j);
    if (rc == ALLOT_ENOENT || (rc == 0 && !auth_sees_tenant(&r->who, j.tenant))) {
        allot_store_job_clear(&j);
        return api_error(r, 404, "not_found", "no job %lld", (long long)id);
    }
    if (rc < 0)
        return api_error(r, 500, "store", "%s", allot_strerror(rc));
    json_t *spec = j.spec ? json_loads(j.spec, 0, NULL) : NULL;
    json_int_t n_tasks = json_is_integer(json_object_get(spec, "tasks"))
                             ? json_integer_value(json_object_get(spec, "tasks"))
                             : 1;
    json_decref(spec);
    if (task >= n_tasks) {
        allot_store_job_clear(&j);
        return api_error(r, 404, "not_found", "job %lld has %lld task%s (0..%lld), no task %lld",
                         (long long)id, (long long)n_tasks, n_tasks == 1 ? "" : "s",
                         (long long)n_tasks - 1, (long long)task);
    }
    task_node(j.placement, task, node, sizeof(node));
    bool ended = allot_store_job_state_terminal(j.state);
    allot_store_job_clear(&j);
    if (!*node) {
        struct allot_store_run last;

        rc = allot_store_run_last(st, id, &last);
        if (rc < 0 && rc != ALLOT_ENOENT)
            return api_error(r, 500, "store", "%s", allot_strerror(rc));
        if (rc == 0)
            task_node(last.placement, task, node, sizeof(node));
        allot_store_run_clear(&last);
        previous = *node != '\0';
    }
    if (!*node)
        return api_error(
            r, 409, "not_started", "job %lld task %lld %s", (long long)id, (long long)task,
            ended ? "ended before it was placed: it has no log" : "has not been placed (yet)");
    pthread_mutex_lock(&r->srv->agents_lock);
    json_t *a = json_object_get(r->srv->agents, node);
    const char *base = json_string_value(json_object_get(a, "url"));
    const char *key = json_string_value(json_object_get(a, "key"));
    if (base && key) {
        allot_fmt(url, sizeof(url), "%s/logs/%lld/%lld?offset=%lld&limit=%lld", base, (long long)id,
                  (long long)task, (long long)offset, (long long)limit);
        allot_fmt(auth, sizeof(auth), "Authorization: Bearer %s", key);
    }
    pthread_mutex_unlock(&r->srv->agents_lock);
    if (!*auth)
        return api_error(r, 502, "no_agent", "the agent of node %s has not told where its logs are",
                         node);
    /* no store read from here: a slow or silent agent holds no read handle */
    srv_reader_release(r->srv);
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = h ? curl_slist_append(NULL, auth) : NULL;
    CURLcode cr = CURLE_FAILED_INIT;
    if (h && hdrs) {
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &f);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &f);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        cr = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    }
    curl_slist_free_all(hdrs);
    if (h)
        curl_easy_cleanup(h);
    if (cr != CURLE_OK)
        api_error(r, 502, "agent_unreachable", "node %s: %s", node, curl_easy_strerror(cr));
    else if (status == 404)
        api_error(r, 404, "no_log", "node %s has no log for job %lld task %lld%s", node,
                  (long long)id, (long long)task,
                  previous || ended ? (ended ? ": it ended before its task wrote one, or the log "
                                               "is gone with the node's state folder"
                                             : " from its previous run")
                                    : " (yet)");
    else if (status != 200)
        api_error(r, 502, "agent_error", "node %s answered %ld", node, status);
    else if (!*f.size) /* what an agent's log endpoint says of every log it serves */
        api_error(r, 502, "agent_error",
                  "node %s answered without a log size: not an allot-agent log endpoint", node);
    else {
        api_bytes(r, 200, "text/plain; charset=utf-8", f.buf ? f.buf : "", f.len);
        api_set_header(r, "X-Allot-Log-Size", *f.size ? f.size : "0");
        api_set_header(r, "X-Allot-Log-Node", node);
        api_set_header(r, "X-Allot-Log-Run", previous ? "previous" : "current");
        if (!strcmp(f.complete, "yes") || !strcmp(f.complete, "no"))
            api_set_header(r, "X-Allot-Log-Complete", f.complete);
    }
    allot_free(f.buf);
    return 0;
}

/*
 * The agent's own small HTTP endpoint: task logs for allotd, which proxies
 * them to `allot logs` (GET /v1/jobs/{id}/logs), as the API server proxies
 * to the kubelet. One route, GET /logs/JOB/TASK?offset=N&limit=M, answers
 * the bytes of STATE/logs/JOB/task-TASK.log from offset (at most limit,
 * 1 MiB by default) with the file's size in X-Allot-Log-Size, and in
 * X-Allot-Log-Complete whether the log is complete: "yes" when no process
 * of the task writes to it any more, "no" while one may (log_complete).
 * The caller must present the key the agent made at start and sends
 * allotd with every heartbeat (a bearer token allotd keeps in memory
 * only); it is compared in constant time. offset and limit are digits only (allot_parse_num): any
 * other value is answered 400 naming the argument.
 *
 * Threading: libmicrohttpd's internal thread; it only reads log files and
 * looks at task folders (STATE/tasks/JOB-TASK), which the loop's thread
 * and the supervisors write.
 */
#include "agent.h"

#include "allot/common.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_CHUNK_MAX (1 << 20)

struct serve {
    struct MHD_Daemon *d;
    char logs_dir[4096];
    char tasks_dir[4096];
    char key[80];
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *text,
                             int64_t size)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    char num[32];
    enum MHD_Result rc;

    if (!r)
        return MHD_NO;
    if (size >= 0) {
        allot_fmt(num, sizeof(num), "%lld", (long long)size);
        MHD_add_response_header(r, "X-Allot-Log-Size", num);
    }
    rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* Whether Authorization header value `auth` (may be NULL) is "Bearer KEY"
 * with the agent's key. The key is compared in constant time, so that the
 * time of a refusal does not tell how much of it was right; its length is
 * no secret (always 48 hex digits). */
static bool key_matches(const struct serve *s, const char *auth)
{
    size_t len = strlen(s->key);

    if (!auth || strncmp(auth, "Bearer ", 7) != 0 || strlen(auth + 7) != len)
        return false;
    return sodium_memcmp(auth + 7, s->key, len) == 0;
}

/* Whether the log of task `task` of job `job` is complete: nothing of the
 * task writes to it any more. The task's supervisor writes the exit file of
 * its folder once the task's processes ended and their last output is in
 * the log (supervise.c), and the folder goes once the agent forgot the
 * ended task (task_forget), or never was (no run of the task here, or
 * one that has not begun: a log it writes then is a later run's). A folder
 * without the exit file is a task starting, running or stopping (or one
 * that did not start, until the agent forgets it): not complete. Called
 * before the log is read, so that "complete" covers every byte read. */
static bool log_complete(const struct serve *s, long long job, int task)
{
    char path[4400];
    struct stat st;

    allot_fmt(path, sizeof(path), "%s/%lld-%d/exit", s->tasks_dir, job, task);
    if (stat(path, &st) == 0)
        return true;
    /* no exit file: complete only when the folder is not there (a folder
     * forgotten between the two looks had its exit file) */
    allot_fmt(path, sizeof(path), "%s/%lld-%d", s->tasks_dir, job, task);
    return stat(path, &st) < 0 && errno == ENOENT;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_len, void **state)
{
    struct serve *s = cls;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *off = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
    const char *lim = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
    char path[4400];
    long long job;
    int64_t offset = 0, limit = LOG_CHUNK_MAX;
    int task, n = 0, fd;
    struct stat st;

    (void)version;
    (void)upload;
    if (!*state) {
        *state = (void *)1; /* headers only: the body (none) comes next */
        return MHD_YES;
    }
    *upload_len = 0;
    if (!key_matches(s, auth))
        return reply(c, 401, "bad key\n", -1);
    if (strcmp(method, "GET") != 0)
        return reply(c, 405, "GET only\n", -1);
    if (sscanf(url, "/logs/%lld/%d%n", &job, &task, &n) != 2 || url[n] || job < 1 || task < 0)
        return reply(c, 404, "no such route\n", -1);
    if (off && !allot_parse_num(off, 0, INT64_MAX, &offset))
        return reply(c, 400, "bad offset: a number >= 0\n", -1);
    if (lim && !allot_parse_num(lim, 1, LOG_CHUNK_MAX, &limit))
        return reply(c, 400, "bad limit: a number in 1..1048576\n", -1);
    bool complete = log_complete(s, job, task);
    allot_fmt(path, sizeof(path), "%s/%lld/task-%d.log", s->logs_dir, job, task);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        return reply(c, 404, "no log for this task on this node (yet)\n", -1);
    }
    char *buf = allot_malloc((size_t)limit);
    ssize_t got = buf ? pread(fd, buf, (size_t)limit, offset) : -1;
    close(fd);
    if (got < 0) {
        allot_free(buf);
        return reply(c, 500, "cannot read the log\n", -1);
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer((size_t)got, buf, MHD_RESPMEM_MUST_COPY);
    allot_free(buf);
    if (!r)
        return MHD_NO;
    char num[32];
    allot_fmt(num, sizeof(num), "%lld", (long long)st.st_size);
    MHD_add_response_header(r, "X-Allot-Log-Size", num);
    MHD_add_response_header(r, "X-Allot-Log-Complete", complete ? "yes" : "no");
    MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    enum MHD_Result rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return rc;
}

/* agent.h */
int serve_parse_listen(const char *listen, struct sockaddr_in *sa, char *err, size_t errlen)
{
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    char host[64];
    int64_t port;

    *sa = (struct sockaddr_in){.sin_family = AF_INET};
    if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof(host) ||
        !allot_parse_num(colon + 1, 0, 65535, &port)) {
        allot_fmt(err, errlen, "listen: \"%s\" is not IPV4:PORT (port 0..65535)",
                  listen ? listen : "");
        return ALLOT_EINVAL;
    }
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        allot_fmt(err, errlen, "listen: \"%s\": %s is not an IPv4 address", listen, host);
        return ALLOT_EINVAL;
    }
    sa->sin_port = htons((uint16_t)port);
    return 0;
}

/* Starts the endpoint on `listen` ("ADDR:PORT", port 0: any); writes the
 * URL allotd should use into url. Returns the handle or NULL. */
struct serve *serve_start(const char *listen, const char *logs_dir, char *url, size_t urllen,
                          char *key, size_t keylen)
{
    struct serve *s = allot_calloc(1, sizeof(*s));
    struct sockaddr_in sa;
    char err[160];
    unsigned char rnd[24];
    FILE *f;

    if (sodium_init() < 0) { /* sodium_memcmp needs it once; later calls are no-ops */
        allot_free(s);
        return NULL;
    }
    if (!s || serve_parse_listen(listen, &sa, err, sizeof(err)) < 0) {
        allot_free(s);
        return NULL;
    }
    f = fopen("/dev/urandom", "rb");
    if (!f || fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd)) {
        if (f)
            fclose(f);
        allot_free(s);
        return NULL;
    }
    fclose(f);
    for (size_t i = 0; i < sizeof(rnd); i++)
        allot_fmt(s->key + 2 * i, sizeof(s->key) - 2 * i, "%02x", rnd[i]);
    allot_strlcpy(s->logs_dir, logs_dir, sizeof(s->logs_dir));
    /* the task folders lie beside the logs, in the state folder (main.c:
     * STATE/logs and STATE/tasks) */
    const char *slash = strrchr(logs_dir, '/');
    allot_fmt(s->tasks_dir, sizeof(s->tasks_dir), "%.*s/tasks", slash ? (int)(slash - logs_dir) : 1,
              slash ? logs_dir : ".");
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                            on_request, s, MHD_OPTION_EXTERNAL_LOGGER, log_http_lib, NULL,
                            MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                            MHD_OPTION_END);
    if (!s->d) {
        allot_free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    char host[INET_ADDRSTRLEN] = "127.0.0.1";
    if (sa.sin_addr.s_addr != htonl(INADDR_ANY)) /* 0.0.0.0: this machine's loopback */
        inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
    allot_fmt(url, urllen, "http://%s:%u", host,
              info ? (unsigned)info->port : (unsigned)ntohs(sa.sin_port));
    allot_strlcpy(key, s->key, keylen);
    return s;
}

void serve_stop(struct serve *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->d);
    allot_free(s);
}

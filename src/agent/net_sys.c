/*
 * What the tenant networks need from the system (net_int.h): running
 * iproute2, nftables and tc as child processes (the agent keeps no
 * netlink code of its own: these programs are the tools an admin debugs
 * with, and what they print is what the agent read), writing sysctls of
 * the agent's network namespace and parsing rates. Called by net.c and
 * net_rules.c (and rdma.c, which moves VF netdevs with net_run).
 */
#include "net_int.h"

#include "allot/common.h"
#include "log.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#define NET_MAX_ARGS 96

/* Runs argv; input to its stdin; stdout+stderr into out. */
static int run_argv(char **argv, char *out, size_t outlen, const char *input)
{
    int in[2] = {-1, -1}, o[2] = {-1, -1}, status = 0;
    size_t got = 0, inlen = input ? strlen(input) : 0, sent = 0;
    char sink[4096];
    pid_t pid;

    if (pipe2(in, O_CLOEXEC) < 0)
        return -1;
    if (pipe2(o, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(o[1], 1);
        dup2(o[1], 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(o[1]);
    if (pid < 0) {
        close(in[1]);
        close(o[0]);
        return -1;
    }
    if (!inlen) {
        close(in[1]);
        in[1] = -1;
    }
    /* feed the input while reading the output: neither side can block the other */
    for (;;) {
        struct pollfd p[2] = {{.fd = o[0], .events = POLLIN}, {.fd = in[1], .events = POLLOUT}};
        int np = in[1] >= 0 ? 2 : 1;
        if (poll(p, (nfds_t)np, 10000) <= 0) {
            kill(pid, SIGKILL); /* a tool that hangs: not the agent's loop */
            break;
        }
        if (np == 2 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write(in[1], input + sent, inlen - sent);
            if (w > 0)
                sent += (size_t)w;
            if (w <= 0 || sent == inlen) {
                close(in[1]);
                in[1] = -1;
            }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r;
            if (out && got + 1 < outlen)
                r = read(o[0], out + got, outlen - 1 - got);
            else
                r = read(o[0], sink, sizeof(sink));
            if (r <= 0)
                break;
            if (out && got + 1 < outlen)
                got += (size_t)r;
        }
    }
    if (in[1] >= 0)
        close(in[1]);
    close(o[0]);
    if (out && outlen)
        out[got] = '\0';
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Formats and splits a command line into words (in buf). Returns argc. */
static int split(char *buf, char **argv)
{
    int argc = 0;

    for (char *p = buf; *p && argc < NET_MAX_ARGS - 1;) {
        while (*p == ' ')
            *p++ = '\0';
        if (!*p)
            break;
        argv[argc++] = p;
        while (*p && *p != ' ')
            p++;
    }
    argv[argc] = NULL;
    return argc;
}

int net_run(char *out, size_t outlen, const char *input, const char *fmt, ...)
{
    char line[2048], *argv[NET_MAX_ARGS];
    va_list ap;
    int rc;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (!split(line, argv))
        return -1;
    rc = run_argv(argv, out, outlen, input);
    if (out && rc)
        out[strcspn(out, "\n")] = '\0'; /* the first line says why */
    return rc;
}

json_t *net_run_json(const char *fmt, ...)
{
    char line[2048], *argv[NET_MAX_ARGS];
    json_t *j = NULL;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* a node with many links lists more than a first guess holds: the
     * command runs again with four times the room, up to 64 MiB */
    for (size_t cap = 1 << 20; !j && cap <= (size_t)64 << 20; cap *= 4) {
        char words[sizeof(line)], *out = allot_malloc(cap);
        json_error_t e;
        int rc;

        memcpy(words, line, sizeof(words));
        if (!out || !split(words, argv)) {
            allot_free(out);
            return NULL;
        }
        out[0] = '\0'; /* run_argv returns early, writing nothing, when it cannot fork */
        rc = run_argv(argv, out, cap, NULL);
        size_t len = strlen(out);
        if (rc == 0 && len + 1 < cap && !(j = json_loads(out, JSON_DECODE_ANY, &e)))
            LOG_WARN("net", "%s: output is not JSON: %s", line, e.text);
        allot_free(out);
        if (rc != 0 || len + 1 < cap)
            break;
        if (cap * 4 > (size_t)64 << 20)
            LOG_WARN("net", "%s: more than 64 MiB of output, not read", line);
    }
    return j;
}

int net_sysctl(const char *path, const char *value)
{
    char p[512];
    int fd, rc = 0;

    allot_fmt(p, sizeof(p), "/proc/sys/%s", path);
    fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (write(fd, value, strlen(value)) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

int net_sysctl_in(const char *ns, const char *path, const char *value)
{
    char nsp[512], p[512];
    size_t len = strlen(value);
    int st = 0;
    pid_t pid;

    /* the paths made before the fork: the child of a threaded agent only
     * opens, enters and writes */
    allot_fmt(nsp, sizeof(nsp), "/run/netns/%s", ns);
    allot_fmt(p, sizeof(p), "/proc/sys/%s", path);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(nsp, O_RDONLY | O_CLOEXEC), out;

        if (fd < 0 || setns(fd, CLONE_NEWNET) < 0 || (out = open(p, O_WRONLY | O_CLOEXEC)) < 0)
            _exit(1);
        _exit(write(out, value, len) == (ssize_t)len ? 0 : 1);
    }
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int64_t net_parse_rate(const char *s)
{
    static const struct {
        const char *unit;
        int64_t mul;
    } units[] = {{"", 1},           {"bit", 1},           {"kbit", 1000},
                 {"mbit", 1000000}, {"gbit", 1000000000}, {"tbit", 1000000000000},
                 {"k", 1000},       {"m", 1000000},       {"g", 1000000000}};
    char *end;
    double v;

    if (!s || !*s)
        return -1;
    v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (!strcasecmp(end, units[i].unit))
            return (int64_t)(v * (double)units[i].mul);
    return -1;
}

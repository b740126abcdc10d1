/*
 * /proc readers shared by the shim and the region reader (procfs.h).
 * Plain stdio on files of a few hundred bytes; no state.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "procfs.h"

/* What /proc/PID/stat says of pid: its state letter (field 3), number of
 * threads (field 20) and start time (field 22). Returns false when it
 * cannot be read. */
static bool read_stat(int pid, char *state, long *threads, uint64_t *start)
{
    char path[64], buf[512];
    unsigned long long st = 0;
    long nt = 0;
    const char *p;
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = fopen(path, "re");
    if (!f)
        return false;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* the command name may hold spaces and parentheses: skip past the last ')' */
    p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2])
        return false;
    *state = p[2];
    /* the k-th space after ')' starts field k + 2 */
    for (int k = 0; k < 20 && p; k++) {
        p = strchr(p + 1, ' ');
        if (p && k == 17 && sscanf(p + 1, "%ld", &nt) != 1)
            return false;
    }
    if (!p || sscanf(p + 1, "%llu", &st) != 1)
        return false;
    *threads = nt;
    *start = st;
    return true;
}

uint64_t shim_proc_start(int pid)
{
    uint64_t start;
    long threads;
    char state;

    return read_stat(pid, &state, &threads, &start) ? start : 0;
}

bool shim_proc_alive(int pid, uint64_t start)
{
    uint64_t now_start;
    long threads;
    char state;

    if (pid <= 0)
        return false;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return false;
    /* it exists, but /proc may not describe it (another user's, under
     * hidepid): taken for alive */
    if (!read_stat(pid, &state, &threads, &now_start))
        return true;
    /* a zombie holds no memory; a live process whose main thread has
     * left (pthread_exit) shows Z too, with its other threads counted */
    if (state == 'X' || (state == 'Z' && threads <= 1))
        return false;
    /* same pid, different start time: the pid was reused */
    return !(start && now_start && now_start != start);
}

uint64_t shim_proc_pidns(int pid)
{
    char path[64], link[64];
    unsigned long long ino = 0;
    ssize_t n;

    if (pid)
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
    else
        snprintf(path, sizeof(path), "/proc/self/ns/pid");
    n = readlink(path, link, sizeof(link) - 1);
    if (n <= 0)
        return 0;
    link[n] = '\0';
    return sscanf(link, "pid:[%llu]", &ino) == 1 ? ino : 0;
}

/*
 * /proc readers shared by the shim and the region reader (procfs.h).
 * Plain stdio on files of a few hundred bytes; no state.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "procfs.h"

uint64_t shim_proc_start(int pid)
{
    char path[64], buf[512];
    unsigned long long start = 0;
    const char *p;
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = fopen(path, "re");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* the command name may hold spaces and parentheses: skip past the last ')' */
    p = strrchr(buf, ')');
    if (!p)
        return 0;
    /* the k-th space after ')' starts field k + 2; the start time is field 22 */
    for (int k = 0; k < 20 && p; k++)
        p = strchr(p + 1, ' ');
    if (!p || sscanf(p + 1, "%llu", &start) != 1)
        return 0;
    return start;
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

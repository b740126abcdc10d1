/*
 * Device nodes and folders on the node: the few file-system helpers the
 * inventory (emulated GPUs' nodes), cgroups (the nvidia-uvm major) and MIG
 * capabilities (migcaps.c) share.
 */
#include "agent.h"

#include "allot/common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int agent_mkdir_p(const char *path)
{
    char tmp[4400];

    allot_strlcpy(tmp, path, sizeof(tmp));
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

int agent_char_major(const char *devices, const char *driver)
{
    FILE *f = fopen(devices, "r");
    char line[128], name[64];
    int major = -1, m;
    bool chars = false;

    while (f && fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "Character devices:", 18))
            chars = true;
        else if (!strncmp(line, "Block devices:", 14))
            chars = false;
        else if (chars && sscanf(line, "%d %63s", &m, name) == 2 && !strcmp(name, driver))
            major = m;
    }
    if (f)
        fclose(f);
    return major;
}

int agent_mkchr(const char *path, int major, int minor, mode_t mode)
{
    struct stat st;

    if (stat(path, &st) == 0 && S_ISCHR(st.st_mode) && (int)major(st.st_rdev) == major &&
        (int)minor(st.st_rdev) == minor && (st.st_mode & 0777) == mode)
        return 0;
    unlink(path);
    if (mknod(path, S_IFCHR | mode, makedev((unsigned)major, (unsigned)minor)) < 0)
        return -errno;
    return chmod(path, mode) == 0 ? 0 : -errno; /* as the driver's: the umask took some */
}

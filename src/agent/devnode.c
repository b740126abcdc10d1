/*
 * Files, folders and device nodes on the node: the few file-system helpers
 * the agent's parts share (records written atomically, small files read,
 * folders made, device nodes made and their majors looked up).
 */
#include "agent.h"

#include "allot/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

int agent_write_atomic(const char *dir, const char *name, const char *text)
{
    char tmp[4400], path[4400];
    int fd, rc = 0;

    allot_fmt(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
    allot_fmt(path, sizeof(path), "%s/%s", dir, name);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    if (n < 0 || fsync(fd) < 0)
        rc = -errno;
    else if ((size_t)n != len)
        rc = -EIO;
    close(fd);
    if (!rc && rename(tmp, path) < 0)
        rc = -errno;
    if (rc) {
        unlink(tmp);
        return rc;
    }
    /* the rename itself survives a power loss once the folder is synced */
    if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        if (fsync(fd) < 0)
            rc = -errno;
        close(fd);
    }
    return rc;
}

int agent_read_small(const char *dir, const char *name, char *buf, size_t len)
{
    char path[4400];
    int fd;
    ssize_t n;

    allot_fmt(path, sizeof(path), "%s/%s", dir, name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, buf, len - 1);
    if (n < 0) {
        int e = errno;
        close(fd);
        errno = e; /* callers tell a missing file from an unreadable one */
        return -1;
    }
    close(fd);
    buf[n] = '\0';
    return 0;
}

void agent_rm_tree(int fd, const char *name, int depth)
{
    struct dirent *e;
    DIR *d;
    int sub;

    if (unlinkat(fd, name, 0) == 0 || errno != EISDIR)
        return;
    sub = depth > 0 ? openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (sub >= 0 && !(d = fdopendir(sub))) {
        close(sub);
    } else if (sub >= 0) {
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                agent_rm_tree(dirfd(d), e->d_name, depth - 1);
        closedir(d);
    }
    unlinkat(fd, name, AT_REMOVEDIR);
}

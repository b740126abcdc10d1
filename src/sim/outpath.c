/*
 * Output path checks (outpath.h): stat() and access() for a file that
 * exists, a create-and-remove for one that does not.
 */
#include "outpath.h"

#include "allot/common.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int sim_outpath_check(const char *opt, const char *path, char *err, size_t errlen)
{
    struct stat st;
    int fd;

    if (!*path) {
        allot_fmt(err, errlen, "%s: empty file name", opt);
        return ALLOT_EIO;
    }
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            allot_fmt(err, errlen, "%s %s: is a directory", opt, path);
            return ALLOT_EIO;
        }
        if (access(path, W_OK) != 0) {
            allot_fmt(err, errlen, "%s %s: %s", opt, path, strerror(errno));
            return ALLOT_EIO;
        }
        return 0;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0) {
        allot_fmt(err, errlen, "%s %s: %s", opt, path, strerror(errno));
        return ALLOT_EIO;
    }
    close(fd);
    unlink(path);
    return 0;
}

int sim_outpath_sibling(const char *opt, const char *path, const char *suffix, char *out,
                        size_t outlen, char *err, size_t errlen)
{
    struct stat st;
    size_t len = strlen(path);

    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        allot_fmt(err, errlen,
                  "%s %s: not a regular file (this option writes two files, OUT.svg and "
                  "OUT%s.svg)",
                  opt, path, suffix);
        return ALLOT_EINVAL;
    }
    if (len > 4 && strcmp(path + len - 4, ".svg") == 0)
        len -= 4;
    if ((size_t)allot_fmt(out, outlen, "%.*s%s.svg", (int)len, path, suffix) >= outlen) {
        allot_fmt(err, errlen, "%s %s: path too long", opt, path);
        return ALLOT_EINVAL;
    }
    return 0;
}

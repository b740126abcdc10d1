/*
 * Output path checks (outpath.h): stat() and access() for a file that
 * exists, a create-and-remove for one that does not.
 */
#include "outpath.h"

#include "allot/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

/* Where path leads, as a key two names of one file share: "dev:ino" of an
 * existing file, else its folder's "dev:ino" and its name; "" for a file
 * that is not a regular one (a device may be named twice). */
static void file_key(const char *path, char *key, size_t len)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    struct stat st;

    if (stat(path, &st) == 0) {
        if (S_ISREG(st.st_mode))
            allot_fmt(key, len, "%llu:%llu", (unsigned long long)st.st_dev,
                      (unsigned long long)st.st_ino);
        else
            *key = '\0';
        return;
    }
    if (!slash)
        allot_strlcpy(dir, ".", sizeof(dir));
    else
        allot_fmt(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (stat(dir, &st) == 0)
        allot_fmt(key, len, "%llu:%llu/%s", (unsigned long long)st.st_dev,
                  (unsigned long long)st.st_ino, slash ? slash + 1 : path);
    else
        allot_fmt(key, len, "%s/%s", dir, slash ? slash + 1 : path);
}

int sim_outpath_distinct(const char *const *opts, const char *const *paths, size_t n, char *err,
                         size_t errlen)
{
    char a[PATH_MAX + 8], b[PATH_MAX + 8];

    for (size_t i = 0; i < n; i++) {
        if (!paths[i] || !*paths[i])
            continue;
        file_key(paths[i], a, sizeof(a));
        for (size_t j = i + 1; j < n && *a; j++) {
            if (!paths[j] || !*paths[j])
                continue;
            file_key(paths[j], b, sizeof(b));
            if (!strcmp(a, b)) {
                allot_fmt(err, errlen,
                          "%s and %s name the same file %s: one would overwrite the other", opts[i],
                          opts[j], paths[j]);
                return ALLOT_EINVAL;
            }
        }
    }
    return 0;
}

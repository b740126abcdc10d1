/*
 * Replay driver of the fuzz targets for builds without libFuzzer (gcc,
 * the ASan test build): runs LLVMFuzzerTestOneInput once over every file
 * named on the command line and every file of every directory named
 * (not recursive, in name order), each input in a buffer of exactly its
 * size so a sanitizer sees any read past its end. ctest runs it over
 * tests/fuzz/corpus/<target>/. Exits 0 after the last input; 1 when an
 * argument cannot be read or no input was found at all (an empty corpus
 * must not pass); a broken invariant aborts inside the target.
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* Runs the target over file `path`. Returns 0, or -1 when unreadable. */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (;;) {
        if (len == cap) {
            uint8_t *p = realloc(buf, cap = cap ? 2 * cap : 4096);

            if (!p) {
                fprintf(stderr, "replay: %s: out of memory\n", path);
                free(buf);
                fclose(f);
                return -1;
            }
            buf = p;
        }
        n = fread(buf + len, 1, cap - len, f);
        if (!n)
            break;
        len += n;
    }
    fclose(f);
    /* an exact-size copy: the slack of buf would hide overreads */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    if (len)
        memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file of directory `dir`; *count grows by their
 * number. Returns 0, or -1 on a file or directory it cannot read. */
static int run_dir(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d))) {
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *p;
        struct stat st;

        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **g = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));
            if (!g) {
                rc = -1;
                break;
            }
            names = g;
        }
        if (!(p = malloc(len))) {
            rc = -1;
            break;
        }
        snprintf(p, len, "%s/%s", dir, e->d_name);
        if (stat(p, &st) < 0 || !S_ISREG(st.st_mode)) {
            free(p);
            continue;
        }
        names[n++] = p;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && run_file(names[i]) < 0)
            rc = -1;
        else if (rc == 0)
            ++*count;
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int rc = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 1;
    }
    for (int i = 1; i < argc && rc == 0; i++) {
        struct stat st;

        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            rc = run_dir(argv[i], &count);
        } else if ((rc = run_file(argv[i])) == 0) {
            count++;
        }
    }
    printf("replay: %zu inputs from %d paths\n", count, argc - 1);
    if (rc == 0 && count == 0)
        fprintf(stderr, "replay: no input found\n");
    return rc == 0 && count > 0 ? 0 : 1;
}

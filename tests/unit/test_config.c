/*
 * Unit tests of the declarative configuration (src/common/config.c):
 * defaults, every value type with its units and range, the config file
 * (comments, quotes, errors with file and line), the command line, --help
 * and the generated example, which must load back to the defaults.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/common.h"
#include "allot/config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct vals {
    char *config;
    char *listen;
    char *log_format;
    int64_t workers;
    int64_t body_max;
    int64_t lease;
    bool tls;
};

static int even(const void *field, char *err, size_t errlen)
{
    if (*(const int64_t *)field % 2) {
        allot_fmt(err, errlen, "workers: must be even");
        return ALLOT_EINVAL;
    }
    return 0;
}

static const char *const formats[] = {"text", "json", NULL};
static const struct allot_config_option opts[] = {
    {.name = "config",
     .type = ALLOT_CFG_STRING,
     .offset = offsetof(struct vals, config),
     .help = "Config file read first."},
    {.name = "listen",
     .type = ALLOT_CFG_STRING,
     .offset = offsetof(struct vals, listen),
     .def = "127.0.0.1:7070",
     .help = "Address and port to serve the API on."},
    {.name = "log-format",
     .type = ALLOT_CFG_ENUM,
     .offset = offsetof(struct vals, log_format),
     .def = "text",
     .choices = formats,
     .runtime = true,
     .help = "Log line format."},
    {.name = "workers",
     .type = ALLOT_CFG_INT,
     .offset = offsetof(struct vals, workers),
     .def = "4",
     .min = 1,
     .max = 64,
     .validate = even,
     .help = "HTTP worker threads."},
    {.name = "body-max",
     .type = ALLOT_CFG_SIZE,
     .offset = offsetof(struct vals, body_max),
     .def = "1M",
     .min = 1024,
     .max = 1LL << 30,
     .help = "Largest request body."},
    {.name = "lease",
     .type = ALLOT_CFG_DURATION,
     .offset = offsetof(struct vals, lease),
     .def = "30s",
     .min = 1000,
     .max = 3600000,
     .help = "Node lease."},
    {.name = "tls",
     .type = ALLOT_CFG_BOOL,
     .offset = offsetof(struct vals, tls),
     .def = "no",
     .help = "Serve HTTPS."},
};
#define N (sizeof(opts) / sizeof(opts[0]))

static void test_defaults_and_types(void **state)
{
    struct vals v = {0};
    char err[256];

    (void)state;
    assert_int_equal(allot_config_defaults(opts, N, &v, err, sizeof(err)), 0);
    assert_string_equal(v.listen, "127.0.0.1:7070");
    assert_string_equal(v.log_format, "text");
    assert_int_equal(v.workers, 4);
    assert_int_equal(v.body_max, 1 << 20);
    assert_int_equal(v.lease, 30000);
    assert_false(v.tls);
    assert_int_equal(allot_config_set(opts, N, &v, "lease", "1500ms", err, sizeof(err)), 0);
    assert_int_equal(v.lease, 1500);
    assert_int_equal(allot_config_set(opts, N, &v, "lease", "2m", err, sizeof(err)), 0);
    assert_int_equal(v.lease, 120000);
    /* days are a unit (out of this option's range, not an unknown suffix) */
    assert_int_equal(allot_config_set(opts, N, &v, "lease", "1d", err, sizeof(err)), ALLOT_ERANGE);
    assert_int_equal(v.lease, 120000);
    assert_string_equal(err, "lease: 1d is out of range 1s..1h"); /* in units, not ms */
    assert_int_equal(allot_config_set(opts, N, &v, "body-max", "2G", err, sizeof(err)),
                     ALLOT_ERANGE);
    assert_non_null(strstr(err, "body-max"));
    assert_int_equal(v.body_max, 1 << 20); /* unchanged on error */
    assert_int_equal(allot_config_set(opts, N, &v, "workers", "12x", err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, "not an integer"));
    assert_int_equal(
        allot_config_set(opts, N, &v, "workers", "99999999999999999999", err, sizeof(err)),
        ALLOT_ERANGE);
    assert_int_equal(allot_config_set(opts, N, &v, "workers", "7", err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "workers: must be even");
    assert_int_equal(v.workers, 4);
    assert_int_equal(allot_config_set(opts, N, &v, "log-format", "xml", err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_string_equal(err, "log-format: \"xml\" is not one of text json");
    assert_int_equal(allot_config_set(opts, N, &v, "tls", "maybe", err, sizeof(err)), ALLOT_EINVAL);
    assert_int_equal(allot_config_set(opts, N, &v, "nope", "1", err, sizeof(err)), ALLOT_ENOENT);
    assert_int_equal(
        allot_config_set(opts, N, &v, "lease", "9223372036854775807h", err, sizeof(err)),
        ALLOT_ERANGE);
    allot_config_free(opts, N, &v);
    assert_null(v.listen);
}

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/allot-config-XXXXXX");
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_file(void **state)
{
    struct vals v = {0};
    char err[256], *path;

    (void)state;
    assert_int_equal(allot_config_defaults(opts, N, &v, err, sizeof(err)), 0);
    path = write_tmp("# comment\n\nlisten = \"0.0.0.0:80 \"\nworkers 8 # trailing\ntls yes\n");
    assert_int_equal(allot_config_load_file(opts, N, &v, path, err, sizeof(err)), 0);
    assert_string_equal(v.listen, "0.0.0.0:80 ");
    assert_int_equal(v.workers, 8);
    assert_true(v.tls);
    unlink(path);
    free(path);
    /* a quoted value may hold '#' and be followed by a comment */
    path = write_tmp("listen \"a # b\"  # the address\nlog-format \"json\"#c\n");
    assert_int_equal(allot_config_load_file(opts, N, &v, path, err, sizeof(err)), 0);
    assert_string_equal(v.listen, "a # b");
    assert_string_equal(v.log_format, "json");
    unlink(path);
    free(path);
    path = write_tmp("listen \"a\" b\n");
    assert_int_equal(allot_config_load_file(opts, N, &v, path, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, ":1: expected \"name value\""));
    unlink(path);
    free(path);
    path = write_tmp("listen \"a\n");
    assert_int_equal(allot_config_load_file(opts, N, &v, path, err, sizeof(err)), ALLOT_EINVAL);
    unlink(path);
    free(path);
    path = write_tmp("workers 8\nbogus 1\n");
    assert_int_equal(allot_config_load_file(opts, N, &v, path, err, sizeof(err)), ALLOT_ENOENT);
    assert_non_null(strstr(err, ":2: unknown option \"bogus\""));
    unlink(path);
    free(path);
    path = write_tmp("listen\n");
    assert_int_equal(allot_config_load_file(opts, N, &v, path, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, ":1: expected \"name value\""));
    unlink(path);
    free(path);
    assert_int_equal(allot_config_load_file(opts, N, &v, "/nonexistent/x.conf", err, sizeof(err)),
                     ALLOT_EIO);
    assert_non_null(strstr(err, "/nonexistent/x.conf"));
    allot_config_free(opts, N, &v);
}

static void test_args(void **state)
{
    struct vals v = {0};
    char err[256];
    char *argv[] = {"prog", "--workers", "6", "--tls", "--listen=[::1]:9", "--no-tls", "run", NULL};
    char *bad[] = {"prog", "--workers", NULL};
    int i = 1;

    (void)state;
    assert_int_equal(allot_config_defaults(opts, N, &v, err, sizeof(err)), 0);
    assert_int_equal(allot_config_parse_args(opts, N, &v, 7, argv, &i, err, sizeof(err)), 0);
    assert_int_equal(i, 6);
    assert_int_equal(v.workers, 6);
    assert_false(v.tls);
    assert_string_equal(v.listen, "[::1]:9");
    i = 1;
    assert_int_equal(allot_config_parse_args(opts, N, &v, 2, bad, &i, err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, "--workers needs a value"));
    allot_config_free(opts, N, &v);
}

/* --config names a file read before the rest of the command line, which
 * wins; its errors name the file and line. */
static void test_load_args(void **state)
{
    struct vals v = {0};
    char err[256], *path = write_tmp("workers 8\ntls yes\nlisten \"file\"\n");
    char *argv[] = {"prog", "--listen", "cli", "--config", path, "--no-tls", "rest", NULL};
    char *bad[] = {"prog", "--config=/nonexistent/x.conf", NULL};
    int i = 1;

    (void)state;
    assert_int_equal(allot_config_defaults(opts, N, &v, err, sizeof(err)), 0);
    assert_int_equal(allot_config_load_args(opts, N, &v, 7, argv, &i, err, sizeof(err)), 0);
    assert_int_equal(i, 6);
    assert_int_equal(v.workers, 8); /* from the file */
    assert_false(v.tls);            /* the command line wins */
    assert_string_equal(v.listen, "cli");
    i = 1;
    assert_int_equal(allot_config_load_args(opts, N, &v, 2, bad, &i, err, sizeof(err)), ALLOT_EIO);
    assert_non_null(strstr(err, "/nonexistent/x.conf"));
    unlink(path);
    free(path);
    path = write_tmp("workers 7\n");
    argv[4] = path;
    i = 1;
    assert_int_equal(allot_config_load_args(opts, N, &v, 7, argv, &i, err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, ":1: workers: must be even"));
    unlink(path);
    free(path);
    allot_config_free(opts, N, &v);
}

/* The generated example documents every option and loads back to the
 * defaults (everything in it is commented out). */
static void test_example(void **state)
{
    struct vals v = {0}, d = {0};
    char err[256], *buf = NULL, *help = NULL, path[] = "/tmp/allot-example-XXXXXX";
    size_t len = 0, hlen = 0;
    FILE *f = open_memstream(&buf, &len), *h = open_memstream(&help, &hlen);
    int fd;

    (void)state;
    allot_config_example(opts, N, "test example", f);
    allot_config_help(opts, N, h);
    fclose(f);
    fclose(h);
    for (size_t k = 0; k < N; k++) {
        char want[64];
        allot_fmt(want, sizeof(want), "\n#%s ", opts[k].name);
        assert_non_null(strstr(buf, want));
        allot_fmt(want, sizeof(want), "--%s", opts[k].name);
        assert_non_null(strstr(help, want));
    }
    free(help);
    assert_non_null(strstr(buf, "Reloaded on SIGHUP"));
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
    assert_int_equal(allot_config_defaults(opts, N, &v, err, sizeof(err)), 0);
    assert_int_equal(allot_config_defaults(opts, N, &d, err, sizeof(err)), 0);
    assert_int_equal(allot_config_load_file(opts, N, &v, path, err, sizeof(err)), 0);
    assert_string_equal(v.listen, d.listen);
    assert_int_equal(v.workers, d.workers);
    unlink(path);
    free(buf);
    allot_config_free(opts, N, &v);
    allot_config_free(opts, N, &d);
}

/* Allocation failures while setting strings: clean error, old value kept. */
static void test_alloc_failure(void **state)
{
    struct vals v = {0};
    char err[256];

    (void)state;
    assert_int_equal(allot_config_defaults(opts, N, &v, err, sizeof(err)), 0);
    allot_alloc_fail_at(1, false);
    assert_int_equal(allot_config_set(opts, N, &v, "listen", "x:1", err, sizeof(err)),
                     ALLOT_ENOMEM);
    allot_alloc_fail_at(0, false);
    assert_string_equal(v.listen, "127.0.0.1:7070");
    allot_config_free(opts, N, &v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_types),
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_load_args),
        cmocka_unit_test(test_example),
        cmocka_unit_test(test_alloc_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

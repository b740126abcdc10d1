/*
 * Declarative configuration (STYLE.md 15): every option of a program is
 * described once, in a table of struct allot_config_option, and that table
 * drives the defaults, the config file, the command line, `--help` and a
 * generated, fully commented example file.
 *
 * Values live in a caller-owned struct; each option names the offset of its
 * field. Field types by option type:
 *   ALLOT_CFG_STRING, ALLOT_CFG_ENUM  char * (owned by the struct; freed by
 *                                     allot_config_free)
 *   ALLOT_CFG_INT, ALLOT_CFG_SIZE,
 *   ALLOT_CFG_DURATION                int64_t (sizes in bytes, durations
 *                                     in milliseconds)
 *   ALLOT_CFG_BOOL                    bool
 *
 * Config file syntax: one `name value` or `name = value` per line; `#`
 * starts a comment; blank lines are ignored; values may be quoted with
 * double quotes. Sizes take K/M/G/T suffixes (powers of 1024), durations
 * ms/s/m/h (a bare number is seconds). Unknown names, malformed values and
 * values out of range are errors naming the file, line and option.
 *
 * Not thread-safe: load the configuration before starting threads.
 */
#ifndef ALLOT_CONFIG_H
#define ALLOT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum allot_config_type {
    ALLOT_CFG_STRING,
    ALLOT_CFG_ENUM,
    ALLOT_CFG_INT,
    ALLOT_CFG_SIZE,
    ALLOT_CFG_DURATION,
    ALLOT_CFG_BOOL
};

struct allot_config_option {
    const char *name; /* also the long command-line flag (--name) */
    enum allot_config_type type;
    size_t offset;              /* of the field in the values struct */
    const char *def;            /* default, in file syntax; NULL: empty/0 */
    int64_t min, max;           /* numeric range (both 0: unbounded) */
    const char *const *choices; /* ALLOT_CFG_ENUM: NULL-terminated */
    bool runtime;               /* may change without a restart (SIGHUP) */
    /* Optional extra check of the parsed value (the field's address);
     * returns 0 or ALLOT_EINVAL with a message in err. */
    int (*validate)(const void *field, char *err, size_t errlen);
    const char *help; /* one or more sentences */
};

/* Sets every option of `opts` (n entries) to its default in `values`.
 * Returns 0, ALLOT_ENOMEM, or ALLOT_EINVAL when a default is malformed
 * (a bug in the table; message in err). */
int allot_config_defaults(const struct allot_config_option *opts, size_t n, void *values, char *err,
                          size_t errlen);

/* Parses `text` as the value of option `name` and stores it. Returns 0,
 * ALLOT_ENOENT for an unknown name, ALLOT_EINVAL / ALLOT_ERANGE for a bad
 * value (message naming the option in err), or ALLOT_ENOMEM. On error the
 * stored value is unchanged. */
int allot_config_set(const struct allot_config_option *opts, size_t n, void *values,
                     const char *name, const char *text, char *err, size_t errlen);

/* Reads a config file. Returns 0, ALLOT_EIO when it cannot be read, or the
 * first error of allot_config_set with "FILE:LINE: " before the message. */
int allot_config_load_file(const struct allot_config_option *opts, size_t n, void *values,
                           const char *path, char *err, size_t errlen);

/* Parses `--name value` and `--name=value` (and `--name` alone for
 * booleans, `--no-name` to clear one) from argv[*i] on, stopping at the
 * first argument that is not an option or at `--` (skipped). *i is
 * advanced past what was used. Returns 0 or an allot_config_set error. */
int allot_config_parse_args(const struct allot_config_option *opts, size_t n, void *values,
                            int argc, char **argv, int *i, char *err, size_t errlen);

/* The command line of a program whose table has a "config" option:
 * reads the file that `--config FILE` (or `--config=FILE`) in argv[*i..]
 * names first, then parses argv as allot_config_parse_args does, so the
 * command line wins. Returns 0, or the first error of either (the file's
 * named with its line). */
int allot_config_load_args(const struct allot_config_option *opts, size_t n, void *values, int argc,
                           char **argv, int *i, char *err, size_t errlen);

/* Writes the option list for --help. */
void allot_config_help(const struct allot_config_option *opts, size_t n, FILE *out);

/* Writes a fully commented example file: every option, its help, range,
 * whether it can change at run time, and its default (commented out). */
void allot_config_example(const struct allot_config_option *opts, size_t n, const char *title,
                          FILE *out);

/* Frees the strings the configuration owns in `values`; accepts a struct
 * whose strings are NULL. */
void allot_config_free(const struct allot_config_option *opts, size_t n, void *values);

/* A size as options take it (512, 64K, 2G: K, M, G, T of 1024) within
 * lo..hi into *out. 0, or ALLOT_EINVAL (*out untouched). */
int allot_parse_size(const char *s, int64_t lo, int64_t hi, int64_t *out);

#endif

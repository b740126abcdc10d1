/*
 * Table-driven command lines for allot-sim's commands (fill, replay): one
 * option table, described once (STYLE 15), drives both parsing and --help.
 *
 * A command line is a list of options only: "--name" for a flag,
 * "--name VALUE" or "--name=VALUE" for an option that takes a value. Each
 * option may be given once. Nothing here prints to stderr or exits: parse
 * errors come back as a message for the command to report. The parsed
 * values point into argv (borrowed, valid as long as argv is).
 *
 * Also the strict number parsers the commands use for option values: no
 * leading blanks or signs, nothing after the number.
 *
 * No state; safe from any thread. Callers: fill.c, replay_cli.c.
 */
#ifndef ALLOT_SIM_CLIOPT_H
#define ALLOT_SIM_CLIOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One option of a command's table. All strings are static text. */
struct cliopt {
    const char *name; /* without the leading "--" */
    const char *arg;  /* value placeholder in --help, e.g. "FILE"; NULL: a flag */
    const char *def;  /* default shown in --help; NULL: none */
    const char *help; /* one line, or several separated by '\n' */
};

/* Flags for cliopt_step() and cliopt_parse(). */
enum {
    /* Name the option in error messages as it was typed (the whole argv
     * element, e.g. "--tune=2"), not as "--tune". */
    CLIOPT_ECHO_ARG = 1u << 0,
};

/*
 * Prints heading (printf-free: written as is) and then one line per option
 * of opts[0..n-1] to f: "  --name ARG", padded to width columns, then the
 * help text (continuation lines indented to the same column) and
 * " (default DEF)" when def is set.
 */
void cliopt_usage(FILE *f, const char *heading, const struct cliopt *opts, int n, int width);

/*
 * Parses the argument argv[*i] (and, for "--name VALUE", argv[*i + 1]).
 * IN opts[0..n-1], argc, argv, flags (CLIOPT_*).
 * IN/OUT *i: the index of the argument; on success, of the last one used.
 * OUT val[k]: the value of option k (into argv); given[k]: set to true.
 * Both arrays have n entries and start out zeroed by the caller.
 * Returns the option's index 0..n-1, or ALLOT_EINVAL with a message in err
 * (not a "--" argument, an unknown option, one given twice, a value given
 * to a flag, or a missing value).
 */
int cliopt_step(const struct cliopt *opts, int n, int argc, char **argv, int *i, const char **val,
                bool *given, unsigned flags, char *err, size_t errlen);

/*
 * Runs cliopt_step() over argv[1..argc-1]. Same arguments without i.
 * Returns 0, or ALLOT_EINVAL with a message in err at the first bad
 * argument.
 */
int cliopt_parse(const struct cliopt *opts, int n, int argc, char **argv, const char **val,
                 bool *given, unsigned flags, char *err, size_t errlen);

/*
 * Strict decimal integer: s is digits only (no sign, no blanks), and its
 * value lies in lo..hi. Stores it in *out and returns true; else false and
 * leaves *out alone.
 */
bool cliopt_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out);

/*
 * Strict finite number as strtod() reads it, starting with a digit or '.'
 * (no sign, no blanks), with nothing after it. Returns true with the value
 * in *v; else false (*v may have been written).
 */
bool cliopt_parse_double(const char *s, double *v);

#endif

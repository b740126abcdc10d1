/*
 * Output files of allot-sim's commands (fill, replay), checked before a
 * run starts, so that a path that cannot be written stops the command at
 * once instead of after minutes of simulation. No state; nothing printed.
 * Callers: fill_cli.c, replay_cli.c.
 */
#ifndef ALLOT_SIM_OUTPATH_H
#define ALLOT_SIM_OUTPATH_H

#include <stddef.h>

/*
 * Checks that the file at `path` (IN), the value of option `opt` (IN, e.g.
 * "--json"), can be written: an existing file must be writable and not a
 * directory; a new one is created and removed again. Returns 0, or
 * ALLOT_EIO with "OPT PATH: why" in err.
 */
int sim_outpath_check(const char *opt, const char *path, char *err, size_t errlen);

/*
 * The second file of a two-file output (replay's --plot OUT.svg writes
 * OUT.svg and OUT-util.svg): `suffix` (e.g. "-util") goes before a final
 * ".svg" of `path`, or after `path` when it has none; written to out
 * (outlen bytes). `path` must be a regular file's path: an existing file
 * that is not a regular file (a device such as /dev/null, a directory, a
 * pipe) is refused, since the second name would not make sense. Returns 0,
 * or ALLOT_EINVAL with "OPT PATH: why" in err.
 */
int sim_outpath_sibling(const char *opt, const char *path, const char *suffix, char *out,
                        size_t outlen, char *err, size_t errlen);

/*
 * Checks that no two of the n output files named by paths (IN; NULL: the
 * option was not given) are the same file, which one would overwrite with
 * the other: the same name, or names of one existing regular file, or
 * new files in one folder under one name. opts[i] names paths[i]'s option.
 * Devices such as /dev/null may be named twice. Returns 0, or ALLOT_EINVAL
 * with "OPT1 and OPT2 name the same file PATH" in err.
 */
int sim_outpath_distinct(const char *const *opts, const char *const *paths, size_t n, char *err,
                         size_t errlen);

#endif

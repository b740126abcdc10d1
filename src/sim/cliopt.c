/*
 * Table-driven command lines for allot-sim's commands: the --help printer,
 * the "--name", "--name VALUE", "--name=VALUE" parser and the strict number
 * parsers for option values (cliopt.h). No state, no allocation.
 */
#include "cliopt.h"

#include "allot/common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void cliopt_usage(FILE *f, const char *heading, const struct cliopt *opts, int n, int width)
{
    fputs(heading, f);
    for (int i = 0; i < n; i++) {
        const struct cliopt *o = &opts[i];
        char head[64];
        const char *h = o->help;

        allot_fmt(head, sizeof(head), "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        fprintf(f, "  %-*s ", width, head);
        for (;;) {
            const char *nl = strchr(h, '\n');

            if (!nl)
                break;
            fprintf(f, "%.*s\n  %-*s ", (int)(nl - h), h, width, "");
            h = nl + 1;
        }
        fputs(h, f);
        if (o->def)
            fprintf(f, " (default %s)", o->def);
        fputc('\n', f);
    }
}

int cliopt_step(const struct cliopt *opts, int n, int argc, char **argv, int *i, const char **val,
                bool *given, unsigned flags, char *err, size_t errlen)
{
    const char *arg = argv[*i], *a, *eq, *pre, *name;
    size_t len;
    int k;

    if (strncmp(arg, "--", 2) != 0) {
        allot_fmt(err, errlen, "unexpected argument \"%s\"", arg);
        return ALLOT_EINVAL;
    }
    a = arg + 2;
    eq = strchr(a, '=');
    len = eq ? (size_t)(eq - a) : strlen(a);
    for (k = 0; k < n; k++)
        if (strlen(opts[k].name) == len && !strncmp(opts[k].name, a, len))
            break;
    if (k == n) {
        allot_fmt(err, errlen, "unknown option \"%s\"", arg);
        return ALLOT_EINVAL;
    }
    /* How later messages name the option: as typed, or by its name. */
    pre = flags & CLIOPT_ECHO_ARG ? "" : "--";
    name = flags & CLIOPT_ECHO_ARG ? arg : opts[k].name;
    if (given[k]) {
        allot_fmt(err, errlen, "option \"%s%s\" given twice", pre, name);
        return ALLOT_EINVAL;
    }
    given[k] = true;
    if (!opts[k].arg) {
        if (eq) {
            allot_fmt(err, errlen, "option \"%s%s\" takes no value", pre, name);
            return ALLOT_EINVAL;
        }
        return k;
    }
    if (eq) {
        val[k] = eq + 1;
    } else if (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0) {
        val[k] = argv[++*i];
    } else {
        /* the next word is another option (a value that starts with "--"
         * is given as --name=VALUE) */
        allot_fmt(err, errlen, "option \"%s%s\" needs a value%s%s%s", pre, name,
                  *i + 1 < argc ? " (\"" : "", *i + 1 < argc ? argv[*i + 1] : "",
                  *i + 1 < argc ? "\" is an option)" : "");
        return ALLOT_EINVAL;
    }
    /* a file's option with an empty name would read or write "" */
    if (!*val[k] && (!strcmp(opts[k].arg, "FILE") || !strcmp(opts[k].arg, "DIR"))) {
        allot_fmt(err, errlen, "option \"%s%s\": empty file name", pre, name);
        return ALLOT_EINVAL;
    }
    return k;
}

int cliopt_parse(const struct cliopt *opts, int n, int argc, char **argv, const char **val,
                 bool *given, unsigned flags, char *err, size_t errlen)
{
    for (int i = 1; i < argc; i++) {
        int rc = cliopt_step(opts, n, argc, argv, &i, val, given, flags, err, errlen);

        if (rc < 0)
            return rc;
    }
    return 0;
}

bool cliopt_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long v;

    /* A leading digit rules out the blanks and signs strtoll() would take. */
    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (*end || errno || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

bool cliopt_parse_double(const char *s, double *v)
{
    const char *p = s;
    size_t ndig = 0;
    char *end;

    /* plain decimals only, as the docs say: digits with at most one point
     * (strtod would also take hex floats, exponents and "inf") */
    for (; *p >= '0' && *p <= '9'; p++)
        ndig++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            ndig++;
    if (!ndig || *p)
        return false;
    errno = 0;
    *v = strtod(s, &end);
    return *end == '\0' && errno == 0 && isfinite(*v);
}

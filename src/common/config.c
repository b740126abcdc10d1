/*
 * Declarative configuration: parsing and printing driven by one option
 * table (see include/allot/config.h). Used by the programs (allotd, the
 * agent); never by the core.
 */
#include "allot/config.h"

#include "allot/common.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const struct allot_config_option *find(const struct allot_config_option *opts, size_t n,
                                              const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

/* Parses a signed decimal integer with an optional unit suffix; `units`
 * maps suffixes to multipliers (NULL-terminated). Returns 0 or
 * ALLOT_EINVAL / ALLOT_ERANGE. */
struct unit {
    const char *suffix;
    int64_t mult;
};

static int parse_scaled(const char *s, const struct unit *units, int64_t bare, int64_t *out)
{
    char *end;
    long long v;

    if (!*s || (*s != '-' && (*s < '0' || *s > '9')))
        return ALLOT_EINVAL;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno == ERANGE)
        return ALLOT_ERANGE;
    if (*end == '\0') {
        if (v > INT64_MAX / bare || v < INT64_MIN / bare)
            return ALLOT_ERANGE;
        *out = (int64_t)v * bare;
        return 0;
    }
    for (const struct unit *u = units; u && u->suffix; u++) {
        if (strcmp(end, u->suffix) == 0) {
            if (v > INT64_MAX / u->mult || v < INT64_MIN / u->mult)
                return ALLOT_ERANGE;
            *out = (int64_t)v * u->mult;
            return 0;
        }
    }
    return ALLOT_EINVAL;
}

static const struct unit size_units[] = {{"K", 1024LL},
                                         {"M", 1024LL * 1024},
                                         {"G", 1024LL * 1024 * 1024},
                                         {"T", 1024LL * 1024 * 1024 * 1024},
                                         {NULL, 0}};
int allot_parse_size(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    int64_t v;

    if (parse_scaled(s, size_units, 1, &v) != 0 || v < lo || v > hi)
        return ALLOT_EINVAL;
    *out = v;
    return 0;
}

static const struct unit time_units[] = {{"ms", 1},      {"s", 1000},     {"m", 60000},
                                         {"h", 3600000}, {"d", 86400000}, {NULL, 0}};

static int parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"yes", "true", "on", "1", NULL};
    static const char *const no[] = {"no", "false", "off", "0", NULL};

    for (int i = 0; yes[i]; i++) {
        if (strcmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return ALLOT_EINVAL;
}

static const char *type_hint(const struct allot_config_option *o)
{
    switch (o->type) {
    case ALLOT_CFG_INT:
        return "an integer";
    case ALLOT_CFG_SIZE:
        return "a size such as 512K, 64M or 2G";
    case ALLOT_CFG_DURATION:
        return "a duration such as 500ms, 30s, 5m, 1h or 7d";
    case ALLOT_CFG_BOOL:
        return "yes or no";
    case ALLOT_CFG_ENUM:
        return "one of the listed choices";
    default:
        return "a string";
    }
}

/* ms as a duration in the largest unit it is a whole number of ("90s",
 * "1d", "500ms"). */
static void fmt_duration(char *buf, size_t len, int64_t ms)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } u[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};

    for (size_t k = 0; k < sizeof(u) / sizeof(u[0]); k++)
        if (ms != 0 && ms % u[k].ms == 0) {
            allot_fmt(buf, len, "%" PRId64 "%s", ms / u[k].ms, u[k].unit);
            return;
        }
    allot_fmt(buf, len, "%" PRId64 "%s", ms, ms ? "ms" : "s");
}

static int set_opt(const struct allot_config_option *o, void *values, const char *text, char *err,
                   size_t errlen)
{
    char *field = (char *)values + o->offset;
    int64_t num = 0;
    int rc = 0;

    switch (o->type) {
    case ALLOT_CFG_STRING:
    case ALLOT_CFG_ENUM: {
        char *copy;
        if (o->type == ALLOT_CFG_ENUM) {
            bool ok = false;
            for (int i = 0; o->choices && o->choices[i] && !ok; i++)
                ok = strcmp(o->choices[i], text) == 0;
            if (!ok) {
                int len = allot_fmt(err, errlen, "%s: \"%s\" is not one of", o->name, text);
                for (int i = 0; o->choices && o->choices[i] && len >= 0 && (size_t)len < errlen;
                     i++)
                    len += allot_fmt(err + len, errlen - (size_t)len, " %s", o->choices[i]);
                return ALLOT_EINVAL;
            }
        }
        if (o->validate && (rc = o->validate(&text, err, errlen)) != 0)
            return rc;
        copy = allot_strdup(text);
        if (!copy) {
            allot_fmt(err, errlen, "%s: out of memory", o->name);
            return ALLOT_ENOMEM;
        }
        allot_free(*(char **)field);
        *(char **)field = copy;
        return 0;
    }
    case ALLOT_CFG_BOOL: {
        bool b;
        if (parse_bool(text, &b)) {
            allot_fmt(err, errlen, "%s: \"%s\" is not %s", o->name, text, type_hint(o));
            return ALLOT_EINVAL;
        }
        if (o->validate && (rc = o->validate(&b, err, errlen)) != 0)
            return rc;
        *(bool *)field = b;
        return 0;
    }
    case ALLOT_CFG_INT:
        rc = parse_scaled(text, NULL, 1, &num);
        break;
    case ALLOT_CFG_SIZE:
        rc = parse_scaled(text, size_units, 1, &num);
        break;
    case ALLOT_CFG_DURATION:
        rc = parse_scaled(text, time_units, 1000, &num);
        break;
    }
    if (rc == ALLOT_ERANGE || (rc == 0 && (o->min || o->max) && (num < o->min || num > o->max))) {
        char lo[32], hi[32];
        if (o->type == ALLOT_CFG_DURATION) { /* in the units it is given in, not ms */
            fmt_duration(lo, sizeof(lo), o->min);
            fmt_duration(hi, sizeof(hi), o->max);
        } else {
            allot_fmt(lo, sizeof(lo), "%" PRId64, o->min);
            allot_fmt(hi, sizeof(hi), "%" PRId64, o->max);
        }
        allot_fmt(err, errlen, "%s: %s is out of range %s..%s", o->name, text, lo, hi);
        return ALLOT_ERANGE;
    }
    if (rc) {
        allot_fmt(err, errlen, "%s: \"%s\" is not %s", o->name, text, type_hint(o));
        return ALLOT_EINVAL;
    }
    if (o->validate && (rc = o->validate(&num, err, errlen)) != 0)
        return rc;
    *(int64_t *)field = num;
    return 0;
}

int allot_config_set(const struct allot_config_option *opts, size_t n, void *values,
                     const char *name, const char *text, char *err, size_t errlen)
{
    const struct allot_config_option *o = find(opts, n, name);

    if (!o) {
        allot_fmt(err, errlen, "unknown option \"%s\"", name);
        return ALLOT_ENOENT;
    }
    return set_opt(o, values, text, err, errlen);
}

int allot_config_defaults(const struct allot_config_option *opts, size_t n, void *values, char *err,
                          size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        char *field = (char *)values + opts[i].offset;
        int rc;
        if (!opts[i].def) {
            if (opts[i].type == ALLOT_CFG_STRING || opts[i].type == ALLOT_CFG_ENUM) {
                allot_free(*(char **)field);
                *(char **)field = NULL;
            } else if (opts[i].type == ALLOT_CFG_BOOL) {
                *(bool *)field = false;
            } else {
                *(int64_t *)field = 0;
            }
            continue;
        }
        rc = set_opt(&opts[i], values, opts[i].def, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

/* Trims spaces at both ends in place; returns the start. */
static char *trim(char *s)
{
    char *e;

    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
        *--e = '\0';
    return s;
}

/* Splits one config line into name and value (in place). Returns 1 for an
 * option, 0 for a blank or comment line, -1 when malformed. */
static int split_line(char *line, char **name, char **value)
{
    char *s = trim(line), *v;

    if (*s == '\0' || *s == '#')
        return 0;
    *name = s;
    v = s + strcspn(s, " \t=");
    if (*v == '\0')
        return -1;
    if (*v == '=') {
        *v++ = '\0';
    } else {
        *v++ = '\0';
        v = trim(v);
        if (*v == '=')
            v++;
    }
    *name = trim(*name);
    v = trim(v);
    if (*v == '"') {
        /* a quoted value ends at its closing quote; a comment may follow */
        char *close = strchr(v + 1, '"'), *rest;

        if (!close)
            return -1;
        *close = '\0';
        rest = close + 1;
        rest += strspn(rest, " \t");
        if (*rest != '\0' && *rest != '#')
            return -1;
        *value = v + 1; /* "" is an empty value */
        return **name ? 1 : -1;
    } else {
        /* an unquoted value ends at a comment */
        char *hash = strstr(v, " #");
        if (hash)
            *hash = '\0';
        v = trim(v);
    }
    if (!**name || !*v)
        return -1;
    *value = v;
    return 1;
}

int allot_config_load_file(const struct allot_config_option *opts, size_t n, void *values,
                           const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int lineno = 0, rc = 0;

    if (!f) {
        allot_fmt(err, errlen, "%s: %s", path, strerror(errno));
        return ALLOT_EIO;
    }
    while (rc == 0 && fgets(line, sizeof(line), f)) {
        char *name, *value, msg[512];
        int kind;
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            allot_fmt(err, errlen, "%s:%d: line longer than %zu bytes", path, lineno,
                      sizeof(line) - 2);
            rc = ALLOT_EINVAL;
            break;
        }
        kind = split_line(line, &name, &value);
        if (kind == 0)
            continue;
        if (kind < 0) {
            allot_fmt(err, errlen, "%s:%d: expected \"name value\"", path, lineno);
            rc = ALLOT_EINVAL;
            break;
        }
        rc = allot_config_set(opts, n, values, name, value, msg, sizeof(msg));
        if (rc)
            allot_fmt(err, errlen, "%s:%d: %s", path, lineno, msg);
    }
    if (rc == 0 && ferror(f)) {
        allot_fmt(err, errlen, "%s: read error", path);
        rc = ALLOT_EIO;
    }
    fclose(f);
    return rc;
}

int allot_config_parse_args(const struct allot_config_option *opts, size_t n, void *values,
                            int argc, char **argv, int *i, char *err, size_t errlen)
{
    while (*i < argc) {
        const char *a = argv[*i];
        const struct allot_config_option *o;
        char name[128];
        const char *eq, *value;
        int rc;
        if (strcmp(a, "--") == 0) {
            (*i)++;
            return 0;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0')
            return 0;
        a += 2;
        eq = strchr(a, '=');
        allot_fmt(name, sizeof(name), "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        o = find(opts, n, name);
        if (!o && !eq && strncmp(name, "no-", 3) == 0 && (o = find(opts, n, name + 3)) != NULL &&
            o->type == ALLOT_CFG_BOOL) {
            rc = set_opt(o, values, "no", err, errlen);
            if (rc)
                return rc;
            (*i)++;
            continue;
        }
        if (!o) {
            allot_fmt(err, errlen, "unknown option --%s", name);
            return ALLOT_ENOENT;
        }
        if (eq) {
            value = eq + 1;
            (*i)++;
        } else if (o->type == ALLOT_CFG_BOOL) {
            value = "yes";
            (*i)++;
        } else if (*i + 1 < argc) {
            value = argv[*i + 1];
            *i += 2;
        } else {
            allot_fmt(err, errlen, "option --%s needs a value (%s)", name, type_hint(o));
            return ALLOT_EINVAL;
        }
        rc = set_opt(o, values, value, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

/* The file named by `--config FILE` or `--config=FILE` in argv[i..] (up to
 * `--`), or NULL. */
static const char *config_arg(int argc, char **argv, int i)
{
    const char *file = NULL;

    for (int k = i; k < argc && argv[k] && strcmp(argv[k], "--") != 0; k++) {
        if (!strcmp(argv[k], "--config") && k + 1 < argc)
            file = argv[k + 1];
        else if (!strncmp(argv[k], "--config=", 9))
            file = argv[k] + 9;
    }
    return file;
}

int allot_config_load_args(const struct allot_config_option *opts, size_t n, void *values, int argc,
                           char **argv, int *i, char *err, size_t errlen)
{
    const char *file = find(opts, n, "config") ? config_arg(argc, argv, *i) : NULL;
    int rc;

    if (file && (rc = allot_config_load_file(opts, n, values, file, err, errlen)) != 0)
        return rc;
    return allot_config_parse_args(opts, n, values, argc, argv, i, err, errlen);
}

static void print_range(const struct allot_config_option *o, FILE *out)
{
    if (o->type == ALLOT_CFG_ENUM && o->choices) {
        fputs("one of:", out);
        for (int i = 0; o->choices[i]; i++)
            fprintf(out, " %s", o->choices[i]);
    } else if (o->min || o->max) {
        fprintf(out, "%" PRId64 "..%" PRId64, o->min, o->max);
        if (o->type == ALLOT_CFG_SIZE)
            fputs(" bytes", out);
        else if (o->type == ALLOT_CFG_DURATION)
            fputs(" ms", out);
    } else {
        fputs(type_hint(o), out);
    }
}

void allot_config_help(const struct allot_config_option *opts, size_t n, FILE *out)
{
    for (size_t i = 0; i < n; i++) {
        const struct allot_config_option *o = &opts[i];
        char flag[160];
        allot_fmt(flag, sizeof(flag), "--%s%s%s", o->type == ALLOT_CFG_BOOL ? "[no-]" : "", o->name,
                  o->type == ALLOT_CFG_BOOL ? "" : " VALUE");
        fprintf(out, "  %-30s %s (", flag, o->help);
        if (o->type == ALLOT_CFG_BOOL)
            fprintf(out, "--%s=yes or no also", o->name);
        else
            print_range(o, out);
        if (o->def)
            fprintf(out, "; default %s", o->def);
        fputs(")\n", out);
    }
}

void allot_config_example(const struct allot_config_option *opts, size_t n, const char *title,
                          FILE *out)
{
    fprintf(out, "# %s\n#\n", title);
    fputs("# Syntax: one \"name value\" per line; # starts a comment. Sizes take\n"
          "# K/M/G/T suffixes, durations ms/s/m/h (a bare number is seconds).\n"
          "# Every option is listed with its default, commented out.\n",
          out);
    for (size_t i = 0; i < n; i++) {
        const struct allot_config_option *o = &opts[i];
        const char *h = o->help;
        fputs("\n", out);
        /* wrap the help at about 72 columns */
        while (*h) {
            size_t len = strlen(h), cut = len;
            if (len > 72) {
                cut = 72;
                while (cut > 0 && h[cut] != ' ')
                    cut--;
                if (cut == 0)
                    cut = 72;
            }
            fprintf(out, "# %.*s\n", (int)cut, h);
            h += cut;
            while (*h == ' ')
                h++;
        }
        fputs("# Values: ", out);
        print_range(o, out);
        fprintf(out, ". %s.\n", o->runtime ? "Reloaded on SIGHUP" : "Needs a restart");
        if (o->def && strpbrk(o->def, " \t#"))
            fprintf(out, "#%s \"%s\"\n", o->name, o->def);
        else
            fprintf(out, "#%s %s\n", o->name, o->def ? o->def : "\"\"");
    }
}

void allot_config_free(const struct allot_config_option *opts, size_t n, void *values)
{
    for (size_t i = 0; i < n; i++) {
        if (opts[i].type == ALLOT_CFG_STRING || opts[i].type == ALLOT_CFG_ENUM) {
            char **field = (char **)((char *)values + opts[i].offset);
            allot_free(*field);
            *field = NULL;
        }
    }
}

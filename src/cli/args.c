/*
 * Option tables of the verbs (see cli.h): one table per verb drives both
 * the parsing of its arguments and its `--help`. Accepted forms:
 * `--name VALUE`, `--name=VALUE`, `-x VALUE`, `-xVALUE`, flags `--name` /
 * `-x`, and `--` after which everything is kept as is (submit's command).
 * Global options (conf.c) are accepted anywhere among a verb's arguments.
 * Values are borrowed from argv.
 */
#include "cli.h"
#include "philly.h"

#include "allot/cluster.h"
#include "allot/common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cli_error(const char *code, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "allot: %s: ", code);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;

    fputs("allot: usage: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_USAGE;
}

static int find_opt(const struct cli_opt *opts, const char *name, size_t len, char short_name)
{
    for (int i = 0; opts[i].name; i++) {
        if (short_name ? opts[i].short_name == short_name
                       : strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len))
            return i;
    }
    return -1;
}

static int push(const char ***arr, size_t *n, const char *v)
{
    size_t cap = *n;
    void *p = *arr;

    /* grow by one each time: argument lists are short */
    if (allot_grow(&p, &cap, *n + 1, sizeof(char *)) < 0)
        return ALLOT_ENOMEM;
    *arr = p;
    (*arr)[(*n)++] = v;
    return 0;
}

void args_help(const struct cli_opt *opts, const struct cli_usage *u, FILE *out)
{
    fprintf(out, "usage: allot %s %s\n\n%s\n", u->verb, u->synopsis, u->summary);
    if (opts[0].name) {
        fputs("\nOptions:\n", out);
        for (int i = 0; opts[i].name; i++) {
            char left[64];

            if (opts[i].short_name)
                allot_fmt(left, sizeof(left), "-%c, --%s%s%s", opts[i].short_name, opts[i].name,
                          opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
            else
                allot_fmt(left, sizeof(left), "    --%s%s%s", opts[i].name, opts[i].arg ? " " : "",
                          opts[i].arg ? opts[i].arg : "");
            fprintf(out, "  %-28s %s\n", left, opts[i].help);
        }
    }
    fputs("\nGlobal options (any verb):\n", out);
    conf_help(out);
}

/* Takes the value of option `name` from `attached` or the next argument. */
static int take_value(const char *name, const char *attached, int argc, char **argv, int *i,
                      const char **val)
{
    if (attached) {
        *val = attached;
        return 0;
    }
    if (*i + 1 >= argc)
        return cli_usage_error("option --%s needs a value", name);
    *val = argv[++*i];
    return 0;
}

static int parse(struct cli *c, const struct cli_opt *opts, const struct cli_usage *u, int argc,
                 char **argv, struct cli_args *a, bool operand_ends)
{
    size_t n_opts = 0;
    int rc = CLI_OK;

    memset(a, 0, sizeof(*a));
    while (opts[n_opts].name)
        n_opts++;
    if (ALLOT_NEVER(n_opts > CLI_MAX_OPTS))
        return CLI_USAGE;
    a->opts = opts;
    a->n_opts = n_opts;
    for (int i = 0; i < argc && rc == CLI_OK; i++) {
        const char *arg = argv[i], *attached = NULL, *val = NULL, *name;
        char shortbuf[2] = {0};
        size_t len;
        int k;

        if (!strcmp(arg, "--")) {
            a->rest = argv + i + 1;
            a->n_rest = argc - i - 1;
            break;
        }
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            args_help(opts, u, stdout);
            rc = CLI_HELP;
            break;
        }
        if (arg[0] != '-' || !arg[1]) { /* positional ("-" alone too: stdin) */
            if (push(&a->pos, &a->n_pos, arg) < 0)
                rc = cli_usage_error("out of memory");
            if (operand_ends && rc == CLI_OK) { /* the rest is its arguments */
                int from = i + 1 < argc && !strcmp(argv[i + 1], "--") ? i + 2 : i + 1;
                a->rest = argv + from;
                a->n_rest = argc - from;
                break;
            }
            continue;
        }
        if (arg[1] == '-') {
            name = arg + 2;
            const char *eq = strchr(name, '=');
            len = eq ? (size_t)(eq - name) : strlen(name);
            attached = eq ? eq + 1 : NULL;
            k = find_opt(opts, name, len, 0);
        } else {
            shortbuf[0] = arg[1];
            name = shortbuf;
            len = 1;
            attached = arg[2] ? arg + 2 : NULL;
            k = find_opt(opts, "", 0, arg[1]);
        }
        if (k >= 0) {
            if (opts[k].arg)
                rc = take_value(opts[k].name, attached, argc, argv, &i, &val);
            else if (attached)
                rc = cli_usage_error("option --%s takes no value", opts[k].name);
            else
                val = "";
            if (rc == CLI_OK && push(&a->vals[k], &a->n_vals[k], val) < 0)
                rc = cli_usage_error("out of memory");
            continue;
        }
        /* a global option? */
        char gname[64];
        const char *lname;
        bool needs;

        allot_fmt(gname, sizeof(gname), "%.*s", (int)len, name);
        if (!conf_is_global(arg[1] == '-' ? gname : NULL, arg[1] == '-' ? 0 : arg[1], &needs,
                            &lname)) {
            rc = cli_usage_error("unknown option %s%.*s for `allot %s` (see allot %s --help)",
                                 arg[1] == '-' ? "--" : "-", (int)len, name, u->verb, u->verb);
            break;
        }
        if (needs)
            rc = take_value(lname, attached, argc, argv, &i, &val);
        else if (attached)
            rc = cli_usage_error("option --%s takes no value", lname);
        if (rc == CLI_OK && conf_set(&c->conf, lname, needs ? val : "") < 0)
            rc = CLI_USAGE;
    }
    if (rc == CLI_OK) {
        const char *o = c->conf.output;

        /* copied by conf_set: out of the process list (allot top, logs -f
         * run for long on shared login nodes) */
        allot_argv_hide(argc, argv, "--token");
        c->fmt = !strcmp(o, "json")   ? CLI_FMT_JSON
                 : !strcmp(o, "yaml") ? CLI_FMT_YAML
                 : !strcmp(o, "csv")  ? CLI_FMT_CSV
                 : !strcmp(o, "html") ? CLI_FMT_HTML
                                      : CLI_FMT_TABLE;
        /* csv and html only where a verb prints them; the message lists
         * what this verb prints */
        bool html_ok = !strcmp(u->verb, "invoice");
        bool csv_ok = html_ok || !strcmp(u->verb, "usage");
        if ((c->fmt == CLI_FMT_CSV && !csv_ok) || (c->fmt == CLI_FMT_HTML && !html_ok))
            rc = cli_usage_error("-o %s: allot %s prints %s", o, u->verb,
                                 html_ok  ? "table, json, yaml, csv or html"
                                 : csv_ok ? "table, json, yaml or csv"
                                          : "table, json or yaml");
    }
    if (rc != CLI_OK)
        args_free(a);
    return rc;
}

int args_merge(struct cli_args *a, const struct cli_args *from)
{
    for (size_t k = 0; k < a->n_opts && k < from->n_opts; k++) {
        if (a->n_vals[k]) /* given on the command line: that wins */
            continue;
        for (size_t i = 0; i < from->n_vals[k]; i++)
            if (push(&a->vals[k], &a->n_vals[k], from->vals[k][i]) < 0)
                return cli_usage_error("out of memory");
    }
    return CLI_OK;
}

int args_parse(struct cli *c, const struct cli_opt *opts, const struct cli_usage *u, int argc,
               char **argv, struct cli_args *a)
{
    return parse(c, opts, u, argc, argv, a, false);
}

int args_parse_operand(struct cli *c, const struct cli_opt *opts, const struct cli_usage *u,
                       int argc, char **argv, struct cli_args *a)
{
    return parse(c, opts, u, argc, argv, a, true);
}

/* A value with a '/' names a file of host lists (as sbatch -w/-x): the
 * words of its text (at most 1 MiB), each one expanded as args_hosts. */
static int hosts_file(json_t *list, json_t *seen, const char *path, const char *where)
{
    FILE *f = fopen(path, "rb");
    char *text = allot_malloc((1 << 20) + 1), *save = NULL;
    size_t n = 0;
    int rc = CLI_OK;

    if (!f || !text) {
        rc = cli_usage_error("%s: cannot read the node file %s: %s", where, path,
                             f ? "out of memory" : strerror(errno));
    } else {
        n = fread(text, 1, 1 << 20, f);
        text[n] = '\0';
        if (ferror(f) || !feof(f))
            rc = cli_usage_error("%s: the node file %s %s", where, path,
                                 ferror(f) ? "could not be read" : "is over 1 MiB");
    }
    for (char *w = rc == CLI_OK ? strtok_r(text, " \t\r\n", &save) : NULL; w && rc == CLI_OK;
         w = strtok_r(NULL, " \t\r\n", &save))
        rc = args_hosts(list, seen, w, where);
    if (rc == CLI_OK && !json_array_size(list))
        rc = cli_usage_error("%s: the node file %s names no node", where, path);
    if (f)
        fclose(f);
    allot_free(text);
    return rc;
}

int args_hosts(json_t *list, json_t *seen, const char *s, const char *where)
{
    char **names, err[256];
    int k, rc;

    if (strchr(s, '/'))
        return hosts_file(list, seen, s, where);
    rc = allot_hostlist_expand(s, &names, &k, err, sizeof(err));
    if (rc)
        return cli_usage_error("%s: %s", where, err);
    for (int j = 0; j < k; j++) {
        if (json_object_get(seen, names[j]))
            continue; /* given before */
        json_object_set(seen, names[j], json_true());
        json_array_append_new(list, json_string(names[j]));
    }
    allot_hostlist_free(names, k);
    if (json_array_size(list) > ALLOT_HOSTLIST_MAX)
        return cli_usage_error("%s: more than %d nodes in all", where, ALLOT_HOSTLIST_MAX);
    return CLI_OK;
}

void args_free(struct cli_args *a)
{
    for (size_t i = 0; i < a->n_opts; i++)
        allot_free(a->vals[i]);
    allot_free(a->pos);
    memset(a->vals, 0, sizeof(a->vals));
    a->pos = NULL;
    a->n_pos = 0;
}

static int index_of(const struct cli_args *a, const char *name)
{
    for (size_t i = 0; i < a->n_opts; i++)
        if (!strcmp(a->opts[i].name, name))
            return (int)i;
    return -1;
}

void args_drop(struct cli_args *a, const char *name)
{
    int k = index_of(a, name);

    if (k >= 0)
        a->n_vals[k] = 0;
}

const char *args_get(const struct cli_args *a, const char *name)
{
    int k = index_of(a, name);

    return k >= 0 && a->n_vals[k] ? a->vals[k][a->n_vals[k] - 1] : NULL;
}

bool args_has(const struct cli_args *a, const char *name)
{
    int k = index_of(a, name);

    return k >= 0 && a->n_vals[k] > 0;
}

const char *const *args_all(const struct cli_args *a, const char *name, size_t *n)
{
    int k = index_of(a, name);

    *n = k >= 0 ? a->n_vals[k] : 0;
    return k >= 0 ? a->vals[k] : NULL;
}

/* "--" before an option's name; nothing before a description of a
 * positional argument ("job id"). */
static const char *dashes(const char *opt)
{
    return strchr(opt, ' ') ? "" : "--";
}

int args_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return cli_usage_error("%s%s: \"%s\" is not an integer in %lld..%lld", dashes(opt), opt, s,
                               (long long)lo, (long long)hi);
    *out = v;
    return CLI_OK;
}

int args_num(const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < lo || v > hi)
        return cli_usage_error("%s%s: \"%s\" is not a number in %g..%g", dashes(opt), opt, s, lo,
                               hi);
    *out = v;
    return CLI_OK;
}

int args_mib(const char *opt, const char *s, int64_t *out)
{
    static const struct {
        const char *suffix;
        int shift; /* of KiB: K=0, M=10, G=20, T=30 */
    } units[] = {{"", 10},    {"K", 0},   {"KI", 0},   {"KB", 0},  {"KIB", 0}, {"M", 10},
                 {"MI", 10},  {"MB", 10}, {"MIB", 10}, {"G", 20},  {"GI", 20}, {"GB", 20},
                 {"GIB", 20}, {"T", 30},  {"TI", 30},  {"TB", 30}, {"TIB", 30}};
    char *end, up[8];
    double v;
    size_t i, n;

    errno = 0;
    v = strtod(s, &end);
    n = strlen(end);
    if (!*s || s == end || errno || !isfinite(v) || v < 0 || n >= sizeof(up))
        goto bad;
    for (i = 0; i <= n; i++)
        up[i] = (char)(end[i] >= 'a' && end[i] <= 'z' ? end[i] - 32 : end[i]);
    for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (!strcmp(units[i].suffix, up)) {
            double kib = v * (double)(INT64_C(1) << units[i].shift);
            double mib = ceil(kib / 1024.0);
            if (mib > (double)(INT64_C(1) << 40))
                goto bad;
            *out = (int64_t)mib;
            return CLI_OK;
        }
    }
bad:
    return cli_usage_error("%s%s: \"%s\" is not a size (a number of MiB, or with K, M, G, T)",
                           dashes(opt), opt, s);
}

/* Digits only, at most 9 of them, into *v; false if not. */
static bool digits(const char *s, size_t n, int64_t *v)
{
    if (!n || n > 9)
        return false;
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        *v = *v * 10 + (s[i] - '0');
    }
    return true;
}

/* Slurm's time forms: MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS. */
static bool slurm_duration(const char *s, int64_t *out)
{
    const char *dash = strchr(s, '-'), *p = s;
    int64_t days = 0, f[3], n = 0;

    if (dash) {
        if (!digits(s, (size_t)(dash - s), &days))
            return false;
        p = dash + 1;
    }
    for (;;) {
        const char *c = strchr(p, ':');
        size_t len = c ? (size_t)(c - p) : strlen(p);

        if (n == 3 || !digits(p, len, &f[n]) || (n > 0 && f[n] > 59))
            return false;
        n++;
        if (!c)
            break;
        p = c + 1;
    }
    if (dash) { /* D-HH[:MM[:SS]] */
        if (f[0] > 23)
            return false;
        *out = days * 86400 + f[0] * 3600 + (n > 1 ? f[1] * 60 : 0) + (n > 2 ? f[2] : 0);
    } else if (n == 2) { /* MM:SS */
        *out = f[0] * 60 + f[1];
    } else if (n == 3) { /* HH:MM:SS */
        *out = f[0] * 3600 + f[1] * 60 + f[2];
    } else {
        return false;
    }
    return *out <= INT64_C(1) << 40; /* as the numbers' bound */
}

int args_seconds(const char *opt, const char *s, int64_t *out)
{
    char *end;
    double v;
    int64_t mult = 1;

    if (*s != '-' && strpbrk(s, ":-")) {
        if (slurm_duration(s, out))
            return CLI_OK;
        goto bad;
    }
    errno = 0;
    v = strtod(s, &end);
    if (!*s || s == end || errno || !isfinite(v) || v < 0)
        goto bad;
    if (!strcmp(end, "m"))
        mult = 60;
    else if (!strcmp(end, "h"))
        mult = 3600;
    else if (!strcmp(end, "d"))
        mult = 86400;
    else if (*end && strcmp(end, "s") != 0)
        goto bad;
    if (v * (double)mult > (double)(INT64_C(1) << 40))
        goto bad;
    *out = (int64_t)ceil(v * (double)mult);
    return CLI_OK;
bad:
    return cli_usage_error("%s%s: \"%s\" is not a duration (seconds, or with s, m, h, d; or "
                           "Slurm's MM:SS, HH:MM:SS, D-HH[:MM[:SS]])",
                           dashes(opt), opt, s);
}

/* *out: the fields of t read as local time, or as UTC; false where a
 * field is out of range (02-31, 24:00). */
static bool make_time(const struct tm *t, bool utc, int64_t *out)
{
    struct tm l = *t;
    time_t v;

    if (t->tm_mon < 0 || t->tm_mon > 11 || t->tm_mday < 1 || t->tm_hour > 23 || t->tm_min > 59 ||
        t->tm_sec > 59 || t->tm_hour < 0 || t->tm_min < 0 || t->tm_sec < 0)
        return false;
    if (utc) { /* the one UTC date rule (the Philly trace's): days that exist, 1970..9999 */
        char text[40];
        allot_fmt(text, sizeof(text), "%04d-%02d-%02d %02d:%02d:%02d", t->tm_year + 1900,
                  t->tm_mon + 1, t->tm_mday, t->tm_hour, t->tm_min, t->tm_sec);
        return philly_parse_time(text, out) == 0;
    }
    l.tm_isdst = -1;
    v = mktime(&l);
    if (v == (time_t)-1 || l.tm_year != t->tm_year || l.tm_mon != t->tm_mon ||
        l.tm_mday != t->tm_mday)
        return false;
    *out = (int64_t)v;
    return true;
}

int args_begin(const char *opt, const char *s, int64_t now, int64_t *out)
{
    struct tm t = {0};
    time_t tn = (time_t)now;
    int64_t d = 0, f[6] = {0};
    size_t n = strlen(s), len = n;
    bool utc = n && s[n - 1] == 'Z';
    const char *p = s;

    if (!strcmp(s, "now")) {
        *out = now;
        return CLI_OK;
    }
    if (!strncmp(s, "now+", 4)) {
        if (args_seconds(opt, s + 4, &d) != CLI_OK)
            return CLI_USAGE;
        *out = now + d;
        return CLI_OK;
    }
    len -= utc;
    if (len >= 10 && s[4] == '-' && s[7] == '-') {
        /* YYYY-MM-DD[THH:MM[:SS]][Z] */
        if (!digits(p, 4, &f[0]) || !digits(p + 5, 2, &f[1]) || !digits(p + 8, 2, &f[2]))
            goto bad;
        p += 10;
        len -= 10;
        if (len &&
            (*p != 'T' || (len != 6 && len != 9) || p[3] != ':' || !digits(p + 1, 2, &f[3]) ||
             !digits(p + 4, 2, &f[4]) || (len == 9 && (p[6] != ':' || !digits(p + 7, 2, &f[5])))))
            goto bad;
        t = (struct tm){.tm_year = (int)f[0] - 1900,
                        .tm_mon = (int)f[1] - 1,
                        .tm_mday = (int)f[2],
                        .tm_hour = (int)f[3],
                        .tm_min = (int)f[4],
                        .tm_sec = (int)f[5]};
        if (f[0] < 1970 || !make_time(&t, utc, out))
            goto bad;
        return CLI_OK;
    }
    /* HH:MM[:SS][Z]: the next time the clock shows it */
    if ((len != 5 && len != 8) || p[2] != ':' || !digits(p, 2, &f[3]) || !digits(p + 3, 2, &f[4]) ||
        (len == 8 && (p[5] != ':' || !digits(p + 6, 2, &f[5]))))
        goto bad;
    if (!(utc ? gmtime_r(&tn, &t) : localtime_r(&tn, &t)))
        goto bad;
    for (int day = 0; day < 2; day++) { /* today, else tomorrow */
        struct tm c = t;
        c.tm_hour = (int)f[3];
        c.tm_min = (int)f[4];
        c.tm_sec = (int)f[5];
        if (day) { /* the calendar's next day: today's noon and 24 h, clear of clock changes */
            struct tm noon = t, nx;
            int64_t at;
            noon.tm_hour = 12;
            noon.tm_min = noon.tm_sec = 0;
            if (!make_time(&noon, utc, &at))
                goto bad;
            time_t next = (time_t)(at + 86400);
            if (!(utc ? gmtime_r(&next, &nx) : localtime_r(&next, &nx)))
                goto bad;
            c.tm_year = nx.tm_year;
            c.tm_mon = nx.tm_mon;
            c.tm_mday = nx.tm_mday;
        }
        if (!make_time(&c, utc, out))
            goto bad;
        if (*out > now)
            return CLI_OK;
    }
bad:
    return cli_usage_error("%s%s: \"%s\" is not a time (now+DURATION, YYYY-MM-DD[THH:MM[:SS]], "
                           "HH:MM[:SS]; local time, or UTC with a trailing Z)",
                           dashes(opt), opt, s);
}

int args_constraint(const char *const *v, size_t n, char **buf, struct allot_label *out)
{
    char err[256];
    size_t len = 1;
    int k;

    *buf = NULL;
    for (size_t i = 0; i < n; i++) {
        /* sbatch's operators would be taken for a label's text, and never match */
        if (strpbrk(v[i], "&|"))
            return cli_usage_error("--constraint: \"%s\": labels are separated by ',' (all must "
                                   "hold); Slurm's & and | are not taken",
                                   v[i]),
                   -CLI_USAGE;
        len += strlen(v[i]) + 1;
    }
    if (!n)
        return 0;
    if (!(*buf = calloc(1, len)))
        return cli_usage_error("--constraint: out of memory"), -CLI_USAGE;
    for (size_t i = 0, at = 0; i < n; i++) { /* one list: a label given twice is an error */
        size_t vl = strlen(v[i]);
        memcpy(*buf + at, v[i], vl);
        at += vl;
        (*buf)[at++] = i + 1 < n ? ',' : '\0';
    }
    k = allot_labels_parse(*buf, out, ALLOT_MAX_SELECT, err, sizeof(err));
    if (k < 0)
        return cli_usage_error("--constraint: %s", err), -CLI_USAGE;
    return k;
}

/*
 * Batch scripts for allot submit/run SCRIPT (sbatch job.sh): the script's
 * text, sent with the job (the node needs no shared file system for it),
 * and its directive lines, `#ALLOT` with allot's own options and
 * `#SBATCH` with Slurm's, taken where the command line does not give the
 * same option. As sbatch, directives are read up to the first line that
 * is neither blank nor a comment.
 */
#include "cli.h"

#include "allot/common.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCRIPT_MAX  (64 * 1024) /* allotd's JOBSPEC_SCRIPT_MAX */
#define SCRIPT_ARGS 512         /* directive words */

/* What an #SBATCH option becomes. */
enum how {
    AS_IS,   /* the allot option, the same value */
    MINUTES, /* --time: a bare number is minutes */
    GRES,    /* --gres=gpu[:TYPE]:N */
    NODES,   /* --nodes N: N tasks (sharing nodes where they fit together) */
    AMP,     /* --constraint a&b: labels separated by ',' */
    ANY_OF,  /* --nodelist: allot's, any of the nodes (Slurm takes all), said */
    EXPORT,  /* --export=VAR[=V],...: --env */
    FLAG,    /* takes no value */
    IGNORED, /* said, and left out */
};

static const struct sbatch_opt {
    const char *name;
    char letter;
    const char *to; /* allot's option; NULL: IGNORED, with why */
    enum how how;
} sbatch_opts[] = {
    {"job-name", 'J', "--name", AS_IS},
    {"time", 't', "--time-limit", MINUTES},
    {"cpus-per-task", 'c', "--cpus", AS_IS},
    {"mem", 0, "--mem", AS_IS},
    {"cpus-per-gpu", 0, "--cpus-per-gpu", AS_IS},
    {"mem-per-gpu", 0, "--mem-per-gpu", AS_IS},
    {"mem-per-cpu", 0, "--mem-per-cpu", AS_IS},
    {"gres", 0, "--gpus", GRES},
    {"gpus-per-task", 0, "--gpus", AS_IS},
    {"gpus-per-node", 0, "--gpus", AS_IS},
    {"gpus", 'G', "--gpus", AS_IS},
    {"nodes", 'N', "--tasks", NODES},
    {"array", 'a', "--array", AS_IS},
    {"dependency", 'd', "--dependency", AS_IS},
    {"nodelist", 'w', "--nodelist", ANY_OF},
    {"exclude", 'x', "--exclude", AS_IS},
    {"constraint", 'C', "--constraint", AMP},
    {"begin", 'b', "--begin", AS_IS},
    {"hold", 'H', "--hold", FLAG},
    {"signal", 0, "--signal", AS_IS},
    {"chdir", 'D', "--workdir", AS_IS},
    {"no-requeue", 0, "--no-requeue", FLAG},
    {"requeue", 0, "", FLAG}, /* allot's default */
    {"account", 'A', "--tenant", AS_IS},
    {"export", 0, "--env", EXPORT},
    {"output", 'o', "allot logs ID shows the output", IGNORED},
    {"error", 'e', "allot logs ID shows the output", IGNORED},
    {"partition", 'p', "tenants, not partitions: -A/--account or allot's -t", IGNORED},
    {"qos", 'q', "allot's priority classes (-p) and --qos are its own", IGNORED},
    {"ntasks", 'n', "the script runs once per task: -N gives the tasks", IGNORED},
    {"ntasks-per-node", 0, "the script runs once per task: -N gives the tasks", IGNORED},
    {"exclusive", 0, "a tenant's isolation gives whole nodes", IGNORED},
    {"mail-type", 0, "allot sends no mail: allot events -w follows a job", IGNORED},
    {"mail-user", 0, "allot sends no mail: allot events -w follows a job", IGNORED},
};

/* Says what is left out, naming the line. */
static void warn(const char *path, int line, const char *opt, const char *why)
{
    fprintf(stderr, "allot: %s:%d: #SBATCH %s: not taken (%s)\n", path, line, opt, why);
}

/* Splits s (modified in place) into words at blanks, '...' and "..."
 * grouping, a word starting with '#' ending the line. Returns the number
 * of words, or -1 (an unclosed quote, too many words). */
static int split(char *s, char **w, int max)
{
    int n = 0;
    char *o = s;

    while (*s) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s || *s == '#')
            break;
        if (n == max)
            return -1;
        w[n++] = o;
        while (*s && *s != ' ' && *s != '\t') {
            if (*s == '\'' || *s == '"') {
                char q = *s++;
                while (*s && *s != q)
                    *o++ = *s++;
                if (!*s)
                    return -1;
                s++;
            } else {
                *o++ = *s++;
            }
        }
        if (*s)
            s++;
        *o++ = '\0';
    }
    return n;
}

struct words {
    char **v;
    int n, cap;
};

/* Appends a copy of w (owned by ws). 0 or -1 (out of memory, too many). */
static int add(struct words *ws, const char *w)
{
    if (ws->n == SCRIPT_ARGS || !(ws->v[ws->n] = strdup(w)))
        return -1;
    ws->n++;
    return 0;
}

/* --gres=gpu[:TYPE][:N][,other...]: --gpus N (and --gpu-model TYPE). */
static int gres(struct words *ws, const char *path, int line, const char *v)
{
    char buf[256], *save = NULL;

    allot_strlcpy(buf, v, sizeof(buf));
    for (char *g = strtok_r(buf, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
        const char *type = NULL, *n = "1";
        char *p = strchr(g, ':');
        if (strncmp(g, "gpu", 3) != 0 || (g[3] && g[3] != ':')) {
            warn(path, line, "--gres", "only gpu resources are known");
            continue;
        }
        if (p) {
            char *q = strchr(p + 1, ':');
            if (q) {
                *q = '\0';
                type = p + 1, n = q + 1;
            } else if (isdigit((unsigned char)p[1])) {
                n = p + 1;
            } else {
                type = p + 1;
            }
        }
        if (add(ws, "--gpus") || add(ws, n) || (type && (add(ws, "--gpu-model") || add(ws, type))))
            return -1;
    }
    return 0;
}

/* --export=ALL|NONE|VAR[=V],...: --env VAR=V (a bare VAR: its value here). */
static int export(struct words *ws, const char *path, int line, const char *v)
{
    char buf[4096], kv[4096], *save = NULL;

    allot_strlcpy(buf, v, sizeof(buf));
    for (char *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        if (!strcmp(e, "ALL") || !strcmp(e, "NONE")) {
            if (!strcmp(e, "ALL"))
                warn(path, line, "--export=ALL",
                     "nothing of your environment is passed: name the variables");
            continue;
        }
        if (!strchr(e, '='))
            allot_fmt(kv, sizeof(kv), "%s=%s", e, getenv(e) ? getenv(e) : "");
        else
            allot_strlcpy(kv, e, sizeof(kv));
        if (add(ws, "--env") || add(ws, kv))
            return -1;
    }
    return 0;
}

/* One #SBATCH line's words (w[0..n)) as allot options into ws, NODES ones
 * into first (taken before the others, so that a later --tasks wins).
 * Returns CLI_OK or CLI_USAGE (printed). */
static int translate(struct words *ws, struct words *first, const char *path, int line, char **w,
                     int n)
{
    for (int i = 0; i < n; i++) {
        const char *arg = w[i], *val = NULL, *eq;
        const struct sbatch_opt *o = NULL;
        char opt[64], minutes[64];
        size_t k;

        if (arg[0] != '-' || !arg[1])
            return cli_usage_error("%s:%d: #SBATCH: \"%s\" is not an option", path, line, arg);
        eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
        for (k = 0; k < sizeof(sbatch_opts) / sizeof(sbatch_opts[0]) && !o; k++) {
            const struct sbatch_opt *s = &sbatch_opts[k];
            size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
            if (arg[1] == '-' ? strlen(s->name) == len && !memcmp(arg + 2, s->name, len)
                              : s->letter && arg[1] == s->letter)
                o = s;
        }
        allot_fmt(opt, sizeof(opt), "%.*s", eq ? (int)(eq - arg) : arg[1] == '-' ? 60 : 2, arg);
        if (!o) {
            warn(path, line, opt, "not an option allot knows");
            if (!eq && arg[1] == '-' && i + 1 < n && w[i + 1][0] != '-')
                i++; /* its value, most likely */
            continue;
        }
        if (o->how != FLAG) {
            val = eq ? eq + 1 : arg[1] != '-' && arg[2] ? arg + 2 : i + 1 < n ? w[++i] : NULL;
            if (!val)
                return cli_usage_error("%s:%d: #SBATCH %s needs a value", path, line, opt);
        }
        int rc = 0;
        switch (o->how) {
        case IGNORED:
            warn(path, line, opt, o->to);
            break;
        case FLAG:
            rc = *o->to ? add(ws, o->to) : 0;
            break;
        case MINUTES: /* Slurm reads a bare number as minutes, allot as seconds */
            allot_fmt(minutes, sizeof(minutes), "%s%s", val,
                      strspn(val, "0123456789") == strlen(val) ? "m" : "");
            rc = add(ws, o->to) || add(ws, minutes);
            break;
        case GRES:
            rc = gres(ws, path, line, val);
            break;
        case EXPORT:
            rc = export(ws, path, line, val);
            break;
        case NODES:
            rc = add(first, o->to) || add(first, val);
            break;
        case AMP: { /* Slurm's AND; its OR is refused by --constraint */
            char c[256];
            allot_strlcpy(c, val, sizeof(c));
            for (char *p = c; *p; p++)
                *p = *p == '&' ? ',' : *p;
            rc = add(ws, o->to) || add(ws, c);
            break;
        }
        case ANY_OF:
            fprintf(stderr,
                    "allot: %s:%d: #SBATCH %s: taken as allot's -w, any of the nodes listed (not "
                    "all of them, as Slurm)\n",
                    path, line, opt);
            rc = add(ws, o->to) || add(ws, val);
            break;
        case AS_IS:
            rc = add(ws, o->to) || add(ws, val);
            break;
        }
        if (rc)
            return cli_usage_error("%s: more than %d directive words", path, SCRIPT_ARGS);
    }
    return CLI_OK;
}

/* The directive lines of text (up to its first command) into ws (#ALLOT
 * words as they are, #SBATCH ones translated). CLI_OK or CLI_USAGE. */
static int directives(const char *text, const char *path, struct words *ws)
{
    struct words first = {.v = calloc(SCRIPT_ARGS, sizeof(char *)), .cap = SCRIPT_ARGS};
    struct words rest = {.v = calloc(SCRIPT_ARGS, sizeof(char *)), .cap = SCRIPT_ARGS};
    char *w[SCRIPT_ARGS];
    int line = 1, rc = CLI_OK;

    if (!first.v || !rest.v) {
        free(first.v);
        free(rest.v);
        return cli_usage_error("out of memory");
    }
    /* line 1 is the #! line; the text is left as it is (it is sent) */
    for (const char *l = strchr(text, '\n'); l && rc == CLI_OK; l = strchr(l + 1, '\n')) {
        const char *s = l + 1 + strspn(l + 1, " \t\r");
        size_t len = strcspn(s, "\n");
        bool allot = !strncmp(s, "#ALLOT", 6) && (s[6] == ' ' || s[6] == '\t');
        bool sbatch = !strncmp(s, "#SBATCH", 7) && (s[7] == ' ' || s[7] == '\t');
        char *copy;
        int n;

        line++;
        if (len && *s != '#')
            break; /* the first command: no directives after it */
        if (!allot && !sbatch)
            continue;
        if (!(copy = strndup(s, len))) {
            rc = cli_usage_error("out of memory");
            break;
        }
        if ((n = split(copy + (allot ? 6 : 7), w, SCRIPT_ARGS)) < 0)
            rc = cli_usage_error("%s:%d: an unclosed quote, or more than %d words", path, line,
                                 SCRIPT_ARGS);
        else if (allot)
            for (int i = 0; i < n && rc == CLI_OK; i++)
                rc = add(&rest, w[i]) ? cli_usage_error("%s: too many directive words", path)
                                      : CLI_OK;
        else
            rc = translate(&rest, &first, path, line, w, n);
        free(copy);
    }
    for (int i = 0; i < first.n && rc == CLI_OK; i++)
        rc = add(ws, first.v[i]) ? cli_usage_error("%s: too many directive words", path) : CLI_OK;
    for (int i = 0; i < rest.n && rc == CLI_OK; i++)
        rc = add(ws, rest.v[i]) ? cli_usage_error("%s: too many directive words", path) : CLI_OK;
    for (int i = 0; i < first.n; i++)
        free(first.v[i]);
    for (int i = 0; i < rest.n; i++)
        free(rest.v[i]);
    free(first.v);
    free(rest.v);
    return rc;
}

/* Reads the script at path: at most SCRIPT_MAX bytes, "#!" first, no
 * NUL. Returns its text (malloc'd) or NULL after printing why. */
static char *read_script(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *text = malloc(SCRIPT_MAX + 2);
    size_t n = 0;

    if (!f || !text) {
        cli_usage_error("cannot read the script %s: %s", path,
                        f ? "out of memory" : strerror(errno));
        if (f)
            fclose(f);
        free(text);
        return NULL;
    }
    n = fread(text, 1, SCRIPT_MAX + 1, f);
    fclose(f);
    text[n] = '\0';
    const char *why = n > SCRIPT_MAX           ? "is over 64 KiB (the most sent with a job)"
                      : strncmp(text, "#!", 2) ? "does not start with #! and its interpreter "
                                                 "(#!/bin/bash), as sbatch asks"
                      : strlen(text) != n      ? "holds a NUL byte: not a script"
                                               : NULL;
    if (why) {
        cli_usage_error("the script %s %s; a program that is on the nodes runs with "
                        "`allot submit -- PROGRAM ARGS`",
                        path, why);
        free(text);
        return NULL;
    }
    return text;
}

int script_load(struct cli *c, const char *path, const struct cli_usage *u, struct cli_args *a,
                struct cli_script *s)
{
    struct words ws = {.v = calloc(SCRIPT_ARGS + 1, sizeof(char *)), .cap = SCRIPT_ARGS};
    struct cli_args d;
    int rc;

    memset(s, 0, sizeof(*s));
    if (!ws.v)
        return cli_usage_error("out of memory");
    if (!(s->text = read_script(path))) {
        free(ws.v);
        return CLI_USAGE;
    }
    s->argv = ws.v;
    rc = directives(s->text, path, &ws);
    s->argc = ws.n;
    if (rc == CLI_OK && ws.n) {
        rc = args_parse(c, a->opts, u, ws.n, ws.v, &d); /* frees d when it fails */
        if (rc == CLI_OK) {
            if (d.n_pos || d.rest)
                rc = cli_usage_error("%s: a directive holds \"%s\", which is no option", path,
                                     d.n_pos ? d.pos[0] : "--");
            else
                rc = args_merge(a, &d);
            args_free(&d);
        }
        if (rc != CLI_OK && rc != CLI_HELP)
            fprintf(stderr, "allot: (in the #ALLOT and #SBATCH lines of %s)\n", path);
    }
    if (rc != CLI_OK)
        script_free(s);
    return rc;
}

void script_free(struct cli_script *s)
{
    for (int i = 0; s->argv && i < s->argc; i++)
        free(s->argv[i]);
    free(s->argv);
    free(s->text);
    memset(s, 0, sizeof(*s));
}

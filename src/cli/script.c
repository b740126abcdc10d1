/*
 * Batch scripts for allot submit/run SCRIPT (sbatch job.sh): the script's
 * text, sent with the job (the node needs no shared file system for it),
 * and its directive lines, `#ALLOT` with allot's own options and
 * `#SBATCH` with Slurm's, taken where the command line does not give the
 * same option (or one of its group: --gpus and --mig, --mem and
 * --mem-per-cpu ...). As sbatch, directives are read up to the first line
 * that is neither blank nor a comment. A directive never reaches the
 * command line's global options (the server, the token, the output): a
 * script someone else wrote must not send your token elsewhere.
 */
#include "cli.h"

#include "allot/common.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define SCRIPT_MAX  (64 * 1024) /* allotd's JOBSPEC_SCRIPT_MAX */
#define SCRIPT_ARGS 512         /* directive words */

/* What an #SBATCH option becomes. */
enum how {
    AS_IS,   /* the allot option, the same value */
    MINUTES, /* --time: a bare number is minutes; UNLIMITED none */
    GRES,    /* --gres=gpu[:TYPE][:N]: --gpus N, --gpu-model TYPE */
    GPUS,    /* --gpus[-per-*]=[TYPE:]N: --gpus N per task, --gpu-model TYPE */
    NODES,   /* --nodes N: N tasks (sharing nodes where they fit together) */
    AMP,     /* --constraint a&b: labels separated by ',' */
    ANY_OF,  /* --nodelist: allot's, any of the nodes (Slurm takes all), said */
    EXPORT,  /* --export=VAR[=V],...: --env */
    ACCOUNT, /* --account: the tenant, said */
    FLAG,    /* takes no value */
    IGNORED, /* takes a value; said, and left out */
    SKIPPED, /* takes a value only after '=' (--exclusive[=user]); said, left out */
};

static const struct sbatch_opt {
    const char *name;
    char letter;
    const char *to; /* allot's option; for IGNORED and SKIPPED why not */
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
    {"gpus-per-task", 0, "--gpus", GPUS},
    {"gpus-per-node", 0, "--gpus", GPUS},
    {"gpus", 'G', "--gpus", GPUS},
    {"nodes", 'N', "--tasks", NODES},
    {"array", 'a', "--array", AS_IS},
    {"dependency", 'd', "--dependency", AS_IS},
    {"nodelist", 'w', "--nodelist", ANY_OF},
    {"exclude", 'x', "--exclude", AS_IS},
    {"constraint", 'C', "--constraint", AMP},
    {"begin", 'b', "--begin", AS_IS},
    {"hold", 'H', "--hold", FLAG},
    {"signal", 0,
     "allot's --signal reaches every process of the task, the script's shell too: give it on "
     "the command line if the script and its children handle the signal",
     IGNORED},
    {"chdir", 'D', "--workdir", AS_IS},
    {"no-requeue", 0, "--no-requeue", FLAG},
    {"requeue", 0, "", FLAG}, /* allot's default */
    {"account", 'A', "--tenant", ACCOUNT},
    {"export", 0, "--env", EXPORT},
    {"output", 'o', "allot logs ID shows the output", IGNORED},
    {"error", 'e', "allot logs ID shows the output", IGNORED},
    {"partition", 'p', "tenants, not partitions: -A/--account or allot's -t", IGNORED},
    {"qos", 'q', "allot's priority classes (-p) and --qos are its own", IGNORED},
    {"ntasks", 'n', "the script runs once per task: -N gives the tasks", IGNORED},
    {"ntasks-per-node", 0, "the script runs once per task: -N gives the tasks", IGNORED},
    {"mail-type", 0, "allot sends no mail: allot events -w follows a job", IGNORED},
    {"mail-user", 0, "allot sends no mail: allot events -w follows a job", IGNORED},
    {"exclusive", 0, "a tenant's isolation gives whole nodes", SKIPPED},
};

/* Options the command line replaces together: one given there, the
 * script's of the same group are not taken. */
static const char *const groups[][6] = {
    {"gpus", "mig", "gpu-milli", "gpu-memory", "gpu-model", NULL},
    {"mem", "mem-per-gpu", "mem-per-cpu", NULL},
    {"cpus", "cpus-per-gpu", NULL},
};

/* Tells the user, naming the line: what was left out, or how an option
 * was taken. */
__attribute__((format(printf, 4, 5))) static void say(const char *path, int line, const char *opt,
                                                      const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "allot: %s:%d: #SBATCH %s: ", path, line, opt);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Splits s (modified in place) into words at blanks, as sbatch does:
 * '...' and "..." group, a backslash keeps the next character, and an
 * unquoted '#' ends the line. Returns the number of words, or -1 (an
 * unclosed quote, too many words). */
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
        while (*s && *s != ' ' && *s != '\t' && *s != '#') {
            if (*s == '\'' || *s == '"') {
                char q = *s++;
                while (*s && *s != q)
                    *o++ = *s++;
                if (!*s)
                    return -1;
                s++;
            } else if (*s == '\\' && s[1]) {
                s++;
                *o++ = *s++;
            } else {
                *o++ = *s++;
            }
        }
        if (*s == '#') { /* a comment right after the word */
            *o = '\0';
            break;
        }
        if (*s)
            s++;
        *o++ = '\0';
    }
    return n;
}

struct words {
    char **v; /* owned, SCRIPT_ARGS entries */
    int n;
};

/* Appends a copy of w (owned by ws). 0 or -1 (out of memory, too many). */
static int add(struct words *ws, const char *w)
{
    if (ws->n == SCRIPT_ARGS || !(ws->v[ws->n] = allot_strdup(w)))
        return -1;
    ws->n++;
    return 0;
}

/* Appends two words. 0 or -1. */
static int add2(struct words *ws, const char *a, const char *b)
{
    return add(ws, a) || add(ws, b) ? -1 : 0;
}

static void words_free(struct words *ws)
{
    for (int i = 0; ws->v && i < ws->n; i++)
        allot_free(ws->v[i]);
    allot_free(ws->v);
    ws->v = NULL;
    ws->n = 0;
}

/* [TYPE:]N of a GPU count into --gpus N (and --gpu-model TYPE); a TYPE
 * alone is one GPU. 0 or -1. */
static int gpu_words(struct words *ws, char *v)
{
    char *colon = strchr(v, ':');
    const char *type = NULL, *n = v;

    if (colon) {
        *colon = '\0';
        type = v, n = colon + 1;
    } else if (!isdigit((unsigned char)*v)) {
        type = v, n = "1";
    }
    return add2(ws, "--gpus", n) || (type && add2(ws, "--gpu-model", type)) ? -1 : 0;
}

/* --gres=gpu[:TYPE][:N][,other...]: one GPU entry (more: a usage error),
 * other resources said and left out. CLI_OK, CLI_USAGE or -1. */
static int gres(struct words *ws, const char *path, int line, char *v)
{
    char *save = NULL;
    int gpus = 0;

    for (char *g = strtok_r(v, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
        if (strncmp(g, "gpu", 3) != 0 || (g[3] && g[3] != ':')) {
            say(path, line, "--gres", "%s not taken (only GPUs are known)", g);
            continue;
        }
        if (gpus++)
            return cli_usage_error("%s:%d: #SBATCH --gres: GPUs of two kinds; a job of allot "
                                   "asks for one (--gpu-model names several models)",
                                   path, line);
        if (gpu_words(ws, g[3] ? g + 4 : (char[]){"1"}))
            return -1;
    }
    return CLI_OK;
}

/* --export=ALL|NONE|VAR[=V],...: --env VAR=V (a bare VAR: its value here). */
static int export(struct words *ws, const char *path, int line, char *v)
{
    char *save = NULL;

    for (char *e = strtok_r(v, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        char *kv;
        int rc;
        if (!strcmp(e, "ALL") || !strcmp(e, "NONE")) {
            if (!strcmp(e, "ALL"))
                say(path, line, "--export=ALL",
                    "not taken (nothing of your environment is passed: name the variables)");
            continue;
        }
        if (strchr(e, '=')) {
            if (add2(ws, "--env", e))
                return -1;
            continue;
        }
        const char *env = getenv(e), *val = env ? env : "";
        if (!(kv = allot_malloc(strlen(e) + strlen(val) + 2)))
            return -1;
        allot_fmt(kv, strlen(e) + strlen(val) + 2, "%s=%s", e, val);
        rc = add2(ws, "--env", kv);
        allot_free(kv);
        if (rc)
            return -1;
    }
    return 0;
}

/* The #SBATCH option arg names (its long name or letter), or NULL. */
static const struct sbatch_opt *find(const char *arg, const char *eq)
{
    size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);

    for (size_t k = 0; k < sizeof(sbatch_opts) / sizeof(sbatch_opts[0]); k++) {
        const struct sbatch_opt *s = &sbatch_opts[k];
        if (arg[1] == '-' ? strlen(s->name) == len && !memcmp(arg + 2, s->name, len)
                          : s->letter && arg[1] == s->letter)
            return s;
    }
    return NULL;
}

/* Option o with value val (a copy the caller frees; NULL for a flag) into
 * allot words. CLI_OK, CLI_USAGE (printed) or -1 (too many words). */
static int take(struct words *ws, const char *path, int line, const char *opt,
                const struct sbatch_opt *o, char *val)
{
    char *p;

    /* every kind but these comes with its value (translate) */
    if (o->how != FLAG && o->how != SKIPPED && ALLOT_NEVER(!val))
        return CLI_USAGE;
    switch (o->how) {
    case IGNORED:
    case SKIPPED:
        say(path, line, opt, "not taken (%s)", o->to);
        return CLI_OK;
    case FLAG:
        return *o->to && add(ws, o->to) ? -1 : 0;
    case MINUTES: /* Slurm reads a bare number as minutes, allot as seconds */
        if (!strcasecmp(val, "UNLIMITED") || !strcasecmp(val, "INFINITE"))
            return add2(ws, o->to, "0");
        if (strspn(val, "0123456789") == strlen(val)) {
            char *m = allot_malloc(strlen(val) + 2);
            int rc = -1;
            if (m) {
                allot_fmt(m, strlen(val) + 2, "%sm", val);
                rc = add2(ws, o->to, m);
            }
            allot_free(m);
            return rc;
        }
        return add2(ws, o->to, val);
    case GRES:
        return gres(ws, path, line, val);
    case GPUS:
        if (!strcmp(o->name, "gpus"))
            say(path, line, opt, "taken per task, as allot's -g (Slurm's counts the whole job)");
        return gpu_words(ws, val);
    case EXPORT:
        return export(ws, path, line, val);
    case NODES:
        if ((p = strchr(val, '-')) != NULL) { /* Slurm's MIN-MAX: allot's gang is one size */
            *p = '\0';
            say(path, line, opt, "taken as its least, %s", val);
        }
        if (strcmp(val, "1") != 0)
            say(path, line, opt,
                "%s tasks, each running the script; they share a node where they fit together",
                val);
        return add2(ws, o->to, val);
    case AMP: /* Slurm's AND; its OR is refused by --constraint */
        for (p = val; *p; p++)
            *p = *p == '&' ? ',' : *p;
        return add2(ws, o->to, val);
    case ANY_OF:
        say(path, line, opt,
            "taken as allot's -w, any of the nodes listed (not all of them, as Slurm)");
        return add2(ws, o->to, val);
    case ACCOUNT:
        say(path, line, opt, "taken as the tenant (-t %s), unless the command line gives one", val);
        return add2(ws, o->to, val);
    case AS_IS:
        return add2(ws, o->to, val);
    }
    return CLI_OK;
}

/* One #SBATCH line's words (w[0..n)) as allot options into ws. Returns
 * CLI_OK or CLI_USAGE (printed). */
static int translate(struct words *ws, const char *path, int line, char **w, int n)
{
    for (int i = 0; i < n; i++) {
        const char *arg = w[i], *eq;
        const struct sbatch_opt *o;
        char opt[64], *val = NULL;
        int rc;

        if (arg[0] != '-' || !arg[1])
            return cli_usage_error("%s:%d: #SBATCH: \"%s\" is not an option", path, line, arg);
        eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
        o = find(arg, eq);
        allot_fmt(opt, sizeof(opt), "%.*s", eq ? (int)(eq - arg) : arg[1] == '-' ? 60 : 2, arg);
        if (!o) {
            say(path, line, opt, "not taken (not an option allot knows)");
            if (!eq && !(arg[1] != '-' && arg[2]) && i + 1 < n && w[i + 1][0] != '-')
                i++; /* its value, most likely */
            continue;
        }
        if (o->how == SKIPPED || o->how == FLAG) {
            if (o->how == FLAG && (eq || (arg[1] != '-' && arg[2])))
                return cli_usage_error("%s:%d: #SBATCH %s takes no value", path, line, arg);
        } else {
            const char *v = eq ? eq + 1 : arg[1] != '-' && arg[2] ? arg + 2 : NULL;
            if (!v && i + 1 < n)
                v = w[++i];
            if (!v)
                return cli_usage_error("%s:%d: #SBATCH %s needs a value", path, line, opt);
            if (!(val = allot_strdup(v)))
                return cli_usage_error("out of memory");
        }
        rc = take(ws, path, line, opt, o, val);
        allot_free(val);
        if (rc < 0)
            return cli_usage_error("%s: more than %d directive words", path, SCRIPT_ARGS);
        if (rc)
            return rc;
    }
    return CLI_OK;
}

/* The directive lines of text (up to its first command) into ws (#ALLOT
 * words as they are, #SBATCH ones translated), in order: a later one
 * wins, as on a command line. CLI_OK or CLI_USAGE. */
static int directives(const char *text, const char *path, struct words *ws)
{
    char *w[SCRIPT_ARGS];
    int line = 1, rc = CLI_OK;

    /* line 1 is the #! line; the text is left as it is (it is sent) */
    for (const char *l = strchr(text, '\n'); l && rc == CLI_OK; l = strchr(l + 1, '\n')) {
        const char *s = l + 1 + strspn(l + 1, " \t");
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
        if (!(copy = allot_malloc(len + 1))) {
            rc = cli_usage_error("out of memory");
            break;
        }
        memcpy(copy, s, len);
        copy[len] = '\0';
        if ((n = split(copy + (allot ? 6 : 7), w, SCRIPT_ARGS)) < 0)
            rc = cli_usage_error("%s:%d: an unclosed quote, or more than %d words", path, line,
                                 SCRIPT_ARGS);
        else if (allot)
            for (int i = 0; i < n && rc == CLI_OK; i++)
                rc = add(ws, w[i]) ? cli_usage_error("%s: too many directive words", path) : CLI_OK;
        else
            rc = translate(ws, path, line, w, n);
        allot_free(copy);
    }
    return rc;
}

/* A directive word that would reach the command line's global options
 * (--server, --token, -o ...) or ask for help: refused. */
static int no_globals(const struct words *ws, const char *path)
{
    for (int i = 0; i < ws->n; i++) {
        const char *w = ws->v[i], *lname;
        char name[64];
        bool needs;
        if (w[0] != '-' || !w[1])
            continue;
        allot_fmt(name, sizeof(name), "%.*s", (int)strcspn(w + 2, "="), w + 2);
        /* the command line's own: where to, as whom, how printed, which
         * submission this is, and what else is read */
        bool lng = w[1] == '-';
        if (!strcmp(w, "-h") || !strcmp(w, "--help") || (!lng && w[1] == 'f') ||
            (lng && (!strcmp(name, "file") || !strcmp(name, "idempotency-key"))) ||
            conf_is_global(lng ? name : NULL, lng ? 0 : w[1], &needs, &lname))
            return cli_usage_error("%s: a directive gives %s, which a script may not (the server, "
                                   "token, output, job file and idempotency key are the command "
                                   "line's)",
                                   path, w);
    }
    return CLI_OK;
}

/* Reads the script at path: at most SCRIPT_MAX bytes, "#!" first, no
 * NUL, no DOS line breaks. Returns its text or NULL after printing why. */
static char *read_script(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *text = allot_malloc(SCRIPT_MAX + 2);
    size_t n = 0;
    bool bad_read;

    if (!f || !text) {
        cli_usage_error("cannot read the script %s: %s", path,
                        f ? "out of memory" : strerror(errno));
        if (f)
            fclose(f);
        allot_free(text);
        return NULL;
    }
    n = fread(text, 1, SCRIPT_MAX + 1, f);
    bad_read = ferror(f);
    fclose(f);
    text[n] = '\0';
    const char *why = bad_read         ? "could not be read whole"
                      : n > SCRIPT_MAX ? "is over 64 KiB (the most sent with a job)"
                      : !strncmp(text, "\xef\xbb\xbf", 3)
                          ? "starts with a byte order mark: save it without one"
                      : strncmp(text, "#!", 2) ? "does not start with #! and its interpreter "
                                                 "(#!/bin/bash), as sbatch asks"
                      : strlen(text) != n      ? "holds a NUL byte: not a script"
                      : strstr(text, "\r\n")   ? "has DOS line breaks (\\r\\n): convert it "
                                                 "(dos2unix), as sbatch asks"
                                               : NULL;
    if (why) {
        cli_usage_error("the script %s %s; a program that is on the nodes runs with "
                        "`allot submit -- PROGRAM ARGS`",
                        path, why);
        allot_free(text);
        return NULL;
    }
    return text;
}

/* Drops from d the options of every group a gives one of. */
static void drop_groups(const struct cli_args *a, struct cli_args *d)
{
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
        bool given = false;
        for (int k = 0; groups[g][k]; k++)
            given |= args_has(a, groups[g][k]);
        for (int k = 0; given && groups[g][k]; k++)
            args_drop(d, groups[g][k]);
    }
}

int script_load(struct cli *c, const char *path, const struct cli_usage *u, struct cli_args *a,
                struct cli_script *s)
{
    struct words ws = {.v = allot_calloc(SCRIPT_ARGS + 1, sizeof(char *))};
    struct cli_args d;
    int rc;

    memset(s, 0, sizeof(*s));
    if (!ws.v)
        return cli_usage_error("out of memory");
    if (!(s->text = read_script(path))) {
        words_free(&ws);
        return CLI_USAGE;
    }
    rc = directives(s->text, path, &ws);
    if (rc == CLI_OK)
        rc = no_globals(&ws, path);
    s->argv = ws.v;
    s->argc = ws.n;
    if (rc == CLI_OK && ws.n) {
        rc = args_parse(c, a->opts, u, ws.n, ws.v, &d); /* frees d when it fails */
        if (rc == CLI_OK) {
            if (d.n_pos || d.rest)
                rc = cli_usage_error("%s: a directive holds \"%s\", which is no option", path,
                                     d.n_pos ? d.pos[0] : "--");
            else {
                drop_groups(a, &d);
                rc = args_merge(a, &d);
            }
            args_free(&d);
        }
        if (rc != CLI_OK)
            fprintf(stderr, "allot: (in the #ALLOT and #SBATCH lines of %s)\n", path);
    }
    if (rc != CLI_OK)
        script_free(s);
    return rc;
}

void script_free(struct cli_script *s)
{
    for (int i = 0; s->argv && i < s->argc; i++)
        allot_free(s->argv[i]);
    allot_free(s->argv);
    allot_free(s->text);
    memset(s, 0, sizeof(*s));
}

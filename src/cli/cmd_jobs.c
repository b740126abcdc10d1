/*
 * Job verbs: ls, show, cancel, hold, release, requeue, priority, signal,
 * time-limit, checkpoint, events, over GET /v1/jobs, GET /v1/jobs/{id}
 * and its POST actions (docs/api.yaml). submit is in cmd_submit.c.
 */
#include "cli.h"

#include "allot/cluster.h"
#include "allot/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- shared ---- */

/* "2x1", "1g.10gb", "0.25", "10240MiB", "0.5+30720MiB" ... : what one job asks for (with
 * the task count when with_tasks and there are several). */
static const char *shape(json_t *spec, char *buf, size_t n, bool with_tasks)
{
    json_int_t tasks = json_integer_value(json_object_get(spec, "tasks"));
    json_t *g = json_object_get(spec, "gpus"), *mig = json_object_get(spec, "mig");
    json_t *milli = json_object_get(spec, "gpu_milli"), *mem = json_object_get(spec, "gpu_memory");
    char one[64];

    if (g)
        allot_fmt(one, sizeof(one), "%lld", (long long)json_integer_value(g));
    else if (mig)
        allot_fmt(one, sizeof(one), "%s", json_string_value(mig));
    else if (milli && mem) /* both: the compute share and the memory */
        allot_fmt(one, sizeof(one), "%.3g+%lldMiB", (double)json_integer_value(milli) / 1000.0,
                  (long long)json_integer_value(mem));
    else if (milli)
        allot_fmt(one, sizeof(one), "%.3g", (double)json_integer_value(milli) / 1000.0);
    else if (mem)
        allot_fmt(one, sizeof(one), "%lldMiB", (long long)json_integer_value(mem));
    else
        allot_fmt(one, sizeof(one), "0");
    if (tasks > 1 && with_tasks)
        allot_fmt(buf, n, "%lldx%s", (long long)tasks, one);
    else
        allot_fmt(buf, n, "%s", one);
    return buf;
}

/* A job id, or ARRAYID_INDEX (a member of an array by its index, as in
 * Slurm): *id gets the number before "_", *index the one after (-1 when
 * there is none). */
static int parse_id(const char *s, long long *id, long long *index)
{
    char head[32];
    const char *us = strchr(s, '_');
    int64_t v, x = -1;

    if (us && ((size_t)(us - s) >= sizeof(head) ||
               args_int("array index", us + 1, 0, INT32_MAX, &x) != CLI_OK))
        return CLI_USAGE;
    allot_fmt(head, sizeof(head), "%.*s", us ? (int)(us - s) : (int)strlen(s), s);
    if (args_int("job id", head, 1, INT64_MAX, &v) != CLI_OK)
        return CLI_USAGE;
    *id = v;
    *index = x;
    return CLI_OK;
}

/* The id of member `index` of array `aid`: 0 and an error printed when
 * there is none. */
static long long member_id(struct client *cl, long long aid, long long index)
{
    char path[64];
    json_t *jobs = NULL, *j;
    long long id = 0;
    size_t i;

    allot_fmt(path, sizeof(path), "/v1/jobs?array=%lld&limit=1000", aid);
    if (client_list(cl, path, "jobs", "cursor", "next_cursor", 0, 0, &jobs) != CLI_OK)
        return 0;
    json_array_foreach(jobs, i, j) if (json_integer_value(json_object_get(j, "array_index")) ==
                                       index) id = json_integer_value(json_object_get(j, "id"));
    size_t members = json_array_size(jobs);
    json_decref(jobs);
    if (!id && !members)
        fprintf(stderr,
                "allot: not_found: no job %lld_%lld (job %lld is not an array, or not there)\n",
                aid, index, aid);
    else if (!id)
        fprintf(stderr, "allot: not_found: no job %lld_%lld (array %lld has no index %lld)\n", aid,
                index, aid, index);
    return id;
}

int jobs_resolve(struct client *cl, const char *arg, long long *id)
{
    long long index;
    int rc = parse_id(arg, id, &index);

    if (rc != CLI_OK)
        return rc;
    if (index >= 0 && !(*id = member_id(cl, *id, index)))
        return CLI_NOTFOUND;
    return CLI_OK;
}

/* "12" or "15 (12_3)" for a job in an array. */
static const char *job_label(json_t *j, char *buf, size_t n)
{
    json_t *a = json_object_get(j, "array_job_id");

    if (a)
        allot_fmt(buf, n, "%lld (%lld_%lld)",
                  (long long)json_integer_value(json_object_get(j, "id")),
                  (long long)json_integer_value(a),
                  (long long)json_integer_value(json_object_get(j, "array_index")));
    else
        allot_fmt(buf, n, "%lld", (long long)json_integer_value(json_object_get(j, "id")));
    return buf;
}

bool jobs_terminal(const char *state)
{
    return state && (!strcmp(state, "succeeded") || !strcmp(state, "failed") ||
                     !strcmp(state, "cancelled") || !strcmp(state, "lost"));
}

/* ---- ls ---- */

static const struct cli_opt ls_opts[] = {
    {"tenant", 't', "TENANT", "only jobs of this tenant"},
    {"subtree", 'r', NULL, "with --tenant: also the tenants below it"},
    {"state", 's', "STATE[,STATE...]",
     "pending, starting, running, succeeded, failed, cancelled or lost (default: the first three)"},
    {"all", 'A', NULL, "jobs in every state, ended ones too (as sacct; default: as squeue)"},
    {"array", 'a', "ID", "only the members of this job array"},
    {"user", 'u', "USER", "only jobs this user submitted (as the USER column names them)"},
    {"mine", 'm', NULL, "only jobs submitted with a token of this caller's name"},
    {"limit", 0, "N", "at most N jobs (default: every match)"},
    {"newest", 'n', NULL, "newest first (with --limit: the N latest jobs)"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage ls_usage = {
    "ls",
    "[--tenant T [--subtree]] [--state S[,S...] | --all] [--array ID] [--user U | --mine] "
    "[--limit N] [--newest]",
    "Lists jobs that wait or run (as squeue; --all, or an --array's members:\n"
    "ended ones too, as sacct; --state: those states), oldest first (newest\n"
    "first with --newest), following every page of the listing: who submitted\n"
    "each (USER: the token's name, TENANT:NAME for a token bound to a tenant),\n"
    "how long it has run (TIME, [D-]H:MM:SS), its nodes, its exit code once\n"
    "ended and why it waits. With -o json|yaml, all matches are one array."};

/* The caller's user name as its jobs carry it ("user"), as allotd names
 * it (GET /v1/whoami). */
static int my_user(struct client *cl, char *buf, size_t n)
{
    json_t *me = NULL;
    int rc = client_call(cl, "GET", "/v1/whoami", NULL, NULL, CLIENT_RETRY_ALWAYS, &me, NULL);
    const char *user = json_string_value(json_object_get(me, "user"));
    const char *name = json_string_value(json_object_get(me, "name"));

    if (rc == CLI_OK && !user) {
        cli_error("server", "the server's whoami answer has no user");
        rc = CLI_SERVER;
    } else if (rc == CLI_OK && (!name || !*name)) {
        rc = cli_usage_error("--mine lists by the token's name, and this token has none (a token "
                             "made with allot tokens create --name)");
    }
    if (rc == CLI_OK)
        allot_strlcpy(buf, user, n);
    json_decref(me);
    return rc;
}

/* How long job j has run: until now while it runs, until its end once
 * ended ([D-]H:MM:SS, as squeue's TIME); "-" when it never started. */
static const char *elapsed(json_t *j, char *buf, size_t n)
{
    int64_t start = json_integer_value(json_object_get(j, "start_time"));
    int64_t end = json_integer_value(json_object_get(j, "end_time"));
    const char *state = json_string_value(json_object_get(j, "state"));
    int64_t s;

    /* no placement: it waits, or waited again (requeued) when it ended */
    if (start <= 0 || !state || !strcmp(state, "pending") ||
        !json_is_object(json_object_get(j, "placement")))
        return "-";
    s = (jobs_terminal(state) ? end : (int64_t)time(NULL)) - start;
    s = s < 0 ? 0 : s;
    if (s >= 86400)
        allot_fmt(buf, n, "%lld-%02lld:%02lld:%02lld", (long long)(s / 86400),
                  (long long)(s / 3600 % 24), (long long)(s / 60 % 60), (long long)(s % 60));
    else
        allot_fmt(buf, n, "%lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60),
                  (long long)(s % 60));
    return buf;
}

/* The nodes of job j's placement (its last run's, once ended), each once
 * in task order, comma-separated; "-" when it has none. */
static const char *job_nodes(json_t *j, char *buf, size_t n)
{
    json_t *tasks = json_object_get(json_object_get(j, "placement"), "tasks"), *t;
    size_t i, len = 0;

    buf[0] = '\0';
    json_array_foreach(tasks, i, t)
    {
        const char *node = json_string_value(json_object_get(t, "node"));
        size_t nl = node ? strlen(node) : 0;
        bool seen = false;

        for (const char *p = buf; node && !seen && (p = strstr(p, node)); p += nl)
            seen = (p == buf || p[-1] == ',') && (p[nl] == ',' || !p[nl]);
        if (node && !seen) {
            allot_fmt(buf + len, n - len, "%s%s", len ? "," : "", node);
            len = strlen(buf);
        }
    }
    return *buf ? buf : "-";
}

/* The GET /v1/jobs query of a's filters (--tenant [--subtree], --state or
 * --all, --array, --newest, --user or --mine; the options of ls, which
 * cancel shares) into path. CLI_OK or an error (printed). */
static int jobs_query(struct client *cl, const struct cli_args *a, char *path, size_t cap)
{
    const char *s;
    char *esc;
    size_t len;
    int rc;

    allot_fmt(path, cap, "/v1/jobs");
    if ((s = args_get(a, "tenant"))) {
        esc = client_escape(cl, s);
        allot_fmt(path, cap, "/v1/jobs?tenant=%s%s", esc ? esc : "",
                  args_has(a, "subtree") ? "&subtree=1" : "");
        allot_free(esc);
    } else if (args_has(a, "subtree")) {
        return cli_usage_error("--subtree needs --tenant");
    }
    if (args_get(a, "state") && args_has(a, "all"))
        return cli_usage_error("--state and --all: give one");
    /* an array's members in every state unless asked (as sacct -j) */
    if ((s = args_get(a, "state")) || (!args_has(a, "all") && !args_get(a, "array"))) {
        len = strlen(path);
        esc = client_escape(cl, s ? s : "pending,starting,running");
        allot_fmt(path + len, cap - len, "%cstate=%s", strchr(path, '?') ? '&' : '?',
                  esc ? esc : "");
        allot_free(esc);
    }
    if ((s = args_get(a, "array"))) {
        int64_t aid;
        if ((rc = args_int("array", s, 1, INT64_MAX, &aid)) != CLI_OK)
            return rc;
        len = strlen(path);
        allot_fmt(path + len, cap - len, "%carray=%lld", strchr(path, '?') ? '&' : '?',
                  (long long)aid);
    }
    if (args_has(a, "newest")) {
        len = strlen(path);
        allot_fmt(path + len, cap - len, "%corder=newest", strchr(path, '?') ? '&' : '?');
    }
    if (args_has(a, "mine") || args_get(a, "user")) {
        char me[512];
        if (args_has(a, "mine") && args_get(a, "user"))
            return cli_usage_error("--mine and --user: give one");
        if (args_has(a, "mine") && (rc = my_user(cl, me, sizeof(me))) != CLI_OK)
            return rc;
        esc = client_escape(cl, args_has(a, "mine") ? me : args_get(a, "user"));
        len = strlen(path);
        allot_fmt(path + len, cap - len, "%cuser=%s", strchr(path, '?') ? '&' : '?',
                  esc ? esc : "");
        allot_free(esc);
    }
    return CLI_OK;
}

int cmd_ls(struct cli *c, int argc, char **argv)
{
    static const char *const titles[] = {"ID",    "NAME",  "USER",     "TENANT",
                                         "STATE", "GPUS",  "PRIORITY", "SUBMITTED",
                                         "TIME",  "NODES", "EXIT",     "REASON"};
    struct cli_args a;
    struct client *cl;
    json_t *jobs = NULL, *j;
    char path[1024];
    const char *s;
    int64_t limit = 0;
    size_t i;
    int rc = args_parse(c, ls_opts, &ls_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos) {
        rc = cli_usage_error("unexpected argument \"%s\"", a.pos[0]);
        goto out;
    }
    if ((s = args_get(&a, "limit")) && (rc = args_int("limit", s, 1, INT64_MAX, &limit)))
        goto out;
    if (!(cl = cli_client(c))) {
        rc = CLI_USAGE;
        goto out;
    }
    if ((rc = jobs_query(cl, &a, path, sizeof(path))) != CLI_OK)
        goto out;
    rc = client_list(cl, path, "jobs", "cursor", "next_cursor", 0, (size_t)limit, &jobs);
    /* no jobs of a tenant: one that is not there is an error (a mistyped
     * name), one that was removed may still list its old jobs */
    if (rc == CLI_OK && !json_array_size(jobs) && (s = args_get(&a, "tenant")) &&
        (rc = tenants_known(c, s)) == CLI_NOTFOUND)
        cli_error("not_found", "no tenant %s (see allot tenants)", s);
    /* a Slurm user types the name alone: say how users are named */
    if (rc == CLI_OK && !json_array_size(jobs) && (s = args_get(&a, "user")) && !strchr(s, ':'))
        fprintf(stderr,
                "allot: no jobs of user %s here; a token bound to a tenant is named TENANT:NAME "
                "(the USER column; allot ls -m for your own)\n",
                s);
    if (rc != CLI_OK || out_structured(c, jobs))
        goto out;
    struct table *t = table_new(12, titles);
    json_array_foreach(jobs, i, j)
    {
        char id[64], us[64], sh[64], tm[32], el[32], nodes[1024], code[32];
        json_t *spec = json_object_get(j, "spec");
        const char *cells[12] = {job_label(j, id, sizeof(id)),
                                 json_string_value(json_object_get(j, "name")),
                                 out_cell(json_object_get(j, "user"), us, sizeof(us)),
                                 json_string_value(json_object_get(j, "tenant")),
                                 json_string_value(json_object_get(j, "state")),
                                 shape(spec, sh, sizeof(sh), true),
                                 json_string_value(json_object_get(spec, "priority")),
                                 out_time(json_object_get(j, "submit_time"), tm, sizeof(tm)),
                                 elapsed(j, el, sizeof(el)),
                                 job_nodes(j, nodes, sizeof(nodes)),
                                 out_cell(json_object_get(j, "exit_code"), code, sizeof(code)),
                                 json_string_value(json_object_get(j, "pending_reason"))};
        table_row(t, cells);
    }
    table_print(t, stdout);
out:
    json_decref(jobs);
    args_free(&a);
    return rc;
}

/* ---- show ---- */

static const struct cli_opt no_opts[] = {{NULL, 0, NULL, NULL}};

static const struct cli_usage show_usage = {
    "show", "JOB_ID|ARRAYID_INDEX...",
    "Shows jobs: state, pending reason, placement, request and times.\n"
    "With -o json|yaml: the job object (an array for several ids)."};

/* A list of node names of the spec as a short host list ("LABEL
 * gpu[01-04,07]"; its first 512 bytes), or nothing when it is empty. */
static void show_hosts(const json_t *spec, const char *field, const char *label)
{
    json_t *v = json_object_get(spec, field), *m;
    const char **names = allot_calloc(json_array_size(v) + 1, sizeof(*names));
    char list[512], t[1024];
    size_t i, need;

    if (!json_array_size(v) || !names) {
        allot_free(names);
        return;
    }
    json_array_foreach(v, i, m) names[i] = json_is_string(m) ? json_string_value(m) : "?";
    need = allot_hostlist_compress(names, (int)json_array_size(v), list, sizeof(list));
    printf("%-13s %s%s (%zu node%s)\n", label, out_text(list, t, sizeof(t)),
           need >= sizeof(list) ? "..." : "", json_array_size(v),
           json_array_size(v) == 1 ? "" : "s");
    allot_free(names);
}

/* A list field of the spec as "LABEL a, b, c" (the first 16, then how
 * many more), or nothing when it is empty. */
static void show_list(const json_t *spec, const char *field, const char *label)
{
    json_t *v = json_object_get(spec, field), *m;
    char t[256];
    size_t i;

    json_array_foreach(v, i, m)
    {
        if (i == 16) {
            printf(", and %zu more", json_array_size(v) - i);
            break;
        }
        if (!i)
            printf("%-13s ", label);
        printf("%s%s", i ? ", " : "", out_text(json_string_value(m), t, sizeof(t)));
    }
    if (json_array_size(v))
        putchar('\n');
}

/* The spec's `key` (an object of strings) as "K=V, ..." or, with
 * names_only, "K, ..." (an environment's values may be secrets), on one
 * line titled `title`; nothing when the object is empty. */
static void show_pairs(const json_t *spec, const char *key, const char *title, bool names_only)
{
    const char *k;
    json_t *v;
    char t[1024];
    bool first = true;

    json_object_foreach(json_object_get(spec, key), k, v)
    {
        printf(first ? "%-13s " : ", ", title);
        printf("%s", out_text(k, t, sizeof(t)));
        /* a node selector's empty value: the bare label, as --constraint takes it */
        if (!names_only &&
            !(!strcmp(key, "node_selector") && json_string_value(v) && !*json_string_value(v)))
            printf("=%s", out_text(json_string_value(v) ? json_string_value(v) : "", t, sizeof(t)));
        first = false;
    }
    if (!first)
        putchar('\n');
}

/* How the job runs, as submitted: its time limit, folder, image,
 * environment (names) and labels, each when given. */
static void show_run_spec(const json_t *spec)
{
    json_t *x;
    char t[1024];

    if ((x = json_object_get(spec, "time_limit")) && json_integer_value(x) > 0) {
        long long s = (long long)json_integer_value(x);
        printf("%-13s %lld s (%lld:%02lld:%02lld)\n", "time limit:", s, s / 3600, s / 60 % 60,
               s % 60);
    }
    if ((x = json_object_get(spec, "signal")) && json_is_string(x))
        printf("%-13s %s (before the time limit)\n",
               "signal:", out_text(json_string_value(x), t, sizeof(t)));
    if ((x = json_object_get(spec, "workdir")) && json_is_string(x))
        printf("%-13s %s\n", "workdir:", out_text(json_string_value(x), t, sizeof(t)));
    if ((x = json_object_get(spec, "image")) && json_is_string(x))
        printf("%-13s %s\n", "image:", out_text(json_string_value(x), t, sizeof(t)));
    show_list(spec, "gpu_models", "gpu models:");
    show_hosts(spec, "nodelist", "nodes:");
    show_hosts(spec, "exclude_nodes", "exclude:");
    show_pairs(spec, "env", "env:", true);
    show_pairs(spec, "labels", "labels:", false);
    show_pairs(spec, "node_selector", "constraint:", false);
}

static void show_one(const json_t *j)
{
    json_t *spec = json_object_get(j, "spec"), *pl = json_object_get(j, "placement"), *x;
    char b1[64], b2[64], b3[32], t[1024];
    size_t i;

    printf("%-13s %s\n", "id:", job_label((json_t *)j, b1, sizeof(b1)));
    printf("%-13s %s\n",
           "name:", out_text(out_cell(json_object_get(j, "name"), b1, sizeof(b1)), t, sizeof(t)));
    printf("%-13s %s\n", "tenant:", out_cell(json_object_get(j, "tenant"), b1, sizeof(b1)));
    printf("%-13s %s\n",
           "user:", out_text(out_cell(json_object_get(j, "user"), b1, sizeof(b1)), t, sizeof(t)));
    printf("%-13s %s\n", "state:", out_cell(json_object_get(j, "state"), b1, sizeof(b1)));
    if (json_is_string(json_object_get(j, "pending_reason")))
        printf("%-13s %s\n", "reason:",
               out_text(json_string_value(json_object_get(j, "pending_reason")), t, sizeof(t)));
    printf("%-13s %s\n", "priority:", out_cell(json_object_get(spec, "priority"), b1, sizeof(b1)));
    x = json_object_get(spec, "qos");
    printf("%-13s %s\n",
           "qos:", json_is_string(x) ? out_text(json_string_value(x), t, sizeof(t)) : "burstable");
    if ((x = json_object_get(spec, "array")))
        printf("%-13s %s\n", "array:", out_text(json_string_value(x), t, sizeof(t)));
    if ((x = json_object_get(spec, "dependency")))
        printf("%-13s %s\n", "dependency:", out_text(json_string_value(x), t, sizeof(t)));
    json_t *tasks = json_object_get(spec, "tasks"), *cpus = json_object_get(spec, "cpus");
    json_t *mem = json_object_get(spec, "memory");
    if (json_is_integer(mem))
        allot_fmt(b3, sizeof(b3), "%lld MiB", (long long)json_integer_value(mem));
    else
        allot_strlcpy(b3, "-", sizeof(b3));
    printf("%-13s %lld task%s, each gpus %s, cpus %s, memory %s\n",
           "request:", tasks ? (long long)json_integer_value(tasks) : 1LL,
           json_integer_value(tasks) > 1 ? "s" : "", shape(spec, b1, sizeof(b1), false),
           cpus ? out_cell(cpus, b2, sizeof(b2)) : "1", b3);
    if ((x = json_object_get(spec, "rdma_vfs")))
        printf("%-13s %lld RDMA VFs per task\n", "", (long long)json_integer_value(x));
    if ((x = json_object_get(spec, "script")) && json_is_string(x)) {
        const char *sc = json_string_value(x);
        size_t lines = 0, first = strcspn(sc, "\n");
        char line1[256];
        for (const char *p = sc; *p; p++)
            lines += *p == '\n' || !p[1];
        allot_fmt(line1, sizeof(line1), "%.*s", (int)first, sc);
        printf("%-13s %zu line%s, %zu bytes: %s (-o json shows it)\n", "script:", lines,
               lines == 1 ? "" : "s", strlen(sc), out_text(line1, t, sizeof(t)));
    }
    if ((x = json_object_get(spec, "command")) && json_is_array(x) &&
        (json_array_size(x) || !json_object_get(spec, "script"))) {
        json_t *w;
        printf("%-13s", json_object_get(spec, "script") ? "arguments:" : "command:");
        json_array_foreach(x, i, w)
        {
            printf(" %s", out_text(json_string_value(w), t, sizeof(t)));
        }
        putchar('\n');
    }
    show_run_spec(spec);
    printf("%-13s %s\n", "submitted:", out_time(json_object_get(j, "submit_time"), b1, sizeof(b1)));
    if ((x = json_object_get(spec, "begin_time")) && json_integer_value(x) > 0)
        printf("%-13s %s\n", "begin:", out_time(x, b1, sizeof(b1)));
    /* a job waiting again (requeued, preempted) shows its last run's start
     * as such, not as the start of a run that is not there */
    const char *st = json_string_value(json_object_get(j, "state"));
    if (st && !strcmp(st, "pending") && json_integer_value(json_object_get(j, "start_time")) > 0)
        printf("%-13s - (last run started %s)\n",
               "started:", out_time(json_object_get(j, "start_time"), b1, sizeof(b1)));
    else
        printf("%-13s %s\n",
               "started:", out_time(json_object_get(j, "start_time"), b1, sizeof(b1)));
    printf("%-13s %s\n", "ended:", out_time(json_object_get(j, "end_time"), b1, sizeof(b1)));
    if ((x = json_object_get(j, "last_checkpoint")) && json_is_integer(x))
        printf("%-13s %s\n", "last save:", out_time(x, b1, sizeof(b1)));
    printf("%-13s %s\n", "exit code:", out_cell(json_object_get(j, "exit_code"), b1, sizeof(b1)));
    json_array_foreach(json_object_get(pl, "tasks"), i, x)
    {
        json_t *mig = json_object_get(x, "mig_profile");
        json_t *addr = json_object_get(x, "address");
        json_int_t vfs = json_integer_value(json_object_get(x, "rdma_vfs"));
        printf("%-13s task %lld on %s, GPUs %s%s%s%s%s",
               i ? "" : "placement:", (long long)json_integer_value(json_object_get(x, "task")),
               json_string_value(json_object_get(x, "node")),
               out_cell(json_object_get(x, "gpus"), b1, sizeof(b1)), mig ? ", MIG " : "",
               mig ? json_string_value(mig) : "", addr ? ", address " : "",
               addr ? json_string_value(addr) : "");
        if (vfs > 0)
            printf(", %lld RDMA VFs", (long long)vfs);
        putchar('\n');
    }
    json_t *net = json_object_get(j, "network");
    if (net)
        printf("%-13s tenant %s, subnet %s, gateway %s, VXLAN %lld\n",
               "network:", json_string_value(json_object_get(net, "tenant")),
               json_string_value(json_object_get(net, "subnet")),
               json_string_value(json_object_get(net, "gateway")),
               (long long)json_integer_value(json_object_get(net, "vni")));
}

/* One call per job id given (show, cancel): every id is checked first,
 * then each is called in turn (/v1/jobs/ID + suffix), each answer goes
 * to `table` in table output, and the structured output is the one answer
 * or an array of all. Without an id, `fallback` (or NULL); when every id
 * is `fallback`, the calls carry `own_token` instead of the configured
 * token (a job's own credential; or NULL). Returns the first failure's
 * exit code or CLI_OK. */
static int each_job(struct cli *c, int argc, char **argv, const struct cli_usage *usage,
                    const char *method, const char *suffix, const char *array_query, int retry,
                    void (*table)(const json_t *j, const char *id, size_t i), char *fallback,
                    const char *own_token, json_t *body)
{
    struct cli_args a;
    struct client *cl;
    json_t *all = NULL;
    int rc = args_parse(c, no_opts, usage, argc, argv, &a), first_err = CLI_OK;

    if (rc != CLI_OK)
        return rc;
    if (!a.n_pos && fallback && *fallback) { /* no id given: the fallback */
        allot_free(a.pos);
        if (!(a.pos = allot_malloc(sizeof(*a.pos)))) {
            rc = cli_usage_error("out of memory");
            goto out;
        }
        a.pos[0] = fallback;
        a.n_pos = 1;
    }
    if (!a.n_pos) {
        rc = cli_usage_error("allot %s JOB_ID...", usage->verb);
        goto out;
    }
    bool own = own_token && *own_token && fallback;
    for (size_t i = 0; i < a.n_pos; i++) {
        long long id, index;
        if ((rc = parse_id(a.pos[i], &id, &index)) != CLI_OK)
            goto out;
        own = own && !strcmp(a.pos[i], fallback);
    }
    /* the job's own id, from its environment, where the job has no
     * credential of its own and none is configured: say why */
    if (own_token && !*own_token && fallback && a.n_pos == 1 && a.pos[0] == fallback &&
        !(c->conf.token && *c->conf.token)) {
        cli_error("invalid",
                  "job %s has no credential of its own ($ALLOT_JOB_TOKEN is not set): "
                  "allot-agent gives one to checkpointable jobs only (allot submit "
                  "--checkpointable), and only they may report saves",
                  fallback);
        rc = CLI_INVALID;
        goto out;
    }
    if (own) {
        char *t = allot_strdup(own_token);
        if (!t) {
            rc = cli_usage_error("out of memory");
            goto out;
        }
        allot_free(c->conf.token);
        c->conf.token = t;
    }
    if (!(cl = cli_client(c))) {
        rc = CLI_USAGE;
        goto out;
    }
    all = json_array();
    for (size_t i = 0; i < a.n_pos; i++) {
        char path[96];
        json_t *j = NULL;
        long long id = 0, index = -1;

        parse_id(a.pos[i], &id, &index);
        if (index >= 0 && !(id = member_id(cl, id, index))) {
            if (first_err == CLI_OK)
                first_err = CLI_NOTFOUND;
            continue;
        }
        /* a plain id names the whole array when it is an array's first job */
        allot_fmt(path, sizeof(path), "/v1/jobs/%lld%s%s", id, suffix,
                  index < 0 ? array_query : "");
        rc = client_call(cl, method, path, body, NULL, retry, &j, NULL);
        if (rc != CLI_OK) {
            if (first_err == CLI_OK)
                first_err = rc;
            continue;
        }
        if (c->fmt == CLI_FMT_TABLE) /* i: how many were printed before (not the failed) */
            table(j, a.pos[i], json_array_size(all));
        json_array_append_new(all, j);
    }
    if (c->fmt != CLI_FMT_TABLE && json_array_size(all))
        out_structured(c, a.n_pos == 1 ? json_array_get(all, 0) : all);
    rc = first_err;
out:
    json_decref(all);
    args_free(&a);
    return rc;
}

static void show_table(const json_t *j, const char *id, size_t i)
{
    (void)id;
    if (i)
        putchar('\n');
    show_one(j);
}

int cmd_show(struct cli *c, int argc, char **argv)
{
    return each_job(c, argc, argv, &show_usage, "GET", "", "", CLIENT_RETRY_ALWAYS, show_table,
                    NULL, NULL, NULL);
}

/* ---- cancel ---- */

static const struct cli_usage cancel_usage = {
    "cancel", "JOB_ID... | [--mine | --user U] [--tenant T [--subtree]] [--state S] [--name N]",
    "Cancels pending or running jobs. The id of an array's first job cancels\n"
    "the whole array; ARRAYID_INDEX cancels one member. Or, as scancel -u,\n"
    "every job that waits or runs and matches all the filters given (--state\n"
    "pending: those that wait). Every job is tried; the exit status is that of\n"
    "the first failure."};

static const struct cli_opt cancel_opts[] = {
    {"mine", 'm', NULL, "the jobs submitted with a token of this caller's name"},
    {"user", 'u', "USER", "the jobs this user submitted (as allot ls names them)"},
    {"tenant", 't', "TENANT", "the jobs of this tenant"},
    {"subtree", 'r', NULL, "with --tenant: also the tenants below it"},
    {"state", 's', "STATE[,STATE...]", "pending, starting or running (default: all three)"},
    {"name", 'n', "NAME", "the jobs of this name"},
    {NULL, 0, NULL, NULL}};

static void cancel_table(const json_t *j, const char *id, size_t i)
{
    json_t *m = json_object_get(j, "members_cancelled");

    (void)i;
    long long n = (long long)json_integer_value(m);

    if (m) /* the members this cancel ended, the first included */
        printf("cancelled array %s (%lld job%s)\n", id, n, n == 1 ? "" : "s");
    else
        printf("cancelled job %s\n", id);
}

/* allot cancel with filters (scancel -u, -t, -n, --state): the jobs that
 * match, listed, then cancelled one by one (a member alone, not its
 * array). */
static int cancel_matching(struct cli *c, const struct cli_args *a)
{
    struct client *cl = cli_client(c);
    json_t *jobs = NULL, *j;
    char path[1024], **ids = NULL;
    const char *name = args_get(a, "name"), *st = args_get(a, "state");
    size_t i, n = 0;
    int rc;

    if (!cl)
        return CLI_USAGE;
    if (st) /* only what has not ended */
        for (const char *p = st; *p;) {
            size_t len = strcspn(p, ",");
            if (!((len == 7 && !strncmp(p, "pending", 7)) ||
                  (len == 8 && !strncmp(p, "starting", 8)) ||
                  (len == 7 && !strncmp(p, "running", 7))))
                return cli_usage_error("--state: \"%.*s\": only pending, starting or running "
                                       "jobs can be cancelled",
                                       (int)len, p);
            p += len + (p[len] == ',');
        }
    if ((rc = jobs_query(cl, a, path, sizeof(path))) != CLI_OK ||
        (rc = client_list(cl, path, "jobs", "cursor", "next_cursor", 0, 0, &jobs)) != CLI_OK)
        goto out;
    ids = allot_calloc(json_array_size(jobs) + 2, sizeof(*ids));
    if (!ids) {
        rc = cli_usage_error("out of memory");
        goto out;
    }
    json_array_foreach(jobs, i, j)
    {
        const char *jn = json_string_value(json_object_get(j, "name"));
        if (name && (!jn || strcmp(jn, name) != 0))
            continue;
        if (!(ids[n] = allot_malloc(24))) {
            rc = cli_usage_error("out of memory");
            goto out;
        }
        allot_fmt(ids[n++], 24, "%lld", (long long)json_integer_value(json_object_get(j, "id")));
    }
    if (!n) {
        fprintf(stderr, "allot: no job that waits or runs matches\n");
        goto out;
    }
    rc = each_job(c, (int)n, ids, &cancel_usage, "POST", "/cancel", "", CLIENT_RETRY_CONNECT,
                  cancel_table, NULL, NULL, NULL);
out:
    for (size_t k = 0; ids && k < n; k++)
        allot_free(ids[k]);
    allot_free(ids);
    json_decref(jobs);
    return rc;
}

int cmd_cancel(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    bool filtered = false;
    int rc = args_parse(c, cancel_opts, &cancel_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    for (size_t k = 0; k < a.n_opts; k++)
        filtered |= a.n_vals[k] > 0;
    if (filtered && a.n_pos)
        rc = cli_usage_error("job ids and filters: give one or the other");
    else if (filtered && !args_has(&a, "mine") && !args_get(&a, "user") &&
             !args_get(&a, "tenant") && !args_get(&a, "name"))
        rc = cli_usage_error("--state and --subtree pick among the jobs of --mine, --user, "
                             "--tenant or --name: give one");
    else if (filtered)
        rc = cancel_matching(c, &a);
    else /* not repeated after a lost reply: the repeat would answer 409 */
        rc = each_job(c, argc, argv, &cancel_usage, "POST", "/cancel", "?array=true",
                      CLIENT_RETRY_CONNECT, cancel_table, NULL, NULL, NULL);
    args_free(&a);
    return rc;
}

/* ---- hold, release ---- */

static const struct cli_usage hold_usage = {
    "hold", "JOB_ID...",
    "Holds pending jobs, as Slurm's `scontrol hold` does: a held job stays\n"
    "pending and does not start until `allot release`. The id of an array's\n"
    "first job holds every pending member; ARRAYID_INDEX holds one. Holding a\n"
    "held job changes nothing. Every id is tried; the exit status is that of\n"
    "the first failure."};

static const struct cli_usage release_usage = {
    "release", "JOB_ID...",
    "Releases held jobs (`allot hold`, `allot submit --hold`): they wait for\n"
    "room in their old place in the queue. The id of an array's first job\n"
    "releases every held member. Releasing a job that is not held changes\n"
    "nothing. Every id is tried; the exit status is that of the first failure."};

static void hold_line(const json_t *j, const char *id, const char *verb, const char *members)
{
    json_t *m = json_object_get(j, members);

    if (m)
        printf("%s %lld jobs of array %s\n", verb, (long long)json_integer_value(m), id);
    else
        printf("%s job %s\n", verb, id);
}

static void hold_table(const json_t *j, const char *id, size_t i)
{
    (void)i;
    hold_line(j, id, "held", "members_held");
}

static void release_table(const json_t *j, const char *id, size_t i)
{
    (void)i;
    hold_line(j, id, "released", "members_released");
}

int cmd_hold(struct cli *c, int argc, char **argv)
{
    /* repeated after a lost reply: a second hold changes nothing */
    return each_job(c, argc, argv, &hold_usage, "POST", "/hold", "?array=true", CLIENT_RETRY_ALWAYS,
                    hold_table, NULL, NULL, NULL);
}

int cmd_release(struct cli *c, int argc, char **argv)
{
    return each_job(c, argc, argv, &release_usage, "POST", "/release", "?array=true",
                    CLIENT_RETRY_ALWAYS, release_table, NULL, NULL, NULL);
}

/* ---- requeue ---- */

static const struct cli_usage requeue_usage = {
    "requeue", "JOB_ID...",
    "Sends running jobs back to the queue, as Slurm's `scontrol requeue` does:\n"
    "the node's agent stops the job (SIGTERM, then SIGKILL after its grace) and\n"
    "the job waits again in its old place, to run again from the start (or from\n"
    "its last save). Only a starting or running job is requeued, and not one\n"
    "submitted with --no-requeue. The id of an array's first job requeues every\n"
    "running member; ARRAYID_INDEX one. Every id is tried; the exit status is\n"
    "that of the first failure."};

static void requeue_table(const json_t *j, const char *id, size_t i)
{
    (void)i;
    hold_line(j, id, "requeued", "members_requeued");
}

int cmd_requeue(struct cli *c, int argc, char **argv)
{
    /* not repeated after a lost reply: the job may run again already */
    return each_job(c, argc, argv, &requeue_usage, "POST", "/requeue", "?array=true",
                    CLIENT_RETRY_CONNECT, requeue_table, NULL, NULL, NULL);
}

/* ---- priority ---- */

static const struct cli_usage priority_usage = {
    "priority", "CLASS JOB_ID...",
    "Gives waiting jobs another priority class (see `allot tenants\n"
    "--priority-classes`), as Slurm's `scontrol update JobId=... Priority=`\n"
    "does: each keeps its place by submission among the jobs of its new class.\n"
    "Only a pending job changes (a running one keeps the class it was placed\n"
    "with: requeue it to wait again). The id of an array's first job changes\n"
    "every pending member; ARRAYID_INDEX one. Asking a job for the class it\n"
    "has changes nothing. Every id is tried; the exit status is that of the\n"
    "first failure."};

static void priority_table(const json_t *j, const char *id, size_t i)
{
    json_t *m = json_object_get(j, "members_changed");
    const char *cls = json_string_value(json_object_get(json_object_get(j, "spec"), "priority"));

    (void)i;
    if (m) /* the first job may have started: its class is not the one asked */
        printf("array %s: priority class changed on %lld pending job%s\n", id,
               (long long)json_integer_value(m), json_integer_value(m) == 1 ? "" : "s");
    else
        printf("job %s: priority class %s\n", id, cls ? cls : "-");
}

static void rest_free(char **rest)
{
    for (size_t i = 0; rest && rest[i]; i++)
        allot_free(rest[i]);
    allot_free(rest);
}

/* `allot VERB ARG JOB_ID...` (priority, signal): parses argv (which hides
 * a --token value in it) into *a, and makes *rest, argv without ARG for
 * each_job, from a copy taken before (so its --token is the real one).
 * Returns the count of *rest, or -1 (an error said; *rest NULL).
 * Free *rest with rest_free. */
static int verb_arg_rest(struct cli *c, const struct cli_usage *u, int argc, char **argv,
                         struct cli_args *a, char ***rest)
{
    char **copy = allot_calloc((size_t)argc + 1, sizeof(*copy));
    int n = 0, rc;

    *rest = NULL;
    for (int i = 0; copy && i < argc; i++)
        if (!(copy[i] = allot_strdup(argv[i]))) {
            rest_free(copy);
            copy = NULL;
        }
    if (!copy) {
        memset(a, 0, sizeof(*a));
        cli_usage_error("out of memory");
        return -1;
    }
    if ((rc = args_parse(c, no_opts, u, argc, argv, a)) != CLI_OK) {
        rest_free(copy);
        return rc == CLI_HELP ? -2 : -1;
    }
    for (int i = 0; i < argc; i++) {
        if (a->n_pos && argv[i] == a->pos[0])
            allot_free(copy[i]);
        else
            copy[n++] = copy[i];
    }
    copy[n] = NULL;
    *rest = copy;
    return n;
}

/* `allot VERB ARG JOB_ID...` (priority, signal, time-limit): ARG made into
 * the body by make_body (which says what is wrong and returns its exit
 * code, or CLI_OK), then a POST /v1/jobs/ID + suffix per id (each_job). */
static int arg_then_jobs(struct cli *c, int argc, char **argv, const struct cli_usage *u,
                         int (*make_body)(const char *arg, json_t **body), const char *suffix,
                         const char *array_query, int retry,
                         void (*table)(const json_t *j, const char *id, size_t i))
{
    struct cli_args a;
    json_t *body = NULL;
    char **rest;
    int rc, n = verb_arg_rest(c, u, argc, argv, &a, &rest);

    if (n < 0)
        return n == -2 ? CLI_HELP : CLI_USAGE;
    if (a.n_pos < 2)
        rc = cli_usage_error("allot %s %s", u->verb, u->synopsis);
    else if ((rc = make_body(a.pos[0], &body)) == CLI_OK)
        rc = each_job(c, n, rest, u, "POST", suffix, array_query, retry, table, NULL, NULL, body);
    json_decref(body);
    rest_free(rest);
    args_free(&a);
    return rc;
}

static int priority_body(const char *cls, json_t **body)
{
    return (*body = json_pack("{s:s}", "priority", cls)) ? CLI_OK
                                                         : cli_usage_error("out of memory");
}

int cmd_priority(struct cli *c, int argc, char **argv)
{
    /* repeated after a lost reply: asking again changes nothing */
    return arg_then_jobs(c, argc, argv, &priority_usage, priority_body, "/priority", "?array=true",
                         CLIENT_RETRY_ALWAYS, priority_table);
}

/* ---- signal ---- */

static const struct cli_usage signal_usage = {
    "signal", "SIGNAL JOB_ID...",
    "Sends SIGNAL to running jobs, as Slurm's `scancel --signal` does: to the\n"
    "process group of each of a job's tasks, on every node it runs on, once, at\n"
    "the node's next heartbeat once the task's program runs. SIGNAL is a name\n"
    "(USR1, SIGUSR1) or number: HUP, INT, QUIT, ABRT, KILL, USR1, USR2, ALRM,\n"
    "TERM, CONT, STOP or TSTP. The job goes on unless the signal ends it (its\n"
    "exit code then tells). The id of an array's first job signals every\n"
    "starting or running member; ARRAYID_INDEX one. Every id is tried; the exit\n"
    "status is that of the first failure."};

static void signal_table(const json_t *j, const char *id, size_t i)
{
    json_t *m = json_object_get(j, "members_signalled");
    const char *sig = json_string_value(json_object_get(j, "signal"));

    (void)i;
    if (m)
        printf("SIG%s sent to %lld job%s of array %s\n", sig, (long long)json_integer_value(m),
               json_integer_value(m) == 1 ? "" : "s", id);
    else
        printf("SIG%s sent to job %s\n", sig, id);
}

static int signal_body(const char *sig, json_t **body)
{
    if (!allot_signal_parse(sig))
        return cli_usage_error("\"%s\" is not a signal a job may be sent (" ALLOT_SIGNAL_NAMES ")",
                               sig);
    return (*body = json_pack("{s:s}", "signal", sig)) ? CLI_OK : cli_usage_error("out of memory");
}

int cmd_signal(struct cli *c, int argc, char **argv)
{
    /* not repeated after a lost reply: the job would get it twice */
    return arg_then_jobs(c, argc, argv, &signal_usage, signal_body, "/signal", "?array=true",
                         CLIENT_RETRY_CONNECT, signal_table);
}

/* ---- time-limit ---- */

static const struct cli_usage limit_usage = {
    "time-limit", "DURATION|none JOB_ID...",
    "Changes the time limit of waiting or running jobs, as Slurm's `scontrol\n"
    "update JobId=ID TimeLimit=...` does: DURATION in seconds, or with s, m, h,\n"
    "d; none takes it away. It counts from the job's start as before: a running\n"
    "job already past its new limit is stopped at once (SIGTERM, then SIGKILL\n"
    "after its grace). A member may only lower a limit; an admin or tenant admin\n"
    "raises it or takes it away. Every id is tried; the exit status is that of\n"
    "the first failure."};

static void limit_table(const json_t *j, const char *id, size_t i)
{
    json_t *x = json_object_get(json_object_get(j, "spec"), "time_limit");

    (void)i;
    if (json_integer_value(x) > 0)
        printf("job %s: time limit %lld s\n", id, (long long)json_integer_value(x));
    else
        printf("job %s: no time limit\n", id);
}

static int limit_body(const char *d, json_t **body)
{
    int64_t secs = 0;
    int rc;

    if (strcmp(d, "none") != 0 && (rc = args_seconds("time limit", d, &secs)) != CLI_OK)
        return rc;
    return (*body = json_pack("{s:I}", "time_limit", (json_int_t)secs))
               ? CLI_OK
               : cli_usage_error("out of memory");
}

int cmd_time_limit(struct cli *c, int argc, char **argv)
{
    /* repeated after a lost reply: asking again changes nothing */
    return arg_then_jobs(c, argc, argv, &limit_usage, limit_body, "/time-limit", "",
                         CLIENT_RETRY_ALWAYS, limit_table);
}

/* ---- checkpoint ---- */

static const struct cli_usage checkpoint_usage = {
    "checkpoint", "[JOB_ID...]",
    "Reports that running checkpointable jobs saved their work just now, so\n"
    "that a preemption or a move (defragmentation) counts the work lost from\n"
    "this save. Run it from the job after each save; without a JOB_ID it\n"
    "reports $ALLOT_JOB_ID, which allot-agent sets in every job. Reports of\n"
    "$ALLOT_JOB_ID alone go with the job's own credential, $ALLOT_JOB_TOKEN,\n"
    "which allot-agent gives every checkpointable job: no other token needed."};

static void checkpoint_table(const json_t *j, const char *id, size_t i)
{
    (void)i;
    printf("job %s saved at %lld\n", id,
           (long long)json_integer_value(json_object_get(j, "saved_at")));
}

int cmd_checkpoint(struct cli *c, int argc, char **argv)
{
    const char *own = getenv("ALLOT_JOB_TOKEN");

    /* "": the job's own credential is expected, and missing */
    return each_job(c, argc, argv, &checkpoint_usage, "POST", "/checkpoint", "",
                    CLIENT_RETRY_CONNECT, checkpoint_table, getenv("ALLOT_JOB_ID"), own ? own : "",
                    NULL);
}

/* ---- events ---- */

static const struct cli_opt events_opts[] = {
    {"after", 0, "SEQ", "only events after this sequence number"},
    {"follow", 'w', NULL, "keep printing new events until the job has ended"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage events_usage = {
    "events", "JOB_ID [--after SEQ] [--follow]",
    "Lists a job's events in order (submitted, placed, running, preempted, ...).\n"
    "With --follow, polls every second and prints events as they come (with\n"
    "-o json: one JSON object per line) until the job has ended."};

static void event_line(const struct cli *c, json_t *e)
{
    char b1[32], b2[32], t[1024];

    if (c->fmt == CLI_FMT_TABLE) {
        printf("%-6s %-20s  %-12s %s\n", out_cell(json_object_get(e, "seq"), b1, sizeof(b1)),
               out_time(json_object_get(e, "time"), b2, sizeof(b2)),
               json_string_value(json_object_get(e, "kind")),
               out_text(json_string_value(json_object_get(e, "detail")), t, sizeof(t)));
    } else if (c->fmt == CLI_FMT_JSON) {
        json_dumpf(e, stdout, JSON_COMPACT);
        putchar('\n');
    } else {
        json_t *one = json_pack("[O]", e);
        out_yaml(stdout, one);
        json_decref(one);
    }
    fflush(stdout);
}

int cmd_events(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    struct client *cl;
    json_t *ev = NULL;
    char path[256];
    const char *s;
    long long id, index;
    int64_t after = 0;
    int rc = args_parse(c, events_opts, &events_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos != 1) {
        rc = cli_usage_error("allot events JOB_ID");
        goto out;
    }
    if ((rc = parse_id(a.pos[0], &id, &index)) != CLI_OK)
        goto out;
    if ((s = args_get(&a, "after")) && (rc = args_int("after", s, 0, INT64_MAX, &after)))
        goto out;
    if (!(cl = cli_client(c))) {
        rc = CLI_USAGE;
        goto out;
    }
    if (index >= 0 && !(id = member_id(cl, id, index))) {
        rc = CLI_NOTFOUND;
        goto out;
    }
    if (!args_has(&a, "follow")) {
        allot_fmt(path, sizeof(path), "/v1/jobs/%lld/events", id);
        rc = client_list(cl, path, "events", "after", NULL, (long long)after, 0, &ev);
        if (rc != CLI_OK || out_structured(c, ev))
            goto out;
        static const char *const titles[] = {"SEQ", "TIME", "KIND", "DETAIL"};
        struct table *t = table_new(4, titles);
        size_t i;
        json_t *e;
        json_array_foreach(ev, i, e)
        {
            char b1[32], b2[32];
            const char *cells[4] = {out_cell(json_object_get(e, "seq"), b1, sizeof(b1)),
                                    out_time(json_object_get(e, "time"), b2, sizeof(b2)),
                                    json_string_value(json_object_get(e, "kind")),
                                    json_string_value(json_object_get(e, "detail"))};
            table_row(t, cells);
        }
        table_print(t, stdout);
        goto out;
    }
    /* --follow: each round reads the job first, then its new events, so the
     * events of a job seen ended are all printed before stopping; a table's
     * lines come as they happen, in fixed columns under one header */
    if (c->fmt == CLI_FMT_TABLE)
        printf("%-6s %-20s  %-12s %s\n", "SEQ", "TIME", "KIND", "DETAIL");
    client_wait_outages(cl, CLI_OUTAGE_WAIT_MS);
    for (;;) {
        json_t *job = NULL, *e;
        size_t i;
        bool ended;

        allot_fmt(path, sizeof(path), "/v1/jobs/%lld", id);
        if ((rc = client_call(cl, "GET", path, NULL, NULL, CLIENT_RETRY_ALWAYS, &job, NULL)))
            break;
        ended = jobs_terminal(json_string_value(json_object_get(job, "state")));
        json_decref(job);
        allot_fmt(path, sizeof(path), "/v1/jobs/%lld/events", id);
        if ((rc = client_list(cl, path, "events", "after", NULL, (long long)after, 0, &ev)))
            break;
        json_array_foreach(ev, i, e)
        {
            event_line(c, e);
            after = json_integer_value(json_object_get(e, "seq"));
        }
        json_decref(ev);
        ev = NULL;
        if (ended)
            break;
        struct timespec ts = {.tv_sec = 1};
        nanosleep(&ts, NULL);
    }
out:
    json_decref(ev);
    args_free(&a);
    return rc;
}

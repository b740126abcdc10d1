/*
 * allot: the command line of an allot cluster (docs/cli/allot.md). This
 * file owns the verb table, the global options given before the verb and
 * `allot --help`. Each verb parses its own arguments (args.c) and returns
 * an exit code; main() frees what the run created and exits with it.
 */
#include "cli.h"

#include "allot/common.h"

#include <locale.h>
#include <signal.h>
#include <string.h>

struct verb {
    const char *name;
    int (*run)(struct cli *c, int argc, char **argv);
    const char *summary;
};

static const struct verb verbs[] = {
    {"submit", cmd_submit, "submit a job; prints its id"},
    {"ls", cmd_ls, "list jobs that wait or run (-A: ended ones too)"},
    {"show", cmd_show, "one job: state, pending reason, placement"},
    {"cancel", cmd_cancel, "cancel jobs"},
    {"requeue", cmd_requeue, "send running jobs back to the queue"},
    {"hold", cmd_hold, "keep pending jobs from starting"},
    {"release", cmd_release, "let held jobs start"},
    {"priority", cmd_priority, "give waiting jobs another priority class"},
    {"signal", cmd_signal, "send a signal to running jobs' processes"},
    {"time-limit", cmd_time_limit, "change waiting or running jobs' time limit"},
    {"checkpoint", cmd_checkpoint, "report that a job saved its work (from inside the job)"},
    {"events", cmd_events, "a job's events (--follow to wait for more)"},
    {"logs", cmd_logs, "a job's output (--follow until it ends)"},
    {"run", cmd_run, "submit, stream the output, exit with the job's code"},
    {"tenants", cmd_tenants, "the tenant tree and priority classes"},
    {"quota", cmd_quota, "quotas per tenant and resource"},
    {"apply", cmd_apply, "apply a tenants file (-f tenants.yaml [--prune])"},
    {"nodes", cmd_nodes, "registered nodes"},
    {"cordon", cmd_cordon, "no new jobs on nodes; running ones stay"},
    {"drain", cmd_drain, "no new jobs on nodes; running ones finish"},
    {"uncordon", cmd_uncordon, "make cordoned or draining nodes ready again"},
    {"delete-node", cmd_delete_node, "forget decommissioned (lost) nodes"},
    {"tokens", cmd_tokens, "API tokens: create, ls, revoke"},
    {"audit", cmd_audit, "the audit log: ls, verify"},
    {"top", cmd_top, "live view of GPUs per tenant and the queue"},
    {"usage", cmd_usage, "GPU, CPU and memory use by tenant, user, job, model, day"},
    {"invoice", cmd_invoice, "a month's invoice per tenant (-o json|csv|html)"},
    {"pricebook", cmd_pricebook, "the price book: show, apply -f FILE"},
    {"idle", cmd_idle, "running jobs holding GPUs they do not use"},
    {"anomalies", cmd_anomalies, "unusual tenant usage and job patterns"},
    {"plan", cmd_plan, "what if: replay the history on a changed cluster; --forecast"},
    {"scheduler", cmd_scheduler, "the scheduling options allotd runs with"},
};

#define N_VERBS (sizeof(verbs) / sizeof(verbs[0]))

static void usage(FILE *out)
{
    fputs("usage: allot [GLOBAL OPTIONS] VERB [OPTIONS] [ARGS]\n\n"
          "The command line of an allot cluster; talks to allotd's HTTP API.\n\nVerbs:\n",
          out);
    for (size_t i = 0; i < N_VERBS; i++)
        fprintf(out, "  %-11s %s\n", verbs[i].name, verbs[i].summary);
    fputs("\nGlobal options (before or after the verb):\n", out);
    conf_help(out);
    fputs("\nServer and token come from --server/--token, else ALLOT_SERVER/ALLOT_TOKEN,\n"
          "else ~/.config/allot/config (`server URL` and `token TOKEN` lines).\n"
          "Exit status: 0 ok, 1 usage, 2 not found, 3 denied, 4 conflict,\n"
          "5 server or connection error, 6 request refused as invalid, 7 audit chain\n"
          "broken. `allot VERB --help` describes a verb; docs/cli/ has a page per verb.\n",
          out);
}

/* The value of --config anywhere before `--`, or NULL. */
static const char *find_config(int argc, char **argv)
{
    const char *found = NULL;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            found = argv[++i];
        else if (!strncmp(argv[i], "--config=", 9))
            found = argv[i] + 9;
    }
    return found;
}

int main(int argc, char **argv)
{
    struct cli c = {0};
    const struct verb *v = NULL;
    int i, rc;

    /* a closed pipe (allot ls | head) ends the program quietly */
    signal(SIGPIPE, SIG_DFL);
    /* tables measure names in display columns (wide characters take two):
     * UTF-8 character classes only, numbers stay as in C */
    setlocale(LC_CTYPE, "C.UTF-8");
    if ((rc = conf_load(&c.conf, find_config(argc, argv))) != CLI_OK)
        goto out;
    /* global options before the verb */
    for (i = 1; i < argc && argv[i][0] == '-'; i++) {
        const char *arg = argv[i], *lname, *val = "";
        char name[64];
        bool needs;

        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            usage(stdout);
            goto out;
        }
        if (!strcmp(arg, "--version")) {
            puts("allot 0.1.0");
            goto out;
        }
        const char *eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
        allot_fmt(name, sizeof(name), "%.*s", (int)(eq ? eq - arg - 2 : (long)strlen(arg + 2)),
                  arg + 2);
        if (!conf_is_global(arg[1] == '-' ? name : NULL, arg[1] == '-' ? 0 : arg[1], &needs,
                            &lname)) {
            rc = cli_usage_error("unknown option %s (see allot --help)", arg);
            goto out;
        }
        if (needs) {
            if (eq)
                val = eq + 1;
            else if (arg[1] != '-' && arg[2])
                val = arg + 2;
            else if (i + 1 < argc)
                val = argv[++i];
            else {
                rc = cli_usage_error("option %s needs a value", arg);
                goto out;
            }
        }
        if (conf_set(&c.conf, lname, val) < 0) {
            rc = CLI_USAGE;
            goto out;
        }
    }
    allot_argv_hide(i, argv, "--token"); /* copied by conf_set */
    if (i >= argc) {
        usage(stderr);
        rc = CLI_USAGE;
        goto out;
    }
    if (!strcmp(argv[i], "help")) {
        if (i + 1 < argc) {
            char *h[] = {(char *)"--help", NULL};
            for (size_t k = 0; k < N_VERBS; k++)
                if (!strcmp(verbs[k].name, argv[i + 1]))
                    rc = verbs[k].run(&c, 1, h);
            if (rc == CLI_HELP)
                rc = CLI_OK;
            else
                rc = cli_usage_error("unknown verb `%s` (see allot --help)", argv[i + 1]);
        } else {
            usage(stdout);
        }
        goto out;
    }
    for (size_t k = 0; k < N_VERBS; k++)
        if (!strcmp(verbs[k].name, argv[i]))
            v = &verbs[k];
    if (!v) {
        rc = cli_usage_error("unknown verb `%s` (see allot --help)", argv[i]);
        goto out;
    }
    rc = v->run(&c, argc - i - 1, argv + i + 1);
    if (rc == CLI_HELP)
        rc = CLI_OK;
out:
    fflush(stdout);
    if (ferror(stdout) && rc == CLI_OK) {
        cli_error("output", "cannot write the output");
        rc = CLI_USAGE;
    }
    client_free(c.http);
    conf_free(&c.conf);
    return rc;
}

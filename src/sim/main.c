/*
 * allot-sim: the simulator's entry point. Dispatches to the subcommands
 *   fill   the openb fill experiment (fill_cli.c, docs/benchmarks.md)
 *   demo   the placement demo on a synthetic cluster (demo.c)
 *   replay the multi-tenant replay (replay.h, docs/replay.md)
 * and answers --help. Exit status: the subcommand's; 2 for a bad command
 * line (usage on stderr).
 */
#include "demo.h"
#include "fill_cli.h"
#include "replay.h"

#include <stdio.h>
#include <string.h>

static const struct sim_command {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"fill", sim_fill_main, "replay an openb trace under each policy (FGD paper's experiment)"},
    {"demo", sim_demo_main, "placement demo on a synthetic cluster"},
    {"replay", sim_replay_main, "replay a multi-tenant job trace under each queue policy"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: allot-sim COMMAND [options]\n"
               "The allot scheduling simulator.\n\n"
               "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nallot-sim COMMAND --help shows the options of a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].main(argc - 1, argv + 1);
    fprintf(stderr, "allot-sim: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}

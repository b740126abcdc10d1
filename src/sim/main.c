/*
 * allot-sim: replays workloads through liballot-core. Subcommands:
 *   demo   synthetic workload on a synthetic cluster, every policy
 */
#include "demo.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: allot-sim <command> [options]\n"
               "\n"
               "commands:\n"
               "  demo    place a synthetic mixed workload with every policy\n"
               "\n"
               "Run 'allot-sim <command> --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "demo"))
        return sim_demo_main(argc - 1, argv + 1);
    fprintf(stderr, "allot-sim: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}

/*
 * allot-sim demo: places a synthetic mixed workload on a synthetic cluster
 * with every policy and prints a comparison table.
 */
#ifndef ALLOT_SIM_DEMO_H
#define ALLOT_SIM_DEMO_H

/* Runs the demo with its command-line arguments (argv[0] is "demo").
 * Returns the process exit status. */
int sim_demo_main(int argc, char **argv);

#endif

/*
 * The `allot-sim fill` command line: its option table (cliopt.h), the
 * checks of every value and output path before anything runs, then the
 * experiment (fill.h), the offline reference (offline.h) and the report
 * (fill_report.h). Caller: main.c.
 */
#ifndef ALLOT_SIM_FILL_CLI_H
#define ALLOT_SIM_FILL_CLI_H

/* `allot-sim fill ARGS`: argv[0] is "fill". Returns the exit status: 0,
 * 1 (bad trace, failed run or write), 2 (bad arguments; usage on stderr). */
int sim_fill_main(int argc, char **argv);

#endif

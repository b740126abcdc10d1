/*
 * What allot-sim fill writes about a finished experiment: the table on
 * standard output (with the published figures and the offline reference
 * rows when there are some), the JSON curves and the SVG plot. The layout
 * of the table is fixed: docs and scripts read it. Callers: fill_cli.c.
 */
#ifndef ALLOT_SIM_FILL_REPORT_H
#define ALLOT_SIM_FILL_REPORT_H

#include "fill.h"
#include "fill_published.h"
#include "offline.h"

#include <stdint.h>

/* The arrived % points of the table's columns. */
extern const int sim_fill_table_points[];
#define SIM_FILL_N_POINTS 7

/*
 * Prints the table to stdout: a header line, then one row per policy of
 * sum[0..np) (IN) with the unallocated GPU % (mean±sd) at each table point,
 * the fragmentation rate at 100 % and the seconds; with `pub` (IN, may be
 * NULL) the published mean at 100 % and the difference. "-" where there
 * are no data.
 */
void sim_fill_print_table(const struct sim_fill_trace *t, const struct sim_fill_summary *sum,
                          int np, const struct sim_fill_published *pub, double tune);

/*
 * Prints the offline reference rows below the table: "offline" with the
 * unallocated GPU % (mean±sd over the seeds) at each table point and
 * `seconds`, then the GPU and CPU-only pods left out (mean per seed).
 * v (IN) holds n_seeds x SIM_FILL_N_POINTS results, seed-major
 * (sim_offline_fill_seeds() at sim_fill_table_points).
 */
void sim_fill_print_offline(const struct sim_fill_trace *t, const struct sim_offline_result *v,
                            int n_seeds, double seconds);

/*
 * Writes the curves as JSON to `path`; NaN (no data) is null. Reports a
 * failure on stderr ("allot-sim fill: PATH: ...") and returns 1; else 0.
 */
int sim_fill_write_json(const char *path, const struct sim_fill_trace *t,
                        const struct sim_fill_summary *sum, int np, const uint64_t *seeds, int ns,
                        double tune, uint64_t hash, const struct sim_fill_published *pub);

/*
 * Plots unallocated % against arrived % for every policy of sum[0..np)
 * to the SVG file `path`. Reports a failure on stderr and returns 1; else 0.
 */
int sim_fill_write_plot(const char *path, const struct sim_fill_trace *t,
                        const struct sim_fill_summary *sum, int np, int ns, double tune);

#endif

/*
 * Demand forecasting for `allot plan --forecast` (docs/planning.md):
 * additive Holt-Winters exponential smoothing (level, trend and a season
 * of fixed length) over a regular series, e.g. hourly GPU-hours of one
 * tenant and model. The smoothing constants are chosen from a small grid
 * by the least sum of squared one-step-ahead errors. Pure arithmetic: no
 * I/O, no allocation, no state; any thread.
 */
#ifndef ALLOT_SIM_FORECAST_H
#define ALLOT_SIM_FORECAST_H

#include <stddef.h>

/* The fitted model. */
struct forecast_fit {
    size_t season;             /* season length in steps; 0: none (Holt's linear trend) */
    double alpha, beta, gamma; /* smoothing of level, trend, season */
    double level, trend;       /* at the end of the series; trend per step */
    double sse;                /* sum of squared one-step-ahead errors */
};

#define FORECAST_MAX_SEASON 1024

/*
 * The season to use for n steps of `per_day` steps a day (24 hourly, 1
 * daily): a week when the series holds two weeks, else a day when it holds
 * two days (and a day is longer than one step), else none.
 */
size_t forecast_pick_season(size_t n, size_t per_day);

/*
 * Fits y[0..n) (IN, n >= 2) with a season of `season` steps (0, or
 * 2..FORECAST_MAX_SEASON with n >= 2 x season) and writes the `horizon`
 * steps after the series into out[0..horizon) (OUT; never below 0) and the
 * model into *fit (OUT, may be NULL). Returns 0, or ALLOT_EINVAL for a
 * series too short for its season or a value that is not finite.
 */
int forecast_holt_winters(const double *y, size_t n, size_t season, size_t horizon, double *out,
                          struct forecast_fit *fit);

#endif

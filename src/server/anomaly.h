/*
 * Anomaly tests (anomaly.c): pure functions over numbers, used by the
 * metering thread (meter.c) and unit-tested on their own.
 */
#ifndef ALLOT_SERVER_ANOMALY_H
#define ALLOT_SERVER_ANOMALY_H

#include <stdbool.h>
#include <stddef.h>

/* Fewest history points a robust z-score is computed from. */
#define ANOMALY_MIN_HISTORY 12

/*
 * Robust z-score of x against hist[0..n): 0.6745 (x - median) / MAD, the
 * median absolute deviation standing in for the standard deviation so that
 * earlier spikes do not hide a new one. When the MAD is 0 (at least half
 * the history equal), the mean absolute deviation x 1.2533 is used; when
 * that is 0 too, any x above the median scores `flat_z`. Returns false (z
 * untouched) with fewer than ANOMALY_MIN_HISTORY points or on no memory.
 */
bool anomaly_robust_z(const double *hist, size_t n, double x, double flat_z, double *z);

/*
 * An abrupt change between two stretches of one job's samples: the mean
 * of before[0..nb) against after[0..na) differs by at least min_delta
 * (both need 3 points). *from, *to get the two means.
 */
bool anomaly_shift(const double *before, size_t nb, const double *after, size_t na,
                   double min_delta, double *from, double *to);

#endif

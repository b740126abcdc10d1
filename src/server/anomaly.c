/*
 * Anomaly tests (see anomaly.h).
 */
#include "anomaly.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Median of v[0..n), n > 0; sorts v. */
static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

bool anomaly_robust_z(const double *hist, size_t n, double x, double flat_z, double *z)
{
    double *v, med, mad, mean_ad = 0;

    if (n < ANOMALY_MIN_HISTORY || !(v = malloc(n * sizeof(*v))))
        return false;
    memcpy(v, hist, n * sizeof(*v));
    med = median(v, n);
    for (size_t i = 0; i < n; i++) {
        v[i] = fabs(hist[i] - med);
        mean_ad += v[i];
    }
    mean_ad /= (double)n;
    mad = median(v, n);
    free(v);
    if (mad > 0)
        *z = 0.6745 * (x - med) / mad;
    else if (mean_ad > 0)
        *z = (x - med) / (1.2533 * mean_ad);
    else
        *z = x > med ? flat_z : 0.0;
    return true;
}

static double mean(const double *v, size_t n)
{
    double s = 0;

    for (size_t i = 0; i < n; i++)
        s += v[i];
    return s / (double)n;
}

bool anomaly_shift(const double *before, size_t nb, const double *after, size_t na,
                   double min_delta, double *from, double *to)
{
    if (nb < 3 || na < 3)
        return false;
    *from = mean(before, nb);
    *to = mean(after, na);
    return fabs(*to - *from) >= min_delta;
}

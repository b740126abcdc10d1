/*
 * Implementation of forecast.h. Additive Holt-Winters, as in Hyndman &
 * Athanasopoulos, "Forecasting: principles and practice", 8.3:
 *   level   l_t = a (y_t - s_{t-m}) + (1 - a)(l_{t-1} + b_{t-1})
 *   trend   b_t = b (l_t - l_{t-1}) + (1 - b) b_{t-1}
 *   season  s_t = g (y_t - l_t) + (1 - g) s_{t-m}
 *   forecast y_{n+h} = l_n + h b_n + s_{n-m+((h-1) mod m)+1}
 * started from the first two seasons (level: the first season's mean;
 * trend: the change of the mean per step between the two; season: the
 * first season's deviations from its mean). Without a season the same
 * recursions run with s = 0 (Holt's linear trend).
 */
#include "forecast.h"

#include "allot/common.h"

#include <math.h>
#include <string.h>

size_t forecast_pick_season(size_t n, size_t per_day)
{
    if (per_day >= 1 && 7 * per_day <= FORECAST_MAX_SEASON && n >= 14 * per_day)
        return 7 * per_day;
    if (per_day >= 2 && per_day <= FORECAST_MAX_SEASON && n >= 2 * per_day)
        return per_day;
    return 0;
}

/* One pass with constants a, b, g; the end state in *f. */
static void run(const double *y, size_t n, size_t m, double a, double b, double g, double *s,
                struct forecast_fit *f)
{
    double l, t, sse = 0;

    if (m) {
        double m1 = 0, m2 = 0;

        for (size_t i = 0; i < m; i++) {
            m1 += y[i];
            m2 += y[m + i];
        }
        m1 /= (double)m;
        m2 /= (double)m;
        l = m1;
        t = (m2 - m1) / (double)m;
        for (size_t i = 0; i < m; i++)
            s[i] = y[i] - m1;
        /* the first season set the start: smooth from the second on */
        for (size_t i = m; i < n; i++) {
            double *si = &s[i % m], pred = l + t + *si, l0 = l;

            sse += (y[i] - pred) * (y[i] - pred);
            l = a * (y[i] - *si) + (1 - a) * (l + t);
            t = b * (l - l0) + (1 - b) * t;
            *si = g * (y[i] - l) + (1 - g) * *si;
        }
    } else {
        l = y[0];
        t = y[1] - y[0];
        for (size_t i = 1; i < n; i++) {
            double pred = l + t, l0 = l;

            sse += (y[i] - pred) * (y[i] - pred);
            l = a * y[i] + (1 - a) * (l + t);
            t = b * (l - l0) + (1 - b) * t;
        }
    }
    f->season = m;
    f->alpha = a;
    f->beta = b;
    f->gamma = g;
    f->level = l;
    f->trend = t;
    f->sse = sse;
}

int forecast_holt_winters(const double *y, size_t n, size_t season, size_t horizon, double *out,
                          struct forecast_fit *fit)
{
    static const double as[] = {0.1, 0.3, 0.5, 0.8};
    static const double bs[] = {0.01, 0.05, 0.2};
    static const double gs[] = {0.05, 0.2, 0.5};
    double s[FORECAST_MAX_SEASON], best_s[FORECAST_MAX_SEASON];
    struct forecast_fit best = {.sse = INFINITY}, f;

    if (n < 2 || season == 1 || season > FORECAST_MAX_SEASON || (season && n < 2 * season))
        return ALLOT_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(y[i]))
            return ALLOT_EINVAL;
    for (size_t i = 0; i < sizeof(as) / sizeof(as[0]); i++)
        for (size_t j = 0; j < sizeof(bs) / sizeof(bs[0]); j++)
            for (size_t k = 0; k < (season ? sizeof(gs) / sizeof(gs[0]) : 1); k++) {
                run(y, n, season, as[i], bs[j], season ? gs[k] : 0, s, &f);
                if (f.sse < best.sse) {
                    best = f;
                    if (season)
                        memcpy(best_s, s, season * sizeof(*s));
                }
            }
    for (size_t h = 1; h <= horizon; h++) {
        double v = best.level + (double)h * best.trend;

        if (season)
            v += best_s[(n + h - 1) % season];
        out[h - 1] = v > 0 ? v : 0;
    }
    if (fit)
        *fit = best;
    return 0;
}

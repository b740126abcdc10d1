/*
 * A small line-plot writer that renders to a standalone SVG file, with no
 * library beyond libc: a title, axis labels (put the units in them), axes
 * with "nice" ticks and a grid, one polyline per named series, a legend box
 * to the right of the plot area, and optional labelled vertical marker lines
 * (e.g. at x = 100 labelled "arrived = 100 %").
 *
 * Usage: svgplot_new(), any number of svgplot_add_series() / _add_vline() /
 * _set_*(), then svgplot_write() or svgplot_render(), then svgplot_free().
 * The plot copies everything it is given (texts and points), so the caller's
 * arrays may be reused at once. Errors are sticky: a failed call returns its
 * error and also makes the later render/write fail with it, so a caller may
 * check only the final call; all calls accept the NULL of a failed
 * svgplot_new() and then return ALLOT_ENOMEM.
 *
 * Colours come from a fixed 10-colour palette (matplotlib's "tab10", easy to
 * tell apart); series 11-20 reuse it with a dash pattern, and so on. Points
 * that are not finite split a series' line. Output is deterministic.
 * A plot is a plain object with no shared state; one thread at a time.
 *
 * Used by the simulator and the benchmark drivers to chart results.
 */
#ifndef ALLOT_SIM_SVGPLOT_H
#define ALLOT_SIM_SVGPLOT_H

#include <stdbool.h>
#include <stddef.h>

struct svgplot;

/* Series flags for svgplot_add_series(). */
#define SVGPLOT_DASHED  0x1u /* draw the line dashed */
#define SVGPLOT_MARKERS 0x2u /* also draw a dot at each point */

/*
 * Creates an empty plot. `title`, `xlabel` and `ylabel` (IN, copied; NULL
 * reads as "") are plain text, escaped on output. Default size 800 x 500 px,
 * ranges automatic. Returns the plot (free with svgplot_free()) or NULL when
 * out of memory.
 */
struct svgplot *svgplot_new(const char *title, const char *xlabel, const char *ylabel);

/* Frees the plot and everything it copied; accepts NULL. */
void svgplot_free(struct svgplot *p);

/*
 * Adds a series named `name` (IN, copied, shown in the legend) with the `n`
 * points (x[i], y[i]) (IN, copied; may be NULL when n == 0), drawn in list
 * order with the next palette colour. `flags` is 0 or SVGPLOT_* bits.
 * Returns 0, ALLOT_EINVAL (NULL name or arrays, unknown flag) or
 * ALLOT_ENOMEM.
 */
int svgplot_add_series(struct svgplot *p, const char *name, const double *x, const double *y,
                       size_t n, unsigned flags);

/*
 * Adds a dashed vertical marker line at `x` with the text `label` (IN,
 * copied; NULL or "" for none) written at its top. Returns 0, ALLOT_EINVAL
 * (x not finite) or ALLOT_ENOMEM.
 */
int svgplot_add_vline(struct svgplot *p, double x, const char *label);

/*
 * Fixes the x (or y) axis range to lo..hi instead of fitting the data; data
 * outside it is clipped. Returns 0 or ALLOT_EINVAL (not finite or lo >= hi).
 */
int svgplot_set_xrange(struct svgplot *p, double lo, double hi);
int svgplot_set_yrange(struct svgplot *p, double lo, double hi);

/* Sets the image size in pixels, each 200..8000. Returns 0 or ALLOT_EINVAL. */
int svgplot_set_size(struct svgplot *p, int width, int height);

/*
 * Renders the plot into a new NUL-terminated buffer: *out (OUT, owned by the
 * caller, free with allot_free()) and its length without the NUL, *len (OUT,
 * may be NULL). The text starts with "<svg" and ends with "</svg>\n".
 * Returns 0, the plot's sticky error, ALLOT_ERANGE (data span too large to
 * draw) or ALLOT_ENOMEM; *out is NULL on failure.
 */
int svgplot_render(const struct svgplot *p, char **out, size_t *len);

/*
 * Renders the plot and writes it to the file `path` (IN), replacing it.
 * Returns 0, an error of svgplot_render(), or ALLOT_EIO; on failure `err`
 * (OUT, may be NULL when errlen is 0) receives "PATH: what went wrong".
 */
int svgplot_write(const struct svgplot *p, const char *path, char *err, size_t errlen);

#endif

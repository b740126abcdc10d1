/*
 * Implementation of svgplot.h: collects series and markers, then lays out and
 * writes one SVG document through a growing text buffer with a sticky error
 * (checked once when rendering ends).
 *
 * Layout, outside in: the title on top, the y label rotated on the left,
 * the y tick labels, the plot area (grid, series clipped to it, markers),
 * the x tick labels and x label below, and the legend box to the right of
 * the plot area so that it never hides data. Text widths are estimated from
 * the character count (about 0.6 em per character for sans-serif), which is
 * enough to size margins. Ticks use steps of 1, 2 or 5 x 10^k.
 */
#include "svgplot.h"

#include "allot/common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define FONT        12  /* px, ticks, labels and legend */
#define TITLE_FONT  16  /* px */
#define CHAR_W      7.2 /* estimated px per character at FONT */
#define MAX_TICKS   10  /* intervals per axis at most */
#define LEGEND_NAME 40  /* characters of a series name shown in the legend */
#define COORD_LIMIT 1e5 /* px; coordinates are clamped to +- this */

static const char *const palette[10] = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
};

static const char *const dashes[4] = {NULL, "7,4", "2,3", "9,3,2,3"};

struct series {
    char *name;     /* owned */
    double *xy;     /* owned: x[0..n-1] then y[0..n-1] */
    size_t n;       /* points */
    unsigned flags; /* SVGPLOT_* */
};

struct vline {
    double x;
    char *label; /* owned, may be "" */
};

struct svgplot {
    char *title, *xlabel, *ylabel; /* owned */
    int width, height;
    bool xfixed, yfixed; /* range set by the caller */
    double xlo, xhi, ylo, yhi;
    struct series *series; /* owned array */
    size_t nseries, capseries;
    struct vline *vlines; /* owned array */
    size_t nvlines, capvlines;
    int err; /* sticky: first error of a builder call */
};

/* ---- the output buffer ---- */

struct sbuf {
    char *p; /* owned, NUL-terminated when err == 0 */
    size_t len, cap;
    int err; /* sticky; once set, appends do nothing */
};

static void sb_reserve(struct sbuf *b, size_t extra)
{
    void *p = b->p;

    if (b->err)
        return;
    if (extra > SIZE_MAX - b->len - 1 || allot_grow(&p, &b->cap, b->len + extra + 1, 1) < 0) {
        b->err = ALLOT_ENOMEM;
        return;
    }
    b->p = p;
}

static void sb_vprintf(struct sbuf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void sb_vprintf(struct sbuf *b, const char *fmt, va_list ap)
{
    va_list again;
    int n;

    sb_reserve(b, 256);
    if (b->err)
        return;
    va_copy(again, ap);
    /* ap is initialised by sb_printf(); the analyzer loses track of it. */
    /* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized) */
    n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    if (n >= 0 && (size_t)n >= b->cap - b->len) {
        sb_reserve(b, (size_t)n + 1);
        if (!b->err)
            vsnprintf(b->p + b->len, b->cap - b->len, fmt, again);
    }
    va_end(again);
    if (n < 0)
        b->err = ALLOT_EINTERNAL;
    if (!b->err)
        b->len += (size_t)n;
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
    sb_reserve(b, n);
    if (b->err)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when invalid. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n, i;
    unsigned c = s[0];

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0;
    for (i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    /* Overlong forms, surrogates and code points past U+10FFFF. */
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] >= 0x90))
        return 0;
    return n;
}

/* Appends text `s` escaped for XML, at most `max` characters ("..." when
 * cut). Control bytes and invalid UTF-8 become '?'. */
static void sb_text(struct sbuf *b, const char *s, size_t max)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t chars = 0;

    while (*u) {
        size_t n = utf8_len(u);

        if (chars == max) {
            sb_put(b, "...", 3);
            return;
        }
        if (n == 0 || (*u < 0x20 && *u != '\t')) {
            sb_put(b, "?", 1);
            n = 1;
        } else if (*u == '&') {
            sb_put(b, "&amp;", 5);
        } else if (*u == '<') {
            sb_put(b, "&lt;", 4);
        } else if (*u == '>') {
            sb_put(b, "&gt;", 4);
        } else if (*u == '"') {
            sb_put(b, "&quot;", 6);
        } else if (*u == '\'') {
            sb_put(b, "&#39;", 5);
        } else {
            sb_put(b, (const char *)u, n);
        }
        u += n;
        chars++;
    }
}

/* Number of characters (UTF-8 sequences) in s, capped at max + 3. */
static size_t text_chars(const char *s, size_t max)
{
    size_t n = 0;

    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80)
            n++;
    return n > max ? max + 3 : n;
}

/* ---- building the plot ---- */

static int set_err(struct svgplot *p, int rc)
{
    if (p && rc < 0 && p->err == 0)
        p->err = rc;
    return rc;
}

struct svgplot *svgplot_new(const char *title, const char *xlabel, const char *ylabel)
{
    struct svgplot *p = allot_calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    p->width = 800;
    p->height = 500;
    p->title = allot_strdup(title ? title : "");
    p->xlabel = allot_strdup(xlabel ? xlabel : "");
    p->ylabel = allot_strdup(ylabel ? ylabel : "");
    if (!p->title || !p->xlabel || !p->ylabel) {
        svgplot_free(p);
        return NULL;
    }
    return p;
}

void svgplot_free(struct svgplot *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nseries; i++) {
        allot_free(p->series[i].name);
        allot_free(p->series[i].xy);
    }
    for (size_t i = 0; i < p->nvlines; i++)
        allot_free(p->vlines[i].label);
    allot_free(p->series);
    allot_free(p->vlines);
    allot_free(p->title);
    allot_free(p->xlabel);
    allot_free(p->ylabel);
    allot_free(p);
}

int svgplot_add_series(struct svgplot *p, const char *name, const double *x, const double *y,
                       size_t n, unsigned flags)
{
    struct series s = {.n = n, .flags = flags};
    void *arr;

    if (!p)
        return ALLOT_ENOMEM;
    if (!name || (n && (!x || !y)) || (flags & ~(SVGPLOT_DASHED | SVGPLOT_MARKERS)))
        return set_err(p, ALLOT_EINVAL);
    if (n > SIZE_MAX / (2 * sizeof(double)))
        return set_err(p, ALLOT_ENOMEM);
    arr = p->series;
    if (allot_grow(&arr, &p->capseries, p->nseries + 1, sizeof(*p->series)) < 0)
        return set_err(p, ALLOT_ENOMEM);
    p->series = arr;
    s.name = allot_strdup(name);
    s.xy = allot_malloc(2 * n * sizeof(double));
    if (!s.name || !s.xy) {
        allot_free(s.name);
        allot_free(s.xy);
        return set_err(p, ALLOT_ENOMEM);
    }
    if (n) {
        memcpy(s.xy, x, n * sizeof(double));
        memcpy(s.xy + n, y, n * sizeof(double));
    }
    p->series[p->nseries++] = s;
    return 0;
}

int svgplot_add_vline(struct svgplot *p, double x, const char *label)
{
    struct vline v = {.x = x};
    void *arr;

    if (!p)
        return ALLOT_ENOMEM;
    if (!isfinite(x))
        return set_err(p, ALLOT_EINVAL);
    arr = p->vlines;
    if (allot_grow(&arr, &p->capvlines, p->nvlines + 1, sizeof(*p->vlines)) < 0)
        return set_err(p, ALLOT_ENOMEM);
    p->vlines = arr;
    v.label = allot_strdup(label ? label : "");
    if (!v.label)
        return set_err(p, ALLOT_ENOMEM);
    p->vlines[p->nvlines++] = v;
    return 0;
}

static bool range_ok(double lo, double hi)
{
    return isfinite(lo) && isfinite(hi) && lo < hi && isfinite(hi - lo);
}

int svgplot_set_xrange(struct svgplot *p, double lo, double hi)
{
    if (!p)
        return ALLOT_ENOMEM;
    if (!range_ok(lo, hi))
        return set_err(p, ALLOT_EINVAL);
    p->xfixed = true;
    p->xlo = lo;
    p->xhi = hi;
    return 0;
}

int svgplot_set_yrange(struct svgplot *p, double lo, double hi)
{
    if (!p)
        return ALLOT_ENOMEM;
    if (!range_ok(lo, hi))
        return set_err(p, ALLOT_EINVAL);
    p->yfixed = true;
    p->ylo = lo;
    p->yhi = hi;
    return 0;
}

int svgplot_set_size(struct svgplot *p, int width, int height)
{
    if (!p)
        return ALLOT_ENOMEM;
    if (width < 200 || width > 8000 || height < 200 || height > 8000)
        return set_err(p, ALLOT_EINVAL);
    p->width = width;
    p->height = height;
    return 0;
}

/* ---- axes ---- */

struct axis {
    double lo, hi; /* drawn range */
    double step;   /* tick spacing */
    double first;  /* first tick >= lo */
    int nticks;
    int decimals; /* for tick labels; -1: use %g */
};

/* Smallest step of 1, 2 or 5 x 10^k with span / step <= maxint; sets the
 * label decimals it needs. */
static void nice_step(struct axis *a, double span, int maxint)
{
    double raw = span / maxint, mag = pow(10.0, floor(log10(raw))), step;
    int k;

    if (raw / mag <= 1.0)
        step = mag;
    else if (raw / mag <= 2.0)
        step = 2 * mag;
    else if (raw / mag <= 5.0)
        step = 5 * mag;
    else
        step = 10 * mag;
    a->step = step;
    k = (int)floor(log10(step) + 1e-9);
    a->decimals = k >= 0 ? 0 : -k;
    if (k < -6 || k > 7)
        a->decimals = -1;
}

/*
 * Fits an axis to data min..max (auto: widened to whole ticks) or to the
 * fixed lo..hi. Returns 0 or ALLOT_ERANGE when the span cannot be drawn.
 */
static int axis_fit(struct axis *a, bool fixed, double lo, double hi, double dmin, double dmax,
                    int maxint)
{
    if (fixed) {
        a->lo = lo;
        a->hi = hi;
    } else {
        if (dmin > dmax) { /* no finite data */
            dmin = 0;
            dmax = 1;
        }
        if (dmin == dmax) {
            double d = dmin != 0 ? fabs(dmin) * 0.1 : 1;

            dmin -= d;
            dmax += d;
        }
        a->lo = dmin;
        a->hi = dmax;
    }
    if (!range_ok(a->lo, a->hi) || (a->hi - a->lo) < fabs(a->hi) * 1e-12)
        return ALLOT_ERANGE;
    nice_step(a, a->hi - a->lo, maxint);
    if (!fixed) {
        a->lo = floor(a->lo / a->step) * a->step;
        a->hi = ceil(a->hi / a->step) * a->step;
        if (!range_ok(a->lo, a->hi))
            return ALLOT_ERANGE;
    }
    a->first = ceil(a->lo / a->step - 1e-9) * a->step;
    a->nticks = (int)floor((a->hi - a->first) / a->step + 1e-9) + 1;
    if (a->nticks < 0 || a->nticks > 4 * MAX_TICKS)
        return ALLOT_ERANGE;
    return 0;
}

static double tick_value(const struct axis *a, int i)
{
    double v = a->first + i * a->step;

    return fabs(v) < a->step * 1e-9 ? 0.0 : v; /* no "-0" */
}

static void fmt_tick(char *buf, size_t size, const struct axis *a, double v)
{
    if (a->decimals < 0)
        allot_fmt(buf, size, "%g", v);
    else
        allot_fmt(buf, size, "%.*f", a->decimals, v);
}

/* Widest tick label of an axis, in characters. */
static size_t tick_chars(const struct axis *a)
{
    char buf[64];
    size_t w = 1;

    for (int i = 0; i < a->nticks; i++) {
        fmt_tick(buf, sizeof(buf), a, tick_value(a, i));
        if (strlen(buf) > w)
            w = strlen(buf);
    }
    return w;
}

/* ---- rendering ---- */

struct frame {
    double left, right, top, bottom; /* plot area, px */
    struct axis x, y;
};

static double clampc(double v)
{
    return v < -COORD_LIMIT ? -COORD_LIMIT : v > COORD_LIMIT ? COORD_LIMIT : v;
}

static double px(const struct frame *f, double x)
{
    return clampc(f->left + (x - f->x.lo) / (f->x.hi - f->x.lo) * (f->right - f->left));
}

static double py(const struct frame *f, double y)
{
    return clampc(f->bottom - (y - f->y.lo) / (f->y.hi - f->y.lo) * (f->bottom - f->top));
}

/* Stroke attributes of series i: colour and optional dash pattern. */
static void series_stroke(struct sbuf *b, const struct svgplot *p, size_t i)
{
    size_t d = (i / 10 + ((p->series[i].flags & SVGPLOT_DASHED) ? 1 : 0)) % 4;

    if (d == 0 && (p->series[i].flags & SVGPLOT_DASHED))
        d = 1;
    sb_printf(b, " stroke=\"%s\"", palette[i % 10]);
    if (dashes[d])
        sb_printf(b, " stroke-dasharray=\"%s\"", dashes[d]);
}

/* Data extent over all finite points and markers. */
static void data_extent(const struct svgplot *p, double *xmin, double *xmax, double *ymin,
                        double *ymax)
{
    *xmin = *ymin = INFINITY;
    *xmax = *ymax = -INFINITY;
    for (size_t i = 0; i < p->nseries; i++) {
        const struct series *s = &p->series[i];

        for (size_t k = 0; k < s->n; k++) {
            double x = s->xy[k], y = s->xy[s->n + k];

            if (!isfinite(x) || !isfinite(y))
                continue;
            *xmin = fmin(*xmin, x);
            *xmax = fmax(*xmax, x);
            *ymin = fmin(*ymin, y);
            *ymax = fmax(*ymax, y);
        }
    }
    for (size_t i = 0; i < p->nvlines; i++) {
        *xmin = fmin(*xmin, p->vlines[i].x);
        *xmax = fmax(*xmax, p->vlines[i].x);
    }
}

/* Lays out margins and axes. Returns 0 or ALLOT_ERANGE. */
static int layout(const struct svgplot *p, struct frame *f, double *legend_w)
{
    double xmin, xmax, ymin, ymax, lw = 0;
    size_t names = 0;
    int rc, xint;

    data_extent(p, &xmin, &xmax, &ymin, &ymax);
    for (size_t i = 0; i < p->nseries; i++) {
        size_t c = text_chars(p->series[i].name, LEGEND_NAME);

        names = c > names ? c : names;
    }
    if (p->nseries)
        lw = 12 + 28 + 8 + names * CHAR_W + 12;
    *legend_w = lw;
    f->top = p->title[0] ? 44 : 16;
    f->bottom = p->height - (p->xlabel[0] ? 52 : 32);
    if ((rc = axis_fit(&f->y, p->yfixed, p->ylo, p->yhi, ymin, ymax, MAX_TICKS)) < 0)
        return rc;
    f->left = (p->ylabel[0] ? 34 : 10) + tick_chars(&f->y) * CHAR_W + 8;
    f->right = p->width - 16 - (lw > 0 ? lw + 12 : 0);
    if (f->right - f->left < 100) /* long legend names on a small image */
        f->right = f->left + 100;
    /* Room for about 7 characters per x tick label. */
    xint = (int)((f->right - f->left) / 60);
    xint = xint < 2 ? 2 : xint > MAX_TICKS ? MAX_TICKS : xint;
    return axis_fit(&f->x, p->xfixed, p->xlo, p->xhi, xmin, xmax, xint);
}

static void render_axes(struct sbuf *b, const struct svgplot *p, const struct frame *f)
{
    char buf[64];

    sb_printf(b, "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n");
    for (int i = 0; i < f->x.nticks; i++) {
        double x = px(f, tick_value(&f->x, i));

        sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, f->top, x,
                  f->bottom);
    }
    for (int i = 0; i < f->y.nticks; i++) {
        double y = py(f, tick_value(&f->y, i));

        sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", f->left, y,
                  f->right, y);
    }
    sb_printf(b, "</g>\n");
    sb_printf(b,
              "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
              "stroke=\"#333\" stroke-width=\"1\"/>\n",
              f->left, f->top, f->right - f->left, f->bottom - f->top);
    sb_printf(b, "<g stroke=\"#333\" stroke-width=\"1\">\n");
    for (int i = 0; i < f->x.nticks; i++) {
        double x = px(f, tick_value(&f->x, i));

        sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, f->bottom, x,
                  f->bottom + 5);
    }
    for (int i = 0; i < f->y.nticks; i++) {
        double y = py(f, tick_value(&f->y, i));

        sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", f->left - 5, y,
                  f->left, y);
    }
    sb_printf(b, "</g>\n<g fill=\"#222\">\n");
    for (int i = 0; i < f->x.nticks; i++) {
        double v = tick_value(&f->x, i);

        fmt_tick(buf, sizeof(buf), &f->x, v);
        sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%s</text>\n", px(f, v),
                  f->bottom + 8 + FONT, buf);
    }
    for (int i = 0; i < f->y.nticks; i++) {
        double v = tick_value(&f->y, i);

        fmt_tick(buf, sizeof(buf), &f->y, v);
        sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\">%s</text>\n", f->left - 8,
                  py(f, v) + FONT * 0.35, buf);
    }
    if (p->xlabel[0]) {
        sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">",
                  (f->left + f->right) / 2, f->bottom + 24 + FONT);
        sb_text(b, p->xlabel, SIZE_MAX);
        sb_printf(b, "</text>\n");
    }
    if (p->ylabel[0]) {
        double x = 18, y = (f->top + f->bottom) / 2;

        sb_printf(b,
                  "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" "
                  "transform=\"rotate(-90 %.2f %.2f)\">",
                  x, y, x, y);
        sb_text(b, p->ylabel, SIZE_MAX);
        sb_printf(b, "</text>\n");
    }
    sb_printf(b, "</g>\n");
}

static void render_series(struct sbuf *b, const struct svgplot *p, const struct frame *f)
{
    sb_printf(b, "<g clip-path=\"url(#plotarea)\" fill=\"none\" stroke-width=\"2\" "
                 "stroke-linejoin=\"round\">\n");
    for (size_t i = 0; i < p->nseries; i++) {
        const struct series *s = &p->series[i];
        bool open = false;

        /* One polyline per run of finite points. */
        for (size_t k = 0; k < s->n; k++) {
            double x = s->xy[k], y = s->xy[s->n + k];

            if (!isfinite(x) || !isfinite(y)) {
                if (open)
                    sb_printf(b, "\"/>\n");
                open = false;
                continue;
            }
            if (!open) {
                sb_printf(b, "<polyline");
                series_stroke(b, p, i);
                sb_printf(b, " points=\"");
            } else {
                sb_put(b, " ", 1);
            }
            sb_printf(b, "%.2f,%.2f", px(f, x), py(f, y));
            open = true;
        }
        if (open)
            sb_printf(b, "\"/>\n");
        if (s->flags & SVGPLOT_MARKERS) {
            sb_printf(b, "<g fill=\"%s\" stroke=\"none\">\n", palette[i % 10]);
            for (size_t k = 0; k < s->n; k++) {
                double x = s->xy[k], y = s->xy[s->n + k];

                if (isfinite(x) && isfinite(y))
                    sb_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\"/>\n", px(f, x), py(f, y));
            }
            sb_printf(b, "</g>\n");
        }
    }
    sb_printf(b, "</g>\n");
}

static void render_vlines(struct sbuf *b, const struct svgplot *p, const struct frame *f)
{
    for (size_t i = 0; i < p->nvlines; i++) {
        const struct vline *v = &p->vlines[i];
        double x = px(f, v->x), y = f->top + 16 + 18 * (double)(i % 8);
        double w = text_chars(v->label, SIZE_MAX - 3) * CHAR_W;
        bool left = x + 6 + w > f->right; /* label would leave the plot: put it left */

        if (x < f->left - 0.01 || x > f->right + 0.01)
            continue; /* outside a fixed x range */
        sb_printf(b,
                  "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#444\" "
                  "stroke-width=\"1.5\" stroke-dasharray=\"5,4\"/>\n",
                  x, f->top, x, f->bottom);
        if (!v->label[0])
            continue;
        sb_printf(b,
                  "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%d\" fill=\"white\" "
                  "fill-opacity=\"0.85\"/>\n",
                  left ? x - 6 - w - 2 : x + 4, y - FONT, w + 4, FONT + 4);
        sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"%s\" fill=\"#222\">",
                  left ? x - 6 : x + 6, y, left ? "end" : "start");
        sb_text(b, v->label, SIZE_MAX);
        sb_printf(b, "</text>\n");
    }
}

static void render_legend(struct sbuf *b, const struct svgplot *p, const struct frame *f, double w)
{
    double x = f->right + 12, y = f->top, rowh = 18;

    if (!p->nseries)
        return;
    sb_printf(b,
              "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"white\" "
              "stroke=\"#999\" stroke-width=\"1\"/>\n",
              x, y, w, 8 + rowh * (double)p->nseries);
    for (size_t i = 0; i < p->nseries; i++) {
        double cy = y + 4 + rowh * (double)i + rowh / 2;

        sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke-width=\"2\"",
                  x + 12, cy, x + 40, cy);
        series_stroke(b, p, i);
        sb_printf(b, "/>\n");
        if (p->series[i].flags & SVGPLOT_MARKERS)
            sb_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n", x + 26, cy,
                      palette[i % 10]);
        sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" fill=\"#222\">", x + 48, cy + FONT * 0.35);
        sb_text(b, p->series[i].name, LEGEND_NAME);
        sb_printf(b, "</text>\n");
    }
}

int svgplot_render(const struct svgplot *p, char **out, size_t *len)
{
    struct sbuf b = {0};
    struct frame f;
    double legend_w;
    int rc;

    *out = NULL;
    if (len)
        *len = 0;
    if (!p)
        return ALLOT_ENOMEM;
    if (p->err)
        return p->err;
    if ((rc = layout(p, &f, &legend_w)) < 0)
        return rc;
    sb_printf(&b,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
              "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
              "font-size=\"%d\">\n",
              p->width, p->height, p->width, p->height, FONT);
    sb_printf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    sb_printf(&b,
              "<defs><clipPath id=\"plotarea\"><rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
              "height=\"%.2f\"/></clipPath></defs>\n",
              f.left, f.top, f.right - f.left, f.bottom - f.top);
    if (p->title[0]) {
        sb_printf(&b,
                  "<text x=\"%.2f\" y=\"28\" text-anchor=\"middle\" font-size=\"%d\" "
                  "font-weight=\"bold\" fill=\"#222\">",
                  p->width / 2.0, TITLE_FONT);
        sb_text(&b, p->title, SIZE_MAX);
        sb_printf(&b, "</text>\n");
    }
    render_axes(&b, p, &f);
    render_series(&b, p, &f);
    render_vlines(&b, p, &f);
    render_legend(&b, p, &f, legend_w);
    sb_printf(&b, "</svg>\n");
    if (b.err) {
        allot_free(b.p);
        return b.err;
    }
    *out = b.p;
    if (len)
        *len = b.len;
    return 0;
}

int svgplot_write(const struct svgplot *p, const char *path, char *err, size_t errlen)
{
    char *text;
    size_t len;
    FILE *f;
    int rc;

    if (err && errlen)
        err[0] = '\0';
    if ((rc = svgplot_render(p, &text, &len)) < 0) {
        if (err && errlen)
            allot_fmt(err, errlen, "%s: %s", path, allot_strerror(rc));
        return rc;
    }
    f = fopen(path, "wb");
    if (!f) {
        rc = ALLOT_EIO;
        if (err && errlen)
            allot_fmt(err, errlen, "%s: %s", path, strerror(errno));
        goto out_text;
    }
    if (fwrite(text, 1, len, f) != len) {
        rc = ALLOT_EIO;
        if (err && errlen)
            allot_fmt(err, errlen, "%s: %s", path, strerror(errno));
        fclose(f);
        goto out_text;
    }
    if (fclose(f) != 0) {
        rc = ALLOT_EIO;
        if (err && errlen)
            allot_fmt(err, errlen, "%s: %s", path, strerror(errno));
    }
out_text:
    allot_free(text);
    return rc;
}

/*
 * Unit tests for src/sim/svgplot.c: a two-series plot rendered and checked
 * for shape (root element, legend names, escaping, point counts), ranges,
 * bad arguments and the sticky error, writing to a file, and an
 * allocation-failure loop. Set SVGPLOT_SAMPLE=path to also write a sample
 * chart for looking at.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allot/common.h"
#include "svgplot.h"

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;

    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* Number of "x,y" pairs in the points attribute of the k-th polyline. */
static size_t polyline_points(const char *svg, size_t k)
{
    const char *p = svg;
    size_t n = 0;

    for (size_t i = 0; i <= k; i++) {
        p = strstr(p, "<polyline");
        assert_non_null(p);
        p++;
    }
    p = strstr(p, "points=\"");
    assert_non_null(p);
    for (p += 8; *p != '"'; p++)
        n += *p == ',';
    return n;
}

/* An allocation chart like the openb fill experiment's. */
static struct svgplot *sample_plot(void)
{
    static double x[131], a[131], b[131];
    struct svgplot *p;

    for (int i = 0; i <= 130; i++) {
        x[i] = i;
        a[i] = i <= 90 ? i : 90 + 5 * (1 - exp(-(i - 90) / 10.0));
        b[i] = i <= 85 ? i : 85 + 8 * (1 - exp(-(i - 85) / 12.0));
    }
    p = svgplot_new("GPU allocation, openb default <trace> & co", "arrived GPU requests (%)",
                    "allocated GPUs (%)");
    svgplot_add_series(p, "FGD", x, a, 131, 0);
    svgplot_add_series(p, "BestFit <ref>", x, b, 131, SVGPLOT_DASHED);
    svgplot_add_vline(p, 100, "arrived = 100 %");
    return p;
}

static void test_render_two_series(void **state)
{
    struct svgplot *p = sample_plot();
    char *svg;
    size_t len;

    (void)state;
    assert_non_null(p);
    assert_int_equal(svgplot_render(p, &svg, &len), 0);
    assert_int_equal(strlen(svg), len);
    assert_int_equal(strncmp(svg, "<svg", 4), 0);
    assert_true(len > 8);
    assert_string_equal(svg + len - 7, "</svg>\n");
    assert_non_null(strstr(svg, ">FGD</text>"));
    assert_non_null(strstr(svg, ">BestFit &lt;ref&gt;</text>"));
    assert_non_null(strstr(svg, "openb default &lt;trace&gt; &amp; co"));
    assert_non_null(strstr(svg, "arrived GPU requests (%)"));
    assert_non_null(strstr(svg, "allocated GPUs (%)"));
    assert_non_null(strstr(svg, ">arrived = 100 %</text>"));
    assert_null(strstr(svg, "<ref>"));
    assert_int_equal(count(svg, "<polyline"), 2);
    assert_int_equal(polyline_points(svg, 0), 131);
    assert_int_equal(polyline_points(svg, 1), 131);
    assert_int_equal(count(svg, "<svg"), 1);
    assert_int_equal(count(svg, "<text"), count(svg, "</text>"));
    assert_int_equal(count(svg, "<g"), count(svg, "</g>"));
    assert_non_null(strstr(svg, "stroke=\"#1f77b4\""));
    assert_non_null(strstr(svg, "stroke=\"#ff7f0e\" stroke-dasharray"));
    /* Auto ranges end on whole ticks: 0..140 by 20 and 0..100 by 10. */
    assert_non_null(strstr(svg, ">140</text>"));
    assert_non_null(strstr(svg, ">100</text>"));
    assert_null(strstr(svg, ">160</text>"));
    /* Deterministic. */
    {
        char *again;

        assert_int_equal(svgplot_render(p, &again, NULL), 0);
        assert_string_equal(svg, again);
        allot_free(again);
    }
    allot_free(svg);
    svgplot_free(p);
}

static void test_ranges_and_gaps(void **state)
{
    static const double x[] = {0, 0.1, 0.2, NAN, 0.4, 0.5};
    static const double y[] = {0.001, 0.002, 0.0015, 1, 0.003, INFINITY};
    struct svgplot *p = svgplot_new(NULL, NULL, NULL);
    char *svg;

    (void)state;
    assert_int_equal(svgplot_add_series(p, "s", x, y, 6, SVGPLOT_MARKERS), 0);
    assert_int_equal(svgplot_render(p, &svg, NULL), 0);
    /* The NaN splits the line; the infinite point is dropped. */
    assert_int_equal(count(svg, "<polyline"), 2);
    assert_int_equal(polyline_points(svg, 0), 3);
    assert_int_equal(polyline_points(svg, 1), 1);
    assert_int_equal(count(svg, "<circle"), 4 + 1); /* points + legend */
    assert_non_null(strstr(svg, ">0.0030</text>"));
    assert_null(strstr(svg, "-0"));
    allot_free(svg);

    assert_int_equal(svgplot_set_xrange(p, -1000, 5000), 0);
    assert_int_equal(svgplot_set_yrange(p, 1e9, 2e9), 0);
    assert_int_equal(svgplot_render(p, &svg, NULL), 0);
    assert_non_null(strstr(svg, ">-1000</text>"));
    assert_non_null(strstr(svg, ">5000</text>"));
    assert_non_null(strstr(svg, ">2e+09</text>"));
    allot_free(svg);
    assert_int_equal(svgplot_set_size(p, 400, 300), 0);
    assert_int_equal(svgplot_render(p, &svg, NULL), 0);
    assert_non_null(strstr(svg, "width=\"400\" height=\"300\""));
    allot_free(svg);
    svgplot_free(p);

    /* No data at all still draws axes; one point gets a range around it. */
    p = svgplot_new("empty", "x", "y");
    assert_int_equal(svgplot_render(p, &svg, NULL), 0);
    assert_null(strstr(svg, "<polyline"));
    allot_free(svg);
    assert_int_equal(svgplot_add_series(p, "one", (double[]){5}, (double[]){-7}, 1, 0), 0);
    assert_int_equal(svgplot_add_series(p, "none", NULL, NULL, 0, 0), 0);
    assert_int_equal(svgplot_render(p, &svg, NULL), 0);
    assert_non_null(strstr(svg, ">none</text>"));
    allot_free(svg);
    svgplot_free(p);
}

static void test_many_series_and_hostile_text(void **state)
{
    struct svgplot *p = svgplot_new("t\x01\xff\xc3\xa9", "x", "y");
    double x[2] = {0, 1}, y[2];
    char name[64], *svg;

    (void)state;
    for (int i = 0; i < 23; i++) {
        y[0] = i;
        y[1] = i + 1;
        allot_fmt(name, sizeof(name), "series %d \"q\" 'a'", i);
        assert_int_equal(svgplot_add_series(p, name, x, y, 2, i == 3 ? SVGPLOT_DASHED : 0), 0);
    }
    assert_int_equal(
        svgplot_add_series(p, "a very long series name that goes on and on and on", x, y, 2, 0), 0);
    assert_int_equal(svgplot_render(p, &svg, NULL), 0);
    assert_non_null(strstr(svg, ">t??\xc3\xa9</text>"));
    assert_non_null(strstr(svg, "series 0 &quot;q&quot; &#39;a&#39;"));
    assert_non_null(strstr(svg, ">a very long series name that goes on and...</text>"));
    assert_int_equal(count(svg, "<polyline"), 24);
    /* Series 11.. reuse colours with a dash pattern. */
    assert_int_equal(count(svg, "stroke=\"#1f77b4\""), 3 * 2 + 0);
    allot_free(svg);
    svgplot_free(p);
}

static void test_bad_arguments_sticky(void **state)
{
    struct svgplot *p = svgplot_new("t", "x", "y");
    double v[1] = {1};
    char *svg = (char *)1, err[256];

    (void)state;
    assert_int_equal(svgplot_set_xrange(p, 1, 1), ALLOT_EINVAL);
    assert_int_equal(svgplot_set_yrange(p, NAN, 1), ALLOT_EINVAL);
    assert_int_equal(svgplot_set_size(p, 10, 300), ALLOT_EINVAL);
    assert_int_equal(svgplot_add_vline(p, INFINITY, "x"), ALLOT_EINVAL);
    assert_int_equal(svgplot_add_series(p, NULL, v, v, 1, 0), ALLOT_EINVAL);
    assert_int_equal(svgplot_add_series(p, "s", NULL, v, 1, 0), ALLOT_EINVAL);
    assert_int_equal(svgplot_add_series(p, "s", v, v, 1, 0x100), ALLOT_EINVAL);
    /* The first error sticks and fails the render. */
    assert_int_equal(svgplot_render(p, &svg, NULL), ALLOT_EINVAL);
    assert_null(svg);
    assert_int_equal(svgplot_write(p, "/tmp/never.svg", err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "/tmp/never.svg: "));
    svgplot_free(p);

    /* A NULL plot (failed svgplot_new) reads as out of memory everywhere. */
    assert_int_equal(svgplot_add_series(NULL, "s", v, v, 1, 0), ALLOT_ENOMEM);
    assert_int_equal(svgplot_add_vline(NULL, 1, "x"), ALLOT_ENOMEM);
    assert_int_equal(svgplot_render(NULL, &svg, NULL), ALLOT_ENOMEM);
    svgplot_free(NULL);

    /* A span too large to draw. */
    p = svgplot_new("t", "x", "y");
    assert_int_equal(svgplot_add_series(p, "s", (double[]){-1e308, 1e308}, (double[]){1, 2}, 2, 0),
                     0);
    assert_int_equal(svgplot_render(p, &svg, NULL), ALLOT_ERANGE);
    svgplot_free(p);
}

static void test_write(void **state)
{
    struct svgplot *p = sample_plot();
    char path[] = "/tmp/test_svgplot_XXXXXX", err[256], buf[8];
    const char *sample = getenv("SVGPLOT_SAMPLE");
    FILE *f;
    int fd;

    (void)state;
    fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(svgplot_write(p, path, err, sizeof(err)), 0);
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, 4, f), 4);
    fclose(f);
    assert_memory_equal(buf, "<svg", 4);
    unlink(path);
    assert_int_equal(svgplot_write(p, "/nonexistent-dir/x.svg", err, sizeof(err)), ALLOT_EIO);
    assert_non_null(strstr(err, "/nonexistent-dir/x.svg: No such file or directory"));
    if (sample)
        assert_int_equal(svgplot_write(p, sample, err, sizeof(err)), 0);
    svgplot_free(p);
}

static void test_alloc_failures(void **state)
{
    unsigned long n;

    (void)state;
    for (n = 1;; n++) {
        struct svgplot *p;
        char *svg = NULL;
        size_t len;
        int rc;

        /* The whole build-and-render sequence, checked once at the end. */
        allot_alloc_fail_at(n, false);
        p = sample_plot();
        rc = svgplot_render(p, &svg, &len);
        allot_alloc_fail_at(0, false);
        svgplot_free(p);
        if (rc == 0) {
            assert_int_equal(strncmp(svg, "<svg", 4), 0);
            allot_free(svg);
            break;
        }
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_null(svg);
    }
    assert_true(n > 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_two_series),
        cmocka_unit_test(test_ranges_and_gaps),
        cmocka_unit_test(test_many_series_and_hostile_text),
        cmocka_unit_test(test_bad_arguments_sticky),
        cmocka_unit_test(test_write),
        cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Implementation of csvread.h: the file loading, line splitting, header
 * matching and number parsing shared by the simulator's strict trace
 * readers (openb.c, philly.c).
 *
 * A reader walks its text once, splitting each line in place: commas and the
 * line end become NUL bytes, which is why the text needs one writable byte
 * past its end. Errors are formatted into the caller's buffer at the point of
 * failure, so every message names the file and, for line errors, the line.
 */
#include "csvread.h"

#include "allot/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void vreport(const char *file, size_t line, char *err, size_t errlen, const char *fmt,
                    va_list ap) __attribute__((format(printf, 5, 0)));

/* Writes "FILE: msg" (line == 0) or "FILE:LINE: msg" to the caller's buffer. */
static void vreport(const char *file, size_t line, char *err, size_t errlen, const char *fmt,
                    va_list ap)
{
    int n;

    if (!err || errlen == 0)
        return;
    if (line)
        n = allot_fmt(err, errlen, "%s:%zu: ", file, line);
    else
        n = allot_fmt(err, errlen, "%s: ", file);
    if (n >= 0 && (size_t)n < errlen)
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
}

int csv_report(const char *file, size_t line, char *err, size_t errlen, int rc, const char *fmt,
               ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport(file, line, err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

int csv_fail(struct csv_reader *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport(r->file, r->line, r->err, r->errlen, fmt, ap);
    va_end(ap);
    return ALLOT_EINVAL;
}

const char *csv_quote(char *buf, size_t size, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, shown = 0;

    if (size < 8)
        return "";
    buf[o++] = '"';
    for (; *s && o + 8 < size; s++) {
        unsigned char c = (unsigned char)*s;

        if (shown == 40) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        } else {
            buf[o++] = (char)c;
        }
        shown++;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

/* ---- loading ---- */

int csv_read_file(const char *path, size_t max_file, char **text, size_t *len, char *err,
                  size_t errlen)
{
    FILE *f = fopen(path, "rb");
    void *buf = NULL;
    size_t cap = 0, n = 0;
    int rc = 0;

    if (!f)
        return csv_report(path, 0, err, errlen, ALLOT_EIO, "%s", strerror(errno));
    for (;;) {
        size_t want, got;

        if (allot_grow(&buf, &cap, n + 65536 + 2, 1) < 0) {
            rc = csv_report(path, 0, err, errlen, ALLOT_ENOMEM, "out of memory");
            goto out_buf;
        }
        want = cap - n - 1;
        if (want > max_file + 1 - n)
            want = max_file + 1 - n; /* one byte past the limit tells */
        got = fread((char *)buf + n, 1, want, f);
        n += got;
        if (n > max_file) {
            rc = csv_report(path, 0, err, errlen, ALLOT_EINVAL, "larger than %u bytes",
                            (unsigned)max_file);
            goto out_buf;
        }
        if (got < want) {
            if (ferror(f)) {
                rc = csv_report(path, 0, err, errlen, ALLOT_EIO, "%s", strerror(errno));
                goto out_buf;
            }
            break;
        }
    }
    fclose(f);
    ((char *)buf)[n] = '\0';
    *text = buf;
    *len = n;
    return 0;

out_buf:
    allot_free(buf);
    fclose(f);
    return rc;
}

int csv_copy_text(const char *buf, size_t len, const char *name, size_t max_file, char **text,
                  char *err, size_t errlen)
{
    if (len > max_file)
        return csv_report(name, 0, err, errlen, ALLOT_EINVAL, "larger than %u bytes",
                          (unsigned)max_file);
    *text = allot_malloc(len + 1);
    if (!*text)
        return csv_report(name, 0, err, errlen, ALLOT_ENOMEM, "out of memory");
    if (len)
        memcpy(*text, buf, len);
    (*text)[len] = '\0';
    return 0;
}

/* Loads the text for csv_open(): the file at `path`, or a copy of buf. */
static int csv_load(const char *path, const char *buf, size_t len, const char *name,
                    size_t max_file, char **text, size_t *text_len, char *err, size_t errlen)
{
    if (path)
        return csv_read_file(path, max_file, text, text_len, err, errlen);
    *text_len = len;
    return csv_copy_text(buf, len, name, max_file, text, err, errlen);
}

/* ---- lines and fields ---- */

void csv_init(struct csv_reader *r, char *text, size_t len, const char *file,
              const struct csv_format *fmt, char *err, size_t errlen)
{
    memset(r, 0, sizeof(*r));
    r->text = text;
    r->p = text;
    r->end = text + len;
    r->file = file;
    r->err = err;
    r->errlen = errlen;
    r->max_line = fmt->max_line;
    r->max_cols = fmt->max_cols < CSV_MAX_COLS ? fmt->max_cols : CSV_MAX_COLS;
    r->trailing_blank_ok = fmt->trailing_blank_ok;
}

/* True when only line ends (LF, CRLF) remain from p to end. */
static bool only_blank_lines(const char *p, const char *end)
{
    for (; p < end; p++) {
        if (*p == '\n')
            continue;
        if (*p == '\r' && p + 1 < end && p[1] == '\n')
            continue;
        return false;
    }
    return true;
}

/* True when no data row is left: the end of the text, or with
 * trailing_blank_ok only blank lines. */
static bool at_end(const struct csv_reader *r)
{
    if (r->trailing_blank_ok)
        return only_blank_lines(r->p, r->end);
    return r->p >= r->end;
}

int csv_next(struct csv_reader *r)
{
    char *s = r->p, *e, *nl;
    size_t len;

    /* Trailing blank lines may only end the file after its first line, so a
     * file of blank lines still fails on line 1. */
    if (s >= r->end || (r->line > 0 && at_end(r)))
        return 0;
    r->line++;
    nl = memchr(s, '\n', (size_t)(r->end - s));
    e = nl ? nl : r->end;
    r->p = nl ? nl + 1 : r->end;
    if (e > s && e[-1] == '\r')
        e--;
    len = (size_t)(e - s);
    if (len > r->max_line)
        return csv_fail(r, "line longer than %zu bytes", r->max_line);
    if (len == 0)
        return csv_fail(r, "empty line");
    r->nf = 0;
    r->f[r->nf++] = s;
    for (char *q = s; q < e; q++) {
        unsigned char c = (unsigned char)*q;

        if (c == ',') {
            *q = '\0';
            if (r->nf < r->max_cols)
                r->f[r->nf] = q + 1;
            r->nf++;
        } else if (c == '\0') {
            return csv_fail(r, "NUL byte at column %zu", (size_t)(q - s) + 1);
        } else if (c == '\r') {
            return csv_fail(r, "carriage return inside the line at column %zu",
                            (size_t)(q - s) + 1);
        } else if (c < 0x20 || c == 0x7f) {
            return csv_fail(r, "control character 0x%02x at column %zu", c, (size_t)(q - s) + 1);
        } else if (c == '"') {
            return csv_fail(r, "'\"' at column %zu: quoted fields are not supported",
                            (size_t)(q - s) + 1);
        }
    }
    *e = '\0'; /* e is the CR, the LF or r->end, all writable */
    return 1;
}

/* Returns the index in `lay` of the column named `name`, or lay->ncols. */
static size_t find_col(const struct csv_layout *lay, const char *name)
{
    size_t k;

    for (k = 0; k < lay->ncols; k++)
        if (strcmp(name, lay->cols[k].name) == 0)
            break;
    return k;
}

int csv_header(struct csv_reader *r, const struct csv_layout *lay, int *idx)
{
    char qb[80];
    size_t i, k, nstored;
    bool any_known = false;
    int rc;

    rc = csv_next(r);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return csv_report(r->file, 0, r->err, r->errlen, ALLOT_EINVAL,
                          "empty file, expected the header \"%s\"", lay->header);
    for (k = 0; k < lay->ncols; k++)
        idx[k] = -1;
    /* With more fields than columns one of the first ncols + 1 (all stored,
     * ncols < max_cols) is unknown or repeated, so the loop fails in time. */
    nstored = r->nf < r->max_cols ? r->nf : r->max_cols;
    for (i = 0; i < nstored && !any_known; i++)
        any_known = find_col(lay, r->f[i]) < lay->ncols;
    if (!any_known)
        return csv_fail(r, "missing header line, expected \"%s\"", lay->header);
    for (i = 0; i < nstored; i++) {
        k = find_col(lay, r->f[i]);
        if (k == lay->ncols)
            return csv_fail(r, "unknown column %s (%s \"%s\")", csv_quote(qb, sizeof(qb), r->f[i]),
                            lay->unknown_hint, lay->header);
        if (idx[k] >= 0)
            return csv_fail(r, "duplicate column \"%s\"", lay->cols[k].name);
        idx[k] = (int)i;
    }
    for (k = 0; k < lay->ncols; k++)
        if (lay->cols[k].required && idx[k] < 0)
            return csv_fail(r, "missing column \"%s\"", lay->cols[k].name);
    if (at_end(r))
        return csv_fail(r, "header but no data rows");
    return 0;
}

int csv_check_width(struct csv_reader *r, size_t ncols)
{
    if (r->nf != ncols)
        return csv_fail(r, "expected %zu fields, got %zu", ncols, r->nf);
    return 0;
}

size_t csv_rows_left(const struct csv_reader *r)
{
    size_t n = 1;
    const char *p = r->p;

    while (p < r->end && (p = memchr(p, '\n', (size_t)(r->end - p))) != NULL) {
        n++;
        p++;
    }
    return n;
}

int csv_open(struct csv_reader *r, const struct csv_format *fmt, const struct csv_layout *lay,
             int *idx, const char *path, const char *buf, size_t len, const char *name, char *err,
             size_t errlen)
{
    char *text = NULL;
    int rc;

    if (path)
        name = path;
    if ((rc = csv_load(path, buf, len, name, fmt->max_file, &text, &len, err, errlen)) < 0)
        return rc;
    csv_init(r, text, len, name, fmt, err, errlen);
    if ((rc = csv_header(r, lay, idx)) < 0) {
        allot_free(text);
        r->text = r->p = r->end = NULL;
    }
    return rc;
}

void *csv_alloc_rows(struct csv_reader *r, size_t elem, size_t *cap)
{
    size_t n = csv_rows_left(r);
    void *v = allot_calloc(n, elem);

    if (!v)
        csv_report(r->file, 0, r->err, r->errlen, ALLOT_ENOMEM, "out of memory");
    if (cap)
        *cap = n;
    return v;
}

/* ---- numbers ---- */

int csv_int(struct csv_reader *r, const char *col, const char *s, int64_t max, unsigned flags,
            int64_t *out)
{
    char qb[80];
    const char *d = *s == '-' ? s + 1 : s;
    bool neg = d != s, over = false;
    int64_t v = 0;

    if (*s == '\0') {
        if (flags & CSV_EMPTY_OK) {
            *out = -1;
            return 0;
        }
        return csv_fail(r, "%s is empty", col);
    }
    if (*d < '0' || *d > '9')
        return csv_fail(r, "%s %s is not an integer", col, csv_quote(qb, sizeof(qb), s));
    if (neg && (flags & CSV_SIGN_FIRST))
        return csv_fail(r, "%s %s is negative", col, csv_quote(qb, sizeof(qb), s));
    for (const char *p = d; *p; p++) {
        int dig = *p - '0';

        if (*p < '0' || *p > '9')
            return csv_fail(r, "%s %s is not an integer", col, csv_quote(qb, sizeof(qb), s));
        /* v * 10 + dig > max, tested without overflowing */
        if (!over && (dig > max || v > (max - dig) / 10)) {
            if (flags & CSV_SIGN_FIRST)
                return csv_fail(r, "%s %s out of range 0..%lld", col, csv_quote(qb, sizeof(qb), s),
                                (long long)max);
            over = true; /* junk later in the field is still reported first */
        }
        if (!over)
            v = v * 10 + dig;
    }
    if (neg && (over || v != 0))
        return csv_fail(r, "%s %s is negative", col, csv_quote(qb, sizeof(qb), s));
    if (over)
        return csv_fail(r, "%s %s out of range 0..%lld", col, csv_quote(qb, sizeof(qb), s),
                        (long long)max);
    *out = v;
    return 0;
}

int csv_decimal(struct csv_reader *r, const char *col, const char *s, double max, double *out)
{
    char qb[80];
    const char *p = s;
    size_t ndig = 0;

    if (*s == '\0')
        return csv_fail(r, "%s is empty", col);
    if (*s == '-' && s[1] >= '0' && s[1] <= '9')
        return csv_fail(r, "%s %s is negative", col, csv_quote(qb, sizeof(qb), s));
    while (*p >= '0' && *p <= '9') {
        p++;
        ndig++;
    }
    if (ndig > 0 && *p == '.') {
        const char *frac = ++p;

        while (*p >= '0' && *p <= '9')
            p++;
        if (p == frac)
            ndig = 0;
    }
    if (ndig == 0 || *p != '\0' || ndig > 15)
        return csv_fail(r, "%s %s is not a decimal number", col, csv_quote(qb, sizeof(qb), s));
    *out = strtod(s, NULL);
    if (!(*out <= max))
        return csv_fail(r, "%s %s out of range 0..%.0f", col, csv_quote(qb, sizeof(qb), s), max);
    return 0;
}

uint64_t csv_name_hash(const char *s)
{
    return allot_fnv1a(ALLOT_FNV1A_INIT, s, strlen(s));
}

/*
 * Shared plumbing of the simulator's strict CSV readers (openb.c, philly.c,
 * fill_published.c): loading a whole file (or a caller's buffer) into one
 * writable block under a size limit, walking it line by line while splitting each
 * line in place into NUL-terminated fields, matching a header against a
 * column table, and strict range-checked number fields.
 *
 * Every failure is written to the caller's message buffer as "FILE: what"
 * or "FILE:LINE: what" and returned as a negative ALLOT_E* code; nothing
 * here prints or keeps global state. A reader is a plain value over text the
 * caller owns; fields point into that text and live as long as it does.
 *
 * The format is deliberately narrow: comma-separated, no quoting, lines end
 * in LF or CRLF (the last may lack it), no blank lines (a reader may allow
 * them at the end of the file), no NUL or other control bytes.
 */
#ifndef ALLOT_SIM_CSVREAD_H
#define ALLOT_SIM_CSVREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Upper bound on a reader's stored fields per line: the trace readers keep
 * 8 or 16; the FGD authors' published curves have 136 columns. */
#define CSV_MAX_COLS 160

/* One column of a file layout. */
struct csv_col {
    const char *name; /* header name, static */
    bool required;    /* a header without it is an error */
};

/* A file layout: its columns and how messages name the expected header. */
struct csv_layout {
    const struct csv_col *cols; /* static table of `ncols` columns */
    size_t ncols;               /* fewer than the reader's max_cols */
    const char *header;         /* the canonical header line, for messages */
    const char *unknown_hint;   /* words before the header in the unknown-column
                                   message, e.g. "expected" */
};

/* Limits and line rules of one file format. */
struct csv_format {
    size_t max_file;        /* largest file accepted, in bytes */
    size_t max_line;        /* longest line accepted, newline excluded */
    size_t max_cols;        /* fields stored per line, at most CSV_MAX_COLS */
    bool trailing_blank_ok; /* blank lines after the last row end the file */
};

/* Reading state over one file's text, which it splits in place. */
struct csv_reader {
    char *text;       /* start of the text; owned by whoever loaded it */
    char *p;          /* next unread byte */
    char *end;        /* one past the last byte; *end is writable */
    size_t line;      /* 1-based number of the line last returned */
    const char *file; /* display name, borrowed */
    char *err;        /* caller's message buffer, borrowed; may be NULL */
    size_t errlen;
    size_t max_line;        /* from the format */
    size_t max_cols;        /* from the format, clamped to CSV_MAX_COLS */
    bool trailing_blank_ok; /* from the format */
    char *f[CSV_MAX_COLS];  /* fields of the current line (first max_cols) */
    size_t nf;              /* fields on the current line (may exceed max_cols) */
};

/*
 * Sets up `r` over `len` bytes of `text` (borrowed), which must have one
 * more writable byte at text[len], with the line rules of `fmt`. `file` and
 * `err` are borrowed for the reader's life. max_cols is clamped to
 * CSV_MAX_COLS.
 */
void csv_init(struct csv_reader *r, char *text, size_t len, const char *file,
              const struct csv_format *fmt, char *err, size_t errlen);

/*
 * Loads a file and reads its header: the file at `path` when it is not NULL
 * (as csv_read_file(); path names it in messages), else a copy of `len`
 * bytes of `buf` named `name` (as csv_copy_text()); then csv_init() and
 * csv_header() with `lay` and `idx` (OUT). On success r->text is the loaded
 * block, owned by the caller (free with allot_free()); on failure nothing
 * stays allocated. Returns 0 or what those functions return.
 */
int csv_open(struct csv_reader *r, const struct csv_format *fmt, const struct csv_layout *lay,
             int *idx, const char *path, const char *buf, size_t len, const char *name, char *err,
             size_t errlen);

/*
 * Allocates a zeroed array with room for every data row left (see
 * csv_rows_left()) of `elem` bytes each; *cap (OUT, optional) gets the row
 * count. Returns the array (owned by the caller, free with allot_free()) or
 * NULL after reporting "FILE: out of memory".
 */
void *csv_alloc_rows(struct csv_reader *r, size_t elem, size_t *cap);

/*
 * Writes "FILE: msg" (line == 0) or "FILE:LINE: msg" into err (errlen
 * bytes, always terminated; nothing when err is NULL or errlen is 0).
 * Returns `rc` so callers can `return csv_report(...)`.
 */
int csv_report(const char *file, size_t line, char *err, size_t errlen, int rc, const char *fmt,
               ...) __attribute__((format(printf, 6, 7)));

/* Reports a problem on the reader's current line; returns ALLOT_EINVAL. */
int csv_fail(struct csv_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Quotes `s` for a message into buf (`size` bytes, at least 8 or "" is
 * returned): at most 40 bytes shown, bytes that are not printable ASCII (and
 * '"', '\\') escaped as \xNN, "..." appended when cut. Returns buf.
 */
const char *csv_quote(char *buf, size_t size, const char *s);

/*
 * Reads the file at `path` into a new block (*text OUT, owned by the caller,
 * free with allot_free(); *len OUT) with one spare writable NUL byte.
 * Returns 0, ALLOT_EIO ("PATH: strerror"), ALLOT_EINVAL for a file over
 * `max_file` bytes, or ALLOT_ENOMEM; *text is untouched on failure.
 */
int csv_read_file(const char *path, size_t max_file, char **text, size_t *len, char *err,
                  size_t errlen);

/*
 * Copies `len` bytes of `buf` into a new block (*text OUT, owned by the
 * caller) with one spare NUL byte; `name` is the display name for messages.
 * Returns 0, ALLOT_EINVAL when len exceeds `max_file`, or ALLOT_ENOMEM.
 */
int csv_copy_text(const char *buf, size_t len, const char *name, size_t max_file, char **text,
                  char *err, size_t errlen);

/*
 * Returns the next line split into r->f / r->nf: 1 when there is one, 0 at
 * the end of the text (or, with trailing_blank_ok, when only blank lines are
 * left after the first line), ALLOT_EINVAL for a blank or oversized line or
 * one holding a control byte or a quote. A final CR is dropped.
 */
int csv_next(struct csv_reader *r);

/*
 * Reads the header line and maps each column of `lay` to its field index in
 * `idx` (OUT, lay->ncols entries; -1 when an optional column is absent).
 * Returns 0, or ALLOT_EINVAL for an empty file, a missing header, an
 * unknown, repeated or missing column, or a file without data rows.
 */
int csv_header(struct csv_reader *r, const struct csv_layout *lay, int *idx);

/* Checks the current line has `ncols` fields; returns 0 or ALLOT_EINVAL. */
int csv_check_width(struct csv_reader *r, size_t ncols);

/* Upper bound on the data rows left: the newlines left, plus one. */
size_t csv_rows_left(const struct csv_reader *r);

/* Flags of csv_int(). */
enum {
    CSV_EMPTY_OK = 1 << 0,   /* an empty field gives -1 instead of an error */
    CSV_SIGN_FIRST = 1 << 1, /* '-' then a digit is "negative" before anything
                                else is checked, "-0" included; an overflow is
                                reported at the digit that causes it, ahead of
                                trailing junk */
};

/*
 * Parses field `s` of column `col` as a decimal integer in 0..max (max >= 0)
 * into *out (OUT). Digits only after an optional '-' that is then reported
 * as negative (unless the value is 0 and CSV_SIGN_FIRST is not set); no
 * blanks, '+' or fraction. Returns 0 or ALLOT_EINVAL naming col and value.
 */
int csv_int(struct csv_reader *r, const char *col, const char *s, int64_t max, unsigned flags,
            int64_t *out);

/*
 * Parses field `s` of column `col` as a non-negative decimal `D[.D]` (digits
 * required before the point, and after it when there is one; at most 15
 * integer digits) no larger than `max` into *out (OUT). Returns 0 or
 * ALLOT_EINVAL.
 */
int csv_decimal(struct csv_reader *r, const char *col, const char *s, double max, double *out);

/* 64-bit FNV-1a hash of a NUL-terminated name, for the readers' name sets. */
uint64_t csv_name_hash(const char *s);

#endif

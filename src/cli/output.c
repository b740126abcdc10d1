/*
 * Output of the command line: indented JSON, YAML written from the jansson
 * value (block style; a string is quoted whenever a YAML reader could take
 * it for a number, boolean, null or structure, so `-o yaml` output read
 * back with `apply -f` gives the same document), and aligned tables.
 */
#define _XOPEN_SOURCE 700 /* wcwidth */
#include "cli.h"

#include "allot/common.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <wchar.h>
#include <time.h>

void out_json(FILE *f, json_t *v)
{
    json_dumpf(v, f, JSON_INDENT(2) | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
    fputc('\n', f);
}

/* ---- YAML ---- */

static bool looks_like_other(const char *s)
{
    static const char *const words[] = {"null", "~",   "true", "false", "yes",  "no",
                                        "on",   "off", "y",    "n",     ".inf", ".nan"};
    char low[8];
    size_t n = strlen(s);

    if (n < sizeof(low)) {
        for (size_t i = 0; i < n; i++)
            low[i] = (char)tolower((unsigned char)s[i]);
        low[n] = '\0';
        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
            if (!strcmp(low, words[i]) ||
                (low[0] && low[0] != '.' && low[0] != '~' && (low[0] == '+' || low[0] == '-') &&
                 !strcmp(low + 1, words[i])))
                return true;
    }
    /* anything that starts like a number: 1, -1, .5, +3, 0x1f, 1e3, 12:30 */
    if (isdigit((unsigned char)s[0]) ||
        ((s[0] == '-' || s[0] == '+' || s[0] == '.') && isdigit((unsigned char)s[1])))
        return true;
    return false;
}

static bool plain_ok(const char *s)
{
    size_t n = strlen(s);

    if (!n || s[0] == ' ' || s[n - 1] == ' ' || strchr("-?:,[]{}#&*!|>'\"%@`", s[0]))
        return false;
    for (const char *p = s; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch < 0x20 || ch >= 0x7f || ch == ':' || ch == '#' || ch == '\\')
            return false;
    }
    return !looks_like_other(s);
}

/* Writes s (valid UTF-8, as jansson keeps it) as a YAML double-quoted
 * scalar. JSON's escaping is not enough: YAML 1.1 reads U+0085, U+2028 and
 * U+2029 as line breaks (folded away inside quotes) and refuses C1 controls,
 * U+FEFF, U+FFFE and U+FFFF, so those are written as escapes. */
static void y_quoted(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    fputc('"', f);
    while (*p) {
        unsigned cp = *p;
        int n = cp < 0x80 ? 1 : cp < 0xe0 ? 2 : cp < 0xf0 ? 3 : 4;

        if (n == 1) {
            static const char short_esc[][2] = {{'"', '"'},  {'\\', '\\'}, {'\b', 'b'}, {'\f', 'f'},
                                                {'\n', 'n'}, {'\r', 'r'},  {'\t', 't'}};
            size_t e = 0;

            /* JSON's escapes (all valid in YAML), so common text reads alike */
            while (e < sizeof(short_esc) / sizeof(short_esc[0]) && short_esc[e][0] != (char)cp)
                e++;
            if (e < sizeof(short_esc) / sizeof(short_esc[0]))
                fprintf(f, "\\%c", short_esc[e][1]);
            else if (cp < 0x20 || cp == 0x7f)
                fprintf(f, "\\u%04x", cp);
            else
                fputc((int)cp, f);
            p++;
            continue;
        }
        cp &= 0x7fu >> n;
        for (int i = 1; i < n && p[i]; i++)
            cp = cp << 6 | (p[i] & 0x3fu);
        if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || cp == 0xfeff ||
            cp == 0xfffe || cp == 0xffff)
            fprintf(f, "\\u%04x", cp);
        else
            fwrite(p, 1, (size_t)n, f);
        for (int i = 0; i < n && *p; i++)
            p++;
    }
    fputc('"', f);
}

static void y_string(FILE *f, const char *s)
{
    if (plain_ok(s))
        fputs(s, f);
    else
        y_quoted(f, s);
}

static void y_scalar(FILE *f, json_t *v)
{
    char buf[64];

    switch (json_typeof(v)) {
    case JSON_STRING:
        y_string(f, json_string_value(v));
        break;
    case JSON_INTEGER:
        fprintf(f, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL:
        /* the shortest of 15, 16 and 17 digits that reads back as the same
         * number: 0.1, not 0.10000000000000001 */
        for (int digits = 15; digits <= 17; digits++) {
            allot_fmt(buf, sizeof(buf), "%.*g", digits, json_real_value(v));
            if (strtod(buf, NULL) == json_real_value(v))
                break;
        }
        /* keep it a float when read back */
        fputs(buf, f);
        if (!strpbrk(buf, ".eEn"))
            fputs(".0", f);
        break;
    case JSON_TRUE:
        fputs("true", f);
        break;
    case JSON_FALSE:
        fputs("false", f);
        break;
    case JSON_OBJECT:
        fputs("{}", f);
        break;
    case JSON_ARRAY:
        fputs("[]", f);
        break;
    default:
        fputs("null", f);
    }
}

enum y_ctx { Y_TOP, Y_KEY, Y_DASH };

static void y_obj(FILE *f, json_t *o, int ind, bool first_inline);
static void y_arr(FILE *f, json_t *a, int ind, bool first_inline);

static bool y_nested(json_t *v)
{
    return (json_is_object(v) && json_object_size(v)) || (json_is_array(v) && json_array_size(v));
}

static void y_value(FILE *f, json_t *v, int ind, enum y_ctx ctx)
{
    if (!y_nested(v)) {
        if (ctx == Y_KEY)
            fputc(' ', f);
        y_scalar(f, v);
        fputc('\n', f);
        return;
    }
    if (ctx == Y_KEY) {
        fputc('\n', f);
        if (json_is_object(v))
            y_obj(f, v, ind + 2, false);
        else
            y_arr(f, v, ind + 2, false);
    } else {
        if (json_is_object(v))
            y_obj(f, v, ind, ctx == Y_DASH);
        else
            y_arr(f, v, ind, ctx == Y_DASH);
    }
}

static void y_obj(FILE *f, json_t *o, int ind, bool first_inline)
{
    const char *k;
    json_t *v;
    bool first = true;

    json_object_foreach(o, k, v)
    {
        if (!(first && first_inline))
            fprintf(f, "%*s", ind, "");
        first = false;
        /* YAML readers take an implicit key of at most 1024 characters;
         * a longer one (after escaping, up to 4 per byte) is explicit */
        if (strlen(k) > 250) {
            fputs("? ", f);
            y_string(f, k);
            fprintf(f, "\n%*s", ind, "");
        } else {
            y_string(f, k);
        }
        fputc(':', f);
        y_value(f, v, ind, Y_KEY);
    }
}

static void y_arr(FILE *f, json_t *a, int ind, bool first_inline)
{
    size_t i;
    json_t *v;

    json_array_foreach(a, i, v)
    {
        if (!(i == 0 && first_inline))
            fprintf(f, "%*s", ind, "");
        fputs("- ", f);
        y_value(f, v, ind + 2, Y_DASH);
    }
}

void out_yaml(FILE *f, json_t *v)
{
    y_value(f, v, 0, Y_TOP);
}

bool out_structured(const struct cli *c, json_t *v)
{
    if (c->fmt == CLI_FMT_JSON)
        out_json(stdout, v);
    else if (c->fmt == CLI_FMT_YAML)
        out_yaml(stdout, v);
    else
        return false;
    return true;
}

/* ---- tables ---- */

struct table {
    size_t n_cols;
    const char *const *titles; /* borrowed */
    char **cells;              /* owned: n_rows * n_cols strings */
    size_t n_rows, cap;
    size_t fit; /* display columns to fit in; 0 = no limit */
    bool oom;
};

struct table *table_new(size_t n_cols, const char *const *titles)
{
    struct table *t = allot_calloc(1, sizeof(*t));

    if (t) {
        t->n_cols = n_cols;
        t->titles = titles;
    }
    return t;
}

void table_row(struct table *t, const char *const *cells)
{
    size_t need;

    if (!t || t->oom)
        return;
    need = (t->n_rows + 1) * t->n_cols;
    if (allot_grow((void **)&t->cells, &t->cap, need, sizeof(char *)) < 0) {
        t->oom = true;
        return;
    }
    for (size_t i = 0; i < t->n_cols; i++) {
        const char *s = cells[i] && *cells[i] ? cells[i] : "-";
        char *copy = allot_strdup(s);

        if (!copy)
            t->oom = true;
        /* a cell stays on one line, and holds no control characters */
        out_defang(copy);
        t->cells[t->n_rows * t->n_cols + i] = copy;
    }
    t->n_rows++;
}

/* The display width of the next character of s (its bytes in *len):
 * 0..2 columns; a byte that is not UTF-8 (or a character the C library
 * cannot measure) takes one. */
static size_t char_width(const char *s, size_t *len)
{
    mbstate_t st;
    wchar_t wc;
    size_t n;

    memset(&st, 0, sizeof(st));
    n = mbrtowc(&wc, s, MB_LEN_MAX, &st);
    if (n == (size_t)-1 || n == (size_t)-2 || n == 0) {
        *len = 1;
        return 1;
    }
    *len = n;
    int w = wcwidth(wc);
    return w < 0 ? 1 : (size_t)w;
}

size_t out_width(const char *s)
{
    size_t w = 0, len;

    for (; s && *s; s += len)
        w += char_width(s, &len);
    return w;
}

void out_cut(char *s, size_t width)
{
    size_t w = 0, len, keep = 0;
    char *p;

    if (!s || out_width(s) <= width)
        return;
    /* room for "..." when the width allows it */
    size_t room = width >= 4 ? width - 3 : width;
    for (p = s; *p; p += len) {
        size_t cw = char_width(p, &len);
        if (w + cw > room)
            break;
        w += cw;
        keep = (size_t)(p - s) + len;
    }
    if (width >= 4)
        memcpy(s + keep, "...", 4);
    else
        s[keep] = '\0';
}

void table_fit(struct table *t, size_t width)
{
    if (t)
        t->fit = width;
}

void table_print(struct table *t, FILE *f)
{
    size_t w[32] = {0}, least[32] = {0}, nc;

    if (!t)
        return;
    if (t->oom)
        cli_error("internal", "out of memory; the table is incomplete");
    nc = t->n_cols < 32 ? t->n_cols : 32;
    for (size_t c = 0; c < nc; c++) {
        w[c] = out_width(t->titles[c]);
        /* a column is cut no narrower than its title, or 6 ("ab...") */
        least[c] = w[c] > 6 ? w[c] : 6;
        for (size_t r = 0; r < t->n_rows; r++) {
            size_t cw = out_width(t->cells[r * t->n_cols + c]);
            if (cw > w[c])
                w[c] = cw;
        }
        if (least[c] > w[c])
            least[c] = w[c];
    }
    if (t->fit) {
        size_t total = nc ? 2 * (nc - 1) : 0;
        for (size_t c = 0; c < nc; c++)
            total += w[c];
        /* the widest column that can give a column gives it, until it fits */
        while (total > t->fit) {
            size_t widest = nc;
            for (size_t c = 0; c < nc; c++)
                if (w[c] > least[c] && (widest == nc || w[c] > w[widest]))
                    widest = c;
            if (widest == nc)
                break;
            w[widest]--;
            total--;
        }
        for (size_t r = 0; r < t->n_rows; r++)
            for (size_t c = 0; c < nc; c++)
                out_cut(t->cells[r * t->n_cols + c], w[c]);
    }
    for (size_t r = 0; r <= t->n_rows; r++) {
        for (size_t c = 0; c < t->n_cols; c++) {
            const char *s = r == 0 ? t->titles[c] : t->cells[(r - 1) * t->n_cols + c];
            bool last = c + 1 == t->n_cols;
            size_t sw;

            if (!s)
                s = "-";
            fputs(s, f);
            if (last) {
                fputc('\n', f);
                continue;
            }
            sw = out_width(s);
            for (size_t k = sw; k < w[c < 32 ? c : 31] + 2; k++)
                fputc(' ', f);
        }
    }
    for (size_t i = 0; i < t->n_rows * t->n_cols; i++)
        allot_free(t->cells[i]);
    allot_free(t->cells);
    allot_free(t);
}

void out_defang(char *s)
{
    unsigned char *r = (unsigned char *)s, *w = (unsigned char *)s;

    for (; r && *r; r++) {
        if (*r < 0x20 || *r == 0x7f) {
            *w++ = *r == '\n' || *r == '\t' || *r == '\r' ? ' ' : '?';
        } else if (*r == 0xc2 && r[1] >= 0x80 && r[1] <= 0x9f) { /* C1, as UTF-8 */
            *w++ = '?';
            r++;
        } else {
            *w++ = *r;
        }
    }
    if (w)
        *w = '\0';
}

const char *out_text(const char *s, char *buf, size_t n)
{
    allot_strlcpy(buf, s ? s : "-", n);
    out_defang(buf);
    return buf;
}

const char *out_cell(json_t *v, char *buf, size_t n)
{
    char *s;

    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_STRING:
        return json_string_value(v)[0] ? json_string_value(v) : "-";
    case JSON_INTEGER:
        allot_fmt(buf, n, "%lld", (long long)json_integer_value(v));
        return buf;
    case JSON_REAL:
        allot_fmt(buf, n, "%g", json_real_value(v));
        return buf;
    case JSON_TRUE:
        return "true";
    case JSON_FALSE:
        return "false";
    case JSON_OBJECT:
    case JSON_ARRAY:
        s = json_dumps(v, JSON_COMPACT);
        allot_strlcpy(buf, s ? s : "?", n);
        free(s);
        return buf;
    default:
        return "-";
    }
}

const char *out_time(json_t *v, char *buf, size_t n)
{
    time_t t = (time_t)json_integer_value(v);
    struct tm tm;

    if (!json_is_integer(v) || t <= 0 || !gmtime_r(&t, &tm))
        return "-";
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

/*
 * Slurm-style host lists ("gpu[01-04,07],cpu-a") expanded into node names:
 * the one parser behind allot submit -w/--nodelist and -x/--exclude.
 *
 * Two passes over the text. The first checks every item (characters,
 * brackets, numbers, the longest name it can give) and counts its names,
 * capped at ALLOT_HOSTLIST_MAX + 1 so that a huge range is refused before
 * anything is allocated. The second writes the names, skipping those
 * already written (an allot_index over the output). No state, no I/O; all
 * memory through allot_malloc & co., so tests can make any allocation fail.
 */
#include "allot/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NUM_DIGITS 9  /* keeps every number and range size in a uint32_t */
#define QUOTE_MAX  40 /* bytes of an item quoted in a message */
#define COUNT_CAP  ((uint64_t)ALLOT_HOSTLIST_MAX + 1)

/* The item being read (s[0..len), s NULL for the list as a whole) and
 * where its error goes. */
struct ctx {
    const char *s;
    size_t len;
    char *err;
    size_t errlen;
};

/* One number or range of a bracket group, as written. */
struct term {
    uint32_t lo, hi;
    int width; /* zero-pad to this many digits (LO had leading zeros), or 0 */
};

/* The names written so far (names[0..n), owned) and their index. */
struct out {
    char **names;
    int n;
    struct allot_index idx;
};

/* Writes "<problem> in "<item>"" into c->err (the item quoted up to
 * QUOTE_MAX bytes, other than printable ASCII as '?', so the message stays
 * one printable line). Returns ALLOT_EINVAL. */
__attribute__((format(printf, 2, 3))) static int fail(const struct ctx *c, const char *fmt, ...)
{
    char what[128], quoted[QUOTE_MAX + 1];
    size_t n = c->s ? (c->len < QUOTE_MAX ? c->len : QUOTE_MAX) : 0;
    va_list ap;

    if (!c->err || c->errlen == 0)
        return ALLOT_EINVAL;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < n; i++)
        quoted[i] = c->s[i] >= 0x20 && c->s[i] < 0x7f ? c->s[i] : '?';
    quoted[n] = '\0';
    if (c->s)
        allot_fmt(c->err, c->errlen, "%s in \"%s%s\"", what, quoted, c->len > n ? "..." : "");
    else
        allot_fmt(c->err, c->errlen, "%s", what);
    return ALLOT_EINVAL;
}

/* Checks the item's characters: no white space, brackets balanced and
 * not nested (checked first: the likelier mistake), name characters
 * outside brackets and digits, ',' and '-' inside. */
static int check_chars(const struct ctx *c)
{
    int depth = 0;

    for (size_t i = 0; i < c->len; i++) {
        if (strchr(" \t\n\v\f\r", c->s[i]))
            return fail(c, "white space");
        depth += c->s[i] == '[' ? 1 : c->s[i] == ']' ? -1 : 0;
        if (depth > 1)
            return fail(c, "nested brackets");
        if (depth < 0)
            return fail(c, "unbalanced \"]\"");
    }
    if (depth)
        return fail(c, "unbalanced \"[\"");
    for (size_t i = 0; i < c->len; i++) {
        char ch = c->s[i], shown = ch > 0x20 && ch < 0x7f ? ch : '?';

        depth += ch == '[' ? 1 : ch == ']' ? -1 : 0;
        if (depth && !strchr("[0123456789,-", ch))
            return fail(c, "non-digit '%c' inside brackets", shown);
        if (!depth && ch != ']' && !strchr(ALLOT_NODE_NAME_CHARS, ch))
            return fail(c, "bad character '%c' (names are [A-Za-z0-9._-])", shown);
    }
    return 0;
}

/* Reads 1..NUM_DIGITS digits at *p into *v; moves *p past them. */
static int read_num(const struct ctx *c, const char **p, uint32_t *v)
{
    const char *q = *p;

    for (*v = 0; *q >= '0' && *q <= '9'; q++) {
        if (q - *p == NUM_DIGITS)
            return fail(c, "number over %d digits", NUM_DIGITS);
        *v = *v * 10 + (uint32_t)(*q - '0');
    }
    if (q == *p)
        return fail(c, "missing number inside brackets");
    *p = q;
    return 0;
}

/* Reads "LO" or "LO-HI" at *p (inside a group whose characters are
 * checked) into *t; moves *p to the ',' or ']' after it. */
static int read_term(const struct ctx *c, const char **p, struct term *t)
{
    const char *start = *p;
    int rc = read_num(c, p, &t->lo);

    if (rc)
        return rc;
    t->width = *p - start > 1 && *start == '0' ? (int)(*p - start) : 0;
    t->hi = t->lo;
    if (**p == '-') {
        (*p)++;
        if ((rc = read_num(c, p, &t->hi)))
            return rc;
    }
    if (**p != ',' && **p != ']')
        return fail(c, "malformed range \"%.*s\"", (int)(*p - start + 1), start);
    if (t->hi < t->lo)
        return fail(c, "range \"%.*s\" has HI < LO", (int)(*p - start), start);
    return 0;
}

/* Reads the group after the '[' at *p; *count (capped at COUNT_CAP) and
 * *width (the widest number it prints) are its; *p ends past the ']'. */
static int read_group(const struct ctx *c, const char **p, uint64_t *count, int *width)
{
    struct term t;
    int rc, w;

    *count = 0;
    *width = 0;
    if (**p == ']')
        return fail(c, "empty group \"[]\"");
    for (;; (*p)++) {
        if ((rc = read_term(c, p, &t)))
            return rc;
        *count += (uint64_t)t.hi - t.lo + 1;
        *count = *count < COUNT_CAP ? *count : COUNT_CAP;
        w = snprintf(NULL, 0, "%0*u", t.width, (unsigned)t.hi); /* HI is the widest */
        *width = w > *width ? w : *width;
        if (**p == ']')
            break;
    }
    (*p)++;
    return 0;
}

/* Checks one item and adds the number of its names to *total (capped). */
static int scan_item(const struct ctx *c, uint64_t *total)
{
    const char *p = c->s, *end = c->s + c->len;
    uint64_t count = 1, gcount;
    size_t namelen = 0;
    int rc, gwidth;

    if ((rc = check_chars(c)))
        return rc;
    while (p < end) {
        if (*p++ != '[') {
            namelen++;
            continue;
        }
        if ((rc = read_group(c, &p, &gcount, &gwidth)))
            return rc;
        count = count * gcount < COUNT_CAP ? count * gcount : COUNT_CAP;
        namelen += (size_t)gwidth;
    }
    if (namelen > ALLOT_NODE_NAME_MAX)
        return fail(c, "a name over %d bytes", ALLOT_NODE_NAME_MAX);
    *total = *total + count < COUNT_CAP ? *total + count : COUNT_CAP;
    return *total > ALLOT_HOSTLIST_MAX ? fail(c, "more than %d names", ALLOT_HOSTLIST_MAX) : 0;
}

static const char *name_at(const void *ctx, int i)
{
    return ((char *const *)ctx)[i];
}

/* Writes the names of the item from p to end after buf[0..blen) (checked:
 * every name fits buf), first group outermost. */
static int gen(struct out *o, const struct ctx *c, const char *p, char *buf, size_t blen)
{
    const char *end = c->s + c->len, *br = memchr(p, '[', (size_t)(end - p)), *q, *rest;
    struct term t;
    int rc = 0;

    memcpy(buf + blen, p, (size_t)((br ? br : end) - p));
    blen += (size_t)((br ? br : end) - p);
    buf[blen] = '\0';
    if (!br) {
        if (allot_index_find(&o->idx, buf, name_at, o->names) >= 0)
            return 0;
        if (!(o->names[o->n] = allot_strdup(buf)))
            return ALLOT_ENOMEM;
        return allot_index_add(&o->idx, o->n++, name_at, o->names); /* reserved: cannot fail */
    }
    rest = strchr(br, ']') + 1;
    for (q = br + 1; *q != ']' && rc == 0; q += *q == ',') {
        if (ALLOT_NEVER(read_term(c, &q, &t) != 0))
            return ALLOT_EINTERNAL;
        for (uint32_t v = t.lo; v <= t.hi && rc == 0; v++) {
            int w =
                allot_fmt(buf + blen, ALLOT_NODE_NAME_MAX + 1 - blen, "%0*u", t.width, (unsigned)v);

            rc = gen(o, c, rest, buf, blen + (size_t)w);
        }
    }
    return rc;
}

/* The item at p: up to the first comma outside brackets (a stray bracket
 * is left for check_chars to name). */
static size_t item_len(const char *p)
{
    int depth = 0;
    size_t i;

    for (i = 0; p[i] && (p[i] != ',' || depth > 0); i++)
        depth += p[i] == '[' ? 1 : p[i] == ']' && depth > 0 ? -1 : 0;
    return i;
}

/* Runs pass 1 (o NULL: check and count into *total) or pass 2 (write). */
static int each_item(const char *s, struct out *o, uint64_t *total, char *err, size_t errlen)
{
    char buf[ALLOT_NODE_NAME_MAX + 1];
    int rc = 0;

    for (const char *p = s; rc == 0; p++) {
        struct ctx c = {p, item_len(p), err, errlen};

        if (c.len == 0) {
            c.s = NULL;
            return fail(&c, "empty item at byte %zu (\",,\" or a comma at an end)",
                        (size_t)(p - s));
        }
        rc = o ? gen(o, &c, p, buf, 0) : scan_item(&c, total);
        p += c.len;
        if (*p == '\0')
            break;
    }
    return rc;
}

int allot_hostlist_expand(const char *s, char ***names, int *n, char *err, size_t errlen)
{
    struct ctx list = {NULL, 0, err, errlen};
    struct out o = {0};
    uint64_t total = 0;
    int rc;

    *names = NULL;
    *n = 0;
    if (err && errlen)
        err[0] = '\0';
    if (!s || !*s)
        return fail(&list, "empty host list");
    if ((rc = each_item(s, NULL, &total, err, errlen)))
        return rc;
    o.names = allot_calloc((size_t)total, sizeof(*o.names));
    rc = o.names ? allot_index_reserve(&o.idx, (size_t)total, name_at, o.names) : ALLOT_ENOMEM;
    if (rc == 0)
        rc = each_item(s, &o, NULL, err, errlen);
    allot_index_free(&o.idx);
    if (rc) {
        allot_hostlist_free(o.names, o.n);
        if (rc == ALLOT_ENOMEM && err && errlen)
            allot_fmt(err, errlen, "%s", allot_strerror(rc));
        return rc;
    }
    *names = o.names;
    *n = o.n;
    return 0;
}

void allot_hostlist_free(char **names, int n)
{
    for (int i = 0; names && i < n; i++)
        allot_free(names[i]);
    allot_free(names);
}

/* ---- compress: names into a host list ---------------------------------- */

/* Name s as PREFIX (plen bytes) and its trailing number (digits bytes,
 * padded: with a leading zero). digits 0: no number. */
struct parts {
    size_t plen, digits;
    unsigned long num;
    bool padded;
};

static struct parts parts_of(const char *s)
{
    size_t len = strlen(s), d = 0;
    struct parts p = {0};

    while (d < len && d < NUM_DIGITS && s[len - 1 - d] >= '0' && s[len - 1 - d] <= '9')
        d++;
    p.plen = len - d;
    p.digits = d;
    p.padded = d > 1 && s[p.plen] == '0';
    for (size_t i = p.plen; i < len; i++)
        p.num = p.num * 10 + (unsigned long)(s[i] - '0');
    return p;
}

/* Whether b may follow a in one group: the same prefix and a number of
 * the same width where either is padded. */
static bool same_group(const char *a, struct parts pa, const char *b, struct parts pb)
{
    return pa.digits && pb.digits && pa.plen == pb.plen && !memcmp(a, b, pa.plen) &&
           ((!pa.padded && !pb.padded) || pa.digits == pb.digits);
}

struct sink {
    char *buf;
    size_t len, need;
};

__attribute__((format(printf, 2, 3))) static void put(struct sink *k, const char *fmt, ...)
{
    va_list ap;
    int w;

    va_start(ap, fmt);
    w = vsnprintf(k->need < k->len ? k->buf + k->need : NULL,
                  k->need < k->len ? k->len - k->need : 0, fmt, ap);
    va_end(ap);
    k->need += w > 0 ? (size_t)w : 0;
}

size_t allot_hostlist_compress(const char *const *names, int n, char *buf, size_t len)
{
    struct sink k = {.buf = buf, .len = len};

    if (len)
        buf[0] = '\0';
    for (int i = 0; i < n;) {
        struct parts p = parts_of(names[i]);
        int j = i + 1;
        while (j < n && same_group(names[i], p, names[j], parts_of(names[j])))
            j++;
        put(&k, "%s", i ? "," : "");
        if (j == i + 1) { /* alone: as it is */
            put(&k, "%s", names[i]);
            i = j;
            continue;
        }
        put(&k, "%.*s[", (int)p.plen, names[i]);
        for (int a = i; a < j;) { /* runs of consecutive numbers */
            int b = a;
            struct parts pa = parts_of(names[a]);
            while (b + 1 < j && parts_of(names[b + 1]).num == parts_of(names[b]).num + 1)
                b++;
            put(&k, "%s%s", a > i ? "," : "", names[a] + pa.plen);
            if (b > a)
                put(&k, "-%s", names[b] + pa.plen);
            a = b + 1;
        }
        put(&k, "]");
        i = j;
    }
    if (len && k.need >= len)
        buf[len - 1] = '\0';
    return k.need;
}

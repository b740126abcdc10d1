/*
 * Implementation of slurm.h: the sacct export and the scontrol node list.
 * Both readers work line by line on a NUL-terminated copy of the input,
 * cutting fields in place; every number is checked against a bound before
 * it is used, and every error names the line.
 */
#include "slurm.h"

#include "allot/common.h"
#include "csvread.h"
#include "philly.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Formats "NAME:LINE: message" into err; returns ALLOT_EINVAL. */
__attribute__((format(printf, 5, 6))) static int fail(char *err, size_t errlen, const char *name,
                                                      size_t line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    allot_fmt(err, errlen, "%s:%zu: %s", name, line, msg);
    return ALLOT_EINVAL;
}

/* A printable, bounded copy of s for messages. */
static const char *q(char *buf, size_t n, const char *s)
{
    return csv_quote(buf, n, s);
}

/* Next line of text (NUL-terminated, modified in place): *p advances past
 * it; the line loses its "\n" and a final "\r"; *raw gets its length
 * (a NUL byte inside makes strlen() shorter). NULL at the end. */
static char *next_line(char **p, char *end, size_t *raw)
{
    char *s = *p, *stop;

    if (s >= end)
        return NULL;
    stop = memchr(s, '\n', (size_t)(end - s));
    *p = stop ? stop + 1 : end;
    stop = stop ? stop : end;
    *stop = 0;
    if (stop > s && stop[-1] == '\r')
        *--stop = 0;
    *raw = (size_t)(stop - s);
    return s;
}

/* Checks a line of `raw` bytes: no NUL inside, no control bytes, bounded
 * length. */
static const char *line_problem(const char *s, size_t raw)
{
    size_t n = strlen(s);

    if (n != raw)
        return "a NUL byte inside the line";
    if (n > SLURM_MAX_LINE)
        return "a line longer than 65536 bytes";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
            return "a control byte";
    return NULL;
}

/* Strict unsigned decimal with at most `max`. */
static bool parse_uint(const char *s, size_t n, int64_t max, int64_t *out)
{
    int64_t v = 0;

    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (max - (s[i] - '0')) / 10)
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

int slurm_parse_tz(const char *s, int64_t *offset_s)
{
    int64_t h, m;

    if (strcmp(s, "UTC") == 0 || strcmp(s, "Z") == 0 || strcmp(s, "utc") == 0) {
        *offset_s = 0;
        return 0;
    }
    if ((s[0] != '+' && s[0] != '-') || strlen(s) != 6 || s[3] != ':' ||
        !parse_uint(s + 1, 2, 99, &h) || !parse_uint(s + 4, 2, 59, &m) ||
        h * 3600 + m * 60 > SLURM_MAX_TZ_S)
        return ALLOT_EINVAL;
    *offset_s = (s[0] == '-' ? -1 : 1) * (h * 3600 + m * 60);
    return 0;
}

/* ---- sacct ---------------------------------------------------------------------- */

enum scol {
    SC_JOBID,
    SC_ACCOUNT,
    SC_SUBMIT,
    SC_START,
    SC_END,
    SC_STATE,
    SC_ALLOC,
    SC_REQ,
    SC_QOS,
    SC_N
};

static const char *const scol_names[SC_N] = {
    [SC_JOBID] = "JobID",     [SC_ACCOUNT] = "Account", [SC_SUBMIT] = "Submit",
    [SC_START] = "Start",     [SC_END] = "End",         [SC_STATE] = "State",
    [SC_ALLOC] = "AllocTRES", [SC_REQ] = "ReqTRES",     [SC_QOS] = "QOS",
};

#define SACCT_MAX_COLS 256

/* Splits s at '|' into f[0..*nf); false when there are more than max. */
static bool split_pipes(char *s, char **f, size_t max, size_t *nf)
{
    size_t n = 0;

    for (;;) {
        char *bar = strchr(s, '|');

        if (n == max)
            return false;
        f[n++] = s;
        if (!bar)
            break;
        *bar = 0;
        s = bar + 1;
    }
    *nf = n;
    return true;
}

/* Slurm's time "YYYY-MM-DDTHH:MM:SS" as local time minus tz -> epoch.
 * 1: a time; 0: "Unknown", "None" or empty; ALLOT_EINVAL otherwise. */
static int sacct_time(const char *s, int64_t tz, int64_t *out)
{
    char buf[20];

    if (!*s || strcmp(s, "Unknown") == 0 || strcmp(s, "None") == 0)
        return 0;
    if (strlen(s) != 19 || s[10] != 'T')
        return ALLOT_EINVAL;
    memcpy(buf, s, 20);
    buf[10] = ' ';
    if (philly_parse_time(buf, out) < 0)
        return ALLOT_EINVAL;
    *out -= tz;
    return 1;
}

/* JobID kind: 1 a job (123, 123_4, 123_[1-3], 123+0), 0 a step (123.x),
 * -1 malformed. */
static int jobid_kind(const char *s)
{
    size_t d = strspn(s, "0123456789");

    if (d == 0 || d > 20)
        return -1;
    s += d;
    if (*s == '_') {
        s++;
        if (*s == '[') {
            const char *close = strchr(s, ']');

            if (!close)
                return -1;
            s = close + 1;
        } else {
            d = strspn(s, "0123456789");
            if (d == 0 || d > 20)
                return -1;
            s += d;
        }
    } else if (*s == '+') {
        s++;
        d = strspn(s, "0123456789");
        if (d == 0 || d > 20)
            return -1;
        s += d;
    }
    if (*s == 0)
        return 1;
    if (*s == '.' && s[1])
        return 0;
    return -1;
}

/* States of a job that ran (when it has a start and an end). */
static bool ran_state(const char *w)
{
    static const char *const ran[] = {"COMPLETED", "FAILED",    "TIMEOUT",       "CANCELLED",
                                      "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL",
                                      "DEADLINE",  "REQUEUED"};

    for (size_t i = 0; i < sizeof(ran) / sizeof(ran[0]); i++)
        if (strcmp(w, ran[i]) == 0)
            return true;
    return false;
}

static bool live_state(const char *w)
{
    static const char *const live[] = {"PENDING",      "RUNNING",     "SUSPENDED",   "RESIZING",
                                       "REQUEUE_HOLD", "REQUEUE_FED", "REVOKED",     "SPECIAL_EXIT",
                                       "STOPPED",      "SIGNALING",   "CONFIGURING", "COMPLETING"};

    for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
        if (strcmp(w, live[i]) == 0)
            return true;
    return false;
}

/* GPUs of a TRES list "cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1":
 * gres/gpu when present, else the sum of gres/gpu:MODEL. Returns 0 with
 * *gpus (0 when none), or ALLOT_EINVAL with a message in msg. */
static int tres_gpus(const char *s, int64_t *gpus, char *msg, size_t msglen)
{
    int64_t total = -1, typed = 0;
    char qb[80];

    *gpus = 0;
    while (*s) {
        const char *comma = strchr(s, ','), *eq;
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        int64_t v;

        eq = memchr(s, '=', n);
        if (!eq || eq == s) {
            char item[64];

            allot_fmt(item, sizeof(item), "%.*s", (int)(n < 60 ? n : 60), s);
            allot_fmt(msg, msglen, "TRES item %s is not NAME=VALUE", q(qb, sizeof(qb), item));
            return ALLOT_EINVAL;
        }
        if ((size_t)(eq - s) >= 8 && strncmp(s, "gres/gpu", 8) == 0 &&
            (eq - s == 8 || s[8] == ':')) {
            const char *val = eq + 1;
            size_t vl = n - (size_t)(val - s);

            if (!parse_uint(val, vl, SLURM_MAX_GPUS, &v)) {
                char item[64];

                allot_fmt(item, sizeof(item), "%.*s", (int)(n < 60 ? n : 60), s);
                allot_fmt(msg, msglen, "GPU count in %s is not a whole number up to %d",
                          q(qb, sizeof(qb), item), SLURM_MAX_GPUS);
                return ALLOT_EINVAL;
            }
            if (eq - s == 8)
                total = v;
            else if ((typed += v) > SLURM_MAX_GPUS) {
                allot_fmt(msg, msglen, "more than %d GPUs in one job", SLURM_MAX_GPUS);
                return ALLOT_EINVAL;
            }
        }
        s += n;
        if (*s == ',')
            s++;
    }
    *gpus = total >= 0 ? total : typed;
    return 0;
}

struct sacct_row {
    int64_t submit, start, end, gpus;
    bool started, ended;
};

/* One data line (already split). Returns 1 to keep the job in *row, 0 to
 * skip it (counted), or ALLOT_EINVAL. */
static int sacct_row(char **f, const int *col, int64_t tz, const char *name, size_t line,
                     struct slurm_sacct_counts *c, struct sacct_row *row, char *err, size_t errlen)
{
    char qb[80], qb2[80], state[32], msg[256];
    const char *tres;
    int kind = jobid_kind(f[col[SC_JOBID]]), rc;
    size_t wl;

    if (kind < 0)
        return fail(err, errlen, name, line, "JobID %s is not a Slurm job id (123, 123_4, 123.0)",
                    q(qb, sizeof(qb), f[col[SC_JOBID]]));
    if (kind == 0) {
        c->steps++;
        return 0;
    }
    /* "CANCELLED by 1234": the first word is the state */
    wl = strcspn(f[col[SC_STATE]], " ");
    if (wl == 0 || wl >= sizeof(state))
        return fail(err, errlen, name, line, "State %s is not a Slurm job state",
                    q(qb, sizeof(qb), f[col[SC_STATE]]));
    memcpy(state, f[col[SC_STATE]], wl);
    state[wl] = 0;
    if (!ran_state(state) && !live_state(state))
        return fail(err, errlen, name, line, "State %s is not a Slurm job state",
                    q(qb, sizeof(qb), f[col[SC_STATE]]));
    if (sacct_time(f[col[SC_SUBMIT]], tz, &row->submit) <= 0)
        return fail(err, errlen, name, line, "Submit %s is not a time YYYY-MM-DDTHH:MM:SS",
                    q(qb, sizeof(qb), f[col[SC_SUBMIT]]));
    if ((rc = sacct_time(f[col[SC_START]], tz, &row->start)) < 0)
        return fail(err, errlen, name, line, "Start %s is not a time YYYY-MM-DDTHH:MM:SS",
                    q(qb, sizeof(qb), f[col[SC_START]]));
    row->started = rc == 1;
    if ((rc = sacct_time(f[col[SC_END]], tz, &row->end)) < 0)
        return fail(err, errlen, name, line, "End %s is not a time YYYY-MM-DDTHH:MM:SS",
                    q(qb, sizeof(qb), f[col[SC_END]]));
    row->ended = rc == 1;
    tres = col[SC_ALLOC] >= 0 && *f[col[SC_ALLOC]] ? f[col[SC_ALLOC]]
           : col[SC_REQ] >= 0                      ? f[col[SC_REQ]]
                                                   : "";
    if (tres_gpus(tres, &row->gpus, msg, sizeof(msg)) < 0)
        return fail(err, errlen, name, line, "%s", msg);
    /* Slurm gives a job cancelled while pending Start = End and no
     * AllocTRES: it never ran */
    if (!row->started || (strcmp(state, "CANCELLED") == 0 && col[SC_ALLOC] >= 0 &&
                          !*f[col[SC_ALLOC]] && row->ended && row->end == row->start)) {
        c->never_started++;
        return 0;
    }
    if (!row->ended || !ran_state(state)) {
        c->running++;
        return 0;
    }
    if (row->end < row->start)
        return fail(err, errlen, name, line, "End %s lies before Start %s",
                    q(qb, sizeof(qb), f[col[SC_END]]), q(qb2, sizeof(qb2), f[col[SC_START]]));
    if (row->start < row->submit)
        return fail(err, errlen, name, line, "Start %s lies before Submit %s",
                    q(qb, sizeof(qb), f[col[SC_START]]), q(qb2, sizeof(qb2), f[col[SC_SUBMIT]]));
    if (row->end - row->start > SLURM_MAX_DURATION)
        return fail(err, errlen, name, line, "the job ran more than %d s", SLURM_MAX_DURATION);
    return 1;
}

/* Reads the header into col[] (-1: absent). */
static int sacct_header(char *s, const char *name, int *col, size_t *ncols, char *err,
                        size_t errlen)
{
    char *f[SACCT_MAX_COLS];
    size_t nf;

    for (int k = 0; k < SC_N; k++)
        col[k] = -1;
    if (!split_pipes(s, f, SACCT_MAX_COLS, &nf))
        return fail(err, errlen, name, 1, "more than %d columns", SACCT_MAX_COLS);
    for (size_t i = 0; i < nf; i++)
        for (int k = 0; k < SC_N; k++)
            if (strcasecmp(f[i], scol_names[k]) == 0) {
                if (col[k] >= 0)
                    return fail(err, errlen, name, 1, "column %s appears twice", scol_names[k]);
                col[k] = (int)i;
            }
    for (int k = 0; k < SC_QOS; k++) {
        if (k == SC_ALLOC || k == SC_REQ)
            continue;
        if (col[k] < 0)
            return fail(err, errlen, name, 1,
                        "no %s column (want a header line from sacct -P -o "
                        "JobID,Account,Submit,Start,End,State,AllocTRES,...)",
                        scol_names[k]);
    }
    if (col[SC_ALLOC] < 0 && col[SC_REQ] < 0)
        return fail(err, errlen, name, 1, "no AllocTRES or ReqTRES column: the GPUs come from it");
    *ncols = nf;
    return 0;
}

int slurm_parse_sacct(const char *buf, size_t len, const char *name, int64_t tz_offset_s,
                      struct replay_trace *tr, struct slurm_sacct_counts *counts, char *err,
                      size_t errlen)
{
    struct slurm_sacct_counts c = {0};
    char *text = NULL, *p, *end, *s;
    int col[SC_N] = {0}, rc; /* (read_header sets every one; -O3 cannot tell) */
    size_t ncols = 0, line = 0, raw;

    if (tz_offset_s < -SLURM_MAX_TZ_S || tz_offset_s > SLURM_MAX_TZ_S) {
        allot_fmt(err, errlen, "time zone offset out of range");
        return ALLOT_EINVAL;
    }
    if ((rc = csv_copy_text(buf, len, name, SLURM_MAX_FILE, &text, err, errlen)) < 0)
        return rc;
    p = text;
    end = text + len;
    while ((s = next_line(&p, end, &raw)) != NULL) {
        const char *why = line_problem(s, raw);
        char *f[SACCT_MAX_COLS];
        size_t nf;
        struct sacct_row row = {0};
        struct replay_trace_job j = {0};

        line++;
        if (why) {
            rc = fail(err, errlen, name, line, "%s", why);
            goto out;
        }
        if (line == 1) {
            if ((rc = sacct_header(s, name, col, &ncols, err, errlen)) < 0)
                goto out;
            continue;
        }
        if (*s == 0) {
            /* blank lines only at the end */
            while ((s = next_line(&p, end, &raw)) != NULL) {
                line++;
                if (*s) {
                    rc = fail(err, errlen, name, line - 1, "a blank line inside the export");
                    goto out;
                }
            }
            break;
        }
        c.lines++;
        nf = 1;
        for (const char *b = s; (b = strchr(b, '|')) != NULL; b++)
            nf++;
        if (nf != ncols || !split_pipes(s, f, SACCT_MAX_COLS, &nf)) {
            rc = fail(err, errlen, name, line,
                      "%zu fields, the header has %zu (a '|' inside a field? leave JobName out)",
                      nf, ncols);
            goto out;
        }
        rc = sacct_row(f, col, tz_offset_s, name, line, &c, &row, err, errlen);
        if (rc < 0)
            goto out;
        if (rc == 0)
            continue;
        j.submit = row.submit;
        j.duration = row.end - row.start;
        j.gpus = row.gpus;
        j.line = line > UINT32_MAX ? UINT32_MAX : (uint32_t)line;
        j.tenant = replay_trace_intern(tr, false,
                                       *f[col[SC_ACCOUNT]] ? f[col[SC_ACCOUNT]] : "(no account)");
        j.prio = -1;
        if (j.tenant >= 0 && col[SC_QOS] >= 0 && *f[col[SC_QOS]] &&
            (j.prio = replay_trace_intern(tr, true, f[col[SC_QOS]])) < 0)
            j.tenant = ALLOT_ENOMEM;
        if (j.tenant < 0 || replay_trace_add(tr, &j) < 0) {
            allot_fmt(err, errlen, "out of memory");
            rc = ALLOT_ENOMEM;
            goto out;
        }
        c.jobs++;
    }
    if (line == 0) {
        rc = fail(err, errlen, name, 1, "empty file: want the header line of sacct -P");
        goto out;
    }
    rc = 0;
    if (!tr->source[0])
        allot_fmt(tr->source, sizeof(tr->source), "%s", name);
out:
    allot_free(text);
    if (counts)
        *counts = c;
    return rc;
}

int slurm_read_sacct(const char *path, int64_t tz_offset_s, struct replay_trace *tr,
                     struct slurm_sacct_counts *counts, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    int rc = csv_read_file(path, SLURM_MAX_FILE, &text, &len, err, errlen);

    if (rc < 0)
        return rc;
    rc = slurm_parse_sacct(text, len, path, tz_offset_s, tr, counts, err, errlen);
    allot_free(text);
    return rc;
}

/* ---- scontrol show nodes -o ------------------------------------------------------ */

/* Value of Key= on a node line (fields "Key=Value" separated by spaces;
 * a word without '=' continues the previous value). Copies it into out;
 * false when absent. */
static bool node_field(const char *s, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);

    for (const char *w = s; *w;) {
        size_t wl = strcspn(w, " ");

        if ((w == s || w[-1] == ' ') && wl > kl && strncmp(w, key, kl) == 0 && w[kl] == '=') {
            size_t vl = wl - kl - 1;

            if (vl >= n)
                vl = n - 1;
            memcpy(out, w + kl + 1, vl);
            out[vl] = 0;
            return true;
        }
        w += wl;
        w += strspn(w, " ");
    }
    return false;
}

/* Slurm's GPU type name to a catalog model: "nvidia_a100-sxm4-80gb" ->
 * "A100-SXM4-80GB", "tesla_v100" -> "V100", "a100_80gb" -> "A100-80GB". */
static int model_of(const struct allot_catalog *cat, const char *type)
{
    char m[ALLOT_MODEL_NAME_MAX];
    size_t i = 0;
    int idx;

    if (strncasecmp(type, "nvidia_", 7) == 0 || strncasecmp(type, "nvidia-", 7) == 0)
        type += 7;
    if (strncasecmp(type, "tesla_", 6) == 0 || strncasecmp(type, "tesla-", 6) == 0)
        type += 6;
    for (; type[i] && i + 1 < sizeof(m); i++)
        m[i] = type[i] == '_' ? '-' : (char)toupper((unsigned char)type[i]);
    m[i] = 0;
    if (type[i])
        return -1;
    idx = allot_catalog_find_model(cat, m);
    return idx;
}

/* GPUs of a Gres value "gpu:a100:4(S:0-1),gpu:v100:2,mps:100" or
 * "gpu:4": their count and the first typed model (*type, empty when none).
 * Returns 0 or ALLOT_EINVAL with a message. */
static int gres_gpus(const char *s, int64_t *gpus, char *type, size_t tn, char *msg, size_t ml)
{
    char qb[80];

    *gpus = 0;
    type[0] = 0;
    if (strcmp(s, "(null)") == 0)
        return 0;
    while (*s) {
        size_t n = strcspn(s, ",");
        char item[128];
        char *paren, *c1, *c2;
        int64_t v;

        /* a comma inside "(S:0-1,3)" belongs to the item */
        if (memchr(s, '(', n) && !memchr(s, ')', n)) {
            const char *close = strchr(s, ')');

            n = close ? (size_t)(close - s) + 1 + strcspn(close + 1, ",") : strlen(s);
        }
        if (n >= sizeof(item)) {
            allot_fmt(msg, ml, "Gres entry longer than %zu bytes", sizeof(item) - 1);
            return ALLOT_EINVAL;
        }
        memcpy(item, s, n);
        item[n] = 0;
        s += n;
        if (*s == ',')
            s++;
        if ((paren = strchr(item, '(')) != NULL)
            *paren = 0;
        if (strncmp(item, "gpu", 3) != 0 || (item[3] != ':' && item[3] != 0))
            continue; /* mps, shard, other gres */
        c1 = strchr(item, ':');
        if (!c1) {
            allot_fmt(msg, ml, "Gres %s has no count", q(qb, sizeof(qb), item));
            return ALLOT_EINVAL;
        }
        c2 = strchr(c1 + 1, ':');
        if (c2) {
            *c2 = 0;
            /* one node, one model: a node of two types would be counted as
             * one of them */
            if (type[0] && strncmp(type, c1 + 1, tn - 1) != 0) {
                char qb2[80];

                allot_fmt(msg, ml,
                          "Gres names two GPU types (%s and %s): a node of mixed GPUs is not "
                          "supported; list it as one type or leave it out",
                          q(qb, sizeof(qb), type), q(qb2, sizeof(qb2), c1 + 1));
                return ALLOT_EINVAL;
            }
            if (!type[0])
                allot_fmt(type, tn, "%s", c1 + 1);
        }
        if (!parse_uint(c2 ? c2 + 1 : c1 + 1, strlen(c2 ? c2 + 1 : c1 + 1), SLURM_MAX_GPUS, &v)) {
            allot_fmt(msg, ml, "Gres GPU count %s is not a whole number up to %d",
                      q(qb, sizeof(qb), c2 ? c2 + 1 : c1 + 1), SLURM_MAX_GPUS);
            return ALLOT_EINVAL;
        }
        if ((*gpus += v) > SLURM_MAX_GPUS) {
            allot_fmt(msg, ml, "more than %d GPUs on one node", SLURM_MAX_GPUS);
            return ALLOT_EINVAL;
        }
    }
    return 0;
}

/* One node line into *g (count 1). 1: a GPU node; 0: no GPUs. */
static int node_line(const char *s, const char *name, size_t line, const struct allot_catalog *cat,
                     const char *gpu_model, struct replay_node_group *g, char *err, size_t errlen)
{
    char v[256], type[64], msg[256], qb[80];
    int64_t gpus, cpus, mem;
    int idx;

    if (!node_field(s, "NodeName", v, sizeof(v)) || !v[0])
        return fail(err, errlen, name, line, "no NodeName= (want scontrol show nodes -o output)");
    if (!node_field(s, "Gres", v, sizeof(v)))
        return fail(err, errlen, name, line, "no Gres= field");
    if (gres_gpus(v, &gpus, type, sizeof(type), msg, sizeof(msg)) < 0)
        return fail(err, errlen, name, line, "%s", msg);
    if (gpus == 0)
        return 0;
    if (gpus > ALLOT_MAX_GPUS)
        return fail(err, errlen, name, line, "%lld GPUs on one node; at most %d are supported",
                    (long long)gpus, ALLOT_MAX_GPUS);
    if (!node_field(s, "CPUTot", v, sizeof(v)))
        return fail(err, errlen, name, line, "no CPUTot= field");
    if (!parse_uint(v, strlen(v), 1000000, &cpus) || cpus < 1)
        return fail(err, errlen, name, line, "CPUTot %s is not a count of 1..1000000",
                    q(qb, sizeof(qb), v));
    if (!node_field(s, "RealMemory", v, sizeof(v)))
        return fail(err, errlen, name, line, "no RealMemory= field");
    if (!parse_uint(v, strlen(v), (int64_t)1 << 40, &mem) || mem < 1)
        return fail(err, errlen, name, line, "RealMemory %s is not MiB of 1..2^40",
                    q(qb, sizeof(qb), v));
    idx = type[0] ? model_of(cat, type) : -1;
    if (idx < 0 && gpu_model)
        idx = allot_catalog_find_model(cat, gpu_model);
    if (idx < 0)
        return fail(err, errlen, name, line,
                    type[0] ? "GPU type %s is not in the catalog: name the model with --gpu-model"
                            : "untyped GPUs%s: name their model with --gpu-model",
                    type[0] ? q(qb, sizeof(qb), type) : "");
    memset(g, 0, sizeof(*g));
    allot_fmt(g->model, sizeof(g->model), "%s", cat->models[idx].name);
    g->model_idx = idx;
    g->gpus = (int)gpus;
    g->cpu_milli = cpus * ALLOT_MILLI;
    g->mem_mib = mem;
    g->count = 1;
    return 1;
}

int slurm_parse_nodes(const char *buf, size_t len, const char *name,
                      const struct allot_catalog *cat, const char *gpu_model,
                      struct replay_node_group **groups, int *n, size_t *cpu_only, char *err,
                      size_t errlen)
{
    struct replay_node_group *v = NULL, g = {0};
    size_t cap = 0, line = 0, nv = 0, none = 0;
    char *text = NULL, *p, *end, *s;
    size_t raw;
    int rc;

    *groups = NULL;
    *n = 0;
    if (gpu_model && allot_catalog_find_model(cat, gpu_model) < 0) {
        allot_fmt(err, errlen, "--gpu-model %s: not a model of the GPU catalog", gpu_model);
        return ALLOT_EINVAL;
    }
    if ((rc = csv_copy_text(buf, len, name, SLURM_MAX_FILE, &text, err, errlen)) < 0)
        return rc;
    p = text;
    end = text + len;
    while ((s = next_line(&p, end, &raw)) != NULL) {
        const char *why = line_problem(s, raw);
        size_t k;

        line++;
        if (why) {
            rc = fail(err, errlen, name, line, "%s", why);
            goto fail;
        }
        if (s[strspn(s, " \t")] == 0)
            continue;
        rc = node_line(s, name, line, cat, gpu_model, &g, err, errlen);
        if (rc < 0)
            goto fail;
        if (rc == 0) {
            none++;
            continue;
        }
        for (k = 0; k < nv; k++)
            if (v[k].model_idx == g.model_idx && v[k].gpus == g.gpus &&
                v[k].cpu_milli == g.cpu_milli && v[k].mem_mib == g.mem_mib)
                break;
        if (k < nv) {
            if (v[k].count >= REPLAY_MAX_NODES) {
                rc = fail(err, errlen, name, line, "more than %d nodes", REPLAY_MAX_NODES);
                goto fail;
            }
            v[k].count++;
            continue;
        }
        if (nv == REPLAY_MAX_GROUPS) {
            rc = fail(err, errlen, name, line, "more than %d node shapes", REPLAY_MAX_GROUPS);
            goto fail;
        }
        if (allot_grow((void **)&v, &cap, nv + 1, sizeof(*v)) < 0) {
            allot_fmt(err, errlen, "out of memory");
            rc = ALLOT_ENOMEM;
            goto fail;
        }
        v[nv++] = g;
    }
    if (nv == 0) {
        allot_fmt(err, errlen, "%s: no node with GPUs (want scontrol show nodes -o output)", name);
        rc = ALLOT_EINVAL;
        goto fail;
    }
    allot_free(text);
    *groups = v;
    *n = (int)nv;
    if (cpu_only)
        *cpu_only = none;
    return 0;
fail:
    allot_free(text);
    allot_free(v);
    return rc;
}

int slurm_read_nodes(const char *path, const struct allot_catalog *cat, const char *gpu_model,
                     struct replay_node_group **groups, int *n, size_t *cpu_only, char *err,
                     size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    int rc = csv_read_file(path, SLURM_MAX_FILE, &text, &len, err, errlen);

    if (rc < 0)
        return rc;
    rc = slurm_parse_nodes(text, len, path, cat, gpu_model, groups, n, cpu_only, err, errlen);
    allot_free(text);
    return rc;
}

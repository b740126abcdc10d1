/*
 * Implementation of include/allot/common.h: error texts, the log sink, the
 * failable allocation wrapper, bounded string helpers, the strict number
 * parser and the PRNG.
 */
#include "allot/common.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

const char *allot_strerror(int err)
{
    switch (err) {
    case ALLOT_OK:
        return "success";
    case ALLOT_ENOMEM:
        return "out of memory";
    case ALLOT_EINVAL:
        return "invalid argument";
    case ALLOT_ENOSPC:
        return "no capacity for the request";
    case ALLOT_ENOENT:
        return "no such object";
    case ALLOT_EEXIST:
        return "object already exists";
    case ALLOT_ERANGE:
        return "value out of range";
    case ALLOT_EIO:
        return "input/output error";
    case ALLOT_ESTATE:
        return "operation not valid in the current state";
    case ALLOT_EINTERNAL:
        return "internal error (broken invariant)";
    case ALLOT_EFENCED:
        return "fenced: another allotd took the lead";
    default:
        return "unknown error";
    }
}

/* ---- logging ---- */

static allot_log_fn log_fn;
static void *log_ud;
static enum allot_log_level log_max = ALLOT_LOG_WARN;

void allot_log_set(allot_log_fn fn, void *ud, enum allot_log_level max_level)
{
    log_fn = fn;
    log_ud = ud;
    log_max = max_level;
}

bool allot_log_enabled(enum allot_log_level level)
{
    return log_fn != NULL && level <= log_max;
}

void allot_log_emit(enum allot_log_level level, const char *subsys, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    if (!allot_log_enabled(level))
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    log_fn(level, subsys, buf, log_ud);
}

/* ---- invariants ---- */

static atomic_ulong breaches;
static atomic_int breach_fatal = -1; /* -1: not decided yet (read the environment) */

void allot_invariants_fatal(bool fatal)
{
    atomic_store(&breach_fatal, fatal ? 1 : 0);
}

unsigned long allot_invariant_breaches(void)
{
    return atomic_load(&breaches);
}

void allot_invariant_breach(const char *file, int line, const char *what)
{
    int fatal = atomic_load(&breach_fatal);

    atomic_fetch_add(&breaches, 1);
    if (fatal < 0) {
        const char *env = getenv("ALLOT_INVARIANTS");
        fatal = env && strcmp(env, "abort") == 0;
        atomic_store(&breach_fatal, fatal);
    }
    allot_log_emit(ALLOT_LOG_ERROR, "invariant", "%s:%d: invariant breached: %s", file, line, what);
    if (fatal) {
        fprintf(stderr, "%s:%d: invariant breached: %s\n", file, line, what);
        abort();
    }
}

/* ---- allocation ---- */

/* Atomic so that a threaded daemon counts exactly; the failure settings are
 * set by tests before threads exist but are atomic too, for the sanitizers. */
static atomic_ulong alloc_count;
static atomic_ulong alloc_fail_n;
static atomic_bool alloc_fail_sticky;

/* Counts one allocation attempt; true when it must fail. */
static bool alloc_should_fail(void)
{
    unsigned long k = atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed) + 1;
    unsigned long n = atomic_load_explicit(&alloc_fail_n, memory_order_relaxed);

    if (n == 0)
        return false;
    if (atomic_load_explicit(&alloc_fail_sticky, memory_order_relaxed))
        return k >= n;
    return k == n;
}

void allot_alloc_fail_at(unsigned long n, bool sticky)
{
    atomic_store(&alloc_count, 0);
    atomic_store(&alloc_fail_sticky, sticky);
    atomic_store(&alloc_fail_n, n);
}

unsigned long allot_alloc_count(void)
{
    return atomic_load(&alloc_count);
}

void *allot_malloc(size_t n)
{
    if (alloc_should_fail())
        return NULL;
    return malloc(n ? n : 1);
}

void *allot_calloc(size_t count, size_t size)
{
    if (alloc_should_fail())
        return NULL;
    if (count == 0 || size == 0)
        count = size = 1;
    return calloc(count, size);
}

void *allot_realloc(void *p, size_t n)
{
    if (alloc_should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}

char *allot_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = allot_malloc(n);

    if (d)
        memcpy(d, s, n);
    return d;
}

void allot_free(void *p)
{
    free(p);
}

int allot_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    size_t ncap;
    void *p;

    if (need <= *cap)
        return 0;
    if (elem == 0 || need > SIZE_MAX / elem)
        return ALLOT_ENOMEM;
    ncap = *cap ? *cap : 8;
    /* double without wrapping: past half the range, take exactly `need` */
    while (ncap < need)
        ncap = ncap <= SIZE_MAX / 2 ? ncap * 2 : need;
    if (ncap > SIZE_MAX / elem)
        ncap = need;
    p = allot_realloc(*arr, ncap * elem);
    if (!p)
        return ALLOT_ENOMEM;
    *arr = p;
    *cap = ncap;
    return 0;
}

/* ---- strings ---- */

int allot_fmt(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return n;
}

const char *allot_utc_text(int64_t t, char *buf, size_t size)
{
    time_t at = (time_t)t;
    struct tm tm;

    if (!gmtime_r(&at, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
        allot_fmt(buf, size, "%lld", (long long)t);
    return buf;
}

size_t allot_strlcpy(char *dst, const char *src, size_t size)
{
    size_t n = strlen(src);

    if (size) {
        size_t c = n < size - 1 ? n : size - 1;
        memcpy(dst, src, c);
        dst[c] = '\0';
    }
    return n;
}

/* ---- PRNG ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void allot_rng_seed(struct allot_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t allot_rng_next(struct allot_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t allot_rng_below(struct allot_rng *r, uint64_t n)
{
    uint64_t lim, x;

    if (n == 0)
        return 0;
    lim = UINT64_MAX - UINT64_MAX % n;
    do {
        x = allot_rng_next(r);
    } while (x >= lim);
    return x % n;
}

bool allot_url_base_ok(const char *u)
{
    size_t skip = !strncmp(u, "http://", 7) ? 7 : !strncmp(u, "https://", 8) ? 8 : 0;

    if (!skip || !u[skip] || u[skip] == '/' || strlen(u) > 256)
        return false;
    for (const char *p = u + skip; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '?' || *p == '#' || *p == '@' ||
            *p == '\\')
            return false;
    return true;
}

bool allot_env_name_ok(const char *name)
{
    size_t n = 0;

    for (const unsigned char *p = (const unsigned char *)name; *p; p++, n++)
        if (*p <= ' ' || *p >= 0x7f || *p == '=')
            return false;
    return n >= 1 && n <= 256;
}

bool allot_env_reserved(const char *name)
{
    static const char *const prefixes[] = {"ALLOT_GPU_", "ALLOT_SHIM_", "CUDA_MPS_"};
    static const char *const names[] = {"ALLOT_CUDA_LIB", "ALLOT_NVML_LIB", "LD_PRELOAD"};

    if (!strcmp(name, "ALLOT_SHIM_LOG")) /* where the shim writes its log: the job's business */
        return false;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
            return true;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(name, names[i]))
            return true;
    return false;
}

bool allot_env_node_set(const char *name)
{
    static const char *const names[] = {"PATH",
                                        "HOME",
                                        "USER",
                                        "LOGNAME",
                                        "ALLOT_JOB_ID",
                                        "ALLOT_TASK_INDEX",
                                        "ALLOT_NUM_TASKS",
                                        "ALLOT_NODE",
                                        "ALLOT_JOB_NAME",
                                        "ALLOT_CPUS_PER_TASK",
                                        "ALLOT_CPU_CORES",
                                        "ALLOT_TENANT",
                                        "ALLOT_JOB_TOKEN",
                                        "ALLOT_ARRAY_JOB_ID",
                                        "ALLOT_ARRAY_TASK_ID",
                                        "ALLOT_TASK_NODES",
                                        "ALLOT_TASK_ADDRESSES",
                                        "CUDA_VISIBLE_DEVICES",
                                        "NVIDIA_VISIBLE_DEVICES"};

    if (!strncmp(name, "ALLOT_RDMA_", 11))
        return true;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(name, names[i]))
            return true;
    return false;
}

uint64_t allot_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

bool allot_parse_num(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    int64_t v = 0;

    if (!s || !*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        /* v * 10 + d <= INT64_MAX, checked before it is computed */
        if (v > (INT64_MAX - (*s - '0')) / 10)
            return false;
        v = v * 10 + (*s - '0');
    }
    if (v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

int allot_argv_hide(int argc, char **argv, const char *opt)
{
    size_t n = strlen(opt);
    int hid = 0;

    for (int i = 0; i < argc; i++) {
        char *v = NULL;

        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], opt) && i + 1 < argc)
            v = argv[++i];
        else if (!strncmp(argv[i], opt, n) && argv[i][n] == '=')
            v = argv[i] + n + 1;
        if (v && *v) {
            memset(v, '*', strlen(v));
            hid++;
        }
    }
    return hid;
}

/* ---- several allotd (docs/ha.md) ----------------------------------------- */

static bool http_scheme(const char *url)
{
    return !strncmp(url, "http://", 7) || !strncmp(url, "https://", 8);
}

static void strip_slashes(char *url)
{
    for (size_t n = strlen(url); n > 0 && url[n - 1] == '/'; n--)
        url[n - 1] = '\0';
}

void allot_server_list_free(char **urls, int n)
{
    for (int i = 0; urls && i < n; i++)
        allot_free(urls[i]);
    allot_free(urls);
}

int allot_server_list(const char *list, char ***out, int *n)
{
    char **v = NULL;
    int k = 0, rc = 0;

    *out = NULL;
    *n = 0;
    for (const char *p = list ? list : ""; *p && rc == 0;) {
        size_t len = strcspn(p, ",");
        char piece[2100], one[2120], **more;

        if (len == 0 || len > 2048) {
            rc = ALLOT_EINVAL;
            break;
        }
        allot_fmt(piece, sizeof(piece), "%.*s", (int)len, p);
        allot_fmt(one, sizeof(one), "%s%s", strstr(piece, "://") ? "" : "http://", piece);
        if (!http_scheme(one)) {
            rc = ALLOT_EINVAL;
            break;
        }
        strip_slashes(one);
        if (!(more = allot_realloc(v, (size_t)(k + 1) * sizeof(*more))) ||
            !(more[k] = allot_strdup(one))) {
            if (more)
                v = more;
            rc = ALLOT_ENOMEM;
            break;
        }
        v = more;
        k++;
        p += len;
        if (*p == ',')
            p++;
    }
    if (rc == 0 && k == 0)
        rc = ALLOT_EINVAL;
    if (rc != 0) {
        allot_server_list_free(v, k);
        return rc;
    }
    *out = v;
    *n = k;
    return 0;
}

bool allot_leader_url(const char *from, const char *leader, char *out, size_t len)
{
    if (!leader || strlen(leader) >= len || !http_scheme(leader) || strpbrk(leader, " \t\r\n") ||
        (!strncmp(leader, "http://", 7) && from && !strncmp(from, "https://", 8)))
        return false;
    allot_strlcpy(out, leader, len);
    strip_slashes(out);
    return true;
}

static size_t index_slot(const struct allot_index *x, const char *name, size_t len)
{
    return (size_t)allot_fnv1a(ALLOT_FNV1A_INIT, name, len) & (x->cap - 1);
}

/* The slot holding the position named name[0..len), or the empty slot
 * that ends its probe (x->cap > 0). */
static size_t index_probe(const struct allot_index *x, const char *name, size_t len,
                          allot_index_name_fn fn, const void *ctx)
{
    size_t h = index_slot(x, name, len);

    for (; x->tab[h] >= 0; h = (h + 1) & (x->cap - 1)) {
        const char *s = fn(ctx, x->tab[h]);

        if (strncmp(s, name, len) == 0 && s[len] == '\0')
            break;
    }
    return h;
}

int allot_index_find_n(const struct allot_index *x, const char *name, size_t len,
                       allot_index_name_fn fn, const void *ctx)
{
    return x->cap ? x->tab[index_probe(x, name, len, fn, ctx)] : -1;
}

int allot_index_find(const struct allot_index *x, const char *name, allot_index_name_fn fn,
                     const void *ctx)
{
    return allot_index_find_n(x, name, strlen(name), fn, ctx);
}

/* Puts position i in a table of at least one free slot. */
static void index_put(struct allot_index *x, int i, allot_index_name_fn fn, const void *ctx)
{
    const char *name = fn(ctx, i);
    size_t h = index_slot(x, name, strlen(name));

    while (x->tab[h] >= 0)
        h = (h + 1) & (x->cap - 1);
    x->tab[h] = i;
}

/* A table of cap slots (a power of two) holding x's positions, or the
 * positions 0..n-1 when n >= 0. */
static int index_resize(struct allot_index *x, size_t cap, int n, allot_index_name_fn fn,
                        const void *ctx)
{
    struct allot_index y = {.cap = cap};

    if (cap > SIZE_MAX / sizeof(*y.tab) || !(y.tab = allot_malloc(cap * sizeof(*y.tab))))
        return ALLOT_ENOMEM;
    for (size_t h = 0; h < cap; h++)
        y.tab[h] = -1;
    for (size_t h = 0; n < 0 && h < x->cap; h++)
        if (x->tab[h] >= 0) {
            index_put(&y, x->tab[h], fn, ctx);
            y.n++;
        }
    for (int i = 0; i < n; i++) {
        index_put(&y, i, fn, ctx);
        y.n++;
    }
    allot_free(x->tab);
    *x = y;
    return 0;
}

int allot_index_reserve(struct allot_index *x, size_t n, allot_index_name_fn fn, const void *ctx)
{
    size_t cap = x->cap ? x->cap : 64;

    /* at most half full: probes stay short */
    while (n > cap / 2) {
        if (cap > SIZE_MAX / 4)
            return ALLOT_ENOMEM;
        cap *= 2;
    }
    return cap == x->cap ? 0 : index_resize(x, cap, -1, fn, ctx);
}

int allot_index_add(struct allot_index *x, int i, allot_index_name_fn fn, const void *ctx)
{
    if (ALLOT_NEVER(i < 0 || allot_index_find(x, fn(ctx, i), fn, ctx) >= 0))
        return 0; /* a position, or a name, held once */
    if (allot_index_reserve(x, x->n + 1, fn, ctx) < 0)
        return ALLOT_ENOMEM;
    index_put(x, i, fn, ctx);
    x->n++;
    return 0;
}

int allot_index_rebuild(struct allot_index *x, int n, allot_index_name_fn fn, const void *ctx)
{
    size_t cap = 64;

    while ((size_t)n > cap / 2)
        cap *= 2;
    return index_resize(x, cap, n, fn, ctx);
}

void allot_index_remove(struct allot_index *x, int i, allot_index_name_fn fn, const void *ctx)
{
    const char *name = fn(ctx, i);
    size_t h;

    if (!x->cap || x->tab[h = index_probe(x, name, strlen(name), fn, ctx)] != i)
        return;
    /* empty the slot, then put back the positions of the run after it,
     * which may have probed past it (no tombstones: lookups stay short) */
    x->tab[h] = -1;
    x->n--;
    for (h = (h + 1) & (x->cap - 1); x->tab[h] >= 0; h = (h + 1) & (x->cap - 1)) {
        int k = x->tab[h];

        x->tab[h] = -1;
        index_put(x, k, fn, ctx);
    }
}

void allot_index_free(struct allot_index *x)
{
    allot_free(x->tab);
    memset(x, 0, sizeof(*x));
}

static const struct {
    const char *name;
    int sig;
} user_signals[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ABRT", SIGABRT},
                    {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"ALRM", SIGALRM},
                    {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}};

int allot_signal_parse(const char *s)
{
    size_t n = sizeof(user_signals) / sizeof(user_signals[0]);
    int64_t num;

    if (!s)
        return 0;
    if (allot_parse_num(s, 1, 64, &num)) {
        for (size_t i = 0; i < n; i++)
            if (user_signals[i].sig == num)
                return (int)num;
        return 0;
    }
    if (!strncasecmp(s, "SIG", 3))
        s += 3;
    for (size_t i = 0; i < n; i++)
        if (!strcasecmp(s, user_signals[i].name))
            return user_signals[i].sig;
    return 0;
}

const char *allot_signal_name(int sig)
{
    for (size_t i = 0; i < sizeof(user_signals) / sizeof(user_signals[0]); i++)
        if (user_signals[i].sig == sig)
            return user_signals[i].name;
    return NULL;
}

int64_t allot_mono_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

bool allot_node_name_ok(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && n <= ALLOT_NODE_NAME_MAX && strspn(s, ALLOT_NODE_NAME_CHARS) == n;
}

bool allot_image_name_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 128 || !strcmp(s, ".") || strstr(s, ".."))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '_' || *s == '-' || *s == ':'))
            return false;
    return true;
}

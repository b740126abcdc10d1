/*
 * allot common layer: error codes, logging through a callback, and the
 * allocation wrapper every library allocation goes through.
 *
 * Conventions (STYLE.md 8, 11, 16): actions return 0 or a negative ALLOT_E*
 * code; libraries never print, they call the log callback; every allocation
 * goes through allot_malloc()/allot_calloc()/allot_realloc() so tests can make
 * the Nth call fail with allot_alloc_fail_at().
 *
 * Thread-safety: the log callback and the fault-injection settings are
 * process-wide and meant to be set up once at start (or by a test) before
 * threads exist. The allocation counter is atomic, so allocations from
 * several threads are counted exactly.
 */
#ifndef ALLOT_COMMON_H
#define ALLOT_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Error codes: always negative, 0 is success. */
enum allot_err {
    ALLOT_OK = 0,
    ALLOT_ENOMEM = -1,    /* allocation failed */
    ALLOT_EINVAL = -2,    /* invalid argument or malformed input */
    ALLOT_ENOSPC = -3,    /* does not fit: no capacity for the request */
    ALLOT_ENOENT = -4,    /* no such object */
    ALLOT_EEXIST = -5,    /* object already exists */
    ALLOT_ERANGE = -6,    /* value out of range */
    ALLOT_EIO = -7,       /* I/O error (never returned by the core) */
    ALLOT_ESTATE = -8,    /* operation not valid in the object's state */
    ALLOT_EINTERNAL = -9, /* broken invariant: a bug */
    ALLOT_EFENCED = -10   /* a store write refused: another allotd took the lead */
};

/* Returns a static, human-readable text for an ALLOT_E* code (never NULL). */
const char *allot_strerror(int err);

/* ---- logging ---------------------------------------------------------- */

enum allot_log_level { ALLOT_LOG_ERROR, ALLOT_LOG_WARN, ALLOT_LOG_INFO, ALLOT_LOG_DEBUG };

/* A log sink. `msg` is borrowed for the duration of the call. */
typedef void (*allot_log_fn)(enum allot_log_level level, const char *subsys, const char *msg,
                             void *ud);

/* Installs the log sink (NULL: discard) and the most verbose level passed on. */
void allot_log_set(allot_log_fn fn, void *ud, enum allot_log_level max_level);

/* True when a message at `level` would reach the sink (check before formatting). */
bool allot_log_enabled(enum allot_log_level level);

/* Formats and passes one message to the sink. Use the ALLOT_LOG macro. */
void allot_log_emit(enum allot_log_level level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define ALLOT_LOG(level, subsys, ...)                                                              \
    do {                                                                                           \
        if (allot_log_enabled(level))                                                              \
            allot_log_emit(level, subsys, __VA_ARGS__);                                            \
    } while (0)

/* ---- invariants ------------------------------------------------------ */

/*
 * ALLOT_ALWAYS(x) / ALLOT_NEVER(x), in the style of SQLite's ALWAYS/NEVER:
 * mark a condition the code believes is always (never) true but still
 * handles, e.g. `if (ALLOT_NEVER(k < 0)) return ALLOT_EINTERNAL;`. Each
 * evaluates to its condition. A breach is counted and logged at ERROR
 * level; when breaches are fatal (the ALLOT_INVARIANTS=abort environment
 * variable, which every test runs with, or allot_invariants_fatal(true))
 * it aborts, so tests stop on the first breach while a daemon keeps going
 * on the handled path.
 */
#define ALLOT_ALWAYS(x) ((x) ? 1 : (allot_invariant_breach(__FILE__, __LINE__, #x), 0))
#define ALLOT_NEVER(x)  ((x) ? (allot_invariant_breach(__FILE__, __LINE__, "!(" #x ")"), 1) : 0)

/* Records one breach of `what` at file:line (see ALLOT_ALWAYS). */
void allot_invariant_breach(const char *file, int line, const char *what);

/* Number of breaches recorded since the process started. */
unsigned long allot_invariant_breaches(void);

/* Makes breaches abort (true) or only count and log (false, the default
 * unless ALLOT_INVARIANTS=abort is set in the environment). */
void allot_invariants_fatal(bool fatal);

/* ---- allocation ------------------------------------------------------- */

/* malloc/calloc/realloc/strdup through one place; return NULL on failure
 * (including an injected one). Free with allot_free(), which accepts NULL. */
void *allot_malloc(size_t n);
void *allot_calloc(size_t count, size_t size);
void *allot_realloc(void *p, size_t n);
char *allot_strdup(const char *s);
void allot_free(void *p);

/* Fault injection for tests: the `n`th allocation from now (1-based) and all
 * later ones fail when `sticky`, or only that one otherwise. n == 0 turns
 * injection off. */
void allot_alloc_fail_at(unsigned long n, bool sticky);

/* Number of allocations attempted since the last allot_alloc_fail_at() call. */
unsigned long allot_alloc_count(void);

/* ---- small helpers ---------------------------------------------------- */

/* Bounded formatting into `buf` (always NUL-terminated when size > 0).
 * Returns the length that the full output would have had. */
int allot_fmt(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Unix time t as "2026-12-06T10:00:00Z" into buf (size >= 21), or its
 * number when it is no date; returns buf. */
const char *allot_utc_text(int64_t t, char *buf, size_t size);

/* Copies `src` into `dst` of `size` bytes, truncating; returns strlen(src). */
size_t allot_strlcpy(char *dst, const char *src, size_t size);

/* Parses `s` (IN, may be NULL): one or more ASCII digits and nothing else
 * (no sign, no white space), whose value fits an int64_t and lies in
 * lo..hi, into *out (OUT). Returns false, *out untouched, otherwise. The
 * one rule for numbers in requests (allotd's query and path parameters,
 * the agent's log endpoint). */
bool allot_parse_num(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* Overwrites, in place, the value of option `opt` ("--token") in
 * argv[0..argc) ("--token VALUE" or "--token=VALUE"; none after "--") with
 * '*', so that other users no longer read it in /proc/PID/cmdline. Call it
 * once the options are parsed into copies. Returns how many values it hid. */
int allot_argv_hide(int argc, char **argv, const char *opt);

/* The most CIDRs a tenant network's egress allow list holds: allotd
 * refuses a longer one, the agents apply as many (one limit, both sides). */
#define ALLOT_NET_MAX_ALLOW 64

/* Grows a dynamic array so that it holds at least `need` elements of
 * `elem` bytes (elem > 0). *arr and *cap are updated on success; returns 0
 * or ALLOT_ENOMEM (leaving *arr and *cap untouched), also when need * elem
 * would not fit in a size_t. */
int allot_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* Milliseconds of CLOCK_MONOTONIC: for intervals and deadlines (never a
 * time of day). */
int64_t allot_mono_ms(void);

/* 64-bit FNV-1a of `len` bytes, continuing from `h` (start with
 * ALLOT_FNV1A_INIT): stable across runs and builds (names, logs). */
#define ALLOT_FNV1A_INIT 0xcbf29ce484222325ULL
uint64_t allot_fnv1a(uint64_t h, const void *data, size_t len);

/* An index from names to positions in an array that holds the names
 * (open addressing on FNV-1a): it keeps only the positions and asks
 * name(ctx, i) for the name at position i. Zero-initialised it is empty;
 * allot_index_free releases it. Lookups cost O(1) on average, whatever
 * the number of names (node names, tenant paths). */
struct allot_index {
    int32_t *tab; /* cap slots: a position, or -1 */
    size_t cap;   /* a power of two, or 0 */
    size_t n;     /* positions held */
};
typedef const char *(*allot_index_name_fn)(const void *ctx, int i);

/* The position whose name is `name` (or name[0..len)), or -1. */
int allot_index_find(const struct allot_index *x, const char *name, allot_index_name_fn fn,
                     const void *ctx);
int allot_index_find_n(const struct allot_index *x, const char *name, size_t len,
                       allot_index_name_fn fn, const void *ctx);
/* Makes room for n positions in all, so that adding up to n cannot fail.
 * 0 or ALLOT_ENOMEM (the index unchanged). */
int allot_index_reserve(struct allot_index *x, size_t n, allot_index_name_fn fn, const void *ctx);
/* Adds position i (>= 0), whose name the index must not hold yet. Returns
 * 0 or ALLOT_ENOMEM (the index unchanged; never after a reserve that made
 * room for it). */
int allot_index_add(struct allot_index *x, int i, allot_index_name_fn fn, const void *ctx);
/* Holds positions 0..n-1 from now on (after the array lost some). 0 or
 * ALLOT_ENOMEM (the index unchanged). */
int allot_index_rebuild(struct allot_index *x, int n, allot_index_name_fn fn, const void *ctx);
/* Takes position i out (its name still readable through fn); allocates
 * nothing, so it cannot fail. */
void allot_index_remove(struct allot_index *x, int i, allot_index_name_fn fn, const void *ctx);
void allot_index_free(struct allot_index *x);

/* 64-bit FNV-1a style mixing helpers for hashing state. */
static inline uint64_t allot_hash_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

/* Whether a job's environment may not set `name`: the variables through
 * which a node enforces a GPU share (the shim's ALLOT_GPU_* and
 * ALLOT_SHIM_* but its log, ALLOT_CUDA_LIB, ALLOT_NVML_LIB, MPS's CUDA_MPS_*, and
 * LD_PRELOAD, which loads the shim). allotd refuses them at submit, the
 * agent drops them. */
bool allot_env_reserved(const char *name);
/* Whether the agent sets `name` for every task whatever the job's
 * environment says (src/agent/task.c, docs/agent.md): PATH, HOME, USER,
 * LOGNAME, the job's ALLOT_* identity (ALLOT_SERVER excepted: a job may
 * name its own), its devices and RDMA VFs. allotd refuses a new job that
 * sets one (it would be overridden without a word). */
bool allot_env_node_set(const char *name);

/* The node-name rule (agents register under it; job node lists and host
 * lists name nodes by it): 1..ALLOT_NODE_NAME_MAX bytes of
 * ALLOT_NODE_NAME_CHARS. */
#define ALLOT_NODE_NAME_MAX   63
#define ALLOT_NODE_NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"
bool allot_node_name_ok(const char *s);

/* Whether `s` may name a job's image: a folder of an agent's --image-dir,
 * 1..128 bytes of [A-Za-z0-9._:-], not "." and without "..". allotd
 * refuses other names at submit; the agent checks again. */
bool allot_image_name_ok(const char *s);

/* The signals a user may send a running job (allot signal, a job's
 * warning before its time limit), as messages name them; the table in
 * common.c (user_signals) holds the same. Returns the number of `s` (a
 * name with or without "SIG", any case, or its number), or 0 when it is
 * none of them. */
#define ALLOT_SIGNAL_NAMES "HUP, INT, QUIT, ABRT, KILL, USR1, USR2, ALRM, TERM, CONT, STOP or TSTP"
int allot_signal_parse(const char *s);
/* The name of such a signal without "SIG" ("USR1"), or NULL. */
const char *allot_signal_name(int sig);
/* Whether `name` may name a job's environment variable: 1..256 bytes of
 * printable ASCII without '=' (as Kubernetes asks). A name with '=' would
 * smuggle another variable into "NAME=VALUE" (LD_PRELOAD=... of the job's
 * choosing). */
bool allot_env_name_ok(const char *name);

/* Whether u (at most 256 bytes) is a base URL another path may be
 * appended to: http:// or https://, a host with no user part, and no
 * query, fragment, backslash, space or control character (any of which
 * would turn the appended path into something else). The one rule for an
 * agent's log URL, in allotd and in allot-agent --advertise. */
bool allot_url_base_ok(const char *u);

/* Deterministic PRNG (splitmix64 seeded xoshiro256**), owned by the caller. */
struct allot_rng {
    uint64_t s[4];
};
void allot_rng_seed(struct allot_rng *r, uint64_t seed);
uint64_t allot_rng_next(struct allot_rng *r);
/* Uniform integer in [0, n) without modulo bias; 0 when n == 0. */
uint64_t allot_rng_below(struct allot_rng *r, uint64_t n);

/* ---- several allotd (docs/ha.md): the clients' one rule --------------- */

/* Splits a comma-separated list of allotd URLs into *out (*n of them,
 * allocated; allot_server_list_free): each without trailing slashes, with
 * http:// in front when it names no scheme. ALLOT_EINVAL for an empty or
 * overlong piece or a scheme other than http and https (nothing is
 * returned), ALLOT_ENOMEM. */
int allot_server_list(const char *list, char ***out, int *n);
void allot_server_list_free(char **urls, int n);

/* Whether a client that reached `from` may follow a standby to `leader`:
 * an http(s) URL shorter than len without blanks, and never from https to
 * http (the token would travel in the clear). When it may, the URL without
 * trailing slashes is copied into out. */
bool allot_leader_url(const char *from, const char *leader, char *out, size_t len);

/* ---- host lists (allot submit -w/--nodelist, -x/--exclude) ------------ */

/* Expands a Slurm host list ("gpu[01-04,07],cpu-a,rack[1-2]-n[1-2]") into
 * names. Items are separated by commas outside brackets; an item is text
 * with zero or more groups "[...]" of comma-separated numbers or ranges
 * LO-HI (decimal, at most 9 digits, LO <= HI). A number whose range's LO is
 * written with leading zeros is zero-padded to LO's width (Slurm's rule:
 * "gpu[08-10]" gives gpu08 gpu09 gpu10). Several groups in an item give
 * their product, the first group outermost. Names come in the order
 * written, a repeated one only the first time; each must be 1..63 bytes of
 * [A-Za-z0-9._-]. White space is refused anywhere.
 *
 * s (IN, may be NULL) is the list. On success *names (OUT) is an allocated
 * array of *n (OUT, >= 1) allocated names, owned by the caller, released
 * with allot_hostlist_free(), and err is "". Returns 0, ALLOT_EINVAL (an
 * empty list or item, unbalanced or nested brackets, an empty group, a bad
 * number or range, a bad or overlong name, more than ALLOT_HOSTLIST_MAX
 * names as written, duplicates included: counted before any is made), with
 * a one-line message in err[0..errlen) naming the problem and quoting the
 * start of the item, or ALLOT_ENOMEM; on an error *names is NULL, *n is 0
 * and nothing is held. err may be NULL when errlen is 0. */
#define ALLOT_HOSTLIST_MAX 4096 /* names one list may expand to */
int allot_hostlist_expand(const char *s, char ***names, int *n, char *err, size_t errlen);
/* Releases what allot_hostlist_expand() returned; accepts NULL. */
void allot_hostlist_free(char **names, int n);
/* The names as a short host list, as Slurm prints one: runs of names
 * that differ only in a trailing number of the same width (or, unpadded,
 * any width) become PREFIX[A-B,C]; the order is kept. Writes at most
 * len bytes into buf (always terminated) and returns the length the
 * whole list needs (as snprintf). allot_hostlist_expand of it gives the
 * names back (when they are distinct). */
size_t allot_hostlist_compress(const char *const *names, int n, char *buf, size_t len);

#endif

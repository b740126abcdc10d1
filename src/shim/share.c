/*
 * Weighted fair sharing of one GPU between jobs (docs/shim.md, "The
 * compute share"). A job's rate is its part of the GPU's time under
 * weighted max-min fairness (water-filling) among the jobs that wanted
 * time in the last SHIM_SHARE_ACTIVE_NS: each active job gets the GPU in
 * proportion to its weight, none more than its ceiling, and what a capped
 * job leaves goes to the others by weight. A job alone gets its ceiling.
 *
 * Who may say what. The agent (root) owns the share folder
 * (ALLOT_GPU_SHARE_DIR) and one folder per GPU in it, gpu-<UUID hex>, that
 * no job can write. When a task starts, the agent puts two files there,
 * named by the task (ALLOT_GPU_SHARE_ID):
 *
 *   ID.job   the agent's: "weight W", "ceiling C", "uid U" lines; owned by
 *            the folder's owner, written by nobody else
 *   ID.seen  the job's: owned by uid U, empty; its modification time is
 *            when the job last wanted GPU time (utimensat, set to now)
 *
 * and removes them when the task ends. So a job can only say that it wants
 * time (its own file's time) and only with the weight and ceiling the agent
 * gave it; a process with no entry can say nothing. An entry counts only
 * when both files pass the checks below (owner, not writable by group or
 * others, regular files, no links followed); anything else in the folder
 * is ignored. Weights, ceilings and activity are not secrets: every job on
 * the node may read them.
 *
 * Nothing is mapped and no descriptor is kept: the files of other jobs are
 * read with lstat (a truncated or replaced file cannot fault this process,
 * and a program that closes descriptors it does not own cannot make the
 * shim write into one of its files); the folder and the others' .seen
 * files are looked at every SHIM_SHARE_TOUCH_NS at most, the .job files
 * read when the folder changes (its mtime) or once a second. There is no
 * lock: a job
 * that dies simply stops touching its file and falls out of the active
 * window.
 *
 * Caller: limiter.c, under its mutex.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/* The folder is read again at least this often, whatever its mtime says
 * (two changes within one tick of the file system's clock share one). */
#define SHIM_SHARE_RESCAN_NS 1000000000ull

struct share_peer {
    char id[SHIM_SHARE_ID_MAX + 1];
    uint32_t weight, ceiling;
    uid_t uid; /* the owner the agent gave its .seen file */
    bool on;   /* wanted time at the last look (active) */
};

struct shim_share {
    char dir[4096];   /* this GPU's folder in the share folder */
    uid_t trusted;    /* the share folder's owner: the agent (or this user) */
    bool mine;        /* peer[0] is this job's entry; false: none (the limit is hard) */
    int n;            /* entries in peer[] */
    bool touch_ok;    /* this job's .seen file could be touched */
    bool warned;      /* the lost entry was reported once */
    uint64_t scanned; /* when the folder was last read (CLOCK_REALTIME ns) */
    uint64_t touched; /* when this job's file was last touched */
    uint64_t looked;  /* when the folder and the others' .seen were last looked at */
    struct timespec mtime;
    char id[SHIM_SHARE_ID_MAX + 1];
    struct share_peer peer[SHIM_SHARE_JOBS];
};

uint64_t shim_share_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether id can name an entry: 1-63 of [A-Za-z0-9._-], not starting
 * with a dot. */
static bool share_id_ok(const char *id)
{
    size_t n = 0;

    if (!id || !*id || *id == '.')
        return false;
    for (; id[n]; n++) {
        char c = id[n];

        if (n == SHIM_SHARE_ID_MAX || !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                                        (c >= 'A' && c <= 'Z') || c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

/* A folder the agent owns: a directory, owned by trusted, that nobody
 * else may write. */
static bool folder_ok(const struct stat *st, uid_t trusted)
{
    return S_ISDIR(st->st_mode) && st->st_uid == trusted && !(st->st_mode & 022);
}

/* Parses an agent's .job text into p. False when a field is missing or
 * out of range. */
static bool parse_job(char *text, struct share_peer *p)
{
    bool have_w = false, have_c = false, have_u = false;
    char *line = text, *next;

    for (; line && *line; line = next) {
        unsigned long v;
        char *end, *sp;

        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        sp = strchr(line, ' ');
        if (!sp || sp[1] < '0' || sp[1] > '9')
            continue;
        *sp = '\0';
        errno = 0;
        v = strtoul(sp + 1, &end, 10);
        if (*end || errno)
            return false;
        if (!strcmp(line, "weight") && v >= 1 && v <= ALLOT_SHIM_SHARE_WEIGHT_MAX) {
            p->weight = (uint32_t)v;
            have_w = true;
        } else if (!strcmp(line, "ceiling") && v >= 1 && v <= 100) {
            p->ceiling = (uint32_t)v;
            have_c = true;
        } else if (!strcmp(line, "uid") && v <= 0xfffffffeul) {
            p->uid = (uid_t)v;
            have_u = true;
        } else if (!strcmp(line, "weight") || !strcmp(line, "ceiling") || !strcmp(line, "uid")) {
            return false;
        }
    }
    return have_w && have_c && have_u;
}

/* Reads the entry whose .job file is name (ID.job) into p: true when the
 * agent wrote it (a regular file of the trusted owner that nobody else
 * may write) and it parses. */
static bool read_job(const struct shim_share *s, const char *name, struct share_peer *p)
{
    char path[4400], text[256];
    size_t len = strlen(name) - 4; /* less ".job" */
    struct stat st;
    ssize_t got;
    int fd;

    if (len > SHIM_SHARE_ID_MAX)
        return false;
    memcpy(p->id, name, len);
    p->id[len] = '\0';
    if (!share_id_ok(p->id) ||
        (size_t)snprintf(path, sizeof(path), "%s/%s", s->dir, name) >= sizeof(path))
        return false;
    /* O_NONBLOCK: no lease can hold the open; O_NOFOLLOW: not a link */
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != s->trusted || (st.st_mode & 022) ||
        st.st_size <= 0 || st.st_size >= (off_t)sizeof(text)) {
        close(fd);
        return false;
    }
    got = pread(fd, text, sizeof(text) - 1, 0);
    close(fd);
    if (got <= 0)
        return false;
    text[got] = '\0';
    return parse_job(text, p);
}

/* Reads the GPU's folder: every entry the agent wrote, this job's first.
 * Keeps the old list when the folder cannot be read. */
static void scan(struct shim_share *s, uint64_t now)
{
    struct share_peer p;
    struct dirent *e;
    DIR *d;

    s->scanned = now;
    d = opendir(s->dir);
    if (!d)
        return;
    s->n = 0;
    s->mine = false;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);

        if (len <= 4 || strcmp(e->d_name + len - 4, ".job") != 0 || !read_job(s, e->d_name, &p))
            continue;
        if (!strcmp(p.id, s->id)) {
            /* this job's entry always has a place (the first) */
            if (s->n == SHIM_SHARE_JOBS)
                s->n--;
            s->peer[s->n] = s->peer[0];
            s->peer[0] = p;
            s->mine = true;
            s->n++;
        } else if (s->n < SHIM_SHARE_JOBS) {
            s->peer[s->n++] = p;
        }
    }
    closedir(d);
}

/* Rereads the folder when it changed, or now and then. */
static void refresh(struct shim_share *s, uint64_t now)
{
    struct stat st;

    if (lstat(s->dir, &st) || !folder_ok(&st, s->trusted)) {
        s->n = 0; /* not (or no longer) the agent's: nobody counts */
        s->mine = false;
        s->scanned = 0; /* read it again once it is */
        return;
    }
    if (s->scanned && now >= s->scanned && now - s->scanned < SHIM_SHARE_RESCAN_NS &&
        st.st_mtim.tv_sec == s->mtime.tv_sec && st.st_mtim.tv_nsec == s->mtime.tv_nsec)
        return;
    s->mtime = st.st_mtim;
    scan(s, now);
}

struct shim_share *shim_share_open(const char *dir, const char *hex, const char *id)
{
    struct shim_share *s;
    struct stat st;

    if (!share_id_ok(id)) {
        shim_warn("ALLOT_GPU_SHARE_ID=%s is not an entry name: the limit is hard", id ? id : "");
        return NULL;
    }
    /* the share folder: the agent's (root), or in a test this user's */
    if (stat(dir, &st) || !(st.st_uid == 0 || st.st_uid == geteuid()) ||
        !folder_ok(&st, st.st_uid)) {
        shim_warn("GPU share folder %s is not the agent's (a folder only its owner, root or "
                  "this user, may write): the limit is hard",
                  dir);
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        shim_warn("GPU share folder %s unusable, out of memory: the limit is hard", dir);
        return NULL;
    }
    s->trusted = st.st_uid;
    s->touch_ok = true;
    memcpy(s->id, id, strlen(id) + 1);
    if ((size_t)snprintf(s->dir, sizeof(s->dir), "%s/gpu-%s", dir, hex) >= sizeof(s->dir)) {
        free(s);
        return NULL;
    }
    refresh(s, shim_share_now());
    if (!s->mine) {
        shim_warn("no entry %s of the agent's in %s: the limit is hard", id, s->dir);
        free(s);
        return NULL;
    }
    return s;
}

void shim_share_close(struct shim_share *s)
{
    free(s);
}

void shim_share_touch(struct shim_share *s, uint64_t now)
{
    char path[4400];

    if (!s->touch_ok || (s->touched && now >= s->touched && now - s->touched < SHIM_SHARE_TOUCH_NS))
        return;
    s->touched = now;
    if ((size_t)snprintf(path, sizeof(path), "%s/%s.seen", s->dir, s->id) < sizeof(path) &&
        utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW) == 0)
        return;
    /* not this user's file (another task's ID), or gone: this job cannot
     * tell the others it wants time, so it takes none of theirs */
    shim_warn("cannot mark %s as wanting GPU time: the limit is hard", path);
    s->touch_ok = false;
}

/* Whether entry p wanted time within the active window: its .seen file
 * is a regular file of the uid the agent named, not writable by others,
 * touched recently (a time ahead of ours counts: another clock read). */
static bool active(const struct shim_share *s, const struct share_peer *p, uint64_t now)
{
    char path[4400];
    struct stat st;
    uint64_t seen;

    if ((size_t)snprintf(path, sizeof(path), "%s/%s.seen", s->dir, p->id) >= sizeof(path) ||
        lstat(path, &st) || !S_ISREG(st.st_mode) || st.st_uid != p->uid || (st.st_mode & 022) ||
        st.st_mtim.tv_sec < 0)
        return false;
    seen = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
    return seen >= now || now - seen <= SHIM_SHARE_ACTIVE_NS;
}

void shim_share_fill(int n, const uint32_t *weight, const uint32_t *ceiling, double *out)
{
    bool fixed[SHIM_SHARE_JOBS] = {false};
    double left = 100.0;

    for (int i = 0; i < n; i++)
        out[i] = 0;
    /* each round caps at least one job, or settles them all */
    for (int round = 0; round < n; round++) {
        double wsum = 0;
        bool capped = false;

        for (int i = 0; i < n; i++)
            if (!fixed[i])
                wsum += weight[i] ? weight[i] : 1;
        if (wsum <= 0 || left <= 0)
            break;
        for (int i = 0; i < n; i++) {
            double fair = left * (weight[i] ? weight[i] : 1) / wsum;

            if (!fixed[i] && ceiling[i] <= fair) {
                out[i] = ceiling[i];
                fixed[i] = true;
                capped = true;
            }
        }
        if (capped) {
            left = 100.0;
            for (int i = 0; i < n; i++)
                if (fixed[i])
                    left -= out[i];
            continue;
        }
        for (int i = 0; i < n; i++)
            if (!fixed[i])
                out[i] = left * (weight[i] ? weight[i] : 1) / wsum;
        break;
    }
}

int shim_share_rate(struct shim_share *s, uint64_t now)
{
    uint32_t w[SHIM_SHARE_JOBS], c[SHIM_SHARE_JOBS];
    double out[SHIM_SHARE_JOBS] = {0};
    int n = 0;

    /* the folder and the others' files, at most every SHIM_SHARE_TOUCH_NS
     * (the rate is asked for every few ms; the active window is 200 ms) */
    if (!s->looked || now < s->looked || now - s->looked >= SHIM_SHARE_TOUCH_NS) {
        refresh(s, now);
        for (int k = 1; k < s->n; k++)
            s->peer[k].on = active(s, &s->peer[k], now);
        s->looked = now;
    }
    if (!s->mine || !s->touch_ok) {
        /* the agent took the entry away (the task ended), or this job
         * cannot mark itself: it keeps to its limit */
        if (!s->warned)
            shim_warn("no usable entry %s in %s: the limit is hard", s->id, s->dir);
        s->warned = true;
        return 0;
    }
    /* peer[0], this job, asks, so it wants time now: it comes first */
    for (int k = 0; k < s->n; k++) {
        if (k > 0 && !s->peer[k].on)
            continue;
        w[n] = s->peer[k].weight;
        c[n++] = s->peer[k].ceiling;
    }
    shim_share_fill(n, w, c, out);
    return out[0] < 1 ? 1 : (int)(out[0] + 0.5);
}
